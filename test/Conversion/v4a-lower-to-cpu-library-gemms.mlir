// RUN: v4a-opt %s -split-input-file -v4a-lower-to-cpu="token-parallel=1 library-gemms=1" | FileCheck %s
// RUN: v4a-opt %s -split-input-file -v4a-lower-to-cpu="token-parallel=1 library-fp8-gemms=1" | FileCheck %s --check-prefix=FP8

// A bf16 projection is also a library GEMM: D[T, 128] = x[T, 256] . w^T,
// called right before the loops that stay as its fallback.
// CHECK-LABEL: func.func @linear_bf16
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG: %[[C128:.*]] = arith.constant 128 : index
// CHECK-DAG: %[[C256:.*]] = arith.constant 256 : index
// CHECK: %[[T:.*]] = memref.dim
// CHECK: call @v4a_gemm_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %[[C128]], %[[T]], %[[C256]], %[[C256]], %[[C256]], %[[C128]], %[[C1]], %[[C0]], %[[C0]], %[[C0]])
// CHECK-NOT: scf.parallel
// CHECK: memref.dim
// CHECK-NEXT: scf.parallel
// CHECK: func.func private @v4a_gemm_bf16(memref<?x?xbf16>, memref<?x?xbf16>, memref<?x?xbf16>, index, index, index, index, index, index, index, index, index, index)
func.func @linear_bf16(%x: tensor<?x256xbf16>, %w: tensor<128x256xbf16>) -> tensor<?x128xbf16> {
  %y = v4a.linear %x, %w : tensor<?x256xbf16>, tensor<128x256xbf16> -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}

// -----

// fp8 weights and f32 outputs stay on the generated loops; with
// library-fp8-gemms an fp8 projection quantizes its activation in a loop of
// its own (e4m3 bytes [T rounded up to 4, 256], f32 scales [2, T rounded up
// to 4]), widens the weight scales ([1, 4]), calls the library and falls
// back to loops over the tokens (not the padded rows).
// FP8-LABEL: func.func @linear_fp8
// FP8: %[[T:.*]] = memref.dim
// FP8: %[[XQ:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x?xi8>
// FP8: %[[XS:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x?xf32>
// FP8: %[[WS:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x?xf32>
// FP8: scf.parallel
// FP8: memref.store %{{.*}}, %[[XQ]]
// FP8: scf.parallel
// FP8: memref.store %{{.*}}, %[[WS]]
// FP8: call @v4a_gemm_fp8(%{{.*}}, %[[XQ]], %{{.*}}, %[[WS]], %[[XS]], %{{.*}}, %[[T]],
// FP8-NEXT: scf.parallel (%{{.*}}, %{{.*}}) = (%{{.*}}, %{{.*}}) to (%[[T]], %{{.*}})
// FP8-LABEL: func.func @linear_f32
// FP8-NOT: call @v4a_gemm
// CHECK-LABEL: func.func @linear_fp8
// CHECK-NOT: call @v4a_gemm_bf16
// CHECK-LABEL: func.func @linear_f32
// CHECK-NOT: call @v4a_gemm_bf16
// CHECK: return
func.func @linear_fp8(%x: tensor<?x256xbf16>, %w: tensor<128x256xf8E4M3FN>, %s: tensor<1x2xf8E8M0FNU>) -> tensor<?x128xbf16> {
  %y = v4a.linear %x, %w scale %s : tensor<?x256xbf16>, tensor<128x256xf8E4M3FN>, tensor<1x2xf8E8M0FNU> -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}
func.func @linear_f32(%x: tensor<?x256xf32>, %w: tensor<128x256xbf16>) -> tensor<?x128xf32> {
  %y = v4a.linear %x, %w : tensor<?x256xf32>, tensor<128x256xbf16> -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

// -----

// The grouped output: wo_a as 2 batches of [T, 512] . [32, 512]^T (batch
// strides 32*512 in wo_a, 512 in o, 32 in the result), then wo_b.
// CHECK-LABEL: func.func @grouped
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG: %[[C32:.*]] = arith.constant 32 : index
// CHECK-DAG: %[[C64:.*]] = arith.constant 64 : index
// CHECK-DAG: %[[C512:.*]] = arith.constant 512 : index
// CHECK-DAG: %[[C1024:.*]] = arith.constant 1024 : index
// CHECK-DAG: %[[C16384:.*]] = arith.constant 16384 : index
// CHECK: call @v4a_gemm_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %[[C32]], %{{.*}}, %[[C512]], %[[C512]], %[[C1024]], %[[C64]], %[[C2]], %[[C16384]], %[[C512]], %[[C32]])
// CHECK-NEXT: scf.parallel
// CHECK: call @v4a_gemm_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %[[C64]], %{{.*}}, %[[C64]], %[[C64]], %[[C64]], %[[C64]],
// CHECK-NEXT: scf.parallel
func.func @grouped(%o: tensor<?x2x512xbf16>, %a: tensor<64x512xbf16>, %b: tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  %y = v4a.grouped_output %o, %a, %b {groups = 2 : i64} : tensor<?x2x512xbf16>, tensor<64x512xbf16>, tensor<64x64xbf16> -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// -----

// bf16 operands with an f32 result (the compressors' projections) call the
// library's bf16-in, f32-out GEMM.
// CHECK-LABEL: func.func @linear_bf16_f32
// CHECK: call @v4a_gemm_bf16_f32({{.*}}) : (memref<?x?xbf16>, memref<?x?xbf16>, memref<?x?xf32>,
// CHECK: func.func private @v4a_gemm_bf16_f32(memref<?x?xbf16>, memref<?x?xbf16>, memref<?x?xf32>,
func.func @linear_bf16_f32(%x: tensor<?x256xbf16>, %w: tensor<128x256xbf16>) -> tensor<?x128xf32> {
  %y = v4a.linear %x, %w : tensor<?x256xbf16>, tensor<128x256xbf16> -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

// -----

// A dequantized fp8 product (k_block) is a plain bf16 library GEMM; its
// fallback sums each 128-wide block in a loop of its own (two blocks of
// 128 over the 256 inputs) before adding it.
// CHECK-LABEL: func.func @linear_k_block
// CHECK: call @v4a_gemm_bf16(
// CHECK: scf.parallel
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(
// CHECK: arith.mulf
// CHECK: scf.yield
// CHECK: arith.addf
func.func @linear_k_block(%x: tensor<?x256xbf16>, %w: tensor<128x256xbf16>) -> tensor<?x128xbf16> {
  %y = v4a.linear %x, %w {k_block = 128 : i64} : tensor<?x256xbf16>, tensor<128x256xbf16> -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}
