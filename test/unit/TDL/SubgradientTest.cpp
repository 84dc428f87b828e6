//===- SubgradientTest.cpp - gradients at kinks and ties, by hand ---------===//
//
// The subgradient every builtin gradient rule picks where its op has a kink
// or a tie, on hand-made inputs that sit exactly there, with PyTorch's
// values written out (docs/Training.md, "Subgradients at kinks and ties").
// Finite differences cannot check these points (the derivative does not
// exist there), and random inputs never hit them.
//
//===----------------------------------------------------------------------===//
#include "GradientCheck.h"

#include <cmath>
#include <limits>

using namespace tofu::tdl;
using namespace tofu::tdl::test;

namespace {

AttrValue I(int64_t v) { return AttrValue::ofInt(v); }
AttrValue F(double v) { return AttrValue::ofFloat(v); }

/// Output 0 of `op` on `inputs` (nullopt entries: absent inputs).
std::vector<double> run(llvm::StringRef op,
                        const std::vector<std::optional<DenseTensor>> &inputs,
                        const AttrMap &attrs = {}) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  std::vector<std::optional<TensorType>> types;
  std::vector<const DenseTensor *> ptrs;
  for (const auto &t : inputs) {
    types.push_back(t ? std::optional<TensorType>(t->type) : std::nullopt);
    ptrs.push_back(t ? &*t : nullptr);
  }
  OpInstance inst = mustInstantiate(lib, op, types, attrs);
  auto r = evaluate(inst, ptrs);
  if (!r) {
    ADD_FAILURE() << op.str() << ": " << llvm::toString(r.takeError());
    return {};
  }
  return (*r)[0].data;
}

/// The gradient of every input of `op` (one output) at `inputs` for the
/// incoming gradient `dy`, through the op's gradient rule; an input without
/// a gradient gives an empty vector.
std::vector<std::vector<double>>
grads(llvm::StringRef op, const std::vector<DenseTensor> &inputs,
      const std::vector<double> &dy, const AttrMap &attrs = {}) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  std::vector<std::optional<TensorType>> types;
  std::vector<const DenseTensor *> ptrs;
  for (const DenseTensor &t : inputs) {
    types.push_back(t.type);
    ptrs.push_back(&t);
  }
  OpInstance inst = mustInstantiate(lib, op, types, attrs);
  auto out = evaluate(inst, ptrs);
  auto g = expandGradient(lib, inst);
  if (!out || !g) {
    ADD_FAILURE() << op.str() << ": "
                  << (out ? "" : llvm::toString(out.takeError()))
                  << (g ? "" : llvm::toString(g.takeError()));
    return {};
  }
  DenseTensor w = tensor((*out)[0].type, dy);
  std::vector<DenseTensor> temps;
  auto operand = [&](const GradOperand &o) -> const DenseTensor & {
    switch (o.kind) {
    case GradOperand::Kind::ForwardInput: return inputs[o.index];
    case GradOperand::Kind::ForwardOutput: return (*out)[o.index];
    case GradOperand::Kind::OutputGrad: return w;
    case GradOperand::Kind::Temp: return temps[o.index];
    }
    return temps[0];
  };
  for (const GradCall &call : g->calls) {
    std::vector<std::optional<TensorType>> callTypes;
    std::vector<const DenseTensor *> callPtrs;
    for (auto &o : call.operands) {
      callTypes.push_back(operand(o).type);
      callPtrs.push_back(&operand(o));
    }
    OpInstance ci = mustInstantiate(lib, call.op, callTypes, call.attrs);
    auto r = evaluate(ci, callPtrs);
    if (!r) {
      ADD_FAILURE() << call.op << ": " << llvm::toString(r.takeError());
      return {};
    }
    temps.push_back(std::move((*r)[0]));
  }
  std::vector<std::vector<double>> result;
  for (auto &ig : g->inputGrads)
    result.push_back(ig ? operand(*ig).data : std::vector<double>{});
  return result;
}

using Values = std::vector<double>;

} // namespace

