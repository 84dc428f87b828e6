//===- KernelsMatMul.cpp - N-D batched MatMul (ONNX) via BLAS GEMM --------===//
//
// MatMul(A, B) -> Y with ONNX (numpy) semantics: A [..., M, K] times
// B [..., K, N]; a 1-D A is [1, K] and a 1-D B is [K, 1] with that dimension
// dropped from Y; the batch dimensions broadcast (decided from the GLOBAL
// shapes: a global extent of 1 against a larger one reads index 0).
//
// Local execution: Y's local box selects the batch elements, rows and
// columns to compute; A and B must hold them (supersets are fine). The sum
// runs over the K slice the inputs hold, which must be the same slice in A
// and B: a K split gives a partial product that the plan's Reduce sums.
// MatMulTransposed (tofu-absorb-transposes) is the same with either operand
// read transposed in its last two dims, which BLAS does in place.
// One GEMM per local batch element (sgemm or dgemm: the kernel is one
// template over float and double, FloatKernel.h), or one GEMM for all of
// them when B is one matrix shared by the batch and A's batch elements are
// stored back to back (their rows then stack). Batch elements whose GEMMs
// are too small for blasGemm to split run side by side on the worker pool.
//
//===----------------------------------------------------------------------===//

#include "Blas.h"
#include "FloatKernel.h"
#include "ParallelFor.h"
#include "tofu/runtime/Kernels.h"
#include "tofu/runtime/MatMulBatchOffsets.h"

using namespace tofu::runtime;
using tofu::plan::DType;

