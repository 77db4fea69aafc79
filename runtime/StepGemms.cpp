//===- StepGemms.cpp - the library products of a step function ------------===//

#include "runtime/StepGemms.h"

#include <algorithm>
#include <cstring>
#include <tuple>

namespace v4a::rt {

namespace {

/// Hands out distinct addresses that are never dereferenced, sums the
/// temporaries as a workspace would place them, and records every product
/// instead of running it.
class RecordingDevice : public HostDevice {
public:
  explicit RecordingDevice(std::vector<GemmCall> &calls) : calls(calls) {}
  void *allocate(int64_t bytes, std::string &) override {
    void *address = reinterpret_cast<void *>(next);
    // A gap between buffers: an overrun would land outside any of them.
    placed += workspaceBytes(bytes);
    next += static_cast<uintptr_t>(workspaceBytes(bytes) + kWorkspaceAlignment);
    return address;
  }
  void release(void *) override {}
  bool copyOnDevice(void *to, const void *from, int64_t bytes,
                    std::string &) override {
    queue({{from, bytes, false}, {to, bytes, true}});
    return true;
  }
  bool readBack(void *host, const void *, int64_t bytes,
                std::string &) override {
    std::memset(host, 0, static_cast<size_t>(bytes));
    return true;
  }
  bool launchKernel(const std::string &, std::array<unsigned, 3>,
                    std::array<unsigned, 3>, unsigned, std::vector<void *>,
                    const std::vector<MemoryAccess> &touches,
                    std::string &) override {
    queue(touches);
    return true;
  }
  bool gemm(const GemmCall &call, bool &done, std::string &) override {
    queue(gemmTouches(call));
    GemmCall shape = call;
    shape.a = shape.b = shape.aScale = shape.bScale = nullptr;
    shape.d = nullptr;
    calls.push_back(shape);
    done = true;
    return true;
  }

  bool comparesGemms() const override { return false; }

  uintptr_t next = uintptr_t(1) << 40;
  /// Workspace bytes of the allocations so far.
  int64_t placed = 0;
  /// With a schedule: the ops as it places them, and per op the longest
  /// chain of waiting ops that ends with it.
  StreamSchedule *schedule = nullptr;
  std::vector<int64_t> depths;

private:
  void queue(const std::vector<MemoryAccess> &touches) {
    if (!schedule)
      return;
    int64_t before = 0;
    // The op follows the last one on its stream and those it waits for.
    StreamSchedule::Placement placement = schedule->place(touches);
    for (int op = schedule->size() - 2; op >= 0; --op)
      if (schedule->stream(op) == placement.stream) {
        before = depths[op];
        break;
      }
    for (int op : placement.waits)
      before = std::max(before, depths[op]);
    depths.push_back(before + 1);
  }

