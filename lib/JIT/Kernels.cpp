//===- Kernels.cpp - the CPU kernels a model needs ------------------------===//

#include "lib/JIT/Kernels.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using llvm::formatv;

namespace v4a::jit {

namespace {

/// One buffer argument: its element type and rank (all dims dynamic), or a
/// static shape when `shape` is given.
struct Arg {
  std::string element;
  int rank;
  std::string shape; // "?x?" style prefix, derived from rank when empty

  std::string dims() const {
    if (!shape.empty())
      return shape;
    std::string text;
    for (int i = 0; i < rank; ++i)
      text += "?x";
    return text;
  }
  std::string memref() const { return "memref<" + dims() + element + ">"; }
  std::string tensor(const std::string &element) const {
    return "tensor<" + dims() + element + ">";
  }
  std::string tensor() const { return tensor(element); }
};

/// Enough digits that the attribute holds exactly `value`.
std::string formatDouble(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.17e", value);
  return text;
}

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

/// A kernel: arguments %a0.. become tensors %t0..; `body` computes the
/// results %r0.. (with `resultTypes`), which are widened to the output
/// buffers' element types and written into them.
std::string kernel(const std::string &name, const std::vector<Arg> &inputs,
                   const std::vector<Arg> &outputs,
                   const std::vector<std::string> &resultTypes,
                   const std::string &body) {
  std::string text = "func.func @" + name + "(";
  std::vector<std::string> params;
  for (size_t i = 0; i < inputs.size(); ++i)
    params.push_back(formatv("%a{0}: {1}", i, inputs[i].memref()));
  for (size_t i = 0; i < outputs.size(); ++i)
    params.push_back(formatv("%o{0}: {1}", i, outputs[i].memref()));
  text += llvm::join(params, ", ") + ") attributes {llvm.emit_c_interface} {\n";
  for (size_t i = 0; i < inputs.size(); ++i)
    text += formatv("  %t{0} = bufferization.to_tensor %a{0} restrict : {1} to "
                    "{2}\n",
                    i, inputs[i].memref(), inputs[i].tensor());
  text += body;
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string result = formatv("%r{0}", i);
    std::string wanted = outputs[i].tensor();
    if (resultTypes[i] != wanted) {
      bool isFloat = outputs[i].element == "f32";
      text += formatv("  %w{0} = arith.{1} %r{0} : {2} to {3}\n", i,
                      isFloat ? "extf" : "extui", resultTypes[i], wanted);
      result = formatv("%w{0}", i);
    }
    text += formatv("  bufferization.materialize_in_destination {0} in "
                    "restrict writable %o{1} : ({2}, {3}) -> ()\n",
                    result, i, wanted, outputs[i].memref());
  }
  return text + "  return\n}\n";
}

const Arg f32r1{"f32", 1, ""}, f32r2{"f32", 2, ""}, f32r3{"f32", 3, ""};
const Arg i64r1{"i64", 1, ""}, i32r2{"i32", 2, ""};

std::string tensorType(int rank, const std::string &element) {
  return Arg{element, rank, ""}.tensor();
}

} // namespace

std::string KernelModule::add(const std::string &name,
                              const std::string &text) {
  if (!known[name]) {
    known[name] = true;
    body += text;
  }
  return name;
}

std::string KernelModule::source() const { return "module {\n" + body + "}\n"; }

std::string KernelModule::linear(bool fp8, bool f32Result) {
  std::string name = formatv("linear_{0}_{1}", fp8 ? "fp8" : "bf16",
                             f32Result ? "f32" : "bf16");
  std::string out = f32Result ? "f32" : "bf16";
  std::vector<Arg> inputs = {f32r2, fp8 ? Arg{"f8E4M3FN", 2, ""} : f32r2};
  std::string scale;
  if (fp8) {
    inputs.push_back(Arg{"f8E8M0FNU", 2, ""});
    scale = " scale %t2";
  }
  std::string scaleType = fp8 ? ", " + inputs[2].tensor() : "";
  std::string body = formatv("  %r0 = v4a.linear %t0, %t1{0} : {1}, {2}{3} -> "
                             "{4}\n",
                             scale, inputs[0].tensor(), inputs[1].tensor(),
                             scaleType, tensorType(2, out));
  return add(name, kernel(name, inputs, {f32r2}, {tensorType(2, out)}, body));
}

