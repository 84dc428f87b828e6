//===- GradientResizeInterpTest.cpp - ResizeInterp: values and gradient ---===//
//
// ResizeInterp (the form of ONNX Resize linear / cubic) against values
// computed by hand with onnx's reference formulas, and its gradient rule
// (ResizeInterpGrad, the transpose of the interpolation, edge taps clamped)
// against central differences in float64, for up- and downsampling, the
// coordinate fractions of half_pixel, asymmetric and align_corners, and
// dims left alone (one tap).
//
//===----------------------------------------------------------------------===//
#include "GradientCheck.h"

#include <cmath>

using namespace tofu::tdl;
using namespace tofu::tdl::test;

namespace {

AttrValue S(std::string v) { return AttrValue::ofString(std::move(v)); }
AttrValue F(double v) { return AttrValue::ofFloat(v); }

/// Attributes of a 1 x 1 x n resize along the last dim with x = (a y + b) / c.
AttrMap attrs1d(const char *mode, int64_t out, int64_t a, int64_t b,
                int64_t c) {
  return {{"mode", S(mode)},
          {"sizes", ints({1, 1, out})},
          {"coord_num", ints({1, 1, a})},
          {"coord_off", ints({0, 0, b})},
          {"coord_den", ints({1, 1, c})}};
}

std::vector<double> run1d(const AttrMap &attrs, std::vector<double> x) {
  int64_t n = static_cast<int64_t>(x.size());
  OpInstance inst = mustInstantiate(SpecLibrary::builtin(), "ResizeInterp",
                                    {f32({1, 1, n})}, attrs);
  DenseTensor t = tensor(f32({1, 1, n}), std::move(x));
  auto out = evaluate(inst, {&t});
  if (!out) {
    ADD_FAILURE() << errorText(out.takeError());
    return {};
  }
  return (*out)[0].data;
}

/// Keys' cubic kernel (onnx's _cubic_coeffs) at distance z.
double keys(double z, double a) {
  z = std::fabs(z);
  if (z <= 1)
    return ((a + 2) * z - (a + 3)) * z * z + 1;
  if (z < 2)
    return ((a * z - 5 * a) * z + 8 * a) * z - 4 * a;
  return 0;
}

} // namespace

TEST(TDLResizeInterp, LinearValues) {
  // half_pixel, 4 -> 8: x = (y + 0.5) / 2 - 0.5 = (2y - 1) / 4.
  std::vector<double> x = {1, 2, 4, 8};
  auto y = run1d(attrs1d("linear", 8, 2, -1, 4), x);
  ASSERT_EQ(y.size(), 8u);
  for (int o = 0; o < 8; ++o) {
    double src = (o - 0.5) / 2, i0 = std::floor(src), f = src - i0;
    auto at = [&](double i) { return x[size_t(std::clamp(i, 0.0, 3.0))]; };
    EXPECT_DOUBLE_EQ(y[o], (1 - f) * at(i0) + f * at(i0 + 1)) << o;
  }
  // align_corners 4 -> 3: x = y * 3 / 2.
  EXPECT_EQ(run1d(attrs1d("linear", 3, 3, 0, 2), x),
            (std::vector<double>{1, 3, 8}));
}

TEST(TDLResizeInterp, CubicValues) {
  std::vector<double> x = {1, -2, 4, 3, 0.5};
  for (double a : {-0.75, -0.5}) {
    // asymmetric 5 -> 7: x = 5y / 7.
    AttrMap at = attrs1d("cubic", 7, 5, 0, 7);
    at["cubic_coeff_a"] = F(a);
    auto y = run1d(at, x);
    ASSERT_EQ(y.size(), 7u);
    for (int o = 0; o < 7; ++o) {
      double src = 5.0 * o / 7, i0 = std::floor(src), f = src - i0, want = 0;
      for (int u = -1; u <= 2; ++u)
        want += keys(u - f, a) * x[size_t(std::clamp(i0 + u, 0.0, 4.0))];
      EXPECT_NEAR(y[o], want, 1e-12) << "a=" << a << " y=" << o;
    }
  }
}

TEST(TDLResizeInterp, NearestValues) {
  // round_prefer_floor of x = (4y - 1) / 6 (half_pixel, 2 -> 3), folded
  // into floor((8y + 3) / 12): y = 0, 1, 2 read 0, 0 (x = 0.5 rounds down),
  // 1.
  EXPECT_EQ(run1d(attrs1d("nearest", 3, 8, 3, 12), {5, 7}),
            (std::vector<double>{5, 5, 7}));
}

TEST(TDLResizeInterp, Gradient) {
  for (const char *mode : {"linear", "cubic", "nearest"}) {
    SCOPED_TRACE(mode);
    // Upsampling 3x4 -> 5x7 (half_pixel), N and C left alone.
    checkGradientFD({"ResizeInterp",
                     {f32({1, 2, 3, 4})},
                     {{"mode", S(mode)},
                      {"sizes", ints({1, 2, 5, 7})},
                      {"coord_num", ints({1, 1, 6, 8})},
                      {"coord_off", ints({0, 0, -2, -3})},
                      {"coord_den", ints({1, 1, 10, 14})}}});
    // Downsampling 6 -> 4 along the last dim (asymmetric: x = 3y / 2).
    checkGradientFD({"ResizeInterp", {f32({2, 6})},
                     {{"mode", S(mode)},
                      {"sizes", ints({2, 4})},
                      {"coord_num", ints({1, 3})},
                      {"coord_off", ints({0, 0})},
                      {"coord_den", ints({1, 2})}}});
    // align_corners 3 -> 5: x = y / 2.
    checkGradientFD({"ResizeInterp", {f32({1, 1, 3})},
                     {{"mode", S(mode)},
                      {"sizes", ints({1, 1, 5})},
                      {"coord_num", ints({1, 1, 1})},
                      {"coord_off", ints({0, 0, 0})},
                      {"coord_den", ints({1, 1, 2})},
                      {"cubic_coeff_a", F(-0.5)}}});
  }
}
