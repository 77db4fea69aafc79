//===- v4a-run.cpp - run a model's attention layers -----------------------===//
//
// v4a-run --package MODEL.v4apkg ... runs a package (see v4a-run-package).
// v4a-run CONFIG.json [--backend=cpu] (--weights FILE | --random-weights SEED)
//         [--prompt-len N --decode-steps M | --inputs FILE] [--context N]
//         [--layers LIST] [--outputs FILE] [--check [--tolerance T]]
//
// Runs the attention layers through the compiled kernels, printing each phase
// and its time. With --check the reference implementation runs alongside
// and the largest absolute and relative error of every layer is printed.
//
//===----------------------------------------------------------------------===//

#include "core/FileIO.h"
#include "core/Numerics.h"
#include "lib/Engine/Checkpoint.h"
#include "lib/Engine/HostWeights.h"
#include "lib/Reference/Reference.h"
#include "runtime/Model.h"
#include "runtime/SafeTensors.h"
#include "runtime/StepInputs.h"
#include "tools/ToolSupport.h"
#include "tools/v4a-run-package/RunPackage.h"
#include "tools/v4a-run/RunOptions.h"
#include "v4a/Engine.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>

using namespace llvm;
using namespace v4a;
using namespace v4a::run;

static int fail(const Twine &message) {
  errs() << "v4a-run: error: " << message << "\n";
  return 1;
}

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Prints a phase when it ends, with its time; a long phase also reports
/// its progress every few seconds.
class Phase {
public:
  explicit Phase(StringRef name) : name(name.str()), start(Clock::now()) {}
  void progress(int64_t done, int64_t total, StringRef unit) {
    if (secondsSince(lastReport) < 5.0)
      return;
    lastReport = Clock::now();
    outs() << formatv("v4a-run: {0}: {1}/{2} {3} ({4:f1} s)\n", name, done,
                      total, unit, secondsSince(start));
    outs().flush();
  }
  void done(const Twine &what) {
    outs() << formatv("v4a-run: {0}: {1} ({2:f2} s)\n", name, what.str(),
                      secondsSince(start));
    outs().flush();
  }

private:
  std::string name;
  Clock::time_point start, lastReport = Clock::now();
};

} // namespace

/// `v4a-run --package FILE ...` runs a package as v4a-run-package does.
static std::optional<int> runPackageIfAsked(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg != "--package" && arg.rfind("--package=", 0) != 0)
      continue;
    std::vector<std::string> args = {argv[0]};
    if (arg == "--package") {
      if (i + 1 >= argc)
        return fail("--package needs a file");
      args.push_back(argv[i + 1]);
    } else {
      args.push_back(arg.substr(10));
    }
    for (int j = 1; j < argc; ++j)
      if (j != i && !(arg == "--package" && j == i + 1))
        args.push_back(argv[j]);
    std::vector<char *> pointers;
    for (std::string &a : args)
      pointers.push_back(a.data());
    return runPackage("v4a-run", static_cast<int>(pointers.size()),
                      pointers.data());
  }
  return std::nullopt;
}

/// Whether `path` starts as a package does (v4a-compile --target).
static bool isPackage(const std::string &path) {
  char magic[6] = {};
  std::ifstream file(path, std::ios::binary);
  return file.read(magic, sizeof magic) &&
         std::string(magic, sizeof magic) == "V4APKG";
}

