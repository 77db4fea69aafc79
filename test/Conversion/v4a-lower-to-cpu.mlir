// RUN: v4a-opt %s -split-input-file -verify-diagnostics -v4a-lower-to-cpu | FileCheck %s

// Compute ops become loops over buffers; the result is a fresh buffer.
// CHECK-LABEL: func @linear
// CHECK: bufferization.to_buffer
// CHECK: memref.alloc
// CHECK: scf.for
// CHECK: arith.mulf
// CHECK: arith.truncf {{.*}} : f32 to bf16
// CHECK: bufferization.to_tensor
// CHECK-NOT: v4a.linear
func.func @linear(%x: tensor<?x64xf32>, %w: tensor<32x64xf32>) -> tensor<?x32xbf16> {
  %y = v4a.linear %x, %w : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

// fp8 weights are decoded from their e4m3 bytes; scales round up to powers
// of two.
// CHECK-LABEL: func @linear_fp8
// CHECK: math.copysign
// CHECK: arith.bitcast {{.*}} : f8E4M3FN to i8
// CHECK-NOT: v4a.linear
func.func @linear_fp8(%x: tensor<?x64xf32>, %w: tensor<32x64xf8E4M3FN>, %s: tensor<1x1xf8E8M0FNU>) -> tensor<?x32xbf16> {
  %y = v4a.linear %x, %w scale %s : tensor<?x64xf32>, tensor<32x64xf8E4M3FN>, tensor<1x1xf8E8M0FNU> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

// project_index_keys decomposes into its defining ops before lowering.
// CHECK-LABEL: func @keys
// CHECK-NOT: v4a.
func.func @keys(%l: tensor<?x64xf32>, %w: tensor<16x64xf32>, %g: tensor<16xf32>) -> tensor<?x16xbf16> {
  %k = v4a.project_index_keys %l, %w, %g {eps = 1.0e-6 : f64} : tensor<?x64xf32>, tensor<16x64xf32>, tensor<16xf32> -> tensor<?x16xbf16>
  return %k : tensor<?x16xbf16>
}

// -----

// Every compute op lowers; nothing of the dialect is left.
// CHECK-LABEL: func @all
// CHECK-COUNT-16: bufferization.to_tensor
// CHECK-NOT: v4a.
func.func @all(%q: tensor<?x2x64xbf16>, %kv: tensor<?x64xbf16>, %idx: tensor<?x8xi32>,
               %sink: tensor<2xf32>, %pos: tensor<?xi64>, %k: tensor<?x32xf32>,
               %w: tensor<?x2xf32>, %qi: tensor<?x2x32xf32>, %c: tensor<?x128xf32>,
               %ape: tensor<4x128xf32>, %st: tensor<?x8x128xf32>, %ring: tensor<8x64xbf16>,
               %woa: tensor<32x64xbf16>, %wob: tensor<48x32xbf16>)
    -> (tensor<?x2x64xbf16>, tensor<?x8xi32>, tensor<?x64xf32>,
        tensor<?x64xf32>, tensor<?xi1>, tensor<?x8x128xf32>,
        tensor<?x8x128xf32>, tensor<8x64xbf16>, tensor<?x8xi32>,
        tensor<?x48xbf16>) {
  %0 = v4a.rms_norm %q {eps = 1.0e-6 : f64} : tensor<?x2x64xbf16>
  %1 = v4a.rope %0, %pos {rope_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<?x2x64xbf16>, tensor<?xi64>
  %2 = v4a.act_quant %kv {format = #v4a<quant_format e4m3>, block_size = 16 : i64, quant_dims = 48 : i64, pow2_scale} : tensor<?x64xbf16>
  %3 = v4a.hadamard %k : tensor<?x32xf32>
  %4 = v4a.indexer_score %qi, %3, %w, %pos {ratio = 4 : i64} : tensor<?x2x32xf32>, tensor<?x32xf32>, tensor<?x2xf32>, tensor<?xi64> -> tensor<?x?xf32>
  %5 = v4a.block_topk %4 {block_size = 8 : i64, num_blocks = 8 : i64} : tensor<?x?xf32> -> tensor<?x8xi32>
  %6 = v4a.topk %4 candidates %5 {k = 8 : i64, candidate_block_size = 8 : i64} : tensor<?x?xf32>, tensor<?x8xi32> -> tensor<?x8xi32>
  %7 = v4a.compress %c, %c, %ape {ratio = 4 : i64, overlap} : tensor<?x128xf32>, tensor<4x128xf32> -> tensor<?x64xf32>
  %8:4 = v4a.compress_step %c, %c, %ape, %pos, %st, %st {ratio = 4 : i64, overlap} : tensor<?x128xf32>, tensor<4x128xf32>, tensor<?xi64>, tensor<?x8x128xf32> -> tensor<?x64xf32>, tensor<?xi1>
  %9 = v4a.window_store %ring, %2, %pos : tensor<8x64xbf16>, tensor<?x64xbf16>, tensor<?xi64>
  %10 = v4a.window_indices %pos {window = 8 : i64} : tensor<?xi64> -> tensor<?x8xi32>
  %11 = v4a.sparse_attention %1, %kv, %idx, %sink {scale = 0.125 : f64} : tensor<?x2x64xbf16>, tensor<?x64xbf16>, tensor<?x8xi32>, tensor<2xf32> -> tensor<?x2x64xbf16>
  %12 = v4a.grouped_output %11, %woa, %wob {groups = 2 : i64} : tensor<?x2x64xbf16>, tensor<32x64xbf16>, tensor<48x32xbf16> -> tensor<?x48xbf16>
  // Every result is used, so nothing is removed as dead code.
  return %11, %6, %7, %8#0, %8#1, %8#2, %8#3, %9, %10, %12
      : tensor<?x2x64xbf16>, tensor<?x8xi32>, tensor<?x64xf32>,
        tensor<?x64xf32>, tensor<?xi1>, tensor<?x8x128xf32>,
        tensor<?x8x128xf32>, tensor<8x64xbf16>, tensor<?x8xi32>,
        tensor<?x48xbf16>
}

// -----

// A cache is its bytes; bf16 rows are viewed as [rows, dim] bf16.
// CHECK-LABEL: func @cache_bf16
// CHECK-SAME: %{{.*}}: memref<?xi8>
// CHECK: memref.view {{.*}} : memref<?xi8> to memref<?x64xbf16>
// CHECK: memref.store {{.*}} : memref<?x64xbf16>
// CHECK: memref.load {{.*}} : memref<?x64xbf16>
// CHECK-NOT: v4a.cache
func.func @cache_bf16(%c: !v4a.kv_cache<bf16, dim = 64, page_size = 64>, %r: tensor<?x64xf32>, %i: tensor<?xi64>, %idx: tensor<?x4xi32>) -> tensor<?x4x64xf32> {
  v4a.cache_store %c, %r, %i : !v4a.kv_cache<bf16, dim = 64, page_size = 64>, tensor<?x64xf32>, tensor<?xi64>
  %g = v4a.cache_gather %c, %idx : !v4a.kv_cache<bf16, dim = 64, page_size = 64>, tensor<?x4xi32> -> tensor<?x4x64xf32>
  return %g : tensor<?x4x64xf32>
}

// -----

// fp8 MODEL1 rows: a ue8m0 scale per 64 values written as a byte, e4m3 codes,
// and the rope dims as bf16 byte pairs.
// CHECK-LABEL: func.func @cache_fp8
// CHECK-NOT: v4a.cache_store
// CHECK: memref.store {{.*}} : memref<?xi8>
func.func @cache_fp8(%c: !v4a.kv_cache<fp8_model1, dim = 512, page_size = 64>, %r: tensor<?x512xf32>, %i: tensor<?xi64>) {
  v4a.cache_store %c, %r, %i : !v4a.kv_cache<fp8_model1, dim = 512, page_size = 64>, tensor<?x512xf32>, tensor<?xi64>
  return
}

// -----

// Index keys: fp8 with a row scale, MXFP4 with a scale per 32 dims.
// CHECK-LABEL: func.func @cache_index_fp8
// CHECK-NOT: v4a.cache_store
// CHECK: memref.store {{.*}} : memref<?xi8>
func.func @cache_index_fp8(%c: !v4a.kv_cache<index_fp8, dim = 128, page_size = 64>, %r: tensor<?x128xf32>, %i: tensor<?xi64>) {
  v4a.cache_store %c, %r, %i : !v4a.kv_cache<index_fp8, dim = 128, page_size = 64>, tensor<?x128xf32>, tensor<?xi64>
  return
}

// -----

// CHECK-LABEL: func.func @cache_index_mxfp4
// CHECK-NOT: v4a.cache_store
// CHECK: memref.store {{.*}} : memref<?xi8>
func.func @cache_index_mxfp4(%c: !v4a.kv_cache<index_mxfp4, dim = 128, page_size = 64>, %r: tensor<?x128xf32>, %i: tensor<?xi64>) {
  v4a.cache_store %c, %r, %i : !v4a.kv_cache<index_mxfp4, dim = 128, page_size = 64>, tensor<?x128xf32>, tensor<?xi64>
  return
}

// -----

func.func @cache_mxfp8(%c: !v4a.kv_cache<mxfp8, dim = 512, page_size = 64>, %r: tensor<?x512xf32>, %i: tensor<?xi64>) {
  // expected-error @+1 {{v4a-lower-to-cpu: no CPU lowering for v4a.cache_store on mxfp8 caches (every layout but mxfp8 is lowered)}}
  v4a.cache_store %c, %r, %i : !v4a.kv_cache<mxfp8, dim = 512, page_size = 64>, tensor<?x512xf32>, tensor<?xi64>
  return
}

// -----

// Step metadata: loops over the packed tokens; no v4a op is left.
// CHECK-LABEL: func.func @metadata
// CHECK: scf.for
// CHECK: arith.remsi
// CHECK-NOT: v4a.step_
// CHECK-NOT: v4a.visible_rows
func.func @metadata(%p: tensor<?xi64>, %s: tensor<?xi64>, %f: tensor<?xi64>, %l: tensor<?xi64>, %ctx: tensor<1xi64>) -> (tensor<?x8xi32>, tensor<?xi64>, tensor<?xi64>, tensor<?xi64>, tensor<?x?xi32>) {
  %a, %st = v4a.step_window %p, %s, %f, %l {window = 8 : i64} : tensor<?xi64> -> tensor<?x8xi32>
  %b, %c = v4a.step_compressed %p, %s {ratio = 4 : i64, slot_rows = 64 : i64} : tensor<?xi64>
  %v = v4a.visible_rows %p bound %ctx {ratio = 128 : i64} : tensor<?xi64> -> tensor<?x?xi32>
  return %a, %st, %b, %c, %v : tensor<?x8xi32>, tensor<?xi64>, tensor<?xi64>, tensor<?xi64>, tensor<?x?xi32>
}

// -----

// The compressor reads and writes its state in the cache bytes, viewed as
// f32; indexer scores and attention read cache rows in place.
// CHECK-LABEL: func.func @cache_ops
// CHECK-SAME: %{{.*}}: memref<?xi8>
// CHECK: memref.view {{.*}} : memref<?xi8> to memref<?xf32>
// CHECK: math.exp
// CHECK-NOT: v4a.compressor
// CHECK-NOT: v4a.cache_indexer_score
// CHECK-NOT: v4a.cache_attention
func.func @cache_ops(%kv: tensor<?x128xf32>, %ape: tensor<4x128xf32>, %p: tensor<?xi64>,
                     %state: !v4a.kv_cache<f32, dim = 256, page_size = 8>,
                     %q: tensor<?x2x32xbf16>, %keys: !v4a.kv_cache<index_bf16, dim = 32, page_size = 64>,
                     %w: tensor<?x2xf32>, %qa: tensor<?x2x80xbf16>, %rows: tensor<?x80xbf16>,
                     %ring: !v4a.kv_cache<bf16, dim = 80, page_size = 8>, %attend: tensor<?x8xi32>,
                     %cmp: !v4a.kv_cache<fp8_model1, dim = 128, page_size = 64>, %sel: tensor<?x4xi32>,
                     %sink: tensor<2xf32>, %ctx: tensor<1xi64>) -> (tensor<?x64xf32>, tensor<?x?xf32>, tensor<?x2x80xbf16>) {
  %e = v4a.compressor %kv, %kv, %ape, %p, %p, %state {ratio = 4 : i64, overlap, slot_rows = 8 : i64} : tensor<?x128xf32>, tensor<4x128xf32>, tensor<?xi64>, !v4a.kv_cache<f32, dim = 256, page_size = 8> -> tensor<?x64xf32>
  %s = v4a.cache_indexer_score %q, %keys, %w, %p, %p bound %ctx {ratio = 4 : i64} : tensor<?x2x32xbf16>, !v4a.kv_cache<index_bf16, dim = 32, page_size = 64>, tensor<?x2xf32>, tensor<?xi64> -> tensor<?x?xf32>
  %o = v4a.cache_attention %qa, %rows window %ring[%attend] sink %sink {scale = 0.1 : f64} : tensor<?x2x80xbf16>, tensor<?x80xbf16>, !v4a.kv_cache<bf16, dim = 80, page_size = 8>, tensor<?x8xi32>, tensor<2xf32> -> tensor<?x2x80xbf16>
  return %e, %s, %o : tensor<?x64xf32>, tensor<?x?xf32>, tensor<?x2x80xbf16>
}

// -----

// Kernel regions are inlined: each op keeps its loop nest.
// CHECK-LABEL: func.func @fused
// CHECK-NOT: v4a.fused
// CHECK: math.sqrt
func.func @fused(%x: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  %r = v4a.fused "rms_norm" (%x) : (tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>):
    %n = v4a.rms_norm %a {eps = 1.0e-06 : f64} : tensor<?x64xbf16>
    v4a.yield %n : tensor<?x64xbf16>
  }
  return %r : tensor<?x64xbf16>
}

// -----

// A merged product's parts are views of its columns, not copies: a part of
// its element type is the slice itself, a bf16 part of f32 sums the slice
// rounded elementwise.
// CHECK-LABEL: func @split_columns(
// CHECK-SAME: %[[Y:.*]]: tensor<?x192xf32>)
// CHECK: %[[T:.*]] = tensor.dim %[[Y]], %c0
// CHECK: %[[A:.*]] = tensor.extract_slice %[[Y]][0, 0] [%[[T]], 128] [1, 1] : tensor<?x192xf32> to tensor<?x128xf32>
// CHECK: %[[A16:.*]] = arith.truncf %[[A]] : tensor<?x128xf32> to tensor<?x128xbf16>
// CHECK: %[[B:.*]] = tensor.extract_slice %[[Y]][0, 128] [%[[T]], 64] [1, 1] : tensor<?x192xf32> to tensor<?x64xf32>
// CHECK-NOT: scf.
// CHECK: return %[[A16]], %[[B]]
func.func @split_columns(%y: tensor<?x192xf32>) -> (tensor<?x128xbf16>, tensor<?x64xf32>) {
  %p:2 = v4a.split_columns %y : tensor<?x192xf32> -> tensor<?x128xbf16>, tensor<?x64xf32>
  return %p#0, %p#1 : tensor<?x128xbf16>, tensor<?x64xf32>
}

// -----

// A part a GPU kernel takes as a buffer of its own rows (identity layout)
// is copied out by one loop; the other parts stay views.
// CHECK-LABEL: func @split_columns_own_rows(
// CHECK-SAME: %[[Y:.*]]: tensor<?x192xbf16>)
// CHECK: %[[B:.*]] = tensor.extract_slice %[[Y]][0, 128] [%{{.*}}, 64] [1, 1]
// CHECK: %[[OWN:.*]] = memref.alloc(%{{.*}}) : memref<?x128xbf16>
// CHECK: scf.parallel
// CHECK: memref.store %{{.*}}, %[[OWN]]
// CHECK: return %[[OWN]], %[[B]]
func.func @split_columns_own_rows(%y: tensor<?x192xbf16>) -> (memref<?x128xbf16>, tensor<?x64xbf16>) {
  %p:2 = v4a.split_columns %y : tensor<?x192xbf16> -> tensor<?x128xbf16>, tensor<?x64xbf16>
  %a = bufferization.to_buffer %p#0 read_only : tensor<?x128xbf16> to memref<?x128xbf16>
  return %a, %p#1 : memref<?x128xbf16>, tensor<?x64xbf16>
}
