//===- ModelTest.cpp - what a step asks of its backend --------------------===//
//
// The runtime's Model over a backend that records every call: a step copies
// its inputs in once, queues its calls, waits once and copies its outputs
// back once, with no allocation, release or read in between; the widths'
// context bound reaches the functions in host memory; a step that fails on
// the device stops the model; a merged projection's weight is its parts'
// rows in order, and a part that does not fit is one error naming it; a
// tensor-parallel rank keeps its heads' and output groups' slices.
//
//===----------------------------------------------------------------------===//

#include "runtime/Model.h"
#include "runtime/Weights.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

using namespace v4a;

namespace {

/// Host memory that counts what the model asks of it; run() records the
/// arguments instead of running a function.
class RecordingBackend : public rt::Backend {
public:
  struct Counts {
    int allocations = 0, releases = 0, toDevice = 0, toHost = 0, runs = 0,
        waits = 0;
  };
  Counts counts;
  /// The context bound and the token ids the last run saw.
  int64_t context = -1;
  std::vector<int64_t> positions, slots, first, last;
  /// The next wait reports a device fault.
  bool faultOnWait = false;

  const char *name() const override { return "recording"; }
  void *allocate(int64_t bytes, std::string &) override {
    ++counts.allocations;
    return std::calloc(bytes > 0 ? bytes : 1, 1);
  }
  void release(void *memory) override {
    ++counts.releases;
    std::free(memory);
  }
  void copyToDevice(void *device, const void *host, int64_t bytes) override {
    ++counts.toDevice;
    std::memcpy(device, host, bytes);
  }
  void copyToHost(void *host, const void *device, int64_t bytes) override {
    ++counts.toHost;
    std::memcpy(host, device, bytes);
  }
  bool run(const step::Function &function,
           const std::vector<rt::BufferArg> &args, std::string &) override {
    ++counts.runs;
    for (size_t i = 0; i < args.size(); ++i) {
      const step::Arg &arg = function.args[i];
      if (step::isHostArg(arg))
        context = *static_cast<const int64_t *>(args[i].data);
      for (auto [bind, ids] : {std::pair{"positions", &positions},
                               {"slots", &slots},
                               {"first", &first},
                               {"last", &last}})
        if (arg.bind == bind) {
          const auto *p = static_cast<const int64_t *>(args[i].data);
          ids->assign(p, p + args[i].shape[0]);
        }
    }
    return true;
  }
  bool synchronize(std::string &error) override {
    ++counts.waits;
    if (!faultOnWait)
      return true;
    faultOnWait = false;
    error = "an illegal memory access was encountered";
    return false;
  }
};

/// A model of no selected attention layer whose step is one metadata call
/// taking the token ids and the context bound.
std::unique_ptr<rt::Model> metadataModel(RecordingBackend *&backend,
                                         std::string &error) {
  ModelConfig config;
  config.hiddenSize = 64;
  config.numHiddenLayers = 1;
  config.compressRatios = {0};
  step::Function meta;
  meta.name = "meta";
  for (const char *bind : {"positions", "slots", "first", "last"})
    meta.args.push_back({bind, step::Element::I64, {-1}, false});
  meta.args.push_back({step::kContextBind, step::Element::I64, {1}, false});
  meta.args.push_back({"window.attend", step::Element::I32, {-1, 8}, true});
  rt::StepProgram program;
  program.functions = {meta};
  program.calls = {{0, -1, -1}};
  plan::Plan plan;
  plan.options.contextTokens = 256;
  auto recording = std::make_unique<RecordingBackend>();
  backend = recording.get();
  return rt::Model::create(config, {}, program,
                           std::vector<rt::LayerTensors>(1), plan, 4,
                           std::move(recording), error);
}

TEST(Model, AStepCopiesInOnceWaitsOnceAndAllocatesNothing) {
  RecordingBackend *backend = nullptr;
  std::string error;
  auto model = metadataModel(backend, error);
  ASSERT_TRUE(model) << error;
  int64_t a = model->addSequence(error), b = model->addSequence(error);
  ASSERT_TRUE(model->restorePosition(a, 5, error)) << error;
  std::vector<const float *> in(1, nullptr);
  std::vector<float *> out(1, nullptr);
  backend->counts = {};
  ASSERT_TRUE(model->step({{a, b}, {3, 1}, 3}, in, out, error)) << error;
  EXPECT_EQ(backend->counts.allocations, 0);
  EXPECT_EQ(backend->counts.releases, 0);
  EXPECT_EQ(backend->counts.toDevice, 1);
  EXPECT_EQ(backend->counts.runs, 1);
  EXPECT_EQ(backend->counts.waits, 1);
  EXPECT_EQ(backend->counts.toHost, 1);
  EXPECT_EQ(backend->positions, (std::vector<int64_t>{5, 6, 7, 0}));
  // The longest sequence's length, as the host knows it.
  EXPECT_EQ(backend->context, 8);
  // Another shape of step reuses the same workspace.
  backend->counts = {};
  ASSERT_TRUE(model->step({{b}, {2}, 2}, in, out, error)) << error;
  EXPECT_EQ(backend->counts.allocations, 0);
  EXPECT_EQ(backend->context, 3);
}

TEST(Model, PaddedStepsTakeAFreeSlotAtPositionZero) {
  RecordingBackend *backend = nullptr;
  std::string error;
  auto model = metadataModel(backend, error);
  ASSERT_TRUE(model) << error;
  model->padDecodeSteps(true);
  int64_t a = model->addSequence(error), b = model->addSequence(error);
  ASSERT_TRUE(model->restorePosition(a, 5, error)) << error;
  std::vector<const float *> in(1, nullptr);
  std::vector<float *> out(1, nullptr);
  // 3 tokens run as 4: the padding row is a sequence of its own at
  // position 0 of slot 2, the first that no sequence holds.
  ASSERT_TRUE(model->step({{a, b}, {2, 1}, 2}, in, out, error)) << error;
  EXPECT_EQ(backend->positions, (std::vector<int64_t>{5, 6, 0, 0}));
  EXPECT_EQ(backend->slots, (std::vector<int64_t>{a, a, b, 2}));
  EXPECT_EQ(backend->first, (std::vector<int64_t>{0, 0, 2, 3}));
  EXPECT_EQ(backend->last, (std::vector<int64_t>{1, 1, 2, 3}));
  EXPECT_EQ(backend->context, 7);
  // A power of two runs as it is; so does a step when every slot is held.
  ASSERT_TRUE(model->step({{a, b}, {1, 1}, 1}, in, out, error)) << error;
  EXPECT_EQ(backend->positions.size(), 2u);
  int64_t c = model->addSequence(error), d = model->addSequence(error);
  ASSERT_GE(d, 0) << error;
  ASSERT_TRUE(model->step({{a, b, c}, {1, 1, 1}, 1}, in, out, error)) << error;
  EXPECT_EQ(backend->slots, (std::vector<int64_t>{a, b, c}));
  // Steps on the backend's tensors pad alike.
  ASSERT_TRUE(model->releaseSequence(d, error)) << error;
  std::vector<const void *> from(1, nullptr);
  std::vector<void *> to(1, nullptr);
  ASSERT_TRUE(
      model->queueStep({{c, a, b}, {1, 1, 1}, 1}, from, to, nullptr, error))
      << error;
  EXPECT_EQ(backend->slots, (std::vector<int64_t>{c, a, b, d}));
  EXPECT_EQ(backend->positions, (std::vector<int64_t>{1, 9, 3, 0}));
}

TEST(Model, CreateRefusesSizesOutsideTheirRange) {
  // A configuration made by hand, not by the compiler: no output groups
  // (its wo_a shape divides by them).
  ModelConfig config;
  config.hiddenSize = 64;
  config.numHiddenLayers = 1;
  config.numAttentionHeads = 2;
  config.headDim = 32;
  config.qLoraRank = 16;
  config.oLoraRank = 16;
  config.slidingWindow = 8;
  config.compressRatios = {0};
  LayerSpec layer;
  std::string error;
  auto model = rt::Model::create(
      config, {layer}, rt::StepProgram{}, std::vector<rt::LayerTensors>(1),
      plan::Plan{}, 4, std::make_unique<RecordingBackend>(), error);
  EXPECT_FALSE(model);
  EXPECT_EQ(error, "the model configuration: o_groups is 0, outside [1, "
                   "1048576]");
}

TEST(Model, ADeviceFaultStopsTheModel) {
  RecordingBackend *backend = nullptr;
  std::string error;
  auto model = metadataModel(backend, error);
  ASSERT_TRUE(model) << error;
  int64_t a = model->addSequence(error);
  std::vector<const float *> in(1, nullptr);
  std::vector<float *> out(1, nullptr);
  backend->faultOnWait = true;
  EXPECT_FALSE(model->step({{a}, {1}, 1}, in, out, error));
  EXPECT_NE(error.find("failed on the device: an illegal memory access"),
            std::string::npos)
      << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
  int runs = backend->counts.runs;
  EXPECT_FALSE(model->step({{a}, {1}, 1}, in, out, error));
  EXPECT_NE(error.find("refuses further steps"), std::string::npos) << error;
  EXPECT_EQ(backend->counts.runs, runs) << "nothing runs after a fault";
}

/// A bf16 matrix of `rows` x `cols` whose element (r, c) holds `first` + r
/// (bits, not values: stacking moves them as they are).
rt::HostTensor bf16Rows(int64_t rows, int64_t cols, uint8_t first) {
  rt::HostTensor t;
  t.type = rt::HostTensor::Type::BF16;
  t.shape = {rows, cols};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < 2 * cols; ++c)
      t.bytes.push_back(static_cast<uint8_t>(first + r));
  return t;
}

