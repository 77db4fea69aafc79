//===- LowerToCPU.cpp - v4a ops to scalar loops over buffers --------------===//
//
// Lowers every compute op of the v4a dialect to scf loops over buffers
// (bufferization.to_buffer of the operands, a fresh buffer per result),
// with the exact rounding points of the specification: f32 accumulation,
// results rounded to the result element type, fp8/fp4 simulation by
// round-to-nearest-even on the format's grid. The tensor <-> buffer bridges
// are resolved by one-shot bufferization afterwards.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/V4A/IR/V4AOps.h"
#include "passes/Conversion/V4AToCPU/CacheRows.h"
#include "passes/Conversion/V4AToCPU/LoopEmitter.h"
#include "passes/Conversion/V4AToCPU/RoPEFrequencies.h"
#include "passes/Conversion/V4AToCPU/StepMetadata.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>

namespace v4a {
#define GEN_PASS_DEF_LOWERTOCPU
#include "passes/Passes.h.inc"
} // namespace v4a

using namespace mlir;
using namespace v4a;
using v4a::cpu::LoopEmitter;
using FP = arith::CmpFPredicate;
using IP = arith::CmpIPredicate;

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
// The official kernels' constants (core/Numerics.h has the reasons).
constexpr double kE4M3Max = 448.0, kE2M1Max = 6.0;
constexpr float kE4M3AmaxFloor = 1e-4f, kE2M1AmaxFloor = 6.0f * 0x1p-126f;

/// Quantizes `x` to the fp8 grid of an activation block: `scale` is the ue8m0
/// scale of the block.
Value quantizeE4M3(LoopEmitter &e, Value x, Value scale) {
  return e.roundToMinifloat(e.div(x, scale), 3, -6, kE4M3Max);
}

/// How an e4m3 weight with block scales meets its activation.
enum class FP8Mode {
  /// The activation is quantized per 128-wide block (the fp8 linear).
  QuantizeInput,
  /// The weight is dequantized and the activation used as it is (wo_a).
  DequantizeWeight,
  /// The activation was quantized before (quantizeRows): e4m3 bytes
  /// xq[row, k] and f32 scales xs[blk, row] (the library GEMM's layout).
  Prequantized,
};

/// Output rows one scalar projection step computes together: independent
/// sums that hide the latency of each other's additions.
constexpr int64_t kRows = 8;

/// Calls `body(n0, rows)` for rows [n0, n0 + rows) covering [0, count):
/// groups of kRows, then single rows.
void forRowGroups(LoopEmitter &e, Value count,
                  const std::function<void(Value, int64_t)> &body) {
  Value zero = e.index(0), group = e.index(kRows);
  e.parallelLoop(zero, e.div(count, group),
                 [&](Value g) { body(e.mul(g, group), kRows); });
  e.loop(e.mul(e.div(count, group), group), count,
         [&](Value n) { body(n, 1); });
}

/// The ue8m0 scale of the activation x[row, inOffset + k], k < in, in
/// 128-wide block `blk`: pow2ceil(amax / 448), amax at least 1e-4.
Value blockScale(LoopEmitter &e, Value x, Value row, Value inOffset, Value in,
                 Value blk) {
  Value c128 = e.index(128);
  Value begin = e.mul(blk, c128);
  Value end = e.min(in, e.add(begin, c128));
  Value amax = e.loop(begin, end, {e.f32(kE4M3AmaxFloor)},
                      [&](Value k, ValueRange a) -> SmallVector<Value> {
                        Value v = e.load(x, {row, e.add(inOffset, k)});
                        return {e.max(a[0], e.abs(v))};
                      })[0];
  return e.ceilPowerOfTwo(e.mul(amax, e.f32(1.0f / kE4M3Max)));
}

/// Quantizes the activation x[row, inOffset + k], k < in, per 128-wide
/// block: block `blk`'s ue8m0 scale goes to scales[scaleAt(blk)], its e4m3
/// values to values[valueAt(k)].
void quantizeBlock(LoopEmitter &e, Value x, Value row, Value inOffset, Value in,
                   Value blk,
                   const std::function<void(Value, Value)> &storeValue,
                   const std::function<void(Value, Value)> &storeScale) {
  Value c128 = e.index(128);
  Value begin = e.mul(blk, c128);
  Value end = e.min(in, e.add(begin, c128));
  Value s = blockScale(e, x, row, inOffset, in, blk);
  storeScale(blk, s);
  e.loop(begin, end, [&](Value k) {
    storeValue(k, quantizeE4M3(e, e.load(x, {row, e.add(inOffset, k)}), s));
  });
}

/// Consecutive elements one GPU thread quantizes: they share their block's
/// scale, which the thread finds itself (no reduction across threads; 8
/// divides every block size the models use).
constexpr int64_t kQuantGroup = 8;

/// body(t, k, e4m3 value, scale) for every element of x [tokens, in]
/// quantized per 1x128 block: a parallel iteration per token and group of
/// kQuantGroup elements (one block each).
void forEachQuantized(
    LoopEmitter &e, Value x, Value tokens, Value in,
    const std::function<void(Value, Value, Value, Value)> &body) {
  Value group = e.index(kQuantGroup);
  Value groups = e.div(e.add(in, e.index(kQuantGroup - 1)), group);
  e.parallelLoop(tokens, groups, [&](Value t, Value g) {
    Value k0 = e.mul(g, group);
    Value scale = blockScale(e, x, t, e.index(0), in, e.div(k0, e.index(128)));
    e.loop(k0, e.min(in, e.add(k0, group)), [&](Value k) {
      body(t, k, quantizeE4M3(e, e.load(x, {t, k}), scale), scale);
    });
  });
}

void quantizeActivation(LoopEmitter &e, Value x, Value row, Value inOffset,
                        Value in,
                        const std::function<void(Value, Value)> &storeValue,
                        const std::function<void(Value, Value)> &storeScale) {
  Value zero = e.index(0), c128 = e.index(128);
  Value blocks = e.div(e.add(in, e.index(127)), c128);
  e.loop(zero, blocks, [&](Value blk) {
    quantizeBlock(e, x, row, inOffset, in, blk, storeValue, storeScale);
  });
}

/// out[row, outOffset + n] = x[row, inOffset + :] . w[rowBegin + n, :] for n
/// in [0, count): a bf16 weight, or an e4m3 weight with ue8m0 block scales
/// used as `mode` says (the quantized activation lives in xq, xs scratch).
/// Each output sums in k-ascending order, kRows outputs side by side; with
/// `kBlock` (bf16 weights) in f32 per kBlock-wide block, the block sums
/// added in order.
void project(LoopEmitter &e, Value x, Value row, Value inOffset, Value in,
             Value w, Value scale, Value rowBegin, Value count, Value out,
             Value outRow, Value outOffset,
             FP8Mode mode = FP8Mode::QuantizeInput, Value xs = Value(),
             int64_t kBlock = 0) {
  Value zero = e.index(0), c128 = e.index(128);
  auto store = [&](Value n0, ValueRange sums) {
    for (auto [r, sum] : llvm::enumerate(sums))
      e.store(sum, out, {outRow, e.add(outOffset, e.add(n0, e.index(r)))});
  };
  auto weightRow = [&](Value n0, int64_t r) {
    return e.add(rowBegin, e.add(n0, e.index(r)));
  };
  if (!scale && kBlock) {
    Value block = e.index(kBlock);
    Value blocks = e.div(e.add(in, e.index(kBlock - 1)), block);
    forRowGroups(e, count, [&](Value n0, int64_t rows) {
      SmallVector<Value> init(rows, e.f32(0.0));
      auto blockSums = [&](Value blk, ValueRange a) -> SmallVector<Value> {
        Value begin = e.mul(blk, block);
        Value end = e.min(in, e.add(begin, block));
        SmallVector<Value> partials = e.loop(
            begin, end, init, [&](Value k, ValueRange p) -> SmallVector<Value> {
              Value xv = e.load(x, {row, e.add(inOffset, k)});
              SmallVector<Value> next;
              for (int64_t r = 0; r < rows; ++r)
                next.push_back(
                    e.add(p[r], e.mul(xv, e.load(w, {weightRow(n0, r), k}))));
              return next;
            });
        SmallVector<Value> next;
        for (int64_t r = 0; r < rows; ++r)
          next.push_back(e.add(a[r], partials[r]));
        return next;
      };
      store(n0, e.loop(zero, blocks, init, blockSums));
    });
    return;
  }
  if (!scale || mode == FP8Mode::DequantizeWeight) {
    forRowGroups(e, count, [&](Value n0, int64_t rows) {
      SmallVector<Value> init(rows, e.f32(0.0));
      store(n0, e.loop(zero, in, init,
                       [&](Value k, ValueRange a) -> SmallVector<Value> {
                         Value xv = e.load(x, {row, e.add(inOffset, k)});
                         SmallVector<Value> next;
                         for (int64_t r = 0; r < rows; ++r) {
                           Value wRow = weightRow(n0, r);
                           Value weight = e.load(w, {wRow, k});
                           if (scale)
                             weight =
                                 e.mul(weight, e.load(scale, {e.div(wRow, c128),
                                                              e.div(k, c128)}));
                           next.push_back(e.add(a[r], e.mul(xv, weight)));
                         }
                         return next;
                       }));
    });
    return;
  }
  Value blocks = e.div(e.add(in, e.index(127)), c128);
  // The token's quantized activation: its own scratch, or x and xs given.
  std::function<Value(Value)> valueAt, scaleAt;
  if (mode == FP8Mode::Prequantized) {
    valueAt = [&](Value k) {
      return e.fromE4M3Bits(memref::LoadOp::create(
          e.builder(), e.location(), x, ValueRange{row, e.add(inOffset, k)}));
    };
    scaleAt = [&](Value blk) { return e.load(xs, {blk, row}); };
  } else {
    Value xq = e.scratch(in), xsRow = e.scratch(blocks);
    quantizeActivation(
        e, x, row, inOffset, in, [&](Value k, Value q) { e.store(q, xq, {k}); },
        [&](Value blk, Value s) { e.store(s, xsRow, {blk}); });
    valueAt = [&e, xq](Value k) { return e.load(xq, {k}); };
    scaleAt = [&e, xsRow](Value blk) { return e.load(xsRow, {blk}); };
  }
  forRowGroups(e, count, [&](Value n0, int64_t rows) {
    SmallVector<Value> init(rows, e.f32(0.0));
    store(n0,
          e.loop(
              zero, blocks, init,
              [&](Value blk, ValueRange a) -> SmallVector<Value> {
                Value begin = e.mul(blk, c128);
                Value end = e.min(in, e.add(begin, c128));
                SmallVector<Value> partials = e.loop(
                    begin, end, init,
                    [&](Value k, ValueRange p) -> SmallVector<Value> {
                      Value xv = valueAt(k);
                      SmallVector<Value> next;
                      for (int64_t r = 0; r < rows; ++r)
                        next.push_back(e.add(
                            p[r], e.mul(xv, e.load(w, {weightRow(n0, r), k}))));
                      return next;
                    });
                Value xScale = scaleAt(blk);
                SmallVector<Value> next;
                for (int64_t r = 0; r < rows; ++r) {
                  Value scaleRow = e.div(weightRow(n0, r), c128);
                  Value weightScale = e.load(scale, {scaleRow, blk});
                  Value scaled = e.mul(e.mul(partials[r], xScale), weightScale);
                  next.push_back(e.add(a[r], scaled));
                }
                return next;
              }));
  });
}

/// Tokens one vectorized projection step covers: two 256-bit f32 vectors
/// (or one 512-bit), so that one weight load and decode serves 16 tokens.
constexpr int64_t kLanes = 16;

/// The quantized (or plain) activations of tokens [t0, t0 + kLanes),
/// transposed so that one vector load gives one input column of every
/// token: xT[k * kLanes + j] = x[t0 + j, inOffset + k], and for fp8 inputs
/// xsT[blk * kLanes + j] the ue8m0 scale of token j's block `blk`.
void transposeLanes(LoopEmitter &e, Value x, Value t0, Value inOffset, Value in,
                    bool quantize, Value xT, Value xsT) {
  Value zero = e.index(0), lanes = e.index(kLanes);
  e.loop(zero, lanes, [&](Value j) {
    Value row = e.add(t0, j);
    auto at = [&](Value k) { return e.add(e.mul(k, lanes), j); };
    if (!quantize) {
      e.loop(zero, in, [&](Value k) {
        Value place = at(k);
        e.store(e.load(x, {row, e.add(inOffset, k)}), xT, {place});
      });
      return;
    }
    quantizeActivation(
        e, x, row, inOffset, in,
        [&](Value k, Value q) { e.store(q, xT, {at(k)}); },
        [&](Value blk, Value s) { e.store(s, xsT, {at(blk)}); });
  });
}

/// `project` for the kLanes tokens t0.., one token per vector lane. Every
/// output keeps its own k-ascending order of f32 operations, so the results
/// are bitwise those of `project`; one weight load serves kLanes tokens and
/// the lanes' sums are independent (no reduction across lanes).
void projectLanes(LoopEmitter &e, Value x, Value t0, Value inOffset, Value in,
                  Value w, Value scale, Value rowBegin, Value count, Value out,
                  Value outOffset, FP8Mode mode, Value xT, Value xsT) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  auto vectorType = VectorType::get({kLanes}, b.getF32Type());
  Value zero = e.index(0), c128 = e.index(128), lanes = e.index(kLanes);
  bool quantize = scale && mode == FP8Mode::QuantizeInput;
  transposeLanes(e, x, t0, inOffset, in, quantize, xT, xsT);
  auto column = [&](Value buffer, Value k) -> Value {
    return vector::LoadOp::create(b, loc, vectorType, buffer,
                                  ValueRange{e.mul(k, lanes)});
  };
  auto splat = [&](Value scalar) -> Value {
    return vector::BroadcastOp::create(b, loc, vectorType, scalar);
  };
  Value zeros = splat(e.f32(0.0));
  e.parallelLoop(zero, count, [&](Value n) {
    Value wRow = e.add(rowBegin, n);
    Value acc;
    if (!quantize) {
      acc = e.loop(
          zero, in, {zeros}, [&](Value k, ValueRange a) -> SmallVector<Value> {
            Value weight = e.load(w, {wRow, k});
            if (scale)
              weight = e.mul(
                  weight, e.load(scale, {e.div(wRow, c128), e.div(k, c128)}));
            Value weights = splat(weight);
            return {e.add(a[0], e.mul(column(xT, k), weights))};
          })[0];
    } else {
      Value blocks = e.div(e.add(in, e.index(127)), c128);
      Value scaleRow = e.div(wRow, c128);
      acc = e.loop(zero, blocks, {zeros},
                   [&](Value blk, ValueRange a) -> SmallVector<Value> {
                     Value begin = e.mul(blk, c128);
                     Value end = e.min(in, e.add(begin, c128));
                     Value partial = e.loop(
                         begin, end, {zeros},
                         [&](Value k, ValueRange p) -> SmallVector<Value> {
                           Value weights = splat(e.load(w, {wRow, k}));
                           return {e.add(p[0], e.mul(column(xT, k), weights))};
                         })[0];
                     Value weightScales = splat(e.load(scale, {scaleRow, blk}));
                     Value scaled =
                         e.mul(e.mul(partial, column(xsT, blk)), weightScales);
                     return {e.add(a[0], scaled)};
                   })[0];
    }
    for (int64_t j = 0; j < kLanes; ++j) {
      Value token = e.add(t0, e.index(j));
      Value column = e.add(outOffset, n);
      e.store(vector::ExtractOp::create(b, loc, acc, ArrayRef<int64_t>{j}), out,
              {token, column});
    }
  });
}

