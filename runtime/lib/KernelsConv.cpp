//===- KernelsConv.cpp - Convolution CPU kernels (im2col + GEMM, direct) --===//
//
// ONNX Conv and its gradients for any number of spatial dimensions (1-D and
// 2-D in practice), float32 or float64 (one template per kernel,
// FloatKernel.h; GEMM through sgemm or dgemm), with attributes strides, pads
// ([begin..., end...]), dilations, group, kernel_shape (optional, must match W)
// and auto_pad (NOTSET, VALID, SAME_UPPER, SAME_LOWER; the gradient ops get
// explicit pads from the gradient rule):
//
//   Conv(X [N, C, in...], W [M, C/G, k...], B? [M])      -> Y  [N, M, out...]
//   ConvGradInput(dY, W, X)   -> dX [N, C, in...]   (X's global shape only)
//   ConvGradWeight(dY, X, W)  -> dW [M, C/G, k...]  (W's global shape only)
//   ConvBiasGrad(dY)          -> dB [M] = sum of dY over all dims but 1
//
// with out = floor((in + pad_begin + pad_end - dilation * (k - 1) - 1) /
// stride) + 1 and input position o * stride - pad_begin + kk * dilation (a
// negative pad crops the input instead of padding it).
//
// Local execution works in global coordinates. Each kernel computes its
// output's local box and sums over the reduction slices its inputs hold
// (Conv: W's local input-channel and kernel ranges; ConvGradInput: the
// output channels dY and W hold, W's kernel range; ConvGradWeight and
// ConvBiasGrad: dY's local batch and spatial box), so a split reduction
// gives the partial sum the plan's Reduce adds up. With groups, dY's and W's
// boxes in ConvGradInput are hulls over the groups of dX's channels, so a
// split of each group's output channels (mm) is read from the call's
// reduction ranges (KernelArgs::reductions). Reads outside the global
// input are padding (0); an element inside the global tensor that the local
// buffer lacks makes the kernel return unsupportedConfiguration (runCompute
// then falls back to the expression interpreter, which names the element).
//
// Two implementations:
// - im2col + GEMM, per group: one GEMM over a chunk of the local images
//   (the im2col matrix [C/G * k..., images * out...], at most kColElements;
//   dY's rows gathered into one matrix), im2col / col2im threaded over
//   (image, channel) and affine in the innermost dim; with two spatial dims
//   (the common case) the input row of each (kernel row, output row) comes
//   from a table made once per call, where other ranks step an odometer
//   over the outer dims per row (im2col and col2im were 25% of resnet18's
//   step with the odometer alone); output rows shorter than 16 (small
//   images) look every column row up in one table of input positions
//   instead (inputPositions), where a run of a few elements would cost
//   more in loop set-up than in bytes. dY's rows are gathered (and Conv's
//   GEMM output copied back into Y) by copyRuns.
// - direct, when group > 1 and each group has one input channel (depthwise
//   convolutions, also with a channel multiplier) over 1 or 2 spatial dims:
//   plane-by-plane loops over a zero-padded copy of the input hull, where
//   GEMMs would have a single row per group.
//
//===----------------------------------------------------------------------===//

#include "Blas.h"
#include "FloatKernel.h"
#include "ParallelFor.h"
#include "tofu/runtime/Kernels.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>

using namespace tofu::runtime;
using tofu::plan::DType;

