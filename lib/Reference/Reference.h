//===- Reference.h - the reference implementation of the spec ---*- C++ -*-===//
//
// Plain, readable C++ of every op of the attention block and of whole layers
// (prefill and decode, V4 and V4.1 parts), written from the specification.
// It is the oracle of the tests and of `v4a-run --check`; it is never used to
// produce results.
//
// Numerics: values are held in f32. Wherever the specification's tensors are
// bf16 (projection outputs, norms, RoPE, quantization simulation, attention
// output), results are rounded to bf16; accumulations are f32.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_LIB_REFERENCE_REFERENCE_H
#define V4A_LIB_REFERENCE_REFERENCE_H

#include "core/TensorSpecs.h"
#include "v4a/ModelConfig.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace v4a::ref {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;

  Tensor() = default;
  explicit Tensor(std::vector<int64_t> shape, float fill = 0.0f);
  int64_t numel() const;
  int64_t dim(int index) const {
    return shape[index < 0 ? shape.size() + index : index];
  }
  float *row(int64_t index) { return data.data() + index * dim(-1); }
  const float *row(int64_t index) const {
    return data.data() + index * dim(-1);
  }
};

/// A projection weight [out, in]: bf16 values, or e4m3 values with one ue8m0
/// scale per 128x128 block ([ceil(out/128), ceil(in/128)]).
struct Weight {
  Tensor values;
  Tensor scale; // empty for bf16
  bool isFP8() const { return !scale.data.empty(); }
};

//===----------------------------------------------------------------------===//
// Ops (spec section 2 and 3)
//===----------------------------------------------------------------------===//

/// x [T, in] @ w^T -> [T, out], rounded to bf16. fp8 weights quantize the
/// activation per 128-wide block (ue8m0 scales) first.
Tensor linear(const Tensor &x, const Weight &w);
/// Like linear with a bf16 weight, but the f32 result is kept (compressor).
Tensor linearF32(const Tensor &x, const Weight &w);

/// RMSNorm over the last dim, times `weight` when given; bf16 result.
Tensor rmsNorm(const Tensor &x, const Tensor *weight, double eps);

struct RopeParams {
  int64_t ropeDim = 0;
  double theta = 10000.0;
  std::optional<YarnConfig> yarn;
};
/// The frequencies f_i, i < ropeDim/2, with YaRN applied when configured.
std::vector<float> ropeFrequencies(const RopeParams &params);
/// Rotates the last ropeDim dims of every vector of row t (leading dim) by
/// positions[t]; conjugate rotation with `inverse`. bf16 result.
Tensor rope(const Tensor &x, const std::vector<int64_t> &positions,
            const RopeParams &params, bool inverse = false);

enum class QuantFormat { E4M3, E2M1 };
/// Simulated block quantization of the first quantDims (< 0: all) dims.
Tensor actQuant(const Tensor &x, QuantFormat format, int64_t block,
                int64_t quantDims = -1, bool pow2Scale = true);

/// Normalized Walsh-Hadamard transform of the last dim; bf16 result.
Tensor hadamard(const Tensor &x);

/// Pools each complete group of `ratio` tokens of a sequence starting at
/// position 0 (spec 3.5): kv, score [T, coff*D] f32, ape [ratio, coff*D].
Tensor compress(const Tensor &kv, const Tensor &score, const Tensor &ape,
                int64_t ratio, bool overlap);

/// Decode state of a compressor for one sequence: slots of kv and score for
/// the previous (with overlap) and the current group.
struct CompressorState {
  Tensor kv, score; // [coff * ratio, coff * D]
};
CompressorState makeCompressorState(int64_t ratio, bool overlap, int64_t width);
/// Feeds one token; returns the pooled entry [D] when `position` completes
/// its group.
std::optional<std::vector<float>>
compressStep(CompressorState &state, const float *kv, const float *score,
             const Tensor &ape, int64_t position, int64_t ratio, bool overlap);

/// score(i, j) = sum_h relu(q[i,h] . keys[j]) * weights[i,h], -inf for
/// j >= (positions[i] + 1) div ratio; the heads summed in the order
/// `v4a.indexer_score` documents.
Tensor indexerScores(const Tensor &q, const Tensor &keys, const Tensor &weights,
                     const std::vector<int64_t> &positions, int64_t ratio);
/// Up to k finite scores per row: score descending, then column ascending;
/// -1 pads.
std::vector<std::vector<int32_t>> topk(const Tensor &scores, int64_t k);
/// The best `numBlocks` blocks of `blockSize` columns (block score = max).
std::vector<std::vector<int32_t>>
blockTopk(const Tensor &scores, int64_t blockSize, int64_t numBlocks);
/// topk restricted to the columns of the given blocks.
std::vector<std::vector<int32_t>>
topkInBlocks(const Tensor &scores, int64_t k,
             const std::vector<std::vector<int32_t>> &blocks,
             int64_t blockSize);

