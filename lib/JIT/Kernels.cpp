//===- Kernels.cpp - the CPU kernels a model needs ------------------------===//

#include "lib/JIT/Kernels.h"

#include "dialects/V4A/IR/V4ADialect.h"
#include "dialects/V4A/IR/V4AOps.h"
#include "lib/JIT/CpuJit.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>

using namespace mlir;
using llvm::formatv;

namespace v4a::jit {

namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;

/// One buffer argument: its element type and shape (dynamic dims as kDyn).
struct Arg {
  Type element;
  SmallVector<int64_t> shape;

  MemRefType memref() const { return MemRefType::get(shape, element); }
  RankedTensorType tensor(Type elementType) const {
    return RankedTensorType::get(shape, elementType);
  }
  RankedTensorType tensor() const { return tensor(element); }
};

/// A number as part of a symbol: the shortest text that reads back as exactly
/// `value`, with '.' as 'p' and '-' as 'm' (1e-06 -> 1em06, 0.5 -> 0p5).
std::string symbolNumber(double value) {
  char text[32];
  if (value == std::floor(value) && std::fabs(value) < 1e15)
    std::snprintf(text, sizeof(text), "%.0f", value);
  else
    for (int digits = 1; digits <= 17; ++digits) {
      std::snprintf(text, sizeof(text), "%.*g", digits, value);
      if (std::strtod(text, nullptr) == value)
        break;
    }
  std::string symbol;
  for (const char *c = text; *c; ++c)
    if (*c == '.')
      symbol += 'p';
    else if (*c == '-')
      symbol += 'm';
    else if (*c != '+')
      symbol += *c;
  return symbol;
}

/// Computes a kernel's results from its inputs as tensors.
using BodyFn = std::function<SmallVector<Value>(OpBuilder &, Location,
                                                ArrayRef<Value> inputs)>;

} // namespace

struct KernelModule::Impl {
  std::unique_ptr<MLIRContext> context = createKernelContext();
  OwningOpRef<ModuleOp> module =
      ModuleOp::create(UnknownLoc::get(context.get()));
  std::map<std::string, bool> known;

  MLIRContext *ctx() { return context.get(); }
  Type f32() { return Float32Type::get(ctx()); }
  Type bf16() { return BFloat16Type::get(ctx()); }
  Type i64() { return IntegerType::get(ctx(), 64); }
  Type i32() { return IntegerType::get(ctx(), 32); }
  Type e4m3() { return Float8E4M3FNType::get(ctx()); }
  Type ue8m0() { return Float8E8M0FNUType::get(ctx()); }
  /// An all-dynamic buffer of `rank` f32 (or `element`) values.
  Arg dynamic(int rank, Type element = {}) {
    return {element ? element : f32(), SmallVector<int64_t>(rank, kDyn)};
  }

  /// Adds `name` once: a func.func over memrefs (inputs, then outputs) that
  /// reads the inputs as tensors, computes `body`, widens each result to its
  /// output's element type and writes it into the output buffer.
  std::string define(const std::string &name, ArrayRef<Arg> inputs,
                     ArrayRef<Arg> outputs, const BodyFn &body) {
    if (known[name])
      return name;
    known[name] = true;
    OpBuilder b(ctx());
    Location loc = NameLoc::get(b.getStringAttr(name));
    b.setInsertionPointToEnd(module->getBody());
    SmallVector<Type> argTypes;
    for (const Arg &arg : inputs)
      argTypes.push_back(arg.memref());
    for (const Arg &arg : outputs)
      argTypes.push_back(arg.memref());
    auto func =
        func::FuncOp::create(b, loc, name, b.getFunctionType(argTypes, {}));
    func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
    Block *entry = func.addEntryBlock();
    b.setInsertionPointToStart(entry);
    SmallVector<Value> tensors;
    for (auto [index, arg] : llvm::enumerate(inputs))
      tensors.push_back(bufferization::ToTensorOp::create(
          b, loc, arg.tensor(), entry->getArgument(index), /*restrict=*/true));
    SmallVector<Value> results = body(b, loc, tensors);
    for (auto [index, output] : llvm::enumerate(outputs)) {
      Value result = results[index];
      RankedTensorType wanted = output.tensor();
      if (result.getType() != wanted)
        result =
            isa<FloatType>(output.element)
                ? arith::ExtFOp::create(b, loc, wanted, result).getResult()
                : arith::ExtUIOp::create(b, loc, wanted, result).getResult();
      Value destination = entry->getArgument(inputs.size() + index);
      bufferization::MaterializeInDestinationOp::create(
          b, loc, /*result=*/Type(), result, destination, /*restrict=*/true,
          /*writable=*/true);
    }
    func::ReturnOp::create(b, loc);
    return name;
  }

