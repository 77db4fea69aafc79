//===- IndexerTopK.cpp - the indexer's scores and top-k as one family -----===//
//
// score(t, j) = sum_h relu(q[t, h] . key_j) * w[t, h] over token t's rows
// j < min((p + 1) / ratio, rows), and its k best rows, in two kernels (the
// merge in one of two forms):
//
// - scores: a block of one warpgroup per (token, split). Its rows are
//   gathered 64 at a time into a ring of shared stages (two to four: the
//   plan takes the most blocks per SM, up to three, then the deepest ring
//   they leave room for) with 16-byte cp.async, the next ones in flight
//   while 64 are scored: the keys are the MMA's M and the token's heads
//   its N (padded to a multiple of 8 with zero rows),
//   so that an m64nHk16 wgmma chain over the head width gives every
//   (key, head) dot product in f32. A thread's accumulator holds a quarter
//   of the heads of two keys; it sums relu(dot) * w over them and four
//   lanes combine their sums: the order `v4a.indexer_score` documents and
//   the loop path follows too, so that a score's bits do not depend on the
//   kernel. Packed keys (fp8 with a row scale, MXFP4) travel as they are
//   stored, into a ring of raw stages, and the block turns the stage to be
//   scored into one bf16 tile (exact: the values the loop path decodes). Each
//   score is offered to the block's streaming top-k (BlockSelect.h) and never
//   stored. A token whose rows are one split writes its picks; otherwise each
//   split leaves its sorted k best keys.
// - merge (only with splits): a block per token. Up to four lists: each key
//   finds its rank in their union by binary searches of the other lists,
//   and a rank below k is a pick. More lists: the block finds, from samples
//   of the sorted lists, a floor no pick is below, and offers the lists'
//   keys above it (a few times k) to the same top-k.
//
// Splits depend on the batch (enough blocks to fill the chip) but the picks
// never do: the selection is exact and keys are distinct (score, row)
// pairs, so any split gives the same picks in the same order.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/V4AToGPU/IndexerTopK.h"

#include "core/CacheLayout.h"
#include "dialects/V4A/IR/V4AOps.h"
#include "passes/Conversion/V4AToCPU/CacheRows.h"
#include "passes/Conversion/V4AToCPU/LoopEmitter.h"
#include "passes/Conversion/V4AToGPU/BlockSelect.h"
#include "passes/Conversion/V4AToGPU/DeviceKit.h"
#include "passes/Conversion/V4AToGPU/Warpgroup.h"

#include "core/StepSignature.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace v4a::gpu {

