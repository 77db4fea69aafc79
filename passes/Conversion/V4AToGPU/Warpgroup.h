//===- Warpgroup.h - tensor-core and async-copy kit pieces -----*- C++ -*-===//
//
// The sm_90 pieces kernel families share for matrix products: warpgroup MMAs
// (wgmma) on operands in shared memory, their matrix descriptors over the
// 128-byte swizzle layout below, accumulator fragments and their
// coordinates, 16-byte cp.async copies with zero fill, and views of the
// dynamic shared memory. Each builds ops at the builder's insertion point
// inside a gpu.launch body.
//
// The 128-byte swizzle layout of a tile of rows of bf16: an atom holds 8
// rows by 64 elements (1 KiB, 1 KiB-aligned), row r of the atom at byte
// 128 r, its 16-byte chunk c at chunk position c ^ r; the atoms of a row
// group follow each other along the row, the row groups follow each other.
// The same bytes serve as a K-major operand (rows as M or N, elements along
// K) and as an MN-major one (rows along K, elements along N), which is what
// lets attention use one tile of rows for Q.K^T and for P.V; and a row's
// 128 contiguous bytes land on all 32 banks.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_PASSES_CONVERSION_V4ATOGPU_WARPGROUP_H
#define V4A_PASSES_CONVERSION_V4ATOGPU_WARPGROUP_H

#include "mlir/IR/Builders.h"

#include <optional>

