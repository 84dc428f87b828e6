//===- EvaluatorTest.cpp - TDL reference evaluator vs hand values ---------===//
#include "TDLTestSupport.h"

#include <cmath>
#include <limits>

using namespace tofu::tdl;
using namespace tofu::tdl::test;

namespace {

const SpecLibrary &lib() { return SpecLibrary::builtin(); }

std::vector<double> run(llvm::StringRef op, std::vector<DenseTensor> inputs,
                        const AttrMap &attrs = {},
                        std::vector<bool> present = {}) {
  std::vector<std::optional<TensorType>> types;
  std::vector<const DenseTensor *> ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool p = present.empty() || present[i];
    types.push_back(p ? std::optional<TensorType>(inputs[i].type)
                      : std::nullopt);
    ptrs.push_back(p ? &inputs[i] : nullptr);
  }
  OpInstance inst = mustInstantiate(lib(), op, types, attrs);
  auto out = evaluate(inst, ptrs);
  if (!out) {
    ADD_FAILURE() << llvm::toString(out.takeError());
    return {};
  }
  return (*out)[0].data;
}

void expectNear(const std::vector<double> &got,
                const std::vector<double> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-12) << "element " << i;
}

} // namespace

TEST(TDLEvaluator, MatMulAndTranspose) {
  auto a = tensor(f32({2, 3}), {1, 2, 3, 4, 5, 6});
  auto b = tensor(f32({3, 2}), {7, 8, 9, 10, 11, 12});
  expectNear(run("MatMul", {a, b}), {58, 64, 139, 154});
  expectNear(run("Transpose", {a}), {1, 4, 2, 5, 3, 6});
}

TEST(TDLEvaluator, Gemm) {
  auto a = tensor(f32({2, 3}), {1, 2, 3, 4, 5, 6});
  auto b = tensor(f32({3, 2}), {7, 8, 9, 10, 11, 12});
  auto c = tensor(f32({2}), {1, -1});
  AttrMap attrs{{"alpha", AttrValue::ofFloat(2)},
                {"beta", AttrValue::ofFloat(0.5)}};
  expectNear(run("Gemm", {a, b, c}, attrs),
             {116.5, 127.5, 278.5, 307.5});
  // Absent C reads 0.
  expectNear(run("Gemm", {a, b, c}, attrs, {true, true, false}),
             {116, 128, 278, 308});
  // transA, transB: A^T is [3, 2], B^T is [2, 3]: op(A) op(B) = [3, 3].
  auto at = tensor(f32({2, 3}), {1, 2, 3, 4, 5, 6});
  auto bt = tensor(f32({3, 2}), {1, 0, 0, 1, 1, 1});
  expectNear(run("Gemm", {at, bt},
                 {{"transA", AttrValue::ofInt(1)},
                  {"transB", AttrValue::ofInt(1)}}),
             // A^T = [[1,4],[2,5],[3,6]], B^T = [[1,0,1],[0,1,1]]
             {1, 4, 5, 2, 5, 7, 3, 6, 9});
  // Full C broadcast from [2, 1].
  auto c21 = tensor(f32({2, 1}), {10, 20});
  expectNear(run("Gemm", {a, b, c21}), {68, 74, 159, 174});
}

TEST(TDLEvaluator, ElementwiseOps) {
  auto x = tensor(f32({2, 2}), {-1, 2, 0, -3});
  auto y = tensor(f32({2}), {10, 20});
  expectNear(run("Add", {x, y}), {9, 22, 10, 17});
  expectNear(run("Relu", {x}), {0, 2, 0, 0});
  auto dy = tensor(f32({2, 2}), {5, 6, 7, 8});
  expectNear(run("ReluGrad", {dy, x}), {0, 6, 0, 0});
  expectNear(run("Scale", {x}, {{"alpha", AttrValue::ofFloat(-2)}}),
             {2, -4, 0, 6});
  expectNear(run("Ones", {x}), {1, 1, 1, 1});
  expectNear(run("SGDUpdate", {x, dy}, {{"lr", AttrValue::ofFloat(0.5)}}),
             {-3.5, -1, -3.5, -7});
  expectNear(run("SGDUpdate", {x, dy}), {-1.5, 1.4, -0.7, -3.8});
  expectNear(run("BiasGrad", {dy}), {12, 14});
  // Rank 0.
  expectNear(run("Relu", {tensor(f32({}), {-4})}), {0});
}

