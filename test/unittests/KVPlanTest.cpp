//===- KVPlanTest.cpp - cache planning ------------------------------------===//

#include "core/KVPlan.h"

#include <gtest/gtest.h>

using namespace v4a::plan;
using v4a::LayerSpec;
using v4a::layout::RowKind;

namespace {

const ModelDims kV4Dims{/*headDim=*/512, /*indexHeadDim=*/128, /*window=*/128};

LayerSpec layer(int64_t id, int64_t ratio, int64_t topk, int64_t source) {
  LayerSpec info;
  info.id = id;
  info.compressRatio = ratio;
  info.indexTopk = topk;
  info.kvSource = source;
  info.indexKSource = source;
  return info;
}

Plan plan(const std::vector<LayerSpec> &layers, PlanOptions options = {}) {
  std::string error;
  std::optional<Plan> result = planCaches(layers, kV4Dims, options, error);
  EXPECT_TRUE(result) << error;
  return result.value_or(Plan{});
}

const Buffer *find(const Plan &plan, int64_t layerId, Component component) {
  for (const Buffer &buffer : plan.buffers)
    if (buffer.layer == layerId && buffer.component == component)
      return &buffer;
  return nullptr;
}

TEST(KVPlan, C4LayerOwnsFiveBuffers) {
  Plan p = plan({layer(0, 4, 512, 0)});
  ASSERT_EQ(p.buffers.size(), 5u);
  const Buffer *compressed = find(p, 0, Component::Compressed);
  ASSERT_TRUE(compressed);
  EXPECT_EQ(compressed->rows, (1 << 20) / 4);
  EXPECT_EQ(compressed->rowBytes, 1024);
  const Buffer *keys = find(p, 0, Component::IndexKeys);
  ASSERT_TRUE(keys);
  EXPECT_EQ(keys->dim, 128);
  // Overlap: 2 * 4 slots of kv and score, each 2 * 512 wide, f32.
  const Buffer *state = find(p, 0, Component::CompressorState);
  ASSERT_TRUE(state);
  EXPECT_EQ(state->bytes, 8 * 2 * 1024 * 4);
}

TEST(KVPlan, ConsumersAliasAndCountOnce) {
  std::vector<LayerSpec> layers = {layer(0, 2, 8, 0), layer(1, 2, 8, 0),
                                   layer(2, 2, 8, 0)};
  Plan shared = plan(layers);
  PlanOptions independent;
  independent.ignoreSharing = true;
  Plan unshared = plan(layers, independent);
  const Buffer *consumer = find(shared, 2, Component::Compressed);
  ASSERT_TRUE(consumer);
  EXPECT_EQ(consumer->aliasOf, 0);
  const Buffer *source = find(shared, 0, Component::Compressed);
  int64_t compressedBytes = source->bytes;
  int64_t windowBytes = find(shared, 0, Component::Window)->bytes;
  int64_t keyBytes = find(shared, 0, Component::IndexKeys)->bytes;
  int64_t stateBytes = find(shared, 0, Component::CompressorState)->bytes;
  EXPECT_EQ(shared.allocatedBytes(),
            3 * windowBytes + compressedBytes + keyBytes + stateBytes);
  EXPECT_EQ(unshared.allocatedBytes(),
            3 * (windowBytes + compressedBytes + keyBytes + stateBytes));
}

TEST(KVPlan, PagesAndAlignment) {
  PlanOptions options;
  options.contextTokens = 1000;
  options.pageSize = 64;
  options.alignment = 4096;
  options.mainLayout = MainLayout::FP8;
  Plan p = plan({layer(0, 128, 0, 0)}, options);
  const Buffer *compressed = find(p, 0, Component::Compressed);
  ASSERT_TRUE(compressed);
  EXPECT_EQ(compressed->rows, 64); // 7 groups round up to one page
  EXPECT_EQ(compressed->kind, RowKind::FP8Model1);
  EXPECT_EQ(compressed->bytes, 40960); // 64 * 584 = 37376 -> 10 * 4096
}

TEST(KVPlan, ImpossibleLayoutIsAnError) {
  ModelDims narrow{96, 128, 8};
  PlanOptions options;
  options.mainLayout = MainLayout::FP8;
  std::string error;
  EXPECT_FALSE(planCaches({layer(0, 4, 4, 0)}, narrow, options, error));
  EXPECT_NE(error.find("layer 0 window"), std::string::npos);
}

} // namespace
