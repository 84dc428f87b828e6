//===- StaticEvaluator.cpp - TDL compile-time expressions -------------------===//
//
// Integer arithmetic stays integer (division floors, as for output shapes
// such as `(W - K) / stride + 1`); any float operand makes the result float.
// Comparisons and logical operators give the integers 0 and 1. Strings and
// shapes support only `==` and `!=`.
//
//===----------------------------------------------------------------------===//
#include "StaticEvaluator.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
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

/// The most iterations a static comprehension or reduction runs (they
/// compute shapes and attribute lists, which have a few elements per
/// dimension).
static constexpr int64_t kMaxStaticLoopExtent = int64_t(1) << 16;

static int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0)))
    --q;
  return q;
}

static bool truthy(const StaticValue &v) {
  return v.isNumber() ? v.asDouble() != 0 : true;
}

StaticEnv tofu::tdl::bindLocal(const StaticEnv &env, llvm::StringRef name,
                               int64_t value) {
  StaticEnv inner = env;
  inner.lookup = [outer = env.lookup, name = name.str(),
                  value](llvm::StringRef n) -> std::optional<StaticValue> {
    if (n == name)
      return StaticValue::ofInt(value);
    return outer(n);
  };
  return inner;
}

bool tofu::tdl::isStaticFunction(llvm::StringRef name) {
  return llvm::is_contained(
      {"present", "rank", "shape", "dim", "len", "at", "contains", "indexof",
       "range", "reverse", "slice", "broadcast", "gather", "normaxis", "swap",
       "max", "min", "concat", "prod", "inverse", "typecode"},
      name);
}

static StaticValue makeList(std::vector<int64_t> v) {
  StaticValue r;
  r.kind = StaticValue::Kind::Ints;
  r.shape = std::move(v);
  return r;
}

