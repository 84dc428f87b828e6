//===- ExprInterpreterTest.cpp - runCompute's expression interpreter ------===//
//
// Hand-built programs: element-wise, reductions (whole and partial ranges),
// padding reads, i64 and bool outputs, local boxes, and the errors (corrupt
// programs, reads outside the local buffer).
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"
#include "tofu/runtime/ComputeKernel.h"
#include "tofu/runtime/ExprFreeVariables.h"
#include "tofu/runtime/ExprProgramCheck.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>

using namespace tofu::runtime;
using namespace tofu::plan;
using tofu::test::randomFloats;

namespace {

/// Builds programs node by node.
struct Builder {
  ExprProgram p;
  int32_t var(int64_t extent) {
    p.varExtents.push_back(extent);
    return static_cast<int32_t>(p.varExtents.size() - 1);
  }
  int32_t add(ExprNode n) {
    p.nodes.push_back(std::move(n));
    return static_cast<int32_t>(p.nodes.size() - 1);
  }
  int32_t c(double v) {
    ExprNode n;
    n.kind = ExprNode::Kind::Const;
    n.value = v;
    return add(n);
  }
  int32_t v(int32_t var) {
    ExprNode n;
    n.kind = ExprNode::Kind::Var;
    n.var = var;
    return add(n);
  }
  int32_t at(int32_t input, std::vector<int32_t> idx) {
    ExprNode n;
    n.kind = ExprNode::Kind::Access;
    n.input = input;
    n.operands = std::move(idx);
    return add(n);
  }
  int32_t bin(BinaryOp op, int32_t a, int32_t b) {
    ExprNode n;
    n.kind = ExprNode::Kind::Binary;
    n.binary = op;
    n.operands = {a, b};
    return add(n);
  }
  int32_t call(Function f, std::vector<int32_t> ops) {
    ExprNode n;
    n.kind = ExprNode::Kind::Call;
    n.function = f;
    n.operands = std::move(ops);
    return add(n);
  }
  int32_t reduce(Reducer r, int32_t body, std::vector<int32_t> vars) {
    ExprNode n;
    n.kind = ExprNode::Kind::Reduce;
    n.reducer = r;
    n.operands = {body};
    n.vars = std::move(vars);
    return add(n);
  }
  ExprProgram done(int32_t root, std::vector<int32_t> outVars,
                   std::vector<int32_t> top = {}) {
    p.root = root;
    p.outputVars = std::move(outVars);
    p.topReductionVars = std::move(top);
    return p;
  }
};

/// Y[m, n] = sum_k A[m, k] * B[k, n].
ExprProgram matmulProgram(int64_t M, int64_t N, int64_t K) {
  Builder b;
  int32_t m = b.var(M), n = b.var(N), k = b.var(K);
  int32_t vm = b.v(m), vn = b.v(n), vk = b.v(k);
  int32_t prod = b.bin(BinaryOp::Mul, b.at(0, {vm, vk}), b.at(1, {vk, vn}));
  return b.done(b.reduce(Reducer::Sum, prod, {k}), {m, n}, {k});
}

TEST(ExprInterpreter, ElementwiseWithBroadcastConstant) {
  // Y[i, j] = max(X[i, j], 0) * 2 + j
  Builder b;
  int32_t i = b.var(3), j = b.var(4);
  int32_t x = b.at(0, {b.v(i), b.v(j)});
  int32_t relu = b.call(Function::Max, {x, b.c(0)});
  int32_t y = b.bin(BinaryOp::Add, b.bin(BinaryOp::Mul, relu, b.c(2)), b.v(j));
  ExprProgram prog = b.done(y, {i, j});
  std::vector<float> X = randomFloats(12, 1), Y(12, -7);
  ComputePath used = ComputePath::Auto;
  ASSERT_EQ(runCompute("NoSuchKernel", {},
                       {TensorView::whole(X.data(), DType::F32, {3, 4})},
                       {TensorView::whole(Y.data(), DType::F32, {3, 4})},
                       {prog}, {}, ComputePath::Auto, &used),
            "");
  EXPECT_EQ(used, ComputePath::Interpreter);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c)
      EXPECT_FLOAT_EQ(Y[r * 4 + c], std::max(X[r * 4 + c], 0.0f) * 2 + c);
}

