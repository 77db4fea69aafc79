//===- v4a-check-gemms.cpp - every library product of a package, checked --===//
//
// For each package and token count, the products its step functions send to
// the GEMM library (the Gemm ops their host programs issue, found without
// running anything) run once on the GPU through the runtime's own path, on
// fresh random operands, and are compared with a float64 product of the
// same operands: fp8 weights with 128x128 block scales of 2^-20..2^10, fp8
// activations quantized per 1x128 block as the step does, with rows and
// blocks of very different magnitude. Each product is then timed. Runtime
// only (no MLIR or LLVM): it runs on the GPU machine as built here.
//
//===----------------------------------------------------------------------===//

#include "core/Numerics.h"
#include "core/Package.h"
#include "core/TensorSpecs.h"
#include "runtime/CudaBackend.h"
#include "runtime/StepGemms.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

using namespace v4a;
using namespace v4a::rt;

namespace {

using GemmType = step::HostOp::GemmType;

struct Options {
  std::vector<std::string> packages;
  std::vector<int64_t> tokens = {1, 2, 3, 4, 33, 128, 1000, 8192};
  double tolerance = 2e-3;
  int repeat = 20;
  uint64_t seed = 0;
  bool seedGiven = false;
  /// An experiment: fp8 products whose K is not a multiple of 512 run with
  /// K padded to one by zero blocks.
  bool padK = false;
  /// Only list the products (no GPU needed).
  bool list = false;
  /// Print every product of one step in program order (no GPU needed):
  /// the layers' calls, at the first token count.
  bool sequence = false;
  std::vector<int64_t> layers;
};

int fail(const std::string &message) {
  std::fprintf(stderr, "v4a-check-gemms: error: %s\n", message.c_str());
  return 1;
}

bool parseList(const std::string &text, std::vector<int64_t> &values,
               long long lowest = 1) {
  values.clear();
  size_t at = 0;
  while (at <= text.size()) {
    size_t comma = text.find(',', at);
    std::string item = text.substr(at, comma - at);
    char *end = nullptr;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end || v < lowest || v > (1 << 20))
      return false;
    values.push_back(v);
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  return !values.empty();
}

bool parseOptions(int argc, char **argv, Options &o, std::string &error) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string &out) {
      if (i + 1 >= argc) {
        error = a + " needs a value";
        return false;
      }
      out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: v4a-check-gemms PACKAGE... [--tokens 1,2,..] "
          "[--tolerance T] [--repeat N] [--seed S] [--pad-k] [--list]\n"
          "       v4a-check-gemms PACKAGE --sequence --tokens T [--layers L]\n"
          "Runs every library product of each package's step functions at\n"
          "each token count on GPU 0 against a float64 product of the same\n"
          "random operands; prints one line per product shape (relative\n"
          "error, time, TFLOP/s, TB/s) and fails when an error exceeds T\n"
          "(default 2e-3). --list prints the products without a GPU;\n"
          "--sequence prints one step's products in program order.\n");
      std::exit(0);
    } else if (a == "--tokens") {
      if (!value(v) || !parseList(v, o.tokens)) {
        error = "--tokens takes a list of counts in [1, 2^20]";
        return false;
      }
    } else if (a == "--tolerance") {
      if (!value(v))
        return false;
      o.tolerance = std::strtod(v.c_str(), nullptr);
      if (!(o.tolerance > 0 && o.tolerance < 1)) {
        error = "--tolerance takes a value in (0, 1)";
        return false;
      }
    } else if (a == "--repeat") {
      if (!value(v))
        return false;
      o.repeat = std::atoi(v.c_str());
      if (o.repeat < 1 || o.repeat > 10000) {
        error = "--repeat takes a count in [1, 10000]";
        return false;
      }
    } else if (a == "--list") {
      o.list = true;
    } else if (a == "--sequence") {
      o.sequence = true;
    } else if (a == "--layers") {
      if (!value(v) || !parseList(v, o.layers, 0)) {
        error = "--layers takes a list of layer ids";
        return false;
      }
    } else if (a == "--pad-k") {
      o.padK = true;
    } else if (a == "--seed") {
      if (!value(v))
        return false;
      o.seed = std::strtoull(v.c_str(), nullptr, 10);
      o.seedGiven = true;
    } else if (!a.empty() && a[0] == '-') {
      error = "unknown option " + a;
      return false;
    } else {
      o.packages.push_back(a);
    }
  }
  if (o.packages.empty())
    error = "no package given";
  return !o.packages.empty();
}

