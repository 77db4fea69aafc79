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

/// The reference's outputs for row `row` of `step` (its first
/// lengths[row] tokens) through the layers `runs` marks.
std::vector<ref::Tensor> referenceRow(const ref::Model &reference,
                                      ref::SequenceState &state,
                                      const rt::InputStep &step, int64_t row,
                                      const std::vector<bool> &runs,
                                      int64_t dim);

} // namespace v4a

#endif // V4A_LIB_ENGINE_HOSTWEIGHTS_H
