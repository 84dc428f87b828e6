//===- Instantiate.cpp - TDL shape inference and lowering -------------------===//
//
// instantiate() binds the shape symbols of a spec to the dims of concrete
// input types, checks ranks, element types, repeated symbols and `where`
// constraints, fills attribute defaults, computes the output types, and
// lowers the body into the form of InstanceIR.h.
//
//===----------------------------------------------------------------------===//
#include "InstanceIR.h"
#include "StaticEvaluator.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <map>

using namespace tofu::tdl;

//===----------------------------------------------------------------------===//
// OpInstance accessors
//===----------------------------------------------------------------------===//

const OpSpec &OpInstance::spec() const { return *impl->spec; }
llvm::StringRef OpInstance::opName() const { return impl->spec->name; }
const std::vector<std::optional<TensorType>> &OpInstance::inputTypes() const {
  return impl->inputTypes;
}
const std::vector<std::string> &OpInstance::inputNames() const {
  return impl->inputNames;
}
const std::vector<TensorType> &OpInstance::outputTypes() const {
  return impl->outputTypes;
}
const std::vector<std::string> &OpInstance::outputNames() const {
  return impl->outputNames;
}
unsigned OpInstance::numRequiredOutputs() const {
  unsigned n = 0;
  for (unsigned decl : impl->outputDecl)
    n += !spec().outputs[decl].optional;
  return n;
}
bool OpInstance::isOptionalOutput(unsigned output) const {
  return output < impl->outputDecl.size() &&
         spec().outputs[impl->outputDecl[output]].optional;
}
const AttrMap &OpInstance::attrs() const { return impl->attrs; }
const std::map<unsigned, std::vector<double>> &
OpInstance::constValues() const {
  return impl->constValues;
}
bool OpInstance::isConstInput(unsigned input) const {
  return tofu::tdl::isConstInput(*impl->spec, input);
}
bool tofu::tdl::isConstInput(const OpSpec &spec, unsigned input) {
  return input < spec.inputs.size() && spec.inputs[input].isConst;
}
bool tofu::tdl::takesOutputCount(const OpSpec &spec) {
  const AttrDecl *a = spec.findAttr("num_outputs");
  return !spec.outputs.empty() && spec.outputs.back().count && a &&
         a->kind == AttrValue::Kind::Int;
}

static const LExpr *scaledReducer(const LExpr &e) {
  switch (e.kind) {
  case LExpr::Kind::Reduce:
    return &e;
  case LExpr::Kind::Neg:
    return scaledReducer(*e.ops[0]);
  case LExpr::Kind::Binary:
    if (e.op == BinOp::Mul) {
      if (const LExpr *r = scaledReducer(*e.ops[0]))
        return r;
      return scaledReducer(*e.ops[1]);
    }
    if (e.op == BinOp::Div)
      return scaledReducer(*e.ops[0]);
    return nullptr;
  default:
    return nullptr;
  }
}

static const LExpr *anyArithmeticReducer(const LExpr &e) {
  switch (e.kind) {
  case LExpr::Kind::Reduce:
    return &e;
  case LExpr::Kind::Neg:
    return anyArithmeticReducer(*e.ops[0]);
  case LExpr::Kind::Binary:
    if (e.op == BinOp::Add || e.op == BinOp::Sub || e.op == BinOp::Mul ||
        e.op == BinOp::Div) {
      if (const LExpr *r = anyArithmeticReducer(*e.ops[0]))
        return r;
      return anyArithmeticReducer(*e.ops[1]);
    }
    return nullptr;
  default:
    return nullptr;
  }
}

const LExpr *tofu::tdl::findTopReducer(const LExpr &e, bool &splittable) {
  splittable = false;
  if (const LExpr *r = scaledReducer(e)) {
    // No partition-n-reduce through a hidden computation.
    splittable = r->reducer == ReduceKind::Sum && !containsOpaque(e);
    return r;
  }
  return anyArithmeticReducer(e);
}

bool tofu::tdl::containsOpaque(const LExpr &e) {
  return e.kind == LExpr::Kind::Opaque ||
         llvm::any_of(e.ops,
                      [](const LExprPtr &o) { return containsOpaque(*o); });
}

static void collectVars(const LExpr &e, std::vector<unsigned> &vars) {
  if (e.kind == LExpr::Kind::Var && !llvm::is_contained(vars, e.var))
    vars.push_back(e.var);
  for (auto &o : e.ops)
    collectVars(*o, vars);
}

void tofu::tdl::collectOpaqueResultVars(const LExpr &e,
                                        std::vector<unsigned> &vars) {
  if (e.kind == LExpr::Kind::Opaque)
    for (size_t k = e.numArgs; k < e.ops.size(); ++k)
      collectVars(*e.ops[k], vars);
  for (auto &o : e.ops)
    collectOpaqueResultVars(*o, vars);
}

std::vector<ReductionVar> OpInstance::reductionVars(unsigned output) const {
  std::vector<ReductionVar> result;
  if (output >= impl->stmts.size())
    return result;
  const LoweredStmt &s = impl->stmts[output];
  bool splittable;
  const LExpr *r = findTopReducer(*s.value, splittable);
  if (!r)
    return result;
  for (unsigned v : r->redVars)
    result.push_back({s.vars[v].name, s.vars[v].extent, splittable});
  return result;
}

static bool readsAtOutputIndex(const LExpr &e, const LoweredStmt &s,
                               const OpInstance::Impl &impl) {
  switch (e.kind) {
  case LExpr::Kind::Reduce:
    return false;
  case LExpr::Kind::Access: {
    const TensorType &t = *impl.inputTypes[e.tensor];
    if (e.ops.size() > s.outVars.size())
      return false;
    size_t offset = s.outVars.size() - e.ops.size();
    for (size_t d = 0; d < e.ops.size(); ++d) {
      const LExpr &idx = *e.ops[d];
      if (idx.kind == LExpr::Kind::Var && idx.var == s.outVars[offset + d])
        continue;
      if (idx.kind == LExpr::Kind::Const && idx.value == 0 && t.dims[d] == 1)
        continue;
      return false;
    }
    return true;
  }
  default:
    return llvm::all_of(e.ops, [&](const LExprPtr &o) {
      return readsAtOutputIndex(*o, s, impl);
    });
  }
}

