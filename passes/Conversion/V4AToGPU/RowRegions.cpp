//===- RowRegions.cpp - the row kernel family -----------------------------===//
//
// A chain's rows are the vectors of its last dimension ([T, W] or
// [T, H, W]). A team of P threads (W/8 rounded up to a power of two) holds a
// row, eight consecutive elements each; a block of at least 128 threads holds
// 128/P rows, and the grid walks the rows in a grid-stride loop (uniform per
// block, so the barriers of a team reduction are reached by every thread).
// Each op computes in f32 registers and rounds to its result's element type,
// as the loop lowering's buffers do; sums over a row (rms_norm) are a fixed
// butterfly, block maxima (act_quant) and the Hadamard butterflies are
// shuffles between the lanes that own the elements.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/V4AToGPU/RowRegions.h"

#include "core/Numerics.h"
#include "dialects/V4A/IR/V4AOps.h"
#include "passes/Conversion/V4AToCPU/CacheRows.h"
#include "passes/Conversion/V4AToCPU/LoopEmitter.h"
#include "passes/Conversion/V4AToCPU/RoPEFrequencies.h"
#include "passes/Conversion/V4AToGPU/DeviceKit.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <cmath>

using namespace mlir;

namespace v4a::gpu {

namespace {

/// Threads a block has at least: several short rows share it.
constexpr int64_t kMinBlockThreads = 128;
/// The widest team: rows up to 8 * 1024 elements.
constexpr int64_t kMaxTeam = 1024;
/// Grid extent beyond which blocks take several row groups.
constexpr int64_t kGridLimit = 1 << 20;
/// Rows a team holds at once (their loads in flight together): two for
/// grids of many wide rows (head vectors of 512 and more), one otherwise.
/// Measured on the H200 (bench/kernels-notes.md): two rows per team took
/// the [8192, 64, 512] query kernels from 2.2 to 2.5-3.1 TB/s, and made the
/// small grids of rank-2 rows and 128-wide heads 10-45% slower.
int64_t rowsPerTeam(int64_t rank, int64_t width) {
  return rank == 3 && width >= 512 ? 2 : 1;
}
/// Rows of a group whose ids every thread loads to skip a group that keeps
/// none (more, as with rows a few lanes wide: the chain runs regardless).
constexpr int64_t kMostGroupIds = 16;
/// The widest Hadamard transform (its butterflies stay inside a warp).
constexpr int64_t kMaxHadamard = kChunk * kWarpLanes;

RankedTensorType rowType(Operation *op) {
  return dyn_cast<RankedTensorType>(op->getResult(0).getType());
}

/// The static width of the rows of `type` when the family handles it.
std::optional<int64_t> rowWidth(RankedTensorType type) {
  if (!type || (type.getRank() != 2 && type.getRank() != 3))
    return std::nullopt;
  int64_t width = type.getShape().back();
  if (ShapedType::isDynamic(width) || width % kChunk != 0 ||
      width > kChunk * kMaxTeam)
    return std::nullopt;
  if (!type.getElementType().isBF16() && !type.getElementType().isF32())
    return std::nullopt;
  return width;
}

/// Whether blocks of `elements` consecutive row elements are an aligned
/// power-of-two group of lanes of one warp (their maxima meet by shuffles).
bool isLaneGroup(int64_t elements) {
  return elements % kChunk == 0 && llvm::isPowerOf2_64(elements / kChunk) &&
         elements / kChunk <= kWarpLanes;
}

} // namespace

bool isRowOp(Operation *op) {
  if (op->getNumResults() != 1 || op->getNumOperands() == 0)
    return false;
  std::optional<int64_t> width = rowWidth(rowType(op));
  if (!width)
    return false;
  if (auto quant = dyn_cast<ActQuantOp>(op)) {
    int64_t block = quant.getBlockSize();
    int64_t quantDims = quant.getQuantDims().value_or(*width);
    return isLaneGroup(block) && quantDims % block == 0;
  }
  if (isa<HadamardOp>(op))
    return llvm::isPowerOf2_64(*width) && *width <= kMaxHadamard;
  if (isa<RMSNormOp, RoPEOp>(op))
    return true;
  if (isa<arith::TruncFOp, arith::ExtFOp>(op))
    return rowWidth(dyn_cast<RankedTensorType>(op->getOperand(0).getType()))
        .has_value();
  return false;
}

bool isRowStore(Operation *op) {
  auto store = dyn_cast<CacheStoreOp>(op);
  if (!store)
    return false;
  auto rows = cast<RankedTensorType>(store.getRows().getType());
  std::optional<int64_t> width = rowWidth(rows);
  if (!width || rows.getRank() != 2)
    return false;
  KVCacheType cache = store.getCache().getType();
  std::optional<layout::RowLayout> row =
      layout::describeRow(toRowKind(cache.getLayout()), cache.getDim());
  if (!row || row->dim != *width)
    return false;
  switch (row->kind) {
  case layout::RowKind::BF16:
  case layout::RowKind::IndexBF16:
  case layout::RowKind::F32:
    return true;
  case layout::RowKind::FP8Model1:
    // A thread's 8 values are 8 e4m3 bytes or 16 bf16 bytes at aligned
    // offsets, and a scale block is a power of two of lanes of one warp.
    return row->quantDims % (2 * kChunk) == 0 && isLaneGroup(row->scaleBlock) &&
           row->valueBytes % (2 * kChunk) == 0 &&
           (cache.getPageSize() * row->rowBytes()) % (2 * kChunk) == 0;
  case layout::RowKind::IndexFP8:
  case layout::RowKind::IndexMXFP4: {
    // A thread's 8 values are 8 e4m3 bytes or 4 bytes of e2m1 pairs, and
    // the f32 row scale a 4-byte store, all at aligned offsets; a scale
    // covers a power of two of lanes of one warp.
    int64_t codeBytes = row->kind == layout::RowKind::IndexFP8 ? 8 : 4;
    return isLaneGroup(row->scaleBlock) && row->valueBytes % codeBytes == 0 &&
           row->scaleBytes % 4 == 0 &&
           (cache.getPageSize() * row->rowBytes()) % codeBytes == 0;
  }
  default:
    return false;
  }
}

namespace {

/// Where the kernel body is: the row's place and the thread's elements.
struct RowThread {
  OpBuilder &b;
  Location loc;
  int64_t width;
  /// Threads of the row's team, and this thread's lane in it.
  int64_t team;
  Value lane;
  Value threadId;
  /// The leading indices of the row ([t] or [t, h]) and its first column.
  SmallVector<Value> lead;
  Value column;
  /// The thread owns elements of the row (lanes past W/8 hold zeros).
  Value laneInRow;
  /// Workgroup slots of team reductions (a slot per warp), if any.
  Value partials;

  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc,
                                     b.getF32FloatAttr(static_cast<float>(v)));
  }
  SmallVector<Value> at(Value first) {
    SmallVector<Value> indices(lead);
    indices.push_back(first);
    return indices;
  }
};