// PyTorch's max_pool (CPU and CUDA) and ONNX MaxPool's Indices pick the first
// maximal in-bounds cell of a window (row-major kernel offsets): only that
// cell receives the window's dY.
TEST(TDLSubgradient, MaxPoolTiesGoToTheFirstMaximalCell) {
  // 1-D, kernel 3, stride 1, pads 1 (an inception-block pool): windows over
  // cells [-1, 1], [0, 2], [1, 3], [2, 4], [3, 5] of X = [1, 3, 3, 2, 3].
  AttrMap attrs = {{"kernel_shape", ints({3})}, {"pads", ints({1, 1})}};
  DenseTensor x = tensor(f32({1, 1, 5}), {1, 3, 3, 2, 3});
  std::vector<double> y = run("MaxPool", {x}, attrs);
  EXPECT_EQ(y, (std::vector<double>{3, 3, 3, 3, 3}));
  DenseTensor dy = tensor(f32({1, 1, 5}), {1, 10, 100, 1000, 10000});
  // Windows 0-2 pick cell 1, window 3 cell 2, window 4 cell 4. (Every tied
  // cell would give [0, 111, 1110, 0, 11000].)
  EXPECT_EQ(run("MaxPoolGrad", {dy, x, tensor(f32({1, 1, 5}), y)}, attrs),
            (std::vector<double>{0, 111, 1000, 0, 10000}));

  // A constant 3x3 plane, 2x2 windows, stride 1: each window's top-left cell.
  AttrMap attrs2 = {{"kernel_shape", ints({2, 2})}};
  DenseTensor c = tensor(f32({1, 1, 3, 3}), std::vector<double>(9, 0.5));
  DenseTensor dy2 = tensor(f32({1, 1, 2, 2}), {1, 2, 4, 8});
  DenseTensor y2 = tensor(f32({1, 1, 2, 2}), {0.5, 0.5, 0.5, 0.5});
  EXPECT_EQ(run("MaxPoolGrad", {dy2, c, y2}, attrs2),
            (std::vector<double>{1, 2, 0, 4, 8, 0, 0, 0, 0}));

  // Padding never wins: with all-negative X and pads, a window's first
  // in-bounds maximal cell, not a padding offset, gets dY.
  AttrMap attrs3 = {{"kernel_shape", ints({2})}, {"pads", ints({1, 1})},
                    {"strides", ints({2})}};
  DenseTensor xn = tensor(f32({1, 1, 4}), {-5, -1, -1, -3});
  DenseTensor yn = tensor(f32({1, 1, 3}), run("MaxPool", {xn}, attrs3));
  EXPECT_EQ(run("MaxPoolGrad",
                {tensor(f32({1, 1, 3}), {1, 2, 4}), xn, yn}, attrs3),
            (std::vector<double>{1, 2, 0, 4}));
}

// The wider halo: a row of dX needs X over every window containing it.
TEST(TDLSubgradient, MaxPoolGradReadsWholeWindowsOfX) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  OpInstance g = mustInstantiate(
      lib, "MaxPoolGrad",
      {f32({2, 4, 8, 8}), f32({2, 4, 8, 8}), f32({2, 4, 8, 8})},
      {{"kernel_shape", ints({3, 3})}, {"pads", ints({1, 1, 1, 1})}});
  // dX rows [4, 8): windows 3..7 (dY and Y rows [3, 8)), whose cells are
  // rows [2, 9) of X, clamped to [2, 8).
  auto r = g.requiredRegions(0, {{0, 2}, {0, 4}, {4, 8}, {0, 8}});
  ASSERT_TRUE(r[0] && r[1] && r[2]);
  EXPECT_EQ(r[0]->at(2).lo, 3);
  EXPECT_EQ(r[0]->at(2).hi, 8);
  EXPECT_EQ(r[1]->at(2).lo, 2);
  EXPECT_EQ(r[1]->at(2).hi, 8);
  EXPECT_EQ(r[2]->at(2).lo, 3);
  auto s = analyzeStrategies(g);
  ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
  bool spatial = false;
  for (const Strategy &st : *s)
    spatial |= st.dim == 2;
  EXPECT_TRUE(spatial) << "dX no longer splits along a spatial dim";
}

// adaptive_max_pool / a whole-plane max_pool: the first maximal cell.
TEST(TDLSubgradient, GlobalMaxPoolTiesGoToTheFirstMaximalCell) {
  DenseTensor x = tensor(f32({1, 2, 2, 2}), {2, 5, 5, 1, 4, 4, 4, 4});
  DenseTensor y = tensor(f32({1, 2, 1, 1}), {5, 4});
  DenseTensor dy = tensor(f32({1, 2, 1, 1}), {3, 7});
  EXPECT_EQ(run("GlobalMaxPoolGrad", {dy, x, y}),
            (std::vector<double>{0, 3, 0, 0, 7, 0, 0, 0}));
}

