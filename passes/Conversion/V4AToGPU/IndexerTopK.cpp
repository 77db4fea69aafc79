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
//   kernel. Packed keys (fp8 with a row scale, MXFP4) skip the bf16 tile:
//   each thread copies, a few tiles ahead, its quarter of each of its two
//   fragment rows as stored into its own places of a shared ring, and
//   decodes it (exactly: the values the loop path decodes) into the A
//   fragments of MMAs that take A from registers. The query tile's K order
//   is permuted to match, so that a thread's quarter of a row is contiguous
//   in memory (one scale block of MXFP4 keys). The next tile's MMAs run
//   while a tile's scores are offered, and the selection, with room for
//   four times its sort, checks its room every four tiles (it cuts about
//   once a split). Each score is offered to the block's streaming top-k
//   (BlockSelect.h) and never stored. A token whose rows are one split
//   writes its picks; otherwise each split leaves its sorted k best keys.
// - merge (only with splits): a block per token. Up to four lists: each key
//   finds its rank in their union by binary searches of the other lists,
//   and a rank below k is a pick. More lists: the block finds, from samples
//   of the sorted lists, a floor no pick is below, and offers the lists'
//   keys above it (a few times k) to the same top-k.
//
// V4.1's two-level selection is the same kernels over other rows or keys
// (Selection): a block top-k offers, per block of 8 or 16 rows, its
// largest score with the block's id; a top-k inside candidate blocks takes
// as a token's rows its blocks' rows, in the list's order, and offers
// their global rows. A candidate source's rows and blocks are two
// selections of one scoring kernel (its keys read once) when one block's
// shared memory holds both; else two runs.
//
// Splits depend on the batch (enough blocks to fill the chip) but the picks
// never do: the selection is exact and keys are distinct (score, row)
// pairs, so any split gives the same picks in the same order.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/V4AToGPU/IndexerTopK.h"

#include "core/CacheLayout.h"
#include "core/Numerics.h"
#include "dialects/V4A/IR/V4AOps.h"
#include "passes/Conversion/V4AToCPU/CacheRows.h"
#include "passes/Conversion/V4AToCPU/LoopEmitter.h"
#include "passes/Conversion/V4AToGPU/BlockSelect.h"
#include "passes/Conversion/V4AToGPU/DeviceKit.h"
#include "passes/Conversion/V4AToGPU/RowRegions.h"
#include "passes/Conversion/V4AToGPU/Warpgroup.h"

#include "core/StepSignature.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

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
/// The sampled merge: a block of a selection's most threads per token (its
/// time is one chain of steps, each shorter with more threads; it runs
/// where few tokens leave the chip idle), over at most kMaxSplits lists,
/// kListsPerThread of them per thread in its scan. (A token's splits stop
/// there even when the chip holds more blocks: each list costs the merge
/// more than its block saves the scores.)
constexpr int64_t kMergeThreads = BlockSelect::kMostThreads;
constexpr int64_t kMergeKeysPerThread = 2;
constexpr int64_t kMaxSplits = 2 * kSMs;
constexpr int64_t kListsPerThread =
    (kMaxSplits + kMergeThreads - 1) / kMergeThreads;
constexpr int64_t kLargestK = 2048;
/// Splits whose lists the rank merge takes (more: the sampled merge), and
/// its threads: enough that a thread's few keys hide the latency of their
/// binary searches.
constexpr int64_t kRankMergeLists = 4;
constexpr int64_t kRankMergeThreads = 512;
/// Packed keys: stages of the ring (each thread copies its own share),
/// tiles offered between two checks of the selection's room, and its
/// candidates in multiples of its sort (fewer cuts; when that keeps the
/// blocks per SM and the stages, else the least).
constexpr int64_t kPackedStages = 4;
constexpr int64_t kPackedTilesPerCheck = 4;
constexpr int64_t kPackedCandidateSorts = 4;
/// Key stages in the scoring kernel's ring: at most, and at least.
constexpr int64_t kMostStages = 4;
constexpr int64_t kFewestStages = 2;
/// An SM's shared memory, of which each block reserves 1 KiB.
constexpr int64_t kSharedBytesPerSM = 228 * 1024;
constexpr int64_t kReservedSharedBytes = 1024;
constexpr int64_t kChunkBytes = 16;
/// MXFP4 keys on e4m3 MMAs: the key width they take (a thread's quarter of
/// a row is one scale block), the K of an MMA in bytes, and the decode
/// tables: one of eight e4m3 bytes per distance of a block's scale below
/// its row's largest, from kFarthestBlock binades below (all zeros, for
/// every block farther) up to 0, then the sign word.
constexpr int64_t kE4M3Width = 128;
/// Threads of the kernel making each token's query image.
constexpr int64_t kImageThreads = 1024;
constexpr int64_t kE4M3StepBytes = 32;
constexpr int64_t kFarthestBlock = 21;
constexpr int64_t kDecodeTables = kFarthestBlock + 1;
constexpr int64_t kSignWord = kDecodeTables * 8;
constexpr int64_t kDecodeBytes = 256;
static_assert(kSignWord + 4 <= kDecodeBytes);
/// The binade a row's largest block lands on in the decoded keys: 6 x 2^6
/// is the largest e4m3 multiple of an e2m1 magnitude (448 would not be).
constexpr int64_t kTopBinade = 6;

/// Byte offsets in the scoring kernel's dynamic shared memory.
struct SharedPlan {
  int64_t heads = 0, paddedHeads = 0, width = 0;
  int64_t query = 0, firstStage = 0, stages = 0, keyTile = 0, select = 0,
          total = 0;
  /// Key tiles offered between two checks of the selection's room, and
  /// its candidates.
  int64_t tilesPerCheck = 1, capacity = 0;
  /// Scoring blocks an SM holds with this plan's shared memory.
  int64_t blocksPerSM = 1;
  /// Bytes of a stage of the ring: a bf16 key tile, or every thread's share
  /// of packed keys (their values, then their scale words at `stageScales`).
  int64_t stageBytes = 0, stageScales = 0;
  /// The key rows' layout.
  layout::RowLayout row{};
  /// MXFP4 rows of kE4M3Width dims on e4m3 MMAs: the query tile is the
  /// token's e4m3 image (query rows, then the weight tile of the head
  /// sum's MMAs), made once a token and copied; decode tables follow it.
  bool e4m3 = false;
  int64_t weightTile = 0, imageBytes = 0, decodeTables = 0;
  /// k16 steps of the head sum, and the weight tile's atoms along K.
  int64_t headSteps = 0, weightAtoms = 0;
  bool packed() const { return row.kind != layout::RowKind::IndexBF16; }
  /// How far apart the two values of a bf16 pair of the decoded keys are:
  /// neighbours (fp8) or four apart (MXFP4: dequantizeE2M1x8).
  int64_t pairStride() const {
    return row.kind == layout::RowKind::IndexMXFP4 ? 4 : 1;
  }
  int64_t incoming() const { return kKeysPerBlock * tilesPerCheck; }
  /// A second selection over the same scores, of `blockK` blocks of
  /// `blockSize` rows (a candidate source's: Selection::Kind::Blocks); none
  /// when blockK is 0.
  int64_t blockK = 0, blockSize = 0, blockSelect = 0, blockCapacity = 0;
  int64_t blockIncoming() const {
    return kKeysPerBlock / blockSize * tilesPerCheck;
  }
};

/// Whether the e4m3 form takes key rows of this layout: MXFP4 rows of
/// kE4M3Width dims.
bool multipliesAsE4M3(const layout::RowLayout &row) {
  return row.kind == layout::RowKind::IndexMXFP4 && row.dim == kE4M3Width;
}

