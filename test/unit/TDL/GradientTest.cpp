//===- GradientTest.cpp - every gradient rule vs finite differences -------===//
//
// For each rule: evaluate the forward op, expand its gradient with random
// output gradients w, evaluate the gradient calls, and compare each input
// gradient with central differences of f(x) = sum(output * w) in float64.
//
//===----------------------------------------------------------------------===//
#include "GradientCheck.h"
#include "TDLTestSupport.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <map>
#include <random>

using namespace tofu::tdl;
using namespace tofu::tdl::test;

namespace {

const SpecLibrary &lib() { return SpecLibrary::builtin(); }

int64_t count(const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// The shared finite-difference checker (GradientCheck.h).
using Problem = GradProblem;

GradExpansion checkGradient(const Problem &p, unsigned seed = 1) {
  return checkGradientFD(p, seed);
}

/// A problem whose input `index` is a const input holding `values`.
Problem withConst(std::string op, std::vector<std::optional<TensorType>> types,
                  unsigned index, std::vector<double> values) {
  Problem p{std::move(op), std::move(types)};
  p.constValues[index] = std::move(values);
  return p;
}

} // namespace

TEST(TDLGradient, MatMul) {
  checkGradient({"MatMul", {f32({3, 4}), f32({4, 2})}});
}

TEST(TDLGradient, Transpose) { checkGradient({"Transpose", {f32({3, 5})}}); }

TEST(TDLGradient, Add) { checkGradient({"Add", {f32({2, 3}), f32({2, 3})}}); }

TEST(TDLGradient, Relu) {
  Problem p{"Relu", {f32({3, 4})}};
  p.awayFromZero = 0.05;
  checkGradient(p);
}

TEST(TDLGradient, Scale) {
  checkGradient({"Scale", {f32({5})}, {{"alpha", AttrValue::ofFloat(-1.5)}}});
}

TEST(TDLGradient, SoftmaxCrossEntropyLoss) {
  Problem p{"SoftmaxCrossEntropyLoss", {f32({4, 3}), i64({4})}};
  GradExpansion g = checkGradient(p);
  EXPECT_FALSE(g.inputGrads[1].has_value()); // labels
  // The objective weighs both outputs (loss and log_prob), so dscores is
  // checked through LogSoftmaxGrad(dlog_prob) too.
  ASSERT_EQ(g.calls.size(), 3u);
  EXPECT_EQ(g.calls[1].op, "LogSoftmaxGrad");
  // Without an incoming gradient for log_prob the rule does not read it.
  OpInstance inst = mustInstantiate(lib(), "SoftmaxCrossEntropyLoss",
                                    {f32({4, 3}), i64({4})});
  auto lossOnly = expandGradient(lib(), inst, {true, false});
  ASSERT_TRUE(bool(lossOnly)) << llvm::toString(lossOnly.takeError());
  ASSERT_EQ(lossOnly->calls.size(), 1u);
  EXPECT_EQ(lossOnly->calls[0].op, "SoftmaxCrossEntropyLossGrad");
  // Every reduction, N-D scores, trainable class weights and an
  // ignore_index inside [0, C) that some labels hit.
  for (const char *reduction : {"mean", "sum", "none"}) {
    SCOPED_TRACE(reduction);
    Problem q{"SoftmaxCrossEntropyLoss",
              {f32({3, 4, 2}), i64({3, 2}), f32({4})},
              {{"reduction", AttrValue::ofString(reduction)},
               {"ignore_index", AttrValue::ofInt(1)}}};
    q.intRange = 4;
    q.lo = 0.2;
    checkGradient(q);
    q.types = {f32({2, 3, 2, 2}), i64({2, 2, 2}), std::nullopt};
    q.intLo = -1; // ignored below
    q.attrs["ignore_index"] = AttrValue::ofInt(-1);
    checkGradient(q, 2);
  }
}

TEST(TDLGradient, GemmAllTransCasesAndC) {
  const int64_t M = 3, K = 4, N = 2;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      std::vector<int64_t> a = ta ? std::vector<int64_t>{K, M}
                                  : std::vector<int64_t>{M, K};
      std::vector<int64_t> b = tb ? std::vector<int64_t>{N, K}
                                  : std::vector<int64_t>{K, N};
      for (double beta : {1.0, 0.5}) {
        AttrMap attrs{{"transA", AttrValue::ofInt(ta)},
                      {"transB", AttrValue::ofInt(tb)},
                      {"alpha", AttrValue::ofFloat(1.5)},
                      {"beta", AttrValue::ofFloat(beta)}};
        SCOPED_TRACE("transA=" + std::to_string(ta) +
                     " transB=" + std::to_string(tb) +
                     " beta=" + std::to_string(beta));
        checkGradient({"Gemm", {f32(a), f32(b)}, attrs});
        checkGradient({"Gemm", {f32(a), f32(b), f32({N})}, attrs});
        checkGradient({"Gemm", {f32(a), f32(b), f32({M, N})}, attrs});
      }
    }
}