using Values = SmallVector<Value>;

Values roundAll(RowThread &t, Values values, Type element) {
  for (Value &v : values)
    v = roundTo(t.b, t.loc, v, element);
  return values;
}

Values applyRMSNorm(RowThread &t, RMSNormOp op, Values v, Value weight) {
  cpu::LoopEmitter e(t.b, t.loc);
  Value sum = reduceTeam(t.b, t.loc, sumOfSquares(t.b, t.loc, v), t.team,
                         Combine::Add, t.threadId, t.partials);
  Value inv =
      rmsFactor(t.b, t.loc, sum, t.width, op.getEps().convertToDouble());
  Values w;
  if (weight)
    w = loadChunk(t.b, t.loc, weight, ValueRange{t.column}, kChunk,
                  t.laneInRow);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = e.mul(v[i], inv);
    if (weight)
      v[i] = e.mul(v[i], w[i]);
  }
  return v;
}

/// Where a rope op's cosines and sines come from: its frequency table, and
/// when the block's rows are heads of one token, the workgroup slots where
/// the block computed that token's cos (then sin) of every pair once.
struct RopeAngles {
  Value freqs;
  Value shared;
  /// The first slot of the cosines (the sines follow), or -1: not shared.
  int64_t at = -1;
};

/// The position of the thread's token as f32 (a rope's angle is it times a
/// frequency).
Value tokenPosition(RowThread &t, Value positions) {
  Value raw =
      memref::LoadOp::create(t.b, t.loc, positions, ValueRange{t.lead.front()});
  return arith::SIToFPOp::create(t.b, t.loc, t.b.getF32Type(), raw);
}

/// A row's lanes within one warp: the team, or a warp of a wider team.
int64_t segmentLanes(int64_t team) { return std::min(team, kWarpLanes); }

/// Whether a row's rope lanes (the last ropeDim / 8 of the row) all lie in
/// one segment, whose lanes then compute the row's angles together.
bool spreadsAngles(int64_t team, int64_t width, int64_t ropeDim) {
  int64_t segment = segmentLanes(team);
  int64_t start = width - ropeDim;
  return ropeDim % (2 * kChunk) == 0 && start % kChunk == 0 &&
         (start / kChunk) / segment == (width / kChunk - 1) / segment;
}