namespace {

using IP = arith::CmpIPredicate;

/// Keys scored per MMA (its M) and the block's threads: one warpgroup.
constexpr int64_t kKeysPerBlock = kMmaM;
constexpr int64_t kThreads = kWarpgroupThreads;
static_assert(kThreads == BlockSelect::kThreads);
/// The chip's SMs, the most scoring blocks one SM holds, and the fewest
/// rows a split takes.
constexpr int64_t kSMs = 132;
constexpr int64_t kMostBlocksPerSM = 3;
constexpr int64_t kSplitRows = 256;
/// The sampled merge: a block of one selection's threads per token, over at
/// most kMaxSplits lists, kListsPerThread of them per thread in its scan. (A
/// token's splits stop there even when the chip holds more blocks: each
/// list costs the merge more than its block saves the scores.)
constexpr int64_t kMergeThreads = BlockSelect::kThreads;
constexpr int64_t kMergeKeysPerThread = 8;
constexpr int64_t kMaxSplits = 2 * kSMs;
constexpr int64_t kListsPerThread =
    (kMaxSplits + kMergeThreads - 1) / kMergeThreads;
constexpr int64_t kLargestK = 2048;
/// Splits whose lists the rank merge takes (more: the sampled merge), and
/// its threads: enough that a thread's few keys hide the latency of their
/// binary searches.
constexpr int64_t kRankMergeLists = 4;
constexpr int64_t kRankMergeThreads = 512;
/// Key stages in the scoring kernel's ring: at most, and at least.
constexpr int64_t kMostStages = 4;
constexpr int64_t kFewestStages = 2;
/// An SM's shared memory, of which each block reserves 1 KiB.
constexpr int64_t kSharedBytesPerSM = 228 * 1024;
constexpr int64_t kReservedSharedBytes = 1024;
constexpr int64_t kChunkBytes = 16;

/// Byte offsets in the scoring kernel's dynamic shared memory.
struct SharedPlan {
  int64_t heads = 0, paddedHeads = 0, width = 0;
  int64_t query = 0, firstStage = 0, stages = 0, keyTile = 0, select = 0,
          total = 0;
  /// Scoring blocks an SM holds with this plan's shared memory.
  int64_t blocksPerSM = 1;
  /// Bytes of a stage of the ring: a bf16 key tile, or packed keys' raw
  /// rows (their values, then their scales at `stageScales`).
  int64_t stageBytes = 0, stageScales = 0;
  /// Packed keys only: the bf16 tile the MMAs read.
  int64_t converted = 0;
  /// The key rows' layout.
  layout::RowLayout row{};
  bool packed() const { return row.kind != layout::RowKind::IndexBF16; }
};

std::optional<SharedPlan> planShared(int64_t heads, int64_t width, int64_t k,
                                     const layout::RowLayout &row) {
  if (width % 64 != 0 || width > 256 || heads < 1 || heads > 256 || k < 1 ||
      k > kLargestK || row.dim != width)
    return std::nullopt;
  SharedPlan plan;
  plan.heads = heads;
  plan.paddedHeads = llvm::alignTo(heads, 8);
  plan.width = width;
  plan.row = row;
  int64_t queryTile = plan.paddedHeads * width * 2;
  plan.keyTile = kKeysPerBlock * width * 2;
  plan.stageBytes = plan.keyTile;
  int64_t ringStart = queryTile;
  if (plan.packed()) {
    plan.stageScales = llvm::alignTo(kKeysPerBlock * row.valueBytes, 16);
    plan.stageBytes =
        llvm::alignTo(plan.stageScales + kKeysPerBlock * row.scaleBytes, 128);
    plan.converted = queryTile;
    ringStart = queryTile + plan.keyTile;
  }
  // Tiles are whole 1 KiB atoms; the window's base is aligned up to one,
  // hence the spare atom at the end. The most blocks per SM with at least
  // kFewestStages stages, and at that occupancy the deepest ring.
  auto totalFor = [&](int64_t stages) {
    return ringStart + stages * plan.stageBytes +
           BlockSelect::sharedBytes(k, kKeysPerBlock) + kSwizzleAtomBytes;
  };
  auto fits = [&](int64_t stages, int64_t blocks) {
    return blocks * (totalFor(stages) + kReservedSharedBytes) <=
           kSharedBytesPerSM;
  };
  plan.blocksPerSM = kMostBlocksPerSM;
  while (plan.blocksPerSM > 1 && !fits(kFewestStages, plan.blocksPerSM))
    --plan.blocksPerSM;
  plan.stages = kMostStages;
  while (plan.stages > kFewestStages && !fits(plan.stages, plan.blocksPerSM))
    --plan.stages;
  plan.query = 0;
  plan.firstStage = ringStart;
  plan.select = ringStart + plan.stages * plan.stageBytes;
  plan.total = totalFor(plan.stages);
  if (plan.total > step::HostOp::kMaxSharedBytes)
    return std::nullopt;
  return plan;
}

/// The layout of index key rows the family reads: bf16, or packed rows
/// whose values are 16-byte and whose scales 4-byte copies in every page.
std::optional<layout::RowLayout> keyRowsOf(KVCacheType type) {
  std::optional<layout::RowLayout> row =
      layout::describeRow(toRowKind(type.getLayout()), type.getDim());
  if (!row)
    return std::nullopt;
  int64_t pageRows = type.getPageSize();
  switch (row->kind) {
  case layout::RowKind::IndexBF16:
    return row;
  case layout::RowKind::IndexFP8:
  case layout::RowKind::IndexMXFP4:
    if (row->valueBytes % 16 != 0 || row->scaleBytes != 4 ||
        (pageRows * row->rowBytes()) % 16 != 0)
      return std::nullopt;
    return row;
  default:
    return std::nullopt;
  }
}

Value toI64(OpBuilder &b, Location loc, Value v) {
  return arith::IndexCastOp::create(b, loc, b.getI64Type(), v);
}
Value toIndex(OpBuilder &b, Location loc, Value v) {
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
}

/// What both kernels read: the host's sizes and the buffers.
struct Operands {
  int64_t k = 0;
  Value tokens, rows, splits, splitRows;
  Value picks;   // memref<?xKxi32>
  Value partial; // memref<?xi64>: [token, split, k] keys
};

/// Writes the selection's k best of `token`: its rows, or, as split `split`
/// of several, its keys for the merge.
void writeBest(cpu::LoopEmitter &e, BlockSelect &select, const Operands &o,
               Value thread, Value token, Value splitSlot, Value asPicks) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  scf::ForOp::create(
      b, loc, thread, e.index(o.k), e.index(kThreads), ValueRange{},
      [&](OpBuilder &, Location, Value i, ValueRange) {
        Value key = select.key(i);
        auto which = scf::IfOp::create(b, loc, asPicks, /*withElse=*/true);
        {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(which.thenBlock());
          memref::StoreOp::create(b, loc, BlockSelect::rowOfKey(b, loc, key),
                                  o.picks, ValueRange{token, i});
          b.setInsertionPointToStart(which.elseBlock());
          if (splitSlot)
            memref::StoreOp::create(
                b, loc, key, o.partial,
                ValueRange{e.add(e.mul(splitSlot, e.index(o.k)), i)});
        }
        scf::YieldOp::create(b, loc);
      });
}

