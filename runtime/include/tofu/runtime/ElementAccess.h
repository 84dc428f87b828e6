//===- ElementAccess.h - Typed element loads and stores ----------*- C++ -*-===//
//
// Reading and writing one element of any `plan::DType` buffer as a double:
// the expression interpreter computes in double precision and converts at
// every load and store, and so do the generic paths of the executor (adding
// partial sums, synthetic data, .npy conversion).
//
// Conversion rules (stores), chosen to match ONNX Cast and numpy:
//   - float types round to nearest, ties to even (F16 and BF16 from the
//     double directly, so a value is rounded once); values beyond the
//     largest finite value become +-inf, NaN stays NaN;
//   - integer types truncate toward zero and then wrap modulo 2^bits (numpy's
//     uint8 250 + 10 == 4); NaN stores 0; beyond the int64 range (uint64:
//     [-2^63, 2^64)) the value saturates first;
//   - Bool stores 1 for any non-zero value (NaN included), else 0.
// Doubles hold integers exactly up to 2^53: int64/uint64 arithmetic beyond
// that loses low bits on the interpreter.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_ELEMENTACCESS_H
#define TOFU_RUNTIME_ELEMENTACCESS_H

#include "tofu/runtime/Plan.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tofu::runtime {

/// Rounds `v` to the binary floating-point format with `expBits` exponent
/// and `mantBits` stored mantissa bits (IEEE 754 layout, sign in the top
/// bit), round to nearest even, and returns its bit pattern. Used for
/// binary16 (5, 10) and bfloat16 (8, 7).
inline uint32_t encodeSmallFloat(double v, int expBits, int mantBits) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  const uint32_t sign = static_cast<uint32_t>(bits >> 63)
                        << (expBits + mantBits);
  const uint64_t magnitude = bits & 0x7fffffffffffffffULL;
  const uint32_t expMax = (1u << expBits) - 1;
  const uint32_t inf = sign | (expMax << mantBits);
  if (magnitude >= 0x7ff0000000000000ULL) // inf or NaN
    return magnitude == 0x7ff0000000000000ULL
               ? inf
               : inf | (1u << (mantBits - 1)); // quiet NaN
  const int bias = (1 << (expBits - 1)) - 1;
  const int emin = 1 - bias;
  const int exp = static_cast<int>(magnitude >> 52) - 1023;
  // 53-bit significand with the hidden bit (a double subnormal is far below
  // the smallest subnormal of either target and rounds to zero below).
  const uint64_t significand =
      (magnitude & ((uint64_t(1) << 52) - 1)) | (uint64_t(1) << 52);
  // The target's unit in the last place is 2^(max(exp, emin) - mantBits);
  // shift the significand (unit 2^(exp - 52)) down to it.
  const int shift = exp >= emin ? 52 - mantBits : 52 - mantBits + emin - exp;
  if (shift > 53 || exp == -1023)
    return sign; // below half the smallest subnormal (or zero)
  uint64_t q = significand >> shift;
  const uint64_t rest = significand & ((uint64_t(1) << shift) - 1);
  const uint64_t half = uint64_t(1) << (shift - 1);
  if (rest > half || (rest == half && (q & 1)))
    ++q;
  if (exp < emin) // subnormal: q counts units of 2^(emin - mantBits); a carry
    return sign | static_cast<uint32_t>(q); // into bit mantBits is the
                                            // smallest normal, as encoded
  int e = exp + bias;
  if (q == (uint64_t(1) << (mantBits + 1))) { // rounding carried
    q >>= 1;
    ++e;
  }
  if (e >= static_cast<int>(expMax))
    return inf;
  return sign | (static_cast<uint32_t>(e) << mantBits) |
         static_cast<uint32_t>(q & ((uint64_t(1) << mantBits) - 1));
}

/// The value of bit pattern `h` in the format of encodeSmallFloat.
inline double decodeSmallFloat(uint32_t h, int expBits, int mantBits) {
  const uint32_t expMax = (1u << expBits) - 1;
  const int bias = (1 << (expBits - 1)) - 1;
  const bool negative = (h >> (expBits + mantBits)) & 1;
  const uint32_t e = (h >> mantBits) & expMax;
  const uint32_t m = h & ((1u << mantBits) - 1);
  double v;
  if (e == 0)
    v = std::ldexp(static_cast<double>(m), 1 - bias - mantBits);
  else if (e == expMax)
    v = m ? std::nan("") : HUGE_VAL;
  else
    v = std::ldexp(static_cast<double>(m | (1u << mantBits)),
                   static_cast<int>(e) - bias - mantBits);
  return negative ? -v : v;
}

