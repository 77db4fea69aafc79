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
      I32EnumAttrCase<"IndexMXFP4", 5, "index_mxfp4">]> {
  let cppNamespace = "::v4a";
  let genSpecializedAttr = 0;
}
def V4A_CacheLayoutAttr
    : EnumAttr<V4A_Dialect, V4A_CacheLayout, "cache_layout">;

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

#endif // V4A_ATTRS_TD
