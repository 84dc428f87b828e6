//===- CudaCheck.h - CUDA runtime errors as messages ------------*- C++ -*-===//
//
// `TOFU_CUDA(call)` returns "call failed: cudaErrorX (what it means)" from
// the enclosing function (which returns std::string) when a CUDA runtime
// call fails. Shared by the executor's .cpp files.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDACHECK_H
#define TOFU_RUNTIME_CUDA_CUDACHECK_H

#include <cuda_runtime.h>

#include <string>

namespace tofu::cuda {

/// "`what` failed: NAME (description)".
inline std::string cudaFailure(const char *what, cudaError_t err) {
  return std::string(what) + " failed: " + cudaGetErrorName(err) + " (" +
         cudaGetErrorString(err) + ")";
}

} // namespace tofu::cuda

#define TOFU_CUDA(call)                                                        \
  do {                                                                         \
    cudaError_t tofuErr = (call);                                              \
    if (tofuErr != cudaSuccess)                                                \
      return ::tofu::cuda::cudaFailure(#call, tofuErr);                        \
  } while (0)

#endif // TOFU_RUNTIME_CUDA_CUDACHECK_H
