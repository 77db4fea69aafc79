//===- CpuJit.h - compile v4a kernels for the host CPU ----------*- C++ -*-===//

#ifndef V4A_LIB_JIT_CPUJIT_H
#define V4A_LIB_JIT_CPUJIT_H

#include "lib/JIT/Kernels.h"

#include "llvm/ADT/StringRef.h"

#include <memory>
#include <string>

namespace mlir {
template <typename OpTy> class OwningOpRef;
class ExecutionEngine;
class MLIRContext;
class ModuleOp;
} // namespace mlir

namespace v4a::jit {

/// A context with every dialect the kernels and their lowering use.
std::unique_ptr<mlir::MLIRContext> createKernelContext();

/// Kernels compiled in-process from a KernelModule (`func.func`s over memref
/// arguments, v4a ops inside) through the CPU lowering to LLVM.
class CpuJit {
public:
  ~CpuJit();
  /// Verifies, lowers and compiles the kernels (taking over their context);
  /// on failure returns null and describes the problem in `error`.
  static std::unique_ptr<CpuJit> compile(KernelModule kernels,
                                         std::string &error);
  /// The same for any module of `func.func`s with C-interface entry points
  /// (memref arguments, v4a ops inside) in a context of createKernelContext.
  /// `tokenParallel` lowers with the loop structure of the GPU kernels
  /// (v4a-lower-to-cpu{token-parallel}), to check it on the host.
  static std::unique_ptr<CpuJit>
  compile(std::unique_ptr<mlir::MLIRContext> context,
          mlir::OwningOpRef<mlir::ModuleOp> module, std::string &error,
          bool tokenParallel = false);
  /// Threads the kernels' parallel loops use (OpenMP; OMP_NUM_THREADS sets
  /// it).
  static int threads();
  /// The C-interface entry point of kernel `name`, or null.
  void *lookup(llvm::StringRef name) const;
  /// The same entry point called with one pointer per argument (each to a
  /// pointer to its memref descriptor), or null.
  using PackedFn = void (*)(void **);
  PackedFn lookupPacked(llvm::StringRef name) const;
  /// The kernels as an ELF object for the host (position independent), or
  /// nothing with `error` set.
  bool objectCode(std::string &bytes, std::string &error) const;
  /// A C header declaring every entry point of the object (`guard` names its
  /// include guard).
  std::string cHeader(llvm::StringRef guard) const;

private:
  CpuJit();
  struct Lowered;
  std::unique_ptr<mlir::MLIRContext> context;
  std::unique_ptr<Lowered> lowered;
  std::unique_ptr<mlir::ExecutionEngine> engine;
  static std::string declareEntryPoints(mlir::ModuleOp module);
  /// One declaration per entry point, from the kernels' signatures.
  std::string declarations;
};

} // namespace v4a::jit

#endif // V4A_LIB_JIT_CPUJIT_H
