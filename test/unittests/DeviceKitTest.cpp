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
#include "passes/Conversion/V4AToCPU/LoopEmitter.h"
#include "passes/Conversion/V4AToGPU/Warpgroup.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace mlir;
using namespace v4a;

namespace {

/// An empty host function `name` taking `arguments` (memrefs, called
/// through their C interface) in `module`; its entry block, where `b` now
/// builds.
Block *hostFunction(OpBuilder &b, ModuleOp module, StringRef name,
                    TypeRange arguments) {
  Location loc = b.getUnknownLoc();
  b.setInsertionPointToEnd(module.getBody());
  auto function =
      func::FuncOp::create(b, loc, name, b.getFunctionType(arguments, {}));
  function->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block *body = function.addEntryBlock();
  b.setInsertionPointToStart(body);
  return body;
}

/// `module` compiled for the host, and its function `name` (null, with a
/// test failure, where either fails).
struct OnHost {
  std::unique_ptr<jit::CpuJit> compiled;
  void *function = nullptr;
};
OnHost compileOnHost(std::unique_ptr<MLIRContext> context,
                     OwningOpRef<ModuleOp> module, StringRef name) {
  std::string error;
  OnHost host;
  host.compiled =
      jit::CpuJit::compile(std::move(context), std::move(module), error);
  EXPECT_TRUE(host.compiled) << error;
  if (host.compiled)
    host.function = host.compiled->lookup(name);
  EXPECT_TRUE(host.function) << name.str();
  return host;
}

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
  auto words = MemRefType::get({ShapedType::kDynamic}, b.getI32Type());
  auto bytes = MemRefType::get({ShapedType::kDynamic}, b.getI8Type());
  Block *body = hostFunction(b, *module, "dequantize", {words, bytes, words});
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
  OnHost host =
      compileOnHost(std::move(context), std::move(module), "dequantize");
  if (!host.function)
    return {};
  auto *dequantize = reinterpret_cast<Fn *>(host.function);
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

/// `round(in: memref<?xf32>, e4m3: memref<?xf32>, e2m1: memref<?xf32>)`:
/// each value rounded by the emitter's minifloat rounding to both formats.
OwningOpRef<ModuleOp> roundingModule(MLIRContext *context) {
  OpBuilder b(context);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  auto floats = MemRefType::get({ShapedType::kDynamic}, b.getF32Type());
  Block *body = hostFunction(b, *module, "round", {floats, floats, floats});
  Value in = body->getArgument(0);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value count = memref::DimOp::create(b, loc, in, 0);
  scf::ForOp::create(b, loc, zero, count, one, ValueRange{},
                     [&](OpBuilder &, Location, Value i, ValueRange) {
                       cpu::LoopEmitter e(b, loc);
                       Value x = memref::LoadOp::create(b, loc, in, i);
                       memref::StoreOp::create(
                           b, loc, e.roundToMinifloat(x, 3, -6, num::kE4M3Max),
                           body->getArgument(1), i);
                       memref::StoreOp::create(
                           b, loc, e.roundToMinifloat(x, 1, 0, num::kE2M1Max),
                           body->getArgument(2), i);
                       scf::YieldOp::create(b, loc);
                     });
  func::ReturnOp::create(b, loc);
  return module;
}

/// The f32 values a minifloat rounding must get right: a sweep over every
/// sign and exponent (every 1021st bit pattern, a prime step, so the low
/// mantissa bits vary too), and each grid point of both formats with the
/// midpoints beside it and one f32 step either side of those (ties go to
/// the even neighbour).
std::vector<float> roundingInputs() {
  std::vector<float> inputs;
  for (uint64_t bits = 0; bits < (1ull << 32); bits += 1021)
    inputs.push_back(num::detail::floatOf(static_cast<uint32_t>(bits)));
  for (float infinity : {INFINITY, -INFINITY})
    inputs.push_back(infinity);
  std::vector<float> grid;
  for (int code = 0; code < 0x7F; ++code)
    grid.push_back(num::fromE4M3Bits(static_cast<uint8_t>(code)));
  for (int code = 0; code < 8; ++code)
    grid.push_back(num::fromE2M1Bits(static_cast<uint8_t>(code)));
  std::sort(grid.begin(), grid.end());
  for (size_t g = 0; g + 1 < grid.size(); ++g) {
    float mid = (grid[g] + grid[g + 1]) / 2;
    for (float x : {grid[g], mid, std::nextafter(mid, 0.0f),
                    std::nextafter(mid, INFINITY)})
      for (float sign : {1.0f, -1.0f})
        inputs.push_back(sign * x);
  }
  return inputs;
}

using RoundFn = void(rt::Memref<float, 1> *, rt::Memref<float, 1> *,
                     rt::Memref<float, 1> *);

// The emitter's rounding (every e4m3 and e2m1 quantization of the CPU and
// GPU lowerings) against the reference's: the same bits for every value,
// NaN staying NaN, magnitudes at or past the largest value saturating.
TEST(DeviceKit, RoundsToMinifloatsLikeTheReference) {
  auto context = jit::createKernelContext();
  OwningOpRef<ModuleOp> module = roundingModule(context.get());
  OnHost host = compileOnHost(std::move(context), std::move(module), "round");
  ASSERT_TRUE(host.function);
  auto *round = reinterpret_cast<RoundFn *>(host.function);
  std::vector<float> in = roundingInputs();
  std::vector<float> e4m3(in.size(), 1.0f), e2m1(in.size(), 1.0f);
  auto size = static_cast<int64_t>(in.size());
  auto inView = rt::view<float, 1>(in.data(), {size});
  auto e4m3View = rt::view<float, 1>(e4m3.data(), {size});
  auto e2m1View = rt::view<float, 1>(e2m1.data(), {size});
  round(&inView, &e4m3View, &e2m1View);
  auto same = [](float got, float expected) {
    return std::isnan(expected)
               ? std::isnan(got)
               : num::detail::bitsOf(got) == num::detail::bitsOf(expected);
  };
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_TRUE(same(e4m3[i], num::roundE4M3(in[i])))
        << "e4m3 of " << in[i] << " (0x" << std::hex
        << num::detail::bitsOf(in[i]) << "): " << e4m3[i];
    ASSERT_TRUE(same(e2m1[i], num::roundE2M1(in[i])))
        << "e2m1 of " << in[i] << " (0x" << std::hex
        << num::detail::bitsOf(in[i]) << "): " << e2m1[i];
  }
}

