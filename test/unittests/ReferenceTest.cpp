//===- ReferenceTest.cpp - the reference implementation -------------------===//
//
// Checks the reference against hand-computed values and against itself:
// the grouped compressor formula equals the decode state machine, and a
// prefill equals a shorter prefill followed by decode steps, bitwise.
//
//===----------------------------------------------------------------------===//

#include "lib/Reference/Reference.h"
#include "core/Numerics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

using namespace v4a;
using namespace v4a::ref;

namespace {

TEST(Numerics, BF16RoundsToNearestEven) {
  EXPECT_EQ(num::roundBF16(1.0f), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to even (1).
  EXPECT_EQ(num::roundBF16(1.0f + std::ldexp(1.0f, -8)), 1.0f);
  EXPECT_EQ(num::roundBF16(1.0f + 3 * std::ldexp(1.0f, -8)),
            1.0f + std::ldexp(1.0f, -6));
}

TEST(Numerics, E4M3CodesRoundTrip) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7f) == 0x7f)
      continue; // NaN
    float value = num::fromE4M3Bits(static_cast<uint8_t>(code));
    EXPECT_EQ(num::roundE4M3(value), value) << code;
    if (value != 0.0f) {
      EXPECT_EQ(num::toE4M3Bits(value), code) << code;
    }
  }
  EXPECT_EQ(num::roundE4M3(1000.0f), 448.0f);
  EXPECT_EQ(num::roundE4M3(-1000.0f), -448.0f);
  EXPECT_EQ(num::roundE4M3(std::ldexp(1.0f, -10)), 0.0f); // below half of 2^-9
  EXPECT_EQ(num::roundE4M3(1.0625f), 1.0f);               // tie to even
}

TEST(Numerics, E2M1Grid) {
  EXPECT_EQ(num::roundE2M1(0.2f), 0.0f);
  EXPECT_EQ(num::roundE2M1(0.3f), 0.5f);
  EXPECT_EQ(num::roundE2M1(2.5f), 2.0f); // tie to even
  EXPECT_EQ(num::roundE2M1(5.0f), 4.0f); // tie to even
  EXPECT_EQ(num::roundE2M1(5.1f), 6.0f);
  EXPECT_EQ(num::roundE2M1(-100.0f), -6.0f);
}

TEST(Numerics, UE8M0RoundsUp) {
  EXPECT_EQ(num::fromUE8M0Bits(num::ue8m0CeilBits(1.0f)), 1.0f);
  EXPECT_EQ(num::fromUE8M0Bits(num::ue8m0CeilBits(1.5f)), 2.0f);
  EXPECT_EQ(num::fromUE8M0Bits(num::ue8m0CeilBits(0.3f)), 0.5f);
}

Tensor randomTensor(std::vector<int64_t> shape, uint64_t seed) {
  Tensor t(std::move(shape));
  uint64_t s = seed;
  for (float &v : t.data) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v = num::roundBF16(static_cast<float>((s >> 40) % 2001) / 1000.0f - 1.0f);
  }
  return t;
}

void expectCompressorsAgree(int64_t ratio, bool overlap, int64_t tokens) {
  int64_t d = 8, width = (overlap ? 2 : 1) * d;
  Tensor kv = randomTensor({tokens, width}, 1);
  Tensor score = randomTensor({tokens, width}, 2);
  Tensor ape = randomTensor({ratio, width}, 3);
  Tensor grouped = compress(kv, score, ape, ratio, overlap);
  CompressorState state = makeCompressorState(ratio, overlap, width);
  int64_t emitted = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    auto entry =
        compressStep(state, kv.row(t), score.row(t), ape, t, ratio, overlap);
    ASSERT_EQ(entry.has_value(), (t + 1) % ratio == 0) << t;
    if (!entry)
      continue;
    for (int64_t f = 0; f < d; ++f)
      EXPECT_EQ((*entry)[f], grouped.row(emitted)[f]) << emitted << " " << f;
    ++emitted;
  }
  EXPECT_EQ(emitted, grouped.dim(0));
}

TEST(Compressor, DecodeStateMatchesGroupedFormula) {
  expectCompressorsAgree(4, /*overlap=*/true, 13);
  expectCompressorsAgree(128, /*overlap=*/false, 257);
  expectCompressorsAgree(2, /*overlap=*/false, 9);
}

TEST(Compressor, FirstGroupOverlapsNothing) {
  // With overlap, group 0's previous slots carry score -inf: entry 0 is the
  // softmax over the current group's last D features alone.
  int64_t d = 2;
  Tensor kv({4, 2 * d}), score({4, 2 * d}), ape({4, 2 * d});
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t f = 0; f < 2 * d; ++f)
      kv.row(t)[f] = f < d ? 100.0f : static_cast<float>(t);
  Tensor entry = compress(kv, score, ape, 4, true);
  EXPECT_FLOAT_EQ(entry.row(0)[0], 1.5f); // mean of 0..3, uniform scores
}

TEST(Selection, WindowIndicesAtBoundaries) {
  auto rows = windowIndices({0, 6, 7, 8, 9}, 8);
  EXPECT_EQ(rows[0], (std::vector<int32_t>{0, -1, -1, -1, -1, -1, -1, -1}));
  EXPECT_EQ(rows[1], (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, -1}));
  EXPECT_EQ(rows[2], (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(rows[3], (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 0}));
  EXPECT_EQ(rows[4], (std::vector<int32_t>{2, 3, 4, 5, 6, 7, 0, 1}));
}

