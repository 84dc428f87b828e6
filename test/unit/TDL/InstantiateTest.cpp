//===- InstantiateTest.cpp - TDL shape inference --------------------------===//
#include "TDLTestSupport.h"

using namespace tofu::tdl;
using namespace tofu::tdl::test;

static const SpecLibrary &lib() { return SpecLibrary::builtin(); }

TEST(TDLInstantiate, MatMul) {
  OpInstance i = mustInstantiate(lib(), "MatMul", {f32({3, 4}), f32({4, 5})});
  ASSERT_EQ(i.outputTypes().size(), 1u);
  EXPECT_EQ(i.outputTypes()[0].dims, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(i.outputNames()[0], "Y");
  EXPECT_EQ(i.inputNames(), (std::vector<std::string>{"A", "B"}));
  EXPECT_FALSE(i.isElementwise());
  auto rv = i.reductionVars();
  ASSERT_EQ(rv.size(), 1u);
  EXPECT_EQ(rv[0].name, "k");
  EXPECT_EQ(rv[0].extent, 4);
  EXPECT_TRUE(rv[0].splittable);
}

TEST(TDLInstantiate, MatMulMismatch) {
  EXPECT_EQ(instantiateError(lib(), "MatMul", {f32({3, 4}), f32({5, 6})}),
            "op MatMul: inner dimensions of A and B differ: constraint "
            "`dim(A, -1) == dim(B, rank(B) == 1 ? 0 : -2)` does not hold "
            "(A: [3, 4], B: [5, 6])");
  // Batch dims broadcast; 3 and 2 do not.
  EXPECT_EQ(instantiateError(lib(), "MatMul",
                             {f32({3, 2, 4}), f32({2, 4, 6})}),
            "tdl-specs/nn.tdl:44:13: error: shapes [3] and [2] are not "
            "broadcastable");
  EXPECT_EQ(instantiateError(lib(), "MatMul", {f32({3, 4, 1}), f32({2, 6})})
                .substr(0, 40),
            "op MatMul: inner dimensions of A and B d");
  EXPECT_EQ(instantiateError(lib(), "MatMul", {f32({3, 4})}),
            "op MatMul: input B is required");
}

TEST(TDLInstantiate, GemmTransCases) {
  struct Case {
    int ta, tb;
    std::vector<int64_t> a, b, y;
  } cases[] = {{0, 0, {3, 4}, {4, 5}, {3, 5}},
               {1, 0, {4, 3}, {4, 5}, {3, 5}},
               {0, 1, {3, 4}, {5, 4}, {3, 5}},
               {1, 1, {4, 3}, {5, 4}, {3, 5}}};
  for (auto &c : cases) {
    AttrMap attrs{{"transA", AttrValue::ofInt(c.ta)},
                  {"transB", AttrValue::ofInt(c.tb)}};
    OpInstance i =
        mustInstantiate(lib(), "Gemm", {f32(c.a), f32(c.b)}, attrs);
    EXPECT_EQ(i.outputTypes()[0].dims, c.y) << c.ta << c.tb;
    EXPECT_EQ(i.reductionVars()[0].extent, 4);
    EXPECT_TRUE(i.reductionVars()[0].splittable);
    // Defaults are filled in.
    EXPECT_EQ(i.attrs().at("alpha").kind, AttrValue::Kind::Float);
    EXPECT_EQ(i.attrs().at("alpha").f, 1.0);
  }
  std::string e = instantiateError(lib(), "Gemm", {f32({3, 4}), f32({5, 6})});
  EXPECT_NE(e.find("op Gemm: inner dimensions of op(A) and op(B) differ"),
            std::string::npos)
      << e;
}

TEST(TDLInstantiate, GemmBroadcastC) {
  for (std::vector<int64_t> c :
       {std::vector<int64_t>{5}, {1}, {1, 5}, {3, 1}, {3, 5}, {}}) {
    OpInstance i = mustInstantiate(lib(), "Gemm",
                                   {f32({3, 4}), f32({4, 5}), f32(c)});
    EXPECT_EQ(i.outputTypes()[0].dims, (std::vector<int64_t>{3, 5}));
    // With C the k reduction is not splittable.
    EXPECT_FALSE(i.reductionVars()[0].splittable);
  }
  EXPECT_EQ(
      instantiateError(lib(), "Gemm", {f32({3, 4}), f32({4, 5}), f32({4})}),
      "op Gemm: input C: dim 0 is 4, expected 1 or 5 (broadcast to index "
      "'n'; shape [4])");
  EXPECT_NE(instantiateError(lib(), "Gemm",
                             {f32({3, 4}), f32({4, 5}), f32({2, 3, 5})}),
            "");
}

TEST(TDLInstantiate, AddBroadcast) {
  OpInstance i = mustInstantiate(lib(), "Add", {f32({3, 1}), f32({4})});
  EXPECT_EQ(i.outputTypes()[0].dims, (std::vector<int64_t>{3, 4}));
  EXPECT_TRUE(i.isElementwise());
  OpInstance j = mustInstantiate(lib(), "Add", {f32({2, 1, 4}), f32({3, 1})});
  EXPECT_EQ(j.outputTypes()[0].dims, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(instantiateError(lib(), "Add", {f32({3, 2}), f32({4})}),
            "op Add: inputs are not broadcastable: input A has shape [3, 2], "
            "input B has shape [4]");
}

TEST(TDLInstantiate, RankPolymorphic) {
  for (std::vector<int64_t> s :
       {std::vector<int64_t>{}, {7}, {2, 3}, {2, 3, 4, 5}}) {
    OpInstance i = mustInstantiate(lib(), "Relu", {f32(s)});
    EXPECT_EQ(i.outputTypes()[0].dims, s);
    EXPECT_TRUE(i.isElementwise());
  }
  EXPECT_EQ(instantiateError(lib(), "SGDUpdate", {f32({2, 3}), f32({2, 4})}),
            "op SGDUpdate: input G: dims [2, 4] of *D do not match [2, 3] "
            "bound by an earlier input");
}

TEST(TDLInstantiate, Loss) {
  OpInstance i = mustInstantiate(lib(), "SoftmaxCrossEntropyLoss",
                                 {f32({4, 3}), i64({4})});
  EXPECT_EQ(i.outputTypes()[0].dims, std::vector<int64_t>{});
  EXPECT_EQ(i.attrs().at("reduction").s, "mean");
  EXPECT_EQ(i.attrs().at("ignore_index").i, -100);
  auto rv = i.reductionVars();
  ASSERT_EQ(rv.size(), 1u);
  EXPECT_EQ(rv[0].name, "n");
  EXPECT_TRUE(rv[0].splittable);
  OpInstance none = mustInstantiate(
      lib(), "SoftmaxCrossEntropyLoss", {f32({4, 3, 5}), i64({4, 5}), f32({3})},
      {{"reduction", AttrValue::ofString("none")}});
  EXPECT_EQ(none.outputTypes()[0].dims, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(instantiateError(lib(), "SoftmaxCrossEntropyLoss",
                             {f32({4, 3}), f32({4})}),
            "op SoftmaxCrossEntropyLoss: input labels: expected an integer "
            "type, found f32");
  std::string e = instantiateError(lib(), "SoftmaxCrossEntropyLoss",
                                   {f32({4, 3}), i64({4})},
                                   {{"reduction", AttrValue::ofString("max")}});
  EXPECT_NE(e.find("reduction must be 'mean', 'sum' or 'none'"),
            std::string::npos)
      << e;
  OpInstance g = mustInstantiate(lib(), "SoftmaxCrossEntropyLossGrad",
                                 {f32({}), f32({4, 3}), i64({4})});
  EXPECT_EQ(g.outputTypes()[0].dims, (std::vector<int64_t>{4, 3}));
}

TEST(TDLInstantiate, AttributeErrors) {
  EXPECT_EQ(instantiateError(lib(), "Scale", {f32({2})},
                             {{"beta", AttrValue::ofFloat(1)}}),
            "op Scale: unknown attribute 'beta'");
  EXPECT_EQ(instantiateError(lib(), "Scale", {f32({2})},
                             {{"alpha", AttrValue::ofString("x")}}),
            "op Scale: attribute 'alpha': expected float, found string");
  // An int is accepted for a float attribute.
  OpInstance i = mustInstantiate(lib(), "Scale", {f32({2})},
                                 {{"alpha", AttrValue::ofInt(3)}});
  EXPECT_EQ(i.attrs().at("alpha").kind, AttrValue::Kind::Float);
  EXPECT_EQ(i.attrs().at("alpha").f, 3.0);
}

TEST(TDLInstantiate, OutputShapeExpressions) {
  SpecLibrary l;
  ASSERT_EQ(errorText(l.addSource(
                "conv.tdl",
                "op Conv1D(data: [B, CI, W], filters: [CO, CI, K]) "
                "attrs(stride: int = 1)\n"
                "    -> out: [B, CO, (W - K) / stride + 1] {\n"
                "  out[b, co, x] = sum(ci: CI, dx: K) data[b, ci, x * stride + "
                "dx] * filters[co, ci, dx]\n}\n")),
            "");
  OpInstance i = mustInstantiate(l, "Conv1D", {f32({2, 3, 11}), f32({4, 3, 3})},
                                 {{"stride", AttrValue::ofInt(2)}});
  EXPECT_EQ(i.outputTypes()[0].dims, (std::vector<int64_t>{2, 4, 5}));
}

TEST(TDLInstantiate, NDShapes) {
  auto shapeOf = [](const char *op, std::vector<std::optional<TensorType>> in,
                    AttrMap attrs = {}) {
    return mustInstantiate(lib(), op, in, attrs).outputTypes()[0].dims;
  };
  using V = std::vector<int64_t>;
  EXPECT_EQ(shapeOf("MatMul", {f32({2, 1, 3, 4}), f32({5, 4, 6})}),
            V({2, 5, 3, 6}));
  EXPECT_EQ(shapeOf("MatMul", {f32({4}), f32({2, 4, 6})}), V({2, 6}));
  EXPECT_EQ(shapeOf("MatMul", {f32({2, 3, 4}), f32({4})}), V({2, 3}));
  EXPECT_EQ(shapeOf("MatMul", {f32({4}), f32({4})}), V({}));
  EXPECT_EQ(shapeOf("Transpose", {f32({2, 3, 4})}), V({4, 3, 2}));
  EXPECT_EQ(shapeOf("Transpose", {f32({2, 3, 4})},
                    {{"perm", AttrValue::ofInts({1, 2, 0})}}),
            V({3, 4, 2}));
  // Conv: (7 + 1 + 2 - 2 * 2 - 1) / 2 + 1 = 3.
  EXPECT_EQ(shapeOf("Conv", {f32({2, 3, 7}), f32({4, 3, 3}), std::nullopt},
                    {{"strides", AttrValue::ofInts({2})},
                     {"pads", AttrValue::ofInts({1, 2})},
                     {"dilations", AttrValue::ofInts({2})}}),
            V({2, 4, 3}));
  EXPECT_EQ(shapeOf("Conv", {f32({1, 4, 6, 5}), f32({6, 2, 3, 3})},
                    {{"group", AttrValue::ofInt(2)}}),
            V({1, 6, 4, 3}));
  EXPECT_EQ(instantiateError(lib(), "Conv", {f32({1, 4, 6}), f32({6, 3, 3})}),
            "op Conv: channels must divide into groups (C = W dim 1 * group): "
            "constraint `group >= 1 && C == CG * group && M % group == 0` "
            "does not hold (C=4, CG=3, M=6, N=1, group=1)");
  // ConvTranspose: 2 * (3 - 1) + 1 + (3 - 1) + 1 - 1 = 7.
  EXPECT_EQ(shapeOf("ConvTranspose", {f32({1, 4, 3}), f32({4, 3, 3})},
                    {{"strides", AttrValue::ofInts({2})},
                     {"pads", AttrValue::ofInts({1, 0})},
                     {"output_padding", AttrValue::ofInts({1})}}),
            V({1, 3, 7}));
}
