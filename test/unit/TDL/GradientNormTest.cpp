//===- GradientNormTest.cpp - normalizations vs finite differences --------===//
//
// The gradient rules of tdl-specs/norm.tdl checked by central differences in
// float64 (GradientCheck.h). LayerNormalization's Mean / InvStdDev and
// BatchNormalization's running statistics get no incoming gradient (weight
// 0); BatchNormalization's input_mean / input_var have no gradient.
//
//===----------------------------------------------------------------------===//
#include "GradientCheck.h"

using namespace tofu::tdl;
using namespace tofu::tdl::test;

namespace {
AttrValue I(int64_t v) { return AttrValue::ofInt(v); }
AttrValue F(double v) { return AttrValue::ofFloat(v); }
} // namespace

TEST(TDLGradientNorm, LayerNormalization) {
  GradProblem p{"LayerNormalization", {f32({2, 3, 4}), f32({4}), f32({4})}};
  p.ignoredOutputs = {1, 2};
  checkGradientFD(p);
  p.attrs = {{"axis", I(1)}, {"epsilon", F(0.1)}};
  p.types = {f32({2, 3, 4}), f32({3, 4}), f32({4})}; // B broadcast over dim 1
  checkGradientFD(p);
  p.attrs = {{"axis", I(0)}};
  p.types = {f32({3, 2}), f32({3, 2}), std::nullopt};
  checkGradientFD(p);
}

TEST(TDLGradientNorm, LayerNormalizationOutputs) {
  OpInstance inst = mustInstantiate(SpecLibrary::builtin(), "LayerNormalization",
                                    {f32({2, 3}), f32({3}), f32({3})});
  EXPECT_EQ(inst.outputTypes()[1].dims, (std::vector<int64_t>{2, 1}));
  DenseTensor x{f32({2, 3}), {1, 2, 3, 0, 0, 6}};
  DenseTensor s{f32({3}), {1, 1, 2}};
  DenseTensor b{f32({3}), {0, 1, 0}};
  auto out = evaluate(inst, {&x, &s, &b});
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  double r0 = 1 / std::sqrt(2.0 / 3 + 1e-5);
  EXPECT_NEAR((*out)[0].data[0], -r0, 1e-12);
  EXPECT_NEAR((*out)[0].data[1], 1, 1e-12);
  EXPECT_NEAR((*out)[0].data[2], 2 * r0, 1e-12);
  EXPECT_NEAR((*out)[1].data[1], 2, 1e-12);
  EXPECT_NEAR((*out)[2].data[1], 1 / std::sqrt(8 + 1e-5), 1e-12);
}

TEST(TDLGradientNorm, BatchNormalizationInference) {
  GradProblem p{"BatchNormalization",
                {f32({2, 3, 4}), f32({3}), f32({3}), f32({3}), f32({3})}};
  p.noGrad = {3, 4};
  p.ignoredOutputs = {1, 2};
  p.lo = 0.2; // input_var > 0
  checkGradientFD(p);
  p.types = {f32({2, 2, 2, 3}), f32({2}), f32({2}), f32({2}), f32({2})};
  p.attrs = {{"epsilon", F(0.01)}};
  checkGradientFD(p);
}

TEST(TDLGradientNorm, BatchNormalizationTraining) {
  GradProblem p{"BatchNormalization",
                {f32({2, 3, 4}), f32({3}), f32({3}), f32({3}), f32({3})},
                {{"training_mode", I(1)}}};
  p.noGrad = {3, 4};
  p.ignoredOutputs = {1, 2};
  p.tol = 1e-5;
  checkGradientFD(p);
  p.types = {f32({3, 2, 2, 2}), f32({2}), f32({2}), f32({2}), f32({2})};
  p.attrs = {{"training_mode", I(1)}, {"epsilon", F(0.01)}};
  checkGradientFD(p);
  p.types = {f32({4, 3}), f32({3}), f32({3}), f32({3}), f32({3})}; // [N, C]
  checkGradientFD(p);
}

TEST(TDLGradientNorm, BatchNormalizationRunningStatistics) {
  OpInstance inst = mustInstantiate(
      SpecLibrary::builtin(), "BatchNormalization",
      {f32({2, 1, 2}), f32({1}), f32({1}), f32({1}), f32({1})},
      {{"training_mode", I(1)}, {"momentum", F(0.75)}});
  DenseTensor x{f32({2, 1, 2}), {1, 2, 3, 6}};
  DenseTensor s{f32({1}), {2}}, b{f32({1}), {1}};
  DenseTensor m{f32({1}), {4}}, v{f32({1}), {8}};
  auto out = evaluate(inst, {&x, &s, &b, &m, &v});
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  // Batch mean 3, biased var (4 + 1 + 0 + 9) / 4 = 3.5.
  EXPECT_NEAR((*out)[0].data[3], 2 * 3 / std::sqrt(3.5 + 1e-5) + 1, 1e-12);
  EXPECT_NEAR((*out)[1].data[0], 4 * 0.75 + 3 * 0.25, 1e-12);
  EXPECT_NEAR((*out)[2].data[0], 8 * 0.75 + 3.5 * 0.25, 1e-12);
}

TEST(TDLGradientNorm, Partitioning) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  // LayerNormalization over the last dim: a half of the rows needs only
  // those rows of X.
  OpInstance ln = mustInstantiate(lib, "LayerNormalization",
                                  {f32({4, 6}), f32({6}), f32({6})});
  auto r = ln.requiredRegions(0, {{2, 4}, {0, 6}});
  EXPECT_EQ(r[0]->at(0).lo, 2);
  EXPECT_EQ(r[0]->at(0).hi, 4);
  // Inference BatchNormalization is element-wise per channel: a spatial
  // half needs that half of X and nothing else.
  OpInstance bn = mustInstantiate(
      lib, "BatchNormalization",
      {f32({2, 3, 8}), f32({3}), f32({3}), f32({3}), f32({3})});
  auto rb = bn.requiredRegions(0, {{0, 2}, {0, 3}, {4, 8}});
  EXPECT_EQ(rb[0]->at(2).lo, 4);
  EXPECT_EQ(rb[0]->at(2).hi, 8);
  // Training mode: a channel half needs only those channels, but a spatial
  // half needs the channel's whole batch.
  OpInstance bt = mustInstantiate(
      lib, "BatchNormalization",
      {f32({2, 4, 8}), f32({4}), f32({4}), f32({4}), f32({4})},
      {{"training_mode", I(1)}});
  auto rc = bt.requiredRegions(0, {{0, 2}, {2, 4}, {0, 8}});
  EXPECT_EQ(rc[0]->at(1).lo, 2);
  EXPECT_EQ(rc[0]->at(1).hi, 4);
  auto rs = bt.requiredRegions(0, {{0, 2}, {0, 4}, {0, 4}});
  EXPECT_EQ(rs[0]->at(2).hi, 8);
}