/// The cosines and sines of `pairs` (this thread's four), computed by the
/// lanes of the segment that holds the row's rope lanes, a pair (or a few)
/// a lane, and fetched by shuffles: the same cos and sin of the same angle
/// as a rope lane computing its own four pairs, where only the rope lanes
/// (an eighth of a 512-wide row's) would each evaluate eight of them in
/// turn. Every lane of the warp must call it; the values are meaningful in
/// the rope's segment.
SmallVector<std::pair<Value, Value>> spreadCosSins(RowThread &t,
                                                   int64_t ropeDim,
                                                   Value positions, Value freqs,
                                                   ArrayRef<Value> pairs) {
  cpu::LoopEmitter e(t.b, t.loc);
  int64_t segment = segmentLanes(t.team);
  int64_t half = ropeDim / 2;
  int64_t perLane = (half + segment - 1) / segment;
  int64_t start = t.width - ropeDim;
  Value holdsRope =
      e.cmp(arith::CmpIPredicate::eq,
            arith::DivUIOp::create(t.b, t.loc, t.lane, t.index(segment)),
            t.index((start / kChunk) / segment));
  SmallVector<Type> types(2 * pairs.size(), t.b.getF32Type());
  auto ifOp = scf::IfOp::create(t.b, t.loc, types, holdsRope, true);
  OpBuilder::InsertionGuard guard(t.b);
  t.b.setInsertionPointToStart(ifOp.thenBlock());
  Value position = tokenPosition(t, positions);
  // This lane's pairs: its place in the segment, then a segment further on.
  Value place = arith::RemUIOp::create(t.b, t.loc, t.lane, t.index(segment));
  SmallVector<Value> own;
  for (int64_t r = 0; r < perLane; ++r) {
    Value pair = e.add(place, t.index(r * segment));
    own.push_back(
        e.select(e.cmp(arith::CmpIPredicate::ult, pair, t.index(half)), pair,
                 t.index(0)));
  }
  SmallVector<std::pair<Value, Value>> computed =
      ropeCosSins(t.b, t.loc, position, freqs, own);
  // Pair q is lane (segment's first) + q % segment's, its q / segment-th.
  Value warpLane =
      arith::RemUIOp::create(t.b, t.loc, t.threadId, t.index(kWarpLanes));
  Value first = arith::SubIOp::create(t.b, t.loc, warpLane, place);
  SmallVector<Value> results;
  for (Value pair : pairs) {
    Value source = e.add(
        first, arith::RemUIOp::create(t.b, t.loc, pair, t.index(segment)));
    Value round = arith::DivUIOp::create(t.b, t.loc, pair, t.index(segment));
    Value c = shuffleFromLane(t.b, t.loc, computed[0].first, source);
    Value s = shuffleFromLane(t.b, t.loc, computed[0].second, source);
    for (int64_t r = 1; r < perLane; ++r) {
      Value here = e.cmp(arith::CmpIPredicate::eq, round, t.index(r));
      c = e.select(here, shuffleFromLane(t.b, t.loc, computed[r].first, source),
                   c);
      s = e.select(here,
                   shuffleFromLane(t.b, t.loc, computed[r].second, source), s);
    }
    results.push_back(c);
    results.push_back(s);
  }
  scf::YieldOp::create(t.b, t.loc, results);
  t.b.setInsertionPointToStart(ifOp.elseBlock());
  scf::YieldOp::create(t.b, t.loc,
                       SmallVector<Value>(types.size(), t.f32(0.0)));
  SmallVector<std::pair<Value, Value>> cosSins;
  for (size_t i = 0; i < pairs.size(); ++i)
    cosSins.push_back({ifOp.getResult(2 * i), ifOp.getResult(2 * i + 1)});
  return cosSins;
}

Values applyRoPE(RowThread &t, RoPEOp op, Values v, Value positions,
                 const RopeAngles &angles) {
  cpu::LoopEmitter e(t.b, t.loc);
  int64_t ropeDim = op.getRopeDim();
  int64_t start = t.width - ropeDim;
  SmallVector<RopeColumn> columns;
  SmallVector<Value> pairs;
  auto placeColumns = [&] {
    for (int64_t i = 0; i < kChunk; i += 2) {
      columns.push_back(
          ropeColumn(t.b, t.loc, e.add(t.column, t.index(i)), start));
      pairs.push_back(columns.back().pair);
    }
  };
  SmallVector<std::pair<Value, Value>> cosSins;
  bool spread = !angles.shared && spreadsAngles(t.team, t.width, ropeDim);
  if (spread) {
    placeColumns();
    cosSins = spreadCosSins(t, ropeDim, positions, angles.freqs, pairs);
  }
  // Only threads whose elements reach the rope dims do any work (lanes past
  // the row's end hold no elements and would read past the table).
  Value touches = arith::AndIOp::create(t.b, t.loc,
                                        e.cmp(arith::CmpIPredicate::sgt,
                                              e.add(t.column, t.index(kChunk)),
                                              t.index(start)),
                                        t.laneInRow);
  SmallVector<Type> types(v.size(), t.b.getF32Type());
  auto ifOp = scf::IfOp::create(t.b, t.loc, types, touches, true);
  OpBuilder::InsertionGuard guard(t.b);
  t.b.setInsertionPointToStart(ifOp.thenBlock());
  if (!spread)
    placeColumns();
  if (angles.shared) {
    for (Value pair : pairs) {
      Value at = e.add(pair, t.index(angles.at));
      cosSins.push_back(
          {memref::LoadOp::create(t.b, t.loc, angles.shared, ValueRange{at}),
           memref::LoadOp::create(
               t.b, t.loc, angles.shared,
               ValueRange{e.add(at, t.index(ropeDim / 2))})});
    }
  } else if (!spread) {
    cosSins = ropeCosSins(t.b, t.loc, tokenPosition(t, positions), angles.freqs,
                          pairs);
  }
  Values out(v);
  for (auto [p, column] : llvm::enumerate(columns)) {
    size_t i = 2 * p;
    auto [c, s] = cosSins[p];
    auto [re, im] =
        rotatePair(t.b, t.loc, v[i], v[i + 1], c, s, op.getInverse());
    out[i] = e.select(column.inRope, re, v[i]);
    out[i + 1] = e.select(column.inRope, im, v[i + 1]);
  }
  scf::YieldOp::create(t.b, t.loc, out);
  t.b.setInsertionPointToStart(ifOp.elseBlock());
  scf::YieldOp::create(t.b, t.loc, v);
  return Values(ifOp.getResults());
}

/// The scale of the block this thread's values belong to: the block's
/// maximum |value| (at least `floor`) over its `lanes` lanes, times 1/fmax,
/// rounded up to a power of two with `pow2`. Every lane of the warp must
/// call it (shuffles).
Value blockScale(RowThread &t, const Values &v, int64_t lanes, float floor,
                 float fmax, bool pow2) {
  cpu::LoopEmitter e(t.b, t.loc);
  Value amax = t.f32(floor);
  for (Value x : v)
    amax = e.max(amax, e.abs(x));
  amax = reduceLanes(t.b, t.loc, amax, lanes, Combine::Max);
  Value scale = e.mul(amax, t.f32(1.0f / fmax));
  return pow2 ? e.ceilPowerOfTwo(scale) : scale;
}

