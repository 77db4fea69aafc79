// RUN: v4a-opt %s -split-input-file -v4a-plan-kv="context=256" -v4a-build-steps -verify-diagnostics | FileCheck %s
// RUN: v4a-compile %examples/tiny-v41.json --emit=planned | v4a-opt -v4a-build-steps | FileCheck %s --check-prefix=SHARED
// RUN: v4a-compile %examples/v4-flash.json --emit=planned | v4a-opt -v4a-build-steps | FileCheck %s --check-prefix=FLASH

// One metadata function per key, one step per key and role, in the order of
// the first layer that uses them; the two ratio-4 layers share one step.
// CHECK-LABEL: v4a.model @steps
// CHECK: func.func @meta_0_0_1_0(%{{.*}}: tensor<?xi64> {v4a.bind = "positions"}, %{{.*}}: tensor<?xi64> {v4a.bind = "slots"}, %{{.*}}: tensor<?xi64> {v4a.bind = "first"}, %{{.*}}: tensor<?xi64> {v4a.bind = "last"})
// CHECK-SAME: -> (tensor<?x8xi32> {v4a.bind = "window.attend"}, tensor<?xi64> {v4a.bind = "window.store"})
// CHECK: v4a.step_window {{.*}} {window = 8 : i64}
// CHECK: func.func @step_0_0_1_0(
// CHECK-NOT: compressed
// CHECK-SAME: attributes {v4a.meta = @meta_0_0_1_0, v4a.sched_meta_key = "0_0_1_0"}
// CHECK: v4a.cache_attention {{.*}} window %{{.*}}[%{{.*}}] sink
// CHECK: func.func @meta_4_0_1_4(
// CHECK-SAME: {v4a.bind = "compressed.base"}, tensor<?xi64> {v4a.bind = "compressed.complete"}, tensor<?xi64> {v4a.bind = "compressed.starts"})
// CHECK: v4a.step_compressed {{.*}} {ratio = 4 : i64, slot_rows = 64 : i64}
// Every layer of the key ropes its compressed rows at their group's first
// token: computed once, with the metadata.
// CHECK: %[[THREE:.*]] = arith.constant 3 : i64
// CHECK: %[[SHIFT:.*]] = tensor.splat %[[THREE]]
// CHECK: %[[STARTS:.*]] = arith.subi %arg0, %[[SHIFT]]
// CHECK: return {{.*}}, %[[STARTS]] :
// CHECK: func.func @step_4_0_1_4(
// CHECK-SAME: !v4a.kv_cache<f32, dim = 2048, page_size = 8> {v4a.bind = "cache.compressor_state"}
// CHECK-SAME: {v4a.bind = "cache.index_keys"}, %{{.*}}: !v4a.kv_cache<f32, dim = 512, page_size = 8> {v4a.bind = "cache.indexer_state"})
// CHECK-SAME: -> (tensor<?x64xbf16> {v4a.bind = "y"}, tensor<?x4xi32> {v4a.bind = "topk"})
// Query and kv chains, then the compressor into the compressed cache ...
// CHECK: v4a.linear %[[X:arg0]], %{{.*}} -> tensor<?x32xbf16>
// CHECK: v4a.rms_norm
// CHECK: tensor.expand_shape
// CHECK: v4a.rms_norm %{{.*}} {eps
// CHECK: v4a.rope
// CHECK: v4a.linear %[[X]], %{{.*}} -> tensor<?x512xbf16>
// CHECK: v4a.rms_norm
// CHECK: v4a.rope
// CHECK: %[[KV:.*]] = v4a.act_quant {{.*}}format = #v4a<quant_format e4m3>{{.*}}quant_dims = 448
// CHECK: v4a.linear %[[X]], %{{.*}} -> tensor<?x1024xf32>
// CHECK: v4a.linear %[[X]], %{{.*}} -> tensor<?x1024xf32>
// CHECK: v4a.compressor {{.*}} {overlap, ratio = 4 : i64, slot_rows = 8 : i64}
// CHECK: arith.truncf
// CHECK-NOT: arith.subi
// CHECK: v4a.rope %{{.*}}, %[[START:arg7]]
// CHECK: v4a.act_quant
// CHECK: v4a.cache_store %{{.*}}, %{{.*}}, %[[COMPLETE:arg6]] : !v4a.kv_cache<bf16, dim = 512
// ... the indexer's compressor into the index keys ...
// CHECK: v4a.compressor {{.*}} {overlap, ratio = 4 : i64, slot_rows = 8 : i64}
// CHECK: v4a.hadamard
// CHECK: v4a.act_quant {{.*}}e2m1
// CHECK: v4a.cache_store %{{.*}}, %{{.*}}, %[[COMPLETE]] : !v4a.kv_cache<index_mxfp4, dim = 128
// ... the indexer's queries and the top-k ...
// CHECK: v4a.hadamard
// CHECK: v4a.cache_indexer_score {{.*}} bound %{{.*}} {ratio = 4 : i64}
// CHECK: %[[TOPK:.*]] = v4a.topk %{{.*}} {k = 4 : i64}
// ... attention before the window store, the inverse RoPE, the output.
// CHECK: v4a.cache_attention %{{.*}}, %[[KV]] window {{.*}} compressed {{.*}}[%[[TOPK]] : tensor<?x4xi32>]
// CHECK: v4a.cache_store %{{.*}}, %[[KV]], %arg4
// CHECK: v4a.rope {{.*}}inverse
// CHECK: v4a.grouped_output
// CHECK: return %{{.*}}, %[[TOPK]]
// CHECK: func.func @meta_128_1_1_0(
// CHECK: func.func @step_128_1_1_0(
// CHECK-SAME: %[[CTX:arg[0-9]+]]: tensor<1xi64> {v4a.bind = "context"}
// CHECK-SAME: !v4a.kv_cache<fp8_model1, dim = 512, page_size = 64> {v4a.bind = "cache.compressed"}
// CHECK: v4a.compressor {{.*}} {ratio = 128 : i64, slot_rows = 128 : i64}
// CHECK: %[[VISIBLE:.*]] = v4a.visible_rows %arg1 bound %[[CTX]] {ratio = 128 : i64}
// CHECK: v4a.cache_attention {{.*}}[%[[VISIBLE]] : tensor<?x?xi32>]
// CHECK-NOT: func.func @step_4_0_1_4
v4a.model @steps <{compress_rope_theta = 1.6e5 : f64, head_dim = 512 : i64,
    hidden_size = 64 : i64, index_head_dim = 128 : i64, index_n_heads = 2 : i64,
    index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3, 4>,
    layer_index_module_map = array<i64: 0, 1, 2, 3, 4>,
    layer_kv_map = array<i64: 0, 1, 2, 3, 4>, num_attention_heads = 2 : i64,
    num_hidden_layers = 4 : i64, num_key_value_heads = 1 : i64,
    o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64,
    qk_rope_head_dim = 64 : i64, rms_norm_eps = 1.0e-6 : f64,
    rope_theta = 1.0e4 : f64, sliding_window = 8 : i64,
    weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa packed_kv kv_source 2 index_source 2
  v4a.layer 3 ratio 4 topk 4 swa kv_source 3 index_source 3
  v4a.layer 4 ratio 0 topk 0 swa mtp kv_source 4 index_source 4
}

