// RUN: v4a-opt %s -split-input-file -verify-diagnostics -v4a-verify-topology -v4a-plan-kv="context=1024 page-size=64 index-layout=bf16" | FileCheck %s
// RUN: v4a-opt %s -split-input-file -verify-diagnostics -v4a-plan-kv="context=1000 page-size=64 alignment=4096 index-layout=fp8" | FileCheck %s --check-prefix=PAGED
// RUN: not v4a-opt %s -split-input-file -v4a-plan-kv="context=0" 2>&1 | FileCheck %s --check-prefix=CONTEXT
// RUN: v4a-opt %s -split-input-file -verify-diagnostics -v4a-plan-kv="context=1000" | FileCheck %s --check-prefix=MXFP4
// RUN: not v4a-opt %s -split-input-file -v4a-plan-kv="index-layout=fp4" 2>&1 | FileCheck %s --check-prefix=LAYOUT

// CONTEXT: error: v4a-plan-kv: context (0), page-size (64) and alignment (256) must be positive
// LAYOUT: error: v4a-plan-kv: index-layout 'fp4' is not bf16, fp8 or mxfp4
// RUN: not v4a-opt %s -split-input-file -v4a-plan-kv="context=4611686018427387904" 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: error: v4a-plan-kv: layer 1 compressed: the buffer would exceed 2^48 bytes; the configuration or the context is too large

// A window-only layer, a V4 C4 layer with its own indexer compressor, a
// consumer of its caches, a packed C128 layer, and the MTP layer.
// CHECK-LABEL: v4a.model @mixed
// CHECK-SAME: v4a.kv_plan = #v4a.kv_plan<context_tokens = 1024, page_size = 64, alignment = 256, bytes = 1008896, buffers = [
// CHECK-NEXT: #v4a.buffer<layer = 0, component = window, layout = bf16, rows = 8, dim = 512, row_bytes = 1024, bytes = 8192, alias_of = -1>
// CHECK-NEXT: #v4a.buffer<layer = 1, component = window, layout = bf16, rows = 8, dim = 512, row_bytes = 1024, bytes = 8192, alias_of = -1>
// CHECK-NEXT: #v4a.buffer<layer = 1, component = compressed, layout = bf16, rows = 256, dim = 512, row_bytes = 1024, bytes = 262144, alias_of = -1>
// CHECK-NEXT: #v4a.buffer<layer = 1, component = compressor_state, layout = f32, rows = 8, dim = 2048, row_bytes = 8192, bytes = 65536, alias_of = -1>
// CHECK-NEXT: #v4a.buffer<layer = 1, component = index_keys, layout = index_bf16, rows = 256, dim = 128, row_bytes = 256, bytes = 65536, alias_of = -1>
// CHECK-NEXT: #v4a.buffer<layer = 1, component = indexer_state, layout = f32, rows = 8, dim = 512, row_bytes = 2048, bytes = 16384, alias_of = -1>
// CHECK-NEXT: #v4a.buffer<layer = 2, component = window, layout = bf16, rows = 8, dim = 512, row_bytes = 1024, bytes = 8192, alias_of = -1>
// CHECK-NEXT: #v4a.buffer<layer = 2, component = compressed, layout = bf16, rows = 256, dim = 512, row_bytes = 1024, bytes = 262144, alias_of = 1>
// CHECK-NEXT: #v4a.buffer<layer = 2, component = compressor_state, layout = f32, rows = 8, dim = 2048, row_bytes = 8192, bytes = 65536, alias_of = 1>
// CHECK-NEXT: #v4a.buffer<layer = 2, component = index_keys, layout = index_bf16, rows = 256, dim = 128, row_bytes = 256, bytes = 65536, alias_of = 1>
// CHECK-NEXT: #v4a.buffer<layer = 2, component = indexer_state, layout = f32, rows = 8, dim = 512, row_bytes = 2048, bytes = 16384, alias_of = 1>
// CHECK-NEXT: #v4a.buffer<layer = 3, component = window, layout = fp8_model1, rows = 8, dim = 512, row_bytes = 584, bytes = 4864, alias_of = -1>
// CHECK-NEXT: #v4a.buffer<layer = 3, component = compressed, layout = fp8_model1, rows = 64, dim = 512, row_bytes = 584, bytes = 37376, alias_of = -1>
// CHECK-NEXT: #v4a.buffer<layer = 3, component = compressor_state, layout = f32, rows = 128, dim = 1024, row_bytes = 4096, bytes = 524288, alias_of = -1>
// CHECK-NEXT: #v4a.buffer<layer = 4, component = window, layout = bf16, rows = 8, dim = 512, row_bytes = 1024, bytes = 8192, alias_of = -1>]>

