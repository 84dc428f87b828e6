//===- KernelsConv.cpp - Convolution CPU kernels (im2col + GEMM) ----------===//
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
// gives the partial sum the plan's Reduce adds up. Reads outside the global
// input are padding (0); an element inside the global tensor that the local
// buffer lacks makes the kernel return unsupportedConfiguration (runCompute
// then falls back to the expression interpreter, which names the element).
//
//===----------------------------------------------------------------------===//

#include "Blas.h"
#include "FloatKernel.h"
#include "tofu/runtime/Kernels.h"

#include <algorithm>

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

/// im2col: col[(cw, kk), p] = X[n, chan0 + cw, o_p * stride - padBegin +
/// kk * dilation] for cw < cwCount, kernel positions kk in [k0, k0 + kN)
/// and output positions o in [o0, o0 + oN) (all global), 0 outside X's
/// global shape. Rows are ordered (cw, kk...) row-major, columns (o...).
template <typename T>
std::string
im2col(const TensorView &X, const Geometry &g, int64_t n, int64_t chan0,
       int64_t cwCount, const std::vector<int64_t> &k0,
       const std::vector<int64_t> &kN, const std::vector<int64_t> &o0,
       const std::vector<int64_t> &oN, std::vector<T> &col) {
  const size_t sp = g.sp;
  if (!holds(X, 0, n, 1))
    return lacks("X", "batch", n, 1);
  if (!holds(X, 1, chan0, cwCount))
    return lacks("X", "channels", chan0, cwCount);
  const std::vector<int64_t> xs = stridesOf(X.shape);
  // tables[s][kk * oN[s] + o]: local index in X's dimension 2 + s, -1 for
  // padding (outside the global extent), -2 for missing locally.
  std::vector<std::vector<int64_t>> tables(sp);
  for (size_t s = 0; s < sp; ++s) {
    tables[s].resize(kN[s] * oN[s]);
    for (int64_t kk = 0; kk < kN[s]; ++kk)
      for (int64_t o = 0; o < oN[s]; ++o) {
        int64_t pos = (o0[s] + o) * g.strides[s] - g.padBegin[s] +
                      (k0[s] + kk) * g.dilations[s];
        int64_t local = pos - X.lo[2 + s];
        int64_t t;
        if (pos < 0 || pos >= g.in[s])
          t = -1;
        else if (local < 0 || local >= X.shape[2 + s])
          t = -2;
        else
          t = local;
        tables[s][kk * oN[s] + o] = t;
      }
  }
  const int64_t kCount = product(kN), P = product(oN);
  col.assign(cwCount * kCount * P, T(0));
  const T *x = elements<T>(X);
  const int64_t innerN = oN[sp - 1];
  std::vector<int64_t> kk(sp, 0), o(sp, 0);
  for (int64_t cw = 0; cw < cwCount; ++cw) {
    const int64_t chanBase =
        (n - X.lo[0]) * xs[0] + (chan0 + cw - X.lo[1]) * xs[1];
    std::fill(kk.begin(), kk.end(), 0);
    for (int64_t kr = 0; kr < kCount; ++kr) {
      T *row = col.data() + (cw * kCount + kr) * P;
      // Odometer over all output dimensions but the innermost.
      const int64_t outer = P / std::max<int64_t>(innerN, 1);
      std::fill(o.begin(), o.end(), 0);
      for (int64_t r = 0; r < outer && innerN > 0; ++r) {
        int64_t base = chanBase;
        bool pad = false, missing = false;
        for (size_t s = 0; s + 1 < sp; ++s) {
          int64_t t = tables[s][kk[s] * oN[s] + o[s]];
          pad |= t == -1;
          missing |= t == -2;
          base += t * xs[2 + s];
        }
        T *dst = row + r * innerN;
        if (!pad) {
          const int64_t *last = &tables[sp - 1][kk[sp - 1] * innerN];
          for (int64_t i = 0; i < innerN; ++i) {
            int64_t t = last[i];
            if (t >= 0 && !missing)
              dst[i] = x[base + t];
            else if (t == -2 || (t >= 0 && missing))
              return unsupportedConfiguration(
                  "X lacks input elements of the local outputs (a halo the "
                  "buffer does not hold)");
          }
        }
        for (size_t s = sp - 1; s-- > 0;) {
          if (++o[s] < oN[s])
            break;
          o[s] = 0;
        }
      }
      for (size_t s = sp; s-- > 0;) {
        if (++kk[s] < kN[s])
          break;
        kk[s] = 0;
      }
    }
  }
  return "";
}

