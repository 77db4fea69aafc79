//===- RowRegions.h - the row kernel family ---------------------*- C++ -*-===//
//
// Chains of row-wise v4a ops (rms_norm, rope, act_quant, hadamard, float
// casts), each reading the previous one's result, as one kernel: a team of
// threads per row (the last dimension) holding the row in registers, eight
// consecutive elements per thread, one read of the input and one write of
// the output, or, when a cache store closes the chain, of the cache rows.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_PASSES_CONVERSION_V4ATOGPU_ROWREGIONS_H
#define V4A_PASSES_CONVERSION_V4ATOGPU_ROWREGIONS_H

#include "mlir/IR/PatternMatch.h"

#include <optional>

namespace v4a::gpu {

/// Whether `op` is a row op the family computes (its shapes included).
bool isRowOp(mlir::Operation *op);

/// Whether `op` is a cache store the family writes (plain bf16 / f32 rows
/// and fp8 MODEL1 rows of a static width).
bool isRowStore(mlir::Operation *op);

/// Columns of a merged product that a kernel reads in place: the product
/// [T, W] and where the rows start in a row of it. Row r of a rank-3 input
/// [T, H, D] is then columns begin + h*D.. of product row t.
struct ColumnWindow {
  mlir::Value product;
  int64_t begin = 0;
};

/// The product's column where `part`, a result of v4a.split_columns, starts.
int64_t firstColumnOf(mlir::Value part);

/// The window of `rows` when it is a part of v4a.split_columns (or that
/// part viewed as heads) of the part's element type, with every row and
/// part start at a 16-byte boundary (vector accesses).
std::optional<ColumnWindow> columnWindowOf(mlir::Value rows);

/// Once a kernel reads `rows` (a part with a columnWindowOf) in place and
/// nothing else reads it: erases its heads view, and the split when no
/// part of it is read any more.
void releaseColumnWindow(mlir::RewriterBase &rewriter, mlir::Value rows);

/// Replaces `chain` (row ops, each but the first reading the previous one's
/// only result as its row input) and `store` (a cache store of the chain's
/// result, or of any rows when the chain is empty; may be null) with one
/// kernel launch over buffers.
void lowerRowChain(mlir::RewriterBase &rewriter,
                   llvm::ArrayRef<mlir::Operation *> chain,
                   mlir::Operation *store);

} // namespace v4a::gpu

#endif // V4A_PASSES_CONVERSION_V4ATOGPU_ROWREGIONS_H
