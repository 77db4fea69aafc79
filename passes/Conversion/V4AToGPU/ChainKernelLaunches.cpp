//===- ChainKernelLaunches.cpp - kernels that wait for the grids before ---===//
//
// A kernel launched with programmatic stream serialization may start while
// the grid before it still runs. Waiting for that grid before any memory
// access keeps stream order's meaning; triggering the next launch right
// after the wait lets that one's launch overlap this grid in turn.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace v4a {
#define GEN_PASS_DEF_CHAINKERNELLAUNCHES
#include "passes/Passes.h.inc"
} // namespace v4a

using namespace mlir;

namespace {

bool startsWithWait(Block &entry) {
  auto first = dyn_cast<NVVM::GriddepcontrolOp>(entry.front());
  return first && first.getKind() == NVVM::GridDepActionKind::wait;
}

void chain(gpu::GPUFuncOp kernel) {
  Block &entry = kernel.getBody().front();
  if (startsWithWait(entry))
    return;
  OpBuilder builder = OpBuilder::atBlockBegin(&entry);
  Location loc = kernel.getLoc();
  NVVM::GriddepcontrolOp::create(builder, loc, NVVM::GridDepActionKind::wait);
  NVVM::GriddepcontrolOp::create(builder, loc,
                                 NVVM::GridDepActionKind::launch_dependents);
}

struct ChainKernelLaunchesPass
    : v4a::impl::ChainKernelLaunchesBase<ChainKernelLaunchesPass> {
  void runOnOperation() override {
    getOperation().walk([](gpu::GPUFuncOp func) {
      if (func.isKernel())
        chain(func);
    });
  }
};

} // namespace
