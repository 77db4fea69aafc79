//===- CacheRows.cpp - reading and writing cache rows in loops ------------===//

#include "passes/Conversion/V4AToCPU/CacheRows.h"

#include "core/Numerics.h"
#include "dialects/V4A/IR/V4AOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace v4a;

using IP = arith::CmpIPredicate;
using v4a::cpu::LoopEmitter;

namespace {

bool isPlain(layout::RowKind kind) {
  return kind == layout::RowKind::BF16 || kind == layout::RowKind::IndexBF16 ||
         kind == layout::RowKind::F32;
}

} // namespace

bool CacheRows::isLowered(KVCacheType type) {
  return toRowKind(type.getLayout()) != layout::RowKind::MXFP8;
}

CacheRows::CacheRows(LoopEmitter &e, Value bytes, KVCacheType type)
    : e(e), cacheBytes(bytes), pageRows(type.getPageSize()) {
  row = *layout::describeRow(toRowKind(type.getLayout()), type.getDim());
  if (!isPlain(row.kind))
    return;
  OpBuilder &b = e.builder();
  Type element = row.kind == layout::RowKind::F32 ? Type(b.getF32Type())
                                                  : Type(b.getBF16Type());
  Value rows = e.div(e.dim(bytes, 0), e.index(row.rowBytes()));
  auto view = MemRefType::get({ShapedType::kDynamic, row.dim}, element);
  plain = memref::ViewOp::create(b, e.location(), view, bytes, e.index(0),
                                 ValueRange{rows});
}

Value CacheRows::valueOffset(Value index) {
  Value pages = e.index(pageRows);
  Value page = e.div(index, pages), slot = e.rem(index, pages);
  Value inPage = e.mul(slot, e.index(row.valueBytes));
  return e.add(e.mul(page, e.index(pageRows * row.rowBytes())), inPage);
}

Value CacheRows::scaleOffset(Value index) {
  Value pages = e.index(pageRows);
  Value page = e.div(index, pages), slot = e.rem(index, pages);
  Value inPage = e.mul(slot, e.index(row.scaleBytes));
  return e.add(e.add(e.mul(page, e.index(pageRows * row.rowBytes())),
                     e.index(pageRows * row.valueBytes)),
               inPage);
}

Value CacheRows::rawOffset(Value values, Value feature) {
  Value quantDims = e.index(row.quantDims);
  Value inRaw = e.mul(e.sub(feature, quantDims), e.index(2));
  return e.add(e.add(values, quantDims), inRaw);
}

Value CacheRows::byteAt(Value offset) {
  return memref::LoadOp::create(e.builder(), e.location(), cacheBytes,
                                ValueRange{offset});
}

void CacheRows::storeByte(Value byte, Value offset) {
  memref::StoreOp::create(e.builder(), e.location(), byte, cacheBytes,
                          ValueRange{offset});
}

Value CacheRows::loadBits(Value offset, unsigned bytes) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Type word = b.getIntegerType(8 * bytes);
  Value bits = arith::ExtUIOp::create(b, loc, word, byteAt(offset));
  for (unsigned i = 1; i < bytes; ++i) {
    Value byte =
        arith::ExtUIOp::create(b, loc, word, byteAt(e.add(offset, e.index(i))));
    Value shift =
        arith::ConstantOp::create(b, loc, b.getIntegerAttr(word, 8 * i));
    bits = arith::OrIOp::create(b, loc, bits,
                                arith::ShLIOp::create(b, loc, byte, shift));
  }
  return bits;
}

void CacheRows::storeBits(Value bits, Value offset) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Type i8 = b.getI8Type();
  unsigned bytes = bits.getType().getIntOrFloatBitWidth() / 8;
  storeByte(arith::TruncIOp::create(b, loc, i8, bits), offset);
  for (unsigned i = 1; i < bytes; ++i) {
    Value shift = arith::ConstantOp::create(
        b, loc, b.getIntegerAttr(bits.getType(), 8 * i));
    Value at = e.add(offset, e.index(i));
    storeByte(arith::TruncIOp::create(
                  b, loc, i8, arith::ShRUIOp::create(b, loc, bits, shift)),
              at);
  }
}

