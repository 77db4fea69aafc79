//===- Layer.cpp - reference implementation of whole layers ---------------===//

#include "core/Numerics.h"
#include "core/TensorSpecs.h"
#include "lib/Reference/Reference.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

namespace v4a::ref {

const Weight &LayerWeights::get(const std::string &name) const {
  auto it = tensors.find(name);
  assert(it != tensors.end() && "missing layer tensor");
  return it->second;
}

//===----------------------------------------------------------------------===//
// Random weights
//===----------------------------------------------------------------------===//

namespace {
/// splitmix64: a fixed, portable stream for any seed.
class Random {
public:
  explicit Random(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [-1, 1).
  float symmetric() {
    return static_cast<float>((next() >> 40) * (1.0 / (1ull << 24))) * 2.0f -
           1.0f;
  }

private:
  uint64_t state;
};

uint64_t hashName(const std::string &name, uint64_t seed) {
  uint64_t h = seed ^ 0xcbf29ce484222325ull;
  for (char c : name)
    h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}
} // namespace

std::vector<float> randomActivations(int64_t count, uint64_t seed) {
  Random random(hashName("activations", seed));
  std::vector<float> values(count);
  for (float &v : values)
    v = num::roundBF16(random.symmetric());
  return values;
}

/// Quantizes a weight to e4m3 with one ue8m0 scale per 128x128 block.
static Weight quantizeFP8(Tensor values) {
  int64_t rows = values.dim(0), cols = values.dim(1);
  Weight w;
  // Quantized in place: a block is read for its maximum before it changes.
  w.values = std::move(values);
  w.scale = Tensor({(rows + 127) / 128, (cols + 127) / 128});
  for (int64_t br = 0; br * 128 < rows; ++br)
    for (int64_t bc = 0; bc * 128 < cols; ++bc) {
      // The largest magnitude by its bits: for finite non-negative floats
      // the order of the bit patterns is the order of the values, and an
      // integer maximum vectorizes.
      uint32_t largest = 0;
      int64_t c0 = bc * 128, c1 = std::min(cols, (bc + 1) * 128);
      for (int64_t r = br * 128; r < std::min(rows, (br + 1) * 128); ++r) {
        const float *row = w.values.row(r);
        for (int64_t c = c0; c < c1; ++c) {
          uint32_t bits;
          std::memcpy(&bits, row + c, 4);
          largest = std::max(largest, bits & 0x7fffffffu);
        }
      }
      float amax;
      std::memcpy(&amax, &largest, 4);
      amax = std::max(amax, 1e-4f);
      float scale =
          num::fromUE8M0Bits(num::ue8m0CeilBits(amax / num::kE4M3Max));
      w.scale.row(br)[bc] = scale;
      // A power-of-two scale has an exact reciprocal: the same quotients.
      float inverse = 1.0f / scale;
      for (int64_t r = br * 128; r < std::min(rows, (br + 1) * 128); ++r)
        for (int64_t c = bc * 128; c < std::min(cols, (bc + 1) * 128); ++c)
          w.values.row(r)[c] = num::roundE4M3(w.values.row(r)[c] * inverse);
    }
  return w;
}

Weight randomWeight(const ModelConfig &config, const LayerSpec &layer,
                    const TensorSpec &spec, uint64_t seed) {
  Random random(hashName(spec.name, seed * 1000003ull + layer.id));
  Tensor values(spec.shape);
  // v = offset + range * u for u uniform in [-1, 1).
  float offset = 0.0f, range;
  if (spec.name.find("norm") != std::string::npos) {
    offset = 1.0f;
    range = 0.25f;
  } else if (spec.name == "attn_sink") {
    range = 2.0f;
  } else if (spec.f32) {
    range = 0.5f;
  } else {
    float fanIn = spec.shape.size() == 2 ? spec.shape[1] : 1.0f;
    range = std::sqrt(3.0f / fanIn);
  }
  for (float &v : values.data) {
    float u = random.symmetric();
    v = offset == 0.0f ? range * u : offset + range * u;
    if (!spec.f32)
      v = num::roundBF16(v);
  }
  if (spec.projection && config.fp8Weights)
    return quantizeFP8(std::move(values));
  Weight weight;
  weight.values = std::move(values);
  return weight;
}

LayerWeights randomLayerWeights(const ModelConfig &config,
                                const LayerSpec &layer, uint64_t seed) {
  LayerWeights weights;
  for (const TensorSpec &spec : layerTensorSpecs(config, layer))
    weights.tensors[spec.name] = randomWeight(config, layer, spec, seed);
  return weights;
}

//===----------------------------------------------------------------------===//
// Model
//===----------------------------------------------------------------------===//

Model::Model(ModelConfig config, std::vector<LayerSpec> layers,
             std::vector<LayerWeights> layerWeights)
    : modelConfig(std::move(config)), layerSpecs(std::move(layers)),
      weights(std::move(layerWeights)) {}

SequenceState Model::newSequence() const {
  SequenceState state;
  for (const LayerSpec &layer : layerSpecs) {
    LayerState s;
    s.window = Tensor({modelConfig.slidingWindow, modelConfig.headDim});
    int64_t r = layer.compressRatio;
    if (r > 1)
      s.compressor = makeCompressorState(r, compressorOverlaps(r),
                                         (compressorOverlaps(r) ? 2 : 1) *
                                             modelConfig.headDim);
    if (hasIndexerCompressor(layer))
      s.indexCompressor =
          makeCompressorState(4, true, 2 * modelConfig.indexHeadDim);
    state.layers.push_back(std::move(s));
  }
  return state;
}

RopeParams Model::ropeFor(const LayerSpec &layer) const {
  RopeParams params;
  params.ropeDim = modelConfig.qkRopeHeadDim;
  if (layer.compressRatio > 0) {
    params.theta = modelConfig.compressRopeTheta;
    params.yarn = modelConfig.ropeScaling;
  } else {
    params.theta = modelConfig.ropeTheta;
  }
  return params;
}

std::vector<Tensor> Model::step(SequenceState &state,
                                const std::vector<Tensor> &x,
                                const std::vector<bool> &runs) const {
  StepShared shared;
  std::vector<Tensor> y;
  // The step's token count, from the first layer that runs.
  int64_t tokens = 0;
  for (size_t l = 0; l < x.size(); ++l)
    if (runs.empty() || runs[l]) {
      tokens = x[l].dim(0);
      break;
    }
  if (tokens == 0) {
    // An empty step (a padded batch row) leaves the sequence as it was.
    for (size_t l = 0; l < layerSpecs.size(); ++l)
      y.push_back(Tensor({0, modelConfig.hiddenSize}));
    return y;
  }
  for (size_t l = 0; l < layerSpecs.size(); ++l)
    y.push_back(runs.empty() || runs[l]
                    ? runLayer(l, state, x[l], state.position, shared)
                    : Tensor({0, modelConfig.hiddenSize}));
  state.position += tokens;
  return y;
}

static Tensor rowsToTensor(const std::vector<std::vector<float>> &rows,
                           int64_t width) {
  Tensor t({static_cast<int64_t>(rows.size()), width});
  for (size_t r = 0; r < rows.size(); ++r)
    std::copy(rows[r].begin(), rows[r].end(), t.row(r));
  return t;
}

static Tensor oneRow(const std::vector<float> &row) {
  Tensor t({1, static_cast<int64_t>(row.size())});
  t.data = row;
  return t;
}

static Tensor reshape(Tensor t, std::vector<int64_t> shape) {
  t.shape = std::move(shape);
  return t;
}

Tensor Model::runLayer(int64_t l, SequenceState &state, const Tensor &x,
                       int64_t start, StepShared &shared) const {
  const ModelConfig &c = modelConfig;
  const LayerSpec &spec = layerSpecs[l];
  const LayerWeights &w = weights[l];
  LayerState &own = state.layers[l];
  int64_t tokens = x.dim(0), d = c.headDim, heads = c.numAttentionHeads;
  int64_t r = spec.compressRatio, window = c.slidingWindow;
  double eps = c.rmsNormEps;
  std::vector<int64_t> positions(tokens);
  for (int64_t t = 0; t < tokens; ++t)
    positions[t] = start + t;
  RopeParams ropeParams = ropeFor(spec);

  // 1-2. Query and window KV.
  Tensor qr = rmsNorm(linear(x, w.get("wq_a.weight")),
                      &w.get("q_norm.weight").values, eps);
  Tensor q = reshape(linear(qr, w.get("wq_b.weight")), {tokens, heads, d});
  q = rope(rmsNorm(q, nullptr, eps), positions, ropeParams);
  Tensor kv = rmsNorm(linear(x, w.get("wkv.weight")),
                      &w.get("kv_norm.weight").values, eps);
  kv = actQuant(rope(kv, positions, ropeParams), QuantFormat::E4M3, 64,
                d - c.qkRopeHeadDim);

  // 5. Compressed entries and index keys (sources write, consumers read).
  if (r > 0 && spec.kvSource == l)
    appendCompressed(l, state, x, positions);
  if (hasIndexerCompressor(spec) && spec.indexKSource == l)
    appendIndexKeys(l, state, x, positions);
  const LayerState &kvOwner = state.layers[spec.kvSource];

  // 6. The compressed rows each query attends to.
  std::vector<std::vector<int32_t>> selected(tokens);
  if (r > 0 && spec.indexTopk == 0) {
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < (positions[t] + 1) / r; ++j)
        selected[t].push_back(static_cast<int32_t>(j));
  } else if (spec.indexTopk > 0) {
    selected = indexerSelection(l, state, x, qr, positions, shared);
  }