/// out[t, outOffset + :] for every token t of x: kLanes tokens at a time,
/// then the rest one by one; the same values as `project` for each token.
void projectTokens(LoopEmitter &e, Value x, Value inOffset, Value in, Value w,
                   Value scale, Value rowBegin, Value count, Value out,
                   Value outOffset, FP8Mode mode = FP8Mode::QuantizeInput) {
  Value zero = e.index(0), lanes = e.index(kLanes);
  Value tokens = e.dim(x, 0);
  Value full = e.mul(e.div(tokens, lanes), lanes);
  Value blocks = e.div(e.add(in, e.index(127)), e.index(128));
  Value xT = e.scratch(e.mul(in, lanes)), xsT = e.scratch(e.mul(blocks, lanes));
  // scf.for steps by one: walk the groups of kLanes tokens.
  e.loop(zero, e.div(tokens, lanes), [&](Value group) {
    projectLanes(e, x, e.mul(group, lanes), inOffset, in, w, scale, rowBegin,
                 count, out, outOffset, mode, xT, xsT);
  });
  e.loop(full, tokens, [&](Value t) {
    project(e, x, t, inOffset, in, w, scale, rowBegin, count, out, t, outOffset,
            mode);
  });
}

/// out[t, outOffset + :] for every token t of x, the tokens in parallel
/// (each token's scratch is its own): the layout for GPU kernels, a block
/// per token and its threads over the output rows.
/// Output rows of one token that one GPU block computes (its threads take
/// kRows each).
constexpr int64_t kTileRows = 128 * kRows;

void projectEachToken(LoopEmitter &e, Value x, Value inOffset, Value in,
                      Value w, Value scale, Value rowBegin, Value count,
                      Value out, Value outOffset,
                      FP8Mode mode = FP8Mode::QuantizeInput, Value xs = Value(),
                      Value tokens = Value(), int64_t kBlock = 0) {
  Value tile = e.index(kTileRows);
  Value tiles = e.div(e.add(count, e.index(kTileRows - 1)), tile);
  // Tokens and tiles of output rows in parallel: a token's rows are
  // independent sums, each in the same order as `project` over all of them.
  // A prequantized x has rows past the tokens (padding).
  e.parallelLoop(tokens ? tokens : e.dim(x, 0), tiles, [&](Value t, Value i) {
    Value n0 = e.mul(i, tile);
    Value outColumn = e.add(outOffset, n0);
    Value rows = e.min(tile, e.sub(count, n0));
    project(e, x, t, inOffset, in, w, scale, e.add(rowBegin, n0), rows, out, t,
            outColumn, mode, xs, kBlock);
  });
}

/// Loops over tokens in parallel or in turn.
void tokenLoop(LoopEmitter &e, bool parallel, Value lower, Value upper,
               const std::function<void(Value)> &body) {
  if (parallel)
    e.parallelLoop(lower, upper, body);
  else
    e.loop(lower, upper, body);
}

/// Patterns know whether tokens run in parallel (each with its own
/// scratch, no vector lanes across tokens: the layout GPU kernels take) or
/// in turn with vectorized inner loops (the CPU's).
template <typename OpTy> struct V4APattern : public OpRewritePattern<OpTy> {
  V4APattern(MLIRContext *context, bool tokenParallel, bool libraryGemms,
             bool libraryFP8Gemms)
      : OpRewritePattern<OpTy>(context), tokenParallel(tokenParallel),
        libraryGemms(libraryGemms), libraryFP8Gemms(libraryFP8Gemms) {}
  bool tokenParallel;
  /// bf16 (and with libraryFP8Gemms fp8) products also go to a GEMM library
  /// call (the loops stay as the fallback right after it).
  bool libraryGemms, libraryFP8Gemms;
};

MemRefType matrixOf(Type element) {
  return MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic}, element);
}

/// The library GEMM a product of these operand and result types calls.
StringRef gemmCallee(bool fp8, Type result) {
  if (fp8)
    return kGemmFP8;
  return result.isF32() ? kGemmBF16F32 : kGemmBF16;
}

SmallVector<Type> gemmOperands(MLIRContext *context, StringRef callee) {
  Builder b(context);
  SmallVector<Type> inputs;
  if (callee == kGemmFP8)
    inputs = {matrixOf(b.getType<Float8E4M3FNType>()), matrixOf(b.getI8Type()),
              matrixOf(b.getBF16Type()), matrixOf(b.getF32Type()),
              matrixOf(b.getF32Type())};
  else
    inputs = {
        matrixOf(b.getBF16Type()), matrixOf(b.getBF16Type()),
        matrixOf(callee == kGemmBF16F32 ? b.getF32Type() : b.getBF16Type())};
  inputs.append(10, b.getIndexType());
  return inputs;
}

void declareGemms(ModuleOp module) {
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  for (StringRef name : {kGemmBF16, kGemmBF16F32, kGemmFP8}) {
    if (module.lookupSymbol(name))
      continue;
    auto type = FunctionType::get(module.getContext(),
                                  gemmOperands(module.getContext(), name), {});
    func::FuncOp::create(b, module.getLoc(), name, type).setPrivate();
  }
}

bool isBF16(Value value) {
  return cast<ShapedType>(value.getType()).getElementType().isBF16();
}

bool isF32(Value value) {
  return cast<ShapedType>(value.getType()).getElementType().isF32();
}

struct GemmShape {
  Value m, n, k, lda, ldb, ldd, batch, strideA, strideB, strideD;
};

/// D = B . A^T (row-major, per batch) as a call of the library GEMM; fp8
/// products also take the scales of A and B.
void callGemm(LoopEmitter &e, ValueRange buffers, const GemmShape &s) {
  OpBuilder &builder = e.builder();
  Location loc = e.location();
  StringRef callee =
      gemmCallee(buffers.size() == 5,
                 cast<ShapedType>(buffers[2].getType()).getElementType());
  SmallVector<Type> types = gemmOperands(builder.getContext(), callee);
  SmallVector<Value> operands;
  for (auto [buffer, type] : llvm::zip(buffers, types))
    operands.push_back(memref::CastOp::create(builder, loc, type, buffer));
  operands.append({s.m, s.n, s.k, s.lda, s.ldb, s.ldd, s.batch, s.strideA,
                   s.strideB, s.strideD});
  func::CallOp::create(builder, loc, callee, TypeRange(), operands);
}

Value ceilTo(LoopEmitter &e, Value value, int64_t multiple) {
  Value m = e.index(multiple);
  return e.mul(e.div(e.add(value, e.index(multiple - 1)), m), m);
}

/// An fp8 projection on the library: the activation quantized per 1x128
/// block into e4m3 bytes [T rounded up to 4, in] and f32 scales [in / 128,
/// T rounded up to 4] (a thread per token and block), the weight's ue8m0
/// scales widened to f32 [out / 128, in / 128 rounded up to 4], the call,
/// then the fallback over the same quantized activation. Padding stays
/// zero: temporaries start zeroed.
void projectFP8OnLibrary(LoopEmitter &e, Value x, Value w, Value scale,
                         Value out, Value tokens, Value in, Value outWidth) {
  MLIRContext *context = e.builder().getContext();
  Value zero = e.index(0), one = e.index(1);
  Value blocks = e.div(e.add(in, e.index(127)), e.index(128));
  Value rowBlocks = e.div(e.add(outWidth, e.index(127)), e.index(128));
  auto dyn = ShapedType::kDynamic;
  Value xq =
      e.alloc(RankedTensorType::get({dyn, dyn}, IntegerType::get(context, 8)),
              {ceilTo(e, tokens, 4), in});
  Value xs =
      e.alloc(RankedTensorType::get({dyn, dyn}, Float32Type::get(context)),
              {blocks, ceilTo(e, tokens, 4)});
  Value ws =
      e.alloc(RankedTensorType::get({dyn, dyn}, Float32Type::get(context)),
              {rowBlocks, ceilTo(e, blocks, 4)});
  // A thread per group of elements; a block's first writes its scale.
  forEachQuantized(
      e, x, tokens, in, [&](Value t, Value k, Value value, Value scale) {
        memref::StoreOp::create(e.builder(), e.location(), e.toE4M3Bits(value),
                                xq, ValueRange{t, k});
        Value c128 = e.index(128);
        Value first = e.cmp(arith::CmpIPredicate::eq, e.rem(k, c128), zero);
        auto ifOp = scf::IfOp::create(e.builder(), e.location(), first,
                                      /*withElseRegion=*/false);
        OpBuilder::InsertionGuard guard(e.builder());
        e.builder().setInsertionPointToStart(ifOp.thenBlock());
        e.store(scale, xs, {e.div(k, c128), t});
      });
  e.parallelLoop(rowBlocks, blocks, [&](Value mb, Value kb) {
    e.store(e.load(scale, {mb, kb}), ws, {mb, kb});
  });
  callGemm(e, {w, xq, out, ws, xs},
           {outWidth, tokens, in, in, in, outWidth, one, zero, zero, zero});
  projectEachToken(e, xq, zero, in, w, scale, zero, outWidth, out, zero,
                   FP8Mode::Prequantized, xs, tokens);
}

struct LowerLinear : public V4APattern<LinearOp> {
  using V4APattern::V4APattern;
  LogicalResult matchAndRewrite(LinearOp op,
                                PatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    Value x = e.buffer(op.getInput()), w = e.buffer(op.getWeight());
    Value scale = op.getScale() ? e.buffer(op.getScale()) : Value();
    Value tokens = e.dim(x, 0), in = e.dim(x, 1), outWidth = e.dim(w, 0);
    auto type = cast<RankedTensorType>(op.getType());
    Value out = e.allocShaped(type, {tokens, outWidth});
    Value zero = e.index(0), one = e.index(1);
    bool fp8 = scale && isa<Float8E4M3FNType>(
                            cast<ShapedType>(w.getType()).getElementType());
    // Products with other element types stay on the generated loops.
    if (libraryFP8Gemms && fp8 && isBF16(x) && isBF16(out)) {
      projectFP8OnLibrary(e, x, w, scale, out, tokens, in, outWidth);
      rewriter.replaceOp(op, e.tensor(out, type));
      return success();
    }
    if (libraryGemms && !scale && isBF16(x) && isBF16(w) &&
        (isBF16(out) || isF32(out)))
      callGemm(e, {w, x, out},
               {outWidth, tokens, in, in, in, outWidth, one, zero, zero, zero});
    int64_t kBlock = op.getKBlock().value_or(0);
    if (tokenParallel)
      projectEachToken(e, x, zero, in, w, scale, zero, outWidth, out, zero,
                       FP8Mode::QuantizeInput, Value(), Value(), kBlock);
    else if (kBlock)
      // Block sums have no vectorized form: a token at a time.
      e.loop(zero, tokens, [&](Value t) {
        project(e, x, t, zero, in, w, scale, zero, outWidth, out, t, zero,
                FP8Mode::QuantizeInput, Value(), kBlock);
      });
    else
      projectTokens(e, x, zero, in, w, scale, zero, outWidth, out, zero);
    rewriter.replaceOp(op, e.tensor(out, type));
    return success();
  }
};

/// Whether a reader of `part` takes it as a buffer of its own rows (the GPU
/// kernel families take identity-layout buffers), which a view of the
/// product's columns is not.
bool readAsOwnRows(Value part) {
  return llvm::any_of(part.getUsers(), [](Operation *user) {
    auto toBuffer = dyn_cast<bufferization::ToBufferOp>(user);
    return toBuffer &&
           cast<MemRefType>(toBuffer.getType()).getLayout().isIdentity();
  });
}

/// A part read as rows of its own is copied out: one loop over the columns
/// of those parts, each element stored (rounded to a bf16 part's type
/// there) into the part its column falls in; on the GPU one kernel, a
/// thread per element. Every other part is a view of its columns of the
/// product, not a copy: a part of the product's element type is those
/// columns as they are, a bf16 part of f32 sums rounds them elementwise
/// (as the library rounds a bf16 product), which elementwise fusion joins
/// to the part's readers. Parts nobody reads are neither.
struct LowerSplitColumns : public V4APattern<SplitColumnsOp> {
  using V4APattern::V4APattern;
  LogicalResult matchAndRewrite(SplitColumnsOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value product = op.getInput();
    Type productElement =
        cast<RankedTensorType>(product.getType()).getElementType();
    Value tokens = tensor::DimOp::create(rewriter, loc, product, 0);
    SmallVector<Value> parts(op.getNumResults());
    SmallVector<size_t> copied;
    SmallVector<int64_t> begins;
    int64_t begin = 0;
    for (auto [i, part] : llvm::enumerate(op.getParts())) {
      begins.push_back(begin);
      auto type = cast<RankedTensorType>(part.getType());
      int64_t width = type.getDimSize(1);
      begin += width;
      if (part.use_empty())
        continue;
      if (readAsOwnRows(part)) {
        copied.push_back(i);
        continue;
      }
      SmallVector<OpFoldResult> offsets = {rewriter.getIndexAttr(0),
                                           rewriter.getIndexAttr(begins[i])};
      SmallVector<OpFoldResult> sizes = {tokens, rewriter.getIndexAttr(width)};
      SmallVector<OpFoldResult> strides(2, rewriter.getIndexAttr(1));
      Value columns = tensor::ExtractSliceOp::create(
          rewriter, loc, type.clone(productElement), product, offsets, sizes,
          strides);
      if (type.getElementType() != productElement)
        columns = arith::TruncFOp::create(rewriter, loc, type, columns);
      parts[i] = columns;
    }
    if (!copied.empty())
      copyOut(rewriter, op, copied, begins, parts);
    for (auto [part, value] : llvm::zip(op.getParts(), parts))
      if (value)
        rewriter.replaceAllUsesWith(part, value);
    rewriter.eraseOp(op);
    return success();
  }

private:
  /// The parts `copied` (starting at product columns `begins`) as buffers
  /// of their own, filled by one loop over the columns they span.
  static void copyOut(PatternRewriter &rewriter, SplitColumnsOp op,
                      ArrayRef<size_t> copied, ArrayRef<int64_t> begins,
                      MutableArrayRef<Value> parts) {
    LoopEmitter e(rewriter, op.getLoc());
    Location loc = op.getLoc();
    Value input = e.buffer(op.getInput());
    Value tokens = e.dim(input, 0);
    SmallVector<Value> buffers;
    SmallVector<int64_t> ends;
    for (size_t i : copied) {
      Type type = op.getParts()[i].getType();
      buffers.push_back(e.allocShaped(type, {tokens}));
      ends.push_back(begins[i] + cast<RankedTensorType>(type).getDimSize(1));
    }
    Value first = e.index(begins[copied.front()]);
    e.parallelLoop(tokens, e.index(ends.back() - begins[copied.front()]),
                   [&](Value t, Value offset) {
                     Value c = e.add(offset, first);
                     Value value = e.load(input, {t, c});
                     for (size_t k = 0; k < copied.size(); ++k) {
                       Value from = e.index(begins[copied[k]]);
                       Value beforeEnd = e.cmp(arith::CmpIPredicate::slt, c,
                                               e.index(ends[k]));
                       Value inside = arith::AndIOp::create(
                           rewriter, loc,
                           e.cmp(arith::CmpIPredicate::sge, c, from),
                           beforeEnd);
                       e.ifThen(inside, [&] {
                         e.store(value, buffers[k], {t, e.sub(c, from)});
                       });
                     }
                   });
    for (auto [k, i] : llvm::enumerate(copied))
      parts[i] = e.tensor(buffers[k], op.getParts()[i].getType());
  }
};

