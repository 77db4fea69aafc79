//===- CollectiveTest.cpp - NCCL sums and the communicator id -------------===//
//
// Built into v4a-runtime-tests. The id file's rules run anywhere; the sum
// runs on every GPU the driver sees (one rank each), and skips without a
// GPU or NCCL.
//
//===----------------------------------------------------------------------===//

#include "runtime/Collective.h"
#include "runtime/CudaBackend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace v4a::rt;

namespace {

std::string scratchPath(const std::string &name) {
  std::string dir =
      ::testing::TempDir() + "v4a-collective-" + std::to_string(getpid());
  mkdir(dir.c_str(), 0700);
  std::string path = dir + "/" + name;
  std::remove(path.c_str());
  return path;
}

std::string contents(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

CollectiveId patternId() {
  CollectiveId id;
  for (size_t i = 0; i < id.bytes.size(); ++i)
    id.bytes[i] = static_cast<char>(i * 7 + 3);
  return id;
}

TEST(Collective, APublishedIdRoundTripsAndIsTheOwnersAlone) {
  std::string path = scratchPath("id"), error;
  ASSERT_TRUE(publishCollectiveId(path, patternId(), error)) << error;
  struct stat info;
  ASSERT_EQ(stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  CollectiveId read;
  ASSERT_TRUE(readCollectiveId(path, read, error)) << error;
  EXPECT_EQ(read.bytes, patternId().bytes);
}

TEST(Collective, PublishingNeverReplacesAFileOrFollowsALink) {
  std::string path = scratchPath("taken"), target = scratchPath("target");
  std::string error;
  std::ofstream(path) << "mine";
  EXPECT_FALSE(publishCollectiveId(path, patternId(), error));
  EXPECT_NE(error.find("exists"), std::string::npos) << error;
  EXPECT_EQ(contents(path), "mine");
  std::string link = scratchPath("link");
  std::ofstream(target) << "theirs";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  EXPECT_FALSE(publishCollectiveId(link, patternId(), error));
  EXPECT_EQ(contents(target), "theirs");
}

TEST(Collective, AnIdOfAnotherSizeOrAFifoIsRefused) {
  std::string path = scratchPath("short"), error;
  std::ofstream(path) << "12345";
  CollectiveId id;
  EXPECT_FALSE(readCollectiveId(path, id, error));
  EXPECT_NE(error.find("is not a communicator id (128 bytes"),
            std::string::npos)
      << error;
  std::string fifo = scratchPath("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  error.clear();
  EXPECT_FALSE(readCollectiveId(fifo, id, error));
  EXPECT_NE(error.find("is not a communicator id"), std::string::npos) << error;
}

TEST(Collective, AnIdNeverPublishedIsAnErrorAtTheDeadline) {
  setenv("V4A_NCCL_TIMEOUT", "1", 1);
  std::string path = scratchPath("never"), error;
  CollectiveId id;
  EXPECT_FALSE(readCollectiveId(path, id, error));
  EXPECT_NE(error.find("did not publish the communicator id within 1 s"),
            std::string::npos)
      << error;
  unsetenv("V4A_NCCL_TIMEOUT");
}

TEST(Collective, AMissingLibraryIsOneError) {
  setenv("V4A_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  CollectiveId id;
  std::string error;
  EXPECT_FALSE(Collective::makeId(id, error));
  EXPECT_EQ(error.rfind("no NCCL: cannot load /nonexistent/libnccl.so.2", 0),
            0u)
      << error;
  EXPECT_EQ(Collective::join(id, 0, 1, error), nullptr);
  unsetenv("V4A_NCCL_LIBRARY");
}

TEST(Collective, ARankOutsideTheWorldIsRefused) {
  CollectiveId id;
  std::string error;
  EXPECT_EQ(Collective::join(id, 2, 2, error), nullptr);
  EXPECT_NE(error.find("rank 2 of 2"), std::string::npos) << error;
}

/// bf16 bits of small integers (exact).
uint16_t bf16Of(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return static_cast<uint16_t>(bits >> 16);
}

TEST(Collective, EveryGpuSumsInPlaceOnTheStreamAndInAGraph) {
  std::string error;
  std::unique_ptr<CudaBackend> probe = CudaBackend::create(0, error);
  if (!probe)
    GTEST_SKIP() << error;
  CollectiveId id;
  if (!Collective::makeId(id, error))
    GTEST_SKIP() << error;
  int world = 1;
  while (world < 8 && CudaBackend::create(world, error))
    ++world;
  probe.reset();
  constexpr int64_t kCount = 4099;
  std::vector<std::string> failures(world);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < world; ++rank)
    ranks.emplace_back([&, rank] {
      std::string &why = failures[rank];
      std::unique_ptr<CudaBackend> gpu = CudaBackend::create(rank, why);
      std::unique_ptr<Collective> collective =
          gpu ? Collective::join(id, rank, world, why) : nullptr;
      if (!collective)
        return;
      std::vector<uint16_t> host(kCount);
      for (int64_t i = 0; i < kCount; ++i)
        host[i] = bf16Of(static_cast<float>((rank + 1) * (i % 17)));
      void *data = gpu->allocate(2 * kCount, why);
      if (!data)
        return;
      gpu->copyToDevice(data, host.data(), 2 * kCount);
      // Once on the stream, then twice more as one recorded graph.
      bool ok =
          collective->allReduceBF16(data, kCount, gpu->currentStream(), why);
      void *graph = nullptr;
      if (ok && gpu->beginGraph(why)) {
        ok = collective->allReduceBF16(data, kCount, gpu->currentStream(), why);
        graph = gpu->endGraph(why);
        ok = ok && graph && gpu->launchGraph(graph, why) &&
             gpu->launchGraph(graph, why) && gpu->synchronize(why);
      }
      std::vector<uint16_t> summed(kCount);
      gpu->copyToHost(summed.data(), data, 2 * kCount);
      if (graph)
        gpu->releaseGraph(graph);
      gpu->release(data);
      if (!ok || why.size())
        return;
      // Three sums: each multiplies by the sum of the ranks' factors.
      float factor = world * (world + 1) / 2.0f;
      float scale = factor * std::pow(static_cast<float>(world), 2.0f);
      for (int64_t i = 0; i < kCount; ++i)
        if (summed[i] != bf16Of(scale * static_cast<float>(i % 17))) {
          why = "element " + std::to_string(i) + " is wrong";
          return;
        }
    });
  for (std::thread &rank : ranks)
    rank.join();
  for (int rank = 0; rank < world; ++rank)
    EXPECT_EQ(failures[rank], "") << "rank " << rank << " of " << world;
}

} // namespace
