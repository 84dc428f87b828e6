//===- Blas.cpp - GEMM on row-major matrices (float and double) -----------===//

#include "Blas.h"

#include <cblas.h>

using namespace tofu::runtime;

namespace {

/// Shared by both precisions: the degenerate shapes BLAS does not accept.
/// True when C is done.
template <typename T>
bool degenerate(int64_t M, int64_t N, int64_t K, T beta, T *c, int64_t ldc) {
  if (M == 0 || N == 0)
    return true;
  if (K != 0)
    return false;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
  return true;
}

CBLAS_TRANSPOSE op(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

} // namespace

void tofu::runtime::blasGemm(bool transA, bool transB, int64_t M, int64_t N,
                             int64_t K, float alpha, const float *a,
                             int64_t lda, const float *b, int64_t ldb,
                             float beta, float *c, int64_t ldc) {
  if (degenerate(M, N, K, beta, c, ldc))
    return;
  cblas_sgemm(CblasRowMajor, op(transA), op(transB), static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}

void tofu::runtime::blasGemm(bool transA, bool transB, int64_t M, int64_t N,
                             int64_t K, double alpha, const double *a,
                             int64_t lda, const double *b, int64_t ldb,
                             double beta, double *c, int64_t ldc) {
  if (degenerate(M, N, K, beta, c, ldc))
    return;
  cblas_dgemm(CblasRowMajor, op(transA), op(transB), static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}
