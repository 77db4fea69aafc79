//===- CpuModel.cpp - the CPU backend of the host runtime -----------------===//

#include "runtime/CpuModel.h"

#include "core/CacheLayout.h"
#include "core/FileIO.h"
#include "core/Numerics.h"
#include "core/TensorSpecs.h"

#include <algorithm>
#include <cmath>
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

/// Replaces an e4m3 weight and its block scales by their f32 product (exact
/// in bf16), as DeepSeek's reference does with wo_a at load.
static void dequantizeInPlace(LayerTensors &tensors, const std::string &name) {
  HostTensor &weight = tensors.at(name);
  if (weight.type != HostTensor::Type::E4M3)
    return;
  std::string scaleName = scaleTensorName(name);
  const HostTensor &scale = tensors.at(scaleName);
  int64_t cols = weight.shape[1], scaleCols = scale.shape[1];
  weight.f32.resize(weight.bytes.size());
  for (size_t i = 0; i < weight.bytes.size(); ++i) {
    int64_t r = static_cast<int64_t>(i) / cols,
            c = static_cast<int64_t>(i) % cols;
    weight.f32[i] =
        num::fromE4M3Bits(weight.bytes[i]) *
        num::fromUE8M0Bits(scale.bytes[(r / 128) * scaleCols + c / 128]);
  }
  weight.bytes.clear();
  weight.bytes.shrink_to_fit();
  weight.type = HostTensor::Type::F32;
  tensors.erase(scaleName);
}

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// A row-major f32 array with its shape.
struct Array {
  std::vector<int64_t> shape;
  std::vector<float> data;
  Array() = default;
  Array(std::vector<int64_t> dims, float fill = 0.0f) : shape(std::move(dims)) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    data.assign(n, fill);
  }
  F2 m2() { return view<float, 2>(data.data(), {shape[0], shape[1]}); }
  F3 m3() {
    return view<float, 3>(data.data(), {shape[0], shape[1], shape[2]});
  }
  Array reshaped(std::vector<int64_t> dims) const {
    Array copy = *this;
    copy.shape = std::move(dims);
    return copy;
  }
};

F2 m2(HostTensor &t) {
  return view<float, 2>(t.f32.data(), {t.shape[0], t.shape[1]});
}
B2 b2(HostTensor &t) {
  return view<uint8_t, 2>(t.bytes.data(), {t.shape[0], t.shape[1]});
}

/// Where a layer's cache buffer lives inside a sequence slot.
struct BufferSlot {
  int64_t offset = 0;
  layout::RowLayout row{};
  int64_t pageRows = 1;
  int64_t rows = 0;
};

struct Sequence {
  bool active = false;
  int64_t position = 0;
};

} // namespace

struct CpuModel::Impl {
  ModelConfig config;
  std::vector<LayerSpec> layers;
  KernelTable k;
  std::vector<LayerTensors> weights;
  plan::Plan plan;
  int64_t slotBytes = 0;
  std::vector<uint8_t> arena;
  std::vector<Sequence> sequences;
  std::vector<std::map<plan::Component, BufferSlot>> buffers;

  // Per step and sequence: the top-k and candidate blocks of source layers.
  std::map<int64_t, std::vector<int32_t>> stepTopk, stepCandidates;

  uint8_t *slotBase(int64_t sequence) {
    return arena.data() + sequence * slotBytes;
  }
  const BufferSlot &slot(int64_t layer, plan::Component component) {
    return buffers[layer].at(component);
  }
  void writeRow(int64_t sequence, const BufferSlot &buffer, int64_t index,
                const float *values) {
    layout::RowPlace place =
        layout::placeRow(buffer.row, buffer.pageRows, index);
    uint8_t *base = slotBase(sequence) + buffer.offset;
    layout::encodeRow(buffer.row, values, base + place.values,
                      base + place.scales);
  }
  void readRow(int64_t sequence, const BufferSlot &buffer, int64_t index,
               float *values) {
    layout::RowPlace place =
        layout::placeRow(buffer.row, buffer.pageRows, index);
    uint8_t *base = slotBase(sequence) + buffer.offset;
    layout::decodeRow(buffer.row, base + place.values, base + place.scales,
                      values);
  }
  float *stateFloats(int64_t sequence, const BufferSlot &buffer) {
    return reinterpret_cast<float *>(slotBase(sequence) + buffer.offset);
  }