// -----

// fp8 checkpoints: projections take their 128x128 block scales.
// CHECK-LABEL: v4a.model @fp8
// CHECK: func.func @step_0_0_1_0(
// CHECK-SAME: tensor<32x64xf8E4M3FN> {v4a.bind = "wq_a.weight"}, %{{.*}}: tensor<1x1xf8E8M0FNU> {v4a.bind = "wq_a.scale"}
// CHECK: v4a.linear %arg0, %{{.*}} scale %{{.*}} : tensor<?x64xbf16>, tensor<32x64xf8E4M3FN>, tensor<1x1xf8E8M0FNU> -> tensor<?x32xbf16>
// CHECK: v4a.grouped_output %{{.*}}, %{{.*}}, %{{.*}} scale %{{.*}} {groups = 2 : i64} : tensor<?x2x512xbf16>, tensor<64x512xbf16>, tensor<64x64xf8E4M3FN>
v4a.model @fp8 <{compress_rope_theta = 1.6e5 : f64, head_dim = 512 : i64,
    hidden_size = 64 : i64, index_head_dim = 128 : i64, index_n_heads = 2 : i64,
    index_topk = 0 : i64, layer_index_k_map = array<i64: 0>,
    layer_index_module_map = array<i64: 0>, layer_kv_map = array<i64: 0>,
    num_attention_heads = 2 : i64, num_hidden_layers = 1 : i64,
    num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64,
    q_lora_rank = 32 : i64, qk_rope_head_dim = 64 : i64,
    rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64,
    sliding_window = 8 : i64, weight_format = #v4a<weight_format fp8>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
}

