//===- HostProgram.cpp - run the host side of a GPU step function ---------===//

#include "runtime/HostProgram.h"

#include "core/Numerics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <set>

namespace v4a::rt {

HostDevice::~HostDevice() = default;

bool HostDevice::gemm(const GemmCall &, bool &done, std::string &) {
  done = false;
  return true;
}

namespace {

using Op = step::HostOp;
using Kind = Op::Kind;

constexpr int64_t kMaxRank = 8;
/// Launch extents of the GPUs v4a targets.
constexpr int64_t kMaxGrid[3] = {(int64_t(1) << 31) - 1, 65535, 65535};
constexpr int64_t kMaxBlockThreads = 1024;

/// A value of the program: an integer, or a row-major buffer.
struct Value {
  bool buffer = false;
  int64_t scalar = 0;
  char *base = nullptr;
  int64_t elementBytes = 1;
  std::vector<int64_t> sizes;

  int64_t elements() const {
    int64_t n = 1;
    for (int64_t s : sizes)
      n *= s;
    return n;
  }
};

bool fail(std::string &error, const std::string &function, size_t at,
          const std::string &message) {
  error = function + ": host op " + std::to_string(at) + ": " + message;
  return false;
}

/// The operand count and data size an op of `kind` needs, at least.
bool checkShape(const Op &op, std::string &why) {
  size_t operands = op.operands.size(), data = op.data.size();
  auto need = [&](bool ok, const char *what) {
    if (!ok)
      why = what;
    return ok;
  };
  switch (op.kind) {
  case Kind::Const:
    return need(operands == 0 && data == 1, "a constant takes one value");
  case Kind::Dim:
    return need(operands == 1 && data == 1,
                "a dimension takes a buffer and an index");
  case Kind::Arith: {
    if (!need(data == 1, "arithmetic takes one opcode"))
      return false;
    auto code = static_cast<Op::Arith>(op.data[0]);
    if (op.data[0] < 0 || op.data[0] > static_cast<int64_t>(Op::Arith::Uge))
      return need(false, "unknown arithmetic opcode");
    size_t arity = code == Op::Arith::Select    ? 3
                   : code == Op::Arith::Trunc32 ? 1
                                                : 2;
    return need(operands == arity, "wrong operand count for arithmetic");
  }
  case Kind::Alloc:
  case Kind::View: {
    size_t prefix = op.kind == Kind::Alloc ? 1 : 0;
    if (!need(data >= prefix + 1, "a shape needs its rank"))
      return false;
    int64_t rank = op.data[prefix];
    if (!need(rank >= 0 && rank <= kMaxRank &&
                  data == prefix + 1 + static_cast<size_t>(rank),
              "a shape's rank does not match its dimensions"))
      return false;
    size_t dynamic = 0;
    for (int64_t i = 0; i < rank; ++i) {
      int64_t d = op.data[prefix + 1 + i];
      if (d == -1)
        ++dynamic;
      else if (!need(d >= 0, "a negative dimension"))
        return false;
    }
    size_t base = op.kind == Kind::View ? 1 : 0;
    if (op.kind == Kind::Alloc && !need(op.data[0] == 1 || op.data[0] == 2 ||
                                            op.data[0] == 4 || op.data[0] == 8,
                                        "element bytes must be 1, 2, 4 or 8"))
      return false;
    return need(operands == base + dynamic,
                "operands do not match the dynamic dimensions");
  }
  case Kind::Copy:
    return need(operands == 2 && data == 0, "a copy takes two buffers");
  case Kind::Load:
    return need(operands >= 1 && data == 1 &&
                    (op.data[0] == 1 || op.data[0] == 2 || op.data[0] == 4 ||
                     op.data[0] == 8),
                "a load takes a buffer, indices and element bytes");
  case Kind::Launch:
    if (!need(!op.kernel.empty() && operands == Op::kLaunchExtents + data,
              "a launch takes a kernel, 7 extents and one kind per argument"))
      return false;
    for (int64_t kind : op.data)
      if (!need(kind >= 0 &&
                    kind <= static_cast<int64_t>(Op::ParamKind::ReadBuffer),
                "unknown kernel argument kind"))
        return false;
    return true;
  case Kind::Gemm: {
    bool fp8 =
        data == 2 && op.data[0] == static_cast<int64_t>(Op::GemmType::FP8);
    bool bf16 = data == 2 &&
                (op.data[0] == static_cast<int64_t>(Op::GemmType::BF16) ||
                 op.data[0] == static_cast<int64_t>(Op::GemmType::BF16F32));
    return need((bf16 || fp8) && operands == (fp8 ? 15u : 13u) &&
                    op.data[1] > 0,
                "a gemm takes A, B, D, (fp8: two scales,) 10 sizes, a known "
                "type and the offset of its fallback launch");
  }
  }
  return need(false, "unknown op kind");
}

bool hasResult(Kind kind) {
  return kind == Kind::Const || kind == Kind::Dim || kind == Kind::Arith ||
         kind == Kind::Alloc || kind == Kind::View || kind == Kind::Load;
}

/// Whether the op's operand `i` must be a buffer (else an integer).
bool operandIsBuffer(const Op &op, size_t i) {
  switch (op.kind) {
  case Kind::Dim:
  case Kind::Copy:
    return true;
  case Kind::Gemm:
    return i <
           (op.data[0] == static_cast<int64_t>(Op::GemmType::FP8) ? 5u : 3u);
  case Kind::View:
  case Kind::Load:
    return i == 0;
  case Kind::Launch:
    return i >= Op::kLaunchExtents && Op::isBuffer(static_cast<Op::ParamKind>(
                                          op.data[i - Op::kLaunchExtents]));
  default:
    return false;
  }
}

bool checkedMul(int64_t a, int64_t b, int64_t &out) {
  return !__builtin_mul_overflow(a, b, &out);
}

std::optional<int64_t> arith(Op::Arith code, const std::vector<int64_t> &v) {
  using A = Op::Arith;
  auto u = [&](size_t i) { return static_cast<uint64_t>(v[i]); };
  switch (code) {
  case A::Add:
    return static_cast<int64_t>(u(0) + u(1));
  case A::Sub:
    return static_cast<int64_t>(u(0) - u(1));
  case A::Mul:
    return static_cast<int64_t>(u(0) * u(1));
  case A::DivS:
  case A::RemS:
  case A::CeilDivS:
  case A::FloorDivS: {
    if (v[1] == 0 ||
        (v[0] == std::numeric_limits<int64_t>::min() && v[1] == -1))
      return std::nullopt;
    int64_t q = v[0] / v[1], r = v[0] % v[1];
    if (code == A::RemS)
      return r;
    if (code == A::CeilDivS && r != 0 && ((r > 0) == (v[1] > 0)))
      return q + 1;
    if (code == A::FloorDivS && r != 0 && ((r < 0) != (v[1] < 0)))
      return q - 1;
    return q;
  }
  case A::MinS:
    return std::min(v[0], v[1]);
  case A::MaxS:
    return std::max(v[0], v[1]);
  case A::DivU:
  case A::RemU:
    if (u(1) == 0)
      return std::nullopt;
    return static_cast<int64_t>(code == A::DivU ? u(0) / u(1) : u(0) % u(1));
  case A::MinU:
    return static_cast<int64_t>(std::min(u(0), u(1)));
  case A::MaxU:
    return static_cast<int64_t>(std::max(u(0), u(1)));
  case A::Select:
    return v[0] ? v[1] : v[2];
  case A::Trunc32:
    return static_cast<int64_t>(static_cast<int32_t>(u(0)));
  case A::Eq:
    return v[0] == v[1];
  case A::Ne:
    return v[0] != v[1];
  case A::Slt:
    return v[0] < v[1];
  case A::Sle:
    return v[0] <= v[1];
  case A::Sgt:
    return v[0] > v[1];
  case A::Sge:
    return v[0] >= v[1];
  case A::Ult:
    return u(0) < u(1);
  case A::Ule:
    return u(0) <= u(1);
  case A::Ugt:
    return u(0) > u(1);
  case A::Uge:
    return u(0) >= u(1);
  }
  return std::nullopt;
}

/// Temporary buffers of one run, released at the end.
class Temporaries {
public:
  explicit Temporaries(HostDevice &device) : device(device) {}
  ~Temporaries() {
    for (void *memory : memory)
      device.release(memory);
  }
  void keep(void *buffer) { memory.push_back(buffer); }

private:
  HostDevice &device;
  std::vector<void *> memory;
};

class Interpreter {
public:
  Interpreter(const step::Function &function, HostDevice &device,
              std::string &error)
      : function(function), device(device), error(error), temporaries(device) {}

