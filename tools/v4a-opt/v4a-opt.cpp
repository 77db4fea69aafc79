//===- v4a-opt.cpp - the v4a optimizer driver -----------------------------===//

#include "dialects/V4A/IR/V4ADialect.h"
#include "lib/Pipeline/Pipelines.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

/// MLIR's parser recurses once per nested region, list or attribute; far
/// deeper input than any real IR would run it out of stack.
static constexpr int kMaxNesting = 256;

/// Where (), [] and {} outside strings and comments first nest deeper than
/// kMaxNesting, or npos.
static size_t firstTooDeep(llvm::StringRef text) {
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      i = text.find('\n', i);
      if (i == llvm::StringRef::npos)
        break;
    } else if (c == '(' || c == '[' || c == '{') {
      if (++depth > kMaxNesting)
        return i;
    } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return llvm::StringRef::npos;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::DialectRegistry registry;
  registry.insert<v4a::V4ADialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect>();
  mlir::registerTransformsPasses();
  v4a::registerV4APasses();
  v4a::registerPipelines();
  auto [inputPath, outputPath] = mlir::registerAndParseCLIOptions(
      argc, argv, "v4a optimizer driver\n", registry);

  std::string message;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputPath, &message);
  if (!input) {
    llvm::errs() << "v4a-opt: error: " << message << "\n";
    return 1;
  }
  if (size_t where = firstTooDeep(input->getBuffer());
      where != llvm::StringRef::npos) {
    llvm::errs() << "v4a-opt: error: " << inputPath << ": nesting deeper than "
                 << kMaxNesting << " levels (at byte " << where << ")\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputPath, &message);
  if (!output) {
    llvm::errs() << "v4a-opt: error: " << message << "\n";
    return 1;
  }
  if (mlir::failed(mlir::MlirOptMain(
          output->os(), std::move(input), registry,
          mlir::MlirOptMainConfig::createFromCLOptions())))
    return 1;
  output->keep();
  return 0;
}
