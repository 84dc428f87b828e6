//===- SpecChecker.cpp - TDL semantic checks --------------------------------===//
//
// Scope and well-formedness checks run right after parsing, so that every
// spec error is reported against the spec with file:line:col rather than at
// instantiation. Index expressions are classified as constant or affine in
// the index variables; a product of two index expressions, a division by
// one, a comparison, a function call or a tensor access inside an index is
// rejected (the interval analysis of paper §4.2 supports only ±k, ×k, ÷k and
// ±interval).
//
//===----------------------------------------------------------------------===//
#include "SpecChecker.h"
#include "StaticEvaluator.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"

#include <algorithm>
#include <set>

using namespace tofu::tdl;

namespace {

/// Constant: static; Affine: affine in the index variables; Data: depends on
/// tensor values (a data-dependent index such as Gather's) or is not affine
/// (`%`); the interval analysis over-approximates the last kind by the whole
/// extent of the dimension it indexes.
enum class IndexClass { Constant, Affine, Data };

class OpChecker {
public:
  explicit OpChecker(const OpSpec &op) : op(op) {}
  llvm::Error run();

private:
  llvm::Error checkStatic(const Expr &e);
  llvm::Error checkValue(const Expr &e);
  llvm::Expected<IndexClass> checkIndex(const Expr &e);
  llvm::Error checkNewName(const std::string &name, const Loc &loc,
                           const char *what);
  bool isVar(llvm::StringRef n) const { return llvm::is_contained(vars, n); }
  bool isStatic(llvm::StringRef n) const {
    return llvm::is_contained(statics, n);
  }
  bool isSplatName(llvm::StringRef n) const {
    return (!splat.empty() && n == splat) || llvm::is_contained(redSplats, n);
  }
  /// A static list: an `ints` attribute or a let (checked at instantiation).
  bool isListName(llvm::StringRef n) const {
    const AttrDecl *a = op.findAttr(n);
    return (a && a->kind == AttrValue::Kind::Ints) || isStatic(n);
  }
  /// An input read at run time (not a const input).
  bool isTensor(llvm::StringRef n) const {
    int in = op.findInput(n);
    return in >= 0 && !op.inputs[in].isConst;
  }
  llvm::Error checkStaticCall(const Expr &e);
  llvm::Error checkFor(const Expr &e, bool indexBody);
  /// `opaque(A[b, :, :])[i, j]`: arguments are input accesses (`:` allowed
  /// in them only), the result indices are index expressions.
  llvm::Error checkOpaque(const Expr &e);

  const OpSpec &op;
  std::set<std::string> scalarSyms, rankSyms;
  std::vector<std::string> vars;
  std::string splat;
  /// Names with a static integer value: lets and comprehension variables.
  std::vector<std::string> statics;
  /// Reduction splats in scope (`sum(*r: for(...) ...)`).
  std::vector<std::string> redSplats;
  /// Checking an argument of opaque(...): `:` indices are allowed.
  bool inOpaque = false;
};

} // namespace

llvm::Error OpChecker::checkNewName(const std::string &name, const Loc &loc,
                                    const char *what) {
  const char *clash = nullptr;
  if (op.findInput(name) >= 0)
    clash = "an input";
  else if (op.findAttr(name))
    clash = "an attribute";
  else if (scalarSyms.count(name) || rankSyms.count(name))
    clash = "a shape symbol";
  else if (isVar(name))
    clash = "an index variable";
  else if (isStatic(name))
    clash = "a let or comprehension variable";
  if (clash)
    return makeSpecError(loc, llvm::Twine(what) + " '" + name +
                                  "' has the same name as " + clash);
  return llvm::Error::success();
}

