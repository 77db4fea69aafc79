//===- CAPI.cpp - the C ABI over the runtime ------------------------------===//
//
// Every entry point checks its arguments, takes the model's lock, runs and
// records the message of a failure; no C++ exception crosses the boundary.
//
//===----------------------------------------------------------------------===//

#include "lib/CAPI/Source.h"

#include "core/FileIO.h"
#include "core/Numerics.h"
#include "core/Package.h"
#include "lib/Engine/HostWeights.h"
#include "lib/Engine/PackageModel.h"
#include "runtime/Collective.h"
#include "runtime/SafeTensors.h"
#include "runtime/Weights.h"

#include <atomic>
#include <cstring>
#include <dlfcn.h>
#include <exception>
#include <mutex>
#include <new>

using namespace v4a;

struct v4a_model {
  mutable std::mutex mutex;
  std::unique_ptr<capi::Source> source;
  std::string error;
  bool graphs = true;
};

namespace {

thread_local std::string lastError;

/// The largest batch and tensor extents a step takes.
constexpr int64_t kMaxBatch = 1 << 16, kMaxExtent = int64_t(1) << 32;

/// The calling thread's current CUDA context, put back when a call on a GPU
/// model returns: the runtime makes the model's context current, and the
/// caller's framework may be working on another device.
class CallerContext {
public:
  explicit CallerContext(bool gpu) {
    const Api *api = gpu ? driver() : nullptr;
    if (api && api->get(&saved) == 0)
      restore = api->set;
  }
  ~CallerContext() {
    if (restore)
      restore(saved);
  }

private:
  struct Api {
    int (*get)(void **) = nullptr;
    int (*set)(void *) = nullptr;
  };
  /// The driver's entry points once the runtime has loaded it (never
  /// loaded here).
  static const Api *driver() {
    static std::atomic<const Api *> found{nullptr};
    if (const Api *api = found.load(std::memory_order_acquire))
      return api;
    void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!library)
      return nullptr;
    static Api api;
    static std::once_flag once;
    std::call_once(once, [&] {
      api.get =
          reinterpret_cast<int (*)(void **)>(dlsym(library, "cuCtxGetCurrent"));
      api.set =
          reinterpret_cast<int (*)(void *)>(dlsym(library, "cuCtxSetCurrent"));
    });
    // The runtime keeps the library loaded.
    dlclose(library);
    if (!api.get || !api.set)
      return nullptr;
    found.store(&api, std::memory_order_release);
    return &api;
  }
  void *saved = nullptr;
  int (*restore)(void *) = nullptr;
};

/// A failed call's status and message.
struct Failure {
  v4a_status status = V4A_OK;
  std::string message;
};

/// Runs `body` on the locked model; its failure becomes the model's and the
/// thread's last error.
template <typename Body> v4a_status onModel(v4a_model *model, Body &&body) {
  if (!model)
    return capi::failWithoutModel(V4A_ERROR_INVALID_ARGUMENT,
                                  "the model handle is null");
  std::lock_guard<std::mutex> lock(model->mutex);
  CallerContext context(model->source->device() >= 0);
  Failure failure;
  try {
    failure.status = body(*model, failure.message);
  } catch (const std::bad_alloc &) {
    failure = {V4A_ERROR_FAILED, "out of host memory"};
  } catch (const std::exception &e) {
    failure = {V4A_ERROR_FAILED, e.what()};
  }
  if (failure.status != V4A_OK) {
    model->error = failure.message;
    lastError = failure.message;
  }
  return failure.status;
}

v4a_status needModel(v4a_model &m, std::string &error) {
  if (m.source->model())
    return V4A_OK;
  error = "no weights are loaded (v4a_load_checkpoint, v4a_load_weights or "
          "v4a_load_random_weights)";
  return V4A_ERROR_INVALID_STATE;
}

/// The checks before a model sums over ranks: its weights are loaded and
/// it runs on a GPU.
v4a_status canSumOverRanks(v4a_model &m, std::string &error) {
  if (v4a_status status = needModel(m, error))
    return status;
  if (m.source->device() < 0) {
    error = "a tensor-parallel sum over GPUs needs a GPU model (this one "
            "runs on the cpu)";
    return V4A_ERROR_UNSUPPORTED;
  }
  return V4A_OK;
}

