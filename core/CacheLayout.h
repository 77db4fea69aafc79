//===- CacheLayout.h - byte layout of one cache row -------------*- C++ -*-===//
//
// The single description of every cache row layout. Writers, readers, the
// cache planner and the IR verifiers all derive offsets and sizes from here.
// Plain C++: the runtime uses it without MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_CORE_CACHELAYOUT_H
#define V4A_CORE_CACHELAYOUT_H

#include <cstdint>
#include <optional>
#include <string>

namespace v4a::layout {

enum class RowKind {
  BF16,
  FP8Model1,
  MXFP8,
  IndexBF16,
  IndexFP8,
  IndexMXFP4,
  /// Compressor state: f32 values.
  F32
};

/// Where the parts of one row live. Within a page all value bytes of all rows
/// come first, then all scale bytes (the MODEL1 page convention); a layout
/// without scales has scaleBytes == 0.
struct RowLayout {
  RowKind kind;
  int64_t dim;        // logical width of the row
  int64_t quantDims;  // leading dims stored quantized (0 for bf16 rows)
  int64_t rawDims;    // trailing dims stored as bf16 (rope dims in MODEL1)
  int64_t scaleBlock; // dims per scale (0: no scales)
  int64_t valueBytes; // quantized values + raw values
  int64_t scaleBytes; // scales + pad
  int64_t rowBytes() const { return valueBytes + scaleBytes; }
};

/// Widest row any layout accepts; keeps every byte count far from overflow.
inline constexpr int64_t kMaxRowDims = int64_t(1) << 24;

/// MODEL1 keeps this many trailing dims in bf16.
inline constexpr int64_t kModel1RopeDims = 64;

/// Describes a row of `kind` and logical width `dim`; on an impossible
/// combination returns nothing and sets `why`.
std::optional<RowLayout> describeRow(RowKind kind, int64_t dim,
                                     std::string *why = nullptr);

/// Name of the layout as spelled in IR and reports.
const char *rowKindName(RowKind kind);

/// Byte offsets of one row's values and scales in a buffer of pages of
/// `pageRows` rows (each page: all value bytes, then all scale bytes).
struct RowPlace {
  int64_t values = 0;
  int64_t scales = 0;
};
RowPlace placeRow(const RowLayout &row, int64_t pageRows, int64_t index);

/// Whether rows of this layout can be encoded and decoded here.
bool hasCodec(RowKind kind);
/// Writes `values` (row.dim floats) in the row's layout. Quantized parts
/// take a power-of-two scale per block, so rows that went through the
/// specification's quantization simulation encode without loss.
void encodeRow(const RowLayout &row, const float *values, uint8_t *valueBytes,
               uint8_t *scaleBytes);
void decodeRow(const RowLayout &row, const uint8_t *valueBytes,
               const uint8_t *scaleBytes, float *values);

} // namespace v4a::layout

#endif // V4A_CORE_CACHELAYOUT_H
