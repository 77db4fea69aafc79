// A probe of a scoring structure for the indexer's MXFP4 keys, to measure
// before the family is rebuilt on it (bench/indexer-notes.md, "A probe of
// e4m3 MMAs with the head sum on the tensor cores").
//
// score(t, j) = sum_h bf16(relu(q_h . k_j)) * w_h, with
// - the keys' e2m1 codes turned into e4m3 bytes by byte permutes of a table
//   shifted by the block scale's distance from the row's first one, as the
//   A fragments of e4m3 wgmma (A from registers), or, in the two-role form,
//   stored into an e4m3 tile in shared memory by a producer warpgroup for a
//   consumer warpgroup's MMAs (A and B from shared memory);
// - the query as per-head e4m3 (q / 2^u_h, exact for fp4-simulated rows
//   whose block scales span at most 8 binades), B in shared memory;
// - the head sum as a second wgmma: relu(dot) rounded to bf16 (the
//   reference rounds its dot products to bf16) times the weights
//   (w_h 2^u_h, bf16) in every column of an N = 8 B.
// Two forms of the sign: "split" puts positive and negative codes in their
// own K halves (against q and -q: seven operations for eight values, twice
// the MMA's K); "signed" sets the sign per byte (eleven operations for
// eight values). "pipelined" issues the next tile's dot products before a
// tile's scores are offered. Offers go against a fixed floor; there is no
// cut and no merge.
//
// Checks every form against a CPU computation of the same scores on fresh
// random fp4-simulated data (poisoned outputs), counts the picks (k = 512)
// that differ from main's scores (f32 relu(dot) w summed in f32) and from
// the reference's (every step rounded to bf16), then times each form with
// CUDA events (best of 20).
//
// Build here (from the repository root; the host side encodes keys with
// the project's own row codec):
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17 -I. -o probe
//   bench/probes/indexer_fp8_mma.cu core/CacheLayout.cpp core/Numerics.cpp
// Run there: probe TOKENS KEYS SPLITS [CHECKED_TOKENS [SEED]]

#include "core/CacheLayout.h"
#include "core/Numerics.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iterator>
#include <vector>

namespace layout = v4a::layout;
namespace num = v4a::num;

#define CHECK(x)                                                               \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,                  \
                   cudaGetErrorString(e_));                                    \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

constexpr int kHeads = 64, kDim = 128, kPageRows = 64;
constexpr int kValueBytes = kDim / 2, kScaleBytes = kDim / 32;
constexpr int kPageBytes = kPageRows * (kValueBytes + kScaleBytes);
constexpr int kThreads = 128, kStages = 4, kCandidates = 2048;
constexpr int kStageBytes = 2 * kThreads * 16 + 2 * kThreads * 4;

struct Params {
  const uint8_t *cache;
  const int *pages;  // [token][pagesPerToken]
  const uint16_t *q; // bf16 bits [token][head][dim]
  const float *w;    // [token][head], bf16-exact
  int pagesPerToken, splits;
  unsigned long long floorKey; // offers below it are not kept
  float *scores;               // [token][pagesPerToken * 64] or null
  unsigned *counts;            // [token * splits]: offers kept, wide rows
  const uint8_t *prepared;     // [token][9 KiB]: query and weight tiles
};

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t s) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s));
  return d;
}

__device__ __forceinline__ uint32_t smem(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void copy16(uint32_t dst, const void *src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst),
               "l"(src));
}
__device__ __forceinline__ void copy4(uint32_t dst, const void *src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void commitCopies() {
  asm volatile("cp.async.commit_group;");
}
template <int N> __device__ __forceinline__ void waitCopies() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

__device__ __forceinline__ void mmaFence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void mmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> __device__ __forceinline__ void mmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// 128-byte swizzle, K-major: `stride` bytes between 8-row groups.
__device__ __forceinline__ uint64_t descriptor(uint32_t address,
                                               uint32_t stride) {
  return uint64_t((address >> 4) & 0x3FFF) | (uint64_t(1) << 16) |
         (uint64_t(stride >> 4) << 32) | (uint64_t(1) << 62);
}

// Byte offset of K byte `k` of row `n` in a K-major tile of `atoms` swizzle
// atoms (128 bytes of K each) per 8-row group.
// An m64n64 wgmma's 32 f32 accumulators a thread: its asm operands %0-%31
// and their place in the instruction.
#define ACCUMULATOR_OPERANDS(d)                                                \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),      \
      "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),             \
      "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),         \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),         \
      "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),         \
      "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),         \
      "+f"(d[31])
#define ACCUMULATOR_REGISTERS                                                  \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,"    \
  "%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}"

// Generic-proxy writes to shared memory made visible to the tensor cores.
__device__ __forceinline__ void fenceSharedForAsync() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ int swizzled(int n, int k, int atoms) {
  int chunk = (k % 128) / 16;
  return (n / 8) * atoms * 1024 + (k / 128) * 1024 + (n % 8) * 128 +
         ((chunk ^ (n % 8)) * 16) + k % 16;
}

__device__ __forceinline__ void mmaE4M3(float (&d)[32], const uint32_t (&a)[4],
                                        uint64_t descB, int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %36, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3."
               "e4m3 " ACCUMULATOR_REGISTERS
               ", {%32,%33,%34,%35}, %37, p, 1, 1;\n}"
               : ACCUMULATOR_OPERANDS(d)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(accumulate),
                 "l"(descB));
}

