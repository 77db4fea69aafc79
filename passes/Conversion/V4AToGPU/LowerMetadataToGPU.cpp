//===- LowerMetadataToGPU.cpp - metadata functions as GPU kernels ---------===//
//
// Each metadata function (`@meta_<key>`: v4a.step_window and
// v4a.step_compressed over the packed tokens) becomes a kernel
// `@meta_<key>_kernel` in `gpu.module @v4a_gpu` for an NVVM target: its
// arguments are the function's inputs and then its results as memrefs, and
// each thread computes the rows of one token (metadata is O(T * window)
// index arithmetic, so a thread per token is enough here).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/V4A/IR/V4AOps.h"
#include "passes/Conversion/V4AToCPU/StepMetadata.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace v4a {
#define GEN_PASS_DEF_LOWERMETADATATOGPU
#include "passes/Passes.h.inc"
} // namespace v4a

using namespace mlir;
using namespace v4a;

namespace {

/// A metadata function: only step_window / step_compressed, then return.
bool isMetadataFunction(func::FuncOp func) {
  if (func.isExternal() || func.getNumResults() == 0)
    return false;
  return llvm::all_of(func.front(), [](Operation &op) {
    return isa<StepWindowOp, StepCompressedOp, func::ReturnOp>(op);
  });
}

MemRefType memrefOf(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return MemRefType::get(tensor.getShape(), tensor.getElementType());
}

LogicalResult buildKernel(OpBuilder &b, func::FuncOp meta) {
  Location loc = meta.getLoc();
  SmallVector<Type> types;
  for (Type type : meta.getArgumentTypes())
    types.push_back(memrefOf(type));
  for (Type type : meta.getResultTypes())
    types.push_back(memrefOf(type));
  auto kernel = gpu::GPUFuncOp::create(
      b, loc, (meta.getName() + "_kernel").str(), b.getFunctionType(types, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  Block &entry = kernel.getBody().front();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&entry);
  // Tensors of the function -> memref arguments of the kernel.
  IRMapping buffers;
  for (auto [i, arg] : llvm::enumerate(meta.getArguments()))
    buffers.map(arg, entry.getArgument(i));
  auto ret = cast<func::ReturnOp>(meta.front().getTerminator());
  unsigned inputs = meta.getNumArguments();
  for (auto [i, value] : llvm::enumerate(ret.getOperands()))
    buffers.map(value, entry.getArgument(inputs + i));
  cpu::LoopEmitter e(b, loc);
  Value t = e.add(e.mul(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x),
                        gpu::BlockDimOp::create(b, loc, gpu::Dimension::x)),
                  gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
  Value tokens = e.dim(entry.getArgument(0), 0);
  bool ok = true;
  e.ifThen(e.cmp(arith::CmpIPredicate::slt, t, tokens), [&] {
    for (Operation &op : meta.front()) {
      auto lookup = [&](Value v) { return buffers.lookupOrNull(v); };
      if (auto window = dyn_cast<StepWindowOp>(op)) {
        StepTokens in = {lookup(window.getPositions()),
                         lookup(window.getSlots()), lookup(window.getFirst()),
                         lookup(window.getLast())};
        Value attend = lookup(window.getAttend()),
              store = lookup(window.getStore());
        if (!in.positions || !in.slots || !in.first || !in.last || !attend ||
            !store) {
          ok = false;
          return;
        }
        emitWindowRows(e, in, tokens, window.getWindow(), attend, store, t);
      } else if (auto compressed = dyn_cast<StepCompressedOp>(op)) {
        StepTokens in = {lookup(compressed.getPositions()),
                         lookup(compressed.getSlots()), Value(), Value()};
        Value base = lookup(compressed.getBase()),
              complete = lookup(compressed.getComplete());
        if (!in.positions || !in.slots || !base || !complete) {
          ok = false;
          return;
        }
        emitCompressedRows(e, in, compressed.getRatio(),
                           compressed.getSlotRows(), base, complete, t);
      }
    }
  });
  gpu::ReturnOp::create(b, loc);
  if (!ok)
    return meta.emitOpError()
           << "metadata reads an argument or writes a value that is not a "
              "result: it has no GPU kernel form";
  return success();
}

struct LowerMetadataToGPUPass
    : public v4a::impl::LowerMetadataToGPUBase<LowerMetadataToGPUPass> {
  using LowerMetadataToGPUBase::LowerMetadataToGPUBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> metas;
    for (auto func : module.getOps<func::FuncOp>())
      if (isMetadataFunction(func))
        metas.push_back(func);
    if (metas.empty())
      return;
    OpBuilder b(&getContext());
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    b.getUnitAttr());
    b.setInsertionPointToEnd(module.getBody());
    auto target = NVVM::NVVMTargetAttr::get(
        &getContext(), /*optLevel=*/2, "nvptx64-nvidia-cuda", chip, features);
    auto gpuModule = gpu::GPUModuleOp::create(b, module.getLoc(), "v4a_gpu",
                                              b.getArrayAttr({target}));
    b.setInsertionPointToStart(gpuModule.getBody());
    for (func::FuncOp meta : metas)
      if (failed(buildKernel(b, meta)))
        return signalPassFailure();
  }
};

} // namespace
