//===- KernelsPool.cpp - MaxPool, AveragePool and their gradients ---------===//
//
// Native kernels of tdl-specs/pool.tdl's MaxPool (Y and Indices),
// MaxPoolGrad, GlobalMaxPoolGrad, AveragePool, AveragePoolGrad,
// GlobalAveragePool and GlobalAveragePoolGrad over any
// number of spatial dims (X [N, C, *S], float32 or float64: one template
// per kernel, FloatKernel.h), with the specs' geometry: strides and
// dilations default to 1, pads to 0, auto_pad SAME_UPPER / SAME_LOWER /
// VALID, ceil_mode (the output extents come from the output's global
// shape), count_include_pad, storage_order 0 / 1 for Indices. Padding cells
// read as -3.4e38 in MaxPool (as the spec's select), so they never win.
//
// Every operand is read at global coordinates: a cell inside the tensor but
// outside the local box is an error (the plan gave the device too little),
// a cell outside the tensor is padding. Threaded over (n, c) planes.
//
// MaxPoolGrad scatters each window's dY to the one cell the spec picks: the
// first in-bounds cell of the window (row-major kernel offsets) equal to the
// window's Y, as PyTorch and MaxPool's Indices (ties do not share dY).
//
// A split of the kernel offsets (the top-level reduction of AveragePool,
// AveragePoolGrad and MaxPoolGrad) is a partial sum over the offsets in the
// call's reduction ranges (KernelArgs::reductions): MaxPoolGrad still picks
// each window's cell over the whole window, and counts it only when its
// offset lies in the range.
//
// The compiler materializes each output of a multi-output op as its own
// instruction: MaxPool tells Y (float) from Indices (int64) by type.
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

/// The pooling geometry of one spatial layout.
struct Pool {
  size_t nsp = 0;
  std::vector<int64_t> in, out, kernel, stride, dilation, padBegin, padEnd;
  bool countIncludePad = false;

  /// Reads the attributes for input spatial extents `inDims` and output
  /// spatial extents `outDims`.
  std::string init(const KernelArgs &args, const std::vector<int64_t> &inDims,
                   const std::vector<int64_t> &outDims) {
    nsp = inDims.size();
    in = inDims;
    out = outDims;
    kernel = args.intsAttr("kernel_shape", {});
    if (kernel.size() != nsp)
      return "kernel_shape needs " + std::to_string(nsp) + " entries";
    std::vector<int64_t> strides = args.intsAttr("strides", {});
    std::vector<int64_t> dilations = args.intsAttr("dilations", {});
    std::vector<int64_t> pads = args.intsAttr("pads", {});
    std::string autoPad = args.stringAttr("auto_pad", "NOTSET");
    countIncludePad = args.intAttr("count_include_pad", 0) != 0;
    stride.assign(nsp, 1);
    dilation.assign(nsp, 1);
    padBegin.assign(nsp, 0);
    padEnd.assign(nsp, 0);
    for (size_t s = 0; s < nsp; ++s) {
      if (s < strides.size())
        stride[s] = strides[s];
      if (s < dilations.size())
        dilation[s] = dilations[s];
      if (stride[s] < 1 || dilation[s] < 1 || kernel[s] < 1)
        return "strides, dilations and kernel_shape must be positive";
      if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
        int64_t total = std::max<int64_t>(
            0, ((in[s] + stride[s] - 1) / stride[s] - 1) * stride[s] +
                   (kernel[s] - 1) * dilation[s] + 1 - in[s]);
        padBegin[s] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
        padEnd[s] = total - padBegin[s];
      } else if (autoPad == "NOTSET") {
        if (!pads.empty() && pads.size() != 2 * nsp)
          return "pads needs " + std::to_string(2 * nsp) + " entries";
        if (!pads.empty()) {
          padBegin[s] = pads[s];
          padEnd[s] = pads[s + nsp];
        }
      } else if (autoPad != "VALID") {
        return "unknown auto_pad '" + autoPad + "'";
      }
    }
    return "";
  }

  /// Number of cells AveragePool divides window `o` of dim s by: the whole
  /// kernel with count_include_pad (also past the end padding, as onnx's
  /// reference), else the window's cells inside X.
  int64_t count(size_t s, int64_t o) const {
    if (countIncludePad)
      return kernel[s];
    int64_t start = o * stride[s] - padBegin[s];
    int64_t lo = 0, hi = in[s];
    auto ceilDiv = [](int64_t a, int64_t b) {
      return a >= 0 ? (a + b - 1) / b : -((-a) / b);
    };
    int64_t first = std::max<int64_t>(0, ceilDiv(lo - start, dilation[s]));
    int64_t last = std::min(kernel[s], ceilDiv(hi - start, dilation[s]));
    return std::max<int64_t>(0, last - first);
  }
};

/// A view read at global coordinates, with its local strides.
struct Reader {
  const TensorView *v = nullptr;
  std::vector<int64_t> strides;

  explicit Reader(const TensorView &view) : v(&view) {
    strides.assign(view.shape.size(), 1);
    for (size_t d = view.shape.size(); d-- > 1;)
      strides[d - 1] = strides[d] * view.shape[d];
  }
  /// Offset of global [n, c, *g] into the local box; -1 outside the tensor
  /// (padding), -2 inside the tensor but outside the box.
  int64_t offset(int64_t n, int64_t c, const int64_t *g) const {
    int64_t off = 0;
    for (size_t d = 0; d < strides.size(); ++d) {
      int64_t x = d == 0 ? n : d == 1 ? c : g[d - 2];
      if (x < 0 || x >= v->globalShape[d])
        return -1;
      int64_t local = x - v->lo[d];
      if (local < 0 || local >= v->shape[d])
        return -2;
      off += local * strides[d];
    }
    return off;
  }
};

const char kPartialWindow[] =
    "a partial sum over part of the pooling window (a split of the kernel "
    "offsets)";

