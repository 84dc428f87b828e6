//===- SyntheticData.h - Deterministic synthetic training data ---*- C++ -*-===//
//
// The default data source of tofu-run: a fixed dataset of `kNumBatches`
// batches, identical for every device count k, so that a k-device run can be
// compared with a 1-device run element by element.
//
//  * Label tensors (i64, [B, *D]) with numClasses C: uniform classes,
//      labels[e] = mix(fnv1a64(name), b, e) mod C, e the flat (row-major)
//      element index (the row n for labels [B]).
//  * Input tensors (f32, global shape [B, ...]): noise u in [-1, 1) for
//    element e (flat, global, row-major) of batch b:
//      h = splitmix64(splitmix64(splitmix64(fnv1a64(name)) ^ b) ^ e)
//      u = (h >> 40) * 2^-23 - 1
//    An input that a label tensor is paired with (the features of a
//    classifier) is learnable: row n lies around the prototype of its class
//    c = labels[n]: x = 0.5 * u + P[c, j], P[c, j] = ±0.5 from
//    mix(kPrototypeSeed, c, j) (j = feature index within the row). Other
//    inputs are u.
//  * Input tensors of token ids (i64) with numClasses V (the rows of the
//    embedding they index): uniform ids, mix(fnv1a64(name), b, e) mod V.
//  * Other element types: float16/bfloat16/float64 inputs get the float32
//    value above, converted (round to nearest even); integer inputs without
//    a class count get floor(8u) (signed) or floor(8(u + 1)) (unsigned),
//    bool inputs u >= 0; labels and token ids of any integer type get the
//    int64 values above.
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
  /// Seed of the class prototypes P.
  static constexpr uint64_t kPrototypeSeed = 0x7e4c4e5dULL;

  explicit SyntheticData(const plan::Plan &plan) : plan(plan) {}

  /// Writes box `region` of Input/Label tensor `tensor` for batch `batch`
  /// densely (row-major) to `out`. Returns an error for other tensors or
  /// malformed label metadata.
  std::string fill(int32_t tensor, const plan::Box &region, int64_t batch,
                   void *out) const;

  /// One input value (exposed for tests).
  static float inputValue(const std::string &name, int64_t batch,
                          int64_t flatIndex);

  /// Class of element `row` (flat, row-major) of label tensor `labels` in
  /// batch `batch`.
  static int64_t labelValue(const plan::TensorInfo &labels, int64_t batch,
                            int64_t row);
  /// Feature `feature` of the prototype of class `label` (±0.5).
  static float prototypeValue(int64_t label, int64_t feature);

private:
  const plan::Plan &plan;
};

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_SYNTHETICDATA_H
