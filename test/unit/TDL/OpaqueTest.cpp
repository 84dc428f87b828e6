//===- OpaqueTest.cpp - opaque(...) with slices ---------------------------===//
//
// The paper's batch_cholesky (§4.1): a computation TDL cannot express,
// hidden behind opaque(...), whose batch dim stays partitionable. The spec
// is test-only (no builtin op is opaque).
//
//===----------------------------------------------------------------------===//
#include "TDLTestSupport.h"

#include "tofu/TDL/ProgramLowering.h"

using namespace tofu::tdl;
using namespace tofu::tdl::test;

namespace {

const char *kSpecs = R"(
op BatchCholesky(A: [B, N, N]) -> Y: [B, N, N] {
  Y[b, i, j] = opaque(A[b, :, :])[i, j]
}
# A hidden function of two slices, scaled and shifted along the batch.
op PairSolve(A: [B, N, N], R: [C, N, M]) attrs(alpha: float = 2.0)
    -> Y: [B, N, M] {
  Y[b, i, m] = alpha * opaque(A[b, :, :], R[b + 1, :, m])[i]
}
# An opaque result inside a reduction: no partition-n-reduce through it.
op SumOpaque(A: [K, N]) -> Y: [N] {
  Y[n] = sum(k: K) opaque(A[k, :])[n]
}
)";

const SpecLibrary &lib() {
  static SpecLibrary l = [] {
    SpecLibrary s;
    if (auto e = s.addSource("opaque.tdl", kSpecs))
      ADD_FAILURE() << llvm::toString(std::move(e));
    return s;
  }();
  return l;
}

} // namespace

TEST(TDLOpaque, BatchCholeskySplitsOnlyOnTheBatch) {
  OpInstance i = mustInstantiate(lib(), "BatchCholesky", {f32({8, 4, 4})});
  EXPECT_EQ(i.outputTypes()[0].dims, (std::vector<int64_t>{8, 4, 4}));
  EXPECT_FALSE(i.isElementwise());
  EXPECT_TRUE(i.reductionVars().empty());
  for (unsigned parts : {2u, 3u, 4u}) {
    auto s = analyzeStrategies(i, parts);
    ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
    ASSERT_EQ(s->size(), 1u);
    const Strategy &st = (*s)[0];
    EXPECT_EQ(st.kind, Strategy::Kind::SplitOutput);
    EXPECT_EQ(st.dim, 0);
    ASSERT_EQ(st.regions.size(), parts);
    for (unsigned w = 0; w < parts; ++w) {
      const auto &a = *st.regions[w][0];
      // The batch range of the worker, every row and column of its matrices.
      Range b = evaluateInterval(a[0], st.symbolValues);
      EXPECT_EQ(b.lo, int64_t(8 * w / parts));
      EXPECT_EQ(b.hi, int64_t((8 * (w + 1) + parts - 1) / parts));
      EXPECT_EQ(evaluateInterval(a[1], st.symbolValues).lo, 0);
      EXPECT_EQ(evaluateInterval(a[1], st.symbolValues).hi, 4);
      EXPECT_EQ(evaluateInterval(a[2], st.symbolValues).hi, 4);
    }
  }
  // The symbols of the sliced dims.
  auto s = analyzeStrategies(i);
  ASSERT_TRUE(bool(s));
  EXPECT_EQ((*s)[0].symbols, (std::vector<std::string>{
                                 "X0", "X1", "X2", "dim(A, 1)", "dim(A, 2)"}));
}

TEST(TDLOpaque, ConcreteRegionsNeedWholeSlices) {
  OpInstance i = mustInstantiate(lib(), "BatchCholesky", {f32({8, 4, 4})});
  // Even one element of one matrix needs that whole matrix.
  auto r = i.requiredRegions(0, {{2, 5}, {1, 2}, {3, 4}});
  ASSERT_TRUE(r[0].has_value());
  ASSERT_EQ(r[0]->size(), 3u);
  EXPECT_EQ((*r[0])[0].lo, 2);
  EXPECT_EQ((*r[0])[0].hi, 5);
  EXPECT_EQ((*r[0])[1].lo, 0);
  EXPECT_EQ((*r[0])[1].hi, 4);
  EXPECT_EQ((*r[0])[2].lo, 0);
  EXPECT_EQ((*r[0])[2].hi, 4);
}