llvm::Error OpChecker::run() {
  std::set<std::string> seen;
  for (auto &in : op.inputs) {
    if (!seen.insert(in.name).second)
      return makeSpecError(in.loc, "duplicate input '" + in.name + "'");
  }
  for (auto &a : op.attrs) {
    if (!seen.insert(a.name).second)
      return makeSpecError(a.loc, "attribute '" + a.name +
                                      "' has the same name as another "
                                      "input or attribute");
  }
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const InputDecl &in = op.inputs[i];
    if (!in.variadic)
      continue;
    if (i + 1 != op.inputs.size())
      return makeSpecError(in.loc, "only the last input may be variadic");
    if (in.optional || in.isConst)
      return makeSpecError(in.loc, "a variadic input cannot be optional or "
                                   "const");
  }
  for (size_t o = 0; o < op.outputs.size(); ++o) {
    if (op.outputs[o].count && o + 1 != op.outputs.size())
      return makeSpecError(op.outputs[o].loc,
                           "only the last output may be variadic");
    if (o > 0 && op.outputs[o - 1].optional && !op.outputs[o].optional)
      return makeSpecError(op.outputs[o].loc,
                           "required output '" + op.outputs[o].name +
                               "' follows an optional one; optional outputs "
                               "come last");
  }
  if (!op.outputs.empty() && op.outputs[0].optional)
    return makeSpecError(op.outputs[0].loc,
                         "the first output cannot be optional");
  for (auto &in : op.inputs) {
    unsigned splats = 0;
    for (auto &d : in.dims) {
      if (d.kind == DimDecl::Kind::Constant)
        continue;
      if (seen.count(d.name))
        return makeSpecError(d.loc, "shape symbol '" + d.name +
                                        "' has the same name as an input or "
                                        "attribute");
      if (d.kind == DimDecl::Kind::Splat) {
        if (++splats > 1)
          return makeSpecError(d.loc, "an input shape may contain at most "
                                      "one '*' symbol");
        if (scalarSyms.count(d.name))
          return makeSpecError(d.loc, "'" + d.name +
                                          "' is used both as a dimension and "
                                          "as a rank symbol");
        rankSyms.insert(d.name);
      } else {
        if (rankSyms.count(d.name))
          return makeSpecError(d.loc, "'" + d.name +
                                          "' is used both as a dimension and "
                                          "as a rank symbol");
        scalarSyms.insert(d.name);
      }
    }
  }
  for (auto &in : op.inputs)
    if (in.isConst)
      statics.push_back(in.name);
  for (auto &let : op.lets) {
    if (auto e = checkStatic(*let.value))
      return e;
    if (auto e = checkNewName(let.name, let.loc, "let"))
      return e;
    statics.push_back(let.name);
  }
  for (auto &out : op.outputs) {
    if (!seen.insert(out.name).second || scalarSyms.count(out.name))
      return makeSpecError(out.loc, "output '" + out.name +
                                        "' has the same name as an input, "
                                        "attribute or shape symbol");
    if (out.count) {
      if (auto e = checkStatic(*out.count))
        return e;
      if (auto e = checkNewName(out.countVar, out.loc, "element variable"))
        return e;
    }
    if (out.count)
      statics.push_back(out.countVar);
    llvm::scope_exit popCount([&] {
      if (out.count)
        statics.pop_back();
    });
    for (auto &d : out.dims) {
      if (d->kind == Expr::Kind::Splat && !d->args.empty()) {
        if (auto e = checkStatic(*d->args[0]))
          return e;
        continue;
      }
      if (d->kind == Expr::Kind::Splat) {
        if (!rankSyms.count(d->name) && !isStatic(d->name))
          return makeSpecError(d->loc, "unknown rank symbol '*" + d->name +
                                           "' (declare it in an input shape "
                                           "or as a let)");
        continue;
      }
      if (auto e = checkStatic(*d))
        return e;
    }
  }
  for (auto &c : op.constraints)
    if (auto e = checkStatic(*c.cond))
      return e;

  std::vector<const BodyStmt *> byOutput(op.outputs.size(), nullptr);
  for (auto &s : op.body) {
    if (byOutput[s.output])
      return makeSpecError(s.loc, "output '" + op.outputs[s.output].name +
                                      "' is defined twice");
    byOutput[s.output] = &s;
  }
  for (unsigned i = 0; i < op.outputs.size(); ++i)
    if (!byOutput[i])
      return makeSpecError(op.loc, "output '" + op.outputs[i].name +
                                       "' of '" + op.name +
                                       "' has no defining statement");

  for (auto &s : op.body) {
    const OutputDecl &out = op.outputs[s.output];
    vars.clear();
    splat.clear();
    if (!s.elementVar.empty())
      if (auto e = checkNewName(s.elementVar, s.loc, "element variable"))
        return e;
    if (!s.elementVar.empty())
      statics.push_back(s.elementVar);
    llvm::scope_exit popElement([&] {
      if (!s.elementVar.empty())
        statics.pop_back();
    });
    for (auto &idx : s.indices) {
      if (idx[0] == '*') {
        if (!splat.empty())
          return makeSpecError(s.loc, "at most one '*' index per statement");
        splat = idx.substr(1);
        if (auto e = checkNewName(splat, s.loc, "index variable"))
          return e;
        continue;
      }
      if (auto e = checkNewName(idx, s.loc, "index variable"))
        return e;
      vars.push_back(idx);
    }
    bool fixedRank =
        out.broadcastOf.empty() &&
        llvm::none_of(out.dims, [](const ExprPtr &d) {
          return d->kind == Expr::Kind::Splat;
        });
    if (fixedRank && splat.empty() && s.indices.size() != out.dims.size())
      return makeSpecError(s.loc, "wrong number of indices for output '" +
                                      out.name + "': expected " +
                                      std::to_string(out.dims.size()) +
                                      ", found " +
                                      std::to_string(s.indices.size()));
    if (!fixedRank && splat.empty())
      return makeSpecError(s.loc, "output '" + out.name +
                                      "' has a rank known only at "
                                      "instantiation: index it with '*i'");
    if (auto e = checkValue(*s.value))
      return e;
  }
  return llvm::Error::success();
}

