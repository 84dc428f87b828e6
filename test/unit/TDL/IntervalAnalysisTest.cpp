//===- IntervalAnalysisTest.cpp - TDL region analysis (paper §4.2) --------===//
#include "TDLTestSupport.h"

using namespace tofu::tdl;
using namespace tofu::tdl::test;

namespace {

const char *kTestSpecs = R"(
op ShiftTwo(A: [N]) -> B: [N - 2] { B[i] = A[i + 2] }
op Conv1D(data: [B, CI, W], filters: [CO, CI, K]) attrs(stride: int = 1)
    -> out: [B, CO, (W - K) / stride + 1] {
  out[b, co, x] = sum(ci: CI, dx: K) data[b, ci, x * stride + dx] * filters[co, ci, dx]
}
op Down(A: [N]) -> B: [N / 2] { B[i] = A[2 * i] + A[2 * i + 1] }
op Up(A: [N]) -> B: [N * 2] { B[i] = A[i / 2] }
op Pad(A: [N]) -> B: [N + 2] { B[i] = A[i - 1] }
op Mirror(A: [N]) -> B: [N] { B[i] = A[N - 1 - i] }
)";

const SpecLibrary &testLib() {
  static SpecLibrary lib = [] {
    SpecLibrary l;
    if (auto e = l.addSource("test.tdl", kTestSpecs))
      ADD_FAILURE() << llvm::toString(std::move(e));
    return l;
  }();
  return lib;
}

void expectBox(const std::optional<Box> &b, std::vector<Range> want) {
  ASSERT_TRUE(b.has_value());
  ASSERT_EQ(b->size(), want.size());
  for (size_t d = 0; d < want.size(); ++d) {
    EXPECT_EQ((*b)[d].lo, want[d].lo) << "dim " << d;
    EXPECT_EQ((*b)[d].hi, want[d].hi) << "dim " << d;
  }
}

/// Checks interval [lower, upper) given as dense coefficients.
void expectInterval(const SymInterval &si, std::vector<double> lower,
                    double lowerConst, std::vector<double> upper,
                    double upperConst) {
  EXPECT_EQ(si.lower, lower);
  EXPECT_EQ(si.lowerConst, lowerConst);
  EXPECT_EQ(si.upper, upper);
  EXPECT_EQ(si.upperConst, upperConst);
}

} // namespace

TEST(TDLIntervals, ShiftTwoConcrete) {
  // Paper §4.2: B over [0, 4] needs A over [2, 6]; B over [5, 9] needs
  // A over [7, 11] (closed ranges; ours are half-open).
  OpInstance i = mustInstantiate(testLib(), "ShiftTwo", {f32({12})});
  EXPECT_EQ(i.outputTypes()[0].dims, std::vector<int64_t>{10});
  expectBox(i.requiredRegions(0, {{0, 5}})[0], {{2, 7}});
  expectBox(i.requiredRegions(0, {{5, 10}})[0], {{7, 12}});
}

TEST(TDLIntervals, ShiftTwoSymbolic) {
  OpInstance i = mustInstantiate(testLib(), "ShiftTwo", {f32({12})});
  auto s = analyzeStrategies(i);
  ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
  ASSERT_EQ(s->size(), 1u);
  const Strategy &st = (*s)[0];
  EXPECT_EQ(st.kind, Strategy::Kind::SplitOutput);
  EXPECT_EQ(st.symbols, std::vector<std::string>{"X0"});
  // Worker 0: [2, X0/2 + 2); worker 1: [X0/2 + 2, X0 + 2).
  expectInterval((*st.regions[0][0])[0], {0}, 2, {0.5}, 2);
  expectInterval((*st.regions[1][0])[0], {0.5}, 2, {1}, 2);
}