/// A checkpoint name without its ".weight", if it has one.
std::optional<std::string> weightStem(const std::string &name) {
  const std::string suffix = ".weight";
  if (name.size() <= suffix.size() ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  return name.substr(0, name.size() - suffix.size());
}

/// The merged projections (v4a-merge-projections) of `function` whose
/// stacked weight has the product's shape, as "wq_a+wkv".
std::string mergedName(const step::Function &function, const GemmCall &c) {
  for (const step::Arg &arg : function.args) {
    if (arg.bind.find('+') == std::string::npos || c.batch != 1 ||
        arg.shape != std::vector<int64_t>{c.m, c.k})
      continue;
    std::string name;
    for (const std::string &part : step::stackedParts(arg.bind))
      name += (name.empty() ? "" : "+") + weightStem(part).value_or(part);
    return name;
  }
  return "";
}

/// What a product is called: its merged projections, or the projections
/// whose weights have its shape (wo_a, the grouped one, is the batched
/// product; the compressors' are the ones with f32 results).
std::string productName(const pkg::Package &package,
                        const step::Function &function, const GemmCall &c) {
  if (std::string merged = mergedName(function, c); !merged.empty())
    return merged;
  std::vector<std::string> names;
  for (const LayerSpec &layer : package.layers)
    for (const TensorSpec &spec : layerTensorSpecs(package.config, layer)) {
      const std::string &name = spec.name;
      std::optional<std::string> stem = weightStem(name);
      bool compressor = name.find("compressor.") != std::string::npos;
      if (!stem || spec.shape.size() != 2 ||
          (name == "wo_a.weight") != (c.batch > 1) ||
          compressor != (c.type == GemmType::BF16F32) ||
          spec.shape[0] != c.m * c.batch || spec.shape[1] != c.k)
        continue;
      if (std::find(names.begin(), names.end(), *stem) == names.end())
        names.push_back(*stem);
    }
  std::string joined;
  for (const std::string &name : names)
    joined += (joined.empty() ? "" : "|") + name;
  return joined.empty() ? "?" : joined;
}

struct Product {
  std::string function, name;
  int64_t tokens = 0;
  GemmCall call;
  /// Position in the order the steps issue the products.
  size_t order = 0;
};

/// Device memory filled from the host, released with the backend.
struct Buffer {
  Backend *backend = nullptr;
  void *data = nullptr;
  Buffer(Backend &b, const void *host, int64_t bytes, std::string &error)
      : backend(&b), data(b.allocate(bytes, error)) {
    if (data && host)
      b.copyToDevice(data, host, bytes);
  }
  ~Buffer() {
    if (data)
      backend->release(data);
  }
};

/// A random power of two 2^e, e uniform in [lo, hi].
float powerOfTwo(std::mt19937_64 &rng, int lo, int hi) {
  return std::ldexp(1.0f, std::uniform_int_distribution<int>(lo, hi)(rng));
}

/// Host operands of a product: A (the weight) and B (the activation) as
/// the library reads them, with their f32 scale tables for fp8.
struct Operands {
  std::vector<uint8_t> a, b;
  std::vector<float> aScale, bScale;
  int64_t aBlocks4 = 0, bRows4 = 0;

  /// The exact values the product multiplies.
  double weight(const GemmCall &c, bool fp8, int64_t batch, int64_t m,
                int64_t k) const {
    if (!fp8)
      return bf16At(a, batch * c.strideA + m * c.lda + k);
    return double(num::fromE4M3Bits(a[m * c.k + k])) *
           aScale[(m / 128) * aBlocks4 + k / 128];
  }
  double activation(const GemmCall &c, bool fp8, int64_t batch, int64_t n,
                    int64_t k) const {
    if (!fp8)
      return bf16At(b, batch * c.strideB + n * c.ldb + k);
    return double(num::fromE4M3Bits(b[n * c.k + k])) *
           bScale[(k / 128) * bRows4 + n];
  }
  static double bf16At(const std::vector<uint8_t> &bits, int64_t i) {
    uint16_t v;
    std::memcpy(&v, &bits[2 * i], 2);
    return num::fromBF16Bits(v);
  }
};

/// A random fp8 weight with 128x128 block scales of 2^-20..2^10 (the
/// table padded to a multiple of 4 blocks along K with zeros); columns from
/// `validK` on are zero (K padded with zero blocks).
void makeFP8Weight(const GemmCall &c, int64_t validK, std::mt19937_64 &rng,
                   Operands &o) {
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  int64_t blocks = (c.k + 127) / 128;
  o.aBlocks4 = (blocks + 3) / 4 * 4;
  int64_t rowBlocks = (c.m + 127) / 128;
  o.aScale.assign(rowBlocks * o.aBlocks4, 0.0f);
  for (int64_t r = 0; r < rowBlocks; ++r)
    for (int64_t b = 0; b < blocks; ++b)
      o.aScale[r * o.aBlocks4 + b] = powerOfTwo(rng, -20, 10);
  o.a.resize(c.m * c.k);
  for (int64_t m = 0; m < c.m; ++m)
    for (int64_t k = 0; k < c.k; ++k)
      o.a[m * c.k + k] = k < validK ? num::toE4M3Bits(uniform(rng)) : 0;
}

/// Activations with every row and 1x128 block of its own magnitude,
/// quantized as the step quantizes them (ue8m0 scale of amax / 448): e4m3
/// rows padded to a multiple of 4, scales [blocks, rows padded].
void makeFP8Activation(const GemmCall &c, int64_t validK, std::mt19937_64 &rng,
                       Operands &o) {
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  int64_t blocks = (c.k + 127) / 128;
  o.bRows4 = (c.n + 3) / 4 * 4;
  o.bScale.assign(blocks * o.bRows4, 0.0f);
  o.b.assign(o.bRows4 * c.k, 0);
  std::vector<float> x(128);
  for (int64_t n = 0; n < c.n; ++n) {
    float row = powerOfTwo(rng, -8, 8);
    for (int64_t b = 0; b < blocks; ++b) {
      int64_t width = std::min<int64_t>(128, c.k - b * 128);
      float block = row * powerOfTwo(rng, -6, 6), amax = 0.0f;
      for (int64_t i = 0; i < width; ++i) {
        x[i] =
            b * 128 + i < validK ? num::roundBF16(block * uniform(rng)) : 0.0f;
        amax = std::max(amax, std::fabs(x[i]));
      }
      float scale = num::fromUE8M0Bits(num::ue8m0CeilBits(
          std::max(amax, num::kE4M3AmaxFloor) * (1.0f / num::kE4M3Max)));
      o.bScale[b * o.bRows4 + n] = scale;
      for (int64_t i = 0; i < width; ++i)
        o.b[n * c.k + b * 128 + i] = num::toE4M3Bits(x[i] / scale);
    }
  }
}

/// Elements a strided batch of `rows` x `cols` matrices spans.
int64_t span(int64_t batch, int64_t stride, int64_t rows, int64_t ld,
             int64_t cols) {
  return (batch - 1) * stride + (rows - 1) * ld + cols;
}

void fillBF16(std::vector<uint8_t> &bits, int64_t count, float magnitude,
              std::mt19937_64 &rng) {
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  bits.resize(2 * count);
  for (int64_t i = 0; i < count; ++i) {
    uint16_t v = num::toBF16Bits(magnitude * uniform(rng));
    std::memcpy(&bits[2 * i], &v, 2);
  }
}

struct Result {
  bool library = false;
  /// rms(D - exact) / rms(exact), and the largest distance from the exact
  /// product rounded to bf16, in its units of the last place.
  double rel = 0.0, ulps = 0.0, micros = 0.0;
};

/// |got - exact| in units of the last bf16 place of bf16(exact).
double ulpsFromRounded(double got, double exact) {
  float rounded = num::roundBF16(static_cast<float>(exact));
  if (std::isnan(got))
    return INFINITY;
  if (got == rounded)
    return 0.0;
  int exponent = 0;
  std::frexp(rounded == 0.0f ? got : rounded, &exponent);
  return std::fabs(got - rounded) / std::ldexp(1.0, exponent - 8);
}

/// The weight of the previous product, reused when the next has the same
/// (products come sorted by weight shape).
struct WeightCache {
  GemmCall shape;
  bool valid = false;
  Operands operands;
};

bool sameWeight(const GemmCall &a, const GemmCall &b) {
  return a.type == b.type && a.m == b.m && a.k == b.k && a.lda == b.lda &&
         a.batch == b.batch && a.strideA == b.strideA;
}

bool runProduct(CudaBackend &gpu, GemmCall c, const Options &opts,
                std::mt19937_64 &rng, WeightCache &cache, Result &r,
                std::string &error) {
  bool fp8 = c.type == GemmType::FP8;
  int64_t validK = c.k;
  if (fp8 && opts.padK && c.k % 512)
    c.k = c.lda = c.ldb = (c.k + 511) / 512 * 512;
  if (!cache.valid || !sameWeight(cache.shape, c)) {
    cache.operands = Operands();
    if (fp8)
      makeFP8Weight(c, validK, rng, cache.operands);
    else
      fillBF16(cache.operands.a, span(c.batch, c.strideA, c.m, c.lda, c.k),
               1.0f / std::sqrt(float(c.k)), rng);
    cache.shape = c;
    cache.valid = true;
  }
  Operands &o = cache.operands;
  if (fp8)
    makeFP8Activation(c, validK, rng, o);
  else
    fillBF16(o.b, span(c.batch, c.strideB, c.n, c.ldb, c.k), 1.0f, rng);
  int64_t dElements = span(c.batch, c.strideD, c.n, c.ldd, c.m);
  bool f32Result = c.type == GemmType::BF16F32;
  int64_t dBytes = (f32Result ? 4 : 2) * dElements;
  auto bytesOf = [](const std::vector<float> &v) {
    return std::max<int64_t>(4, 4 * static_cast<int64_t>(v.size()));
  };
  Buffer a(gpu, o.a.data(), o.a.size(), error),
      b(gpu, o.b.data(), o.b.size(), error), d(gpu, nullptr, dBytes, error),
      sa(gpu, o.aScale.data(), bytesOf(o.aScale), error),
      sb(gpu, o.bScale.data(), bytesOf(o.bScale), error);
  if (!a.data || !b.data || !d.data || !sa.data || !sb.data)
    return false;
  // Poisoned: an element the library leaves unwritten reads as NaN.
  std::vector<uint8_t> out(dBytes, 0xff);
  gpu.copyToDevice(d.data, out.data(), dBytes);
  c.a = a.data, c.b = b.data, c.d = d.data;
  if (fp8)
    c.aScale = sa.data, c.bScale = sb.data;
  if (!gpu.gemm(c, r.library, error))
    return false;
  if (!r.library)
    return true;
  if (!gpu.synchronize(error))
    return false;
  gpu.copyToHost(out.data(), d.data, dBytes);
  auto result = [&](int64_t i) -> double {
    if (f32Result) {
      float v;
      std::memcpy(&v, &out[4 * i], 4);
      return v;
    }
    return Operands::bf16At(out, i);
  };
  // Sampled rows and columns of each batch, about 2^28 multiply-adds in all.
  double err2 = 0.0, ref2 = 0.0;
  int64_t rows = std::min<int64_t>(c.n, 16);
  int64_t cols = std::min<int64_t>(
      c.m, std::max<int64_t>(256, (int64_t(1) << 28) / (rows * c.k * c.batch)));
  std::vector<double> x(c.k);
  for (int64_t i = 0; i < c.batch; ++i)
    for (int64_t s = 0; s < rows; ++s) {
      int64_t n = rows == c.n ? s : (s * 7919) % c.n;
      for (int64_t k = 0; k < c.k; ++k)
        x[k] = o.activation(c, fp8, i, n, k);
      for (int64_t j = 0; j < cols; ++j) {
        int64_t m = cols == c.m ? j : (j * 104729) % c.m;
        double sum = 0.0;
        for (int64_t k = 0; k < c.k; ++k)
          sum += x[k] * o.weight(c, fp8, i, m, k);
        double got = result(i * c.strideD + n * c.ldd + m);
        err2 += (got - sum) * (got - sum);
        ref2 += sum * sum;
        if (!f32Result)
          r.ulps = std::max(r.ulps, ulpsFromRounded(got, sum));
      }
    }
  r.rel = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  if (std::isnan(r.rel))
    r.rel = INFINITY;
  auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < opts.repeat; ++i) {
    bool done = false;
    if (!gpu.gemm(c, done, error))
      return false;
  }
  if (!gpu.synchronize(error))
    return false;
  r.micros = std::chrono::duration<double, std::micro>(
                 std::chrono::steady_clock::now() - begin)
                 .count() /
             opts.repeat;
  return true;
}

