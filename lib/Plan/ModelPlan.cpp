//===- ModelPlan.cpp - cache plans and schedules of v4a.model ops ---------===//

#include "lib/Plan/ModelPlan.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace v4a;

std::vector<LayerSpec> v4a::collectLayerInfo(ModelOp model) {
  std::vector<LayerSpec> layers;
  for (LayerOp layer : model.getLayers()) {
    LayerSpec info;
    info.id = layer.getLayerId();
    info.compressRatio = layer.getCompressRatio();
    info.indexTopk = layer.getIndexTopk();
    info.useSwa = layer.getUseSwa();
    info.hasPackedKv = layer.getHasPackedKv();
    info.isMtp = layer.getIsMtp();
    info.kvSource = model.getLayerKvMap()[info.id];
    info.indexKSource = model.getLayerIndexKMap()[info.id];
    info.indexSource = layer.getIndexSource();
    info.candidateSource = layer.getCandidateSource();
    layers.push_back(info);
  }
  return layers;
}

ModelConfig v4a::collectModelConfig(ModelOp model) {
  ModelConfig config;
  config.hiddenSize = model.getHiddenSize();
  config.numHiddenLayers = model.getNumHiddenLayers();
  config.numAttentionHeads = model.getNumAttentionHeads();
  config.numKeyValueHeads = model.getNumKeyValueHeads();
  config.headDim = model.getHeadDim();
  config.qkRopeHeadDim = model.getQkRopeHeadDim();
  config.qLoraRank = model.getQLoraRank();
  config.oLoraRank = model.getOLoraRank();
  config.oGroups = model.getOGroups();
  config.slidingWindow = model.getSlidingWindow();
  config.indexNHeads = model.getIndexNHeads();
  config.indexHeadDim = model.getIndexHeadDim();
  config.indexTopk = model.getIndexTopk();
  config.ropeTheta = model.getRopeTheta().convertToDouble();
  config.compressRopeTheta = model.getCompressRopeTheta().convertToDouble();
  config.rmsNormEps = model.getRmsNormEps().convertToDouble();
  if (YarnAttr yarn = model.getRopeScalingAttr())
    config.ropeScaling = YarnConfig{yarn.getFactor().convertToDouble(),
                                    yarn.getOriginalMaxPosition(),
                                    yarn.getBetaFast().convertToDouble(),
                                    yarn.getBetaSlow().convertToDouble()};
  config.fp8Weights = model.getWeightFormat() == WeightFormat::FP8;
  for (LayerOp layer : model.getLayers()) {
    config.compressRatios.push_back(layer.getCompressRatio());
    config.numMtpLayers += layer.getIsMtp() ? 1 : 0;
  }
  config.candidateTopkBlocks = model.getCandidateTopkBlocks();
  config.candidateBlockSize = model.getCandidateBlockSize();
  config.nPrefillLayer = model.getNPrefillLayer();
  return config;
}

plan::ModelDims v4a::collectModelDims(ModelOp model) {
  plan::ModelDims dims;
  dims.headDim = model.getHeadDim();
  dims.indexHeadDim = model.getIndexHeadDim();
  dims.window = model.getSlidingWindow();
  return dims;
}

CacheComponent v4a::toCacheComponent(plan::Component component) {
  switch (component) {
  case plan::Component::Window:
    return CacheComponent::Window;
  case plan::Component::Compressed:
    return CacheComponent::Compressed;
  case plan::Component::IndexKeys:
    return CacheComponent::IndexKeys;
  case plan::Component::CompressorState:
    return CacheComponent::CompressorState;
  case plan::Component::IndexerState:
    return CacheComponent::IndexerState;
  }
  llvm_unreachable("unknown cache component");
}

CacheLayout v4a::toCacheLayout(layout::RowKind kind) {
  switch (kind) {
  case layout::RowKind::BF16:
    return CacheLayout::BF16;
  case layout::RowKind::FP8Model1:
    return CacheLayout::FP8Model1;
  case layout::RowKind::MXFP8:
    return CacheLayout::MXFP8;
  case layout::RowKind::IndexBF16:
    return CacheLayout::IndexBF16;
  case layout::RowKind::IndexFP8:
    return CacheLayout::IndexFP8;
  case layout::RowKind::IndexMXFP4:
    return CacheLayout::IndexMXFP4;
  case layout::RowKind::F32:
    return CacheLayout::F32;
  }
  llvm_unreachable("unknown row kind");
}

KVPlanAttr v4a::toAttr(MLIRContext *context, const plan::Plan &plan) {
  SmallVector<Attribute> buffers;
  for (const plan::Buffer &buffer : plan.buffers)
    buffers.push_back(CacheBufferAttr::get(
        context, buffer.layer, toCacheComponent(buffer.component),
        toCacheLayout(buffer.kind), buffer.rows, buffer.dim, buffer.rowBytes,
        buffer.bytes, buffer.aliasOf));
  return KVPlanAttr::get(context, plan.options.contextTokens,
                         plan.options.pageSize, plan.options.alignment,
                         plan.allocatedBytes(),
                         ArrayAttr::get(context, buffers));
}

std::string v4a::kernelNameFor(LayerOp layer) {
  return "v4a_attn_" + layer.getSchedMetaKey();
}

void v4a::writePlanJson(KVPlanAttr plan, llvm::raw_ostream &os) {
  llvm::json::OStream json(os, /*IndentSize=*/2);
  json.object([&] {
    json.attribute("context_tokens", plan.getContextTokens());
    json.attribute("page_size", plan.getPageSize());
    json.attribute("alignment", plan.getAlignment());
    json.attribute("allocated_bytes", plan.getBytes());
    json.attributeArray("buffers", [&] {
      for (auto buffer : plan.getBuffers().getAsRange<CacheBufferAttr>())
        json.object([&] {
          json.attribute("layer", buffer.getLayer());
          json.attribute("component",
                         stringifyCacheComponent(buffer.getComponent()));
          json.attribute("layout", stringifyCacheLayout(buffer.getLayout()));
          json.attribute("rows", buffer.getRows());
          json.attribute("dim", buffer.getDim());
          json.attribute("row_bytes", buffer.getRowBytes());
          json.attribute("bytes", buffer.getBytes());
          json.attribute("alias_of", buffer.getAliasOf());
        });
    });
  });
  os << "\n";
}
