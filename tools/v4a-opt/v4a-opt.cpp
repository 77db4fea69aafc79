//===- v4a-opt.cpp - the v4a optimizer driver -----------------------------===//

#include "core/FileIO.h"
#include "dialects/V4A/IR/V4ADialect.h"
#include "lib/Pipeline/Pipelines.h"
#include "passes/Passes.h"
#include "tools/ToolSupport.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

/// MLIR's parser recurses once per nested region, list or attribute; far
/// deeper input than any real IR would run it out of stack.
static constexpr int kMaxNesting = 256;
/// Far more IR than a model's attention block takes.
static constexpr uint64_t kInputLimit = uint64_t(1) << 30;

/// Where (), [], {} and <> (not the '>' of "->") outside strings and
/// comments first nest deeper than kMaxNesting, or npos.
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
    } else if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > kMaxNesting)
        return i;
    } else if ((c == ')' || c == ']' || c == '}' ||
                (c == '>' && (i == 0 || text[i - 1] != '-'))) &&
               depth > 0) {
      --depth;
    }
  }
  return llvm::StringRef::npos;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::DialectRegistry registry;
  registry.insert<v4a::V4ADialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect,
                  mlir::scf::SCFDialect, mlir::memref::MemRefDialect,
                  mlir::gpu::GPUDialect, mlir::linalg::LinalgDialect,
                  mlir::bufferization::BufferizationDialect,
                  mlir::LLVM::LLVMDialect, mlir::NVVM::NVVMDialect>();
  mlir::registerTransformsPasses();
  v4a::registerV4APasses();
  v4a::registerPipelines();
  v4a::setToolVersionPrinter();
  auto [inputPath, outputPath] = mlir::registerAndParseCLIOptions(
      argc, argv, "v4a optimizer driver\n", registry);

  std::string message;
  std::optional<std::string> text =
      v4a::io::readFile(inputPath, kInputLimit, "MLIR", message);
  if (!text) {
    llvm::errs() << "v4a-opt: error: " << message << "\n";
    return 1;
  }
  std::unique_ptr<llvm::MemoryBuffer> input =
      llvm::MemoryBuffer::getMemBufferCopy(*text, inputPath);
  text.reset();
  if (size_t where = firstTooDeep(input->getBuffer());
      where != llvm::StringRef::npos) {
    llvm::errs() << "v4a-opt: error: " << inputPath << ": nesting deeper than "
                 << kMaxNesting << " levels (at byte " << where << ")\n";
    return 1;
  }
  // The output is written only when everything succeeded, through the same
  // safe write as the other tools: a failure leaves an existing file as it
  // was, and devices, FIFOs and symlinks keep their type.
  std::string result;
  llvm::raw_string_ostream output(result);
  if (mlir::failed(
          mlir::MlirOptMain(output, std::move(input), registry,
                            mlir::MlirOptMainConfig::createFromCLOptions())))
    return 1;
  if (!v4a::io::writeFile(outputPath, result, message)) {
    llvm::errs() << "v4a-opt: error: " << message << "\n";
    return 1;
  }
  return 0;
}
