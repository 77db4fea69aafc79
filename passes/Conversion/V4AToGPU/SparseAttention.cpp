//===- SparseAttention.cpp - the attention kernel family ------------------===//
//
// One block per (query token, group of 64 heads): two warpgroups, 256
// threads. The token's slots (its window rows, then its compressed rows)
// are walked in blocks of 64:
// - the rows of the next block are gathered into the other of two shared
//   stages with 16-byte cp.async (a slot of -1 or past the token's slots is
//   zero-filled and masked) while this block is computed, in the 128-byte
//   swizzle layout (Warpgroup.h; measured on the H200, V4-Flash decode of 128
//   sequences at 64K: 65.0 us unswizzled, 45.8 us swizzled);
// - S = Q.K^T: warpgroup w multiplies the 64 query heads by rows
//   32w..32w+31 of the block (m64n32, K = the head width);
// - the online softmax in base 2: block maxima meet through shared memory,
//   the unnormalized probabilities are rounded to bf16 for P.V (spec 2b)
//   while the denominators keep them in f32;
// - O += P.V: warpgroup w takes dims w*D/2 .. (w+1)*D/2 - 1 of all 64 heads,
//   reading the same stage MN-major (V equals K).
// At the end the denominators are summed across lanes and warpgroups in a
// fixed order, the sink joins them, and heads past the head count are never
// stored. A token's result depends only on its own slots, never on the
// batch around it.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/V4AToGPU/SparseAttention.h"

#include "core/CacheLayout.h"
#include "core/StepSignature.h"
#include "dialects/V4A/IR/V4AOps.h"
#include "passes/Conversion/V4AToCPU/CacheRows.h"
#include "passes/Conversion/V4AToCPU/LoopEmitter.h"
#include "passes/Conversion/V4AToGPU/DeviceKit.h"
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

/// Row slots per block, warpgroups per block and their threads.
constexpr int64_t kSlotsPerBlock = 64;
constexpr int64_t kWarpgroups = 2;
constexpr int64_t kThreads = kWarpgroups * kWarpgroupThreads;
constexpr int64_t kChunkBytes = 16;
constexpr double kLog2E = 1.4426950408889634;

/// Byte offsets in the dynamic shared memory.
struct SharedPlan {
  int64_t width = 0;  // D
  int64_t chunks = 0; // 16-byte chunks of a bf16 row
  int64_t query = 0;  // the 64 x D query tile
  int64_t stages[2] = {0, 0};
  int64_t probabilities = 0; // P, 64 heads x 64 slots of bf16
  int64_t addresses = 0;     // per stage, each slot's row address (0: none)
  int64_t exchange = 0;      // per warpgroup, a f32 per head
  int64_t masks = 0;         // per stage and warpgroup, a bit per slot
  int64_t total = 0;
};

std::optional<SharedPlan> planShared(int64_t width) {
  // Rows are 128-byte swizzle atoms of 64 dims, and P.V splits D in two
  // halves of whole atoms, each a valid N (<= 256).
  if (width < 128 || width % 128 != 0 || width > 512)
    return std::nullopt;
  SharedPlan plan;
  plan.width = width;
  plan.chunks = width * 2 / kChunkBytes;
  int64_t tile = kMmaM * width * 2;
  // The tiles start at multiples of the atom (the swizzle XORs address
  // bits); the window's base is aligned up to one, hence the spare atom.
  plan.query = 0;
  plan.stages[0] = tile;
  plan.stages[1] = 2 * tile;
  plan.probabilities = 3 * tile;
  plan.addresses = plan.probabilities + kMmaM * kSlotsPerBlock * 2;
  plan.exchange = plan.addresses + 2 * kSlotsPerBlock * 8;
  plan.masks = plan.exchange + kWarpgroups * kMmaM * 4;
  plan.total = plan.masks + 2 * kWarpgroups * 4 + kSwizzleAtomBytes;
  if (plan.total > step::HostOp::kMaxSharedBytes)
    return std::nullopt;
  return plan;
}

