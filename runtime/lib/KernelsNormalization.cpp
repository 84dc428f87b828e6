//===- KernelsNormalization.cpp - Batch and layer normalization -----------===//
//
// Native kernels of tdl-specs/norm.tdl (float32 or float64: one template
// per kernel, FloatKernel.h; statistics in double):
//   BatchNormalization(X [N, C, *S], scale, B, input_mean, input_var [C])
//       -> Y, running_mean, running_var   (training_mode 0 or 1)
//   BatchNormalizationNormalized(X, input_mean, input_var) -> Xhat
//   BatchNormalizationGrad(dY, X, scale, input_mean, input_var) -> dX
//   LayerNormalization(X, Scale, B?) -> Y, Mean, InvStdDev
//   LayerNormalizationGrad(dY, X, Scale, Mean, InvStdDev) -> dX
// and of tdl-specs/lrn.tdl, local response normalization across channels
// (AlexNet's, GoogLeNet's; the interpreter took 75-85% of AlexNet's step):
//   LRN(X [N, C, *S]) -> Y,  LRNGrad(dY, X) -> dX
// on any split of N, C and the spatial dims whose inputs hold the windows'
// channel halos.
// with the formulas of the specs (biased variance; training-mode batch
// statistics over N and the spatial dims per channel; layer statistics over
// the dims from `axis` on).
//
// The interpreter recomputes a channel's (or a row's) statistics for every
// output element, which is quadratic in the batch (row) size; these kernels
// compute them once per channel (row), threaded over channels (rows).
//
// The compiler materializes each output of a multi-output op as its own
// instruction with one output buffer, and names it with the Int attribute
// "tofu.output" (its index). BatchNormalization computes Y or either running
// statistic from that (a running statistic reads the channel's whole batch
// in training mode, so the interpreter would be far slower). Without the
// attribute (older plans), a lone statistic is declined as an unsupported
// configuration and the interpreter computes it; LayerNormalization computes
// a lone Mean or InvStdDev from the attribute too. Boxes are read at global coordinates; a box
// that lacks what a statistic needs (e.g. not the channel's whole batch) is
// declined the same way.
//
//===----------------------------------------------------------------------===//

#include "FloatKernel.h"
#include "InlineVector.h"
#include "ParallelFor.h"
#include "tofu/runtime/Kernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <tuple>
#include <vector>

using namespace tofu::runtime;
using tofu::plan::DType;

