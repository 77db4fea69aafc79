//===- VerifyTopology.cpp - cross-layer sharing rules ---------------------===//
//
// Implements rules a-f of the specification's section 4 as fail-fast errors.
// Each diagnostic names the layer, the map and the rule, and says what would
// be valid.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/V4A/IR/V4AOps.h"
#include "lib/Plan/ModelPlan.h"

#include "llvm/ADT/STLExtras.h"

namespace v4a {
#define GEN_PASS_DEF_VERIFYTOPOLOGY
#include "passes/Passes.h.inc"
} // namespace v4a

using namespace mlir;
using namespace v4a;

namespace {

/// One sharing map and which layers take part in it.
struct SharingMap {
  StringRef name;
  ArrayRef<int64_t> sources;
  /// What a source of this map owns, for messages.
  StringRef owned;
  bool (*participates)(LayerOp);
};

bool hasCompressedKv(LayerOp layer) { return layer.getCompressRatio() > 0; }
bool isSparse(LayerOp layer) { return layer.getIndexTopk() > 0; }

class TopologyChecker {
public:
  explicit TopologyChecker(ModelOp model)
      : model(model), layers(llvm::to_vector(model.getLayers())),
        maps{
            {"kv", model.getLayerKvMap(), "compressed KV cache",
             hasCompressedKv},
            {"index-K", model.getLayerIndexKMap(), "index key cache", isSparse},
            {"index-topk", model.getLayerIndexModuleMap(), "indexer (top-k)",
             isSparse}} {}

  LogicalResult check() {
    for (const SharingMap &map : maps)
      for (LayerOp layer : layers)
        if (failed(checkMtp(layer, map)) ||
            failed(checkNonParticipant(layer, map)) ||
            failed(checkSegment(layer, map)) ||
            failed(checkAgreement(layer, map)) ||
            failed(checkBoundary(layer, map)))
          return failure();
    if (failed(checkBoundaryIsSource()))
      return failure();
    for (LayerOp layer : layers)
      if (failed(checkRefinement(layer)))
        return failure();
    if (failed(checkCandidates()) || failed(checkPlanAliases()))
      return failure();
    return success();
  }

private:
  int64_t idOf(LayerOp layer) { return layer.getLayerId(); }
  LayerOp layerAt(int64_t id) { return layers[id]; }
  int64_t sourceOf(LayerOp layer, const SharingMap &map) {
    return map.sources[idOf(layer)];
  }

  InFlightDiagnostic fail(LayerOp layer, const SharingMap &map,
                          StringRef rule) {
    return layer.emitError() << "layer " << idOf(layer) << ": " << map.name
                             << " map: rule " << rule << ": ";
  }

  /// Rule e: MTP layers never share, in either direction.
  LogicalResult checkMtp(LayerOp layer, const SharingMap &map) {
    int64_t source = sourceOf(layer, map);
    if (layer.getIsMtp() && source != idOf(layer))
      return fail(layer, map, "e (MTP layers never share)")
             << "maps to layer " << source << "; an MTP layer must map to "
             << "itself";
    if (!layer.getIsMtp() && layerAt(source).getIsMtp())
      return fail(layer, map, "e (MTP layers never share)")
             << "maps to MTP layer " << source
             << "; only MTP layers may map to themselves there";
    return success();
  }

  /// A layer that owns nothing of this kind has nothing to share.
  LogicalResult checkNonParticipant(LayerOp layer, const SharingMap &map) {
    if (map.participates(layer) || map.name == "index-K")
      return success();
    int64_t source = sourceOf(layer, map);
    if (source == idOf(layer))
      return success();
    return fail(layer, map, "d (consumer and source agree)")
           << "the layer has no " << map.owned << " (compress ratio "
           << layer.getCompressRatio() << ", index_topk "
           << layer.getIndexTopk() << ") but maps to layer " << source
           << "; it must map to itself";
  }

