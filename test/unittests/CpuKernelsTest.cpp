//===- CpuKernelsTest.cpp - compiled CPU kernels against the reference ----===//
//
// Each v4a op, lowered by v4a-lower-to-cpu and compiled in-process, must
// agree with the reference implementation on random inputs. The tolerance
// is stated per op; it is zero where both sides perform the same f32
// operations in the same order.
//
//===----------------------------------------------------------------------===//

#include "Memref.h"
#include "core/CacheLayout.h"
#include "core/Numerics.h"
#include "lib/JIT/CpuJit.h"
#include "lib/JIT/Kernels.h"
#include "lib/Reference/Reference.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace v4a;
using namespace v4a::ref;
using rt::Memref;
using rt::view;

namespace {

Tensor random(std::vector<int64_t> shape, uint64_t seed, float range = 1.0f) {
  Tensor t(std::move(shape));
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (float &v : t.data) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    v = num::roundBF16(range *
                       (static_cast<float>(s % 20001) / 10000.0f - 1.0f));
  }
  return t;
}

template <int N> Memref<float, N> mem(Tensor &t) {
  std::array<int64_t, N> sizes;
  for (int i = 0; i < N; ++i)
    sizes[i] = t.shape[i];
  return view<float, N>(t.data.data(), sizes);
}

float maxDiff(const Tensor &a, const Tensor &b) {
  EXPECT_EQ(a.data.size(), b.data.size());
  float worst = 0.0f;
  for (size_t i = 0; i < a.data.size() && i < b.data.size(); ++i) {
    if (std::isnan(a.data[i]) || std::isnan(b.data[i]))
      return INFINITY;
    if (a.data[i] != b.data[i])
      worst = std::max(worst, std::fabs(a.data[i] - b.data[i]));
  }
  return worst;
}

class Kernels : public testing::Test {
protected:
  static void SetUpTestSuite() {
    if (compiled)
      return; // one module serves every suite derived from this fixture
    jit::KernelModule module;
    module.linear(false, false);
    module.linear(false, true);
    module.linear(true, false);
    module.rmsNorm(true, 1e-6);
    module.rmsNorm(false, 1e-6);
    module.rope(3, 16, 10000.0, std::nullopt, false);
    module.rope(2, 16, 160000.0, yarn(), true);
    module.actQuant(2, true, 64, 448);
    module.actQuant(3, false, 32, 0);
    module.hadamard(2, 32);
    module.compressStep(4, true);
    module.compressStep(128, false);
    module.indexerScore(4);
    module.topk(4, std::nullopt);
    module.topk(4, 8);
    module.blockTopk(8, 8);
    attentionEighth = module.sparseAttention(0.125);
    attentionWide = module.sparseAttention(1.0 / std::sqrt(128.0));
    module.groupedOutput(2, false, false);
    module.groupedOutput(2, true, false);
    module.groupedOutput(2, false, true);
    module.cacheStoreGather("bf16", 64);
    module.cacheStoreGather("index_fp8", 64);
    module.cacheStoreGather("index_mxfp4", 64);
    module.rope(2, 64, 160000.0, YarnConfig{4.0, 64, 32.0, 1.0}, false);
    module.actQuant(2, true, 64, 64);
    module.rope(3, 64, 160000.0, YarnConfig{4.0, 64, 32.0, 1.0}, false);
    std::string error;
    compiled = jit::CpuJit::compile(std::move(module), error).release();
    ASSERT_TRUE(compiled) << error;
  }
  static YarnConfig yarn() { return {4.0, 64, 32.0, 1.0}; }
  void SetUp() override { ASSERT_TRUE(compiled); }
  template <typename Fn> static Fn *kernel(const std::string &name) {
    void *symbol = compiled->lookup(name);
    // A missing kernel aborts the test instead of calling through null.
    if (!symbol) {
      ADD_FAILURE() << "no kernel " << name;
      std::abort();
    }
    return reinterpret_cast<Fn *>(symbol);
  }
  static void checkStoreAndGather(layout::RowKind kind, Tensor rows);
  static jit::CpuJit *compiled;
  static std::string attentionEighth, attentionWide;
};
jit::CpuJit *Kernels::compiled = nullptr;
std::string Kernels::attentionEighth, Kernels::attentionWide;