/// The kernel offsets [kLo[s], kHi[s]) a call sums over: with a partial
/// sum over part of the window (the plan split the top-level reduction over
/// the kernel offsets), the call's reduction ranges; else the whole kernel.
/// unsupportedConfiguration when the ranges do not fit the kernel.
std::string windowRange(const KernelArgs &args, const std::vector<int64_t> &kernel,
                        std::vector<int64_t> &kLo, std::vector<int64_t> &kHi) {
  kLo.assign(kernel.size(), 0);
  kHi = kernel;
  if (!args.partialReduction)
    return "";
  if (args.reductions.size() != kernel.size())
    return unsupportedConfiguration(kPartialWindow);
  for (size_t s = 0; s < kernel.size(); ++s) {
    const KernelArgs::ReductionSpan &r = args.reductions[s];
    if (r.extent != kernel[s] || r.lo < 0 || r.hi > kernel[s])
      return unsupportedConfiguration(kPartialWindow);
    kLo[s] = r.lo;
    kHi[s] = r.hi;
  }
  return "";
}

/// True when kernel offsets `k` lie in [kLo, kHi).
bool inRange(const std::vector<int64_t> &k, const std::vector<int64_t> &kLo,
             const std::vector<int64_t> &kHi) {
  for (size_t s = 0; s < k.size(); ++s)
    if (k[s] < kLo[s] || k[s] >= kHi[s])
      return false;
  return true;
}

const char kTooLittle[] =
    "an operand's box lacks a cell a window needs (the plan gave this device "
    "too little of it)";

/// Calls `f(n, c, g, outOffset)` for every element of `out`'s box (g: its
/// global spatial coordinates), threaded over the box's (n, c) planes
/// (each thread calls its own copy of `f`, so scratch state captured by
/// value is per thread); stops at the first error `f` returns.
template <typename F>
std::string forEachOutput(const TensorView &out, double workPerElement, F f) {
  const size_t nsp = out.shape.size() - 2;
  int64_t plane = 1;
  for (size_t s = 0; s < nsp; ++s)
    plane *= out.shape[s + 2];
  const int64_t planes = out.shape[0] * out.shape[1];
  std::vector<std::string> errors(planes);
  parallelFor(planes, workPerElement * static_cast<double>(plane),
              [&](int64_t begin, int64_t end) {
                F local = f; // per-thread scratch captured by f
                std::vector<int64_t> g(nsp);
                for (int64_t p = begin; p < end; ++p) {
                  int64_t n = out.lo[0] + p / out.shape[1];
                  int64_t c = out.lo[1] + p % out.shape[1];
                  for (size_t s = 0; s < nsp; ++s)
                    g[s] = out.lo[s + 2];
                  for (int64_t e = 0; e < plane; ++e) {
                    std::string err = local(n, c, g.data(), p * plane + e);
                    if (!err.empty()) {
                      errors[p] = err;
                      return;
                    }
                    for (size_t s = nsp; s-- > 0;) {
                      if (++g[s] < out.lo[s + 2] + out.shape[s + 2])
                        break;
                      g[s] = out.lo[s + 2];
                    }
                  }
                }
              });
  for (const std::string &err : errors)
    if (!err.empty())
      return err;
  return "";
}

/// Calls `f(k, x, inside)` for every kernel offset of window `o` (global
/// output coordinates): x = o * stride + k * dilation - padBegin, inside =
/// x lies in the input's spatial extents.
template <typename F>
void forWindow(const Pool &pool, const int64_t *o, std::vector<int64_t> &k,
               std::vector<int64_t> &x, F f) {
  const size_t nsp = pool.nsp;
  int64_t cells = 1;
  for (size_t s = 0; s < nsp; ++s)
    cells *= pool.kernel[s];
  std::fill(k.begin(), k.end(), 0);
  for (int64_t e = 0; e < cells; ++e) {
    bool inside = true;
    for (size_t s = 0; s < nsp; ++s) {
      x[s] = o[s] * pool.stride[s] + k[s] * pool.dilation[s] - pool.padBegin[s];
      inside &= x[s] >= 0 && x[s] < pool.in[s];
    }
    f(inside);
    for (size_t s = nsp; s-- > 0;) {
      if (++k[s] < pool.kernel[s])
        break;
      k[s] = 0;
    }
  }
}

std::vector<int64_t> spatial(const std::vector<int64_t> &shape) {
  return std::vector<int64_t>(shape.begin() + 2, shape.end());
}

template <typename T> std::string checkPoolInput(const TensorView &x) {
  if (!isFloat<T>(x) || x.globalShape.size() < 3)
    return "X must be a " + floatName<T>() + " tensor [N, C, spatial...]";
  return "";
}

/// Floor and ceiling of a / b for b > 0.
int64_t floorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

//===----------------------------------------------------------------------===//
// MaxPool and MaxPoolGrad over 1 or 2 spatial dims: per-plane loops over
// precomputed windows (1-D as 2-D with a unit first dim). They take the
// boxes where X holds every in-bounds cell of the windows they visit (and
// Y, dY every window); anything else goes to the generic loops above,
// which read cell by cell and name what is missing.
//===----------------------------------------------------------------------===//

/// One window per output position o of an axis: the kernel offsets
/// [kA, kB) whose cells lie inside the input's global extent, whether the
/// window also covers padding, and the local index (in a view's box) of
/// cell kA.
struct Windows {
  std::vector<int64_t> kA, kB, local;
  std::vector<char> padded;
  int64_t st = 1, dl = 1; ///< input stride of o and of k (local index)
};

