//===- LowerToGPU.cpp - v4a ops to kernels built for the GPU --------------===//
//
// Runs on the step functions before the loop lowering of the GPU pipeline.
// Each kernel region of v4a-fuse, and each op outside one, goes to the first
// kernel family that covers it; what none covers stays for the loop path
// (v4a-lower-to-cpu, then v4a-map-loops-to-gpu). A region may be split: the
// part a family covers becomes its kernel, the rest stays where it was.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/V4A/IR/V4AOps.h"
#include "passes/Conversion/V4AToGPU/RowRegions.h"

#include "mlir/IR/PatternMatch.h"

namespace v4a {
#define GEN_PASS_DEF_LOWERTOGPU
#include "passes/Passes.h.inc"
} // namespace v4a

using namespace mlir;
using namespace v4a;

namespace {

/// The ops of each kernel region of `func`'s body (regions inlined where
/// they stood), then every other op of the body alone.
SmallVector<SmallVector<Operation *>> kernelUnits(func::FuncOp func) {
  SmallVector<SmallVector<Operation *>> units;
  llvm::DenseSet<Operation *> inRegion;
  IRRewriter rewriter(func.getContext());
  for (FusedOp region : llvm::to_vector(func.getBody().getOps<FusedOp>())) {
    SmallVector<Operation *> ops = region.inlineBody(rewriter);
    inRegion.insert(ops.begin(), ops.end());
    units.push_back(std::move(ops));
  }
  for (Operation &op : func.getBody().getOps())
    if (!inRegion.contains(&op))
      units.push_back({&op});
  // In program order, so kernel numbers follow the step.
  llvm::stable_sort(units,
                    [](ArrayRef<Operation *> a, ArrayRef<Operation *> b) {
                      return a.front()->isBeforeInBlock(b.front());
                    });
  return units;
}

/// A run of row ops, each reading the previous op's only result, and the
/// cache store of the last result that closes it, if any.
struct RowChain {
  SmallVector<Operation *> ops;
  Operation *store = nullptr;
};

/// The maximal row chains of `unit`; chains of casts alone are left to the
/// loop path, a cache store alone is a chain without ops.
SmallVector<RowChain> rowChains(ArrayRef<Operation *> unit) {
  SmallVector<RowChain> chains;
  RowChain run;
  auto close = [&] {
    if (run.store || llvm::any_of(run.ops, [](Operation *op) {
          return isa<V4ADialect>(op->getDialect());
        }))
      chains.push_back(run);
    run = RowChain();
  };
  for (Operation *op : unit) {
    Operation *previous = run.ops.empty() ? nullptr : run.ops.back();
    bool readsPrevious = previous && op->getNumOperands() > 0 &&
                         previous->getResult(0).hasOneUse();
    if (v4a::gpu::isRowStore(op)) {
      auto store = cast<CacheStoreOp>(op);
      if (!(readsPrevious && store.getRows() == previous->getResult(0)))
        close();
      run.store = op;
      close();
      continue;
    }
    if (!v4a::gpu::isRowOp(op)) {
      close();
      continue;
    }
    if (!(readsPrevious && op->getOperand(0) == previous->getResult(0)))
      close();
    run.ops.push_back(op);
  }
  close();
  return chains;
}

struct LowerToGPUPass : public v4a::impl::LowerToGPUBase<LowerToGPUPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    for (auto func : llvm::to_vector(getOperation().getOps<func::FuncOp>())) {
      if (func.isExternal())
        continue;
      for (ArrayRef<Operation *> unit : kernelUnits(func))
        for (const RowChain &chain : rowChains(unit))
          v4a::gpu::lowerRowChain(rewriter, chain.ops, chain.store);
    }
  }
};

} // namespace
