//===- Report.h - schedule and KV memory report of a model ------*- C++ -*-===//

#ifndef V4A_LIB_REPORT_REPORT_H
#define V4A_LIB_REPORT_REPORT_H

#include "core/KVPlan.h"
#include "dialects/V4A/IR/V4AOps.h"

#include "llvm/Support/raw_ostream.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace v4a::report {

struct Group {
  std::string key;
  std::string kernel;
  std::vector<int64_t> layers;
  int64_t metadataLayer = 0;
};

/// Memory of one component over the attention layers, counting shared
/// (aliased) caches once or once per layer.
struct Usage {
  int64_t cachesShared = 0, cachesUnshared = 0;
  int64_t rowsShared = 0, rowsUnshared = 0;
  int64_t bytesShared = 0, bytesUnshared = 0;
  std::set<int64_t> rowBytes, dims, rowsPerCache;
  std::set<std::string> layouts;
};

struct LayoutReport {
  std::string name; // "bf16" or "fp8"
  /// Why the model's rows do not fit this layout (then usage is empty).
  std::string unavailable;
  /// Per component name, plus "main_kv" (window + compressed) and "total".
  std::map<std::string, Usage> usage;
};

/// The transient memory an indexer top-k takes in one step on the GPU, for
/// the layers of a key that pick with their own indexer.
struct IndexerUsage {
  std::string key;
  int64_t layers = 0;
  int64_t k = 0;
  /// Compressed rows a sequence sees at the report's context.
  int64_t rows = 0;
  /// "family" (split lists, bounded) or the loop path and why.
  std::string path;
  /// (tokens in the step, bytes).
  std::vector<std::pair<int64_t, int64_t>> bytes;
};

struct Report {
  std::string model;
  int64_t attentionLayers = 0, mtpLayers = 0;
  int64_t contextTokens = 0, pageSize = 0;
  std::vector<Group> groups, mtpGroups;
  std::vector<std::string> kernels;
  std::vector<LayoutReport> layouts;
  std::vector<IndexerUsage> indexers;
  /// Whether the indexer family multiplies MXFP4 keys as e4m3.
  bool indexerE4M3 = false;
};

/// Builds the report of a model that went through the planning pipeline
/// (it reads `v4a.schedule`); memory is planned at `contextTokens` for bf16
/// and for fp8 layouts. `indexerE4M3`: the GPU's indexer family multiplies
/// MXFP4 keys as e4m3 (its transient memory then holds query images).
std::optional<Report> buildReport(ModelOp model, int64_t contextTokens,
                                  int64_t pageSize, std::string &error,
                                  bool indexerE4M3 = false);

void printText(const Report &report, llvm::raw_ostream &os);
void printJson(const Report &report, llvm::raw_ostream &os);

} // namespace v4a::report

#endif // V4A_LIB_REPORT_REPORT_H
