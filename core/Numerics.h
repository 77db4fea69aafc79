//===- Numerics.h - rounding to the low-precision formats -------*- C++ -*-===//
//
// Exact, round-to-nearest-even conversions between f32 and the storage
// formats of weights and caches (bf16, e4m3, e2m1, ue8m0).
//
//===----------------------------------------------------------------------===//

#ifndef V4A_CORE_NUMERICS_H
#define V4A_CORE_NUMERICS_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace v4a::num {

/// bf16 conversions are inline: weights and activations pass through them
/// by the hundred million.
inline uint16_t toBF16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if (value != value) // NaN stays NaN
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}
inline float fromBF16Bits(uint16_t bits) {
  uint32_t wide = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}
/// The nearest bf16 value (ties to even); NaN stays NaN.
inline float roundBF16(float value) { return fromBF16Bits(toBF16Bits(value)); }

inline constexpr float kE4M3Max = 448.0f;

namespace detail {
inline uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}

inline float floatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

/// The nearest integer to a non-negative `value` below 2^23, ties to even:
/// adding 2^23 leaves no fraction bits, so the addition itself rounds.
inline float roundToInteger(float value) {
  float shifted = value + 8388608.0f;
  return shifted - 8388608.0f;
}

/// 2^exponent for a normal f32 exponent.
inline float powerOfTwo(int exponent) {
  return floatOf(static_cast<uint32_t>(exponent + 127) << 23);
}

/// Rounds a finite |value| to a float format with `mantissaBits` and minimum
/// normal exponent `minExp`, ties to even, without saturation. The exponent
/// is read from the bits (|value| in [2^e, 2^(e+1))); a subnormal f32 rounds
/// on the format's subnormal spacing like any value below 2^minExp.
inline float roundToFormat(float magnitude, int mantissaBits, int minExp) {
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

} // namespace detail

/// The nearest float8 e4m3fn value, saturating at +-448 (inline: random
/// fp8 weights round every value).
inline float roundE4M3(float value) {
  using namespace detail;
  if (std::isnan(value))
    return value;
  float magnitude = std::fabs(value);
  float rounded =
      magnitude >= kE4M3Max ? kE4M3Max : roundToFormat(magnitude, 3, -6);
  if (rounded > kE4M3Max)
    rounded = kE4M3Max;
  return std::copysign(rounded, value);
}

/// The code of a value that already is an e4m3 value (no rounding).
inline uint8_t exactE4M3Bits(float value) {
  uint8_t sign = std::signbit(value) ? 0x80 : 0;
  if (std::isnan(value))
    return 0x7f;
  uint32_t bits = detail::bitsOf(std::fabs(value));
  if (bits == 0)
    return sign;
  int e = static_cast<int>(bits >> 23) - 127;
  if (e < -6) // subnormal: magnitude = m * 2^-9, m in 1..7
    return sign | static_cast<uint8_t>(std::fabs(value) * 512.0f);
  // An e4m3 value has at most 3 mantissa bits: the top 3 of f32's 23.
  return sign | static_cast<uint8_t>(((e + 7) << 3) | ((bits >> 20) & 0x7));
}
uint8_t toE4M3Bits(float value);
float fromE4M3Bits(uint8_t bits);

/// The nearest e2m1 value (0, 0.5, 1, 1.5, 2, 3, 4, 6), saturating at +-6.
float roundE2M1(float value);
/// The 4-bit code (sign, 2 exponent bits, 1 mantissa bit) of the nearest
/// e2m1 value, and back. NaN, which e2m1 lacks, encodes as +6.
uint8_t toE2M1Bits(float value);
float fromE2M1Bits(uint8_t code);

/// ue8m0 scales: 2^(byte - 127).
float fromUE8M0Bits(uint8_t bits);
/// The smallest power of two >= value (value > 0), as a ue8m0 byte.
uint8_t ue8m0CeilBits(float value);

inline constexpr float kE2M1Max = 6.0f;
/// Block scales are pow2ceil(amax * (1 / max)) as the official kernels
/// compute them: a multiplication by the f32 reciprocal (not a division),
/// with amax floored at these values.
inline constexpr float kE4M3AmaxFloor = 1e-4f;
inline constexpr float kE2M1AmaxFloor = 6.0f * 0x1p-126f;

} // namespace v4a::num

#endif // V4A_CORE_NUMERICS_H
