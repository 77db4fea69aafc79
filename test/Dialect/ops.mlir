// RUN: v4a-opt %s | FileCheck %s
// RUN: v4a-opt %s | v4a-opt | FileCheck %s
// RUN: v4a-opt -mlir-print-op-generic %s | v4a-opt | FileCheck %s

// CHECK-LABEL: func @projections
func.func @projections(%x: tensor<?x256xbf16>, %w8: tensor<96x256xf8E4M3FN>,
                       %s8: tensor<1x2xf8E8M0FNU>, %w16: tensor<96x256xbf16>)
    -> (tensor<?x96xbf16>, tensor<?x96xf32>) {
  // CHECK: v4a.linear %{{.*}}, %{{.*}} scale %{{.*}} : tensor<?x256xbf16>, tensor<96x256xf8E4M3FN>, tensor<1x2xf8E8M0FNU> -> tensor<?x96xbf16>
  %a = v4a.linear %x, %w8 scale %s8
      : tensor<?x256xbf16>, tensor<96x256xf8E4M3FN>, tensor<1x2xf8E8M0FNU>
        -> tensor<?x96xbf16>
  // CHECK: v4a.linear %{{.*}}, %{{.*}} : tensor<?x256xbf16>, tensor<96x256xbf16> -> tensor<?x96xf32>
  %b = v4a.linear %x, %w16 : tensor<?x256xbf16>, tensor<96x256xbf16>
      -> tensor<?x96xf32>
  return %a, %b : tensor<?x96xbf16>, tensor<?x96xf32>
}

// CHECK-LABEL: func @split_columns
func.func @split_columns(%y: tensor<?x1088xf32>)
    -> (tensor<?x1024xf32>, tensor<?x64xbf16>) {
  // CHECK: v4a.split_columns %{{.*}} : tensor<?x1088xf32> -> tensor<?x1024xf32>, tensor<?x64xbf16>
  %kv, %w = v4a.split_columns %y
      : tensor<?x1088xf32> -> tensor<?x1024xf32>, tensor<?x64xbf16>
  return %kv, %w : tensor<?x1024xf32>, tensor<?x64xbf16>
}

// CHECK-LABEL: func @split_bf16_columns
func.func @split_bf16_columns(%y: tensor<?x1536xbf16>)
    -> (tensor<?x1024xbf16>, tensor<?x512xbf16>) {
  // CHECK: v4a.split_columns %{{.*}} : tensor<?x1536xbf16> -> tensor<?x1024xbf16>, tensor<?x512xbf16>
  %q, %kv = v4a.split_columns %y
      : tensor<?x1536xbf16> -> tensor<?x1024xbf16>, tensor<?x512xbf16>
  return %q, %kv : tensor<?x1024xbf16>, tensor<?x512xbf16>
}

// CHECK-LABEL: func @norms_and_rope
func.func @norms_and_rope(%kv: tensor<?x512xbf16>, %g: tensor<512xbf16>,
                          %q: tensor<?x4x512xbf16>, %pos: tensor<?xi64>)
    -> (tensor<?x512xbf16>, tensor<?x4x512xbf16>) {
  // CHECK: v4a.rms_norm %{{.*}} weight %{{.*}} {eps = 9.9999999999999995E-7 : f64} : tensor<?x512xbf16>, tensor<512xbf16>
  %n = v4a.rms_norm %kv weight %g {eps = 1.0e-6 : f64}
      : tensor<?x512xbf16>, tensor<512xbf16>
  // CHECK: v4a.rms_norm %{{.*}} {eps = 9.9999999999999995E-7 : f64} : tensor<?x4x512xbf16>
  %qn = v4a.rms_norm %q {eps = 1.0e-6 : f64} : tensor<?x4x512xbf16>
  // CHECK: v4a.rope %{{.*}}, %{{.*}} {rope_dim = 64 : i64, theta = 1.600000e+05 : f64, yarn = #v4a.yarn<factor = 1.600000e+01, original_max_position = 65536, beta_fast = 3.200000e+01, beta_slow = 1.000000e+00>} : tensor<?x512xbf16>, tensor<?xi64>
  %r = v4a.rope %n, %pos {rope_dim = 64 : i64, theta = 160000.0 : f64,
      yarn = #v4a.yarn<factor = 16.0, original_max_position = 65536,
                       beta_fast = 32.0, beta_slow = 1.0>}
      : tensor<?x512xbf16>, tensor<?xi64>
  // CHECK: v4a.rope %{{.*}}, %{{.*}} {inverse, rope_dim = 64 : i64, theta = 1.000000e+04 : f64} : tensor<?x4x512xbf16>, tensor<?xi64>
  %qr = v4a.rope %qn, %pos {rope_dim = 64 : i64, theta = 10000.0 : f64, inverse}
      : tensor<?x4x512xbf16>, tensor<?xi64>
  return %r, %qr : tensor<?x512xbf16>, tensor<?x4x512xbf16>
}

