//===- v4a-run.cpp - run a model's attention layers -----------------------===//
//
// v4a-run CONFIG.json --backend=cpu [--weights FILE | --random-weights SEED]
//         [--prompt-len N --decode-steps M | --inputs FILE] [--outputs FILE]
//         [--check [--tolerance T]]
//
// Runs every attention layer through the compiled kernels. With --check the
// reference implementation runs alongside and the largest absolute and
// relative error of every layer's output is printed.
//
//===----------------------------------------------------------------------===//

#include "lib/Engine/Checkpoint.h"
#include "lib/Reference/Reference.h"
#include "runtime/FileIO.h"
#include "runtime/Numerics.h"
#include "runtime/SafeTensors.h"
#include "v4a/Engine.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <optional>

using namespace llvm;
using namespace v4a;

static cl::opt<std::string> inputPath(cl::Positional, cl::Required,
                                      cl::desc("<config.json>"));
static cl::opt<std::string> backend("backend", cl::desc("cpu"),
                                    cl::init("cpu"));
static cl::opt<std::string>
    weightsPath("weights", cl::desc("Checkpoint (.safetensors or "
                                    "model.safetensors.index.json)"));
static cl::opt<int64_t> randomSeed("random-weights",
                                   cl::desc("Seeded random weights"),
                                   cl::init(-1));
static cl::opt<int64_t> promptLen("prompt-len", cl::desc("Prefill tokens"),
                                  cl::init(16));
static cl::opt<int64_t> decodeSteps("decode-steps",
                                    cl::desc("Single-token steps after it"),
                                    cl::init(4));
static cl::opt<std::string>
    inputsPath("inputs", cl::desc("x.step{k} [B, S, dim] inputs"));
static cl::opt<std::string>
    outputsPath("outputs",
                cl::desc("Write y.step{k}.layer{l} [B, S, dim] f32 here"));
static cl::opt<bool> check("check",
                           cl::desc("Compare every layer with the reference"));
static cl::opt<double>
    tolerance("tolerance",
              cl::desc("Largest accepted absolute error with --check"),
              cl::init(0.0));

static int fail(const Twine &message) {
  errs() << "v4a-run: error: " << message << "\n";
  return 1;
}