using M1 = Memref<float, 1>;
using M2 = Memref<float, 2>;
using M3 = Memref<float, 3>;

TEST_F(Kernels, LinearBF16) {
  Tensor x = random({21, 96}, 1), w = random({40, 96}, 2, 0.2f);
  Tensor y({21, 40}), y32({21, 40});
  auto mx = mem<2>(x), mw = mem<2>(w), my = mem<2>(y), my32 = mem<2>(y32);
  kernel<void(M2 *, M2 *, M2 *)>("linear_bf16_bf16")(&mx, &mw, &my);
  kernel<void(M2 *, M2 *, M2 *)>("linear_bf16_f32")(&mx, &mw, &my32);
  EXPECT_EQ(maxDiff(y, linear(x, {w, {}})), 0.0f);
  EXPECT_EQ(maxDiff(y32, linearF32(x, {w, {}})), 0.0f);
  // The comparison sees a difference as small as the bf16 rounding.
  EXPECT_GT(maxDiff(y, y32), 0.0f);
}

// Token counts of 19 and 21 cover both paths of the projections: groups of
// eight tokens in vector lanes, then the remaining tokens one by one.

TEST_F(Kernels, LinearFP8) {
  // 200 columns: two activation blocks, the second one partial.
  Tensor x = random({19, 200}, 3, 4.0f), values = random({130, 200}, 4, 3.0f);
  Weight w;
  w.values = Tensor({130, 200});
  w.scale = Tensor({2, 2});
  std::vector<uint8_t> codes(130 * 200), scaleCodes = {120, 121, 119, 122};
  for (size_t i = 0; i < codes.size(); ++i) {
    codes[i] = num::toE4M3Bits(values.data[i] * 50.0f);
    w.values.data[i] = num::fromE4M3Bits(codes[i]);
  }
  for (size_t i = 0; i < 4; ++i)
    w.scale.data[i] = num::fromUE8M0Bits(scaleCodes[i]);
  Tensor y({19, 130});
  auto mx = mem<2>(x), my = mem<2>(y);
  auto mw = view<uint8_t, 2>(codes.data(), {130, 200});
  auto ms = view<uint8_t, 2>(scaleCodes.data(), {2, 2});
  kernel<void(M2 *, Memref<uint8_t, 2> *, Memref<uint8_t, 2> *, M2 *)>(
      "linear_fp8_bf16")(&mx, &mw, &ms, &my);
  EXPECT_EQ(maxDiff(y, linear(x, w)), 0.0f);
}

TEST_F(Kernels, RMSNorm) {
  Tensor x = random({4, 64}, 5, 3.0f), g = random({64}, 6);
  Tensor y({4, 64});
  auto mx = mem<2>(x), my = mem<2>(y);
  auto mg = mem<1>(g);
  kernel<void(M2 *, M1 *, M2 *)>("rms_norm_weighted_eps1em06")(&mx, &mg, &my);
  EXPECT_EQ(maxDiff(y, rmsNorm(x, &g, 1e-6)), 0.0f);
  Tensor q = random({3, 2, 64}, 7), qy({3, 2, 64});
  auto mq = mem<3>(q), mqy = mem<3>(qy);
  kernel<void(M3 *, M3 *)>("rms_norm_heads_eps1em06")(&mq, &mqy);
  EXPECT_EQ(maxDiff(qy, rmsNorm(q, nullptr, 1e-6)), 0.0f);
}

