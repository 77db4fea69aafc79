// RUN: v4a-opt %s -split-input-file -v4a-schedule | FileCheck %s
// RUN: v4a-opt %s -split-input-file -v4a-schedule | FileCheck %s --check-prefix=NOPROGRAM
// RUN: v4a-compile %examples/v4-flash.json | v4a-opt -v4a-schedule | FileCheck %s --check-prefix=FLASH
// RUN: v4a-compile %examples/v4-pro.json --kv-layout=fp8 | v4a-opt -v4a-schedule | FileCheck %s --check-prefix=PRO
// RUN: v4a-compile %examples/tiny.json --emit=planned | v4a-opt -v4a-build-steps -v4a-fuse -v4a-schedule | FileCheck %s --check-prefix=PROGRAM
// RUN: v4a-compile %examples/tiny-v41.json --emit=planned | v4a-opt -v4a-build-steps -v4a-schedule -v4a-schedule | FileCheck %s --check-prefix=SHARED
// RUN: v4a-compile %examples/v41-shared.json --emit=planned | v4a-opt -v4a-build-steps -v4a-fuse -v4a-schedule | FileCheck %s --check-prefix=V41
// RUN: v4a-compile %examples/v4-flash.json --emit=planned | v4a-opt -v4a-build-steps -v4a-fuse -v4a-schedule | FileCheck %s --check-prefix=FLASHPROGRAM

// Layers group by "{ratio}_{has_packed_kv}_{use_swa}_{index_topk}" in order of
// their first layer; the first layer of a group computes the per-step
// metadata. The MTP layer gets a group of its own that reuses the kernel.
// CHECK-LABEL: v4a.model @grouped
// CHECK-SAME: v4a.mtp_schedule = [#v4a.sched_group<key = "0_0_1_0", kernel = "v4a_attn_0_0_1_0", layers = [5], metadata_layer = 5>]
// CHECK-SAME: v4a.schedule = [
// CHECK-SAME: #v4a.sched_group<key = "0_0_1_0", kernel = "v4a_attn_0_0_1_0", layers = [0], metadata_layer = 0>,
// CHECK-SAME: #v4a.sched_group<key = "4_0_1_4", kernel = "v4a_attn_4_0_1_4", layers = [1, 3], metadata_layer = 1>,
// CHECK-SAME: #v4a.sched_group<key = "128_1_1_0", kernel = "v4a_attn_128_1_1_0", layers = [2], metadata_layer = 2>,
// CHECK-SAME: #v4a.sched_group<key = "4_0_0_4", kernel = "v4a_attn_4_0_0_4", layers = [4], metadata_layer = 4>]
v4a.model @grouped <{compress_rope_theta = 1.6e5 : f64, head_dim = 512 : i64,
    hidden_size = 64 : i64, index_head_dim = 128 : i64, index_n_heads = 2 : i64,
    index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 2, 3, 4, 5>,
    layer_index_module_map = array<i64: 0, 1, 2, 3, 4, 5>,
    layer_kv_map = array<i64: 0, 1, 2, 3, 4, 5>, num_attention_heads = 2 : i64,
    num_hidden_layers = 5 : i64, num_key_value_heads = 1 : i64,
    o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64,
    qk_rope_head_dim = 64 : i64, rms_norm_eps = 1.0e-6 : f64,
    rope_theta = 1.0e4 : f64, sliding_window = 8 : i64,
    weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 128 topk 0 swa packed_kv kv_source 2 index_source 2
  v4a.layer 3 ratio 4 topk 4 swa kv_source 3 index_source 3
  v4a.layer 4 ratio 4 topk 4 kv_source 4 index_source 4
  v4a.layer 5 ratio 0 topk 0 swa mtp kv_source 5 index_source 5
}

// -----

// A model without MTP layers has an empty MTP schedule.
// CHECK-LABEL: v4a.model @no_mtp
// CHECK-SAME: v4a.mtp_schedule = []
// CHECK-SAME: v4a.schedule = [#v4a.sched_group<key = "0_0_1_0", kernel = "v4a_attn_0_0_1_0", layers = [0, 1], metadata_layer = 0>]
v4a.model @no_mtp <{compress_rope_theta = 1.6e5 : f64, head_dim = 512 : i64,
    hidden_size = 64 : i64, index_head_dim = 128 : i64, index_n_heads = 2 : i64,
    index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1>,
    layer_index_module_map = array<i64: 0, 1>,
    layer_kv_map = array<i64: 0, 1>, num_attention_heads = 2 : i64,
    num_hidden_layers = 2 : i64, num_key_value_heads = 1 : i64,
    o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64,
    qk_rope_head_dim = 64 : i64, rms_norm_eps = 1.0e-6 : f64,
    rope_theta = 1.0e4 : f64, sliding_window = 8 : i64,
    weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 0 topk 0 swa kv_source 1 index_source 1
}

// FLASH: v4a.schedule = [
// FLASH-SAME: #v4a.sched_group<key = "0_0_1_0", kernel = "v4a_attn_0_0_1_0", layers = [0, 1], metadata_layer = 0>,
// FLASH-SAME: #v4a.sched_group<key = "4_0_1_512", kernel = "v4a_attn_4_0_1_512", layers = [2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42], metadata_layer = 2>,
// FLASH-SAME: #v4a.sched_group<key = "128_0_1_0", kernel = "v4a_attn_128_0_1_0", layers = [3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31, 33, 35, 37, 39, 41], metadata_layer = 3>]

