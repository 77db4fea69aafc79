//===- DeviceKit.cpp - device-side pieces the GPU kernel families share ---===//

#include "passes/Conversion/V4AToGPU/DeviceKit.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;

namespace v4a::gpu {

namespace {

/// Bytes of the widest global access (sm_90).
constexpr int64_t kAccessBytes = 16;

Value constantIndex(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

Value constantF32(OpBuilder &b, Location loc, float value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
}

/// Elements of `element` one 16-byte access holds.
int64_t elementsPerAccess(Type element) {
  return std::max<int64_t>(1,
                           kAccessBytes * 8 / element.getIntOrFloatBitWidth());
}

/// `indices` with the last one advanced by `offset`.
SmallVector<Value> advanced(OpBuilder &b, Location loc, ValueRange indices,
                            int64_t offset) {
  SmallVector<Value> moved(indices);
  if (offset != 0)
    moved.back() = arith::AddIOp::create(b, loc, moved.back(),
                                         constantIndex(b, loc, offset));
  return moved;
}

} // namespace

Value combine(OpBuilder &b, Location loc, Combine how, Value x, Value y) {
  if (how == Combine::Add)
    return arith::AddFOp::create(b, loc, x, y);
  return arith::MaximumFOp::create(b, loc, x, y);
}

Value shuffleXor(OpBuilder &b, Location loc, Value value, int64_t mask) {
  return mlir::gpu::ShuffleOp::create(b, loc, value, static_cast<int32_t>(mask),
                                      static_cast<int32_t>(kWarpLanes),
                                      mlir::gpu::ShuffleMode::XOR)
      .getShuffleResult();
}

Value shuffleFromLane(OpBuilder &b, Location loc, Value value, Value lane) {
  return mlir::gpu::ShuffleOp::create(
             b, loc, value,
             arith::IndexCastOp::create(b, loc, b.getI32Type(), lane),
             arith::ConstantOp::create(
                 b, loc, b.getI32IntegerAttr(static_cast<int32_t>(kWarpLanes))),
             mlir::gpu::ShuffleMode::IDX)
      .getShuffleResult();
}

Value reduceLanes(OpBuilder &b, Location loc, Value value, int64_t lanes,
                  Combine how) {
  assert(lanes <= kWarpLanes && llvm::isPowerOf2_64(lanes));
  // Lane l combines with l ^ m, larger masks first: after the step of mask m
  // each lane holds the combination over the lanes that agree with it above
  // bit log2(m), in the same order for all of them.
  for (int64_t mask = lanes / 2; mask >= 1; mask /= 2)
    value = combine(b, loc, how, value, shuffleXor(b, loc, value, mask));
  return value;
}

namespace {

/// reduceTeam's halves: the warp's lane 0 stores `warpValue` (its
/// reduceLanes over the warp) in slot `slotBase` + warp; after a barrier,
/// the team's total is its warps' slots combined in warp order.
void offerWarpPartial(OpBuilder &b, Location loc, Value warpValue,
                      Value slotBase, Value threadId, Value partials) {
  Value lanesC = constantIndex(b, loc, kWarpLanes);
  Value warp = arith::DivUIOp::create(b, loc, threadId, lanesC);
  Value lane = arith::RemUIOp::create(b, loc, threadId, lanesC);
  Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane,
                                        constantIndex(b, loc, 0));
  scf::IfOp::create(b, loc, isFirst, [&](OpBuilder &nb, Location l) {
    memref::StoreOp::create(
        nb, l, warpValue, partials,
        ValueRange{arith::AddIOp::create(nb, l, warp, slotBase)});
    scf::YieldOp::create(nb, l);
  });
}

Value teamTotal(OpBuilder &b, Location loc, Value slotBase, int64_t lanes,
                Combine how, Value threadId, Value partials) {
  int64_t warps = lanes / kWarpLanes;
  Value warp = arith::DivUIOp::create(b, loc, threadId,
                                      constantIndex(b, loc, kWarpLanes));
  Value firstWarp = arith::MulIOp::create(
      b, loc,
      arith::DivUIOp::create(b, loc, warp, constantIndex(b, loc, warps)),
      constantIndex(b, loc, warps));
  Value total;
  for (int64_t w = 0; w < warps; ++w) {
    Value slot = arith::AddIOp::create(
        b, loc,
        arith::AddIOp::create(b, loc, firstWarp, constantIndex(b, loc, w)),
        slotBase);
    Value partial = memref::LoadOp::create(b, loc, partials, ValueRange{slot});
    total = total ? combine(b, loc, how, total, partial) : partial;
  }
  return total;
}

} // namespace

Value reduceTeam(OpBuilder &b, Location loc, Value value, int64_t lanes,
                 Combine how, Value threadId, Value partials) {
  Value warpValue =
      reduceLanes(b, loc, value, std::min(lanes, kWarpLanes), how);
  if (lanes <= kWarpLanes)
    return warpValue;
  assert(llvm::isPowerOf2_64(lanes));
  Value firstSlot = constantIndex(b, loc, 0);
  // The slots of the previous reduction may still be read.
  mlir::gpu::BarrierOp::create(b, loc);
  offerWarpPartial(b, loc, warpValue, firstSlot, threadId, partials);
  mlir::gpu::BarrierOp::create(b, loc);
  return teamTotal(b, loc, firstSlot, lanes, how, threadId, partials);
}

Value sumOfSquares(OpBuilder &b, Location loc, ValueRange values) {
  Value sum = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  for (Value x : values)
    sum =
        arith::AddFOp::create(b, loc, sum, arith::MulFOp::create(b, loc, x, x));
  return sum;
}

Value rmsFactor(OpBuilder &b, Location loc, Value sum, int64_t width,
                double eps) {
  auto f32 = [&](double v) {
    return arith::ConstantOp::create(b, loc,
                                     b.getF32FloatAttr(static_cast<float>(v)));
  };
  Value mean = arith::DivFOp::create(b, loc, sum, f32(width));
  return arith::DivFOp::create(
      b, loc, f32(1.0),
      math::SqrtOp::create(b, loc,
                           arith::AddFOp::create(b, loc, mean, f32(eps))));
}

SmallVector<Value> loadChunk(OpBuilder &b, Location loc, Value buffer,
                             ValueRange indices, int64_t count, Value valid) {
  Type element = cast<MemRefType>(buffer.getType()).getElementType();
  Type f32 = b.getF32Type();
  int64_t step = std::min(count, elementsPerAccess(element));
  auto vectorType = VectorType::get({step}, element);
  SmallVector<Type> types(count, f32);
  auto guarded = scf::IfOp::create(b, loc, types, valid, /*withElse=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(guarded.thenBlock());
    SmallVector<Value> values;
    for (int64_t first = 0; first < count; first += step) {
      Value vector = vector::LoadOp::create(
          b, loc, vectorType, buffer, advanced(b, loc, indices, first),
          /*nontemporal=*/false, llvm::MaybeAlign(kAccessBytes));
      for (int64_t i = 0; i < step; ++i) {
        Value v = vector::ExtractOp::create(b, loc, vector, i);
        if (element != f32)
          v = arith::ExtFOp::create(b, loc, f32, v);
        values.push_back(v);
      }
    }
    scf::YieldOp::create(b, loc, values);
    b.setInsertionPointToStart(guarded.elseBlock());
    SmallVector<Value> zeros(count, constantF32(b, loc, 0.0f));
    scf::YieldOp::create(b, loc, zeros);
  }
  return SmallVector<Value>(guarded.getResults());
}