namespace {

/// Strides of a view's local box (row-major).
std::vector<int64_t> stridesOf(const TensorView &v) {
  std::vector<int64_t> s(v.shape.size(), 1);
  for (size_t d = v.shape.size(); d-- > 1;)
    s[d - 1] = s[d] * v.shape[d];
  return s;
}

/// True when `v` holds the whole extent of dims [from, to).
bool wholeDims(const TensorView &v, size_t from, size_t to) {
  for (size_t d = from; d < to; ++d)
    if (v.lo[d] != 0 || v.shape[d] != v.globalShape[d])
      return false;
  return true;
}

/// True when `v` holds global index `g` of dim `d`.
bool holds(const TensorView &v, size_t d, int64_t g) {
  return g >= v.lo[d] && g < v.lo[d] + v.shape[d];
}

//===----------------------------------------------------------------------===//
// BatchNormalization
//===----------------------------------------------------------------------===//

/// The per-channel parameters [C] of a BatchNormalization kernel, read at
/// global channel indices.
template <typename T> struct ChannelParam {
  const TensorView *view = nullptr;
  double at(int64_t c) const { return elements<T>(*view)[c - view->lo[0]]; }
};

/// Geometry shared by the BatchNormalization kernels: output box `out` of a
/// tensor [N, C, *S]; every [N, C, *S] input must hold the box (training:
/// the channel's whole batch), every [C] input the box's channels.
template <typename T> struct BatchNorm {
  bool training = false;
  double epsilon = 1e-5, momentum = 0.9;
  int64_t N = 0, count = 0; ///< count = N * prod(S) (global)

  std::string init(const KernelArgs &args, const TensorView &x) {
    training = args.intAttr("training_mode", 0) != 0;
    epsilon = args.floatAttr("epsilon", 1e-5);
    momentum = args.floatAttr("momentum", 0.9);
    if (!isFloat<T>(x) || x.globalShape.size() < 2)
      return "X must be a " + floatName<T>() + " tensor [N, C, ...]";
    N = x.globalShape[0];
    count = 1;
    for (size_t d = 0; d < x.globalShape.size(); ++d)
      if (d != 1)
        count *= x.globalShape[d];
    return "";
  }

  /// Checks that [N, C, *S] view `v` can serve output box `out`.
  std::string covers(const TensorView &v, const TensorView &out,
                     bool wholeBatch, const char *what) const {
    if (!isFloat<T>(v) || v.globalShape != out.globalShape)
      return std::string(what) + " must be " + floatName<T>() +
             " with X's shape";
    for (size_t d = 0; d < out.shape.size(); ++d) {
      bool ok = wholeBatch && d != 1
                    ? v.lo[d] == 0 && v.shape[d] == v.globalShape[d]
                    : v.lo[d] <= out.lo[d] &&
                          v.lo[d] + v.shape[d] >= out.lo[d] + out.shape[d];
      if (!ok)
        return unsupportedConfiguration(
            std::string(what) + " does not hold " +
            (wholeBatch ? "the whole batch of the output's channels"
                        : "the output box"));
    }
    return "";
  }

  /// Checks that [C] view `v` holds channels [c0, c0 + n) of the C
  /// channels and binds `p` to it.
  std::string param(const TensorView &v, int64_t C, int64_t c0, int64_t n,
                    const char *what, ChannelParam<T> &p) const {
    if (!isFloat<T>(v) || v.globalShape.size() != 1 || v.globalShape[0] != C)
      return std::string(what) + " must be a " + floatName<T>() + " tensor [C]";
    if (!holds(v, 0, c0) || (n > 0 && !holds(v, 0, c0 + n - 1)))
      return unsupportedConfiguration(std::string(what) +
                                      " does not hold the output's channels");
    p.view = &v;
    return "";
  }
  /// param for the channels of [N, C, *S] box `out`.
  std::string param(const TensorView &v, const TensorView &out,
                    const char *what, ChannelParam<T> &p) const {
    return param(v, out.globalShape[1], out.lo[1], out.shape[1], what, p);
  }

  /// Calls f(run, len) for the runs of channel c of view `v` (which holds
  /// the channel's whole batch): one contiguous run of len elements per
  /// image.
  template <typename F>
  static void forChannel(const TensorView &v, int64_t c, F f) {
    int64_t inner = 1;
    for (size_t d = 2; d < v.shape.size(); ++d)
      inner *= v.shape[d];
    int64_t localC = c - v.lo[1];
    const T *p = elements<T>(v);
    for (int64_t n = 0; n < v.shape[0]; ++n)
      f(p + (n * v.shape[1] + localC) * inner, inner);
  }

  /// Batch mean and biased variance of channel c of `x` (whole batch), in
  /// double, two passes (four partial sums each, so that the additions
  /// pipeline).
  void stats(const TensorView &x, int64_t c, double &mean, double &var) const {
    double s[4] = {0, 0, 0, 0};
    forChannel(x, c, [&](const T *p, int64_t len) {
      int64_t i = 0;
      for (; i + 4 <= len; i += 4)
        for (int k = 0; k < 4; ++k)
          s[k] += p[i + k];
      for (; i < len; ++i)
        s[0] += p[i];
    });
    mean = (s[0] + s[1] + s[2] + s[3]) / static_cast<double>(count);
    double q[4] = {0, 0, 0, 0};
    const double mu = mean;
    forChannel(x, c, [&](const T *p, int64_t len) {
      int64_t i = 0;
      for (; i + 4 <= len; i += 4)
        for (int k = 0; k < 4; ++k) {
          double d = p[i + k] - mu;
          q[k] += d * d;
        }
      for (; i < len; ++i) {
        double d = p[i] - mu;
        q[0] += d * d;
      }
    });
    var = (q[0] + q[1] + q[2] + q[3]) / static_cast<double>(count);
  }
};

/// Calls f(outOffset, offsets, len) for the elements of `out`'s box with
/// channel c, in runs of len elements that are consecutive in `out` and in
/// every view (offsets[k] into views[k]'s local box, which holds the run):
/// a run covers the trailing dims where every view's box has out's extents
/// (whole planes when the boxes agree), the others are iterated.
template <size_t K, typename F>
void forOutputChannel(const TensorView &out, int64_t c,
                      const std::array<const TensorView *, K> &views, F f) {
  // Called once per channel (thousands of times per kernel on small
  // images): the strides and the position live inline, not on the heap.
  using Dims = InlineVector<int64_t, 8>;
  auto stridesInline = [](const TensorView &v) {
    Dims s(v.shape.size(), 1);
    for (size_t d = v.shape.size(); d-- > 1;)
      s[d - 1] = s[d] * v.shape[d];
    return s;
  };
  const size_t rank = out.shape.size();
  // The run: dims [j, rank). Dim j may start anywhere in a view, the dims
  // after it must match out's extents in every view.
  size_t j = rank > 2 ? rank - 1 : rank;
  while (j > 2) {
    bool same = true;
    for (const TensorView *v : views)
      same &= v->shape[j] == out.shape[j];
    if (!same)
      break;
    --j;
  }
  int64_t len = 1;
  for (size_t d = j; d < rank; ++d)
    len *= out.shape[d];
  if (j == 2) {
    // One run per image: out's plane of (n, c), which starts in a view's
    // plane of (n, c) at out's first index of dim 2 (the dims after it
    // have out's extents in every view).
    std::array<int64_t, K> plane, start;
    for (size_t k = 0; k < K; ++k) {
      const TensorView &v = *views[k];
      plane[k] = 1;
      for (size_t d = 2; d < rank; ++d)
        plane[k] *= v.shape[d];
      start[k] = rank > 2 ? (out.lo[2] - v.lo[2]) * (len / std::max<int64_t>(
                                                           out.shape[2], 1))
                          : 0;
    }
    std::array<int64_t, K> offs;
    for (int64_t n = out.lo[0]; n < out.lo[0] + out.shape[0]; ++n) {
      for (size_t k = 0; k < K; ++k)
        offs[k] = ((n - views[k]->lo[0]) * views[k]->shape[1] +
                   (c - views[k]->lo[1])) *
                      plane[k] +
                  start[k];
      f(((n - out.lo[0]) * out.shape[1] + (c - out.lo[1])) * len, offs, len);
    }
    return;
  }
  std::array<Dims, K> strides;
  for (size_t k = 0; k < K; ++k)
    strides[k] = stridesInline(*views[k]);
  const Dims outStrides = stridesInline(out);
  Dims g(out.lo.begin(), out.lo.end());
  g[1] = c;
  std::array<int64_t, K> offs;
  int64_t total = out.shape[0];
  for (size_t d = 2; d < j; ++d)
    total *= out.shape[d];
  for (int64_t e = 0; e < total; ++e) {
    int64_t o = 0;
    for (size_t d = 0; d < rank; ++d)
      o += (g[d] - out.lo[d]) * outStrides[d];
    for (size_t k = 0; k < K; ++k) {
      int64_t off = 0;
      for (size_t d = 0; d < rank; ++d)
        off += (g[d] - views[k]->lo[d]) * strides[k][d];
      offs[k] = off;
    }
    f(o, offs, len);
    for (size_t d = j; d-- > 0;) {
      if (d == 1)
        continue;
      if (++g[d] < out.lo[d] + out.shape[d])
        break;
      g[d] = out.lo[d];
    }
  }
}

template <typename T> std::string batchNormalization(const KernelArgs &args) {
  if (args.inputs.size() != 5 || (args.outputs.size() != 1 &&
                                  args.outputs.size() != 3))
    return "expects inputs (X, scale, B, input_mean, input_var) and outputs "
           "(Y[, running_mean, running_var])";
  const TensorView &x = args.inputs[0];
  BatchNorm<T> bn;
  if (std::string err = bn.init(args, x); !err.empty())
    return err;
  // One instruction computes all three outputs, or (the op's outputs
  // materialized apart) the one named by the plan's "tofu.output". Without
  // that attribute (a plan from before it) a lone output of X's shape is Y,
  // and a lone statistic is left to the interpreter.
  int64_t only = -1;
  if (args.outputs.size() == 1) {
    if (args.hasAttr("tofu.output"))
      only = args.intAttr("tofu.output", 0);
    else if (args.outputs[0].globalShape == x.globalShape)
      only = 0;
    else
      return unsupportedConfiguration(
          "a lone running statistic output without its index (the "
          "interpreter computes it)");
  }
  if (only > 2)
    return "tofu.output " + std::to_string(only) +
           " names no output of BatchNormalization (0 Y, 1 running_mean, "
           "2 running_var)";
  const TensorView *y = only <= 0 ? &args.outputs[0] : nullptr;
  const TensorView *rm = only == -1 ? &args.outputs[1]
                         : only == 1 ? &args.outputs[0]
                                     : nullptr;
  const TensorView *rv = only == -1 ? &args.outputs[2]
                         : only == 2 ? &args.outputs[0]
                                     : nullptr;
  // The channels computed: Y's box on dim 1, or a running statistic's box.
  int64_t c0, numChannels;
  if (y) {
    if (y->globalShape != x.globalShape)
      return "Y must have X's shape";
    if (std::string err = bn.covers(x, *y, bn.training, "X"); !err.empty())
      return err;
    c0 = y->lo[1];
    numChannels = y->shape[1];
  } else {
    const TensorView &stat = rm ? *rm : *rv;
    if (!isFloat<T>(stat) || stat.globalShape.size() != 1 ||
        stat.globalShape[0] != x.globalShape[1])
      return "a running statistic must be a " + floatName<T>() +
             " tensor [C]";
    c0 = stat.lo[0];
    numChannels = stat.shape[0];
    // Training-mode statistics need the whole batch of their channels.
    for (size_t d = 0; bn.training && d < x.shape.size(); ++d) {
      bool ok = d == 1 ? x.lo[1] <= c0 && x.lo[1] + x.shape[1] >= c0 + numChannels
                       : x.lo[d] == 0 && x.shape[d] == x.globalShape[d];
      if (!ok)
        return unsupportedConfiguration(
            "X does not hold the whole batch of the statistic's channels");
    }
  }
  // Y reads scale and B, and input_mean / input_var only in inference mode;
  // each running statistic reads its own input statistic. So a training-mode
  // share of Y may come without the statistics.
  const bool inferenceY = y && !bn.training;
  ChannelParam<T> scale, bias, mean, var;
  for (auto [i, p, what, needed] :
       {std::tuple{1, &scale, "scale", y != nullptr},
        std::tuple{2, &bias, "B", y != nullptr},
        std::tuple{3, &mean, "input_mean", inferenceY || rm},
        std::tuple{4, &var, "input_var", inferenceY || rv}})
    if (needed)
      if (std::string err = bn.param(args.inputs[i], x.globalShape[1], c0,
                                     numChannels, what, *p);
          !err.empty())
        return err;
  for (const TensorView *stat : {rm, rv})
    if (stat && (stat->lo[0] != c0 || stat->shape[0] != numChannels))
      return unsupportedConfiguration(
          "the running statistics' box differs from Y's channels");
  const T *xp = elements<T>(x);
  parallelFor(numChannels, 3.0 * static_cast<double>(bn.count),
              [&](int64_t begin, int64_t end) {
                for (int64_t lc = begin; lc < end; ++lc) {
                  int64_t c = c0 + lc;
                  double mu = 0, v = 0;
                  if (bn.training)
                    bn.stats(x, c, mu, v);
                  else if (y)
                    mu = mean.at(c), v = var.at(c);
                  if (y) {
                    double a = scale.at(c) / std::sqrt(v + bn.epsilon);
                    double b = bias.at(c) - a * mu;
                    T *yp = elements<T>(*y);
                    forOutputChannel<1>(
                        *y, c, {&x},
                        [&](int64_t o, const std::array<int64_t, 1> &i,
                            int64_t len) {
                          T *yr = yp + o;
                          const T *xr = xp + i[0];
                          for (int64_t e = 0; e < len; ++e)
                            yr[e] = static_cast<T>(a * xr[e] + b);
                        });
                  }
                  if (rm)
                    elements<T>(*rm)[lc] =
                        static_cast<T>(bn.training ? mean.at(c) * bn.momentum +
                                                         (1 - bn.momentum) * mu
                                                   : mean.at(c));
                  if (rv)
                    elements<T>(*rv)[lc] =
                        static_cast<T>(bn.training ? var.at(c) * bn.momentum +
                                                         (1 - bn.momentum) * v
                                                   : var.at(c));
                }
              });
  return "";
}

template <typename T>
std::string batchNormalizationNormalized(const KernelArgs &args) {
  if (args.inputs.size() != 3 || args.outputs.size() != 1)
    return "expects inputs (X, input_mean, input_var) and 1 output";
  const TensorView &x = args.inputs[0], &out = args.outputs[0];
  BatchNorm<T> bn;
  if (std::string err = bn.init(args, x); !err.empty())
    return err;
  if (!isFloat<T>(out) || out.globalShape != x.globalShape)
    return "Xhat must be " + floatName<T>() + " with X's shape";
  if (std::string err = bn.covers(x, out, bn.training, "X"); !err.empty())
    return err;
  ChannelParam<T> mean, var; // read in inference mode only
  if (!bn.training) {
    if (std::string err = bn.param(args.inputs[1], out, "input_mean", mean);
        !err.empty())
      return err;
    if (std::string err = bn.param(args.inputs[2], out, "input_var", var);
        !err.empty())
      return err;
  }
  const T *xp = elements<T>(x);
  T *op = elements<T>(out);
  parallelFor(out.shape[1], 3.0 * static_cast<double>(bn.count),
              [&](int64_t begin, int64_t end) {
                for (int64_t lc = begin; lc < end; ++lc) {
                  int64_t c = out.lo[1] + lc;
                  double mu, v;
                  if (bn.training)
                    bn.stats(x, c, mu, v);
                  else
                    mu = mean.at(c), v = var.at(c);
                  double r = 1 / std::sqrt(v + bn.epsilon);
                  forOutputChannel<1>(
                      out, c, {&x},
                      [&](int64_t o, const std::array<int64_t, 1> &i,
                          int64_t len) {
                        T *orow = op + o;
                        const T *xr = xp + i[0];
                        for (int64_t e = 0; e < len; ++e)
                          orow[e] = static_cast<T>((xr[e] - mu) * r);
                      });
                }
              });
  return "";
}

template <typename T>
std::string batchNormalizationGrad(const KernelArgs &args) {
  if (args.inputs.size() != 5 || args.outputs.size() != 1)
    return "expects inputs (dY, X, scale, input_mean, input_var) and 1 output";
  const TensorView &dy = args.inputs[0], &x = args.inputs[1],
                   &dx = args.outputs[0];
  BatchNorm<T> bn;
  if (std::string err = bn.init(args, x); !err.empty())
    return err;
  if (!isFloat<T>(dx) || dx.globalShape != x.globalShape)
    return "dX must be " + floatName<T>() + " with X's shape";
  // Training reads X and dY over the channel's whole batch; inference reads
  // dY at the element and input_var, not X.
  if (bn.training)
    if (std::string err = bn.covers(x, dx, true, "X"); !err.empty())
      return err;
  if (std::string err = bn.covers(dy, dx, bn.training, "dY"); !err.empty())
    return err;
  ChannelParam<T> scale, var;
  if (std::string err = bn.param(args.inputs[2], dx, "scale", scale);
      !err.empty())
    return err;
  if (!bn.training)
    if (std::string err = bn.param(args.inputs[4], dx, "input_var", var);
        !err.empty())
      return err;
  const T *xp = elements<T>(x), *dyp = elements<T>(dy);
  T *dxp = elements<T>(dx);
  parallelFor(dx.shape[1], 5.0 * static_cast<double>(bn.count),
              [&](int64_t begin, int64_t end) {
                for (int64_t lc = begin; lc < end; ++lc) {
                  int64_t c = dx.lo[1] + lc;
                  if (!bn.training) {
                    double a = scale.at(c) / std::sqrt(var.at(c) + bn.epsilon);
                    forOutputChannel<1>(
                        dx, c, {&dy},
                        [&](int64_t o, const std::array<int64_t, 1> &i,
                            int64_t len) {
                          for (int64_t e = 0; e < len; ++e)
                            dxp[o + e] = static_cast<T>(dyp[i[0] + e] * a);
                        });
                    continue;
                  }
                  double mu, v;
                  bn.stats(x, c, mu, v);
                  double r = 1 / std::sqrt(v + bn.epsilon);
                  // Sums over the batch: dY and dY * xhat (aligned views).
                  double sumDy = 0, sumDyXhat = 0;
                  // x and dy both hold the whole batch of c: walk them
                  // together in the same row-major order.
                  {
                    int64_t inner = 1;
                    for (size_t d = 2; d < x.shape.size(); ++d)
                      inner *= x.shape[d];
                    for (int64_t n = 0; n < x.shape[0]; ++n) {
                      const T *xr =
                          xp + (n * x.shape[1] + (c - x.lo[1])) * inner;
                      const T *dr =
                          dyp + (n * dy.shape[1] + (c - dy.lo[1])) * inner;
                      for (int64_t s = 0; s < inner; ++s) {
                        sumDy += dr[s];
                        sumDyXhat += dr[s] * (xr[s] - mu) * r;
                      }
                    }
                  }
                  double cnt = static_cast<double>(bn.count);
                  double meanDy = sumDy / cnt, meanDyXhat = sumDyXhat / cnt;
                  double a = scale.at(c) * r;
                  forOutputChannel<2>(
                      dx, c, {&dy, &x},
                      [&](int64_t o, const std::array<int64_t, 2> &i,
                          int64_t len) {
                        T *dr = dxp + o;
                        const T *gr = dyp + i[0], *xr = xp + i[1];
                        for (int64_t e = 0; e < len; ++e) {
                          double xhat = (xr[e] - mu) * r;
                          dr[e] = static_cast<T>(
                              a * (gr[e] - meanDy - xhat * meanDyXhat));
                        }
                      });
                }
              });
  return "";
}

//===----------------------------------------------------------------------===//
// LayerNormalization
//===----------------------------------------------------------------------===//

/// Rows of a LayerNormalization: X's dims [0, a) are the rows, [a, rank) the
/// normalized block of M elements. The output box is any box: its rows (its
/// box over the leading dims) and a part of each row's block (a split of a
/// normalized dim). Every statistic reads whole blocks: the X-shaped
/// operands hold the output's rows (or more) and whole blocks; Mean and
/// InvStdDev (extent 1 in the normalized dims) hold the rows; Scale and B
/// are exactly the normalized dims (not broadcast inside them) and hold the
/// part of the block the output box covers (the gradient: all of it).
template <typename T> struct LayerNorm {
  size_t axis = 0;
  int64_t M = 1;
  double epsilon = 1e-5;

  /// Where the output box lies in the blocks: per element of the output's
  /// part of a block (row-major), its index in the whole block.
  struct BlockPart {
    int64_t n = 0;                 ///< elements of the part
    bool whole = false;            ///< the whole block: blockIndex[e] == e
    std::vector<int64_t> blockIndex;
  };

  std::string init(const KernelArgs &args, const TensorView &x) {
    int64_t rank = static_cast<int64_t>(x.globalShape.size());
    if (!isFloat<T>(x) || rank < 1)
      return "X must be a " + floatName<T>() + " tensor of rank >= 1";
    int64_t a = args.intAttr("axis", -1);
    if (a < -rank || a >= rank)
      return "axis " + std::to_string(a) + " is out of range for rank " +
             std::to_string(rank);
    axis = static_cast<size_t>(a < 0 ? a + rank : a);
    epsilon = args.floatAttr("epsilon", 1e-5);
    M = 1;
    for (size_t d = axis; d < x.globalShape.size(); ++d)
      M *= x.globalShape[d];
    return "";
  }

  /// The rows of `out` (its leading box, row-major).
  int64_t rowsOf(const TensorView &out) const {
    int64_t rows = 1;
    for (size_t d = 0; d < axis; ++d)
      rows *= out.shape[d];
    return rows;
  }

  /// The part of a block that `out`'s box covers (`blockShape`: the global
  /// extents of the normalized dims).
  BlockPart partOf(const TensorView &out) const {
    BlockPart part;
    part.whole = wholeDims(out, axis, out.shape.size());
    part.n = 1;
    for (size_t d = axis; d < out.shape.size(); ++d)
      part.n *= out.shape[d];
    if (part.whole)
      return part;
    part.blockIndex.reserve(size_t(part.n));
    const size_t r = out.shape.size();
    std::vector<int64_t> idx(r - axis, 0);
    for (int64_t e = 0; e < part.n; ++e) {
      int64_t flat = 0;
      for (size_t q = 0; q < idx.size(); ++q)
        flat = flat * out.globalShape[axis + q] + out.lo[axis + q] + idx[q];
      part.blockIndex.push_back(flat);
      for (size_t q = idx.size(); q-- > 0;) {
        if (++idx[q] < out.shape[axis + q])
          break;
        idx[q] = 0;
      }
    }
    return part;
  }

  /// Per row of `out` (row-major over its leading box), the offset in `v`
  /// of that row's block; `v` must hold the rows and, unless `partial`
  /// (a Mean over part of the block, checked by the caller), whole blocks.
  std::string rowOffsets(const TensorView &v, const TensorView &out,
                         const char *what, std::vector<int64_t> &offsets,
                         bool partial = false) const {
    if (!isFloat<T>(v) || v.globalShape.size() != out.globalShape.size())
      return std::string(what) + " must be " + floatName<T>() +
             " with X's rank";
    for (size_t d = 0; d < axis; ++d)
      if (out.lo[d] < v.lo[d] ||
          out.lo[d] + out.shape[d] > v.lo[d] + v.shape[d])
        return unsupportedConfiguration(std::string(what) +
                                        " does not hold the output's rows");
    if (!partial && !wholeDims(v, axis, v.shape.size()))
      return unsupportedConfiguration(std::string(what) +
                                      " splits a normalized dim");
    const std::vector<int64_t> s = stridesOf(v);
    const int64_t rows = rowsOf(out);
    offsets.assign(size_t(rows), 0);
    std::vector<int64_t> idx(axis, 0);
    for (int64_t row = 0; row < rows; ++row) {
      int64_t off = 0;
      for (size_t d = 0; d < axis; ++d)
        off += (out.lo[d] + idx[d] - v.lo[d]) * s[d];
      offsets[size_t(row)] = off;
      for (size_t d = axis; d-- > 0;) {
        if (++idx[d] < out.shape[d])
          break;
        idx[d] = 0;
      }
    }
    return "";
  }

  /// The mean and 1 / sqrt(variance + epsilon) of the M elements at `xr`,
  /// in double.
  void rowStats(const T *xr, double &mean, double &rstd) const {
    double sum = 0;
    for (int64_t k = 0; k < M; ++k)
      sum += xr[k];
    mean = sum / static_cast<double>(M);
    double sq = 0;
    for (int64_t k = 0; k < M; ++k)
      sq += (xr[k] - mean) * (xr[k] - mean);
    rstd = 1 / std::sqrt(sq / static_cast<double>(M) + epsilon);
  }

  /// Scale / B must be exactly the normalized dims (no broadcasting inside)
  /// and hold what `part` of `out` covers (`wholeBlock`: all of it); `at`
  /// gets, per element of the part, its offset in `v`.
  std::string block(const TensorView &v, const TensorView &x,
                    const TensorView &out, const BlockPart &part,
                    bool wholeBlock, const char *what,
                    std::vector<int64_t> &at) const {
    if (!isFloat<T>(v))
      return std::string(what) + " must be " + floatName<T>();
    std::vector<int64_t> want(x.globalShape.begin() + axis,
                              x.globalShape.end());
    if (v.globalShape != want)
      return unsupportedConfiguration(
          std::string(what) + " is broadcast inside the normalized dims");
    at.clear();
    if (v.shape == want)
      return ""; // whole: offset == block index
    for (size_t q = 0; q < want.size(); ++q) {
      const int64_t lo = wholeBlock ? 0 : out.lo[axis + q],
                    hi = wholeBlock ? want[q]
                                    : out.lo[axis + q] + out.shape[axis + q];
      if (lo < v.lo[q] || hi > v.lo[q] + v.shape[q])
        return unsupportedConfiguration(
            std::string(what) + " lacks part of the output's normalized box");
    }
    if (wholeBlock)
      return unsupportedConfiguration(std::string(what) + " is split");
    const std::vector<int64_t> s = stridesOf(v);
    at.reserve(size_t(part.n));
    for (int64_t e = 0; e < part.n; ++e) {
      int64_t rem = part.whole ? e : part.blockIndex[size_t(e)], off = 0;
      for (size_t q = want.size(); q-- > 0;) {
        off += (rem % want[q] - v.lo[q]) * s[q];
        rem /= want[q];
      }
      at.push_back(off);
    }
    return "";
  }
};

/// A lone Mean (`only` 1) or InvStdDev (2) output: the rows' statistics. A
/// Mean may be a partial sum over part of the block (the plan's Reduce adds
/// the parts): `args.reductions`, one range per normalized dim.
template <typename T>
std::string layerNormStatistic(const KernelArgs &args, const LayerNorm<T> &ln,
                               int64_t only) {
  const TensorView &x = args.inputs[0], &y = args.outputs[0];
  if (!isFloat<T>(y))
    return "the statistic must be " + floatName<T>();
  const size_t r = x.globalShape.size();
  if (y.globalShape.size() != r)
    return "the statistic must have X's rank";
  for (size_t d = ln.axis; d < r; ++d)
    if (y.globalShape[d] != 1)
      return "the statistic must have extent 1 in the normalized dims";
  // The block's part this share sums: [lo, hi) per normalized dim.
  std::vector<int64_t> lo(r - ln.axis, 0), hi(x.globalShape.begin() + ln.axis,
                                              x.globalShape.end());
  bool partial = false;
  if (args.partialReduction) {
    if (only != 1)
      return unsupportedConfiguration(
          "a partial sum of InvStdDev (not a sum of its parts)");
    if (args.reductions.size() != r - ln.axis)
      return unsupportedConfiguration(
          "reduction ranges do not match the normalized dims");
    for (size_t q = 0; q < lo.size(); ++q) {
      const KernelArgs::ReductionSpan &span = args.reductions[q];
      if (span.extent != hi[q])
        return unsupportedConfiguration(
            "reduction ranges do not match the normalized dims");
      lo[q] = span.lo;
      hi[q] = span.hi;
    }
    partial = true;
  }
  std::vector<int64_t> xRow;
  if (std::string err = ln.rowOffsets(x, y, "X", xRow, partial); !err.empty())
    return err;
  if (partial)
    for (size_t q = 0; q < lo.size(); ++q)
      if (!holds(x, ln.axis + q, lo[q]) ||
          (hi[q] > lo[q] && !holds(x, ln.axis + q, hi[q] - 1)))
        return unsupportedConfiguration(
            "X lacks part of the block the partial Mean sums");
  const int64_t M = ln.M, rows = ln.rowsOf(y);
  const T *xp = elements<T>(x);
  T *out = elements<T>(y);
  if (!partial) {
    parallelFor(rows, 3.0 * static_cast<double>(M),
                [&](int64_t begin, int64_t end) {
                  for (int64_t row = begin; row < end; ++row) {
                    double mean, rstd;
                    ln.rowStats(xp + xRow[size_t(row)], mean, rstd);
                    out[row] = static_cast<T>(only == 1 ? mean : rstd);
                  }
                });
    return "";
  }
  // Offsets in X's row of the summed part (row-major), then one sum a row.
  const std::vector<int64_t> xs = stridesOf(x);
  std::vector<int64_t> part(1, 0);
  for (size_t q = 0; q < lo.size(); ++q) {
    std::vector<int64_t> next;
    for (int64_t o : part)
      for (int64_t g = lo[q]; g < hi[q]; ++g)
        next.push_back(o + (g - x.lo[ln.axis + q]) * xs[ln.axis + q]);
    part = std::move(next);
  }
  parallelFor(rows, static_cast<double>(part.size()),
              [&](int64_t begin, int64_t end) {
                for (int64_t row = begin; row < end; ++row) {
                  const T *xr = xp + xRow[size_t(row)];
                  double sum = 0;
                  for (int64_t o : part)
                    sum += xr[o];
                  out[row] = static_cast<T>(sum / static_cast<double>(M));
                }
              });
  return "";
}

template <typename T> std::string layerNormalization(const KernelArgs &args) {
  if (args.inputs.size() < 2 || args.inputs.size() > 3 ||
      (args.outputs.size() != 1 && args.outputs.size() != 3))
    return "expects inputs (X, Scale[, B]) and outputs (Y[, Mean, "
           "InvStdDev])";
  const TensorView &x = args.inputs[0], &y = args.outputs[0];
  LayerNorm<T> ln;
  if (std::string err = ln.init(args, x); !err.empty())
    return err;
  // A lone statistic output, as the compiler materializes Mean (tofu.output
  // 1) and InvStdDev (2) apart from Y: the rows' statistics alone.
  const int64_t only =
      args.outputs.size() == 1 && args.hasAttr("tofu.output")
          ? args.intAttr("tofu.output", 0)
          : 0;
  if (only == 1 || only == 2)
    return layerNormStatistic(args, ln, only);
  // A lone statistic without the attribute (older plans), or an ambiguous
  // shape, goes to the interpreter.
  if (y.globalShape != x.globalShape || (args.outputs.size() == 1 && ln.M == 1))
    return unsupportedConfiguration(
        "a lone Mean or InvStdDev output (the interpreter computes it)");
  if (!isFloat<T>(y))
    return "Y must be " + floatName<T>();
  if (args.partialReduction)
    return unsupportedConfiguration("a partial sum of Y");
  const int64_t rows = ln.rowsOf(y);
  const typename LayerNorm<T>::BlockPart part = ln.partOf(y);
  std::vector<int64_t> xRow;
  if (std::string err = ln.rowOffsets(x, y, "X", xRow); !err.empty())
    return err;
  const TensorView &scale = args.inputs[1];
  std::vector<int64_t> scaleAt, biasAt;
  if (std::string err =
          ln.block(scale, x, y, part, false, "Scale", scaleAt);
      !err.empty())
    return err;
  const TensorView *bias =
      args.inputs.size() == 3 && args.inputs[2].present() ? &args.inputs[2]
                                                          : nullptr;
  if (bias)
    if (std::string err = ln.block(*bias, x, y, part, false, "B", biasAt);
        !err.empty())
      return err;
  T *meanOut = nullptr, *rstdOut = nullptr;
  if (args.outputs.size() == 3) {
    for (size_t o = 1; o < 3; ++o) {
      const TensorView &st = args.outputs[o];
      if (!isFloat<T>(st) || st.globalShape.size() != y.globalShape.size())
        return "a statistic must be " + floatName<T>() + " with X's rank";
      for (size_t d = 0; d < y.shape.size(); ++d)
        if (d < ln.axis ? st.lo[d] != y.lo[d] || st.shape[d] != y.shape[d]
                        : st.shape[d] != 1)
          return unsupportedConfiguration(
              "a statistic's box differs from Y's rows");
    }
    meanOut = elements<T>(args.outputs[1]);
    rstdOut = elements<T>(args.outputs[2]);
  }
  const int64_t M = ln.M, n = part.n;
  const T *xp = elements<T>(x), *sp = elements<T>(scale);
  const T *bp = bias ? elements<T>(*bias) : nullptr;
  T *yp = elements<T>(y);
  const bool direct = part.whole && scaleAt.empty() && biasAt.empty();
  parallelFor(rows, 3.0 * static_cast<double>(M) + static_cast<double>(n),
              [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T *xr = xp + xRow[size_t(r)];
      double mean, rstd;
      ln.rowStats(xr, mean, rstd);
      T *yr = yp + r * n;
      if (direct) {
        for (int64_t k = 0; k < M; ++k)
          yr[k] = static_cast<T>((xr[k] - mean) * rstd * sp[k] +
                                 (bp ? bp[k] : T(0)));
      } else {
        for (int64_t e = 0; e < n; ++e) {
          const int64_t k = part.whole ? e : part.blockIndex[size_t(e)];
          const T sv = sp[scaleAt.empty() ? k : scaleAt[size_t(e)]];
          const T bv = bp ? bp[biasAt.empty() ? k : biasAt[size_t(e)]] : T(0);
          yr[e] = static_cast<T>((xr[k] - mean) * rstd * sv + bv);
        }
      }
      if (meanOut) {
        meanOut[r] = static_cast<T>(mean);
        rstdOut[r] = static_cast<T>(rstd);
      }
    }
  });
  return "";
}

