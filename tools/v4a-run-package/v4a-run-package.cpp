//===- v4a-run-package.cpp - run a compiled package, runtime only ---------===//
//
// v4a-run-package MODEL.v4apkg --weights FILE --inputs FILE
//                 [--outputs FILE] [--expected FILE [--tolerance T]]
//
// Runs a package (v4a-compile --target=sm_90a) on the CUDA backend with the
// runtime alone: no compiler, MLIR or LLVM, which is what an inference
// server deploys. Weights, inputs and outputs follow v4a-run's safetensors
// contract (x.step{k}[.layer{l}], lengths.step{k}, y.step{k}.layer{l}).
// With --expected (e.g. the reference's outputs from v4a-fixture) it prints
// every layer's largest absolute and relative error and fails above the
// tolerance.
//
//===----------------------------------------------------------------------===//

#include "core/KVPlan.h"
#include "core/Package.h"
#include "core/TensorSpecs.h"
#include "runtime/CudaBackend.h"
#include "runtime/Model.h"
#include "runtime/SafeTensors.h"
#include "runtime/Weights.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>

using namespace v4a;

namespace {

int fail(const std::string &message) {
  std::cerr << "v4a-run-package: error: " << message << "\n";
  return 1;
}

struct Options {
  std::string package, weights, inputs, outputs, expected;
  double tolerance = 0.0;
};

bool parseOptions(int argc, char **argv, Options &o, std::string &error) {
  std::map<std::string, std::string *> paths = {{"--weights", &o.weights},
                                                {"--inputs", &o.inputs},
                                                {"--outputs", &o.outputs},
                                                {"--expected", &o.expected}};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (arg.rfind("--", 0) == 0) {
      if (i + 1 >= argc) {
        error = arg + " needs a value";
        return false;
      }
      value = argv[++i];
    }
    if (auto it = paths.find(arg); it != paths.end()) {
      *it->second = value;
    } else if (arg == "--tolerance") {
      char *end = nullptr;
      o.tolerance = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end || !(o.tolerance >= 0)) {
        error = "--tolerance takes a non-negative number, got '" + value + "'";
        return false;
      }
    } else if (arg.rfind("--", 0) == 0) {
      error = "unknown option " + arg;
      return false;
    } else if (o.package.empty()) {
      o.package = arg;
    } else {
      error = "more than one package: " + arg;
      return false;
    }
  }
  if (o.package.empty() || o.weights.empty() || o.inputs.empty()) {
    error = "usage: v4a-run-package MODEL.v4apkg --weights FILE --inputs FILE "
            "[--outputs FILE] [--expected FILE [--tolerance T]]";
    return false;
  }
  return true;
}

/// One step of the inputs: B rows of S tokens, with per-row lengths.
struct Step {
  int64_t tokens = 0;
  std::vector<int64_t> lengths;
  /// Per layer, [B * S * dim].
  std::vector<std::vector<float>> inputs;
};

bool activations(const st::File &file, const std::string &name, int64_t dim,
                 int64_t &batch, int64_t &tokens, std::vector<float> &out,
                 std::string &error) {
  const st::Tensor &t = file.at(name);
  std::optional<std::vector<float>> values = t.toF32();
  if (!values || t.shape.size() != 3 || t.shape[2] != dim ||
      (batch >= 0 && t.shape[0] != batch) ||
      (tokens >= 0 && t.shape[1] != tokens)) {
    error = name + ": expected [B, S, " + std::to_string(dim) +
            "] bf16 or f32, the same B and S for every tensor of the step";
    return false;
  }
  batch = t.shape[0];
  tokens = t.shape[1];
  out = std::move(*values);
  return true;
}

bool readSteps(const std::string &path, int64_t dim, int64_t layers,
               std::vector<Step> &steps, int64_t &batch, std::string &error) {
  std::optional<st::File> file = st::read(path, error);
  if (!file)
    return false;
  batch = -1;
  for (int64_t k = 0; file->count("x.step" + std::to_string(k)); ++k) {
    Step step;
    step.tokens = -1;
    std::string base = "x.step" + std::to_string(k);
    std::vector<float> shared;
    if (!activations(*file, base, dim, batch, step.tokens, shared, error))
      return false;
    for (int64_t l = 0; l < layers; ++l) {
      std::string own = base + ".layer" + std::to_string(l);
      std::vector<float> values = shared;
      if (file->count(own) &&
          !activations(*file, own, dim, batch, step.tokens, values, error))
        return false;
      step.inputs.push_back(std::move(values));
    }
    step.lengths.assign(batch, step.tokens);
    std::string lengths = "lengths.step" + std::to_string(k);
    if (file->count(lengths)) {
      std::optional<std::vector<float>> values = file->at(lengths).toF32();
      if (!values || static_cast<int64_t>(values->size()) != batch) {
        error = lengths + ": expected [" + std::to_string(batch) + "]";
        return false;
      }
      for (int64_t b = 0; b < batch; ++b) {
        if ((*values)[b] < 0 || (*values)[b] > step.tokens) {
          error = lengths + ": entry " + std::to_string(b) + " is outside [0, " +
                  std::to_string(step.tokens) + "]";
          return false;
        }
        step.lengths[b] = static_cast<int64_t>((*values)[b]);
      }
    }
    steps.push_back(std::move(step));
  }
  if (steps.empty()) {
    error = path + ": no x.step0 tensor";
    return false;
  }
  return true;
}

