// RUN: v4a-opt %s -split-input-file -verify-diagnostics -v4a-lower-metadata-to-gpu | FileCheck %s

// A metadata function becomes a kernel over memrefs (its inputs, then its
// results); each thread writes the rows of one token.
// CHECK: module attributes {gpu.container_module}
// CHECK: gpu.module @v4a_gpu [#nvvm.target<chip = "sm_90a", features = "+ptx80">]
// CHECK: gpu.func @meta_kernel(%[[POS:.*]]: memref<?xi64>, %{{.*}}: memref<?xi64>, %{{.*}}: memref<?xi64>, %{{.*}}: memref<?xi64>, %[[ATTEND:.*]]: memref<?x8xi32>, %[[STORE:.*]]: memref<?xi64>, %[[BASE:.*]]: memref<?xi64>, %[[COMPLETE:.*]]: memref<?xi64>) kernel
// CHECK: gpu.thread_id x
// CHECK: %[[T:.*]] = arith.addi
// CHECK: %[[TOKENS:.*]] = memref.dim %[[POS]]
// CHECK: arith.cmpi slt, %[[T]], %[[TOKENS]]
// CHECK: scf.for
// CHECK: memref.store {{.*}}, %[[ATTEND]][%[[T]], %{{.*}}]
// CHECK: memref.store {{.*}}, %[[STORE]][%[[T]]]
// CHECK: memref.store {{.*}}, %[[BASE]][%[[T]]]
// CHECK: memref.store {{.*}}, %[[COMPLETE]][%[[T]]]
// CHECK: gpu.return
// The step function, which is no metadata function, gets no kernel.
// CHECK-NOT: gpu.func @step
func.func @meta(%p: tensor<?xi64>, %s: tensor<?xi64>, %f: tensor<?xi64>, %l: tensor<?xi64>) -> (tensor<?x8xi32>, tensor<?xi64>, tensor<?xi64>, tensor<?xi64>) {
  %a, %st = v4a.step_window %p, %s, %f, %l {window = 8 : i64} : tensor<?xi64> -> tensor<?x8xi32>
  %b, %c = v4a.step_compressed %p, %s {ratio = 4 : i64, slot_rows = 64 : i64} : tensor<?xi64>
  return %a, %st, %b, %c : tensor<?x8xi32>, tensor<?xi64>, tensor<?xi64>, tensor<?xi64>
}
func.func @step(%x: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  %n = v4a.rms_norm %x {eps = 1.0e-06 : f64} : tensor<?x64xbf16>
  return %n : tensor<?x64xbf16>
}

// -----

// Metadata a kernel cannot write: a row that is not a result.
// expected-error @+1 {{'func.func' op metadata reads an argument or writes a value that is not a result: it has no GPU kernel form}}
func.func @partial(%p: tensor<?xi64>, %s: tensor<?xi64>, %f: tensor<?xi64>, %l: tensor<?xi64>) -> tensor<?x8xi32> {
  %a, %st = v4a.step_window %p, %s, %f, %l {window = 8 : i64} : tensor<?xi64> -> tensor<?x8xi32>
  return %a : tensor<?x8xi32>
}