/// The static functions of TDL (see docs/TDL.md, "Static expressions").
static llvm::Expected<StaticValue> evalStaticFunction(const Expr &e,
                                                      const StaticEnv &env) {
  using SK = StaticValue::Kind;
  if (e.name == "present" && e.args.size() == 1 &&
      e.args[0]->kind == Expr::Kind::Ident && env.tensorShape)
    return StaticValue::ofInt(env.tensorShape(e.args[0]->name).has_value());
  if (e.name == "typecode") {
    if (e.args.size() != 1 || e.args[0]->kind != Expr::Kind::Ident)
      return makeSpecError(e.loc, "typecode(T) takes one tensor name");
    std::optional<int64_t> code;
    if (env.tensorTypeCode)
      code = env.tensorTypeCode(e.args[0]->name);
    if (!code)
      return makeSpecError(e.args[0]->loc,
                           "typecode(" + e.args[0]->name +
                               "): the element type is known in gradient "
                               "rules only, of a present input or output");
    return StaticValue::ofInt(*code);
  }
  if (e.name == "len" && e.args.size() == 1 &&
      e.args[0]->kind == Expr::Kind::Ident && env.variadicCount)
    if (auto n = env.variadicCount(e.args[0]->name))
      return StaticValue::ofInt(*n);
  if ((e.name == "rank" || e.name == "shape" || e.name == "dim") &&
      !e.args.empty() &&
      (e.args[0]->kind == Expr::Kind::Ident ||
       (e.args[0]->kind == Expr::Kind::Access && e.args[0]->args.size() == 1 &&
        !e.args[0]->select)) &&
      env.tensorShape) {
    // `inputs[k]`: element k of a variadic tensor, known as "inputs[k]".
    std::string name = e.args[0]->name;
    if (e.args[0]->kind == Expr::Kind::Access) {
      auto k = evalStatic(*e.args[0]->args[0], env);
      if (!k)
        return k.takeError();
      if (k->kind != SK::Int)
        return makeSpecError(e.args[0]->loc, "element index must be an "
                                             "integer");
      name += "[" + std::to_string(k->i) + "]";
    }
    auto shape = env.tensorShape(name);
    if (!shape)
      return makeSpecError(e.args[0]->loc, "tensor '" + name +
                                               "' is absent or unknown");
    if (e.name == "rank")
      return StaticValue::ofInt(static_cast<int64_t>(shape->size()));
    if (e.name == "shape") {
      StaticValue v;
      v.kind = SK::Shape;
      v.shape = *shape;
      return v;
    }
    if (e.args.size() != 2)
      return makeSpecError(e.loc, "dim(T, i) takes two arguments");
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
  std::vector<StaticValue> a;
  for (auto &arg : e.args) {
    auto v = evalStatic(*arg, env);
    if (!v)
      return v.takeError();
    a.push_back(std::move(*v));
  }
  auto isList = [&](size_t k) {
    return k < a.size() && (a[k].kind == SK::Ints || a[k].kind == SK::Shape);
  };
  auto isInt = [&](size_t k) { return k < a.size() && a[k].kind == SK::Int; };
  auto bad = [&](const char *sig) {
    return makeSpecError(e.loc, llvm::Twine("expected ") + sig);
  };
  auto norm = [](int64_t i, int64_t n) { return i < 0 ? i + n : i; };
  const std::string &f = e.name;
  if (f == "len") {
    if (a.size() != 1 || !isList(0))
      return bad("len(list)");
    return StaticValue::ofInt(static_cast<int64_t>(a[0].shape.size()));
  }
  if (f == "at") {
    if (a.size() != 3 || !isList(0) || !isInt(1))
      return bad("at(list, index, default)");
    int64_t i = a[1].i;
    if (i < 0 || i >= int64_t(a[0].shape.size()))
      return a[2];
    return StaticValue::ofInt(a[0].shape[i]);
  }
  if (f == "contains" || f == "indexof") {
    if (a.size() != 2 || !isList(0) || !isInt(1))
      return bad("contains(list, int) / indexof(list, int)");
    auto &l = a[0].shape;
    auto it = std::find(l.begin(), l.end(), a[1].i);
    if (f == "contains")
      return StaticValue::ofInt(it != l.end());
    return StaticValue::ofInt(it == l.end() ? -1 : it - l.begin());
  }
  if (f == "range") {
    if (a.size() != 1 || !isInt(0))
      return bad("range(n)");
    std::vector<int64_t> r;
    for (int64_t k = 0; k < a[0].i; ++k)
      r.push_back(k);
    return makeList(std::move(r));
  }
  if (f == "reverse") {
    if (a.size() != 1 || !isList(0))
      return bad("reverse(list)");
    return makeList({a[0].shape.rbegin(), a[0].shape.rend()});
  }
  if (f == "slice") {
    if (a.size() != 3 || !isList(0) || !isInt(1) || !isInt(2))
      return bad("slice(list, begin, end)");
    int64_t n = static_cast<int64_t>(a[0].shape.size());
    int64_t lo = std::clamp<int64_t>(norm(a[1].i, n), 0, n);
    int64_t hi = std::clamp<int64_t>(norm(a[2].i, n), 0, n);
    if (hi < lo)
      hi = lo;
    return makeList({a[0].shape.begin() + lo, a[0].shape.begin() + hi});
  }
  if (f == "concat") {
    if (a.size() != 2 || !isList(0) || !isList(1))
      return bad("concat(list, list)");
    std::vector<int64_t> r = a[0].shape;
    r.insert(r.end(), a[1].shape.begin(), a[1].shape.end());
    return makeList(std::move(r));
  }
  if (f == "broadcast") {
    if (a.size() != 2 || !isList(0) || !isList(1))
      return bad("broadcast(list, list)");
    auto &x = a[0].shape, &y = a[1].shape;
    size_t n = std::max(x.size(), y.size());
    std::vector<int64_t> r(n, 1);
    for (size_t k = 0; k < n; ++k) {
      int64_t p = k + x.size() >= n ? x[k + x.size() - n] : 1;
      int64_t q = k + y.size() >= n ? y[k + y.size() - n] : 1;
      if (p != q && p != 1 && q != 1)
        return makeSpecError(e.loc, "shapes " + a[0].str() + " and " +
                                        a[1].str() +
                                        " are not broadcastable");
      r[k] = p == 1 ? q : p;
    }
    return makeList(std::move(r));
  }
  if (f == "gather") {
    if (a.size() != 2 || !isList(0) || !isList(1))
      return bad("gather(list, indices)");
    std::vector<int64_t> r;
    int64_t n = static_cast<int64_t>(a[0].shape.size());
    for (int64_t i : a[1].shape) {
      int64_t k = norm(i, n);
      if (k < 0 || k >= n)
        return makeSpecError(e.loc, "index " + std::to_string(i) +
                                        " out of range for " + a[0].str());
      r.push_back(a[0].shape[k]);
    }
    return makeList(std::move(r));
  }
  if (f == "swap") {
    if (a.size() != 3 || !isList(0) || !isInt(1) || !isInt(2))
      return bad("swap(list, i, j)");
    std::vector<int64_t> r = a[0].shape;
    int64_t n = static_cast<int64_t>(r.size());
    int64_t i = norm(a[1].i, n), j = norm(a[2].i, n);
    if (i < 0 || i >= n || j < 0 || j >= n)
      return makeSpecError(e.loc, "swap index out of range for " +
                                      a[0].str());
    std::swap(r[i], r[j]);
    return makeList(std::move(r));
  }
  if (f == "inverse") {
    if (a.size() != 1 || !isList(0))
      return bad("inverse(permutation)");
    int64_t n = static_cast<int64_t>(a[0].shape.size());
    std::vector<int64_t> r(n, -1);
    for (int64_t k = 0; k < n; ++k) {
      int64_t v = a[0].shape[k];
      if (v < 0 || v >= n || r[v] >= 0)
        return makeSpecError(e.loc, a[0].str() + " is not a permutation");
      r[v] = k;
    }
    return makeList(std::move(r));
  }
  if (f == "normaxis") {
    if (a.size() != 2 || !isInt(0) || !isInt(1))
      return bad("normaxis(axis, rank)");
    return StaticValue::ofInt(norm(a[0].i, a[1].i));
  }
  if (f == "prod") {
    if (a.size() != 1 || !isList(0))
      return bad("prod(list)");
    int64_t p = 1;
    for (int64_t v : a[0].shape)
      if (__builtin_mul_overflow(p, v, &p))
        return makeSpecError(e.loc, "integer overflow: prod(" + a[0].str() +
                                        ") does not fit in 64 bits");
    return StaticValue::ofInt(p);
  }
  if (f == "max" || f == "min") {
    if (a.size() != 2 || !a[0].isNumber() || !a[1].isNumber())
      return bad("max(a, b) / min(a, b) of numbers");
    bool first = f == "max" ? a[0].asDouble() >= a[1].asDouble()
                            : a[0].asDouble() <= a[1].asDouble();
    return first ? a[0] : a[1];
  }
  return makeSpecError(e.loc, "function '" + e.name +
                                  "' cannot be evaluated at instantiation");
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
    if (v->kind == SK::Int) {
      if (v->i == INT64_MIN)
        return makeSpecError(e.loc, "integer overflow: -(" +
                                        std::to_string(v->i) +
                                        ") does not fit in 64 bits");
      return StaticValue::ofInt(-v->i);
    }
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
    // Integer arithmetic is checked: a shape computed from huge attributes
    // or dims is refused, never wrapped around (N * 2^62 was 0).
    int64_t checked = 0;
    auto overflow = [&]() {
      return makeSpecError(e.loc, llvm::Twine("integer overflow: ") +
                                      std::to_string(l->i) + " " +
                                      binOpSpelling(e.op) + " " +
                                      std::to_string(r->i) +
                                      " does not fit in 64 bits");
    };
    switch (e.op) {
    case BinOp::Add:
      if (!ints)
        return StaticValue::ofFloat(a + b);
      if (__builtin_add_overflow(l->i, r->i, &checked))
        return overflow();
      return StaticValue::ofInt(checked);
    case BinOp::Sub:
      if (!ints)
        return StaticValue::ofFloat(a - b);
      if (__builtin_sub_overflow(l->i, r->i, &checked))
        return overflow();
      return StaticValue::ofInt(checked);
    case BinOp::Mul:
      if (!ints)
        return StaticValue::ofFloat(a * b);
      if (__builtin_mul_overflow(l->i, r->i, &checked))
        return overflow();
      return StaticValue::ofInt(checked);
    case BinOp::Div:
      if (ints) {
        if (r->i == 0)
          return makeSpecError(e.loc, "division by zero");
        if (l->i == INT64_MIN && r->i == -1)
          return overflow();
        return StaticValue::ofInt(floorDiv(l->i, r->i));
      }
      return StaticValue::ofFloat(a / b);
    case BinOp::FloorDiv:
    case BinOp::Mod: {
      if (ints) {
        if (r->i == 0)
          return makeSpecError(e.loc, "division by zero");
        if (l->i == INT64_MIN && r->i == -1)
          return overflow();
        int64_t q = floorDiv(l->i, r->i);
        return StaticValue::ofInt(e.op == BinOp::Mod ? l->i - q * r->i : q);
      }
      double q = std::floor(a / b);
      return StaticValue::ofFloat(e.op == BinOp::Mod ? a - q * b : q);
    }
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
    return evalStaticFunction(e, env);
  }
  case Expr::Kind::Access: {
    // An element of a static list: `perm[d]` (negative indices count from
    // the end).
    auto l = env.lookup(e.name);
    if (!l || (l->kind != SK::Ints && l->kind != SK::Shape) ||
        e.args.size() != 1)
      return makeSpecError(e.loc, "expression cannot be evaluated at "
                                  "instantiation");
    auto k = evalStatic(*e.args[0], env);
    if (!k)
      return k.takeError();
    if (k->kind != SK::Int)
      return makeSpecError(e.args[0]->loc, "list index must be an integer");
    int64_t n = static_cast<int64_t>(l->shape.size());
    int64_t i = k->i < 0 ? k->i + n : k->i;
    if (i < 0 || i >= n)
      return makeSpecError(e.args[0]->loc,
                           "index " + std::to_string(k->i) +
                               " out of range for " + l->str());
    return StaticValue::ofInt(l->shape[i]);
  }
  case Expr::Kind::For: {
    auto n = evalStatic(*e.vars[0].second, env);
    if (!n)
      return n.takeError();
    if (n->kind != SK::Int)
      return makeSpecError(e.vars[0].second->loc,
                           "comprehension count must be an integer");
    if (n->i > kMaxStaticLoopExtent)
      return makeSpecError(e.vars[0].second->loc,
                           "comprehension count " + std::to_string(n->i) +
                               " is over the limit of " +
                               std::to_string(kMaxStaticLoopExtent));
    StaticValue list;
    list.kind = SK::Ints;
    for (int64_t d = 0; d < n->i; ++d) {
      StaticEnv inner = bindLocal(env, e.vars[0].first, d);
      if (e.args.size() > 1) {
        auto keep = evalCondition(*e.args[1], inner);
        if (!keep)
          return keep.takeError();
        if (!*keep)
          continue;
      }
      auto v = evalStatic(*e.args[0], inner);
      if (!v)
        return v.takeError();
      if (v->kind != SK::Int)
        return makeSpecError(e.args[0]->loc,
                             "list element is " + v->str() +
                                 ", not an integer");
      list.shape.push_back(v->i);
    }
    return list;
  }
  case Expr::Kind::Reduce: {
    // A static reduction over integer variables: `sum(k: n) cond(k)`.
    std::vector<std::pair<std::string, int64_t>> vars;
    for (auto &[name, extent] : e.vars) {
      auto n = evalStatic(*extent, env);
      if (!n)
        return n.takeError();
      if (n->kind != SK::Int || name[0] == '*')
        return makeSpecError(extent->loc, "static reduction needs integer "
                                          "extents");
      vars.emplace_back(name, n->i);
    }
    // The iterations of all variables together are bounded (`for(d: 10^9)`
    // would run for minutes).
    int64_t iterations = 1;
    for (auto &[name, extent] : vars)
      if (extent > 0 &&
          (__builtin_mul_overflow(iterations, extent, &iterations) ||
           iterations > kMaxStaticLoopExtent))
        return makeSpecError(e.loc, "static reduction of more than " +
                                        std::to_string(kMaxStaticLoopExtent) +
                                        " iterations");
    double acc = e.reducer == ReduceKind::Sum    ? 0
                 : e.reducer == ReduceKind::Prod ? 1
                 : e.reducer == ReduceKind::Max  ? -INFINITY
                                                 : INFINITY;
    bool allInt = true;
    std::vector<int64_t> at(vars.size(), 0);
    bool empty = llvm::any_of(vars, [](auto &v) { return v.second <= 0; });
    while (!empty) {
      StaticEnv inner = env;
      for (size_t k = 0; k < vars.size(); ++k)
        inner = bindLocal(inner, vars[k].first, at[k]);
      auto v = evalStatic(*e.args[0], inner);
      if (!v)
        return v.takeError();
      if (!v->isNumber())
        return makeSpecError(e.args[0]->loc, "static reduction of " +
                                                 v->str());
      allInt &= v->kind == SK::Int;
      double x = v->asDouble();
      switch (e.reducer) {
      case ReduceKind::Sum: acc += x; break;
      case ReduceKind::Prod: acc *= x; break;
      case ReduceKind::Max: acc = std::max(acc, x); break;
      case ReduceKind::Min: acc = std::min(acc, x); break;
      }
      size_t k = vars.size();
      while (k > 0 && ++at[k - 1] == vars[k - 1].second)
        at[--k] = 0;
      if (k == 0)
        break;
    }
    if (allInt && std::isfinite(acc))
      return StaticValue::ofInt(static_cast<int64_t>(acc));
    return StaticValue::ofFloat(acc);
  }
  case Expr::Kind::Splat:
  case Expr::Kind::Slice:
  case Expr::Kind::Opaque:
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
