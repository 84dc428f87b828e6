//===- KernelsTest.cpp - CPU kernels vs double-precision references -------===//
//
// Every call runs the kernel twice (`run`): in float32 on the test's float
// data, and in float64 on the same values (the kernels are templates over
// float and double). `expectNear` then checks the float32 result to the
// test's tolerance and the float64 one to 1e-12 of the same reference.
//
//===----------------------------------------------------------------------===//

#include "../lib/VectorizableMath.h"
#include "tofu/runtime/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <random>
#include <tuple>

using namespace tofu::runtime;
using tofu::plan::Attr;
using tofu::plan::DType;

namespace {

/// A host tensor plus the view a kernel sees of it; `d` receives an output's
/// float64 result.
struct Host {
  std::vector<float> f;
  std::vector<double> d;
  std::vector<int64_t> i;
  TensorView view;
};

int64_t count(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Host randomF32(std::vector<int64_t> shape, uint32_t seed,
               std::vector<int64_t> lo = {},
               std::vector<int64_t> global = {}) {
  Host h;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  h.f.resize(count(shape));
  for (float &x : h.f)
    x = dist(gen);
  h.view.dtype = DType::F32;
  h.view.lo = lo.empty() ? std::vector<int64_t>(shape.size(), 0) : lo;
  h.view.globalShape = global.empty() ? shape : global;
  h.view.shape = std::move(shape);
  h.view.data = h.f.data();
  return h;
}

Host zerosF32(std::vector<int64_t> shape, std::vector<int64_t> lo = {},
              std::vector<int64_t> global = {}) {
  Host h = randomF32(shape, 0, lo, global);
  std::fill(h.f.begin(), h.f.end(), -7.0f); // kernels must overwrite
  return h;
}

Host labels(std::vector<int64_t> values, int64_t lo, int64_t global) {
  Host h;
  h.i = std::move(values);
  h.view.dtype = DType::I64;
  h.view.shape = {static_cast<int64_t>(h.i.size())};
  h.view.lo = {lo};
  h.view.globalShape = {global};
  h.view.data = h.i.data();
  return h;
}

Attr fattr(const char *name, double v) {
  Attr a;
  a.name = name;
  a.kind = Attr::Kind::Float;
  a.f = v;
  return a;
}
Attr iattr(const char *name, int64_t v) {
  Attr a;
  a.name = name;
  a.kind = Attr::Kind::Int;
  a.i = v;
  return a;
}
Attr sattr(const char *name, const char *v) {
  Attr a;
  a.name = name;
  a.kind = Attr::Kind::String;
  a.s = v;
  return a;
}

/// `v` with its float32 elements copied into float64 storage from `store`.
TensorView inFloat64(const TensorView &v,
                     std::deque<std::vector<double>> &store) {
  if (v.dtype != DType::F32 || !v.present())
    return v;
  const float *src = static_cast<const float *>(v.data);
  store.emplace_back(src, src + v.numElements());
  TensorView w = v;
  w.dtype = DType::F64;
  w.data = store.back().data();
  return w;
}

/// Runs kernel `name` in float32, then again in float64 on the same values
/// (the float64 output lands in `out.d`); returns the float32 call's error,
/// and the float64 call must succeed or fail alike. The vectors must outlive
/// the call.
std::string run(const char *name, std::vector<Host *> in, Host &out,
                const std::vector<Attr> &attrs = {}) {
  KernelFn fn = lookupKernel(name);
  if (!fn)
    return std::string("no kernel ") + name;
  KernelArgs args;
  for (Host *h : in)
    args.inputs.push_back(h ? h->view : TensorView());
  args.outputs.push_back(out.view);
  args.attrs = &attrs;
  std::string err = fn(args);

  std::deque<std::vector<double>> store;
  KernelArgs args64 = args;
  for (TensorView &v : args64.inputs)
    v = inFloat64(v, store);
  out.d.assign(out.view.numElements(), -7.0); // the kernel must overwrite
  args64.outputs[0].dtype = DType::F64;
  args64.outputs[0].data = out.d.data();
  std::string err64 = fn(args64);
  EXPECT_EQ(err.empty(), err64.empty())
      << name << " float32: '" << err << "', float64: '" << err64 << "'";
  return err;
}

/// Expects output `out`'s float32 result within `tol` (relative) of `want`
/// and its float64 result within 1e-12 (or exactly, with tol 0).
void expectNear(const Host &out, const std::vector<double> &want,
                double tol = 1e-5) {
  ASSERT_EQ(out.f.size(), want.size());
  ASSERT_EQ(out.d.size(), want.size());
  const double tol64 = std::min(tol, 1e-12);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(out.f[i], want[i], tol * (1 + std::fabs(want[i])))
        << "float32 at " << i;
    EXPECT_NEAR(out.d[i], want[i], tol64 * (1 + std::fabs(want[i])))
        << "float64 at " << i;
  }
}

TEST(Kernels, RegistryKnowsTheOpTable) {
  for (const char *name :
       {"Gemm", "MatMul", "Transpose", "Add", "Relu", "ReluGrad", "Scale",
        "BiasGrad", "SoftmaxCrossEntropyLoss", "SoftmaxCrossEntropyLossGrad",
        "SGDUpdate", "Ones"})
    EXPECT_NE(lookupKernel(name), nullptr) << name;
  EXPECT_EQ(lookupKernel("Conv2D"), nullptr);
}

TEST(Kernels, Relu) {
  Host x = randomF32({2, 3, 5}, 1), y = zerosF32({2, 3, 5});
  ASSERT_EQ(run("Relu", {&x}, y), "");
  std::vector<double> want;
  for (float v : x.f)
    want.push_back(std::max<double>(v, 0.0));
  expectNear(y, want, 0);
}

TEST(Kernels, ReluGrad) {
  Host dy = randomF32({4, 5}, 2), x = randomF32({4, 5}, 3),
       dx = zerosF32({4, 5});
  ASSERT_EQ(run("ReluGrad", {&dy, &x}, dx), "");
  std::vector<double> want;
  for (size_t i = 0; i < x.f.size(); ++i)
    want.push_back(x.f[i] > 0 ? dy.f[i] : 0.0);
  expectNear(dx, want, 0);

  // The mask's edges: X = 0, -0 and NaN give +0 whatever dY holds (NaN and
  // infinities included); X > 0 passes dY's bits through, NaN and -0 too.
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  Host dy2 = zerosF32({6}), x2 = zerosF32({6}), dx2 = zerosF32({6});
  const float dyValues[] = {nan, -inf, 5.0f, nan, -0.0f, 2.5f};
  const float xValues[] = {0.0f, -0.0f, nan, 1.0f, 3.0f, -1.0f};
  std::copy(std::begin(dyValues), std::end(dyValues), dy2.f.begin());
  std::copy(std::begin(xValues), std::end(xValues), x2.f.begin());
  ASSERT_EQ(run("ReluGrad", {&dy2, &x2}, dx2), "");
  for (int i : {0, 1, 2, 5}) {
    EXPECT_EQ(dx2.f[i], 0.0f) << i;
    EXPECT_FALSE(std::signbit(dx2.f[i])) << i;
  }
  EXPECT_TRUE(std::isnan(dx2.f[3]));
  EXPECT_EQ(dx2.f[4], 0.0f);
  EXPECT_TRUE(std::signbit(dx2.f[4]));
}

TEST(Kernels, ScaleDefaultAndAttr) {
  Host x = randomF32({7}, 4), y = zerosF32({7});
  ASSERT_EQ(run("Scale", {&x}, y), "");
  expectNear(y, std::vector<double>(x.f.begin(), x.f.end()), 0);
  ASSERT_EQ(run("Scale", {&x}, y, {fattr("alpha", -2.5)}), "");
  std::vector<double> want;
  for (float v : x.f)
    want.push_back(-2.5 * v);
  expectNear(y, want);
}

TEST(Kernels, SGDUpdate) {
  Host w = randomF32({3, 4}, 5), g = randomF32({3, 4}, 6),
       out = zerosF32({3, 4});
  ASSERT_EQ(run("SGDUpdate", {&w, &g}, out), "");
  std::vector<double> want;
  for (size_t i = 0; i < w.f.size(); ++i)
    want.push_back(double(w.f[i]) - 0.1 * g.f[i]);
  expectNear(out, want);
  ASSERT_EQ(run("SGDUpdate", {&w, &g}, out, {fattr("lr", 0.01)}), "");
  for (size_t i = 0; i < w.f.size(); ++i)
    want[i] = double(w.f[i]) - 0.01 * g.f[i];
  expectNear(out, want);
}

TEST(Kernels, Ones) {
  Host x = randomF32({2, 2}, 7), y = zerosF32({2, 2});
  ASSERT_EQ(run("Ones", {&x}, y), "");
  expectNear(y, std::vector<double>(4, 1.0), 0);
}

TEST(Kernels, ElementwiseRejectsMismatchedSizes) {
  Host a = randomF32({3}, 1), b = randomF32({4}, 2), y = zerosF32({3});
  EXPECT_NE(run("ReluGrad", {&a, &b}, y), "");
}

/// Reference ONNX broadcast add on global tensors; returns the box of rows
/// [r0, r1) of the (rank-2) result.
TEST(Kernels, AddSameShape) {
  Host a = randomF32({3, 4}, 8), b = randomF32({3, 4}, 9), c = zerosF32({3, 4});
  ASSERT_EQ(run("Add", {&a, &b}, c), "");
  std::vector<double> want;
  for (size_t i = 0; i < a.f.size(); ++i)
    want.push_back(double(a.f[i]) + b.f[i]);
  expectNear(c, want);
}

TEST(Kernels, AddBroadcastRowVectorOnLocalRows) {
  // Global: A [6, 4] + B [4] -> C [6, 4]; this device computes rows [2, 5).
  Host aFull = randomF32({6, 4}, 10), b = randomF32({4}, 11);
  Host a = randomF32({3, 4}, 0, {2, 0}, {6, 4});
  std::copy(aFull.f.begin() + 8, aFull.f.begin() + 20, a.f.begin());
  Host c = zerosF32({3, 4}, {2, 0}, {6, 4});
  ASSERT_EQ(run("Add", {&a, &b}, c), "");
  std::vector<double> want;
  for (int r = 2; r < 5; ++r)
    for (int j = 0; j < 4; ++j)
      want.push_back(double(aFull.f[r * 4 + j]) + b.f[j]);
  expectNear(c, want);
}

TEST(Kernels, AddBroadcastBothWays) {
  // A [3, 1] + B [1, 4] -> C [3, 4]; local columns [1, 3) of C.
  Host a = randomF32({3, 1}, 12);
  Host bFull = randomF32({1, 4}, 13);
  Host b = randomF32({1, 2}, 0, {0, 1}, {1, 4});
  b.f = {bFull.f[1], bFull.f[2]};
  b.view.data = b.f.data();
  Host c = zerosF32({3, 2}, {0, 1}, {3, 4});
  ASSERT_EQ(run("Add", {&a, &b}, c), "");
  std::vector<double> want;
  for (int i = 0; i < 3; ++i)
    for (int j = 1; j < 3; ++j)
      want.push_back(double(a.f[i]) + bFull.f[j]);
  expectNear(c, want);
}

TEST(Kernels, AddReportsMissingInputRegion) {
  Host a = randomF32({2, 4}, 1, {0, 0}, {4, 4});
  Host b = randomF32({2, 4}, 2, {0, 0}, {4, 4});
  Host c = zerosF32({2, 4}, {2, 0}, {4, 4}); // needs rows [2, 4)
  EXPECT_NE(run("Add", {&a, &b}, c).find("lacks global index"),
            std::string::npos);
}

/// Reference Gemm on whole matrices in double.
std::vector<double> refGemm(const std::vector<float> &A,
                            const std::vector<float> &B, const float *C,
                            const std::vector<int64_t> &cShape, int64_t M,
                            int64_t N, int64_t K, bool tA, bool tB,
                            double alpha, double beta) {
  std::vector<double> Y(M * N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += double(tA ? A[k * M + m] : A[m * K + k]) *
             double(tB ? B[n * K + k] : B[k * N + n]);
      double c = 0;
      if (C) {
        int64_t ci = 0;
        if (cShape.size() == 2)
          ci = (cShape[0] == 1 ? 0 : m) * cShape[1] + (cShape[1] == 1 ? 0 : n);
        else if (cShape.size() == 1)
          ci = cShape[0] == 1 ? 0 : n;
        c = C[ci];
      }
      Y[m * N + n] = alpha * s + beta * c;
    }
  return Y;
}

TEST(Kernels, GemmAllTransposesAndBroadcasts) {
  const int64_t M = 5, N = 3, K = 4;
  std::vector<std::vector<int64_t>> cShapes = {
      {}, {N}, {1, N}, {M, 1}, {M, N}, {1}};
  for (int tA = 0; tA < 2; ++tA)
    for (int tB = 0; tB < 2; ++tB)
      for (int ci = -1; ci < static_cast<int>(cShapes.size()); ++ci) {
        Host A = randomF32(tA ? std::vector<int64_t>{K, M}
                              : std::vector<int64_t>{M, K},
                           20 + tA);
        Host B = randomF32(tB ? std::vector<int64_t>{N, K}
                              : std::vector<int64_t>{K, N},
                           30 + tB);
        Host C;
        std::vector<int64_t> cShape;
        if (ci >= 0) {
          cShape = cShapes[ci];
          C = randomF32(cShape, 40 + ci);
        }
        Host Y = zerosF32({M, N});
        std::vector<Attr> attrs = {fattr("alpha", 0.75), fattr("beta", -1.5),
                                   iattr("transA", tA), iattr("transB", tB)};
        std::vector<Host *> in = {&A, &B};
        if (ci >= 0)
          in.push_back(&C);
        ASSERT_EQ(run("Gemm", in, Y, attrs), "");
        expectNear(Y, refGemm(A.f, B.f, ci >= 0 ? C.f.data() : nullptr, cShape,
                              M, N, K, tA, tB, 0.75, -1.5));
      }
}

TEST(Kernels, GemmAbsentOptionalC) {
  Host A = randomF32({2, 3}, 1), B = randomF32({3, 2}, 2), Y = zerosF32({2, 2});
  std::vector<Host *> in = {&A, &B, nullptr};
  ASSERT_EQ(run("Gemm", in, Y), "");
  expectNear(Y, refGemm(A.f, B.f, nullptr, {}, 2, 2, 3, false, false, 1, 1));
}

TEST(Kernels, GemmOnLocalRowsWithBias) {
  // Global Y [6, 3] = A [6, 4] B [4, 3] + C [3]; this device has rows [2, 5).
  const int64_t M = 6, N = 3, K = 4;
  Host Afull = randomF32({M, K}, 50), B = randomF32({K, N}, 51),
       C = randomF32({N}, 52);
  Host A = randomF32({3, K}, 0, {2, 0}, {M, K});
  std::copy(Afull.f.begin() + 2 * K, Afull.f.begin() + 5 * K, A.f.begin());
  Host Y = zerosF32({3, N}, {2, 0}, {M, N});
  ASSERT_EQ(run("Gemm", {&A, &B, &C}, Y), "");
  auto full = refGemm(Afull.f, B.f, C.f.data(), {N}, M, N, K, false, false, 1,
                      1);
  expectNear(Y,
             std::vector<double>(full.begin() + 2 * N, full.begin() + 5 * N));
}

TEST(Kernels, GemmShapeMismatch) {
  Host A = randomF32({2, 3}, 1), B = randomF32({4, 2}, 2), Y = zerosF32({2, 2});
  EXPECT_NE(run("Gemm", {&A, &B}, Y).find("local shapes do not match"),
            std::string::npos);
}

TEST(Kernels, MatMul) {
  Host A = randomF32({4, 6}, 60), B = randomF32({6, 5}, 61),
       Y = zerosF32({4, 5});
  ASSERT_EQ(run("MatMul", {&A, &B}, Y), "");
  expectNear(Y, refGemm(A.f, B.f, nullptr, {}, 4, 5, 6, false, false, 1, 0));
}

TEST(Kernels, ThreadedMatMulOverwritesItsOutput) {
  // Products large enough to split over the pool (blasGemmThreads): by rows
  // (C taller than wide; wide with a short K and 32 rows a thread) and by
  // columns (too few rows: each thread's block a strided part of every
  // row). blasGemm zeroes each block itself before BLAS adds into it: the
  // NaNs the output held must not survive, nor may one thread's zeroing
  // reach another's block.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto [M, K, N] : {std::array<int64_t, 3>{256, 32, 96},
                         std::array<int64_t, 3>{96, 32, 256},
                         std::array<int64_t, 3>{48, 64, 256}}) {
    Host A = randomF32({M, K}, 64), B = randomF32({K, N}, 65),
         Y = zerosF32({M, N});
    std::fill(Y.f.begin(), Y.f.end(), nan);
    ASSERT_EQ(run("MatMul", {&A, &B}, Y), "");
    expectNear(Y, refGemm(A.f, B.f, nullptr, {}, M, N, K, false, false, 1, 0));
  }
}

