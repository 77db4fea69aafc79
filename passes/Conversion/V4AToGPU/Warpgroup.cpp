//===- Warpgroup.cpp - tensor-core and async-copy pieces of the kit -------===//

#include "passes/Conversion/V4AToGPU/Warpgroup.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include "llvm/ADT/DenseMap.h"

using namespace mlir;

namespace v4a::gpu {

namespace {

/// Address spaces of the NVPTX target.
constexpr unsigned kGlobalSpace = 1, kSharedSpace = 3;
/// Descriptor fields hold byte counts >> 4 in 14 bits.
constexpr int64_t kDescriptorFieldMask = 0x3FFF;
/// The descriptor's layout code (bits 62-63) of the 128-byte swizzle.
constexpr int64_t kSwizzle128 = 1;

Value i64Constant(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(value));
}

Value i32Constant(OpBuilder &b, Location loc, int32_t value) {
  return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(value));
}

Value pointerIn(OpBuilder &b, Location loc, Value address, unsigned space) {
  return LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext(), space), address);
}

Attribute workgroupSpace(MLIRContext *context) {
  return mlir::gpu::AddressSpaceAttr::get(
      context, mlir::gpu::GPUDialect::getWorkgroupAddressSpace());
}

/// An inline asm that later passes keep in place and do not see through.
LLVM::InlineAsmOp keptAsmOp(OpBuilder &b, Location loc, TypeRange results,
                            ValueRange operands, StringRef text,
                            StringRef constraints) {
  return LLVM::InlineAsmOp::create(b, loc, results, operands, text, constraints,
                                   /*has_side_effects=*/true,
                                   /*is_align_stack=*/false,
                                   LLVM::tailcallkind::TailCallKind::None,
                                   /*asm_dialect=*/LLVM::AsmDialectAttr(),
                                   /*operand_attrs=*/ArrayAttr());
}
Value keptAsm(OpBuilder &b, Location loc, Type result, ValueRange operands,
              StringRef text, StringRef constraints) {
  return keptAsmOp(b, loc, TypeRange{result}, operands, text, constraints)
      .getResult(0);
}

/// A cp.async of `size` bytes (16: through L2 only; 8: through L1) from
/// global `from` to shared `to`, zero-filled without reading when `valid`
/// is false.
void copyAsync(OpBuilder &b, Location loc, Value to, Value from, Value valid,
               int32_t size) {
  Value bytes = arith::SelectOp::create(
      b, loc, valid, i32Constant(b, loc, size), i32Constant(b, loc, 0));
  Value source = pointerIn(b, loc, from, kGlobalSpace);
  NVVM::CpAsyncOp::create(b, loc, pointerIn(b, loc, to, kSharedSpace), source,
                          size,
                          size == 16 ? NVVM::LoadCacheModifierKind::CG
                                     : NVVM::LoadCacheModifierKind::CA,
                          bytes);
}

LLVM::LLVMStructType accumulatorType(MLIRContext *context, int64_t n) {
  SmallVector<Type> fields(n / 2, Float32Type::get(context));
  return LLVM::LLVMStructType::getLiteral(context, fields);
}

} // namespace

Value dynamicShared(OpBuilder &b, Location loc) {
  auto type = MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                              MemRefLayoutAttrInterface(),
                              workgroupSpace(b.getContext()));
  return mlir::gpu::DynamicSharedMemoryOp::create(b, loc, type);
}

Value sharedView(OpBuilder &b, Location loc, Value shared, Value offset,
                 Type element, int64_t count) {
  auto type = MemRefType::get({count}, element, MemRefLayoutAttrInterface(),
                              workgroupSpace(b.getContext()));
  return memref::ViewOp::create(b, loc, type, shared, offset, ValueRange{});
}

Value addressOf(OpBuilder &b, Location loc, Value buffer) {
  Value index = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  return arith::IndexCastUIOp::create(b, loc, b.getI64Type(), index);
}