TEST(TDLIntervals, Conv1DStrategies) {
  OpInstance i = mustInstantiate(testLib(), "Conv1D",
                                 {f32({2, 3, 10}), f32({4, 3, 3})});
  auto s = analyzeStrategies(i);
  ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
  // Split b, co, x; reduce ci, dx.
  ASSERT_EQ(s->size(), 5u);
  EXPECT_EQ((*s)[0].dim, 0);
  EXPECT_EQ((*s)[1].dim, 1);
  EXPECT_EQ((*s)[2].dim, 2);
  EXPECT_EQ((*s)[3].kind, Strategy::Kind::SplitReduction);
  EXPECT_EQ((*s)[3].reduction, "ci");
  EXPECT_EQ((*s)[4].reduction, "dx");
  EXPECT_EQ((*s)[4].reductionIndex, 1u);
  EXPECT_EQ((*s)[0].symbols,
            (std::vector<std::string>{"X0", "X1", "X2", "CI", "K"}));
  EXPECT_EQ((*s)[0].symbolValues, (std::vector<int64_t>{2, 4, 8, 3, 3}));

  // Split b: half of data on dim 0, all filters.
  const auto &b0 = (*s)[0].regions[0];
  expectInterval((*b0[0])[0], {0, 0, 0, 0, 0}, 0, {0.5, 0, 0, 0, 0}, 0);
  expectInterval((*b0[1])[0], {0, 0, 0, 0, 0}, 0, {0, 1, 0, 0, 0}, 0);

  // Split x: a halo of K - 1 on data's dim 2.
  const auto &x0 = (*s)[2].regions[0];
  const auto &x1 = (*s)[2].regions[1];
  expectInterval((*x0[0])[2], {0, 0, 0, 0, 0}, 0, {0, 0, 0.5, 0, 1}, -1);
  expectInterval((*x1[0])[2], {0, 0, 0.5, 0, 0}, 0, {0, 0, 1, 0, 1}, -1);

  // Reduce ci: half of data on dim 1 and of filters on dim 1.
  const auto &c0 = (*s)[3].regions[0];
  expectInterval((*c0[0])[1], {0, 0, 0, 0, 0}, 0, {0, 0, 0, 0.5, 0}, 0);
  expectInterval((*c0[1])[1], {0, 0, 0, 0, 0}, 0, {0, 0, 0, 0.5, 0}, 0);

  // Concrete: x in [0, 4) reads data[.., 0:6), x in [4, 8) reads [4, 10).
  auto r0 = i.requiredRegions(0, {{0, 2}, {0, 4}, {0, 4}});
  expectBox(r0[0], {{0, 2}, {0, 3}, {0, 6}});
  expectBox(r0[1], {{0, 4}, {0, 3}, {0, 3}});
  auto r1 = i.requiredRegions(0, {{0, 2}, {0, 4}, {4, 8}});
  expectBox(r1[0], {{0, 2}, {0, 3}, {4, 10}});
  // Reduce dx over [1, 3): data x range shifts, filters dim 2 is [1, 3).
  auto r2 = i.requiredRegions(0, {{0, 2}, {0, 4}, {0, 8}}, {{0, 3}, {1, 3}});
  expectBox(r2[0], {{0, 2}, {0, 3}, {1, 10}});
  expectBox(r2[1], {{0, 4}, {0, 3}, {1, 3}});
}

TEST(TDLIntervals, Conv1DStrided) {
  OpInstance i =
      mustInstantiate(testLib(), "Conv1D", {f32({1, 1, 11}), f32({1, 1, 3})},
                      {{"stride", AttrValue::ofInt(2)}});
  // out x in [2, 4) reads data [4, 9).
  auto r = i.requiredRegions(0, {{0, 1}, {0, 1}, {2, 4}});
  expectBox(r[0], {{0, 1}, {0, 1}, {4, 9}});
  auto s = analyzeStrategies(i);
  ASSERT_TRUE(bool(s));
  // Worker 0 along x: [0, X2*2/2 - 2 + K).
  expectInterval((*(*s)[2].regions[0][0])[2], {0, 0, 0, 0, 0}, 0,
                 {0, 0, 1, 0, 1}, -2);
}

