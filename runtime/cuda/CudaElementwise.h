//===- CudaElementwise.h - Element-wise CUDA kernels -------------*- C++ -*-===//
//
// Device-pointer entry points with the semantics of the CPU kernels of the
// same names (runtime/lib/KernelsElementwise.cpp), on n contiguous float32
// elements (same-shaped operands; broadcasting Add is the CPU backend's for
// now). Each launches on `stream` and returns an empty string or the CUDA
// error.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDAELEMENTWISE_H
#define TOFU_RUNTIME_CUDA_CUDAELEMENTWISE_H

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace tofu::cuda {

/// y = max(x, 0)
std::string relu(const float *x, float *y, int64_t n, cudaStream_t stream = 0);
/// dx = x > 0 ? dy : 0
std::string reluGrad(const float *dy, const float *x, float *dx, int64_t n,
                     cudaStream_t stream = 0);
/// wNew = w - lr * g
std::string sgdUpdate(const float *w, const float *g, float lr, float *wNew,
                      int64_t n, cudaStream_t stream = 0);
/// c = a + b
std::string add(const float *a, const float *b, float *c, int64_t n,
                cudaStream_t stream = 0);
/// y = alpha * x
std::string scale(const float *x, float alpha, float *y, int64_t n,
                  cudaStream_t stream = 0);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDAELEMENTWISE_H
