//===- Engine.cpp - compile and run a model in-process --------------------===//

#include "v4a/Engine.h"

#include "core/FileIO.h"
#include "core/KVPlan.h"
#include "core/Numerics.h"
#include "core/TensorSpecs.h"
#include "dialects/V4A/IR/V4AOps.h"
#include "lib/Engine/Checkpoint.h"
#include "lib/Engine/EngineAccess.h"
#include "lib/Engine/HostWeights.h"
#include "lib/Import/ConfigImport.h"
#include "lib/JIT/CpuJit.h"
#include "lib/JIT/GpuSteps.h"
#include "lib/JIT/StepJit.h"
#include "lib/Pipeline/Pipelines.h"
#include "lib/Reference/Reference.h"
#include "passes/Passes.h"
#include "runtime/CudaBackend.h"
#include "runtime/Model.h"
#include "runtime/Weights.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

namespace v4a {

struct Engine::Impl {
  std::string json;
  LayerOptions layerOptions;
  /// Whether the compiled steps take fp8 projections.
  bool fp8Steps = false;
  /// The configuration the steps are compiled for (a tensor-parallel
  /// rank's), and the whole model's, whose checkpoint is read.
  ModelConfig config, modelConfig;
  std::vector<LayerSpec> layers, selected;
  EngineOptions options;
  plan::Plan plan;
  std::unique_ptr<jit::CpuJit> jit;
  /// The GPU and its kernels, with the cuda backend (handed to the model).
  std::unique_ptr<rt::CudaBackend> gpu;
  std::string ptx;
  rt::StepProgram program;
  std::unique_ptr<rt::Model> model;
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
Engine::~Engine() = default;
const ModelConfig &Engine::config() const { return impl->modelConfig; }

bool Engine::objectCode(std::string &bytes, std::string &error) const {
  if (!impl->jit) {
    error = "the steps were compiled for the GPU, not the host";
    return false;
  }
  return impl->jit->objectCode(bytes, error);
}

std::string Engine::objectHeader(const std::string &includeGuard) const {
  return impl->jit->cHeader(includeGuard);
}

const std::vector<LayerSpec> &Engine::layers() const { return impl->layers; }
int Engine::threads() const { return jit::CpuJit::threads(); }
const std::vector<LayerSpec> &Engine::selectedLayers() const {
  return impl->selected;
}

/// Imports the configuration and runs v4a-verify-topology on it.
static bool verifyTopology(std::string_view json, const LayerOptions &options,
                           std::string &error) {
  mlir::MLIRContext context;
  std::string messages;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    if (messages.empty())
      messages = diag.str();
    return mlir::success();
  });
  auto module =
      importConfig(&context, llvm::StringRef(json.data(), json.size()),
                   mlir::UnknownLoc::get(&context), "model", options);
  if (module) {
    mlir::PassManager pm(&context);
    pm.addPass(createVerifyTopology());
    if (mlir::succeeded(pm.run(*module)))
      return true;
  }
  error = messages.empty() ? "invalid configuration" : messages;
  return false;
}

static bool compileKernels(Engine::Impl &m, bool fp8, std::string &error);