namespace {

/// One sequence's indexer selection in one layer and step: the picks of
/// its tokens and their scores [tokens, rows].
struct IndexerSelection {
  std::vector<std::vector<int32_t>> picks;
  ref::Tensor scores;
};

/// Adds step `k`'s selections of `layer` to `file`: index_topk [B, S, K]
/// i32 (-1: none, and for a sequence's tokens past its length) and
/// index_scores [B, S, rows] f32 (-inf past a sequence's rows).
void addSelections(st::File &file, size_t k, int64_t layer,
                   const std::vector<IndexerSelection> &bySequence,
                   int64_t tokens) {
  int64_t batch = static_cast<int64_t>(bySequence.size()), width = 0, rows = 0;
  for (const IndexerSelection &s : bySequence) {
    if (!s.picks.empty())
      width = std::max<int64_t>(width, s.picks.front().size());
    if (s.scores.shape.size() == 2)
      rows = std::max(rows, s.scores.dim(1));
  }
  std::vector<int32_t> picks(batch * tokens * width, -1);
  std::vector<float> scores(batch * tokens * rows, -INFINITY);
  for (int64_t b = 0; b < batch; ++b) {
    const IndexerSelection &s = bySequence[b];
    for (size_t t = 0; t < s.picks.size(); ++t) {
      std::copy(s.picks[t].begin(), s.picks[t].end(),
                picks.begin() + (b * tokens + t) * width);
      std::copy(s.scores.row(t), s.scores.row(t) + s.scores.dim(1),
                scores.begin() + (b * tokens + t) * rows);
    }
  }
  st::Tensor topk{st::DType::I32, {batch, tokens, width}, {}};
  topk.data.resize(picks.size() * sizeof(int32_t));
  std::memcpy(topk.data.data(), picks.data(), topk.data.size());
  file[formatv("index_topk.step{0}.layer{1}", k, layer).str()] =
      std::move(topk);
  file[formatv("index_scores.step{0}.layer{1}", k, layer).str()] =
      st::fromF32({batch, tokens, rows}, scores);
}

} // namespace