  void resetSequence(int64_t sequence);
  Array linear(Array &x, const LayerTensors &w, const std::string &name,
               bool f32Result = false);
  Array rmsNorm(Array &x, const LayerTensors &w, const std::string &name);
  const KernelTable::Rope &ropeFor(const LayerSpec &layer) {
    return layer.compressRatio > 0 ? k.ropeCompressed : k.ropePlain;
  }
  void compressEntries(int64_t sequence, const LayerSpec &layer, Array &x,
                       int64_t start);
  void appendEntry(int64_t sequence, const LayerSpec &layer,
                   std::vector<float> pooled, int64_t group);
  void indexerKeys(int64_t sequence, const LayerSpec &layer, Array &x,
                   int64_t start);
  void storeIndexKey(int64_t sequence, const LayerSpec &layer, Array key,
                     int64_t group);
  std::vector<int32_t> select(int64_t sequence, const LayerSpec &layer,
                              Array &x, Array &qr, I1 &positions,
                              int64_t tokens, int64_t start, int64_t &width);
  void runLayer(int64_t sequence, const LayerSpec &layer, Array &x,
                int64_t start, float *out);
};

CpuModel::CpuModel(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
CpuModel::~CpuModel() = default;

int64_t CpuModel::maxSequences() const { return impl->sequences.size(); }
int64_t CpuModel::contextTokens() const {
  return impl->plan.options.contextTokens;
}

static bool kernelsComplete(const ModelConfig &config,
                            const std::vector<LayerSpec> &layers,
                            const KernelTable &k, std::string &error) {
  bool ok = k.linear && k.linearF32 && k.linearFP8 && k.rmsNorm &&
            k.rmsNormHeads && k.quantKv && k.attention && k.groupedOutput &&
            k.groupedOutputFP8WoB;
  for (const LayerSpec &layer : layers) {
    const KernelTable::Rope &rope =
        layer.compressRatio > 0 ? k.ropeCompressed : k.ropePlain;
    ok = ok && rope.heads && rope.headsInverse && rope.rows;
    if (layer.compressRatio > 1)
      ok = ok && k.compressStep.count(layer.compressRatio);
    if (layer.indexTopk > 0)
      ok = ok && k.indexerScore.count(layer.compressRatio) && k.topk &&
           k.quantFp4Heads && k.quantFp4Rows && k.hadamardHeads &&
           k.hadamardRows;
    if (hasIndexerCompressor(layer))
      ok = ok && k.indexerCompress;
    if (layer.candidateSource >= 0)
      ok = ok && k.blockTopk && k.topkInBlocks;
  }
  if (!ok)
    error = "the kernel table lacks kernels this model needs";
  return ok;
}

std::unique_ptr<CpuModel>
CpuModel::create(ModelConfig config, std::vector<LayerSpec> layers,
                 const KernelTable &kernels, std::vector<LayerTensors> weights,
                 const plan::Plan &plan, int64_t maxSequences,
                 std::string &error) {
  if (maxSequences <= 0) {
    error = "the number of sequence slots must be positive";
    return nullptr;
  }
  if (!validateWeights(config, layers, weights, error) ||
      !kernelsComplete(config, layers, kernels, error))
    return nullptr;
  for (const LayerSpec &layer : layers)
    dequantizeInPlace(weights[layer.id], "wo_a.weight");
  auto impl = std::make_unique<Impl>();
  // Buffers and weights are indexed by layer id; `layers` may be a subset.
  impl->buffers.resize(config.numLayers());
  // Lay out one slot: every owned buffer gets bytes; aliases share.
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
    BufferSlot place;
    if (buffer.isAlias()) {
      // An alias is the source's buffer: same bytes, same geometry.
      auto &source = impl->buffers[buffer.aliasOf];
      auto it = source.find(buffer.component);
      if (it == source.end() || it->second.row.kind != buffer.kind ||
          it->second.row.dim != buffer.dim || it->second.rows != buffer.rows) {
        error = std::string("layer ") + std::to_string(buffer.layer) + " " +
                plan::componentName(buffer.component) +
                ": the plan aliases a buffer of layer " +
                std::to_string(buffer.aliasOf) +
                " that is missing or has another layout";
        return nullptr;
      }
      place = it->second;
    } else {
      std::optional<layout::RowLayout> row =
          layout::describeRow(buffer.kind, buffer.dim, &error);
      if (!row)
        return nullptr;
      place.row = *row;
      place.rows = buffer.rows;
      bool paged = buffer.component == plan::Component::Compressed ||
                   buffer.component == plan::Component::IndexKeys;
      place.pageRows = paged ? plan.options.pageSize : buffer.rows;
      place.offset = impl->slotBytes;
      impl->slotBytes += buffer.bytes;
    }
    impl->buffers[buffer.layer][buffer.component] = place;
  }
  for (const LayerSpec &layer : layers)
    if (!impl->buffers[layer.id].count(plan::Component::Window)) {
      error = "layer " + std::to_string(layer.id) +
              ": the CPU backend needs the sliding window (use_swa)";
      return nullptr;
    }
  if (!io::fitsInMemory(static_cast<double>(impl->slotBytes) * maxSequences,
                        "the KV caches of " + std::to_string(maxSequences) +
                            " sequences at " +
                            std::to_string(plan.options.contextTokens) +
                            " tokens",
                        error))
    return nullptr;
  impl->config = std::move(config);
  impl->layers = std::move(layers);
  impl->k = kernels;
  impl->weights = std::move(weights);
  impl->plan = plan;
  impl->arena.assign(impl->slotBytes * maxSequences, 0);
  impl->sequences.resize(maxSequences);
  return std::unique_ptr<CpuModel>(new CpuModel(std::move(impl)));
}

