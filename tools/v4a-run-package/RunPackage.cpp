//===- RunPackage.cpp - run a compiled package, runtime only --------------===//
//
// v4a-run-package MODEL.v4apkg (--weights FILE | --random-weights SEED)
//     (--inputs FILE | --prompt-len N --decode-steps M [--lengths L0,L1,..])
//     [--layers L0,L1,..] [--outputs FILE] [--expected FILE | --check]
//     [--tolerance T] [--tensor-rank R] [--all-reduce host|nccl]
//     [--nccl-id FILE]
// v4a-run-package MODEL.v4apkg (--weights FILE | --random-weights SEED) --bench
//     --batch B --context C --tokens T [--repeat N] [--layers ..] [--json FILE]
//
// Runs a package (v4a-compile --target=sm_90a) on the CUDA backend with the
// runtime alone: no compiler, MLIR or LLVM, which is what an inference
// server deploys. Weights, inputs and outputs follow v4a-run's safetensors
// contract (x.step{k}[.layer{l}], lengths.step{k}, y.step{k}.layer{l}).
// With --expected (e.g. the reference's outputs from v4a-fixture) or --check
// (the reference implementation alongside) it prints every layer's largest
// absolute and relative error and fails above the tolerance.
//
// --bench times one step of T tokens for each of B sequences whose caches
// already hold C tokens (filled with random finite values): decode at long
// context without prefilling it, or a prefill (C = 0). Each repeat restores
// the same positions; the first run is a warm-up.
//
// A tensor-parallel package (v4a-compile --tensor-parallel N) runs every
// rank in this process on the one GPU, each with its part of the whole
// model's weights, and sums their partial outputs on the host in rank order
// (rounded to bf16 once): what an all-reduce gives, for checking a sharded
// package where one GPU is all there is. --tensor-rank R runs rank R alone
// (its partial outputs; --bench times rank 0 unless told).
//
// --all-reduce nccl sums the ranks' outputs on the GPUs through NCCL at the
// end of every step (in its graph when recorded), rank r on GPU r: every
// rank of the package in this process, one thread each (their outputs must
// be the same bits), or with --tensor-rank R --nccl-id FILE one rank per
// process (rank 0 writes a new FILE with the communicator's id, the others
// read it); a rank's outputs are then the whole model's.
//
//===----------------------------------------------------------------------===//

#include "tools/v4a-run-package/RunPackage.h"

#include "core/FileIO.h"
#include "core/KVPlan.h"
#include "core/Numerics.h"
#include "core/Package.h"
#include "core/TensorSpecs.h"
#include "lib/Engine/HostWeights.h"
#include "lib/Engine/PackageModel.h"
#include "runtime/Collective.h"
#include "runtime/CudaBackend.h"
#include "runtime/Model.h"
#include "runtime/SafeTensors.h"
#include "runtime/StepGemms.h"
#include "runtime/StepInputs.h"
#include "runtime/Weights.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

using namespace v4a;

