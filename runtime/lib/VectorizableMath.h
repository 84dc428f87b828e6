//===- VectorizableMath.h - exp, tanh, sigmoid, normal CDF, vectorizable -===//
//
// Float32 functions written branch-free (selects, range reduction,
// polynomials), so that a loop over them compiles to SIMD code where a libm
// call per element (std::exp, std::erf) does not vectorize. The kernels
// use them for float32; float64 keeps libm. They need -fno-trapping-math
// (runtime/CMakeLists.txt) to vectorize with GCC.
//
// `vectorizableExp(x)`: e^x for float, and for double (std::exp, correctly rounded in
// glibc).
//
// The float form: n = round(x / ln 2), r = x - n ln 2 (ln 2 split into a
// 9-bit head, exact in n * head for |n| < 2^15, and a tail), e^r by its
// Taylor polynomial of degree 7 on |r| <= ln 2 / 2 (truncation below 6e-9
// relative, under 0.1 ulp), times 2^n as two exact powers of two, so that
// large negative x underflow gradually through the subnormals and large
// positive x overflow to inf. Measured against the double-precision exp,
// rounded, over every 2^12-th float in [-104, 89]: at most 2 ulp
// (runtime/test/KernelsTest.cpp, VectorizableExp). NaN stays NaN.
//
// `vectorizableTanh(x)`, `vectorizableSigmoid(x)`: float only, from
// vectorizableExp (tanh below |x| = 1/2 by its odd Taylor series); within 4
// ulp of the double forms (KernelsTest, VectorizableTanhAndSigmoid).
//
// `vectorizableNormalCdf(x, &density)`: the standard normal CDF Phi(x) = (1 + erf(x /
// sqrt 2)) / 2, with e^(-x^2 / 2) as a by-product (GELU is x Phi(x), its
// derivative Phi(x) + x phi(x)). Below |u| = |x| / sqrt 2 = 1: 1/2 + u P(u^2)
// / 2; above, erfc(|u|) = e^(-u^2) R(1 / |u|) directly (so the left tail
// keeps its relative accuracy instead of cancelling in 1 + erf, as the
// formula PyTorch evaluates does); P and R are least-squares fits on
// Chebyshev nodes (scripts/fit_normal_cdf.py: erf(u) / u on [0, 1], relative
// error 2e-9; erfc(u) e^(u^2) on [1, 10], 2e-8); beyond |u| = 10 the tail is
// below 2e-45.
// Internal to tofu_runtime.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_LIB_VECTORIZABLEMATH_H
#define TOFU_RUNTIME_LIB_VECTORIZABLEMATH_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tofu::runtime {

/// e^x in float32 arithmetic, within 2 ulp; see the file comment.
inline float vectorizableExp(float x) {
  // Below -104 the result rounds to 0 even as a subnormal, above 89 it is
  // inf: clamp to [-110, 89] (e^-110 is far below half the least
  // subnormal), so that n stays in [-159, 129]; NaN passes both comparisons.
  float c = x < -110.0f ? -110.0f : x;
  c = c > 89.0f ? 89.0f : c;
  // Adding 1.5 * 2^23 rounds to an integer (round to nearest even) that the
  // low bits of the sum's representation hold.
  const float shifter = 12582912.0f;
  float t = c * 1.44269504088896341f + shifter;
  float n = t - shifter;
  uint32_t tBits, shifterBits;
  std::memcpy(&tBits, &t, sizeof t);
  std::memcpy(&shifterBits, &shifter, sizeof shifter);
  int32_t ni = static_cast<int32_t>(tBits - shifterBits);
  const float ln2Head = 0.693359375f;           // 355 / 512
  const float ln2Tail = -2.12194440054690583e-4f; // ln 2 - ln2Head
  float r = (c - n * ln2Head) - n * ln2Tail;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n = 2^h * 2^(n - h), each factor a normal float for n in [-159, 129].
  int32_t h = ni / 2;
  uint32_t b1 = static_cast<uint32_t>(h + 127) << 23;
  uint32_t b2 = static_cast<uint32_t>(ni - h + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, sizeof s1);
  std::memcpy(&s2, &b2, sizeof s2);
  float e = p * s1 * s2;
  return x != x ? x : e;
}