/// Issues the copies of a stage of packed keys as they are stored: each
/// row's values (16-byte pieces, consecutive rows' adjacent in a page) and
/// its 4 scale bytes. `keyRow(row)` gives the cache row and whether it
/// exists; a missing row is zero-filled, and decodes to zeros.
void copyPackedKeys(cpu::LoopEmitter &e, const SharedPlan &plan,
                    CacheRows &keys, Value keysAddress, Value stage,
                    Value thread,
                    function_ref<std::pair<Value, Value>(Value)> keyRow) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  int64_t pieces = plan.row.valueBytes / kChunkBytes;
  for (int64_t i = 0; i < kKeysPerBlock * pieces / kThreads; ++i) {
    Value linear = e.add(thread, e.index(i * kThreads));
    Value row = e.div(linear, e.index(pieces));
    Value piece = e.rem(linear, e.index(pieces));
    auto [global, real] = keyRow(row);
    Value inRow = toI64(b, loc, e.mul(piece, e.index(kChunkBytes)));
    Value from = e.add(
        e.add(keysAddress, toI64(b, loc, keys.valueOffset(global))), inRow);
    Value to = e.add(
        e.add(stage, toI64(b, loc, e.mul(row, e.index(plan.row.valueBytes)))),
        inRow);
    copyAsync16(b, loc, to, from, real);
  }
  static_assert(kKeysPerBlock <= kThreads);
  e.ifThen(e.cmp(IP::ult, thread, e.index(kKeysPerBlock)), [&] {
    auto [global, real] = keyRow(thread);
    Value from = e.add(keysAddress, toI64(b, loc, keys.scaleOffset(global)));
    Value to = e.add(stage, toI64(b, loc,
                                  e.add(e.mul(thread, e.index(4)),
                                        e.index(plan.stageScales))));
    copyAsync4(b, loc, to, from, real);
  });
}

/// Turns a landed stage of packed keys into the bf16 key tile (the
/// 128-byte swizzle layout the MMAs read): each thread takes 16-byte
/// chunks of 8 values, from 4 bytes of e2m1 codes and the block's ue8m0
/// scale, or from 8 e4m3 bytes and the row's power-of-two f32 scale, whose
/// exponent byte is that scale in ue8m0.
void convertPackedKeys(cpu::LoopEmitter &e, const SharedPlan &plan, Value tile,
                       Value stage, Value thread) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Type i32 = b.getI32Type();
  int64_t rowChunks = plan.width / 8;
  bool fp4 = plan.row.kind == layout::RowKind::IndexMXFP4;
  int64_t codeBytes = fp4 ? 4 : 8;
  for (int64_t i = 0; i < kKeysPerBlock * rowChunks / kThreads; ++i) {
    Value linear = e.add(thread, e.index(i * kThreads));
    Value row = e.div(linear, e.index(rowChunks));
    Value chunk = e.rem(linear, e.index(rowChunks));
    Value codesAt =
        e.add(stage, toI64(b, loc,
                           e.add(e.mul(row, e.index(plan.row.valueBytes)),
                                 e.mul(chunk, e.index(codeBytes)))));
    Value scales = e.add(
        stage, toI64(b, loc,
                     e.add(e.mul(row, e.index(4)), e.index(plan.stageScales))));
    Value values;
    if (fp4) {
      Value codes = loadShared(b, loc, codesAt, i32, 4);
      Value scale = loadShared(
          b, loc,
          e.add(scales,
                toI64(b, loc, e.div(chunk, e.index(plan.row.scaleBlock / 8)))),
          b.getI8Type(), 1);
      values = dequantizeE2M1x8(b, loc, codes, scale);
    } else {
      Value codes = loadShared(b, loc, codesAt, VectorType::get({2}, i32), 8);
      Value scaleBits = loadShared(b, loc, scales, i32, 4);
      Value scale = arith::TruncIOp::create(
          b, loc, b.getI8Type(),
          arith::ShRUIOp::create(b, loc, scaleBits, e.i32(23)));
      values = dequantizeE4M3x8(b, loc, codes, scale);
    }
    Value to =
        e.add(tile, toI64(b, loc,
                          swizzledOffset(b, loc, row, chunk, plan.width / 64)));
    storeShared(b, loc, to, values, 16);
  }
}

