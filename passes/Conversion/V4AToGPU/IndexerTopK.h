//===- IndexerTopK.h - the indexer's scores and top-k as one family -*- C++
//-*-===//
//
// v4a.cache_indexer_score feeding a v4a.topk, without the [tokens, rows]
// score matrix: a block per (token, split of its rows) scores 64 index keys
// at a time on tensor cores and streams them through a shared-memory top-k;
// when a token's rows are split, a second kernel merges the splits' lists.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_PASSES_CONVERSION_V4ATOGPU_INDEXERTOPK_H
#define V4A_PASSES_CONVERSION_V4ATOGPU_INDEXERTOPK_H

#include "core/CacheLayout.h"

#include "mlir/IR/PatternMatch.h"

namespace v4a {
class CacheIndexerScoreOp;
class TopKOp;
} // namespace v4a

namespace v4a::gpu {

/// The selections the family computes together with `scores`: every user
/// of the scores, each a v4a.topk (within candidate blocks or not) or a
/// v4a.block_topk; none when the family does not cover them all (the query
/// must be bf16 and the keys bf16, fp8 or MXFP4 rows, with a head width
/// that is a multiple of 64 and at most 256, at most 256 heads, each k or
/// block count at most 2048).
llvm::SmallVector<mlir::Operation *>
coveredSelections(CacheIndexerScoreOp scores);

/// Whether the family takes an indexer of `heads` query heads of `width`
/// keeping `k` rows or blocks (bf16 queries and index keys).
bool indexerFamilyCovers(int64_t heads, int64_t width, int64_t k);
/// The most bytes of split lists the family holds in a step of `tokens`
/// tokens keeping `k` rows: nothing grows with the rows.
int64_t indexerSplitListBytes(int64_t tokens, int64_t k);
/// The family's transient bytes in a step of `tokens` tokens over index
/// keys of `keys` rows: its split lists, and with MXFP4 keys on e4m3 MMAs
/// (`e4m3`, see lowerIndexerTopK) each token's query image. Nothing grows
/// with the rows.
int64_t indexerTransientBytes(int64_t tokens, int64_t heads, int64_t width,
                              int64_t k, layout::RowKind keys, bool e4m3);

/// The same for a candidate source keeping `k` rows and `blockK` blocks of
/// `blockSize` rows: both selections' lists, and its query images once
/// where both share a scoring kernel (twice where they run apart).
int64_t indexerSourceTransientBytes(int64_t tokens, int64_t heads,
                                    int64_t width, int64_t k, int64_t blockK,
                                    int64_t blockSize, layout::RowKind keys,
                                    bool e4m3);

/// Whether the e4m3 form of lowerIndexerTopK takes these scores' keys:
/// MXFP4 rows of 128 dims.
bool takesE4M3Keys(CacheIndexerScoreOp scores);

/// Replaces `scores` and its `selections` (coveredSelections(scores), in
/// program order) with the family's kernels: a run of the scores for each
/// selection, except that a candidate source's rows and blocks share one
/// when one block's shared memory holds both. With `e4m3`, MXFP4 keys of
/// 128 dims are multiplied as e4m3 with the head sum on the tensor cores:
/// relu(dot) rounded to bf16, as the reference rounds it, and the heads
/// summed in the tensor cores' order, so that picks may differ from the
/// other backends' where scores lie within that rounding; without it they
/// are decoded to bf16 and the scores keep every backend's bits.
void lowerIndexerTopK(mlir::RewriterBase &rewriter, CacheIndexerScoreOp scores,
                      llvm::ArrayRef<mlir::Operation *> selections, bool e4m3);

} // namespace v4a::gpu

#endif // V4A_PASSES_CONVERSION_V4ATOGPU_INDEXERTOPK_H
