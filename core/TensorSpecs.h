//===- TensorSpecs.h - the checkpoint tensors of a layer --------*- C++ -*-===//

#ifndef V4A_CORE_TENSORSPECS_H
#define V4A_CORE_TENSORSPECS_H

#include "v4a/ModelConfig.h"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace v4a {

/// One attention tensor of a layer, named as in the checkpoint without the
/// "layers.{i}.attn." prefix.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  /// A projection: e4m3 with a ".scale" companion in an fp8 checkpoint.
  bool projection = false;
  /// Stored in f32 (ape, attn_sink); otherwise bf16.
  bool f32 = false;
};

/// A configuration size and the least value it may take; the most is
/// kMaxModelSize (any device's).
struct SizeField {
  const char *name;
  int64_t value, least;
};
inline constexpr int64_t kMaxModelSize = int64_t(1) << 20;
/// The first of `fields` outside its range ("o_groups is 0, outside [1,
/// 1048576]"), or "".
std::string sizeProblem(std::initializer_list<SizeField> fields);
/// That for the sizes the tensor shapes below are made of: what they assume
/// of a configuration that did not come through the compiler's checks (a
/// package altered since, a hand-made one).
std::string tensorSizeProblem(const ModelConfig &config);

/// The tensors layer `layer` reads (spec section 5, plus the V4.1 ones:
/// ratio-1 and ratio-2 compressors, and indexer.k_proj / k_norm where index
/// keys come from the main compressed KV). Consumer layers carry no
/// compressor or indexer of what they share.
std::vector<TensorSpec> layerTensorSpecs(const ModelConfig &config,
                                         const LayerSpec &layer);

/// Host bytes of every layer's tensors held as f32 (an upper bound for fp8
/// checkpoints), computed in floating point so absurd sizes cannot wrap.
double hostWeightBytes(const ModelConfig &config,
                       const std::vector<LayerSpec> &layers);

/// The block-scale companion of an fp8 projection: "x.weight" -> "x.scale".
inline std::string scaleTensorName(const std::string &weightName) {
  return weightName.substr(0, weightName.rfind(".weight")) + ".scale";
}

/// "layers.{i}.attn." or "mtp.{j}.attn." for the checkpoint names.
std::string layerTensorPrefix(const ModelConfig &config, int64_t layer);

/// Compressor shapes by ratio: V4 ratios >= 3 gate their tokens, ratio 4
/// overlaps groups; ratio 2 pools a split projection; ratio 1 keeps tokens.
inline bool compressorIsGated(int64_t ratio) { return ratio >= 3; }
inline bool compressorOverlaps(int64_t ratio) { return ratio == 4; }
/// V4 indexers have their own ratio-4 compressor; V4.1 sparse layers project
/// index keys from the main compressed KV.
inline bool hasIndexerCompressor(const LayerSpec &layer) {
  return layer.compressRatio == 4 && layer.indexTopk > 0;
}
/// Whether a layer picks its compressed rows with its own indexer top-k
/// rather than taking its index source's picks.
inline bool ownsTopk(const LayerSpec &layer) {
  return layer.compressRatio > 0 && layer.indexTopk > 0 &&
         layer.indexSource == layer.id;
}
/// Whether that top-k picks rows inside candidate blocks (V4.1's two-level
/// selection) that its candidate source chose.
inline bool usesCandidates(const LayerSpec &layer) {
  return ownsTopk(layer) && layer.candidateSource >= 0 &&
         layer.candidateSource != layer.id;
}

} // namespace v4a

#endif // V4A_CORE_TENSORSPECS_H