void storeChunk(OpBuilder &b, Location loc, ArrayRef<Value> values,
                Value buffer, ValueRange indices, Value valid) {
  Type element = cast<MemRefType>(buffer.getType()).getElementType();
  int64_t count = values.size();
  int64_t step = std::min(count, elementsPerAccess(element));
  auto vectorType = VectorType::get({step}, element);
  scf::IfOp::create(b, loc, valid, [&](OpBuilder &nb, Location l) {
    for (int64_t first = 0; first < count; first += step) {
      SmallVector<Value> narrowed;
      for (int64_t i = 0; i < step; ++i) {
        Value v = values[first + i];
        if (element != v.getType())
          v = arith::TruncFOp::create(nb, l, element, v);
        narrowed.push_back(v);
      }
      Value vector =
          vector::FromElementsOp::create(nb, l, vectorType, narrowed);
      vector::StoreOp::create(
          nb, l, vector, buffer, advanced(nb, l, indices, first),
          /*nontemporal=*/false, llvm::MaybeAlign(kAccessBytes));
    }
    scf::YieldOp::create(nb, l);
  });
}

void storeBytes(OpBuilder &b, Location loc, ArrayRef<Value> bytes, Value buffer,
                Value offset) {
  auto type =
      VectorType::get({static_cast<int64_t>(bytes.size())}, b.getI8Type());
  Value vector = vector::FromElementsOp::create(b, loc, type, bytes);
  vector::StoreOp::create(
      b, loc, vector, buffer, ValueRange{offset},
      /*nontemporal=*/false,
      llvm::MaybeAlign(std::min<int64_t>(kAccessBytes, bytes.size())));
}

