//===- PackageTest.cpp - package files: round trip and refusals -----------===//

#include "core/Package.h"

#include <gtest/gtest.h>

using namespace v4a;

namespace {

pkg::Package samplePackage() {
  pkg::Package p;
  p.target = "sm_90a";
  p.configJson = "{\"hidden_size\": 64}";
  p.configHash = pkg::hashText(p.configJson);
  ModelConfig &c = p.config;
  c.hiddenSize = 64;
  c.numHiddenLayers = 2;
  c.numAttentionHeads = 2;
  c.headDim = 80;
  c.qkRopeHeadDim = 16;
  c.qLoraRank = 32;
  c.oLoraRank = 32;
  c.oGroups = 2;
  c.slidingWindow = 8;
  c.indexNHeads = 2;
  c.indexHeadDim = 32;
  c.indexTopk = 4;
  c.ropeTheta = 10000.0;
  c.compressRopeTheta = 160000.0;
  c.rmsNormEps = 1e-6;
  c.ropeScaling = YarnConfig{4.0, 64, 32.0, 1.0};
  c.compressRatios = {0, 4};
  c.kvSourceLayerIds = std::vector<int64_t>{0, 1};
  for (int64_t id = 0; id < 2; ++id) {
    LayerSpec layer;
    layer.id = layer.kvSource = layer.indexKSource = layer.indexSource = id;
    layer.compressRatio = c.compressRatios[id];
    p.layers.push_back(layer);
  }
  p.planOptions.contextTokens = 256;
  step::Function f;
  f.name = "step_4_0_1_4";
  f.args = {{"x", step::Element::BF16, {-1, 64}, false},
            {"window", step::Element::Bytes, {-1}, false},
            {"y", step::Element::BF16, {-1, 64}, true}};
  f.host.values = 4;
  step::HostOp dim;
  dim.kind = step::HostOp::Kind::Dim;
  dim.result = 3;
  dim.operands = {0};
  dim.data = {0};
  f.host.ops = {dim};
  p.functions = {f};
  p.calls = {{0, -1, 0}, {0, 0, 1}};
  p.ptx = "// ptx\n.version 8.0\n";
  return p;
}

TEST(Package, RoundTripsByteForByte) {
  std::string bytes = pkg::serialize(samplePackage());
  std::string error;
  std::optional<pkg::Package> parsed = pkg::parse(bytes, "sm_90a", error);
  ASSERT_TRUE(parsed) << error;
  EXPECT_EQ(pkg::serialize(*parsed), bytes);
  EXPECT_EQ(parsed->config.ropeScaling->originalMaxPositionEmbeddings, 64);
  EXPECT_EQ(parsed->config.rmsNormEps, 1e-6);
  EXPECT_EQ(parsed->functions[0].args[1].element, step::Element::Bytes);
  EXPECT_EQ(parsed->calls[1].meta, 0);
  EXPECT_EQ(parsed->ptx, samplePackage().ptx);
  EXPECT_NE(bytes.find("kernels 4_0_1_4 0"), std::string::npos);
}

TEST(Package, ATensorParallelRankRoundTripsAndNamesItsDegree) {
  pkg::Package rank = samplePackage();
  rank.tensorParallel = 2;
  std::string bytes = pkg::serialize(rank), error;
  EXPECT_NE(bytes.find("tensor_parallel 2"), std::string::npos);
  std::optional<pkg::Package> parsed = pkg::parse(bytes, "sm_90a", error);
  ASSERT_TRUE(parsed) << error;
  EXPECT_EQ(parsed->tensorParallel, 2);
  EXPECT_EQ(pkg::serialize(*parsed), bytes);
  // Degree 1 writes no line: such packages keep their bytes.
  EXPECT_EQ(pkg::serialize(samplePackage()).find("tensor_parallel"),
            std::string::npos);
  // A degree below 2 in the manifest is refused (same length, so the
  // section's size still matches).
  for (const char *degree : {"tensor_parallel 1", "tensor_parallel 0"}) {
    std::string altered = bytes;
    altered.replace(altered.find("tensor_parallel 2"), 17, degree);
    EXPECT_FALSE(pkg::parse(altered, "sm_90a", error)) << degree;
    EXPECT_NE(error.find("is not an integer in [2, 64]"), std::string::npos)
        << error;
  }
}

TEST(Package, ACubinIsAnOptionalSection) {
  pkg::Package package = samplePackage();
  EXPECT_EQ(pkg::serialize(package).find("cubin"), std::string::npos);
  package.cubin = std::string("\x7f"
                              "ELF\0\1\2",
                              7);
  std::string bytes = pkg::serialize(package), error;
  std::optional<pkg::Package> parsed = pkg::parse(bytes, "sm_90a", error);
  ASSERT_TRUE(parsed) << error;
  EXPECT_EQ(parsed->cubin, package.cubin);
  EXPECT_EQ(parsed->ptx, package.ptx);
  EXPECT_EQ(pkg::serialize(*parsed), bytes);
}

TEST(Package, AnotherFormatVersionIsRefusedNamingBoth) {
  std::string bytes = pkg::serialize(samplePackage());
  bytes[8] = 7;
  std::string error;
  EXPECT_FALSE(pkg::parse(bytes, "", error));
  EXPECT_EQ(error, "package format version 7, this runtime reads version 6");
}

TEST(Package, AnotherTargetIsRefusedNamingBoth) {
  std::string error;
  EXPECT_FALSE(pkg::parse(pkg::serialize(samplePackage()), "sm_100a", error));
  EXPECT_EQ(error, "the package targets sm_90a, not sm_100a");
}

TEST(Package, EveryTruncationIsAnError) {
  std::string bytes = pkg::serialize(samplePackage());
  for (size_t size = 0; size < bytes.size(); ++size) {
    std::string error;
    EXPECT_FALSE(pkg::parse(bytes.substr(0, size), "", error)) << size;
    EXPECT_FALSE(error.empty()) << size;
  }
}

TEST(Package, RandomBytesAreNotAPackage) {
  std::string bytes(4096, '\0');
  uint32_t state = 12345;
  for (char &c : bytes) {
    state = state * 1664525u + 1013904223u;
    c = static_cast<char>(state >> 24);
  }
  std::string error;
  EXPECT_FALSE(pkg::parse(bytes, "", error));
  EXPECT_EQ(error, "not a v4a package (no V4APKG header)");
}

TEST(Package, AnAlteredConfigurationFailsItsHash) {
  std::string bytes = pkg::serialize(samplePackage());
  size_t at = bytes.find("\"hidden_size\": 64");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 15] = '9';
  std::string error;
  EXPECT_FALSE(pkg::parse(bytes, "", error));
  EXPECT_NE(error.find("does not match its hash"), std::string::npos) << error;
}

TEST(Package, AbsurdSizesAreRefused) {
  pkg::Package p = samplePackage();
  p.config.hiddenSize = int64_t(1) << 40;
  std::string error;
  EXPECT_FALSE(pkg::parse(pkg::serialize(p), "", error));
  EXPECT_NE(error.find("hidden_size is 1099511627776, outside [1, 1048576]"),
            std::string::npos)
      << error;
}

TEST(Package, ACallOfAMissingFunctionIsRefused) {
  pkg::Package p = samplePackage();
  p.calls.push_back({3, -1, -1});
  std::string error;
  EXPECT_FALSE(pkg::parse(pkg::serialize(p), "", error));
  EXPECT_NE(error.find("section 'schedule'"), std::string::npos) << error;
}

} // namespace
