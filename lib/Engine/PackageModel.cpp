//===- PackageModel.cpp - a package's model on a GPU ----------------------===//

#include "lib/Engine/PackageModel.h"

#include "lib/Engine/HostWeights.h"
#include "runtime/CudaBackend.h"
#include "runtime/HostProgram.h"
#include "runtime/Weights.h"

namespace v4a {

std::optional<pkg::Package> readPackage(const std::string &path,
                                        std::string &error) {
  std::optional<pkg::Package> package = pkg::read(path, "sm_90a", error);
  if (!package)
    return std::nullopt;
  for (const step::Function &function : package->functions)
    if (!rt::validateHostProgram(function, error)) {
      error = path + ": " + error;
      return std::nullopt;
    }
  return package;
}

ModelConfig wholeModelConfig(const pkg::Package &package) {
  ModelConfig whole = package.config;
  whole.numAttentionHeads *= package.tensorParallel;
  whole.oGroups *= package.tensorParallel;
  return whole;
}

bool keepRankPart(const pkg::Package &package, int64_t rank,
                  std::vector<rt::LayerTensors> &tensors, std::string &error) {
  if (rank < 0 || rank >= package.tensorParallel) {
    error = "tensor-parallel rank " + std::to_string(rank) +
            " is outside the package's 0 .. " +
            std::to_string(package.tensorParallel - 1);
    return false;
  }
  return rt::shardModelTensors(wholeModelConfig(package), rank,
                               package.tensorParallel, tensors, error);
}

std::unique_ptr<rt::Model>
createPackageModel(const pkg::Package &package,
                   const std::vector<LayerSpec> &selected,
                   std::vector<rt::LayerTensors> tensors, int64_t maxSequences,
                   int ordinal, PackageDevice &device, std::string &error) {
  const ModelConfig &config = package.config;
  // The package's projections are compiled for one format.
  std::optional<ProjectionFormat> format =
      projectionFormat(config, selected, tensors, error);
  if (!format)
    return nullptr;
  if (!format->tensor.empty() && format->fp8 != config.fp8Weights) {
    error = format->tensor + " is " + (format->fp8 ? "fp8" : "bf16") +
            " but the package was compiled for " +
            (config.fp8Weights ? "fp8" : "bf16") +
            " projections (the configuration's fp8_weights)";
    return nullptr;
  }
  std::optional<plan::Plan> plan = plan::planCaches(
      selected, {config.headDim, config.indexHeadDim, config.slidingWindow},
      package.planOptions, error);
  if (!plan)
    return nullptr;
  std::unique_ptr<rt::CudaBackend> backend =
      rt::CudaBackend::create(ordinal, error);
  if (!backend)
    return nullptr;
  device.deviceName = backend->deviceName();
  // The cubin runs on its chip alone (sm_90a: compute capability 9.0);
  // elsewhere the driver compiles the PTX.
  device.cubin = !package.cubin.empty() && backend->computeCapability() == 90;
  if (device.cubin && !backend->loadKernels(package.cubin, error)) {
    device.cubinWarning = error;
    device.cubin = false;
  }
  if (!device.cubin && !backend->loadKernels(package.ptx, error))
    return nullptr;
  rt::StepProgram program{package.functions, package.calls};
  program.calls = rt::callsOfLayers(program, selected);
  return rt::Model::create(config, selected, program, std::move(tensors), *plan,
                           maxSequences, std::move(backend), error);
}

} // namespace v4a