struct LowerGroupedOutput : public V4APattern<GroupedOutputOp> {
  using V4APattern::V4APattern;
  LogicalResult matchAndRewrite(GroupedOutputOp op,
                                PatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    Value o = e.buffer(op.getInput());
    Value woA = e.buffer(op.getWoA());
    Value woB = op.getWoB() ? e.buffer(op.getWoB()) : Value();
    Value scaleA = op.getWoAScale() ? e.buffer(op.getWoAScale()) : Value();
    Value scaleB = op.getWoBScale() ? e.buffer(op.getWoBScale()) : Value();
    Value tokens = e.dim(o, 0), heads = e.dim(o, 1), headDim = e.dim(o, 2);
    Value groups = e.index(op.getGroups());
    Value width = e.mul(heads, headDim);
    Value groupWidth = e.div(width, groups);
    Value loraRows = e.dim(woA, 0);
    Value lora = e.div(loraRows, groups);
    Value zero = e.index(0), one = e.index(1);
    bool bf16Out = isBF16(op.getResult());
    // wo_a (a bf16 product in both checkpoint formats) and wo_b go to the
    // library independently: an fp8 wo_b does not keep wo_a off it.
    bool libraryA = libraryGemms && !scaleA && isBF16(woA) && isBF16(o);
    bool libraryB = libraryGemms && woB && !scaleB && isBF16(woB) && bf16Out;
    bool fp8Library =
        libraryFP8Gemms && scaleB && bf16Out &&
        isa<Float8E4M3FNType>(cast<ShapedType>(woB.getType()).getElementType());
    // o viewed as [T, H*D]. On the GPU a view of o's buffer (the host
    // program computes the collapsed extent); else a flat copy (bf16 for the
    // library, which takes the values as they are).
    Value flat;
    auto inputType = cast<RankedTensorType>(op.getInput().getType());
    if (tokenParallel && !inputType.isDynamicDim(1) &&
        !inputType.isDynamicDim(2)) {
      Value identity = bufferization::ToBufferOp::create(
          rewriter, op.getLoc(),
          MemRefType::get(inputType.getShape(), inputType.getElementType()),
          op.getInput(), rewriter.getUnitAttr());
      flat = memref::CollapseShapeOp::create(
          rewriter, op.getLoc(), identity,
          ArrayRef<ReassociationIndices>{{0}, {1, 2}});
    } else {
      flat = e.alloc(
          RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                                libraryA ? rewriter.getBF16Type()
                                         : rewriter.getF32Type()),
          {tokens, width});
      e.parallelLoop(zero, tokens, [&](Value t) {
        e.parallelLoop(zero, heads, [&](Value h) {
          e.loop(zero, headDim, [&](Value d) {
            Value column = e.add(e.mul(h, headDim), d);
            e.store(e.load(o, {t, h, d}), flat, {t, column});
          });
        });
      });
    }
    // Without wo_b, wo_a's bf16 product is the result.
    auto type = cast<RankedTensorType>(op.getType());
    Value mid = woB ? e.alloc(RankedTensorType::get(
                                  {ShapedType::kDynamic, ShapedType::kDynamic},
                                  rewriter.getBF16Type()),
                              {tokens, loraRows})
                    : e.allocShaped(type, {tokens, loraRows});
    // Each library call is followed by its fallback loops.
    if (libraryA)
      callGemm(e, {woA, flat, mid},
               {lora, tokens, groupWidth, groupWidth, width, loraRows, groups,
                e.mul(lora, groupWidth), groupWidth, lora});
    if (tokenParallel)
      e.parallelLoop(tokens, groups, [&](Value t, Value g) {
        Value outColumn = e.mul(g, lora);
        Value firstRow = e.mul(g, lora);
        project(e, flat, t, e.mul(g, groupWidth), groupWidth, woA, scaleA,
                firstRow, lora, mid, t, outColumn, FP8Mode::DequantizeWeight);
      });
    else
      e.loop(zero, groups, [&](Value g) {
        Value outColumn = e.mul(g, lora);
        Value firstRow = e.mul(g, lora);
        projectTokens(e, flat, e.mul(g, groupWidth), groupWidth, woA, scaleA,
                      firstRow, lora, mid, outColumn,
                      FP8Mode::DequantizeWeight);
      });
    if (!woB) {
      rewriter.replaceOp(op, e.tensor(mid, type));
      return success();
    }
    Value outWidth = e.dim(woB, 0);
    Value out = e.allocShaped(type, {tokens, outWidth});
    if (!tokenParallel)
      projectTokens(e, mid, zero, loraRows, woB, scaleB, zero, outWidth, out,
                    zero);
    else if (fp8Library)
      projectFP8OnLibrary(e, mid, woB, scaleB, out, tokens, loraRows, outWidth);
    else {
      if (libraryB)
        callGemm(e, {woB, mid, out},
                 {outWidth, tokens, loraRows, loraRows, loraRows, outWidth, one,
                  zero, zero, zero});
      projectEachToken(e, mid, zero, loraRows, woB, scaleB, zero, outWidth, out,
                       zero);
    }
    rewriter.replaceOp(op, e.tensor(out, type));
    return success();
  }
};

/// Rows of a buffer viewed as [rows, last dim] are addressed through the
/// leading indices; these helpers iterate rank-2 and rank-3 buffers alike,
/// every row independently.
void forEachVector(LoopEmitter &e, Value buffer,
                   const std::function<void(SmallVector<Value>)> &body) {
  int64_t rank = cast<MemRefType>(buffer.getType()).getRank();
  Value zero = e.index(0);
  if (rank == 2) {
    e.parallelLoop(zero, e.dim(buffer, 0), [&](Value r) { body({r}); });
    return;
  }
  e.parallelLoop(zero, e.dim(buffer, 0), [&](Value r) {
    e.parallelLoop(zero, e.dim(buffer, 1), [&](Value h) { body({r, h}); });
  });
}

/// Every `group` consecutive elements of the vectors of a rank-2 or rank-3
/// buffer independently (the last group of a vector may be short), in one
/// parallel loop over (row, group in the row's last dimensions): body(lead,
/// first element of the group).
void forEachGroup(LoopEmitter &e, Value buffer, int64_t group,
                  const std::function<void(SmallVector<Value>, Value)> &body) {
  int64_t rank = cast<MemRefType>(buffer.getType()).getRank();
  Value width = e.dim(buffer, rank - 1);
  Value size = e.index(group);
  Value groups = e.div(e.add(width, e.index(group - 1)), size);
  Value inner = rank == 2 ? groups : e.mul(e.dim(buffer, 1), groups);
  e.parallelLoop(e.dim(buffer, 0), inner, [&](Value r, Value j) {
    if (rank == 2)
      body({r}, e.mul(j, size));
    else {
      Value first = e.mul(e.rem(j, groups), size);
      body({r, e.div(j, groups)}, first);
    }
  });
}

SmallVector<Value> withLast(SmallVector<Value> lead, Value last) {
  lead.push_back(last);
  return lead;
}

Value allocLike(LoopEmitter &e, Value buffer, Type tensorType) {
  return e.alloc(tensorType, e.dynamicDims(buffer));
}

struct LowerRMSNorm : public V4APattern<RMSNormOp> {
  using V4APattern::V4APattern;
  LogicalResult matchAndRewrite(RMSNormOp op,
                                PatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    Value x = e.buffer(op.getInput());
    Value weight = op.getWeight() ? e.buffer(op.getWeight()) : Value();
    int64_t rank = cast<MemRefType>(x.getType()).getRank();
    Value width = e.dim(x, rank - 1);
    Value out = allocLike(e, x, op.getType());
    Value zero = e.index(0);
    Value eps = e.f32(op.getEps().convertToDouble());
    forEachVector(e, x, [&](SmallVector<Value> lead) {
      Value sum = e.loop(zero, width, {e.f32(0.0)},
                         [&](Value i, ValueRange a) -> SmallVector<Value> {
                           Value v = e.load(x, withLast(lead, i));
                           return {e.add(a[0], e.mul(v, v))};
                         })[0];
      Value inv = e.div(e.f32(1.0),
                        e.sqrt(e.add(e.div(sum, e.indexToF32(width)), eps)));
      e.loop(zero, width, [&](Value i) {
        Value y = e.mul(e.load(x, withLast(lead, i)), inv);
        y = e.mul(y, weight ? e.load(weight, {i}) : e.f32(1.0));
        e.store(y, out, withLast(lead, i));
      });
    });
    rewriter.replaceOp(op, e.tensor(out, op.getType()));
    return success();
  }
};

struct LowerRoPE : public V4APattern<RoPEOp> {
  using V4APattern::V4APattern;
  LogicalResult matchAndRewrite(RoPEOp op,
                                PatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    Value x = e.buffer(op.getInput()), positions = e.buffer(op.getPositions());
    int64_t rank = cast<MemRefType>(x.getType()).getRank();
    int64_t ropeDim = op.getRopeDim();
    SmallVector<float> freqs = ropeFrequencies(
        ropeDim, op.getTheta().convertToDouble(), op.getYarnAttr());
    auto freqType = RankedTensorType::get({ropeDim / 2}, rewriter.getF32Type());
    Value table = arith::ConstantOp::create(
        rewriter, op.getLoc(),
        DenseElementsAttr::get(freqType, ArrayRef<float>(freqs)));
    Value freqBuffer = e.buffer(table);
    Value width = e.dim(x, rank - 1);
    Value start = e.sub(width, e.index(ropeDim));
    Value out = allocLike(e, x, op.getType());
    Value zero = e.index(0);
    bool inverse = op.getInverse();
    forEachVector(e, x, [&](SmallVector<Value> lead) {
      e.loop(zero, start, [&](Value i) {
        e.store(e.load(x, withLast(lead, i)), out, withLast(lead, i));
      });
      Value position = arith::SIToFPOp::create(
          rewriter, op.getLoc(), rewriter.getF32Type(),
          memref::LoadOp::create(rewriter, op.getLoc(), positions,
                                 ValueRange{lead[0]}));
      e.loop(zero, e.index(ropeDim / 2), [&](Value i) {
        Value angle = e.mul(position, e.load(freqBuffer, {i}));
        Value c = math::CosOp::create(rewriter, op.getLoc(), angle);
        Value s = math::SinOp::create(rewriter, op.getLoc(), angle);
        if (inverse)
          s = arith::NegFOp::create(rewriter, op.getLoc(), s);
        Value reIdx = e.add(start, e.mul(i, e.index(2)));
        Value imIdx = e.add(reIdx, e.index(1));
        Value re = e.load(x, withLast(lead, reIdx));
        Value im = e.load(x, withLast(lead, imIdx));
        Value imSin = e.mul(im, s);
        e.store(e.sub(e.mul(re, c), imSin), out, withLast(lead, reIdx));
        Value imCos = e.mul(im, c);
        e.store(e.add(e.mul(re, s), imCos), out, withLast(lead, imIdx));
      });
    });
    rewriter.replaceOp(op, e.tensor(out, op.getType()));
    return success();
  }
};

struct LowerActQuant : public V4APattern<ActQuantOp> {
  using V4APattern::V4APattern;
  LogicalResult matchAndRewrite(ActQuantOp op,
                                PatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    Value x = e.buffer(op.getInput());
    int64_t rank = cast<MemRefType>(x.getType()).getRank();
    Value width = e.dim(x, rank - 1);
    Value quantDims = op.getQuantDims() ? e.index(*op.getQuantDims()) : width;
    Value block = e.index(op.getBlockSize());
    bool e4m3 = op.getFormat() == QuantFormat::E4M3;
    double fmax = e4m3 ? kE4M3Max : kE2M1Max;
    Value out = allocLike(e, x, op.getType());
    Value zero = e.index(0);
    // A block's scale (on the GPU found by every thread that needs it: the
    // same value, max being exact in any order, without a reduction across
    // threads).
    auto scaleOf = [&](const SmallVector<Value> &lead, Value begin) {
      // Clamped to the row: a dynamic width the verifier could not check
      // never reads past it.
      Value amax =
          e.loop(begin, e.min(width, e.add(begin, block)),
                 {e.f32(e4m3 ? kE4M3AmaxFloor : kE2M1AmaxFloor)},
                 [&](Value j, ValueRange a) -> SmallVector<Value> {
                   return {e.max(a[0], e.abs(e.load(x, withLast(lead, j))))};
                 })[0];
      Value scale = e.mul(amax, e.f32(1.0f / static_cast<float>(fmax)));
      return op.getPow2Scale() ? e.ceilPowerOfTwo(scale) : scale;
    };
    auto quantized = [&](const SmallVector<Value> &lead, Value scale, Value i) {
      // The rounding saturates at +-fmax: no clamp before it.
      Value v = e.div(e.load(x, withLast(lead, i)), scale);
      v = e4m3 ? e.roundToMinifloat(v, 3, -6, kE4M3Max)
               : e.roundToMinifloat(v, 1, 0, kE2M1Max);
      return e.mul(v, scale);
    };
    if (tokenParallel) {
      // GPU kernels: a thread per group of elements inside one block (a row
      // per thread would walk the whole row alone); the group shares the
      // block's scale, and neighbouring threads read the block's values
      // through the cache.
      int64_t quantWidth = op.getQuantDims().value_or(0);
      int64_t group =
          op.getBlockSize() % kQuantGroup == 0 && quantWidth % kQuantGroup == 0
              ? kQuantGroup
              : 1;
      forEachGroup(e, x, group, [&](SmallVector<Value> lead, Value i0) {
        Value end = e.min(width, e.add(i0, e.index(group)));
        Value inBlocks = e.cmp(arith::CmpIPredicate::ult, i0, quantDims);
        auto ifOp = scf::IfOp::create(e.builder(), e.location(), inBlocks,
                                      /*withElseRegion=*/true);
        OpBuilder::InsertionGuard guard(e.builder());
        e.builder().setInsertionPointToStart(ifOp.thenBlock());
        Value scale = scaleOf(lead, e.mul(e.div(i0, block), block));
        e.loop(i0, end, [&](Value i) {
          e.store(quantized(lead, scale, i), out, withLast(lead, i));
        });
        e.builder().setInsertionPointToStart(ifOp.elseBlock());
        e.loop(i0, end, [&](Value i) {
          e.store(e.load(x, withLast(lead, i)), out, withLast(lead, i));
        });
      });
      rewriter.replaceOp(op, e.tensor(out, op.getType()));
      return success();
    }
    forEachVector(e, x, [&](SmallVector<Value> lead) {
      e.loop(quantDims, width, [&](Value i) {
        e.store(e.load(x, withLast(lead, i)), out, withLast(lead, i));
      });
      e.loop(zero, e.div(quantDims, block), [&](Value blk) {
        Value begin = e.mul(blk, block);
        Value scale = scaleOf(lead, begin);
        e.loop(begin, e.add(begin, block), [&](Value i) {
          e.store(quantized(lead, scale, i), out, withLast(lead, i));
        });
      });
    });
    rewriter.replaceOp(op, e.tensor(out, op.getType()));
    return success();
  }
};

