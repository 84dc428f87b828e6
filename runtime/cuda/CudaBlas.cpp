//===- CudaBlas.cpp - cuBLAS GEMM for the CUDA backend --------------------===//
#include "CudaBlas.h"

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

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

LtHandle::~LtHandle() {
  if (space)
    cudaFree(space);
  if (handle)
    cublasLtDestroy(handle);
}

std::string LtHandle::init() {
  if (handle)
    return "";
  cublasStatus_t s = cublasLtCreate(&handle);
  if (s != CUBLAS_STATUS_SUCCESS) {
    handle = nullptr;
    return std::string("cublasLtCreate failed: ") + blasStatusName(s);
  }
  cudaError_t err = cudaMalloc(&space, kWorkspaceBytes);
  if (err != cudaSuccess) {
    space = nullptr;
    return std::string("cudaMalloc of cuBLASLt's ") +
           std::to_string(kWorkspaceBytes >> 20) +
           " MiB workspace failed: " + cudaGetErrorString(err);
  }
  return "";
}

LtGemm::~LtGemm() { release(); }

void LtGemm::release() {
  if (layoutC)
    cublasLtMatrixLayoutDestroy(layoutC);
  if (layoutB)
    cublasLtMatrixLayoutDestroy(layoutB);
  if (layoutA)
    cublasLtMatrixLayoutDestroy(layoutA);
  if (desc)
    cublasLtMatmulDescDestroy(desc);
  desc = nullptr, layoutA = layoutB = layoutC = nullptr;
  candidates.clear();
}

namespace {

/// The largest power of two up to 256 dividing `p`'s address: the alignment
/// cuBLASLt may assume of an operand.
uint32_t alignmentOf(const void *p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && v % a != 0)
    a /= 2;
  return a;
}

} // namespace