std::unique_ptr<Engine> Engine::create(std::string_view configJson,
                                       const EngineOptions &options,
                                       std::string &error) {
  if (options.maxSequences <= 0 || options.contextTokens <= 0 ||
      options.pageSize <= 0) {
    error = "maxSequences (" + std::to_string(options.maxSequences) +
            "), contextTokens (" + std::to_string(options.contextTokens) +
            ") and pageSize (" + std::to_string(options.pageSize) +
            ") must be positive";
    return nullptr;
  }
  std::optional<plan::IndexLayout> indexLayout =
      plan::parseIndexLayout(options.indexLayout);
  if (!indexLayout) {
    error = "unknown index layout '" + options.indexLayout + "' (" +
            plan::kIndexLayoutNames + ")";
    return nullptr;
  }
  if (options.tensorRank < 0 || options.tensorRank >= options.tensorParallel) {
    error = "tensor-parallel rank " + std::to_string(options.tensorRank) +
            " is outside 0 .. " + std::to_string(options.tensorParallel - 1);
    return nullptr;
  }
  ConfigError configError;
  std::optional<ModelConfig> modelConfig =
      parseModelConfig(configJson, configError);
  // A tensor-parallel rank compiles a configuration of its own.
  std::optional<ModelConfig> config = modelConfig;
  std::string rankJson;
  if (modelConfig && options.tensorParallel != 1) {
    std::optional<std::string> json =
        tensorParallelConfig(configJson, options.tensorParallel, error);
    if (!json)
      return nullptr;
    rankJson = std::move(*json);
    configJson = rankJson;
    config = parseModelConfig(configJson, configError);
  }
  LayerOptions layerOptions;
  layerOptions.packedKv = options.packedKv;
  std::optional<std::vector<LayerSpec>> layers;
  if (config)
    layers = deriveLayers(*config, layerOptions, configError);
  if (!layers) {
    error = configError.str();
    return nullptr;
  }
  if (!verifyTopology(configJson, layerOptions, error))
    return nullptr;
  std::optional<std::vector<LayerSpec>> selected =
      rt::selectLayers(*layers, options.layers, error);
  if (!selected)
    return nullptr;
  auto impl = std::make_unique<Impl>();
  impl->config = *config;
  impl->modelConfig = *modelConfig;
  impl->layers = *layers;
  impl->selected = *selected;
  impl->options = options;
  plan::PlanOptions planOptions;
  planOptions.contextTokens = options.contextTokens;
  planOptions.pageSize = options.pageSize;
  planOptions.indexLayout = *indexLayout;
  std::optional<plan::Plan> plan = plan::planCaches(
      *selected, {config->headDim, config->indexHeadDim, config->slidingWindow},
      planOptions, error);
  if (!plan)
    return nullptr;
  impl->plan = *plan;
  impl->json = std::string(configJson);
  impl->layerOptions = layerOptions;
  if (options.backend == "cuda") {
    impl->gpu = rt::CudaBackend::create(0, error);
    if (!impl->gpu)
      return nullptr;
  } else if (options.backend != "cpu") {
    error = "unknown backend '" + options.backend + "' (cpu, cuda)";
    return nullptr;
  }
  if (!compileKernels(*impl, impl->config.fp8Weights, error))
    return nullptr;
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

/// Builds the step functions of the configuration in IR (import, topology,
/// cache plan, v4a-build-steps) and compiles those the selected layers run,
/// with fp8 or bf16 projections.
static bool compileKernels(Engine::Impl &m, bool fp8, std::string &error) {
  const std::string &json = m.json;
  std::unique_ptr<mlir::MLIRContext> context = jit::createKernelContext();
  std::string messages;
  mlir::ScopedDiagnosticHandler handler(context.get(),
                                        [&](mlir::Diagnostic &diag) {
                                          if (messages.empty())
                                            messages = diag.str();
                                          return mlir::success();
                                        });
  auto module = importConfig(
      context.get(), llvm::StringRef(json.data(), json.size()),
      mlir::UnknownLoc::get(context.get()), "model", m.layerOptions);
  if (module)
    for (auto model : module->getOps<ModelOp>())
      model.setWeightFormat(fp8 ? WeightFormat::FP8 : WeightFormat::BF16);
  m.fp8Steps = fp8;
  mlir::PassManager pm(context.get());
  // GPU steps (and their structure run on the CPU) take fp8 products as
  // exact bf16 products of dequantized operands, and each group of
  // projections of one input as one product.
  bool gpuForm = m.options.backend == "cuda" || m.options.gpuLoopsOnCpu;
  buildStepsPipeline(pm, {m.options.contextTokens, m.options.pageSize,
                          m.options.indexLayout, gpuForm, gpuForm});
  if (!module || mlir::failed(pm.run(*module))) {
    error =
        "cannot build the step functions: " +
        (messages.empty() ? std::string("invalid configuration") : messages);
    return false;
  }
  std::set<int64_t> selected;
  for (const LayerSpec &layer : m.selected)
    selected.insert(layer.id);
  std::vector<std::string> names;
  m.program.calls = jit::stepCalls(*module, selected, names);
  if (m.options.backend == "cuda") {
    std::optional<jit::GpuSteps> steps =
        jit::compileGpuSteps(*module, names, "sm_90a", error);
    if (!steps)
      return false;
    m.program.functions = std::move(steps->functions);
    m.ptx = std::move(steps->ptx);
    return true;
  }
  m.jit =
      jit::compileSteps(std::move(context), std::move(module), names,
                        m.program.functions, error, m.options.gpuLoopsOnCpu);
  return m.jit != nullptr;
}

//===----------------------------------------------------------------------===//
// Weights
//===----------------------------------------------------------------------===//

/// The rank's part of the whole model's tensors (all of them without
/// tensor parallelism).
static bool keepRankPart(const Engine::Impl &m,
                         std::vector<rt::LayerTensors> &tensors,
                         std::string &error) {
  return rt::shardModelTensors(m.modelConfig, m.options.tensorRank,
                               m.options.tensorParallel, tensors, error);
}

/// Runs the model on `tensors`, the whole model's (of a tensor-parallel
/// rank, its part).
static bool attachModel(Engine::Impl &m, std::vector<rt::LayerTensors> tensors,
                        std::string &error) {
  if (!keepRankPart(m, tensors, error))
    return false;
  // The dtypes decide: a bf16 configuration with an fp8 checkpoint runs fp8
  // projections (and the other way round).
  if (!rt::validateWeights(m.config, m.selected, tensors, error))
    return false;
  std::optional<ProjectionFormat> format =
      projectionFormat(m.config, m.selected, tensors, error);
  std::optional<bool> fp8;
  if (format)
    fp8 = format->tensor.empty() ? m.fp8Steps : format->fp8;
  if (!fp8 || (*fp8 != m.fp8Steps && !compileKernels(m, *fp8, error)))
    return false;
  std::unique_ptr<rt::Backend> backend;
  if (m.options.backend == "cuda") {
    // A model of the same engine loaded before keeps the first device.
    if (!m.gpu && !(m.gpu = rt::CudaBackend::create(0, error)))
      return false;
    if (!m.gpu->loadKernels(m.ptx, error))
      return false;
    backend = std::move(m.gpu);
  } else {
    backend = rt::createCpuBackend();
  }
  m.model = rt::Model::create(
      m.config, m.selected, m.program, std::move(tensors), m.plan,
      m.options.maxSequences, std::move(backend), error);
  if (m.model)
    m.model->padDecodeSteps(m.options.padDecodeSteps);
  return m.model != nullptr;
}

bool Engine::loadRandomWeights(uint64_t seed, std::string &error,
                               const ProgressFn &progress) {
  if (!io::fitsInMemory(hostWeightBytes(impl->modelConfig, impl->selected),
                        "the weights", error))
    return false;
  // Every rank draws the whole model's weights: a rank's part is the same
  // values as the unsharded model's.
  std::vector<rt::LayerTensors> tensors =
      randomHostWeights(impl->modelConfig, impl->selected, seed, progress);
  return attachModel(*impl, std::move(tensors), error);
}

bool EngineAccess::loadTensors(Engine &engine,
                               std::vector<rt::LayerTensors> tensors,
                               std::string &error) {
  return attachModel(*engine.impl, std::move(tensors), error);
}

rt::Model *EngineAccess::model(Engine &engine) {
  return engine.impl->model.get();
}

const plan::Plan &EngineAccess::plan(const Engine &engine) {
  return engine.impl->plan;
}

bool Engine::loadWeights(const std::string &path, std::string &error) {
  if (!io::fitsInMemory(hostWeightBytes(impl->modelConfig, impl->selected),
                        "the weights", error))
    return false;
  std::vector<int64_t> ids;
  for (const LayerSpec &layer : impl->selected)
    ids.push_back(layer.id);
  std::vector<rt::LayerTensors> tensors;
  if (!readCheckpoint(impl->modelConfig, path, tensors, error, ids))
    return false;
  return attachModel(*impl, std::move(tensors), error);
}

//===----------------------------------------------------------------------===//
// Steps
//===----------------------------------------------------------------------===//

static bool needModel(const Engine::Impl &m, std::string &error) {
  if (m.model)
    return true;
  error = "no weights are loaded";
  return false;
}

int64_t Engine::addSequence(std::string &error) {
  return needModel(*impl, error) ? impl->model->addSequence(error) : -1;
}

bool Engine::releaseSequence(int64_t sequence, std::string &error) {
  return needModel(*impl, error) &&
         impl->model->releaseSequence(sequence, error);
}

int64_t Engine::position(int64_t sequence) const {
  return impl->model ? impl->model->position(sequence) : -1;
}

bool Engine::step(const Batch &batch, const std::vector<const float *> &inputs,
                  const std::vector<float *> &outputs, std::string &error) {
  if (!needModel(*impl, error))
    return false;
  rt::StepBatch step{batch.sequences, batch.lengths, batch.paddedTokens};
  return impl->model->step(step, inputs, outputs, error);
}

uint8_t *Engine::cacheBytes(int64_t sequence, int64_t layer,
                            const std::string &component) {
  if (!impl->model)
    return nullptr;
  for (plan::Component c : plan::kAllComponents)
    if (component == plan::componentName(c))
      return impl->model->cacheBytes(sequence, layer, c);
  return nullptr;
}

bool Engine::writeCache(int64_t sequence, int64_t layer,
                        const std::string &component,
                        const std::vector<uint8_t> &bytes, std::string &error) {
  if (!needModel(*impl, error))
    return false;
  for (plan::Component c : plan::kAllComponents)
    if (component == plan::componentName(c))
      return impl->model->writeCache(sequence, layer, c, bytes, error);
  error = "unknown cache component '" + component + "'";
  return false;
}

bool Engine::restorePosition(int64_t sequence, int64_t position,
                             std::string &error) {
  return needModel(*impl, error) &&
         impl->model->restorePosition(sequence, position, error);
}

int64_t Engine::cacheSize(int64_t layer, const std::string &component) const {
  if (!impl->model)
    return 0;
  for (plan::Component c : plan::kAllComponents)
    if (component == plan::componentName(c))
      return impl->model->cacheSize(layer, c);
  return 0;
}

} // namespace v4a
