//===- BuildSteps.cpp - one step function per sched_meta_key --------------===//
//
// Builds, next to each v4a.model, the functions a batched varlen step runs:
// per key a metadata function (computed once per step and shared by every
// layer of the key) and a step function per role of the key's layers (a
// layer that owns its compressor, one that shares another layer's caches or
// top-k, one that makes or uses candidate blocks). Layers of one role differ
// only in the buffers bound to the function's arguments; each argument names
// what the runtime binds to it in `v4a.bind`.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "core/TensorSpecs.h"
#include "dialects/V4A/IR/V4AOps.h"
#include "lib/Plan/ModelPlan.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>

namespace v4a {
#define GEN_PASS_DEF_BUILDSTEPS
#include "passes/Passes.h.inc"
} // namespace v4a

using namespace mlir;
using namespace v4a;

namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;
constexpr llvm::StringLiteral kBindAttr = "v4a.bind";
constexpr llvm::StringLiteral kStepAttr = "v4a.step";
constexpr llvm::StringLiteral kMetaAttr = "v4a.meta";

/// The role of a layer inside its key: what it computes itself and what it
/// takes from its sources.
struct Role {
  bool sharesKv = false;
  bool sharesTopk = false;
  bool makesCandidates = false;
  bool usesCandidates = false;

  static Role of(const LayerSpec &layer) {
    Role role;
    role.sharesKv = layer.compressRatio > 0 && layer.kvSource != layer.id;
    bool selects = layer.compressRatio > 0 && layer.indexTopk > 0;
    role.sharesTopk = selects && layer.indexSource != layer.id;
    role.makesCandidates =
        v4a::ownsTopk(layer) && layer.candidateSource == layer.id;
    role.usesCandidates = v4a::usesCandidates(layer);
    return role;
  }
  std::string suffix() const {
    std::string s;
    if (sharesKv)
      s += "_shares_kv";
    if (sharesTopk)
      s += "_shares_topk";
    if (makesCandidates)
      s += "_makes_candidates";
    if (usesCandidates)
      s += "_uses_candidates";
    return s;
  }
};

std::string metaName(const std::string &key) { return "meta_" + key; }
std::string stepName(const std::string &key, const Role &role) {
  return "step_" + key + role.suffix();
}

/// Collects a function's arguments with their bindings, then creates it.
class Signature {
public:
  void add(StringRef bind, Type type) {
    types.push_back(type);
    binds.push_back(bind.str());
  }
  func::FuncOp create(OpBuilder &b, Location loc, StringRef name,
                      TypeRange results, ArrayRef<std::string> resultBinds) {
    auto func =
        func::FuncOp::create(b, loc, name, b.getFunctionType(types, results));
    for (auto [i, bind] : llvm::enumerate(binds))
      func.setArgAttr(i, kBindAttr, b.getStringAttr(bind));
    for (auto [i, bind] : llvm::enumerate(resultBinds))
      func.setResultAttr(i, kBindAttr, b.getStringAttr(bind));
    Block *entry = func.addEntryBlock();
    for (auto [i, bind] : llvm::enumerate(binds))
      values[bind] = entry->getArgument(i);
    return func;
  }
  Value operator[](StringRef bind) const { return values.lookup(bind); }
  bool has(StringRef bind) const { return values.count(bind); }

private:
  SmallVector<Type> types;
  SmallVector<std::string> binds;
  llvm::StringMap<Value> values;
};

/// Builds the functions of one model.
class StepBuilder {
public:
  StepBuilder(ModelOp model, KVPlanAttr plan)
      : model(model), plan(plan), config(collectModelConfig(model)),
        layers(collectLayerInfo(model)), b(model.getContext()),
        loc(model.getLoc()), bf16(b.getBF16Type()), f32(b.getF32Type()),
        i32(b.getI32Type()), i64(b.getI64Type()) {}

