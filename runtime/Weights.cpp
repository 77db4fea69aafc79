//===- Weights.cpp - attention tensors of checkpoint files ----------------===//

#include "runtime/Weights.h"

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

} // namespace v4a::rt
