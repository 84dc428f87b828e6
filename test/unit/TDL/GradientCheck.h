//===- GradientCheck.h - gradient rules vs central differences -*- C++ -*-===//
//
// The finite-difference check of GradientTest.cpp, for ops with several
// outputs: f(x) = sum over outputs o of sum(output_o * w_o) with random w,
// where outputs listed in `ignoredOutputs` (statistics such as
// LayerNormalization's Mean, whose gradients the rules do not propagate)
// get w = 0. Each gradient call of the expansion is evaluated in float64
// and every element of every input gradient is compared with a central
// difference (h = 1e-6).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TEST_UNIT_TDL_GRADIENTCHECK_H
#define TOFU_TEST_UNIT_TDL_GRADIENTCHECK_H

#include "TDLTestSupport.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <map>
#include <random>

namespace tofu::tdl::test {

struct GradProblem {
  std::string op;
  std::vector<std::optional<TensorType>> types;
  AttrMap attrs = {};
  /// Float inputs are drawn from [lo, hi).
  double lo = -1, hi = 1;
  /// Inputs without a gradient by definition (BatchNormalization's
  /// input_mean / input_var).
  std::vector<unsigned> noGrad = {};
  /// Outputs whose gradient the rule ignores (weight 0 in the objective).
  std::vector<unsigned> ignoredOutputs = {};
  /// Tolerance: |analytic - fd| <= tol * max(1, |fd|).
  double tol = 1e-6;
  /// Values of the const inputs (`: int const`), by input index; they have
  /// no gradient.
  std::map<unsigned, std::vector<double>> constValues = {};
  /// Integer inputs are drawn from [intLo, intLo + intRange).
  int64_t intLo = 0;
  int64_t intRange = 3;
  /// Float inputs keep |x| >= this (away from kinks such as Relu's).
  double awayFromZero = 0;
};

inline std::vector<DenseTensor>
gradCheckForward(const OpInstance &inst, const std::vector<DenseTensor> &in) {
  std::vector<const DenseTensor *> ptrs;
  for (size_t i = 0; i < in.size(); ++i)
    ptrs.push_back(inst.inputTypes()[i] ? &in[i] : nullptr);
  auto out = evaluate(inst, ptrs);
  EXPECT_TRUE(bool(out)) << (out ? "" : llvm::toString(out.takeError()));
  return out ? std::move(*out) : std::vector<DenseTensor>{};
}

/// Runs the check; returns the expansion (empty on failure).
inline GradExpansion checkGradientFD(const GradProblem &p, unsigned seed = 1) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(p.lo, p.hi);
  std::uniform_real_distribution<double> wuni(-1, 1);
  OpInstance inst =
      mustInstantiate(lib, p.op, p.types, p.attrs, p.constValues);
  std::vector<DenseTensor> in(p.types.size());
  for (size_t i = 0; i < p.types.size(); ++i) {
    if (!p.types[i])
      continue;
    in[i].type = *p.types[i];
    if (auto cv = p.constValues.find(unsigned(i)); cv != p.constValues.end()) {
      in[i].data = cv->second;
      continue;
    }
    int64_t n = 1;
    for (int64_t d : in[i].type.dims)
      n *= d;
    for (int64_t k = 0; k < n; ++k) {
      double v;
      if (isIntegerElem(in[i].type.elem)) {
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
  auto out = gradCheckForward(inst, in);
  std::vector<DenseTensor> w;
  for (size_t o = 0; o < out.size(); ++o) {
    DenseTensor t;
    t.type = out[o].type;
    bool ignored = llvm::is_contained(p.ignoredOutputs, unsigned(o));
    for (size_t k = 0; k < out[o].data.size(); ++k)
      t.data.push_back(ignored ? 0.0 : wuni(rng));
    w.push_back(std::move(t));
  }
  auto objective = [&](const std::vector<DenseTensor> &x) {
    auto y = gradCheckForward(inst, x);
    double f = 0;
    for (size_t o = 0; o < y.size(); ++o)
      for (size_t k = 0; k < y[o].data.size(); ++k)
        f += y[o].data[k] * w[o].data[k];
    return f;
  };

  auto g = expandGradient(lib, inst);
  if (!g) {
    ADD_FAILURE() << llvm::toString(g.takeError());
    return {};
  }
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
    OpInstance ci = mustInstantiate(lib, call.op, types, call.attrs);
    auto r = evaluate(ci, ptrs);
    if (!r) {
      ADD_FAILURE() << llvm::toString(r.takeError());
      return {};
    }
    temps.push_back(std::move((*r)[0]));
  }
  const double h = 1e-6;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!p.types[i] || !isFloatElem(p.types[i]->elem) ||
        llvm::is_contained(p.noGrad, unsigned(i)) ||
        p.constValues.count(unsigned(i))) {
      EXPECT_FALSE(g->inputGrads[i].has_value()) << p.op << " input " << i;
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
      double fd = (objective(plus) - objective(minus)) / (2 * h);
      EXPECT_NEAR(gi.data[k], fd, p.tol * std::max(1.0, std::fabs(fd)))
          << p.op << " input " << i << " element " << k;
    }
  }
  return std::move(*g);
}

inline AttrValue ints(std::vector<int64_t> v) {
  return AttrValue::ofInts(std::move(v));
}

} // namespace tofu::tdl::test

#endif
