//===- GpuPtx.h - PTX of the kernels v4a generates --------------*- C++ -*-===//
//
// Takes a module with step functions (v4a-compile --emit=steps) to PTX for
// an NVVM target through MLIR's GPU path: today the metadata functions'
// kernels (v4a-lower-metadata-to-gpu).
//
//===----------------------------------------------------------------------===//

#ifndef V4A_LIB_JIT_GPUPTX_H
#define V4A_LIB_JIT_GPUPTX_H

#include <optional>
#include <string>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace v4a::jit {

/// The PTX text of the module's GPU kernels for `chip`, or nothing with
/// `error` set. The module is lowered in place.
std::optional<std::string>
metadataPtx(mlir::ModuleOp module, const std::string &chip, std::string &error);

} // namespace v4a::jit

#endif // V4A_LIB_JIT_GPUPTX_H
