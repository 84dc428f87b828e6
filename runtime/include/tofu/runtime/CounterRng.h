//===- CounterRng.h - Counter-based uniform random numbers ------*- C++ -*-===//
//
// The random numbers of TDL's `uniform(seed, n)` builtin (docs/TDL.md),
// shared by the compiler's reference evaluator (lib/TDL) and tofu-run's
// expression interpreter so that both give bit-identical values. A
// counter-based generator has no state: value n depends only on (seed, n),
// so any device can compute any element of a random tensor on its own, and
// k devices together produce exactly the tensor one device would. Header
// only, std only (the runtime builds without LLVM).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_COUNTERRNG_H
#define TOFU_RUNTIME_COUNTERRNG_H

#include <cmath>
#include <cstdint>

namespace tofu::rng {

/// SplitMix64's output function (Steele, Lea, Flood: "Fast splittable
/// pseudorandom number generators", OOPSLA 2014; the constants of Java's
/// SplittableRandom).
inline uint64_t splitMix64Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// SplitMix64's increment (the golden gamma).
inline constexpr uint64_t kSplitMix64Gamma = 0x9E3779B97F4A7C15ull;
/// The key's increment per training step (an odd constant, so distinct steps
/// give distinct keys for one seed).
inline constexpr uint64_t kStepGamma = 0xD1B54A32D192ED03ull;

/// A double converted to int64 the way `uniform` reads its operands: floor,
/// NaN gives 0, out-of-range values saturate.
inline int64_t counterOperand(double x) {
  if (std::isnan(x))
    return 0;
  x = std::floor(x);
  if (x >= 9223372036854775807.0)
    return INT64_MAX;
  if (x <= -9223372036854775808.0)
    return INT64_MIN;
  return static_cast<int64_t>(x);
}

/// Value `counter` of the stream keyed by `seed`, uniform in [0, 1): the
/// (counter + 1)-th output of a SplitMix64 generator whose state starts at
/// key = mix(seed) + step * kStepGamma, i.e.
/// mix(key + (counter + 1) * gamma) mod 2^64, whose top 53 bits scaled by
/// 2^-53 give the double. Both operands are read with counterOperand (two's
/// complement for negative values). `step` is the training step tofu-run is
/// executing (0 for the first step and for the TDL reference evaluator), so
/// every step draws new values while every device of a step draws the same.
inline double counterUniform(double seed, double counter, uint64_t step = 0) {
  uint64_t key = splitMix64Mix(static_cast<uint64_t>(counterOperand(seed))) +
                 step * kStepGamma;
  uint64_t n = static_cast<uint64_t>(counterOperand(counter));
  uint64_t bits = splitMix64Mix(key + (n + 1) * kSplitMix64Gamma);
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

} // namespace tofu::rng

#endif // TOFU_RUNTIME_COUNTERRNG_H