TEST(Kernels, Transpose) {
  Host X = randomF32({3, 5}, 62), Y = zerosF32({5, 3});
  ASSERT_EQ(run("Transpose", {&X}, Y), "");
  std::vector<double> want;
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 3; ++m)
      want.push_back(X.f[m * 5 + n]);
  expectNear(Y, want, 0);
}

TEST(Kernels, BiasGrad) {
  Host dY = randomF32({7, 3}, 63), dB = zerosF32({3});
  ASSERT_EQ(run("BiasGrad", {&dY}, dB), "");
  std::vector<double> want(3, 0.0);
  for (int m = 0; m < 7; ++m)
    for (int n = 0; n < 3; ++n)
      want[n] += dY.f[m * 3 + n];
  expectNear(dB, want);
}

/// Reference softmax cross-entropy contributions of rows, / divisor.
double refLoss(const std::vector<float> &s, const std::vector<int64_t> &l,
               int64_t C, int64_t divisor) {
  double total = 0;
  for (size_t n = 0; n < l.size(); ++n) {
    double mx = -1e300, sum = 0;
    for (int64_t c = 0; c < C; ++c)
      mx = std::max(mx, double(s[n * C + c]));
    for (int64_t c = 0; c < C; ++c)
      sum += std::exp(double(s[n * C + c]) - mx);
    total += -(double(s[n * C + l[n]]) - mx - std::log(sum));
  }
  return total / divisor;
}