/// The local spatial box of a view: lower corner and extents.
void spatialBox(const TensorView &v, std::vector<int64_t> &lo,
                std::vector<int64_t> &n) {
  lo.assign(v.lo.begin() + 2, v.lo.end());
  n.assign(v.shape.begin() + 2, v.shape.end());
}

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
  const int64_t rowLen = wcN * product(kN), P = product(oN);
  const std::vector<int64_t> ws = stridesOf(W.shape), ys = stridesOf(Y.shape);
  std::vector<T> col;
  for (int64_t nl = 0; nl < Y.shape[0]; ++nl) {
    const int64_t n = Y.lo[0] + nl;
    for (int64_t grp = ym0 / g.Mg; grp * g.Mg < ym0 + ymN; ++grp) {
      int64_t mA = std::max(grp * g.Mg, ym0);
      int64_t mB = std::min((grp + 1) * g.Mg, ym0 + ymN);
      if (auto err = im2col(X, g, n, grp * g.Cg + wc0, wcN, k0, kN, o0, oN,
                            col);
          !err.empty())
        return err;
      T *y = elements<T>(Y) + nl * ys[0] + (mA - ym0) * ys[1];
      blasGemm(false, false, mB - mA, P, rowLen, T(1),
               elements<T>(W) + (mA - W.lo[0]) * ws[0], rowLen, col.data(), P,
               T(0), y, P);
      if (B)
        for (int64_t m = mA; m < mB; ++m) {
          T bias = elements<T>(*B)[m - B->lo[0]];
          T *row = y + (m - mA) * P;
          for (int64_t p = 0; p < P; ++p)
            row[p] += bias;
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
  // With groups, a split of the output channels within a group (the
  // reduction variable) reads dY and W at channels g * Mg + mm for every
  // group g: their boxes are the hull over the groups and do not show the
  // split, so the sum would run over too many channels.
  if (args.partialReduction && g.G > 1)
    return unsupportedConfiguration(
        "a partial sum over part of each group's output channels");
  const size_t rank = g.sp + 2, sp = g.sp;
  for (auto [v, what] : {std::pair{&dY, "dY"}, {&W, "W"}, {&dX, "dX"}})
    if (auto err = checkOperand<T>(*v, rank, what); !err.empty())
      return err;
  if (dX.numElements() == 0)
    return "";
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
  const int64_t xc0 = dX.lo[1], xcN = dX.shape[1];
  const int64_t kCount = product(kN), P = product(oN);
  const int64_t wRowLen = W.shape[1] * kCount;
  const std::vector<int64_t> ws = stridesOf(W.shape),
                             dys = stridesOf(dY.shape),
                             dxs = stridesOf(dX.shape);
  // col2im tables: local index in dX's spatial dim s, or -1 outside its box.
  std::vector<std::vector<int64_t>> tables(sp);
  for (size_t s = 0; s < sp; ++s) {
    tables[s].resize(kN[s] * oN[s]);
    for (int64_t kk = 0; kk < kN[s]; ++kk)
      for (int64_t o = 0; o < oN[s]; ++o) {
        int64_t pos = (o0[s] + o) * g.strides[s] - g.padBegin[s] +
                      (k0[s] + kk) * g.dilations[s];
        int64_t local = pos - i0[s];
        tables[s][kk * oN[s] + o] = local >= 0 && local < iN[s] ? local : -1;
      }
  }
  T *dx = elements<T>(dX);
  std::fill(dx, dx + dX.numElements(), T(0));
  std::vector<T> col;
  std::vector<int64_t> kk(sp), o(sp);
  for (int64_t nl = 0; nl < dX.shape[0]; ++nl) {
    const int64_t n = dX.lo[0] + nl;
    if (!holds(dY, 0, n, 1))
      return lacks("dY", "batch", n, 1);
    for (int64_t grp = xc0 / g.Cg; grp * g.Cg < xc0 + xcN; ++grp) {
      const int64_t cA = std::max(grp * g.Cg, xc0);
      const int64_t cB = std::min((grp + 1) * g.Cg, xc0 + xcN);
      const int64_t cw0 = cA - grp * g.Cg, cwN = cB - cA;
      if (!holds(W, 1, cw0, cwN))
        return lacks("W", "input channels", cw0, cwN);
      // The output channels of this group that dY and W hold: the sum.
      const int64_t gm0 = grp * g.Mg, gm1 = gm0 + g.Mg;
      const int64_t yA = std::max(gm0, dY.lo[1]),
                    yB = std::min(gm1, dY.lo[1] + dY.shape[1]);
      const int64_t wA = std::max(gm0, W.lo[0]),
                    wB = std::min(gm1, W.lo[0] + W.shape[0]);
      if (std::max<int64_t>(yB - yA, 0) != std::max<int64_t>(wB - wA, 0) ||
          (yB > yA && yA != wA))
        return unsupportedConfiguration(
            "dY and W hold different output channels of group " +
            std::to_string(grp));
      if (yB <= yA)
        continue;
      const int64_t rows = cwN * kCount;
      col.assign(rows * P, T(0));
      blasGemm(
          true, false, rows, P, yB - yA, T(1),
          elements<T>(W) + (yA - W.lo[0]) * ws[0] + (cw0 - W.lo[1]) * ws[1],
          wRowLen,
          elements<T>(dY) + (n - dY.lo[0]) * dys[0] + (yA - dY.lo[1]) * dys[1],
          P, T(0), col.data(), P);
      for (int64_t cw = 0; cw < cwN; ++cw) {
        T *plane = dx + nl * dxs[0] + (cA + cw - xc0) * dxs[1];
        std::fill(kk.begin(), kk.end(), 0);
        for (int64_t kr = 0; kr < kCount; ++kr) {
          const T *row = col.data() + (cw * kCount + kr) * P;
          std::fill(o.begin(), o.end(), 0);
          for (int64_t p = 0; p < P; ++p) {
            int64_t off = 0;
            bool inside = true;
            for (size_t s = 0; s < sp; ++s) {
              int64_t t = tables[s][kk[s] * oN[s] + o[s]];
              inside &= t >= 0;
              off += t * dxs[2 + s];
            }
            if (inside)
              plane[off] += row[p];
            for (size_t s = sp; s-- > 0;) {
              if (++o[s] < oN[s])
                break;
              o[s] = 0;
            }
          }
          for (size_t s = sp; s-- > 0;) {
            if (++kk[s] < kN[s])
              break;
            kk[s] = 0;
          }
        }
      }
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
  const int64_t rowLen = cN * product(kN), P = product(oN);
  const std::vector<int64_t> dys = stridesOf(dY.shape);
  T *dw = elements<T>(dW);
  std::fill(dw, dw + dW.numElements(), T(0));
  std::vector<T> col;
  for (int64_t nl = 0; nl < dY.shape[0]; ++nl) {
    const int64_t n = dY.lo[0] + nl;
    for (int64_t grp = m0 / g.Mg; grp * g.Mg < m0 + mN; ++grp) {
      int64_t mA = std::max(grp * g.Mg, m0);
      int64_t mB = std::min((grp + 1) * g.Mg, m0 + mN);
      if (auto err = im2col(X, g, n, grp * g.Cg + c0, cN, k0, kN, o0, oN, col);
          !err.empty())
        return err;
      blasGemm(false, true, mB - mA, rowLen, P, T(1),
               elements<T>(dY) + nl * dys[0] + (mA - dY.lo[1]) * dys[1], P,
               col.data(), P, T(1), dw + (mA - m0) * rowLen, rowLen);
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
  for (int64_t c = 0; c < dB.shape[0]; ++c) {
    double sum = 0;
    const int64_t cl = dB.lo[0] + c - dY.lo[1];
    for (int64_t n = 0; n < dY.shape[0]; ++n) {
      const T *p = elements<T>(dY) + n * s[0] + cl * s[1];
      for (int64_t i = 0; i < inner; ++i)
        sum += p[i];
    }
    db[c] = static_cast<T>(sum);
  }
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
