//===- KernelsMatrix.cpp - Matrix CPU kernels (GEMM via OpenBLAS) ---------===//
//
// Gemm (ONNX semantics, C broadcast decided from the global shapes)
// and BiasGrad on 2-D local boxes, float32 or float64 (one
// template per kernel, FloatKernel.h; MatMul, N-D, lives in
// KernelsMatMul.cpp; Transpose, in KernelsShape.cpp). When a reduction
// dimension is split, the same code
// computes a partial product over the local slice; the compiler's Reduce
// sums the parts.
//
//===----------------------------------------------------------------------===//

#include "Blas.h"
#include "Broadcast.h"
#include "FloatKernel.h"
#include "tofu/runtime/Kernels.h"

#include <algorithm>

using namespace tofu::runtime;
using tofu::plan::DType;

namespace {

template <typename T>
std::string checkMatrix(const TensorView &v, const char *what) {
  if (!v.present())
    return std::string(what) + " is missing";
  if (v.dtype != FloatType<T>::dtype)
    return std::string(what) + " must be " + floatName<T>();
  if (v.shape.size() != 2)
    return std::string(what) + " must be 2-D, has rank " +
           std::to_string(v.shape.size());
  return "";
}

std::string dims(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

template <typename T> std::string gemm(const KernelArgs &args) {
  if (args.inputs.size() < 2 || args.inputs.size() > 3 ||
      args.outputs.size() != 1)
    return "expects inputs (A, B, C?) and 1 output";
  const TensorView &A = args.inputs[0], &B = args.inputs[1], &Y = args.outputs[0];
  for (auto [v, what] : {std::pair{&A, "A"}, {&B, "B"}, {&Y, "Y"}})
    if (auto err = checkMatrix<T>(*v, what); !err.empty())
      return err;
  bool transA = args.intAttr("transA", 0) != 0;
  bool transB = args.intAttr("transB", 0) != 0;
  T alpha = static_cast<T>(args.floatAttr("alpha", 1.0));
  T beta = static_cast<T>(args.floatAttr("beta", 1.0));
  int64_t M = Y.shape[0], N = Y.shape[1];
  int64_t am = transA ? A.shape[1] : A.shape[0];
  int64_t K = transA ? A.shape[0] : A.shape[1];
  int64_t bk = transB ? B.shape[1] : B.shape[0];
  int64_t bn = transB ? B.shape[0] : B.shape[1];
  // An empty A or B with a non-empty Y is an empty inner dimension (K = 0,
  // the plan hands such an operand over as an empty box): Y = beta * C.
  bool emptyInner = Y.numElements() > 0 &&
                    (A.numElements() == 0 || B.numElements() == 0);
  if (emptyInner)
    am = M, bn = N, K = bk = 0;
  if (am != M || bn != N || bk != K)
    return "local shapes do not match: A " + dims(A.shape) + " B " +
           dims(B.shape) + " Y " + dims(Y.shape) +
           (transA ? " transA" : "") + (transB ? " transB" : "");
  T *y = elements<T>(Y);
  bool hasC = args.inputs.size() == 3 && args.inputs[2].present();
  if (hasC) {
    const TensorView &C = args.inputs[2];
    if (C.dtype != FloatType<T>::dtype)
      return "C must be " + floatName<T>();
    // Row by row from the two dimensions' offsets (a bias row is read at
    // column offsets only): no per-element offset table each call.
    std::vector<std::vector<int64_t>> off;
    if (auto err = broadcastDimOffsets(Y, C, off); !err.empty())
      return "C: " + err;
    const T *c = elements<T>(C);
    const int64_t *columns = off[1].data();
    // A bias row (or a full C) is read at consecutive columns: a plain,
    // vectorizable loop instead of a gather.
    bool consecutive = true;
    for (int64_t j = 1; j < N && consecutive; ++j)
      consecutive = columns[j] == columns[0] + j;
    for (int64_t i = 0; i < M; ++i) {
      const T *__restrict row = c + off[0][i];
      T *__restrict out = y + i * N;
      if (consecutive) {
        row += N > 0 ? columns[0] : 0;
        for (int64_t j = 0; j < N; ++j)
          out[j] = beta * row[j];
      } else {
        for (int64_t j = 0; j < N; ++j)
          out[j] = beta * row[columns[j]];
      }
    }
  }
  if (emptyInner) {
    if (!hasC)
      std::fill(y, y + M * N, T(0));
    return "";
  }
  blasGemm(transA, transB, M, N, K, alpha, elements<T>(A), A.shape[1],
           elements<T>(B), B.shape[1], hasC ? T(1) : T(0), y, N);
  return "";
}

template <typename T> std::string biasGrad(const KernelArgs &args) {
  if (args.inputs.size() != 1 || args.outputs.size() != 1)
    return "expects 1 input and 1 output";
  const TensorView &dY = args.inputs[0], &dB = args.outputs[0];
  if (auto err = checkMatrix<T>(dY, "dY"); !err.empty())
    return err;
  if (dB.dtype != FloatType<T>::dtype || dB.shape.size() != 1 ||
      dB.shape[0] != dY.shape[1])
    return "local shapes do not match: dY " + dims(dY.shape) + " dB " +
           dims(dB.shape);
  int64_t M = dY.shape[0], N = dY.shape[1];
  const T *g = elements<T>(dY);
  T *b = elements<T>(dB);
  for (int64_t n = 0; n < N; ++n)
    b[n] = T(0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      b[n] += g[m * N + n];
  return "";
}

} // namespace

void tofu::runtime::registerMatrixKernels(void (*addKernel)(const char *,
                                                            KernelFn)) {
  addKernel("Gemm", byFloatType<gemm<float>, gemm<double>>);
  addKernel("BiasGrad", byFloatType<biasGrad<float>, biasGrad<double>>);
}
