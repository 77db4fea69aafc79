//===- Report.cpp - schedule and KV memory report of a model --------------===//

#include "lib/Report/Report.h"

#include "core/FileIO.h"
#include "core/TensorSpecs.h"
#include "lib/Plan/ModelPlan.h"
#include "passes/Conversion/V4AToGPU/IndexerTopK.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace v4a;
using namespace v4a::report;

static std::vector<Group> readGroups(ModelOp model, StringRef attrName) {
  std::vector<Group> groups;
  auto list = model->getAttrOfType<ArrayAttr>(attrName);
  if (!list)
    return groups;
  for (auto group : list.getAsRange<SchedGroupAttr>())
    groups.push_back({group.getKey().str(), group.getKernel().str(),
                      std::vector<int64_t>(group.getLayers().begin(),
                                           group.getLayers().end()),
                      group.getMetadataLayer()});
  return groups;
}

static void addBuffer(Usage &usage, const plan::Buffer &buffer) {
  ++usage.cachesUnshared;
  usage.rowsUnshared += buffer.rows;
  usage.bytesUnshared += buffer.bytes;
  if (!buffer.isAlias()) {
    ++usage.cachesShared;
    usage.rowsShared += buffer.rows;
    usage.bytesShared += buffer.bytes;
  }
  usage.rowBytes.insert(buffer.rowBytes);
  usage.dims.insert(buffer.dim);
  usage.rowsPerCache.insert(buffer.rows);
  usage.layouts.insert(layout::rowKindName(buffer.kind));
}

static std::optional<LayoutReport>
planLayout(StringRef name, const std::vector<LayerSpec> &layers,
           const plan::ModelDims &dims, plan::PlanOptions options,
           std::string &error) {
  std::optional<plan::Plan> plan =
      plan::planCaches(layers, dims, options, error);
  if (!plan)
    return std::nullopt;
  LayoutReport result;
  result.name = name.str();
  for (const plan::Buffer &buffer : plan->buffers) {
    if (layers[buffer.layer].isMtp)
      continue;
    addBuffer(result.usage[plan::componentName(buffer.component)], buffer);
    if (buffer.component == plan::Component::Window ||
        buffer.component == plan::Component::Compressed)
      addBuffer(result.usage["main_kv"], buffer);
    addBuffer(result.usage["total"], buffer);
  }
  return result;
}

/// Step sizes the indexer report shows: a decode token, a decode batch, a
/// prefill chunk.
static constexpr int64_t kReportedTokens[] = {1, 128, 8192};
/// The index keys the indexers' transient memory is reported for: the
/// default layout's.
static constexpr layout::RowKind kReportedIndexKeys =
    layout::RowKind::IndexMXFP4;
static_assert(plan::kDefaultIndexLayout == plan::IndexLayout::MXFP4);

static std::vector<IndexerUsage>
indexerUsage(const std::vector<Group> &groups,
             const std::vector<LayerSpec> &layers, const ModelConfig &config,
             int64_t contextTokens, bool indexerE4M3) {
  std::vector<IndexerUsage> result;
  for (const Group &group : groups) {
    for (int64_t id : group.layers) {
      const LayerSpec &layer = layers[id];
      if (layer.isMtp || !ownsTopk(layer) ||
          !ratioUsesIndexer(layer.compressRatio))
        continue;
      // A candidate source runs the family twice over its scores, for its
      // rows and for its blocks: both must be covered.
      bool makes = layer.candidateSource == layer.id;
      bool inBlocks = usesCandidates(layer);
      int64_t blocks = config.candidateBlocks();
      auto covers = [&](int64_t k) {
        return gpu::indexerFamilyCovers(config.indexNHeads, config.indexHeadDim,
                                        k);
      };
      bool family = covers(layer.indexTopk) && (!makes || covers(blocks));
      std::string path = !family    ? "loops (shape)"
                         : makes    ? "family (rows, blocks)"
                         : inBlocks ? "family (in blocks)"
                                    : "family";
      auto it = llvm::find_if(result, [&](const IndexerUsage &usage) {
        return usage.key == group.key && usage.path == path &&
               usage.k == layer.indexTopk;
      });
      if (it != result.end()) {
        ++it->layers;
        continue;
      }
      IndexerUsage usage;
      usage.key = group.key;
      usage.layers = 1;
      usage.k = layer.indexTopk;
      usage.rows = contextTokens / layer.compressRatio;
      usage.path = path;
      // The family keeps split lists of k keys; the loop path writes every
      // score of the step, [tokens, rows] f32.
      for (int64_t tokens : kReportedTokens)
        usage.bytes.push_back(
            {tokens, !family ? tokens * usage.rows * 4
                     : makes
                         ? gpu::indexerSourceTransientBytes(
                               tokens, config.indexNHeads, config.indexHeadDim,
                               usage.k, blocks, config.candidateRows(),
                               kReportedIndexKeys, indexerE4M3)
                         : gpu::indexerTransientBytes(
                               tokens, config.indexNHeads, config.indexHeadDim,
                               usage.k, kReportedIndexKeys, indexerE4M3)});
      result.push_back(std::move(usage));
    }
  }
  return result;
}