TEST(Selection, TopkBreaksTiesByRow) {
  Tensor scores({1, 6});
  scores.data = {1.0f, 3.0f, 3.0f, -INFINITY, 2.0f, 3.0f};
  EXPECT_EQ(topk(scores, 4)[0], (std::vector<int32_t>{1, 2, 5, 4}));
  EXPECT_EQ(topk(scores, 8)[0],
            (std::vector<int32_t>{1, 2, 5, 4, 0, -1, -1, -1}));
  auto blocks = blockTopk(scores, 2, 2); // block maxima 3, 3, 3
  EXPECT_EQ(blocks[0], (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(topkInBlocks(scores, 3, blocks, 2)[0],
            (std::vector<int32_t>{1, 2, 0}));
}

TEST(Attention, EmptySelectionGivesZeroNotNaN) {
  Tensor q = randomTensor({2, 2, 4}, 5), kv = randomTensor({3, 4}, 6);
  Tensor o = sparseAttention(q, kv, {{-1, -1}, {}}, {0.5f, -0.5f}, 0.5);
  for (float v : o.data)
    EXPECT_EQ(v, 0.0f);
}

TEST(Attention, SinkTakesItsShare) {
  // One row with logit 0 and a sink of 0: the row gets half the mass.
  Tensor q({1, 1, 2}), kv({1, 2});
  kv.data = {2.0f, 4.0f};
  Tensor o = sparseAttention(q, kv, {{0}}, {0.0f}, 1.0);
  EXPECT_FLOAT_EQ(o.data[0], 1.0f);
  EXPECT_FLOAT_EQ(o.data[1], 2.0f);
}

//===----------------------------------------------------------------------===//
// Whole layers
//===----------------------------------------------------------------------===//

Model loadModel(const std::string &name, uint64_t seed) {
  std::ifstream file(std::string(V4A_SOURCE_DIR) + "/examples/" + name);
  std::stringstream text;
  text << file.rdbuf();
  ConfigError error;
  std::optional<ModelConfig> config = parseModelConfig(text.str(), error);
  EXPECT_TRUE(config) << error.str();
  std::optional<std::vector<LayerSpec>> layers =
      deriveLayers(*config, {}, error);
  EXPECT_TRUE(layers) << error.str();
  std::vector<LayerWeights> weights;
  for (const LayerSpec &layer : *layers)
    weights.push_back(randomLayerWeights(*config, layer, seed));
  return Model(*config, *layers, std::move(weights));
}

std::vector<Tensor> inputs(const Model &model, int64_t tokens, int64_t offset) {
  std::vector<Tensor> x;
  for (size_t l = 0; l < model.layers().size(); ++l) {
    Tensor t({tokens, model.config().hiddenSize});
    for (int64_t i = 0; i < tokens; ++i) {
      Tensor row =
          randomTensor({1, model.config().hiddenSize}, 1000 * l + offset + i);
      std::copy(row.data.begin(), row.data.end(), t.row(i));
    }
    x.push_back(t);
  }
  return x;
}

/// Prefill of `total` tokens versus prefill of total - decode tokens and
/// `decode` single-token steps: every layer's outputs agree bitwise.
void expectPrefillMatchesDecode(const Model &model, int64_t total,
                                int64_t decode) {
  SequenceState whole = model.newSequence();
  std::vector<Tensor> x = inputs(model, total, 0);
  std::vector<Tensor> expected = model.step(whole, x);
  SequenceState split = model.newSequence();
  int64_t prefill = total - decode;
  auto slice = [&](int64_t begin, int64_t count) {
    std::vector<Tensor> part;
    for (const Tensor &t : x) {
      Tensor s({count, t.dim(1)});
      std::copy(t.row(begin), t.row(begin + count), s.data.begin());
      part.push_back(s);
    }
    return part;
  };
  std::vector<std::vector<Tensor>> pieces;
  if (prefill > 0)
    pieces.push_back(model.step(split, slice(0, prefill)));
  for (int64_t t = prefill; t < total; ++t)
    pieces.push_back(model.step(split, slice(t, 1)));
  for (size_t l = 0; l < x.size(); ++l) {
    int64_t row = 0;
    for (const auto &piece : pieces)
      for (int64_t i = 0; i < piece[l].dim(0); ++i, ++row)
        for (int64_t f = 0; f < piece[l].dim(1); ++f)
          ASSERT_EQ(piece[l].row(i)[f], expected[l].row(row)[f])
              << "layer " << l << " token " << row << " of " << total
              << " (decode " << decode << ")";
  }
  for (size_t l = 0; l < x.size(); ++l)
    for (float v : expected[l].data)
      ASSERT_TRUE(std::isfinite(v)) << "layer " << l;
}

class PrefillDecode : public testing::TestWithParam<int64_t> {};

TEST_P(PrefillDecode, V4LayersAgree) {
  static const Model model = loadModel("tiny.json", 7);
  for (int64_t decode : {1, 3})
    if (decode <= GetParam())
      expectPrefillMatchesDecode(model, GetParam(), decode);
}

TEST_P(PrefillDecode, V41LayersAgree) {
  static const Model model = loadModel("tiny-v41.json", 11);
  for (int64_t decode : {1, 2})
    if (decode <= GetParam())
      expectPrefillMatchesDecode(model, GetParam(), decode);
}

// tiny: w = 8, ratios 4 and 128, index_topk 4. Boundaries of spec section 6:
// first token, w-1..w+1, r-1..r+1 for r = 4 and 128, and 20, the first
// position whose (i+1) div 4 exceeds K.
INSTANTIATE_TEST_SUITE_P(Boundaries, PrefillDecode,
                         testing::Values(1, 3, 4, 5, 7, 8, 9, 19, 20, 21, 127,
                                         128, 129));

} // namespace
