//===- CudaBackendTest.cpp - the CUDA driver backend ----------------------===//
//
// Built into v4a-runtime-tests, which links the runtime alone (no MLIR or
// LLVM), so that it runs on a GPU machine as built here. Without a driver or
// a GPU the backend is one error line and the device tests skip.
//
//===----------------------------------------------------------------------===//

#include "runtime/CudaBackend.h"
#include "core/Package.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>

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

/// The GPU with the kernels of the package V4A_PACKAGE names. Null with
/// `skip` set when there is no such package or no GPU; null with `skip`
/// empty after a failure (reported).
std::unique_ptr<CudaBackend>
gpuWithPackage(std::optional<v4a::pkg::Package> &package, std::string &skip) {
  const char *path = std::getenv("V4A_PACKAGE");
  if (!path) {
    skip = "V4A_PACKAGE is not set";
    return nullptr;
  }
  std::string error;
  auto gpu = openGpu(error);
  if (!gpu) {
    skip = error;
    return nullptr;
  }
  package = v4a::pkg::read(path, "sm_90a", error);
  if (!package || !gpu->loadKernels(package->ptx, error)) {
    ADD_FAILURE() << error;
    return nullptr;
  }
  return gpu;
}

/// A step's copies, one a layer (rows landing in reverse order), handed
/// over with a table of them (`passTable`) or without, and checked byte
/// for byte. Where the table kernel is to run (`kernelRuns`), the copies
/// name a decoy buffer and only the table the real destinations: the rows
/// land where the table says only if the kernel ran.
void checkStepCopies(CudaBackend &gpu, bool passTable, bool kernelRuns) {
  // Rows of 1 MiB: a thread of the kernel makes several passes.
  constexpr int64_t layers = 44, rowBytes = (1 << 20) + 16;
  std::vector<uint8_t> source(layers * rowBytes);
  for (size_t i = 0; i < source.size(); ++i)
    source[i] = static_cast<uint8_t>(i * 131 + 7);
  std::string error;
  auto *from = static_cast<uint8_t *>(gpu.allocate(source.size(), error));
  auto *to = static_cast<uint8_t *>(gpu.allocate(source.size(), error));
  auto *decoy = static_cast<uint8_t *>(gpu.allocate(source.size(), error));
  auto *rows =
      static_cast<uint8_t *>(gpu.allocate(layers * sizeof(CopyEntry), error));
  ASSERT_TRUE(from && to && decoy && rows) << error;
  gpu.copyToDevice(from, source.data(), source.size());
  std::vector<DeviceCopy> copies;
  std::vector<CopyEntry> entries;
  for (int64_t layer = 0; layer < layers; ++layer) {
    int64_t at = (layers - 1 - layer) * rowBytes;
    copies.push_back(
        {(kernelRuns ? decoy : to) + at, from + layer * rowBytes, rowBytes});
    entries.push_back({reinterpret_cast<uint64_t>(to + at),
                       reinterpret_cast<uint64_t>(copies.back().from),
                       static_cast<uint64_t>(rowBytes), 0});
  }
  gpu.copyToDevice(rows, entries.data(), layers * sizeof(CopyEntry));
  const void *table = passTable ? rows : nullptr;
  ASSERT_TRUE(gpu.queueCopiesOnDevice(copies, table, error)) << error;
  ASSERT_TRUE(gpu.synchronize(error)) << error;
  std::vector<uint8_t> landed(source.size());
  gpu.copyToHost(landed.data(), to, landed.size());
  for (int64_t layer = 0; layer < layers; ++layer)
    ASSERT_EQ(std::memcmp(landed.data() + (layers - 1 - layer) * rowBytes,
                          source.data() + layer * rowBytes, rowBytes),
              0)
        << "layer " << layer << (kernelRuns ? " (table kernel)" : "");
  // Addresses off the kernel's 16 bytes: the driver's copies, one by one.
  copies = {{to + 8, from, 64}, {to + 200, from + 1000, 40}};
  ASSERT_TRUE(gpu.queueCopiesOnDevice(copies, table, error)) << error;
  ASSERT_TRUE(gpu.synchronize(error)) << error;
  gpu.copyToHost(landed.data(), to, 240);
  EXPECT_EQ(std::memcmp(landed.data() + 8, source.data(), 64), 0);
  EXPECT_EQ(std::memcmp(landed.data() + 200, source.data() + 1000, 40), 0);
  for (void *buffer : {from, to, decoy, rows})
    gpu.release(buffer);
}

TEST(CudaBackend, StepCopiesLandWithoutKernels) {
  std::string error;
  auto gpu = openGpu(error);
  if (!gpu)
    GTEST_SKIP() << error;
  checkStepCopies(*gpu, /*passTable=*/true, /*kernelRuns=*/false);
}