template <typename T>
std::string layerNormalizationGrad(const KernelArgs &args) {
  if (args.inputs.size() != 5 || args.outputs.size() != 1)
    return "expects inputs (dY, X, Scale, Mean, InvStdDev) and 1 output";
  const TensorView &dy = args.inputs[0], &x = args.inputs[1],
                   &scale = args.inputs[2], &mean = args.inputs[3],
                   &rstd = args.inputs[4], &dx = args.outputs[0];
  LayerNorm<T> ln;
  if (std::string err = ln.init(args, x); !err.empty())
    return err;
  if (!isFloat<T>(dx) || dx.globalShape != x.globalShape)
    return "dX must be " + floatName<T>() + " with X's shape";
  const int64_t rows = ln.rowsOf(dx);
  const typename LayerNorm<T>::BlockPart part = ln.partOf(dx);
  std::vector<int64_t> dyRow, xRow, meanRow, rstdRow, scaleAt;
  for (auto [v, what, offsets] :
       {std::tuple{&dy, "dY", &dyRow}, std::tuple{&x, "X", &xRow},
        std::tuple{&mean, "Mean", &meanRow},
        std::tuple{&rstd, "InvStdDev", &rstdRow}})
    if (std::string err = ln.rowOffsets(*v, dx, what, *offsets); !err.empty())
      return err;
  for (const TensorView *v : {&mean, &rstd})
    for (size_t d = ln.axis; d < v->globalShape.size(); ++d)
      if (v->globalShape[d] != 1)
        return "Mean and InvStdDev must have extent 1 in the normalized dims";
  if (std::string err = ln.block(scale, x, dx, part, true, "Scale", scaleAt);
      !err.empty())
    return err;
  const int64_t M = ln.M, n = part.n;
  const T *dyp = elements<T>(dy), *xp = elements<T>(x),
          *sp = elements<T>(scale), *mp = elements<T>(mean),
          *rp = elements<T>(rstd);
  T *dxp = elements<T>(dx);
  parallelFor(rows, 6.0 * static_cast<double>(M), [&](int64_t begin,
                                                      int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T *dr = dyp + dyRow[size_t(r)], *xr = xp + xRow[size_t(r)];
      double mu = mp[meanRow[size_t(r)]], rs = rp[rstdRow[size_t(r)]];
      double sumG = 0, sumGXhat = 0;
      for (int64_t k = 0; k < M; ++k) {
        double g = static_cast<double>(dr[k]) * sp[k];
        sumG += g;
        sumGXhat += g * (xr[k] - mu) * rs;
      }
      double meanG = sumG / static_cast<double>(M);
      double meanGXhat = sumGXhat / static_cast<double>(M);
      T *out = dxp + r * n;
      for (int64_t e = 0; e < n; ++e) {
        const int64_t k = part.whole ? e : part.blockIndex[size_t(e)];
        double g = static_cast<double>(dr[k]) * sp[k];
        double xhat = (xr[k] - mu) * rs;
        out[e] = static_cast<T>(rs * (g - meanG - xhat * meanGXhat));
      }
    }
  });
  return "";
}


