//===- VariadicTest.cpp - variadic inputs / outputs: Concat, Split --------===//
//
// Instantiation with any number of operands, the regions a worker needs,
// gradients by central finite differences, and Dropout.
//
//===----------------------------------------------------------------------===//
#include "GradientCheck.h"

#include "tofu/runtime/CounterRng.h"

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
  // Inference mode with a ratio: identity.
  OpInstance inf = mustInstantiate(lib, "Dropout", {f32({3}), f32({}), b}, {},
                                   {{1, {0.5}}, {2, {0}}});
  r = evaluate(inf, {&x, &ratio, &mode});
  ASSERT_TRUE(bool(r));
  EXPECT_EQ((*r)[0].data, x.data);
  // A ratio outside [0, 1) is an instantiation error.
  EXPECT_NE(instantiateError(lib, "Dropout", {f32({3}), f32({}), b}, {},
                             {{1, {1.0}}, {2, {1}}})
                .find("ratio must be in [0, 1)"),
            std::string::npos);
}

/// uniform(seed, n) is value n + 1 of SplitMix64 started at mix(seed); seed
/// 0 has mix(0) = 0, so it is SplitMix64's published stream from state 0.
TEST(TDLVariadic, UniformIsSplitMix64) {
  const uint64_t stream0[] = {0xE220A8397B1DCDAFull, 0x6E789E6AA1B965F4ull,
                              0x06C45D188009454Full};
  for (int n = 0; n < 3; ++n)
    EXPECT_EQ(tofu::rng::counterUniform(0, n),
              static_cast<double>(stream0[n] >> 11) * 0x1.0p-53)
        << n;
  // Through a spec: the evaluator computes the builtin.
  const char *src = "op U(X: [N]) attrs(seed: int = 0) -> Y: [N] "
                    "{ Y[i] = uniform(seed, i) + X[i] * 0 }";
  SpecLibrary lib;
  ASSERT_EQ(errorText(lib.addSource("u.tdl", src)), "");
  OpInstance u = mustInstantiate(lib, "U", {f32({3})}, {{"seed", I(0)}});
  DenseTensor x = tensor(f32({3}), {1, 2, 3});
  auto r = evaluate(u, {&x});
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  for (int n = 0; n < 3; ++n)
    EXPECT_EQ((*r)[0].data[n], static_cast<double>(stream0[n] >> 11) * 0x1.0p-53);
  EXPECT_EQ(parseError("op U(X: [N]) -> Y: [N] { Y[i] = uniform(i) }"),
            "test.tdl:1:33: error: wrong number of arguments to 'uniform': "
            "expected 2, found 1");
}

/// Training mode: element e of a [4, 50] tensor is kept when
/// uniform(seed, e) >= ratio and scaled by 1 / (1 - ratio); about 30% are
/// dropped; another seed gives another mask.
TEST(TDLVariadic, DropoutTrainingMask) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  TensorType b{{}, ElemType::Bool};
  auto run = [&](int64_t seed) {
    OpInstance d =
        mustInstantiate(lib, "Dropout", {f32({4, 50}), f32({}), b},
                        {{"seed", I(seed)}}, {{1, {0.3}}, {2, {1}}});
    DenseTensor x = tensor(f32({4, 50}), std::vector<double>(200, 2.0));
    DenseTensor ratio = tensor(f32({}), {0.3}), mode = tensor(b, {1});
    auto r = evaluate(d, {&x, &ratio, &mode});
    EXPECT_TRUE(bool(r));
    return std::move(*r);
  };
  std::vector<DenseTensor> a = run(7), again = run(7), other = run(8);
  EXPECT_EQ(a[1].data, again[1].data);
  EXPECT_NE(a[1].data, other[1].data);
  int dropped = 0;
  for (int e = 0; e < 200; ++e) {
    bool keep = tofu::rng::counterUniform(7, e) >= 0.3;
    EXPECT_EQ(a[1].data[e], keep ? 1 : 0) << e;
    EXPECT_DOUBLE_EQ(a[0].data[e], keep ? 2.0 / 0.7 : 0.0) << e;
    dropped += !keep;
  }
  EXPECT_GT(dropped, 35);
  EXPECT_LT(dropped, 85);
  // Without training_mode the default ratio 0.5 is not used: identity.
  OpInstance plain = mustInstantiate(lib, "Dropout", {f32({4, 50})});
  EXPECT_TRUE(bool(evaluate(plain, {&a[0]})));
}

TEST(TDLVariadic, DropoutGradients) {
  TensorType b{{}, ElemType::Bool};
  // dX = dY * mask / (1 - ratio) with the mask the forward drew.
  GradProblem p{"Dropout", {f32({3, 5}), f32({}), b}, {{"seed", I(3)}}};
  p.constValues = {{1, {0.4}}, {2, {1}}};
  p.ignoredOutputs = {1};
  GradExpansion g = checkGradientFD(p);
  ASSERT_FALSE(g.calls.empty());
  EXPECT_EQ(g.calls.back().op, "DropoutGrad");
  checkGradientFD({"DropoutGrad", {f32({2, 7})},
                   {{"seed", I(5)}, {"ratio", AttrValue::ofFloat(0.25)}}});
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
