//===- V4AOps.td - v4a operations ---------------------------*- tablegen -*-===//

#ifndef V4A_OPS_TD
#define V4A_OPS_TD

include "dialects/V4A/IR/V4ATypes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Constraints
//===----------------------------------------------------------------------===//

def V4A_IntIsOne : AttrConstraint<
    CPred<"::llvm::cast<::mlir::IntegerAttr>($_self).getInt() == 1">,
    "whose value is 1 (multi-query attention)">;
def V4A_IntEven : AttrConstraint<
    CPred<"::llvm::cast<::mlir::IntegerAttr>($_self).getInt() % 2 == 0">,
    "whose value is even">;
def V4A_IntMultipleOf8 : AttrConstraint<
    CPred<"::llvm::cast<::mlir::IntegerAttr>($_self).getInt() % 8 == 0">,
    "whose value is a multiple of 8">;
def V4A_IntIs8Or16 : AttrConstraint<
    CPred<"::llvm::is_contained({8, 16}, "
          "::llvm::cast<::mlir::IntegerAttr>($_self).getInt())">,
    "whose value is 8 or 16">;
def V4A_IntMinusOneOrMore : IntMinValue<-1>;
def V4A_FloatPositive : AttrConstraint<
    CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() > 0.0">,
    "whose value is positive">;

def V4A_PosI64 : ConfinedAttr<I64Attr, [IntPositive]>;
def V4A_NonNegI64 : ConfinedAttr<I64Attr, [IntNonNegative]>;
def V4A_EvenPosI64 : ConfinedAttr<I64Attr, [IntPositive, V4A_IntEven]>;
def V4A_PosF64 : ConfinedAttr<F64Attr, [V4A_FloatPositive]>;

def V4A_Float : AnyTypeOf<[BF16, F32]>;
def V4A_Index : AnyTypeOf<[I32, I64]>;
def V4A_Positions : TensorRankOf<[I32, I64], [1]>;
def V4A_Indices : TensorRankOf<[I32], [2]>;
// A one-element bound the host knows before a step starts.
def V4A_HostBound : Type<And<[RankedTensorOf<[I64]>.predicate,
    CPred<"::llvm::cast<::mlir::RankedTensorType>($_self).getShape() == "
          "::llvm::ArrayRef<int64_t>{1}">]>,
    "tensor<1xi64>", "::mlir::RankedTensorType">,
  BuildableType<"::mlir::RankedTensorType::get({1}, $_builder.getI64Type())">;

//===----------------------------------------------------------------------===//
// Structure: model and layers
//===----------------------------------------------------------------------===//