Values applyActQuant(RowThread &t, ActQuantOp op, Values v) {
  cpu::LoopEmitter e(t.b, t.loc);
  bool e4m3 = op.getFormat() == QuantFormat::E4M3;
  double fmax = e4m3 ? num::kE4M3Max : num::kE2M1Max;
  int64_t quantDims = op.getQuantDims().value_or(t.width);
  // Lanes past the quantized dims take part in the shuffles too.
  Value scale = blockScale(t, v, op.getBlockSize() / kChunk,
                           e4m3 ? num::kE4M3AmaxFloor : num::kE2M1AmaxFloor,
                           static_cast<float>(fmax), op.getPow2Scale());
  Value quantized =
      e.cmp(arith::CmpIPredicate::slt, t.column, t.index(quantDims));
  // A power-of-two scale has an exact reciprocal: one division per thread.
  Value inverse = op.getPow2Scale() ? e.div(t.f32(1.0f), scale) : Value();
  Values out;
  for (Value x : v) {
    // The rounding saturates at +-fmax: no clamp before it.
    Value q = inverse ? e.mul(x, inverse) : e.div(x, scale);
    q = e4m3 ? e.roundToMinifloat(q, 3, -6, num::kE4M3Max)
             : e.roundToMinifloat(q, 1, 0, num::kE2M1Max);
    out.push_back(e.select(quantized, e.mul(q, scale), x));
  }
  return out;
}

Values applyHadamard(RowThread &t, Values v) {
  cpu::LoopEmitter e(t.b, t.loc);
  int64_t n = t.width;
  for (int64_t h = 1; h < std::min(n, kChunk); h *= 2)
    for (int64_t base = 0; base < kChunk; base += 2 * h)
      for (int64_t j = 0; j < h; ++j) {
        Value a = v[base + j], c = v[base + j + h];
        v[base + j] = e.add(a, c);
        v[base + j + h] = e.sub(a, c);
      }
  // Stages across lanes: the partner holding the other half of each pair is
  // lane ^ (h / 8); the lower lane keeps the sum, the upper the difference.
  // Both are other + sign * x with sign = +-1 (the product is exact, so the
  // fused form rounds once, as the sum or the difference does): a shuffle
  // and one instruction a value instead of a sum, a difference and a pick.
  for (int64_t h = kChunk; h < n; h *= 2) {
    int64_t mask = h / kChunk;
    Value upper = e.cmp(
        arith::CmpIPredicate::ne,
        arith::AndIOp::create(t.b, t.loc, t.lane, t.index(mask)), t.index(0));
    Value sign = e.select(upper, t.f32(-1.0), t.f32(1.0));
    for (Value &x : v) {
      Value other = shuffleXor(t.b, t.loc, x, mask);
      x = math::FmaOp::create(t.b, t.loc, x, sign, other);
    }
  }
  Value norm = t.f32(1.0f / std::sqrt(static_cast<float>(n)));
  for (Value &x : v)
    x = e.mul(x, norm);
  return v;
}

/// The thread's values after `op` (its other operand's buffer `extra`, its
/// angles for rope), rounded to the op's element type.
Values applyRowOp(RowThread &t, Operation *op, Values v, Value extra,
                  const RopeAngles &angles) {
  if (auto norm = dyn_cast<RMSNormOp>(op))
    v = applyRMSNorm(t, norm, v, extra);
  else if (auto rope = dyn_cast<RoPEOp>(op))
    v = applyRoPE(t, rope, v, extra, angles);
  else if (auto quant = dyn_cast<ActQuantOp>(op))
    v = applyActQuant(t, quant, v);
  else if (isa<HadamardOp>(op))
    v = applyHadamard(t, v);
  return roundAll(t, v, rowType(op).getElementType());
}

/// The ue8m0 byte of `scale` in the thread's scale block of the row whose
/// scales start at byte `scales`.
void storeBlockScale(RowThread &t, CacheRows &cache, Value scales,
                     Value scale) {
  cpu::LoopEmitter e(t.b, t.loc);
  Value block = e.div(t.column, t.index(cache.layout().scaleBlock));
  Value at = e.add(scales, block);
  memref::StoreOp::create(t.b, t.loc, e.toUE8M0Bits(scale), cache.bytes(),
                          ValueRange{at});
}