  LogicalResult build(OpBuilder::InsertPoint at) {
    b.restoreInsertionPoint(at);
    std::map<std::string, const LayerSpec *> metas;
    std::map<std::string, const LayerSpec *> steps;
    for (const LayerSpec &layer : layers) {
      if (!layer.useSwa)
        return model.emitOpError()
               << "layer " << layer.id
               << " has no sliding window: step functions need use_swa";
      std::string key = keyOf(layer);
      metas.try_emplace(key, &layer);
      steps.try_emplace(stepName(key, Role::of(layer)), &layer);
    }
    // Functions in the order of the first layer that uses them.
    for (const LayerSpec &layer : layers) {
      std::string key = keyOf(layer);
      LayerOp op = layerOp(layer.id);
      op->setAttr(kStepAttr,
                  FlatSymbolRefAttr::get(b.getContext(),
                                         stepName(key, Role::of(layer))));
      op->setAttr(kMetaAttr,
                  FlatSymbolRefAttr::get(b.getContext(), metaName(key)));
      if (metas.count(key) && metas[key] == &layer &&
          failed(buildMeta(layer, key)))
        return failure();
      std::string step = stepName(key, Role::of(layer));
      if (steps[step] == &layer && failed(buildStep(layer, key, step)))
        return failure();
    }
    return success();
  }

private:
  LayerOp layerOp(int64_t id) {
    for (LayerOp op : model.getLayers())
      if (static_cast<int64_t>(op.getLayerId()) == id)
        return op;
    return {};
  }
  std::string keyOf(const LayerSpec &layer) {
    return layerOp(layer.id).getSchedMetaKey();
  }

  CacheBufferAttr buffer(int64_t layer, CacheComponent component) {
    for (Attribute attr : plan.getBuffers()) {
      auto buffer = cast<CacheBufferAttr>(attr);
      if (buffer.getLayer() == layer && buffer.getComponent() == component)
        return buffer;
    }
    return {};
  }
  /// Compressed rows and index keys are paged; a window ring or a state is
  /// one page per sequence.
  KVCacheType cacheType(CacheBufferAttr buffer) {
    bool paged = buffer.getComponent() == CacheComponent::Compressed ||
                 buffer.getComponent() == CacheComponent::IndexKeys;
    return KVCacheType::get(b.getContext(), buffer.getLayout(), buffer.getDim(),
                            paged ? plan.getPageSize() : buffer.getRows());
  }

  RankedTensorType tensor(ArrayRef<int64_t> shape, Type element) {
    return RankedTensorType::get(shape, element);
  }
  /// `value` in every element of a tensor shaped like `like` ([T, ...]).
  Value splat(Value like, TypedAttr value) {
    auto type = cast<RankedTensorType>(like.getType()).clone(value.getType());
    Value scalar = arith::ConstantOp::create(b, loc, value);
    Value tokens = tensor::DimOp::create(b, loc, like, 0);
    return tensor::SplatOp::create(b, loc, type, scalar, ValueRange{tokens});
  }

  //===--------------------------------------------------------------------===//
  // Metadata
  //===--------------------------------------------------------------------===//

  int64_t windowRows(const LayerSpec &layer) {
    return buffer(layer.id, CacheComponent::Window).getRows();
  }
  int64_t compressedSlotRows(const LayerSpec &layer) {
    return buffer(layer.kvSource, CacheComponent::Compressed).getRows();
  }

  LogicalResult buildMeta(const LayerSpec &layer, const std::string &key) {
    auto ids = tensor({kDyn}, i64);
    Signature sig;
    for (const char *bind : {"positions", "slots", "first", "last"})
      sig.add(bind, ids);
    SmallVector<Type> results = {tensor({kDyn, windowRows(layer)}, i32), ids};
    SmallVector<std::string> binds = {"window.attend", "window.store"};
    int64_t r = layer.compressRatio;
    if (r > 0) {
      results.append({ids, ids});
      binds.append({"compressed.base", "compressed.complete"});
    }
    if (r > 1) {
      results.push_back(ids);
      binds.push_back("compressed.starts");
    }
    OpBuilder::InsertionGuard guard(b);
    func::FuncOp func = sig.create(b, loc, metaName(key), results, binds);
    b.setInsertionPointToEnd(&func.front());
    auto window = StepWindowOp::create(
        b, loc, results[0], ids, sig["positions"], sig["slots"], sig["first"],
        sig["last"], windowRows(layer));
    SmallVector<Value> values = {window.getAttend(), window.getStore()};
    if (r > 0) {
      auto compressed =
          StepCompressedOp::create(b, loc, ids, ids, sig["positions"],
                                   sig["slots"], r, compressedSlotRows(layer));
      values.append({compressed.getBase(), compressed.getComplete()});
    }
    // Every layer of the key ropes its compressed rows at these positions:
    // computed once a step here, not once a layer.
    if (r > 1) {
      Value shift = splat(sig["positions"], b.getI64IntegerAttr(r - 1));
      values.push_back(arith::SubIOp::create(b, loc, sig["positions"], shift));
    }
    func::ReturnOp::create(b, loc, values);
    return success();
  }

