//===- StepInputs.h - the input steps of a run from safetensors -*- C++ -*-===//
//
// The inputs contract of v4a-run and v4a-run-package: tensors x.step{k}
// [B, S, hidden] (bf16 or f32) for the steps k = 0, 1, ... without gaps,
// optionally x.step{k}.layer{l} for a layer's own input, and
// lengths.step{k} (I32 [B]) for rows shorter than S. Plain C++.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_RUNTIME_STEPINPUTS_H
#define V4A_RUNTIME_STEPINPUTS_H

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace v4a::rt {

/// One step: B rows of S tokens, each row with its own length. Inputs are
/// per layer, read from a file or made when the step runs.
struct InputStep {
  int64_t tokens = 0;
  std::vector<int64_t> lengths;
  /// Per layer, [B * S * dim]; layers without their own input share one.
  std::vector<std::shared_ptr<const std::vector<float>>> inputs;
};

/// Reads the steps of `path` for a model of `layers` layers of width
/// `dim`; at most `maxBatch` sequences of `maxTokens` tokens. Errors name
/// the tensor and what was expected.
bool readStepInputs(const std::string &path, int64_t dim, int64_t layers,
                    int64_t maxBatch, int64_t maxTokens,
                    std::vector<InputStep> &steps, int64_t &batch,
                    std::string &error);

/// One step's outputs, zeroed, and the per-layer pointer lists a model's
/// step takes (null for the layers that do not run).
struct StepBuffers {
  std::vector<std::vector<float>> out;
  std::vector<const float *> inputs;
  std::vector<float *> outputs;
};

/// The buffers of `step` for `batch` rows of `dim` wide tokens; `runs[l]`
/// says whether layer l runs (its input must be present then).
StepBuffers stepBuffers(const InputStep &step, const std::vector<bool> &runs,
                        int64_t batch, int64_t dim);

/// One step of `ranks` tensor-parallel ranks with the all-reduce on the
/// host: `runRank(r, buffers)` runs rank r into `buffers` (false: failed,
/// its error kept by the caller). Rank 0 writes `total`; with more ranks the
/// others write one partial set in turn, added to `total` in f32 in rank
/// order, and each sum is rounded to bf16 once, as the unsharded projection
/// rounds.
bool stepEveryRank(size_t ranks, const InputStep &step,
                   const std::vector<bool> &runs, int64_t batch, int64_t dim,
                   StepBuffers &total,
                   const std::function<bool(size_t, StepBuffers &)> &runRank);

} // namespace v4a::rt

#endif // V4A_RUNTIME_STEPINPUTS_H