// PRO: v4a.mtp_schedule = [#v4a.sched_group<key = "0_0_1_0", kernel = "v4a_attn_0_0_1_0", layers = [61], metadata_layer = 61>]
// PRO-SAME: v4a.schedule = [
// PRO-SAME: #v4a.sched_group<key = "128_1_1_0", kernel = "v4a_attn_128_1_1_0", layers = [0, 1, 3, 5,
// PRO-SAME: #v4a.sched_group<key = "4_1_1_1024", kernel = "v4a_attn_4_1_1_1024", layers = [2, 4, 6,

// Without step functions there are no programs.
// NOPROGRAM-NOT: v4a.program

// With step functions: each key's metadata runs once, before its first
// layer, and every layer runs its key's step; the MTP layer gets a program
// of its own with its own metadata. Each step lists its kernels in order.
// PROGRAM: v4a.program @main {
// PROGRAM-NEXT: v4a.run_meta @meta_0_0_1_0
// PROGRAM-NEXT: v4a.run_step @step_0_0_1_0 layer 0 kernels ["merged_linear", "rms_norm", "linear", "rms_norm_rope", "rms_norm_rope_act_quant", "cache_attention", "cache_store", "rope", "grouped_output"]
// PROGRAM-NEXT: v4a.run_meta @meta_4_0_1_4
// PROGRAM-NEXT: v4a.run_step @step_4_0_1_4 layer 1 kernels ["merged_linear", "rms_norm", "merged_linear", "rms_norm_rope", "rms_norm_rope_act_quant", "compressor_truncf_rms_norm_rope_act_quant_cache_store", "compressor_truncf_rms_norm_rope_hadamard_act_quant_cache_store", "rope_hadamard_act_quant", "extf", "mulf", "cache_indexer_score", "topk", "cache_attention", "cache_store", "rope", "grouped_output"]
// PROGRAM-NEXT: v4a.run_meta @meta_128_0_1_0
// PROGRAM-NEXT: v4a.run_step @step_128_0_1_0 layer 2
// PROGRAM-NEXT: v4a.run_step @step_4_0_1_4 layer 3
// PROGRAM-NEXT: }
// PROGRAM-NEXT: v4a.program @mtp {
// PROGRAM-NEXT: v4a.run_meta @meta_0_0_1_0
// PROGRAM-NEXT: v4a.run_step @step_0_0_1_0 layer 4
// PROGRAM-NEXT: }

// Consumers run their own role's step after the source's; running the pass
// twice gives one set of programs.
// SHARED: v4a.program @main {
// SHARED-NEXT: v4a.run_meta @meta_0_0_1_0
// SHARED-NEXT: v4a.run_step @step_0_0_1_0 layer 0
// SHARED-NEXT: v4a.run_meta @meta_2_0_1_4
// SHARED-NEXT: v4a.run_step @step_2_0_1_4 layer 1
// SHARED-NEXT: v4a.run_step @step_2_0_1_4_shares_kv_shares_topk layer 2
// SHARED-NEXT: v4a.run_meta @meta_1_0_1_4
// SHARED-NEXT: v4a.run_step @step_1_0_1_4_makes_candidates layer 3
// SHARED-NEXT: v4a.run_step @step_1_0_1_4_shares_kv_shares_topk layer 4
// SHARED-NEXT: v4a.run_step @step_1_0_1_4_shares_kv_uses_candidates layer 5
// SHARED-NEXT: }
// SHARED-NOT: v4a.program @main

// V4-Flash: three metadata calls for 43 layers.
// FLASHPROGRAM: v4a.program @main {
// FLASHPROGRAM-COUNT-3: v4a.run_meta
// FLASHPROGRAM-NOT: v4a.run_meta
// FLASHPROGRAM: v4a.run_step @step_4_0_1_512 layer 42
// FLASHPROGRAM-NEXT: }

// v41-shared.json: consumers run their roles' steps; one metadata call per
// key for 40 layers.
// V41: v4a.program @main {
// V41-NEXT: v4a.run_meta @meta_0_0_1_0
// V41-NEXT: v4a.run_step @step_0_0_1_0 layer 0
// V41-NEXT: v4a.run_step @step_0_0_1_0 layer 1
// V41-NEXT: v4a.run_meta @meta_2_0_1_512
// V41-NEXT: v4a.run_step @step_2_0_1_512 layer 2
// V41-NEXT: v4a.run_step @step_2_0_1_512_shares_kv_shares_topk layer 3
// V41-NEXT: v4a.run_step @step_2_0_1_512_shares_kv_shares_topk layer 4
// V41-NEXT: v4a.run_step @step_2_0_1_512_shares_kv layer 5
// V41: v4a.run_meta @meta_1_0_1_512
// V41-NEXT: v4a.run_step @step_1_0_1_512_makes_candidates layer 20
// V41-NEXT: v4a.run_step @step_1_0_1_512_shares_kv_shares_topk layer 21
// V41: v4a.run_step @step_1_0_1_512_shares_kv_uses_candidates layer 30