TEST(TDLIntervals, FloorDivisionAndPadding) {
  OpInstance d = mustInstantiate(testLib(), "Down", {f32({8})});
  expectBox(d.requiredRegions(0, {{1, 3}})[0], {{2, 6}});
  OpInstance u = mustInstantiate(testLib(), "Up", {f32({4})});
  expectBox(u.requiredRegions(0, {{1, 4}})[0], {{0, 2}});
  expectBox(u.requiredRegions(0, {{3, 8}})[0], {{1, 4}});
  OpInstance p = mustInstantiate(testLib(), "Pad", {f32({4})});
  // Out-of-range reads are padding and clamped away.
  expectBox(p.requiredRegions(0, {{0, 2}})[0], {{0, 1}});
  expectBox(p.requiredRegions(0, {{0, 6}})[0], {{0, 4}});
  OpInstance m = mustInstantiate(testLib(), "Mirror", {f32({10})});
  expectBox(m.requiredRegions(0, {{0, 3}})[0], {{7, 10}});
}

TEST(TDLIntervals, GemmStrategies) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  OpInstance withC =
      mustInstantiate(lib, "Gemm", {f32({8, 6}), f32({6, 4}), f32({4})});
  auto s = analyzeStrategies(withC);
  ASSERT_TRUE(bool(s));
  ASSERT_EQ(s->size(), 2u); // m and n; no k because of C
  EXPECT_EQ((*s)[0].kind, Strategy::Kind::SplitOutput);
  EXPECT_EQ((*s)[1].kind, Strategy::Kind::SplitOutput);

  OpInstance noC = mustInstantiate(lib, "Gemm", {f32({8, 6}), f32({6, 4})});
  auto t = analyzeStrategies(noC);
  ASSERT_TRUE(bool(t));
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[2].kind, Strategy::Kind::SplitReduction);
  EXPECT_EQ((*t)[2].reduction, "k");
  EXPECT_EQ((*t)[2].symbols, (std::vector<std::string>{"X0", "X1", "A1"}));
  // Worker 1 of the k split needs A[:, K/2:K] and B[K/2:K, :].
  expectInterval((*(*t)[2].regions[1][0])[1], {0, 0, 0.5}, 0, {0, 0, 1}, 0);
  expectInterval((*(*t)[2].regions[1][1])[0], {0, 0, 0.5}, 0, {0, 0, 1}, 0);
  // Concrete with the reduction restricted.
  auto r = noC.requiredRegions(0, {{0, 8}, {0, 4}}, {{3, 6}});
  expectBox(r[0], {{0, 8}, {3, 6}});
  expectBox(r[1], {{3, 6}, {0, 4}});
  EXPECT_FALSE(r[2].has_value()); // absent C

  // Transposed A: rows of Y come from columns of A.
  OpInstance ta = mustInstantiate(lib, "Gemm", {f32({6, 8}), f32({6, 4})},
                                  {{"transA", AttrValue::ofInt(1)}});
  auto r2 = ta.requiredRegions(0, {{2, 5}, {0, 4}});
  expectBox(r2[0], {{0, 6}, {2, 5}});
}

TEST(TDLIntervals, BroadcastRegions) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  OpInstance add = mustInstantiate(lib, "Add", {f32({3, 1}), f32({4})});
  auto r = add.requiredRegions(0, {{1, 3}, {2, 4}});
  expectBox(r[0], {{1, 3}, {0, 1}});
  expectBox(r[1], {{2, 4}});
  OpInstance gemm =
      mustInstantiate(lib, "Gemm", {f32({8, 6}), f32({6, 4}), f32({1, 4})});
  expectBox(gemm.requiredRegions(0, {{4, 8}, {1, 3}})[2], {{0, 1}, {1, 3}});
}