  //===--------------------------------------------------------------------===//
  // Step
  //===--------------------------------------------------------------------===//

  /// Weight arguments as the checkpoint has them: fp8 projections come with
  /// their 128x128 block scales.
  void addWeights(Signature &sig, const LayerSpec &layer) {
    for (const TensorSpec &spec : layerTensorSpecs(config, layer)) {
      // wo_a runs as a bf16 GEMM on unquantized input in DeepSeek's
      // reference: an fp8 checkpoint's wo_a is bound as its exact bf16
      // product with the block scales.
      bool fp8 =
          spec.projection && config.fp8Weights && spec.name != "wo_a.weight";
      Type element = spec.f32 ? f32
                     : fp8    ? Type(b.getType<Float8E4M3FNType>())
                              : bf16;
      sig.add(spec.name, tensor(spec.shape, element));
      if (fp8) {
        SmallVector<int64_t> blocks;
        for (int64_t d : spec.shape)
          blocks.push_back(llvm::divideCeil(d, 128));
        sig.add(scaleTensorName(spec.name),
                tensor(blocks, b.getType<Float8E8M0FNUType>()));
      }
    }
  }

  /// The caches the layer reads or writes, by plan component; a consumer's
  /// buffers are the aliases the plan gives it.
  LogicalResult addCaches(Signature &sig, const LayerSpec &layer,
                          const Role &role) {
    auto add = [&](CacheComponent component,
                   const char *bind) -> LogicalResult {
      CacheBufferAttr found = buffer(layer.id, component);
      if (!found)
        return model.emitOpError()
               << "the cache plan has no " << stringifyCacheComponent(component)
               << " buffer for layer " << layer.id;
      sig.add(bind, cacheType(found));
      return success();
    };
    if (failed(add(CacheComponent::Window, "cache.window")))
      return failure();
    int64_t r = layer.compressRatio;
    if (r == 0)
      return success();
    if (failed(add(CacheComponent::Compressed, "cache.compressed")))
      return failure();
    if (!role.sharesKv && r > 1 &&
        failed(add(CacheComponent::CompressorState, "cache.compressor_state")))
      return failure();
    bool writesKeys = !role.sharesKv && layer.indexTopk > 0;
    bool readsKeys = layer.indexTopk > 0 && !role.sharesTopk;
    if ((writesKeys || readsKeys) &&
        failed(add(CacheComponent::IndexKeys, "cache.index_keys")))
      return failure();
    if (writesKeys && hasIndexerCompressor(layer) &&
        failed(add(CacheComponent::IndexerState, "cache.indexer_state")))
      return failure();
    return success();
  }

  LogicalResult buildStep(const LayerSpec &layer, const std::string &key,
                          const std::string &name) {
    Role role = Role::of(layer);
    int64_t r = layer.compressRatio, k = layer.indexTopk;
    auto ids = tensor({kDyn}, i64);
    Signature sig;
    sig.add("x", tensor({kDyn, config.hiddenSize}, bf16));
    sig.add("positions", ids);
    sig.add("slots", ids);
    sig.add("window.attend", tensor({kDyn, windowRows(layer)}, i32));
    sig.add("window.store", ids);
    if (r > 0) {
      sig.add("compressed.base", ids);
      sig.add("compressed.complete", ids);
    }
    if (r > 1 && !role.sharesKv)
      sig.add("compressed.starts", ids);
    // The widths of the visible rows and the indexer's scores follow from a
    // bound the host knows, not from the positions on the device.
    if (r > 0 && !role.sharesTopk)
      sig.add("context", tensor({1}, i64));
    if (role.sharesTopk)
      sig.add("topk", tensor({kDyn, k}, i32));
    if (role.usesCandidates)
      sig.add("candidates", tensor({kDyn, candidateBlocks()}, i32));
    addWeights(sig, layer);
    if (failed(addCaches(sig, layer, role)))
      return failure();

    SmallVector<Type> results = {tensor({kDyn, config.hiddenSize}, bf16)};
    SmallVector<std::string> binds = {"y"};
    bool ownsTopk = r > 0 && k > 0 && !role.sharesTopk;
    if (ownsTopk) {
      results.push_back(tensor({kDyn, k}, i32));
      binds.push_back("topk");
    }
    if (role.makesCandidates) {
      results.push_back(tensor({kDyn, candidateBlocks()}, i32));
      binds.push_back("candidates");
    }
    OpBuilder::InsertionGuard guard(b);
    func::FuncOp func = sig.create(b, loc, name, results, binds);
    func->setAttr("v4a.sched_meta_key", b.getStringAttr(key));
    func->setAttr(kMetaAttr,
                  FlatSymbolRefAttr::get(b.getContext(), metaName(key)));
    b.setInsertionPointToEnd(&func.front());
    return StepBody(*this, sig, layer, role).emit();
  }

