//===- Ops.cpp - reference implementation of the ops ----------------------===//

#include "core/Numerics.h"
#include "lib/Reference/Reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace v4a::ref {

static constexpr float kNegInf = -std::numeric_limits<float>::infinity();

Tensor::Tensor(std::vector<int64_t> dims, float fill) : shape(std::move(dims)) {
  data.assign(numel(), fill);
}

int64_t Tensor::numel() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1),
                         std::multiplies<int64_t>());
}

static void roundAllBF16(Tensor &t) {
  for (float &v : t.data)
    v = num::roundBF16(v);
}

/// Rows of a tensor viewed as [rows, last dim].
static int64_t rowsOf(const Tensor &t) { return t.numel() / t.dim(-1); }

//===----------------------------------------------------------------------===//
// Projections
//===----------------------------------------------------------------------===//

/// out[n] for rows [rowBegin, rowBegin + rowCount) of w, f32.
static void project(const float *x, int64_t in, const Weight &w,
                    int64_t rowBegin, int64_t rowCount, float *out) {
  const Tensor &values = w.values;
  if (!w.isFP8()) {
    for (int64_t n = 0; n < rowCount; ++n) {
      const float *wr = values.row(rowBegin + n);
      float acc = 0.0f;
      for (int64_t k = 0; k < in; ++k)
        acc += x[k] * wr[k];
      out[n] = acc;
    }
    return;
  }
  // fp8: quantize the activation per 128-wide block along K.
  int64_t blocks = (in + 127) / 128;
  std::vector<float> xq(in), xs(blocks);
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t end = std::min(in, (b + 1) * 128);
    float amax = num::kE4M3AmaxFloor;
    for (int64_t k = b * 128; k < end; ++k)
      amax = std::max(amax, std::fabs(x[k]));
    float scale =
        num::fromUE8M0Bits(num::ue8m0CeilBits(amax * (1.0f / num::kE4M3Max)));
    xs[b] = scale;
    for (int64_t k = b * 128; k < end; ++k)
      xq[k] = num::roundE4M3(x[k] / scale);
  }
  for (int64_t n = 0; n < rowCount; ++n) {
    int64_t row = rowBegin + n;
    const float *wr = values.row(row);
    const float *ws = w.scale.row(row / 128);
    float acc = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) {
      int64_t end = std::min(in, (b + 1) * 128);
      float partial = 0.0f;
      for (int64_t k = b * 128; k < end; ++k)
        partial += xq[k] * wr[k];
      acc += partial * xs[b] * ws[b];
    }
    out[n] = acc;
  }
}

Tensor linearF32(const Tensor &x, const Weight &w) {
  int64_t rows = rowsOf(x), in = x.dim(-1), out = w.values.dim(0);
  Tensor y({rows, out});
  for (int64_t t = 0; t < rows; ++t)
    project(x.row(t), in, w, 0, out, y.row(t));
  return y;
}

Tensor linear(const Tensor &x, const Weight &w) {
  Tensor y = linearF32(x, w);
  roundAllBF16(y);
  return y;
}

Weight dequantized(const Weight &w) {
  if (!w.isFP8())
    return w;
  Weight plain;
  plain.values = w.values;
  int64_t rows = w.values.dim(0), cols = w.values.dim(1);
  int64_t scaleCols = w.scale.dim(1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      plain.values.data[r * cols + c] *=
          w.scale.data[(r / 128) * scaleCols + c / 128];
  return plain;
}

Tensor groupedOutput(const Tensor &o, const Weight &fp8OrBf16WoA,
                     const Weight &woB, int64_t groups) {
  // The reference dequantizes an fp8 wo_a to bf16 at load and runs a bf16
  // GEMM on o: o is never quantized (spec section 2b).
  Weight woA = dequantized(fp8OrBf16WoA);
  int64_t tokens = o.dim(0), width = o.numel() / tokens;
  int64_t groupWidth = width / groups;
  int64_t lora = woA.values.dim(0) / groups;
  Tensor mid({tokens, groups * lora});
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t g = 0; g < groups; ++g)
      project(o.data.data() + t * width + g * groupWidth, groupWidth, woA,
              g * lora, lora, mid.row(t) + g * lora);
  roundAllBF16(mid);
  return linear(mid, woB);
}

//===----------------------------------------------------------------------===//
// Norms, RoPE, quantization, Hadamard
//===----------------------------------------------------------------------===//

Tensor rmsNorm(const Tensor &x, const Tensor *weight, double eps) {
  Tensor y = x;
  int64_t width = x.dim(-1);
  for (int64_t r = 0; r < rowsOf(x); ++r) {
    float *row = y.row(r);
    float sum = 0.0f;
    for (int64_t i = 0; i < width; ++i)
      sum += row[i] * row[i];
    float inv = 1.0f / std::sqrt(sum / width + static_cast<float>(eps));
    for (int64_t i = 0; i < width; ++i)
      row[i] = row[i] * inv * (weight ? weight->data[i] : 1.0f);
  }
  roundAllBF16(y);
  return y;
}