// CHECK-LABEL: func @quantization
func.func @quantization(%kv: tensor<?x512xbf16>, %k: tensor<?x128xf32>)
    -> (tensor<?x512xbf16>, tensor<?x128xf32>) {
  // CHECK: v4a.act_quant %{{.*}} {block_size = 64 : i64, format = #v4a<quant_format e4m3>, pow2_scale, quant_dims = 448 : i64} : tensor<?x512xbf16>
  %a = v4a.act_quant %kv {format = #v4a<quant_format e4m3>, block_size = 64 : i64,
                          quant_dims = 448 : i64, pow2_scale} : tensor<?x512xbf16>
  // CHECK: v4a.hadamard %{{.*}} : tensor<?x128xf32>
  %h = v4a.hadamard %k : tensor<?x128xf32>
  // CHECK: v4a.act_quant %{{.*}} {block_size = 32 : i64, format = #v4a<quant_format e2m1>, pow2_scale} : tensor<?x128xf32>
  %f = v4a.act_quant %h {format = #v4a<quant_format e2m1>, block_size = 32 : i64,
                         pow2_scale} : tensor<?x128xf32>
  return %a, %f : tensor<?x512xbf16>, tensor<?x128xf32>
}

// CHECK-LABEL: func @compressor
func.func @compressor(%kv: tensor<?x1024xf32>, %sc: tensor<?x1024xf32>,
                      %ape: tensor<4x1024xf32>, %pos: tensor<?xi64>,
                      %skv: tensor<?x8x1024xf32>, %ssc: tensor<?x8x1024xf32>)
    -> (tensor<?x512xf32>, tensor<?x512xf32>, tensor<?xi1>) {
  // CHECK: v4a.compress %{{.*}}, %{{.*}}, %{{.*}} {overlap, ratio = 4 : i64} : tensor<?x1024xf32>, tensor<4x1024xf32> -> tensor<?x512xf32>
  %e = v4a.compress %kv, %sc, %ape {ratio = 4 : i64, overlap}
      : tensor<?x1024xf32>, tensor<4x1024xf32> -> tensor<?x512xf32>
  // CHECK: v4a.compress_step %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {overlap, ratio = 4 : i64} : tensor<?x1024xf32>, tensor<4x1024xf32>, tensor<?xi64>, tensor<?x8x1024xf32> -> tensor<?x512xf32>, tensor<?xi1>
  %d:4 = v4a.compress_step %kv, %sc, %ape, %pos, %skv, %ssc
      {ratio = 4 : i64, overlap}
      : tensor<?x1024xf32>, tensor<4x1024xf32>, tensor<?xi64>,
        tensor<?x8x1024xf32> -> tensor<?x512xf32>, tensor<?xi1>
  return %e, %d#0, %d#1 : tensor<?x512xf32>, tensor<?x512xf32>, tensor<?xi1>
}

