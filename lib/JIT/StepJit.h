//===- StepJit.h - compile step functions for the host CPU ------*- C++ -*-===//
//
// Compiles the metadata and step functions v4a-build-steps makes (tensors
// and caches in, tensors out) behind destination-passing entry points: every
// argument, output included, is a memref the caller provides (a cache is its
// bytes). The runtime calls them through step::Function.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_LIB_JIT_STEPJIT_H
#define V4A_LIB_JIT_STEPJIT_H

#include "core/StepSignature.h"
#include "lib/JIT/CpuJit.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

namespace v4a::jit {

/// The calls one step makes for `layers`, from the module's step programs
/// (@main, then @mtp): a key's metadata just before the first of those
/// layers that reads it. `names` gets the functions called, in order of
/// first use; calls index into it.
std::vector<step::Call> stepCalls(mlir::ModuleOp module,
                                  const std::set<int64_t> &layers,
                                  std::vector<std::string> &names);

/// Keeps the functions `names` of `module` (other functions and the
/// v4a.model ops are dropped), describes them in `functions` and adds their
/// destination-passing entries `<name>_entry` (the functions become
/// private, to be inlined).
mlir::LogicalResult prepareEntries(mlir::ModuleOp module,
                                   const std::vector<std::string> &names,
                                   std::vector<step::Function> &functions,
                                   std::string &error);

/// Compiles the functions `names` of `module` (other functions and the
/// v4a.model ops are dropped) and fills `functions` with their signatures
/// and entry points, in the order of `names`.
std::unique_ptr<CpuJit> compileSteps(std::unique_ptr<mlir::MLIRContext> context,
                                     mlir::OwningOpRef<mlir::ModuleOp> module,
                                     const std::vector<std::string> &names,
                                     std::vector<step::Function> &functions,
                                     std::string &error,
                                     bool tokenParallel = false);

} // namespace v4a::jit

#endif // V4A_LIB_JIT_STEPJIT_H
