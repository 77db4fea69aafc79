//===- Model.h - a model's caches, weights and step program -----*- C++ -*-===//
//
// Runs prefill and decode steps of a model's attention layers on a backend
// by calling the compiled functions of its step program. Caches are
// allocated once from the cache plan (one arena for all sequence slots;
// consumer layers alias their source's buffers), weights are copied to the
// device once and bound by name; each sequence keeps its own position. No
// layer's math lives here. Plain C++.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_RUNTIME_MODEL_H
#define V4A_RUNTIME_MODEL_H

#include "core/KVPlan.h"
#include "core/StepSignature.h"
#include "runtime/Backend.h"
#include "v4a/ModelConfig.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace v4a::rt {

class Collective;
struct CollectiveId;

/// A weight or parameter in host memory: f32 values (bf16 checkpoint tensors
/// are widened), or e4m3 / ue8m0 bytes of an fp8 checkpoint.
struct HostTensor {
  /// BF16 holds bits in `bytes` (what a compiled step takes).
  enum class Type { F32, BF16, E4M3, UE8M0 };
  Type type = Type::F32;
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<uint8_t> bytes;
  int64_t numel() const;
};
const char *typeName(HostTensor::Type type);

/// The compiled functions of a model and the calls one step makes, in
/// order: a key's metadata function (layer -1), or a layer's step function
/// with the metadata function whose latest outputs it reads.
struct StepProgram {
  using Call = step::Call;
  std::vector<step::Function> functions;
  std::vector<Call> calls;
};

/// The layers `ids` names (all when empty); a layer that reads another's
/// caches or top-k needs that layer selected too.
std::optional<std::vector<LayerSpec>>
selectLayers(const std::vector<LayerSpec> &layers,
             const std::vector<int64_t> &ids, std::string &error);

/// The calls of `program` that `layers` make: their step calls, and the
/// metadata calls those read.
std::vector<StepProgram::Call>
callsOfLayers(const StepProgram &program, const std::vector<LayerSpec> &layers);

/// One layer's tensors by checkpoint name without the layer prefix; an fp8
/// projection "x.weight" comes with "x.scale".
using LayerTensors = std::map<std::string, HostTensor>;

/// Replaces the tensors of a merged projection's parts in `tensors` (the
/// names `arg`'s bind joins with '+', already of its element type) by the
/// stacked weight `arg` takes: their rows one after another. An error names
/// a missing part, one of another width or type, or rows that do not add
/// up to the argument's.
bool stackWeight(LayerTensors &tensors, const step::Arg &arg,
                 std::string &error);

/// Checks that `tensors` hold every tensor the layers need with the right
/// shape and type; the message names the tensor and what was expected.
bool validateWeights(const ModelConfig &config,
                     const std::vector<LayerSpec> &layers,
                     const std::vector<LayerTensors> &tensors,
                     std::string &error);

struct StepBatch {
  /// Sequence ids (from addSequence), one per batch row.
  std::vector<int64_t> sequences;
  /// Tokens of each row; rows are padded to `paddedTokens`.
  std::vector<int64_t> lengths;
  int64_t paddedTokens = 0;
};

/// An upper bound of the bytes a step of `tokens` packed tokens allocates at
/// once, at `context` tokens of history in the longest sequence; in floating
/// point so that absurd sizes cannot wrap.
double stepWorkspaceBytes(const ModelConfig &config,
                          const std::vector<LayerSpec> &layers, int64_t tokens,
                          int64_t context);

class Model {
public:
  /// Fails, naming the problem, on invalid weights, an unsupported cache
  /// layout or missing kernels. Weights take the element type of the step
  /// arguments they are bound to: an e4m3 weight with its block scales that
  /// a bf16 argument takes is dequantized (wo_a, and GPU steps compiled
  /// with v4a-dequantize-fp8-weights, which quantize the activation
  /// themselves); that the checkpoint's format is the one the steps were
  /// compiled for is the caller's to check (projectionFormat, as
  /// v4a-run-package and the Engine do).
  static std::unique_ptr<Model>
  create(ModelConfig config, std::vector<LayerSpec> layers, StepProgram program,
         std::vector<LayerTensors> weights, const plan::Plan &plan,
         int64_t maxSequences, std::unique_ptr<Backend> backend,
         std::string &error);
  ~Model();

  /// A new sequence at position 0, or -1 when every slot is taken.
  int64_t addSequence(std::string &error);
  bool releaseSequence(int64_t sequence, std::string &error);
  /// Tokens the sequence has processed, or -1 for an unknown sequence.
  int64_t position(int64_t sequence) const;
  /// Declares that the sequence's caches hold its first `position` tokens,
  /// written through writeCache (a sequence restored from storage, or caches
  /// filled for a benchmark). Fails beyond the planned context.
  bool restorePosition(int64_t sequence, int64_t position, std::string &error);
  /// Copies `bytes` (exactly cacheSize bytes) into the sequence's buffer of
  /// that layer and component (its source's buffer for an alias).
  bool writeCache(int64_t sequence, int64_t layer, plan::Component component,
                  const std::vector<uint8_t> &bytes, std::string &error);