/// Bytes a product must move at least: its operands, scales and result.
double minimumBytes(const GemmCall &c) {
  double input = c.type == GemmType::FP8 ? 1.0 : 2.0;
  double batch = static_cast<double>(c.batch);
  double result = c.type == GemmType::BF16F32 ? 4.0 : 2.0;
  return batch * (input * (c.m * c.k + c.n * c.k) + result * c.m * c.n);
}

/// The distinct products of a package's step functions over `tokens`.
bool productsOf(const std::string &path, const std::vector<int64_t> &tokens,
                std::vector<Product> &products, std::string &error) {
  std::optional<pkg::Package> package = pkg::read(path, "", error);
  if (!package)
    return false;
  std::vector<StepProduct> found;
  if (!distinctStepProducts(package->functions, package->calls, tokens, found,
                            error)) {
    error = path + ": " + error;
    return false;
  }
  for (const StepProduct &p : found)
    products.push_back(
        {package->functions[p.function].name,
         productName(*package, package->functions[p.function], p.call),
         p.tokens, p.call, products.size()});
  // Products of one weight next to each other: it is made once. Ties keep
  // the steps' order (std::sort with the position as the last key).
  std::sort(products.begin(), products.end(),
            [](const Product &x, const Product &y) {
              const GemmCall &a = x.call, &b = y.call;
              return std::make_tuple(a.type, a.m, a.k, a.lda, a.batch,
                                     a.strideA, x.order) <
                     std::make_tuple(b.type, b.m, b.k, b.lda, b.batch,
                                     b.strideA, y.order);
            });
  return true;
}

