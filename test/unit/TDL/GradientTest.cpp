//===- GradientTest.cpp - every gradient rule vs finite differences -------===//
//
// For each rule: evaluate the forward op, expand its gradient with random
// output gradients w, evaluate the gradient calls, and compare each input
// gradient with central differences of f(x) = sum(output * w) in float64.
//
//===----------------------------------------------------------------------===//
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

struct Problem {
  std::string op;
  std::vector<std::optional<TensorType>> types;
  AttrMap attrs;
  /// Values of integer inputs are drawn from [0, intRange).
  int64_t intRange = 3;
  /// Keep |x| >= this (avoids Relu's kink).
  double awayFromZero = 0;
  /// Float inputs are drawn from [lo, hi).
  double lo = -1, hi = 1;
  /// Inputs that have no gradient by definition (Clip's min and max).
  std::vector<unsigned> noGrad = {};
  /// Values of const inputs (they have no gradient).
  std::map<unsigned, std::vector<double>> constValues = {};
  /// Integer inputs are drawn from [intLo, intLo + intRange).
  int64_t intLo = 0;
};

std::vector<DenseTensor> forward(const OpInstance &inst,
                                 const std::vector<DenseTensor> &in) {
  std::vector<const DenseTensor *> ptrs;
  for (size_t i = 0; i < in.size(); ++i)
    ptrs.push_back(inst.inputTypes()[i] ? &in[i] : nullptr);
  auto out = evaluate(inst, ptrs);
  EXPECT_TRUE(bool(out)) << (out ? "" : llvm::toString(out.takeError()));
  return out ? std::move(*out) : std::vector<DenseTensor>{};
}

double objective(const OpInstance &inst, const std::vector<DenseTensor> &in,
                 const std::vector<DenseTensor> &w) {
  auto out = forward(inst, in);
  double f = 0;
  for (size_t o = 0; o < out.size(); ++o)
    for (size_t k = 0; k < out[o].data.size(); ++k)
      f += out[o].data[k] * w[o].data[k];
  return f;
}

/// Runs the finite-difference check; returns the gradient expansion.
GradExpansion checkGradient(const Problem &p, unsigned seed = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(p.lo, p.hi);
  std::uniform_real_distribution<double> wuni(-1, 1);
  OpInstance inst =
      mustInstantiate(lib(), p.op, p.types, p.attrs, p.constValues);
  std::vector<DenseTensor> in(p.types.size());
  for (size_t i = 0; i < p.types.size(); ++i) {
    if (!p.types[i])
      continue;
    in[i].type = *p.types[i];
    if (p.constValues.count(unsigned(i))) {
      in[i].data = p.constValues.at(unsigned(i));
      continue;
    }
    for (int64_t k = 0; k < count(in[i].type.dims); ++k) {
      double v;
      if (in[i].type.elem == ElemType::I64) {
        v = double(p.intLo + int64_t(rng() % p.intRange));
      } else if (in[i].type.elem == ElemType::Bool) {
        v = double(rng() % 2);
      } else {
        do
          v = uni(rng);
        while (std::fabs(v) < p.awayFromZero);
      }
      in[i].data.push_back(v);
    }
  }
  auto out = forward(inst, in);
  std::vector<DenseTensor> w;
  for (auto &o : out) {
    DenseTensor t;
    t.type = o.type;
    for (size_t k = 0; k < o.data.size(); ++k)
      t.data.push_back(wuni(rng));
    w.push_back(std::move(t));
  }

  auto g = expandGradient(lib(), inst);
  if (!g) {
    ADD_FAILURE() << llvm::toString(g.takeError());
    return {};
  }
  // Evaluate the gradient calls.
  std::vector<DenseTensor> temps;
  auto operand = [&](const GradOperand &o) -> const DenseTensor & {
    switch (o.kind) {
    case GradOperand::Kind::ForwardInput: return in[o.index];
    case GradOperand::Kind::ForwardOutput: return out[o.index];
    case GradOperand::Kind::OutputGrad: return w[o.index];
    case GradOperand::Kind::Temp: return temps[o.index];
    }
    return temps[0];
  };
  for (const GradCall &call : g->calls) {
    std::vector<std::optional<TensorType>> types;
    std::vector<const DenseTensor *> ptrs;
    for (auto &o : call.operands) {
      types.push_back(operand(o).type);
      ptrs.push_back(&operand(o));
    }
    OpInstance ci = mustInstantiate(lib(), call.op, types, call.attrs);
    auto r = evaluate(ci, ptrs);
    if (!r) {
      ADD_FAILURE() << llvm::toString(r.takeError());
      return {};
    }
    temps.push_back(std::move((*r)[0]));
  }
  // Compare with central differences.
  const double h = 1e-6;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!p.types[i] || p.types[i]->elem != ElemType::F32 ||
        llvm::is_contained(p.noGrad, i) || p.constValues.count(unsigned(i))) {
      EXPECT_FALSE(g->inputGrads[i].has_value()) << "input " << i;
      continue;
    }
    if (!g->inputGrads[i]) {
      ADD_FAILURE() << p.op << ": no gradient for input " << i;
      continue;
    }
    const DenseTensor &gi = operand(*g->inputGrads[i]);
    EXPECT_EQ(gi.type.dims, in[i].type.dims) << p.op << " input " << i;
    if (gi.type.dims != in[i].type.dims)
      continue;
    for (size_t k = 0; k < in[i].data.size(); ++k) {
      std::vector<DenseTensor> plus = in, minus = in;
      plus[i].data[k] += h;
      minus[i].data[k] -= h;
      double fd = (objective(inst, plus, w) - objective(inst, minus, w)) /
                  (2 * h);
      EXPECT_NEAR(gi.data[k], fd, 1e-6 * std::max(1.0, std::fabs(fd)))
          << p.op << " input " << i << " element " << k;
    }
  }
  return std::move(*g);
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

