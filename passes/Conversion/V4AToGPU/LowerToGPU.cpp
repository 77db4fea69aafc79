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
  for (FusedOp region : llvm::to_vector(func.getBody().getOps<FusedOp>())) {
    Block &body = region.getBody().front();
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    auto yield = cast<YieldOp>(body.getTerminator());
    SmallVector<Value> results(yield.getValues());
    IRRewriter rewriter(region);
    rewriter.inlineBlockBefore(&body, region, region.getInputs());
    rewriter.eraseOp(yield);
    rewriter.replaceOp(region, results);
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

/// The maximal runs of row ops in `unit` that each read the previous op's
/// only result; runs of casts alone are left to the loop path.
SmallVector<SmallVector<Operation *>> rowChains(ArrayRef<Operation *> unit) {
  SmallVector<SmallVector<Operation *>> chains;
  SmallVector<Operation *> run;
  auto close = [&] {
    if (llvm::any_of(run, [](Operation *op) {
          return isa<V4ADialect>(op->getDialect());
        }))
      chains.push_back(run);
    run.clear();
  };
  for (Operation *op : unit) {
    if (!v4a::gpu::isRowOp(op)) {
      close();
      continue;
    }
    bool continues = !run.empty() &&
                     op->getOperand(0) == run.back()->getResult(0) &&
                     run.back()->getResult(0).hasOneUse();
    if (!continues)
      close();
    run.push_back(op);
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
        for (ArrayRef<Operation *> chain : rowChains(unit))
          v4a::gpu::lowerRowChain(rewriter, chain);
    }
  }
};

} // namespace
