// RUN: v4a-opt %s -split-input-file -v4a-dequantize-fp8-weights -verify-diagnostics | FileCheck %s
// RUN: v4a-compile %examples/v4-flash.json --emit=planned | v4a-opt -v4a-build-steps -v4a-dequantize-fp8-weights | FileCheck %s --check-prefix=FLASH

// Two fp8 linears of one input share one act_quant; their weights become
// bf16 arguments, the scale arguments go, the products sum per 128-wide
// block. The bf16 linear is left alone.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[X:.*]]: tensor<?x256xbf16> {v4a.bind = "x"}, %[[A:.*]]: tensor<128x256xbf16> {v4a.bind = "a.weight"}, %[[B:.*]]: tensor<64x256xbf16> {v4a.bind = "b.weight"}, %[[C:.*]]: tensor<32x256xbf16> {v4a.bind = "c.weight"})
// CHECK-NEXT: %[[Q:.*]] = v4a.act_quant %[[X]] {block_size = 128 : i64, format = #v4a<quant_format e4m3>, pow2_scale} : tensor<?x256xbf16>
// CHECK-NEXT: v4a.linear %[[Q]], %[[A]] {k_block = 128 : i64} : tensor<?x256xbf16>, tensor<128x256xbf16> -> tensor<?x128xbf16>
// CHECK-NEXT: v4a.linear %[[Q]], %[[B]] {k_block = 128 : i64}
// CHECK-NEXT: v4a.linear %[[X]], %[[C]] :
func.func @step(%x: tensor<?x256xbf16> {v4a.bind = "x"},
                %a: tensor<128x256xf8E4M3FN> {v4a.bind = "a.weight"},
                %as: tensor<1x2xf8E8M0FNU> {v4a.bind = "a.scale"},
                %b: tensor<64x256xf8E4M3FN> {v4a.bind = "b.weight"},
                %bs: tensor<1x2xf8E8M0FNU> {v4a.bind = "b.scale"},
                %c: tensor<32x256xbf16> {v4a.bind = "c.weight"})
    -> (tensor<?x128xbf16>, tensor<?x64xbf16>, tensor<?x32xbf16>)
    attributes {v4a.sched_meta_key = "0_0_1_0"} {
  %0 = v4a.linear %x, %a scale %as : tensor<?x256xbf16>, tensor<128x256xf8E4M3FN>, tensor<1x2xf8E8M0FNU> -> tensor<?x128xbf16>
  %1 = v4a.linear %x, %b scale %bs : tensor<?x256xbf16>, tensor<64x256xf8E4M3FN>, tensor<1x2xf8E8M0FNU> -> tensor<?x64xbf16>
  %2 = v4a.linear %x, %c : tensor<?x256xbf16>, tensor<32x256xbf16> -> tensor<?x32xbf16>
  return %0, %1, %2 : tensor<?x128xbf16>, tensor<?x64xbf16>, tensor<?x32xbf16>
}

// -----

// wo_b leaves the grouped output, which keeps wo_a's product (bf16 already,
// untouched): the act_quant of that product feeds a linear on the bf16
// weight, with k_block.
// CHECK-LABEL: func.func @grouped(
// CHECK-SAME: %[[O:.*]]: tensor<?x4x512xbf16>, %[[WA:.*]]: tensor<128x1024xbf16> {v4a.bind = "wo_a.weight"}, %[[WB:.*]]: tensor<64x128xbf16> {v4a.bind = "wo_b.weight"})
// CHECK-NEXT: %[[LORA:.*]] = v4a.grouped_output %[[O]], %[[WA]] {groups = 2 : i64} : tensor<?x4x512xbf16>, tensor<128x1024xbf16> -> tensor<?x128xbf16>
// CHECK-NEXT: %[[Q:.*]] = v4a.act_quant %[[LORA]] {block_size = 128 : i64, format = #v4a<quant_format e4m3>, pow2_scale} : tensor<?x128xbf16>
// CHECK-NEXT: %[[Y:.*]] = v4a.linear %[[Q]], %[[WB]] {k_block = 128 : i64} : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
// CHECK-NEXT: return %[[Y]]
func.func @grouped(%o: tensor<?x4x512xbf16>,
                   %wa: tensor<128x1024xbf16> {v4a.bind = "wo_a.weight"},
                   %wb: tensor<64x128xf8E4M3FN> {v4a.bind = "wo_b.weight"},
                   %sb: tensor<1x1xf8E8M0FNU> {v4a.bind = "wo_b.scale"})
    -> tensor<?x64xbf16> attributes {v4a.sched_meta_key = "0_0_1_0"} {
  %0 = v4a.grouped_output %o, %wa, %wb scale %sb {groups = 2 : i64} : tensor<?x4x512xbf16>, tensor<128x1024xbf16>, tensor<64x128xf8E4M3FN> scale tensor<1x1xf8E8M0FNU> -> tensor<?x64xbf16>
  return %0 : tensor<?x64xbf16>
}

// -----