/// The scoring kernel: grid tokens x splits.
void buildScores(OpBuilder &b, Location loc, CacheIndexerScoreOp op,
                 const SharedPlan &plan, const Operands &o, Value query,
                 Value weights, Value positions, Value bases, Value keyBytes,
                 Operation *func) {
  cpu::LoopEmitter e(b, loc);
  Value blocks = e.mul(o.tokens, o.splits);
  mlir::gpu::LaunchOp launch =
      createLaunch(b, loc, kernelName(func, "indexer"), blocks, kThreads,
                   /*sharedFloats=*/0, plan.total);
  Value thread = launch.getThreadIds().x;
  Value block = launch.getBlockIds().x;
  Value token = arith::DivUIOp::create(b, loc, block, o.splits);
  Value split = arith::RemUIOp::create(b, loc, block, o.splits);
  Value warp = arith::DivUIOp::create(
      b, loc, arith::RemUIOp::create(b, loc, thread, e.index(kThreads)),
      e.index(kWarpLanes));
  Value lane = arith::RemUIOp::create(b, loc, thread, e.index(kWarpLanes));
  Value shared = dynamicShared(b, loc);
  AlignedShared aligned = alignToAtom(b, loc, shared);
  Value sharedBase = aligned.base, pad = aligned.pad;
  BlockSelect select(b, loc, shared, e.add(pad, e.index(plan.select)), thread,
                     o.k, kKeysPerBlock);
  select.start();

  // This block's rows: [begin, end) of the token's visible ones.
  int64_t ratio = op.getRatio();
  Value position = e.loadIndex(positions, {token});
  Value visible =
      e.min(arith::DivUIOp::create(b, loc, e.add(position, e.index(1)),
                                   e.index(ratio)),
            o.rows);
  Value begin = e.mul(split, o.splitRows);
  Value end = e.max(e.min(e.add(begin, o.splitRows), visible), begin);
  Value keyBlocks = arith::CeilDivUIOp::create(
      b, loc, arith::SubIOp::create(b, loc, end, begin),
      e.index(kKeysPerBlock));
  Value base = e.loadIndex(bases, {token});

  // The weights of this thread's heads (0 past the head count).
  int64_t n = plan.paddedHeads;
  SmallVector<Value> weightOf(n / 2);
  for (int64_t r = 0; r < n / 2; ++r) {
    if (r % 4 >= 2) {
      weightOf[r] = weightOf[r - 2];
      continue;
    }
    Value column = fragmentPlace(b, loc, warp, lane, r).column;
    Value real = e.cmp(IP::ult, column, e.index(plan.heads));
    Value safe = e.min(column, e.index(plan.heads - 1));
    weightOf[r] = e.select(
        real, memref::LoadOp::create(b, loc, weights, ValueRange{token, safe}),
        e.f32(0.0));
  }

  // Tiles: the query's heads, and the ring of key stages.
  int64_t rowChunks = plan.width * 2 / kChunkBytes;
  Value queryAddress = addressOf(b, loc, query);
  Value queryTile = e.add(sharedBase, e.i64(plan.query));
  copyTileAsync(
      b, loc, queryTile, n, rowChunks, kThreads, thread,
      [&](Value head) -> std::pair<Value, Value> {
        Value real = e.cmp(IP::ult, head, e.index(plan.heads));
        Value element = e.mul(e.add(e.mul(token, e.index(plan.heads)), head),
                              e.index(plan.width));
        return {e.add(queryAddress, e.mul(toI64(b, loc, element), e.i64(2))),
                real};
      },
      queryAddress);
  CacheRows keys(e, keyBytes, op.getKeys().getType());
  Value keysAddress = addressOf(b, loc, keyBytes);
  auto stageAddress = [&](Value stage) {
    return e.add(e.add(sharedBase, e.i64(plan.firstStage)),
                 e.mul(toI64(b, loc, stage), e.i64(plan.stageBytes)));
  };
  auto copyKeys = [&](Value keyBlock, Value stage) {
    Value first = e.add(begin, e.mul(keyBlock, e.index(kKeysPerBlock)));
    // Row `row` of the block: its cache row (the token's first past the
    // end, where nothing is read) and whether it exists.
    auto keyRow = [&](Value row) -> std::pair<Value, Value> {
      Value j = e.add(first, row);
      Value real = e.cmp(IP::ult, j, end);
      return {e.add(base, e.select(real, j, e.index(0))), real};
    };
    if (plan.packed())
      return copyPackedKeys(e, plan, keys, keysAddress, stageAddress(stage),
                            thread, keyRow);
    copyTileAsync(
        b, loc, stageAddress(stage), kKeysPerBlock, rowChunks, kThreads, thread,
        [&](Value row) -> std::pair<Value, Value> {
          auto [global, real] = keyRow(row);
          return {e.add(keysAddress, toI64(b, loc, keys.valueOffset(global))),
                  real};
        },
        queryAddress);
  };
  // The ring's first tiles, a copy group each (empty past the last).
  for (int64_t t = 0; t + 1 < plan.stages; ++t) {
    e.ifThen(e.cmp(IP::ult, e.index(t), keyBlocks),
             [&] { copyKeys(e.index(t), e.index(t)); });
    commitCopies(b, loc);
  }

  int64_t groupStride = plan.width / 64 * kSwizzleAtomBytes;
  auto kStep = [&](int64_t step) {
    return step / 4 * kSwizzleAtomBytes + step % 4 * 2 * kMmaK;
  };
  auto loop = scf::ForOp::create(b, loc, e.index(0), keyBlocks, e.index(1));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    Value keyBlock = loop.getInductionVar();
    Value stage =
        arith::RemUIOp::create(b, loc, keyBlock, e.index(plan.stages));
    // Into the stage scored last round: every thread is past its MMA.
    Value next = e.add(keyBlock, e.index(plan.stages - 1));
    e.ifThen(e.cmp(IP::ult, next, keyBlocks), [&] {
      copyKeys(next,
               arith::RemUIOp::create(b, loc, next, e.index(plan.stages)));
    });
    commitCopies(b, loc);
    waitCopies(b, loc, plan.stages - 1);
    fenceSharedForMma(b, loc);
    mlir::gpu::BarrierOp::create(b, loc);

    // Every (key, head) dot product of the stage.
    Value keysTile = stageAddress(stage);
    if (plan.packed()) {
      keysTile = e.add(sharedBase, e.i64(plan.converted));
      convertPackedKeys(e, plan, keysTile, stageAddress(stage), thread);
      fenceSharedForMma(b, loc);
      mlir::gpu::BarrierOp::create(b, loc);
    }
    Value dots = unsetAccumulator(b, loc, n);
    mmaFence(b, loc);
    for (int64_t step = 0; step < plan.width / kMmaK; ++step) {
      Value a = matrixDescriptor(b, loc, e.add(keysTile, e.i64(kStep(step))),
                                 kChunkBytes, groupStride);
      Value bDesc =
          matrixDescriptor(b, loc, e.add(queryTile, e.i64(kStep(step))),
                           kChunkBytes, groupStride);
      dots = mmaBF16(b, loc, a, bDesc, dots, n, /*transposeB=*/false,
                     /*accumulate=*/step > 0);
    }
    mmaCommit(b, loc);
    mmaWait(b, loc, 0);

    // Each key's score from the registers: a thread holds two keys' rows
    // of the fragment, a quarter of their heads each, summed in the order
    // `v4a.indexer_score` documents (a product and a sum, each rounded:
    // nothing here allows their contraction).
    SmallVector<Value> d = unpackAccumulator(b, loc, dots);
    Value totals[2];
    for (int64_t half = 0; half < 2; ++half) {
      Value partial = e.f32(0.0);
      for (int64_t r = 2 * half; r < n / 2; r += 4)
        for (int64_t c = 0; c < 2; ++c)
          partial = e.add(partial,
                          e.mul(e.max(d[r + c], e.f32(0.0)), weightOf[r + c]));
      totals[half] = reduceLanes(b, loc, partial, 4, Combine::Add);
    }
    // Lane 4g offers key g of its warp's rows, lane 4g + 1 key g + 8.
    Value quarter = e.rem(lane, e.index(4));
    Value second = e.cmp(IP::eq, quarter, e.index(1));
    Value total = e.select(second, totals[1], totals[0]);
    Value row = e.add(fragmentPlace(b, loc, warp, lane, 0).row,
                      e.select(second, e.index(8), e.index(0)));
    Value j = e.add(e.add(begin, e.mul(keyBlock, e.index(kKeysPerBlock))), row);
    // Only finite scores are picked (NaN compares false).
    Value finite = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT,
                                         e.abs(total), e.f32(INFINITY));
    Value real = arith::AndIOp::create(
        b, loc, e.cmp(IP::ult, quarter, e.index(2)),
        arith::AndIOp::create(b, loc, e.cmp(IP::ult, j, end), finite));
    select.offer(BlockSelect::rankKey(b, loc, total, j), real);
    select.makeRoom();
  }
  waitCopies(b, loc, 0);
  select.finish();
  Value single = e.cmp(IP::eq, o.splits, e.index(1));
  writeBest(e, select, o, thread, token, block, single);
}