struct LowerHadamard : public V4APattern<HadamardOp> {
  using V4APattern::V4APattern;
  LogicalResult matchAndRewrite(HadamardOp op,
                                PatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    Value x = e.buffer(op.getInput());
    auto type = cast<ShapedType>(op.getType());
    int64_t n = type.getDimSize(type.getRank() - 1);
    Value out = allocLike(e, x, op.getType());
    Value zero = e.index(0), size = e.index(n);
    // The same f32 computation as the specification's normalization.
    float normValue = 1.0f / std::sqrt(static_cast<float>(n));
    Value norm = e.f32(normValue);
    forEachVector(e, x, [&](SmallVector<Value> lead) {
      Value work = e.scratch(size);
      e.loop(zero, size, [&](Value i) {
        e.store(e.load(x, withLast(lead, i)), work, {i});
      });
      for (int64_t h = 1; h < n; h *= 2) {
        Value stride = e.index(h);
        e.loop(zero, e.index(n / (2 * h)), [&](Value blk) {
          Value base = e.mul(blk, e.index(2 * h));
          e.loop(zero, stride, [&](Value j) {
            Value lo = e.add(base, j), hi = e.add(lo, stride);
            Value a = e.load(work, {lo}), c = e.load(work, {hi});
            e.store(e.add(a, c), work, {lo});
            e.store(e.sub(a, c), work, {hi});
          });
        });
      }
      e.loop(zero, size, [&](Value i) {
        e.store(e.mul(e.load(work, {i}), norm), out, withLast(lead, i));
      });
    });
    rewriter.replaceOp(op, e.tensor(out, op.getType()));
    return success();
  }
};

/// (kv, score) of one slot in each of several columns.
using SlotColumns =
    std::function<SmallVector<std::pair<Value, Value>>(Value slot)>;

/// Softmax-weighted pooling over `slots` (kv, score) pairs produced by
/// `slot(s)`, in each of `columns` columns; slots with score -inf
/// contribute nothing; all -inf gives 0. With `atOnce` > 1 (it must divide
/// the slot count) each pass takes that many slots together, their loads
/// first, then folds them in slot order: the same sums in the same order,
/// with the loads in flight together (where a thread's slot reads are most
/// of its time, as on a GPU).
SmallVector<Value> poolColumns(LoopEmitter &e, Value slots, int64_t columns,
                               const SlotColumns &slot, int64_t atOnce = 1) {
  Value zero = e.index(0);
  // Slots [chunk * atOnce, (chunk + 1) * atOnce), in order.
  auto chunkSlots = [&](Value chunk) {
    SmallVector<SmallVector<std::pair<Value, Value>>> values;
    for (int64_t u = 0; u < atOnce; ++u)
      values.push_back(slot(e.add(e.mul(chunk, e.index(atOnce)), e.index(u))));
    return values;
  };
  Value chunks = e.div(slots, e.index(atOnce));
  Value negInf = e.f32(kNegInf), zeroF = e.f32(0.0);
  SmallVector<Value> maxima =
      e.loop(zero, chunks, SmallVector<Value>(columns, negInf),
             [&](Value chunk, ValueRange a) -> SmallVector<Value> {
               SmallVector<Value> max(a.begin(), a.end());
               for (auto &values : chunkSlots(chunk))
                 for (int64_t c = 0; c < columns; ++c)
                   max[c] = e.max(max[c], values[c].second);
               return max;
             });
  SmallVector<Value> sums =
      e.loop(zero, chunks, SmallVector<Value>(2 * columns, zeroF),
             [&](Value chunk, ValueRange a) -> SmallVector<Value> {
               SmallVector<Value> next(a.begin(), a.end());
               for (auto &values : chunkSlots(chunk))
                 for (int64_t c = 0; c < columns; ++c) {
                   auto [kv, score] = values[c];
                   Value w = e.exp(e.sub(score, maxima[c]));
                   next[2 * c] = e.add(next[2 * c], e.mul(kv, w));
                   next[2 * c + 1] = e.add(next[2 * c + 1], w);
                 }
               return next;
             });
  SmallVector<Value> pooled;
  for (int64_t c = 0; c < columns; ++c) {
    Value empty = e.cmp(FP::OEQ, maxima[c], negInf);
    Value mean = e.div(sums[2 * c], sums[2 * c + 1]);
    pooled.push_back(e.select(empty, zeroF, mean));
  }
  return pooled;
}

Value pool(LoopEmitter &e, Value slots,
           const std::function<std::pair<Value, Value>(Value)> &slot,
           int64_t atOnce = 1) {
  return poolColumns(
      e, slots, 1,
      [&](Value s) { return SmallVector<std::pair<Value, Value>>{slot(s)}; },
      atOnce)[0];
}

struct LowerCompress : public V4APattern<CompressOp> {
  using V4APattern::V4APattern;
  LogicalResult matchAndRewrite(CompressOp op,
                                PatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    Value kv = e.buffer(op.getKv()), score = e.buffer(op.getScore());
    Value ape = e.buffer(op.getApe());
    bool overlap = op.getOverlap();
    int64_t ratio = op.getRatio();
    Value r = e.index(ratio);
    Value groups = e.div(e.dim(kv, 0), r);
    Value width = e.dim(kv, 1);
    Value d = overlap ? e.div(width, e.index(2)) : width;
    auto type = cast<RankedTensorType>(op.getType());
    Value out = e.allocShaped(type, {groups, d});
    Value zero = e.index(0);
    Value slots = e.index(overlap ? 2 * ratio : ratio);
    e.loop(zero, groups, [&](Value g) {
      e.loop(zero, d, [&](Value f) {
        Value entry = pool(e, slots, [&](Value s) -> std::pair<Value, Value> {
          // Slot s < ratio (with overlap) is token (g-1)*r + s on the first
          // D features; the others are the current group on the last D.
          Value current = overlap ? e.cmp(IP::sge, s, r) : Value();
          Value slotInGroup = overlap ? e.select(current, e.sub(s, r), s) : s;
          Value groupStart;
          if (overlap) {
            Value previousStart = e.mul(e.sub(g, e.index(1)), r);
            groupStart = e.select(current, e.mul(g, r), previousStart);
          } else {
            groupStart = e.mul(g, r);
          }
          Value feature = overlap ? e.select(current, e.add(d, f), f) : f;
          Value valid = e.cmp(IP::sge, groupStart, zero);
          Value token = e.select(valid, e.add(groupStart, slotInGroup), zero);
          Value k = e.load(kv, {token, feature});
          Value bias = e.load(ape, {slotInGroup, feature});
          Value sc = e.add(e.load(score, {token, feature}), bias);
          return {e.select(valid, k, e.f32(0.0)),
                  e.select(valid, sc, e.f32(kNegInf))};
        });
        e.store(entry, out, {g, f});
      });
    });
    rewriter.replaceOp(op, e.tensor(out, type));
    return success();
  }
};

/// A compressor's state slots, wherever they live: `kv(s, f)` and
/// `score(s, f)` name one value of slot s (as buffer and indices).
struct CompressorSlots {
  std::function<std::pair<Value, SmallVector<Value>>(Value, Value)> kv, score;
};

/// Feeds one token at `position` into a compressor's state: its kv and its
/// score plus ape[position mod ratio] land in the current group's slot (after
/// the previous group's with `overlap`). When the token completes a group,
/// `emit(f, entry)` receives the pooled entry of each feature f < width /
/// coff (then `completed()` runs once), and the completed group becomes the
/// previous one. With `only`, just output feature `only` and the state
/// columns it reads (`only`, and `only + width / 2` with overlap) are fed:
/// features are independent, so each can have its own thread.
void feedCompressor(LoopEmitter &e, const CompressorSlots &state, int64_t ratio,
                    bool overlap, Value width, Value position,
                    const std::function<Value(Value)> &kv,
                    const std::function<Value(Value)> &score, Value ape,
                    const std::function<void(Value, Value)> &emit,
                    const std::function<void()> &completed = {}) {
  Value zero = e.index(0), one = e.index(1), r = e.index(ratio);
  Value d = overlap ? e.div(width, e.index(2)) : width;
  Value current = overlap ? r : zero;
  Value slots = e.index(overlap ? 2 * ratio : ratio);
  auto load = [&](const std::pair<Value, SmallVector<Value>> &at) {
    return e.load(at.first, at.second);
  };
  auto store = [&](Value v, const std::pair<Value, SmallVector<Value>> &at) {
    e.store(v, at.first, at.second);
  };
  Value inGroup = e.rem(position, r);
  Value row = e.add(current, inGroup);
  e.loop(zero, width, [&](Value f) {
    auto kvPlace = state.kv(row, f);
    store(kv(f), kvPlace);
    auto scorePlace = state.score(row, f);
    Value bias = e.load(ape, {inGroup, f});
    store(e.add(score(f), bias), scorePlace);
  });
  e.ifThen(e.cmp(IP::eq, inGroup, e.sub(r, one)), [&] {
    e.loop(zero, d, [&](Value f) {
      Value pooled = pool(e, slots, [&](Value s) -> std::pair<Value, Value> {
        Value feature = f;
        if (overlap) {
          Value previous = e.add(d, f);
          feature = e.select(e.cmp(IP::sge, s, r), previous, f);
        }
        return {load(state.kv(s, feature)), load(state.score(s, feature))};
      });
      emit(f, pooled);
    });
    if (completed)
      completed();
    // The completed group becomes the previous one; current slots reset.
    e.loop(zero, r, [&](Value s) {
      e.loop(zero, width, [&](Value f) {
        Value cur = e.add(current, s);
        if (overlap) {
          auto kvPlace = state.kv(s, f);
          store(load(state.kv(cur, f)), kvPlace);
          auto scorePlace = state.score(s, f);
          store(load(state.score(cur, f)), scorePlace);
        }
        store(e.f32(0.0), state.kv(cur, f));
        store(e.f32(kNegInf), state.score(cur, f));
      });
    });
  });
}

struct LowerCompressStep : public V4APattern<CompressStepOp> {
  using V4APattern::V4APattern;
  LogicalResult matchAndRewrite(CompressStepOp op,
                                PatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    Location loc = op.getLoc();
    Value kv = e.buffer(op.getKv()), score = e.buffer(op.getScore());
    Value ape = e.buffer(op.getApe()), positions = e.buffer(op.getPositions());
    Value oldKv = e.buffer(op.getStateKv());
    Value oldScore = e.buffer(op.getStateScore());
    bool overlap = op.getOverlap();
    Value batch = e.dim(kv, 0), width = e.dim(kv, 1);
    Value d = overlap ? e.div(width, e.index(2)) : width;
    Value stateKv = allocLike(e, oldKv, op.getNewStateKv().getType());
    Value stateScore = allocLike(e, oldScore, op.getNewStateScore().getType());
    memref::CopyOp::create(rewriter, loc, oldKv, stateKv);
    memref::CopyOp::create(rewriter, loc, oldScore, stateScore);
    auto entryType = cast<RankedTensorType>(op.getEntry().getType());
    Value entry = e.allocShaped(entryType, {batch, d});
    auto emittedType = cast<RankedTensorType>(op.getEmitted().getType());
    Value emitted = e.allocShaped(emittedType, {batch});
    Value zero = e.index(0);
    Value falseBit =
        arith::ConstantOp::create(rewriter, loc, rewriter.getBoolAttr(false));
    Value trueBit =
        arith::ConstantOp::create(rewriter, loc, rewriter.getBoolAttr(true));
    e.loop(zero, batch, [&](Value b) {
      e.loop(zero, d, [&](Value f) { e.store(e.f32(0.0), entry, {b, f}); });
      memref::StoreOp::create(rewriter, loc, falseBit, emitted, ValueRange{b});
      CompressorSlots slots;
      slots.kv = [&](Value s, Value f) {
        return std::pair{stateKv, SmallVector<Value>{b, s, f}};
      };
      slots.score = [&](Value s, Value f) {
        return std::pair{stateScore, SmallVector<Value>{b, s, f}};
      };
      feedCompressor(
          e, slots, op.getRatio(), overlap, width, e.loadIndex(positions, {b}),
          [&](Value f) {
            return e.load(kv, {b, f});
          },
          [&](Value f) {
            return e.load(score, {b, f});
          },
          ape,
          [&](Value f, Value pooled) {
            e.store(pooled, entry, {b, f});
          },
          [&] {
            memref::StoreOp::create(rewriter, loc, trueBit, emitted,
                                    ValueRange{b});
          });
    });
    rewriter.replaceOp(
        op, {e.tensor(entry, entryType), e.tensor(emitted, emittedType),
             e.tensor(stateKv, op.getNewStateKv().getType()),
             e.tensor(stateScore, op.getNewStateScore().getType())});
    return success();
  }
};

/// sum_h term(h) over `heads` heads in the order the GPU's indexer family
/// sums them from its MMA fragments (the ops' documented order): partial
/// q in 0..3 adds heads 8i + 2q and 8i + 2q + 1 for i = 0, 1, ... from +0,
/// and the score is (p0 + p2) + (p1 + p3). Heads in order, each term added
/// to its partial only, is that order.
Value sumHeadTerms(LoopEmitter &e, Value heads,
                   const std::function<Value(Value)> &term) {
  SmallVector<Value> zeros(4, e.f32(0.0));
  SmallVector<Value> partials = e.loop(
      e.index(0), heads, zeros,
      [&](Value h, ValueRange p) -> SmallVector<Value> {
        Value t = term(h);
        Value which = e.div(e.rem(h, e.index(8)), e.index(2));
        SmallVector<Value> next;
        for (int64_t q = 0; q < 4; ++q) {
          Value sum = e.add(p[q], t);
          next.push_back(e.select(e.cmp(IP::eq, which, e.index(q)), sum, p[q]));
        }
        return next;
      });
  Value odd = e.add(partials[1], partials[3]);
  return e.add(e.add(partials[0], partials[2]), odd);
}