Value roundTo(OpBuilder &b, Location loc, Value value, Type element) {
  if (element == value.getType())
    return value;
  Value narrow = arith::TruncFOp::create(b, loc, element, value);
  return arith::ExtFOp::create(b, loc, value.getType(), narrow);
}

namespace {

/// Integer and bf16-pair arithmetic on i32 words for the dequantizations.
struct WordOps {
  OpBuilder &b;
  Location loc;

  Value constant(uint32_t v) {
    return arith::ConstantOp::create(
        b, loc, b.getI32IntegerAttr(static_cast<int32_t>(v)));
  }
  Value andI(Value x, uint32_t mask) {
    return arith::AndIOp::create(b, loc, x, constant(mask));
  }
  Value shl(Value x, int bits) {
    return arith::ShLIOp::create(b, loc, x, constant(bits));
  }
  Value shr(Value x, int bits) {
    return arith::ShRUIOp::create(b, loc, x, constant(bits));
  }
  /// x shifted left by `bits`, or right by -`bits` when negative.
  Value shift(Value x, int bits) {
    return bits > 0 ? shl(x, bits) : bits < 0 ? shr(x, -bits) : x;
  }
  Value orI(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  /// x's bytes in the order `from` names them, 4 for a zero byte (one
  /// byte permutation, prmt, on the GPU).
  Value permuteBytes(Value x, ArrayRef<int64_t> from) {
    auto bytesType = VectorType::get({4}, b.getI8Type());
    Value bytes = LLVM::BitcastOp::create(b, loc, bytesType, x);
    Value zeros = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(bytesType, b.getI8IntegerAttr(0)));
    Value permuted = vector::ShuffleOp::create(b, loc, bytes, zeros, from);
    return LLVM::BitcastOp::create(b, loc, b.getI32Type(), permuted);
  }
  /// The two bf16 halves of x times those of y.
  Value multiply(Value x, Value y) {
    // (arith's bitcast keeps shapes: i32 and vector<2xbf16> need LLVM's.)
    Type i32 = b.getI32Type();
    auto pairType = VectorType::get({2}, b.getBF16Type());
    Value second = LLVM::BitcastOp::create(b, loc, pairType, y);
    Value product = arith::MulFOp::create(
        b, loc, LLVM::BitcastOp::create(b, loc, pairType, x), second);
    return LLVM::BitcastOp::create(b, loc, i32, product);
  }
  /// 2^(scale - 127) in bf16 (scale 0: the subnormal 2^-127), in both halves.
  Value scalePair(Value scale) {
    Value scaleBits = arith::ExtUIOp::create(b, loc, b.getI32Type(), scale);
    Value normal = shl(scaleBits, 7);
    Value scaleField = arith::SelectOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, scaleBits,
                              constant(0)),
        constant(0x40), normal);
    return orI(scaleField, shl(scaleField, 16));
  }
  Value words(ArrayRef<Value> values) {
    return vector::FromElementsOp::create(
        b, loc, VectorType::get({int64_t(values.size())}, b.getI32Type()),
        values);
  }
};

} // namespace

Value selectBytes(OpBuilder &b, Location loc, Value low, Value high,
                  Value selector) {
  return NVVM::PermuteOp::create(b, loc, b.getI32Type(), low, high, selector,
                                 NVVM::PermuteMode::DEFAULT);
}

Value reluToBF16x2(OpBuilder &b, Location loc, Value low, Value high) {
  Value pair = NVVM::ConvertF32x2ToBF16x2Op::create(
      b, loc, VectorType::get({2}, b.getBF16Type()), high, low,
      /*random_bits=*/Value(), NVVM::FPRoundingMode::RN,
      NVVM::SaturationMode::NONE, /*relu=*/true);
  return LLVM::BitcastOp::create(b, loc, b.getI32Type(), pair);
}