/// `place(rows: memref<?xi64>, chunks: memref<?xi64>, out: memref<?xi64>)`:
/// the swizzled byte offset of each (row, chunk) in a tile `atoms` atoms
/// wide, as the kit builds it.
OwningOpRef<ModuleOp> swizzleModule(MLIRContext *context, int64_t atoms) {
  OpBuilder b(context);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  auto longs = MemRefType::get({ShapedType::kDynamic}, b.getI64Type());
  Block *body = hostFunction(b, *module, "place", {longs, longs, longs});
  auto c = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  auto index = [&](Value v) {
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), v).getResult();
  };
  Value rows = body->getArgument(0), chunks = body->getArgument(1),
        out = body->getArgument(2);
  scf::ForOp::create(
      b, loc, c(0), memref::DimOp::create(b, loc, rows, 0), c(1), ValueRange{},
      [&](OpBuilder &, Location, Value i, ValueRange) {
        Value row = index(memref::LoadOp::create(b, loc, rows, i));
        Value chunk = index(memref::LoadOp::create(b, loc, chunks, i));
        Value offset = v4a::gpu::swizzledOffset(b, loc, row, chunk, atoms);
        memref::StoreOp::create(
            b, loc, arith::IndexCastOp::create(b, loc, b.getI64Type(), offset),
            out, i);
        scf::YieldOp::create(b, loc);
      });
  func::ReturnOp::create(b, loc);
  return module;
}

using PlaceFn = void(rt::Memref<int64_t, 1> *, rt::Memref<int64_t, 1> *,
                     rt::Memref<int64_t, 1> *);

struct TileCopyShape {
  int64_t rows, rowChunks, threads, firstChunk, tileChunks;
};

