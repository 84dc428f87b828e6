//===- GradientIndexingTest.cpp - indexing ops vs finite differences ------===//
//
// The gradient rules of tdl-specs/indexing.tdl checked by central
// differences in float64 (GradientCheck.h), and, by hand, the values and
// gradients where finite differences cannot look: ties (TopK, ArgMax,
// Hardmax, ReduceMin), halves (Round) and duplicate scatter indices.
//
//===----------------------------------------------------------------------===//
#include "GradientCheck.h"

using namespace tofu::tdl;
using namespace tofu::tdl::test;

namespace {

AttrValue I(int64_t v) { return AttrValue::ofInt(v); }
AttrValue S(std::string v) { return AttrValue::ofString(std::move(v)); }

/// Every output of `op` on `inputs`.
std::vector<std::vector<double>>
runAll(llvm::StringRef op, const std::vector<DenseTensor> &inputs,
       const AttrMap &attrs = {},
       const std::map<unsigned, std::vector<double>> &constValues = {}) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  std::vector<std::optional<TensorType>> types;
  std::vector<const DenseTensor *> ptrs;
  for (const auto &t : inputs) {
    types.push_back(t.type);
    ptrs.push_back(&t);
  }
  OpInstance inst = mustInstantiate(lib, op, types, attrs, constValues);
  auto r = evaluate(inst, ptrs);
  if (!r) {
    ADD_FAILURE() << op.str() << ": " << llvm::toString(r.takeError());
    return {};
  }
  std::vector<std::vector<double>> out;
  for (auto &t : *r)
    out.push_back(t.data);
  return out;
}

std::string gradientError(const GradProblem &p) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  OpInstance inst = mustInstantiate(lib, p.op, p.types, p.attrs, p.constValues);
  auto g = expandGradient(lib, inst);
  return g ? "" : llvm::toString(g.takeError());
}

} // namespace

TEST(TDLGradientIndexing, GatherElements) {
  // Negative and out-of-range indices (out of range: no gradient).
  GradProblem p{"GatherElements", {f32({3, 4}), i64({3, 5})}, {{"axis", I(1)}}};
  p.intLo = -5;
  p.intRange = 10;
  checkGradientFD(p);
  p.types = {f32({3, 2}), i64({4, 2})};
  p.attrs = {{"axis", I(0)}};
  p.intLo = -3;
  p.intRange = 6;
  checkGradientFD(p, 2);
  // indices smaller than data, of size 1, on a dim other than the axis:
  // the rows it does not cover get no gradient (no broadcast).
  p.types = {f32({3, 4}), i64({1, 3})};
  p.attrs = {{"axis", I(1)}};
  checkGradientFD(p, 3);
}

TEST(TDLGradientIndexing, GatherND) {
  GradProblem p{"GatherND", {f32({3, 4, 2}), i64({5, 2})}};
  p.intLo = -4;
  p.intRange = 8;
  checkGradientFD(p);
  p.types = {f32({2, 3, 4}), i64({2, 3, 1})};
  p.attrs = {{"batch_dims", I(1)}};
  p.intLo = -3;
  p.intRange = 6;
  checkGradientFD(p);
  p.types = {f32({2, 3}), i64({2, 2})};
  p.attrs = {};
  checkGradientFD(p);
}

TEST(TDLGradientIndexing, ScatterElements) {
  for (const char *reduction : {"none", "add"}) {
    SCOPED_TRACE(reduction);
    // Duplicate, negative and out-of-range indices: with "none" only the
    // last duplicate's update reaches the output, and only it has a
    // gradient.
    GradProblem p{"ScatterElements", {f32({3, 4}), i64({3, 3}), f32({3, 3})},
                  {{"axis", I(1)}, {"reduction", S(reduction)}}};
    p.intLo = -5;
    p.intRange = 10;
    checkGradientFD(p);
    checkGradientFD(p, 2);
    p.types = {f32({4, 2}), i64({3, 2}), f32({3, 2})};
    p.attrs = {{"reduction", S(reduction)}};
    p.intLo = -4;
    p.intRange = 8;
    checkGradientFD(p, 3);
    // indices of size 1 on a dim where data is larger: one row is
    // scattered into, the others keep data (no broadcast).
    p.types = {f32({3, 4}), i64({1, 2}), f32({1, 2})};
    p.attrs = {{"axis", I(1)}, {"reduction", S(reduction)}};
    checkGradientFD(p, 4);
  }
  {
    DenseTensor data = tensor(f32({2, 3}), {1, 2, 3, 4, 5, 6});
    DenseTensor idx = tensor(i64({1, 1}), {2});
    DenseTensor upd = tensor(f32({1, 1}), {9});
    EXPECT_EQ(runAll("ScatterElements", {data, idx, upd}, {{"axis", I(1)}})[0],
              (std::vector<double>{1, 2, 9, 4, 5, 6}));
    EXPECT_EQ(runAll("GatherElementsGrad",
                     {upd, idx, data}, {{"axis", I(1)}})[0],
              (std::vector<double>{0, 0, 9, 0, 0, 0}));
  }
  for (const char *reduction : {"mul", "max", "min"})
    EXPECT_NE(gradientError({"ScatterElements",
                             {f32({3, 4}), i64({3, 2}), f32({3, 2})},
                             {{"reduction", S(reduction)}}})
                  .find("reduction mul, max or min is not supported"),
              std::string::npos);
}

