//===- KVPlan.cpp - per-sequence cache plan of a model --------------------===//

#include "core/KVPlan.h"

#include "core/TensorSpecs.h"

#include <algorithm>

namespace v4a::plan {

const char *componentName(Component component) {
  switch (component) {
  case Component::Window:
    return "window";
  case Component::Compressed:
    return "compressed";
  case Component::IndexKeys:
    return "index_keys";
  case Component::CompressorState:
    return "compressor_state";
  case Component::IndexerState:
    return "indexer_state";
  }
  return "unknown";
}

const char *indexLayoutName(IndexLayout layout) {
  switch (layout) {
  case IndexLayout::BF16:
    return "bf16";
  case IndexLayout::FP8:
    return "fp8";
  case IndexLayout::MXFP4:
    return "mxfp4";
  }
  return "unknown";
}

std::optional<IndexLayout> parseIndexLayout(std::string_view name) {
  for (IndexLayout layout :
       {IndexLayout::BF16, IndexLayout::FP8, IndexLayout::MXFP4})
    if (name == indexLayoutName(layout))
      return layout;
  return std::nullopt;
}

int64_t Plan::allocatedBytes() const {
  int64_t total = 0;
  for (const Buffer &buffer : buffers)
    if (!buffer.isAlias())
      total += buffer.bytes;
  return total;
}

/// Sizes beyond this are configuration mistakes, and keep every sum of
/// buffer sizes far from int64 overflow.
static constexpr int64_t kMaxBufferBytes = int64_t(1) << 48;
static constexpr int64_t kMaxPlanBytes = int64_t(1) << 60;

/// value rounded up to a multiple, or -1 when that does not fit.
static int64_t roundUp(int64_t value, int64_t multiple) {
  int64_t sum;
  if (value < 0 || __builtin_add_overflow(value, multiple - 1, &sum))
    return -1;
  return sum / multiple * multiple;
}

/// a * b, or -1 when that does not fit.
static int64_t multiply(int64_t a, int64_t b) {
  int64_t product;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &product))
    return -1;
  return product;
}

namespace {
class Planner {
public:
  Planner(const ModelDims &dims, const PlanOptions &options)
      : dims(dims), options(options) {}

  void planLayer(const LayerSpec &layer, std::vector<Buffer> &out) {
    layout::RowKind mainKind = mainKindFor(layer);
    // A window longer than the context never fills: cap it there.
    if (layer.useSwa)
      out.push_back(make(layer.id, Component::Window, mainKind,
                         std::min(dims.window, options.contextTokens),
                         dims.headDim, /*paged=*/false, -1));
    if (layer.compressRatio == 0)
      return;
    int64_t kvAlias = aliasFor(layer, layer.kvSource);
    int64_t groups = options.contextTokens / layer.compressRatio;
    out.push_back(make(layer.id, Component::Compressed, mainKind, groups,
                       dims.headDim, /*paged=*/true, kvAlias));
    // The state holds kv and score of the current group (and, with overlap,
    // of the previous one): coff * ratio slots of 2 * coff * D f32 values.
    int64_t coff = layer.compressRatio == 4 ? 2 : 1;
    out.push_back(
        make(layer.id, Component::CompressorState, layout::RowKind::F32,
             multiply(coff, layer.compressRatio),
             multiply(2 * coff, dims.headDim), /*paged=*/false, kvAlias));
    if (layer.indexTopk == 0)
      return;
    int64_t keyAlias = aliasFor(layer, layer.indexKSource);
    out.push_back(make(layer.id, Component::IndexKeys, indexKind(), groups,
                       dims.indexHeadDim, /*paged=*/true, keyAlias));
    if (hasIndexerCompressor(layer))
      out.push_back(make(layer.id, Component::IndexerState,
                         layout::RowKind::F32, multiply(2, layer.compressRatio),
                         multiply(4, dims.indexHeadDim), /*paged=*/false,
                         keyAlias));
  }

private:
  layout::RowKind mainKindFor(const LayerSpec &layer) const {
    switch (options.mainLayout) {
    case MainLayout::BF16:
      return layout::RowKind::BF16;
    case MainLayout::FP8:
      return layout::RowKind::FP8Model1;
    case MainLayout::PerLayer:
      break;
    }
    return layer.hasPackedKv ? layout::RowKind::FP8Model1
                             : layout::RowKind::BF16;
  }

  layout::RowKind indexKind() const {
    switch (options.indexLayout) {
    case IndexLayout::FP8:
      return layout::RowKind::IndexFP8;
    case IndexLayout::MXFP4:
      return layout::RowKind::IndexMXFP4;
    case IndexLayout::BF16:
      break;
    }
    return layout::RowKind::IndexBF16;
  }

  int64_t aliasFor(const LayerSpec &layer, int64_t source) const {
    return options.ignoreSharing || source == layer.id ? -1 : source;
  }

  Buffer make(int64_t layer, Component component, layout::RowKind kind,
              int64_t rows, int64_t dim, bool paged, int64_t aliasOf) {
    Buffer buffer;
    buffer.layer = layer;
    buffer.component = component;
    buffer.kind = kind;
    buffer.rows = paged ? roundUp(rows, options.pageSize) : rows;
    buffer.dim = dim;
    auto reject = [&](const std::string &why) {
      if (error.empty())
        error = "layer " + std::to_string(layer) + " " +
                componentName(component) + ": " + why;
      return buffer;
    };
    buffer.aliasOf = aliasOf;
    std::string why;
    std::optional<layout::RowLayout> row = layout::describeRow(kind, dim, &why);
    if (!row)
      return reject(why);
    buffer.rowBytes = row->rowBytes();
    buffer.bytes =
        roundUp(multiply(buffer.rows, buffer.rowBytes), options.alignment);
    if (buffer.rows < 0 || buffer.bytes < 0 || buffer.bytes > kMaxBufferBytes)
      return reject("the buffer would exceed 2^48 bytes; the configuration "
                    "or the context is too large");
    return buffer;
  }

  const ModelDims &dims;
  const PlanOptions &options;

public:
  /// The first layout that cannot hold its rows.
  std::string error;
};
} // namespace

std::optional<Plan> planCaches(const std::vector<LayerSpec> &layers,
                               const ModelDims &dims,
                               const PlanOptions &options, std::string &error) {
  if (options.pageSize <= 0 || options.alignment <= 0 ||
      options.contextTokens < 0) {
    error = "page size and alignment must be positive and the context >= 0";
    return std::nullopt;
  }
  Plan plan;
  plan.options = options;
  Planner planner(dims, options);
  int64_t total = 0;
  for (const LayerSpec &layer : layers) {
    size_t first = plan.buffers.size();
    planner.planLayer(layer, plan.buffers);
    for (size_t i = first; i < plan.buffers.size(); ++i)
      total += plan.buffers[i].bytes;
    if (planner.error.empty() && total > kMaxPlanBytes)
      planner.error = "the plan would exceed 2^60 bytes at layer " +
                      std::to_string(layer.id);
    if (!planner.error.empty())
      break;
  }
  if (!planner.error.empty()) {
    error = planner.error;
    return std::nullopt;
  }
  return plan;
}

} // namespace v4a::plan