  /// Runs `batch` through every layer: inputs[l] and outputs[l] are
  /// [rows, paddedTokens, hidden_size] f32 (rows beyond a sequence's length
  /// are ignored on input and zero on output). Validates everything first;
  /// on an invalid batch nothing has changed. A step that fails on the
  /// device (a fault, or a failure after its first launch) leaves the
  /// caches in an unknown state: the model then refuses every further step
  /// with that error.
  bool step(const StepBatch &batch, const std::vector<const float *> &inputs,
            const std::vector<float *> &outputs, std::string &error);
  /// A step on tensors in the backend's memory, queued on `stream` (one of
  /// the backend's context, or null for its own: Backend::useStream):
  /// inputs[l] and outputs[l] are [tokens, hidden_size] bf16 with the
  /// batch's tokens packed in row order (tokens: the sum of the lengths;
  /// paddedTokens is not used); no two layers' outputs may share a byte (an
  /// error otherwise). Validates everything first (on an invalid
  /// batch nothing has changed) and returns without waiting for the device:
  /// a fault there surfaces when the stream is next synchronized. The step
  /// follows the model's earlier work and precedes its later work on any
  /// stream. Only a step that needs a larger workspace than any before
  /// waits, for the old one to be idle.
  bool queueStep(const StepBatch &batch,
                 const std::vector<const void *> &inputs,
                 const std::vector<void *> &outputs, void *stream,
                 std::string &error);
  /// Why the model refuses steps (a step failed on the device), or empty.
  const std::string &failure() const;
  /// Waits for the queued steps; a failure there is the model's fault
  /// (further steps are refused).
  bool synchronize(std::string &error);

  /// The bytes of a sequence's cache buffer (aliases resolve to their
  /// source), for inspection: device memory, host-addressable on the CPU
  /// backend.
  uint8_t *cacheBytes(int64_t sequence, int64_t layer,
                      plan::Component component);
  /// The byte size of that buffer, 0 when the layer has none.
  int64_t cacheSize(int64_t layer, plan::Component component) const;

  /// Chooses the GEMM library's algorithms for steps of these token counts
  /// and sizes the step workspace for the largest now (create does so for
  /// every decode count, one token per sequence slot). A larger step than
  /// any prepared grows the workspace before it starts, and its products
  /// are prepared there.
  bool prepareSteps(const std::vector<int64_t> &tokenCounts,
                    std::string &error);
  /// Makes this model a tensor-parallel rank whose steps end with every
  /// layer's output summed over the ranks of `collective` on the device (in
  /// the step's graph when it is recorded), so that each rank's outputs are
  /// the whole model's. Every rank must then run every step, with the same
  /// batch. Needs a backend with streams (a GPU).
  bool sumOverRanks(std::unique_ptr<Collective> collective, std::string &error);
  /// sumOverRanks with a communicator this model joins as `rank` of
  /// `world` (Collective::join, on this model's GPU); returns once every
  /// rank has joined, or fails at the collective deadline.
  bool joinRanks(const CollectiveId &id, int rank, int world,
                 std::string &error);
  /// Whether steps of up to one token per sequence slot run as recorded
  /// graphs where the backend has them (the default): from the second step
  /// of a token count and context bucket on, a step is one graph launch.
  /// Off, every step queues its launches on the stream.
  void useGraphs(bool on);
  /// Whether steps of up to one token per sequence slot run padded to a
  /// power of two of tokens (at most the slots), so that a recorded graph
  /// serves every count up to its own: the padding rows are one-token
  /// sequences at position 0 of a slot no sequence holds (they write only
  /// its caches, which addSequence clears: a released sequence's caches
  /// may be overwritten then, so read them before releaseSequence), with
  /// zero inputs, and their outputs are never copied out. A step runs
  /// unpadded when every slot is held, and where its outputs are summed over
  /// ranks on the device (sumOverRanks: every rank must run the same rows).
  /// Off by default: a padded step costs more than the graph it saves
  /// recording (on the H200, queueStep 3-14% a step; step() more, as it
  /// moves whole padded layouts between the host and the device).
  void padDecodeSteps(bool on);
  /// Library products (shapes) whose generated kernel runs instead, found
  /// while preparing: the library has no algorithm or memory for them.
  const std::vector<GemmCall> &gemmFallbacks() const;

  int64_t maxSequences() const;
  int64_t contextTokens() const;
  /// Device memory the weights take, and the step workspace now (it grows
  /// with the largest step so far).
  int64_t weightBytes() const;
  int64_t workspaceSize() const;
  const char *backendName() const;

private:
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace v4a::rt

#endif // V4A_RUNTIME_MODEL_H