TEST(TDLGradient, GemmBroadcastC) {
  // C broadcast along M, along N, or a scalar: dC sums dY over the
  // broadcast dims (Unbroadcast), scaled by beta.
  for (double beta : {1.0, 0.5})
    for (std::vector<int64_t> c :
         {std::vector<int64_t>{1, 2}, std::vector<int64_t>{3, 1},
          std::vector<int64_t>{}}) {
      SCOPED_TRACE("beta=" + std::to_string(beta) + " rank(C)=" +
                   std::to_string(c.size()));
      checkGradient({"Gemm",
                     {f32({3, 4}), f32({4, 2}), f32(c)},
                     {{"beta", AttrValue::ofFloat(beta)}}});
    }
}

TEST(TDLGradient, UnwantedInputGradientIsNotExpanded) {
  // MatMul's rule refuses the gradient of a 1-D operand; without a gradient
  // asked for (frozen or constant operands) the refused rule is not
  // expanded.
  OpInstance inst =
      mustInstantiate(lib(), "MatMul", {f32({3, 4}), f32({4})});
  auto g = expandGradient(lib(), inst);
  ASSERT_FALSE(bool(g));
  std::string e = llvm::toString(g.takeError());
  EXPECT_NE(e.find("gradient of a 1-D operand is not supported"),
            std::string::npos)
      << e;
  // Neither operand wanted (both frozen): nothing is expanded, no error.
  auto none = expandGradient(lib(), inst, {}, {false, false});
  ASSERT_TRUE(bool(none)) << llvm::toString(none.takeError());
  EXPECT_FALSE(none->inputGrads[0].has_value());
  EXPECT_FALSE(none->inputGrads[1].has_value());
  EXPECT_TRUE(none->calls.empty());
}

TEST(TDLGradient, ExpansionOnlyForWantedInputs) {
  // Gemm with a full C: asking only for dB emits one call and no dA or dC.
  OpInstance inst = mustInstantiate(lib(), "Gemm",
                                    {f32({3, 4}), f32({4, 2}), f32({3, 2})});
  auto onlyB = expandGradient(lib(), inst, {}, {false, true, false});
  ASSERT_TRUE(bool(onlyB)) << llvm::toString(onlyB.takeError());
  EXPECT_FALSE(onlyB->inputGrads[0].has_value());
  ASSERT_TRUE(onlyB->inputGrads[1].has_value());
  EXPECT_FALSE(onlyB->inputGrads[2].has_value());
  EXPECT_EQ(onlyB->calls.size(), 1u);
}

