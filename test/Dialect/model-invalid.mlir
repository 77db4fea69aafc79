// RUN: v4a-opt %s -split-input-file -verify-diagnostics

// kv_heads
// expected-error @+1 {{attribute 'num_key_value_heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is 1 (multi-query attention)}}
v4a.model @kv_heads <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 8 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// rope_odd
// expected-error @+1 {{attribute 'qk_rope_head_dim' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive whose value is even}}
v4a.model @rope_odd <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 15 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// rope_wide
// expected-error @+1 {{qk_rope_head_dim (80) must be smaller than head_dim (80)}}
v4a.model @rope_wide <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 80 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// rope_index
// expected-error @+1 {{qk_rope_head_dim (64) must be at most index_head_dim (32)}}
v4a.model @rope_index <{compress_rope_theta = 1.6e5 : f64, head_dim = 128 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 64 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// groups
// expected-error @+1 {{num_attention_heads * head_dim (240) must be divisible by o_groups (7)}}
v4a.model @groups <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 3 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 7 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// index_pow2
// expected-error @+1 {{index_head_dim (48) must be a power of two (Hadamard rotation)}}
v4a.model @index_pow2 <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 48 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// topk_negative
// expected-error @+1 {{attribute 'index_topk' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
v4a.model @topk_negative <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = -1 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// hidden_zero
// expected-error @+1 {{attribute 'hidden_size' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
v4a.model @hidden_zero <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 0 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// theta
// expected-error @+1 {{attribute 'rope_theta' failed to satisfy constraint: 64-bit float attribute whose value is positive}}
v4a.model @theta <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 0.0 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// candidate_pair
// expected-error @+1 {{candidate_block_size and candidate_topk_blocks must be given together}}
v4a.model @candidate_pair <{candidate_block_size = 8 : i64, compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// candidate_block
// expected-error @+1 {{attribute 'candidate_block_size' failed to satisfy constraint: 64-bit signless integer attribute whose value is 8 or 16}}
v4a.model @candidate_block <{candidate_block_size = 4 : i64, candidate_topk_blocks = 8 : i64, compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// candidate_topk
// expected-error @+1 {{attribute 'candidate_topk_blocks' failed to satisfy constraint}}
v4a.model @candidate_topk <{candidate_block_size = 8 : i64, candidate_topk_blocks = 4100 : i64, compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// prefill_boundary
// expected-error @+1 {{n_prefill_layer (4) must be at most num_hidden_layers (3)}}
v4a.model @prefill_boundary <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, n_prefill_layer = 4 : i64, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// short_map
// expected-error @+1 {{layer_kv_map has 2 entries, expected at least num_hidden_layers (3)}}
v4a.model @short_map <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// map_lengths
// expected-error @+1 {{layer_index_k_map has 3 entries, expected 4 (one per layer, as layer_kv_map)}}
v4a.model @map_lengths <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// module_map_length
// expected-error @+1 {{layer_index_module_map has 5 entries, expected 4 (one per layer, as layer_kv_map)}}
v4a.model @module_map_length <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// missing_attr
// expected-error @+1 {{expected key entry for index_topk in DictionaryAttr to set Properties}}
v4a.model @missing_attr <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// layer_count
// expected-error @+1 {{holds 3 layers but the sharing maps cover 4}}
v4a.model @layer_count <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
}

// -----

// attention_count
// expected-error @+1 {{holds 4 attention layers, expected num_hidden_layers (3)}}
v4a.model @attention_count <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa kv_source 3 index_source 3
}

// -----

// layer_order
v4a.model @layer_order <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  // expected-error @+1 {{has id 2, expected 1 (layers are numbered in order from 0)}}
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// mtp_order
v4a.model @mtp_order <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa mtp kv_source 0 index_source 0
  // expected-error @+1 {{layer 1: attention layers must precede MTP layers}}
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// layer_topk
v4a.model @layer_topk <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  // expected-error @+1 {{layer 1: index_topk 8 exceeds the model's index_topk (4)}}
  v4a.layer 1 ratio 4 topk 8 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// kv_not_layer
v4a.model @kv_not_layer <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  // expected-error @+1 {{layer 1: kv source 7 is not a layer (valid: 0..3)}}
  v4a.layer 1 ratio 4 topk 4 swa kv_source 7 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// index_not_layer
v4a.model @index_not_layer <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  // expected-error @+1 {{layer 1: index source 9 is not a layer (valid: 0..3)}}
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 9
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// candidate_not_layer
v4a.model @candidate_not_layer <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  // expected-error @+1 {{layer 1: candidate source 5 is not a layer (valid: 0..3)}}
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1 candidate_source 5
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// map_not_layer
v4a.model @map_not_layer <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 6, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  // expected-error @+1 {{layer 2: map source 6 is not a layer (valid: 0..3)}}
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// kv_disagrees
v4a.model @kv_disagrees <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 1, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  // expected-error @+1 {{layer 2: kv_source 2 disagrees with layer_kv_map entry 1}}
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// index_disagrees
v4a.model @index_disagrees <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 0, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  // expected-error @+1 {{layer 1: index_source 1 disagrees with layer_index_module_map entry 0}}
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// topk_without_rows
v4a.model @topk_without_rows <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  // expected-error @+1 {{layer 0: index_topk 4 needs compressed rows to select (compress ratio > 0), or index_topk 0}}
  v4a.layer 0 ratio 0 topk 4 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// packed_without_rows
v4a.model @packed_without_rows <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  // expected-error @+1 {{layer 0: packed_kv needs a compressed cache (compress ratio > 0)}}
  v4a.layer 0 ratio 0 topk 0 swa packed_kv kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// layer_negative_ratio
v4a.model @layer_negative_ratio <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  // expected-error @+1 {{attribute 'compress_ratio' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  v4a.layer 1 ratio -4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// -----

// layer_candidate_range
v4a.model @layer_candidate_range <{compress_rope_theta = 1.6e5 : f64, head_dim = 80 : i64, hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64, index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3>, layer_index_module_map = array<i64: 0, 1, 2, 3>, layer_kv_map = array<i64: 0, 1, 2, 3>, num_attention_heads = 2 : i64, num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64, o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64, qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64, rope_theta = 1.0e4 : f64, sliding_window = 8 : i64, weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  // expected-error @+1 {{attribute 'candidate_source' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is -1}}
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1 candidate_source -2
  v4a.layer 2 ratio 128 topk 0 swa kv_source 2 index_source 2
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}