// torch.amax / Tensor.max(): tied maxima share dY evenly.
TEST(TDLSubgradient, ReduceMaxTiesShareEvenly) {
  DenseTensor x = tensor(f32({2, 3}), {1, 4, 4, 7, 7, 7});
  DenseTensor y = tensor(f32({2, 1}), {4, 7});
  DenseTensor dy = tensor(f32({2, 1}), {6, 9});
  EXPECT_EQ(run("ReduceMaxGrad", {dy, x, y}, {{"axes", ints({1})}}),
            (std::vector<double>{0, 3, 3, 3, 3, 3}));
  // Every axis, keepdims 0.
  DenseTensor y0 = tensor(f32({}), {7});
  DenseTensor dy0 = tensor(f32({}), {6});
  EXPECT_EQ(run("ReduceMaxGrad", {dy0, x, y0}, {{"keepdims", I(0)}}),
            (std::vector<double>{0, 0, 0, 2, 2, 2}));
}

// Clip with both bounds is Hardtanh / ReLU6 (strict: nothing on a bound);
// with one bound clamp(min=) / clamp(max=) (inclusive).
TEST(TDLSubgradient, ClipBounds) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  auto ruleOperands = [&](bool min, bool max) {
    OpInstance clip = mustInstantiate(
        lib, "Clip",
        {f32({5}), min ? std::optional<TensorType>(f32({})) : std::nullopt,
         max ? std::optional<TensorType>(f32({})) : std::nullopt});
    auto g = expandGradient(lib, clip);
    EXPECT_TRUE(bool(g)) << llvm::toString(g.takeError());
    EXPECT_EQ(g->calls.size(), 1u);
    EXPECT_EQ(g->calls[0].op, "ClipGrad");
    return g->calls[0].operands.size();
  };
  EXPECT_EQ(ruleOperands(true, true), 5u);  // dY, X, Y, lo = min, hi = max
  EXPECT_EQ(ruleOperands(true, false), 3u); // X == Y: X >= min
  EXPECT_EQ(ruleOperands(false, true), 3u); // X == Y: X <= max
  EXPECT_EQ(ruleOperands(false, false), 3u);

  DenseTensor dy = tensor(f32({5}), {1, 1, 1, 1, 1});
  DenseTensor x = tensor(f32({5}), {-1, 0, 3, 6, 7});
  DenseTensor lo = tensor(f32({}), {0}), hi = tensor(f32({}), {6});
  DenseTensor y = tensor(f32({5}), run("Clip", {x, lo, hi}));
  EXPECT_EQ(run("ClipGrad", {dy, x, y, lo, hi}),
            (std::vector<double>{0, 0, 1, 0, 0}));
  DenseTensor ymin = tensor(f32({5}), run("Clip", {x, lo, std::nullopt}));
  EXPECT_EQ(run("ClipGrad", {dy, x, ymin}),
            (std::vector<double>{0, 1, 1, 1, 1}));
  DenseTensor ymax = tensor(f32({5}), run("Clip", {x, std::nullopt, hi}));
  EXPECT_EQ(run("ClipGrad", {dy, x, ymax}),
            (std::vector<double>{1, 1, 1, 1, 0}));
  // An infinite bound is no bound (the importer gives Clip(x, '', max) a
  // -inf min): clamp(max=)'s inclusive rule.
  DenseTensor ninf = tensor(f32({}), {-INFINITY});
  DenseTensor yinf = tensor(f32({5}), run("Clip", {x, ninf, hi}));
  EXPECT_EQ(yinf.data, ymax.data);
  EXPECT_EQ(run("ClipGrad", {dy, x, yinf, ninf, hi}),
            (std::vector<double>{1, 1, 1, 1, 0}));
  // Opset-10 Clip<max = 6> gets min = -FLT_MAX, which is no bound either.
  DenseTensor lowest = tensor(f32({}), {-3.4028234663852886e38});
  EXPECT_EQ(run("ClipGrad", {dy, x, yinf, lowest, hi}),
            (std::vector<double>{1, 1, 1, 1, 0}));
}