step::Arg stackedArg(int64_t rows, int64_t cols) {
  return {"a.weight+b.weight", step::Element::BF16, {rows, cols}, false};
}

TEST(Model, StackedWeightHoldsThePartsRowsInOrder) {
  rt::LayerTensors tensors;
  tensors["a.weight"] = bf16Rows(2, 4, 10);
  tensors["b.weight"] = bf16Rows(1, 4, 20);
  tensors["c.weight"] = bf16Rows(1, 4, 30);
  std::string error;
  ASSERT_TRUE(rt::stackWeight(tensors, stackedArg(3, 4), error)) << error;
  EXPECT_EQ(tensors.count("a.weight") + tensors.count("b.weight"), 0u);
  EXPECT_EQ(tensors.count("c.weight"), 1u);
  const rt::HostTensor &stacked = tensors.at("a.weight+b.weight");
  EXPECT_EQ(stacked.shape, (std::vector<int64_t>{3, 4}));
  ASSERT_EQ(stacked.bytes.size(), 24u);
  EXPECT_EQ(stacked.bytes[0], 10);
  EXPECT_EQ(stacked.bytes[8], 11);
  EXPECT_EQ(stacked.bytes[16], 20);
}

TEST(Model, StackedWeightErrorsNameThePart) {
  struct Case {
    const char *what;
    rt::HostTensor b;
    step::Arg arg;
    const char *message;
  };
  rt::HostTensor f32 = bf16Rows(1, 4, 0);
  f32.type = rt::HostTensor::Type::F32;
  f32.bytes.clear();
  f32.f32.assign(4, 0.0f);
  std::vector<Case> cases = {
      {"another width", bf16Rows(1, 8, 0), stackedArg(3, 4),
       "a.weight+b.weight: b.weight cannot be stacked into a [3, 4] bf16 "
       "weight"},
      {"another type", f32, stackedArg(3, 4),
       "a.weight+b.weight: b.weight cannot be stacked into a [3, 4] bf16 "
       "weight"},
      {"rows that do not add up", bf16Rows(2, 4, 0), stackedArg(3, 4),
       "a.weight+b.weight: the parts have 4 rows, the step takes 3"},
      {"not a matrix",
       bf16Rows(1, 4, 0),
       {"a.weight+b.weight", step::Element::BF16, {3, 4, 1}, false},
       "a.weight+b.weight: a stacked weight is a matrix, the step takes rank "
       "3"},
  };
  for (const Case &c : cases) {
    rt::LayerTensors tensors;
    tensors["a.weight"] = bf16Rows(2, 4, 10);
    tensors["b.weight"] = c.b;
    std::string error;
    EXPECT_FALSE(rt::stackWeight(tensors, c.arg, error)) << c.what;
    EXPECT_EQ(error, c.message) << c.what;
    // Nothing is taken apart when the weight cannot be stacked.
    EXPECT_EQ(tensors.count("a.weight") + tensors.count("b.weight"), 2u)
        << c.what;
  }
  rt::LayerTensors missing;
  missing["a.weight"] = bf16Rows(2, 4, 10);
  std::string error;
  EXPECT_FALSE(rt::stackWeight(missing, stackedArg(3, 4), error));
  EXPECT_EQ(error, "a.weight+b.weight: the checkpoint has no b.weight");
}

} // namespace