Value CacheRows::loadBF16(Value offset) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Value value =
      arith::BitcastOp::create(b, loc, b.getBF16Type(), loadBits(offset, 2));
  return arith::ExtFOp::create(b, loc, b.getF32Type(), value);
}

void CacheRows::storeBF16(Value value, Value offset) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Value rounded = arith::TruncFOp::create(b, loc, b.getBF16Type(), value);
  storeBits(arith::BitcastOp::create(b, loc, b.getI16Type(), rounded), offset);
}

Value CacheRows::loadF32(Value offset) {
  OpBuilder &b = e.builder();
  return arith::BitcastOp::create(b, e.location(), b.getF32Type(),
                                  loadBits(offset, 4));
}

void CacheRows::storeF32(Value value, Value offset) {
  OpBuilder &b = e.builder();
  storeBits(arith::BitcastOp::create(b, e.location(), b.getI32Type(), value),
            offset);
}

Value CacheRows::load(Value index, Value feature) {
  if (plain)
    return e.load(plain, {index, feature});
  switch (row.kind) {
  case layout::RowKind::IndexFP8: {
    Value scale = loadF32(scaleOffset(index));
    return e.mul(e.fromE4M3Bits(byteAt(e.add(valueOffset(index), feature))),
                 scale);
  }
  case layout::RowKind::IndexMXFP4:
    return loadMXFP4(index, feature);
  default:
    return loadModel1(index, feature);
  }
}

Value CacheRows::loadModel1(Value index, Value feature) {
  // Both the quantized and the raw reading use in-row offsets; the feature
  // picks one.
  Value quantDims = e.index(row.quantDims);
  Value values = valueOffset(index);
  Value isRaw = e.cmp(IP::sge, feature, quantDims);
  Value raw = loadBF16(rawOffset(values, e.max(feature, quantDims)));
  Value quantFeature = e.min(feature, e.index(row.quantDims - 1));
  Value value = e.fromE4M3Bits(byteAt(e.add(values, quantFeature)));
  Value block = e.div(quantFeature, e.index(row.scaleBlock));
  Value scale = e.fromUE8M0Bits(byteAt(e.add(scaleOffset(index), block)));
  return e.select(isRaw, raw, e.mul(value, scale));
}

/// Two e2m1 codes a byte, the even feature in the low nibble.
Value CacheRows::loadMXFP4(Value index, Value feature) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Value pairInRow = e.div(feature, e.index(2));
  Value pair = byteAt(e.add(valueOffset(index), pairInRow));
  Value odd = e.cmp(IP::ne, e.rem(feature, e.index(2)), e.index(0));
  Value shift = arith::ConstantOp::create(b, loc, b.getI8IntegerAttr(4));
  Value code = e.select(odd, arith::ShRUIOp::create(b, loc, pair, shift), pair);
  Value block = e.div(feature, e.index(row.scaleBlock));
  Value scale = e.fromUE8M0Bits(byteAt(e.add(scaleOffset(index), block)));
  return e.mul(e.fromE2M1Bits(code), scale);
}

Value CacheRows::blockScale(Value source, Value sourceRow, Value begin,
                            Value end, float amaxFloor, float maxValue) {
  Value amax =
      e.loop(begin, end, {e.f32(amaxFloor)},
             [&](Value f, ValueRange a) -> SmallVector<Value> {
               return {e.max(a[0], e.abs(e.load(source, {sourceRow, f})))};
             })[0];
  return e.ceilPowerOfTwo(e.mul(amax, e.f32(1.0f / maxValue)));
}

Value CacheRows::e4m3Code(Value source, Value sourceRow, Value f, Value scale) {
  return e.toE4M3Bits(e.roundToMinifloat(
      e.div(e.load(source, {sourceRow, f}), scale), 3, -6, num::kE4M3Max));
}

