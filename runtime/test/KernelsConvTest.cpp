//===- KernelsConvTest.cpp - MatMul and Conv kernels vs double references -===//
//
// Each native kernel against a straightforward float64 reference on random
// inputs: MatMul with batch broadcasting and 1-D operands; Conv,
// ConvGradInput, ConvGradWeight and ConvBiasGrad over 1-D and 2-D shapes,
// strides, asymmetric pads, dilations and groups. Partitioned execution:
// local boxes with halos, channel and kernel splits giving partial sums
// (which must add up to the reference), and a missing halo (an error, never
// a wrong value). Every test is typed: the kernels are templates over float
// and double, and each runs in float32 (1e-4 of the reference) and float64
// (1e-12: the same sums in another order).
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"
#include "tofu/runtime/ComputeKernel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <type_traits>

using namespace tofu::runtime;
using tofu::plan::Attr;
using tofu::plan::Box;
using tofu::plan::DType;
using tofu::test::intAttr;
using tofu::test::intsAttr;

namespace {

using Shape = std::vector<int64_t>;

/// The element types every kernel test runs in.
using FloatTypes = ::testing::Types<float, double>;
template <typename T> class MatMulKernel : public ::testing::Test {};
TYPED_TEST_SUITE(MatMulKernel, FloatTypes);
template <typename T> class ConvKernels : public ::testing::Test {};
TYPED_TEST_SUITE(ConvKernels, FloatTypes);

int64_t count(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

/// A whole tensor in double precision (the reference's view) and float.
struct Tensor {
  Shape shape;
  std::vector<double> v;
  double &at(const Shape &idx) { return v[flat(idx)]; }
  double at(const Shape &idx) const { return v[flat(idx)]; }
  int64_t flat(const Shape &idx) const {
    int64_t f = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      f = f * shape[d] + idx[d];
    return f;
  }
  /// The elements as T (float or double).
  template <typename T> std::vector<T> as() const {
    return std::vector<T>(v.begin(), v.end());
  }
};

Tensor zeros(Shape shape) {
  Tensor t;
  t.shape = std::move(shape);
  t.v.assign(count(t.shape), 0.0);
  return t;
}

Tensor random(Shape shape, uint32_t seed) {
  Tensor t = zeros(std::move(shape));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (double &x : t.v)
    x = dist(gen); // float-representable
  return t;
}

/// Advances `idx` through box [lo, hi); false when done.
bool next(Shape &idx, const Shape &lo, const Shape &hi) {
  for (size_t d = idx.size(); d-- > 0;) {
    if (++idx[d] < hi[d])
      return true;
    idx[d] = lo[d];
  }
  return false;
}

Box whole(const Shape &s) { return {Shape(s.size(), 0), s}; }

/// The runtime element type of T.
template <typename T>
const DType kDType = std::is_same_v<T, double> ? DType::F64 : DType::F32;

/// The elements of `t` in box `b`, row-major, as T.
template <typename T> std::vector<T> slice(const Tensor &t, const Box &b) {
  std::vector<T> out;
  Box bb = b;
  for (size_t d = 0; d < bb.lo.size(); ++d)
    if (bb.lo[d] >= bb.hi[d])
      return out;
  Shape idx = b.lo;
  do
    out.push_back(static_cast<T>(t.at(idx)));
  while (next(idx, b.lo, b.hi));
  return out;
}

/// Expects `got` (box `b` of a tensor) to equal `want` in that box, to
/// float32's or float64's rounding.
template <typename T>
void expectBox(const std::vector<T> &got, const Tensor &want, const Box &b) {
  const double tol = std::is_same_v<T, double> ? 1e-12 : 1e-4;
  std::vector<double> w = slice<double>(want, b);
  ASSERT_EQ(got.size(), w.size());
  for (size_t i = 0; i < w.size(); ++i)
    ASSERT_NEAR(got[i], w[i], tol * (1 + std::fabs(w[i]))) << "element " << i;
}

//===----------------------------------------------------------------------===//
// MatMul
//===----------------------------------------------------------------------===//

/// numpy matmul in double.
Tensor refMatMul(const Tensor &A, const Tensor &B) {
  Shape a = A.shape, b = B.shape;
  bool vecA = a.size() == 1, vecB = b.size() == 1;
  if (vecA)
    a.insert(a.begin(), 1);
  if (vecB)
    b.push_back(1);
  size_t ab = a.size() - 2, bb = b.size() - 2, yb = std::max(ab, bb);
  Shape batch(yb);
  for (size_t i = 0; i < yb; ++i) {
    int64_t x = i + ab >= yb ? a[i + ab - yb] : 1;
    int64_t y = i + bb >= yb ? b[i + bb - yb] : 1;
    batch[i] = std::max(x, y);
  }
  int64_t M = a[ab], K = a[ab + 1], N = b[bb + 1];
  Shape yShape = batch;
  if (!vecA)
    yShape.push_back(M);
  if (!vecB)
    yShape.push_back(N);
  Tensor Y = zeros(yShape);
  Shape bi(yb, 0);
  int64_t e = 0;
  do {
    int64_t aoff = 0, boff = 0;
    for (size_t i = 0; i < ab; ++i)
      aoff = aoff * a[i] + (a[i] == 1 ? 0 : bi[i + yb - ab]);
    for (size_t i = 0; i < bb; ++i)
      boff = boff * b[i] + (b[i] == 1 ? 0 : bi[i + yb - bb]);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += A.v[(aoff * M + m) * K + k] * B.v[(boff * K + k) * N + n];
        Y.v[(e * M + m) * N + n] = s;
      }
    ++e;
  } while (yb > 0 && next(bi, Shape(yb, 0), batch));
  return Y;
}

TYPED_TEST(MatMulKernel, BatchedBroadcastingAndVectors) {
  using T = TypeParam;
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 5}},       {{2, 3, 4}, {4, 5}},    {{4}, {2, 4, 3}},
      {{2, 1, 3, 4}, {5, 4, 6}}, {{3, 4}, {4}},       {{4}, {4}},
      {{1, 3, 4}, {2, 4, 2}}, {{2, 3, 0}, {0, 5}},
      // 64 products of 16 x 64 x 16 (2^21 FLOPs in all, 2^15 each): the
      // batch elements run side by side on the worker pool.
      {{64, 16, 64}, {64, 64, 16}}, {{8, 8, 16, 64}, {8, 1, 64, 16}},
  };
  uint32_t seed = 10;
  for (const auto &[sa, sb] : cases) {
    SCOPED_TRACE(::testing::Message() << "case " << seed);
    Tensor A = random(sa, seed++), B = random(sb, seed++);
    Tensor want = refMatMul(A, B);
    std::vector<T> a = A.as<T>(), b = B.as<T>(), y(count(want.shape), T(-7));
    a.reserve(1); // a present (non-null) buffer even with no elements
    b.reserve(1);
    y.reserve(1);
    ComputePath used;
    ASSERT_EQ(runCompute("MatMul", {},
                         {TensorView::whole(a.data(), kDType<T>, sa),
                          TensorView::whole(b.data(), kDType<T>, sb)},
                         {TensorView::whole(y.data(), kDType<T>, want.shape)},
                         {}, {}, ComputePath::Native, &used),
              "");
    expectBox(y, want, whole(want.shape));
  }
}