// Compressed rows round up to whole pages (1000 / 4 = 250 -> 256 rows,
// 1000 / 128 = 7 -> 64), sizes to the alignment, and fp8 index keys take
// 128 + 4 bytes per row.
// PAGED: #v4a.buffer<layer = 1, component = compressed, layout = bf16, rows = 256, dim = 512, row_bytes = 1024, bytes = 262144, alias_of = -1>
// PAGED: #v4a.buffer<layer = 1, component = index_keys, layout = index_fp8, rows = 256, dim = 128, row_bytes = 132, bytes = 36864, alias_of = -1>
// PAGED: #v4a.buffer<layer = 3, component = window, layout = fp8_model1, rows = 8, dim = 512, row_bytes = 584, bytes = 8192, alias_of = -1>
// PAGED: #v4a.buffer<layer = 3, component = compressed, layout = fp8_model1, rows = 64, dim = 512, row_bytes = 584, bytes = 40960, alias_of = -1>

// MXFP4 index keys (the default): 64 bytes of e2m1 pairs and 4 ue8m0 scales
// per row; the consumer aliases them.
// MXFP4: #v4a.buffer<layer = 1, component = index_keys, layout = index_mxfp4, rows = 256, dim = 128, row_bytes = 68, bytes = 17408, alias_of = -1>
// MXFP4: #v4a.buffer<layer = 2, component = index_keys, layout = index_mxfp4, rows = 256, dim = 128, row_bytes = 68, bytes = 17408, alias_of = 1>


v4a.model @mixed <{compress_rope_theta = 1.6e5 : f64, head_dim = 512 : i64,
    hidden_size = 64 : i64, index_head_dim = 128 : i64, index_n_heads = 2 : i64,
    index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3, 4>,
    layer_index_module_map = array<i64: 0, 1, 1, 3, 4>,
    layer_kv_map = array<i64: 0, 1, 1, 3, 4>, num_attention_heads = 2 : i64,
    num_hidden_layers = 4 : i64, num_key_value_heads = 1 : i64,
    o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64,
    qk_rope_head_dim = 64 : i64, rms_norm_eps = 1.0e-6 : f64,
    rope_theta = 1.0e4 : f64, sliding_window = 8 : i64,
    weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 2 ratio 4 topk 4 swa kv_source 1 index_source 1
  v4a.layer 3 ratio 128 topk 0 swa packed_kv kv_source 3 index_source 3
  v4a.layer 4 ratio 0 topk 0 swa mtp kv_source 4 index_source 4
}

// -----

// A packed layer needs 64 rope dims: the verifier stops it before planning.
v4a.model @narrow <{compress_rope_theta = 1.6e5 : f64, head_dim = 144 : i64,
    hidden_size = 64 : i64, index_head_dim = 32 : i64, index_n_heads = 2 : i64,
    index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1>,
    layer_index_module_map = array<i64: 0, 1>,
    layer_kv_map = array<i64: 0, 1>, num_attention_heads = 2 : i64,
    num_hidden_layers = 2 : i64, num_key_value_heads = 1 : i64,
    o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64,
    qk_rope_head_dim = 16 : i64, rms_norm_eps = 1.0e-6 : f64,
    rope_theta = 1.0e4 : f64, sliding_window = 8 : i64,
    weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  // expected-error @+1 {{'v4a.layer' op layer 1: packed_kv (fp8 MODEL1) stores exactly 64 bf16 rope dims, but qk_rope_head_dim is 16}}
  v4a.layer 1 ratio 128 topk 0 swa packed_kv kv_source 1 index_source 1
}
