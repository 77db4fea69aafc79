//===- ModelConfig.cpp - config.json parsing and layer derivation ---------===//

#include "v4a/ModelConfig.h"

#include "lib/Config/JsonCheck.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cstdio>

using namespace v4a;
using llvm::json::Object;
using llvm::json::Value;

std::string ConfigError::str() const {
  return field.empty() ? message : field + ": " + message;
}

/// A number as the config would spell it: 1e-06, -1, 10000.5.
static std::string formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

namespace {

/// Reads typed fields of one JSON object and records the first error.
class FieldReader {
public:
  FieldReader(const Object &object, std::string prefix, ConfigError &error)
      : object(object), prefix(std::move(prefix)), error(error) {}

  bool failed() const { return !error.message.empty(); }

  void fail(llvm::StringRef key, std::string message) {
    if (failed())
      return;
    error.field = prefix + key.str();
    error.message = std::move(message);
  }

  const Value *find(llvm::StringRef key, bool required) {
    const Value *value = object.get(key);
    if ((!value || value->kind() == Value::Null) && required)
      fail(key, "missing required field");
    if (value && value->kind() == Value::Null)
      return nullptr;
    return value;
  }

  void readInt(llvm::StringRef key, int64_t &out, bool required = true) {
    const Value *value = find(key, required);
    if (!value)
      return;
    if (std::optional<int64_t> number = value->getAsInteger())
      out = *number;
    else
      fail(key, "expected an integer, got " + describeNonInteger(*value));
  }

  void readOptionalInt(llvm::StringRef key, std::optional<int64_t> &out) {
    int64_t number = 0;
    if (!find(key, /*required=*/false))
      return;
    readInt(key, number);
    if (!failed())
      out = number;
  }

  void readNumber(llvm::StringRef key, double &out, bool required = true) {
    const Value *value = find(key, required);
    if (!value)
      return;
    if (std::optional<double> number = value->getAsNumber())
      out = *number;
    else
      fail(key, "expected a number, got " + describe(*value));
  }

  void readIntList(llvm::StringRef key, std::vector<int64_t> &out,
                   bool required = true) {
    const Value *value = find(key, required);
    if (!value)
      return;
    const llvm::json::Array *array = value->getAsArray();
    if (!array) {
      fail(key, "expected a list of integers, got " + describe(*value));
      return;
    }
    out.clear();
    for (auto [index, element] : llvm::enumerate(*array)) {
      std::optional<int64_t> number = element.getAsInteger();
      if (!number) {
        fail(key, llvm::formatv("entry {0}: expected an integer, got {1}",
                                index, describeNonInteger(element))
                      .str());
        return;
      }
      out.push_back(*number);
    }
  }

  const Object *readObject(llvm::StringRef key) {
    const Value *value = find(key, /*required=*/false);
    if (!value)
      return nullptr;
    if (const Object *nested = value->getAsObject())
      return nested;
    fail(key, "expected an object, got " + describe(*value));
    return nullptr;
  }

private:
  /// Describes a value that failed to read as an integer.
  static std::string describeNonInteger(const Value &value) {
    return value.kind() == Value::Number ? "a non-integer number"
                                         : describe(value);
  }

  static std::string describe(const Value &value) {
    switch (value.kind()) {
    case Value::Null:
      return "null";
    case Value::Boolean:
      return "a boolean";
    case Value::Number:
      return "a number";
    case Value::String:
      return "a string";
    case Value::Array:
      return "a list";
    case Value::Object:
      return "an object";
    }
    return "an unknown value";
  }

  const Object &object;
  std::string prefix;
  ConfigError &error;
};

} // namespace