std::vector<float> ropeFrequencies(const RopeParams &params) {
  int64_t half = params.ropeDim / 2;
  double dim = static_cast<double>(params.ropeDim);
  std::vector<double> freqs(half);
  for (int64_t i = 0; i < half; ++i)
    freqs[i] = std::pow(params.theta, -2.0 * i / dim);
  if (params.yarn && params.yarn->originalMaxPositionEmbeddings > 0) {
    const YarnConfig &yarn = *params.yarn;
    double length = static_cast<double>(yarn.originalMaxPositionEmbeddings);
    auto correction = [&](double beta) {
      return dim * std::log(length / (beta * 2 * M_PI)) /
             (2 * std::log(params.theta));
    };
    double low = std::floor(correction(yarn.betaFast));
    double high = std::ceil(correction(yarn.betaSlow));
    low = std::clamp(low, 0.0, dim - 1);
    high = std::clamp(high, 0.0, dim - 1);
    if (low == high)
      high += 0.001;
    for (int64_t i = 0; i < half; ++i) {
      double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      double smooth = 1.0 - ramp;
      freqs[i] = freqs[i] / yarn.factor * (1 - smooth) + freqs[i] * smooth;
    }
  }
  return std::vector<float>(freqs.begin(), freqs.end());
}

Tensor rope(const Tensor &x, const std::vector<int64_t> &positions,
            const RopeParams &params, bool inverse) {
  Tensor y = x;
  std::vector<float> freqs = ropeFrequencies(params);
  int64_t tokens = x.dim(0), width = x.dim(-1);
  int64_t vectorsPerToken = rowsOf(x) / tokens;
  int64_t start = width - params.ropeDim;
  for (int64_t t = 0; t < tokens; ++t) {
    float position = static_cast<float>(positions[t]);
    for (int64_t v = 0; v < vectorsPerToken; ++v) {
      float *row = y.row(t * vectorsPerToken + v) + start;
      for (size_t i = 0; i < freqs.size(); ++i) {
        float angle = position * freqs[i];
        float c = std::cos(angle), s = std::sin(angle);
        if (inverse)
          s = -s;
        float re = row[2 * i], im = row[2 * i + 1];
        row[2 * i] = re * c - im * s;
        row[2 * i + 1] = re * s + im * c;
      }
    }
  }
  roundAllBF16(y);
  return y;
}

Tensor actQuant(const Tensor &x, QuantFormat format, int64_t block,
                int64_t quantDims, bool pow2Scale) {
  Tensor y = x;
  int64_t width = x.dim(-1);
  if (quantDims < 0)
    quantDims = width;
  float fmax = format == QuantFormat::E4M3 ? num::kE4M3Max : num::kE2M1Max;
  for (int64_t r = 0; r < rowsOf(x); ++r) {
    float *row = y.row(r);
    for (int64_t b = 0; b < quantDims; b += block) {
      float amax = format == QuantFormat::E4M3 ? num::kE4M3AmaxFloor
                                               : num::kE2M1AmaxFloor;
      for (int64_t i = b; i < b + block; ++i)
        amax = std::max(amax, std::fabs(row[i]));
      float scale = amax * (1.0f / fmax);
      if (pow2Scale)
        scale = num::fromUE8M0Bits(num::ue8m0CeilBits(scale));
      for (int64_t i = b; i < b + block; ++i) {
        float v = std::clamp(row[i] / scale, -fmax, fmax);
        v = format == QuantFormat::E4M3 ? num::roundE4M3(v) : num::roundE2M1(v);
        row[i] = v * scale;
      }
    }
  }
  roundAllBF16(y);
  return y;
}

Tensor hadamard(const Tensor &x) {
  Tensor y = x;
  int64_t n = x.dim(-1);
  float norm = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t r = 0; r < rowsOf(x); ++r) {
    float *row = y.row(r);
    for (int64_t h = 1; h < n; h *= 2)
      for (int64_t i = 0; i < n; i += 2 * h)
        for (int64_t j = i; j < i + h; ++j) {
          float a = row[j], b = row[j + h];
          row[j] = a + b;
          row[j + h] = a - b;
        }
    for (int64_t i = 0; i < n; ++i)
      row[i] *= norm;
  }
  roundAllBF16(y);
  return y;
}

//===----------------------------------------------------------------------===//
// Compressor
//===----------------------------------------------------------------------===//

