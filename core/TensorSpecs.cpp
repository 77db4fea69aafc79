//===- TensorSpecs.cpp - the checkpoint tensors of a layer ----------------===//

#include "core/TensorSpecs.h"

namespace v4a {

std::string sizeProblem(std::initializer_list<SizeField> fields) {
  for (const SizeField &f : fields)
    if (f.value < f.least || f.value > kMaxModelSize)
      return std::string(f.name) + " is " + std::to_string(f.value) +
             ", outside [" + std::to_string(f.least) + ", " +
             std::to_string(kMaxModelSize) + "]";
  return "";
}

std::string tensorSizeProblem(const ModelConfig &c) {
  return sizeProblem({{"hidden_size", c.hiddenSize, 1},
                      {"num_attention_heads", c.numAttentionHeads, 1},
                      {"head_dim", c.headDim, 1},
                      {"q_lora_rank", c.qLoraRank, 1},
                      {"o_lora_rank", c.oLoraRank, 1},
                      {"o_groups", c.oGroups, 1},
                      {"index_n_heads", c.indexNHeads, 0},
                      {"index_head_dim", c.indexHeadDim, 0}});
}

std::vector<TensorSpec> layerTensorSpecs(const ModelConfig &c,
                                         const LayerSpec &layer) {
  int64_t d = c.headDim, h = c.numAttentionHeads, g = c.oGroups;
  int64_t di = c.indexHeadDim, hi = c.indexNHeads, r = layer.compressRatio;
  std::vector<TensorSpec> specs = {
      {"attn_sink", {h}, false, true},
      {"q_norm.weight", {c.qLoraRank}},
      {"kv_norm.weight", {d}},
      {"wq_a.weight", {c.qLoraRank, c.hiddenSize}, true},
      {"wq_b.weight", {h * d, c.qLoraRank}, true},
      {"wkv.weight", {d, c.hiddenSize}, true},
      {"wo_a.weight", {g * c.oLoraRank, h * d / g}, true},
      {"wo_b.weight", {c.hiddenSize, g * c.oLoraRank}, true},
  };
  if (r > 0 && layer.kvSource == layer.id) {
    int64_t coff = compressorOverlaps(r) ? 2 : 1;
    if (r == 1) {
      specs.push_back({"compressor.wkv.weight", {d, c.hiddenSize}});
    } else if (!compressorIsGated(r)) {
      specs.push_back({"compressor.wkv.weight", {2 * d, c.hiddenSize}});
      specs.push_back({"compressor.ape", {r, d}, false, true});
    } else {
      specs.push_back({"compressor.ape", {r, coff * d}, false, true});
      specs.push_back({"compressor.wkv.weight", {coff * d, c.hiddenSize}});
      specs.push_back({"compressor.wgate.weight", {coff * d, c.hiddenSize}});
    }
    specs.push_back({"compressor.norm.weight", {d}});
    if (layer.indexTopk > 0 && !hasIndexerCompressor(layer)) {
      specs.push_back({"indexer.k_proj.weight", {di, d}});
      specs.push_back({"indexer.k_norm.weight", {di}});
    }
  }
  if (layer.indexTopk > 0 && layer.indexSource == layer.id) {
    specs.push_back({"indexer.wq_b.weight", {hi * di, c.qLoraRank}, true});
    specs.push_back({"indexer.weights_proj.weight", {hi, c.hiddenSize}});
  }
  if (hasIndexerCompressor(layer) && layer.indexKSource == layer.id) {
    specs.push_back({"indexer.compressor.ape", {4, 2 * di}, false, true});
    specs.push_back({"indexer.compressor.wkv.weight", {2 * di, c.hiddenSize}});
    specs.push_back(
        {"indexer.compressor.wgate.weight", {2 * di, c.hiddenSize}});
    specs.push_back({"indexer.compressor.norm.weight", {di}});
  }
  return specs;
}

double hostWeightBytes(const ModelConfig &config,
                       const std::vector<LayerSpec> &layers) {
  double bytes = 0.0;
  for (const LayerSpec &layer : layers)
    for (const TensorSpec &spec : layerTensorSpecs(config, layer)) {
      double numel = 4.0;
      for (int64_t d : spec.shape)
        numel *= static_cast<double>(d);
      bytes += numel;
    }
  return bytes;
}

std::string layerTensorPrefix(const ModelConfig &config, int64_t layer) {
  if (layer < config.numHiddenLayers)
    return "layers." + std::to_string(layer) + ".attn.";
  return "mtp." + std::to_string(layer - config.numHiddenLayers) + ".attn.";
}

} // namespace v4a
