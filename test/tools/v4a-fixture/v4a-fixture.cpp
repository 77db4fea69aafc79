//===- v4a-fixture.cpp - safetensors fixtures written by the reference ----===//
//
// Test helper. Writes a checkpoint of random attention weights, inputs and
// the outputs the reference implementation computes for them; compares
// safetensors files; and breaks files in controlled ways for error tests.
//
//   v4a-fixture write CONFIG --seed S --steps 9,1 [--lengths 9,4] [--batch B]
//       [--fp8] [--shards N] --weights W --inputs I --expected E
//   v4a-fixture compare ACTUAL EXPECTED [--tolerance T] [--subset]
//       (--subset: ACTUAL may hold only some of EXPECTED's tensors)
//   v4a-fixture mutate IN OUT (--drop NAME | --dtype NAME DT |
//       --shape NAME D0,D1,.. | --truncate BYTES)
//
//===----------------------------------------------------------------------===//

#include "core/Numerics.h"
#include "core/TensorSpecs.h"
#include "lib/Reference/Reference.h"
#include "runtime/SafeTensors.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

using namespace v4a;

static int usage(const std::string &why) {
  std::cerr << "v4a-fixture: " << why << "\n";
  return 2;
}

static std::vector<int64_t> numbers(const std::string &list) {
  std::vector<int64_t> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ','))
    out.push_back(std::stoll(item));
  return out;
}

static std::string option(int argc, char **argv, const std::string &name,
                          const std::string &fallback = "") {
  for (int i = 0; i + 1 < argc; ++i)
    if (argv[i] == name)
      return argv[i + 1];
  return fallback;
}

static bool flag(int argc, char **argv, const std::string &name) {
  for (int i = 0; i < argc; ++i)
    if (argv[i] == name)
      return true;
  return false;
}

/// A checkpoint tensor in the checkpoint's dtypes: bf16 values, f32 where
/// the spec says f32, e4m3 bytes with an e8m0 scale for fp8 projections.
static void addWeight(st::File &file, const std::string &prefix,
                      const TensorSpec &spec, const ref::Weight &w) {
  if (!w.isFP8()) {
    file[prefix + spec.name] =
        st::fromF32(w.values.shape, w.values.data,
                    spec.f32 ? st::DType::F32 : st::DType::BF16);
    return;
  }
  st::Tensor values;
  values.dtype = st::DType::F8_E4M3;
  values.shape = w.values.shape;
  for (float v : w.values.data)
    values.data.push_back(num::toE4M3Bits(v));
  st::Tensor scale;
  scale.dtype = st::DType::F8_E8M0;
  scale.shape = w.scale.shape;
  for (float s : w.scale.data)
    scale.data.push_back(num::ue8m0CeilBits(s));
  file[prefix + spec.name] = std::move(values);
  file[prefix + scaleTensorName(spec.name)] = std::move(scale);
}

