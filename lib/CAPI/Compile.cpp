//===- Compile.cpp - v4a_compile: the C ABI over the JIT ------------------===//
//
// The compiling library's source: an Engine compiles the configuration for
// the CPU or GPU 0 and loads the weights (a sharded checkpoint's index too).
//
//===----------------------------------------------------------------------===//

#include "lib/CAPI/Source.h"

#include "core/KVPlan.h"

#include "lib/Engine/EngineAccess.h"

#include <exception>
#include <new>

using namespace v4a;

namespace {

class EngineSource : public capi::Source {
public:
  EngineSource(std::unique_ptr<Engine> engine, int64_t maxSequences, int device,
               int64_t tensorParallel, int64_t tensorRank)
      : engine(std::move(engine)), slots(maxSequences), ordinal(device),
        degree(tensorParallel), rank(tensorRank) {}
  const ModelConfig &config() const override { return engine->config(); }
  const std::vector<LayerSpec> &selected() const override {
    return engine->selectedLayers();
  }
  const plan::Plan &plan() const override {
    return EngineAccess::plan(*engine);
  }
  int64_t maxSequences() const override { return slots; }
  int device() const override { return ordinal; }
  int64_t tensorParallel() const override { return degree; }
  int64_t tensorRank() const override { return rank; }
  rt::Model *model() override { return EngineAccess::model(*engine); }
  bool loadTensors(std::vector<rt::LayerTensors> tensors,
                   std::string &error) override {
    return EngineAccess::loadTensors(*engine, std::move(tensors), error);
  }
  bool loadCheckpoint(const std::string &path, std::string &error) override {
    return engine->loadWeights(path, error);
  }

private:
  std::unique_ptr<Engine> engine;
  int64_t slots;
  int ordinal;
  int64_t degree, rank;
};

} // namespace

extern "C" v4a_status v4a_compile(const char *config_json,
                                  const v4a_options *given, v4a_model **model) {
  if (!config_json || !model)
    return capi::failWithoutModel(V4A_ERROR_INVALID_ARGUMENT,
                                  "v4a_compile: null configuration or result");
  *model = nullptr;
  try {
    std::string error;
    v4a_options options;
    if (!capi::resolveOptions(given, options, error))
      return capi::failWithoutModel(V4A_ERROR_INVALID_ARGUMENT, error);
    bool cuda = std::string(options.backend) == "cuda";
    if (cuda && options.device != 0)
      return capi::failWithoutModel(V4A_ERROR_UNSUPPORTED,
                                    "v4a_compile runs on CUDA device 0, not " +
                                        std::to_string(options.device) +
                                        " (a package opens on any)");
    if (options.tensor_rank >= options.tensor_parallel)
      return capi::failWithoutModel(
          V4A_ERROR_INVALID_ARGUMENT,
          "v4a_options.tensor_rank is " + std::to_string(options.tensor_rank) +
              ", outside [0, " + std::to_string(options.tensor_parallel - 1) +
              "]");
    if (cuda && options.tensor_parallel != 1)
      return capi::failWithoutModel(
          V4A_ERROR_UNSUPPORTED,
          "v4a_options.tensor_parallel runs on the cpu backend");
    EngineOptions engineOptions;
    engineOptions.maxSequences = options.max_sequences;
    engineOptions.contextTokens = options.context_tokens;
    engineOptions.pageSize = options.page_size;
    engineOptions.layers.assign(options.layers,
                                options.layers + options.num_layers);
    engineOptions.backend = options.backend;
    if (options.kv_layout) {
      std::string kv = options.kv_layout;
      if (kv != "bf16" && kv != "fp8")
        return capi::failWithoutModel(V4A_ERROR_INVALID_ARGUMENT,
                                      "v4a_options.kv_layout is '" + kv +
                                          "' (bf16 or fp8)");
      engineOptions.packedKv = kv == "fp8";
    }
    if (options.index_layout) {
      if (!plan::parseIndexLayout(options.index_layout))
        return capi::failWithoutModel(
            V4A_ERROR_INVALID_ARGUMENT,
            std::string("v4a_options.index_layout is '") +
                options.index_layout + "' (bf16, fp8 or mxfp4)");
      engineOptions.indexLayout = options.index_layout;
    }
    engineOptions.tensorParallel = options.tensor_parallel;
    engineOptions.tensorRank = options.tensor_rank;
    std::unique_ptr<Engine> engine =
        Engine::create(config_json, engineOptions, error);
    if (!engine)
      return capi::failWithoutModel(V4A_ERROR_FAILED, error);
    return capi::wrap(
        std::make_unique<EngineSource>(std::move(engine), options.max_sequences,
                                       cuda ? 0 : -1, options.tensor_parallel,
                                       options.tensor_rank),
        model, options.use_graphs != 0);
  } catch (const std::bad_alloc &) {
    return capi::failWithoutModel(V4A_ERROR_FAILED, "out of host memory");
  } catch (const std::exception &e) {
    return capi::failWithoutModel(V4A_ERROR_FAILED, e.what());
  }
}
