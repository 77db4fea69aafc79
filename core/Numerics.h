//===- Numerics.h - rounding to the low-precision formats -------*- C++ -*-===//
//
// Exact, round-to-nearest-even conversions between f32 and the storage
// formats of weights and caches (bf16, e4m3, e2m1, ue8m0).
//
//===----------------------------------------------------------------------===//

#ifndef V4A_CORE_NUMERICS_H
#define V4A_CORE_NUMERICS_H

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

/// The nearest float8 e4m3fn value, saturating at +-448.
float roundE4M3(float value);
uint8_t toE4M3Bits(float value);
/// The code of a value that already is an e4m3 value (no rounding).
uint8_t exactE4M3Bits(float value);
float fromE4M3Bits(uint8_t bits);

/// The nearest e2m1 value (0, 0.5, 1, 1.5, 2, 3, 4, 6), saturating at +-6.
float roundE2M1(float value);

/// ue8m0 scales: 2^(byte - 127).
float fromUE8M0Bits(uint8_t bits);
/// The smallest power of two >= value (value > 0), as a ue8m0 byte.
uint8_t ue8m0CeilBits(float value);

inline constexpr float kE4M3Max = 448.0f;
inline constexpr float kE2M1Max = 6.0f;
/// Block scales are pow2ceil(amax * (1 / max)) as the official kernels
/// compute them: a multiplication by the f32 reciprocal (not a division),
/// with amax floored at these values.
inline constexpr float kE4M3AmaxFloor = 1e-4f;
inline constexpr float kE2M1AmaxFloor = 6.0f * 0x1p-126f;

} // namespace v4a::num

#endif // V4A_CORE_NUMERICS_H
