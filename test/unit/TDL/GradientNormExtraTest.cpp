//===- GradientNormExtraTest.cpp - tdl-specs/norm-extra.tdl, pool-lp.tdl --===//
//
// The gradient rules of InstanceNormalization, GroupNormalization (the
// per-channel opset-21 and per-group opset-18 parameters), LpNormalization,
// LpPool and GlobalLpPool checked by central differences in float64
// (GradientCheck.h), plus values the forms must agree on.
//
//===----------------------------------------------------------------------===//
#include "GradientCheck.h"

#include <cmath>

using namespace tofu::tdl;
using namespace tofu::tdl::test;

namespace {

AttrValue I(int64_t v) { return AttrValue::ofInt(v); }
AttrValue F(double v) { return AttrValue::ofFloat(v); }
AttrValue S(std::string v) { return AttrValue::ofString(std::move(v)); }

std::vector<double> run(llvm::StringRef op, const std::vector<DenseTensor> &in,
                        const AttrMap &attrs = {}) {
  return evaluateFirstOutput(op, in, attrs);
}

} // namespace

TEST(TDLGradientNormExtra, InstanceNormalization) {
  checkGradientFD(
      {"InstanceNormalization", {f32({2, 3, 4}), f32({3}), f32({3})}});
  checkGradientFD({"InstanceNormalization",
                   {f32({1, 2, 3, 2}), f32({2}), f32({2})},
                   {{"epsilon", F(0.01)}}});
}

TEST(TDLGradientNormExtra, GroupNormalization) {
  // Opset 21: scale and bias per channel; opset 18: per group.
  checkGradientFD({"GroupNormalization",
                   {f32({2, 6, 3}), f32({6}), f32({6})},
                   {{"num_groups", I(2)}}});
  checkGradientFD({"GroupNormalization",
                   {f32({2, 6, 2, 2}), f32({3}), f32({3})},
                   {{"num_groups", I(3)}, {"epsilon", F(0.1)}}});
  checkGradientFD({"GroupNormalization",
                   {f32({1, 4, 3}), f32({1}), f32({1})},
                   {{"num_groups", I(1)}}});
}

TEST(TDLGradientNormExtra, GroupNormalizationForms) {
  // Per-group parameters equal per-channel ones repeated over the group;
  // one channel per group is InstanceNormalization.
  std::vector<double> xs;
  for (int k = 0; k < 2 * 4 * 3; ++k)
    xs.push_back(std::sin(0.7 * k) + 0.1 * k);
  DenseTensor x = tensor(f32({2, 4, 3}), xs);
  DenseTensor sg = tensor(f32({2}), {1.5, -0.5}), bg = tensor(f32({2}), {0.25, 2});
  DenseTensor sc = tensor(f32({4}), {1.5, 1.5, -0.5, -0.5});
  DenseTensor bc = tensor(f32({4}), {0.25, 0.25, 2, 2});
  auto a = run("GroupNormalization", {x, sg, bg}, {{"num_groups", I(2)}});
  auto b = run("GroupNormalization", {x, sc, bc}, {{"num_groups", I(2)}});
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], 1e-12);
  auto in = run("InstanceNormalization", {x, sc, bc});
  auto g4 = run("GroupNormalization", {x, sc, bc}, {{"num_groups", I(4)}});
  ASSERT_EQ(in.size(), g4.size());
  for (size_t i = 0; i < in.size(); ++i)
    EXPECT_NEAR(in[i], g4[i], 1e-12);
  EXPECT_NE(instantiateError(SpecLibrary::builtin(), "GroupNormalization",
                             {f32({1, 6, 2}), f32({4}), f32({4})},
                             {{"num_groups", I(2)}})
                .find("num_groups"),
            std::string::npos);
}

TEST(TDLGradientNormExtra, LpNormalization) {
  for (int p : {1, 2}) {
    SCOPED_TRACE("p=" + std::to_string(p));
    GradProblem g{"LpNormalization", {f32({2, 3, 4})}, {{"p", I(p)}}};
    g.awayFromZero = 0.05; // p = 1: |x| has a kink at 0
    checkGradientFD(g);
    g.attrs = {{"p", I(p)}, {"axis", I(1)}};
    checkGradientFD(g);
    g.types = {f32({5})};
    g.attrs = {{"p", I(p)}, {"axis", I(0)}};
    checkGradientFD(g);
  }
  auto y = run("LpNormalization", {tensor(f32({2, 2}), {3, -4, 1, 1})},
               {{"p", I(1)}});
  EXPECT_EQ(y, (std::vector<double>{3.0 / 7, -4.0 / 7, 0.5, 0.5}));
}

TEST(TDLGradientNormExtra, LpPool) {
  for (int p : {1, 2, 3}) {
    SCOPED_TRACE("p=" + std::to_string(p));
    GradProblem g{"LpPool", {f32({2, 2, 6})},
                  {{"kernel_shape", ints({3})}, {"p", I(p)}}};
    g.awayFromZero = 0.05;
    checkGradientFD(g);
    g.types = {f32({1, 2, 5, 5})};
    g.attrs = {{"kernel_shape", ints({3, 2})}, {"strides", ints({2, 1})},
               {"pads", ints({1, 0, 1, 1})}, {"p", I(p)}};
    checkGradientFD(g);
    g.types = {f32({1, 1, 6, 5})};
    g.attrs = {{"kernel_shape", ints({2, 2})}, {"strides", ints({2, 2})},
               {"dilations", ints({2, 1})}, {"ceil_mode", I(1)}, {"p", I(p)}};
    checkGradientFD(g);
    g.types = {f32({1, 2, 5, 4})};
    g.attrs = {{"kernel_shape", ints({2, 3})}, {"strides", ints({2, 2})},
               {"auto_pad", S("SAME_UPPER")}, {"p", I(p)}};
    checkGradientFD(g);
    g.op = "GlobalLpPool";
    g.types = {f32({2, 3, 2, 2})};
    g.attrs = {{"p", I(p)}};
    checkGradientFD(g);
  }
  // sqrt(3^2 + 4^2) = 5; a window of zeros has no derivative: 0.
  EXPECT_EQ(run("LpPool", {tensor(f32({1, 1, 4}), {3, 4, 0, 0})},
                {{"kernel_shape", ints({2})}, {"strides", ints({2})}}),
            (std::vector<double>{5, 0}));
  EXPECT_EQ(run("LpPoolGrad",
                {tensor(f32({1, 1, 2}), {10, 7}),
                 tensor(f32({1, 1, 4}), {3, 4, 0, 0}),
                 tensor(f32({1, 1, 2}), {5, 0})},
                {{"kernel_shape", ints({2})}, {"strides", ints({2})}}),
            (std::vector<double>{6, 8, 0, 0}));
}