TEST_F(Kernels, RoPE) {
  std::vector<int64_t> positions = {0, 1, 7, 130, 70000};
  Tensor q = random({5, 2, 64}, 8), qy({5, 2, 64});
  auto mq = mem<3>(q), mqy = mem<3>(qy);
  auto mp = view<int64_t, 1>(positions.data(), {5});
  kernel<void(M3 *, Memref<int64_t, 1> *, M3 *)>("rope_r3_d16_t10000_plain")(
      &mq, &mp, &mqy);
  RopeParams plain{16, 10000.0, std::nullopt};
  EXPECT_EQ(maxDiff(qy, rope(q, positions, plain)), 0.0f);

  Tensor k = random({5, 64}, 9), ky({5, 64});
  auto mk = mem<2>(k), mky = mem<2>(ky);
  kernel<void(M2 *, Memref<int64_t, 1> *, M2 *)>(
      "rope_r2_d16_t160000_yarn_f4_o64_bf32_bs1_inverse")(&mk, &mp, &mky);
  RopeParams scaled{16, 160000.0, yarn()};
  EXPECT_EQ(maxDiff(ky, rope(k, positions, scaled, /*inverse=*/true)), 0.0f);
}

TEST_F(Kernels, ActQuant) {
  Tensor kv = random({4, 512}, 10, 30.0f), kvy({4, 512});
  auto mkv = mem<2>(kv), mkvy = mem<2>(kvy);
  kernel<void(M2 *, M2 *)>("act_quant_r2_e4m3_b64_q448")(&mkv, &mkvy);
  EXPECT_EQ(maxDiff(kvy, actQuant(kv, QuantFormat::E4M3, 64, 448)), 0.0f);
  Tensor qi = random({3, 2, 64}, 11, 5.0f), qiy({3, 2, 64});
  auto mqi = mem<3>(qi), mqiy = mem<3>(qiy);
  kernel<void(M3 *, M3 *)>("act_quant_r3_e2m1_b32_q0")(&mqi, &mqiy);
  EXPECT_EQ(maxDiff(qiy, actQuant(qi, QuantFormat::E2M1, 32)), 0.0f);
}

TEST_F(Kernels, Hadamard) {
  Tensor x = random({3, 32}, 12), y({3, 32});
  auto mx = mem<2>(x), my = mem<2>(y);
  kernel<void(M2 *, M2 *)>("hadamard_r2_n32")(&mx, &my);
  EXPECT_EQ(maxDiff(y, hadamard(x)), 0.0f);
}

/// Runs `tokens` decode steps of one sequence through the compiled
/// compress_step and compares every emitted entry with the reference.
void checkCompressStep(void *symbol, int64_t ratio, bool overlap,
                       int64_t tokens) {
  int64_t d = 16, width = (overlap ? 2 : 1) * d,
          slots = (overlap ? 2 : 1) * ratio;
  Tensor kv = random({tokens, width}, 13), score = random({tokens, width}, 14);
  Tensor ape = random({ratio, width}, 15);
  Tensor expected = compress(kv, score, ape, ratio, overlap);
  Tensor stateKv({1, slots, width}, 0.0f),
      stateScore({1, slots, width}, -INFINITY);
  Tensor nextKv({1, slots, width}), nextScore({1, slots, width});
  Tensor entry({1, d});
  int32_t emitted = 0;
  int64_t produced = 0;
  auto fn =
      reinterpret_cast<void (*)(M2 *, M2 *, M2 *, Memref<int64_t, 1> *, M3 *,
                                M3 *, M2 *, Memref<int32_t, 1> *, M3 *, M3 *)>(
          symbol);
  for (int64_t t = 0; t < tokens; ++t) {
    Tensor kvRow({1, width}), scoreRow({1, width});
    std::copy(kv.row(t), kv.row(t) + width, kvRow.data.begin());
    std::copy(score.row(t), score.row(t) + width, scoreRow.data.begin());
    int64_t position = t;
    auto a = mem<2>(kvRow), b = mem<2>(scoreRow), c = mem<2>(ape);
    auto p = view<int64_t, 1>(&position, {1});
    auto s0 = mem<3>(stateKv), s1 = mem<3>(stateScore);
    auto o0 = mem<2>(entry);
    auto o2 = mem<3>(nextKv), o3 = mem<3>(nextScore);
    auto o1 = view<int32_t, 1>(&emitted, {1});
    fn(&a, &b, &c, &p, &s0, &s1, &o0, &o1, &o2, &o3);
    stateKv = nextKv;
    stateScore = nextScore;
    ASSERT_EQ(emitted != 0, (t + 1) % ratio == 0) << t;
    if (!emitted)
      continue;
    for (int64_t f = 0; f < d; ++f)
      ASSERT_EQ(entry.data[f], expected.row(produced)[f]) << produced;
    ++produced;
  }
  EXPECT_EQ(produced, expected.dim(0));
}

