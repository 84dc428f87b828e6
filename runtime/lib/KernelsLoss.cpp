//===- KernelsLoss.cpp - Softmax cross-entropy loss and its gradient ------===//
//
// The native kernels of tdl-specs/loss.tdl's SoftmaxCrossEntropyLoss,
// SoftmaxCrossEntropyLossGrad and NegativeLogLikelihoodLoss (the same loss
// with lp = the input; ONNX opset 13 semantics):
//
//   scores [N, C, *D] T, labels [N, *D] i64, weights? [C] T
//   (T = float32 or float64: one template per kernel, FloatKernel.h)
//   w(n, d)  = (label != ignore_index) * (weights ? weights[label] : 1)
//   lp(n, c, d) = log_softmax(scores[n, :, d])[c]
//   output   = "none": -w * lp(label) per sample; "sum": their sum;
//              "mean": their sum / sum of w over ALL samples
//   log_prob = lp (the optional second output, told apart by its rank)
//   dscores  = w * (softmax - [label == c]) * g, g = doutput[n, d] ("none"),
//              doutput ("sum"), doutput / sum of w ("mean").
//
// Every operand is a box of its tensor in global coordinates (ComputeKernel.h)
// and is read there: a device holding some rows computes their partial sum,
// which the compiler's Reduce adds up. Softmax needs whole rows, so a box
// that splits C is an unsupported configuration (the interpreter takes over);
// so is "mean" without the whole labels tensor (its divisor counts every
// sample). A label outside [0, C) that is not ignore_index is an error.
//
// Outputs are told apart by rank: log_prob has the rank of scores, the loss
// one less ("none") or 0.
//
// Float32 scores: each row's exponentials in float32 arithmetic by the
// vectorizable exp (VectorizableMath.h; libm's double exp per class took 11%
// of an LSTM language model's step), summed in double; float64: std::exp.
//
//===----------------------------------------------------------------------===//

#include "FloatKernel.h"
#include "ParallelFor.h"
#include "VectorizableMath.h"
#include "tofu/runtime/Kernels.h"

#include <algorithm>
#include <cmath>
#include <mutex>

using namespace tofu::runtime;
using tofu::plan::DType;

namespace {

/// Row-major offset of global coordinates `g` in view `v`, or -1 when `g`
/// lies outside v's box.
int64_t offsetOf(const TensorView &v, const std::vector<int64_t> &g) {
  int64_t offset = 0;
  for (size_t d = 0; d < v.shape.size(); ++d) {
    int64_t local = g[d] - v.lo[d];
    if (local < 0 || local >= v.shape[d])
      return -1;
    offset = offset * v.shape[d] + local;
  }
  return offset;
}

/// Calls `f(g)` for the global coordinates of every element of box
/// (lo, shape), in row-major order.
template <typename F>
void forEachIndex(const std::vector<int64_t> &lo,
                  const std::vector<int64_t> &shape, F f) {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  if (n == 0)
    return;
  std::vector<int64_t> g = lo;
  for (int64_t e = 0; e < n; ++e) {
    f(g);
    for (size_t d = g.size(); d-- > 0;) {
      if (++g[d] < lo[d] + shape[d])
        break;
      g[d] = lo[d];
    }
  }
}

/// forEachIndex spread over the runtime's threads for per-sample work that
/// writes only its own sample's outputs (`workPerSample`: rough operations
/// per sample, ParallelFor.h): `f(g, i, err)` per index g (row-major
/// position i in the box) within contiguous chunks; a chunk stops at its first error, and the
/// error of the earliest chunk is returned, the one a serial loop would
/// have stopped at.
template <typename F>
std::string forEachIndexParallel(const std::vector<int64_t> &lo,
                                 const std::vector<int64_t> &shape,
                                 double workPerSample, F f) {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  if (n <= 0)
    return "";
  // The error of the chunk that starts first: a chunk stops at its first.
  std::string error;
  int64_t errorChunk = n;
  std::mutex errorMutex;
  parallelFor(n, workPerSample, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> g(lo.size());
    int64_t rest = begin;
    for (size_t d = g.size(); d-- > 0;) {
      g[d] = lo[d] + rest % shape[d];
      rest /= shape[d];
    }
    std::string err;
    for (int64_t e = begin; e < end; ++e) {
      f(g, e, err);
      if (!err.empty()) {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (begin < errorChunk) {
          errorChunk = begin;
          error = std::move(err);
        }
        return;
      }
      for (size_t d = g.size(); d-- > 0;) {
        if (++g[d] < lo[d] + shape[d])
          break;
        g[d] = lo[d];
      }
    }
  });
  return error;
}


