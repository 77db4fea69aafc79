//===- v4a-compile.cpp - ahead-of-time compiler for v4a -------------------===//
//
// v4a-compile CONFIG.json [--emit=v4a|planned|steps|plan|obj] [--report[=json]]
//             [--context N] [--page-size N] [-o FILE]
//
//===----------------------------------------------------------------------===//

#include "core/FileIO.h"
#include "core/Package.h"
#include "lib/Import/ConfigImport.h"
#include "lib/JIT/GpuSteps.h"
#include "lib/JIT/StepJit.h"
#include "lib/Pipeline/Pipelines.h"
#include "lib/Plan/ModelPlan.h"
#include "lib/Report/Report.h"
#include "passes/Passes.h"
#include "tools/ToolSupport.h"
#include "v4a/Engine.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace {
enum class EmitKind { V4A, Planned, Steps, Plan, Object, Kernels, Ptx };
enum class ReportKind { None, Text, Json };
enum class KVLayoutKind { BF16, FP8 };
} // namespace

static cl::OptionCategory compileCategory("v4a-compile options");
static cl::opt<std::string> inputPath(cl::Positional, cl::Required,
                                      cl::desc("<config.json>"),
                                      cl::cat(compileCategory));
static cl::opt<EmitKind> emitKind(
    "emit", cl::desc("What to produce"), cl::init(EmitKind::V4A),
    cl::values(
        clEnumValN(EmitKind::V4A, "v4a",
                   "v4a IR of the model, sharing topology verified"),
        clEnumValN(EmitKind::Planned, "planned",
                   "v4a IR with the cache plan and the schedule attached"),
        clEnumValN(EmitKind::Steps, "steps",
                   "v4a IR with the step functions of every key, their "
                   "kernel regions and the step programs"),
        clEnumValN(EmitKind::Plan, "plan", "the cache plan as JSON"),
        clEnumValN(EmitKind::Kernels, "kernels",
                   "the step functions as GPU launches and kernels (MLIR "
                   "after kernel outlining)"),
        clEnumValN(EmitKind::Ptx, "ptx",
                   "PTX (sm_90a) of every kernel of the step functions"),
        clEnumValN(EmitKind::Object, "obj",
                   "the model's CPU kernels as an object file, and their C "
                   "header beside it (needs -o)")),
    cl::cat(compileCategory));
static cl::opt<ReportKind> reportKind(
    "report", cl::desc("Print the schedule and KV memory report instead"),
    cl::init(ReportKind::None), cl::ValueOptional,
    cl::values(clEnumValN(ReportKind::Text, "text", "a table (the default)"),
               clEnumValN(ReportKind::Json, "json", "JSON"),
               clEnumValN(ReportKind::Text, "", "")),
    cl::cat(compileCategory));
static cl::opt<int64_t>
    contextTokens("context",
                  cl::desc("Maximum context per sequence, tokens (default "
                           "1048576)"),
                  cl::init(1 << 20), cl::cat(compileCategory));
static cl::opt<int64_t>
    pageSize("page-size",
             cl::desc("Rows per compressed cache page (default 64)"),
             cl::init(64), cl::cat(compileCategory));
static cl::opt<KVLayoutKind> kvLayout(
    "kv-layout",
    cl::desc("Element layout of the compressed KV cache (default bf16)"),
    cl::init(KVLayoutKind::BF16),
    cl::values(clEnumValN(KVLayoutKind::BF16, "bf16", "bf16 rows"),
               clEnumValN(KVLayoutKind::FP8, "fp8",
                          "packed fp8 MODEL1 rows (584 B at D = 512)")),
    cl::cat(compileCategory));
static cl::opt<int64_t> tensorParallel(
    "tensor-parallel",
    cl::desc(
        "Compile one rank of N-way tensor parallelism: num_attention_heads "
        "/ N heads and o_groups / N output groups (every rank runs the "
        "same steps on its part of the weights; default 1)"),
    cl::init(1), cl::cat(compileCategory));