TEST(ExprInterpreter, MatMulWholeAndPartialRanges) {
  const int64_t M = 5, N = 6, K = 7;
  ExprProgram prog = matmulProgram(M, N, K);
  std::vector<float> A = randomFloats(M * K, 2), B = randomFloats(K * N, 3);
  auto ref = [&](int64_t m, int64_t n, int64_t k0, int64_t k1) {
    double s = 0;
    for (int64_t k = k0; k < k1; ++k)
      s += double(A[m * K + k]) * B[k * N + n];
    return s;
  };
  std::vector<float> Y(M * N);
  ASSERT_EQ(runCompute("X", {},
                       {TensorView::whole(A.data(), DType::F32, {M, K}),
                        TensorView::whole(B.data(), DType::F32, {K, N})},
                       {TensorView::whole(Y.data(), DType::F32, {M, N})},
                       {prog}, {}),
            "");
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      EXPECT_NEAR(Y[m * N + n], ref(m, n, 0, K), 1e-5);

  // A device holding rows [1, 4) of Y, columns [2, 6) and k in [3, 6):
  // its inputs are the matching local boxes.
  Box aBox{{1, 3}, {4, 6}}, bBox{{3, 2}, {6, 6}}, yBox{{1, 2}, {4, 6}};
  std::vector<float> aLoc, bLoc;
  for (int64_t m = 1; m < 4; ++m)
    for (int64_t k = 3; k < 6; ++k)
      aLoc.push_back(A[m * K + k]);
  for (int64_t k = 3; k < 6; ++k)
    for (int64_t n = 2; n < 6; ++n)
      bLoc.push_back(B[k * N + n]);
  std::vector<float> yLoc(12, -7);
  ASSERT_EQ(
      runCompute("X", {},
                 {TensorView::ofRegion(aLoc.data(), DType::F32, aBox, {M, K}),
                  TensorView::ofRegion(bLoc.data(), DType::F32, bBox, {K, N})},
                 {TensorView::ofRegion(yLoc.data(), DType::F32, yBox, {M, N})},
                 {prog}, {{{3, 6}}}),
      "");
  for (int64_t m = 1; m < 4; ++m)
    for (int64_t n = 2; n < 6; ++n)
      EXPECT_NEAR(yLoc[(m - 1) * 4 + (n - 2)], ref(m, n, 3, 6), 1e-5);

  // The same share without the reduction range reads outside the local
  // boxes: a clear error, not a wrong value.
  std::string err = runCompute(
      "X", {},
      {TensorView::ofRegion(aLoc.data(), DType::F32, aBox, {M, K}),
       TensorView::ofRegion(bLoc.data(), DType::F32, bBox, {K, N})},
      {TensorView::ofRegion(yLoc.data(), DType::F32, yBox, {M, N})}, {prog},
      {});
  EXPECT_NE(err.find("outside the local buffer"), std::string::npos) << err;
  EXPECT_NE(err.find("input 0"), std::string::npos) << err;
  EXPECT_NE(err.find("[1, 0]"), std::string::npos) << err;
}

TEST(ExprInterpreter, LargeMatMulIsFast) {
  const int64_t M = 64, N = 128, K = 128;
  ExprProgram prog = matmulProgram(M, N, K);
  std::vector<float> A = randomFloats(M * K, 4), B = randomFloats(K * N, 5),
                     Y(M * N);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(runCompute("X", {},
                       {TensorView::whole(A.data(), DType::F32, {M, K}),
                        TensorView::whole(B.data(), DType::F32, {K, N})},
                       {TensorView::whole(Y.data(), DType::F32, {M, N})},
                       {prog}, {}),
            "");
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - t0)
                       .count();
  EXPECT_LT(seconds, 0.5);
  double s = 0;
  for (int64_t k = 0; k < K; ++k)
    s += double(A[5 * K + k]) * B[k * N + 7];
  EXPECT_NEAR(Y[5 * N + 7], s, 1e-4);
}