void CpuModel::Impl::resetSequence(int64_t sequence) {
  std::fill(slotBase(sequence), slotBase(sequence) + slotBytes, 0);
  for (const LayerSpec &layer : layers)
    for (auto component :
         {plan::Component::CompressorState, plan::Component::IndexerState}) {
      auto it = buffers[layer.id].find(component);
      if (it == buffers[layer.id].end())
        continue;
      // State: kv slots (zero), then score slots (-inf).
      float *state = stateFloats(sequence, it->second);
      int64_t half = it->second.rows * it->second.row.dim / 2;
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
      layer >= static_cast<int64_t>(impl->buffers.size()))
    return nullptr;
  auto it = impl->buffers[layer].find(component);
  if (it == impl->buffers[layer].end())
    return nullptr;
  return impl->slotBase(sequence) + it->second.offset;
}

int64_t CpuModel::cacheSize(int64_t layer, plan::Component component) const {
  if (layer < 0 || layer >= static_cast<int64_t>(impl->buffers.size()))
    return 0;
  auto it = impl->buffers[layer].find(component);
  if (it == impl->buffers[layer].end())
    return 0;
  return it->second.rows * it->second.row.rowBytes();
}

//===----------------------------------------------------------------------===//
// One layer
//===----------------------------------------------------------------------===//

Array CpuModel::Impl::linear(Array &x, const LayerTensors &w,
                             const std::string &name, bool f32Result) {
  HostTensor &weight = const_cast<HostTensor &>(w.at(name + ".weight"));
  Array y({x.shape[0], weight.shape[0]});
  F2 mx = x.m2(), my = y.m2();
  if (weight.type == HostTensor::Type::E4M3) {
    HostTensor &scale = const_cast<HostTensor &>(w.at(name + ".scale"));
    B2 mw = b2(weight), ms = b2(scale);
    k.linearFP8(&mx, &mw, &ms, &my);
  } else {
    F2 mw = m2(weight);
    (f32Result ? k.linearF32 : k.linear)(&mx, &mw, &my);
  }
  return y;
}