/// Writes the thread's values into index key row `id` (skipped when `valid`
/// is false) as CacheRows::storeRow encodes them: e4m3 bytes with one
/// power-of-two f32 scale for the row, or e2m1 pairs (the even dim in the
/// low nibble) with a ue8m0 scale per 32 dims; the lanes of a scale agree
/// on it through shuffles.
void storeIndexKeys(RowThread &t, CacheRows &cache, const Values &v, Value id,
                    Value valid) {
  OpBuilder &b = t.b;
  Location loc = t.loc;
  cpu::LoopEmitter e(b, loc);
  const layout::RowLayout &row = cache.layout();
  bool fp4 = row.kind == layout::RowKind::IndexMXFP4;
  int64_t blockLanes = row.scaleBlock / kChunk;
  // Every lane takes part in the block's shuffles.
  Value scale = fp4 ? blockScale(t, v, blockLanes, num::kE2M1AmaxFloor,
                                 num::kE2M1Max, /*pow2=*/true)
                    : blockScale(t, v, blockLanes, num::kE4M3AmaxFloor,
                                 num::kE4M3Max, /*pow2=*/true);
  OpBuilder::InsertionGuard guard(b);
  auto ifValid = scf::IfOp::create(b, loc, valid, /*withElse=*/false);
  b.setInsertionPointToStart(ifValid.thenBlock());
  Value values = cache.valueOffset(id), scales = cache.scaleOffset(id);
  // The scale is a power of two: its reciprocal is exact.
  Value inverse = e.div(t.f32(1.0f), scale);
  Value firstOfBlock = e.cmp(
      arith::CmpIPredicate::eq,
      arith::RemUIOp::create(b, loc, t.lane, t.index(blockLanes)), t.index(0));
  SmallVector<Value> bytes;
  if (fp4) {
    Value mask = arith::ConstantOp::create(b, loc, b.getI8IntegerAttr(0xf));
    Value shift = arith::ConstantOp::create(b, loc, b.getI8IntegerAttr(4));
    auto code = [&](Value x) {
      return e.toE2M1Bits(
          e.roundToMinifloat(e.mul(x, inverse), 1, 0, num::kE2M1Max));
    };
    for (size_t i = 0; i + 1 < v.size(); i += 2) {
      Value high = arith::ShLIOp::create(b, loc, code(v[i + 1]), shift);
      bytes.push_back(arith::OrIOp::create(
          b, loc, arith::AndIOp::create(b, loc, code(v[i]), mask), high));
    }
    storeBytes(b, loc, bytes, cache.bytes(),
               e.add(values, e.div(t.column, t.index(2))));
    e.ifThen(firstOfBlock, [&] { storeBlockScale(t, cache, scales, scale); });
    return;
  }
  for (Value x : v)
    bytes.push_back(e.toE4M3Bits(
        e.roundToMinifloat(e.mul(x, inverse), 3, -6, num::kE4M3Max)));
  storeBytes(b, loc, bytes, cache.bytes(), e.add(values, t.column));
  e.ifThen(firstOfBlock, [&] {
    Value bits = arith::BitcastOp::create(b, loc, b.getI32Type(), scale);
    SmallVector<Value> scaleBytes;
    for (int64_t i = 0; i < 4; ++i)
      scaleBytes.push_back(arith::TruncIOp::create(
          b, loc, b.getI8Type(),
          arith::ShRUIOp::create(b, loc, bits, e.i32(8 * i))));
    storeBytes(b, loc, scaleBytes, cache.bytes(), scales);
  });
}

/// Writes the thread's values into cache row `id` (skipped when `valid` is
/// false), as CacheRows::storeRow encodes a row: plain rows as they are,
/// MODEL1 rows as e4m3 bytes with a power-of-two scale per block (the
/// block's lanes agree on it through shuffles) and bf16 rope dims.
void storeToCache(RowThread &t, CacheRows &cache, const Values &v, Value id,
                  Value valid) {
  if (Value plain = cache.plainRows()) {
    storeChunk(t.b, t.loc, v, plain, ValueRange{id, t.column}, valid);
    return;
  }
  if (cache.layout().kind != layout::RowKind::FP8Model1) {
    storeIndexKeys(t, cache, v, id, valid);
    return;
  }
  OpBuilder &b = t.b;
  Location loc = t.loc;
  cpu::LoopEmitter e(b, loc);
  const layout::RowLayout &row = cache.layout();
  int64_t blockLanes = row.scaleBlock / kChunk;
  // Every lane takes part in the block's shuffles.
  Value scale = blockScale(t, v, blockLanes, num::kE4M3AmaxFloor, num::kE4M3Max,
                           /*pow2=*/true);
  OpBuilder::InsertionGuard guard(b);
  auto ifValid = scf::IfOp::create(b, loc, valid, /*withElse=*/false);
  b.setInsertionPointToStart(ifValid.thenBlock());
  Value values = cache.valueOffset(id), scales = cache.scaleOffset(id);
  Value quantized =
      e.cmp(arith::CmpIPredicate::slt, t.column, t.index(row.quantDims));
  auto ifQuantized = scf::IfOp::create(b, loc, quantized, /*withElse=*/true);
  b.setInsertionPointToStart(ifQuantized.thenBlock());
  // The scale is a power of two: its reciprocal is exact.
  Value inverse = e.div(t.f32(1.0f), scale);
  SmallVector<Value> codes;
  for (Value x : v)
    codes.push_back(e.toE4M3Bits(
        e.roundToMinifloat(e.mul(x, inverse), 3, -6, num::kE4M3Max)));
  storeBytes(b, loc, codes, cache.bytes(), e.add(values, t.column));
  Value lane = t.lane;
  Value firstOfBlock = e.cmp(
      arith::CmpIPredicate::eq,
      arith::RemUIOp::create(b, loc, lane, t.index(blockLanes)), t.index(0));
  e.ifThen(firstOfBlock, [&] { storeBlockScale(t, cache, scales, scale); });
  // The pad bytes after the scales, by the row's first lane.
  e.ifThen(e.cmp(arith::CmpIPredicate::eq, lane, t.index(0)), [&] {
    Value zero = arith::ConstantOp::create(b, loc, b.getI8IntegerAttr(0));
    for (int64_t i = row.quantDims / row.scaleBlock; i < row.scaleBytes; ++i)
      memref::StoreOp::create(b, loc, zero, cache.bytes(),
                              ValueRange{e.add(scales, t.index(i))});
  });
  b.setInsertionPointToStart(ifQuantized.elseBlock());
  // Rope dims: bf16, little-endian.
  SmallVector<Value> halves;
  Value shift = arith::ConstantOp::create(b, loc, b.getI16IntegerAttr(8));
  for (Value x : v) {
    Value rounded = arith::TruncFOp::create(b, loc, b.getBF16Type(), x);
    Value bits = arith::BitcastOp::create(b, loc, b.getI16Type(), rounded);
    halves.push_back(arith::TruncIOp::create(b, loc, b.getI8Type(), bits));
    halves.push_back(arith::TruncIOp::create(
        b, loc, b.getI8Type(), arith::ShRUIOp::create(b, loc, bits, shift)));
  }
  storeBytes(b, loc, halves, cache.bytes(), cache.rawOffset(values, t.column));
}

} // namespace