/// The two spatial axes of `pool` (a unit axis first for 1-D).
struct Axes {
  int64_t in[2] = {1, 1}, k[2] = {1, 1}, st[2] = {1, 1}, dl[2] = {1, 1},
          pb[2] = {0, 0};
  explicit Axes(const Pool &pool) {
    const size_t off = pool.nsp == 1 ? 1 : 0;
    for (size_t s = 0; s < pool.nsp; ++s) {
      in[s + off] = pool.in[s];
      k[s + off] = pool.kernel[s];
      st[s + off] = pool.stride[s];
      dl[s + off] = pool.dilation[s];
      pb[s + off] = pool.padBegin[s];
    }
  }
};

/// The spatial box of view `v` on the two axes.
void axesBox(const TensorView &v, int64_t lo[2], int64_t n[2]) {
  lo[0] = 0, n[0] = 1, lo[1] = 0, n[1] = 1;
  const size_t nsp = v.shape.size() - 2, off = nsp == 1 ? 1 : 0;
  for (size_t s = 0; s < nsp; ++s) {
    lo[s + off] = v.lo[s + 2];
    n[s + off] = v.shape[s + 2];
  }
}

/// The windows of outputs [o0, o0 + oN) of axis a, with local indices into
/// a box [xlo, xlo + xn) of the input; false when an in-bounds cell lies
/// outside the box.
bool windowsOf(const Axes &ax, size_t a, int64_t o0, int64_t oN, int64_t xlo,
               int64_t xn, Windows &w) {
  w.kA.resize(oN);
  w.kB.resize(oN);
  w.local.resize(oN);
  w.padded.resize(oN);
  w.st = ax.st[a];
  w.dl = ax.dl[a];
  for (int64_t o = 0; o < oN; ++o) {
    int64_t start = (o0 + o) * ax.st[a] - ax.pb[a];
    int64_t kA = std::max<int64_t>(0, ceilDiv(-start, ax.dl[a]));
    int64_t kB = std::min<int64_t>(ax.k[a], ceilDiv(ax.in[a] - start, ax.dl[a]));
    kB = std::max(kA, kB);
    w.kA[o] = kA;
    w.kB[o] = kB;
    w.padded[o] = kB - kA < ax.k[a];
    w.local[o] = start + kA * ax.dl[a] - xlo;
    if (kB > kA && (w.local[o] < 0 ||
                    w.local[o] + (kB - 1 - kA) * ax.dl[a] >= xn))
      return false;
  }
  return true;
}

/// True when view `v` holds batch and channel rows [n0, n0 + nN) x
/// [c0, c0 + cN).
bool holdsPlanes(const TensorView &v, int64_t n0, int64_t nN, int64_t c0,
                 int64_t cN) {
  return n0 >= v.lo[0] && n0 + nN <= v.lo[0] + v.shape[0] && c0 >= v.lo[1] &&
         c0 + cN <= v.lo[1] + v.shape[1];
}

/// MaxPool's Y by windows; false (nothing written) when the boxes need
/// the generic loop.
template <typename T>
bool maxPoolFast(const Pool &pool, const TensorView &x, const TensorView &y) {
  if (pool.nsp > 2 ||
      !holdsPlanes(x, y.lo[0], y.shape[0], y.lo[1], y.shape[1]))
    return false;
  const Axes ax(pool);
  int64_t xlo[2], xn[2], olo[2], on[2];
  axesBox(x, xlo, xn);
  axesBox(y, olo, on);
  Windows w0, w1;
  if (!windowsOf(ax, 0, olo[0], on[0], xlo[0], xn[0], w0) ||
      !windowsOf(ax, 1, olo[1], on[1], xlo[1], xn[1], w1))
    return false;
  const T lowest = static_cast<T>(-3.4e38); // the spec's padding value
  const int64_t plane = on[0] * on[1], xPlane = xn[0] * xn[1];
  const int64_t planes = y.shape[0] * y.shape[1];
  const T *xp = elements<T>(x);
  T *yp = elements<T>(y);
  parallelFor(planes, static_cast<double>(plane * ax.k[0] * ax.k[1] + 8),
              [&](int64_t begin, int64_t end) {
                for (int64_t p = begin; p < end; ++p) {
                  const int64_t n = y.lo[0] + p / y.shape[1];
                  const int64_t c = y.lo[1] + p % y.shape[1];
                  const T *xs = xp + ((n - x.lo[0]) * x.shape[1] +
                                      (c - x.lo[1])) * xPlane;
                  T *out = yp + p * plane;
                  for (int64_t oy = 0; oy < on[0]; ++oy)
                    for (int64_t ox = 0; ox < on[1]; ++ox) {
                      T best = -std::numeric_limits<T>::infinity();
                      if (w0.padded[oy] || w1.padded[ox])
                        best = lowest;
                      const int64_t nx = w1.kB[ox] - w1.kA[ox];
                      for (int64_t ky = 0; ky < w0.kB[oy] - w0.kA[oy]; ++ky) {
                        const T *row = xs + (w0.local[oy] + ky * w0.dl) * xn[1] +
                                       w1.local[ox];
                        for (int64_t kx = 0; kx < nx; ++kx)
                          best = std::max(best, row[kx * w1.dl]);
                      }
                      out[oy * on[1] + ox] = best;
                    }
                }
              });
  return true;
}