  /// `value` rounded to bf16 (the ops compute in the precision of their
  /// result type).
  Value toBF16(OpBuilder &b, Location loc, Value value) {
    auto type = cast<RankedTensorType>(value.getType());
    return arith::TruncFOp::create(b, loc, type.clone(bf16()), value);
  }
  RankedTensorType like(Value value, Type element) {
    return cast<RankedTensorType>(value.getType()).clone(element);
  }
};

KernelModule::KernelModule() : impl(std::make_unique<Impl>()) {}
KernelModule::KernelModule(KernelModule &&) noexcept = default;
KernelModule::~KernelModule() = default;

std::unique_ptr<MLIRContext> KernelModule::releaseContext() {
  return std::move(impl->context);
}

OwningOpRef<ModuleOp> KernelModule::releaseModule() {
  return std::move(impl->module);
}

std::string KernelModule::linear(bool fp8, bool f32Result) {
  Impl &m = *impl;
  std::string name = formatv("linear_{0}_{1}", fp8 ? "fp8" : "bf16",
                             f32Result ? "f32" : "bf16");
  SmallVector<Arg> inputs = {m.dynamic(2),
                             m.dynamic(2, fp8 ? m.e4m3() : m.f32())};
  if (fp8)
    inputs.push_back(m.dynamic(2, m.ue8m0()));
  return m.define(name, inputs, {m.dynamic(2)},
                  [&](OpBuilder &b, Location loc, ArrayRef<Value> t) {
                    Type result =
                        m.dynamic(2).tensor(f32Result ? m.f32() : m.bf16());
                    return SmallVector<Value>{v4a::LinearOp::create(
                        b, loc, result, t[0], t[1], fp8 ? t[2] : Value())};
                  });
}

std::string KernelModule::rmsNorm(bool weighted, double eps) {
  Impl &m = *impl;
  std::string name =
      formatv("rms_norm_{0}_eps{1}", weighted ? "weighted" : "heads",
              symbolNumber(eps));
  Arg x = m.dynamic(weighted ? 2 : 3);
  SmallVector<Arg> inputs = {x};
  if (weighted)
    inputs.push_back(m.dynamic(1));
  return m.define(name, inputs, {x},
                  [&](OpBuilder &b, Location loc, ArrayRef<Value> t) {
                    // rms_norm keeps the input type: round through bf16.
                    Value input = m.toBF16(b, loc, t[0]);
                    return SmallVector<Value>{v4a::RMSNormOp::create(
                        b, loc, input.getType(), input,
                        weighted ? t[1] : Value(), b.getF64FloatAttr(eps))};
                  });
}

std::string KernelModule::rope(int rank, int64_t ropeDim, double theta,
                               const std::optional<YarnConfig> &yarn,
                               bool inverse) {
  Impl &m = *impl;
  std::string name =
      formatv("rope_r{0}_d{1}_t{2}", rank, ropeDim, symbolNumber(theta));
  name +=
      yarn ? formatv("_yarn_f{0}_o{1}_bf{2}_bs{3}", symbolNumber(yarn->factor),
                     yarn->originalMaxPositionEmbeddings,
                     symbolNumber(yarn->betaFast), symbolNumber(yarn->betaSlow))
                 .str()
           : "_plain";
  if (inverse)
    name += "_inverse";
  Arg x = m.dynamic(rank);
  return m.define(name, {x, m.dynamic(1, m.i64())}, {x},
                  [&](OpBuilder &b, Location loc, ArrayRef<Value> t) {
                    Value input = m.toBF16(b, loc, t[0]);
                    v4a::YarnAttr yarnAttr;
                    if (yarn)
                      yarnAttr = v4a::YarnAttr::get(
                          m.ctx(), llvm::APFloat(yarn->factor),
                          yarn->originalMaxPositionEmbeddings,
                          llvm::APFloat(yarn->betaFast),
                          llvm::APFloat(yarn->betaSlow));
                    return SmallVector<Value>{v4a::RoPEOp::create(
                        b, loc, input.getType(), input, t[1],
                        b.getI64IntegerAttr(ropeDim), b.getF64FloatAttr(theta),
                        inverse ? b.getUnitAttr() : UnitAttr(), yarnAttr)};
                  });
}