TEST(TDLOpaque, SeveralArgumentsAndShiftedBatch) {
  OpInstance i =
      mustInstantiate(lib(), "PairSolve", {f32({6, 3, 3}), f32({7, 3, 5})});
  auto s = analyzeStrategies(i);
  ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
  // b (in non-sliced positions) and m (a non-sliced index of R) split; i
  // indexes the opaque result and does not.
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].dim, 0);
  EXPECT_EQ((*s)[1].dim, 2);
  auto r = i.requiredRegions(0, {{0, 3}, {0, 3}, {1, 2}});
  EXPECT_EQ((*r[0])[0].hi, 3);
  EXPECT_EQ((*r[1])[0].lo, 1); // R is read at b + 1
  EXPECT_EQ((*r[1])[0].hi, 4);
  EXPECT_EQ((*r[1])[1].hi, 3);
  EXPECT_EQ((*r[1])[2].lo, 1);
  EXPECT_EQ((*r[1])[2].hi, 2);
}

TEST(TDLOpaque, NoReductionStrategyThroughIt) {
  OpInstance i = mustInstantiate(lib(), "SumOpaque", {f32({4, 6})});
  auto reds = i.reductionVars();
  ASSERT_EQ(reds.size(), 1u);
  EXPECT_FALSE(reds[0].splittable);
  auto s = analyzeStrategies(i);
  ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
  EXPECT_TRUE(s->empty()); // n indexes the opaque result; k is not split
}

TEST(TDLOpaque, NoProgramAndNoReferenceEvaluation) {
  OpInstance i = mustInstantiate(lib(), "BatchCholesky", {f32({2, 3, 3})});
  auto p = lowerToProgram(i, 0);
  ASSERT_FALSE(bool(p));
  EXPECT_NE(llvm::toString(p.takeError()).find("opaque"), std::string::npos);
  DenseTensor a{f32({2, 3, 3}), std::vector<double>(18, 1.0)};
  auto r = evaluate(i, {&a});
  ASSERT_FALSE(bool(r));
  std::string msg = llvm::toString(r.takeError());
  EXPECT_NE(msg.find("opaque"), std::string::npos) << msg;
  EXPECT_NE(msg.find("native kernel"), std::string::npos) << msg;
}

TEST(TDLOpaque, Diagnostics) {
  EXPECT_EQ(parseError("op F(A: [N, N]) -> Y: [N] { Y[i] = A[i, :] }"),
            "test.tdl:1:41: error: ':' (a whole dimension) is only allowed "
            "as an index of an argument of opaque(...)");
  EXPECT_EQ(parseError("op F(A: [N, N]) -> Y: [N] { Y[i] = opaque(A[i, :]) }"),
            "test.tdl:1:52: error: expected '[' and the indices of the "
            "opaque result after 'opaque(...)', found '}'");
  EXPECT_EQ(parseError("op F(A: [N, N]) -> Y: [N] { Y[i] = opaque(i)[i] }"),
            "test.tdl:1:43: error: an argument of opaque(...) must be an "
            "input tensor access such as A[b, :, :]");
  EXPECT_EQ(
      parseError("op F(A: [N, N]) -> Y: [N] { Y[i] = opaque(A[:, :])[:] }"),
      "test.tdl:1:52: error: an index of the opaque result must be an index "
      "expression");
  EXPECT_EQ(parseError("op F(A: [N, N]) -> Y: [N] { Y[i] = opaque(A[:])[i] }"),
            "test.tdl:1:43: error: wrong number of indices for 'A': expected "
            "2, found 1");
}