/// e^x in double (glibc's std::exp).
inline double vectorizableExp(double x) { return std::exp(x); }

/// tanh(x) in float32 arithmetic, branch-free: below |x| = 1/2 the odd
/// Taylor series to x^15 (truncation under 1e-8 relative there), else
/// sign(x) (1 - 2 / (e^(2|x|) + 1)) with vectorizableExp (the subtraction
/// loses under 1.2 bits at |x| = 1/2). Measured against the double tanh,
/// rounded, over every 2^12-th float in [-12, 12]: within 4 ulp
/// (runtime/test/KernelsTest.cpp, VectorizableTanhAndSigmoid). NaN stays
/// NaN; -0 stays -0.
inline float vectorizableTanh(float x) {
  const float a = std::fabs(x);
  // e^(2|x|), clamped where tanh is 1 in float32 (NaN: to 20, then
  // restored below).
  const float e = vectorizableExp(2.0f * (a < 20.0f ? a : 20.0f));
  const float large = 1.0f - 2.0f / (e + 1.0f);
  const float x2 = x * x;
  float p = -929569.0f / 638512875.0f;
  p = p * x2 + 21844.0f / 6081075.0f;
  p = p * x2 - 1382.0f / 155925.0f;
  p = p * x2 + 62.0f / 2835.0f;
  p = p * x2 - 17.0f / 315.0f;
  p = p * x2 + 2.0f / 15.0f;
  p = p * x2 - 1.0f / 3.0f;
  const float small = x + x * x2 * p;
  // tanh is odd: the sign is x's (also for -0, where small is +0).
  const float t = std::copysign(a < 0.5f ? small : large, x);
  return x != x ? x : t;
}

/// The logistic sigmoid 1 / (1 + e^-x) in float32 arithmetic with
/// vectorizableExp: within 4 ulp of the double form on [-80, 80]
/// (KernelsTest, VectorizableTanhAndSigmoid); 0 below about -88, 1 above
/// 17; NaN stays NaN.
inline float vectorizableSigmoid(float x) {
  return 1.0f / (1.0f + vectorizableExp(-x));
}

/// Phi(x) in float32 arithmetic; `gauss` receives e^(-x^2 / 2). See the
/// file comment; accuracy measured in runtime/test/KernelsTest.cpp
/// (NormalCdf). NaN stays NaN.
inline float vectorizableNormalCdf(float x, float &gauss) {
  const float u = x * 0.707106781f; // x / sqrt 2
  const float a = std::fabs(u);
  gauss = vectorizableExp(-(u * u));
  // Near 0: erf(u) = u P(u^2).
  const float s = u * u;
  float p = 7.933493885e-05f;
  p = p * s - 8.034846650e-04f;
  p = p * s + 5.191218377e-03f;
  p = p * s - 2.685539945e-02f;
  p = p * s + 1.128362573e-01f;
  p = p * s - 3.761262988e-01f;
  p = p * s + 1.128379167e+00f;
  const float central = 0.5f + 0.5f * (u * p);
  // The tails: erfc(|u|) = e^(-u^2) R(t), t = 1 / |u| (t in [0.1, 1] for
  // |u| in [1, 10]; clamped so that large |u| stay in the fitted range).
  const float t = 1.0f / (a < 1.0f ? 1.0f : a > 10.0f ? 10.0f : a);
  float r = -5.060919031e-02f;
  r = r * t + 3.409230430e-01f;
  r = r * t - 1.017139239e+00f;
  r = r * t + 1.747649740e+00f;
  r = r * t - 1.848493010e+00f;
  r = r * t + 1.116535918e+00f;
  r = r * t - 1.672569539e-01f;
  r = r * t - 2.557494088e-01f;
  r = r * t - 2.610204341e-03f;
  r = r * t + 5.643364350e-01f;
  r = r * t - 3.556522865e-06f;
  const float halfErfc = 0.5f * (gauss * r);
  const float tail = u < 0.0f ? halfErfc : 1.0f - halfErfc;
  return a < 1.0f || x != x ? central : tail;
}

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_LIB_VECTORIZABLEMATH_H
