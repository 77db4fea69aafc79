//===- SparseAttention.h - the attention kernel family ----------*- C++ -*-===//
//
// v4a.cache_attention on tensor cores: a block per query token and group of
// 64 heads (the MMA's M) with a copy warpgroup and two math warpgroups, the
// token's row slots walked in pairs of blocks of 64 gathered rows, S = Q.K^T
// and O += P.V on wgmma with f32 accumulators and an online softmax between
// them, each math warpgroup's softmax under the other's products.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_PASSES_CONVERSION_V4ATOGPU_SPARSEATTENTION_H
#define V4A_PASSES_CONVERSION_V4ATOGPU_SPARSEATTENTION_H

#include "dialects/V4A/IR/V4AOps.h"

#include "mlir/IR/PatternMatch.h"

namespace v4a::gpu {

/// Whether the family computes `op`: bf16 query, kv and results, bf16
/// cache rows, a static head width that is a multiple of 128 and at most
/// 512 (its shared memory within the block's limit).
bool isAttentionCovered(CacheAttentionOp op);

/// The inverse RoPE of `op`'s result that the family's epilogue can apply
/// (the result's only use, in the same block, on its last dims), or null.
RoPEOp fusedInverseRoPE(CacheAttentionOp op);

/// The head norm and rope that make `op`'s query, rope(rms_norm(q)) over
/// [T, H, D], when the family's prologue can apply them (each op's only
/// use, in the same block, a head row's chunks a power of two of lanes
/// that the math warpgroups split into whole teams), or null ops.
struct QueryNorm {
  RMSNormOp norm;
  RoPEOp rope;
  explicit operator bool() const { return norm && rope; }
};
QueryNorm fusedQueryNorm(CacheAttentionOp op);

/// Replaces `op` with the family's kernel launch over buffers; with an
/// `inverseRope` (fusedInverseRoPE of it; else null), that op too: the epilogue
/// turns the output's rope dims back, as the row family would from the stored
/// bf16 output (the same operations on the same values). With a `queryNorm`
/// (fusedQueryNorm of it), its ops too: the prologue reads q before them and
/// fills the query tile with what the row family would have stored.
void lowerCacheAttention(mlir::RewriterBase &rewriter, CacheAttentionOp op,
                         RoPEOp inverseRope, QueryNorm queryNorm = {});

} // namespace v4a::gpu

#endif // V4A_PASSES_CONVERSION_V4ATOGPU_SPARSEATTENTION_H
