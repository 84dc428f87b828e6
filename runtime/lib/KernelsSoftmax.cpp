//===- KernelsSoftmax.cpp - Softmax, LogSoftmax and their gradients -------===//
//
// Native kernels of tdl-specs/reduce.tdl's Softmax, LogSoftmax, SoftmaxGrad
// and LogSoftmaxGrad (float32 or float64: one template each, FloatKernel.h;
// any rank, attribute `axis`, default -1):
//   Softmax:        Y = exp(X - max) / sum(exp(X - max))
//   LogSoftmax:     Y = X - max - log(sum(exp(X - max)))
//   SoftmaxGrad:    dX = Y * (dY - sum(dY * Y))
//   LogSoftmaxGrad: dX = dY - exp(Y) * sum(dY)
// (max and sums along the axis, accumulated in double). O(n) per row where
// the expression interpreter recomputes the row statistics per element.
//
// Geometry: every input holds the output's box in the other dims and the
// whole axis (what the spec's regions give a worker); the output box may
// hold part of the axis (a split of the axis needs whole rows). Any other
// configuration is an unsupported configuration, which the interpreter
// handles. Rows are threaded (ParallelFor.h).
//
//===----------------------------------------------------------------------===//

#include "FloatKernel.h"
#include "ParallelFor.h"
#include "tofu/runtime/Kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace tofu::runtime;
using tofu::plan::DType;

