//===- CudaTransferKernels.h - Runtime kernels of the CUDA executor -*- C++ -*-===//
//
// The few kernels the executor needs besides the generated ones: strided box
// copy and add (Fetch/Reduce pieces that are not one contiguous run; the
// source may be on a peer GPU, read through unified addressing) and the
// broadcast of Gemm's C into Y. Launched on the current device.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDATRANSFERKERNELS_H
#define TOFU_RUNTIME_CUDA_CUDATRANSFERKERNELS_H

#include "CudaSchedule.h"

#include <cuda_runtime_api.h>

#include <string>

namespace tofu::cuda {

/// dst box (= or +=) src box, per CudaOp::box; `dtype` any plan element
/// type, added as the CPU backend's Reduce adds it (a bool sum saturates at
/// 1, narrow integers wrap, f16/bf16 round the exact sum to nearest even).
std::string launchBoxMove(const BoxMove &box, const void *src, void *dst,
                          plan::DType dtype, bool add, cudaStream_t stream);

/// y[i * n + j] = beta * c[i * rowStride + j * colStride] for i < m, j < n;
/// c and y arrays of `dtype` (f32, f64, f16 or bf16; computed in float, or
/// double for f64).
std::string launchGemmBias(const void *c, int64_t rowStride,
                           int64_t colStride, double beta, void *y, int64_t m,
                           int64_t n, plan::DType dtype, cudaStream_t stream);

/// y = max(y, 0) over n float32 elements: the ReLU of a Gemm whose cuBLASLt
/// epilogue could not be prepared (CudaBlas.h LtGemm).
std::string launchReluInPlace(float *y, int64_t n, cudaStream_t stream);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDATRANSFERKERNELS_H
