//===- V4AAttrs.td - v4a enums and attributes ---------------*- tablegen -*-===//

#ifndef V4A_ATTRS_TD
#define V4A_ATTRS_TD

include "dialects/V4A/IR/V4ADialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def V4A_QuantFormat : I32EnumAttr<"QuantFormat",
    "simulated low-precision element format", [
      I32EnumAttrCase<"E4M3", 0, "e4m3">,
      I32EnumAttrCase<"E2M1", 1, "e2m1">]> {
  let cppNamespace = "::v4a";
  let genSpecializedAttr = 0;
}
def V4A_QuantFormatAttr : EnumAttr<V4A_Dialect, V4A_QuantFormat, "quant_format">;

def V4A_WeightFormat : I32EnumAttr<"WeightFormat",
    "checkpoint weight format of the projections", [
      I32EnumAttrCase<"BF16", 0, "bf16">,
      I32EnumAttrCase<"FP8", 1, "fp8">]> {
  let cppNamespace = "::v4a";
  let genSpecializedAttr = 0;
}
def V4A_WeightFormatAttr
    : EnumAttr<V4A_Dialect, V4A_WeightFormat, "weight_format">;

def V4A_CacheLayout : I32EnumAttr<"CacheLayout",
    "element layout of one cache row", [
      I32EnumAttrCase<"BF16", 0, "bf16">,
      I32EnumAttrCase<"FP8Model1", 1, "fp8_model1">,
      I32EnumAttrCase<"MXFP8", 2, "mxfp8">,
      I32EnumAttrCase<"IndexBF16", 3, "index_bf16">,
      I32EnumAttrCase<"IndexFP8", 4, "index_fp8">,
      I32EnumAttrCase<"IndexMXFP4", 5, "index_mxfp4">,
      I32EnumAttrCase<"F32", 6, "f32">]> {
  let cppNamespace = "::v4a";
  let genSpecializedAttr = 0;
}
def V4A_CacheLayoutAttr
    : EnumAttr<V4A_Dialect, V4A_CacheLayout, "cache_layout">;

def V4A_CacheComponent : I32EnumAttr<"CacheComponent",
    "what a planned cache buffer holds", [
      I32EnumAttrCase<"Window", 0, "window">,
      I32EnumAttrCase<"Compressed", 1, "compressed">,
      I32EnumAttrCase<"IndexKeys", 2, "index_keys">,
      I32EnumAttrCase<"CompressorState", 3, "compressor_state">,
      I32EnumAttrCase<"IndexerState", 4, "indexer_state">]> {
  let cppNamespace = "::v4a";
  let genSpecializedAttr = 0;
}
def V4A_CacheComponentAttr
    : EnumAttr<V4A_Dialect, V4A_CacheComponent, "cache_component">;

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

// A 64-bit float printed and parsed as a bare float literal.
def V4A_F64Parameter : APFloatParameter<"64-bit float"> {
  let parser = [{
    [&]() -> ::mlir::FailureOr<::llvm::APFloat> {
      double value;
      if (::mlir::failed($_parser.parseFloat(value)))
        return ::mlir::failure();
      return ::llvm::APFloat(value);
    }()
  }];
  let printer = "$_printer.printFloat($_self)";
}

def V4A_YarnAttr : AttrDef<V4A_Dialect, "Yarn"> {
  let mnemonic = "yarn";
  let summary = "YaRN frequency interpolation parameters";
  let description = [{
    The `rope_scaling` entry of the configuration. It only takes effect when
    `original_max_position` is positive.

    Example:
    ```mlir
    #v4a.yarn<factor = 16.0, original_max_position = 65536,
              beta_fast = 32.0, beta_slow = 1.0>
    ```
  }];
  let parameters = (ins V4A_F64Parameter:$factor,
                        "int64_t":$original_max_position,
                        V4A_F64Parameter:$beta_fast,
                        V4A_F64Parameter:$beta_slow);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def V4A_CacheBufferAttr : AttrDef<V4A_Dialect, "CacheBuffer"> {
  let mnemonic = "buffer";
  let summary = "One planned per-sequence cache buffer of one layer";
  let description = [{
    `rows` rows of `dim` logical values in `layout`, `bytes` in all (rows
    rounded up to whole pages, size to the plan's alignment). A buffer with
    `alias_of` >= 0 is the same memory as that layer's buffer of the same
    component and takes no bytes of its own.

    Example:
    ```mlir
    #v4a.buffer<layer = 3, component = compressed, layout = fp8_model1,
                rows = 262144, dim = 512, row_bytes = 584, bytes = 153092096,
                alias_of = 2>
    ```
  }];
  let parameters = (ins "int64_t":$layer,
                        "::v4a::CacheComponent":$component,
                        "::v4a::CacheLayout":$layout, "int64_t":$rows,
                        "int64_t":$dim, "int64_t":$row_bytes,
                        "int64_t":$bytes, "int64_t":$alias_of);
  let assemblyFormat = "`<` struct(params) `>`";
  let extraClassDeclaration = [{
    bool isAlias() const { return getAliasOf() >= 0; }
  }];
}

def V4A_KVPlanAttr : AttrDef<V4A_Dialect, "KVPlan"> {
  let mnemonic = "kv_plan";
  let summary = "The per-sequence cache plan of a model";
  let description = [{
    Attached by `v4a-plan-kv` to a `v4a.model` as `v4a.kv_plan`. `bytes` sums
    the buffers that are not aliases: shared memory counts once.

    Example:
    ```mlir
    #v4a.kv_plan<context_tokens = 1048576, page_size = 64, alignment = 256,
                 bytes = 123, buffers = [
        #v4a.buffer<...>,
        ...]>
    ```
  }];
  let parameters = (ins "int64_t":$context_tokens, "int64_t":$page_size,
                        "int64_t":$alignment, "int64_t":$bytes,
                        "::mlir::ArrayAttr":$buffers);
  // One buffer per line: a model's plan has hundreds of them.
  let hasCustomAssemblyFormat = 1;
}

def V4A_SchedGroupAttr : AttrDef<V4A_Dialect, "SchedGroup"> {
  let mnemonic = "sched_group";
  let summary = "Layers that share one kernel variant and one metadata plan";
  let description = [{
    Attached by `v4a-schedule` (as the list `v4a.schedule` on a `v4a.model`).
    `kernel` names the kernel variant built for the key; `metadata_layer` is
    the layer whose step computes the per-step scheduling metadata, reused by
    every other layer of the group in that step.

    Example:
    ```mlir
    #v4a.sched_group<key = "4_0_1_512", kernel = "v4a_attn_4_0_1_512",
                     layers = [2, 4, 6], metadata_layer = 2>
    ```
  }];
  let parameters = (ins StringRefParameter<>:$key, StringRefParameter<>:$kernel,
                        ArrayRefParameter<"int64_t">:$layers,
                        "int64_t":$metadata_layer);
  let assemblyFormat = [{
    `<` `key` `=` $key `,` `kernel` `=` $kernel `,` `layers` `=` `[` $layers `]`
    `,` `metadata_layer` `=` $metadata_layer `>`
  }];
}

#endif // V4A_ATTRS_TD
