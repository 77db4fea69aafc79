//===- LoopEmitter.h - scalar loop nests over buffers -----------*- C++ -*-===//
//
// A thin helper for the CPU lowering: scf loops, f32 loads and stores that
// convert to and from the buffer's element type, and the tensor <-> buffer
// bridges at the boundary of a lowered op.
//
// Ops are created where they are called, so a call whose operands create
// ops (e.add(e.mul(a, b), e.rem(c, d))) creates them in the order its
// compiler evaluates arguments, which GCC and Clang choose differently.
// Here and in the GPU families such operands are built in statements of
// their own, so that every build of v4a writes the same IR, PTX and
// packages (test/Import/compiler-independence.test).
//
//===----------------------------------------------------------------------===//

#ifndef V4A_PASSES_CONVERSION_V4ATOCPU_LOOPEMITTER_H
#define V4A_PASSES_CONVERSION_V4ATOCPU_LOOPEMITTER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"

#include <functional>

namespace v4a::cpu {

class LoopEmitter {
public:
  LoopEmitter(mlir::OpBuilder &builder, mlir::Location loc)
      : b(builder), loc(loc) {}

  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() { return loc; }

  mlir::Value index(int64_t value);
  mlir::Value f32(double value);
  mlir::Value i32(int64_t value);
  mlir::Value i64(int64_t value);

  /// A read-only buffer holding `tensor`.
  mlir::Value buffer(mlir::Value tensor);
  /// A new buffer shaped like `like` (a tensor type) with dynamic sizes read
  /// from `sizes`, and the tensor view of a finished buffer.
  mlir::Value alloc(mlir::Type tensorType, mlir::ValueRange dynamicSizes);
  /// A new buffer for `tensorType` whose extents are `extents`, one per
  /// dimension (only the dynamic ones are used).
  mlir::Value allocShaped(mlir::Type tensorType,
                          llvm::ArrayRef<mlir::Value> extents);
  mlir::Value tensor(mlir::Value buffer, mlir::Type tensorType);
  /// A scratch f32 buffer of `size` elements.
  mlir::Value scratch(mlir::Value size);

  mlir::Value dim(mlir::Value buffer, int64_t index);
  /// Dynamic extents of a buffer, in order.
  llvm::SmallVector<mlir::Value> dynamicDims(mlir::Value buffer);

  /// Loads as f32 (or as the index width for integer buffers).
  mlir::Value load(mlir::Value buffer, mlir::ValueRange indices);
  /// Stores an f32 value, rounding to the buffer's float element type.
  void store(mlir::Value value, mlir::Value buffer, mlir::ValueRange indices);
  /// Loads an integer element as index.
  mlir::Value loadIndex(mlir::Value buffer, mlir::ValueRange indices);
  void storeInt(mlir::Value value, mlir::Value buffer,
                mlir::ValueRange indices);

  void loop(mlir::Value lower, mlir::Value upper,
            const std::function<void(mlir::Value)> &body);
  /// A loop whose iterations are independent (they write disjoint outputs
  /// and only read shared buffers): it may run on several threads.
  void parallelLoop(mlir::Value lower, mlir::Value upper,
                    const std::function<void(mlir::Value)> &body);
  /// The same over two dimensions, [0, upper0) x [0, upper1), as one loop
  /// (both dimensions are the grid of a GPU kernel).
  void parallelLoop(mlir::Value upper0, mlir::Value upper1,
                    const std::function<void(mlir::Value, mlir::Value)> &body);
  /// A loop carrying values; returns their final values.
  llvm::SmallVector<mlir::Value>
  loop(mlir::Value lower, mlir::Value upper, mlir::ValueRange init,
       const std::function<llvm::SmallVector<mlir::Value>(
           mlir::Value, mlir::ValueRange)> &body);
  void ifThen(mlir::Value condition, const std::function<void()> &body);
  mlir::Value select(mlir::Value condition, mlir::Value a, mlir::Value b);

  // Arithmetic shorthands (floats and vectors of floats, or integers).
  mlir::Value add(mlir::Value a, mlir::Value b);
  mlir::Value sub(mlir::Value a, mlir::Value b);
  mlir::Value mul(mlir::Value a, mlir::Value b);
  mlir::Value div(mlir::Value a, mlir::Value b);
  mlir::Value max(mlir::Value a, mlir::Value b);
  mlir::Value min(mlir::Value a, mlir::Value b);
  mlir::Value rem(mlir::Value a, mlir::Value b);
  mlir::Value cmp(mlir::arith::CmpFPredicate predicate, mlir::Value a,
                  mlir::Value b);
  mlir::Value cmp(mlir::arith::CmpIPredicate predicate, mlir::Value a,
                  mlir::Value b);
  mlir::Value abs(mlir::Value a);
  mlir::Value exp(mlir::Value a);
  mlir::Value sqrt(mlir::Value a);
  mlir::Value indexToF32(mlir::Value a);

  /// The nearest value of a float format with `mantissaBits` and minimum
  /// normal exponent `minExponent`, ties to even, saturating at +-maxValue.
  mlir::Value roundToMinifloat(mlir::Value value, int mantissaBits,
                               int minExponent, double maxValue);
  /// e4m3fn / ue8m0 bits (i8) to f32, and an f32 on the e4m3 grid to bits.
  mlir::Value fromE4M3Bits(mlir::Value byte);
  mlir::Value fromUE8M0Bits(mlir::Value byte);
  mlir::Value toE4M3Bits(mlir::Value value);
  /// e2m1 codes (the low 4 bits of an i8) to f32, and an f32 on the e2m1
  /// grid to its code (i8).
  mlir::Value fromE2M1Bits(mlir::Value code);
  mlir::Value toE2M1Bits(mlir::Value value);
  /// A power-of-two f32 (a block scale) to its ue8m0 byte: the exponent.
  mlir::Value toUE8M0Bits(mlir::Value scale);
  /// The smallest power of two >= value (a positive normal f32).
  mlir::Value ceilPowerOfTwo(mlir::Value value);
  /// The value rounded to bf16 and back.
  mlir::Value roundBF16(mlir::Value value);

private:
  /// Integers loaded from buffers become indices, and back when stored.
  mlir::Value castIndex(mlir::Value integer);
  mlir::Value indexTo(mlir::Type type, mlir::Value index);

  mlir::OpBuilder &b;
  mlir::Location loc;
};

/// The widest compressed row count of a step: context[0] / ratio, from the
/// bound the host knows (a GPU's host reads it without a device round
/// trip).
mlir::Value boundRows(LoopEmitter &e, mlir::Value context, int64_t ratio);

} // namespace v4a::cpu

#endif // V4A_PASSES_CONVERSION_V4ATOCPU_LOOPEMITTER_H
