//===- Schedule.cpp - group layers by sched_meta_key ----------------------===//

#include "passes/Passes.h"

#include "dialects/V4A/IR/V4AOps.h"
#include "lib/Plan/ModelPlan.h"

namespace v4a {
#define GEN_PASS_DEF_SCHEDULE
#include "passes/Passes.h.inc"
} // namespace v4a

using namespace mlir;
using namespace v4a;

namespace {

/// Groups in order of their first layer, so that the output is deterministic.
ArrayAttr groupByKey(MLIRContext *context, ArrayRef<LayerOp> layers) {
  std::vector<std::pair<std::string, SmallVector<LayerOp>>> groups;
  for (LayerOp layer : layers) {
    std::string key = layer.getSchedMetaKey();
    auto group = llvm::find_if(groups, [&](auto &g) { return g.first == key; });
    if (group == groups.end())
      group = groups.insert(groups.end(), {key, {}});
    group->second.push_back(layer);
  }
  SmallVector<Attribute> result;
  for (auto &[key, members] : groups) {
    SmallVector<int64_t> ids;
    for (LayerOp layer : members)
      ids.push_back(layer.getLayerId());
    result.push_back(SchedGroupAttr::get(
        context, key, kernelNameFor(members.front()), ids, ids.front()));
  }
  return ArrayAttr::get(context, result);
}

struct SchedulePass : public v4a::impl::ScheduleBase<SchedulePass> {
  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      SmallVector<LayerOp> attention, mtp;
      for (LayerOp layer : model.getLayers())
        (layer.getIsMtp() ? mtp : attention).push_back(layer);
      model->setAttr(kScheduleAttrName, groupByKey(&getContext(), attention));
      // Each MTP layer runs in a step of its own: no metadata is shared.
      SmallVector<Attribute> mtpGroups;
      for (LayerOp layer : mtp)
        mtpGroups.append(llvm::to_vector(groupByKey(&getContext(), layer)));
      model->setAttr(kMtpScheduleAttrName,
                     ArrayAttr::get(&getContext(), mtpGroups));
    }
  }
};

} // namespace
