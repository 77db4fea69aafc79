//===- V4ATypes.td - v4a types ------------------------------*- tablegen -*-===//

#ifndef V4A_TYPES_TD
#define V4A_TYPES_TD

include "dialects/V4A/IR/V4AAttrs.td"

def V4A_KVCacheType : TypeDef<V4A_Dialect, "KVCache"> {
  let mnemonic = "kv_cache";
  let summary = "A paged cache of rows in one typed element layout";
  let description = [{
    A handle to a cache buffer. `dim` is the logical width of one row (D for
    KV rows, Di for index keys); `page_size` the number of rows per page.
    The byte size of a row follows from the layout alone (for example 584 B
    for `fp8_model1` at dim 512: 448 e4m3 values, 64 bf16 rope values, 7
    ue8m0 scales and one pad byte).

    Example:
    ```mlir
    !v4a.kv_cache<fp8_model1, dim = 512, page_size = 64>
    ```
  }];
  let parameters = (ins "::v4a::CacheLayout":$layout, "int64_t":$dim,
                        "int64_t":$page_size);
  let assemblyFormat = "`<` $layout `,` struct($dim, $page_size) `>`";
  let genVerifyDecl = 1;
}

#endif // V4A_TYPES_TD
