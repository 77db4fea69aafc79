//===- SafeTensorsTest.cpp - the safetensors reader and writer ------------===//

#include "runtime/SafeTensors.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace v4a;

namespace {

std::vector<uint8_t> withHeader(const std::string &header,
                                const std::string &data = "") {
  std::vector<uint8_t> bytes(8);
  uint64_t size = header.size();
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<uint8_t>(size >> (8 * i));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

std::string parseError(const std::vector<uint8_t> &bytes) {
  std::string error;
  EXPECT_FALSE(st::parse(bytes.data(), bytes.size(), error));
  return error;
}

TEST(SafeTensors, RoundTripsDeterministically) {
  st::File file;
  file["b"] = st::fromF32({2}, {1.5f, -2.0f}, st::DType::BF16);
  file["a"] = st::fromF32({1, 2}, {0.25f, 3.0f});
  std::vector<uint8_t> bytes = st::serialize(file);
  EXPECT_EQ(bytes, st::serialize(file));
  std::string error;
  auto back = st::parse(bytes.data(), bytes.size(), error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(*back->at("b").toF32(), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(back->at("a").shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(*back->at("a").toF32(), (std::vector<float>{0.25f, 3.0f}));
  EXPECT_EQ(back->at("a").dtype, st::DType::F32);
  EXPECT_EQ(back->at("b").dtype, st::DType::BF16);
}

TEST(SafeTensors, ErrorsNameTheProblem) {
  EXPECT_NE(parseError({1, 2, 3}).find("too short"), std::string::npos);
  EXPECT_NE(parseError(withHeader("{")).find("malformed JSON"),
            std::string::npos);
  std::vector<uint8_t> huge = withHeader("{}");
  huge[0] = 0xff;
  EXPECT_NE(parseError(huge).find("exceeds the file"), std::string::npos);
  EXPECT_EQ(
      parseError(withHeader(
          R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "1234")),
      "w: data ends at byte 8 but the file has 4 data bytes (truncated file?)");
  EXPECT_EQ(parseError(withHeader(
                R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                "12345678")),
            "w: data_offsets span 8 bytes, the shape needs 12");
  EXPECT_EQ(
      parseError(withHeader(
          R"({"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", "1")),
      "w: unsupported dtype 'Q4'");
  EXPECT_EQ(parseError(withHeader(
                R"({"w":{"dtype":"F32","shape":[-],"data_offsets":[0,0]}})")),
            "w: shape entries must be integers in [0, 2^40]");
  EXPECT_EQ(parseError(withHeader(R"({"w":{"dtype":"F32","shape":[1]}})")),
            "w: header entry needs dtype, shape and data_offsets [begin, end]");
}

} // namespace