  // 7. Attention over this step's rows, the ring and the compressed rows.
  int64_t compressedRows = static_cast<int64_t>(kvOwner.compressed.size());
  Tensor table({tokens + window + compressedRows, d});
  std::copy(kv.data.begin(), kv.data.end(), table.data.begin());
  std::copy(own.window.data.begin(), own.window.data.end(),
            table.data.begin() + tokens * d);
  for (int64_t j = 0; j < compressedRows; ++j)
    std::copy(kvOwner.compressed[j].begin(), kvOwner.compressed[j].end(),
              table.row(tokens + window + j));
  std::vector<std::vector<int32_t>> rows(tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    int64_t i = positions[t];
    for (int64_t p = std::max<int64_t>(0, i - window + 1); p <= i; ++p)
      rows[t].push_back(
          static_cast<int32_t>(p >= start ? p - start : tokens + p % window));
    for (int32_t j : selected[t])
      if (j >= 0)
        rows[t].push_back(static_cast<int32_t>(tokens + window + j));
  }
  const Tensor &sink = w.get("attn_sink").values;
  Tensor o = sparseAttention(q, table, rows, sink.data, 1.0 / std::sqrt(d));

  // The window ring is written after it was read.
  for (int64_t t = 0; t < tokens; ++t)
    std::copy(kv.row(t), kv.row(t) + d, own.window.row(positions[t] % window));

