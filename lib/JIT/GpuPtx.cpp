//===- GpuPtx.cpp - PTX of the kernels v4a generates ----------------------===//

#include "lib/JIT/GpuPtx.h"

#include "passes/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"

using namespace mlir;

namespace v4a::jit {

std::optional<std::string> metadataPtx(ModuleOp module, const std::string &chip,
                                       std::string &error) {
  static bool registered = [] {
    registerAllPasses();
    registerV4APasses();
    return true;
  }();
  (void)registered;
  MLIRContext *context = module.getContext();
  DialectRegistry registry;
  // The conversions to LLVM of arith, memref, cf... that convert-gpu-to-nvvm
  // gathers come as dialect extensions.
  registerAllExtensions(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  context->appendDialectRegistry(registry);

  std::string messages;
  ScopedDiagnosticHandler handler(context, [&](Diagnostic &diag) {
    if (messages.empty())
      messages = diag.str();
    return success();
  });
  PassManager pm(context);
  std::string pipeline =
      "v4a-lower-metadata-to-gpu{chip=" + chip +
      "},gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm,"
      "reconcile-unrealized-casts),gpu-module-to-binary{format=isa}";
  if (failed(parsePassPipeline(pipeline, pm)) || failed(pm.run(module))) {
    error = "cannot generate the GPU kernels: " +
            (messages.empty() ? std::string("pipeline failed") : messages);
    return std::nullopt;
  }
  std::string ptx;
  for (auto binary : module.getOps<gpu::BinaryOp>())
    for (Attribute attr : binary.getObjects())
      ptx += cast<gpu::ObjectAttr>(attr).getObject().str();
  if (ptx.empty())
    error = "the module has no metadata functions to compile for the GPU";
  return ptx.empty() ? std::nullopt : std::optional<std::string>(ptx);
}

} // namespace v4a::jit
