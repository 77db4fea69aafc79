//===- CpuJit.cpp - compile v4a kernels for the host CPU ------------------===//

#include "lib/JIT/CpuJit.h"

#include "dialects/V4A/IR/V4ADialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/TargetSelect.h"

using namespace mlir;

namespace v4a::jit {

static const char *const kLoweringPipeline =
    "v4a-lower-to-cpu,canonicalize,convert-elementwise-to-linalg,"
    "one-shot-bufferize,buffer-deallocation-pipeline,convert-linalg-to-loops,"
    "expand-strided-metadata,lower-affine,convert-scf-to-cf,"
    "arith-expand{include-bf16=true},convert-math-to-llvm,"
    "finalize-memref-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,"
    "convert-func-to-llvm,convert-index-to-llvm,reconcile-unrealized-casts";

static void registerOnce() {
  static bool done = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    registerAllPasses();
    registerV4APasses();
    return true;
  }();
  (void)done;
}

CpuJit::CpuJit() = default;
CpuJit::~CpuJit() = default;

/// Runs the CPU lowering, from v4a ops to the LLVM dialect, in place.
static bool lowerToLLVMDialect(ModuleOp module, std::string &error) {
  PassManager pm(module.getContext());
  if (failed(parsePassPipeline(kLoweringPipeline, pm))) {
    error = "invalid CPU lowering pipeline";
    return false;
  }
  return succeeded(pm.run(module));
}

std::unique_ptr<CpuJit> CpuJit::compile(llvm::StringRef source,
                                        std::string &error) {
  registerOnce();
  std::unique_ptr<CpuJit> jit(new CpuJit());
  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registry.insert<V4ADialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  jit->context = std::make_unique<MLIRContext>(registry);
  jit->context->loadAllAvailableDialects();
  std::string diagnostics;
  llvm::raw_string_ostream stream(diagnostics);
  ScopedDiagnosticHandler handler(jit->context.get(), [&](Diagnostic &diag) {
    stream << diag.str() << "\n";
    return success();
  });
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(source, jit->context.get());
  if (!module) {
    error = "cannot parse the kernel module: " + diagnostics;
    return nullptr;
  }
  if (!lowerToLLVMDialect(*module, error)) {
    error = "cannot lower the kernel module: " + error + diagnostics;
    return nullptr;
  }
  // The options hold a function_ref: the transformer must outlive create().
  std::function<llvm::Error(llvm::Module *)> transformer =
      makeOptimizingTransformer(2, 0, nullptr);
  ExecutionEngineOptions options;
  options.transformer = transformer;
  options.enableObjectDump = true;
  auto engine = ExecutionEngine::create(*module, options);
  if (!engine) {
    error = "cannot compile the kernel module: " +
            llvm::toString(engine.takeError());
    return nullptr;
  }
  jit->engine = std::move(*engine);
  return jit;
}

void *CpuJit::lookup(llvm::StringRef name) const {
  auto symbol = engine->lookup(("_mlir_ciface_" + name).str());
  if (!symbol) {
    llvm::consumeError(symbol.takeError());
    return nullptr;
  }
  return *symbol;
}

bool CpuJit::writeObject(llvm::StringRef path) const {
  engine->dumpToObjectFile(path);
  return llvm::sys::fs::exists(path);
}

} // namespace v4a::jit
