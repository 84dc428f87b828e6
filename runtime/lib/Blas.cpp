//===- Blas.cpp - Single-precision GEMM on row-major matrices -------------===//

#include "Blas.h"

#include <cblas.h>

void tofu::runtime::sgemm(bool transA, bool transB, int64_t M, int64_t N,
                          int64_t K, float alpha, const float *a, int64_t lda,
                          const float *b, int64_t ldb, float beta, float *c,
                          int64_t ldc) {
  if (M == 0 || N == 0)
    return;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}