TEST(TDLGradientIndexing, ScatterND) {
  for (const char *reduction : {"none", "add"}) {
    SCOPED_TRACE(reduction);
    GradProblem p{"ScatterND", {f32({4, 3}), i64({5, 1}), f32({5, 3})},
                  {{"reduction", S(reduction)}}};
    p.intLo = -5;
    p.intRange = 10;
    checkGradientFD(p);
    p.types = {f32({3, 4}), i64({2, 3, 2}), f32({2, 3})};
    p.intLo = -3;
    p.intRange = 6;
    checkGradientFD(p, 2);
  }
  EXPECT_NE(gradientError({"ScatterND", {f32({4, 3}), i64({2, 1}), f32({2, 3})},
                           {{"reduction", S("mul")}}})
                .find("not supported"),
            std::string::npos);
}

TEST(TDLGradientIndexing, TileAndCumSum) {
  GradProblem t{"Tile", {f32({2, 3}), i64({2})}};
  t.constValues = {{1, {3, 2}}};
  checkGradientFD(t);
  for (int exclusive : {0, 1})
    for (int reverse : {0, 1}) {
      GradProblem c{"CumSum", {f32({3, 4}), i64({})},
                    {{"exclusive", I(exclusive)}, {"reverse", I(reverse)}}};
      c.constValues = {{1, {1}}};
      checkGradientFD(c);
      c.types = {f32({3, 4}), i64({1})};
      c.constValues = {{1, {-2}}};
      checkGradientFD(c);
    }
}

TEST(TDLGradientIndexing, TopK) {
  // Random values: no ties; dValues lands on the selected elements.
  for (int largest : {1, 0}) {
    GradProblem p{"TopK", {f32({3, 5}), i64({1})}, {{"largest", I(largest)}}};
    p.constValues = {{1, {3}}};
    checkGradientFD(p);
    p.types = {f32({4, 3}), i64({1})};
    p.attrs = {{"axis", I(0)}, {"largest", I(largest)}};
    p.constValues = {{1, {2}}};
    checkGradientFD(p);
  }
}

TEST(TDLGradientIndexing, DepthToSpaceAndSpaceToDepth) {
  checkGradientFD({"DepthToSpace", {f32({1, 8, 2, 3})}, {{"blocksize", I(2)}}});
  checkGradientFD({"DepthToSpace", {f32({2, 8, 2, 1})},
                   {{"blocksize", I(2)}, {"mode", S("CRD")}}});
  checkGradientFD({"SpaceToDepth", {f32({1, 2, 4, 6})}, {{"blocksize", I(2)}}});
}

TEST(TDLGradientIndexing, PiecewiseConstantOps) {
  // Round and Hardmax: zero gradient (random values: no tie, no half).
  checkGradientFD({"Round", {f32({2, 5})}, {}, -3, 3});
  checkGradientFD({"Hardmax", {f32({3, 4})}});
  checkGradientFD({"ReduceMin", {f32({2, 3, 4})}, {{"axes", ints({1})}}});
  checkGradientFD({"ReduceMin", {f32({2, 3})}, {{"keepdims", I(0)}}});
}