// -----

// expected-error @below {{'v4a.model' op layer 0 has no sliding window: step functions need use_swa}}
v4a.model @no_window <{compress_rope_theta = 1.6e5 : f64, head_dim = 512 : i64,
    hidden_size = 64 : i64, index_head_dim = 128 : i64, index_n_heads = 2 : i64,
    index_topk = 4 : i64, layer_index_k_map = array<i64: 0>,
    layer_index_module_map = array<i64: 0>, layer_kv_map = array<i64: 0>,
    num_attention_heads = 2 : i64, num_hidden_layers = 1 : i64,
    num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64,
    q_lora_rank = 32 : i64, qk_rope_head_dim = 64 : i64,
    rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64,
    sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 4 topk 4 kv_source 0 index_source 0
}

// SHARED: func.func @meta_0_0_1_0(
// SHARED: func.func @step_0_0_1_0(
// SHARED: func.func @meta_2_0_1_4(
// SHARED: func.func @step_2_0_1_4(
// A ratio-2 compressor pools a split projection: kv is the second half.
// SHARED: %[[BOTH:.*]] = v4a.linear %arg0, %{{.*}} -> tensor<?x160xf32>
// SHARED: %[[KVH:.*]] = tensor.extract_slice %[[BOTH]][0, 80]
// SHARED: %[[SCORE:.*]] = tensor.extract_slice %[[BOTH]][0, 0]
// SHARED: v4a.compressor %[[KVH]], %[[SCORE]], {{.*}} {ratio = 2 : i64, slot_rows = 2 : i64}
// V4.1 index keys come from the compressed latent.
// SHARED: v4a.linear {{.*}} -> tensor<?x32xbf16>
// SHARED: v4a.cache_store {{.*}} !v4a.kv_cache<index_mxfp4, dim = 32
// A consumer of KV and top-k: no compressor, no indexer; the top-k is an
// argument and the caches are its source's (aliases in the plan).
// SHARED: func.func @step_2_0_1_4_shares_kv_shares_topk(
// SHARED-NOT: compressed.starts
// SHARED-SAME: tensor<?x4xi32> {v4a.bind = "topk"}
// SHARED-NOT: cache.compressor_state
// SHARED-NOT: cache.index_keys
// SHARED-SAME: -> (tensor<?x64xbf16> {v4a.bind = "y"})
// SHARED-NOT: v4a.compressor
// SHARED-NOT: v4a.topk
// SHARED: v4a.cache_attention {{.*}}[%arg7 : tensor<?x4xi32>]
// SHARED: func.func @meta_1_0_1_4(
// Ratio 1 keeps every token: the projection is the entry, roped at the
// token's own position.
// SHARED-NOT: compressed.starts
// SHARED: func.func @step_1_0_1_4_makes_candidates(
// SHARED-SAME: -> (tensor<?x64xbf16> {v4a.bind = "y"}, tensor<?x4xi32> {v4a.bind = "topk"}, tensor<?x8xi32> {v4a.bind = "candidates"})
// SHARED-NOT: v4a.compressor
// SHARED: v4a.block_topk %{{.*}} {block_size = 8 : i64, num_blocks = 8 : i64}
// SHARED: func.func @step_1_0_1_4_shares_kv_shares_topk(
// SHARED: func.func @step_1_0_1_4_shares_kv_uses_candidates(
// SHARED-SAME: tensor<?x8xi32> {v4a.bind = "candidates"}
// SHARED: v4a.topk %{{.*}} candidates %{{.*}} {candidate_block_size = 8 : i64, k = 4 : i64}

// V4-Flash: three keys, three steps; the MTP layer (ratio 0) reuses the
// window-only step.
// FLASH: func.func @meta_0_0_1_0(
// FLASH: func.func @step_0_0_1_0(
// FLASH: func.func @meta_4_0_1_512(
// FLASH: func.func @step_4_0_1_512(
// FLASH: func.func @meta_128_0_1_0(
// FLASH: func.func @step_128_0_1_0(
// FLASH-NOT: func.func