/// Softmax-weighted sum over slots, per feature: sum kv_s * e^(sc_s - m) /
/// sum e^(sc_s - m). Slots with score -inf contribute nothing.
static float pool(const std::vector<float> &kv, const std::vector<float> &sc) {
  float m = kNegInf;
  for (float s : sc)
    m = std::max(m, s);
  if (m == kNegInf)
    return 0.0f;
  float num = 0.0f, den = 0.0f;
  for (size_t i = 0; i < kv.size(); ++i) {
    float e = std::exp(sc[i] - m);
    num += kv[i] * e;
    den += e;
  }
  return num / den;
}

Tensor compress(const Tensor &kv, const Tensor &score, const Tensor &ape,
                int64_t ratio, bool overlap) {
  int64_t tokens = kv.dim(0), width = kv.dim(1);
  int64_t d = overlap ? width / 2 : width;
  int64_t groups = tokens / ratio;
  Tensor out({groups, d});
  std::vector<float> slotKv, slotSc;
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t f = 0; f < d; ++f) {
      slotKv.clear();
      slotSc.clear();
      if (overlap)
        for (int64_t t = (g - 1) * ratio; t < g * ratio; ++t) {
          slotKv.push_back(t < 0 ? 0.0f : kv.row(t)[f]);
          slotSc.push_back(t < 0 ? kNegInf
                                 : score.row(t)[f] + ape.row(t % ratio)[f]);
        }
      int64_t offset = overlap ? d : 0;
      for (int64_t t = g * ratio; t < (g + 1) * ratio; ++t) {
        slotKv.push_back(kv.row(t)[offset + f]);
        slotSc.push_back(score.row(t)[offset + f] +
                         ape.row(t % ratio)[offset + f]);
      }
      out.row(g)[f] = pool(slotKv, slotSc);
    }
  return out;
}

CompressorState makeCompressorState(int64_t ratio, bool overlap,
                                    int64_t width) {
  int64_t slots = (overlap ? 2 : 1) * ratio;
  CompressorState state;
  state.kv = Tensor({slots, width}, 0.0f);
  state.score = Tensor({slots, width}, kNegInf);
  return state;
}

std::optional<std::vector<float>>
compressStep(CompressorState &state, const float *kv, const float *score,
             const Tensor &ape, int64_t position, int64_t ratio, bool overlap) {
  int64_t width = state.kv.dim(1);
  int64_t d = overlap ? width / 2 : width;
  int64_t slot = position % ratio;
  int64_t current = overlap ? ratio : 0;
  const float *bias = ape.data.empty() ? nullptr : ape.row(slot);
  for (int64_t f = 0; f < width; ++f) {
    state.kv.row(current + slot)[f] = kv[f];
    state.score.row(current + slot)[f] = score[f] + (bias ? bias[f] : 0.0f);
  }
  if (slot != ratio - 1)
    return std::nullopt;
  std::vector<float> entry(d), slotKv, slotSc;
  for (int64_t f = 0; f < d; ++f) {
    slotKv.clear();
    slotSc.clear();
    if (overlap)
      for (int64_t s = 0; s < ratio; ++s) {
        slotKv.push_back(state.kv.row(s)[f]);
        slotSc.push_back(state.score.row(s)[f]);
      }
    int64_t offset = overlap ? d : 0;
    for (int64_t s = current; s < current + ratio; ++s) {
      slotKv.push_back(state.kv.row(s)[offset + f]);
      slotSc.push_back(state.score.row(s)[offset + f]);
    }
    entry[f] = pool(slotKv, slotSc);
  }
  // The completed group becomes the previous one; the current slots reset.
  for (int64_t s = 0; s < ratio; ++s)
    for (int64_t f = 0; f < width; ++f) {
      if (overlap) {
        state.kv.row(s)[f] = state.kv.row(current + s)[f];
        state.score.row(s)[f] = state.score.row(current + s)[f];
      }
      state.kv.row(current + s)[f] = 0.0f;
      state.score.row(current + s)[f] = kNegInf;
    }
  return entry;
}

//===----------------------------------------------------------------------===//
// Indexer and selection
//===----------------------------------------------------------------------===//

Tensor indexerScores(const Tensor &q, const Tensor &keys, const Tensor &weights,
                     const std::vector<int64_t> &positions, int64_t ratio) {
  int64_t tokens = q.dim(0), heads = q.dim(1), width = q.dim(2);
  int64_t rows = keys.shape.empty() ? 0 : keys.dim(0);
  Tensor scores({tokens, rows}, kNegInf);
  for (int64_t t = 0; t < tokens; ++t) {
    int64_t valid = std::min(rows, (positions[t] + 1) / ratio);
    for (int64_t j = 0; j < valid; ++j) {
      // The order `v4a.indexer_score` documents: partial q sums heads
      // 8i + 2q and 8i + 2q + 1, i ascending.
      float partial[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int64_t h = 0; h < heads; ++h) {
        const float *qh = q.data.data() + (t * heads + h) * width;
        float dot = 0.0f;
        for (int64_t i = 0; i < width; ++i)
          dot += qh[i] * keys.row(j)[i];
        partial[h % 8 / 2] += std::max(dot, 0.0f) * weights.row(t)[h];
      }
      scores.row(t)[j] = (partial[0] + partial[2]) + (partial[1] + partial[3]);
    }
  }
  return scores;
}