TEST(TDLGradient, ExpansionStructure) {
  OpInstance inst =
      mustInstantiate(lib(), "MatMul", {f32({3, 4}), f32({4, 2})});
  auto g = expandGradient(lib(), inst);
  ASSERT_TRUE(bool(g));
  // dA = MatMul(dY, Transpose(B)): Transpose first, then MatMul.
  ASSERT_EQ(g->calls.size(), 4u);
  EXPECT_EQ(g->calls[0].op, "Transpose");
  EXPECT_EQ(g->calls[0].operands[0].kind, GradOperand::Kind::ForwardInput);
  EXPECT_EQ(g->calls[0].operands[0].index, 1u);
  EXPECT_EQ(g->calls[1].op, "MatMul");
  EXPECT_EQ(g->calls[1].operands[0].kind, GradOperand::Kind::OutputGrad);
  EXPECT_EQ(g->calls[1].operands[1].kind, GradOperand::Kind::Temp);
  EXPECT_EQ(g->calls[1].operands[1].index, 0u);
  ASSERT_TRUE(g->inputGrads[0].has_value());
  EXPECT_EQ(g->inputGrads[0]->kind, GradOperand::Kind::Temp);
  EXPECT_EQ(g->inputGrads[0]->index, 1u);

  OpInstance add = mustInstantiate(lib(), "Add", {f32({2}), f32({2})});
  auto ga = expandGradient(lib(), add);
  ASSERT_TRUE(bool(ga));
  EXPECT_TRUE(ga->calls.empty());
  EXPECT_EQ(ga->inputGrads[1]->kind, GradOperand::Kind::OutputGrad);

  OpInstance ones = mustInstantiate(lib(), "Ones", {f32({2})});
  auto go = expandGradient(lib(), ones);
  ASSERT_FALSE(bool(go));
  EXPECT_EQ(llvm::toString(go.takeError()), "op Ones has no gradient rule");
}

//===----------------------------------------------------------------------===//
// Element-wise family, with and without broadcasting
//===----------------------------------------------------------------------===//

TEST(TDLGradient, BroadcastBinaryOps) {
  for (const char *op : {"Add", "Sub", "Mul", "Div"}) {
    SCOPED_TRACE(op);
    Problem same{op, {f32({2, 3}), f32({2, 3})}};
    same.awayFromZero = 0.3; // keeps Div's denominator away from 0
    checkGradient(same);
    Problem bcast{op, {f32({2, 3}), f32({3})}};
    bcast.awayFromZero = 0.3;
    checkGradient(bcast);
    Problem both{op, {f32({2, 1, 3}), f32({4, 1})}};
    both.awayFromZero = 0.3;
    checkGradient(both);
  }
}

TEST(TDLGradient, MaxMin) {
  // Random operands are never tied (SubgradientTest checks the ties).
  for (const char *op : {"Max", "Min"}) {
    SCOPED_TRACE(op);
    checkGradient({op, {f32({2, 3}), f32({2, 3})}});
    checkGradient({op, {f32({2, 3}), f32({3})}});
    checkGradient({op, {f32({2, 1, 3}), f32({4, 1})}});
    checkGradient({op, {f32({4})}});
    checkGradient({op, {f32({2, 3}), f32({3}), f32({2, 1}), f32({})}});
  }
}

TEST(TDLGradient, SumMean) {
  // Variadic with broadcasting: a lower-rank input, size-1 dims on both
  // sides, a single input (the identity / itself).
  for (const char *op : {"Sum", "Mean"}) {
    SCOPED_TRACE(op);
    checkGradient({op, {f32({2, 3, 4}), f32({2, 3, 4})}});
    checkGradient({op, {f32({2, 3, 4}), f32({3, 1}), f32({4}), f32({1})}});
    checkGradient({op, {f32({2, 1, 3}), f32({4, 1})}});
    checkGradient({op, {f32({5})}});
  }
}

