//===- SparseAttention.cpp - the attention kernel family ------------------===//
//
// One block per (query token, group of 64 heads): two math warpgroups and
// a copy warpgroup, 384 threads (with fp8 MODEL1 rows two copy warpgroups,
// 512 threads). The token's slots (its window rows, then its compressed
// rows) are walked in blocks of 64, two blocks at a time, one per shared
// stage:
// - the copy warpgroups gather the rows of block 2p into stage 0 and of block
//   2p + 1 into stage 1 with cp.async (a slot of -1 or past the
//   token's slots is zero-filled and masked), in the 128-byte swizzle
//   layout (Warpgroup.h), each stage in two halves of the head's dims with
//   split barriers of their own: a half is refilled as soon as its readers
//   are done with it, while the math warpgroups work on the rest. fp8
//   MODEL1 rows (e4m3 with a scale per 64 dims, bf16 rope dims) land as
//   raw bytes, 16 values in the place of the first of their two chunks,
//   and are dequantized into both chunks' places as bf16 by the thread
//   that copied them, exactly, before the half is released;
// - warpgroup w computes S_w = Q.K_w^T for all 64 rows of stage w (m64n64,
//   K = the head width) and the online softmax of its block in base 2.
//   Warpgroup 0 goes first: its block's maxima m0 (over the running ones)
//   reach warpgroup 1, which takes m1 = max(m0, its block's maxima), so
//   that both blocks' unnormalized probabilities are rounded to bf16 for
//   P.V (spec 2b) against maxima the outputs can be rescaled from, while
//   the denominators keep them in f32;
// - O += P.V: warpgroup w owns dims w*D/2 .. (w+1)*D/2 - 1 of all 64 heads
//   and takes both blocks' P (through shared memory) against its half of
//   both stages, read MN-major (V equals K).
// Warpgroup 1 starts its pair with warpgroup 0's P.V, then its own S, so
// that stage 1 (freed last) has warpgroup 0's S and softmax to land, and
// each warpgroup's softmax runs while the other's products are on the
// tensor cores. At the end the denominators are summed across lanes and
// warpgroups in a fixed order, the sink joins them, and heads past the
// head count are never stored. A token's result depends only on its own
// slots, never on the batch around it. With the query's head norm and
// rope in the kernel, the math warpgroups normalize and turn the copied
// query tile in place (normalizeQueryTile); with the output's inverse
// RoPE, the epilogue turns the output's rope dims back. The output tile
// leaves through the query tile (stmatrix) in 16-byte chunks.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/V4AToGPU/SparseAttention.h"

#include "core/CacheLayout.h"
#include "core/StepSignature.h"
#include "dialects/V4A/IR/V4AOps.h"
#include "passes/Conversion/V4AToCPU/CacheRows.h"
#include "passes/Conversion/V4AToCPU/LoopEmitter.h"
#include "passes/Conversion/V4AToCPU/RoPEFrequencies.h"
#include "passes/Conversion/V4AToGPU/DeviceKit.h"
#include "passes/Conversion/V4AToGPU/RowRegions.h"
#include "passes/Conversion/V4AToGPU/Warpgroup.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;

namespace v4a::gpu {

namespace {

/// Row slots per block; the math warpgroups and their threads (the copy
/// warpgroups come after them).
constexpr int64_t kSlotsPerBlock = 64;
constexpr int64_t kWarpgroups = 2;
constexpr int64_t kMathThreads = kWarpgroups * kWarpgroupThreads;
/// The copy warpgroups after the math ones, and the registers a thread of
/// each takes: the copy warpgroups give up part of their share to the math
/// warpgroups (O alone is 128 f32 a thread). One gathers bf16 rows; fp8
/// MODEL1 rows, dequantized on the way, take two with fewer registers each.
/// The trades draw on what the block holds from its launch, its threads'
/// whole multiples of 8 registers within the SM's 64 K: asking for more
/// makes the math warpgroups' increase wait forever.
struct CopyTeam {
  int64_t warpgroups;
  int32_t registers, mathRegisters;
  constexpr int64_t threads() const { return warpgroups * kWarpgroupThreads; }
  constexpr int64_t blockThreads() const { return kMathThreads + threads(); }
  constexpr int64_t launchRegisters() const {
    return 65536 / blockThreads() / 8 * 8;
  }
  constexpr bool fits() const {
    return threads() * registers + kMathThreads * mathRegisters <=
           blockThreads() * launchRegisters();
  }
};
constexpr CopyTeam kBF16RowCopies{1, 72, 216}, kPackedRowCopies{2, 40, 216};
static_assert(kBF16RowCopies.fits() && kPackedRowCopies.fits());
constexpr int64_t kChunkBytes = 16;
/// The f32 slots of the exchange area.
constexpr int64_t kExchangeSlots = 2 * kWarpgroups * kMmaM;
/// An mbarrier's bytes.
constexpr int64_t kBarrierBytes = 8;
constexpr double kLog2E = 1.4426950408889634;
/// Named barriers: the math warpgroups together; warpgroup 0's maxima and
/// P ready for warpgroup 1; warpgroup 1's ready for warpgroup 0 (both
/// wait); warpgroup 0 alone; the copy warpgroups alone.
constexpr int64_t kMathBarrier = 1, kFirstReady = 2, kSecondReady = 3,
                  kFirstOnly = 4, kCopyOnly = 5;

/// Byte offsets in the dynamic shared memory.
struct SharedPlan {
  int64_t width = 0;  // D
  int64_t chunks = 0; // 16-byte chunks of a bf16 row
  int64_t query = 0;  // the 64 x D query tile
  int64_t stages[2] = {0, 0};
  int64_t probabilities[2] = {0, 0}; // P of each stage, 64 x 64 bf16
  int64_t addresses = 0; // per stage, each slot's row address (0: none)
  int64_t exchange = 0;  // 4 slots of a f32 per head: m0, m1, both sums
  int64_t masks = 0;     // per stage, a bit per slot
  int64_t barriers = 0;  // per stage and half: full, then empty
  /// Per stage, each slot's 8 scale bytes (fp8 MODEL1 rows; zeros for a
  /// bf16 row), and a bit per slot with a bf16 row (2 words).
  int64_t scales = 0;
  int64_t kinds = 0;
  /// The output's inverse RoPE: the cosines, then the sines, of its pairs
  /// at the token's position (f32).
  int64_t outputAngles = 0;
  int64_t total = 0;
};

/// `ropeDim`: the rope dims of the output's fused inverse RoPE (0: none).
std::optional<SharedPlan> planShared(int64_t width, bool packedRows,
                                     int64_t ropeDim) {
  // Rows are 128-byte swizzle atoms of 64 dims, and each half of D is
  // whole atoms and a valid N of P.V (<= 256).
  if (width < 128 || width % 128 != 0 || width > 512)
    return std::nullopt;
  SharedPlan plan;
  plan.width = width;
  plan.chunks = width * 2 / kChunkBytes;
  int64_t tile = kMmaM * width * 2;
  int64_t pTile = kMmaM * kSlotsPerBlock * 2;
  // The tiles start at multiples of the atom (the swizzle XORs address
  // bits); the window's base is aligned up to one, hence the spare atom.
  plan.query = 0;
  plan.stages[0] = tile;
  plan.stages[1] = 2 * tile;
  plan.probabilities[0] = 3 * tile;
  plan.probabilities[1] = 3 * tile + pTile;
  plan.addresses = 3 * tile + 2 * pTile;
  plan.exchange = plan.addresses + 2 * kSlotsPerBlock * 8;
  plan.masks = plan.exchange + kExchangeSlots * 4;
  plan.barriers = plan.masks + 2 * 2 * 4;
  plan.scales = plan.barriers + 2 * 4 * kBarrierBytes;
  plan.kinds = plan.scales + (packedRows ? 2 * kSlotsPerBlock * 8 : 0);
  plan.outputAngles = plan.kinds + (packedRows ? 2 * 2 * 4 : 0);
  plan.total = plan.outputAngles + ropeDim * 4 + kSwizzleAtomBytes;
  if (plan.total > step::HostOp::kMaxSharedBytes)
    return std::nullopt;
  return plan;
}

std::optional<layout::RowLayout> rowsOf(KVCacheType type) {
  return layout::describeRow(toRowKind(type.getLayout()), type.getDim());
}

bool hasBF16Rows(KVCacheType type, int64_t width) {
  std::optional<layout::RowLayout> row = rowsOf(type);
  return row && row->kind == layout::RowKind::BF16 && row->dim == width;
}

/// fp8 MODEL1 rows of `width` dims whose e4m3 and rope dims are whole
/// 8-chunk columns of the tile (64 dims each), as they are at width 512,
/// in pages that keep every row's values 16-byte and its 8 scale bytes
/// 8-byte aligned (the copies' sizes): an odd page of 584-byte rows would
/// not.
bool hasPackedRows(KVCacheType type, int64_t width) {
  std::optional<layout::RowLayout> row = rowsOf(type);
  return row && row->kind == layout::RowKind::FP8Model1 && row->dim == width &&
         row->quantDims % 64 == 0 && row->scaleBlock == 64 &&
         row->scaleBytes == 8 && row->valueBytes % kChunkBytes == 0 &&
         type.getPageSize() * row->rowBytes() % kChunkBytes == 0;
}

/// The fp8 MODEL1 layout of a cache_attention's rows, when the window or
/// the compressed cache (or both: one width, one layout) holds them; a
/// failure when a cache holds rows the family does not read.
FailureOr<std::optional<layout::RowLayout>> packedLayoutOf(CacheAttentionOp op,
                                                           int64_t width) {
  std::optional<layout::RowLayout> packed;
  for (Value cache : {op.getWindow(), op.getCompressed()}) {
    if (!cache)
      continue;
    auto type = cast<KVCacheType>(cache.getType());
    if (hasPackedRows(type, width))
      packed = rowsOf(type);
    else if (!hasBF16Rows(type, width))
      return failure();
  }
  return packed;
}

/// The kernel body's builder and the values every piece uses.
struct Kernel {
  Kernel(OpBuilder &b, Location loc, SharedPlan plan)
      : b(b), loc(loc), plan(std::move(plan)) {}