  // 8-9. Inverse RoPE and the grouped output projection.
  o = rope(o, positions, ropeParams, /*inverse=*/true);
  return groupedOutput(o, w.get("wo_a.weight"), w.get("wo_b.weight"),
                       c.oGroups);
}

/// Normalizes, rotates and quantizes a pooled entry of group `group` and
/// appends it; V4.1 sparse layers also derive its index key.
void Model::appendCompressed(int64_t l, SequenceState &state, const Tensor &x,
                             const std::vector<int64_t> &positions) const {
  const ModelConfig &c = modelConfig;
  const LayerSpec &spec = layerSpecs[l];
  const LayerWeights &w = weights[l];
  LayerState &own = state.layers[l];
  int64_t r = spec.compressRatio, d = c.headDim;
  RopeParams ropeParams = ropeFor(spec);
  auto emit = [&](const std::vector<float> &pooled, int64_t group) {
    Tensor entry = oneRow(pooled);
    for (float &v : entry.data)
      v = num::roundBF16(v);
    Tensor latent =
        rmsNorm(entry, &w.get("compressor.norm.weight").values, c.rmsNormEps);
    std::vector<int64_t> at = {group * r};
    Tensor stored = actQuant(rope(latent, at, ropeParams), QuantFormat::E4M3,
                             64, d - c.qkRopeHeadDim);
    own.compressed.push_back(stored.data);
    if (spec.indexTopk > 0 && !hasIndexerCompressor(spec)) {
      Tensor key =
          rmsNorm(linear(latent, w.get("indexer.k_proj.weight")),
                  &w.get("indexer.k_norm.weight").values, c.rmsNormEps);
      key =
          actQuant(hadamard(rope(key, at, ropeParams)), QuantFormat::E2M1, 32);
      own.indexKeys.push_back(key.data);
    }
  };
  if (r == 1) {
    Tensor kv = linear(x, w.get("compressor.wkv.weight"));
    for (size_t t = 0; t < positions.size(); ++t)
      emit(std::vector<float>(kv.row(t), kv.row(t) + d), positions[t]);
    return;
  }
  const Tensor &ape = w.get("compressor.ape").values;
  if (!compressorIsGated(r)) {
    // One projection: the score half, then the latent half.
    Tensor both = linearF32(x, w.get("compressor.wkv.weight"));
    for (size_t t = 0; t < positions.size(); ++t)
      if (auto pooled = compressStep(own.compressor, both.row(t) + d,
                                     both.row(t), ape, positions[t], r, false))
        emit(*pooled, positions[t] / r);
    return;
  }
  Tensor kv = linearF32(x, w.get("compressor.wkv.weight"));
  Tensor score = linearF32(x, w.get("compressor.wgate.weight"));
  for (size_t t = 0; t < positions.size(); ++t)
    if (auto pooled = compressStep(own.compressor, kv.row(t), score.row(t), ape,
                                   positions[t], r, compressorOverlaps(r)))
      emit(*pooled, positions[t] / r);
}

void Model::appendIndexKeys(int64_t l, SequenceState &state, const Tensor &x,
                            const std::vector<int64_t> &positions) const {
  const ModelConfig &c = modelConfig;
  const LayerWeights &w = weights[l];
  LayerState &own = state.layers[l];
  RopeParams ropeParams = ropeFor(layerSpecs[l]);
  const Tensor &ape = w.get("indexer.compressor.ape").values;
  Tensor kv = linearF32(x, w.get("indexer.compressor.wkv.weight"));
  Tensor score = linearF32(x, w.get("indexer.compressor.wgate.weight"));
  for (size_t t = 0; t < positions.size(); ++t) {
    auto pooled = compressStep(own.indexCompressor, kv.row(t), score.row(t),
                               ape, positions[t], 4, true);
    if (!pooled)
      continue;
    Tensor entry = oneRow(*pooled);
    for (float &v : entry.data)
      v = num::roundBF16(v);
    Tensor key = rmsNorm(entry, &w.get("indexer.compressor.norm.weight").values,
                         c.rmsNormEps);
    std::vector<int64_t> at = {positions[t] / 4 * 4};
    key = actQuant(hadamard(rope(key, at, ropeParams)), QuantFormat::E2M1, 32);
    own.indexKeys.push_back(key.data);
  }
}

std::vector<std::vector<int32_t>>
Model::indexerSelection(int64_t l, SequenceState &state, const Tensor &x,
                        const Tensor &qr, const std::vector<int64_t> &positions,
                        StepShared &shared) const {
  const ModelConfig &c = modelConfig;
  const LayerSpec &spec = layerSpecs[l];
  if (spec.indexSource != l)
    return shared.topk.at(spec.indexSource);
  const LayerWeights &w = weights[l];
  int64_t tokens = x.dim(0), hi = c.indexNHeads, di = c.indexHeadDim;
  Tensor qi =
      reshape(linear(qr, w.get("indexer.wq_b.weight")), {tokens, hi, di});
  qi = actQuant(hadamard(rope(qi, positions, ropeFor(spec))), QuantFormat::E2M1,
                32);
  Tensor weightsOut = linear(x, w.get("indexer.weights_proj.weight"));
  float scale = static_cast<float>(1.0 / std::sqrt(double(di * hi)));
  for (float &v : weightsOut.data)
    v *= scale;
  Tensor keys = rowsToTensor(state.layers[spec.indexKSource].indexKeys, di);
  Tensor scores =
      indexerScores(qi, keys, weightsOut, positions, spec.compressRatio);
  std::vector<std::vector<int32_t>> result;
  int64_t candidate = spec.candidateSource;
  int64_t blockSize = c.candidateRows();
  if (candidate == l) {
    shared.candidates[l] = blockTopk(scores, blockSize, c.candidateBlocks());
    result = topk(scores, spec.indexTopk);
  } else if (candidate >= 0) {
    result = topkInBlocks(scores, spec.indexTopk,
                          shared.candidates.at(candidate), blockSize);
  } else {
    result = topk(scores, spec.indexTopk);
  }
  if (indexerObserver)
    indexerObserver(l, scores, result);
  shared.topk[l] = result;
  return result;
}

} // namespace v4a::ref