std::string KernelModule::actQuant(int rank, bool e4m3, int64_t block,
                                   int64_t quantDims) {
  Impl &m = *impl;
  std::string name = formatv("act_quant_r{0}_{1}_b{2}_q{3}", rank,
                             e4m3 ? "e4m3" : "e2m1", block, quantDims);
  Arg x = m.dynamic(rank);
  return m.define(
      name, {x}, {x}, [&](OpBuilder &b, Location loc, ArrayRef<Value> t) {
        Value input = m.toBF16(b, loc, t[0]);
        return SmallVector<Value>{v4a::ActQuantOp::create(
            b, loc, input.getType(), input,
            e4m3 ? v4a::QuantFormat::E4M3 : v4a::QuantFormat::E2M1,
            static_cast<uint64_t>(block),
            quantDims > 0 ? b.getI64IntegerAttr(quantDims) : IntegerAttr(),
            /*pow2_scale=*/true)};
      });
}

std::string KernelModule::hadamard(int rank, int64_t width) {
  Impl &m = *impl;
  std::string name = formatv("hadamard_r{0}_n{1}", rank, width);
  Arg x = m.dynamic(rank);
  x.shape.back() = width;
  return m.define(
      name, {x}, {x}, [&](OpBuilder &b, Location loc, ArrayRef<Value> t) {
        Value input = m.toBF16(b, loc, t[0]);
        return SmallVector<Value>{
            v4a::HadamardOp::create(b, loc, input.getType(), input)};
      });
}

std::string KernelModule::compressStep(int64_t ratio, bool overlap) {
  Impl &m = *impl;
  std::string name =
      formatv("compress_step_r{0}{1}", ratio, overlap ? "_overlap" : "");
  Arg rows = m.dynamic(2), state = m.dynamic(3);
  Arg positions = m.dynamic(1, m.i64()), emitted = m.dynamic(1, m.i32());
  return m.define(name, {rows, rows, rows, positions, state, state},
                  {rows, emitted, state, state},
                  [&](OpBuilder &b, Location loc, ArrayRef<Value> t) {
                    auto op = v4a::CompressStepOp::create(
                        b, loc, rows.tensor(), emitted.tensor(b.getI1Type()),
                        state.tensor(), state.tensor(), t[0], t[1], t[2], t[3],
                        t[4], t[5], static_cast<uint64_t>(ratio), overlap);
                    return SmallVector<Value>(op->getResults());
                  });
}

std::string KernelModule::indexerScore(int64_t ratio) {
  Impl &m = *impl;
  std::string name = formatv("indexer_score_r{0}", ratio);
  return m.define(
      name, {m.dynamic(3), m.dynamic(2), m.dynamic(2), m.dynamic(1, m.i64())},
      {m.dynamic(2)}, [&](OpBuilder &b, Location loc, ArrayRef<Value> t) {
        return SmallVector<Value>{v4a::IndexerScoreOp::create(
            b, loc, m.dynamic(2).tensor(), t[0], t[1], t[2], t[3],
            static_cast<uint64_t>(ratio))};
      });
}

std::string KernelModule::topk(int64_t k,
                               std::optional<int64_t> candidateBlockSize) {
  Impl &m = *impl;
  std::string name = formatv("topk_k{0}", k);
  SmallVector<Arg> inputs = {m.dynamic(2)};
  if (candidateBlockSize) {
    name += formatv("_c{0}", *candidateBlockSize).str();
    inputs.push_back(m.dynamic(2, m.i32()));
  }
  Arg out{m.i32(), {kDyn, k}};
  return m.define(
      name, inputs, {out}, [&](OpBuilder &b, Location loc, ArrayRef<Value> t) {
        return SmallVector<Value>{v4a::TopKOp::create(
            b, loc, out.tensor(), t[0], candidateBlockSize ? t[1] : Value(),
            static_cast<uint64_t>(k),
            candidateBlockSize ? b.getI64IntegerAttr(*candidateBlockSize)
                               : IntegerAttr())};
      });
}

std::string KernelModule::blockTopk(int64_t blockSize, int64_t numBlocks) {
  Impl &m = *impl;
  std::string name = formatv("block_topk_b{0}_n{1}", blockSize, numBlocks);
  Arg out{m.i32(), {kDyn, numBlocks}};
  return m.define(name, {m.dynamic(2)}, {out},
                  [&](OpBuilder &b, Location loc, ArrayRef<Value> t) {
                    return SmallVector<Value>{v4a::BlockTopKOp::create(
                        b, loc, out.tensor(), t[0],
                        static_cast<uint64_t>(blockSize),
                        static_cast<uint64_t>(numBlocks))};
                  });
}