AlignedShared alignToAtom(OpBuilder &b, Location loc, Value shared) {
  Type i64 = b.getI64Type();
  Value unaligned = addressOf(b, loc, shared);
  Value base = arith::AndIOp::create(
      b, loc,
      arith::AddIOp::create(
          b, loc, unaligned,
          arith::ConstantOp::create(
              b, loc, b.getIntegerAttr(i64, kSwizzleAtomBytes - 1))),
      arith::ConstantOp::create(b, loc,
                                b.getIntegerAttr(i64, -kSwizzleAtomBytes)));
  Value pad = arith::IndexCastOp::create(
      b, loc, b.getIndexType(), arith::SubIOp::create(b, loc, base, unaligned));
  return {base, pad};
}

void copyAsync16(OpBuilder &b, Location loc, Value to, Value from,
                 Value valid) {
  copyAsync(b, loc, to, from, valid, 16);
}

void copyAsync8(OpBuilder &b, Location loc, Value to, Value from, Value valid) {
  copyAsync(b, loc, to, from, valid, 8);
}

void copyAsync4(OpBuilder &b, Location loc, Value to, Value from, Value valid) {
  copyAsync(b, loc, to, from, valid, 4);
}

Value loadShared(OpBuilder &b, Location loc, Value address, Type type,
                 unsigned alignment) {
  return LLVM::LoadOp::create(
      b, loc, type, pointerIn(b, loc, address, kSharedSpace), alignment);
}

void storeShared(OpBuilder &b, Location loc, Value address, Value value,
                 unsigned alignment) {
  LLVM::StoreOp::create(b, loc, value, pointerIn(b, loc, address, kSharedSpace),
                        alignment);
}

void storeMatrices(OpBuilder &b, Location loc, Value address,
                   ArrayRef<Value> words) {
  NVVM::StMatrixOp::create(b, loc, pointerIn(b, loc, address, kSharedSpace),
                           words, NVVM::MMALayout::row,
                           NVVM::LdStMatrixShapeAttr::get(b.getContext(), 8, 8),
                           NVVM::LdStMatrixEltType::B16);
}

void syncWarp(OpBuilder &b, Location loc) {
  NVVM::SyncWarpOp::create(b, loc, i32Constant(b, loc, -1));
}

Value loadGlobal(OpBuilder &b, Location loc, Value address, Type type,
                 unsigned alignment) {
  return LLVM::LoadOp::create(
      b, loc, type, pointerIn(b, loc, address, kGlobalSpace), alignment);
}

void storeGlobal(OpBuilder &b, Location loc, Value address, Value value,
                 unsigned alignment) {
  LLVM::StoreOp::create(b, loc, value, pointerIn(b, loc, address, kGlobalSpace),
                        alignment);
}

Value swizzledOffset(OpBuilder &b, Location loc, Value row, Value chunk,
                     int64_t atoms) {
  auto c = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  auto div = [&](Value x, int64_t y) {
    return arith::DivUIOp::create(b, loc, x, c(y)).getResult();
  };
  auto rem = [&](Value x, int64_t y) {
    return arith::RemUIOp::create(b, loc, x, c(y)).getResult();
  };
  auto mulAdd = [&](Value x, int64_t y, Value z) {
    return arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, x, c(y)),
                                 z)
        .getResult();
  };
  Value chunkAtom = div(chunk, 8);
  Value atom = mulAdd(div(row, 8), atoms, chunkAtom);
  Value rowInAtom = rem(row, 8);
  Value place = arith::XOrIOp::create(b, loc, rem(chunk, 8), rowInAtom);
  Value inAtom = mulAdd(rowInAtom, kSwizzleRowBytes,
                        arith::MulIOp::create(b, loc, place, c(16)));
  return mulAdd(atom, kSwizzleAtomBytes, inAtom);
}

