//===- Engine.h - compile and run a model in-process ------------*- C++ -*-===//
//
// The JIT API: compile a model's attention configuration for the host CPU,
// load its weights, and run prefill and decode steps.
//
//   std::string error;
//   auto engine = v4a::Engine::create(configJson, {}, error);
//   engine->loadRandomWeights(/*seed=*/1, error);
//   int64_t seq = engine->addSequence(error);
//   engine->step({{seq}, {promptLength}, promptLength}, inputs, outputs,
//   error);
//
//===----------------------------------------------------------------------===//

#ifndef V4A_ENGINE_H
#define V4A_ENGINE_H

#include "v4a/ModelConfig.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace v4a {

struct EngineOptions {
  /// Sequence slots the caches are allocated for.
  int64_t maxSequences = 4;
  /// Maximum tokens per sequence the caches are planned for.
  int64_t contextTokens = 4096;
  /// Rows per page of the compressed caches.
  int64_t pageSize = 64;
  /// Store compressed KV in the packed fp8 MODEL1 layout.
  bool packedKv = false;
  /// The indexer's key rows: "bf16" (the reference's), "fp8" (e4m3 with one
  /// f32 scale per row) or "mxfp4" (e2m1 with a ue8m0 scale per 32 dims,
  /// which holds the reference's fp4-simulated keys exactly; the default:
  /// plan::kDefaultIndexLayout).
  std::string indexLayout = "mxfp4";
  /// Run rank `tensorRank` of `tensorParallel`-way tensor parallelism: the
  /// rank's num_attention_heads / tensorParallel heads and o_groups /
  /// tensorParallel output groups (tensorParallelConfig), with its part of
  /// the weights (shardLayerTensors). A step's outputs are then the rank's
  /// partial products of wo_b; their sum over the ranks is the layer's
  /// output. config() stays the whole model's.
  int64_t tensorParallel = 1;
  int64_t tensorRank = 0;
  /// The layers to run (empty: all). A selected layer's sharing sources must
  /// be selected too; other layers get no weights, caches or outputs.
  std::vector<int64_t> layers;
  /// Where the steps run: "cpu" (compiled for the host) or "cuda" (kernels
  /// for sm_90a on GPU 0 through the CUDA driver).
  std::string backend = "cpu";
  /// On the CPU, lower the steps with the GPU kernels' loop structure
  /// (tokens in parallel, per-token scratch, no vector lanes): the same
  /// results, to check that structure where no GPU is.
  bool gpuLoopsOnCpu = false;
  /// Run steps of up to one token per slot padded to a power of two of
  /// tokens (rt::Model::padDecodeSteps; off by default). Padding rows write
  /// the caches of a slot no sequence holds: a released sequence's cache
  /// bytes may change after releaseSequence.
  bool padDecodeSteps = false;
};

/// Called as a long phase advances: `done` of `total` units.
using ProgressFn = std::function<void(int64_t done, int64_t total)>;

struct Batch {
  std::vector<int64_t> sequences;
  std::vector<int64_t> lengths;
  int64_t paddedTokens = 0;
};

class Engine {
public:
  /// Parses and verifies the configuration (sharing topology included),
  /// plans the caches and compiles the kernels for the backend (a missing
  /// GPU or driver is an error here).
  static std::unique_ptr<Engine> create(std::string_view configJson,
                                        const EngineOptions &options,
                                        std::string &error);
  ~Engine();

  const ModelConfig &config() const;

  /// The compiled CPU kernels as an ELF object for the host (AOT for the
  /// CPU): one `_mlir_ciface_NAME` entry point per kernel.
  bool objectCode(std::string &bytes, std::string &error) const;
  /// A C header declaring the object's entry points.
  std::string objectHeader(const std::string &includeGuard) const;
  const std::vector<LayerSpec> &layers() const;

  /// Threads the compiled kernels run on (OMP_NUM_THREADS sets it).
  int threads() const;
  /// The layers that run (EngineOptions::layers, or all).
  const std::vector<LayerSpec> &selectedLayers() const;

  /// Deterministic random weights for every attention tensor of the selected
  /// layers, generated in parallel (the values do not depend on the number
  /// of threads).
  bool loadRandomWeights(uint64_t seed, std::string &error,
                         const ProgressFn &progress = {});
  /// Attention tensors from a .safetensors checkpoint, or from the
  /// model.safetensors.index.json of a sharded one (only the shards that
  /// hold attention tensors are read). Tensors of other parts of the model
  /// are ignored.
  bool loadWeights(const std::string &path, std::string &error);

  int64_t addSequence(std::string &error);
  bool releaseSequence(int64_t sequence, std::string &error);
  int64_t position(int64_t sequence) const;

  /// inputs[l], outputs[l]: [rows, paddedTokens, hidden_size] f32 per layer
  /// of the model (null for a layer that is not selected).
  bool step(const Batch &batch, const std::vector<const float *> &inputs,
            const std::vector<float *> &outputs, std::string &error);

  /// Raw cache bytes of a sequence's buffer (component: "window",
  /// "compressed", "index_keys", "compressor_state", "indexer_state");
  /// consumer layers resolve to their source's buffer.
  uint8_t *cacheBytes(int64_t sequence, int64_t layer,
                      const std::string &component);
  /// The byte size of that buffer (0 when the layer has none).
  int64_t cacheSize(int64_t layer, const std::string &component) const;
  /// Restoring a sequence (from storage, or filled for a benchmark): copy
  /// each cache buffer in (exactly cacheSize bytes), then declare how many
  /// tokens the caches hold.
  bool writeCache(int64_t sequence, int64_t layer, const std::string &component,
                  const std::vector<uint8_t> &bytes, std::string &error);
  bool restorePosition(int64_t sequence, int64_t position, std::string &error);

  /// The implementation, private to the library.
  struct Impl;

private:
  /// The library's own access (lib/Engine/EngineAccess.h).
  friend struct EngineAccess;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace v4a

#endif // V4A_ENGINE_H