namespace {

std::string dims(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

int64_t product(const std::vector<int64_t> &v) {
  int64_t n = 1;
  for (int64_t x : v)
    n *= x;
  return n;
}

/// Row-major strides of a local box.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    s[i - 1] = s[i] * shape[i];
  return s;
}

/// Global geometry of a convolution, from the attributes and the global
/// shapes of X, W and Y.
struct Geometry {
  size_t sp = 0; ///< spatial rank
  int64_t N = 0, C = 0, M = 0, G = 1, Cg = 0, Mg = 0;
  std::vector<int64_t> in, kernel, out, strides, padBegin, dilations;
};

std::string parseGeometry(const KernelArgs &args,
                          const std::vector<int64_t> &x,
                          const std::vector<int64_t> &w,
                          const std::vector<int64_t> &y, Geometry &g) {
  if (x.size() < 3 || w.size() != x.size() || y.size() != x.size())
    return "X, W and Y must have the same rank >= 3, have global shapes X " +
           dims(x) + " W " + dims(w) + " Y " + dims(y);
  std::string autoPad = args.stringAttr("auto_pad", "NOTSET");
  if (autoPad.empty())
    autoPad = "NOTSET";
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER")
    return "unknown auto_pad '" + autoPad + "'";
  g.sp = x.size() - 2;
  g.N = x[0];
  g.C = x[1];
  g.M = w[0];
  g.G = args.intAttr("group", 1);
  g.in.assign(x.begin() + 2, x.end());
  g.kernel.assign(w.begin() + 2, w.end());
  // An absent or empty list means the ONNX default (TDL fills defaults in
  // as empty lists).
  auto intsOrDefault = [&](const char *name, std::vector<int64_t> fallback) {
    std::vector<int64_t> value = args.intsAttr(name, fallback);
    return value.empty() ? fallback : value;
  };
  g.strides = intsOrDefault("strides", std::vector<int64_t>(g.sp, 1));
  g.dilations = intsOrDefault("dilations", std::vector<int64_t>(g.sp, 1));
  std::vector<int64_t> pads =
      intsOrDefault("pads", std::vector<int64_t>(2 * g.sp, 0));
  if (autoPad != "NOTSET" && g.strides.size() == g.sp &&
      g.dilations.size() == g.sp) {
    // tdl-specs/conv.tdl's pads: SAME pads to an output of ceil(in /
    // stride), the odd cell at the end (UPPER) or the beginning (LOWER).
    pads.assign(2 * g.sp, 0);
    for (size_t s = 0; autoPad != "VALID" && s < g.sp; ++s) {
      int64_t out = (g.in[s] + g.strides[s] - 1) / g.strides[s];
      int64_t total = std::max<int64_t>(
          0, (out - 1) * g.strides[s] + (g.kernel[s] - 1) * g.dilations[s] +
                 1 - g.in[s]);
      int64_t small = total / 2, large = total - total / 2;
      pads[s] = autoPad == "SAME_UPPER" ? small : large;
      pads[g.sp + s] = autoPad == "SAME_UPPER" ? large : small;
    }
  }
  if (g.strides.size() != g.sp || g.dilations.size() != g.sp ||
      pads.size() != 2 * g.sp)
    return "strides " + dims(g.strides) + ", dilations " + dims(g.dilations) +
           " and pads " + dims(pads) + " do not fit " + std::to_string(g.sp) +
           " spatial dimensions";
  if (!args.intsAttr("kernel_shape", {}).empty() &&
      args.intsAttr("kernel_shape", {}) != g.kernel)
    return "kernel_shape " + dims(args.intsAttr("kernel_shape", {})) +
           " differs from W's spatial shape " + dims(g.kernel);
  if (g.G < 1 || g.C % g.G != 0 || g.M % g.G != 0)
    return "group " + std::to_string(g.G) + " does not divide C = " +
           std::to_string(g.C) + " and M = " + std::to_string(g.M);
  g.Cg = g.C / g.G;
  g.Mg = g.M / g.G;
  if (w[1] != g.Cg)
    return "W has " + std::to_string(w[1]) + " input channels, expected C / "
           "group = " + std::to_string(g.Cg);
  if (y[0] != g.N || y[1] != g.M)
    return "Y " + dims(y) + " does not match X " + dims(x) + " and W " +
           dims(w);
  g.padBegin.assign(pads.begin(), pads.begin() + g.sp);
  for (size_t s = 0; s < g.sp; ++s) {
    // A negative pad crops (ConvTranspose's gradient with an output_shape
    // beyond the default size): reads are bounds-checked in global
    // coordinates, so only the output extent below must be non-negative.
    if (g.strides[s] < 1 || g.dilations[s] < 1)
      return "strides and dilations must be positive";
    int64_t span = g.in[s] + pads[s] + pads[g.sp + s] -
                   g.dilations[s] * (g.kernel[s] - 1) - 1;
    int64_t o = span < 0 ? 0 : span / g.strides[s] + 1;
    if (y[2 + s] != o)
      return "spatial dimension " + std::to_string(s) + ": output extent " +
             std::to_string(y[2 + s]) + " but the attributes give " +
             std::to_string(o);
    g.out.push_back(o);
  }
  return "";
}

/// Checks that `v` is a present T view of the expected rank.
template <typename T>
std::string checkOperand(const TensorView &v, size_t rank, const char *what) {
  if (!v.present())
    return std::string(what) + " is missing";
  if (v.dtype != FloatType<T>::dtype)
    return std::string(what) + " must be " + floatName<T>();
  if (v.shape.size() != rank)
    return std::string(what) + " must have rank " + std::to_string(rank);
  return "";
}

/// True when [lo, lo + n) lies inside view dimension d's local box.
bool holds(const TensorView &v, size_t d, int64_t lo, int64_t n) {
  return lo >= v.lo[d] && lo + n <= v.lo[d] + v.shape[d];
}

std::string lacks(const char *what, const char *dim, int64_t lo, int64_t n) {
  return unsupportedConfiguration(std::string(what) + " lacks " + dim + " [" +
                                  std::to_string(lo) + ", " +
                                  std::to_string(lo + n) + ")");
}

const char kHalo[] = "X lacks input elements of the local outputs (a halo the "
                     "buffer does not hold)";

/// Floor and ceiling of a / b for b > 0.
int64_t floorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

/// True when some output position in [o0, o0 + oN) with some kernel offset
/// in [k0, k0 + kN) reads inside X's global extent in every spatial
/// dimension. False: every read of the share is padding (0), as in a share
/// of the border's outputs with a split of the kernel offsets, and X's box
/// is then empty; the share's contribution is 0 (Y: the bias).
bool readsInsideInput(const Geometry &g, const int64_t *k0, const int64_t *kN,
                      const int64_t *o0, const int64_t *oN, size_t sp) {
  for (size_t s = 0; s < sp; ++s) {
    bool any = false;
    for (int64_t o = o0[s]; o < o0[s] + oN[s] && !any; ++o)
      for (int64_t k = k0[s]; k < k0[s] + kN[s] && !any; ++k) {
        const int64_t pos = o * g.strides[s] - g.padBegin[s] + k * g.dilations[s];
        any = pos >= 0 && pos < g.in[s];
      }
    if (!any)
      return false;
  }
  return true;
}

/// The first error of the tasks of a parallel loop.
struct FirstError {
  std::mutex mutex;
  std::string error;
  std::atomic<bool> failed{false};
  void set(std::string e) {
    std::lock_guard<std::mutex> lock(mutex);
    if (error.empty())
      error = std::move(e);
    failed = true;
  }
};

/// A scratch buffer of the GEMM kernels: per thread and slot, kept between
/// calls and grown on demand, so that a call neither allocates nor zeroes
/// its im2col matrix again (each call writes what it reads).
template <typename T> class Scratch {
public:
  explicit Scratch(int slot) : buffer(buffers()[slot]) {}
  T *get(size_t n) {
    if (buffer.size() < n)
      buffer.resize(n);
    return buffer.data();
  }

private:
  static std::array<std::vector<T>, 2> &buffers() {
    thread_local std::array<std::vector<T>, 2> perThread;
    return perThread;
  }
  std::vector<T> &buffer;
};

/// The batch chunk of the batched GEMMs: each matrix of a chunk of `count`
/// images (the im2col matrix, the GEMM's output or the gathered dY) holds
/// at most rows * count * P elements, where `rows` is the largest row count
/// among them; at most kColElements (so that a chunk stays in memory the
/// size of a few activations), at least 1.
constexpr int64_t kColElements = int64_t(1) << 21;
int64_t batchChunk(int64_t rows, int64_t P, int64_t images) {
  int64_t per = std::max<int64_t>(1, rows * P);
  return std::max<int64_t>(1, std::min(images, kColElements / per));
}

/// Output rows shorter than this (images of a few pixels: a ResNet's late
/// stages at small inputs) make im2col and col2im go through a table of
/// input positions (inputPositions) instead of copying runs of input rows:
/// a run of 1-8 elements costs its loops' set-up and a memset call per
/// padded edge, ~10 ns, several times its bytes (bench/simulate.md,
/// session 37).
constexpr int64_t kShortRow = 16;
/// The largest table (local kernel offsets x output positions) the short
/// path builds; beyond it, the run copies.
constexpr int64_t kMaxPositionTable = int64_t(1) << 18;

/// An input position that lies outside the input's global extent (padding,
/// read as 0) or inside it but outside the local box of `inputPositions`'s
/// view.
constexpr int64_t kPaddingPosition = -1, kOutsideBox = -2;

/// Steps the row-major odometer `index` over [0, extent) in its first
/// `dims` entries (the last fastest); back to all zeros after the last.
void stepOdometer(std::vector<int64_t> &index,
                  const std::vector<int64_t> &extent, size_t dims) {
  for (size_t s = dims; s-- > 0;) {
    if (++index[s] < extent[s])
      return;
    index[s] = 0;
  }
}

/// Where a convolution's local kernel offsets and output positions meet its
/// input: entry kr * P + p, for kernel offset kr of the box [k0, k0 + kN)
/// and output position p of [o0, o0 + oN) (both row-major, P positions),
/// is the offset of input position o * stride - padBegin + kk * dilation in
/// one (image, channel) plane of `view`'s box (X for im2col, dX for
/// col2im), or kPaddingPosition / kOutsideBox.
std::vector<int64_t> inputPositions(const Geometry &g, const TensorView &view,
                                    const std::vector<int64_t> &k0,
                                    const std::vector<int64_t> &kN,
                                    const std::vector<int64_t> &o0,
                                    const std::vector<int64_t> &oN) {
  const size_t sp = g.sp;
  const int64_t kCount = product(kN), P = product(oN);
  const std::vector<int64_t> vs = stridesOf(view.shape);
  std::vector<int64_t> table(kCount * P);
  std::vector<int64_t> kk(sp, 0), o(sp, 0);
  for (int64_t kr = 0; kr < kCount; ++kr) {
    std::fill(o.begin(), o.end(), 0);
    for (int64_t p = 0; p < P; ++p) {
      int64_t offset = 0;
      bool padding = false, outside = false;
      for (size_t s = 0; s < sp; ++s) {
        const int64_t pos = (o0[s] + o[s]) * g.strides[s] - g.padBegin[s] +
                            (k0[s] + kk[s]) * g.dilations[s];
        const int64_t l = pos - view.lo[2 + s];
        padding |= pos < 0 || pos >= g.in[s];
        outside |= l < 0 || l >= view.shape[2 + s];
        offset += l * vs[2 + s];
      }
      table[kr * P + p] = padding ? kPaddingPosition
                          : outside ? kOutsideBox
                                    : offset;
      stepOdometer(o, oN, sp);
    }
    stepOdometer(kk, kN, sp);
  }
  return table;
}

/// True when im2col and col2im take the table of input positions.
bool shortRows(const std::vector<int64_t> &kN, const std::vector<int64_t> &oN) {
  return oN.back() < kShortRow && product(kN) * product(oN) <= kMaxPositionTable;
}

/// Copies rows x count runs of P elements, run (m, i) from src + m *
/// srcRow + i * srcImage to dst + m * dstRow + i * dstImage: a chunk's
/// images of some channels gathered into one [rows, count * P] matrix, or
/// scattered back. Threaded over m; a short run is a plain loop (a memmove
/// call costs more than a few elements).
template <typename T>
void copyRuns(const T *src, int64_t srcRow, int64_t srcImage, T *dst,
              int64_t dstRow, int64_t dstImage, int64_t rows, int64_t count,
              int64_t P) {
  parallelFor(rows, static_cast<double>(count * P),
              [&](int64_t begin, int64_t end) {
                for (int64_t m = begin; m < end; ++m)
                  for (int64_t i = 0; i < count; ++i) {
                    const T *s = src + m * srcRow + i * srcImage;
                    T *d = dst + m * dstRow + i * dstImage;
                    if (P >= kShortRow)
                      std::copy(s, s + P, d);
                    else
                      for (int64_t p = 0; p < P; ++p)
                        d[p] = s[p];
                  }
              });
}

/// dst[j] = src[j * stride] for j < n (an im2col row's run of an input row).
template <typename T>
inline void gatherRun(T *dst, const T *src, int64_t n, int64_t stride) {
  if (stride == 1)
    for (int64_t j = 0; j < n; ++j)
      dst[j] = src[j];
  else
    for (int64_t j = 0; j < n; ++j)
      dst[j] = src[j * stride];
}

/// dst[j * stride] += src[j] for j < n (col2im, gatherRun's adjoint).
template <typename T>
inline void scatterAddRun(T *dst, const T *src, int64_t n, int64_t stride) {
  if (stride == 1)
    for (int64_t j = 0; j < n; ++j)
      dst[j] += src[j];
  else
    for (int64_t j = 0; j < n; ++j)
      dst[j * stride] += src[j];
}

/// im2col over a batch chunk: col[(cw, kk), i * P + p] (row length ld) =
/// X[n0 + i, chan0 + cw, o_p * stride - padBegin + kk * dilation] for
/// images i < nCount, cw < cwCount, kernel positions kk in [k0, k0 + kN)
/// and output positions o in [o0, o0 + oN) (all global), 0 outside X's
/// global shape. Rows are ordered (cw, kk...) row-major, columns (i, o...).
/// Threaded over (image, channel).
template <typename T>
std::string im2col(const TensorView &X, const Geometry &g, int64_t n0,
                   int64_t nCount, int64_t chan0, int64_t cwCount,
                   const std::vector<int64_t> &k0,
                   const std::vector<int64_t> &kN,
                   const std::vector<int64_t> &o0,
                   const std::vector<int64_t> &oN, T *col, int64_t ld) {
  const size_t sp = g.sp;
  if (!readsInsideInput(g, k0.data(), kN.data(), o0.data(), oN.data(), sp)) {
    const int64_t rows = cwCount * product(kN), cols = nCount * product(oN);
    for (int64_t r = 0; r < rows; ++r)
      std::fill(col + r * ld, col + r * ld + cols, T(0));
    return "";
  }
  if (!holds(X, 0, n0, nCount))
    return lacks("X", "batch", n0, nCount);
  if (!holds(X, 1, chan0, cwCount))
    return lacks("X", "channels", chan0, cwCount);
  const std::vector<int64_t> xs = stridesOf(X.shape);
  const int64_t kCount = product(kN), P = product(oN);
  const int64_t innerN = oN[sp - 1];
  if (P == 0)
    return "";
  const T *x = elements<T>(X);
  if (shortRows(kN, oN)) {
    // Short rows: each column row (cw, kr) over the chunk's images is a
    // lookup of the same P input positions in each image's plane.
    const std::vector<int64_t> table = inputPositions(g, X, k0, kN, o0, oN);
    if (std::find(table.begin(), table.end(), kOutsideBox) != table.end())
      return unsupportedConfiguration(kHalo);
    const T *planes = x + (n0 - X.lo[0]) * xs[0] + (chan0 - X.lo[1]) * xs[1];
    parallelFor(cwCount * kCount, static_cast<double>(nCount * P),
                [&](int64_t begin, int64_t end) {
                  for (int64_t task = begin; task < end; ++task) {
                    const int64_t cw = task / kCount, kr = task % kCount;
                    const int64_t *at = table.data() + kr * P;
                    T *row = col + task * ld;
                    for (int64_t i = 0; i < nCount; ++i) {
                      const T *plane = planes + i * xs[0] + cw * xs[1];
                      T *dst = row + i * P;
                      for (int64_t p = 0; p < P; ++p)
                        dst[p] = at[p] >= 0 ? plane[at[p]] : T(0);
                    }
                  }
                });
    return "";
  }
  // The innermost dimension: for each kernel offset, the output positions
  // [first, last) that read inside X's global extent, and the local index
  // of `first`'s input; `missing` when one of them is not in the box.
  const size_t in = sp - 1;
  const int64_t kLast = kN[in], st = g.strides[in];
  std::vector<int64_t> first(kLast), last(kLast), local0(kLast);
  std::vector<char> missing(kLast);
  for (int64_t kk = 0; kk < kLast; ++kk) {
    int64_t pos0 = o0[in] * st - g.padBegin[in] + (k0[in] + kk) * g.dilations[in];
    int64_t a = std::max<int64_t>(0, ceilDiv(-pos0, st));
    int64_t b = std::min<int64_t>(innerN, ceilDiv(g.in[in] - pos0, st));
    b = std::max(a, b);
    first[kk] = a;
    last[kk] = b;
    local0[kk] = pos0 + a * st - X.lo[2 + in];
    missing[kk] = b > a && (local0[kk] < 0 ||
                            local0[kk] + (b - 1 - a) * st >= X.shape[2 + in]);
  }
  FirstError error;
  if (sp == 2) {
    // Two spatial dims (the common case): per kernel row offset ky and
    // output row oy, the local offset of the input row read, or kPadRow /
    // kLackingRow; then each column row is a few tight loops.
    constexpr int64_t kPadRow = -1, kLackingRow = -2;
    const int64_t rowsOut = oN[0];
    std::vector<int64_t> rowOf(kN[0] * rowsOut);
    for (int64_t ky = 0; ky < kN[0]; ++ky)
      for (int64_t oy = 0; oy < rowsOut; ++oy) {
        int64_t pos = (o0[0] + oy) * g.strides[0] - g.padBegin[0] +
                      (k0[0] + ky) * g.dilations[0];
        int64_t l = pos - X.lo[2];
        rowOf[ky * rowsOut + oy] = pos < 0 || pos >= g.in[0] ? kPadRow
                                   : l < 0 || l >= X.shape[2] ? kLackingRow
                                                              : l * xs[2];
      }
    parallelFor(
        nCount * cwCount, static_cast<double>(kCount * P),
        [&](int64_t begin, int64_t end) {
          for (int64_t task = begin; task < end && !error.failed; ++task) {
            const int64_t i = task / cwCount, cw = task % cwCount;
            const T *plane = x + (n0 + i - X.lo[0]) * xs[0] +
                             (chan0 + cw - X.lo[1]) * xs[1];
            for (int64_t ky = 0; ky < kN[0]; ++ky)
              for (int64_t kx = 0; kx < kLast; ++kx) {
                T *row = col + (cw * kCount + ky * kLast + kx) * ld + i * P;
                const int64_t a = first[kx], b = last[kx];
                const int64_t *offsets = rowOf.data() + ky * rowsOut;
                for (int64_t oy = 0; oy < rowsOut; ++oy) {
                  T *dst = row + oy * innerN;
                  const int64_t off = offsets[oy];
                  if (off == kPadRow || a == b) {
                    for (int64_t j = 0; j < innerN; ++j)
                      dst[j] = T(0);
                    continue;
                  }
                  if (off == kLackingRow || missing[kx]) {
                    error.set(unsupportedConfiguration(kHalo));
                    return;
                  }
                  for (int64_t j = 0; j < a; ++j)
                    dst[j] = T(0);
                  gatherRun(dst + a, plane + off + local0[kx], b - a, st);
                  for (int64_t j = b; j < innerN; ++j)
                    dst[j] = T(0);
                }
              }
          }
        });
    return error.error;
  }
  parallelFor(
      nCount * cwCount, static_cast<double>(kCount * P),
      [&](int64_t begin, int64_t end) {
        std::vector<int64_t> kk(sp), o(sp);
        for (int64_t task = begin; task < end && !error.failed; ++task) {
          const int64_t i = task / cwCount, cw = task % cwCount;
          const T *plane = x + (n0 + i - X.lo[0]) * xs[0] +
                           (chan0 + cw - X.lo[1]) * xs[1];
          std::fill(kk.begin(), kk.end(), 0);
          for (int64_t kr = 0; kr < kCount; ++kr) {
            T *row = col + (cw * kCount + kr) * ld + i * P;
            const int64_t a = first[kk[in]], b = last[kk[in]];
            // Odometer over all output dimensions but the innermost.
            std::fill(o.begin(), o.end(), 0);
            for (int64_t r = 0; r < P / innerN; ++r) {
              int64_t base = 0;
              bool pad = false, lacking = false;
              for (size_t s = 0; s < in; ++s) {
                int64_t pos = (o0[s] + o[s]) * g.strides[s] - g.padBegin[s] +
                              (k0[s] + kk[s]) * g.dilations[s];
                int64_t l = pos - X.lo[2 + s];
                pad |= pos < 0 || pos >= g.in[s];
                lacking |= l < 0 || l >= X.shape[2 + s];
                base += l * xs[2 + s];
              }
              T *dst = row + r * innerN;
              if (pad || a == b) {
                std::fill(dst, dst + innerN, T(0));
              } else if (lacking || missing[kk[in]]) {
                error.set(unsupportedConfiguration(kHalo));
                return;
              } else {
                std::fill(dst, dst + a, T(0));
                gatherRun(dst + a, plane + base + local0[kk[in]], b - a, st);
                std::fill(dst + b, dst + innerN, T(0));
              }
              stepOdometer(o, oN, in);
            }
            stepOdometer(kk, kN, sp);
          }
        }
      });
  return error.error;
}

/// col2im over a batch chunk, the adjoint of im2col: adds col[(cw, kk),
/// i * P + p] (row length ld) to dX[n0 + i, chan0 + cw, o_p * stride -
/// padBegin + kk * dilation] where that position lies in dX's local box
/// (the other positions belong to other boxes). Threaded over (image,
/// channel): each task adds into its own plane.
template <typename T>
void col2im(const T *col, int64_t ld, const Geometry &g, const TensorView &dX,
            int64_t n0, int64_t nCount, int64_t chan0, int64_t cwCount,
            const std::vector<int64_t> &k0, const std::vector<int64_t> &kN,
            const std::vector<int64_t> &o0, const std::vector<int64_t> &oN) {
  const size_t sp = g.sp, in = sp - 1;
  const std::vector<int64_t> dxs = stridesOf(dX.shape);
  const int64_t kCount = product(kN), P = product(oN), innerN = oN[in];
  if (P == 0)
    return;
  if (shortRows(kN, oN)) {
    // Short rows: each column row (cw, kr) adds into the same P positions
    // of each image's plane (kPaddingPosition and kOutsideBox: none of
    // dX's box). Threaded over channels: a task adds into its own planes.
    const std::vector<int64_t> table = inputPositions(g, dX, k0, kN, o0, oN);
    T *planes = elements<T>(dX) + (n0 - dX.lo[0]) * dxs[0] +
                (chan0 - dX.lo[1]) * dxs[1];
    parallelFor(cwCount, static_cast<double>(kCount * nCount * P),
                [&](int64_t begin, int64_t end) {
                  for (int64_t cw = begin; cw < end; ++cw)
                    for (int64_t kr = 0; kr < kCount; ++kr) {
                      const int64_t *at = table.data() + kr * P;
                      const T *row = col + (cw * kCount + kr) * ld;
                      for (int64_t i = 0; i < nCount; ++i) {
                        T *plane = planes + i * dxs[0] + cw * dxs[1];
                        const T *src = row + i * P;
                        for (int64_t p = 0; p < P; ++p)
                          if (at[p] >= 0)
                            plane[at[p]] += src[p];
                      }
                    }
                });
    return;
  }
  const int64_t st = g.strides[in];
  std::vector<int64_t> first(kN[in]), last(kN[in]), local0(kN[in]);
  for (int64_t kk = 0; kk < kN[in]; ++kk) {
    int64_t pos0 = o0[in] * st - g.padBegin[in] +
                   (k0[in] + kk) * g.dilations[in] - dX.lo[2 + in];
    int64_t a = std::max<int64_t>(0, ceilDiv(-pos0, st));
    int64_t b = std::min<int64_t>(innerN, ceilDiv(dX.shape[2 + in] - pos0, st));
    first[kk] = a;
    last[kk] = std::max(a, b);
    local0[kk] = pos0 + a * st;
  }
  T *dx = elements<T>(dX);
  if (sp == 2) {
    // Two spatial dims: per kernel row offset ky and output row oy, the
    // local offset of the dX row written, or -1 outside dX's box.
    const int64_t rowsOut = oN[0];
    std::vector<int64_t> rowOf(kN[0] * rowsOut);
    for (int64_t ky = 0; ky < kN[0]; ++ky)
      for (int64_t oy = 0; oy < rowsOut; ++oy) {
        int64_t l = (o0[0] + oy) * g.strides[0] - g.padBegin[0] +
                    (k0[0] + ky) * g.dilations[0] - dX.lo[2];
        rowOf[ky * rowsOut + oy] = l >= 0 && l < dX.shape[2] ? l * dxs[2] : -1;
      }
    const int64_t kLast = kN[1];
    parallelFor(nCount * cwCount, static_cast<double>(kCount * P),
                [&](int64_t begin, int64_t end) {
                  for (int64_t task = begin; task < end; ++task) {
                    const int64_t i = task / cwCount, cw = task % cwCount;
                    T *plane = dx + (n0 + i - dX.lo[0]) * dxs[0] +
                               (chan0 + cw - dX.lo[1]) * dxs[1];
                    for (int64_t ky = 0; ky < kN[0]; ++ky)
                      for (int64_t kx = 0; kx < kLast; ++kx) {
                        const T *row =
                            col + (cw * kCount + ky * kLast + kx) * ld + i * P;
                        const int64_t a = first[kx], b = last[kx];
                        if (a >= b)
                          continue;
                        const int64_t *offsets = rowOf.data() + ky * rowsOut;
                        for (int64_t oy = 0; oy < rowsOut; ++oy) {
                          if (offsets[oy] < 0)
                            continue;
                          scatterAddRun(plane + offsets[oy] + local0[kx],
                                        row + oy * innerN + a, b - a, st);
                        }
                      }
                  }
                });
    return;
  }
  parallelFor(nCount * cwCount, static_cast<double>(kCount * P),
              [&](int64_t begin, int64_t end) {
                std::vector<int64_t> kk(sp), o(sp);
                for (int64_t task = begin; task < end; ++task) {
                  const int64_t i = task / cwCount, cw = task % cwCount;
                  T *plane = dx + (n0 + i - dX.lo[0]) * dxs[0] +
                             (chan0 + cw - dX.lo[1]) * dxs[1];
                  std::fill(kk.begin(), kk.end(), 0);
                  for (int64_t kr = 0; kr < kCount; ++kr) {
                    const T *row = col + (cw * kCount + kr) * ld + i * P;
                    const int64_t a = first[kk[in]], b = last[kk[in]];
                    std::fill(o.begin(), o.end(), 0);
                    for (int64_t r = 0; r < P / innerN && a < b; ++r) {
                      int64_t base = 0;
                      bool inside = true;
                      for (size_t s = 0; s < in; ++s) {
                        int64_t l = (o0[s] + o[s]) * g.strides[s] -
                                    g.padBegin[s] +
                                    (k0[s] + kk[s]) * g.dilations[s] -
                                    dX.lo[2 + s];
                        inside &= l >= 0 && l < dX.shape[2 + s];
                        base += l * dxs[2 + s];
                      }
                      if (inside)
                        scatterAddRun(plane + base + local0[kk[in]],
                                      row + r * innerN + a, b - a, st);
                      stepOdometer(o, oN, in);
                    }
                    stepOdometer(kk, kN, sp);
                  }
                }
              });
}

/// The local spatial box of a view: lower corner and extents.
void spatialBox(const TensorView &v, std::vector<int64_t> &lo,
                std::vector<int64_t> &n) {
  lo.assign(v.lo.begin() + 2, v.lo.end());
  n.assign(v.shape.begin() + 2, v.shape.end());
}

//===----------------------------------------------------------------------===//
// Direct kernels for one input channel per group (depthwise: group = C)
//===----------------------------------------------------------------------===//

/// With one input channel per group (Cg = 1: depthwise convolutions, W
/// [M, 1, k...]) the GEMMs would have one row (or one column) per group, so
/// these kernels convolve plane by plane instead, over 1 or 2 spatial
/// dimensions (1-D as 2-D with a unit first dimension). `Plane` holds the
/// geometry of the two dimensions: global input extent, stride, padding,
/// dilation, and the local kernel and output boxes.
struct Plane {
  int64_t in[2], st[2], pb[2], dl[2], k0[2], kN[2], o0[2], oN[2];

