//===- HostProgramTest.cpp - host programs over a device in host memory ---===//
//
// The interpreter of GPU host programs, run against a device whose memory
// is the host's and whose kernels are C++ functions: sizes from argument
// shapes and host arguments, temporaries, views, copies and launch
// parameters, no read of device memory, and
// the errors of malformed programs and out-of-range values.
//
//===----------------------------------------------------------------------===//

#include "runtime/HostProgram.h"
#include "runtime/StepGemms.h"

#include "core/Numerics.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>

using namespace v4a;
using Op = step::HostOp;
using Kind = Op::Kind;

namespace {

/// Memory from the heap; a launch calls the kernel registered under its
/// name with the 8-byte parameter slots.
class HostMemoryDevice : public rt::HostDevice {
public:
  struct Launch {
    std::string kernel;
    std::array<unsigned, 3> grid, block;
    unsigned sharedBytes = 0;
    std::vector<int64_t> params;
    std::vector<rt::MemoryAccess> touches;
  };
  std::vector<Launch> launches;
  std::map<std::string, std::function<void(const std::vector<int64_t> &)>>
      kernels;
  int live = 0;
  /// A GEMM library in host memory (bf16 products summed in f32), or none.
  bool gemmLibrary = false;
  std::vector<rt::GemmCall> gemms;

  bool gemm(const rt::GemmCall &call, bool &done, std::string &) override {
    gemms.push_back(call);
    done = gemmLibrary;
    if (!done)
      return true;
    auto at = [](const void *base, int64_t i) {
      return num::fromBF16Bits(static_cast<const uint16_t *>(base)[i]);
    };
    for (int64_t i = 0; i < call.batch; ++i)
      for (int64_t n = 0; n < call.n; ++n)
        for (int64_t m = 0; m < call.m; ++m) {
          float sum = 0;
          for (int64_t k = 0; k < call.k; ++k)
            sum += at(call.b, i * call.strideB + n * call.ldb + k) *
                   at(call.a, i * call.strideA + m * call.lda + k);
          static_cast<uint16_t *>(call.d)[i * call.strideD + n * call.ldd + m] =
              num::toBF16Bits(sum);
        }
    return true;
  }