/// Per copy of a thread of copyTileAsync over `shape` (copy i of thread t:
/// row (t / 8 + i * threads / 8) mod rows, chunk (t / 8 + i * threads / 8)
/// / rows * 8 + t mod 8 + firstChunk), how far its swizzled place is past
/// the thread's copy 0's, when that is the same for every thread; nullopt
/// for a copy where threads differ. Empty when the host could not run it.
std::vector<std::optional<int64_t>> stepsOf(const TileCopyShape &shape) {
  auto context = jit::createKernelContext();
  OwningOpRef<ModuleOp> module =
      swizzleModule(context.get(), shape.tileChunks / 8);
  OnHost host = compileOnHost(std::move(context), std::move(module), "place");
  if (!host.function)
    return {};
  auto *place = reinterpret_cast<PlaceFn *>(host.function);
  int64_t copies = shape.rows * shape.rowChunks / shape.threads;
  std::vector<int64_t> rows, chunks;
  for (int64_t t = 0; t < shape.threads; ++t)
    for (int64_t i = 0; i < copies; ++i) {
      int64_t rest = t / 8 + i * shape.threads / 8;
      rows.push_back(rest % shape.rows);
      chunks.push_back(rest / shape.rows * 8 + t % 8 + shape.firstChunk);
    }
  auto size = static_cast<int64_t>(rows.size());
  std::vector<int64_t> offsets(rows.size(), -1);
  auto rowView = rt::view<int64_t, 1>(rows.data(), {size});
  auto chunkView = rt::view<int64_t, 1>(chunks.data(), {size});
  auto outView = rt::view<int64_t, 1>(offsets.data(), {size});
  place(&rowView, &chunkView, &outView);
  std::vector<std::optional<int64_t>> steps;
  for (int64_t i = 0; i < copies; ++i) {
    std::optional<int64_t> step = offsets[i] - offsets[0];
    for (int64_t t = 1; t < shape.threads; ++t)
      if (offsets[t * copies + i] - offsets[t * copies] != *step)
        step = std::nullopt;
    steps.push_back(step);
  }
  return steps;
}

// The attention's tiles (the copy warpgroup's halves of a stage: 64 rows,
// 32 of 64 chunks, 128 threads; the math warpgroups' query tile: 256
// threads), a wider row (72 chunks: head width 576) and a wider block:
// every copy lands the same distance past each thread's first, and
// tileCopyStep says how far.
TEST(DeviceKit, TileCopiesLandAConstantPastTheFirst) {
  for (TileCopyShape shape :
       {TileCopyShape{64, 32, 128, 0, 64}, TileCopyShape{64, 32, 128, 32, 64},
        TileCopyShape{64, 64, 256, 0, 64}, TileCopyShape{64, 72, 128, 0, 72},
        TileCopyShape{128, 64, 512, 0, 64}}) {
    std::vector<std::optional<int64_t>> steps = stepsOf(shape);
    ASSERT_EQ(static_cast<int64_t>(steps.size()),
              shape.rows * shape.rowChunks / shape.threads);
    for (size_t i = 0; i < steps.size(); ++i)
      EXPECT_EQ(steps[i],
                v4a::gpu::tileCopyStep(static_cast<int64_t>(i), shape.rows,
                                       shape.threads, shape.tileChunks))
          << "rows " << shape.rows << ", threads " << shape.threads << ", copy "
          << i;
  }
}

// Where a thread's rows move by less than an atom (32 threads: 4 rows a
// copy) or wrap past the tile's end (48 rows, steps of 32), threads land
// their copies different distances apart, and tileCopyStep claims none.
TEST(DeviceKit, TileCopyStepsAreClaimedOnlyWhereConstant) {
  for (TileCopyShape shape :
       {TileCopyShape{64, 32, 32, 0, 64}, TileCopyShape{48, 64, 256, 0, 64}}) {
    std::vector<std::optional<int64_t>> steps = stepsOf(shape);
    ASSERT_FALSE(steps.empty());
    EXPECT_TRUE(llvm::any_of(steps, [](auto step) { return !step; }))
        << "rows " << shape.rows << ", threads " << shape.threads;
    EXPECT_FALSE(
        v4a::gpu::tileCopyStep(1, shape.rows, shape.threads, shape.tileChunks));
  }
}

} // namespace