std::optional<Report> report::buildReport(ModelOp model, int64_t contextTokens,
                                          int64_t pageSize, std::string &error,
                                          bool indexerE4M3) {
  Report report;
  report.model = model.getSymName().str();
  report.contextTokens = contextTokens;
  report.pageSize = pageSize;
  std::vector<LayerSpec> layers = collectLayerInfo(model);
  for (const LayerSpec &layer : layers)
    ++(layer.isMtp ? report.mtpLayers : report.attentionLayers);
  report.groups = readGroups(model, kScheduleAttrName);
  report.mtpGroups = readGroups(model, kMtpScheduleAttrName);
  for (const std::vector<Group> *list : {&report.groups, &report.mtpGroups})
    for (const Group &group : *list)
      if (!llvm::is_contained(report.kernels, group.key))
        report.kernels.push_back(group.key);

  plan::PlanOptions options;
  options.contextTokens = contextTokens;
  options.pageSize = pageSize;
  for (auto [name, main, index] :
       {std::tuple{"bf16", plan::MainLayout::BF16, plan::IndexLayout::BF16},
        std::tuple{"fp8", plan::MainLayout::FP8, plan::IndexLayout::FP8},
        std::tuple{"mxfp4", plan::MainLayout::FP8, plan::IndexLayout::MXFP4}}) {
    options.mainLayout = main;
    options.indexLayout = index;
    std::string why;
    std::optional<LayoutReport> layout =
        planLayout(name, layers, collectModelDims(model), options, why);
    if (!layout) {
      // The bf16 plan always fits a verified model; fp8 MODEL1 needs 64
      // rope dims, which small models may lack.
      if (main == plan::MainLayout::BF16) {
        error = why;
        return std::nullopt;
      }
      layout.emplace();
      layout->name = name;
      layout->unavailable = why;
    }
    report.layouts.push_back(std::move(*layout));
  }
  report.indexers =
      indexerUsage(report.groups, layers, collectModelConfig(model),
                   contextTokens, indexerE4M3);
  report.indexerE4M3 = indexerE4M3;
  return report;
}

/// "a-b" for a run of consecutive ids, "a,b,c" otherwise.
static std::string formatIds(const std::vector<int64_t> &ids) {
  std::string text;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1)
      ++j;
    if (!text.empty())
      text += ",";
    text += std::to_string(ids[i]);
    if (j > i)
      text += "-" + std::to_string(ids[j]);
    i = j + 1;
  }
  return text;
}

static std::string formatSet(const std::set<int64_t> &values) {
  std::string text;
  for (int64_t value : values)
    text += (text.empty() ? "" : "/") + std::to_string(value);
  return text;
}

static std::string formatNames(const std::set<std::string> &names) {
  std::string text;
  for (const std::string &name : names)
    text += (text.empty() ? "" : "+") + name;
  return text;
}

static const char *const kComponentOrder[] = {
    "window",           "compressed",    "main_kv", "index_keys",
    "compressor_state", "indexer_state", "total"};

static void printIndexers(const Report &report, llvm::raw_ostream &os) {
  if (report.indexers.empty())
    return;
  os << "\nIndexer transient memory per step on the GPU ("
     << plan::indexLayoutName(plan::kDefaultIndexLayout)
     << " index keys), "
        "layers with their own top-k:\n";
  os << llvm::formatv("{0,-20} {1,6} {2,6} {3,9}  {4,-24}", "sched_meta_key",
                      "layers", "k", "rows", "path");
  for (int64_t tokens : kReportedTokens)
    os << llvm::formatv(" {0,12}", std::to_string(tokens) + " tok");
  os << "\n";
  for (const IndexerUsage &usage : report.indexers) {
    os << llvm::formatv("{0,-20} {1,6} {2,6} {3,9}  {4,-24}", usage.key,
                        usage.layers, usage.k, usage.rows, usage.path);
    for (const auto &[tokens, bytes] : usage.bytes)
      os << llvm::formatv(" {0,12}", io::formatBytes(bytes));
    os << "\n";
  }
  bool twoLevel = llvm::any_of(report.indexers, [](const IndexerUsage &usage) {
    return usage.path == "family (rows, blocks)";
  });
  os << llvm::formatv("family: split lists of k keys, at most max(tokens, "
                      "{0}) of them{1}, nothing in tokens x rows{2};\nloops: "
                      "the [tokens, rows] f32 scores.\n",
                      gpu::indexerSplitListBytes(1, 1) / 8,
                      report.indexerE4M3 ? ", and a query image a token "
                                           "(e4m3 MMAs)"
                                         : "",
                      twoLevel ? " (a candidate source's twice: its rows and "
                                 "its candidate blocks)"
                               : "");
}

