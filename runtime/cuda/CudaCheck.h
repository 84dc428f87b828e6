//===- CudaCheck.h - CUDA runtime errors as messages ------------*- C++ -*-===//
//
// `TOFU_CUDA(call)` returns "call failed: cudaErrorX (what it means)" from
// the enclosing function (which returns std::string) when a CUDA runtime
// call fails, `TOFU_CUDNN(call)` "call failed: <cuDNN's status>" when a cuDNN
// call does. Shared by the executor's and the cuDNN runners' .cpp files.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDACHECK_H
#define TOFU_RUNTIME_CUDA_CUDACHECK_H

#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

namespace tofu::cuda {

/// "`what` failed: NAME (description)".
inline std::string cudaFailure(const char *what, cudaError_t err) {
  return std::string(what) + " failed: " + cudaGetErrorName(err) + " (" +
         cudaGetErrorString(err) + ")";
}

/// "`what` failed: <cuDNN's description of `status`>".
inline std::string cudnnFailure(const char *what, cudnnStatus_t status) {
  return std::string(what) + " failed: " + cudnnGetErrorString(status);
}

} // namespace tofu::cuda

#define TOFU_CUDA(call)                                                        \
  do {                                                                         \
    cudaError_t tofuErr = (call);                                              \
    if (tofuErr != cudaSuccess)                                                \
      return ::tofu::cuda::cudaFailure(#call, tofuErr);                        \
  } while (0)

#define TOFU_CUDNN(call)                                                       \
  do {                                                                         \
    cudnnStatus_t tofuStatus = (call);                                         \
    if (tofuStatus != CUDNN_STATUS_SUCCESS)                                    \
      return ::tofu::cuda::cudnnFailure(#call, tofuStatus);                    \
  } while (0)

#endif // TOFU_RUNTIME_CUDA_CUDACHECK_H
