//===- HostWeights.h - weights between the runtime and the reference -*- C++
//-*-===//
//
// Deterministic random weights as the runtime holds them, and the runtime's
// tensors as the reference takes them. Plain C++ (no MLIR): runners without
// the compiler use it too.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_LIB_ENGINE_HOSTWEIGHTS_H
#define V4A_LIB_ENGINE_HOSTWEIGHTS_H

#include "lib/Reference/Reference.h"
#include "runtime/Model.h"
#include "runtime/StepInputs.h"

#include <functional>
#include <optional>
#include <string>

namespace v4a {

/// Every attention tensor of `layers`, random from `seed` (the reference's
/// randomWeight, fp8 as e4m3 codes with ue8m0 scales), generated in
/// parallel; the values do not depend on the number of threads. One map per
/// layer of the model; layers not listed stay empty.
std::vector<rt::LayerTensors>
randomHostWeights(const ModelConfig &config,
                  const std::vector<LayerSpec> &layers, uint64_t seed,
                  const std::function<void(int64_t, int64_t)> &progress = {});

/// A layer's tensors as the reference takes them (fp8 decoded with its
/// scales).
ref::LayerWeights toReference(const rt::LayerTensors &tensors);

/// The format of a checkpoint's projections, from their dtypes (wo_a is
/// left out: an fp8 wo_a runs as the bf16 product of its scales either way):
/// fp8, and the first projection's name (empty when there is none).
struct ProjectionFormat {
  bool fp8 = false;
  std::string tensor;
};

/// Nothing, with `error` naming two of them, when the projections of
/// `layers` mix fp8 and bf16.
std::optional<ProjectionFormat> projectionFormat(
    const ModelConfig &config, const std::vector<LayerSpec> &layers,
    const std::vector<rt::LayerTensors> &tensors, std::string &error);

/// The reference's outputs for row `row` of `step` (its first
/// lengths[row] tokens) through the layers `runs` marks.
std::vector<ref::Tensor> referenceRow(const ref::Model &reference,
                                      ref::SequenceState &state,
                                      const rt::InputStep &step, int64_t row,
                                      const std::vector<bool> &runs,
                                      int64_t dim);

} // namespace v4a

#endif // V4A_LIB_ENGINE_HOSTWEIGHTS_H
