//===- Numerics.cpp - rounding to the low-precision formats ---------------===//

#include "core/Numerics.h"

#include <array>
#include <cmath>
#include <cstring>

namespace v4a::num {

using detail::bitsOf;
using detail::floatOf;
using detail::powerOfTwo;
using detail::roundToFormat;
using detail::roundToInteger;

uint8_t toE4M3Bits(float value) { return exactE4M3Bits(roundE4M3(value)); }

float fromE4M3Bits(uint8_t bits) {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> values{};
    for (int code = 0; code < 256; ++code) {
      float sign = (code & 0x80) ? -1.0f : 1.0f;
      int exponent = (code >> 3) & 0xf, mantissa = code & 0x7;
      if (exponent == 0xf && mantissa == 0x7)
        values[code] = NAN;
      else if (exponent == 0)
        values[code] = sign * std::ldexp(static_cast<float>(mantissa), -9);
      else
        values[code] = sign * std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
    }
    return values;
  }();
  return table[bits];
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

uint8_t toE2M1Bits(float value) {
  if (std::isnan(value))
    return 0x7;
  float rounded = roundE2M1(value);
  uint8_t sign = std::signbit(rounded) ? 0x8 : 0;
  float magnitude = std::fabs(rounded);
  if (magnitude < 1.0f) // 0 and the subnormal 0.5
    return sign | static_cast<uint8_t>(magnitude * 2.0f);
  int exponent = static_cast<int>(detail::bitsOf(magnitude) >> 23) - 127;
  uint8_t mantissa = (detail::bitsOf(magnitude) >> 22) & 1;
  return sign | static_cast<uint8_t>(2 + 2 * exponent + mantissa);
}

float fromE2M1Bits(uint8_t code) {
  static const float magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f,
                                      2.0f, 3.0f, 4.0f, 6.0f};
  float magnitude = magnitudes[code & 0x7];
  return (code & 0x8) ? -magnitude : magnitude;
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
