//===- TestSupport.h - Helpers shared by the runtime tests ------*- C++ -*-===//
//
// Random inputs and op attributes, used by the CPU runtime tests
// (runtime/test) and the CUDA tests (runtime/cuda), which compare the same
// ops on both.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_TEST_TESTSUPPORT_H
#define TOFU_RUNTIME_TEST_TESTSUPPORT_H

#include "tofu/runtime/Plan.h"

#include <cstdint>
#include <random>
#include <vector>

namespace tofu::test {

/// `n` floats drawn uniformly from [lo, hi) with a fixed seed.
inline std::vector<float> randomFloats(size_t n, uint32_t seed,
                                       float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

inline plan::Attr floatAttr(const char *name, double v) {
  plan::Attr a;
  a.name = name;
  a.kind = plan::Attr::Kind::Float;
  a.f = v;
  return a;
}

inline plan::Attr intAttr(const char *name, int64_t v) {
  plan::Attr a;
  a.name = name;
  a.kind = plan::Attr::Kind::Int;
  a.i = v;
  return a;
}

inline plan::Attr intsAttr(const char *name, std::vector<int64_t> v) {
  plan::Attr a;
  a.name = name;
  a.kind = plan::Attr::Kind::Ints;
  a.ints = std::move(v);
  return a;
}

} // namespace tofu::test

#endif // TOFU_RUNTIME_TEST_TESTSUPPORT_H