TEST(TDLGradient, LRN) {
  // Odd windows (AlexNet's 5, 3), an even one (ONNX's window is
  // [c - 1, c + 2] for size 4), a window wider than C, and no spatial dims;
  // large alpha so the square-sum term matters at float64 finite differences.
  checkGradient({"LRN",
                 {f32({2, 7, 3, 2})},
                 {{"size", AttrValue::ofInt(5)}, {"alpha", AttrValue::ofFloat(0.9)}}});
  checkGradient({"LRN", {f32({1, 6, 4})},
                 {{"size", AttrValue::ofInt(4)}, {"alpha", AttrValue::ofFloat(0.5)}, {"beta", AttrValue::ofFloat(0.6)},
                  {"bias", AttrValue::ofFloat(2.0)}}});
  checkGradient({"LRN", {f32({3, 5})}, {{"size", AttrValue::ofInt(3)}, {"alpha", AttrValue::ofFloat(1.0)}}});
  checkGradient({"LRN", {f32({1, 3, 2, 2})},
                 {{"size", AttrValue::ofInt(7)}, {"alpha", AttrValue::ofFloat(2.0)}, {"beta", AttrValue::ofFloat(0.75)},
                  {"bias", AttrValue::ofFloat(1.0)}}});
}

// tdl-specs/activation.tdl, away from the kinks (SubgradientTest checks
// those).
TEST(TDLGradient, Activations) {
  auto F = [](double v) { return AttrValue::ofFloat(v); };
  Problem prelu{"PRelu", {f32({2, 3, 2}), f32({3, 1})}};
  prelu.awayFromZero = 0.05;
  checkGradient(prelu);
  prelu.types = {f32({2, 3}), f32({2, 3})};
  checkGradient(prelu);
  prelu.types = {f32({4}), f32({})};
  checkGradient(prelu);
  for (const char *op : {"Elu", "Selu", "Celu", "ThresholdedRelu"}) {
    SCOPED_TRACE(op);
    Problem p{op, {f32({2, 3})}};
    p.lo = -3;
    p.hi = 2;
    p.awayFromZero = 0.05;
    if (std::string(op) == "ThresholdedRelu")
      p.attrs = {{"alpha", F(0)}};
    checkGradient(p);
  }
  checkGradient({"Elu", {f32({5})}, {{"alpha", F(0.5)}}, -2, -0.05});
  checkGradient({"Selu", {f32({5})}, {{"alpha", F(2)}, {"gamma", F(3)}}, -2,
                 -0.05});
  checkGradient({"Celu", {f32({5})}, {{"alpha", F(2.5)}}, -3, -0.05});
  for (const char *op : {"Softplus", "Softsign", "Mish"}) {
    SCOPED_TRACE(op);
    checkGradient({op, {f32({2, 3})}, {}, -4, 4});
  }
  // HardSigmoid's kinks are at +-2.5 (defaults) and -1, 1 (alpha 0.5,
  // beta 0.5); HardSwish's at +-3.
  checkGradient({"HardSigmoid", {f32({6})}, {}, -2.4, 2.4});
  checkGradient({"HardSigmoid", {f32({6})}, {}, 2.6, 4});
  checkGradient({"HardSigmoid", {f32({6})},
                 {{"alpha", F(0.5)}, {"beta", F(0.5)}}, -0.9, 0.9});
  checkGradient({"HardSwish", {f32({6})}, {}, -2.9, 2.9});
  checkGradient({"HardSwish", {f32({6})}, {}, 3.1, 5});
  checkGradient({"HardSwish", {f32({6})}, {}, -5, -3.1});
  // Shrink: outside +-lambd (slope 1) and inside (slope 0).
  Problem shrink{"Shrink", {f32({2, 3})}, {{"lambd", F(0.5)}, {"bias", F(0.2)}}};
  shrink.awayFromZero = 0.6;
  checkGradient(shrink);
  checkGradient({"Shrink", {f32({4})}, {{"lambd", F(1.5)}}});
}