struct LowerIndexerScore : public V4APattern<IndexerScoreOp> {
  using V4APattern::V4APattern;
  LogicalResult matchAndRewrite(IndexerScoreOp op,
                                PatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    Value q = e.buffer(op.getQuery()), keys = e.buffer(op.getKeys());
    Value weights = e.buffer(op.getWeights());
    Value positions = e.buffer(op.getPositions());
    Value tokens = e.dim(q, 0), heads = e.dim(q, 1), width = e.dim(q, 2);
    Value rows = e.dim(keys, 0);
    auto type = cast<RankedTensorType>(op.getType());
    Value out = e.allocShaped(type, {tokens, rows});
    Value zero = e.index(0), one = e.index(1);
    Value ratio = e.index(op.getRatio());
    e.loop(zero, tokens, [&](Value t) {
      Value valid =
          e.min(rows, e.div(e.add(e.loadIndex(positions, {t}), one), ratio));
      e.loop(zero, rows, [&](Value j) {
        Value total = sumHeadTerms(e, heads, [&](Value h) {
          Value dotValue =
              e.loop(zero, width, {e.f32(0.0)},
                     [&](Value i, ValueRange p) -> SmallVector<Value> {
                       Value key = e.load(keys, {j, i});
                       return {e.add(p[0], e.mul(e.load(q, {t, h, i}), key))};
                     })[0];
          Value weight = e.load(weights, {t, h});
          return e.mul(e.max(dotValue, e.f32(0.0)), weight);
        });
        Value inRange = e.cmp(IP::slt, j, valid);
        e.store(e.select(inRange, total, e.f32(kNegInf)), out, {t, j});
      });
    });
    rewriter.replaceOp(op, e.tensor(out, type));
    return success();
  }
};

using ItemFn = std::function<std::pair<Value, Value>(Value)>;

/// (score, id) of the best eligible item among i = first + j * stride < count
/// ranked strictly after (lastScore, lastId) by (score desc, id asc); id -1
/// when there is none.
SmallVector<Value> bestAfter(LoopEmitter &e, Value lastScore, Value lastId,
                             Value first, Value stride, Value count,
                             const ItemFn &item) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Value minusOne = e.index(-1);
  Value left = e.max(e.sub(count, first), e.index(0));
  Value steps = e.div(e.add(left, e.sub(stride, e.index(1))), stride);
  return e.loop(
      e.index(0), steps, {e.f32(kNegInf), minusOne},
      [&](Value j, ValueRange acc) -> SmallVector<Value> {
        Value i = e.add(first, e.mul(j, stride));
        auto [score, eligible] = item(i);
        Value finite = e.cmp(FP::ONE, score, e.f32(kNegInf));
        Value laterId = e.cmp(IP::sgt, i, lastId);
        Value tiesLast = arith::AndIOp::create(
            b, loc, e.cmp(FP::OEQ, score, lastScore), laterId);
        Value afterLast = arith::OrIOp::create(
            b, loc, e.cmp(FP::OLT, score, lastScore), tiesLast);
        Value larger = e.cmp(FP::OGT, score, acc[0]);
        Value better = arith::OrIOp::create(
            b, loc, e.cmp(IP::eq, acc[1], minusOne), larger);
        Value ranked = arith::AndIOp::create(b, loc, afterLast, better);
        Value take = arith::AndIOp::create(
            b, loc, arith::AndIOp::create(b, loc, eligible, finite), ranked);
        return {e.select(take, score, acc[0]), e.select(take, i, acc[1])};
      });
}

/// Selects, per row, up to `k` of `count` items by (score desc, id asc):
/// pass n takes the best item ranked strictly after the one pass n-1 took.
/// `item(i)` gives (score, eligible); -1 fills unused slots. With `lanes`,
/// each pass scans the items in that many interleaved parallel lanes and
/// then takes the best of the lanes' bests: the same item, since (score
/// desc, id asc) orders every item.
void selectBest(LoopEmitter &e, Value out, Value row, Value k, Value count,
                const ItemFn &item, int64_t lanes = 0) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Value zero = e.index(0), one = e.index(1), minusOne = e.index(-1);
  Value inf = e.f32(std::numeric_limits<double>::infinity());
  Value laneScores, laneIds, laneCount = e.index(lanes);
  if (lanes) {
    laneScores = memref::AllocOp::create(
        b, loc, MemRefType::get({lanes}, b.getF32Type()));
    laneIds = memref::AllocOp::create(b, loc,
                                      MemRefType::get({lanes}, b.getI64Type()));
  }
  e.loop(zero, k, {inf, minusOne},
         [&](Value slot, ValueRange last) -> SmallVector<Value> {
           Value lastScore = last[0], lastId = last[1];
           SmallVector<Value> best;
           if (!lanes) {
             best = bestAfter(e, lastScore, lastId, zero, one, count, item);
           } else {
             e.parallelLoop(zero, laneCount, [&](Value lane) {
               SmallVector<Value> mine = bestAfter(e, lastScore, lastId, lane,
                                                   laneCount, count, item);
               e.store(mine[0], laneScores, {lane});
               e.storeInt(mine[1], laneIds, {lane});
             });
             best =
                 e.loop(zero, laneCount, {e.f32(kNegInf), minusOne},
                        [&](Value lane, ValueRange acc) -> SmallVector<Value> {
                          Value score = e.load(laneScores, {lane});
                          Value id = e.loadIndex(laneIds, {lane});
                          Value earlier = e.cmp(IP::slt, id, acc[1]);
                          Value tie = arith::AndIOp::create(
                              b, loc, e.cmp(FP::OEQ, score, acc[0]), earlier);
                          Value ahead = arith::OrIOp::create(
                              b, loc, e.cmp(FP::OGT, score, acc[0]), tie);
                          Value better = arith::OrIOp::create(
                              b, loc, e.cmp(IP::eq, acc[1], minusOne), ahead);
                          Value take = arith::AndIOp::create(
                              b, loc, e.cmp(IP::ne, id, minusOne), better);
                          return {e.select(take, score, acc[0]),
                                  e.select(take, id, acc[1])};
                        });
           }
           e.storeInt(best[1], out, {row, slot});
           Value found = e.cmp(IP::ne, best[1], minusOne);
           return {e.select(found, best[0], lastScore),
                   e.select(found, best[1],
                            e.index(std::numeric_limits<int32_t>::max()))};
         });
}

/// Lanes of a selection pass on the GPU: the threads of a block.
constexpr int64_t kSelectionLanes = 128;

struct LowerTopK : public V4APattern<TopKOp> {
  using V4APattern::V4APattern;
  LogicalResult matchAndRewrite(TopKOp op,
                                PatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    Value scores = e.buffer(op.getScores());
    Value candidates =
        op.getCandidates() ? e.buffer(op.getCandidates()) : Value();
    Value tokens = e.dim(scores, 0), columns = e.dim(scores, 1);
    auto type = cast<RankedTensorType>(op.getType());
    Value out = e.allocShaped(type, {tokens});
    Value zero = e.index(0);
    Value blockSize = e.index(op.getCandidateBlockSize().value_or(1));
    Value trueBit = arith::ConstantOp::create(rewriter, op.getLoc(),
                                              rewriter.getBoolAttr(true));
    e.parallelLoop(zero, tokens, [&](Value t) {
      selectBest(
          e, out, t, e.index(op.getK()), columns,
          [&](Value j) -> std::pair<Value, Value> {
            Value eligible = trueBit;
            if (candidates) {
              Value block = e.div(j, blockSize);
              Value none = e.cmp(IP::ne, zero, zero);
              Value listed =
                  e.loop(zero, e.dim(candidates, 1), {none},
                         [&](Value c, ValueRange a) -> SmallVector<Value> {
                           Value id = e.loadIndex(candidates, {t, c});
                           return {arith::OrIOp::create(
                               e.builder(), e.location(), a[0],
                               e.cmp(IP::eq, id, block))};
                         })[0];
              eligible = listed;
            }
            return {e.load(scores, {t, j}), eligible};
          },
          tokenParallel ? kSelectionLanes : 0);
    });
    rewriter.replaceOp(op, e.tensor(out, type));
    return success();
  }
};

struct LowerBlockTopK : public V4APattern<BlockTopKOp> {
  using V4APattern::V4APattern;
  LogicalResult matchAndRewrite(BlockTopKOp op,
                                PatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    Value scores = e.buffer(op.getScores());
    Value tokens = e.dim(scores, 0), columns = e.dim(scores, 1);
    Value blockSize = e.index(op.getBlockSize());
    Value blocks =
        e.div(e.add(columns, e.sub(blockSize, e.index(1))), blockSize);
    auto type = cast<RankedTensorType>(op.getType());
    Value out = e.allocShaped(type, {tokens});
    Value trueBit = arith::ConstantOp::create(rewriter, op.getLoc(),
                                              rewriter.getBoolAttr(true));
    e.parallelLoop(e.index(0), tokens, [&](Value t) {
      selectBest(
          e, out, t, e.index(op.getNumBlocks()), blocks,
          [&](Value blk) -> std::pair<Value, Value> {
            Value begin = e.mul(blk, blockSize);
            Value end = e.min(columns, e.add(begin, blockSize));
            Value m = e.loop(begin, end, {e.f32(kNegInf)},
                             [&](Value j, ValueRange a) -> SmallVector<Value> {
                               return {e.max(a[0], e.load(scores, {t, j}))};
                             })[0];
            return {m, trueBit};
          },
          tokenParallel ? kSelectionLanes : 0);
    });
    rewriter.replaceOp(op, e.tensor(out, type));
    return success();
  }
};

/// keys = RMSNorm(latent @ k_proj^T, k_norm): a bf16 projection, then the
/// weighted norm, as the ops that define it.
struct DecomposeProjectIndexKeys : public V4APattern<ProjectIndexKeysOp> {
  using V4APattern::V4APattern;
  LogicalResult matchAndRewrite(ProjectIndexKeysOp op,
                                PatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getType());
    auto projected =
        RankedTensorType::get(type.getShape(), rewriter.getBF16Type());
    Value proj = LinearOp::create(rewriter, op.getLoc(), projected,
                                  op.getLatent(), op.getKProj(), Value());
    rewriter.replaceOpWithNewOp<RMSNormOp>(op, type, proj, op.getKNorm(),
                                           op.getEpsAttr());
    return success();
  }
};

struct LowerWindowStore : public V4APattern<WindowStoreOp> {
  using V4APattern::V4APattern;
  LogicalResult matchAndRewrite(WindowStoreOp op,
                                PatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    Value ring = e.buffer(op.getRing()), rows = e.buffer(op.getRows());
    Value positions = e.buffer(op.getPositions());
    Value out = allocLike(e, ring, op.getType());
    memref::CopyOp::create(rewriter, op.getLoc(), ring, out);
    Value zero = e.index(0), window = e.dim(ring, 0), width = e.dim(ring, 1);
    e.loop(zero, e.dim(rows, 0), [&](Value t) {
      Value slot = e.rem(e.loadIndex(positions, {t}), window);
      e.loop(zero, width, [&](Value f) {
        e.store(e.load(rows, {t, f}), out, {slot, f});
      });
    });
    rewriter.replaceOp(op, e.tensor(out, op.getType()));
    return success();
  }
};

struct LowerWindowIndices : public V4APattern<WindowIndicesOp> {
  using V4APattern::V4APattern;
  LogicalResult matchAndRewrite(WindowIndicesOp op,
                                PatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    Value positions = e.buffer(op.getPositions());
    Value tokens = e.dim(positions, 0);
    auto type = cast<RankedTensorType>(op.getType());
    Value out = e.allocShaped(type, {tokens});
    Value zero = e.index(0), one = e.index(1);
    Value window = e.index(op.getWindow());
    e.loop(zero, tokens, [&](Value t) {
      Value i = e.loadIndex(positions, {t});
      Value first = e.max(zero, e.add(e.sub(i, window), one));
      e.loop(zero, window, [&](Value s) {
        Value p = e.add(first, s);
        Value used = e.cmp(IP::sle, p, i);
        e.storeInt(e.select(used, e.rem(p, window), e.index(-1)), out, {t, s});
      });
    });
    rewriter.replaceOp(op, e.tensor(out, type));
    return success();
  }
};

/// acc[accBase + i] += p * rows[rowBase + i] for i < width (contiguous f32
/// buffers): kLanes at a time in vectors (when `vectorize`), then one by
/// one. Each element's additions keep their order.
void accumulateRow(LoopEmitter &e, Value acc, Value accBase, Value p,
                   Value rows, Value rowBase, Value width, bool vectorize) {
  Value zero = e.index(0);
  Value full = zero;
  if (vectorize) {
    OpBuilder &b = e.builder();
    Location loc = e.location();
    Value lanes = e.index(kLanes);
    auto vectorType = VectorType::get({kLanes}, b.getF32Type());
    Value splat = vector::BroadcastOp::create(b, loc, vectorType, p);
    full = e.mul(e.div(width, lanes), lanes);
    e.loop(zero, e.div(width, lanes), [&](Value chunk) {
      Value i = e.mul(chunk, lanes);
      Value values = vector::LoadOp::create(b, loc, vectorType, rows,
                                            ValueRange{e.add(rowBase, i)});
      Value at = e.add(accBase, i);
      Value sum =
          vector::LoadOp::create(b, loc, vectorType, acc, ValueRange{at});
      vector::StoreOp::create(b, loc, e.add(sum, e.mul(splat, values)), acc,
                              ValueRange{at});
    });
  }
  e.loop(full, width, [&](Value i) {
    Value at = e.add(accBase, i);
    Value weighted = e.mul(p, e.load(rows, {e.add(rowBase, i)}));
    e.store(e.add(e.load(acc, {at}), weighted), acc, {at});
  });
}

/// The f32 scratch of one token's attention.
struct AttentionScratch {
  /// Per head: its accumulator row [heads, D] and its logits [heads, slots].
  Value acc, logits;
  /// The token's rows as one contiguous [slots, D] buffer.
  Value table;
  /// The token's query transposed, qT[i * heads + h], so that one vector
  /// load holds kLanes heads (only when vectorized).
  Value qT;
};

