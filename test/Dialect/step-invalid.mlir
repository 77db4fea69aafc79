// RUN: v4a-opt %s -split-input-file -verify-diagnostics

func.func @window_rows(%p: tensor<4xi64>, %s: tensor<4xi64>, %f: tensor<4xi64>, %l: tensor<4xi64>) {
  // expected-error @+1 {{attend rows (3) must equal number of positions (4)}}
  %a, %st = v4a.step_window %p, %s, %f, %l {window = 8 : i64} : tensor<4xi64> -> tensor<3x8xi32>
  return
}

// -----

func.func @window_width(%p: tensor<?xi64>, %s: tensor<?xi64>, %f: tensor<?xi64>, %l: tensor<?xi64>) {
  // expected-error @+1 {{attend width (4) must equal window (8)}}
  %a, %st = v4a.step_window %p, %s, %f, %l {window = 8 : i64} : tensor<?xi64> -> tensor<?x4xi32>
  return
}

// -----

func.func @compressed_ratio(%p: tensor<?xi64>, %s: tensor<?xi64>) {
  // expected-error @+1 {{attribute 'ratio' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %b, %c = v4a.step_compressed %p, %s {ratio = 0 : i64, slot_rows = 8 : i64} : tensor<?xi64>
  return
}

// -----

func.func @compressor_state(%kv: tensor<?x1024xf32>, %ape: tensor<4x1024xf32>, %p: tensor<?xi64>, %st: !v4a.kv_cache<f32, dim = 1024, page_size = 8>) {
  // expected-error @+1 {{state dim (1024) must equal 2 * projection width (2048)}}
  %e = v4a.compressor %kv, %kv, %ape, %p, %p, %st {ratio = 4 : i64, overlap, slot_rows = 8 : i64} : tensor<?x1024xf32>, tensor<4x1024xf32>, tensor<?xi64>, !v4a.kv_cache<f32, dim = 1024, page_size = 8> -> tensor<?x512xf32>
  return
}

// -----

func.func @compressor_entry(%kv: tensor<?x1024xf32>, %ape: tensor<4x1024xf32>, %p: tensor<?xi64>, %st: !v4a.kv_cache<f32, dim = 2048, page_size = 8>) {
  // expected-error @+1 {{entry width (1024) must equal projection width / 2 (overlap) (512)}}
  %e = v4a.compressor %kv, %kv, %ape, %p, %p, %st {ratio = 4 : i64, overlap, slot_rows = 8 : i64} : tensor<?x1024xf32>, tensor<4x1024xf32>, tensor<?xi64>, !v4a.kv_cache<f32, dim = 2048, page_size = 8> -> tensor<?x1024xf32>
  return
}

// -----

func.func @compressor_tokens(%kv: tensor<4x512xf32>, %ape: tensor<128x512xf32>, %p: tensor<3xi64>, %st: !v4a.kv_cache<f32, dim = 1024, page_size = 128>) {
  // expected-error @+1 {{number of positions (3) must equal number of tokens (4)}}
  %e = v4a.compressor %kv, %kv, %ape, %p, %p, %st {ratio = 128 : i64, slot_rows = 128 : i64} : tensor<4x512xf32>, tensor<128x512xf32>, tensor<3xi64>, !v4a.kv_cache<f32, dim = 1024, page_size = 128> -> tensor<?x512xf32>
  return
}

// -----

func.func @index_key_dim(%q: tensor<?x64x128xbf16>, %k: !v4a.kv_cache<index_bf16, dim = 64, page_size = 64>, %w: tensor<?x64xf32>, %p: tensor<?xi64>, %c: tensor<1xi64>) {
  // expected-error @+1 {{key dim (64) must equal query head width (128)}}
  %s = v4a.cache_indexer_score %q, %k, %w, %p, %p bound %c {ratio = 4 : i64} : tensor<?x64x128xbf16>, !v4a.kv_cache<index_bf16, dim = 64, page_size = 64>, tensor<?x64xf32>, tensor<?xi64> -> tensor<?x?xf32>
  return
}

// -----

func.func @index_weight_heads(%q: tensor<?x64x128xbf16>, %k: !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>, %w: tensor<?x32xf32>, %p: tensor<?xi64>, %c: tensor<1xi64>) {
  // expected-error @+1 {{weight heads (32) must equal query heads (64)}}
  %s = v4a.cache_indexer_score %q, %k, %w, %p, %p bound %c {ratio = 4 : i64} : tensor<?x64x128xbf16>, !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>, tensor<?x32xf32>, tensor<?xi64> -> tensor<?x?xf32>
  return
}

// -----

func.func @index_score_rows(%q: tensor<4x64x128xbf16>, %k: !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>, %w: tensor<4x64xf32>, %p: tensor<4xi64>, %c: tensor<1xi64>) {
  // expected-error @+1 {{score rows (5) must equal query rows (4)}}
  %s = v4a.cache_indexer_score %q, %k, %w, %p, %p bound %c {ratio = 4 : i64} : tensor<4x64x128xbf16>, !v4a.kv_cache<index_bf16, dim = 128, page_size = 64>, tensor<4x64xf32>, tensor<4xi64> -> tensor<5x?xf32>
  return
}