std::optional<SharedPlan> planShared(int64_t heads, int64_t width, int64_t k,
                                     const layout::RowLayout &row,
                                     bool e4m3 = false, int64_t blockK = 0,
                                     int64_t blockSize = 0) {
  if (width % 64 != 0 || width > 256 || heads < 1 || heads > 256 || k < 1 ||
      k > kLargestK || row.dim != width || blockK < 0 || blockK > kLargestK ||
      (blockK > 0 && (blockSize < 1 || kKeysPerBlock % blockSize != 0)))
    return std::nullopt;
  SharedPlan plan;
  plan.blockK = blockK;
  plan.blockSize = blockSize;
  plan.heads = heads;
  plan.paddedHeads = llvm::alignTo(heads, 8);
  plan.width = width;
  plan.row = row;
  plan.e4m3 = e4m3 && multipliesAsE4M3(row);
  int64_t queryTile = plan.paddedHeads * width * (plan.e4m3 ? 1 : 2);
  plan.keyTile = kKeysPerBlock * width * 2;
  plan.stageBytes = plan.keyTile;
  int64_t ringStart = queryTile;
  if (plan.e4m3) {
    plan.headSteps = llvm::divideCeil(plan.paddedHeads, kMmaK);
    plan.weightAtoms =
        llvm::divideCeil(plan.headSteps * kMmaK * 2, kSwizzleRowBytes);
    plan.weightTile = queryTile;
    plan.imageBytes = queryTile + plan.weightAtoms * kSwizzleAtomBytes;
    plan.decodeTables = plan.imageBytes;
    ringStart = plan.imageBytes + kDecodeBytes;
  }
  if (plan.packed()) {
    plan.tilesPerCheck = kPackedTilesPerCheck;
    plan.stageScales = kKeysPerBlock * row.valueBytes;
    // Each of a row's four sharers keeps its own copy of the scale word.
    plan.stageBytes = plan.stageScales + 2 * kThreads * 4;
  }
  // Tiles are whole 1 KiB atoms; the window's base is aligned up to one,
  // hence the spare atom at the end. The most blocks per SM with at least
  // kFewestStages stages, and at that occupancy the deepest ring.
  auto blockSelectBytes = [&] {
    return plan.blockK
               ? BlockSelect::sharedBytes(plan.blockK, plan.blockIncoming(),
                                          plan.blockCapacity)
               : 0;
  };
  auto totalFor = [&](int64_t stages) {
    return ringStart + stages * plan.stageBytes +
           BlockSelect::sharedBytes(k, plan.incoming(), plan.capacity) +
           blockSelectBytes() + kSwizzleAtomBytes;
  };
  auto fits = [&](int64_t stages, int64_t blocks) {
    return blocks * (totalFor(stages) + kReservedSharedBytes) <=
           kSharedBytesPerSM;
  };
  plan.blocksPerSM = kMostBlocksPerSM;
  while (plan.blocksPerSM > 1 && !fits(kFewestStages, plan.blocksPerSM))
    --plan.blocksPerSM;
  plan.stages = plan.packed() ? kPackedStages : kMostStages;
  while (plan.stages > kFewestStages && !fits(plan.stages, plan.blocksPerSM))
    --plan.stages;
  if (plan.packed()) {
    int64_t least = BlockSelect::leastCapacity(k, plan.incoming());
    plan.capacity =
        std::max(least, kPackedCandidateSorts * BlockSelect::sortSizeFor(k));
    if (!fits(plan.stages, plan.blocksPerSM))
      plan.capacity = least;
  }
  plan.query = 0;
  plan.firstStage = ringStart;
  plan.select = ringStart + plan.stages * plan.stageBytes;
  plan.blockSelect =
      plan.select + BlockSelect::sharedBytes(k, plan.incoming(), plan.capacity);
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
/// Whether `x` (f32) is finite (NaN compares false).
Value isFinite(cpu::LoopEmitter &e, Value x) {
  return arith::CmpFOp::create(e.builder(), e.location(),
                               arith::CmpFPredicate::OLT, e.abs(x),
                               e.f32(INFINITY));
}

/// What a run of the family selects from a token's scores.
struct Selection {
  enum class Kind {
    /// The k best of the rows the token sees.
    Rows,
    /// The k best rows inside the token's candidate blocks (V4.1's second
    /// level): its rows are those blocks' rows, in the order of the list.
    RowsInBlocks,
    /// The k best blocks of `blockSize` rows by their largest score (the
    /// first level): the picks are block ids.
    Blocks,
  };
  Kind kind = Kind::Rows;
  int64_t blockSize = 1;
  /// RowsInBlocks: [tokens, blockCount] i32 block ids, -1 for none.
  Value candidates;
  int64_t blockCount = 0;
};

/// What both kernels read: the host's sizes and the buffers.
struct Operands {
  int64_t k = 0;
  Selection selection;
  /// The cache rows any token may see (the host's bound over the ratio),
  /// and the rows a token's splits cover: those, or its candidate blocks'.
  Value keyRows, rows;
  Value splits, splitRows;
  Value tokens;
  Value picks;   // memref<?xKxi32>
  Value partial; // memref<?xi64>: [token, split, k] keys
  Value images;  // memref<?xi8>: [token] query images (plan.e4m3)
};

/// The head weights as the kernels read them. A step's weights are
/// weights_proj(x) * Di^-0.5 * Hi^-0.5: a product's bf16 part, widened and
/// scaled by a constant. The kernels compute that as they load a weight
/// (the same operations, so the same bits) instead of reading what a
/// kernel of its own wrote out. Weight (t, h) is `buffer[t, column + h]`,
/// rounded to bf16 where `roundsToBF16` (an f32 product's bf16 part),
/// widened to f32, times `scale` where there is one.
struct HeadWeights {
  /// The tensor read (the weights, or the product of their part) and its
  /// buffer where the kernels are built.
  Value tensor, buffer;
  int64_t column = 0;
  bool roundsToBF16 = false;
  std::optional<float> scale;
  /// The last op the kernels compute as they load (erased, with what fed
  /// it alone, once the scores are lowered); null when they compute none.
  Operation *takenIn = nullptr;

  Value load(cpu::LoopEmitter &e, Value token, Value head) const {
    Value at = column ? e.add(head, e.index(column)) : head;
    Value weight = memref::LoadOp::create(e.builder(), e.location(), buffer,
                                          ValueRange{token, at});
    if (roundsToBF16)
      weight = e.roundBF16(weight);
    else if (!weight.getType().isF32())
      weight = arith::ExtFOp::create(e.builder(), e.location(),
                                     e.builder().getF32Type(), weight);
    return scale ? e.mul(weight, e.f32(*scale)) : weight;
  }
};

/// The value every element of `tensor` holds, when it is an f32 splat of a
/// constant.
std::optional<float> splatConstantOf(Value tensor) {
  FloatAttr scalar;
  if (auto splat = tensor.getDefiningOp<tensor::SplatOp>();
      splat && matchPattern(splat.getInput(), m_Constant(&scalar)) &&
      scalar.getType().isF32())
    return scalar.getValue().convertToFloat();
  SplatElementsAttr dense;
  if (matchPattern(tensor, m_Constant(&dense)) &&
      dense.getElementType().isF32())
    return dense.getSplatValue<APFloat>().convertToFloat();
  return std::nullopt;
}

/// Whether one op reads `value`, besides queries of its shape.
bool readOnce(Value value) {
  return llvm::count_if(value.getUsers(), [](Operation *user) {
           return !isa<tensor::DimOp>(user);
         }) == 1;
}

/// How the kernels read `weights`: through the ops that scale and widen a
/// product's part (each read by the next alone), or as they are.
HeadWeights headWeightsOf(Value weights) {
  HeadWeights w;
  Value read = weights;
  if (auto mul = read.getDefiningOp<arith::MulFOp>();
      mul && readOnce(mul) && mul.getFastmath() == arith::FastMathFlags::none) {
    for (unsigned i = 0; i < 2 && !w.scale; ++i)
      if ((w.scale = splatConstantOf(mul->getOperand(1 - i)))) {
        read = mul->getOperand(i);
        w.takenIn = mul;
      }
  }
  if (auto widen = read.getDefiningOp<arith::ExtFOp>();
      widen && readOnce(widen) &&
      getElementTypeOrSelf(widen.getIn().getType()).isBF16()) {
    read = widen.getIn();
    if (!w.takenIn)
      w.takenIn = widen;
  }
  auto split = read.getDefiningOp<SplitColumnsOp>();
  w.tensor = read;
  if (!split)
    return w;
  w.column = firstColumnOf(read);
  w.tensor = split.getInput();
  w.roundsToBF16 = getElementTypeOrSelf(split.getInput().getType()).isF32() &&
                   getElementTypeOrSelf(read.getType()).isBF16();
  return w;
}

/// Writes the selection's k best of `token`: its rows, or, as split `split`
/// of several, its keys for the merge.
void writeBest(cpu::LoopEmitter &e, BlockSelect &select, const Operands &o,
               Value thread, Value token, Value splitSlot, Value asPicks) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  scf::ForOp::create(
      b, loc, thread, e.index(o.k), e.index(select.threadCount()), ValueRange{},
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

/// Dims of a key row in one 16-byte piece of its stored values.
int64_t dimsPerPiece(const SharedPlan &plan) {
  return kChunkBytes * plan.width / plan.row.valueBytes;
}

/// The dim a thread's quarter `quarter` of a packed key row holds at its
/// place `at` (both index values): the quarter is the row's 16-byte pieces
/// quarter, quarter + 4, ..., so that each load of a warp reads 64
/// contiguous bytes of eight rows.
Value dimOfQuarter(cpu::LoopEmitter &e, const SharedPlan &plan, Value quarter,
                   Value at) {
  int64_t piece = dimsPerPiece(plan);
  Value inPiece = e.rem(at, e.index(piece));
  Value quarterFirst = e.mul(quarter, e.index(piece));
  return e.add(
      e.add(e.mul(e.div(at, e.index(piece)), e.index(4 * piece)), quarterFirst),
      inPiece);
}

/// The place in a thread's quarter of a packed key row of the first value
/// of the bf16 pair in 16-byte chunk `chunk` of a query row (index), i.e. of
/// pair chunk % 2 of K step chunk / 2 in decodeKeyFragments's order; the
/// second is plan.pairStride() places further.
Value placeOfPair(cpu::LoopEmitter &e, const SharedPlan &plan, Value chunk) {
  if (plan.pairStride() == 1) {
    Value inStep = e.mul(e.rem(chunk, e.index(2)), e.index(2));
    return e.add(e.mul(e.div(chunk, e.index(2)), e.index(4)), inStep);
  }
  Value pairOfChunk = e.rem(chunk, e.index(2));
  Value inGroup =
      e.mul(e.rem(e.div(chunk, e.index(2)), e.index(2)), e.index(2));
  return e.add(e.add(e.mul(e.div(chunk, e.index(4)), e.index(8)), inGroup),
               pairOfChunk);
}

/// Copies the token's query tile (zero rows past the heads) for MMAs whose
/// A fragments hold packed keys: the pair at bytes 4c of 16-byte chunk
/// 2s + h of a row holds places placeOfPair of quarter c (dimOfQuarter), so
/// that lane c of each quad (see mmaBF16RegisterA) holds, over the K steps
/// s, the dims of the c-th quarter of a key row. The dot products are the
/// same sums of the same products. Neighbouring dims are 4-byte copies.
/// MXFP4's pairs are dims four apart: chunks 4g .. 4g + 3 of quarter c hold
/// the pairs (d, d + 4) of the eight dims from dimOfQuarter(c, 8g), which
/// one 16-byte load brings and four stores place.
void copyQueryForFragments(cpu::LoopEmitter &e, const SharedPlan &plan,
                           Value tile, Value queryAddress, Value token,
                           Value thread) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  int64_t width = plan.width, chunks = width / 8;
  // The tile's byte of the pair at place `quarter` of chunk `chunk` of
  // `head`'s row, and the address of dim `dim` of that row in the query.
  auto destination = [&](Value head, Value chunk, Value quarter) {
    Value inChunk = toI64(b, loc, e.mul(quarter, e.index(4)));
    return e.add(
        e.add(tile,
              toI64(b, loc, swizzledOffset(b, loc, head, chunk, width / 64))),
        inChunk);
  };
  auto source = [&](Value head, Value dim) {
    Value element = e.add(
        e.mul(e.add(e.mul(token, e.index(plan.heads)), head), e.index(width)),
        dim);
    return e.add(queryAddress, e.mul(toI64(b, loc, element), e.i64(2)));
  };
  if (plan.pairStride() == 1) {
    int64_t pairs = plan.paddedHeads * chunks * 4;
    for (int64_t i = 0; i < pairs / kThreads; ++i) {
      Value linear = e.add(thread, e.index(i * kThreads));
      Value head = e.div(linear, e.index(chunks * 4));
      Value chunk = e.rem(e.div(linear, e.index(4)), e.index(chunks));
      Value quarter = e.rem(linear, e.index(4));
      Value firstDim =
          dimOfQuarter(e, plan, quarter, placeOfPair(e, plan, chunk));
      Value real = e.cmp(IP::ult, head, e.index(plan.heads));
      Value safe = e.min(head, e.index(plan.heads - 1));
      Value from = source(safe, firstDim);
      Value to = destination(head, chunk, quarter);
      copyAsync4(b, loc, to, from, real);
    }
    return;
  }
  static_assert(kChunkBytes == 16);
  int64_t groups = chunks / 4;
  int64_t loads = plan.paddedHeads * groups * 4;
  int64_t rounds = llvm::divideCeil(loads, kThreads);
  Type i32 = b.getI32Type();
  // A thread's loads all in flight before its first store. A round past the
  // last load reads the last again and stores nothing.
  struct Round {
    Value inside, head, group, quarter, words;
  };
  SmallVector<Round> mine;
  for (int64_t i = 0; i < rounds; ++i) {
    Value linear = e.add(thread, e.index(i * kThreads));
    Round r;
    r.inside = e.cmp(IP::ult, linear, e.index(loads));
    linear = e.min(linear, e.index(loads - 1));
    r.head = e.div(linear, e.index(groups * 4));
    r.group = e.rem(e.div(linear, e.index(4)), e.index(groups));
    r.quarter = e.rem(linear, e.index(4));
    Value safe = e.min(r.head, e.index(plan.heads - 1));
    Value dim = dimOfQuarter(e, plan, r.quarter, e.mul(r.group, e.index(8)));
    Value from = source(safe, dim);
    r.words = loadGlobal(b, loc, from, VectorType::get({4}, i32), kChunkBytes);
    mine.push_back(r);
  }
  for (const Round &r : mine)
    e.ifThen(r.inside, [&] {
      Value real = e.cmp(IP::ult, r.head, e.index(plan.heads));
      Value w[4];
      for (int64_t j = 0; j < 4; ++j)
        w[j] = vector::ExtractOp::create(b, loc, r.words, j);
      Value low = e.i32(0xffff), high = e.i32(static_cast<int32_t>(0xffff0000));
      auto orI = [&](Value x, Value y) {
        return arith::OrIOp::create(b, loc, x, y).getResult();
      };
      auto andI = [&](Value x, Value mask) {
        return arith::AndIOp::create(b, loc, x, mask).getResult();
      };
      // Dims d and d + 4 for d = 0 .. 3 of the eight: words d / 2 and
      // d / 2 + 2, their low halves (even d) or high halves (odd d).
      for (int64_t d = 0; d < 4; ++d) {
        Value first = w[d / 2], second = w[d / 2 + 2];
        Value pair;
        if (d % 2 == 0) {
          Value upper = arith::ShLIOp::create(b, loc, second, e.i32(16));
          pair = orI(andI(first, low), upper);
        } else {
          Value upper = andI(second, high);
          pair = orI(arith::ShRUIOp::create(b, loc, first, e.i32(16)), upper);
        }
        Value chunk = e.add(e.mul(r.group, e.index(4)), e.index(d));
        Value to = destination(r.head, chunk, r.quarter);
        storeShared(b, loc, to, e.select(real, pair, e.i32(0)), 4);
      }
    });
}

/// The shares of a tile of packed keys: a thread's share is, for each of
/// its two fragment rows (16 warp + lane / 4, and 8 more), its quarter
/// (lane % 4, dimOfQuarter) of the row's values and the row's scale word.
/// In a stage, 16-byte piece c of row h's share of thread t sits at
/// ((h q + c) 128 + t) 16 (q pieces a quarter), the scale words at
/// stageScales + (h 128 + t) 4: a warp's accesses are contiguous.
struct KeyShares {
  cpu::LoopEmitter &e;
  const SharedPlan &plan;
  Value thread, warp, lane;

  int64_t pieces() const { return plan.row.valueBytes / 4 / kChunkBytes; }

  /// Issues this thread's copies of its share of the tile whose cache rows
  /// `cacheRow(row)` gives (an existing row even past the token's rows,
  /// whose scores are never offered) into `stage` (a shared address, i64).
  void copy(CacheRows &keys, Value keysAddress, Value stage,
            function_ref<Value(Value)> cacheRow) {
    OpBuilder &b = e.builder();
    Location loc = e.location();
    Value always = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
    Value own = toI64(b, loc, e.mul(thread, e.index(kChunkBytes)));
    Value quarter =
        toI64(b, loc, e.mul(e.rem(lane, e.index(4)), e.index(kChunkBytes)));
    for (int64_t half = 0; half < 2; ++half) {
      Value row =
          e.add(fragmentPlace(b, loc, warp, lane, 0).row, e.index(8 * half));
      Value global = cacheRow(row);
      Value values = e.add(
          e.add(keysAddress, toI64(b, loc, keys.valueOffset(global))), quarter);
      for (int64_t c = 0; c < pieces(); ++c) {
        Value from = e.add(values, e.i64(4 * c * kChunkBytes));
        copyAsync16(b, loc,
                    e.add(e.add(stage, own), e.i64((half * pieces() + c) *
                                                   kThreads * kChunkBytes)),
                    from, always);
      }
      Value scalesFrom =
          e.add(keysAddress, toI64(b, loc, keys.scaleOffset(global)));
      copyAsync4(b, loc,
                 e.add(e.add(stage, toI64(b, loc, e.mul(thread, e.index(4)))),
                       e.i64(plan.stageScales + half * kThreads * 4)),
                 scalesFrom, always);
    }
  }

  /// This thread's share in `stage`, once its copies have landed: the i32
  /// words of each row's quarter, then the row's scale word.
  SmallVector<Value> load(Value stage) {
    OpBuilder &b = e.builder();
    Location loc = e.location();
    Type chunk = VectorType::get({4}, b.getI32Type());
    Value own =
        e.add(stage, toI64(b, loc, e.mul(thread, e.index(kChunkBytes))));
    Value ownScale = e.add(stage, toI64(b, loc, e.mul(thread, e.index(4))));
    SmallVector<Value> words;
    for (int64_t half = 0; half < 2; ++half) {
      for (int64_t c = 0; c < pieces(); ++c) {
        Value piece = loadShared(
            b, loc,
            e.add(own, e.i64((half * pieces() + c) * kThreads * kChunkBytes)),
            chunk, kChunkBytes);
        for (int64_t w = 0; w < 4; ++w)
          words.push_back(vector::ExtractOp::create(b, loc, piece, w));
      }
      words.push_back(loadShared(
          b, loc,
          e.add(ownScale, e.i64(plan.stageScales + half * kThreads * 4)),
          b.getI32Type(), 4));
    }
    return words;
  }
};

/// The A fragments of a tile's K steps (four words each, in step order)
/// from a thread's share (KeyShares::load): eight values at a time decoded
/// to bf16 with the e2m1 block's or the row's ue8m0 scale (an fp8 row's
/// power-of-two f32 scale has it as its exponent byte); placeOfPair gives
/// the places of a quarter that step s's (row, 2c) and (row, 2c + 8) pairs
/// hold.
SmallVector<Value> decodeKeyFragments(cpu::LoopEmitter &e,
                                      const SharedPlan &plan,
                                      ArrayRef<Value> loaded, Value lane) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Type i32 = b.getI32Type(), i8 = b.getI8Type();
  bool fp4 = plan.row.kind == layout::RowKind::IndexMXFP4;
  int64_t groups = plan.width / 4 / 8;
  int64_t perRow = plan.row.valueBytes / 4 / 4 + 1;
  Value quarter = e.rem(lane, e.index(4));
  // decoded[half][group]: four words of bf16 pairs.
  SmallVector<SmallVector<Value>> decoded(2);
  for (int64_t half = 0; half < 2; ++half) {
    ArrayRef<Value> words = loaded.slice(half * perRow, perRow);
    Value scaleWord = words.back();
    for (int64_t g = 0; g < groups; ++g) {
      Value values;
      if (fp4) {
        // The scale byte of the block that holds the group's dims.
        Value block = e.div(dimOfQuarter(e, plan, quarter, e.index(8 * g)),
                            e.index(plan.row.scaleBlock));
        Value shift =
            arith::IndexCastOp::create(b, loc, i32, e.mul(block, e.index(8)));
        Value scale = arith::TruncIOp::create(
            b, loc, i8, arith::ShRUIOp::create(b, loc, scaleWord, shift));
        values = dequantizeE2M1x8(b, loc, words[g], scale);
      } else {
        Value scale = arith::TruncIOp::create(
            b, loc, i8, arith::ShRUIOp::create(b, loc, scaleWord, e.i32(23)));
        Value bytes = vector::FromElementsOp::create(
            b, loc, VectorType::get({2}, i32),
            ValueRange{words[2 * g], words[2 * g + 1]});
        values = dequantizeE4M3x8(b, loc, bytes, scale);
      }
      for (int64_t w = 0; w < 4; ++w)
        decoded[half].push_back(vector::ExtractOp::create(b, loc, values, w));
    }
  }
  // Step s takes words 2 (s % 2) and 2 (s % 2) + 1 of group s / 2
  // (placeOfPair).
  SmallVector<Value> fragments;
  for (int64_t step = 0; step < plan.width / kMmaK; ++step) {
    int64_t at = step / 2 * 4 + step % 2 * 2;
    fragments.append({decoded[0][at], decoded[1][at], decoded[0][at + 1],
                      decoded[1][at + 1]});
  }
  return fragments;
}

