//===- Checkpoint.cpp - attention tensors of a checkpoint -----------------===//

#include "lib/Engine/Checkpoint.h"

#include "core/FileIO.h"
#include "lib/Config/JsonCheck.h"
#include "runtime/SafeTensors.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <set>

namespace v4a {

static bool isAttentionTensor(const std::string &name) {
  return (name.rfind("layers.", 0) == 0 || name.rfind("mtp.", 0) == 0) &&
         name.find(".attn.") != std::string::npos;
}

/// The layer a checkpoint name belongs to, or -1.
static int64_t layerOfName(const ModelConfig &config, const std::string &name,
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

/// Whether a shard name stays inside the checkpoint's folder: relative, no
/// ".." component, no empty component.
static bool isShardInsideFolder(llvm::StringRef shard) {
  if (shard.empty() || shard.starts_with("/") || shard.contains('\0'))
    return false;
  llvm::SmallVector<llvm::StringRef> parts;
  shard.split(parts, '/');
  return llvm::none_of(parts, [](llvm::StringRef part) {
    return part.empty() || part == "." || part == "..";
  });
}

/// Whether `path` is a JSON index rather than a safetensors file: safetensors
/// starts with a binary length, an index with '{' (after blanks).
static bool looksLikeIndex(const std::string &path) {
  std::string error, prefix(64, '\0');
  std::optional<io::InputFile> in =
      io::InputFile::open(path, "checkpoint", error);
  // Only regular files are sniffed, at offset 0 without moving the position
  // (standard input shares it); a FIFO or "-" is a safetensors stream.
  if (!in || !in->isRegular())
    return false;
  prefix.resize(std::min<uint64_t>(in->size(), prefix.size()));
  if (!in->readAt(reinterpret_cast<uint8_t *>(prefix.data()), 0, prefix.size(),
                  error))
    return false;
  size_t first = prefix.find_first_not_of(" \t\r\n");
  // A safetensors length is 8 bytes; a '{' followed by zero bytes is one.
  return first != std::string::npos && prefix[first] == '{' &&
         prefix.find('\0') == std::string::npos;
}

bool shardsOfIndex(std::string_view text, const std::string &dir,
                   std::vector<std::string> &files, std::string &error) {
  if (!checkJsonStructure(text, error))
    return false;
  auto index = llvm::json::parse(llvm::StringRef(text.data(), text.size()));
  const llvm::json::Object *root = index ? index->getAsObject() : nullptr;
  const llvm::json::Object *map =
      root ? root->getObject("weight_map") : nullptr;
  if (!map) {
    if (!index)
      llvm::consumeError(index.takeError());
    error = "expected an index with a \"weight_map\" object";
    return false;
  }
  std::set<std::string> shards;
  for (const auto &[name, shard] : *map) {
    if (!isAttentionTensor(name.str()))
      continue;
    std::optional<llvm::StringRef> file = shard.getAsString();
    if (!file || !isShardInsideFolder(*file)) {
      error = "weight_map[\"" + name.str() +
              "\"] must name a file inside the checkpoint's folder (no "
              "absolute path, no '..'), got " +
              (file ? "'" + file->str() + "'" : std::string("a non-string"));
      return false;
    }
    shards.insert(file->str());
  }
  files.clear();
  for (const std::string &shard : shards)
    files.push_back(dir.empty() ? shard : dir + "/" + shard);
  return true;
}

/// The checkpoint files holding attention tensors: `path` itself, or the
/// shards a sharded index names for them.
static bool checkpointFiles(const std::string &path,
                            std::vector<std::string> &files,
                            std::string &error) {
  if (!llvm::StringRef(path).ends_with(".json") && !looksLikeIndex(path)) {
    files.push_back(path);
    return true;
  }
  std::optional<std::string> text =
      io::readFile(path, io::kConfigLimit, "checkpoint index", error);
  if (!text)
    return false;
  if (!shardsOfIndex(*text, llvm::sys::path::parent_path(path).str(), files,
                     error)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

bool readCheckpoint(const ModelConfig &config, const std::string &path,
                    std::vector<rt::LayerTensors> &tensors, std::string &error,
                    const std::vector<int64_t> &layers) {
  std::vector<std::string> files;
  if (!checkpointFiles(path, files, error))
    return false;
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
    for (auto &[name, tensor] : *contents) {
      std::string rest;
      int64_t layer = layerOfName(config, name, rest);
      if (layer < 0) {
        error = name + ": the configuration has no such attention layer";
        return false;
      }
      rt::HostTensor host;
      host.shape = tensor.shape;
      if (tensor.dtype == st::DType::F8_E4M3 ||
          tensor.dtype == st::DType::F8_E8M0) {
        host.type = tensor.dtype == st::DType::F8_E4M3
                        ? rt::HostTensor::Type::E4M3
                        : rt::HostTensor::Type::UE8M0;
        host.bytes = std::move(tensor.data);
      } else if (tensor.dtype == st::DType::F32 ||
                 tensor.dtype == st::DType::BF16 ||
                 tensor.dtype == st::DType::F16) {
        host.f32 = *tensor.toF32();
      } else {
        error = name + " (" + file + "): dtype " + st::dtypeName(tensor.dtype) +
                " is not a weight dtype (BF16, F16, F32, or F8_E4M3 with "
                "F8_E8M0 scales)";
        return false;
      }
      if (!tensors[layer].emplace(rest, std::move(host)).second) {
        error = name + ": appears in more than one checkpoint file (again in " +
                file + ")";
        return false;
      }
    }
  }
  return true;
}

} // namespace v4a
