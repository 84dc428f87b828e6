//===- GradientReduceExtraTest.cpp - tdl-specs/reduce-extra.tdl -----------===//
//
// The gradient rules of ReduceMin, ReduceProd, ReduceL1, ReduceL2,
// ReduceSumSquare, ReduceLogSum and ReduceLogSumExp checked by central
// differences in float64 (GradientCheck.h), and their values and
// subgradients where PyTorch defines them at a kink (a zero in ReduceProd,
// a zero norm in ReduceL2, tied minima, a group of -inf in ReduceLogSumExp).
//
//===----------------------------------------------------------------------===//
#include "GradientCheck.h"

#include <cmath>
#include <limits>

using namespace tofu::tdl;
using namespace tofu::tdl::test;

namespace {

AttrValue I(int64_t v) { return AttrValue::ofInt(v); }

std::vector<double> run(llvm::StringRef op, const std::vector<DenseTensor> &in,
                        const AttrMap &attrs = {}) {
  return evaluateFirstOutput(op, in, attrs);
}

const char *const kOps[] = {"ReduceMin",       "ReduceProd",   "ReduceL1",
                            "ReduceL2",        "ReduceSumSquare",
                            "ReduceLogSumExp"};

} // namespace

TEST(TDLGradientReduceExtra, EveryAxesForm) {
  for (const char *op : kOps) {
    SCOPED_TRACE(op);
    // Random values in [-1, 1): no ties, no zeros (L1's kink).
    GradProblem p{op, {f32({2, 3, 4})}, {{"axes", ints({1})}}};
    p.awayFromZero = 0.05;
    checkGradientFD(p);
    p.attrs = {{"axes", ints({-1, 0})}, {"keepdims", I(0)}};
    checkGradientFD(p);
    p.types = {f32({3, 2})};
    p.attrs = {};
    checkGradientFD(p);
    p.attrs = {{"keepdims", I(0)}};
    checkGradientFD(p);
    p.attrs = {{"noop_with_empty_axes", I(1)}};
    checkGradientFD(p);
  }
  // ReduceLogSum needs a positive sum.
  checkGradientFD({"ReduceLogSum", {f32({2, 3, 4})}, {{"axes", ints({1})}},
                   0.1, 1});
  checkGradientFD({"ReduceLogSum", {f32({2, 3})}, {{"keepdims", I(0)}}, 0.1, 1});
}

TEST(TDLGradientReduceExtra, Values) {
  DenseTensor x = tensor(f32({2, 3}), {1, -2, 3, 0, 4, -4});
  using V = std::vector<double>;
  EXPECT_EQ(run("ReduceMin", {x}, {{"axes", ints({1})}}), (V{-2, -4}));
  EXPECT_EQ(run("ReduceProd", {x}, {{"axes", ints({0})}}), (V{0, -8, -12}));
  EXPECT_EQ(run("ReduceL1", {x}, {{"keepdims", I(0)}}), (V{14}));
  EXPECT_EQ(run("ReduceSumSquare", {x}, {{"axes", ints({-1})}}), (V{14, 32}));
  V l2 = run("ReduceL2", {x}, {{"axes", ints({1})}});
  ASSERT_EQ(l2.size(), 2u);
  EXPECT_DOUBLE_EQ(l2[0], std::sqrt(14.0));
  EXPECT_DOUBLE_EQ(l2[1], std::sqrt(32.0));
  // Large values: the group's maximum keeps exp finite; a group of -inf
  // gives -inf (PyTorch's logsumexp), an empty-free group of finite values
  // the usual value.
  double inf = std::numeric_limits<double>::infinity();
  DenseTensor big = tensor(f32({2, 2}), {1000, 1000, -inf, -inf});
  V lse = run("ReduceLogSumExp", {big}, {{"axes", ints({1})}});
  ASSERT_EQ(lse.size(), 2u);
  EXPECT_DOUBLE_EQ(lse[0], 1000 + std::log(2.0));
  EXPECT_EQ(lse[1], -inf);
  EXPECT_DOUBLE_EQ(run("ReduceLogSum", {tensor(f32({2}), {1, 2})})[0],
                   std::log(3.0));
}

// PyTorch's prod backward: the product of the other elements (one zero:
// only it gets a gradient; two zeros: none).
TEST(TDLGradientReduceExtra, ProdWithZeros) {
  DenseTensor x = tensor(f32({3, 3}), {2, 0, 3, 0, 0, 5, 2, 3, 4});
  DenseTensor dy = tensor(f32({3, 1}), {1, 1, 2});
  EXPECT_EQ(run("ReduceProdGrad", {dy, x}, {{"axes", ints({1})}}),
            (std::vector<double>{0, 6, 0, 0, 0, 0, 24, 16, 12}));
}

// torch.norm backward masks a zero norm: 0, not 0/0.
TEST(TDLGradientReduceExtra, L2AtZeroNorm) {
  DenseTensor x = tensor(f32({2, 2}), {0, 0, 3, 4});
  DenseTensor y = tensor(f32({2, 1}), {0, 5});
  DenseTensor dy = tensor(f32({2, 1}), {7, 10});
  EXPECT_EQ(run("ReduceL2Grad", {dy, x, y}, {{"axes", ints({1})}}),
            (std::vector<double>{0, 0, 6, 8}));
}

// torch.amin: tied minima share dY evenly (ReduceMin's rule is
// ReduceMaxGrad, which compares X with Y); ReduceL1's sign is 0 at 0.
TEST(TDLGradientReduceExtra, MinTiesAndL1AtZero) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  OpInstance inst = mustInstantiate(lib, "ReduceMin", {f32({1, 4})},
                                    {{"axes", ints({1})}});
  auto g = expandGradient(lib, inst);
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  DenseTensor x = tensor(f32({1, 4}), {1, -2, -2, 5});
  DenseTensor y = tensor(f32({1, 1}), {-2});
  DenseTensor dy = tensor(f32({1, 1}), {4});
  EXPECT_EQ(run("ReduceMaxGrad", {dy, x, y}, {{"axes", ints({1})}}),
            (std::vector<double>{0, 2, 2, 0}));
  DenseTensor z = tensor(f32({1, 3}), {-1, 0, 2});
  DenseTensor dz = tensor(f32({1, 3}), {3, 3, 3});
  EXPECT_EQ(run("AbsGrad", {dz, z}), (std::vector<double>{-3, 0, 3}));
}