/// MaxPoolGrad by windows: each window of [oLo, oHi) gives its dY to the
/// first in-bounds cell (row-major kernel offsets) equal to its Y, when
/// that cell lies in dX's box. False (nothing written) when the boxes need
/// the generic loop.
template <typename T>
bool maxPoolGradFast(const Pool &pool, const TensorView &dy,
                     const TensorView &x, const TensorView &y,
                     const TensorView &dx, const std::vector<int64_t> &oLoV,
                     const std::vector<int64_t> &oHiV,
                     const std::vector<int64_t> &kLoV,
                     const std::vector<int64_t> &kHiV) {
  if (pool.nsp > 2)
    return false;
  const int64_t n0 = dx.lo[0], nN = dx.shape[0], c0 = dx.lo[1],
                cN = dx.shape[1];
  if (!holdsPlanes(x, n0, nN, c0, cN) || !holdsPlanes(y, n0, nN, c0, cN) ||
      !holdsPlanes(dy, n0, nN, c0, cN) || y.lo != dy.lo || y.shape != dy.shape)
    return false;
  const Axes ax(pool);
  const size_t off = pool.nsp == 1 ? 1 : 0;
  int64_t oLo[2] = {0, 0}, oN[2] = {1, 1}, kLo[2] = {0, 0}, kHi[2] = {1, 1};
  for (size_t s = 0; s < pool.nsp; ++s) {
    oLo[s + off] = oLoV[s];
    oN[s + off] = std::max<int64_t>(0, oHiV[s] - oLoV[s]);
    kLo[s + off] = kLoV[s];
    kHi[s + off] = kHiV[s];
  }
  int64_t xlo[2], xn[2], ylo[2], yn[2], dlo[2], dn[2];
  axesBox(x, xlo, xn);
  axesBox(y, ylo, yn);
  axesBox(dx, dlo, dn);
  for (size_t a = 0; a < 2; ++a)
    if (oN[a] > 0 && (oLo[a] < ylo[a] || oLo[a] + oN[a] > ylo[a] + yn[a]))
      return false;
  Windows w0, w1;
  if (!windowsOf(ax, 0, oLo[0], oN[0], xlo[0], xn[0], w0) ||
      !windowsOf(ax, 1, oLo[1], oN[1], xlo[1], xn[1], w1))
    return false;
  // dX's box in X's local coordinates.
  const int64_t dOff0 = dlo[0] - xlo[0], dOff1 = dlo[1] - xlo[1];
  const int64_t plane = dn[0] * dn[1], xPlane = xn[0] * xn[1],
                yPlane = yn[0] * yn[1];
  const int64_t planes = nN * cN;
  const T *xp = elements<T>(x), *yp = elements<T>(y), *gp = elements<T>(dy);
  T *dxp = elements<T>(dx);
  parallelFor(
      planes, static_cast<double>(oN[0] * oN[1] * ax.k[0] * ax.k[1] + plane) + 8,
      [&](int64_t begin, int64_t end) {
        std::vector<double> acc(plane);
        for (int64_t p = begin; p < end; ++p) {
          const int64_t n = n0 + p / cN, c = c0 + p % cN;
          const T *xs = xp + ((n - x.lo[0]) * x.shape[1] + (c - x.lo[1])) * xPlane;
          const int64_t yOff =
              ((n - y.lo[0]) * y.shape[1] + (c - y.lo[1])) * yPlane;
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t oy = 0; oy < oN[0]; ++oy)
            for (int64_t ox = 0; ox < oN[1]; ++ox) {
              const int64_t at =
                  yOff + (oLo[0] + oy - ylo[0]) * yn[1] + (oLo[1] + ox - ylo[1]);
              const T yv = yp[at];
              const int64_t nx = w1.kB[ox] - w1.kA[ox];
              int64_t hitY = -1, hitX = -1, qy = 0, qx = 0;
              for (int64_t ky = 0; ky < w0.kB[oy] - w0.kA[oy] && hitY < 0; ++ky) {
                const int64_t ly = w0.local[oy] + ky * w0.dl;
                const T *row = xs + ly * xn[1];
                for (int64_t kx = 0; kx < nx; ++kx) {
                  const int64_t lx = w1.local[ox] + kx * w1.dl;
                  if (row[lx] == yv) {
                    hitY = ly;
                    hitX = lx;
                    qy = w0.kA[oy] + ky;
                    qx = w1.kA[ox] + kx;
                    break;
                  }
                }
              }
              // Counted only at the kernel offsets this call sums over.
              if (hitY < 0 || qy < kLo[0] || qy >= kHi[0] || qx < kLo[1] ||
                  qx >= kHi[1])
                continue;
              const int64_t ry = hitY - dOff0, rx = hitX - dOff1;
              if (ry >= 0 && ry < dn[0] && rx >= 0 && rx < dn[1])
                acc[ry * dn[1] + rx] += static_cast<double>(gp[at]);
            }
          T *out = dxp + p * plane;
          for (int64_t e = 0; e < plane; ++e)
            out[e] = static_cast<T>(acc[e]);
        }
      });
  return true;
}