/// Multi-query attention with a sink for every token of `q` [T, H, D] over
/// `slots` rows: `gather(t, table)` copies token t's rows into `table`
/// ([slots, D] f32, row s at s * D) and `used(t, s)` says which slots hold a
/// row. Writes `out` [T, H, D]. Tokens run in turn with heads in kLanes-wide
/// vectors, or (`tokenParallel`) in parallel with scalar heads.
void emitAttention(LoopEmitter &e, Value q, Value sink, double scaleValue,
                   Value out, Value slots,
                   const std::function<void(Value, Value)> &gather,
                   const std::function<Value(Value, Value)> &used,
                   bool tokenParallel) {
  Value tokens = e.dim(q, 0), heads = e.dim(q, 1), width = e.dim(q, 2);
  bool vectorize = !tokenParallel;
  Value rowsOrOne = e.max(slots, e.index(1));
  Value accFloats = e.mul(heads, width), logitFloats = e.mul(heads, rowsOrOne);
  Value tableFloats = e.mul(rowsOrOne, width), qFloats = e.mul(width, heads);
  auto allocate = [&] {
    AttentionScratch s{e.scratch(accFloats), e.scratch(logitFloats),
                       e.scratch(tableFloats), Value()};
    if (vectorize)
      s.qT = e.scratch(qFloats);
    return s;
  };
  std::optional<AttentionScratch> shared;
  if (!tokenParallel)
    shared = allocate();
  Value zero = e.index(0);
  Value scale = e.f32(scaleValue);
  Value negInf = e.f32(kNegInf);
  Value lanes = e.index(kLanes);
  Value groups = vectorize ? e.div(heads, lanes) : zero;
  OpBuilder &b = e.builder();
  Location loc = e.location();
  auto vectorType = VectorType::get({kLanes}, b.getF32Type());
  tokenLoop(e, tokenParallel, zero, tokens, [&](Value t) {
    AttentionScratch scratch = shared ? *shared : allocate();
    Value acc = scratch.acc, logits = scratch.logits, table = scratch.table;
    Value qT = scratch.qT;
    gather(t, table);
    if (vectorize) {
      e.loop(zero, heads, [&](Value h) {
        e.loop(zero, width, [&](Value i) {
          Value at = e.add(e.mul(i, heads), h);
          e.store(e.load(q, {t, h, i}), qT, {at});
        });
      });
      // Pass 1a: every slot's logit, kLanes heads per vector; each lane sums
      // its head's products in order, as the reference does.
      e.parallelLoop(zero, groups, [&](Value g) {
        Value h0 = e.mul(g, lanes);
        e.loop(zero, slots, [&](Value s) {
          Value rowBase = e.mul(s, width);
          Value dot = e.loop(
              zero, width,
              {vector::BroadcastOp::create(b, loc, vectorType, e.f32(0.0))},
              [&](Value i, ValueRange d) -> SmallVector<Value> {
                Value query = vector::LoadOp::create(
                    b, loc, vectorType, qT,
                    ValueRange{e.add(e.mul(i, heads), h0)});
                Value key = vector::BroadcastOp::create(
                    b, loc, vectorType, e.load(table, {e.add(rowBase, i)}));
                return {e.add(d[0], e.mul(query, key))};
              })[0];
          Value logit = e.mul(
              vector::BroadcastOp::create(b, loc, vectorType, scale), dot);
          for (int64_t j = 0; j < kLanes; ++j) {
            Value at = e.add(e.mul(e.add(h0, e.index(j)), slots), s);
            e.store(
                vector::ExtractOp::create(b, loc, logit, ArrayRef<int64_t>{j}),
                logits, {at});
          }
        });
      });
    }
    // Pass 1b: the heads left over (all of them unvectorized), one at a time.
    e.parallelLoop(e.mul(groups, lanes), heads, [&](Value h) {
      e.loop(zero, slots, [&](Value s) {
        Value rowBase = e.mul(s, width);
        Value dot =
            e.loop(zero, width, {e.f32(0.0)},
                   [&](Value i, ValueRange d) -> SmallVector<Value> {
                     Value k = e.load(table, {e.add(rowBase, i)});
                     return {e.add(d[0], e.mul(e.load(q, {t, h, i}), k))};
                   })[0];
        Value at = e.add(e.mul(h, slots), s);
        e.store(e.mul(scale, dot), logits, {at});
      });
    });
    e.parallelLoop(zero, heads, [&](Value h) {
      Value accBase = e.mul(h, width), logitBase = e.mul(h, slots);
      // The maximum logit over the selected rows.
      Value m = e.loop(zero, slots, {negInf},
                       [&](Value s, ValueRange a) -> SmallVector<Value> {
                         Value logit = e.load(logits, {e.add(logitBase, s)});
                         Value larger = e.max(a[0], logit);
                         return {e.select(used(t, s), larger, a[0])};
                       })[0];
      e.loop(zero, width,
             [&](Value i) { e.store(e.f32(0.0), acc, {e.add(accBase, i)}); });
      Value empty = e.cmp(FP::OEQ, m, negInf);
      // Pass 2: accumulate in selection order, as the reference does.
      Value den = e.loop(zero, slots, {e.exp(e.sub(e.load(sink, {h}), m))},
                         [&](Value s, ValueRange a) -> SmallVector<Value> {
                           Value isUsed = used(t, s);
                           Value w = e.exp(
                               e.sub(e.load(logits, {e.add(logitBase, s)}), m));
                           // The PV product takes bf16 probabilities; the
                           // denominator keeps them in f32 (spec 2b).
                           Value p = e.roundBF16(w);
                           e.ifThen(isUsed, [&] {
                             accumulateRow(e, acc, accBase, p, table,
                                           e.mul(s, width), width, vectorize);
                           });
                           return {e.select(isUsed, e.add(a[0], w), a[0])};
                         })[0];
      e.loop(zero, width, [&](Value i) {
        Value o = e.select(empty, e.f32(0.0),
                           e.div(e.load(acc, {e.add(accBase, i)}), den));
        e.store(o, out, {t, h, i});
      });
    });
  });
}