// tdl-specs/hyperbolic.tdl, on both sides of the series' 1e-3 switch.
TEST(TDLGradient, Hyperbolic) {
  for (const char *op : {"Sinh", "Cosh", "Asinh"}) {
    SCOPED_TRACE(op);
    checkGradient({op, {f32({2, 3})}, {}, -3, 3});
  }
  checkGradient({"Acosh", {f32({2, 3})}, {}, 1.5, 4});
  checkGradient({"Atanh", {f32({2, 3})}, {}, -0.9, 0.9});
  for (const char *op : {"Sinh", "Asinh", "Atanh"}) {
    SCOPED_TRACE(op);
    Problem small{op, {f32({4})}, {}, -0.0009, 0.0009};
    checkGradient(small);
  }
}

// tdl-specs/logical.tdl: Mod (both modes) away from its jumps, Reciprocal,
// Round (zero gradient).
TEST(TDLGradient, ModReciprocalRound) {
  for (int64_t fmod : {0, 1}) {
    SCOPED_TRACE(fmod);
    Problem mod{"Mod", {f32({2, 3}), f32({3})},
                {{"fmod", AttrValue::ofInt(fmod)}}, -3, 3};
    mod.awayFromZero = 0.3;
    checkGradient(mod);
    mod.types = {f32({2, 3}), f32({2, 3})};
    checkGradient(mod);
  }
  Problem rec{"Reciprocal", {f32({2, 3})}};
  rec.awayFromZero = 0.5;
  checkGradient(rec);
  checkGradient({"Round", {f32({5})}, {}, 0.1, 0.4});
}

TEST(TDLGradient, Pow) {
  Problem p{"Pow", {f32({2, 3}), f32({3})}};
  p.lo = 0.5;
  p.hi = 2;
  checkGradient(p);
  p.types = {f32({2, 3}), f32({2, 3})};
  checkGradient(p);
}

TEST(TDLGradient, Unary) {
  for (const char *op : {"Neg", "Identity", "Exp", "Tanh", "Sigmoid", "Erf"})
    checkGradient({op, {f32({2, 3})}});
  for (const char *op : {"Sqrt", "Log"}) {
    Problem p{op, {f32({2, 3})}};
    p.lo = 0.5;
    p.hi = 2;
    checkGradient(p);
  }
  for (const char *op : {"Abs", "LeakyRelu"}) {
    Problem p{op, {f32({2, 3})}};
    p.awayFromZero = 0.05;
    checkGradient(p);
  }
  checkGradient({"LeakyRelu", {f32({4})}, {{"alpha", AttrValue::ofFloat(0.3)}}});
  for (const char *approx : {"none", "tanh"})
    checkGradient(
        {"Gelu", {f32({2, 3})}, {{"approximate", AttrValue::ofString(approx)}}});
}

TEST(TDLGradient, ClipAndWhere) {
  Problem clip{"Clip", {f32({2, 3}), f32({}), f32({})}};
  clip.awayFromZero = 0.05;
  clip.noGrad = {1, 2};
  // Random min/max from [-1, 1]: the FD points stay off the kinks with high
  // probability for this seed.
  checkGradient(clip, 3);
  checkGradient({"Clip", {f32({5}), std::nullopt, std::nullopt}});
  checkGradient({"Where", {TensorType{{2, 3}, ElemType::Bool}, f32({2, 3}),
                           f32({3})}});
}

TEST(TDLGradient, MatMulBatchedBroadcast) {
  checkGradient({"MatMul", {f32({2, 3, 4}), f32({4, 2})}});
  checkGradient({"MatMul", {f32({2, 3, 2, 4}), f32({4, 2})}});
  checkGradient({"MatMul", {f32({2, 1, 3, 4}), f32({3, 4, 2})}});
}

