//===- GpuSteps.h - step functions as GPU kernels and host programs -*- C++
//-*-===//
//
// Takes the step functions of a module (v4a-compile --emit=steps) to an
// NVVM target through MLIR's GPU path: the kernel families
// (v4a-lower-to-gpu), the token-parallel loop lowering of the rest,
// bufferization, v4a-map-loops-to-gpu and kernel outlining, then PTX for
// the kernels and, per function, the host program the runtime interprets
// (core/StepSignature.h).
//
//===----------------------------------------------------------------------===//

#ifndef V4A_LIB_JIT_GPUSTEPS_H
#define V4A_LIB_JIT_GPUSTEPS_H

#include "core/StepSignature.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace v4a::jit {

struct GpuSteps {
  /// One PTX module holding every kernel.
  std::string ptx;
  /// The same assembled for the chip by the toolkit's ptxas, or empty
  /// when the toolkit has none.
  std::string cubin;
  /// The functions in the order asked for, each with its host program.
  std::vector<step::Function> functions;
};

/// How GPU steps run fp8 projections.
enum class FP8Gemms {
  /// bf16 library GEMMs of the dequantized operands (the steps pipeline's
  /// dequantizeFP8Weights): the fp8 product with f32 sums.
  Dequantized,
  /// The library's block-scaled fp8 GEMM: on Hopper its sums keep ~14 bits
  /// (~6% of the bf16 outputs off by an ulp or more, measured on the H200).
  BlockScaled,
  /// The generated kernels alone.
  Kernels,
};

/// Compiles the functions `names` of `module` (lowered in place) for `chip`.
/// With `kernelIR`, stops after outlining and prints the module there (no
/// PTX). bf16 projections are library GEMMs with generated fallbacks; fp8
/// ones too with `fp8Library` (FP8Gemms::BlockScaled). Without
/// `indexerFamily` the indexer's scores and top-k run on the loop path;
/// `indexerE4M3` multiplies its MXFP4 keys as e4m3 (lowerIndexerTopK).
std::optional<GpuSteps>
compileGpuSteps(mlir::ModuleOp module, const std::vector<std::string> &names,
                const std::string &chip, std::string &error,
                std::string *kernelIR = nullptr, bool fp8Library = false,
                bool indexerFamily = true, bool indexerE4M3 = false);

} // namespace v4a::jit

#endif // V4A_LIB_JIT_GPUSTEPS_H