  void *allocate(int64_t bytes, std::string &) override {
    ++live;
    return std::calloc(1, bytes > 0 ? bytes : 1);
  }
  void release(void *memory) override {
    --live;
    std::free(memory);
  }
  bool copyOnDevice(void *to, const void *from, int64_t bytes,
                    std::string &) override {
    std::memcpy(to, from, bytes);
    return true;
  }
  int readBacks = 0;
  bool readBack(void *host, const void *device, int64_t bytes,
                std::string &) override {
    ++readBacks;
    std::memcpy(host, device, bytes);
    return true;
  }
  bool launchKernel(const std::string &kernel, std::array<unsigned, 3> grid,
                    std::array<unsigned, 3> block, unsigned sharedBytes,
                    std::vector<void *> params,
                    const std::vector<rt::MemoryAccess> &touches,
                    std::string &error) override {
    Launch launch{kernel, grid, block, sharedBytes, {}, touches};
    for (void *param : params)
      launch.params.push_back(*static_cast<int64_t *>(param));
    launches.push_back(launch);
    auto it = kernels.find(kernel);
    if (it == kernels.end()) {
      error = "no kernel " + kernel;
      return false;
    }
    it->second(launch.params);
    return true;
  }
};

Op op(Kind kind, int result, std::vector<int> operands,
      std::vector<int64_t> data, std::string kernel = "") {
  Op o;
  o.kind = kind;
  o.result = result;
  o.operands = std::move(operands);
  o.data = std::move(data);
  o.kernel = std::move(kernel);
  return o;
}

int64_t arith(Op::Arith code) { return static_cast<int64_t>(code); }
constexpr int64_t kBuffer = static_cast<int64_t>(Op::ParamKind::Buffer);
constexpr int64_t kReadBuffer = static_cast<int64_t>(Op::ParamKind::ReadBuffer);
constexpr int64_t kI64 = static_cast<int64_t>(Op::ParamKind::I64);

/// f(x [T, 4] f32) -> y [T, 4] f32: a temporary [T, 4] filled by kernel
/// "twice" over ceil(T / 128) blocks, copied to y.
step::Function twiceFunction() {
  step::Function f;
  f.name = "twice";
  f.args = {{"x", step::Element::F32, {-1, 4}, false},
            {"y", step::Element::F32, {-1, 4}, true}};
  f.host.values = 2;
  auto value = [&] { return f.host.values++; };
  int t = value(), c128 = value(), grid = value(), one = value(), tmp = value(),
      shared = value();
  f.host.ops = {
      op(Kind::Dim, t, {0}, {0}),
      op(Kind::Const, c128, {}, {128}),
      op(Kind::Arith, grid, {t, c128}, {arith(Op::Arith::CeilDivS)}),
      op(Kind::Const, one, {}, {1}),
      op(Kind::Alloc, tmp, {t}, {4, 2, -1, 4}),
      op(Kind::Const, shared, {}, {0}),
      op(Kind::Launch, -1, {grid, one, one, c128, one, one, shared, 0, tmp, t},
         {kReadBuffer, kBuffer, kI64}, "twice"),
      op(Kind::Copy, -1, {tmp, 1}, {}),
  };
  return f;
}

TEST(HostProgram, RunsSizesTemporariesLaunchesAndCopies) {
  HostMemoryDevice device;
  // twice(x, tmp, T): tmp = 2 * x, reading the expanded descriptors.
  device.kernels["twice"] = [](const std::vector<int64_t> &p) {
    auto *x = reinterpret_cast<float *>(p[1]);
    auto *tmp = reinterpret_cast<float *>(p[8]);
    for (int64_t i = 0; i < p[14] * 4; ++i)
      tmp[i] = 2 * x[i];
  };
  std::vector<float> x(300 * 4), y(300 * 4, 0.0f);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(i);
  std::string error;
  ASSERT_TRUE(rt::runHostProgram(twiceFunction(),
                                 {{x.data(), {300, 4}}, {y.data(), {300, 4}}},
                                 device, error))
      << error;
  ASSERT_EQ(device.launches.size(), 1u);
  const auto &launch = device.launches[0];
  EXPECT_EQ(launch.grid, (std::array<unsigned, 3>{3, 1, 1}));
  EXPECT_EQ(launch.block, (std::array<unsigned, 3>{128, 1, 1}));
  EXPECT_EQ(launch.sharedBytes, 0u);
  // x: allocated, aligned, offset, sizes, strides; tmp likewise; then T.
  ASSERT_EQ(launch.params.size(), 15u);
  EXPECT_EQ(launch.params[0], reinterpret_cast<int64_t>(x.data()));
  EXPECT_EQ(std::vector<int64_t>(launch.params.begin() + 2,
                                 launch.params.begin() + 7),
            (std::vector<int64_t>{0, 300, 4, 4, 1}));
  EXPECT_EQ(launch.params[14], 300);
  // What the launch touches: x read, tmp written, each whole.
  ASSERT_EQ(launch.touches.size(), 2u);
  EXPECT_EQ(launch.touches[0].begin, x.data());
  EXPECT_EQ(launch.touches[0].bytes, 300 * 4 * 4);
  EXPECT_FALSE(launch.touches[0].writes);
  EXPECT_EQ(launch.touches[1].begin,
            reinterpret_cast<void *>(launch.params[8]));
  EXPECT_EQ(launch.touches[1].bytes, 300 * 4 * 4);
  EXPECT_TRUE(launch.touches[1].writes);
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_EQ(y[i], 2.0f * i) << i;
  EXPECT_EQ(device.live, 0) << "temporaries are released";
}

TEST(HostProgram, AnEmptyGridLaunchesNothing) {
  HostMemoryDevice device;
  std::string error;
  std::vector<float> none;
  ASSERT_TRUE(rt::runHostProgram(twiceFunction(),
                                 {{none.data(), {0, 4}}, {none.data(), {0, 4}}},
                                 device, error))
      << error;
  EXPECT_TRUE(device.launches.empty());
}

/// n = context[0] (a host argument), then a [n] temporary whose size
/// kernel "check" sees; with `deviceCell`, n is read from a buffer a kernel
/// wrote instead.
step::Function sizedByContext(bool deviceCell) {
  step::Function f;
  f.name = "sized";
  f.args = {{step::kContextBind, step::Element::I64, {1}, false}};
  f.host.values = 1;
  int one = f.host.values++, zero = f.host.values++, cell = f.host.values++,
      n = f.host.values++, tmp = f.host.values++;
  f.host.ops = {op(Kind::Const, one, {}, {1}), op(Kind::Const, zero, {}, {0}),
                op(Kind::Alloc, cell, {}, {8, 1, 1})};
  f.host.ops.push_back(op(Kind::Load, n, {deviceCell ? cell : 0, zero}, {8}));
  f.host.ops.push_back(op(Kind::Alloc, tmp, {n}, {4, 1, -1}));
  f.host.ops.push_back(op(Kind::Launch, -1,
                          {one, one, one, one, one, one, zero, tmp}, {kBuffer},
                          "check"));
  return f;
}

TEST(HostProgram, SizesFollowAHostArgumentWithoutADeviceRead) {
  HostMemoryDevice device;
  int64_t size = -1;
  device.kernels["check"] = [&](const std::vector<int64_t> &p) { size = p[3]; };
  int64_t context = 7;
  std::string error;
  ASSERT_TRUE(rt::runHostProgram(sizedByContext(false), {{&context, {1}}},
                                 device, error))
      << error;
  EXPECT_EQ(size, 7);
  EXPECT_EQ(device.readBacks, 0);
}

TEST(HostProgram, AReadOfDeviceMemoryIsRefused) {
  HostMemoryDevice device;
  device.kernels["check"] = [](const std::vector<int64_t> &) {};
  int64_t context = 7;
  std::string error;
  EXPECT_FALSE(rt::runHostProgram(sizedByContext(true), {{&context, {1}}},
                                  device, error));
  EXPECT_NE(error.find("a read of device memory on the host"),
            std::string::npos)
      << error;
  EXPECT_TRUE(device.launches.empty());
}

TEST(HostProgram, AHostArgumentNeverReachesTheDevice) {
  step::Function f = sizedByContext(false);
  // The kernel takes the host argument itself.
  f.host.ops.back().operands.back() = 0;
  HostMemoryDevice device;
  device.kernels["check"] = [](const std::vector<int64_t> &) {};
  int64_t context = 7;
  std::string error;
  EXPECT_FALSE(rt::runHostProgram(f, {{&context, {1}}}, device, error));
  EXPECT_NE(error.find("the host argument 'context' used on the device"),
            std::string::npos)
      << error;
}

/// Runs `f` with two [2, 4] f32 arguments and returns the error.
std::string errorOf(const step::Function &f) {
  HostMemoryDevice device;
  device.kernels["twice"] = [](const std::vector<int64_t> &) {};
  std::vector<float> x(8), y(8);
  std::string error;
  EXPECT_FALSE(rt::runHostProgram(f, {{x.data(), {2, 4}}, {y.data(), {2, 4}}},
                                  device, error));
  EXPECT_EQ(device.live, 0);
  return error;
}

TEST(HostProgram, MalformedProgramsAreErrors) {
  step::Function f = twiceFunction();
  f.host.ops[2].operands[1] = 40;
  EXPECT_NE(errorOf(f).find("operand 40 is not defined"), std::string::npos)
      << errorOf(f);

  f = twiceFunction();
  f.host.ops[2].operands[0] = 0; // a buffer where an integer belongs
  EXPECT_NE(errorOf(f).find("is not an integer"), std::string::npos);

  f = twiceFunction();
  f.host.ops[4].data = {3, 2, -1, 4}; // 3-byte elements
  EXPECT_NE(errorOf(f).find("element bytes"), std::string::npos);

  f = twiceFunction();
  f.host.ops[1].result = 2; // redefines value 2
  EXPECT_NE(errorOf(f).find("defined twice"), std::string::npos);
}

TEST(HostProgram, ALaunchTakesItsDynamicSharedMemory) {
  step::Function f = twiceFunction();
  f.host.ops[5].data = {200 * 1024};
  HostMemoryDevice device;
  device.kernels["twice"] = [](const std::vector<int64_t> &) {};
  std::vector<float> x(8), y(8);
  std::string error;
  ASSERT_TRUE(rt::runHostProgram(f, {{x.data(), {2, 4}}, {y.data(), {2, 4}}},
                                 device, error))
      << error;
  ASSERT_EQ(device.launches.size(), 1u);
  EXPECT_EQ(device.launches[0].sharedBytes, 200u * 1024);
}

TEST(HostProgram, BadValuesAreErrors) {
  step::Function f = twiceFunction();
  f.host.ops[5].data = {228 * 1024}; // past sm_90's 227 KiB
  EXPECT_NE(errorOf(f).find("twice: 233472 bytes of dynamic shared memory, "
                            "outside 0..232448"),
            std::string::npos)
      << errorOf(f);

  f = twiceFunction();
  f.host.ops[1].data = {2048}; // a block of 2048 threads
  EXPECT_NE(errorOf(f).find("block extent 2048 outside 1..1024"),
            std::string::npos)
      << errorOf(f);

  f = twiceFunction();
  f.host.ops[1].data = {0}; // T / 0
  EXPECT_NE(errorOf(f).find("division by zero"), std::string::npos);

  f = twiceFunction();
  f.host.ops[0].data = {5}; // dimension 5 of a rank-2 buffer
  EXPECT_NE(errorOf(f).find("dimension 5 of a rank-2 buffer"),
            std::string::npos);

  f = twiceFunction();
  std::vector<float> x(8);
  HostMemoryDevice device;
  std::string error;
  EXPECT_FALSE(rt::runHostProgram(f, {{x.data(), {2, 4}}}, device, error));
  EXPECT_NE(error.find("takes 2 arguments, got 1"), std::string::npos);
}

TEST(HostProgram, ACopyBetweenBuffersOfOtherSizesIsAnError) {
  step::Function f = twiceFunction();
  HostMemoryDevice device;
  device.kernels["twice"] = [](const std::vector<int64_t> &) {};
  std::vector<float> x(8), y(4);
  std::string error;
  EXPECT_FALSE(rt::runHostProgram(f, {{x.data(), {2, 4}}, {y.data(), {1, 4}}},
                                  device, error));
  EXPECT_NE(error.find("a copy between buffers of different sizes"),
            std::string::npos)
      << error;
}

} // namespace

