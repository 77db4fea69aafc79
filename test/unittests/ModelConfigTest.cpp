//===- ModelConfigTest.cpp - config parsing and layer derivation ----------===//

#include "v4a/ModelConfig.h"

#include <gtest/gtest.h>

#include <string>

using namespace v4a;

namespace {

/// A complete small configuration; `extra` is spliced in before the end.
std::string tinyConfig(const std::string &ratios,
                       const std::string &extra = "") {
  return R"({"hidden_size": 64, "num_hidden_layers": 4,
    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
    "qk_rope_head_dim": 8, "q_lora_rank": 16, "o_lora_rank": 16,
    "o_groups": 2, "sliding_window": 8, "index_n_heads": 2,
    "index_head_dim": 16, "index_topk": 4, "rope_theta": 10000.0,
    "compress_rope_theta": 160000.0, "rms_norm_eps": 1e-6,
    "compress_ratios": )" +
         ratios + extra + "}";
}

std::vector<LayerSpec> derive(const std::string &json, ConfigError &error) {
  std::optional<ModelConfig> config = parseModelConfig(json, error);
  if (!config)
    return {};
  return deriveLayers(*config, {}, error).value_or(std::vector<LayerSpec>{});
}

TEST(ModelConfig, ParsesFieldsAndMtp) {
  ConfigError error;
  std::optional<ModelConfig> config =
      parseModelConfig(tinyConfig("[0, 4, 128, 4, 0]"), error);
  ASSERT_TRUE(config) << error.str();
  EXPECT_EQ(config->hiddenSize, 64);
  EXPECT_EQ(config->numLayers(), 5);
  EXPECT_EQ(config->numMtpLayers, 1);
  EXPECT_FALSE(config->fp8Weights);
}

TEST(ModelConfig, ErrorsNameTheField) {
  ConfigError error;
  EXPECT_FALSE(parseModelConfig(R"({"hidden_size": "big"})", error));
  EXPECT_EQ(error.field, "hidden_size");
  EXPECT_FALSE(parseModelConfig(tinyConfig("[0, 4]"), error));
  EXPECT_EQ(error.field, "compress_ratios");
  EXPECT_FALSE(parseModelConfig("{", error));
  EXPECT_NE(error.message.find("malformed JSON"), std::string::npos);
  EXPECT_FALSE(parseModelConfig(
      tinyConfig("[0, 4, 4, 4]", R"(, "rope_scaling": {"factor": 4})"), error));
  EXPECT_EQ(error.field, "rope_scaling.type");
  EXPECT_FALSE(parseModelConfig(
      tinyConfig("[0, 4, 4, 4]",
                 R"(, "rope_scaling": {"type": "yarn", "factor": 4})"),
      error));
  EXPECT_EQ(error.field, "rope_scaling.original_max_position_embeddings");
  EXPECT_FALSE(parseModelConfig(
      tinyConfig("[0, 4, 4, 4]", R"(, "hidden_size": 5)"), error));
  EXPECT_NE(error.message.find("duplicate key \"hidden_size\""),
            std::string::npos);
}

TEST(ModelConfig, IndependentLayersMapToThemselves) {
  ConfigError error;
  std::vector<LayerSpec> layers =
      derive(tinyConfig("[0, 4, 128, 4, 0]"), error);
  ASSERT_EQ(layers.size(), 5u) << error.str();
  for (const LayerSpec &layer : layers) {
    EXPECT_EQ(layer.kvSource, layer.id);
    EXPECT_EQ(layer.indexSource, layer.id);
  }
  EXPECT_EQ(layers[1].indexTopk, 4);
  EXPECT_EQ(layers[2].indexTopk, 0);
  EXPECT_TRUE(layers[4].isMtp);
}

TEST(ModelConfig, ConsumersMapToNearestSourceAtOrBefore) {
  ConfigError error;
  std::vector<LayerSpec> layers =
      derive(tinyConfig("[0, 2, 2, 1]", R"(, "kv_source_layer_ids": [1, 3],
                         "index_source_layer_ids": [1, 3])"),
             error);
  ASSERT_EQ(layers.size(), 4u) << error.str();
  EXPECT_EQ(layers[0].kvSource, 0);
  EXPECT_EQ(layers[2].kvSource, 1);
  EXPECT_EQ(layers[3].kvSource, 3);
  EXPECT_EQ(layers[2].indexSource, 1);
  EXPECT_EQ(layers[3].indexSource, 3);
  EXPECT_EQ(layers[2].indexKSource, layers[2].kvSource);
}

TEST(ModelConfig, ConsumerBeforeFirstSourceIsRejected) {
  ConfigError error;
  std::vector<LayerSpec> layers = derive(
      tinyConfig("[2, 2, 2, 2]", R"(, "kv_source_layer_ids": [1])"), error);
  EXPECT_TRUE(layers.empty());
  EXPECT_EQ(error.field, "kv_source_layer_ids");
  EXPECT_NE(error.message.find("layer 0"), std::string::npos);
}

TEST(ModelConfig, UnsortedSourcesAreRejected) {
  ConfigError error;
  derive(tinyConfig("[2, 2, 2, 2]", R"(, "kv_source_layer_ids": [2, 0])"),
         error);
  EXPECT_EQ(error.field, "kv_source_layer_ids");
  EXPECT_NE(error.message.find("sorted"), std::string::npos);
}

} // namespace