TEST_F(Kernels, CompressStep) {
  checkCompressStep(compiled->lookup("compress_step_r4_overlap"), 4, true, 13);
  checkCompressStep(compiled->lookup("compress_step_r128"), 128, false, 257);
}

TEST_F(Kernels, IndexerAndTopK) {
  Tensor q = random({6, 2, 32}, 16), keys = random({8, 32}, 17);
  Tensor weights = random({6, 2}, 18);
  std::vector<int64_t> positions = {0, 3, 7, 15, 19, 31};
  Tensor scores({6, 8});
  auto mq = mem<3>(q);
  auto mk = mem<2>(keys), mw = mem<2>(weights);
  auto mp = view<int64_t, 1>(positions.data(), {6});
  auto ms = mem<2>(scores);
  kernel<void(M3 *, M2 *, M2 *, Memref<int64_t, 1> *, M2 *)>(
      "indexer_score_r4")(&mq, &mk, &mw, &mp, &ms);
  Tensor expected = indexerScores(q, keys, weights, positions, 4);
  for (size_t i = 0; i < scores.data.size(); ++i)
    EXPECT_EQ(scores.data[i], expected.data[i]) << i;

  // 20 heads (past one group of 8, not a multiple of it): the heads' sum
  // follows the documented order bit for bit, which here differs from a
  // sum in head order.
  Tensor q20 = random({6, 20, 32}, 20), w20 = random({6, 20}, 21);
  Tensor scores20({6, 8});
  auto mq20 = mem<3>(q20);
  auto mw20 = mem<2>(w20), ms20 = mem<2>(scores20);
  kernel<void(M3 *, M2 *, M2 *, Memref<int64_t, 1> *, M2 *)>(
      "indexer_score_r4")(&mq20, &mk, &mw20, &mp, &ms20);
  Tensor expected20 = indexerScores(q20, keys, w20, positions, 4);
  int64_t unlikeHeadOrder = 0;
  for (int64_t t = 0; t < 6; ++t)
    for (int64_t j = 0; j < 8; ++j) {
      EXPECT_EQ(scores20.row(t)[j], expected20.row(t)[j]) << t << ", " << j;
      if (j >= (positions[t] + 1) / 4)
        continue;
      float inOrder = 0.0f;
      for (int64_t h = 0; h < 20; ++h) {
        float dot = 0.0f;
        for (int64_t i = 0; i < 32; ++i)
          dot += q20.data[(t * 20 + h) * 32 + i] * keys.row(j)[i];
        inOrder += std::max(dot, 0.0f) * w20.row(t)[h];
      }
      unlikeHeadOrder += inOrder != scores20.row(t)[j];
    }
  EXPECT_GT(unlikeHeadOrder, 0);

  // Ties: rows 1, 2 and 5 share a score.
  Tensor tied({2, 8});
  tied.data = {1,         3,         3,         -INFINITY, 2,         3,
               0,         0,         -INFINITY, -INFINITY, -INFINITY, -INFINITY,
               -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  std::vector<int32_t> out(2 * 4);
  auto mt = mem<2>(tied);
  auto mo = view<int32_t, 2>(out.data(), {2, 4});
  kernel<void(M2 *, Memref<int32_t, 2> *)>("topk_k4")(&mt, &mo);
  auto want = topk(tied, 4);
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 4), want[0]);
  EXPECT_EQ(std::vector<int32_t>(out.begin() + 4, out.end()), want[1]);

  Tensor wide = random({2, 40}, 19);
  wide.row(1)[39] = -INFINITY;
  std::vector<int32_t> blocks(2 * 8), picked(2 * 4);
  auto mwide = mem<2>(wide);
  auto mb = view<int32_t, 2>(blocks.data(), {2, 8});
  kernel<void(M2 *, Memref<int32_t, 2> *)>("block_topk_b8_n8")(&mwide, &mb);
  auto wantBlocks = blockTopk(wide, 8, 8);
  EXPECT_EQ(std::vector<int32_t>(blocks.begin(), blocks.begin() + 8),
            wantBlocks[0]);
  EXPECT_EQ(std::vector<int32_t>(blocks.begin() + 8, blocks.end()),
            wantBlocks[1]);
  auto mpk = view<int32_t, 2>(picked.data(), {2, 4});
  kernel<void(M2 *, Memref<int32_t, 2> *, Memref<int32_t, 2> *)>("topk_k4_c8")(
      &mwide, &mb, &mpk);
  auto wantPicked = topkInBlocks(wide, 4, wantBlocks, 8);
  EXPECT_EQ(std::vector<int32_t>(picked.begin(), picked.begin() + 4),
            wantPicked[0]);
  EXPECT_EQ(std::vector<int32_t>(picked.begin() + 4, picked.end()),
            wantPicked[1]);
}