std::string KernelModule::rmsNorm(bool weighted, double eps) {
  std::string name = formatv("rms_norm_{0}", weighted ? "weighted" : "heads");
  Arg x = weighted ? f32r2 : f32r3;
  std::vector<Arg> inputs = {x};
  if (weighted)
    inputs.push_back(f32r1);
  std::string result = x.tensor("bf16");
  std::string body =
      formatv("  %r0 = v4a.rms_norm %t0{0} {{eps = {1} : f64} : {2}{3}\n",
              weighted ? " weight %t1" : "", formatDouble(eps), x.tensor(),
              weighted ? ", " + f32r1.tensor() : "");
  // rms_norm keeps the input type: round through a bf16 copy.
  body = formatv("  %x0 = arith.truncf %t0 : {0} to {1}\n", x.tensor(), result)
             .str() +
         formatv("  %r0 = v4a.rms_norm %x0{0} {{eps = {1} : f64} : {2}{3}\n",
                 weighted ? " weight %t1" : "", formatDouble(eps), result,
                 weighted ? ", " + f32r1.tensor() : "")
             .str();
  name += "_eps" + symbolNumber(eps);
  return add(name, kernel(name, inputs, {x}, {result}, body));
}

std::string KernelModule::rope(int rank, int64_t ropeDim, double theta,
                               const std::optional<YarnConfig> &yarn,
                               bool inverse) {
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
  Arg x = rank == 2 ? f32r2 : f32r3;
  std::string result = x.tensor("bf16");
  std::string attrs = formatv("rope_dim = {0} : i64, theta = {1} : f64",
                              ropeDim, formatDouble(theta));
  if (inverse)
    attrs += ", inverse";
  if (yarn)
    attrs +=
        formatv(", yarn = #v4a.yarn<factor = {0}, original_max_position = "
                "{1}, beta_fast = {2}, beta_slow = {3}>",
                formatDouble(yarn->factor), yarn->originalMaxPositionEmbeddings,
                formatDouble(yarn->betaFast), formatDouble(yarn->betaSlow))
            .str();
  std::string body = formatv("  %x0 = arith.truncf %t0 : {0} to {1}\n"
                             "  %r0 = v4a.rope %x0, %t1 {{{2}} : {1}, {3}\n",
                             x.tensor(), result, attrs, i64r1.tensor());
  return add(name, kernel(name, {x, i64r1}, {x}, {result}, body));
}

std::string KernelModule::actQuant(int rank, bool e4m3, int64_t block,
                                   int64_t quantDims) {
  std::string name = formatv("act_quant_r{0}_{1}_b{2}_q{3}", rank,
                             e4m3 ? "e4m3" : "e2m1", block, quantDims);
  Arg x = rank == 2 ? f32r2 : f32r3;
  std::string result = x.tensor("bf16");
  std::string quant =
      quantDims > 0 ? formatv(", quant_dims = {0} : i64", quantDims).str() : "";
  std::string body =
      formatv("  %x0 = arith.truncf %t0 : {0} to {1}\n"
              "  %r0 = v4a.act_quant %x0 {{format = #v4a<quant_format {2}>, "
              "block_size = {3} : i64{4}, pow2_scale} : {1}\n",
              x.tensor(), result, e4m3 ? "e4m3" : "e2m1", block, quant);
  return add(name, kernel(name, {x}, {x}, {result}, body));
}

