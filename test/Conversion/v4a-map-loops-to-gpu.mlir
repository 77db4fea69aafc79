// RUN: v4a-opt %s -split-input-file -verify-diagnostics -v4a-map-loops-to-gpu | FileCheck %s

// A token loop holding a parallel loop: a grid over the tokens (grid-stride),
// the nested loop over the block's threads, the sequential writer on thread
// 0 between barriers, the allocation a view of a per-block host buffer.
// CHECK: module attributes {gpu.container_module}
// CHECK-LABEL: func.func @block_per_token
// CHECK: %[[SCRATCH:.*]] = memref.alloc(%{{.*}}) : memref<?xi8>
// CHECK: gpu.launch blocks(%[[BX:[a-z0-9_]+]], %{{.*}}, %{{.*}}) in (%[[GX:[a-z0-9_]+]] = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) threads(%[[TX:[a-z0-9_]+]], %{{.*}}, %{{.*}}) in (%[[NT:[a-z0-9_]+]] = %c128{{.*}} module(@v4a_gpu) function(@block_per_token_loops0)
// CHECK: scf.for %{{.*}} = %[[BX]] to %{{.*}} step %[[GX]]
// CHECK: %[[VIEW:.*]] = memref.view %[[SCRATCH]][%{{.*}}][] : memref<?xi8> to memref<8xf32>
// CHECK-NEXT: gpu.barrier
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[TX]], %{{.*}} : index
// CHECK: scf.if %[[FIRST]] {
// CHECK: memref.store %{{.*}}, %[[VIEW]]
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK: scf.for %{{.*}} = %[[TX]] to %{{.*}} step %[[NT]]
// CHECK: memref.load %[[VIEW]]
// CHECK-NEXT: memref.store
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: }
// CHECK-NEXT: gpu.terminator
func.func @block_per_token(%x: memref<?x8xf32>, %y: memref<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %t = memref.dim %x, %c0 : memref<?x8xf32>
  scf.parallel (%i) = (%c0) to (%t) step (%c1) {
    %s = memref.alloc() : memref<8xf32>
    scf.for %j = %c0 to %c8 step %c1 {
      %v = memref.load %x[%i, %j] : memref<?x8xf32>
      memref.store %v, %s[%j] : memref<8xf32>
    }
    scf.parallel (%j) = (%c0) to (%c8) step (%c1) {
      %v = memref.load %s[%j] : memref<8xf32>
      memref.store %v, %y[%i, %j] : memref<?x8xf32>
      scf.reduce
    }
    scf.reduce
  }
  return
}

// -----

// Independent iterations without nested parallelism: one per thread of the
// whole grid, over the linearized space; the host copy waits for it. The
// inner extent, known at compile time, is a constant in the kernel, and the
// never-negative linear index is split by unsigned division.
// CHECK-LABEL: func.func @elementwise
// CHECK-NOT: arith.subi
// CHECK: %[[CEIL:.*]] = arith.ceildivsi %{{.*}}, %c128
// CHECK: %[[BLOCKS:.*]] = arith.minsi %[[CEIL]], %c1048576
// CHECK: gpu.launch blocks(%[[BX:[a-z0-9_]+]], %{{.*}}, %{{.*}}) in (%[[GX:[a-z0-9_]+]] = %[[BLOCKS]], {{.*}} threads(%[[TX:[a-z0-9_]+]], %{{.*}}, %{{.*}}) in (%[[NT:[a-z0-9_]+]] = {{.*}} function(@elementwise_loops0)
// CHECK: %[[B:.*]] = arith.muli %{{.*}}, %[[NT]]
// CHECK: %[[G:.*]] = arith.addi %[[B]], %[[TX]]
// CHECK: %[[STRIDE:.*]] = arith.muli %[[GX]], %[[NT]]
// CHECK: scf.for %[[L:.*]] = %[[G]] to %{{.*}} step %[[STRIDE]]
// CHECK: arith.remui %[[L]], %[[C64:c64[_0-9]*]]
// CHECK: arith.divui %[[L]], %[[C64]]
// CHECK: memref.store
// CHECK-NOT: gpu.barrier
// CHECK: gpu.terminator
// CHECK: memref.copy
func.func @elementwise(%x: memref<?x64xf32>, %y: memref<?x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %t = memref.dim %x, %c0 : memref<?x64xf32>
  %tmp = memref.alloc(%t) : memref<?x64xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%t, %c64) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<?x64xf32>
    %w = arith.addf %v, %v : f32
    memref.store %w, %tmp[%i, %j] : memref<?x64xf32>
    scf.reduce
  }
  memref.copy %tmp, %y : memref<?x64xf32> to memref<?x64xf32>
  return
}