/// The sum over the n classes of a contiguous row of e^(x_c - shift), each
/// term also stored in `terms` when given. Float32: the exponentials in
/// float32 arithmetic by the vectorizable exp (VectorizableMath.h, as
/// PyTorch's float32 log_softmax computes them), summed in double in eight
/// lanes, so that the loop vectorizes; float64: std::exp.
template <typename T>
double sumExpShifted(const T *x, int64_t n, double shift, double *terms) {
  // Chunks of exponentials into `buffer` (a loop of its own, which
  // vectorizes), then added in lanes and copied out.
  constexpr int kLanes = 8, kChunk = 256;
  T buffer[kChunk];
  double part[kLanes] = {};
  const T s = static_cast<T>(shift);
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t m = std::min<int64_t>(kChunk, n - c0);
    for (int64_t c = 0; c < m; ++c)
      buffer[c] = vectorizableExp(static_cast<T>(x[c0 + c] - s));
    int64_t c = 0;
    for (; c + kLanes <= m; c += kLanes)
      for (int l = 0; l < kLanes; ++l)
        part[l] += buffer[c + l];
    for (; c < m; ++c)
      part[0] += buffer[c];
    if (terms)
      for (int64_t k = 0; k < m; ++k)
        terms[c0 + k] = buffer[k];
  }
  double sum = 0;
  for (int l = 0; l < kLanes; ++l)
    sum += part[l];
  return sum;
}

