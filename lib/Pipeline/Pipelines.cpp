//===- Pipelines.cpp - named v4a pass pipelines ---------------------------===//

#include "lib/Pipeline/Pipelines.h"

#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

void v4a::buildPlanningPipeline(OpPassManager &pm,
                                const PlanningOptions &options) {
  pm.addPass(createVerifyTopology());
  PlanKVOptions plan;
  plan.contextTokens = options.contextTokens;
  plan.pageSize = options.pageSize;
  plan.indexLayout = options.indexLayout;
  pm.addPass(createPlanKV(plan));
  pm.addPass(createSchedule());
}

void v4a::buildStepsPipeline(OpPassManager &pm,
                             const PlanningOptions &options) {
  buildPlanningPipeline(pm, options);
  pm.addPass(createBuildSteps());
  if (options.dequantizeFP8Weights)
    pm.addPass(createDequantizeFP8Weights());
  pm.addPass(createFuse());
  if (options.mergeProjections)
    pm.addPass(createMergeProjections());
  pm.addPass(createSchedule());
}

namespace {
struct PlanningPipelineOptions
    : public PassPipelineOptions<PlanningPipelineOptions> {
  Option<int64_t> context{*this, "context",
                          llvm::cl::desc("Maximum context in tokens"),
                          llvm::cl::init(1 << 20)};
  Option<int64_t> pageSize{*this, "page-size",
                           llvm::cl::desc("Rows per compressed cache page"),
                           llvm::cl::init(64)};
  Option<std::string> indexLayout{
      *this, "index-layout",
      llvm::cl::desc("bf16, fp8 or mxfp4 index keys (default mxfp4)"),
      llvm::cl::init(
          v4a::plan::indexLayoutName(v4a::plan::kDefaultIndexLayout))};
};
} // namespace

void v4a::registerPipelines() {
  PassPipelineRegistration<PlanningPipelineOptions>(
      "v4a-planning-pipeline",
      "Verify the sharing topology, plan the caches and schedule the layers",
      [](OpPassManager &pm, const PlanningPipelineOptions &options) {
        buildPlanningPipeline(
            pm, {options.context, options.pageSize, options.indexLayout});
      });
  PassPipelineRegistration<PlanningPipelineOptions>(
      "v4a-steps-pipeline",
      "Plan, then build, fuse and schedule the step functions of every key",
      [](OpPassManager &pm, const PlanningPipelineOptions &options) {
        buildStepsPipeline(
            pm, {options.context, options.pageSize, options.indexLayout});
      });
}