TEST(ExprInterpreter, PaddingReadsZero) {
  // 1-D convolution with pad 1: Y[x] = sum_d X[x + d - 1] * W[d].
  Builder b;
  int32_t x = b.var(5), d = b.var(3);
  int32_t idx = b.bin(BinaryOp::Sub, b.bin(BinaryOp::Add, b.v(x), b.v(d)),
                      b.c(1));
  int32_t body = b.bin(BinaryOp::Mul, b.at(0, {idx}), b.at(1, {b.v(d)}));
  ExprProgram prog = b.done(b.reduce(Reducer::Sum, body, {d}), {x}, {d});
  std::vector<float> X = {1, 2, 3, 4, 5}, W = {1, 10, 100}, Y(5);
  ASSERT_EQ(runCompute("X", {},
                       {TensorView::whole(X.data(), DType::F32, {5}),
                        TensorView::whole(W.data(), DType::F32, {3})},
                       {TensorView::whole(Y.data(), DType::F32, {5})}, {prog},
                       {}),
            "");
  EXPECT_EQ(Y, (std::vector<float>{210, 321, 432, 543, 54}));

  // Device computing Y[2, 4) holds X[1, 5) (a halo of one on each side).
  std::vector<float> xLoc = {2, 3, 4, 5}, yLoc(2);
  ASSERT_EQ(runCompute("X", {},
                       {TensorView::ofRegion(xLoc.data(), DType::F32,
                                             {{1}, {5}}, {5}),
                        TensorView::whole(W.data(), DType::F32, {3})},
                       {TensorView::ofRegion(yLoc.data(), DType::F32,
                                             {{2}, {4}}, {5})},
                       {prog}, {}),
            "");
  EXPECT_EQ(yLoc, (std::vector<float>{432, 543}));
}

TEST(ExprInterpreter, NestedReductionsMaxAndFloorIndex) {
  // Y[i] = max_j (sum_k X[i, j, k]) + X[i, floor(i / 2) , 0]
  Builder b;
  int32_t i = b.var(4), j = b.var(3), k = b.var(2);
  int32_t inner = b.reduce(Reducer::Sum, b.at(0, {b.v(i), b.v(j), b.v(k)}),
                           {k});
  int32_t outer = b.reduce(Reducer::Max, inner, {j});
  int32_t half = b.bin(BinaryOp::Div, b.v(i), b.c(2)); // floor by Access
  int32_t extra = b.at(0, {b.v(i), half, b.c(0)});
  ExprProgram prog = b.done(b.bin(BinaryOp::Add, outer, extra), {i});
  std::vector<float> X = randomFloats(24, 6), Y(4);
  ASSERT_EQ(runCompute("X", {},
                       {TensorView::whole(X.data(), DType::F32, {4, 3, 2})},
                       {TensorView::whole(Y.data(), DType::F32, {4})}, {prog},
                       {}),
            "");
  for (int ii = 0; ii < 4; ++ii) {
    double best = -INFINITY;
    for (int jj = 0; jj < 3; ++jj)
      best = std::max(best, double(X[ii * 6 + jj * 2]) + X[ii * 6 + jj * 2 + 1]);
    EXPECT_NEAR(Y[ii], best + X[ii * 6 + (ii / 2) * 2], 1e-5);
  }
}