llvm::Error OpChecker::checkStatic(const Expr &e) {
  switch (e.kind) {
  case Expr::Kind::Number:
  case Expr::Kind::String:
    return llvm::Error::success();
  case Expr::Kind::Ident:
    if (scalarSyms.count(e.name) || op.findAttr(e.name) || isStatic(e.name))
      return llvm::Error::success();
    if (isVar(e.name))
      return makeSpecError(e.loc, "condition or extent must depend only on "
                                  "attributes and shape symbols, not on "
                                  "index variable '" +
                                      e.name + "'");
    if (op.findInput(e.name) >= 0)
      return makeSpecError(e.loc, "condition or extent must depend only on "
                                  "attributes and shape symbols, not on "
                                  "tensor '" +
                                      e.name + "'");
    return makeSpecError(e.loc, "unknown identifier '" + e.name + "'");
  case Expr::Kind::Neg:
  case Expr::Kind::Not:
  case Expr::Kind::Binary:
  case Expr::Kind::Cond:
    for (auto &a : e.args)
      if (auto err = checkStatic(*a))
        return err;
    return llvm::Error::success();
  case Expr::Kind::Access:
    if (isListName(e.name) && e.args.size() == 1 &&
        e.args[0]->kind != Expr::Kind::Splat)
      return checkStatic(*e.args[0]);
    return makeSpecError(e.loc, "tensor access '" + e.name +
                                    "[...]' is not allowed here: conditions, "
                                    "shapes and extents depend only on "
                                    "attributes and shape symbols");
  case Expr::Kind::Call:
    return checkStaticCall(e);
  case Expr::Kind::For:
    return checkFor(e, /*indexBody=*/false);
  case Expr::Kind::Reduce: {
    size_t before = statics.size();
    for (auto &[name, extent] : e.vars) {
      if (name[0] == '*')
        return makeSpecError(extent->loc, "a reduction splat is not allowed "
                                          "in a shape, extent or condition");
      if (auto err = checkStatic(*extent))
        return err;
      if (auto err = checkNewName(name, extent->loc, "static variable"))
        return err;
      statics.push_back(name);
    }
    auto err = checkStatic(*e.args[0]);
    statics.resize(before);
    return err;
  }
  case Expr::Kind::Splat:
    return makeSpecError(e.loc, "'*" + e.name + "' is not allowed here");
  case Expr::Kind::Slice:
    return makeSpecError(e.loc, "':' (a whole dimension) is only allowed as "
                                "an index of an argument of opaque(...)");
  case Expr::Kind::Opaque:
    return makeSpecError(e.loc, "opaque(...) is not allowed in a shape, "
                                "extent or condition");
  }
  return llvm::Error::success();
}

llvm::Error OpChecker::checkStaticCall(const Expr &e) {
  if (!isStaticFunction(e.name))
    return makeSpecError(e.loc, "function '" + e.name +
                                    "' is not allowed in a shape, extent or "
                                    "condition");
  if (!e.namedArgs.empty())
    return makeSpecError(e.namedArgs.front().second->loc,
                         "function '" + e.name + "' takes no named arguments");
  bool tensorArg = e.name == "present" || e.name == "rank" ||
                   e.name == "shape" || e.name == "dim" ||
                   e.name == "typecode";
  auto isVariadic = [&](const std::string &n) {
    int in = op.findInput(n);
    return in >= 0 && op.inputs[in].variadic;
  };
  if (e.name == "len" && e.args.size() == 1 &&
      e.args[0]->kind == Expr::Kind::Ident && isVariadic(e.args[0]->name))
    return llvm::Error::success(); // the number of operands
  for (size_t k = 0; k < e.args.size(); ++k) {
    const Expr &a = *e.args[k];
    if (tensorArg && k == 0) {
      if (a.kind == Expr::Kind::Access && isVariadic(a.name) && !a.select &&
          a.args.size() == 1 && e.name != "present") {
        if (auto err = checkStatic(*a.args[0]))
          return err;
        continue;
      }
      if (a.kind != Expr::Kind::Ident || op.findInput(a.name) < 0 ||
          isVariadic(a.name))
        return makeSpecError(a.loc, "'" + e.name + "' expects an input name" +
                                        (a.kind == Expr::Kind::Ident &&
                                                 isVariadic(a.name)
                                             ? " (an element " + a.name +
                                                   "[k] of a variadic input)"
                                             : ""));
      continue;
    }
    if (auto err = checkStatic(a))
      return err;
  }
  if (tensorArg && e.args.size() != (e.name == "dim" ? 2u : 1u))
    return makeSpecError(e.loc, "wrong number of arguments to '" + e.name +
                                    "'");
  return llvm::Error::success();
}

llvm::Error OpChecker::checkFor(const Expr &e, bool indexBody) {
  const auto &[name, count] = e.vars[0];
  if (auto err = checkStatic(*count))
    return err;
  if (auto err = checkNewName(name, count->loc, "comprehension variable"))
    return err;
  statics.push_back(name);
  llvm::Error err = llvm::Error::success();
  if (e.args.size() > 1)
    err = checkStatic(*e.args[1]);
  if (!err) {
    if (indexBody) {
      auto cls = checkIndex(*e.args[0]);
      if (!cls)
        err = cls.takeError();
    } else {
      err = checkStatic(*e.args[0]);
    }
  }
  statics.pop_back();
  return err;
}

