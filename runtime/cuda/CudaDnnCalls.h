//===- CudaDnnCalls.h - cuDNN pooling and batch-norm calls, as data -*- C++ -*-===//
//
// The parameters of the cuDNN pooling and batch-normalization calls the CUDA
// schedule (CudaSchedule.h) hands to the executor: plain data, decided on
// the CPU by CudaDnnMapping.cpp and run by CudaPool.cpp / CudaBatchNorm.cpp
// (cuDNN 9 descriptor API). The operand pointers live in CudaOp::dnn,
// indexed by DnnOperand.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDADNNCALLS_H
#define TOFU_RUNTIME_CUDA_CUDADNNCALLS_H

#include <cstdint>
#include <tuple>
#include <vector>

namespace tofu::cuda {

/// Positions of the operands of a Pool or BatchNorm call in CudaOp::dnn.
/// Which are present depends on the call (see PoolCall, BatchNormCall).
enum DnnOperand : int {
  kDnnX = 0,  ///< X [N, C, *S]
  kDnnY,      ///< the output: Y, Xhat or a running statistic
  kDnnDy,     ///< dY
  kDnnDx,     ///< dX
  kDnnScale,  ///< scale [C] (already offset to the call's first channel)
  kDnnBias,   ///< B [C]
  kDnnMean,   ///< input_mean [C]
  kDnnVar,    ///< input_var [C]
  kNumDnnOperands
};

/// One cuDNN pooling call on a device's local, dense NC*S boxes that hold
/// their whole spatial extents. Forward: X -> Y (kDnnX, kDnnY). Backward
/// (average modes only): dY -> dX (kDnnDy, kDnnDx; cuDNN's y and x
/// arguments, which average pooling's gradient does not read, are given dY
/// and dX, and kDnnX is dX too: the plan may give the device none of X).
struct PoolCall {
  enum class Mode : uint8_t {
    Max = 0,               ///< CUDNN_POOLING_MAX_DETERMINISTIC
    AverageIncludePad = 1, ///< CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
    AverageExcludePad = 2, ///< CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
  };
  Mode mode = Mode::Max;
  bool backward = false;
  std::vector<int64_t> x, y; ///< local shapes [N, C, *S], 1 to 3 spatial dims
  /// Per spatial dim: window, symmetric padding, stride.
  std::vector<int64_t> window, pads, strides;

  bool operator<(const PoolCall &o) const {
    return std::tie(mode, backward, x, y, window, pads, strides) <
           std::tie(o.mode, o.backward, o.x, o.y, o.window, o.pads, o.strides);
  }
};

/// One cuDNN batch-normalization call (CUDNN_BATCHNORM_SPATIAL) on a
/// device's local, dense X box [N, C, *S] (ranks 2 to 5) and [C] parameter
/// slices for the box's channels. The semantics are those of the CPU
/// kernels (runtime/lib/KernelsNormalization.cpp, tdl-specs/norm.tdl):
///
///  * TrainingForward: Y = scale * (X - mean) / sqrt(var + epsilon) + B
///    with the batch mean and biased variance of each channel over N and S
///    (X: whole N and S); `unitAffine` (BatchNormalizationNormalized) uses
///    scale 1 and B 0 (the runner's constants). No running statistics, no
///    saved mean / inverse standard deviation.
///  * InferenceForward: the same with input_mean and input_var.
///  * Backward (training mode): dX from dY, X and scale, the batch
///    statistics recomputed (no saved ones); cuDNN's dscale and dB go to
///    the runner's scratch (the plan computes them with ConvBiasGrad).
///  * RunningMean / RunningVar: one running statistic written back,
///    out = momentum * input + (1 - momentum) * batch statistic (biased
///    variance). cuDNN updates running = (1 - f) * running + f * new with
///    the UNBIASED variance count / (count - 1) * var, so the runner copies
///    the input statistic into the output, scales it by `preScale`, and
///    runs cudnnBatchNormalizationForwardTraining with
///    exponentialAverageFactor `factor` (its Y and the other statistic go to
///    scratch): mean: f = 1 - momentum, preScale 1; var: f = (1 - momentum)
///    (count - 1) / count, preScale = momentum / (1 - f). Operands kDnnX,
///    kDnnMean or kDnnVar (the input statistic), kDnnY (the output).
struct BatchNormCall {
  enum class Kind : uint8_t {
    TrainingForward = 0,
    InferenceForward = 1,
    Backward = 2,
    RunningMean = 3,
    RunningVar = 4,
  };
  Kind kind = Kind::TrainingForward;
  std::vector<int64_t> x; ///< local shape [N, C, *S]
  double epsilon = 1e-5;
  bool unitAffine = false;
  double momentum = 0.9; ///< the ONNX momentum (running statistics)
  double factor = 0;     ///< cuDNN's exponentialAverageFactor
  double preScale = 1;   ///< applied to the copied input statistic first
  int64_t count = 0;     ///< N * prod(S) of the channel's batch

  /// Sets `factor` and `preScale` of a RunningMean or RunningVar call from
  /// `momentum` and `count` (>= 2), as described above.
  void setRunningAverage() {
    const double n = static_cast<double>(count);
    const bool mean = kind == Kind::RunningMean;
    factor = mean ? 1 - momentum : (1 - momentum) * (n - 1) / n;
    preScale = mean ? 1 : momentum / (1 - factor);
  }

  bool operator<(const BatchNormCall &o) const {
    return std::tie(kind, x, epsilon, unitAffine, momentum, factor, preScale,
                    count) < std::tie(o.kind, o.x, o.epsilon, o.unitAffine,
                                      o.momentum, o.factor, o.preScale,
                                      o.count);
  }
};

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDADNNCALLS_H