std::optional<int64_t> tileCopyStep(int64_t copy, int64_t rows, int64_t threads,
                                    int64_t tileChunks) {
  // Copy i's rows are i * threads / 8 further, modulo the tile's rows. When
  // that step is whole atom rows, a row keeps its place in its atom (and so
  // its swizzle); when the rows are a multiple of it, no thread's row wraps
  // past the tile's end, and the wraps are whole atoms along the row.
  int64_t rowStep = threads / 8;
  if (rowStep % 8 != 0 || rows % rowStep != 0)
    return std::nullopt;
  int64_t rowAtoms = copy * rowStep % rows / 8;
  int64_t chunkAtoms = copy * rowStep / rows;
  return (rowAtoms * (tileChunks / 8) + chunkAtoms) * kSwizzleAtomBytes;
}

void copyTileAsync(OpBuilder &b, Location loc, Value tile, int64_t rows,
                   int64_t rowChunks, int64_t threads, Value thread,
                   function_ref<std::pair<Value, Value>(Value)> source,
                   Value fallback, int64_t firstChunk, int64_t tileChunks) {
  if (tileChunks == 0)
    tileChunks = rowChunks;
  assert(rowChunks % 8 == 0 && rows * rowChunks % threads == 0);
  assert(tileChunks % 8 == 0 && firstChunk % 8 == 0 &&
         firstChunk + rowChunks <= tileChunks);
  auto c = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  auto toI64 = [&](Value v) {
    return arith::IndexCastOp::create(b, loc, b.getI64Type(), v).getResult();
  };
  assert(threads % 8 == 0 && "a quarter warp copies 128 contiguous bytes");
  // Copy i's row is (thread / 8 + i * threads / 8) mod rows: the second
  // term is a constant, so copies that share it share the row (a 64-row
  // tile of 64 chunks over 256 threads: 2 rows a thread for 16 copies;
  // half its chunks over 128 threads: 4 rows for 16 copies). Their source
  // is built once, since the loads of an address table cannot be merged
  // by later passes across the copies, which write shared memory.
  llvm::SmallDenseMap<int64_t, std::tuple<Value, Value, Value>> sources;
  // Where copy i lands a constant past copy 0, the destinations are one
  // register (kept opaque, so that no pass folds a constant into it and
  // hoists the sums out of a loop around the copies, a register pair
  // each) plus immediates.
  bool constantSteps = tileCopyStep(0, rows, threads, tileChunks).has_value();
  Value firstTo;
  if (constantSteps) {
    Value chunk = arith::AddIOp::create(
        b, loc, arith::RemUIOp::create(b, loc, thread, c(8)), c(firstChunk));
    Value row = arith::DivUIOp::create(b, loc, thread, c(8));
    firstTo =
        opaque(b, loc,
               arith::AddIOp::create(
                   b, loc, tile,
                   toI64(swizzledOffset(b, loc, row, chunk, tileChunks / 8))));
  }
  for (int64_t i = 0; i < rows * rowChunks / threads; ++i) {
    Value linear = arith::AddIOp::create(b, loc, c(i * threads), thread);
    Value rest = arith::DivUIOp::create(b, loc, linear, c(8));
    auto [known, inserted] = sources.try_emplace(i * threads / 8 % rows);
    if (inserted) {
      Value row = arith::RemUIOp::create(b, loc, rest, c(rows));
      auto [address, valid] = source(row);
      known->second = {row, address, valid};
    }
    auto [row, address, valid] = known->second;
    Value inRow = arith::AddIOp::create(
        b, loc, arith::RemUIOp::create(b, loc, linear, c(8)), c(firstChunk));
    Value chunk = arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(
            b, loc, arith::DivUIOp::create(b, loc, rest, c(rows)), c(8)),
        inRow);
    Value from = arith::SelectOp::create(
        b, loc, valid,
        arith::AddIOp::create(
            b, loc, address,
            toI64(arith::MulIOp::create(b, loc, chunk, c(16)))),
        fallback);
    Value to;
    if (constantSteps) {
      to = arith::AddIOp::create(
          b, loc, firstTo,
          arith::ConstantIntOp::create(
              b, loc, *tileCopyStep(i, rows, threads, tileChunks), 64));
    } else {
      to = arith::AddIOp::create(
          b, loc, tile,
          toI64(swizzledOffset(b, loc, row, chunk, tileChunks / 8)));
    }
    copyAsync16(b, loc, to, from, valid);
  }
}

