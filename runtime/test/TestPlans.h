//===- TestPlans.h - Hand-built plans for the runtime tests ------*- C++ -*-===//
#ifndef TOFU_RUNTIME_TEST_TESTPLANS_H
#define TOFU_RUNTIME_TEST_TESTPLANS_H

#include "tofu/runtime/Plan.h"

namespace tofu::test {

/// Tensor ids of the two-device plan.
enum TwoDeviceTensor : int32_t {
  kX = 0,    ///< Input [4, 4], rows split
  kY = 1,    ///< Activation [4, 4] = Relu(X), rows split
  kP = 2,    ///< Gradient [4] of W = column sums of Y (BiasGrad), reduced
  kL = 3,    ///< Label [4], 4 classes, paired with X
  kLoss = 4, ///< Loss [] = SoftmaxCrossEntropyLoss(Y, L), all-reduced
  kW = 5,    ///< Param [4] "w", split in halves
  kWn = 6,   ///< Updated [4] = SGDUpdate(W, P) with lr 0.5
};

/// Buffer ids, the same on both devices.
enum TwoDeviceBuffer : int32_t {
  kBufX = 0,
  kBufY = 1,
  kBufYFull = 2, ///< device 0: all of Y, fetched (half local, half remote)
  kBufPPartial = 3,
  kBufP = 4,
  kBufL = 5,
  kBufLossPartial = 6,
  kBufLoss = 7,
  kBufW = 8,
  kBufWn = 9,
  kBufLFull = 10, ///< all labels, fetched (the mean loss counts every row)
};

/// Learning rate of the two-device plan's SGDUpdate.
inline constexpr float kTwoDeviceLr = 0.5f;

/// A complete two-device training step (see the enums): row-split Relu, a
/// Fetch of the whole activation to device 0 (2x4 floats remote = 32 bytes),
/// a Fetch of all labels to every device (the mean loss divides by the
/// number of non-ignored labels of the whole batch; 2 int64 remote), a
/// reduce-scatter of the partial column sums (2 floats per device remote),
/// an all-reduce of the partial loss (1 float per device remote) and a
/// local parameter update. Planned comm: device 0 60 bytes, device 1 28.
plan::Plan makeTwoDevicePlan();

/// The same model on one device (no communication).
plan::Plan makeOneDevicePlan();

/// `plan` with its Relu and BiasGrad instructions replaced by kernels that
/// have no native implementation ("ReluByProgram", "ColumnSumByProgram"),
/// only expression programs: max(X[i, j], 0) and sum_i Y[i, j], the column
/// sum restricted to the device's local rows through reductionRanges.
plan::Plan withProgramsOnly(plan::Plan plan);

} // namespace tofu::test

#endif // TOFU_RUNTIME_TEST_TESTPLANS_H