namespace {

/// The name errors and progress lines start with.
std::string tool = "v4a-run-package";

int fail(const std::string &message) {
  std::cerr << tool << ": error: " << message << "\n";
  return 1;
}

struct Options {
  std::string package, weights, inputs, outputs, expected, json, ncclId;
  double tolerance = 0.0;
  int64_t seed = -1, promptLen = 0, decodeSteps = 0;
  /// The tensor-parallel rank to run, or -1: every rank, summed.
  int64_t tensorRank = -1;
  /// The ranks' outputs summed by NCCL on the GPUs (else on the host).
  bool nccl = false;
  int64_t batch = 0, context = 0, tokens = 0, repeat = 10;
  std::vector<int64_t> lengths, layers;
  bool check = false, bench = false;
  /// Decode-sized steps as recorded graphs (--graphs on|off); --bench
  /// also takes both: the stream, then graphs, outputs compared bitwise.
  bool graphs = true, bothGraphModes = false;
  /// --pad-decode on|off: rt::Model::padDecodeSteps (off by default).
  bool padDecode = false;
  /// Sequence slots beyond the batch's (--spare-slots): what an engine
  /// holds for sequences to come, and where padding rows go.
  int64_t spareSlots = 0;
  /// --bench --device-tensors: steps on bf16 tensors in device memory
  /// (queueStep, the path an engine takes) instead of host f32 rows.
  bool deviceTensors = false;
};

std::string usage() {
  return "usage: " + tool +
         " MODEL.v4apkg (--weights FILE | --random-weights SEED) ((--inputs "
         "FILE | --prompt-len N --decode-steps M [--lengths L0,L1,..]) "
         "[--layers L0,L1,..] [--outputs FILE] [--expected FILE | --check] "
         "[--tolerance T] [--graphs on|off] [--pad-decode on|off] "
         "[--spare-slots N] [--tensor-rank R] [--all-reduce host|nccl] "
         "[--nccl-id FILE] | --bench "
         "--batch B --context C "
         "--tokens T [--repeat N] [--graphs on|off|both] [--device-tensors] "
         "[--json FILE]); " +
         tool + " --info MODEL.v4apkg; " + tool + " --help | --version";
}

/// What a host program hands the device: each a node of a step's graph
/// (a library GEMM's own kernels may be more than one). A GEMM's fallback
/// launch, which runs only without the library, is not counted.
struct DeviceWork {
  int64_t launches = 0, gemms = 0, copies = 0;
  DeviceWork &operator+=(const DeviceWork &other) {
    launches += other.launches;
    gemms += other.gemms;
    copies += other.copies;
    return *this;
  }
};

DeviceWork deviceWorkOf(const step::HostProgram &host) {
  DeviceWork work;
  for (const step::HostOp &op : host.ops) {
    work.launches += op.kind == step::HostOp::Kind::Launch;
    work.gemms += op.kind == step::HostOp::Kind::Gemm;
    work.copies += op.kind == step::HostOp::Kind::Copy;
  }
  work.launches -= work.gemms;
  return work;
}

/// How deep a recorded decode step is (128 tokens at 64K of context, or the
/// planned context if less): the longest chain of its ops that wait for
/// one another, on one stream (every op) and over the streams
/// V4A_GRAPH_STREAMS may give it (StreamSchedule).
bool describeGraphDepths(const pkg::Package &p, std::string &error) {
  constexpr int64_t kTokens = 128;
  constexpr int kStreams[] = {1, 2, 4};
  int64_t context = std::min<int64_t>(65536, p.planOptions.contextTokens);
  std::vector<std::array<rt::GraphShape, 3>> shapes(p.functions.size());
  for (size_t f = 0; f < p.functions.size(); ++f) {
    if (p.functions[f].host.ops.empty())
      continue;
    for (int i = 0; i < 3; ++i)
      if (!rt::stepGraphShape(p.functions[f], kTokens, context, kStreams[i],
                              shapes[f][i], error))
        return false;
  }
  std::array<int64_t, 3> total = {0, 0, 0};
  for (const step::Call &call : p.calls)
    for (int i = 0; i < 3; ++i)
      total[i] += shapes[call.function][i].depth;
  std::printf("graph depth of a decode step (%lld tokens, context %lld; "
              "longest chain of waiting nodes on 1 / 2 / 4 streams):\n",
              static_cast<long long>(kTokens), static_cast<long long>(context));
  for (size_t f = 0; f < p.functions.size(); ++f)
    if (!p.functions[f].host.ops.empty())
      std::printf("  %s: %lld nodes, %lld / %lld / %lld deep\n",
                  p.functions[f].name.c_str(),
                  static_cast<long long>(shapes[f][0].ops),
                  static_cast<long long>(shapes[f][0].depth),
                  static_cast<long long>(shapes[f][1].depth),
                  static_cast<long long>(shapes[f][2].depth));
  std::printf("  a step of every layer: %lld / %lld / %lld deep\n",
              static_cast<long long>(total[0]),
              static_cast<long long>(total[1]),
              static_cast<long long>(total[2]));
  return true;
}

/// --info: what a package holds, without weights or a GPU.
int describePackage(const std::string &path) {
  std::string error;
  std::optional<pkg::Package> package = readPackage(path, error);
  if (!package)
    return fail(error);
  const pkg::Package &p = *package;
  const ModelConfig &c = p.config;
  std::printf("%s: package format %u, %s, target %s, config %s\n", path.c_str(),
              p.formatVersion, p.compilerVersion.c_str(), p.target.c_str(),
              p.configHash.c_str());
  std::printf("model: hidden %lld, %lld heads of %lld, %lld layers + %lld "
              "MTP, %s projections\n",
              static_cast<long long>(c.hiddenSize),
              static_cast<long long>(c.numAttentionHeads),
              static_cast<long long>(c.headDim),
              static_cast<long long>(c.numHiddenLayers),
              static_cast<long long>(c.numMtpLayers),
              c.fp8Weights ? "fp8" : "bf16");
  if (p.tensorParallel > 1)
    std::printf("tensor parallel: one rank of %lld (the whole model has %lld "
                "heads and %lld output groups)\n",
                static_cast<long long>(p.tensorParallel),
                static_cast<long long>(c.numAttentionHeads * p.tensorParallel),
                static_cast<long long>(c.oGroups * p.tensorParallel));
  std::printf("caches: %lld tokens per sequence, pages of %lld rows\n",
              static_cast<long long>(p.planOptions.contextTokens),
              static_cast<long long>(p.planOptions.pageSize));
  std::string ratios;
  for (const LayerSpec &layer : p.layers)
    ratios += (ratios.empty() ? "" : " ") + std::to_string(layer.id) + ":" +
              std::to_string(layer.compressRatio) +
              (layer.kvSource != layer.id ? "<" + std::to_string(layer.kvSource)
                                          : "");
  std::printf("layers (id:ratio, <source): %s\n", ratios.c_str());
  std::printf("steps: %zu functions, %zu calls per step\n", p.functions.size(),
              p.calls.size());
  std::vector<DeviceWork> work;
  for (const step::Function &function : p.functions) {
    work.push_back(deviceWorkOf(function.host));
    const DeviceWork &w = work.back();
    std::printf("  %s: %zu arguments, %zu host ops; %lld launches, %lld "
                "library GEMMs, %lld copies\n",
                function.name.c_str(), function.args.size(),
                function.host.ops.size(), static_cast<long long>(w.launches),
                static_cast<long long>(w.gemms),
                static_cast<long long>(w.copies));
  }
  DeviceWork step;
  for (const step::Call &call : p.calls)
    step += work[call.function];
  std::printf("a step of every layer: %lld launches, %lld library GEMMs, "
              "%lld copies\n",
              static_cast<long long>(step.launches),
              static_cast<long long>(step.gemms),
              static_cast<long long>(step.copies));
  if (!describeGraphDepths(p, error))
    return fail(error);
  std::printf("kernels: PTX %zu bytes, cubin %s\n", p.ptx.size(),
              p.cubin.empty()
                  ? "none (the driver compiles the PTX)"
                  : (std::to_string(p.cubin.size()) + " bytes").c_str());
  return 0;
}

/// The tensor-parallel ranks a run drives: --tensor-rank's, or every rank
/// of the package (a benchmark: rank 0); none, with `error`, for a rank the
/// package lacks or a check of one rank's partial outputs.
std::vector<int64_t> ranksToRun(const Options &o, int64_t degree,
                                std::string &error) {
  if (o.tensorRank >= degree) {
    error = "--tensor-rank " + std::to_string(o.tensorRank) +
            ": the package's ranks are 0 .. " + std::to_string(degree - 1);
    return {};
  }
  if (o.tensorRank >= 0 && degree > 1 && o.check && !o.nccl) {
    error = "--check compares every rank's summed outputs with the whole "
            "model's reference: leave out --tensor-rank";
    return {};
  }
  if (o.nccl && o.tensorRank >= 0 && degree > 1 && o.ncclId.empty()) {
    error = "--all-reduce nccl with --tensor-rank runs one rank per process: "
            "--nccl-id FILE tells the processes the communicator";
    return {};
  }
  if (o.tensorRank >= 0)
    return {o.tensorRank};
  if (o.bench && !o.nccl)
    return {0};
  std::vector<int64_t> all(degree);
  std::iota(all.begin(), all.end(), 0);
  return all;
}

/// Whether `value` is `first` (true) or `second` (false); anything else is
/// an error naming both.
bool parseChoice(const std::string &flag, const std::string &value,
                 const char *first, const char *second, bool &out,
                 std::string &error) {
  if (value != first && value != second) {
    error =
        flag + " takes " + first + " or " + second + ", got '" + value + "'";
    return false;
  }
  out = value == first;
  return true;
}

bool parseCount(const std::string &flag, const std::string &value,
                int64_t limit, int64_t &out, std::string &error) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (errno || end == value.c_str() || *end || v < 0 || v > limit) {
    error = flag + " takes an integer in [0, " + std::to_string(limit) +
            "], got '" + value + "'";
    return false;
  }
  out = v;
  return true;
}