// CHECK-LABEL: func @indexer
func.func @indexer(%qi: tensor<?x8x128xbf16>, %keys: tensor<?x128xbf16>,
                   %wts: tensor<?x8xf32>, %pos: tensor<?xi64>,
                   %lat: tensor<?x512xf32>, %wk: tensor<128x512xbf16>,
                   %kn: tensor<128xbf16>)
    -> (tensor<?x16xi32>, tensor<?x16xi32>, tensor<?x128xbf16>) {
  // CHECK: v4a.indexer_score %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {ratio = 4 : i64} : tensor<?x8x128xbf16>, tensor<?x128xbf16>, tensor<?x8xf32>, tensor<?xi64> -> tensor<?x?xf32>
  %s = v4a.indexer_score %qi, %keys, %wts, %pos {ratio = 4 : i64}
      : tensor<?x8x128xbf16>, tensor<?x128xbf16>, tensor<?x8xf32>,
        tensor<?xi64> -> tensor<?x?xf32>
  // CHECK: v4a.topk %{{.*}} {k = 16 : i64} : tensor<?x?xf32> -> tensor<?x16xi32>
  %t = v4a.topk %s {k = 16 : i64} : tensor<?x?xf32> -> tensor<?x16xi32>
  // CHECK: v4a.block_topk %{{.*}} {block_size = 8 : i64, num_blocks = 8 : i64} : tensor<?x?xf32> -> tensor<?x8xi32>
  %b = v4a.block_topk %s {block_size = 8 : i64, num_blocks = 8 : i64}
      : tensor<?x?xf32> -> tensor<?x8xi32>
  // CHECK: v4a.topk %{{.*}} candidates %{{.*}} {candidate_block_size = 8 : i64, k = 16 : i64} : tensor<?x?xf32>, tensor<?x8xi32> -> tensor<?x16xi32>
  %c = v4a.topk %s candidates %b {k = 16 : i64, candidate_block_size = 8 : i64}
      : tensor<?x?xf32>, tensor<?x8xi32> -> tensor<?x16xi32>
  // CHECK: v4a.project_index_keys %{{.*}}, %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64} : tensor<?x512xf32>, tensor<128x512xbf16>, tensor<128xbf16> -> tensor<?x128xbf16>
  %k = v4a.project_index_keys %lat, %wk, %kn {eps = 1.0e-6 : f64}
      : tensor<?x512xf32>, tensor<128x512xbf16>, tensor<128xbf16>
        -> tensor<?x128xbf16>
  return %t, %c, %k : tensor<?x16xi32>, tensor<?x16xi32>, tensor<?x128xbf16>
}

// CHECK-LABEL: func @window_and_caches
func.func @window_and_caches(
    %ring: tensor<128x512xbf16>, %kv: tensor<?x512xbf16>, %pos: tensor<?xi64>,
    %cache: !v4a.kv_cache<fp8_model1, dim = 512, page_size = 64>,
    %icache: !v4a.kv_cache<index_mxfp4, dim = 128, page_size = 64>,
    %keys: tensor<?x128xf32>, %idx: tensor<?x64xi32>)
    -> (tensor<128x512xbf16>, tensor<?x128xi32>, tensor<?x64x512xbf16>) {
  // CHECK: v4a.window_store %{{.*}}, %{{.*}}, %{{.*}} : tensor<128x512xbf16>, tensor<?x512xbf16>, tensor<?xi64>
  %r = v4a.window_store %ring, %kv, %pos
      : tensor<128x512xbf16>, tensor<?x512xbf16>, tensor<?xi64>
  // CHECK: v4a.window_indices %{{.*}} {window = 128 : i64} : tensor<?xi64> -> tensor<?x128xi32>
  %w = v4a.window_indices %pos {window = 128 : i64}
      : tensor<?xi64> -> tensor<?x128xi32>
  // CHECK: v4a.cache_store %{{.*}}, %{{.*}}, %{{.*}} : !v4a.kv_cache<fp8_model1, dim = 512, page_size = 64>, tensor<?x512xbf16>, tensor<?xi64>
  v4a.cache_store %cache, %kv, %pos
      : !v4a.kv_cache<fp8_model1, dim = 512, page_size = 64>,
        tensor<?x512xbf16>, tensor<?xi64>
  // CHECK: v4a.cache_store %{{.*}}, %{{.*}}, %{{.*}} : !v4a.kv_cache<index_mxfp4, dim = 128, page_size = 64>, tensor<?x128xf32>, tensor<?xi64>
  v4a.cache_store %icache, %keys, %pos
      : !v4a.kv_cache<index_mxfp4, dim = 128, page_size = 64>,
        tensor<?x128xf32>, tensor<?xi64>
  // CHECK: v4a.cache_gather %{{.*}}, %{{.*}} : !v4a.kv_cache<fp8_model1, dim = 512, page_size = 64>, tensor<?x64xi32> -> tensor<?x64x512xbf16>
  %g = v4a.cache_gather %cache, %idx
      : !v4a.kv_cache<fp8_model1, dim = 512, page_size = 64>, tensor<?x64xi32>
        -> tensor<?x64x512xbf16>
  return %r, %w, %g : tensor<128x512xbf16>, tensor<?x128xi32>, tensor<?x64x512xbf16>
}

