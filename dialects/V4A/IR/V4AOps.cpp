//===- V4AOps.cpp - v4a operations ----------------------------------------===//

#include "dialects/V4A/IR/V4AOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace v4a;

#define GET_OP_CLASSES
#include "dialects/V4A/IR/V4AOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Shape helpers
//===----------------------------------------------------------------------===//

static int64_t dimOf(Value value, unsigned dim) {
  return cast<ShapedType>(value.getType()).getDimSize(dim);
}

static int64_t lastDimOf(Value value) {
  auto type = cast<ShapedType>(value.getType());
  return type.getDimSize(type.getRank() - 1);
}

/// Fails with a message naming both sides when two extents are known and
/// differ; dynamic extents are checked at run time instead.
static LogicalResult expectSameExtent(Operation *op, int64_t actual,
                                      StringRef actualName, int64_t expected,
                                      StringRef expectedName) {
  if (ShapedType::isDynamic(actual) || ShapedType::isDynamic(expected) ||
      actual == expected)
    return success();
  return op->emitOpError() << actualName << " (" << actual << ") must equal "
                           << expectedName << " (" << expected << ")";
}

static bool isFp8Weight(Value weight) {
  return isa<Float8E4M3FNType>(getElementTypeOrSelf(weight.getType()));
}

/// fp8 weights carry one scale per 128x128 block; other weights carry none.
static LogicalResult verifyBlockScale(Operation *op, StringRef weightName,
                                      Value weight, Value scale) {
  if (!isFp8Weight(weight)) {
    if (scale)
      return op->emitOpError() << "takes a scale for '" << weightName
                               << "' only when it is f8E4M3FN";
    return success();
  }
  if (!scale)
    return op->emitOpError() << "f8E4M3FN weight '" << weightName
                             << "' needs a block scale operand";
  int64_t rows = dimOf(weight, 0), cols = dimOf(weight, 1);
  if (!ShapedType::isDynamic(rows) &&
      failed(expectSameExtent(op, dimOf(scale, 0), "scale rows",
                              llvm::divideCeil(rows, 128),
                              "ceil(weight rows / 128)")))
    return failure();
  if (!ShapedType::isDynamic(cols) &&
      failed(expectSameExtent(op, dimOf(scale, 1), "scale columns",
                              llvm::divideCeil(cols, 128),
                              "ceil(weight columns / 128)")))
    return failure();
  return success();
}

static LogicalResult verifyPositionsMatchRows(Operation *op, Value positions,
                                              Value rows, StringRef rowsName) {
  return expectSameExtent(op, dimOf(positions, 0), "number of positions",
                          dimOf(rows, 0), rowsName);
}

//===----------------------------------------------------------------------===//
// ModelOp
//===----------------------------------------------------------------------===//

