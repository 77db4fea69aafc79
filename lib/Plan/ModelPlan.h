//===- ModelPlan.h - cache plans and schedules of v4a.model ops -*- C++ -*-===//

#ifndef V4A_LIB_PLAN_MODELPLAN_H
#define V4A_LIB_PLAN_MODELPLAN_H

#include "core/KVPlan.h"
#include "dialects/V4A/IR/V4AOps.h"

#include "llvm/Support/raw_ostream.h"

namespace v4a {

/// Name of the discardable attributes the passes attach to a v4a.model.
inline constexpr llvm::StringLiteral kKVPlanAttrName = "v4a.kv_plan";
inline constexpr llvm::StringLiteral kScheduleAttrName = "v4a.schedule";
inline constexpr llvm::StringLiteral kMtpScheduleAttrName = "v4a.mtp_schedule";

/// The planner's view of the layers and dimensions of a model.
std::vector<LayerSpec> collectLayerInfo(ModelOp model);
plan::ModelDims collectModelDims(ModelOp model);
/// The configuration a model op carries (sharing maps excepted).
ModelConfig collectModelConfig(ModelOp model);

/// The plan as an attribute, and back.
KVPlanAttr toAttr(mlir::MLIRContext *context, const plan::Plan &plan);
CacheComponent toCacheComponent(plan::Component component);
CacheLayout toCacheLayout(layout::RowKind kind);

/// The kernel variant that serves every layer of a sched_meta_key.
std::string kernelNameFor(LayerOp layer);

/// Writes an attached plan as JSON (what `v4a-compile --emit=plan` produces).
void writePlanJson(KVPlanAttr plan, llvm::raw_ostream &os);

} // namespace v4a

#endif // V4A_LIB_PLAN_MODELPLAN_H