void initBarrier(OpBuilder &b, Location loc, Value address, int64_t count) {
  NVVM::MBarrierInitOp::create(b, loc, pointerIn(b, loc, address, kSharedSpace),
                               i32Constant(b, loc, count),
                               /*predicate=*/Value());
}

void arriveBarrier(OpBuilder &b, Location loc, Value address) {
  NVVM::MBarrierArriveOp::create(
      b, loc, b.getI64Type(), pointerIn(b, loc, address, kSharedSpace),
      /*count=*/Value(),
      NVVM::MemScopeKindAttr::get(b.getContext(), NVVM::MemScopeKind::CTA));
}

void arriveBarrierOnCopies(OpBuilder &b, Location loc, Value address) {
  NVVM::CpAsyncMBarrierArriveOp::create(
      b, loc, pointerIn(b, loc, address, kSharedSpace),
      b.getIntegerAttr(b.getI1Type(), 1));
}

void waitBarrier(OpBuilder &b, Location loc, Value address, Value parity) {
  // The suspend hint, in ns: a waiter sleeps instead of spinning.
  constexpr int32_t kSuspendHint = 10'000'000;
  NVVM::MBarrierTryWaitParityOp::create(
      b, loc, pointerIn(b, loc, address, kSharedSpace), parity,
      i32Constant(b, loc, kSuspendHint));
}

Value opaque(OpBuilder &b, Location loc, Value value) {
  return keptAsm(b, loc, b.getI64Type(), value, "mov.b64 $0, $1;", "=l,l");
}

void syncThreads(OpBuilder &b, Location loc, int64_t id, int64_t threads) {
  NVVM::BarrierOp::create(b, loc, /*res=*/Type(), i32Constant(b, loc, id),
                          i32Constant(b, loc, threads),
                          /*reductionOp=*/{}, /*reductionPredicate=*/Value());
}

void arriveThreads(OpBuilder &b, Location loc, int64_t id, int64_t threads) {
  NVVM::BarrierArriveOp::create(b, loc, i32Constant(b, loc, id),
                                i32Constant(b, loc, threads));
}

void commitCopies(OpBuilder &b, Location loc) {
  NVVM::CpAsyncCommitGroupOp::create(b, loc);
}

void waitCopies(OpBuilder &b, Location loc, int32_t pending) {
  NVVM::CpAsyncWaitGroupOp::create(b, loc, pending);
}

void fenceSharedForMma(OpBuilder &b, Location loc) {
  NVVM::FenceProxyOp::create(
      b, loc, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(b.getContext(),
                                 NVVM::SharedSpace::shared_cta));
}

Value matrixDescriptor(OpBuilder &b, Location loc, Value address,
                       int64_t leading, int64_t stride) {
  assert(leading % 16 == 0 && stride % 16 == 0 &&
         (leading >> 4) <= kDescriptorFieldMask &&
         (stride >> 4) <= kDescriptorFieldMask);
  Value start = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, address, i64Constant(b, loc, 4)),
      i64Constant(b, loc, kDescriptorFieldMask));
  int64_t fields =
      ((leading >> 4) << 16) | ((stride >> 4) << 32) | (kSwizzle128 << 62);
  return arith::OrIOp::create(b, loc, start, i64Constant(b, loc, fields));
}

Value advanceDescriptor(OpBuilder &b, Location loc, Value descriptor,
                        int64_t bytes) {
  assert(bytes % 16 == 0 && (bytes >> 4) <= kDescriptorFieldMask);
  if (bytes == 0)
    return descriptor;
  return arith::AddIOp::create(b, loc, descriptor,
                               i64Constant(b, loc, bytes >> 4));
}

Value zeroAccumulator(OpBuilder &b, Location loc, int64_t n) {
  SmallVector<Value> zeros(
      n / 2, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f)));
  return packAccumulator(b, loc, zeros);
}