v4a_status noWeightsYet(v4a_model &m, std::string &error) {
  if (!m.source->model())
    return V4A_OK;
  error = "the model's weights are loaded already (once per model)";
  return V4A_ERROR_INVALID_STATE;
}

/// After a load: the model's settings that the handle keeps.
v4a_status loaded(v4a_model &m, bool ok) {
  if (!ok)
    return V4A_ERROR_FAILED;
  m.source->model()->useGraphs(m.graphs);
  return V4A_OK;
}

std::vector<int64_t> selectedIds(const capi::Source &source) {
  std::vector<int64_t> ids;
  for (const LayerSpec &layer : source.selected())
    ids.push_back(layer.id);
  return ids;
}

std::optional<st::DType> weightType(v4a_dtype dtype) {
  switch (dtype) {
  case V4A_F32:
    return st::DType::F32;
  case V4A_BF16:
    return st::DType::BF16;
  case V4A_F16:
    return st::DType::F16;
  case V4A_F8_E4M3:
    return st::DType::F8_E4M3;
  case V4A_F8_E8M0:
    return st::DType::F8_E8M0;
  }
  return std::nullopt;
}

/// A caller's weight as a checkpoint tensor; false names what is wrong.
bool copyWeight(const v4a_weight &weight, int64_t index, st::Tensor &tensor,
                std::string &error) {
  std::string name = weight.name ? std::string("'") + weight.name + "'"
                                 : "weights[" + std::to_string(index) + "]";
  std::optional<st::DType> dtype = weightType(weight.dtype);
  if (!weight.name || !dtype) {
    error = name + (weight.name
                        ? ": unknown dtype " + std::to_string(int(weight.dtype))
                        : ": the name is null");
    return false;
  }
  if (weight.ndim < 0 || weight.ndim > 4 ||
      (weight.ndim > 0 && !weight.shape)) {
    error = name + ": ndim " + std::to_string(weight.ndim) +
            " (0 to 4, with a shape)";
    return false;
  }
  int64_t numel = 1;
  for (int32_t d = 0; d < weight.ndim; ++d) {
    int64_t extent = weight.shape[d];
    if (extent < 0 || extent > kMaxExtent ||
        (extent > 0 && numel > kMaxExtent / extent)) {
      error = name + ": extent " + std::to_string(extent) + " of dimension " +
              std::to_string(d) +
              " outside [0, 2^32], or more than 2^32 elements in all";
      return false;
    }
    numel *= extent;
  }
  double bytes = static_cast<double>(numel) * st::dtypeSize(*dtype);
  if (numel > 0 && !weight.data) {
    error = name + ": the data pointer is null";
    return false;
  }
  if (!io::fitsInMemory(bytes, name, error))
    return false;
  tensor.dtype = *dtype;
  tensor.shape.assign(weight.shape, weight.shape + weight.ndim);
  const auto *data = static_cast<const uint8_t *>(weight.data);
  tensor.data.assign(data, data + static_cast<int64_t>(bytes));
  return true;
}

/// Checks one step tensor of a layer against the model's backend; `what`
/// names it.
bool checkStepTensor(const v4a_tensor &tensor, int64_t rows, int64_t cols,
                     int device, const std::string &what, std::string &error) {
  if (tensor.rows != rows || tensor.cols != cols) {
    error = what + " is [" + std::to_string(tensor.rows) + ", " +
            std::to_string(tensor.cols) + "], the step needs [" +
            std::to_string(rows) + ", " + std::to_string(cols) +
            "] (the batch's tokens x hidden_size)";
    return false;
  }
  if (device < 0) {
    if (tensor.memory != V4A_HOST ||
        (tensor.dtype != V4A_F32 && tensor.dtype != V4A_BF16)) {
      error = what + ": a CPU model takes f32 or bf16 host memory";
      return false;
    }
  } else if (tensor.memory != V4A_CUDA || tensor.dtype != V4A_BF16 ||
             tensor.device != device) {
    error = what + ": the model takes bf16 memory of CUDA device " +
            std::to_string(device) + ", got " +
            (tensor.dtype == V4A_BF16 ? "bf16" : "another dtype") + " in " +
            (tensor.memory == V4A_CUDA
                 ? "memory of CUDA device " + std::to_string(tensor.device)
                 : std::string("host memory"));
    return false;
  }
  if (rows > 0 && !tensor.data) {
    error = what + ": the data pointer is null";
    return false;
  }
  return true;
}