/// IEEE 754 binary16 bits of `v`, rounded to nearest even.
inline uint16_t doubleToHalf(double v) {
  return static_cast<uint16_t>(encodeSmallFloat(v, 5, 10));
}
/// The value of binary16 bits `h`.
inline double halfToDouble(uint16_t h) { return decodeSmallFloat(h, 5, 10); }
/// bfloat16 bits of `v`, rounded to nearest even.
inline uint16_t doubleToBFloat16(double v) {
  return static_cast<uint16_t>(encodeSmallFloat(v, 8, 7));
}
/// The value of bfloat16 bits `h`.
inline double bfloat16ToDouble(uint16_t h) {
  return decodeSmallFloat(h, 8, 7);
}

/// bfloat16 bits of float `f`, rounded to nearest even: doubleToBFloat16(f)
/// (a NaN becomes the quiet NaN of its sign), computed on the float's bits.
inline uint16_t floatToBFloat16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7fc0u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
/// The float value of bfloat16 bits `h` (exact).
inline float bfloat16ToFloat(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
/// floatToBFloat16 / bfloat16ToFloat over n elements.
inline void floatToBFloat16Array(const float *src, uint16_t *dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = floatToBFloat16(src[i]);
}
inline void bfloat16ToFloatArray(const uint16_t *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = bfloat16ToFloat(src[i]);
}

/// `v` truncated toward zero, as the two's-complement bits of a 64-bit
/// integer (NaN gives 0; values beyond [-2^63, 2^64) saturate). Narrower
/// integer types keep the low bits: that is the wrap-around.
inline uint64_t truncateToIntegerBits(double v) {
  if (std::isnan(v))
    return 0;
  double t = std::trunc(v);
  if (t >= 0) {
    if (t >= 18446744073709551616.0)
      return ~uint64_t(0);
    return static_cast<uint64_t>(t);
  }
  if (t <= -9223372036854775808.0)
    return uint64_t(1) << 63;
  return static_cast<uint64_t>(static_cast<int64_t>(t));
}

/// Element `i` of the `dtype` buffer at `data`, as a double.
inline double loadElement(const void *data, plan::DType dtype, int64_t i) {
  using plan::DType;
  const auto *p = static_cast<const uint8_t *>(data);
  auto get = [&](auto zero) {
    decltype(zero) x;
    std::memcpy(&x, p + i * sizeof(x), sizeof(x));
    return x;
  };
  switch (dtype) {
  case DType::F32: return get(float());
  case DType::F64: return get(double());
  case DType::I64: return static_cast<double>(get(int64_t()));
  case DType::I32: return get(int32_t());
  case DType::I16: return get(int16_t());
  case DType::I8: return get(int8_t());
  case DType::U8: return get(uint8_t());
  case DType::U16: return get(uint16_t());
  case DType::U32: return get(uint32_t());
  case DType::U64: return static_cast<double>(get(uint64_t()));
  case DType::Bool: return p[i] != 0 ? 1.0 : 0.0;
  case DType::F16: return halfToDouble(get(uint16_t()));
  case DType::BF16: return bfloat16ToDouble(get(uint16_t()));
  }
  return 0;
}

/// Stores `v` into element `i` of the `dtype` buffer at `data`, converted by
/// the rules in the file comment.
inline void storeElement(void *data, plan::DType dtype, int64_t i, double v) {
  using plan::DType;
  auto *p = static_cast<uint8_t *>(data);
  auto put = [&](auto x) { std::memcpy(p + i * sizeof(x), &x, sizeof(x)); };
  switch (dtype) {
  case DType::F32: put(static_cast<float>(v)); return;
  case DType::F64: put(v); return;
  case DType::I64:
    // int64 keeps its historical saturation at the ends of its range.
    if (std::isnan(v))
      put(int64_t(0));
    else if (v >= 9223372036854775807.0)
      put(INT64_MAX);
    else if (v <= -9223372036854775808.0)
      put(INT64_MIN);
    else
      put(static_cast<int64_t>(v));
    return;
  case DType::U64: put(truncateToIntegerBits(v)); return;
  case DType::I32:
  case DType::U32:
    put(static_cast<uint32_t>(truncateToIntegerBits(v)));
    return;
  case DType::I16:
  case DType::U16:
    put(static_cast<uint16_t>(truncateToIntegerBits(v)));
    return;
  case DType::I8:
  case DType::U8:
    put(static_cast<uint8_t>(truncateToIntegerBits(v)));
    return;
  case DType::Bool: p[i] = v != 0 ? 1 : 0; return;
  case DType::F16: put(doubleToHalf(v)); return;
  case DType::BF16: put(doubleToBFloat16(v)); return;
  }
}

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_ELEMENTACCESS_H