  /// Rule a: a consumer maps to the nearest source before it.
  LogicalResult checkSegment(LayerOp layer, const SharingMap &map) {
    int64_t id = idOf(layer), source = sourceOf(layer, map);
    if (!map.participates(layer) || source == id)
      return success();
    if (source > id)
      return fail(layer, map, "a (segmented sharing)")
             << "maps forward to layer " << source
             << "; a consumer maps to a source before it, and a layer before "
                "the first source has nothing to map to (make it a source by "
                "mapping it to itself)";
    LayerOp sourceLayer = layerAt(source);
    if (!map.participates(sourceLayer) || sourceOf(sourceLayer, map) != source)
      return fail(layer, map, "a (segmented sharing)")
             << "maps to layer " << source << ", which is not a source (it "
             << (map.participates(sourceLayer)
                     ? "maps to layer " +
                           std::to_string(sourceOf(sourceLayer, map))
                     : std::string("has no ") + map.owned.str())
             << "); map to a layer that maps to itself";
    for (int64_t between = source + 1; between < id; ++between) {
      LayerOp other = layerAt(between);
      if (map.participates(other) && sourceOf(other, map) == between)
        return fail(layer, map, "a (segmented sharing)")
               << "maps to layer " << source << ", but layer " << between
               << " in between is a source; map to layer " << between;
    }
    return success();
  }

  /// Rule d: a consumer and its source agree on the layer kind.
  LogicalResult checkAgreement(LayerOp layer, const SharingMap &map) {
    int64_t source = sourceOf(layer, map);
    if (!map.participates(layer) || source == idOf(layer))
      return success();
    LayerOp sourceLayer = layerAt(source);
    auto mismatch = [&](StringRef field, int64_t mine, int64_t theirs) {
      return fail(layer, map, "d (consumer and source agree)")
             << field << " " << mine << " differs from source layer " << source
             << "'s " << theirs << "; share only between layers of the same "
             << field;
    };
    if (layer.getCompressRatio() != sourceLayer.getCompressRatio())
      return mismatch("compress ratio", layer.getCompressRatio(),
                      sourceLayer.getCompressRatio());
    if (map.name != "index-K" &&
        layer.getIndexTopk() != sourceLayer.getIndexTopk())
      return mismatch("index_topk", layer.getIndexTopk(),
                      sourceLayer.getIndexTopk());
    if (map.name == "kv" && layer.getUseSwa() != sourceLayer.getUseSwa())
      return mismatch("use_swa", layer.getUseSwa(), sourceLayer.getUseSwa());
    return success();
  }

  std::optional<int64_t> yocoBoundary() {
    std::optional<uint64_t> boundary = model.getNPrefillLayer();
    if (!boundary || static_cast<int64_t>(*boundary) >=
                         static_cast<int64_t>(model.getNumHiddenLayers()))
      return std::nullopt;
    return static_cast<int64_t>(*boundary);
  }

  /// Rule c: sharing never crosses the YoCo boundary.
  LogicalResult checkBoundary(LayerOp layer, const SharingMap &map) {
    std::optional<int64_t> boundary = yocoBoundary();
    int64_t id = idOf(layer), source = sourceOf(layer, map);
    if (!boundary || (id < *boundary) == (source < *boundary))
      return success();
    return fail(layer, map, "c (YoCo boundary)")
           << "maps to layer " << source << " across the boundary at layer "
           << *boundary << " (n_prefill_layer); map to a source on the same "
           << "side";
  }

  LogicalResult checkBoundaryIsSource() {
    std::optional<int64_t> boundary = yocoBoundary();
    if (!boundary)
      return success();
    LayerOp layer = layerAt(*boundary);
    const SharingMap &kv = maps[0];
    if (hasCompressedKv(layer) && sourceOf(layer, kv) == *boundary)
      return success();
    return fail(layer, kv, "c (YoCo boundary)")
           << "n_prefill_layer " << *boundary << " must be a KV source (a "
           << "layer with compress ratio > 0 that maps to itself)";
  }

  /// Rule b: index-topk segments lie inside index-K segments, which lie
  /// inside KV segments.
  LogicalResult checkRefinement(LayerOp layer) {
    if (!isSparse(layer))
      return success();
    const SharingMap &kv = maps[0], &indexK = maps[1], &topk = maps[2];
    int64_t keySource = sourceOf(layer, indexK);
    if (keySource != sourceOf(layer, kv))
      return fail(layer, indexK, "b (refinement)")
             << "maps index keys to layer " << keySource
             << " but compressed KV to layer " << sourceOf(layer, kv)
             << "; index keys live beside the compressed KV, so the index-K "
                "map must equal the KV map";
    int64_t topkSource = sourceOf(layer, topk);
    if (sourceOf(layerAt(topkSource), indexK) != keySource)
      return fail(layer, topk, "b (refinement)")
             << "the index source " << topkSource
             << " lies in another index-K segment (index-K source "
             << sourceOf(layerAt(topkSource), indexK) << ", this layer's is "
             << keySource
             << "); an index source's segment must not cross a KV source";
    return success();
  }