/// A tile's e4m3 A fragments (plan.e4m3) and each of the thread's two
/// rows' largest block scale (i32).
struct E4M3Fragments {
  SmallVector<Value> words;
  Value largest[2];
};

/// The e4m3 A fragments of a tile's k32 steps (four words each, in step
/// order) from a thread's share (KeyShares::load: each row's 16 bytes of
/// its block, the quarter `mine` selects from the row's scale word, then
/// that word). A block d binades below its row's largest decodes with table
/// d, e2m1 x 2^(kTopBinade - d) in e4m3 (zeros from kFarthestBlock on):
/// exact for every block within 14 binades of the largest. Word s of a
/// block's 16 bytes holds step s's values, nibbles 0-3 in the fragment's
/// first K half and 4-7 in its second (the query image's K order). Signs:
/// a permute in sign mode of the sign word (0x80 bytes) gives 0x80 for a
/// positive code and 0xFF for a negative one, whose bit 0 moves to bit 7.
E4M3Fragments decodeE4M3Fragments(cpu::LoopEmitter &e, const SharedPlan &plan,
                                  ArrayRef<Value> loaded, Value mine,
                                  Value tables, Value signWord) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Type i32 = b.getI32Type();
  auto constant = [&](uint32_t v) { return e.i32(static_cast<int32_t>(v)); };
  auto andI = [&](Value x, uint32_t mask) {
    return arith::AndIOp::create(b, loc, x, constant(mask)).getResult();
  };
  auto shr = [&](Value x, int64_t bits) {
    return arith::ShRUIOp::create(b, loc, x, e.i32(bits)).getResult();
  };
  auto withSign = [&](Value magnitude, Value signs) {
    return arith::OrIOp::create(
               b, loc, magnitude,
               andI(arith::ShLIOp::create(b, loc, signs, e.i32(7)),
                    0x80808080u))
        .getResult();
  };
  int64_t perRow = plan.row.valueBytes / 4 / 4 + 1;
  E4M3Fragments out;
  SmallVector<Value> decoded[2];
  for (int64_t half = 0; half < 2; ++half) {
    ArrayRef<Value> words = loaded.slice(half * perRow, perRow);
    Value scales = words.back();
    Value largest = andI(scales, 0xFF);
    for (int64_t byte = 1; byte < 4; ++byte)
      largest = e.max(largest, andI(shr(scales, 8 * byte), 0xFF));
    out.largest[half] = largest;
    Value own = selectBytes(b, loc, scales, e.i32(0), mine);
    Value table =
        e.max(e.add(e.sub(own, largest), e.i32(kFarthestBlock)), e.i32(0));
    Value address =
        e.add(tables, arith::ExtUIOp::create(b, loc, b.getI64Type(),
                                             e.mul(table, e.i32(8))));
    Value pool =
        loadShared(b, loc, address, VectorType::get({2}, i32), /*alignment=*/8);
    Value low = vector::ExtractOp::create(b, loc, pool, 0);
    Value high = vector::ExtractOp::create(b, loc, pool, 1);
    for (int64_t w = 0; w + 1 < perRow; ++w) {
      Value codes = words[w];
      Value magnitudes = andI(codes, 0x77777777u);
      for (int64_t part = 0; part < 2; ++part) {
        Value selector = part ? shr(magnitudes, 16) : magnitudes;
        Value signs = selectBytes(b, loc, signWord, signWord,
                                  part ? shr(codes, 16) : codes);
        decoded[half].push_back(
            withSign(selectBytes(b, loc, low, high, selector), signs));
      }
    }
  }
  for (int64_t step = 0; step < plan.width / 4 / 8; ++step)
    out.words.append({decoded[0][2 * step], decoded[1][2 * step],
                      decoded[0][2 * step + 1], decoded[1][2 * step + 1]});
  return out;
}

