//===- LoopEmitter.cpp - scalar loop nests over buffers -------------------===//

#include "passes/Conversion/V4AToCPU/LoopEmitter.h"

#include "mlir/IR/TypeUtilities.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace v4a::cpu;

Value LoopEmitter::index(int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}
Value LoopEmitter::f32(double value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
}
Value LoopEmitter::i32(int64_t value) {
  return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(value));
}
Value LoopEmitter::i64(int64_t value) {
  return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(value));
}

Value LoopEmitter::buffer(Value tensorValue) {
  auto type = cast<TensorType>(tensorValue.getType());
  auto memrefType = bufferization::getMemRefTypeWithFullyDynamicLayout(type);
  return bufferization::ToBufferOp::create(b, loc, memrefType, tensorValue,
                                           b.getUnitAttr());
}

Value LoopEmitter::alloc(Type tensorType, ValueRange dynamicSizes) {
  auto type = cast<RankedTensorType>(tensorType);
  auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
  return memref::AllocOp::create(b, loc, memrefType, dynamicSizes);
}

Value LoopEmitter::allocShaped(Type tensorType, ArrayRef<Value> extents) {
  auto type = cast<RankedTensorType>(tensorType);
  SmallVector<Value> dynamic;
  for (auto [i, extent] : llvm::enumerate(extents))
    if (type.isDynamicDim(i))
      dynamic.push_back(extent);
  return alloc(type, dynamic);
}

Value LoopEmitter::tensor(Value bufferValue, Type tensorType) {
  return bufferization::ToTensorOp::create(b, loc, tensorType, bufferValue,
                                           /*restrict=*/true,
                                           /*writable=*/true);
}

Value LoopEmitter::scratch(Value size) {
  auto type = MemRefType::get({ShapedType::kDynamic}, b.getF32Type());
  return memref::AllocOp::create(b, loc, type, ValueRange{size});
}

Value LoopEmitter::dim(Value bufferValue, int64_t i) {
  return memref::DimOp::create(b, loc, bufferValue, i);
}

SmallVector<Value> LoopEmitter::dynamicDims(Value bufferValue) {
  SmallVector<Value> dims;
  auto type = cast<MemRefType>(bufferValue.getType());
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (type.isDynamicDim(i))
      dims.push_back(dim(bufferValue, i));
  return dims;
}

/// e4m3fn bits to f32: sign, 4 exponent bits (bias 7), 3 mantissa bits;
/// exponent 0 holds the subnormals m * 2^-9.
Value LoopEmitter::fromE4M3Bits(Value byte) {
  LoopEmitter &e = *this;
  Type i32 = b.getI32Type();
  Value bits = arith::ExtUIOp::create(b, loc, i32, byte);
  Value sign = arith::ShLIOp::create(
      b, loc, arith::AndIOp::create(b, loc, bits, e.i32(0x80)), e.i32(24));
  Value exponent = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, bits, e.i32(3)), e.i32(0xf));
  Value mantissa = arith::AndIOp::create(b, loc, bits, e.i32(0x7));
  Value mantissaField = arith::ShLIOp::create(b, loc, mantissa, e.i32(20));
  Value normalBits = arith::OrIOp::create(
      b, loc,
      arith::ShLIOp::create(b, loc, e.add(exponent, e.i32(120)), e.i32(23)),
      mantissaField);
  Value normal = arith::BitcastOp::create(
      b, loc, b.getF32Type(), arith::OrIOp::create(b, loc, normalBits, sign));
  Value subnormal =
      e.mul(arith::SIToFPOp::create(b, loc, b.getF32Type(), mantissa),
            e.f32(1.0 / 512.0));
  Value negative = e.cmp(arith::CmpIPredicate::ne, sign, e.i32(0));
  subnormal =
      e.select(negative, arith::NegFOp::create(b, loc, subnormal), subnormal);
  return e.select(e.cmp(arith::CmpIPredicate::eq, exponent, e.i32(0)),
                  subnormal, normal);
}

/// ue8m0 bits to f32: 2^(byte - 127).
Value LoopEmitter::fromUE8M0Bits(Value byte) {
  Value bits = arith::ExtUIOp::create(b, loc, b.getI32Type(), byte);
  return arith::BitcastOp::create(b, loc, b.getF32Type(),
                                  arith::ShLIOp::create(b, loc, bits, i32(23)));
}

Value LoopEmitter::toUE8M0Bits(Value scale) {
  Value bits = arith::BitcastOp::create(b, loc, b.getI32Type(), scale);
  return arith::TruncIOp::create(b, loc, b.getI8Type(),
                                 arith::ShRUIOp::create(b, loc, bits, i32(23)));
}

