//===- Passes.h - v4a passes ------------------------------------*- C++ -*-===//

#ifndef V4A_PASSES_PASSES_H
#define V4A_PASSES_PASSES_H

#include "dialects/V4A/IR/V4ADialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace v4a {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// The library GEMMs `v4a-lower-to-cpu{library-gemms}` calls (operands as
/// the runtime's Gemm op, core/StepSignature.h): bf16 products with a bf16
/// or an f32 result, and fp8 ones with the scales of A (per 128x128 block)
/// and B (per 1x128 block).
inline constexpr llvm::StringLiteral kGemmBF16 = "v4a_gemm_bf16";
inline constexpr llvm::StringLiteral kGemmBF16F32 = "v4a_gemm_bf16_f32";
inline constexpr llvm::StringLiteral kGemmFP8 = "v4a_gemm_fp8";

/// Whether `callee` is one of the library GEMMs.
inline bool isLibraryGemm(llvm::StringRef callee) {
  return callee == kGemmBF16 || callee == kGemmBF16F32 || callee == kGemmFP8;
}

} // namespace v4a

#endif // V4A_PASSES_PASSES_H
