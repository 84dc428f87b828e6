//===- KernelsSoftmax.cpp - Softmax, LogSoftmax and their gradients -------===//
//
// Native kernels of tdl-specs/reduce.tdl's Softmax, LogSoftmax, SoftmaxGrad
// and LogSoftmaxGrad (float32 or float64: one template each, FloatKernel.h;
// any rank, attribute `axis`, default -1):
//   Softmax:        Y = exp(X - max) / sum(exp(X - max))
//   LogSoftmax:     Y = X - max - log(sum(exp(X - max)))
//   SoftmaxGrad:    dX = Y * (dY - sum(dY * Y))
//   LogSoftmaxGrad: dX = dY - exp(Y) * sum(dY)
// (max along the axis; sums accumulated in double; float32's exponentials
// in float32 arithmetic by a vectorizable exp, VectorizableMath.h, as
// PyTorch's vectorized CPU softmax computes them; each computed once per
// element). O(n) per row where the expression interpreter recomputes the
// row statistics per element.
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
#include "VectorizableMath.h"
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
/// rows of `inner` doubles; `row`, for inner = 1, one of `whole` T.
template <typename T, typename Block>
void forBlocks(const AxisRows &rows, const KernelArgs &args, Block block) {
  const int64_t inStride = rows.whole * rows.inner;
  const int64_t outStride = rows.len * rows.inner;
  parallelFor(rows.outer, 4.0 * static_cast<double>(inStride),
              [&](int64_t begin, int64_t end) {
                std::vector<double> stat(rows.inner), acc(rows.inner);
                std::vector<T> row(rows.inner == 1 ? rows.whole : 0);
                for (int64_t o = begin; o < end; ++o) {
                  const T *a = elements<T>(args.inputs[0]) + o * inStride;
                  const T *b =
                      args.inputs.size() > 1
                          ? elements<T>(args.inputs[1]) +
                                o * (rows.input1Whole ? inStride : outStride)
                          : nullptr;
                  T *y = elements<T>(args.outputs[0]) + o * outStride;
                  block(a, b, y, stat.data(), acc.data(), row.data());
                }
              });
}

/// stat[i] = max over the axis of x; acc[i] = sum over the axis of
/// e^(x - max) (float: in float32 arithmetic, VectorizableMath.h; summed in
/// double), and y's part of the axis (`len` rows from `lo`) set to those
/// terms when `y` is given. Rows of one element per position (inner = 1,
/// the softmax over the last dim) go through `row` (`whole` elements of
/// scratch) and sum in eight interleaved lanes so that the loops vectorize.
template <typename T>
void maxAndSumExp(const AxisRows &rows, const T *x, double *stat, double *acc,
                  T *y, T *row) {
  const int64_t inner = rows.inner, whole = rows.whole;
  if (inner == 1) {
    constexpr int kLanes = 8;
    T lane[kLanes];
    T mx = -std::numeric_limits<T>::infinity();
    int64_t j = 0;
    if (whole >= kLanes) {
      std::copy(x, x + kLanes, lane);
      for (j = kLanes; j + kLanes <= whole; j += kLanes)
        for (int l = 0; l < kLanes; ++l)
          lane[l] = x[j + l] > lane[l] ? x[j + l] : lane[l];
      for (int l = 0; l < kLanes; ++l)
        mx = lane[l] > mx || lane[l] != lane[l] ? lane[l] : mx;
    }
    for (; j < whole; ++j)
      mx = x[j] > mx || x[j] != x[j] ? x[j] : mx;
    // A NaN anywhere makes the whole row NaN, as in the double form. The
    // exponentials of the whole row into `row`, then their sum, then the
    // output's part: three loops that vectorize.
    for (int64_t k = 0; k < whole; ++k)
      row[k] = vectorizableExp(static_cast<T>(x[k] - mx));
    double part[kLanes] = {};
    int64_t k = 0;
    for (; k + kLanes <= whole; k += kLanes)
      for (int l = 0; l < kLanes; ++l)
        part[l] += row[k + l];
    for (; k < whole; ++k)
      part[0] += row[k];
    if (y)
      std::copy(row + rows.lo, row + rows.lo + rows.len, y);
    double sum = 0;
    for (int l = 0; l < kLanes; ++l)
      sum += part[l];
    stat[0] = mx;
    acc[0] = sum;
    return;
  }
  std::fill(stat, stat + inner, -std::numeric_limits<double>::infinity());
  std::fill(acc, acc + inner, 0.0);
  for (int64_t j = 0; j < whole; ++j)
    for (int64_t i = 0; i < inner; ++i) {
      double v = static_cast<double>(x[j * inner + i]);
      stat[i] = v > stat[i] || v != v ? v : stat[i];
    }
  for (int64_t j = 0; j < whole; ++j) {
    T *out = y && j >= rows.lo && j < rows.lo + rows.len
                 ? y + (j - rows.lo) * inner
                 : nullptr;
    for (int64_t i = 0; i < inner; ++i) {
      T e = vectorizableExp(static_cast<T>(x[j * inner + i] - static_cast<T>(stat[i])));
      acc[i] += e;
      if (out)
        out[i] = e;
    }
  }
}