/// Largest prompt, decode steps and batch the flags accept.
constexpr int64_t kMaxTokens = 1 << 20, kMaxBatch = 4096;

bool parseOptions(int argc, char **argv, Options &o, std::string &error) {
  std::map<std::string, std::string *> paths = {
      {"--weights", &o.weights}, {"--inputs", &o.inputs},
      {"--outputs", &o.outputs}, {"--expected", &o.expected},
      {"--json", &o.json},       {"--nccl-id", &o.ncclId}};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--check" || arg == "--bench") {
      (arg == "--check" ? o.check : o.bench) = true;
      continue;
    }
    if (arg == "--device-tensors") {
      o.deviceTensors = true;
      continue;
    }
    std::string value;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (arg.rfind("--", 0) == 0) {
      if (i + 1 >= argc) {
        error = arg + " needs a value";
        return false;
      }
      value = argv[++i];
    }
    if (auto it = paths.find(arg); it != paths.end()) {
      *it->second = value;
    } else if (arg == "--random-weights") {
      if (!parseCount(arg, value, INT64_MAX, o.seed, error))
        return false;
    } else if (arg == "--prompt-len") {
      if (!parseCount(arg, value, kMaxTokens, o.promptLen, error))
        return false;
    } else if (arg == "--tensor-rank") {
      if (!parseCount(arg, value, kMaxTensorParallel - 1, o.tensorRank, error))
        return false;
    } else if (arg == "--decode-steps") {
      if (!parseCount(arg, value, kMaxTokens, o.decodeSteps, error))
        return false;
    } else if (arg == "--batch" || arg == "--context" || arg == "--tokens" ||
               arg == "--repeat") {
      int64_t &out = arg == "--batch"     ? o.batch
                     : arg == "--context" ? o.context
                     : arg == "--tokens"  ? o.tokens
                                          : o.repeat;
      if (!parseCount(arg, value, arg == "--batch" ? kMaxBatch : kMaxTokens,
                      out, error))
        return false;
    } else if (arg == "--lengths" || arg == "--layers") {
      std::vector<int64_t> &out = arg == "--lengths" ? o.lengths : o.layers;
      std::stringstream list(value);
      std::string item;
      while (std::getline(list, item, ',')) {
        int64_t n = 0;
        if (!parseCount(arg, item, kMaxTokens, n, error))
          return false;
        out.push_back(n);
      }
      if (arg == "--layers")
        continue;
      if (o.lengths.empty() ||
          static_cast<int64_t>(o.lengths.size()) > kMaxBatch) {
        error = "--lengths lists 1 to " + std::to_string(kMaxBatch) +
                " prompt lengths";
        return false;
      }
    } else if (arg == "--all-reduce") {
      bool host = true;
      if (!parseChoice(arg, value, "host", "nccl", host, error))
        return false;
      o.nccl = !host;
    } else if (arg == "--spare-slots") {
      if (!parseCount(arg, value, kMaxBatch, o.spareSlots, error))
        return false;
    } else if (arg == "--pad-decode") {
      if (!parseChoice(arg, value, "on", "off", o.padDecode, error))
        return false;
    } else if (arg == "--graphs") {
      if (value != "on" && value != "off" && value != "both") {
        error = "--graphs takes on, off or (with --bench) both, got '" + value +
                "'";
        return false;
      }
      o.graphs = value != "off";
      o.bothGraphModes = value == "both";
    } else if (arg == "--tolerance") {
      char *end = nullptr;
      o.tolerance = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end || !(o.tolerance >= 0)) {
        error = "--tolerance takes a non-negative number, got '" + value + "'";
        return false;
      }
    } else if (arg.rfind("--", 0) == 0) {
      error = "unknown option " + arg;
      return false;
    } else if (o.package.empty()) {
      o.package = arg;
    } else {
      error = "more than one package: " + arg;
      return false;
    }
  }
  bool weights = o.weights.empty() != (o.seed < 0);
  bool inputs = o.inputs.empty() != (o.promptLen == 0);
  bool bench = o.batch > 0 && o.tokens > 0 && o.repeat > 0 &&
               o.inputs.empty() && o.promptLen == 0 && o.decodeSteps == 0 &&
               o.lengths.empty() && !o.check && o.expected.empty() &&
               o.outputs.empty();
  if (!o.ncclId.empty() && (!o.nccl || o.tensorRank < 0)) {
    error = "--nccl-id goes with --all-reduce nccl --tensor-rank R";
    return false;
  }
  if (!o.bench && o.bothGraphModes) {
    error = "--graphs both goes with --bench";
    return false;
  }
  if (o.deviceTensors && (!o.bench || o.tensorRank >= 0 || o.nccl)) {
    error = "--device-tensors goes with --bench, one model and no NCCL";
    return false;
  }
  if (!o.bench && (o.batch || o.context || o.tokens || !o.json.empty())) {
    error = "--batch, --context, --tokens and --json go with --bench";
    return false;
  }
  if (o.bench && o.package.size() && weights && !bench) {
    error = "--bench takes --batch B --context C --tokens T (B, T, --repeat "
            "> 0) and no inputs, outputs or checks";
    return false;
  }
  if (o.package.empty() || !weights || (!o.bench && !inputs) ||
      (o.check && !o.expected.empty())) {
    error = usage();
    return false;
  }
  for (int64_t n : o.lengths)
    if (n > o.promptLen) {
      error = "--lengths: " + std::to_string(n) +
              " is longer than the "
              "prompt (" +
              std::to_string(o.promptLen) + ")";
      return false;
    }
  return true;
}