/// Shared bytes of the rank merge: its lists' keys.
int64_t rankMergeSharedBytes(int64_t k) { return kRankMergeLists * k * 8; }

/// The merge of a few lists (at most kRankMergeLists): a block per token
/// loads its splits' sorted lists into shared memory, and each key finds
/// its rank in their union, its place in its own list plus, by binary
/// search, the keys above it in the others (keys are distinct). A key of
/// rank below k is the pick of that rank: no selection, no sort, and a
/// barrier only after the load.
void buildRankMerge(OpBuilder &b, Location loc, const Operands &o,
                    Operation *func) {
  cpu::LoopEmitter e(b, loc);
  Value blocks =
      e.select(e.cmp(IP::ugt, o.splits, e.index(1)),
               e.select(e.cmp(IP::ule, o.splits, e.index(kRankMergeLists)),
                        o.tokens, e.index(0)),
               e.index(0));
  mlir::gpu::LaunchOp launch = createLaunch(
      b, loc, kernelName(func, "indexer"), blocks, kRankMergeThreads,
      /*sharedFloats=*/0, rankMergeSharedBytes(o.k));
  Value thread = launch.getThreadIds().x;
  Value token = launch.getBlockIds().x;
  Value shared = dynamicShared(b, loc);
  Value keys = sharedView(b, loc, shared, e.index(0), b.getI64Type(),
                          kRankMergeLists * o.k);
  Value count = e.mul(o.splits, e.index(o.k));
  Value first = e.mul(token, count);
  // Every key in flight at once (a load each would wait in turn).
  Value sharedAddress = addressOf(b, loc, shared);
  Value listsAddress = e.add(addressOf(b, loc, o.partial),
                             e.mul(toI64(b, loc, first), e.i64(8)));
  Value always = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
  scf::ForOp::create(b, loc, thread, count, e.index(kRankMergeThreads),
                     ValueRange{},
                     [&](OpBuilder &, Location, Value i, ValueRange) {
                       Value bytes = e.mul(toI64(b, loc, i), e.i64(8));
                       copyAsync8(b, loc, e.add(sharedAddress, bytes),
                                  e.add(listsAddress, bytes), always);
                       scf::YieldOp::create(b, loc);
                     });
  commitCopies(b, loc);
  waitCopies(b, loc, 0);
  mlir::gpu::BarrierOp::create(b, loc);

  // The keys of list `list` above `key` (a prefix: the list descends).
  auto keysAbove = [&](Value list, Value key) {
    Value start = e.mul(list, e.index(o.k));
    Value above = e.index(0);
    for (int64_t step = llvm::PowerOf2Ceil(o.k); step >= 1; step /= 2) {
      Value next = e.add(above, e.index(step));
      Value inside = e.cmp(IP::ule, next, e.index(o.k));
      Value at = e.add(start, e.sub(e.min(next, e.index(o.k)), e.index(1)));
      Value larger = arith::CmpIOp::create(
          b, loc, IP::ugt, memref::LoadOp::create(b, loc, keys, ValueRange{at}),
          key);
      above =
          e.select(arith::AndIOp::create(b, loc, inside, larger), next, above);
    }
    return above;
  };
  Value zero = e.i64(0);
  Value kept = e.index(0);
  for (int64_t list = 0; list < kRankMergeLists; ++list)
    kept = e.add(kept, e.select(e.cmp(IP::ult, e.index(list), o.splits),
                                keysAbove(e.index(list), zero), e.index(0)));
  scf::ForOp::create(
      b, loc, thread, count, e.index(kRankMergeThreads), ValueRange{},
      [&](OpBuilder &, Location, Value i, ValueRange) {
        Value key = memref::LoadOp::create(b, loc, keys, ValueRange{i});
        Value own = arith::DivUIOp::create(b, loc, i, e.index(o.k));
        Value rank = arith::RemUIOp::create(b, loc, i, e.index(o.k));
        for (int64_t list = 0; list < kRankMergeLists; ++list) {
          Value other = arith::AndIOp::create(
              b, loc, e.cmp(IP::ult, e.index(list), o.splits),
              e.cmp(IP::ne, e.index(list), own));
          rank = e.add(
              rank, e.select(other, keysAbove(e.index(list), key), e.index(0)));
        }
        Value pick = arith::AndIOp::create(b, loc, e.cmp(IP::ne, key, zero),
                                           e.cmp(IP::ult, rank, e.index(o.k)));
        e.ifThen(pick, [&] {
          memref::StoreOp::create(b, loc, BlockSelect::rowOfKey(b, loc, key),
                                  o.picks, ValueRange{token, rank});
        });
        scf::YieldOp::create(b, loc);
      });
  // Ranks past the kept keys: none.
  scf::ForOp::create(b, loc, e.add(e.min(kept, e.index(o.k)), thread),
                     e.index(o.k), e.index(kRankMergeThreads), ValueRange{},
                     [&](OpBuilder &, Location, Value r, ValueRange) {
                       memref::StoreOp::create(b, loc, e.i32(-1), o.picks,
                                               ValueRange{token, r});
                       scf::YieldOp::create(b, loc);
                     });
}

