//===- GradientExpansion.cpp - TDL gradient rules ---------------------------===//
//
// Resolves the `grad` rule of an op for one instance: conditions over the
// forward attributes and operand shapes are evaluated, nested calls are
// flattened in dependency order (each call defines one Temp), and the names
// of the rule are mapped to forward inputs, forward outputs and output
// gradients.
//
//===----------------------------------------------------------------------===//
#include "InstanceIR.h"
#include "StaticEvaluator.h"

#include "llvm/ADT/STLExtras.h"

using namespace tofu::tdl;

namespace {

class Expander {
public:
  Expander(const SpecLibrary &library, const OpInstance &forward,
           const GradRule &rule)
      : library(library), forward(forward), rule(rule) {}

  llvm::Expected<GradExpansion> run();

private:
  llvm::Error error(const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "op " + forward.opName().str() + ": " +
                                       msg.str());
  }
  std::optional<StaticValue> lookup(llvm::StringRef name) const {
    auto it = forward.attrs().find(name.str());
    if (it != forward.attrs().end())
      return StaticValue::ofAttr(it->second);
    // A const input (by its alias in the rule) or a let of the forward op.
    for (size_t i = 0; i < rule.inputAliases.size(); ++i)
      if (rule.inputAliases[i] == name && forward.isConstInput(i)) {
        auto s = forward.impl->statics.find(forward.inputNames()[i]);
        if (s != forward.impl->statics.end())
          return s->second;
      }
    auto s = forward.impl->statics.find(name.str());
    if (s != forward.impl->statics.end())
      return s->second;
    return std::nullopt;
  }
  std::optional<std::vector<int64_t>> tensorShape(llvm::StringRef name) const {
    for (size_t i = 0; i < rule.inputAliases.size(); ++i)
      if (rule.inputAliases[i] == name) {
        if (!forward.inputTypes()[i])
          return std::nullopt;
        return forward.inputTypes()[i]->dims;
      }
    for (size_t o = 0; o < rule.outputAliases.size(); ++o)
      if (rule.outputAliases[o] == name ||
          "d" + rule.outputAliases[o] == name)
        return forward.outputTypes()[o].dims;
    return std::nullopt;
  }
  StaticEnv env() const {
    return StaticEnv{
        [this](llvm::StringRef n) { return lookup(n); },
        [this](llvm::StringRef n) { return tensorShape(n); }};
  }
  llvm::Expected<GradOperand> expand(const Expr &e, unsigned input);

  const SpecLibrary &library;
  const OpInstance &forward;
  const GradRule &rule;
  GradExpansion result;
};

} // namespace

llvm::Expected<GradOperand> Expander::expand(const Expr &e, unsigned input) {
  switch (e.kind) {
  case Expr::Kind::Ident: {
    for (size_t i = 0; i < rule.inputAliases.size(); ++i)
      if (rule.inputAliases[i] == e.name) {
        if (!forward.inputTypes()[i])
          return error("gradient rule (" + e.loc.str() +
                       ") uses absent input " + forward.inputNames()[i]);
        return GradOperand{GradOperand::Kind::ForwardInput,
                           static_cast<unsigned>(i)};
      }
    for (size_t o = 0; o < rule.outputAliases.size(); ++o) {
      if (rule.outputAliases[o] == e.name)
        return GradOperand{GradOperand::Kind::ForwardOutput,
                           static_cast<unsigned>(o)};
      if ("d" + rule.outputAliases[o] == e.name)
        return GradOperand{GradOperand::Kind::OutputGrad,
                           static_cast<unsigned>(o)};
    }
    return makeSpecError(e.loc, "unknown name '" + e.name + "'");
  }
  case Expr::Kind::Cond: {
    auto c = evalCondition(*e.args[0], env());
    if (!c)
      return c.takeError();
    return expand(*e.args[*c ? 1 : 2], input);
  }
  case Expr::Kind::Call: {
    if (e.name == "not_supported")
      return error("gradient of input " + forward.inputNames()[input] +
                   " is not supported: " + e.args[0]->name + " (" +
                   e.loc.str() + ")");
    const OpSpec *callee = library.lookup(e.name);
    if (!callee)
      return makeSpecError(e.loc, "unknown op '" + e.name +
                                      "' in gradient rule");
    GradCall call;
    call.op = e.name;
    for (auto &a : e.args) {
      auto operand = expand(*a, input);
      if (!operand)
        return operand.takeError();
      call.operands.push_back(*operand);
    }
    for (auto &[name, valueExpr] : e.namedArgs) {
      const AttrDecl *decl = callee->findAttr(name);
      if (!decl)
        return makeSpecError(valueExpr->loc, "op '" + e.name +
                                                 "' has no attribute '" +
                                                 name + "'");
      auto v = evalStatic(*valueExpr, env());
      if (!v)
        return v.takeError();
      auto attr = v->toAttr(decl->kind);
      if (!attr)
        return makeSpecError(valueExpr->loc, "value " + v->str() +
                                                 " does not fit attribute '" +
                                                 name + "' of '" + e.name +
                                                 "'");
      call.attrs[name] = *attr;
    }
    result.calls.push_back(std::move(call));
    return GradOperand{GradOperand::Kind::Temp,
                       static_cast<unsigned>(result.calls.size() - 1)};
  }
  default:
    return makeSpecError(e.loc, "invalid gradient value");
  }
}

llvm::Expected<GradExpansion> Expander::run() {
  result.inputGrads.assign(forward.inputTypes().size(), std::nullopt);
  for (const GradStmt &s : rule.stmts) {
    const auto &type = forward.inputTypes()[s.input];
    if (!type || type->elem != ElemType::F32 || forward.isConstInput(s.input))
      continue;
    auto operand = expand(*s.value, s.input);
    if (!operand)
      return operand.takeError();
    result.inputGrads[s.input] = *operand;
  }
  return std::move(result);
}

llvm::Expected<GradExpansion>
tofu::tdl::expandGradient(const SpecLibrary &library,
                          const OpInstance &forward) {
  const GradRule *rule = library.lookupGrad(forward.opName());
  if (!rule)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "op " + forward.opName().str() +
                                       " has no gradient rule");
  return Expander(library, forward, *rule).run();
}
