//===- CudaPool.h - cuDNN pooling for the CUDA backend ------------*- C++ -*-===//
//
// Float32 NCHW (and NCW / NCDHW) max and average pooling through cuDNN's
// descriptor API (cudnnPoolingForward / cudnnPoolingBackward) with the
// semantics of the CPU kernels MaxPool (Y), AveragePool, AveragePoolGrad
// (runtime/lib/KernelsPool.cpp, tdl-specs/pool.tdl) and of GlobalAveragePool
// and its gradient, for the calls CudaDnnMapping.cpp accepts (whole spatial
// extents, symmetric pads smaller than the window, no dilation, floor
// output extents). Descriptors are built once per call shape and cached.
// Called by the CUDA executor; tested against the CPU kernels where a GPU
// exists (tofu-cuda-library-tests, label gpu; run on an H200,
// bench/gpu/H200.md).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDAPOOL_H
#define TOFU_RUNTIME_CUDA_CUDAPOOL_H

#include "CudaDnnCalls.h"

#include <cudnn.h>

#include <map>
#include <memory>
#include <string>

namespace tofu::cuda {

/// A cuDNN handle plus the per-shape descriptor cache.
class PoolRunner {
public:
  PoolRunner();
  ~PoolRunner();
  PoolRunner(const PoolRunner &) = delete;
  PoolRunner &operator=(const PoolRunner &) = delete;

  /// Creates the handle on the current device and sets `stream`.
  std::string init(cudaStream_t stream = nullptr);

  /// Y = pool(X) (`call.backward` false).
  std::string forward(const PoolCall &call, const float *x, float *y);
  /// dX from dY (average modes; `call.backward` true). `x` is passed as
  /// cuDNN's x argument (the schedule passes dX) and dY as its y argument:
  /// average pooling's backward pass reads neither.
  std::string backward(const PoolCall &call, const float *dy, const float *x,
                       float *dx);

  /// How many descriptor sets were built (cache misses).
  int64_t descriptorBuilds() const { return builds; }

  struct Descriptors;

private:
  std::string descriptorsFor(const PoolCall &call, Descriptors *&d);

  cudnnHandle_t handle = nullptr;
  std::map<PoolCall, std::unique_ptr<Descriptors>> cache;
  int64_t builds = 0;
};

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDAPOOL_H