/// The operands of a loss kernel and their attributes (element type T).
template <typename T> struct Loss {
  std::string reduction;
  int64_t ignoreIndex = -100;
  const TensorView *scores = nullptr, *labels = nullptr, *weights = nullptr;
  int64_t C = 0;
  /// NegativeLogLikelihoodLoss: `scores` already are log-probabilities
  /// (lp = scores, no softmax).
  bool logProbsGiven = false;

  /// Checks operands and attributes; "" when they are usable.
  std::string init(const KernelArgs &args, size_t first) {
    reduction = args.stringAttr("reduction", "mean");
    if (reduction != "mean" && reduction != "sum" && reduction != "none")
      return "reduction '" + reduction +
             "' is not one of \"mean\", \"sum\", \"none\"";
    ignoreIndex = args.intAttr("ignore_index", -100);
    scores = &args.inputs[first];
    labels = &args.inputs[first + 1];
    if (args.inputs.size() > first + 2 && args.inputs[first + 2].present())
      weights = &args.inputs[first + 2];
    if (!scores->present() || !labels->present())
      return "scores or labels are missing";
    size_t rank = scores->globalShape.size();
    if (scores->dtype != FloatType<T>::dtype || rank < 2)
      return "scores must be a " + floatName<T>() + " tensor [N, C, ...]";
    if (labels->dtype != DType::I64 || labels->globalShape.size() != rank - 1)
      return "labels must be an int64 tensor [N, ...] of rank " +
             std::to_string(rank - 1);
    C = scores->globalShape[1];
    if (scores->shape[1] != C)
      return unsupportedConfiguration(
          "the class dimension is split (local " +
          std::to_string(scores->shape[1]) + " of " + std::to_string(C) +
          " classes); softmax needs whole rows");
    if (weights) {
      if (weights->dtype != FloatType<T>::dtype ||
          weights->globalShape.size() != 1 || weights->globalShape[0] != C)
        return "weights must be a " + floatName<T>() +
               " tensor [C] (C = " + std::to_string(C) + ")";
      // A box of the weights (a share that computes log_prob alone reads
      // none of them) is read at global class indices (sample()).
    }
    return "";
  }

  /// The label at sample `s` (global [n, *d]) and its weight w; sets `err`
  /// when the label is not readable or out of range.
  bool sample(const std::vector<int64_t> &s, int64_t &label, double &w,
              std::string &err) const {
    int64_t at = offsetOf(*labels, s);
    if (at < 0) {
      err = unsupportedConfiguration(
          "the labels box does not hold the samples of the scores box");
      return false;
    }
    label = labels->i64()[at];
    if (label == ignoreIndex) {
      w = 0;
      return true;
    }
    if (label < 0 || label >= C) {
      err = "label " + std::to_string(label) + " of sample " +
            std::to_string(s[0]) + " is outside [0, " + std::to_string(C) +
            ") and is not ignore_index (" + std::to_string(ignoreIndex) + ")";
      return false;
    }
    w = 1.0;
    if (weights) {
      const int64_t at = label - weights->lo[0];
      if (at < 0 || at >= weights->shape[0]) {
        err = unsupportedConfiguration("the class weights box lacks class " +
                                       std::to_string(label));
        return false;
      }
      w = elements<T>(*weights)[at];
    }
    return true;
  }

  /// The divisor of "mean": the sum of w over every sample (needs the whole
  /// labels tensor).
  std::string meanDivisor(double &total) const {
    if (labels->shape != labels->globalShape)
      return unsupportedConfiguration(
          "reduction \"mean\" needs the whole labels tensor");
    total = 0;
    std::string err;
    forEachIndex(labels->lo, labels->shape, [&](const std::vector<int64_t> &s) {
      int64_t label;
      double w;
      if (err.empty() && sample(s, label, w, err))
        total += w;
    });
    return err;
  }

  /// The softmax of the row of scores at sample `s` as exp(x_c - max) in
  /// `e` (C entries) and their sum. One
  /// exp per class: the gradient's p_c = e_c / sum (exp(x_c - lse) would
  /// be a second exp per class). `row` and `stride` as rowOf.
  bool softmaxRow(const std::vector<int64_t> &s, const T *&row,
                  int64_t &stride, double *e, double &sum) const {
    if (!rowOf(s, row, stride))
      return false;
    double mx = row[0];
    for (int64_t c = 1; c < C; ++c)
      mx = std::max(mx, static_cast<double>(row[c * stride]));
    if (stride == 1) {
      sum = sumExpShifted(row, C, mx, e);
      return true;
    }
    sum = 0;
    for (int64_t c = 0; c < C; ++c) {
      e[c] = vectorizableExp(static_cast<T>(row[c * stride] - static_cast<T>(mx)));
      sum += e[c];
    }
    return true;
  }

  /// The row of scores at sample `s`: `row` receives the address of
  /// scores[s[0], 0, s[1:]] and `stride` the distance between classes;
  /// false when the scores box lacks the row.
  bool rowOf(const std::vector<int64_t> &s, const T *&row,
             int64_t &stride) const {
    std::vector<int64_t> g(s.size() + 1);
    g[0] = s[0];
    g[1] = 0;
    for (size_t d = 1; d < s.size(); ++d)
      g[d + 1] = s[d];
    int64_t at = offsetOf(*scores, g);
    if (at < 0)
      return false;
    stride = 1;
    for (size_t d = 2; d < scores->shape.size(); ++d)
      stride *= scores->shape[d];
    row = elements<T>(*scores) + at;
    return true;
  }

  /// log(sum(exp(row))) of the row of scores at sample `s` (rowOf's `row`
  /// and `stride`); false when the scores box lacks the row.
  bool logSumExp(const std::vector<int64_t> &s, const T *&row, int64_t &stride,
                 double &lse) const {
    if (!rowOf(s, row, stride))
      return false;
    if (logProbsGiven) {
      lse = 0;
      return true;
    }
    double mx = row[0];
    for (int64_t c = 1; c < C; ++c)
      mx = std::max(mx, static_cast<double>(row[c * stride]));
    double sum = 0;
    if (stride == 1)
      sum = sumExpShifted(row, C, mx, nullptr);
    else
      for (int64_t c = 0; c < C; ++c)
        sum += vectorizableExp(
            static_cast<T>(row[c * stride] - static_cast<T>(mx)));
    lse = std::log(sum) + mx;
    return true;
  }

  /// The samples [N, *D] covered by the scores box.
  void scoresSamples(std::vector<int64_t> &lo,
                     std::vector<int64_t> &shape) const {
    lo = scores->lo;
    shape = scores->shape;
    lo.erase(lo.begin() + 1);
    shape.erase(shape.begin() + 1);
  }
};

const char kRowsMissing[] =
    "the scores box does not hold the rows of the output box";

