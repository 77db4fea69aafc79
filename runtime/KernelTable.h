//===- KernelTable.h - the compiled kernels the CPU backend calls -*- C++
//-*-===//
//
// Entry points of the kernels compiled for one model (see lib/JIT/Kernels.h
// for their semantics). Buffers are row-major; f32 activations hold values
// already rounded as the specification says.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_RUNTIME_KERNELTABLE_H
#define V4A_RUNTIME_KERNELTABLE_H

#include "runtime/Memref.h"

#include <cstdint>
#include <map>

namespace v4a::rt {

using F1 = Memref<float, 1>;
using F2 = Memref<float, 2>;
using F3 = Memref<float, 3>;
using B2 = Memref<uint8_t, 2>;
using I1 = Memref<int64_t, 1>;
using I2 = Memref<int32_t, 2>;
using E1 = Memref<int32_t, 1>;

struct KernelTable {
  void (*linear)(F2 *x, F2 *w, F2 *out) = nullptr;    // bf16 result
  void (*linearF32)(F2 *x, F2 *w, F2 *out) = nullptr; // f32 result
  void (*linearFP8)(F2 *x, B2 *w, B2 *scale, F2 *out) = nullptr;
  void (*rmsNorm)(F2 *x, F1 *weight, F2 *out) = nullptr;
  void (*rmsNormHeads)(F3 *x, F3 *out) = nullptr;
  /// RoPE for window-only layers (rope_theta) and compressed layers
  /// (compress_rope_theta with YaRN); rank 3 forward and inverse, rank 2.
  struct Rope {
    void (*heads)(F3 *x, I1 *positions, F3 *out) = nullptr;
    void (*headsInverse)(F3 *x, I1 *positions, F3 *out) = nullptr;
    void (*rows)(F2 *x, I1 *positions, F2 *out) = nullptr;
  } ropePlain, ropeCompressed;
  void (*quantKv)(F2 *x, F2 *out) = nullptr;       // e4m3, 64, first D-R
  void (*quantFp4Heads)(F3 *x, F3 *out) = nullptr; // e2m1, 32
  void (*quantFp4Rows)(F2 *x, F2 *out) = nullptr;
  void (*hadamardHeads)(F3 *x, F3 *out) = nullptr; // width Di
  void (*hadamardRows)(F2 *x, F2 *out) = nullptr;
  using CompressStep = void (*)(F2 *kv, F2 *score, F2 *ape, I1 *positions,
                                F3 *stateKv, F3 *stateScore, F2 *entry,
                                E1 *emitted, F3 *newKv, F3 *newScore);
  /// Indexed by compress ratio; the indexer's ratio-4 overlap compressor of
  /// width 2*Di is `indexerCompress`.
  std::map<int64_t, CompressStep> compressStep;
  CompressStep indexerCompress = nullptr;
  using IndexerScore = void (*)(F3 *q, F2 *keys, F2 *weights, I1 *positions,
                                F2 *out);
  std::map<int64_t, IndexerScore> indexerScore;
  void (*topk)(F2 *scores, I2 *out) = nullptr;
  void (*topkInBlocks)(F2 *scores, I2 *blocks, I2 *out) = nullptr;
  void (*blockTopk)(F2 *scores, I2 *out) = nullptr;
  void (*attention)(F3 *q, F2 *kv, I2 *indices, F1 *sink, F3 *out) = nullptr;
  void (*groupedOutput)(F3 *o, F2 *woA, F2 *woB, F2 *out) = nullptr;
  /// wo_a is always bf16 here: the runtime dequantizes an fp8 wo_a at load.
  void (*groupedOutputFP8WoB)(F3 *o, F2 *woA, B2 *woB, B2 *scaleB,
                              F2 *out) = nullptr;
};

} // namespace v4a::rt

#endif // V4A_RUNTIME_KERNELTABLE_H