template <typename T> std::string maxPool(const KernelArgs &args) {
  if (args.inputs.size() != 1 || args.outputs.empty() ||
      args.outputs.size() > 2)
    return "expects input X and outputs (Y[, Indices])";
  const TensorView &x = args.inputs[0];
  if (std::string err = checkPoolInput<T>(x); !err.empty())
    return err;
  Pool pool;
  if (std::string err =
          pool.init(args, spatial(x.globalShape), spatial(args.outputs[0].globalShape));
      !err.empty())
    return err;
  int64_t order = args.intAttr("storage_order", 0);
  const TensorView *y = nullptr, *indices = nullptr;
  for (const TensorView &out : args.outputs) {
    if (out.globalShape.size() != x.globalShape.size())
      return "outputs must have X's rank";
    if (out.dtype == FloatType<T>::dtype)
      y = &out;
    else if (out.dtype == DType::I64)
      indices = &out;
    else
      return "outputs are Y (" + floatName<T>() + ") and Indices (int64)";
  }
  if (y && indices && (y->lo != indices->lo || y->shape != indices->shape))
    return unsupportedConfiguration("Y and Indices have different boxes");
  if (y && !indices && maxPoolFast<T>(pool, x, *y))
    return "";
  const TensorView &box = y ? *y : *indices;
  // Indices: flat index into X, spatial part row- or column-major.
  std::vector<int64_t> sstr(pool.nsp, 1);
  int64_t plane = 1;
  for (size_t s = 0; s < pool.nsp; ++s)
    plane *= pool.in[s];
  for (size_t s = 0; s < pool.nsp; ++s)
    for (size_t t = 0; t < pool.nsp; ++t)
      if (order == 0 ? t > s : t < s)
        sstr[s] *= pool.in[t];
  const int64_t C = x.globalShape[1];
  Reader reader(x);
  const T lowest = static_cast<T>(-3.4e38); // the spec's padding value
  return forEachOutput(box, static_cast<double>(x.numElements()) /
                                std::max<int64_t>(1, box.numElements()) + 4,
                       [&, k = std::vector<int64_t>(pool.nsp),
                        xs = std::vector<int64_t>(pool.nsp)](
                           int64_t n, int64_t c, const int64_t *o,
                           int64_t at) mutable -> std::string {
    double best = -std::numeric_limits<double>::infinity();
    bool missing = false;
    forWindow(pool, o, k, xs, [&](bool inside) {
      double v = lowest;
      if (inside) {
        int64_t off = reader.offset(n, c, xs.data());
        if (off < 0) {
          missing = true;
          return;
        }
        v = elements<T>(x)[off];
      }
      best = std::max(best, v);
    });
    if (missing)
      return kTooLittle;
    if (y)
      elements<T>(*y)[at] = static_cast<T>(best);
    if (indices) {
      int64_t index = 9000000000000000000LL;
      forWindow(pool, o, k, xs, [&](bool inside) {
        if (!inside || index != 9000000000000000000LL)
          return;
        if (static_cast<double>(
                elements<T>(x)[reader.offset(n, c, xs.data())]) == best) {
          int64_t flat = (n * C + c) * plane;
          for (size_t s = 0; s < pool.nsp; ++s)
            flat += xs[s] * sstr[s];
          index = flat;
        }
      });
      indices->i64()[at] = index;
    }
    return "";
  });
}

template <typename T> std::string averagePool(const KernelArgs &args) {
  if (args.inputs.size() != 1 || args.outputs.size() != 1)
    return "expects input X and output Y";
  const TensorView &x = args.inputs[0], &y = args.outputs[0];
  if (std::string err = checkPoolInput<T>(x); !err.empty())
    return err;
  if (y.dtype != FloatType<T>::dtype ||
      y.globalShape.size() != x.globalShape.size())
    return "Y must be " + floatName<T>() + " with X's rank";
  Pool pool;
  if (std::string err =
          pool.init(args, spatial(x.globalShape), spatial(y.globalShape));
      !err.empty())
    return err;
  std::vector<int64_t> kLo, kHi;
  if (std::string err = windowRange(args, pool.kernel, kLo, kHi); !err.empty())
    return err;
  Reader reader(x);
  return forEachOutput(y, static_cast<double>(x.numElements()) /
                              std::max<int64_t>(1, y.numElements()) + 4,
                       [&, k = std::vector<int64_t>(pool.nsp),
                        xs = std::vector<int64_t>(pool.nsp)](
                           int64_t n, int64_t c, const int64_t *o,
                           int64_t at) mutable -> std::string {
    double sum = 0;
    bool missing = false;
    forWindow(pool, o, k, xs, [&](bool inside) {
      if (!inside || !inRange(k, kLo, kHi))
        return;
      int64_t off = reader.offset(n, c, xs.data());
      if (off < 0) {
        missing = true;
        return;
      }
      sum += elements<T>(x)[off];
    });
    if (missing)
      return kTooLittle;
    double count = 1;
    for (size_t s = 0; s < pool.nsp; ++s)
      count *= static_cast<double>(pool.count(s, o[s]));
    elements<T>(y)[at] = static_cast<T>(sum / count);
    return "";
  });
}

/// Shared by the gradients: calls `f(o, k)` for every window o (global
/// output coordinates, inside the output extents) that contains input cell
/// `x` at kernel offset k.
template <typename F>
void forWindowsOf(const Pool &pool, const int64_t *x, std::vector<int64_t> &k,
                  std::vector<int64_t> &o, F f) {
  const size_t nsp = pool.nsp;
  int64_t cells = 1;
  for (size_t s = 0; s < nsp; ++s)
    cells *= pool.kernel[s];
  std::fill(k.begin(), k.end(), 0);
  for (int64_t e = 0; e < cells; ++e) {
    bool hit = true;
    for (size_t s = 0; s < nsp && hit; ++s) {
      int64_t start = x[s] + pool.padBegin[s] - k[s] * pool.dilation[s];
      hit = start >= 0 && start % pool.stride[s] == 0 &&
            start / pool.stride[s] < pool.out[s];
      o[s] = hit ? start / pool.stride[s] : 0;
    }
    if (hit)
      f();
    for (size_t s = nsp; s-- > 0;) {
      if (++k[s] < pool.kernel[s])
        break;
      k[s] = 0;
    }
  }
}

/// The row-major offset, within one (n, c) plane of `box`, of the spatial
/// cell at global coordinates `g`; -1 when the cell lies outside the box.
int64_t planeOffset(const TensorView &box, const std::vector<int64_t> &g) {
  int64_t at = 0;
  for (size_t s = 0; s < g.size(); ++s) {
    int64_t local = g[s] - box.lo[s + 2];
    if (local < 0 || local >= box.shape[s + 2])
      return -1;
    at = at * box.shape[s + 2] + local;
  }
  return at;
}