/// The geometry of an LRN call: the output box's channel range and the
/// planes (N and the spatial dims, which every operand must cover alike),
/// with the window and the attributes.
struct LrnBox {
  int64_t channels = 0;       ///< C, the global channel count
  int64_t n0 = 0, nCount = 0; ///< the output's batch range
  int64_t c0 = 0, c1 = 0;     ///< the output's channel range
  int64_t plane = 1;          ///< elements per (n, c): the spatial box
  int64_t lo = 0, hi = 0;     ///< the window: channels [c - lo, c + hi]
  double alpha = 0, beta = 0, bias = 0, size = 1;
};

/// Checks that `in` holds the output's batch and spatial box and channels
/// [need0, need1) (clipped to [0, C)); sets its channel origin and count.
std::string lrnOperand(const TensorView &in, const TensorView &out,
                       const LrnBox &box, int64_t need0, int64_t need1,
                       const char *name, int64_t &c0, int64_t &cCount) {
  if (in.shape.size() != out.shape.size())
    return std::string(name) + "'s rank differs from the output's";
  for (size_t d = 0; d < out.shape.size(); ++d) {
    if (d == 1)
      continue;
    if (in.lo[d] != out.lo[d] || in.shape[d] != out.shape[d])
      return unsupportedConfiguration(std::string(name) +
                                      "'s box differs from the output's "
                                      "outside the channels");
  }
  need0 = std::max<int64_t>(need0, 0);
  need1 = std::min<int64_t>(need1, box.channels);
  c0 = in.lo[1];
  cCount = in.shape[1];
  if (need0 < need1 && (need0 < c0 || need1 > c0 + cCount))
    return unsupportedConfiguration(std::string(name) +
                                    "'s box lacks channels of the window");
  return "";
}

