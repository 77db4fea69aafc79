//===- Passes.td - v4a passes -------------------------------*- tablegen -*-===//

#ifndef V4A_PASSES_TD
#define V4A_PASSES_TD

include "mlir/Pass/PassBase.td"

def VerifyTopology : Pass<"v4a-verify-topology", "::mlir::ModuleOp"> {
  let summary = "Checks the cross-layer sharing rules of every v4a.model";
  let description = [{
    Fails, naming the layer, the map (kv, index-K, index-topk, candidate) and
    the rule, when the sharing maps break a rule of the specification:
    (a) a consumer maps to the nearest source before it, with no source of its
    kind in between; (b) index-topk segments lie inside index-K segments,
    which lie inside KV segments; (c) sharing never crosses the YoCo boundary,
    which must be a KV source; (d) a consumer agrees with its source on
    compress ratio and index_topk (and use_swa for KV); (e) MTP layers never
    share, the candidate map is non-decreasing and its source is an index
    source with index_topk > 0; (f) when a cache plan is attached, every
    consumer's caches are aliases of its source's.
  }];
  let dependentDialects = ["::v4a::V4ADialect"];
}

def PlanKV : Pass<"v4a-plan-kv", "::mlir::ModuleOp"> {
  let summary = "Plans the per-sequence KV caches and their aliases";
  let description = [{
    Attaches `v4a.kv_plan` to every v4a.model: per layer the window ring,
    compressed rows (context / ratio, whole pages), index key rows, and the
    compressor and indexer state, each with its row layout and size.
    Consumer layers alias their source's compressed KV, index keys and state;
    the plan's byte total counts shared memory once.
  }];
  let options = [
    Option<"contextTokens", "context", "int64_t", "1048576",
           "Maximum context length of a sequence, in tokens">,
    Option<"pageSize", "page-size", "int64_t", "64",
           "Rows per page of the compressed caches">,
    Option<"alignment", "alignment", "int64_t", "256",
           "Byte alignment of every buffer">,
    Option<"indexLayout", "index-layout", "std::string", "\"mxfp4\"",
           "Index key rows: bf16, fp8 (e4m3, one f32 scale per row) or "
           "mxfp4 (e2m1, a ue8m0 scale per 32 dims; the default)">,
  ];
  let dependentDialects = ["::v4a::V4ADialect"];
}