/// Functions of value expressions and their arities.
static int functionArity(llvm::StringRef fn) {
  if (fn == "exp" || fn == "log" || fn == "sqrt" || fn == "tanh" ||
      fn == "abs" || fn == "erf" || fn == "sigmoid" || fn == "floor" ||
      fn == "ceil")
    return 1;
  if (fn == "max" || fn == "min" || fn == "pow" || fn == "uniform")
    return 2;
  if (fn == "select")
    return 3;
  return -1;
}

llvm::Error OpChecker::checkValue(const Expr &e) {
  switch (e.kind) {
  case Expr::Kind::Number:
    return llvm::Error::success();
  case Expr::Kind::String:
    return makeSpecError(e.loc, "string literal in a value expression");
  case Expr::Kind::Ident: {
    if (isVar(e.name) || scalarSyms.count(e.name) || isStatic(e.name))
      return llvm::Error::success();
    if (const AttrDecl *a = op.findAttr(e.name)) {
      if (a->kind != AttrValue::Kind::Int && a->kind != AttrValue::Kind::Float)
        return makeSpecError(e.loc, "attribute '" + e.name +
                                        "' is not a number and cannot be "
                                        "used in a value expression");
      return llvm::Error::success();
    }
    if (op.findInput(e.name) >= 0)
      return makeSpecError(e.loc, "tensor '" + e.name +
                                      "' must be indexed: " + e.name + "[...]");
    if (rankSyms.count(e.name))
      return makeSpecError(e.loc, "rank symbol '" + e.name +
                                      "' cannot be used as a value");
    if (e.name == splat)
      return makeSpecError(e.loc, "'" + e.name +
                                      "' stands for several index variables; "
                                      "write '*" + e.name + "' inside an index");
    return makeSpecError(e.loc, "unknown identifier '" + e.name + "'");
  }
  case Expr::Kind::Splat:
    return makeSpecError(e.loc, "'*" + e.name +
                                    "' is only allowed as a tensor index");
  case Expr::Kind::Access: {
    if (isSplatName(e.name) || (isListName(e.name) && !isTensor(e.name))) {
      // `i[d]`: one variable of a splat; `perm[d]`: a static list element.
      if (e.args.size() != 1 || e.args[0]->kind == Expr::Kind::Splat)
        return makeSpecError(e.loc, "'" + e.name +
                                        "[...]' takes one static position");
      return checkStatic(*e.args[0]);
    }
    int in = op.findInput(e.name);
    if (in < 0) {
      if (op.findOutput(e.name) >= 0)
        return makeSpecError(e.loc, "cannot read output '" + e.name +
                                        "' in the body");
      return makeSpecError(e.loc, "unknown tensor '" + e.name + "'");
    }
    const InputDecl &decl = op.inputs[in];
    if (decl.variadic != bool(e.select))
      return makeSpecError(e.loc, decl.variadic
                                      ? "variadic input '" + e.name +
                                            "' needs an element: " + e.name +
                                            "[k][indices]"
                                      : "'" + e.name + "' is not variadic");
    if (e.select)
      if (auto err = checkStatic(*e.select))
        return err;
    bool hasSplat = false;
    for (auto &idx : e.args) {
      if (idx->kind == Expr::Kind::Slice) {
        if (!inOpaque)
          return makeSpecError(idx->loc, "':' (a whole dimension) is only "
                                         "allowed as an index of an argument "
                                         "of opaque(...)");
        continue;
      }
      if (idx->kind == Expr::Kind::Splat) {
        hasSplat = true;
        if (!idx->args.empty()) {
          if (auto err = checkFor(*idx->args[0], /*indexBody=*/true))
            return err;
          continue;
        }
        if (!isSplatName(idx->name))
          return makeSpecError(idx->loc, "unknown index splat '*" + idx->name +
                                             "'");
        continue;
      }
      auto cls = checkIndex(*idx);
      if (!cls)
        return cls.takeError();
    }
    bool fixedRank =
        !decl.unconstrained &&
        llvm::none_of(decl.dims, [](const DimDecl &d) {
          return d.kind == DimDecl::Kind::Splat;
        });
    if (fixedRank && !hasSplat && e.args.size() != decl.dims.size())
      return makeSpecError(e.loc, "wrong number of indices for '" + e.name +
                                      "': expected " +
                                      std::to_string(decl.dims.size()) +
                                      ", found " +
                                      std::to_string(e.args.size()));
    return llvm::Error::success();
  }
  case Expr::Kind::Neg:
  case Expr::Kind::Not:
  case Expr::Kind::Binary:
    for (auto &a : e.args)
      if (auto err = checkValue(*a))
        return err;
    return llvm::Error::success();
  case Expr::Kind::Cond:
    if (auto err = checkStatic(*e.args[0]))
      return err;
    if (auto err = checkValue(*e.args[1]))
      return err;
    return checkValue(*e.args[2]);
  case Expr::Kind::Call: {
    if (e.name == "unbroadcast") {
      if (e.args.size() != 1 || e.args[0]->kind != Expr::Kind::Ident ||
          op.findInput(e.args[0]->name) < 0)
        return makeSpecError(e.loc, "unbroadcast takes one input name: "
                                    "unbroadcast(T)");
      if (splat.empty())
        return makeSpecError(e.loc, "unbroadcast needs an output indexed "
                                    "with '*i'");
      return llvm::Error::success();
    }
    if ((e.name == "sum" || e.name == "prod" || e.name == "max" ||
         e.name == "min") &&
        e.args.size() == 1 && e.args[0]->kind == Expr::Kind::For) {
      // Unrolled at instantiation: sum/product/max/min over a static range.
      const Expr &f = *e.args[0];
      if (auto err = checkStatic(*f.vars[0].second))
        return err;
      if (auto err = checkNewName(f.vars[0].first, f.loc,
                                  "comprehension variable"))
        return err;
      statics.push_back(f.vars[0].first);
      llvm::Error err = f.args.size() > 1 ? checkStatic(*f.args[1])
                                          : llvm::Error::success();
      if (!err)
        err = checkValue(*f.args[0]);
      statics.pop_back();
      return err;
    }
    if (isStaticFunction(e.name) && e.name != "max" && e.name != "min")
      return checkStaticCall(e);
    int arity = functionArity(e.name);
    if (arity < 0) {
      if (e.name == "sum" || e.name == "prod")
        return makeSpecError(e.loc, "reducer '" + e.name +
                                        "' needs variables: " + e.name +
                                        "(v: extent) body");
      return makeSpecError(e.loc, "unknown function '" + e.name + "'");
    }
    if (!e.namedArgs.empty())
      return makeSpecError(e.namedArgs.front().second->loc,
                           "function '" + e.name +
                               "' takes no named arguments");
    if (static_cast<int>(e.args.size()) != arity)
      return makeSpecError(e.loc, "wrong number of arguments to '" + e.name +
                                      "': expected " + std::to_string(arity) +
                                      ", found " +
                                      std::to_string(e.args.size()));
    for (auto &a : e.args)
      if (auto err = checkValue(*a))
        return err;
    return llvm::Error::success();
  }
  case Expr::Kind::Reduce: {
    size_t before = vars.size(), beforeSplats = redSplats.size();
    for (auto &[name, extent] : e.vars) {
      if (auto err = checkStatic(*extent))
        return err;
      if (name[0] == '*') {
        std::string n = name.substr(1);
        if (auto err = checkNewName(n, extent->loc, "reduction splat"))
          return err;
        redSplats.push_back(n);
        continue;
      }
      if (auto err = checkNewName(name, extent->loc, "reduction variable"))
        return err;
      vars.push_back(name);
    }
    auto err = checkValue(*e.args[0]);
    vars.resize(before);
    redSplats.resize(beforeSplats);
    return err;
  }
  case Expr::Kind::For:
    return makeSpecError(e.loc, "a comprehension is only allowed after '*' "
                                "or inside sum(...) / prod(...)");
  case Expr::Kind::Slice:
    return makeSpecError(e.loc, "':' (a whole dimension) is only allowed as "
                                "an index of an argument of opaque(...)");
  case Expr::Kind::Opaque:
    return checkOpaque(e);
  }
  return llvm::Error::success();
}

