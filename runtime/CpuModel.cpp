//===- CpuModel.cpp - the CPU backend of the host runtime -----------------===//

#include "runtime/CpuModel.h"

#include "core/CacheLayout.h"
#include "core/FileIO.h"
#include "core/Numerics.h"
#include "core/TensorSpecs.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <cstring>
#include <limits>
#include <set>

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

/// A memref descriptor built at run time: allocated and aligned pointers,
/// offset, sizes, strides (row-major), as MLIR's C interface lays it out.
struct Descriptor {
  std::vector<int64_t> words;
  Descriptor(const void *data, const std::vector<int64_t> &shape) {
    auto pointer = reinterpret_cast<int64_t>(data);
    words = {pointer, pointer, 0};
    words.insert(words.end(), shape.begin(), shape.end());
    std::vector<int64_t> strides(shape.size(), 1);
    for (size_t i = shape.size(); i-- > 1;)
      strides[i - 1] = strides[i] * shape[i];
    words.insert(words.end(), strides.begin(), strides.end());
  }
};

/// A buffer the runtime owns for one step: bytes and a shape.
struct StepBuffer {
  std::vector<uint8_t> bytes;
  std::vector<int64_t> shape;
  void *data() { return bytes.data(); }
};

StepBuffer makeBuffer(const step::Arg &arg, int64_t tokens) {
  StepBuffer buffer;
  int64_t count = 1;
  for (int64_t d : arg.shape) {
    buffer.shape.push_back(d < 0 ? tokens : d);
    count *= buffer.shape.back();
  }
  buffer.bytes.assign(count * step::elementBytes(arg.element), 0);
  return buffer;
}

/// One owned cache buffer for every sequence slot: slot s at s * slotBytes.
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

bool isCacheBind(const std::string &bind) { return bind.rfind("cache.", 0) == 0; }

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

/// Brings a validated weight to the element type its step argument has:
/// bf16 values to bf16 bits, an e4m3 weight that a bf16 argument takes to
/// its exact product with the block scales.
bool convertWeight(LayerTensors &tensors, const std::string &name,
                   step::Element element, std::string &error) {
  HostTensor &weight = tensors.at(name);
  HostTensor::Type want = hostTypeOf(element);
  if (weight.type == want)
    return true;
  // Only wo_a: its fp8 form is defined as the bf16 product (no activation
  // quantization), so the conversion keeps its meaning.
  if (want == HostTensor::Type::BF16 && weight.type == HostTensor::Type::E4M3 &&
      name == "wo_a.weight") {
    const HostTensor &scale = tensors.at(scaleTensorName(name));
    int64_t cols = weight.shape[1], scaleCols = scale.shape[1];
    weight.f32.resize(weight.bytes.size());
    for (size_t i = 0; i < weight.bytes.size(); ++i) {
      int64_t r = static_cast<int64_t>(i) / cols,
              c = static_cast<int64_t>(i) % cols;
      weight.f32[i] =
          num::fromE4M3Bits(weight.bytes[i]) *
          num::fromUE8M0Bits(scale.bytes[(r / 128) * scaleCols + c / 128]);
    }
    weight.type = HostTensor::Type::F32;
  }
  if (want == HostTensor::Type::BF16 && weight.type == HostTensor::Type::F32) {
    weight.bytes.resize(2 * weight.f32.size());
    for (size_t i = 0; i < weight.f32.size(); ++i) {
      uint16_t bits = num::toBF16Bits(weight.f32[i]);
      std::memcpy(weight.bytes.data() + 2 * i, &bits, 2);
    }
    weight.f32.clear();
    weight.f32.shrink_to_fit();
    weight.type = HostTensor::Type::BF16;
    return true;
  }
  error = name + ": the compiled step takes " + typeName(want) + ", got " +
          typeName(weight.type);
  return false;
}

} // namespace

struct CpuModel::Impl {
  ModelConfig config;
  std::vector<LayerSpec> layers;
  StepProgram program;
  std::vector<LayerTensors> weights;
  plan::Plan plan;
  std::vector<uint8_t> arena;
  std::vector<Sequence> sequences;
  /// Per layer id and component: the arena it uses (aliases: the source's).
  std::vector<std::map<plan::Component, CacheArena>> caches;

  uint8_t *cacheBase(const CacheArena &cache) {
    return arena.data() + cache.offset;
  }
  void resetSequence(int64_t sequence);
  bool runFunction(const step::Function &function,
                   const std::function<void *(const step::Arg &,
                                              std::vector<int64_t> &)> &bind,
                   std::string &error);
  bool runStep(const std::vector<int64_t> &positions,
               const std::vector<int64_t> &slots,
               const std::vector<int64_t> &first,
               const std::vector<int64_t> &last,
               const std::vector<StepBuffer> &x, std::vector<StepBuffer> &y,
               std::string &error);
};