// The packages' table copy kernel (TableCopy.h). V4A_PACKAGE names one.
TEST(CudaBackend, StepCopiesLandThroughTheTableKernel) {
  std::optional<v4a::pkg::Package> package;
  std::string skip;
  auto gpu = gpuWithPackage(package, skip);
  if (!gpu) {
    if (!skip.empty())
      GTEST_SKIP() << skip;
    return;
  }
  checkStepCopies(*gpu, /*passTable=*/true, /*kernelRuns=*/true);
  checkStepCopies(*gpu, /*passTable=*/false, /*kernelRuns=*/false);
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

// The metadata function of tiny.json's ratio-4 key from a package
// (`v4a-compile examples/tiny.json --context 256 --target=sm_90a`: window 8,
// ratio 4, 64 compressed rows per sequence), run through its host program,
// against the rows of the spec: a varlen batch of three sequences in slots
// 2, 0 and 5. V4A_PACKAGE names the file.
TEST(CudaBackend, MetadataFunctionMatchesTheRowsOfTheSpec) {
  std::optional<v4a::pkg::Package> package;
  std::string skip, error;
  auto gpu = gpuWithPackage(package, skip);
  if (!gpu) {
    if (!skip.empty())
      GTEST_SKIP() << skip;
    return;
  }
  auto meta = std::find_if(
      package->functions.begin(), package->functions.end(),
      [](const v4a::step::Function &f) { return f.name == "meta_4_0_1_4"; });
  ASSERT_NE(meta, package->functions.end());

  constexpr int64_t window = 8, ratio = 4, slotRows = 64;
  struct Run {
    int64_t slot, start, length;
  };
  std::vector<Run> runs = {{2, 5, 10}, {0, 0, 1}, {5, 30, 3}};
  std::vector<int64_t> positions, slots, first, last;
  for (const Run &run : runs) {
    int64_t begin = static_cast<int64_t>(positions.size());
    for (int64_t t = 0; t < run.length; ++t) {
      positions.push_back(run.start + t);
      slots.push_back(run.slot);
      first.push_back(begin);
      last.push_back(begin + run.length - 1);
    }
  }
  int64_t tokens = static_cast<int64_t>(positions.size());
  // The rows each token reads (window oldest first: this step's rows below
  // T, ring rows T + slot * w + q mod w), stores, and completes.
  std::vector<int32_t> attend(tokens * window, -1);
  std::vector<int64_t> store(tokens), base(tokens), complete(tokens),
      starts(tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    int64_t p = positions[t], start = p - (t - first[t]);
    int64_t lastPosition = p + (last[t] - t);
    for (int64_t j = 0; j < window; ++j) {
      int64_t q = std::max<int64_t>(0, p - window + 1) + j;
      if (q > p)
        continue;
      attend[t * window + j] = static_cast<int32_t>(
          q >= start ? first[t] + (q - start)
                     : tokens + slots[t] * window + q % window);
    }
    store[t] = lastPosition - p < window ? slots[t] * window + p % window : -1;
    base[t] = slots[t] * slotRows;
    complete[t] = (p + 1) % ratio == 0 ? base[t] + (p + 1) / ratio - 1 : -1;
    starts[t] = p - (ratio - 1);
  }

  auto upload = [&](const void *host, int64_t bytes) {
    void *device = gpu->allocate(bytes, error);
    EXPECT_TRUE(device) << error;
    gpu->copyToDevice(device, host, bytes);
    return device;
  };
  std::vector<void *> buffers = {upload(positions.data(), 8 * tokens),
                                 upload(slots.data(), 8 * tokens),
                                 upload(first.data(), 8 * tokens),
                                 upload(last.data(), 8 * tokens),
                                 gpu->allocate(4 * tokens * window, error),
                                 gpu->allocate(8 * tokens, error),
                                 gpu->allocate(8 * tokens, error),
                                 gpu->allocate(8 * tokens, error),
                                 gpu->allocate(8 * tokens, error)};
  // The function's arguments in signature order: the four inputs, then
  // attend, store, base, complete and the compressed rows' starts.
  ASSERT_EQ(meta->args.size(), buffers.size());
  std::vector<v4a::rt::BufferArg> args;
  for (size_t i = 0; i < buffers.size(); ++i)
    args.push_back({buffers[i], i == 4 ? std::vector<int64_t>{tokens, window}
                                       : std::vector<int64_t>{tokens}});
  ASSERT_TRUE(gpu->run(*meta, args, error)) << error;
  std::vector<int32_t> gotAttend(tokens * window);
  std::vector<int64_t> gotStore(tokens), gotBase(tokens), gotComplete(tokens),
      gotStarts(tokens);
  gpu->copyToHost(gotAttend.data(), buffers[4], 4 * tokens * window);
  gpu->copyToHost(gotStore.data(), buffers[5], 8 * tokens);
  gpu->copyToHost(gotBase.data(), buffers[6], 8 * tokens);
  gpu->copyToHost(gotComplete.data(), buffers[7], 8 * tokens);
  gpu->copyToHost(gotStarts.data(), buffers[8], 8 * tokens);
  EXPECT_EQ(gotAttend, attend);
  EXPECT_EQ(gotStore, store);
  EXPECT_EQ(gotBase, base);
  EXPECT_EQ(gotComplete, complete);
  EXPECT_EQ(gotStarts, starts);
  for (void *buffer : buffers)
    gpu->release(buffer);
}

} // namespace