/// Writes the decode tables (decodeE4M3Fragments) and the sign word at
/// shared address `tables`: thread 2t + w the word w of table t.
void writeDecodeTables(cpu::LoopEmitter &e, Value tables, Value thread) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Type i32 = b.getI32Type();
  const float magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  Value table = e.div(thread, e.index(2));
  Value second = e.cmp(IP::eq, e.rem(thread, e.index(2)), e.index(1));
  // 2^(kTopBinade - d) for table d = kFarthestBlock - table.
  Value binade = arith::IndexCastOp::create(
      b, loc, i32, e.add(table, e.index(kTopBinade - kFarthestBlock + 127)));
  Value scale = arith::BitcastOp::create(
      b, loc, b.getF32Type(), arith::ShLIOp::create(b, loc, binade, e.i32(23)));
  Value word = e.i32(0);
  for (int64_t j = 0; j < 4; ++j) {
    Value magnitude =
        e.select(second, e.f32(magnitudes[4 + j]), e.f32(magnitudes[j]));
    Value code = arith::ExtUIOp::create(
        b, loc, i32,
        e.toE4M3Bits(
            e.roundToMinifloat(e.mul(magnitude, scale), 3, -6, num::kE4M3Max)));
    word = arith::OrIOp::create(
        b, loc, word, arith::ShLIOp::create(b, loc, code, e.i32(8 * j)));
  }
  Value offset = toI64(b, loc, e.mul(thread, e.index(4)));
  e.ifThen(e.cmp(IP::ult, thread, e.index(2 * kDecodeTables)),
           [&] { storeShared(b, loc, e.add(tables, offset), word, 4); });
  e.ifThen(e.cmp(IP::eq, thread, e.index(2 * kDecodeTables)), [&] {
    storeShared(b, loc, e.add(tables, e.i64(kSignWord)),
                e.i32(static_cast<int32_t>(0x80808080u)), 4);
  });
}

/// The head sum of a tile (plan.e4m3), issued and committed: relu(dot)
/// rounded to bf16, as the A fragments of m64n8k16 MMAs (an accumulator of
/// m64nN is the A of k16 steps over its columns), against the weight tile.
/// Returns the sums' accumulator (column 2 (lane % 4) of keys g and g + 8
/// in registers 0 and 2), then the A words, which must stay unchanged until
/// the MMAs are done.
SmallVector<Value> issueHeadSums(cpu::LoopEmitter &e, const SharedPlan &plan,
                                 Value dots, Value weightTile) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  SmallVector<Value> d = unpackAccumulator(b, loc, dots);
  SmallVector<Value> words;
  for (int64_t step = 0; step < plan.headSteps; ++step)
    for (int64_t pair = 0; pair < 4; ++pair) {
      int64_t r = 8 * step + 2 * pair;
      words.push_back(r < static_cast<int64_t>(d.size())
                          ? reluToBF16x2(b, loc, d[r], d[r + 1])
                          : e.i32(0));
    }
  words = settleAndFenceWords(b, loc, words);
  Value sums = unsetAccumulator(b, loc, 8);
  for (int64_t step = 0; step < plan.headSteps; ++step) {
    Value desc =
        matrixDescriptor(b, loc,
                         e.add(weightTile, e.i64(step / 4 * kSwizzleAtomBytes +
                                                 step % 4 * 2 * kMmaK)),
                         kChunkBytes, plan.weightAtoms * kSwizzleAtomBytes);
    sums = mmaBF16RegisterA(b, loc, ArrayRef<Value>(words).slice(4 * step, 4),
                            desc, sums, 8, /*accumulate=*/step > 0);
  }
  mmaCommit(b, loc);
  SmallVector<Value> out = {sums};
  out.append(words);
  return out;
}

/// The offset of K byte `k` (index) of row `row` in a K-major tile of
/// rows `atoms` swizzle atoms wide.
Value swizzledByte(cpu::LoopEmitter &e, Value row, Value k, int64_t atoms) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Value inChunk = e.rem(k, e.index(kChunkBytes));
  return e.add(
      swizzledOffset(b, loc, row, e.div(k, e.index(kChunkBytes)), atoms),
      inChunk);
}

/// Where token `token`'s query image starts in `images`.
Value imageOf(cpu::LoopEmitter &e, const SharedPlan &plan, Value images,
              Value token) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Value offset = e.mul(toI64(b, loc, token), e.i64(plan.imageBytes));
  return e.add(addressOf(b, loc, images), offset);
}