__device__ __forceinline__ void mmaHeadSum(float (&d)[4],
                                           const uint32_t (&a)[4],
                                           uint64_t descB, int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %8, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, %9, p, 1, 1, 0;\n}"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(accumulate),
                 "l"(descB));
}

__device__ __forceinline__ uint32_t reluBF16x2(float lo, float hi) {
  uint32_t d;
  asm("cvt.rn.relu.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

// The e4m3 bytes of e2m1 magnitudes 0, 0.5, 1, 1.5 and 2, 3, 4, 6.
constexpr uint32_t kTableLow = 0x3C383000u, kTableHigh = 0x4C484440u;

// A constant behind an opaque move, meant to stay in one register instead
// of being rematerialized next to every use. It did not hold: ptxas put it
// in a uniform register and moved it into a vector one at every permute
// (indexer-notes.md, call 4); the kPrepared form reads it from shared
// memory instead.
__device__ __forceinline__ uint32_t pinned(uint32_t v) {
  uint32_t r;
  asm volatile("mov.b32 %0, %1;" : "=r"(r) : "r"(v));
  return r;
}

// One key row's share of a thread (its 16 bytes of block `c`, the row's
// scale word) as A fragment words: word 2s + x of k-step s, x = 0 for the
// fragment's first K half, 1 for its second. Values are in units of the
// row's first block scale; a block more than 5 binades below it or 6 above
// does not fit this table (returns true: a wide row).
template <bool kSplit>
__device__ __forceinline__ bool decodeRow(uint4 v, uint32_t scales, int shift,
                                          uint32_t signBytes,
                                          uint32_t (&out)[kSplit ? 16 : 8]) {
  int d = int((scales >> shift) & 0xFF) - int(scales & 0xFF);
  uint32_t lo = kTableLow + uint32_t(d) * 0x08080800u,
           hi = kTableHigh + uint32_t(d) * 0x08080808u;
  uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t w = words[i];
    if constexpr (kSplit) {
      uint32_t x = w ^ 0x88888888u;
      out[4 * i + 0] = prmt(lo, hi, w);
      out[4 * i + 1] = prmt(lo, hi, x);
      out[4 * i + 2] = prmt(lo, hi, w >> 16);
      out[4 * i + 3] = prmt(lo, hi, x >> 16);
    } else {
      // Magnitudes by the codes' low three bits; the sign from a permute
      // in sign mode of 0x80 bytes: 0x80 for a positive code, 0xFF for a
      // negative one. Sign mode copies a byte's bit 7 into every bit, so
      // bit 7 is the same either way: the sign is bit 0, moved up.
      uint32_t m = w & 0x77777777u;
      uint32_t sl = prmt(signBytes, signBytes, w);
      uint32_t sh = prmt(signBytes, signBytes, w >> 16);
      out[2 * i + 0] = prmt(lo, hi, m) | ((sl << 7) & 0x80808080u);
      out[2 * i + 1] = prmt(lo, hi, m >> 16) | ((sh << 7) & 0x80808080u);
    }
  }
  return unsigned(d + 5) > 11u;
}

__device__ __forceinline__ uint4 loadShared16(uint32_t address) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(address));
  return v;
}
__device__ __forceinline__ uint32_t loadShared4(uint32_t address) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(address));
  return v;
}

__device__ __forceinline__ unsigned long long rankKey(float score, int row) {
  uint32_t bits = __float_as_uint(score);
  bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (static_cast<unsigned long long>(bits) << 32) |
         static_cast<uint32_t>(~row);
}

// The head sum of a tile: relu(dot) rounded to bf16 as the A fragments of
// m64n8k16 MMAs against the weight tile, issued and committed (the caller
// waits). sums[0] is key g's score, sums[2] key g + 8's.
__device__ __forceinline__ void
issueHeadSums(const float (&acc)[32], uint64_t weightDesc, float (&sums)[4]) {
  uint32_t h[16];
#pragma unroll
  for (int i = 0; i < 16; ++i)
    h[i] = reluBF16x2(acc[2 * i], acc[2 * i + 1]);
  mmaFence();
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    uint32_t a[4] = {h[4 * t], h[4 * t + 1], h[4 * t + 2], h[4 * t + 3]};
    mmaHeadSum(sums, a, weightDesc + 2 * t, t > 0);
  }
  mmaCommit();
}

// Lane c of a quad offers key g (c == 0) or g + 8 (c == 1): its score is
// stored when the check asks for scores, and kept in a ring of `room`
// candidates (counted in kept[0]) when above the floor.
__device__ __forceinline__ void
offerScore(const Params &p, int token, int row, float score, int c, int lane,
           unsigned *kept, unsigned long long *candidates, int room) {
  if (p.scores && c < 2)
    p.scores[size_t(token) * p.pagesPerToken * kPageRows + row] = score;
  unsigned long long key = rankKey(score, row);
  bool take = c < 2 && key > p.floorKey;
  unsigned ballot = __ballot_sync(0xffffffffu, take);
  if (ballot) {
    unsigned base = 0;
    if (lane == __ffs(ballot) - 1)
      base = atomicAdd(&kept[0], __popc(ballot));
    base = __shfl_sync(0xffffffffu, base, __ffs(ballot) - 1);
    if (take)
      candidates[(base + __popc(ballot & ((1u << lane) - 1))) % room] = key;
  }
}

// After the block's last offer: its kept offers and wide rows.
__device__ __forceinline__ void reportCounts(const Params &p, int thread,
                                             const unsigned *kept) {
  __syncthreads();
  if (thread == 0) {
    p.counts[2 * blockIdx.x] = kept[0];
    p.counts[2 * blockIdx.x + 1] = kept[1];
  }
}