std::string KernelModule::hadamard(int rank, int64_t width) {
  std::string name = formatv("hadamard_r{0}_n{1}", rank, width);
  Arg x{"f32", rank,
        rank == 2 ? formatv("?x{0}x", width).str()
                  : formatv("?x?x{0}x", width).str()};
  std::string result = x.tensor("bf16");
  std::string body = formatv("  %x0 = arith.truncf %t0 : {0} to {1}\n"
                             "  %r0 = v4a.hadamard %x0 : {1}\n",
                             x.tensor(), result);
  return add(name, kernel(name, {x}, {x}, {result}, body));
}

std::string KernelModule::compressStep(int64_t ratio, bool overlap) {
  std::string name =
      formatv("compress_step_r{0}{1}", ratio, overlap ? "_overlap" : "");
  std::vector<Arg> inputs = {f32r2, f32r2, f32r2, i64r1, f32r3, f32r3};
  Arg emitted{"i32", 1, ""};
  std::vector<Arg> outputs = {f32r2, emitted, f32r3, f32r3};
  std::string body = formatv(
      "  %r0, %b1, %r2, %r3 = v4a.compress_step %t0, %t1, %t2, %t3, %t4, %t5 "
      "{{ratio = {0} : i64{1}} : {2}, {2}, {3}, {4} -> {2}, tensor<?xi1>\n"
      "  %r1 = arith.extui %b1 : tensor<?xi1> to tensor<?xi32>\n",
      ratio, overlap ? ", overlap" : "", f32r2.tensor(), i64r1.tensor(),
      f32r3.tensor());
  return add(name, kernel(name, inputs, outputs,
                          {f32r2.tensor(), emitted.tensor(), f32r3.tensor(),
                           f32r3.tensor()},
                          body));
}

std::string KernelModule::indexerScore(int64_t ratio) {
  std::string name = formatv("indexer_score_r{0}", ratio);
  std::string body = formatv(
      "  %r0 = v4a.indexer_score %t0, %t1, %t2, %t3 {{ratio = {0} : i64} : "
      "{1}, {2}, {2}, {3} -> {2}\n",
      ratio, f32r3.tensor(), f32r2.tensor(), i64r1.tensor());
  return add(name, kernel(name, {f32r3, f32r2, f32r2, i64r1}, {f32r2},
                          {f32r2.tensor()}, body));
}

std::string KernelModule::topk(int64_t k,
                               std::optional<int64_t> candidateBlockSize) {
  std::string name = formatv("topk_k{0}", k);
  Arg out{"i32", 2, formatv("?x{0}x", k).str()};
  std::vector<Arg> inputs = {f32r2};
  std::string body;
  if (candidateBlockSize) {
    name += formatv("_c{0}", *candidateBlockSize).str();
    inputs.push_back(i32r2);
    body = formatv("  %r0 = v4a.topk %t0 candidates %t1 {{k = {0} : i64, "
                   "candidate_block_size = {1} : i64} : {2}, {3} -> {4}\n",
                   k, *candidateBlockSize, f32r2.tensor(), i32r2.tensor(),
                   out.tensor());
  } else {
    body = formatv("  %r0 = v4a.topk %t0 {{k = {0} : i64} : {1} -> {2}\n", k,
                   f32r2.tensor(), out.tensor());
  }
  return add(name, kernel(name, inputs, {out}, {out.tensor()}, body));
}

std::string KernelModule::blockTopk(int64_t blockSize, int64_t numBlocks) {
  std::string name = formatv("block_topk_b{0}_n{1}", blockSize, numBlocks);
  Arg out{"i32", 2, formatv("?x{0}x", numBlocks).str()};
  std::string body = formatv(
      "  %r0 = v4a.block_topk %t0 {{block_size = {0} : i64, num_blocks = {1} "
      ": i64} : {2} -> {3}\n",
      blockSize, numBlocks, f32r2.tensor(), out.tensor());
  return add(name, kernel(name, {f32r2}, {out}, {out.tensor()}, body));
}

