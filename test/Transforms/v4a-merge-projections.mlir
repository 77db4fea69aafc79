// RUN: v4a-opt %s -split-input-file -v4a-merge-projections -verify-diagnostics | FileCheck %s
// RUN: v4a-compile %examples/v4-flash.json --emit=planned | v4a-opt -v4a-build-steps -v4a-dequantize-fp8-weights -v4a-fuse -v4a-merge-projections | FileCheck %s --check-prefix=FLASH

// Two products of one input, of mixed result types: one argument bound to
// the stacked weight at the place of the first, one product of f32 sums,
// the bf16 part rounded from them by the split.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[X:.*]]: tensor<?x256xbf16> {v4a.bind = "x"}, %[[AB:.*]]: tensor<192x256xbf16> {v4a.bind = "a.weight+b.weight"}, %[[C:.*]]: tensor<64xbf16> {v4a.bind = "c"})
// CHECK-NEXT: %[[R:.*]]:2 = v4a.fused "merged_linear" (%[[X]], %[[AB]])
// CHECK-NEXT: ^bb0(%[[IX:.*]]: tensor<?x256xbf16>, %[[IW:.*]]: tensor<192x256xbf16>):
// CHECK-NEXT: %[[Y:.*]] = v4a.linear %[[IX]], %[[IW]] {k_block = 128 : i64} : tensor<?x256xbf16>, tensor<192x256xbf16> -> tensor<?x192xf32>
// CHECK-NEXT: %[[P:.*]]:2 = v4a.split_columns %[[Y]] : tensor<?x192xf32> -> tensor<?x128xbf16>, tensor<?x64xf32>
// CHECK-NEXT: v4a.yield %[[P]]#0, %[[P]]#1
func.func @step(%x: tensor<?x256xbf16> {v4a.bind = "x"},
                %a: tensor<128x256xbf16> {v4a.bind = "a.weight"},
                %b: tensor<64x256xbf16> {v4a.bind = "b.weight"},
                %c: tensor<64xbf16> {v4a.bind = "c"})
    -> (tensor<?x128xbf16>, tensor<?x64xf32>)
    attributes {v4a.sched_meta_key = "0_0_1_0"} {
  %0:2 = v4a.fused "merged_linear" (%x, %a, %b) : (tensor<?x256xbf16>, tensor<128x256xbf16>, tensor<64x256xbf16>) -> (tensor<?x128xbf16>, tensor<?x64xf32>) {
  ^bb0(%ix: tensor<?x256xbf16>, %ia: tensor<128x256xbf16>, %ib: tensor<64x256xbf16>):
    %1 = v4a.linear %ix, %ia {k_block = 128 : i64} : tensor<?x256xbf16>, tensor<128x256xbf16> -> tensor<?x128xbf16>
    %2 = v4a.linear %ix, %ib {k_block = 128 : i64} : tensor<?x256xbf16>, tensor<64x256xbf16> -> tensor<?x64xf32>
    v4a.yield %1, %2 : tensor<?x128xbf16>, tensor<?x64xf32>
  }
  return %0#0, %0#1 : tensor<?x128xbf16>, tensor<?x64xf32>
}

// -----

// Parts of one element type: the product has it, and the split hands out
// its columns as they are; such a product may be wider than its input.
// CHECK-LABEL: func.func @one_type(
// CHECK-SAME: tensor<192x64xbf16> {v4a.bind = "a.weight+b.weight"}
// CHECK: %[[Y:.*]] = v4a.linear %{{.*}}, %{{.*}} : tensor<?x64xbf16>, tensor<192x64xbf16> -> tensor<?x192xbf16>
// CHECK-NEXT: v4a.split_columns %[[Y]] : tensor<?x192xbf16> -> tensor<?x128xbf16>, tensor<?x64xbf16>
func.func @one_type(%x: tensor<?x64xbf16> {v4a.bind = "x"},
                    %a: tensor<128x64xbf16> {v4a.bind = "a.weight"},
                    %b: tensor<64x64xbf16> {v4a.bind = "b.weight"})
    -> (tensor<?x128xbf16>, tensor<?x64xbf16>)
    attributes {v4a.sched_meta_key = "0_0_1_0"} {
  %0:2 = v4a.fused "merged_linear" (%x, %a, %b) : (tensor<?x64xbf16>, tensor<128x64xbf16>, tensor<64x64xbf16>) -> (tensor<?x128xbf16>, tensor<?x64xbf16>) {
  ^bb0(%ix: tensor<?x64xbf16>, %ia: tensor<128x64xbf16>, %ib: tensor<64x64xbf16>):
    %1 = v4a.linear %ix, %ia : tensor<?x64xbf16>, tensor<128x64xbf16> -> tensor<?x128xbf16>
    %2 = v4a.linear %ix, %ib : tensor<?x64xbf16>, tensor<64x64xbf16> -> tensor<?x64xbf16>
    v4a.yield %1, %2 : tensor<?x128xbf16>, tensor<?x64xbf16>
  }
  return %0#0, %0#1 : tensor<?x128xbf16>, tensor<?x64xbf16>
}