// The token's query tile (e4m3, per-head unit 2^u_h, in the K order of
// the A fragments) and weight tile (w_h 2^u_h, bf16, in all 8 columns):
// thread t (of 128) takes half t % 2 of head t / 2. `queryTile` and
// `weightTile` may be shared or global memory.
template <bool kSplit>
__device__ void buildQueryTiles(const Params &p, int token, int thread,
                                uint8_t *queryTile, uint8_t *weightTile) {
  constexpr int kAtoms = kSplit ? 2 : 1;
  const int head = thread / 2, half = thread % 2;
  const uint16_t *row = p.q + (size_t(token) * kHeads + head) * kDim;
  float values[64];
  float most = 0.0f;
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    values[i] = __uint_as_float(uint32_t(row[64 * half + i]) << 16);
    most = fmaxf(most, fabsf(values[i]));
  }
  most = fmaxf(most, __shfl_xor_sync(0xffffffffu, most, 1));
  // 2^-u brings the head's largest value into [4, 8).
  int u = most > 0.0f ? ((__float_as_uint(most) >> 23) & 0xFF) - 127 - 2 : 0;
  float down = __uint_as_float(uint32_t(127 - u) << 23);
#pragma unroll
  for (int i = 0; i < 64; i += 2) {
    int dim = 64 * half + i; // and dim + 1
    uint16_t pair;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;"
        : "=h"(pair)
        : "f"(values[i + 1] * down), "f"(values[i] * down));
    for (int e = 0; e < 2; ++e) {
      int f = dim + e;
      uint8_t code = (pair >> (8 * e)) & 0xFF;
      int blk = f / 32, inBlock = f % 32, word = inBlock / 8,
          inWord = inBlock % 8, hiHalf = inWord / 4, j = inWord % 4;
      if (kSplit) {
        int s = 2 * word + hiHalf;
        queryTile[swizzled(head, 32 * s + 4 * blk + j, kAtoms)] = code;
        queryTile[swizzled(head, 32 * s + 16 + 4 * blk + j, kAtoms)] =
            code ^ 0x80;
      } else {
        queryTile[swizzled(head, 32 * word + 16 * hiHalf + 4 * blk + j,
                           kAtoms)] = code;
      }
    }
  }
  if (half == 0) {
    float wt =
        p.w[token * kHeads + head] * __uint_as_float(uint32_t(127 + u) << 23);
    uint16_t bits = __bfloat16_as_ushort(__float2bfloat16_rn(wt));
    for (int n = 0; n < 8; ++n)
      *reinterpret_cast<uint16_t *>(weightTile + swizzled(n, 2 * head, 1)) =
          bits;
  }
}

// The query and weight tiles of every token, once (kPrepared forms).
__global__ void __launch_bounds__(kThreads) prepareQueries(Params p) {
  uint8_t *out = const_cast<uint8_t *>(p.prepared) + size_t(blockIdx.x) * 9216;
  buildQueryTiles<false>(p, blockIdx.x, threadIdx.x, out, out + 8192);
}