/// An f32 that lies on the e4m3 grid to its bits: normals keep the top three
/// mantissa bits, subnormals are m * 2^-9.
Value LoopEmitter::toE4M3Bits(Value value) {
  Type word = b.getI32Type();
  Value bits = arith::BitcastOp::create(b, loc, word, value);
  Value sign = arith::ShLIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, bits, i32(31)), i32(7));
  Value exponent = arith::SubIOp::create(
      b, loc,
      arith::AndIOp::create(
          b, loc, arith::ShRUIOp::create(b, loc, bits, i32(23)), i32(0xff)),
      i32(127));
  Value mantissa = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, bits, i32(20)), i32(7));
  Value normal = arith::OrIOp::create(
      b, loc,
      arith::ShLIOp::create(
          b, loc, arith::AddIOp::create(b, loc, exponent, i32(7)), i32(3)),
      mantissa);
  Value subnormal =
      arith::FPToSIOp::create(b, loc, word, mul(abs(value), f32(512.0)));
  Value magnitude = select(cmp(arith::CmpIPredicate::sge, exponent, i32(-6)),
                           normal, subnormal);
  return arith::TruncIOp::create(b, loc, b.getI8Type(),
                                 arith::OrIOp::create(b, loc, sign, magnitude));
}

/// e2m1 codes: sign, 2 exponent bits (bias 1), 1 mantissa bit; exponent 0
/// holds the subnormal 0.5.
Value LoopEmitter::fromE2M1Bits(Value code) {
  LoopEmitter &e = *this;
  Value bits = arith::ExtUIOp::create(b, loc, b.getI32Type(), code);
  Value magnitudeCode = arith::AndIOp::create(b, loc, bits, e.i32(0x7));
  Value exponent = arith::ShRUIOp::create(b, loc, magnitudeCode, e.i32(1));
  Value mantissa = arith::AndIOp::create(b, loc, bits, e.i32(0x1));
  Value mantissaField = arith::ShLIOp::create(b, loc, mantissa, e.i32(22));
  Value normal = arith::BitcastOp::create(
      b, loc, b.getF32Type(),
      arith::OrIOp::create(
          b, loc,
          arith::ShLIOp::create(b, loc, e.add(exponent, e.i32(126)), e.i32(23)),
          mantissaField));
  Value subnormal = e.mul(
      arith::SIToFPOp::create(b, loc, b.getF32Type(), mantissa), e.f32(0.5));
  Value magnitude = e.select(
      e.cmp(arith::CmpIPredicate::eq, exponent, e.i32(0)), subnormal, normal);
  Value negative =
      e.cmp(arith::CmpIPredicate::ne,
            arith::AndIOp::create(b, loc, bits, e.i32(0x8)), e.i32(0));
  return e.select(negative, arith::NegFOp::create(b, loc, magnitude),
                  magnitude);
}

/// An f32 that lies on the e2m1 grid to its code: 2 + 2 * exponent +
/// mantissa bit for 1 .. 6, twice the magnitude for 0 and 0.5.
Value LoopEmitter::toE2M1Bits(Value value) {
  Type word = b.getI32Type();
  Value bits = arith::BitcastOp::create(b, loc, word, value);
  Value sign = arith::ShLIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, bits, i32(31)), i32(3));
  Value exponent =
      sub(arith::AndIOp::create(
              b, loc, arith::ShRUIOp::create(b, loc, bits, i32(23)), i32(0xff)),
          i32(127));
  Value mantissa = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, bits, i32(22)), i32(1));
  Value normal = add(add(i32(2), add(exponent, exponent)), mantissa);
  Value subnormal =
      arith::FPToSIOp::create(b, loc, word, mul(abs(value), f32(2.0)));
  Value magnitude = select(cmp(arith::CmpIPredicate::sge, exponent, i32(0)),
                           normal, subnormal);
  return arith::TruncIOp::create(b, loc, b.getI8Type(),
                                 arith::OrIOp::create(b, loc, sign, magnitude));
}

Value LoopEmitter::load(Value bufferValue, ValueRange indices) {
  Value value = memref::LoadOp::create(b, loc, bufferValue, indices);
  Type type = value.getType();
  if (isa<Float8E4M3FNType, Float8E8M0FNUType>(type)) {
    Value byte = arith::BitcastOp::create(b, loc, b.getI8Type(), value);
    return isa<Float8E4M3FNType>(type) ? fromE4M3Bits(byte)
                                       : fromUE8M0Bits(byte);
  }
  if (isa<FloatType>(type) && !type.isF32())
    return arith::ExtFOp::create(b, loc, b.getF32Type(), value);
  return value;
}

