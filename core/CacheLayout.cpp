//===- CacheLayout.cpp - byte layout of one cache row ---------------------===//

#include "core/CacheLayout.h"

#include "core/Numerics.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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

RowPlace placeRow(const RowLayout &row, int64_t pageRows, int64_t index) {
  int64_t page = index / pageRows, slot = index % pageRows;
  int64_t pageBytes = pageRows * row.rowBytes();
  RowPlace place;
  place.values = page * pageBytes + slot * row.valueBytes;
  place.scales =
      page * pageBytes + pageRows * row.valueBytes + slot * row.scaleBytes;
  return place;
}

bool hasCodec(RowKind kind) { return kind != RowKind::MXFP8; }

static void putBF16(uint8_t *out, float value) {
  uint16_t bits = num::toBF16Bits(value);
  std::memcpy(out, &bits, 2);
}

static float getBF16(const uint8_t *in) {
  uint16_t bits;
  std::memcpy(&bits, in, 2);
  return num::fromBF16Bits(bits);
}

/// The ue8m0 code of pow2ceil(amax * (1 / max)), amax floored, over `count`
/// values: the block scale of the specification's quantization simulation.
static uint8_t blockScaleBits(const float *values, int64_t count, float floor,
                              float max) {
  float amax = floor;
  for (int64_t i = 0; i < count; ++i)
    amax = std::max(amax, std::fabs(values[i]));
  return num::ue8m0CeilBits(amax * (1.0f / max));
}

static void encodeIndexFP8(const RowLayout &row, const float *values,
                           uint8_t *valueBytes, uint8_t *scaleBytes) {
  float scale = num::fromUE8M0Bits(
      blockScaleBits(values, row.dim, num::kE4M3AmaxFloor, num::kE4M3Max));
  for (int64_t i = 0; i < row.dim; ++i)
    valueBytes[i] = num::toE4M3Bits(values[i] / scale);
  std::memcpy(scaleBytes, &scale, 4);
}

static void encodeIndexMXFP4(const RowLayout &row, const float *values,
                             uint8_t *valueBytes, uint8_t *scaleBytes) {
  std::fill(valueBytes, valueBytes + row.valueBytes, 0);
  for (int64_t b = 0; b < row.dim / row.scaleBlock; ++b) {
    const float *block = values + b * row.scaleBlock;
    uint8_t code = blockScaleBits(block, row.scaleBlock, num::kE2M1AmaxFloor,
                                  num::kE2M1Max);
    float scale = num::fromUE8M0Bits(code);
    scaleBytes[b] = code;
    for (int64_t i = 0; i < row.scaleBlock; ++i) {
      int64_t f = b * row.scaleBlock + i;
      // Even dims in the low nibble.
      valueBytes[f / 2] |= num::toE2M1Bits(block[i] / scale) << (4 * (f % 2));
    }
  }
}

void encodeRow(const RowLayout &row, const float *values, uint8_t *valueBytes,
               uint8_t *scaleBytes) {
  switch (row.kind) {
  case RowKind::F32:
    std::memcpy(valueBytes, values, 4 * row.dim);
    return;
  case RowKind::BF16:
  case RowKind::IndexBF16:
    for (int64_t i = 0; i < row.dim; ++i)
      putBF16(valueBytes + 2 * i, values[i]);
    return;
  case RowKind::FP8Model1: {
    int64_t blocks = row.quantDims / row.scaleBlock;
    for (int64_t b = 0; b < blocks; ++b) {
      float amax = num::kE4M3AmaxFloor;
      for (int64_t i = b * row.scaleBlock; i < (b + 1) * row.scaleBlock; ++i)
        amax = std::max(amax, std::fabs(values[i]));
      uint8_t code = num::ue8m0CeilBits(amax * (1.0f / num::kE4M3Max));
      float scale = num::fromUE8M0Bits(code);
      scaleBytes[b] = code;
      for (int64_t i = b * row.scaleBlock; i < (b + 1) * row.scaleBlock; ++i)
        valueBytes[i] = num::toE4M3Bits(values[i] / scale);
    }
    std::fill(scaleBytes + blocks, scaleBytes + row.scaleBytes, 0);
    for (int64_t i = 0; i < row.rawDims; ++i)
      putBF16(valueBytes + row.quantDims + 2 * i, values[row.quantDims + i]);
    return;
  }
  case RowKind::IndexFP8:
    encodeIndexFP8(row, values, valueBytes, scaleBytes);
    return;
  case RowKind::IndexMXFP4:
    encodeIndexMXFP4(row, values, valueBytes, scaleBytes);
    return;
  case RowKind::MXFP8:
    return;
  }
}

void decodeRow(const RowLayout &row, const uint8_t *valueBytes,
               const uint8_t *scaleBytes, float *values) {
  switch (row.kind) {
  case RowKind::F32:
    std::memcpy(values, valueBytes, 4 * row.dim);
    return;
  case RowKind::BF16:
  case RowKind::IndexBF16:
    for (int64_t i = 0; i < row.dim; ++i)
      values[i] = getBF16(valueBytes + 2 * i);
    return;
  case RowKind::FP8Model1:
    for (int64_t i = 0; i < row.quantDims; ++i)
      values[i] = num::fromE4M3Bits(valueBytes[i]) *
                  num::fromUE8M0Bits(scaleBytes[i / row.scaleBlock]);
    for (int64_t i = 0; i < row.rawDims; ++i)
      values[row.quantDims + i] = getBF16(valueBytes + row.quantDims + 2 * i);
    return;
  case RowKind::IndexFP8: {
    float scale;
    std::memcpy(&scale, scaleBytes, 4);
    for (int64_t i = 0; i < row.dim; ++i)
      values[i] = num::fromE4M3Bits(valueBytes[i]) * scale;
    return;
  }
  case RowKind::IndexMXFP4:
    for (int64_t i = 0; i < row.dim; ++i)
      values[i] = num::fromE2M1Bits(valueBytes[i / 2] >> (4 * (i % 2))) *
                  num::fromUE8M0Bits(scaleBytes[i / row.scaleBlock]);
    return;
  case RowKind::MXFP8:
    std::fill(values, values + row.dim, 0.0f);
    return;
  }
}

} // namespace v4a::layout