class SparseAttentionShapes
    : public Kernels,
      public testing::WithParamInterface<std::pair<int64_t, int64_t>> {};

// Widths of 64 are whole vectors, 20 and 5 leave a scalar tail; 16 heads are
// one group of heads in vector lanes, 19 heads that group and three alone,
// 2 heads only the scalar path.
TEST_P(SparseAttentionShapes, MatchWithSinkAndMaskedRows) {
  auto [heads, width] = GetParam();
  Tensor q = random({3, heads, width}, 20), kv = random({10, width}, 21);
  std::vector<float> sink;
  for (int64_t h = 0; h < heads; ++h)
    sink.push_back(0.5f - 0.4f * static_cast<float>(h % 4));
  // Token 0: three rows; token 1: all masked; token 2: rows with a repeat.
  std::vector<int32_t> idx = {4, 0, 9, -1, -1, -1, -1, -1, 2, 2, -1, 7};
  std::vector<std::vector<int32_t>> lists = {
      {4, 0, 9, -1}, {-1, -1, -1, -1}, {2, 2, -1, 7}};
  Tensor o({3, heads, width});
  auto mq = mem<3>(q), mo = mem<3>(o);
  auto mkv = mem<2>(kv);
  auto mi = view<int32_t, 2>(idx.data(), {3, 4});
  auto msink = view<float, 1>(sink.data(), {heads});
  kernel<void(M3 *, M2 *, Memref<int32_t, 2> *, M1 *, M3 *)>(attentionEighth)(
      &mq, &mkv, &mi, &msink, &mo);
  EXPECT_EQ(maxDiff(o, sparseAttention(q, kv, lists, sink, 0.125)), 0.0f);
  for (int64_t i = 0; i < heads * width; ++i)
    EXPECT_EQ(o.data[heads * width + i], 0.0f); // masked: zero, not NaN
}

INSTANTIATE_TEST_SUITE_P(Kernels, SparseAttentionShapes,
                         testing::Values(std::pair<int64_t, int64_t>{2, 64},
                                         std::pair<int64_t, int64_t>{2, 20},
                                         std::pair<int64_t, int64_t>{19, 5},
                                         std::pair<int64_t, int64_t>{19, 64},
                                         std::pair<int64_t, int64_t>{16, 20}));

