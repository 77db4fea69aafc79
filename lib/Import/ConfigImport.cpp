//===- ConfigImport.cpp - config.json to v4a IR ---------------------------===//

#include "lib/Import/ConfigImport.h"

#include "dialects/V4A/IR/V4AOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace v4a;

static SmallVector<int64_t> collectMap(ArrayRef<LayerSpec> layers,
                                       int64_t LayerSpec::*field) {
  SmallVector<int64_t> map;
  for (const LayerSpec &layer : layers)
    map.push_back(layer.*field);
  return map;
}

static void buildLayer(OpBuilder &builder, Location loc,
                       const LayerSpec &spec) {
  auto layer =
      LayerOp::create(builder, loc, spec.id, spec.compressRatio, spec.indexTopk,
                      spec.useSwa, spec.hasPackedKv, spec.isMtp, spec.kvSource,
                      spec.indexSource, spec.candidateSource);
  (void)layer;
}

OwningOpRef<ModuleOp> v4a::buildModelModule(MLIRContext *context, Location loc,
                                            StringRef name,
                                            const ModelConfig &config,
                                            ArrayRef<LayerSpec> layers) {
  context->loadDialect<V4ADialect>();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder builder(context);
  builder.setInsertionPointToEnd(module->getBody());

  auto i64 = [&](int64_t value) { return builder.getI64IntegerAttr(value); };
  auto f64 = [&](double value) { return builder.getF64FloatAttr(value); };
  auto optionalI64 = [&](std::optional<int64_t> value) -> IntegerAttr {
    return value ? i64(*value) : IntegerAttr();
  };
  YarnAttr yarn;
  if (config.ropeScaling)
    yarn = YarnAttr::get(context, APFloat(config.ropeScaling->factor),
                         config.ropeScaling->originalMaxPositionEmbeddings,
                         APFloat(config.ropeScaling->betaFast),
                         APFloat(config.ropeScaling->betaSlow));

  auto model = ModelOp::create(
      builder, loc, builder.getStringAttr(name), i64(config.hiddenSize),
      i64(config.numHiddenLayers), i64(config.numAttentionHeads),
      i64(config.numKeyValueHeads), i64(config.headDim),
      i64(config.qkRopeHeadDim), i64(config.qLoraRank), i64(config.oLoraRank),
      i64(config.oGroups), i64(config.slidingWindow), i64(config.indexNHeads),
      i64(config.indexHeadDim), i64(config.indexTopk), f64(config.ropeTheta),
      f64(config.compressRopeTheta), yarn, f64(config.rmsNormEps),
      WeightFormatAttr::get(context, config.fp8Weights ? WeightFormat::FP8
                                                       : WeightFormat::BF16),
      optionalI64(config.nPrefillLayer), optionalI64(config.candidateBlockSize),
      optionalI64(config.candidateTopkBlocks),
      builder.getDenseI64ArrayAttr(collectMap(layers, &LayerSpec::kvSource)),
      builder.getDenseI64ArrayAttr(
          collectMap(layers, &LayerSpec::indexKSource)),
      builder.getDenseI64ArrayAttr(
          collectMap(layers, &LayerSpec::indexSource)));
  Block *body = &model.getBody().emplaceBlock();
  builder.setInsertionPointToEnd(body);
  for (const LayerSpec &spec : layers)
    buildLayer(builder, loc, spec);
  return module;
}

OwningOpRef<ModuleOp> v4a::importConfig(MLIRContext *context, StringRef json,
                                        Location loc, StringRef name,
                                        const LayerOptions &options) {
  ConfigError error;
  std::optional<ModelConfig> config =
      parseModelConfig(std::string_view(json.data(), json.size()), error);
  std::optional<std::vector<LayerSpec>> layers;
  if (config)
    layers = deriveLayers(*config, options, error);
  if (!layers) {
    emitError(loc) << error.str();
    return {};
  }
  OwningOpRef<ModuleOp> module =
      buildModelModule(context, loc, name, *config, *layers);
  if (failed(verify(*module)))
    return {};
  return module;
}