Array CpuModel::Impl::rmsNorm(Array &x, const LayerTensors &w,
                              const std::string &name) {
  HostTensor &weight = const_cast<HostTensor &>(w.at(name));
  Array y(x.shape);
  F2 mx = x.m2(), my = y.m2();
  F1 mw = view<float, 1>(weight.f32.data(), {weight.shape[0]});
  k.rmsNorm(&mx, &mw, &my);
  return y;
}

/// Normalizes, rotates and quantizes pooled entry `group` into the
/// compressed cache; V4.1 sparse layers also derive its index key.
void CpuModel::Impl::appendEntry(int64_t sequence, const LayerSpec &layer,
                                 std::vector<float> pooled, int64_t group) {
  const LayerTensors &w = weights[layer.id];
  int64_t d = config.headDim;
  Array entry({1, d});
  entry.data = std::move(pooled);
  Array latent = rmsNorm(entry, w, "compressor.norm.weight");
  int64_t at = group * layer.compressRatio;
  I1 position = view<int64_t, 1>(&at, {1});
  Array roped({1, d}), stored({1, d});
  F2 ml = latent.m2(), mr = roped.m2(), ms = stored.m2();
  ropeFor(layer).rows(&ml, &position, &mr);
  k.quantKv(&mr, &ms);
  writeRow(sequence, slot(layer.id, plan::Component::Compressed), group,
           stored.data.data());
  if (layer.indexTopk == 0 || hasIndexerCompressor(layer))
    return;
  Array key = linear(latent, w, "indexer.k_proj");
  storeIndexKey(sequence, layer, rmsNorm(key, w, "indexer.k_norm.weight"),
                group);
}

/// Rotates (RoPE at the group's first token, then Hadamard), fp4-quantizes
/// and stores the normalized index key of compressed row `group`.
void CpuModel::Impl::storeIndexKey(int64_t sequence, const LayerSpec &layer,
                                   Array key, int64_t group) {
  int64_t at = group * layer.compressRatio;
  I1 position = view<int64_t, 1>(&at, {1});
  Array roped(key.shape), rotated(key.shape), quant(key.shape);
  F2 a = key.m2(), b = roped.m2(), c = rotated.m2(), e = quant.m2();
  ropeFor(layer).rows(&a, &position, &b);
  k.hadamardRows(&b, &c);
  k.quantFp4Rows(&c, &e);
  writeRow(sequence, slot(layer.id, plan::Component::IndexKeys), group,
           quant.data.data());
}

/// Runs one token at a time through a compressor's state (kernel batch 1)
/// and hands every completed group to `emit`.
template <typename Emit>
static void runCompressor(KernelTable::CompressStep step, float *state,
                          int64_t slots, int64_t width, int64_t ratio,
                          Array &kv, Array &score, int64_t kvOffset,
                          int64_t scoreOffset, Array &ape, int64_t start,
                          int64_t entryWidth, Emit emit) {
  Array stateKv({1, slots, width}), stateScore({1, slots, width});
  std::copy(state, state + slots * width, stateKv.data.begin());
  std::copy(state + slots * width, state + 2 * slots * width,
            stateScore.data.begin());
  Array nextKv(stateKv.shape), nextScore(stateScore.shape);
  Array entry({1, entryWidth});
  for (int64_t t = 0; t < kv.shape[0]; ++t) {
    Array kvRow({1, width}), scoreRow({1, width});
    std::copy_n(kv.data.begin() + t * kv.shape[1] + kvOffset, width,
                kvRow.data.begin());
    std::copy_n(score.data.begin() + t * score.shape[1] + scoreOffset, width,
                scoreRow.data.begin());
    int64_t position = start + t;
    int32_t emitted = 0;
    F2 a = kvRow.m2(), b = scoreRow.m2(), c = ape.m2(), o = entry.m2();
    I1 p = view<int64_t, 1>(&position, {1});
    F3 s0 = stateKv.m3(), s1 = stateScore.m3(), n0 = nextKv.m3(),
       n1 = nextScore.m3();
    E1 flag = view<int32_t, 1>(&emitted, {1});
    step(&a, &b, &c, &p, &s0, &s1, &o, &flag, &n0, &n1);
    std::swap(stateKv, nextKv);
    std::swap(stateScore, nextScore);
    if (emitted)
      emit(entry.data, position / ratio);
  }
  std::copy(stateKv.data.begin(), stateKv.data.end(), state);
  std::copy(stateScore.data.begin(), stateScore.data.end(),
            state + slots * width);
}