/// Random inputs: a prompt step (rows of --lengths tokens, padded to the
/// prompt length) and single-token decode steps; seeds as v4a-run's.
std::vector<rt::InputStep> randomSteps(const Options &o, int64_t dim,
                                       const std::vector<bool> &runs,
                                       int64_t &batch) {
  std::vector<int64_t> lengths =
      o.lengths.empty() ? std::vector<int64_t>{o.promptLen} : o.lengths;
  batch = static_cast<int64_t>(lengths.size());
  std::vector<rt::InputStep> steps(1 + o.decodeSteps);
  for (size_t k = 0; k < steps.size(); ++k) {
    rt::InputStep &step = steps[k];
    step.tokens = k == 0 ? o.promptLen : 1;
    step.lengths = k == 0 ? lengths : std::vector<int64_t>(batch, 1);
    for (size_t l = 0; l < runs.size(); ++l)
      step.inputs.push_back(std::make_shared<const std::vector<float>>(
          runs[l]
              ? ref::randomActivations(batch * step.tokens * dim, 1000 * k + l)
              : std::vector<float>()));
  }
  return steps;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

/// Runs `body(i, error)` for every rank i, each on a thread of its own when
/// there are several: an NCCL sum waits for every rank, so one thread cannot
/// drive the ranks in turn. False with the first failing rank's error.
bool onEveryRank(size_t ranks,
                 const std::function<bool(size_t, std::string &)> &body,
                 std::string &error) {
  if (ranks == 1)
    return body(0, error);
  std::vector<std::string> errors(ranks);
  std::vector<char> ok(ranks, 0);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks; ++i)
    threads.emplace_back([&, i] { ok[i] = body(i, errors[i]); });
  for (std::thread &thread : threads)
    thread.join();
  for (size_t i = 0; i < ranks; ++i)
    if (!ok[i]) {
      error = errors[i];
      return false;
    }
  return true;
}

