//===- Evaluator.cpp - TDL reference evaluator ------------------------------===//
//
// Interprets the lowered expression of every output element in float64. It
// is slow by design and serves as the oracle that kernels are tested
// against. Out-of-range reads (padding) read 0; reductions over an empty
// range give the reducer's identity.
//
//===----------------------------------------------------------------------===//
#include "InstanceIR.h"

#include "tofu/runtime/CounterRng.h"
#include "tofu/runtime/ElementAccess.h"

#include <cmath>
#include <limits>

using namespace tofu::tdl;

double tofu::tdl::convertToElem(double v, ElemType t) {
  // Through the runtime's store and load, so that the reference evaluator
  // rounds, truncates and wraps exactly as tofu-run does.
  auto dtype = static_cast<tofu::plan::DType>(t);
  uint64_t slot = 0;
  tofu::runtime::storeElement(&slot, dtype, 0, v);
  return tofu::runtime::loadElement(&slot, dtype, 0);
}

namespace {

int64_t numElements(const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

class Evaluator {
public:
  Evaluator(const OpInstance::Impl &impl, const LoweredStmt &s,
            llvm::ArrayRef<const DenseTensor *> inputs)
      : impl(impl), inputs(inputs), env(s.vars.size(), 0) {}

  std::vector<int64_t> &vars() { return env; }

  double value(const LExpr &e) {
    switch (e.kind) {
    case LExpr::Kind::Const:
      return e.value;
    case LExpr::Kind::Var:
      return static_cast<double>(env[e.var]);
    case LExpr::Kind::Access:
      return access(e);
    case LExpr::Kind::Neg:
      return -value(*e.ops[0]);
    case LExpr::Kind::FloorDiv:
      return std::floor(value(*e.ops[0]) / value(*e.ops[1]));
    case LExpr::Kind::Binary: {
      double a = value(*e.ops[0]);
      double b = value(*e.ops[1]);
      switch (e.op) {
      case BinOp::Add: return a + b;
      case BinOp::Sub: return a - b;
      case BinOp::Mul: return a * b;
      case BinOp::Div: return a / b;
      case BinOp::Eq: return a == b;
      case BinOp::Ne: return a != b;
      case BinOp::Lt: return a < b;
      case BinOp::Le: return a <= b;
      case BinOp::Gt: return a > b;
      case BinOp::Ge: return a >= b;
      case BinOp::And: return (a != 0) && (b != 0);
      case BinOp::Or: return (a != 0) || (b != 0);
      case BinOp::FloorDiv: return std::floor(a / b);
      case BinOp::Mod: return a - b * std::floor(a / b);
      case BinOp::Pow: return std::pow(a, b);
      }
      return 0;
    }
    case LExpr::Kind::Call: {
      if (e.fn == Fn::Select)
        return value(*e.ops[0]) != 0 ? value(*e.ops[1]) : value(*e.ops[2]);
      double a = value(*e.ops[0]);
      switch (e.fn) {
      case Fn::Exp: return std::exp(a);
      case Fn::Log: return std::log(a);
      case Fn::Sqrt: return std::sqrt(a);
      case Fn::Tanh: return std::tanh(a);
      case Fn::Abs: return std::fabs(a);
      case Fn::Max: return std::max(a, value(*e.ops[1]));
      case Fn::Min: return std::min(a, value(*e.ops[1]));
      case Fn::Erf: return std::erf(a);
      case Fn::Sigmoid: return 1 / (1 + std::exp(-a));
      case Fn::Floor: return std::floor(a);
      case Fn::Ceil: return std::ceil(a);
      case Fn::Uniform: return tofu::rng::counterUniform(a, value(*e.ops[1]));
      case Fn::Select: break;
      }
      return 0;
    }
    case LExpr::Kind::Reduce: {
      double acc = 0;
      switch (e.reducer) {
      case ReduceKind::Sum: acc = 0; break;
      case ReduceKind::Prod: acc = 1; break;
      case ReduceKind::Max: acc = -std::numeric_limits<double>::infinity(); break;
      case ReduceKind::Min: acc = std::numeric_limits<double>::infinity(); break;
      }
      reduce(e, 0, acc);
      return acc;
    }
    case LExpr::Kind::Slice:
    case LExpr::Kind::Opaque:
      break; // rejected by evaluate() before evaluation
    }
    return 0;
  }

private:
  void reduce(const LExpr &e, size_t k, double &acc) {
    if (k == e.redVars.size()) {
      double v = value(*e.ops[0]);
      switch (e.reducer) {
      case ReduceKind::Sum: acc += v; break;
      case ReduceKind::Prod: acc *= v; break;
      case ReduceKind::Max: acc = std::max(acc, v); break;
      case ReduceKind::Min: acc = std::min(acc, v); break;
      }
      return;
    }
    unsigned var = e.redVars[k];
    int64_t extent = extents[var];
    for (int64_t i = 0; i < extent; ++i) {
      env[var] = i;
      reduce(e, k + 1, acc);
    }
  }

  double access(const LExpr &e) {
    const DenseTensor &t = *inputs[e.tensor];
    int64_t offset = 0;
    for (size_t d = 0; d < e.ops.size(); ++d) {
      auto i = static_cast<int64_t>(std::floor(value(*e.ops[d])));
      int64_t size = t.type.dims[d];
      if (i < 0 || i >= size)
        return 0; // padding
      offset = offset * size + i;
    }
    return t.data[offset];
  }

public:
  std::vector<int64_t> extents;

private:
  const OpInstance::Impl &impl;
  llvm::ArrayRef<const DenseTensor *> inputs;
  std::vector<int64_t> env;
};

} // namespace

llvm::Expected<std::vector<DenseTensor>>
tofu::tdl::evaluate(const OpInstance &op,
                    llvm::ArrayRef<const DenseTensor *> inputs) {
  const OpInstance::Impl &impl = *op.impl;
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "evaluate " + impl.spec->name + ": " +
                                       msg.str());
  };
  if (inputs.size() > impl.inputTypes.size())
    return fail("too many inputs");
  std::vector<const DenseTensor *> in(impl.inputTypes.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i)
    in[i] = inputs[i];
  for (size_t i = 0; i < in.size(); ++i) {
    const auto &want = impl.inputTypes[i];
    if (!want) {
      if (in[i])
        return fail("input " + impl.inputNames[i] +
                    " was absent at instantiation but is given");
      continue;
    }
    if (!in[i])
      return fail("input " + impl.inputNames[i] + " is missing");
    if (in[i]->type.dims != want->dims)
      return fail("input " + impl.inputNames[i] +
                  " has a different shape than at instantiation");
    if (static_cast<int64_t>(in[i]->data.size()) != numElements(want->dims))
      return fail("input " + impl.inputNames[i] + " holds " +
                  std::to_string(in[i]->data.size()) + " values, expected " +
                  std::to_string(numElements(want->dims)));
  }
  for (size_t o = 0; o < impl.stmts.size(); ++o)
    if (containsOpaque(*impl.stmts[o].value))
      return fail("output " + impl.outputNames[o] +
                  " is opaque(...): its computation is hidden from TDL, so "
                  "there is no reference evaluation (a native kernel "
                  "computes it)");
  std::vector<DenseTensor> outputs;
  for (size_t o = 0; o < impl.stmts.size(); ++o) {
    const LoweredStmt &s = impl.stmts[o];
    DenseTensor out;
    out.type = impl.outputTypes[o];
    int64_t n = numElements(out.type.dims);
    out.data.resize(static_cast<size_t>(n));
    Evaluator ev(impl, s, in);
    for (auto &v : s.vars)
      ev.extents.push_back(v.extent);
    const auto &dims = out.type.dims;
    for (int64_t flat = 0; flat < n; ++flat) {
      int64_t rest = flat;
      for (size_t d = dims.size(); d-- > 0;) {
        ev.vars()[s.outVars[d]] = rest % dims[d];
        rest /= dims[d];
      }
      double v = ev.value(*s.value);
      // Integer and bool outputs convert as the runtime stores them
      // (truncation, wrap-around); float outputs keep float64 precision, so
      // that the reference stays exact for finite-difference checks.
      if (!isFloatElem(out.type.elem))
        v = convertToElem(v, out.type.elem);
      out.data[static_cast<size_t>(flat)] = v;
    }
    outputs.push_back(std::move(out));
  }
  return outputs;
}
