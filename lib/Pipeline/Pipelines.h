//===- Pipelines.h - named v4a pass pipelines -------------------*- C++ -*-===//

#ifndef V4A_LIB_PIPELINE_PIPELINES_H
#define V4A_LIB_PIPELINE_PIPELINES_H

#include "core/KVPlan.h"

#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <string>

namespace v4a {

struct PlanningOptions {
  int64_t contextTokens = 1 << 20;
  int64_t pageSize = 64;
  std::string indexLayout = plan::indexLayoutName(plan::kDefaultIndexLayout);
  /// v4a-dequantize-fp8-weights after v4a-build-steps: the GPU's exact form
  /// of fp8 products (bf16 GEMMs of the dequantized operands).
  bool dequantizeFP8Weights = false;
  /// v4a-merge-projections after v4a-fuse: one product per group of
  /// projections of one input (the GPU's library calls).
  bool mergeProjections = false;
};

/// v4a-verify-topology, v4a-plan-kv, v4a-schedule.
void buildPlanningPipeline(mlir::OpPassManager &pm,
                           const PlanningOptions &options);

/// The planning pipeline, then v4a-build-steps, v4a-fuse and v4a-schedule
/// again for the step programs.
void buildStepsPipeline(mlir::OpPassManager &pm,
                        const PlanningOptions &options);

/// Registers "v4a-planning-pipeline" and "v4a-steps-pipeline" for v4a-opt.
void registerPipelines();

} // namespace v4a

#endif // V4A_LIB_PIPELINE_PIPELINES_H