// -----

// Left as they are: a weight another op also reads; products of mixed
// parts wider than their input (the split would copy them); products of
// different k_block; fp8 products; functions that are not steps.
// CHECK-LABEL: func.func @shared(
// CHECK: v4a.linear %{{.*}}, %{{.*}} : tensor<?x256xbf16>, tensor<128x256xbf16>
// CHECK: v4a.linear %{{.*}}, %{{.*}} : tensor<?x256xbf16>, tensor<64x256xbf16>
// CHECK-NOT: split_columns
// CHECK-LABEL: func.func @wide(
// CHECK-NOT: split_columns
// CHECK-LABEL: func.func @blocks(
// CHECK-NOT: split_columns
// CHECK-LABEL: func.func @not_a_step(
// CHECK-NOT: split_columns
func.func @shared(%x: tensor<?x256xbf16> {v4a.bind = "x"},
                  %a: tensor<128x256xbf16> {v4a.bind = "a.weight"},
                  %b: tensor<64x256xbf16> {v4a.bind = "b.weight"})
    -> (tensor<?x128xbf16>, tensor<?x64xbf16>, tensor<?x64xbf16>)
    attributes {v4a.sched_meta_key = "0_0_1_0"} {
  %0:2 = v4a.fused "merged_linear" (%x, %a, %b) : (tensor<?x256xbf16>, tensor<128x256xbf16>, tensor<64x256xbf16>) -> (tensor<?x128xbf16>, tensor<?x64xbf16>) {
  ^bb0(%ix: tensor<?x256xbf16>, %ia: tensor<128x256xbf16>, %ib: tensor<64x256xbf16>):
    %1 = v4a.linear %ix, %ia : tensor<?x256xbf16>, tensor<128x256xbf16> -> tensor<?x128xbf16>
    %2 = v4a.linear %ix, %ib : tensor<?x256xbf16>, tensor<64x256xbf16> -> tensor<?x64xbf16>
    v4a.yield %1, %2 : tensor<?x128xbf16>, tensor<?x64xbf16>
  }
  %3 = v4a.linear %x, %b : tensor<?x256xbf16>, tensor<64x256xbf16> -> tensor<?x64xbf16>
  return %0#0, %0#1, %3 : tensor<?x128xbf16>, tensor<?x64xbf16>, tensor<?x64xbf16>
}
func.func @wide(%x: tensor<?x64xbf16> {v4a.bind = "x"},
                %a: tensor<128x64xbf16> {v4a.bind = "a.weight"},
                %b: tensor<64x64xbf16> {v4a.bind = "b.weight"})
    -> (tensor<?x128xbf16>, tensor<?x64xf32>)
    attributes {v4a.sched_meta_key = "0_0_1_0"} {
  %0:2 = v4a.fused "merged_linear" (%x, %a, %b) : (tensor<?x64xbf16>, tensor<128x64xbf16>, tensor<64x64xbf16>) -> (tensor<?x128xbf16>, tensor<?x64xf32>) {
  ^bb0(%ix: tensor<?x64xbf16>, %ia: tensor<128x64xbf16>, %ib: tensor<64x64xbf16>):
    %1 = v4a.linear %ix, %ia : tensor<?x64xbf16>, tensor<128x64xbf16> -> tensor<?x128xbf16>
    %2 = v4a.linear %ix, %ib : tensor<?x64xbf16>, tensor<64x64xbf16> -> tensor<?x64xf32>
    v4a.yield %1, %2 : tensor<?x128xbf16>, tensor<?x64xf32>
  }
  return %0#0, %0#1 : tensor<?x128xbf16>, tensor<?x64xf32>
}
func.func @blocks(%x: tensor<?x256xbf16> {v4a.bind = "x"},
                  %a: tensor<128x256xbf16> {v4a.bind = "a.weight"},
                  %b: tensor<64x256xbf16> {v4a.bind = "b.weight"})
    -> (tensor<?x128xbf16>, tensor<?x64xbf16>)
    attributes {v4a.sched_meta_key = "0_0_1_0"} {
  %0:2 = v4a.fused "merged_linear" (%x, %a, %b) : (tensor<?x256xbf16>, tensor<128x256xbf16>, tensor<64x256xbf16>) -> (tensor<?x128xbf16>, tensor<?x64xbf16>) {
  ^bb0(%ix: tensor<?x256xbf16>, %ia: tensor<128x256xbf16>, %ib: tensor<64x256xbf16>):
    %1 = v4a.linear %ix, %ia {k_block = 128 : i64} : tensor<?x256xbf16>, tensor<128x256xbf16> -> tensor<?x128xbf16>
    %2 = v4a.linear %ix, %ib : tensor<?x256xbf16>, tensor<64x256xbf16> -> tensor<?x64xbf16>
    v4a.yield %1, %2 : tensor<?x128xbf16>, tensor<?x64xbf16>
  }
  return %0#0, %0#1 : tensor<?x128xbf16>, tensor<?x64xbf16>
}
func.func @not_a_step(%x: tensor<?x256xbf16>, %a: tensor<128x256xbf16>, %b: tensor<64x256xbf16>)
    -> (tensor<?x128xbf16>, tensor<?x64xbf16>) {
  %0:2 = v4a.fused "merged_linear" (%x, %a, %b) : (tensor<?x256xbf16>, tensor<128x256xbf16>, tensor<64x256xbf16>) -> (tensor<?x128xbf16>, tensor<?x64xbf16>) {
  ^bb0(%ix: tensor<?x256xbf16>, %ia: tensor<128x256xbf16>, %ib: tensor<64x256xbf16>):
    %1 = v4a.linear %ix, %ia : tensor<?x256xbf16>, tensor<128x256xbf16> -> tensor<?x128xbf16>
    %2 = v4a.linear %ix, %ib : tensor<?x256xbf16>, tensor<64x256xbf16> -> tensor<?x64xbf16>
    v4a.yield %1, %2 : tensor<?x128xbf16>, tensor<?x64xbf16>
  }
  return %0#0, %0#1 : tensor<?x128xbf16>, tensor<?x64xbf16>
}

