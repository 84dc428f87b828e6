//===- GradientReduceTest.cpp - Softmax / reductions vs finite differences ===//
//
// Every gradient rule of tdl-specs/reduce.tdl checked by central differences
// in float64 (GradientCheck.h), with the attributes the rules branch on.
//
//===----------------------------------------------------------------------===//
#include "GradientCheck.h"

using namespace tofu::tdl;
using namespace tofu::tdl::test;

namespace {
AttrValue I(int64_t v) { return AttrValue::ofInt(v); }
} // namespace

TEST(TDLGradientReduce, Softmax) {
  checkGradientFD({"Softmax", {f32({2, 3, 4})}});
  checkGradientFD({"Softmax", {f32({2, 3, 4})}, {{"axis", I(1)}}});
  checkGradientFD({"Softmax", {f32({3, 2})}, {{"axis", I(0)}}});
  checkGradientFD({"Softmax", {f32({5})}});
}

TEST(TDLGradientReduce, LogSoftmax) {
  checkGradientFD({"LogSoftmax", {f32({2, 3, 4})}});
  checkGradientFD({"LogSoftmax", {f32({2, 3, 4})}, {{"axis", I(-3)}}});
  checkGradientFD({"LogSoftmax", {f32({4, 3})}, {{"axis", I(0)}}});
}

TEST(TDLGradientReduce, ReduceSum) {
  // Opset 13: axes is a const input (absent or empty: every dim).
  GradProblem p{"ReduceSum", {f32({2, 3, 4}), i64({1})}};
  p.constValues = {{1, {1}}};
  checkGradientFD(p);
  p.types = {f32({2, 3, 4}), i64({2})};
  p.attrs = {{"keepdims", I(0)}};
  p.constValues = {{1, {0, -1}}};
  checkGradientFD(p);
  checkGradientFD({"ReduceSum", {f32({2, 3}), std::nullopt}});
  checkGradientFD(
      {"ReduceSum", {f32({2, 3}), std::nullopt}, {{"keepdims", I(0)}}});
  p.types = {f32({2, 3}), i64({0})};
  p.attrs = {{"noop_with_empty_axes", I(1)}};
  p.constValues = {{1, {}}};
  checkGradientFD(p);
}

TEST(TDLGradientReduce, ReduceMean) {
  const char *op = "ReduceMean";
  checkGradientFD({op, {f32({2, 3, 4})}, {{"axes", ints({1})}}});
  checkGradientFD(
      {op, {f32({2, 3, 4})}, {{"axes", ints({0, -1})}, {"keepdims", I(0)}}});
  checkGradientFD({op, {f32({2, 3})}});                       // all dims
  checkGradientFD({op, {f32({2, 3})}, {{"keepdims", I(0)}}}); // scalar
  checkGradientFD({op, {f32({2, 3})}, {{"noop_with_empty_axes", I(1)}}});
}

TEST(TDLGradientReduce, ReduceMax) {
  // Random values: no ties, and the FD step stays far from a change of the
  // argmax.
  checkGradientFD({"ReduceMax", {f32({2, 3, 4})}, {{"axes", ints({1})}}});
  checkGradientFD({"ReduceMax", {f32({2, 3, 4})},
                   {{"axes", ints({-1, 0})}, {"keepdims", I(0)}}});
  checkGradientFD({"ReduceMax", {f32({3, 2})}, {{"keepdims", I(0)}}});
}

TEST(TDLGradientReduce, ShapesAndErrors) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  auto shapeOf = [&](const char *op, std::vector<int64_t> in, AttrMap a) {
    return mustInstantiate(lib, op, {f32(in)}, a).outputTypes()[0].dims;
  };
  using V = std::vector<int64_t>;
  EXPECT_EQ(mustInstantiate(lib, "ReduceSum", {f32({2, 3, 4}), i64({1})}, {},
                            {{1, {1}}})
                .outputTypes()[0]
                .dims,
            (V{2, 1, 4}));
  EXPECT_EQ(shapeOf("ReduceMean", {2, 3, 4},
                    {{"axes", ints({-1, 0})}, {"keepdims", I(0)}}),
            (V{3}));
  EXPECT_EQ(shapeOf("ReduceMax", {2, 3}, {{"keepdims", I(0)}}), (V{}));
  EXPECT_EQ(shapeOf("ReduceMean", {2, 3}, {{"noop_with_empty_axes", I(1)}}),
            (V{2, 3}));
  EXPECT_NE(instantiateError(lib, "ReduceSum", {f32({2, 3}), i64({1})}, {},
                             {{1, {2}}})
                .find("axes out of range"),
            std::string::npos);
  EXPECT_NE(instantiateError(lib, "ReduceMax", {f32({2, 3})},
                             {{"axes", ints({-3})}})
                .find("axes out of range"),
            std::string::npos);
  EXPECT_NE(instantiateError(lib, "Softmax", {f32({2, 3})}, {{"axis", I(2)}})
                .find("axis out of range"),
            std::string::npos);
}

TEST(TDLGradientReduce, SoftmaxEvaluatesStably) {
  // Large inputs: the row max keeps exp finite.
  OpInstance inst = mustInstantiate(SpecLibrary::builtin(), "Softmax",
                                    {f32({1, 3})});
  DenseTensor x{f32({1, 3}), {1000, 1001, 1002}};
  auto out = evaluate(inst, {&x});
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  double e0 = std::exp(-2.0), e1 = std::exp(-1.0);
  EXPECT_NEAR((*out)[0].data[0], e0 / (e0 + e1 + 1), 1e-12);
  EXPECT_NEAR((*out)[0].data[2], 1 / (e0 + e1 + 1), 1e-12);
}

TEST(TDLGradientReduce, SoftmaxSplitsOnEveryDimButTheAxis) {
  OpInstance inst = mustInstantiate(SpecLibrary::builtin(), "Softmax",
                                    {f32({4, 6, 8})}, {{"axis", I(1)}});
  // Half of dim 0 / dim 2 needs exactly that half of the input; half of the
  // axis needs the whole axis.
  auto r0 = inst.requiredRegions(0, {{0, 2}, {0, 6}, {0, 8}});
  EXPECT_EQ(r0[0]->at(0).lo, 0);
  EXPECT_EQ(r0[0]->at(0).hi, 2);
  auto r2 = inst.requiredRegions(0, {{0, 4}, {0, 6}, {4, 8}});
  EXPECT_EQ(r2[0]->at(2).lo, 4);
  EXPECT_EQ(r2[0]->at(2).hi, 8);
  auto r1 = inst.requiredRegions(0, {{0, 4}, {0, 3}, {0, 8}});
  EXPECT_EQ(r1[0]->at(1).lo, 0);
  EXPECT_EQ(r1[0]->at(1).hi, 6);
  auto s = analyzeStrategies(inst);
  ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
  EXPECT_EQ(s->size(), 3u); // one per output dim; the axis is not a sum
}
