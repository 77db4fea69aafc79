//===- Kernels.h - the CPU kernels a model needs ----------------*- C++ -*-===//
//
// Builds, with MLIR builders, a module of CPU kernels: one func.func per op
// and attribute set, taking row-major f32 buffers (i64 positions, i32
// indices, e4m3/ue8m0 bytes for fp8 weights) and writing its result into the
// last buffer argument. The kernel body is the v4a op itself; rounding to
// bf16 happens where the op's result type is bf16.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_LIB_JIT_KERNELS_H
#define V4A_LIB_JIT_KERNELS_H

#include "v4a/ModelConfig.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace mlir {
class MLIRContext;
class ModuleOp;
template <typename OpTy> class OwningOpRef;
} // namespace mlir

namespace v4a::jit {

class KernelModule {
public:
  /// An empty module in a context of its own with every dialect the CPU
  /// lowering needs.
  KernelModule();
  KernelModule(KernelModule &&) noexcept;
  ~KernelModule();

  /// Each method adds its kernel once and returns the kernel's name.
  /// y[T,N] = x[T,K] @ w[N,K]^T; w f32 (bf16 values) or e4m3 bytes with a
  /// ue8m0 scale; bf16-rounded unless `f32Result`.
  std::string linear(bool fp8, bool f32Result);
  /// RMSNorm of [R, W] rows with a weight, or of [T, H, D] head vectors
  /// without one.
  std::string rmsNorm(bool weighted, double eps);
  /// RoPE of [T, W] (rank 2) or [T, H, W] (rank 3) with positions [T].
  std::string rope(int rank, int64_t ropeDim, double theta,
                   const std::optional<YarnConfig> &yarn, bool inverse);
  std::string actQuant(int rank, bool e4m3, int64_t block, int64_t quantDims);
  std::string hadamard(int rank, int64_t width);
  std::string compressStep(int64_t ratio, bool overlap);
  std::string indexerScore(int64_t ratio);
  std::string topk(int64_t k, std::optional<int64_t> candidateBlockSize);
  std::string blockTopk(int64_t blockSize, int64_t numBlocks);
  std::string sparseAttention(double scale);
  std::string groupedOutput(int64_t groups, bool fp8WoA, bool fp8WoB);
  /// Stores rows [N, dim] at row ids [N] into the cache bytes, then gathers
  /// rows [T, S] (-1: zero) from them: (bytes, rows, ids, indices, out).
  std::string cacheStoreGather(const std::string &layout, int64_t dim);

  /// Hands the context and the module over (to the JIT); the KernelModule is
  /// empty afterwards.
  std::unique_ptr<mlir::MLIRContext> releaseContext();
  mlir::OwningOpRef<mlir::ModuleOp> releaseModule();

  struct Impl;

private:
  std::unique_ptr<Impl> impl;
};

} // namespace v4a::jit

#endif // V4A_LIB_JIT_KERNELS_H