/// The ranks sampled in each split's sorted list by the merge: the 1st,
/// 2nd, 4th, ... best and the k-th (positions 0, 1, 3, ..., k - 1).
SmallVector<int64_t> samplePositions(int64_t k) {
  SmallVector<int64_t> at;
  for (int64_t p = 1; p < k; p *= 2)
    at.push_back(p - 1);
  at.push_back(k - 1);
  return at;
}

/// Shared bytes of the merge: the selection, then the samples (i64) and the
/// lists' first candidates (i32).
int64_t mergeSharedBytes(int64_t k) {
  int64_t samples = kMaxSplits * samplePositions(k).size();
  return BlockSelect::sharedBytes(k, kMergeThreads * kMergeKeysPerThread) +
         samples * 8 + kMaxSplits * 4 + kSwizzleAtomBytes;
}

/// The merge kernel: a block per token over its splits' sorted lists.
///
/// A list's key at rank p stands for p + 1 keys at or above it, so the
/// samples at ranks 0, 1, 3, 7, ... weigh 1, 1, 2, 4, ... keys. The largest
/// sample whose samples at or above weigh k is a floor no pick is below,
/// and since every list was sampled at least every doubling of rank, only
/// keys of the lists' prefixes up to their first sample below the floor
/// (at most 3k + splits of them) are offered to the selection.
void buildMerge(OpBuilder &b, Location loc, const Operands &o,
                Operation *func) {
  cpu::LoopEmitter e(b, loc);
  int64_t incoming = kMergeThreads * kMergeKeysPerThread;
  SmallVector<int64_t> ranks = samplePositions(o.k);
  int64_t perList = ranks.size();
  Value many = e.cmp(IP::ugt, o.splits, e.index(kRankMergeLists));
  Value blocks = e.select(many, o.tokens, e.index(0));
  mlir::gpu::LaunchOp launch =
      createLaunch(b, loc, kernelName(func, "indexer"), blocks, kMergeThreads,
                   /*sharedFloats=*/0, mergeSharedBytes(o.k));
  Value thread = launch.getThreadIds().x;
  Value token = launch.getBlockIds().x;
  Value shared = dynamicShared(b, loc);
  // At the aligned base, as in the scoring kernel (and with the offset a
  // run-time value, no access looks out of bounds to ptxas).
  Value pad = alignToAtom(b, loc, shared).pad;
  int64_t selectBytes = BlockSelect::sharedBytes(o.k, incoming);
  BlockSelect select(b, loc, shared, pad, thread, o.k, incoming);
  Value samples = sharedView(b, loc, shared, e.add(pad, e.index(selectBytes)),
                             b.getI64Type(), kMaxSplits * perList);
  Value starts =
      sharedView(b, loc, shared,
                 e.add(pad, e.index(selectBytes + kMaxSplits * perList * 8)),
                 b.getI32Type(), kMaxSplits);
  select.start();
  Value first = e.mul(e.mul(token, o.splits), e.index(o.k));
  auto listKey = [&](Value list, Value rank, Value valid) {
    Value at = e.add(first, e.add(e.mul(list, e.index(o.k)), rank));
    return memref::LoadOp::create(b, loc, o.partial,
                                  ValueRange{e.select(valid, at, first)})
        .getResult();
  };
  auto rankOf = [&](Value j) {
    Value rank = e.index(ranks.back());
    for (int64_t i = perList - 2; i >= 0; --i)
      rank = e.select(e.cmp(IP::eq, j, e.index(i)), e.index(ranks[i]), rank);
    return rank;
  };

  // Rounds over [0, count) with kMergeKeysPerThread loads in flight per
  // thread: `load` gives the key at `at`, `use` takes each round's keys.
  using Loaded = SmallVector<std::pair<Value, Value>>; // (at, key)
  auto inRounds = [&](Value count,
                      function_ref<Value(Value at, Value inside)> load,
                      function_ref<void(const Loaded &)> use) {
    e.loop(e.index(0),
           arith::CeilDivUIOp::create(b, loc, count, e.index(incoming)),
           [&](Value round) {
             Loaded loaded;
             for (int64_t i = 0; i < kMergeKeysPerThread; ++i) {
               Value at = e.add(e.add(e.mul(round, e.index(incoming)),
                                      e.index(i * kMergeThreads)),
                                thread);
               loaded.push_back({at, load(at, e.cmp(IP::ult, at, count))});
             }
             use(loaded);
           });
  };

  // The samples.
  Value sampleCount = e.mul(o.splits, e.index(perList));
  inRounds(
      sampleCount,
      [&](Value at, Value inside) {
        Value list = arith::DivUIOp::create(b, loc, at, e.index(perList));
        Value j = arith::RemUIOp::create(b, loc, at, e.index(perList));
        return e.select(inside, listKey(list, rankOf(j), inside), e.i64(0));
      },
      [&](const Loaded &loaded) {
        for (const std::pair<Value, Value> &sample : loaded)
          e.ifThen(e.cmp(IP::ult, sample.first, sampleCount), [&] {
            memref::StoreOp::create(b, loc, sample.second, samples,
                                    ValueRange{sample.first});
          });
      });
  mlir::gpu::BarrierOp::create(b, loc);

  // The floor: sample j of a list weighs ranks[j] - ranks[j - 1] keys.
  Value floor = select.weightedFloor(
      samples, arith::IndexCastOp::create(b, loc, b.getI32Type(), sampleCount),
      e.i32(o.k), [&](Value i) {
        Value j = arith::RemUIOp::create(b, loc, i, e.index(perList));
        Value weight =
            e.i32(ranks.back() - (perList > 1 ? ranks[perList - 2] : -1));
        for (int64_t r = perList - 2; r >= 0; --r)
          weight =
              e.select(e.cmp(IP::eq, j, e.index(r)),
                       e.i32(ranks[r] - (r > 0 ? ranks[r - 1] : -1)), weight);
        return weight;
      });
  floor = arith::MaxUIOp::create(b, loc, floor, e.i64(1));

  // Each list's candidates: the ranks before its first sample below the
  // floor; a thread's lists are consecutive, their starts a block scan.
  SmallVector<Value> lengths;
  Value local = e.i32(0);
  for (int64_t u = 0; u < kListsPerThread; ++u) {
    Value list = e.add(e.mul(thread, e.index(kListsPerThread)), e.index(u));
    Value real = e.cmp(IP::ult, list, o.splits);
    Value safe = e.select(real, list, e.index(0));
    Value length = e.i32(0);
    for (int64_t j = 0; j < perList; ++j) {
      Value key = memref::LoadOp::create(
          b, loc, samples,
          ValueRange{e.add(e.mul(safe, e.index(perList)), e.index(j))});
      int64_t reach = j + 1 < perList ? ranks[j + 1] : o.k;
      length = e.select(e.cmp(IP::uge, key, floor), e.i32(reach), length);
    }
    length = e.select(real, length, e.i32(0));
    lengths.push_back(length);
    local = arith::AddIOp::create(b, loc, local, length);
  }
  Value total;
  Value through = select.inclusiveScan(local, total);
  Value start = arith::SubIOp::create(b, loc, through, local);
  for (int64_t u = 0; u < kListsPerThread; ++u) {
    Value list = e.add(e.mul(thread, e.index(kListsPerThread)), e.index(u));
    e.ifThen(e.cmp(IP::ult, list, o.splits), [&] {
      memref::StoreOp::create(b, loc, start, starts, ValueRange{list});
    });
    start = arith::AddIOp::create(b, loc, start, lengths[u]);
  }
  select.raiseFloor(arith::SubIOp::create(b, loc, floor, e.i64(1)));
  mlir::gpu::BarrierOp::create(b, loc);

  // Candidate c is in the last list whose start is at most c.
  auto listOf = [&](Value c) {
    Value list = e.index(0);
    for (int64_t step = llvm::PowerOf2Ceil(kMaxSplits) / 2; step >= 1;
         step /= 2) {
      Value next = e.add(list, e.index(step));
      Value inside = e.cmp(IP::ult, next, o.splits);
      Value at = memref::LoadOp::create(
          b, loc, starts, ValueRange{e.select(inside, next, list)});
      Value reached = arith::AndIOp::create(
          b, loc, inside, arith::CmpIOp::create(b, loc, IP::sle, at, c));
      list = e.select(reached, next, list);
    }
    return list;
  };
  Value candidates = toIndex(b, loc, total);
  inRounds(
      candidates,
      [&](Value at, Value inside) {
        Value c = arith::IndexCastOp::create(b, loc, b.getI32Type(), at);
        Value list = listOf(c);
        Value rank = toIndex(
            b, loc,
            arith::SubIOp::create(
                b, loc, c,
                memref::LoadOp::create(b, loc, starts, ValueRange{list})));
        return listKey(list, rank, inside);
      },
      [&](const Loaded &loaded) {
        for (const std::pair<Value, Value> &candidate : loaded)
          select.offer(candidate.second,
                       e.cmp(IP::ult, candidate.first, candidates));
        select.makeRoom();
      });
  select.finish();
  Value always = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
  writeBest(e, select, o, thread, token, Value(), always);
}

} // namespace