namespace v4a::gpu {

/// Threads of a warpgroup, and the M of its MMAs.
inline constexpr int64_t kWarpgroupThreads = 128;
inline constexpr int64_t kMmaM = 64;
/// K of one bf16 MMA; bytes of a swizzle atom and of one of its rows.
inline constexpr int64_t kMmaK = 16;
inline constexpr int64_t kSwizzleAtomBytes = 1024;
inline constexpr int64_t kSwizzleRowBytes = 128;

/// The block's dynamic shared memory (memref<?xi8, workgroup>).
mlir::Value dynamicShared(mlir::OpBuilder &b, mlir::Location loc);

/// A view of `count` elements of `element` at byte `offset` (an index)
/// of `shared`.
mlir::Value sharedView(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value shared, mlir::Value offset,
                       mlir::Type element, int64_t count);

/// The address (i64) of the first element of `buffer`: the shared-window
/// offset for workgroup memory, the global address for device memory.
mlir::Value addressOf(mlir::OpBuilder &b, mlir::Location loc,
                      mlir::Value buffer);

/// The dynamic shared memory `shared` aligned up to a swizzle atom: its
/// address (i64) and the bytes skipped (an index). Plans keep a spare atom
/// at the end for it.
struct AlignedShared {
  mlir::Value base, pad;
};
AlignedShared alignToAtom(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Value shared);

/// Copies 16 bytes from global address `from` to shared address `to`
/// (i64 each) without waiting; with `valid` false it reads nothing and
/// writes zeros (`from` must still be a mapped address).
void copyAsync16(mlir::OpBuilder &b, mlir::Location loc, mlir::Value to,
                 mlir::Value from, mlir::Value valid);
/// Copies 8 bytes from global address `from` to shared address `to` (each
/// 8-byte aligned) without waiting, through L1 (cp.async's 8-byte form);
/// with `valid` false it reads nothing and writes zeros.
void copyAsync8(mlir::OpBuilder &b, mlir::Location loc, mlir::Value to,
                mlir::Value from, mlir::Value valid);
/// Copies 4 bytes (each address 4-byte aligned) likewise.
void copyAsync4(mlir::OpBuilder &b, mlir::Location loc, mlir::Value to,
                mlir::Value from, mlir::Value valid);
/// A load of `type` from shared address `address` (i64, aligned to
/// `alignment` bytes), and a store of `value` there.
mlir::Value loadShared(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value address, mlir::Type type,
                       unsigned alignment);
void storeShared(mlir::OpBuilder &b, mlir::Location loc, mlir::Value address,
                 mlir::Value value, unsigned alignment);
/// Four 8 x 8 matrices of b16 from a warp's registers into shared memory
/// (stmatrix .x4): word i of each lane is its pair of matrix i at row
/// lane / 4, columns 2 (lane % 4) and + 1, the layout of an MMA's
/// accumulator fragment rounded to pairs; lane 8i + j gives `address`, the
/// shared address (i64, 16-byte aligned) of row j of matrix i.
void storeMatrices(mlir::OpBuilder &b, mlir::Location loc, mlir::Value address,
                   llvm::ArrayRef<mlir::Value> words);
/// Waits for the warp's lanes, and orders their shared-memory accesses
/// before it ahead of those after it.
void syncWarp(mlir::OpBuilder &b, mlir::Location loc);
/// A load of `type` from global address `address` (i64, aligned to
/// `alignment` bytes) into registers.
mlir::Value loadGlobal(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value address, mlir::Type type,
                       unsigned alignment);
/// A store of `value` to global address `address` (i64, aligned to
/// `alignment` bytes).
void storeGlobal(mlir::OpBuilder &b, mlir::Location loc, mlir::Value address,
                 mlir::Value value, unsigned alignment);
/// Closes the copies issued so far into a group; waits until at most
/// `pending` groups of this thread are in flight.
void commitCopies(mlir::OpBuilder &b, mlir::Location loc);
void waitCopies(mlir::OpBuilder &b, mlir::Location loc, int32_t pending);

/// The byte offset of 16-byte chunk `chunk` of row `row` (indices) in a
/// tile of the 128-byte swizzle layout `atoms` atoms wide.
mlir::Value swizzledOffset(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value row, mlir::Value chunk, int64_t atoms);

/// How many bytes past copy 0 copy `copy` of a thread of copyTileAsync
/// lands, the same for every thread, when the layout makes it a constant
/// (the threads / 8 rows between a thread's copies are whole atom rows, and
/// the tile's `rows` a multiple of them); nullopt otherwise. `tileChunks`:
/// the tile's row width in chunks.
std::optional<int64_t> tileCopyStep(int64_t copy, int64_t rows, int64_t threads,
                                    int64_t tileChunks);

/// Issues the copies of a tile of `rows` rows of `rowChunks` 16-byte chunks
/// (a multiple of 8) into the swizzle layout at shared address `tile`,
/// spread over the `threads` threads of the block (`thread`: this one).
/// `source(row)` gives a row's global address (i64) and whether it exists;
/// a missing row is zero-filled (reading nothing at `fallback`). The 8
/// lanes of a quarter warp take the 8 chunks of 128 contiguous bytes of a
/// row: whole sectors from memory and one atom row (all 32 banks) in
/// shared memory. A thread meets only a few distinct rows, and `source`
/// is built once for each. With `tileChunks` (>= rowChunks, a multiple of
/// 8) the tile's rows are that wide and the copy fills their chunks
/// `firstChunk` .. `firstChunk + rowChunks - 1` (`firstChunk` a multiple of
/// 8: whole atoms).
void copyTileAsync(
    mlir::OpBuilder &b, mlir::Location loc, mlir::Value tile, int64_t rows,
    int64_t rowChunks, int64_t threads, mlir::Value thread,
    llvm::function_ref<std::pair<mlir::Value, mlir::Value>(mlir::Value)> source,
    mlir::Value fallback, int64_t firstChunk = 0, int64_t tileChunks = 0);

/// Split arrive/wait barriers (mbarrier) at shared address `address`
/// (i64, 8-byte aligned): set up for `count` arrivals a phase; an arrival
/// that releases this thread's earlier writes to the waiters; an arrival
/// made when this thread's cp.async copies issued so far have landed
/// (counted among the `count`); a wait for the phase of parity `parity`
/// (an i32, 0 or 1) to complete.
void initBarrier(mlir::OpBuilder &b, mlir::Location loc, mlir::Value address,
                 int64_t count);
void arriveBarrier(mlir::OpBuilder &b, mlir::Location loc, mlir::Value address);
void arriveBarrierOnCopies(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value address);
void waitBarrier(mlir::OpBuilder &b, mlir::Location loc, mlir::Value address,
                 mlir::Value parity);

/// A copy of `value` (i64) that later passes cannot see through: what a
/// loop derives from it (addresses, descriptors: one add each) stays in
/// the loop instead of being hoisted out, a register apiece for the whole
/// loop.
mlir::Value opaque(mlir::OpBuilder &b, mlir::Location loc, mlir::Value value);

/// Named barrier `id` (1-15; 0 is the block's) among `threads` threads (a
/// multiple of 32): wait until all have come, or only announce arrival.
void syncThreads(mlir::OpBuilder &b, mlir::Location loc, int64_t id,
                 int64_t threads);
void arriveThreads(mlir::OpBuilder &b, mlir::Location loc, int64_t id,
                   int64_t threads);

/// Makes this thread's generic writes to shared memory visible to the
/// tensor cores (the async proxy); a barrier must follow before an MMA of
/// another thread reads them.
void fenceSharedForMma(mlir::OpBuilder &b, mlir::Location loc);

/// The matrix descriptor of an operand in the 128-byte swizzle layout at
/// shared address `address` (i64, inside a 1 KiB-aligned atom): for a
/// K-major operand `stride` bytes between 8-row groups along M or N
/// (`leading` unused); for an MN-major one `leading` bytes between atoms
/// along N and `stride` between 8-row groups along K.
mlir::Value matrixDescriptor(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value address, int64_t leading,
                             int64_t stride);

/// `descriptor` moved `bytes` (a multiple of 16) further into shared
/// memory: one add, since the start field cannot carry past its 14 bits
/// inside the 228 KiB shared window.
mlir::Value advanceDescriptor(mlir::OpBuilder &b, mlir::Location loc,
                              mlir::Value descriptor, int64_t bytes);

/// An m64nNk16 accumulator of f32 (!llvm.struct of N/2 f32), all zeros.
mlir::Value zeroAccumulator(mlir::OpBuilder &b, mlir::Location loc, int64_t n);
/// An accumulator for a first MMA that does not accumulate: nothing sets its
/// registers. Zeros would be moved into them next to the MMA, after the fence,
/// and ptxas then serializes the MMAs in flight (its C7511).
mlir::Value unsetAccumulator(mlir::OpBuilder &b, mlir::Location loc, int64_t n);
/// The accumulator's registers, and an accumulator of `values`.
llvm::SmallVector<mlir::Value> unpackAccumulator(mlir::OpBuilder &b,
                                                 mlir::Location loc,
                                                 mlir::Value accumulator);
mlir::Value packAccumulator(mlir::OpBuilder &b, mlir::Location loc,
                            llvm::ArrayRef<mlir::Value> values);

/// Where register `r` of an m64nN f32 accumulator sits for `lane` of its
/// warp `warp` (in the warpgroup): row (M) and column (N).
struct FragmentPlace {
  mlir::Value row;
  mlir::Value column;
};
FragmentPlace fragmentPlace(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value warp, mlir::Value lane, int64_t r);

/// D += A.B over one k16 step of bf16 operands in shared memory, f32
/// accumulator `accumulator` of N = `n`; `transposeB` reads B MN-major.
/// `accumulate` false ignores the accumulator's values (D = A.B).
mlir::Value mmaBF16(mlir::OpBuilder &b, mlir::Location loc, mlir::Value descA,
                    mlir::Value descB, mlir::Value accumulator, int64_t n,
                    bool transposeB, bool accumulate);
/// D += A.B over one k16 step with A (64 x 16 bf16) from registers: `a`
/// holds this thread's four i32 words of the fragment, (row, column
/// pairs) (g, 2c), (g + 8, 2c), (g, 2c + 8), (g + 8, 2c + 8) for row
/// g = 16 warp + lane / 4 and c = lane % 4 (each word two bf16, the lower
/// column in the low half); B K-major in shared memory. MLIR's wgmma op
/// takes descriptors only, so this is inline PTX. The words must be
/// settled (settleAndFenceWords) before the first MMA that reads them.
mlir::Value mmaBF16RegisterA(mlir::OpBuilder &b, mlir::Location loc,
                             llvm::ArrayRef<mlir::Value> a, mlir::Value descB,
                             mlir::Value accumulator, int64_t n,
                             bool accumulate);
/// D += A.B over one k32 step of e4m3 operands with A (64 x 32 bytes) from
/// registers: as mmaBF16RegisterA with four bytes where that has a pair,
/// the words (g, 4c), (g + 8, 4c), (g, 4c + 16), (g + 8, 4c + 16) of byte
/// columns (the lowest column in the lowest byte); B (e4m3) K-major in
/// shared memory.
mlir::Value mmaE4M3RegisterA(mlir::OpBuilder &b, mlir::Location loc,
                             llvm::ArrayRef<mlir::Value> a, mlir::Value descB,
                             mlir::Value accumulator, int64_t n,
                             bool accumulate);
/// The fence for MMAs whose A fragments are `words` (i32), which it
/// returns: as settleAndFence, for registers that MMAs read.
llvm::SmallVector<mlir::Value>
settleAndFenceWords(mlir::OpBuilder &b, mlir::Location loc,
                    llvm::ArrayRef<mlir::Value> words);
/// Keeps `values` (i32, an MMA's A fragments) in their registers up to this
/// point: a loop that issues the next tile's MMAs before waiting for these
/// carries them to here, after the wait, so that nothing is written into
/// their registers while the MMAs read them.
void keepUntilHere(mlir::OpBuilder &b, mlir::Location loc,
                   mlir::ValueRange values);
/// Orders register accesses before the MMAs that follow; closes the MMAs
/// issued so far into a group; waits until at most `pending` are in flight.
void mmaFence(mlir::OpBuilder &b, mlir::Location loc);
void mmaCommit(mlir::OpBuilder &b, mlir::Location loc);
void mmaWait(mlir::OpBuilder &b, mlir::Location loc, int64_t pending);
/// The fence for MMAs that accumulate into `accumulators`, which it
/// returns: their registers are settled before the fence, so that no copy
/// the register allocator makes of them (shared or constant values) lands
/// between the fence and the MMA, where ptxas would serialize the MMAs in
/// flight.
llvm::SmallVector<mlir::Value, 2>
settleAndFence(mlir::OpBuilder &b, mlir::Location loc,
               llvm::ArrayRef<mlir::Value> accumulators);

} // namespace v4a::gpu

#endif // V4A_PASSES_CONVERSION_V4ATOGPU_WARPGROUP_H