  int64_t candidateBlocks() { return config.candidateBlocks(); }

  /// The ops of one step, in the order the specification runs them.
  struct StepBody {
    StepBuilder &s;
    OpBuilder &b;
    Signature &sig;
    const LayerSpec &layer;
    Role role;
    Location loc;
    const ModelConfig &c;
    int64_t d, rope, r;

    StepBody(StepBuilder &s, Signature &sig, const LayerSpec &layer, Role role)
        : s(s), b(s.b), sig(sig), layer(layer), role(role), loc(s.loc),
          c(s.config), d(c.headDim), rope(c.qkRopeHeadDim),
          r(layer.compressRatio) {}

    Value arg(StringRef bind) { return sig[bind]; }

    Value linear(Value input, StringRef weight, Type element) {
      Value w = arg(weight);
      std::string scaleName = scaleTensorName(weight.str());
      Value scale = sig.has(scaleName) ? arg(scaleName) : Value();
      int64_t rows = cast<RankedTensorType>(w.getType()).getDimSize(0);
      return LinearOp::create(b, loc, s.tensor({kDyn, rows}, element), input, w,
                              scale);
    }
    Value rmsNorm(Value input, Value weight) {
      return RMSNormOp::create(b, loc, input.getType(), input, weight,
                               b.getF64FloatAttr(c.rmsNormEps));
    }
    Value ropeOf(Value input, Value positions, bool inverse = false) {
      bool compressed = r > 0;
      YarnAttr yarn = compressed ? s.model.getRopeScalingAttr() : YarnAttr();
      double theta = compressed ? c.compressRopeTheta : c.ropeTheta;
      return RoPEOp::create(b, loc, input.getType(), input, positions,
                            b.getI64IntegerAttr(rope), b.getF64FloatAttr(theta),
                            inverse ? b.getUnitAttr() : UnitAttr(), yarn);
    }
    Value quantKv(Value input) {
      return ActQuantOp::create(
          b, loc, input.getType(), input, QuantFormat::E4M3, uint64_t(64),
          b.getI64IntegerAttr(d - rope), /*pow2_scale=*/true);
    }
    Value quantFp4(Value input) {
      return ActQuantOp::create(b, loc, input.getType(), input,
                                QuantFormat::E2M1, uint64_t(32), IntegerAttr(),
                                /*pow2_scale=*/true);
    }
    Value hadamard(Value input) {
      return HadamardOp::create(b, loc, input.getType(), input);
    }
    Value toBf16(Value input) {
      auto type = cast<RankedTensorType>(input.getType());
      return arith::TruncFOp::create(b, loc, type.clone(s.bf16), input);
    }
    Value heads(Value rows, int64_t count, int64_t width) {
      return tensor::ExpandShapeOp::create(
          b, loc, s.tensor({kDyn, count, width}, s.bf16), rows,
          ArrayRef<ReassociationIndices>{{0}, {1, 2}});
    }
    Value columns(Value rows, int64_t offset, int64_t width) {
      Value tokens = tensor::DimOp::create(b, loc, rows, 0);
      SmallVector<OpFoldResult> offsets = {b.getIndexAttr(0),
                                           b.getIndexAttr(offset)};
      SmallVector<OpFoldResult> sizes = {tokens, b.getIndexAttr(width)};
      SmallVector<OpFoldResult> strides(2, b.getIndexAttr(1));
      return tensor::ExtractSliceOp::create(b, loc,
                                            s.tensor({kDyn, width}, s.f32),
                                            rows, offsets, sizes, strides);
    }
    /// The position of the first token of the group each token completes:
    /// the token's own when a group is one token.
    Value groupStarts() {
      return r == 1 ? arg("positions") : arg("compressed.starts");
    }
    Value compressor(Value kv, Value score, StringRef ape, StringRef state,
                     int64_t ratio, int64_t width) {
      CacheBufferAttr buffer =
          s.buffer(layer.id, state == "cache.indexer_state"
                                 ? CacheComponent::IndexerState
                                 : CacheComponent::CompressorState);
      return CompressorOp::create(b, loc, s.tensor({kDyn, width}, s.f32), kv,
                                  score, arg(ape), arg("positions"),
                                  arg("slots"), arg(state), ratio,
                                  compressorOverlaps(ratio), buffer.getRows());
    }
    /// RoPE at the group's first token, Hadamard, fp4, then the store.
    void storeIndexKeys(Value keys, Value starts) {
      Value rotated = hadamard(ropeOf(keys, starts));
      CacheStoreOp::create(b, loc, arg("cache.index_keys"), quantFp4(rotated),
                           arg("compressed.complete"));
    }

