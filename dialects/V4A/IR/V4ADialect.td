//===- V4ADialect.td - v4a dialect definition --------------*- tablegen -*-===//
//
// The v4a dialect expresses the DeepSeek-V4 attention block: the model and
// its layers as configuration, and the tensor computations of one layer.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_DIALECT_TD
#define V4A_DIALECT_TD

include "mlir/IR/OpBase.td"

def V4A_Dialect : Dialect {
  let name = "v4a";
  let cppNamespace = "::v4a";
  let summary = "The DeepSeek-V4 attention block";
  let description = [{
    A `v4a.model` carries the model configuration and the cross-layer sharing
    maps, and holds one `v4a.layer` per attention layer (the MTP layer
    included). The compute ops (`v4a.linear`, `v4a.rope`, `v4a.compress`,
    `v4a.sparse_attention`, ...) operate on tensors and follow the semantics
    of the v4 attention specification exactly.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
}

class V4A_Op<string mnemonic, list<Trait> traits = []>
    : Op<V4A_Dialect, mnemonic, traits>;

#endif // V4A_DIALECT_TD