  bool run(const std::vector<BufferArg> &args);

private:
  bool fail(size_t at, const std::string &message) {
    return rt::fail(error, function.name, at, message);
  }
  bool shapeOf(size_t at, const Op &op, size_t prefix,
               std::vector<int64_t> &sizes);
  bool launch(size_t at, const Op &op);
  bool gemm(size_t at, const Op &op);

  const step::Function &function;
  HostDevice &device;
  std::string &error;
  Temporaries temporaries;
  std::vector<Value> values;
  /// Launches a library GEMM has done the work of.
  std::vector<bool> skipped;

  /// V4A_GEMM_COMPARE=1: a product the library ran into `libraryD`, to be
  /// compared with its fallback launch `launch` once that has run; the step
  /// then goes on with the library's result.
  struct Comparison {
    size_t gemm = 0, launch = 0;
    GemmCall call;
    void *libraryD = nullptr;
    int64_t bytes = 0;
  };
  std::vector<Comparison> comparisons;
  bool compareWithFallback(const Comparison &c);
};

} // namespace

bool comparingGemms() {
  static const bool compare = [] {
    const char *v = std::getenv("V4A_GEMM_COMPARE");
    return v && std::string(v) == "1";
  }();
  return compare;
}

namespace {

/// The distance of two bf16 values in units of the last place of `b`.
double ulpDistance(uint16_t a, uint16_t b) {
  float x = num::fromBF16Bits(a), y = num::fromBF16Bits(b);
  if (std::isnan(x) != std::isnan(y))
    return INFINITY;
  if (x == y || std::isnan(x))
    return 0.0;
  int exponent = 0;
  std::frexp(y == 0.0f ? x : y, &exponent);
  return std::fabs(double(x) - double(y)) / std::ldexp(1.0, exponent - 8);
}

/// Whether `rows` rows of `cols` elements, `ld` apart, in `batch` batches
/// `stride` apart, lie inside a buffer of `elements`.
bool fitsStrided(int64_t batch, int64_t stride, int64_t rows, int64_t ld,
                 int64_t cols, int64_t elements) {
  if (batch == 0 || rows == 0 || cols == 0)
    return true;
  int64_t last = 0, part = 0;
  return ld >= cols && stride >= 0 && checkedMul(batch - 1, stride, last) &&
         checkedMul(rows - 1, ld, part) &&
         !__builtin_add_overflow(last, part, &last) &&
         !__builtin_add_overflow(last, cols, &last) && last <= elements;
}

bool Interpreter::gemm(size_t at, const Op &op) {
  bool fp8 = op.data[0] == static_cast<int64_t>(Op::GemmType::FP8);
  size_t first = fp8 ? 5 : 3;
  const Value &a = values[op.operands[0]], &b = values[op.operands[1]],
              &d = values[op.operands[2]];
  // Sizes past 2^40 elements are refused before any padding arithmetic.
  constexpr int64_t kMaxExtent = int64_t(1) << 40;
  int64_t s[10];
  for (int i = 0; i < 10; ++i) {
    s[i] = values[op.operands[first + i]].scalar;
    if (s[i] < 0 || s[i] > kMaxExtent)
      return fail(at,
                  "a gemm size " + std::to_string(s[i]) + " outside [0, 2^40]");
  }
  GemmCall call;
  call.type = static_cast<Op::GemmType>(op.data[0]);
  call.m = s[0], call.n = s[1], call.k = s[2], call.lda = s[3], call.ldb = s[4],
  call.ldd = s[5], call.batch = s[6], call.strideA = s[7], call.strideB = s[8],
  call.strideD = s[9];
  int64_t inputBytes = fp8 ? 1 : 2;
  int64_t resultBytes = call.type == Op::GemmType::BF16F32 ? 4 : 2;
  if (a.elementBytes != inputBytes || b.elementBytes != inputBytes ||
      d.elementBytes != resultBytes)
    return fail(at, std::string("a ") + Op::gemmTypeName(call.type) +
                        " gemm over buffers of other elements");
  // fp8: B's rows and the scale tables are padded as the type says.
  int64_t rowsB = fp8 ? (call.n + 3) / 4 * 4 : call.n;
  std::string outside = "a gemm of " + std::to_string(call.batch) + " x " +
                        std::to_string(call.n) + " x " +
                        std::to_string(call.m) + " x " +
                        std::to_string(call.k) + " reaches outside its buffers";
  if (!fitsStrided(call.batch, call.strideA, call.m, call.lda, call.k,
                   a.elements()) ||
      !fitsStrided(call.batch, call.strideB, rowsB, call.ldb, call.k,
                   b.elements()) ||
      !fitsStrided(call.batch, call.strideD, call.n, call.ldd, call.m,
                   d.elements()))
    return fail(at, outside);
  if (fp8) {
    const Value &sa = values[op.operands[3]], &sb = values[op.operands[4]];
    int64_t kBlocks = (call.k + 127) / 128;
    int64_t aScales = (call.m + 127) / 128 * ((kBlocks + 3) / 4 * 4);
    if (call.batch != 1 || call.lda != call.k || call.ldb != call.k ||
        call.ldd != call.m)
      return fail(at, "an fp8 gemm over strided or batched matrices");
    if (sa.elementBytes != 4 || sb.elementBytes != 4 ||
        sa.elements() < aScales || sb.elements() < kBlocks * rowsB)
      return fail(at, outside);
    call.aScale = sa.base, call.bScale = sb.base;
  }
  call.a = a.base, call.b = b.base, call.d = d.base;
  bool done = false;
  std::string why;
  if (comparingGemms() && device.comparesGemms()) {
    Comparison c{at, at + static_cast<size_t>(op.data[1]), call, nullptr,
                 d.elements() * d.elementBytes};
    c.libraryD = device.allocate(c.bytes, why);
    if (!c.libraryD)
      return fail(at, why);
    // Released with the program's temporaries, also when the step fails.
    temporaries.keep(c.libraryD);
    // What the product does not write stays as D holds it.
    if (!device.copyOnDevice(c.libraryD, d.base, c.bytes, why))
      return fail(at, why);
    c.call.d = c.libraryD;
    if (!device.gemm(c.call, done, why))
      return fail(at, why);
    if (done)
      comparisons.push_back(c);
    return true;
  }
  if (!device.gemm(call, done, why))
    return fail(at, why);
  if (done)
    skipped[at + op.data[1]] = true;
  return true;
}

bool Interpreter::compareWithFallback(const Comparison &c) {
  const GemmCall &g = c.call;
  if (g.type == Op::GemmType::BF16F32) {
    // f32 results: only bf16 ones are compared in ulps.
    std::string why;
    void *d = values[function.host.ops[c.gemm].operands[2]].base;
    return device.copyOnDevice(d, c.libraryD, c.bytes, why) ||
           fail(c.gemm, why);
  }
  std::vector<uint16_t> library(c.bytes / 2), fallback(c.bytes / 2);
  std::string why;
  void *d = values[function.host.ops[c.gemm].operands[2]].base;
  if (!device.readBack(library.data(), c.libraryD, c.bytes, why) ||
      !device.readBack(fallback.data(), d, c.bytes, why))
    return fail(c.gemm, why);
  int64_t differ = 0, count = 0;
  double worst = 0.0, err2 = 0.0, ref2 = 0.0;
  for (int64_t i = 0; i < g.batch; ++i)
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t m = 0; m < g.m; ++m) {
        int64_t at = i * g.strideD + n * g.ldd + m;
        double ulps = ulpDistance(library[at], fallback[at]);
        double x = num::fromBF16Bits(library[at]),
               y = num::fromBF16Bits(fallback[at]);
        ++count;
        differ += ulps > 0 ? 1 : 0;
        worst = std::max(worst, ulps);
        err2 += (x - y) * (x - y);
        ref2 += y * y;
      }
  std::fprintf(stderr,
               "gemm compare %s op %zu: %s batch %lld, M %lld, N %lld, K %lld: "
               "%lld of %lld elements differ from the fallback, at most %g "
               "ulp, rel %.3g\n",
               function.name.c_str(), c.gemm, Op::gemmTypeName(g.type),
               static_cast<long long>(g.batch), static_cast<long long>(g.n),
               static_cast<long long>(g.m), static_cast<long long>(g.k),
               static_cast<long long>(differ), static_cast<long long>(count),
               worst, ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2));
  return device.copyOnDevice(d, c.libraryD, c.bytes, why) || fail(c.gemm, why);
}