static void readRopeScaling(FieldReader &reader, ModelConfig &config,
                            ConfigError &error) {
  const Object *scaling = reader.readObject("rope_scaling");
  if (!scaling)
    return;
  FieldReader nested(*scaling, "rope_scaling.", error);
  // HF spells the kind "type" or "rope_type"; only YaRN exists in V4.
  llvm::StringRef kindKey = scaling->get("type") ? "type" : "rope_type";
  const Value *kind = nested.find(kindKey, /*required=*/false);
  std::optional<llvm::StringRef> kindName =
      kind ? kind->getAsString() : std::nullopt;
  if (!kind)
    return nested.fail("type", "missing (expected \"yarn\", the only "
                               "rope scaling V4 uses)");
  if (!kindName || *kindName != "yarn")
    return nested.fail(
        kindKey, (kindName ? "\"" + kindName->str() + "\"" : "a non-string") +
                     " is not supported (expected \"yarn\")");
  YarnConfig yarn;
  nested.readNumber("factor", yarn.factor);
  if (!nested.failed() && !scaling->get("original_max_position_embeddings"))
    return nested.fail("original_max_position_embeddings",
                       "missing: YaRN needs factor and "
                       "original_max_position_embeddings (beta_fast and "
                       "beta_slow default to 32 and 1)");
  nested.readInt("original_max_position_embeddings",
                 yarn.originalMaxPositionEmbeddings);
  nested.readNumber("beta_fast", yarn.betaFast, /*required=*/false);
  nested.readNumber("beta_slow", yarn.betaSlow, /*required=*/false);
  if (nested.failed())
    return;
  if (!(yarn.factor >= 1.0 && yarn.factor <= 1e6))
    return nested.fail("factor",
                       formatNumber(yarn.factor) + " is outside [1, 1e6]");
  if (yarn.originalMaxPositionEmbeddings <= 0 ||
      yarn.originalMaxPositionEmbeddings > (int64_t(1) << 40))
    return nested.fail("original_max_position_embeddings",
                       llvm::formatv("{0} is outside [1, 2^40]",
                                     yarn.originalMaxPositionEmbeddings)
                           .str());
  for (auto [key, beta] :
       {std::pair<llvm::StringRef, double>{"beta_fast", yarn.betaFast},
        {"beta_slow", yarn.betaSlow}})
    if (!(beta > 0.0 && beta <= 1e6))
      return nested.fail(key, formatNumber(beta) + " is outside (0, 1e6]");
  config.ropeScaling = yarn;
}

/// The only supported checkpoint quantization is e4m3 with 128x128 blocks.
static void readQuantization(FieldReader &reader, ModelConfig &config,
                             ConfigError &error) {
  const Object *quant = reader.readObject("quantization_config");
  if (!quant)
    return;
  config.fp8Weights = true;
  FieldReader nested(*quant, "quantization_config.", error);
  if (const Value *fmt = nested.find("fmt", /*required=*/false)) {
    std::optional<llvm::StringRef> name = fmt->getAsString();
    if (!name || *name != "e4m3")
      nested.fail("fmt", "expected \"e4m3\" (the only supported weight "
                         "format)");
  }
  std::vector<int64_t> block{128, 128};
  nested.readIntList("weight_block_size", block, /*required=*/false);
  if (!nested.failed() && block != std::vector<int64_t>{128, 128})
    nested.fail("weight_block_size", "expected [128, 128]");
}

namespace {
/// The largest value a size field may take: far beyond published models, and
/// small enough that no product of them overflows a 64-bit byte count.
struct SizeLimit {
  const char *field;
  int64_t ModelConfig::*member;
  int64_t max;
};
} // namespace

static const SizeLimit kSizeLimits[] = {
    {"hidden_size", &ModelConfig::hiddenSize, 65536},
    {"num_hidden_layers", &ModelConfig::numHiddenLayers, 1024},
    {"num_attention_heads", &ModelConfig::numAttentionHeads, 1024},
    {"head_dim", &ModelConfig::headDim, 4096},
    {"qk_rope_head_dim", &ModelConfig::qkRopeHeadDim, 4096},
    {"q_lora_rank", &ModelConfig::qLoraRank, 65536},
    {"o_lora_rank", &ModelConfig::oLoraRank, 65536},
    {"o_groups", &ModelConfig::oGroups, 1024},
    {"sliding_window", &ModelConfig::slidingWindow, int64_t(1) << 30},
    {"index_n_heads", &ModelConfig::indexNHeads, 1024},
    {"index_head_dim", &ModelConfig::indexHeadDim, 4096},
    {"index_topk", &ModelConfig::indexTopk, 1 << 20},
};