/// One step's products in the order the step issues them.
int printSequence(const Options &o) {
  std::string error;
  std::optional<pkg::Package> package = pkg::read(o.packages[0], "", error);
  if (!package)
    return fail(error);
  for (const step::Call &call : package->calls) {
    if (call.layer < 0 ||
        (!o.layers.empty() && std::find(o.layers.begin(), o.layers.end(),
                                        call.layer) == o.layers.end()))
      continue;
    const step::Function &function = package->functions[call.function];
    std::vector<GemmCall> calls;
    if (!stepGemms(function, o.tokens[0], calls, error))
      return fail(function.name + ": " + error);
    for (const GemmCall &c : calls)
      std::printf("layer %lld %s %s: %s\n", static_cast<long long>(call.layer),
                  function.name.c_str(),
                  productName(*package, function, c).c_str(),
                  describeGemm(c).c_str());
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Options o;
  std::string error;
  if (!parseOptions(argc, argv, o, error))
    return fail(error);
  if (o.sequence)
    return printSequence(o);
  if (!o.seedGiven)
    o.seed = static_cast<uint64_t>(
        std::chrono::steady_clock::now().time_since_epoch().count());
  std::mt19937_64 rng(o.seed);
  std::unique_ptr<CudaBackend> gpu;
  if (!o.list) {
    gpu = CudaBackend::create(0, error);
    if (!gpu)
      return fail(error);
    std::printf("device %s, seed %llu, tolerance %g\n",
                gpu->deviceName().c_str(),
                static_cast<unsigned long long>(o.seed), o.tolerance);
  }
  int failures = 0, refused = 0, checked = 0;
  WeightCache cache;
  for (const std::string &path : o.packages) {
    std::vector<Product> products;
    if (!productsOf(path, o.tokens, products, error))
      return fail(error);
    for (const Product &p : products) {
      const GemmCall &c = p.call;
      std::printf("%s %s %s T=%lld %s batch %lld, M %lld, N %lld, K %lld",
                  path.c_str(), p.function.c_str(), p.name.c_str(),
                  static_cast<long long>(p.tokens),
                  step::HostOp::gemmTypeName(c.type),
                  static_cast<long long>(c.batch), static_cast<long long>(c.n),
                  static_cast<long long>(c.m), static_cast<long long>(c.k));
      if (o.list) {
        std::printf("\n");
        continue;
      }
      if (c.empty()) {
        std::printf(": empty, nothing to run\n");
        continue;
      }
      Result r;
      if (!runProduct(*gpu, c, o, rng, cache, r, error))
        return fail(path + ": " + error);
      if (!r.library) {
        ++refused;
        std::printf(": the library refuses it (the generated kernel runs)\n");
        continue;
      }
      ++checked;
      // A few bf16 elements' rms is noisy: there, within one ulp of the
      // rounded exact product passes too. f32 results take the rms alone.
      bool ok = r.rel <= o.tolerance ||
                (c.type != GemmType::BF16F32 && r.ulps <= 1.0);
      failures += ok ? 0 : 1;
      double flops = 2.0 * c.batch * c.m * c.n * c.k;
      std::printf(": rel %.3g, max %g ulp, %.1f us, %.1f TFLOP/s, %.2f TB/s: "
                  "%s\n",
                  r.rel, r.ulps, r.micros, flops / r.micros * 1e-6,
                  minimumBytes(c) / r.micros * 1e-6, ok ? "PASS" : "FAIL");
    }
  }
  if (o.list)
    return 0;
  std::printf("%d products checked, %d failed, %d refused by the library\n",
              checked, failures, refused);
  return failures ? 1 : 0;
}
