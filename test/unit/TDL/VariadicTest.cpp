//===- VariadicTest.cpp - variadic inputs / outputs: Concat, Split --------===//
//
// Instantiation with any number of operands, the regions a worker needs,
// gradients by central finite differences, and Dropout.
//
//===----------------------------------------------------------------------===//
#include "GradientCheck.h"

using namespace tofu::tdl;
using namespace tofu::tdl::test;

namespace {
AttrValue I(int64_t v) { return AttrValue::ofInt(v); }
using V = std::vector<int64_t>;
} // namespace

TEST(TDLVariadic, ConcatShapesAndValues) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  OpInstance c = mustInstantiate(
      lib, "Concat", {f32({2, 1}), f32({2, 2}), f32({2, 1})}, {{"axis", I(1)}});
  EXPECT_EQ(c.inputTypes().size(), 3u);
  EXPECT_EQ(c.inputNames()[2], "inputs[2]");
  EXPECT_EQ(c.outputTypes()[0].dims, (V{2, 4}));
  DenseTensor a = tensor(f32({2, 1}), {1, 2}), b = tensor(f32({2, 2}), {3, 4, 5, 6}),
              d = tensor(f32({2, 1}), {7, 8});
  auto r = evaluate(c, {&a, &b, &d});
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_EQ((*r)[0].data, (std::vector<double>{1, 3, 4, 7, 2, 5, 6, 8}));
  EXPECT_NE(instantiateError(lib, "Concat", {f32({2, 1}), f32({3, 2})},
                             {{"axis", I(1)}})
                .find("differ in a dim other than the axis"),
            std::string::npos);
  EXPECT_NE(instantiateError(lib, "Concat", {f32({2, 1}), f32({2})},
                             {{"axis", I(0)}})
                .find("different ranks"),
            std::string::npos);
  EXPECT_NE(instantiateError(lib, "Concat", {}, {{"axis", I(0)}})
                .find("inputs[0] is required"),
            std::string::npos);
}

TEST(TDLVariadic, ConcatRegionsFollowTheOffsets) {
  OpInstance c = mustInstantiate(SpecLibrary::builtin(), "Concat",
                                 {f32({2, 3}), f32({2, 4})}, {{"axis", I(1)}});
  // Columns [2, 5) of the result: column 2 of input 0, columns 0-1 of input 1.
  auto r = c.requiredRegions(0, {{0, 2}, {2, 5}});
  EXPECT_EQ((*r[0])[1].lo, 2);
  EXPECT_EQ((*r[0])[1].hi, 3);
  EXPECT_EQ((*r[1])[1].lo, 0);
  EXPECT_EQ((*r[1])[1].hi, 2);
  // Columns [3, 7): input 1 only.
  r = c.requiredRegions(0, {{0, 2}, {3, 7}});
  EXPECT_EQ((*r[0])[1].hi - (*r[0])[1].lo, 0);
  EXPECT_EQ((*r[1])[1].hi, 4);
  auto s = analyzeStrategies(c);
  ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
  ASSERT_EQ(s->size(), 2u); // both dims, no reduction
  // Same ranks, other extents: a separate analysis (offsets come from shapes).
  OpInstance c2 = mustInstantiate(SpecLibrary::builtin(), "Concat",
                                  {f32({2, 5}), f32({2, 4})}, {{"axis", I(1)}});
  auto s2 = analyzeStrategies(c2);
  ASSERT_TRUE(bool(s2));
  const auto &w1 = *(*s2)[1].regions[1][1];
  EXPECT_EQ(evaluateInterval(w1[1], (*s2)[1].symbolValues).lo, 4 - 5);
}

