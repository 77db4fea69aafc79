//===- BlockSelect.cpp - a block's streaming top-k in shared memory -------===//

#include "passes/Conversion/V4AToGPU/BlockSelect.h"

#include "passes/Conversion/V4AToCPU/LoopEmitter.h"

#include "passes/Conversion/V4AToGPU/DeviceKit.h"
#include "passes/Conversion/V4AToGPU/Warpgroup.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace v4a::gpu {

namespace {

/// Radix digits: 8 bits, 256 bins, 8 passes over a 64-bit key.
constexpr int64_t kDigitBits = 8;
constexpr int64_t kBins = 256;
constexpr int64_t kPasses = 64 / kDigitBits;
/// Counters: the buffer's count, the kept count, then a total per warp.
constexpr int64_t kCount = 0, kKeptCount = 1, kWarpTotals = 2;
/// Up to this many warps, every thread reads each warp's total in a scan (a
/// few loads, issued together); more, the totals are scanned across a
/// warp's lanes.
constexpr int64_t kWarpsReadInTurn = 4;
int64_t countersFor(int64_t threads) {
  return kWarpTotals + threads / kWarpLanes;
}
/// Words: the threshold, then the select's bin, the weight above it and in
/// it, and the keys in it.
constexpr int64_t kThreshold = 0, kBin = 1, kAbove = 2, kInBin = 3,
                  kKeysInBin = 4;
constexpr int64_t kWords = 6;
/// Keys a thread takes in the final sort where the block has more threads
/// than that leaves work for, and the named barrier of those threads.
constexpr int64_t kKeysPerSorter = 4;
constexpr int64_t kSortBarrier = 1;

} // namespace

int64_t BlockSelect::sortSizeFor(int64_t k) {
  return std::max<int64_t>(2, llvm::PowerOf2Ceil(k));
}

int64_t BlockSelect::leastCapacity(int64_t k, int64_t incoming) {
  int64_t sortSize = sortSizeFor(k);
  return std::max(2 * sortSize, sortSize + incoming);
}

int64_t BlockSelect::sharedBytes(int64_t k, int64_t incoming, int64_t room,
                                 int64_t threads) {
  return (std::max(room, leastCapacity(k, incoming)) + sortSizeFor(k) +
          kWords) *
             8 +
         llvm::alignTo((2 * kBins + countersFor(threads)) * 4, 8);
}

BlockSelect::BlockSelect(OpBuilder &b, Location loc, Value shared, Value offset,
                         Value thread, int64_t k, int64_t incoming,
                         int64_t room, int64_t threads)
    : b(b), loc(loc), e(b, loc), thread(thread), k(k), sortSize(sortSizeFor(k)),
      capacity(std::max(room, leastCapacity(k, incoming))), incoming(incoming),
      threads(threads) {
  assert(llvm::isPowerOf2_64(threads) && threads >= kWarpLanes &&
         threads <= kMostThreads);
  int64_t at = 0;
  auto view = [&](Type element, int64_t count) {
    Value v = sharedView(
        b, loc, shared,
        arith::AddIOp::create(b, loc, offset, e.index(at)).getResult(), element,
        count);
    at += count * (element.getIntOrFloatBitWidth() / 8);
    return v;
  };
  candidates = view(b.getI64Type(), capacity);
  kept = view(b.getI64Type(), sortSize);
  words = view(b.getI64Type(), kWords);
  histogram = view(b.getI32Type(), kBins);
  binCounts = view(b.getI32Type(), kBins);
  counters = view(b.getI32Type(), countersFor(threads));
}

void BlockSelect::barrier() { mlir::gpu::BarrierOp::create(b, loc); }

Value BlockSelect::count() {
  return memref::LoadOp::create(b, loc, counters, ValueRange{e.index(kCount)});
}
void BlockSelect::setCount(Value value) {
  memref::StoreOp::create(b, loc, value, counters, ValueRange{e.index(kCount)});
}

/// Runs `body` on thread 0 only.
static void onFirstThread(OpBuilder &b, Location loc, Value thread,
                          function_ref<void()> body) {
  Value first =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, thread,
                            arith::ConstantIndexOp::create(b, loc, 0));
  scf::IfOp::create(b, loc, first, [&](OpBuilder &, Location) {
    body();
    scf::YieldOp::create(b, loc);
  });
}

