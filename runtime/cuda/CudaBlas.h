//===- CudaBlas.h - cuBLAS GEMM for the CUDA backend --------------*- C++ -*-===//
//
// Row-major GEMM and strided batched GEMM on device pointers of float32
// (cublasSgemm), float64 (cublasDgemm) or float16 / bfloat16 (cublasGemmEx
// with float32 compute, no TF32), with the semantics of the CPU kernels
// (runtime/lib/KernelsMatMul.cpp):
//   C[M, N] = alpha * op(A) * op(B) + beta * C
// cuBLAS is column-major; a row-major product is computed as the
// column-major C^T = op(B)^T op(A)^T, with no copies. Called by the CUDA
// executor (CudaExecutor.cpp) for MatMul and Gemm; tested against the CPU
// kernels where a GPU exists (tofu-cuda-library-tests, label gpu; run on an
// H200, bench/gpu/H200.md).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDABLAS_H
#define TOFU_RUNTIME_CUDA_CUDABLAS_H

#include <cublas_v2.h>

#include <cstdint>
#include <string>

namespace tofu::cuda {

/// A cuBLAS handle bound to the current device, destroyed with the object.
class BlasHandle {
public:
  BlasHandle() = default;
  ~BlasHandle();
  BlasHandle(const BlasHandle &) = delete;
  BlasHandle &operator=(const BlasHandle &) = delete;
  /// Creates the handle and sets `stream`; empty string or the error.
  std::string init(cudaStream_t stream = nullptr);
  cublasHandle_t get() const { return handle; }

private:
  cublasHandle_t handle = nullptr;
};

/// One row-major GEMM: A is [M, K] ([K, M] when transA), B is [K, N] ([N, K]
/// when transB), C is [M, N]; lda/ldb/ldc are the row strides (elements).
struct GemmShape {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  /// Scalars, rounded to the compute type (float except for float64).
  double alpha = 1, beta = 0;
};

/// C = alpha * op(A) op(B) + beta * C, with A, B and C arrays of `type`
/// (CUDA_R_32F, CUDA_R_64F, CUDA_R_16F or CUDA_R_16BF). Returns "" or the
/// cuBLAS error.
std::string gemm(const BlasHandle &blas, const GemmShape &shape,
                 cudaDataType type, const void *a, const void *b, void *c);
/// The float32 case of the above.
std::string gemm(const BlasHandle &blas, const GemmShape &shape,
                 const float *a, const float *b, float *c);

/// `batch` GEMMs of one shape; matrix i of A starts at a + i * strideA
/// (likewise B, C). A stride of 0 broadcasts one matrix to every batch.
std::string gemmStridedBatched(const BlasHandle &blas, const GemmShape &shape,
                               cudaDataType type, const void *a,
                               int64_t strideA, const void *b, int64_t strideB,
                               void *c, int64_t strideC, int64_t batch);
/// The float32 case of the above.
std::string gemmStridedBatched(const BlasHandle &blas, const GemmShape &shape,
                               const float *a, int64_t strideA,
                               const float *b, int64_t strideB, float *c,
                               int64_t strideC, int64_t batch);

/// cuBLAS's name of a status, for messages.
const char *blasStatusName(cublasStatus_t status);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDABLAS_H