TYPED_TEST(ConvKernels, BiasGradOverManyChannelsAndLongPlanes) {
  // dY [3, 40, 47, 47]: enough work to split the channels over the pool,
  // planes of 2209 elements (the partial sums' lanes and a tail), and a
  // local box of channels [5, 37) whose dY holds channels [3, 40).
  using T = TypeParam;
  const Shape shape = {3, 40, 47, 47};
  Tensor dY = random(shape, 77);
  const int64_t plane = 47 * 47;
  std::vector<T> dy = dY.as<T>(), dB(32, T(-7));
  const Box dyBox = {{0, 3, 0, 0}, {3, 40, 47, 47}};
  std::vector<T> local;
  for (int64_t n = 0; n < 3; ++n)
    for (int64_t c = 3; c < 40; ++c)
      local.insert(local.end(), dy.begin() + (n * 40 + c) * plane,
                   dy.begin() + (n * 40 + c + 1) * plane);
  ASSERT_EQ(runCompute("ConvBiasGrad", {},
                       {TensorView::ofRegion(local.data(), kDType<T>, dyBox,
                                             shape)},
                       {TensorView::ofRegion(dB.data(), kDType<T>,
                                             Box{{5}, {37}}, {40})},
                       {}, {}, ComputePath::Native, nullptr),
            "");
  for (int64_t c = 5; c < 37; ++c) {
    double want = 0;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < plane; ++i)
        want += dY.v[(n * 40 + c) * plane + i];
    EXPECT_NEAR(double(dB[c - 5]), want,
                (std::is_same_v<T, float> ? 1e-6 : 1e-12) *
                    (1 + std::fabs(want)))
        << "channel " << c;
  }
}

