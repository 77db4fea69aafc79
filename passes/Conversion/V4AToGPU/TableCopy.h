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

/// The kernel's name in the kernel module.
inline constexpr const char *kTableCopyKernel = "v4a_copy_table";

/// Adds to `kernels` the kernel `v4a_copy_table(table: i64)`: block row y
/// copies entry y of the table at device address
/// `table`, whose entries are four u64 (destination, source, bytes, unused;
/// runtime/Backend.h's CopyEntry), in 16-byte accesses spread over the
/// row's blocks and threads (addresses and sizes multiples of 16).
mlir::gpu::GPUFuncOp buildTableCopyKernel(mlir::gpu::GPUModuleOp kernels);

} // namespace v4a::gpu

#endif // V4A_PASSES_CONVERSION_V4ATOGPU_TABLECOPY_H