  std::vector<GemmCall> &calls;
};

/// Runs `function`'s host program for a step of `tokens` tokens at context
/// bound `context` over a recording device.
bool recordStep(const step::Function &function, int64_t tokens, int64_t context,
                RecordingDevice &device, std::string &error) {
  std::vector<BufferArg> args;
  int64_t bound = context;
  for (const step::Arg &arg : function.args) {
    BufferArg buffer;
    if (step::isHostArg(arg)) {
      // Host memory the program reads.
      args.push_back({&bound, {1}});
      continue;
    }
    if (arg.element == step::Element::Bytes) {
      buffer.shape = {int64_t(1) << 40};
    } else {
      for (int64_t d : arg.shape)
        buffer.shape.push_back(d < 0 ? tokens : d);
    }
    // Only addresses are handed out: a size past 2^62 is refused before its
    // arithmetic can wrap.
    int64_t bytes = step::elementBytes(arg.element);
    for (int64_t d : buffer.shape)
      if (d < 0 || __builtin_mul_overflow(bytes, d, &bytes) ||
          bytes > (int64_t(1) << 62)) {
        error = function.name + ": argument '" + arg.bind +
                "' is larger than 2^62 bytes";
        return false;
      }
    buffer.data = device.allocate(bytes, error);
    args.push_back(buffer);
  }
  device.placed = 0;
  return runHostProgram(function, args, device, error);
}

} // namespace

bool stepGemms(const step::Function &function, int64_t tokens,
               std::vector<GemmCall> &calls, std::string &error) {
  RecordingDevice device(calls);
  // Product shapes follow from the token count alone.
  return recordStep(function, tokens, tokens, device, error);
}

bool stepTemporaryBytes(const step::Function &function, int64_t tokens,
                        int64_t context, int64_t &bytes, std::string &error) {
  std::vector<GemmCall> calls;
  RecordingDevice device(calls);
  if (!recordStep(function, tokens, context, device, error))
    return false;
  bytes = device.placed;
  return true;
}

bool stepGraphShape(const step::Function &function, int64_t tokens,
                    int64_t context, int streams, GraphShape &shape,
                    std::string &error) {
  std::vector<GemmCall> calls;
  RecordingDevice device(calls);
  StreamSchedule schedule(streams);
  device.schedule = &schedule;
  if (!recordStep(function, tokens, context, device, error))
    return false;
  shape.ops = static_cast<int64_t>(device.depths.size());
  shape.depth = device.depths.empty() ? 0
                                      : *std::max_element(device.depths.begin(),
                                                          device.depths.end());
  return true;
}

bool sameGemmShape(const GemmCall &a, const GemmCall &b) {
  auto key = [](const GemmCall &c) {
    return std::make_tuple(c.type, c.m, c.n, c.k, c.lda, c.ldb, c.ldd, c.batch,
                           c.strideA, c.strideB, c.strideD);
  };
  return key(a) == key(b);
}

bool distinctStepProducts(const std::vector<step::Function> &functions,
                          const std::vector<step::Call> &calls,
                          const std::vector<int64_t> &tokenCounts,
                          std::vector<StepProduct> &products,
                          std::string &error) {
  std::vector<bool> seen(functions.size(), false);
  for (const step::Call &call : calls) {
    if (call.layer < 0 || call.function < 0 ||
        call.function >= static_cast<int>(functions.size()) ||
        seen[call.function])
      continue;
    seen[call.function] = true;
    const step::Function &function = functions[call.function];
    // Functions without a host program (the CPU's) issue no products.
    if (function.host.ops.empty())
      continue;
    for (int64_t tokens : tokenCounts) {
      std::vector<GemmCall> issued;
      if (!stepGemms(function, tokens, issued, error))
        return false;
      for (const GemmCall &c : issued)
        if (std::none_of(
                products.begin(), products.end(),
                [&](const StepProduct &p) { return sameGemmShape(p.call, c); }))
          products.push_back({call.function, tokens, c});
    }
  }
  return true;
}

/// The bytes `rows` rows of `cols` elements, `ld` apart, in `batch` batches
/// `stride` apart, span from their first.
static int64_t stridedBytes(int64_t batch, int64_t stride, int64_t rows,
                            int64_t ld, int64_t cols, int64_t elementBytes) {
  if (batch == 0 || rows == 0 || cols == 0)
    return 0;
  return ((batch - 1) * stride + (rows - 1) * ld + cols) * elementBytes;
}

std::vector<MemoryAccess> gemmTouches(const GemmCall &call) {
  bool fp8 = call.type == step::HostOp::GemmType::FP8;
  int64_t inputBytes = fp8 ? 1 : 2;
  int64_t resultBytes = call.type == step::HostOp::GemmType::BF16F32 ? 4 : 2;
  int64_t rowsB = fp8 ? (call.n + 3) / 4 * 4 : call.n;
  std::vector<MemoryAccess> touches = {
      {call.a,
       stridedBytes(call.batch, call.strideA, call.m, call.lda, call.k,
                    inputBytes),
       false},
      {call.b,
       stridedBytes(call.batch, call.strideB, rowsB, call.ldb, call.k,
                    inputBytes),
       false},
      {call.d,
       stridedBytes(call.batch, call.strideD, call.n, call.ldd, call.m,
                    resultBytes),
       true}};
  if (fp8) {
    int64_t kBlocks = (call.k + 127) / 128;
    touches.push_back({call.aScale,
                       (call.m + 127) / 128 * ((kBlocks + 3) / 4 * 4) * 4,
                       false});
    touches.push_back({call.bScale, kBlocks * rowsB * 4, false});
  }
  return touches;
}

std::string describeGemm(const GemmCall &c) {
  return std::string(step::HostOp::gemmTypeName(c.type)) + " gemm " +
         std::to_string(c.batch) + " x " + std::to_string(c.n) + " x " +
         std::to_string(c.m) + " x " + std::to_string(c.k);
}

} // namespace v4a::rt
