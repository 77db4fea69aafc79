//===- PackageModel.h - a package's model on a GPU -------------*- C++ -*-===//
//
// What v4a-run-package and the C ABI's runtime library do to run a package:
// check its host programs, select layers, check the weights' format against
// the package's, plan the caches, open the GPU and load the kernels (the
// cubin on its own chip, the PTX elsewhere), and create the model. Plain
// C++: no compiler in the process.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_LIB_ENGINE_PACKAGEMODEL_H
#define V4A_LIB_ENGINE_PACKAGEMODEL_H

#include "core/Package.h"
#include "runtime/Model.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace v4a {

/// Reads a package for sm_90a and checks every host program it holds.
std::optional<pkg::Package> readPackage(const std::string &path,
                                        std::string &error);

/// The whole model's configuration: a tensor-parallel rank's package holds
/// the rank's (num_attention_heads and o_groups divided by the degree),
/// while checkpoints, random weights and the reference are the whole
/// model's.
ModelConfig wholeModelConfig(const pkg::Package &package);

/// Rank `rank`'s part of the whole model's `tensors` (rt::shardLayerTensors
/// at the package's degree; all of them at degree 1). An error names the
/// layer, or a rank outside the degree.
bool keepRankPart(const pkg::Package &package, int64_t rank,
                  std::vector<rt::LayerTensors> &tensors, std::string &error);

/// Where a package's kernels came from, for the runner's report.
struct PackageDevice {
  std::string deviceName;
  /// Kernels from the cubin (else the driver compiled the PTX).
  bool cubin = false;
  /// Why the cubin did not load, when it did not.
  std::string cubinWarning;
};

/// The model of `package`'s `selected` layers with `tensors` (one map per
/// layer of the model) on GPU `ordinal`, for `maxSequences` slots; null
/// with `error` naming the problem (the weights' format, the device, the
/// kernels, memory).
std::unique_ptr<rt::Model>
createPackageModel(const pkg::Package &package,
                   const std::vector<LayerSpec> &selected,
                   std::vector<rt::LayerTensors> tensors, int64_t maxSequences,
                   int ordinal, PackageDevice &device, std::string &error);

} // namespace v4a

#endif // V4A_LIB_ENGINE_PACKAGEMODEL_H
