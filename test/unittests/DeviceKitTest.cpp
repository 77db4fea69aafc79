//===- DeviceKitTest.cpp - the GPU kit's arithmetic, run on the host ------===//
//
// Pieces of the GPU kernel kit that are pure arithmetic (no threads, no
// memory spaces) are built into a host function, compiled in-process and
// compared with core/Numerics. What the host shows is their bit handling;
// the GPU validation covers the device's own instructions.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/V4AToGPU/DeviceKit.h"
#include "Memref.h"
#include "core/Numerics.h"
#include "lib/JIT/CpuJit.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace mlir;
using namespace v4a;

namespace {

/// `dequantize(bytes: memref<?xi32>, scales: memref<?xi8>, out:
/// memref<?xi32>)`: chunk i's 8 e4m3 bytes (words 2i, 2i+1) times scale i,
/// as 8 bf16 (words 4i .. 4i+3).
OwningOpRef<ModuleOp> dequantizeModule(MLIRContext *context) {
  OpBuilder b(context);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto words = MemRefType::get({ShapedType::kDynamic}, b.getI32Type());
  auto bytes = MemRefType::get({ShapedType::kDynamic}, b.getI8Type());
  auto function = func::FuncOp::create(
      b, loc, "dequantize", b.getFunctionType({words, bytes, words}, {}));
  function->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block *body = function.addEntryBlock();
  b.setInsertionPointToStart(body);
  auto c = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  Value in = body->getArgument(0), scales = body->getArgument(1),
        out = body->getArgument(2);
  Value chunks = memref::DimOp::create(b, loc, scales, 0);
  scf::ForOp::create(
      b, loc, c(0), chunks, c(1), ValueRange{},
      [&](OpBuilder &, Location, Value i, ValueRange) {
        auto at = [&](int64_t scale, int64_t offset) {
          return arith::AddIOp::create(
                     b, loc, arith::MulIOp::create(b, loc, i, c(scale)),
                     c(offset))
              .getResult();
        };
        Value chunk = vector::FromElementsOp::create(
            b, loc, VectorType::get({2}, b.getI32Type()),
            ValueRange{memref::LoadOp::create(b, loc, in, at(2, 0)),
                       memref::LoadOp::create(b, loc, in, at(2, 1))});
        Value scale = memref::LoadOp::create(b, loc, scales, i);
        Value values = v4a::gpu::dequantizeE4M3x8(b, loc, chunk, scale);
        for (int64_t w = 0; w < 4; ++w)
          memref::StoreOp::create(b, loc,
                                  vector::ExtractOp::create(b, loc, values, w),
                                  out, at(4, w));
        scf::YieldOp::create(b, loc);
      });
  func::ReturnOp::create(b, loc);
  return module;
}

// Every e4m3 code but the NaNs at every scale whose products are normal
// bf16 values (2^-117 .. 2^7; cache rows take scales of at least 2^-22,
// the encoder's floor over 448): the bf16 bits of the f32 product. (Below
// 2^-117 the smallest products are bf16 subnormals, which the host's bf16
// multiplication flushes.)
TEST(DeviceKit, DequantizesE4M3LikeTheReference) {
  auto context = jit::createKernelContext();
  OwningOpRef<ModuleOp> module = dequantizeModule(context.get());
  std::string error;
  auto compiled =
      jit::CpuJit::compile(std::move(context), std::move(module), error);
  ASSERT_TRUE(compiled) << error;
  using Fn = void(rt::Memref<uint32_t, 1> *, rt::Memref<uint8_t, 1> *,
                  rt::Memref<uint32_t, 1> *);
  auto *dequantize = reinterpret_cast<Fn *>(compiled->lookup("dequantize"));
  ASSERT_TRUE(dequantize);

  // Chunk (scale s, group g) holds codes 8g + s .. 8g + s + 7 (mod 256):
  // every code meets every place in a chunk.
  constexpr int kFirstScale = 10, kScales = 135 - kFirstScale, kGroups = 32;
  std::vector<uint8_t> codes(kScales * kGroups * 8), scales;
  for (int s = 0; s < kScales; ++s)
    for (int g = 0; g < kGroups; ++g) {
      scales.push_back(static_cast<uint8_t>(kFirstScale + s));
      for (int v = 0; v < 8; ++v)
        codes[(s * kGroups + g) * 8 + v] = static_cast<uint8_t>(8 * g + v + s);
    }
  std::vector<uint32_t> in(codes.size() / 4), out(codes.size() / 2, 0xDEAD);
  std::memcpy(in.data(), codes.data(), codes.size());
  auto inView = rt::view<uint32_t, 1>(in.data(), {int64_t(in.size())});
  auto scaleView =
      rt::view<uint8_t, 1>(scales.data(), {int64_t(scales.size())});
  auto outView = rt::view<uint32_t, 1>(out.data(), {int64_t(out.size())});
  dequantize(&inView, &scaleView, &outView);

  std::vector<uint16_t> values(out.size() * 2);
  std::memcpy(values.data(), out.data(), values.size() * 2);
  int checked = 0;
  for (size_t i = 0; i < codes.size(); ++i) {
    uint8_t code = codes[i], scale = scales[i / 8];
    if ((code & 0x7F) == 0x7F)
      continue; // NaN: never written by a saturating quantization
    float expected = num::fromE4M3Bits(code) * num::fromUE8M0Bits(scale);
    ASSERT_EQ(values[i], num::toBF16Bits(expected))
        << "code 0x" << std::hex << int(code) << " scale " << std::dec
        << int(scale);
    ++checked;
  }
  EXPECT_EQ(checked, kScales * 254);
}

} // namespace