def V4A_ModelOp : V4A_Op<"model", [
    IsolatedFromAbove, NoTerminator, SingleBlock, Symbol, SymbolTable,
    NoRegionArguments]> {
  let summary = "A model's attention configuration and its layers";
  let description = [{
    Carries the model configuration (HF `config.json` field names) and the
    three per-layer sharing maps over all layers, MTP included:
    `layer_kv_map` (compressor and compressed KV source), `layer_index_k_map`
    (index-key source, equal to the KV map) and `layer_index_module_map`
    (top-k source). A layer that maps to itself is a source. The body holds
    one `v4a.layer` per attention layer in id order.

    Example:
    ```mlir
    v4a.model @tiny <{hidden_size = 64 : i64, ...}> {
      v4a.layer 0 ratio 0 topk 0 swa kv_source 0 index_source 0
      v4a.layer 1 ratio 4 topk 8 swa kv_source 1 index_source 1
      v4a.layer 2 ratio 0 topk 0 swa mtp kv_source 2 index_source 2
    }
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    V4A_PosI64:$hidden_size,
    V4A_PosI64:$num_hidden_layers,
    V4A_PosI64:$num_attention_heads,
    ConfinedAttr<I64Attr, [V4A_IntIsOne]>:$num_key_value_heads,
    V4A_PosI64:$head_dim,
    V4A_EvenPosI64:$qk_rope_head_dim,
    V4A_PosI64:$q_lora_rank,
    V4A_PosI64:$o_lora_rank,
    V4A_PosI64:$o_groups,
    V4A_PosI64:$sliding_window,
    V4A_PosI64:$index_n_heads,
    V4A_PosI64:$index_head_dim,
    V4A_NonNegI64:$index_topk,
    V4A_PosF64:$rope_theta,
    V4A_PosF64:$compress_rope_theta,
    OptionalAttr<V4A_YarnAttr>:$rope_scaling,
    V4A_PosF64:$rms_norm_eps,
    V4A_WeightFormatAttr:$weight_format,
    OptionalAttr<V4A_NonNegI64>:$n_prefill_layer,
    OptionalAttr<ConfinedAttr<I64Attr, [V4A_IntIs8Or16]>>:$candidate_block_size,
    OptionalAttr<ConfinedAttr<I64Attr, [IntPositive, V4A_IntMultipleOf8,
                                        IntMaxValue<4096>]>>:$candidate_topk_blocks,
    DenseI64ArrayAttr:$layer_kv_map,
    DenseI64ArrayAttr:$layer_index_k_map,
    DenseI64ArrayAttr:$layer_index_module_map
  );
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name prop-dict attr-dict-with-keyword $body";
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The layer ops of the body, in id order.
    auto getLayers() { return getBody().front().getOps<::v4a::LayerOp>(); }
    /// Number of layers the maps cover (attention layers plus MTP layers).
    int64_t getNumMappedLayers() { return getLayerKvMap().size(); }
  }];
}

def V4A_LayerOp : V4A_Op<"layer", [HasParent<"ModelOp">]> {
  let summary = "One attention layer and its configuration";
  let description = [{
    `ratio` is the compress ratio (0: window only), `topk` the number of
    compressed rows the indexer selects (0: attend to every compressed row).
    `swa` marks use of the sliding window, `packed_kv` a compressed cache in a
    packed fp8 layout, `mtp` the multi-token-prediction layer. The sources
    name the layer whose compressed KV (and index keys) and whose top-k this
    layer uses; a layer naming itself is a source. `candidate_source` names
    the layer whose candidate blocks restrict this layer's top-k (-1: none).

    Example:
    ```mlir
    v4a.layer 3 ratio 4 topk 512 swa kv_source 3 index_source 3
    ```
  }];
  let arguments = (ins
    V4A_NonNegI64:$layer_id,
    V4A_NonNegI64:$compress_ratio,
    V4A_NonNegI64:$index_topk,
    UnitAttr:$use_swa,
    UnitAttr:$has_packed_kv,
    UnitAttr:$is_mtp,
    V4A_NonNegI64:$kv_source,
    V4A_NonNegI64:$index_source,
    DefaultValuedAttr<ConfinedAttr<I64Attr, [V4A_IntMinusOneOrMore]>, "-1">:
        $candidate_source
  );
  let assemblyFormat = [{
    $layer_id `ratio` $compress_ratio `topk` $index_topk
    (`swa` $use_swa^)? (`packed_kv` $has_packed_kv^)? (`mtp` $is_mtp^)?
    `kv_source` $kv_source `index_source` $index_source
    (`candidate_source` $candidate_source^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The key under which layers share one kernel variant and one per-step
    /// metadata computation: "{ratio}_{has_packed_kv}_{use_swa}_{index_topk}".
    std::string getSchedMetaKey();
  }];
}

//===----------------------------------------------------------------------===//
// Projections and normalization
//===----------------------------------------------------------------------===//

def V4A_LinearOp : V4A_Op<"linear", [Pure]> {
  let summary = "x @ weight^T with a bf16 or a block-scaled fp8 weight";
  let description = [{
    `input` is [T, in], `weight` [out, in]. A bf16 weight is a plain GEMM. An
    f8E4M3FN weight takes one scale per 128x128 block (`scale` of shape
    [ceil(out/128), ceil(in/128)]); the activation is then quantized per
    128-wide block along `in` (ue8m0 scales), products accumulate in f32.
    With `k_block` (bf16 and f32 weights only) each output sums its products
    in f32 per `k_block`-wide block of `in` and adds the block sums in order:
    the order of the fp8 linear, so that an fp8 product run on dequantized
    operands (v4a-dequantize-fp8-weights) gives the same bits.

    Example:
    ```mlir
    %y = v4a.linear %x, %w scale %s
        : tensor<?x4096xbf16>, tensor<1024x4096xf8E4M3FN>,
          tensor<8x32xf8E8M0FNU> -> tensor<?x1024xbf16>
    %z = v4a.linear %xq, %wd {k_block = 128 : i64}
        : tensor<?x4096xbf16>, tensor<1024x4096xbf16> -> tensor<?x1024xbf16>
    ```
  }];
  let arguments = (ins TensorRankOf<[BF16, F32], [2]>:$input,
                       TensorRankOf<[BF16, F32, F8E4M3FN], [2]>:$weight,
                       Optional<TensorRankOf<[F8E8M0FNU, F32], [2]>>:$scale,
                       OptionalAttr<V4A_PosI64>:$k_block);
  let results = (outs TensorRankOf<[BF16, F32], [2]>:$result);
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$input,
                   "::mlir::Value":$weight, "::mlir::Value":$scale), [{
      build($_builder, $_state, result, input, weight, scale,
            ::mlir::IntegerAttr());
    }]>
  ];
  let assemblyFormat = [{
    $input `,` $weight (`scale` $scale^)? attr-dict `:` type($input) `,`
    type($weight) (`,` type($scale)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def V4A_SplitColumnsOp : V4A_Op<"split_columns", [Pure]> {
  let summary = "Consecutive column ranges of a product, each as its own result";
  let description = [{
    `input` is [T, W]; the results take its columns in order, each as wide
    as its type says, and together all W of them. An f32 input holds a
    product's sums: a bf16 result is rounded from them to nearest even, as a
    product's bf16 result is. A bf16 input hands out its columns as they are
    (bf16 results only). Projections of one input merged into one product
    (v4a-merge-projections) hand each consumer its part this way; the GPU's
    row kernels read such a part in place.

    Example:
    ```mlir
    %kv, %w = v4a.split_columns %y
        : tensor<?x1088xf32> -> tensor<?x1024xf32>, tensor<?x64xbf16>
    ```
  }];
  let arguments = (ins TensorRankOf<[BF16, F32], [2]>:$input);
  let results = (outs Variadic<TensorRankOf<[BF16, F32], [2]>>:$parts);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($parts)";
  let hasVerifier = 1;
}

def V4A_RMSNormOp : V4A_Op<"rms_norm", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "RMSNorm over the last dimension";
  let description = [{
    y = weight * x * rsqrt(mean(x^2) + eps), computed in f32 and cast back to
    the input type. Without `weight` it is the per-head query norm: applied to
    [T, H, D] it scales each head vector.

    Example:
    ```mlir
    %y = v4a.rms_norm %x weight %g {eps = 1.0e-06 : f64}
        : tensor<?x512xbf16>, tensor<512xbf16>
    ```
  }];
  let arguments = (ins TensorOf<[BF16, F32]>:$input,
                       Optional<TensorRankOf<[BF16, F32], [1]>>:$weight,
                       V4A_PosF64:$eps);
  let results = (outs TensorOf<[BF16, F32]>:$result);
  let assemblyFormat = [{
    $input (`weight` $weight^)? attr-dict `:` type($input)
    (`,` type($weight)^)?
  }];
  let hasVerifier = 1;
}

def V4A_RoPEOp : V4A_Op<"rope", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Interleaved rotary embedding on the last rope_dim dims";
  let description = [{
    The last `rope_dim` dims of each vector are read as rope_dim/2 complex
    numbers (x[2i], x[2i+1]) and multiplied by exp(i * pos * f_i), with
    f_i = theta^(-2i/rope_dim), interpolated by `yarn` when present.
    `inverse` multiplies by the conjugate. `positions` holds one absolute
    position per row of the leading dimension.

    Example:
    ```mlir
    %y = v4a.rope %q, %pos {rope_dim = 64 : i64, theta = 1.0e+04 : f64}
        : tensor<?x64x512xbf16>, tensor<?xi64>
    ```
  }];
  let arguments = (ins TensorOf<[BF16, F32]>:$input, V4A_Positions:$positions,
                       V4A_EvenPosI64:$rope_dim, V4A_PosF64:$theta,
                       UnitAttr:$inverse, OptionalAttr<V4A_YarnAttr>:$yarn);
  let results = (outs TensorOf<[BF16, F32]>:$result);
  let assemblyFormat = [{
    $input `,` $positions attr-dict `:` type($input) `,` type($positions)
  }];
  let hasVerifier = 1;
}

def V4A_ActQuantOp : V4A_Op<"act_quant", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "Simulated fp8/fp4 block quantization (quantize, dequantize)";
  let description = [{
    For each block of `block_size` consecutive values among the first
    `quant_dims` dims of the last dimension (all of them when absent):
    amax = max(|v|, 1e-4), scale = amax / fmax (448 for e4m3, 6 for e2m1),
    rounded up to a power of two with `pow2_scale`; v := dequant(round(v /
    scale)) * scale, saturating. The remaining dims pass through.

    Example:
    ```mlir
    %y = v4a.act_quant %kv {format = #v4a.quant_format<e4m3>,
                            block_size = 64 : i64, quant_dims = 448 : i64,
                            pow2_scale} : tensor<?x512xbf16>
    ```
  }];
  let arguments = (ins TensorOf<[BF16, F32]>:$input,
                       V4A_QuantFormatAttr:$format, V4A_PosI64:$block_size,
                       OptionalAttr<V4A_PosI64>:$quant_dims,
                       UnitAttr:$pow2_scale);
  let results = (outs TensorOf<[BF16, F32]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def V4A_HadamardOp : V4A_Op<"hadamard", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "Normalized Walsh-Hadamard transform of the last dimension";
  let description = [{
    y = H x * n^-0.5 for the last dimension of size n, a power of two.

    Example:
    ```mlir
    %y = v4a.hadamard %k : tensor<?x128xbf16>
    ```
  }];
  let arguments = (ins TensorOf<[BF16, F32]>:$input);
  let results = (outs TensorOf<[BF16, F32]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Compression and indexing
//===----------------------------------------------------------------------===//

def V4A_CompressOp : V4A_Op<"compress", [Pure,
    AllTypesMatch<["kv", "score"]>]> {
  let summary = "Gated pooling of each complete group of ratio tokens";
  let description = [{
    `kv` and `score` are the f32 projections [T, coff*D] of a sequence's
    tokens from position 0 (coff = 2 with `overlap`, else 1); `ape` [ratio,
    coff*D] is added to the score of the token at position p mod ratio. Group
    g covers tokens g*ratio .. g*ratio+ratio-1; its entry is the sum of kv
    weighted by a softmax over the tokens, per feature. With `overlap` the
    softmax also spans the previous group's tokens through the first D
    features (kv = 0, score = -inf before group 0) while the current group
    uses the last D. The result holds one row per complete group.

    Example:
    ```mlir
    %e = v4a.compress %kv, %sc, %ape {ratio = 4 : i64, overlap}
        : tensor<?x1024xf32>, tensor<4x1024xf32> -> tensor<?x512xf32>
    ```
  }];
  let arguments = (ins TensorRankOf<[F32], [2]>:$kv,
                       TensorRankOf<[F32], [2]>:$score,
                       TensorRankOf<[F32], [2]>:$ape, V4A_PosI64:$ratio,
                       UnitAttr:$overlap);
  let results = (outs TensorRankOf<[F32], [2]>:$result);
  let assemblyFormat = [{
    $kv `,` $score `,` $ape attr-dict `:` type($kv) `,` type($ape) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def V4A_CompressStepOp : V4A_Op<"compress_step", [Pure,
    AllTypesMatch<["kv", "score"]>,
    AllTypesMatch<["state_kv", "state_score", "new_state_kv",
                   "new_state_score"]>]> {
  let summary = "One decode token of the compressor, with explicit state";
  let description = [{
    Feeds one token per sequence (`kv`, `score` [B, coff*D] at `positions`)
    into the per-sequence state [B, coff*ratio, coff*D] (the current group's
    slots, and with `overlap` the previous group's before them; scores start
    at -inf). `emitted` is true for sequences whose token completes a group;
    their `entry` row is the pooled entry prefill would produce (other rows
    are zero). Decoding token by token yields exactly the prefill entries.

    Example:
    ```mlir
    %e, %done, %skv, %ssc = v4a.compress_step %kv, %sc, %ape, %pos,
        %state_kv, %state_sc {ratio = 4 : i64, overlap}
        : tensor<?x1024xf32>, tensor<4x1024xf32>, tensor<?xi64>,
          tensor<?x8x1024xf32> -> tensor<?x512xf32>, tensor<?xi1>
    ```
  }];
  let arguments = (ins TensorRankOf<[F32], [2]>:$kv,
                       TensorRankOf<[F32], [2]>:$score,
                       TensorRankOf<[F32], [2]>:$ape,
                       V4A_Positions:$positions,
                       TensorRankOf<[F32], [3]>:$state_kv,
                       TensorRankOf<[F32], [3]>:$state_score,
                       V4A_PosI64:$ratio, UnitAttr:$overlap);
  let results = (outs TensorRankOf<[F32], [2]>:$entry,
                      TensorRankOf<[I1], [1]>:$emitted,
                      TensorRankOf<[F32], [3]>:$new_state_kv,
                      TensorRankOf<[F32], [3]>:$new_state_score);
  let assemblyFormat = [{
    $kv `,` $score `,` $ape `,` $positions `,` $state_kv `,` $state_score
    attr-dict `:` type($kv) `,` type($ape) `,` type($positions) `,`
    type($state_kv) `->` type($entry) `,` type($emitted)
  }];
  let hasVerifier = 1;
}

def V4A_IndexerScoreOp : V4A_Op<"indexer_score", [Pure]> {
  let summary = "Lightning-indexer scores of queries against index keys";
  let description = [{
    score(i, j) = sum_h relu(q[i, h] . keys[j]) * weights[i, h] for the
    compressed rows j < (positions[i] + 1) div ratio; other rows are -inf.
    The f32 sum over heads has a fixed order (each product and sum rounded
    on its own): four partial sums from +0, partial q adding heads 8i + 2q
    and 8i + 2q + 1 for i = 0, 1, ..., and the score (p0 + p2) + (p1 + p3),
    the order in which a tensor-core fragment holds the heads. Where the
    dot products are exact (fp4-valued operands, as the indexer's are),
    every backend gives the same bits.

    Example:
    ```mlir
    %s = v4a.indexer_score %qi, %keys, %wts, %pos {ratio = 4 : i64}
        : tensor<?x64x128xbf16>, tensor<?x128xbf16>, tensor<?x64xf32>,
          tensor<?xi64> -> tensor<?x?xf32>
    ```
  }];
  let arguments = (ins TensorRankOf<[BF16, F32], [3]>:$query,
                       TensorRankOf<[BF16, F32], [2]>:$keys,
                       TensorRankOf<[F32], [2]>:$weights,
                       V4A_Positions:$positions, V4A_PosI64:$ratio);
  let results = (outs TensorRankOf<[F32], [2]>:$scores);
  let assemblyFormat = [{
    $query `,` $keys `,` $weights `,` $positions attr-dict `:` type($query)
    `,` type($keys) `,` type($weights) `,` type($positions) `->`
    type($scores)
  }];
  let hasVerifier = 1;
}

def V4A_TopKOp : V4A_Op<"topk", [Pure]> {
  let summary = "Row indices of the k best finite scores per query";
  let description = [{
    Selects, per row of `scores` [T, N], up to `k` columns with finite score,
    ordered by score descending, then column ascending (ties); unused slots
    are -1. With `candidates` [T, C] (block ids from `v4a.block_topk`, -1 =
    none) only columns inside those blocks of `candidate_block_size` rows
    are eligible; the result holds global column indices.

    Example:
    ```mlir
    %idx = v4a.topk %s {k = 512 : i64} : tensor<?x?xf32> -> tensor<?x512xi32>
    ```
  }];
  let arguments = (ins TensorRankOf<[F32], [2]>:$scores,
                       Optional<V4A_Indices>:$candidates, V4A_PosI64:$k,
                       OptionalAttr<ConfinedAttr<I64Attr, [V4A_IntIs8Or16]>>:
                           $candidate_block_size);
  let results = (outs V4A_Indices:$indices);
  let assemblyFormat = [{
    $scores (`candidates` $candidates^)? attr-dict `:` type($scores)
    (`,` type($candidates)^)? `->` type($indices)
  }];
  let hasVerifier = 1;
}

def V4A_BlockTopKOp : V4A_Op<"block_topk", [Pure]> {
  let summary = "First level of two-level top-k: the best candidate blocks";
  let description = [{
    Scores each block of `block_size` consecutive compressed rows by the
    maximum score inside it and keeps the `num_blocks` best blocks per query
    (score descending, block ascending; -1 for unused slots).

    Example:
    ```mlir
    %blocks = v4a.block_topk %s {block_size = 16 : i64, num_blocks = 64 : i64}
        : tensor<?x?xf32> -> tensor<?x64xi32>
    ```
  }];
  let arguments = (ins TensorRankOf<[F32], [2]>:$scores,
                       ConfinedAttr<I64Attr, [V4A_IntIs8Or16]>:$block_size,
                       ConfinedAttr<I64Attr, [IntPositive, V4A_IntMultipleOf8,
                                              IntMaxValue<4096>]>:$num_blocks);
  let results = (outs V4A_Indices:$blocks);
  let assemblyFormat = "$scores attr-dict `:` type($scores) `->` type($blocks)";
  let hasVerifier = 1;
}

def V4A_ProjectIndexKeysOp : V4A_Op<"project_index_keys", [Pure]> {
  let summary = "Index keys projected from the main compressed KV latent";
  let description = [{
    keys = RMSNorm(latent @ k_proj^T, k_norm) with `latent` the pre-RoPE
    compressed entries [N, D] and `k_proj` [Di, D].

    Example:
    ```mlir
    %k = v4a.project_index_keys %lat, %wk, %g {eps = 1.0e-06 : f64}
        : tensor<?x512xf32>, tensor<128x512xbf16>, tensor<128xbf16>
          -> tensor<?x128xbf16>
    ```
  }];
  let arguments = (ins TensorRankOf<[BF16, F32], [2]>:$latent,
                       TensorRankOf<[BF16, F32], [2]>:$k_proj,
                       TensorRankOf<[BF16, F32], [1]>:$k_norm,
                       V4A_PosF64:$eps);
  let results = (outs TensorRankOf<[BF16, F32], [2]>:$keys);
  let assemblyFormat = [{
    $latent `,` $k_proj `,` $k_norm attr-dict `:` type($latent) `,`
    type($k_proj) `,` type($k_norm) `->` type($keys)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Window and caches
//===----------------------------------------------------------------------===//

def V4A_WindowStoreOp : V4A_Op<"window_store", [Pure,
    AllTypesMatch<["ring", "result"]>]> {
  let summary = "Stores rows into a sequence's sliding-window ring";
  let description = [{
    The token at position p is stored at ring row p mod w (w = rows of
    `ring`); when a step holds more than w tokens the latest ones win.

    Example:
    ```mlir
    %r = v4a.window_store %ring, %kv, %pos
        : tensor<128x512xbf16>, tensor<?x512xbf16>, tensor<?xi64>
    ```
  }];
  let arguments = (ins TensorRankOf<[BF16, F32], [2]>:$ring,
                       TensorRankOf<[BF16, F32], [2]>:$rows,
                       V4A_Positions:$positions);
  let results = (outs TensorRankOf<[BF16, F32], [2]>:$result);
  let assemblyFormat = [{
    $ring `,` $rows `,` $positions attr-dict `:` type($ring) `,` type($rows)
    `,` type($positions)
  }];
  let hasVerifier = 1;
}

def V4A_WindowIndicesOp : V4A_Op<"window_indices", [Pure]> {
  let summary = "Ring rows of the window of each query, oldest first";
  let description = [{
    For a query at position i the window holds tokens max(0, i-w+1) .. i; the
    result lists their ring rows (p mod w) in chronological order, -1 for
    unused slots.

    Example:
    ```mlir
    %idx = v4a.window_indices %pos {window = 128 : i64}
        : tensor<?xi64> -> tensor<?x128xi32>
    ```
  }];
  let arguments = (ins V4A_Positions:$positions, V4A_PosI64:$window);
  let results = (outs V4A_Indices:$indices);
  let assemblyFormat = [{
    $positions attr-dict `:` type($positions) `->` type($indices)
  }];
  let hasVerifier = 1;
}

def V4A_CacheStoreOp : V4A_Op<"cache_store"> {
  let summary = "Encodes rows into a cache in its element layout";
  let description = [{
    Writes `rows` [N, dim] to cache rows `row_ids` (-1: skip), encoding each
    row in the cache's layout (for example fp8 MODEL1: e4m3 values with ue8m0
    scales per 64 dims, bf16 rope dims).

    Example:
    ```mlir
    v4a.cache_store %cache, %entries, %rows
        : !v4a.kv_cache<fp8_model1, dim = 512, page_size = 64>,
          tensor<?x512xf32>, tensor<?xi64>
    ```
  }];
  let arguments = (ins Arg<V4A_KVCacheType, "", [MemWrite]>:$cache,
                       TensorRankOf<[BF16, F32], [2]>:$rows,
                       V4A_Positions:$row_ids);
  let assemblyFormat = [{
    $cache `,` $rows `,` $row_ids attr-dict `:` qualified(type($cache)) `,` type($rows)
    `,` type($row_ids)
  }];
  let hasVerifier = 1;
}

def V4A_CacheGatherOp : V4A_Op<"cache_gather"> {
  let summary = "Decodes the selected rows of a cache";
  let description = [{
    result[t, s] = decoded cache row indices[t, s], zero for index -1.

    Example:
    ```mlir
    %rows = v4a.cache_gather %cache, %idx
        : !v4a.kv_cache<bf16, dim = 512, page_size = 64>, tensor<?x512xi32>
          -> tensor<?x512x512xbf16>
    ```
  }];
  let arguments = (ins Arg<V4A_KVCacheType, "", [MemRead]>:$cache,
                       V4A_Indices:$indices);
  let results = (outs TensorRankOf<[BF16, F32], [3]>:$result);
  let assemblyFormat = [{
    $cache `,` $indices attr-dict `:` qualified(type($cache)) `,` type($indices) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention and output
//===----------------------------------------------------------------------===//

def V4A_SparseAttentionOp : V4A_Op<"sparse_attention", [Pure]> {
  let summary = "Multi-query attention over selected rows with a per-head sink";
  let description = [{
    For query row t and head h over the rows S = indices[t, :] of `kv`
    (window and compressed rows; -1 skips): l_s = scale * q[t,h] . kv[s],
    m = max(l_s), o = sum exp(l_s - m) kv[s] / (sum exp(l_s - m) +
    exp(sink[h] - m)), the numerator weights exp(l_s - m) rounded to bf16 and
    the denominator kept in f32. Values equal keys. An empty S gives o = 0.

    Example:
    ```mlir
    %o = v4a.sparse_attention %q, %kv, %idx, %sink {scale = 0.0441941738 : f64}
        : tensor<?x64x512xbf16>, tensor<?x512xbf16>, tensor<?x640xi32>,
          tensor<64xf32> -> tensor<?x64x512xbf16>
    ```
  }];
  let arguments = (ins TensorRankOf<[BF16, F32], [3]>:$query,
                       TensorRankOf<[BF16, F32], [2]>:$kv, V4A_Indices:$indices,
                       TensorRankOf<[F32], [1]>:$sink, V4A_PosF64:$scale);
  let results = (outs TensorRankOf<[BF16, F32], [3]>:$result);
  let assemblyFormat = [{
    $query `,` $kv `,` $indices `,` $sink attr-dict `:` type($query) `,`
    type($kv) `,` type($indices) `,` type($sink) `->` type($result)
  }];
  let hasVerifier = 1;
}

def V4A_GroupedOutputOp : V4A_Op<"grouped_output", [Pure,
    AttrSizedOperandSegments]> {
  let summary = "Grouped low-rank output projection";
  let description = [{
    `input` [T, H, D] is viewed as [T, G, H*D/G]; group g is projected by
    rows g*o_lora .. of `wo_a` [G*o_lora, H*D/G], the groups are flattened
    to [T, G*o_lora] and projected by `wo_b` [dim, G*o_lora]. An fp8 `wo_b`
    is an fp8 linear as in `v4a.linear` (its input quantized per 1x128
    block); an fp8 `wo_a` is dequantized with its block scales and `input` is
    used unquantized, as DeepSeek's reference runs it (a bf16 GEMM). Either
    may be fp8 without the other. Without `wo_b` the result is the
    flattened [T, G*o_lora] bf16 product itself: v4a-dequantize-fp8-weights
    takes an fp8 `wo_b` out this way, as a `v4a.act_quant` of that product
    and a `v4a.linear` with `k_block` on the dequantized weight.

    Example:
    ```mlir
    %y = v4a.grouped_output %o, %wo_a, %wo_b {groups = 8 : i64}
        : tensor<?x64x512xbf16>, tensor<8192x4096xbf16>,
          tensor<4096x8192xbf16> -> tensor<?x4096xbf16>
    %z = v4a.grouped_output %o, %wo_a scale %sa, %wo_b scale %sb {groups = 8 : i64}
        : tensor<?x64x512xbf16>, tensor<8192x4096xf8E4M3FN>
          scale tensor<64x32xf8E8M0FNU>, tensor<4096x8192xf8E4M3FN>
          scale tensor<32x64xf8E8M0FNU> -> tensor<?x4096xbf16>
    %lora = v4a.grouped_output %o, %wo_a {groups = 8 : i64}
        : tensor<?x64x512xbf16>, tensor<8192x4096xbf16> -> tensor<?x8192xbf16>
    ```
  }];
  let arguments = (ins TensorRankOf<[BF16, F32], [3]>:$input,
                       TensorRankOf<[BF16, F32, F8E4M3FN], [2]>:$wo_a,
                       Optional<TensorRankOf<[F8E8M0FNU, F32], [2]>>:$wo_a_scale,
                       Optional<TensorRankOf<[BF16, F32, F8E4M3FN], [2]>>:$wo_b,
                       Optional<TensorRankOf<[F8E8M0FNU, F32], [2]>>:$wo_b_scale,
                       V4A_PosI64:$groups);
  let results = (outs TensorRankOf<[BF16, F32], [2]>:$result);
  let assemblyFormat = [{
    $input `,` $wo_a (`scale` $wo_a_scale^)? (`,` $wo_b^)?
    (`scale` $wo_b_scale^)? attr-dict `:` type($input) `,` type($wo_a)
    (`scale` type($wo_a_scale)^)? (`,` type($wo_b)^)?
    (`scale` type($wo_b_scale)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Batched steps: per-step metadata and ops over the caches of all sequences
//===----------------------------------------------------------------------===//
//
// A step packs the tokens of several sequences ([T] rows). Every cache buffer
// holds the rows of all sequence slots: slot s owns `slot_rows` consecutive
// rows, so a token's rows are addressed as s * slot_rows + local row.

def V4A_StepWindowOp : V4A_Op<"step_window", [Pure,
    AllTypesMatch<["positions", "slots", "first", "last", "store"]>]> {
  let summary = "Window rows of a batched step: what each token reads and stores";
  let description = [{
    Per packed token t at position p of a sequence in slot `slots[t]` whose
    tokens in this step are rows `first[t]` .. `last[t]`: `attend` lists the
    window positions max(0, p-w+1) .. p oldest first (-1 pads), each as the
    row of this step's kv that holds it (values < T) or as T + the ring row
    s * w + q mod w of the window cache (older positions). `store` is the
    ring row that receives token t, or -1 when a later token of the same
    sequence in this step lands on the same row.

    Example:
    ```mlir
    %attend, %store = v4a.step_window %pos, %slots, %first, %last
        {window = 128 : i64} : tensor<?xi64> -> tensor<?x128xi32>
    ```
  }];
  let arguments = (ins TensorRankOf<[I64], [1]>:$positions,
                       TensorRankOf<[I64], [1]>:$slots,
                       TensorRankOf<[I64], [1]>:$first,
                       TensorRankOf<[I64], [1]>:$last, V4A_PosI64:$window);
  let results = (outs V4A_Indices:$attend, TensorRankOf<[I64], [1]>:$store);
  let assemblyFormat = [{
    $positions `,` $slots `,` $first `,` $last attr-dict `:` type($positions)
    `->` type($attend)
  }];
  let hasVerifier = 1;
}

def V4A_StepCompressedOp : V4A_Op<"step_compressed", [Pure,
    AllTypesMatch<["positions", "slots", "base", "complete"]>]> {
  let summary = "Compressed rows of a batched step: bases and completed groups";
  let description = [{
    For a token at position p in slot s: `base` = s * slot_rows, the first
    compressed row of its sequence; `complete` = base + (p + 1) / ratio - 1,
    the row of the group the token completes, or -1 when (p + 1) is not a
    multiple of `ratio`. The token sees local rows j < (p + 1) / ratio.

    Example:
    ```mlir
    %base, %complete = v4a.step_compressed %pos, %slots
        {ratio = 4 : i64, slot_rows = 262144 : i64} : tensor<?xi64>
    ```
  }];
  let arguments = (ins TensorRankOf<[I64], [1]>:$positions,
                       TensorRankOf<[I64], [1]>:$slots, V4A_PosI64:$ratio,
                       V4A_NonNegI64:$slot_rows);
  let results = (outs TensorRankOf<[I64], [1]>:$base,
                      TensorRankOf<[I64], [1]>:$complete);
  let assemblyFormat = [{
    $positions `,` $slots attr-dict `:` type($positions)
  }];
}

def V4A_VisibleRowsOp : V4A_Op<"visible_rows", [Pure]> {
  let summary = "Every compressed row each token sees (layers without top-k)";
  let description = [{
    result[t, j] = j for j < (positions[t] + 1) / ratio, else -1. The width
    is context[0] / ratio, where `context` holds a bound of positions[t] + 1
    over the step that the host knows before the step starts (so no size
    depends on device data); any bound gives the same rows, padded with -1.
    Rows are local to the token's sequence.

    Example:
    ```mlir
    %rows = v4a.visible_rows %pos bound %ctx {ratio = 128 : i64}
        : tensor<?xi64> -> tensor<?x?xi32>
    ```
  }];
  let arguments = (ins TensorRankOf<[I64], [1]>:$positions,
                       V4A_HostBound:$context, V4A_PosI64:$ratio);
  let results = (outs V4A_Indices:$rows);
  let assemblyFormat = [{
    $positions `bound` $context attr-dict `:` type($positions) `->`
    type($rows)
  }];
}

def V4A_CompressorOp : V4A_Op<"compressor", [AllTypesMatch<["kv", "score"]>,
    AllTypesMatch<["positions", "slots"]>]> {
  let summary = "Gated pooling of packed tokens through per-sequence state";
  let description = [{
    Feeds the packed tokens (each sequence's tokens consecutive and in
    position order) through the compressor state of their sequence: rows
    s * slot_rows .. of `state` (the current group's kv and score slots, and
    with `overlap` the previous group's before them). Row t of the result is
    the entry of the group token t completes ((p + 1) mod ratio = 0), the same
    entry `v4a.compress` gives over the whole sequence; other rows are zero.

    Example:
    ```mlir
    %e = v4a.compressor %kv, %sc, %ape, %pos, %slots, %state
        {ratio = 4 : i64, overlap, slot_rows = 8 : i64}
        : tensor<?x1024xf32>, tensor<4x1024xf32>, tensor<?xi64>,
          !v4a.kv_cache<f32, dim = 1024, page_size = 64> -> tensor<?x512xf32>
    ```
  }];
  let arguments = (ins TensorRankOf<[F32], [2]>:$kv,
                       TensorRankOf<[F32], [2]>:$score,
                       TensorRankOf<[F32], [2]>:$ape,
                       TensorRankOf<[I64], [1]>:$positions,
                       TensorRankOf<[I64], [1]>:$slots,
                       Arg<V4A_KVCacheType, "", [MemRead, MemWrite]>:$state,
                       V4A_PosI64:$ratio, UnitAttr:$overlap,
                       V4A_PosI64:$slot_rows);
  let results = (outs TensorRankOf<[F32], [2]>:$entries);
  let assemblyFormat = [{
    $kv `,` $score `,` $ape `,` $positions `,` $slots `,` $state attr-dict
    `:` type($kv) `,` type($ape) `,` type($positions) `,`
    qualified(type($state)) `->` type($entries)
  }];
  let hasVerifier = 1;
}

def V4A_CacheIndexerScoreOp : V4A_Op<"cache_indexer_score",
    [AllTypesMatch<["positions", "base"]>]> {
  let summary = "Lightning-indexer scores against each sequence's index-key cache";
  let description = [{
    As `v4a.indexer_score` with the keys of token t's sequence read from
    rows base[t] + j of `keys`: score(t, j) for local rows j < (p + 1) div
    ratio, -inf elsewhere. The width is context[0] / ratio, `context`
    holding a host-known bound of positions[t] + 1 over the step (as in
    `v4a.visible_rows`); columns past a token's rows are -inf.

    On the GPU with `indexer-e4m3` (v4a-lower-to-gpu), MXFP4 keys of 128
    dims are scored on e4m3 tensor cores with the reference's rounding of
    the dot products: each relu(q . k) rounded to bf16, the heads summed in
    the tensor cores' order. There the picks of the `v4a.topk` it feeds may
    differ from the other backends' where two scores lie within that
    rounding.

    Example:
    ```mlir
    %s = v4a.cache_indexer_score %qi, %keys, %wts, %pos, %base bound %ctx
        {ratio = 4 : i64}
        : tensor<?x64x128xbf16>,
          !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>,
          tensor<?x64xf32>, tensor<?xi64> -> tensor<?x?xf32>
    ```
  }];
  let arguments = (ins TensorRankOf<[BF16, F32], [3]>:$query,
                       Arg<V4A_KVCacheType, "", [MemRead]>:$keys,
                       TensorRankOf<[F32], [2]>:$weights,
                       TensorRankOf<[I64], [1]>:$positions,
                       TensorRankOf<[I64], [1]>:$base,
                       V4A_HostBound:$context, V4A_PosI64:$ratio);
  let results = (outs TensorRankOf<[F32], [2]>:$scores);
  let assemblyFormat = [{
    $query `,` $keys `,` $weights `,` $positions `,` $base `bound` $context
    attr-dict `:`
    type($query) `,` qualified(type($keys)) `,` type($weights) `,`
    type($positions) `->` type($scores)
  }];
  let hasVerifier = 1;
}

def V4A_CacheAttentionOp : V4A_Op<"cache_attention", [AttrSizedOperandSegments]> {
  let summary = "Sparse attention with a sink over this step's kv and the caches";
  let description = [{
    `v4a.sparse_attention` whose rows come from three places: `window_rows`
    [T, W] index this step's `kv` (values < T) or the `window` cache (T + ring
    row); `compressed_rows` [T, K] are local rows of token t's sequence in the
    `compressed` cache (row base[t] + j). -1 skips a slot.

    Example:
    ```mlir
    %o = v4a.cache_attention %q, %kv window %win[%attend]
        compressed %cmp : !v4a.kv_cache<fp8_model1, dim = 512, page_size = 64>
            [%sel : tensor<?x512xi32>] base %base : tensor<?xi64>
        sink %sink {scale = 0.0441941738 : f64}
        : tensor<?x64x512xbf16>, tensor<?x512xbf16>,
          !v4a.kv_cache<bf16, dim = 512, page_size = 64>, tensor<?x128xi32>,
          tensor<64xf32> -> tensor<?x64x512xbf16>
    ```
  }];
  let arguments = (ins TensorRankOf<[BF16, F32], [3]>:$query,
                       TensorRankOf<[BF16, F32], [2]>:$kv,
                       Arg<V4A_KVCacheType, "", [MemRead]>:$window,
                       V4A_Indices:$window_rows,
                       Arg<Optional<V4A_KVCacheType>, "", [MemRead]>:$compressed,
                       Optional<V4A_Indices>:$compressed_rows,
                       Optional<TensorRankOf<[I64], [1]>>:$base,
                       TensorRankOf<[F32], [1]>:$sink, V4A_PosF64:$scale);
  let results = (outs TensorRankOf<[BF16, F32], [3]>:$result);
  let assemblyFormat = [{
    $query `,` $kv `window` $window `[` $window_rows `]`
    (`compressed` $compressed^ `:` qualified(type($compressed)) `[` $compressed_rows
     `:` type($compressed_rows) `]` `base` $base `:` type($base))? `sink` $sink
    attr-dict `:` type($query) `,` type($kv) `,`
    qualified(type($window)) `,` type($window_rows) `,` type($sink) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

def V4A_FusedOp : V4A_Op<"fused", [IsolatedFromAbove, RecursiveMemoryEffects,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "One kernel: a region of v4a ops over explicit operands";
  let description = [{
    The unit a backend turns into one kernel or one library call (one
    `gpu.func`, one CPU loop nest, one merged GEMM). The block arguments are
    the operands; `v4a.yield` gives the results. `kind` names what the
    region computes, for kernel names and reports.

    Example:
    ```mlir
    %q = v4a.fused "rms_norm_rope" (%ql, %pos)
        : (tensor<?x64x512xbf16>, tensor<?xi64>) -> tensor<?x64x512xbf16> {
    ^bb0(%a: tensor<?x64x512xbf16>, %p: tensor<?xi64>):
      %n = v4a.rms_norm %a {eps = 1.0e-06 : f64} : tensor<?x64x512xbf16>
      %r = v4a.rope %n, %p {rope_dim = 64 : i64, theta = 1.0e+04 : f64}
          : tensor<?x64x512xbf16>, tensor<?xi64>
      v4a.yield %r : tensor<?x64x512xbf16>
    }
    ```
  }];
  let arguments = (ins StrAttr:$kind, Variadic<AnyType>:$inputs);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $kind ` ` `(` $inputs `)` attr-dict `:` functional-type($inputs, $results)
    $body
  }];
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// Moves the body's ops before this op (the block arguments replaced by
    /// the operands), replaces the results with the yielded values and
    /// erases the op; returns the ops moved, in order.
    ::llvm::SmallVector<::mlir::Operation *>
    inlineBody(::mlir::RewriterBase &rewriter);
  }];
}

def V4A_YieldOp : V4A_Op<"yield", [Pure, Terminator, HasParent<"FusedOp">]> {
  let summary = "The results of a v4a.fused region";
  let description = [{
    Example:
    ```mlir
    v4a.yield %r : tensor<?x64x512xbf16>
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let builders = [OpBuilder<(ins), [{ /* nothing to yield */ }]>];
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

//===----------------------------------------------------------------------===//
// Step programs
//===----------------------------------------------------------------------===//

def V4A_ProgramOp : V4A_Op<"program", [Symbol, NoTerminator, SingleBlock,
    NoRegionArguments]> {
  let summary = "The order in which one step runs its functions";
  let description = [{
    The step program `v4a-schedule` writes: `v4a.run_meta` computes a key's
    metadata once, `v4a.run_step` runs one layer through its key's step
    function, in layer order. `@main` holds the attention layers; `@mtp` the
    multi-token-prediction layers, which run in a step of their own.

    Example:
    ```mlir
    v4a.program @main {
      v4a.run_meta @meta_0_0_1_0
      v4a.run_step @step_0_0_1_0 layer 0 kernels ["merged_linear", "rms_norm_rope"]
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
}

def V4A_RunMetaOp : V4A_Op<"run_meta", [HasParent<"ProgramOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Computes a key's per-step metadata";
  let description = [{
    Example:
    ```mlir
    v4a.run_meta @meta_4_0_1_512
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$function);
  let assemblyFormat = "$function attr-dict";
}

def V4A_RunStepOp : V4A_Op<"run_step", [HasParent<"ProgramOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Runs one layer through its key's step function";
  let description = [{
    `kernels` lists the step's kernels in order (kernel regions by kind,
    single ops by name). The function's metadata (`v4a.meta`) must have been
    computed earlier in the same program.

    Example:
    ```mlir
    v4a.run_step @step_4_0_1_512 layer 2 kernels ["merged_linear", "topk"]
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$function, V4A_NonNegI64:$layer,
                       StrArrayAttr:$kernels);
  let assemblyFormat = "$function `layer` $layer `kernels` $kernels attr-dict";
}

#endif // V4A_OPS_TD