/// Reads the attributes and the output box of an LRN or LRNGrad call.
std::string lrnBox(const KernelArgs &args, const TensorView &out,
                   LrnBox &box) {
  if (out.shape.size() < 2)
    return "expects [N, C, ...] operands";
  if (args.partialReduction)
    return unsupportedConfiguration("a partial window sum");
  const int64_t size = args.intAttr("size", 0);
  if (size < 1)
    return "LRN needs size >= 1";
  box.channels = out.globalShape[1];
  box.n0 = out.lo[0];
  box.nCount = out.shape[0];
  box.c0 = out.lo[1];
  box.c1 = out.lo[1] + out.shape[1];
  for (size_t d = 2; d < out.shape.size(); ++d)
    box.plane *= out.shape[d];
  box.lo = (size - 1) / 2;
  box.hi = size - 1 - box.lo;
  box.alpha = args.floatAttr("alpha", 0.0001);
  box.beta = args.floatAttr("beta", 0.75);
  box.bias = args.floatAttr("bias", 1.0);
  box.size = static_cast<double>(size);
  return "";
}

/// D = bias + alpha / size * (sum of X^2 over the window), per channel of
/// [d0, d1) and element of the plane of local batch row i, in double,
/// summed in the spec's order (window channels ascending; those outside
/// [0, C) read 0, which adds nothing).
template <typename T>
void lrnDenominators(const TensorView &x, int64_t xc0, int64_t xcCount,
                     const LrnBox &box, int64_t i, int64_t d0, int64_t d1,
                     std::vector<double> &den) {
  const T *xd = elements<T>(x);
  den.assign(static_cast<size_t>((d1 - d0) * box.plane), 0.0);
  const double scale = box.alpha / box.size;
  for (int64_t c = d0; c < d1; ++c) {
    double *row = den.data() + (c - d0) * box.plane;
    for (int64_t j = c - box.lo; j <= c + box.hi; ++j) {
      if (j < 0 || j >= box.channels)
        continue;
      const T *xr = xd + (i * xcCount + (j - xc0)) * box.plane;
      for (int64_t p = 0; p < box.plane; ++p)
        row[p] += static_cast<double>(xr[p]) * static_cast<double>(xr[p]);
    }
    for (int64_t p = 0; p < box.plane; ++p)
      row[p] = box.bias + scale * row[p];
  }
}