llvm::Error OpChecker::checkOpaque(const Expr &e) {
  if (inOpaque)
    return makeSpecError(e.loc, "opaque(...) cannot be nested");
  if (e.args.empty() || !e.namedArgs.empty())
    return makeSpecError(e.loc, "opaque takes one or more tensor accesses, "
                                "e.g. opaque(A[b, :, :])[i, j]");
  for (auto &a : e.args) {
    if (a->kind != Expr::Kind::Access || !isTensor(a->name))
      return makeSpecError(a->loc, "an argument of opaque(...) must be an "
                                   "input tensor access such as A[b, :, :]");
    inOpaque = true;
    llvm::Error err = checkValue(*a);
    inOpaque = false;
    if (err)
      return err;
  }
  for (auto &idx : e.indices) {
    if (idx->kind == Expr::Kind::Splat || idx->kind == Expr::Kind::Slice)
      return makeSpecError(idx->loc, "an index of the opaque result must be "
                                     "an index expression");
    auto cls = checkIndex(*idx);
    if (!cls)
      return cls.takeError();
  }
  return llvm::Error::success();
}

llvm::Expected<IndexClass> OpChecker::checkIndex(const Expr &e) {
  switch (e.kind) {
  case Expr::Kind::Number:
    if (!e.isInt)
      return makeSpecError(e.loc, "index must be an integer expression");
    return IndexClass::Constant;
  case Expr::Kind::Ident:
    if (isVar(e.name))
      return IndexClass::Affine;
    if (scalarSyms.count(e.name) || isStatic(e.name))
      return IndexClass::Constant;
    if (const AttrDecl *a = op.findAttr(e.name)) {
      if (a->kind != AttrValue::Kind::Int)
        return makeSpecError(e.loc, "attribute '" + e.name +
                                        "' is not an int and cannot be used "
                                        "in an index");
      return IndexClass::Constant;
    }
    if (op.findInput(e.name) >= 0)
      return makeSpecError(e.loc, "tensor '" + e.name +
                                      "' must be indexed: " + e.name + "[...]");
    return makeSpecError(e.loc, "unknown identifier '" + e.name + "'");
  case Expr::Kind::Neg:
    return checkIndex(*e.args[0]);
  case Expr::Kind::Binary: {
    if (e.op != BinOp::Add && e.op != BinOp::Sub && e.op != BinOp::Mul &&
        e.op != BinOp::Div && e.op != BinOp::FloorDiv && e.op != BinOp::Mod)
      return makeSpecError(e.loc, llvm::Twine("operator '") +
                                      binOpSpelling(e.op) +
                                      "' in an index expression: comparison "
                                      "of two intervals is not supported");
    auto l = checkIndex(*e.args[0]);
    if (!l)
      return l.takeError();
    auto r = checkIndex(*e.args[1]);
    if (!r)
      return r.takeError();
    if (*l == IndexClass::Data || *r == IndexClass::Data)
      return IndexClass::Data;
    bool la = *l == IndexClass::Affine, ra = *r == IndexClass::Affine;
    if (e.op == BinOp::Mod) {
      if (ra)
        return makeSpecError(e.loc, "non-affine index expression: '%' by an "
                                    "index expression is not supported");
      return la ? IndexClass::Data : IndexClass::Constant;
    }
    if (e.op == BinOp::Mul && la && ra)
      return makeSpecError(e.loc, "non-affine index expression: product of "
                                  "two intervals (index expressions) is not "
                                  "supported");
    if ((e.op == BinOp::Div || e.op == BinOp::FloorDiv) && ra)
      return makeSpecError(e.loc, "non-affine index expression: division by "
                                  "an index expression is not supported");
    return la || ra ? IndexClass::Affine : IndexClass::Constant;
  }
  case Expr::Kind::Cond: {
    if (auto err = checkStatic(*e.args[0]))
      return std::move(err);
    auto a = checkIndex(*e.args[1]);
    if (!a)
      return a.takeError();
    auto b = checkIndex(*e.args[2]);
    if (!b)
      return b.takeError();
    return std::max(*a, *b);
  }
  case Expr::Kind::Access:
    if (isSplatName(e.name)) {
      if (auto err = checkValue(e))
        return std::move(err);
      return IndexClass::Affine;
    }
    if (isListName(e.name) && !isTensor(e.name)) {
      if (auto err = checkValue(e))
        return std::move(err);
      return IndexClass::Constant;
    }
    // A data-dependent index (Gather): its value is unknown to the analysis.
    if (auto err = checkValue(e))
      return std::move(err);
    if (int in = op.findInput(e.name);
        in >= 0 && op.inputs[in].elem != ElemType::I64)
      return makeSpecError(e.loc, "data-dependent index: tensor '" + e.name +
                                      "' must be an 'int' input");
    return IndexClass::Data;
  case Expr::Kind::Call:
    if ((e.name == "min" || e.name == "max" || e.name == "abs") &&
        e.namedArgs.empty() && e.args.size() == (e.name == "abs" ? 1u : 2u)) {
      // Clamping and reflection (Pad's edge / reflect modes): a monotone or
      // piecewise-monotone index the analysis bounds soundly. With static
      // operands only, min / max are the static functions.
      IndexClass cls = IndexClass::Constant;
      for (auto &a : e.args) {
        auto c = checkIndex(*a);
        if (!c)
          return c.takeError();
        cls = std::max(cls, *c);
      }
      if (cls == IndexClass::Constant && e.name != "abs") {
        if (auto err = checkStaticCall(e))
          return std::move(err);
        return IndexClass::Constant;
      }
      return cls == IndexClass::Constant ? IndexClass::Constant
                                         : IndexClass::Data;
    }
    if (isStaticFunction(e.name)) {
      if (auto err = checkStaticCall(e))
        return std::move(err);
      return IndexClass::Constant;
    }
    if (e.name == "sum" && e.args.size() == 1 &&
        e.args[0]->kind == Expr::Kind::For) {
      // `sum(for(d: n) index)`: an unrolled sum of index expressions.
      if (auto err = checkFor(*e.args[0], /*indexBody=*/true))
        return std::move(err);
      return IndexClass::Affine;
    }
    return makeSpecError(e.loc, "function '" + e.name +
                                    "' in an index expression is not affine");
  case Expr::Kind::For:
    return makeSpecError(e.loc, "a comprehension must follow '*'");
  case Expr::Kind::Reduce:
    return makeSpecError(e.loc, "reduction inside an index expression");
  case Expr::Kind::String:
    return makeSpecError(e.loc, "string literal in an index expression");
  case Expr::Kind::Not:
    return makeSpecError(e.loc, "'!' in an index expression");
  case Expr::Kind::Splat:
    return makeSpecError(e.loc, "'*" + e.name + "' must be a whole index");
  case Expr::Kind::Slice:
    return makeSpecError(e.loc, "':' (a whole dimension) is only allowed as "
                                "an index of an argument of opaque(...)");
  case Expr::Kind::Opaque:
    return makeSpecError(e.loc, "opaque(...) inside an index expression");
  }
  return IndexClass::Constant;
}

