//===- fuzz_config.cpp - fuzz the config importer and planning passes -----===//
//
// Any byte string given to the importer must give a module or a diagnostic,
// and the near-miss key warnings must read it without a crash; an imported
// module must go through the planning pipeline without a crash.
//
//===----------------------------------------------------------------------===//

#include "lib/Import/ConfigImport.h"
#include "lib/Pipeline/Pipelines.h"

#include "dialects/V4A/IR/V4ADialect.h"
#include "v4a/ModelConfig.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>

static mlir::MLIRContext &fuzzContext() {
  static mlir::MLIRContext *context = [] {
    auto *created =
        new mlir::MLIRContext(mlir::MLIRContext::Threading::DISABLED);
    created->loadDialect<v4a::V4ADialect>();
    created->printOpOnDiagnostic(false);
    return created;
  }();
  return *context;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::MLIRContext &context = fuzzContext();
  mlir::ScopedDiagnosticHandler quiet(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });
  llvm::StringRef json(reinterpret_cast<const char *>(data), size);
  (void)v4a::configWarnings(std::string_view(json.data(), json.size()));
  mlir::OwningOpRef<mlir::ModuleOp> module = v4a::importConfig(
      &context, json, mlir::UnknownLoc::get(&context), "fuzz");
  if (!module)
    return 0;
  mlir::PassManager pm(&context);
  v4a::buildPlanningPipeline(pm, {});
  if (mlir::succeeded(pm.run(*module)))
    module->print(llvm::nulls());
  return 0;
}