bool Interpreter::shapeOf(size_t at, const Op &op, size_t prefix,
                          std::vector<int64_t> &sizes) {
  int64_t rank = op.data[prefix];
  size_t next = op.kind == Kind::View ? 1 : 0;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t d = op.data[prefix + 1 + i];
    if (d == -1)
      d = values[op.operands[next++]].scalar;
    if (d < 0)
      return fail(at, "a negative size " + std::to_string(d));
    sizes.push_back(d);
  }
  return true;
}

bool Interpreter::launch(size_t at, const Op &op) {
  int64_t extents[Op::kLaunchExtents];
  for (size_t i = 0; i < Op::kLaunchExtents; ++i)
    extents[i] = values[op.operands[i]].scalar;
  for (int i = 0; i < 3; ++i)
    if (extents[i] == 0)
      return true; // an empty grid: nothing to do
  int64_t threads = 1;
  for (int i = 0; i < 3; ++i) {
    if (extents[i] < 0 || extents[i] > kMaxGrid[i])
      return fail(at, op.kernel + ": grid extent " +
                          std::to_string(extents[i]) + " outside 1.." +
                          std::to_string(kMaxGrid[i]));
    if (extents[3 + i] < 1 || extents[3 + i] > kMaxBlockThreads)
      return fail(at, op.kernel + ": block extent " +
                          std::to_string(extents[3 + i]) + " outside 1.." +
                          std::to_string(kMaxBlockThreads));
    threads *= extents[3 + i];
  }
  if (threads > kMaxBlockThreads)
    return fail(at, op.kernel + ": " + std::to_string(threads) +
                        " threads per block, more than " +
                        std::to_string(kMaxBlockThreads));
  // Every argument slot is 8 bytes wide (an i32 uses the low half); the
  // storage never moves once the pointers are taken.
  size_t slots = 0;
  int64_t sharedBytes = extents[6];
  if (sharedBytes < 0 || sharedBytes > Op::kMaxSharedBytes)
    return fail(at, op.kernel + ": " + std::to_string(sharedBytes) +
                        " bytes of dynamic shared memory, outside 0.." +
                        std::to_string(Op::kMaxSharedBytes));
  for (size_t i = Op::kLaunchExtents; i < op.operands.size(); ++i) {
    const Value &v = values[op.operands[i]];
    slots += v.buffer ? 3 + 2 * v.sizes.size() : 1;
  }
  std::vector<int64_t> storage;
  storage.reserve(slots);
  std::vector<void *> params;
  std::vector<MemoryAccess> touches;
  auto push = [&](int64_t value) {
    storage.push_back(value);
    params.push_back(&storage.back());
  };
  for (size_t i = Op::kLaunchExtents; i < op.operands.size(); ++i) {
    const Value &v = values[op.operands[i]];
    auto kind = static_cast<Op::ParamKind>(op.data[i - Op::kLaunchExtents]);
    if (!Op::isBuffer(kind)) {
      if (kind == Op::ParamKind::I32) {
        int32_t narrow = static_cast<int32_t>(v.scalar);
        int64_t slot = 0;
        std::memcpy(&slot, &narrow, sizeof(narrow));
        push(slot);
      } else {
        push(v.scalar);
      }
      continue;
    }
    touches.push_back(
        {v.base, v.elements() * v.elementBytes, kind == Op::ParamKind::Buffer});
    // The memref descriptor, expanded: allocated and aligned pointers,
    // offset, sizes, row-major strides.
    push(reinterpret_cast<int64_t>(v.base));
    push(reinterpret_cast<int64_t>(v.base));
    push(0);
    for (int64_t s : v.sizes)
      push(s);
    int64_t stride = 1;
    std::vector<int64_t> strides(v.sizes.size());
    for (size_t d = v.sizes.size(); d-- > 0;) {
      strides[d] = stride;
      stride *= v.sizes[d];
    }
    for (int64_t s : strides)
      push(s);
  }
  std::string why;
  if (!device.launchKernel(
          op.kernel,
          {static_cast<unsigned>(extents[0]), static_cast<unsigned>(extents[1]),
           static_cast<unsigned>(extents[2])},
          {static_cast<unsigned>(extents[3]), static_cast<unsigned>(extents[4]),
           static_cast<unsigned>(extents[5])},
          static_cast<unsigned>(sharedBytes), params, touches, why))
    return fail(at, why);
  return true;
}