/// The float exp against the double one rounded to float: at most 2 units
/// in the last place (counted as the distance between the representations,
/// so subnormal results count in units of the least subnormal) over every
/// 2^12-th float in [-110, 89], and the edges exactly.
TEST(Kernels, VectorizableExp) {
  auto bits = [](float f) {
    int32_t b;
    std::memcpy(&b, &f, sizeof b);
    return b;
  };
  int64_t worst = 0;
  float worstAt = 0;
  for (float x : {-110.0f, 89.0f}) {
    for (int32_t b = bits(0.0f); b <= bits(std::fabs(x)); b += 1 << 12) {
      float v;
      std::memcpy(&v, &b, sizeof v);
      v = std::copysign(v, x);
      float want = static_cast<float>(std::exp(static_cast<double>(v)));
      int64_t ulps = std::abs(int64_t(bits(vectorizableExp(v))) - int64_t(bits(want)));
      if (ulps > worst) {
        worst = ulps;
        worstAt = v;
      }
    }
  }
  EXPECT_LE(worst, 2) << "at x = " << worstAt;
  EXPECT_EQ(vectorizableExp(0.0f), 1.0f);
  EXPECT_EQ(vectorizableExp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(vectorizableExp(-104.5f), 0.0f);
  EXPECT_GT(vectorizableExp(-100.0f), 0.0f); // a subnormal, not flushed
  EXPECT_EQ(vectorizableExp(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(vectorizableExp(89.0f), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(vectorizableExp(std::numeric_limits<float>::quiet_NaN())));
}

/// Float32 tanh and sigmoid (VectorizableMath.h) against the double forms,
/// rounded, over every 2^12-th float in [-12, 12] (tanh) and [-80, 80]
/// (sigmoid, where its result is a normal float): within 4 ulp; and the
/// special values.
TEST(Kernels, VectorizableTanhAndSigmoid) {
  auto bits = [](float f) {
    int32_t b;
    std::memcpy(&b, &f, sizeof b);
    return b;
  };
  auto worstUlps = [&](float limit, auto fn, auto ref, float &at) {
    int64_t worst = 0;
    for (float sign : {-1.0f, 1.0f})
      for (int32_t b = bits(0.0f); b <= bits(limit); b += 1 << 12) {
        float v;
        std::memcpy(&v, &b, sizeof v);
        v = std::copysign(v, sign);
        float want = static_cast<float>(ref(static_cast<double>(v)));
        int64_t ulps = std::abs(int64_t(bits(fn(v))) - int64_t(bits(want)));
        if (ulps > worst) {
          worst = ulps;
          at = v;
        }
      }
    return worst;
  };
  float at = 0;
  EXPECT_LE(worstUlps(12.0f, vectorizableTanh,
                      [](double x) { return std::tanh(x); }, at),
            4)
      << "tanh at x = " << at;
  EXPECT_LE(worstUlps(80.0f, vectorizableSigmoid,
                      [](double x) { return 1 / (1 + std::exp(-x)); }, at),
            4)
      << "sigmoid at x = " << at;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(vectorizableTanh(inf), 1.0f);
  EXPECT_EQ(vectorizableTanh(-inf), -1.0f);
  EXPECT_EQ(vectorizableTanh(30.0f), 1.0f);
  EXPECT_EQ(vectorizableTanh(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(vectorizableTanh(-0.0f)));
  EXPECT_EQ(vectorizableTanh(1e-30f), 1e-30f);
  EXPECT_TRUE(std::isnan(vectorizableTanh(nan)));
  EXPECT_EQ(vectorizableSigmoid(inf), 1.0f);
  EXPECT_EQ(vectorizableSigmoid(-inf), 0.0f);
  EXPECT_EQ(vectorizableSigmoid(0.0f), 0.5f);
  EXPECT_TRUE(std::isnan(vectorizableSigmoid(nan)));
}

/// Float32 Gelu and GeluGrad ("none") against the double form computed
/// with erfc (accurate in the left tail), over every 2^10-th float in
/// [-14, 14], where the result is a normal float: relative error within
/// 1e-6 for x >= -2 (measured 8.5e-7, at x = -1.41 where the central form's
/// 1/2 + u P(u^2) / 2 cancels to 0.08), and within 2e-5 in the left tail
/// (measured 1.6e-5 at x = -13.3; it grows with x^2, the rounding of x^2 / 2
/// in float32; there PyTorch's float32 1 + erf has cancelled to 0).
TEST(Kernels, GeluFloat32) {
  std::vector<float> xs;
  for (float sign : {-1.0f, 1.0f})
    for (int32_t b = 0;; b += 1 << 10) {
      float v;
      std::memcpy(&v, &b, sizeof v);
      if (v > 14.0f)
        break;
      xs.push_back(sign * v);
    }
  const int64_t n = static_cast<int64_t>(xs.size());
  Host x = zerosF32({n}), y = zerosF32({n}), dy = zerosF32({n}),
       dx = zerosF32({n});
  std::copy(xs.begin(), xs.end(), x.f.begin());
  std::fill(dy.f.begin(), dy.f.end(), 1.0f);
  ASSERT_EQ(run("Gelu", {&x}, y), "");
  ASSERT_EQ(run("GeluGrad", {&dy, &x}, dx), "");
  double worstTail = 0, worstCentral = 0;
  for (int64_t k = 0; k < n; ++k) {
    const double v = xs[k];
    const double cdf = 0.5 * std::erfc(-v * 0.70710678118654752);
    const double want = v * cdf;
    const double wantGrad = cdf + v * 0.39894228040143268 * std::exp(-0.5 * v * v);
    // GeluGrad's terms cancel near its root (x = -0.75): its error is
    // relative to the terms' magnitude.
    const double gradScale =
        cdf + std::fabs(v) * 0.39894228040143268 * std::exp(-0.5 * v * v);
    for (auto [got, ref, scale] :
         {std::tuple<double, double, double>{y.f[k], want, std::fabs(want)},
          std::tuple<double, double, double>{dx.f[k], wantGrad, gradScale}}) {
      if (scale < std::numeric_limits<float>::min())
        continue;
      const double rel = std::fabs(got - ref) / scale;
      double &worst = v >= -2 ? worstCentral : worstTail;
      worst = std::max(worst, rel);
    }
  }
  EXPECT_LE(worstCentral, 1e-6);
  EXPECT_LE(worstTail, 2e-5);
  float gauss;
  EXPECT_TRUE(std::isnan(vectorizableNormalCdf(NAN, gauss)));
  EXPECT_EQ(vectorizableNormalCdf(INFINITY, gauss), 1.0f);
  EXPECT_EQ(vectorizableNormalCdf(-INFINITY, gauss), 0.0f);
  std::printf("Gelu/GeluGrad float32: worst relative error %.3g (x >= -2), "
              "%.3g (x < -2)\n", worstCentral, worstTail);
}

/// Softmax and SoftmaxGrad over the last dim against a double reference:
/// rows of 1 to 67 elements (the lanes and their tails), large logits, an
/// attention mask of -inf entries, and a row with a NaN (all NaN, as in
/// PyTorch); float32 within 2e-6 relative, float64 within 1e-14.
TEST(Kernels, SoftmaxRowsAgainstDoubleReference) {
  for (int64_t n : {1, 7, 8, 9, 16, 67}) {
    Host x = randomF32({4, n}, 17 + n);
    for (int64_t j = 0; j < n; ++j) {
      x.f[1 * n + j] *= 40.0f; // large logits
      if (j % 3 == 1)
        x.f[2 * n + j] = -std::numeric_limits<float>::infinity();
    }
    x.f[3 * n + n / 2] = std::numeric_limits<float>::quiet_NaN();
    Host y = zerosF32({4, n});
    ASSERT_EQ(run("Softmax", {&x}, y), "");
    Host dy = randomF32({4, n}, 5 + n);
    Host yRef = zerosF32({4, n}); // float32 softmax as the gradient's Y
    std::vector<double> want(4 * n), wantGrad(4 * n);
    for (int64_t r = 0; r < 4; ++r) {
      double mx = -INFINITY, sum = 0, dot = 0;
      for (int64_t j = 0; j < n; ++j)
        mx = std::max(mx, double(x.f[r * n + j]));
      for (int64_t j = 0; j < n; ++j)
        sum += std::exp(double(x.f[r * n + j]) - mx);
      for (int64_t j = 0; j < n; ++j) {
        want[r * n + j] = std::exp(double(x.f[r * n + j]) - mx) / sum;
        yRef.f[r * n + j] = y.f[r * n + j];
        dot += double(dy.f[r * n + j]) * y.f[r * n + j];
      }
      for (int64_t j = 0; j < n; ++j)
        wantGrad[r * n + j] =
            double(y.f[r * n + j]) * (double(dy.f[r * n + j]) - dot);
    }
    for (int64_t k = 0; k < 4 * n; ++k) {
      if (k >= 3 * n) {
        EXPECT_TRUE(std::isnan(y.f[k]) && std::isnan(y.d[k]))
            << "n " << n << " element " << k;
        continue;
      }
      EXPECT_NEAR(y.f[k], want[k], 2e-6 * want[k] + 1e-30)
          << "n " << n << " element " << k;
      EXPECT_NEAR(y.d[k], want[k], 1e-14 * want[k] + 1e-300)
          << "n " << n << " element " << k;
      if (k >= 2 * n && (k - 2 * n) % 3 == 1)
        EXPECT_EQ(y.f[k], 0.0f);
    }
    Host dx = zerosF32({3, n});
    dy.view.shape = yRef.view.shape = dy.view.globalShape =
        yRef.view.globalShape = {3, n};
    dx.view.globalShape = {3, n};
    ASSERT_EQ(run("SoftmaxGrad", {&dy, &yRef}, dx), "");
    for (int64_t k = 0; k < 3 * n; ++k)
      EXPECT_NEAR(dx.f[k], wantGrad[k], 1e-6 * (std::fabs(wantGrad[k]) + 1e-3))
          << "n " << n << " element " << k;
  }
}

TEST(Kernels, SoftmaxCrossEntropyLossOnLocalRows) {
  // Global N = 8, this device holds rows [4, 7) of the scores. "mean"
  // divides by the number of non-ignored labels of all 8 rows, so it reads
  // the whole labels tensor; "sum" needs only the local rows.
  Host scores = randomF32({3, 5}, 70, {4, 0}, {8, 5});
  Host all = labels({1, -100, 3, 0, 0, 4, 2, -100}, 0, 8);
  Host loss = zerosF32({});
  ASSERT_EQ(run("SoftmaxCrossEntropyLoss", {&scores, &all}, loss,
                {sattr("reduction", "mean")}),
            "");
  expectNear(loss, {refLoss(scores.f, {0, 4, 2}, 5, 6)});
  Host local = labels({0, 4, 2}, 4, 8);
  ASSERT_EQ(run("SoftmaxCrossEntropyLoss", {&scores, &local}, loss,
                {sattr("reduction", "sum")}),
            "");
  expectNear(loss, {refLoss(scores.f, {0, 4, 2}, 5, 1)});
  // "mean" with only the local labels: the kernel declines (the divisor
  // counts every row), so the interpreter would take over.
  EXPECT_NE(run("SoftmaxCrossEntropyLoss", {&scores, &local}, loss)
                .find("unsupported configuration: reduction \"mean\" needs "
                      "the whole labels tensor"),
            std::string::npos);
}

TEST(Kernels, SoftmaxCrossEntropyLossIsStable) {
  Host scores = randomF32({2, 3}, 71);
  scores.f = {1000.0f, 0.0f, -1000.0f, 500.0f, 501.0f, 502.0f};
  Host lab = labels({0, 2}, 0, 2);
  Host loss = zerosF32({});
  ASSERT_EQ(run("SoftmaxCrossEntropyLoss", {&scores, &lab}, loss), "");
  EXPECT_TRUE(std::isfinite(loss.f[0]));
  expectNear(loss, {refLoss(scores.f, lab.i, 3, 2)});
}

TEST(Kernels, SoftmaxCrossEntropyLossErrors) {
  Host scores = randomF32({2, 3}, 72);
  Host loss = zerosF32({});
  Host bad = labels({1, 3}, 10, 12);
  scores.view.lo = {10, 0};
  scores.view.globalShape = {12, 3};
  std::vector<Attr> sum = {sattr("reduction", "sum")};
  std::string err = run("SoftmaxCrossEntropyLoss", {&scores, &bad}, loss, sum);
  EXPECT_NE(err.find("label 3 of sample 11 is outside [0, 3) and is not "
                     "ignore_index (-100)"),
            std::string::npos)
      << err;
  // A label equal to ignore_index contributes nothing.
  Host ignored = labels({-100, 0}, 10, 12);
  ASSERT_EQ(run("SoftmaxCrossEntropyLoss", {&scores, &ignored}, loss, sum), "");
  std::vector<float> second(scores.f.begin() + 3, scores.f.end());
  expectNear(loss, {refLoss(second, {0}, 3, 1)});
  Host good = labels({1, 2}, 10, 12);
  err = run("SoftmaxCrossEntropyLoss", {&scores, &good}, loss,
            {sattr("reduction", "max")});
  EXPECT_NE(err.find("reduction 'max' is not one of"), std::string::npos)
      << err;
}

TEST(Kernels, SoftmaxCrossEntropyLossGrad) {
  Host dloss = randomF32({}, 73);
  dloss.f[0] = 1.5f;
  Host scores = randomF32({3, 4}, 74, {3, 0}, {6, 4});
  Host lab = labels({0, 0, 2, 3, 0, 1}, 0, 6); // "mean" reads every label
  lab.i = {3, 0, 1};                           // the local rows, for `want`
  Host all = labels({0, 0, 2, 3, 0, 1}, 0, 6);
  Host ds = zerosF32({3, 4}, {3, 0}, {6, 4});
  ASSERT_EQ(run("SoftmaxCrossEntropyLossGrad", {&dloss, &scores, &all}, ds),
            "");
  std::vector<double> want;
  for (int n = 0; n < 3; ++n) {
    double mx = -1e300, sum = 0;
    for (int c = 0; c < 4; ++c)
      mx = std::max(mx, double(scores.f[n * 4 + c]));
    for (int c = 0; c < 4; ++c)
      sum += std::exp(double(scores.f[n * 4 + c]) - mx);
    for (int c = 0; c < 4; ++c) {
      double p = std::exp(double(scores.f[n * 4 + c]) - mx) / sum;
      want.push_back(1.5 * (p - (lab.i[n] == c ? 1 : 0)) / 6.0);
    }
  }
  expectNear(ds, want);
}

TEST(Kernels, SoftmaxCrossEntropyLossGradMatchesFiniteDifference) {
  Host scores = randomF32({2, 3}, 75);
  Host lab = labels({2, 1}, 0, 2);
  Host one = zerosF32({});
  one.f[0] = 1.0f;
  Host ds = zerosF32({2, 3});
  ASSERT_EQ(run("SoftmaxCrossEntropyLossGrad", {&one, &scores, &lab}, ds), "");
  for (int e = 0; e < 6; ++e) {
    std::vector<float> plus = scores.f, minus = scores.f;
    plus[e] += 1e-2f;
    minus[e] -= 1e-2f;
    double fd = (refLoss(plus, lab.i, 3, 2) - refLoss(minus, lab.i, 3, 2)) /
                (double(plus[e]) - double(minus[e]));
    EXPECT_NEAR(ds.f[e], fd, 1e-4);
  }
}

} // namespace

/// An index outside [-rows, rows) stops Gather with the value (issue 18): it
/// fell back to the interpreter, which read zeros, a silently wrong
/// embedding. In range, negative indices count from the end.
TEST(Kernels, GatherRefusesAnOutOfRangeIndex) {
  Host table = randomF32({5, 3}, 90), out = zerosF32({2, 3});
  Host ids = labels({1, -1}, 0, 2);
  ASSERT_EQ(run("Gather", {&table, &ids}, out), "");
  std::vector<double> want;
  for (int row : {1, 4})
    for (int c = 0; c < 3; ++c)
      want.push_back(table.f[row * 3 + c]);
  expectNear(out, want, 0);
  Host bad = labels({1, 5}, 0, 2);
  EXPECT_EQ(run("Gather", {&table, &bad}, out),
            "Gather: index 5 is outside [-5, 5) of the axis it gathers "
            "(PyTorch and onnxruntime raise too)");
}