TEST(ExprInterpreter, InnerReductionsAreHoistedToTheirVariables) {
  // Y[i, j] = exp(X[i, j] - max_t X[i, t]) / sum_u exp(X[i, u] - max_t X[i, t])
  // (the max reads only i: one loop per row, also inside sum_u), and
  // L = sum_n X[n, 0] / sum_m 1 over a share [1, 3) of n (the count reads
  // no variable: it runs once per call, in block 0).
  Builder b;
  int32_t i = b.var(3), j = b.var(4), t = b.var(4), u = b.var(4);
  int32_t rowMax = b.reduce(Reducer::Max, b.at(0, {b.v(i), b.v(t)}), {t});
  int32_t shifted = b.bin(BinaryOp::Sub, b.at(0, {b.v(i), b.v(u)}), rowMax);
  int32_t denom =
      b.reduce(Reducer::Sum, b.call(Function::Exp, {shifted}), {u});
  int32_t num = b.call(Function::Exp,
                       {b.bin(BinaryOp::Sub, b.at(0, {b.v(i), b.v(j)}), rowMax)});
  ExprProgram softmax = b.done(b.bin(BinaryOp::Div, num, denom), {i, j});
  std::vector<std::vector<int32_t>> free = freeVariablesOfNodes(softmax);
  EXPECT_EQ(free[rowMax], std::vector<int32_t>{i});
  EXPECT_EQ(free[denom], std::vector<int32_t>{i});
  EXPECT_EQ(free[softmax.root], (std::vector<int32_t>{i, j}));

  Builder l;
  int32_t n = l.var(4), m = l.var(4);
  int32_t count = l.reduce(Reducer::Sum, l.c(1), {m});
  int32_t body = l.bin(BinaryOp::Div, l.at(0, {l.v(n), l.c(0)}), count);
  ExprProgram loss = l.done(l.reduce(Reducer::Sum, body, {n}), {}, {n});
  EXPECT_TRUE(freeVariablesOfNodes(loss)[count].empty());

  std::vector<float> X = randomFloats(12, 7), Y(12), L(1);
  ASSERT_EQ(runCompute("Softmax", {},
                       {TensorView::whole(X.data(), DType::F32, {3, 4})},
                       {TensorView::whole(Y.data(), DType::F32, {3, 4})},
                       {softmax}, {}),
            "");
  for (int r = 0; r < 3; ++r) {
    double mx = -INFINITY, sum = 0;
    for (int c = 0; c < 4; ++c)
      mx = std::max(mx, double(X[r * 4 + c]));
    for (int c = 0; c < 4; ++c)
      sum += std::exp(X[r * 4 + c] - mx);
    for (int c = 0; c < 4; ++c)
      EXPECT_NEAR(Y[r * 4 + c], std::exp(X[r * 4 + c] - mx) / sum, 1e-6);
  }
  ASSERT_EQ(runCompute("Loss", {},
                       {TensorView::whole(X.data(), DType::F32, {3, 4})},
                       {TensorView::whole(L.data(), DType::F32, {})}, {loss},
                       {ReductionRanges{{1, 3}}}),
            "");
  EXPECT_NEAR(L[0], (double(X[4]) + X[8]) / 4, 1e-6);
}

TEST(ExprInterpreter, NegativeIndexFloorsToPadding) {
  // Y[i] = X[(i - 1.5)]: floor(-0.5) = -1 is padding, floor(0.5) = 0.
  Builder b;
  int32_t i = b.var(3);
  int32_t idx = b.bin(BinaryOp::Sub, b.v(i), b.c(0.5));
  ExprProgram prog = b.done(b.at(0, {idx}), {i});
  std::vector<float> X = {7, 8, 9}, Y(3);
  ASSERT_EQ(runCompute("X", {}, {TensorView::whole(X.data(), DType::F32, {3})},
                       {TensorView::whole(Y.data(), DType::F32, {3})}, {prog},
                       {}),
            "");
  EXPECT_EQ(Y, (std::vector<float>{0, 7, 8}));
}