// x == 0 takes the slope side, as leaky_relu_backward (x > 0 ? dY : a * dY).
TEST(TDLSubgradient, LeakyReluAtZero) {
  EXPECT_EQ(run("LeakyReluGrad",
                {tensor(f32({3}), {2, 2, 2}), tensor(f32({3}), {-1, 0, 2})},
                {{"alpha", F(0.25)}}),
            (std::vector<double>{0.5, 0.5, 2}));
  // Relu: x == 0 passes nothing (threshold_backward); Abs: sign(0) = 0.
  EXPECT_EQ(run("ReluGrad",
                {tensor(f32({2}), {2, 2}), tensor(f32({2}), {0, 1})}),
            (std::vector<double>{0, 2}));
  EXPECT_EQ(run("AbsGrad",
                {tensor(f32({3}), {2, 2, 2}), tensor(f32({3}), {-1, 0, 1})}),
            (std::vector<double>{-2, 0, 2}));
}

// pow_backward: 0 where the exponent is 0; pow_backward_exponent: 0 where the
// base is 0 and the exponent >= 0.
TEST(TDLSubgradient, PowAtZero) {
  DenseTensor dc = tensor(f32({4}), {1, 1, 1, 1});
  DenseTensor a = tensor(f32({4}), {0, 0, 2, 0});
  DenseTensor b = tensor(f32({4}), {0, 2, 3, 1});
  EXPECT_EQ(run("PowGradBase", {dc, a, b}),
            (std::vector<double>{0, 0, 12, 1}));
  DenseTensor a2 = tensor(f32({4}), {0, 0, 2, 0});
  DenseTensor b2 = tensor(f32({4}), {0, 2, 3, -1});
  DenseTensor c2 = tensor(f32({4}), {1, 0, 8, INFINITY});
  std::vector<double> db = run("PowGradExponent", {dc, a2, b2, c2});
  ASSERT_EQ(db.size(), 4u);
  EXPECT_EQ(db[0], 0);
  EXPECT_EQ(db[1], 0);
  EXPECT_NEAR(db[2], 8 * std::log(2.0), 1e-12);
  // A negative exponent at 0: inf * log(0) = -inf, as in PyTorch.
  EXPECT_EQ(db[3], -std::numeric_limits<double>::infinity());
}

// torch.maximum / minimum: tied inputs get dY / 2 each (also through
// broadcasting: a broadcast input sums its halves); with more inputs, dY / t
// to each of the t tied inputs, as torch.amax over the stacked inputs
// (values measured with torch 1.13).
TEST(TDLSubgradient, MaxMinTiesShareEvenly) {
  DenseTensor a = tensor(f32({2, 3}), {1, 2, 3, 1, 2, 3});
  DenseTensor b = tensor(f32({3}), {2, 2, 2});
  Values dy = {4, 4, 4, 8, 8, 8};
  auto g = grads("Max", {a, b}, dy);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0], (Values{0, 2, 4, 0, 4, 8}));
  // b: 4 + 8 where b > a, 2 + 4 at the ties, 0 where a > b.
  EXPECT_EQ(g[1], (Values{12, 6, 0}));
  g = grads("Min", {a, b}, dy);
  EXPECT_EQ(g[0], (Values{4, 2, 0, 8, 4, 0}));
  EXPECT_EQ(g[1], (Values{0, 6, 12}));
  // Three inputs: torch.amax(torch.stack([a, b, c]), 0) with dY = 6 gives
  // a [0, 2, 6, 2], b [3, 2, 0, 2], c [3, 2, 0, 2]. (Max(Max(a, b), c)
  // would give a and b 1.5 each and c 3 where all three tie.)
  DenseTensor a3 = tensor(f32({4}), {1, 2, 2, 0});
  DenseTensor b3 = tensor(f32({4}), {2, 2, 1, 0});
  DenseTensor c3 = tensor(f32({4}), {2, 2, 0, 0});
  g = grads("Max", {a3, b3, c3}, {6, 6, 6, 6});
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0], (Values{0, 2, 6, 2}));
  EXPECT_EQ(g[1], (Values{3, 2, 0, 2}));
  EXPECT_EQ(g[2], (Values{3, 2, 0, 2}));
  g = grads("Min", {a3, b3, c3}, {6, 6, 6, 6});
  EXPECT_EQ(g[0], (Values{6, 2, 0, 2}));
  EXPECT_EQ(g[1], (Values{0, 2, 0, 2}));
  EXPECT_EQ(g[2], (Values{0, 2, 6, 2}));
  // Broadcast among three: a scalar tied with two [2, 2] tensors.
  g = grads("Max",
            {tensor(f32({}), {2}), tensor(f32({2, 2}), {2, 1, 2, 2}),
             tensor(f32({2, 1}), {0, 2})},
            {6, 6, 6, 6});
  EXPECT_EQ(g[0], (Values{3 + 6 + 2 + 2}));
  EXPECT_EQ(g[1], (Values{3, 0, 2, 2}));
  EXPECT_EQ(g[2], (Values{0, 4}));
  // One input: the identity.
  g = grads("Max", {a3}, {1, 2, 3, 4});
  EXPECT_EQ(g[0], (Values{1, 2, 3, 4}));
  const SpecLibrary &lib = SpecLibrary::builtin();
  EXPECT_NE(instantiateError(lib, "Max", {f32({2, 3}), f32({4}), f32({3})}),
            "");
}