static int writeFixture(int argc, char **argv) {
  std::ifstream configFile(argv[2]);
  std::stringstream text;
  text << configFile.rdbuf();
  std::string json = text.str();
  if (flag(argc, argv, "--fp8"))
    json = json.substr(0, json.rfind('}')) +
           ", \"quantization_config\": {\"fmt\": \"e4m3\"}}";
  ConfigError configError;
  auto config = parseModelConfig(json, configError);
  auto layers = config ? deriveLayers(*config, {}, configError) : std::nullopt;
  if (!layers)
    return usage(configError.str());
  uint64_t seed = std::stoull(option(argc, argv, "--seed", "1"));
  int64_t batch = std::stoll(option(argc, argv, "--batch", "1"));
  std::vector<int64_t> steps = numbers(option(argc, argv, "--steps", "8"));
  std::vector<int64_t> firstLengths =
      numbers(option(argc, argv, "--lengths", ""));
  int64_t shards = std::stoll(option(argc, argv, "--shards", "1"));

  std::vector<ref::LayerWeights> weights;
  std::vector<st::File> shardFiles(shards);
  for (const LayerSpec &layer : *layers) {
    weights.push_back(ref::randomLayerWeights(*config, layer, seed));
    std::string prefix = layerTensorPrefix(*config, layer.id);
    for (const TensorSpec &spec : layerTensorSpecs(*config, layer))
      addWeight(shardFiles[layer.id % shards], prefix, spec,
                weights.back().get(spec.name));
    // Tensors outside attention must be ignored.
    shardFiles[0][prefix.substr(0, prefix.size() - 5) + "ffn.w1.weight"] =
        st::fromF32({2, 2}, {1, 2, 3, 4}, st::DType::BF16);
  }
  shardFiles[0]["embed.weight"] = st::fromF32({2}, {1, 2}, st::DType::F32);
  std::string error, weightsPath = option(argc, argv, "--weights");
  if (shards == 1) {
    if (!st::write(weightsPath, shardFiles[0], error))
      return usage(error);
  } else {
    // weightsPath names the index; shards live beside it.
    std::string dir = weightsPath.substr(0, weightsPath.rfind('/') + 1);
    std::string index = "{\"metadata\": {}, \"weight_map\": {";
    bool first = true;
    for (int64_t s = 0; s < shards; ++s) {
      std::string name = "model-0000" + std::to_string(s + 1) + "-of-0000" +
                         std::to_string(shards) + ".safetensors";
      if (!st::write(dir + name, shardFiles[s], error))
        return usage(error);
      for (const auto &[tensor, value] : shardFiles[s]) {
        index += (first ? "\"" : ", \"") + tensor + "\": \"" + name + "\"";
        first = false;
      }
    }
    std::ofstream(weightsPath) << index << "}}\n";
  }

  ref::Model model(*config, *layers, weights);
  std::vector<ref::SequenceState> states;
  for (int64_t b = 0; b < batch; ++b)
    states.push_back(model.newSequence());
  st::File inputs, expected;
  int64_t dim = config->hiddenSize, numLayers = layers->size();
  for (size_t k = 0; k < steps.size(); ++k) {
    int64_t tokens = steps[k];
    std::vector<int64_t> lengths(batch, tokens);
    if (k == 0 && !firstLengths.empty())
      lengths = firstLengths;
    std::vector<float> x =
        ref::randomActivations(batch * tokens * dim, 7 * k + 1);
    std::string base = "x.step" + std::to_string(k);
    inputs[base] = st::fromF32({batch, tokens, dim}, x, st::DType::BF16);
    std::vector<float> own;
    if (k == 0 && numLayers > 1) {
      // Layer 1 of step 0 gets an input of its own.
      own = ref::randomActivations(batch * tokens * dim, 99);
      inputs[base + ".layer1"] =
          st::fromF32({batch, tokens, dim}, own, st::DType::BF16);
    }
    if (k == 0 && !firstLengths.empty()) {
      st::Tensor t;
      t.dtype = st::DType::I32;
      t.shape = {batch};
      for (int64_t n : lengths) {
        int32_t v = static_cast<int32_t>(n);
        t.data.insert(t.data.end(), reinterpret_cast<uint8_t *>(&v),
                      reinterpret_cast<uint8_t *>(&v) + 4);
      }
      inputs["lengths.step0"] = t;
    }
    std::vector<std::vector<float>> y(numLayers,
                                      std::vector<float>(batch * tokens * dim));
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<ref::Tensor> in;
      for (int64_t l = 0; l < numLayers; ++l) {
        const std::vector<float> &src = (l == 1 && !own.empty()) ? own : x;
        ref::Tensor t({lengths[b], dim});
        std::copy_n(src.begin() + b * tokens * dim, lengths[b] * dim,
                    t.data.begin());
        in.push_back(t);
      }
      std::vector<ref::Tensor> out = model.step(states[b], in);
      for (int64_t l = 0; l < numLayers; ++l)
        std::copy(out[l].data.begin(), out[l].data.end(),
                  y[l].begin() + b * tokens * dim);
    }
    for (int64_t l = 0; l < numLayers; ++l)
      expected["y.step" + std::to_string(k) + ".layer" + std::to_string(l)] =
          st::fromF32({batch, tokens, dim}, y[l]);
  }
  if (!st::write(option(argc, argv, "--inputs"), inputs, error) ||
      !st::write(option(argc, argv, "--expected"), expected, error))
    return usage(error);
  return 0;
}