namespace {

/// A [rows, columns] e4m3 tensor whose byte at (r, c) is (r * 7 + c) % 256.
rt::HostTensor patternBytes(int64_t rows, int64_t columns,
                            rt::HostTensor::Type type) {
  rt::HostTensor t;
  t.type = type;
  t.shape = {rows, columns};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < columns; ++c)
      t.bytes.push_back(static_cast<uint8_t>((r * 7 + c) % 256));
  return t;
}

ModelConfig shardedConfig() {
  ModelConfig config;
  config.numAttentionHeads = 4;
  config.headDim = 128;
  config.oGroups = 2;
  config.oLoraRank = 128;
  return config;
}

} // namespace

TEST(Weights, ATensorParallelRankKeepsItsHeadsAndGroups) {
  using Type = rt::HostTensor::Type;
  ModelConfig config = shardedConfig();
  rt::LayerTensors tensors;
  tensors["attn_sink"].shape = {4};
  tensors["attn_sink"].f32 = {0.5f, 1.5f, 2.5f, 3.5f};
  tensors["wq_b.weight"] = patternBytes(512, 3, Type::E4M3);
  tensors["wq_b.scale"] = patternBytes(4, 1, Type::UE8M0);
  tensors["wo_a.weight"] = patternBytes(256, 5, Type::E4M3);
  tensors["wo_b.weight"] = patternBytes(6, 256, Type::E4M3);
  tensors["wo_b.scale"] = patternBytes(1, 2, Type::UE8M0);
  tensors["wkv.weight"] = patternBytes(9, 9, Type::E4M3);
  rt::LayerTensors whole = tensors;
  std::string error;
  ASSERT_TRUE(rt::shardLayerTensors(config, 1, 2, tensors, error)) << error;
  EXPECT_EQ(tensors["attn_sink"].f32, (std::vector<float>{2.5f, 3.5f}));
  // Heads 2, 3: wq_b rows 256 .. 511 and their two scale rows.
  EXPECT_EQ(tensors["wq_b.weight"].shape, (std::vector<int64_t>{256, 3}));
  EXPECT_EQ(tensors["wq_b.weight"].bytes[0], whole["wq_b.weight"].bytes[768]);
  EXPECT_EQ(tensors["wq_b.scale"].bytes,
            (std::vector<uint8_t>{whole["wq_b.scale"].bytes[2],
                                  whole["wq_b.scale"].bytes[3]}));
  // Group 1: wo_a rows 128 .. 255, wo_b columns 128 .. 255.
  EXPECT_EQ(tensors["wo_a.weight"].shape, (std::vector<int64_t>{128, 5}));
  EXPECT_EQ(tensors["wo_a.weight"].bytes[0], whole["wo_a.weight"].bytes[640]);
  EXPECT_EQ(tensors["wo_b.weight"].shape, (std::vector<int64_t>{6, 128}));
  for (int64_t r = 0; r < 6; ++r)
    EXPECT_EQ(tensors["wo_b.weight"].bytes[r * 128 + 5],
              whole["wo_b.weight"].bytes[r * 256 + 128 + 5]);
  EXPECT_EQ(tensors["wo_b.scale"].bytes,
            (std::vector<uint8_t>{whole["wo_b.scale"].bytes[1]}));
  // What every rank needs stays whole.
  EXPECT_EQ(tensors["wkv.weight"].bytes, whole["wkv.weight"].bytes);
}

TEST(Weights, ARankThatWouldCutAScaleBlockIsAnError) {
  ModelConfig config = shardedConfig();
  config.oLoraRank = 64;
  rt::LayerTensors tensors;
  tensors["wo_a.weight"] = patternBytes(128, 5, rt::HostTensor::Type::E4M3);
  tensors["wo_a.scale"] = patternBytes(1, 1, rt::HostTensor::Type::UE8M0);
  std::string error;
  EXPECT_FALSE(rt::shardLayerTensors(config, 0, 2, tensors, error));
  EXPECT_EQ(error, "wo_a.scale: a rank's 64 rows of the weight are not whole "
                   "128-wide scale blocks");
}
