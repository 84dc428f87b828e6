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
           const GradRule &rule, llvm::ArrayRef<bool> outputsWithGradient,
           llvm::ArrayRef<bool> inputsNeedingGradient)
      : library(library), forward(forward), rule(rule),
        outputsWithGradient(outputsWithGradient),
        inputsNeedingGradient(inputsNeedingGradient) {}

  llvm::Expected<GradExpansion> run();

private:
  llvm::Error error(const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "op " + forward.opName().str() + ": " +
                                       msg.str());
  }
  std::optional<StaticValue> lookup(llvm::StringRef name) const {
    if (element && element->first == name)
      return StaticValue::ofInt(element->second);
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
  /// The operands of a name of the rule (a forward input or output, or
  /// d<output>): one for a plain declaration, one per element for a
  /// variadic one. Empty when the name is unknown.
  std::vector<GradOperand> operandsOf(llvm::StringRef name) const {
    std::vector<GradOperand> r;
    const auto &in = forward.impl->inputDecl, &out = forward.impl->outputDecl;
    for (size_t i = 0; i < rule.inputAliases.size(); ++i)
      if (rule.inputAliases[i] == name)
        for (size_t k = 0; k < in.size(); ++k)
          if (in[k] == i)
            r.push_back({GradOperand::Kind::ForwardInput, unsigned(k)});
    for (size_t o = 0; o < rule.outputAliases.size(); ++o) {
      bool value = rule.outputAliases[o] == name;
      if (!value && "d" + rule.outputAliases[o] != name)
        continue;
      for (size_t k = 0; k < out.size(); ++k)
        if (out[k] == o)
          r.push_back({value ? GradOperand::Kind::ForwardOutput
                             : GradOperand::Kind::OutputGrad,
                       unsigned(k)});
    }
    return r;
  }
  /// False for the gradient of an output that receives none.
  bool hasGradient(unsigned output) const {
    return outputsWithGradient.empty() ||
           (output < outputsWithGradient.size() &&
            outputsWithGradient[output]);
  }
  std::optional<std::vector<int64_t>> typeOf(const GradOperand &o) const {
    if (o.kind == GradOperand::Kind::OutputGrad && !hasGradient(o.index))
      return std::nullopt;
    if (o.kind == GradOperand::Kind::ForwardInput) {
      if (!forward.inputTypes()[o.index])
        return std::nullopt;
      return forward.inputTypes()[o.index]->dims;
    }
    return forward.outputTypes()[o.index].dims;
  }
  /// `X` or `X[k]` (element k of a variadic X).
  std::optional<std::vector<int64_t>> tensorShape(llvm::StringRef name) const {
    size_t k = 0;
    if (name.ends_with("]")) {
      size_t open = name.rfind('[');
      if (open == llvm::StringRef::npos ||
          name.slice(open + 1, name.size() - 1).getAsInteger(10, k))
        return std::nullopt;
      name = name.take_front(open);
    }
    auto ops = operandsOf(name);
    if (k >= ops.size())
      return std::nullopt;
    return typeOf(ops[k]);
  }
  StaticEnv env() const {
    return StaticEnv{
        [this](llvm::StringRef n) { return lookup(n); },
        [this](llvm::StringRef n) { return tensorShape(n); },
        [this](llvm::StringRef n) -> std::optional<int64_t> {
          auto ops = operandsOf(n);
          if (ops.empty())
            return std::nullopt;
          return int64_t(ops.size());
        },
        [this](llvm::StringRef n) -> std::optional<int64_t> {
          auto ops = operandsOf(n);
          if (ops.size() != 1 ||
              (ops[0].kind == GradOperand::Kind::OutputGrad &&
               !hasGradient(ops[0].index)))
            return std::nullopt;
          if (ops[0].kind == GradOperand::Kind::ForwardInput) {
            const auto &type = forward.inputTypes()[ops[0].index];
            if (!type)
              return std::nullopt;
            return onnxTypeCode(type->elem);
          }
          return onnxTypeCode(forward.outputTypes()[ops[0].index].elem);
        }};
  }
  llvm::Expected<GradOperand> expand(const Expr &e, unsigned input);

  /// The element variable of the current `dX[k] = ...` statement.
  std::optional<std::pair<std::string, int64_t>> element;

  const SpecLibrary &library;
  const OpInstance &forward;
  const GradRule &rule;
  llvm::ArrayRef<bool> outputsWithGradient;
  /// One flag per forward input; empty = every input needs its gradient.
  llvm::ArrayRef<bool> inputsNeedingGradient;
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
  case Expr::Kind::Access: {
    // `X[k]`: element k of a variadic input, output or output gradient.
    auto ops = operandsOf(e.name);
    auto k = evalStatic(*e.args[0], env());
    if (!k)
      return k.takeError();
    if (k->kind != StaticValue::Kind::Int || k->i < 0 ||
        k->i >= int64_t(ops.size()))
      return makeSpecError(e.loc, "'" + e.name + "' has no element " +
                                      k->str());
    if (ops[k->i].kind == GradOperand::Kind::ForwardInput &&
        !forward.inputTypes()[ops[k->i].index])
      return error("gradient rule (" + e.loc.str() + ") uses absent input " +
                   forward.inputNames()[ops[k->i].index]);
    return ops[k->i];
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
      if (a->kind == Expr::Kind::Splat) {
        // `*X`: every element of a variadic tensor, in order.
        auto ops = operandsOf(a->name);
        if (ops.empty())
          return makeSpecError(a->loc, "unknown name '" + a->name + "'");
        call.operands.insert(call.operands.end(), ops.begin(), ops.end());
        continue;
      }
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
  const std::vector<unsigned> &decls = forward.impl->inputDecl;
  for (const GradStmt &s : rule.stmts) {
    // One operand per element of a variadic input (`dX[k] = ...`).
    int64_t k = 0;
    for (unsigned i = 0; i < decls.size(); ++i) {
      if (decls[i] != s.input)
        continue;
      const auto &type = forward.inputTypes()[i];
      if (!s.elementVar.empty())
        element.emplace(s.elementVar, k++);
      if (!type || !isFloatElem(type->elem) || forward.isConstInput(i))
        continue;
      if (!inputsNeedingGradient.empty() &&
          (i >= inputsNeedingGradient.size() || !inputsNeedingGradient[i]))
        continue; // nobody asks for it: its rule is not needed

      auto operand = expand(*s.value, i);
      if (!operand)
        return operand.takeError();
      result.inputGrads[i] = *operand;
    }
    element.reset();
  }
  return std::move(result);
}

llvm::Expected<GradExpansion>
tofu::tdl::expandGradient(const SpecLibrary &library,
                          const OpInstance &forward,
                          llvm::ArrayRef<bool> outputsWithGradient,
                          llvm::ArrayRef<bool> inputsNeedingGradient) {
  const GradRule *rule = library.lookupGrad(forward.opName());
  if (!rule)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "op " + forward.opName().str() +
                                       " has no gradient rule");
  return Expander(library, forward, *rule, outputsWithGradient,
                  inputsNeedingGradient)
      .run();
}