namespace {

/// y[T, 2] = x[T, 3] . w[2, 3]^T in bf16: a Gemm op whose fallback is the
/// launch of kernel "project" two ops later.
step::Function gemmFunction() {
  step::Function f;
  f.name = "project";
  f.args = {{"x", step::Element::BF16, {-1, 3}, false},
            {"w", step::Element::BF16, {2, 3}, false},
            {"y", step::Element::BF16, {-1, 2}, true}};
  f.host.values = 3;
  auto value = [&] { return f.host.values++; };
  int t = value(), one = value(), zero = value(), two = value(),
      three = value();
  f.host.ops = {
      op(Kind::Dim, t, {0}, {0}),
      op(Kind::Const, one, {}, {1}),
      op(Kind::Const, zero, {}, {0}),
      op(Kind::Const, two, {}, {2}),
      op(Kind::Const, three, {}, {3}),
      op(Kind::Gemm, -1,
         {1, 0, 2, two, t, three, three, three, two, one, zero, zero, zero},
         {static_cast<int64_t>(Op::GemmType::BF16), 1}),
      op(Kind::Launch, -1, {one, one, one, one, one, one, zero, 0, 1, 2, t},
         {kBuffer, kBuffer, kBuffer, kI64}, "project"),
  };
  return f;
}

} // namespace

