//===- Model.cpp - the host runtime: caches, weights, step programs -------===//

#include "runtime/Model.h"

#include "core/CacheLayout.h"
#include "core/FileIO.h"
#include "core/Numerics.h"
#include "core/TensorSpecs.h"
#include "runtime/Collective.h"
#include "runtime/StepGemms.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <thread>

namespace v4a::rt {

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

const char *typeName(HostTensor::Type type) {
  switch (type) {
  case HostTensor::Type::F32:
    return "f32/bf16";
  case HostTensor::Type::BF16:
    return "bf16";
  case HostTensor::Type::E4M3:
    return "f8_e4m3";
  case HostTensor::Type::UE8M0:
    return "f8_e8m0";
  }
  return "unknown";
}

static std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

static bool expectTensor(const LayerTensors &tensors, const std::string &prefix,
                         const std::string &name,
                         const std::vector<int64_t> &shape,
                         HostTensor::Type type, std::string &error) {
  auto it = tensors.find(name);
  if (it == tensors.end()) {
    error = prefix + name + ": missing tensor (expected " + typeName(type) +
            " " + shapeText(shape) + ")";
    return false;
  }
  if (it->second.shape != shape || it->second.type != type) {
    error = prefix + name + ": expected " + typeName(type) + " " +
            shapeText(shape) + ", got " + typeName(it->second.type) + " " +
            shapeText(it->second.shape);
    return false;
  }
  bool f32 = type == HostTensor::Type::F32;
  size_t stored = f32 ? it->second.f32.size() : it->second.bytes.size();
  if (static_cast<int64_t>(stored) != it->second.numel()) {
    error = prefix + name + ": holds " + std::to_string(stored) +
            " values for shape " + shapeText(shape);
    return false;
  }
  return true;
}

std::optional<std::vector<LayerSpec>>
selectLayers(const std::vector<LayerSpec> &layers,
             const std::vector<int64_t> &ids, std::string &error) {
  if (ids.empty())
    return layers;
  std::set<int64_t> chosen;
  for (int64_t id : ids) {
    if (id < 0 || id >= static_cast<int64_t>(layers.size())) {
      error = "layer " + std::to_string(id) + " is not a layer (valid: 0.." +
              std::to_string(layers.size() - 1) + ")";
      return std::nullopt;
    }
    chosen.insert(id);
  }
  std::vector<LayerSpec> selected;
  for (int64_t id : chosen) {
    const LayerSpec &layer = layers[id];
    for (int64_t source : {layer.kvSource, layer.indexKSource,
                           layer.indexSource, layer.candidateSource})
      if (source >= 0 && !chosen.count(source)) {
        error = "layer " + std::to_string(id) +
                " reads the caches or top-k "
                "of layer " +
                std::to_string(source) + ": select it too";
        return std::nullopt;
      }
    selected.push_back(layer);
  }
  return selected;
}

std::vector<StepProgram::Call>
callsOfLayers(const StepProgram &program,
              const std::vector<LayerSpec> &layers) {
  std::set<int64_t> ids;
  for (const LayerSpec &layer : layers)
    ids.insert(layer.id);
  std::set<int> metas;
  for (const StepProgram::Call &call : program.calls)
    if (ids.count(call.layer))
      metas.insert(call.meta);
  std::vector<StepProgram::Call> calls;
  for (const StepProgram::Call &call : program.calls)
    if (call.layer < 0 ? metas.count(call.function) > 0
                       : ids.count(call.layer) > 0)
      calls.push_back(call);
  return calls;
}

bool validateWeights(const ModelConfig &config,
                     const std::vector<LayerSpec> &layers,
                     const std::vector<LayerTensors> &tensors,
                     std::string &error) {
  if (static_cast<int64_t>(tensors.size()) != config.numLayers()) {
    error = "weights for " + std::to_string(tensors.size()) +
            " layers, expected " + std::to_string(config.numLayers());
    return false;
  }
  for (const LayerSpec &layer : layers) {
    std::string prefix = layerTensorPrefix(config, layer.id);
    for (const TensorSpec &spec : layerTensorSpecs(config, layer)) {
      // The dtype decides the kernel: projections may be e4m3 with block
      // scales, or bf16/f32; everything else is bf16/f32.
      auto found = tensors[layer.id].find(spec.name);
      bool fp8 = spec.projection && found != tensors[layer.id].end() &&
                 found->second.type == HostTensor::Type::E4M3;
      if (!expectTensor(tensors[layer.id], prefix, spec.name, spec.shape,
                        fp8 ? HostTensor::Type::E4M3 : HostTensor::Type::F32,
                        error))
        return false;
      if (!fp8)
        continue;
      std::string scale = scaleTensorName(spec.name);
      std::vector<int64_t> scaleShape = {(spec.shape[0] + 127) / 128,
                                         (spec.shape[1] + 127) / 128};
      if (!expectTensor(tensors[layer.id], prefix, scale, scaleShape,
                        HostTensor::Type::UE8M0, error))
        return false;
    }
  }
  return true;
}

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// The shape of an argument in a step of `tokens` tokens.
std::vector<int64_t> shapeOf(const step::Arg &arg, int64_t tokens) {
  std::vector<int64_t> shape;
  for (int64_t d : arg.shape)
    shape.push_back(d < 0 ? tokens : d);
  return shape;
}

int64_t bytesOf(const std::vector<int64_t> &shape, step::Element element) {
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  return count * step::elementBytes(element);
}

/// One owned cache buffer for every sequence slot: slot s at s * slotBytes
/// from `offset` in the cache arena.
struct CacheArena {
  int64_t offset = 0;
  int64_t slotBytes = 0;
  int64_t rows = 0;
  int64_t dim = 0;
};

struct Sequence {
  bool active = false;
  int64_t position = 0;
};

bool isCacheBind(const std::string &bind) {
  return bind.rfind("cache.", 0) == 0;
}

std::optional<plan::Component> componentOf(const std::string &bind) {
  for (plan::Component c : plan::kAllComponents)
    if (bind == std::string("cache.") + plan::componentName(c))
      return c;
  return std::nullopt;
}

HostTensor::Type hostTypeOf(step::Element element) {
  switch (element) {
  case step::Element::BF16:
    return HostTensor::Type::BF16;
  case step::Element::E4M3:
    return HostTensor::Type::E4M3;
  case step::Element::UE8M0:
    return HostTensor::Type::UE8M0;
  default:
    return HostTensor::Type::F32;
  }
}

/// Runs body(0) .. body(count - 1) on every core; each index once.
void parallelFor(size_t count, const std::function<void(size_t)> &body) {
  std::atomic<size_t> next{0};
  auto run = [&] {
    for (size_t i; (i = next++) < count;)
      body(i);
  };
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads && t < count; ++t)
    pool.emplace_back(run);
  run();
  for (std::thread &thread : pool)
    thread.join();
}