// CHECK-LABEL: func @attention_and_output
func.func @attention_and_output(
    %q: tensor<?x8x512xbf16>, %kv: tensor<?x512xbf16>, %idx: tensor<?x640xi32>,
    %sink: tensor<8xf32>, %woa: tensor<2048x1024xf8E4M3FN>,
    %woas: tensor<16x8xf8E8M0FNU>, %wob: tensor<4096x2048xbf16>,
    %woa16: tensor<2048x1024xbf16>)
    -> tensor<?x4096xbf16> {
  // CHECK: v4a.sparse_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {scale = 0.044194173824159223 : f64} : tensor<?x8x512xbf16>, tensor<?x512xbf16>, tensor<?x640xi32>, tensor<8xf32> -> tensor<?x8x512xbf16>
  %o = v4a.sparse_attention %q, %kv, %idx, %sink {scale = 0.044194173824159223 : f64}
      : tensor<?x8x512xbf16>, tensor<?x512xbf16>, tensor<?x640xi32>,
        tensor<8xf32> -> tensor<?x8x512xbf16>
  // CHECK: v4a.grouped_output %{{.*}}, %{{.*}} scale %{{.*}}, %{{.*}} {groups = 4 : i64} : tensor<?x8x512xbf16>, tensor<2048x1024xf8E4M3FN> scale tensor<16x8xf8E8M0FNU>, tensor<4096x2048xbf16> -> tensor<?x4096xbf16>
  %y = v4a.grouped_output %o, %woa scale %woas, %wob {groups = 4 : i64}
      : tensor<?x8x512xbf16>, tensor<2048x1024xf8E4M3FN> scale tensor<16x8xf8E8M0FNU>,
        tensor<4096x2048xbf16> -> tensor<?x4096xbf16>
  // CHECK: v4a.grouped_output %{{.*}}, %{{.*}}, %{{.*}} {groups = 4 : i64} : tensor<?x8x512xbf16>, tensor<2048x1024xbf16>, tensor<4096x2048xbf16> -> tensor<?x4096xbf16>
  %z = v4a.grouped_output %o, %woa16, %wob {groups = 4 : i64}
      : tensor<?x8x512xbf16>, tensor<2048x1024xbf16>, tensor<4096x2048xbf16>
        -> tensor<?x4096xbf16>
  // CHECK: v4a.grouped_output %{{.*}}, %{{.*}} scale %{{.*}} {groups = 4 : i64} : tensor<?x8x512xbf16>, tensor<2048x1024xf8E4M3FN> scale tensor<16x8xf8E8M0FNU> -> tensor<?x2048xbf16>
  %lora = v4a.grouped_output %o, %woa scale %woas {groups = 4 : i64}
      : tensor<?x8x512xbf16>, tensor<2048x1024xf8E4M3FN> scale tensor<16x8xf8E8M0FNU>
        -> tensor<?x2048xbf16>
  return %y : tensor<?x4096xbf16>
}