LogicalResult ModelOp::verify() {
  int64_t headDim = getHeadDim(), ropeDim = getQkRopeHeadDim();
  if (ropeDim >= headDim)
    return emitOpError() << "qk_rope_head_dim (" << ropeDim
                         << ") must be smaller than head_dim (" << headDim
                         << ")";
  // R == Di is legal: the whole index head is rotated.
  if (ropeDim > static_cast<int64_t>(getIndexHeadDim()))
    return emitOpError() << "qk_rope_head_dim (" << ropeDim
                         << ") must be at most index_head_dim ("
                         << getIndexHeadDim() << ")";
  int64_t width;
  if (__builtin_mul_overflow(static_cast<int64_t>(getNumAttentionHeads()),
                             headDim, &width))
    return emitOpError() << "num_attention_heads * head_dim overflows";
  if (width % getOGroups() != 0)
    return emitOpError() << "num_attention_heads * head_dim (" << width
                         << ") must be divisible by o_groups (" << getOGroups()
                         << ")";
  if (!llvm::isPowerOf2_64(getIndexHeadDim()))
    return emitOpError() << "index_head_dim (" << getIndexHeadDim()
                         << ") must be a power of two (Hadamard rotation)";
  // act_quant works on whole blocks: 64 of the first D-R dims (fp8 KV), 32
  // of the index head (fp4).
  if ((headDim - ropeDim) % 64 != 0)
    return emitOpError() << "head_dim - qk_rope_head_dim (" << headDim - ropeDim
                         << ") must be a multiple of 64 (fp8 KV blocks)";
  if (getIndexHeadDim() % 32 != 0)
    return emitOpError() << "index_head_dim (" << getIndexHeadDim()
                         << ") must be a multiple of 32 (fp4 index blocks)";
  if (getCandidateBlockSize().has_value() !=
      getCandidateTopkBlocks().has_value())
    return emitOpError() << "candidate_block_size and candidate_topk_blocks "
                            "must be given together";
  if (auto boundary = getNPrefillLayer();
      boundary && *boundary > getNumHiddenLayers())
    return emitOpError() << "n_prefill_layer (" << *boundary
                         << ") must be at most num_hidden_layers ("
                         << getNumHiddenLayers() << ")";

  int64_t numLayers = getNumMappedLayers();
  if (numLayers < static_cast<int64_t>(getNumHiddenLayers()))
    return emitOpError() << "layer_kv_map has " << numLayers
                         << " entries, expected at least num_hidden_layers ("
                         << getNumHiddenLayers() << ")";
  for (auto [name, map] :
       {std::pair<StringRef, ArrayRef<int64_t>>{"layer_index_k_map",
                                                getLayerIndexKMap()},
        {"layer_index_module_map", getLayerIndexModuleMap()}})
    if (static_cast<int64_t>(map.size()) != numLayers)
      return emitOpError() << name << " has " << map.size()
                           << " entries, expected " << numLayers
                           << " (one per layer, as layer_kv_map)";
  return success();
}

/// The sharing source of a layer must itself be a layer of the model.
static LogicalResult verifySourceIsLayer(LayerOp layer, StringRef mapName,
                                         int64_t source, int64_t numLayers) {
  if (source >= 0 && source < numLayers)
    return success();
  return layer.emitOpError()
         << "layer " << layer.getLayerId() << ": " << mapName << " source "
         << source << " is not a layer (valid: 0.." << numLayers - 1 << ")";
}

static LogicalResult verifyLayerAgreesWithMap(LayerOp layer, StringRef field,
                                              int64_t value, StringRef mapName,
                                              ArrayRef<int64_t> map) {
  int64_t mapped = map[layer.getLayerId()];
  if (value == mapped)
    return success();
  return layer.emitOpError()
         << "layer " << layer.getLayerId() << ": " << field << " " << value
         << " disagrees with " << mapName << " entry " << mapped;
}

