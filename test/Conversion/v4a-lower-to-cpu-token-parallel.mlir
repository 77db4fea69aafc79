// RUN: v4a-opt %s -split-input-file -v4a-lower-to-cpu="token-parallel=1" | FileCheck %s

// With token-parallel, the tokens of a projection and tiles of its output
// rows run in parallel (one loop over both), each with its own scratch (an
// fp8 linear's quantized activation) inside the loop.
// CHECK-LABEL: func @linear_fp8
// CHECK: scf.parallel (%{{.*}}, %{{.*}}) =
// CHECK: memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK: memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK: scf.parallel
// CHECK-NOT: vector.
func.func @linear_fp8(%x: tensor<?x256xbf16>, %w: tensor<128x256xf8E4M3FN>, %s: tensor<1x2xf8E8M0FNU>) -> tensor<?x128xbf16> {
  %y = v4a.linear %x, %w scale %s : tensor<?x256xbf16>, tensor<128x256xf8E4M3FN>, tensor<1x2xf8E8M0FNU> -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}

// -----

// Attention: a parallel loop over tokens holding the token's scratch, then
// parallel loops over heads; no vector lanes.
// CHECK-LABEL: func.func @attention
// CHECK: scf.parallel (%{{.*}}) =
// CHECK-COUNT-3: memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK: scf.parallel
// CHECK-NOT: vector.
func.func @attention(%qa: tensor<?x2x80xbf16>, %rows: tensor<?x80xbf16>,
                     %ring: !v4a.kv_cache<bf16, dim = 80, page_size = 8>, %attend: tensor<?x8xi32>,
                     %sink: tensor<2xf32>) -> tensor<?x2x80xbf16> {
  %o = v4a.cache_attention %qa, %rows window %ring[%attend] sink %sink {scale = 0.1 : f64} : tensor<?x2x80xbf16>, tensor<?x80xbf16>, !v4a.kv_cache<bf16, dim = 80, page_size = 8>, tensor<?x8xi32>, tensor<2xf32> -> tensor<?x2x80xbf16>
  return %o : tensor<?x2x80xbf16>
}
