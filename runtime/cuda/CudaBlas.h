//===- CudaBlas.h - cuBLAS GEMM for the CUDA backend --------------*- C++ -*-===//
//
// Row-major GEMM and strided batched GEMM on device pointers of float32
// (cublasSgemm), float64 (cublasDgemm) or float16 / bfloat16 (cublasGemmEx
// with float32 compute, no TF32), with the semantics of the CPU kernels
// (runtime/lib/KernelsMatMul.cpp):
//   C[M, N] = alpha * op(A) * op(B) + beta * C
// cuBLAS is column-major; a row-major product is computed as the
// column-major C^T = op(B)^T op(A)^T, with no copies. Called by the CUDA
// executor (CudaExecutor.cpp) for MatMul and Gemm; tested against the CPU
// kernels where a GPU exists (tofu-cuda-library-tests, label gpu; run on an
// H200, bench/gpu/H200.md).
//
// A GEMM with a bias vector and/or a ReLU after it (ONNX Gemm's C when it is
// one row broadcast over M, and a Relu that reads only the GEMM's output)
// runs as one cublasLtMatmul with the matching epilogue (LtGemm below), so
// that neither the bias nor the activation takes its own pass over C.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDABLAS_H
#define TOFU_RUNTIME_CUDA_CUDABLAS_H

#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tofu::cuda {

/// A cuBLAS handle bound to the current device, destroyed with the object.
class BlasHandle {
public:
  BlasHandle() = default;
  ~BlasHandle();
  BlasHandle(const BlasHandle &) = delete;
  BlasHandle &operator=(const BlasHandle &) = delete;
  /// Creates the handle and sets `stream`; empty string or the error.
  std::string init(cudaStream_t stream = nullptr);
  cublasHandle_t get() const { return handle; }

private:
  cublasHandle_t handle = nullptr;
};

/// One row-major GEMM: A is [M, K] ([K, M] when transA), B is [K, N] ([N, K]
/// when transB), C is [M, N]; lda/ldb/ldc are the row strides (elements).
struct GemmShape {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  /// Scalars, rounded to the compute type (float except for float64).
  double alpha = 1, beta = 0;
};

/// C = alpha * op(A) op(B) + beta * C, with A, B and C arrays of `type`
/// (CUDA_R_32F, CUDA_R_64F, CUDA_R_16F or CUDA_R_16BF). Returns "" or the
/// cuBLAS error.
std::string gemm(const BlasHandle &blas, const GemmShape &shape,
                 cudaDataType type, const void *a, const void *b, void *c);
/// The float32 case of the above.
std::string gemm(const BlasHandle &blas, const GemmShape &shape,
                 const float *a, const float *b, float *c);

/// `batch` GEMMs of one shape; matrix i of A starts at a + i * strideA
/// (likewise B, C). A stride of 0 broadcasts one matrix to every batch.
std::string gemmStridedBatched(const BlasHandle &blas, const GemmShape &shape,
                               cudaDataType type, const void *a,
                               int64_t strideA, const void *b, int64_t strideB,
                               void *c, int64_t strideC, int64_t batch);
/// The float32 case of the above.
std::string gemmStridedBatched(const BlasHandle &blas, const GemmShape &shape,
                               const float *a, int64_t strideA,
                               const float *b, int64_t strideB, float *c,
                               int64_t strideC, int64_t batch);

/// A cuBLASLt handle and the workspace its matmuls may use, on the current
/// device; freed with the object.
class LtHandle {
public:
  /// cuBLASLt's recommended workspace on Hopper (32 MiB); not part of the
  /// plan's memory (docs/Cuda.md).
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;
  LtHandle() = default;
  ~LtHandle();
  LtHandle(const LtHandle &) = delete;
  LtHandle &operator=(const LtHandle &) = delete;
  /// Creates the handle and allocates the workspace; "" or the error.
  std::string init();
  cublasLtHandle_t get() const { return handle; }
  void *workspace() const { return space; }

private:
  cublasLtHandle_t handle = nullptr;
  void *space = nullptr;
};

/// What the GEMM's epilogue does to C = alpha op(A) op(B) (beta is 0).
struct GemmEpilogue {
  /// C[i, j] += bias[j]: N elements of the GEMM's type.
  bool bias = false;
  /// C = max(C, 0), after the bias.
  bool relu = false;
};

/// One row-major GEMM with an epilogue through cublasLtMatmul: the
/// descriptors and the algorithm cuBLASLt's heuristic picks are made once
/// (prepare, outside any CUDA graph capture) and used by every run.
class LtGemm {
public:
  LtGemm() = default;
  ~LtGemm();
  LtGemm(const LtGemm &) = delete;
  LtGemm &operator=(const LtGemm &) = delete;
  /// Prepares `shape` (beta must be 0) on arrays of `type`. Returns "" or
  /// why cuBLASLt cannot run it (no algorithm for this shape, type and
  /// epilogue): the caller then runs the bias, the GEMM and the ReLU as
  /// separate calls.
  /// The operands' addresses are those of the runs to come: the algorithm
  /// is chosen for their alignment, and `bias` (N elements; null without
  /// the bias epilogue) is fixed here.
  std::string prepare(const LtHandle &lt, const GemmShape &shape,
                      cudaDataType type, GemmEpilogue epilogue, const void *a,
                      const void *b, const void *c, const void *bias);
  /// C = epilogue(alpha op(A) op(B)) on `stream`, with the bias given to
  /// prepare; "" or the cuBLASLt error.
  std::string run(const LtHandle &lt, const void *a, const void *b, void *c,
                  cudaStream_t stream) const;
  /// prepare keeps up to kMaxAlgorithms of cuBLASLt's heuristic candidates,
  /// best first, and runs the first; the executor may time them and pick
  /// another (CudaExecutor.cpp, chooseGemmAlgorithms).
  static constexpr int kMaxAlgorithms = 8;
  size_t algorithms() const { return candidates.size(); }
  /// Runs candidate `index` (< algorithms()) from now on.
  void useAlgorithm(size_t index);

private:
  void release();
  struct Candidate {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceBytes;
  };
  std::vector<Candidate> candidates;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layoutA = nullptr, layoutB = nullptr,
                         layoutC = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspaceBytes = 0;
  bool doublePrecision = false;
  double alpha = 1;
};

/// cuBLAS's name of a status, for messages.
const char *blasStatusName(cublasStatus_t status);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDABLAS_H