CpuModel::CpuModel(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
CpuModel::~CpuModel() = default;

int64_t CpuModel::maxSequences() const { return impl->sequences.size(); }
int64_t CpuModel::contextTokens() const {
  return impl->plan.options.contextTokens;
}

/// Checks that every selected layer has one step call and that its weights
/// can be bound to it, converting weights to the argument types.
static bool bindWeights(const std::vector<LayerSpec> &layers,
                        const StepProgram &program,
                        std::vector<LayerTensors> &weights,
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
  for (const StepProgram::Call &call : program.calls) {
    if (call.layer < 0)
      continue;
    LayerTensors &w = weights[call.layer];
    for (const step::Arg &arg : program.functions[call.function].args) {
      if (!w.count(arg.bind))
        continue;
      if (!convertWeight(w, arg.bind, arg.element, error)) {
        error = "layer " + std::to_string(call.layer) + " " + error;
        return false;
      }
    }
  }
  return true;
}

std::unique_ptr<CpuModel>
CpuModel::create(ModelConfig config, std::vector<LayerSpec> layers,
                 StepProgram program, std::vector<LayerTensors> weights,
                 const plan::Plan &plan, int64_t maxSequences,
                 std::string &error) {
  if (maxSequences <= 0) {
    error = "the number of sequence slots must be positive";
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
              layout::rowKindName(buffer.kind) +
              " is not supported by the CPU backend (bf16, fp8_model1, "
              "index_bf16 are)";
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
  impl->weights = std::move(weights);
  impl->plan = plan;
  impl->arena.assign(total, 0);
  impl->sequences.resize(maxSequences);
  return std::unique_ptr<CpuModel>(new CpuModel(std::move(impl)));
}

void CpuModel::Impl::resetSequence(int64_t sequence) {
  for (auto &layerCaches : caches)
    for (auto &[component, cache] : layerCaches) {
      uint8_t *bytes = cacheBase(cache) + sequence * cache.slotBytes;
      std::fill(bytes, bytes + cache.slotBytes, 0);
      if (component != plan::Component::CompressorState &&
          component != plan::Component::IndexerState)
        continue;
      // State: kv slots (zero), then score slots (-inf).
      auto *state = reinterpret_cast<float *>(bytes);
      int64_t half = cache.rows * cache.dim / 2;
      std::fill(state + half, state + 2 * half, kNegInf);
    }
  sequences[sequence].position = 0;
}

int64_t CpuModel::addSequence(std::string &error) {
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

bool CpuModel::releaseSequence(int64_t sequence, std::string &error) {
  if (sequence < 0 || sequence >= maxSequences() ||
      !impl->sequences[sequence].active) {
    error = "unknown or finished sequence " + std::to_string(sequence);
    return false;
  }
  impl->sequences[sequence].active = false;
  return true;
}

int64_t CpuModel::position(int64_t sequence) const {
  if (sequence < 0 || sequence >= maxSequences() ||
      !impl->sequences[sequence].active)
    return -1;
  return impl->sequences[sequence].position;
}

uint8_t *CpuModel::cacheBytes(int64_t sequence, int64_t layer,
                              plan::Component component) {
  if (sequence < 0 || sequence >= maxSequences() || layer < 0 ||
      layer >= static_cast<int64_t>(impl->caches.size()))
    return nullptr;
  auto it = impl->caches[layer].find(component);
  if (it == impl->caches[layer].end())
    return nullptr;
  return impl->cacheBase(it->second) + sequence * it->second.slotBytes;
}

int64_t CpuModel::cacheSize(int64_t layer, plan::Component component) const {
  if (layer < 0 || layer >= static_cast<int64_t>(impl->caches.size()))
    return 0;
  auto it = impl->caches[layer].find(component);
  if (it == impl->caches[layer].end())
    return 0;
  return it->second.slotBytes;
}

//===----------------------------------------------------------------------===//
// Steps
//===----------------------------------------------------------------------===//

/// Calls a compiled function with the buffer `bind` gives for each argument
/// (it also fills the argument's shape).
bool CpuModel::Impl::runFunction(
    const step::Function &function,
    const std::function<void *(const step::Arg &, std::vector<int64_t> &)>
        &bind,
    std::string &error) {
  std::vector<Descriptor> descriptors;
  descriptors.reserve(function.args.size());
  for (const step::Arg &arg : function.args) {
    std::vector<int64_t> shape;
    void *data = bind(arg, shape);
    if (!data) {
      error = function.name + ": nothing to bind to '" + arg.bind + "'";
      return false;
    }
    descriptors.emplace_back(data, shape);
  }
  std::vector<void *> pointers, args;
  for (Descriptor &d : descriptors)
    pointers.push_back(d.words.data());
  for (void *&p : pointers)
    args.push_back(&p);
  function.entry(args.data());
  return true;
}

bool CpuModel::Impl::runStep(const std::vector<int64_t> &positions,
                             const std::vector<int64_t> &slots,
                             const std::vector<int64_t> &first,
                             const std::vector<int64_t> &last,
                             const std::vector<StepBuffer> &x,
                             std::vector<StepBuffer> &y, std::string &error) {
  auto tokens = static_cast<int64_t>(positions.size());
  std::map<std::string, const std::vector<int64_t> *> inputs = {
      {"positions", &positions},
      {"slots", &slots},
      {"first", &first},
      {"last", &last}};
  // Each key's metadata, computed once and shared by its layers.
  std::map<int, std::map<std::string, StepBuffer>> metadata;
  // The top-k and candidate blocks of source layers, for their consumers.
  std::map<int64_t, std::map<std::string, StepBuffer>> produced;
  std::map<int64_t, const LayerSpec *> byId;
  for (const LayerSpec &layer : layers)
    byId[layer.id] = &layer;
  for (const StepProgram::Call &call : program.calls) {
    if (call.layer < 0) {
      std::map<std::string, StepBuffer> &out = metadata[call.function];
      if (!runFunction(
              program.functions[call.function],
              [&](const step::Arg &arg, std::vector<int64_t> &shape) -> void * {
                if (arg.output) {
                  StepBuffer &buffer = out[arg.bind] = makeBuffer(arg, tokens);
                  shape = buffer.shape;
                  return buffer.data();
                }
                auto it = inputs.find(arg.bind);
                if (it == inputs.end())
                  return nullptr;
                shape = {tokens};
                return const_cast<int64_t *>(it->second->data());
              },
              error))
        return false;
      continue;
    }
    const LayerSpec &layer = *byId.at(call.layer);
    std::map<std::string, StepBuffer> &meta = metadata[call.meta];
    std::map<std::string, StepBuffer> &mine = produced[layer.id];
    LayerTensors &w = weights[layer.id];
    auto bind = [&](const step::Arg &arg,
                    std::vector<int64_t> &shape) -> void * {
      if (arg.output) {
        StepBuffer &buffer = arg.bind == "y" ? y[layer.id] : mine[arg.bind];
        buffer = makeBuffer(arg, tokens);
        shape = buffer.shape;
        return buffer.data();
      }
      if (arg.bind == "x") {
        shape = x[layer.id].shape;
        return const_cast<uint8_t *>(x[layer.id].bytes.data());
      }
      if (auto it = inputs.find(arg.bind); it != inputs.end()) {
        shape = {tokens};
        return const_cast<int64_t *>(it->second->data());
      }
      if (auto it = meta.find(arg.bind); it != meta.end()) {
        shape = it->second.shape;
        return it->second.data();
      }
      if (arg.bind == "topk" || arg.bind == "candidates") {
        int64_t source =
            arg.bind == "topk" ? layer.indexSource : layer.candidateSource;
        auto it = produced[source].find(arg.bind);
        if (it == produced[source].end())
          return nullptr;
        shape = it->second.shape;
        return it->second.data();
      }
      if (isCacheBind(arg.bind)) {
        std::optional<plan::Component> component = componentOf(arg.bind);
        auto it = component ? caches[layer.id].find(*component)
                            : caches[layer.id].end();
        if (it == caches[layer.id].end())
          return nullptr;
        shape = {it->second.slotBytes *
                 static_cast<int64_t>(sequences.size())};
        return cacheBase(it->second);
      }
      auto it = w.find(arg.bind);
      if (it == w.end())
        return nullptr;
      shape = it->second.shape;
      return it->second.type == HostTensor::Type::F32
                 ? static_cast<void *>(it->second.f32.data())
                 : static_cast<void *>(it->second.bytes.data());
    };
    if (!runFunction(program.functions[call.function], bind, error)) {
      error = "layer " + std::to_string(layer.id) + ": " + error;
      return false;
    }
  }
  return true;
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

bool CpuModel::step(const StepBatch &batch,
                    const std::vector<const float *> &inputs,
                    const std::vector<float *> &outputs, std::string &error) {
  Impl &m = *impl;
  size_t rows = batch.sequences.size();
  if (batch.lengths.size() != rows) {
    error = "the batch has " + std::to_string(rows) + " sequences but " +
            std::to_string(batch.lengths.size()) + " lengths";
    return false;
  }
  if (rows > m.sequences.size()) {
    error = "the batch has " + std::to_string(rows) +
            " rows, more than the plan's " +
            std::to_string(m.sequences.size()) + " sequence slots";
    return false;
  }
  size_t numLayers = static_cast<size_t>(m.config.numLayers());
  if (inputs.size() != numLayers || outputs.size() != numLayers) {
    error = "expected one input and one output buffer per layer (" +
            std::to_string(numLayers) + "), got " +
            std::to_string(inputs.size()) + " and " +
            std::to_string(outputs.size());
    return false;
  }
  for (const LayerSpec &layer : m.layers)
    if ((!inputs[layer.id] || !outputs[layer.id]) && batch.paddedTokens > 0 &&
        rows > 0) {
      error =
          "layer " + std::to_string(layer.id) + ": null input or output buffer";
      return false;
    }
  if (batch.paddedTokens < 0) {
    error = "paddedTokens must be >= 0";
    return false;
  }
  std::set<int64_t> seen;
  for (size_t b = 0; b < rows; ++b) {
    int64_t sequence = batch.sequences[b], length = batch.lengths[b];
    if (position(sequence) < 0) {
      error = "batch row " + std::to_string(b) +
              ": unknown or finished sequence " + std::to_string(sequence);
      return false;
    }
    if (!seen.insert(sequence).second) {
      error = "batch row " + std::to_string(b) + ": sequence " +
              std::to_string(sequence) + " appears twice";
      return false;
    }
    if (length < 0 || length > batch.paddedTokens) {
      error = "batch row " + std::to_string(b) + ": length " +
              std::to_string(length) + " outside [0, " +
              std::to_string(batch.paddedTokens) + "]";
      return false;
    }
    if (position(sequence) + length > contextTokens()) {
      error = "sequence " + std::to_string(sequence) + ": " +
              std::to_string(position(sequence) + length) +
              " tokens exceed the planned context of " +
              std::to_string(contextTokens());
      return false;
    }
  }
  int64_t tokens = 0, context = 0;
  for (size_t b = 0; b < rows; ++b) {
    tokens += batch.lengths[b];
    context = std::max(context,
                       position(batch.sequences[b]) + batch.lengths[b]);
  }
  if (!io::fitsInMemory(
          stepWorkspaceBytes(m.config, m.layers, tokens, context),
          "a step of " + std::to_string(tokens) + " tokens", error))
    return false;
  // The packed tokens: each sequence's rows in order, with their positions.
  int64_t dim = m.config.hiddenSize, padded = batch.paddedTokens;
  std::vector<int64_t> positions, slots, first, last;
  for (size_t b = 0; b < rows; ++b) {
    int64_t begin = static_cast<int64_t>(positions.size());
    int64_t start = m.sequences[batch.sequences[b]].position;
    for (int64_t t = 0; t < batch.lengths[b]; ++t) {
      positions.push_back(start + t);
      slots.push_back(batch.sequences[b]);
      first.push_back(begin);
      last.push_back(begin + batch.lengths[b] - 1);
    }
  }
  std::vector<StepBuffer> x(m.config.numLayers()), y(m.config.numLayers());
  for (const LayerSpec &layer : m.layers) {
    // Read the input before the output is cleared: they may be one buffer.
    StepBuffer &in = x[layer.id];
    in.shape = {tokens, dim};
    in.bytes.resize(2 * tokens * dim);
    auto *bits = reinterpret_cast<uint16_t *>(in.bytes.data());
    for (size_t b = 0, row = 0; b < rows; ++b)
      for (int64_t t = 0; t < batch.lengths[b]; ++t, ++row)
        for (int64_t i = 0; i < dim; ++i)
          bits[row * dim + i] = num::toBF16Bits(
              inputs[layer.id][(b * padded + t) * dim + i]);
    if (rows > 0 && padded > 0)
      std::fill(outputs[layer.id], outputs[layer.id] + rows * padded * dim,
                0.0f);
  }
  if (tokens > 0 &&
      !m.runStep(positions, slots, first, last, x, y, error))
    return false;
  for (const LayerSpec &layer : m.layers) {
    if (tokens == 0)
      break;
    auto *bits = reinterpret_cast<const uint16_t *>(y[layer.id].bytes.data());
    for (size_t b = 0, row = 0; b < rows; ++b)
      for (int64_t t = 0; t < batch.lengths[b]; ++t, ++row)
        for (int64_t i = 0; i < dim; ++i)
          outputs[layer.id][(b * padded + t) * dim + i] =
              num::fromBF16Bits(bits[row * dim + i]);
  }
  for (size_t b = 0; b < rows; ++b)
    m.sequences[batch.sequences[b]].position += batch.lengths[b];
  return true;
}

} // namespace v4a::rt