TEST_F(Kernels, GroupedOutput) {
  Tensor o = random({19, 2, 64}, 22), woA = random({2 * 16, 64}, 23, 0.2f);
  Tensor woB = random({48, 2 * 16}, 24, 0.2f), y({19, 48});
  auto mo = mem<3>(o);
  auto ma = mem<2>(woA), mb = mem<2>(woB), my = mem<2>(y);
  kernel<void(M3 *, M2 *, M2 *, M2 *)>("grouped_output_g2_bf16_bf16")(&mo, &ma,
                                                                      &mb, &my);
  EXPECT_EQ(maxDiff(y, groupedOutput(o, {woA, {}}, {woB, {}}, 2)), 0.0f);
}

/// An e4m3 weight with its ue8m0 block scales: codes for the kernel, and
/// the same values for the reference.
struct FP8Weight {
  Weight weight;
  std::vector<uint8_t> codes, scaleCodes;
  Memref<uint8_t, 2> codesView() {
    return view<uint8_t, 2>(codes.data(),
                            {weight.values.shape[0], weight.values.shape[1]});
  }
  Memref<uint8_t, 2> scalesView() {
    return view<uint8_t, 2>(scaleCodes.data(),
                            {weight.scale.shape[0], weight.scale.shape[1]});
  }
};

FP8Weight fp8Weight(int64_t rows, int64_t cols, uint64_t seed) {
  FP8Weight w;
  Tensor values = random({rows, cols}, seed, 3.0f);
  w.weight.values = Tensor({rows, cols});
  w.weight.scale = Tensor({(rows + 127) / 128, (cols + 127) / 128});
  for (int64_t i = 0; i < rows * cols; ++i) {
    w.codes.push_back(num::toE4M3Bits(values.data[i] * 50.0f));
    w.weight.values.data[i] = num::fromE4M3Bits(w.codes.back());
  }
  for (size_t i = 0; i < w.weight.scale.data.size(); ++i) {
    w.scaleCodes.push_back(static_cast<uint8_t>(118 + i % 4));
    w.weight.scale.data[i] = num::fromUE8M0Bits(w.scaleCodes.back());
  }
  return w;
}

TEST_F(Kernels, GroupedOutputDequantizesAnFP8WoA) {
  // o spans many binades, so quantizing it per block would change it.
  Tensor o = random({19, 2, 128}, 26, 5.0f), woB = random({48, 2 * 16}, 24);
  FP8Weight woA = fp8Weight(2 * 16, 128, 27);
  Tensor y({19, 48});
  auto mo = mem<3>(o);
  auto mb = mem<2>(woB), my = mem<2>(y);
  auto ma = woA.codesView(), mas = woA.scalesView();
  kernel<void(M3 *, Memref<uint8_t, 2> *, Memref<uint8_t, 2> *, M2 *, M2 *)>(
      "grouped_output_g2_fp8_bf16")(&mo, &ma, &mas, &mb, &my);
  EXPECT_EQ(maxDiff(y, groupedOutput(o, woA.weight, {woB, {}}, 2)), 0.0f);
  // The same as a bf16 GEMM with the dequantized weight.
  EXPECT_EQ(maxDiff(y, groupedOutput(o, dequantized(woA.weight), {woB, {}}, 2)),
            0.0f);
}

TEST_F(Kernels, GroupedOutputWithAnFP8WoBQuantizesItsInput) {
  Tensor o = random({19, 2, 64}, 28, 5.0f),
         woA = random({2 * 64, 64}, 29, 0.2f);
  FP8Weight woB = fp8Weight(48, 2 * 64, 30);
  Tensor y({19, 48});
  auto mo = mem<3>(o);
  auto ma = mem<2>(woA), my = mem<2>(y);
  auto mb = woB.codesView(), mbs = woB.scalesView();
  kernel<void(M3 *, M2 *, Memref<uint8_t, 2> *, Memref<uint8_t, 2> *, M2 *)>(
      "grouped_output_g2_bf16_fp8")(&mo, &ma, &mb, &mbs, &my);
  Tensor want = groupedOutput(o, {woA, {}}, woB.weight, 2);
  EXPECT_EQ(maxDiff(y, want), 0.0f);
  // Without the activation quantization the result differs.
  EXPECT_GT(
      maxDiff(want, groupedOutput(o, {woA, {}}, dequantized(woB.weight), 2)),
      0.0f);
}

