//===- Weights.h - attention tensors of checkpoint files --------*- C++ -*-===//
//
// Reads the attention tensors of safetensors files into one map per layer,
// as the runtime holds them (f32, or e4m3 / ue8m0 bytes). Plain C++; the
// sharded index of a checkpoint is the compiler library's (JSON).
//
//===----------------------------------------------------------------------===//

#ifndef V4A_RUNTIME_WEIGHTS_H
#define V4A_RUNTIME_WEIGHTS_H

#include "runtime/Model.h"
#include "runtime/SafeTensors.h"

#include <string>
#include <vector>

namespace v4a::rt {

/// Whether `name` is an attention tensor ("layers.{i}.attn.*",
/// "mtp.{j}.attn.*").
bool isAttentionTensor(const std::string &name);

/// The layer a checkpoint name belongs to, or -1; `rest` gets the name
/// without the layer prefix.
int64_t layerOfName(const ModelConfig &config, const std::string &name,
                    std::string &rest);

/// Adds checkpoint tensor `name` (an attention tensor of a layer the
/// configuration has) to its layer's map in `tensors` (one per layer of
/// the model); `origin` (a file) names where it came from in errors.
bool addAttentionTensor(const ModelConfig &config, const std::string &name,
                        st::Tensor tensor, const std::string &origin,
                        std::vector<LayerTensors> &tensors, std::string &error);

/// Reads the attention tensors of `files`; other tensors are ignored, a
/// tensor of a layer the configuration lacks is an error naming it.
/// `layers`, when given, keeps only those layers' tensors.
bool readCheckpointFiles(const ModelConfig &config,
                         const std::vector<std::string> &files,
                         std::vector<LayerTensors> &tensors, std::string &error,
                         const std::vector<int64_t> &layers = {});

/// Keeps rank `rank`'s part of one layer's tensors (`tensors`, named as
/// in the checkpoint without the layer prefix) under `degree`-way tensor
/// parallelism of the full model `config`: its heads' rows of wq_b and
/// entries of attn_sink, its output groups' rows of wo_a and columns of
/// wo_b (and their scale blocks); the rest is every rank's. An error names
/// a tensor whose rank part is not made of whole 128 x 128 scale blocks.
bool shardLayerTensors(const ModelConfig &config, int64_t rank, int64_t degree,
                       LayerTensors &tensors, std::string &error);

/// shardLayerTensors over every layer of the model (nothing at degree 1);
/// an error names the layer.
bool shardModelTensors(const ModelConfig &config, int64_t rank, int64_t degree,
                       std::vector<LayerTensors> &tensors, std::string &error);

} // namespace v4a::rt

#endif // V4A_RUNTIME_WEIGHTS_H