static cl::opt<v4a::plan::IndexLayout> indexLayout(
    "index-layout",
    cl::desc("Element layout of the indexer's key cache (default mxfp4)"),
    cl::init(v4a::plan::kDefaultIndexLayout),
    cl::values(clEnumValN(v4a::plan::IndexLayout::BF16, "bf16",
                          "bf16 rows (256 B at 128 dims)"),
               clEnumValN(v4a::plan::IndexLayout::FP8, "fp8",
                          "e4m3 with one f32 scale per row (132 B)"),
               clEnumValN(v4a::plan::IndexLayout::MXFP4, "mxfp4",
                          "e2m1 with a ue8m0 scale per 32 dims (68 B): the "
                          "reference's fp4-simulated keys, exactly")),
    cl::cat(compileCategory));
static cl::opt<std::string>
    target("target",
           cl::desc("Write a package (-o MODEL.v4apkg) for a target: sm_90a"),
           cl::value_desc("target"), cl::cat(compileCategory));
static cl::opt<bool> indexerLoops(
    "indexer-loops",
    cl::desc("Run the indexer's scores and top-k on the loop path instead of "
             "their kernel family (--emit=kernels|ptx and packages; for "
             "comparisons)"),
    cl::init(false), cl::cat(compileCategory));
static cl::opt<bool> indexerE4M3(
    "indexer-e4m3",
    cl::desc("Multiply MXFP4 index keys of 128 dims as e4m3 with the head "
             "sum on the tensor cores: the reference's rounding of the dot "
             "products; picks may differ from the other backends' at "
             "rounding ties (--emit=kernels|ptx, packages and --report)"),
    cl::init(false), cl::cat(compileCategory));
static cl::opt<v4a::jit::FP8Gemms> fp8Gemms(
    "fp8-gemm",
    cl::desc("How GPU steps run fp8 projections (--emit=kernels|ptx and "
             "packages)"),
    cl::init(v4a::jit::FP8Gemms::Dequantized),
    cl::values(clEnumValN(v4a::jit::FP8Gemms::Dequantized, "exact",
                          "cuBLASLt bf16 GEMMs of the dequantized weight and "
                          "activation: the fp8 product with f32 sums "
                          "(default; the weights take bf16 memory)"),
               clEnumValN(v4a::jit::FP8Gemms::BlockScaled, "fp8",
                          "cuBLASLt's block-scaled fp8 GEMM (VEC128 x "
                          "BLK128x128): half the weight bytes, but Hopper's "
                          "fp8 sums keep ~14 bits"),
               clEnumValN(v4a::jit::FP8Gemms::Kernels, "kernels",
                          "the generated kernels alone")),
    cl::cat(compileCategory));
static cl::opt<std::string> outputPath("o",
                                       cl::desc("Output file (default -, "
                                                "standard output; a package "
                                                "needs a file)"),
                                       cl::value_desc("file"), cl::init("-"),
                                       cl::cat(compileCategory));

/// A symbol name from the config file's stem: "v4-flash.json" -> v4_flash;
/// "model" for standard input.
static std::string modelNameFor(StringRef path) {
  if (path == "-")
    return "model";
  std::string name = sys::path::stem(path).str();
  for (char &c : name)
    if (!isAlnum(c) && c != '_')
      c = '_';
  if (name.empty() || isDigit(name.front()))
    name.insert(0, "m");
  return name;
}

/// Every metadata and step function, in module order.
static std::vector<std::string> stepFunctionNames(mlir::ModuleOp module) {
  std::vector<std::string> names;
  for (auto func : module.getOps<mlir::func::FuncOp>())
    names.push_back(func.getName().str());
  return names;
}

static int fail(const Twine &message);

/// The package of the planned and built steps in `module` for `target`.
static std::optional<std::string> buildPackage(mlir::ModuleOp module,
                                               const std::string &config,
                                               const v4a::LayerOptions &options,
                                               std::string &error) {
  v4a::ConfigError configError;
  std::optional<v4a::ModelConfig> parsed =
      v4a::parseModelConfig(config, configError);
  std::optional<std::vector<v4a::LayerSpec>> layers;
  if (parsed)
    layers = v4a::deriveLayers(*parsed, options, configError);
  if (!layers) {
    error = configError.str();
    return std::nullopt;
  }
  v4a::pkg::Package package;
  package.target = target;
  package.configJson = config;
  package.configHash = v4a::pkg::hashText(config);
  package.config = *parsed;
  package.layers = *layers;
  package.planOptions.contextTokens = contextTokens;
  package.planOptions.pageSize = pageSize;
  package.planOptions.indexLayout = indexLayout;
  package.tensorParallel = tensorParallel;
  std::set<int64_t> all;
  for (const v4a::LayerSpec &layer : *layers)
    all.insert(layer.id);
  std::vector<std::string> names;
  package.calls = v4a::jit::stepCalls(module, all, names);
  std::optional<v4a::jit::GpuSteps> steps = v4a::jit::compileGpuSteps(
      module, names, target, error, nullptr,
      fp8Gemms == v4a::jit::FP8Gemms::BlockScaled, !indexerLoops, indexerE4M3);
  if (!steps)
    return std::nullopt;
  package.functions = std::move(steps->functions);
  package.ptx = std::move(steps->ptx);
  package.cubin = std::move(steps->cubin);
  return v4a::pkg::serialize(package);
}