/// Stores rows of 64 at 5 and 0 (a -1 id is skipped) in a cache of one page
/// (the kernel's 64 rows: all values, then all scales), then gathers
/// [5, 0, -1, 2]. The bytes must be exactly what the layout's codec writes,
/// and the gathered rows what it reads back.
void Kernels::checkStoreAndGather(layout::RowKind kind, Tensor rows) {
  layout::RowLayout row = *layout::describeRow(kind, 64);
  constexpr int64_t kPageRows = 64;
  std::vector<uint8_t> bytes(kPageRows * row.rowBytes(), 0), expected = bytes;
  std::vector<int64_t> ids = {5, 0, -1};
  for (int r = 0; r < 2; ++r) {
    layout::RowPlace place = layout::placeRow(row, kPageRows, ids[r]);
    layout::encodeRow(row, rows.row(r), expected.data() + place.values,
                      expected.data() + place.scales);
  }
  std::vector<int32_t> idx = {5, 0, -1, 2};
  Tensor out({1, 4, 64});
  auto mb = view<uint8_t, 1>(bytes.data(), {kPageRows * row.rowBytes()});
  auto mr = mem<2>(rows);
  auto mi = view<int64_t, 1>(ids.data(), {3});
  auto mx = view<int32_t, 2>(idx.data(), {1, 4});
  auto mo = mem<3>(out);
  std::string name =
      std::string("cache_store_gather_") + layout::rowKindName(kind) + "_d64";
  kernel<void(Memref<uint8_t, 1> *, M2 *, Memref<int64_t, 1> *,
              Memref<int32_t, 2> *, M3 *)>(name)(&mb, &mr, &mi, &mx, &mo);
  EXPECT_EQ(bytes, expected) << name;
  std::vector<float> decoded(64);
  for (int s = 0; s < 4; ++s) {
    if (idx[s] >= 0) {
      layout::RowPlace place = layout::placeRow(row, kPageRows, idx[s]);
      layout::decodeRow(row, expected.data() + place.values,
                        expected.data() + place.scales, decoded.data());
    }
    for (int f = 0; f < 64; ++f)
      EXPECT_EQ(out.data[s * 64 + f], idx[s] >= 0 ? decoded[f] : 0.0f)
          << name << " slot " << s << " feature " << f;
  }
}

/// Rows as the indexer's fp4 simulation leaves them (e2m1 values times a
/// power of two per block of 32), blocks 2^7 apart in size, one block of
/// zeros.
Tensor fp4SimulatedRows(uint64_t seed) {
  Tensor rows = random({3, 64}, seed, 3.0f);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t f = 0; f < 64; ++f) {
      float scale = f < 32 ? 1.0f : 0x1p-7f;
      float &v = rows.data[r * 64 + f];
      v = r == 2 && f >= 32 ? 0.0f : num::roundE2M1(v) * scale;
    }
  return rows;
}

TEST_F(Kernels, CacheStoreAndGatherUseTheRowLayout) {
  checkStoreAndGather(layout::RowKind::BF16, random({3, 64}, 25, 3.0f));
  for (layout::RowKind kind :
       {layout::RowKind::IndexFP8, layout::RowKind::IndexMXFP4}) {
    // Any values (rounded by the codec: the lowering must round alike),
    // and values spanning 30 binades.
    checkStoreAndGather(kind, random({3, 64}, 26, 3.0f));
    Tensor wide = random({3, 64}, 27, 1.0f);
    for (int64_t i = 0; i < 3 * 64; ++i)
      wide.data[i] *= std::ldexp(1.0f, static_cast<int>(i % 31) - 15);
    checkStoreAndGather(kind, wide);
  }
}