    /// Compressed entries of the tokens that complete a group: pooled,
    /// normalized, rotated, quantized and stored; index keys likewise.
    void compress() {
      Value x = arg("x"), entries;
      if (r == 1) {
        entries = linear(x, "compressor.wkv.weight", s.bf16);
      } else if (!compressorIsGated(r)) {
        // Operands are built one statement at a time so that the IR does not
        // depend on the C++ compiler's argument evaluation order.
        Value both = linear(x, "compressor.wkv.weight", s.f32);
        Value kv = columns(both, d, d);
        Value score = columns(both, 0, d);
        entries = compressor(kv, score, "compressor.ape",
                             "cache.compressor_state", r, d);
      } else {
        Value kv = linear(x, "compressor.wkv.weight", s.f32);
        Value score = linear(x, "compressor.wgate.weight", s.f32);
        entries = compressor(kv, score, "compressor.ape",
                             "cache.compressor_state", r, d);
      }
      // Pooled entries are rounded to bf16 before the norm.
      if (r > 1)
        entries = toBf16(entries);
      Value latent = rmsNorm(entries, arg("compressor.norm.weight"));
      Value starts = groupStarts();
      CacheStoreOp::create(b, loc, arg("cache.compressed"),
                           quantKv(ropeOf(latent, starts)),
                           arg("compressed.complete"));
      if (layer.indexTopk == 0)
        return;
      if (!hasIndexerCompressor(layer)) {
        Value keys = linear(latent, "indexer.k_proj.weight", s.bf16);
        storeIndexKeys(rmsNorm(keys, arg("indexer.k_norm.weight")), starts);
        return;
      }
      int64_t di = c.indexHeadDim;
      Value kv = linear(x, "indexer.compressor.wkv.weight", s.f32);
      Value score = linear(x, "indexer.compressor.wgate.weight", s.f32);
      Value pooled = compressor(kv, score, "indexer.compressor.ape",
                                "cache.indexer_state", 4, di);
      storeIndexKeys(
          rmsNorm(toBf16(pooled), arg("indexer.compressor.norm.weight")),
          starts);
    }

    /// The lightning indexer: the top-k compressed rows of every token (and
    /// the candidate blocks for the layers that reuse them).
    std::pair<Value, Value> select(Value qr) {
      int64_t hi = c.indexNHeads, di = c.indexHeadDim, k = layer.indexTopk;
      Value qi = linear(qr, "indexer.wq_b.weight", s.bf16);
      qi = quantFp4(hadamard(ropeOf(heads(qi, hi, di), arg("positions"))));
      Value w = linear(arg("x"), "indexer.weights_proj.weight", s.bf16);
      auto wType = s.tensor({kDyn, hi}, s.f32);
      Value wide = arith::ExtFOp::create(b, loc, wType, w);
      double scale = 1.0 / std::sqrt(static_cast<double>(di * hi));
      Value scaled = arith::MulFOp::create(
          b, loc, wide, s.splat(wide, b.getF32FloatAttr(scale)));
      Value scores = CacheIndexerScoreOp::create(
          b, loc, s.tensor({kDyn, kDyn}, s.f32), qi, arg("cache.index_keys"),
          scaled, arg("positions"), arg("compressed.base"), arg("context"), r);
      auto topkType = s.tensor({kDyn, k}, s.i32);
      if (role.makesCandidates) {
        auto blocks = BlockTopKOp::create(
            b, loc, s.tensor({kDyn, s.candidateBlocks()}, s.i32), scores,
            c.candidateRows(), s.candidateBlocks());
        return {
            TopKOp::create(b, loc, topkType, scores, Value(), k, IntegerAttr()),
            blocks};
      }
      if (role.usesCandidates)
        return {TopKOp::create(b, loc, topkType, scores, arg("candidates"), k,
                               b.getI64IntegerAttr(c.candidateRows())),
                Value()};
      return {
          TopKOp::create(b, loc, topkType, scores, Value(), k, IntegerAttr()),
          Value()};
    }