int main(int argc, char **argv) {
  if (std::optional<int> status = runPackageIfAsked(argc, argv))
    return *status;
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(runCategory);
  parseToolOptions(
      argc, argv,
      "v4a runner: runs a model's attention layers on the CPU.\n\n"
      "Defaults: --backend=cpu, --prompt-len 16 --decode-steps 4 with random "
      "inputs,\n--context of the run's tokens rounded up to 64, all layers, "
      "--tolerance 0.\n");
  if (std::optional<std::string> problem = checkFlags())
    return fail(*problem);

  std::string error;
  if (isPackage(inputPath))
    return fail(inputPath + " is a package: run it with v4a-run --package " +
                inputPath + " (or v4a-run-package)");
  std::optional<std::string> text =
      io::readFile(inputPath, io::kConfigLimit, "config", error);
  if (!text)
    return fail(error);
  std::string config = std::move(*text);
  warnAboutConfig("v4a-run", inputPath, config);
  ConfigError configError;
  std::optional<ModelConfig> parsed = parseModelConfig(config, configError);
  if (!parsed)
    return fail(inputPath + ": " + configError.str());
  int64_t dim = parsed->hiddenSize, layers = parsed->numLayers();

  std::vector<int64_t> selectedIds;
  if (!layersOption.empty() &&
      !parseLayerList(layersOption, layers, selectedIds, error))
    return fail(error);

  // Steps: read from a file, or shaped by the flags (inputs made later).
  std::vector<rt::InputStep> steps;
  int64_t batch = 1;
  if (!inputsPath.empty()) {
    Phase phase("inputs");
    if (!rt::readStepInputs(inputsPath, dim, layers, kMaxBatch, kMaxContext,
                            steps, batch, error))
      return fail(error);
    phase.done(formatv("{0} steps of {1} sequences from {2}", steps.size(),
                       batch, inputsPath.getValue()));
  } else {
    steps.resize(1 + decodeSteps);
    steps[0].tokens = promptLen;
    for (size_t k = 1; k < steps.size(); ++k)
      steps[k].tokens = 1;
    for (rt::InputStep &step : steps)
      step.lengths = {step.tokens};
  }
  int64_t tokens = 0;
  for (const rt::InputStep &step : steps)
    tokens += step.tokens;
  if (tokens > kMaxContext)
    return fail(formatv("the inputs hold {0} tokens per sequence, more than "
                        "the limit of {1}",
                        tokens, kMaxContext));
  int64_t context = contextOption.getNumOccurrences()
                        ? contextOption.getValue()
                        : std::max<int64_t>(64, (tokens + 63) / 64 * 64);
  if (tokens > context)
    return fail(formatv("the run needs {0} tokens per sequence but --context "
                        "is {1}",
                        tokens, context));

  Phase compile("compile");
  EngineOptions options;
  options.maxSequences = batch;
  options.contextTokens = context;
  options.layers = selectedIds;
  options.backend = backend;
  options.gpuLoopsOnCpu = gpuLoopsOnCpu;
  options.indexLayout = indexLayout;
  options.tensorParallel = tensorParallel;
  // One engine per tensor-parallel rank; the first stands for the model.
  std::vector<std::unique_ptr<Engine>> ranks;
  for (int64_t rank = 0; rank < tensorParallel; ++rank) {
    options.tensorRank = rank;
    ranks.push_back(Engine::create(config, options, error));
    if (!ranks.back())
      return fail(inputPath + ": " + error);
  }
  Engine *engine = ranks.front().get();
  const std::vector<LayerSpec> &selected = engine->selectedLayers();
  compile.done(formatv("{0} of {1} layers, context {2} tokens, {3} "
                       "sequence{4}, {5} thread{6}",
                       selected.size(), layers, context, batch,
                       batch == 1 ? "" : "s", engine->threads(),
                       engine->threads() == 1 ? "" : "s"));
  // Inputs and outputs of the largest step, and its workspace (twice with
  // the reference alongside), must fit before anything is made.
  int64_t position = 0;
  double outputsBytes = 0.0;
  for (size_t k = 0; k < steps.size(); ++k) {
    // --outputs keeps every step's outputs, and serializing copies them.
    if (!outputsPath.empty())
      outputsBytes += 2.0 * 4.0 * static_cast<double>(selected.size()) * batch *
                      steps[k].tokens * dim;
    double io = 2.0 * 4.0 *
                static_cast<double>(check ? layers : selected.size()) * batch *
                steps[k].tokens * dim;
    double workspace =
        rt::stepWorkspaceBytes(engine->config(), selected, steps[k].tokens,
                               position + steps[k].tokens);
    position += steps[k].tokens;
    if (!io::fitsInMemory(
            outputsBytes + io + (check ? 2.0 : 1.0) * workspace,
            formatv("step {0} ({1} tokens per sequence)", k, steps[k].tokens)
                .str(),
            error))
      return fail(error);
  }

  std::vector<bool> runs(layers, false);
  for (const LayerSpec &layer : selected)
    runs[layer.id] = true;

  Phase weights("weights");
  std::vector<ref::LayerWeights> referenceWeights;
  if (!weightsPath.empty()) {
    for (std::unique_ptr<Engine> &rank : ranks)
      if (!rank->loadWeights(weightsPath, error))
        return fail(error);
    std::vector<rt::LayerTensors> tensors;
    std::vector<int64_t> ids;
    for (const LayerSpec &layer : selected)
      ids.push_back(layer.id);
    if (check &&
        !readCheckpoint(engine->config(), weightsPath, tensors, error, ids))
      return fail(error);
    for (const auto &layer : tensors)
      referenceWeights.push_back(toReference(layer));
    weights.done("loaded " + weightsPath);
  } else {
    for (std::unique_ptr<Engine> &rank : ranks)
      if (!rank->loadRandomWeights(randomSeed, error,
                                   [&](int64_t done, int64_t total) {
                                     weights.progress(done, total, "tensors");
                                   }))
        return fail(error);
    // The reference's weights of the layers that run (the others are left
    // empty).
    if (check)
      for (const LayerSpec &layer : engine->layers())
        referenceWeights.push_back(
            runs[layer.id]
                ? ref::randomLayerWeights(engine->config(), layer, randomSeed)
                : ref::LayerWeights());
    weights.done(formatv("random, seed {0}", randomSeed.getValue()));
  }
  std::optional<ref::Model> reference;
  std::vector<ref::SequenceState> states;
  if (check) {
    // A window longer than the context behaves as one of the context's size.
    ModelConfig referenceConfig = engine->config();
    referenceConfig.slidingWindow =
        std::min(referenceConfig.slidingWindow, context);
    reference.emplace(referenceConfig, engine->layers(), referenceWeights);
    for (int64_t b = 0; b < batch; ++b)
      states.push_back(reference->newSequence());
  }

  // Every rank numbers its sequences alike.
  std::vector<int64_t> sequences;
  for (int64_t b = 0; b < batch; ++b) {
    for (std::unique_ptr<Engine> &rank : ranks)
      if (rank->addSequence(error) != b)
        return fail(error.empty() ? "the ranks number sequences differently"
                                  : error);
    sequences.push_back(b);
  }

  std::vector<double> maxAbs(layers, 0.0), maxRef(layers, 0.0);
  st::File written, pickFile;
  // The reference's indexer selections of the step, per layer and sequence.
  std::map<int64_t, std::vector<IndexerSelection>> selections;
  int64_t observedSequence = 0;
  if (!indexPicksPath.empty())
    reference->observeIndexer(
        [&](int64_t layer, const ref::Tensor &scores,
            const std::vector<std::vector<int32_t>> &picks) {
          std::vector<IndexerSelection> &bySequence = selections[layer];
          bySequence.resize(batch);
          bySequence[observedSequence] = {picks, scores};
        });
  int64_t totalTokens = 0;
  Phase run("steps");
  double checkSeconds = 0.0;
  for (size_t k = 0; k < steps.size(); ++k) {
    rt::InputStep &step = steps[k];
    if (step.inputs.empty())
      for (int64_t l = 0; l < layers; ++l)
        step.inputs.push_back(
            runs[l]
                ? std::make_shared<const std::vector<float>>(
                      ref::randomActivations(step.tokens * dim, 1000 * k + l))
                : nullptr);
    rt::StepBuffers buffers = rt::stepBuffers(step, runs, batch, dim);
    std::vector<std::vector<float>> &out = buffers.out;
    auto runRank = [&](size_t r, rt::StepBuffers &into) {
      if (ranks[r]->step({sequences, step.lengths, step.tokens}, into.inputs,
                         into.outputs, error))
        return true;
      error = "step " + std::to_string(k) +
              (ranks.size() > 1 ? ", rank " + std::to_string(r) : "") + ": " +
              error;
      return false;
    };
    if (!rt::stepEveryRank(ranks.size(), step, runs, batch, dim, buffers,
                           runRank))
      return fail(error);
    for (int64_t b = 0; b < batch; ++b)
      totalTokens += step.lengths[b];
    Clock::time_point checkStart = Clock::now();
    for (int64_t b = 0; check && b < batch; ++b) {
      int64_t n = step.lengths[b];
      observedSequence = b;
      std::vector<ref::Tensor> y =
          referenceRow(*reference, states[b], step, b, runs, dim);
      for (int64_t l = 0; l < layers; ++l)
        for (int64_t i = 0; runs[l] && i < n * dim; ++i) {
          double want = y[l].data[i];
          double got = out[l][b * step.tokens * dim + i];
          double diff = std::fabs(got - want);
          maxAbs[l] = std::isnan(diff) ? INFINITY : std::max(maxAbs[l], diff);
          maxRef[l] = std::max(maxRef[l], std::fabs(want));
        }
    }
    checkSeconds += secondsSince(checkStart);
    for (const auto &[layer, bySequence] : selections)
      addSelections(pickFile, k, layer, bySequence, step.tokens);
    selections.clear();
    if (!outputsPath.empty())
      for (int64_t l = 0; l < layers; ++l)
        if (runs[l])
          written[formatv("y.step{0}.layer{1}", k, l).str()] =
              st::fromF32({batch, step.tokens, dim}, out[l]);
    step.inputs.clear();
    step.inputs.shrink_to_fit();
    run.progress(k + 1, steps.size(), "steps");
  }
  run.done(formatv("{0} steps, {1} tokens", steps.size(), totalTokens));
  outs() << formatv("v4a-run: {0} layers, {1} steps, {2} tokens on the {3} "
                    "backend\n",
                    selected.size(), steps.size(), totalTokens,
                    backend.getValue());
  if (!outputsPath.empty() && !st::write(outputsPath, written, error))
    return fail(error);
  if (!indexPicksPath.empty() && !st::write(indexPicksPath, pickFile, error))
    return fail(error);
  if (!check)
    return 0;
  if (totalTokens == 0)
    return fail("--check compared nothing: every sequence has length 0");
  outs() << formatv("v4a-run: check: the reference alongside ({0:f2} s)\n",
                    checkSeconds);
  double worst = 0.0;
  for (int64_t l = 0; l < layers; ++l) {
    if (!runs[l])
      continue;
    double rel = maxRef[l] > 0 ? maxAbs[l] / maxRef[l] : maxAbs[l];
    outs() << formatv("layer {0,2} (ratio {1,3}): max abs err {2:e}, max rel "
                      "err {3:e}\n",
                      l, engine->layers()[l].compressRatio, maxAbs[l], rel);
    worst = std::max(worst, maxAbs[l]);
  }
  bool ok = worst <= tolerance;
  outs() << formatv("check: max abs err {0:e} (tolerance {1:e}): {2}\n", worst,
                    tolerance.getValue(), ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