// Ties: TopK orders equal values by index (ONNX's rule; torch.topk's order
// of equal values is its sort's, unspecified), so a tie's dValues goes to
// the smaller index first.
TEST(TDLGradientIndexing, TopKTiesTakeTheSmallerIndexFirst) {
  DenseTensor x = tensor(f32({1, 6}), {1, 3, 2, 3, 0, 2});
  DenseTensor k = tensor(i64({1}), {3});
  auto out = runAll("TopK", {x, k}, {}, {{1, {3}}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], (std::vector<double>{3, 3, 2}));
  EXPECT_EQ(out[1], (std::vector<double>{1, 3, 2}));
  auto smallest = runAll("TopK", {x, k}, {{"largest", I(0)}}, {{1, {3}}});
  EXPECT_EQ(smallest[0], (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(smallest[1], (std::vector<double>{4, 0, 2}));
  // The gradient rule: dValues scattered to Indices (GatherElementsGrad).
  DenseTensor dv = tensor(f32({1, 3}), {10, 100, 1000});
  DenseTensor idx = tensor(i64({1, 3}), out[1]);
  EXPECT_EQ(runAll("GatherElementsGrad", {dv, idx, x}, {{"axis", I(1)}})[0],
            (std::vector<double>{0, 10, 1000, 100, 0, 0}));
}

TEST(TDLGradientIndexing, ArgMaxHardmaxTies) {
  DenseTensor x = tensor(f32({2, 4}), {1, 3, 3, 0, 2, 2, 2, 2});
  EXPECT_EQ(runAll("ArgMax", {x}, {{"axis", I(1)}})[0],
            (std::vector<double>{1, 0}));
  EXPECT_EQ(runAll("ArgMax", {x}, {{"axis", I(1)}, {"select_last_index", I(1)}})[0],
            (std::vector<double>{2, 3}));
  EXPECT_EQ(runAll("ArgMin", {x}, {{"axis", I(1)}, {"keepdims", I(0)}})[0],
            (std::vector<double>{3, 0}));
  EXPECT_EQ(runAll("Hardmax", {x})[0],
            (std::vector<double>{0, 1, 0, 0, 1, 0, 0, 0}));
}

// Round: halves to even (numpy.round, torch.round), exact in float64 also
// where x + 0.5 is not.
TEST(TDLGradientIndexing, RoundHalvesToEven) {
  DenseTensor x = tensor(TensorType{{10}, ElemType::F64},
                         {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999999999999994,
                          -0.7, 4503599627370497.0, 2.4});
  EXPECT_EQ(runAll("Round", {x})[0],
            (std::vector<double>{-2, -2, -0.0, 0, 2, 2, 0, -1,
                                 4503599627370497.0, 2}));
}

// Duplicate indices with reduction "none": the last position wins (ONNX's
// reference loop), in the forward and in the updates' gradient.
TEST(TDLGradientIndexing, ScatterDuplicatesLastWins) {
  DenseTensor data = tensor(f32({4}), {1, 2, 3, 4});
  DenseTensor idx = tensor(i64({3}), {1, -3, 9});
  DenseTensor upd = tensor(f32({3}), {10, 20, 30});
  EXPECT_EQ(runAll("ScatterElements", {data, idx, upd})[0],
            (std::vector<double>{1, 20, 3, 4}));
  EXPECT_EQ(runAll("ScatterElements", {data, idx, upd},
                   {{"reduction", S("add")}})[0],
            (std::vector<double>{1, 32, 3, 4}));
  DenseTensor dy = tensor(f32({4}), {1, 2, 3, 4});
  EXPECT_EQ(runAll("ScatterElementsUpdatesGrad", {dy, idx})[0],
            (std::vector<double>{0, 2, 0}));
  DenseTensor idx2 = tensor(i64({3, 1}), {1, -3, 9});
  EXPECT_EQ(runAll("ScatterND", {data, idx2, upd})[0],
            (std::vector<double>{1, 20, 3, 4}));
  EXPECT_EQ(runAll("ScatterNDUpdatesGrad", {dy, idx2})[0],
            (std::vector<double>{0, 2, 0}));
}

// Einsum with the labels the importer gives (EinsumNormalization.cpp):
// matmul, a batched outer product summed over one label, a diagonal (its
// gradient writes a diagonal: a repeated output label), a trace, three
// operands. An operand broadcast along an ellipsis dim has no gradient.
TEST(TDLGradientIndexing, Einsum) {
  auto einsum = [](std::vector<std::optional<TensorType>> types,
                   std::vector<int64_t> terms, std::vector<int64_t> out,
                   std::vector<int64_t> extents) {
    return GradProblem{"Einsum", std::move(types),
                       {{"terms", ints(std::move(terms))},
                        {"out", ints(std::move(out))},
                        {"extents", ints(std::move(extents))}}};
  };
  checkGradientFD(einsum({f32({2, 3}), f32({3, 4})}, {0, 1, 1, 2}, {0, 2},
                         {2, 3, 4}));
  checkGradientFD(einsum({f32({2, 3, 4}), f32({2, 4})}, {0, 1, 2, 0, 2},
                         {0, 1}, {2, 3, 4}));
  checkGradientFD(einsum({f32({2, 3, 3})}, {0, 1, 1}, {0, 1}, {2, 3}));
  checkGradientFD(einsum({f32({3, 3})}, {0, 0}, {}, {3}));
  checkGradientFD(einsum({f32({2, 3}), f32({3}), f32({3, 2})},
                         {0, 1, 1, 1, 2}, {0, 2}, {2, 3, 2}));
  GradProblem b = einsum({f32({2, 1, 3}), f32({4, 3})}, {0, 1, 2, 1, 2},
                         {0, 1}, {2, 4, 3});
  EXPECT_NE(gradientError(b).find("broadcast along an ellipsis dim"),
            std::string::npos);
  // A diagonal's values: "ii->i" and its gradient "i->ii".
  DenseTensor m = tensor(f32({2, 2}), {1, 2, 3, 4});
  EXPECT_EQ(runAll("Einsum", {m}, {{"terms", ints({0, 0})},
                                   {"out", ints({0})},
                                   {"extents", ints({2})}})[0],
            (std::vector<double>{1, 4}));
  DenseTensor v = tensor(f32({2}), {5, 6});
  EXPECT_EQ(runAll("Einsum", {v}, {{"terms", ints({0})},
                                   {"out", ints({0, 0})},
                                   {"extents", ints({2})}})[0],
            (std::vector<double>{5, 0, 0, 6}));
}