/// Brings a validated weight to the element type its step argument has:
/// bf16 values to bf16 bits, an e4m3 weight that a bf16 argument takes to
/// its exact product with the block scales (in bf16 bits too: an e4m3 value
/// times a power of two is a bf16 value).
bool convertWeight(LayerTensors &tensors, const std::string &name,
                   step::Element element, std::string &error) {
  HostTensor &weight = tensors.at(name);
  HostTensor::Type want = hostTypeOf(element);
  if (weight.type == want)
    return true;
  std::vector<uint8_t> bits;
  if (want == HostTensor::Type::BF16 && weight.type == HostTensor::Type::F32) {
    bits.resize(2 * weight.f32.size());
    auto *out = reinterpret_cast<uint16_t *>(bits.data());
    for (size_t i = 0; i < weight.f32.size(); ++i)
      out[i] = num::toBF16Bits(weight.f32[i]);
  } else if (want == HostTensor::Type::BF16 &&
             weight.type == HostTensor::Type::E4M3 &&
             tensors.count(scaleTensorName(name))) {
    // The step takes the product as a bf16 one: wo_a's fp8 form is defined
    // so, and other fp8 products quantize their activation in the step
    // (v4a-dequantize-fp8-weights).
    const HostTensor &scale = tensors.at(scaleTensorName(name));
    float decoded[256];
    for (int code = 0; code < 256; ++code)
      decoded[code] = num::fromE4M3Bits(static_cast<uint8_t>(code));
    int64_t rows = weight.shape[0], cols = weight.shape[1];
    int64_t scaleCols = scale.shape[1];
    bits.resize(2 * rows * cols);
    auto *out = reinterpret_cast<uint16_t *>(bits.data());
    std::vector<float> scales(scaleCols);
    for (int64_t r = 0; r < rows; ++r) {
      if (r % 128 == 0)
        for (int64_t b = 0; b < scaleCols; ++b)
          scales[b] =
              num::fromUE8M0Bits(scale.bytes[(r / 128) * scaleCols + b]);
      const uint8_t *in = weight.bytes.data() + r * cols;
      for (int64_t c = 0; c < cols; ++c)
        out[r * cols + c] = num::toBF16Bits(decoded[in[c]] * scales[c / 128]);
    }
  } else {
    error = name + ": the compiled step takes " + typeName(want) + ", got " +
            typeName(weight.type);
    return false;
  }
  weight.f32 = std::vector<float>();
  weight.bytes = std::move(bits);
  weight.type = HostTensor::Type::BF16;
  return true;
}

/// Checks that every selected layer has one step call and that its weights
/// can be bound to it, converting weights to the argument types (and
/// stacking the weights of merged projections).
bool bindWeights(const std::vector<LayerSpec> &layers,
                 const StepProgram &program, std::vector<LayerTensors> &weights,
                 std::string &error) {
  for (const LayerSpec &layer : layers) {
    auto calls = std::count_if(
        program.calls.begin(), program.calls.end(),
        [&](const StepProgram::Call &call) { return call.layer == layer.id; });
    if (calls != 1) {
      error = "layer " + std::to_string(layer.id) + " has " +
              std::to_string(calls) + " step calls in the program, not one";
      return false;
    }
  }
  struct Job {
    int64_t layer;
    const step::Arg *arg;
    std::string tensor;
  };
  std::vector<Job> jobs, stacks;
  for (const StepProgram::Call &call : program.calls) {
    if (call.layer < 0)
      continue;
    for (const step::Arg &arg : program.functions[call.function].args) {
      std::vector<std::string> parts = step::stackedParts(arg.bind);
      bool present =
          std::all_of(parts.begin(), parts.end(), [&](const std::string &part) {
            return weights[call.layer].count(part);
          });
      if (!present)
        continue;
      for (const std::string &part : parts)
        jobs.push_back({call.layer, &arg, part});
      if (parts.size() > 1)
        stacks.push_back({call.layer, &arg, arg.bind});
    }
  }
  // Tensors convert independently; the first error in job order is kept.
  std::vector<std::string> errors(jobs.size());
  parallelFor(jobs.size(), [&](size_t i) {
    const Job &job = jobs[i];
    if (!convertWeight(weights[job.layer], job.tensor, job.arg->element,
                       errors[i]))
      errors[i] = "layer " + std::to_string(job.layer) + " " + errors[i];
  });
  for (const std::string &problem : errors)
    if (!problem.empty()) {
      error = problem;
      return false;
    }
  for (const Job &stack : stacks)
    if (!stackWeight(weights[stack.layer], *stack.arg, error)) {
      error = "layer " + std::to_string(stack.layer) + " " + error;
      return false;
    }
  return true;
}

/// Where a step's buffers lie in the step region of the workspace: the
/// inputs first (the token ids, then each layer's x) so that one copy fills
/// them, then each layer's y so that one copy reads them back, then the
/// other outputs of every call in order. It follows from the token count
/// alone, so a recorded graph finds its buffers where it left them.
struct StepLayout {
  int64_t tokens = 0;
  std::map<std::string, int64_t> ids;
  std::map<int64_t, int64_t> x, y;
  /// The table of a queued step's copies: each layer's input, then each
  /// output (CopyEntry rows, staged with the ids).
  int64_t copies = 0;
  /// [0, inputBytes): the inputs; [outputBegin, outputEnd): the ys.
  int64_t inputBytes = 0, outputBegin = 0, outputEnd = 0;
  /// Per call, per argument: the offset of an output other than a layer's
  /// y, else -1.
  std::vector<std::vector<int64_t>> outputs;
  int64_t bytes = 0;
};

/// The token ids every step takes, in their layout order.
constexpr const char *kStepIds[] = {"positions", "slots", "first", "last"};

/// A recorded step: how often its (tokens, context bound) ran, and its graph
/// once recorded (the first run of a key is never recorded: it chooses the
/// library's algorithms and warms the caches of the driver).
struct StepGraph {
  int64_t runs = 0;
  void *graph = nullptr;
  /// The backend could not record it: it runs on the stream.
  bool refused = false;
};

/// V4A_STEP_TIMES=1: a queued step's host time per phase, in microseconds,
/// one line on stderr (what an engine's step costs before the device).
class PhaseTimes {
public:
  void mark(const char *phase) {
    if (!enabled())
      return;
    auto now = std::chrono::steady_clock::now();
    char text[64];
    std::snprintf(
        text, sizeof text, " %s %.1f", phase,
        std::chrono::duration<double, std::micro>(now - last).count());
    line += text;
    last = now;
  }
  ~PhaseTimes() {
    if (enabled() && !line.empty())
      std::fprintf(stderr, "v4a: step host us:%s\n", line.c_str());
  }

private:
  static bool enabled() {
    static const bool on = std::getenv("V4A_STEP_TIMES") != nullptr;
    return on;
  }
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
  std::string line;
};

/// Graphs kept at once; steps of further keys run on the stream.
constexpr size_t kMaxGraphs = 64;
/// Step layouts kept at once (a prefill's token counts vary widely).
constexpr size_t kMaxLayouts = 256;

} // namespace

struct Model::Impl {
  ModelConfig config;
  std::vector<LayerSpec> layers;
  StepProgram program;
  plan::Plan plan;
  std::unique_ptr<Backend> backend;
  /// Every owned cache buffer, for all sequence slots.
  DeviceBuffer arena;
  std::vector<Sequence> sequences;
  /// Per layer id and component: the arena part it uses (aliases: the
  /// source's).
  std::vector<std::map<plan::Component, CacheArena>> caches;
  /// Per layer id: its weights on the device, by checkpoint name.
  std::vector<std::map<std::string, DeviceBuffer>> weights;
  /// The library products whose generated kernel runs, as prepared.
  std::vector<GemmCall> gemmFallbacks;
  /// Every step's buffers and temporaries: the step region (the largest
  /// StepLayout reserved), then the host programs' temporaries.
  DeviceBuffer workspace;
  int64_t workspaceTokens = 0;
  /// The context bound of the running step, in host memory (the steps'
  /// "context" argument).
  int64_t contextBound = 0;
  bool graphsOn = true;
  /// padDecodeSteps.
  bool padding = false;
  std::map<std::pair<int64_t, int64_t>, StepGraph> graphs;
  /// Step layouts by token count (layoutOf).
  std::map<int64_t, StepLayout> layouts;
  /// The tensor-parallel ranks' communicator: every step's outputs are
  /// summed over the ranks on the device (null: this rank's partial sums).
  std::unique_ptr<Collective> collective;
  /// Set by a step that failed after queueing work: the caches may be
  /// half-written and the device may be unusable, so no step runs again.
  std::string fault;

