//===- StaticEvaluator.cpp - TDL compile-time expressions -------------------===//
//
// Integer arithmetic stays integer (division floors, as for output shapes
// such as `(W - K) / stride + 1`); any float operand makes the result float.
// Comparisons and logical operators give the integers 0 and 1. Strings and
// shapes support only `==` and `!=`.
//
//===----------------------------------------------------------------------===//
#include "StaticEvaluator.h"

#include <cmath>

using namespace tofu::tdl;

StaticValue StaticValue::ofAttr(const AttrValue &a) {
  StaticValue v;
  switch (a.kind) {
  case AttrValue::Kind::Int:
    v.kind = Kind::Int;
    v.i = a.i;
    break;
  case AttrValue::Kind::Float:
    v.kind = Kind::Float;
    v.f = a.f;
    break;
  case AttrValue::Kind::String:
    v.kind = Kind::String;
    v.s = a.s;
    break;
  case AttrValue::Kind::Ints:
    v.kind = Kind::Ints;
    v.shape = a.ints;
    break;
  }
  return v;
}

std::optional<AttrValue> StaticValue::toAttr(AttrValue::Kind want) const {
  switch (want) {
  case AttrValue::Kind::Int:
    if (kind == Kind::Int)
      return AttrValue::ofInt(i);
    if (kind == Kind::Float && f == std::floor(f))
      return AttrValue::ofInt(static_cast<int64_t>(f));
    return std::nullopt;
  case AttrValue::Kind::Float:
    if (isNumber())
      return AttrValue::ofFloat(asDouble());
    return std::nullopt;
  case AttrValue::Kind::String:
    if (kind == Kind::String)
      return AttrValue::ofString(s);
    return std::nullopt;
  case AttrValue::Kind::Ints:
    if (kind == Kind::Ints || kind == Kind::Shape)
      return AttrValue::ofInts(shape);
    return std::nullopt;
  }
  return std::nullopt;
}

std::string StaticValue::str() const {
  switch (kind) {
  case Kind::Int:
    return std::to_string(i);
  case Kind::Float: {
    char buf[64];
    snprintf(buf, sizeof(buf), "%g", f);
    return buf;
  }
  case Kind::String:
    return "\"" + s + "\"";
  case Kind::Shape:
  case Kind::Ints: {
    std::string r = "[";
    for (size_t k = 0; k < shape.size(); ++k)
      r += (k ? ", " : "") + std::to_string(shape[k]);
    return r + "]";
  }
  }
  return "?";
}

static int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0)))
    --q;
  return q;
}

static bool truthy(const StaticValue &v) {
  return v.isNumber() ? v.asDouble() != 0 : true;
}