bool Interpreter::run(const std::vector<BufferArg> &args) {
  if (args.size() != function.args.size())
    return rt::fail(error, function.name, 0,
                    "takes " + std::to_string(function.args.size()) +
                        " arguments, got " + std::to_string(args.size()));
  values.assign(function.host.values, Value());
  skipped.assign(function.host.ops.size(), false);
  for (size_t i = 0; i < args.size(); ++i) {
    Value &v = values[i];
    v.buffer = true;
    v.base = static_cast<char *>(args[i].data);
    v.elementBytes = step::elementBytes(function.args[i].element);
    v.sizes = args[i].shape;
  }
  for (size_t at = 0; at < function.host.ops.size(); ++at) {
    const Op &op = function.host.ops[at];
    Value result;
    switch (op.kind) {
    case Kind::Const:
      result.scalar = op.data[0];
      break;
    case Kind::Dim: {
      const Value &buffer = values[op.operands[0]];
      if (op.data[0] < 0 ||
          op.data[0] >= static_cast<int64_t>(buffer.sizes.size()))
        return fail(at, "dimension " + std::to_string(op.data[0]) +
                            " of a rank-" +
                            std::to_string(buffer.sizes.size()) + " buffer");
      result.scalar = buffer.sizes[op.data[0]];
      break;
    }
    case Kind::Arith: {
      std::vector<int64_t> operands;
      for (int id : op.operands)
        operands.push_back(values[id].scalar);
      std::optional<int64_t> value =
          arith(static_cast<Op::Arith>(op.data[0]), operands);
      if (!value)
        return fail(at, "division by zero");
      result.scalar = *value;
      break;
    }
    case Kind::Alloc: {
      result.buffer = true;
      result.elementBytes = op.data[0];
      if (!shapeOf(at, op, 1, result.sizes))
        return false;
      int64_t bytes = result.elementBytes;
      for (int64_t s : result.sizes)
        if (!checkedMul(bytes, s, bytes))
          return fail(at, "a temporary buffer's size overflows");
      void *memory = device.allocate(bytes, error);
      if (!memory)
        return fail(at, error);
      temporaries.keep(memory);
      result.base = static_cast<char *>(memory);
      break;
    }
    case Kind::View: {
      const Value &source = values[op.operands[0]];
      result = source;
      result.sizes.clear();
      if (!shapeOf(at, op, 0, result.sizes))
        return false;
      int64_t elements = 1;
      for (int64_t s : result.sizes)
        if (!checkedMul(elements, s, elements))
          return fail(at, "a view's size overflows");
      if (elements != source.elements())
        return fail(at, "a view of " + std::to_string(elements) +
                            " elements over a buffer of " +
                            std::to_string(source.elements()));
      break;
    }
    case Kind::Copy: {
      const Value &from = values[op.operands[0]], &to = values[op.operands[1]];
      int64_t bytes = from.elements() * from.elementBytes;
      if (bytes != to.elements() * to.elementBytes)
        return fail(at, "a copy between buffers of different sizes");
      std::string why;
      if (bytes > 0 && !device.copyOnDevice(to.base, from.base, bytes, why))
        return fail(at, why);
      continue;
    }
    case Kind::Load: {
      const Value &buffer = values[op.operands[0]];
      if (op.operands.size() - 1 != buffer.sizes.size())
        return fail(at, "a load with the wrong number of indices");
      int64_t element = 0;
      for (size_t d = 1; d < op.operands.size(); ++d) {
        int64_t index = values[op.operands[d]].scalar;
        int64_t size = buffer.sizes[d - 1];
        if (index < 0 || index >= size)
          return fail(at, "index " + std::to_string(index) +
                              " outside a dimension of " +
                              std::to_string(size));
        element = element * size + index;
      }
      int64_t bytes = op.data[0];
      if (bytes != buffer.elementBytes)
        return fail(at, "a load of the wrong element size");
      // A host argument (validateHostProgram): host memory, no device read.
      uint64_t raw = 0;
      std::memcpy(&raw, buffer.base + element * bytes, bytes);
      // Sign-extend from the element's width.
      int shift = 64 - 8 * static_cast<int>(bytes);
      result.scalar = shift ? static_cast<int64_t>(raw << shift) >> shift
                            : static_cast<int64_t>(raw);
      break;
    }
    case Kind::Launch:
      if (!skipped[at] && !launch(at, op))
        return false;
      for (const Comparison &c : comparisons)
        if (c.launch == at && !compareWithFallback(c))
          return false;
      continue;
    case Kind::Gemm:
      if (!gemm(at, op))
        return false;
      continue;
    }
    values[op.result] = std::move(result);
  }
  return true;
}

} // namespace