TEST(HostProgram, GemmRunsOnTheLibraryOrFallsBackToItsLaunch) {
  std::vector<uint16_t> x = {num::toBF16Bits(1), num::toBF16Bits(2),
                             num::toBF16Bits(3), num::toBF16Bits(-1),
                             num::toBF16Bits(0), num::toBF16Bits(0.5f)};
  std::vector<uint16_t> w = {num::toBF16Bits(1), num::toBF16Bits(1),
                             num::toBF16Bits(1), num::toBF16Bits(2),
                             num::toBF16Bits(0), num::toBF16Bits(-2)};
  // x . w^T = [[6, -4], [-0.5, -3]].
  std::vector<uint16_t> want = {num::toBF16Bits(6), num::toBF16Bits(-4),
                                num::toBF16Bits(-0.5f), num::toBF16Bits(-3)};
  step::Function f = gemmFunction();
  std::string error;
  ASSERT_TRUE(rt::validateHostProgram(f, error)) << error;
  for (bool library : {true, false}) {
    HostMemoryDevice device;
    device.gemmLibrary = library;
    device.kernels["project"] = [&](const std::vector<int64_t> &p) {
      // The fallback writes its own mark: which path ran shows.
      auto *y = reinterpret_cast<uint16_t *>(p[14]);
      for (int i = 0; i < 4; ++i)
        y[i] = num::toBF16Bits(7);
    };
    std::vector<uint16_t> y(4, 0);
    ASSERT_TRUE(rt::runHostProgram(
        f, {{x.data(), {2, 3}}, {w.data(), {2, 3}}, {y.data(), {2, 2}}}, device,
        error))
        << error;
    ASSERT_EQ(device.gemms.size(), 1u);
    EXPECT_EQ(device.gemms[0].m, 2);
    EXPECT_EQ(device.gemms[0].n, 2);
    EXPECT_EQ(device.gemms[0].k, 3);
    EXPECT_EQ(device.launches.size(), library ? 0u : 1u);
    EXPECT_EQ(y, library ? want : std::vector<uint16_t>(4, num::toBF16Bits(7)));
  }
}

