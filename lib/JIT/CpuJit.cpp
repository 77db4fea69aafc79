//===- CpuJit.cpp - compile v4a kernels for the host CPU ------------------===//

#include "lib/JIT/CpuJit.h"

#include "core/Numerics.h"
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
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/TargetSelect.h"

#include "llvm/Target/TargetMachine.h"
#include <cstring>
#include <dlfcn.h>
#include <set>

using namespace mlir;

extern "C" int omp_get_max_threads(void);

namespace v4a::jit {

/// The lowering after v4a-lower-to-cpu.
static const char *const kLoweringPipeline =
    "inline,symbol-dce,canonicalize,"
    "convert-elementwise-to-linalg,v4a-fuse-elementwise,"
    "one-shot-bufferize,v4a-elide-result-copies,buffer-deallocation-pipeline,"
    "convert-linalg-to-loops,"
    "expand-strided-metadata,lower-affine,convert-scf-to-openmp,canonicalize,"
    "convert-vector-to-scf,convert-scf-to-cf,convert-vector-to-llvm,"
    "arith-expand{include-bf16=true},convert-math-to-llvm,"
    "finalize-memref-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,"
    "convert-openmp-to-llvm,convert-func-to-llvm,convert-index-to-llvm,"
    "reconcile-unrealized-casts";

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

struct CpuJit::Lowered {
  OwningOpRef<ModuleOp> module;
};

CpuJit::CpuJit() = default;
CpuJit::~CpuJit() = default;

/// f32 to bf16 (nearest, ties to even) for the code generator of a host
/// without bf16 arithmetic: it keeps a bf16 value that lives across blocks
/// in an f32 register and narrows it again through `__truncsfbf2`, which
/// libgcc before 13 lacks. The calling convention returns a bf16 in the low
/// half of the register that holds an f32 result, so the bits go there.
static float truncateToBF16(float value) {
  uint32_t bits = num::toBF16Bits(value);
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

/// The GPU's library GEMM calls, on the host: their fallback loops, which
/// follow each call, do the work.
static void dropLibraryCalls(ModuleOp module) {
  module.walk([](func::CallOp call) {
    if (isLibraryGemm(call.getCallee()))
      call.erase();
  });
  for (auto func : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
    if (func.isExternal() && isLibraryGemm(func.getSymName()))
      func.erase();
}

/// Runs the CPU lowering, from v4a ops to the LLVM dialect, in place. The
/// GPU's loop structure (tokenParallel) is the GPU's whole lowering, its
/// library GEMMs' fallbacks included.
static bool lowerToLLVMDialect(ModuleOp module, bool tokenParallel,
                               std::string &error) {
  PassManager loops(module.getContext()), rest(module.getContext());
  std::string lowering = std::string("v4a-lower-to-cpu{token-parallel=") +
                         (tokenParallel ? "1 library-gemms=1" : "0") + "}";
  if (failed(parsePassPipeline(lowering, loops)) ||
      failed(parsePassPipeline(kLoweringPipeline, rest))) {
    error = "invalid CPU lowering pipeline";
    return false;
  }
  if (failed(loops.run(module)))
    return false;
  dropLibraryCalls(module);
  return succeeded(rest.run(module));
}

std::unique_ptr<MLIRContext> createKernelContext() {
  registerOnce();
  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registry.insert<V4ADialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerOpenMPDialectTranslation(registry);
  auto context = std::make_unique<MLIRContext>(registry);
  context->loadAllAvailableDialects();
  return context;
}

std::unique_ptr<CpuJit> CpuJit::compile(KernelModule kernels,
                                        std::string &error) {
  std::unique_ptr<MLIRContext> context = kernels.releaseContext();
  return compile(std::move(context), kernels.releaseModule(), error);
}

std::unique_ptr<CpuJit> CpuJit::compile(std::unique_ptr<MLIRContext> context,
                                        OwningOpRef<ModuleOp> module,
                                        std::string &error,
                                        bool tokenParallel) {
  std::unique_ptr<CpuJit> jit(new CpuJit());
  jit->context = std::move(context);
  std::string diagnostics;
  llvm::raw_string_ostream stream(diagnostics);
  ScopedDiagnosticHandler handler(jit->context.get(), [&](Diagnostic &diag) {
    stream << diag.str() << "\n";
    return success();
  });
  if (failed(verify(*module))) {
    error = "invalid kernel module: " + diagnostics;
    return nullptr;
  }
  jit->declarations = declareEntryPoints(*module);
  if (!lowerToLLVMDialect(*module, tokenParallel, error)) {
    error = "cannot lower the kernel module: " + error + diagnostics;
    return nullptr;
  }
  // The options hold a function_ref: the transformer must outlive create().
  std::function<llvm::Error(llvm::Module *)> transformer =
      makeOptimizingTransformer(2, 0, nullptr);
  ExecutionEngineOptions options;
  options.transformer = transformer;
  // The kernels call the OpenMP runtime this library is linked with. It is
  // named explicitly: a library loaded with RTLD_LOCAL (Python's ctypes, a
  // plugin) does not show it to the process-wide lookup.
  llvm::SmallVector<llvm::StringRef, 1> libraries;
  Dl_info openmp;
  if (dladdr(reinterpret_cast<void *>(&omp_get_max_threads), &openmp) &&
      openmp.dli_fname)
    libraries.push_back(openmp.dli_fname);
  options.sharedLibPaths = libraries;
  // No perf or GDB listeners: they leave a .debug folder in $TMPDIR.
  options.enableGDBNotificationListener = false;
  options.enablePerfNotificationListener = false;
  auto engine = ExecutionEngine::create(*module, options);
  if (!engine) {
    error = "cannot compile the kernel module: " +
            llvm::toString(engine.takeError());
    return nullptr;
  }
  (*engine)->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap symbols;
    symbols[interner("__truncsfbf2")] = {
        llvm::orc::ExecutorAddr::fromPtr(&truncateToBF16),
        llvm::JITSymbolFlags::Exported};
    return symbols;
  });
  jit->engine = std::move(*engine);
  jit->lowered = std::make_unique<Lowered>();
  jit->lowered->module = std::move(module);
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

CpuJit::PackedFn CpuJit::lookupPacked(llvm::StringRef name) const {
  auto symbol = engine->lookupPacked(("_mlir_ciface_" + name).str());
  if (!symbol) {
    llvm::consumeError(symbol.takeError());
    return nullptr;
  }
  return *symbol;
}

bool CpuJit::objectCode(std::string &bytes, std::string &error) const {
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(lowered->module.get(), llvmContext, "v4a");
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!llvmModule || !builder) {
    if (!builder)
      error = llvm::toString(builder.takeError());
    error = "cannot translate the kernels for the host: " + error;
    return false;
  }
  builder->setRelocationModel(llvm::Reloc::PIC_);
  auto machine = builder->createTargetMachine();
  if (!machine) {
    error = "no target machine for the host: " +
            llvm::toString(machine.takeError());
    return false;
  }
  ExecutionEngine::setupTargetTripleAndDataLayout(llvmModule.get(),
                                                  machine->get());
  if (llvm::Error failure =
          makeOptimizingTransformer(2, 0, machine->get())(llvmModule.get())) {
    error =
        "cannot optimize the kernels: " + llvm::toString(std::move(failure));
    return false;
  }
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream stream(buffer);
  llvm::legacy::PassManager codegen;
  if ((*machine)->addPassesToEmitFile(codegen, stream, nullptr,
                                      llvm::CodeGenFileType::ObjectFile)) {
    error = "the host target cannot emit object files";
    return false;
  }
  codegen.run(*llvmModule);
  bytes.assign(buffer.begin(), buffer.end());
  return true;
}

/// The C type of a memref element as the kernels pass it, and its short
/// name in descriptor type names.
static std::pair<std::string, std::string> cElementType(Type type) {
  if (type.isF32())
    return {"float", "f32"};
  if (type.isInteger(64))
    return {"int64_t", "i64"};
  if (type.isInteger(32))
    return {"int32_t", "i32"};
  if (type.isBF16())
    return {"uint16_t", "bf16"};
  // e4m3 weights, ue8m0 scales and cache bytes travel as bytes.
  return {"uint8_t", "u8"};
}

std::string CpuJit::declareEntryPoints(ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  std::set<std::string> descriptors;
  std::string functions;
  llvm::raw_string_ostream fs(functions);
  for (auto func : module.getOps<func::FuncOp>()) {
    if (!func->hasAttr("llvm.emit_c_interface"))
      continue;
    fs << "void _mlir_ciface_" << func.getName() << "(";
    for (auto [index, type] : llvm::enumerate(func.getArgumentTypes())) {
      auto memref = dyn_cast<MemRefType>(type);
      auto [element, shortName] =
          memref ? cElementType(memref.getElementType())
                 : std::pair<std::string, std::string>{"uint8_t", "u8"};
      int64_t rank = memref ? memref.getRank() : 1;
      std::string name =
          "v4a_memref_" + shortName + "_" + std::to_string(rank) + "d";
      if (descriptors.insert(name).second)
        os << "typedef struct {\n  " << element << " *allocated;\n  " << element
           << " *aligned;\n  int64_t offset;\n  int64_t sizes[" << rank
           << "];\n  int64_t strides[" << rank << "];\n} " << name << ";\n";
      fs << (index ? ", " : "") << name << " *a" << index;
    }
    fs << ");\n";
  }
  return text + "\n" + functions;
}

int CpuJit::threads() { return omp_get_max_threads(); }

std::string CpuJit::cHeader(llvm::StringRef guard) const {
  std::string text = "/* Entry points of the v4a CPU kernels (v4a-compile "
                     "--emit=obj): MLIR's C interface,\n   one strided "
                     "memref descriptor per argument, the outputs last "
                     "(written as the\n   function runs: they must not "
                     "overlap its inputs). Parallel loops run\n   on the "
                     "OpenMP runtime: link with -lomp. */\n";
  text += "#ifndef " + guard.str() + "\n#define " + guard.str() +
          "\n\n#include <stdint.h>\n\n#ifdef __cplusplus\nextern \"C\" "
          "{\n#endif\n\n";
  text += declarations;
  text +=
      "\n#ifdef __cplusplus\n}\n#endif\n\n#endif /* " + guard.str() + " */\n";
  return text;
}

} // namespace v4a::jit