static int compare(int argc, char **argv) {
  std::string error;
  auto actual = st::read(argv[2], error);
  auto expected = actual ? st::read(argv[3], error) : std::nullopt;
  if (!expected)
    return usage(error);
  double tolerance = std::stod(option(argc, argv, "--tolerance", "0"));
  double worst = 0;
  bool subset = flag(argc, argv, "--subset");
  size_t compared = 0;
  for (const auto &[name, want] : *expected) {
    auto it = actual->find(name);
    if (subset && it == actual->end())
      continue;
    ++compared;
    if (it == actual->end() || it->second.shape != want.shape) {
      std::cout << "MISMATCH " << name << ": missing or misshapen\n";
      return 1;
    }
    auto a = *it->second.toF32(), b = *want.toF32();
    for (size_t i = 0; i < a.size(); ++i)
      worst = std::max(
          worst, std::isnan(a[i]) ? INFINITY : std::fabs(double(a[i]) - b[i]));
  }
  if (compared != actual->size()) {
    std::cout << "MISMATCH: " << actual->size() - compared
              << " tensors are not expected\n";
    return 1;
  }
  std::cout << (worst <= tolerance ? "MATCH" : "MISMATCH") << " " << compared
            << " tensors, max abs err " << worst << "\n";
  return worst <= tolerance ? 0 : 1;
}

static int mutate(int argc, char **argv) {
  std::string error;
  if (flag(argc, argv, "--truncate")) {
    std::ifstream in(argv[2], std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)),
                      std::istreambuf_iterator<char>());
    bytes.resize(std::stoull(option(argc, argv, "--truncate")));
    std::ofstream(argv[3], std::ios::binary) << bytes;
    return 0;
  }
  auto file = st::read(argv[2], error);
  if (!file)
    return usage(error);
  if (flag(argc, argv, "--drop"))
    file->erase(option(argc, argv, "--drop"));
  for (int i = 0; i + 2 < argc; ++i) {
    if (std::string(argv[i]) == "--dtype") {
      // F32/BF16 convert the values; I32 reinterprets 4-byte elements.
      st::Tensor &t = file->at(argv[i + 1]);
      std::string to = argv[i + 2];
      if (to == "I32")
        t.dtype = st::DType::I32;
      else
        t = st::fromF32(t.shape, *t.toF32(),
                        to == "F32" ? st::DType::F32 : st::DType::BF16);
    }
    if (std::string(argv[i]) == "--shape") {
      st::Tensor &t = file->at(argv[i + 1]);
      t.shape = numbers(argv[i + 2]);
      t.data.resize(t.numel() * st::dtypeSize(t.dtype));
    }
  }
  return st::write(argv[3], *file, error) ? 0 : usage(error);
}

/// The flags of each mode and how many values each takes; anything else
/// after the mode's paths (write: the config; compare, mutate: two files)
/// is an error, not ignored.
static std::optional<std::string> unknownArgument(int argc, char **argv,
                                                  const std::string &mode) {
  static const std::map<std::string, std::map<std::string, int>> flags = {
      {"write",
       {{"--fp8", 0},
        {"--seed", 1},
        {"--batch", 1},
        {"--steps", 1},
        {"--lengths", 1},
        {"--shards", 1},
        {"--weights", 1},
        {"--inputs", 1},
        {"--expected", 1}}},
      {"compare", {{"--tolerance", 1}, {"--subset", 0}}},
      {"mutate",
       {{"--truncate", 1}, {"--drop", 1}, {"--dtype", 2}, {"--shape", 2}}}};
  auto known = flags.find(mode);
  if (known == flags.end())
    return "unknown mode " + mode + " (write, compare, mutate)";
  for (int i = mode == "write" ? 3 : 4; i < argc; ++i) {
    auto it = known->second.find(argv[i]);
    if (it == known->second.end())
      return std::string("unknown argument '") + argv[i] + "' for " + mode;
    if (i + it->second >= argc)
      return std::string(argv[i]) + " needs " + std::to_string(it->second) +
             " value(s)";
    i += it->second;
  }
  return std::nullopt;
}

int main(int argc, char **argv) {
  if (argc < 4)
    return usage("usage: v4a-fixture write|compare|mutate ...");
  std::string mode = argv[1];
  if (std::optional<std::string> problem = unknownArgument(argc, argv, mode))
    return usage("error: " + *problem);
  if (mode == "write")
    return writeFixture(argc, argv);
  if (mode == "compare")
    return compare(argc, argv);
  if (mode == "mutate")
    return mutate(argc, argv);
  return usage("unknown mode " + mode);
}