// nn.Linear on a batched input ([N, S, K] x [K, F]): the weight's gradient is
// one Gemm of the operands with their batch dims folded into rows, not a
// batched MatMul of outer products summed by Unbroadcast (P/M times B's
// memory: 75 MB per linear layer of ConvNeXt-Tiny at batch 4 in float64).
TEST(TDLGradient, MatMulSharedWeightIsOneGemm) {
  OpInstance inst =
      mustInstantiate(lib(), "MatMul", {f32({2, 3, 5, 4}), f32({4, 6})});
  auto g = expandGradient(lib(), inst);
  ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
  for (const auto &call : g->calls)
    EXPECT_NE(call.op, "Unbroadcast") << "a batched MatMul summed afterwards";
  ASSERT_TRUE(g->inputGrads[1].has_value());
  ASSERT_EQ(g->inputGrads[1]->kind, GradOperand::Kind::Temp);
  const auto &dB = g->calls[g->inputGrads[1]->index];
  EXPECT_EQ(dB.op, "Gemm");
  ASSERT_EQ(dB.operands.size(), 2u);
  for (const auto &operand : dB.operands) {
    ASSERT_EQ(operand.kind, GradOperand::Kind::Temp);
    EXPECT_EQ(g->calls[operand.index].op, "Flatten");
  }
}

// Batched operands whose batch dims are Y's (attention's Q·K^T, a [1, M, K]
// cell weight): the product already has the operand's shape, so no
// Unbroadcast (which would only copy it); a broadcast operand still sums.
TEST(TDLGradient, MatMulSameBatchHasNoUnbroadcast) {
  checkGradient({"MatMul", {f32({2, 3, 5, 4}), f32({2, 3, 4, 6})}});
  checkGradient({"MatMul", {f32({1, 3, 4}), f32({1, 4, 2})}});
  checkGradient({"MatMul", {f32({2, 3, 4}), f32({1, 4, 2})}});
  checkGradient({"MatMul", {f32({1, 3, 4}), f32({2, 4, 2})}});
  auto unbroadcasts = [](std::vector<std::optional<TensorType>> operands) {
    OpInstance inst = mustInstantiate(lib(), "MatMul", operands);
    auto g = expandGradient(lib(), inst);
    EXPECT_TRUE(bool(g)) << llvm::toString(g.takeError());
    int n = 0;
    for (const auto &call : g->calls)
      n += call.op == "Unbroadcast";
    return n;
  };
  EXPECT_EQ(unbroadcasts({f32({2, 3, 5, 4}), f32({2, 3, 4, 6})}), 0);
  EXPECT_EQ(unbroadcasts({f32({1, 3, 4}), f32({1, 4, 2})}), 0);
  // B broadcast over A's batch of 2: dB sums; dA does not.
  EXPECT_EQ(unbroadcasts({f32({2, 3, 4}), f32({1, 4, 2})}), 1);
  // A broadcast over B's batch of 2: dA sums; dB does not.
  EXPECT_EQ(unbroadcasts({f32({1, 3, 4}), f32({2, 4, 2})}), 1);
}

TEST(TDLGradient, TransposePerm) {
  checkGradient({"Transpose", {f32({2, 3, 4})}, {{"perm", AttrValue::ofInts({1, 2, 0})}}});
}

TEST(TDLGradient, Conv) {
  auto ints = [](std::vector<int64_t> v) { return AttrValue::ofInts(v); };
  checkGradient({"Conv", {f32({2, 3, 7}), f32({4, 3, 3}), f32({4})}});
  checkGradient({"Conv", {f32({2, 3, 8}), f32({4, 3, 3}), std::nullopt},
                 {{"strides", ints({2})}, {"pads", ints({1, 2})},
                  {"dilations", ints({2})}}});
  checkGradient({"Conv", {f32({1, 4, 6, 5}), f32({6, 2, 3, 2}), f32({6})},
                 {{"group", AttrValue::ofInt(2)}, {"strides", ints({2, 1})},
                  {"pads", ints({1, 0, 1, 1})}, {"dilations", ints({1, 2})}}});
  // auto_pad: the gradient ops get the pads it implies (odd totals, so
  // SAME_UPPER and SAME_LOWER differ).
  for (const char *autoPad : {"SAME_UPPER", "SAME_LOWER", "VALID"})
    checkGradient({"Conv", {f32({1, 2, 6, 5}), f32({3, 2, 2, 3}), f32({3})},
                   {{"auto_pad", AttrValue::ofString(autoPad)},
                    {"strides", ints({2, 1})}}});
}

