//===- CudaBackendTest.cpp - the CUDA driver backend ----------------------===//
//
// Built into v4a-runtime-tests, which links the runtime alone (no MLIR or
// LLVM), so that it runs on a GPU machine as built here. Without a driver or
// a GPU the backend is one error line and the device tests skip.
//
//===----------------------------------------------------------------------===//

#include "runtime/CudaBackend.h"

#include <gtest/gtest.h>

#include <numeric>

using namespace v4a::rt;

namespace {

/// Adds 1 to each of `count` u32 values: enough to check module loading,
/// parameters, launches and copies.
const char *const kAddOnePtx = R"(.version 8.0
.target sm_90
.address_size 64

.visible .entry add_one(.param .u64 data, .param .u32 count)
{
  .reg .pred %p;
  .reg .b32 %r<7>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [data];
  ld.param.u32 %r1, [count];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.u32 %p, %r5, %r1;
  @%p bra DONE;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.u32 %r6, [%rd4];
  add.u32 %r6, %r6, 1;
  st.global.u32 [%rd4], %r6;
DONE:
  ret;
}
)";

std::unique_ptr<CudaBackend> openGpu(std::string &error) {
  auto backend = CudaBackend::create(0, error);
  if (!backend) {
    // One line that says what is missing.
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    EXPECT_FALSE(error.empty());
  }
  return backend;
}

TEST(CudaBackend, MissingDeviceIsOneErrorLine) {
  std::string error;
  auto backend = CudaBackend::create(1 << 20, error);
  EXPECT_FALSE(backend);
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_FALSE(error.empty());
}

TEST(CudaBackend, CopiesAndLaunchesAKernel) {
  std::string error;
  auto gpu = openGpu(error);
  if (!gpu)
    GTEST_SKIP() << error;
  std::cout << "device: " << gpu->deviceName() << ", sm_"
            << gpu->computeCapability() << "\n";
  constexpr uint32_t count = 1 << 20;
  std::vector<uint32_t> values(count);
  std::iota(values.begin(), values.end(), 7u);
  void *device = gpu->allocate(4 * count, error);
  ASSERT_TRUE(device) << error;
  std::vector<uint32_t> zeros(count, 1);
  gpu->copyToHost(zeros.data(), device, 4 * count);
  EXPECT_EQ(zeros[0], 0u) << "allocations are zeroed";
  EXPECT_EQ(zeros[count - 1], 0u);
  gpu->copyToDevice(device, values.data(), 4 * count);
  void *module = gpu->loadModule(kAddOnePtx, error);
  ASSERT_TRUE(module) << error;
  uint64_t pointer = reinterpret_cast<uint64_t>(device);
  uint32_t n = count;
  ASSERT_TRUE(gpu->launch(module, "add_one", {count / 256, 1, 1}, {256, 1, 1},
                          0, {&pointer, &n}, error))
      << error;
  std::vector<uint32_t> out(count);
  gpu->copyToHost(out.data(), device, 4 * count);
  for (uint32_t i = 0; i < count; ++i)
    ASSERT_EQ(out[i], values[i] + 1) << "at " << i;
  EXPECT_FALSE(gpu->launch(module, "no_such_kernel", {1, 1, 1}, {1, 1, 1}, 0,
                           {}, error));
  EXPECT_NE(error.find("no_such_kernel"), std::string::npos) << error;
  gpu->release(device);
}

TEST(CudaBackend, BadImageIsAnError) {
  std::string error;
  auto gpu = openGpu(error);
  if (!gpu)
    GTEST_SKIP() << error;
  EXPECT_FALSE(gpu->loadModule("not a kernel image", error));
  EXPECT_NE(error.find("cannot load a kernel image"), std::string::npos)
      << error;
}

} // namespace