TEST(TDLGradient, GemmUnsupportedCBroadcast) {
  OpInstance inst = mustInstantiate(lib(), "Gemm",
                                    {f32({3, 4}), f32({4, 2}), f32({1, 2})});
  auto g = expandGradient(lib(), inst);
  ASSERT_FALSE(bool(g));
  std::string e = llvm::toString(g.takeError());
  EXPECT_NE(e.find("op Gemm: gradient of input C is not supported: Gemm: "
                   "gradient of C is supported only for a bias [N] or a full "
                   "[M, N] C (tdl-specs/nn.tdl:"),
            std::string::npos)
      << e;
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
  checkGradient({"MatMul", {f32({2, 1, 3, 4}), f32({3, 4, 2})}});
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
}

TEST(TDLGradient, ConvTranspose) {
  auto ints = [](std::vector<int64_t> v) { return AttrValue::ofInts(v); };
  checkGradient({"ConvTranspose", {f32({2, 3, 4}), f32({3, 2, 3}), f32({2})}});
  checkGradient({"ConvTranspose", {f32({1, 4, 3, 2}), f32({4, 3, 3, 2}), std::nullopt},
                 {{"group", AttrValue::ofInt(2)}, {"strides", ints({2, 1})},
                  {"pads", ints({1, 0, 0, 1})}, {"output_padding", ints({1, 0})}}});
}

//===----------------------------------------------------------------------===//
// Shape ops with const inputs, Gather, Cast, NegativeLogLikelihoodLoss
//===----------------------------------------------------------------------===//

TEST(TDLGradient, ReshapeFamily) {
  checkGradient({"Reshape", {f32({2, 3, 4}), i64({3})}, {}, 3, 0, -1, 1, {},
                 {{1, {4, 0, -1}}}});
  checkGradient({"Flatten", {f32({2, 3, 2})}, {{"axis", AttrValue::ofInt(2)}}});
  checkGradient({"Squeeze", {f32({2, 1, 3, 1}), i64({1})}, {}, 3, 0, -1, 1,
                 {}, {{1, {-1}}}});
  checkGradient({"Squeeze", {f32({1, 3, 1})}});
  checkGradient({"Unsqueeze", {f32({2, 3}), i64({2})}, {}, 3, 0, -1, 1, {},
                 {{1, {0, -1}}}});
  checkGradient({"Expand", {f32({3, 1}), i64({3})}, {}, 3, 0, -1, 1, {},
                 {{1, {2, 1, 4}}}});
}

TEST(TDLGradient, Slice) {
  // Negative start, clamped negative end, negative step.
  checkGradient({"Slice",
                 {f32({5, 6}), i64({2}), i64({2}), i64({2}), i64({2})},
                 {}, 3, 0, -1, 1, {},
                 {{1, {1, -1}}, {2, {4, -7}}, {3, {0, 1}}, {4, {2, -2}}}});
  // INT64_MAX end (saturated from its double), axes and steps absent.
  checkGradient({"Slice", {f32({4, 3}), i64({1}), i64({1})}, {}, 3, 0, -1, 1,
                 {}, {{1, {1}}, {2, {9.2233720368547758e18}}}});
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
  }
}
