// RUN: v4a-opt %s -split-input-file -v4a-fuse | FileCheck %s
// RUN: v4a-compile %examples/tiny-v41.json --emit=planned | v4a-opt -v4a-build-steps -v4a-fuse | FileCheck %s --check-prefix=SHARED
// RUN: v4a-compile %examples/v41-shared.json --emit=planned | v4a-opt -v4a-build-steps -v4a-fuse | FileCheck %s --check-prefix=V41
// RUN: v4a-compile %examples/v4-flash.json --emit=planned | v4a-opt -v4a-build-steps -v4a-fuse | FileCheck %s --check-prefix=FLASH

// Projections of x merge into one region next to the first; those of another
// input or with another kind of weight stay apart. The per-head norm and the
// RoPE become one region, the kv chain (norm, RoPE, fp8 simulation) another;
// the kv result has two users, so the window store stays outside, after the
// attention.
// CHECK-LABEL: func.func @step
// CHECK: %[[X:.*]]:2 = v4a.fused "merged_linear" (%arg0, %arg1, %arg3)
// CHECK-NEXT: ^bb0(%[[I:.*]]: tensor<?x64xbf16>, %[[W1:.*]]: tensor<32x64xbf16>, %[[W2:.*]]: tensor<80x64xbf16>):
// CHECK-NEXT: %[[A:.*]] = v4a.linear %[[I]], %[[W1]]
// CHECK-NEXT: %[[B:.*]] = v4a.linear %[[I]], %[[W2]]
// CHECK-NEXT: v4a.yield %[[A]], %[[B]]
// CHECK: v4a.linear %[[X]]#0, %arg2
// CHECK: %[[Q:.*]] = v4a.fused "rms_norm_rope" (
// CHECK: %[[KV:.*]] = v4a.fused "rms_norm_rope_act_quant" (%[[X]]#1, %arg4, %arg5)
// CHECK: v4a.sparse_attention %[[Q]], %[[KV]]
// CHECK: v4a.cache_store %arg6, %[[KV]], %arg7
// CHECK-NOT: v4a.fused
func.func @step(%x: tensor<?x64xbf16>, %wqa: tensor<32x64xbf16>, %wqb: tensor<160x32xbf16>, %wkv: tensor<80x64xbf16>, %g: tensor<80xbf16>, %pos: tensor<?xi64>, %ring: !v4a.kv_cache<bf16, dim = 80, page_size = 8>, %store: tensor<?xi64>, %idx: tensor<?x8xi32>, %sink: tensor<2xf32>) -> tensor<?x2x80xbf16> attributes {v4a.sched_meta_key = "0_0_1_0"} {
  %qa = v4a.linear %x, %wqa : tensor<?x64xbf16>, tensor<32x64xbf16> -> tensor<?x32xbf16>
  %ql = v4a.linear %qa, %wqb : tensor<?x32xbf16>, tensor<160x32xbf16> -> tensor<?x160xbf16>
  %c0 = arith.constant 0 : index
  %t = tensor.dim %ql, %c0 : tensor<?x160xbf16>
  %q3 = tensor.expand_shape %ql [[0], [1, 2]] output_shape [%t, 2, 80] : tensor<?x160xbf16> into tensor<?x2x80xbf16>
  %qn = v4a.rms_norm %q3 {eps = 1.0e-06 : f64} : tensor<?x2x80xbf16>
  %q = v4a.rope %qn, %pos {rope_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x80xbf16>, tensor<?xi64>
  %kl = v4a.linear %x, %wkv : tensor<?x64xbf16>, tensor<80x64xbf16> -> tensor<?x80xbf16>
  %kn = v4a.rms_norm %kl weight %g {eps = 1.0e-06 : f64} : tensor<?x80xbf16>, tensor<80xbf16>
  %kr = v4a.rope %kn, %pos {rope_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x80xbf16>, tensor<?xi64>
  %kv = v4a.act_quant %kr {block_size = 64 : i64, format = #v4a<quant_format e4m3>, pow2_scale, quant_dims = 64 : i64} : tensor<?x80xbf16>
  %o = v4a.sparse_attention %q, %kv, %idx, %sink {scale = 0.1 : f64} : tensor<?x2x80xbf16>, tensor<?x80xbf16>, tensor<?x8xi32>, tensor<2xf32> -> tensor<?x2x80xbf16>
  v4a.cache_store %ring, %kv, %store : !v4a.kv_cache<bf16, dim = 80, page_size = 8>, tensor<?x80xbf16>, tensor<?xi64>
  return %o : tensor<?x2x80xbf16>
}

// -----

// Functions that are not steps are left alone.
// CHECK-LABEL: func.func @not_a_step
// CHECK-NOT: v4a.fused
func.func @not_a_step(%x: tensor<?x64xbf16>, %w1: tensor<32x64xbf16>, %w2: tensor<80x64xbf16>) -> (tensor<?x32xbf16>, tensor<?x80xbf16>) {
  %a = v4a.linear %x, %w1 : tensor<?x64xbf16>, tensor<32x64xbf16> -> tensor<?x32xbf16>
  %b = v4a.linear %x, %w2 : tensor<?x64xbf16>, tensor<80x64xbf16> -> tensor<?x80xbf16>
  return %a, %b : tensor<?x32xbf16>, tensor<?x80xbf16>
}

// A source of V4.1 sharing: x feeds one merged GEMM (wq_a, wkv, the ratio-2
// compressor, the indexer weights); the compressor chain ends in the store
// of the compressed cache, but the latent also feeds the index-key
// projection, so the chain stops at the norm.
// SHARED-LABEL: func.func @step_2_0_1_4(
// SHARED: v4a.fused "merged_linear" (%arg0, {{.*}}) : ({{.*}}) -> (tensor<?x32xbf16>, tensor<?x80xbf16>, tensor<?x160xf32>, tensor<?x2xbf16>)
// SHARED: v4a.fused "merged_linear" ({{.*}}) : ({{.*}}) -> (tensor<?x160xbf16>, tensor<?x64xbf16>)
// SHARED: v4a.fused "compressor_truncf_rms_norm" (
// SHARED: v4a.fused "rope_act_quant_cache_store" (
// SHARED: v4a.fused "rms_norm_rope_hadamard_act_quant_cache_store" (
// A consumer of KV and top-k has no compressor and no indexer regions.
// SHARED-LABEL: func.func @step_2_0_1_4_shares_kv_shares_topk(
// SHARED: v4a.fused "merged_linear" (%arg0, {{.*}}) : ({{.*}}) -> (tensor<?x32xbf16>, tensor<?x80xbf16>)
// SHARED-NOT: compressor
// SHARED-NOT: hadamard
// SHARED: return

// V4-Flash's C4 step: the fp8 projections of x merge apart from the bf16
// compressor and indexer ones.
// FLASH-LABEL: func.func @step_4_0_1_512(
// FLASH: v4a.fused "merged_linear" (%arg0, {{.*}}) : ({{.*}}) -> (tensor<?x1024xbf16>, tensor<?x512xbf16>)
// FLASH: v4a.fused "merged_linear" (%arg0, {{.*}}) : ({{.*}}) -> (tensor<?x1024xf32>, tensor<?x1024xf32>, tensor<?x256xf32>, tensor<?x256xf32>, tensor<?x64xbf16>)
// FLASH: v4a.fused "compressor_truncf_rms_norm_rope_act_quant_cache_store"
// FLASH: v4a.fused "compressor_truncf_rms_norm_rope_hadamard_act_quant_cache_store"

// v41-shared.json: layer 3 shares layer 2's KV and top-k; its step merges
// only its own projections and has no compressor or indexer region.
// V41-LABEL: func.func @step_2_0_1_512_shares_kv_shares_topk(
// V41: v4a.fused "merged_linear" (%arg0, {{.*}}) : ({{.*}}) -> (tensor<?x1024xbf16>, tensor<?x512xbf16>)
// V41-NOT: compressor
// V41-NOT: hadamard
// V41: return
// V41-LABEL: func.func @step_2_0_1_512_shares_kv(
// V41: v4a.cache_indexer_score
