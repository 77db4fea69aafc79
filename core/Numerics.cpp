//===- Numerics.cpp - rounding to the low-precision formats ---------------===//

#include "core/Numerics.h"

#include <cmath>
#include <cstring>

namespace v4a::num {

static uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}

static float floatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

uint16_t toBF16Bits(float value) {
  uint32_t bits = bitsOf(value);
  if (std::isnan(value))
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float fromBF16Bits(uint16_t bits) { return floatOf(uint32_t(bits) << 16); }

float roundBF16(float value) { return fromBF16Bits(toBF16Bits(value)); }

/// Rounds |value| to a float format with `mantissaBits` and minimum normal
/// exponent `minExp`, ties to even, without saturation.
static float roundToFormat(float magnitude, int mantissaBits, int minExp) {
  if (magnitude == 0.0f)
    return 0.0f;
  int exp;
  std::frexp(magnitude, &exp); // magnitude = m * 2^exp, m in [0.5, 1)
  int e = exp - 1;             // magnitude in [2^e, 2^(e+1))
  if (e < minExp)
    e = minExp; // subnormal spacing
  float quantum = std::ldexp(1.0f, e - mantissaBits);
  return std::nearbyint(magnitude / quantum) * quantum;
}

float roundE4M3(float value) {
  if (std::isnan(value))
    return value;
  float magnitude = std::fabs(value);
  float rounded =
      magnitude >= kE4M3Max ? kE4M3Max : roundToFormat(magnitude, 3, -6);
  if (rounded > kE4M3Max)
    rounded = kE4M3Max;
  return std::copysign(rounded, value);
}

uint8_t toE4M3Bits(float value) {
  float rounded = roundE4M3(value);
  uint8_t sign = std::signbit(rounded) ? 0x80 : 0;
  float magnitude = std::fabs(rounded);
  if (std::isnan(rounded))
    return 0x7f;
  if (magnitude == 0.0f)
    return sign;
  int exp;
  std::frexp(magnitude, &exp);
  int e = exp - 1;
  if (e < -6) // subnormal: m * 2^-9
    return sign |
           static_cast<uint8_t>(std::lround(magnitude / std::ldexp(1.0f, -9)));
  int mantissa = static_cast<int>(
      std::lround((magnitude / std::ldexp(1.0f, e) - 1.0f) * 8));
  return sign | static_cast<uint8_t>(((e + 7) << 3) | mantissa);
}

float fromE4M3Bits(uint8_t bits) {
  float sign = (bits & 0x80) ? -1.0f : 1.0f;
  int exponent = (bits >> 3) & 0xf, mantissa = bits & 0x7;
  if (exponent == 0xf && mantissa == 0x7)
    return NAN;
  if (exponent == 0)
    return sign * std::ldexp(static_cast<float>(mantissa), -9);
  return sign * std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
}

float roundE2M1(float value) {
  if (std::isnan(value))
    return value;
  float magnitude = std::fabs(value);
  float rounded =
      magnitude >= kE2M1Max ? kE2M1Max : roundToFormat(magnitude, 1, 0);
  if (rounded > kE2M1Max)
    rounded = kE2M1Max;
  return std::copysign(rounded, value);
}

float fromUE8M0Bits(uint8_t bits) { return std::ldexp(1.0f, int(bits) - 127); }

uint8_t ue8m0CeilBits(float value) {
  int exp;
  float mantissa = std::frexp(value, &exp); // value = m * 2^exp, m in [0.5,1)
  int e = mantissa == 0.5f ? exp - 1 : exp;
  if (e < -127)
    e = -127;
  if (e > 127)
    e = 127;
  return static_cast<uint8_t>(e + 127);
}

} // namespace v4a::num