/// Sizes are positive (index_topk may be 0) and within kSizeLimits; thetas
/// and eps are finite and positive. Rules between fields are the IR's.
static void checkSizeLimits(FieldReader &reader, const ModelConfig &config) {
  for (const SizeLimit &limit : kSizeLimits) {
    int64_t value = config.*limit.member;
    int64_t min = limit.member == &ModelConfig::indexTopk ? 0 : 1;
    if (value < min || value > limit.max)
      return reader.fail(limit.field, llvm::formatv("{0} is outside [{1}, {2}]",
                                                    value, min, limit.max)
                                          .str());
  }
  for (auto [field, value] :
       {std::pair<const char *, double>{"rope_theta", config.ropeTheta},
        {"compress_rope_theta", config.compressRopeTheta},
        {"rms_norm_eps", config.rmsNormEps}})
    if (!(value > 0.0 && value < 1e30))
      return reader.fail(field,
                         formatNumber(value) + " must be positive and finite");
}

/// MTP layers after the attention layers (V4 ships one).
constexpr int64_t kMaxMtpLayers = 16;

static void readLayerCounts(FieldReader &reader, ModelConfig &config) {
  reader.readIntList("compress_ratios", config.compressRatios);
  if (reader.failed())
    return;
  int64_t numRatios = config.numLayers();
  std::optional<int64_t> numMtp;
  reader.readOptionalInt("num_nextn_predict_layers", numMtp);
  if (reader.failed())
    return;
  int64_t attention = config.numHiddenLayers;
  if (numMtp) {
    if (*numMtp < 0 || *numMtp > kMaxMtpLayers)
      return reader.fail(
          "num_nextn_predict_layers",
          llvm::formatv("{0} is outside [0, {1}]", *numMtp, kMaxMtpLayers)
              .str());
    if (numRatios != attention + *numMtp)
      return reader.fail(
          "compress_ratios",
          llvm::formatv("has {0} entries, expected num_hidden_layers + "
                        "num_nextn_predict_layers ({1})",
                        numRatios, attention + *numMtp)
              .str());
    config.numMtpLayers = *numMtp;
  } else if (numRatios == attention || numRatios == attention + 1) {
    config.numMtpLayers = numRatios - attention;
  } else {
    return reader.fail(
        "compress_ratios",
        llvm::formatv("has {0} entries, expected num_hidden_layers ({1}) or "
                      "one more for the MTP layer ({2})",
                      numRatios, attention, attention + 1)
            .str());
  }
  for (auto [layer, ratio] : llvm::enumerate(config.compressRatios))
    if (ratio < 0 || ratio > 65536)
      return reader.fail("compress_ratios",
                         llvm::formatv("entry {0}: ratio {1} is outside [0, "
                                       "65536] (0 = no compression)",
                                       layer, ratio)
                             .str());
}

