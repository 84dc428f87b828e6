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

namespace {

const char *typeName(cudaDataType type) {
  switch (type) {
  case CUDA_R_32F: return "float32";
  case CUDA_R_64F: return "float64";
  case CUDA_R_16F: return "float16";
  case CUDA_R_16BF: return "bfloat16";
  default: return "this element type";
  }
}

/// One GEMM (batch 1, strides unused) or a strided batched GEMM, dispatched
/// on the element type.
std::string run(const BlasHandle &blas, const GemmShape &g, cudaDataType type,
                const void *a, int64_t strideA, const void *b, int64_t strideB,
                void *c, int64_t strideC, int64_t batch, bool batched) {
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
  // column-major view of a row-major X is X^T, so pass B first, then A, with
  // their own transposition flags, and swap M and N.
  const cublasOperation_t opB = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opA = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int m = static_cast<int>(g.n), n = static_cast<int>(g.m),
            k = static_cast<int>(g.k), ldb = static_cast<int>(g.ldb),
            lda = static_cast<int>(g.lda), ldc = static_cast<int>(g.ldc),
            count = static_cast<int>(batch);
  const float alphaF = static_cast<float>(g.alpha),
              betaF = static_cast<float>(g.beta);
  cublasStatus_t s;
  const char *call;
  switch (type) {
  case CUDA_R_32F:
    call = batched ? "cublasSgemmStridedBatched" : "cublasSgemm";
    s = batched ? cublasSgemmStridedBatched(
                      blas.get(), opB, opA, m, n, k, &alphaF,
                      static_cast<const float *>(b), ldb, strideB,
                      static_cast<const float *>(a), lda, strideA, &betaF,
                      static_cast<float *>(c), ldc, strideC, count)
                : cublasSgemm(blas.get(), opB, opA, m, n, k, &alphaF,
                              static_cast<const float *>(b), ldb,
                              static_cast<const float *>(a), lda, &betaF,
                              static_cast<float *>(c), ldc);
    break;
  case CUDA_R_64F:
    call = batched ? "cublasDgemmStridedBatched" : "cublasDgemm";
    s = batched ? cublasDgemmStridedBatched(
                      blas.get(), opB, opA, m, n, k, &g.alpha,
                      static_cast<const double *>(b), ldb, strideB,
                      static_cast<const double *>(a), lda, strideA, &g.beta,
                      static_cast<double *>(c), ldc, strideC, count)
                : cublasDgemm(blas.get(), opB, opA, m, n, k, &g.alpha,
                              static_cast<const double *>(b), ldb,
                              static_cast<const double *>(a), lda, &g.beta,
                              static_cast<double *>(c), ldc);
    break;
  case CUDA_R_16F:
  case CUDA_R_16BF:
    // float32 accumulation (CUBLAS_COMPUTE_32F, not _FAST_TF32); C is
    // rounded to the storage type once, at the end.
    call = batched ? "cublasGemmStridedBatchedEx" : "cublasGemmEx";
    s = batched ? cublasGemmStridedBatchedEx(
                      blas.get(), opB, opA, m, n, k, &alphaF, b, type, ldb,
                      strideB, a, type, lda, strideA, &betaF, c, type, ldc,
                      strideC, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
                : cublasGemmEx(blas.get(), opB, opA, m, n, k, &alphaF, b, type,
                               ldb, a, type, lda, &betaF, c, type, ldc,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    break;
  default:
    return std::string("cuBLAS GEMM is mapped for float32, float64, float16 "
                       "and bfloat16, not ") +
           typeName(type);
  }
  if (s != CUBLAS_STATUS_SUCCESS)
    return std::string(call) + " (" + typeName(type) +
           ") failed: " + blasStatusName(s);
  return "";
}

} // namespace

std::string tofu::cuda::gemm(const BlasHandle &blas, const GemmShape &g,
                             cudaDataType type, const void *a, const void *b,
                             void *c) {
  if (std::string err = checkShape(g); !err.empty())
    return err;
  if (g.m == 0 || g.n == 0)
    return "";
  return run(blas, g, type, a, 0, b, 0, c, 0, 1, false);
}

std::string tofu::cuda::gemm(const BlasHandle &blas, const GemmShape &g,
                             const float *a, const float *b, float *c) {
  return gemm(blas, g, CUDA_R_32F, a, b, c);
}

std::string tofu::cuda::gemmStridedBatched(
    const BlasHandle &blas, const GemmShape &g, cudaDataType type,
    const void *a, int64_t strideA, const void *b, int64_t strideB, void *c,
    int64_t strideC, int64_t batch) {
  if (std::string err = checkShape(g); !err.empty())
    return err;
  if (batch < 0 || batch > INT_MAX)
    return "GEMM batch " + std::to_string(batch) +
           " is outside cuBLAS's 32-bit range";
  if (g.m == 0 || g.n == 0 || batch == 0)
    return "";
  return run(blas, g, type, a, strideA, b, strideB, c, strideC, batch, true);
}

std::string tofu::cuda::gemmStridedBatched(
    const BlasHandle &blas, const GemmShape &g, const float *a,
    int64_t strideA, const float *b, int64_t strideB, float *c,
    int64_t strideC, int64_t batch) {
  return gemmStridedBatched(blas, g, CUDA_R_32F, a, strideA, b, strideB, c,
                            strideC, batch);
}