namespace {

/// One step: B rows of S tokens, each row with its own length; one input
/// per layer.
struct Step {
  int64_t tokens = 0;
  std::vector<int64_t> lengths;
  std::vector<std::vector<float>> inputs; // per layer, [B * S * dim]
};

/// Reads an input tensor: [batch, tokens, dim], bf16 or f32.
bool readActivations(const st::File &file, const std::string &name,
                     int64_t batch, int64_t dim, Step &step,
                     std::vector<float> &out, std::string &error) {
  const st::Tensor &t = file.at(name);
  bool floatType = t.dtype == st::DType::BF16 || t.dtype == st::DType::F32;
  std::string expected = formatv("[{0}, S, {1}] bf16 or f32",
                                 batch < 0 ? "B" : std::to_string(batch), dim);
  if (!floatType || t.shape.size() != 3 || t.shape[2] != dim ||
      (batch >= 0 && t.shape[0] != batch) ||
      (step.tokens > 0 && t.shape[1] != step.tokens)) {
    std::string got = std::string(st::dtypeName(t.dtype)) + " [";
    for (size_t i = 0; i < t.shape.size(); ++i)
      got += (i ? ", " : "") + std::to_string(t.shape[i]);
    error =
        name + ": expected " + expected +
        (step.tokens > 0 ? " with S = " + std::to_string(step.tokens) : "") +
        ", got " + got + "]";
    return false;
  }
  step.tokens = t.shape[1];
  out = *t.toF32();
  return true;
}

bool readInputs(const std::string &path, int64_t dim, int64_t layers,
                std::vector<Step> &steps, int64_t &batch, std::string &error) {
  std::optional<st::File> file = st::read(path, error);
  if (!file)
    return false;
  batch = -1;
  for (int64_t k = 0; file->count("x.step" + std::to_string(k)); ++k) {
    Step step;
    std::string base = "x.step" + std::to_string(k);
    std::vector<float> shared;
    if (!readActivations(*file, base, batch, dim, step, shared, error))
      return false;
    batch = file->at(base).shape[0];
    for (int64_t l = 0; l < layers; ++l) {
      std::string own = base + ".layer" + std::to_string(l);
      if (!file->count(own)) {
        step.inputs.push_back(shared);
        continue;
      }
      std::vector<float> values;
      if (!readActivations(*file, own, batch, dim, step, values, error))
        return false;
      step.inputs.push_back(std::move(values));
    }
    step.lengths.assign(batch, step.tokens);
    std::string lengths = "lengths.step" + std::to_string(k);
    if (file->count(lengths)) {
      const st::Tensor &t = file->at(lengths);
      if (t.dtype != st::DType::I32 || t.shape != std::vector<int64_t>{batch}) {
        error = lengths + ": expected I32 [" + std::to_string(batch) + "]";
        return false;
      }
      std::vector<float> values = *t.toF32();
      for (int64_t b = 0; b < batch; ++b) {
        if (values[b] < 0 || values[b] > step.tokens) {
          error = lengths + ": entry " + std::to_string(b) + " is " +
                  std::to_string(static_cast<int64_t>(values[b])) +
                  ", outside [0, " + std::to_string(step.tokens) + "]";
          return false;
        }
        step.lengths[b] = static_cast<int64_t>(values[b]);
      }
    }
    steps.push_back(std::move(step));
  }
  for (const auto &[name, tensor] : *file) {
    bool known =
        name.rfind("x.step", 0) == 0 || name.rfind("lengths.step", 0) == 0;
    if (!known)
      continue;
    // Every x.step / lengths.step tensor must belong to a step read above.
    size_t digits = name.find_first_of("0123456789");
    int64_t k =
        digits == std::string::npos ? -1 : std::atoll(name.c_str() + digits);
    if (k < 0 || k >= static_cast<int64_t>(steps.size())) {
      error = name + ": no step " + std::to_string(k) +
              " (steps are x.step0, x.step1, ... without gaps)";
      return false;
    }
    size_t layerAt = name.find(".layer");
    if (layerAt != std::string::npos &&
        std::atoll(name.c_str() + layerAt + 6) >= layers) {
      error = name + ": the configuration has " + std::to_string(layers) +
              " layers";
      return false;
    }
  }
  if (steps.empty()) {
    error = path + ": no x.step0 tensor";
    return false;
  }
  return true;
}

ref::LayerWeights toReference(const rt::LayerTensors &tensors) {
  ref::LayerWeights weights;
  for (const auto &[name, host] : tensors) {
    if (host.type == rt::HostTensor::Type::UE8M0)
      continue;
    ref::Weight w;
    w.values.shape = host.shape;
    if (host.type == rt::HostTensor::Type::F32) {
      w.values.data = host.f32;
    } else {
      for (uint8_t code : host.bytes)
        w.values.data.push_back(num::fromE4M3Bits(code));
      const rt::HostTensor &scale = tensors.at(scaleTensorName(name));
      w.scale.shape = scale.shape;
      for (uint8_t code : scale.bytes)
        w.scale.data.push_back(num::fromUE8M0Bits(code));
    }
    weights.tensors[name] = std::move(w);
  }
  return weights;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "v4a runner\n");
  if (backend != "cpu")
    return fail("--backend=" + backend +
                ": only the cpu backend exists in this build");
  if (weightsPath.empty() == (randomSeed < 0))
    return fail("give exactly one of --weights FILE and --random-weights SEED");
  std::string readError;
  std::optional<std::string> text =
      io::readFile(inputPath, io::kConfigLimit, "config", readError);
  if (!text)
    return fail(readError);
  std::string config = std::move(*text);
  ConfigError configError;
  std::optional<ModelConfig> parsed = parseModelConfig(config, configError);
  if (!parsed)
    return fail(inputPath + ": " + configError.str());
  int64_t dim = parsed->hiddenSize, layers = parsed->numLayers();

  std::vector<Step> steps;
  int64_t batch = 1;
  std::string error;
  if (!inputsPath.empty()) {
    if (!readInputs(inputsPath, dim, layers, steps, batch, error))
      return fail(error);
  } else {
    if (promptLen < 0 || decodeSteps < 0)
      return fail("--prompt-len and --decode-steps must be >= 0");
    std::vector<int64_t> sizes = {promptLen};
    sizes.insert(sizes.end(), decodeSteps, 1);
    for (size_t k = 0; k < sizes.size(); ++k) {
      Step step;
      step.tokens = sizes[k];
      step.lengths = {sizes[k]};
      for (int64_t l = 0; l < layers; ++l)
        step.inputs.push_back(
            ref::randomActivations(sizes[k] * dim, 1000 * k + l));
      steps.push_back(std::move(step));
    }
  }
  int64_t context = 0;
  for (const Step &step : steps)
    context += step.tokens;
  EngineOptions options;
  options.maxSequences = batch;
  options.contextTokens = std::max<int64_t>(64, (context + 63) / 64 * 64);
  std::unique_ptr<Engine> engine = Engine::create(config, options, error);
  if (!engine)
    return fail(inputPath + ": " + error);