// The activations of tdl-specs/activation.tdl at their kinks, with
// PyTorch 1.13's float64 gradients for dY = 4.
TEST(TDLSubgradient, ActivationKinks) {
  // prelu (weight 0.25) at x = -1, 0, 2: dx = [1, 1, 4], dweight = -4 (0 from
  // x = 0).
  auto g = grads("PRelu", {tensor(f32({3}), {-1, 0, 2}), tensor(f32({1}), {0.25})},
                 {4, 4, 4});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0], (Values{1, 1, 4}));
  EXPECT_EQ(g[1], (Values{-4}));
  // elu(alpha = 0.5) at 0: the exponential side, alpha * dY.
  g = grads("Elu", {tensor(f32({3}), {-1, 0, 1})}, {4, 4, 4},
            {{"alpha", F(0.5)}});
  EXPECT_NEAR(g[0][0], 0.7357588823428847, 1e-15);
  EXPECT_EQ(g[0][1], 2);
  EXPECT_EQ(g[0][2], 4);
  // selu at 0: alpha * scale * dY (torch's float64 constants are the
  // defaults).
  g = grads("Selu", {tensor(f32({3}), {-1, 0, 1})}, {4, 4, 4});
  EXPECT_NEAR(g[0][0], 2.587074412139256, 1e-15);
  EXPECT_NEAR(g[0][1], 7.0323973633895065, 1e-15);
  EXPECT_NEAR(g[0][2], 4.202803949421922, 1e-15);
  // celu(alpha = 2) at 0: dY * exp(0 / alpha).
  g = grads("Celu", {tensor(f32({3}), {-1, 0, 1})}, {4, 4, 4},
            {{"alpha", F(2)}});
  EXPECT_NEAR(g[0][0], 2.4261226388505337, 1e-15);
  EXPECT_EQ(g[0][1], 4);
  EXPECT_EQ(g[0][2], 4);
  // hardsigmoid: 0 at both kinks (-3, 3) with alpha 1/6, beta 1/2.
  g = grads("HardSigmoid", {tensor(f32({5}), {-3, -1, 0, 3, 4})},
            {4, 4, 4, 4, 4}, {{"alpha", F(1.0 / 6)}});
  EXPECT_EQ(g[0][0], 0);
  EXPECT_NEAR(g[0][1], 4.0 / 6, 1e-15);
  EXPECT_EQ(g[0][3], 0);
  EXPECT_EQ(g[0][4], 0);
  // hardswish at -4, -3, 0, 3, 4: [0, -2, 2, 6, 4] (the middle piece owns
  // both kinks), as torch's CUDA kernel and its CPU scalar loop (a tensor of
  // 5); its vectorized CPU loop (the first elements of a tensor of 64) gives
  // 4 at 3.
  g = grads("HardSwish", {tensor(f32({5}), {-4, -3, 0, 3, 4})},
            {4, 4, 4, 4, 4});
  EXPECT_EQ(g[0], (Values{0, -2, 2, 6, 4}));
  // hardshrink / softshrink (lambd = 1) at -2, -1, 0, 1, 2: [4, 0, 0, 0, 4].
  for (double bias : {0.0, 1.0}) {
    g = grads("Shrink", {tensor(f32({5}), {-2, -1, 0, 1, 2})},
              {4, 4, 4, 4, 4}, {{"lambd", F(1)}, {"bias", F(bias)}});
    EXPECT_EQ(g[0], (Values{4, 0, 0, 0, 4})) << bias;
  }
  // threshold(1, 0) at 0, 1, 2: [0, 0, 4].
  g = grads("ThresholdedRelu", {tensor(f32({3}), {0, 1, 2})}, {4, 4, 4});
  EXPECT_EQ(g[0], (Values{0, 0, 4}));
  // softplus and mish at 0 are smooth: dY / 2 and dY * 0.6 (tanh(log 2)).
  g = grads("Softplus", {tensor(f32({2}), {-1, 0})}, {4, 4});
  EXPECT_NEAR(g[0][0], 1.0757656854799804, 1e-15);
  EXPECT_EQ(g[0][1], 2);
  g = grads("Mish", {tensor(f32({3}), {-1, 0, 1})}, {4, 4, 4});
  EXPECT_NEAR(g[0][0], 0.23686702350958005, 1e-15);
  EXPECT_NEAR(g[0][1], 2.4, 1e-15);
  EXPECT_NEAR(g[0][2], 4.196144880399169, 1e-15);
  // softsign at 0: slope 1.
  g = grads("Softsign", {tensor(f32({1}), {0})}, {4});
  EXPECT_EQ(g[0], (Values{4}));
}