  ~Impl() { dropGraphs(); }

  bool prepareGemms(const std::vector<int64_t> &tokenCounts,
                    std::string &error);

  uint8_t *cacheBase(const CacheArena &cache) {
    return static_cast<uint8_t *>(arena.data()) + cache.offset;
  }
  uint8_t *workspaceBase() { return static_cast<uint8_t *>(workspace.data()); }
  bool upload(const std::vector<LayerTensors> &host, std::string &error);
  void resetSequence(int64_t sequence);
  std::optional<DeviceBuffer> deviceCopy(const void *host,
                                         std::vector<int64_t> shape,
                                         int64_t bytes, std::string &error);
  StepLayout layoutStep(int64_t tokens) const;
  bool temporaryBytes(int64_t tokens, int64_t &bytes, std::string &error) const;
  bool fitsDevice(double bytes, const std::string &what, std::string &error);
  bool reserveWorkspace(int64_t tokens, std::string &error);
  void dropGraphs();
  int64_t boundOf(int64_t context, bool recorded) const;
  bool queueCalls(const StepLayout &layout, std::string &error);
  bool runStep(const StepLayout &layout, bool recorded, std::string &error);
  int64_t positionOf(int64_t sequence) const;
  bool checkLayerBuffers(size_t inputs, size_t outputs,
                         std::string &error) const;
  bool validateBatch(const StepBatch &batch, bool padded,
                     std::string &error) const;
  void measureBatch(const StepBatch &batch, int64_t &tokens,
                    int64_t &context) const;
  const StepLayout &layoutOf(int64_t tokens);
  int64_t paddedTokens(int64_t tokens, int64_t &paddingSlot) const;
  std::vector<uint8_t> stageIds(const StepBatch &batch, int64_t paddingSlot,
                                const StepLayout &layout) const;
  bool queueStep(const StepLayout &layout, int64_t context, bool &recorded,
                 std::string &error);
  void recordFault(bool recorded, std::string &error);
  void advance(const StepBatch &batch);
};

