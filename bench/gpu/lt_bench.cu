// bench/gpu/lt_bench.cu: float32 GEMMs through cublasSgemm and through each
// of cuBLASLt's heuristic candidates, as runtime/cuda/CudaBlas.cpp lays them
// out (row-major C[m, n] = op(A) op(B) as column-major C^T = op(B)^T op(A)^T;
// cuBLASLt's A is our B), for choosing how tofu-run calls small GEMMs
// (bench/gpu/H200-run18.md, run 20). Not part of run.sh.
//
//   nvcc -O2 -std=c++17 -o lt_bench bench/gpu/lt_bench.cu -lcublasLt -lcublas
//   lt_bench SHAPES.txt > TIMES.jsonl
//
// SHAPES.txt: gemm_bench's format (id dtype tA tB m n k lda ldb ldc ...);
// float32 lines with batch 1 and beta 0 only. Per shape, one JSON line:
// sgemm_us and, per candidate in cuBLASLt's heuristic order, lt_us (average
// of back-to-back calls, ~20 ms each, after 3 warm-up calls).

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace {

bool ok(cudaError_t e) { return e == cudaSuccess; }
bool ok(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }

/// Average microseconds of back-to-back calls of `fn` (false: a call failed).
bool timeCalls(cudaStream_t st, const std::function<bool()> &fn, double &us) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < 3; ++i)
    if (!fn())
      return false;
  int calls = 10;
  for (int round = 0; round < 2; ++round) {
    cudaEventRecord(e0, st);
    for (int i = 0; i < calls; ++i)
      if (!fn())
        return false;
    float ms = 0;
    cudaEventRecord(e1, st);
    if (!ok(cudaEventSynchronize(e1)) || !ok(cudaEventElapsedTime(&ms, e0, e1)))
      return false;
    us = 1e3 * ms / calls;
    if (round == 0)
      calls = int(std::min(2000.0, std::max(10.0, 20e3 / std::max(us, 1.0))));
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return true;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: lt_bench SHAPES.txt\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  cublasHandle_t h;
  cublasLtHandle_t lt;
  cudaStream_t st;
  if (!ok(cublasCreate(&h)) || !ok(cublasLtCreate(&lt)) ||
      !ok(cudaStreamCreate(&st)) || !ok(cublasSetStream(h, st)))
    return 1;
  const size_t space = 32 << 20; // LtHandle::kWorkspaceBytes
  void *workspace = nullptr;
  cudaMalloc(&workspace, space);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    std::istringstream f(line);
    std::string id, dtype;
    long long tA, tB, m, n, k, lda, ldb, ldc, batch, sA, sB, sC;
    double beta;
    f >> id >> dtype >> tA >> tB >> m >> n >> k >> lda >> ldb >> ldc >> batch >>
        sA >> sB >> sC >> beta;
    if (dtype != "float32" || batch != 1 || beta != 0)
      continue;
    float *a, *b, *c;
    cudaMalloc(&a, sizeof(float) * (tA ? k : m) * lda);
    cudaMalloc(&b, sizeof(float) * (tB ? n : k) * ldb);
    cudaMalloc(&c, sizeof(float) * m * ldc);
    cudaMemset(a, 0, sizeof(float) * (tA ? k : m) * lda);
    cudaMemset(b, 0, sizeof(float) * (tB ? n : k) * ldb);
    const float alpha = 1, zero = 0;
    const cublasOperation_t opB = tB ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t opA = tA ? CUBLAS_OP_T : CUBLAS_OP_N;
    double sgemm = -1;
    timeCalls(st, [&] {
      return ok(cublasSgemm(h, opB, opA, int(n), int(m), int(k), &alpha, b,
                            int(ldb), a, int(lda), &zero, c, int(ldc)));
    }, sgemm);
    // cuBLASLt, as LtGemm::prepare: its m = our n, its n = our m.
    const uint64_t M = n, N = m, K = k;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opB, sizeof opB);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opA, sizeof opA);
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, tB ? K : M, tB ? M : K, ldb);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, tA ? N : K, tA ? K : N, lda);
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, M, N, ldc);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    uint64_t bytes = space;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                         &bytes, sizeof bytes);
    cublasLtMatmulHeuristicResult_t results[8];
    int found = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 8, results, &found);
    std::ostringstream o;
    o << "{\"id\": \"" << id << "\", \"m\": " << m << ", \"n\": " << n
      << ", \"k\": " << k << ", \"sgemm_us\": " << sgemm << ", \"lt_us\": [";
    for (int i = 0; i < found; ++i) {
      double us = -1;
      timeCalls(st, [&] {
        return ok(cublasLtMatmul(lt, desc, &alpha, b, la, a, lb, &zero, c, lc, c,
                                 lc, &results[i].algo, workspace, space, st));
      }, us);
      o << (i ? ", " : "") << us;
    }
    o << "]}";
    std::printf("%s\n", o.str().c_str());
    std::fflush(stdout);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
  }
  return 0;
}