/// A loop over i = from, from + step, ... < to (indices).
static void strided(OpBuilder &b, Location loc, Value from, Value to,
                    int64_t step, function_ref<void(Value)> body) {
  scf::ForOp::create(b, loc, from, to,
                     arith::ConstantIndexOp::create(b, loc, step), ValueRange{},
                     [&](OpBuilder &, Location, Value i, ValueRange) {
                       body(i);
                       scf::YieldOp::create(b, loc);
                     });
}

void BlockSelect::start() {
  onFirstThread(b, loc, thread, [&] {
    setCount(e.i32(0));
    memref::StoreOp::create(b, loc, e.i64(0), words,
                            ValueRange{e.index(kThreshold)});
  });
}

void BlockSelect::raiseFloor(Value floor) {
  memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::maxu, floor, words,
                              ValueRange{e.index(kThreshold)});
}

void BlockSelect::offer(Value key, Value valid) {
  Value threshold =
      memref::LoadOp::create(b, loc, words, ValueRange{e.index(kThreshold)});
  Value above =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt, key, threshold);
  Value take = arith::AndIOp::create(b, loc, valid, above);
  scf::IfOp::create(b, loc, take, [&](OpBuilder &, Location) {
    Value at = memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addi,
                                           e.i32(1), counters,
                                           ValueRange{e.index(kCount)});
    Value slot = arith::IndexCastOp::create(b, loc, b.getIndexType(), at);
    memref::StoreOp::create(b, loc, key, candidates, ValueRange{slot});
    scf::YieldOp::create(b, loc);
  });
}

void BlockSelect::makeRoom() {
  // Every thread reads the count before any offers again, so that all take
  // the same branch.
  barrier();
  Value n = count();
  barrier();
  // After a cut k <= sortSize keys remain, and capacity >= sortSize +
  // incoming leaves room for the next round.
  scf::IfOp::create(b, loc,
                    arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, n,
                                          e.i32(capacity - incoming)),
                    [&](OpBuilder &, Location) {
                      cutToBest();
                      scf::YieldOp::create(b, loc);
                    });
}

/// The inclusive scan of `value` (i32) over the first `lanes` lanes of each
/// warp (later lanes' sums reach back only that far).
static Value scanLanes(OpBuilder &b, Location loc, Value value, int64_t lanes) {
  Value zero = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0));
  for (int64_t offset = 1; offset < lanes; offset *= 2) {
    auto up = mlir::gpu::ShuffleOp::create(
        b, loc, value, static_cast<int32_t>(offset),
        static_cast<int32_t>(kWarpLanes), mlir::gpu::ShuffleMode::UP);
    value = arith::AddIOp::create(b, loc, value,
                                  arith::SelectOp::create(b, loc, up.getValid(),
                                                          up.getShuffleResult(),
                                                          zero));
  }
  return value;
}

Value BlockSelect::inclusiveScan(Value local, Value &total) {
  Value lanes = e.index(kWarpLanes);
  Value warp = arith::DivUIOp::create(b, loc, thread, lanes);
  Value lane = arith::RemUIOp::create(b, loc, thread, lanes);
  Value scan = scanLanes(b, loc, local, kWarpLanes);
  Value lastLane = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane,
                                         e.index(kWarpLanes - 1));
  scf::IfOp::create(b, loc, lastLane, [&](OpBuilder &, Location) {
    memref::StoreOp::create(
        b, loc, scan, counters,
        ValueRange{arith::AddIOp::create(b, loc, warp, e.index(kWarpTotals))});
    scf::YieldOp::create(b, loc);
  });
  barrier();
  int64_t warps = threads / kWarpLanes;
  if (warps <= kWarpsReadInTurn) {
    total = e.i32(0);
    for (int64_t w = 0; w < warps; ++w) {
      Value sum = memref::LoadOp::create(b, loc, counters,
                                         ValueRange{e.index(kWarpTotals + w)});
      total = arith::AddIOp::create(b, loc, total, sum);
      if (w + 1 == warps)
        continue;
      Value later = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt,
                                          warp, e.index(w));
      scan = arith::AddIOp::create(
          b, loc, scan, arith::SelectOp::create(b, loc, later, sum, e.i32(0)));
    }
    return scan;
  }
  // Lane w of every warp takes warp w's total and scans them as above (the
  // steps reach only the lanes that hold one): the total is the last such
  // lane's scan, and the warps before this one sum to the scan at lane
  // `warp` less that warp's own total.
  Value holds = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, lane,
                                      e.index(warps));
  Value slot = arith::AddIOp::create(
      b, loc, arith::SelectOp::create(b, loc, holds, lane, e.index(0)),
      e.index(kWarpTotals));
  Value own = arith::SelectOp::create(
      b, loc, holds, memref::LoadOp::create(b, loc, counters, ValueRange{slot}),
      e.i32(0));
  Value warpScan = scanLanes(b, loc, own, warps);
  total = shuffleFromLane(b, loc, warpScan, e.index(warps - 1));
  Value before = shuffleFromLane(
      b, loc, arith::SubIOp::create(b, loc, warpScan, own), warp);
  return arith::AddIOp::create(b, loc, scan, before);
}

