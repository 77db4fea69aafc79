//===- EngineTest.cpp - compiled layers against the reference -------------===//
//
// The JIT API on the tiny configurations: compiled kernels driven by the
// runtime's CPU backend must reproduce the reference layer by layer, agree
// between prefill and decode at the spec's boundaries, treat each sequence
// of a varlen batch as if alone, and read shared caches through aliases.
//
//===----------------------------------------------------------------------===//

#include "v4a/Engine.h"
#include "core/KVPlan.h"
#include "core/Numerics.h"
#include "lib/Reference/Reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace v4a;

namespace {

std::string readExample(const std::string &name) {
  std::ifstream file(std::string(V4A_SOURCE_DIR) + "/examples/" + name);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

/// Replaces the integer value of a top-level field.
std::string setField(std::string json, const std::string &key, int64_t value) {
  std::string label = "\"" + key + "\": ";
  size_t at = json.find(label);
  EXPECT_NE(at, std::string::npos) << key;
  if (at == std::string::npos)
    return json;
  size_t begin = at + label.size();
  size_t end = json.find_first_not_of("0123456789", begin);
  return json.replace(begin, end - begin, std::to_string(value));
}

/// The same configuration with fp8 (e4m3, 128x128 ue8m0) projections.
std::string withFp8(std::string json) {
  size_t brace = json.rfind('}');
  return json.substr(0, brace) +
         ", \"quantization_config\": {\"fmt\": \"e4m3\", "
         "\"weight_block_size\": [128, 128]}}";
}

struct Fixture {
  std::unique_ptr<Engine> engine;
  ref::Model reference;
};

Fixture make(const std::string &json, uint64_t seed,
             EngineOptions options = {}) {
  std::string error;
  auto engine = Engine::create(json, options, error);
  EXPECT_TRUE(engine) << error;
  if (!engine)
    return {nullptr, ref::Model({}, {}, {})};
  EXPECT_TRUE(engine->loadRandomWeights(seed, error)) << error;
  std::vector<ref::LayerWeights> weights;
  for (const LayerSpec &layer : engine->layers())
    weights.push_back(ref::randomLayerWeights(engine->config(), layer, seed));
  ref::Model reference(engine->config(), engine->layers(), std::move(weights));
  return {std::move(engine), std::move(reference)};
}

/// Runs one sequence through both for `steps` (token counts), comparing
/// every layer's output; returns the largest difference.
float compareWithReference(Fixture &f, const std::vector<int64_t> &steps) {
  std::string error;
  int64_t sequence = f.engine->addSequence(error);
  EXPECT_GE(sequence, 0) << error;
  ref::SequenceState state = f.reference.newSequence();
  int64_t dim = f.engine->config().hiddenSize;
  size_t layers = f.engine->layers().size();
  float worst = 0.0f;
  for (size_t k = 0; k < steps.size(); ++k) {
    int64_t tokens = steps[k];
    std::vector<std::vector<float>> in(layers), out(layers);
    std::vector<ref::Tensor> refIn;
    std::vector<const float *> inputs;
    std::vector<float *> outputs;
    for (size_t l = 0; l < layers; ++l) {
      in[l] = ref::randomActivations(tokens * dim, 100 * l + k);
      out[l].assign(tokens * dim, NAN);
      inputs.push_back(in[l].data());
      outputs.push_back(out[l].data());
      ref::Tensor t({tokens, dim});
      t.data = in[l];
      refIn.push_back(t);
    }
    EXPECT_TRUE(
        f.engine->step({{sequence}, {tokens}, tokens}, inputs, outputs, error))
        << error;
    std::vector<ref::Tensor> expected = f.reference.step(state, refIn);
    for (size_t l = 0; l < layers; ++l)
      for (int64_t i = 0; i < tokens * dim; ++i) {
        float diff = std::fabs(out[l][i] - expected[l].data[i]);
        if (!(diff <= worst)) // NaN counts as the worst
          worst = std::isnan(diff) ? INFINITY : diff;
      }
  }
  EXPECT_TRUE(f.engine->releaseSequence(sequence, error)) << error;
  return worst;
}

// Compiled kernels repeat the reference's f32 operations in the same order,
// so the tolerance is zero: any difference is a bug.
constexpr float kTolerance = 0.0f;

// The public options spell the planner's default index layout.
TEST(Engine, DefaultIndexLayoutIsThePlannersDefault) {
  EXPECT_EQ(EngineOptions().indexLayout,
            plan::indexLayoutName(plan::kDefaultIndexLayout));
}

TEST(Engine, V4LayersMatchReference) {
  Fixture f = make(readExample("tiny.json"), 3);
  ASSERT_TRUE(f.engine);
  // Prefill of 21 (past w, r = 4 and the first (i+1) div 4 > K), then decode
  // across r = 128.
  EXPECT_LE(compareWithReference(f, {21, 1, 1}), kTolerance);
  EXPECT_LE(compareWithReference(f, {127, 1, 1, 2}), kTolerance);
}

TEST(Engine, V41LayersMatchReference) {
  Fixture f = make(readExample("tiny-v41.json"), 5);
  ASSERT_TRUE(f.engine);
  EXPECT_LE(compareWithReference(f, {9, 1, 1, 30, 1}), kTolerance);
}

TEST(Engine, FP8WeightsMatchReference) {
  Fixture f = make(withFp8(readExample("tiny.json")), 9);
  ASSERT_TRUE(f.engine);
  EXPECT_LE(compareWithReference(f, {10, 1}), kTolerance);
}

TEST(Engine, PackedFP8CacheMatchesReference) {
  // MODEL1 stores 64 bf16 rope dims after a multiple of 64 e4m3 dims.
  std::string json = readExample("tiny.json");
  json = setField(json, "head_dim", 128);
  json = setField(json, "qk_rope_head_dim", 64);
  json = setField(json, "index_head_dim", 128);
  EngineOptions options;
  options.packedKv = true;
  Fixture f = make(json, 4, options);
  ASSERT_TRUE(f.engine);
  EXPECT_LE(compareWithReference(f, {13, 1, 1}), kTolerance);
}

/// Runs `total` tokens of one sequence as steps of the given sizes and
/// returns every layer's outputs, concatenated over the steps, followed by
/// the bytes of every cache buffer the layer owns at the end.
std::vector<std::vector<float>> runInSteps(Engine &engine,
                                           const std::vector<int64_t> &sizes) {
  std::string error;
  int64_t sequence = engine.addSequence(error);
  EXPECT_GE(sequence, 0) << error;
  int64_t dim = engine.config().hiddenSize, offset = 0;
  size_t layers = engine.layers().size();
  int64_t total = 0;
  for (int64_t n : sizes)
    total += n;
  std::vector<std::vector<float>> all(layers);
  std::vector<std::vector<float>> x;
  for (size_t l = 0; l < layers; ++l)
    x.push_back(ref::randomActivations(total * dim, 77 + l));
  for (int64_t n : sizes) {
    std::vector<const float *> inputs;
    std::vector<float *> outputs;
    std::vector<std::vector<float>> out(layers, std::vector<float>(n * dim));
    for (size_t l = 0; l < layers; ++l) {
      inputs.push_back(x[l].data() + offset * dim);
      outputs.push_back(out[l].data());
    }
    EXPECT_TRUE(engine.step({{sequence}, {n}, n}, inputs, outputs, error))
        << error;
    for (size_t l = 0; l < layers; ++l)
      all[l].insert(all[l].end(), out[l].begin(), out[l].end());
    offset += n;
  }
  for (size_t l = 0; l < layers; ++l)
    for (const char *component : {"window", "compressed", "index_keys",
                                  "compressor_state", "indexer_state"}) {
      const uint8_t *bytes = engine.cacheBytes(sequence, l, component);
      int64_t size = engine.cacheSize(l, component);
      for (int64_t i = 0; bytes && i < size; ++i)
        all[l].push_back(bytes[i]);
    }
  EXPECT_TRUE(engine.releaseSequence(sequence, error)) << error;
  return all;
}

// Outputs and every cache byte (window ring, compressed rows, index keys,
// compressor states) agree.
TEST(Engine, PrefillEqualsPrefillPlusDecodeAtBoundaries) {
  for (const char *config : {"tiny.json", "tiny-v41.json"}) {
    Fixture f = make(readExample(config), 23);
    ASSERT_TRUE(f.engine);
    // w = 8; r = 4, 128 (tiny) and 2, 1 (V4.1); K = 4 first exceeded at 20.
    for (int64_t total : {1, 3, 4, 5, 7, 8, 9, 19, 20, 21, 127, 128, 129})
      for (int64_t decode : {1, 3}) {
        if (decode > total)
          continue;
        std::vector<int64_t> split = {total - decode};
        split.insert(split.end(), decode, 1);
        EXPECT_EQ(runInSteps(*f.engine, {total}), runInSteps(*f.engine, split))
            << config << " S = " << total << ", decode " << decode;
      }
  }
}

/// Runs sequences of the given lengths as one padded batch and each alone.
TEST(Engine, VarlenBatchEqualsSequencesAlone) {
  Fixture f = make(readExample("tiny.json"), 11);
  ASSERT_TRUE(f.engine);
  std::string error;
  int64_t dim = f.engine->config().hiddenSize;
  size_t layers = f.engine->layers().size();
  std::vector<int64_t> lengths = {5, 0, 9};
  int64_t padded = 9;
  std::vector<int64_t> ids;
  for (size_t b = 0; b < lengths.size(); ++b)
    ids.push_back(f.engine->addSequence(error));
  std::vector<std::vector<float>> in(layers), out(layers);
  std::vector<const float *> inputs;
  std::vector<float *> outputs;
  for (size_t l = 0; l < layers; ++l) {
    in[l].assign(lengths.size() * padded * dim, 1e9f); // padding is ignored
    for (size_t b = 0; b < lengths.size(); ++b) {
      auto x = ref::randomActivations(lengths[b] * dim, 1000 * b + l);
      std::copy(x.begin(), x.end(), in[l].begin() + b * padded * dim);
    }
    out[l].assign(lengths.size() * padded * dim, NAN);
    inputs.push_back(in[l].data());
    outputs.push_back(out[l].data());
  }
  ASSERT_TRUE(f.engine->step({ids, lengths, padded}, inputs, outputs, error))
      << error;
  for (size_t b = 0; b < lengths.size(); ++b) {
    EXPECT_EQ(f.engine->position(ids[b]), lengths[b]);
    int64_t alone = f.engine->addSequence(error);
    ASSERT_GE(alone, 0) << error;
    std::vector<std::vector<float>> single(layers);
    std::vector<const float *> singleIn;
    std::vector<float *> singleOut;
    for (size_t l = 0; l < layers; ++l) {
      single[l].assign(std::max<int64_t>(lengths[b], 1) * dim, NAN);
      singleIn.push_back(in[l].data() + b * padded * dim);
      singleOut.push_back(single[l].data());
    }
    ASSERT_TRUE(f.engine->step({{alone}, {lengths[b]}, lengths[b]}, singleIn,
                               singleOut, error))
        << error;
    for (size_t l = 0; l < layers; ++l) {
      for (int64_t i = 0; i < lengths[b] * dim; ++i)
        ASSERT_EQ(out[l][b * padded * dim + i], single[l][i])
            << "row " << b << " layer " << l;
      for (int64_t i = lengths[b] * dim; i < padded * dim; ++i)
        ASSERT_EQ(out[l][b * padded * dim + i], 0.0f) << "padding " << b;
    }
    ASSERT_TRUE(f.engine->releaseSequence(alone, error));
  }
}

TEST(Engine, RunsAreBitwiseIdentical) {
  std::vector<std::vector<float>> results;
  for (int run = 0; run < 2; ++run) {
    Fixture f = make(readExample("tiny-v41.json"), 13);
    ASSERT_TRUE(f.engine);
    std::string error;
    int64_t sequence = f.engine->addSequence(error);
    int64_t dim = f.engine->config().hiddenSize;
    std::vector<float> all;
    for (int64_t tokens : {12, 1}) {
      std::vector<std::vector<float>> in, out;
      std::vector<const float *> inputs;
      std::vector<float *> outputs;
      for (size_t l = 0; l < f.engine->layers().size(); ++l) {
        in.push_back(ref::randomActivations(tokens * dim, l));
        out.emplace_back(tokens * dim);
      }
      for (size_t l = 0; l < in.size(); ++l) {
        inputs.push_back(in[l].data());
        outputs.push_back(out[l].data());
      }
      ASSERT_TRUE(f.engine->step({{sequence}, {tokens}, tokens}, inputs,
                                 outputs, error));
      for (auto &o : out)
        all.insert(all.end(), o.begin(), o.end());
    }
    results.push_back(all);
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  EXPECT_EQ(std::memcmp(results[0].data(), results[1].data(),
                        results[0].size() * sizeof(float)),
            0);
}

// A sequence restored from another's cache bytes continues exactly as the
// original: the caches and the position are the whole state of a sequence.
TEST(Engine, RestoredSequenceContinuesLikeTheOriginal) {
  Fixture f = make(readExample("tiny-v41.json"), 17);
  ASSERT_TRUE(f.engine);
  std::string error;
  int64_t original = f.engine->addSequence(error),
          restored = f.engine->addSequence(error);
  int64_t dim = f.engine->config().hiddenSize;
  size_t layers = f.engine->layers().size();
  auto run = [&](int64_t sequence, int64_t tokens) {
    std::vector<std::vector<float>> in, out;
    std::vector<const float *> inputs;
    std::vector<float *> outputs;
    for (size_t l = 0; l < layers; ++l) {
      in.push_back(ref::randomActivations(tokens * dim, 100 + l));
      out.emplace_back(tokens * dim);
    }
    for (size_t l = 0; l < layers; ++l) {
      inputs.push_back(in[l].data());
      outputs.push_back(out[l].data());
    }
    EXPECT_TRUE(
        f.engine->step({{sequence}, {tokens}, tokens}, inputs, outputs, error))
        << error;
    return out;
  };
  run(original, 13);
  for (size_t l = 0; l < layers; ++l)
    for (const char *component : {"window", "compressed", "index_keys",
                                  "compressor_state", "indexer_state"}) {
      int64_t size = f.engine->cacheSize(l, component);
      if (size == 0)
        continue;
      const uint8_t *from = f.engine->cacheBytes(original, l, component);
      ASSERT_TRUE(f.engine->writeCache(restored, l, component,
                                       std::vector<uint8_t>(from, from + size),
                                       error))
          << error;
    }
  ASSERT_TRUE(f.engine->restorePosition(restored, 13, error)) << error;
  EXPECT_EQ(f.engine->position(restored), 13);
  std::vector<std::vector<float>> want = run(original, 1),
                                  got = run(restored, 1);
  for (size_t l = 0; l < layers; ++l)
    EXPECT_EQ(std::memcmp(want[l].data(), got[l].data(), dim * sizeof(float)),
              0)
        << "layer " << l;

  EXPECT_FALSE(f.engine->restorePosition(restored, 1 << 30, error));
  EXPECT_NE(error.find("outside [0, "), std::string::npos) << error;
  EXPECT_FALSE(f.engine->writeCache(restored, 0, "window", {1, 2, 3}, error));
  EXPECT_NE(error.find("bytes per sequence, not 3"), std::string::npos)
      << error;
  EXPECT_FALSE(f.engine->writeCache(restored, 0, "windows", {}, error));
  EXPECT_EQ(error, "unknown cache component 'windows'");
}

TEST(Engine, ConsumerReadsItsSourceCache) {
  // tiny-v41: layer 2 shares layer 1's compressed KV and index keys.
  Fixture f = make(readExample("tiny-v41.json"), 17);
  ASSERT_TRUE(f.engine);
  std::string error;
  int64_t sequence = f.engine->addSequence(error);
  EXPECT_EQ(f.engine->cacheBytes(sequence, 2, "compressed"),
            f.engine->cacheBytes(sequence, 1, "compressed"));
  EXPECT_EQ(f.engine->cacheBytes(sequence, 2, "index_keys"),
            f.engine->cacheBytes(sequence, 1, "index_keys"));
  EXPECT_NE(f.engine->cacheBytes(sequence, 2, "window"),
            f.engine->cacheBytes(sequence, 1, "window"));
  // One step of `tokens` tokens with seeded inputs; every layer's outputs.
  auto run = [&](Engine &engine, int64_t seq, int64_t tokens, uint64_t seed) {
    int64_t dim = engine.config().hiddenSize;
    size_t layers = engine.layers().size();
    std::vector<std::vector<float>> in, out(layers);
    std::vector<const float *> inputs;
    std::vector<float *> outputs;
    for (size_t l = 0; l < layers; ++l)
      in.push_back(ref::randomActivations(tokens * dim, seed + l));
    for (size_t l = 0; l < layers; ++l) {
      out[l].assign(tokens * dim, 0.0f);
      inputs.push_back(in[l].data());
      outputs.push_back(out[l].data());
    }
    EXPECT_TRUE(engine.step({{seq}, {tokens}, tokens}, inputs, outputs, error))
        << error;
    return out;
  };
  run(*f.engine, sequence, 16, 1);
  auto before = run(*f.engine, sequence, 1, 50);
  // A second engine takes the same steps, but its source layer's compressed
  // rows are overwritten before the decode step: what reads them changes.
  Fixture g = make(readExample("tiny-v41.json"), 17);
  ASSERT_TRUE(g.engine);
  int64_t other = g.engine->addSequence(error);
  run(*g.engine, other, 16, 1);
  // Overwrite the source layer's compressed rows in g only.
  int64_t rowBytes = 2 * g.engine->config().headDim; // bf16 rows
  std::memset(g.engine->cacheBytes(other, 1, "compressed"), 0, 8 * rowBytes);
  auto after = run(*g.engine, other, 1, 50);
  EXPECT_EQ(before[0], after[0]); // layer 0 has no compressed cache
  EXPECT_NE(before[1], after[1]); // the source reads its own rows
  EXPECT_NE(before[2], after[2]); // the consumer reads the source's rows
  EXPECT_EQ(before[3], after[3]); // layer 3 owns other rows
}

// Decode steps padded to a power of two (padding rows at position 0 of a
// free slot) give every sequence the outputs and caches of unpadded steps,
// bitwise; a sequence that later takes the padding rows' slot starts clean.
TEST(Engine, PaddedDecodeStepsEqualUnpaddedOnes) {
  std::vector<Fixture> runs;
  for (bool pad : {true, false}) {
    EngineOptions options;
    options.maxSequences = 8;
    options.padDecodeSteps = pad;
    runs.push_back(make(readExample("tiny-v41.json"), 23, options));
    ASSERT_TRUE(runs.back().engine);
  }
  std::string error;
  int64_t dim = runs[0].engine->config().hiddenSize;
  size_t layers = runs[0].engine->layers().size();
  // One step of `lengths` over `sequences` (inputs seeded by `seed`), on
  // both engines; every layer's outputs must agree bitwise.
  auto step = [&](const std::vector<int64_t> &sequences,
                  const std::vector<int64_t> &lengths, uint64_t seed) {
    int64_t padded = *std::max_element(lengths.begin(), lengths.end());
    std::vector<std::vector<float>> in(layers), out[2];
    for (size_t l = 0; l < layers; ++l)
      in[l] = ref::randomActivations(sequences.size() * padded * dim, seed + l);
    for (int e = 0; e < 2; ++e) {
      std::vector<const float *> inputs;
      std::vector<float *> outputs;
      out[e].resize(layers);
      for (size_t l = 0; l < layers; ++l) {
        out[e][l].assign(sequences.size() * padded * dim, NAN);
        inputs.push_back(in[l].data());
        outputs.push_back(out[e][l].data());
      }
      ASSERT_TRUE(runs[e].engine->step({sequences, lengths, padded}, inputs,
                                       outputs, error))
          << error;
    }
    for (size_t l = 0; l < layers; ++l)
      ASSERT_EQ(std::memcmp(out[0][l].data(), out[1][l].data(),
                            out[0][l].size() * sizeof(float)),
                0)
          << "layer " << l << " of a step of " << sequences.size()
          << " sequences";
  };
  auto add = [&] {
    int64_t a = runs[0].engine->addSequence(error);
    EXPECT_EQ(a, runs[1].engine->addSequence(error)) << error;
    return a;
  };
  std::vector<int64_t> sequences;
  for (int i = 0; i < 5; ++i)
    sequences.push_back(add());
  step(sequences, {13, 4, 21, 1, 9}, 100);
  // 3 tokens run as 4, 5 as 8: padding rows in slots 5, 6, 7's first free.
  step({sequences[0], sequences[2], sequences[4]}, {1, 1, 1}, 200);
  step(sequences, {1, 1, 1, 1, 1}, 300);
  step(sequences, {1, 1, 1, 1, 1}, 400);
  for (int64_t sequence : sequences)
    for (const LayerSpec &layer : runs[0].engine->layers())
      for (const char *component : {"window", "compressed", "index_keys",
                                    "compressor_state", "indexer_state"}) {
        int64_t bytes = runs[0].engine->cacheSize(layer.id, component);
        if (bytes == 0)
          continue;
        EXPECT_EQ(std::memcmp(
                      runs[0].engine->cacheBytes(sequence, layer.id, component),
                      runs[1].engine->cacheBytes(sequence, layer.id, component),
                      bytes),
                  0)
            << component << " of layer " << layer.id << ", sequence "
            << sequence;
      }
  // Padding rows wrote their slot (5, held by no sequence) in the padded
  // engine alone; a sequence taking the slot finds it as the other engine
  // does. (Their zero inputs leave zero KV rows; the compressor's state
  // takes their scores.)
  constexpr int64_t kPaddingSlot = 5;
  const char *kState = "compressor_state";
  int64_t stateLayer = 0;
  while (runs[0].engine->cacheSize(stateLayer, kState) == 0)
    ++stateLayer;
  auto paddingSlotStates = [&] {
    return std::memcmp(
        runs[0].engine->cacheBytes(kPaddingSlot, stateLayer, kState),
        runs[1].engine->cacheBytes(kPaddingSlot, stateLayer, kState),
        runs[0].engine->cacheSize(stateLayer, kState));
  };
  EXPECT_NE(paddingSlotStates(), 0) << "no step was padded";
  int64_t late = add();
  EXPECT_EQ(late, kPaddingSlot);
  EXPECT_EQ(paddingSlotStates(), 0) << "the slot was not cleared";
  step({late}, {6}, 500);
  step({late, sequences[1]}, {1, 1}, 600);
}

TEST(Engine, MisuseIsAnErrorNotACrash) {
  EngineOptions options;
  options.maxSequences = 2;
  options.contextTokens = 64;
  Fixture f = make(readExample("tiny.json"), 19, options);
  ASSERT_TRUE(f.engine);
  std::string error;
  int64_t dim = f.engine->config().hiddenSize;
  size_t layers = f.engine->layers().size();
  std::vector<float> buffer(4 * 70 * dim, 0.0f);
  std::vector<const float *> inputs(layers, buffer.data());
  std::vector<float *> outputs(layers, buffer.data());
  int64_t a = f.engine->addSequence(error), b = f.engine->addSequence(error);
  ASSERT_GE(b, 0);
  EXPECT_EQ(f.engine->addSequence(error), -1);
  EXPECT_NE(error.find("sequence slots"), std::string::npos) << error;
  EXPECT_FALSE(f.engine->step({{7}, {1}, 1}, inputs, outputs, error));
  EXPECT_NE(error.find("unknown or finished sequence 7"), std::string::npos);
  EXPECT_FALSE(f.engine->step({{a}, {3}, 2}, inputs, outputs, error));
  EXPECT_NE(error.find("length 3 outside [0, 2]"), std::string::npos);
  EXPECT_FALSE(f.engine->step({{a}, {65}, 65}, inputs, outputs, error));
  EXPECT_NE(error.find("exceed the planned context of 64"), std::string::npos);
  EXPECT_FALSE(
      f.engine->step({{a, b, a}, {1, 1, 1}, 1}, inputs, outputs, error));
  EXPECT_NE(error.find("more than the plan's 2 sequence slots"),
            std::string::npos)
      << error;
  EXPECT_FALSE(f.engine->step({{a, a}, {1, 1}, 1}, inputs, outputs, error));
  EXPECT_NE(error.find("appears twice"), std::string::npos);
  std::vector<const float *> tooFew(layers - 1, buffer.data());
  EXPECT_FALSE(f.engine->step({{a}, {1}, 1}, tooFew, outputs, error));
  EXPECT_NE(error.find("one input and one output buffer per layer"),
            std::string::npos);
  EXPECT_EQ(f.engine->position(a), 0); // nothing ran
  EXPECT_TRUE(f.engine->releaseSequence(a, error));
  EXPECT_FALSE(f.engine->releaseSequence(a, error));
  EXPECT_FALSE(f.engine->step({{a}, {1}, 1}, inputs, outputs, error));
}

TEST(Engine, BadConfigIsAnError) {
  std::string error;
  EXPECT_FALSE(Engine::create("{\"hidden_size\": 1}", {}, error));
  EXPECT_NE(error.find("missing required field"), std::string::npos) << error;
}

} // namespace