// -----

// Sequential work at the top level (a loop carrying state through the
// tokens): one block, thread 0. A float computed on the host side is copied
// into the kernel rather than passed.
// CHECK-LABEL: func.func @sequential
// CHECK: gpu.launch blocks({{.*}}) in (%{{[a-z0-9_]+}} = %[[ONE:c1[_0-9]*]], %{{[a-z0-9_]+}} = %[[ONE]], %{{[a-z0-9_]+}} = %[[ONE]]) threads({{.*}} function(@sequential_loops0)
// CHECK: arith.sitofp
// CHECK: scf.if
// CHECK: scf.for
// CHECK: memref.store
func.func @sequential(%x: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %t = memref.dim %x, %c0 : memref<?xf32>
  %ti = arith.index_cast %t : index to i64
  %tf = arith.sitofp %ti : i64 to f32
  scf.for %i = %c1 to %t step %c1 {
    %prev = arith.subi %i, %c1 : index
    %a = memref.load %x[%prev] : memref<?xf32>
    %b = memref.load %x[%i] : memref<?xf32>
    %s = arith.addf %a, %b : f32
    %d = arith.divf %s, %tf : f32
    memref.store %d, %x[%i] : memref<?xf32>
  }
  return
}

// -----

// A size that depends on data: the host reads the device's result back
// after the kernel that computes it, then allocates.
// CHECK-LABEL: func.func @read_back
// CHECK: gpu.launch
// CHECK: gpu.terminator
// CHECK: %[[N:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<1xi64>
// CHECK: %[[NI:.*]] = arith.index_cast %[[N]]
// CHECK: memref.alloc(%[[NI]])
func.func @read_back(%p: memref<?xi64>) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %t = memref.dim %p, %c0 : memref<?xi64>
  %m = scf.for %i = %c0 to %t step %c1 iter_args(%a = %c0) -> (index) {
    %v = memref.load %p[%i] : memref<?xi64>
    %vi = arith.index_cast %v : i64 to index
    %b = arith.maxsi %a, %vi : index
    scf.yield %b : index
  }
  %cell = memref.alloc() : memref<1xi64>
  %mi = arith.index_cast %m : index to i64
  memref.store %mi, %cell[%c0] : memref<1xi64>
  %n = memref.load %cell[%c0] : memref<1xi64>
  %ni = arith.index_cast %n : i64 to index
  %out = memref.alloc(%ni) : memref<?xf32>
  return %out : memref<?xf32>
}

// -----

func.func @reduction(%x: memref<?xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %t = memref.dim %x, %c0 : memref<?xf32>
  // expected-error @+1 {{v4a-map-loops-to-gpu: parallel reductions}}
  %sum = scf.parallel (%i) = (%c0) to (%t) step (%c1) init (%zero) -> f32 {
    %v = memref.load %x[%i] : memref<?xf32>
    scf.reduce(%v : f32) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.addf %a, %b : f32
      scf.reduce.return %s : f32
    }
  }
  return %sum : f32
}

// -----

func.func @value_to_host(%x: memref<?xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %t = memref.dim %x, %c0 : memref<?xf32>
  // expected-error @+1 {{a value of a kernel (scf.for) is used on the host by func.return}}
  %sum = scf.for %i = %c0 to %t step %c1 iter_args(%a = %zero) -> f32 {
    %v = memref.load %x[%i] : memref<?xf32>
    %s = arith.addf %a, %v : f32
    scf.yield %s : f32
  }
  return %sum : f32
}

// -----

func.func @scratch_from_data(%x: memref<?xi64>, %y: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %t = memref.dim %x, %c0 : memref<?xi64>
  scf.parallel (%i) = (%c0) to (%t) step (%c1) {
    %n = memref.load %x[%i] : memref<?xi64>
    %ni = arith.index_cast %n : i64 to index
    // expected-error @+1 {{v4a-map-loops-to-gpu: a scratch size that the host cannot compute before the launch}}
    %s = memref.alloc(%ni) : memref<?xf32>
    scf.parallel (%j) = (%c0) to (%ni) step (%c1) {
      %v = memref.load %s[%j] : memref<?xf32>
      memref.store %v, %y[%i] : memref<?xf32>
      scf.reduce
    }
    scf.reduce
  }
  return
}