TYPED_TEST(MatMulKernel, LocalBoxesAndPartialK) {
  using T = TypeParam;
  // Y [2, 5, 6] = A [2, 5, 8] x B [8, 6]; this device: batch 1, rows
  // [1, 4), columns [2, 5), K slice [3, 7) (a partial product).
  Tensor A = random({2, 5, 8}, 1), B = random({8, 6}, 2);
  Tensor part = zeros({2, 5, 6});
  for (int64_t e = 0; e < 2; ++e)
    for (int64_t m = 0; m < 5; ++m)
      for (int64_t n = 0; n < 6; ++n)
        for (int64_t k = 3; k < 7; ++k)
          part.at({e, m, n}) += A.at({e, m, k}) * B.at({k, n});
  Box aBox{{1, 0, 3}, {2, 5, 7}}, bBox{{3, 0}, {7, 6}},
      yBox{{1, 1, 2}, {2, 4, 5}};
  std::vector<T> a = slice<T>(A, aBox), b = slice<T>(B, bBox), y(9, T(-7));
  ASSERT_EQ(
      runCompute("MatMul", {},
                 {TensorView::ofRegion(a.data(), kDType<T>, aBox, A.shape),
                  TensorView::ofRegion(b.data(), kDType<T>, bBox, B.shape)},
                 {TensorView::ofRegion(y.data(), kDType<T>, yBox, {2, 5, 6})},
                 {}, {}, ComputePath::Native),
      "");
  expectBox(y, part, yBox);

  // Different K slices in A and B: not a wrong value.
  Box bOther{{2, 0}, {6, 6}};
  std::vector<T> b2 = slice<T>(B, bOther);
  std::string err = runCompute(
      "MatMul", {},
      {TensorView::ofRegion(a.data(), kDType<T>, aBox, A.shape),
       TensorView::ofRegion(b2.data(), kDType<T>, bOther, B.shape)},
      {TensorView::ofRegion(y.data(), kDType<T>, yBox, {2, 5, 6})}, {}, {});
  EXPECT_NE(err.find("holds K"), std::string::npos) << err;
}

/// `t` with its last two dims swapped.
Tensor swapLastTwo(const Tensor &t) {
  const size_t r = t.shape.size();
  Shape s = t.shape;
  std::swap(s[r - 2], s[r - 1]);
  Tensor out = zeros(s);
  Shape idx(r, 0);
  do {
    Shape src = idx;
    std::swap(src[r - 2], src[r - 1]);
    out.at(idx) = t.at(src);
  } while (next(idx, Shape(r, 0), s));
  return out;
}

// MatMulTransposed (tofu-absorb-transposes): op(A) op(B) with the stored
// operands read transposed in place; the reference transposes explicitly.
TYPED_TEST(MatMulKernel, TransposedOperands) {
  using T = TypeParam;
  struct Case {
    Shape a, b;
    bool transA, transB;
  };
  const std::vector<Case> cases = {
      {{3, 4}, {5, 4}, false, true},        {{4, 3}, {4, 5}, true, false},
      {{4, 3}, {5, 4}, true, true},         {{2, 3, 4}, {5, 4}, false, true},
      {{2, 6, 4}, {5, 4}, false, true},     {{2, 3, 5, 4}, {2, 3, 6, 4}, false, true},
      {{2, 3, 5, 4}, {2, 3, 5, 6}, true, false}, {{2, 1, 4, 3}, {5, 6, 4}, true, true},
  };
  uint32_t seed = 40;
  for (const Case &c : cases) {
    SCOPED_TRACE(::testing::Message() << "case " << seed);
    Tensor A = random(c.a, seed++), B = random(c.b, seed++);
    Tensor want = refMatMul(c.transA ? swapLastTwo(A) : A,
                            c.transB ? swapLastTwo(B) : B);
    std::vector<T> a = A.as<T>(), b = B.as<T>(), y(count(want.shape), T(-7));
    ComputePath used;
    ASSERT_EQ(runCompute("MatMulTransposed",
                         {intAttr("transA", c.transA), intAttr("transB", c.transB)},
                         {TensorView::whole(a.data(), kDType<T>, c.a),
                          TensorView::whole(b.data(), kDType<T>, c.b)},
                         {TensorView::whole(y.data(), kDType<T>, want.shape)},
                         {}, {}, ComputePath::Native, &used),
              "");
    expectBox(y, want, whole(want.shape));
  }
}