Value BlockSelect::kthLargest(Value n) {
  return weightedFloor(candidates, n, e.i32(k), /*weight=*/nullptr);
}

Value BlockSelect::weightedFloor(Value keys, Value n, Value need0,
                                 function_ref<Value(Value)> weight) {
  Type i64Type = b.getI64Type(), i32Type = b.getI32Type();
  Value nIndex = arith::IndexCastOp::create(b, loc, b.getIndexType(), n);
  onFirstThread(b, loc, thread, [&] {
    memref::StoreOp::create(b, loc, e.i32(0), counters,
                            ValueRange{e.index(kKeptCount)});
  });
  Value falseValue = arith::ConstantOp::create(b, loc, b.getBoolAttr(false));
  Value trueValue = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
  SmallVector<Value> state = {e.i64(0), e.i64(0), need0, falseValue};
  for (int64_t pass = 0; pass < kPasses; ++pass) {
    int64_t shift = 64 - kDigitBits * (pass + 1);
    Value notDone = arith::XOrIOp::create(b, loc, state[3], trueValue);
    auto step = scf::IfOp::create(
        b, loc, TypeRange{i64Type, i64Type, i32Type, b.getI1Type()}, notDone,
        /*withElse=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(step.thenBlock());
      Value prefix = state[0], mask = state[1], need = state[2];
      for (int64_t part = 0; part * threads < kBins; ++part) {
        Value bin =
            arith::AddIOp::create(b, loc, thread, e.index(part * threads));
        auto clear = [&] {
          memref::StoreOp::create(b, loc, e.i32(0), histogram, ValueRange{bin});
          if (weight)
            memref::StoreOp::create(b, loc, e.i32(0), binCounts,
                                    ValueRange{bin});
        };
        if ((part + 1) * threads <= kBins)
          clear();
        else
          scf::IfOp::create(b, loc,
                            arith::CmpIOp::create(b, loc,
                                                  arith::CmpIPredicate::ult,
                                                  bin, e.index(kBins)),
                            [&](OpBuilder &, Location) {
                              clear();
                              scf::YieldOp::create(b, loc);
                            });
      }
      barrier();
      strided(b, loc, thread, nIndex, threads, [&](Value i) {
        Value x = memref::LoadOp::create(b, loc, keys, ValueRange{i});
        Value real = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, x,
                                           e.i64(0));
        Value matches = arith::AndIOp::create(
            b, loc,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                  arith::AndIOp::create(b, loc, x, mask),
                                  prefix),
            real);
        scf::IfOp::create(b, loc, matches, [&](OpBuilder &, Location) {
          Value digit = arith::IndexCastOp::create(
              b, loc, b.getIndexType(),
              arith::AndIOp::create(
                  b, loc, arith::ShRUIOp::create(b, loc, x, e.i64(shift)),
                  e.i64(kBins - 1)));
          memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addi,
                                      weight ? weight(i) : e.i32(1), histogram,
                                      ValueRange{digit});
          if (weight)
            memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addi,
                                        e.i32(1), binCounts, ValueRange{digit});
          scf::YieldOp::create(b, loc);
        });
      });
      barrier();
      // Thread t holds bins 255 - nt, ..., 256 - n(t + 1), n bins a thread
      // (threads past the 256th none): an inclusive scan over threads weighs
      // the keys in bins from the top down to its own.
      int64_t perThread = std::max<int64_t>(1, kBins / threads);
      // With more threads than bins, the threads past them hold none.
      Value holder =
          threads > kBins
              ? arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, thread,
                                      e.index(kBins))
                    .getResult()
              : Value();
      auto held = [&](Value v, Value none) {
        return holder ? arith::SelectOp::create(b, loc, holder, v, none)
                            .getResult()
                      : v;
      };
      SmallVector<Value> ownBins, inOwnBins;
      Value topBin = arith::SubIOp::create(
          b, loc, e.index(kBins - 1),
          arith::MulIOp::create(b, loc, held(thread, e.index(0)),
                                e.index(perThread)));
      Value local;
      for (int64_t j = 0; j < perThread; ++j) {
        Value bin =
            j == 0
                ? topBin
                : arith::SubIOp::create(b, loc, topBin, e.index(j)).getResult();
        Value in =
            held(memref::LoadOp::create(b, loc, histogram, ValueRange{bin}),
                 e.i32(0));
        ownBins.push_back(bin);
        inOwnBins.push_back(in);
        local =
            local ? arith::AddIOp::create(b, loc, local, in).getResult() : in;
      }
      Value total;
      Value through = inclusiveScan(local, total);
      Value before = arith::SubIOp::create(b, loc, through, local);
      Value reaches = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge,
                                            through, need);
      Value owner = arith::AndIOp::create(
          b, loc,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, before,
                                need),
          reaches);
      scf::IfOp::create(b, loc, owner, [&](OpBuilder &, Location) {
        // The first of its bins, from the top, that reaches the need (the
        // weights above each bin grow downwards, so from the lowest up,
        // each bin that reaches it replaces the one below).
        SmallVector<Value> aboveBin = {before};
        for (int64_t j = 0; j + 1 < perThread; ++j)
          aboveBin.push_back(
              arith::AddIOp::create(b, loc, aboveBin.back(), inOwnBins[j]));
        Value bin = ownBins.back(), above = aboveBin.back(),
              inBin = inOwnBins.back();
        for (int64_t j = perThread - 2; j >= 0; --j) {
          Value takes = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::sge,
              arith::AddIOp::create(b, loc, aboveBin[j], inOwnBins[j]), need);
          bin = arith::SelectOp::create(b, loc, takes, ownBins[j], bin);
          above = arith::SelectOp::create(b, loc, takes, aboveBin[j], above);
          inBin = arith::SelectOp::create(b, loc, takes, inOwnBins[j], inBin);
        }
        Value keysInBin =
            weight ? memref::LoadOp::create(b, loc, binCounts, ValueRange{bin})
                         .getResult()
                   : inBin;
        auto put = [&](Value v, int64_t at) {
          Value wide =
              v.getType().isIndex()
                  ? arith::IndexCastOp::create(b, loc, i64Type, v).getResult()
                  : arith::ExtSIOp::create(b, loc, i64Type, v).getResult();
          memref::StoreOp::create(b, loc, wide, words, ValueRange{e.index(at)});
        };
        put(bin, kBin);
        put(above, kAbove);
        put(inBin, kInBin);
        put(keysInBin, kKeysInBin);
        scf::YieldOp::create(b, loc);
      });
      barrier();
      auto word = [&](int64_t at) {
        return arith::TruncIOp::create(
                   b, loc, i32Type,
                   memref::LoadOp::create(b, loc, words,
                                          ValueRange{e.index(at)}))
            .getResult();
      };
      Value bin = arith::ExtUIOp::create(b, loc, i64Type, word(kBin));
      Value newNeed = arith::SubIOp::create(b, loc, need, word(kAbove));
      Value inBin = word(kInBin);
      Value newPrefix = arith::OrIOp::create(
          b, loc, prefix, arith::ShLIOp::create(b, loc, bin, e.i64(shift)));
      Value newMask = arith::OrIOp::create(
          b, loc, mask,
          e.i64(static_cast<int64_t>(uint64_t(kBins - 1) << shift)));
      // Done when every key of the bin is needed or the bin holds one key;
      // and, with too little weight in all, at once with no floor.
      Value short_ =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, total, need);
      Value alone = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                          word(kKeysInBin), e.i32(1));
      Value exact = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                          inBin, newNeed);
      Value done = arith::OrIOp::create(
          b, loc, arith::OrIOp::create(b, loc, exact, alone), short_);
      newPrefix = arith::SelectOp::create(b, loc, short_, e.i64(0), newPrefix);
      scf::YieldOp::create(b, loc,
                           ValueRange{newPrefix, newMask, newNeed, done});
      b.setInsertionPointToStart(step.elseBlock());
      scf::YieldOp::create(b, loc, state);
    }
    state =
        SmallVector<Value>(step.getResults().begin(), step.getResults().end());
  }
  // Every key with the prefix's digits and any below weighs at least the
  // need: after an early stop the prefix's low digits are 0.
  return state[0];
}

void BlockSelect::cutToBest() {
  Value n = count();
  Value nIndex = arith::IndexCastOp::create(b, loc, b.getIndexType(), n);
  Value floor = kthLargest(n);
  strided(b, loc, thread, nIndex, threads, [&](Value i) {
    Value x = memref::LoadOp::create(b, loc, candidates, ValueRange{i});
    Value best =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, x, floor);
    scf::IfOp::create(b, loc, best, [&](OpBuilder &, Location) {
      Value at = memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addi,
                                             e.i32(1), counters,
                                             ValueRange{e.index(kKeptCount)});
      memref::StoreOp::create(
          b, loc, x, kept,
          ValueRange{arith::IndexCastOp::create(b, loc, b.getIndexType(), at)});
      scf::YieldOp::create(b, loc);
    });
  });
  barrier();
  strided(b, loc, thread, e.index(k), threads, [&](Value i) {
    memref::StoreOp::create(b, loc,
                            memref::LoadOp::create(b, loc, kept, ValueRange{i}),
                            candidates, ValueRange{i});
  });
  // Later keys must beat the k-th largest; `floor` is at most that and
  // above every key dropped.
  onFirstThread(b, loc, thread, [&] {
    setCount(e.i32(k));
    memref::StoreOp::create(b, loc, floor, words,
                            ValueRange{e.index(kThreshold)});
  });
  barrier();
}

/// `value` (i64) of the lane whose id differs from this one's in the bits of
/// `mask`, as two 32-bit shuffles.
static Value shuffleXor64(OpBuilder &b, Location loc, Value value,
                          int64_t mask) {
  Type i32Type = b.getI32Type(), i64Type = b.getI64Type();
  Value thirtyTwo = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(32));
  Value low = arith::TruncIOp::create(b, loc, i32Type, value);
  Value shifted = arith::ShRUIOp::create(b, loc, value, thirtyTwo);
  Value high = arith::TruncIOp::create(b, loc, i32Type, shifted);
  Value lowOther = shuffleXor(b, loc, low, mask);
  Value highOther = shuffleXor(b, loc, high, mask);
  Value wideHigh = arith::ExtUIOp::create(b, loc, i64Type, highOther);
  Value upper = arith::ShLIOp::create(b, loc, wideHigh, thirtyTwo);
  Value wideLow = arith::ExtUIOp::create(b, loc, i64Type, lowOther);
  return arith::OrIOp::create(b, loc, upper, wideLow);
}

/// Whether bit `bit` (a power of two) of `place` is clear. In the bitonic
/// network, runs of `size` whose bit `size` is clear sort descending (at
/// the last size every run), and of a pair at stride `stride` the lower
/// place is the one whose bit `stride` is clear.
static Value bitClear(OpBuilder &b, Location loc, Value place, int64_t bit) {
  Value masked = arith::AndIOp::create(
      b, loc, place, arith::ConstantIndexOp::create(b, loc, bit));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, masked,
                               arith::ConstantIndexOp::create(b, loc, 0));
}

/// Whether `place` keeps the larger key of its pair at the stage of
/// `stride` in runs of `size`: the lower place of a descending run, the
/// upper of an ascending one.
static Value keepsLarger(OpBuilder &b, Location loc, Value place, int64_t size,
                         int64_t stride) {
  Value descending = bitClear(b, loc, place, size);
  Value lower = bitClear(b, loc, place, stride);
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, descending,
                               lower);
}

/// Whether a place holding `x` keeps it against `y` (the keys of a pair),
/// given whether it keeps the larger.
static Value keepsOwn(OpBuilder &b, Location loc, Value larger, Value x,
                      Value y) {
  Value above = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt, x, y);
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, above, larger);
}

void BlockSelect::sortDescending() {
  // Keys in registers where the sorting threads (whole warps: the block's,
  // or enough for four keys each) hold two or more each.
  int64_t sorters = std::min(
      threads, std::max<int64_t>(kWarpLanes, sortSize / kKeysPerSorter));
  if (sortSize < 2 * sorters) {
    sortInSharedMemory();
  } else if (sorters == threads) {
    sortInRegisters(sorters);
  } else {
    Value sorts = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                        thread, e.index(sorters));
    scf::IfOp::create(b, loc, sorts, [&](OpBuilder &, Location) {
      sortInRegisters(sorters);
      scf::YieldOp::create(b, loc);
    });
  }
  barrier();
}

void BlockSelect::sortInSharedMemory() {
  // Fewer pairs than threads here: a pair a thread, a barrier between
  // stages.
  int64_t pairs = sortSize / 2;
  assert(pairs < threads);
  auto at = [&](Value i) {
    return memref::LoadOp::create(b, loc, candidates, ValueRange{i})
        .getResult();
  };
  // Keys x at a place and y past it, as the comparison leaves them: the
  // larger first in a descending run.
  auto exchange = [&](Value descending, Value &x, Value &y) {
    Value larger = arith::MaxUIOp::create(b, loc, x, y);
    Value smaller = arith::MinUIOp::create(b, loc, x, y);
    x = arith::SelectOp::create(b, loc, descending, larger, smaller);
    y = arith::SelectOp::create(b, loc, descending, smaller, larger);
  };
  // The first of the two places pair `p` of a stage takes: p's low bits
  // below `stride`, a 0 bit at `stride`, then p's high bits.
  auto firstPlace = [&](Value p, int64_t stride) {
    Value low = arith::RemUIOp::create(b, loc, p, e.index(stride));
    return arith::AddIOp::create(
               b, loc,
               arith::MulIOp::create(
                   b, loc, arith::DivUIOp::create(b, loc, p, e.index(stride)),
                   e.index(2 * stride)),
               low)
        .getResult();
  };
  Value sorts = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, thread,
                                      e.index(pairs));
  for (int64_t size = 2; size <= sortSize; size *= 2) {
    for (int64_t stride = size / 2; stride >= 1; stride /= 2) {
      if (size > 2) // every stage but the first
        barrier();
      scf::IfOp::create(b, loc, sorts, [&](OpBuilder &, Location) {
        Value i = firstPlace(thread, stride);
        Value j = arith::AddIOp::create(b, loc, i, e.index(stride));
        Value x = at(i), y = at(j);
        exchange(bitClear(b, loc, i, size), x, y);
        memref::StoreOp::create(b, loc, x, candidates, ValueRange{i});
        memref::StoreOp::create(b, loc, y, candidates, ValueRange{j});
        scf::YieldOp::create(b, loc);
      });
    }
  }
}

void BlockSelect::sortInRegisters(int64_t sorters) {
  // The bitonic network with the keys in registers: thread t holds the
  // `perThread` places t * perThread + r, so that strides below perThread
  // pair a thread's own keys, strides up to a warp's places pair lanes (by
  // shuffles), and only the few larger ones go through shared memory, a
  // barrier each.
  int64_t perThread = sortSize / sorters;
  int64_t warpPlaces = perThread * kWarpLanes;
  Value first = arith::MulIOp::create(b, loc, thread, e.index(perThread));
  SmallVector<Value> places;
  for (int64_t r = 0; r < perThread; ++r)
    places.push_back(arith::AddIOp::create(b, loc, first, e.index(r)));
  SmallVector<Value> keys;
  for (Value place : places)
    keys.push_back(
        memref::LoadOp::create(b, loc, candidates, ValueRange{place}));

  // Pairs of a thread's own keys.
  auto exchangeOwn = [&](int64_t size, int64_t stride) {
    for (int64_t r = 0; r < perThread; ++r) {
      if (r & stride)
        continue;
      Value larger = keepsLarger(b, loc, places[r], size, stride);
      Value x = keys[r], y = keys[r + stride];
      Value own = keepsOwn(b, loc, larger, x, y);
      keys[r] = arith::SelectOp::create(b, loc, own, x, y);
      Value smaller = arith::XOrIOp::create(
          b, loc, larger,
          arith::ConstantOp::create(b, loc, b.getBoolAttr(true)));
      Value partnerOwn = keepsOwn(b, loc, smaller, x, y);
      keys[r + stride] = arith::SelectOp::create(b, loc, partnerOwn, x, y);
    }
  };
  // Each key against its partner's, `others`.
  auto exchangeWith = [&](ArrayRef<Value> others, int64_t size,
                          int64_t stride) {
    for (int64_t r = 0; r < perThread; ++r) {
      Value larger = keepsLarger(b, loc, places[r], size, stride);
      Value own = keepsOwn(b, loc, larger, keys[r], others[r]);
      keys[r] = arith::SelectOp::create(b, loc, own, keys[r], others[r]);
    }
  };
  // The block's barrier, or a named one where only some threads sort.
  auto sync = [&] {
    if (sorters == threads)
      barrier();
    else
      syncThreads(b, loc, kSortBarrier, sorters);
  };
  // Shared stages alternate between two buffers, so that a stage's stores
  // never meet the last one's loads, the last one in `kept`.
  int64_t sharedStages = 0;
  for (int64_t size = 2 * warpPlaces; size <= sortSize; size *= 2)
    sharedStages += llvm::Log2_64(size / warpPlaces);
  bool inKept = sharedStages % 2 == 1;
  auto partnersThroughShared = [&](int64_t stride) {
    Value buffer = inKept ? kept : candidates;
    inKept = !inKept;
    for (int64_t r = 0; r < perThread; ++r)
      memref::StoreOp::create(b, loc, keys[r], buffer, ValueRange{places[r]});
    sync();
    SmallVector<Value> others;
    for (Value place : places) {
      Value partner = arith::XOrIOp::create(b, loc, place, e.index(stride));
      others.push_back(
          memref::LoadOp::create(b, loc, buffer, ValueRange{partner}));
    }
    return others;
  };
  for (int64_t size = 2; size <= sortSize; size *= 2) {
    for (int64_t stride = size / 2; stride >= 1; stride /= 2) {
      if (stride < perThread) {
        exchangeOwn(size, stride);
        continue;
      }
      SmallVector<Value> others;
      if (stride < warpPlaces) {
        for (Value key : keys)
          others.push_back(shuffleXor64(b, loc, key, stride / perThread));
      } else {
        others = partnersThroughShared(stride);
      }
      exchangeWith(others, size, stride);
    }
  }
  // Every load from the buffers before the sorted keys land in
  // `candidates`.
  if (sharedStages > 0)
    sync();
  for (int64_t r = 0; r < perThread; ++r)
    memref::StoreOp::create(b, loc, keys[r], candidates, ValueRange{places[r]});
}

void BlockSelect::finish() {
  barrier();
  Value n = count();
  barrier();
  scf::IfOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, n, e.i32(k)),
      [&](OpBuilder &, Location) {
        cutToBest();
        scf::YieldOp::create(b, loc);
      });
  Value held = arith::IndexCastOp::create(
      b, loc, b.getIndexType(), arith::MinSIOp::create(b, loc, n, e.i32(k)));
  strided(b, loc, arith::AddIOp::create(b, loc, held, thread),
          e.index(sortSize), threads, [&](Value i) {
            memref::StoreOp::create(b, loc, e.i64(0), candidates,
                                    ValueRange{i});
          });
  barrier();
  sortDescending();
}

Value BlockSelect::key(Value i) {
  return memref::LoadOp::create(b, loc, candidates, ValueRange{i});
}

Value BlockSelect::rankKey(OpBuilder &b, Location loc, Value score, Value row) {
  Type i32Type = b.getI32Type(), i64Type = b.getI64Type();
  auto c32 = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  };
  // -0 and +0 are one score.
  Value canonical = arith::AddFOp::create(
      b, loc, score, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0)));
  Value bits = arith::BitcastOp::create(b, loc, i32Type, canonical);
  Value negative =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, bits, c32(0));
  // Negative floats reversed, positive ones above them.
  Value positive = arith::OrIOp::create(b, loc, bits, c32(INT32_MIN));
  Value ordered = arith::SelectOp::create(
      b, loc, negative, arith::XOrIOp::create(b, loc, bits, c32(-1)), positive);
  Value high = arith::ShLIOp::create(
      b, loc, arith::ExtUIOp::create(b, loc, i64Type, ordered),
      arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(32)));
  Value rowBits = arith::XOrIOp::create(
      b, loc, arith::IndexCastOp::create(b, loc, i32Type, row), c32(-1));
  return arith::OrIOp::create(b, loc, high,
                              arith::ExtUIOp::create(b, loc, i64Type, rowBits));
}

Value BlockSelect::rowOfKey(OpBuilder &b, Location loc, Value key) {
  Type i32Type = b.getI32Type();
  Value none = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq, key,
      arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0)));
  Value row = arith::XOrIOp::create(
      b, loc, arith::TruncIOp::create(b, loc, i32Type, key),
      arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(-1)));
  return arith::SelectOp::create(
      b, loc, none, arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(-1)),
      row);
}

} // namespace v4a::gpu