/// log_prob over `out`'s box.
template <typename T>
std::string logProb(const Loss<T> &loss, const TensorView &out) {
  if (out.dtype != FloatType<T>::dtype)
    return "log_prob must be " + floatName<T>();
  std::vector<int64_t> lo = out.lo, shape = out.shape;
  int64_t c0 = lo[1], cn = shape[1];
  lo.erase(lo.begin() + 1);
  shape.erase(shape.begin() + 1);
  int64_t outStride = 1;
  for (size_t d = 2; d < out.shape.size(); ++d)
    outStride *= out.shape[d];
  // Each sample writes its own row: the samples run on the pool.
  return forEachIndexParallel(lo, shape, 20.0 * double(loss.C), [&](
      const std::vector<int64_t> &s, int64_t, std::string &err) {
    const T *row;
    int64_t stride;
    double lse;
    if (!loss.logSumExp(s, row, stride, lse)) {
      err = unsupportedConfiguration(kRowsMissing);
      return;
    }
    std::vector<int64_t> g(s.size() + 1);
    g[0] = s[0];
    g[1] = c0;
    for (size_t d = 1; d < s.size(); ++d)
      g[d + 1] = s[d];
    T *dst = elements<T>(out) + offsetOf(out, g);
    for (int64_t c = c0; c < c0 + cn; ++c)
      dst[(c - c0) * outStride] = static_cast<T>(row[c * stride] - lse);
  });
}

/// The loss output over `out`'s box ("none") or the partial sum over the
/// scores box ("sum", "mean").
template <typename T>
std::string lossValue(const Loss<T> &loss, const TensorView &out) {
  if (out.dtype != FloatType<T>::dtype)
    return "the loss must be " + floatName<T>();
  auto term = [&](const std::vector<int64_t> &s, double &value,
                  std::string &err) {
    int64_t label;
    double w, lse;
    const T *row;
    int64_t stride;
    if (!loss.sample(s, label, w, err))
      return false;
    if (w == 0) {
      value = 0;
      return true;
    }
    if (!loss.logSumExp(s, row, stride, lse)) {
      err = unsupportedConfiguration(kRowsMissing);
      return false;
    }
    value = -w * (row[label * stride] - lse);
    return true;
  };
  // Each sample's term (a log-sum-exp over the classes) is computed on the
  // runtime's threads; a sum adds them afterwards in the serial order, so
  // the loss does not depend on the thread count.
  const double workPerSample = 20.0 * double(loss.C);
  if (loss.reduction == "none") {
    if (out.globalShape != loss.labels->globalShape)
      return "the output of reduction \"none\" must have the shape of labels";
    T *dst = elements<T>(out);
    return forEachIndexParallel(
        out.lo, out.shape, workPerSample,
        [&](const std::vector<int64_t> &s, int64_t i, std::string &e) {
          double value = 0;
          if (term(s, value, e))
            dst[i] = static_cast<T>(value);
        });
  }
  if (out.numElements() != 1)
    return "the loss of reduction \"" + loss.reduction + "\" is a scalar";
  double divisor = 1;
  if (loss.reduction == "mean")
    if (std::string e = loss.meanDivisor(divisor); !e.empty())
      return e;
  std::vector<int64_t> lo, shape;
  loss.scoresSamples(lo, shape);
  int64_t samples = 1;
  for (int64_t e : shape)
    samples *= e;
  // This thread's scratch, reached by the pool's threads through `values`
  // (a thread_local named in the lambda would be the worker's own).
  thread_local std::vector<double> terms;
  terms.assign(size_t(std::max<int64_t>(samples, 0)), 0.0);
  double *const values = terms.data();
  if (std::string e = forEachIndexParallel(
          lo, shape, workPerSample,
          [&](const std::vector<int64_t> &s, int64_t i, std::string &e) {
            term(s, values[i], e);
          });
      !e.empty())
    return e;
  double total = 0;
  for (double v : terms)
    total += v;
  elements<T>(out)[0] = static_cast<T>(total / divisor);
  return "";
}

/// NegativeLogLikelihoodLoss: the loss of SoftmaxCrossEntropyLoss with the
/// input taken as the log-probabilities.
template <typename T>
std::string negativeLogLikelihoodLoss(const KernelArgs &args) {
  if (args.inputs.size() < 2 || args.inputs.size() > 3 ||
      args.outputs.size() != 1)
    return "expects inputs (input, target[, weight]) and one output (loss)";
  Loss<T> loss;
  loss.logProbsGiven = true;
  if (std::string err = loss.init(args, 0); !err.empty())
    return err;
  return lossValue(loss, args.outputs[0]);
}

