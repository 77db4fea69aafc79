//===- KernelAccess.h - what a kernel does to its buffers -------*- C++ -*-===//
//
// Which buffer arguments a kernel only reads. A host program passes it on, so
// that the runtime may run two kernels side by side when neither writes
// memory the other touches.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_LIB_JIT_KERNELACCESS_H
#define V4A_LIB_JIT_KERNELACCESS_H

#include "llvm/ADT/SmallVector.h"

namespace mlir::gpu {
class GPUFuncOp;
} // namespace mlir::gpu

namespace v4a::jit {

/// One entry per argument of `kernel`: true for a memref the kernel provably
/// never writes (every use a load, a view of it, or an address derived from
/// it that only loads or async copies read). Anything else counts as a
/// write, so a false entry may be a buffer that is only read.
llvm::SmallVector<bool> readOnlyArguments(mlir::gpu::GPUFuncOp kernel);

} // namespace v4a::jit

#endif // V4A_LIB_JIT_KERNELACCESS_H