void LoopEmitter::store(Value value, Value bufferValue, ValueRange indices) {
  Type element = cast<MemRefType>(bufferValue.getType()).getElementType();
  if (element != value.getType())
    value = arith::TruncFOp::create(b, loc, element, value);
  memref::StoreOp::create(b, loc, value, bufferValue, indices);
}

Value LoopEmitter::loadIndex(Value bufferValue, ValueRange indices) {
  return castIndex(memref::LoadOp::create(b, loc, bufferValue, indices));
}

void LoopEmitter::storeInt(Value value, Value bufferValue, ValueRange indices) {
  Type element = cast<MemRefType>(bufferValue.getType()).getElementType();
  if (value.getType().isIndex())
    value = indexTo(element, value);
  memref::StoreOp::create(b, loc, value, bufferValue, indices);
}

void LoopEmitter::parallelLoop(Value lower, Value upper,
                               const std::function<void(Value)> &body) {
  scf::ParallelOp::create(b, loc, ValueRange{lower}, ValueRange{upper},
                          ValueRange{index(1)},
                          [&](OpBuilder &nested, Location, ValueRange ivs) {
                            OpBuilder::InsertionGuard guard(b);
                            b.setInsertionPoint(nested.getInsertionBlock(),
                                                nested.getInsertionPoint());
                            body(ivs[0]);
                          });
}

void LoopEmitter::parallelLoop(Value upper0, Value upper1,
                               const std::function<void(Value, Value)> &body) {
  Value zero = index(0), one = index(1);
  scf::ParallelOp::create(b, loc, ValueRange{zero, zero},
                          ValueRange{upper0, upper1}, ValueRange{one, one},
                          [&](OpBuilder &nested, Location, ValueRange ivs) {
                            OpBuilder::InsertionGuard guard(b);
                            b.setInsertionPoint(nested.getInsertionBlock(),
                                                nested.getInsertionPoint());
                            body(ivs[0], ivs[1]);
                          });
}

void LoopEmitter::loop(Value lower, Value upper,
                       const std::function<void(Value)> &body) {
  scf::ForOp::create(b, loc, lower, upper, index(1), ValueRange{},
                     [&](OpBuilder &nested, Location, Value iv, ValueRange) {
                       OpBuilder::InsertionGuard guard(b);
                       b.setInsertionPoint(nested.getInsertionBlock(),
                                           nested.getInsertionPoint());
                       body(iv);
                       scf::YieldOp::create(b, loc);
                     });
}

SmallVector<Value> LoopEmitter::loop(
    Value lower, Value upper, ValueRange init,
    const std::function<SmallVector<Value>(Value, ValueRange)> &body) {
  auto forOp = scf::ForOp::create(
      b, loc, lower, upper, index(1), init,
      [&](OpBuilder &nested, Location, Value iv, ValueRange carried) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nested.getInsertionBlock(),
                            nested.getInsertionPoint());
        SmallVector<Value> next = body(iv, carried);
        scf::YieldOp::create(b, loc, next);
      });
  return SmallVector<Value>(forOp.getResults());
}