TEST(HostProgram, GemmErrors) {
  std::string error;
  // The fallback must be a launch after the gemm.
  step::Function f = gemmFunction();
  f.host.ops[5].data[1] = 2;
  EXPECT_FALSE(rt::validateHostProgram(f, error));
  EXPECT_EQ(error, "project: host op 5: a gemm's fallback is not a launch "
                   "after it of its own");
  // Two gemms may not share one fallback.
  f = gemmFunction();
  f.host.ops.insert(f.host.ops.begin() + 5, f.host.ops[5]);
  f.host.ops[5].data[1] = 2;
  EXPECT_FALSE(rt::validateHostProgram(f, error));
  EXPECT_EQ(error, "project: host op 6: a gemm's fallback is not a launch "
                   "after it of its own");
  f = gemmFunction();
  f.host.ops[5].data[1] = -1;
  EXPECT_FALSE(rt::validateHostProgram(f, error));
  EXPECT_NE(error.find("the offset of its fallback launch"), std::string::npos)
      << error;
  // Sizes beyond the buffers: K = 3 over x rows of 3, but y holds one row.
  f = gemmFunction();
  HostMemoryDevice device;
  std::vector<uint16_t> x(6), w(6), y(2);
  EXPECT_FALSE(rt::runHostProgram(
      f, {{x.data(), {2, 3}}, {w.data(), {2, 3}}, {y.data(), {1, 2}}}, device,
      error));
  EXPECT_EQ(error, "project: host op 5: a gemm of 1 x 2 x 2 x 3 reaches "
                   "outside its buffers");
  // Absurd sizes are refused before any arithmetic on them.
  f.host.ops[4].data[0] = int64_t(1) << 62; // K
  EXPECT_FALSE(rt::runHostProgram(
      f, {{x.data(), {2, 3}}, {w.data(), {2, 3}}, {y.data(), {2, 2}}}, device,
      error));
  EXPECT_EQ(error, "project: host op 5: a gemm size 4611686018427387904 "
                   "outside [0, 2^40]");
  f = gemmFunction();
  EXPECT_TRUE(device.gemms.empty());
  // A gemm over f32 buffers.
  f.args[0].element = step::Element::F32;
  std::vector<float> xf(6);
  std::vector<uint16_t> y2(4);
  EXPECT_FALSE(rt::runHostProgram(
      f, {{xf.data(), {2, 3}}, {w.data(), {2, 3}}, {y2.data(), {2, 2}}}, device,
      error));
  EXPECT_EQ(error, "project: host op 5: a bf16 gemm over buffers of other "
                   "elements");
}

TEST(HostProgram, GemmWithAnF32ResultTakesF32Buffers) {
  step::Function f = gemmFunction();
  f.host.ops[5].data[0] = static_cast<int64_t>(Op::GemmType::BF16F32);
  std::string error;
  ASSERT_TRUE(rt::validateHostProgram(f, error)) << error;
  HostMemoryDevice device;
  device.gemmLibrary = true;
  std::vector<uint16_t> x(6), w(6), y(4);
  // A bf16 result buffer is refused...
  EXPECT_FALSE(rt::runHostProgram(
      f, {{x.data(), {2, 3}}, {w.data(), {2, 3}}, {y.data(), {2, 2}}}, device,
      error));
  EXPECT_EQ(error, "project: host op 5: a bf16-f32 gemm over buffers of "
                   "other elements");
  // ...an f32 one runs.
  f.args[2].element = step::Element::F32;
  std::vector<float> yf(4);
  ASSERT_TRUE(rt::runHostProgram(
      f, {{x.data(), {2, 3}}, {w.data(), {2, 3}}, {yf.data(), {2, 2}}}, device,
      error))
      << error;
  ASSERT_EQ(device.gemms.size(), 1u);
  EXPECT_EQ(device.gemms[0].type, Op::GemmType::BF16F32);
}