bool hasBF16Rows(KVCacheType type, int64_t width) {
  std::optional<layout::RowLayout> row =
      layout::describeRow(toRowKind(type.getLayout()), type.getDim());
  return row && row->kind == layout::RowKind::BF16 && row->dim == width;
}

/// The kernel body's builder and the values every piece uses.
struct Kernel {
  OpBuilder &b;
  Location loc;
  SharedPlan plan;
  int64_t heads;
  /// Thread coordinates: in the block, its warpgroup, warp in the
  /// warpgroup and lane.
  Value thread, warpgroup, warp, lane;
  /// Shared addresses (i64): the window's base.
  Value sharedBase;
  /// Views of the shared slot addresses and masks, exchange slots and P.
  Value slotAddresses, slotMasks, exchange, probabilities;

  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
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
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value exp2(Value x) { return math::Exp2Op::create(b, loc, x); }
  Value isNegInf(Value x) {
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, x,
                                 f32(-INFINITY));
  }
  void barrier() { mlir::gpu::BarrierOp::create(b, loc); }
  void ifThen(Value condition, function_ref<void()> body) {
    scf::IfOp::create(b, loc, condition, [&](OpBuilder &, Location) {
      body();
      scf::YieldOp::create(b, loc);
    });
  }
  Value shuffleXor(Value v, int64_t mask) {
    return v4a::gpu::shuffleXor(b, loc, v, mask);
  }

  /// Swizzle atoms across a row of D dims.
  int64_t rowAtoms() const { return plan.width / 64; }

  /// The shared address of stage `stage` (an index, 0 or 1).
  Value stageAddress(Value stage) {
    return add(sharedBase,
               select(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                            stage, index(0)),
                      i64(plan.stages[0]), i64(plan.stages[1])));
  }

  /// Copies a 64-row tile into the swizzled layout at shared address
  /// `tile`: `source(row)` gives a row's global address and whether it
  /// exists.
  void copyTile(Value tile, function_ref<std::pair<Value, Value>(Value)> source,
                Value fallback) {
    copyTileAsync(b, loc, tile, kMmaM, plan.chunks, kThreads, thread, source,
                  fallback);
  }

  /// The row of register `r` of this thread's fragments (0..63) and its
  /// column within the MMA's N.
  FragmentPlace place(int64_t r) {
    return fragmentPlace(b, loc, warp, lane, r);
  }

  /// Per-head values shared between the two warpgroups: a lane of each
  /// quad leaves this warpgroup's `values` (of the heads `headRow`) in its
  /// exchange slots, then the block waits; bothWarpgroups combines a head's
  /// two values in warpgroup order, so that both get the same bits. The
  /// slots must be free (a barrier since their last read).
  void offerToWarpgroups(ArrayRef<Value> values, const Value headRow[2]) {
    Value quadLead = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                           rem(lane, index(4)), index(0));
    Value own = mul(warpgroup, index(kMmaM));
    ifThen(quadLead, [&] {
      for (int half = 0; half < 2; ++half)
        memref::StoreOp::create(b, loc, values[half], exchange,
                                ValueRange{add(own, headRow[half])});
    });
    barrier();
  }
  Value bothWarpgroups(Value headRow, Combine how) {
    return combine(
        b, loc, how,
        memref::LoadOp::create(b, loc, exchange, ValueRange{headRow}),
        memref::LoadOp::create(b, loc, exchange,
                               ValueRange{add(headRow, index(kMmaM))}));
  }

  /// Element offset of (head, slot) in P (64 slots: one atom a row).
  Value probabilityElement(Value head, Value slot) {
    Value byte = swizzledOffset(b, loc, head, div(slot, index(8)), 1);
    return add(div(byte, index(2)), rem(slot, index(8)));
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

} // namespace