std::string KernelModule::sparseAttention(double scale) {
  Impl &m = *impl;
  std::string name = "sparse_attention_s" + symbolNumber(scale);
  return m.define(
      name, {m.dynamic(3), m.dynamic(2), m.dynamic(2, m.i32()), m.dynamic(1)},
      {m.dynamic(3)}, [&](OpBuilder &b, Location loc, ArrayRef<Value> t) {
        Value query = m.toBF16(b, loc, t[0]), kv = m.toBF16(b, loc, t[1]);
        return SmallVector<Value>{v4a::SparseAttentionOp::create(
            b, loc, query.getType(), query, kv, t[2], t[3],
            b.getF64FloatAttr(scale))};
      });
}

std::string KernelModule::groupedOutput(int64_t groups, bool fp8WoA,
                                        bool fp8WoB) {
  Impl &m = *impl;
  std::string name = formatv("grouped_output_g{0}_{1}_{2}", groups,
                             fp8WoA ? "fp8" : "bf16", fp8WoB ? "fp8" : "bf16");
  // (o, wo_a[, wo_a scale], wo_b[, wo_b scale]): where each weight sits.
  SmallVector<Arg> inputs = {m.dynamic(3)};
  SmallVector<int> weightAt, scaleAt;
  for (bool fp8 : {fp8WoA, fp8WoB}) {
    weightAt.push_back(inputs.size());
    inputs.push_back(m.dynamic(2, fp8 ? m.e4m3() : m.f32()));
    scaleAt.push_back(fp8 ? static_cast<int>(inputs.size()) : -1);
    if (fp8)
      inputs.push_back(m.dynamic(2, m.ue8m0()));
  }
  return m.define(name, inputs, {m.dynamic(2)},
                  [&](OpBuilder &b, Location loc, ArrayRef<Value> t) {
                    auto scale = [&](int i) {
                      return scaleAt[i] < 0 ? Value() : t[scaleAt[i]];
                    };
                    return SmallVector<Value>{v4a::GroupedOutputOp::create(
                        b, loc, m.dynamic(2).tensor(m.bf16()), t[0],
                        t[weightAt[0]], scale(0), t[weightAt[1]], scale(1),
                        static_cast<uint64_t>(groups))};
                  });
}

std::string KernelModule::cacheStoreGather(const std::string &layout,
                                           int64_t dim) {
  Impl &m = *impl;
  std::string name = formatv("cache_store_gather_{0}_d{1}", layout, dim);
  if (m.known[name])
    return name;
  m.known[name] = true;
  std::optional<v4a::CacheLayout> cacheLayout =
      v4a::symbolizeCacheLayout(layout);
  if (!cacheLayout)
    llvm::report_fatal_error(("unknown cache layout " + layout).c_str());
  OpBuilder b(m.ctx());
  Location loc = NameLoc::get(b.getStringAttr(name));
  b.setInsertionPointToEnd(m.module->getBody());
  auto cache = v4a::KVCacheType::get(m.ctx(), *cacheLayout, dim, 64);
  Arg rows{m.f32(), {kDyn, dim}}, ids = m.dynamic(1, m.i64());
  Arg indices = m.dynamic(2, m.i32()), out{m.f32(), {kDyn, kDyn, dim}};
  auto func = func::FuncOp::create(
      b, loc, name,
      b.getFunctionType(
          {cache, rows.memref(), ids.memref(), indices.memref(), out.memref()},
          {}));
  func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  auto tensor = [&](const Arg &arg, int index) -> Value {
    return bufferization::ToTensorOp::create(
        b, loc, arg.tensor(), entry->getArgument(index), /*restrict=*/true);
  };
  Value rowTensor = tensor(rows, 1), idTensor = tensor(ids, 2);
  Value indexTensor = tensor(indices, 3);
  v4a::CacheStoreOp::create(b, loc, entry->getArgument(0), rowTensor, idTensor);
  Value gathered = v4a::CacheGatherOp::create(
      b, loc, out.tensor(), entry->getArgument(0), indexTensor);
  bufferization::MaterializeInDestinationOp::create(
      b, loc, Type(), gathered, entry->getArgument(4), /*restrict=*/true,
      /*writable=*/true);
  func::ReturnOp::create(b, loc);
  return name;
}

} // namespace v4a::jit
