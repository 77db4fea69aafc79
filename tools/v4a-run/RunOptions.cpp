//===- RunOptions.cpp - v4a-run's command line ----------------------------===//

#include "tools/v4a-run/RunOptions.h"

#include "core/KVPlan.h"
#include "v4a/ModelConfig.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <set>

using namespace llvm;

namespace v4a::run {

cl::OptionCategory runCategory("v4a-run options");
cl::opt<std::string> inputPath(cl::Positional, cl::Required,
                               cl::desc("<config.json>"), cl::cat(runCategory));
// Never set here: v4a-run hands a command line with --package to
// v4a-run-package's code before parsing; declared so that --help lists it.
static cl::opt<std::string>
    package("package",
            cl::desc("Run a package (v4a-compile --target=sm_90a) on the GPU "
                     "with the runtime alone, as v4a-run-package does (its "
                     "flags follow)"),
            cl::value_desc("file"), cl::cat(runCategory));
cl::opt<std::string> backend("backend",
                             cl::desc("Where to run: cpu (default) or cuda"),
                             cl::init("cpu"), cl::cat(runCategory));
cl::opt<std::string>
    weightsPath("weights",
                cl::desc("Checkpoint: .safetensors, or a sharded "
                         "checkpoint's model.safetensors.index.json"),
                cl::value_desc("file"), cl::cat(runCategory));
cl::opt<int64_t> randomSeed("random-weights",
                            cl::desc("Seeded random weights instead"),
                            cl::value_desc("seed"), cl::cat(runCategory));
cl::opt<int64_t>
    promptLen("prompt-len",
              cl::desc("Random inputs: prefill tokens (default 16)"),
              cl::init(16), cl::cat(runCategory));
cl::opt<int64_t> decodeSteps(
    "decode-steps",
    cl::desc("Random inputs: single-token steps after it (default 4)"),
    cl::init(4), cl::cat(runCategory));
cl::opt<std::string>
    inputsPath("inputs",
               cl::desc("Inputs x.step{k} [B, S, dim] instead of random ones"),
               cl::value_desc("file"), cl::cat(runCategory));
cl::opt<int64_t> contextOption(
    "context",
    cl::desc("Tokens per sequence the caches are planned for (default: the "
             "run's tokens, rounded up to 64)"),
    cl::cat(runCategory));
cl::opt<std::string>
    layersOption("layers",
                 cl::desc("Run only these layers, e.g. 0,2-5 (a layer's "
                          "sharing sources must be listed too)"),
                 cl::value_desc("list"), cl::cat(runCategory));
cl::opt<std::string>
    outputsPath("outputs",
                cl::desc("Write y.step{k}.layer{l} [B, S, dim] f32 here"),
                cl::value_desc("file"), cl::cat(runCategory)),
    indexPicksPath(
        "index-picks",
        cl::desc("With --check: write the reference's indexer picks "
                 "index_topk.step{k}.layer{l} [B, S, K] i32 (compressed "
                 "rows, -1 none) and their scores index_scores.step{k}."
                 "layer{l} [B, S, rows] f32 here"),
        cl::value_desc("file"), cl::cat(runCategory));
cl::opt<std::string> indexLayout(
    "index-layout",
    cl::desc("The indexer's key rows: bf16, fp8 (e4m3, one f32 scale per "
             "row) or mxfp4 (e2m1, a ue8m0 scale per 32 dims; default)"),
    cl::init(v4a::plan::indexLayoutName(v4a::plan::kDefaultIndexLayout)),
    cl::cat(runCategory));
cl::opt<int64_t> tensorParallel(
    "tensor-parallel",
    cl::desc("Run the layers as N tensor-parallel ranks on the CPU (each "
             "with 1/N of the heads and output groups), their partial "
             "outputs summed in rank order (default 1)"),
    cl::init(1), cl::cat(runCategory));
cl::opt<bool> gpuLoopsOnCpu(
    "gpu-loops-on-cpu",
    cl::desc("With --backend=cpu: lower with the GPU kernels' loop "
             "structure (the same results; checks it without a GPU)"),
    cl::cat(runCategory));
cl::opt<bool> check("check", cl::desc("Compare every layer with the reference"),
                    cl::cat(runCategory));
cl::opt<double> tolerance(
    "tolerance",
    cl::desc("Largest accepted absolute error with --check (default 0)"),
    cl::init(0.0), cl::cat(runCategory));

const std::vector<std::string> &flagNames() {
  // Read from the category, so that a new flag needs no second list.
  static const std::vector<std::string> names = [] {
    std::vector<std::string> found;
    for (auto &entry : cl::getRegisteredOptions())
      if (!entry.first.empty() &&
          llvm::is_contained(entry.second->Categories, &runCategory))
        found.push_back(entry.first.str());
    return found;
  }();
  return names;
}

bool parseLayerList(StringRef text, int64_t numLayers,
                    std::vector<int64_t> &ids, std::string &error) {
  SmallVector<StringRef> items;
  text.split(items, ',');
  std::set<int64_t> chosen;
  for (StringRef item : items) {
    auto [first, last] = item.trim().split('-');
    int64_t begin, end;
    if (first.getAsInteger(10, begin) ||
        (last.empty() ? (end = begin, false) : last.getAsInteger(10, end)) ||
        begin < 0 || end < begin || end >= numLayers) {
      error = "--layers: '" + item.str() +
              "' is not a layer or range of "
              "layers 0.." +
              std::to_string(numLayers - 1);
      return false;
    }
    for (int64_t id = begin; id <= end; ++id)
      chosen.insert(id);
  }
  ids.assign(chosen.begin(), chosen.end());
  return true;
}

std::optional<std::string> checkFlags() {
  if (backend != "cpu" && backend != "cuda")
    return "--backend=" + backend + ": unknown backend (cpu, cuda)";
  for (cl::opt<std::string> *path : {&weightsPath, &inputsPath, &outputsPath,
                                     &indexPicksPath, &layersOption})
    if (path->getNumOccurrences() && path->empty())
      return "--" + path->ArgStr.str() + ": empty value";
  bool random = randomSeed.getNumOccurrences() > 0;
  if (weightsPath.empty() == !random)
    return std::string(
        "give exactly one of --weights FILE and --random-weights SEED");
  if (random && randomSeed < 0)
    return "--random-weights " + std::to_string(randomSeed) +
           ": the seed must be >= 0";
  bool stepFlags =
      promptLen.getNumOccurrences() > 0 || decodeSteps.getNumOccurrences() > 0;
  if (!inputsPath.empty() && stepFlags)
    return std::string("--prompt-len and --decode-steps shape random inputs; "
                       "they cannot be combined with --inputs");
  if (promptLen < 0 || promptLen > kMaxContext || decodeSteps < 0 ||
      decodeSteps > kMaxContext || promptLen + decodeSteps > kMaxContext)
    return formatv("--prompt-len {0} and --decode-steps {1}: each must be in "
                   "[0, {2}] and together at most {2} tokens",
                   promptLen.getValue(), decodeSteps.getValue(), kMaxContext)
        .str();
  if (inputsPath.empty() && promptLen + decodeSteps == 0)
    return std::string("--prompt-len 0 and --decode-steps 0: nothing to run");
  if (contextOption.getNumOccurrences() &&
      (contextOption <= 0 || contextOption > kMaxContext))
    return formatv("--context {0}: must be in [1, {1}]",
                   contextOption.getValue(), kMaxContext)
        .str();
  if (tensorParallel < 1 || tensorParallel > kMaxTensorParallel)
    return formatv("--tensor-parallel {0}: must be 1 .. {1}",
                   tensorParallel.getValue(), kMaxTensorParallel)
        .str();
  if (tensorParallel != 1 && backend != "cpu")
    return std::string("--tensor-parallel runs on the cpu backend");
  if (!std::isfinite(tolerance) || tolerance < 0)
    return formatv("--tolerance {0}: must be a finite number >= 0",
                   tolerance.getValue())
        .str();
  if (tolerance.getNumOccurrences() && !check)
    return std::string("--tolerance applies to --check; give --check too");
  if (!indexPicksPath.empty() && !check)
    return std::string("--index-picks writes the reference's picks; give "
                       "--check too");
  if (check && weightsPath == "-")
    return std::string("--check reads the checkpoint a second time for the "
                       "reference; give a file, not standard input");
  return std::nullopt;
}

} // namespace v4a::run