bool indexerFamilyCovers(int64_t heads, int64_t width, int64_t k) {
  std::optional<layout::RowLayout> row =
      layout::describeRow(layout::RowKind::IndexBF16, width);
  return row && planShared(heads, width, k, *row).has_value();
}

int64_t indexerSplitListBytes(int64_t tokens, int64_t k) {
  // A token's splits are at most the blocks the chip holds over the tokens
  // (so tokens x splits at most those blocks), or one.
  return std::max(tokens, kSMs * kMostBlocksPerSM) * k * 8;
}

TopKOp coveredTopK(CacheIndexerScoreOp scores) {
  Value result = scores.getScores();
  if (!result.hasOneUse())
    return nullptr;
  auto topk = dyn_cast<TopKOp>(*result.getUsers().begin());
  if (!topk || topk.getCandidates())
    return nullptr;
  auto query = cast<RankedTensorType>(scores.getQuery().getType());
  if (!query.getElementType().isBF16())
    return nullptr;
  int64_t heads = query.getDimSize(1), width = query.getDimSize(2);
  std::optional<layout::RowLayout> row = keyRowsOf(scores.getKeys().getType());
  if (ShapedType::isDynamic(heads) || ShapedType::isDynamic(width) || !row ||
      !planShared(heads, width, static_cast<int64_t>(topk.getK()), *row))
    return nullptr;
  return topk;
}

