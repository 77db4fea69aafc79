// RUN: v4a-opt %s -split-input-file -v4a-fuse-elementwise -verify-diagnostics | FileCheck %s
// RUN: v4a-compile %examples/v4-flash.json --emit=kernels | FileCheck %s --check-prefix=FLASH

// The kernels convert-elementwise-to-linalg makes of a compressed row's rope
// position, positions - (ratio - 1): the splat folds into the subtraction
// as its scalar, one loop nest.
// CHECK-LABEL: func.func @group_starts(
// CHECK-SAME: %[[P:.*]]: tensor<?xi64>)
// CHECK-DAG: %[[THREE:.*]] = arith.constant 3 : i64
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[P]] : tensor<?xi64>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: i64, %{{.*}}: i64):
// CHECK-NEXT: %[[D:.*]] = arith.subi %[[IN]], %[[THREE]] : i64
// CHECK-NEXT: linalg.yield %[[D]] : i64
// CHECK-NOT: tensor.splat
// CHECK-NOT: linalg.fill
// CHECK: return %[[R]]
#map = affine_map<(d0) -> (d0)>
func.func @group_starts(%p: tensor<?xi64>) -> tensor<?xi64> {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : i64
  %n = tensor.dim %p, %c0 : tensor<?xi64>
  %three = tensor.splat %c3[%n] : tensor<?xi64>
  %r = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%p, %three : tensor<?xi64>, tensor<?xi64>) outs(%p : tensor<?xi64>) {
  ^bb0(%in: i64, %in_1: i64, %out: i64):
    %d = arith.subi %in, %in_1 : i64
    linalg.yield %d : i64
  } -> tensor<?xi64>
  return %r : tensor<?xi64>
}

// -----

// The indexer's head weights: the bf16 rounding of f32 sums, the widening
// and the scale are one loop nest, although the scale's splat takes its
// size off the widening's result.
// CHECK-LABEL: func.func @head_weights(
// CHECK-SAME: %[[W:.*]]: tensor<?x64xf32>)
// CHECK-DAG: %[[S:.*]] = arith.constant 1.250000e-01 : f32
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[W]] : tensor<?x64xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[N:.*]] = arith.truncf %[[IN]] : f32 to bf16
// CHECK-NEXT: %[[E:.*]] = arith.extf %[[N]] : bf16 to f32
// CHECK-NEXT: %[[M:.*]] = arith.mulf %[[E]], %[[S]] : f32
// CHECK-NEXT: linalg.yield %[[M]] : f32
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]
#map1 = affine_map<(d0, d1) -> (d0, d1)>
func.func @head_weights(%w: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %w, %c0 : tensor<?x64xf32>
  %e0 = tensor.empty(%n) : tensor<?x64xbf16>
  %narrow = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<?x64xf32>) outs(%e0 : tensor<?x64xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<?x64xbf16>
  %e1 = tensor.empty(%n) : tensor<?x64xf32>
  %wide = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%narrow : tensor<?x64xbf16>) outs(%e1 : tensor<?x64xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %x = arith.extf %in : bf16 to f32
    linalg.yield %x : f32
  } -> tensor<?x64xf32>
  %cst = arith.constant 0.125 : f32
  %m = tensor.dim %wide, %c0 : tensor<?x64xf32>
  %scale = tensor.splat %cst[%m] : tensor<?x64xf32>
  %r = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%wide, %scale : tensor<?x64xf32>, tensor<?x64xf32>) outs(%wide : tensor<?x64xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %y = arith.mulf %in, %in_1 : f32
    linalg.yield %y : f32
  } -> tensor<?x64xf32>
  return %r : tensor<?x64xf32>
}

// -----

// A result another op also reads stays a loop nest of its own: fused, it
// would be computed twice.
// CHECK-LABEL: func.func @two_readers(
// CHECK: %[[WIDE:.*]] = linalg.generic
// CHECK: arith.extf
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[WIDE]] : tensor<?x64xf32>)
// CHECK: arith.mulf
// CHECK: return %[[R]], %[[WIDE]]
#map2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @two_readers(%w: tensor<?x64xbf16>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %w, %c0 : tensor<?x64xbf16>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %wide = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<?x64xbf16>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %x = arith.extf %in : bf16 to f32
    linalg.yield %x : f32
  } -> tensor<?x64xf32>
  %e1 = tensor.empty(%n) : tensor<?x64xf32>
  %r = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel"]} ins(%wide : tensor<?x64xf32>) outs(%e1 : tensor<?x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.mulf %in, %in : f32
    linalg.yield %y : f32
  } -> tensor<?x64xf32>
  return %r, %wide : tensor<?x64xf32>, tensor<?x64xf32>
}

// -----

// A splat nobody computes with is a fill of its own.
// CHECK-LABEL: func.func @splat_alone(
// CHECK-SAME: %[[N:.*]]: index)
// CHECK-DAG: %[[C:.*]] = arith.constant 7 : i64
// CHECK: %[[E:.*]] = tensor.empty(%[[N]]) : tensor<?xi64>
// CHECK: %[[F:.*]] = linalg.fill ins(%[[C]] : i64) outs(%[[E]] : tensor<?xi64>)
// CHECK: return %[[F]]
func.func @splat_alone(%n: index) -> tensor<?xi64> {
  %c7 = arith.constant 7 : i64
  %s = tensor.splat %c7[%n] : tensor<?xi64>
  return %s : tensor<?xi64>
}

// A V4-Flash ratio-4 key's metadata launches one kernel for its compressed
// rows' rope positions. Its step computes the indexer's head weights in the
// scoring kernel, which reads the merged compressor product in place, like
// the compressor (no split copies the product's columns out, no kernel
// writes the weights).
// FLASH-LABEL: func.func @meta_4_0_1_512_entry(
// FLASH: gpu.launch_func @v4a_gpu::@meta_4_0_1_512_loops2 {{.*}} args(%arg0 : memref<?xi64>, %{{.*}} : memref<?xi64>, %{{.*}} : index)
// FLASH-LABEL: func.func @step_4_0_1_512_entry(
// FLASH: gpu.launch_func @v4a_gpu::@step_4_0_1_512_loops3 {{.*}} args(%[[PRODUCT:.*]] : memref<?x2624xf32>,
// FLASH-NOT: memref<?x64xf32>
// FLASH: gpu.launch_func @v4a_gpu::@step_4_0_1_512_indexer0 {{.*}} %[[PRODUCT]] : memref<?x2624xf32>