/// Ranks candidate (score, id) pairs: score descending, then id ascending.
static std::vector<int32_t> best(std::vector<std::pair<float, int32_t>> items,
                                 int64_t k) {
  std::sort(items.begin(), items.end(), [](const auto &a, const auto &b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<int32_t> result(k, -1);
  for (int64_t i = 0; i < k && i < static_cast<int64_t>(items.size()); ++i)
    result[i] = items[i].second;
  return result;
}

std::vector<std::vector<int32_t>> topk(const Tensor &scores, int64_t k) {
  std::vector<std::vector<int32_t>> result;
  for (int64_t t = 0; t < scores.dim(0); ++t) {
    std::vector<std::pair<float, int32_t>> items;
    for (int64_t j = 0; j < scores.dim(1); ++j)
      if (std::isfinite(scores.row(t)[j]))
        items.push_back({scores.row(t)[j], static_cast<int32_t>(j)});
    result.push_back(best(std::move(items), k));
  }
  return result;
}

std::vector<std::vector<int32_t>>
blockTopk(const Tensor &scores, int64_t blockSize, int64_t numBlocks) {
  std::vector<std::vector<int32_t>> result;
  for (int64_t t = 0; t < scores.dim(0); ++t) {
    std::vector<std::pair<float, int32_t>> items;
    for (int64_t b = 0; b * blockSize < scores.dim(1); ++b) {
      float m = kNegInf;
      for (int64_t j = b * blockSize;
           j < std::min(scores.dim(1), (b + 1) * blockSize); ++j)
        m = std::max(m, scores.row(t)[j]);
      if (std::isfinite(m))
        items.push_back({m, static_cast<int32_t>(b)});
    }
    result.push_back(best(std::move(items), numBlocks));
  }
  return result;
}

std::vector<std::vector<int32_t>>
topkInBlocks(const Tensor &scores, int64_t k,
             const std::vector<std::vector<int32_t>> &blocks,
             int64_t blockSize) {
  std::vector<std::vector<int32_t>> result;
  for (int64_t t = 0; t < scores.dim(0); ++t) {
    std::vector<std::pair<float, int32_t>> items;
    for (int32_t b : blocks[t]) {
      if (b < 0)
        continue;
      for (int64_t j = b * blockSize;
           j < std::min(scores.dim(1), (b + 1) * blockSize); ++j)
        if (std::isfinite(scores.row(t)[j]))
          items.push_back({scores.row(t)[j], static_cast<int32_t>(j)});
    }
    result.push_back(best(std::move(items), k));
  }
  return result;
}

std::vector<std::vector<int32_t>>
windowIndices(const std::vector<int64_t> &positions, int64_t window) {
  std::vector<std::vector<int32_t>> result;
  for (int64_t i : positions) {
    std::vector<int32_t> rows(window, -1);
    int64_t first = std::max<int64_t>(0, i - window + 1);
    for (int64_t p = first; p <= i; ++p)
      rows[p - first] = static_cast<int32_t>(p % window);
    result.push_back(rows);
  }
  return result;
}

Tensor sparseAttention(const Tensor &q, const Tensor &kv,
                       const std::vector<std::vector<int32_t>> &indices,
                       const std::vector<float> &sink, double scale) {
  int64_t tokens = q.dim(0), heads = q.dim(1), width = q.dim(2);
  Tensor out({tokens, heads, width}, 0.0f);
  float s = static_cast<float>(scale);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      const float *qh = q.data.data() + (t * heads + h) * width;
      float *oh = out.data.data() + (t * heads + h) * width;
      std::vector<std::pair<int32_t, float>> logits;
      float m = kNegInf;
      for (int32_t row : indices[t]) {
        if (row < 0)
          continue;
        float dot = 0.0f;
        for (int64_t i = 0; i < width; ++i)
          dot += qh[i] * kv.row(row)[i];
        logits.push_back({row, s * dot});
        m = std::max(m, s * dot);
      }
      if (logits.empty())
        continue; // the sink takes all the mass
      float den = std::exp(sink[h] - m);
      for (auto [row, l] : logits) {
        float e = std::exp(l - m);
        den += e;
        // Probabilities enter the PV product as bf16 (spec section 2b).
        float p = num::roundBF16(e);
        for (int64_t i = 0; i < width; ++i)
          oh[i] += p * kv.row(row)[i];
      }
      for (int64_t i = 0; i < width; ++i)
        oh[i] /= den;
    }
  roundAllBF16(out);
  return out;
}

} // namespace v4a::ref