/// MaxPoolGrad as argmax-then-scatter: each window o whose cells meet dX's
/// box gives its dY to the first in-bounds cell of the window (row-major
/// kernel offsets, as the spec's nested `min`) equal to its Y, when that
/// cell lies in the box. Threaded over dX's (n, c) planes.
template <typename T> std::string maxPoolGrad(const KernelArgs &args) {
  if (args.inputs.size() != 3 || args.outputs.size() != 1)
    return "expects inputs (dY, X, Y) and output dX";
  const TensorView &dy = args.inputs[0], &x = args.inputs[1],
                   &y = args.inputs[2], &dx = args.outputs[0];
  if (std::string err = checkPoolInput<T>(x); !err.empty())
    return err;
  if (!isFloat<T>(dy) || !isFloat<T>(y) || dx.dtype != FloatType<T>::dtype ||
      dy.globalShape != y.globalShape || dx.globalShape != x.globalShape)
    return "dY and Y must be " + floatName<T>() +
           " of Y's shape, dX of X's "
           "shape";
  Pool pool;
  if (std::string err =
          pool.init(args, spatial(x.globalShape), spatial(y.globalShape));
      !err.empty())
    return err;
  const size_t nsp = pool.nsp;
  // A partial sum over part of the window: the windows give dY to their
  // argmax cell (over the whole window) only at kernel offsets [kLo, kHi).
  std::vector<int64_t> kLo, kHi;
  if (std::string err = windowRange(args, pool.kernel, kLo, kHi); !err.empty())
    return err;
  // The windows that may have a cell in dX's box, per spatial dim: [oLo, oHi).
  std::vector<int64_t> xLo(nsp), xHi(nsp), oLo(nsp), oHi(nsp);
  int64_t windows = 1, plane = 1;
  for (size_t s = 0; s < nsp; ++s) {
    xLo[s] = dx.lo[s + 2];
    xHi[s] = xLo[s] + dx.shape[s + 2];
    plane *= dx.shape[s + 2];
    oLo[s] = std::max<int64_t>(
        0, ceilDiv(xLo[s] + pool.padBegin[s] - (kHi[s] - 1) * pool.dilation[s],
                   pool.stride[s]));
    oHi[s] = std::min<int64_t>(
        pool.out[s], floorDiv(xHi[s] - 1 + pool.padBegin[s] -
                                  kLo[s] * pool.dilation[s],
                              pool.stride[s]) +
                         1);
    windows *= std::max<int64_t>(0, oHi[s] - oLo[s]);
  }
  if (maxPoolGradFast<T>(pool, dy, x, y, dx, oLo, oHi, kLo, kHi))
    return "";
  int64_t cells = 1;
  for (size_t s = 0; s < nsp; ++s)
    cells *= pool.kernel[s];
  Reader rdy(dy), rx(x), ry(y);
  const int64_t planes = dx.shape[0] * dx.shape[1];
  std::vector<std::string> errors(planes);
  parallelFor(
      planes, static_cast<double>(windows * cells + plane) + 8,
      [&](int64_t begin, int64_t end) {
        std::vector<int64_t> o(nsp), k(nsp), xs(nsp), hit(nsp), hitK(nsp);
        std::vector<double> acc(plane);
        for (int64_t p = begin; p < end; ++p) {
          const int64_t n = dx.lo[0] + p / dx.shape[1];
          const int64_t c = dx.lo[1] + p % dx.shape[1];
          std::fill(acc.begin(), acc.end(), 0.0);
          bool empty = windows == 0;
          for (size_t s = 0; s < nsp; ++s)
            o[s] = oLo[s];
          for (int64_t w = 0; w < windows && !empty; ++w) {
            // Whether some kernel offset of window o lands in the box (a
            // dilated window may straddle it without a cell inside).
            bool meets = true;
            for (size_t s = 0; s < nsp && meets; ++s) {
              int64_t start = o[s] * pool.stride[s] - pool.padBegin[s];
              int64_t kMin = std::max<int64_t>(
                  kLo[s], ceilDiv(xLo[s] - start, pool.dilation[s]));
              int64_t kMax = std::min<int64_t>(
                  kHi[s] - 1,
                  floorDiv(xHi[s] - 1 - start, pool.dilation[s]));
              meets = kMin <= kMax;
            }
            if (meets) {
              int64_t yo = ry.offset(n, c, o.data()),
                      go = rdy.offset(n, c, o.data());
              if (yo < 0 || go < 0) {
                errors[p] = kTooLittle;
                break;
              }
              const double yv = elements<T>(y)[yo];
              bool found = false, missing = false;
              forWindow(pool, o.data(), k, xs, [&](bool inside) {
                if (found || missing || !inside)
                  return;
                int64_t off = rx.offset(n, c, xs.data());
                if (off < 0) {
                  missing = true;
                  return;
                }
                if (static_cast<double>(elements<T>(x)[off]) == yv) {
                  found = true;
                  hit = xs;
                  hitK = k;
                }
              });
              if (missing) {
                errors[p] = kTooLittle;
                break;
              }
              int64_t at = found && inRange(hitK, kLo, kHi)
                               ? planeOffset(dx, hit)
                               : -1;
              if (at >= 0)
                acc[at] += static_cast<double>(elements<T>(dy)[go]);
            }
            for (size_t s = nsp; s-- > 0;) {
              if (++o[s] < oHi[s])
                break;
              o[s] = oLo[s];
            }
          }
          if (!errors[p].empty())
            return;
          T *out = elements<T>(dx) + p * plane;
          for (int64_t e = 0; e < plane; ++e)
            out[e] = static_cast<T>(acc[e]);
        }
      });
  for (const std::string &err : errors)
    if (!err.empty())
      return err;
  return "";
}