def BuildSteps : Pass<"v4a-build-steps", "::mlir::ModuleOp"> {
  let summary = "Builds the step functions of every sched_meta_key";
  let description = [{
    For every v4a.model with a cache plan, adds beside it:
    `@meta_<key>` per sched_meta_key, the per-step metadata the key's layers
    share (window rows to read and store, compressed row bases, completed
    groups; each [T, ...]), computed once per step from the packed tokens'
    positions, sequence slots and first/last rows; and `@step_<key>[_role]`,
    one batched varlen step of any layer of that key and role, as v4a ops
    over explicit arguments: the tokens, the metadata, the layer's weights
    and its caches (a consumer's are its source's, through the plan's
    aliases). Roles: `_shares_kv` (the source compresses), `_shares_topk`
    (the source's top-k is an argument), `_makes_candidates` /
    `_uses_candidates` (two-level top-k). `v4a.bind` on each argument and
    result names what the runtime binds to it; each `v4a.layer` gets
    `v4a.step` and `v4a.meta`, the functions it runs.
  }];
  let dependentDialects = ["::v4a::V4ADialect", "::mlir::func::FuncDialect",
    "::mlir::arith::ArithDialect", "::mlir::tensor::TensorDialect"];
}

def DequantizeFP8Weights
    : Pass<"v4a-dequantize-fp8-weights", "::mlir::ModuleOp"> {
  let summary = "Turns the fp8 linears of step functions into exact bf16 "
                "products";
  let description = [{
    In every step function (`v4a.sched_meta_key`), each `v4a.linear` of an
    f8E4M3FN weight with its block scales becomes a bf16 linear with
    `k_block = 128` over `v4a.act_quant` of its input (e4m3, 128-wide
    blocks, power-of-two scales; one per input, shared by its products):
    the same values, since e4m3 values times power-of-two scales are bf16
    values and the block sums keep the fp8 linear's order. The weight
    argument becomes bf16 (what the runtime binds: the checkpoint's e4m3
    weight dequantized at load) and the scale argument is removed. GEMM
    libraries accumulate bf16 products in f32 but fp8 products on Hopper's
    tensor cores with about 14 bits, which moves ~6% of the bf16 outputs
    by an ulp and more; this form keeps the library exact. Products whose
    input width is not a multiple of 128 stay fp8. An fp8 `wo_b` leaves its
    `v4a.grouped_output` the same way: the op keeps wo_a's product, which
    is quantized (viewed as [T, groups, o_lora] when o_lora is whole
    blocks) and fed to a `v4a.linear` with `k_block = 128`.

    Example: `v4a.linear %x, %w scale %s : tensor<?x256xbf16>,
    tensor<128x256xf8E4M3FN>, tensor<1x2xf8E8M0FNU> -> tensor<?x128xbf16>`
    becomes `%q = v4a.act_quant %x {block_size = 128 : i64, format =
    #v4a<quant_format e4m3>, pow2_scale}` and `v4a.linear %q, %w {k_block =
    128 : i64} : tensor<?x256xbf16>, tensor<128x256xbf16> ->
    tensor<?x128xbf16>`.
  }];
  let dependentDialects = ["::v4a::V4ADialect",
                           "::mlir::tensor::TensorDialect"];
}

def Fuse : Pass<"v4a-fuse", "::mlir::ModuleOp"> {
  let summary = "Groups the ops of each step function into kernel regions";
  let description = [{
    In every step function (`v4a.sched_meta_key`), projections of the same
    input with the same kind of weight become one `v4a.fused
    "merged_linear"` region (a unit a backend may run as one GEMM over the
    stacked weights: v4a-merge-projections), and chains
    of row-wise ops (rms_norm, rope, act_quant, hadamard, compressor, tensor
    casts) in which each result feeds only the next op become one region,
    with a cache store of the last result when there is one. A region is
    what a backend turns into one kernel; its kind lists its ops. The
    window store stays outside: it follows the attention, which still reads
    the ring rows a long prefill overwrites.
  }];
  let dependentDialects = ["::v4a::V4ADialect"];
}

def MergeProjections : Pass<"v4a-merge-projections", "::mlir::ModuleOp"> {
  let summary = "Runs each group of projections of one input as one product";
  let description = [{
    In every step function (`v4a.sched_meta_key`), a `v4a.fused
    "merged_linear"` region of bf16 weights (no block scales, the same
    `k_block`) becomes one `v4a.linear` over the stacked weight and a
    `v4a.split_columns` that gives each projection its columns: one GEMM
    where there were several, each of which costs a GEMM library's fixed
    minimum at decode. The weight arguments are replaced by one argument
    whose `v4a.bind` joins theirs with `+` in order (the runtime stacks the
    checkpoint's rows at load); their rows follow one another, so each
    output column sums what it did before, in the same order. When every
    projection has one result type the product has it too and its parts
    are its own columns, which the GPU's row kernels read in place
    (`v4a-lower-to-gpu`): wq_a with wkv, wq_b with the indexer's wq_b.
    Mixed result types take f32 sums, from which the split rounds the bf16
    parts as the library rounds a bf16 product's (lowered, each part is a
    view of its columns, a bf16 one rounded elementwise where it is read).
    Regions whose weights another op also reads are left as they are, and
    so are mixed ones whose stacked product is wider than its input: the
    f32 sums would double a wide product's bytes.

    Example: a region of `v4a.linear %x, %a : tensor<?x256xbf16>,
    tensor<128x256xbf16> -> tensor<?x128xbf16>` and `v4a.linear %x, %b :
    ... tensor<64x256xbf16> -> tensor<?x64xf32>` over arguments bound to
    "a.weight" and "b.weight" becomes `%y = v4a.linear %x, %ab :
    tensor<?x256xbf16>, tensor<192x256xbf16> -> tensor<?x192xf32>` and
    `v4a.split_columns %y : tensor<?x192xf32> -> tensor<?x128xbf16>,
    tensor<?x64xf32>`, with `%ab` bound to "a.weight+b.weight".
  }];
  let dependentDialects = ["::v4a::V4ADialect"];
}

def FuseElementwise : Pass<"v4a-fuse-elementwise", "::mlir::ModuleOp"> {
  let summary = "Joins chains of elementwise linalg ops into one loop nest";
  let description = [{
    Runs after `convert-elementwise-to-linalg`, on tensors. A `tensor.splat`
    of a scalar becomes a `linalg.fill` of a `tensor.empty`, which folds
    into the elementwise ops that read it as the scalar itself; an
    elementwise `linalg.generic` whose result only one other elementwise op
    reads is fused into that op. Sizes taken off a result (`tensor.dim`)
    are taken off the operands the result's shape comes from, so they do
    not count as a second reader. On the GPU each loop nest left is a
    launch: the arithmetic between a step's kernel regions (a compressed
    row's rope position, the indexer's head weights) then costs one launch
    per chain instead of one per op and splat.

    Example: `%s = tensor.splat %c3[%n] : tensor<?xi64>` and `%r = arith.subi
    %p, %s : tensor<?xi64>` become one `linalg.generic` over `%p` whose body
    is `arith.subi %in, %c3`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def ElideResultCopies : Pass<"v4a-elide-result-copies", "::mlir::ModuleOp"> {
  let summary = "Lets the ops that produce a function's results write them in place";
  let description = [{
    Runs after bufferization. A step's entry function returns its results
    through output arguments, and bufferization copies each result's own
    buffer into its argument at the end (`memref.copy`); on the GPU every
    such copy is a device copy, a node of the step's graph. When the copy's
    source is an allocation of the argument's type in the function's entry
    block that nothing uses after the copy, and the copy is the argument's
    only use, the allocation is replaced by the argument and the copy
    dropped: the ops that wrote the buffer write the output. The output
    arguments are then written before the function returns, so they must
    not alias its inputs (the runtime places them apart); and they hold
    what the caller left there, not the zeros a fresh device allocation
    starts with, so a result's producers must write all of it (every
    lowering does).

    Example: `%a = memref.alloc(%n) : memref<?x64xbf16>`, kernels writing
    `%a`, then `memref.copy %a, %out` become the same kernels writing
    `%out`.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def Schedule : Pass<"v4a-schedule", "::mlir::ModuleOp"> {
  let summary = "Groups layers by sched_meta_key";
  let description = [{
    Attaches `v4a.schedule` to every v4a.model: one `#v4a.sched_group` per
    sched_meta_key "{ratio}_{has_packed_kv}_{use_swa}_{index_topk}" over the
    attention layers, naming the kernel variant built once for the key and the
    layer whose step computes the per-step metadata the group shares. MTP
    layers run in their own step and get their own groups in
    `v4a.mtp_schedule` (reusing the kernel variant of their key).
    When v4a-build-steps has run, it also writes the step programs:
    `v4a.program @main` (and `@mtp` for MTP layers) with, in layer order,
    each key's `v4a.run_meta` before its first layer and one `v4a.run_step`
    per layer listing the step's kernels in order.
  }];
  let dependentDialects = ["::v4a::V4ADialect"];
}

def LowerToCPU : Pass<"v4a-lower-to-cpu", "::mlir::ModuleOp"> {
  let summary = "Lowers the v4a compute ops to loops over buffers";
  let description = [{
    Rewrites every v4a compute op into scf loops over buffers obtained with
    bufferization.to_buffer, writing a fresh buffer per result, with the
    rounding points of the specification (f32 accumulation, results rounded
    to their element type, fp8/fp4 round-to-nearest-even on the format grid).
    One-shot bufferization then removes the tensor bridges. `v4a.fused`
    regions are inlined first (each op keeps its loop nest). A !v4a.kv_cache
    becomes its bytes (memref<?xi8>) in function signatures; the ops that
    read or write caches decode and encode rows of bf16, fp8_model1,
    index_bf16 and f32 layouts, and name any other layout in an error.

    With `token-parallel`, loops over packed tokens are parallel and each
    token has its own scratch, without vector lanes across tokens or heads:
    the loop structure `v4a-map-loops-to-gpu` turns into kernels. With
    `library-gemms`, each projection with bf16 input, weight and output
    (and the grouped output's wo_a, as a strided batch, and wo_b) is also a
    call of `@v4a_gemm_bf16` (D = B . A^T with sizes, leading dimensions,
    batch and batch strides) placed right before the loops that compute the
    same; the runtime runs one or the other. With `library-fp8-gemms`, fp8
    projections (and the grouped output's fp8 wo_b) too: a kernel quantizes
    the activation per 1x128 block into e4m3 bytes and f32 scales in the
    library's layout, another widens the weight's ue8m0 block scales to f32,
    then `@v4a_gemm_fp8` and the fallback over the same quantized
    activation.
  }];
  let options = [
    Option<"tokenParallel", "token-parallel", "bool", "false",
           "Run the tokens of an op in parallel, each with its own scratch">,
    Option<"libraryGemms", "library-gemms", "bool", "false",
           "Also hand bf16 projections to a GEMM library call "
           "(func.call @v4a_gemm_bf16) right before their loops, which stay "
           "as the fallback">,
    Option<"libraryFP8Gemms", "library-fp8-gemms", "bool", "false",
           "Also hand fp8 projections to the library (func.call "
           "@v4a_gemm_fp8), their activation quantized by a kernel of its "
           "own into the library's layout">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect",
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::tensor::TensorDialect", "::mlir::vector::VectorDialect"
  ];
}

def LowerToGPU : Pass<"v4a-lower-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Lowers the kernel regions a GPU kernel family covers to launches";
  let description = [{
    Runs on step functions (tensors) before the loop lowering of the GPU
    pipeline. Every `v4a.fused` region is inlined where it stands; the part
    of it a kernel family covers (and each covered op outside a region)
    becomes one `gpu.launch` over buffers (`bufferization.to_buffer` of the
    operands, a fresh buffer for the result), named `<func>_<family><N>` in
    the kernel module `@v4a_gpu`. The rest stays for `v4a-lower-to-cpu` and
    `v4a-map-loops-to-gpu`, whose kernels are `<func>_loops<N>`.

    The row family (`rows`): a chain of `rms_norm`, `rope`, `act_quant`,
    `hadamard` and float casts, each reading the previous result, over rows
    of a static width that is a multiple of 8 (at most 8192). A team of
    threads per row (width/8 rounded up to a power of two) holds the row in
    registers, 8 elements per thread read and written in 16-byte accesses;
    row sums are shuffle butterflies (through workgroup memory across
    warps), block maxima of `act_quant` shuffles within the block's lanes,
    `hadamard` (width at most 256) exchanges halves between lanes. Each op
    rounds to its result's element type, as the loop lowering does.

    Example:
    ```mlir
    %y = v4a.rms_norm %x weight %w {eps = 1.0e-06 : f64}
        : tensor<?x512xbf16>, tensor<512xbf16>
    ```
    becomes a `gpu.launch` of 128 threads per block (two rows of 64 lanes)
    over `ceil(T / 2)` blocks, `function(@<func>_rows0)`.

    The attention family (`attention`): `cache_attention` with bf16 query,
    kv and cache rows and a head width that is a multiple of 128 (at most
    512), on tensor cores (sm_90a `wgmma`). A block of two warpgroups per
    query token and group of 64 heads; the token's slots in blocks of 64
    rows gathered by 16-byte `cp.async` into two shared stages; S = Q.K^T
    and O += P.V with f32 accumulators, an online softmax in base 2 between
    them (P rounded to bf16, denominators in f32), the sink in the
    denominator. Its dynamic shared memory (202.5 KiB at width 512) is part
    of the launch. When the attention's only user is the inverse `rope` of
    its output (in the same block), that op is the kernel's epilogue: the
    pairs of the last `rope_dim` dims, rounded to bf16 as a row kernel would
    read them, turned by the conjugate of the token's angles in f32. When
    the query is `rope(rms_norm(q))` (no weight, each op's only use), those
    ops are its prologue: the math warpgroups read q (in place when it is
    columns of a merged product), norm and turn each head row as the row
    family would, and store the bf16 rows into the query tile. Attention
    kernels are launched where the attention stands in the step.

    The indexer family (`indexer`): `cache_indexer_score` whose users are
    `topk` and `block_topk` ops (bf16 query and index keys, a head width
    that is a multiple of 64, at most 256 heads, each k or block count at
    most 2048), one run of the family per user (a candidate source's rows
    and blocks share one when one block's shared memory holds both). A
    warpgroup per (token, split of its rows) scores 64 keys per wgmma chain
    (keys as M, heads as N), sums each key's heads from the registers in
    the ops' documented order and streams the scores through a top-k in
    shared memory (a threshold, a candidate buffer cut back by radix
    select, a bitonic sort); no [T, rows] scores are stored. When a
    token's rows are split, a second kernel merges the lists: up to four by
    each key's rank in their union, more through a floor from samples of
    the sorted lists and the same top-k. V4.1's two-level selection runs on
    the same kernels: a `block_topk` offers each block's largest score
    (a shuffle reduction over the lanes holding its rows) with the block's
    id; a `topk` with candidate blocks scores only the rows of the token's
    blocks, gathered by id, and picks global rows.
  }];
  let options = [
    Option<"indexerFamily", "indexer-family", "bool", "true",
           "Give the indexer's scores and top-k to the indexer family (off: "
           "the loop path, for comparisons)">,
    Option<"indexerE4M3", "indexer-e4m3", "bool", "false",
           "Multiply MXFP4 index keys of 128 dims as e4m3 with the head sum "
           "on the tensor cores (the reference's rounding of the dot "
           "products; picks may differ at rounding ties). Other keys, or "
           "indexer-family=0, are an error">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::bufferization::BufferizationDialect"];
}

def MapLoopsToGPU : Pass<"v4a-map-loops-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Turns the loop nests of lowered step functions into GPU launches";
  let description = [{
    Runs on functions after the token-parallel loop lowering and
    bufferization; launches already there (`v4a-lower-to-gpu`) stay as they
    are. What stays on the host is index arithmetic, allocations,
    shape views, copies and reads of a device scalar; every other top-level
    op becomes part of a `gpu.launch`:
    - a top-level `scf.parallel` whose body holds parallel loops becomes a
      grid over its first three dimensions (grid-stride loops, so any size
      fits); inside, each nested `scf.parallel` is spread over the block's
      threads (a strided loop, then a barrier) and other side effects run
      on thread 0 between barriers;
    - a top-level `scf.parallel` without nested parallelism is spread over
      all threads of the grid, one iteration per thread;
    - consecutive other ops (sequential loops, stores) become one
      single-block launch laid out the same way.
    Allocations inside a launch become views into a scratch buffer the host
    allocates per block or per thread. Launches carry `module = @v4a_gpu`
    and a function name `<func>_loops<N>`, so `gpu-kernel-outlining` puts every
    kernel in one module with deterministic names.

    Example: `scf.parallel (%t) = (%c0) to (%T) { scf.parallel (%h) ... }`
    becomes `gpu.launch blocks(min(T, 65535)) threads(128)` with a loop
    `for t = blockIdx.x; t < T; t += gridDim.x` around a strided loop over h.
  }];
  let options = [
    Option<"threads", "threads", "int64_t", "128",
           "Threads per block">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
    "::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect"];
}

def ChainKernelLaunches : Pass<"v4a-chain-kernel-launches", "::mlir::ModuleOp"> {
  let summary = "Lets each outlined kernel be launched before the one before it ends";
  let description = [{
    Runs after `gpu-kernel-outlining`. Every kernel of every `gpu.module`
    starts by waiting for the grids it depends on
    (`nvvm.griddepcontrol wait`: they have completed and their writes are
    visible) and then lets the grid after it be launched
    (`nvvm.griddepcontrol launch_dependents`). Nothing of the kernel reads
    or writes memory before the wait, so the runtime may launch it with
    programmatic stream serialization (CUDA's programmatic dependent
    launch) and it still sees everything stream order shows it, while its
    launch and its blocks' placement overlap the tail of the grid before.
    Launched plainly, the wait returns at once. A kernel that already
    starts with the wait is left as it is.

    Example:
    ```mlir
    gpu.func @step_rows0(%x: memref<?xbf16>) kernel {
      ...
    }
    ```
    becomes
    ```mlir
    gpu.func @step_rows0(%x: memref<?xbf16>) kernel {
      nvvm.griddepcontrol wait
      nvvm.griddepcontrol launch_dependents
      ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
    "::mlir::NVVM::NVVMDialect"];
}

#endif // V4A_PASSES_TD
