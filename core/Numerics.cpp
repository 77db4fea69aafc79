//===- Numerics.cpp - rounding to the low-precision formats ---------------===//

#include "core/Numerics.h"

#include <array>
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

/// The nearest integer to a non-negative `value` below 2^23, ties to even:
/// adding 2^23 leaves no fraction bits, so the addition itself rounds.
static float roundToInteger(float value) {
  float shifted = value + 8388608.0f;
  return shifted - 8388608.0f;
}

/// 2^exponent for a normal f32 exponent.
static float powerOfTwo(int exponent) {
  return floatOf(static_cast<uint32_t>(exponent + 127) << 23);
}

/// Rounds a finite |value| to a float format with `mantissaBits` and minimum
/// normal exponent `minExp`, ties to even, without saturation. The exponent
/// is read from the bits (|value| in [2^e, 2^(e+1))); a subnormal f32 rounds
/// on the format's subnormal spacing like any value below 2^minExp.
static float roundToFormat(float magnitude, int mantissaBits, int minExp) {
  if (magnitude == 0.0f)
    return 0.0f;
  int e = static_cast<int>(bitsOf(magnitude) >> 23) - 127;
  if (e < minExp)
    e = minExp; // subnormal spacing
  // Scaling by powers of two is exact here (the quotient has at most
  // mantissaBits + 2 integer bits, far below 2^23).
  return roundToInteger(magnitude * powerOfTwo(mantissaBits - e)) *
         powerOfTwo(e - mantissaBits);
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

uint8_t toE4M3Bits(float value) { return exactE4M3Bits(roundE4M3(value)); }

uint8_t exactE4M3Bits(float value) {
  uint8_t sign = std::signbit(value) ? 0x80 : 0;
  if (std::isnan(value))
    return 0x7f;
  uint32_t bits = bitsOf(std::fabs(value));
  if (bits == 0)
    return sign;
  int e = static_cast<int>(bits >> 23) - 127;
  if (e < -6) // subnormal: magnitude = m * 2^-9, m in 1..7
    return sign | static_cast<uint8_t>(std::fabs(value) * 512.0f);
  // An e4m3 value has at most 3 mantissa bits: the top 3 of f32's 23.
  return sign | static_cast<uint8_t>(((e + 7) << 3) | ((bits >> 20) & 0x7));
}

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