// CHECK-LABEL: v4a.model @tiny
// CHECK-SAME: candidate_block_size = 8 : i64
// CHECK-NEXT: v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
// CHECK-NEXT: v4a.layer 1 ratio 2 topk 4 swa packed_kv kv_source 1 index_source 1 candidate_source 1
// CHECK-NEXT: v4a.layer 2 ratio 2 topk 4 swa packed_kv kv_source 1 index_source 1 candidate_source 1
// CHECK-NEXT: v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
v4a.model @tiny <{candidate_block_size = 8 : i64, candidate_topk_blocks = 8 : i64,
    compress_rope_theta = 1.600000e+05 : f64, head_dim = 128 : i64,
    hidden_size = 64 : i64, index_head_dim = 128 : i64, index_n_heads = 2 : i64,
    index_topk = 4 : i64, layer_index_k_map = array<i64: 0, 1, 1, 3>,
    layer_index_module_map = array<i64: 0, 1, 1, 3>,
    layer_kv_map = array<i64: 0, 1, 1, 3>, num_attention_heads = 2 : i64,
    num_hidden_layers = 3 : i64, num_key_value_heads = 1 : i64,
    o_groups = 2 : i64, o_lora_rank = 32 : i64, q_lora_rank = 32 : i64,
    qk_rope_head_dim = 64 : i64, rms_norm_eps = 1.0e-6 : f64,
    rope_theta = 1.000000e+04 : f64, sliding_window = 8 : i64,
    weight_format = #v4a<weight_format bf16>}> {
  v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
  v4a.layer 1 ratio 2 topk 4 swa packed_kv kv_source 1 index_source 1 candidate_source 1
  v4a.layer 2 ratio 2 topk 4 swa packed_kv kv_source 1 index_source 1 candidate_source 1
  v4a.layer 3 ratio 0 topk 0 swa mtp kv_source 3 index_source 3
}