TEST(TDLIntervals, ReductionStrategiesOfBiasGradAndLoss) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  OpInstance bg = mustInstantiate(lib, "BiasGrad", {f32({6, 4})});
  auto s = analyzeStrategies(bg);
  ASSERT_TRUE(bool(s));
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[1].reduction, "m");
  auto r = bg.requiredRegions(0, {{0, 4}}, {{0, 3}});
  expectBox(r[0], {{0, 3}, {0, 4}});

  OpInstance loss = mustInstantiate(lib, "SoftmaxCrossEntropyLoss",
                                    {f32({6, 5}), i64({6})});
  auto l = analyzeStrategies(loss);
  ASSERT_TRUE(bool(l));
  ASSERT_GE(l->size(), 1u);
  EXPECT_EQ((*l)[0].kind, Strategy::Kind::SplitReduction);
  EXPECT_EQ((*l)[0].reduction, "n");
  auto lr = loss.requiredRegions(0, {}, {{3, 6}});
  expectBox(lr[0], {{3, 6}, {0, 5}});
  // The mean's divisor counts the non-ignored labels of every row.
  expectBox(lr[1], {{0, 6}});

  OpInstance ones = mustInstantiate(lib, "Ones", {f32({3, 2})});
  expectBox(ones.requiredRegions(0, {{0, 3}, {0, 2}})[0], {{0, 0}, {0, 0}});
}

TEST(TDLIntervals, CachedPerSignature) {
  OpInstance a = mustInstantiate(testLib(), "Conv1D",
                                 {f32({2, 3, 10}), f32({4, 3, 3})});
  OpInstance b = mustInstantiate(testLib(), "Conv1D",
                                 {f32({4, 6, 20}), f32({8, 6, 5})});
  auto sa = analyzeStrategies(a);
  auto sb = analyzeStrategies(b);
  ASSERT_TRUE(sa && sb);
  EXPECT_EQ((*sb)[2].symbolValues, (std::vector<int64_t>{4, 8, 16, 6, 5}));
  EXPECT_EQ((*sa)[2].regions[0][0]->at(2).upper,
            (*sb)[2].regions[0][0]->at(2).upper);
}

//===----------------------------------------------------------------------===//
// Non-affine indices: data-dependent (Gather) and `%`, `//`
//===----------------------------------------------------------------------===//