std::optional<ModelConfig> v4a::parseModelConfig(std::string_view json,
                                                 ConfigError &error) {
  error = ConfigError();
  std::string structure;
  if (!checkJsonStructure(json, structure)) {
    error.message = "malformed JSON: " + structure;
    return std::nullopt;
  }
  llvm::Expected<Value> parsed =
      llvm::json::parse(llvm::StringRef(json.data(), json.size()));
  if (!parsed) {
    error.message = "malformed JSON: " + llvm::toString(parsed.takeError());
    return std::nullopt;
  }
  const Object *root = parsed->getAsObject();
  if (!root) {
    error.message = "expected a JSON object at the top level";
    return std::nullopt;
  }
  ModelConfig config;
  FieldReader reader(*root, "", error);
  if (const Value *type = root->get("model_type")) {
    std::optional<llvm::StringRef> name = type->getAsString();
    if (!name || *name != "deepseek_v4")
      reader.fail(
          "model_type",
          (name ? "\"" + name->str() + "\"" : std::string("a non-string")) +
              " is not a DeepSeek-V4 attention model (expected "
              "\"deepseek_v4\")");
  }
  reader.readInt("hidden_size", config.hiddenSize);
  reader.readInt("num_hidden_layers", config.numHiddenLayers);
  reader.readInt("num_attention_heads", config.numAttentionHeads);
  reader.readInt("num_key_value_heads", config.numKeyValueHeads,
                 /*required=*/false);
  reader.readInt("head_dim", config.headDim);
  reader.readInt("qk_rope_head_dim", config.qkRopeHeadDim);
  reader.readInt("q_lora_rank", config.qLoraRank);
  reader.readInt("o_lora_rank", config.oLoraRank);
  reader.readInt("o_groups", config.oGroups);
  reader.readInt("sliding_window", config.slidingWindow);
  reader.readInt("index_n_heads", config.indexNHeads);
  reader.readInt("index_head_dim", config.indexHeadDim);
  reader.readInt("index_topk", config.indexTopk);
  reader.readNumber("rope_theta", config.ropeTheta);
  reader.readNumber("compress_rope_theta", config.compressRopeTheta);
  reader.readNumber("rms_norm_eps", config.rmsNormEps);
  readRopeScaling(reader, config, error);
  readQuantization(reader, config, error);
  if (!reader.failed() && config.numHiddenLayers <= 0)
    reader.fail("num_hidden_layers",
                "must be positive, got " +
                    std::to_string(config.numHiddenLayers));
  if (!reader.failed())
    checkSizeLimits(reader, config);
  if (!reader.failed())
    readLayerCounts(reader, config);
  if (reader.find("kv_source_layer_ids", /*required=*/false)) {
    config.kvSourceLayerIds.emplace();
    reader.readIntList("kv_source_layer_ids", *config.kvSourceLayerIds);
  }
  if (reader.find("index_source_layer_ids", /*required=*/false)) {
    config.indexSourceLayerIds.emplace();
    reader.readIntList("index_source_layer_ids", *config.indexSourceLayerIds);
  }
  reader.readInt("candidate_source_layer_id", config.candidateSourceLayerId,
                 /*required=*/false);
  reader.readOptionalInt("candidate_topk_blocks", config.candidateTopkBlocks);
  reader.readOptionalInt("candidate_block_size", config.candidateBlockSize);
  reader.readOptionalInt("n_prefill_layer", config.nPrefillLayer);
  if (reader.failed())
    return std::nullopt;
  return config;
}

//===----------------------------------------------------------------------===//
// Layer derivation
//===----------------------------------------------------------------------===//

// V4 gives an indexer to ratio-4 layers only (every other ratio attends to
// all of its compressed rows); V4.1 adds indexed C1 and C2 layers.
bool v4a::ratioUsesIndexer(int64_t ratio) {
  return ratio == 1 || ratio == 2 || ratio == 4;
}

/// Source lists name attention layers, sorted and without repeats.
static bool checkSourceList(llvm::StringRef field,
                            const std::vector<int64_t> &ids,
                            int64_t numAttentionLayers, ConfigError &error) {
  for (auto [index, id] : llvm::enumerate(ids)) {
    std::string problem;
    if (id < 0 || id >= numAttentionLayers)
      problem = llvm::formatv("layer {0} is not an attention layer (valid: "
                              "0..{1}; MTP layers never share)",
                              id, numAttentionLayers - 1);
    else if (index > 0 && ids[index - 1] >= id)
      problem = llvm::formatv("must be sorted and unique, but {0} follows {1}",
                              id, ids[index - 1]);
    if (!problem.empty()) {
      error = {field.str(), problem};
      return false;
    }
  }
  return true;
}

/// The nearest source at or before `layer`, or -1.
static int64_t nearestSourceAtOrBefore(const std::vector<int64_t> &sources,
                                       int64_t layer) {
  auto it = std::upper_bound(sources.begin(), sources.end(), layer);
  return it == sources.begin() ? -1 : *std::prev(it);
}

