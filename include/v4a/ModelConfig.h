//===- ModelConfig.h - a model's attention configuration --------*- C++ -*-===//
//
// The attention part of a HF-style config.json, and the per-layer view
// derived from it (ratios, top-k and the cross-layer sharing maps).
//
//===----------------------------------------------------------------------===//

#ifndef V4A_MODELCONFIG_H
#define V4A_MODELCONFIG_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace v4a {

/// A rejected configuration: the field at fault and what is wrong with it.
struct ConfigError {
  std::string field;
  std::string message;
  /// "field: message", the one-line form tools print.
  std::string str() const;
};

struct YarnConfig {
  double factor = 1.0;
  int64_t originalMaxPositionEmbeddings = 0;
  double betaFast = 32.0;
  double betaSlow = 1.0;
};

struct ModelConfig {
  int64_t hiddenSize = 0;
  int64_t numHiddenLayers = 0;
  int64_t numAttentionHeads = 0;
  int64_t numKeyValueHeads = 1;
  int64_t headDim = 0;
  int64_t qkRopeHeadDim = 0;
  int64_t qLoraRank = 0;
  int64_t oLoraRank = 0;
  int64_t oGroups = 0;
  int64_t slidingWindow = 0;
  int64_t indexNHeads = 0;
  int64_t indexHeadDim = 0;
  int64_t indexTopk = 0;
  double ropeTheta = 0;
  double compressRopeTheta = 0;
  double rmsNormEps = 0;
  std::optional<YarnConfig> ropeScaling;
  /// quantization_config present: e4m3 weights with 128x128 ue8m0 scales.
  bool fp8Weights = false;
  /// One ratio per attention layer, then one per MTP layer.
  std::vector<int64_t> compressRatios;
  int64_t numMtpLayers = 0;
  std::optional<std::vector<int64_t>> kvSourceLayerIds;
  std::optional<std::vector<int64_t>> indexSourceLayerIds;
  int64_t candidateSourceLayerId = -1;
  std::optional<int64_t> candidateTopkBlocks;
  std::optional<int64_t> candidateBlockSize;
  std::optional<int64_t> nPrefillLayer;

  int64_t numLayers() const {
    return static_cast<int64_t>(compressRatios.size());
  }
  /// V4.1's two-level selection: the candidate blocks a token keeps, and
  /// their rows, where the config leaves them out.
  int64_t candidateBlocks() const { return candidateTopkBlocks.value_or(8); }
  int64_t candidateRows() const { return candidateBlockSize.value_or(8); }
};

/// Parses config.json text. Fields are checked for presence and JSON type;
/// shape rules are checked by the IR verifiers after import.
std::optional<ModelConfig> parseModelConfig(std::string_view json,
                                            ConfigError &error);

/// Most ranks of tensor parallelism.
inline constexpr int64_t kMaxTensorParallel = 64;

/// The configuration each rank of `degree`-way tensor parallelism compiles:
/// `json` with num_attention_heads and o_groups divided by `degree`, so
/// that a rank holds whole output groups and their heads (key order and
/// values otherwise as parsed). Nothing, and `error` naming the field, its
/// value and the degree, when the degree does not divide them or lies
/// outside 1 .. kMaxTensorParallel.
std::optional<std::string>
tensorParallelConfig(std::string_view json, int64_t degree, std::string &error);

/// Warnings for top-level keys one or two edits from a key the parser
/// reads ("rope_scalling"): such a misspelling silently drops what it names.
/// Keys of other parts of a model (HF configs carry many) are never an
/// error; those one edit from an attention key but known elsewhere
/// (qk_nope_head_dim) are not warned about either.
std::vector<std::string> configWarnings(std::string_view json);

/// The per-layer view of a configuration, MTP layers last.
struct LayerSpec {
  int64_t id = 0;
  int64_t compressRatio = 0;
  int64_t indexTopk = 0;
  bool useSwa = true;
  bool hasPackedKv = false;
  bool isMtp = false;
  int64_t kvSource = 0;
  int64_t indexKSource = 0;
  int64_t indexSource = 0;
  int64_t candidateSource = -1;
};

struct LayerOptions {
  /// Compressed KV stored in the packed fp8 (MODEL1) layout.
  bool packedKv = false;
};

/// Whether a layer of this ratio selects compressed rows with the indexer
/// (ratios 4, and V4.1's 1 and 2) rather than attending to all of them.
bool ratioUsesIndexer(int64_t ratio);

/// Derives the layers and their sharing maps: every layer with a compressed
/// cache uses the nearest KV source at or before it, every sparse layer the
/// nearest index source at or before it; MTP layers never share.
std::optional<std::vector<LayerSpec>> deriveLayers(const ModelConfig &config,
                                                   const LayerOptions &options,
                                                   ConfigError &error);

} // namespace v4a

#endif // V4A_MODELCONFIG_H