llvm::Expected<StaticValue> tofu::tdl::evalStatic(const Expr &e,
                                                  const StaticEnv &env) {
  using SK = StaticValue::Kind;
  switch (e.kind) {
  case Expr::Kind::Number:
    return e.isInt ? StaticValue::ofInt(static_cast<int64_t>(e.num))
                   : StaticValue::ofFloat(e.num);
  case Expr::Kind::String: {
    StaticValue v;
    v.kind = SK::String;
    v.s = e.name;
    return v;
  }
  case Expr::Kind::Ident: {
    if (auto v = env.lookup(e.name))
      return *v;
    return makeSpecError(e.loc, "'" + e.name +
                                    "' has no value at instantiation");
  }
  case Expr::Kind::Neg: {
    auto v = evalStatic(*e.args[0], env);
    if (!v)
      return v.takeError();
    if (v->kind == SK::Int)
      return StaticValue::ofInt(-v->i);
    if (v->kind == SK::Float)
      return StaticValue::ofFloat(-v->f);
    return makeSpecError(e.loc, "cannot negate " + v->str());
  }
  case Expr::Kind::Not: {
    auto v = evalStatic(*e.args[0], env);
    if (!v)
      return v.takeError();
    return StaticValue::ofInt(!truthy(*v));
  }
  case Expr::Kind::Cond: {
    auto c = evalCondition(*e.args[0], env);
    if (!c)
      return c.takeError();
    return evalStatic(*e.args[*c ? 1 : 2], env);
  }
  case Expr::Kind::Binary: {
    auto l = evalStatic(*e.args[0], env);
    if (!l)
      return l.takeError();
    if (e.op == BinOp::And || e.op == BinOp::Or) {
      // Short-circuit, so that `rank(C) == 2 && dim(C, 1) == ...` is safe.
      bool lv = truthy(*l);
      if (e.op == BinOp::And ? !lv : lv)
        return StaticValue::ofInt(lv);
      auto r = evalStatic(*e.args[1], env);
      if (!r)
        return r.takeError();
      return StaticValue::ofInt(truthy(*r));
    }
    auto r = evalStatic(*e.args[1], env);
    if (!r)
      return r.takeError();
    if (!l->isNumber() || !r->isNumber()) {
      if (e.op != BinOp::Eq && e.op != BinOp::Ne)
        return makeSpecError(e.loc, llvm::Twine("operator '") +
                                        binOpSpelling(e.op) +
                                        "' needs numbers, found " + l->str() +
                                        " and " + r->str());
      bool eq;
      if (l->kind == SK::String && r->kind == SK::String)
        eq = l->s == r->s;
      else if ((l->kind == SK::Shape || l->kind == SK::Ints) &&
               (r->kind == SK::Shape || r->kind == SK::Ints))
        eq = l->shape == r->shape;
      else
        return makeSpecError(e.loc, "cannot compare " + l->str() + " with " +
                                        r->str());
      return StaticValue::ofInt(e.op == BinOp::Eq ? eq : !eq);
    }
    bool ints = l->kind == SK::Int && r->kind == SK::Int;
    double a = l->asDouble(), b = r->asDouble();
    switch (e.op) {
    case BinOp::Add:
      return ints ? StaticValue::ofInt(l->i + r->i) : StaticValue::ofFloat(a + b);
    case BinOp::Sub:
      return ints ? StaticValue::ofInt(l->i - r->i) : StaticValue::ofFloat(a - b);
    case BinOp::Mul:
      return ints ? StaticValue::ofInt(l->i * r->i) : StaticValue::ofFloat(a * b);
    case BinOp::Div:
      if (ints) {
        if (r->i == 0)
          return makeSpecError(e.loc, "division by zero");
        return StaticValue::ofInt(floorDiv(l->i, r->i));
      }
      return StaticValue::ofFloat(a / b);
    case BinOp::Eq: return StaticValue::ofInt(a == b);
    case BinOp::Ne: return StaticValue::ofInt(a != b);
    case BinOp::Lt: return StaticValue::ofInt(a < b);
    case BinOp::Le: return StaticValue::ofInt(a <= b);
    case BinOp::Gt: return StaticValue::ofInt(a > b);
    case BinOp::Ge: return StaticValue::ofInt(a >= b);
    default: break;
    }
    return makeSpecError(e.loc, "unsupported operator");
  }
  case Expr::Kind::Call: {
    if (e.name == "present" && e.args.size() == 1 &&
        e.args[0]->kind == Expr::Kind::Ident && env.tensorShape)
      return StaticValue::ofInt(env.tensorShape(e.args[0]->name).has_value());
    if ((e.name == "rank" || e.name == "shape" || e.name == "dim") &&
        !e.args.empty() && e.args[0]->kind == Expr::Kind::Ident &&
        env.tensorShape) {
      auto shape = env.tensorShape(e.args[0]->name);
      if (!shape)
        return makeSpecError(e.args[0]->loc, "tensor '" + e.args[0]->name +
                                                 "' is absent or unknown");
      if (e.name == "rank")
        return StaticValue::ofInt(static_cast<int64_t>(shape->size()));
      if (e.name == "shape") {
        StaticValue v;
        v.kind = SK::Shape;
        v.shape = *shape;
        return v;
      }
      auto d = evalStatic(*e.args[1], env);
      if (!d)
        return d.takeError();
      if (d->kind != SK::Int)
        return makeSpecError(e.args[1]->loc, "dim() needs an integer");
      int64_t k = d->i < 0 ? d->i + int64_t(shape->size()) : d->i;
      if (k < 0 || k >= int64_t(shape->size()))
        return makeSpecError(e.args[1]->loc,
                             "dim " + std::to_string(d->i) +
                                 " out of range for rank " +
                                 std::to_string(shape->size()));
      return StaticValue::ofInt((*shape)[k]);
    }
    return makeSpecError(e.loc, "function '" + e.name +
                                    "' cannot be evaluated at instantiation");
  }
  case Expr::Kind::Access:
  case Expr::Kind::Reduce:
  case Expr::Kind::Splat:
    return makeSpecError(e.loc, "expression cannot be evaluated at "
                                "instantiation");
  }
  return makeSpecError(e.loc, "expression cannot be evaluated");
}

llvm::Expected<bool> tofu::tdl::evalCondition(const Expr &e,
                                              const StaticEnv &env) {
  auto v = evalStatic(e, env);
  if (!v)
    return v.takeError();
  if (!v->isNumber())
    return makeSpecError(e.loc, "condition is " + v->str() +
                                    ", not a number");
  return v->asDouble() != 0;
}