/// Whether every projection of the checkpoint has the package's weight
/// format (wo_a may be either: it runs as a bf16 product of its scales).
bool checkWeightFormat(const ModelConfig &config,
                       const std::vector<LayerSpec> &layers,
                       const std::vector<rt::LayerTensors> &tensors,
                       std::string &error) {
  for (const LayerSpec &layer : layers)
    for (const TensorSpec &spec : layerTensorSpecs(config, layer)) {
      auto it = tensors[layer.id].find(spec.name);
      if (!spec.projection || spec.name == "wo_a.weight" ||
          it == tensors[layer.id].end())
        continue;
      bool fp8 = it->second.type == rt::HostTensor::Type::E4M3;
      if (fp8 != config.fp8Weights) {
        error = layerTensorPrefix(config, layer.id) + spec.name + " is " +
                (fp8 ? "fp8" : "bf16") + " but the package was compiled for " +
                (config.fp8Weights ? "fp8" : "bf16") +
                " projections (the configuration's fp8_weights)";
        return false;
      }
    }
  return true;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       start)
      .count();
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  std::string error;
  if (!parseOptions(argc, argv, o, error))
    return fail(error);
  std::optional<pkg::Package> package = pkg::read(o.package, "sm_90a", error);
  if (!package)
    return fail(error);
  const ModelConfig &config = package->config;
  int64_t dim = config.hiddenSize, layers = config.numLayers();

  std::vector<Step> steps;
  int64_t batch = 0;
  if (!readSteps(o.inputs, dim, layers, steps, batch, error))
    return fail(error);
  std::vector<rt::LayerTensors> tensors;
  if (!rt::readCheckpointFiles(config, {o.weights}, tensors, error) ||
      !checkWeightFormat(config, package->layers, tensors, error))
    return fail(error);
  std::optional<plan::Plan> plan = plan::planCaches(
      package->layers,
      {config.headDim, config.indexHeadDim, config.slidingWindow},
      package->planOptions, error);
  if (!plan)
    return fail(error);

  std::unique_ptr<rt::CudaBackend> backend = rt::CudaBackend::create(0, error);
  if (!backend)
    return fail(error);
  if (!backend->loadKernels(package->ptx, error))
    return fail(error);
  std::cout << "v4a-run-package: " << backend->deviceName() << ", "
            << package->functions.size() << " step functions, "
            << package->calls.size() << " calls per step\n";
  rt::StepProgram program{package->functions, package->calls};
  std::unique_ptr<rt::Model> model =
      rt::Model::create(config, package->layers, program, std::move(tensors),
                        *plan, batch, std::move(backend), error);
  if (!model)
    return fail(error);
  std::vector<int64_t> sequences;
  for (int64_t b = 0; b < batch; ++b) {
    sequences.push_back(model->addSequence(error));
    if (sequences.back() < 0)
      return fail(error);
  }

  st::File written;
  auto start = std::chrono::steady_clock::now();
  for (size_t k = 0; k < steps.size(); ++k) {
    const Step &step = steps[k];
    std::vector<std::vector<float>> out(layers);
    std::vector<const float *> inputs(layers);
    std::vector<float *> outputs(layers);
    for (int64_t l = 0; l < layers; ++l) {
      out[l].assign(batch * step.tokens * dim, 0.0f);
      inputs[l] = step.inputs[l].data();
      outputs[l] = out[l].data();
    }
    if (!model->step({sequences, step.lengths, step.tokens}, inputs, outputs,
                     error))
      return fail("step " + std::to_string(k) + ": " + error);
    for (int64_t l = 0; l < layers; ++l)
      written["y.step" + std::to_string(k) + ".layer" + std::to_string(l)] =
          st::fromF32({batch, step.tokens, dim}, out[l]);
  }
  std::printf("v4a-run-package: %zu steps in %.3f s\n", steps.size(),
              secondsSince(start));
  if (!o.outputs.empty() && !st::write(o.outputs, written, error))
    return fail(error);
  if (o.expected.empty())
    return 0;

  std::optional<st::File> expected = st::read(o.expected, error);
  if (!expected)
    return fail(error);
  double worst = 0.0;
  for (int64_t l = 0; l < layers; ++l) {
    double maxAbs = 0.0, maxRef = 0.0;
    for (size_t k = 0; k < steps.size(); ++k) {
      std::string name =
          "y.step" + std::to_string(k) + ".layer" + std::to_string(l);
      if (!expected->count(name))
        return fail(o.expected + " lacks " + name);
      std::optional<std::vector<float>> want = expected->at(name).toF32();
      std::vector<float> got = *written.at(name).toF32();
      if (!want || want->size() != got.size())
        return fail(name + ": the expected tensor has another shape");
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < steps[k].lengths[b] * dim; ++i) {
          size_t at = (b * steps[k].tokens) * dim + i;
          double diff = std::fabs(double(got[at]) - double((*want)[at]));
          maxAbs = std::isnan(diff) ? INFINITY : std::max(maxAbs, diff);
          maxRef = std::max(maxRef, std::fabs(double((*want)[at])));
        }
    }
    double rel = maxRef > 0 ? maxAbs / maxRef : maxAbs;
    std::printf("layer %2lld (ratio %3lld): max abs err %.3e, max rel err "
                "%.3e\n",
                static_cast<long long>(l),
                static_cast<long long>(package->layers[l].compressRatio),
                maxAbs, rel);
    worst = std::max(worst, maxAbs);
  }
  bool ok = worst <= o.tolerance;
  std::printf("check: max abs err %.3e (tolerance %.3e): %s\n", worst,
              o.tolerance, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
