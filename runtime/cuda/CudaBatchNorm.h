//===- CudaBatchNorm.h - cuDNN batch normalization for the CUDA backend -*- C++ -*-===//
//
// Float32 batch normalization (CUDNN_BATCHNORM_SPATIAL, cuDNN 9 descriptor
// API) with the semantics of the CPU kernels BatchNormalization (Y and each
// running statistic), BatchNormalizationNormalized and BatchNormalizationGrad
// (runtime/lib/KernelsNormalization.cpp, tdl-specs/norm.tdl) for the calls
// CudaDnnMapping.cpp accepts; BatchNormCall (CudaDnnCalls.h) says how each
// call is made, including how the ONNX momentum and the biased running
// variance are expressed with cuDNN's exponential-average factor and
// unbiased variance. Descriptors are built once per X shape and cached.
// The runner owns device memory beyond the plan: ones and zeros [C] (the
// unit scale and bias of Xhat and the running statistics), a [3C] scratch
// (the other running statistic, cuDNN's dscale and dB) and, for the running
// statistics, a scratch for cuDNN's Y (X's size), all grown on first use
// (the executor's eager first step) and kept. Called by the CUDA executor;
// tested against the CPU kernels where a GPU exists (tofu-cuda-library-tests,
// label gpu; run on an H200, bench/gpu/H200.md).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDABATCHNORM_H
#define TOFU_RUNTIME_CUDA_CUDABATCHNORM_H

#include "CudaDnnCalls.h"

#include <cudnn.h>

#include <array>
#include <map>
#include <memory>
#include <string>

namespace tofu::cuda {

/// A cuDNN handle, the per-shape descriptor cache and the runner's scratch.
class BatchNormRunner {
public:
  BatchNormRunner();
  ~BatchNormRunner();
  BatchNormRunner(const BatchNormRunner &) = delete;
  BatchNormRunner &operator=(const BatchNormRunner &) = delete;

  /// Creates the handle on the current device and sets `stream`.
  std::string init(cudaStream_t stream = nullptr);

  /// Runs `call` on its operands (device pointers indexed by DnnOperand;
  /// null where the call has none).
  std::string run(const BatchNormCall &call,
                  const std::array<float *, kNumDnnOperands> &operands);

  /// How many descriptor sets were built (cache misses).
  int64_t descriptorBuilds() const { return builds; }

  struct Descriptors;

private:
  std::string descriptorsFor(const std::vector<int64_t> &x, Descriptors *&d);
  std::string reserve(int64_t channels, int64_t xElements);

  cudnnHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  std::map<std::vector<int64_t>, std::unique_ptr<Descriptors>> cache;
  int64_t builds = 0;
  /// ones [capacity], zeros [capacity]; scratch [3 * capacity].
  float *constants = nullptr, *scratch = nullptr;
  int64_t capacity = 0;
  float *yScratch = nullptr;
  int64_t yScratchElements = 0;
};

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDABATCHNORM_H