bool validateHostProgram(const step::Function &function, std::string &error) {
  const step::HostProgram &program = function.host;
  size_t argCount = function.args.size();
  if (program.values < static_cast<int>(argCount))
    return fail(error, function.name, 0,
                "fewer values than the function's arguments");
  std::vector<int> state(program.values, 0); // 0 undefined, 1 int, 2 buffer
  std::set<size_t> fallbacks;
  for (size_t i = 0; i < argCount; ++i)
    state[i] = 2;
  for (size_t at = 0; at < program.ops.size(); ++at) {
    const Op &op = program.ops[at];
    std::string why;
    if (!checkShape(op, why))
      return fail(error, function.name, at, why);
    for (size_t i = 0; i < op.operands.size(); ++i) {
      int id = op.operands[i];
      if (id < 0 || id >= program.values || state[id] == 0)
        return fail(error, function.name, at,
                    "operand " + std::to_string(id) + " is not defined");
      if ((state[id] == 2) != operandIsBuffer(op, i))
        return fail(error, function.name, at,
                    "operand " + std::to_string(id) + " is not " +
                        (operandIsBuffer(op, i) ? "a buffer" : "an integer"));
    }
    if (op.kind == Kind::Load &&
        (op.operands[0] >= static_cast<int>(argCount) ||
         !step::isHostArg(function.args[op.operands[0]])))
      return fail(error, function.name, at,
                  "a read of device memory on the host (only host arguments "
                  "may be read)");
    bool onDevice = Op::actsOnDevice(op.kind);
    for (int id : op.operands)
      if (onDevice && id < static_cast<int>(argCount) &&
          step::isHostArg(function.args[id]))
        return fail(error, function.name, at,
                    "the host argument '" + function.args[id].bind +
                        "' used on the device");
    if (op.kind == Kind::Gemm &&
        (at + op.data[1] >= program.ops.size() ||
         program.ops[at + op.data[1]].kind != Kind::Launch ||
         !fallbacks.insert(at + op.data[1]).second))
      return fail(error, function.name, at,
                  "a gemm's fallback is not a launch after it of its own");
    if (hasResult(op.kind) != (op.result >= 0))
      return fail(error, function.name, at, "a result where none belongs");
    if (op.result >= 0) {
      if (op.result >= program.values || state[op.result] != 0)
        return fail(error, function.name, at,
                    "result " + std::to_string(op.result) +
                        " is out of range or defined twice");
      state[op.result] =
          op.kind == Kind::Alloc || op.kind == Kind::View ? 2 : 1;
    }
  }
  return true;
}

bool runHostProgram(const step::Function &function,
                    const std::vector<BufferArg> &args, HostDevice &device,
                    std::string &error) {
  if (!validateHostProgram(function, error))
    return false;
  return Interpreter(function, device, error).run(args);
}

} // namespace v4a::rt
