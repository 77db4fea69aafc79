//===- HostWeights.cpp - weights between the runtime and the reference ----===//

#include "lib/Engine/HostWeights.h"

#include "core/Numerics.h"
#include "core/TensorSpecs.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <tuple>

namespace v4a {

namespace {

/// A random weight as the runtime holds it (fp8 as codes, then its scale).
void addRandomHostTensor(const ModelConfig &config, const LayerSpec &layer,
                         const TensorSpec &spec, uint64_t seed,
                         rt::LayerTensors &host, std::mutex &inserting) {
  ref::Weight weight = ref::randomWeight(config, layer, spec, seed);
  rt::HostTensor values, scale;
  values.shape = weight.values.shape;
  if (!weight.isFP8()) {
    values.f32 = std::move(weight.values.data);
  } else {
    values.type = rt::HostTensor::Type::E4M3;
    values.bytes.resize(weight.values.data.size());
    for (size_t i = 0; i < values.bytes.size(); ++i)
      values.bytes[i] = num::exactE4M3Bits(weight.values.data[i]);
    scale.type = rt::HostTensor::Type::UE8M0;
    scale.shape = weight.scale.shape;
    for (float s : weight.scale.data)
      scale.bytes.push_back(num::ue8m0CeilBits(s));
  }
  std::lock_guard<std::mutex> lock(inserting);
  if (weight.isFP8())
    host[scaleTensorName(spec.name)] = std::move(scale);
  host[spec.name] = std::move(values);
}

} // namespace

std::vector<rt::LayerTensors>
randomHostWeights(const ModelConfig &config,
                  const std::vector<LayerSpec> &layers, uint64_t seed,
                  const std::function<void(int64_t, int64_t)> &progress) {
  // Each tensor's values depend on the seed, its layer and its name only:
  // threads take tensors in any order and the result is the same.
  struct Work {
    const LayerSpec *layer;
    TensorSpec spec;
  };
  std::vector<Work> work;
  for (const LayerSpec &layer : layers)
    for (const TensorSpec &spec : layerTensorSpecs(config, layer))
      work.push_back({&layer, spec});
  // Largest first, so that no thread is left with a big tensor at the end.
  auto numel = [](const TensorSpec &spec) {
    int64_t n = 1;
    for (int64_t d : spec.shape)
      n *= d;
    return n;
  };
  std::sort(work.begin(), work.end(), [&](const Work &a, const Work &b) {
    if (numel(a.spec) != numel(b.spec))
      return numel(a.spec) > numel(b.spec);
    return std::tie(a.layer->id, a.spec.name) <
           std::tie(b.layer->id, b.spec.name);
  });
  std::vector<rt::LayerTensors> tensors(config.numLayers());
  std::atomic<size_t> next{0}, done{0};
  std::mutex inserting, reporting;
  auto run = [&] {
    for (size_t i; (i = next++) < work.size();) {
      const Work &item = work[i];
      addRandomHostTensor(config, *item.layer, item.spec, seed,
                          tensors[item.layer->id], inserting);
      std::lock_guard<std::mutex> lock(reporting);
      if (progress)
        progress(++done, work.size());
    }
  };
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads && t < work.size(); ++t)
    pool.emplace_back(run);
  run();
  for (std::thread &thread : pool)
    thread.join();
  return tensors;
}

std::optional<ProjectionFormat> projectionFormat(
    const ModelConfig &config, const std::vector<LayerSpec> &layers,
    const std::vector<rt::LayerTensors> &tensors, std::string &error) {
  ProjectionFormat format;
  for (const LayerSpec &layer : layers)
    for (const TensorSpec &spec : layerTensorSpecs(config, layer)) {
      auto it = tensors[layer.id].find(spec.name);
      if (!spec.projection || spec.name == "wo_a.weight" ||
          it == tensors[layer.id].end())
        continue;
      bool e4m3 = it->second.type == rt::HostTensor::Type::E4M3;
      std::string name = layerTensorPrefix(config, layer.id) + spec.name;
      if (format.tensor.empty()) {
        format = {e4m3, name};
      } else if (format.fp8 != e4m3) {
        error = name + " is " + (e4m3 ? "fp8" : "bf16") + " but " +
                format.tensor + " is " + (format.fp8 ? "fp8" : "bf16") +
                ": the projections of a checkpoint must all be fp8 or all "
                "bf16 (wo_a may differ)";
        return std::nullopt;
      }
    }
  return format;
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

std::vector<ref::Tensor> referenceRow(const ref::Model &reference,
                                      ref::SequenceState &state,
                                      const rt::InputStep &step, int64_t row,
                                      const std::vector<bool> &runs,
                                      int64_t dim) {
  int64_t n = step.lengths[row];
  std::vector<ref::Tensor> x;
  for (size_t l = 0; l < runs.size(); ++l) {
    ref::Tensor t({runs[l] ? n : 0, dim});
    if (runs[l])
      std::copy_n(step.inputs[l]->begin() + row * step.tokens * dim, n * dim,
                  t.data.begin());
    x.push_back(std::move(t));
  }
  return reference.step(state, x, runs);
}

} // namespace v4a
