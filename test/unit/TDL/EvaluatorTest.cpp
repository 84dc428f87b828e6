//===- EvaluatorTest.cpp - TDL reference evaluator vs hand values ---------===//
#include "TDLTestSupport.h"

#include <cmath>

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