TEST(TDLGradient, ConvTranspose) {
  auto ints = [](std::vector<int64_t> v) { return AttrValue::ofInts(v); };
  checkGradient({"ConvTranspose", {f32({2, 3, 4}), f32({3, 2, 3}), f32({2})}});
  checkGradient({"ConvTranspose", {f32({1, 4, 3, 2}), f32({4, 3, 3, 2}), std::nullopt},
                 {{"group", AttrValue::ofInt(2)}, {"strides", ints({2, 1})},
                  {"pads", ints({1, 0, 0, 1})}, {"output_padding", ints({1, 0})}}});
  // output_shape (larger and smaller than the unpadded size) and auto_pad
  // SAME set the pads.
  checkGradient({"ConvTranspose", {f32({1, 2, 3, 3}), f32({2, 2, 3, 3}), f32({2})},
                 {{"strides", ints({3, 2})}, {"output_shape", ints({10, 6})}}});
  for (const char *autoPad : {"SAME_UPPER", "SAME_LOWER"})
    checkGradient({"ConvTranspose", {f32({1, 2, 3, 2}), f32({2, 1, 3, 3}), std::nullopt},
                   {{"auto_pad", AttrValue::ofString(autoPad)},
                    {"strides", ints({2, 2})}}});
}

//===----------------------------------------------------------------------===//
// Shape ops with const inputs, Gather, Cast, NegativeLogLikelihoodLoss
//===----------------------------------------------------------------------===//

TEST(TDLGradient, ReshapeFamily) {
  checkGradient(withConst("Reshape", {f32({2, 3, 4}), i64({3})}, 1, {4, 0, -1}));
  checkGradient({"Flatten", {f32({2, 3, 2})}, {{"axis", AttrValue::ofInt(2)}}});
  checkGradient(withConst("Squeeze", {f32({2, 1, 3, 1}), i64({1})}, 1, {-1}));
  checkGradient({"Squeeze", {f32({1, 3, 1})}});
  checkGradient(withConst("Unsqueeze", {f32({2, 3}), i64({2})}, 1, {0, -1}));
  checkGradient(withConst("Expand", {f32({3, 1}), i64({3})}, 1, {2, 1, 4}));
}

TEST(TDLGradient, Slice) {
  // Negative start, clamped negative end, negative step.
  Problem p{"Slice", {f32({5, 6}), i64({2}), i64({2}), i64({2}), i64({2})}};
  p.constValues = {{1, {1, -1}}, {2, {4, -7}}, {3, {0, 1}}, {4, {2, -2}}};
  checkGradient(p);
  // INT64_MAX end (saturated from its double), axes and steps absent.
  Problem q{"Slice", {f32({4, 3}), i64({1}), i64({1})}};
  q.constValues = {{1, {1}}, {2, {9.2233720368547758e18}}};
  checkGradient(q);
}

TEST(TDLGradient, Pad) {
  // Constant mode: pads on both axes, one of them negative (a crop), and a
  // constant value (which gets no gradient).
  Problem p{"Pad", {f32({3, 4}), i64({4}), f32({})}};
  p.constValues = {{1, {1, -1, 2, 1}}};
  p.noGrad = {2};
  checkGradient(p);
  // Opset 18's axes: only the last axis is padded.
  Problem q{"Pad", {f32({2, 3, 2}), i64({2}), std::nullopt, i64({1})}};
  q.constValues = {{1, {2, 1}}, {3, {-1}}};
  checkGradient(q);
  // No padding before, some after: dY is larger than X along that dim.
  Problem r{"Pad", {f32({3, 4}), i64({4})}};
  r.constValues = {{1, {0, 0, 2, 1}}};
  checkGradient(r);
}