TEST(ExprInterpreter, IntegerAndBoolOutputs) {
  // Cast-like: Y[i] = floor(X[i]) as i64; Z[i] = X[i] > 0 as bool; reads
  // i64 and bool inputs exactly.
  std::vector<int64_t> I = {int64_t(1) << 52, -3, 5};
  std::vector<uint8_t> Bv = {1, 0, 1};
  Builder b;
  int32_t i = b.var(3);
  int32_t sum = b.bin(BinaryOp::Add, b.at(0, {b.v(i)}), b.at(1, {b.v(i)}));
  ExprProgram toInt = b.done(b.call(Function::Floor, {sum}), {i});
  Builder b2;
  int32_t i2 = b2.var(3);
  ExprProgram toBool =
      b2.done(b2.bin(BinaryOp::Gt, b2.at(0, {b2.v(i2)}), b2.c(0)), {i2});
  std::vector<int64_t> Y(3);
  std::vector<uint8_t> Z(3, 7);
  std::vector<TensorView> in = {TensorView::whole(I.data(), DType::I64, {3}),
                                TensorView::whole(Bv.data(), DType::Bool, {3})};
  ASSERT_EQ(runCompute("X", {}, in,
                       {TensorView::whole(Y.data(), DType::I64, {3}),
                        TensorView::whole(Z.data(), DType::Bool, {3})},
                       {toInt, toBool}, {}),
            "");
  EXPECT_EQ(Y, (std::vector<int64_t>{(int64_t(1) << 52) + 1, -3, 6}));
  EXPECT_EQ(Z, (std::vector<uint8_t>{1, 0, 1}));
}

TEST(ExprInterpreter, AbsentInputReadsZeroAndSelect) {
  // Y[i] = Select(i < 1, X[i], B[i]) with B absent.
  Builder b;
  int32_t i = b.var(2);
  int32_t cond = b.bin(BinaryOp::Lt, b.v(i), b.c(1));
  int32_t y = b.call(Function::Select, {cond, b.at(0, {b.v(i)}),
                                        b.at(1, {b.v(i)})});
  ExprProgram prog = b.done(y, {i});
  std::vector<float> X = {3, 4}, Y(2, -7);
  ASSERT_EQ(runCompute("X", {},
                       {TensorView::whole(X.data(), DType::F32, {2}),
                        TensorView::absent()},
                       {TensorView::whole(Y.data(), DType::F32, {2})}, {prog},
                       {}),
            "");
  EXPECT_EQ(Y, (std::vector<float>{3, 0}));
}

TEST(ExprInterpreter, ScalarOutputAndConstantHoisting) {
  // loss = -(1 / 4) * sum_i X[i] * X[0]
  Builder b;
  int32_t i = b.var(4);
  int32_t body = b.bin(BinaryOp::Mul, b.at(0, {b.v(i)}), b.at(0, {b.c(0)}));
  int32_t s = b.reduce(Reducer::Sum, body, {i});
  ExprProgram prog = b.done(b.bin(BinaryOp::Mul, b.c(-0.25), s), {}, {i});
  std::vector<float> X = {1, 2, 3, 4};
  float y = 0;
  ASSERT_EQ(runCompute("X", {}, {TensorView::whole(X.data(), DType::F32, {4})},
                       {TensorView::whole(&y, DType::F32, {})}, {prog}, {}),
            "");
  EXPECT_FLOAT_EQ(y, -2.5f);
  ASSERT_EQ(runCompute("X", {}, {TensorView::whole(X.data(), DType::F32, {4})},
                       {TensorView::whole(&y, DType::F32, {})}, {prog},
                       {{{2, 4}}}),
            "");
  EXPECT_FLOAT_EQ(y, -1.75f);
}