Value dequantizeE4M3x8(OpBuilder &b, Location loc, Value bytes, Value scale) {
  WordOps w{b, loc};
  Value scalePair = w.scalePair(scale);
  Value twoTo120 = w.constant(0x7B807B80);
  SmallVector<Value> out;
  for (int64_t word = 0; word < 2; ++word) {
    Value x = vector::ExtractOp::create(b, loc, bytes, word);
    // Bytes b0, b1 (then b2, b3) at the top of a 16-bit half each.
    Value spread[2] = {w.permuteBytes(x, {4, 0, 4, 1}),
                       w.permuteBytes(x, {4, 2, 4, 3})};
    for (Value y : spread) {
      // Sign to bf16's sign bit, exponent and mantissa 4 bits lower.
      Value field = w.andI(w.shr(y, 4), 0x07F007F0);
      Value bits = w.orI(w.andI(y, 0x80008000), field);
      out.push_back(w.multiply(w.multiply(bits, twoTo120), scalePair));
    }
  }
  return w.words(out);
}

Value dequantizeE2M1x8(OpBuilder &b, Location loc, Value codes, Value scale) {
  WordOps w{b, loc};
  Value scalePair = w.scalePair(scale);
  Value twoTo126 = w.constant(0x7E807E80);
  SmallVector<Value> out;
  for (int pair = 0; pair < 4; ++pair) {
    // Nibbles `pair` and `pair` + 4: magnitudes to bits 6..8 of each half,
    // signs to bits 15 and 31.
    Value magnitudes = w.andI(w.shift(codes, 6 - 4 * pair), 0x01C001C0);
    Value signs = w.andI(w.shift(codes, 12 - 4 * pair), 0x80008000);
    out.push_back(
        w.multiply(w.multiply(w.orI(magnitudes, signs), twoTo126), scalePair));
  }
  return w.words(out);
}

mlir::gpu::LaunchOp createLaunch(OpBuilder &b, Location loc, StringRef name,
                                 Value blocks, int64_t threads,
                                 int64_t sharedFloats,
                                 int64_t dynamicSharedBytes) {
  Value one = constantIndex(b, loc, 1);
  Value block = constantIndex(b, loc, threads);
  SmallVector<Type> shared;
  if (sharedFloats > 0)
    shared.push_back(MemRefType::get(
        {sharedFloats}, b.getF32Type(), MemRefLayoutAttrInterface(),
        mlir::gpu::AddressSpaceAttr::get(
            b.getContext(),
            mlir::gpu::GPUDialect::getWorkgroupAddressSpace())));
  Value dynamicShared;
  if (dynamicSharedBytes > 0)
    dynamicShared = arith::ConstantOp::create(
        b, loc, b.getI32IntegerAttr(static_cast<int32_t>(dynamicSharedBytes)));
  auto launch = mlir::gpu::LaunchOp::create(
      b, loc, blocks, one, one, block, one, one, dynamicShared,
      /*asyncTokenType=*/{}, /*asyncDependencies=*/{}, shared);
  launch.setModuleAttr(FlatSymbolRefAttr::get(b.getContext(), "v4a_gpu"));
  launch.setFunctionAttr(FlatSymbolRefAttr::get(b.getContext(), name));
  b.setInsertionPointToEnd(&launch.getBody().front());
  auto terminator = mlir::gpu::TerminatorOp::create(b, loc);
  b.setInsertionPoint(terminator);
  return launch;
}

std::string kernelName(Operation *func, StringRef family) {
  StringRef funcName =
      func->getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName())
          .getValue();
  std::string prefix = (funcName + "_" + family).str();
  int64_t count = 0;
  func->walk([&](mlir::gpu::LaunchOp launch) {
    if (auto kernel = launch.getFunctionAttr())
      if (kernel.getValue().starts_with(prefix))
        ++count;
  });
  return prefix + std::to_string(count);
}

Value readOnlyBuffer(OpBuilder &b, Location loc, Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  return bufferization::ToBufferOp::create(
      b, loc, MemRefType::get(type.getShape(), type.getElementType()), tensor,
      /*readOnly=*/b.getUnitAttr());
}

