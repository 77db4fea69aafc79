// RUN: v4a-opt %s -split-input-file -verify-diagnostics -v4a-lower-to-gpu=indexer-e4m3=1 | FileCheck %s
// RUN: not v4a-opt %s -split-input-file -v4a-lower-to-gpu="indexer-family=0 indexer-e4m3=1" 2>&1 | FileCheck %s --check-prefix=NO-FAMILY

// The e4m3 form belongs to the family: without it the option is an error.
// NO-FAMILY: error: indexer-e4m3 is a form of the indexer family; indexer-family=0 has none

// With indexer-e4m3, MXFP4 keys of 128 dims run on e4m3 MMAs. A first kernel makes each
// token's query image once (e4m3 rows scaled per head, in the keys'
// fragment K order, and the bf16 weight tile of the head sum: a thread per
// 16 bytes of a head's row, 16 lanes a head sharing its largest value by
// four xor shuffles, two words of codes a thread); the scoring
// kernel copies it, writes its decode tables, and decodes each key row's
// codes with byte permutes of the table of its block's distance from the
// row's largest scale (one 8-byte load of the tables a row) into the A
// fragments of four m64n8k32 e4m3 MMAs. relu(dot) rounded to bf16 is the A
// of the head sum's m64n8k16 MMA (4 heads padded to 8, then to one k16
// step with zero words); a tile's head sums are issued before the next
// tile's dot products, and waited for (one group left in flight) before
// its scores are offered.
// CHECK-LABEL: func.func @indexer_topk_mxfp4
// CHECK: %[[IMAGES:.*]] = memref.alloc(%{{.*}}) : memref<?xi8>
// CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c1024{{.*}} function(@indexer_topk_mxfp4_indexer3)
// CHECK: llvm.load {{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xi32>
// CHECK-COUNT-4: gpu.shuffle  xor
// CHECK-COUNT-2: llvm.store {{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<1>
// CHECK-NOT: llvm.store {{.*}} : i32, !llvm.ptr<1>
// CHECK-COUNT-8: llvm.store {{.*}} {alignment = 2 : i64} : i16, !llvm.ptr<1>
// CHECK: gpu.launch {{.*}} function(@indexer_topk_mxfp4_indexer0)
// CHECK: nvvm.cp.async.shared.global {{.*}}, 16, cache = cg
// CHECK: llvm.store {{.*}} : i32, !llvm.ptr<3>
// CHECK: nvvm.cp.async.wait.group 0
// CHECK-NEXT: nvvm.fence.proxy
// CHECK-NEXT: gpu.barrier
// CHECK: nvvm.cp.async.wait.group 3
// CHECK: llvm.load {{.*}} {alignment = 8 : i64} : !llvm.ptr<3> -> vector<2xi32>
// CHECK-COUNT-16: nvvm.prmt <default>
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3
// CHECK: scf.for {{.*}} iter_args
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.cp.async.wait.group 3
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-2: nvvm.convert.f32x2.to.bf16x2 {{.*}} {relu = true, rnd = #nvvm.fp_rnd_mode<rn>}
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: llvm.inline_asm {{.*}}wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: scf.yield
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: gpu.launch {{.*}} function(@indexer_topk_mxfp4_indexer1)
func.func @indexer_topk_mxfp4(%q: tensor<?x4x128xbf16>,
    %keys: !v4a.kv_cache<index_mxfp4, dim = 128, page_size = 64>,
    %w: tensor<?x4xf32>, %pos: tensor<?xi64>, %base: tensor<?xi64>,
    %ctx: tensor<1xi64>) -> tensor<?x16xi32> {
  %s = v4a.cache_indexer_score %q, %keys, %w, %pos, %base bound %ctx
      {ratio = 4 : i64}
      : tensor<?x4x128xbf16>,
        !v4a.kv_cache<index_mxfp4, dim = 128, page_size = 64>,
        tensor<?x4xf32>, tensor<?xi64> -> tensor<?x?xf32>
  %i = v4a.topk %s {k = 16 : i64} : tensor<?x?xf32> -> tensor<?x16xi32>
  return %i : tensor<?x16xi32>
}

// -----

// Keys the e4m3 form does not multiply are an error, not a silent bf16 path.
func.func @indexer_topk_bf16_keys(%q: tensor<?x4x128xbf16>,
    %keys: !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>,
    %w: tensor<?x4xf32>, %pos: tensor<?xi64>, %base: tensor<?xi64>,
    %ctx: tensor<1xi64>) -> tensor<?x16xi32> {
  // expected-error @+1 {{indexer-e4m3 multiplies MXFP4 index keys of 128 dims; these keys are index_bf16 rows of 128 dims}}
  %s = v4a.cache_indexer_score %q, %keys, %w, %pos, %base bound %ctx
      {ratio = 4 : i64}
      : tensor<?x4x128xbf16>,
        !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>,
        tensor<?x4xf32>, tensor<?xi64> -> tensor<?x?xf32>
  %i = v4a.topk %s {k = 16 : i64} : tensor<?x?xf32> -> tensor<?x16xi32>
  return %i : tensor<?x16xi32>
}

// -----

func.func @indexer_topk_fp8_keys(%q: tensor<?x4x128xbf16>,
    %keys: !v4a.kv_cache<index_fp8, dim = 128, page_size = 64>,
    %w: tensor<?x4xf32>, %pos: tensor<?xi64>, %base: tensor<?xi64>,
    %ctx: tensor<1xi64>) -> tensor<?x16xi32> {
  // expected-error @+1 {{these keys are index_fp8 rows of 128 dims}}
  %s = v4a.cache_indexer_score %q, %keys, %w, %pos, %base bound %ctx
      {ratio = 4 : i64}
      : tensor<?x4x128xbf16>,
        !v4a.kv_cache<index_fp8, dim = 128, page_size = 64>,
        tensor<?x4xf32>, tensor<?xi64> -> tensor<?x?xf32>
  %i = v4a.topk %s {k = 16 : i64} : tensor<?x?xf32> -> tensor<?x16xi32>
  return %i : tensor<?x16xi32>
}