/// Makes every model of this process a rank of one NCCL communicator of
/// `world` ranks: all of them here (the id made here), or one rank per
/// process (rank 0 publishes the id at --nccl-id, removed once every rank
/// has joined; the others read it).
bool joinRanks(const Options &o, const std::vector<int64_t> &ranks,
               std::vector<std::unique_ptr<rt::Model>> &models, int64_t world,
               std::string &error) {
  rt::CollectiveId id;
  bool here = static_cast<int64_t>(ranks.size()) == world;
  bool publishes = !here && ranks.front() == 0;
  if (here || publishes) {
    if (!rt::Collective::makeId(id, error) ||
        (publishes && !rt::publishCollectiveId(o.ncclId, id, error)))
      return false;
  } else if (!rt::readCollectiveId(o.ncclId, id, error)) {
    return false;
  }
  bool joined = onEveryRank(
      models.size(),
      [&](size_t i, std::string &why) {
        return models[i]->joinRanks(id, static_cast<int>(ranks[i]),
                                    static_cast<int>(world), why);
      },
      error);
  if (publishes)
    std::remove(o.ncclId.c_str());
  return joined;
}

/// Random finite values in every cache byte of every sequence (the same
/// bytes for each: the values do not change the work): each byte in
/// [0x30, 0x3b] is a small positive e4m3 value, ue8m0 scale, and high byte
/// of a bf16 or f32.
bool fillCaches(rt::Model &model, const std::vector<LayerSpec> &layers,
                const std::vector<int64_t> &sequences, uint64_t seed,
                std::string &error) {
  std::mt19937_64 random(seed);
  for (const LayerSpec &layer : layers)
    for (plan::Component component : plan::kAllComponents) {
      std::vector<uint8_t> bytes(model.cacheSize(layer.id, component));
      if (bytes.empty())
        continue;
      for (uint8_t &byte : bytes)
        byte = 0x30 + random() % 12;
      for (int64_t sequence : sequences)
        if (!model.writeCache(sequence, layer.id, component, bytes, error))
          return false;
    }
  return true;
}

/// One step of ranks whose outputs NCCL sums: every rank at once, each
/// into its own buffers; rank 0's are `total`, and every other rank's must
/// be the same bits (each rank holds the same sum).
bool stepSummedRanks(
    size_t ranks, const rt::InputStep &step, const std::vector<bool> &runs,
    int64_t batch, int64_t dim, rt::StepBuffers &total,
    const std::function<bool(size_t, rt::StepBuffers &)> &runRank,
    std::string &error) {
  std::vector<rt::StepBuffers> others;
  for (size_t i = 1; i < ranks; ++i)
    others.push_back(rt::stepBuffers(step, runs, batch, dim));
  auto run = [&](size_t i, std::string &) {
    return runRank(i, i == 0 ? total : others[i - 1]);
  };
  // runRank keeps its error itself.
  std::string ignored;
  if (!onEveryRank(ranks, run, ignored))
    return false;
  for (size_t i = 1; i < ranks; ++i)
    if (others[i - 1].out != total.out) {
      error = "rank " + std::to_string(i) +
              "'s summed outputs differ from rank 0's";
      return false;
    }
  return true;
}