/// The e4m3 image of each token's query (plan.e4m3), a block per token and
/// a thread per 16 bytes of a head's row (16 lanes a head: the chain of a
/// token's quantization is one chunk long). A head's values are scaled by
/// 2^-u, which brings its largest into [4, 8): exact in e4m3 for
/// fp4-simulated heads whose blocks' scales span at most 8 binades (others
/// round as e4m3 rounds). K byte 32 s + 16 h + 4 c + j of a row holds dim
/// 32 c + 8 s + 4 h + j, the order of the keys' A fragments (a thread's
/// quarter c of a key row is its scale block c). The weight tile, 8 rows
/// of bf16 along K for the head sum's MMAs, holds w 2^u in every row, 0 past
/// the heads, and NaN for a head whose largest value is not finite, so that
/// none of the token's scores is picked.
void buildQueryImages(OpBuilder &b, Location loc, const SharedPlan &plan,
                      const Operands &o, Value query,
                      const HeadWeights &weights, Value images,
                      Operation *func) {
  cpu::LoopEmitter e(b, loc);
  mlir::gpu::LaunchOp launch = createLaunch(b, loc, kernelName(func, "indexer"),
                                            o.tokens, kImageThreads);
  Value thread = launch.getThreadIds().x;
  Value token = launch.getBlockIds().x;
  Type i32 = b.getI32Type();
  Value queryAddress = addressOf(b, loc, query);
  Value image = imageOf(e, plan, images, token);
  constexpr int64_t kValuesPerChunk = kChunkBytes / 2;
  int64_t chunksPerHead = plan.width / kValuesPerChunk;
  int64_t chunksPerHalf = chunksPerHead / 2;
  static_assert(kE4M3Width / kValuesPerChunk <= kWarpLanes);
  int64_t chunks = plan.paddedHeads * chunksPerHead;
  int64_t passes = llvm::divideCeil(chunks, kImageThreads);
  for (int64_t pass = 0; pass < passes; ++pass) {
    Value linear = e.add(thread, e.index(pass * kImageThreads));
    Value head = arith::DivUIOp::create(b, loc, linear, e.index(chunksPerHead));
    Value chunk =
        arith::RemUIOp::create(b, loc, linear, e.index(chunksPerHead));
    Value second =
        arith::DivUIOp::create(b, loc, chunk, e.index(chunksPerHalf));
    Value chunkOfHalf =
        arith::RemUIOp::create(b, loc, chunk, e.index(chunksPerHalf));
    Value real = e.cmp(IP::ult, head, e.index(plan.heads));
    Value safe = e.min(head, e.index(plan.heads - 1));
    Value inRow = e.mul(chunk, e.index(kValuesPerChunk));
    Value element = e.add(e.mul(e.add(e.mul(token, e.index(plan.heads)), safe),
                                e.index(plan.width)),
                          inRow);
    Value from = e.add(queryAddress, e.mul(toI64(b, loc, element), e.i64(2)));
    Value words =
        loadGlobal(b, loc, from, VectorType::get({4}, i32), kChunkBytes);
    SmallVector<Value> values;
    for (int64_t w = 0; w < 4; ++w) {
      Value word = vector::ExtractOp::create(b, loc, words, w);
      Value low = arith::ShLIOp::create(b, loc, word, e.i32(16));
      Value high = arith::AndIOp::create(
          b, loc, word, e.i32(static_cast<int32_t>(0xFFFF0000u)));
      for (Value bits : {low, high})
        values.push_back(e.select(
            real, arith::BitcastOp::create(b, loc, b.getF32Type(), bits),
            e.f32(0.0)));
    }
    Value most = e.f32(0.0);
    for (Value v : values)
      most = e.max(most, e.abs(v));
    most = reduceLanes(b, loc, most, chunksPerHead, Combine::Max);
    Value finite = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT,
                                         most, e.f32(INFINITY));
    Value exponent = arith::AndIOp::create(
        b, loc,
        arith::ShRUIOp::create(
            b, loc, arith::BitcastOp::create(b, loc, i32, most), e.i32(23)),
        e.i32(0xFF));
    // u = the largest's binade - 2, within the range where 2^-u and 2^u
    // are normal f32.
    Value clamped =
        e.min(e.max(e.sub(exponent, e.i32(129)), e.i32(-124)), e.i32(125));
    Value u = e.select(arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                             most, e.f32(0.0)),
                       clamped, e.i32(0));
    auto powerOfTwo = [&](Value binade) {
      return arith::BitcastOp::create(
          b, loc, b.getF32Type(),
          arith::ShLIOp::create(b, loc, e.add(binade, e.i32(127)), e.i32(23)));
    };
    Value down = powerOfTwo(e.sub(e.i32(0), u));
    Value inside = e.cmp(IP::ult, linear, e.index(chunks));
    // This chunk's two groups of four dims of its half: groups 2c and
    // 2c + 1 of the half's 16.
    for (int64_t mine = 0; mine < 2; ++mine) {
      Value word = e.i32(0);
      for (int64_t j = 0; j < 4; ++j) {
        Value code = arith::ExtUIOp::create(
            b, loc, i32,
            e.toE4M3Bits(e.roundToMinifloat(e.mul(values[4 * mine + j], down),
                                            3, -6, num::kE4M3Max)));
        word = arith::OrIOp::create(
            b, loc, word, arith::ShLIOp::create(b, loc, code, e.i32(8 * j)));
      }
      // Dims 64 second + 4 group + j: block 2 second + group / 8, word
      // group % 8 / 2 of the block, half group % 2 of the word; with group
      // = 2 chunkOfHalf + mine: 32 (chunkOfHalf % 4) + 16 mine + 4
      // (chunkOfHalf / 4).
      Value group = e.mul(
          arith::DivUIOp::create(b, loc, chunkOfHalf, e.index(4)), e.index(4));
      Value fixed = e.add(
          e.add(e.mul(arith::RemUIOp::create(b, loc, chunkOfHalf, e.index(4)),
                      e.index(32)),
                e.index(16 * mine)),
          group);
      Value k = e.add(e.mul(second, e.index(8)), fixed);
      e.ifThen(inside, [&] {
        storeGlobal(b, loc,
                    e.add(image, toI64(b, loc, swizzledByte(e, head, k, 1))),
                    word, 4);
      });
    }
    // The weight of this head (the first half's first chunk) or a zero
    // past the padded heads (the second half's).
    Value loaded = weights.load(e, token, safe);
    Value weight = e.select(real, loaded, e.f32(0.0));
    Value scaled = e.mul(weight, powerOfTwo(u));
    weight = e.select(finite, scaled, e.f32(NAN));
    Value weightBits = arith::TruncIOp::create(
        b, loc, b.getI16Type(),
        arith::ShRUIOp::create(
            b, loc, arith::BitcastOp::create(b, loc, i32, e.roundBF16(weight)),
            e.i32(16)));
    Value first = e.cmp(IP::eq, second, e.index(0));
    Value column =
        e.select(first, head, e.add(head, e.index(plan.paddedHeads)));
    weightBits =
        e.select(first, weightBits,
                 arith::ConstantOp::create(b, loc, b.getI16IntegerAttr(0)));
    Value stepped = e.cmp(IP::ult, column, e.index(plan.headSteps * kMmaK));
    Value written = arith::AndIOp::create(
        b, loc,
        arith::AndIOp::create(b, loc, inside,
                              e.cmp(IP::eq, chunkOfHalf, e.index(0))),
        stepped);
    Value k = e.mul(column, e.index(2));
    e.ifThen(written, [&] {
      for (int64_t n = 0; n < 8; ++n)
        storeGlobal(b, loc,
                    e.add(image, toI64(b, loc,
                                       e.add(e.index(plan.weightTile),
                                             swizzledByte(e, e.index(n), k,
                                                          plan.weightAtoms)))),
                    weightBits, 2);
    });
  }
}