// Batched steps: metadata, the stateful compressor, and the ops that address
// every sequence's cache rows; kernel regions; step programs.
// CHECK-LABEL: func @batched_step
func.func @batched_step(%pos: tensor<?xi64>, %slots: tensor<?xi64>,
                        %first: tensor<?xi64>, %last: tensor<?xi64>,
                        %ctx: tensor<1xi64>,
                        %kv: tensor<?x1024xf32>, %score: tensor<?x1024xf32>,
                        %ape: tensor<4x1024xf32>,
                        %state: !v4a.kv_cache<f32, dim = 2048, page_size = 8>,
                        %qi: tensor<?x64x128xbf16>,
                        %keys: !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>,
                        %w: tensor<?x64xf32>, %q: tensor<?x64x512xbf16>,
                        %rows: tensor<?x512xbf16>,
                        %ring: !v4a.kv_cache<bf16, dim = 512, page_size = 128>,
                        %cmp: !v4a.kv_cache<fp8_model1, dim = 512, page_size = 64>,
                        %sel: tensor<?x512xi32>, %sink: tensor<64xf32>)
    -> (tensor<?x64x512xbf16>, tensor<?x64x512xbf16>) {
  // CHECK: v4a.step_window %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {window = 128 : i64} : tensor<?xi64> -> tensor<?x128xi32>
  %attend, %store = v4a.step_window %pos, %slots, %first, %last
      {window = 128 : i64} : tensor<?xi64> -> tensor<?x128xi32>
  // CHECK: v4a.step_compressed %{{.*}}, %{{.*}} {ratio = 4 : i64, slot_rows = 64 : i64} : tensor<?xi64>
  %base, %complete = v4a.step_compressed %pos, %slots
      {ratio = 4 : i64, slot_rows = 64 : i64} : tensor<?xi64>
  // CHECK: v4a.visible_rows %{{.*}} bound %{{.*}} {ratio = 128 : i64} : tensor<?xi64> -> tensor<?x?xi32>
  %visible = v4a.visible_rows %pos bound %ctx {ratio = 128 : i64}
      : tensor<?xi64> -> tensor<?x?xi32>
  // CHECK: v4a.compressor {{.*}} {overlap, ratio = 4 : i64, slot_rows = 8 : i64} : tensor<?x1024xf32>, tensor<4x1024xf32>, tensor<?xi64>, !v4a.kv_cache<f32, dim = 2048, page_size = 8> -> tensor<?x512xf32>
  %e = v4a.compressor %kv, %score, %ape, %pos, %slots, %state
      {ratio = 4 : i64, overlap, slot_rows = 8 : i64}
      : tensor<?x1024xf32>, tensor<4x1024xf32>, tensor<?xi64>,
        !v4a.kv_cache<f32, dim = 2048, page_size = 8> -> tensor<?x512xf32>
  // CHECK: v4a.cache_indexer_score {{.*}} bound %{{.*}} {ratio = 4 : i64}
  %s = v4a.cache_indexer_score %qi, %keys, %w, %pos, %base bound %ctx {ratio = 4 : i64}
      : tensor<?x64x128xbf16>,
        !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>,
        tensor<?x64xf32>, tensor<?xi64> -> tensor<?x?xf32>
  // CHECK: v4a.cache_attention %{{.*}}, %{{.*}} window %{{.*}}[%{{.*}}] compressed %{{.*}} : !v4a.kv_cache<fp8_model1, dim = 512, page_size = 64>[%{{.*}} : tensor<?x512xi32>] base %{{.*}} : tensor<?xi64> sink
  %o = v4a.cache_attention %q, %rows window %ring[%attend]
      compressed %cmp : !v4a.kv_cache<fp8_model1, dim = 512, page_size = 64>
          [%sel : tensor<?x512xi32>] base %base : tensor<?xi64>
      sink %sink {scale = 0.0441941738 : f64}
      : tensor<?x64x512xbf16>, tensor<?x512xbf16>,
        !v4a.kv_cache<bf16, dim = 512, page_size = 128>, tensor<?x128xi32>,
        tensor<64xf32> -> tensor<?x64x512xbf16>
  // CHECK: v4a.cache_attention %{{.*}}, %{{.*}} window %{{.*}}[%{{.*}}] sink
  %ow = v4a.cache_attention %q, %rows window %ring[%attend] sink %sink
      {scale = 0.0441941738 : f64}
      : tensor<?x64x512xbf16>, tensor<?x512xbf16>,
        !v4a.kv_cache<bf16, dim = 512, page_size = 128>, tensor<?x128xi32>,
        tensor<64xf32> -> tensor<?x64x512xbf16>
  // CHECK: v4a.fused "rms_norm_rope" (%{{.*}}, %{{.*}}) : (tensor<?x64x512xbf16>, tensor<?xi64>) -> tensor<?x64x512xbf16> {
  // CHECK: v4a.yield %{{.*}} : tensor<?x64x512xbf16>
  %f = v4a.fused "rms_norm_rope" (%o, %pos)
      : (tensor<?x64x512xbf16>, tensor<?xi64>) -> tensor<?x64x512xbf16> {
  ^bb0(%a: tensor<?x64x512xbf16>, %p: tensor<?xi64>):
    %n = v4a.rms_norm %a {eps = 1.0e-06 : f64} : tensor<?x64x512xbf16>
    %r = v4a.rope %n, %p {rope_dim = 64 : i64, theta = 1.0e+04 : f64}
        : tensor<?x64x512xbf16>, tensor<?xi64>
    v4a.yield %r : tensor<?x64x512xbf16>
  }
  return %f, %ow : tensor<?x64x512xbf16>, tensor<?x64x512xbf16>
}

// CHECK-LABEL: v4a.program @main
// CHECK-NEXT: v4a.run_meta @meta_0_0_1_0
// CHECK-NEXT: v4a.run_step @step_0_0_1_0 layer 0 kernels ["merged_linear", "rms_norm_rope"]
func.func @meta_0_0_1_0() {
  return
}
func.func @step_0_0_1_0() attributes {v4a.meta = @meta_0_0_1_0} {
  return
}
v4a.program @main {
  v4a.run_meta @meta_0_0_1_0
  v4a.run_step @step_0_0_1_0 layer 0 kernels ["merged_linear", "rms_norm_rope"]
}