template <typename T>
std::string softmaxCrossEntropyLoss(const KernelArgs &args) {
  if (args.inputs.size() < 2 || args.inputs.size() > 3 ||
      args.outputs.empty() || args.outputs.size() > 2)
    return "expects inputs (scores, labels[, weights]) and outputs "
           "(output[, log_prob])";
  Loss<T> loss;
  if (std::string err = loss.init(args, 0); !err.empty())
    return err;
  for (const TensorView &out : args.outputs) {
    bool isLogProb = out.globalShape.size() == loss.scores->globalShape.size();
    std::string err = isLogProb ? logProb(loss, out) : lossValue(loss, out);
    if (!err.empty())
      return err;
  }
  return "";
}

template <typename T>
std::string softmaxCrossEntropyLossGrad(const KernelArgs &args) {
  if (args.inputs.size() < 3 || args.inputs.size() > 4 ||
      args.outputs.size() != 1)
    return "expects inputs (doutput, scores, labels[, weights]) and 1 output";
  const TensorView &dout = args.inputs[0], &dscores = args.outputs[0];
  Loss<T> loss;
  if (std::string err = loss.init(args, 1); !err.empty())
    return err;
  if (!isFloat<T>(dout))
    return "doutput must be " + floatName<T>();
  if (dscores.dtype != FloatType<T>::dtype ||
      dscores.globalShape != loss.scores->globalShape)
    return "dscores must be " + floatName<T>() + " with the shape of scores";
  double scale = 1;
  if (loss.reduction != "none") {
    if (dout.numElements() != 1)
      return "doutput of reduction \"" + loss.reduction + "\" is a scalar";
    scale = elements<T>(dout)[0];
    if (loss.reduction == "mean") {
      double divisor;
      if (std::string e = loss.meanDivisor(divisor); !e.empty())
        return e;
      scale /= divisor;
    }
  }
  std::vector<int64_t> lo = dscores.lo, shape = dscores.shape;
  int64_t c0 = lo[1], cn = shape[1];
  lo.erase(lo.begin() + 1);
  shape.erase(shape.begin() + 1);
  int64_t outStride = 1;
  for (size_t d = 2; d < dscores.shape.size(); ++d)
    outStride *= dscores.shape[d];
  // Each sample writes its own row of dscores: the samples run on the
  // runtime's threads (two exp per class: the step's costliest op in a
  // language model with a large vocabulary).
  return forEachIndexParallel(lo, shape, 40.0 * double(cn), [&](
      const std::vector<int64_t> &s, int64_t, std::string &err) {
    std::vector<int64_t> g(s.size() + 1);
    g[0] = s[0];
    g[1] = c0;
    for (size_t d = 1; d < s.size(); ++d)
      g[d + 1] = s[d];
    T *dst = elements<T>(dscores) + offsetOf(dscores, g);
    int64_t label;
    double w;
    if (!loss.sample(s, label, w, err))
      return;
    double gs = scale;
    if (loss.reduction == "none") {
      int64_t at = offsetOf(dout, s);
      if (at < 0) {
        err = unsupportedConfiguration(
            "the doutput box does not hold the samples of the output box");
        return;
      }
      gs = elements<T>(dout)[at];
    }
    if (w == 0) {
      for (int64_t c = 0; c < cn; ++c)
        dst[c * outStride] = T(0);
      return;
    }
    const T *row;
    int64_t stride;
    double sum;
    thread_local std::vector<double> e;
    if (e.size() < size_t(loss.C))
      e.resize(size_t(loss.C));
    if (!loss.softmaxRow(s, row, stride, e.data(), sum)) {
      err = unsupportedConfiguration(kRowsMissing);
      return;
    }
    for (int64_t c = c0; c < c0 + cn; ++c) {
      double p = e[size_t(c)] / sum;
      dst[(c - c0) * outStride] =
          static_cast<T>(w * gs * (p - (c == label ? 1.0 : 0.0)));
    }
  });
}

} // namespace

void tofu::runtime::registerLossKernels(void (*addKernel)(const char *,
                                                          KernelFn)) {
  addKernel("SoftmaxCrossEntropyLoss",
            byFloatType<softmaxCrossEntropyLoss<float>,
                        softmaxCrossEntropyLoss<double>>);
  addKernel("NegativeLogLikelihoodLoss",
            byFloatType<negativeLogLikelihoodLoss<float>,
                        negativeLogLikelihoodLoss<double>>);
  addKernel("SoftmaxCrossEntropyLossGrad",
            byFloatType<softmaxCrossEntropyLossGrad<float>,
                        softmaxCrossEntropyLossGrad<double>>);
}
