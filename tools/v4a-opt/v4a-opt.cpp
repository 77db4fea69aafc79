//===- v4a-opt.cpp - the v4a optimizer driver -----------------------------===//

#include "dialects/V4A/IR/V4ADialect.h"
#include "lib/Pipeline/Pipelines.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<v4a::V4ADialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect>();
  mlir::registerTransformsPasses();
  v4a::registerV4APasses();
  v4a::registerPipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "v4a optimizer driver\n", registry));
}
