//===- Blas.cpp - GEMM on row-major matrices (float and double) -----------===//
//
// OpenBLAS runs on one thread: the runtime's worker pool (ParallelFor.h)
// splits a large GEMM into blocks of C's rows (or columns), one per thread.
// Then BLAS's threads never spin beside the pool's on the same cores (with
// OpenBLAS's own pthreads, sched_yield took a third of a small
// transformer's step on 2 cores), and a GEMM inside a pool task (one
// virtual device's instruction beside another's) simply runs serially.
// Each element of C still sums over K in BLAS's own order: blocks of rows or
// columns do not change it.
//
//===----------------------------------------------------------------------===//

#include "Blas.h"
#include "ParallelFor.h"

#include <cblas.h>

#include <algorithm>

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

/// Calls `gemm(transA, transB, M, N, K, a, b, c)` once, or once per block
/// of C's rows (or columns, when C is wider than tall) on the worker pool
/// when the product is large enough to pay for waking it. Blocks hold at
/// least 32 rows (columns) so that BLAS's micro-kernels stay efficient.
template <typename T, typename Gemm>
void blockedGemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                 const T *a, int64_t lda, const T *b, int64_t ldb, T *c,
                 int64_t ldc, Gemm gemm) {
  static const bool oneBlasThread = (openblas_set_num_threads(1), true);
  (void)oneBlasThread;
  const bool byRows = M >= N;
  const int64_t extent = byRows ? M : N;
  const int64_t threads = blasGemmThreads(M, N, K);
  if (threads <= 1) {
    gemm(M, N, a, b, c);
    return;
  }
  runOnPool(static_cast<unsigned>(threads), [&](unsigned t) {
    const int64_t lo = extent * t / threads, hi = extent * (t + 1) / threads;
    if (byRows) // rows lo..hi of op(A) and C
      gemm(hi - lo, N, a + (transA ? lo : lo * lda), b, c + lo * ldc);
    else // columns lo..hi of op(B) and C
      gemm(M, hi - lo, a, b + (transB ? lo * ldb : lo), c + lo);
  });
}

} // namespace

int64_t tofu::runtime::blasGemmThreads(int64_t M, int64_t N, int64_t K) {
  if (2.0 * double(M) * double(N) * double(K) < double(1 << 20))
    return 1;
  return std::max<int64_t>(
      1, std::min<int64_t>(parallelThreads(), std::max(M, N) / 32));
}

void tofu::runtime::blasGemm(bool transA, bool transB, int64_t M, int64_t N,
                             int64_t K, float alpha, const float *a,
                             int64_t lda, const float *b, int64_t ldb,
                             float beta, float *c, int64_t ldc) {
  if (degenerate(M, N, K, beta, c, ldc))
    return;
  blockedGemm<float>(
      transA, transB, M, N, K, a, lda, b, ldb, c, ldc,
      [&](int64_t m, int64_t n, const float *pa, const float *pb, float *pc) {
        cblas_sgemm(CblasRowMajor, op(transA), op(transB),
                    static_cast<int>(m), static_cast<int>(n),
                    static_cast<int>(K), alpha, pa, static_cast<int>(lda), pb,
                    static_cast<int>(ldb), beta, pc, static_cast<int>(ldc));
      });
}

void tofu::runtime::blasGemm(bool transA, bool transB, int64_t M, int64_t N,
                             int64_t K, double alpha, const double *a,
                             int64_t lda, const double *b, int64_t ldb,
                             double beta, double *c, int64_t ldc) {
  if (degenerate(M, N, K, beta, c, ldc))
    return;
  blockedGemm<double>(
      transA, transB, M, N, K, a, lda, b, ldb, c, ldc,
      [&](int64_t m, int64_t n, const double *pa, const double *pb,
          double *pc) {
        cblas_dgemm(CblasRowMajor, op(transA), op(transB),
                    static_cast<int>(m), static_cast<int>(n),
                    static_cast<int>(K), alpha, pa, static_cast<int>(lda), pb,
                    static_cast<int>(ldb), beta, pc, static_cast<int>(ldc));
      });
}