template <bool kSplit, bool kPipelined, bool kPrepared = false>
__global__ void __launch_bounds__(kThreads) scoreKeys(Params p) {
  constexpr int kSteps = kSplit ? 8 : 4; // k32 steps of the dot products
  constexpr int kAtoms = kSteps / 4;     // swizzle atoms along K
  extern __shared__ __align__(1024) uint8_t rawShared[];
  uint8_t *shared = reinterpret_cast<uint8_t *>(
      (reinterpret_cast<uintptr_t>(rawShared) + 1023) & ~uintptr_t(1023));
  uint8_t *queryTile = shared;                         // 8 groups x kAtoms KiB
  uint8_t *weightTile = queryTile + 8 * kAtoms * 1024; // 1 KiB
  uint8_t *ring = weightTile + 1024;
  unsigned long long *candidates =
      reinterpret_cast<unsigned long long *>(ring + kStages * kStageBytes);
  unsigned *kept = reinterpret_cast<unsigned *>(candidates + kCandidates);

  const int thread = threadIdx.x, warp = thread / 32, lane = thread % 32;
  const int g = lane / 4, c = lane % 4;
  const int token = blockIdx.x / p.splits, split = blockIdx.x % p.splits;
  const int tilesPer = (p.pagesPerToken + p.splits - 1) / p.splits;
  const int firstTile = split * tilesPer;
  const int tiles = max(0, min(p.pagesPerToken - firstTile, tilesPer));

  if constexpr (kPrepared) {
    // Copy the token's tiles, made once by prepareQueries.
    const uint8_t *from = p.prepared + size_t(token) * 9216;
    for (int i = thread; i < 9216 / 16; i += kThreads)
      copy16(smem(queryTile) + 16 * i, from + 16 * i);
    commitCopies();
    waitCopies<0>();
  } else {
    buildQueryTiles<kSplit>(p, token, thread, queryTile, weightTile);
  }
  if (thread == 0)
    kept[0] = 0, kept[1] = 0, kept[2] = 0x80808080u;
  fenceSharedForAsync();
  __syncthreads();

  const int r0 = 16 * warp + g, r1 = r0 + 8;
  const uint32_t ringBase = smem(ring);
  const uint8_t *pageBase = p.cache + r0 * kValueBytes + c * 16;
  const int *pageList = p.pages + size_t(token) * p.pagesPerToken + firstTile;
  auto issue = [&](int tile) {
    if (tile < tiles) {
      const uint8_t *page = pageBase + size_t(pageList[tile]) * kPageBytes;
      uint32_t stage = ringBase + (tile % kStages) * kStageBytes + thread * 16;
      copy16(stage, page);
      copy16(stage + 2048, page + 8 * kValueBytes);
      const uint8_t *scales = page + kPageRows * kValueBytes - c * 16 +
                              r0 * (kScaleBytes - kValueBytes);
      uint32_t scaleStage = stage + 4096 - thread * 12;
      copy4(scaleStage, scales);
      copy4(scaleStage + 512, scales + 8 * kScaleBytes);
    }
    commitCopies();
  };
  for (int i = 0; i < kStages - 1; ++i)
    issue(i);

  const uint64_t queryDesc = descriptor(smem(queryTile), kAtoms * 1024);
  const uint64_t weightDesc = descriptor(smem(weightTile), 1024);
  // Read from shared memory, so that it lives in a vector register.
  const uint32_t signBytes =
      kPrepared ? loadShared4(smem(kept + 2)) : pinned(0x80808080u);
  const int shift = 8 * c;
  unsigned wide = 0;
  float acc[32];
  uint32_t f0[kSplit ? 16 : 8], f1[kSplit ? 16 : 8];
  uint32_t s0 = 0, s1 = 0; // the scale words of the tile whose MMAs run
  // Waits for tile `tile`'s copies, decodes it and issues its dot products.
  auto startTile = [&](int tile) {
    issue(tile + kStages - 1);
    waitCopies<kStages - 1>();
    uint32_t stage = ringBase + (tile % kStages) * kStageBytes;
    uint4 v0 = loadShared16(stage + thread * 16);
    uint4 v1 = loadShared16(stage + 2048 + thread * 16);
    s0 = loadShared4(stage + 4096 + thread * 4);
    s1 = loadShared4(stage + 4096 + 512 + thread * 4);
    wide += decodeRow<kSplit>(v0, s0, shift, signBytes, f0);
    wide += decodeRow<kSplit>(v1, s1, shift, signBytes, f1);
    mmaFence();
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      uint32_t a[4] = {f0[2 * s], f1[2 * s], f0[2 * s + 1], f1[2 * s + 1]};
      mmaE4M3(acc, a, queryDesc + (((s / 4) * 1024 + (s % 4) * 32) >> 4),
              s > 0);
    }
    mmaCommit();
  };
  if (kPipelined && tiles > 0)
    startTile(0);
  for (int tile = 0; tile < tiles; ++tile) {
    if (!kPipelined)
      startTile(tile);
    mmaWait<0>();
    uint32_t mineScales = c == 0 ? s0 : s1;

    float sums[4] = {0, 0, 0, 0};
    issueHeadSums(acc, weightDesc, sums);
    if (kPipelined) {
      // The next tile's dot products run while this one's are offered.
      if (tile + 1 < tiles) {
        startTile(tile + 1);
        mmaWait<1>();
      } else {
        mmaWait<0>();
      }
    } else {
      mmaWait<0>();
    }

    // Scaled by the offered row's first block scale.
    int mine = c == 0 ? r0 : r1;
    float score = (c == 0 ? sums[0] : sums[2]) *
                  __uint_as_float((mineScales & 0xFF) << 23);
    offerScore(p, token, (firstTile + tile) * kPageRows + mine, score, c, lane,
               kept, candidates, kCandidates);
  }
  if (wide)
    atomicAdd(&kept[1], wide);
  reportCounts(p, thread, kept);
}

__device__ __forceinline__ void barrierInit(uint32_t address, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(address),
               "r"(count));
}
__device__ __forceinline__ void barrierArrive(uint32_t address) {
  asm volatile("{\n.reg .b64 state;\n"
               "mbarrier.arrive.shared::cta.b64 state, [%0];\n}" ::"r"(address)
               : "memory");
}
__device__ __forceinline__ void barrierWait(uint32_t address, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile("{\n.reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done)
                 : "r"(address), "r"(parity)
                 : "memory");
  } while (!done);
}
__device__ __forceinline__ void storeShared16(uint32_t address, uint32_t a,
                                              uint32_t b, uint32_t c,
                                              uint32_t d) {
  asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" ::"r"(address), "r"(a),
               "r"(b), "r"(c), "r"(d)
               : "memory");
}

__device__ __forceinline__ void mmaE4M3Shared(float (&d)[32], uint64_t descA,
                                              uint64_t descB, int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %32, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3."
               "e4m3 " ACCUMULATOR_REGISTERS ", %33, %34, p, 1, 1;\n}"
               : ACCUMULATOR_OPERANDS(d)
               : "r"(accumulate), "l"(descA), "l"(descB));
}

// Two warpgroups a block: the first decodes each tile's keys into an e4m3
// tile in shared memory (a ring of kTiles, handed over by mbarriers), the
// second multiplies with A and B from shared memory, sums the heads and
// offers the scores. The two instruction streams overlap on the SM.
constexpr int kRoleThreads = 256, kTiles = 4, kTileBytes = 64 * 128;
constexpr int kStagingBytes = 2 * 128 * 16 + 128 * 4;

