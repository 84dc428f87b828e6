// bench/gpu/gemm_bench.cu: times cuBLAS GEMMs alone, exactly as the CUDA
// backend calls them (runtime/cuda/CudaBlas.cpp), for bench/gpu/run.sh.
//
//   gemm_bench SHAPES.txt > TIMES.jsonl
//
// SHAPES.txt, one GEMM a line (written by bench/gpu/gemms.py from
// `tofu-run --dump-cuda-schedule`): id dtype tA tB m n k lda ldb ldc batch
// sA sB sC beta -- a row-major C[m, n] = op(A) op(B) (+ beta C), strided
// batched when batch > 1 (stride 0 broadcasts one matrix). For each it
// prints one JSON line:
//
//   throughput_us  back-to-back calls on one stream, elapsed / calls (what
//                  cuBLAS alone sustains; the issue's "cuBLAS throughput");
//   event_us       median of single calls bracketed by events after the
//                  stream drained (as `tofu-run --trace` brackets each
//                  instruction; includes the call's launch latency);
//   folded_us      when batch > 1, B is broadcast (sB = 0) and the A and C
//                  matrices are back to back: the same product as one GEMM
//                  of m * batch rows, back to back (what a folded call
//                  would cost);
//   flops          2 m n k batch.
//
// The handle is created like the backend's (default math mode: no TF32 for
// float32; float16/bfloat16 accumulate in float32). Built by prepare.sh with
// nvcc (cudart linked statically; libcublas.so.13 found on the GPU machine).

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Shape {
  std::string id, dtype;
  int tA = 0, tB = 0;
  long long m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0, batch = 1;
  long long sA = 0, sB = 0, sC = 0;
  double beta = 0;
};

std::string g_error;

bool ok(cudaError_t e, const char *what) {
  if (e == cudaSuccess)
    return true;
  g_error = std::string(what) + ": " + cudaGetErrorString(e);
  return false;
}

bool ok(cublasStatus_t s, const char *what) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return true;
  g_error = std::string(what) + ": cuBLAS status " + std::to_string(int(s));
  return false;
}

size_t elementSize(const std::string &dtype) {
  if (dtype == "float32") return 4;
  if (dtype == "float64") return 8;
  if (dtype == "float16" || dtype == "bfloat16") return 2;
  return 0;
}

