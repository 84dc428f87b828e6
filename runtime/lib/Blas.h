//===- Blas.h - Single-precision GEMM on row-major matrices -----*- C++ -*-===//
//
// The one BLAS entry point the CPU kernels use (OpenBLAS cblas_sgemm), with
// explicit leading dimensions for every operand so that kernels can multiply
// sub-blocks of local buffers in place.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_LIB_BLAS_H
#define TOFU_RUNTIME_LIB_BLAS_H

#include <cstdint>

namespace tofu::runtime {

/// C = alpha * op(A) * op(B) + beta * C, all row-major; C is [M, N] with
/// leading dimension ldc. K == 0 scales C by beta (0 gives zeros, never
/// reading C); M == 0 or N == 0 does nothing.
void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
           float alpha, const float *a, int64_t lda, const float *b,
           int64_t ldb, float beta, float *c, int64_t ldc);

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_LIB_BLAS_H