static int fail(const Twine &message) {
  errs() << "v4a-compile: error: " << message << "\n";
  return 1;
}

/// "out/kernels.o" -> "out/kernels.h"; the header of a device or FIFO
/// target is not written.
static std::optional<std::string> headerPathFor(StringRef objectPath) {
  if (sys::fs::exists(objectPath) && !sys::fs::is_regular_file(objectPath))
    return std::nullopt;
  SmallString<128> path(objectPath);
  if (sys::path::extension(path) == ".o")
    sys::path::replace_extension(path, ".h");
  else
    path += ".h";
  return path.str().str();
}

/// The include guard of a header: V4A_<STEM>_H in upper case.
static std::string includeGuardFor(StringRef headerPath) {
  std::string guard = "V4A_" + sys::path::stem(headerPath).upper() + "_H";
  for (char &c : guard)
    if (!isAlnum(c))
      c = '_';
  return guard;
}

/// --emit=obj: the CPU kernels as an object file, and their C header.
static int writeObjectAndHeader(const std::string &config, bool packedKv) {
  if (outputPath == "-")
    return fail("--emit=obj writes a file: give -o FILE");
  std::string error, object;
  v4a::EngineOptions engineOptions;
  engineOptions.packedKv = packedKv;
  auto engine = v4a::Engine::create(config, engineOptions, error);
  if (!engine || !engine->objectCode(object, error))
    return fail(inputPath + ": " + error);
  std::optional<std::string> header = headerPathFor(outputPath);
  if (!v4a::io::writeFile(outputPath, object, error) ||
      (header &&
       !v4a::io::writeFile(
           *header, engine->objectHeader(includeGuardFor(*header)), error)))
    return fail(error);
  return 0;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(compileCategory);
  v4a::parseToolOptions(
      argc, argv,
      "v4a ahead-of-time compiler\n\n"
      "Defaults: --emit=v4a to -o - (standard output), --context 1048576 "
      "tokens,\n--page-size 64, --kv-layout=bf16, --index-layout=mxfp4, "
      "--fp8-gemm=exact;\n--target=sm_90a writes a package and needs -o.\n");
  // A package is binary: never onto a terminal, and to standard output
  // only when asked for by name.
  if (!target.empty() && outputPath == "-" &&
      (!outputPath.getNumOccurrences() ||
       llvm::sys::Process::StandardOutIsDisplayed()))
    return fail("--target=" + target +
                " writes a binary package: give -o FILE (or -o - into a "
                "pipe)");
  if (reportKind != ReportKind::None && emitKind.getNumOccurrences())
    return fail("--report prints the report; it cannot be combined with "
                "--emit");
  if (indexerE4M3 && indexerLoops)
    return fail("--indexer-e4m3 is a form of the indexer's kernel family; it "
                "cannot be combined with --indexer-loops");
  if (indexerE4M3 && indexLayout != v4a::plan::IndexLayout::MXFP4)
    return fail(std::string("--indexer-e4m3 multiplies MXFP4 index keys; "
                            "--index-layout=") +
                v4a::plan::indexLayoutName(indexLayout) +
                " keys have no such form");

  std::string readError;
  std::optional<std::string> config =
      v4a::io::readFile(inputPath, v4a::io::kConfigLimit, "config", readError);
  if (!config)
    return fail(readError);
  v4a::warnAboutConfig("v4a-compile", inputPath, *config);
  // A rank compiles the configuration with its share of the heads.
  if (tensorParallel != 1) {
    std::string error;
    config = v4a::tensorParallelConfig(*config, tensorParallel, error);
    if (!config)
      return fail(inputPath + ": " + error);
  }

  mlir::MLIRContext context;
  // Every diagnostic becomes one line naming the configuration file.
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Error)
      errs() << "v4a-compile: error: " << inputPath << ": " << diag.str()
             << "\n";
    return mlir::success();
  });

  v4a::LayerOptions options;
  options.packedKv = kvLayout == KVLayoutKind::FP8;
  mlir::OwningOpRef<mlir::ModuleOp> module = v4a::importConfig(
      &context, *config, mlir::FileLineColLoc::get(&context, inputPath, 1, 1),
      modelNameFor(inputPath), options);
  if (!module)
    return 1;

  if (contextTokens <= 0 || pageSize <= 0)
    return fail("--context and --page-size must be positive");
  if (emitKind == EmitKind::Object)
    return writeObjectAndHeader(*config, options.packedKv);
  bool packaging = target.getNumOccurrences() > 0;
  if (packaging &&
      (emitKind.getNumOccurrences() || reportKind.getNumOccurrences()))
    return fail("--target writes a package; it cannot be combined with "
                "--emit or --report");
  if (packaging && target != "sm_90a")
    return fail("unknown --target '" + target +
                "' (packages are built for sm_90a; the CPU runs from the "
                "configuration)");
  mlir::PassManager pm(&context);
  if (emitKind == EmitKind::V4A && reportKind == ReportKind::None && !packaging)
    pm.addPass(v4a::createVerifyTopology());
  else if (emitKind == EmitKind::Steps)
    v4a::buildStepsPipeline(
        pm, {contextTokens, pageSize, v4a::plan::indexLayoutName(indexLayout)});
  else if (emitKind == EmitKind::Ptx || emitKind == EmitKind::Kernels ||
           packaging)
    v4a::buildStepsPipeline(pm, {contextTokens, pageSize,
                                 v4a::plan::indexLayoutName(indexLayout),
                                 fp8Gemms == v4a::jit::FP8Gemms::Dequantized,
                                 /*mergeProjections=*/true});
  else
    v4a::buildPlanningPipeline(
        pm, {contextTokens, pageSize, v4a::plan::indexLayoutName(indexLayout)});
  if (failed(pm.run(*module)))
    return 1;

  std::function<void(raw_ostream &)> write;
  auto model = *module->getOps<v4a::ModelOp>().begin();
  std::optional<v4a::report::Report> report;
  if (packaging) {
    std::string error;
    std::optional<std::string> package =
        buildPackage(*module, *config, options, error);
    if (!package)
      return fail(inputPath + ": " + error);
    write = [package](raw_ostream &os) { os << *package; };
  } else if (reportKind != ReportKind::None) {
    std::string error;
    report = v4a::report::buildReport(model, contextTokens, pageSize, error,
                                      indexerE4M3);
    if (!report)
      return fail(inputPath + ": " + error);
    write = [&](raw_ostream &os) {
      if (reportKind == ReportKind::Json)
        v4a::report::printJson(*report, os);
      else
        v4a::report::printText(*report, os);
    };
  } else if (emitKind == EmitKind::Ptx || emitKind == EmitKind::Kernels) {
    std::string error;
    std::string kernelIR;
    std::optional<v4a::jit::GpuSteps> steps = v4a::jit::compileGpuSteps(
        *module, stepFunctionNames(*module), "sm_90a", error,
        emitKind == EmitKind::Kernels ? &kernelIR : nullptr,
        fp8Gemms == v4a::jit::FP8Gemms::BlockScaled, !indexerLoops,
        indexerE4M3);
    if (!steps)
      return fail(inputPath + ": " + error);
    if (emitKind == EmitKind::Kernels)
      write = [kernelIR](raw_ostream &os) { os << kernelIR; };
    else
      write = [ptx = steps->ptx](raw_ostream &os) { os << ptx; };
  } else if (emitKind == EmitKind::Plan) {
    auto plan = model->getAttrOfType<v4a::KVPlanAttr>(v4a::kKVPlanAttrName);
    write = [plan](raw_ostream &os) { v4a::writePlanJson(plan, os); };
  } else {
    write = [&](raw_ostream &os) { module->print(os); };
  }
  std::string text;
  raw_string_ostream stream(text);
  write(stream);
  std::string error;
  if (!v4a::io::writeFile(outputPath, text, error))
    return fail(error);
  return 0;
}