Value unsetAccumulator(OpBuilder &b, Location loc, int64_t n) {
  return LLVM::UndefOp::create(b, loc, accumulatorType(b.getContext(), n));
}

SmallVector<Value> unpackAccumulator(OpBuilder &b, Location loc,
                                     Value accumulator) {
  auto type = cast<LLVM::LLVMStructType>(accumulator.getType());
  SmallVector<Value> values;
  for (int64_t i = 0, e = type.getBody().size(); i < e; ++i)
    values.push_back(LLVM::ExtractValueOp::create(b, loc, accumulator, i));
  return values;
}

Value packAccumulator(OpBuilder &b, Location loc, ArrayRef<Value> values) {
  Value accumulator = LLVM::UndefOp::create(
      b, loc, accumulatorType(b.getContext(), 2 * values.size()));
  for (auto [i, v] : llvm::enumerate(values))
    accumulator = LLVM::InsertValueOp::create(b, loc, accumulator, v, i);
  return accumulator;
}

FragmentPlace fragmentPlace(OpBuilder &b, Location loc, Value warp, Value lane,
                            int64_t r) {
  // Warp w holds rows 16w..16w+15; lane l the rows l/4 and l/4 + 8 of them,
  // columns 2(l%4) and 2(l%4)+1 of each 8-column chunk, 4 registers a chunk.
  auto c = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  Value inWarp = arith::AddIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, lane, c(4)), c((r % 4) / 2 * 8));
  Value row = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, warp, c(16)), inWarp);
  Value column = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, arith::RemUIOp::create(b, loc, lane, c(4)),
                            c(2)),
      c(r / 4 * 8 + r % 2));
  return {row, column};
}

Value mmaBF16(OpBuilder &b, Location loc, Value descA, Value descB,
              Value accumulator, int64_t n, bool transposeB, bool accumulate) {
  MLIRContext *context = b.getContext();
  auto bf16 = NVVM::WGMMATypesAttr::get(context, NVVM::WGMMATypes::bf16);
  auto one = NVVM::WGMMAScaleInAttr::get(context, NVVM::WGMMAScaleIn::one);
  return NVVM::WgmmaMmaAsyncOp::create(
      b, loc, accumulator.getType(), accumulator, descA, descB,
      NVVM::MMAShapeAttr::get(context, kMmaM, n, kMmaK), bf16, bf16,
      NVVM::WGMMATypesAttr::get(context, NVVM::WGMMATypes::f32),
      NVVM::WGMMAScaleOutAttr::get(context, accumulate
                                                ? NVVM::WGMMAScaleOut::one
                                                : NVVM::WGMMAScaleOut::zero),
      one, one, NVVM::MMALayoutAttr::get(context, NVVM::MMALayout::row),
      // B "row" is the MN-major (transposed) operand, "col" K-major.
      NVVM::MMALayoutAttr::get(context, transposeB ? NVVM::MMALayout::row
                                                   : NVVM::MMALayout::col),
      NVVM::MMAIntOverflowAttr());
}

namespace {
/// An m64nNkK wgmma with A from registers (four i32 words) and B K-major in
/// shared memory, as inline PTX: `shape` names K and the operand types,
/// `modifiers` ends the instruction after the scales. MLIR's wgmma op takes
/// descriptors only.
Value mmaRegisterA(OpBuilder &b, Location loc, ArrayRef<Value> a, Value descB,
                   Value accumulator, int64_t n, bool accumulate,
                   StringRef shape, StringRef modifiers) {
  assert(a.size() == 4 && n % 8 == 0 && n >= 8 && n <= 256);
  int64_t regs = n / 2;
  // Operands: the accumulator's outputs $0.., its tied inputs, then the A
  // words, B's descriptor and whether to accumulate.
  auto operand = [&](int64_t i) { return "$" + std::to_string(i); };
  std::string text = "{\n.reg .pred p;\nsetp.ne.b32 p, " +
                     operand(2 * regs + 5) +
                     ", 0;\nwgmma.mma_async.sync.aligned.m64n" +
                     std::to_string(n) + shape.str() + " {";
  std::string constraints;
  for (int64_t i = 0; i < regs; ++i) {
    text += operand(i) + (i + 1 < regs ? "," : "}, {");
    constraints += "=f,";
  }
  for (int64_t i = 0; i < regs; ++i)
    constraints += std::to_string(i) + ",";
  text += operand(2 * regs) + "," + operand(2 * regs + 1) + "," +
          operand(2 * regs + 2) + "," + operand(2 * regs + 3) + "}, " +
          operand(2 * regs + 4) + ", p, 1, 1" + modifiers.str() + ";\n}";
  constraints += "r,r,r,r,l,r";
  SmallVector<Value> operands = unpackAccumulator(b, loc, accumulator);
  operands.append(a.begin(), a.end());
  operands.push_back(descB);
  operands.push_back(i32Constant(b, loc, accumulate ? 1 : 0));
  return keptAsm(b, loc, accumulator.getType(), operands, text, constraints);
}
} // namespace