// Mod: torch.remainder (fmod = 0) and torch.fmod (fmod = 1) of
// [-7, 7, -7, 7] by [2, 2, -2, -2]: values and the divisor's gradient
// -dY * floor(A / B) or -dY * trunc(A / B).
TEST(TDLSubgradient, ModSigns) {
  DenseTensor a = tensor(f32({4}), {-7, 7, -7, 7});
  DenseTensor b = tensor(f32({4}), {2, 2, -2, -2});
  EXPECT_EQ(run("Mod", {a, b}), (Values{1, 1, -1, -1}));
  EXPECT_EQ(run("Mod", {a, b}, {{"fmod", I(1)}}), (Values{-1, 1, -1, 1}));
  auto g = grads("Mod", {a, b}, {1, 1, 1, 1});
  EXPECT_EQ(g[0], (Values{1, 1, 1, 1}));
  EXPECT_EQ(g[1], (Values{4, -3, -3, 4}));
  g = grads("Mod", {a, b}, {1, 1, 1, 1}, {{"fmod", I(1)}});
  EXPECT_EQ(g[1], (Values{3, -3, -3, 3}));
  // Integers (Python's % and C's %).
  DenseTensor ai = tensor(i64({4}), {-7, 7, -7, 7});
  DenseTensor bi = tensor(i64({4}), {3, 3, -3, -3});
  EXPECT_EQ(run("Mod", {ai, bi}), (Values{2, 1, -1, -2}));
  EXPECT_EQ(run("Mod", {ai, bi}, {{"fmod", I(1)}}), (Values{-1, 1, -1, 1}));
}

// Round: ties to even (torch.round), zero gradient.
TEST(TDLSubgradient, RoundHalfToEven) {
  EXPECT_EQ(run("Round", {tensor(f32({8}), {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5,
                                            0.49999999999999994, -0.7})}),
            (Values{-2, -2, -0.0, 0, 2, 2, 0, -1}));
  auto g = grads("Round", {tensor(f32({2}), {0.5, 1})}, {4, 4});
  EXPECT_EQ(g[0], (Values{0, 0}));
}

// Sign, Floor and Ceil are piecewise constant: zero gradient (no NaN from a
// NaN or infinite dY either, as PyTorch's zeros).
TEST(TDLSubgradient, StepFunctionsHaveZeroGradient) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  for (const char *op : {"Sign", "Floor", "Ceil"}) {
    OpInstance inst = mustInstantiate(lib, op, {f32({3})});
    auto g = expandGradient(lib, inst);
    ASSERT_TRUE(bool(g)) << op << ": " << llvm::toString(g.takeError());
    ASSERT_EQ(g->calls.size(), 1u) << op;
    EXPECT_EQ(g->calls[0].op, "Zeros") << op;
  }
  EXPECT_EQ(run("Sign", {tensor(f32({3}), {-2, 0, 0.5})}),
            (std::vector<double>{-1, 0, 1}));
}
