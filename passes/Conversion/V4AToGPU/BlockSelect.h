//===- BlockSelect.h - a block's streaming top-k in shared memory -*- C++
//-*-===//
//
// The k largest of a stream of 64-bit keys, kept by one block (128 threads
// unless told) in shared memory: keys are offered a block of the stream at a
// time, those above a running threshold are appended to a candidate buffer,
// and a full buffer is cut back to its k largest by a radix select (8-bit
// digits from the top, a histogram in shared memory), whose k-th key becomes
// the new threshold. At the end the k largest are sorted, descending, by a
// bitonic network, its keys in registers where each sorting thread holds
// two or more. Keys are compared as unsigned integers and must be distinct;
// 0 means "none" and is never kept. The result depends only on the set of
// keys offered, never on their order or on how a stream was split.
//
// A score and its row make a key (`rankKey`): the score's bits in an order
// that sorts like the float, above the row's complement, so that keys
// descending are scores descending, then rows ascending.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_PASSES_CONVERSION_V4ATOGPU_BLOCKSELECT_H
#define V4A_PASSES_CONVERSION_V4ATOGPU_BLOCKSELECT_H

#include "passes/Conversion/V4AToCPU/LoopEmitter.h"

#include "mlir/IR/Builders.h"

namespace v4a::gpu {

class BlockSelect {
public:
  /// Threads of the block that runs a selection, unless told: a power of
  /// two from one warp to kMostThreads.
  static constexpr int64_t kThreads = 128;
  static constexpr int64_t kMostThreads = 1024;

  /// The keys the final sort of a selection of `k` keys orders (a power of
  /// two, at least k).
  static int64_t sortSizeFor(int64_t k);
  /// The fewest candidates a selection of `k` keys taking up to `incoming`
  /// keys between two calls of makeRoom holds. More make cuts rarer: each
  /// cut leaves k, and makeRoom cuts when another round might not fit.
  static int64_t leastCapacity(int64_t k, int64_t incoming);
  /// The shared memory such a selection with room for `room` candidates
  /// (never fewer than the least) over `threads` needs (bytes, a multiple
  /// of 8).
  static int64_t sharedBytes(int64_t k, int64_t incoming, int64_t room = 0,
                             int64_t threads = kThreads);

  /// A selection over the shared bytes at `shared` + `offset` (memref<?xi8>,
  /// workgroup; the offset an index, a multiple of 8). Every thread of the
  /// block (of `threads`) constructs it; `start` must run before the first
  /// offer. Room for `room` candidates (never fewer than the least).
  BlockSelect(mlir::OpBuilder &b, mlir::Location loc, mlir::Value shared,
              mlir::Value offset, mlir::Value thread, int64_t k,
              int64_t incoming, int64_t room = 0, int64_t threads = kThreads);

  /// Empties the buffer (thread 0; a barrier follows before any offer).
  void start();
  /// Raises the threshold to `floor` (any thread, after start's barrier):
  /// only keys above it are taken.
  void raiseFloor(mlir::Value floor);
  /// Offers `key` (i64) when `valid`: appended if above the threshold. At
  /// most `incoming` offers of all threads between two makeRoom calls.
  void offer(mlir::Value key, mlir::Value valid);
  /// After a round of offers (every thread): cuts the buffer back to its k
  /// largest when another round might not fit.
  void makeRoom();
  /// Every thread: cuts the buffer to its k largest and sorts them,
  /// descending; then key(i) for i < k is the i-th largest (0: none).
  void finish();
  mlir::Value key(mlir::Value i);
  /// The block's threads.
  int64_t threadCount() const { return threads; }

  /// The largest key v of `keys` (shared i64, `n` of them, 0s skipped) such
  /// that the keys at or above v weigh at least `need` (i32) in all, or a
  /// value below v with that property and with no key between; 0 when all
  /// the keys weigh less. A null `weight` weighs each key 1. Every thread;
  /// uses the histogram and counters.
  mlir::Value
  weightedFloor(mlir::Value keys, mlir::Value n, mlir::Value need,
                llvm::function_ref<mlir::Value(mlir::Value)> weight);
  /// The inclusive scan of `local` (i32) over the block's threads in thread
  /// order, and in `total` its sum. Every thread; a barrier must separate
  /// two scans.
  mlir::Value inclusiveScan(mlir::Value local, mlir::Value &total);

  /// The key of `score` (f32) at `row` (index, < 2^31), and back the row of
  /// a key (i32, -1 for 0).
  static mlir::Value rankKey(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value score, mlir::Value row);
  static mlir::Value rowOfKey(mlir::OpBuilder &b, mlir::Location loc,
                              mlir::Value key);

private:
  /// Cuts the buffer to its k largest (count > k).
  void cutToBest();
  /// The smallest key of the k largest of the buffer, or a value below it
  /// and above every key outside them.
  mlir::Value kthLargest(mlir::Value count);
  /// The final sort (every thread; a barrier after), in one of two forms:
  /// a pair a thread in shared memory where the keys are fewer than two a
  /// warp's lanes, else with the keys in registers.
  void sortDescending();
  void sortInSharedMemory();
  /// The sort by the block's first `sorters` threads (whole warps), each
  /// with sortSize / sorters keys (at least two) in registers. Where they
  /// are not the whole block, the caller runs it on them alone and meets
  /// the rest at the block's barrier after.
  void sortInRegisters(int64_t sorters);

  mlir::Value count();
  void setCount(mlir::Value count);
  void barrier();

  mlir::OpBuilder &b;
  mlir::Location loc;
  /// Constants.
  cpu::LoopEmitter e;
  mlir::Value thread;
  int64_t k, sortSize, capacity, incoming, threads;
  /// Shared views: candidates (i64), kept keys (i64), the histogram (weights
  /// per bin), keys per bin and the counters (i32), the threshold and the
  /// select's answers (i64).
  mlir::Value candidates, kept, histogram, binCounts, counters, words;
};

} // namespace v4a::gpu

#endif // V4A_PASSES_CONVERSION_V4ATOGPU_BLOCKSELECT_H