/// f32 host tensors as the bf16 the model takes, and back.
struct HostStaging {
  std::vector<std::vector<uint16_t>> inputs, outputs;
};

v4a_status runStep(v4a_model &m, int32_t batch, const int64_t *sequences,
                   const int64_t *lengths, const v4a_tensor *inputs,
                   const v4a_tensor *outputs, int32_t numTensors, void *stream,
                   std::string &error) {
  if (v4a_status status = needModel(m, error))
    return status;
  rt::Model &model = *m.source->model();
  const std::vector<LayerSpec> &selected = m.source->selected();
  if (batch < 0 || batch > kMaxBatch ||
      (batch > 0 && (!sequences || !lengths))) {
    error = "the batch is " + std::to_string(batch) + " sequences (0 to " +
            std::to_string(kMaxBatch) +
            ", with their sequence ids and lengths)";
    return V4A_ERROR_INVALID_ARGUMENT;
  }
  if (numTensors != static_cast<int32_t>(selected.size()) ||
      (numTensors > 0 && (!inputs || !outputs))) {
    error = "the step takes one input and one output per selected layer (" +
            std::to_string(selected.size()) + "), got " +
            std::to_string(numTensors);
    return V4A_ERROR_INVALID_ARGUMENT;
  }
  int device = m.source->device();
  if (device < 0 && stream) {
    error = "a CPU model runs on no stream: pass a null stream";
    return V4A_ERROR_INVALID_ARGUMENT;
  }
  rt::StepBatch step;
  int64_t tokens = 0;
  for (int32_t b = 0; b < batch; ++b) {
    if (lengths[b] < 0 || lengths[b] > kMaxExtent) {
      error = "batch row " + std::to_string(b) + ": length " +
              std::to_string(lengths[b]) + " is negative or absurd";
      return V4A_ERROR_INVALID_ARGUMENT;
    }
    step.sequences.push_back(sequences[b]);
    step.lengths.push_back(lengths[b]);
    tokens += lengths[b];
  }
  int64_t dim = m.source->config().hiddenSize;
  size_t numLayers = static_cast<size_t>(m.source->config().numLayers());
  std::vector<const void *> in(numLayers, nullptr);
  std::vector<void *> out(numLayers, nullptr);
  HostStaging staged;
  for (size_t i = 0; i < selected.size(); ++i) {
    std::string layer = "layer " + std::to_string(selected[i].id);
    if (!checkStepTensor(inputs[i], tokens, dim, device, layer + "'s input",
                         error) ||
        !checkStepTensor(outputs[i], tokens, dim, device, layer + "'s output",
                         error))
      return V4A_ERROR_INVALID_ARGUMENT;
    in[selected[i].id] = inputs[i].data;
    out[selected[i].id] = outputs[i].data;
  }
  // A CPU model's f32 tensors go through bf16 copies (the steps' type).
  for (size_t i = 0; i < selected.size(); ++i) {
    int64_t id = selected[i].id;
    if (inputs[i].dtype == V4A_F32) {
      const auto *values = static_cast<const float *>(inputs[i].data);
      std::vector<uint16_t> &bits = staged.inputs.emplace_back(tokens * dim);
      for (int64_t e = 0; e < tokens * dim; ++e)
        bits[e] = num::toBF16Bits(values[e]);
      in[id] = bits.data();
    }
    if (outputs[i].dtype == V4A_F32)
      out[id] = staged.outputs.emplace_back(tokens * dim).data();
  }
  if (!model.failure().empty()) {
    error = "the model refuses steps after one failed: " + model.failure();
    return V4A_ERROR_INVALID_STATE;
  }
  if (!model.queueStep(step, in, out, stream, error))
    return model.failure().empty() ? V4A_ERROR_INVALID_ARGUMENT
                                   : V4A_ERROR_FAILED;
  for (size_t i = 0, next = 0; i < selected.size(); ++i) {
    if (outputs[i].dtype != V4A_F32)
      continue;
    const std::vector<uint16_t> &bits = staged.outputs[next++];
    auto *values = static_cast<float *>(outputs[i].data);
    for (int64_t e = 0; e < tokens * dim; ++e)
      values[e] = num::fromBF16Bits(bits[e]);
  }
  return V4A_OK;
}