// -----

// A sequential loop that writes and yields a value the parallel loop after
// it reads (a head loop of one iteration folded away leaves such loops in a
// token's body): thread 0 runs it and stores the value in the block's
// scratch; every thread loads it after the barrier.
// CHECK-LABEL: func.func @writes_and_yields
// CHECK: gpu.launch
// CHECK: %[[SLOT:.*]] = memref.view %{{.*}}[%{{.*}}][] : memref<?xi8> to memref<1xf32>
// CHECK: scf.if %{{.*}} {
// CHECK: %[[LAST:.*]] = scf.for {{.*}} -> (f32)
// CHECK: memref.store %[[LAST]], %[[SLOT]][%{{.*}}] : memref<1xf32>
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: %[[SHARED:.*]] = memref.load %[[SLOT]][%{{.*}}] : memref<1xf32>
// CHECK: scf.for
// CHECK: memref.store %[[SHARED]], %{{.*}} : memref<?x8xf32>
func.func @writes_and_yields(%x: memref<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %t = memref.dim %x, %c0 : memref<?x8xf32>
  scf.parallel (%i) = (%c0) to (%t) step (%c1) {
    %last = scf.for %j = %c0 to %c8 step %c1 iter_args(%a = %zero) -> f32 {
      memref.store %a, %x[%i, %j] : memref<?x8xf32>
      %v = memref.load %x[%i, %j] : memref<?x8xf32>
      scf.yield %v : f32
    }
    scf.parallel (%j) = (%c0) to (%c8) step (%c1) {
      memref.store %last, %x[%i, %j] : memref<?x8xf32>
      scf.reduce
    }
    scf.reduce
  }
  return
}

// -----

func.func @writes_and_yields_a_buffer(%x: memref<?x8xf32>, %y: memref<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %t = memref.dim %x, %c0 : memref<?x8xf32>
  scf.parallel (%i) = (%c0) to (%t) step (%c1) {
    // expected-error @+1 {{v4a-map-loops-to-gpu: a sequential op in a kernel writes memory and yields a value that is not a scalar}}
    %last = scf.for %j = %c0 to %c8 step %c1 iter_args(%m = %x) -> memref<?x8xf32> {
      memref.store %zero, %m[%i, %j] : memref<?x8xf32>
      scf.yield %y : memref<?x8xf32>
    }
    scf.parallel (%j) = (%c0) to (%c8) step (%c1) {
      memref.store %zero, %last[%i, %j] : memref<?x8xf32>
      scf.reduce
    }
    scf.reduce
  }
  return
}

// -----

// A library GEMM call stays on the host, in order: the kernel before it
// (its input) launches first, the loop after it (its fallback) next.
// CHECK-LABEL: func.func @library_call
// CHECK: gpu.launch
// CHECK: gpu.terminator
// CHECK: call @v4a_gemm_bf16
// CHECK-NOT: gpu.terminator
// CHECK: gpu.launch
func.func private @v4a_gemm_bf16(memref<?x?xbf16>, memref<?x?xbf16>, memref<?x?xbf16>, index, index, index, index, index, index, index, index, index, index)
func.func @library_call(%x: memref<?x?xbf16>, %w: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : bf16
  %t = memref.dim %x, %c0 : memref<?x?xbf16>
  %k = memref.dim %x, %c1 : memref<?x?xbf16>
  %m = memref.dim %w, %c0 : memref<?x?xbf16>
  scf.parallel (%i) = (%c0) to (%t) step (%c1) {
    memref.store %zero, %x[%i, %c0] : memref<?x?xbf16>
    scf.reduce
  }
  call @v4a_gemm_bf16(%w, %x, %y, %m, %t, %k, %k, %k, %m, %c1, %c0, %c0, %c0) : (memref<?x?xbf16>, memref<?x?xbf16>, memref<?x?xbf16>, index, index, index, index, index, index, index, index, index, index) -> ()
  scf.parallel (%i) = (%c0) to (%t) step (%c1) {
    memref.store %zero, %y[%i, %c0] : memref<?x?xbf16>
    scf.reduce
  }
  return
}
