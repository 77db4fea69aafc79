// RUN: v4a-opt %s -split-input-file -verify-diagnostics

func.func @linear_width(%x: tensor<4x128xbf16>, %w: tensor<64x256xbf16>) {
  // expected-error @+1 {{input width (128) must equal weight columns (256)}}
  %0 = v4a.linear %x, %w : tensor<4x128xbf16>, tensor<64x256xbf16> -> tensor<4x64xbf16>
  return
}

// -----

func.func @linear_rows(%x: tensor<4x128xbf16>, %w: tensor<64x128xbf16>) {
  // expected-error @+1 {{result rows (5) must equal input rows (4)}}
  %0 = v4a.linear %x, %w : tensor<4x128xbf16>, tensor<64x128xbf16> -> tensor<5x64xbf16>
  return
}

// -----

func.func @linear_out(%x: tensor<4x128xbf16>, %w: tensor<64x128xbf16>) {
  // expected-error @+1 {{result width (32) must equal weight rows (64)}}
  %0 = v4a.linear %x, %w : tensor<4x128xbf16>, tensor<64x128xbf16> -> tensor<4x32xbf16>
  return
}

// -----

func.func @linear_bf16_scale(%x: tensor<4x128xbf16>, %w: tensor<64x128xbf16>, %s: tensor<1x1xf8E8M0FNU>) {
  // expected-error @+1 {{takes a scale for 'weight' only when it is f8E4M3FN}}
  %0 = v4a.linear %x, %w scale %s : tensor<4x128xbf16>, tensor<64x128xbf16>, tensor<1x1xf8E8M0FNU> -> tensor<4x64xbf16>
  return
}

// -----

func.func @linear_fp8_no_scale(%x: tensor<4x128xbf16>, %w: tensor<64x128xf8E4M3FN>) {
  // expected-error @+1 {{f8E4M3FN weight 'weight' needs a block scale operand}}
  %0 = v4a.linear %x, %w : tensor<4x128xbf16>, tensor<64x128xf8E4M3FN> -> tensor<4x64xbf16>
  return
}

// -----

func.func @linear_scale_rows(%x: tensor<4x256xbf16>, %w: tensor<300x256xf8E4M3FN>, %s: tensor<2x2xf8E8M0FNU>) {
  // expected-error @+1 {{scale rows (2) must equal ceil(weight rows / 128) (3)}}
  %0 = v4a.linear %x, %w scale %s : tensor<4x256xbf16>, tensor<300x256xf8E4M3FN>, tensor<2x2xf8E8M0FNU> -> tensor<4x300xbf16>
  return
}

// -----

func.func @linear_scale_cols(%x: tensor<4x256xbf16>, %w: tensor<128x256xf8E4M3FN>, %s: tensor<1x1xf8E8M0FNU>) {
  // expected-error @+1 {{scale columns (1) must equal ceil(weight columns / 128) (2)}}
  %0 = v4a.linear %x, %w scale %s : tensor<4x256xbf16>, tensor<128x256xf8E4M3FN>, tensor<1x1xf8E8M0FNU> -> tensor<4x128xbf16>
  return
}

// -----

func.func @linear_weight_type(%x: tensor<4x128xbf16>, %w: tensor<64x128xi8>) {
  // expected-error @+1 {{operand #1 must be 2D tensor of bfloat16 type or 32-bit float or f8E4M3FN type values}}
  %0 = v4a.linear %x, %w : tensor<4x128xbf16>, tensor<64x128xi8> -> tensor<4x64xbf16>
  return
}

// -----

func.func @norm_weight(%x: tensor<4x512xbf16>, %g: tensor<448xbf16>) {
  // expected-error @+1 {{weight size (448) must equal input's last dimension (512)}}
  %0 = v4a.rms_norm %x weight %g {eps = 1.0e-6 : f64} : tensor<4x512xbf16>, tensor<448xbf16>
  return
}

// -----

func.func @norm_eps(%x: tensor<4x512xbf16>) {
  // expected-error @+1 {{attribute 'eps' failed to satisfy constraint: 64-bit float attribute whose value is positive}}
  %0 = v4a.rms_norm %x {eps = 0.0 : f64} : tensor<4x512xbf16>
  return
}

// -----

func.func @rope_rank(%x: tensor<512xbf16>, %p: tensor<1xi64>) {
  // expected-error @+1 {{input must have a row dimension and a feature dimension}}
  %0 = v4a.rope %x, %p {rope_dim = 64 : i64, theta = 1.0e4 : f64} : tensor<512xbf16>, tensor<1xi64>
  return
}

// -----