namespace {

const char *kNonAffineSpecs = R"(
op Take(A: [N, M], L: [K] : int) -> Y: [K, M] { Y[k, m] = A[L[k], m] }
op Roll(A: [N]) -> B: [N] { B[i] = A[(i + 1) % N] }
op Flat(A: [N, M]) -> B: [N * M] { B[i] = A[i // M, i % M] }
op Positive(A: [*D]) -> B: [*D] : bool { B[*i] = A[*i] > 0 }
)";

const SpecLibrary &nonAffineLib() {
  static SpecLibrary lib = [] {
    SpecLibrary l;
    if (auto e = l.addSource("nonaffine.tdl", kNonAffineSpecs))
      ADD_FAILURE() << llvm::toString(std::move(e));
    return l;
  }();
  return lib;
}

} // namespace

TEST(TDLIntervals, DataDependentIndexNeedsWholeDim) {
  OpInstance take = mustInstantiate(nonAffineLib(), "Take",
                                    {f32({10, 4}), i64({6})});
  auto r = take.requiredRegions(0, {{2, 4}, {1, 3}});
  expectBox(r[0], {{0, 10}, {1, 3}});
  expectBox(r[1], {{2, 4}});
  auto st = analyzeStrategies(take);
  ASSERT_TRUE(bool(st)) << llvm::toString(st.takeError());
  ASSERT_EQ(st->size(), 2u);
  const Strategy &splitK = (*st)[0];
  EXPECT_EQ(splitK.symbols,
            (std::vector<std::string>{"X0", "X1", "dim(A, 0)"}));
  EXPECT_EQ(splitK.symbolValues, (std::vector<int64_t>{6, 4, 10}));
  // Worker 1 of the split on k needs all rows of A and its half of L.
  expectInterval(splitK.regions[1][0]->at(0), {0, 0, 0}, 0, {0, 0, 1}, 0);
  expectInterval(splitK.regions[1][1]->at(0), {0.5, 0, 0}, 0, {1, 0, 0}, 0);
}

TEST(TDLIntervals, ModAndFloorDivAreSoundOverApproximations) {
  OpInstance roll = mustInstantiate(nonAffineLib(), "Roll", {f32({8})});
  expectBox(roll.requiredRegions(0, {{0, 3}})[0], {{1, 4}});
  expectBox(roll.requiredRegions(0, {{4, 8}})[0], {{0, 8}});
  OpInstance flat = mustInstantiate(nonAffineLib(), "Flat", {f32({3, 4})});
  EXPECT_EQ(flat.outputTypes()[0].dims, std::vector<int64_t>{12});
  expectBox(flat.requiredRegions(0, {{4, 8}})[0], {{1, 2}, {0, 4}});
  expectBox(flat.requiredRegions(0, {{2, 5}})[0], {{0, 2}, {0, 4}});
  auto st = analyzeStrategies(flat);
  ASSERT_TRUE(bool(st)) << llvm::toString(st.takeError());
  // i % M lies in [0, M): the symbolic column range is [0, dim(A, 1)).
  for (const Strategy &s : *st)
    for (unsigned w = 0; w < s.parts; ++w) {
      Range cols = evaluateInterval(s.regions[w][0]->at(1), s.symbolValues);
      EXPECT_LE(cols.lo, 0);
      EXPECT_GE(cols.hi, 4);
    }
}

TEST(TDLIntervals, BoolOutput) {
  OpInstance pos = mustInstantiate(nonAffineLib(), "Positive", {f32({3})});
  EXPECT_EQ(pos.outputTypes()[0].elem, ElemType::Bool);
  DenseTensor a = tensor(f32({3}), {-1, 0, 2});
  auto out = evaluate(pos, {&a});
  ASSERT_TRUE(bool(out));
  EXPECT_EQ((*out)[0].data, (std::vector<double>{0, 0, 1}));
}

//===----------------------------------------------------------------------===//
// g-part strategies vs brute-force concrete analysis
//===----------------------------------------------------------------------===//

namespace {

/// Checks every strategy of `op` for `parts` workers against
/// requiredRegions: the symbolic region (clamped to the input) must contain
/// the concrete one, and equal it when `exact`. Output extents should be
/// divisible by `parts` for exactness.
void checkParts(const OpInstance &op, unsigned parts, bool exact) {
  auto st = analyzeStrategies(op, parts);
  ASSERT_TRUE(bool(st)) << llvm::toString(st.takeError());
  for (const Strategy &s : *st) {
    ASSERT_EQ(s.parts, parts);
    ASSERT_EQ(s.regions.size(), parts);
    const auto &outDims = op.outputTypes()[s.output].dims;
    auto reds = op.reductionVars(s.output);
    for (unsigned w = 0; w < parts; ++w) {
      Box outBox;
      for (int64_t d : outDims)
        outBox.push_back({0, d});
      std::vector<Range> redRanges;
      auto part = [&](int64_t x) {
        return Range{int64_t(w) * x / parts, int64_t(w + 1) * x / parts};
      };
      if (s.kind == Strategy::Kind::SplitOutput) {
        outBox[s.dim] = part(outDims[s.dim]);
      } else {
        for (auto &r : reds)
          redRanges.push_back({0, r.extent});
        redRanges[s.reductionIndex] = part(reds[s.reductionIndex].extent);
      }
      auto concrete = op.requiredRegions(s.output, outBox, redRanges);
      for (size_t in = 0; in < concrete.size(); ++in) {
        if (!concrete[in])
          continue;
        SCOPED_TRACE(op.opName().str() + " strategy " +
                     (s.kind == Strategy::Kind::SplitOutput
                          ? "dim " + std::to_string(s.dim)
                          : s.reduction) +
                     " worker " + std::to_string(w) + " input " +
                     std::to_string(in));
        const auto &dims = op.inputTypes()[in]->dims;
        const Box &c = *concrete[in];
        bool concreteEmpty = llvm::any_of(c, [](Range r) {
          return r.lo >= r.hi;
        });
        Box sym;
        bool symEmpty = false;
        for (size_t d = 0; d < dims.size(); ++d) {
          Range r = evaluateInterval(s.regions[w][in]->at(d), s.symbolValues);
          r.lo = std::max<int64_t>(r.lo, 0);
          r.hi = std::min<int64_t>(r.hi, dims[d]);
          symEmpty |= r.lo >= r.hi;
          sym.push_back(r);
        }
        if (concreteEmpty) {
          if (exact) {
            EXPECT_TRUE(symEmpty);
          }
          continue;
        }
        ASSERT_FALSE(symEmpty);
        for (size_t d = 0; d < dims.size(); ++d) {
          EXPECT_LE(sym[d].lo, c[d].lo) << "dim " << d;
          EXPECT_GE(sym[d].hi, c[d].hi) << "dim " << d;
          if (exact) {
            EXPECT_EQ(sym[d].lo, c[d].lo) << "dim " << d;
            EXPECT_EQ(sym[d].hi, c[d].hi) << "dim " << d;
          }
        }
      }
    }
  }
}

} // namespace

TEST(TDLIntervals, PartsAgreeWithConcreteAnalysis) {
  for (unsigned g : {2u, 3u, 4u}) {
    SCOPED_TRACE("g = " + std::to_string(g));
    // Every split extent is 12 (divisible by 2, 3, 4): regions are exact.
    checkParts(mustInstantiate(testLib(), "Conv1D",
                               {f32({12, 12, 23}), f32({12, 12, 12})}),
               g, true);
    checkParts(mustInstantiate(testLib(), "Conv1D",
                               {f32({12, 12, 45}), f32({12, 12, 12})},
                               {{"stride", AttrValue::ofInt(3)}}),
               g, true);
    // Unsplit extents need not be divisible.
    checkParts(mustInstantiate(testLib(), "Conv1D",
                               {f32({12, 5, 29}), f32({12, 5, 7})},
                               {{"stride", AttrValue::ofInt(2)}}),
               g, false);
    checkParts(mustInstantiate(testLib(), "ShiftTwo", {f32({14})}), g, true);
    checkParts(mustInstantiate(testLib(), "Down", {f32({24})}), g, true);
    checkParts(mustInstantiate(SpecLibrary::builtin(), "Gemm",
                               {f32({12, 24}), f32({24, 12}), std::nullopt}),
               g, true);
    checkParts(mustInstantiate(nonAffineLib(), "Take",
                               {f32({10, 12}), i64({12})}),
               g, false);
    checkParts(mustInstantiate(nonAffineLib(), "Flat", {f32({3, 8})}), g,
               false);
  }
}

TEST(TDLIntervals, Conv1DThreeWorkersHalo) {
  // x split into 3: worker 1 needs data[.., X/3 : 2X/3 + K - 1).
  OpInstance conv = mustInstantiate(testLib(), "Conv1D",
                                    {f32({2, 3, 14}), f32({4, 3, 3})});
  auto st = analyzeStrategies(conv, 3);
  ASSERT_TRUE(bool(st));
  const Strategy &x = (*st)[2];
  ASSERT_EQ(x.symbols, (std::vector<std::string>{"X0", "X1", "X2", "CI", "K"}));
  expectInterval(x.regions[1][0]->at(2), {0, 0, 1.0 / 3, 0, 0}, 0,
                 {0, 0, 2.0 / 3, 0, 1}, -1);
  // Cached per (signature, parts): the 2-part analysis is unchanged.
  auto two = analyzeStrategies(conv);
  ASSERT_TRUE(bool(two));
  EXPECT_EQ((*two)[2].parts, 2u);
  EXPECT_EQ((*two)[2].regions.size(), 2u);
}