TYPED_TEST(MatMulKernel, TransposedOperandsLocalBoxesAndPartialK) {
  using T = TypeParam;
  // Y [2, 5, 6] = A^T B^T with A stored [2, 8, 5] and B stored [6, 8]; this
  // device: batch 1, rows [1, 4), columns [2, 5), K slice [3, 7).
  Tensor A = random({2, 8, 5}, 3), B = random({6, 8}, 4);
  Tensor part = zeros({2, 5, 6});
  for (int64_t e = 0; e < 2; ++e)
    for (int64_t m = 0; m < 5; ++m)
      for (int64_t n = 0; n < 6; ++n)
        for (int64_t k = 3; k < 7; ++k)
          part.at({e, m, n}) += A.at({e, k, m}) * B.at({n, k});
  Box aBox{{1, 3, 0}, {2, 7, 5}}, bBox{{1, 3}, {6, 7}},
      yBox{{1, 1, 2}, {2, 4, 5}};
  std::vector<T> a = slice<T>(A, aBox), b = slice<T>(B, bBox), y(9, T(-7));
  ASSERT_EQ(
      runCompute("MatMulTransposed", {intAttr("transA", 1), intAttr("transB", 1)},
                 {TensorView::ofRegion(a.data(), kDType<T>, aBox, A.shape),
                  TensorView::ofRegion(b.data(), kDType<T>, bBox, B.shape)},
                 {TensorView::ofRegion(y.data(), kDType<T>, yBox, {2, 5, 6})},
                 {}, {}, ComputePath::Native),
      "");
  expectBox(y, part, yBox);
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

struct ConvCase {
  int64_t N, C, M, G;
  Shape in, k, strides, pads, dilations;

  size_t sp() const { return in.size(); }
  Shape xShape() const {
    Shape s = {N, C};
    s.insert(s.end(), in.begin(), in.end());
    return s;
  }
  Shape wShape() const {
    Shape s = {M, C / G};
    s.insert(s.end(), k.begin(), k.end());
    return s;
  }
  Shape out() const {
    Shape o;
    for (size_t s = 0; s < sp(); ++s)
      o.push_back((in[s] + pads[s] + pads[sp() + s] -
                   dilations[s] * (k[s] - 1) - 1) /
                      strides[s] +
                  1);
    return o;
  }
  Shape yShape() const {
    Shape s = {N, M};
    Shape o = out();
    s.insert(s.end(), o.begin(), o.end());
    return s;
  }
  std::vector<Attr> attrs() const {
    return {intsAttr("strides", strides), intsAttr("pads", pads),
            intsAttr("dilations", dilations), intAttr("group", G),
            intsAttr("kernel_shape", k)};
  }
  std::string describe() const {
    auto l = [](const Shape &s) {
      std::string r;
      for (int64_t x : s)
        r += std::to_string(x) + " ";
      return r;
    };
    return "N" + std::to_string(N) + " C" + std::to_string(C) + " M" +
           std::to_string(M) + " G" + std::to_string(G) + " in " + l(in) +
           "k " + l(k) + "s " + l(strides) + "p " + l(pads) + "d " +
           l(dilations);
  }
};

/// Calls f(n, m, c, cw, o, kk, i) for every term of the convolution sum
/// whose input position i lies inside the input.
template <typename F> void forEachTerm(const ConvCase &c, F f) {
  const size_t sp = c.sp();
  const Shape out = c.out();
  const int64_t Cg = c.C / c.G, Mg = c.M / c.G;
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t cw = 0; cw < Cg; ++cw) {
        int64_t ch = (m / Mg) * Cg + cw;
        Shape o(sp, 0);
        do {
          Shape kk(sp, 0);
          do {
            Shape i(sp);
            bool inside = true;
            for (size_t s = 0; s < sp; ++s) {
              i[s] = o[s] * c.strides[s] - c.pads[s] + kk[s] * c.dilations[s];
              inside &= i[s] >= 0 && i[s] < c.in[s];
            }
            if (inside)
              f(n, m, ch, cw, o, kk, i);
          } while (next(kk, Shape(sp, 0), c.k));
        } while (next(o, Shape(sp, 0), out));
      }
}