/// Maps each layer that `needsSource` to its nearest source; others (and all
/// layers when no list is given) map to themselves.
static bool mapToSources(llvm::StringRef field,
                         const std::optional<std::vector<int64_t>> &sources,
                         std::vector<LayerSpec> &layers,
                         bool (*needsSource)(const LayerSpec &),
                         int64_t LayerSpec::*target, ConfigError &error) {
  for (LayerSpec &layer : layers) {
    layer.*target = layer.id;
    if (!sources || layer.isMtp || !needsSource(layer))
      continue;
    int64_t source = nearestSourceAtOrBefore(*sources, layer.id);
    if (source < 0) {
      error = {field.str(),
               llvm::formatv("layer {0} (compress ratio {1}) comes before the "
                             "first source ({2}) and has nothing to share",
                             layer.id, layer.compressRatio,
                             sources->empty()
                                 ? std::string("none")
                                 : std::to_string(sources->front()))
                   .str()};
      return false;
    }
    layer.*target = source;
  }
  return true;
}

std::optional<std::vector<LayerSpec>>
v4a::deriveLayers(const ModelConfig &config, const LayerOptions &options,
                  ConfigError &error) {
  int64_t numAttention = config.numHiddenLayers;
  std::vector<LayerSpec> layers;
  for (auto [id, ratio] : llvm::enumerate(config.compressRatios)) {
    LayerSpec layer;
    layer.id = id;
    layer.compressRatio = ratio;
    layer.indexTopk = ratioUsesIndexer(ratio) ? config.indexTopk : 0;
    layer.hasPackedKv = options.packedKv && ratio > 0;
    layer.isMtp = static_cast<int64_t>(id) >= numAttention;
    layers.push_back(layer);
  }
  for (auto [field, list] :
       {std::pair<llvm::StringRef, const std::optional<std::vector<int64_t>> *>{
            "kv_source_layer_ids", &config.kvSourceLayerIds},
        {"index_source_layer_ids", &config.indexSourceLayerIds}})
    if (*list && !checkSourceList(field, **list, numAttention, error))
      return std::nullopt;
  if (!mapToSources(
          "kv_source_layer_ids", config.kvSourceLayerIds, layers,
          [](const LayerSpec &l) { return l.compressRatio > 0; },
          &LayerSpec::kvSource, error) ||
      !mapToSources(
          "index_source_layer_ids", config.indexSourceLayerIds, layers,
          [](const LayerSpec &l) { return l.indexTopk > 0; },
          &LayerSpec::indexSource, error))
    return std::nullopt;
  for (LayerSpec &layer : layers)
    layer.indexKSource = layer.kvSource;

  int64_t candidate = config.candidateSourceLayerId;
  if (candidate >= numAttention || candidate < -1) {
    error = {"candidate_source_layer_id",
             llvm::formatv("layer {0} is not an attention layer (valid: -1 "
                           "for none, or 0..{1})",
                           candidate, numAttention - 1)
                 .str()};
    return std::nullopt;
  }
  if (candidate >= 0) {
    // The candidate source restricts the sparse layers after it, up to the
    // YoCo boundary when it lies after the source.
    int64_t end = numAttention;
    if (config.nPrefillLayer && *config.nPrefillLayer > candidate)
      end = std::min(end, *config.nPrefillLayer);
    for (LayerSpec &layer : layers)
      if (layer.id == candidate ||
          (layer.id > candidate && layer.id < end && layer.indexTopk > 0))
        layer.candidateSource = candidate;
  }
  return layers;
}

