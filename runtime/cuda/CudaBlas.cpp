//===- CudaBlas.cpp - cuBLAS GEMM for the CUDA backend --------------------===//
#include "CudaBlas.h"

#include <climits>

using namespace tofu::cuda;

const char *tofu::cuda::blasStatusName(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

BlasHandle::~BlasHandle() {
  if (handle)
    cublasDestroy(handle);
}

std::string BlasHandle::init(cudaStream_t stream) {
  if (!handle) {
    cublasStatus_t s = cublasCreate(&handle);
    if (s != CUBLAS_STATUS_SUCCESS) {
      handle = nullptr;
      return std::string("cublasCreate failed: ") + blasStatusName(s);
    }
  }
  cublasStatus_t s = cublasSetStream(handle, stream);
  if (s != CUBLAS_STATUS_SUCCESS)
    return std::string("cublasSetStream failed: ") + blasStatusName(s);
  return "";
}

namespace {

/// Checks the shape fits cuBLAS's 32-bit sizes.
std::string checkShape(const GemmShape &g) {
  for (int64_t v : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc})
    if (v < 0 || v > INT_MAX)
      return "GEMM dimension or stride " + std::to_string(v) +
             " is outside cuBLAS's 32-bit range";
  return "";
}

} // namespace

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
// column-major view of a row-major X is X^T, so pass B first, then A, with
// their own transposition flags, and swap M and N.
std::string tofu::cuda::gemm(const BlasHandle &blas, const GemmShape &g,
                             const float *a, const float *b, float *c) {
  if (std::string err = checkShape(g); !err.empty())
    return err;
  if (g.m == 0 || g.n == 0)
    return "";
  cublasStatus_t s = cublasSgemm(
      blas.get(), g.transB ? CUBLAS_OP_T : CUBLAS_OP_N,
      g.transA ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(g.n),
      static_cast<int>(g.m), static_cast<int>(g.k), &g.alpha, b,
      static_cast<int>(g.ldb), a, static_cast<int>(g.lda), &g.beta, c,
      static_cast<int>(g.ldc));
  if (s != CUBLAS_STATUS_SUCCESS)
    return std::string("cublasSgemm failed: ") + blasStatusName(s);
  return "";
}

std::string tofu::cuda::gemmStridedBatched(
    const BlasHandle &blas, const GemmShape &g, const float *a,
    int64_t strideA, const float *b, int64_t strideB, float *c,
    int64_t strideC, int64_t batch) {
  if (std::string err = checkShape(g); !err.empty())
    return err;
  if (batch < 0 || batch > INT_MAX)
    return "GEMM batch " + std::to_string(batch) +
           " is outside cuBLAS's 32-bit range";
  if (g.m == 0 || g.n == 0 || batch == 0)
    return "";
  cublasStatus_t s = cublasSgemmStridedBatched(
      blas.get(), g.transB ? CUBLAS_OP_T : CUBLAS_OP_N,
      g.transA ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(g.n),
      static_cast<int>(g.m), static_cast<int>(g.k), &g.alpha, b,
      static_cast<int>(g.ldb), strideB, a, static_cast<int>(g.lda), strideA,
      &g.beta, c, static_cast<int>(g.ldc), strideC, static_cast<int>(batch));
  if (s != CUBLAS_STATUS_SUCCESS)
    return std::string("cublasSgemmStridedBatched failed: ") +
           blasStatusName(s);
  return "";
}