Shape cat(Shape a, const Shape &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<ConvCase> convCases() {
  return {
      {2, 3, 4, 1, {9}, {3}, {1}, {1, 1}, {1}},
      {2, 4, 6, 2, {11}, {3}, {2}, {2, 0}, {2}},
      {1, 3, 2, 1, {6, 7}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {2, 4, 4, 4, {7, 6}, {3, 2}, {2, 1}, {0, 1, 2, 0}, {1, 2}},
      {1, 6, 4, 2, {8, 8}, {2, 3}, {3, 2}, {1, 0, 0, 2}, {2, 1}},
      {3, 2, 3, 1, {5, 5}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}},
      // Output rows of 16 or more: im2col and col2im copy runs of input
      // rows (the cases above have shorter rows, which go through a table
      // of input positions).
      {2, 3, 4, 1, {20}, {3}, {1}, {1, 1}, {1}},
      {2, 2, 3, 1, {5, 34}, {3, 3}, {1, 2}, {1, 1, 1, 0}, {1, 1}},
      // Three spatial dimensions.
      {1, 2, 3, 1, {3, 4, 5}, {2, 2, 3}, {1, 1, 2}, {0, 1, 1, 0, 0, 1},
       {1, 1, 1}},
  };
}

TYPED_TEST(ConvKernels, WholeTensorsMatchTheReference) {
  using T = TypeParam;
  uint32_t seed = 100;
  for (const ConvCase &c : convCases()) {
    SCOPED_TRACE(c.describe());
    Tensor X = random(c.xShape(), seed++), W = random(c.wShape(), seed++),
           B = random({c.M}, seed++), dY = random(c.yShape(), seed++);
    Tensor Y = zeros(c.yShape()), dX = zeros(c.xShape()),
           dW = zeros(c.wShape()), dB = zeros({c.M});
    forEachTerm(c, [&](int64_t n, int64_t m, int64_t ch, int64_t cw,
                       const Shape &o, const Shape &kk, const Shape &i) {
      Y.at(cat({n, m}, o)) += X.at(cat({n, ch}, i)) * W.at(cat({m, cw}, kk));
      dX.at(cat({n, ch}, i)) += dY.at(cat({n, m}, o)) * W.at(cat({m, cw}, kk));
      dW.at(cat({m, cw}, kk)) += dY.at(cat({n, m}, o)) * X.at(cat({n, ch}, i));
    });
    for (int64_t f = 0; f < count(c.yShape()); ++f)
      dB.v[(f / count(c.out())) % c.M] += dY.v[f];
    Tensor YB = Y;
    for (int64_t f = 0; f < count(c.yShape()); ++f)
      YB.v[f] += B.v[(f / count(c.out())) % c.M];

    std::vector<T> x = X.as<T>(), w = W.as<T>(), b = B.as<T>(), dy = dY.as<T>();
    auto run = [&](const char *kernel, std::vector<TensorView> in,
                   const Shape &outShape, const Tensor &want) {
      SCOPED_TRACE(kernel);
      std::vector<T> out(count(outShape), T(-7));
      ComputePath used;
      ASSERT_EQ(runCompute(kernel, c.attrs(), in,
                           {TensorView::whole(out.data(), kDType<T>, outShape)},
                           {}, {}, ComputePath::Native, &used),
                "");
      expectBox(out, want, whole(outShape));
    };
    auto v = [](std::vector<T> &d, const Shape &s) {
      return TensorView::whole(d.data(), kDType<T>, s);
    };
    run("Conv", {v(x, c.xShape()), v(w, c.wShape())}, c.yShape(), Y);
    run("Conv", {v(x, c.xShape()), v(w, c.wShape()), v(b, {c.M})}, c.yShape(),
        YB);
    // X and W are not read by the gradients: pass absent data, global shape.
    TensorView xShapeOnly = v(x, c.xShape()), wShapeOnly = v(w, c.wShape());
    run("ConvGradInput", {v(dy, c.yShape()), v(w, c.wShape()), xShapeOnly},
        c.xShape(), dX);
    run("ConvGradWeight", {v(dy, c.yShape()), v(x, c.xShape()), wShapeOnly},
        c.wShape(), dW);
    run("ConvBiasGrad", {v(dy, c.yShape())}, {c.M}, dB);
  }
}

/// Index range [lo, hi) of input positions that outputs [o0, o1) of spatial
/// dimension s read (clipped to the input).
std::pair<int64_t, int64_t> inputRange(const ConvCase &c, size_t s, int64_t o0,
                                       int64_t o1) {
  int64_t lo = o0 * c.strides[s] - c.pads[s];
  int64_t hi = (o1 - 1) * c.strides[s] - c.pads[s] +
               (c.k[s] - 1) * c.dilations[s] + 1;
  return {std::max<int64_t>(lo, 0), std::min(hi, c.in[s])};
}

TYPED_TEST(ConvKernels, SpatialSplitWithHalo) {
  using T = TypeParam;
  uint32_t seed = 300;
  for (const ConvCase &c : convCases()) {
    SCOPED_TRACE(c.describe());
    Tensor X = random(c.xShape(), seed++), W = random(c.wShape(), seed++);
    Tensor Y = zeros(c.yShape());
    forEachTerm(c, [&](int64_t n, int64_t m, int64_t ch, int64_t cw,
                       const Shape &o, const Shape &kk, const Shape &i) {
      Y.at(cat({n, m}, o)) += X.at(cat({n, ch}, i)) * W.at(cat({m, cw}, kk));
    });
    std::vector<T> w = W.as<T>();
    const Shape out = c.out();
    // Three parts along the first spatial output dimension, and the
    // second half of the output channels.
    for (int part = 0; part < 3; ++part) {
      int64_t o0 = out[0] * part / 3, o1 = out[0] * (part + 1) / 3;
      if (o0 == o1)
        continue;
      Box yBox = whole(c.yShape());
      yBox.lo[2] = o0;
      yBox.hi[2] = o1;
      yBox.lo[1] = c.M / 2;
      Box xBox = whole(c.xShape());
      auto [i0, i1] = inputRange(c, 0, o0, o1);
      xBox.lo[2] = i0;
      xBox.hi[2] = std::max(i0, i1);
      std::vector<T> x = slice<T>(X, xBox), y(count(c.yShape()), T(-7));
      y.resize(slice<T>(Y, yBox).size());
      ASSERT_EQ(
          runCompute(
              "Conv", c.attrs(),
              {TensorView::ofRegion(x.data(), kDType<T>, xBox, c.xShape()),
               TensorView::whole(w.data(), kDType<T>, c.wShape())},
              {TensorView::ofRegion(y.data(), kDType<T>, yBox, c.yShape())}, {},
              {}, ComputePath::Native),
          "")
          << "part " << part;
      expectBox(y, Y, yBox);

      // Without the halo's last input row (when it is inside the input)
      // the kernel refuses rather than computing a wrong value.
      if (xBox.hi[2] - xBox.lo[2] >= 2 && i1 <= c.in[0] && i1 > i0) {
        Box small = xBox;
        small.hi[2] -= 1;
        std::vector<T> xs = slice<T>(X, small);
        std::string err = runCompute(
            "Conv", c.attrs(),
            {TensorView::ofRegion(xs.data(), kDType<T>, small, c.xShape()),
             TensorView::whole(w.data(), kDType<T>, c.wShape())},
            {TensorView::ofRegion(y.data(), kDType<T>, yBox, c.yShape())}, {},
            {});
        EXPECT_NE(err.find("unsupported configuration"), std::string::npos)
            << err;
      }
    }
  }
}

TYPED_TEST(ConvKernels, ChannelAndKernelSplitsGivePartialSums) {
  using T = TypeParam;
  uint32_t seed = 500;
  for (const ConvCase &c : convCases()) {
    SCOPED_TRACE(c.describe());
    Tensor X = random(c.xShape(), seed++), W = random(c.wShape(), seed++);
    Tensor Y = zeros(c.yShape());
    forEachTerm(c, [&](int64_t n, int64_t m, int64_t ch, int64_t cw,
                       const Shape &o, const Shape &kk, const Shape &i) {
      Y.at(cat({n, m}, o)) += X.at(cat({n, ch}, i)) * W.at(cat({m, cw}, kk));
    });
    const int64_t Cg = c.C / c.G;
    // Split the per-group input channels in two (when there are two) and
    // the first kernel dimension in two: four partial sums.
    std::vector<std::pair<int64_t, int64_t>> cws = {{0, Cg}};
    if (Cg >= 2)
      cws = {{0, Cg / 2}, {Cg / 2, Cg}};
    std::vector<std::pair<int64_t, int64_t>> ks = {{0, c.k[0]}};
    if (c.k[0] >= 2)
      ks = {{0, 1}, {1, c.k[0]}};
    std::vector<double> sum(count(c.yShape()), 0.0);
    for (auto [c0, c1] : cws)
      for (auto [k0, k1] : ks) {
        Box wBox = whole(c.wShape());
        wBox.lo[1] = c0;
        wBox.hi[1] = c1;
        wBox.lo[2] = k0;
        wBox.hi[2] = k1;
        // X: with one group, only the channel slice; else all channels.
        Box xBox = whole(c.xShape());
        if (c.G == 1) {
          xBox.lo[1] = c0;
          xBox.hi[1] = c1;
        }
        std::vector<T> x = slice<T>(X, xBox), w = slice<T>(W, wBox),
                       y(count(c.yShape()), T(-7));
        ASSERT_EQ(
            runCompute(
                "Conv", c.attrs(),
                {TensorView::ofRegion(x.data(), kDType<T>, xBox, c.xShape()),
                 TensorView::ofRegion(w.data(), kDType<T>, wBox, c.wShape())},
                {TensorView::whole(y.data(), kDType<T>, c.yShape())}, {}, {},
                ComputePath::Native),
            "");
        for (size_t e = 0; e < y.size(); ++e)
          sum[e] += y[e];
      }
    std::vector<T> got(sum.begin(), sum.end());
    expectBox(got, Y, whole(c.yShape()));
  }
}

TYPED_TEST(ConvKernels, GradientsOnLocalBoxes) {
  using T = TypeParam;
  uint32_t seed = 700;
  for (const ConvCase &c : convCases()) {
    SCOPED_TRACE(c.describe());
    Tensor X = random(c.xShape(), seed++), W = random(c.wShape(), seed++),
           dY = random(c.yShape(), seed++);
    Tensor dX = zeros(c.xShape()), dW = zeros(c.wShape()), dB = zeros({c.M});
    forEachTerm(c, [&](int64_t n, int64_t m, int64_t ch, int64_t cw,
                       const Shape &o, const Shape &kk, const Shape &i) {
      dX.at(cat({n, ch}, i)) += dY.at(cat({n, m}, o)) * W.at(cat({m, cw}, kk));
      dW.at(cat({m, cw}, kk)) += dY.at(cat({n, m}, o)) * X.at(cat({n, ch}, i));
    });
    for (int64_t f = 0; f < count(c.yShape()); ++f)
      dB.v[(f / count(c.out())) % c.M] += dY.v[f];
    std::vector<T> w = W.as<T>();
    const Shape out = c.out();

    // ConvGradInput: dX split in two along the first spatial dimension;
    // dY holds the output positions that reach it (clipped).
    for (int part = 0; part < 2; ++part) {
      int64_t i0 = c.in[0] * part / 2, i1 = c.in[0] * (part + 1) / 2;
      Box dxBox = whole(c.xShape());
      dxBox.lo[2] = i0;
      dxBox.hi[2] = i1;
      int64_t oLo = out[0], oHi = 0;
      for (int64_t o = 0; o < out[0]; ++o)
        for (int64_t kk = 0; kk < c.k[0]; ++kk) {
          int64_t i = o * c.strides[0] - c.pads[0] + kk * c.dilations[0];
          if (i >= i0 && i < i1) {
            oLo = std::min(oLo, o);
            oHi = std::max(oHi, o + 1);
          }
        }
      Box dyBox = whole(c.yShape());
      dyBox.lo[2] = std::min(oLo, oHi);
      dyBox.hi[2] = oHi;
      std::vector<T> dy = slice<T>(dY, dyBox), dx(slice<T>(dX, dxBox).size());
      ASSERT_EQ(
          runCompute(
              "ConvGradInput", c.attrs(),
              {TensorView::ofRegion(dy.data(), kDType<T>, dyBox, c.yShape()),
               TensorView::whole(w.data(), kDType<T>, c.wShape()),
               TensorView::ofRegion(nullptr, kDType<T>, dxBox, c.xShape())},
              {TensorView::ofRegion(dx.data(), kDType<T>, dxBox, c.xShape())},
              {}, {}, ComputePath::Native),
          "")
          << "part " << part;
      expectBox(dx, dX, dxBox);
    }

    // ConvGradWeight and ConvBiasGrad: batch x first-spatial split of dY
    // (X with the halo), partial sums over the parts; dW's second half of
    // the output channels.
    Box dwBox = whole(c.wShape());
    dwBox.lo[0] = c.M / 2;
    std::vector<double> sumW(slice<T>(dW, dwBox).size(), 0.0), sumB(c.M, 0.0);
    for (int64_t n = 0; n < c.N; ++n)
      for (int part = 0; part < 2; ++part) {
        int64_t o0 = out[0] * part / 2, o1 = out[0] * (part + 1) / 2;
        if (o0 == o1)
          continue;
        Box dyBox = whole(c.yShape());
        dyBox.lo[0] = n;
        dyBox.hi[0] = n + 1;
        dyBox.lo[2] = o0;
        dyBox.hi[2] = o1;
        Box xBox = whole(c.xShape());
        xBox.lo[0] = n;
        xBox.hi[0] = n + 1;
        auto [i0, i1] = inputRange(c, 0, o0, o1);
        xBox.lo[2] = i0;
        xBox.hi[2] = std::max(i0, i1);
        std::vector<T> dy = slice<T>(dY, dyBox), x = slice<T>(X, xBox),
                       dw(sumW.size(), T(-7)), db(c.M, T(-7));
        ASSERT_EQ(
            runCompute(
                "ConvGradWeight", c.attrs(),
                {TensorView::ofRegion(dy.data(), kDType<T>, dyBox, c.yShape()),
                 TensorView::ofRegion(x.data(), kDType<T>, xBox, c.xShape()),
                 TensorView::absent()},
                {TensorView::ofRegion(dw.data(), kDType<T>, dwBox, c.wShape())},
                {}, {}, ComputePath::Native),
            "");
        ASSERT_EQ(runCompute("ConvBiasGrad", c.attrs(),
                             {TensorView::ofRegion(dy.data(), kDType<T>, dyBox,
                                                   c.yShape())},
                             {TensorView::whole(db.data(), kDType<T>, {c.M})},
                             {}, {}, ComputePath::Native),
                  "");
        for (size_t e = 0; e < dw.size(); ++e)
          sumW[e] += dw[e];
        for (int64_t m = 0; m < c.M; ++m)
          sumB[m] += db[m];
      }
    expectBox(std::vector<T>(sumW.begin(), sumW.end()), dW, dwBox);
    expectBox(std::vector<T>(sumB.begin(), sumB.end()), dB, whole({c.M}));
  }
}

TYPED_TEST(ConvKernels, AttributeErrors) {
  using T = TypeParam;
  ConvCase c{1, 2, 2, 1, {5}, {3}, {1}, {0, 0}, {1}};
  std::vector<T> x(10), w(12), y(6);
  auto run = [&](std::vector<Attr> attrs, Shape yShape) {
    return runCompute("Conv", attrs,
                      {TensorView::whole(x.data(), kDType<T>, c.xShape()),
                       TensorView::whole(w.data(), kDType<T>, c.wShape())},
                      {TensorView::whole(y.data(), kDType<T>, yShape)}, {}, {});
  };
  EXPECT_EQ(run(c.attrs(), c.yShape()), "");
  Attr autoPad;
  autoPad.name = "auto_pad";
  autoPad.kind = Attr::Kind::String;
  autoPad.s = "SAME_SIDEWAYS";
  EXPECT_NE(run({autoPad}, c.yShape()).find("unknown auto_pad"),
            std::string::npos);
  // SAME_UPPER pads to an output as long as the input (5, not 3).
  autoPad.s = "SAME_UPPER";
  EXPECT_NE(run({autoPad}, c.yShape()).find("output extent 3"),
            std::string::npos);
  std::vector<T> ySame(10);
  EXPECT_EQ(runCompute("Conv", {autoPad},
                       {TensorView::whole(x.data(), kDType<T>, c.xShape()),
                        TensorView::whole(w.data(), kDType<T>, c.wShape())},
                       {TensorView::whole(ySame.data(), kDType<T>, {1, 2, 5})},
                       {}, {}),
            "");
  EXPECT_NE(run({intsAttr("kernel_shape", {2})}, c.yShape())
                .find("kernel_shape"),
            std::string::npos);
  EXPECT_NE(run({}, {1, 2, 4}).find("output extent 4"), std::string::npos);
  EXPECT_NE(run({intAttr("group", 2)}, c.yShape()).find("input channels"),
            std::string::npos);
  EXPECT_NE(run({intsAttr("strides", {0})}, c.yShape()).find("positive"),
            std::string::npos);
}

} // namespace