TEST(TDLGradient, PadModes) {
  // Edge, reflect and wrap scatter-add dY into the data they read: small
  // pads, pads beyond one reflection or period, crops, a dim of size 1, an
  // unpadded dim and opset 18's axes.
  struct Case {
    const char *mode;
    std::vector<int64_t> shape;
    std::vector<double> pads;
  };
  std::vector<Case> cases{
      {"edge", {3, 4}, {1, 2, 2, 1}},
      {"edge", {3, 4}, {2, -1, 1, 3}},
      {"reflect", {3, 4}, {2, 1, 1, 3}},
      {"reflect", {3, 4}, {5, 0, 7, 2}},
      {"reflect", {1, 5}, {2, 3, 1, 4}},
      {"reflect", {2, 3}, {-1, 4, 2, 5}},
      {"wrap", {3, 4}, {1, 5, 2, 9}},
      {"wrap", {3, 4}, {-2, 1, 4, -3}},
      {"edge", {2, 3, 2}, {0, 1, 0, 0, 2, 3}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(c.mode));
    Problem p{"Pad", {f32(c.shape), i64({int64_t(c.pads.size())})},
              {{"mode", AttrValue::ofString(c.mode)}}};
    p.constValues = {{1, c.pads}};
    GradExpansion g = checkGradient(p);
    ASSERT_EQ(g.calls.size(), 1u);
    EXPECT_EQ(g.calls[0].op, "PadGrad");
  }
  Problem q{"Pad", {f32({2, 3, 2}), i64({2}), std::nullopt, i64({1})},
            {{"mode", AttrValue::ofString("reflect")}}};
  q.constValues = {{1, {2, 1}}, {3, {-2}}};
  checkGradient(q);
}

TEST(TDLGradient, Gather) {
  Problem p{"Gather", {f32({4, 3}), i64({2, 2})}};
  p.intLo = -4;
  p.intRange = 8;
  checkGradient(p);
  p.types = {f32({3, 4, 2}), i64({3})};
  p.attrs = {{"axis", AttrValue::ofInt(1)}};
  checkGradient(p);
}

TEST(TDLGradient, Cast) {
  checkGradient({"Cast", {f32({2, 3})}, {{"to", AttrValue::ofInt(1)}}});
  // CastLike: the input's gradient only; target_type has none.
  GradProblem like{"CastLike", {f32({2, 3}), f32({1})}};
  like.noGrad = {1};
  checkGradient(like);
}

TEST(TDLGradient, NegativeLogLikelihoodLoss) {
  for (const char *reduction : {"mean", "sum", "none"}) {
    SCOPED_TRACE(reduction);
    AttrMap attrs{{"reduction", AttrValue::ofString(reduction)}};
    checkGradient({"NegativeLogLikelihoodLoss", {f32({3, 4}), i64({3})}, attrs,
                   4});
    attrs["ignore_index"] = AttrValue::ofInt(1);
    checkGradient({"NegativeLogLikelihoodLoss", {f32({2, 3, 2}), i64({2, 2})},
                   attrs, 3});
    // Trainable class weights (NegativeLogLikelihoodLossWeightGrad), with
    // labels that hit ignore_index = 1.
    Problem w{"NegativeLogLikelihoodLoss",
              {f32({3, 4, 2}), i64({3, 2}), f32({4})}, attrs, 0.2, 1};
    w.intRange = 4;
    GradExpansion g = checkGradient(w);
    ASSERT_TRUE(g.inputGrads[2].has_value());
    // Without ignored labels, and with negative log-probabilities.
    w.attrs.erase("ignore_index");
    w.lo = -2;
    w.hi = -0.1;
    checkGradient(w, 3);
  }
}