namespace {

std::string dims(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

/// matMulBatchOffsets on two views; a box that lacks a batch index is an
/// unsupported configuration (the interpreter runs the share).
std::string batchOffsets(const TensorView &Y, size_t yBatch,
                         const TensorView &X, size_t xBatch, int64_t matrix,
                         const char *what, std::vector<int64_t> &offsets) {
  bool missingIndex = false;
  std::string err = matMulBatchOffsets(
      {Y.lo, Y.shape, Y.globalShape}, yBatch, {X.lo, X.shape, X.globalShape},
      xBatch, matrix, what, offsets, missingIndex);
  return missingIndex ? unsupportedConfiguration(err) : err;
}

/// Y = op(A) op(B) with numpy batching, op(X) swapping X's last two dims
/// when transX (MatMulTransposed; MatMul is the case of neither). BLAS reads
/// a transposed operand in place: the local matrices are only offset.
template <typename T>
std::string product(const KernelArgs &args, bool transA, bool transB) {
  if (args.inputs.size() != 2 || args.outputs.size() != 1)
    return "expects inputs (A, B) and 1 output";
  const TensorView &A = args.inputs[0], &B = args.inputs[1],
                   &Y = args.outputs[0];
  if (!A.present() || !B.present())
    return "an input is missing";
  if (!isFloat<T>(A) || !isFloat<T>(B) || Y.dtype != FloatType<T>::dtype)
    return "operands must be " + floatName<T>();
  const size_t ra = A.shape.size(), rb = B.shape.size(), ry = Y.shape.size();
  if (ra == 0 || rb == 0)
    return "inputs must have rank 1 or more";
  if ((transA || transB) && (ra < 2 || rb < 2))
    return "transposed operands must have rank 2 or more";
  const bool vecA = ra == 1, vecB = rb == 1;
  const size_t aBatch = vecA ? 0 : ra - 2, bBatch = vecB ? 0 : rb - 2;
  const size_t yBatch = std::max(aBatch, bBatch);
  if (ry != yBatch + (vecA ? 0 : 1) + (vecB ? 0 : 1))
    return "output rank " + std::to_string(ry) + " does not fit inputs of rank " +
           std::to_string(ra) + " and " + std::to_string(rb);

  // Which dims of A and B hold M, K and N.
  const size_t aK = transA ? ra - 2 : ra - 1, aM = transA ? ra - 1 : ra - 2;
  const size_t bK = vecB ? 0 : (transB ? rb - 1 : rb - 2),
               bN = transB ? rb - 2 : rb - 1;
  if (A.globalShape[aK] != B.globalShape[bK])
    return "global inner dimensions differ: A " + dims(A.globalShape) +
           " B " + dims(B.globalShape);
  // Local positions (global coordinates) of Y's rows and columns.
  int64_t M = 1, N = 1, yM0 = 0, yN0 = 0;
  if (!vecA) {
    size_t d = yBatch;
    if (Y.globalShape[d] != A.globalShape[aM])
      return "global row counts differ: A " + dims(A.globalShape) + " Y " +
             dims(Y.globalShape);
    M = Y.shape[d];
    yM0 = Y.lo[d];
  }
  if (!vecB) {
    size_t d = ry - 1;
    if (Y.globalShape[d] != B.globalShape[bN])
      return "global column counts differ: B " + dims(B.globalShape) +
             " Y " + dims(Y.globalShape);
    N = Y.shape[d];
    yN0 = Y.lo[d];
  }
  // The K slice: the same in A and B.
  const int64_t K = A.shape[aK];
  if (A.lo[aK] != B.lo[bK] || B.shape[bK] != K)
    return unsupportedConfiguration(
        "A holds K [" + std::to_string(A.lo[aK]) + ", " +
        std::to_string(A.lo[aK] + K) + ") but B holds K [" +
        std::to_string(B.lo[bK]) + ", " +
        std::to_string(B.lo[bK] + B.shape[bK]) + ")");
  // Row and column offsets inside A and B; the leading dims of their
  // row-major local matrices.
  const int64_t aRows = vecA ? 1 : A.shape[aM];
  const int64_t aRow0 = vecA ? 0 : yM0 - A.lo[aM];
  const int64_t bCols = vecB ? 1 : B.shape[bN];
  const int64_t bCol0 = vecB ? 0 : yN0 - B.lo[bN];
  if (aRow0 < 0 || aRow0 + M > aRows)
    return unsupportedConfiguration("A lacks rows of Y's local box");
  if (bCol0 < 0 || bCol0 + N > bCols)
    return unsupportedConfiguration("B lacks columns of Y's local box");
  const int64_t lda = vecA ? K : A.shape[ra - 1];
  const int64_t ldb = vecB ? 1 : B.shape[rb - 1];
  const int64_t aStart = transA ? aRow0 : aRow0 * lda;
  const int64_t bStart = transB ? bCol0 * ldb : bCol0;

  std::vector<int64_t> aOff, bOff;
  if (auto err = batchOffsets(Y, yBatch, A, aBatch, aRows * K, "A", aOff);
      !err.empty())
    return err;
  if (auto err = batchOffsets(Y, yBatch, B, bBatch, K * bCols, "B", bOff);
      !err.empty())
    return err;
  const T *a = elements<T>(A), *b = elements<T>(B);
  T *y = elements<T>(Y);
  // One matrix B for every batch element (nn.Linear on [N, S, K] or
  // [N, H, W, K]) and A's batch elements stored back to back with all
  // their rows: the batch folds into the rows of one GEMM, instead of one
  // small GEMM per batch element (convnext: 32 GEMMs of 16 rows -> 1 of 512).
  bool foldBatch = !transA && aOff.size() > 1 && aRow0 == 0 && aRows == M;
  for (size_t e = 1; foldBatch && e < aOff.size(); ++e)
    foldBatch = bOff[e] == bOff[0] &&
                aOff[e] == aOff[0] + static_cast<int64_t>(e) * aRows * K;
  if (foldBatch) {
    blasGemm(false, transB, M * static_cast<int64_t>(aOff.size()), N, K, T(1),
             a + aOff[0], lda, b + bOff[0] + bStart, ldb, T(0), y, N);
    return "";
  }
  auto multiply = [&](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end; ++e)
      blasGemm(transA, transB, M, N, K, T(1), a + aOff[e] + aStart, lda,
               b + bOff[e] + bStart, ldb, T(0), y + e * M * N, N);
  };
  const int64_t batch = static_cast<int64_t>(aOff.size());
  if (batch > 1 && blasGemmThreads(M, N, K) == 1)
    // Products too small for blasGemm to split (attention's per-head 32 x
    // 32 x 16) run side by side on the pool, each on one thread, once the
    // batch's FLOPs reach blasGemm's own threshold (2^20; parallelFor's is
    // 2^18 work units).
    parallelFor(batch, 0.5 * double(M) * double(N) * double(K), multiply);
  else
    multiply(0, batch);
  return "";
}

template <typename T> std::string matMul(const KernelArgs &args) {
  return product<T>(args, false, false);
}

template <typename T> std::string matMulTransposed(const KernelArgs &args) {
  return product<T>(args, args.intAttr("transA", 0) != 0,
                    args.intAttr("transB", 0) != 0);
}

} // namespace

void tofu::runtime::registerMatMulKernels(void (*addKernel)(const char *,
                                                            KernelFn)) {
  addKernel("MatMul", byFloatType<matMul<float>, matMul<double>>);
  addKernel("MatMulTransposed",
            byFloatType<matMulTransposed<float>, matMulTransposed<double>>);
}