/// LRN(X) -> Y (tdl-specs/lrn.tdl) on any channel split whose X box holds
/// the window's halo.
template <typename T> std::string lrn(const KernelArgs &args) {
  if (args.inputs.size() != 1 || args.outputs.size() != 1)
    return "expects X and one output";
  const TensorView &x = args.inputs[0], &y = args.outputs[0];
  LrnBox box;
  if (std::string err = lrnBox(args, y, box); !err.empty())
    return err;
  int64_t xc0 = 0, xcCount = 0;
  if (std::string err = lrnOperand(x, y, box, box.c0 - box.lo,
                                   box.c1 + box.hi, "X", xc0, xcCount);
      !err.empty())
    return err;
  const T *xd = elements<T>(x);
  T *yd = elements<T>(y);
  const int64_t outC = box.c1 - box.c0;
  parallelFor(box.nCount, double(outC * box.plane) * (box.size + 20),
              [&](int64_t nb, int64_t ne) {
                std::vector<double> den;
                for (int64_t i = nb; i < ne; ++i) {
                  lrnDenominators<T>(x, xc0, xcCount, box, i, box.c0, box.c1,
                                     den);
                  for (int64_t c = box.c0; c < box.c1; ++c) {
                    const T *xr = xd + (i * xcCount + (c - xc0)) * box.plane;
                    T *yr = yd + (i * outC + (c - box.c0)) * box.plane;
                    const double *dr = den.data() + (c - box.c0) * box.plane;
                    for (int64_t p = 0; p < box.plane; ++p)
                      yr[p] = static_cast<T>(static_cast<double>(xr[p]) *
                                             std::pow(dr[p], -box.beta));
                  }
                }
              });
  return "";
}