  std::vector<ref::LayerWeights> referenceWeights;
  if (!weightsPath.empty()) {
    if (!engine->loadWeights(weightsPath, error))
      return fail(error);
    std::vector<rt::LayerTensors> tensors;
    if (check && readCheckpoint(engine->config(), weightsPath, tensors, error))
      for (const auto &layer : tensors)
        referenceWeights.push_back(toReference(layer));
  } else {
    if (!engine->loadRandomWeights(randomSeed, error))
      return fail(error);
    if (check)
      for (const LayerSpec &layer : engine->layers())
        referenceWeights.push_back(
            ref::randomLayerWeights(engine->config(), layer, randomSeed));
  }
  std::optional<ref::Model> reference;
  std::vector<ref::SequenceState> states;
  if (check) {
    reference.emplace(engine->config(), engine->layers(), referenceWeights);
    for (int64_t b = 0; b < batch; ++b)
      states.push_back(reference->newSequence());
  }

  std::vector<int64_t> sequences;
  for (int64_t b = 0; b < batch; ++b) {
    sequences.push_back(engine->addSequence(error));
    if (sequences.back() < 0)
      return fail(error);
  }
  std::vector<double> maxAbs(layers, 0.0), maxRef(layers, 0.0);
  st::File written;
  int64_t totalTokens = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    Step &step = steps[k];
    std::vector<std::vector<float>> out(layers);
    std::vector<const float *> inputs;
    std::vector<float *> outputs;
    for (int64_t l = 0; l < layers; ++l) {
      out[l].assign(batch * step.tokens * dim, 0.0f);
      inputs.push_back(step.inputs[l].data());
      outputs.push_back(out[l].data());
    }
    if (!engine->step({sequences, step.lengths, step.tokens}, inputs, outputs,
                      error))
      return fail("step " + std::to_string(k) + ": " + error);
    for (int64_t b = 0; b < batch; ++b)
      totalTokens += step.lengths[b];
    for (int64_t b = 0; check && b < batch; ++b) {
      int64_t n = step.lengths[b];
      std::vector<ref::Tensor> x;
      for (int64_t l = 0; l < layers; ++l) {
        ref::Tensor t({n, dim});
        std::copy_n(step.inputs[l].begin() + b * step.tokens * dim, n * dim,
                    t.data.begin());
        x.push_back(std::move(t));
      }
      std::vector<ref::Tensor> y = reference->step(states[b], x);
      for (int64_t l = 0; l < layers; ++l)
        for (int64_t i = 0; i < n * dim; ++i) {
          double want = y[l].data[i];
          double got = out[l][b * step.tokens * dim + i];
          double diff = std::fabs(got - want);
          maxAbs[l] = std::isnan(diff) ? INFINITY : std::max(maxAbs[l], diff);
          maxRef[l] = std::max(maxRef[l], std::fabs(want));
        }
    }
    for (int64_t l = 0; l < layers; ++l)
      written[formatv("y.step{0}.layer{1}", k, l).str()] =
          st::fromF32({batch, step.tokens, dim}, out[l]);
  }
  outs() << formatv("v4a-run: {0} layers, {1} steps, {2} tokens on the cpu "
                    "backend\n",
                    layers, steps.size(), totalTokens);
  if (!outputsPath.empty() && !st::write(outputsPath, written, error))
    return fail(error);
  if (!check)
    return 0;
  double worst = 0.0;
  for (int64_t l = 0; l < layers; ++l) {
    double rel = maxRef[l] > 0 ? maxAbs[l] / maxRef[l] : maxAbs[l];
    outs() << formatv("layer {0,2} (ratio {1,3}): max abs err {2:e}, max rel "
                      "err {3:e}\n",
                      l, engine->layers()[l].compressRatio, maxAbs[l], rel);
    worst = std::max(worst, maxAbs[l]);
  }
  bool ok = worst <= tolerance;
  outs() << formatv("check: max abs err {0:e} (tolerance {1:e}): {2}\n", worst,
                    tolerance.getValue(), ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