TEST(ExprInterpreter, CorruptProgramsAreErrors) {
  ExprProgram good = matmulProgram(2, 2, 2);
  std::vector<float> A(4), B(4), Y(4);
  auto run = [&](const ExprProgram &p, std::vector<ReductionRanges> r = {}) {
    return runCompute("X", {},
                      {TensorView::whole(A.data(), DType::F32, {2, 2}),
                       TensorView::whole(B.data(), DType::F32, {2, 2})},
                      {TensorView::whole(Y.data(), DType::F32, {2, 2})}, {p},
                      r);
  };
  ASSERT_EQ(run(good), "");
  auto expectError = [&](ExprProgram p, const std::string &what,
                         std::vector<ReductionRanges> r = {}) {
    std::string err = run(p, r);
    EXPECT_NE(err.find(what), std::string::npos) << err;
  };
  ExprProgram p = good;
  p.nodes[3].operands = {3, 4}; // access uses itself
  expectError(p, "not an earlier node");
  p = good;
  p.root = 99;
  expectError(p, "root 99");
  p = good;
  p.nodes[0].var = 7;
  expectError(p, "out of range");
  p = good;
  p.nodes[3].operands.pop_back();
  expectError(p, "has rank 2");
  p = good;
  p.nodes[3].input = 2;
  expectError(p, "input 2 is out of range");
  p = good;
  p.nodes.back().vars = {0};
  expectError(p, "is an output variable");
  p = good;
  p.nodes[5].binary = static_cast<BinaryOp>(200);
  expectError(p, "unknown binary operator");
  p = good;
  p.nodes.back().kind = ExprNode::Kind::Neg; // k is now unbound
  expectError(p, "outside any reduction");
  p = good;
  p.outputVars = {0};
  expectError(p, "output variables for an output of rank 2");
  expectError(good, "reduction range", {{{0, 3}}});
  expectError(good, "reduction range", {{{0, 1}, {0, 1}}});
  p = good;
  p.varExtents[0] = 3;
  expectError(p, "global extent 2");
}

TEST(ComputeKernel, NoKernelNoProgram) {
  float x = 0, y = 0;
  std::string err =
      runCompute("Frobnicate", {}, {TensorView::whole(&x, DType::F32, {})},
                 {TensorView::whole(&y, DType::F32, {})}, {}, {});
  EXPECT_NE(err.find("Frobnicate"), std::string::npos) << err;
  EXPECT_NE(err.find("no expression program"), std::string::npos) << err;
}

TEST(ComputeKernel, BadViewsAreErrors) {
  float x[4] = {}, y[4] = {};
  TensorView bad = TensorView::whole(x, DType::F32, {4});
  bad.lo = {2};
  std::string err = runCompute("Relu", {}, {bad},
                               {TensorView::whole(y, DType::F32, {4})}, {}, {});
  EXPECT_NE(err.find("outside the global extent"), std::string::npos) << err;
  err = runCompute("Relu", {}, {TensorView::whole(x, DType::F32, {4})},
                   {TensorView::whole(y, DType::F32, {4})}, {}, {},
                   ComputePath::Interpreter);
  EXPECT_NE(err.find("no expression program"), std::string::npos) << err;
}

TEST(ComputeKernel, NativeAndInterpreterAgree) {
  // Relu natively and from a program.
  Builder b;
  int32_t i = b.var(6);
  ExprProgram prog =
      b.done(b.call(Function::Max, {b.at(0, {b.v(i)}), b.c(0)}), {i});
  std::vector<float> X = randomFloats(6, 9), Y1(6), Y2(6);
  ComputePath used;
  ASSERT_EQ(runCompute("Relu", {}, {TensorView::whole(X.data(), DType::F32, {6})},
                       {TensorView::whole(Y1.data(), DType::F32, {6})}, {prog},
                       {}, ComputePath::Auto, &used),
            "");
  EXPECT_EQ(used, ComputePath::Native);
  ASSERT_EQ(runCompute("Relu", {}, {TensorView::whole(X.data(), DType::F32, {6})},
                       {TensorView::whole(Y2.data(), DType::F32, {6})}, {prog},
                       {}, ComputePath::Interpreter, &used),
            "");
  EXPECT_EQ(used, ComputePath::Interpreter);
  EXPECT_EQ(Y1, Y2);
}

} // namespace
