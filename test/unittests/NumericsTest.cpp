//===- NumericsTest.cpp - the fast roundings against a plain model --------===//
//
// The core's e4m3/e2m1 rounding and e4m3 encoding read exponents from the
// bits; here they are checked against a straightforward frexp/ldexp model on
// a spread of f32 values (every 4099th bit pattern, all signs and binades).
//
//===----------------------------------------------------------------------===//

#include "core/Numerics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace v4a;

namespace {

/// |value| rounded to `mantissaBits` with minimum normal exponent `minExp`.
float modelRound(float magnitude, int mantissaBits, int minExp) {
  if (magnitude == 0.0f)
    return 0.0f;
  int exp;
  std::frexp(magnitude, &exp);
  int e = std::max(exp - 1, minExp);
  float quantum = std::ldexp(1.0f, e - mantissaBits);
  return std::nearbyint(magnitude / quantum) * quantum;
}

float modelSaturating(float value, int mantissaBits, int minExp, float max) {
  float magnitude = std::fabs(value);
  float rounded =
      magnitude >= max
          ? max
          : std::min(max, modelRound(magnitude, mantissaBits, minExp));
  return std::copysign(rounded, value);
}

uint8_t modelE4M3Bits(float value) {
  float rounded = modelSaturating(value, 3, -6, 448.0f);
  uint8_t sign = std::signbit(rounded) ? 0x80 : 0;
  float magnitude = std::fabs(rounded);
  if (magnitude == 0.0f)
    return sign;
  int exp;
  std::frexp(magnitude, &exp);
  int e = exp - 1;
  if (e < -6)
    return sign | static_cast<uint8_t>(std::lround(magnitude * 512.0f));
  int mantissa =
      static_cast<int>(std::lround((magnitude / std::ldexp(1.0f, e) - 1) * 8));
  return sign | static_cast<uint8_t>(((e + 7) << 3) | mantissa);
}

bool sameBits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

} // namespace

TEST(Numerics, FastRoundingsMatchTheModel) {
  int64_t checked = 0;
  for (uint64_t pattern = 0; pattern < (uint64_t(1) << 32); pattern += 4099) {
    uint32_t bits = static_cast<uint32_t>(pattern);
    float value;
    std::memcpy(&value, &bits, 4);
    if (std::isnan(value))
      continue;
    ++checked;
    ASSERT_TRUE(
        sameBits(num::roundE4M3(value), modelSaturating(value, 3, -6, 448.0f)))
        << std::hex << bits;
    ASSERT_TRUE(
        sameBits(num::roundE2M1(value), modelSaturating(value, 1, 0, 6.0f)))
        << std::hex << bits;
    ASSERT_EQ(num::toE4M3Bits(value), modelE4M3Bits(value)) << std::hex << bits;
  }
  EXPECT_GT(checked, 1000000);
}

// e2m1 codes: every code decodes to its value and encodes back; any value
// encodes as its nearest e2m1 value does (ties to even, saturating).
TEST(Numerics, E2M1CodesRoundTrip) {
  const float magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint8_t code = 0; code < 16; ++code) {
    float value = num::fromE2M1Bits(code);
    EXPECT_EQ(std::fabs(value), magnitudes[code & 7]) << int(code);
    EXPECT_EQ(std::signbit(value), (code & 8) != 0) << int(code);
    EXPECT_EQ(num::toE2M1Bits(value), code) << int(code);
  }
  for (float value : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 7.0f, -2.5f,
                      -100.0f, 1e-30f})
    EXPECT_EQ(num::fromE2M1Bits(num::toE2M1Bits(value)), num::roundE2M1(value))
        << value;
}
