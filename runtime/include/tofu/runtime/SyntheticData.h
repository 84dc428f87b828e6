//===- SyntheticData.h - Deterministic synthetic training data ---*- C++ -*-===//
//
// The default data source of tofu-run: a fixed dataset of `kNumBatches`
// batches, identical for every device count k, so that a k-device run can be
// compared with a 1-device run element by element.
//
//  * Input tensors (f32, global shape [B, ...]): element e (flat, global,
//    row-major) of batch b is uniform in [-1, 1):
//      h = splitmix64(splitmix64(splitmix64(fnv1a64(name)) ^ b) ^ e)
//      x = (h >> 40) * 2^-23 - 1
//  * Label tensors (i64, [B]) with numClasses C:
//    - with a paired input x (rows flattened to F features): a learnable
//      teacher, labels[n] = argmax_c sum_j x[n, j] * T[j, c] (first maximum),
//      T[j, c] = uniform [-1, 1) from splitmix64 of (kTeacherSeed, j * C + c);
//    - otherwise uniform: labels[n] = splitmix64-hash(name, b, n) mod C.
//
// Values depend only on global coordinates, so any box can be generated on
// its own.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_SYNTHETICDATA_H
#define TOFU_RUNTIME_SYNTHETICDATA_H

#include "tofu/runtime/Plan.h"

#include <string>

namespace tofu::runtime {

class SyntheticData {
public:
  /// Number of distinct batches; step s uses batch s % kNumBatches.
  static constexpr int64_t kNumBatches = 16;
  /// Seed of the teacher matrix T.
  static constexpr uint64_t kTeacherSeed = 0x7e4c4e5dULL;

  explicit SyntheticData(const plan::Plan &plan) : plan(plan) {}

  /// Writes box `region` of Input/Label tensor `tensor` for batch `batch`
  /// densely (row-major) to `out`. Returns an error for other tensors or
  /// malformed label metadata.
  std::string fill(int32_t tensor, const plan::Box &region, int64_t batch,
                   void *out) const;

  /// One input value (exposed for tests).
  static float inputValue(const std::string &name, int64_t batch,
                          int64_t flatIndex);

private:
  const plan::Plan &plan;
};

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_SYNTHETICDATA_H