Value mmaBF16RegisterA(OpBuilder &b, Location loc, ArrayRef<Value> a,
                       Value descB, Value accumulator, int64_t n,
                       bool accumulate) {
  // B not transposed: K-major.
  return mmaRegisterA(b, loc, a, descB, accumulator, n, accumulate,
                      "k16.f32.bf16.bf16", ", 0");
}

Value mmaE4M3RegisterA(OpBuilder &b, Location loc, ArrayRef<Value> a,
                       Value descB, Value accumulator, int64_t n,
                       bool accumulate) {
  // 8-bit operands have no transpose: both are K-major.
  return mmaRegisterA(b, loc, a, descB, accumulator, n, accumulate,
                      "k32.f32.e4m3.e4m3", "");
}

SmallVector<Value> settleAndFenceWords(OpBuilder &b, Location loc,
                                       ArrayRef<Value> words) {
  std::string constraints;
  for (size_t i = 0; i < words.size(); ++i)
    constraints += "=r,";
  for (size_t i = 0; i < words.size(); ++i)
    constraints += std::to_string(i) + (i + 1 < words.size() ? "," : "");
  SmallVector<Type> fields(words.size(), b.getI32Type());
  Value settled =
      keptAsm(b, loc, LLVM::LLVMStructType::getLiteral(b.getContext(), fields),
              words, "", constraints);
  mmaFence(b, loc);
  SmallVector<Value> out;
  for (size_t i = 0; i < words.size(); ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, loc, settled, i));
  return out;
}

void keepUntilHere(OpBuilder &b, Location loc, ValueRange values) {
  std::string constraints;
  for (size_t i = 0; i < values.size(); ++i)
    constraints += i + 1 < values.size() ? "r," : "r";
  keptAsmOp(b, loc, TypeRange{}, values, "", constraints);
}

void mmaFence(OpBuilder &b, Location loc) {
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
}

namespace {
/// An empty asm that ties each register of `accumulator` to itself: after
/// it, each value has one use, in the MMA, and needs no copy there.
Value settle(OpBuilder &b, Location loc, Value accumulator) {
  SmallVector<Value> values = unpackAccumulator(b, loc, accumulator);
  std::string constraints;
  for (size_t i = 0; i < values.size(); ++i)
    constraints += "=f,";
  for (size_t i = 0; i < values.size(); ++i)
    constraints += std::to_string(i) + (i + 1 < values.size() ? "," : "");
  return keptAsm(b, loc, accumulator.getType(), values, "", constraints);
}
} // namespace

SmallVector<Value, 2> settleAndFence(OpBuilder &b, Location loc,
                                     ArrayRef<Value> accumulators) {
  SmallVector<Value, 2> settled;
  for (Value accumulator : accumulators)
    settled.push_back(settle(b, loc, accumulator));
  mmaFence(b, loc);
  return settled;
}

void mmaCommit(OpBuilder &b, Location loc) {
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
}

void mmaWait(OpBuilder &b, Location loc, int64_t pending) {
  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, pending);
}

} // namespace v4a::gpu