void LoopEmitter::ifThen(Value condition, const std::function<void()> &body) {
  auto ifOp = scf::IfOp::create(b, loc, condition, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  body();
}

Value LoopEmitter::select(Value condition, Value a, Value c) {
  return arith::SelectOp::create(b, loc, condition, a, c);
}

Value LoopEmitter::add(Value a, Value c) {
  if (isa<FloatType>(getElementTypeOrSelf(a.getType())))
    return arith::AddFOp::create(b, loc, a, c);
  return arith::AddIOp::create(b, loc, a, c);
}
Value LoopEmitter::sub(Value a, Value c) {
  if (isa<FloatType>(getElementTypeOrSelf(a.getType())))
    return arith::SubFOp::create(b, loc, a, c);
  return arith::SubIOp::create(b, loc, a, c);
}
Value LoopEmitter::mul(Value a, Value c) {
  if (isa<FloatType>(getElementTypeOrSelf(a.getType())))
    return arith::MulFOp::create(b, loc, a, c);
  return arith::MulIOp::create(b, loc, a, c);
}
Value LoopEmitter::div(Value a, Value c) {
  if (isa<FloatType>(getElementTypeOrSelf(a.getType())))
    return arith::DivFOp::create(b, loc, a, c);
  return arith::DivSIOp::create(b, loc, a, c);
}
Value LoopEmitter::max(Value a, Value c) {
  if (isa<FloatType>(getElementTypeOrSelf(a.getType())))
    return arith::MaximumFOp::create(b, loc, a, c);
  return arith::MaxSIOp::create(b, loc, a, c);
}
Value LoopEmitter::min(Value a, Value c) {
  if (isa<FloatType>(getElementTypeOrSelf(a.getType())))
    return arith::MinimumFOp::create(b, loc, a, c);
  return arith::MinSIOp::create(b, loc, a, c);
}
Value LoopEmitter::rem(Value a, Value c) {
  return arith::RemSIOp::create(b, loc, a, c);
}
Value LoopEmitter::cmp(arith::CmpFPredicate predicate, Value a, Value c) {
  return arith::CmpFOp::create(b, loc, predicate, a, c);
}
Value LoopEmitter::cmp(arith::CmpIPredicate predicate, Value a, Value c) {
  return arith::CmpIOp::create(b, loc, predicate, a, c);
}
Value LoopEmitter::abs(Value a) { return math::AbsFOp::create(b, loc, a); }
Value LoopEmitter::exp(Value a) { return math::ExpOp::create(b, loc, a); }
Value LoopEmitter::sqrt(Value a) { return math::SqrtOp::create(b, loc, a); }

Value LoopEmitter::indexToF32(Value a) {
  Value wide = arith::IndexCastOp::create(b, loc, b.getI64Type(), a);
  return arith::SIToFPOp::create(b, loc, b.getF32Type(), wide);
}

Value LoopEmitter::castIndex(Value integer) {
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), integer);
}

Value LoopEmitter::indexTo(Type type, Value indexValue) {
  return arith::IndexCastOp::create(b, loc, type, indexValue);
}

Value LoopEmitter::roundBF16(Value value) {
  Value narrow = arith::TruncFOp::create(b, loc, b.getBF16Type(), value);
  return arith::ExtFOp::create(b, loc, b.getF32Type(), narrow);
}

Value LoopEmitter::ceilPowerOfTwo(Value value) {
  // Exponent of value, plus one when any mantissa bit is set.
  Type i32 = b.getI32Type();
  Value bits = arith::BitcastOp::create(b, loc, i32, value);
  Value exponent = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, bits, this->i32(23)),
      this->i32(0xff));
  Value mantissa = arith::AndIOp::create(b, loc, bits, this->i32(0x7fffff));
  Value hasMantissa = cmp(arith::CmpIPredicate::ne, mantissa, this->i32(0));
  Value rounded = select(hasMantissa, add(exponent, this->i32(1)), exponent);
  Value result = arith::ShLIOp::create(b, loc, rounded, this->i32(23));
  return arith::BitcastOp::create(b, loc, b.getF32Type(), result);
}

Value LoopEmitter::roundToMinifloat(Value value, int mantissaBits,
                                    int minExponent, double maxValue) {
  Type i32 = b.getI32Type();
  Value magnitude = abs(value);
  Value bits = arith::BitcastOp::create(b, loc, i32, magnitude);
  // The biased exponent of the magnitude's binade (at least the format's
  // smallest normal one), whose grid step is 2^(exponent - mantissaBits).
  Value exponent = max(arith::ShRUIOp::create(b, loc, bits, this->i32(23)),
                       this->i32(127 + minExponent));
  // Adding 1.5 * 2^23 steps rounds to the nearest step, ties to even, and
  // subtracting it again is exact, since the magnitude stays below 2^22
  // steps: two additions instead of scaling, rounding to an integer and
  // scaling back. The constant's bits are the exponent moved up by 23 -
  // mantissaBits with the mantissa's top bit set. Magnitudes at or past the
  // format's range saturate below (an overflowing constant makes NaN there,
  // which the saturation replaces); NaN stays NaN.
  Value magicBits = arith::AddIOp::create(
      b, loc, arith::ShLIOp::create(b, loc, exponent, this->i32(23)),
      this->i32(((23 - mantissaBits) << 23) | (1 << 22)));
  Value magic = arith::BitcastOp::create(b, loc, b.getF32Type(), magicBits);
  Value rounded = sub(add(magnitude, magic), magic);
  Value limit = f32(maxValue);
  Value saturated =
      select(cmp(arith::CmpFPredicate::OGE, magnitude, limit), limit, rounded);
  return math::CopySignOp::create(b, loc, saturated, value);
}

Value v4a::cpu::boundRows(LoopEmitter &e, Value context, int64_t ratio) {
  Value zero = e.index(0);
  return e.max(e.div(e.loadIndex(context, {zero}), e.index(ratio)), zero);
}
