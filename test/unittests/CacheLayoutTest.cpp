//===- CacheLayoutTest.cpp - row layouts ----------------------------------===//

#include "core/CacheLayout.h"

#include <gtest/gtest.h>

using namespace v4a::layout;

namespace {

int64_t rowBytes(RowKind kind, int64_t dim) {
  std::optional<RowLayout> row = describeRow(kind, dim);
  return row ? row->rowBytes() : -1;
}

TEST(CacheLayout, PublishedRowSizes) {
  // Sizes stated by the specification, section 4.
  EXPECT_EQ(rowBytes(RowKind::BF16, 512), 1024);
  EXPECT_EQ(rowBytes(RowKind::FP8Model1, 512), 584);
  EXPECT_EQ(rowBytes(RowKind::MXFP8, 512), 528);
  EXPECT_EQ(rowBytes(RowKind::IndexBF16, 128), 256);
  EXPECT_EQ(rowBytes(RowKind::IndexFP8, 128), 132);
  EXPECT_EQ(rowBytes(RowKind::IndexMXFP4, 128), 68);
}

TEST(CacheLayout, Model1Parts) {
  std::optional<RowLayout> row = describeRow(RowKind::FP8Model1, 512);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->quantDims, 448);
  EXPECT_EQ(row->rawDims, 64);
  EXPECT_EQ(row->valueBytes, 448 + 2 * 64);
  EXPECT_EQ(row->scaleBytes, 7 + 1);
}

TEST(CacheLayout, RejectsImpossibleWidths) {
  std::string why;
  EXPECT_FALSE(describeRow(RowKind::FP8Model1, 100, &why));
  EXPECT_NE(why.find("fp8_model1"), std::string::npos);
  EXPECT_FALSE(describeRow(RowKind::MXFP8, 48, &why));
  EXPECT_FALSE(describeRow(RowKind::IndexMXFP4, 0, &why));
}

} // namespace
