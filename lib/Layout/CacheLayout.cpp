//===- CacheLayout.cpp - byte layout of one cache row ---------------------===//

#include "lib/Layout/CacheLayout.h"

namespace v4a::layout {

static std::optional<RowLayout> reject(std::string *why, std::string text) {
  if (why)
    *why = std::move(text);
  return std::nullopt;
}

static int64_t alignTo(int64_t value, int64_t align) {
  return (value + align - 1) / align * align;
}

std::optional<RowLayout> describeRow(RowKind kind, int64_t dim,
                                     std::string *why) {
  if (dim <= 0)
    return reject(why, "row width must be positive");
  if (dim > kMaxRowDims)
    return reject(why, "row width " + std::to_string(dim) +
                           " exceeds the supported maximum of " +
                           std::to_string(kMaxRowDims));
  RowLayout row{kind, dim, 0, 0, 0, 0, 0};
  switch (kind) {
  case RowKind::BF16:
  case RowKind::IndexBF16:
    row.rawDims = dim;
    row.valueBytes = 2 * dim;
    return row;
  case RowKind::F32:
    row.rawDims = dim;
    row.valueBytes = 4 * dim;
    return row;
  case RowKind::FP8Model1: {
    if (dim <= kModel1RopeDims || (dim - kModel1RopeDims) % 64 != 0)
      return reject(why, "fp8_model1 needs a width of 64 bf16 rope dims plus "
                         "a positive multiple of 64 e4m3 dims (512 in V4)");
    row.quantDims = dim - kModel1RopeDims;
    row.rawDims = kModel1RopeDims;
    row.scaleBlock = 64;
    row.valueBytes = row.quantDims + 2 * row.rawDims;
    int64_t scales = row.quantDims / row.scaleBlock;
    // The scale area is padded so that a row spans a multiple of 8 bytes.
    row.scaleBytes = alignTo(row.valueBytes + scales, 8) - row.valueBytes;
    return row;
  }
  case RowKind::MXFP8:
    if (dim % 32 != 0)
      return reject(why, "mxfp8 needs a width that is a multiple of 32");
    row.quantDims = dim;
    row.scaleBlock = 32;
    row.valueBytes = dim;
    row.scaleBytes = dim / 32;
    return row;
  case RowKind::IndexFP8:
    row.quantDims = dim;
    row.scaleBlock = dim;
    row.valueBytes = dim;
    row.scaleBytes = 4; // one f32 scale per row
    return row;
  case RowKind::IndexMXFP4:
    if (dim % 32 != 0)
      return reject(why, "index_mxfp4 needs a width that is a multiple of 32");
    row.quantDims = dim;
    row.scaleBlock = 32;
    row.valueBytes = dim / 2;
    row.scaleBytes = dim / 32;
    return row;
  }
  return reject(why, "unknown row layout");
}

const char *rowKindName(RowKind kind) {
  switch (kind) {
  case RowKind::BF16:
    return "bf16";
  case RowKind::FP8Model1:
    return "fp8_model1";
  case RowKind::MXFP8:
    return "mxfp8";
  case RowKind::IndexBF16:
    return "index_bf16";
  case RowKind::IndexFP8:
    return "index_fp8";
  case RowKind::IndexMXFP4:
    return "index_mxfp4";
  case RowKind::F32:
    return "f32";
  }
  return "unknown";
}

} // namespace v4a::layout
