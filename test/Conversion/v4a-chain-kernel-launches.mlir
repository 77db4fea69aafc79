// RUN: v4a-opt %s -split-input-file -verify-diagnostics -v4a-chain-kernel-launches | FileCheck %s
// RUN: v4a-opt %s -split-input-file -v4a-chain-kernel-launches -v4a-chain-kernel-launches | FileCheck %s

// Every kernel waits for the grids before it, then lets the next one launch,
// before its first memory access; a device function is left alone. Running
// the pass twice changes nothing (the second RUN line).
// CHECK-LABEL: gpu.module @v4a_gpu
// CHECK-LABEL: gpu.func @step_rows0
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// CHECK-NEXT: arith.constant
// CHECK-NEXT: memref.load
// CHECK-NOT: nvvm.griddepcontrol
// CHECK: gpu.return
// CHECK-LABEL: gpu.func @helper
// CHECK-NOT: nvvm.griddepcontrol
// CHECK: gpu.return
// CHECK-LABEL: gpu.func @step_loops1
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// CHECK-NEXT: gpu.barrier
module attributes {gpu.container_module} {
  gpu.module @v4a_gpu {
    gpu.func @step_rows0(%x: memref<4xf32>, %y: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %v = memref.load %x[%c0] : memref<4xf32>
      memref.store %v, %y[%c0] : memref<4xf32>
      gpu.return
    }
    gpu.func @helper(%x: memref<4xf32>) {
      gpu.return
    }
    gpu.func @step_loops1() kernel {
      gpu.barrier
      gpu.return
    }
  }
}

// -----

// A kernel that already starts with the wait keeps its one wait and trigger.
// CHECK-LABEL: gpu.func @chained
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// CHECK-NEXT: gpu.return
module attributes {gpu.container_module} {
  gpu.module @v4a_gpu {
    gpu.func @chained() kernel {
      nvvm.griddepcontrol wait
      nvvm.griddepcontrol launch_dependents
      gpu.return
    }
  }
}