func.func @rope_too_wide(%x: tensor<4x64xbf16>, %p: tensor<4xi64>) {
  // expected-error @+1 {{rope_dim (66) exceeds the vector width (64)}}
  %0 = v4a.rope %x, %p {rope_dim = 66 : i64, theta = 1.0e4 : f64} : tensor<4x64xbf16>, tensor<4xi64>
  return
}

// -----

func.func @rope_odd(%x: tensor<4x512xbf16>, %p: tensor<4xi64>) {
  // expected-error @+1 {{attribute 'rope_dim' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive whose value is even}}
  %0 = v4a.rope %x, %p {rope_dim = 63 : i64, theta = 1.0e4 : f64} : tensor<4x512xbf16>, tensor<4xi64>
  return
}

// -----

func.func @rope_positions(%x: tensor<4x512xbf16>, %p: tensor<3xi64>) {
  // expected-error @+1 {{number of positions (3) must equal input rows (4)}}
  %0 = v4a.rope %x, %p {rope_dim = 64 : i64, theta = 1.0e4 : f64} : tensor<4x512xbf16>, tensor<3xi64>
  return
}

// -----

func.func @rope_theta(%x: tensor<4x512xbf16>, %p: tensor<4xi64>) {
  // expected-error @+1 {{attribute 'theta' failed to satisfy constraint: 64-bit float attribute whose value is positive}}
  %0 = v4a.rope %x, %p {rope_dim = 64 : i64, theta = -1.0 : f64} : tensor<4x512xbf16>, tensor<4xi64>
  return
}

// -----

