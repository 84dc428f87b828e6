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
// A product that overwrites C (beta = 0) zeroes C's block itself and lets
// BLAS accumulate into it (beta = 1): OpenBLAS's own beta = 0 pass over C is
// slower than a memset, most where K is small and C's pass is a large part
// of the GEMM (a weight gradient over a batch of 32, 256 x 1024 x 32: 296 ->
// 200 us; 64 x 64 x 64: 8.6 -> 7.4 us; bench/simulate.md, session 38).
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

/// The fewest rows (columns) of C a thread's block holds, so that BLAS's
/// micro-kernels stay efficient.
constexpr int64_t kMinBlock = 32;
/// A reduction this short leaves C's pass a large part of the GEMM.
constexpr int64_t kShortK = 128;

/// Zeroes the [rows, columns] block of C at `c` (leading dimension ldc).
template <typename T>
void zeroBlock(int64_t rows, int64_t columns, T *c, int64_t ldc) {
  if (columns == ldc) {
    std::fill_n(c, rows * columns, T(0));
    return;
  }
  for (int64_t i = 0; i < rows; ++i)
    std::fill_n(c + i * ldc, columns, T(0));
}

/// Calls `gemm(M, N, a, b, beta, c)` once, or once per block of C's rows
/// (or columns) on the worker pool when the product is large enough to pay
/// for waking it. Blocks hold at least kMinBlock rows (columns).
template <typename T, typename Gemm>
void blockedGemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                 const T *a, int64_t lda, const T *b, int64_t ldb, T beta,
                 T *c, int64_t ldc, Gemm gemm) {
  static const bool oneBlasThread = (openblas_set_num_threads(1), true);
  (void)oneBlasThread;
  // beta = 0: C's block zeroed here (by the thread that computes it), then
  // accumulated into.
  const bool overwrite = beta == T(0);
  auto block = [&](int64_t m, int64_t n, const T *pa, const T *pb, T *pc) {
    if (overwrite)
      zeroBlock(m, n, pc, ldc);
    gemm(m, n, pa, pb, overwrite ? T(1) : beta, pc);
  };
  const int64_t threads = blasGemmThreads(M, N, K);
  // Blocks of C's rows where there are enough rows, else of its columns.
  // A wide C with a short K is split by rows too when each thread still
  // gets 32 of them: its pass over C (zeroed, then read and written once
  // per K) is much of the GEMM, and a column block is a strided part of
  // every row (256 x 1024 x 32: 207 us by columns, 131 by rows; with K of
  // 256 and more, either within 5%).
  const bool byRows = M >= N || (K < kShortK && M >= kMinBlock * threads);
  const int64_t extent = byRows ? M : N;
  if (threads <= 1) {
    block(M, N, a, b, c);
    return;
  }
  runOnPool(static_cast<unsigned>(threads), [&](unsigned t) {
    const int64_t lo = extent * t / threads, hi = extent * (t + 1) / threads;
    if (byRows) // rows lo..hi of op(A) and C
      block(hi - lo, N, a + (transA ? lo : lo * lda), b, c + lo * ldc);
    else // columns lo..hi of op(B) and C
      block(M, hi - lo, a, b + (transB ? lo * ldb : lo), c + lo);
  });
}

} // namespace

int64_t tofu::runtime::blasGemmThreads(int64_t M, int64_t N, int64_t K) {
  if (2.0 * double(M) * double(N) * double(K) < double(1 << 20))
    return 1;
  return std::max<int64_t>(
      1, std::min<int64_t>(parallelThreads(), std::max(M, N) / kMinBlock));
}

void tofu::runtime::blasGemm(bool transA, bool transB, int64_t M, int64_t N,
                             int64_t K, float alpha, const float *a,
                             int64_t lda, const float *b, int64_t ldb,
                             float beta, float *c, int64_t ldc) {
  if (degenerate(M, N, K, beta, c, ldc))
    return;
  blockedGemm<float>(
      transA, transB, M, N, K, a, lda, b, ldb, beta, c, ldc,
      [&](int64_t m, int64_t n, const float *pa, const float *pb,
          float blockBeta, float *pc) {
        cblas_sgemm(CblasRowMajor, op(transA), op(transB),
                    static_cast<int>(m), static_cast<int>(n),
                    static_cast<int>(K), alpha, pa, static_cast<int>(lda), pb,
                    static_cast<int>(ldb), blockBeta, pc,
                    static_cast<int>(ldc));
      });
}

void tofu::runtime::blasGemm(bool transA, bool transB, int64_t M, int64_t N,
                             int64_t K, double alpha, const double *a,
                             int64_t lda, const double *b, int64_t ldb,
                             double beta, double *c, int64_t ldc) {
  if (degenerate(M, N, K, beta, c, ldc))
    return;
  blockedGemm<double>(
      transA, transB, M, N, K, a, lda, b, ldb, beta, c, ldc,
      [&](int64_t m, int64_t n, const double *pa, const double *pb,
          double blockBeta, double *pc) {
        cblas_dgemm(CblasRowMajor, op(transA), op(transB),
                    static_cast<int>(m), static_cast<int>(n),
                    static_cast<int>(K), alpha, pa, static_cast<int>(lda), pb,
                    static_cast<int>(ldb), blockBeta, pc,
                    static_cast<int>(ldc));
      });
}