// kRing: the producer's copy stages; kRoom: the offers' ring (its shared
// memory decides the blocks an SM: 2048 -> 2, 1024 with 4 stages -> 3).
template <bool kPipelined, int kRing = kStages, int kRoom = kCandidates>
__global__ void __launch_bounds__(kRoleThreads) scoreKeysRoles(Params p) {
  extern __shared__ __align__(1024) uint8_t rawShared[];
  uint8_t *shared = reinterpret_cast<uint8_t *>(
      (reinterpret_cast<uintptr_t>(rawShared) + 1023) & ~uintptr_t(1023));
  uint8_t *queryTile = shared;            // 8 KiB
  uint8_t *weightTile = queryTile + 8192; // 1 KiB
  uint8_t *keyTiles = weightTile + 1024;  // kTiles x 8 KiB
  float *factors = reinterpret_cast<float *>(keyTiles + kTiles * kTileBytes);
  uint8_t *staging = reinterpret_cast<uint8_t *>(factors + kTiles * 64);
  unsigned long long *candidates =
      reinterpret_cast<unsigned long long *>(staging + kRing * kStagingBytes);
  unsigned long long *barriers = candidates + kRoom; // full, empty
  unsigned *kept = reinterpret_cast<unsigned *>(barriers + 2 * kTiles);

  const int thread = threadIdx.x;
  const int token = blockIdx.x / p.splits, split = blockIdx.x % p.splits;
  const int tilesPer = (p.pagesPerToken + p.splits - 1) / p.splits;
  const int firstTile = split * tilesPer;
  const int tiles = max(0, min(p.pagesPerToken - firstTile, tilesPer));

  {
    // The query in natural dim order: four threads a head.
    const int head = thread / 4, quarter = thread % 4;
    const uint16_t *row =
        p.q + (size_t(token) * kHeads + head) * kDim + 32 * quarter;
    float values[32];
    float most = 0.0f;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      values[i] = __uint_as_float(uint32_t(row[i]) << 16);
      most = fmaxf(most, fabsf(values[i]));
    }
    most = fmaxf(most, __shfl_xor_sync(0xffffffffu, most, 1));
    most = fmaxf(most, __shfl_xor_sync(0xffffffffu, most, 2));
    int u = most > 0.0f ? ((__float_as_uint(most) >> 23) & 0xFF) - 127 - 2 : 0;
    float down = __uint_as_float(uint32_t(127 - u) << 23);
#pragma unroll
    for (int i = 0; i < 32; i += 2) {
      uint16_t pair;
      asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;"
          : "=h"(pair)
          : "f"(values[i + 1] * down), "f"(values[i] * down));
      *reinterpret_cast<uint16_t *>(queryTile +
                                    swizzled(head, 32 * quarter + i, 1)) = pair;
    }
    if (quarter == 0) {
      float wt =
          p.w[token * kHeads + head] * __uint_as_float(uint32_t(127 + u) << 23);
      uint16_t bits = __bfloat16_as_ushort(__float2bfloat16_rn(wt));
      for (int n = 0; n < 8; ++n)
        *reinterpret_cast<uint16_t *>(weightTile + swizzled(n, 2 * head, 1)) =
            bits;
    }
  }
  const uint32_t fullBase = smem(barriers), emptyBase = fullBase + 8 * kTiles;
  if (thread == 0) {
    kept[0] = 0, kept[1] = 0;
    for (int i = 0; i < kTiles; ++i) {
      barrierInit(fullBase + 8 * i, 128);
      barrierInit(emptyBase + 8 * i, 128);
    }
  }
  fenceSharedForAsync();
  __syncthreads();

  const int *pageList = p.pages + size_t(token) * p.pagesPerToken + firstTile;
  if (thread < 128) {
    // Producer: row thread / 2, blocks 2h and 2h + 1 of it.
    const int r = thread / 2, h = thread % 2;
    const uint32_t stagingBase = smem(staging);
    const uint8_t *rowBase = p.cache + r * kValueBytes + 32 * h;
    auto issue = [&](int tile) {
      if (tile < tiles) {
        const uint8_t *page = rowBase + size_t(pageList[tile]) * kPageBytes;
        uint32_t stage =
            stagingBase + (tile % kRing) * kStagingBytes + thread * 16;
        copy16(stage, page);
        copy16(stage + 2048, page + 16);
        copy4(stagingBase + (tile % kRing) * kStagingBytes + 4096 + thread * 4,
              page - r * kValueBytes - 32 * h + kPageRows * kValueBytes +
                  r * kScaleBytes);
      }
      commitCopies();
    };
    for (int i = 0; i < kRing - 1; ++i)
      issue(i);
    const uint32_t signBytes = pinned(0x80808080u);
    const uint32_t tileBase = smem(keyTiles);
    const int swz = r % 8;
    const uint32_t rowOffset = (r / 8) * 1024 + swz * 128;
    unsigned wide = 0;
    for (int tile = 0; tile < tiles; ++tile) {
      issue(tile + kRing - 1);
      waitCopies<kRing - 1>();
      uint32_t stage = stagingBase + (tile % kRing) * kStagingBytes;
      uint4 va = loadShared16(stage + thread * 16);
      uint4 vb = loadShared16(stage + 2048 + thread * 16);
      uint32_t scales = loadShared4(stage + 4096 + thread * 4);
      uint32_t fa[8], fb[8];
      wide += decodeRow<false>(va, scales, 16 * h, signBytes, fa);
      wide += decodeRow<false>(vb, scales, 16 * h + 8, signBytes, fb);
      int slot = tile % kTiles;
      barrierWait(emptyBase + 8 * slot, ((tile / kTiles) & 1) ^ 1);
      uint32_t dst = tileBase + slot * kTileBytes + rowOffset;
      int chunk = 4 * h;
      storeShared16(dst + ((chunk ^ swz) * 16), fa[0], fa[1], fa[2], fa[3]);
      storeShared16(dst + (((chunk + 1) ^ swz) * 16), fa[4], fa[5], fa[6],
                    fa[7]);
      storeShared16(dst + (((chunk + 2) ^ swz) * 16), fb[0], fb[1], fb[2],
                    fb[3]);
      storeShared16(dst + (((chunk + 3) ^ swz) * 16), fb[4], fb[5], fb[6],
                    fb[7]);
      if (h == 0)
        factors[slot * 64 + r] = __uint_as_float((scales & 0xFF) << 23);
      fenceSharedForAsync();
      barrierArrive(fullBase + 8 * slot);
    }
    if (wide)
      atomicAdd(&kept[1], wide);
  } else {
    const int ct = thread - 128, warp = ct / 32, lane = ct % 32;
    const int g = lane / 4, c = lane % 4;
    const int r0 = 16 * warp + g, r1 = r0 + 8;
    const uint64_t queryDesc = descriptor(smem(queryTile), 1024);
    const uint64_t weightDesc = descriptor(smem(weightTile), 1024);
    const uint64_t keyDesc = descriptor(smem(keyTiles), 1024);
    float acc[32];
    auto startTile = [&](int tile) {
      int slot = tile % kTiles;
      barrierWait(fullBase + 8 * slot, (tile / kTiles) & 1);
      mmaFence();
#pragma unroll
      for (int s = 0; s < 4; ++s)
        mmaE4M3Shared(acc, keyDesc + ((slot * kTileBytes + 32 * s) >> 4),
                      queryDesc + 2 * s, s > 0);
      mmaCommit();
    };
    if (kPipelined && tiles > 0)
      startTile(0);
    for (int tile = 0; tile < tiles; ++tile) {
      int slot = tile % kTiles;
      if (!kPipelined)
        startTile(tile);
      mmaWait<0>();
      int mine = c == 0 ? r0 : r1;
      float factor = factors[slot * 64 + mine];
      barrierArrive(emptyBase + 8 * slot);

      float sums[4] = {0, 0, 0, 0};
      issueHeadSums(acc, weightDesc, sums);
      if (kPipelined && tile + 1 < tiles) {
        startTile(tile + 1);
        mmaWait<1>();
      } else {
        mmaWait<0>();
      }

      float score = (c == 0 ? sums[0] : sums[2]) * factor;
      offerScore(p, token, (firstTile + tile) * kPageRows + mine, score, c,
                 lane, kept, candidates, kRoom);
    }
  }
  reportCounts(p, thread, kept);
}