// An input width that is not whole 128-wide blocks stays an fp8 product, as
// does one with f32 scales (not powers of two: its dequantized weight would
// round); functions that are not steps are left alone.
// CHECK-LABEL: func.func @partial(
// CHECK: v4a.linear %{{.*}}, %{{.*}} scale %{{.*}} : tensor<?x192xbf16>, tensor<64x192xf8E4M3FN>
// CHECK-LABEL: func.func @f32_scales(
// CHECK: v4a.linear %{{.*}}, %{{.*}} scale %{{.*}} : tensor<?x256xbf16>, tensor<64x256xf8E4M3FN>, tensor<1x2xf32>
// CHECK-LABEL: func.func @not_a_step(
// CHECK: v4a.linear %{{.*}}, %{{.*}} scale
func.func @partial(%x: tensor<?x192xbf16>, %w: tensor<64x192xf8E4M3FN>, %s: tensor<1x2xf8E8M0FNU>) -> tensor<?x64xbf16> attributes {v4a.sched_meta_key = "0_0_1_0"} {
  %0 = v4a.linear %x, %w scale %s : tensor<?x192xbf16>, tensor<64x192xf8E4M3FN>, tensor<1x2xf8E8M0FNU> -> tensor<?x64xbf16>
  return %0 : tensor<?x64xbf16>
}
func.func @f32_scales(%x: tensor<?x256xbf16>, %w: tensor<64x256xf8E4M3FN>, %s: tensor<1x2xf32>) -> tensor<?x64xbf16> attributes {v4a.sched_meta_key = "0_0_1_0"} {
  %0 = v4a.linear %x, %w scale %s : tensor<?x256xbf16>, tensor<64x256xf8E4M3FN>, tensor<1x2xf32> -> tensor<?x64xbf16>
  return %0 : tensor<?x64xbf16>
}
func.func @not_a_step(%x: tensor<?x256xbf16>, %w: tensor<64x256xf8E4M3FN>, %s: tensor<1x2xf8E8M0FNU>) -> tensor<?x64xbf16> {
  %0 = v4a.linear %x, %w scale %s : tensor<?x256xbf16>, tensor<64x256xf8E4M3FN>, tensor<1x2xf8E8M0FNU> -> tensor<?x64xbf16>
  return %0 : tensor<?x64xbf16>
}

// -----

// The weight must be an argument, which the runtime binds dequantized.
func.func @computed_weight(%x: tensor<?x256xbf16>, %w: tensor<64x256xf8E4M3FN>, %s: tensor<1x2xf8E8M0FNU>) -> tensor<?x64xbf16> attributes {v4a.sched_meta_key = "0_0_1_0"} {
  %c = tensor.empty() : tensor<64x256xf8E4M3FN>
  // expected-error @+1 {{needs its fp8 weight and scale as arguments of the step function}}
  %0 = v4a.linear %x, %c scale %s : tensor<?x256xbf16>, tensor<64x256xf8E4M3FN>, tensor<1x2xf8E8M0FNU> -> tensor<?x64xbf16>
  return %0 : tensor<?x64xbf16>
}

// -----

// A weight two products share cannot change its type for one of them.
func.func @shared_weight(%x: tensor<?x256xbf16>, %y: tensor<?x256xbf16>, %w: tensor<64x256xf8E4M3FN>, %s: tensor<1x2xf8E8M0FNU>) -> (tensor<?x64xbf16>, tensor<?x64xbf16>) attributes {v4a.sched_meta_key = "0_0_1_0"} {
  // expected-error @+1 {{shares its fp8 weight or scale with another op}}
  %0 = v4a.linear %x, %w scale %s : tensor<?x256xbf16>, tensor<64x256xf8E4M3FN>, tensor<1x2xf8E8M0FNU> -> tensor<?x64xbf16>
  %1 = v4a.linear %y, %w scale %s : tensor<?x256xbf16>, tensor<64x256xf8E4M3FN>, tensor<1x2xf8E8M0FNU> -> tensor<?x64xbf16>
  return %0, %1 : tensor<?x64xbf16>, tensor<?x64xbf16>
}

// V4-Flash: every fp8 product of the ratio-4 step is a bf16 one over the
// act_quant of its input; no scale argument is left.
// FLASH-LABEL: func.func @step_4_0_1_512(
// FLASH-NOT: f8E8M0FNU
// FLASH: v4a.act_quant %arg0 {block_size = 128 : i64
// FLASH: v4a.linear %{{.*}}, %{{.*}} {k_block = 128 : i64} : tensor<?x4096xbf16>, tensor<1024x4096xbf16>
// wo_b's input is quantized as [T, groups, o_lora] rows.
// FLASH: %[[LORA:.*]] = v4a.grouped_output {{.*}} -> tensor<?x8192xbf16>
// FLASH: %[[ROWS:.*]] = tensor.expand_shape %[[LORA]] {{.*}} into tensor<?x8x1024xbf16>
// FLASH-NEXT: %[[Q:.*]] = v4a.act_quant %[[ROWS]] {{.*}} : tensor<?x8x1024xbf16>
// FLASH-NEXT: %[[FLAT:.*]] = tensor.collapse_shape %[[Q]] {{.*}} into tensor<?x8192xbf16>
// FLASH-NEXT: v4a.linear %[[FLAT]], %{{.*}} {k_block = 128 : i64} : tensor<?x8192xbf16>, tensor<4096x8192xbf16>
// FLASH-LABEL: func.func @step_128_0_1_0(
