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

/// A kit piece that turns a chunk of 8 codes (vector<Nxi32>, or i32 when N
/// is 1) and a scale (i8) into 8 bf16 (vector<4xi32>).
using Dequantize = Value (*)(OpBuilder &, Location, Value, Value);

/// `dequantize(codes: memref<?xi32>, scales: memref<?xi8>, out:
/// memref<?xi32>)`: chunk i's 8 codes (words N i .. N i + N - 1) times
/// scale i, as 8 bf16 (words 4i .. 4i+3).
OwningOpRef<ModuleOp> dequantizeModule(MLIRContext *context,
                                       Dequantize dequantize,
                                       int64_t wordsPerChunk) {
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
        SmallVector<Value> words;
        for (int64_t w = 0; w < wordsPerChunk; ++w)
          words.push_back(
              memref::LoadOp::create(b, loc, in, at(wordsPerChunk, w)));
        Value chunk =
            wordsPerChunk == 1
                ? words[0]
                : vector::FromElementsOp::create(
                      b, loc, VectorType::get({wordsPerChunk}, b.getI32Type()),
                      words)
                      .getResult();
        Value scale = memref::LoadOp::create(b, loc, scales, i);
        Value values = dequantize(b, loc, chunk, scale);
        for (int64_t w = 0; w < 4; ++w)
          memref::StoreOp::create(b, loc,
                                  vector::ExtractOp::create(b, loc, values, w),
                                  out, at(4, w));
        scf::YieldOp::create(b, loc);
      });
  func::ReturnOp::create(b, loc);
  return module;
}

using Fn = void(rt::Memref<uint32_t, 1> *, rt::Memref<uint8_t, 1> *,
                rt::Memref<uint32_t, 1> *);

/// Runs `piece` on the host over `codes` (8 per chunk, packed as the piece
/// reads them) with a scale per chunk; the bf16 bits of the 8 values of
/// each chunk, in order.
std::vector<uint16_t> runOnHost(Dequantize piece, int64_t wordsPerChunk,
                                std::vector<uint32_t> in,
                                std::vector<uint8_t> scales) {
  auto context = jit::createKernelContext();
  OwningOpRef<ModuleOp> module =
      dequantizeModule(context.get(), piece, wordsPerChunk);
  std::string error;
  auto compiled =
      jit::CpuJit::compile(std::move(context), std::move(module), error);
  EXPECT_TRUE(compiled) << error;
  if (!compiled)
    return {};
  auto *dequantize = reinterpret_cast<Fn *>(compiled->lookup("dequantize"));
  EXPECT_TRUE(dequantize);
  if (!dequantize)
    return {};
  std::vector<uint32_t> out(scales.size() * 4, 0xDEAD);
  auto inView = rt::view<uint32_t, 1>(in.data(), {int64_t(in.size())});
  auto scaleView =
      rt::view<uint8_t, 1>(scales.data(), {int64_t(scales.size())});
  auto outView = rt::view<uint32_t, 1>(out.data(), {int64_t(out.size())});
  dequantize(&inView, &scaleView, &outView);
  std::vector<uint16_t> values(out.size() * 2);
  std::memcpy(values.data(), out.data(), values.size() * 2);
  return values;
}

// Every e4m3 code but the NaNs at every scale whose products are normal
// bf16 values (2^-117 .. 2^7; cache rows take scales of at least 2^-22,
// the encoder's floor over 448): the bf16 bits of the f32 product. (Below
// 2^-117 the smallest products are bf16 subnormals, which the host's bf16
// multiplication flushes.)
TEST(DeviceKit, DequantizesE4M3LikeTheReference) {
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
  std::vector<uint32_t> in(codes.size() / 4);
  std::memcpy(in.data(), codes.data(), codes.size());
  std::vector<uint16_t> values =
      runOnHost(v4a::gpu::dequantizeE4M3x8, 2, in, scales);
  ASSERT_EQ(values.size(), codes.size());
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

// Every e2m1 code in every place of a chunk at every scale whose products
// are normal bf16 values and finite (2^-125 .. 2^125).
TEST(DeviceKit, DequantizesE2M1LikeTheReference) {
  constexpr int kFirstScale = 2, kScales = 253 - kFirstScale;
  std::vector<uint8_t> nibbles, scales;
  for (int s = 0; s < kScales; ++s)
    for (int g = 0; g < 16; ++g) {
      // Chunk g holds codes g .. g + 7 (mod 16): each code meets each place.
      scales.push_back(static_cast<uint8_t>(kFirstScale + s));
      for (int v = 0; v < 8; ++v)
        nibbles.push_back(static_cast<uint8_t>((g + v + s) % 16));
    }
  std::vector<uint32_t> in(nibbles.size() / 8, 0);
  for (size_t i = 0; i < nibbles.size(); ++i)
    in[i / 8] |= uint32_t(nibbles[i]) << (4 * (i % 8));
  std::vector<uint16_t> values =
      runOnHost(v4a::gpu::dequantizeE2M1x8, 1, in, scales);
  ASSERT_EQ(values.size(), nibbles.size());
  for (size_t i = 0; i < nibbles.size(); ++i) {
    // Value v of a chunk is half v / 4 of its word v % 4.
    size_t v = i % 8, at = i - v + 2 * (v % 4) + v / 4;
    float expected =
        num::fromE2M1Bits(nibbles[i]) * num::fromUE8M0Bits(scales[i / 8]);
    ASSERT_EQ(values[at], num::toBF16Bits(expected))
        << "code " << int(nibbles[i]) << " place " << i % 8 << " scale "
        << int(scales[i / 8]);
  }
}

} // namespace