    LogicalResult emit() {
      Value x = arg("x"), positions = arg("positions");
      int64_t h = c.numAttentionHeads;
      Value qr =
          rmsNorm(linear(x, "wq_a.weight", s.bf16), arg("q_norm.weight"));
      Value q = heads(linear(qr, "wq_b.weight", s.bf16), h, d);
      q = ropeOf(RMSNormOp::create(b, loc, q.getType(), q, Value(),
                                   b.getF64FloatAttr(c.rmsNormEps)),
                 positions);
      Value kv = quantKv(ropeOf(
          rmsNorm(linear(x, "wkv.weight", s.bf16), arg("kv_norm.weight")),
          positions));

      if (r > 0 && !role.sharesKv)
        compress();
      Value selected, candidates;
      // Every metadata output is [T, ...]; this width follows from the
      // step's context bound, so the step computes it.
      if (r > 0 && layer.indexTopk == 0)
        selected = VisibleRowsOp::create(b, loc, s.tensor({kDyn, kDyn}, s.i32),
                                         positions, arg("context"), r);
      else if (role.sharesTopk)
        selected = arg("topk");
      else if (r > 0)
        std::tie(selected, candidates) = select(qr);

      Value sink = arg("attn_sink");
      double scale = 1.0 / std::sqrt(static_cast<double>(d));
      Value o = CacheAttentionOp::create(
          b, loc, q.getType(), q, kv, arg("cache.window"), arg("window.attend"),
          r > 0 ? arg("cache.compressed") : Value(), selected,
          r > 0 ? arg("compressed.base") : Value(), sink,
          b.getF64FloatAttr(scale));
      // After the attention: a later token of a long prefill lands on ring
      // rows that earlier tokens of the same step still read.
      CacheStoreOp::create(b, loc, arg("cache.window"), kv,
                           arg("window.store"));
      Value y = GroupedOutputOp::create(
          b, loc, s.tensor({kDyn, c.hiddenSize}, s.bf16),
          ropeOf(o, positions, /*inverse=*/true), arg("wo_a.weight"),
          sig.has("wo_a.scale") ? arg("wo_a.scale") : Value(),
          arg("wo_b.weight"),
          sig.has("wo_b.scale") ? arg("wo_b.scale") : Value(), c.oGroups);
      SmallVector<Value> results = {y};
      if (r > 0 && layer.indexTopk > 0 && !role.sharesTopk)
        results.push_back(selected);
      if (candidates)
        results.push_back(candidates);
      func::ReturnOp::create(b, loc, results);
      return success();
    }
  };

  ModelOp model;
  KVPlanAttr plan;
  ModelConfig config;
  std::vector<LayerSpec> layers;
  OpBuilder b;
  Location loc;
  Type bf16, f32, i32, i64;
};

struct BuildStepsPass : public v4a::impl::BuildStepsBase<BuildStepsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (ModelOp model : llvm::to_vector(module.getOps<ModelOp>())) {
      auto plan = model->getAttrOfType<KVPlanAttr>(kKVPlanAttrName);
      if (!plan) {
        model.emitOpError() << "has no cache plan: run v4a-plan-kv first";
        return signalPassFailure();
      }
      OpBuilder b(model.getContext());
      b.setInsertionPointAfter(model);
      if (failed(StepBuilder(model, plan).build(b.saveInsertionPoint())))
        return signalPassFailure();
    }
  }
};

} // namespace