std::string KernelModule::sparseAttention(double scale) {
  std::string name = "sparse_attention_s" + symbolNumber(scale);
  std::string result = f32r3.tensor("bf16");
  std::string body = formatv(
      "  %q0 = arith.truncf %t0 : {0} to {1}\n"
      "  %k0 = arith.truncf %t1 : {2} to {3}\n"
      "  %r0 = v4a.sparse_attention %q0, %k0, %t2, %t3 {{scale = {4} : f64} "
      ": {1}, {3}, {5}, {6} -> {1}\n",
      f32r3.tensor(), result, f32r2.tensor(), f32r2.tensor("bf16"),
      formatDouble(scale), i32r2.tensor(), f32r1.tensor());
  return add(name, kernel(name, {f32r3, f32r2, i32r2, f32r1}, {f32r3}, {result},
                          body));
}

std::string KernelModule::groupedOutput(int64_t groups, bool fp8WoA,
                                        bool fp8WoB) {
  std::string name = formatv("grouped_output_g{0}_{1}_{2}", groups,
                             fp8WoA ? "fp8" : "bf16", fp8WoB ? "fp8" : "bf16");
  Arg fp8Weight{"f8E4M3FN", 2, ""}, scale{"f8E8M0FNU", 2, ""};
  std::vector<Arg> inputs = {f32r3};
  std::string operands = "%t0", types = f32r3.tensor();
  for (bool fp8 : {fp8WoA, fp8WoB}) {
    Arg weight = fp8 ? fp8Weight : f32r2;
    std::string index = std::to_string(inputs.size());
    operands += ", %t" + index;
    types += ", " + weight.tensor();
    inputs.push_back(weight);
    if (!fp8)
      continue;
    operands += " scale %t" + std::to_string(inputs.size());
    types += " scale " + scale.tensor();
    inputs.push_back(scale);
  }
  std::string body =
      formatv("  %r0 = v4a.grouped_output {0} {{groups = {1} : i64} : {2} -> "
              "{3}\n",
              operands, groups, types, f32r2.tensor("bf16"))
          .str();
  return add(name, kernel(name, inputs, {f32r2}, {f32r2.tensor("bf16")}, body));
}

std::string KernelModule::cacheStoreGather(const std::string &layout,
                                           int64_t dim) {
  std::string name = formatv("cache_store_gather_{0}_d{1}", layout, dim);
  std::string cache =
      formatv("!v4a.kv_cache<{0}, dim = {1}, page_size = 64>", layout, dim);
  std::string rows = formatv("tensor<?x{0}xf32>", dim);
  std::string out = formatv("tensor<?x?x{0}xf32>", dim);
  std::string text = formatv(
      "func.func @{0}(%c: {1}, %a0: memref<?x{2}xf32>, %a1: memref<?xi64>, "
      "%a2: memref<?x?xi32>, %o0: memref<?x?x{2}xf32>) attributes "
      "{{llvm.emit_c_interface} {{\n"
      "  %t0 = bufferization.to_tensor %a0 restrict : memref<?x{2}xf32> to "
      "{3}\n"
      "  %t1 = bufferization.to_tensor %a1 restrict : memref<?xi64> to "
      "tensor<?xi64>\n"
      "  %t2 = bufferization.to_tensor %a2 restrict : memref<?x?xi32> to "
      "tensor<?x?xi32>\n"
      "  v4a.cache_store %c, %t0, %t1 : {1}, {3}, tensor<?xi64>\n"
      "  %r0 = v4a.cache_gather %c, %t2 : {1}, tensor<?x?xi32> -> {4}\n"
      "  bufferization.materialize_in_destination %r0 in restrict writable "
      "%o0 : ({4}, memref<?x?x{2}xf32>) -> ()\n"
      "  return\n}\n",
      name, cache, dim, rows, out);
  return add(name, text);
}

} // namespace v4a::jit