Value cacheBytes(OpBuilder &b, Location loc, Value cache) {
  return UnrealizedConversionCastOp::create(
             b, loc, MemRefType::get({ShapedType::kDynamic}, b.getI8Type()),
             cache)
      .getResult(0);
}

Value constantTable(OpBuilder &b, Location loc, Operation *anchor,
                    StringRef name, ArrayRef<float> values) {
  auto module = anchor->getParentOfType<ModuleOp>();
  auto type =
      MemRefType::get({static_cast<int64_t>(values.size())}, b.getF32Type());
  auto tensorType = RankedTensorType::get(type.getShape(), b.getF32Type());
  OpBuilder detached(module.getContext());
  auto global = memref::GlobalOp::create(
      detached, loc, name, detached.getStringAttr("private"), type,
      DenseElementsAttr::get(tensorType, values), /*constant=*/true,
      /*alignment=*/IntegerAttr());
  // Renamed when the name is taken (in creation order: deterministic).
  SymbolTable(module).insert(global);
  return memref::GetGlobalOp::create(b, loc, type, global.getSymName());
}

std::pair<Value, Value> ropeCosSin(OpBuilder &b, Location loc, Value position,
                                   Value freqs, Value pair) {
  return ropeCosSins(b, loc, position, freqs, pair).front();
}

SmallVector<std::pair<Value, Value>> ropeCosSins(OpBuilder &b, Location loc,
                                                 Value position, Value freqs,
                                                 ValueRange pairs) {
  SmallVector<Value> frequencies;
  for (Value pair : pairs)
    frequencies.push_back(
        memref::LoadOp::create(b, loc, freqs, ValueRange{pair}));
  SmallVector<std::pair<Value, Value>> cosSins;
  for (Value frequency : frequencies) {
    Value angle = arith::MulFOp::create(b, loc, position, frequency);
    cosSins.push_back({math::CosOp::create(b, loc, angle),
                       math::SinOp::create(b, loc, angle)});
  }
  return cosSins;
}

void storeRopeAngles(OpBuilder &b, Location loc, int64_t ropeDim,
                     Value positions, Value token, Value threadId, Value freqs,
                     Value shared, int64_t at) {
  int64_t half = ropeDim / 2;
  Value writes = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                       threadId, constantIndex(b, loc, half));
  scf::IfOp::create(b, loc, writes, [&](OpBuilder &nb, Location l) {
    Value raw = memref::LoadOp::create(nb, l, positions, ValueRange{token});
    Value position = arith::SIToFPOp::create(nb, l, nb.getF32Type(), raw);
    auto [c, s] = ropeCosSin(nb, l, position, freqs, threadId);
    Value cosAt =
        arith::AddIOp::create(nb, l, threadId, constantIndex(nb, l, at));
    memref::StoreOp::create(nb, l, c, shared, ValueRange{cosAt});
    memref::StoreOp::create(nb, l, s, shared,
                            ValueRange{arith::AddIOp::create(
                                nb, l, cosAt, constantIndex(nb, l, half))});
    scf::YieldOp::create(nb, l);
  });
}

RopeColumn ropeColumn(OpBuilder &b, Location loc, Value column, int64_t start) {
  Value first = arith::ConstantIndexOp::create(b, loc, start);
  Value offset = arith::SubIOp::create(
      b, loc, arith::MaxUIOp::create(b, loc, column, first), first);
  return {
      arith::DivUIOp::create(b, loc, offset,
                             arith::ConstantIndexOp::create(b, loc, 2)),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, column, first)};
}

std::pair<Value, Value> rotatePair(OpBuilder &b, Location loc, Value re,
                                   Value im, Value c, Value s, bool inverse) {
  if (inverse)
    s = arith::NegFOp::create(b, loc, s);
  Value reC = arith::MulFOp::create(b, loc, re, c);
  Value imS = arith::MulFOp::create(b, loc, im, s);
  Value reS = arith::MulFOp::create(b, loc, re, s);
  Value imC = arith::MulFOp::create(b, loc, im, c);
  return {arith::SubFOp::create(b, loc, reC, imS),
          arith::AddFOp::create(b, loc, reS, imC)};
}

} // namespace v4a::gpu