TEST(TDLVariadic, SplitShapes) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  OpInstance s = mustInstantiate(lib, "Split", {f32({2, 7}), std::nullopt},
                                 {{"axis", I(-1)}, {"num_outputs", I(3)}});
  ASSERT_EQ(s.outputTypes().size(), 3u);
  EXPECT_EQ(s.outputNames()[1], "outputs[1]");
  EXPECT_EQ(s.outputTypes()[0].dims, (V{2, 3}));
  EXPECT_EQ(s.outputTypes()[2].dims, (V{2, 1}));
  OpInstance t = mustInstantiate(lib, "Split", {f32({6, 2}), i64({2})}, {},
                                 {{1, {4, 2}}});
  ASSERT_EQ(t.outputTypes().size(), 2u);
  EXPECT_EQ(t.outputTypes()[0].dims, (V{4, 2}));
  DenseTensor x = tensor(f32({6, 2}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  DenseTensor split = tensor(i64({2}), {4, 2});
  auto r = evaluate(t, {&x, &split});
  ASSERT_TRUE(bool(r));
  EXPECT_EQ((*r)[1].data, (std::vector<double>{8, 9, 10, 11}));
  EXPECT_NE(instantiateError(lib, "Split", {f32({6, 2}), i64({2})}, {},
                             {{1, {4, 1}}})
                .find("do not add up"),
            std::string::npos);
  EXPECT_NE(instantiateError(lib, "Split", {f32({6, 2})})
                .find("give split or num_outputs"),
            std::string::npos);
}

TEST(TDLVariadic, Gradients) {
  checkGradientFD({"Concat", {f32({2, 3}), f32({2, 1}), f32({2, 2})},
                   {{"axis", I(1)}}});
  checkGradientFD({"Concat", {f32({1, 3}), f32({2, 3})}, {{"axis", I(0)}}});
  GradProblem g{"ConcatGrad", {f32({2, 5}), f32({2, 2})},
                {{"axis", I(-1)}, {"offset", I(3)}}};
  g.noGrad = {1}; // X's values are not read
  checkGradientFD(g);
  checkGradientFD({"Split", {f32({2, 7}), std::nullopt},
                   {{"axis", I(1)}, {"num_outputs", I(3)}}});
  GradProblem p{"Split", {f32({5, 2}), i64({3})}};
  p.constValues = {{1, {1, 3, 1}}};
  checkGradientFD(p);
  checkGradientFD({"Dropout", {f32({2, 3})}});
}

TEST(TDLVariadic, Dropout) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  TensorType b{{}, ElemType::Bool};
  // Training mode with ratio 0: identity.
  OpInstance d = mustInstantiate(lib, "Dropout", {f32({3}), f32({}), b}, {},
                                 {{1, {0.0}}, {2, {1}}});
  DenseTensor x = tensor(f32({3}), {1, -2, 3}), ratio = tensor(f32({}), {0}),
              mode = tensor(b, {1});
  auto r = evaluate(d, {&x, &ratio, &mode});
  ASSERT_TRUE(bool(r));
  EXPECT_EQ((*r)[0].data, x.data);
  EXPECT_EQ((*r)[1].data, (std::vector<double>{1, 1, 1}));
  EXPECT_EQ((*r)[1].type.elem, ElemType::Bool);
  // Training mode with a random mask: not supported.
  std::string err = instantiateError(lib, "Dropout", {f32({3}), f32({}), b},
                                     {}, {{1, {0.5}}, {2, {1}}});
  EXPECT_NE(err.find("not supported"), std::string::npos) << err;
  err = instantiateError(lib, "Dropout", {f32({3}), std::nullopt, b}, {},
                         {{2, {1}}});
  EXPECT_NE(err.find("not supported"), std::string::npos) << err;
  // Inference mode with a ratio: identity.
  mustInstantiate(lib, "Dropout", {f32({3}), f32({}), b}, {},
                  {{1, {0.5}}, {2, {0}}});
}

TEST(TDLVariadic, Diagnostics) {
  EXPECT_EQ(parseError("op F(A: [*]..., B: [*]) -> Y: [1] { Y[i] = 0 }"),
            "test.tdl:1:6: error: only the last input may be variadic");
  EXPECT_EQ(parseError("op F(A: [*]...) -> Y: [1] { Y[i] = A[i] }"),
            "test.tdl:1:36: error: variadic input 'A' needs an element: "
            "A[k][indices]");
  EXPECT_EQ(parseError("op F(A: [N]) -> Y: [N] { Y[i] = A[0][i] }"),
            "test.tdl:1:33: error: 'A' is not variadic");
  EXPECT_EQ(parseError("op F(A: [N]) -> Y[k: 2]: [N] { Y = A[0] }"),
            "test.tdl:1:34: error: expected '[' and an element variable (a "
            "variadic output is defined as Out[k][indices]), found '='");
}