int64_t firstColumnOf(Value part) {
  int64_t begin = 0;
  for (Value other : part.getDefiningOp<SplitColumnsOp>().getParts()) {
    if (other == part)
      break;
    begin += cast<ShapedType>(other.getType()).getDimSize(1);
  }
  return begin;
}

std::optional<ColumnWindow> columnWindowOf(Value rows) {
  Value part = rows;
  if (auto expand = rows.getDefiningOp<tensor::ExpandShapeOp>()) {
    auto type = expand.getResultType();
    if (expand.getSrcType().getRank() != 2 || type.getRank() != 3 ||
        type.isDynamicDim(1) || type.isDynamicDim(2) ||
        expand.getReassociationIndices()[0].size() != 1)
      return std::nullopt;
    part = expand.getSrc();
  }
  auto split = part.getDefiningOp<SplitColumnsOp>();
  if (!split)
    return std::nullopt;
  auto productType = split.getInput().getType();
  Type element = productType.getElementType();
  if (cast<ShapedType>(part.getType()).getElementType() != element)
    return std::nullopt;
  int64_t begin = firstColumnOf(part);
  int64_t bytes = element.getIntOrFloatBitWidth() / 8;
  if ((begin * bytes) % 16 != 0 || (productType.getDimSize(1) * bytes) % 16)
    return std::nullopt;
  return ColumnWindow{split.getInput(), begin};
}

void releaseColumnWindow(RewriterBase &rewriter, Value rows) {
  Operation *def = rows.getDefiningOp();
  auto split = dyn_cast<SplitColumnsOp>(def);
  if (!split) {
    split = def->getOperand(0).getDefiningOp<SplitColumnsOp>();
    if (def->use_empty())
      rewriter.eraseOp(def);
  }
  // Sizes taken of the parts for the views go with them.
  for (Operation *user : llvm::make_early_inc_range(split->getUsers()))
    if (isOpTriviallyDead(user))
      rewriter.eraseOp(user);
  if (split->use_empty())
    rewriter.eraseOp(split);
}