// tdl-specs/logical.tdl: two's complement bit operations on negative
// values and the wrap of an unsigned BitwiseNot / BitShift at the store,
// and the logical ops (numpy's values).
TEST(TDLEvaluator, BitAndLogicalOps) {
  auto a = tensor(i64({6}), {-6, -6, 12, 0, -1, (1LL << 52) + 5});
  auto b = tensor(i64({6}), {3, -3, 10, -7, -1, (1LL << 52) + 3});
  expectNear(run("BitwiseAnd", {a, b}),
             {2, -8, 8, 0, -1, double((1LL << 52) + 1)});
  expectNear(run("BitwiseOr", {a, b}),
             {-5, -1, 14, -7, -1, double((1LL << 52) + 7)});
  expectNear(run("BitwiseXor", {a, b}), {-7, 7, 6, -7, 0, 6});
  expectNear(run("BitwiseNot", {a}),
             {5, 5, -13, -1, 0, double(-(1LL << 52) - 6)});
  TensorType u8{{3}, ElemType::U8};
  expectNear(run("BitwiseNot", {tensor(u8, {5, 0, 255})}), {250, 255, 0});
  expectNear(run("BitShift", {tensor(u8, {5, 200, 255}), tensor(u8, {1, 1, 4})},
                 {{"direction", AttrValue::ofString("LEFT")}}),
             {10, 144, 240});
  expectNear(run("BitShift", {tensor(u8, {5, 200, 255}), tensor(u8, {1, 3, 8})},
                 {{"direction", AttrValue::ofString("RIGHT")}}),
             {2, 25, 0});
  TensorType b4{{4}, ElemType::Bool};
  auto p = tensor(b4, {0, 0, 1, 1}), q = tensor(b4, {0, 1, 0, 1});
  expectNear(run("And", {p, q}), {0, 0, 0, 1});
  expectNear(run("Or", {p, q}), {0, 1, 1, 1});
  expectNear(run("Xor", {p, q}), {0, 1, 1, 0});
  expectNear(run("Not", {p}), {1, 1, 0, 0});
  double inf = std::numeric_limits<double>::infinity();
  auto x = tensor(f32({4}), {-inf, inf, std::nan(""), 3.4e38});
  expectNear(run("IsInf", {x}), {1, 1, 0, 0});
  expectNear(run("IsInf", {x}, {{"detect_negative", AttrValue::ofInt(0)}}),
             {0, 1, 0, 0});
  expectNear(run("IsNaN", {x}), {0, 0, 1, 0});
}

// tdl-specs/hyperbolic.tdl vs the C library, near 0 (the series) and away
// from it, to 1e-15 relative.
TEST(TDLEvaluator, Hyperbolic) {
  std::vector<double> xs = {-20, -2.5, -0.5, -0.3, -1e-3, -2e-5, 0, 1e-9,
                            9.99e-4, 0.4999, 0.7, 3, 20};
  auto x = tensor(TensorType{{int64_t(xs.size())}, ElemType::F64}, xs);
  struct Fn {
    const char *op;
    double (*f)(double);
  };
  for (Fn fn : {Fn{"Sinh", std::sinh}, Fn{"Cosh", std::cosh},
                Fn{"Asinh", std::asinh}}) {
    std::vector<double> got = run(fn.op, {x});
    ASSERT_EQ(got.size(), xs.size());
    for (size_t k = 0; k < xs.size(); ++k)
      EXPECT_NEAR(got[k], fn.f(xs[k]), 1e-15 * std::fabs(fn.f(xs[k])))
          << fn.op << "(" << xs[k] << ")";
  }
  std::vector<double> ys = {-0.999, -0.5, -1e-3, -3e-7, 0, 5e-4, 0.25, 0.9};
  std::vector<double> got = run("Atanh", {tensor(TensorType{{8}, ElemType::F64}, ys)});
  for (size_t k = 0; k < ys.size(); ++k)
    EXPECT_NEAR(got[k], std::atanh(ys[k]), 1e-15 * std::fabs(std::atanh(ys[k])))
        << "atanh(" << ys[k] << ")";
  std::vector<double> zs = {1, 1 + 1e-12, 1.5, 10, 1e6, 1e10, 1e300};
  got = run("Acosh", {tensor(TensorType{{7}, ElemType::F64}, zs)});
  for (size_t k = 0; k < zs.size(); ++k)
    EXPECT_NEAR(got[k], std::acosh(zs[k]), 1e-15 * std::fabs(std::acosh(zs[k])))
        << "acosh(" << zs[k] << ")";
  std::vector<double> big = {-1e300, -1e10, 1e10, 1e300};
  got = run("Asinh", {tensor(TensorType{{4}, ElemType::F64}, big)});
  for (size_t k = 0; k < big.size(); ++k)
    EXPECT_NEAR(got[k], std::asinh(big[k]), 1e-15 * std::fabs(std::asinh(big[k])))
        << "asinh(" << big[k] << ")";
}

TEST(TDLEvaluator, SoftmaxCrossEntropy) {
  auto scores = tensor(f32({2, 3}), {1, 2, 3, 1000, 0, 0});
  auto labels = tensor(i64({2}), {2, 1});
  double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  double lse1 = 1000 + std::log(1 + 2 * std::exp(-1000.0));
  double want = -((3 - lse0) + (0 - lse1)) / 2;
  expectNear(run("SoftmaxCrossEntropyLoss", {scores, labels}), {want});

  auto dloss = tensor(f32({}), {2});
  std::vector<double> grad =
      run("SoftmaxCrossEntropyLossGrad", {dloss, scores, labels});
  std::vector<double> wantGrad;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c) {
      double s = scores.data[n * 3 + c];
      double lse = n == 0 ? lse0 : lse1;
      double p = std::exp(s - lse);
      wantGrad.push_back(2 * (p - (labels.data[n] == c ? 1 : 0)) / 2);
    }
  expectNear(grad, wantGrad);
}

TEST(TDLEvaluator, InputChecks) {
  OpInstance inst =
      mustInstantiate(lib(), "MatMul", {f32({2, 3}), f32({3, 2})});
  auto a = tensor(f32({2, 3}), {1, 2, 3});
  auto b = tensor(f32({3, 2}), {1, 2, 3, 4, 5, 6});
  std::vector<const DenseTensor *> in{&a, &b};
  auto out = evaluate(inst, in);
  ASSERT_FALSE(bool(out));
  EXPECT_EQ(llvm::toString(out.takeError()),
            "evaluate MatMul: input A holds 3 values, expected 6");
}