/// A package on a GPU: the runtime library's source.
class PackageSource : public capi::Source {
public:
  PackageSource(pkg::Package package, std::vector<LayerSpec> selected,
                plan::Plan plan, int64_t maxSequences, int device,
                int64_t tensorRank)
      // `whole` is declared after `package`, so it is built from the moved
      // package.
      : package(std::move(package)), whole(wholeModelConfig(this->package)),
        layers(std::move(selected)), cachePlan(std::move(plan)),
        slots(maxSequences), ordinal(device), rank(tensorRank) {}
  /// The whole model's (weights are given whole; a tensor-parallel rank
  /// keeps its part).
  const ModelConfig &config() const override { return whole; }
  const std::vector<LayerSpec> &selected() const override { return layers; }
  const plan::Plan &plan() const override { return cachePlan; }
  int64_t maxSequences() const override { return slots; }
  int device() const override { return ordinal; }
  int64_t tensorParallel() const override { return package.tensorParallel; }
  int64_t tensorRank() const override { return rank; }
  rt::Model *model() override { return runtime.get(); }

  bool loadTensors(std::vector<rt::LayerTensors> tensors,
                   std::string &error) override {
    if (!rt::validateWeights(whole, layers, tensors, error) ||
        !keepRankPart(package, rank, tensors, error))
      return false;
    PackageDevice device;
    runtime = createPackageModel(package, layers, std::move(tensors), slots,
                                 ordinal, device, error);
    return runtime != nullptr;
  }

  bool loadCheckpoint(const std::string &path, std::string &error) override {
    std::vector<rt::LayerTensors> tensors;
    return rt::readCheckpointFiles(whole, {path}, tensors, error,
                                   selectedIds(*this)) &&
           loadTensors(std::move(tensors), error);
  }

private:
  pkg::Package package;
  ModelConfig whole;
  std::vector<LayerSpec> layers;
  plan::Plan cachePlan;
  int64_t slots;
  int ordinal;
  int64_t rank;
  std::unique_ptr<rt::Model> runtime;
};

} // namespace