  OpBuilder &b;
  Location loc;
  SharedPlan plan;
  /// Thread coordinates: in the block, its warpgroup (2 and up: the copy
  /// ones), warp in the warpgroup and lane.
  Value thread, warpgroup, warp, lane;
  /// Shared addresses (i64): the window's base.
  Value sharedBase;
  /// Views of the shared slot addresses, masks and exchange slots, and of
  /// the slots' scales and kinds (fp8 MODEL1 rows).
  Value slotAddresses, slotMasks, exchange, slotScales, slotKinds;

  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value i32(int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  }
  Value i64(int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  }
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc,
                                     b.getF32FloatAttr(static_cast<float>(v)));
  }
  Value toI64(Value v) {
    return arith::IndexCastOp::create(b, loc, b.getI64Type(), v);
  }
  Value add(Value x, Value y) {
    if (isa<FloatType>(x.getType()))
      return arith::AddFOp::create(b, loc, x, y);
    return arith::AddIOp::create(b, loc, x, y);
  }
  Value sub(Value x, Value y) {
    if (isa<FloatType>(x.getType()))
      return arith::SubFOp::create(b, loc, x, y);
    return arith::SubIOp::create(b, loc, x, y);
  }
  Value mul(Value x, Value y) {
    if (isa<FloatType>(x.getType()))
      return arith::MulFOp::create(b, loc, x, y);
    return arith::MulIOp::create(b, loc, x, y);
  }
  Value div(Value x, Value y) { return arith::DivUIOp::create(b, loc, x, y); }
  Value rem(Value x, Value y) { return arith::RemUIOp::create(b, loc, x, y); }
  Value maxf(Value x, Value y) {
    return arith::MaximumFOp::create(b, loc, x, y);
  }
  Value ult(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, y);
  }
  Value eq(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, x, y);
  }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value exp2(Value x) { return math::Exp2Op::create(b, loc, x); }
  Value isNegInf(Value x) {
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, x,
                                 f32(-INFINITY));
  }
  void ifThen(Value condition, function_ref<void()> body) {
    scf::IfOp::create(b, loc, condition, [&](OpBuilder &, Location) {
      body();
      scf::YieldOp::create(b, loc);
    });
  }
  Value shuffleXor(Value v, int64_t mask) {
    return v4a::gpu::shuffleXor(b, loc, v, mask);
  }
  Value load(Value memref, Value at) {
    return memref::LoadOp::create(b, loc, memref, ValueRange{at});
  }
  void store(Value value, Value memref, Value at) {
    memref::StoreOp::create(b, loc, value, memref, ValueRange{at});
  }

  /// Swizzle atoms across a row of D dims.
  int64_t rowAtoms() const { return plan.width / 64; }
  /// Bytes between 8-row groups of a row tile.
  int64_t groupStride() const { return rowAtoms() * kSwizzleAtomBytes; }
  Value at(int64_t offset) { return add(sharedBase, i64(offset)); }

  /// The split barrier of stage `stage`'s half `half`: full (its rows have
  /// landed) or empty (its readers are done).
  Value fullBarrier(int64_t stage, int64_t half) {
    return at(plan.barriers + (stage * 2 + half) * kBarrierBytes);
  }
  Value emptyBarrier(int64_t stage, int64_t half) {
    return fullBarrier(stage + 2, half);
  }

  /// The row of register `r` of this thread's fragments (0..63) and its
  /// column within the MMA's N.
  FragmentPlace place(int64_t r) {
    return fragmentPlace(b, loc, warp, lane, r);
  }
  /// The two heads (rows) of this thread's fragments.
  std::array<Value, 2> headRows() { return {place(0).row, place(2).row}; }

  /// A quad's per-head values (of its heads `rows`) into exchange slot
  /// `slot` (an index, 0..3, 64 f32 each): a lane of each quad writes them.
  void offer(ArrayRef<Value> values, ArrayRef<Value> rows, Value slot) {
    Value quadLead = eq(rem(lane, index(4)), index(0));
    ifThen(quadLead, [&] {
      for (int half = 0; half < 2; ++half)
        store(values[half], exchange, add(mul(slot, index(kMmaM)), rows[half]));
    });
  }
  Value offered(Value slot, Value headRow) {
    return load(exchange, add(mul(slot, index(kMmaM)), headRow));
  }

  /// Element offset of (head, slot) in a P tile (64 slots: one atom a row).
  Value probabilityElement(Value head, Value slot) {
    Value byte = swizzledOffset(b, loc, head, div(slot, index(8)), 1);
    Value column = rem(slot, index(8));
    return add(div(byte, index(2)), column);
  }
};

/// A bf16 pair of two f32 values.
Value bf16Pair(OpBuilder &b, Location loc, Value x, Value y) {
  auto type = VectorType::get({2}, b.getBF16Type());
  return vector::FromElementsOp::create(
      b, loc, type,
      ValueRange{arith::TruncFOp::create(b, loc, b.getBF16Type(), x),
                 arith::TruncFOp::create(b, loc, b.getBF16Type(), y)});
}

/// A math thread's place in a query head row: its chunk's first column,
/// and per pair of the chunk whether it is a rope dim and which pair.
struct QueryLane {
  Value column, touchesRope;
  SmallVector<RopeColumn> pairs;
};

/// Query head rows a warp normalizes a trip of the prologue's loop: their
/// chains side by side, in a fraction of the unrolled code.
constexpr int64_t kQueryRowsPerTrip = 4;

/// `rope`'s frequency table, a constant of the kernel module.
Value ropeFrequencyTable(OpBuilder &b, Location loc, RoPEOp rope,
                         Operation *func) {
  return constantTable(b, loc, func, "v4a_rope_freqs",
                       ropeFrequencies(rope.getRopeDim(),
                                       rope.getTheta().convertToDouble(),
                                       rope.getYarnAttr()));
}

/// Where the prologue keeps the token's rope angles in the exchange area
/// (whose per-head slots the main loop uses only after the prologue).
int64_t queryAnglesSlot(int64_t width) {
  return kMmaM * (width / kChunk) / kWarpLanes;
}

/// The token's rope angles into the exchange area, a pair a math thread
/// (storeRopeAngles): one sine's code in the kernel, not a lane's four.
void storeQueryAngles(Kernel &k, RoPEOp rope, Value positions, Value token,
                      Operation *func) {
  storeRopeAngles(k.b, k.loc, rope.getRopeDim(), positions, token, k.thread,
                  ropeFrequencyTable(k.b, k.loc, rope, func), k.exchange,
                  queryAnglesSlot(k.plan.width));
}

