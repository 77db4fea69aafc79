//===- Checkpoint.h - attention tensors of a checkpoint ---------*- C++ -*-===//

#ifndef V4A_LIB_ENGINE_CHECKPOINT_H
#define V4A_LIB_ENGINE_CHECKPOINT_H

#include "runtime/Model.h"
#include "v4a/ModelConfig.h"

#include <string>
#include <string_view>
#include <vector>

namespace v4a {

/// Reads the attention tensors ("layers.{i}.attn.*", "mtp.{j}.attn.*") of a
/// .safetensors file, or of the shards a model.safetensors.index.json names
/// for them, into one map per layer. Other tensors are ignored; a tensor of
/// a layer the configuration lacks is an error naming it. `layers`, when
/// given, keeps only those layers' tensors.
bool readCheckpoint(const ModelConfig &config, const std::string &path,
                    std::vector<rt::LayerTensors> &tensors, std::string &error,
                    const std::vector<int64_t> &layers = {});

/// The shard files (as `dir`/NAME) that a sharded checkpoint's index JSON
/// names for attention tensors. Every name must stay inside `dir`: relative,
/// without '.' or '..' components.
bool shardsOfIndex(std::string_view text, const std::string &dir,
                   std::vector<std::string> &files, std::string &error);

} // namespace v4a

#endif // V4A_LIB_ENGINE_CHECKPOINT_H
