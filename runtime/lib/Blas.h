//===- Blas.h - GEMM on row-major matrices (float and double) ---*- C++ -*-===//
//
// The BLAS entry points the CPU kernels use (OpenBLAS cblas_sgemm and
// cblas_dgemm behind one overloaded name, so that kernels templated over
// their element type call `blasGemm` for either), with explicit leading
// dimensions for every operand so that kernels can multiply sub-blocks of
// local buffers in place.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_LIB_BLAS_H
#define TOFU_RUNTIME_LIB_BLAS_H

#include <cstdint>

namespace tofu::runtime {

/// C = alpha * op(A) * op(B) + beta * C, all row-major; C is [M, N] with
/// leading dimension ldc. K == 0 scales C by beta (0 gives zeros, never
/// reading C); M == 0 or N == 0 does nothing. Single precision (sgemm).
void blasGemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
              float alpha, const float *a, int64_t lda, const float *b,
              int64_t ldb, float beta, float *c, int64_t ldc);
/// The same in double precision (dgemm).
void blasGemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
              double alpha, const double *a, int64_t lda, const double *b,
              int64_t ldb, double beta, double *c, int64_t ldc);
/// The threads blasGemm splits an [M, N] x K product over: 1 (the calling
/// thread alone) under 2^20 FLOPs or with fewer than 64 rows and columns,
/// else one block of at least 32 rows (columns) of C per pool thread.
int64_t blasGemmThreads(int64_t M, int64_t N, int64_t K);

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_LIB_BLAS_H