/// Ring rows of the window of each query (oldest first), -1 padded to w.
std::vector<std::vector<int32_t>>
windowIndices(const std::vector<int64_t> &positions, int64_t window);

/// Attention with sink over rows of `kv` [N, D] selected per query row;
/// q [T, H, D]; bf16 result.
Tensor sparseAttention(const Tensor &q, const Tensor &kv,
                       const std::vector<std::vector<int32_t>> &indices,
                       const std::vector<float> &sink, double scale);

/// An fp8 weight times its block scales, exact in bf16; bf16 weights as
/// they are.
Weight dequantized(const Weight &w);
/// o [T, H, D] -> [T, dim] through wo_a (grouped, a bf16 GEMM: an fp8 wo_a is
/// dequantized, o is not quantized) and wo_b (bf16 or fp8 linear).
Tensor groupedOutput(const Tensor &o, const Weight &woA, const Weight &woB,
                     int64_t groups);

//===----------------------------------------------------------------------===//
// Whole layers
//===----------------------------------------------------------------------===//

/// The attention tensors of one layer, by checkpoint name without the
/// "layers.{i}.attn." prefix (e.g. "wq_a", "compressor.ape").
struct LayerWeights {
  std::map<std::string, Weight> tensors;
  const Weight &get(const std::string &name) const;
  bool has(const std::string &name) const { return tensors.count(name) != 0; }
};

/// Deterministic bf16-exact activations in [-1, 1] for tests and tools.
std::vector<float> randomActivations(int64_t count, uint64_t seed);

/// Deterministic random weights for every tensor of layerTensorSpecs; each
/// tensor depends only on the seed, the layer and its name.
LayerWeights randomLayerWeights(const ModelConfig &config,
                                const LayerSpec &layer, uint64_t seed);
/// One tensor of randomLayerWeights.
Weight randomWeight(const ModelConfig &config, const LayerSpec &layer,
                    const TensorSpec &spec, uint64_t seed);

/// What one sequence keeps between steps, per layer.
struct LayerState {
  Tensor window;                              // [w, D], row = position mod w
  std::vector<std::vector<float>> compressed; // rows [D]
  std::vector<std::vector<float>> indexKeys;  // rows [Di]
  CompressorState compressor, indexCompressor;
};

/// A sequence's state across all layers.
struct SequenceState {
  int64_t position = 0; // tokens processed so far
  std::vector<LayerState> layers;
};

/// Top-k and candidate blocks computed by source layers in the current step,
/// reused by their consumers.
struct StepShared {
  std::map<int64_t, std::vector<std::vector<int32_t>>> topk;
  std::map<int64_t, std::vector<std::vector<int32_t>>> candidates;
};

class Model {
public:
  Model(ModelConfig config, std::vector<LayerSpec> layers,
        std::vector<LayerWeights> weights);

  SequenceState newSequence() const;

  /// Runs the T tokens of `x[l]` ([T, dim], one input per layer) at the
  /// sequence's next positions through every layer (or the layers `runs`
  /// marks, whose sharing sources must be among them; the others give an
  /// empty y[l]); returns y[l] [T, dim]. Advances the state by T.
  std::vector<Tensor> step(SequenceState &state, const std::vector<Tensor> &x,
                           const std::vector<bool> &runs = {}) const;

  const ModelConfig &config() const { return modelConfig; }
  const std::vector<LayerSpec> &layers() const { return layerSpecs; }

  /// Called with every indexer selection a layer computes (its scores [T,
  /// rows] and picks, per token of the step), for tools that compare picks.
  using IndexerObserver =
      std::function<void(int64_t layer, const Tensor &scores,
                         const std::vector<std::vector<int32_t>> &picks)>;
  void observeIndexer(IndexerObserver observer) {
    indexerObserver = std::move(observer);
  }

private:
  Tensor runLayer(int64_t layer, SequenceState &state, const Tensor &x,
                  int64_t start, StepShared &shared) const;
  void appendCompressed(int64_t layer, SequenceState &state, const Tensor &x,
                        const std::vector<int64_t> &positions) const;
  void appendIndexKeys(int64_t layer, SequenceState &state, const Tensor &x,
                       const std::vector<int64_t> &positions) const;
  std::vector<std::vector<int32_t>>
  indexerSelection(int64_t layer, SequenceState &state, const Tensor &x,
                   const Tensor &qr, const std::vector<int64_t> &positions,
                   StepShared &shared) const;
  RopeParams ropeFor(const LayerSpec &layer) const;

  ModelConfig modelConfig;
  std::vector<LayerSpec> layerSpecs;
  std::vector<LayerWeights> weights;
  IndexerObserver indexerObserver;
};

} // namespace v4a::ref

#endif // V4A_LIB_REFERENCE_REFERENCE_H