namespace v4a::capi {

v4a_status failWithoutModel(v4a_status status, const std::string &message) {
  lastError = message;
  return status;
}

v4a_status wrap(std::unique_ptr<Source> source, v4a_model **out, bool graphs) {
  auto *model = new (std::nothrow) v4a_model;
  if (!model)
    return failWithoutModel(V4A_ERROR_FAILED, "out of host memory");
  model->source = std::move(source);
  model->graphs = graphs;
  *out = model;
  return V4A_OK;
}

/// The first of the options a package fixes itself that `options` sets
/// (null: none); a package opened with them would silently differ.
static const char *compileOnlyField(const v4a_options &options) {
  v4a_options defaults;
  v4a_options_init(&defaults);
  if (options.context_tokens != defaults.context_tokens)
    return "context_tokens";
  if (options.page_size != defaults.page_size)
    return "page_size";
  if (options.kv_layout)
    return "kv_layout";
  if (options.index_layout)
    return "index_layout";
  if (options.tensor_parallel != 1)
    return "tensor_parallel";
  return nullptr;
}

bool resolveOptions(const v4a_options *given, v4a_options &options,
                    std::string &error) {
  v4a_options_init(&options);
  if (!given)
    return true;
  if (given->struct_size != sizeof(v4a_options)) {
    error = "v4a_options.struct_size is " + std::to_string(given->struct_size) +
            ", this library's is " + std::to_string(sizeof(v4a_options)) +
            " (ABI " + std::to_string(V4A_ABI_VERSION) +
            "; fill the options with v4a_options_init)";
    return false;
  }
  options = *given;
  auto within = [&](const char *field, int64_t value, int64_t low,
                    int64_t high) {
    if (value >= low && value <= high)
      return true;
    error = std::string("v4a_options.") + field + " is " +
            std::to_string(value) + ", outside [" + std::to_string(low) + ", " +
            std::to_string(high) + "]";
    return false;
  };
  if (!within("max_sequences", options.max_sequences, 1, 4096) ||
      !within("num_layers", options.num_layers, 0, 1 << 16) ||
      !within("device", options.device, 0, 1 << 10) ||
      !within("use_graphs", options.use_graphs, 0, 1) ||
      !within("context_tokens", options.context_tokens, 1, int64_t(1) << 24) ||
      !within("page_size", options.page_size, 1, 1 << 16) ||
      !within("tensor_parallel", options.tensor_parallel, 1,
              kMaxTensorParallel) ||
      !within("tensor_rank", options.tensor_rank, 0, kMaxTensorParallel - 1))
    return false;
  if (options.num_layers > 0 && !options.layers) {
    error = "v4a_options.layers is null but num_layers is " +
            std::to_string(options.num_layers);
    return false;
  }
  if (!options.backend)
    options.backend = "cpu";
  if (std::strcmp(options.backend, "cpu") &&
      std::strcmp(options.backend, "cuda")) {
    error = std::string("v4a_options.backend is '") + options.backend +
            "' (cpu or cuda)";
    return false;
  }
  return true;
}

} // namespace v4a::capi

