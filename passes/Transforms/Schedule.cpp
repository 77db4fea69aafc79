//===- Schedule.cpp - group layers by sched_meta_key ----------------------===//

#include "passes/Passes.h"

#include "dialects/V4A/IR/V4AOps.h"
#include "lib/Plan/ModelPlan.h"

#include "llvm/ADT/StringSet.h"

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

/// The kernels of a step function in order: its kernel regions by kind and
/// its other compute ops by name (shape and constant ops are not kernels).
ArrayAttr kernelsOf(func::FuncOp step) {
  Builder b(step.getContext());
  SmallVector<Attribute> kernels;
  for (Operation &op : step.front()) {
    if (auto fused = dyn_cast<FusedOp>(op)) {
      kernels.push_back(fused.getKindAttr());
      continue;
    }
    bool compute = isa<V4ADialect>(op.getDialect()) ||
                   (isa<arith::ArithDialect>(op.getDialect()) &&
                    !isa<arith::ConstantOp>(op) && op.getNumResults() == 1 &&
                    isa<RankedTensorType>(op.getResult(0).getType()));
    if (compute)
      kernels.push_back(b.getStringAttr(op.getName().stripDialect()));
  }
  return b.getArrayAttr(kernels);
}

/// `v4a.program @name`: per layer, its key's metadata the first time the key
/// appears, then the layer's step.
void buildProgram(OpBuilder &b, ModelOp model, StringRef name,
                  ArrayRef<LayerOp> layers) {
  auto program = ProgramOp::create(b, model.getLoc(), b.getStringAttr(name));
  Block *body = new Block();
  program.getBody().push_back(body);
  OpBuilder inside = OpBuilder::atBlockEnd(body);
  llvm::StringSet<> computed;
  auto module = model->getParentOfType<ModuleOp>();
  for (LayerOp layer : layers) {
    auto step = layer->getAttrOfType<FlatSymbolRefAttr>("v4a.step");
    auto meta = layer->getAttrOfType<FlatSymbolRefAttr>("v4a.meta");
    if (computed.insert(meta.getValue()).second)
      RunMetaOp::create(inside, layer.getLoc(), meta);
    auto function = module.lookupSymbol<func::FuncOp>(step.getValue());
    RunStepOp::create(inside, layer.getLoc(), step,
                      b.getI64IntegerAttr(layer.getLayerId()),
                      function ? kernelsOf(function) : b.getArrayAttr({}));
  }
}

struct SchedulePass : public v4a::impl::ScheduleBase<SchedulePass> {
  void runOnOperation() override {
    // Programs are rebuilt from the layers each time.
    for (auto program : llvm::to_vector(getOperation().getOps<ProgramOp>()))
      program.erase();
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
      // With step functions built, the programs that run them.
      if (!llvm::all_of(model.getLayers(), [](LayerOp layer) {
            return layer->hasAttr("v4a.step") && layer->hasAttr("v4a.meta");
          }))
        continue;
      OpBuilder b(model);
      b.setInsertionPointAfter(model);
      buildProgram(b, model, "main", attention);
      if (!mtp.empty())
        buildProgram(b, model, "mtp", mtp);
    }
  }
};

} // namespace
