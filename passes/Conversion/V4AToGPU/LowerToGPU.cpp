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
#include "passes/Conversion/V4AToGPU/IndexerTopK.h"
#include "passes/Conversion/V4AToGPU/RowRegions.h"
#include "passes/Conversion/V4AToGPU/SparseAttention.h"

#include "mlir/IR/PatternMatch.h"

namespace v4a {
#define GEN_PASS_DEF_LOWERTOGPU
#include "passes/Passes.h.inc"
} // namespace v4a

using namespace mlir;
using namespace v4a;

namespace {

/// The units of `func`'s body in program order: the ops of each kernel
/// region (inlined where it stood), and every other op alone.
SmallVector<SmallVector<Operation *>> kernelUnits(func::FuncOp func) {
  IRRewriter rewriter(func.getContext());
  SmallVector<SmallVector<Operation *>> regions;
  llvm::DenseMap<Operation *, size_t> regionOf;
  for (FusedOp region : llvm::to_vector(func.getBody().getOps<FusedOp>())) {
    regions.push_back(region.inlineBody(rewriter));
    for (Operation *op : regions.back())
      regionOf[op] = regions.size() - 1;
  }
  // In program order, so kernel numbers follow the step.
  SmallVector<SmallVector<Operation *>> units;
  llvm::DenseSet<size_t> emitted;
  for (Operation &op : func.getBody().getOps()) {
    auto it = regionOf.find(&op);
    if (it == regionOf.end())
      units.push_back({&op});
    else if (emitted.insert(it->second).second)
      units.push_back(regions[it->second]);
  }
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

/// Remembers the ops a rewriter erases.
struct ErasedOps : public RewriterBase::Listener {
  llvm::DenseSet<Operation *> ops;
  void notifyOperationErased(Operation *op) override { ops.insert(op); }
};

struct LowerToGPUPass : public v4a::impl::LowerToGPUBase<LowerToGPUPass> {
  using LowerToGPUBase::LowerToGPUBase;
  /// indexer-e4m3 is a form of the family for MXFP4 keys of 128 dims; an
  /// option that would change nothing is an error, not a silent no-op.
  LogicalResult checkE4M3Options() {
    if (indexerE4M3 && !indexerFamily)
      return getOperation().emitError(
          "indexer-e4m3 is a form of the indexer family; indexer-family=0 "
          "has none");
    return success();
  }
  LogicalResult checkE4M3Keys(
      ArrayRef<std::pair<CacheIndexerScoreOp, SmallVector<Operation *>>>
          indexer) {
    if (!indexerE4M3)
      return success();
    for (CacheIndexerScoreOp scores : llvm::make_first_range(indexer))
      if (!v4a::gpu::takesE4M3Keys(scores)) {
        KVCacheType keys = scores.getKeys().getType();
        return scores.emitOpError("indexer-e4m3 multiplies MXFP4 index keys "
                                  "of 128 dims; these keys are ")
               << stringifyCacheLayout(keys.getLayout()) << " rows of "
               << keys.getDim() << " dims";
      }
    return success();
  }

  void runOnOperation() override {
    if (failed(checkE4M3Options()))
      return signalPassFailure();
    IRRewriter rewriter(&getContext());
    // Ops a lowering erased (an attention's inverse RoPE, the sizes of a
    // split's parts) may still stand in a later unit: compared, never read.
    ErasedOps erased;
    rewriter.setListener(&erased);
    for (auto func : llvm::to_vector(getOperation().getOps<func::FuncOp>())) {
      if (func.isExternal())
        continue;
      // Kernel regions inlined first: the indexer reads parts of merged
      // products in place.
      SmallVector<SmallVector<Operation *>> units = kernelUnits(func);
      // Scores and their top-k are two units; the family takes both.
      SmallVector<std::pair<CacheIndexerScoreOp, SmallVector<Operation *>>>
          indexer;
      if (indexerFamily)
        func.walk([&](CacheIndexerScoreOp scores) {
          SmallVector<Operation *> selections =
              v4a::gpu::coveredSelections(scores);
          if (!selections.empty())
            indexer.push_back({scores, std::move(selections)});
        });
      if (failed(checkE4M3Keys(indexer)))
        return signalPassFailure();
      for (auto &[scores, selections] : indexer)
        v4a::gpu::lowerIndexerTopK(rewriter, scores, selections, indexerE4M3);
      // An attention, the head norm and rope of its query and the inverse
      // RoPE of its output are one kernel, launched where the attention is
      // (after the products the query is read from); the ops it takes in
      // are no kernel of their own.
      llvm::DenseMap<Operation *, v4a::gpu::QueryNorm> queries;
      llvm::DenseMap<Operation *, RoPEOp> inverses;
      llvm::DenseSet<Operation *> takenIn;
      func.walk([&](CacheAttentionOp op) {
        if (!v4a::gpu::isAttentionCovered(op))
          return;
        if (v4a::gpu::QueryNorm query = v4a::gpu::fusedQueryNorm(op)) {
          queries[op] = query;
          takenIn.insert(query.norm);
          takenIn.insert(query.rope);
        }
        if (RoPEOp rope = v4a::gpu::fusedInverseRoPE(op)) {
          inverses[op] = rope;
          takenIn.insert(rope);
        }
      });
      for (ArrayRef<Operation *> all : units) {
        // Without the ops an attention took in and those already erased.
        SmallVector<Operation *> unit;
        for (Operation *op : all)
          if (!takenIn.contains(op) && !erased.ops.contains(op))
            unit.push_back(op);
        // Taken before the row chains are lowered: that erases their ops.
        SmallVector<CacheAttentionOp> attention;
        for (Operation *op : unit)
          if (auto candidate = dyn_cast<CacheAttentionOp>(op);
              candidate && v4a::gpu::isAttentionCovered(candidate))
            attention.push_back(candidate);
        for (const RowChain &chain : rowChains(unit))
          v4a::gpu::lowerRowChain(rewriter, chain.ops, chain.store);
        for (CacheAttentionOp op : attention)
          v4a::gpu::lowerCacheAttention(rewriter, op, inverses.lookup(op),
                                        queries.lookup(op));
      }
    }
  }
};

} // namespace