/// The scoring kernel: grid tokens x splits.
mlir::gpu::LaunchOp buildScores(OpBuilder &b, Location loc,
                                CacheIndexerScoreOp op, const SharedPlan &plan,
                                ArrayRef<Operands> runs, Value query,
                                const HeadWeights &weights, Value positions,
                                Value bases, Value keyBytes, Operation *func) {
  cpu::LoopEmitter e(b, loc);
  // The first selection's rows are the run's; a second one (plan.blockK)
  // picks blocks of the same rows.
  const Operands &o = runs.front();
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
  SmallVector<std::unique_ptr<BlockSelect>, 2> selects;
  selects.push_back(std::make_unique<BlockSelect>(
      b, loc, shared, e.add(pad, e.index(plan.select)), thread, o.k,
      plan.incoming(), plan.capacity));
  if (plan.blockK)
    selects.push_back(std::make_unique<BlockSelect>(
        b, loc, shared, e.add(pad, e.index(plan.blockSelect)), thread,
        plan.blockK, plan.blockIncoming(), plan.blockCapacity));
  for (auto &select : selects)
    select->start();
  auto makeRoom = [&] {
    for (auto &select : selects)
      select->makeRoom();
  };

  // This block's rows: [begin, end) of the token's (its visible rows, or
  // its candidate blocks' rows).
  int64_t ratio = op.getRatio();
  const Selection &selection = o.selection;
  bool inBlocks = selection.kind == Selection::Kind::RowsInBlocks;
  Value position = e.loadIndex(positions, {token});
  Value visible =
      e.min(arith::DivUIOp::create(b, loc, e.add(position, e.index(1)),
                                   e.index(ratio)),
            o.keyRows);
  Value begin = e.mul(split, o.splitRows);
  Value end = e.max(
      e.min(e.add(begin, o.splitRows), inBlocks ? o.rows : visible), begin);
  // The cache row of the token's row `v` in [begin, end) and whether it
  // exists: v itself, or row v % size of the (v / size)-th candidate block
  // (none for -1; not past the rows the token sees).
  auto rowAt = [&](Value v) -> std::pair<Value, Value> {
    Value inside = e.cmp(IP::ult, v, end);
    if (!inBlocks)
      return {v, inside};
    Value size = e.index(selection.blockSize);
    Value slot = e.min(arith::DivUIOp::create(b, loc, v, size),
                       e.index(selection.blockCount - 1));
    Value id = memref::LoadOp::create(b, loc, selection.candidates,
                                      ValueRange{token, slot});
    Value named = e.cmp(IP::sge, id, e.i32(0));
    Value inBlock = arith::RemUIOp::create(b, loc, v, size);
    Value row = e.add(e.mul(toIndex(b, loc, id), size), inBlock);
    Value seen = e.cmp(IP::ult, row, visible);
    Value real = arith::AndIOp::create(
        b, loc, arith::AndIOp::create(b, loc, inside, named), seen);
    return {row, real};
  };
  // The first row of key block `keyBlock`.
  auto firstRow = [&](Value keyBlock) {
    return e.add(begin, e.mul(keyBlock, e.index(kKeysPerBlock)));
  };
  Value keyBlocks = arith::CeilDivUIOp::create(
      b, loc, arith::SubIOp::create(b, loc, end, begin),
      e.index(kKeysPerBlock));
  Value base = e.loadIndex(bases, {token});

  // The weights of this thread's heads (0 past the head count).
  int64_t n = plan.paddedHeads;
  SmallVector<Value> weightOf(n / 2);
  for (int64_t r = 0; r < n / 2 && !plan.e4m3; ++r) {
    if (r % 4 >= 2) {
      weightOf[r] = weightOf[r - 2];
      continue;
    }
    Value column = fragmentPlace(b, loc, warp, lane, r).column;
    Value real = e.cmp(IP::ult, column, e.index(plan.heads));
    Value safe = e.min(column, e.index(plan.heads - 1));
    Value loaded = weights.load(e, token, safe);
    weightOf[r] = e.select(real, loaded, e.f32(0.0));
  }

  // Each key's score from the registers of its dots: a thread holds two
  // keys' rows of the fragment, a quarter of their heads each, summed in
  // the order `v4a.indexer_score` documents (a product and a sum, each
  // rounded: nothing here allows their contraction); then offered (a
  // round of offers ends with makeRoom()).
  auto offerTotals = [&](BlockSelect &select, ArrayRef<Value> totals,
                         Value keyBlock) {
    // Lane 4g offers key g of its warp's rows, lane 4g + 1 key g + 8.
    Value quarter = e.rem(lane, e.index(4));
    Value second = e.cmp(IP::eq, quarter, e.index(1));
    Value total = e.select(second, totals[1], totals[0]);
    Value half = e.select(second, e.index(8), e.index(0));
    Value row = e.add(fragmentPlace(b, loc, warp, lane, 0).row, half);
    auto [j, exists] = rowAt(e.add(firstRow(keyBlock), row));
    Value counted = arith::AndIOp::create(b, loc, exists, isFinite(e, total));
    Value real = arith::AndIOp::create(
        b, loc, e.cmp(IP::ult, quarter, e.index(2)), counted);
    select.offer(BlockSelect::rankKey(b, loc, total, j), real);
  };
  // Selection::Kind::Blocks: a block of 8 rows is a warp's first or second
  // eight (its lanes' first or second total), one of 16 a warp's sixteen.
  // Each block's largest score over its rows that exist, NaN passed over
  // (a block of none is not offered), from lane 0 (and lane 1, the second
  // eight).
  auto offerBlockMaxima = [&](BlockSelect &select, int64_t size,
                              ArrayRef<Value> totals, Value keyBlock) {
    Value warpRows = e.mul(warp, e.index(16));
    Value warpFirst = e.add(firstRow(keyBlock), warpRows);
    Value mine =
        e.add(warpFirst, arith::DivUIOp::create(b, loc, lane, e.index(4)));
    Value largest[2];
    for (int64_t half = 0; half < 2; ++half) {
      Value exists = rowAt(e.add(mine, e.index(8 * half))).second;
      Value kept = arith::AndIOp::create(
          b, loc, exists,
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::ORD, totals[half],
                                totals[half]));
      largest[half] = e.select(kept, totals[half], e.f32(-INFINITY));
      for (int64_t mask = 4; mask < kWarpLanes; mask *= 2)
        largest[half] = combine(b, loc, Combine::Max, largest[half],
                                shuffleXor(b, loc, largest[half], mask));
    }
    if (size == 16)
      largest[0] = largest[1] =
          combine(b, loc, Combine::Max, largest[0], largest[1]);
    Value second = e.cmp(IP::eq, lane, e.index(1));
    Value best = e.select(second, largest[1], largest[0]);
    Value id = arith::DivUIOp::create(
        b, loc, e.add(warpFirst, e.select(second, e.index(8), e.index(0))),
        e.index(size));
    Value offers = e.cmp(IP::ult, lane, e.index(size == 8 ? 2 : 1));
    Value offered = arith::AndIOp::create(b, loc, offers, isFinite(e, best));
    select.offer(BlockSelect::rankKey(b, loc, best, id), offered);
  };
  auto offer = [&](ArrayRef<Value> totals, Value keyBlock) {
    for (auto [select, run] : llvm::zip(selects, runs)) {
      if (run.selection.kind == Selection::Kind::Blocks)
        offerBlockMaxima(*select, run.selection.blockSize, totals, keyBlock);
      else
        offerTotals(*select, totals, keyBlock);
    }
  };
  auto offerScores = [&](Value dots, Value keyBlock) {
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
    offer(totals, keyBlock);
  };
  // plan.e4m3: the head sums of keys g and g + 8, in units of
  // 2^(largest block scale - 127 - kTopBinade) of their rows.
  auto offerHeadSums = [&](Value sums, ValueRange largest, Value keyBlock) {
    SmallVector<Value> d = unpackAccumulator(b, loc, sums);
    Value totals[2];
    for (int64_t half = 0; half < 2; ++half) {
      Value unit = arith::BitcastOp::create(
          b, loc, b.getF32Type(),
          arith::ShLIOp::create(b, loc, largest[half], e.i32(23)));
      totals[half] =
          e.mul(e.mul(d[2 * half], e.f32(std::ldexp(1.0, -kTopBinade))), unit);
    }
    offer(totals, keyBlock);
  };

  Value queryAddress = addressOf(b, loc, query);
  Value queryTile = e.add(sharedBase, e.i64(plan.query));
  CacheRows keys(e, keyBytes, op.getKeys().getType());
  Value keysAddress = addressOf(b, loc, keyBytes);
  // Row `row` of the block that starts at `first`: its cache row (the
  // token's first past the end, where nothing is read) and whether it
  // exists.
  auto keyRow = [&](Value first, Value row) -> std::pair<Value, Value> {
    auto [j, real] = rowAt(e.add(first, row));
    return {e.add(base, e.select(real, j, e.index(0))), real};
  };
  // The query tile's rows: bf16, or e4m3 (plan.e4m3) one atom wide.
  int64_t queryRowBytes = plan.width * (plan.e4m3 ? 1 : 2);
  int64_t groupStride = queryRowBytes / kSwizzleRowBytes * kSwizzleAtomBytes;
  auto kStep = [&](int64_t step) {
    return step / 4 * kSwizzleAtomBytes + step % 4 * 2 * kMmaK;
  };
  // Where stage `stage` of the key ring starts.
  auto stageAddress = [&](Value stage) {
    Value offset = e.mul(toI64(b, loc, stage), e.i64(plan.stageBytes));
    return e.add(e.add(sharedBase, e.i64(plan.firstStage)), offset);
  };

  if (plan.packed()) {
    // The query tile in the fragments' K order (e4m3: the token's image,
    // and the decode tables); a ring of stages into which each thread
    // copies its share of the keys and from which it loads them back, so
    // that only its own copies are waited for.
    Value tables, signWord, mine;
    if (plan.e4m3) {
      Value always = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
      Value image = imageOf(e, plan, o.images, token);
      int64_t chunks = plan.imageBytes / kChunkBytes;
      int64_t passes = llvm::divideCeil(chunks, kThreads);
      for (int64_t pass = 0; pass < passes; ++pass) {
        Value chunk = e.add(thread, e.index(pass * kThreads));
        Value offset = toI64(b, loc, e.mul(chunk, e.index(kChunkBytes)));
        e.ifThen(e.cmp(IP::ult, chunk, e.index(chunks)), [&] {
          Value from = e.add(image, offset);
          copyAsync16(b, loc, e.add(queryTile, offset), from, always);
        });
      }
      tables = e.add(sharedBase, e.i64(plan.decodeTables));
      writeDecodeTables(e, tables, thread);
    } else {
      copyQueryForFragments(e, plan, queryTile, queryAddress, token, thread);
    }
    commitCopies(b, loc);
    waitCopies(b, loc, 0);
    fenceSharedForMma(b, loc);
    mlir::gpu::BarrierOp::create(b, loc);
    if (plan.e4m3) {
      // Read back, so that it lives in a register (a constant operand of a
      // permute would be moved into one at every use).
      signWord = loadShared(b, loc, e.add(tables, e.i64(kSignWord)),
                            b.getI32Type(), 4);
      // prmt's selector of byte `lane % 4` of a scale word, zeros above.
      mine = arith::OrIOp::create(
          b, loc, e.i32(0x4440),
          arith::IndexCastOp::create(b, loc, b.getI32Type(),
                                     e.rem(lane, e.index(4))));
    }
    KeyShares shares{e, plan, thread, warp, lane};
    auto stageOf = [&](Value keyBlock) {
      return arith::RemUIOp::create(b, loc, keyBlock, e.index(plan.stages))
          .getResult();
    };
    auto copyKeys = [&](Value keyBlock) {
      Value first = firstRow(keyBlock);
      shares.copy(keys, keysAddress, stageAddress(stageOf(keyBlock)),
                  [&](Value row) { return keyRow(first, row).first; });
    };
    // A tile's MMAs from its share in its stage (landed): the fragments,
    // which must stay unchanged until the MMAs are done, and the
    // accumulator they fill. (Tiles past the token's last are scored on
    // whatever their stage holds, never offered.)
    auto issueMmas = [&](ArrayRef<Value> loaded) {
      SmallVector<Value> words, largest;
      if (plan.e4m3) {
        E4M3Fragments decoded =
            decodeE4M3Fragments(e, plan, loaded, mine, tables, signWord);
        words = std::move(decoded.words);
        largest = {decoded.largest[0], decoded.largest[1]};
      } else {
        words = decodeKeyFragments(e, plan, loaded, lane);
      }
      SmallVector<Value> fragments = settleAndFenceWords(b, loc, words);
      Value dots = unsetAccumulator(b, loc, n);
      // A K step is 32 bytes of a query row either way.
      int64_t steps = plan.width / (plan.e4m3 ? kE4M3StepBytes : kMmaK);
      for (int64_t step = 0; step < steps; ++step) {
        Value bDesc =
            matrixDescriptor(b, loc, e.add(queryTile, e.i64(kStep(step))),
                             kChunkBytes, groupStride);
        ArrayRef<Value> a = ArrayRef<Value>(fragments).slice(4 * step, 4);
        dots = plan.e4m3 ? mmaE4M3RegisterA(b, loc, a, bDesc, dots, n,
                                            /*accumulate=*/step > 0)
                         : mmaBF16RegisterA(b, loc, a, bDesc, dots, n,
                                            /*accumulate=*/step > 0);
      }
      mmaCommit(b, loc);
      SmallVector<Value> carried = {dots};
      carried.append(fragments);
      carried.append(largest);
      return carried;
    };
    // A group of copies per tile, the ring's first `stages` tiles ahead.
    for (int64_t t = 0; t < plan.stages; ++t) {
      e.ifThen(e.cmp(IP::ult, e.index(t), keyBlocks),
               [&] { copyKeys(e.index(t)); });
      commitCopies(b, loc);
    }
    waitCopies(b, loc, plan.stages - 1);
    SmallVector<Value> firstInFlight =
        issueMmas(shares.load(stageAddress(e.index(0))));
    // Tile i + 1's MMAs run while tile i's scores are offered; `inFlight`
    // holds tile i's accumulator and fragments. `checksRoom`: whether
    // tile i + 1 can be a multiple of tilesPerCheck.
    auto offerTile = [&](Value keyBlock, ValueRange inFlight, bool checksRoom) {
      // Into the stage of tile i, whose share is in registers.
      Value ahead = e.add(keyBlock, e.index(plan.stages));
      e.ifThen(e.cmp(IP::ult, ahead, keyBlocks), [&] { copyKeys(ahead); });
      commitCopies(b, loc);
      waitCopies(b, loc, plan.stages - 1);
      Value next = e.add(keyBlock, e.index(1));
      SmallVector<Value> loaded = shares.load(stageAddress(stageOf(next)));
      mmaWait(b, loc, 0);
      keepUntilHere(b, loc, inFlight.drop_front());
      SmallVector<Value> issued;
      if (plan.e4m3) {
        // Tile i's head sums, then tile i + 1's dot products: the sums are
        // the older group.
        SmallVector<Value> headSums =
            issueHeadSums(e, plan, inFlight.front(),
                          e.add(queryTile, e.i64(plan.weightTile)));
        issued = issueMmas(loaded);
        mmaWait(b, loc, 1);
        keepUntilHere(b, loc, ArrayRef<Value>(headSums).drop_front());
        offerHeadSums(headSums.front(), inFlight.take_back(2), keyBlock);
      } else {
        issued = issueMmas(loaded);
        offerScores(inFlight.front(), keyBlock);
      }
      if (checksRoom)
        e.ifThen(
            e.cmp(IP::eq, e.rem(next, e.index(plan.tilesPerCheck)), e.index(0)),
            makeRoom);
      return issued;
    };
    // Two tiles a trip, so that each accumulator is written where the one
    // before it was read, with no copy between (a copy of an accumulator
    // in flight would wait for its MMAs). With an odd count the last trip's
    // second tile is past the end: its offers are invalid. Only after the
    // second can the tiles offered be a multiple of an even tilesPerCheck.
    static_assert(kPackedTilesPerCheck % 2 == 0);
    Value pairs = arith::CeilDivUIOp::create(b, loc, keyBlocks, e.index(2));
    auto loop = scf::ForOp::create(b, loc, e.index(0), pairs, e.index(1),
                                   firstInFlight);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value evenTile = e.mul(loop.getInductionVar(), e.index(2));
    SmallVector<Value> oddInFlight =
        offerTile(evenTile, loop.getRegionIterArgs(), /*checksRoom=*/false);
    scf::YieldOp::create(b, loc,
                         offerTile(e.add(evenTile, e.index(1)), oddInFlight,
                                   /*checksRoom=*/true));
    b.setInsertionPointAfter(loop);
    mmaWait(b, loc, 0);
    waitCopies(b, loc, 0);
  } else {
    // The query tile, and a ring of key stages.
    int64_t rowChunks = plan.width * 2 / kChunkBytes;
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
    auto copyKeys = [&](Value keyBlock, Value stage) {
      Value first = firstRow(keyBlock);
      copyTileAsync(
          b, loc, stageAddress(stage), kKeysPerBlock, rowChunks, kThreads,
          thread,
          [&](Value row) -> std::pair<Value, Value> {
            auto [global, real] = keyRow(first, row);
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
    auto loop = scf::ForOp::create(b, loc, e.index(0), keyBlocks, e.index(1));
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
    offerScores(dots, keyBlock);
    makeRoom();
    b.setInsertionPointAfter(loop);
    waitCopies(b, loc, 0);
  }
  Value single = e.cmp(IP::eq, o.splits, e.index(1));
  for (auto [select, run] : llvm::zip(selects, runs)) {
    select->finish();
    writeBest(e, *select, run, thread, token, block, single);
  }
  return launch;
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
  Value fewLists = e.select(e.cmp(IP::ule, o.splits, e.index(kRankMergeLists)),
                            o.tokens, e.index(0));
  Value blocks =
      e.select(e.cmp(IP::ugt, o.splits, e.index(1)), fewLists, e.index(0));
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
  Value listsOffset = e.mul(toI64(b, loc, first), e.i64(8));
  Value listsAddress = e.add(addressOf(b, loc, o.partial), listsOffset);
  Value always = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
  scf::ForOp::create(
      b, loc, thread, count, e.index(kRankMergeThreads), ValueRange{},
      [&](OpBuilder &, Location, Value i, ValueRange) {
        Value bytes = e.mul(toI64(b, loc, i), e.i64(8));
        Value from = e.add(listsAddress, bytes);
        copyAsync8(b, loc, e.add(sharedAddress, bytes), from, always);
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
  for (int64_t list = 0; list < kRankMergeLists; ++list) {
    Value above = keysAbove(e.index(list), zero);
    kept = e.add(kept, e.select(e.cmp(IP::ult, e.index(list), o.splits), above,
                                e.index(0)));
  }
  scf::ForOp::create(
      b, loc, thread, count, e.index(kRankMergeThreads), ValueRange{},
      [&](OpBuilder &, Location, Value i, ValueRange) {
        Value key = memref::LoadOp::create(b, loc, keys, ValueRange{i});
        Value own = arith::DivUIOp::create(b, loc, i, e.index(o.k));
        Value rank = arith::RemUIOp::create(b, loc, i, e.index(o.k));
        for (int64_t list = 0; list < kRankMergeLists; ++list) {
          Value notOwn = e.cmp(IP::ne, e.index(list), own);
          Value other = arith::AndIOp::create(
              b, loc, e.cmp(IP::ult, e.index(list), o.splits), notOwn);
          rank = e.add(
              rank, e.select(other, keysAbove(e.index(list), key), e.index(0)));
        }
        Value ranked = e.cmp(IP::ult, rank, e.index(o.k));
        Value pick =
            arith::AndIOp::create(b, loc, e.cmp(IP::ne, key, zero), ranked);
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
  return BlockSelect::sharedBytes(k, kMergeThreads * kMergeKeysPerThread,
                                  /*room=*/0, kMergeThreads) +
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
  int64_t selectBytes =
      BlockSelect::sharedBytes(o.k, incoming, /*room=*/0, kMergeThreads);
  BlockSelect select(b, loc, shared, pad, thread, o.k, incoming, /*room=*/0,
                     kMergeThreads);
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

int64_t indexerTransientBytes(int64_t tokens, int64_t heads, int64_t width,
                              int64_t k, layout::RowKind keys, bool e4m3) {
  int64_t bytes = indexerSplitListBytes(tokens, k);
  std::optional<layout::RowLayout> row = layout::describeRow(keys, width);
  std::optional<SharedPlan> plan =
      row ? planShared(heads, width, k, *row, e4m3) : std::nullopt;
  if (plan && plan->e4m3)
    bytes += tokens * plan->imageBytes;
  return bytes;
}

int64_t indexerSourceTransientBytes(int64_t tokens, int64_t heads,
                                    int64_t width, int64_t k, int64_t blockK,
                                    int64_t blockSize, layout::RowKind keys,
                                    bool e4m3) {
  std::optional<layout::RowLayout> row = layout::describeRow(keys, width);
  std::optional<SharedPlan> fused =
      row ? planShared(heads, width, k, *row, e4m3, blockK, blockSize)
          : std::nullopt;
  if (!fused)
    return indexerTransientBytes(tokens, heads, width, k, keys, e4m3) +
           indexerTransientBytes(tokens, heads, width, blockK, keys, e4m3);
  int64_t bytes =
      indexerSplitListBytes(tokens, k) + indexerSplitListBytes(tokens, blockK);
  if (fused->e4m3)
    bytes += tokens * fused->imageBytes;
  return bytes;
}

namespace {

/// The k of a selection of the scores, and what it selects; none for a
/// user the family does not take.
std::optional<std::pair<int64_t, Selection>> selectionOf(Operation *user) {
  Selection selection;
  if (auto blocks = dyn_cast<BlockTopKOp>(user)) {
    selection.kind = Selection::Kind::Blocks;
    selection.blockSize = static_cast<int64_t>(blocks.getBlockSize());
    return std::make_pair(static_cast<int64_t>(blocks.getNumBlocks()),
                          selection);
  }
  auto topk = dyn_cast<TopKOp>(user);
  if (!topk)
    return std::nullopt;
  if (Value candidates = topk.getCandidates()) {
    auto type = cast<RankedTensorType>(candidates.getType());
    std::optional<uint64_t> size = topk.getCandidateBlockSize();
    if (!size || ShapedType::isDynamic(type.getDimSize(1)) ||
        type.getDimSize(1) < 1)
      return std::nullopt;
    selection.kind = Selection::Kind::RowsInBlocks;
    selection.blockSize = static_cast<int64_t>(*size);
    selection.blockCount = type.getDimSize(1);
  }
  return std::make_pair(static_cast<int64_t>(topk.getK()), selection);
}

} // namespace

SmallVector<Operation *> coveredSelections(CacheIndexerScoreOp scores) {
  auto query = cast<RankedTensorType>(scores.getQuery().getType());
  std::optional<layout::RowLayout> row = keyRowsOf(scores.getKeys().getType());
  if (!query.getElementType().isBF16() || !row)
    return {};
  int64_t heads = query.getDimSize(1), width = query.getDimSize(2);
  if (ShapedType::isDynamic(heads) || ShapedType::isDynamic(width))
    return {};
  // All or none: one user left to the loop path needs every score stored.
  SmallVector<Operation *> users(scores.getScores().getUsers());
  // In program order, so that the kernels' names follow it.
  if (llvm::all_of(users, [&](Operation *user) {
        return user->getBlock() == users.front()->getBlock();
      }))
    llvm::sort(users, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
  for (Operation *user : users) {
    auto selection = selectionOf(user);
    if (!selection || !planShared(heads, width, selection->first, *row))
      return {};
  }
  return users;
}

bool takesE4M3Keys(CacheIndexerScoreOp scores) {
  std::optional<layout::RowLayout> row = keyRowsOf(scores.getKeys().getType());
  return row && multipliesAsE4M3(*row);
}

namespace {

/// One run of the family: one scoring kernel for the selections of `run`
/// (one, or a candidate source's rows and blocks), its merges, and each
/// selection's picks in place of its op. Inserted before the run's first
/// op.
void lowerRun(RewriterBase &rewriter, CacheIndexerScoreOp op,
              ArrayRef<Operation *> run, const SharedPlan &plan,
              HeadWeights weights) {
  Location loc = op.getLoc();
  OpBuilder &b = rewriter;
  b.setInsertionPoint(run.front());
  cpu::LoopEmitter e(b, loc);
  SmallVector<Operands, 2> runs(run.size());
  for (auto [o, topk] : llvm::zip(runs, run)) {
    std::tie(o.k, o.selection) = *selectionOf(topk);
    if (o.selection.kind == Selection::Kind::RowsInBlocks)
      o.selection.candidates = e.buffer(cast<TopKOp>(topk).getCandidates());
  }
  Operands &o = runs.front();
  Value query = readOnlyBuffer(b, loc, op.getQuery());
  // The query is read by address (its layout must be the identity); the
  // others through memref loads, in whatever layout they come.
  weights.buffer = e.buffer(weights.tensor);
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
  o.keyRows = arith::DivSIOp::create(b, loc, e.max(bound, e.index(0)),
                                     e.index(op.getRatio()));
  o.rows = o.selection.kind == Selection::Kind::RowsInBlocks
               ? e.index(o.selection.blockCount * o.selection.blockSize)
               : o.keyRows;
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
  if (plan.e4m3)
    o.images = memref::AllocOp::create(
        b, loc, MemRefType::get({ShapedType::kDynamic}, b.getI8Type()),
        ValueRange{e.mul(o.tokens, e.index(plan.imageBytes))});
  SmallVector<RankedTensorType, 2> picksTypes;
  for (auto [other, topk] : llvm::zip(runs, run)) {
    if (&other != &o) {
      Selection selection = other.selection;
      int64_t k = other.k;
      other = o;
      other.selection = selection;
      other.k = k;
    }
    picksTypes.push_back(cast<RankedTensorType>(topk->getResult(0).getType()));
    other.picks = memref::AllocOp::create(
        b, loc, MemRefType::get(picksTypes.back().getShape(), b.getI32Type()),
        ValueRange{o.tokens});
    other.partial = memref::AllocOp::create(
        b, loc, MemRefType::get({ShapedType::kDynamic}, b.getI64Type()),
        ValueRange{e.mul(e.mul(o.tokens, o.splits), e.index(other.k))});
  }

  Operation *func = op->getParentOfType<func::FuncOp>();
  mlir::gpu::LaunchOp scores = buildScores(
      b, loc, op, plan, runs, query, weights, positions, bases, keyBytes, func);
  for (const Operands &each : runs) {
    b.setInsertionPoint(run.front());
    buildRankMerge(b, loc, each, func);
    b.setInsertionPoint(run.front());
    buildMerge(b, loc, each, func);
  }
  // Named after the others (their names stay), run before the scores.
  if (plan.e4m3) {
    b.setInsertionPoint(scores);
    buildQueryImages(b, loc, plan, o, query, weights, o.images, func);
  }
  b.setInsertionPoint(run.front());
  SmallVector<Value, 2> results;
  for (auto [each, type] : llvm::zip(runs, picksTypes))
    results.push_back(bufferization::ToTensorOp::create(
        b, loc, type, each.picks, /*restrict=*/true, /*writable=*/true));
  for (auto [topk, result] : llvm::zip(run, results))
    rewriter.replaceOp(topk, result);
}

/// Erases `op`, then each op that fed it and nothing reads any more. (An op
/// joins the worklist when its last reader goes, so once.)
void eraseWithDeadOperands(RewriterBase &rewriter, Operation *op) {
  SmallVector<Operation *> dead = {op};
  while (!dead.empty()) {
    Operation *next = dead.pop_back_val();
    llvm::SetVector<Operation *> feeding;
    for (Value operand : next->getOperands())
      if (Operation *def = operand.getDefiningOp())
        feeding.insert(def);
    rewriter.eraseOp(next);
    for (Operation *def : feeding)
      if (isOpTriviallyDead(def))
        dead.push_back(def);
  }
}

} // namespace

void lowerIndexerTopK(RewriterBase &rewriter, CacheIndexerScoreOp op,
                      ArrayRef<Operation *> selections, bool e4m3) {
  auto queryType = cast<RankedTensorType>(op.getQuery().getType());
  int64_t heads = queryType.getDimSize(1), width = queryType.getDimSize(2);
  layout::RowLayout row = *keyRowsOf(op.getKeys().getType());
  HeadWeights weights = headWeightsOf(op.getWeights());
  // A candidate source's rows and blocks share a scoring kernel (its keys
  // read once) when one block's shared memory holds both selections.
  auto kindOf = [](Operation *selection) {
    return selectionOf(selection)->second.kind;
  };
  auto rows = llvm::find_if(selections, [&](Operation *selection) {
    return kindOf(selection) == Selection::Kind::Rows;
  });
  auto blocks = llvm::find_if(selections, [&](Operation *selection) {
    return kindOf(selection) == Selection::Kind::Blocks;
  });
  std::optional<SharedPlan> shared;
  if (rows != selections.end() && blocks != selections.end()) {
    int64_t k = selectionOf(*rows)->first;
    auto [blockK, blockSelection] = *selectionOf(*blocks);
    shared = planShared(heads, width, k, row, e4m3, blockK,
                        blockSelection.blockSize);
  }
  for (Operation *selection : selections) {
    if (shared && selection == *rows) {
      lowerRun(rewriter, op, {*rows, *blocks}, *shared, weights);
      continue;
    }
    if (shared && selection == *blocks)
      continue;
    lowerRun(
        rewriter, op, {selection},
        *planShared(heads, width, selectionOf(selection)->first, row, e4m3),
        weights);
  }
  rewriter.eraseOp(op);
  if (Operation *taken = weights.takenIn) {
    // What still asks for its shape asks its first operand (elementwise:
    // the same shape).
    for (OpOperand &use :
         llvm::make_early_inc_range(taken->getResult(0).getUses()))
      if (isa<tensor::DimOp>(use.getOwner()))
        rewriter.modifyOpInPlace(use.getOwner(),
                                 [&] { use.set(taken->getOperand(0)); });
    if (taken->use_empty())
      eraseWithDeadOperands(rewriter, taken);
  }
}

} // namespace v4a::gpu
