// RUN: v4a-opt %s -split-input-file -v4a-elide-result-copies -verify-diagnostics | FileCheck %s

// The result's buffer becomes the output argument: what wrote it writes the
// output, and the copy goes.
// CHECK-LABEL: func.func @in_place(
// CHECK-SAME: %[[X:.*]]: memref<?x64xbf16>, %[[OUT:.*]]: memref<?x64xbf16>)
// CHECK-NOT: memref.alloc
// CHECK: call @produce(%[[X]], %[[OUT]])
// CHECK-NOT: memref.copy
// CHECK: return
func.func private @produce(memref<?x64xbf16>, memref<?x64xbf16>)
func.func @in_place(%x: memref<?x64xbf16>, %out: memref<?x64xbf16>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?x64xbf16>
  %a = memref.alloc(%n) : memref<?x64xbf16>
  call @produce(%x, %a) : (memref<?x64xbf16>, memref<?x64xbf16>) -> ()
  memref.copy %a, %out : memref<?x64xbf16> to memref<?x64xbf16>
  return
}

// -----

// A buffer read after the copy keeps its copy: the output would be read
// where the buffer was.
// CHECK-LABEL: func.func @read_after(
// CHECK: %[[A:.*]] = memref.alloc
// CHECK: memref.copy %[[A]], %{{.*}}
// CHECK: call @consume(%[[A]])
func.func private @produce(memref<?xi64>)
func.func private @consume(memref<?xi64>)
func.func @read_after(%n: index, %out: memref<?xi64>) {
  %a = memref.alloc(%n) : memref<?xi64>
  call @produce(%a) : (memref<?xi64>) -> ()
  memref.copy %a, %out : memref<?xi64> to memref<?xi64>
  call @consume(%a) : (memref<?xi64>) -> ()
  return
}

// -----

// An output argument used elsewhere keeps its copy.
// CHECK-LABEL: func.func @output_used(
// CHECK: %[[A:.*]] = memref.alloc
// CHECK: memref.copy %[[A]], %{{.*}}
func.func private @produce(memref<?xi64>, memref<?xi64>)
func.func @output_used(%n: index, %out: memref<?xi64>) {
  %a = memref.alloc(%n) : memref<?xi64>
  call @produce(%a, %out) : (memref<?xi64>, memref<?xi64>) -> ()
  memref.copy %a, %out : memref<?xi64> to memref<?xi64>
  return
}

// -----

// Only an allocation of the output's type becomes it; a copy from an
// argument stays a copy.
// CHECK-LABEL: func.func @other_sources(
// CHECK: %[[A:.*]] = memref.alloc(%{{.*}}) : memref<?xi64>
// CHECK: memref.copy %[[A]], %{{.*}} : memref<?xi64> to memref<?xi64, strided<[?], offset: ?>>
// CHECK: memref.copy %arg0, %{{.*}} : memref<?xi64> to memref<?xi64>
func.func private @produce(memref<?xi64>)
func.func @other_sources(%in: memref<?xi64>, %out: memref<?xi64, strided<[?], offset: ?>>, %out2: memref<?xi64>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %in, %c0 : memref<?xi64>
  %a = memref.alloc(%n) : memref<?xi64>
  call @produce(%a) : (memref<?xi64>) -> ()
  memref.copy %a, %out : memref<?xi64> to memref<?xi64, strided<[?], offset: ?>>
  memref.copy %in, %out2 : memref<?xi64> to memref<?xi64>
  return
}

// -----

// One buffer copied to two outputs: the last copy's output becomes the
// buffer, the first output is copied from it.
// CHECK-LABEL: func.func @two_outputs(
// CHECK-SAME: %{{.*}}: index, %[[OUT1:.*]]: memref<?xi64>, %[[OUT2:.*]]: memref<?xi64>)
// CHECK-NOT: memref.alloc
// CHECK: call @produce(%[[OUT2]])
// CHECK: memref.copy %[[OUT2]], %[[OUT1]]
// CHECK-NEXT: return
func.func private @produce(memref<?xi64>)
func.func @two_outputs(%n: index, %out1: memref<?xi64>, %out2: memref<?xi64>) {
  %a = memref.alloc(%n) : memref<?xi64>
  call @produce(%a) : (memref<?xi64>) -> ()
  memref.copy %a, %out1 : memref<?xi64> to memref<?xi64>
  memref.copy %a, %out2 : memref<?xi64> to memref<?xi64>
  return
}

// -----

// A view of the buffer used after the copy counts as the buffer's use.
// CHECK-LABEL: func.func @view_after(
// CHECK: %[[A:.*]] = memref.alloc
// CHECK: memref.copy %[[A]], %{{.*}}
// CHECK: call @consume(
func.func private @produce(memref<?xi64>)
func.func private @consume(memref<?xi64, strided<[?], offset: ?>>)
func.func @view_after(%n: index, %out: memref<?xi64>) {
  %a = memref.alloc(%n) : memref<?xi64>
  %v = memref.cast %a : memref<?xi64> to memref<?xi64, strided<[?], offset: ?>>
  call @produce(%a) : (memref<?xi64>) -> ()
  memref.copy %a, %out : memref<?xi64> to memref<?xi64>
  call @consume(%v) : (memref<?xi64, strided<[?], offset: ?>>) -> ()
  return
}
