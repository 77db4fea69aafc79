//===- RunOptions.h - v4a-run's command line ----------------*- C++ -*-===//
//
// The flags of v4a-run and the checks that need no configuration, apart from
// the tool's main so that a fuzz target can drive them too.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_TOOLS_V4A_RUN_RUNOPTIONS_H
#define V4A_TOOLS_V4A_RUN_RUNOPTIONS_H

#include "llvm/Support/CommandLine.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace v4a::run {

/// A run's tokens per sequence stay within this (V4 plans 1M-token contexts).
constexpr int64_t kMaxContext = int64_t(1) << 24;
/// Sequences in one run's batch.
constexpr int64_t kMaxBatch = int64_t(1) << 16;

extern llvm::cl::OptionCategory runCategory;
extern llvm::cl::opt<std::string> inputPath, backend, weightsPath, inputsPath,
    layersOption, outputsPath, indexPicksPath;
extern llvm::cl::opt<int64_t> randomSeed, promptLen, decodeSteps, contextOption;
extern llvm::cl::opt<bool> check;
extern llvm::cl::opt<bool> gpuLoopsOnCpu;
extern llvm::cl::opt<std::string> indexLayout;
extern llvm::cl::opt<int64_t> tensorParallel;
extern llvm::cl::opt<double> tolerance;

/// The names of the flags above, for tools that must not touch others.
const std::vector<std::string> &flagNames();

/// Checks the flags that do not need the configuration; a problem names the
/// flag and its valid values.
std::optional<std::string> checkFlags();

/// "0,2-5" -> {0, 2, 3, 4, 5}, every id below `numLayers`.
bool parseLayerList(llvm::StringRef text, int64_t numLayers,
                    std::vector<int64_t> &ids, std::string &error);

} // namespace v4a::run

#endif // V4A_TOOLS_V4A_RUN_RUNOPTIONS_H