/// GlobalMaxPoolGrad: each (n, c) plane's dY goes to the first cell of the
/// plane (row-major) equal to its Y, when that cell lies in dX's box. X
/// must hold whole planes (the spec's nested `min` reads them).
template <typename T> std::string globalMaxPoolGrad(const KernelArgs &args) {
  if (args.inputs.size() != 3 || args.outputs.size() != 1)
    return "expects inputs (dY, X, Y) and output dX";
  const TensorView &dy = args.inputs[0], &x = args.inputs[1],
                   &y = args.inputs[2], &dx = args.outputs[0];
  if (std::string err = checkPoolInput<T>(x); !err.empty())
    return err;
  if (!isFloat<T>(dy) || !isFloat<T>(y) || dx.dtype != FloatType<T>::dtype ||
      dy.globalShape != y.globalShape || dx.globalShape != x.globalShape ||
      dy.globalShape.size() != x.globalShape.size())
    return "dY and Y must be " + floatName<T>() +
           " [N, C, 1, ...], dX of X's shape";
  const size_t nsp = x.globalShape.size() - 2;
  int64_t cells = 1, plane = 1;
  for (size_t s = 0; s < nsp; ++s) {
    if (dy.globalShape[s + 2] != 1)
      return "dY and Y must be " + floatName<T>() + " [N, C, 1, ...]";
    if (x.lo[s + 2] != 0 || x.shape[s + 2] != x.globalShape[s + 2])
      return kTooLittle;
    cells *= x.globalShape[s + 2];
    plane *= dx.shape[s + 2];
  }
  Reader rdy(dy), rx(x), ry(y);
  const std::vector<int64_t> zero(nsp, 0);
  const int64_t planes = dx.shape[0] * dx.shape[1];
  std::vector<std::string> errors(planes);
  parallelFor(planes, static_cast<double>(cells + plane) + 8,
              [&](int64_t begin, int64_t end) {
                std::vector<int64_t> g(nsp);
                for (int64_t p = begin; p < end; ++p) {
                  const int64_t n = dx.lo[0] + p / dx.shape[1];
                  const int64_t c = dx.lo[1] + p % dx.shape[1];
                  T *out = elements<T>(dx) + p * plane;
                  std::fill(out, out + plane, T(0));
                  int64_t yo = ry.offset(n, c, zero.data()),
                          go = rdy.offset(n, c, zero.data()),
                          xo = rx.offset(n, c, zero.data());
                  if (yo < 0 || go < 0 || xo < 0) {
                    errors[p] = kTooLittle;
                    return;
                  }
                  const T yv = elements<T>(y)[yo];
                  const T *xp = elements<T>(x) + xo; // a whole plane
                  int64_t first = 0;
                  while (first < cells && !(xp[first] == yv))
                    ++first;
                  if (first == cells)
                    continue;
                  // The cell's spatial coordinates; in dX's box?
                  int64_t rest = first;
                  for (size_t s = nsp; s-- > 0;) {
                    g[s] = rest % x.globalShape[s + 2];
                    rest /= x.globalShape[s + 2];
                  }
                  if (int64_t at = planeOffset(dx, g); at >= 0)
                    out[at] = elements<T>(dy)[go];
                }
              });
  for (const std::string &err : errors)
    if (!err.empty())
      return err;
  return "";
}

template <typename T> std::string averagePoolGrad(const KernelArgs &args) {
  if (args.inputs.size() != 2 || args.outputs.size() != 1)
    return "expects inputs (dY, X) and output dX";
  const TensorView &dy = args.inputs[0], &x = args.inputs[1],
                   &dx = args.outputs[0];
  if (!x.present() || x.globalShape.size() < 3 ||
      dx.dtype != FloatType<T>::dtype || !isFloat<T>(dy) ||
      dx.globalShape != x.globalShape ||
      dy.globalShape.size() != x.globalShape.size())
    return "dY and dX must be " + floatName<T>() +
           " with X's rank, dX of X's shape";
  Pool pool;
  if (std::string err =
          pool.init(args, spatial(x.globalShape), spatial(dy.globalShape));
      !err.empty())
    return err;
  std::vector<int64_t> kLo, kHi;
  if (std::string err = windowRange(args, pool.kernel, kLo, kHi); !err.empty())
    return err;
  Reader rdy(dy);
  return forEachOutput(dx, 4.0 * static_cast<double>(dy.numElements()) /
                               std::max<int64_t>(1, dx.numElements()) + 8,
                       [&, k = std::vector<int64_t>(pool.nsp),
                        o = std::vector<int64_t>(pool.nsp)](
                           int64_t n, int64_t c, const int64_t *xg,
                           int64_t at) mutable -> std::string {
    double sum = 0;
    bool missing = false;
    forWindowsOf(pool, xg, k, o, [&] {
      if (!inRange(k, kLo, kHi))
        return;
      int64_t go = rdy.offset(n, c, o.data());
      if (go < 0) {
        missing = true;
        return;
      }
      double count = 1;
      for (size_t s = 0; s < pool.nsp; ++s)
        count *= static_cast<double>(pool.count(s, o[s]));
      sum += elements<T>(dy)[go] / count;
    });
    if (missing)
      return kTooLittle;
    elements<T>(dx)[at] = static_cast<T>(sum);
    return "";
  });
}

} // namespace