extern "C" {

const char *v4a_version(void) { return pkg::kCompilerVersion; }
int32_t v4a_abi_version(void) { return V4A_ABI_VERSION; }

v4a_status v4a_check_abi(int32_t header_abi) {
  if (header_abi == V4A_ABI_VERSION)
    return V4A_OK;
  return capi::failWithoutModel(
      V4A_ERROR_ABI_MISMATCH,
      "the caller was built for ABI " + std::to_string(header_abi) +
          ", the library (" + pkg::kCompilerVersion + ") implements ABI " +
          std::to_string(V4A_ABI_VERSION));
}

const char *v4a_status_name(v4a_status status) {
  switch (status) {
  case V4A_OK:
    return "V4A_OK";
  case V4A_ERROR_INVALID_ARGUMENT:
    return "V4A_ERROR_INVALID_ARGUMENT";
  case V4A_ERROR_INVALID_STATE:
    return "V4A_ERROR_INVALID_STATE";
  case V4A_ERROR_UNSUPPORTED:
    return "V4A_ERROR_UNSUPPORTED";
  case V4A_ERROR_ABI_MISMATCH:
    return "V4A_ERROR_ABI_MISMATCH";
  case V4A_ERROR_FAILED:
    return "V4A_ERROR_FAILED";
  }
  return "unknown status";
}

const char *v4a_last_error(void) { return lastError.c_str(); }

void v4a_options_init(v4a_options *options) {
  if (!options)
    return;
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->use_graphs = 1;
  options->max_sequences = 4;
  options->backend = "cpu";
  options->context_tokens = 4096;
  options->page_size = 64;
  options->tensor_parallel = 1;
}

v4a_status v4a_open_package(const char *path, const v4a_options *given,
                            v4a_model **model) {
  if (!path || !model)
    return capi::failWithoutModel(V4A_ERROR_INVALID_ARGUMENT,
                                  "v4a_open_package: null path or result");
  *model = nullptr;
  try {
    std::string error;
    v4a_options options;
    if (!capi::resolveOptions(given, options, error))
      return capi::failWithoutModel(V4A_ERROR_INVALID_ARGUMENT, error);
    if (const char *field = capi::compileOnlyField(options))
      return capi::failWithoutModel(
          V4A_ERROR_INVALID_ARGUMENT,
          std::string("v4a_options.") + field +
              " is v4a_compile's: a package carries its own plan, layouts "
              "and tensor-parallel degree (leave the default)");
    std::optional<pkg::Package> package = readPackage(path, error);
    if (!package)
      return capi::failWithoutModel(V4A_ERROR_FAILED, error);
    if (options.tensor_rank >= package->tensorParallel)
      return capi::failWithoutModel(
          V4A_ERROR_INVALID_ARGUMENT,
          "v4a_options.tensor_rank is " + std::to_string(options.tensor_rank) +
              ", the package's ranks are 0 .. " +
              std::to_string(package->tensorParallel - 1));
    std::vector<int64_t> ids(options.layers,
                             options.layers + options.num_layers);
    std::optional<std::vector<LayerSpec>> selected =
        rt::selectLayers(package->layers, ids, error);
    if (!selected)
      return capi::failWithoutModel(V4A_ERROR_INVALID_ARGUMENT, error);
    const ModelConfig &config = package->config;
    std::optional<plan::Plan> plan = plan::planCaches(
        *selected, {config.headDim, config.indexHeadDim, config.slidingWindow},
        package->planOptions, error);
    if (!plan)
      return capi::failWithoutModel(V4A_ERROR_FAILED, error);
    return capi::wrap(
        std::make_unique<PackageSource>(std::move(*package), *selected, *plan,
                                        options.max_sequences, options.device,
                                        options.tensor_rank),
        model, options.use_graphs != 0);
  } catch (const std::bad_alloc &) {
    return capi::failWithoutModel(V4A_ERROR_FAILED, "out of host memory");
  } catch (const std::exception &e) {
    return capi::failWithoutModel(V4A_ERROR_FAILED, e.what());
  }
}

void v4a_free(v4a_model *model) {
  if (!model)
    return;
  CallerContext context(model->source->device() >= 0);
  delete model;
}

const char *v4a_error(const v4a_model *model) {
  if (!model)
    return "the model handle is null";
  // A copy for this thread: another may fail a call on the model meanwhile.
  thread_local std::string copy;
  std::lock_guard<std::mutex> lock(model->mutex);
  copy = model->error;
  return copy.c_str();
}

v4a_status v4a_load_checkpoint(v4a_model *model, const char *path) {
  return onModel(model, [&](v4a_model &m, std::string &error) {
    if (!path) {
      error = "v4a_load_checkpoint: the path is null";
      return V4A_ERROR_INVALID_ARGUMENT;
    }
    if (v4a_status status = noWeightsYet(m, error))
      return status;
    if (!io::fitsInMemory(
            hostWeightBytes(m.source->config(), m.source->selected()),
            "the weights", error))
      return V4A_ERROR_FAILED;
    return loaded(m, m.source->loadCheckpoint(path, error));
  });
}

v4a_status v4a_load_random_weights(v4a_model *model, uint64_t seed) {
  return onModel(model, [&](v4a_model &m, std::string &error) {
    if (v4a_status status = noWeightsYet(m, error))
      return status;
    const ModelConfig &config = m.source->config();
    if (!io::fitsInMemory(hostWeightBytes(config, m.source->selected()),
                          "the weights", error))
      return V4A_ERROR_FAILED;
    return loaded(
        m, m.source->loadTensors(
               randomHostWeights(config, m.source->selected(), seed), error));
  });
}

v4a_status v4a_load_weights(v4a_model *model, const v4a_weight *weights,
                            int64_t count) {
  return onModel(model, [&](v4a_model &m, std::string &error) {
    if (count < 0 || count > (1 << 20) || (count > 0 && !weights)) {
      error = "v4a_load_weights takes 0 to 2^20 weights, got " +
              std::to_string(count) + (count > 0 ? " (or a null array)" : "");
      return V4A_ERROR_INVALID_ARGUMENT;
    }
    if (v4a_status status = noWeightsYet(m, error))
      return status;
    const ModelConfig &config = m.source->config();
    std::vector<bool> wanted(config.numLayers(), false);
    for (const LayerSpec &layer : m.source->selected())
      wanted[layer.id] = true;
    std::vector<rt::LayerTensors> tensors(config.numLayers());
    for (int64_t i = 0; i < count; ++i) {
      st::Tensor tensor;
      if (!copyWeight(weights[i], i, tensor, error))
        return V4A_ERROR_INVALID_ARGUMENT;
      // As in a checkpoint: other parts' tensors are not attention's.
      std::string name = weights[i].name, rest;
      if (!rt::isAttentionTensor(name))
        continue;
      int64_t layer = rt::layerOfName(config, name, rest);
      if (layer >= 0 && !wanted[layer])
        continue;
      if (!rt::addAttentionTensor(config, name, std::move(tensor),
                                  "the weights given", tensors, error))
        return V4A_ERROR_INVALID_ARGUMENT;
    }
    if (!rt::validateWeights(config, m.source->selected(), tensors, error))
      return V4A_ERROR_INVALID_ARGUMENT;
    return loaded(m, m.source->loadTensors(std::move(tensors), error));
  });
}

v4a_status v4a_add_sequence(v4a_model *model, int64_t *sequence) {
  return onModel(model, [&](v4a_model &m, std::string &error) {
    if (!sequence) {
      error = "v4a_add_sequence: the result pointer is null";
      return V4A_ERROR_INVALID_ARGUMENT;
    }
    if (v4a_status status = needModel(m, error))
      return status;
    *sequence = m.source->model()->addSequence(error);
    return *sequence < 0 ? V4A_ERROR_INVALID_STATE : V4A_OK;
  });
}

v4a_status v4a_release_sequence(v4a_model *model, int64_t sequence) {
  return onModel(model, [&](v4a_model &m, std::string &error) {
    if (v4a_status status = needModel(m, error))
      return status;
    return m.source->model()->releaseSequence(sequence, error)
               ? V4A_OK
               : V4A_ERROR_INVALID_ARGUMENT;
  });
}

v4a_status v4a_position(v4a_model *model, int64_t sequence, int64_t *position) {
  return onModel(model, [&](v4a_model &m, std::string &error) {
    if (!position) {
      error = "v4a_position: the result pointer is null";
      return V4A_ERROR_INVALID_ARGUMENT;
    }
    if (v4a_status status = needModel(m, error))
      return status;
    *position = m.source->model()->position(sequence);
    if (*position >= 0)
      return V4A_OK;
    error = "unknown or released sequence " + std::to_string(sequence);
    return V4A_ERROR_INVALID_ARGUMENT;
  });
}

v4a_status v4a_step(v4a_model *model, int32_t batch, const int64_t *sequences,
                    const int64_t *lengths, const v4a_tensor *inputs,
                    const v4a_tensor *outputs, int32_t num_tensors,
                    void *stream) {
  return onModel(model, [&](v4a_model &m, std::string &error) {
    return runStep(m, batch, sequences, lengths, inputs, outputs, num_tensors,
                   stream, error);
  });
}

v4a_status v4a_synchronize(v4a_model *model) {
  return onModel(model, [&](v4a_model &m, std::string &error) {
    if (v4a_status status = needModel(m, error))
      return status;
    return m.source->model()->synchronize(error) ? V4A_OK : V4A_ERROR_FAILED;
  });
}

v4a_status v4a_make_communicator_id(uint8_t id[128]) {
  if (!id)
    return capi::failWithoutModel(V4A_ERROR_INVALID_ARGUMENT,
                                  "v4a_make_communicator_id: null id");
  rt::CollectiveId made;
  std::string error;
  if (!rt::Collective::makeId(made, error))
    return capi::failWithoutModel(V4A_ERROR_FAILED, error);
  std::memcpy(id, made.bytes.data(), made.bytes.size());
  return V4A_OK;
}

v4a_status v4a_join_ranks(v4a_model *model, const uint8_t id[128]) {
  return onModel(model, [&](v4a_model &m, std::string &error) {
    if (!id) {
      error = "v4a_join_ranks: null id";
      return V4A_ERROR_INVALID_ARGUMENT;
    }
    if (v4a_status status = canSumOverRanks(m, error))
      return status;
    rt::CollectiveId given;
    std::memcpy(given.bytes.data(), id, given.bytes.size());
    return m.source->model()->joinRanks(
               given, static_cast<int>(m.source->tensorRank()),
               static_cast<int>(m.source->tensorParallel()), error)
               ? V4A_OK
               : V4A_ERROR_FAILED;
  });
}

v4a_status v4a_use_communicator(v4a_model *model, void *nccl_comm) {
  return onModel(model, [&](v4a_model &m, std::string &error) {
    if (v4a_status status = canSumOverRanks(m, error))
      return status;
    std::unique_ptr<rt::Collective> collective =
        rt::Collective::adopt(nccl_comm, error);
    if (!collective)
      return V4A_ERROR_INVALID_ARGUMENT;
    if (collective->rank() != m.source->tensorRank() ||
        collective->world() != m.source->tensorParallel()) {
      error = "the communicator is rank " + std::to_string(collective->rank()) +
              " of " + std::to_string(collective->world()) +
              "; the model is rank " + std::to_string(m.source->tensorRank()) +
              " of " + std::to_string(m.source->tensorParallel());
      return V4A_ERROR_INVALID_ARGUMENT;
    }
    return m.source->model()->sumOverRanks(std::move(collective), error)
               ? V4A_OK
               : V4A_ERROR_FAILED;
  });
}

v4a_status v4a_get_info(v4a_model *model, v4a_info *info) {
  return onModel(model, [&](v4a_model &m, std::string &error) {
    if (!info || info->struct_size != sizeof(v4a_info)) {
      error = "v4a_get_info: info must be a v4a_info with struct_size " +
              std::to_string(sizeof(v4a_info));
      return V4A_ERROR_INVALID_ARGUMENT;
    }
    const capi::Source &source = *m.source;
    std::memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    info->num_layers = static_cast<int32_t>(source.config().numLayers());
    info->num_selected = static_cast<int32_t>(source.selected().size());
    info->device = source.device();
    info->hidden_size = source.config().hiddenSize;
    info->max_sequences = source.maxSequences();
    info->context_tokens = source.plan().options.contextTokens;
    info->page_size = source.plan().options.pageSize;
    info->cache_bytes = source.plan().allocatedBytes() * source.maxSequences();
    if (rt::Model *model = m.source->model()) {
      info->weights_loaded = 1;
      info->weight_bytes = model->weightBytes();
      info->workspace_bytes = model->workspaceSize();
    }
    std::strcpy(info->backend, source.device() < 0 ? "cpu" : "cuda");
    info->tensor_parallel = static_cast<int32_t>(source.tensorParallel());
    info->tensor_rank = static_cast<int32_t>(source.tensorRank());
    return V4A_OK;
  });
}

v4a_status v4a_selected_layers(v4a_model *model, int64_t *ids, int32_t capacity,
                               int32_t *count) {
  return onModel(model, [&](v4a_model &m, std::string &error) {
    if (!count || capacity < 0 || (capacity > 0 && !ids)) {
      error = "v4a_selected_layers: null count, or ids for a capacity of " +
              std::to_string(capacity);
      return V4A_ERROR_INVALID_ARGUMENT;
    }
    std::vector<int64_t> selected = selectedIds(*m.source);
    *count = static_cast<int32_t>(selected.size());
    for (int32_t i = 0; i < capacity && i < *count; ++i)
      ids[i] = selected[i];
    return V4A_OK;
  });
}

v4a_status v4a_cache_size(v4a_model *model, int64_t layer,
                          const char *component, int64_t *bytes) {
  return onModel(model, [&](v4a_model &m, std::string &error) {
    if (!component || !bytes) {
      error = "v4a_cache_size: null component or result";
      return V4A_ERROR_INVALID_ARGUMENT;
    }
    std::optional<plan::Component> which;
    std::string names;
    for (plan::Component c : plan::kAllComponents) {
      if (component == std::string(plan::componentName(c)))
        which = c;
      names +=
          (names.empty() ? "" : ", ") + std::string(plan::componentName(c));
    }
    if (!which) {
      error = std::string("unknown cache component '") + component + "' (" +
              names + ")";
      return V4A_ERROR_INVALID_ARGUMENT;
    }
    *bytes = 0;
    const plan::Plan &plan = m.source->plan();
    for (const plan::Buffer &buffer : plan.buffers)
      if (buffer.layer == layer && buffer.component == *which)
        *bytes = buffer.bytes;
    return V4A_OK;
  });
}

} // extern "C"