/// Times steps of every model of `models` (the ranks this process drives;
/// with an NCCL sum they step together).
int benchmark(const Options &o,
              const std::vector<std::unique_ptr<rt::Model>> &models,
              const std::vector<LayerSpec> &layers,
              const std::vector<int64_t> &sequences,
              const ModelConfig &config) {
  std::string error;
  for (const std::unique_ptr<rt::Model> &model : models)
    if (!fillCaches(*model, layers, sequences, o.seed >= 0 ? o.seed : 1, error))
      return fail(error);
  int64_t dim = config.hiddenSize;
  rt::InputStep step{o.tokens, std::vector<int64_t>(o.batch, o.tokens), {}};
  std::vector<bool> runs(config.numLayers(), false);
  step.inputs.resize(runs.size());
  for (const LayerSpec &layer : layers) {
    runs[layer.id] = true;
    step.inputs[layer.id] = std::make_shared<const std::vector<float>>(
        ref::randomActivations(o.batch * o.tokens * dim, layer.id));
  }
  std::vector<rt::StepBuffers> perRank;
  for (size_t i = 0; i < models.size(); ++i)
    perRank.push_back(rt::stepBuffers(step, runs, o.batch, dim));
  rt::StepBuffers &buffers = perRank.front();
  // --device-tensors: each layer's rows as bf16 in device memory of the
  // model's context (the device's primary one), and its outputs beside.
  std::unique_ptr<rt::CudaBackend> device;
  std::vector<const void *> deviceInputs(runs.size(), nullptr);
  std::vector<void *> deviceOutputs(runs.size(), nullptr);
  int64_t rowBytes = 2 * o.batch * o.tokens * dim;
  if (o.deviceTensors) {
    if (models.size() != 1)
      return fail("--device-tensors steps one model");
    device = rt::CudaBackend::create(0, error);
    if (!device)
      return fail(error);
    for (const LayerSpec &layer : layers) {
      void *x = device->allocate(rowBytes, error);
      void *y = x ? device->allocate(rowBytes, error) : nullptr;
      if (!y)
        return fail(error);
      std::vector<uint16_t> bits;
      for (float v : *step.inputs[layer.id])
        bits.push_back(num::toBF16Bits(v));
      device->copyToDevice(x, bits.data(), rowBytes);
      deviceInputs[layer.id] = x;
      deviceOutputs[layer.id] = y;
    }
  }
  // One step of the batch on every model, on the chosen path.
  auto stepOnce = [&](size_t i, std::string &why) {
    rt::StepBatch batch{sequences, step.lengths, o.tokens};
    if (!o.deviceTensors)
      return models[i]->step(batch, perRank[i].inputs, perRank[i].outputs, why);
    return models[i]->queueStep(batch, deviceInputs, deviceOutputs, nullptr,
                                why) &&
           models[i]->synchronize(why);
  };
  // The device tensors' outputs, as step() gives them.
  auto readOutputs = [&] {
    std::vector<uint16_t> bits(rowBytes / 2);
    for (const LayerSpec &layer : layers) {
      device->copyToHost(bits.data(), deviceOutputs[layer.id], rowBytes);
      for (size_t i = 0; i < bits.size(); ++i)
        buffers.out[layer.id][i] = num::fromBF16Bits(bits[i]);
    }
  };
  std::string ids;
  for (const LayerSpec &layer : layers)
    ids += (ids.empty() ? "" : ",") + std::to_string(layer.id);
  std::string lines;
  std::vector<std::vector<float>> streamOutputs;
  for (bool graphs : {false, true}) {
    if (!o.bothGraphModes && graphs != o.graphs)
      continue;
    for (const std::unique_ptr<rt::Model> &model : models)
      model->useGraphs(graphs);
    std::vector<double> times;
    // Two untimed steps: the first of a key runs on the stream, the second
    // records its graph.
    for (int64_t run = 0; run < o.repeat + 2; ++run) {
      for (const std::unique_ptr<rt::Model> &model : models)
        for (int64_t sequence : sequences)
          if (!model->restorePosition(sequence, o.context, error))
            return fail(error);
      auto start = std::chrono::steady_clock::now();
      if (!onEveryRank(models.size(), stepOnce, error))
        return fail(error);
      if (run >= 2)
        times.push_back(secondsSince(start) * 1e3);
    }
    std::sort(times.begin(), times.end());
    double median = times[times.size() / 2];
    if (o.deviceTensors)
      readOutputs();
    // Every step starts from the same caches and inputs: the last step's
    // outputs of both modes must be the same bits.
    std::string same;
    if (o.bothGraphModes && !graphs)
      streamOutputs = buffers.out;
    if (o.bothGraphModes && graphs)
      same = std::string(", \"bitwise_equal_to_stream\": ") +
             (buffers.out == streamOutputs ? "true" : "false");
    char line[640];
    std::snprintf(
        line, sizeof line,
        "{\"layers\": [%s], \"batch\": %lld, \"context\": %lld, "
        "\"tokens\": %lld, \"repeat\": %lld, \"graphs\": %s, "
        "\"path\": \"%s\", \"pad_decode\": %s, "
        "\"median_ms\": %.4f, \"min_ms\": %.4f, \"max_ms\": %.4f%s}",
        ids.c_str(), static_cast<long long>(o.batch),
        static_cast<long long>(o.context), static_cast<long long>(o.tokens),
        static_cast<long long>(o.repeat), graphs ? "true" : "false",
        o.deviceTensors ? "queueStep" : "step", o.padDecode ? "true" : "false",
        median, times.front(), times.back(), same.c_str());
    std::printf("%s\n", line);
    lines += std::string(line) + "\n";
  }
  for (size_t l = 0; l < runs.size(); ++l)
    if (device && deviceInputs[l]) {
      device->release(const_cast<void *>(deviceInputs[l]));
      device->release(deviceOutputs[l]);
    }
  if (!o.json.empty() && !io::writeFile(o.json, lines, error))
    return fail(error);
  return 0;
}

} // namespace