namespace {

/// Whether view `v` holds [lo, hi) of its dim `d`.
bool holdsRange(const TensorView &v, size_t d, int64_t lo, int64_t hi) {
  return v.lo[d] <= lo && hi <= v.lo[d] + v.shape[d];
}

/// Row-major element offset in `v` of global (n, c) and spatial position 0
/// of its local box.
int64_t planeOffset(const TensorView &v, int64_t n, int64_t c) {
  int64_t plane = 1;
  for (size_t d = 2; d < v.shape.size(); ++d)
    plane *= v.shape[d];
  return ((n - v.lo[0]) * v.shape[1] + (c - v.lo[1])) * plane;
}

/// GlobalAveragePool: Y[n, c, 0...] = (sum of X[n, c, spatial]) / (global
/// spatial cells). The spatial sum runs over the call's reduction ranges
/// (all of it without a split; a split gives the partial sum the plan's
/// Reduce adds up), which X's box must hold. Accumulates in double.
template <typename T> std::string globalAveragePool(const KernelArgs &args) {
  if (args.inputs.size() != 1 || args.outputs.size() != 1)
    return "expects input X and 1 output";
  const TensorView &x = args.inputs[0], &y = args.outputs[0];
  const size_t rank = x.globalShape.size();
  if (!isFloat<T>(x) || y.dtype != FloatType<T>::dtype || rank < 3 ||
      y.globalShape.size() != rank)
    return "X and Y must be " + floatName<T>() + " of the same rank >= 3";
  const size_t spatial = rank - 2;
  std::vector<int64_t> lo(spatial), hi(spatial);
  double cells = 1;
  for (size_t s = 0; s < spatial; ++s) {
    cells *= static_cast<double>(x.globalShape[s + 2]);
    lo[s] = 0;
    hi[s] = x.globalShape[s + 2];
  }
  if (!args.reductions.empty()) {
    if (args.reductions.size() != spatial)
      return unsupportedConfiguration("reduction ranges do not match the "
                                      "spatial dims");
    for (size_t s = 0; s < spatial; ++s) {
      lo[s] = args.reductions[s].lo;
      hi[s] = args.reductions[s].hi;
    }
  }
  for (size_t s = 0; s < spatial; ++s)
    if (!holdsRange(x, s + 2, lo[s], hi[s]))
      return unsupportedConfiguration("X lacks spatial cells of the sum");
  if (!holdsRange(x, 0, y.lo[0], y.lo[0] + y.shape[0]) ||
      !holdsRange(x, 1, y.lo[1], y.lo[1] + y.shape[1]))
    return unsupportedConfiguration("X lacks (n, c) planes of Y's box");
  // The local rows of X's box the sum reads: a contiguous run in the last
  // spatial dim, rows over the others.
  const T *xd = elements<T>(x);
  T *yd = elements<T>(y);
  std::vector<int64_t> strides(spatial, 1);
  for (size_t s = spatial - 1; s > 0; --s)
    strides[s - 1] = strides[s] * x.shape[s + 2];
  int64_t rows = 1;
  for (size_t s = 0; s + 1 < spatial; ++s)
    rows *= hi[s] - lo[s];
  const int64_t run = hi[spatial - 1] - lo[spatial - 1];
  const int64_t planes = y.shape[0] * y.shape[1];
  parallelFor(planes, double(rows * run), [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(spatial);
    for (int64_t p = begin; p < end; ++p) {
      int64_t n = y.lo[0] + p / y.shape[1], c = y.lo[1] + p % y.shape[1];
      const T *plane = xd + planeOffset(x, n, c);
      double sum = 0;
      for (int64_t r = 0; r < rows; ++r) {
        int64_t rest = r, off = 0;
        for (size_t s = spatial - 1; s-- > 0;) {
          int64_t extent = hi[s] - lo[s];
          off += (lo[s] + rest % extent - x.lo[s + 2]) * strides[s];
          rest /= extent;
        }
        const T *row = plane + off + (lo[spatial - 1] - x.lo[spatial + 1]);
        for (int64_t i = 0; i < run; ++i)
          sum += static_cast<double>(row[i]);
      }
      yd[p] = static_cast<T>(sum / cells); // Y's box: [n, c, 1...]
    }
  });
  return "";
}

/// GlobalAveragePoolGrad: dX[n, c, spatial] = dY[n, c, 0...] / (global
/// spatial cells of X) over dX's box.
template <typename T>
std::string globalAveragePoolGrad(const KernelArgs &args) {
  if (args.inputs.size() != 2 || args.outputs.size() != 1)
    return "expects inputs (dY, X) and 1 output";
  const TensorView &dy = args.inputs[0], &dx = args.outputs[0];
  const size_t rank = dx.globalShape.size();
  if (!isFloat<T>(dy) || dx.dtype != FloatType<T>::dtype || rank < 3 ||
      dy.globalShape.size() != rank)
    return "dY and dX must be " + floatName<T>() + " of the same rank >= 3";
  if (!holdsRange(dy, 0, dx.lo[0], dx.lo[0] + dx.shape[0]) ||
      !holdsRange(dy, 1, dx.lo[1], dx.lo[1] + dx.shape[1]))
    return unsupportedConfiguration("dY lacks (n, c) planes of dX's box");
  double cells = 1;
  int64_t plane = 1;
  for (size_t d = 2; d < rank; ++d) {
    cells *= static_cast<double>(dx.globalShape[d]);
    plane *= dx.shape[d];
  }
  const T *g = elements<T>(dy);
  T *out = elements<T>(dx);
  const int64_t planes = dx.shape[0] * dx.shape[1];
  parallelFor(planes, double(plane), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      int64_t n = dx.lo[0] + p / dx.shape[1], c = dx.lo[1] + p % dx.shape[1];
      const T v = static_cast<T>(
          static_cast<double>(g[planeOffset(dy, n, c)]) / cells);
      std::fill(out + p * plane, out + (p + 1) * plane, v);
    }
  });
  return "";
}

} // namespace

void tofu::runtime::registerPoolKernels(void (*addKernel)(const char *,
                                                          KernelFn)) {
  addKernel("MaxPool", byFloatType<maxPool<float>, maxPool<double>>);
  addKernel("MaxPoolGrad",
            byFloatType<maxPoolGrad<float>, maxPoolGrad<double>>);
  addKernel("GlobalMaxPoolGrad",
            byFloatType<globalMaxPoolGrad<float>, globalMaxPoolGrad<double>>);
  addKernel("AveragePool",
            byFloatType<averagePool<float>, averagePool<double>>);
  addKernel("AveragePoolGrad",
            byFloatType<averagePoolGrad<float>, averagePoolGrad<double>>);
  addKernel("GlobalAveragePool",
            byFloatType<globalAveragePool<float>, globalAveragePool<double>>);
  addKernel("GlobalAveragePoolGrad",
            byFloatType<globalAveragePoolGrad<float>,
                        globalAveragePoolGrad<double>>);
}
