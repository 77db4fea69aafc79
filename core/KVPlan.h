//===- KVPlan.h - per-sequence cache plan of a model ------------*- C++ -*-===//
//
// Which caches a model needs per sequence, their layouts and sizes, and which
// of them are aliases of another layer's cache. Plain C++ so that the runtime
// can allocate from the same plan.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_CORE_KVPLAN_H
#define V4A_CORE_KVPLAN_H

#include "core/CacheLayout.h"
#include "v4a/ModelConfig.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace v4a::plan {

enum class Component {
  Window,
  Compressed,
  IndexKeys,
  CompressorState,
  IndexerState
};
inline constexpr Component kAllComponents[] = {
    Component::Window, Component::Compressed, Component::IndexKeys,
    Component::CompressorState, Component::IndexerState};

const char *componentName(Component component);

struct ModelDims {
  int64_t headDim = 0;
  int64_t indexHeadDim = 0;
  int64_t window = 0;
};

/// Main KV rows (window and compressed) in the layer's own layout (bf16, or
/// fp8 MODEL1 for packed layers), or forced to one layout for comparisons.
enum class MainLayout { PerLayer, BF16, FP8 };
/// Index key rows: bf16 (the reference), fp8 (e4m3 with one power-of-two f32
/// scale per row) or MXFP4 (e2m1 with a ue8m0 scale per 32 dims, which
/// holds the reference's fp4-simulated keys exactly).
enum class IndexLayout { BF16, FP8, MXFP4 };
/// "bf16", "fp8", "mxfp4": the spelling of options and reports.
const char *indexLayoutName(IndexLayout layout);
std::optional<IndexLayout> parseIndexLayout(std::string_view name);
/// The names, for messages: "bf16, fp8 or mxfp4".
inline constexpr const char *kIndexLayoutNames = "bf16, fp8 or mxfp4";
/// The layout unless one is asked for: the smallest that keeps DeepSeek's
/// reference outputs within compare.py's tolerance (MXFP4 keys give the
/// same outputs as bf16 keys, at a quarter of their bytes and, on the GPU,
/// faster scores; bench/indexer-notes.md). `EngineOptions::indexLayout`
/// and the v4a-plan-kv pass option spell it too.
inline constexpr IndexLayout kDefaultIndexLayout = IndexLayout::MXFP4;

struct PlanOptions {
  int64_t contextTokens = 1 << 20;
  int64_t pageSize = 64;
  int64_t alignment = 256;
  MainLayout mainLayout = MainLayout::PerLayer;
  IndexLayout indexLayout = kDefaultIndexLayout;
  /// Plan every layer's caches as its own, ignoring the sharing maps.
  bool ignoreSharing = false;
};

struct Buffer {
  int64_t layer = 0;
  Component component = Component::Window;
  layout::RowKind kind = layout::RowKind::BF16;
  int64_t rows = 0;
  int64_t dim = 0;
  int64_t rowBytes = 0;
  /// Size of the buffer's memory (also given for aliases).
  int64_t bytes = 0;
  /// Layer whose buffer this one is (-1: owns its memory).
  int64_t aliasOf = -1;
  bool isAlias() const { return aliasOf >= 0; }
};

struct Plan {
  PlanOptions options;
  std::vector<Buffer> buffers;
  /// Bytes of memory actually allocated: aliases count zero.
  int64_t allocatedBytes() const;
};

/// Plans the caches of `layers` (in id order, MTP included). Fails, naming
/// the layer and buffer, when a layout cannot hold a row of its width.
std::optional<Plan> planCaches(const std::vector<LayerSpec> &layers,
                               const ModelDims &dims,
                               const PlanOptions &options, std::string &error);

} // namespace v4a::plan

#endif // V4A_CORE_KVPLAN_H