TEST_F(Kernels, IndexKeyLayoutsHoldFP4SimulatedKeysExactly) {
  Tensor rows = fp4SimulatedRows(28);
  for (layout::RowKind kind :
       {layout::RowKind::IndexFP8, layout::RowKind::IndexMXFP4}) {
    layout::RowLayout row = *layout::describeRow(kind, 64);
    std::vector<uint8_t> bytes(row.rowBytes());
    std::vector<float> decoded(64);
    for (int64_t r = 0; r < 3; ++r) {
      layout::encodeRow(row, rows.row(r), bytes.data(),
                        bytes.data() + row.valueBytes);
      layout::decodeRow(row, bytes.data(), bytes.data() + row.valueBytes,
                        decoded.data());
      for (int64_t f = 0; f < 64; ++f)
        ASSERT_EQ(decoded[f], rows.data[r * 64 + f])
            << layout::rowKindName(kind) << " row " << r << " feature " << f;
    }
  }
}

TEST_F(Kernels, RoPEWideRotation) {
  std::vector<int64_t> positions;
  for (int64_t p = 0; p < 40; ++p)
    positions.push_back(p);
  RopeParams params{64, 160000.0, YarnConfig{4.0, 64, 32.0, 1.0}};
  for (uint64_t seed = 30; seed < 40; ++seed) {
    Tensor k = random({40, 128}, seed), ky({40, 128});
    auto mk = mem<2>(k), mky = mem<2>(ky);
    auto mp = view<int64_t, 1>(positions.data(), {40});
    kernel<void(M2 *, Memref<int64_t, 1> *, M2 *)>(
        "rope_r2_d64_t160000_yarn_f4_o64_bf32_bs1")(&mk, &mp, &mky);
    ASSERT_EQ(maxDiff(ky, rope(k, positions, params)), 0.0f) << seed;
  }
}

TEST_F(Kernels, SweepWideHeads) {
  for (uint64_t seed = 50; seed < 250; ++seed) {
    Tensor kv = random({13, 128}, seed, 1.0f + seed % 7), y({13, 128});
    auto mkv = mem<2>(kv), my = mem<2>(y);
    kernel<void(M2 *, M2 *)>("act_quant_r2_e4m3_b64_q64")(&mkv, &my);
    ASSERT_EQ(maxDiff(y, actQuant(kv, QuantFormat::E4M3, 64, 64)), 0.0f)
        << "act_quant seed " << seed;
    Tensor q = random({13, 2, 128}, seed + 1000), qy({13, 2, 128});
    auto mq = mem<3>(q), mqy = mem<3>(qy);
    kernel<void(M3 *, M3 *)>("rms_norm_heads_eps1em06")(&mq, &mqy);
    ASSERT_EQ(maxDiff(qy, rmsNorm(q, nullptr, 1e-6)), 0.0f) << "rms " << seed;
    Tensor table = random({13, 128}, seed + 2000), o({13, 2, 128});
    std::vector<int32_t> idx(13 * 8, -1);
    std::vector<std::vector<int32_t>> lists(13);
    for (int t = 0; t < 13; ++t)
      for (int s = 0; s < 8 && s <= t; ++s) {
        idx[t * 8 + s] = t - s;
        lists[t].push_back(t - s);
      }
    std::vector<float> sink = {0.3f, -0.7f};
    auto mt = mem<2>(table), mo = mem<2>(o);
    auto mo3 = mem<3>(o);
    auto mi = view<int32_t, 2>(idx.data(), {13, 8});
    auto ms = view<float, 1>(sink.data(), {2});
    (void)mo;
    kernel<void(M3 *, M2 *, Memref<int32_t, 2> *, M1 *, M3 *)>(attentionWide)(
        &mqy, &mt, &mi, &ms, &mo3);
    Tensor want =
        sparseAttention(qy, table, lists, sink, 1.0 / std::sqrt(128.0));
    ASSERT_EQ(maxDiff(o, want), 0.0f) << "attention " << seed;
  }
}

} // namespace