// -----

func.func @attention_result(%q: tensor<?x64x512xbf16>, %kv: tensor<?x512xbf16>, %r: !v4a.kv_cache<bf16, dim = 512, page_size = 128>, %i: tensor<?x128xi32>, %s: tensor<64xf32>) {
  // expected-error @+1 {{result type 'tensor<?x64x512xf32>' must equal the query type 'tensor<?x64x512xbf16>'}}
  %o = v4a.cache_attention %q, %kv window %r[%i] sink %s {scale = 0.1 : f64} : tensor<?x64x512xbf16>, tensor<?x512xbf16>, !v4a.kv_cache<bf16, dim = 512, page_size = 128>, tensor<?x128xi32>, tensor<64xf32> -> tensor<?x64x512xf32>
  return
}

// -----

func.func @attention_window_dim(%q: tensor<?x64x512xbf16>, %kv: tensor<?x512xbf16>, %r: !v4a.kv_cache<bf16, dim = 256, page_size = 128>, %i: tensor<?x128xi32>, %s: tensor<64xf32>) {
  // expected-error @+1 {{window dim (256) must equal query head width (512)}}
  %o = v4a.cache_attention %q, %kv window %r[%i] sink %s {scale = 0.1 : f64} : tensor<?x64x512xbf16>, tensor<?x512xbf16>, !v4a.kv_cache<bf16, dim = 256, page_size = 128>, tensor<?x128xi32>, tensor<64xf32> -> tensor<?x64x512xbf16>
  return
}

// -----

func.func @attention_sink(%q: tensor<?x64x512xbf16>, %kv: tensor<?x512xbf16>, %r: !v4a.kv_cache<bf16, dim = 512, page_size = 128>, %i: tensor<?x128xi32>, %s: tensor<32xf32>) {
  // expected-error @+1 {{sink size (32) must equal query heads (64)}}
  %o = v4a.cache_attention %q, %kv window %r[%i] sink %s {scale = 0.1 : f64} : tensor<?x64x512xbf16>, tensor<?x512xbf16>, !v4a.kv_cache<bf16, dim = 512, page_size = 128>, tensor<?x128xi32>, tensor<32xf32> -> tensor<?x64x512xbf16>
  return
}

// -----

func.func @attention_compressed_dim(%q: tensor<?x64x512xbf16>, %kv: tensor<?x512xbf16>, %r: !v4a.kv_cache<bf16, dim = 512, page_size = 128>, %i: tensor<?x128xi32>, %c: !v4a.kv_cache<bf16, dim = 256, page_size = 64>, %sel: tensor<?x8xi32>, %b: tensor<?xi64>, %s: tensor<64xf32>) {
  // expected-error @+1 {{compressed dim (256) must equal query head width (512)}}
  %o = v4a.cache_attention %q, %kv window %r[%i] compressed %c : !v4a.kv_cache<bf16, dim = 256, page_size = 64> [%sel : tensor<?x8xi32>] base %b : tensor<?xi64> sink %s {scale = 0.1 : f64} : tensor<?x64x512xbf16>, tensor<?x512xbf16>, !v4a.kv_cache<bf16, dim = 512, page_size = 128>, tensor<?x128xi32>, tensor<64xf32> -> tensor<?x64x512xbf16>
  return
}

// -----

func.func @attention_bases(%q: tensor<4x64x512xbf16>, %kv: tensor<4x512xbf16>, %r: !v4a.kv_cache<bf16, dim = 512, page_size = 128>, %i: tensor<4x128xi32>, %c: !v4a.kv_cache<bf16, dim = 512, page_size = 64>, %sel: tensor<4x8xi32>, %b: tensor<3xi64>, %s: tensor<64xf32>) {
  // expected-error @+1 {{number of bases (3) must equal query rows (4)}}
  %o = v4a.cache_attention %q, %kv window %r[%i] compressed %c : !v4a.kv_cache<bf16, dim = 512, page_size = 64> [%sel : tensor<4x8xi32>] base %b : tensor<3xi64> sink %s {scale = 0.1 : f64} : tensor<4x64x512xbf16>, tensor<4x512xbf16>, !v4a.kv_cache<bf16, dim = 512, page_size = 128>, tensor<4x128xi32>, tensor<64xf32> -> tensor<4x64x512xbf16>
  return
}

// -----

func.func @fused_arguments(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{block argument types must equal the operand types}}
  %r = v4a.fused "k" (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%b: tensor<4xbf16>):
    %c = arith.extf %b : tensor<4xbf16> to tensor<4xf32>
    v4a.yield %c : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @fused_results(%a: tensor<4xf32>) -> tensor<4xbf16> {
  // expected-error @+1 {{yielded types must equal the result types}}
  %r = v4a.fused "k" (%a) : (tensor<4xf32>) -> tensor<4xbf16> {
  ^bb0(%b: tensor<4xf32>):
    v4a.yield %b : tensor<4xf32>
  }
  return %r : tensor<4xbf16>
}