void lowerIndexerTopK(RewriterBase &rewriter, CacheIndexerScoreOp op,
                      TopKOp topk) {
  Location loc = op.getLoc();
  OpBuilder &b = rewriter;
  b.setInsertionPoint(topk);
  cpu::LoopEmitter e(b, loc);
  auto queryType = cast<RankedTensorType>(op.getQuery().getType());
  Operands o;
  o.k = static_cast<int64_t>(topk.getK());
  SharedPlan plan =
      *planShared(queryType.getDimSize(1), queryType.getDimSize(2), o.k,
                  *keyRowsOf(op.getKeys().getType()));
  Value query = readOnlyBuffer(b, loc, op.getQuery());
  // The query is read by address (its layout must be the identity); the
  // others through memref loads, in whatever layout they come.
  Value weights = e.buffer(op.getWeights());
  Value positions = e.buffer(op.getPositions());
  Value bases = e.buffer(op.getBase());
  Value context = e.buffer(op.getContext());
  Value keyBytes = cacheBytes(b, loc, op.getKeys());

  // Host sizes: the rows any token may see (the host's bound), and splits
  // enough to fill the chip, each of at least kSplitRows rows.
  o.tokens = memref::DimOp::create(b, loc, query, 0);
  Value bound = e.loadIndex(context, {e.index(0)});
  // (Signed divisions: the host program's arithmetic has no unsigned
  // ceiling division; every value here is non-negative.)
  o.rows = arith::DivSIOp::create(b, loc, e.max(bound, e.index(0)),
                                  e.index(op.getRatio()));
  Value perToken = arith::DivSIOp::create(
      b, loc, e.index(kSMs * plan.blocksPerSM), e.max(o.tokens, e.index(1)));
  Value needed =
      arith::CeilDivSIOp::create(b, loc, o.rows, e.index(kSplitRows));
  o.splits =
      e.max(e.min(e.min(perToken, needed), e.index(kMaxSplits)), e.index(1));
  Value rowsPerSplit = arith::CeilDivSIOp::create(b, loc, o.rows, o.splits);
  o.splitRows = e.max(e.mul(arith::CeilDivSIOp::create(b, loc, rowsPerSplit,
                                                       e.index(kKeysPerBlock)),
                            e.index(kKeysPerBlock)),
                      e.index(kKeysPerBlock));
  auto picksType = cast<RankedTensorType>(topk.getType());
  o.picks = memref::AllocOp::create(
      b, loc, MemRefType::get(picksType.getShape(), b.getI32Type()),
      ValueRange{o.tokens});
  o.partial = memref::AllocOp::create(
      b, loc, MemRefType::get({ShapedType::kDynamic}, b.getI64Type()),
      ValueRange{e.mul(e.mul(o.tokens, o.splits), e.index(o.k))});

  Operation *func = op->getParentOfType<func::FuncOp>();
  buildScores(b, loc, op, plan, o, query, weights, positions, bases, keyBytes,
              func);
  b.setInsertionPoint(topk);
  buildRankMerge(b, loc, o, func);
  b.setInsertionPoint(topk);
  buildMerge(b, loc, o, func);
  b.setInsertionPoint(topk);
  Value result = bufferization::ToTensorOp::create(
      b, loc, picksType, o.picks, /*restrict=*/true, /*writable=*/true);
  rewriter.replaceOp(topk, result);
  rewriter.eraseOp(op);
}

} // namespace v4a::gpu
