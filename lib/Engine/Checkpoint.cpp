//===- Checkpoint.cpp - attention tensors of a checkpoint -----------------===//

#include "lib/Engine/Checkpoint.h"

#include "core/FileIO.h"
#include "lib/Config/JsonCheck.h"
#include "runtime/Weights.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <set>

namespace v4a {

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
    if (!rt::isAttentionTensor(name.str()))
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
  return checkpointFiles(path, files, error) &&
         rt::readCheckpointFiles(config, files, tensors, error, layers);
}

} // namespace v4a
