//===- CudaGemm.h - matrix products on cuBLASLt -----------------*- C++ -*-===//
//
// The Gemm ops of host programs on NVIDIA's GEMM library, loaded at run time
// (libcublasLt.so.13) like the driver, so that the runtime builds and runs
// without it: a missing library, or a shape it has no algorithm for, leaves
// the product to the program's own kernel. The algorithm of each shape is
// chosen once (the library's heuristic, within a fixed workspace) and
// reused. Plain C++.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_RUNTIME_CUDAGEMM_H
#define V4A_RUNTIME_CUDAGEMM_H

#include "runtime/Backend.h"

#include <memory>
#include <string>

namespace v4a::rt {

class CudaGemm {
public:
  /// The library, or null with `why` (not installed, or disabled with
  /// V4A_GEMM_LIBRARY=0). `workspace` is device memory of `workspaceBytes`
  /// the products may use.
  static std::unique_ptr<CudaGemm> load(void *workspace, int64_t workspaceBytes,
                                        std::string &why);
  ~CudaGemm();

  /// Queues `call` on `stream` and sets `done`, or leaves `done` false when
  /// the library has no algorithm for the shape. `workspace`: device memory
  /// of kWorkspaceBytes for this stream's products (null: the one given to
  /// load; two streams may not share one).
  bool run(const GemmCall &call, void *stream, void *workspace, bool &done,
           std::string &error);
  /// Chooses the algorithm of `call`'s shape now (a shape first seen by run
  /// is planned there); false when the library has none.
  bool prepare(const GemmCall &call);

  /// The workspace the products get.
  static constexpr int64_t kWorkspaceBytes = 32 << 20;

  struct Library;

private:
  CudaGemm();
  std::unique_ptr<Library> library;
};

} // namespace v4a::rt

#endif // V4A_RUNTIME_CUDAGEMM_H
