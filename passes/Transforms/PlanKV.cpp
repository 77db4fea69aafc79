//===- PlanKV.cpp - per-sequence KV cache plan ----------------------------===//

#include "passes/Passes.h"

#include "dialects/V4A/IR/V4AOps.h"
#include "lib/Plan/ModelPlan.h"

namespace v4a {
#define GEN_PASS_DEF_PLANKV
#include "passes/Passes.h.inc"
} // namespace v4a

using namespace mlir;
using namespace v4a;

namespace {

struct PlanKVPass : public v4a::impl::PlanKVBase<PlanKVPass> {
  using PlanKVBase::PlanKVBase;

  LogicalResult readOptions(plan::PlanOptions &options, Operation *anchor) {
    int64_t context = contextTokens, page = pageSize, align = alignment;
    if (context <= 0 || page <= 0 || align <= 0)
      return anchor->emitError()
             << "v4a-plan-kv: context (" << context << "), page-size (" << page
             << ") and alignment (" << align << ") must be positive";
    std::optional<plan::IndexLayout> index =
        plan::parseIndexLayout(indexLayout.getValue());
    if (!index)
      return anchor->emitError()
             << "v4a-plan-kv: index-layout '" << indexLayout.getValue()
             << "' is not " << plan::kIndexLayoutNames;
    options.contextTokens = context;
    options.pageSize = page;
    options.alignment = align;
    options.indexLayout = *index;
    return success();
  }

  void runOnOperation() override {
    plan::PlanOptions options;
    if (failed(readOptions(options, getOperation())))
      return signalPassFailure();
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      std::string error;
      std::optional<plan::Plan> plan = plan::planCaches(
          collectLayerInfo(model), collectModelDims(model), options, error);
      if (!plan) {
        model.emitError() << "v4a-plan-kv: " << error;
        return signalPassFailure();
      }
      model->setAttr(kKVPlanAttrName, toAttr(&getContext(), *plan));
    }
  }
};

} // namespace