template <typename T> std::string softmax(const KernelArgs &args) {
  AxisRows rows;
  if (std::string err = axisRows<T>(args, 1, rows); !err.empty())
    return err;
  const int64_t inner = rows.inner;
  forBlocks<T>(
      rows, args, [&](const T *x, const T *, T *y, double *mx, double *sum, T *row) {
        maxAndSumExp(rows, x, mx, sum, y, row);
        for (int64_t i = 0; i < inner; ++i)
          sum[i] = 1.0 / sum[i];
        if (inner == 1) {
          // Rows along the last dim: one factor in T, a loop that
          // vectorizes (the double product per element was a third of
          // a softmax over rows of 32).
          const T scale = static_cast<T>(sum[0]);
          for (int64_t j = 0; j < rows.len; ++j)
            y[j] *= scale;
          return;
        }
        for (int64_t j = 0; j < rows.len; ++j)
          for (int64_t i = 0; i < inner; ++i)
            y[j * inner + i] = static_cast<T>(y[j * inner + i] * sum[i]);
      });
  return "";
}

template <typename T> std::string logSoftmax(const KernelArgs &args) {
  AxisRows rows;
  if (std::string err = axisRows<T>(args, 1, rows); !err.empty())
    return err;
  const int64_t inner = rows.inner;
  forBlocks<T>(
      rows, args, [&](const T *x, const T *, T *y, double *mx, double *sum, T *row) {
        maxAndSumExp<T>(rows, x, mx, sum, nullptr, row);
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
      rows, args, [&](const T *dy, const T *y, T *dx, double *dot, double *, T *) {
        if (inner == 1) {
          // Contiguous rows: the dot product in eight interleaved lanes so
          // that the loops vectorize.
          constexpr int kLanes = 8;
          double part[kLanes] = {};
          int64_t j = 0;
          for (; j + kLanes <= rows.whole; j += kLanes)
            for (int l = 0; l < kLanes; ++l)
              part[l] += static_cast<double>(dy[j + l]) * y[j + l];
          for (; j < rows.whole; ++j)
            part[0] += static_cast<double>(dy[j]) * y[j];
          double d = 0;
          for (int l = 0; l < kLanes; ++l)
            d += part[l];
          const T *yAt = y + rows.lo, *dyAt = dy + rows.lo;
          for (int64_t k = 0; k < rows.len; ++k)
            dx[k] = static_cast<T>(static_cast<double>(yAt[k]) *
                                   (static_cast<double>(dyAt[k]) - d));
          return;
        }
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
      rows, args, [&](const T *dy, const T *y, T *dx, double *sum, double *, T *) {
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
