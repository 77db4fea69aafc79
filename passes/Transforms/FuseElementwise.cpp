//===- FuseElementwise.cpp - one loop nest per elementwise chain ----------===//
//
// The step functions compute a few small tensors elementwise between their
// kernel regions: a compressed row's rope position (positions - (r - 1)),
// the indexer's head weights (a bf16 rounding, a widening, a scale). Each
// arith op and each splat of a constant is a loop nest of its own, so on the
// GPU a launch of its own: five launches for three lines of arithmetic at
// every ratio-4 layer, each costing a graph node's gap. Splats of a scalar
// become fills, which fold into their readers as the scalar, and chains of
// elementwise linalg ops become one.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace v4a {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "passes/Passes.h.inc"
} // namespace v4a

using namespace mlir;

namespace {

/// tensor.splat of a scalar over a dynamic shape as linalg.fill of an empty
/// tensor: the form the fusion patterns fold into a reader.
struct SplatToFill : public OpRewritePattern<tensor::SplatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::SplatOp op,
                                PatternRewriter &rewriter) const override {
    auto type = op.getType();
    Value empty =
        tensor::EmptyOp::create(rewriter, op.getLoc(), type.getShape(),
                                type.getElementType(), op.getDynamicSizes());
    rewriter.replaceOpWithNewOp<linalg::FillOp>(op, op.getInput(), empty);
    return success();
  }
};

/// A producer is fused into its reader only when nothing else reads it:
/// otherwise both loop nests would compute it.
bool producerHasOneReader(OpOperand *operand) {
  Operation *producer = operand->get().getDefiningOp();
  return producer && producer->hasOneUse();
}

struct FuseElementwisePass
    : public v4a::impl::FuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    RewritePatternSet patterns(context);
    patterns.add<SplatToFill>(context);
    linalg::populateElementwiseOpsFusionPatterns(patterns,
                                                 producerHasOneReader);
    // Sizes read off a producer's result are read off its operands instead,
    // so that the size is not a second reader that blocks its fusion.
    memref::populateResolveRankedShapedTypeResultDimsPatterns(patterns);
    tensor::DimOp::getCanonicalizationPatterns(patterns, context);
    tensor::EmptyOp::getCanonicalizationPatterns(patterns, context);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      getOperation().emitError()
          << "elementwise fusion did not reach a fixed point";
      return signalPassFailure();
    }
  }
};

} // namespace