bool isAttentionCovered(CacheAttentionOp op) {
  auto query = cast<RankedTensorType>(op.getQuery().getType());
  auto kv = cast<RankedTensorType>(op.getKv().getType());
  auto result = cast<RankedTensorType>(op.getType());
  if (!query.getElementType().isBF16() || !kv.getElementType().isBF16() ||
      !result.getElementType().isBF16())
    return false;
  int64_t heads = query.getDimSize(1), width = query.getDimSize(2);
  if (ShapedType::isDynamic(heads) || ShapedType::isDynamic(width) ||
      !planShared(width))
    return false;
  if (!hasBF16Rows(op.getWindow().getType(), width))
    return false;
  return !op.getCompressed() ||
         hasBF16Rows(op.getCompressed().getType(), width);
}

void lowerCacheAttention(RewriterBase &rewriter, CacheAttentionOp op) {
  Location loc = op.getLoc();
  OpBuilder &b = rewriter;
  b.setInsertionPoint(op);
  auto queryType = cast<RankedTensorType>(op.getQuery().getType());
  int64_t heads = queryType.getDimSize(1), width = queryType.getDimSize(2);
  SharedPlan plan = *planShared(width);
  auto buffer = [&](Value tensor) { return readOnlyBuffer(b, loc, tensor); };
  Value query = buffer(op.getQuery()), kv = buffer(op.getKv());
  Value windowRows = buffer(op.getWindowRows()), sink = buffer(op.getSink());
  Value windowBytes = cacheBytes(b, loc, op.getWindow());
  Value compressedBytes, compressedRows, bases;
  if (op.getCompressed()) {
    compressedBytes = cacheBytes(b, loc, op.getCompressed());
    compressedRows = buffer(op.getCompressedRows());
    bases = buffer(op.getBase());
  }
  Value tokens = memref::DimOp::create(b, loc, query, 0);
  auto outputType = MemRefType::get(queryType.getShape(), b.getBF16Type());
  Value output =
      memref::AllocOp::create(b, loc, outputType, ValueRange{tokens});
  int64_t groups = llvm::divideCeil(heads, kMmaM);
  Value blocks = arith::MulIOp::create(
      b, loc, tokens, arith::ConstantIndexOp::create(b, loc, groups));

  Operation *func = op->getParentOfType<func::FuncOp>();
  mlir::gpu::LaunchOp launch =
      createLaunch(b, loc, kernelName(func, "attention"), blocks, kThreads,
                   /*sharedFloats=*/0, plan.total);
  Kernel k{b, loc, plan, heads, {}, {}, {}, {}, {}, {}, {}, {}, {}};
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
  k.exchange = view(plan.exchange, b.getF32Type(), kWarpgroups * kMmaM);
  k.slotMasks = view(plan.masks, b.getI32Type(), 2 * kWarpgroups);
  k.probabilities =
      view(plan.probabilities, b.getBF16Type(), kMmaM * kSlotsPerBlock);

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
  if (compressedRows)
    slots = k.add(slots, memref::DimOp::create(b, loc, compressedRows, 1));
  Value slotBlocks =
      arith::CeilDivUIOp::create(b, loc, slots, k.index(kSlotsPerBlock));
  Value rowBytes = k.i64(width * 2);

  // A slot's row is found in two steps: its index is loaded a block ahead
  // of its use (rawRow), so that the load's latency passes under a block's
  // products instead of holding up the gather, and the address follows
  // from it when the block's table is written (addressOfRow).
  Type rawType = cast<MemRefType>(windowRows.getType()).getElementType();
  Value noRow =
      arith::ConstantOp::create(b, loc, b.getIntegerAttr(rawType, -1));
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
      scf::YieldOp::create(
          b, loc,
          loadAt(compressedRows,
                 arith::SubIOp::create(b, loc, slot, windowSlots)));
      b.setInsertionPointAfter(which);
      raw = which.getResult(0);
    }
    scf::YieldOp::create(b, loc, raw);
    b.setInsertionPointToStart(inRange.elseBlock());
    scf::YieldOp::create(b, loc, noRow);
    return inRange.getResult(0);
  };
  // The token's first compressed row, read once.
  Value compressedBase;
  if (compressed)
    compressedBase = arith::IndexCastOp::create(
        b, loc, b.getIndexType(),
        memref::LoadOp::create(b, loc, bases, ValueRange{token}));
  // Slot `slot`'s row address from its index `raw`, 0 when it has none.
  auto addressOfRow = [&](Value slot, Value raw) -> Value {
    Value row = arith::IndexCastOp::create(b, loc, b.getIndexType(), raw);
    Value used = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, row,
                                       k.index(0));
    Value safeRow = k.select(used, row, k.index(0));
    Value fromStep = k.ult(safeRow, tokens);
    Value stepRow = k.add(kvAddress, k.mul(k.toI64(safeRow), rowBytes));
    Value ring = arith::SubIOp::create(b, loc, safeRow, tokens);
    Value safeRing = k.select(fromStep, k.index(0), ring);
    Value ringRow = k.add(windowAddress, k.toI64(window.valueOffset(safeRing)));
    Value address = k.select(fromStep, stepRow, ringRow);
    if (compressed) {
      Value global = k.add(compressedBase, safeRow);
      Value compressedRow =
          k.add(compressedAddress, k.toI64(compressed->valueOffset(global)));
      address = k.select(k.ult(slot, windowSlots), address, compressedRow);
    }
    return k.select(used, address, k.i64(0));
  };
  // The first 64 threads each own a slot of every block: the slot of
  // block `slotBlock` this thread owns, and its index (-1 for the other
  // threads, or when not `when`).
  Value ownsSlot = k.ult(k.thread, k.index(kSlotsPerBlock));
  auto ownSlot = [&](Value slotBlock) {
    return k.add(k.mul(slotBlock, k.index(kSlotsPerBlock)), k.thread);
  };
  auto ownRaw = [&](Value slotBlock, Value when) {
    auto guarded = scf::IfOp::create(
        b, loc, TypeRange{rawType},
        arith::AndIOp::create(b, loc, when, ownsSlot), /*withElse=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(guarded.thenBlock());
    scf::YieldOp::create(b, loc, rawRow(ownSlot(slotBlock)));
    b.setInsertionPointToStart(guarded.elseBlock());
    scf::YieldOp::create(b, loc, noRow);
    return guarded.getResult(0);
  };
  auto ownAddress = [&](Value slotBlock, Value raw) {
    return addressOfRow(ownSlot(slotBlock), raw);
  };
  // Each owner warp also leaves a bit per slot (set: the slot has a row)
  // for the softmax's masks: warp w's word covers the 32 slots that
  // warpgroup w multiplies.
  auto placeAddress = [&](Value address, Value stage, Value when) {
    k.ifThen(arith::AndIOp::create(b, loc, when, ownsSlot), [&] {
      memref::StoreOp::create(
          b, loc, address, k.slotAddresses,
          ValueRange{k.add(k.mul(stage, k.index(kSlotsPerBlock)), k.thread)});
      Value present = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                            address, k.i64(0));
      Value bits = NVVM::VoteSyncOp::create(
          b, loc, b.getI32Type(),
          arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(-1)), present,
          NVVM::VoteSyncKind::ballot);
      Value warpInBlock = k.div(k.thread, k.index(kWarpLanes));
      k.ifThen(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, k.lane,
                                     k.index(0)),
               [&] {
                 memref::StoreOp::create(
                     b, loc, bits, k.slotMasks,
                     ValueRange{k.add(k.mul(stage, k.index(kWarpgroups)),
                                      warpInBlock)});
               });
    });
  };
  auto slotAddress = [&](Value stage, Value slotInBlock) {
    return memref::LoadOp::create(
               b, loc, k.slotAddresses,
               ValueRange{
                   k.add(k.mul(stage, k.index(kSlotsPerBlock)), slotInBlock)})
        .getResult();
  };
  auto copyBlock = [&](Value stage) {
    k.copyTile(
        k.stageAddress(stage),
        [&](Value row) -> std::pair<Value, Value> {
          Value address = slotAddress(stage, row);
          Value valid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                              address, k.i64(0));
          return {address, valid};
        },
        queryAddress);
  };

  // Prologue: the query tile and the first block of rows.
  Value always = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
  placeAddress(ownAddress(k.index(0), ownRaw(k.index(0), always)), k.index(0),
               always);
  // Block 1's table too; block 2's indices are carried into the loop, whose
  // block n writes the table of block n + 2.
  Value hasSecond = k.ult(k.index(1), slotBlocks);
  placeAddress(ownAddress(k.index(1), ownRaw(k.index(1), hasSecond)),
               k.index(1), hasSecond);
  Value thirdRaw = ownRaw(k.index(2), k.ult(k.index(2), slotBlocks));
  k.barrier();
  Value queryTile = k.add(k.sharedBase, k.i64(plan.query));
  k.copyTile(
      queryTile,
      [&](Value row) -> std::pair<Value, Value> {
        Value head = k.add(headBase, row);
        Value valid = k.ult(head, k.index(heads));
        Value element =
            k.mul(k.add(k.mul(token, k.index(heads)), head), k.index(width));
        return {k.add(queryAddress, k.mul(k.toI64(element), k.i64(2))), valid};
      },
      queryAddress);
  copyBlock(k.index(0));
  commitCopies(b, loc);

  int64_t outputN = width / kWarpgroups;
  Value negInf = k.f32(-INFINITY);
  Value zero = k.f32(0.0);
  Value scale2 = k.f32(op.getScale().convertToDouble() * kLog2E);
  // Bytes between 8-row groups of a row tile, and the place of K step
  // `step` (16 elements, 32 bytes) in its row of atoms.
  int64_t groupStride = k.rowAtoms() * kSwizzleAtomBytes;
  auto kStep = [&](int64_t step) {
    return step / 4 * kSwizzleAtomBytes + step % 4 * 2 * kMmaK;
  };
  SmallVector<Value> init = {
      zeroAccumulator(b, loc, outputN), negInf, negInf, zero, zero, thirdRaw};
  auto loop =
      scf::ForOp::create(b, loc, k.index(0), slotBlocks, k.index(1), init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value slotBlock = loop.getInductionVar();
    Value accumulator = loop.getRegionIterArgs()[0];
    Value maxima[2] = {loop.getRegionIterArgs()[1],
                       loop.getRegionIterArgs()[2]};
    Value sums[2] = {loop.getRegionIterArgs()[3], loop.getRegionIterArgs()[4]};
    Value stage = k.rem(slotBlock, k.index(2));
    Value nextStage = arith::SubIOp::create(b, loc, k.index(1), stage);
    Value nextBlock = k.add(slotBlock, k.index(1));
    Value hasNext = k.ult(nextBlock, slotBlocks);

    // Gather the next block while this one is computed (its table was
    // written during the last block's P.V).
    k.barrier();
    k.ifThen(hasNext, [&] { copyBlock(nextStage); });
    commitCopies(b, loc);
    waitCopies(b, loc, 1);
    fenceSharedForMma(b, loc);
    k.barrier();

    // S = Q.K^T over this warpgroup's 32 rows.
    Value rows = k.stageAddress(stage);
    Value ownRows =
        k.add(rows, k.mul(k.toI64(k.warpgroup), k.i64(4 * groupStride)));
    // The accumulator's registers are written before the fence.
    Value scores = zeroAccumulator(b, loc, 32);
    mmaFence(b, loc);
    Value rowsDescriptor =
        matrixDescriptor(b, loc, ownRows, kChunkBytes, groupStride);
    // The query tile's descriptors stay built from their addresses: each
    // folds to one OR of a loop-invariant base, where advanced ones were
    // hoisted into 32 registers (253-255 registers, a spill).
    for (int64_t step = 0; step < width / kMmaK; ++step) {
      Value a = matrixDescriptor(b, loc, k.add(queryTile, k.i64(kStep(step))),
                                 kChunkBytes, groupStride);
      Value bDesc = advanceDescriptor(b, loc, rowsDescriptor, kStep(step));
      scores = mmaBF16(b, loc, a, bDesc, scores, 32, /*transposeB=*/false,
                       /*accumulate=*/step > 0);
    }
    mmaCommit(b, loc);
    mmaWait(b, loc, 0);

    // Logits in base 2; slots without a row are -inf.
    SmallVector<Value> s = unpackAccumulator(b, loc, scores);
    Value slotBase = k.mul(k.warpgroup, k.index(32));
    Value mask = memref::LoadOp::create(
        b, loc, k.slotMasks,
        ValueRange{k.add(k.mul(stage, k.index(kWarpgroups)), k.warpgroup)});
    for (size_t r = 0; r < s.size(); ++r) {
      Value bit =
          arith::IndexCastOp::create(b, loc, b.getI32Type(), k.place(r).column);
      Value present = arith::TruncIOp::create(
          b, loc, b.getI1Type(), arith::ShRUIOp::create(b, loc, mask, bit));
      s[r] = k.select(present, k.mul(s[r], scale2), negInf);
    }
    Value headRow[2] = {k.place(0).row, k.place(2).row};
    Value blockMax[2];
    for (int half = 0; half < 2; ++half) {
      Value m = negInf;
      for (size_t r = 0; r < s.size(); ++r)
        if (static_cast<int>(r % 4) / 2 == half)
          m = k.maxf(m, s[r]);
      m = k.maxf(m, k.shuffleXor(m, 1));
      m = k.maxf(m, k.shuffleXor(m, 2));
      blockMax[half] = m;
    }
    k.offerToWarpgroups(blockMax, headRow);
    Value newMax[2], alpha[2], used[2];
    for (int half = 0; half < 2; ++half) {
      Value both = k.bothWarpgroups(headRow[half], Combine::Max);
      newMax[half] = k.maxf(maxima[half], both);
      // Before any row, exponents are taken against 0 (every term is 0).
      used[half] = k.select(k.isNegInf(newMax[half]), zero, newMax[half]);
      alpha[half] =
          k.exp2(arith::SubFOp::create(b, loc, maxima[half], used[half]));
      sums[half] = k.mul(sums[half], alpha[half]);
    }
    SmallVector<Value> p(s.size());
    for (size_t r = 0; r < s.size(); ++r) {
      int half = static_cast<int>(r % 4) / 2;
      p[r] = k.exp2(arith::SubFOp::create(b, loc, s[r], used[half]));
      sums[half] = k.add(sums[half], p[r]);
    }
    // P in bf16 to shared memory, a pair of slots per store.
    for (size_t r = 0; r < s.size(); r += 2) {
      FragmentPlace at = k.place(r);
      Value slotInBlock = k.add(slotBase, at.column);
      vector::StoreOp::create(
          b, loc, bf16Pair(b, loc, p[r], p[r + 1]), k.probabilities,
          ValueRange{k.probabilityElement(at.row, slotInBlock)},
          /*nontemporal=*/false, llvm::MaybeAlign(4));
    }
    fenceSharedForMma(b, loc);
    SmallVector<Value> o = unpackAccumulator(b, loc, accumulator);
    for (size_t r = 0; r < o.size(); ++r)
      o[r] = k.mul(o[r], alpha[(r % 4) / 2]);
    accumulator = packAccumulator(b, loc, o);
    k.barrier();

    // O += P.V over this warpgroup's half of the dims.
    Value pTile = k.add(k.sharedBase, k.i64(plan.probabilities));
    // This warpgroup's dims: the second half of the atoms of each row.
    Value ownDims =
        k.add(rows, k.mul(k.toI64(k.warpgroup),
                          k.i64(k.rowAtoms() / 2 * kSwizzleAtomBytes)));
    Value dimsDescriptor =
        matrixDescriptor(b, loc, ownDims, kSwizzleAtomBytes, groupStride);
    mmaFence(b, loc);
    for (int64_t step = 0; step < kSlotsPerBlock / kMmaK; ++step) {
      // P: one atom per 8 heads; V: K step `step` is row groups 2 step and
      // 2 step + 1.
      Value a = matrixDescriptor(b, loc, k.add(pTile, k.i64(kStep(step))),
                                 kChunkBytes, kSwizzleAtomBytes);
      Value bDesc =
          advanceDescriptor(b, loc, dimsDescriptor, 2 * step * groupStride);
      accumulator = mmaBF16(b, loc, a, bDesc, accumulator, outputN,
                            /*transposeB=*/true, /*accumulate=*/true);
    }
    mmaCommit(b, loc);
    // While P.V runs: the table of block n + 2 (into this stage's, whose
    // copies were issued a block ago and whose mask the softmax above has
    // read) from indices loaded a block ago, and the indices of block
    // n + 3. (Measured on the H200, V4-Flash decode of 128 sequences at
    // 64K: 46.1 us with the indices loaded and the table written just
    // before the gather, 42.7 us with the indices loaded a block ahead;
    // prefetching the rows themselves into L2 a block or two ahead of
    // their gather was slower, 51.4 us.)
    Value blockAfter = k.add(slotBlock, k.index(2));
    Value hasAfter = k.ult(blockAfter, slotBlocks);
    placeAddress(ownAddress(blockAfter, loop.getRegionIterArgs()[5]), stage,
                 hasAfter);
    Value lastBlock = k.add(slotBlock, k.index(3));
    Value afterRaw = ownRaw(lastBlock, k.ult(lastBlock, slotBlocks));
    mmaWait(b, loc, 0);
    scf::YieldOp::create(b, loc,
                         ValueRange{accumulator, newMax[0], newMax[1], sums[0],
                                    sums[1], afterRaw});
  }

  // Denominators: lanes of a quad, then the two warpgroups, in that order.
  Value headRow[2] = {k.place(0).row, k.place(2).row};
  Value sums[2];
  for (int half = 0; half < 2; ++half) {
    Value l = loop.getResult(3 + half);
    l = k.add(l, k.shuffleXor(l, 1));
    sums[half] = k.add(l, k.shuffleXor(l, 2));
  }
  k.barrier();
  k.offerToWarpgroups(sums, headRow);
  // Per head: the denominator, or -inf for an empty selection (its result
  // is 0: the sink takes all the mass).
  Value denominators[2], inverses[2], stored[2], head[2];
  for (int half = 0; half < 2; ++half) {
    Value total = k.bothWarpgroups(headRow[half], Combine::Add);
    head[half] = k.add(headBase, headRow[half]);
    stored[half] = k.ult(head[half], k.index(heads));
    Value safeHead =
        arith::MinUIOp::create(b, loc, head[half], k.index(heads - 1));
    Value sink2 =
        k.mul(memref::LoadOp::create(b, loc, sink, ValueRange{safeHead}),
              k.f32(kLog2E));
    Value m = loop.getResult(1 + half);
    Value empty = k.isNegInf(m);
    Value denominator = k.add(
        total,
        k.exp2(arith::SubFOp::create(b, loc, sink2, k.select(empty, zero, m))));
    denominators[half] = k.select(empty, negInf, denominator);
    // One division per head; the outputs multiply by its result (a
    // division per output element was a fifth of the kernel's time at
    // decode).
    inverses[half] =
        arith::DivFOp::create(b, loc, k.f32(1.0), denominators[half]);
  }
  SmallVector<Value> o = unpackAccumulator(b, loc, loop.getResult(0));
  Value dimBase = k.mul(k.warpgroup, k.index(outputN));
  for (size_t r = 0; r < o.size(); r += 2) {
    int half = static_cast<int>(r % 4) / 2;
    FragmentPlace at = k.place(r);
    // -inf marks an empty selection: the result is 0.
    Value empty = k.isNegInf(denominators[half]);
    auto value = [&](Value acc) {
      return k.select(empty, zero, k.mul(acc, inverses[half]));
    };
    Value pair = bf16Pair(b, loc, value(o[r]), value(o[r + 1]));
    k.ifThen(stored[half], [&] {
      vector::StoreOp::create(
          b, loc, pair, output,
          ValueRange{token, head[half], k.add(dimBase, at.column)},
          /*nontemporal=*/false, llvm::MaybeAlign(4));
    });
  }

  b.setInsertionPointAfter(launch);
  Value result = bufferization::ToTensorOp::create(
      b, loc, op.getType(), output, /*restrict=*/true, /*writable=*/true);
  rewriter.replaceOp(op, result);
}

} // namespace v4a::gpu