Model::Model(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
Model::~Model() = default;

int64_t Model::maxSequences() const { return impl->sequences.size(); }

int64_t Model::weightBytes() const {
  int64_t total = 0;
  for (const auto &layer : impl->weights)
    for (const auto &entry : layer)
      total += entry.second.bytes();
  return total;
}

int64_t Model::workspaceSize() const { return impl->workspace.bytes(); }
int64_t Model::contextTokens() const {
  return impl->plan.options.contextTokens;
}

std::optional<DeviceBuffer> Model::Impl::deviceCopy(const void *host,
                                                    std::vector<int64_t> shape,
                                                    int64_t bytes,
                                                    std::string &error) {
  void *memory = backend->allocate(bytes, error);
  if (!memory)
    return std::nullopt;
  DeviceBuffer buffer(backend.get(), memory, bytes, std::move(shape));
  backend->copyToDevice(memory, host, bytes);
  return buffer;
}

/// Copies every weight to the device once.
bool Model::Impl::upload(const std::vector<LayerTensors> &host,
                         std::string &error) {
  weights.resize(host.size());
  std::vector<std::pair<int64_t, const std::string *>> tensors;
  for (const LayerSpec &layer : layers)
    for (const auto &entry : host[layer.id]) {
      tensors.push_back({layer.id, &entry.first});
      weights[layer.id][entry.first] = DeviceBuffer();
    }
  std::vector<std::string> errors(tensors.size());
  parallelFor(tensors.size(), [&](size_t i) {
    auto [layer, name] = tensors[i];
    const HostTensor &tensor = host[layer].at(*name);
    bool f32 = tensor.type == HostTensor::Type::F32;
    const void *data = f32 ? static_cast<const void *>(tensor.f32.data())
                           : static_cast<const void *>(tensor.bytes.data());
    int64_t bytes = f32 ? 4 * static_cast<int64_t>(tensor.f32.size())
                        : static_cast<int64_t>(tensor.bytes.size());
    std::optional<DeviceBuffer> buffer =
        deviceCopy(data, tensor.shape, bytes, errors[i]);
    if (buffer)
      weights[layer].at(*name) = std::move(*buffer);
  });
  for (const std::string &problem : errors)
    if (!problem.empty()) {
      error = problem;
      return false;
    }
  return true;
}

std::unique_ptr<Model>
Model::create(ModelConfig config, std::vector<LayerSpec> layers,
              StepProgram program, std::vector<LayerTensors> weights,
              const plan::Plan &plan, int64_t maxSequences,
              std::unique_ptr<Backend> backend, std::string &error) {
  if (maxSequences <= 0) {
    error = "the number of sequence slots must be positive";
    return nullptr;
  }
  // The layers' tensor shapes follow from the sizes (a model of no layer
  // runs only metadata functions).
  if (std::string problem = layers.empty() ? "" : tensorSizeProblem(config);
      !problem.empty()) {
    error = "the model configuration: " + problem;
    return nullptr;
  }
  if (!validateWeights(config, layers, weights, error) ||
      !bindWeights(layers, program, weights, error))
    return nullptr;
  auto impl = std::make_unique<Impl>();
  // Caches and weights are indexed by layer id; `layers` may be a subset.
  impl->caches.resize(config.numLayers());
  int64_t total = 0;
  for (const plan::Buffer &buffer : plan.buffers) {
    if (!layout::hasCodec(buffer.kind)) {
      error = std::string("layer ") + std::to_string(buffer.layer) + " " +
              plan::componentName(buffer.component) + ": layout " +
              layout::rowKindName(buffer.kind) + " is not supported by the " +
              backend->name() + " backend (every layout but mxfp8 is)";
      return nullptr;
    }
    if (buffer.layer < 0 || buffer.layer >= config.numLayers() ||
        buffer.aliasOf >= config.numLayers()) {
      error = "the cache plan names a layer outside the model";
      return nullptr;
    }
    CacheArena place;
    if (buffer.isAlias()) {
      // An alias is the source's buffer: same bytes, same geometry.
      auto &source = impl->caches[buffer.aliasOf];
      auto it = source.find(buffer.component);
      if (it == source.end() || it->second.rows != buffer.rows ||
          it->second.dim != buffer.dim) {
        error = std::string("layer ") + std::to_string(buffer.layer) + " " +
                plan::componentName(buffer.component) +
                ": the plan aliases a buffer of layer " +
                std::to_string(buffer.aliasOf) +
                " that is missing or has another layout";
        return nullptr;
      }
      place = it->second;
    } else {
      place.rows = buffer.rows;
      place.dim = buffer.dim;
      place.slotBytes = buffer.rows * buffer.rowBytes;
      place.offset = total;
      total += place.slotBytes * maxSequences;
    }
    impl->caches[buffer.layer][buffer.component] = place;
  }
  if (!io::fitsInMemory(static_cast<double>(total),
                        "the KV caches of " + std::to_string(maxSequences) +
                            " sequences at " +
                            std::to_string(plan.options.contextTokens) +
                            " tokens",
                        error))
    return nullptr;
  impl->config = std::move(config);
  impl->layers = std::move(layers);
  impl->program = std::move(program);
  impl->plan = plan;
  impl->backend = std::move(backend);
  impl->sequences.resize(maxSequences);
  // Caches, weights and the workspace of a decode step (a token per slot)
  // must fit the device before any of them is allocated.
  int64_t temporaries = 0;
  if (!impl->temporaryBytes(maxSequences, temporaries, error))
    return nullptr;
  double workspace =
      static_cast<double>(impl->layoutStep(maxSequences).bytes) + temporaries;
  double weightBytes = 0.0;
  for (const LayerSpec &layer : impl->layers)
    for (const auto &[name, tensor] : weights[layer.id])
      weightBytes += tensor.type == HostTensor::Type::F32
                         ? 4.0 * static_cast<double>(tensor.f32.size())
                         : static_cast<double>(tensor.bytes.size());
  if (!impl->fitsDevice(static_cast<double>(total) + weightBytes + workspace,
                        "the plan (KV caches " + io::formatSize(total) +
                            ", weights " + io::formatSize(weightBytes) +
                            ", step workspace " + io::formatSize(workspace) +
                            ")",
                        error))
    return nullptr;
  void *arena = impl->backend->allocate(total, error);
  if (!arena)
    return nullptr;
  impl->arena = DeviceBuffer(impl->backend.get(), arena, total, {total});
  if (!impl->upload(weights, error) ||
      !impl->reserveWorkspace(maxSequences, error))
    return nullptr;
  // Decode steps carry a token per sequence: every count the slots allow
  // has its library algorithms before the first step.
  std::vector<int64_t> decodeCounts(maxSequences);
  std::iota(decodeCounts.begin(), decodeCounts.end(), 1);
  if (!impl->prepareGemms(decodeCounts, error))
    return nullptr;
  return std::unique_ptr<Model>(new Model(std::move(impl)));
}

bool Model::Impl::prepareGemms(const std::vector<int64_t> &tokenCounts,
                               std::string &error) {
  std::vector<StepProduct> products;
  if (!distinctStepProducts(program.functions, program.calls, tokenCounts,
                            products, error))
    return false;
  std::vector<GemmCall> shapes, refused;
  for (const StepProduct &p : products)
    shapes.push_back(p.call);
  if (!backend->prepareGemms(shapes, refused, error))
    return false;
  for (const GemmCall &c : refused)
    if (std::none_of(gemmFallbacks.begin(), gemmFallbacks.end(),
                     [&](const GemmCall &s) { return sameGemmShape(s, c); }))
      gemmFallbacks.push_back(c);
  return true;
}

bool Model::prepareSteps(const std::vector<int64_t> &tokenCounts,
                         std::string &error) {
  int64_t largest = 0;
  for (int64_t tokens : tokenCounts)
    largest = std::max(largest, tokens);
  return impl->reserveWorkspace(largest, error) &&
         impl->prepareGemms(tokenCounts, error);
}

/// Whether the backend has a stream for an all-reduce; on a GPU this also
/// makes its context current on the calling thread.
static bool hasStreams(Backend &backend, std::string &error) {
  if (backend.currentStream())
    return true;
  error = std::string("the ") + backend.name() +
          " backend has no streams for an all-reduce over GPUs";
  return false;
}

bool Model::sumOverRanks(std::unique_ptr<Collective> collective,
                         std::string &error) {
  if (!hasStreams(*impl->backend, error))
    return false;
  impl->dropGraphs();
  impl->collective = std::move(collective);
  return true;
}

bool Model::joinRanks(const CollectiveId &id, int rank, int world,
                      std::string &error) {
  // The rank's GPU is the one current on this thread while it joins.
  if (!hasStreams(*impl->backend, error))
    return false;
  std::unique_ptr<Collective> collective =
      Collective::join(id, rank, world, error);
  return collective && sumOverRanks(std::move(collective), error);
}

void Model::useGraphs(bool on) {
  impl->graphsOn = on;
  if (!on)
    impl->dropGraphs();
}

void Model::padDecodeSteps(bool on) { impl->padding = on; }

const std::vector<GemmCall> &Model::gemmFallbacks() const {
  return impl->gemmFallbacks;
}

void Model::Impl::resetSequence(int64_t sequence) {
  for (auto &layerCaches : caches)
    for (auto &[component, cache] : layerCaches) {
      // Aliases appear under several layers: writing twice is harmless.
      std::vector<uint8_t> bytes(cache.slotBytes, 0);
      if (component == plan::Component::CompressorState ||
          component == plan::Component::IndexerState) {
        // State: kv slots (zero), then score slots (-inf).
        auto *state = reinterpret_cast<float *>(bytes.data());
        int64_t half = cache.rows * cache.dim / 2;
        std::fill(state + half, state + 2 * half, kNegInf);
      }
      backend->copyToDevice(cacheBase(cache) + sequence * cache.slotBytes,
                            bytes.data(), cache.slotBytes);
    }
  sequences[sequence].position = 0;
}

int64_t Model::addSequence(std::string &error) {
  for (size_t s = 0; s < impl->sequences.size(); ++s)
    if (!impl->sequences[s].active) {
      impl->sequences[s].active = true;
      impl->resetSequence(s);
      return s;
    }
  error = "all " + std::to_string(impl->sequences.size()) +
          " sequence slots of the plan are in use";
  return -1;
}

bool Model::releaseSequence(int64_t sequence, std::string &error) {
  if (sequence < 0 || sequence >= maxSequences() ||
      !impl->sequences[sequence].active) {
    error = "unknown or finished sequence " + std::to_string(sequence);
    return false;
  }
  impl->sequences[sequence].active = false;
  return true;
}

int64_t Model::Impl::positionOf(int64_t sequence) const {
  if (sequence < 0 || sequence >= static_cast<int64_t>(sequences.size()) ||
      !sequences[sequence].active)
    return -1;
  return sequences[sequence].position;
}

int64_t Model::position(int64_t sequence) const {
  return impl->positionOf(sequence);
}

/// One input and one output buffer per layer of the model.
bool Model::Impl::checkLayerBuffers(size_t inputs, size_t outputs,
                                    std::string &error) const {
  size_t numLayers = static_cast<size_t>(config.numLayers());
  if (inputs == numLayers && outputs == numLayers)
    return true;
  error = "expected one input and one output buffer per layer (" +
          std::to_string(numLayers) + "), got " + std::to_string(inputs) +
          " and " + std::to_string(outputs);
  return false;
}

bool Model::restorePosition(int64_t sequence, int64_t position,
                            std::string &error) {
  if (this->position(sequence) < 0) {
    error = "unknown or finished sequence " + std::to_string(sequence);
    return false;
  }
  if (position < 0 || position > contextTokens()) {
    error = "position " + std::to_string(position) + " outside [0, " +
            std::to_string(contextTokens()) + "] (the planned context)";
    return false;
  }
  impl->sequences[sequence].position = position;
  return true;
}

bool Model::writeCache(int64_t sequence, int64_t layer,
                       plan::Component component,
                       const std::vector<uint8_t> &bytes, std::string &error) {
  uint8_t *to = this->position(sequence) < 0
                    ? nullptr
                    : cacheBytes(sequence, layer, component);
  if (!to) {
    error = "sequence " + std::to_string(sequence) + ", layer " +
            std::to_string(layer) + " has no " +
            plan::componentName(component) + " cache";
    return false;
  }
  int64_t size = cacheSize(layer, component);
  if (static_cast<int64_t>(bytes.size()) != size) {
    error = std::string("the ") + plan::componentName(component) +
            " cache of layer " + std::to_string(layer) + " holds " +
            std::to_string(size) + " bytes per sequence, not " +
            std::to_string(bytes.size());
    return false;
  }
  impl->backend->copyToDevice(to, bytes.data(), size);
  return true;
}

uint8_t *Model::cacheBytes(int64_t sequence, int64_t layer,
                           plan::Component component) {
  if (sequence < 0 || sequence >= maxSequences() || layer < 0 ||
      layer >= static_cast<int64_t>(impl->caches.size()))
    return nullptr;
  auto it = impl->caches[layer].find(component);
  if (it == impl->caches[layer].end())
    return nullptr;
  return impl->cacheBase(it->second) + sequence * it->second.slotBytes;
}

int64_t Model::cacheSize(int64_t layer, plan::Component component) const {
  if (layer < 0 || layer >= static_cast<int64_t>(impl->caches.size()))
    return 0;
  auto it = impl->caches[layer].find(component);
  if (it == impl->caches[layer].end())
    return 0;
  return it->second.slotBytes;
}

const char *Model::backendName() const { return impl->backend->name(); }

//===----------------------------------------------------------------------===//
// Steps
//===----------------------------------------------------------------------===//

StepLayout Model::Impl::layoutStep(int64_t tokens) const {
  StepLayout layout;
  layout.tokens = tokens;
  int64_t at = 0;
  auto place = [&](int64_t bytes) {
    int64_t offset = at;
    at += workspaceBytes(bytes);
    return offset;
  };
  for (const char *bind : kStepIds)
    layout.ids[bind] = place(8 * tokens);
  layout.copies = place(2 * sizeof(CopyEntry) * layers.size());
  int64_t rowBytes = 2 * tokens * config.hiddenSize;
  for (const LayerSpec &layer : layers)
    layout.x[layer.id] = place(rowBytes);
  layout.inputBytes = at;
  layout.outputBegin = at;
  for (const LayerSpec &layer : layers)
    layout.y[layer.id] = place(rowBytes);
  layout.outputEnd = at;
  for (const StepProgram::Call &call : program.calls) {
    std::vector<int64_t> offsets;
    for (const step::Arg &arg : program.functions[call.function].args) {
      bool own = arg.output && !(call.layer >= 0 && arg.bind == "y");
      offsets.push_back(own ? place(bytesOf(shapeOf(arg, tokens), arg.element))
                            : -1);
    }
    layout.outputs.push_back(std::move(offsets));
  }
  layout.bytes = at;
  return layout;
}

/// The most any host program of the step allocates, at the planned context.
bool Model::Impl::temporaryBytes(int64_t tokens, int64_t &bytes,
                                 std::string &error) const {
  bytes = 0;
  std::set<int> seen;
  for (const StepProgram::Call &call : program.calls) {
    const step::Function &function = program.functions[call.function];
    if (function.host.ops.empty() || !seen.insert(call.function).second)
      continue;
    int64_t need = 0;
    if (!stepTemporaryBytes(function, tokens, plan.options.contextTokens, need,
                            error))
      return false;
    bytes = std::max(bytes, need);
  }
  return true;
}

bool Model::Impl::fitsDevice(double bytes, const std::string &what,
                             std::string &error) {
  int64_t free = 0, total = 0;
  if (!backend->memoryInfo(free, total))
    return io::fitsInMemory(bytes, what, error);
  if (bytes <= static_cast<double>(free))
    return true;
  error = what + " needs " + io::formatSize(bytes) + " of device memory; " +
          backend->name() + " device 0 has " +
          io::formatBytes(static_cast<uint64_t>(free)) + " free of " +
          io::formatBytes(static_cast<uint64_t>(total));
  return false;
}

/// Sizes the workspace for steps of up to `tokens` tokens at any context
/// the plan allows; a larger workspace replaces the old one (and the graphs
/// that point into it) before the step that needs it starts.
bool Model::Impl::reserveWorkspace(int64_t tokens, std::string &error) {
  if (tokens <= workspaceTokens)
    return true;
  int64_t temporaries = 0;
  if (!temporaryBytes(tokens, temporaries, error))
    return false;
  int64_t region = layoutStep(tokens).bytes;
  double needed = static_cast<double>(region) + temporaries;
  // The old workspace goes first: the new one may take its place.
  std::string why;
  if (!backend->synchronize(why)) {
    fault = why;
    error = why;
    return false;
  }
  dropGraphs();
  backend->setTemporaries(nullptr, 0);
  workspace = DeviceBuffer();
  workspaceTokens = 0;
  if (!fitsDevice(
          needed,
          "the workspace of a " + std::to_string(tokens) + "-token step at " +
              std::to_string(plan.options.contextTokens) + " tokens of context",
          error))
    return false;
  auto bytes = static_cast<int64_t>(needed);
  void *memory = backend->allocate(bytes, error);
  if (!memory)
    return false;
  workspace = DeviceBuffer(backend.get(), memory, bytes, {bytes});
  workspaceTokens = tokens;
  backend->setTemporaries(workspaceBase() + region, temporaries);
  return true;
}

void Model::Impl::dropGraphs() {
  for (auto &entry : graphs)
    if (entry.second.graph)
      backend->releaseGraph(entry.second.graph);
  graphs.clear();
}

/// The context bound a step passes: its longest sequence's length, or for
/// a recorded step that length's power of two (at least 256, at most the
/// plan's context), so that one graph serves many steps. Any bound gives
/// the same results (the rows past a token's own are masked).
int64_t Model::Impl::boundOf(int64_t context, bool recorded) const {
  if (!recorded)
    return context;
  int64_t bound = 256;
  while (bound < context)
    bound *= 2;
  return std::min(bound, plan.options.contextTokens);
}

/// Queues the program's calls: each metadata function, each layer's step
/// with its weights, caches, the latest metadata of its key, and the top-k
/// (and candidate blocks) its sources produced in this step.
bool Model::Impl::queueCalls(const StepLayout &layout, std::string &error) {
  int64_t tokens = layout.tokens;
  uint8_t *base = workspaceBase();
  auto placed = [&](int64_t offset, std::vector<int64_t> shape) {
    return BufferArg{base + offset, std::move(shape)};
  };
  std::map<int, std::map<std::string, BufferArg>> metadata;
  std::map<int64_t, std::map<std::string, BufferArg>> produced;
  std::map<int64_t, const LayerSpec *> byId;
  for (const LayerSpec &layer : layers)
    byId[layer.id] = &layer;
  for (size_t c = 0; c < program.calls.size(); ++c) {
    const StepProgram::Call &call = program.calls[c];
    const step::Function &function = program.functions[call.function];
    const LayerSpec *layer = call.layer < 0 ? nullptr : byId.at(call.layer);
    std::map<std::string, BufferArg> &results =
        layer ? produced[layer->id] : metadata[call.function];
    std::vector<BufferArg> args;
    for (size_t a = 0; a < function.args.size(); ++a) {
      const step::Arg &arg = function.args[a];
      std::optional<BufferArg> bound;
      if (arg.output) {
        int64_t offset = layout.outputs[c][a] >= 0 ? layout.outputs[c][a]
                                                   : layout.y.at(layer->id);
        bound = results[arg.bind] = placed(offset, shapeOf(arg, tokens));
      } else if (layer && arg.bind == "x") {
        bound = placed(layout.x.at(layer->id), shapeOf(arg, tokens));
      } else if (auto id = layout.ids.find(arg.bind); id != layout.ids.end()) {
        bound = placed(id->second, {tokens});
      } else if (step::isHostArg(arg)) {
        bound = BufferArg{&contextBound, {1}};
      } else if (!layer) {
      } else if (auto meta = metadata[call.meta].find(arg.bind);
                 meta != metadata[call.meta].end()) {
        bound = meta->second;
      } else if (arg.bind == "topk" || arg.bind == "candidates") {
        int64_t source =
            arg.bind == "topk" ? layer->indexSource : layer->candidateSource;
        if (auto it = produced[source].find(arg.bind);
            it != produced[source].end())
          bound = it->second;
      } else if (isCacheBind(arg.bind)) {
        std::optional<plan::Component> component = componentOf(arg.bind);
        auto it = component ? caches[layer->id].find(*component)
                            : caches[layer->id].end();
        if (it != caches[layer->id].end())
          bound = BufferArg{
              cacheBase(it->second),
              {it->second.slotBytes * static_cast<int64_t>(sequences.size())}};
      } else if (auto it = weights[layer->id].find(arg.bind);
                 it != weights[layer->id].end()) {
        bound = it->second.arg();
      }
      if (!bound) {
        error = (layer ? "layer " + std::to_string(layer->id) + ": " : "") +
                function.name + ": nothing to bind to '" + arg.bind + "'";
        return false;
      }
      args.push_back(std::move(*bound));
    }
    if (!backend->run(function, args, error)) {
      if (layer)
        error = "layer " + std::to_string(layer->id) + ": " + error;
      return false;
    }
  }
  // Every layer's y lies in one range: one sum over the ranks for all.
  if (collective &&
      !collective->allReduceBF16(base + layout.outputBegin,
                                 (layout.outputEnd - layout.outputBegin) / 2,
                                 backend->currentStream(), error)) {
    error = "the tensor-parallel sum of the outputs: " + error;
    return false;
  }
  return true;
}

/// Queues the step: on the stream, or as a recorded graph from the second
/// step of its (tokens, context bound) on.
bool Model::Impl::runStep(const StepLayout &layout, bool recorded,
                          std::string &error) {
  if (!recorded)
    return queueCalls(layout, error);
  StepGraph &g = graphs[{layout.tokens, contextBound}];
  if (g.graph)
    return backend->launchGraph(g.graph, error);
  bool record = !g.refused && g.runs > 0 && graphs.size() <= kMaxGraphs;
  ++g.runs;
  if (!record)
    return queueCalls(layout, error);
  // A step that cannot be recorded runs on the stream, now and later.
  auto unrecorded = [&](const std::string &why) {
    g.refused = true;
    std::fprintf(stderr,
                 "v4a: warning: a step of %lld tokens cannot be recorded as a "
                 "graph (%s); it runs on the stream\n",
                 static_cast<long long>(layout.tokens), why.c_str());
    return queueCalls(layout, error);
  };
  std::string why, ended;
  if (!backend->beginGraph(why))
    return unrecorded(why);
  // Nothing runs while recording.
  bool queued = queueCalls(layout, why);
  void *graph = backend->endGraph(ended);
  if (queued && graph) {
    g.graph = graph;
    return backend->launchGraph(graph, error);
  }
  if (graph)
    backend->releaseGraph(graph);
  return unrecorded(why.empty() ? ended : why);
}

double stepWorkspaceBytes(const ModelConfig &c,
                          const std::vector<LayerSpec> &layers, int64_t tokens,
                          int64_t context) {
  // The largest buffers one layer holds at once, per token: projections and
  // head arrays, and the attention's index list over window + selected (or
  // all compressed) rows; an indexer layer scores every compressed row.
  double t = static_cast<double>(tokens), worst = 0.0;
  double heads = static_cast<double>(c.numAttentionHeads) * c.headDim;
  for (const LayerSpec &layer : layers) {
    double rows = layer.compressRatio > 0
                      ? static_cast<double>(context) / layer.compressRatio
                      : 0.0;
    double selected = layer.indexTopk > 0 ? layer.indexTopk : rows;
    double window =
        static_cast<double>(std::min<int64_t>(c.slidingWindow, context));
    double perToken =
        8.0 * heads + 4.0 * c.hiddenSize + 2.0 * c.qLoraRank + 4.0 * c.headDim +
        4.0 * c.indexNHeads * static_cast<double>(c.indexHeadDim) +
        (window + selected) + (layer.indexTopk > 0 ? rows : 0.0);
    double table = (t + window + rows) * c.headDim;
    worst = std::max(worst, 4.0 * (t * perToken + table));
  }
  return worst;
}

/// Checks a batch against the model before anything runs: its rows, their
/// sequences and lengths; `padded` (the host step's layout) also bounds
/// each length by the batch's paddedTokens.
bool Model::Impl::validateBatch(const StepBatch &batch, bool padded,
                                std::string &error) const {
  if (!fault.empty()) {
    error = "the model refuses further steps after a failed one: " + fault;
    return false;
  }
  size_t rows = batch.sequences.size();
  if (batch.lengths.size() != rows) {
    error = "the batch has " + std::to_string(rows) + " sequences but " +
            std::to_string(batch.lengths.size()) + " lengths";
    return false;
  }
  if (rows > sequences.size()) {
    error = "the batch has " + std::to_string(rows) +
            " rows, more than the plan's " + std::to_string(sequences.size()) +
            " sequence slots";
    return false;
  }
  if (padded && batch.paddedTokens < 0) {
    error = "paddedTokens must be >= 0";
    return false;
  }
  std::vector<bool> seen(sequences.size(), false);
  for (size_t b = 0; b < rows; ++b) {
    int64_t sequence = batch.sequences[b], length = batch.lengths[b];
    int64_t at = positionOf(sequence);
    if (at < 0) {
      error = "batch row " + std::to_string(b) +
              ": unknown or finished sequence " + std::to_string(sequence);
      return false;
    }
    if (seen[sequence]) {
      error = "batch row " + std::to_string(b) + ": sequence " +
              std::to_string(sequence) + " appears twice";
      return false;
    }
    seen[sequence] = true;
    int64_t limit = padded ? batch.paddedTokens : plan.options.contextTokens;
    if (length < 0 || length > limit) {
      error = "batch row " + std::to_string(b) + ": length " +
              std::to_string(length) + " outside [0, " + std::to_string(limit) +
              "]";
      return false;
    }
    if (at + length > plan.options.contextTokens) {
      error = "sequence " + std::to_string(sequence) + ": " +
              std::to_string(at + length) +
              " tokens exceed the planned context of " +
              std::to_string(plan.options.contextTokens);
      return false;
    }
  }
  return true;
}

/// The batch's packed tokens and its longest sequence after the step,
/// checked against the host's memory for the step's buffers.
void Model::Impl::measureBatch(const StepBatch &batch, int64_t &tokens,
                               int64_t &context) const {
  tokens = 0;
  context = 0;
  for (size_t b = 0; b < batch.sequences.size(); ++b) {
    tokens += batch.lengths[b];
    context =
        std::max(context, positionOf(batch.sequences[b]) + batch.lengths[b]);
  }
}

/// The layout of a step of `tokens` tokens, made once per token count (a
/// decode step's host time is mostly this otherwise).
const StepLayout &Model::Impl::layoutOf(int64_t tokens) {
  auto it = layouts.find(tokens);
  if (it != layouts.end())
    return it->second;
  if (layouts.size() >= kMaxLayouts)
    layouts.clear();
  return layouts.emplace(tokens, layoutStep(tokens)).first->second;
}

/// The tokens a step of `tokens` tokens runs as (padDecodeSteps), and the
/// slot of its padding rows (-1: none).
int64_t Model::Impl::paddedTokens(int64_t tokens, int64_t &paddingSlot) const {
  paddingSlot = -1;
  int64_t slots = static_cast<int64_t>(sequences.size());
  if (!padding || collective || tokens > slots)
    return tokens;
  int64_t bucket = 1;
  while (bucket < tokens)
    bucket *= 2;
  bucket = std::min(bucket, slots);
  if (bucket == tokens)
    return tokens;
  for (int64_t s = 0; s < slots; ++s)
    if (!sequences[s].active) {
      paddingSlot = s;
      return bucket;
    }
  return tokens;
}

/// The token ids of the step region (each sequence's rows in order, with
/// their positions; then the padding rows, each a sequence of one token at
/// position 0 of `paddingSlot`), as bytes to copy to its start.
std::vector<uint8_t> Model::Impl::stageIds(const StepBatch &batch,
                                           int64_t paddingSlot,
                                           const StepLayout &layout) const {
  std::vector<uint8_t> staged(layout.x.empty() ? layout.inputBytes
                                               : layout.x.begin()->second);
  auto ids = [&](const char *bind) {
    return reinterpret_cast<int64_t *>(staged.data() + layout.ids.at(bind));
  };
  int64_t *positions = ids("positions"), *slots = ids("slots");
  int64_t *first = ids("first"), *last = ids("last");
  int64_t row = 0;
  for (size_t b = 0; b < batch.sequences.size(); ++b) {
    int64_t begin = row;
    int64_t start = sequences[batch.sequences[b]].position;
    for (int64_t t = 0; t < batch.lengths[b]; ++t, ++row) {
      positions[row] = start + t;
      slots[row] = batch.sequences[b];
      first[row] = begin;
      last[row] = begin + batch.lengths[b] - 1;
    }
  }
  for (; row < layout.tokens; ++row) {
    positions[row] = 0;
    slots[row] = paddingSlot;
    first[row] = last[row] = row;
  }
  return staged;
}

/// Queues the step whose inputs are in place: recorded when it is
/// decode-sized. A failure after work was queued is the model's fault.
bool Model::Impl::queueStep(const StepLayout &layout, int64_t context,
                            bool &recorded, std::string &error) {
  recorded = graphsOn && backend->supportsGraphs() &&
             layout.tokens <= static_cast<int64_t>(sequences.size());
  contextBound = boundOf(context, recorded);
  return runStep(layout, recorded, error);
}

/// Names the step that failed on the device; the model then refuses
/// further steps.
void Model::Impl::recordFault(bool recorded, std::string &error) {
  std::string ids;
  for (const LayerSpec &layer : layers)
    ids += (ids.empty() ? "" : ",") + std::to_string(layer.id);
  error = "the step of layers " + ids + (recorded ? " (a graph)" : "") +
          " failed on the device: " + error +
          " (V4A_TRACE_LAUNCHES=1 names the kernel)";
  fault = error;
}

void Model::Impl::advance(const StepBatch &batch) {
  for (size_t b = 0; b < batch.sequences.size(); ++b)
    sequences[batch.sequences[b]].position += batch.lengths[b];
}

bool Model::step(const StepBatch &batch,
                 const std::vector<const float *> &inputs,
                 const std::vector<float *> &outputs, std::string &error) {
  Impl &m = *impl;
  if (!m.validateBatch(batch, /*padded=*/true, error) ||
      !m.checkLayerBuffers(inputs.size(), outputs.size(), error))
    return false;
  size_t rows = batch.sequences.size();
  for (const LayerSpec &layer : m.layers)
    if ((!inputs[layer.id] || !outputs[layer.id]) && batch.paddedTokens > 0 &&
        rows > 0) {
      error =
          "layer " + std::to_string(layer.id) + ": null input or output buffer";
      return false;
    }
  int64_t tokens = 0, context = 0;
  m.measureBatch(batch, tokens, context);
  // The host stages every token's row here.
  if (!io::fitsInMemory(stepWorkspaceBytes(m.config, m.layers, tokens, context),
                        "a step of " + std::to_string(tokens) + " tokens",
                        error))
    return false;
  int64_t dim = m.config.hiddenSize, padded = batch.paddedTokens;
  // Each layer's rows of the batch's tokens, in chunks over the cores when
  // a step moves enough of them to pay for the threads (a prefill's rows
  // are ~100 M values a direction; a decode step's a few thousand rows).
  std::vector<std::pair<size_t, int64_t>> tokenRows; // (sequence, t)
  for (size_t b = 0; b < rows; ++b)
    for (int64_t t = 0; t < batch.lengths[b]; ++t)
      tokenRows.push_back({b, t});
  constexpr size_t kChunkRows = 64;
  size_t chunks = (tokenRows.size() + kChunkRows - 1) / kChunkRows;
  bool parallel = tokenRows.size() * dim * m.layers.size() >= (1u << 22);
  auto forEachRow =
      [&](const std::function<void(const LayerSpec &, size_t, size_t, int64_t)>
              &body) {
        auto chunk = [&](size_t job) {
          const LayerSpec &layer = m.layers[job / chunks];
          size_t first = job % chunks * kChunkRows;
          size_t last = std::min(first + kChunkRows, tokenRows.size());
          for (size_t row = first; row < last; ++row)
            body(layer, row, tokenRows[row].first, tokenRows[row].second);
        };
        size_t jobs = m.layers.size() * chunks;
        if (parallel)
          parallelFor(jobs, chunk);
        else
          for (size_t job = 0; job < jobs; ++job)
            chunk(job);
      };
  // Rows past a sequence's length are zeros; the others are written after
  // the step (all are zeros when there is none or it fails).
  auto clearPaddingRows = [&] {
    for (const LayerSpec &layer : m.layers)
      for (size_t b = 0; b < rows && padded > 0; ++b)
        std::fill(outputs[layer.id] + (b * padded + batch.lengths[b]) * dim,
                  outputs[layer.id] + (b + 1) * padded * dim, 0.0f);
  };
  auto clearOutputs = [&] {
    for (const LayerSpec &layer : m.layers)
      if (rows > 0 && padded > 0)
        std::fill(outputs[layer.id], outputs[layer.id] + rows * padded * dim,
                  0.0f);
  };
  if (tokens == 0) {
    clearOutputs();
    return true;
  }
  int64_t paddingSlot = -1;
  int64_t runTokens = m.paddedTokens(tokens, paddingSlot);
  if (!m.reserveWorkspace(runTokens, error))
    return false;
  // The ids, then each layer's x (padding rows: zeros). Every input is read
  // before any output is cleared: they may be one buffer.
  const StepLayout &layout = m.layoutOf(runTokens);
  std::vector<uint8_t> staged = m.stageIds(batch, paddingSlot, layout);
  staged.resize(layout.inputBytes);
  forEachRow([&](const LayerSpec &layer, size_t row, size_t b, int64_t t) {
    auto *bits =
        reinterpret_cast<uint16_t *>(staged.data() + layout.x.at(layer.id)) +
        row * dim;
    const float *x = inputs[layer.id] + (b * padded + t) * dim;
    for (int64_t i = 0; i < dim; ++i)
      bits[i] = num::toBF16Bits(x[i]);
  });
  clearPaddingRows();
  m.backend->copyToDevice(m.workspaceBase(), staged.data(), layout.inputBytes);
  bool recorded = false;
  bool queued = m.queueStep(layout, context, recorded, error);
  bool ran = queued && m.backend->synchronize(error);
  if (queued && !ran)
    m.recordFault(recorded, error);
  if (!ran) {
    // The caches may be half-written and the device state unknown.
    m.fault = error;
    clearOutputs();
    return false;
  }
  staged.resize(layout.outputEnd - layout.outputBegin);
  m.backend->copyToHost(staged.data(), m.workspaceBase() + layout.outputBegin,
                        layout.outputEnd - layout.outputBegin);
  forEachRow([&](const LayerSpec &layer, size_t row, size_t b, int64_t t) {
    const auto *bits =
        reinterpret_cast<const uint16_t *>(
            staged.data() + layout.y.at(layer.id) - layout.outputBegin) +
        row * dim;
    float *y = outputs[layer.id] + (b * padded + t) * dim;
    for (int64_t i = 0; i < dim; ++i)
      y[i] = num::fromBF16Bits(bits[i]);
  });
  m.advance(batch);
  return true;
}

const std::string &Model::failure() const { return impl->fault; }

bool Model::synchronize(std::string &error) {
  Impl &m = *impl;
  // Waits even after a failure: the caller may free its buffers next.
  bool idle = m.backend->synchronize(error);
  if (!m.fault.empty()) {
    error = m.fault;
    return false;
  }
  if (idle)
    return true;
  m.fault = error = "a queued step failed on the device: " + error;
  return false;
}

/// Whether no two layers' outputs share a byte: they are written by one
/// kernel, in no set order.
static bool outputsApart(const std::vector<LayerSpec> &layers,
                         const std::vector<void *> &outputs, int64_t rowBytes,
                         std::string &error) {
  if (rowBytes <= 0)
    return true;
  std::vector<std::pair<uintptr_t, int64_t>> starts;
  for (const LayerSpec &layer : layers)
    starts.push_back(
        {reinterpret_cast<uintptr_t>(outputs[layer.id]), layer.id});
  std::sort(starts.begin(), starts.end());
  for (size_t i = 1; i < starts.size(); ++i)
    if (starts[i].first <
        starts[i - 1].first + static_cast<uintptr_t>(rowBytes)) {
      error = "layer " + std::to_string(starts[i].second) +
              "'s output overlaps layer " +
              std::to_string(starts[i - 1].second) + "'s (" +
              std::to_string(rowBytes) +
              " bytes each): each layer needs its own";
      return false;
    }
  return true;
}

/// A copy as a table copy kernel reads it.
static CopyEntry tableEntry(const DeviceCopy &copy) {
  CopyEntry entry;
  entry.to = reinterpret_cast<uint64_t>(copy.to);
  entry.from = reinterpret_cast<uint64_t>(copy.from);
  entry.bytes = static_cast<uint64_t>(copy.bytes);
  return entry;
}

bool Model::queueStep(const StepBatch &batch,
                      const std::vector<const void *> &inputs,
                      const std::vector<void *> &outputs, void *stream,
                      std::string &error) {
  Impl &m = *impl;
  PhaseTimes times;
  if (!m.validateBatch(batch, /*padded=*/false, error) ||
      !m.checkLayerBuffers(inputs.size(), outputs.size(), error))
    return false;
  times.mark("validate");
  // Only the ids are staged on the host: the device's memory is checked
  // where the workspace grows.
  int64_t tokens = 0, context = 0;
  m.measureBatch(batch, tokens, context);
  int64_t rowBytes = 2 * tokens * m.config.hiddenSize;
  for (const LayerSpec &layer : m.layers) {
    std::string name = "layer " + std::to_string(layer.id);
    if (tokens > 0 && (!inputs[layer.id] || !outputs[layer.id])) {
      error = name + ": null input or output buffer";
      return false;
    }
    if (tokens > 0 && (!m.backend->checkAccessible(inputs[layer.id], rowBytes,
                                                   name + "'s input", error) ||
                       !m.backend->checkAccessible(outputs[layer.id], rowBytes,
                                                   name + "'s output", error)))
      return false;
  }
  if (!outputsApart(m.layers, outputs, rowBytes, error))
    return false;
  times.mark("check");
  if (tokens == 0)
    return true;
  int64_t paddingSlot = -1;
  int64_t runTokens = m.paddedTokens(tokens, paddingSlot);
  if (!m.reserveWorkspace(runTokens, error))
    return false;
  // The step runs on the caller's stream; the model's own stream then waits
  // for it, so that nothing the model does later holds the caller's.
  if (!m.backend->useStream(stream, error))
    return false;
  times.mark("stream");
  const StepLayout &layout = m.layoutOf(runTokens);
  std::vector<uint8_t> ids = m.stageIds(batch, paddingSlot, layout);
  times.mark("layout");
  uint8_t *base = m.workspaceBase();
  int64_t paddingBytes = 2 * (runTokens - tokens) * m.config.hiddenSize;
  // Each layer's input and output is a copy; their table goes with the ids.
  std::vector<DeviceCopy> copiesIn, copiesOut;
  for (const LayerSpec &layer : m.layers) {
    copiesIn.push_back(
        {base + layout.x.at(layer.id), inputs[layer.id], rowBytes});
    copiesOut.push_back(
        {outputs[layer.id], base + layout.y.at(layer.id), rowBytes});
  }
  auto *entries = reinterpret_cast<CopyEntry *>(ids.data() + layout.copies);
  for (const DeviceCopy &copy : copiesIn)
    *entries++ = tableEntry(copy);
  for (const DeviceCopy &copy : copiesOut)
    *entries++ = tableEntry(copy);
  uint8_t *tableIn = base + layout.copies;
  uint8_t *tableOut = tableIn + sizeof(CopyEntry) * copiesIn.size();
  bool queued = m.backend->queueCopyToDevice(
      base, ids.data(), static_cast<int64_t>(ids.size()), error);
  // Padding rows are zeros: the layers' x are one region, cleared at once
  // before the rows are copied over it.
  int64_t firstX =
      layout.x.empty() ? layout.inputBytes : layout.x.begin()->second;
  if (paddingBytes > 0 && firstX < layout.inputBytes)
    queued = queued && m.backend->queueClear(base + firstX,
                                             layout.inputBytes - firstX, error);
  queued = queued && m.backend->queueCopiesOnDevice(copiesIn, tableIn, error);
  times.mark("copy-in");
  bool recorded = false;
  queued = queued && m.queueStep(layout, context, recorded, error);
  times.mark(recorded ? "graph" : "launches");
  queued = queued && m.backend->queueCopiesOnDevice(copiesOut, tableOut, error);
  std::string back;
  if (!m.backend->useStream(nullptr, back) && queued) {
    queued = false;
    error = back;
  }
  times.mark("copy-out");
  if (!queued) {
    // Part of the step may have run: the caches are in an unknown state.
    m.fault = error;
    return false;
  }
  m.advance(batch);
  return true;
}

bool stackWeight(LayerTensors &tensors, const step::Arg &arg,
                 std::string &error) {
  std::vector<std::string> parts = step::stackedParts(arg.bind);
  if (arg.shape.size() != 2) {
    error = arg.bind + ": a stacked weight is a matrix, the step takes rank " +
            std::to_string(arg.shape.size());
    return false;
  }
  HostTensor stacked;
  stacked.type = hostTypeOf(arg.element);
  stacked.shape = {0, arg.shape[1]};
  for (const std::string &name : parts) {
    auto found = tensors.find(name);
    if (found == tensors.end()) {
      error = arg.bind + ": the checkpoint has no " + name;
      return false;
    }
    const HostTensor &part = found->second;
    if (part.shape.size() != 2 || part.shape[1] != arg.shape[1] ||
        part.type != stacked.type || part.type == HostTensor::Type::F32) {
      error = arg.bind + ": " + name + " cannot be stacked into a [" +
              std::to_string(arg.shape[0]) + ", " +
              std::to_string(arg.shape[1]) + "] " + typeName(stacked.type) +
              " weight";
      return false;
    }
    stacked.shape[0] += part.shape[0];
  }
  if (stacked.shape[0] != arg.shape[0]) {
    error = arg.bind + ": the parts have " + std::to_string(stacked.shape[0]) +
            " rows, the step takes " + std::to_string(arg.shape[0]);
    return false;
  }
  for (const std::string &name : parts) {
    std::vector<uint8_t> &bytes = tensors.at(name).bytes;
    stacked.bytes.insert(stacked.bytes.end(), bytes.begin(), bytes.end());
    tensors.erase(name);
  }
  tensors[arg.bind] = std::move(stacked);
  return true;
}

} // namespace v4a::rt