static Array apeOf(const LayerTensors &w, const std::string &name) {
  const HostTensor &t = w.at(name);
  Array a(t.shape);
  a.data = t.f32;
  return a;
}

void CpuModel::Impl::compressEntries(int64_t sequence, const LayerSpec &layer,
                                     Array &x, int64_t start) {
  const LayerTensors &w = weights[layer.id];
  int64_t r = layer.compressRatio, d = config.headDim;
  auto emit = [&](const std::vector<float> &pooled, int64_t group) {
    appendEntry(sequence, layer, pooled, group);
  };
  if (r == 1) {
    Array kv = linear(x, w, "compressor.wkv");
    for (int64_t t = 0; t < x.shape[0]; ++t)
      emit(std::vector<float>(kv.data.begin() + t * d,
                              kv.data.begin() + (t + 1) * d),
           start + t);
    return;
  }
  const BufferSlot &state = slot(layer.id, plan::Component::CompressorState);
  int64_t coff = compressorOverlaps(r) ? 2 : 1;
  Array ape = apeOf(w, "compressor.ape");
  if (!compressorIsGated(r)) {
    Array both = linear(x, w, "compressor.wkv", /*f32Result=*/true);
    runCompressor(k.compressStep.at(r), stateFloats(sequence, state), r, d, r,
                  both, both, d, 0, ape, start, d, emit);
    return;
  }
  Array kv = linear(x, w, "compressor.wkv", true);
  Array score = linear(x, w, "compressor.wgate", true);
  runCompressor(k.compressStep.at(r), stateFloats(sequence, state), coff * r,
                coff * d, r, kv, score, 0, 0, ape, start, d, emit);
}

void CpuModel::Impl::indexerKeys(int64_t sequence, const LayerSpec &layer,
                                 Array &x, int64_t start) {
  const LayerTensors &w = weights[layer.id];
  int64_t di = config.indexHeadDim;
  Array ape = apeOf(w, "indexer.compressor.ape");
  Array kv = linear(x, w, "indexer.compressor.wkv", true);
  Array score = linear(x, w, "indexer.compressor.wgate", true);
  const BufferSlot &state = slot(layer.id, plan::Component::IndexerState);
  runCompressor(k.indexerCompress, stateFloats(sequence, state), 8, 2 * di, 4,
                kv, score, 0, 0, ape, start, di,
                [&](const std::vector<float> &pooled, int64_t group) {
                  Array entry({1, di});
                  entry.data = pooled;
                  storeIndexKey(
                      sequence, layer,
                      rmsNorm(entry, w, "indexer.compressor.norm.weight"),
                      group);
                });
}

