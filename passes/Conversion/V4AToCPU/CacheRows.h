//===- CacheRows.h - reading and writing cache rows in loops ----*- C++ -*-===//
//
// A !v4a.kv_cache lowered to its bytes (memref<?xi8>), read and written row
// by row in the layouts of core/CacheLayout.h: plain bf16 / f32 rows, fp8
// MODEL1 rows (e4m3 values with a ue8m0 scale per 64 dims, bf16 rope dims),
// fp8 index keys (e4m3 values, one f32 scale a row) and MXFP4 index keys
// (e2m1 values, a ue8m0 scale per 32 dims). Pages hold all value bytes,
// then all scale bytes.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_PASSES_CONVERSION_V4ATOCPU_CACHEROWS_H
#define V4A_PASSES_CONVERSION_V4ATOCPU_CACHEROWS_H

#include "core/CacheLayout.h"
#include "dialects/V4A/IR/V4ADialect.h"
#include "passes/Conversion/V4AToCPU/LoopEmitter.h"

namespace v4a {

class CacheRows {
  using LoopEmitter = cpu::LoopEmitter;

public:
  /// Whether rows of this layout are lowered (the others are an error).
  static bool isLowered(KVCacheType type);

  CacheRows(LoopEmitter &e, mlir::Value bytes, KVCacheType type);

  /// Feature `feature` of row `row`, decoded to f32.
  mlir::Value load(mlir::Value row, mlir::Value feature);
  /// Encodes row `sourceRow` of `source` ([N, dim], any float type) into row
  /// `row`. Quantized parts take a power-of-two scale per block, so values
  /// that went through the fp8 simulation are stored exactly.
  void storeRow(mlir::Value row, mlir::Value source, mlir::Value sourceRow);

  const layout::RowLayout &layout() const { return row; }
  /// The cache's bytes (memref<?xi8>).
  mlir::Value bytes() const { return cacheBytes; }
  /// The bytes viewed as [rows, dim] elements (plain layouts), else null.
  mlir::Value plainRows() const { return plain; }
  /// Byte offsets of row `row`'s values and of its scales: the one place
  /// where a row's address is computed from its index.
  mlir::Value valueOffset(mlir::Value row);
  mlir::Value scaleOffset(mlir::Value row);
  /// The byte offset of raw (bf16) feature `feature` >= quantDims of the row
  /// whose values start at `values`.
  mlir::Value rawOffset(mlir::Value values, mlir::Value feature);

private:
  mlir::Value loadModel1(mlir::Value row, mlir::Value feature);
  mlir::Value loadMXFP4(mlir::Value row, mlir::Value feature);
  void storeModel1Row(mlir::Value row, mlir::Value source,
                      mlir::Value sourceRow);
  void storeIndexFP8Row(mlir::Value row, mlir::Value source,
                        mlir::Value sourceRow);
  void storeMXFP4Row(mlir::Value row, mlir::Value source,
                     mlir::Value sourceRow);
  /// pow2ceil(max(amaxFloor, max |source[sourceRow, begin:end]|) / maxValue).
  mlir::Value blockScale(mlir::Value source, mlir::Value sourceRow,
                         mlir::Value begin, mlir::Value end, float amaxFloor,
                         float maxValue);
  /// Over the quantized dims' scale blocks: stores each block's ue8m0 scale
  /// (pow2ceil of its amax over maxValue) at `scales` + block, then calls
  /// `body` with the block's dims and scale; returns the block count.
  mlir::Value
  storeBlockScales(mlir::Value source, mlir::Value sourceRow,
                   mlir::Value scales, float amaxFloor, float maxValue,
                   llvm::function_ref<void(mlir::Value begin, mlir::Value end,
                                           mlir::Value scale)>
                       body);
  /// The e4m3 code of source[sourceRow, f] / scale.
  mlir::Value e4m3Code(mlir::Value source, mlir::Value sourceRow, mlir::Value f,
                       mlir::Value scale);
  mlir::Value byteAt(mlir::Value offset);
  mlir::Value loadBF16(mlir::Value offset);
  void storeBF16(mlir::Value value, mlir::Value offset);
  mlir::Value loadF32(mlir::Value offset);
  void storeF32(mlir::Value value, mlir::Value offset);
  void storeByte(mlir::Value byte, mlir::Value offset);

  LoopEmitter &e;
  mlir::Value cacheBytes;
  layout::RowLayout row;
  int64_t pageRows;
  /// The bytes viewed as [rows, dim] elements, for plain layouts.
  mlir::Value plain;
};

} // namespace v4a

#endif // V4A_PASSES_CONVERSION_V4ATOCPU_CACHEROWS_H
