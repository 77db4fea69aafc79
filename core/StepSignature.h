//===- StepSignature.h - the arguments of a compiled step -------*- C++ -*-===//
//
// What the compiler tells the runtime about each compiled step or metadata
// function: its arguments in order, each named by what is bound to it (the
// `v4a.bind` of the IR), with its element type and shape (-1: the step's
// token count; caches are bytes). Outputs are written by the function into
// buffers the caller provides. Plain C++.
//
//===----------------------------------------------------------------------===//

#ifndef V4A_CORE_STEPSIGNATURE_H
#define V4A_CORE_STEPSIGNATURE_H

#include <cstdint>
#include <string>
#include <vector>

namespace v4a::step {

enum class Element { BF16, F32, I32, I64, E4M3, UE8M0, Bytes };

inline int64_t elementBytes(Element element) {
  switch (element) {
  case Element::BF16:
    return 2;
  case Element::F32:
  case Element::I32:
    return 4;
  case Element::I64:
    return 8;
  case Element::E4M3:
  case Element::UE8M0:
  case Element::Bytes:
    return 1;
  }
  return 1;
}

struct Arg {
  std::string bind;
  Element element = Element::F32;
  /// -1 marks the dimension that is the step's token count.
  std::vector<int64_t> shape;
  bool output = false;
};

/// The bind of the step's context bound: one i64 of at least position + 1
/// for every token of the step, which the host knows before the step. It
/// stays in host memory: a GPU step's host program reads it to size the
/// widths that follow from it, and no kernel takes it.
constexpr const char *kContextBind = "context";
inline bool isHostArg(const Arg &arg) { return arg.bind == kContextBind; }

/// The checkpoint tensors a weight argument binds: its bind, or for the
/// stacked weight of merged projections ("a.weight+b.weight",
/// v4a-merge-projections) each part in order, their rows one after another.
inline std::vector<std::string> stackedParts(const std::string &bind) {
  std::vector<std::string> parts;
  size_t begin = 0;
  for (size_t plus; (plus = bind.find('+', begin)) != std::string::npos;
       begin = plus + 1)
    parts.push_back(bind.substr(begin, plus - begin));
  parts.push_back(bind.substr(begin));
  return parts;
}

/// One instruction of a host program: the work a step function compiled
/// for a GPU leaves to the host (sizes, allocations, shape views, copies,
/// kernel launches). Values are numbered; the function's arguments are the
/// first ones, in signature order.
struct HostOp {
  enum class Kind {
    /// result = data[0].
    Const,
    /// result = dimension data[0] of buffer operands[0].
    Dim,
    /// result = Arith(data[0]) of the scalar operands.
    Arith,
    /// A new buffer: data = {element bytes, rank, dims (-1: the next
    /// operand)}.
    Alloc,
    /// The row-major view of buffer operands[0] with shape data = {rank,
    /// dims (-1: the next operand)}.
    View,
    /// Copies buffer operands[0] into operands[1].
    Copy,
    /// result = the integer at element operands[1..] of buffer operands[0],
    /// data = {element bytes}: a host argument (isHostArg), read in host
    /// memory; a host program never reads the device.
    Load,
    /// Launches `kernel`: operands = grid x y z, block x y z, dynamic
    /// shared memory bytes (kLaunchExtents in all), then the kernel's
    /// arguments; data = one ParamKind per argument.
    Launch,
    /// A matrix product a GEMM library may run: for each batch i, rows
    /// n < N and columns m < M (row-major, leading dimensions and batch
    /// strides in elements),
    ///   D[i*sd + n*ldd + m] = sum_k B[i*sb + n*ldb + k] * A[i*sa + m*lda + k]
    /// with f32 sums. operands = {A, B, D, [scales of A and B,] M, N, K,
    /// lda, ldb, ldd, batch, sa, sb, sd}; data = {GemmType, fallback}: op
    /// `fallback` places on is
    /// a launch that computes the same, which the runtime skips when the
    /// library ran the product and runs otherwise.
    Gemm,
  };
  /// Operands of a Launch before the kernel's arguments.
  static constexpr size_t kLaunchExtents = 7;
  /// The dynamic shared memory a launch may ask for: what a block of
  /// sm_90 may have (227 KiB).
  static constexpr int64_t kMaxSharedBytes = 227 * 1024;
  enum class GemmType {
    /// A, B and D bf16.
    BF16,
    /// A and B e4m3, D bf16, batch 1; two more operands after D: A's f32
    /// scales per 128x128 block [ceil(M/128), ceil(ceil(K/128)/4)*4] and
    /// B's per 1x128 block [ceil(K/128), ceil(N/4)*4]; B holds
    /// ceil(N/4)*4 rows (the rows past N zero).
    FP8,
    /// A and B bf16, D f32 (f32 sums kept: the compressors' projections).
    BF16F32,
  };
  /// "bf16", "fp8" or "bf16-f32", as tools and messages name the types.
  static const char *gemmTypeName(GemmType type) {
    switch (type) {
    case GemmType::BF16:
      return "bf16";
    case GemmType::FP8:
      return "fp8";
    case GemmType::BF16F32:
      return "bf16-f32";
    }
    return "?";
  }
  enum class Arith {
    Add,
    Sub,
    Mul,
    DivS,
    RemS,
    CeilDivS,
    FloorDivS,
    MinS,
    MaxS,
    DivU,
    RemU,
    MinU,
    MaxU,
    Select,
    /// Truncation to 32 bits (sign-extended back).
    Trunc32,
    /// Comparisons: result 0 or 1.
    Eq,
    Ne,
    Slt,
    Sle,
    Sgt,
    Sge,
    Ult,
    Ule,
    Ugt,
    Uge,
  };
  /// A kernel argument: an integer, a buffer the kernel may write, or one
  /// it only reads (which lets the runtime run it beside other readers).
  enum class ParamKind { I64, I32, Buffer, ReadBuffer };
  static bool isBuffer(ParamKind kind) {
    return kind == ParamKind::Buffer || kind == ParamKind::ReadBuffer;
  }
  /// Whether an op of `kind` hands its buffers to the device (a host
  /// argument may not be one of them).
  static bool actsOnDevice(Kind kind) {
    return kind == Kind::Launch || kind == Kind::Copy || kind == Kind::Gemm;
  }
  Kind kind = Kind::Const;
  int result = -1;
  std::vector<int> operands;
  std::vector<int64_t> data;
  std::string kernel;
};

struct HostProgram {
  int values = 0;
  std::vector<HostOp> ops;
};

struct Function {
  std::string name;
  std::vector<Arg> args;
  /// For a GPU: what the host does to run the function.
  HostProgram host;
  /// The entry point: called with one pointer per argument, each pointing to
  /// a pointer to the argument's memref descriptor.
  void (*entry)(void **) = nullptr;
};

/// The kernel every GPU package carries for the runtime's copies of a step's
/// inputs and outputs (passes/Conversion/V4AToGPU/TableCopy.h): block row y
/// copies entry y of a table of CopyEntry rows in device memory, in
/// kCopyAlignment-byte accesses (addresses and sizes multiples of it).
inline constexpr const char *kTableCopyKernel = "v4a_copy_table";
struct CopyEntry {
  uint64_t to = 0, from = 0, bytes = 0, unused = 0;
};
inline constexpr int64_t kCopyAlignment = 16;

/// One call of a step: a key's metadata function (layer -1, meta -1), or a
/// layer's step function with the metadata function whose latest outputs it
/// reads (indices into the list of functions).
struct Call {
  int function = -1;
  int meta = -1;
  int64_t layer = -1;
};

} // namespace v4a::step

#endif // V4A_CORE_STEPSIGNATURE_H