std::vector<int32_t> CpuModel::Impl::select(int64_t sequence,
                                            const LayerSpec &layer, Array &x,
                                            Array &qr, I1 &positions,
                                            int64_t tokens, int64_t start,
                                            int64_t &width) {
  int64_t r = layer.compressRatio;
  int64_t rows = (start + tokens) / r; // compressed rows after this step
  if (layer.indexTopk == 0) {
    width = rows;
    std::vector<int32_t> all(tokens * width, -1);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < (start + t + 1) / r; ++j)
        all[t * width + j] = static_cast<int32_t>(j);
    return all;
  }
  width = layer.indexTopk;
  if (layer.indexSource != layer.id)
    return stepTopk.at(layer.indexSource);
  const LayerTensors &w = weights[layer.id];
  int64_t hi = config.indexNHeads, di = config.indexHeadDim;
  Array q = linear(qr, w, "indexer.wq_b").reshaped({tokens, hi, di});
  Array roped(q.shape), rotated(q.shape), qi(q.shape);
  F3 a = q.m3(), b = roped.m3(), c = rotated.m3(), e = qi.m3();
  ropeFor(layer).heads(&a, &positions, &b);
  k.hadamardHeads(&b, &c);
  k.quantFp4Heads(&c, &e);
  Array weightsOut = linear(x, w, "indexer.weights_proj");
  float scale = static_cast<float>(1.0 / std::sqrt(double(di * hi)));
  for (float &v : weightsOut.data)
    v *= scale;
  const BufferSlot &keySlot =
      slot(layer.indexKSource, plan::Component::IndexKeys);
  Array keys({rows, di});
  for (int64_t j = 0; j < rows; ++j)
    readRow(sequence, keySlot, j, keys.data.data() + j * di);
  Array scores({tokens, rows});
  F3 mq = qi.m3();
  F2 mk = keys.m2(), mw = weightsOut.m2(), ms = scores.m2();
  k.indexerScore.at(r)(&mq, &mk, &mw, &positions, &ms);
  std::vector<int32_t> picked(tokens * width);
  I2 out = view<int32_t, 2>(picked.data(), {tokens, width});
  if (layer.candidateSource == layer.id) {
    int64_t blocks = config.candidateTopkBlocks.value_or(8);
    std::vector<int32_t> candidates(tokens * blocks);
    I2 mc = view<int32_t, 2>(candidates.data(), {tokens, blocks});
    k.blockTopk(&ms, &mc);
    stepCandidates[layer.id] = candidates;
    k.topk(&ms, &out);
  } else if (layer.candidateSource >= 0) {
    std::vector<int32_t> &candidates = stepCandidates.at(layer.candidateSource);
    int64_t blocks = candidates.size() / tokens;
    I2 mc = view<int32_t, 2>(candidates.data(), {tokens, blocks});
    k.topkInBlocks(&ms, &mc, &out);
  } else {
    k.topk(&ms, &out);
  }
  stepTopk[layer.id] = picked;
  return picked;
}

