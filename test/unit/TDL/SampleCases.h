//===- SampleCases.h - one or more sample instances per builtin op -*- C++ -*-===//
//
// Small instances of every builtin op with their random-input ranges, shared
// by tests that must run over all specs (program lowering vs evaluate).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TEST_UNIT_TDL_SAMPLECASES_H
#define TOFU_TEST_UNIT_TDL_SAMPLECASES_H

#include "TDLTestSupport.h"

#include <cmath>
#include <map>
#include <random>

namespace tofu::tdl::test {

inline int64_t numElements(const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

struct SampleCase {
  std::string op;
  std::vector<std::optional<TensorType>> types;
  AttrMap attrs;
  /// Integer / bool inputs are drawn from [intLo, intHi).
  int64_t intLo = 0, intHi = 3;
  /// Float inputs are drawn from [lo, hi).
  double lo = -1, hi = 1;
  /// Values of the const inputs (`: int const`), by input index; randomInputs
  /// gives those inputs these values.
  std::map<unsigned, std::vector<double>> constValues = {};
  /// Float inputs are drawn as integers in [lo, hi) instead: tie-rich data
  /// (equal cells, values exactly on 0 or a bound), which the ops with a
  /// kink or a tie must handle as their spec says.
  bool integerFloats = false;

  std::string describe() const {
    std::string s = op + "(";
    for (auto &t : types) {
      s += "[";
      if (t)
        for (int64_t d : t->dims)
          s += std::to_string(d) + " ";
      s += "]";
    }
    s += ")";
    for (auto &[k, v] : attrs)
      s += " " + k;
    return s;
  }
};

inline AttrValue I(int64_t v) { return AttrValue::ofInt(v); }
inline AttrValue F(double v) { return AttrValue::ofFloat(v); }
inline AttrValue S(std::string v) { return AttrValue::ofString(std::move(v)); }
inline AttrValue Is(std::vector<int64_t> v) {
  return AttrValue::ofInts(std::move(v));
}

/// Random values for the inputs of `c` (absent inputs stay empty).
inline std::vector<DenseTensor> randomInputs(const SampleCase &c,
                                             unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(c.lo, c.hi);
  std::vector<DenseTensor> in(c.types.size());
  for (size_t i = 0; i < c.types.size(); ++i) {
    if (!c.types[i])
      continue;
    in[i].type = *c.types[i];
    if (auto cv = c.constValues.find(unsigned(i)); cv != c.constValues.end()) {
      in[i].data = cv->second;
      continue;
    }
    for (int64_t k = 0; k < numElements(in[i].type.dims); ++k)
      in[i].data.push_back(
          isFloatElem(in[i].type.elem) && !c.integerFloats
              ? uni(rng)
          : isFloatElem(in[i].type.elem)
              ? std::floor(c.lo + double(rng() % uint64_t(c.hi - c.lo)))
              : double(c.intLo + int64_t(rng() % uint64_t(c.intHi - c.intLo))));
  }
  return in;
}

inline std::vector<SampleCase> sampleCases() {
  std::vector<SampleCase> cases = {
      {"Gemm", {f32({3, 4}), f32({4, 5}), f32({5})}},
      {"Gemm", {f32({4, 3}), f32({5, 4}), std::nullopt},
       {{"transA", I(1)}, {"transB", I(1)}, {"alpha", F(0.5)}}},
      {"Gemm", {f32({3, 4}), f32({5, 4}), f32({3, 5})},
       {{"transB", I(1)}, {"beta", F(2)}}},
      {"MatMul", {f32({3, 4}), f32({4, 2})}},
      // Explicit attributes: the native kernels (runtime/) do not yet accept
      // the spec defaults (empty lists) nor N-D transposes.
      {"Transpose", {f32({3, 4})}, {{"perm", Is({1, 0})}}},
      {"MatMul", {f32({2, 1, 3, 4}), f32({3, 4, 2})}},
      {"MatMul", {f32({4}), f32({2, 4, 3})}},
      {"MatMul", {f32({2, 3, 4}), f32({4})}},
      {"MatMul", {f32({4}), f32({4})}},
      {"Conv", {f32({2, 3, 7}), f32({4, 3, 3}), f32({4})},
       {{"strides", Is({1})}, {"pads", Is({0, 0})}, {"dilations", Is({1})},
        {"kernel_shape", Is({3})}}},
      {"Conv", {f32({1, 4, 6, 5}), f32({6, 2, 3, 2}), std::nullopt},
       {{"group", I(2)}, {"strides", Is({2, 1})}, {"pads", Is({1, 0, 1, 1})},
        {"dilations", Is({1, 2})}, {"kernel_shape", Is({3, 2})}}},
      {"ConvGradInput", {f32({2, 4, 4}), f32({4, 3, 3}), f32({2, 3, 7})},
       {{"strides", Is({2})}, {"pads", Is({1, 1})}, {"dilations", Is({1})},
        {"kernel_shape", Is({3})}}},
      {"ConvGradInput", {f32({1, 6, 3, 4}), f32({6, 2, 3, 2}),
                         f32({1, 4, 6, 5})},
       {{"group", I(2)}, {"strides", Is({2, 1})}, {"pads", Is({1, 0, 1, 1})},
        {"dilations", Is({1, 2})}, {"kernel_shape", Is({3, 2})}}},
      {"ConvGradWeight", {f32({2, 4, 4}), f32({2, 3, 7}), f32({4, 3, 3})},
       {{"strides", Is({2})}, {"pads", Is({1, 1})}, {"dilations", Is({1})},
        {"kernel_shape", Is({3})}}},
      {"ConvBiasGrad", {f32({2, 4, 3, 2})}},
      // Depthwise (group = C), strided, padded; and 2-D dilated with bias.
      {"Conv", {f32({2, 3, 8}), f32({3, 1, 3}), std::nullopt},
       {{"group", I(3)}, {"strides", Is({2})}, {"pads", Is({1, 1})}}},
      {"ConvGradInput", {f32({2, 3, 4}), f32({3, 1, 3}), f32({2, 3, 8})},
       {{"group", I(3)}, {"strides", Is({2})}, {"pads", Is({1, 1})}}},
      {"ConvGradWeight", {f32({2, 3, 4}), f32({2, 3, 8}), f32({3, 1, 3})},
       {{"group", I(3)}, {"strides", Is({2})}, {"pads", Is({1, 1})}}},
      {"Conv", {f32({1, 2, 7, 6}), f32({3, 2, 2, 3}), f32({3})},
       {{"dilations", Is({2, 1})}, {"strides", Is({1, 2})},
        {"pads", Is({0, 1, 1, 0})}}},
      {"ConvGradWeight", {f32({1, 3, 6, 3}), f32({1, 2, 7, 6}),
                          f32({3, 2, 2, 3})},
       {{"dilations", Is({2, 1})}, {"strides", Is({1, 2})},
        {"pads", Is({0, 1, 1, 0})}}},
      // Negative pads crop (ConvTranspose's gradient when output_shape
      // exceeds the default size): X [.., 10] with pads (0, -1) reads 9.
      {"Conv", {f32({2, 3, 10}), f32({4, 3, 3}), std::nullopt},
       {{"strides", Is({2})}, {"pads", Is({0, -1})}}},
      {"Conv", {f32({1, 2, 7, 6}), f32({3, 2, 2, 3}), std::nullopt},
       {{"strides", Is({2, 1})}, {"pads", Is({-1, 0, 0, -2})}}},
      {"ConvGradInput", {f32({2, 4, 4}), f32({4, 3, 3}), f32({2, 3, 10})},
       {{"strides", Is({2})}, {"pads", Is({0, -1})}}},
      {"ConvGradWeight", {f32({2, 4, 4}), f32({2, 3, 10}), f32({4, 3, 3})},
       {{"strides", Is({2})}, {"pads", Is({0, -1})}}},
      {"ConvGradWeight", {f32({1, 3, 3, 2}), f32({1, 2, 7, 6}),
                          f32({3, 2, 2, 3})},
       {{"strides", Is({2, 1})}, {"pads", Is({-1, 0, 0, -2})}}},
      {"ConvTranspose", {f32({1, 4, 3}), f32({4, 3, 3}), f32({6})},
       {{"group", I(2)}, {"strides", Is({2})}, {"pads", Is({1, 0})},
        {"output_padding", Is({1})}}},
      {"ConvTranspose", {f32({1, 2, 3, 3}), f32({2, 2, 3, 3}), f32({2})},
       {{"strides", Is({3, 2})}, {"output_shape", Is({10, 6})}}},
      {"ConvTranspose", {f32({1, 2, 3, 2}), f32({2, 1, 3, 3}), std::nullopt},
       {{"auto_pad", S("SAME_UPPER")}, {"strides", Is({2, 2})}}},
      {"Conv", {f32({1, 2, 6, 5}), f32({3, 2, 2, 3}), f32({3})},
       {{"auto_pad", S("SAME_LOWER")}, {"strides", Is({2, 1})}}},
      {"Add", {f32({2, 3}), f32({3})}},
      {"Add", {f32({2, 1}), f32({1, 3})}},
      {"Relu", {f32({2, 3})}},
      {"ReluGrad", {f32({2, 3}), f32({2, 3})}},
      {"Scale", {f32({4})}, {{"alpha", F(-3)}}},
      {"BiasGrad", {f32({3, 4})}},
      {"SoftmaxCrossEntropyLoss", {f32({3, 4}), i64({3})}, {}, -1, 4},
      {"SoftmaxCrossEntropyLoss", {f32({5, 3}), i64({5})}, {}, 0, 3},
      {"SoftmaxCrossEntropyLoss", {f32({4, 3, 2}), i64({4, 2}), f32({3})},
       {{"ignore_index", I(1)}}, 0, 3, 0.1, 2},
      {"SoftmaxCrossEntropyLoss", {f32({3, 4, 2, 2}), i64({3, 2, 2})},
       {{"reduction", S("sum")}, {"ignore_index", I(-1)}}, -1, 4},
      {"SoftmaxCrossEntropyLoss", {f32({2, 5, 3}), i64({2, 3}), f32({5})},
       {{"reduction", S("none")}, {"ignore_index", I(4)}}, 0, 5},
      {"SoftmaxCrossEntropyLossGrad", {f32({}), f32({3, 4}), i64({3})}, {},
       0, 4},
      {"SoftmaxCrossEntropyLossGrad",
       {f32({}), f32({4, 3, 2}), i64({4, 2}), f32({3})},
       {{"ignore_index", I(1)}}, 0, 3, 0.1, 2},
      {"SoftmaxCrossEntropyLossGrad", {f32({}), f32({3, 4, 2}), i64({3, 2})},
       {{"reduction", S("sum")}, {"ignore_index", I(-1)}}, -1, 4},
      {"SoftmaxCrossEntropyLossGrad",
       {f32({2, 3}), f32({2, 5, 3}), i64({2, 3}), f32({5})},
       {{"reduction", S("none")}, {"ignore_index", I(4)}}, 0, 5},
      {"SGDUpdate", {f32({2, 2}), f32({2, 2})}, {{"lr", F(0.25)}}},
      {"SGDUpdate", {f32({2, 2}), f32({2, 2})},
       {{"lr", F(0.25)}, {"norm_coefficient", F(0.5)}}},
      // Optimizers: T in [0, 3) covers the first step (T = 0); state >= 0.
      {"Momentum", {f32({}), i64({}), f32({2, 3}), f32({2, 3}), f32({2, 3})},
       {{"alpha", F(0.9)}, {"beta", F(0.5)}, {"mode", S("standard")},
        {"norm_coefficient", F(0.1)}}, 0, 3},
      {"Momentum", {f32({}), i64({}), f32({2, 3}), f32({2, 3}), f32({2, 3})},
       {{"alpha", F(0.9)}, {"beta", F(0.5)}, {"mode", S("nesterov")},
        {"norm_coefficient", F(0.1)}}, 0, 3},
      {"Adam", {f32({}), i64({}), f32({2, 3}), f32({2, 3}), f32({2, 3}),
                f32({2, 3})},
       {{"alpha", F(0.8)}, {"beta", F(0.9)}, {"norm_coefficient", F(0.1)},
        {"norm_coefficient_post", F(0.01)}}, 0, 3, 0, 1},
      {"Adagrad", {f32({}), i64({}), f32({2, 3}), f32({2, 3}), f32({2, 3})},
       {{"decay_factor", F(0.5)}, {"norm_coefficient", F(0.1)}}, 0, 3, 0, 1},
      {"StepCount", {i64({})}},
      {"Zeros", {f32({2, 3})}},
      {"Ones", {f32({2, 3})}},
      {"Unbroadcast", {f32({4, 2, 3}), f32({2, 1})}},
      {"Sub", {f32({2, 3}), f32({3})}},
      {"Mul", {f32({2, 1, 3}), f32({4, 1})}},
      {"Div", {f32({2, 3}), f32({2, 3})}},
      {"DivGradB", {f32({2, 3}), f32({2, 3}), f32({3})}},
      {"Pow", {f32({2, 3}), f32({3})}, {}, 0, 3, 0.5, 2},
      {"PowGradBase", {f32({3}), f32({3}), f32({3})}, {}, 0, 3, 0.5, 2},
      {"PowGradExponent", {f32({3}), f32({3}), f32({3}), f32({3})}, {}, 0, 3,
       0.5, 2},
      // Ties and kinks: small integers put A and B on 0.
      {"PowGradBase", {f32({12}), f32({12}), f32({12})}, {}, 0, 3, 0, 3, {},
       true},
      {"PowGradExponent", {f32({12}), f32({12}), f32({12}), f32({12})}, {}, 0,
       3, 0, 3, {}, true},
      {"Neg", {f32({3})}},
      {"Identity", {f32({3})}},
      {"Abs", {f32({3})}},
      {"AbsGrad", {f32({3}), f32({3})}},
      {"Sqrt", {f32({3})}, {}, 0, 3, 0.1, 2},
      {"SqrtGrad", {f32({3}), f32({3})}, {}, 0, 3, 0.1, 2},
      {"Exp", {f32({3})}},
      {"Log", {f32({3})}, {}, 0, 3, 0.1, 2},
      {"Tanh", {f32({3})}},
      {"TanhGrad", {f32({3}), f32({3})}},
      {"Sigmoid", {f32({3})}},
      {"SigmoidGrad", {f32({3}), f32({3})}},
      {"LeakyRelu", {f32({5})}, {{"alpha", F(0.2)}}},
      {"LeakyReluGrad", {f32({5}), f32({5})}},
      {"LeakyReluGrad", {f32({8}), f32({8})}, {{"alpha", F(0.25)}}, 0, 3, -1,
       2, {}, true},
      {"Erf", {f32({3})}},
      {"ErfGrad", {f32({3}), f32({3})}},
      {"Gelu", {f32({4})}},
      {"Gelu", {f32({4})}, {{"approximate", S("tanh")}}},
      {"GeluGrad", {f32({4}), f32({4})}, {{"approximate", S("tanh")}}},
      {"GeluGrad", {f32({4}), f32({4})}},
      {"Clip", {f32({6}), f32({}), f32({})}},
      {"Clip", {f32({6}), std::nullopt, f32({})}},
      {"ClipGrad", {f32({6}), f32({6}), f32({6})}},
      {"ClipGrad", {f32({12}), f32({12}), f32({12}), f32({}), f32({})}, {}, 0,
       3, 0, 3, {}, true},
      // Max / Min: broadcast, one input, ties (small integers).
      {"Max", {f32({2, 3}), f32({3})}, {}, 0, 3, 0, 3, {}, true},
      {"Max", {f32({4}), std::nullopt}},
      {"Min", {f32({2, 1}), f32({2, 3})}, {}, 0, 3, 0, 3, {}, true},
      {"MaxGrad", {f32({2, 3}), f32({2, 3}), f32({3})}, {}, 0, 3, 0, 3, {},
       true},
      {"MinGrad", {f32({2, 3}), f32({2, 1}), f32({2, 3})}, {}, 0, 3, 0, 3, {},
       true},
      {"Sign", {f32({6})}, {}, 0, 3, -1, 2, {}, true},
      {"Floor", {f32({5})}, {}, 0, 3, -3, 3},
      {"Ceil", {f32({5})}, {}, 0, 3, -3, 3},
      {"Where", {TensorType{{2, 3}, ElemType::Bool}, f32({3}), f32({2, 1})},
       {}, 0, 2},
      {"WhereGrad", {TensorType{{2, 3}, ElemType::Bool}, f32({2, 3})},
       {{"branch", I(1)}}, 0, 2},
      {"Equal", {f32({2, 3}), f32({3})}},
      {"Less", {f32({2, 3}), f32({3})}},
      {"Greater", {f32({2, 3}), f32({3})}},
      {"LessOrEqual", {f32({2, 3}), f32({3})}},
      {"GreaterOrEqual", {f32({2, 3}), f32({2, 3})}},
      // Shape ops (const inputs), Gather, Cast, NegativeLogLikelihoodLoss.
      {"ReshapeAs", {f32({2, 6}), f32({3, 4})}},
      {"Reshape", {f32({2, 3, 4}), i64({3})}, {}, 0, 3, -1, 1,
       {{1, {4, 0, -1}}}},
      {"Flatten", {f32({2, 3, 4})}, {{"axis", I(2)}}},
      {"Squeeze", {f32({2, 1, 3, 1}), i64({1})}, {}, 0, 3, -1, 1, {{1, {-1}}}},
      {"Unsqueeze", {f32({2, 3}), i64({2})}, {}, 0, 3, -1, 1, {{1, {0, 3}}}},
      {"Expand", {f32({3, 1}), i64({3})}, {}, 0, 3, -1, 1, {{1, {2, 1, 4}}}},
      {"Slice", {f32({5, 6}), i64({2}), i64({2}), i64({2}), i64({2})}, {}, 0,
       3, -1, 1, {{1, {1, -1}}, {2, {4, -7}}, {3, {0, 1}}, {4, {2, -2}}}},
      {"SliceGrad", {f32({2, 3}), f32({5, 6})},
       {{"starts", Is({1, 5})}, {"steps", Is({2, -2})}}},
      {"Pad", {f32({3, 4}), i64({4}), f32({})}, {}, 0, 3, -1, 1,
       {{1, {1, -1, 2, 1}}}},
      {"PadGrad", {f32({6, 4}), f32({3, 4})}, {{"begins", Is({1, -1})}}},
      // Pad's edge / reflect / wrap modes (min / max / abs / % indices) and
      // their scatter-add gradients.
      {"Pad", {f32({3, 4}), i64({4})},
       {{"mode", S("edge")}}, 0, 3, -1, 1,
       {{1, {2, -1, 1, 3}}}},
      {"Pad", {f32({3, 4}), i64({4})},
       {{"mode", S("reflect")}}, 0, 3, -1, 1,
       {{1, {5, 1, 2, 3}}}},
      {"Pad", {f32({3, 4}), i64({4})},
       {{"mode", S("wrap")}}, 0, 3, -1, 1,
       {{1, {4, 0, 1, 6}}}},
      {"PadGrad", {f32({6, 8}), f32({3, 4})},
       {{"begins", Is({2, -1})}, {"ends", Is({1, 5})},
        {"mode", S("edge")}}},
      {"PadGrad", {f32({11, 10}), f32({3, 4})},
       {{"begins", Is({5, 1})}, {"ends", Is({3, 5})},
        {"mode", S("reflect")}}},
      {"PadGrad", {f32({9, 11}), f32({3, 4})},
       {{"begins", Is({4, 0})}, {"ends", Is({2, 7})},
        {"mode", S("wrap")}}},
      // Variadic ops (tdl-specs/concat.tdl) and Dropout.
      {"Concat", {f32({2, 3}), f32({2, 1}), f32({2, 4})}, {{"axis", I(1)}}},
      {"Concat", {f32({1, 3}), f32({2, 3})}, {{"axis", I(-2)}}},
      {"Concat", {f32({4})}, {{"axis", I(0)}}},
      {"ConcatGrad", {f32({2, 8}), f32({2, 3})},
       {{"axis", I(1)}, {"offset", I(4)}}},
      {"Split", {f32({2, 7}), std::nullopt},
       {{"axis", I(1)}, {"num_outputs", I(3)}}},
      {"Split", {f32({6, 2}), i64({3})}, {}, 0, 3, -1, 1, {{1, {2, 1, 3}}}},
      {"Dropout", {f32({2, 3})}},
      {"Dropout", {f32({2, 3}), f32({}), TensorType{{}, ElemType::Bool}}, {},
       0, 3, -1, 1, {{1, {0.0}}, {2, {1}}}},
      {"Dropout", {f32({3, 7}), f32({}), TensorType{{}, ElemType::Bool}},
       {{"seed", I(42)}}, 0, 3, -1, 1, {{1, {0.5}}, {2, {1}}}},
      {"DropoutGrad", {f32({2, 5})}, {{"seed", I(1)}, {"ratio", F(0.3)}}},
      {"Gather", {f32({4, 3}), i64({2, 2})}, {}, -4, 4},
      {"GatherGrad", {f32({3, 2, 2}), i64({2}), f32({3, 4, 2})},
       {{"axis", I(1)}}, -4, 4},
      // Nearest upsampling by whole factors (// indices) and its gradient.
      // Linear / cubic resize (tdl-specs/resize-interp.tdl).
      {"ResizeInterp", {f32({1, 2, 3, 4})},
       {{"mode", S("linear")}, {"sizes", Is({1, 2, 5, 7})},
        {"coord_num", Is({1, 1, 6, 8})}, {"coord_off", Is({0, 0, -2, -3})},
        {"coord_den", Is({1, 1, 10, 14})}}},
      {"ResizeInterp", {f32({2, 6})},
       {{"mode", S("cubic")}, {"sizes", Is({2, 4})}, {"coord_num", Is({1, 3})},
        {"coord_off", Is({0, 0})}, {"coord_den", Is({1, 2})}}},
      {"ResizeInterpGrad", {f32({1, 2, 5, 7}), f32({1, 2, 3, 4})},
       {{"mode", S("cubic")}, {"sizes", Is({1, 2, 5, 7})},
        {"coord_num", Is({1, 1, 6, 8})}, {"coord_off", Is({0, 0, -2, -3})},
        {"coord_den", Is({1, 1, 10, 14})}}},
      {"ResizeInterp", {f32({2, 5})},
       {{"mode", S("nearest")}, {"sizes", Is({2, 3})}, {"coord_num", Is({1, 10})},
        {"coord_off", Is({0, 3})}, {"coord_den", Is({1, 6})}}},
      {"ResizeInterpGrad", {f32({2, 3}), f32({2, 5})},
       {{"mode", S("nearest")}, {"sizes", Is({2, 3})}, {"coord_num", Is({1, 10})},
        {"coord_off", Is({0, 3})}, {"coord_den", Is({1, 6})}}},
      {"ResizeInterpGrad", {f32({2, 4}), f32({2, 6})},
       {{"mode", S("linear")}, {"sizes", Is({2, 4})}, {"coord_num", Is({1, 3})},
        {"coord_off", Is({0, 0})}, {"coord_den", Is({1, 2})}}},
      {"ResizeNearest", {f32({1, 2, 2, 3})}, {{"factors", Is({1, 1, 2, 3})}}},
      {"ResizeNearest", {f32({2, 3}), i64({2})}, {}, 0, 3, -1, 1,
       {{1, {6, 3}}}},
      {"ResizeNearestGrad", {f32({1, 2, 4, 9}), f32({1, 2, 2, 3})},
       {{"factors", Is({1, 1, 2, 3})}}},
      {"Cast", {f32({5})}, {{"to", I(7)}}, 0, 3, -3, 3},
      {"Cast", {i64({4})}, {{"to", I(1)}}},
      {"Cast", {f32({4})}, {{"to", I(9)}}, 0, 3, -1, 1},
      {"CastLike", {i64({4}), f32({1})}},
      {"NegativeLogLikelihoodLoss", {f32({3, 4}), i64({3})}, {}, 0, 4},
      {"NegativeLogLikelihoodLoss", {f32({2, 3, 2}), i64({2, 2})},
       {{"reduction", S("none")}, {"ignore_index", I(1)}}},
      {"NegativeLogLikelihoodLossGrad", {f32({}), f32({3, 4}), i64({3})},
       {{"ignore_index", I(2)}}, 0, 4},
      {"NegativeLogLikelihoodLossGrad",
       {f32({2, 2}), f32({2, 3, 2}), i64({2, 2})}, {{"reduction", S("none")}}},
      {"NegativeLogLikelihoodLoss", {f32({4, 3, 2}), i64({4, 2}), f32({3})},
       {{"ignore_index", I(1)}}, 0, 3, 0.1, 2},
      {"NegativeLogLikelihoodLoss", {f32({3, 4}), i64({3}), f32({4})},
       {{"reduction", S("sum")}}, 0, 4},
      {"NegativeLogLikelihoodLossGrad",
       {f32({}), f32({4, 3, 2}), i64({4, 2}), f32({3})},
       {{"ignore_index", I(1)}}, 0, 3, 0.1, 2},
      {"NegativeLogLikelihoodLossWeightGrad",
       {f32({}), f32({4, 3, 2}), i64({4, 2}), f32({3}), f32({})},
       {{"ignore_index", I(1)}}, 0, 3, 0.1, 2},
      {"NegativeLogLikelihoodLossWeightGrad",
       {f32({}), f32({3, 4}), i64({3}), f32({4})},
       {{"reduction", S("sum")}}, 0, 4},
      {"NegativeLogLikelihoodLossWeightGrad",
       {f32({2, 2}), f32({2, 3, 2}), i64({2, 2}), f32({3})},
       {{"reduction", S("none")}, {"ignore_index", I(-1)}}, -1, 3},
      // Softmax, reductions (tdl-specs/reduce.tdl).
      {"Softmax", {f32({2, 3, 4})}, {{"axis", I(1)}}},
      {"Softmax", {f32({3, 5})}},
      {"SoftmaxGrad", {f32({2, 3}), f32({2, 3})}, {{"axis", I(0)}}},
      {"LogSoftmax", {f32({2, 3, 4})}},
      {"LogSoftmax", {f32({4, 3})}, {{"axis", I(0)}}},
      {"LogSoftmaxGrad", {f32({2, 3}), f32({2, 3})}},
      {"Softmax", {f32({7})}, {}, 0, 3, -4, 4},
      {"Softmax", {f32({2, 3, 4, 5})}, {{"axis", I(0)}}, 0, 3, -4, 4},
      {"Softmax", {f32({2, 3, 4})}, {{"axis", I(-2)}}},
      {"LogSoftmax", {f32({3, 2, 6})}, {{"axis", I(2)}}, 0, 3, -4, 4},
      {"LogSoftmax", {f32({5})}},
      {"SoftmaxGrad", {f32({3, 4, 2}), f32({3, 4, 2})}, {{"axis", I(1)}}},
      {"SoftmaxGrad", {f32({6}), f32({6})}},
      {"LogSoftmaxGrad", {f32({2, 5, 3}), f32({2, 5, 3})}, {{"axis", I(-2)}}},
      {"LogSoftmaxGrad", {f32({4, 3}), f32({4, 3})}, {{"axis", I(0)}}},
      {"ReduceSum", {f32({2, 3, 4}), i64({2})}, {{"keepdims", I(0)}}, 0, 3,
       -1, 1, {{1, {1, -1}}}},
      {"ReduceSum", {f32({2, 3}), std::nullopt}},
      {"ReduceSum", {f32({2, 3}), i64({0})}, {{"noop_with_empty_axes", I(1)}},
       0, 3, -1, 1, {{1, {}}}},
      {"ReduceSumGrad", {f32({2}), f32({2, 3, 4})},
       {{"axes", Is({1, -1})}, {"keepdims", I(0)}}},
      {"ReduceMean", {f32({2, 3, 4})}, {{"axes", Is({0})}}},
      {"ReduceMean", {f32({3, 2})}, {{"keepdims", I(0)}}},
      {"ReduceMeanGrad", {f32({1, 3, 4}), f32({2, 3, 4})}, {{"axes", Is({0})}}},
      {"ReduceMax", {f32({2, 3, 4})}, {{"axes", Is({2, 0})}}},
      {"ReduceMax", {f32({2, 3})}, {{"keepdims", I(0)}}},
      {"ReduceMaxGrad", {f32({2, 3}), f32({2, 3, 4}), f32({2, 3})},
       {{"axes", Is({-1})}, {"keepdims", I(0)}}},
      {"ReduceMaxGrad", {f32({1, 3, 1}), f32({2, 3, 4}), f32({1, 3, 1})},
       {{"axes", Is({0, 2})}}, 0, 3, 0, 3, {}, true},
      // More reductions (tdl-specs/reduce-extra.tdl).
      {"ReduceMin", {f32({2, 3, 4})}, {{"axes", Is({2, 0})}}},
      {"ReduceMin", {f32({2, 3})}, {{"keepdims", I(0)}}, 0, 3, -2, 2, {}, true},
      {"ReduceProd", {f32({2, 3, 4})}, {{"axes", Is({1})}}},
      {"ReduceProd", {f32({3, 2})}, {{"keepdims", I(0)}}},
      {"ReduceProdGrad", {f32({2, 1, 4}), f32({2, 3, 4})}, {{"axes", Is({1})}},
       0, 3, -2, 2, {}, true},
      {"ReduceL1", {f32({2, 3, 4})}, {{"axes", Is({-1})}, {"keepdims", I(0)}}},
      {"ReduceL2", {f32({2, 3, 4})}, {{"axes", Is({0, 2})}}},
      {"ReduceL2Grad", {f32({2, 1}), f32({2, 3}), f32({2, 1})},
       {{"axes", Is({1})}}, 0, 3, 0.5, 2},
      {"ReduceSumSquare", {f32({2, 3})}, {{"axes", Is({0})}}},
      {"ReduceLogSum", {f32({2, 3, 4})}, {{"axes", Is({1})}}, 0, 3, 0.1, 2},
      {"ReduceLogSumExp", {f32({2, 3, 4})}, {{"axes", Is({1, 2})}}, 0, 3, -4, 4},
      {"ReduceLogSumExp", {f32({3, 2})}, {{"keepdims", I(0)}}},
      {"ReduceLogSumExpGrad", {f32({2}), f32({2, 3}), f32({2})},
       {{"axes", Is({1})}, {"keepdims", I(0)}}},
      // Normalizations (tdl-specs/norm.tdl).
      {"LayerNormalization", {f32({2, 3, 4}), f32({4}), f32({4})}},
      {"LayerNormalization", {f32({2, 3, 4}), f32({3, 4}), std::nullopt},
       {{"axis", I(1)}, {"epsilon", F(0.01)}}},
      {"LayerNormalizationGrad",
       {f32({2, 3, 4}), f32({2, 3, 4}), f32({4}), f32({2, 3, 1}),
        f32({2, 3, 1})}},
      {"BatchNormalization",
       {f32({2, 3, 2, 2}), f32({3}), f32({3}), f32({3}), f32({3})},
       {}, 0, 3, 0.1, 1},
      {"BatchNormalization",
       {f32({2, 3, 4}), f32({3}), f32({3}), f32({3}), f32({3})},
       {{"training_mode", I(1)}, {"momentum", F(0.8)}}},
      {"BatchNormalizationNormalized", {f32({2, 3, 4}), f32({3}), f32({3})},
       {{"training_mode", I(1)}}},
      {"BatchNormalization",
       {f32({3, 2, 2, 3}), f32({2}), f32({2}), f32({2}), f32({2})},
       {{"training_mode", I(1)}, {"epsilon", F(0.01)}}, 0, 3, 0.1, 1},
      {"BatchNormalization", {f32({4, 3}), f32({3}), f32({3}), f32({3}), f32({3})},
       {}, 0, 3, 0.1, 1},
      {"BatchNormalizationGrad",
       {f32({3, 2, 2, 3}), f32({3, 2, 2, 3}), f32({2}), f32({2}), f32({2})},
       {{"training_mode", I(1)}}},
      {"LayerNormalization", {f32({3, 2, 4}), f32({3, 2, 4}), f32({3, 2, 4})},
       {{"axis", I(0)}}},
      {"LayerNormalization", {f32({2, 5}), f32({5}), std::nullopt},
       {{"axis", I(-1)}}},
      {"LayerNormalizationGrad",
       {f32({2, 3, 4}), f32({2, 3, 4}), f32({3, 4}), f32({2, 1, 1}),
        f32({2, 1, 1})},
       {{"axis", I(1)}}},
      {"BatchNormalizationNormalized", {f32({2, 3}), f32({3}), f32({3})},
       {}, 0, 3, 0.1, 1},
      {"BatchNormalizationGrad",
       {f32({2, 3, 4}), f32({2, 3, 4}), f32({3}), f32({3}), f32({3})},
       {{"training_mode", I(1)}}},
      {"BatchNormalizationGrad",
       {f32({2, 3, 4}), f32({2, 3, 4}), f32({3}), f32({3}), f32({3})},
       {}, 0, 3, 0.1, 1},
      // More normalizations (tdl-specs/norm-extra.tdl).
      {"InstanceNormalization", {f32({2, 3, 4}), f32({3}), f32({3})}},
      {"InstanceNormalization", {f32({1, 2, 3, 2}), f32({2}), f32({2})},
       {{"epsilon", F(0.01)}}},
      {"GroupNormalization", {f32({2, 6, 3}), f32({6}), f32({6})},
       {{"num_groups", I(2)}}},
      {"GroupNormalization", {f32({2, 4, 2, 2}), f32({2}), f32({2})},
       {{"num_groups", I(2)}, {"epsilon", F(0.1)}}},
      {"GroupNormalizationNormalized", {f32({2, 6, 3})}, {{"num_groups", I(3)}}},
      {"GroupNormalizationGrad", {f32({2, 6, 3}), f32({2, 6, 3}), f32({6})},
       {{"num_groups", I(2)}}},
      {"GroupNormalizationGrad", {f32({1, 4, 2, 2}), f32({1, 4, 2, 2}), f32({2})},
       {{"num_groups", I(2)}}},
      {"GroupNormalizationParamGrad", {f32({2, 6, 3}), f32({6})},
       {{"num_groups", I(3)}}},
      {"GroupNormalizationParamGrad", {f32({2, 6, 3}), f32({3})},
       {{"num_groups", I(3)}}},
      {"LpNormalization", {f32({2, 3, 4})}},
      {"LpNormalization", {f32({3, 4})}, {{"axis", I(0)}, {"p", I(1)}}},
      {"LpNormalizationGrad", {f32({2, 3}), f32({2, 3}), f32({2, 3})},
       {{"p", I(1)}}},
      {"LpNormalizationGrad", {f32({2, 3}), f32({2, 3}), f32({2, 3})},
       {{"axis", I(0)}}},
      // Lp pooling (tdl-specs/pool-lp.tdl).
      {"LpPool", {f32({1, 2, 5, 5})},
       {{"kernel_shape", Is({3, 2})}, {"strides", Is({2, 1})},
        {"pads", Is({1, 0, 1, 1})}}},
      {"LpPool", {f32({1, 1, 6, 5})},
       {{"kernel_shape", Is({2, 2})}, {"strides", Is({2, 2})},
        {"dilations", Is({2, 1})}, {"ceil_mode", I(1)}, {"p", I(3)}}},
      {"LpPoolGrad", {f32({1, 2, 3, 5}), f32({1, 2, 5, 5}), f32({1, 2, 3, 5})},
       {{"kernel_shape", Is({3, 2})}, {"strides", Is({2, 1})},
        {"pads", Is({1, 0, 1, 1})}}, 0, 3, 0.1, 1},
      {"GlobalLpPool", {f32({2, 3, 2, 2})}},
      {"GlobalLpPool", {f32({2, 3, 4})}, {{"p", I(1)}}},
      {"GlobalLpPoolGrad", {f32({2, 3, 1}), f32({2, 3, 4}), f32({2, 3, 1})},
       {}, 0, 3, 0.1, 1},
      // Pooling (tdl-specs/pool.tdl).
      {"MaxPool", {f32({1, 2, 5, 5})},
       {{"kernel_shape", Is({3, 3})}, {"strides", Is({2, 2})},
        {"pads", Is({1, 1, 1, 1})}}},
      {"MaxPool", {f32({2, 2, 7})},
       {{"kernel_shape", Is({2})}, {"strides", Is({2})},
        {"dilations", Is({2})}, {"ceil_mode", I(1)}}},
      {"MaxPool", {f32({1, 1, 5, 4})},
       {{"kernel_shape", Is({2, 3})}, {"auto_pad", S("SAME_UPPER")}}},
      {"MaxPoolGrad", {f32({1, 2, 3, 3}), f32({1, 2, 5, 5}), f32({1, 2, 3, 3})},
       {{"kernel_shape", Is({3, 3})}, {"strides", Is({2, 2})},
        {"pads", Is({1, 1, 1, 1})}}},
      {"AveragePool", {f32({1, 2, 5, 5})},
       {{"kernel_shape", Is({3, 2})}, {"strides", Is({2, 1})},
        {"pads", Is({1, 0, 1, 1})}}},
      {"AveragePool", {f32({1, 2, 6})},
       {{"kernel_shape", Is({3})}, {"strides", Is({2})}, {"pads", Is({1, 1})},
        {"ceil_mode", I(1)}, {"count_include_pad", I(1)}}},
      {"AveragePoolGrad", {f32({1, 2, 3, 5}), f32({1, 2, 5, 5})},
       {{"kernel_shape", Is({3, 2})}, {"strides", Is({2, 1})},
        {"pads", Is({1, 0, 1, 1})}}},
      {"MaxPool", {f32({1, 2, 4, 5})},
       {{"kernel_shape", Is({2, 2})}, {"storage_order", I(1)},
        {"dilations", Is({2, 1})}}},
      {"MaxPool", {f32({1, 1, 4, 3, 4})},
       {{"kernel_shape", Is({2, 2, 2})}, {"strides", Is({2, 1, 2})}}},
      {"MaxPoolGrad", {f32({2, 2, 3}), f32({2, 2, 7}), f32({2, 2, 3})},
       {{"kernel_shape", Is({2})}, {"strides", Is({2})},
        {"dilations", Is({2})}, {"ceil_mode", I(1)}}},
      {"AveragePool", {f32({1, 1, 6, 6})},
       {{"kernel_shape", Is({2, 2})}, {"dilations", Is({2, 2})},
        {"strides", Is({1, 2})}, {"pads", Is({1, 0, 0, 1})}}},
      {"AveragePoolGrad", {f32({1, 1, 5, 3}), f32({1, 1, 6, 6})},
       {{"kernel_shape", Is({2, 2})}, {"dilations", Is({2, 2})},
        {"strides", Is({1, 2})}, {"pads", Is({1, 0, 0, 1})}}},
      {"AveragePoolGrad", {f32({1, 2, 4}), f32({1, 2, 6})},
       {{"kernel_shape", Is({3})}, {"strides", Is({2})}, {"pads", Is({1, 1})},
        {"ceil_mode", I(1)}, {"count_include_pad", I(1)}}},
      {"GlobalAveragePool", {f32({2, 3, 4, 2})}},
      {"GlobalAveragePoolGrad", {f32({2, 3, 1, 1}), f32({2, 3, 4, 2})}},
      {"GlobalMaxPool", {f32({2, 3, 5})}},
      {"GlobalMaxPoolGrad", {f32({2, 3, 1}), f32({2, 3, 5}), f32({2, 3, 1})}},
      {"GlobalMaxPoolGrad",
       {f32({2, 2, 1, 1}), f32({2, 2, 3, 4}), f32({2, 2, 1, 1})}, {}, 0, 3, 0,
       3, {}, true},
      // MaxPoolGrad on tie-rich data (small integers: X often equals Y in
      // several cells of a window, which must not all receive dY): stride 1
      // with padding and ceil_mode as in GoogLeNet's inception pools,
      // strided and dilated, 1-D with SAME_LOWER.
      {"MaxPoolGrad", {f32({1, 2, 5, 5}), f32({1, 2, 5, 5}), f32({1, 2, 5, 5})},
       {{"kernel_shape", Is({3, 3})}, {"strides", Is({1, 1})},
        {"pads", Is({1, 1, 1, 1})}, {"ceil_mode", I(1)}},
       0, 3, 0, 3, {}, true},
      {"MaxPoolGrad", {f32({1, 2, 3, 3}), f32({1, 2, 5, 5}), f32({1, 2, 3, 3})},
       {{"kernel_shape", Is({3, 3})}, {"strides", Is({2, 2})},
        {"pads", Is({1, 1, 1, 1})}},
       0, 3, 0, 3, {}, true},
      {"MaxPoolGrad", {f32({2, 2, 3}), f32({2, 2, 7}), f32({2, 2, 3})},
       {{"kernel_shape", Is({2})}, {"strides", Is({2})},
        {"dilations", Is({2})}, {"ceil_mode", I(1)}},
       0, 3, 0, 2, {}, true},
      {"MaxPoolGrad", {f32({1, 1, 6}), f32({1, 1, 6}), f32({1, 1, 6})},
       {{"kernel_shape", Is({4})}, {"auto_pad", S("SAME_LOWER")}},
       0, 3, 0, 2, {}, true},
  };
  return cases;
}

} // namespace tofu::tdl::test

#endif