LogicalResult ModelOp::verifyRegions() {
  int64_t numLayers = getNumMappedLayers();
  int64_t expectedId = 0, numMtp = 0;
  for (Operation &op : getBody().front()) {
    auto layer = dyn_cast<LayerOp>(op);
    if (!layer)
      return op.emitOpError() << "is not allowed in a v4a.model body (only "
                                 "v4a.layer)";
    if (static_cast<int64_t>(layer.getLayerId()) != expectedId)
      return layer.emitOpError()
             << "has id " << layer.getLayerId() << ", expected " << expectedId
             << " (layers are numbered in order from 0)";
    ++expectedId;
    if (layer.getIsMtp())
      ++numMtp;
    else if (numMtp > 0)
      return layer.emitOpError() << "layer " << layer.getLayerId()
                                 << ": attention layers must precede MTP "
                                    "layers";
    if (layer.getIndexTopk() > getIndexTopk())
      return layer.emitOpError()
             << "layer " << layer.getLayerId() << ": index_topk "
             << layer.getIndexTopk() << " exceeds the model's index_topk ("
             << getIndexTopk() << ")";
    for (auto [name, source] :
         {std::pair<StringRef, int64_t>{"kv", layer.getKvSource()},
          {"index", layer.getIndexSource()}})
      if (failed(verifySourceIsLayer(layer, name, source, numLayers)))
        return failure();
    // I64Attr getters return the bits unsigned; -1 means "no candidate".
    auto candidate = static_cast<int64_t>(layer.getCandidateSource());
    if (candidate >= 0 &&
        failed(verifySourceIsLayer(layer, "candidate", candidate, numLayers)))
      return failure();
  }
  if (expectedId != numLayers)
    return emitOpError() << "holds " << expectedId
                         << " layers but the sharing maps cover " << numLayers;
  if (numLayers - numMtp != static_cast<int64_t>(getNumHiddenLayers()))
    return emitOpError() << "holds " << numLayers - numMtp
                         << " attention layers, expected num_hidden_layers ("
                         << getNumHiddenLayers() << ")";
  for (LayerOp layer : getLayers()) {
    if (layer.getHasPackedKv() && getQkRopeHeadDim() != 64)
      return layer.emitOpError()
             << "layer " << layer.getLayerId()
             << ": packed_kv (fp8 MODEL1) stores exactly 64 bf16 rope dims, "
                "but qk_rope_head_dim is "
             << getQkRopeHeadDim();
    if (failed(verifyLayerAgreesWithMap(layer, "kv_source", layer.getKvSource(),
                                        "layer_kv_map", getLayerKvMap())) ||
        failed(verifyLayerAgreesWithMap(
            layer, "index_source", layer.getIndexSource(),
            "layer_index_module_map", getLayerIndexModuleMap())))
      return failure();
    for (int64_t source : {getLayerKvMap()[layer.getLayerId()],
                           getLayerIndexKMap()[layer.getLayerId()],
                           getLayerIndexModuleMap()[layer.getLayerId()]})
      if (failed(verifySourceIsLayer(layer, "map", source, numLayers)))
        return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// LayerOp
//===----------------------------------------------------------------------===//

LogicalResult LayerOp::verify() {
  if (getIndexTopk() > 0 && getCompressRatio() == 0)
    return emitOpError() << "layer " << getLayerId() << ": index_topk "
                         << getIndexTopk()
                         << " needs compressed rows to select (compress "
                            "ratio > 0), or index_topk 0";
  if (getHasPackedKv() && getCompressRatio() == 0)
    return emitOpError() << "layer " << getLayerId()
                         << ": packed_kv needs a compressed cache (compress "
                            "ratio > 0)";
  return success();
}

std::string LayerOp::getSchedMetaKey() {
  return llvm::formatv("{0}_{1}_{2}_{3}", getCompressRatio(),
                       getHasPackedKv() ? 1 : 0, getUseSwa() ? 1 : 0,
                       getIndexTopk())
      .str();
}

//===----------------------------------------------------------------------===//
// Compute ops
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::verify() {
  if (failed(expectSameExtent(*this, dimOf(getInput(), 1), "input width",
                              dimOf(getWeight(), 1), "weight columns")) ||
      failed(expectSameExtent(*this, dimOf(getResult(), 0), "result rows",
                              dimOf(getInput(), 0), "input rows")) ||
      failed(expectSameExtent(*this, dimOf(getResult(), 1), "result width",
                              dimOf(getWeight(), 0), "weight rows")))
    return failure();
  if (getKBlock() && getScale())
    return emitOpError() << "takes k_block only with a bf16 or f32 weight "
                            "(an fp8 weight's blocks are its scales')";
  return verifyBlockScale(*this, "weight", getWeight(), getScale());
}

LogicalResult SplitColumnsOp::verify() {
  if (getParts().empty())
    return emitOpError() << "needs at least one part";
  Type input = getInput().getType().getElementType();
  int64_t width = 0;
  for (Value part : getParts()) {
    Type element = cast<ShapedType>(part.getType()).getElementType();
    if (input.isBF16() && !element.isBF16())
      return emitOpError() << "takes bf16 parts of a bf16 input, not "
                           << element;
    if (failed(expectSameExtent(*this, dimOf(part, 0), "part rows",
                                dimOf(getInput(), 0), "input rows")))
      return failure();
    int64_t columns = dimOf(part, 1);
    if (ShapedType::isDynamic(columns))
      return emitOpError() << "needs parts of a static width";
    width += columns;
  }
  return expectSameExtent(*this, width, "the parts' total width",
                          dimOf(getInput(), 1), "input width");
}

LogicalResult RMSNormOp::verify() {
  if (!getWeight())
    return success();
  return expectSameExtent(*this, dimOf(getWeight(), 0), "weight size",
                          lastDimOf(getInput()), "input's last dimension");
}

LogicalResult RoPEOp::verify() {
  auto type = cast<ShapedType>(getInput().getType());
  if (type.getRank() < 2)
    return emitOpError() << "input must have a row dimension and a feature "
                            "dimension";
  int64_t width = lastDimOf(getInput());
  if (!ShapedType::isDynamic(width) &&
      static_cast<int64_t>(getRopeDim()) > width)
    return emitOpError() << "rope_dim (" << getRopeDim()
                         << ") exceeds the vector width (" << width << ")";
  return verifyPositionsMatchRows(*this, getPositions(), getInput(),
                                  "input rows");
}

LogicalResult ActQuantOp::verify() {
  int64_t width = lastDimOf(getInput());
  int64_t quantDims = getQuantDims().value_or(width);
  if (ShapedType::isDynamic(quantDims))
    return success();
  if (!ShapedType::isDynamic(width) && quantDims > width)
    return emitOpError() << "quant_dims (" << quantDims
                         << ") exceeds the vector width (" << width << ")";
  if (quantDims % getBlockSize() != 0)
    return emitOpError() << "quantized width (" << quantDims
                         << ") must be a multiple of block_size ("
                         << getBlockSize() << ")";
  return success();
}

LogicalResult HadamardOp::verify() {
  int64_t width = lastDimOf(getInput());
  if (ShapedType::isDynamic(width) || !llvm::isPowerOf2_64(width))
    return emitOpError() << "needs a static power-of-two last dimension, got "
                         << (ShapedType::isDynamic(width)
                                 ? std::string("?")
                                 : std::to_string(width));
  return success();
}

/// Checks the projection width against the entry width D and the ape table.
static LogicalResult verifyCompressorShapes(Operation *op, Value kv, Value ape,
                                            int64_t ratio, bool overlap,
                                            int64_t entryWidth) {
  int64_t coff = overlap ? 2 : 1;
  int64_t width = dimOf(kv, 1);
  if (!ShapedType::isDynamic(width) && width % coff != 0)
    return op->emitOpError()
           << "projection width (" << width << ") must be even with overlap";
  if (failed(expectSameExtent(op, dimOf(ape, 0), "ape rows", ratio, "ratio")) ||
      failed(expectSameExtent(op, dimOf(ape, 1), "ape width", width,
                              "projection width")))
    return failure();
  if (!ShapedType::isDynamic(width))
    return expectSameExtent(op, entryWidth, "entry width", width / coff,
                            overlap ? "projection width / 2 (overlap)"
                                    : "projection width");
  return success();
}

LogicalResult CompressOp::verify() {
  if (failed(verifyCompressorShapes(*this, getKv(), getApe(), getRatio(),
                                    getOverlap(), dimOf(getResult(), 1))))
    return failure();
  int64_t tokens = dimOf(getKv(), 0);
  if (ShapedType::isDynamic(tokens))
    return success();
  return expectSameExtent(*this, dimOf(getResult(), 0), "result rows",
                          tokens / static_cast<int64_t>(getRatio()),
                          "tokens div ratio");
}

LogicalResult CompressStepOp::verify() {
  if (failed(verifyCompressorShapes(*this, getKv(), getApe(), getRatio(),
                                    getOverlap(), dimOf(getEntry(), 1))))
    return failure();
  int64_t coff = getOverlap() ? 2 : 1;
  int64_t batch = dimOf(getKv(), 0);
  if (failed(verifyPositionsMatchRows(*this, getPositions(), getKv(),
                                      "batch size")) ||
      failed(expectSameExtent(*this, dimOf(getStateKv(), 0), "state batch",
                              batch, "batch size")) ||
      failed(expectSameExtent(*this, dimOf(getStateKv(), 1), "state slots",
                              coff * static_cast<int64_t>(getRatio()),
                              getOverlap() ? "2 * ratio" : "ratio")) ||
      failed(expectSameExtent(*this, dimOf(getStateKv(), 2), "state width",
                              dimOf(getKv(), 1), "projection width")) ||
      failed(expectSameExtent(*this, dimOf(getEntry(), 0), "entry rows", batch,
                              "batch size")))
    return failure();
  return expectSameExtent(*this, dimOf(getEmitted(), 0), "emitted size", batch,
                          "batch size");
}

/// The indexer's queries [T, H, Di] against its key width, per-head weights
/// [T, H], positions and score rows.
static LogicalResult verifyIndexerQuery(Operation *op, Value q,
                                        int64_t keyWidth, StringRef keyName,
                                        Value weights, Value positions,
                                        Value scores) {
  if (failed(expectSameExtent(op, keyWidth, keyName, dimOf(q, 2),
                              "query head width")) ||
      failed(expectSameExtent(op, dimOf(weights, 0), "weight rows", dimOf(q, 0),
                              "query rows")) ||
      failed(expectSameExtent(op, dimOf(weights, 1), "weight heads",
                              dimOf(q, 1), "query heads")) ||
      failed(verifyPositionsMatchRows(op, positions, q, "query rows")))
    return failure();
  return expectSameExtent(op, dimOf(scores, 0), "score rows", dimOf(q, 0),
                          "query rows");
}

LogicalResult IndexerScoreOp::verify() {
  if (failed(verifyIndexerQuery(*this, getQuery(), dimOf(getKeys(), 1),
                                "key width", getWeights(), getPositions(),
                                getScores())))
    return failure();
  return expectSameExtent(*this, dimOf(getScores(), 1), "score columns",
                          dimOf(getKeys(), 0), "key rows");
}

LogicalResult TopKOp::verify() {
  if (getCandidates() && !getCandidateBlockSize().has_value())
    return emitOpError() << "candidates need candidate_block_size (8 or 16)";
  if (!getCandidates() && getCandidateBlockSize())
    return emitOpError() << "candidate_block_size needs candidates";
  if (getCandidates() && failed(expectSameExtent(
                             *this, dimOf(getCandidates(), 0), "candidate rows",
                             dimOf(getScores(), 0), "score rows")))
    return failure();
  if (failed(expectSameExtent(*this, dimOf(getIndices(), 0), "result rows",
                              dimOf(getScores(), 0), "score rows")))
    return failure();
  return expectSameExtent(*this, dimOf(getIndices(), 1), "result width", getK(),
                          "k");
}

LogicalResult BlockTopKOp::verify() {
  if (failed(expectSameExtent(*this, dimOf(getBlocks(), 0), "result rows",
                              dimOf(getScores(), 0), "score rows")))
    return failure();
  return expectSameExtent(*this, dimOf(getBlocks(), 1), "result width",
                          getNumBlocks(), "num_blocks");
}

LogicalResult ProjectIndexKeysOp::verify() {
  if (failed(expectSameExtent(*this, dimOf(getKProj(), 1), "k_proj columns",
                              dimOf(getLatent(), 1), "latent width")) ||
      failed(expectSameExtent(*this, dimOf(getKNorm(), 0), "k_norm size",
                              dimOf(getKProj(), 0), "k_proj rows")) ||
      failed(expectSameExtent(*this, dimOf(getKeys(), 0), "key rows",
                              dimOf(getLatent(), 0), "latent rows")))
    return failure();
  return expectSameExtent(*this, dimOf(getKeys(), 1), "key width",
                          dimOf(getKProj(), 0), "k_proj rows");
}

LogicalResult WindowStoreOp::verify() {
  if (failed(expectSameExtent(*this, dimOf(getRows(), 1), "row width",
                              dimOf(getRing(), 1), "ring width")))
    return failure();
  return verifyPositionsMatchRows(*this, getPositions(), getRows(),
                                  "number of rows");
}

LogicalResult WindowIndicesOp::verify() {
  if (failed(expectSameExtent(*this, dimOf(getIndices(), 0), "result rows",
                              dimOf(getPositions(), 0), "number of positions")))
    return failure();
  return expectSameExtent(*this, dimOf(getIndices(), 1), "result width",
                          getWindow(), "window");
}

LogicalResult CacheStoreOp::verify() {
  if (failed(expectSameExtent(*this, dimOf(getRows(), 1), "row width",
                              getCache().getType().getDim(), "cache dim")))
    return failure();
  return expectSameExtent(*this, dimOf(getRowIds(), 0), "number of row ids",
                          dimOf(getRows(), 0), "number of rows");
}

LogicalResult CacheGatherOp::verify() {
  if (failed(expectSameExtent(*this, dimOf(getResult(), 0), "result rows",
                              dimOf(getIndices(), 0), "index rows")) ||
      failed(expectSameExtent(*this, dimOf(getResult(), 1), "result slots",
                              dimOf(getIndices(), 1), "index width")))
    return failure();
  return expectSameExtent(*this, dimOf(getResult(), 2), "result width",
                          getCache().getType().getDim(), "cache dim");
}

LogicalResult SparseAttentionOp::verify() {
  Value q = getQuery();
  if (getResult().getType() != q.getType())
    return emitOpError() << "result type " << getResult().getType()
                         << " must equal the query type " << q.getType();
  if (failed(expectSameExtent(*this, dimOf(getKv(), 1), "kv width", dimOf(q, 2),
                              "query head width")) ||
      failed(expectSameExtent(*this, dimOf(getIndices(), 0), "index rows",
                              dimOf(q, 0), "query rows")))
    return failure();
  return expectSameExtent(*this, dimOf(getSink(), 0), "sink size", dimOf(q, 1),
                          "query heads");
}

LogicalResult GroupedOutputOp::verify() {
  int64_t groups = getGroups();
  int64_t heads = dimOf(getInput(), 1), headDim = dimOf(getInput(), 2);
  if (!ShapedType::isDynamic(heads) && !ShapedType::isDynamic(headDim)) {
    int64_t width;
    if (__builtin_mul_overflow(heads, headDim, &width))
      return emitOpError() << "heads * head_dim overflows";
    if (width % groups != 0)
      return emitOpError() << "heads * head_dim (" << width
                           << ") must be divisible by groups (" << groups
                           << ")";
    if (failed(expectSameExtent(*this, dimOf(getWoA(), 1), "wo_a columns",
                                width / groups, "heads * head_dim / groups")))
      return failure();
  }
  int64_t loraRows = dimOf(getWoA(), 0);
  if (!ShapedType::isDynamic(loraRows) && loraRows % groups != 0)
    return emitOpError() << "wo_a rows (" << loraRows
                         << ") must be divisible by groups (" << groups << ")";
  if (failed(expectSameExtent(*this, dimOf(getResult(), 0), "result rows",
                              dimOf(getInput(), 0), "input rows")) ||
      failed(verifyBlockScale(*this, "wo_a", getWoA(), getWoAScale())))
    return failure();
  if (!getWoB()) {
    if (getWoBScale())
      return emitOpError() << "takes a wo_b scale only with wo_b";
    if (!getType().getElementType().isBF16())
      return emitOpError() << "without wo_b gives wo_a's bf16 product, not "
                           << getType().getElementType();
    return expectSameExtent(*this, dimOf(getResult(), 1), "result width",
                            loraRows, "wo_a rows");
  }
  if (failed(expectSameExtent(*this, dimOf(getWoB(), 1), "wo_b columns",
                              loraRows, "wo_a rows")) ||
      failed(expectSameExtent(*this, dimOf(getResult(), 1), "result width",
                              dimOf(getWoB(), 0), "wo_b rows")))
    return failure();
  return verifyBlockScale(*this, "wo_b", getWoB(), getWoBScale());
}

//===----------------------------------------------------------------------===//
// Batched step ops
//===----------------------------------------------------------------------===//

LogicalResult StepWindowOp::verify() {
  int64_t tokens = dimOf(getPositions(), 0);
  for (auto [value, name] :
       {std::pair<Value, StringRef>{getSlots(), "number of slots"},
        {getFirst(), "number of first rows"},
        {getLast(), "number of last rows"},
        {getStore(), "number of store rows"},
        {getAttend(), "attend rows"}})
    if (failed(expectSameExtent(*this, dimOf(value, 0), name, tokens,
                                "number of positions")))
      return failure();
  return expectSameExtent(*this, dimOf(getAttend(), 1), "attend width",
                          getWindow(), "window");
}

LogicalResult CompressorOp::verify() {
  if (failed(verifyCompressorShapes(*this, getKv(), getApe(), getRatio(),
                                    getOverlap(), dimOf(getEntries(), 1))) ||
      failed(verifyPositionsMatchRows(*this, getPositions(), getKv(),
                                      "number of tokens")) ||
      failed(verifyPositionsMatchRows(*this, getSlots(), getKv(),
                                      "number of tokens")))
    return failure();
  // The state holds the kv and the score slots of one sequence side by side.
  return expectSameExtent(*this, getState().getType().getDim(), "state dim",
                          2 * dimOf(getKv(), 1), "2 * projection width");
}

LogicalResult CacheIndexerScoreOp::verify() {
  if (failed(
          verifyPositionsMatchRows(*this, getBase(), getQuery(), "query rows")))
    return failure();
  return verifyIndexerQuery(*this, getQuery(), getKeys().getType().getDim(),
                            "key dim", getWeights(), getPositions(),
                            getScores());
}

LogicalResult CacheAttentionOp::verify() {
  Value q = getQuery();
  if (getResult().getType() != q.getType())
    return emitOpError() << "result type " << getResult().getType()
                         << " must equal the query type " << q.getType();
  int64_t width = dimOf(q, 2);
  if (failed(expectSameExtent(*this, dimOf(getKv(), 1), "kv width", width,
                              "query head width")) ||
      failed(expectSameExtent(*this, getWindow().getType().getDim(),
                              "window dim", width, "query head width")) ||
      failed(expectSameExtent(*this, dimOf(getWindowRows(), 0),
                              "window index rows", dimOf(q, 0),
                              "query rows")) ||
      failed(expectSameExtent(*this, dimOf(getSink(), 0), "sink size",
                              dimOf(q, 1), "query heads")))
    return failure();
  if (!getCompressed())
    return success();
  if (failed(expectSameExtent(*this, getCompressed().getType().getDim(),
                              "compressed dim", width, "query head width")) ||
      failed(expectSameExtent(*this, dimOf(getCompressedRows(), 0),
                              "compressed index rows", dimOf(q, 0),
                              "query rows")))
    return failure();
  return expectSameExtent(*this, dimOf(getBase(), 0), "number of bases",
                          dimOf(q, 0), "query rows");
}

//===----------------------------------------------------------------------===//
// FusedOp
//===----------------------------------------------------------------------===//

SmallVector<Operation *> FusedOp::inlineBody(RewriterBase &rewriter) {
  Block &body = getBody().front();
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  auto yield = cast<YieldOp>(body.getTerminator());
  SmallVector<Value> results(yield.getValues());
  rewriter.setInsertionPoint(*this);
  rewriter.inlineBlockBefore(&body, *this, getInputs());
  rewriter.eraseOp(yield);
  rewriter.replaceOp(*this, results);
  return ops;
}

LogicalResult FusedOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.getArgumentTypes() != getInputs().getTypes())
    return emitOpError() << "block argument types must equal the operand types";
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError() << "yielded types must equal the result types";
  return success();
}

//===----------------------------------------------------------------------===//
// Step programs
//===----------------------------------------------------------------------===//

static LogicalResult expectFunction(Operation *op, FlatSymbolRefAttr name,
                                    SymbolTableCollection &symbols) {
  if (symbols.lookupNearestSymbolFrom(op, name))
    return success();
  return op->emitOpError() << "names " << name << ", which is not a symbol";
}

LogicalResult RunMetaOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return expectFunction(*this, getFunctionAttr(), symbols);
}

LogicalResult RunStepOp::verifySymbolUses(SymbolTableCollection &symbols) {
  if (failed(expectFunction(*this, getFunctionAttr(), symbols)))
    return failure();
  Operation *function =
      symbols.lookupNearestSymbolFrom(*this, getFunctionAttr());
  auto meta = function->getAttrOfType<FlatSymbolRefAttr>("v4a.meta");
  if (!meta)
    return success();
  for (Operation *op = getOperation()->getPrevNode(); op;
       op = op->getPrevNode())
    if (auto run = dyn_cast<RunMetaOp>(op);
        run && run.getFunctionAttr() == meta)
      return success();
  return emitOpError() << "runs " << getFunctionAttr()
                       << " before its metadata " << meta
                       << " is computed in this program";
}