int v4a::runPackage(const char *name, int argc, char **argv) {
  tool = name;
  // Progress lines reach a pipe as they happen.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-help" || arg == "-h") {
      std::printf("%s\n", usage().c_str());
      return 0;
    }
    if (arg == "--version") {
      std::printf("%s\n", pkg::kCompilerVersion);
      return 0;
    }
    if (arg == "--info") {
      if (argc != 3)
        return fail("--info takes the package alone: " + tool +
                    " --info MODEL.v4apkg");
      return describePackage(argv[i == 1 ? 2 : 1]);
    }
  }
  Options o;
  std::string error;
  if (!parseOptions(argc, argv, o, error))
    return fail(error);
  std::optional<pkg::Package> package = readPackage(o.package, error);
  if (!package)
    return fail(error);
  // Weights, their sizes and the reference are the whole model's.
  const ModelConfig config = wholeModelConfig(*package);
  int64_t dim = config.hiddenSize, layers = config.numLayers();
  std::vector<int64_t> ranks = ranksToRun(o, package->tensorParallel, error);
  if (ranks.empty())
    return fail(error);

  std::optional<std::vector<LayerSpec>> selected =
      rt::selectLayers(package->layers, o.layers, error);
  if (!selected)
    return fail(error);
  std::vector<bool> runs(layers, false);
  std::vector<int64_t> ids;
  for (const LayerSpec &layer : *selected) {
    runs[layer.id] = true;
    ids.push_back(layer.id);
  }
  std::vector<rt::InputStep> steps;
  int64_t batch = 0;
  if (o.bench)
    batch = o.batch;
  else if (o.inputs.empty())
    steps = randomSteps(o, dim, runs, batch);
  else if (!rt::readStepInputs(o.inputs, dim, layers, kMaxBatch, kMaxTokens,
                               steps, batch, error))
    return fail(error);
  int64_t tokens = o.bench ? o.context + o.tokens : 0;
  for (const rt::InputStep &step : steps)
    tokens += step.tokens;
  if (tokens > package->planOptions.contextTokens)
    return fail("the run needs " + std::to_string(tokens) +
                " tokens per sequence; the package's caches hold " +
                std::to_string(package->planOptions.contextTokens) +
                " (v4a-compile --context)");
  // Each rank holds its own copy of its part beside the whole model's.
  uint64_t copies = package->tensorParallel == 1 ? 1 : ranks.size() + 1;
  if (!io::fitsInMemory(hostWeightBytes(config, *selected) * copies,
                        copies == 1 ? "the weights"
                                    : "the weights and the ranks' parts",
                        error))
    return fail(error);
  std::vector<rt::LayerTensors> tensors;
  if (o.seed >= 0)
    tensors = randomHostWeights(config, *selected, o.seed);
  else if (!rt::readCheckpointFiles(config, {o.weights}, tensors, error, ids))
    return fail(error);
  // The reference alongside, from the same weights.
  std::optional<ref::Model> reference;
  std::vector<ref::SequenceState> states;
  if (o.check) {
    std::vector<ref::LayerWeights> weights;
    for (int64_t l = 0; l < layers; ++l)
      weights.push_back(runs[l] ? toReference(tensors[l])
                                : ref::LayerWeights());
    ModelConfig referenceConfig = config;
    referenceConfig.slidingWindow = std::min(
        referenceConfig.slidingWindow, package->planOptions.contextTokens);
    reference.emplace(referenceConfig, package->layers, weights);
    for (int64_t b = 0; b < batch; ++b)
      states.push_back(reference->newSequence());
  }
  PackageDevice device;
  std::vector<std::unique_ptr<rt::Model>> models;
  for (size_t i = 0; i < ranks.size(); ++i) {
    std::vector<rt::LayerTensors> part =
        i + 1 < ranks.size() ? tensors : std::move(tensors);
    if (!keepRankPart(*package, ranks[i], part, error))
      return fail(error);
    // With NCCL's sum rank r runs on GPU r (NCCL takes one rank a GPU).
    int ordinal = o.nccl ? static_cast<int>(ranks[i]) : 0;
    models.push_back(createPackageModel(*package, *selected, std::move(part),
                                        batch + o.spareSlots, ordinal, device,
                                        error));
    if (!device.cubinWarning.empty() && i == 0)
      std::fprintf(stderr, "%s: warning: %s; using the PTX\n", tool.c_str(),
                   device.cubinWarning.c_str());
    if (!models.back())
      return fail(error);
  }
  if (o.nccl && !joinRanks(o, ranks, models, package->tensorParallel, error))
    return fail(error);
  rt::Model *model = models.front().get();
  std::printf("%s: %s, %zu step functions, %zu calls per step, kernels from "
              "%s\n",
              tool.c_str(), device.deviceName.c_str(),
              package->functions.size(), package->calls.size(),
              device.cubin ? "the cubin" : "the PTX");
  for (std::unique_ptr<rt::Model> &rank : models) {
    rank->useGraphs(o.graphs);
    rank->padDecodeSteps(o.padDecode);
  }
  // Every step of the run has its library algorithms before the first; a
  // product the library cannot run is said here, once.
  std::vector<int64_t> counts;
  for (const rt::InputStep &step : steps)
    counts.push_back(
        std::accumulate(step.lengths.begin(), step.lengths.end(), int64_t(0)));
  if (o.bench)
    counts.push_back(o.batch * o.tokens);
  for (std::unique_ptr<rt::Model> &rank : models)
    if (!rank->prepareSteps(counts, error))
      return fail(error);
  for (const rt::GemmCall &c : model->gemmFallbacks())
    std::fprintf(stderr,
                 "%s: warning: cuBLASLt has no algorithm for a %s; its "
                 "generated kernel runs it\n",
                 tool.c_str(), rt::describeGemm(c).c_str());
  // Every rank's slots are taken in the same order, so they share ids.
  std::vector<int64_t> sequences;
  for (int64_t b = 0; b < batch; ++b) {
    for (std::unique_ptr<rt::Model> &rank : models) {
      int64_t id = rank->addSequence(error);
      if (id < 0)
        return fail(error);
      if (rank == models.front())
        sequences.push_back(id);
      else if (id != sequences.back())
        return fail("the ranks' models gave sequence " + std::to_string(b) +
                    " different ids");
    }
  }
  if (o.bench)
    return benchmark(o, models, *selected, sequences, package->config);

  st::File written, expectedByReference;
  double gpuSeconds = 0.0;
  for (size_t k = 0; k < steps.size(); ++k) {
    const rt::InputStep &step = steps[k];
    rt::StepBuffers buffers = rt::stepBuffers(step, runs, batch, dim);
    const std::vector<std::vector<float>> &out = buffers.out;
    auto start = std::chrono::steady_clock::now();
    // Ranks may step on threads of their own: the first failure is kept.
    std::mutex failing;
    error.clear();
    auto runRank = [&](size_t i, rt::StepBuffers &into) {
      std::string why;
      if (models[i]->step({sequences, step.lengths, step.tokens}, into.inputs,
                          into.outputs, why))
        return true;
      std::lock_guard<std::mutex> lock(failing);
      if (error.empty())
        error =
            "step " + std::to_string(k) +
            (models.size() > 1 ? ", rank " + std::to_string(ranks[i]) : "") +
            ": " + why;
      return false;
    };
    if (o.nccl ? !stepSummedRanks(models.size(), step, runs, batch, dim,
                                  buffers, runRank, error)
               : !rt::stepEveryRank(models.size(), step, runs, batch, dim,
                                    buffers, runRank))
      return fail(error);
    gpuSeconds += secondsSince(start);
    std::string suffix = std::to_string(k);
    for (int64_t l = 0; l < layers; ++l)
      if (runs[l])
        written["y.step" + suffix + ".layer" + std::to_string(l)] =
            st::fromF32({batch, step.tokens, dim}, out[l]);
    if (!reference)
      continue;
    std::vector<std::vector<float>> want(
        layers, std::vector<float>(batch * step.tokens * dim, 0.0f));
    // Sequences are independent: the reference runs them side by side.
    auto runRow = [&](int64_t b) {
      std::vector<ref::Tensor> y =
          referenceRow(*reference, states[b], step, b, runs, dim);
      for (int64_t l = 0; l < layers; ++l)
        if (runs[l])
          std::copy(y[l].data.begin(), y[l].data.end(),
                    want[l].begin() + b * step.tokens * dim);
    };
    std::vector<std::thread> rows;
    for (int64_t b = 1; b < batch; ++b)
      rows.emplace_back(runRow, b);
    runRow(0);
    for (std::thread &row : rows)
      row.join();
    for (int64_t l = 0; l < layers; ++l)
      if (runs[l])
        expectedByReference["y.step" + suffix + ".layer" + std::to_string(l)] =
            st::fromF32({batch, step.tokens, dim}, want[l]);
  }
  std::printf("%s: %zu steps in %.3f s on the GPU\n", tool.c_str(),
              steps.size(), gpuSeconds);
  if (!o.outputs.empty() && !st::write(o.outputs, written, error))
    return fail(error);
  if (o.expected.empty() && !reference)
    return 0;

  std::optional<st::File> expected =
      reference ? std::optional<st::File>(std::move(expectedByReference))
                : st::read(o.expected, error);
  if (!expected)
    return fail(error);
  double worst = 0.0;
  for (int64_t l = 0; l < layers; ++l) {
    if (!runs[l])
      continue;
    double maxAbs = 0.0, maxRef = 0.0;
    for (size_t k = 0; k < steps.size(); ++k) {
      std::string name =
          "y.step" + std::to_string(k) + ".layer" + std::to_string(l);
      if (!expected->count(name))
        return fail(o.expected + " lacks " + name);
      std::optional<std::vector<float>> want = expected->at(name).toF32();
      std::vector<float> got = *written.at(name).toF32();
      if (!want || want->size() != got.size())
        return fail(name + ": the expected tensor has another shape");
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < steps[k].lengths[b] * dim; ++i) {
          size_t at = (b * steps[k].tokens) * dim + i;
          double diff = std::fabs(double(got[at]) - double((*want)[at]));
          maxAbs = std::isnan(diff) ? INFINITY : std::max(maxAbs, diff);
          maxRef = std::max(maxRef, std::fabs(double((*want)[at])));
        }
    }
    double rel = maxRef > 0 ? maxAbs / maxRef : maxAbs;
    std::printf("layer %2lld (ratio %3lld): max abs err %.3e, max rel err "
                "%.3e\n",
                static_cast<long long>(l),
                static_cast<long long>(package->layers[l].compressRatio),
                maxAbs, rel);
    worst = std::max(worst, maxAbs);
  }
  bool ok = worst <= o.tolerance;
  std::printf("check: max abs err %.3e (tolerance %.3e): %s\n", worst,
              o.tolerance, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