// ---------------------------------------------------------------- host side

// Rows of the k best scores (score descending, then row ascending).
template <typename T>
static std::vector<int> bestRows(const T *scores, int count, int k) {
  std::vector<int> rows(count);
  for (int i = 0; i < count; ++i)
    rows[i] = i;
  std::partial_sort(
      rows.begin(), rows.begin() + k, rows.end(), [&](int a, int b) {
        return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
      });
  rows.resize(k);
  std::sort(rows.begin(), rows.end());
  return rows;
}
static int differing(const std::vector<int> &a, const std::vector<int> &b) {
  std::vector<int> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(),
                      std::back_inserter(out));
  return int(out.size());
}

int main(int argc, char **argv) {
  int tokens = argc > 1 ? std::atoi(argv[1]) : 128;
  int keys = argc > 2 ? std::atoi(argv[2]) : 16384;
  int splits = argc > 3 ? std::atoi(argv[3]) : 3;
  int checkTokens = argc > 4 ? std::atoi(argv[4]) : 4;
  unsigned seed = argc > 5 ? std::atoi(argv[5]) : unsigned(time(nullptr));
  checkTokens = std::min(checkTokens, tokens);
  int pagesPerToken = keys / kPageRows;
  // The family's MXFP4 key rows; the kernels' page constants follow them.
  const layout::RowLayout keyRow =
      *layout::describeRow(layout::RowKind::IndexMXFP4, kDim);
  if (keyRow.valueBytes != kValueBytes || keyRow.scaleBytes != kScaleBytes) {
    std::fprintf(stderr, "probe: the MXFP4 row layout is not the kernels'\n");
    return 1;
  }
  std::printf("probe: tokens %d, keys %d, splits %d, seed %u\n", tokens, keys,
              splits, seed);
  // xorshift, and a sum of four uniforms for a roughly normal value: fast
  // enough for half a billion values.
  uint64_t state = 0x9E3779B97F4A7C15ull ^ seed;
  auto rng = [&]() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return uint32_t(state >> 32);
  };
  auto normal = [&](auto &) {
    float s = 0;
    for (int i = 0; i < 4; ++i)
      s += float(rng()) * (1.0f / 4294967296.0f);
    return (s - 2.0f) * 1.7320508f;
  };

  // Keys: pages of fp4-simulated rows, each block with its own spread.
  size_t pagesTotal = size_t(tokens) * pagesPerToken;
  std::vector<uint8_t> cache(pagesTotal * kPageBytes);
  std::vector<float> keyValues; // for the checked tokens' pages
  size_t checkedPages = size_t(checkTokens) * pagesPerToken;
  keyValues.resize(checkedPages * kPageRows * kDim);
  std::vector<int> pageOf(pagesTotal);
  for (size_t i = 0; i < pagesTotal; ++i)
    pageOf[i] = int(i);
  for (size_t i = pagesTotal; i > 1; --i)
    std::swap(pageOf[i - 1], pageOf[rng() % i]);
  std::vector<float> row(kDim);
  for (size_t logical = 0; logical < pagesTotal; ++logical)
    for (int r = 0; r < kPageRows; ++r) {
      for (int b = 0; b < 4; ++b) {
        float spread = std::ldexp(1.0f, int(rng() % 3)) * 0.25f;
        for (int i = 0; i < 32; ++i)
          row[32 * b + i] = normal(rng) * spread;
      }
      layout::RowPlace place =
          layout::placeRow(keyRow, kPageRows, pageOf[logical] * kPageRows + r);
      uint8_t *values = cache.data() + place.values,
              *scales = cache.data() + place.scales;
      layout::encodeRow(keyRow, row.data(), values, scales);
      if (logical < checkedPages)
        layout::decodeRow(keyRow, values, scales,
                          &keyValues[(logical * kPageRows + r) * kDim]);
    }
  const std::vector<int> &pages = pageOf;

  // Queries (fp4-simulated, as bf16) and bf16 weights.
  std::vector<uint16_t> q(size_t(tokens) * kHeads * kDim);
  std::vector<float> qv(q.size()), w(size_t(tokens) * kHeads);
  std::vector<uint8_t> codes(kValueBytes + kScaleBytes);
  for (int t = 0; t < tokens; ++t)
    for (int h = 0; h < kHeads; ++h) {
      // fp4 simulation by the key layout's own codec: encode, decode.
      float *values = &qv[(size_t(t) * kHeads + h) * kDim];
      for (int b = 0; b < 4; ++b) {
        float spread = std::ldexp(1.0f, int(rng() % 3)) * 0.5f;
        for (int i = 0; i < 32; ++i)
          row[32 * b + i] = normal(rng) * spread;
      }
      layout::encodeRow(keyRow, row.data(), codes.data(),
                        codes.data() + kValueBytes);
      layout::decodeRow(keyRow, codes.data(), codes.data() + kValueBytes,
                        values);
      for (int i = 0; i < kDim; ++i)
        q[(size_t(t) * kHeads + h) * kDim + i] = num::toBF16Bits(values[i]);
      w[t * kHeads + h] = num::roundBF16(normal(rng) * 0.125f);
    }

  uint8_t *dCache;
  int *dPages;
  uint16_t *dQ;
  float *dW, *dScores;
  unsigned *dCounts;
  CHECK(cudaMalloc(&dCache, cache.size()));
  CHECK(cudaMalloc(&dPages, pages.size() * 4));
  CHECK(cudaMalloc(&dQ, q.size() * 2));
  CHECK(cudaMalloc(&dW, w.size() * 4));
  size_t scoreCount = size_t(tokens) * keys;
  CHECK(cudaMalloc(&dScores, scoreCount * 4));
  CHECK(cudaMalloc(&dCounts, size_t(tokens) * splits * 8));
  uint8_t *dPrepared;
  CHECK(cudaMalloc(&dPrepared, size_t(tokens) * 9216));
  CHECK(cudaMemcpy(dCache, cache.data(), cache.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dPages, pages.data(), pages.size() * 4,
                   cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dQ, q.data(), q.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dW, w.data(), w.size() * 4, cudaMemcpyHostToDevice));

  // Scores of the checked tokens on the CPU: exact dot products (double),
  // relu rounded to bf16, times w, summed in double.
  std::vector<double> want(size_t(checkTokens) * keys), magnitude(want.size()),
      asMain(want.size()), asReference(want.size());
  for (int t = 0; t < checkTokens; ++t)
    for (int j = 0; j < keys; ++j) {
      const float *k = &keyValues[(size_t(t) * keys + j) * kDim];
      double score = 0, sum = 0, referenceSum = 0;
      float mainScore = 0;
      for (int h = 0; h < kHeads; ++h) {
        const float *qq = &qv[(size_t(t) * kHeads + h) * kDim];
        double dot = 0;
        for (int d = 0; d < kDim; ++d)
          dot += double(qq[d]) * k[d];
        float rounded = num::roundBF16(std::max(0.0f, float(dot)));
        score += double(rounded) * w[t * kHeads + h];
        sum += std::fabs(double(rounded) * w[t * kHeads + h]);
        // main's family: f32 relu(dot) * w summed in f32; the reference:
        // each product rounded to bf16, the sum rounded to bf16.
        mainScore += std::max(0.0f, float(dot)) * w[t * kHeads + h];
        referenceSum += double(num::roundBF16(rounded * w[t * kHeads + h]));
      }
      want[size_t(t) * keys + j] = score;
      magnitude[size_t(t) * keys + j] = sum;
      asMain[size_t(t) * keys + j] = mainScore;
      asReference[size_t(t) * keys + j] = num::roundBF16(float(referenceSum));
    }

  bool ok = true;
  const char *names[9] = {"signed",
                          "split",
                          "signed, pipelined",
                          "split, pipelined",
                          "two roles",
                          "two roles, pipelined",
                          "signed, pipelined, query made once a token",
                          "two roles, 8 copy stages",
                          "two roles, 3 blocks an SM"};
  for (int form = 0; form < 9; ++form) {
    bool split = form % 2 == 1 && form < 4;
    bool roles = form == 4 || form == 5 || form == 7 || form == 8;
    int atoms = split ? 2 : 1;
    int ring = form == 7 ? 8 : kStages, room = form == 8 ? 1024 : kCandidates;
    size_t sharedBytes =
        roles ? 1024 + 8192 + 1024 + kTiles * (kTileBytes + 256) +
                    ring * kStagingBytes + room * 8 + 16 * kTiles + 16
              : 1024 + 8 * atoms * 1024 + 1024 + kStages * kStageBytes +
                    kCandidates * 8 + 16;
    void (*kernels[9])(Params) = {scoreKeys<false, false>,
                                  scoreKeys<true, false>,
                                  scoreKeys<false, true>,
                                  scoreKeys<true, true>,
                                  scoreKeysRoles<false>,
                                  scoreKeysRoles<true>,
                                  scoreKeys<false, true, true>,
                                  scoreKeysRoles<false, 8>,
                                  scoreKeysRoles<false, kStages, 1024>};
    auto kernel = kernels[form];
    int threads = roles ? kRoleThreads : kThreads;
    CHECK(cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(sharedBytes)));
    Params prm{dCache, dPages, dQ,      dW,      pagesPerToken,
               splits, 0,      dScores, dCounts, dPrepared};
    if (form == 6) {
      // The query's tiles once a token (in the family: by the kernel that
      // writes the index query), timed on their own.
      cudaEvent_t a, b;
      CHECK(cudaEventCreate(&a));
      CHECK(cudaEventCreate(&b));
      CHECK(cudaEventRecord(a));
      prepareQueries<<<tokens, kThreads>>>(prm);
      CHECK(cudaEventRecord(b));
      CHECK(cudaEventSynchronize(b));
      float ms;
      CHECK(cudaEventElapsedTime(&ms, a, b));
      std::printf("query tiles once a token: %.1f us\n", ms * 1e3);
    }
    // Check: poisoned scores, every score kept.
    CHECK(cudaMemset(dScores, 0xFF, scoreCount * 4));
    kernel<<<tokens * splits, threads, sharedBytes>>>(prm);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::vector<float> got(scoreCount);
    CHECK(cudaMemcpy(got.data(), dScores, scoreCount * 4,
                     cudaMemcpyDeviceToHost));
    std::vector<unsigned> counts(size_t(tokens) * splits * 2);
    CHECK(cudaMemcpy(counts.data(), dCounts, counts.size() * 4,
                     cudaMemcpyDeviceToHost));
    unsigned wide = 0;
    for (size_t i = 0; i < counts.size(); i += 2)
      wide += counts[i + 1];
    double worst = 0;
    size_t off = 0, nonfinite = 0;
    for (int t = 0; t < checkTokens; ++t)
      for (int j = 0; j < keys; ++j) {
        double a = got[size_t(t) * keys + j], b = want[size_t(t) * keys + j];
        if (!std::isfinite(a)) {
          ++nonfinite;
          continue;
        }
        // The MMA's f32 sums against exact ones: a few f32 ulps of the
        // terms' magnitudes; a dot product rounded to another bf16 would
        // move a term by 2^-8 of itself.
        double err =
            std::fabs(a - b) / std::max(1e-30, magnitude[size_t(t) * keys + j]);
        if (err > 1e-5)
          ++off;
        worst = std::max(worst, err);
      }
    // Picks (k = 512) of these scores against main's and the reference's.
    int againstMain = 0, againstReference = 0, mainAgainstReference = 0;
    for (int t = 0; t < checkTokens; ++t) {
      auto mine = bestRows(&got[size_t(t) * keys], keys, 512);
      auto main = bestRows(&asMain[size_t(t) * keys], keys, 512);
      auto reference = bestRows(&asReference[size_t(t) * keys], keys, 512);
      againstMain += differing(mine, main);
      againstReference += differing(mine, reference);
      mainAgainstReference += differing(main, reference);
    }
    std::printf("%s: picks of 512 differing, over %d tokens: from main's "
                "scores %d, from the reference's %d (main from the "
                "reference's: %d)\n",
                names[form], checkTokens, againstMain, againstReference,
                mainAgainstReference);
    // Every score written (no poison left) over all tokens.
    size_t unwritten = 0;
    for (size_t i = 0; i < scoreCount; ++i)
      if (!std::isfinite(got[i]))
        ++unwritten;
    bool pass = nonfinite == 0 && unwritten == 0 && off == 0;
    ok = ok && pass;
    std::printf("%s: check %s (%d tokens: largest error %.3g of the terms' "
                "magnitudes, %zu "
                "scores off by > 1e-5, %zu unwritten of all; wide rows %u)\n",
                names[form], pass ? "PASS" : "FAIL", checkTokens, worst, off,
                unwritten, wide);

    // Time without the score stores, a floor that keeps few offers.
    prm.scores = nullptr;
    prm.floorKey = 0xC0A0000000000000ull; // scores above ~5
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    float best = 1e30f;
    for (int rep = 0; rep < 20; ++rep) {
      CHECK(cudaEventRecord(start));
      kernel<<<tokens * splits, threads, sharedBytes>>>(prm);
      CHECK(cudaEventRecord(stop));
      CHECK(cudaEventSynchronize(stop));
      float ms;
      CHECK(cudaEventElapsedTime(&ms, start, stop));
      best = std::min(best, ms);
    }
    CHECK(cudaMemcpy(counts.data(), dCounts, counts.size() * 4,
                     cudaMemcpyDeviceToHost));
    double kept = 0;
    for (size_t i = 0; i < counts.size(); i += 2)
      kept += counts[i];
    double bytes = double(tokens) * keys * (kValueBytes + kScaleBytes);
    std::printf("%s: %.1f us best of 20 (%d blocks), keys %.1f MB at %.2f "
                "TB/s, %.0f offers kept a block\n",
                names[form], best * 1e3, tokens * splits, bytes / 1e6,
                bytes / (best * 1e-3) / 1e12, kept / (tokens * splits));
  }
  return ok ? 0 : 1;
}