/// LRNGrad(dY, X) -> dX (tdl-specs/lrn.tdl): with D as above,
///   dX[i] = dY[i] D[i]^-beta - 2 beta alpha / size X[i]
///           * sum over j of dY[c] X[c] D[c]^(-beta - 1), c = i + lo - j,
/// on any channel split whose dY and X boxes hold the halos.
template <typename T> std::string lrnGrad(const KernelArgs &args) {
  if (args.inputs.size() != 2 || args.outputs.size() != 1)
    return "expects dY, X and one output";
  const TensorView &dy = args.inputs[0], &x = args.inputs[1],
                   &dx = args.outputs[0];
  LrnBox box;
  if (std::string err = lrnBox(args, dx, box); !err.empty())
    return err;
  // The channels c whose window holds an output channel, and theirs.
  const int64_t d0 = std::max<int64_t>(box.c0 - box.hi, 0),
                d1 = std::min<int64_t>(box.c1 + box.lo, box.channels);
  int64_t xc0 = 0, xcCount = 0, gc0 = 0, gcCount = 0;
  if (std::string err = lrnOperand(x, dx, box, d0 - box.lo, d1 + box.hi, "X",
                                   xc0, xcCount);
      !err.empty())
    return err;
  if (std::string err = lrnOperand(dy, dx, box, d0, d1, "dY", gc0, gcCount);
      !err.empty())
    return err;
  if (box.c0 < std::max(xc0, gc0) ||
      box.c1 > std::min(xc0 + xcCount, gc0 + gcCount))
    return unsupportedConfiguration("the inputs lack output channels");
  const T *xd = elements<T>(x);
  const T *gd = elements<T>(dy);
  T *out = elements<T>(dx);
  const int64_t outC = box.c1 - box.c0;
  const int64_t window = static_cast<int64_t>(box.size);
  const double factor = 2 * box.beta * box.alpha / box.size;
  parallelFor(
      box.nCount, double(outC * box.plane) * (box.size * 4 + 40),
      [&](int64_t nb, int64_t ne) {
        std::vector<double> den, term;
        for (int64_t i = nb; i < ne; ++i) {
          lrnDenominators<T>(x, xc0, xcCount, box, i, d0, d1, den);
          // term[c] = dY[c] X[c] D[c]^(-beta - 1) for c in [d0, d1).
          term.assign(den.size(), 0.0);
          for (int64_t c = d0; c < d1; ++c) {
            const T *xr = xd + (i * xcCount + (c - xc0)) * box.plane;
            const T *gr = gd + (i * gcCount + (c - gc0)) * box.plane;
            double *tr = term.data() + (c - d0) * box.plane;
            const double *dr = den.data() + (c - d0) * box.plane;
            for (int64_t p = 0; p < box.plane; ++p)
              tr[p] = static_cast<double>(gr[p]) *
                      static_cast<double>(xr[p]) *
                      std::pow(dr[p], -box.beta - 1);
          }
          for (int64_t c = box.c0; c < box.c1; ++c) {
            const T *xr = xd + (i * xcCount + (c - xc0)) * box.plane;
            const T *gr = gd + (i * gcCount + (c - gc0)) * box.plane;
            const double *dr = den.data() + (c - d0) * box.plane;
            T *o = out + (i * outC + (c - box.c0)) * box.plane;
            for (int64_t p = 0; p < box.plane; ++p) {
              double sum = 0;
              for (int64_t j = 0; j < window; ++j) {
                const int64_t w = c + box.lo - j;
                if (w < 0 || w >= box.channels)
                  continue;
                sum += term[(w - d0) * box.plane + p];
              }
              o[p] = static_cast<T>(
                  static_cast<double>(gr[p]) * std::pow(dr[p], -box.beta) -
                  factor * static_cast<double>(xr[p]) * sum);
            }
          }
        }
      });
  return "";
}

} // namespace

void tofu::runtime::registerNormalizationKernels(
    void (*addKernel)(const char *, KernelFn)) {
  addKernel("BatchNormalization",
            byFloatType<batchNormalization<float>, batchNormalization<double>>);
  addKernel("BatchNormalizationNormalized",
            byFloatType<batchNormalizationNormalized<float>,
                        batchNormalizationNormalized<double>>);
  addKernel("BatchNormalizationGrad",
            byFloatType<batchNormalizationGrad<float>,
                        batchNormalizationGrad<double>>);
  addKernel("LayerNormalization",
            byFloatType<layerNormalization<float>, layerNormalization<double>>);
  addKernel("LayerNormalizationGrad",
            byFloatType<layerNormalizationGrad<float>,
                        layerNormalizationGrad<double>>);
  addKernel("LRN", byFloatType<lrn<float>, lrn<double>>);
  addKernel("LRNGrad", byFloatType<lrnGrad<float>, lrnGrad<double>>);
}