std::string LtGemm::prepare(const LtHandle &lt, const GemmShape &g,
                            cudaDataType type, GemmEpilogue epilogue,
                            const void *a, const void *b, const void *c,
                            const void *bias) {
  release();
  if (std::string err = checkShape(g); !err.empty())
    return err;
  if (g.beta != 0)
    return "an epilogue GEMM accumulates into nothing (beta 0)";
  if (type != CUDA_R_32F && type != CUDA_R_64F && type != CUDA_R_16F &&
      type != CUDA_R_16BF)
    return std::string("cuBLASLt GEMM is mapped for float32, float64, "
                       "float16 and bfloat16, not ") +
           typeName(type);
  if (epilogue.bias && !bias)
    return "the bias epilogue has no bias";
  doublePrecision = type == CUDA_R_64F;
  alpha = g.alpha;
  // As in run() above: row-major C = op(A) op(B) is column-major
  // C^T = op(B)^T op(A)^T, so cuBLASLt's A is our B and its B our A; its
  // bias (one element per row of its D) is one per column of ours.
  const cublasOperation_t opB = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opA = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const uint64_t m = static_cast<uint64_t>(g.n), n = static_cast<uint64_t>(g.m),
                 k = static_cast<uint64_t>(g.k);
  auto fail = [&](const char *call, cublasStatus_t s) {
    release();
    return std::string(call) + " failed: " + blasStatusName(s);
  };
  cublasStatus_t s = cublasLtMatmulDescCreate(
      &desc, doublePrecision ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
      doublePrecision ? CUDA_R_64F : CUDA_R_32F);
  if (s != CUBLAS_STATUS_SUCCESS)
    return fail("cublasLtMatmulDescCreate", s);
  const cublasLtEpilogue_t kind =
      epilogue.bias ? (epilogue.relu ? CUBLASLT_EPILOGUE_RELU_BIAS
                                     : CUBLASLT_EPILOGUE_BIAS)
                    : (epilogue.relu ? CUBLASLT_EPILOGUE_RELU
                                     : CUBLASLT_EPILOGUE_DEFAULT);
  auto setDesc = [&](cublasLtMatmulDescAttributes_t attr, const void *value,
                     size_t size) {
    return s = cublasLtMatmulDescSetAttribute(desc, attr, value, size);
  };
  if (setDesc(CUBLASLT_MATMUL_DESC_TRANSA, &opB, sizeof opB) !=
          CUBLAS_STATUS_SUCCESS ||
      setDesc(CUBLASLT_MATMUL_DESC_TRANSB, &opA, sizeof opA) !=
          CUBLAS_STATUS_SUCCESS ||
      setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE, &kind, sizeof kind) !=
          CUBLAS_STATUS_SUCCESS)
    return fail("cublasLtMatmulDescSetAttribute", s);
  if (epilogue.bias &&
      (s = cublasLtMatmulDescSetAttribute(desc,
                                          CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                          &bias, sizeof bias)) !=
          CUBLAS_STATUS_SUCCESS)
    return fail("cublasLtMatmulDescSetAttribute(BIAS_POINTER)", s);
  // Stored (column-major) shapes: cuBLASLt's A is m x k (k x m transposed),
  // its B k x n (n x k transposed), C m x n.
  if ((s = cublasLtMatrixLayoutCreate(&layoutA, type, g.transB ? k : m,
                                      g.transB ? m : k,
                                      static_cast<int64_t>(g.ldb))) !=
          CUBLAS_STATUS_SUCCESS ||
      (s = cublasLtMatrixLayoutCreate(&layoutB, type, g.transA ? n : k,
                                      g.transA ? k : n,
                                      static_cast<int64_t>(g.lda))) !=
          CUBLAS_STATUS_SUCCESS ||
      (s = cublasLtMatrixLayoutCreate(&layoutC, type, m, n,
                                      static_cast<int64_t>(g.ldc))) !=
          CUBLAS_STATUS_SUCCESS)
    return fail("cublasLtMatrixLayoutCreate", s);
  cublasLtMatmulPreference_t pref = nullptr;
  if ((s = cublasLtMatmulPreferenceCreate(&pref)) != CUBLAS_STATUS_SUCCESS)
    return fail("cublasLtMatmulPreferenceCreate", s);
  const uint64_t space = LtHandle::kWorkspaceBytes;
  // cuBLASLt's A is our B (see above).
  const uint32_t alignA = alignmentOf(b), alignB = alignmentOf(a),
                 alignC = alignmentOf(c);
  auto setPref = [&](cublasLtMatmulPreferenceAttributes_t attr,
                     const void *value, size_t size) {
    return s = cublasLtMatmulPreferenceSetAttribute(pref, attr, value, size);
  };
  if (setPref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &space,
              sizeof space) != CUBLAS_STATUS_SUCCESS ||
      setPref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignA,
              sizeof alignA) != CUBLAS_STATUS_SUCCESS ||
      setPref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignB,
              sizeof alignB) != CUBLAS_STATUS_SUCCESS ||
      setPref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignC,
              sizeof alignC) != CUBLAS_STATUS_SUCCESS ||
      setPref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignC,
              sizeof alignC) != CUBLAS_STATUS_SUCCESS) {
    cublasLtMatmulPreferenceDestroy(pref);
    return fail("cublasLtMatmulPreferenceSetAttribute", s);
  }
  cublasLtMatmulHeuristicResult_t results[kMaxAlgorithms]{};
  int found = 0;
  s = cublasLtMatmulAlgoGetHeuristic(lt.get(), desc, layoutA, layoutB, layoutC,
                                     layoutC, pref, kMaxAlgorithms, results,
                                     &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS)
    return fail("cublasLtMatmulAlgoGetHeuristic", s);
  if (found == 0) {
    release();
    return "cublasLtMatmulAlgoGetHeuristic found no algorithm";
  }
  for (int i = 0; i < found; ++i)
    candidates.push_back({results[i].algo, results[i].workspaceSize});
  useAlgorithm(0);
  return "";
}

void LtGemm::useAlgorithm(size_t index) {
  algo = candidates[index].algo;
  workspaceBytes = candidates[index].workspaceBytes;
}

std::string LtGemm::run(const LtHandle &lt, const void *a, const void *b,
                        void *c, cudaStream_t stream) const {
  if (!desc)
    return "internal error: cublasLtMatmul of an unprepared GEMM";
  const float alphaF = static_cast<float>(alpha), betaF = 0;
  const double betaD = 0;
  const void *alphaP = doublePrecision ? static_cast<const void *>(&alpha)
                                       : static_cast<const void *>(&alphaF);
  const void *betaP = doublePrecision ? static_cast<const void *>(&betaD)
                                      : static_cast<const void *>(&betaF);
  cublasStatus_t s = cublasLtMatmul(lt.get(), desc, alphaP, b, layoutA, a, layoutB, betaP, c,
                     layoutC, c, layoutC, &algo, lt.workspace(),
                     workspaceBytes, stream);
  if (s != CUBLAS_STATUS_SUCCESS)
    return std::string("cublasLtMatmul failed: ") + blasStatusName(s);
  return "";
}
