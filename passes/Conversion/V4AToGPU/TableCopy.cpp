//===- TableCopy.cpp - a step's copies in one kernel ----------------------===//

#include "passes/Conversion/V4AToGPU/TableCopy.h"

#include "core/StepSignature.h"
#include "passes/Conversion/V4AToGPU/Warpgroup.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cstddef>

using namespace mlir;

namespace v4a::gpu {

namespace {

using step::CopyEntry;
constexpr int64_t kChunkBytes = step::kCopyAlignment;

Value i64(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(value));
}

/// A grid dimension or index as i64.
Value asI64(OpBuilder &b, Location loc, Value index) {
  return arith::IndexCastUIOp::create(b, loc, b.getI64Type(), index);
}

} // namespace

mlir::gpu::GPUFuncOp buildTableCopyKernel(mlir::gpu::GPUModuleOp kernels) {
  MLIRContext *context = kernels.getContext();
  Location loc = kernels.getLoc();
  OpBuilder b = OpBuilder::atBlockEnd(kernels.getBody());
  Type i64Type = b.getI64Type();
  auto kernel =
      mlir::gpu::GPUFuncOp::create(b, loc, step::kTableCopyKernel,
                                   FunctionType::get(context, {i64Type}, {}));
  kernel->setAttr(mlir::gpu::GPUDialect::getKernelFuncAttrName(),
                  b.getUnitAttr());
  Block &entry = kernel.getBody().front();
  b.setInsertionPointToStart(&entry);
  Value table = entry.getArgument(0);
  auto dim = mlir::gpu::Dimension::x;
  Value row = asI64(
      b, loc, mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::y));
  Value at = arith::AddIOp::create(
      b, loc, table,
      arith::MulIOp::create(b, loc, row, i64(b, loc, sizeof(CopyEntry))));
  auto field = [&](size_t offset) {
    Value address = arith::AddIOp::create(b, loc, at, i64(b, loc, offset));
    return loadGlobal(b, loc, address, i64Type, 8);
  };
  Value to = field(offsetof(CopyEntry, to)),
        from = field(offsetof(CopyEntry, from)),
        bytes = field(offsetof(CopyEntry, bytes));
  Value threads = asI64(b, loc, mlir::gpu::BlockDimOp::create(b, loc, dim));
  Value inBlock = asI64(b, loc, mlir::gpu::ThreadIdOp::create(b, loc, dim));
  Value blockFirst = arith::MulIOp::create(
      b, loc, asI64(b, loc, mlir::gpu::BlockIdOp::create(b, loc, dim)),
      threads);
  Value thread = arith::AddIOp::create(b, loc, blockFirst, inBlock);
  Value stride = arith::MulIOp::create(
      b, loc, asI64(b, loc, mlir::gpu::GridDimOp::create(b, loc, dim)),
      threads);
  Value chunk = i64(b, loc, kChunkBytes);
  Value begin = arith::MulIOp::create(b, loc, thread, chunk);
  Value step = arith::MulIOp::create(b, loc, stride, chunk);
  auto loop = scf::ForOp::create(b, loc, begin, bytes, step);
  b.setInsertionPointToStart(loop.getBody());
  Value offset = loop.getInductionVar();
  Type vector = VectorType::get({4}, b.getI32Type());
  Value value = loadGlobal(b, loc, arith::AddIOp::create(b, loc, from, offset),
                           vector, kChunkBytes);
  storeGlobal(b, loc, arith::AddIOp::create(b, loc, to, offset), value,
              kChunkBytes);
  b.setInsertionPointAfter(loop);
  mlir::gpu::ReturnOp::create(b, loc);
  return kernel;
}

} // namespace v4a::gpu
