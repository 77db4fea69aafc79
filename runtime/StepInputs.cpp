//===- StepInputs.cpp - the input steps of a run from safetensors ---------===//

#include "runtime/StepInputs.h"

#include "core/Numerics.h"
#include "runtime/SafeTensors.h"

#include <cstdlib>

namespace v4a::rt {

namespace {

/// Reads an input tensor: [batch, tokens, dim], bf16 or f32.
bool readActivations(const st::File &file, const std::string &name,
                     int64_t batch, int64_t dim, InputStep &step,
                     std::vector<float> &out, std::string &error) {
  const st::Tensor &t = file.at(name);
  bool floatType = t.dtype == st::DType::BF16 || t.dtype == st::DType::F32;
  std::string expected = "[" + (batch < 0 ? "B" : std::to_string(batch)) +
                         ", S, " + std::to_string(dim) + "] bf16 or f32";
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

} // namespace

bool readStepInputs(const std::string &path, int64_t dim, int64_t layers,
                    int64_t maxBatch, int64_t maxTokens,
                    std::vector<InputStep> &steps, int64_t &batch,
                    std::string &error) {
  std::optional<st::File> file = st::read(path, error);
  if (!file)
    return false;
  batch = -1;
  for (int64_t k = 0; file->count("x.step" + std::to_string(k)); ++k) {
    InputStep step;
    std::string base = "x.step" + std::to_string(k);
    std::vector<float> values;
    if (!readActivations(*file, base, batch, dim, step, values, error))
      return false;
    batch = file->at(base).shape[0];
    if (batch < 1 || batch > maxBatch || step.tokens > maxTokens) {
      error = path + ": " + base + " holds " + std::to_string(batch) +
              " sequences of " + std::to_string(step.tokens) +
              " tokens; a run takes 1 to " + std::to_string(maxBatch) +
              " sequences of at most " + std::to_string(maxTokens) + " tokens";
      return false;
    }
    auto shared = std::make_shared<const std::vector<float>>(std::move(values));
    for (int64_t l = 0; l < layers; ++l) {
      std::string own = base + ".layer" + std::to_string(l);
      if (!file->count(own)) {
        step.inputs.push_back(shared);
        continue;
      }
      if (!readActivations(*file, own, batch, dim, step, values, error))
        return false;
      step.inputs.push_back(
          std::make_shared<const std::vector<float>>(std::move(values)));
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

StepBuffers stepBuffers(const InputStep &step, const std::vector<bool> &runs,
                        int64_t batch, int64_t dim) {
  size_t layers = runs.size();
  StepBuffers buffers{std::vector<std::vector<float>>(layers),
                      std::vector<const float *>(layers, nullptr),
                      std::vector<float *>(layers, nullptr)};
  for (size_t l = 0; l < layers; ++l) {
    if (!runs[l])
      continue;
    buffers.out[l].assign(batch * step.tokens * dim, 0.0f);
    buffers.inputs[l] = step.inputs[l]->data();
    buffers.outputs[l] = buffers.out[l].data();
  }
  return buffers;
}

bool stepEveryRank(size_t ranks, const InputStep &step,
                   const std::vector<bool> &runs, int64_t batch, int64_t dim,
                   StepBuffers &total,
                   const std::function<bool(size_t, StepBuffers &)> &runRank) {
  if (!runRank(0, total))
    return false;
  if (ranks == 1)
    return true;
  StepBuffers partial = stepBuffers(step, runs, batch, dim);
  for (size_t r = 1; r < ranks; ++r) {
    if (!runRank(r, partial))
      return false;
    for (size_t l = 0; l < total.out.size(); ++l)
      for (size_t i = 0; i < total.out[l].size(); ++i)
        total.out[l][i] += partial.out[l][i];
  }
  for (std::vector<float> &layer : total.out)
    for (float &v : layer)
      v = num::roundBF16(v);
  return true;
}

} // namespace v4a::rt
