// RUN: v4a-opt %s -split-input-file -verify-diagnostics -v4a-lower-to-gpu | FileCheck %s

// A kernel region of row ops becomes one row kernel: a team of 8 lanes per
// 64-wide head vector, 16 rows per 128-thread block over ceil(T * H / 16)
// blocks; the row read and written once in 16-byte accesses, its sum a
// shuffle butterfly over the team, the rope frequencies a constant table.
// A block's 16 rows span 4 tokens (4 heads each), so no workgroup table:
// the lanes of a row's team compute its angles a pair a lane and the rope
// lanes fetch theirs by shuffles.
// CHECK-LABEL: func.func @norm_rope
// CHECK: %[[X:.*]] = bufferization.to_buffer %arg0 read_only : tensor<?x4x64xbf16> to memref<?x4x64xbf16>
// CHECK: %[[OUT:.*]] = memref.alloc(%{{.*}}) : memref<?x4x64xbf16>
// CHECK: %[[ROWS:.*]] = arith.muli
// CHECK: %[[GROUPS:.*]] = arith.ceildivsi %[[ROWS]], %c16
// CHECK: %[[BLOCKS:.*]] = arith.minsi %[[GROUPS]], %c1048576
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %[[BLOCKS]], {{.*}} threads({{.*}}) in (%{{.*}} = %c128{{.*}} module(@v4a_gpu) function(@norm_rope_rows0) {
// CHECK-NOT: gpu.barrier
// CHECK: memref.get_global @v4a_rope_freqs
// CHECK: scf.for
// CHECK: vector.load %[[X]][{{.*}}] {alignment = 16 : i64} : memref<?x4x64xbf16>, vector<8xbf16>
// CHECK-COUNT-3: gpu.shuffle  xor
// CHECK-NOT: gpu.shuffle
// CHECK: math.sqrt
// CHECK: math.cos
// CHECK-NEXT: math.sin
// CHECK-NOT: math.cos
// CHECK: gpu.shuffle  idx
// CHECK: gpu.shuffle  idx
// CHECK: vector.store %{{.*}}, %[[OUT]][{{.*}}] {alignment = 16 : i64} : memref<?x4x64xbf16>, vector<8xbf16>
// CHECK: gpu.terminator
// CHECK: %[[Y:.*]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK: return %[[Y]]
// CHECK-NOT: v4a.
// CHECK: memref.global "private" constant @v4a_rope_freqs : memref<8xf32>
func.func @norm_rope(%x: tensor<?x4x64xbf16>, %pos: tensor<?xi64>) -> tensor<?x4x64xbf16> {
  %q = v4a.fused "rms_norm_rope" (%x, %pos) : (tensor<?x4x64xbf16>, tensor<?xi64>) -> tensor<?x4x64xbf16> {
  ^bb0(%a: tensor<?x4x64xbf16>, %p: tensor<?xi64>):
    %n = v4a.rms_norm %a {eps = 1.0e-06 : f64} : tensor<?x4x64xbf16>
    %r = v4a.rope %n, %p {rope_dim = 16 : i64, theta = 1.0e+04 : f64} : tensor<?x4x64xbf16>, tensor<?xi64>
    v4a.yield %r : tensor<?x4x64xbf16>
  }
  return %q : tensor<?x4x64xbf16>
}

// -----

// Rows wider than a warp: one 512-lane team per block; the warps' partial
// sums meet in workgroup memory between barriers.
// CHECK-LABEL: func.func @wide_norm
// CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c512{{.*}} module(@v4a_gpu) function(@wide_norm_rows0) workgroup(%[[PARTIALS:.*]] : memref<16xf32, #gpu.address_space<workgroup>>)
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<?x4096xbf16>, vector<8xbf16>
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: gpu.barrier
// CHECK: memref.store %{{.*}}, %[[PARTIALS]]
// CHECK: gpu.barrier
// CHECK-COUNT-16: memref.load %[[PARTIALS]]
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<4096xbf16>, vector<8xbf16>
func.func @wide_norm(%x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>) -> tensor<?x4096xbf16> {
  %y = v4a.rms_norm %x weight %w {eps = 1.0e-06 : f64} : tensor<?x4096xbf16>, tensor<4096xbf16>
  return %y : tensor<?x4096xbf16>
}

// -----

// A cache store closing the chain writes the kernel's rows into the cache:
// bf16 index rows through a [rows, 128] view of the cache's bytes, at the row
// ids. A group of rows none of which is kept (every thread loads the
// group's eight ids first) skips its loads, the chain and its shuffles; in
// a group that keeps one, a row of id -1 is neither read nor stored: its id
// guards the row's load. act_quant's block maximum is a butterfly over the
// block's 8 lanes; the Hadamard transform of 128 elements exchanges halves
// with the lanes 1, 2, 4 and 8 apart, each exchanged value taken in by one
// fused multiply-add with the lane's sign (+1 keeps the sum, -1 the
// difference).
// CHECK-LABEL: func.func @hadamard_quant_store
// CHECK: %[[BYTES:.*]] = builtin.unrealized_conversion_cast %arg2 : !v4a.kv_cache<index_bf16, dim = 128, page_size = 64> to memref<?xi8>
// CHECK-NOT: memref.alloc
// CHECK: gpu.launch {{.*}} function(@hadamard_quant_store_rows0)
// CHECK: %[[VIEW:.*]] = memref.view %[[BYTES]]{{.*}} to memref<?x128xbf16>
// CHECK-COUNT-8: arith.cmpi sge
// CHECK: %[[ANY:.*]] = arith.ori
// CHECK-NEXT: scf.if %[[ANY]] {
// CHECK: %[[ID:.*]] = arith.index_cast
// CHECK: %[[KEPT:.*]] = arith.cmpi sge, %[[ID]]
// CHECK: %[[READ:.*]] = arith.andi %{{.*}}, %[[KEPT]]
// CHECK: scf.if %[[READ]]
// CHECK-NEXT: vector.load
// CHECK: %[[SIGN:.*]] = arith.select %{{.*}}, %cst{{.*}}, %cst{{.*}} : f32
// CHECK: %[[OTHER:.*]], %{{.*}} = gpu.shuffle  xor
// CHECK-NEXT: math.fma %{{.*}}, %[[SIGN]], %[[OTHER]] : f32
// CHECK-COUNT-31: gpu.shuffle  xor
// CHECK-COUNT-3: gpu.shuffle  xor
// CHECK-NOT: gpu.shuffle
// CHECK: scf.if %[[READ]]
// CHECK: vector.store %{{.*}}, %[[VIEW]][%[[ID]], %{{.*}}] {alignment = 16 : i64} : memref<?x128xbf16>, vector<8xbf16>
// CHECK: gpu.terminator
// CHECK-NOT: v4a.cache_store
func.func @hadamard_quant_store(%k: tensor<?x128xbf16>, %ids: tensor<?xi64>, %cache: !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>) {
  v4a.fused "hadamard_act_quant_cache_store" (%k, %ids, %cache) : (tensor<?x128xbf16>, tensor<?xi64>, !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>) -> () {
  ^bb0(%a: tensor<?x128xbf16>, %i: tensor<?xi64>, %c: !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>):
    %h = v4a.hadamard %a : tensor<?x128xbf16>
    %q = v4a.act_quant %h {format = #v4a<quant_format e4m3>, block_size = 64 : i64, pow2_scale} : tensor<?x128xbf16>
    v4a.cache_store %c, %q, %i : !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>, tensor<?x128xbf16>, tensor<?xi64>
    v4a.yield
  }
  return
}

// -----

// A cache store alone is a kernel of its own; fp8 MODEL1 rows: 8 e4m3 bytes
// per thread of the 448 quantized dims with the ue8m0 scale of each 64-dim
// block (a max over its 8 lanes) from the block's first lane, the pad byte
// from the row's first lane, 16 bytes of bf16 per thread of the rope dims.
// With no op before the store, the row's load is not guarded by its id (the
// id is loaded after it, beside it in flight), and no group is skipped.
// CHECK-LABEL: func.func @model1_store
// CHECK: gpu.launch {{.*}} function(@model1_store_rows0)
// CHECK-NOT: arith.ori
// CHECK: vector.load
// CHECK: memref.load %{{.*}} : memref<?xi64>
// CHECK-COUNT-3: gpu.shuffle  xor
// CHECK-NOT: gpu.shuffle
// CHECK: vector.store %{{.*}} {alignment = 8 : i64} : memref<?xi8>, vector<8xi8>
// CHECK: memref.store %{{.*}} : memref<?xi8>
// CHECK: memref.store %{{.*}} : memref<?xi8>
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<?xi8>, vector<16xi8>
// CHECK: gpu.terminator
// CHECK-NOT: v4a.cache_store
func.func @model1_store(%kv: tensor<?x512xbf16>, %ids: tensor<?xi64>, %cache: !v4a.kv_cache<fp8_model1, dim = 512, page_size = 64>) {
  v4a.cache_store %cache, %kv, %ids : !v4a.kv_cache<fp8_model1, dim = 512, page_size = 64>, tensor<?x512xbf16>, tensor<?xi64>
  return
}

// -----

// Index keys packed: MXFP4 rows take 4 bytes of e2m1 pairs per thread and
// the ue8m0 scale of each 32-dim block (a max over its 4 lanes) from the
// block's first lane; fp8 rows 8 e4m3 bytes per thread and the row's f32
// scale (a max over the row's 16 lanes) as 4 bytes from its first lane.
// CHECK-LABEL: func.func @index_key_stores
// CHECK: gpu.launch {{.*}} function(@index_key_stores_rows0)
// CHECK-COUNT-2: gpu.shuffle  xor
// CHECK-NOT: gpu.shuffle
// CHECK: vector.store %{{.*}} {alignment = 4 : i64} : memref<?xi8>, vector<4xi8>
// CHECK: memref.store %{{.*}} : memref<?xi8>
// CHECK: gpu.terminator
// CHECK: gpu.launch {{.*}} function(@index_key_stores_rows1)
// CHECK-COUNT-4: gpu.shuffle  xor
// CHECK-NOT: gpu.shuffle
// CHECK: vector.store %{{.*}} {alignment = 8 : i64} : memref<?xi8>, vector<8xi8>
// CHECK: vector.store %{{.*}} {alignment = 4 : i64} : memref<?xi8>, vector<4xi8>
// CHECK: gpu.terminator
// CHECK-NOT: v4a.cache_store
func.func @index_key_stores(%k: tensor<?x128xbf16>, %ids: tensor<?xi64>, %fp4: !v4a.kv_cache<index_mxfp4, dim = 128, page_size = 64>, %fp8: !v4a.kv_cache<index_fp8, dim = 128, page_size = 64>) {
  v4a.cache_store %fp4, %k, %ids : !v4a.kv_cache<index_mxfp4, dim = 128, page_size = 64>, tensor<?x128xbf16>, tensor<?xi64>
  v4a.cache_store %fp8, %k, %ids : !v4a.kv_cache<index_fp8, dim = 128, page_size = 64>, tensor<?x128xbf16>, tensor<?xi64>
  return
}

// -----

// Parts of a merged bf16 product are read in place: each chain's kernel
// loads row t of the product at its part's first column (the heads view at
// 192 + h * 64), and the split goes away with its last reader. A part of
// another element type than the product's is not a window: its split stays.
// CHECK-LABEL: func.func @columns_in_place
// CHECK-NOT: v4a.split_columns
// CHECK: %[[P:.*]] = bufferization.to_buffer %arg0 read_only : tensor<?x448xbf16> to memref<?x448xbf16>
// CHECK: function(@columns_in_place_rows0)
// CHECK: vector.load %[[P]][{{.*}}] {alignment = 16 : i64} : memref<?x448xbf16>, vector<8xbf16>
// CHECK: %[[P2:.*]] = bufferization.to_buffer %arg0 read_only : tensor<?x448xbf16> to memref<?x448xbf16>
// CHECK: function(@columns_in_place_rows1)
// CHECK: %[[B:.*]] = arith.addi %{{.*}}, %c192{{(_[0-9]+)?}} : index
// CHECK: %[[H:.*]] = arith.muli %{{.*}}, %c64{{(_[0-9]+)?}} : index
// CHECK: %[[C:.*]] = arith.addi %[[B]], %[[H]] : index
// CHECK: vector.load %[[P2]][%{{.*}}, %[[C]]] {alignment = 16 : i64} : memref<?x448xbf16>, vector<8xbf16>
// CHECK-NOT: v4a.split_columns
// CHECK-LABEL: func.func @mixed_parts
// CHECK: v4a.split_columns
func.func @columns_in_place(%y: tensor<?x448xbf16>, %w: tensor<192xbf16>)
    -> (tensor<?x192xbf16>, tensor<?x4x64xbf16>) {
  %a, %b = v4a.split_columns %y : tensor<?x448xbf16> -> tensor<?x192xbf16>, tensor<?x256xbf16>
  %n = v4a.rms_norm %a weight %w {eps = 1.0e-06 : f64} : tensor<?x192xbf16>, tensor<192xbf16>
  %c0 = arith.constant 0 : index
  %t = tensor.dim %b, %c0 : tensor<?x256xbf16>
  %h = tensor.expand_shape %b [[0], [1, 2]] output_shape [%t, 4, 64] : tensor<?x256xbf16> into tensor<?x4x64xbf16>
  %m = v4a.rms_norm %h {eps = 1.0e-06 : f64} : tensor<?x4x64xbf16>
  return %n, %m : tensor<?x192xbf16>, tensor<?x4x64xbf16>
}
func.func @mixed_parts(%y: tensor<?x192xf32>) -> tensor<?x128xbf16> {
  %a, %b = v4a.split_columns %y : tensor<?x192xf32> -> tensor<?x128xbf16>, tensor<?x64xf32>
  %n = v4a.rms_norm %a {eps = 1.0e-06 : f64} : tensor<?x128xbf16>
  return %n : tensor<?x128xbf16>
}

// -----

// What the family does not cover stays: rows whose width is not a multiple
// of 8, and Hadamard transforms wider than a warp's 256 elements.
// CHECK-LABEL: func.func @uncovered
// CHECK-NOT: gpu.launch
// CHECK: v4a.rms_norm %arg0
// CHECK: v4a.hadamard %arg1
func.func @uncovered(%x: tensor<?x12xbf16>, %k: tensor<?x512xbf16>) -> (tensor<?x12xbf16>, tensor<?x512xbf16>) {
  %y = v4a.rms_norm %x {eps = 1.0e-06 : f64} : tensor<?x12xbf16>
  %h = v4a.hadamard %k : tensor<?x512xbf16>
  return %y, %h : tensor<?x12xbf16>, tensor<?x512xbf16>
}

// -----

// Head vectors of 512 and more: a team holds two rows at once (both loads
// in flight before either row is computed), 4 rows per block of two teams.
// The block's 4 rows are heads of one token (8 heads): its first 32
// threads compute the token's cos and sin of each pair once into workgroup
// memory, between two barriers, while the loads are in flight; the rope
// lanes read them there.
// CHECK-LABEL: func.func @two_rows_per_team
// CHECK: arith.ceildivsi %{{.*}}, %c4
// CHECK: gpu.launch {{.*}} function(@two_rows_per_team_rows0) workgroup(%[[ANGLES:.*]] : memref<64xf32, #gpu.address_space<workgroup>>)
// CHECK-COUNT-2: vector.load %{{.*}} {alignment = 16 : i64} : memref<?x8x512xbf16>, vector<8xbf16>
// CHECK: arith.divui %{{.*}}, %c8
// CHECK: gpu.barrier
// CHECK: arith.cmpi ult, %{{.*}}, %c32
// CHECK: math.cos
// CHECK: math.sin
// CHECK: memref.store %{{.*}}, %[[ANGLES]]
// CHECK: memref.store %{{.*}}, %[[ANGLES]]
// CHECK: gpu.barrier
// CHECK-NOT: math.cos
// CHECK: memref.load %[[ANGLES]]
// CHECK: arith.negf
// CHECK-NOT: math.sin
// CHECK-COUNT-2: vector.store %{{.*}} {alignment = 16 : i64} : memref<?x8x512xbf16>, vector<8xbf16>
func.func @two_rows_per_team(%q: tensor<?x8x512xbf16>, %pos: tensor<?xi64>) -> tensor<?x8x512xbf16> {
  %r = v4a.rope %q, %pos {rope_dim = 64 : i64, theta = 1.0e+04 : f64, inverse} : tensor<?x8x512xbf16>, tensor<?xi64>
  return %r : tensor<?x8x512xbf16>
}

// -----

// cache_attention with bf16 rows: the attention family, one block per
// (token, group of 64 heads) of two math warpgroups and a copy warpgroup
// (384 threads) with 211.1 KiB of dynamic shared memory at width 512 (a
// spare swizzle atom for alignment). The copy warpgroup gives up registers
// and gathers each stage's halves by cp.async behind split barriers; each
// math warpgroup takes registers, computes Q.K^T of its stage as 2 x 16
// m64n64k16 MMAs of K-major operands (a half at a time, each once it has
// landed), hands its block's maxima to the other, and runs P.V as 4
// m64n256k16 MMAs reading both stages MN-major, all in the 128-byte
// swizzle layout.
// CHECK-LABEL: func.func @attention
// CHECK: %[[BLOCKS:.*]] = arith.muli %{{.*}}, %c2
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %[[BLOCKS]], {{.*}} threads({{.*}}) in (%{{.*}} = %c384{{.*}} dynamic_shared_memory_size %c216144_i32 module(@v4a_gpu) function(@attention_attention0)
// CHECK: gpu.dynamic_shared_memory
// CHECK-COUNT-8: nvvm.mbarrier.init
// CHECK: gpu.barrier
// CHECK: nvvm.setmaxregister decrease 72
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.cp.async.shared.global {{.*}}, 16, cache = cg
// CHECK: nvvm.mbarrier.arrive
// CHECK: nvvm.cp.async.mbarrier.arrive {{.*}} {noinc = true}
// CHECK: nvvm.setmaxregister increase 216
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-16: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, {{.*}}], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-COUNT-16: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: math.exp2
// CHECK: nvvm.barrier.arrive
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 256, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
// CHECK: gpu.terminator
// CHECK-NOT: v4a.cache_attention
func.func @attention(%q: tensor<?x128x512xbf16>, %kv: tensor<?x512xbf16>,
    %win: !v4a.kv_cache<bf16, dim = 512, page_size = 128>, %wrows: tensor<?x128xi32>,
    %cmp: !v4a.kv_cache<bf16, dim = 512, page_size = 64>, %crows: tensor<?x?xi32>,
    %base: tensor<?xi64>, %sink: tensor<128xf32>) -> tensor<?x128x512xbf16> {
  %o = v4a.cache_attention %q, %kv window %win[%wrows]
      compressed %cmp : !v4a.kv_cache<bf16, dim = 512, page_size = 64>
          [%crows : tensor<?x?xi32>] base %base : tensor<?xi64>
      sink %sink {scale = 0.0441941738 : f64}
      : tensor<?x128x512xbf16>, tensor<?x512xbf16>,
        !v4a.kv_cache<bf16, dim = 512, page_size = 128>, tensor<?x128xi32>,
        tensor<128xf32> -> tensor<?x128x512xbf16>
  return %o : tensor<?x128x512xbf16>
}

// -----

// The inverse RoPE of the attention's output is its epilogue: in the
// prologue the first 32 math threads write the token's angles (a pair
// each, from its position and the frequency table) into shared memory, and
// in the epilogue only the tile that reaches the last 64 dims turns pairs
// (bf16 values in f32, the conjugate of the angle read back); no row
// kernel follows. Each warp stages its fragments as bf16 pairs in the
// query tile (stmatrix, four 8 x 8 matrices at a time) and stores them as
// 16-byte chunks: 16 a lane at width 512 (16 heads x 32 chunks a warp).
// CHECK-LABEL: func.func @attention_inverse_rope
// CHECK: gpu.launch {{.*}} function(@attention_inverse_rope_attention0)
// CHECK: %[[STORED:.*]] = memref.view {{.*}} to memref<64xf32, #gpu.address_space<workgroup>>
// CHECK: memref.get_global @v4a_rope_freqs
// CHECK: arith.sitofp %{{.*}} : i64 to f32
// CHECK: math.cos
// CHECK-NEXT: math.sin
// CHECK: memref.store {{.*}}, %[[STORED]]
// CHECK-NOT: math.cos
// CHECK: %[[ANGLES:.*]] = memref.view {{.*}} to memref<64xf32, #gpu.address_space<workgroup>>
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: memref.load %[[ANGLES]]
// CHECK: memref.load %[[ANGLES]]
// CHECK-NEXT: arith.negf
// CHECK: nvvm.stmatrix {{.*}} : !llvm.ptr<3>, i32, i32, i32, i32
// CHECK: } else {
// CHECK-NOT: math.cos
// CHECK: nvvm.stmatrix
// CHECK: nvvm.bar.warp.sync
// CHECK-COUNT-16: vector.store {{.*}} {alignment = 16 : i64} : memref<?x64x512xbf16>, vector<8xbf16>
// CHECK-NOT: vector.store
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK-NOT: v4a.rope
// CHECK: return
func.func @attention_inverse_rope(%q: tensor<?x64x512xbf16>, %kv: tensor<?x512xbf16>,
    %win: !v4a.kv_cache<bf16, dim = 512, page_size = 128>, %wrows: tensor<?x128xi32>,
    %sink: tensor<64xf32>, %pos: tensor<?xi64>) -> tensor<?x64x512xbf16> {
  %o = v4a.cache_attention %q, %kv window %win[%wrows] sink %sink
      {scale = 0.0441941738 : f64}
      : tensor<?x64x512xbf16>, tensor<?x512xbf16>,
        !v4a.kv_cache<bf16, dim = 512, page_size = 128>, tensor<?x128xi32>,
        tensor<64xf32> -> tensor<?x64x512xbf16>
  %r = v4a.rope %o, %pos {inverse, rope_dim = 64 : i64, theta = 1.000000e+04 : f64}
      : tensor<?x64x512xbf16>, tensor<?xi64>
  return %r : tensor<?x64x512xbf16>
}

// -----

// The head norm and rope of the query (in a fused region, as v4a-fuse
// leaves them) are the attention's prologue: the math warpgroups copy q
// before them into the query tile as they copy a query without them, the
// first 32 math threads write the token's angles (a pair each) into the
// exchange area; after the copies and a barrier of the 256 math threads,
// one loop over a warp's rows (four a trip, every load first): lane l
// holds chunks l and l + 32 of a row, sums each chunk's squares over the
// warp (the row family's two warps' butterflies) and adds the two in
// order, normalizes the row, turns the rope pairs of its second chunk and
// stores the bf16 chunks in place. No barrier inside the prologue's loop
// and no row kernel before it.
// CHECK-LABEL: func.func @attention_query_norm
// CHECK-NOT: gpu.launch
// CHECK: gpu.launch {{.*}} function(@attention_query_norm_attention0)
// CHECK: nvvm.setmaxregister increase
// CHECK: nvvm.cp.async.shared.global
// CHECK: memref.get_global @v4a_rope_freqs
// CHECK: math.cos
// CHECK-NEXT: math.sin
// CHECK: memref.store {{.*}} : memref<256xf32, #gpu.address_space<workgroup>>
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: nvvm.barrier id = {{.*}} number_of_threads = %c256
// CHECK: memref.load {{.*}} : memref<256xf32, #gpu.address_space<workgroup>>
// CHECK: scf.for {{.*}} to %c2{{(_[0-9]+)?}} step
// CHECK-COUNT-8: llvm.load {{.*}} : !llvm.ptr<3> -> vector<8xbf16>
// CHECK-COUNT-10: gpu.shuffle xor
// CHECK: math.sqrt
// CHECK: llvm.store {{.*}} : vector<8xbf16>, !llvm.ptr<3>
// CHECK-NOT: nvvm.barrier
// CHECK: scf.yield
// CHECK: nvvm.barrier id = {{.*}} number_of_threads = %c256
// CHECK: nvvm.wgmma.mma_async
// CHECK: gpu.terminator
// CHECK-NOT: v4a.rms_norm
// CHECK-NOT: v4a.rope
// CHECK: return
func.func @attention_query_norm(%q: tensor<?x64x512xbf16>, %kv: tensor<?x512xbf16>,
    %win: !v4a.kv_cache<bf16, dim = 512, page_size = 128>, %wrows: tensor<?x128xi32>,
    %sink: tensor<64xf32>, %pos: tensor<?xi64>) -> tensor<?x64x512xbf16> {
  %qr = v4a.fused "rms_norm_rope" (%q, %pos)
      : (tensor<?x64x512xbf16>, tensor<?xi64>) -> tensor<?x64x512xbf16> {
  ^bb0(%x: tensor<?x64x512xbf16>, %p: tensor<?xi64>):
    %n = v4a.rms_norm %x {eps = 1.0e-06 : f64} : tensor<?x64x512xbf16>
    %r = v4a.rope %n, %p {rope_dim = 64 : i64, theta = 1.000000e+04 : f64}
        : tensor<?x64x512xbf16>, tensor<?xi64>
    v4a.yield %r : tensor<?x64x512xbf16>
  }
  %o = v4a.cache_attention %qr, %kv window %win[%wrows] sink %sink
      {scale = 0.0441941738 : f64}
      : tensor<?x64x512xbf16>, tensor<?x512xbf16>,
        !v4a.kv_cache<bf16, dim = 512, page_size = 128>, tensor<?x128xi32>,
        tensor<64xf32> -> tensor<?x64x512xbf16>
  return %o : tensor<?x64x512xbf16>
}

// -----

// A query that is columns of a merged product (as the ratio-4 layers' wq_b
// merged with the indexer's) is read in place by the prologue: row t of
// the product at the part's first column + h * 512; the split goes away.
// CHECK-LABEL: func.func @attention_query_columns
// CHECK-NOT: v4a.split_columns
// CHECK: %[[P:.*]] = bufferization.to_buffer %arg0 read_only : tensor<?x33280xbf16> to memref<?x33280xbf16>
// CHECK-NOT: function(@attention_query_columns_rows
// CHECK: function(@attention_query_columns_attention0)
// CHECK: memref.extract_aligned_pointer_as_index %[[P]]
// CHECK: nvvm.setmaxregister increase
// CHECK: %[[ROW:.*]] = arith.muli %{{.*}}, %c33280
// CHECK: %[[HEAD:.*]] = arith.muli %{{.*}}, %c512
// CHECK: %[[COLUMN:.*]] = arith.addi %c512{{.*}}, %[[HEAD]]
// CHECK: arith.addi %[[ROW]], %[[COLUMN]]
// CHECK: nvvm.cp.async.shared.global
// CHECK-NOT: v4a.split_columns
// CHECK: return
func.func @attention_query_columns(%y: tensor<?x33280xbf16>, %kv: tensor<?x512xbf16>,
    %win: !v4a.kv_cache<bf16, dim = 512, page_size = 128>, %wrows: tensor<?x128xi32>,
    %sink: tensor<64xf32>, %pos: tensor<?xi64>) -> tensor<?x64x512xbf16> {
  %a, %b = v4a.split_columns %y : tensor<?x33280xbf16> -> tensor<?x512xbf16>, tensor<?x32768xbf16>
  %c0 = arith.constant 0 : index
  %t = tensor.dim %b, %c0 : tensor<?x32768xbf16>
  %q = tensor.expand_shape %b [[0], [1, 2]] output_shape [%t, 64, 512] : tensor<?x32768xbf16> into tensor<?x64x512xbf16>
  %n = v4a.rms_norm %q {eps = 1.0e-06 : f64} : tensor<?x64x512xbf16>
  %r = v4a.rope %n, %pos {rope_dim = 64 : i64, theta = 1.000000e+04 : f64}
      : tensor<?x64x512xbf16>, tensor<?xi64>
  %o = v4a.cache_attention %r, %kv window %win[%wrows] sink %sink
      {scale = 0.0441941738 : f64}
      : tensor<?x64x512xbf16>, tensor<?x512xbf16>,
        !v4a.kv_cache<bf16, dim = 512, page_size = 128>, tensor<?x128xi32>,
        tensor<64xf32> -> tensor<?x64x512xbf16>
  return %o : tensor<?x64x512xbf16>
}

// -----

// A query whose normed rows are read elsewhere too, or whose norm has a
// weight, keeps its row kernel.
// CHECK-LABEL: func.func @attention_query_kept
// CHECK: function(@attention_query_kept_rows0)
// CHECK: function(@attention_query_kept_rows1)
// CHECK: function(@attention_query_kept_attention0)
// CHECK: nvvm.cp.async.shared.global
// CHECK: function(@attention_query_kept_attention1)
// CHECK: nvvm.cp.async.shared.global
func.func @attention_query_kept(%q: tensor<?x64x512xbf16>, %kv: tensor<?x512xbf16>,
    %win: !v4a.kv_cache<bf16, dim = 512, page_size = 128>, %wrows: tensor<?x128xi32>,
    %sink: tensor<64xf32>, %pos: tensor<?xi64>, %w: tensor<512xbf16>)
    -> (tensor<?x64x512xbf16>, tensor<?x64x512xbf16>, tensor<?x64x512xbf16>) {
  %n = v4a.rms_norm %q {eps = 1.0e-06 : f64} : tensor<?x64x512xbf16>
  %r = v4a.rope %n, %pos {rope_dim = 64 : i64, theta = 1.000000e+04 : f64}
      : tensor<?x64x512xbf16>, tensor<?xi64>
  %nw = v4a.rms_norm %q weight %w {eps = 1.0e-06 : f64}
      : tensor<?x64x512xbf16>, tensor<512xbf16>
  %rw = v4a.rope %nw, %pos {rope_dim = 64 : i64, theta = 1.000000e+04 : f64}
      : tensor<?x64x512xbf16>, tensor<?xi64>
  %o = v4a.cache_attention %r, %kv window %win[%wrows] sink %sink
      {scale = 0.0441941738 : f64}
      : tensor<?x64x512xbf16>, tensor<?x512xbf16>,
        !v4a.kv_cache<bf16, dim = 512, page_size = 128>, tensor<?x128xi32>,
        tensor<64xf32> -> tensor<?x64x512xbf16>
  %ow = v4a.cache_attention %rw, %kv window %win[%wrows] sink %sink
      {scale = 0.0441941738 : f64}
      : tensor<?x64x512xbf16>, tensor<?x512xbf16>,
        !v4a.kv_cache<bf16, dim = 512, page_size = 128>, tensor<?x128xi32>,
        tensor<64xf32> -> tensor<?x64x512xbf16>
  return %o, %r, %ow : tensor<?x64x512xbf16>, tensor<?x64x512xbf16>, tensor<?x64x512xbf16>
}

// -----

// An output read elsewhere too keeps its own inverse RoPE (a row kernel).
// CHECK-LABEL: func.func @attention_output_kept
// CHECK: function(@attention_output_kept_attention0)
// CHECK-NOT: math.cos
// CHECK: gpu.terminator
// CHECK: function(@attention_output_kept_rows0)
func.func @attention_output_kept(%q: tensor<?x64x512xbf16>, %kv: tensor<?x512xbf16>,
    %win: !v4a.kv_cache<bf16, dim = 512, page_size = 128>, %wrows: tensor<?x128xi32>,
    %sink: tensor<64xf32>, %pos: tensor<?xi64>)
    -> (tensor<?x64x512xbf16>, tensor<?x64x512xbf16>) {
  %o = v4a.cache_attention %q, %kv window %win[%wrows] sink %sink
      {scale = 0.0441941738 : f64}
      : tensor<?x64x512xbf16>, tensor<?x512xbf16>,
        !v4a.kv_cache<bf16, dim = 512, page_size = 128>, tensor<?x128xi32>,
        tensor<64xf32> -> tensor<?x64x512xbf16>
  %r = v4a.rope %o, %pos {inverse, rope_dim = 64 : i64, theta = 1.000000e+04 : f64}
      : tensor<?x64x512xbf16>, tensor<?xi64>
  return %r, %o : tensor<?x64x512xbf16>, tensor<?x64x512xbf16>
}

// -----

// fp8 MODEL1 rows (the window's and the compressed cache's, as a packed
// layer has them) are the family's too, with two copy warpgroups of 40
// registers (512 threads; P.V as two MMAs of N 128, which ptxas assembles
// at the 128 registers a thread holds at entry): 1 KiB more shared memory
// for the slots' scales and 16 bytes for the bits of their bf16 rows, full
// barriers of one arrival per copy thread. The slot table's writer copies
// its row's 8 scale bytes (an 8-byte cp.async through L1); a copy thread
// copies the 16 e4m3 bytes of a chunk pair into the place of the pair's
// first chunk by one 16-byte cp.async (a stage with a bf16 row takes the
// same passes with a choice per row), waits for a half's group while the
// next is in flight, the slots' owners' scale copies behind a barrier of
// the copy warpgroups, and dequantizes: shifts and masks into bf16 fields,
// two bf16 multiplications (2^120, the scale), two 16-byte stores, a proxy
// fence before the arrival.
// CHECK-LABEL: func.func @attention_fp8_rows
// CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c512{{.*}} dynamic_shared_memory_size %c217184_i32 module(@v4a_gpu) function(@attention_fp8_rows_attention0)
// Full and empty barriers of stage 0's halves, then stage 1's.
// CHECK: nvvm.mbarrier.init %{{.*}}, %c256_i32{{(_[0-9]+)?}} :
// CHECK: nvvm.mbarrier.init %{{.*}}, %c128_i32{{(_[0-9]+)?}} :
// CHECK: nvvm.mbarrier.init %{{.*}}, %c256_i32{{(_[0-9]+)?}} :
// CHECK: nvvm.mbarrier.init %{{.*}}, %c256_i32{{(_[0-9]+)?}} :
// CHECK: nvvm.mbarrier.init %{{.*}}, %c256_i32{{(_[0-9]+)?}} :
// CHECK: nvvm.mbarrier.init %{{.*}}, %c256_i32{{(_[0-9]+)?}} :
// CHECK: nvvm.mbarrier.init %{{.*}}, %c256_i32{{(_[0-9]+)?}} :
// CHECK: nvvm.mbarrier.init %{{.*}}, %c128_i32{{(_[0-9]+)?}} :
// CHECK: nvvm.setmaxregister decrease 40
// CHECK: nvvm.cp.async.shared.global {{.*}}, 8, cache = ca
// CHECK: nvvm.barrier id = %c5_i32{{.*}} number_of_threads = %c256_i32
// CHECK: nvvm.cp.async.shared.global {{.*}}, 16, cache = cg
// CHECK: nvvm.cp.async.commit.group
// CHECK: nvvm.cp.async.wait.group 2
// CHECK: nvvm.barrier id = %c5_i32{{.*}} number_of_threads = %c256_i32
// CHECK: } else {
// CHECK: llvm.load {{.*}} : !llvm.ptr<3> -> vector<4xi32>
// CHECK-COUNT-8: arith.mulf {{.*}} : vector<2xbf16>
// CHECK: llvm.store {{.*}} : vector<4xi32>, !llvm.ptr<3>
// CHECK-COUNT-8: arith.mulf {{.*}} : vector<2xbf16>
// CHECK: llvm.store {{.*}} : vector<4xi32>, !llvm.ptr<3>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK: nvvm.mbarrier.arrive
// CHECK: nvvm.cp.async.wait.group 1
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: nvvm.setmaxregister increase 216
// CHECK-COUNT-8: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
// CHECK-NOT: v4a.cache_attention
func.func @attention_fp8_rows(%q: tensor<?x64x512xbf16>, %kv: tensor<?x512xbf16>,
    %win: !v4a.kv_cache<fp8_model1, dim = 512, page_size = 128>, %wrows: tensor<?x128xi32>,
    %cmp: !v4a.kv_cache<fp8_model1, dim = 512, page_size = 64>, %crows: tensor<?x512xi32>,
    %base: tensor<?xi64>, %sink: tensor<64xf32>) -> tensor<?x64x512xbf16> {
  %o = v4a.cache_attention %q, %kv window %win[%wrows]
      compressed %cmp : !v4a.kv_cache<fp8_model1, dim = 512, page_size = 64>
          [%crows : tensor<?x512xi32>] base %base : tensor<?xi64>
      sink %sink {scale = 0.0441941738 : f64}
      : tensor<?x64x512xbf16>, tensor<?x512xbf16>,
        !v4a.kv_cache<fp8_model1, dim = 512, page_size = 128>, tensor<?x128xi32>,
        tensor<64xf32> -> tensor<?x64x512xbf16>
  return %o : tensor<?x64x512xbf16>
}

// -----

// A layer without top-k attends to every compressed row its tokens see:
// the copy warpgroups number slot j of the compressed part themselves, j
// when j < (position + 1) / ratio and -1 past it, and no [tokens, rows]
// table is written. Its slots are the host's bound over the ratio.
// CHECK-LABEL: func.func @attention_all_visible
// CHECK-NOT: v4a.visible_rows
// CHECK: %[[BOUND:.*]] = memref.load %{{.*}}[%c0{{.*}}] : memref<1xi64
// CHECK: arith.divsi %{{.*}}, %c128
// CHECK: gpu.launch {{.*}} function(@attention_all_visible_attention0)
// CHECK: nvvm.setmaxregister decrease 72
// CHECK: %[[POS:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<?xi64>
// CHECK: arith.index_cast %[[POS]]
// CHECK: %[[SEEN:.*]] = arith.divsi %{{.*}}, %c128
// CHECK: arith.cmpi slt, %{{.*}}, %[[SEEN]] : index
// CHECK-NEXT: arith.index_cast %{{.*}} : index to i32
// CHECK-NEXT: arith.select %{{.*}}, %{{.*}}, %c-1_i32
// CHECK-NOT: memref<?x?xi32>
// CHECK: nvvm.setmaxregister increase 216
// CHECK-NOT: v4a.visible_rows
func.func @attention_all_visible(%q: tensor<?x64x512xbf16>, %kv: tensor<?x512xbf16>,
    %win: !v4a.kv_cache<bf16, dim = 512, page_size = 128>, %wrows: tensor<?x128xi32>,
    %cmp: !v4a.kv_cache<bf16, dim = 512, page_size = 64>, %pos: tensor<?xi64>,
    %ctx: tensor<1xi64>, %base: tensor<?xi64>, %sink: tensor<64xf32>)
    -> tensor<?x64x512xbf16> {
  %crows = v4a.visible_rows %pos bound %ctx {ratio = 128 : i64}
      : tensor<?xi64> -> tensor<?x?xi32>
  %o = v4a.cache_attention %q, %kv window %win[%wrows]
      compressed %cmp : !v4a.kv_cache<bf16, dim = 512, page_size = 64>
          [%crows : tensor<?x?xi32>] base %base : tensor<?xi64>
      sink %sink {scale = 0.0441941738 : f64}
      : tensor<?x64x512xbf16>, tensor<?x512xbf16>,
        !v4a.kv_cache<bf16, dim = 512, page_size = 128>, tensor<?x128xi32>,
        tensor<64xf32> -> tensor<?x64x512xbf16>
  return %o : tensor<?x64x512xbf16>
}

// -----

// At head width 384 each math warpgroup's half of O is N 192 (96
// registers): with two copy warpgroups it stays one MMA per K step, whose
// V descriptor starts at a swizzle atom.
// CHECK-LABEL: func.func @attention_fp8_rows_384
// CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c512{{.*}} module(@v4a_gpu) function(@attention_fp8_rows_384_attention0)
// CHECK: nvvm.setmaxregister decrease 40
// CHECK: nvvm.setmaxregister increase 216
// CHECK-NOT: n = 96
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 192, k = 16>
// CHECK-NOT: n = 96
// CHECK: return
func.func @attention_fp8_rows_384(%q: tensor<?x64x384xbf16>, %kv: tensor<?x384xbf16>,
    %win: !v4a.kv_cache<fp8_model1, dim = 384, page_size = 128>, %wrows: tensor<?x128xi32>,
    %cmp: !v4a.kv_cache<fp8_model1, dim = 384, page_size = 64>, %crows: tensor<?x512xi32>,
    %base: tensor<?xi64>, %sink: tensor<64xf32>) -> tensor<?x64x384xbf16> {
  %o = v4a.cache_attention %q, %kv window %win[%wrows]
      compressed %cmp : !v4a.kv_cache<fp8_model1, dim = 384, page_size = 64>
          [%crows : tensor<?x512xi32>] base %base : tensor<?xi64>
      sink %sink {scale = 0.0510310363 : f64}
      : tensor<?x64x384xbf16>, tensor<?x384xbf16>,
        !v4a.kv_cache<fp8_model1, dim = 384, page_size = 128>, tensor<?x128xi32>,
        tensor<64xf32> -> tensor<?x64x384xbf16>
  return %o : tensor<?x64x384xbf16>
}

// -----

// An indexer's scores feeding a top-k: no [T, rows] score matrix. A
// warpgroup per (token, split) scores 64 keys per m64n8k16 wgmma chain
// (4 heads padded to 8, head width 128: 8 K steps) from a ring of 4 key
// stages (3 tiles in flight while one is scored), sums each key's heads
// from the registers (two xor shuffles for each of a thread's two keys)
// and streams the scores through a shared-memory top-k. Splits: enough
// blocks to fill the chip, each of at least 256 rows. Two merges, one of
// whose grids is empty: up to 4 lists, the rank merge (the lists copied to
// shared memory 8 bytes a copy, then binary searches: no selection, no
// atomics); more, the sampled merge, which weighs samples of the sorted
// lists (weights and keys per bin, one histogram each) to a floor and
// raises the selection's threshold to it.
// CHECK-LABEL: func.func @indexer_topk
// CHECK: %[[CTX:.*]] = memref.load %{{.*}}[%c0{{.*}}] : memref<1xi64
// CHECK: %[[PICKS:.*]] = memref.alloc(%{{.*}}) : memref<?x16xi32>
// CHECK: %[[PARTIAL:.*]] = memref.alloc(%{{.*}}) : memref<?xi64>
// CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c128{{.*}} dynamic_shared_memory_size {{.*}} function(@indexer_topk_indexer0)
// CHECK: nvvm.cp.async.shared.global
// CHECK-COUNT-3: nvvm.cp.async.commit.group
// CHECK: scf.for
// CHECK: nvvm.cp.async.commit.group
// CHECK-NEXT: nvvm.cp.async.wait.group 3
// CHECK-COUNT-8: nvvm.wgmma.mma_async
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-4: gpu.shuffle  xor
// CHECK: memref.atomic_rmw addi
// CHECK: gpu.shuffle  up
// CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c512{{.*}} function(@indexer_topk_indexer1)
// CHECK: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 8, cache =  ca
// CHECK: nvvm.cp.async.wait.group 0
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: memref.atomic_rmw
// CHECK: memref.store %c-1_i32{{.*}}, %[[PICKS]]
// CHECK: gpu.launch {{.*}} function(@indexer_topk_indexer2)
// CHECK: memref.load %[[PARTIAL]]
// CHECK: memref.atomic_rmw addi %{{[0-9]+}}, %{{.*}}[%[[BIN:.*]]] :
// CHECK: memref.atomic_rmw addi %c1_i32{{.*}}, %{{.*}}[%[[BIN]]] :
// CHECK: gpu.shuffle  up
// CHECK: memref.atomic_rmw maxu
// CHECK: %[[IDX:.*]] = bufferization.to_tensor %[[PICKS]] restrict writable
// CHECK: return %[[IDX]]
// CHECK-NOT: v4a.topk
func.func @indexer_topk(%q: tensor<?x4x128xbf16>,
    %keys: !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>,
    %w: tensor<?x4xf32>, %pos: tensor<?xi64>, %base: tensor<?xi64>,
    %ctx: tensor<1xi64>) -> tensor<?x16xi32> {
  %s = v4a.cache_indexer_score %q, %keys, %w, %pos, %base bound %ctx
      {ratio = 4 : i64}
      : tensor<?x4x128xbf16>,
        !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>,
        tensor<?x4xf32>, tensor<?xi64> -> tensor<?x?xf32>
  %i = v4a.topk %s {k = 16 : i64} : tensor<?x?xf32> -> tensor<?x16xi32>
  return %i : tensor<?x16xi32>
}

// -----

// A selection of 512 keys on 128 threads sorts them with four keys a thread
// in registers: strides inside a thread's keys by comparisons, strides inside
// a warp's 128 places by shuffles (a key's two 32-bit halves), and only the
// strides past a warp (128; then 256 and 128) through shared memory, a
// barrier each. Those stages alternate between the kept buffer (512) and the
// candidates (1024), so that a stage's stores never meet the last one's
// loads; a barrier orders the sorted keys' stores into the candidates after
// them, and one more follows those stores. The merge's block of 1,024 threads
// sorts its 512 keys on its first 128 threads the same way (its candidates
// 2560), their shared stages behind a named barrier of 128, and the whole
// block meets at its barrier after.
// CHECK-LABEL: func.func @indexer_sort_in_registers
// CHECK: function(@indexer_sort_in_registers_indexer0)
// CHECK-COUNT-8: gpu.shuffle  xor %{{.*}}, %c16_i32{{.*}} : i32
// CHECK-NOT: gpu.barrier
// CHECK: memref.store %{{.*}} : memref<512xi64, #gpu.address_space<workgroup>>
// CHECK-COUNT-3: memref.store %{{.*}} : memref<512xi64, #gpu.address_space<workgroup>>
// CHECK-NEXT: gpu.barrier
// CHECK-COUNT-4: memref.load %{{.*}} : memref<512xi64, #gpu.address_space<workgroup>>
// CHECK-NOT: gpu.barrier
// CHECK-COUNT-4: memref.store %{{.*}} : memref<1024xi64, #gpu.address_space<workgroup>>
// CHECK-NEXT: gpu.barrier
// CHECK-COUNT-4: memref.load %{{.*}} : memref<1024xi64, #gpu.address_space<workgroup>>
// CHECK-NOT: gpu.barrier
// CHECK-COUNT-4: memref.store %{{.*}} : memref<512xi64, #gpu.address_space<workgroup>>
// CHECK-NEXT: gpu.barrier
// CHECK-COUNT-4: memref.load %{{.*}} : memref<512xi64, #gpu.address_space<workgroup>>
// CHECK-NOT: gpu.barrier
// CHECK-COUNT-8: gpu.shuffle  xor %{{.*}}, %c16_i32{{.*}} : i32
// CHECK-NOT: gpu.barrier
// CHECK-COUNT-8: gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}} : i32
// CHECK-NOT: memref.store
// CHECK: gpu.barrier
// CHECK-COUNT-4: memref.store %{{.*}} : memref<1024xi64, #gpu.address_space<workgroup>>
// CHECK-NEXT: gpu.barrier
// CHECK: function(@indexer_sort_in_registers_indexer1)
// CHECK: function(@indexer_sort_in_registers_indexer2)
// CHECK: %[[SORTS:.*]] = arith.cmpi ult, %{{.*}}, %c128{{.*}} : index
// CHECK-NEXT: scf.if %[[SORTS]] {
// CHECK-COUNT-4: memref.store %{{.*}} : memref<512xi64, #gpu.address_space<workgroup>>
// CHECK-NOT: memref.load
// CHECK: nvvm.barrier id = %c1_i32{{.*}} number_of_threads = %c128_i32
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.barrier id = %c1_i32{{.*}} number_of_threads = %c128_i32
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.barrier id = %c1_i32{{.*}} number_of_threads = %c128_i32
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.barrier id = %c1_i32{{.*}} number_of_threads = %c128_i32
// CHECK-NOT: gpu.barrier
// CHECK-COUNT-4: memref.store %{{.*}} : memref<2560xi64, #gpu.address_space<workgroup>>
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
func.func @indexer_sort_in_registers(%q: tensor<?x4x128xbf16>,
    %keys: !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>,
    %w: tensor<?x4xf32>, %pos: tensor<?xi64>, %base: tensor<?xi64>,
    %ctx: tensor<1xi64>) -> tensor<?x512xi32> {
  %s = v4a.cache_indexer_score %q, %keys, %w, %pos, %base bound %ctx
      {ratio = 4 : i64}
      : tensor<?x4x128xbf16>,
        !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>,
        tensor<?x4xf32>, tensor<?xi64> -> tensor<?x?xf32>
  %i = v4a.topk %s {k = 512 : i64} : tensor<?x?xf32> -> tensor<?x512xi32>
  return %i : tensor<?x512xi32>
}

// -----

// Packed index keys skip the bf16 tile: the query tile is stored in the
// fragments' K order (an MXFP4 pair is two dims four apart: a 16-byte load
// of eight dims makes four pairs, four 4-byte stores), each thread copies
// its own share of each key tile (16-byte pieces of its rows' values, their
// scale words) into a ring of 4 stages, waits for its own copies only, and
// decodes them into the A fragments of MMAs that read A from registers
// (inline PTX: MLIR's wgmma op takes descriptors only). Two tiles a trip:
// each waits for the MMAs of the tile before, keeps their fragments until
// then, issues its own and offers the scores of the one before while they
// run.
// CHECK-LABEL: func.func @indexer_topk_mxfp4
// CHECK: gpu.launch {{.*}} function(@indexer_topk_mxfp4_indexer0)
// CHECK: llvm.load {{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xi32>
// CHECK-COUNT-4: llvm.store {{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<3>
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: nvvm.cp.async.shared.global {{.*}}, 16, cache = cg
// CHECK: nvvm.cp.async.wait.group 3
// CHECK-COUNT-16: arith.mulf {{.*}} : vector<2xbf16>
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16
// CHECK: scf.for {{.*}} iter_args
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.cp.async.wait.group 3
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NEXT: llvm.inline_asm has_side_effects "", "r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r"
// CHECK-COUNT-16: arith.mulf {{.*}} : vector<2xbf16>
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16
// CHECK: nvvm.cp.async.wait.group 3
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NEXT: llvm.inline_asm has_side_effects "", "r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r"
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16
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

// Head weights as a step computes them, a product's bf16 part widened and
// scaled by a constant, are computed where the scoring kernel loads each
// weight: the part's f32 sums read in place and rounded, widened, scaled
// (the same operations, so the same bits), and no kernel of their own.
// CHECK-LABEL: func.func @indexer_scaled_weights
// CHECK-NOT: arith.mulf {{.*}} : tensor
// CHECK: gpu.launch {{.*}} function(@indexer_scaled_weights_indexer0)
// CHECK: %[[W:.*]] = memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<?x68xf32
// CHECK-NEXT: arith.truncf %[[W]] : f32 to bf16
// CHECK-NEXT: %[[WIDE:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK-NEXT: %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT: arith.mulf %[[WIDE]], %[[HALF]] : f32
// CHECK-NOT: arith.extf {{.*}} : tensor
// CHECK: return
func.func @indexer_scaled_weights(%q: tensor<?x4x128xbf16>,
    %keys: !v4a.kv_cache<index_mxfp4, dim = 128, page_size = 64>,
    %y: tensor<?x68xf32>, %pos: tensor<?xi64>, %base: tensor<?xi64>,
    %ctx: tensor<1xi64>) -> (tensor<?x16xi32>, tensor<?x64xf32>) {
  %kv, %wb = v4a.split_columns %y
      : tensor<?x68xf32> -> tensor<?x64xf32>, tensor<?x4xbf16>
  %c0 = arith.constant 0 : index
  %wf = arith.extf %wb : tensor<?x4xbf16> to tensor<?x4xf32>
  %n = tensor.dim %wf, %c0 : tensor<?x4xf32>
  %half = arith.constant 0.5 : f32
  %scale = tensor.splat %half[%n] : tensor<?x4xf32>
  %w = arith.mulf %wf, %scale : tensor<?x4xf32>
  %s = v4a.cache_indexer_score %q, %keys, %w, %pos, %base bound %ctx
      {ratio = 4 : i64}
      : tensor<?x4x128xbf16>,
        !v4a.kv_cache<index_mxfp4, dim = 128, page_size = 64>,
        tensor<?x4xf32>, tensor<?xi64> -> tensor<?x?xf32>
  %i = v4a.topk %s {k = 16 : i64} : tensor<?x?xf32> -> tensor<?x16xi32>
  return %i, %kv : tensor<?x16xi32>, tensor<?x64xf32>
}

// -----

// Weights widened alone are widened where they are loaded; a query of
// their shape asks the part instead.
// CHECK-LABEL: func.func @indexer_widened_weights
// CHECK: %[[N:.*]] = tensor.dim %{{.*}}, %{{.*}} : tensor<?x4xbf16>
// CHECK-NOT: arith.extf {{.*}} : tensor
// CHECK: gpu.launch {{.*}} function(@indexer_widened_weights_indexer0)
// CHECK: %[[W:.*]] = memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<?x68xf32
// CHECK-NEXT: %[[R:.*]] = arith.truncf %[[W]] : f32 to bf16
// CHECK-NEXT: %[[X:.*]] = arith.extf %[[R]] : bf16 to f32
// CHECK-NEXT: %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: arith.select %{{.*}}, %[[X]], %[[Z]] : f32
// CHECK-NOT: arith.extf {{.*}} : tensor
// CHECK: return %{{.*}}, %{{.*}}, %[[N]] :
func.func @indexer_widened_weights(%q: tensor<?x4x128xbf16>,
    %keys: !v4a.kv_cache<index_mxfp4, dim = 128, page_size = 64>,
    %y: tensor<?x68xf32>, %pos: tensor<?xi64>, %base: tensor<?xi64>,
    %ctx: tensor<1xi64>) -> (tensor<?x16xi32>, tensor<?x64xf32>, index) {
  %kv, %wb = v4a.split_columns %y
      : tensor<?x68xf32> -> tensor<?x64xf32>, tensor<?x4xbf16>
  %w = arith.extf %wb : tensor<?x4xbf16> to tensor<?x4xf32>
  %c0 = arith.constant 0 : index
  %n = tensor.dim %w, %c0 : tensor<?x4xf32>
  %s = v4a.cache_indexer_score %q, %keys, %w, %pos, %base bound %ctx
      {ratio = 4 : i64}
      : tensor<?x4x128xbf16>,
        !v4a.kv_cache<index_mxfp4, dim = 128, page_size = 64>,
        tensor<?x4xf32>, tensor<?xi64> -> tensor<?x?xf32>
  %i = v4a.topk %s {k = 16 : i64} : tensor<?x?xf32> -> tensor<?x16xi32>
  return %i, %kv, %n : tensor<?x16xi32>, tensor<?x64xf32>, index
}

// -----

// Weights another op reads too stay a tensor of their own, read as they
// are.
// CHECK-LABEL: func.func @indexer_weights_shared
// CHECK: arith.mulf {{.*}} : tensor<?x4xf32>
// CHECK: gpu.launch {{.*}} function(@indexer_weights_shared_indexer0)
// CHECK: memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<?x4xf32
// CHECK-NOT: arith.truncf
// CHECK: return
func.func @indexer_weights_shared(%q: tensor<?x4x128xbf16>,
    %keys: !v4a.kv_cache<index_mxfp4, dim = 128, page_size = 64>,
    %wf: tensor<?x4xf32>, %pos: tensor<?xi64>, %base: tensor<?xi64>,
    %ctx: tensor<1xi64>) -> (tensor<?x16xi32>, tensor<?x4xf32>) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %wf, %c0 : tensor<?x4xf32>
  %half = arith.constant 0.5 : f32
  %scale = tensor.splat %half[%n] : tensor<?x4xf32>
  %w = arith.mulf %wf, %scale : tensor<?x4xf32>
  %s = v4a.cache_indexer_score %q, %keys, %w, %pos, %base bound %ctx
      {ratio = 4 : i64}
      : tensor<?x4x128xbf16>,
        !v4a.kv_cache<index_mxfp4, dim = 128, page_size = 64>,
        tensor<?x4xf32>, tensor<?xi64> -> tensor<?x?xf32>
  %i = v4a.topk %s {k = 16 : i64} : tensor<?x?xf32> -> tensor<?x16xi32>
  return %i, %w : tensor<?x16xi32>, tensor<?x4xf32>
}

// -----

// V4.1's two-level selection: scores feeding a top-k and a block top-k are
// one run of the family with two selections in shared memory (the keys
// read once), then each selection's merges. Each tile's scores are offered
// to both: to the rows' selection as they are, and, for each block of 16
// rows (a warp's sixteen), the largest score over the rows that exist
// (others and NaN as -inf: a select before three xor shuffles of maxima,
// 4, 8 and 16 lanes apart) with the block's id to the blocks'.
// CHECK-LABEL: func.func @indexer_two_level
// CHECK: gpu.launch {{.*}} function(@indexer_two_level_indexer0)
// CHECK-COUNT-8: nvvm.wgmma.mma_async
// CHECK: arith.cmpf ord
// CHECK: arith.select %{{.*}}, %{{.*}}, %cst
// CHECK: gpu.shuffle  xor %{{.*}}, %c4_i32
// CHECK-NEXT: arith.maximumf
// CHECK: gpu.shuffle  xor %{{.*}}, %c8_i32
// CHECK-NEXT: arith.maximumf
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32
// CHECK-NEXT: arith.maximumf
// CHECK: gpu.launch {{.*}} function(@indexer_two_level_indexer1)
// CHECK: gpu.launch {{.*}} function(@indexer_two_level_indexer2)
// CHECK: gpu.launch {{.*}} function(@indexer_two_level_indexer3)
// CHECK: gpu.launch {{.*}} function(@indexer_two_level_indexer4)
// CHECK-NOT: gpu.launch
// CHECK-NOT: v4a.cache_indexer_score
// CHECK-NOT: v4a.block_topk
// CHECK-NOT: v4a.topk
func.func @indexer_two_level(%q: tensor<?x4x128xbf16>,
    %keys: !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>,
    %w: tensor<?x4xf32>, %pos: tensor<?xi64>, %base: tensor<?xi64>,
    %ctx: tensor<1xi64>) -> (tensor<?x16xi32>, tensor<?x8xi32>) {
  %s = v4a.cache_indexer_score %q, %keys, %w, %pos, %base bound %ctx
      {ratio = 1 : i64}
      : tensor<?x4x128xbf16>,
        !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>,
        tensor<?x4xf32>, tensor<?xi64> -> tensor<?x?xf32>
  %i = v4a.topk %s {k = 16 : i64} : tensor<?x?xf32> -> tensor<?x16xi32>
  %b = v4a.block_topk %s {block_size = 16 : i64, num_blocks = 8 : i64}
      : tensor<?x?xf32> -> tensor<?x8xi32>
  return %i, %b : tensor<?x16xi32>, tensor<?x8xi32>
}

// -----

// Where one block's shared memory does not hold both selections (here 128
// heads of 256 dims: a 64 KiB query tile, and 2,048 rows and 2,048 blocks
// kept), each is a run of its own: two scoring kernels, each with its
// merges.
// CHECK-LABEL: func.func @indexer_two_level_apart
// CHECK: gpu.launch {{.*}} function(@indexer_two_level_apart_indexer0)
// CHECK-NOT: arith.cmpf ord
// CHECK: gpu.launch {{.*}} function(@indexer_two_level_apart_indexer1)
// CHECK: gpu.launch {{.*}} function(@indexer_two_level_apart_indexer2)
// CHECK: gpu.launch {{.*}} function(@indexer_two_level_apart_indexer3)
// CHECK: arith.cmpf ord
// CHECK: gpu.launch {{.*}} function(@indexer_two_level_apart_indexer4)
// CHECK: gpu.launch {{.*}} function(@indexer_two_level_apart_indexer5)
// CHECK-NOT: gpu.launch
func.func @indexer_two_level_apart(%q: tensor<?x128x256xbf16>,
    %keys: !v4a.kv_cache<index_bf16, dim = 256, page_size = 64>,
    %w: tensor<?x128xf32>, %pos: tensor<?xi64>, %base: tensor<?xi64>,
    %ctx: tensor<1xi64>) -> (tensor<?x2048xi32>, tensor<?x2048xi32>) {
  %s = v4a.cache_indexer_score %q, %keys, %w, %pos, %base bound %ctx
      {ratio = 1 : i64}
      : tensor<?x128x256xbf16>,
        !v4a.kv_cache<index_bf16, dim = 256, page_size = 64>,
        tensor<?x128xf32>, tensor<?xi64> -> tensor<?x?xf32>
  %i = v4a.topk %s {k = 2048 : i64} : tensor<?x?xf32> -> tensor<?x2048xi32>
  %b = v4a.block_topk %s {block_size = 8 : i64, num_blocks = 2048 : i64}
      : tensor<?x?xf32> -> tensor<?x2048xi32>
  return %i, %b : tensor<?x2048xi32>, tensor<?x2048xi32>
}

// -----

// The second level: the token's rows are its candidate blocks' rows in the
// list's order; row v is row v % 8 of block candidates[t, v / 8] (the
// slot clamped to the list), and exists only for an id >= 0 and below the
// rows the token sees. Splits cover the 8 x 8 rows of the list, whatever
// the context.
// CHECK-LABEL: func.func @indexer_in_blocks
// CHECK: %[[CAND:.*]] = bufferization.to_buffer %arg5
// CHECK: gpu.launch {{.*}} function(@indexer_in_blocks_indexer0)
// CHECK: %[[SLOT:.*]] = arith.minsi %{{.*}}, %c7
// CHECK: %[[ID:.*]] = memref.load %[[CAND]][%{{.*}}, %[[SLOT]]] : memref<?x8xi32
// CHECK: arith.cmpi sge, %[[ID]], %c0_i32
// CHECK: arith.index_cast %[[ID]]
// CHECK: arith.muli %{{.*}}, %c8
// CHECK: gpu.launch {{.*}} function(@indexer_in_blocks_indexer1)
// CHECK: gpu.launch {{.*}} function(@indexer_in_blocks_indexer2)
// CHECK-NOT: v4a.topk
func.func @indexer_in_blocks(%q: tensor<?x4x128xbf16>,
    %keys: !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>,
    %w: tensor<?x4xf32>, %pos: tensor<?xi64>, %base: tensor<?xi64>,
    %cand: tensor<?x8xi32>, %ctx: tensor<1xi64>) -> tensor<?x16xi32> {
  %s = v4a.cache_indexer_score %q, %keys, %w, %pos, %base bound %ctx
      {ratio = 1 : i64}
      : tensor<?x4x128xbf16>,
        !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>,
        tensor<?x4xf32>, tensor<?xi64> -> tensor<?x?xf32>
  %i = v4a.topk %s candidates %cand {candidate_block_size = 8 : i64, k = 16 : i64}
      : tensor<?x?xf32>, tensor<?x8xi32> -> tensor<?x16xi32>
  return %i : tensor<?x16xi32>
}

// -----

// A width that is no whole swizzle atom stays on the loop path; so do all
// the selections of scores one of which the family does not take (4096
// blocks: more than its 2048), since that one needs every score stored.
// CHECK-LABEL: func.func @indexer_uncovered
// CHECK: v4a.cache_indexer_score
// CHECK: v4a.topk
// CHECK: v4a.cache_indexer_score
// CHECK: v4a.block_topk
// CHECK: v4a.topk
// CHECK-NOT: gpu.launch
func.func @indexer_uncovered(%q: tensor<?x2x32xbf16>,
    %keys: !v4a.kv_cache<index_bf16, dim = 32, page_size = 64>,
    %q2: tensor<?x4x128xbf16>,
    %keys2: !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>,
    %w: tensor<?x2xf32>, %w2: tensor<?x4xf32>, %pos: tensor<?xi64>,
    %base: tensor<?xi64>, %ctx: tensor<1xi64>)
    -> (tensor<?x4xi32>, tensor<?x16xi32>, tensor<?x4096xi32>) {
  %s = v4a.cache_indexer_score %q, %keys, %w, %pos, %base bound %ctx
      {ratio = 4 : i64}
      : tensor<?x2x32xbf16>,
        !v4a.kv_cache<index_bf16, dim = 32, page_size = 64>,
        tensor<?x2xf32>, tensor<?xi64> -> tensor<?x?xf32>
  %i = v4a.topk %s {k = 4 : i64} : tensor<?x?xf32> -> tensor<?x4xi32>
  %s2 = v4a.cache_indexer_score %q2, %keys2, %w2, %pos, %base bound %ctx
      {ratio = 4 : i64}
      : tensor<?x4x128xbf16>,
        !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>,
        tensor<?x4xf32>, tensor<?xi64> -> tensor<?x?xf32>
  %b = v4a.block_topk %s2 {block_size = 16 : i64, num_blocks = 4096 : i64}
      : tensor<?x?xf32> -> tensor<?x4096xi32>
  %i2 = v4a.topk %s2 {k = 16 : i64} : tensor<?x?xf32> -> tensor<?x16xi32>
  return %i, %i2, %b : tensor<?x4xi32>, tensor<?x16xi32>, tensor<?x4096xi32>
}