  /// Rule e: the candidate map is non-decreasing and names an index source
  /// with index_topk > 0.
  LogicalResult checkCandidates() {
    SharingMap candidate{"candidate", {}, "candidate blocks", isSparse};
    int64_t previous = -1;
    for (LayerOp layer : layers) {
      auto source = static_cast<int64_t>(layer.getCandidateSource());
      if (source < 0)
        continue;
      if (layer.getIsMtp())
        return fail(layer, candidate, "e (MTP layers never share)")
               << "an MTP layer takes no candidate source (got " << source
               << ")";
      if (source > idOf(layer))
        return fail(layer, candidate, "e (candidate map)")
               << "names layer " << source << " after it; a candidate "
               << "source precedes the layers it restricts";
      if (source < previous)
        return fail(layer, candidate, "e (candidate map)")
               << "names layer " << source << " after an earlier layer named "
               << previous << "; the candidate map must be non-decreasing";
      previous = source;
      LayerOp sourceLayer = layerAt(source);
      if (!isSparse(sourceLayer) || sourceOf(sourceLayer, maps[2]) != source)
        return fail(layer, candidate, "e (candidate map)")
               << "candidate source " << source
               << " must be an index source with index_topk > 0 (it has "
               << "index_topk " << sourceLayer.getIndexTopk()
               << " and maps to index source " << sourceOf(sourceLayer, maps[2])
               << ")";
      if (static_cast<int64_t>(sourceLayer.getCandidateSource()) != source)
        return fail(layer, candidate, "e (candidate map)")
               << "candidate source " << source
               << " must name itself as its candidate source";
      if (std::optional<int64_t> boundary = yocoBoundary();
          boundary && (idOf(layer) < *boundary) != (source < *boundary))
        return fail(layer, candidate, "c (YoCo boundary)")
               << "names candidate source " << source
               << " across the boundary at layer " << *boundary
               << " (n_prefill_layer)";
      if (!model.getCandidateTopkBlocks())
        return fail(layer, candidate, "e (candidate map)")
               << "a candidate source needs candidate_topk_blocks and "
                  "candidate_block_size on the model";
    }
    return success();
  }

  /// Rule f: with a plan attached, every consumer's caches are aliases of its
  /// source's, never independent buffers that nobody writes.
  LogicalResult checkPlanAliases() {
    auto plan = model->getAttrOfType<KVPlanAttr>(kKVPlanAttrName);
    if (!plan)
      return success();
    for (LayerOp layer : layers) {
      for (auto [component, map] :
           {std::pair<CacheComponent, const SharingMap *>{
                CacheComponent::Compressed, &maps[0]},
            {CacheComponent::CompressorState, &maps[0]},
            {CacheComponent::IndexKeys, &maps[1]}}) {
        if (!map->participates(layer))
          continue;
        int64_t source = sourceOf(layer, *map);
        int64_t expected = source == idOf(layer) ? -1 : source;
        CacheComponent wanted = component;
        auto buffer = llvm::find_if(
            plan.getBuffers().getAsRange<CacheBufferAttr>(),
            [&](CacheBufferAttr b) {
              return b.getLayer() == idOf(layer) && b.getComponent() == wanted;
            });
        bool found =
            buffer != plan.getBuffers().getAsRange<CacheBufferAttr>().end();
        if (found && (*buffer).getAliasOf() == expected)
          continue;
        auto diag = fail(layer, *map, "f (consumers alias their source)");
        diag << "the cache plan ";
        if (!found)
          diag << "has no " << stringifyCacheComponent(component)
               << " buffer for the layer";
        else if (expected >= 0)
          diag << "gives the layer an independent "
               << stringifyCacheComponent(component)
               << " buffer that is never written";
        else
          diag << "aliases the layer's " << stringifyCacheComponent(component)
               << " buffer to layer " << (*buffer).getAliasOf()
               << " though it is a source";
        diag << "; it must "
             << (expected >= 0 ? "alias layer " + std::to_string(expected)
                               : std::string("own its buffer"))
             << " (re-run v4a-plan-kv)";
        return diag;
      }
    }
    return success();
  }

  ModelOp model;
  SmallVector<LayerOp> layers;
  SharingMap maps[3];
};

struct VerifyTopologyPass
    : public v4a::impl::VerifyTopologyBase<VerifyTopologyPass> {
  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>())
      if (failed(TopologyChecker(model).check()))
        return signalPassFailure();
    markAllAnalysesPreserved();
  }
};

} // namespace