TEST(StepGemms, TemporariesAreSizedAsTheWorkspacePlacesThem) {
  std::string error;
  int64_t bytes = 0;
  // twice: one [T, 4] f32 temporary.
  ASSERT_TRUE(rt::stepTemporaryBytes(twiceFunction(), 300, 1, bytes, error))
      << error;
  EXPECT_EQ(bytes, rt::workspaceBytes(300 * 16));
  // sized: an 8-byte cell and a [context] f32 temporary.
  ASSERT_TRUE(
      rt::stepTemporaryBytes(sizedByContext(false), 1, 1000, bytes, error))
      << error;
  EXPECT_EQ(bytes, rt::workspaceBytes(8) + rt::workspaceBytes(4000));
}

TEST(StepGemms, RecordsTheProductsOfAStepWithoutRunningIt) {
  step::Function f = gemmFunction();
  std::vector<rt::GemmCall> calls;
  std::string error;
  // No buffers, no launches: the token count gives the sizes.
  ASSERT_TRUE(rt::stepGemms(f, 37, calls, error)) << error;
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].type, Op::GemmType::BF16);
  EXPECT_EQ(calls[0].n, 37);
  EXPECT_EQ(calls[0].m, 2);
  EXPECT_EQ(calls[0].k, 3);
  EXPECT_EQ(calls[0].a, nullptr);
  EXPECT_EQ(rt::describeGemm(calls[0]), "bf16 gemm 1 x 37 x 2 x 3");
  std::vector<rt::GemmCall> more;
  ASSERT_TRUE(rt::stepGemms(f, 38, more, error)) << error;
  EXPECT_FALSE(rt::sameGemmShape(calls[0], more[0]));
  EXPECT_TRUE(rt::sameGemmShape(calls[0], calls[0]));
  // A program the interpreter refuses is the same error here.
  f.host.ops[4].data[0] = int64_t(1) << 62;
  calls.clear();
  EXPECT_FALSE(rt::stepGemms(f, 2, calls, error));
  EXPECT_EQ(error, "project: host op 5: a gemm size 4611686018427387904 "
                   "outside [0, 2^40]");
}

TEST(StepGemms, RecordsEveryCallInOrder) {
  // Two identical products in one program are two calls; whoever prepares
  // shapes keeps one of them (sameGemmShape).
  step::Function f = gemmFunction();
  f.host.ops.push_back(f.host.ops[5]);
  f.host.ops.push_back(f.host.ops[6]);
  std::vector<rt::GemmCall> calls;
  std::string error;
  ASSERT_TRUE(rt::stepGemms(f, 4, calls, error)) << error;
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_TRUE(rt::sameGemmShape(calls[0], calls[1]));
}

TEST(StepGemms, DistinctProductsOfTheLayersCalls) {
  // Two layers run one step function, a metadata call (layer -1) runs it
  // too: each shape once, with the first count that issues it.
  std::vector<step::Function> functions = {gemmFunction()};
  std::vector<step::Call> calls = {{0, -1, -1}, {0, -1, 0}, {0, -1, 1}};
  std::vector<rt::StepProduct> products;
  std::string error;
  ASSERT_TRUE(
      rt::distinctStepProducts(functions, calls, {2, 2, 3}, products, error))
      << error;
  ASSERT_EQ(products.size(), 2u);
  EXPECT_EQ(products[0].function, 0);
  EXPECT_EQ(products[0].tokens, 2);
  EXPECT_EQ(products[0].call.n, 2);
  EXPECT_EQ(products[1].tokens, 3);
  // Only metadata calls: nothing.
  products.clear();
  ASSERT_TRUE(
      rt::distinctStepProducts(functions, {{0, -1, -1}}, {2}, products, error));
  EXPECT_TRUE(products.empty());
}
