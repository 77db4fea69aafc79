// RUN: v4a-opt %s -split-input-file -verify-diagnostics -v4a-verify-topology
// RUN: v4a-compile %examples/v41-shared.json | v4a-opt -v4a-verify-topology | FileCheck %s --check-prefix=V41
// RUN: v4a-compile %examples/tiny-v41.json | v4a-opt -v4a-verify-topology -v4a-plan-kv -v4a-verify-topology -o /dev/null
// RUN: v4a-compile %examples/v4-pro.json | v4a-opt -v4a-verify-topology -o /dev/null

// The V4.1 example passes unchanged.
// V41: v4a.model @v41_shared
// V41: v4a.layer 39 ratio 1 topk 512 swa kv_source 20 index_source 30 candidate_source 20

// Valid sharing: segmented maps, a YoCo boundary that is a KV source, and a
// non-decreasing candidate map.
// v41_like
v4a.model @v41_like <{candidate_block_size = 8 : i64, candidate_topk_blocks = 8 : i64, compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 3, 3, 5, 6>, layer_kv_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, n_prefill_layer = 3 : i64, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 3 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 4 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 5 ratio 1 topk 4 swa kv_source 3 index_source 5 candidate_source 3
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// A plan in which the consumer aliases its source.
// planned
v4a.model @planned <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 0, 2>, layer_index_module_map = array<i64: 0, 0, 2>, layer_kv_map = array<i64: 0, 0, 2>, num_attention_heads = 2 : i64, num_hidden_layers = 2 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> attributes {v4a.kv_plan = #v4a.kv_plan<context_tokens = 128, page_size = 64, alignment = 256, bytes = 0, buffers = [#v4a.buffer<layer = 0, component = compressed, layout = bf16, rows = 64, dim = 64, row_bytes = 128, bytes = 8192, alias_of = -1>, #v4a.buffer<layer = 0, component = compressor_state, layout = f32, rows = 2, dim = 128, row_bytes = 512, bytes = 1024, alias_of = -1>, #v4a.buffer<layer = 0, component = index_keys, layout = index_bf16, rows = 64, dim = 32, row_bytes = 64, bytes = 4096, alias_of = -1>, #v4a.buffer<layer = 1, component = compressed, layout = bf16, rows = 64, dim = 64, row_bytes = 128, bytes = 8192, alias_of = 0>, #v4a.buffer<layer = 1, component = compressor_state, layout = f32, rows = 2, dim = 128, row_bytes = 512, bytes = 1024, alias_of = 0>, #v4a.buffer<layer = 1, component = index_keys, layout = index_bf16, rows = 64, dim = 32, row_bytes = 64, bytes = 4096, alias_of = 0>]>} {
  v4a.layer 0 ratio 2 topk 4 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 0 index_source 0
  v4a.layer 2 ratio 0 topk 0 swa mtp kv_source 2 index_source 2
}

// -----

// mtp_shares
v4a.model @mtp_shares <{candidate_block_size = 8 : i64, candidate_topk_blocks = 8 : i64, compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 3, 3, 5, 6>, layer_kv_map = array<i64: 0, 1, 1, 3, 3, 3, 3>, n_prefill_layer = 3 : i64, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 3 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 4 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 5 ratio 1 topk 4 swa kv_source 3 index_source 5 candidate_source 3
  // expected-error @+1 {{layer 6: kv map: rule e (MTP layers never share): maps to layer 3; an MTP layer must map to itself}}
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 3 index_source 6
}

// -----

// maps_to_mtp
v4a.model @maps_to_mtp <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 3, 3, 5, 6>, layer_kv_map = array<i64: 0, 1, 1, 3, 3, 6, 6>, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 3 ratio 1 topk 4 swa kv_source 3 index_source 3
  v4a.layer 4 ratio 1 topk 4 swa kv_source 3 index_source 3
  // expected-error @+1 {{layer 5: kv map: rule e (MTP layers never share): maps to MTP layer 6; only MTP layers may map to themselves there}}
  v4a.layer 5 ratio 0 topk 0 swa kv_source 6 index_source 5
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// window_only_shares
v4a.model @window_only_shares <{candidate_block_size = 8 : i64, candidate_topk_blocks = 8 : i64, compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 3, 3, 5, 6>, layer_kv_map = array<i64: 1, 1, 1, 3, 3, 3, 6>, n_prefill_layer = 3 : i64, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  // expected-error @+1 {{layer 0: kv map: rule d (consumer and source agree): the layer has no compressed KV cache (compress ratio 0, index_topk 0) but maps to layer 1; it must map to itself}}
  v4a.layer 0 ratio 0 topk 0 swa kv_source 1 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 3 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 4 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 5 ratio 1 topk 4 swa kv_source 3 index_source 5 candidate_source 3
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// dense_layer_in_topk_map
v4a.model @dense_layer_in_topk_map <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 4, 5, 6>, layer_index_module_map = array<i64: 0, 1, 1, 1, 4, 5, 6>, layer_kv_map = array<i64: 0, 1, 1, 3, 4, 5, 6>, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1
  // expected-error @+1 {{layer 3: index-topk map: rule d (consumer and source agree): the layer has no indexer (top-k) (compress ratio 128, index_topk 0) but maps to layer 1; it must map to itself}}
  v4a.layer 3 ratio 128 topk 0 swa kv_source 3 index_source 1
  v4a.layer 4 ratio 0 topk 0 swa kv_source 4 index_source 4
  v4a.layer 5 ratio 0 topk 0 swa kv_source 5 index_source 5
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// forward
v4a.model @forward <{candidate_block_size = 8 : i64, candidate_topk_blocks = 8 : i64, compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 3, 3, 5, 6>, layer_kv_map = array<i64: 0, 2, 2, 3, 3, 3, 6>, n_prefill_layer = 3 : i64, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  // expected-error @+1 {{layer 1: kv map: rule a (segmented sharing): maps forward to layer 2; a consumer maps to a source before it, and a layer before the first source has nothing to map to (make it a source by mapping it to itself)}}
  v4a.layer 1 ratio 2 topk 4 swa kv_source 2 index_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 2 index_source 1
  v4a.layer 3 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 4 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 5 ratio 1 topk 4 swa kv_source 3 index_source 5 candidate_source 3
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// not_a_source
v4a.model @not_a_source <{candidate_block_size = 8 : i64, candidate_topk_blocks = 8 : i64, compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 3, 3, 5, 6>, layer_kv_map = array<i64: 0, 1, 1, 3, 3, 4, 6>, n_prefill_layer = 3 : i64, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 3 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 4 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  // expected-error @+1 {{layer 5: kv map: rule a (segmented sharing): maps to layer 4, which is not a source (it maps to layer 3); map to a layer that maps to itself}}
  v4a.layer 5 ratio 1 topk 4 swa kv_source 4 index_source 5 candidate_source 3
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// window_only_source
v4a.model @window_only_source <{candidate_block_size = 8 : i64, candidate_topk_blocks = 8 : i64, compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 3, 3, 5, 6>, layer_kv_map = array<i64: 0, 0, 1, 3, 3, 3, 6>, n_prefill_layer = 3 : i64, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  // expected-error @+1 {{layer 1: kv map: rule a (segmented sharing): maps to layer 0, which is not a source (it has no compressed KV cache); map to a layer that maps to itself}}
  v4a.layer 1 ratio 2 topk 4 swa kv_source 0 index_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 3 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 4 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 5 ratio 1 topk 4 swa kv_source 3 index_source 5 candidate_source 3
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// source_between
v4a.model @source_between <{candidate_block_size = 8 : i64, candidate_topk_blocks = 8 : i64, compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 4, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 3, 4, 5, 6>, layer_kv_map = array<i64: 0, 1, 1, 3, 4, 3, 6>, n_prefill_layer = 3 : i64, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 3 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 4 ratio 1 topk 4 swa kv_source 4 index_source 4 candidate_source 4
  // expected-error @+1 {{layer 5: kv map: rule a (segmented sharing): maps to layer 3, but layer 4 in between is a source; map to layer 4}}
  v4a.layer 5 ratio 1 topk 4 swa kv_source 3 index_source 5 candidate_source 4
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// ratio_mismatch
v4a.model @ratio_mismatch <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 3, 3, 5, 6>, layer_kv_map = array<i64: 0, 1, 1, 1, 3, 3, 6>, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1
  // expected-error @+1 {{layer 3: kv map: rule d (consumer and source agree): compress ratio 1 differs from source layer 1's 2; share only between layers of the same compress ratio}}
  v4a.layer 3 ratio 1 topk 4 swa kv_source 1 index_source 3
  v4a.layer 4 ratio 1 topk 4 swa kv_source 3 index_source 3
  v4a.layer 5 ratio 1 topk 4 swa kv_source 3 index_source 5
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// topk_mismatch
v4a.model @topk_mismatch <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 2, 3, 3, 5, 6>, layer_kv_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1
  // expected-error @+1 {{layer 2: kv map: rule d (consumer and source agree): index_topk 2 differs from source layer 1's 4; share only between layers of the same index_topk}}
  v4a.layer 2 ratio 2 topk 2 swa kv_source 1 index_source 2
  v4a.layer 3 ratio 2 topk 4 swa kv_source 3 index_source 3
  v4a.layer 4 ratio 2 topk 4 swa kv_source 3 index_source 3
  v4a.layer 5 ratio 2 topk 4 swa kv_source 3 index_source 5
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// swa_mismatch
v4a.model @swa_mismatch <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 3, 3, 5, 6>, layer_kv_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1
  // expected-error @+1 {{layer 2: kv map: rule d (consumer and source agree): use_swa 0 differs from source layer 1's 1; share only between layers of the same use_swa}}
  v4a.layer 2 ratio 2 topk 4 kv_source 1 index_source 1
  v4a.layer 3 ratio 2 topk 4 swa kv_source 3 index_source 3
  v4a.layer 4 ratio 2 topk 4 swa kv_source 3 index_source 3
  v4a.layer 5 ratio 2 topk 4 swa kv_source 3 index_source 5
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// crosses_boundary
v4a.model @crosses_boundary <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 1, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 1, 3, 3, 6>, layer_kv_map = array<i64: 0, 1, 1, 1, 3, 3, 6>, n_prefill_layer = 3 : i64, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1
  // expected-error @+1 {{layer 3: kv map: rule c (YoCo boundary): maps to layer 1 across the boundary at layer 3 (n_prefill_layer); map to a source on the same side}}
  v4a.layer 3 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 4 ratio 2 topk 4 swa kv_source 3 index_source 3
  v4a.layer 5 ratio 2 topk 4 swa kv_source 3 index_source 3
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// boundary_not_source
v4a.model @boundary_not_source <{candidate_block_size = 8 : i64, candidate_topk_blocks = 8 : i64, compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 3, 3, 5, 6>, layer_kv_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, n_prefill_layer = 0 : i64, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  // expected-error @+1 {{layer 0: kv map: rule c (YoCo boundary): n_prefill_layer 0 must be a KV source (a layer with compress ratio > 0 that maps to itself)}}
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 3 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 4 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 5 ratio 1 topk 4 swa kv_source 3 index_source 5 candidate_source 3
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// index_k_crosses_kv
v4a.model @index_k_crosses_kv <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 1, 1, 1, 6>, layer_index_module_map = array<i64: 0, 1, 1, 1, 1, 1, 6>, layer_kv_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1
  // expected-error @+1 {{layer 3: index-K map: rule b (refinement): maps index keys to layer 1 but compressed KV to layer 3; index keys live beside the compressed KV, so the index-K map must equal the KV map}}
  v4a.layer 3 ratio 2 topk 4 swa kv_source 3 index_source 1
  v4a.layer 4 ratio 2 topk 4 swa kv_source 3 index_source 1
  v4a.layer 5 ratio 2 topk 4 swa kv_source 3 index_source 1
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// topk_crosses_kv
v4a.model @topk_crosses_kv <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 1, 4, 4, 6>, layer_kv_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1
  // expected-error @+1 {{layer 3: index-topk map: rule b (refinement): the index source 1 lies in another index-K segment (index-K source 1, this layer's is 3); an index source's segment must not cross a KV source}}
  v4a.layer 3 ratio 2 topk 4 swa kv_source 3 index_source 1
  v4a.layer 4 ratio 2 topk 4 swa kv_source 3 index_source 4
  v4a.layer 5 ratio 2 topk 4 swa kv_source 3 index_source 4
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// candidate_decreasing
v4a.model @candidate_decreasing <{candidate_block_size = 8 : i64, candidate_topk_blocks = 8 : i64, compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 3, 3, 5, 6>, layer_kv_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1 candidate_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1 candidate_source 1
  v4a.layer 3 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  // expected-error @+1 {{layer 4: candidate map: rule e (candidate map): names layer 1 after an earlier layer named 3; the candidate map must be non-decreasing}}
  v4a.layer 4 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 1
  v4a.layer 5 ratio 1 topk 4 swa kv_source 3 index_source 5
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// candidate_forward
v4a.model @candidate_forward <{candidate_block_size = 8 : i64, candidate_topk_blocks = 8 : i64, compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 3, 3, 5, 6>, layer_kv_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1
  // expected-error @+1 {{layer 3: candidate map: rule e (candidate map): names layer 5 after it; a candidate source precedes the layers it restricts}}
  v4a.layer 3 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 5
  v4a.layer 4 ratio 1 topk 4 swa kv_source 3 index_source 3
  v4a.layer 5 ratio 1 topk 4 swa kv_source 3 index_source 5
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// candidate_not_index_source
v4a.model @candidate_not_index_source <{candidate_block_size = 8 : i64, candidate_topk_blocks = 8 : i64, compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 3, 3, 5, 6>, layer_kv_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 3 ratio 1 topk 4 swa kv_source 3 index_source 3
  // expected-error @+1 {{layer 4: candidate map: rule e (candidate map): candidate source 4 must be an index source with index_topk > 0 (it has index_topk 4 and maps to index source 3)}}
  v4a.layer 4 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 4
  v4a.layer 5 ratio 1 topk 4 swa kv_source 3 index_source 5 candidate_source 4
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// candidate_needs_blocks
v4a.model @candidate_needs_blocks <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 3, 3, 5, 6>, layer_kv_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1
  // expected-error @+1 {{layer 3: candidate map: rule e (candidate map): a candidate source needs candidate_topk_blocks and candidate_block_size on the model}}
  v4a.layer 3 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 4 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 5 ratio 1 topk 4 swa kv_source 3 index_source 5 candidate_source 3
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// candidate_mtp
v4a.model @candidate_mtp <{candidate_block_size = 8 : i64, candidate_topk_blocks = 8 : i64, compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 3, 3, 5, 6>, layer_kv_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 3 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 4 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 5 ratio 1 topk 4 swa kv_source 3 index_source 5 candidate_source 3
  // expected-error @+1 {{layer 6: candidate map: rule e (MTP layers never share): an MTP layer takes no candidate source (got 3)}}
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6 candidate_source 3
}

// -----

// plan_independent_consumer
v4a.model @plan_independent_consumer <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 0, 2>, layer_index_module_map = array<i64: 0, 0, 2>, layer_kv_map = array<i64: 0, 0, 2>, num_attention_heads = 2 : i64, num_hidden_layers = 2 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> attributes {v4a.kv_plan = #v4a.kv_plan<context_tokens = 128, page_size = 64, alignment = 256, bytes = 0, buffers = [#v4a.buffer<layer = 0, component = compressed, layout = bf16, rows = 64, dim = 64, row_bytes = 128, bytes = 8192, alias_of = -1>, #v4a.buffer<layer = 0, component = compressor_state, layout = f32, rows = 2, dim = 128, row_bytes = 512, bytes = 1024, alias_of = -1>, #v4a.buffer<layer = 0, component = index_keys, layout = index_bf16, rows = 64, dim = 32, row_bytes = 64, bytes = 4096, alias_of = -1>, #v4a.buffer<layer = 1, component = compressed, layout = bf16, rows = 64, dim = 64, row_bytes = 128, bytes = 8192, alias_of = -1>, #v4a.buffer<layer = 1, component = compressor_state, layout = f32, rows = 2, dim = 128, row_bytes = 512, bytes = 1024, alias_of = 0>, #v4a.buffer<layer = 1, component = index_keys, layout = index_bf16, rows = 64, dim = 32, row_bytes = 64, bytes = 4096, alias_of = 0>]>} {
  v4a.layer 0 ratio 2 topk 4 swa kv_source 0 index_source 0
  // expected-error @+1 {{layer 1: kv map: rule f (consumers alias their source): the cache plan gives the layer an independent compressed buffer that is never written; it must alias layer 0 (re-run v4a-plan-kv)}}
  v4a.layer 1 ratio 2 topk 4 swa kv_source 0 index_source 0
  v4a.layer 2 ratio 0 topk 0 swa mtp kv_source 2 index_source 2
}

// -----

// plan_missing_buffer
v4a.model @plan_missing_buffer <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 0, 2>, layer_index_module_map = array<i64: 0, 0, 2>, layer_kv_map = array<i64: 0, 0, 2>, num_attention_heads = 2 : i64, num_hidden_layers = 2 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> attributes {v4a.kv_plan = #v4a.kv_plan<context_tokens = 128, page_size = 64, alignment = 256, bytes = 0, buffers = [#v4a.buffer<layer = 0, component = compressed, layout = bf16, rows = 64, dim = 64, row_bytes = 128, bytes = 8192, alias_of = -1>, #v4a.buffer<layer = 0, component = compressor_state, layout = f32, rows = 2, dim = 128, row_bytes = 512, bytes = 1024, alias_of = -1>, #v4a.buffer<layer = 0, component = index_keys, layout = index_bf16, rows = 64, dim = 32, row_bytes = 64, bytes = 4096, alias_of = -1>, #v4a.buffer<layer = 1, component = compressed, layout = bf16, rows = 64, dim = 64, row_bytes = 128, bytes = 8192, alias_of = 0>, #v4a.buffer<layer = 1, component = compressor_state, layout = f32, rows = 2, dim = 128, row_bytes = 512, bytes = 1024, alias_of = 0>]>} {
  v4a.layer 0 ratio 2 topk 4 swa kv_source 0 index_source 0
  // expected-error @+1 {{layer 1: index-K map: rule f (consumers alias their source): the cache plan has no index_keys buffer for the layer; it must alias layer 0 (re-run v4a-plan-kv)}}
  v4a.layer 1 ratio 2 topk 4 swa kv_source 0 index_source 0
  v4a.layer 2 ratio 0 topk 0 swa mtp kv_source 2 index_source 2
}

// -----

// plan_aliased_source
v4a.model @plan_aliased_source <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 0, 2>, layer_index_module_map = array<i64: 0, 0, 2>, layer_kv_map = array<i64: 0, 0, 2>, num_attention_heads = 2 : i64, num_hidden_layers = 2 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> attributes {v4a.kv_plan = #v4a.kv_plan<context_tokens = 128, page_size = 64, alignment = 256, bytes = 0, buffers = [#v4a.buffer<layer = 0, component = compressed, layout = bf16, rows = 64, dim = 64, row_bytes = 128, bytes = 8192, alias_of = 1>, #v4a.buffer<layer = 0, component = compressor_state, layout = f32, rows = 2, dim = 128, row_bytes = 512, bytes = 1024, alias_of = -1>, #v4a.buffer<layer = 0, component = index_keys, layout = index_bf16, rows = 64, dim = 32, row_bytes = 64, bytes = 4096, alias_of = -1>, #v4a.buffer<layer = 1, component = compressed, layout = bf16, rows = 64, dim = 64, row_bytes = 128, bytes = 8192, alias_of = 0>, #v4a.buffer<layer = 1, component = compressor_state, layout = f32, rows = 2, dim = 128, row_bytes = 512, bytes = 1024, alias_of = 0>, #v4a.buffer<layer = 1, component = index_keys, layout = index_bf16, rows = 64, dim = 32, row_bytes = 64, bytes = 4096, alias_of = 0>]>} {
  // expected-error @+1 {{layer 0: kv map: rule f (consumers alias their source): the cache plan aliases the layer's compressed buffer to layer 1 though it is a source; it must own its buffer (re-run v4a-plan-kv)}}
  v4a.layer 0 ratio 2 topk 4 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 0 index_source 0
  v4a.layer 2 ratio 0 topk 0 swa mtp kv_source 2 index_source 2
}

// -----

// candidate_not_self
v4a.model @candidate_not_self <{candidate_block_size = 8 : i64, candidate_topk_blocks = 8 : i64, compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 3, 3, 5, 6>, layer_kv_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, n_prefill_layer = 3 : i64, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1
  v4a.layer 3 ratio 1 topk 4 swa kv_source 3 index_source 3
    // expected-error @+1 {{layer 4: candidate map: rule e (candidate map): candidate source 3 must name itself as its candidate source}}
  v4a.layer 4 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 5 ratio 1 topk 4 swa kv_source 3 index_source 5 candidate_source 5
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}

// -----

// candidate_crosses_boundary
v4a.model @candidate_crosses_boundary <{candidate_block_size = 8 : i64, candidate_topk_blocks = 8 : i64, compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, layer_index_module_map = array<i64: 0, 1, 1, 3, 3, 5, 6>, layer_kv_map = array<i64: 0, 1, 1, 3, 3, 3, 6>, n_prefill_layer = 3 : i64, num_attention_heads = 2 : i64, num_hidden_layers = 6 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa kv_source 1 index_source 1 candidate_source 1
  v4a.layer 2 ratio 2 topk 4 swa kv_source 1 index_source 1 candidate_source 1
    // expected-error @+1 {{layer 3: candidate map: rule c (YoCo boundary): names candidate source 1 across the boundary at layer 3 (n_prefill_layer)}}
  v4a.layer 3 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 1
  v4a.layer 4 ratio 1 topk 4 swa kv_source 3 index_source 3 candidate_source 3
  v4a.layer 5 ratio 1 topk 4 swa kv_source 3 index_source 5 candidate_source 3
  v4a.layer 6 ratio 0 topk 0 swa mtp kv_source 6 index_source 6
}