struct LowerSparseAttention : public V4APattern<SparseAttentionOp> {
  using V4APattern::V4APattern;
  LogicalResult matchAndRewrite(SparseAttentionOp op,
                                PatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    Value q = e.buffer(op.getQuery()), kv = e.buffer(op.getKv());
    Value indices = e.buffer(op.getIndices()), sink = e.buffer(op.getSink());
    Value width = e.dim(q, 2), slots = e.dim(indices, 1);
    Value out = allocLike(e, q, op.getType());
    Value zero = e.index(0), minusOne = e.index(-1);
    auto used = [&](Value t, Value s) {
      return e.cmp(IP::ne, e.loadIndex(indices, {t, s}), minusOne);
    };
    emitAttention(
        e, q, sink, op.getScale().convertToDouble(), out, slots,
        [&](Value t, Value table) {
          e.loop(zero, slots, [&](Value s) {
            Value listed = e.loadIndex(indices, {t, s});
            Value row = e.select(used(t, s), listed, zero);
            e.loop(zero, width, [&](Value i) {
              Value at = e.add(e.mul(s, width), i);
              e.store(e.load(kv, {row, i}), table, {at});
            });
          });
        },
        used, tokenParallel);
    rewriter.replaceOp(op, e.tensor(out, op.getType()));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Batched steps: metadata, and ops that address every sequence's cache rows
//===----------------------------------------------------------------------===//

struct LowerStepWindow : public V4APattern<StepWindowOp> {
  using V4APattern::V4APattern;
  LogicalResult matchAndRewrite(StepWindowOp op,
                                PatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    StepTokens in = {e.buffer(op.getPositions()), e.buffer(op.getSlots()),
                     e.buffer(op.getFirst()), e.buffer(op.getLast())};
    Value tokens = e.dim(in.positions, 0);
    Value attend = e.allocShaped(op.getAttend().getType(), {tokens});
    Value store = e.allocShaped(op.getStore().getType(), {tokens});
    // GPU kernels: a thread per (token, group of window rows), not per
    // token.
    int64_t window = op.getWindow();
    if (tokenParallel)
      e.parallelLoop(tokens, e.index(window / windowRowsPerThread(window)),
                     [&](Value t, Value group) {
                       emitWindowRows(e, in, tokens, window, attend, store, t,
                                      group);
                     });
    else
      e.parallelLoop(e.index(0), tokens, [&](Value t) {
        emitWindowRows(e, in, tokens, window, attend, store, t);
      });
    rewriter.replaceOp(op, {e.tensor(attend, op.getAttend().getType()),
                            e.tensor(store, op.getStore().getType())});
    return success();
  }
};

struct LowerStepCompressed : public V4APattern<StepCompressedOp> {
  using V4APattern::V4APattern;
  LogicalResult matchAndRewrite(StepCompressedOp op,
                                PatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    StepTokens in = {e.buffer(op.getPositions()), e.buffer(op.getSlots()),
                     Value(), Value()};
    Value tokens = e.dim(in.positions, 0);
    Value base = e.allocShaped(op.getBase().getType(), {tokens});
    Value complete = e.allocShaped(op.getComplete().getType(), {tokens});
    e.parallelLoop(e.index(0), tokens, [&](Value t) {
      emitCompressedRows(e, in, op.getRatio(), op.getSlotRows(), base, complete,
                         t);
    });
    rewriter.replaceOp(op, {e.tensor(base, op.getBase().getType()),
                            e.tensor(complete, op.getComplete().getType())});
    return success();
  }
};

struct LowerVisibleRows : public V4APattern<VisibleRowsOp> {
  using V4APattern::V4APattern;
  LogicalResult matchAndRewrite(VisibleRowsOp op,
                                PatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    Value positions = e.buffer(op.getPositions());
    Value tokens = e.dim(positions, 0);
    int64_t ratio = op.getRatio();
    Value width = boundRows(e, e.buffer(op.getContext()), ratio);
    Value out = e.allocShaped(op.getType(), {tokens, width});
    Value zero = e.index(0), one = e.index(1);
    auto fill = [&](Value t, Value j) {
      Value visible =
          e.div(e.add(e.loadIndex(positions, {t}), one), e.index(ratio));
      e.storeInt(e.select(e.cmp(IP::slt, j, visible), j, e.index(-1)), out,
                 {t, j});
    };
    if (tokenParallel)
      e.parallelLoop(tokens, width, fill);
    else
      e.parallelLoop(zero, tokens, [&](Value t) {
        e.loop(zero, width, [&](Value j) { fill(t, j); });
      });
    rewriter.replaceOp(op, e.tensor(out, op.getType()));
    return success();
  }
};

/// The f32 view of a cache's bytes.
Value floatsOf(LoopEmitter &e, Value bytes) {
  OpBuilder &b = e.builder();
  auto type = MemRefType::get({ShapedType::kDynamic}, b.getF32Type());
  return memref::ViewOp::create(b, e.location(), type, bytes, e.index(0),
                                ValueRange{e.div(e.dim(bytes, 0), e.index(4))});
}

/// Patterns over cache bytes: type conversions, and the token layout.
template <typename OpTy>
struct CachePattern : public OpConversionPattern<OpTy> {
  CachePattern(const TypeConverter &converter, MLIRContext *context,
               bool tokenParallel)
      : OpConversionPattern<OpTy>(converter, context),
        tokenParallel(tokenParallel) {}
  bool tokenParallel;
};

/// State rows one thread of the compressor's state kernel loads together.
constexpr int64_t kStateRowsAtOnce = 8;
/// Group slots one thread of the compressor's pool kernel loads together,
/// and when every slot is a row of the step (no packing checks: three
/// loads a slot).
constexpr int64_t kPoolSlotsAtOnce = 8;
constexpr int64_t kPoolSlotsFromStepAtOnce = 32;
/// Runs of tokens the compressor's state kernel spreads a step over: a
/// token a thread up to 16,384 tokens; with overlap (ratio 4, whose walk
/// measured faster in runs of eight tokens at prefill 8,192) 1,024 runs.
constexpr int64_t kStateThreadRows = 16384;
constexpr int64_t kOverlapStateThreadRows = 1024;
/// Steps of fewer tokens than this (decode, and short prefill chunks) load
/// each token's own values in the compressor's state kernel before its
/// checks (a token a thread;
/// measured on an H100, bench/kernels-notes.md: ratio-4 state 5.0 -> 4.5 us
/// at decode 128 x 64K, at the price of 136 registers where 127 were).
constexpr int64_t kFewStateTokens = 1024;
static_assert(kFewStateTokens <= kOverlapStateThreadRows &&
              kFewStateTokens <= kStateThreadRows);
/// Columns one thread of the compressor's state kernel writes.
constexpr int64_t kStateColumnsPerThread = 8;
/// Features one thread of the compressor's pool kernel pools over wide
/// rows with overlap, and the width from which a row counts as wide.
constexpr int64_t kPoolFeaturesPerThread = 4;
constexpr int64_t kWidePoolRow = 512;
/// Tokens one thread of the compressor's pool kernel takes in turn where
/// it pools one feature, from steps of this many tokens (prefill chunks;
/// a decode step of as many sequences too): most of
/// a prefill's tokens complete no group and only store zeros, and their
/// threads' waves were a fifth of the ratio-128 pool's time (measured on
/// an H100 at prefill 8,192, bench/kernels-notes.md: 42.3 -> 33.6 us, the
/// indexer's pool 15.6 -> 13.2; with four features a thread, the ratio-4
/// pool, 35.5 -> 36.8, so it keeps a token a thread).
constexpr int64_t kPoolTokensPerThread = 8;
constexpr int64_t kPoolManyTokens = 1024;

/// The compressor over the packed tokens without a walk: what each
/// completing token pools, and the state each sequence ends with, follow
/// from the step's rows and the state the step starts from. The first
/// parallel loop (token, feature) pools every group a token completes; the
/// second (token, column) has each sequence's last token write the state
/// rows that change (each thread reads its rows before it writes them).
/// The sums run in the order of feedCompressor's, so the results are the
/// same bits as the tokens fed in order.
void poolInParallel(LoopEmitter &e, Value kv, Value score, Value ape,
                    Value positions, Value slotIds, Value state, Value out,
                    int64_t ratio, bool overlap, Value stateFloats) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Value zero = e.index(0), one = e.index(1), r = e.index(ratio);
  Value tokens = e.dim(kv, 0), width = e.dim(kv, 1);
  Value d = overlap ? e.div(width, e.index(2)) : width;
  int64_t slots = overlap ? 2 * ratio : ratio;
  Value slotCount = e.index(slots);
  Value current = overlap ? r : zero;
  auto both = [&](Value x, Value y) {
    return arith::AndIOp::create(b, loc, x, y).getResult();
  };
  // Token t's view of its sequence: whether position q is a token of this
  // step (packed at t - (p - q)), and the row it reads.
  struct Token {
    Value t, p, slot, base, scoreBase;
  };
  auto tokenAt = [&](Value t) {
    Token k{t, e.loadIndex(positions, {t}), e.loadIndex(slotIds, {t}), {}, {}};
    k.base = e.mul(k.slot, stateFloats);
    k.scoreBase = e.add(k.base, e.mul(slotCount, width));
    return k;
  };
  // Clamped to the step: positions after a sequence's last token would
  // name rows past it (their values are never selected).
  Value lastToken = e.sub(tokens, one);
  auto packedIndex = [&](const Token &k, Value q) {
    return e.min(e.max(e.sub(k.t, e.sub(k.p, q)), zero), lastToken);
  };
  auto inStep = [&](const Token &k, Value q) {
    Value u = e.sub(k.t, e.sub(k.p, q));
    Value at = packedIndex(k, q);
    Value atPosition = e.cmp(IP::eq, e.loadIndex(positions, {at}), q);
    Value ofSequence = e.cmp(IP::eq, e.loadIndex(slotIds, {at}), k.slot);
    return both(both(e.cmp(IP::sge, u, zero), ofSequence), atPosition);
  };
  // (kv, score + ape) of position q = group * ratio + i in column c: the
  // step's row, or the state's. A token before the step sits in the
  // state's current rows when it shares a group with the step's first
  // token, else in its previous rows; that first token shares q's group
  // exactly when the group's last position is in the step or after p.
  // The place is the same for every column: found once, read per column.
  struct Place {
    Value i, stepRow, stateRow, fromStep;
  };
  auto placeOf = [&](const Token &k, Value group, Value i) {
    Value q = e.add(e.mul(group, r), i);
    Value last = e.sub(e.mul(e.add(group, one), r), one);
    Value lastInStep = inStep(k, last);
    Value sameGroup =
        arith::OrIOp::create(b, loc, e.cmp(IP::sge, last, k.p), lastInStep);
    Value row = e.add(e.select(sameGroup, current, zero), i);
    return Place{i, packedIndex(k, q), e.mul(row, width), inStep(k, q)};
  };
  auto valueIn = [&](const Token &k, const Place &place,
                     Value c) -> std::pair<Value, Value> {
    Value stepKv = e.load(kv, {place.stepRow, c});
    Value bias = e.load(ape, {place.i, c});
    Value stepScore = e.add(e.load(score, {place.stepRow, c}), bias);
    Value at = e.add(place.stateRow, c);
    Value stateKv = e.load(state, {e.add(k.base, at)});
    Value stateScore = e.load(state, {e.add(k.scoreBase, at)});
    return {e.select(place.fromStep, stepKv, stateKv),
            e.select(place.fromStep, stepScore, stateScore)};
  };
  // Columns a thread takes of rows of `columns` (1 when the width is not
  // static).
  int64_t staticWidth = cast<MemRefType>(kv.getType()).getDimSize(1);
  auto perThread = [&](int64_t columns, int64_t wanted) -> int64_t {
    return ShapedType::isDynamic(staticWidth) ? 1 : std::gcd(columns, wanted);
  };
  // Slot s of the group a token completes: its group, row in the group and
  // column (with overlap the previous group's rows in columns [0, d), the
  // current's in [d, 2d)).
  auto slotPlace = [&](Value group, Value s,
                       Value f) -> std::tuple<Value, Value, Value> {
    if (!overlap)
      return {group, s, f};
    Value previous = e.cmp(IP::slt, s, r);
    return {e.select(previous, e.sub(group, one), group),
            e.select(previous, s, e.sub(s, r)),
            e.select(previous, f, e.add(d, f))};
  };
  // A thread per token and group of features (apart by d / featureGroups,
  // so that a warp's accesses stay contiguous) where most threads belong to
  // tokens that complete no group and only store zeros: with overlap over
  // wide rows (ratio 4, d 512). Measured on an H100 at prefill 8,192
  // (bench/kernels-notes.md): four features a thread took that pool from
  // 47.9 to 35.4 us (a thread per feature waited for its token's position
  // in every warp, over ~29 waves), and made the ratio-128 pool (a long
  // chain of slots in the few completing threads) 44 -> 57 us and the
  // indexer's (d 128) 15.1 -> 16.1.
  int64_t poolWidth = overlap ? staticWidth / 2 : staticWidth;
  int64_t featuresPerThread = overlap && poolWidth >= kWidePoolRow
                                  ? perThread(poolWidth, kPoolFeaturesPerThread)
                                  : 1;
  Value featureGroups = e.div(d, e.index(featuresPerThread));
  auto featuresOf = [&](Value g) {
    SmallVector<Value> features;
    for (int64_t u = 0; u < featuresPerThread; ++u)
      features.push_back(e.add(g, e.mul(e.index(u), featureGroups)));
    return features;
  };
  auto poolToken = [&](Value t, Value g) {
    SmallVector<Value> features = featuresOf(g);
    Token k = tokenAt(t);
    Value group = e.div(k.p, r);
    Value lastOfGroup = e.sub(r, one);
    Value completes = e.cmp(IP::eq, e.rem(k.p, r), lastOfGroup);
    for (Value f : features)
      e.store(e.f32(0.0), out, {t, f});
    // A completing token's thread reads every slot of its group, several
    // at once.
    int64_t atOnce = std::gcd(slots, kPoolSlotsAtOnce);
    auto poolSlots = [&](const SlotColumns &slot, int64_t together) {
      SmallVector<Value> pooled =
          poolColumns(e, slotCount, featuresPerThread, slot, together);
      for (auto [f, value] : llvm::zip(features, pooled))
        e.store(value, out, {t, f});
    };
    // slotPlace for the thread's features.
    auto slotColumns = [&](Value s) {
      auto [g, i, offset] = slotPlace(group, s, zero);
      SmallVector<Value> columns;
      for (Value f : features)
        columns.push_back(e.add(offset, f));
      return std::tuple{g, i, columns};
    };
    auto fromStepOrState = [&](Value s) {
      auto [g, i, columns] = slotColumns(s);
      Place place = placeOf(k, g, i);
      SmallVector<std::pair<Value, Value>> values;
      for (Value c : columns)
        values.push_back(valueIn(k, place, c));
      return values;
    };
    // With more slots than one round of loads takes, a group whose first
    // slot's position is in the step has every slot there (a sequence's
    // tokens of a step are consecutive and end at or after this one), and
    // slot s is the step's row t - (p - q): no state and no packing loads
    // (most groups of a prefill). Measured on an H100 (bench/kernels-
    // notes.md): the ratio-128 pool at prefill 8,192 103 -> 61 us; with a
    // single round (ratio 4) the check's own loads cost more than it saves.
    if (slots <= atOnce) {
      e.ifThen(completes, [&] { poolSlots(fromStepOrState, atOnce); });
      return;
    }
    e.ifThen(completes, [&] {
      Value firstPosition =
          overlap ? e.mul(e.sub(group, one), r) : e.mul(group, r);
      auto ifOp = scf::IfOp::create(b, loc, inStep(k, firstPosition),
                                    /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      poolSlots(
          [&](Value s) {
            auto [g, i, columns] = slotColumns(s);
            Value u = e.sub(k.t, e.sub(k.p, e.add(e.mul(g, r), i)));
            SmallVector<std::pair<Value, Value>> values;
            for (Value c : columns) {
              Value kvValue = e.load(kv, {u, c});
              Value bias = e.load(ape, {i, c});
              values.push_back({kvValue, e.add(e.load(score, {u, c}), bias)});
            }
            return values;
          },
          std::gcd(slots, kPoolSlotsFromStepAtOnce));
      b.setInsertionPointToStart(ifOp.elseBlock());
      poolSlots(fromStepOrState, atOnce);
    });
  };
  if (featuresPerThread > 1) {
    e.parallelLoop(tokens, featureGroups, poolToken);
  } else {
    // A thread takes consecutive tokens (one at decode, where each may
    // complete a group and chains would add up).
    Value tokensPerThread =
        e.select(e.cmp(IP::sge, tokens, e.index(kPoolManyTokens)),
                 e.index(kPoolTokensPerThread), one);
    Value tokenRuns =
        arith::CeilDivSIOp::create(b, loc, tokens, tokensPerThread);
    e.parallelLoop(tokenRuns, featureGroups, [&](Value run, Value g) {
      Value first = e.mul(run, tokensPerThread);
      e.loop(zero, tokensPerThread, [&](Value u) {
        Value t = e.add(first, u);
        e.ifThen(e.cmp(IP::slt, t, tokens), [&] { poolToken(t, g); });
      });
    });
  }
  auto completedBefore = [&](const Token &k, Value groupStart) {
    Value previousInStep = inStep(k, e.max(e.sub(groupStart, one), zero));
    return both(e.cmp(IP::sgt, groupStart, zero), previousInStep);
  };
  auto storeRow = [&](const Token &k, Value row, Value c, Value kvValue,
                      Value scoreValue) {
    Value at = e.add(e.mul(row, width), c);
    e.store(kvValue, state, {e.add(k.base, at)});
    e.store(scoreValue, state, {e.add(k.scoreBase, at)});
  };
  // Rows `rows` of the completed group `group` move to the previous rows,
  // every column's loads before the stores.
  auto movePrevious = [&](const Token &k, Value group, ArrayRef<Value> rows,
                          ArrayRef<Value> columns) {
    SmallVector<std::tuple<Value, Value, Value, Value>> moved;
    for (Value i : rows) {
      Place place = placeOf(k, group, i);
      for (Value c : columns) {
        auto [kvValue, scoreValue] = valueIn(k, place, c);
        moved.push_back({i, c, kvValue, scoreValue});
      }
    }
    for (auto &[i, c, kvValue, scoreValue] : moved)
      storeRow(k, i, c, kvValue, scoreValue);
  };
  auto notValue = [&](Value x) {
    return arith::XOrIOp::create(b, loc, x,
                                 arith::ConstantIntOp::create(b, loc, 1, 1))
        .getResult();
  };
  auto writeState = [&](Value t, ArrayRef<Value> columns, bool ownFirst) {
    Token k = tokenAt(t);
    Value group = e.div(k.p, r);
    Value groupStart = e.mul(group, r);
    Value i = e.sub(k.p, groupStart);
    auto loadOwnValues = [&] {
      SmallVector<std::pair<Value, Value>> values;
      for (Value c : columns) {
        Value kvValue = e.load(kv, {t, c});
        Value bias = e.load(ape, {i, c});
        values.push_back({kvValue, e.add(e.load(score, {t, c}), bias)});
      }
      return values;
    };
    // At decode they are loaded before the checks that choose their rows,
    // in flight with the checks' loads; a prefill's tokens mostly store
    // none of them, so there they are loaded where needed.
    SmallVector<std::pair<Value, Value>> early;
    if (ownFirst)
      early = loadOwnValues();
    auto ownValues = [&] { return ownFirst ? early : loadOwnValues(); };
    // The token's group is its sequence's last unless the step holds the
    // group's last position; it is the group before the last, with no
    // token at its row of the last group, when the step holds that but
    // not the position a group later.
    Value endInStep = inStep(k, e.sub(e.add(groupStart, r), one));
    Value nextInStep = inStep(k, e.add(k.p, r));
    Value next = e.min(e.add(t, one), lastToken);
    Value nextOther = e.cmp(IP::ne, e.loadIndex(slotIds, {next}), k.slot);
    Value last =
        arith::OrIOp::create(b, loc, e.cmp(IP::eq, t, lastToken), nextOther);
    e.ifThen(notValue(endInStep), [&] {
      auto values = ownValues();
      if (overlap)
        e.ifThen(completedBefore(k, groupStart),
                 [&] { movePrevious(k, e.sub(group, one), {i}, columns); });
      for (auto [c, value] : llvm::zip(columns, values))
        storeRow(k, e.add(current, i), c, value.first, value.second);
    });
    e.ifThen(both(endInStep, notValue(nextInStep)), [&] {
      if (overlap) {
        auto values = ownValues();
        for (auto [c, value] : llvm::zip(columns, values))
          storeRow(k, i, c, value.first, value.second);
      }
      for (Value c : columns)
        storeRow(k, e.add(current, i), c, e.f32(0.0), e.f32(kNegInf));
    });
    // The last token owns the rows after its own whose position in the
    // completed group precedes the step (a decode step that completes a
    // group: all but its own).
    e.ifThen(last, [&] {
      Value after = e.add(k.p, one);
      Value lastGroup = e.div(after, r);
      Value lastStart = e.mul(lastGroup, r);
      Value firstRow = e.sub(after, lastStart);
      Value completedStart = e.max(e.sub(lastStart, r), zero);
      Value notInStep = notValue(inStep(k, e.add(completedStart, firstRow)));
      Value beforeStep = both(completedBefore(k, lastStart), notInStep);
      e.ifThen(beforeStep, [&] {
        // The row of the step's first position: this token's own when the
        // position before it is not in the step, else found by halving
        // (the step's positions of a sequence are consecutive).
        Value alone = notValue(inStep(k, e.max(e.sub(k.p, one), zero)));
        auto search = scf::IfOp::create(b, loc, TypeRange{b.getIndexType()},
                                        alone, /*withElseRegion=*/true);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(search.thenBlock());
        scf::YieldOp::create(b, loc, e.sub(k.p, completedStart));
        b.setInsertionPointToStart(search.elseBlock());
        int64_t halvings = llvm::Log2_64_Ceil(ratio) + 1;
        Value found = e.loop(
            zero, e.index(halvings), {e.add(firstRow, one), e.sub(r, one)},
            [&](Value, ValueRange range) -> SmallVector<Value> {
              Value mid = e.div(e.add(range[0], range[1]), e.index(2));
              Value in = inStep(k, e.add(completedStart, mid));
              return {e.select(in, range[0], e.add(mid, one)),
                      e.select(in, mid, range[1])};
            })[1];
        scf::YieldOp::create(b, loc, found);
        b.setInsertionPointAfter(search);
        Value endRow = search.getResult(0);
        // Rows [firstRow, endRow) in chunks, loads first; a chunk's rows
        // outside repeat an end row (the same values again).
        int64_t unroll = std::gcd(ratio, kStateRowsAtOnce);
        Value lastOwned = e.sub(endRow, one);
        if (overlap)
          e.loop(zero, e.index(ratio / unroll), [&](Value chunk) {
            SmallVector<Value> rows;
            for (int64_t u = 0; u < unroll; ++u) {
              Value row = e.add(e.mul(chunk, e.index(unroll)), e.index(u));
              rows.push_back(e.min(e.max(row, firstRow), lastOwned));
            }
            movePrevious(k, e.sub(lastGroup, one), rows, columns);
          });
        e.loop(firstRow, endRow, [&](Value row) {
          for (Value c : columns)
            storeRow(k, e.add(current, row), c, e.f32(0.0), e.f32(kNegInf));
        });
      });
    });
  };
  // A thread per run of tokens and group of columns (the tokens' checks
  // once for several columns, apart by width / columnsPerThread so that a
  // warp's accesses stay contiguous), at most kStateThreadRows runs, so
  // that a long prefill does not launch a thread per token and column.
  int64_t columnsPerThread = perThread(staticWidth, kStateColumnsPerThread);
  Value columnGroups = e.div(width, e.index(columnsPerThread));
  int64_t threadRows = overlap ? kOverlapStateThreadRows : kStateThreadRows;
  Value mostRuns = e.index(threadRows);
  Value run =
      e.max(e.div(e.add(tokens, e.index(threadRows - 1)), mostRuns), one);
  Value runs = e.div(e.add(tokens, e.sub(run, one)), run);
  e.parallelLoop(runs, columnGroups, [&](Value g, Value column) {
    SmallVector<Value> columns;
    for (int64_t u = 0; u < columnsPerThread; ++u)
      columns.push_back(e.add(column, e.mul(e.index(u), columnGroups)));
    Value begin = e.mul(g, run);
    // A step of few tokens (decode) has a thread a token, each of which
    // may store its own values.
    auto few = scf::IfOp::create(
        b, loc, e.cmp(IP::slt, tokens, e.index(kFewStateTokens)),
        /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(few.thenBlock());
    writeState(begin, columns, /*ownFirst=*/true);
    b.setInsertionPointToStart(few.elseBlock());
    e.loop(begin, e.min(e.add(begin, run), tokens),
           [&](Value t) { writeState(t, columns, /*ownFirst=*/false); });
  });
}

struct LowerCompressor : public CachePattern<CompressorOp> {
  using CachePattern::CachePattern;
  LogicalResult
  matchAndRewrite(CompressorOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    Value kv = e.buffer(adaptor.getKv()), score = e.buffer(adaptor.getScore());
    Value ape = e.buffer(adaptor.getApe());
    Value positions = e.buffer(adaptor.getPositions());
    Value slotIds = e.buffer(adaptor.getSlots());
    Value state = floatsOf(e, adaptor.getState());
    bool overlap = op.getOverlap();
    int64_t ratio = op.getRatio();
    Value tokens = e.dim(kv, 0), width = e.dim(kv, 1);
    Value d = overlap ? e.div(width, e.index(2)) : width;
    auto type = cast<RankedTensorType>(op.getType());
    Value out = e.allocShaped(type, {tokens, d});
    Value zero = e.index(0);
    Value slotCount = e.index(overlap ? 2 * ratio : ratio);
    // A sequence's state: its kv slots [slots, width], then its score slots.
    Value stateFloats =
        e.index(op.getSlotRows() * op.getState().getType().getDim());
    // Tokens of a sequence feed its state in order; token-parallel loops
    // compute the same from the step's rows and the starting state.
    auto feed = [&](Value t) {
      Value base = e.mul(e.loadIndex(slotIds, {t}), stateFloats);
      Value scoreBase = e.add(base, e.mul(slotCount, width));
      CompressorSlots slots;
      slots.kv = [&](Value s, Value f) {
        return std::pair{
            state, SmallVector<Value>{e.add(base, e.add(e.mul(s, width), f))}};
      };
      slots.score = [&](Value s, Value f) {
        return std::pair{state, SmallVector<Value>{e.add(
                                    scoreBase, e.add(e.mul(s, width), f))}};
      };
      e.loop(zero, d, [&](Value f) { e.store(e.f32(0.0), out, {t, f}); });
      feedCompressor(
          e, slots, ratio, overlap, width, e.loadIndex(positions, {t}),
          [&](Value f) {
            return e.load(kv, {t, f});
          },
          [&](Value f) {
            return e.load(score, {t, f});
          },
          ape,
          [&](Value f, Value pooled) {
            e.store(pooled, out, {t, f});
          });
    };
    if (tokenParallel)
      poolInParallel(e, kv, score, ape, positions, slotIds, state, out, ratio,
                     overlap, stateFloats);
    else
      e.loop(zero, tokens, [&](Value t) { feed(t); });
    rewriter.replaceOp(op, e.tensor(out, type));
    return success();
  }
};

struct LowerCacheIndexerScore : public CachePattern<CacheIndexerScoreOp> {
  using CachePattern::CachePattern;
  LogicalResult
  matchAndRewrite(CacheIndexerScoreOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    Value q = e.buffer(adaptor.getQuery());
    CacheRows keys(e, adaptor.getKeys(), op.getKeys().getType());
    Value weights = e.buffer(adaptor.getWeights());
    Value positions = e.buffer(adaptor.getPositions());
    Value bases = e.buffer(adaptor.getBase());
    Value tokens = e.dim(q, 0), heads = e.dim(q, 1), width = e.dim(q, 2);
    int64_t ratio = op.getRatio();
    Value rows = boundRows(e, e.buffer(adaptor.getContext()), ratio);
    auto type = cast<RankedTensorType>(op.getType());
    Value out = e.allocShaped(type, {tokens, rows});
    Value zero = e.index(0), one = e.index(1);
    // The token's keys, decoded once, as [rows, width] f32.
    Value keyFloats = e.mul(e.max(rows, one), width);
    Value sharedKey = tokenParallel ? Value() : e.scratch(keyFloats);
    tokenLoop(e, tokenParallel, zero, tokens, [&](Value t) {
      Value key = sharedKey ? sharedKey : e.scratch(keyFloats);
      // A bound below a token's own count truncates, never overruns.
      Value valid = e.min(
          e.div(e.add(e.loadIndex(positions, {t}), one), e.index(ratio)), rows);
      Value base = e.loadIndex(bases, {t});
      e.parallelLoop(zero, valid, [&](Value j) {
        e.loop(zero, width, [&](Value i) {
          Value at = e.add(e.mul(j, width), i);
          e.store(keys.load(e.add(base, j), i), key, {at});
        });
      });
      e.parallelLoop(zero, rows, [&](Value j) {
        Value inRange = e.cmp(IP::slt, j, valid);
        Value row = e.select(inRange, j, zero);
        Value total = sumHeadTerms(e, heads, [&](Value h) {
          Value dotValue =
              e.loop(zero, width, {e.f32(0.0)},
                     [&](Value i, ValueRange p) -> SmallVector<Value> {
                       Value k = e.load(key, {e.add(e.mul(row, width), i)});
                       return {e.add(p[0], e.mul(e.load(q, {t, h, i}), k))};
                     })[0];
          Value weight = e.load(weights, {t, h});
          return e.mul(e.max(dotValue, e.f32(0.0)), weight);
        });
        e.store(e.select(inRange, total, e.f32(kNegInf)), out, {t, j});
      });
    });
    rewriter.replaceOp(op, e.tensor(out, type));
    return success();
  }
};

struct LowerCacheAttention : public CachePattern<CacheAttentionOp> {
  using CachePattern::CachePattern;
  LogicalResult
  matchAndRewrite(CacheAttentionOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    Value q = e.buffer(adaptor.getQuery()), kv = e.buffer(adaptor.getKv());
    Value sink = e.buffer(adaptor.getSink());
    CacheRows window(e, adaptor.getWindow(), op.getWindow().getType());
    Value windowRows = e.buffer(adaptor.getWindowRows());
    std::optional<CacheRows> compressed;
    Value compressedRows, bases;
    if (op.getCompressed()) {
      compressed.emplace(e, adaptor.getCompressed(),
                         op.getCompressed().getType());
      compressedRows = e.buffer(adaptor.getCompressedRows());
      bases = e.buffer(adaptor.getBase());
    }
    Value tokens = e.dim(q, 0), width = e.dim(q, 2);
    Value w = e.dim(windowRows, 1);
    Value k = compressed ? e.dim(compressedRows, 1) : e.index(0);
    Value slots = e.add(w, k);
    Value out = allocLike(e, q, op.getType());
    Value zero = e.index(0), minusOne = e.index(-1);
    // Slot s < w: a window row; the others: the token's compressed rows.
    auto indexOf = [&](Value t, Value s) {
      if (!compressed)
        return e.loadIndex(windowRows, {t, s});
      Value inWindow = e.cmp(IP::slt, s, w);
      Value ws = e.select(inWindow, s, zero);
      Value cs = e.select(inWindow, zero, e.sub(s, w));
      Value compressedRow = e.loadIndex(compressedRows, {t, cs});
      return e.select(inWindow, e.loadIndex(windowRows, {t, ws}),
                      compressedRow);
    };
    auto used = [&](Value t, Value s) {
      return e.cmp(IP::ne, indexOf(t, s), minusOne);
    };
    emitAttention(
        e, q, sink, op.getScale().convertToDouble(), out, slots,
        [&](Value t, Value table) {
          auto copyRow = [&](Value s, const std::function<Value(Value)> &at) {
            e.loop(zero, width, [&](Value i) {
              Value place = e.add(e.mul(s, width), i);
              e.store(at(i), table, {place});
            });
          };
          e.parallelLoop(zero, w, [&](Value s) {
            Value row = e.loadIndex(windowRows, {t, s});
            Value fromStep = e.cmp(IP::slt, row, tokens);
            e.ifThen(e.cmp(IP::ne, row, minusOne), [&] {
              e.ifThen(fromStep, [&] {
                copyRow(s, [&](Value i) { return e.load(kv, {row, i}); });
              });
              e.ifThen(e.cmp(IP::sge, row, tokens), [&] {
                Value ring = e.sub(row, tokens);
                copyRow(s, [&](Value i) { return window.load(ring, i); });
              });
            });
          });
          if (!compressed)
            return;
          Value base = e.loadIndex(bases, {t});
          e.parallelLoop(zero, k, [&](Value j) {
            Value row = e.loadIndex(compressedRows, {t, j});
            e.ifThen(e.cmp(IP::ne, row, minusOne), [&] {
              Value global = e.add(base, row);
              copyRow(e.add(w, j),
                      [&](Value i) { return compressed->load(global, i); });
            });
          });
        },
        used, tokenParallel);
    rewriter.replaceOp(op, e.tensor(out, op.getType()));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Caches: a !v4a.kv_cache is its bytes, memref<?xi8>, in the row layout of
// core/CacheLayout.h (see CacheRows).
//===----------------------------------------------------------------------===//

struct LowerCacheStore : public CachePattern<CacheStoreOp> {
  using CachePattern::CachePattern;
  LogicalResult
  matchAndRewrite(CacheStoreOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    LoopEmitter e(rewriter, op.getLoc());
    CacheRows cache(e, adaptor.getCache(), op.getCache().getType());
    Value rows = e.buffer(adaptor.getRows());
    Value ids = e.buffer(adaptor.getRowIds());
    Value zero = e.index(0);
    e.parallelLoop(zero, e.dim(rows, 0), [&](Value r) {
      Value id = e.loadIndex(ids, {r});
      e.ifThen(e.cmp(IP::sge, id, zero), [&] { cache.storeRow(id, rows, r); });
    });
    rewriter.eraseOp(op);
    return success();
  }
};

struct LowerCacheGather : public CachePattern<CacheGatherOp> {
  using CachePattern::CachePattern;
  LogicalResult
  matchAndRewrite(CacheGatherOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    KVCacheType type = op.getCache().getType();
    LoopEmitter e(rewriter, op.getLoc());
    CacheRows cache(e, adaptor.getCache(), type);
    Value indices = e.buffer(adaptor.getIndices());
    Value tokens = e.dim(indices, 0), slots = e.dim(indices, 1);
    auto resultType = cast<RankedTensorType>(op.getType());
    Value out = e.allocShaped(resultType, {tokens, slots});
    Value zero = e.index(0);
    e.loop(zero, tokens, [&](Value t) {
      e.loop(zero, slots, [&](Value s) {
        Value id = e.loadIndex(indices, {t, s});
        Value used = e.cmp(IP::sge, id, zero);
        Value safe = e.select(used, id, zero);
        e.loop(zero, e.index(type.getDim()), [&](Value f) {
          Value v = cache.load(safe, f);
          e.store(e.select(used, v, e.f32(0.0)), out, {t, s, f});
        });
      });
    });
    rewriter.replaceOp(op, e.tensor(out, resultType));
    return success();
  }
};

bool isCacheOp(Operation *op) {
  return isa<CacheStoreOp, CacheGatherOp, CompressorOp, CacheIndexerScoreOp,
             CacheAttentionOp>(op);
}

/// Rewrites cache values to their bytes, in signatures and in the cache ops.
LogicalResult lowerCaches(ModuleOp module, bool tokenParallel) {
  MLIRContext *context = module.getContext();
  TypeConverter converter;
  converter.addConversion([](Type type) { return type; });
  converter.addConversion([](KVCacheType type) -> Type {
    return MemRefType::get({ShapedType::kDynamic},
                           IntegerType::get(type.getContext(), 8));
  });
  auto cast = [](OpBuilder &builder, Type type, ValueRange inputs,
                 Location loc) -> Value {
    return UnrealizedConversionCastOp::create(builder, loc, type, inputs)
        .getResult(0);
  };
  converter.addSourceMaterialization(cast);
  converter.addTargetMaterialization(cast);
  ConversionTarget target(*context);
  target.addIllegalOp<CacheStoreOp, CacheGatherOp, CompressorOp,
                      CacheIndexerScoreOp, CacheAttentionOp>();
  target.addDynamicallyLegalOp<func::FuncOp>([&](func::FuncOp op) {
    return converter.isSignatureLegal(op.getFunctionType());
  });
  target.addDynamicallyLegalOp<func::ReturnOp, func::CallOp>(
      [&](Operation *op) { return converter.isLegal(op); });
  target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
  RewritePatternSet patterns(context);
  patterns.add<LowerCacheStore, LowerCacheGather, LowerCompressor,
               LowerCacheIndexerScore, LowerCacheAttention>(converter, context,
                                                            tokenParallel);
  populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(patterns,
                                                                 converter);
  populateReturnOpTypeConversionPattern(patterns, converter);
  populateCallOpTypeConversionPattern(patterns, converter);
  return applyPartialConversion(module, target, std::move(patterns));
}

/// On the CPU each op of a kernel region keeps its own loop nest: the
/// regions are inlined where they stand.
void inlineFusedRegions(ModuleOp module) {
  SmallVector<FusedOp> regions;
  module.walk([&](FusedOp op) { regions.push_back(op); });
  IRRewriter rewriter(module.getContext());
  for (FusedOp op : regions)
    op.inlineBody(rewriter);
}

struct LowerToCPUPass : public v4a::impl::LowerToCPUBase<LowerToCPUPass> {
  using LowerToCPUBase::LowerToCPUBase;
  void runOnOperation() override {
    inlineFusedRegions(getOperation());
    if (libraryGemms || libraryFP8Gemms)
      declareGemms(getOperation());
    RewritePatternSet patterns(&getContext());
    patterns.add<DecomposeProjectIndexKeys, LowerLinear, LowerSplitColumns,
                 LowerGroupedOutput, LowerRMSNorm, LowerRoPE, LowerActQuant,
                 LowerHadamard, LowerCompress, LowerCompressStep,
                 LowerIndexerScore, LowerTopK, LowerBlockTopK, LowerWindowStore,
                 LowerWindowIndices, LowerSparseAttention, LowerStepWindow,
                 LowerStepCompressed, LowerVisibleRows>(
        &getContext(), tokenParallel, libraryGemms, libraryFP8Gemms);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    WalkResult leftover = getOperation()->walk([](Operation *op) {
      if (!isa<V4ADialect>(op->getDialect()) || isa<ModelOp, LayerOp>(op))
        return WalkResult::advance();
      if (!isCacheOp(op)) {
        op->emitError() << "v4a-lower-to-cpu: no CPU lowering for "
                        << op->getName();
        return WalkResult::interrupt();
      }
      for (Type type : op->getOperandTypes()) {
        auto cache = dyn_cast<KVCacheType>(type);
        if (!cache || CacheRows::isLowered(cache))
          continue;
        op->emitError() << "v4a-lower-to-cpu: no CPU lowering for "
                        << op->getName() << " on "
                        << stringifyCacheLayout(cache.getLayout())
                        << " caches (every layout but mxfp8 is lowered)";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (leftover.wasInterrupted() ||
        failed(lowerCaches(getOperation(), tokenParallel)))
      return signalPassFailure();
  }
};

} // namespace

SmallVector<float> v4a::ropeFrequencies(int64_t ropeDim, double theta,
                                        YarnAttr yarn) {
  int64_t half = ropeDim / 2;
  double dim = static_cast<double>(ropeDim);
  SmallVector<double> freqs;
  for (int64_t i = 0; i < half; ++i)
    freqs.push_back(std::pow(theta, -2.0 * i / dim));
  if (yarn && yarn.getOriginalMaxPosition() > 0) {
    double length = static_cast<double>(yarn.getOriginalMaxPosition());
    double factor = yarn.getFactor().convertToDouble();
    auto bound = [&](double beta) {
      return dim * std::log(length / (beta * 2 * M_PI)) / (2 * std::log(theta));
    };
    double low = std::clamp(
        std::floor(bound(yarn.getBetaFast().convertToDouble())), 0.0, dim - 1);
    double high = std::clamp(
        std::ceil(bound(yarn.getBetaSlow().convertToDouble())), 0.0, dim - 1);
    if (low == high)
      high += 0.001;
    for (int64_t i = 0; i < half; ++i) {
      double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      double keep = 1.0 - ramp;
      freqs[i] = freqs[i] / factor * (1 - keep) + freqs[i] * keep;
    }
  }
  return SmallVector<float>(freqs.begin(), freqs.end());
}
