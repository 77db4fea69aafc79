//===- TableCopy.h - a step's copies in one kernel --------------*- C++ -*-===//
//
// The runtime copies each layer's input into a step's workspace and each
// output back; a driver copy costs ~4 us of the host's and the GPU's time
// each, whatever its size. One launch of this kernel runs a table of them.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_PASSES_CONVERSION_V4ATOGPU_TABLECOPY_H
#define V4A_PASSES_CONVERSION_V4ATOGPU_TABLECOPY_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace v4a::gpu {

/// Adds to `kernels` the kernel step::kTableCopyKernel(table: i64)
/// (core/StepSignature.h): block row y copies entry y of the step::CopyEntry
/// table at device address `table`, in step::kCopyAlignment-byte accesses
/// spread over the row's blocks and threads.
mlir::gpu::GPUFuncOp buildTableCopyKernel(mlir::gpu::GPUModuleOp kernels);

} // namespace v4a::gpu

#endif // V4A_PASSES_CONVERSION_V4ATOGPU_TABLECOPY_H