/// The cosine and sine of each pair of the lane's chunk, as
/// storeQueryAngles left them (zeros for a lane with no rope dims).
SmallVector<Value> laneAngles(Kernel &k, RoPEOp rope, const QueryLane &lane) {
  OpBuilder &b = k.b;
  Location loc = k.loc;
  auto angles =
      scf::IfOp::create(b, loc, SmallVector<Type>(kChunk, b.getF32Type()),
                        lane.touchesRope, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(angles.thenBlock());
  Value cosines = k.index(queryAnglesSlot(k.plan.width));
  Value sines = k.add(cosines, k.index(rope.getRopeDim() / 2));
  SmallVector<Value> values;
  for (const RopeColumn &pair : lane.pairs)
    values.append({k.load(k.exchange, k.add(cosines, pair.pair)),
                   k.load(k.exchange, k.add(sines, pair.pair))});
  scf::YieldOp::create(b, loc, values);
  b.setInsertionPointToStart(angles.elseBlock());
  scf::YieldOp::create(b, loc, SmallVector<Value>(kChunk, k.f32(0.0)));
  return SmallVector<Value>(angles.getResults());
}

/// The lane's values `v` with their rope pairs turned by `angles`.
SmallVector<Value> turnLanePairs(Kernel &k, const QueryLane &lane,
                                 ArrayRef<Value> v, ArrayRef<Value> angles) {
  OpBuilder &b = k.b;
  Location loc = k.loc;
  auto turned = scf::IfOp::create(b, loc, TypeRange(ValueRange(v)),
                                  lane.touchesRope, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(turned.thenBlock());
  SmallVector<Value> out(v);
  for (auto [p, pair] : llvm::enumerate(lane.pairs)) {
    size_t i = 2 * p;
    auto [re, im] = rotatePair(b, loc, v[i], v[i + 1], angles[i], angles[i + 1],
                               /*inverse=*/false);
    out[i] = k.select(pair.inRope, re, v[i]);
    out[i + 1] = k.select(pair.inRope, im, v[i + 1]);
  }
  scf::YieldOp::create(b, loc, out);
  b.setInsertionPointToStart(turned.elseBlock());
  scf::YieldOp::create(b, loc, v);
  return SmallVector<Value>(turned.getResults());
}

/// A math thread's place in a query head row of the block's tile: its
/// 8-dim chunk `chunk`.
QueryLane queryLaneOf(Kernel &k, QueryNorm chain, Value chunk) {
  int64_t width = k.plan.width;
  int64_t start = width - static_cast<int64_t>(chain.rope.getRopeDim());
  QueryLane lane;
  lane.column = k.mul(chunk, k.index(kChunk));
  lane.touchesRope = k.ult(k.index(start), k.add(lane.column, k.index(kChunk)));
  for (int64_t i = 0; i < kChunk; i += 2)
    lane.pairs.push_back(
        ropeColumn(k.b, k.loc, k.add(lane.column, k.index(i)), start));
  return lane;
}

/// The query tile, holding q before its head norm and rope (`chain`),
/// normalized and turned in place as the row family computes it (the same
/// sums in the same order), each op rounding to bf16, the rope pairs
/// turned by the angles storeQueryAngles left. Heads past the head count
/// hold zeros and stay zeros. Every math thread calls it, after the tile
/// and the angles have landed and the math threads have met.
///
/// A row is a warp's (or, below width 256, a part of one): lane l holds
/// chunks l, l + 32, ... of it. The row family's team holds chunk c in its
/// lane c, so its warp w sums chunks 32w .. 32w + 31 by the same butterfly
/// this lane's w-th chunk goes through, and adds the warps' sums in order:
/// the same bits without a meeting of warps. Loops over a warp's rows, not
/// unrolled: the unrolled prologue (~2,800 instructions, a lane's four
/// sines among them) took the kernel's code past the instruction cache,
/// and the loop after it waited on fetches.
void normalizeQueryTile(Kernel &k, QueryNorm chain) {
  OpBuilder &b = k.b;
  Location loc = k.loc;
  Type bf16 = b.getBF16Type();
  int64_t width = k.plan.width;
  int64_t rowChunks = width / kChunk;
  int64_t rowLanes = std::min(rowChunks, kWarpLanes);
  int64_t chunksPerLane = rowChunks / rowLanes;
  int64_t teams = kMathThreads / rowLanes;
  Value laneIndex = k.rem(k.thread, k.index(rowLanes));
  Value team = k.div(k.thread, k.index(rowLanes));
  double eps = chain.norm.getEps().convertToDouble();
  int64_t ropeStart = width - static_cast<int64_t>(chain.rope.getRopeDim());
  // The lane's chunks, and the angles of those that may reach the rope
  // dims (the others turn nothing).
  SmallVector<Value> chunks;
  SmallVector<std::optional<QueryLane>> lanes;
  SmallVector<SmallVector<Value>> angles;
  for (int64_t c = 0; c < chunksPerLane; ++c) {
    chunks.push_back(k.add(laneIndex, k.index(c * rowLanes)));
    if ((c + 1) * rowLanes * kChunk <= ropeStart) {
      lanes.push_back(std::nullopt);
      angles.emplace_back();
      continue;
    }
    lanes.push_back(queryLaneOf(k, chain, chunks.back()));
    angles.push_back(laneAngles(k, chain.rope, *lanes.back()));
  }
  Value tile = k.at(k.plan.query);
  int64_t rowsPerTeam = kMmaM / teams;
  int64_t perTrip = std::min(kQueryRowsPerTrip, rowsPerTeam);
  scf::ForOp::create(
      b, loc, k.index(0), k.index(rowsPerTeam / perTrip), k.index(1),
      ValueRange{}, [&](OpBuilder &, Location, Value trip, ValueRange) {
        // The trip's rows' chunks: every load first.
        SmallVector<Value> addresses;
        SmallVector<SmallVector<Value>> values;
        for (int64_t u = 0; u < perTrip; ++u) {
          Value j = k.add(k.mul(trip, k.index(perTrip)), k.index(u));
          Value row = k.add(k.mul(j, k.index(teams)), team);
          for (Value chunk : chunks) {
            addresses.push_back(k.add(
                tile,
                k.toI64(swizzledOffset(b, loc, row, chunk, k.rowAtoms()))));
            Value bits =
                loadShared(b, loc, addresses.back(),
                           VectorType::get({kChunk}, bf16), kChunkBytes);
            SmallVector<Value> &v = values.emplace_back();
            for (int64_t i = 0; i < kChunk; ++i)
              v.push_back(arith::ExtFOp::create(
                  b, loc, b.getF32Type(),
                  vector::ExtractOp::create(b, loc, bits, i).getResult()));
          }
        }
        for (int64_t u = 0; u < perTrip; ++u) {
          ArrayRef<SmallVector<Value>> rowValues =
              ArrayRef(values).slice(u * chunksPerLane, chunksPerLane);
          Value sum;
          for (const SmallVector<Value> &v : rowValues) {
            Value part = reduceLanes(b, loc, sumOfSquares(b, loc, v), rowLanes,
                                     Combine::Add);
            sum = sum ? combine(b, loc, Combine::Add, sum, part) : part;
          }
          Value factor = rmsFactor(b, loc, sum, width, eps);
          for (int64_t c = 0; c < chunksPerLane; ++c) {
            SmallVector<Value> v = values[u * chunksPerLane + c];
            for (Value &x : v)
              x = roundTo(b, loc, k.mul(x, factor), bf16);
            if (lanes[c])
              v = turnLanePairs(k, *lanes[c], v, angles[c]);
            SmallVector<Value> narrow;
            for (Value x : v)
              narrow.push_back(arith::TruncFOp::create(b, loc, bf16, x));
            storeShared(b, loc, addresses[u * chunksPerLane + c],
                        vector::FromElementsOp::create(
                            b, loc, VectorType::get({kChunk}, bf16), narrow),
                        kChunkBytes);
          }
        }
        scf::YieldOp::create(b, loc);
      });
}

/// The first element of head `head`'s query row for `token` when q is
/// columns of a merged product (window): row `token` of the product, the
/// part's first column + head * D. Built step by step: the IR's order is
/// the same whichever compiler built v4a.
Value queryWindowElement(Kernel &k, const ColumnWindow &window, Value token,
                         Value head) {
  int64_t productWidth =
      cast<ShapedType>(window.product.getType()).getDimSize(1);
  Value row = k.mul(token, k.index(productWidth));
  Value headColumn = k.mul(head, k.index(k.plan.width));
  Value column = k.add(k.index(window.begin), headColumn);
  return k.add(row, column);
}

/// A warpgroup's running softmax state: O over its half of the dims, and
/// per head (of its two fragment rows) the running maximum (raw: -inf
/// before any row) and its share of the denominator.
struct Running {
  SmallVector<Value, 2> accumulators; // O's dims in tiles of the MMA's N
  Value maxima[2];
  Value sums[2];

  /// As loop-carried or yielded values, in this order.
  SmallVector<Value> values() const {
    SmallVector<Value> all(accumulators.begin(), accumulators.end());
    all.append({maxima[0], maxima[1], sums[0], sums[1]});
    return all;
  }
  static Running of(ValueRange values) {
    size_t tiles = values.size() - 4;
    Running run;
    run.accumulators.assign(values.begin(), values.begin() + tiles);
    run.maxima[0] = values[tiles];
    run.maxima[1] = values[tiles + 1];
    run.sums[0] = values[tiles + 2];
    run.sums[1] = values[tiles + 3];
    return run;
  }
};

/// The exponent base for a maximum: 0 before any row (every term is 0).
Value exponentBase(Kernel &k, Value maximum) {
  return k.select(k.isNegInf(maximum), k.f32(0.0), maximum);
}

/// `accumulators` times a factor per head half (their registers' rows).
SmallVector<Value, 2> rescale(Kernel &k, ArrayRef<Value> accumulators,
                              const Value factors[2]) {
  SmallVector<Value, 2> scaled;
  for (Value accumulator : accumulators) {
    SmallVector<Value> o = unpackAccumulator(k.b, k.loc, accumulator);
    for (size_t r = 0; r < o.size(); ++r)
      o[r] = k.mul(o[r], factors[(r % 4) / 2]);
    scaled.push_back(packAccumulator(k.b, k.loc, o));
  }
  return scaled;
}

} // namespace

bool isAttentionCovered(CacheAttentionOp op) {
  auto query = cast<RankedTensorType>(op.getQuery().getType());
  auto kv = cast<RankedTensorType>(op.getKv().getType());
  auto result = cast<RankedTensorType>(op.getType());
  if (!query.getElementType().isBF16() || !kv.getElementType().isBF16() ||
      !result.getElementType().isBF16())
    return false;
  int64_t heads = query.getDimSize(1), width = query.getDimSize(2);
  if (ShapedType::isDynamic(heads) || ShapedType::isDynamic(width))
    return false;
  FailureOr<std::optional<layout::RowLayout>> packed =
      packedLayoutOf(op, width);
  return succeeded(packed) &&
         planShared(width, packed->has_value(), /*ropeDim=*/0);
}

RoPEOp fusedInverseRoPE(CacheAttentionOp op) {
  if (!op->hasOneUse())
    return nullptr;
  // Its only user; the rope's positions are i64, so the output is its input.
  auto rope = dyn_cast<RoPEOp>(*op->getUsers().begin());
  if (!rope || !rope.getInverse() || rope->getBlock() != op->getBlock())
    return nullptr;
  int64_t width = cast<RankedTensorType>(op.getType()).getDimSize(2);
  int64_t ropeDim = rope.getRopeDim();
  if (ropeDim <= 0 || ropeDim % 2 != 0 || ropeDim > width)
    return nullptr;
  // Its angles take shared memory.
  FailureOr<std::optional<layout::RowLayout>> packed =
      packedLayoutOf(op, width);
  return succeeded(packed) && planShared(width, packed->has_value(), ropeDim)
             ? rope
             : nullptr;
}

namespace {

/// Whether the math warpgroups can take a query head row of `width` dims
/// as teams of lanes of a chunk each: whole teams, whole rows per team.
bool splitsIntoTeams(int64_t width) {
  int64_t lanes = width / kChunk;
  return width % kChunk == 0 && llvm::isPowerOf2_64(lanes) &&
         kMathThreads % lanes == 0 && kMmaM % (kMathThreads / lanes) == 0;
}

/// rope(rms_norm(x)) of one use each in `block`, or null ops.
QueryNorm queryChainOf(Value query, Block *block) {
  auto rope = query.getDefiningOp<RoPEOp>();
  if (!rope || rope.getInverse() || !rope->hasOneUse() ||
      rope->getBlock() != block)
    return {};
  auto norm = rope.getInput().getDefiningOp<RMSNormOp>();
  if (!norm || norm.getWeight() || !norm->hasOneUse() ||
      norm->getBlock() != block)
    return {};
  int64_t width = cast<RankedTensorType>(query.getType()).getDimSize(2);
  int64_t ropeDim = rope.getRopeDim();
  if (!splitsIntoTeams(width) || ropeDim <= 0 || ropeDim % 2 != 0 ||
      ropeDim > width || queryAnglesSlot(width) + ropeDim > kExchangeSlots)
    return {};
  return {norm, rope};
}

} // namespace

QueryNorm fusedQueryNorm(CacheAttentionOp op) {
  return queryChainOf(op.getQuery(), op->getBlock());
}

/// The fused inverse RoPE of an attention's output: the positions, where
/// its rope dims start, and the token's angles, which the prologue writes
/// and the epilogue reads.
struct OutputRoPE {
  RoPEOp op;
  Value positions;
  int64_t start = 0;
};

void lowerCacheAttention(RewriterBase &rewriter, CacheAttentionOp op,
                         RoPEOp inverseRope, QueryNorm queryNorm) {
  Location loc = op.getLoc();
  OpBuilder &b = rewriter;
  b.setInsertionPoint(op);
  auto queryType = cast<RankedTensorType>(op.getQuery().getType());
  int64_t heads = queryType.getDimSize(1), width = queryType.getDimSize(2);
  std::optional<layout::RowLayout> packedRows = *packedLayoutOf(op, width);
  SharedPlan plan = *planShared(
      width, packedRows.has_value(),
      inverseRope ? static_cast<int64_t>(inverseRope.getRopeDim()) : 0);
  auto buffer = [&](Value tensor) { return readOnlyBuffer(b, loc, tensor); };
  // With the query's norm and rope in the prologue, q before them (in
  // place when it is columns of a merged product).
  Value rawQuery = queryNorm ? queryNorm.norm.getInput() : Value();
  std::optional<ColumnWindow> queryWindow =
      rawQuery ? columnWindowOf(rawQuery) : std::nullopt;
  Value query = buffer(queryWindow ? queryWindow->product
                       : rawQuery  ? rawQuery
                                   : op.getQuery());
  Value kv = buffer(op.getKv());
  Value windowRows = buffer(op.getWindowRows()), sink = buffer(op.getSink());
  Value windowBytes = cacheBytes(b, loc, op.getWindow());
  Value compressedBytes, compressedRows, compressedSlots, bases;
  // A layer without top-k attends to every compressed row a token sees
  // (v4a.visible_rows): the kernel numbers them from the token's position
  // instead of reading them from a [tokens, rows] table.
  VisibleRowsOp allVisible;
  Value visiblePositions;
  if (op.getCompressed()) {
    compressedBytes = cacheBytes(b, loc, op.getCompressed());
    allVisible = op.getCompressedRows().getDefiningOp<VisibleRowsOp>();
    if (allVisible) {
      cpu::LoopEmitter host(b, loc);
      visiblePositions = buffer(allVisible.getPositions());
      compressedSlots = cpu::boundRows(
          host, host.buffer(allVisible.getContext()), allVisible.getRatio());
    } else {
      compressedRows = buffer(op.getCompressedRows());
      compressedSlots = memref::DimOp::create(b, loc, compressedRows, 1);
    }
    bases = buffer(op.getBase());
  }
  Value queryPositions =
      queryNorm ? buffer(queryNorm.rope.getPositions()) : Value();
  std::optional<OutputRoPE> rope;
  if (inverseRope)
    rope = OutputRoPE{inverseRope, buffer(inverseRope.getPositions()),
                      width - static_cast<int64_t>(inverseRope.getRopeDim())};
  Value tokens = memref::DimOp::create(b, loc, query, 0);
  auto outputType = MemRefType::get(queryType.getShape(), b.getBF16Type());
  Value output =
      memref::AllocOp::create(b, loc, outputType, ValueRange{tokens});
  int64_t groups = llvm::divideCeil(heads, kMmaM);
  Value blocks = arith::MulIOp::create(
      b, loc, tokens, arith::ConstantIndexOp::create(b, loc, groups));

  Operation *func = op->getParentOfType<func::FuncOp>();
  CopyTeam copies = packedRows ? kPackedRowCopies : kBF16RowCopies;
  int64_t copyThreads = copies.threads();
  mlir::gpu::LaunchOp launch = createLaunch(
      b, loc, kernelName(func, "attention"), blocks, copies.blockThreads(),
      /*sharedFloats=*/0, plan.total);
  Kernel k(b, loc, plan);
  k.thread = launch.getThreadIds().x;
  Value block = launch.getBlockIds().x;
  Value token = k.div(block, k.index(groups));
  Value headBase = k.mul(k.rem(block, k.index(groups)), k.index(kMmaM));
  k.warpgroup = k.div(k.thread, k.index(kWarpgroupThreads));
  k.warp =
      k.div(k.rem(k.thread, k.index(kWarpgroupThreads)), k.index(kWarpLanes));
  k.lane = k.rem(k.thread, k.index(kWarpLanes));
  Value shared = dynamicShared(b, loc);
  AlignedShared aligned = alignToAtom(b, loc, shared);
  k.sharedBase = aligned.base;
  Value pad = aligned.pad;
  auto view = [&](int64_t offset, Type element, int64_t count) {
    return sharedView(b, loc, shared, k.add(pad, k.index(offset)), element,
                      count);
  };
  k.slotAddresses = view(plan.addresses, b.getI64Type(), 2 * kSlotsPerBlock);
  k.exchange = view(plan.exchange, b.getF32Type(), kExchangeSlots);
  k.slotMasks = view(plan.masks, b.getI32Type(), 2 * 2);
  if (packedRows) {
    k.slotScales = view(plan.scales, b.getI64Type(), 2 * kSlotsPerBlock);
    k.slotKinds = view(plan.kinds, b.getI32Type(), 2 * 2);
  }
  // A view where it is used: one made here would hold a register through
  // the whole loop.
  auto outputAngles = [&] {
    return view(plan.outputAngles, b.getF32Type(), rope->op.getRopeDim());
  };

  // Where the rows are: one function of (cache, row) per cache.
  cpu::LoopEmitter emitter(b, loc);
  CacheRows window(emitter, windowBytes, op.getWindow().getType());
  std::optional<CacheRows> compressed;
  if (compressedBytes)
    compressed.emplace(emitter, compressedBytes, op.getCompressed().getType());
  Value queryAddress = addressOf(b, loc, query);
  Value kvAddress = addressOf(b, loc, kv);
  Value windowAddress = addressOf(b, loc, windowBytes);
  Value compressedAddress =
      compressedBytes ? addressOf(b, loc, compressedBytes) : Value();
  Value windowSlots = memref::DimOp::create(b, loc, windowRows, 1);
  Value slots = windowSlots;
  if (compressedSlots)
    slots = k.add(slots, compressedSlots);
  Value slotBlocks =
      arith::CeilDivUIOp::create(b, loc, slots, k.index(kSlotsPerBlock));
  // Blocks go in pairs; a missing second block has no rows.
  Value pairs = arith::CeilDivUIOp::create(b, loc, slotBlocks, k.index(2));
  Value rowBytes = k.i64(width * 2);

  // The split barriers: a full one takes each copy thread twice (its table
  // writes, then its copies' landing); an empty one each thread that
  // reads the half: warpgroup w alone reads half w of stage w after its
  // Q.K^T, both read the other halves.
  // (With fp8 MODEL1 rows a copy thread arrives once, after it has
  // dequantized its chunks.)
  int64_t fullArrivals = packedRows ? 1 : 2;
  k.ifThen(k.eq(k.thread, k.index(0)), [&] {
    for (int64_t stage = 0; stage < 2; ++stage)
      for (int64_t half = 0; half < 2; ++half) {
        initBarrier(b, loc, k.fullBarrier(stage, half),
                    fullArrivals * copyThreads);
        initBarrier(b, loc, k.emptyBarrier(stage, half),
                    stage == half ? kWarpgroupThreads : kMathThreads);
      }
  });
  mlir::gpu::BarrierOp::create(b, loc);

  // A slot's row is found in two steps: the copy warpgroups load its index a
  // pair of blocks ahead of its use (rawRow), so that the load's latency
  // passes under the copies of a pair, and the address follows from it
  // when the stage's table is written (addressOfRow).
  Type rawType = cast<MemRefType>(windowRows.getType()).getElementType();
  Value noRow =
      arith::ConstantOp::create(b, loc, b.getIntegerAttr(rawType, -1));
  // With allVisible, the compressed rows the token sees (the copy
  // warpgroups compute it).
  Value visibleRows;
  // Compressed slot `j`'s row index: the table's, or j itself when the
  // token sees it.
  auto compressedRaw = [&](Value j) -> Value {
    if (!allVisible)
      return memref::LoadOp::create(b, loc, compressedRows,
                                    ValueRange{token, j});
    Value seen = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, j,
                                       visibleRows);
    return k.select(seen, arith::IndexCastOp::create(b, loc, rawType, j),
                    noRow);
  };
  // Slot `slot`'s row index as stored (-1 when it has none).
  auto rawRow = [&](Value slot) -> Value {
    auto loadAt = [&](Value rows, Value column) {
      return memref::LoadOp::create(b, loc, rows, ValueRange{token, column})
          .getResult();
    };
    auto inRange = scf::IfOp::create(b, loc, TypeRange{rawType},
                                     k.ult(slot, slots), /*withElse=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(inRange.thenBlock());
    Value raw;
    if (!compressed) {
      raw = loadAt(windowRows, slot);
    } else {
      auto which = scf::IfOp::create(b, loc, TypeRange{rawType},
                                     k.ult(slot, windowSlots), true);
      b.setInsertionPointToStart(which.thenBlock());
      scf::YieldOp::create(b, loc, loadAt(windowRows, slot));
      b.setInsertionPointToStart(which.elseBlock());
      scf::YieldOp::create(b, loc, compressedRaw(k.sub(slot, windowSlots)));
      b.setInsertionPointAfter(which);
      raw = which.getResult(0);
    }
    scf::YieldOp::create(b, loc, raw);
    b.setInsertionPointToStart(inRange.elseBlock());
    scf::YieldOp::create(b, loc, noRow);
    return inRange.getResult(0);
  };
  // Slot `slot`'s row address from its index `raw`, 0 when it has none,
  // and (fp8 MODEL1 rows, of the window or the compressed cache) the
  // address of its scales, 0 for the other rows.
  auto addressOfRow = [&](Value slot, Value raw,
                          Value compressedBase) -> std::pair<Value, Value> {
    Value row = arith::IndexCastOp::create(b, loc, b.getIndexType(), raw);
    Value used = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, row,
                                       k.index(0));
    Value safeRow = k.select(used, row, k.index(0));
    Value fromStep = k.ult(safeRow, tokens);
    Value stepRow = k.add(kvAddress, k.mul(k.toI64(safeRow), rowBytes));
    Value ring = k.sub(safeRow, tokens);
    Value safeRing = k.select(fromStep, k.index(0), ring);
    Value ringRow = k.add(windowAddress, k.toI64(window.valueOffset(safeRing)));
    Value address = k.select(fromStep, stepRow, ringRow);
    // The step's own rows are bf16 whatever the caches hold.
    auto scalesOf = [&](CacheRows &rows, Value base, Value row) {
      if (rows.layout().kind != layout::RowKind::FP8Model1)
        return k.i64(0);
      return k.add(base, k.toI64(rows.scaleOffset(row)));
    };
    Value scales;
    if (packedRows)
      scales = k.select(fromStep, k.i64(0),
                        scalesOf(window, windowAddress, safeRing));
    if (compressed) {
      Value global = k.add(compressedBase, safeRow);
      Value compressedRow =
          k.add(compressedAddress, k.toI64(compressed->valueOffset(global)));
      Value inWindow = k.ult(slot, windowSlots);
      address = k.select(inWindow, address, compressedRow);
      if (packedRows)
        scales = k.select(inWindow, scales,
                          scalesOf(*compressed, compressedAddress, global));
    }
    return {k.select(used, address, k.i64(0)),
            packedRows ? k.select(used, scales, k.i64(0)) : Value()};
  };

  int64_t halfChunks = plan.chunks / 2;
  int64_t steps = width / kMmaK;
  // The copy warpgroups follow the math ones (a single one is tested for
  // equality, the form the bf16-row kernels were validated and timed in).
  Value isCopying = copies.warpgroups == 1
                        ? k.eq(k.warpgroup, k.index(kWarpgroups))
                        : k.ult(k.index(kWarpgroups - 1), k.warpgroup);
  auto roles = scf::IfOp::create(b, loc, TypeRange{}, isCopying,
                                 /*withElse=*/true);

  // The copy warpgroups: their thread t < 64 owns slot t of every block.
  b.setInsertionPointToStart(roles.thenBlock());
  {
    NVVM::SetMaxRegisterOp::create(b, loc, copies.registers,
                                   NVVM::SetMaxRegisterAction::decrease);
    Value copier = k.sub(k.thread, k.index(kMathThreads));
    Value owner = k.ult(copier, k.index(kSlotsPerBlock));
    Value compressedBase;
    if (compressed)
      compressedBase = arith::IndexCastOp::create(
          b, loc, b.getIndexType(),
          memref::LoadOp::create(b, loc, bases, ValueRange{token}));
    if (allVisible) {
      Value position = arith::IndexCastOp::create(
          b, loc, b.getIndexType(),
          memref::LoadOp::create(b, loc, visiblePositions, ValueRange{token}));
      visibleRows = arith::DivSIOp::create(b, loc, k.add(position, k.index(1)),
                                           k.index(allVisible.getRatio()));
    }
    auto ownSlot = [&](Value slotBlock) {
      return k.add(k.mul(slotBlock, k.index(kSlotsPerBlock)), copier);
    };
    // The two indices this thread owns of pair `pair` (-1 past the slots
    // and for threads that own none).
    auto pairRaws = [&](Value pair) {
      SmallVector<Value> raws;
      for (int64_t stage = 0; stage < 2; ++stage) {
        auto owned = scf::IfOp::create(b, loc, TypeRange{rawType}, owner,
                                       /*withElse=*/true);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(owned.thenBlock());
        scf::YieldOp::create(
            b, loc,
            rawRow(ownSlot(k.add(k.mul(pair, k.index(2)), k.index(stage)))));
        b.setInsertionPointToStart(owned.elseBlock());
        scf::YieldOp::create(b, loc, noRow);
        raws.push_back(owned.getResult(0));
      }
      return raws;
    };
    // The stage's table of row addresses and its masks (word w: slots
    // 32w .. 32w + 31, from warp w's ballot), for block `slotBlock`.
    auto writeTable = [&](int64_t stage, Value slotBlock, ValueRange raws) {
      k.ifThen(owner, [&] {
        auto [address, scales] =
            addressOfRow(ownSlot(slotBlock), raws[stage], compressedBase);
        Value entry = k.add(k.index(stage * kSlotsPerBlock), copier);
        k.store(address, k.slotAddresses, entry);
        Value present = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                              address, k.i64(0));
        auto ballot = [&](Value bit) {
          return NVVM::VoteSyncOp::create(b, loc, b.getI32Type(), k.i32(-1),
                                          bit, NVVM::VoteSyncKind::ballot)
              .getResult();
        };
        Value bits = ballot(present);
        Value bf16Bits;
        if (scales) {
          // The row's scales land beside its address (zeros for a bf16
          // row), with the copies of the stage's first half.
          Value scaled = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                               scales, k.i64(0));
          Value entryBytes = k.toI64(k.mul(entry, k.index(8)));
          Value to = k.add(k.at(plan.scales), entryBytes);
          copyAsync8(b, loc, to, k.select(scaled, scales, queryAddress),
                     scaled);
          bf16Bits = ballot(arith::AndIOp::create(
              b, loc, present,
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, scales,
                                    k.i64(0))));
        }
        k.ifThen(k.eq(k.lane, k.index(0)), [&] {
          Value word = k.add(k.index(stage * 2), k.div(copier, k.index(32)));
          k.store(bits, k.slotMasks, word);
          if (bf16Bits)
            k.store(bf16Bits, k.slotKinds, word);
        });
      });
      syncThreads(b, loc, kCopyOnly, copyThreads);
    };
    // The thread's place through an opaque copy: what a packed half derives
    // from it (16 row and chunk offsets) would otherwise be hoisted out of
    // the loop, a register apiece, and spill. (copyTileAsync's offsets
    // spill more this way.)
    auto opaquePlace = [&] {
      return arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                        opaque(b, loc, k.toI64(copier)))
          .getResult();
    };
    auto copyHalf = [&](int64_t stage, int64_t half) {
      // Each half's destinations from a base of its own: they are built
      // after the wait for the half. (Registers and spills are the same
      // with the iteration's base; the kernel was validated and timed in
      // this form.)
      Value tile =
          k.add(opaque(b, loc, k.sharedBase), k.i64(plan.stages[stage]));
      int64_t firstChunk = half * halfChunks;
      copyTileAsync(
          b, loc, tile, kSlotsPerBlock, halfChunks, copyThreads, copier,
          [&](Value row) -> std::pair<Value, Value> {
            Value address = k.load(k.slotAddresses,
                                   k.add(k.index(stage * kSlotsPerBlock), row));
            Value valid = arith::CmpIOp::create(
                b, loc, arith::CmpIPredicate::ne, address, k.i64(0));
            return {address, valid};
          },
          queryAddress, firstChunk, plan.chunks);
      // Arrivals: the mask words written with the stage's first half
      // released to the math warpgroups, then the copies landed.
      arriveBarrier(b, loc, k.fullBarrier(stage, half));
      arriveBarrierOnCopies(b, loc, k.fullBarrier(stage, half));
    };
    // A half of a stage in a kernel with fp8 MODEL1 rows, in two steps. A
    // pass takes a chunk column of the half (64 dims: one scale) over R
    // rows, R = the copy threads / 4: this thread row R g + copier / 4 of
    // the column (g < 64 / R) and its chunk pair copier % 4 (16 dims).
    // Issuing copies a packed row's 16 e4m3 bytes of the pair into the
    // place of the pair's first chunk; its rope column (the bf16 dims after
    // the e4m3 bytes) and a bf16 row's chunks go where they belong.
    // Settling waits for them and dequantizes each packed pair into its two
    // chunks' places: the thread that copied it alone touches it. A
    // thread's rows, and so their addresses and scales, are 64 / R a stage.
    constexpr int64_t kPairsPerColumn = 4;
    int64_t rowsPerPass = copyThreads / kPairsPerColumn;
    int64_t passesPerColumn = kSlotsPerBlock / rowsPerPass;
    int64_t columnsPerHalf = k.rowAtoms() / 2;
    int64_t packedPasses = columnsPerHalf * passesPerColumn;
    int64_t quantizedColumns = packedRows ? packedRows->quantDims / 64 : 0;
    int64_t quantizedBytes = packedRows ? packedRows->quantDims : 0;
    struct PackedPass {
      int64_t column, rowGroup;
      bool quantized;
    };
    auto packedPass = [&](int64_t half, int64_t i) {
      int64_t column = half * columnsPerHalf + i / passesPerColumn;
      return PackedPass{column, i % passesPerColumn, column < quantizedColumns};
    };
    // The thread's rows of a stage and the places of its chunk pair in the
    // half's first pass; every other pass is a constant further: rows R
    // further are R / 8 row groups of atoms down, a column an atom along,
    // while the row within its atom and so the swizzle stay.
    // The thread's slot of pass group `g` (its row of the block).
    auto slotOf = [&](Value row, int64_t g) {
      return k.add(row, k.index(g * rowsPerPass));
    };
    // Per pass group, what table `table` holds for the thread's slot of
    // stage `stage`.
    auto loadRowEntries = [&](Value table, Value row, int64_t stage) {
      SmallVector<Value, 2> entries;
      for (int64_t g = 0; g < passesPerColumn; ++g)
        entries.push_back(k.load(
            table, k.add(slotOf(row, g), k.index(stage * kSlotsPerBlock))));
      return entries;
    };
    // With `copying`, also the rows' addresses and whether they have one.
    struct PackedThread {
      Value row, pair;
      SmallVector<Value, 2> address, valid;
      Value places[2];
    };
    auto packedThread = [&](int64_t stage, int64_t half, bool copying) {
      Value place = opaquePlace();
      PackedThread t;
      t.row = k.div(place, k.index(kPairsPerColumn));
      t.pair = k.rem(place, k.index(kPairsPerColumn));
      if (copying) {
        t.address = loadRowEntries(k.slotAddresses, t.row, stage);
        for (Value address : t.address)
          t.valid.push_back(arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::ne, address, k.i64(0)));
      }
      Value tile = k.at(plan.stages[stage]);
      Value firstChunk =
          k.add(k.mul(t.pair, k.index(2)), k.index(half * columnsPerHalf * 8));
      for (int64_t c = 0; c < 2; ++c)
        t.places[c] =
            k.add(tile, k.toI64(swizzledOffset(b, loc, t.row,
                                               k.add(firstChunk, k.index(c)),
                                               plan.chunks / 8)));
      return t;
    };
    auto passPlace = [&](const PackedThread &t, const PackedPass &p,
                         int64_t half, int64_t c) {
      int64_t atoms = p.rowGroup * rowsPerPass / 8 * k.rowAtoms() +
                      (p.column - half * columnsPerHalf);
      return k.add(t.places[c], k.i64(atoms * kSwizzleAtomBytes));
    };
    // Whether stage `stage` holds a bf16 row (the step's own, or a cache of
    // bf16 rows beside one of packed rows): the same for the whole
    // warpgroup, so that stages without one take passes without a branch
    // or select per row.
    auto holdsBF16Rows = [&](int64_t stage) {
      Value second = k.load(k.slotKinds, k.index(stage * 2 + 1));
      Value words = arith::OrIOp::create(
          b, loc, k.load(k.slotKinds, k.index(stage * 2)), second);
      return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, words,
                                   k.i32(0))
          .getResult();
    };
    // Whether the thread's row of pass group `g` is a bf16 row.
    auto isBF16Row = [&](const PackedThread &t, int64_t stage, int64_t g) {
      Value slot = slotOf(t.row, g);
      Value word = k.load(k.slotKinds,
                          k.add(k.index(stage * 2), k.div(slot, k.index(32))));
      Value bit = arith::IndexCastOp::create(b, loc, b.getI32Type(),
                                             k.rem(slot, k.index(32)));
      return arith::TruncIOp::create(b, loc, b.getI1Type(),
                                     arith::ShRUIOp::create(b, loc, word, bit))
          .getResult();
    };
    auto or64 = [&](Value address, Value valid) {
      return k.select(valid, address, queryAddress);
    };
    // The copies of one pass; `bf16` (null: none in the stage) says the
    // row is bf16.
    auto issuePackedPass = [&](const PackedThread &t, const PackedPass &p,
                               int64_t half, Value bf16) {
      Value address = t.address[p.rowGroup], valid = t.valid[p.rowGroup];
      Value to[2] = {passPlace(t, p, half, 0), passPlace(t, p, half, 1)};
      // A bf16 row's pair: 32 bytes at its column's place in the row.
      Value bf16Source =
          k.add(address, k.add(k.i64(p.column * 128),
                               k.toI64(k.mul(t.pair, k.index(32)))));
      if (!p.quantized) {
        Value from = k.add(address, k.add(k.i64(quantizedBytes),
                                          k.toI64(k.mul(t.pair, k.index(32)))));
        if (bf16)
          from = k.select(bf16, bf16Source, from);
        copyAsync16(b, loc, to[0], or64(from, valid), valid);
        copyAsync16(b, loc, to[1], or64(k.add(from, k.i64(16)), valid), valid);
        return;
      }
      Value raw = k.add(address, k.add(k.i64(p.column * 64),
                                       k.toI64(k.mul(t.pair, k.index(16)))));
      if (!bf16) {
        copyAsync16(b, loc, to[0], or64(raw, valid), valid);
        return;
      }
      copyAsync16(b, loc, to[0], or64(k.select(bf16, bf16Source, raw), valid),
                  valid);
      Value second = arith::AndIOp::create(b, loc, valid, bf16);
      copyAsync16(b, loc, to[1], or64(k.add(bf16Source, k.i64(16)), second),
                  second);
    };
    // Stage-uniform: passes without a bf16 row in the stage, or with.
    auto byStageKind = [&](int64_t stage, function_ref<void(bool)> passes) {
      auto kinds = scf::IfOp::create(b, loc, TypeRange{}, holdsBF16Rows(stage),
                                     /*withElse=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(kinds.thenBlock());
      passes(true);
      b.setInsertionPointToStart(kinds.elseBlock());
      passes(false);
    };
    auto issuePackedHalf = [&](int64_t stage, int64_t half) {
      PackedThread t = packedThread(stage, half, /*copying=*/true);
      byStageKind(stage, [&](bool withBF16) {
        for (int64_t i = 0; i < packedPasses; ++i) {
          PackedPass p = packedPass(half, i);
          issuePackedPass(t, p, half,
                          withBF16 ? isBF16Row(t, stage, p.rowGroup) : Value());
        }
      });
      commitCopies(b, loc);
    };
    // Dequantizes a pass's 16 landed e4m3 values into its two chunks.
    auto dequantizePass = [&](const PackedThread &t, const PackedPass &p,
                              int64_t half, Value scaleWords) {
      Type words = VectorType::get({4}, b.getI32Type());
      Type wordPair = VectorType::get({2}, b.getI32Type());
      Value to[2] = {passPlace(t, p, half, 0), passPlace(t, p, half, 1)};
      Value landed = loadShared(b, loc, to[0], words, 16);
      Value scale = arith::TruncIOp::create(
          b, loc, b.getI8Type(),
          arith::ShRUIOp::create(b, loc, scaleWords, k.i64(p.column * 8)));
      for (int64_t c = 0; c < 2; ++c) {
        Value bytes = vector::FromElementsOp::create(
            b, loc, wordPair,
            ValueRange{vector::ExtractOp::create(b, loc, landed, 2 * c),
                       vector::ExtractOp::create(b, loc, landed, 2 * c + 1)});
        storeShared(b, loc, to[c], dequantizeE4M3x8(b, loc, bytes, scale), 16);
      }
    };
    auto settlePackedHalf = [&](int64_t stage, int64_t half, int32_t pending) {
      waitCopies(b, loc, pending);
      // The stage's scales were copied by the threads that own the slots,
      // with the copies of its first half.
      if (half == stage)
        syncThreads(b, loc, kCopyOnly, copyThreads);
      PackedThread t = packedThread(stage, half, /*copying=*/false);
      SmallVector<Value, 2> scaleWords =
          loadRowEntries(k.slotScales, t.row, stage);
      byStageKind(stage, [&](bool withBF16) {
        for (int64_t i = 0; i < packedPasses; ++i) {
          PackedPass p = packedPass(half, i);
          if (!p.quantized)
            continue;
          if (!withBF16) {
            dequantizePass(t, p, half, scaleWords[p.rowGroup]);
            continue;
          }
          Value bf16 = isBF16Row(t, stage, p.rowGroup);
          Value packed = arith::XOrIOp::create(
              b, loc, bf16,
              arith::ConstantOp::create(b, loc, b.getBoolAttr(true)));
          k.ifThen(packed,
                   [&] { dequantizePass(t, p, half, scaleWords[p.rowGroup]); });
        }
      });
      // The dequantized chunks are generic writes that the tensor cores
      // read: fenced before the arrival that releases them (and the mask
      // words written with the stage's first half).
      fenceSharedForMma(b, loc);
      arriveBarrier(b, loc, k.fullBarrier(stage, half));
    };
    SmallVector<Value> first = pairRaws(k.index(0));
    auto loop = scf::ForOp::create(b, loc, k.index(0), pairs, k.index(1),
                                   ValueRange(first));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value pair = loop.getInductionVar();
    ValueRange raws = loop.getRegionIterArgs();
    Value invariantBase = k.sharedBase;
    k.sharedBase = opaque(b, loc, invariantBase);
    SmallVector<Value> next = pairRaws(k.add(pair, k.index(1)));
    // Each half waits until its readers of the pair before are done, in
    // the order they finish.
    Value later = k.ult(k.index(0), pair);
    Value parity = arith::IndexCastOp::create(
        b, loc, b.getI32Type(), k.rem(k.add(pair, k.index(1)), k.index(2)));
    auto waitEmpty = [&](int64_t stage, int64_t half) {
      k.ifThen(later, [&] {
        waitBarrier(b, loc, k.emptyBarrier(stage, half), parity);
      });
    };
    auto fill = [&](int64_t stage, int64_t half) {
      waitEmpty(stage, half);
      if (stage == half)
        writeTable(stage, k.add(k.mul(pair, k.index(2)), k.index(stage)), raws);
      if (packedRows)
        issuePackedHalf(stage, half);
      else
        copyHalf(stage, half);
    };
    if (!packedRows) {
      for (auto [stage, half] :
           {std::pair<int64_t, int64_t>{0, 0}, {0, 1}, {1, 1}, {1, 0}})
        fill(stage, half);
    } else {
      // Stage 0 is settled before the wait for stage 1's half 0, which
      // warpgroup 0 frees last in the pair before: it can start this pair
      // meanwhile. Each settle waits for its own group of copies (the
      // count is of groups issued after it). A settle reads the stage's
      // slot table again; the next pair rewrites it only after waiting for
      // the half's readers, which start after this settle's arrival.
      fill(0, 0);
      fill(0, 1);
      fill(1, 1);
      settlePackedHalf(0, 0, 2);
      settlePackedHalf(0, 1, 1);
      fill(1, 0);
      settlePackedHalf(1, 1, 1);
      settlePackedHalf(1, 0, 0);
    }
    k.sharedBase = invariantBase;
    scf::YieldOp::create(b, loc, next);
    // The copies land before the warpgroup leaves.
    b.setInsertionPointAfter(loop);
    commitCopies(b, loc);
    waitCopies(b, loc, 0);
  }

  // The math warpgroups.
  b.setInsertionPointToStart(roles.elseBlock());
  NVVM::SetMaxRegisterOp::create(b, loc, copies.mathRegisters,
                                 NVVM::SetMaxRegisterAction::increase);
  // The query rows as they are in memory (q before its norm and rope with
  // the prologue, in place when it is columns of a merged product).
  copyTileAsync(
      b, loc, k.at(plan.query), kMmaM, plan.chunks, kMathThreads, k.thread,
      [&](Value row) -> std::pair<Value, Value> {
        Value head = k.add(headBase, row);
        Value valid = k.ult(head, k.index(heads));
        Value element = queryWindow
                            ? queryWindowElement(k, *queryWindow, token, head)
                            : k.mul(k.add(k.mul(token, k.index(heads)), head),
                                    k.index(width));
        return {k.add(queryAddress, k.mul(k.toI64(element), k.i64(2))), valid};
      },
      queryAddress);
  // The angles' loads go out behind the copies; the epilogue's are the
  // token's too, a pair a math thread once instead of each lane's own.
  if (queryNorm)
    storeQueryAngles(k, queryNorm.rope, queryPositions, token, func);
  if (rope) {
    // One at a time: compilers order a call's arguments differently.
    Value angles = outputAngles();
    Value frequencies = ropeFrequencyTable(b, loc, rope->op, func);
    storeRopeAngles(b, loc, rope->op.getRopeDim(), rope->positions, token,
                    k.thread, frequencies, angles, 0);
  }
  commitCopies(b, loc);
  waitCopies(b, loc, 0);
  if (queryNorm) {
    syncThreads(b, loc, kMathBarrier, kMathThreads);
    normalizeQueryTile(k, queryNorm);
  }
  fenceSharedForMma(b, loc);
  syncThreads(b, loc, kMathBarrier, kMathThreads);

  int64_t outputN = width / kWarpgroups;
  // ptxas assembles no instruction that needs more registers than a thread
  // holds at the kernel's entry, setmaxnreg notwithstanding: with two copy
  // warpgroups (128 at entry) a P.V of N 256 (154) does not assemble, so
  // it goes as two of N 128, each two whole swizzle atoms of V. (N 192, at
  // head width 384, needs 122 and stays one.)
  int64_t outputTiles = copies.warpgroups > 1 && outputN > 192 ? 2 : 1;
  int64_t tileN = outputN / outputTiles;
  Value negInf = k.f32(-INFINITY);
  Value zero = k.f32(0.0);
  Value scale2 = k.f32(op.getScale().convertToDouble() * kLog2E);
  int64_t groupStride = k.groupStride();
  // The place of K step `step` (16 elements, 32 bytes) in its row of atoms.
  auto kStep = [&](int64_t step) {
    return step / 4 * kSwizzleAtomBytes + step % 4 * 2 * kMmaK;
  };

  // S = Q.K^T over stage `stage`'s 64 rows (warpgroup `stage`'s own), the
  // K steps of half `stage` first: half `stage` is refilled first, having
  // this warpgroup as its only reader. Warpgroup 0 starts on a half as soon
  // as it has landed; warpgroup 1, whose S follows its P.V of warpgroup 0's
  // block, waits for both halves first: with its MMAs in flight across the
  // second wait, ptxas assembled the kernel to one of two cubins from run to
  // run (at head width 128).
  auto scoresOf = [&](int64_t stage, Value parity) {
    Value rowsDescriptor = matrixDescriptor(b, loc, k.at(plan.stages[stage]),
                                            kChunkBytes, groupStride);
    Value queryDescriptor =
        matrixDescriptor(b, loc, k.at(plan.query), kChunkBytes, groupStride);
    Value scores = unsetAccumulator(b, loc, kSlotsPerBlock);
    bool first = true;
    bool bothHalvesFirst = stage == 1;
    if (bothHalvesFirst)
      for (int64_t half : {stage, 1 - stage})
        waitBarrier(b, loc, k.fullBarrier(stage, half), parity);
    for (int64_t half : {stage, 1 - stage}) {
      if (!bothHalvesFirst)
        waitBarrier(b, loc, k.fullBarrier(stage, half), parity);
      fenceSharedForMma(b, loc);
      mmaFence(b, loc);
      for (int64_t step = half * steps / 2; step < (half + 1) * steps / 2;
           ++step) {
        Value a = advanceDescriptor(b, loc, queryDescriptor, kStep(step));
        Value bDesc = advanceDescriptor(b, loc, rowsDescriptor, kStep(step));
        scores = mmaBF16(b, loc, a, bDesc, scores, kSlotsPerBlock,
                         /*transposeB=*/false, /*accumulate=*/!first);
        first = false;
      }
    }
    mmaCommit(b, loc);
    mmaWait(b, loc, 0);
    return unpackAccumulator(b, loc, scores);
  };
  // Logits in base 2 of stage `stage`; slots without a row are -inf.
  auto logitsOf = [&](SmallVector<Value> s, int64_t stage) {
    Value masks[2] = {k.load(k.slotMasks, k.index(stage * 2)),
                      k.load(k.slotMasks, k.index(stage * 2 + 1))};
    for (size_t r = 0; r < s.size(); ++r) {
      // Registers 0-15 hold slots 0-31, 16-31 slots 32-63.
      int64_t word = static_cast<int64_t>(r) / 16;
      Value column = k.sub(k.place(r).column, k.index(word * 32));
      Value bit = arith::IndexCastOp::create(b, loc, b.getI32Type(), column);
      Value present = arith::TruncIOp::create(
          b, loc, b.getI1Type(),
          arith::ShRUIOp::create(b, loc, masks[word], bit));
      s[r] = k.select(present, k.mul(s[r], scale2), negInf);
    }
    return s;
  };
  // The block's maximum per head half, over the quad's lanes.
  auto blockMaxima = [&](ArrayRef<Value> s, Value out[2]) {
    for (int half = 0; half < 2; ++half) {
      Value m = negInf;
      for (size_t r = 0; r < s.size(); ++r)
        if (static_cast<int>(r % 4) / 2 == half)
          m = k.maxf(m, s[r]);
      m = k.maxf(m, k.shuffleXor(m, 1));
      out[half] = k.maxf(m, k.shuffleXor(m, 2));
    }
  };
  // exp2(s - base) per register, added to `sums`, and stored as bf16 into
  // P tile `tile`.
  auto probabilities = [&](ArrayRef<Value> s, const Value base[2],
                           Value sums[2], int64_t tile) {
    SmallVector<Value> p(s.size());
    for (size_t r = 0; r < s.size(); ++r) {
      int half = static_cast<int>(r % 4) / 2;
      p[r] = k.exp2(k.sub(s[r], base[half]));
      sums[half] = k.add(sums[half], p[r]);
    }
    Value view = sharedView(b, loc, shared,
                            k.add(pad, k.index(plan.probabilities[tile])),
                            b.getBF16Type(), kMmaM * kSlotsPerBlock);
    for (size_t r = 0; r < s.size(); r += 2) {
      FragmentPlace at = k.place(r);
      Value element = k.probabilityElement(at.row, at.column);
      vector::StoreOp::create(b, loc, bf16Pair(b, loc, p[r], p[r + 1]), view,
                              ValueRange{element},
                              /*nontemporal=*/false, llvm::MaybeAlign(4));
    }
    fenceSharedForMma(b, loc);
  };
  // O += P.V of stage `stage`'s block (its P tile) over the stage's half
  // `half` (this warpgroup's dims). A half this warpgroup did not wait for
  // is the other warpgroup's own, which waited for it and fenced before the
  // named barrier that handed over its P.
  auto accumulate = [&](SmallVector<Value, 2> accumulators, int64_t stage,
                        int64_t half) {
    SmallVector<Value, 2> dimsDescriptors;
    for (int64_t tile = 0; tile < outputTiles; ++tile) {
      Value dims = k.at(plan.stages[stage] +
                        (half * (k.rowAtoms() / 2) + tile * tileN / 64) *
                            kSwizzleAtomBytes);
      dimsDescriptors.push_back(
          matrixDescriptor(b, loc, dims, kSwizzleAtomBytes, groupStride));
    }
    Value pDescriptor =
        matrixDescriptor(b, loc, k.at(plan.probabilities[stage]), kChunkBytes,
                         kSwizzleAtomBytes);
    accumulators = settleAndFence(b, loc, accumulators);
    for (int64_t tile = 0; tile < outputTiles; ++tile) {
      for (int64_t step = 0; step < kSlotsPerBlock / kMmaK; ++step) {
        // P: one atom per 8 heads; V: K step `step` is row groups 2 step and
        // 2 step + 1.
        Value a = advanceDescriptor(b, loc, pDescriptor, kStep(step));
        Value bDesc = advanceDescriptor(b, loc, dimsDescriptors[tile],
                                        2 * step * groupStride);
        accumulators[tile] =
            mmaBF16(b, loc, a, bDesc, accumulators[tile], tileN,
                    /*transposeB=*/true, /*accumulate=*/true);
      }
    }
    mmaCommit(b, loc);
    return accumulators;
  };

  // Warpgroup w's pair loop: it returns the final running state.
  std::array<Value, 2> headRow = k.headRows();
  auto pairLoop = [&](int64_t w) -> Running {
    Running init{
        SmallVector<Value, 2>(outputTiles, zeroAccumulator(b, loc, tileN)),
        {negInf, negInf},
        {zero, zero}};
    auto loop = scf::ForOp::create(b, loc, k.index(0), pairs, k.index(1),
                                   init.values());
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value parity = arith::IndexCastOp::create(
        b, loc, b.getI32Type(), k.rem(loop.getInductionVar(), k.index(2)));
    // The shared addresses and descriptors of an iteration are rebuilt from
    // an opaque base: hoisted, the 80 or so descriptors would each hold a
    // register pair through the loop.
    Value invariantBase = k.sharedBase;
    k.sharedBase = opaque(b, loc, invariantBase);
    Running run = Running::of(loop.getRegionIterArgs());
    // Warpgroup w's block: S over stage w (half w first: it has only this
    // warpgroup as reader, so it is refilled first), its logits and their
    // maxima per head.
    Value own[2];
    auto ownBlock = [&] {
      SmallVector<Value> s = scoresOf(w, parity);
      arriveBarrier(b, loc, k.emptyBarrier(w, 1 - w));
      s = logitsOf(s, w);
      blockMaxima(s, own);
      return s;
    };
    Value m0[2], m1[2], base0[2], base1[2], alpha0[2], alpha1[2];
    // Moves the denominators from maxima `from` to the maxima `to` that
    // `maximum(half)` gives: each head's exponent base for them and the
    // factor exp2(from - base) that the sums (here) and O (by the caller)
    // take.
    auto rebase = [&](const Value from[2], function_ref<Value(int)> maximum,
                      Value to[2], Value base[2], Value alpha[2]) {
      for (int half = 0; half < 2; ++half) {
        to[half] = maximum(half);
        base[half] = exponentBase(k, to[half]);
        alpha[half] = k.exp2(k.sub(from[half], base[half]));
        run.sums[half] = k.mul(run.sums[half], alpha[half]);
      }
    };
    if (w == 0) {
      SmallVector<Value> s = ownBlock();
      rebase(
          run.maxima,
          [&](int half) { return k.maxf(run.maxima[half], own[half]); }, m0,
          base0, alpha0);
      probabilities(s, base0, run.sums, 0);
      k.offer(m0, headRow, k.index(0));
      syncThreads(b, loc, kFirstOnly, kWarpgroupThreads);
      arriveThreads(b, loc, kFirstReady, kMathThreads);
      run.accumulators = accumulate(rescale(k, run.accumulators, alpha0), 0, 0);
      mmaWait(b, loc, 0);
      arriveBarrier(b, loc, k.emptyBarrier(0, 0));
      syncThreads(b, loc, kSecondReady, kMathThreads);
      rebase(
          m0, [&](int half) { return k.offered(k.index(1), headRow[half]); },
          m1, base1, alpha1);
      run.accumulators = accumulate(rescale(k, run.accumulators, alpha1), 1, 0);
      mmaWait(b, loc, 0);
      arriveBarrier(b, loc, k.emptyBarrier(1, 0));
    } else {
      syncThreads(b, loc, kFirstReady, kMathThreads);
      rebase(
          run.maxima,
          [&](int half) { return k.offered(k.index(0), headRow[half]); }, m0,
          base0, alpha0);
      run.accumulators = accumulate(rescale(k, run.accumulators, alpha0), 0, 1);
      // This block's S and softmax while the P.V of warpgroup 0's block
      // runs: by now stage 1, refilled last, has had warpgroup 0's S and
      // softmax to land.
      SmallVector<Value> s = ownBlock();
      arriveBarrier(b, loc, k.emptyBarrier(0, 1));
      rebase(
          m0, [&](int half) { return k.maxf(m0[half], own[half]); }, m1, base1,
          alpha1);
      probabilities(s, base1, run.sums, 1);
      k.offer(m1, headRow, k.index(1));
      syncThreads(b, loc, kSecondReady, kMathThreads);
      run.accumulators = accumulate(rescale(k, run.accumulators, alpha1), 1, 1);
      mmaWait(b, loc, 0);
      arriveBarrier(b, loc, k.emptyBarrier(1, 1));
    }
    k.sharedBase = invariantBase;
    run.maxima[0] = m1[0];
    run.maxima[1] = m1[1];
    scf::YieldOp::create(b, loc, run.values());
    return Running::of(loop.getResults());
  };
  Type f32 = b.getF32Type();
  SmallVector<Type> runningTypes(outputTiles,
                                 zeroAccumulator(b, loc, tileN).getType());
  runningTypes.append({f32, f32, f32, f32});
  auto byWarpgroup =
      scf::IfOp::create(b, loc, runningTypes, k.eq(k.warpgroup, k.index(0)),
                        /*withElse=*/true);
  for (int64_t w = 0; w < kWarpgroups; ++w) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(w == 0 ? byWarpgroup.thenBlock()
                                      : byWarpgroup.elseBlock());
    scf::YieldOp::create(b, loc, pairLoop(w).values());
  }

  // Denominators: lanes of a quad, then the two warpgroups, in that order.
  Value sums[2];
  for (int half = 0; half < 2; ++half) {
    Value l = byWarpgroup.getResult(outputTiles + 2 + half);
    l = k.add(l, k.shuffleXor(l, 1));
    sums[half] = k.add(l, k.shuffleXor(l, 2));
  }
  k.offer(sums, headRow, k.add(k.index(2), k.warpgroup));
  syncThreads(b, loc, kMathBarrier, kMathThreads);
  // Per head: the denominator, or -inf for an empty selection (its result
  // is 0: the sink takes all the mass).
  Value denominators[2], inverses[2];
  for (int half = 0; half < 2; ++half) {
    Value second = k.offered(k.index(3), headRow[half]);
    Value total = combine(b, loc, Combine::Add,
                          k.offered(k.index(2), headRow[half]), second);
    Value safeHead = arith::MinUIOp::create(
        b, loc, k.add(headBase, headRow[half]), k.index(heads - 1));
    Value sink2 = k.mul(k.load(sink, safeHead), k.f32(kLog2E));
    Value m = byWarpgroup.getResult(outputTiles + half);
    Value empty = k.isNegInf(m);
    Value denominator = k.add(total, k.exp2(k.sub(sink2, exponentBase(k, m))));
    denominators[half] = k.select(empty, negInf, denominator);
    // One division per head; the outputs multiply by its result (a
    // division per output element was a fifth of the kernel's time at
    // decode).
    inverses[half] =
        arith::DivFOp::create(b, loc, k.f32(1.0), denominators[half]);
  }
  // The fused inverse RoPE turns pairs of the output as the row family would
  // turn them read back from memory: the bf16 values, in f32, by the
  // token's angles (left in shared memory by the prologue).
  auto throughBF16 = [&](Value x) {
    return arith::ExtFOp::create(
        b, loc, b.getF32Type(),
        arith::TruncFOp::create(b, loc, b.getBF16Type(), x).getResult());
  };
  // The output tile goes through the query tile (free since the last
  // S = Q.K^T): each warp's fragments as bf16 pairs by stmatrix, four 8 x 8
  // matrices (two chunks of 8 columns, both row halves) an instruction,
  // then 16-byte chunks to memory, a warp's store a contiguous run of its
  // row. Four-byte stores of the fragments straight to memory were 16% of
  // a prefill CTA's samples (bench/attention-notes.md).
  // Lane 8i + j names row j of matrix i: a warp's rows are its
  // kWarpRows heads, a matrix 8 of them.
  constexpr int64_t kWarpRows = kMmaM / 4;
  Value matrix = k.div(k.lane, k.index(8));
  Value rowInMatrix = k.rem(k.lane, k.index(8));
  Value matrixRow = k.mul(k.rem(matrix, k.index(2)), k.index(8));
  Value stagedRow =
      k.add(k.add(k.mul(k.warp, k.index(kWarpRows)), matrixRow), rowInMatrix);
  Value matrixChunk = k.div(matrix, k.index(2));
  auto stagedAddress = [&](Value row, Value chunk) {
    Value inTile = k.toI64(swizzledOffset(b, loc, row, chunk, k.rowAtoms()));
    return k.add(k.at(plan.query), inTile);
  };
  for (int64_t tile = 0; tile < outputTiles; ++tile) {
    SmallVector<Value> o =
        unpackAccumulator(b, loc, byWarpgroup.getResult(tile));
    Value dimBase = k.mul(k.warpgroup, k.index(outputN));
    if (tile > 0)
      dimBase = k.add(dimBase, k.index(tile * tileN));
    // The tile's first column in the last warpgroup, which holds the rope
    // dims: 8-column chunks before them in every warpgroup turn nothing.
    int64_t lastBase = (kWarpgroups - 1) * outputN + tile * tileN;
    auto stageTile = [&](bool turns) {
      Value c, s;
      Value angles = turns ? outputAngles() : Value();
      SmallVector<Value> words;
      for (size_t r = 0; r < o.size(); r += 2) {
        int half = static_cast<int>(r % 4) / 2;
        bool chunkTurns =
            turns &&
            lastBase + static_cast<int64_t>(r / 4 + 1) * 8 > rope->start;
        // -inf marks an empty selection: the result is 0.
        Value empty = k.isNegInf(denominators[half]);
        auto value = [&](Value acc) {
          return k.select(empty, zero, k.mul(acc, inverses[half]));
        };
        Value x = value(o[r]), y = value(o[r + 1]);
        if (chunkTurns) {
          x = throughBF16(x);
          y = throughBF16(y);
          Value column = k.add(dimBase, k.place(r).column);
          RopeColumn place = ropeColumn(b, loc, column, rope->start);
          // Both heads of a thread share the column, so the angle.
          c = k.load(angles, place.pair);
          s = k.load(angles,
                     k.add(place.pair, k.index(rope->op.getRopeDim() / 2)));
          auto [re, im] = rotatePair(b, loc, x, y, c, s, /*inverse=*/true);
          x = k.select(place.inRope, re, x);
          y = k.select(place.inRope, im, y);
        }
        words.push_back(LLVM::BitcastOp::create(b, loc, b.getI32Type(),
                                                bf16Pair(b, loc, x, y)));
      }
      // Words 4j .. 4j + 3: chunks 2j and 2j + 1 of the tile, each row half.
      for (size_t j = 0; j < words.size(); j += 4) {
        Value inTile = k.add(matrixChunk, k.index(j / 2));
        Value chunk = k.add(k.div(dimBase, k.index(kChunk)), inTile);
        storeMatrices(b, loc, stagedAddress(stagedRow, chunk),
                      ArrayRef<Value>(words).slice(j, 4));
      }
    };
    // A tile whose columns lie before the rope dims in every warpgroup
    // stages as it is.
    if (!rope || lastBase + tileN <= rope->start) {
      stageTile(false);
      continue;
    }
    // Only a tile that reaches the rope dims turns pairs (the condition is
    // the warpgroup's: no divergence).
    Value reaches = k.ult(k.index(rope->start), k.add(dimBase, k.index(tileN)));
    scf::IfOp::create(
        b, loc, reaches,
        [&](OpBuilder &, Location) {
          stageTile(true);
          scf::YieldOp::create(b, loc);
        },
        [&](OpBuilder &, Location) {
          stageTile(false);
          scf::YieldOp::create(b, loc);
        });
  }
  // Each warp stores the rows it staged (16 heads, its warpgroup's
  // columns): lane l takes chunk l of a run of 32 (a head row's 512 bytes
  // of its warpgroup at width 512), heads past the count not at all.
  syncWarp(b, loc);
  int64_t rowChunks = outputN / kChunk;
  auto chunkType = VectorType::get({kChunk}, b.getBF16Type());
  for (int64_t i = 0; i < kWarpRows * rowChunks / kWarpLanes; ++i) {
    Value linear = k.add(k.index(i * kWarpLanes), k.lane);
    Value rowInWarp = k.div(linear, k.index(rowChunks));
    Value row = k.add(k.mul(k.warp, k.index(kWarpRows)), rowInWarp);
    Value chunkInRow = k.rem(linear, k.index(rowChunks));
    Value chunk = k.add(k.mul(k.warpgroup, k.index(rowChunks)), chunkInRow);
    Value values =
        loadShared(b, loc, stagedAddress(row, chunk), chunkType, kChunkBytes);
    Value head = k.add(headBase, row);
    k.ifThen(k.ult(head, k.index(heads)), [&] {
      vector::StoreOp::create(
          b, loc, values, output,
          ValueRange{token, head, k.mul(chunk, k.index(kChunk))},
          /*nontemporal=*/false, llvm::MaybeAlign(kChunkBytes));
    });
  }

  b.setInsertionPointAfter(launch);
  Value result = bufferization::ToTensorOp::create(
      b, loc, op.getType(), output, /*restrict=*/true, /*writable=*/true);
  if (inverseRope) {
    rewriter.replaceOp(inverseRope, result);
    rewriter.eraseOp(op);
  } else {
    rewriter.replaceOp(op, result);
  }
  if (queryNorm) {
    rewriter.eraseOp(queryNorm.rope);
    rewriter.eraseOp(queryNorm.norm);
    if (queryWindow)
      releaseColumnWindow(rewriter, rawQuery);
  }
  if (allVisible && allVisible->use_empty())
    rewriter.eraseOp(allVisible);
}

} // namespace v4a::gpu