void CacheRows::storeRow(Value index, Value source, Value sourceRow) {
  if (plain) {
    e.loop(e.index(0), e.index(row.dim), [&](Value f) {
      e.store(e.load(source, {sourceRow, f}), plain, {index, f});
    });
    return;
  }
  switch (row.kind) {
  case layout::RowKind::IndexFP8:
    return storeIndexFP8Row(index, source, sourceRow);
  case layout::RowKind::IndexMXFP4:
    return storeMXFP4Row(index, source, sourceRow);
  default:
    return storeModel1Row(index, source, sourceRow);
  }
}

Value CacheRows::storeBlockScales(
    Value source, Value sourceRow, Value scales, float amaxFloor,
    float maxValue,
    function_ref<void(Value begin, Value end, Value scale)> body) {
  Value block = e.index(row.scaleBlock);
  Value blocks = e.index(row.quantDims / row.scaleBlock);
  e.loop(e.index(0), blocks, [&](Value blk) {
    Value begin = e.mul(blk, block), end = e.add(begin, block);
    Value scale =
        blockScale(source, sourceRow, begin, end, amaxFloor, maxValue);
    Value at = e.add(scales, blk);
    storeByte(e.toUE8M0Bits(scale), at);
    body(begin, end, scale);
  });
  return blocks;
}

void CacheRows::storeModel1Row(Value index, Value source, Value sourceRow) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Value values = valueOffset(index), scales = scaleOffset(index);
  Value blocks =
      storeBlockScales(source, sourceRow, scales, num::kE4M3AmaxFloor,
                       num::kE4M3Max, [&](Value begin, Value end, Value scale) {
                         e.loop(begin, end, [&](Value f) {
                           Value at = e.add(values, f);
                           storeByte(e4m3Code(source, sourceRow, f, scale), at);
                         });
                       });
  // The pad byte after the scales.
  Value zeroByte = arith::ConstantOp::create(b, loc, b.getI8IntegerAttr(0));
  e.loop(blocks, e.index(row.scaleBytes),
         [&](Value i) { storeByte(zeroByte, e.add(scales, i)); });
  e.loop(e.index(0), e.index(row.rawDims), [&](Value i) {
    Value f = e.add(e.index(row.quantDims), i);
    Value at = rawOffset(values, f);
    storeBF16(e.load(source, {sourceRow, f}), at);
  });
}

/// One power-of-two f32 scale for the whole row.
void CacheRows::storeIndexFP8Row(Value index, Value source, Value sourceRow) {
  Value values = valueOffset(index);
  Value scale = blockScale(source, sourceRow, e.index(0), e.index(row.dim),
                           num::kE4M3AmaxFloor, num::kE4M3Max);
  storeF32(scale, scaleOffset(index));
  e.loop(e.index(0), e.index(row.dim), [&](Value f) {
    Value at = e.add(values, f);
    storeByte(e4m3Code(source, sourceRow, f, scale), at);
  });
}

/// A ue8m0 scale per block of 32 and e2m1 codes, as the indexer's fp4
/// simulation rounds: its keys are stored exactly.
void CacheRows::storeMXFP4Row(Value index, Value source, Value sourceRow) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Value values = valueOffset(index);
  Value mask = arith::ConstantOp::create(b, loc, b.getI8IntegerAttr(0xf));
  Value shift = arith::ConstantOp::create(b, loc, b.getI8IntegerAttr(4));
  storeBlockScales(source, sourceRow, scaleOffset(index), num::kE2M1AmaxFloor,
                   num::kE2M1Max, [&](Value begin, Value end, Value scale) {
                     auto code = [&](Value f) {
                       return e.toE2M1Bits(e.roundToMinifloat(
                           e.div(e.load(source, {sourceRow, f}), scale), 1, 0,
                           num::kE2M1Max));
                     };
                     Value lastPair = e.div(end, e.index(2));
                     e.loop(e.div(begin, e.index(2)), lastPair, [&](Value p) {
                       Value even = e.mul(p, e.index(2));
                       Value low =
                           arith::AndIOp::create(b, loc, code(even), mask);
                       Value high = arith::ShLIOp::create(
                           b, loc, code(e.add(even, e.index(1))), shift);
                       Value at = e.add(values, p);
                       storeByte(arith::OrIOp::create(b, loc, low, high), at);
                     });
                   });
}