namespace {

/// The output box as rows along the axis: `outer` blocks of `len` x `inner`
/// output elements; the inputs hold `whole` x `inner` per block, and the
/// output's axis starts at `lo`.
struct AxisRows {
  int64_t outer = 1, inner = 1, whole = 0, lo = 0, len = 0;
  /// False when input 1 holds only the output box (LogSoftmaxGrad's Y is
  /// read at the output element alone).
  bool input1Whole = true;
};

/// `elementInput`: an input that may hold just the output box instead of
/// whole rows (-1: none).
template <typename T>
std::string axisRows(const KernelArgs &args, size_t numInputs, AxisRows &rows,
                     int elementInput = -1) {
  if (args.inputs.size() != numInputs || args.outputs.size() != 1)
    return "expects " + std::to_string(numInputs) + " inputs and 1 output";
  const TensorView &out = args.outputs[0];
  int64_t rank = static_cast<int64_t>(out.globalShape.size());
  if (rank < 1)
    return "needs a tensor of rank >= 1";
  int64_t axis = args.intAttr("axis", -1);
  if (axis < -rank || axis >= rank)
    return "axis " + std::to_string(axis) + " is out of range for rank " +
           std::to_string(rank);
  if (axis < 0)
    axis += rank;
  if (out.dtype != FloatType<T>::dtype)
    return "the output must be " + floatName<T>();
  for (size_t i = 0; i < numInputs; ++i) {
    const TensorView &in = args.inputs[i];
    if (!isFloat<T>(in))
      return "input " + std::to_string(i) + " must be a " + floatName<T>() +
             " tensor";
    if (in.globalShape != out.globalShape)
      return "input " + std::to_string(i) + " and the output differ in shape";
    bool whole = true, box = true;
    for (int64_t d = 0; d < rank; ++d) {
      bool same = in.lo[d] == out.lo[d] && in.shape[d] == out.shape[d];
      box &= same;
      whole &= d == axis ? in.lo[d] == 0 && in.shape[d] == in.globalShape[d]
                         : same;
    }
    if (i == 1)
      rows.input1Whole = whole;
    if (!whole && !(box && static_cast<int>(i) == elementInput))
      return unsupportedConfiguration(
          "input " + std::to_string(i) +
          " does not hold whole rows of the output box");
  }
  bool input1Whole = rows.input1Whole;
  rows = AxisRows();
  rows.input1Whole = input1Whole;
  for (int64_t d = 0; d < axis; ++d)
    rows.outer *= out.shape[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    rows.inner *= out.shape[d];
  rows.whole = out.globalShape[axis];
  rows.lo = out.lo[axis];
  rows.len = out.shape[axis];
  return "";
}

/// Calls `block(x, y, ...)` for every outer block in parallel; the pointers
/// address the block's first element in each operand (inputs: whole axis;
/// output: its part of the axis). `stat` and `acc` are per-thread scratch
/// rows of `inner` doubles.
template <typename T, typename Block>
void forBlocks(const AxisRows &rows, const KernelArgs &args, Block block) {
  const int64_t inStride = rows.whole * rows.inner;
  const int64_t outStride = rows.len * rows.inner;
  parallelFor(rows.outer, 4.0 * static_cast<double>(inStride),
              [&](int64_t begin, int64_t end) {
                std::vector<double> stat(rows.inner), acc(rows.inner);
                for (int64_t o = begin; o < end; ++o) {
                  const T *a = elements<T>(args.inputs[0]) + o * inStride;
                  const T *b =
                      args.inputs.size() > 1
                          ? elements<T>(args.inputs[1]) +
                                o * (rows.input1Whole ? inStride : outStride)
                          : nullptr;
                  T *y = elements<T>(args.outputs[0]) + o * outStride;
                  block(a, b, y, stat.data(), acc.data());
                }
              });
}

/// stat[i] = max over the axis of x, acc[i] = sum of exp(x - max).
template <typename T>
void maxAndSumExp(const AxisRows &rows, const T *x, double *stat, double *acc) {
  const int64_t inner = rows.inner;
  std::fill(stat, stat + inner, -std::numeric_limits<double>::infinity());
  std::fill(acc, acc + inner, 0.0);
  for (int64_t j = 0; j < rows.whole; ++j)
    for (int64_t i = 0; i < inner; ++i)
      stat[i] = std::max(stat[i], static_cast<double>(x[j * inner + i]));
  for (int64_t j = 0; j < rows.whole; ++j)
    for (int64_t i = 0; i < inner; ++i)
      acc[i] += std::exp(static_cast<double>(x[j * inner + i]) - stat[i]);
}

template <typename T> std::string softmax(const KernelArgs &args) {
  AxisRows rows;
  if (std::string err = axisRows<T>(args, 1, rows); !err.empty())
    return err;
  const int64_t inner = rows.inner;
  forBlocks<T>(
      rows, args, [&](const T *x, const T *, T *y, double *mx, double *sum) {
        maxAndSumExp(rows, x, mx, sum);
        for (int64_t j = 0; j < rows.len; ++j)
          for (int64_t i = 0; i < inner; ++i)
            y[j * inner + i] = static_cast<T>(
                std::exp(static_cast<double>(x[(rows.lo + j) * inner + i]) -
                         mx[i]) /
                sum[i]);
      });
  return "";
}

template <typename T> std::string logSoftmax(const KernelArgs &args) {
  AxisRows rows;
  if (std::string err = axisRows<T>(args, 1, rows); !err.empty())
    return err;
  const int64_t inner = rows.inner;
  forBlocks<T>(
      rows, args, [&](const T *x, const T *, T *y, double *mx, double *sum) {
        maxAndSumExp(rows, x, mx, sum);
        for (int64_t i = 0; i < inner; ++i)
          sum[i] = mx[i] + std::log(sum[i]);
        for (int64_t j = 0; j < rows.len; ++j)
          for (int64_t i = 0; i < inner; ++i)
            y[j * inner + i] = static_cast<T>(
                static_cast<double>(x[(rows.lo + j) * inner + i]) - sum[i]);
      });
  return "";
}

template <typename T> std::string softmaxGrad(const KernelArgs &args) {
  AxisRows rows;
  if (std::string err = axisRows<T>(args, 2, rows); !err.empty())
    return err;
  const int64_t inner = rows.inner;
  forBlocks<T>(
      rows, args, [&](const T *dy, const T *y, T *dx, double *dot, double *) {
        std::fill(dot, dot + inner, 0.0);
        for (int64_t j = 0; j < rows.whole; ++j)
          for (int64_t i = 0; i < inner; ++i)
            dot[i] += static_cast<double>(dy[j * inner + i]) * y[j * inner + i];
        for (int64_t j = 0; j < rows.len; ++j)
          for (int64_t i = 0; i < inner; ++i) {
            int64_t at = (rows.lo + j) * inner + i;
            dx[j * inner + i] =
                static_cast<T>(static_cast<double>(y[at]) *
                               (static_cast<double>(dy[at]) - dot[i]));
          }
      });
  return "";
}

template <typename T> std::string logSoftmaxGrad(const KernelArgs &args) {
  AxisRows rows;
  if (std::string err = axisRows<T>(args, 2, rows, /*elementInput=*/1);
      !err.empty())
    return err;
  const int64_t inner = rows.inner;
  forBlocks<T>(
      rows, args, [&](const T *dy, const T *y, T *dx, double *sum, double *) {
        std::fill(sum, sum + inner, 0.0);
        for (int64_t j = 0; j < rows.whole; ++j)
          for (int64_t i = 0; i < inner; ++i)
            sum[i] += dy[j * inner + i];
        for (int64_t j = 0; j < rows.len; ++j)
          for (int64_t i = 0; i < inner; ++i) {
            int64_t at = (rows.lo + j) * inner + i;
            int64_t yAt = rows.input1Whole ? at : j * inner + i;
            dx[j * inner + i] =
                static_cast<T>(static_cast<double>(dy[at]) -
                               std::exp(static_cast<double>(y[yAt])) * sum[i]);
          }
      });
  return "";
}

} // namespace

void tofu::runtime::registerSoftmaxKernels(void (*addKernel)(const char *,
                                                             KernelFn)) {
  addKernel("Softmax", byFloatType<softmax<float>, softmax<double>>);
  addKernel("LogSoftmax", byFloatType<logSoftmax<float>, logSoftmax<double>>);
  addKernel("SoftmaxGrad",
            byFloatType<softmaxGrad<float>, softmaxGrad<double>>);
  addKernel("LogSoftmaxGrad",
            byFloatType<logSoftmaxGrad<float>, logSoftmaxGrad<double>>);
}
