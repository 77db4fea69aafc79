//===- Weights.cpp - attention tensors of checkpoint files ----------------===//

#include "runtime/Weights.h"

#include <cstring>

namespace v4a::rt {

bool isAttentionTensor(const std::string &name) {
  return (name.rfind("layers.", 0) == 0 || name.rfind("mtp.", 0) == 0) &&
         name.find(".attn.") != std::string::npos;
}

int64_t layerOfName(const ModelConfig &config, const std::string &name,
                    std::string &rest) {
  // "layers.{i}.attn.NAME" or "mtp.{j}.attn.NAME", i without leading zeros.
  bool mtp = name.rfind("mtp.", 0) == 0;
  size_t begin = mtp ? 4 : 7, dot = name.find('.', begin);
  if (dot == std::string::npos || dot == begin ||
      name.compare(dot, 6, ".attn.") != 0)
    return -1;
  std::string digits = name.substr(begin, dot - begin);
  if (digits.find_first_not_of("0123456789") != std::string::npos ||
      digits.size() > 6 || (digits.size() > 1 && digits[0] == '0'))
    return -1;
  int64_t index = std::stoll(digits);
  rest = name.substr(dot + 6);
  if (mtp)
    return index < config.numMtpLayers ? config.numHiddenLayers + index : -1;
  return index < config.numHiddenLayers ? index : -1;
}

bool addAttentionTensor(const ModelConfig &config, const std::string &name,
                        st::Tensor tensor, const std::string &origin,
                        std::vector<LayerTensors> &tensors,
                        std::string &error) {
  std::string rest;
  int64_t layer = layerOfName(config, name, rest);
  if (layer < 0) {
    error = name + ": the configuration has no such attention layer";
    return false;
  }
  HostTensor host;
  host.shape = tensor.shape;
  if (tensor.dtype == st::DType::F8_E4M3 ||
      tensor.dtype == st::DType::F8_E8M0) {
    host.type = tensor.dtype == st::DType::F8_E4M3 ? HostTensor::Type::E4M3
                                                   : HostTensor::Type::UE8M0;
    host.bytes = std::move(tensor.data);
  } else if (tensor.dtype == st::DType::F32 ||
             tensor.dtype == st::DType::BF16 ||
             tensor.dtype == st::DType::F16) {
    host.f32 = *tensor.toF32();
  } else {
    error = name + " (" + origin + "): dtype " + st::dtypeName(tensor.dtype) +
            " is not a weight dtype (BF16, F16, F32, or F8_E4M3 with "
            "F8_E8M0 scales)";
    return false;
  }
  if (!tensors[layer].emplace(rest, std::move(host)).second) {
    error = name + ": appears more than once (again in " + origin + ")";
    return false;
  }
  return true;
}

bool readCheckpointFiles(const ModelConfig &config,
                         const std::vector<std::string> &files,
                         std::vector<LayerTensors> &tensors, std::string &error,
                         const std::vector<int64_t> &layers) {
  tensors.assign(config.numLayers(), {});
  std::vector<bool> wanted(config.numLayers(), layers.empty());
  for (int64_t id : layers)
    if (id >= 0 && id < config.numLayers())
      wanted[id] = true;
  // Tensors of layers the configuration lacks are kept, to be reported.
  st::TensorFilter keep = [&](const std::string &name) {
    std::string rest;
    int64_t layer = layerOfName(config, name, rest);
    return isAttentionTensor(name) && (layer < 0 || wanted[layer]);
  };
  for (const std::string &file : files) {
    std::optional<st::File> contents = st::read(file, error, keep);
    if (!contents)
      return false;
    for (auto &[name, tensor] : *contents)
      if (!addAttentionTensor(config, name, std::move(tensor), file, tensors,
                              error))
        return false;
  }
  return true;
}

namespace {

int64_t elementBytes(HostTensor::Type type) {
  switch (type) {
  case HostTensor::Type::F32:
    return 4;
  case HostTensor::Type::BF16:
    return 2;
  case HostTensor::Type::E4M3:
  case HostTensor::Type::UE8M0:
    return 1;
  }
  return 1;
}

/// `count` slices of `tensor` along dimension `axis` (0 or 1 of a 1-D or
/// 2-D tensor) from `first`.
bool sliceTensor(HostTensor &tensor, int64_t axis, int64_t first, int64_t count,
                 const std::string &name, std::string &error) {
  int64_t rank = static_cast<int64_t>(tensor.shape.size());
  if (axis >= rank || rank > 2 || first + count > tensor.shape[axis]) {
    error = name + ": cannot take " + std::to_string(count) + " slices from " +
            std::to_string(first) + " along dimension " + std::to_string(axis) +
            " of a tensor of rank " + std::to_string(rank);
    return false;
  }
  int64_t rows = rank == 2 ? tensor.shape[0] : 1;
  int64_t columns = tensor.shape[rank - 1];
  int64_t width = elementBytes(tensor.type);
  bool f32 = tensor.type == HostTensor::Type::F32;
  const uint8_t *from =
      f32 ? reinterpret_cast<const uint8_t *>(tensor.f32.data())
          : tensor.bytes.data();
  size_t stored = f32 ? tensor.f32.size() * 4 : tensor.bytes.size();
  if (static_cast<int64_t>(stored) != tensor.numel() * width) {
    error = name + ": its data does not match its shape";
    return false;
  }
  bool alongRows = axis == 0 && rank == 2;
  int64_t keptRows = alongRows ? count : rows;
  int64_t keptColumns = alongRows ? columns : count;
  std::vector<uint8_t> kept(keptRows * keptColumns * width);
  for (int64_t r = 0; r < keptRows; ++r) {
    int64_t sourceRow = alongRows ? first + r : r;
    int64_t sourceColumn = alongRows ? 0 : first;
    std::memcpy(kept.data() + r * keptColumns * width,
                from + (sourceRow * columns + sourceColumn) * width,
                keptColumns * width);
  }
  tensor.shape[axis] = count;
  if (f32) {
    tensor.f32.assign(kept.size() / 4, 0.0f);
    std::memcpy(tensor.f32.data(), kept.data(), kept.size());
  } else {
    tensor.bytes = std::move(kept);
  }
  return true;
}

} // namespace

bool shardLayerTensors(const ModelConfig &config, int64_t rank, int64_t degree,
                       LayerTensors &tensors, std::string &error) {
  constexpr int64_t kBlock = 128;
  int64_t heads = config.numAttentionHeads / degree;
  int64_t headRows = heads * config.headDim;
  int64_t groupRows = config.oGroups / degree * config.oLoraRank;
  // A tensor, the axis a rank takes its part of, and that part's length in
  // the weight's elements (a scale keeps one entry per 128 of them).
  struct Part {
    const char *name;
    int64_t axis;
    int64_t elements;
    bool scale;
  };
  const Part parts[] = {
      {"attn_sink", 0, heads, false},     {"wq_b.weight", 0, headRows, false},
      {"wq_b.scale", 0, headRows, true},  {"wo_a.weight", 0, groupRows, false},
      {"wo_a.scale", 0, groupRows, true}, {"wo_b.weight", 1, groupRows, false},
      {"wo_b.scale", 1, groupRows, true},
  };
  for (const Part &part : parts) {
    auto it = tensors.find(part.name);
    if (it == tensors.end())
      continue;
    if (part.scale && part.elements % kBlock != 0) {
      error = std::string(part.name) + ": a rank's " +
              std::to_string(part.elements) +
              (part.axis ? " columns" : " rows") +
              " of the weight are not whole 128-wide scale blocks";
      return false;
    }
    int64_t count = part.scale ? part.elements / kBlock : part.elements;
    if (!sliceTensor(it->second, part.axis, rank * count, count, part.name,
                     error))
      return false;
  }
  return true;
}

bool shardModelTensors(const ModelConfig &config, int64_t rank, int64_t degree,
                       std::vector<LayerTensors> &tensors, std::string &error) {
  if (degree == 1)
    return true;
  for (size_t layer = 0; layer < tensors.size(); ++layer)
    if (!shardLayerTensors(config, rank, degree, tensors[layer], error)) {
      error = "layer " + std::to_string(layer) + " " + error;
      return false;
    }
  return true;
}

} // namespace v4a::rt
