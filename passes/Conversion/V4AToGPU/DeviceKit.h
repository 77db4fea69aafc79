//===- DeviceKit.h - device-side pieces the GPU kernel families share -*- C++
//-*-===//
//
// The atoms a kernel family is built from, kept apart from the families:
// lane and block reductions with shuffles, 16-byte row accesses of a thread's
// consecutive elements, roundings to an element type, and the launch of a
// named kernel. Each builds ops at the builder's insertion point inside a
// gpu.launch body.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_PASSES_CONVERSION_V4ATOGPU_DEVICEKIT_H
#define V4A_PASSES_CONVERSION_V4ATOGPU_DEVICEKIT_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

namespace v4a::gpu {

/// Lanes of a warp.
inline constexpr int64_t kWarpLanes = 32;
/// Elements one thread holds of a row: 16 bytes of bf16.
inline constexpr int64_t kChunk = 8;

enum class Combine { Add, Max };

/// `x` combined with `y` (f32).
mlir::Value combine(mlir::OpBuilder &b, mlir::Location loc, Combine how,
                    mlir::Value x, mlir::Value y);

/// `value` of the lane whose id differs from this one's in the bits of
/// `mask` (a shuffle within the warp; every lane of the warp takes part).
mlir::Value shuffleXor(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value value, int64_t mask);

/// `value` of lane `lane` (an index) of this warp; every lane of the warp
/// takes part.
mlir::Value shuffleFromLane(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value value, mlir::Value lane);

/// The combination of `value` over each aligned group of `lanes` lanes (a
/// power of two, at most a warp), every lane of the group getting it. The
/// order of the combination is fixed (a butterfly), so all lanes agree
/// bitwise.
mlir::Value reduceLanes(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value value, int64_t lanes, Combine how);

/// The same over an aligned team of `lanes` threads larger than a warp (a
/// power of two): each warp reduces, its lane 0 writes the partial to
/// `partials` (workgroup memory, a slot per warp of the block), and every
/// thread adds its team's partials in warp order. Every thread of the block
/// must call it (it holds barriers).
mlir::Value reduceTeam(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value value, int64_t lanes, Combine how,
                       mlir::Value threadId, mlir::Value partials);

/// The sum of the squares of `values` (f32), in order from 0, and the
/// rms_norm factor 1 / sqrt(sum / width + eps) of a row whose squares sum
/// to `sum`: every family computes a row's norm so, so that a row gives
/// the same bits in every kernel.
mlir::Value sumOfSquares(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::ValueRange values);
mlir::Value rmsFactor(mlir::OpBuilder &b, mlir::Location loc, mlir::Value sum,
                      int64_t width, double eps);

/// Loads `count` consecutive elements at `indices` (the last index the
/// first element) as f32 values, in 16-byte accesses; with `valid` false
/// the values are zeros and nothing is read.
llvm::SmallVector<mlir::Value> loadChunk(mlir::OpBuilder &b, mlir::Location loc,
                                         mlir::Value buffer,
                                         mlir::ValueRange indices,
                                         int64_t count, mlir::Value valid);

/// Stores f32 `values` as the buffer's element type at `indices`, in
/// 16-byte accesses, when `valid`.
void storeChunk(mlir::OpBuilder &b, mlir::Location loc,
                llvm::ArrayRef<mlir::Value> values, mlir::Value buffer,
                mlir::ValueRange indices, mlir::Value valid);

/// Stores i8 `bytes` at byte `offset` of `buffer` (memref<?xi8>) in one
/// access (8 or 16 bytes, the offset a multiple of it).
void storeBytes(mlir::OpBuilder &b, mlir::Location loc,
                llvm::ArrayRef<mlir::Value> bytes, mlir::Value buffer,
                mlir::Value offset);

/// `value` (f32) rounded to `element` (bf16: to nearest even; f32: as is).
mlir::Value roundTo(mlir::OpBuilder &b, mlir::Location loc, mlir::Value value,
                    mlir::Type element);

/// Eight e4m3 values (the bytes of `bytes`, vector<2xi32>, first value in
/// the lowest byte) times the ue8m0 scale `scale` (i8: 2^(scale - 127)) as
/// eight bf16 (vector<4xi32>, first value in the lowest half): exact for
/// products that are normal bf16 values (subnormal ones are rounded; the
/// NaN codes 0x7F and 0xFF, which a saturating encoder never writes, give
/// finite values). The bytes move into bf16 fields with
/// integer operations (an e4m3 value is 2^120 times the bf16 of the same
/// sign, exponent and mantissa bits, subnormals included), and two bf16
/// multiplications apply 2^120 and the scale: no conversion instructions,
/// whose throughput would limit a copy of fp8 rows.
mlir::Value dequantizeE4M3x8(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value bytes, mlir::Value scale);

/// Eight e2m1 values (the nibbles of `codes`, i32, value i in nibble i)
/// times the ue8m0 scale `scale` (i8) as eight bf16 (vector<4xi32>): word p
/// holds value p in its low half and value p + 4 in its high half, so that
/// one shift and mask move both of a word's magnitudes and one more both
/// signs. Exact for every scale whose products are finite. A nibble's 3
/// magnitude bits placed at bf16's lowest exponent bit and top mantissa bit
/// are the e2m1 value times 2^-126 (the code for 0.5 becomes a subnormal),
/// so two bf16 multiplications, by 2^126 and by the scale, finish the
/// conversion.
mlir::Value dequantizeE2M1x8(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value codes, mlir::Value scale);

/// The bytes of the eight-byte pool `high`:`low` (i32 each) that the four
/// nibbles of `selector`'s low half pick, nibble i for byte i (prmt's
/// default mode: a nibble's bit 3 turns its byte into the picked byte's
/// sign bit repeated). One instruction whatever the selector.
mlir::Value selectBytes(mlir::OpBuilder &b, mlir::Location loc, mlir::Value low,
                        mlir::Value high, mlir::Value selector);

/// max(low, 0) and max(high, 0) (f32) rounded to the nearest bf16 (ties to
/// even), packed in an i32, `low` in the low half: one conversion.
mlir::Value reluToBF16x2(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::Value low, mlir::Value high);

/// A launch of `threads` threads per block over `blocks` blocks (host
/// values), with one workgroup buffer of `sharedFloats` f32 when non-zero
/// and `dynamicSharedBytes` of dynamic shared memory, named `name` in the
/// kernel module `v4a_gpu`; the builder is left at the start of its body.
mlir::gpu::LaunchOp createLaunch(mlir::OpBuilder &b, mlir::Location loc,
                                 llvm::StringRef name, mlir::Value blocks,
                                 int64_t threads, int64_t sharedFloats = 0,
                                 int64_t dynamicSharedBytes = 0);

/// The next kernel name of family `family` in `func`: `<func>_<family><n>`,
/// n counting the launches of that family the function already has.
std::string kernelName(mlir::Operation *func, llvm::StringRef family);

/// A private constant f32 table in the module, read in kernels through
/// memref.get_global (the kernel module gets its own copy).
mlir::Value constantTable(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Operation *anchor, llvm::StringRef name,
                          llvm::ArrayRef<float> values);

/// The cosine and sine of rope pair `pair` (index) at `position` (f32):
/// of position * freqs[pair]. Every family computes a rope angle so, so
/// that the same position and pair give the same bits in every kernel.
std::pair<mlir::Value, mlir::Value>
ropeCosSin(mlir::OpBuilder &b, mlir::Location loc, mlir::Value position,
           mlir::Value freqs, mlir::Value pair);
/// ropeCosSin of each of `pairs`, with every frequency loaded before the
/// first sine: a sine's slow path (stores to local memory) would hold each
/// later load behind it, a round trip each.
llvm::SmallVector<std::pair<mlir::Value, mlir::Value>>
ropeCosSins(mlir::OpBuilder &b, mlir::Location loc, mlir::Value position,
            mlir::Value freqs, mlir::ValueRange pairs);
/// Thread p < ropeDim / 2 stores the cos and sin of rope pair p at
/// `token`'s position (positions[token]) in slots `at` + p and `at` +
/// ropeDim / 2 + p of `shared` (f32), as ropeCosSin computes them.
void storeRopeAngles(mlir::OpBuilder &b, mlir::Location loc, int64_t ropeDim,
                     mlir::Value positions, mlir::Value token,
                     mlir::Value threadId, mlir::Value freqs,
                     mlir::Value shared, int64_t at);
/// Where column `column` (index) of a row lies against rope dims that
/// start at column `start`: its pair among them (0 before them) and
/// whether it is one of them.
struct RopeColumn {
  mlir::Value pair, inRope;
};
RopeColumn ropeColumn(mlir::OpBuilder &b, mlir::Location loc,
                      mlir::Value column, int64_t start);
/// The pair (re, im) turned by the angle of (c, s), or by its opposite when
/// `inverse`: (re c - im s, re s + im c), in f32.
std::pair<mlir::Value, mlir::Value>
rotatePair(mlir::OpBuilder &b, mlir::Location loc, mlir::Value re,
           mlir::Value im, mlir::Value c, mlir::Value s, bool inverse);

/// A read-only buffer of a ranked tensor (its shape, identity layout), and
/// the bytes of a KV cache (memref<?xi8>), for kernels that read them.
mlir::Value readOnlyBuffer(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value tensor);
mlir::Value cacheBytes(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value cache);

} // namespace v4a::gpu

#endif // V4A_PASSES_CONVERSION_V4ATOGPU_DEVICEKIT_H