// -----

func.func @unbound(%x: tensor<?x256xbf16> {v4a.bind = "x"},
                   %a: tensor<128x256xbf16> {v4a.bind = "a.weight"},
                   %b: tensor<64x256xbf16>)
    -> (tensor<?x128xbf16>, tensor<?x64xbf16>)
    attributes {v4a.sched_meta_key = "0_0_1_0"} {
  // expected-error @+1 {{merges a weight argument without v4a.bind (argument 2): the runtime could not stack its rows}}
  %0:2 = v4a.fused "merged_linear" (%x, %a, %b) : (tensor<?x256xbf16>, tensor<128x256xbf16>, tensor<64x256xbf16>) -> (tensor<?x128xbf16>, tensor<?x64xbf16>) {
  ^bb0(%ix: tensor<?x256xbf16>, %ia: tensor<128x256xbf16>, %ib: tensor<64x256xbf16>):
    %1 = v4a.linear %ix, %ia : tensor<?x256xbf16>, tensor<128x256xbf16> -> tensor<?x128xbf16>
    %2 = v4a.linear %ix, %ib : tensor<?x256xbf16>, tensor<64x256xbf16> -> tensor<?x64xbf16>
    v4a.yield %1, %2 : tensor<?x128xbf16>, tensor<?x64xbf16>
  }
  return %0#0, %0#1 : tensor<?x128xbf16>, tensor<?x64xbf16>
}

// FLASH-LABEL: func.func @step_4_0_1_512(
// FLASH-SAME: tensor<1536x4096xbf16> {v4a.bind = "wq_a.weight+wkv.weight"}
// FLASH-SAME: tensor<40960x1024xbf16> {v4a.bind = "wq_b.weight+indexer.wq_b.weight"}
// FLASH-SAME: tensor<2624x4096xbf16> {v4a.bind = "compressor.wkv.weight+compressor.wgate.weight+indexer.compressor.wkv.weight+indexer.compressor.wgate.weight+indexer.weights_proj.weight"}
// FLASH: v4a.split_columns %{{.*}} : tensor<?x1536xbf16> -> tensor<?x1024xbf16>, tensor<?x512xbf16>
// FLASH: v4a.linear %{{.*}}, %{{.*}} {k_block = 128 : i64} : tensor<?x1024xbf16>, tensor<40960x1024xbf16> -> tensor<?x40960xbf16>
// FLASH: v4a.split_columns %{{.*}} : tensor<?x40960xbf16> -> tensor<?x32768xbf16>, tensor<?x8192xbf16>
// FLASH: v4a.split_columns %{{.*}} : tensor<?x2624xf32> -> tensor<?x1024xf32>, tensor<?x1024xf32>, tensor<?x256xf32>, tensor<?x256xf32>, tensor<?x64xbf16>