  /// From the geometry, W's (or dW's) spatial box and Y's (or dY's).
  Plane(const Geometry &g, const TensorView &w, const TensorView &y) {
    const size_t off = g.sp == 1 ? 1 : 0;
    for (size_t d = 0; d < 2; ++d) {
      in[d] = 1, st[d] = 1, pb[d] = 0, dl[d] = 1, k0[d] = 0, kN[d] = 1;
      o0[d] = 0, oN[d] = 1;
    }
    for (size_t s = 0; s < g.sp; ++s) {
      in[s + off] = g.in[s];
      st[s + off] = g.strides[s];
      pb[s + off] = g.padBegin[s];
      dl[s + off] = g.dilations[s];
      k0[s + off] = w.lo[2 + s];
      kN[s + off] = w.shape[2 + s];
      o0[s + off] = y.lo[2 + s];
      oN[s + off] = y.shape[2 + s];
    }
  }
  /// readsInsideInput over the plane's two dimensions.
  bool readsInside() const {
    const Geometry g2{2, 0, 0, 0, 1, 0, 0, {in[0], in[1]}, {}, {},
                      {st[0], st[1]}, {pb[0], pb[1]}, {dl[0], dl[1]}};
    return readsInsideInput(g2, k0, kN, o0, oN, 2);
  }
  /// The first input position the local outputs and kernel offsets reach in
  /// dimension d, and the extent of the positions up to the last.
  int64_t hullLo(size_t d) const {
    return o0[d] * st[d] - pb[d] + k0[d] * dl[d];
  }
  int64_t hullN(size_t d) const {
    return oN[d] == 0 || kN[d] == 0
               ? 0
               : (oN[d] - 1) * st[d] + (kN[d] - 1) * dl[d] + 1;
  }
};

/// Local box of a view's two spatial dims as Plane sees them.
void planeBox(const Geometry &g, const TensorView &v, int64_t lo[2],
              int64_t n[2]) {
  lo[0] = 0, n[0] = 1, lo[1] = 0, n[1] = 1;
  const size_t off = g.sp == 1 ? 1 : 0;
  for (size_t s = 0; s < g.sp; ++s) {
    lo[s + off] = v.lo[2 + s];
    n[s + off] = v.shape[2 + s];
  }
}

/// Copies the input hull of one (n, channel) plane of X into `pad`
/// ([hullN(0), hullN(1)], zeros outside X's global extent); false when a
/// position the convolution reads lies inside X but outside its box.
template <typename T>
bool padPlane(const Plane &p, const Geometry &g, const TensorView &X,
              const T *plane, std::vector<T> &pad, std::vector<char> &reads0,
              std::vector<char> &reads1) {
  int64_t xlo[2], xn[2];
  planeBox(g, X, xlo, xn);
  const int64_t H = p.hullN(0), W = p.hullN(1);
  const int64_t lo0 = p.hullLo(0), lo1 = p.hullLo(1);
  pad.assign(H * W, T(0));
  // The positions read: separable, rows x columns.
  reads0.assign(H, 0);
  reads1.assign(W, 0);
  for (int64_t o = 0; o < p.oN[0]; ++o)
    for (int64_t k = 0; k < p.kN[0]; ++k)
      reads0[o * p.st[0] + k * p.dl[0]] = 1;
  for (int64_t o = 0; o < p.oN[1]; ++o)
    for (int64_t k = 0; k < p.kN[1]; ++k)
      reads1[o * p.st[1] + k * p.dl[1]] = 1;
  // Columns inside X's global extent: [c0, c1); inside its box: [b0, b1).
  const int64_t c0 = std::max<int64_t>(0, -lo1),
                c1 = std::min<int64_t>(W, p.in[1] - lo1);
  const int64_t b0 = std::max<int64_t>(c0, xlo[1] - lo1),
                b1 = std::min<int64_t>(c1, xlo[1] + xn[1] - lo1);
  bool colsMissing = false;
  for (int64_t c = c0; c < c1; ++c)
    colsMissing |= reads1[c] && (c < b0 || c >= b1);
  for (int64_t r = 0; r < H; ++r) {
    const int64_t pos = lo0 + r;
    if (pos < 0 || pos >= p.in[0] || !reads0[r])
      continue;
    const int64_t l = pos - xlo[0];
    if (l < 0 || l >= xn[0] || colsMissing)
      return false;
    if (b1 > b0)
      std::copy(plane + l * xn[1] + (lo1 + b0 - xlo[1]),
                plane + l * xn[1] + (lo1 + b1 - xlo[1]), pad.data() + r * W + b0);
  }
  return true;
}

/// Y (or a partial sum over W's local kernel box) of a convolution with
/// one input channel per group, plane by plane.
template <typename T>
std::string convDirect(const Geometry &g, const TensorView &X,
                       const TensorView &W, const TensorView *B,
                       const TensorView &Y) {
  const Plane p(g, W, Y);
  const int64_t ym0 = Y.lo[1];
  const std::vector<int64_t> xs = stridesOf(X.shape), ws = stridesOf(W.shape),
                             ys = stridesOf(Y.shape);
  const int64_t H = p.hullN(0), Wd = p.hullN(1);
  const int64_t planes = Y.shape[0] * Y.shape[1];
  const bool readsX = p.readsInside();
  FirstError error;
  parallelFor(
      planes, static_cast<double>(p.oN[0] * p.oN[1] * p.kN[0] * p.kN[1] * 2),
      [&](int64_t begin, int64_t end) {
        std::vector<T> pad;
        std::vector<char> r0, r1;
        for (int64_t task = begin; task < end && !error.failed; ++task) {
          const int64_t nl = task / Y.shape[1], ml = task % Y.shape[1];
          const int64_t n = Y.lo[0] + nl, m = ym0 + ml;
          const int64_t chan = m / g.Mg; // Cg = 1
          if (!readsX) {
            pad.assign(size_t(H * Wd), T(0));
          } else if (!holds(X, 0, n, 1) || !holds(X, 1, chan, 1)) {
            error.set(lacks("X", "the batch and channel of", n, 1));
            return;
          } else if (!padPlane(p, g, X,
                        elements<T>(X) + (n - X.lo[0]) * xs[0] +
                            (chan - X.lo[1]) * xs[1],
                        pad, r0, r1)) {
            error.set(unsupportedConfiguration(kHalo));
            return;
          }
          const T *w = elements<T>(W) + (m - W.lo[0]) * ws[0];
          T *y = elements<T>(Y) + nl * ys[0] + ml * ys[1];
          const T bias = B ? elements<T>(*B)[m - B->lo[0]] : T(0);
          std::fill(y, y + p.oN[0] * p.oN[1], bias);
          for (int64_t oy = 0; oy < p.oN[0]; ++oy) {
            T *yr = y + oy * p.oN[1];
            for (int64_t ki = 0; ki < p.kN[0]; ++ki) {
              const T *pr = pad.data() + (oy * p.st[0] + ki * p.dl[0]) * Wd;
              for (int64_t kj = 0; kj < p.kN[1]; ++kj) {
                const T wv = w[ki * p.kN[1] + kj];
                const T *src = pr + kj * p.dl[1];
                if (p.st[1] == 1)
                  for (int64_t ox = 0; ox < p.oN[1]; ++ox)
                    yr[ox] += wv * src[ox];
                else
                  for (int64_t ox = 0; ox < p.oN[1]; ++ox)
                    yr[ox] += wv * src[ox * p.st[1]];
              }
            }
          }
        }
      });
  (void)H;
  return error.error;
}

/// dX of a convolution with one input channel per group, plane by plane:
/// each held output channel [yA(c), yB(c)) of the plane's group scatters
/// dY * W into the input hull, whose dX box part is then copied out.
template <typename T, typename Channels>
std::string convGradInputDirect(const Geometry &g, const TensorView &dY,
                                const TensorView &W, const TensorView &dX,
                                Channels channels) {
  const Plane p(g, W, dY);
  int64_t i0[2], iN[2];
  planeBox(g, dX, i0, iN);
  const std::vector<int64_t> dys = stridesOf(dY.shape), ws = stridesOf(W.shape),
                             dxs = stridesOf(dX.shape);
  const int64_t H = p.hullN(0), Wd = p.hullN(1);
  const int64_t lo0 = p.hullLo(0), lo1 = p.hullLo(1);
  const int64_t planes = dX.shape[0] * dX.shape[1];
  FirstError error;
  parallelFor(
      planes,
      static_cast<double>(p.oN[0] * p.oN[1] * p.kN[0] * p.kN[1] * 2 * g.Mg),
      [&](int64_t begin, int64_t end) {
        std::vector<T> acc;
        for (int64_t task = begin; task < end && !error.failed; ++task) {
          const int64_t nl = task / dX.shape[1], cl = task % dX.shape[1];
          const int64_t n = dX.lo[0] + nl, c = dX.lo[1] + cl;
          T *out = elements<T>(dX) + nl * dxs[0] + cl * dxs[1];
          int64_t yA, yB;
          if (std::string err = channels(c / g.Cg, yA, yB); !err.empty()) {
            error.set(err);
            return;
          }
          if (yB > yA && !holds(dY, 0, n, 1)) {
            error.set(lacks("dY", "batch", n, 1));
            return;
          }
          acc.assign(H * Wd, T(0));
          for (int64_t m = yA; m < yB; ++m) {
            const T *w = elements<T>(W) + (m - W.lo[0]) * ws[0];
            const T *dy = elements<T>(dY) + (n - dY.lo[0]) * dys[0] +
                          (m - dY.lo[1]) * dys[1];
            for (int64_t oy = 0; oy < p.oN[0]; ++oy) {
              const T *dr = dy + oy * p.oN[1];
              for (int64_t ki = 0; ki < p.kN[0]; ++ki) {
                T *ar = acc.data() + (oy * p.st[0] + ki * p.dl[0]) * Wd;
                for (int64_t kj = 0; kj < p.kN[1]; ++kj) {
                  const T wv = w[ki * p.kN[1] + kj];
                  T *dst = ar + kj * p.dl[1];
                  if (p.st[1] == 1)
                    for (int64_t ox = 0; ox < p.oN[1]; ++ox)
                      dst[ox] += wv * dr[ox];
                  else
                    for (int64_t ox = 0; ox < p.oN[1]; ++ox)
                      dst[ox * p.st[1]] += wv * dr[ox];
                }
              }
            }
          }
          // dX's box out of the hull (0 where the hull does not reach).
          for (int64_t r = 0; r < iN[0]; ++r) {
            T *dst = out + r * iN[1];
            const int64_t hr = i0[0] + r - lo0;
            if (hr < 0 || hr >= H || yB <= yA) {
              std::fill(dst, dst + iN[1], T(0));
              continue;
            }
            for (int64_t q = 0; q < iN[1]; ++q) {
              const int64_t hc = i0[1] + q - lo1;
              dst[q] = hc >= 0 && hc < Wd ? acc[hr * Wd + hc] : T(0);
            }
          }
        }
      });
  (void)dxs;
  return error.error;
}

/// dW of a convolution with one input channel per group: for each local
/// output channel, the correlation of dY's local box with X's plane.
template <typename T>
std::string convGradWeightDirect(const Geometry &g, const TensorView &dY,
                                 const TensorView &X, const TensorView &dW) {
  const Plane p(g, dW, dY);
  const std::vector<int64_t> dys = stridesOf(dY.shape), xs = stridesOf(X.shape);
  const int64_t Wd = p.hullN(1);
  const int64_t kCount = p.kN[0] * p.kN[1], rowN = p.oN[1];
  const bool readsX = p.readsInside();
  FirstError error;
  parallelFor(
      dW.shape[0],
      static_cast<double>(dY.shape[0] * p.oN[0] * p.oN[1] * kCount * 2),
      [&](int64_t begin, int64_t end) {
        std::vector<T> pad, sums;
        std::vector<char> r0, r1;
        for (int64_t ml = begin; ml < end && !error.failed; ++ml) {
          const int64_t m = dW.lo[0] + ml, chan = m / g.Mg; // Cg = 1
          // Per kernel offset, per output column: partial sums over the
          // rows and images (vectorizable), added up at the end.
          sums.assign(kCount * rowN, T(0));
          for (int64_t nl = 0; nl < dY.shape[0]; ++nl) {
            const int64_t n = dY.lo[0] + nl;
            if (!readsX)
              break; // every read is padding: the sums stay 0
            if (!holds(X, 0, n, 1) || !holds(X, 1, chan, 1)) {
              error.set(lacks("X", "the batch and channel of", n, 1));
              return;
            }
            if (!padPlane(p, g, X,
                          elements<T>(X) + (n - X.lo[0]) * xs[0] +
                              (chan - X.lo[1]) * xs[1],
                          pad, r0, r1)) {
              error.set(unsupportedConfiguration(kHalo));
              return;
            }
            const T *dy = elements<T>(dY) + nl * dys[0] +
                          (m - dY.lo[1]) * dys[1];
            for (int64_t oy = 0; oy < p.oN[0]; ++oy) {
              const T *dr = dy + oy * rowN;
              for (int64_t ki = 0; ki < p.kN[0]; ++ki) {
                const T *pr = pad.data() + (oy * p.st[0] + ki * p.dl[0]) * Wd;
                for (int64_t kj = 0; kj < p.kN[1]; ++kj) {
                  T *s = sums.data() + (ki * p.kN[1] + kj) * rowN;
                  const T *src = pr + kj * p.dl[1];
                  if (p.st[1] == 1)
                    for (int64_t ox = 0; ox < rowN; ++ox)
                      s[ox] += dr[ox] * src[ox];
                  else
                    for (int64_t ox = 0; ox < rowN; ++ox)
                      s[ox] += dr[ox] * src[ox * p.st[1]];
                }
              }
            }
          }
          T *dw = elements<T>(dW) + ml * kCount; // dW [mN, 1, k...]
          for (int64_t k = 0; k < kCount; ++k) {
            T total = T(0);
            for (int64_t ox = 0; ox < rowN; ++ox)
              total += sums[k * rowN + ox];
            dw[k] = total;
          }
        }
      });
  return error.error;
}

/// True when the direct kernels above take this convolution.
bool useDirect(const Geometry &g) {
  return g.Cg == 1 && g.sp <= 2 && g.G > 1;
}

//===----------------------------------------------------------------------===//
// The kernels
//===----------------------------------------------------------------------===//

template <typename T> std::string conv(const KernelArgs &args) {
  if (args.inputs.size() < 2 || args.inputs.size() > 3 ||
      args.outputs.size() != 1)
    return "expects inputs (X, W, B?) and 1 output";
  const TensorView &X = args.inputs[0], &W = args.inputs[1],
                   &Y = args.outputs[0];
  Geometry g;
  if (auto err = parseGeometry(args, X.globalShape, W.globalShape,
                               Y.globalShape, g);
      !err.empty())
    return err;
  const size_t rank = g.sp + 2;
  for (auto [v, what] : {std::pair{&X, "X"}, {&W, "W"}, {&Y, "Y"}})
    if (auto err = checkOperand<T>(*v, rank, what); !err.empty())
      return err;
  if (Y.numElements() == 0)
    return "";
  const TensorView *B = args.inputs.size() == 3 && args.inputs[2].present()
                            ? &args.inputs[2]
                            : nullptr;
  std::vector<int64_t> k0, kN, o0, oN;
  spatialBox(W, k0, kN);
  spatialBox(Y, o0, oN);
  const int64_t wc0 = W.lo[1], wcN = W.shape[1];
  const int64_t ym0 = Y.lo[1], ymN = Y.shape[1];
  if (!holds(W, 0, ym0, ymN))
    return lacks("W", "output channels", ym0, ymN);
  if (B) {
    if (B->dtype != FloatType<T>::dtype || B->shape.size() != 1 ||
        B->globalShape != std::vector<int64_t>{g.M})
      return "B must be a " + floatName<T>() + " vector of " +
             std::to_string(g.M) + " elements";
    if (!holds(*B, 0, ym0, ymN))
      return lacks("B", "output channels", ym0, ymN);
    if (wcN != g.Cg || kN != g.kernel)
      return unsupportedConfiguration(
          "a bias with a partial reduction (W holds a slice of the input "
          "channels or of the kernel)");
  }
  if (useDirect(g) && wc0 == 0 && wcN == 1)
    return convDirect<T>(g, X, W, B, Y);
  const int64_t rowLen = wcN * product(kN), P = product(oN);
  const std::vector<int64_t> ws = stridesOf(W.shape), ys = stridesOf(Y.shape);
  const int64_t images = Y.shape[0];
  // The chunk bounds the im2col matrix and the GEMM's output alike.
  const int64_t chunk =
      batchChunk(std::max(rowLen, std::min(g.Mg, ymN)), P, images);
  Scratch<T> colBuffer(0), outBuffer(1);
  T *col = colBuffer.get(rowLen * chunk * P);
  T *y = elements<T>(Y);
  for (int64_t grp = ym0 / g.Mg; grp * g.Mg < ym0 + ymN; ++grp) {
    const int64_t mA = std::max(grp * g.Mg, ym0);
    const int64_t mB = std::min((grp + 1) * g.Mg, ym0 + ymN);
    const T *w = elements<T>(W) + (mA - W.lo[0]) * ws[0];
    for (int64_t i0 = 0; i0 < images; i0 += chunk) {
      const int64_t count = std::min(chunk, images - i0), ld = count * P;
      if (auto err = im2col(X, g, Y.lo[0] + i0, count, grp * g.Cg + wc0, wcN,
                            k0, kN, o0, oN, col, ld);
          !err.empty())
        return err;
      if (count == 1) {
        // One image: straight into Y (rows of channels mA.., P apart).
        blasGemm(false, false, mB - mA, P, rowLen, T(1), w, rowLen,
                 col, P, T(0), y + i0 * ys[0] + (mA - ym0) * ys[1], P);
      } else {
        // [mB - mA, count * P] at once, then each image's rows into Y.
        T *out = outBuffer.get((mB - mA) * ld);
        blasGemm(false, false, mB - mA, ld, rowLen, T(1), w, rowLen, col, ld,
                 T(0), out, ld);
        copyRuns(out, ld, P, y + i0 * ys[0] + (mA - ym0) * ys[1], ys[1],
                 ys[0], mB - mA, count, P);
      }
      if (B)
        for (int64_t i = 0; i < count; ++i)
          for (int64_t m = mA; m < mB; ++m) {
            const T bias = elements<T>(*B)[m - B->lo[0]];
            T *row = y + (i0 + i) * ys[0] + (m - ym0) * ys[1];
            for (int64_t q = 0; q < P; ++q)
              row[q] += bias;
          }
    }
  }
  return "";
}

template <typename T> std::string convGradInput(const KernelArgs &args) {
  if (args.inputs.size() != 3 || args.outputs.size() != 1)
    return "expects inputs (dY, W, X) and 1 output";
  const TensorView &dY = args.inputs[0], &W = args.inputs[1],
                   &dX = args.outputs[0];
  Geometry g;
  if (auto err = parseGeometry(args, dX.globalShape, W.globalShape,
                               dY.globalShape, g);
      !err.empty())
    return err;
  const size_t rank = g.sp + 2, sp = g.sp;
  for (auto [v, what] : {std::pair{&dY, "dY"}, {&W, "W"}, {&dX, "dX"}})
    if (auto err = checkOperand<T>(*v, rank, what); !err.empty())
      return err;
  if (dX.numElements() == 0)
    return "";
  // The output channels summed within each group: [mmA, mmB) of the Mg,
  // the range of the first reduction variable (mm). With groups, dY and W
  // hold channel g * Mg + mm for every group g of dX's box: their boxes are
  // the hull over the groups and do not show a split of mm, so the kernel
  // takes it from the call's reduction ranges.
  int64_t mmA = 0, mmB = g.Mg;
  if (args.partialReduction && g.G > 1) {
    if (args.reductions.size() != sp + 1 ||
        args.reductions[0].extent != g.Mg)
      return unsupportedConfiguration(
          "a partial sum over part of each group's output channels without "
          "its range");
    mmA = args.reductions[0].lo;
    mmB = args.reductions[0].hi;
  }
  std::vector<int64_t> k0, kN, o0, oN, i0, iN;
  spatialBox(W, k0, kN);
  spatialBox(dY, o0, oN);
  spatialBox(dX, i0, iN);
  // dY must hold every output position that reaches dX's local box through
  // W's local kernel range.
  for (size_t s = 0; s < sp; ++s)
    for (int64_t kk = k0[s]; kk < k0[s] + kN[s]; ++kk)
      for (int64_t i = i0[s]; i < i0[s] + iN[s]; ++i) {
        int64_t t = i + g.padBegin[s] - kk * g.dilations[s];
        if (t < 0 || t % g.strides[s] != 0 || t / g.strides[s] >= g.out[s])
          continue;
        int64_t o = t / g.strides[s];
        if (o < o0[s] || o >= o0[s] + oN[s])
          return unsupportedConfiguration(
              "dY lacks output position " + std::to_string(o) +
              " of spatial dimension " + std::to_string(s) +
              " needed by dX's local box");
      }
  // The output channels [yA, yB) of group grp that the sum runs over: those
  // of [mmA, mmB) that dY and W hold (which must be the same).
  auto channels = [&](int64_t grp, int64_t &yA, int64_t &yB) -> std::string {
    const int64_t gm0 = grp * g.Mg + mmA, gm1 = grp * g.Mg + mmB;
    yA = std::max(gm0, dY.lo[1]);
    yB = std::min(gm1, dY.lo[1] + dY.shape[1]);
    const int64_t wA = std::max(gm0, W.lo[0]),
                  wB = std::min(gm1, W.lo[0] + W.shape[0]);
    if (std::max<int64_t>(yB - yA, 0) != std::max<int64_t>(wB - wA, 0) ||
        (yB > yA && yA != wA))
      return unsupportedConfiguration(
          "dY and W hold different output channels of group " +
          std::to_string(grp));
    if (yB < yA)
      yB = yA;
    return "";
  };
  if (useDirect(g) && W.lo[1] == 0 && W.shape[1] == 1)
    return convGradInputDirect<T>(g, dY, W, dX, channels);
  const int64_t xc0 = dX.lo[1], xcN = dX.shape[1];
  const int64_t kCount = product(kN), P = product(oN);
  const int64_t wRowLen = W.shape[1] * kCount;
  const std::vector<int64_t> ws = stridesOf(W.shape),
                             dys = stridesOf(dY.shape);
  T *dx = elements<T>(dX);
  std::fill(dx, dx + dX.numElements(), T(0));
  const int64_t images = dX.shape[0];
  for (int64_t nl = 0; nl < images; ++nl)
    if (!holds(dY, 0, dX.lo[0] + nl, 1))
      return lacks("dY", "batch", dX.lo[0] + nl, 1);
  Scratch<T> colBuffer(0), dyBuffer(1);
  for (int64_t grp = xc0 / g.Cg; grp * g.Cg < xc0 + xcN; ++grp) {
    const int64_t cA = std::max(grp * g.Cg, xc0);
    const int64_t cB = std::min((grp + 1) * g.Cg, xc0 + xcN);
    const int64_t cw0 = cA - grp * g.Cg, cwN = cB - cA;
    if (!holds(W, 1, cw0, cwN))
      return lacks("W", "input channels", cw0, cwN);
    int64_t yA, yB;
    if (std::string err = channels(grp, yA, yB); !err.empty())
      return err;
    if (yB <= yA)
      continue;
    const int64_t rows = cwN * kCount, mN = yB - yA;
    const int64_t chunk = batchChunk(std::max(rows, mN), P, images);
    T *col = colBuffer.get(rows * chunk * P);
    const T *w =
        elements<T>(W) + (yA - W.lo[0]) * ws[0] + (cw0 - W.lo[1]) * ws[1];
    for (int64_t c0 = 0; c0 < images; c0 += chunk) {
      const int64_t count = std::min(chunk, images - c0), ld = count * P;
      const int64_t n0 = dX.lo[0] + c0;
      // dY's channels [yA, yB) of the chunk's images as one [mN, count * P]
      // matrix (in place for one image).
      const T *dy = elements<T>(dY) + (n0 - dY.lo[0]) * dys[0] +
                    (yA - dY.lo[1]) * dys[1];
      if (count > 1) {
        T *gathered = dyBuffer.get(mN * ld);
        copyRuns(dy, dys[1], dys[0], gathered, ld, P, mN, count, P);
        dy = gathered;
      }
      blasGemm(true, false, rows, ld, mN, T(1), w, wRowLen, dy, ld, T(0), col,
               ld);
      col2im(col, ld, g, dX, n0, count, cA, cwN, k0, kN, o0, oN);
    }
  }
  return "";
}

template <typename T> std::string convGradWeight(const KernelArgs &args) {
  if (args.inputs.size() != 3 || args.outputs.size() != 1)
    return "expects inputs (dY, X, W) and 1 output";
  const TensorView &dY = args.inputs[0], &X = args.inputs[1],
                   &dW = args.outputs[0];
  Geometry g;
  if (auto err = parseGeometry(args, X.globalShape, dW.globalShape,
                               dY.globalShape, g);
      !err.empty())
    return err;
  const size_t rank = g.sp + 2;
  for (auto [v, what] : {std::pair{&dY, "dY"}, {&X, "X"}, {&dW, "dW"}})
    if (auto err = checkOperand<T>(*v, rank, what); !err.empty())
      return err;
  if (dW.numElements() == 0)
    return "";
  std::vector<int64_t> k0, kN, o0, oN;
  spatialBox(dW, k0, kN);
  spatialBox(dY, o0, oN);
  const int64_t m0 = dW.lo[0], mN = dW.shape[0];
  const int64_t c0 = dW.lo[1], cN = dW.shape[1];
  if (!holds(dY, 1, m0, mN))
    return lacks("dY", "output channels", m0, mN);
  if (useDirect(g) && c0 == 0 && cN == 1)
    return convGradWeightDirect<T>(g, dY, X, dW);
  const int64_t rowLen = cN * product(kN), P = product(oN);
  const std::vector<int64_t> dys = stridesOf(dY.shape);
  T *dw = elements<T>(dW);
  std::fill(dw, dw + dW.numElements(), T(0));
  const int64_t images = dY.shape[0];
  // The chunk bounds the im2col matrix and the gathered dY alike.
  const int64_t chunk =
      batchChunk(std::max(rowLen, std::min(g.Mg, mN)), P, images);
  Scratch<T> colBuffer(0), dyBuffer(1);
  T *col = colBuffer.get(rowLen * chunk * P);
  for (int64_t grp = m0 / g.Mg; grp * g.Mg < m0 + mN; ++grp) {
    const int64_t mA = std::max(grp * g.Mg, m0);
    const int64_t mB = std::min((grp + 1) * g.Mg, m0 + mN);
    for (int64_t i0 = 0; i0 < images; i0 += chunk) {
      const int64_t count = std::min(chunk, images - i0), ld = count * P;
      if (auto err = im2col(X, g, dY.lo[0] + i0, count, grp * g.Cg + c0, cN,
                            k0, kN, o0, oN, col, ld);
          !err.empty())
        return err;
      const T *dy = elements<T>(dY) + i0 * dys[0] + (mA - dY.lo[1]) * dys[1];
      if (count > 1) {
        T *gathered = dyBuffer.get((mB - mA) * ld);
        copyRuns(dy, dys[1], dys[0], gathered, ld, P, mB - mA, count, P);
        dy = gathered;
      }
      blasGemm(false, true, mB - mA, rowLen, ld, T(1), dy, ld, col, ld,
               T(1), dw + (mA - m0) * rowLen, rowLen);
    }
  }
  return "";
}

template <typename T> std::string convBiasGrad(const KernelArgs &args) {
  if (args.inputs.size() != 1 || args.outputs.size() != 1)
    return "expects input dY and 1 output";
  const TensorView &dY = args.inputs[0], &dB = args.outputs[0];
  if (!isFloat<T>(dY) || dY.shape.size() < 2)
    return "dY must be a " + floatName<T>() + " tensor of rank >= 2";
  if (dB.dtype != FloatType<T>::dtype || dB.shape.size() != 1 ||
      dB.globalShape[0] != dY.globalShape[1])
    return "dB must be a " + floatName<T>() + " vector of " +
           std::to_string(dY.globalShape[1]) + " elements";
  if (!holds(dY, 1, dB.lo[0], dB.shape[0]))
    return lacks("dY", "channels", dB.lo[0], dB.shape[0]);
  const std::vector<int64_t> s = stridesOf(dY.shape);
  const int64_t inner = s[1];
  T *db = elements<T>(dB);
  // Each channel's sum in double, in kLanes interleaved partial sums (lane
  // l adds the elements at i = l mod kLanes of each image's plane), added
  // in a fixed order at the end: the loop vectorizes, where one running sum
  // was a chain of dependent adds (about 1 ns an element here; bench/
  // simulate.md, session 38). Channels are split over the pool.
  constexpr int64_t kLanes = 8;
  parallelFor(dB.shape[0], double(dY.shape[0] * inner),
              [&](int64_t c0, int64_t c1) {
                for (int64_t c = c0; c < c1; ++c) {
                  double lanes[kLanes] = {};
                  const int64_t cl = dB.lo[0] + c - dY.lo[1];
                  for (int64_t n = 0; n < dY.shape[0]; ++n) {
                    const T *p = elements<T>(dY) + n * s[0] + cl * s[1];
                    int64_t i = 0;
                    for (; i + kLanes <= inner; i += kLanes)
                      for (int64_t l = 0; l < kLanes; ++l)
                        lanes[l] += double(p[i + l]);
                    for (; i < inner; ++i)
                      lanes[i % kLanes] += double(p[i]);
                  }
                  double sum = 0;
                  for (double lane : lanes)
                    sum += lane;
                  db[c] = static_cast<T>(sum);
                }
              });
  return "";
}

} // namespace

void tofu::runtime::registerConvKernels(void (*addKernel)(const char *,
                                                          KernelFn)) {
  addKernel("Conv", byFloatType<conv<float>, conv<double>>);
  addKernel("ConvGradInput",
            byFloatType<convGradInput<float>, convGradInput<double>>);
  addKernel("ConvGradWeight",
            byFloatType<convGradWeight<float>, convGradWeight<double>>);
  addKernel("ConvBiasGrad",
            byFloatType<convBiasGrad<float>, convBiasGrad<double>>);
}