func.func @yarn_factor(%x: tensor<4x512xbf16>, %p: tensor<4xi64>) {
  // expected-error @+1 {{yarn factor must be positive, got 0}}
  %0 = v4a.rope %x, %p {rope_dim = 64 : i64, theta = 1.0e4 : f64, yarn = #v4a.yarn<factor = 0.0, original_max_position = 65536, beta_fast = 32.0, beta_slow = 1.0>} : tensor<4x512xbf16>, tensor<4xi64>
  return
}

// -----

func.func @yarn_length(%x: tensor<4x512xbf16>, %p: tensor<4xi64>) {
  // expected-error @+1 {{yarn original_max_position must be >= 0, got -1}}
  %0 = v4a.rope %x, %p {rope_dim = 64 : i64, theta = 1.0e4 : f64, yarn = #v4a.yarn<factor = 16.0, original_max_position = -1, beta_fast = 32.0, beta_slow = 1.0>} : tensor<4x512xbf16>, tensor<4xi64>
  return
}

// -----

func.func @yarn_beta(%x: tensor<4x512xbf16>, %p: tensor<4xi64>) {
  // expected-error @+1 {{yarn beta_fast and beta_slow must be positive}}
  %0 = v4a.rope %x, %p {rope_dim = 64 : i64, theta = 1.0e4 : f64, yarn = #v4a.yarn<factor = 16.0, original_max_position = 1, beta_fast = 32.0, beta_slow = 0.0>} : tensor<4x512xbf16>, tensor<4xi64>
  return
}

// -----

func.func @quant_dims(%x: tensor<4x512xbf16>) {
  // expected-error @+1 {{quant_dims (576) exceeds the vector width (512)}}
  %0 = v4a.act_quant %x {format = #v4a<quant_format e4m3>, block_size = 64 : i64, quant_dims = 576 : i64} : tensor<4x512xbf16>
  return
}

// -----

func.func @quant_block(%x: tensor<4x512xbf16>) {
  // expected-error @+1 {{quantized width (448) must be a multiple of block_size (128)}}
  %0 = v4a.act_quant %x {format = #v4a<quant_format e4m3>, block_size = 128 : i64, quant_dims = 448 : i64} : tensor<4x512xbf16>
  return
}

// -----

func.func @hadamard_width(%x: tensor<4x96xf32>) {
  // expected-error @+1 {{needs a static power-of-two last dimension, got 96}}
  %0 = v4a.hadamard %x : tensor<4x96xf32>
  return
}

// -----

func.func @compress_odd(%kv: tensor<8x1023xf32>, %ape: tensor<4x1023xf32>) {
  // expected-error @+1 {{projection width (1023) must be even with overlap}}
  %0 = v4a.compress %kv, %kv, %ape {ratio = 4 : i64, overlap} : tensor<8x1023xf32>, tensor<4x1023xf32> -> tensor<2x511xf32>
  return
}

// -----

func.func @compress_ape_rows(%kv: tensor<8x512xf32>, %ape: tensor<4x512xf32>) {
  // expected-error @+1 {{ape rows (4) must equal ratio (128)}}
  %0 = v4a.compress %kv, %kv, %ape {ratio = 128 : i64} : tensor<8x512xf32>, tensor<4x512xf32> -> tensor<0x512xf32>
  return
}

// -----

func.func @compress_ape_width(%kv: tensor<8x1024xf32>, %ape: tensor<4x512xf32>) {
  // expected-error @+1 {{ape width (512) must equal projection width (1024)}}
  %0 = v4a.compress %kv, %kv, %ape {ratio = 4 : i64, overlap} : tensor<8x1024xf32>, tensor<4x512xf32> -> tensor<2x512xf32>
  return
}

// -----

func.func @compress_entry(%kv: tensor<8x1024xf32>, %ape: tensor<4x1024xf32>) {
  // expected-error @+1 {{entry width (1024) must equal projection width / 2 (overlap) (512)}}
  %0 = v4a.compress %kv, %kv, %ape {ratio = 4 : i64, overlap} : tensor<8x1024xf32>, tensor<4x1024xf32> -> tensor<2x1024xf32>
  return
}

// -----

func.func @compress_rows(%kv: tensor<9x512xf32>, %ape: tensor<4x512xf32>) {
  // expected-error @+1 {{result rows (3) must equal tokens div ratio (2)}}
  %0 = v4a.compress %kv, %kv, %ape {ratio = 4 : i64} : tensor<9x512xf32>, tensor<4x512xf32> -> tensor<3x512xf32>
  return
}

// -----

func.func @compress_ratio(%kv: tensor<8x512xf32>, %ape: tensor<4x512xf32>) {
  // expected-error @+1 {{attribute 'ratio' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %0 = v4a.compress %kv, %kv, %ape {ratio = 0 : i64} : tensor<8x512xf32>, tensor<4x512xf32> -> tensor<2x512xf32>
  return
}

// -----

func.func @step_slots(%kv: tensor<2x1024xf32>, %ape: tensor<4x1024xf32>, %p: tensor<2xi64>, %s: tensor<2x4x1024xf32>) {
  // expected-error @+1 {{state slots (4) must equal 2 * ratio (8)}}
  %0:4 = v4a.compress_step %kv, %kv, %ape, %p, %s, %s {ratio = 4 : i64, overlap} : tensor<2x1024xf32>, tensor<4x1024xf32>, tensor<2xi64>, tensor<2x4x1024xf32> -> tensor<2x512xf32>, tensor<2xi1>
  return
}

// -----

func.func @step_batch(%kv: tensor<2x512xf32>, %ape: tensor<4x512xf32>, %p: tensor<2xi64>, %s: tensor<3x4x512xf32>) {
  // expected-error @+1 {{state batch (3) must equal batch size (2)}}
  %0:4 = v4a.compress_step %kv, %kv, %ape, %p, %s, %s {ratio = 4 : i64} : tensor<2x512xf32>, tensor<4x512xf32>, tensor<2xi64>, tensor<3x4x512xf32> -> tensor<2x512xf32>, tensor<2xi1>
  return
}

// -----

func.func @step_state_width(%kv: tensor<2x512xf32>, %ape: tensor<4x512xf32>, %p: tensor<2xi64>, %s: tensor<2x4x256xf32>) {
  // expected-error @+1 {{state width (256) must equal projection width (512)}}
  %0:4 = v4a.compress_step %kv, %kv, %ape, %p, %s, %s {ratio = 4 : i64} : tensor<2x512xf32>, tensor<4x512xf32>, tensor<2xi64>, tensor<2x4x256xf32> -> tensor<2x512xf32>, tensor<2xi1>
  return
}

// -----

func.func @step_positions(%kv: tensor<2x512xf32>, %ape: tensor<4x512xf32>, %p: tensor<3xi64>, %s: tensor<2x4x512xf32>) {
  // expected-error @+1 {{number of positions (3) must equal batch size (2)}}
  %0:4 = v4a.compress_step %kv, %kv, %ape, %p, %s, %s {ratio = 4 : i64} : tensor<2x512xf32>, tensor<4x512xf32>, tensor<3xi64>, tensor<2x4x512xf32> -> tensor<2x512xf32>, tensor<2xi1>
  return
}

// -----

func.func @step_entry(%kv: tensor<2x512xf32>, %ape: tensor<4x512xf32>, %p: tensor<2xi64>, %s: tensor<2x4x512xf32>) {
  // expected-error @+1 {{entry rows (1) must equal batch size (2)}}
  %0:4 = v4a.compress_step %kv, %kv, %ape, %p, %s, %s {ratio = 4 : i64} : tensor<2x512xf32>, tensor<4x512xf32>, tensor<2xi64>, tensor<2x4x512xf32> -> tensor<1x512xf32>, tensor<2xi1>
  return
}

// -----

func.func @step_emitted(%kv: tensor<2x512xf32>, %ape: tensor<4x512xf32>, %p: tensor<2xi64>, %s: tensor<2x4x512xf32>) {
  // expected-error @+1 {{emitted size (1) must equal batch size (2)}}
  %0:4 = v4a.compress_step %kv, %kv, %ape, %p, %s, %s {ratio = 4 : i64} : tensor<2x512xf32>, tensor<4x512xf32>, tensor<2xi64>, tensor<2x4x512xf32> -> tensor<2x512xf32>, tensor<1xi1>
  return
}

// -----

func.func @score_key_width(%q: tensor<4x8x128xbf16>, %k: tensor<?x64xbf16>, %w: tensor<4x8xf32>, %p: tensor<4xi64>) {
  // expected-error @+1 {{key width (64) must equal query head width (128)}}
  %0 = v4a.indexer_score %q, %k, %w, %p {ratio = 4 : i64} : tensor<4x8x128xbf16>, tensor<?x64xbf16>, tensor<4x8xf32>, tensor<4xi64> -> tensor<4x?xf32>
  return
}

// -----

func.func @score_weight_rows(%q: tensor<4x8x128xbf16>, %k: tensor<?x128xbf16>, %w: tensor<2x8xf32>, %p: tensor<4xi64>) {
  // expected-error @+1 {{weight rows (2) must equal query rows (4)}}
  %0 = v4a.indexer_score %q, %k, %w, %p {ratio = 4 : i64} : tensor<4x8x128xbf16>, tensor<?x128xbf16>, tensor<2x8xf32>, tensor<4xi64> -> tensor<4x?xf32>
  return
}

// -----

func.func @score_weight_heads(%q: tensor<4x8x128xbf16>, %k: tensor<?x128xbf16>, %w: tensor<4x4xf32>, %p: tensor<4xi64>) {
  // expected-error @+1 {{weight heads (4) must equal query heads (8)}}
  %0 = v4a.indexer_score %q, %k, %w, %p {ratio = 4 : i64} : tensor<4x8x128xbf16>, tensor<?x128xbf16>, tensor<4x4xf32>, tensor<4xi64> -> tensor<4x?xf32>
  return
}

// -----

func.func @score_positions(%q: tensor<4x8x128xbf16>, %k: tensor<?x128xbf16>, %w: tensor<4x8xf32>, %p: tensor<5xi64>) {
  // expected-error @+1 {{number of positions (5) must equal query rows (4)}}
  %0 = v4a.indexer_score %q, %k, %w, %p {ratio = 4 : i64} : tensor<4x8x128xbf16>, tensor<?x128xbf16>, tensor<4x8xf32>, tensor<5xi64> -> tensor<4x?xf32>
  return
}

// -----

func.func @score_rows(%q: tensor<4x8x128xbf16>, %k: tensor<?x128xbf16>, %w: tensor<4x8xf32>, %p: tensor<4xi64>) {
  // expected-error @+1 {{score rows (3) must equal query rows (4)}}
  %0 = v4a.indexer_score %q, %k, %w, %p {ratio = 4 : i64} : tensor<4x8x128xbf16>, tensor<?x128xbf16>, tensor<4x8xf32>, tensor<4xi64> -> tensor<3x?xf32>
  return
}

// -----

func.func @score_cols(%q: tensor<4x8x128xbf16>, %k: tensor<16x128xbf16>, %w: tensor<4x8xf32>, %p: tensor<4xi64>) {
  // expected-error @+1 {{score columns (8) must equal key rows (16)}}
  %0 = v4a.indexer_score %q, %k, %w, %p {ratio = 4 : i64} : tensor<4x8x128xbf16>, tensor<16x128xbf16>, tensor<4x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
  return
}

// -----

func.func @topk_k(%s: tensor<4x64xf32>) {
  // expected-error @+1 {{result width (8) must equal k (16)}}
  %0 = v4a.topk %s {k = 16 : i64} : tensor<4x64xf32> -> tensor<4x8xi32>
  return
}

// -----

func.func @topk_rows(%s: tensor<4x64xf32>) {
  // expected-error @+1 {{result rows (2) must equal score rows (4)}}
  %0 = v4a.topk %s {k = 8 : i64} : tensor<4x64xf32> -> tensor<2x8xi32>
  return
}

// -----

func.func @topk_zero(%s: tensor<4x64xf32>) {
  // expected-error @+1 {{attribute 'k' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %0 = v4a.topk %s {k = 0 : i64} : tensor<4x64xf32> -> tensor<4x0xi32>
  return
}

// -----

func.func @topk_candidates_block(%s: tensor<4x64xf32>, %c: tensor<4x8xi32>) {
  // expected-error @+1 {{candidates need candidate_block_size (8 or 16)}}
  %0 = v4a.topk %s candidates %c {k = 8 : i64} : tensor<4x64xf32>, tensor<4x8xi32> -> tensor<4x8xi32>
  return
}

// -----

func.func @topk_block_alone(%s: tensor<4x64xf32>) {
  // expected-error @+1 {{candidate_block_size needs candidates}}
  %0 = v4a.topk %s {k = 8 : i64, candidate_block_size = 8 : i64} : tensor<4x64xf32> -> tensor<4x8xi32>
  return
}

// -----

func.func @topk_candidate_rows(%s: tensor<4x64xf32>, %c: tensor<2x8xi32>) {
  // expected-error @+1 {{candidate rows (2) must equal score rows (4)}}
  %0 = v4a.topk %s candidates %c {k = 8 : i64, candidate_block_size = 8 : i64} : tensor<4x64xf32>, tensor<2x8xi32> -> tensor<4x8xi32>
  return
}

// -----

func.func @block_size(%s: tensor<4x64xf32>) {
  // expected-error @+1 {{attribute 'block_size' failed to satisfy constraint: 64-bit signless integer attribute whose value is 8 or 16}}
  %0 = v4a.block_topk %s {block_size = 12 : i64, num_blocks = 8 : i64} : tensor<4x64xf32> -> tensor<4x8xi32>
  return
}

// -----

func.func @block_count(%s: tensor<4x64xf32>) {
  // expected-error @+1 {{attribute 'num_blocks' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive whose value is a multiple of 8 whose maximum value is 4096}}
  %0 = v4a.block_topk %s {block_size = 8 : i64, num_blocks = 12 : i64} : tensor<4x64xf32> -> tensor<4x12xi32>
  return
}

// -----

func.func @block_count_max(%s: tensor<4x64xf32>) {
  // expected-error @+1 {{attribute 'num_blocks' failed to satisfy constraint}}
  %0 = v4a.block_topk %s {block_size = 8 : i64, num_blocks = 4104 : i64} : tensor<4x64xf32> -> tensor<4x4104xi32>
  return
}

// -----

func.func @block_width(%s: tensor<4x64xf32>) {
  // expected-error @+1 {{result width (16) must equal num_blocks (8)}}
  %0 = v4a.block_topk %s {block_size = 8 : i64, num_blocks = 8 : i64} : tensor<4x64xf32> -> tensor<4x16xi32>
  return
}

// -----

func.func @block_rows(%s: tensor<4x64xf32>) {
  // expected-error @+1 {{result rows (3) must equal score rows (4)}}
  %0 = v4a.block_topk %s {block_size = 8 : i64, num_blocks = 8 : i64} : tensor<4x64xf32> -> tensor<3x8xi32>
  return
}

// -----

func.func @keys_proj(%l: tensor<?x512xf32>, %w: tensor<128x448xbf16>, %g: tensor<128xbf16>) {
  // expected-error @+1 {{k_proj columns (448) must equal latent width (512)}}
  %0 = v4a.project_index_keys %l, %w, %g {eps = 1.0e-6 : f64} : tensor<?x512xf32>, tensor<128x448xbf16>, tensor<128xbf16> -> tensor<?x128xbf16>
  return
}

// -----

func.func @keys_norm(%l: tensor<?x512xf32>, %w: tensor<128x512xbf16>, %g: tensor<64xbf16>) {
  // expected-error @+1 {{k_norm size (64) must equal k_proj rows (128)}}
  %0 = v4a.project_index_keys %l, %w, %g {eps = 1.0e-6 : f64} : tensor<?x512xf32>, tensor<128x512xbf16>, tensor<64xbf16> -> tensor<?x128xbf16>
  return
}

// -----

func.func @keys_rows(%l: tensor<4x512xf32>, %w: tensor<128x512xbf16>, %g: tensor<128xbf16>) {
  // expected-error @+1 {{key rows (3) must equal latent rows (4)}}
  %0 = v4a.project_index_keys %l, %w, %g {eps = 1.0e-6 : f64} : tensor<4x512xf32>, tensor<128x512xbf16>, tensor<128xbf16> -> tensor<3x128xbf16>
  return
}

// -----

func.func @keys_width(%l: tensor<4x512xf32>, %w: tensor<128x512xbf16>, %g: tensor<128xbf16>) {
  // expected-error @+1 {{key width (64) must equal k_proj rows (128)}}
  %0 = v4a.project_index_keys %l, %w, %g {eps = 1.0e-6 : f64} : tensor<4x512xf32>, tensor<128x512xbf16>, tensor<128xbf16> -> tensor<4x64xbf16>
  return
}

// -----

func.func @window_width(%r: tensor<128x512xbf16>, %kv: tensor<?x448xbf16>, %p: tensor<?xi64>) {
  // expected-error @+1 {{row width (448) must equal ring width (512)}}
  %0 = v4a.window_store %r, %kv, %p : tensor<128x512xbf16>, tensor<?x448xbf16>, tensor<?xi64>
  return
}

// -----

func.func @window_positions(%r: tensor<128x512xbf16>, %kv: tensor<4x512xbf16>, %p: tensor<3xi64>) {
  // expected-error @+1 {{number of positions (3) must equal number of rows (4)}}
  %0 = v4a.window_store %r, %kv, %p : tensor<128x512xbf16>, tensor<4x512xbf16>, tensor<3xi64>
  return
}

// -----

func.func @window_indices_width(%p: tensor<?xi64>) {
  // expected-error @+1 {{result width (64) must equal window (128)}}
  %0 = v4a.window_indices %p {window = 128 : i64} : tensor<?xi64> -> tensor<?x64xi32>
  return
}

// -----

func.func @window_indices_rows(%p: tensor<4xi64>) {
  // expected-error @+1 {{result rows (5) must equal number of positions (4)}}
  %0 = v4a.window_indices %p {window = 128 : i64} : tensor<4xi64> -> tensor<5x128xi32>
  return
}

// -----

func.func @store_width(%c: !v4a.kv_cache<bf16, dim = 512, page_size = 64>, %r: tensor<?x128xf32>, %i: tensor<?xi64>) {
  // expected-error @+1 {{row width (128) must equal cache dim (512)}}
  v4a.cache_store %c, %r, %i : !v4a.kv_cache<bf16, dim = 512, page_size = 64>, tensor<?x128xf32>, tensor<?xi64>
  return
}

// -----

func.func @store_ids(%c: !v4a.kv_cache<bf16, dim = 512, page_size = 64>, %r: tensor<4x512xf32>, %i: tensor<2xi64>) {
  // expected-error @+1 {{number of row ids (2) must equal number of rows (4)}}
  v4a.cache_store %c, %r, %i : !v4a.kv_cache<bf16, dim = 512, page_size = 64>, tensor<4x512xf32>, tensor<2xi64>
  return
}

// -----

func.func @gather_width(%c: !v4a.kv_cache<bf16, dim = 512, page_size = 64>, %i: tensor<?x8xi32>) {
  // expected-error @+1 {{result width (448) must equal cache dim (512)}}
  %0 = v4a.cache_gather %c, %i : !v4a.kv_cache<bf16, dim = 512, page_size = 64>, tensor<?x8xi32> -> tensor<?x8x448xbf16>
  return
}

// -----

func.func @gather_slots(%c: !v4a.kv_cache<bf16, dim = 512, page_size = 64>, %i: tensor<?x8xi32>) {
  // expected-error @+1 {{result slots (4) must equal index width (8)}}
  %0 = v4a.cache_gather %c, %i : !v4a.kv_cache<bf16, dim = 512, page_size = 64>, tensor<?x8xi32> -> tensor<?x4x512xbf16>
  return
}

// -----

func.func @gather_rows(%c: !v4a.kv_cache<bf16, dim = 512, page_size = 64>, %i: tensor<2x8xi32>) {
  // expected-error @+1 {{result rows (3) must equal index rows (2)}}
  %0 = v4a.cache_gather %c, %i : !v4a.kv_cache<bf16, dim = 512, page_size = 64>, tensor<2x8xi32> -> tensor<3x8x512xbf16>
  return
}

// -----

// expected-error @+1 {{kv_cache<fp8_model1, dim = 100>: fp8_model1 needs a width of 64 bf16 rope dims plus a positive multiple of 64 e4m3 dims (512 in V4)}}
func.func @cache_model1_width(%c: !v4a.kv_cache<fp8_model1, dim = 100, page_size = 64>)

// -----

// expected-error @+1 {{kv_cache<mxfp8, dim = 48>: mxfp8 needs a width that is a multiple of 32}}
func.func @cache_mxfp8_width(%c: !v4a.kv_cache<mxfp8, dim = 48, page_size = 64>)

// -----

// expected-error @+1 {{kv_cache page_size must be positive, got 0}}
func.func @cache_page(%c: !v4a.kv_cache<bf16, dim = 512, page_size = 0>)

// -----

func.func @attn_result(%q: tensor<4x8x512xbf16>, %kv: tensor<?x512xbf16>, %i: tensor<4x16xi32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{result type 'tensor<4x8x512xf32>' must equal the query type 'tensor<4x8x512xbf16>'}}
  %0 = v4a.sparse_attention %q, %kv, %i, %s {scale = 0.04 : f64} : tensor<4x8x512xbf16>, tensor<?x512xbf16>, tensor<4x16xi32>, tensor<8xf32> -> tensor<4x8x512xf32>
  return
}

// -----

func.func @attn_kv(%q: tensor<4x8x512xbf16>, %kv: tensor<?x448xbf16>, %i: tensor<4x16xi32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{kv width (448) must equal query head width (512)}}
  %0 = v4a.sparse_attention %q, %kv, %i, %s {scale = 0.04 : f64} : tensor<4x8x512xbf16>, tensor<?x448xbf16>, tensor<4x16xi32>, tensor<8xf32> -> tensor<4x8x512xbf16>
  return
}

// -----

func.func @attn_rows(%q: tensor<4x8x512xbf16>, %kv: tensor<?x512xbf16>, %i: tensor<3x16xi32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{index rows (3) must equal query rows (4)}}
  %0 = v4a.sparse_attention %q, %kv, %i, %s {scale = 0.04 : f64} : tensor<4x8x512xbf16>, tensor<?x512xbf16>, tensor<3x16xi32>, tensor<8xf32> -> tensor<4x8x512xbf16>
  return
}

// -----

func.func @attn_sink(%q: tensor<4x8x512xbf16>, %kv: tensor<?x512xbf16>, %i: tensor<4x16xi32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{sink size (4) must equal query heads (8)}}
  %0 = v4a.sparse_attention %q, %kv, %i, %s {scale = 0.04 : f64} : tensor<4x8x512xbf16>, tensor<?x512xbf16>, tensor<4x16xi32>, tensor<4xf32> -> tensor<4x8x512xbf16>
  return
}

// -----

func.func @attn_index_type(%q: tensor<4x8x512xbf16>, %kv: tensor<?x512xbf16>, %i: tensor<4x16xi64>, %s: tensor<8xf32>) {
  // expected-error @+1 {{operand #2 must be 2D tensor of 32-bit signless integer values}}
  %0 = v4a.sparse_attention %q, %kv, %i, %s {scale = 0.04 : f64} : tensor<4x8x512xbf16>, tensor<?x512xbf16>, tensor<4x16xi64>, tensor<8xf32> -> tensor<4x8x512xbf16>
  return
}

// -----

func.func @output_groups(%o: tensor<?x3x512xbf16>, %a: tensor<64x768xbf16>, %b: tensor<64x64xbf16>) {
  // expected-error @+1 {{heads * head_dim (1536) must be divisible by groups (5)}}
  %0 = v4a.grouped_output %o, %a, %b {groups = 5 : i64} : tensor<?x3x512xbf16>, tensor<64x768xbf16>, tensor<64x64xbf16> -> tensor<?x64xbf16>
  return
}

// -----

func.func @output_woa_cols(%o: tensor<?x4x512xbf16>, %a: tensor<64x512xbf16>, %b: tensor<64x64xbf16>) {
  // expected-error @+1 {{wo_a columns (512) must equal heads * head_dim / groups (1024)}}
  %0 = v4a.grouped_output %o, %a, %b {groups = 2 : i64} : tensor<?x4x512xbf16>, tensor<64x512xbf16>, tensor<64x64xbf16> -> tensor<?x64xbf16>
  return
}

// -----

func.func @output_woa_rows(%o: tensor<?x4x512xbf16>, %a: tensor<63x1024xbf16>, %b: tensor<64x63xbf16>) {
  // expected-error @+1 {{wo_a rows (63) must be divisible by groups (2)}}
  %0 = v4a.grouped_output %o, %a, %b {groups = 2 : i64} : tensor<?x4x512xbf16>, tensor<63x1024xbf16>, tensor<64x63xbf16> -> tensor<?x64xbf16>
  return
}

// -----

func.func @output_wob_cols(%o: tensor<?x4x512xbf16>, %a: tensor<64x1024xbf16>, %b: tensor<64x32xbf16>) {
  // expected-error @+1 {{wo_b columns (32) must equal wo_a rows (64)}}
  %0 = v4a.grouped_output %o, %a, %b {groups = 2 : i64} : tensor<?x4x512xbf16>, tensor<64x1024xbf16>, tensor<64x32xbf16> -> tensor<?x64xbf16>
  return
}

// -----

func.func @output_rows(%o: tensor<4x4x512xbf16>, %a: tensor<64x1024xbf16>, %b: tensor<64x64xbf16>) {
  // expected-error @+1 {{result rows (2) must equal input rows (4)}}
  %0 = v4a.grouped_output %o, %a, %b {groups = 2 : i64} : tensor<4x4x512xbf16>, tensor<64x1024xbf16>, tensor<64x64xbf16> -> tensor<2x64xbf16>
  return
}

// -----

func.func @output_width(%o: tensor<?x4x512xbf16>, %a: tensor<64x1024xbf16>, %b: tensor<64x64xbf16>) {
  // expected-error @+1 {{result width (32) must equal wo_b rows (64)}}
  %0 = v4a.grouped_output %o, %a, %b {groups = 2 : i64} : tensor<?x4x512xbf16>, tensor<64x1024xbf16>, tensor<64x64xbf16> -> tensor<?x32xbf16>
  return
}

// -----

func.func @output_scale(%o: tensor<?x4x512xbf16>, %a: tensor<64x1024xbf16>, %b: tensor<64x64xf8E4M3FN>) {
  // expected-error @+1 {{f8E4M3FN weight 'wo_b' needs a block scale operand}}
  %0 = v4a.grouped_output %o, %a, %b {groups = 2 : i64} : tensor<?x4x512xbf16>, tensor<64x1024xbf16>, tensor<64x64xf8E4M3FN> -> tensor<?x64xbf16>
  return
}

// -----

func.func @linear_k_block_fp8(%x: tensor<4x128xbf16>, %w: tensor<64x128xf8E4M3FN>, %s: tensor<1x1xf8E8M0FNU>) {
  // expected-error @+1 {{takes k_block only with a bf16 or f32 weight}}
  %0 = v4a.linear %x, %w scale %s {k_block = 128 : i64} : tensor<4x128xbf16>, tensor<64x128xf8E4M3FN>, tensor<1x1xf8E8M0FNU> -> tensor<4x64xbf16>
  return
}

// -----

func.func @linear_k_block_positive(%x: tensor<4x128xbf16>, %w: tensor<64x128xbf16>) {
  // expected-error @+1 {{attribute 'k_block' failed to satisfy constraint}}
  %0 = v4a.linear %x, %w {k_block = 0 : i64} : tensor<4x128xbf16>, tensor<64x128xbf16> -> tensor<4x64xbf16>
  return
}

// -----

func.func @lora_width(%o: tensor<?x4x512xbf16>, %a: tensor<64x1024xbf16>) {
  // expected-error @+1 {{result width (32) must equal wo_a rows (64)}}
  %0 = v4a.grouped_output %o, %a {groups = 2 : i64} : tensor<?x4x512xbf16>, tensor<64x1024xbf16> -> tensor<?x32xbf16>
  return
}

// -----

func.func @lora_bf16(%o: tensor<?x4x512xbf16>, %a: tensor<64x1024xbf16>) {
  // expected-error @+1 {{without wo_b gives wo_a's bf16 product, not 'f32'}}
  %0 = v4a.grouped_output %o, %a {groups = 2 : i64} : tensor<?x4x512xbf16>, tensor<64x1024xbf16> -> tensor<?x64xf32>
  return
}

// -----

func.func @wo_b_scale_alone(%o: tensor<?x4x512xbf16>, %a: tensor<64x1024xbf16>, %s: tensor<1x1xf8E8M0FNU>) {
  // expected-error @+1 {{takes a wo_b scale only with wo_b}}
  %0 = "v4a.grouped_output"(%o, %a, %s) <{groups = 2 : i64, operandSegmentSizes = array<i32: 1, 1, 0, 0, 1>}> : (tensor<?x4x512xbf16>, tensor<64x1024xbf16>, tensor<1x1xf8E8M0FNU>) -> tensor<?x64xbf16>
  return
}

// -----

func.func @split_width(%y: tensor<4x96xf32>) {
  // expected-error @+1 {{the parts' total width (80) must equal input width (96)}}
  %0:2 = v4a.split_columns %y : tensor<4x96xf32> -> tensor<4x64xbf16>, tensor<4x16xf32>
  return
}

// -----

func.func @split_rows(%y: tensor<4x96xf32>) {
  // expected-error @+1 {{part rows (5) must equal input rows (4)}}
  %0:2 = v4a.split_columns %y : tensor<4x96xf32> -> tensor<4x64xbf16>, tensor<5x32xbf16>
  return
}

// -----

func.func @split_bf16(%y: tensor<?x96xbf16>) {
  // expected-error @+1 {{takes bf16 parts of a bf16 input, not 'f32'}}
  %0:2 = v4a.split_columns %y : tensor<?x96xbf16> -> tensor<?x64xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @split_f16(%y: tensor<?x96xf16>) {
  // expected-error @+1 {{operand #0 must be 2D tensor of bfloat16 type or 32-bit float values}}
  %0 = v4a.split_columns %y : tensor<?x96xf16> -> tensor<?x96xbf16>
  return
}

// -----

func.func @split_dynamic(%y: tensor<?x?xf32>) {
  // expected-error @+1 {{needs parts of a static width}}
  %0 = v4a.split_columns %y : tensor<?x?xf32> -> tensor<?x?xf32>
  return
}

// -----

func.func @split_none(%y: tensor<?x96xf32>) {
  // expected-error @+1 {{needs at least one part}}
  "v4a.split_columns"(%y) : (tensor<?x96xf32>) -> ()
  return
}