std::vector<std::string> v4a::configWarnings(std::string_view json) {
  // The top-level keys the parser reads.
  static const char *const known[] = {"candidate_block_size",
                                      "candidate_source_layer_id",
                                      "candidate_topk_blocks",
                                      "compress_ratios",
                                      "compress_rope_theta",
                                      "head_dim",
                                      "hidden_size",
                                      "index_head_dim",
                                      "index_n_heads",
                                      "index_source_layer_ids",
                                      "index_topk",
                                      "kv_source_layer_ids",
                                      "model_type",
                                      "n_prefill_layer",
                                      "num_attention_heads",
                                      "num_hidden_layers",
                                      "num_key_value_heads",
                                      "num_nextn_predict_layers",
                                      "o_groups",
                                      "o_lora_rank",
                                      "q_lora_rank",
                                      "qk_rope_head_dim",
                                      "quantization_config",
                                      "rms_norm_eps",
                                      "rope_scaling",
                                      "rope_theta",
                                      "sliding_window"};
  // Keys of DeepSeek checkpoints' configs that are other parts' and happen
  // to be near an attention key.
  static const char *const foreign[] = {"qk_nope_head_dim", "v_head_dim",
                                        "kv_lora_rank",     "n_group",
                                        "topk_group",       "num_experts"};
  std::vector<std::string> warnings;
  // Only JSON the parser takes (its depth bounded: no stack overflow).
  std::string structure;
  if (!checkJsonStructure(json, structure))
    return warnings;
  llvm::Expected<Value> parsed =
      llvm::json::parse(llvm::StringRef(json.data(), json.size()));
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
    return warnings;
  }
  const Object *root = parsed->getAsObject();
  if (!root)
    return warnings;
  std::vector<std::string> keys;
  for (const auto &entry : *root)
    keys.push_back(entry.first.str());
  // The object's order is a hash's: sorted, the warnings are deterministic.
  std::sort(keys.begin(), keys.end());
  for (const std::string &key : keys) {
    llvm::StringRef name(key);
    if (llvm::is_contained(known, name) || llvm::is_contained(foreign, name))
      continue;
    llvm::StringRef best;
    unsigned distance = 3;
    for (llvm::StringRef candidate : known) {
      unsigned d = name.edit_distance(candidate, true, distance);
      if (d < distance) {
        distance = d;
        best = candidate;
      }
    }
    if (!best.empty() && distance < std::min<size_t>(3, best.size() / 4 + 1))
      warnings.push_back("'" + key +
                         "' is not a key v4a reads (ignored); did you mean '" +
                         best.str() + "'?");
  }
  return warnings;
}

std::optional<std::string> v4a::tensorParallelConfig(std::string_view json,
                                                     int64_t degree,
                                                     std::string &error) {
  if (degree < 1 || degree > kMaxTensorParallel) {
    error = llvm::formatv("the tensor-parallel degree {0} is outside 1 .. {1}",
                          degree, kMaxTensorParallel)
                .str();
    return std::nullopt;
  }
  ConfigError configError;
  std::optional<ModelConfig> config = parseModelConfig(json, configError);
  if (!config) {
    error = configError.str();
    return std::nullopt;
  }
  for (auto [name, value] :
       {std::pair{"num_attention_heads", config->numAttentionHeads},
        std::pair{"o_groups", config->oGroups}})
    if (value % degree != 0) {
      error = llvm::formatv("{0} = {1} is not divisible by the "
                            "tensor-parallel degree {2}",
                            name, value, degree)
                  .str();
      return std::nullopt;
    }
  // fp8 checkpoints keep a scale per 128 x 128 block: a rank's rows of wq_b
  // and wo_a (and columns of wo_b) must be whole blocks.
  int64_t headRows = config->numAttentionHeads / degree * config->headDim;
  int64_t groupRows = config->oGroups / degree * config->oLoraRank;
  if (config->fp8Weights && (headRows % 128 != 0 || groupRows % 128 != 0)) {
    error = llvm::formatv("a rank's {0} rows of wq_b and {1} of wo_a are not "
                          "whole 128-row blocks of the fp8 checkpoint's "
                          "scales at tensor-parallel degree {2}",
                          headRows, groupRows, degree)
                .str();
    return std::nullopt;
  }
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse(llvm::StringRef(json.data(), json.size()));
  if (!parsed) {
    error = llvm::toString(parsed.takeError());
    return std::nullopt;
  }
  llvm::json::Object &object = *parsed->getAsObject();
  object["num_attention_heads"] = config->numAttentionHeads / degree;
  object["o_groups"] = config->oGroups / degree;
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", *parsed);
  return text;
}