void report::printText(const Report &report, llvm::raw_ostream &os) {
  os << "model " << report.model << ": " << report.attentionLayers
     << " attention layers + " << report.mtpLayers << " MTP layer"
     << (report.mtpLayers == 1 ? "" : "s") << ", context "
     << report.contextTokens << " tokens, page " << report.pageSize
     << " rows\n\n";
  os << llvm::formatv("{0,-20} {1,6}  {2}\n", "sched_meta_key", "layers",
                      "ids");
  for (const Group &group : report.groups)
    os << llvm::formatv("{0,-20} {1,6}  {2}\n", group.key, group.layers.size(),
                        formatIds(group.layers));
  for (const Group &group : report.mtpGroups)
    os << llvm::formatv("{0,-20} {1,6}  {2}\n", "mtp " + group.key,
                        group.layers.size(), formatIds(group.layers));
  os << report.groups.size() << " keys for the attention layers; "
     << report.kernels.size()
     << " unique kernel variants (layers of one key share one):";
  for (const std::string &kernel : report.kernels)
    os << " " << kernel;
  os << "\n\nKV memory per sequence at " << report.contextTokens
     << " tokens, attention layers:\n";
  std::string header = llvm::formatv(
      "{0,-5} {1,-17} {2,-21} {3,7} {4,11} {5,10} {6,8} {7,11} {8,11}\n",
      "kind", "component", "layout", "caches", "rows", "row_bytes", "dims",
      "shared", "unshared");
  os << header;
  for (const LayoutReport &layout : report.layouts) {
    if (!layout.unavailable.empty())
      os << layout.name << "  not available: " << layout.unavailable << "\n";
    for (const char *component : kComponentOrder) {
      auto it = layout.usage.find(component);
      if (it == layout.usage.end())
        continue;
      const Usage &usage = it->second;
      bool isTotal = StringRef(component) == "total";
      os << llvm::formatv(
          "{0,-5} {1,-17} {2,-21} {3,7} {4,11} {5,10} {6,8} {7,11} {8,11}\n",
          layout.name, component, isTotal ? "-" : formatNames(usage.layouts),
          usage.cachesShared, isTotal ? "-" : std::to_string(usage.rowsShared),
          isTotal ? "-" : formatSet(usage.rowBytes),
          isTotal ? "-" : formatSet(usage.dims),
          io::formatBytes(usage.bytesShared),
          io::formatBytes(usage.bytesUnshared));
    }
  }
  os << "\nmxfp4: fp8 MODEL1 main rows with MXFP4 index keys "
        "(--kv-layout=fp8 --index-layout=mxfp4).\n"
        "main_kv = window + compressed (the rows attention reads); total = "
        "main_kv + index_keys +\ncompressor_state + indexer_state. shared "
        "counts a cache that consumer layers alias once,\nunshared once per "
        "layer. Window rings hold min(sliding_window, context) rows. Exact "
        "bytes:\n--report=json.\n";
  printIndexers(report, os);
}

static llvm::json::Array toJson(const std::set<int64_t> &values) {
  return llvm::json::Array(values);
}

static llvm::json::Array toJson(const std::vector<Group> &groups) {
  llvm::json::Array result;
  for (const Group &group : groups)
    result.push_back(
        llvm::json::Object{{"key", group.key},
                           {"layers", llvm::json::Array(group.layers)},
                           {"metadata_layer", group.metadataLayer}});
  return result;
}

void report::printJson(const Report &report, llvm::raw_ostream &os) {
  llvm::json::Object memory;
  for (const LayoutReport &layout : report.layouts) {
    llvm::json::Object components;
    for (const auto &[name, usage] : layout.usage)
      components[name] =
          llvm::json::Object{{"caches_shared", usage.cachesShared},
                             {"caches_unshared", usage.cachesUnshared},
                             {"rows_shared", usage.rowsShared},
                             {"rows_unshared", usage.rowsUnshared},
                             {"bytes_shared", usage.bytesShared},
                             {"bytes_unshared", usage.bytesUnshared},
                             {"row_bytes", toJson(usage.rowBytes)},
                             {"dims", toJson(usage.dims)},
                             {"rows_per_cache", toJson(usage.rowsPerCache)},
                             {"layouts", llvm::json::Array(usage.layouts)}};
    if (!layout.unavailable.empty())
      components["unavailable"] = layout.unavailable;
    memory[layout.name] = std::move(components);
  }
  llvm::json::Array indexers;
  for (const IndexerUsage &usage : report.indexers) {
    llvm::json::Object bytes;
    for (const auto &[tokens, amount] : usage.bytes)
      bytes[std::to_string(tokens)] = amount;
    indexers.push_back(
        llvm::json::Object{{"key", usage.key},
                           {"layers", usage.layers},
                           {"k", usage.k},
                           {"rows", usage.rows},
                           {"path", usage.path},
                           {"bytes_per_step", std::move(bytes)}});
  }
  llvm::json::Object root{
      {"model", report.model},
      {"attention_layers", report.attentionLayers},
      {"mtp_layers", report.mtpLayers},
      {"context_tokens", report.contextTokens},
      {"page_size", report.pageSize},
      {"keys", toJson(report.groups)},
      {"mtp_keys", toJson(report.mtpGroups)},
      {"kernel_variants", llvm::json::Array(report.kernels)},
      {"memory", std::move(memory)},
      {"indexer_transient", std::move(indexers)}};
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
}