void lowerRowChain(RewriterBase &rewriter, ArrayRef<Operation *> chain,
                   Operation *storeOp) {
  auto store = dyn_cast_or_null<CacheStoreOp>(storeOp);
  Operation *last = store ? storeOp : chain.back();
  Location loc = last->getLoc();
  OpBuilder &b = rewriter;
  b.setInsertionPoint(last);
  Value rowsIn = chain.empty() ? store.getRows() : chain.front()->getOperand(0);
  auto inputType = cast<RankedTensorType>(rowsIn.getType());
  auto outputType = chain.empty()
                        ? cast<RankedTensorType>(store.getRows().getType())
                        : rowType(chain.back());
  int64_t width = *rowWidth(outputType);
  int64_t rank = outputType.getRank();
  auto identityBuffer = [&](Value tensor) {
    auto type = cast<RankedTensorType>(tensor.getType());
    return bufferization::ToBufferOp::create(
        b, loc, MemRefType::get(type.getShape(), type.getElementType()), tensor,
        /*readOnly=*/b.getUnitAttr());
  };
  // Buffers the kernel reads: the row input (or the product it is columns
  // of), then each op's other operands.
  std::optional<ColumnWindow> window = columnWindowOf(rowsIn);
  Value input = identityBuffer(window ? window->product : rowsIn);
  SmallVector<Value> extras(chain.size());
  for (auto [i, op] : llvm::enumerate(chain))
    if (auto norm = dyn_cast<RMSNormOp>(op); norm && norm.getWeight())
      extras[i] = identityBuffer(norm.getWeight());
    else if (auto rope = dyn_cast<RoPEOp>(op))
      extras[i] = identityBuffer(rope.getPositions());
  // The result: a fresh buffer, or the cache's bytes and the row ids.
  Value output, rowIds, cacheBytes;
  if (store) {
    rowIds = identityBuffer(store.getRowIds());
    cacheBytes =
        UnrealizedConversionCastOp::create(
            b, loc, MemRefType::get({ShapedType::kDynamic}, b.getI8Type()),
            store.getCache())
            .getResult(0);
  } else {
    // Only the token count is dynamic where the rows come from a window.
    SmallVector<Value> dynamicSizes;
    for (int64_t d = 0; d < rank; ++d)
      if (inputType.isDynamicDim(d))
        dynamicSizes.push_back(memref::DimOp::create(b, loc, input, d));
    output = memref::AllocOp::create(
        b, loc,
        MemRefType::get(outputType.getShape(), outputType.getElementType()),
        dynamicSizes);
  }

  // Team and block shape.
  int64_t lanesInRow = width / kChunk;
  int64_t team = static_cast<int64_t>(llvm::PowerOf2Ceil(lanesInRow));
  int64_t threads = std::max(team, kMinBlockThreads);
  int64_t teamsPerBlock = threads / team;
  int64_t rowsAtOnce = rowsPerTeam(rank, width);
  int64_t rowsPerBlock = teamsPerBlock * rowsAtOnce;
  bool reducesAcrossWarps =
      team > kWarpLanes &&
      llvm::any_of(chain, [](Operation *op) { return isa<RMSNormOp>(op); });

  auto c = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  Value heads = Value();
  if (rank == 3)
    heads = window ? Value(c(inputType.getDimSize(1)))
                   : Value(memref::DimOp::create(b, loc, input, 1));
  Value rows = memref::DimOp::create(b, loc, input, 0);
  if (heads)
    rows = arith::MulIOp::create(b, loc, rows, heads);
  Value groups = arith::CeilDivSIOp::create(b, loc, rows, c(rowsPerBlock));
  Value blocks = arith::MinSIOp::create(b, loc, groups, c(kGridLimit));

  // When every row of a block is a head of one token, the block computes
  // that token's rope angles once (the rope lanes of all its heads would
  // each compute the same cos and sin otherwise).
  int64_t headCount = rank == 3 ? outputType.getDimSize(1) : 0;
  bool rowsShareToken = rank == 3 && !ShapedType::isDynamic(headCount) &&
                        headCount % rowsPerBlock == 0;
  int64_t partialSlots = reducesAcrossWarps ? threads / kWarpLanes : 0;
  SmallVector<RopeAngles> angles(chain.size());
  int64_t sharedFloats = partialSlots;
  for (auto [i, op] : llvm::enumerate(chain))
    if (auto rope = dyn_cast<RoPEOp>(op);
        rope && rowsShareToken &&
        static_cast<int64_t>(rope.getRopeDim()) / 2 <= threads) {
      angles[i].at = sharedFloats;
      sharedFloats += rope.getRopeDim();
    }
  bool sharesAngles =
      llvm::any_of(angles, [](const RopeAngles &rope) { return rope.at >= 0; });

  Operation *func = last->getParentOfType<func::FuncOp>();
  mlir::gpu::LaunchOp launch = createLaunch(b, loc, kernelName(func, "rows"),
                                            blocks, threads, sharedFloats);
  Value threadId = launch.getThreadIds().x;
  Value teamIndex = arith::DivUIOp::create(b, loc, threadId, c(team));
  Value lane = arith::RemUIOp::create(b, loc, threadId, c(team));
  Value column = arith::MulIOp::create(b, loc, lane, c(kChunk));
  Value laneInRow = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                          lane, c(lanesInRow));
  Value workgroup =
      sharedFloats > 0 ? Value(launch.getWorkgroupAttributions()[0]) : Value();
  Value partials = reducesAcrossWarps ? workgroup : Value();
  // Frequency tables live in the kernel.
  for (auto [i, op] : llvm::enumerate(chain))
    if (auto rope = dyn_cast<RoPEOp>(op)) {
      angles[i].freqs = constantTable(
          b, loc, func, "v4a_rope_freqs",
          ropeFrequencies(rope.getRopeDim(), rope.getTheta().convertToDouble(),
                          rope.getYarnAttr()));
      if (angles[i].at >= 0)
        angles[i].shared = workgroup;
    }
  Value lastRow = arith::SubIOp::create(b, loc, rows, c(1));
  // Product row t, columns begin (+ h * width) + the thread's column.
  auto windowIndices = [&](OpBuilder &nb, Location l, ArrayRef<Value> lead,
                           const ColumnWindow &w) -> SmallVector<Value> {
    Value first = arith::AddIOp::create(
        nb, l, column, arith::ConstantIndexOp::create(nb, l, w.begin));
    if (lead.size() == 2)
      first = arith::AddIOp::create(
          nb, l, first,
          arith::MulIOp::create(nb, l, lead[1],
                                arith::ConstantIndexOp::create(nb, l, width)));
    return {lead[0], first};
  };
  bool skipsUnkept = store && !chain.empty();
  auto loadRowId = [&](OpBuilder &nb, Location l, Value token) -> Value {
    return arith::IndexCastOp::create(
        nb, l, nb.getIndexType(),
        memref::LoadOp::create(nb, l, rowIds, ValueRange{token}));
  };
  // A valid row the cache keeps (id -1: none).
  auto kept = [&](OpBuilder &nb, Location l, Value valid, Value id) -> Value {
    return arith::AndIOp::create(
        nb, l, valid,
        arith::CmpIOp::create(nb, l, arith::CmpIPredicate::sge, id, c(0)));
  };
  // Row `inGroup` of group `group`: whether it is one of the rows, and its
  // token (and head) indices; a row past the end takes the last row's (in
  // bounds).
  struct GroupRow {
    Value inRange;
    SmallVector<Value> lead;
  };
  auto groupRow = [&](OpBuilder &nb, Location l, Value group,
                      Value inGroup) -> GroupRow {
    Value row = arith::AddIOp::create(
        nb, l, arith::MulIOp::create(nb, l, group, c(rowsPerBlock)), inGroup);
    GroupRow r;
    r.inRange =
        arith::CmpIOp::create(nb, l, arith::CmpIPredicate::ult, row, rows);
    Value clamped = arith::MinUIOp::create(nb, l, row, lastRow);
    if (heads)
      r.lead = {arith::DivUIOp::create(nb, l, clamped, heads),
                arith::RemUIOp::create(nb, l, clamped, heads)};
    else
      r.lead = {clamped};
    return r;
  };
  scf::ForOp::create(
      b, loc, launch.getBlockIds().x, groups, launch.getGridSize().x,
      ValueRange{}, [&](OpBuilder &nb, Location l, Value group, ValueRange) {
        // The cache's rows, addressed from the loop body's builder.
        cpu::LoopEmitter emitter(nb, l);
        std::optional<CacheRows> cache;
        if (store)
          cache.emplace(emitter, cacheBytes, store.getCache().getType());
        // A group none of whose rows the cache keeps (most groups of a
        // prefill's compressed rows) skips its loads, the chain and its
        // barriers: every thread loads each of the group's ids, so the
        // choice is the block's. A bare copy does not: the ids ahead of its
        // rows cost more than the skipped groups save (measured,
        // kernels-notes).
        std::optional<OpBuilder::InsertionGuard> skipping;
        if (skipsUnkept && rowsPerBlock <= kMostGroupIds) {
          Value anyKept;
          for (int64_t r = 0; r < rowsPerBlock; ++r) {
            GroupRow row = groupRow(nb, l, group, c(r));
            Value id = loadRowId(nb, l, row.lead[0]);
            Value keptRow = kept(nb, l, row.inRange, id);
            anyKept = anyKept ? arith::OrIOp::create(nb, l, anyKept, keptRow)
                              : keptRow;
          }
          auto ifKept = scf::IfOp::create(nb, l, anyKept, /*withElse=*/false);
          skipping.emplace(nb);
          nb.setInsertionPointToStart(ifKept.thenBlock());
        }
        // The team's rows of this group: all loads first, so that each
        // thread has rowsAtOnce accesses in flight.
        SmallVector<RowThread> threadsOf;
        SmallVector<Value> valid;
        SmallVector<Values> v;
        SmallVector<Value> ids;
        for (int64_t k = 0; k < rowsAtOnce; ++k) {
          Value inGroup =
              arith::AddIOp::create(nb, l, teamIndex, c(k * teamsPerBlock));
          // Rows past the end read the last row's place (in bounds) and
          // store nothing.
          auto [inRange, lead] = groupRow(nb, l, group, inGroup);
          valid.push_back(arith::AndIOp::create(nb, l, inRange, laneInRow));
          threadsOf.push_back(RowThread{nb, l, width, team, lane, threadId,
                                        lead, column, laneInRow, partials});
          // Where the chain computes before its store, a row the cache
          // does not keep (id -1: a prefill token that completes no
          // compressed group, say) is neither read nor stored; its lanes
          // still take part in the row's shuffles and barriers, on zeros.
          // A bare copy loads its id beside the row: the id first would only
          // put its latency ahead of the row's (measured, kernels-notes).
          if (skipsUnkept) {
            Value id = loadRowId(nb, l, lead[0]);
            ids.push_back(id);
            valid[k] = kept(nb, l, valid[k], id);
          }
          v.push_back(loadChunk(nb, l, input,
                                window ? windowIndices(nb, l, lead, *window)
                                       : threadsOf[k].at(column),
                                kChunk, valid[k]));
        }
        // The token's angles, while the rows' loads are in flight; the
        // first barrier keeps the previous group's readers ahead of it.
        if (sharesAngles) {
          Value token = arith::DivUIOp::create(
              nb, l, arith::MulIOp::create(nb, l, group, c(rowsPerBlock)),
              c(headCount));
          mlir::gpu::BarrierOp::create(nb, l);
          for (auto [i, op] : llvm::enumerate(chain))
            if (angles[i].shared)
              storeRopeAngles(nb, l, cast<RoPEOp>(op).getRopeDim(), extras[i],
                              token, threadId, angles[i].freqs,
                              angles[i].shared, angles[i].at);
          mlir::gpu::BarrierOp::create(nb, l);
        }
        for (auto [i, op] : llvm::enumerate(chain))
          for (int64_t k = 0; k < rowsAtOnce; ++k)
            v[k] = applyRowOp(threadsOf[k], op, v[k], extras[i], angles[i]);
        for (int64_t k = 0; k < rowsAtOnce; ++k) {
          RowThread &t = threadsOf[k];
          if (store) {
            Value id = skipsUnkept ? ids[k] : loadRowId(nb, l, t.lead[0]);
            Value stored = skipsUnkept ? valid[k] : kept(nb, l, valid[k], id);
            storeToCache(t, *cache, v[k], id, stored);
          } else {
            storeChunk(nb, l, v[k], output, t.at(column), valid[k]);
          }
        }
        skipping.reset();
        scf::YieldOp::create(nb, l);
      });
  b.setInsertionPointAfter(launch);
  if (store) {
    rewriter.eraseOp(store);
  } else {
    Value result = bufferization::ToTensorOp::create(
        b, loc, outputType, output, /*restrict=*/true, /*writable=*/true);
    rewriter.replaceAllUsesWith(chain.back()->getResult(0), result);
  }
  for (Operation *op : llvm::reverse(chain))
    rewriter.eraseOp(op);
  if (window)
    releaseColumnWindow(rewriter, rowsIn);
}

} // namespace v4a::gpu