/// One call, row-major as CudaBlas.cpp: column-major C^T = op(B)^T op(A)^T.
bool call(cublasHandle_t h, const Shape &g, const void *a, const void *b,
          void *c) {
  const cublasOperation_t opB = g.tB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opA = g.tA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int m = int(g.n), n = int(g.m), k = int(g.k), ldb = int(g.ldb),
            lda = int(g.lda), ldc = int(g.ldc), count = int(g.batch);
  const bool batched = g.batch > 1;
  const float alphaF = 1, betaF = float(g.beta);
  const double alphaD = 1, betaD = g.beta;
  cublasStatus_t s;
  if (g.dtype == "float32") {
    s = batched ? cublasSgemmStridedBatched(
                      h, opB, opA, m, n, k, &alphaF, (const float *)b, ldb,
                      g.sB, (const float *)a, lda, g.sA, &betaF, (float *)c,
                      ldc, g.sC, count)
                : cublasSgemm(h, opB, opA, m, n, k, &alphaF, (const float *)b,
                              ldb, (const float *)a, lda, &betaF, (float *)c,
                              ldc);
  } else if (g.dtype == "float64") {
    s = batched ? cublasDgemmStridedBatched(
                      h, opB, opA, m, n, k, &alphaD, (const double *)b, ldb,
                      g.sB, (const double *)a, lda, g.sA, &betaD,
                      (double *)c, ldc, g.sC, count)
                : cublasDgemm(h, opB, opA, m, n, k, &alphaD,
                              (const double *)b, ldb, (const double *)a, lda,
                              &betaD, (double *)c, ldc);
  } else {
    const cudaDataType t = g.dtype == "float16" ? CUDA_R_16F : CUDA_R_16BF;
    s = batched ? cublasGemmStridedBatchedEx(
                      h, opB, opA, m, n, k, &alphaF, b, t, ldb, g.sB, a, t,
                      lda, g.sA, &betaF, c, t, ldc, g.sC, count,
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
                : cublasGemmEx(h, opB, opA, m, n, k, &alphaF, b, t, ldb, a, t,
                               lda, &betaF, c, t, ldc, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT);
  }
  return ok(s, "gemm");
}

/// Elements a strided operand spans: `rows` rows of stride `ld`, `batch`
/// matrices `stride` apart.
long long span(long long rows, long long ld, long long batch,
               long long stride) {
  return (batch - 1) * stride + rows * ld;
}

/// Average microseconds of back-to-back calls (at least ~20 ms in all).
bool throughput(cublasHandle_t h, cudaStream_t st, const Shape &g,
                const void *a, const void *b, void *c, double &us) {
  cudaEvent_t e0, e1;
  if (!ok(cudaEventCreate(&e0), "event") || !ok(cudaEventCreate(&e1), "event"))
    return false;
  for (int i = 0; i < 3; ++i)
    if (!call(h, g, a, b, c))
      return false;
  int calls = 10;
  for (int round = 0; round < 2; ++round) {
    if (!ok(cudaEventRecord(e0, st), "record"))
      return false;
    for (int i = 0; i < calls; ++i)
      if (!call(h, g, a, b, c))
        return false;
    float ms = 0;
    if (!ok(cudaEventRecord(e1, st), "record") ||
        !ok(cudaEventSynchronize(e1), "sync") ||
        !ok(cudaEventElapsedTime(&ms, e0, e1), "elapsed"))
      return false;
    us = 1e3 * ms / calls;
    if (round == 0) // size the measured round to ~20 ms
      calls = int(std::min(2000.0, std::max(10.0, 20e3 / std::max(us, 1.0))));
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return true;
}

/// Median microseconds of single calls between events, the stream idle.
bool bracketed(cublasHandle_t h, cudaStream_t st, const Shape &g,
               const void *a, const void *b, void *c, double &us) {
  cudaEvent_t e0, e1;
  if (!ok(cudaEventCreate(&e0), "event") || !ok(cudaEventCreate(&e1), "event"))
    return false;
  std::vector<double> t;
  for (int i = 0; i < 21; ++i) {
    float ms = 0;
    if (!ok(cudaStreamSynchronize(st), "sync") ||
        !ok(cudaEventRecord(e0, st), "record") || !call(h, g, a, b, c) ||
        !ok(cudaEventRecord(e1, st), "record") ||
        !ok(cudaEventSynchronize(e1), "sync") ||
        !ok(cudaEventElapsedTime(&ms, e0, e1), "elapsed"))
      return false;
    t.push_back(1e3 * ms);
  }
  std::sort(t.begin(), t.end());
  us = t[t.size() / 2];
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return true;
}

std::string json(const Shape &g, double thr, double ev, double folded) {
  std::ostringstream o;
  o.precision(6);
  o << "{\"id\": \"" << g.id << "\", \"dtype\": \"" << g.dtype
    << "\", \"flops\": " << 2.0 * g.m * g.n * g.k * g.batch;
  if (thr >= 0) o << ", \"throughput_us\": " << thr;
  if (ev >= 0) o << ", \"event_us\": " << ev;
  if (folded >= 0) o << ", \"folded_us\": " << folded;
  if (!g_error.empty()) {
    std::string e = g_error;
    std::replace(e.begin(), e.end(), '"', '\'');
    o << ", \"error\": \"" << e << "\"";
  }
  o << "}";
  return o.str();
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gemm_bench SHAPES.txt\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "gemm_bench: cannot read %s\n", argv[1]);
    return 2;
  }
  std::vector<Shape> shapes;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#')
      continue;
    std::istringstream s(line);
    Shape g;
    if (!(s >> g.id >> g.dtype >> g.tA >> g.tB >> g.m >> g.n >> g.k >> g.lda >>
          g.ldb >> g.ldc >> g.batch >> g.sA >> g.sB >> g.sC >> g.beta)) {
      std::fprintf(stderr, "gemm_bench: bad line: %s\n", line.c_str());
      return 2;
    }
    shapes.push_back(g);
  }
  cublasHandle_t h;
  cudaStream_t st;
  if (!ok(cudaStreamCreate(&st), "cudaStreamCreate") ||
      !ok(cublasCreate(&h), "cublasCreate") ||
      !ok(cublasSetStream(h, st), "cublasSetStream")) {
    std::fprintf(stderr, "gemm_bench: %s\n", g_error.c_str());
    return 1;
  }
  int failures = 0;
  for (const Shape &g : shapes) {
    g_error.clear();
    double thr = -1, ev = -1, folded = -1;
    const size_t es = elementSize(g.dtype);
    if (!es) {
      g_error = "unsupported dtype " + g.dtype;
    } else {
      const long long na = span(g.tA ? g.k : g.m, g.lda, g.batch, g.sA),
                      nb = span(g.tB ? g.n : g.k, g.ldb, g.batch, g.sB),
                      nc = span(g.m, g.ldc, g.batch, g.sC);
      void *a = nullptr, *b = nullptr, *c = nullptr;
      // Small, exactly representable values (a GEMM's speed does not depend
      // on them; they keep float16 finite).
      std::vector<unsigned char> host(size_t(std::max({na, nb, nc})) * es, 0);
      for (size_t i = 0; i < host.size() / es; ++i) {
        const float v = float(int(i % 7) - 3) / 8.0f;
        if (g.dtype == "float32") std::memcpy(&host[i * 4], &v, 4);
        else if (g.dtype == "float64") { double d = v; std::memcpy(&host[i * 8], &d, 8); }
        else if (g.dtype == "float16") { __half x = __float2half(v); std::memcpy(&host[i * 2], &x, 2); }
        else { __nv_bfloat16 x = __float2bfloat16(v); std::memcpy(&host[i * 2], &x, 2); }
      }
      if (ok(cudaMalloc(&a, na * es), "cudaMalloc") &&
          ok(cudaMalloc(&b, nb * es), "cudaMalloc") &&
          ok(cudaMalloc(&c, nc * es), "cudaMalloc") &&
          ok(cudaMemcpy(a, host.data(), na * es, cudaMemcpyHostToDevice), "copy") &&
          ok(cudaMemcpy(b, host.data(), nb * es, cudaMemcpyHostToDevice), "copy") &&
          ok(cudaMemcpy(c, host.data(), nc * es, cudaMemcpyHostToDevice), "copy") &&
          throughput(h, st, g, a, b, c, thr) && bracketed(h, st, g, a, b, c, ev)) {
        if (g.batch > 1 && g.sB == 0 && !g.tA && g.sA == g.m * g.lda &&
            g.sC == g.m * g.ldc) {
          Shape f = g;
          f.m = g.m * g.batch;
          f.batch = 1;
          f.sA = f.sB = f.sC = 0;
          throughput(h, st, f, a, b, c, folded);
        }
      }
      cudaFree(a);
      cudaFree(b);
      cudaFree(c);
    }
    failures += !g_error.empty();
    std::printf("%s\n", json(g, thr, ev, folded).c_str());
    std::fflush(stdout);
  }
  cublasDestroy(h);
  return failures ? 1 : 0;
}
