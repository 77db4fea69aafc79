//===- Package.cpp - a compiled model in one file -------------------------===//

#include "core/Package.h"

#include "core/FileIO.h"
#include "core/TensorSpecs.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>

namespace v4a::pkg {

namespace {

constexpr char kMagic[8] = {'V', '4', 'A', 'P', 'K', 'G', '\r', '\n'};
constexpr uint32_t kMaxSections = 64;
constexpr uint32_t kMaxSectionName = 64;
/// Bounds of the counts a package may state.
constexpr int64_t kMaxCount = 1 << 20;
constexpr int64_t kMaxRank = 8;
constexpr int64_t kMaxExtent = int64_t(1) << 48;

const char *const kElementNames[] = {"bf16", "f32",   "i32",  "i64",
                                     "e4m3", "ue8m0", "bytes"};

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

void putU32(std::string &out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void putU64(std::string &out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string number(double v) {
  char buffer[40];
  std::snprintf(buffer, sizeof(buffer), "%.17g", v);
  return buffer;
}

class Lines {
public:
  Lines &operator<<(const std::string &word) {
    line += (line.empty() ? "" : " ") + word;
    return *this;
  }
  Lines &operator<<(int64_t v) { return *this << std::to_string(v); }
  Lines &operator<<(int v) { return *this << std::to_string(v); }
  void end() {
    text += line + "\n";
    line.clear();
  }
  std::string text, line;
};

void writeList(Lines &out, const char *name, const std::vector<int64_t> &v) {
  out << name << static_cast<int64_t>(v.size());
  for (int64_t x : v)
    out << x;
  out.end();
}

std::string modelSection(const ModelConfig &c) {
  Lines out;
  auto field = [&](const char *name, int64_t v) {
    out << name << v;
    out.end();
  };
  auto real = [&](const char *name, double v) {
    out << name << number(v);
    out.end();
  };
  field("hidden_size", c.hiddenSize);
  field("num_hidden_layers", c.numHiddenLayers);
  field("num_attention_heads", c.numAttentionHeads);
  field("num_key_value_heads", c.numKeyValueHeads);
  field("head_dim", c.headDim);
  field("qk_rope_head_dim", c.qkRopeHeadDim);
  field("q_lora_rank", c.qLoraRank);
  field("o_lora_rank", c.oLoraRank);
  field("o_groups", c.oGroups);
  field("sliding_window", c.slidingWindow);
  field("index_n_heads", c.indexNHeads);
  field("index_head_dim", c.indexHeadDim);
  field("index_topk", c.indexTopk);
  real("rope_theta", c.ropeTheta);
  real("compress_rope_theta", c.compressRopeTheta);
  real("rms_norm_eps", c.rmsNormEps);
  if (c.ropeScaling) {
    out << "rope_scaling" << number(c.ropeScaling->factor)
        << c.ropeScaling->originalMaxPositionEmbeddings
        << number(c.ropeScaling->betaFast) << number(c.ropeScaling->betaSlow);
    out.end();
  }
  field("fp8_weights", c.fp8Weights ? 1 : 0);
  writeList(out, "compress_ratios", c.compressRatios);
  field("num_mtp_layers", c.numMtpLayers);
  if (c.kvSourceLayerIds)
    writeList(out, "kv_source_layer_ids", *c.kvSourceLayerIds);
  if (c.indexSourceLayerIds)
    writeList(out, "index_source_layer_ids", *c.indexSourceLayerIds);
  field("candidate_source_layer_id", c.candidateSourceLayerId);
  if (c.candidateTopkBlocks)
    field("candidate_topk_blocks", *c.candidateTopkBlocks);
  if (c.candidateBlockSize)
    field("candidate_block_size", *c.candidateBlockSize);
  if (c.nPrefillLayer)
    field("n_prefill_layer", *c.nPrefillLayer);
  return out.text;
}

std::string layersSection(const std::vector<LayerSpec> &layers) {
  Lines out;
  for (const LayerSpec &l : layers) {
    out << "layer" << l.id << l.compressRatio << l.indexTopk
        << int64_t(l.useSwa) << int64_t(l.hasPackedKv) << int64_t(l.isMtp)
        << l.kvSource << l.indexKSource << l.indexSource << l.candidateSource;
    out.end();
  }
  return out.text;
}

std::string functionsSection(const std::vector<step::Function> &functions) {
  Lines out;
  for (const step::Function &f : functions) {
    out << "function" << f.name << static_cast<int64_t>(f.args.size());
    out.end();
    for (const step::Arg &a : f.args) {
      out << "arg" << a.bind << kElementNames[static_cast<int>(a.element)]
          << int64_t(a.output) << static_cast<int64_t>(a.shape.size());
      for (int64_t d : a.shape)
        out << d;
      out.end();
    }
    out << "host" << f.host.values << static_cast<int64_t>(f.host.ops.size());
    out.end();
    for (const step::HostOp &op : f.host.ops) {
      out << "op" << static_cast<int>(op.kind) << op.result
          << static_cast<int64_t>(op.operands.size());
      for (int id : op.operands)
        out << id;
      out << static_cast<int64_t>(op.data.size());
      for (int64_t d : op.data)
        out << d;
      out << (op.kernel.empty() ? std::string("-") : op.kernel);
      out.end();
    }
  }
  return out.text;
}

/// Launches per sched_meta_key: the functions are meta_<key> and
/// step_<key>[_role].
std::string kernelsPerKey(const std::vector<step::Function> &functions) {
  std::map<std::string, int64_t> launches;
  for (const step::Function &f : functions) {
    std::string key = f.name;
    for (std::string prefix : {"meta_", "step_"})
      if (key.rfind(prefix, 0) == 0)
        key = key.substr(prefix.size());
    for (const char *role : {"_shares_kv", "_shares_topk", "_makes_candidates",
                             "_uses_candidates"}) {
      size_t at = key.find(role);
      if (at != std::string::npos)
        key = key.substr(0, at);
    }
    int64_t &count = launches[key];
    for (const step::HostOp &op : f.host.ops)
      count += op.kind == step::HostOp::Kind::Launch;
  }
  Lines out;
  for (const auto &[key, count] : launches) {
    out << "kernels" << key << count;
    out.end();
  }
  return out.text;
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

/// The words of one section, line by line, with checked conversions.
class Reader {
public:
  Reader(const std::string &section, const std::string &text,
         std::string &error)
      : section(section), error(error) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      std::vector<std::string> words;
      std::istringstream split(line);
      std::string word;
      while (split >> word)
        words.push_back(word);
      if (!words.empty())
        lines.push_back(std::move(words));
    }
  }

  bool atEnd() const { return next >= lines.size(); }
  /// The next line; it must start with `keyword` and have at least `words`
  /// words after it.
  bool line(const char *keyword, size_t words) {
    if (atEnd())
      return fail(std::string("expected '") + keyword + "', found the end");
    current = &lines[next++];
    word = 1;
    if ((*current)[0] != keyword)
      return fail(std::string("expected '") + keyword + "', found '" +
                  (*current)[0] + "'");
    if (current->size() < words + 1)
      return fail(std::string("'") + keyword + "' needs " +
                  std::to_string(words) + " values");
    return true;
  }
  const std::string &peekKeyword() const { return lines[next][0]; }
  bool integer(int64_t &out, int64_t lo, int64_t hi) {
    if (word >= current->size())
      return fail("a line ends early");
    const std::string &text = (*current)[word++];
    errno = 0;
    char *end = nullptr;
    long long v = std::strtoll(text.c_str(), &end, 10);
    if (errno != 0 || end == text.c_str() || *end != '\0' || v < lo || v > hi)
      return fail("'" + text + "' is not an integer in [" + std::to_string(lo) +
                  ", " + std::to_string(hi) + "]");
    out = v;
    return true;
  }
  bool real(double &out) {
    if (word >= current->size())
      return fail("a line ends early");
    const std::string &text = (*current)[word++];
    char *end = nullptr;
    out = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0')
      return fail("'" + text + "' is not a number");
    return true;
  }
  bool text(std::string &out) {
    if (word >= current->size())
      return fail("a line ends early");
    out = (*current)[word++];
    return true;
  }
  /// The rest of the line as one string.
  std::string rest() {
    std::string out;
    for (; word < current->size(); ++word)
      out += (out.empty() ? "" : " ") + (*current)[word];
    return out;
  }
  bool fail(const std::string &message) {
    error = "section '" + section + "'" +
            (current ? ", line " + std::to_string(next) : std::string()) +
            ": " + message;
    return false;
  }

private:
  std::string section;
  std::string &error;
  std::vector<std::vector<std::string>> lines;
  size_t next = 0, word = 0;
  const std::vector<std::string> *current = nullptr;
};

bool readList(Reader &r, std::vector<int64_t> &out) {
  int64_t n = 0;
  if (!r.integer(n, 0, kMaxCount))
    return false;
  out.resize(n);
  for (int64_t &v : out)
    if (!r.integer(v, std::numeric_limits<int64_t>::min(),
                   std::numeric_limits<int64_t>::max()))
      return false;
  return true;
}

bool readModel(Reader &r, ModelConfig &c) {
  const int64_t lo = std::numeric_limits<int64_t>::min(),
                hi = std::numeric_limits<int64_t>::max();
  std::map<std::string, int64_t *> integers = {
      {"hidden_size", &c.hiddenSize},
      {"num_hidden_layers", &c.numHiddenLayers},
      {"num_attention_heads", &c.numAttentionHeads},
      {"num_key_value_heads", &c.numKeyValueHeads},
      {"head_dim", &c.headDim},
      {"qk_rope_head_dim", &c.qkRopeHeadDim},
      {"q_lora_rank", &c.qLoraRank},
      {"o_lora_rank", &c.oLoraRank},
      {"o_groups", &c.oGroups},
      {"sliding_window", &c.slidingWindow},
      {"index_n_heads", &c.indexNHeads},
      {"index_head_dim", &c.indexHeadDim},
      {"index_topk", &c.indexTopk},
      {"num_mtp_layers", &c.numMtpLayers},
      {"candidate_source_layer_id", &c.candidateSourceLayerId}};
  std::map<std::string, double *> reals = {
      {"rope_theta", &c.ropeTheta},
      {"compress_rope_theta", &c.compressRopeTheta},
      {"rms_norm_eps", &c.rmsNormEps}};
  while (!r.atEnd()) {
    std::string key = r.peekKeyword();
    if (!r.line(key.c_str(), 1))
      return false;
    if (auto it = integers.find(key); it != integers.end()) {
      if (!r.integer(*it->second, lo, hi))
        return false;
    } else if (auto it = reals.find(key); it != reals.end()) {
      if (!r.real(*it->second))
        return false;
    } else if (key == "rope_scaling") {
      YarnConfig y;
      if (!r.real(y.factor) ||
          !r.integer(y.originalMaxPositionEmbeddings, lo, hi) ||
          !r.real(y.betaFast) || !r.real(y.betaSlow))
        return false;
      c.ropeScaling = y;
    } else if (key == "fp8_weights") {
      int64_t v = 0;
      if (!r.integer(v, 0, 1))
        return false;
      c.fp8Weights = v;
    } else if (key == "compress_ratios") {
      if (!readList(r, c.compressRatios))
        return false;
    } else if (key == "kv_source_layer_ids" ||
               key == "index_source_layer_ids") {
      std::vector<int64_t> list;
      if (!readList(r, list))
        return false;
      (key[0] == 'k' ? c.kvSourceLayerIds : c.indexSourceLayerIds) = list;
    } else if (key == "candidate_topk_blocks" ||
               key == "candidate_block_size" || key == "n_prefill_layer") {
      int64_t v = 0;
      if (!r.integer(v, lo, hi))
        return false;
      (key == "candidate_topk_blocks"  ? c.candidateTopkBlocks
       : key == "candidate_block_size" ? c.candidateBlockSize
                                       : c.nPrefillLayer) = v;
    } else {
      return r.fail("unknown field '" + key + "'");
    }
  }
  return true;
}

/// The model's sizes are within what any device holds: the compiler
/// checked the configuration, but the package may have been altered since.
bool checkModel(Reader &r, const ModelConfig &c) {
  std::string problem = tensorSizeProblem(c);
  if (problem.empty())
    problem = sizeProblem({{"qk_rope_head_dim", c.qkRopeHeadDim, 0},
                           {"sliding_window", c.slidingWindow, 1},
                           {"index_topk", c.indexTopk, 0}});
  if (!problem.empty())
    return r.fail(problem);
  for (int64_t ratio : c.compressRatios)
    if (ratio < 0 || ratio > kMaxModelSize)
      return r.fail("a compress ratio of " + std::to_string(ratio));
  return true;
}

bool readLayers(Reader &r, std::vector<LayerSpec> &layers, int64_t count) {
  while (!r.atEnd()) {
    LayerSpec l;
    int64_t swa = 0, packed = 0, mtp = 0;
    if (!r.line("layer", 10) || !r.integer(l.id, 0, count - 1) ||
        !r.integer(l.compressRatio, 0, kMaxExtent) ||
        !r.integer(l.indexTopk, 0, kMaxExtent) || !r.integer(swa, 0, 1) ||
        !r.integer(packed, 0, 1) || !r.integer(mtp, 0, 1) ||
        !r.integer(l.kvSource, 0, count - 1) ||
        !r.integer(l.indexKSource, 0, count - 1) ||
        !r.integer(l.indexSource, 0, count - 1) ||
        !r.integer(l.candidateSource, -1, count - 1))
      return false;
    if (l.id != static_cast<int64_t>(layers.size()))
      return r.fail("layers must be listed in order");
    l.useSwa = swa;
    l.hasPackedKv = packed;
    l.isMtp = mtp;
    layers.push_back(l);
  }
  if (static_cast<int64_t>(layers.size()) != count)
    return r.fail("lists " + std::to_string(layers.size()) +
                  " layers; the configuration has " + std::to_string(count));
  return true;
}

bool readFunctions(Reader &r, std::vector<step::Function> &functions) {
  while (!r.atEnd()) {
    step::Function f;
    int64_t args = 0, values = 0, ops = 0;
    if (!r.line("function", 2) || !r.text(f.name) || !r.integer(args, 0, 4096))
      return false;
    for (int64_t i = 0; i < args; ++i) {
      step::Arg a;
      std::string element;
      int64_t output = 0, rank = 0;
      if (!r.line("arg", 4) || !r.text(a.bind) || !r.text(element) ||
          !r.integer(output, 0, 1) || !r.integer(rank, 0, kMaxRank))
        return false;
      auto known =
          std::find_if(std::begin(kElementNames), std::end(kElementNames),
                       [&](const char *n) { return element == n; });
      if (known == std::end(kElementNames))
        return r.fail("unknown element type '" + element + "'");
      a.element = static_cast<step::Element>(known - std::begin(kElementNames));
      a.output = output;
      a.shape.resize(rank);
      for (int64_t &d : a.shape)
        if (!r.integer(d, -1, kMaxExtent))
          return false;
      f.args.push_back(std::move(a));
    }
    if (!r.line("host", 2) || !r.integer(values, 0, kMaxCount) ||
        !r.integer(ops, 0, kMaxCount))
      return false;
    f.host.values = static_cast<int>(values);
    for (int64_t i = 0; i < ops; ++i) {
      step::HostOp op;
      int64_t kind = 0, result = 0, operands = 0, data = 0;
      if (!r.line("op", 4) ||
          !r.integer(kind, 0, static_cast<int64_t>(step::HostOp::Kind::Gemm)) ||
          !r.integer(result, -1, values - 1) || !r.integer(operands, 0, 4096))
        return false;
      op.kind = static_cast<step::HostOp::Kind>(kind);
      op.result = static_cast<int>(result);
      op.operands.resize(operands);
      for (int &id : op.operands) {
        int64_t v = 0;
        if (!r.integer(v, 0, values - 1))
          return false;
        id = static_cast<int>(v);
      }
      if (!r.integer(data, 0, 4096))
        return false;
      op.data.resize(data);
      for (int64_t &d : op.data)
        if (!r.integer(d, std::numeric_limits<int64_t>::min(),
                       std::numeric_limits<int64_t>::max()))
          return false;
      if (!r.text(op.kernel))
        return false;
      if (op.kernel == "-")
        op.kernel.clear();
      f.host.ops.push_back(std::move(op));
    }
    functions.push_back(std::move(f));
  }
  return true;
}

bool readSchedule(Reader &r, std::vector<step::Call> &calls, int64_t functions,
                  int64_t layers) {
  while (!r.atEnd()) {
    step::Call c;
    int64_t function = 0, meta = 0;
    if (!r.line("call", 3) || !r.integer(function, 0, functions - 1) ||
        !r.integer(meta, -1, functions - 1) ||
        !r.integer(c.layer, -1, layers - 1))
      return false;
    c.function = static_cast<int>(function);
    c.meta = static_cast<int>(meta);
    calls.push_back(c);
  }
  return true;
}

uint32_t getU32(const std::string &b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | static_cast<uint8_t>(b[at + i]);
  return v;
}
uint64_t getU64(const std::string &b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | static_cast<uint8_t>(b[at + i]);
  return v;
}

bool readManifest(Reader &r, Package &p) {
  int64_t v = 0;
  if (!r.line("compiler", 1))
    return false;
  p.compilerVersion = r.rest();
  if (!r.line("target", 1) || !r.text(p.target) || !r.line("config_hash", 1) ||
      !r.text(p.configHash) || !r.line("context", 1) ||
      !r.integer(p.planOptions.contextTokens, 1, kMaxExtent) ||
      !r.line("page_size", 1) ||
      !r.integer(p.planOptions.pageSize, 1, kMaxExtent) ||
      !r.line("alignment", 1) ||
      !r.integer(p.planOptions.alignment, 1, 1 << 20) ||
      !r.line("main_layout", 1) || !r.integer(v, 0, 2))
    return false;
  p.planOptions.mainLayout = static_cast<plan::MainLayout>(v);
  if (!r.line("index_layout", 1) || !r.integer(v, 0, 2))
    return false;
  p.planOptions.indexLayout = static_cast<plan::IndexLayout>(v);
  // Written for tensor-parallel ranks only (so other packages keep their
  // bytes).
  if (!r.atEnd() && r.peekKeyword() == "tensor_parallel" &&
      (!r.line("tensor_parallel", 1) ||
       !r.integer(p.tensorParallel, 2, kMaxTensorParallel)))
    return false;
  // "kernels KEY N" lines describe the package; nothing depends on them.
  return true;
}

} // namespace

std::string hashText(const std::string &text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char buffer[17];
  std::snprintf(buffer, sizeof(buffer), "%016" PRIx64, h);
  return buffer;
}

std::string serialize(const Package &p) {
  Lines manifest;
  manifest << "compiler" << p.compilerVersion;
  manifest.end();
  manifest << "target" << p.target;
  manifest.end();
  manifest << "config_hash" << p.configHash;
  manifest.end();
  manifest << "context" << p.planOptions.contextTokens;
  manifest.end();
  manifest << "page_size" << p.planOptions.pageSize;
  manifest.end();
  manifest << "alignment" << p.planOptions.alignment;
  manifest.end();
  manifest << "main_layout" << static_cast<int>(p.planOptions.mainLayout);
  manifest.end();
  manifest << "index_layout" << static_cast<int>(p.planOptions.indexLayout);
  manifest.end();
  if (p.tensorParallel != 1) {
    manifest << "tensor_parallel" << p.tensorParallel;
    manifest.end();
  }
  Lines schedule;
  for (const step::Call &c : p.calls) {
    schedule << "call" << c.function << c.meta << c.layer;
    schedule.end();
  }
  std::vector<std::pair<std::string, std::string>> sections = {
      {"manifest", manifest.text + kernelsPerKey(p.functions)},
      {"config", p.configJson},
      {"model", modelSection(p.config)},
      {"layers", layersSection(p.layers)},
      {"functions", functionsSection(p.functions)},
      {"schedule", schedule.text},
      {"ptx", p.ptx}};
  if (!p.cubin.empty())
    sections.push_back({"cubin", p.cubin});
  std::string out(kMagic, sizeof(kMagic));
  putU32(out, p.formatVersion);
  putU32(out, static_cast<uint32_t>(sections.size()));
  for (const auto &[name, bytes] : sections) {
    putU32(out, static_cast<uint32_t>(name.size()));
    out += name;
    putU64(out, bytes.size());
    out += bytes;
  }
  return out;
}

std::optional<Package> parse(const std::string &bytes,
                             const std::string &target, std::string &error) {
  const size_t header = sizeof(kMagic) + 8;
  if (bytes.size() < header || std::memcmp(bytes.data(), kMagic, 8) != 0) {
    error = "not a v4a package (no V4APKG header)";
    return std::nullopt;
  }
  Package p;
  p.formatVersion = getU32(bytes, 8);
  if (p.formatVersion != kFormatVersion) {
    error = "package format version " + std::to_string(p.formatVersion) +
            ", this runtime reads version " + std::to_string(kFormatVersion);
    return std::nullopt;
  }
  uint32_t count = getU32(bytes, 12);
  if (count > kMaxSections) {
    error = "the package lists " + std::to_string(count) +
            " sections, more than " + std::to_string(kMaxSections);
    return std::nullopt;
  }
  std::map<std::string, std::string> sections;
  size_t at = header;
  for (uint32_t i = 0; i < count; ++i) {
    if (bytes.size() - at < 4) {
      error = "the package is truncated in section " + std::to_string(i);
      return std::nullopt;
    }
    uint32_t nameBytes = getU32(bytes, at);
    at += 4;
    if (nameBytes > kMaxSectionName || bytes.size() - at < nameBytes + 8ull) {
      error = "the package is truncated in section " + std::to_string(i);
      return std::nullopt;
    }
    std::string name = bytes.substr(at, nameBytes);
    at += nameBytes;
    uint64_t size = getU64(bytes, at);
    at += 8;
    if (size > bytes.size() - at) {
      error = "section '" + name + "' holds " + std::to_string(size) +
              " bytes but the package has " +
              std::to_string(bytes.size() - at) + " left: truncated";
      return std::nullopt;
    }
    if (!sections.emplace(name, bytes.substr(at, size)).second) {
      error = "section '" + name + "' appears twice";
      return std::nullopt;
    }
    at += size;
  }
  if (at != bytes.size()) {
    error = "the package has " + std::to_string(bytes.size() - at) +
            " bytes after its last section";
    return std::nullopt;
  }
  for (const char *name : {"manifest", "config", "model", "layers", "functions",
                           "schedule", "ptx"})
    if (!sections.count(name)) {
      error = std::string("the package lacks section '") + name + "'";
      return std::nullopt;
    }
  Reader manifest("manifest", sections["manifest"], error);
  if (!readManifest(manifest, p))
    return std::nullopt;
  if (!target.empty() && p.target != target) {
    error = "the package targets " + p.target + ", not " + target;
    return std::nullopt;
  }
  p.configJson = sections["config"];
  if (hashText(p.configJson) != p.configHash) {
    error =
        "the package's configuration does not match its hash " + p.configHash;
    return std::nullopt;
  }
  Reader model("model", sections["model"], error);
  if (!readModel(model, p.config) || !checkModel(model, p.config))
    return std::nullopt;
  int64_t layers = p.config.numLayers();
  if (layers < 1 || layers > kMaxCount) {
    error = "the package's model has " + std::to_string(layers) + " layers";
    return std::nullopt;
  }
  Reader layerLines("layers", sections["layers"], error);
  Reader functions("functions", sections["functions"], error);
  if (!readLayers(layerLines, p.layers, layers) ||
      !readFunctions(functions, p.functions))
    return std::nullopt;
  Reader schedule("schedule", sections["schedule"], error);
  if (!readSchedule(schedule, p.calls, static_cast<int64_t>(p.functions.size()),
                    layers))
    return std::nullopt;
  p.ptx = sections["ptx"];
  p.cubin = sections["cubin"];
  return p;
}

std::optional<Package> read(const std::string &path, const std::string &target,
                            std::string &error) {
  std::optional<std::string> bytes =
      io::readFile(path, kMaxPackageBytes, "package", error);
  if (!bytes)
    return std::nullopt;
  std::optional<Package> package = parse(*bytes, target, error);
  if (!package)
    error = path + ": " + error;
  return package;
}

} // namespace v4a::pkg