llvm::Error tofu::tdl::checkOpSpec(const OpSpec &spec) {
  return OpChecker(spec).run();
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

namespace {

class GradChecker {
public:
  GradChecker(const GradRule &rule, const OpSpec *forward,
              llvm::function_ref<const OpSpec *(llvm::StringRef)> lookup)
      : rule(rule), forward(forward), lookup(lookup) {}
  llvm::Error run();

private:
  bool isTensorName(llvm::StringRef n) const {
    if (llvm::is_contained(rule.inputAliases, n) ||
        llvm::is_contained(rule.outputAliases, n))
      return true;
    return n.starts_with("d") &&
           llvm::is_contained(rule.outputAliases, n.drop_front(1));
  }
  /// The rule's alias of an optional input of the forward op.
  bool isOptionalInputName(llvm::StringRef n) const {
    for (size_t i = 0; i < rule.inputAliases.size(); ++i)
      if (rule.inputAliases[i] == n && forward &&
          i < forward->inputs.size() && forward->inputs[i].optional)
        return true;
    return false;
  }
  /// `dY` for an output Y of the rule.
  bool isOutputGradName(llvm::StringRef n) const {
    return n.starts_with("d") &&
           llvm::is_contained(rule.outputAliases, n.drop_front(1));
  }
  llvm::Error checkValue(const Expr &e);
  llvm::Error checkStatic(const Expr &e);

  const GradRule &rule;
  const OpSpec *forward;
  llvm::function_ref<const OpSpec *(llvm::StringRef)> lookup;
  /// The element variable of the current `dX[k] = ...` statement.
  std::string elementVar;
};

} // namespace

llvm::Error GradChecker::run() {
  std::set<std::string> seen;
  for (auto &a : rule.inputAliases)
    if (!seen.insert(a).second)
      return makeSpecError(rule.loc, "duplicate name '" + a +
                                         "' in the gradient rule of '" +
                                         rule.op + "'");
  for (auto &a : rule.outputAliases)
    if (!seen.insert(a).second)
      return makeSpecError(rule.loc, "duplicate name '" + a +
                                         "' in the gradient rule of '" +
                                         rule.op + "'");
  if (forward) {
    if (rule.inputAliases.size() != forward->inputs.size())
      return makeSpecError(rule.loc,
                           "gradient rule of '" + rule.op + "' names " +
                               std::to_string(rule.inputAliases.size()) +
                               " inputs, the op has " +
                               std::to_string(forward->inputs.size()));
    if (rule.outputAliases.size() != forward->outputs.size())
      return makeSpecError(rule.loc,
                           "gradient rule of '" + rule.op + "' names " +
                               std::to_string(rule.outputAliases.size()) +
                               " outputs, the op has " +
                               std::to_string(forward->outputs.size()));
  }
  for (auto &s : rule.stmts) {
    if (forward && s.input < forward->inputs.size() &&
        forward->inputs[s.input].variadic != !s.elementVar.empty())
      return makeSpecError(s.loc, forward->inputs[s.input].variadic
                                      ? "the gradient of a variadic input is "
                                        "defined per element: d" +
                                            rule.inputAliases[s.input] +
                                            "[k] = ..."
                                      : "input '" +
                                            rule.inputAliases[s.input] +
                                            "' is not variadic");
    elementVar = s.elementVar;
    if (auto e = checkValue(*s.value))
      return e;
  }
  return llvm::Error::success();
}

llvm::Error GradChecker::checkValue(const Expr &e) {
  switch (e.kind) {
  case Expr::Kind::Ident:
    if (isTensorName(e.name))
      return llvm::Error::success();
    return makeSpecError(e.loc, "unknown name '" + e.name +
                                    "' in gradient rule (expected a forward "
                                    "input, a forward output or d<output>)");
  case Expr::Kind::Cond:
    if (auto err = checkStatic(*e.args[0]))
      return err;
    if (auto err = checkValue(*e.args[1]))
      return err;
    return checkValue(*e.args[2]);
  case Expr::Kind::Access:
    // `X[k]`: element k of a variadic input or output (or its gradient).
    if (!isTensorName(e.name) || e.select || e.args.size() != 1)
      return makeSpecError(e.loc, "'" + e.name +
                                      "[k]' needs a variadic tensor and one "
                                      "static element index");
    return checkStatic(*e.args[0]);
  case Expr::Kind::Splat:
    if (!isTensorName(e.name))
      return makeSpecError(e.loc, "unknown variadic tensor '*" + e.name + "'");
    return llvm::Error::success();
  case Expr::Kind::Call: {
    if (e.name == "not_supported") {
      if (e.args.size() != 1 || e.args[0]->kind != Expr::Kind::String ||
          !e.namedArgs.empty())
        return makeSpecError(e.loc, "not_supported takes one string argument");
      return llvm::Error::success();
    }
    const OpSpec *callee = lookup(e.name);
    if (!callee)
      return makeSpecError(e.loc, "unknown op '" + e.name +
                                      "' in gradient rule");
    size_t required = 0;
    for (auto &in : callee->inputs)
      if (!in.optional)
        ++required;
    bool spread = llvm::any_of(e.args, [](const ExprPtr &a) {
                    return a->kind == Expr::Kind::Splat;
                  }) ||
                  llvm::any_of(callee->inputs, [](const InputDecl &in) {
                    return in.variadic;
                  });
    if (!spread &&
        (e.args.size() < required || e.args.size() > callee->inputs.size()))
      return makeSpecError(
          e.loc, "wrong number of operands to '" + e.name + "': expected " +
                     (required == callee->inputs.size()
                          ? std::to_string(required)
                          : std::to_string(required) + " to " +
                                std::to_string(callee->inputs.size())) +
                     ", found " + std::to_string(e.args.size()));
    for (auto &a : e.args)
      if (auto err = checkValue(*a))
        return err;
    for (auto &[name, value] : e.namedArgs) {
      if (!callee->findAttr(name))
        return makeSpecError(value->loc, "op '" + e.name +
                                             "' has no attribute '" + name +
                                             "'");
      if (auto err = checkStatic(*value))
        return err;
    }
    return llvm::Error::success();
  }
  default:
    return makeSpecError(e.loc, "a gradient value must be an op call, a "
                                "tensor name or a conditional");
  }
}

llvm::Error GradChecker::checkStatic(const Expr &e) {
  switch (e.kind) {
  case Expr::Kind::Number:
  case Expr::Kind::String:
    return llvm::Error::success();
  case Expr::Kind::Ident:
    if (!forward || forward->findAttr(e.name) || e.name == elementVar)
      return llvm::Error::success();
    // A let of the forward op, or a const input (by its alias).
    if (llvm::any_of(forward->lets,
                     [&](const LetDecl &l) { return l.name == e.name; }))
      return llvm::Error::success();
    for (size_t i = 0; i < rule.inputAliases.size(); ++i)
      if (rule.inputAliases[i] == e.name && i < forward->inputs.size() &&
          forward->inputs[i].isConst)
        return llvm::Error::success();
    return makeSpecError(e.loc, "unknown attribute, let or const input '" +
                                    e.name + "' of '" + rule.op + "'");
  case Expr::Kind::Neg:
  case Expr::Kind::Not:
  case Expr::Kind::Binary:
  case Expr::Kind::Cond:
    for (auto &a : e.args)
      if (auto err = checkStatic(*a))
        return err;
    return llvm::Error::success();
  case Expr::Kind::Call: {
    unsigned arity = e.name == "dim" ? 2 : 1;
    if (e.name == "present") {
      // `present(dY)`: whether output Y receives a gradient; `present(X)`:
      // whether optional input X is given.
      if (e.args.size() != 1 || !e.namedArgs.empty() ||
          e.args[0]->kind != Expr::Kind::Ident ||
          !(isOutputGradName(e.args[0]->name) ||
            isOptionalInputName(e.args[0]->name)))
        return makeSpecError(e.loc, "'present' in a gradient condition takes "
                                    "the gradient of an output or an optional "
                                    "input (present(dY), present(X))");
      return llvm::Error::success();
    }
    if (e.name != "rank" && e.name != "shape" && e.name != "dim" &&
        e.name != "typecode") {
      if (!isStaticFunction(e.name))
        return makeSpecError(e.loc, "unknown function '" + e.name +
                                        "' in a gradient condition (expected "
                                        "rank, shape, dim, present(dY) or a "
                                        "static list function)");
      for (auto &a : e.args)
        if (auto err = checkStatic(*a))
          return err;
      return llvm::Error::success();
    }
    if (e.args.size() != arity || !e.namedArgs.empty())
      return makeSpecError(e.loc, "wrong number of arguments to '" + e.name +
                                      "': expected " + std::to_string(arity));
    bool element = e.args[0]->kind == Expr::Kind::Access &&
                   isTensorName(e.args[0]->name) && !e.args[0]->select &&
                   e.args[0]->args.size() == 1;
    if (!element && (e.args[0]->kind != Expr::Kind::Ident ||
                     !isTensorName(e.args[0]->name)))
      return makeSpecError(e.args[0]->loc, "'" + e.name +
                                               "' expects a tensor name");
    if (arity == 2)
      return checkStatic(*e.args[1]);
    return llvm::Error::success();
  }
  case Expr::Kind::Access:
    // `L[i]`: an element of a list (a let or ints attribute of the forward
    // op, e.g. `offs[k]`).
    if (e.select || e.args.size() != 1)
      return makeSpecError(e.loc, "'" + e.name + "[...]' takes one index");
    if (forward && !forward->findAttr(e.name) &&
        llvm::none_of(forward->lets,
                      [&](const LetDecl &l) { return l.name == e.name; }))
      return makeSpecError(e.loc, "unknown list '" + e.name + "' of '" +
                                      rule.op + "'");
    return checkStatic(*e.args[0]);
  default:
    return makeSpecError(e.loc, "not allowed in a gradient condition or "
                                "attribute value");
  }
}

llvm::Error tofu::tdl::checkGradRule(
    const GradRule &rule, const OpSpec *forward,
    llvm::function_ref<const OpSpec *(llvm::StringRef)> lookup) {
  return GradChecker(rule, forward, lookup).run();
}