void CpuModel::Impl::runLayer(int64_t sequence, const LayerSpec &layer,
                              Array &x, int64_t start, float *out) {
  const LayerTensors &w = weights[layer.id];
  int64_t tokens = x.shape[0], d = config.headDim;
  // No query sees further back than the planned context: a larger window
  // behaves exactly as one of the context's size.
  int64_t heads = config.numAttentionHeads,
          window = std::min(config.slidingWindow, plan.options.contextTokens);
  std::vector<int64_t> positionList(tokens);
  for (int64_t t = 0; t < tokens; ++t)
    positionList[t] = start + t;
  I1 positions = view<int64_t, 1>(positionList.data(), {tokens});
  const KernelTable::Rope &rope = ropeFor(layer);

  Array qa = linear(x, w, "wq_a");
  Array qr = rmsNorm(qa, w, "q_norm.weight");
  Array qLinear = linear(qr, w, "wq_b").reshaped({tokens, heads, d});
  Array qNormed(qLinear.shape), q(qLinear.shape);
  {
    F3 a = qLinear.m3(), b = qNormed.m3(), c = q.m3();
    k.rmsNormHeads(&a, &b);
    rope.heads(&b, &positions, &c);
  }
  Array kvLinear = linear(x, w, "wkv");
  Array kvNormed = rmsNorm(kvLinear, w, "kv_norm.weight");
  Array kvRoped(kvNormed.shape), kv(kvNormed.shape);
  {
    F2 a = kvNormed.m2(), b = kvRoped.m2(), c = kv.m2();
    rope.rows(&a, &positions, &b);
    k.quantKv(&b, &c);
  }

  if (layer.compressRatio > 0 && layer.kvSource == layer.id)
    compressEntries(sequence, layer, x, start);
  if (hasIndexerCompressor(layer) && layer.indexKSource == layer.id)
    indexerKeys(sequence, layer, x, start);

  int64_t selectedWidth = 0;
  std::vector<int32_t> selected;
  if (layer.compressRatio > 0)
    selected =
        select(sequence, layer, x, qr, positions, tokens, start, selectedWidth);

  // The rows attention reads: this step's kv, the ring, compressed rows.
  int64_t compressed =
      layer.compressRatio > 0 ? (start + tokens) / layer.compressRatio : 0;
  Array table({tokens + window + compressed, d});
  std::copy(kv.data.begin(), kv.data.end(), table.data.begin());
  const BufferSlot &ring = slot(layer.id, plan::Component::Window);
  for (int64_t p = std::max<int64_t>(0, start - window); p < start; ++p)
    readRow(sequence, ring, p % window,
            table.data.data() + (tokens + p % window) * d);
  if (compressed > 0) {
    const BufferSlot &rows = slot(layer.kvSource, plan::Component::Compressed);
    for (int64_t j = 0; j < compressed; ++j)
      readRow(sequence, rows, j, table.data.data() + (tokens + window + j) * d);
  }
  int64_t slots = window + selectedWidth;
  std::vector<int32_t> indices(tokens * slots, -1);
  for (int64_t t = 0; t < tokens; ++t) {
    int64_t i = start + t, s = 0;
    for (int64_t p = std::max<int64_t>(0, i - window + 1); p <= i; ++p)
      indices[t * slots + s++] =
          static_cast<int32_t>(p >= start ? p - start : tokens + p % window);
    for (int64_t j = 0; j < selectedWidth; ++j) {
      int32_t row = selected[t * selectedWidth + j];
      if (row >= 0)
        indices[t * slots + s++] = static_cast<int32_t>(tokens + window + row);
    }
  }
  HostTensor &sink = const_cast<HostTensor &>(w.at("attn_sink"));
  Array o({tokens, heads, d}), oRoped({tokens, heads, d});
  {
    F3 mq = q.m3(), mo = o.m3(), mr = oRoped.m3();
    F2 mt = table.m2();
    I2 mi = view<int32_t, 2>(indices.data(), {tokens, slots});
    F1 msink = view<float, 1>(sink.f32.data(), {heads});
    k.attention(&mq, &mt, &mi, &msink, &mo);
    rope.headsInverse(&mo, &positions, &mr);
  }
  for (int64_t t = 0; t < tokens; ++t)
    writeRow(sequence, ring, (start + t) % window, kv.data.data() + t * d);

  Array y({tokens, config.hiddenSize});
  F3 mo = oRoped.m3();
  F2 my = y.m2();
  HostTensor &woA = const_cast<HostTensor &>(w.at("wo_a.weight"));
  HostTensor &woB = const_cast<HostTensor &>(w.at("wo_b.weight"));
  F2 a = m2(woA);
  if (woB.type == HostTensor::Type::E4M3) {
    HostTensor &sb = const_cast<HostTensor &>(w.at("wo_b.scale"));
    B2 b = b2(woB), bs = b2(sb);
    k.groupedOutputFP8WoB(&mo, &a, &b, &bs, &my);
  } else {
    F2 b = m2(woB);
    k.groupedOutput(&mo, &a, &b, &my);
  }
  std::copy(y.data.begin(), y.data.end(), out);
}

//===----------------------------------------------------------------------===//
// Steps
//===----------------------------------------------------------------------===//

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
  for (size_t b = 0; b < rows; ++b)
    if (!io::fitsInMemory(
            stepWorkspaceBytes(m.config, m.layers, batch.lengths[b],
                               position(batch.sequences[b]) + batch.lengths[b]),
            "a step of " + std::to_string(batch.lengths[b]) + " tokens", error))
      return false;
  int64_t dim = m.config.hiddenSize, padded = batch.paddedTokens;
  for (size_t b = 0; b < rows; ++b) {
    int64_t sequence = batch.sequences[b], length = batch.lengths[b];
    int64_t start = m.sequences[sequence].position;
    m.stepTopk.clear();
    m.stepCandidates.clear();
    for (const LayerSpec &layer : m.layers) {
      // Read the input before the output is cleared: they may be one buffer.
      Array x({length, dim});
      const float *in = inputs[layer.id] + b * padded * dim;
      std::copy(in, in + length * dim, x.data.begin());
      float *out = outputs[layer.id] + b * padded * dim;
      std::fill(out, out + padded * dim, 0.0f);
      if (length == 0)
        continue;
      m.runLayer(sequence, layer, x, start, out);
    }
    m.sequences[sequence].position += length;
  }
  return true;
}

} // namespace v4a::rt