bool OpInstance::isElementwise() const {
  if (impl->outputTypes.empty())
    return false;
  for (size_t o = 0; o < impl->stmts.size(); ++o) {
    if (impl->outputTypes[o].dims != impl->outputTypes[0].dims)
      return false;
    if (!readsAtOutputIndex(*impl->stmts[o].value, impl->stmts[o], *impl))
      return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Instantiation
//===----------------------------------------------------------------------===//

namespace {

std::string shapeStr(const std::vector<int64_t> &dims) {
  std::string r = "[";
  for (size_t k = 0; k < dims.size(); ++k)
    r += (k ? ", " : "") + std::to_string(dims[k]);
  return r + "]";
}

const char *elemStr(ElemType t) { return elemName(t); }

/// True if `t` belongs to `cls`.
bool inTypeClass(ElemType t, TypeClass cls) {
  switch (cls) {
  case TypeClass::Float: return isFloatElem(t);
  case TypeClass::Numeric: return t != ElemType::Bool;
  case TypeClass::All:
  case TypeClass::Any: return true;
  case TypeClass::Int: return isIntegerElem(t);
  case TypeClass::Bool: return t == ElemType::Bool;
  }
  return false;
}

/// How `cls` reads in messages.
const char *typeClassText(TypeClass cls) {
  switch (cls) {
  case TypeClass::Float: return "a float type (f16, bf16, f32, f64)";
  case TypeClass::Numeric: return "a numeric type (a float or integer type)";
  case TypeClass::All: return "any type";
  case TypeClass::Any: return "any type";
  case TypeClass::Int: return "an integer type";
  case TypeClass::Bool: return "bool";
  }
  return "?";
}

/// The ONNX TensorProto data type code `code` as an element type.
std::optional<ElemType> elemOfOnnxCode(int64_t code) {
  switch (code) {
  case 1: return ElemType::F32;
  case 2: return ElemType::U8;
  case 3: return ElemType::I8;
  case 4: return ElemType::U16;
  case 5: return ElemType::I16;
  case 6: return ElemType::I32;
  case 7: return ElemType::I64;
  case 9: return ElemType::Bool;
  case 10: return ElemType::F16;
  case 11: return ElemType::F64;
  case 12: return ElemType::U32;
  case 13: return ElemType::U64;
  case 16: return ElemType::BF16;
  default: return std::nullopt;
  }
}

class Instantiator {
public:
  Instantiator(const OpSpec &spec, OpInstance::Impl &impl)
      : spec(spec), impl(impl) {}

  llvm::Error run(llvm::ArrayRef<std::optional<TensorType>> inputs,
                  const AttrMap &attrs,
                  const std::map<unsigned, std::vector<double>> &constValues);

private:
  llvm::Error error(const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "op " + spec.name + ": " + msg.str());
  }
  llvm::Error bindAttrs(const AttrMap &attrs);
  llvm::Error bindInput(unsigned i, const TensorType &t);
  llvm::Error computeOutput(unsigned o);
  /// Lowers `s` into the statement of output operand `operand` (the
  /// element variable of a variadic output is bound by the caller).
  llvm::Error lowerStmt(const BodyStmt &s, unsigned operand);
  llvm::Expected<LExprPtr> lower(const Expr &e, bool inIndex);
  llvm::Expected<LExprPtr> lowerAccess(const Expr &e);
  llvm::Expected<LExprPtr> lowerUnbroadcast(const Expr &e);
  std::string extentKey(const Expr &e);

  std::optional<StaticValue> lookup(llvm::StringRef name) const {
    for (auto it = statics.rbegin(); it != statics.rend(); ++it)
      if (it->first == name)
        return StaticValue::ofInt(it->second);
    auto l = lets.find(name.str());
    if (l != lets.end())
      return l->second;
    auto c = constStatics.find(name.str());
    if (c != constStatics.end())
      return c->second;
    auto s = syms.find(name.str());
    if (s != syms.end())
      return StaticValue::ofInt(s->second);
    auto a = impl.attrs.find(name.str());
    if (a != impl.attrs.end())
      return StaticValue::ofAttr(a->second);
    return std::nullopt;
  }
  StaticEnv env() const {
    return StaticEnv{
        [this](llvm::StringRef n) { return lookup(n); },
        [this](llvm::StringRef n) -> std::optional<std::vector<int64_t>> {
          // Operand names: the declared name, `name[k]` for variadic ones.
          for (size_t in = 0; in < impl.inputNames.size(); ++in)
            if (impl.inputNames[in] == n) {
              if (in >= impl.inputTypes.size() || !impl.inputTypes[in])
                return std::nullopt;
              return impl.inputTypes[in]->dims;
            }
          return std::nullopt;
        },
        [this](llvm::StringRef n) -> std::optional<int64_t> {
          int in = spec.findInput(n);
          if (in < 0 || !spec.inputs[in].variadic)
            return std::nullopt;
          return int64_t(llvm::count(impl.inputDecl, unsigned(in)));
        }};
  }

  const OpSpec &spec;
  OpInstance::Impl &impl;
  std::map<std::string, int64_t> syms;
  std::map<std::string, std::string> symOrigin;
  std::map<std::string, std::vector<int64_t>> rankSyms;
  /// Element types bound to type variables, and the input that bound each.
  std::map<std::string, ElemType> typeVars;
  std::map<std::string, std::string> typeVarOrigin;
  // Lowering state of the current statement.
  LoweredStmt *cur = nullptr;
  std::vector<std::pair<std::string, unsigned>> scope;
  std::string splatName;
  std::vector<unsigned> splatVars;
  /// Splats in scope (the statement's `*i`, reduction splats): name ->
  /// (key, variable) pairs; `i[key]` names one variable.
  std::map<std::string, std::vector<std::pair<int64_t, unsigned>>> groups;
  /// Bound comprehension / static variables (innermost last).
  std::vector<std::pair<std::string, int64_t>> statics;
  std::map<std::string, StaticValue> lets;
  /// Static values of the const inputs.
  std::map<std::string, StaticValue> constStatics;
  llvm::Error evalLets();
  llvm::Error bindConstValues(
      const std::map<unsigned, std::vector<double>> &constValues);
  llvm::Expected<std::vector<LExprPtr>> lowerIndexList(const Expr &e);
  llvm::Expected<LExprPtr> lowerUnrolled(const Expr &call, const Expr &f,
                                         bool inIndex);
  /// Runs `body(d)` for each static value d of comprehension `f` that passes
  /// its filter, with d bound.
  llvm::Error forEach(const Expr &f,
                      llvm::function_ref<llvm::Error(int64_t)> body);
};

} // namespace

llvm::Error Instantiator::bindAttrs(const AttrMap &attrs) {
  for (auto &[name, value] : attrs) {
    const AttrDecl *decl = spec.findAttr(name);
    if (!decl)
      return error("unknown attribute '" + name + "'");
    AttrValue v = value;
    if (decl->kind == AttrValue::Kind::Float && v.kind == AttrValue::Kind::Int)
      v = AttrValue::ofFloat(static_cast<double>(v.i));
    if (v.kind != decl->kind) {
      static const char *names[] = {"int", "float", "string", "ints"};
      return error("attribute '" + name + "': expected " +
                   names[static_cast<int>(decl->kind)] + ", found " +
                   names[static_cast<int>(v.kind)]);
    }
    impl.attrs[name] = v;
  }
  for (auto &decl : spec.attrs) {
    if (impl.attrs.count(decl.name))
      continue;
    if (!decl.defaultValue)
      return error("required attribute '" + decl.name + "' is missing");
    impl.attrs[decl.name] = *decl.defaultValue;
  }
  return llvm::Error::success();
}

llvm::Error Instantiator::bindInput(unsigned i, const TensorType &t) {
  const InputDecl &decl = spec.inputs[impl.inputDecl[i]];
  const std::string &inputName = impl.inputNames[i];
  // `float const` accepts any numeric type (ONNX gives Clip's bounds the
  // data's type); other const inputs check their class only.
  TypeClass cls = decl.isConst && decl.typeClass == TypeClass::Float
                      ? TypeClass::Numeric
                      : decl.typeClass;
  if (!inTypeClass(t.elem, cls))
    return error("input " + inputName + ": expected " + typeClassText(cls) +
                 ", found " + elemStr(t.elem));
  if (!decl.isConst &&
      (cls == TypeClass::Float || cls == TypeClass::Numeric ||
       cls == TypeClass::All)) {
    auto [it, inserted] = typeVars.emplace(decl.typeVar, t.elem);
    if (inserted)
      typeVarOrigin[decl.typeVar] = "input " + inputName;
    else if (it->second != t.elem)
      return error("input " + inputName + ": element type " +
                   elemStr(t.elem) + " differs from " + elemStr(it->second) +
                   " of " + typeVarOrigin[decl.typeVar] + " (both have type " +
                   decl.typeVar + "; insert a Cast)");
  }
  for (int64_t d : t.dims)
    if (d < 0)
      return error("input " + inputName + ": negative dimension in " +
                   shapeStr(t.dims));
  if (decl.unconstrained)
    return llvm::Error::success();
  size_t fixed = 0;
  int splatAt = -1;
  for (size_t k = 0; k < decl.dims.size(); ++k) {
    if (decl.dims[k].kind == DimDecl::Kind::Splat)
      splatAt = static_cast<int>(k);
    else
      ++fixed;
  }
  size_t rank = t.dims.size();
  if (splatAt < 0 ? rank != fixed : rank < fixed)
    return error("input " + inputName + ": expected rank " +
                 (splatAt < 0 ? std::to_string(fixed)
                              : ">= " + std::to_string(fixed)) +
                 ", found rank " + std::to_string(rank) + " (shape " +
                 shapeStr(t.dims) + ")");
  size_t splatLen = rank - fixed;
  size_t dim = 0;
  for (size_t k = 0; k < decl.dims.size(); ++k) {
    const DimDecl &d = decl.dims[k];
    if (d.kind == DimDecl::Kind::Splat) {
      std::vector<int64_t> part(t.dims.begin() + dim,
                                t.dims.begin() + dim + splatLen);
      auto it = rankSyms.find(d.name);
      if (it != rankSyms.end() && it->second != part)
        return error("input " + inputName + ": dims " + shapeStr(part) +
                     " of *" + d.name + " do not match " +
                     shapeStr(it->second) + " bound by an earlier input");
      rankSyms[d.name] = part;
      dim += splatLen;
      continue;
    }
    int64_t found = t.dims[dim];
    std::string where = "input " + inputName + " dim " + std::to_string(dim);
    if (d.kind == DimDecl::Kind::Constant) {
      if (found != d.value)
        return error(where + ": expected " + std::to_string(d.value) +
                     ", found " + std::to_string(found));
    } else {
      auto it = syms.find(d.name);
      if (it != syms.end() && it->second != found)
        return error("input " + inputName + ": dim " + std::to_string(dim) +
                     " is " + std::to_string(found) + ", expected " +
                     std::to_string(it->second) + " (" + d.name +
                     ", bound by " + symOrigin[d.name] + ")");
      if (it == syms.end()) {
        syms[d.name] = found;
        symOrigin[d.name] = where;
      }
    }
    ++dim;
  }
  return llvm::Error::success();
}

llvm::Error Instantiator::computeOutput(unsigned o) {
  const OutputDecl &decl = spec.outputs[o];
  TensorType t;
  t.elem = decl.elem;
  if (decl.typeClass == TypeClass::Float ||
      decl.typeClass == TypeClass::Numeric ||
      decl.typeClass == TypeClass::All) {
    // The type of its type variable; f32 when no input binds it.
    auto it = typeVars.find(decl.typeVar);
    t.elem = it == typeVars.end() ? ElemType::F32 : it->second;
  }
  if (!decl.elemAttr.empty()) {
    auto a = impl.attrs.find(decl.elemAttr);
    int64_t code = a == impl.attrs.end() ? -1 : a->second.i;
    // A negative code (the attribute's default, `dtype: int = -1`) stands
    // for "absent": the output then has type variable T's type (EyeLike
    // without dtype).
    auto inherited = typeVars.find("T");
    std::optional<ElemType> elem =
        code < 0 && inherited != typeVars.end()
            ? std::optional<ElemType>(inherited->second)
            : elemOfOnnxCode(code);
    if (!elem)
      return error("output " + decl.name + ": element type " +
                   std::to_string(code) + " (attribute '" + decl.elemAttr +
                   "') is not supported (FLOAT 1, UINT8 2, INT8 3, UINT16 4, "
                   "INT16 5, INT32 6, INT64 7, BOOL 9, FLOAT16 10, DOUBLE 11, "
                   "UINT32 12, UINT64 13 and BFLOAT16 16 are)");
    t.elem = *elem;
  }
  if (!decl.broadcastOf.empty()) {
    // ONNX multidirectional broadcasting.
    std::vector<int64_t> result;
    std::string resultFrom;
    for (unsigned in : decl.broadcastOf) {
      if (!impl.inputTypes[in])
        continue;
      const auto &dims = impl.inputTypes[in]->dims;
      std::vector<int64_t> merged(std::max(result.size(), dims.size()), 1);
      for (size_t k = 0; k < merged.size(); ++k) {
        int64_t a = k + result.size() >= merged.size()
                        ? result[k + result.size() - merged.size()]
                        : 1;
        int64_t b = k + dims.size() >= merged.size()
                        ? dims[k + dims.size() - merged.size()]
                        : 1;
        if (a != b && a != 1 && b != 1)
          return error("inputs are not broadcastable: " + resultFrom +
                       " has shape " + shapeStr(result) + ", input " +
                       spec.inputs[in].name + " has shape " + shapeStr(dims));
        merged[k] = a == 1 ? b : a;
      }
      result = std::move(merged);
      resultFrom += (resultFrom.empty() ? "input " : ", ") +
                    spec.inputs[in].name;
    }
    t.dims = std::move(result);
  } else {
    for (auto &d : decl.dims) {
      if (d->kind == Expr::Kind::Splat && !d->args.empty()) {
        auto v = evalStatic(*d->args[0], env());
        if (!v)
          return v.takeError();
        if (v->kind != StaticValue::Kind::Ints &&
            v->kind != StaticValue::Kind::Shape)
          return makeSpecError(d->loc, "'*' needs a list, found " + v->str());
        for (int64_t x : v->shape)
          if (x < 0)
            return error("output " + decl.name + ": negative dimension in " +
                         v->str());
        t.dims.insert(t.dims.end(), v->shape.begin(), v->shape.end());
        continue;
      }
      if (d->kind == Expr::Kind::Splat && !rankSyms.count(d->name)) {
        // `*name`: a static list (a let or a const input).
        auto v = lookup(d->name);
        if (!v || (v->kind != StaticValue::Kind::Ints &&
                   v->kind != StaticValue::Kind::Shape))
          return makeSpecError(d->loc, "'*" + d->name + "' needs a list");
        for (int64_t x : v->shape)
          if (x < 0)
            return error("output " + decl.name + ": negative dimension in " +
                         v->str());
        t.dims.insert(t.dims.end(), v->shape.begin(), v->shape.end());
        continue;
      }
      if (d->kind == Expr::Kind::Splat) {
        auto &part = rankSyms[d->name];
        t.dims.insert(t.dims.end(), part.begin(), part.end());
        continue;
      }
      auto v = evalStatic(*d, env());
      if (!v)
        return v.takeError();
      if (v->kind != StaticValue::Kind::Int)
        return makeSpecError(d->loc, "output dimension of " + spec.name +
                                         " is " + v->str() +
                                         ", not an integer");
      if (v->i < 0)
        return error("output " + decl.name + ": dimension " +
                     std::to_string(t.dims.size()) + " is negative (" +
                     std::to_string(v->i) + ")");
      t.dims.push_back(v->i);
    }
  }
  impl.outputTypes.push_back(std::move(t));
  return llvm::Error::success();
}

llvm::Error Instantiator::evalLets() {
  for (auto &let : spec.lets) {
    auto v = evalStatic(*let.value, env());
    if (!v)
      return v.takeError();
    lets[let.name] = *v;
  }
  return llvm::Error::success();
}

llvm::Error
Instantiator::forEach(const Expr &f,
                      llvm::function_ref<llvm::Error(int64_t)> body) {
  auto n = evalStatic(*f.vars[0].second, env());
  if (!n)
    return n.takeError();
  if (n->kind != StaticValue::Kind::Int)
    return makeSpecError(f.vars[0].second->loc,
                         "comprehension count is " + n->str() +
                             ", not an integer");
  for (int64_t d = 0; d < n->i; ++d) {
    statics.emplace_back(f.vars[0].first, d);
    llvm::Error err = llvm::Error::success();
    bool keep = true;
    if (f.args.size() > 1) {
      auto c = evalCondition(*f.args[1], env());
      if (!c)
        err = c.takeError();
      else
        keep = *c;
    }
    if (!err && keep)
      err = body(d);
    statics.pop_back();
    if (err)
      return err;
  }
  return llvm::Error::success();
}

std::string Instantiator::extentKey(const Expr &e) {
  if (e.kind == Expr::Kind::Ident && !lets.count(e.name))
    return e.name;
  if (e.kind == Expr::Kind::Call && e.name == "dim" && e.args.size() == 2) {
    auto k = evalStatic(*e.args[1], env());
    auto shape = env().tensorShape(e.args[0]->name);
    if (k && shape && k->kind == StaticValue::Kind::Int) {
      int64_t d = k->i < 0 ? k->i + int64_t(shape->size()) : k->i;
      return "dim(" + e.args[0]->name + ", " + std::to_string(d) + ")";
    }
    if (!k)
      llvm::consumeError(k.takeError());
  }
  if (e.kind == Expr::Kind::Cond) {
    auto c = evalCondition(*e.args[0], env());
    if (c)
      return extentKey(*e.args[*c ? 1 : 2]);
    llvm::consumeError(c.takeError());
  }
  auto v = evalStatic(e, env());
  if (v)
    return v->str();
  llvm::consumeError(v.takeError());
  return "?";
}

static LExprPtr makeConst(double v, Loc loc) {
  auto c = std::make_unique<LExpr>();
  c->kind = LExpr::Kind::Const;
  c->value = v;
  c->loc = loc;
  return c;
}

static double floorDivValue(double a, double b) { return std::floor(a / b); }

/// Folds constant operands of value and index arithmetic.
static LExprPtr foldBinary(BinOp op, LExprPtr l, LExprPtr r, bool inIndex,
                           Loc loc) {
  bool lc = l->kind == LExpr::Kind::Const, rc = r->kind == LExpr::Kind::Const;
  if (lc && rc) {
    double a = l->value, b = r->value, v = 0;
    switch (op) {
    case BinOp::Add: v = a + b; break;
    case BinOp::Sub: v = a - b; break;
    case BinOp::Mul: v = a * b; break;
    case BinOp::Div: v = inIndex ? floorDivValue(a, b) : a / b; break;
    case BinOp::Eq: v = a == b; break;
    case BinOp::Ne: v = a != b; break;
    case BinOp::Lt: v = a < b; break;
    case BinOp::Le: v = a <= b; break;
    case BinOp::Gt: v = a > b; break;
    case BinOp::Ge: v = a >= b; break;
    case BinOp::And: v = (a != 0) && (b != 0); break;
    case BinOp::Or: v = (a != 0) || (b != 0); break;
    case BinOp::FloorDiv: v = floorDivValue(a, b); break;
    case BinOp::Mod: v = a - b * std::floor(a / b); break;
    case BinOp::Pow: v = std::pow(a, b); break;
    }
    return makeConst(v, loc);
  }
  if (op == BinOp::Mul && ((lc && l->value == 0) || (rc && r->value == 0)))
    return makeConst(0, loc);
  if ((op == BinOp::Add || op == BinOp::Sub) && rc && r->value == 0)
    return l;
  if (op == BinOp::Add && lc && l->value == 0)
    return r;
  if (op == BinOp::Mul && rc && r->value == 1)
    return l;
  if (op == BinOp::Mul && lc && l->value == 1)
    return r;
  auto e = std::make_unique<LExpr>();
  e->loc = loc;
  bool floorDiv = op == BinOp::FloorDiv || (inIndex && op == BinOp::Div);
  e->kind = floorDiv && inIndex ? LExpr::Kind::FloorDiv : LExpr::Kind::Binary;
  e->op = floorDiv ? BinOp::FloorDiv : op;
  e->ops.push_back(std::move(l));
  e->ops.push_back(std::move(r));
  return e;
}

static LExprPtr makeVar(unsigned v, Loc loc) {
  auto var = std::make_unique<LExpr>();
  var->kind = LExpr::Kind::Var;
  var->var = v;
  var->loc = loc;
  return var;
}

llvm::Expected<std::vector<LExprPtr>>
Instantiator::lowerIndexList(const Expr &e) {
  std::vector<LExprPtr> idx;
  for (auto &a : e.args) {
    if (a->kind == Expr::Kind::Splat && !a->args.empty()) {
      // `*for(d: n) index`: one index per static d.
      if (auto err = forEach(*a->args[0], [&](int64_t) -> llvm::Error {
            auto l = lower(*a->args[0]->args[0], /*inIndex=*/true);
            if (!l)
              return l.takeError();
            idx.push_back(std::move(*l));
            return llvm::Error::success();
          }))
        return std::move(err);
      continue;
    }
    if (a->kind == Expr::Kind::Splat) {
      for (auto &[key, v] : groups[a->name])
        idx.push_back(makeVar(v, a->loc));
      continue;
    }
    if (a->kind == Expr::Kind::Slice) {
      auto whole = std::make_unique<LExpr>();
      whole->kind = LExpr::Kind::Slice;
      whole->loc = a->loc;
      idx.push_back(std::move(whole));
      continue;
    }
    auto l = lower(*a, /*inIndex=*/true);
    if (!l)
      return l.takeError();
    idx.push_back(std::move(*l));
  }
  return idx;
}

llvm::Expected<LExprPtr> Instantiator::lowerAccess(const Expr &e) {
  auto group = groups.find(e.name);
  if (group != groups.end()) {
    // `i[key]`: one variable of a splat.
    auto k = evalStatic(*e.args[0], env());
    if (!k)
      return k.takeError();
    for (auto &[key, v] : group->second)
      if (k->kind == StaticValue::Kind::Int && key == k->i)
        return makeVar(v, e.loc);
    return makeSpecError(e.loc, "'" + e.name + "' has no variable " +
                                    k->str() + " (it has " +
                                    std::to_string(group->second.size()) +
                                    ")");
  }
  if (int in = spec.findInput(e.name); in < 0 || spec.inputs[in].isConst) {
    // An element of a static list (`perm[d]`, a const input's value).
    auto v = evalStatic(e, env());
    if (!v)
      return v.takeError();
    return makeConst(v->asDouble(), e.loc);
  }
  unsigned decl = static_cast<unsigned>(spec.findInput(e.name));
  unsigned t = decl;
  if (e.select) {
    // `inputs[k][...]`: operand `decl + k` (a variadic input is the last).
    auto k = evalStatic(*e.select, env());
    if (!k)
      return k.takeError();
    int64_t n = llvm::count(impl.inputDecl, decl);
    if (k->kind != StaticValue::Kind::Int || k->i < 0 || k->i >= n)
      return makeSpecError(e.select->loc,
                           "element " + k->str() + " of '" + e.name +
                               "' does not exist (it has " +
                               std::to_string(n) + ")");
    t = decl + static_cast<unsigned>(k->i);
  }
  if (!impl.inputTypes[t])
    return makeConst(0, e.loc); // absent optional input reads 0
  const TensorType &type = *impl.inputTypes[t];
  auto lowered = lowerIndexList(e);
  if (!lowered)
    return lowered.takeError();
  std::vector<LExprPtr> idx = std::move(*lowered);
  size_t rank = type.dims.size();
  if (idx.size() < rank)
    return error("input " + e.name + " has rank " + std::to_string(rank) +
                 " (shape " + shapeStr(type.dims) + ") but is read with " +
                 std::to_string(idx.size()) + " indices at " + e.loc.str());
  // Broadcasting: use the trailing indices.
  idx.erase(idx.begin(), idx.begin() + (idx.size() - rank));
  // Elements of a variadic input are read as written (no broadcasting):
  // Concat reads each at its own offset, out-of-range reads being zero.
  for (size_t d = 0; d < rank && !spec.inputs[decl].variadic; ++d) {
    if (idx[d]->kind != LExpr::Kind::Var)
      continue;
    int64_t extent = cur->vars[idx[d]->var].extent;
    int64_t size = type.dims[d];
    if (size == extent)
      continue;
    if (size == 1) {
      idx[d] = makeConst(0, idx[d]->loc);
      continue;
    }
    if (spec.inputs[decl].unconstrained)
      return error("input " + impl.inputNames[t] + ": dim " + std::to_string(d) + " is " +
                   std::to_string(size) + ", expected 1 or " +
                   std::to_string(extent) + " (broadcast to index '" +
                   cur->vars[idx[d]->var].name + "'; shape " +
                   shapeStr(type.dims) + ")");
  }
  auto acc = std::make_unique<LExpr>();
  acc->kind = LExpr::Kind::Access;
  acc->loc = e.loc;
  acc->tensor = t;
  acc->ops = std::move(idx);
  return acc;
}

/// `unbroadcast(T)`: the sum of T's elements that broadcast (ONNX, trailing
/// alignment) onto the current output element: T's extra leading dims and
/// its dims where the output has size 1 become reduction variables.
llvm::Expected<LExprPtr> Instantiator::lowerUnbroadcast(const Expr &e) {
  const std::string &name = e.args[0]->name;
  unsigned t = static_cast<unsigned>(spec.findInput(name));
  if (!impl.inputTypes[t])
    return makeConst(0, e.loc);
  const std::vector<int64_t> &dims = impl.inputTypes[t]->dims;
  size_t r = cur->outVars.size(), n = dims.size();
  if (n < r)
    return error("unbroadcast(" + name + "): rank " + std::to_string(n) +
                 " is smaller than the output rank " + std::to_string(r));
  auto red = std::make_unique<LExpr>();
  red->kind = LExpr::Kind::Reduce;
  red->reducer = ReduceKind::Sum;
  red->loc = e.loc;
  auto acc = std::make_unique<LExpr>();
  acc->kind = LExpr::Kind::Access;
  acc->loc = e.loc;
  acc->tensor = t;
  for (size_t d = 0; d < n; ++d) {
    auto var = std::make_unique<LExpr>();
    var->kind = LExpr::Kind::Var;
    var->loc = e.loc;
    bool reduce = d < n - r;
    if (!reduce) {
      unsigned ov = cur->outVars[d - (n - r)];
      int64_t extent = cur->vars[ov].extent;
      if (extent == dims[d]) {
        var->var = ov;
      } else if (extent == 1) {
        reduce = true;
      } else {
        return error("unbroadcast(" + name + "): dim " + std::to_string(d) +
                     " is " + std::to_string(dims[d]) +
                     ", which does not broadcast to " +
                     std::to_string(extent) + " (shape " + shapeStr(dims) +
                     ")");
      }
    }
    if (reduce) {
      unsigned id = static_cast<unsigned>(cur->vars.size());
      cur->vars.push_back({"u" + std::to_string(d), dims[d],
                           "dim(" + name + ", " + std::to_string(d) + ")"});
      red->redVars.push_back(id);
      var->var = id;
    }
    acc->ops.push_back(std::move(var));
  }
  if (red->redVars.empty())
    return acc;
  red->ops.push_back(std::move(acc));
  return red;
}

llvm::Expected<LExprPtr> Instantiator::lower(const Expr &e, bool inIndex) {
  switch (e.kind) {
  case Expr::Kind::Number:
    return makeConst(e.num, e.loc);
  case Expr::Kind::Ident: {
    for (auto it = scope.rbegin(); it != scope.rend(); ++it)
      if (it->first == e.name) {
        auto v = std::make_unique<LExpr>();
        v->kind = LExpr::Kind::Var;
        v->var = it->second;
        v->loc = e.loc;
        return v;
      }
    auto v = lookup(e.name);
    if (!v || !v->isNumber())
      return makeSpecError(e.loc, "'" + e.name + "' is not a number in " +
                                      spec.name);
    return makeConst(v->asDouble(), e.loc);
  }
  case Expr::Kind::Access:
    return lowerAccess(e);
  case Expr::Kind::Neg: {
    auto a = lower(*e.args[0], inIndex);
    if (!a)
      return a.takeError();
    if ((*a)->kind == LExpr::Kind::Const) {
      (*a)->value = -(*a)->value;
      return a;
    }
    auto n = std::make_unique<LExpr>();
    n->kind = LExpr::Kind::Neg;
    n->loc = e.loc;
    n->ops.push_back(std::move(*a));
    return n;
  }
  case Expr::Kind::Not: {
    auto a = lower(*e.args[0], inIndex);
    if (!a)
      return a.takeError();
    return foldBinary(BinOp::Eq, std::move(*a), makeConst(0, e.loc), inIndex,
                      e.loc);
  }
  case Expr::Kind::Binary: {
    auto l = lower(*e.args[0], inIndex);
    if (!l)
      return l.takeError();
    auto r = lower(*e.args[1], inIndex);
    if (!r)
      return r.takeError();
    return foldBinary(e.op, std::move(*l), std::move(*r), inIndex, e.loc);
  }
  case Expr::Kind::Cond: {
    auto c = evalCondition(*e.args[0], env());
    if (!c)
      return c.takeError();
    return lower(*e.args[*c ? 1 : 2], inIndex);
  }
  case Expr::Kind::Call: {
    if (e.name == "unbroadcast")
      return lowerUnbroadcast(e);
    if ((e.name == "sum" || e.name == "prod" ||
         (!inIndex && (e.name == "max" || e.name == "min"))) &&
        e.args.size() == 1 && e.args[0]->kind == Expr::Kind::For)
      return lowerUnrolled(e, *e.args[0], inIndex);
    bool clampInIndex = inIndex && (e.name == "max" || e.name == "min" ||
                                    e.name == "abs");
    if (clampInIndex) {
      // min / max / abs of index expressions (Pad's edge and reflect
      // modes): a Call node, folded when every operand is a constant.
      auto call = std::make_unique<LExpr>();
      call->kind = LExpr::Kind::Call;
      call->loc = e.loc;
      call->fn = e.name == "max" ? Fn::Max
                 : e.name == "min" ? Fn::Min
                                   : Fn::Abs;
      bool allConst = true;
      for (auto &a : e.args) {
        auto l = lower(*a, inIndex);
        if (!l)
          return l.takeError();
        allConst &= (*l)->kind == LExpr::Kind::Const;
        call->ops.push_back(std::move(*l));
      }
      if (!allConst)
        return call;
      double a = call->ops[0]->value;
      double v = call->fn == Fn::Abs   ? std::fabs(a)
                 : call->fn == Fn::Max ? std::max(a, call->ops[1]->value)
                                       : std::min(a, call->ops[1]->value);
      return makeConst(v, e.loc);
    }
    if (isStaticFunction(e.name) &&
        (inIndex || (e.name != "max" && e.name != "min"))) {
      auto v = evalStatic(e, env());
      if (!v)
        return v.takeError();
      if (!v->isNumber())
        return makeSpecError(e.loc, "'" + e.name + "' gives " + v->str() +
                                        ", not a number");
      return makeConst(v->asDouble(), e.loc);
    }
    if (e.name == "pow") {
      auto l = lower(*e.args[0], inIndex);
      if (!l)
        return l.takeError();
      auto r = lower(*e.args[1], inIndex);
      if (!r)
        return r.takeError();
      return foldBinary(BinOp::Pow, std::move(*l), std::move(*r), inIndex,
                        e.loc);
    }
    auto call = std::make_unique<LExpr>();
    call->kind = LExpr::Kind::Call;
    call->loc = e.loc;
    call->fn = llvm::StringSwitch<Fn>(e.name)
                   .Case("exp", Fn::Exp)
                   .Case("log", Fn::Log)
                   .Case("sqrt", Fn::Sqrt)
                   .Case("tanh", Fn::Tanh)
                   .Case("abs", Fn::Abs)
                   .Case("max", Fn::Max)
                   .Case("erf", Fn::Erf)
                   .Case("sigmoid", Fn::Sigmoid)
                   .Case("floor", Fn::Floor)
                   .Case("ceil", Fn::Ceil)
                   .Case("select", Fn::Select)
                   .Case("uniform", Fn::Uniform)
                   .Default(Fn::Min);
    for (auto &a : e.args) {
      auto l = lower(*a, inIndex);
      if (!l)
        return l.takeError();
      call->ops.push_back(std::move(*l));
    }
    return call;
  }
  case Expr::Kind::Reduce: {
    auto red = std::make_unique<LExpr>();
    red->kind = LExpr::Kind::Reduce;
    red->loc = e.loc;
    red->reducer = e.reducer;
    size_t before = scope.size();
    std::vector<std::string> newGroups;
    for (auto &[name, extentExpr] : e.vars) {
      if (name[0] == '*') {
        // A reduction splat: one variable per comprehension element.
        std::string g = name.substr(1);
        auto &members = groups[g];
        members.clear();
        newGroups.push_back(g);
        const Expr &f = *extentExpr;
        if (auto err = forEach(f, [&](int64_t d) -> llvm::Error {
              auto v = evalStatic(*f.args[0], env());
              if (!v)
                return v.takeError();
              if (v->kind != StaticValue::Kind::Int || v->i < 0)
                return makeSpecError(f.args[0]->loc,
                                     "extent of '*" + g + "' is " + v->str() +
                                         ", not a non-negative integer");
              unsigned id = static_cast<unsigned>(cur->vars.size());
              cur->vars.push_back(
                  {g + std::to_string(d), v->i, extentKey(*f.args[0])});
              red->redVars.push_back(id);
              members.emplace_back(d, id);
              return llvm::Error::success();
            }))
          return std::move(err);
        continue;
      }
      auto v = evalStatic(*extentExpr, env());
      if (!v)
        return v.takeError();
      if (v->kind != StaticValue::Kind::Int || v->i < 0)
        return makeSpecError(extentExpr->loc,
                             "extent of '" + name + "' is " + v->str() +
                                 ", not a non-negative integer");
      unsigned id = static_cast<unsigned>(cur->vars.size());
      cur->vars.push_back({name, v->i, extentKey(*extentExpr)});
      red->redVars.push_back(id);
      scope.emplace_back(name, id);
    }
    auto body = lower(*e.args[0], inIndex);
    scope.resize(before);
    for (auto &g : newGroups)
      groups.erase(g);
    if (!body)
      return body.takeError();
    if (red->redVars.empty())
      return std::move(*body);
    red->ops.push_back(std::move(*body));
    return red;
  }
  case Expr::Kind::Opaque: {
    auto op = std::make_unique<LExpr>();
    op->kind = LExpr::Kind::Opaque;
    op->loc = e.loc;
    for (auto &a : e.args) {
      auto l = lowerAccess(*a);
      if (!l)
        return l.takeError();
      op->ops.push_back(std::move(*l));
    }
    op->numArgs = static_cast<unsigned>(op->ops.size());
    for (auto &i : e.indices) {
      auto l = lower(*i, /*inIndex=*/true);
      if (!l)
        return l.takeError();
      op->ops.push_back(std::move(*l));
    }
    return op;
  }
  case Expr::Kind::For:
  case Expr::Kind::String:
  case Expr::Kind::Splat:
  case Expr::Kind::Slice:
    break;
  }
  return makeSpecError(e.loc, "unexpected expression in " + spec.name);
}

/// `sum(for(d: n) e)` / `prod(for(d: n) e)` in a value: the static sum or
/// product of e over d (empty: 0 / 1); `max(for(d: n) e)` /
/// `min(for(d: n) e)`: nested max / min calls (empty: an error).
llvm::Expected<LExprPtr> Instantiator::lowerUnrolled(const Expr &call,
                                                     const Expr &f,
                                                     bool inIndex) {
  bool isSum = call.name == "sum";
  bool isExtremum = call.name == "max" || call.name == "min";
  LExprPtr acc = isExtremum ? nullptr : makeConst(isSum ? 0 : 1, call.loc);
  if (auto err = forEach(f, [&](int64_t) -> llvm::Error {
        auto l = lower(*f.args[0], inIndex);
        if (!l)
          return l.takeError();
        if (isExtremum) {
          if (!acc) {
            acc = std::move(*l);
            return llvm::Error::success();
          }
          auto c = std::make_unique<LExpr>();
          c->kind = LExpr::Kind::Call;
          c->loc = call.loc;
          c->fn = call.name == "max" ? Fn::Max : Fn::Min;
          c->ops.push_back(std::move(acc));
          c->ops.push_back(std::move(*l));
          acc = std::move(c);
          return llvm::Error::success();
        }
        acc = foldBinary(isSum ? BinOp::Add : BinOp::Mul, std::move(acc),
                         std::move(*l), inIndex, call.loc);
        return llvm::Error::success();
      }))
    return std::move(err);
  if (!acc)
    return makeSpecError(call.loc, call.name + "(for(...)) over no element");
  return acc;
}

llvm::Error Instantiator::lowerStmt(const BodyStmt &s, unsigned operand) {
  LoweredStmt &ls = impl.stmts[operand];
  cur = &ls;
  scope.clear();
  splatVars.clear();
  groups.clear();
  const std::vector<int64_t> &dims = impl.outputTypes[operand].dims;
  size_t named = 0;
  for (auto &i : s.indices)
    if (i[0] != '*')
      ++named;
  bool hasSplat = named != s.indices.size();
  if (hasSplat ? dims.size() < named : dims.size() != named)
    return makeSpecError(s.loc, "output " + impl.outputNames[operand] +
                                    " has rank " +
                                    std::to_string(dims.size()) +
                                    " but is indexed with " +
                                    std::to_string(named) + " indices");
  size_t splatLen = dims.size() - named;
  size_t d = 0;
  for (auto &i : s.indices) {
    if (i[0] == '*') {
      for (size_t k = 0; k < splatLen; ++k, ++d) {
        unsigned id = static_cast<unsigned>(ls.vars.size());
        ls.vars.push_back({i.substr(1) + std::to_string(k), dims[d],
                           "X" + std::to_string(d)});
        ls.outVars.push_back(id);
        splatVars.push_back(id);
        groups[i.substr(1)].emplace_back(int64_t(k), id);
      }
      continue;
    }
    unsigned id = static_cast<unsigned>(ls.vars.size());
    ls.vars.push_back({i, dims[d], "X" + std::to_string(d)});
    ls.outVars.push_back(id);
    scope.emplace_back(i, id);
    ++d;
  }
  auto v = lower(*s.value, /*inIndex=*/false);
  if (!v)
    return v.takeError();
  ls.value = std::move(*v);
  return llvm::Error::success();
}

llvm::Error Instantiator::bindConstValues(
    const std::map<unsigned, std::vector<double>> &constValues) {
  for (auto &[index, values] : constValues)
    if (index >= spec.inputs.size() || !spec.inputs[index].isConst)
      return error("input " + std::to_string(index) +
                   " is not a const input, but a value was given for it");
  for (unsigned i = 0; i < spec.inputs.size(); ++i) {
    const InputDecl &decl = spec.inputs[i];
    if (!decl.isConst || !impl.inputTypes[i])
      continue;
    auto it = constValues.find(i);
    if (it == constValues.end())
      return error("input " + decl.name +
                   " is a compile-time constant, but its value is not known "
                   "(it must come from an initializer or a Constant node)");
    const TensorType &t = *impl.inputTypes[i];
    int64_t n = 1;
    for (int64_t d : t.dims)
      n *= d;
    if (int64_t(it->second.size()) != n)
      return error("input " + decl.name + ": " +
                   std::to_string(it->second.size()) + " values given for shape " +
                   shapeStr(t.dims));
    StaticValue v;
    if (decl.typeClass == TypeClass::Float) {
      if (!t.dims.empty())
        return error("input " + decl.name +
                     ": a float const input must be a scalar");
      v = StaticValue::ofFloat(it->second[0]);
    } else {
      std::vector<int64_t> ints;
      for (double x : it->second)
        ints.push_back(x >= 9.2233720368547758e18 ? INT64_MAX
                       : x <= -9.2233720368547758e18
                           ? INT64_MIN
                           : static_cast<int64_t>(x));
      if (t.dims.empty()) {
        v = StaticValue::ofInt(ints[0]);
      } else {
        v.kind = StaticValue::Kind::Ints;
        v.shape = std::move(ints);
      }
    }
    constStatics[decl.name] = v;
    impl.statics[decl.name] = v;
    impl.constValues[i] = it->second;
  }
  return llvm::Error::success();
}

llvm::Error Instantiator::run(
    llvm::ArrayRef<std::optional<TensorType>> inputs, const AttrMap &attrs,
    const std::map<unsigned, std::vector<double>> &constValues) {
  impl.spec = &spec;
  bool variadic = !spec.inputs.empty() && spec.inputs.back().variadic;
  if (!variadic && inputs.size() > spec.inputs.size())
    return error("expected at most " + std::to_string(spec.inputs.size()) +
                 " inputs, found " + std::to_string(inputs.size()));
  // A variadic (last) input takes every remaining operand, at least one.
  size_t operands = variadic ? std::max(inputs.size(), spec.inputs.size())
                             : spec.inputs.size();
  for (size_t i = 0; i < operands; ++i) {
    unsigned d = static_cast<unsigned>(std::min(i, spec.inputs.size() - 1));
    const InputDecl &decl = spec.inputs[d];
    impl.inputDecl.push_back(d);
    impl.inputNames.push_back(decl.variadic ? decl.name + "[" +
                                                  std::to_string(i - d) + "]"
                                            : decl.name);
    std::optional<TensorType> t;
    if (i < inputs.size())
      t = inputs[i];
    if (!t && (!decl.optional || decl.variadic))
      return error("input " + impl.inputNames.back() + " is required");
    impl.inputTypes.push_back(std::move(t));
  }
  if (auto e = bindAttrs(attrs))
    return e;
  for (unsigned i = 0; i < impl.inputTypes.size(); ++i)
    if (impl.inputTypes[i])
      if (auto e = bindInput(i, *impl.inputTypes[i]))
        return e;
  if (auto e = bindConstValues(constValues))
    return e;
  if (auto e = evalLets())
    return e;
  for (auto &[name, value] : lets)
    impl.statics.emplace(name, value);
  for (auto &c : spec.constraints) {
    auto ok = evalCondition(*c.cond, env());
    if (!ok)
      return ok.takeError();
    if (*ok)
      continue;
    std::string bound;
    for (auto &[name, value] : syms)
      bound += (bound.empty() ? "" : ", ") + name + "=" + std::to_string(value);
    for (size_t i = 0; i < spec.inputs.size(); ++i)
      if (impl.inputTypes[i] && spec.inputs[i].unconstrained &&
          c.text.find(spec.inputs[i].name) != std::string::npos)
        bound += (bound.empty() ? "" : ", ") + spec.inputs[i].name + ": " +
                 shapeStr(impl.inputTypes[i]->dims);
    for (auto &[name, value] : impl.attrs)
      if (c.text.find(name) != std::string::npos)
        bound += (bound.empty() ? "" : ", ") + name + "=" +
                 StaticValue::ofAttr(value).str();
    return error((c.message.empty() ? "" : c.message + ": ") +
                 "constraint `" + c.text + "` does not hold (" + bound + ")");
  }
  for (unsigned o = 0; o < spec.outputs.size(); ++o) {
    const OutputDecl &decl = spec.outputs[o];
    if (!decl.count) {
      impl.outputDecl.push_back(o);
      impl.outputNames.push_back(decl.name);
      if (auto e = computeOutput(o))
        return e;
      continue;
    }
    // A variadic output: one operand per element k in [0, count).
    auto n = evalStatic(*decl.count, env());
    if (!n)
      return n.takeError();
    if (n->kind != StaticValue::Kind::Int || n->i < 1)
      return error("output " + decl.name + ": the number of outputs is " +
                   n->str() + ", expected a positive integer");
    for (int64_t k = 0; k < n->i; ++k) {
      impl.outputDecl.push_back(o);
      impl.outputNames.push_back(decl.name + "[" + std::to_string(k) + "]");
      statics.emplace_back(decl.countVar, k);
      llvm::Error e = computeOutput(o);
      statics.pop_back();
      if (e)
        return e;
    }
  }
  impl.stmts.resize(impl.outputDecl.size());
  for (auto &s : spec.body)
    for (unsigned operand = 0; operand < impl.outputDecl.size(); ++operand) {
      if (impl.outputDecl[operand] != s.output)
        continue;
      unsigned first = static_cast<unsigned>(
          llvm::find(impl.outputDecl, s.output) - impl.outputDecl.begin());
      if (!s.elementVar.empty())
        statics.emplace_back(s.elementVar, int64_t(operand - first));
      llvm::Error e = lowerStmt(s, operand);
      if (!s.elementVar.empty())
        statics.pop_back();
      if (e)
        return e;
    }

  // Cache key: op, attributes, ranks and size-1 dims of inputs.
  std::string key = spec.name + "#" + std::to_string(spec.uid) + "(";
  for (auto &t : impl.inputTypes) {
    if (!t) {
      key += "-;";
      continue;
    }
    for (int64_t d : t->dims)
      key += d == 1 ? '1' : 'n';
    key += ';';
  }
  key += ")";
  for (auto &[name, value] : impl.attrs)
    key += name + "=" + StaticValue::ofAttr(value).str() + ";";
  for (auto &[index, value] : impl.constValues)
    key += spec.inputs[index].name + ":=" +
           impl.statics[spec.inputs[index].name].str() + ";";
  // Elements types matter where an input accepts any (Cast).
  for (auto &t : impl.inputTypes)
    key += t ? elemStr(t->elem) : "-";
  impl.cacheKey = std::move(key);
  return llvm::Error::success();
}

llvm::Expected<OpInstance>
tofu::tdl::instantiate(const OpSpec &spec,
                       llvm::ArrayRef<std::optional<TensorType>> inputs,
                       const AttrMap &attrs) {
  return instantiate(spec, inputs, attrs, {});
}

llvm::Expected<OpInstance> tofu::tdl::instantiate(
    const OpSpec &spec, llvm::ArrayRef<std::optional<TensorType>> inputs,
    const AttrMap &attrs,
    const std::map<unsigned, std::vector<double>> &constValues) {
  return instantiate(spec, inputs, attrs, constValues, std::nullopt);
}

llvm::Expected<OpInstance> tofu::tdl::instantiate(
    const OpSpec &spec, llvm::ArrayRef<std::optional<TensorType>> inputs,
    const AttrMap &attrs,
    const std::map<unsigned, std::vector<double>> &constValues,
    std::optional<unsigned> numOutputs) {
  auto impl = std::make_shared<OpInstance::Impl>();
  if (auto e = Instantiator(spec, *impl).run(inputs, attrs, constValues))
    return std::move(e);
  if (numOutputs && *numOutputs != impl->outputTypes.size()) {
    unsigned required = 0;
    for (unsigned decl : impl->outputDecl)
      required += !spec.outputs[decl].optional;
    if (*numOutputs < required || *numOutputs > impl->outputTypes.size())
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "op " + spec.name + ": " + std::to_string(*numOutputs) +
              " outputs asked for, the op has " +
              std::to_string(impl->outputTypes.size()) + " (" +
              std::to_string(required) +
              " required; only trailing optional outputs may be omitted)");
    impl->outputDecl.resize(*numOutputs);
    impl->outputNames.resize(*numOutputs);
    impl->outputTypes.resize(*numOutputs);
    impl->stmts.resize(*numOutputs);
    impl->cacheKey += "|outputs=" + std::to_string(*numOutputs);
  }
  OpInstance inst;
  inst.impl = std::move(impl);
  return inst;
}
