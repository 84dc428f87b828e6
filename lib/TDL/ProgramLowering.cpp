//===- ProgramLowering.cpp - TDL outputs as runtime expression programs ----===//
//
// A post-order walk of the lowered statement (InstanceIR.h) that appends one
// plan::ExprNode per LExpr node, so operands always precede their users.
//
//===----------------------------------------------------------------------===//
#include "tofu/TDL/ProgramLowering.h"

#include "InstanceIR.h"

using namespace tofu;
using namespace tofu::tdl;

namespace {

class ProgramBuilder {
public:
  explicit ProgramBuilder(plan::ExprProgram &program) : program(program) {}

  /// Appends `e` (and its operands) and returns its node id, or -1 with
  /// `error` set.
  int32_t build(const LExpr &e) {
    if (e.kind == LExpr::Kind::Opaque || e.kind == LExpr::Kind::Slice)
      return -1; // a hidden computation: needs a native kernel
    plan::ExprNode n;
    std::vector<int32_t> operands;
    for (auto &op : e.ops) {
      int32_t id = build(*op);
      if (id < 0)
        return -1;
      operands.push_back(id);
    }
    switch (e.kind) {
    case LExpr::Kind::Const:
      n.kind = plan::ExprNode::Kind::Const;
      n.value = e.value;
      break;
    case LExpr::Kind::Var:
      n.kind = plan::ExprNode::Kind::Var;
      n.var = static_cast<int32_t>(e.var);
      break;
    case LExpr::Kind::Access:
      n.kind = plan::ExprNode::Kind::Access;
      n.input = static_cast<int32_t>(e.tensor);
      break;
    case LExpr::Kind::Neg:
      n.kind = plan::ExprNode::Kind::Neg;
      break;
    case LExpr::Kind::FloorDiv:
      n.kind = plan::ExprNode::Kind::Binary;
      n.binary = plan::BinaryOp::FloorDiv;
      break;
    case LExpr::Kind::Binary:
      n.kind = plan::ExprNode::Kind::Binary;
      n.binary = binary(e.op);
      break;
    case LExpr::Kind::Call:
      n.kind = plan::ExprNode::Kind::Call;
      n.function = function(e.fn);
      break;
    case LExpr::Kind::Reduce:
      n.kind = plan::ExprNode::Kind::Reduce;
      n.reducer = reducer(e.reducer);
      for (unsigned v : e.redVars)
        n.vars.push_back(static_cast<int32_t>(v));
      break;
    case LExpr::Kind::Slice:
    case LExpr::Kind::Opaque:
      return -1;
    }
    n.operands = std::move(operands);
    program.nodes.push_back(std::move(n));
    return static_cast<int32_t>(program.nodes.size() - 1);
  }

  static plan::BinaryOp binary(BinOp op) {
    switch (op) {
    case BinOp::Add: return plan::BinaryOp::Add;
    case BinOp::Sub: return plan::BinaryOp::Sub;
    case BinOp::Mul: return plan::BinaryOp::Mul;
    case BinOp::Div: return plan::BinaryOp::Div;
    case BinOp::Eq: return plan::BinaryOp::Eq;
    case BinOp::Ne: return plan::BinaryOp::Ne;
    case BinOp::Lt: return plan::BinaryOp::Lt;
    case BinOp::Le: return plan::BinaryOp::Le;
    case BinOp::Gt: return plan::BinaryOp::Gt;
    case BinOp::Ge: return plan::BinaryOp::Ge;
    case BinOp::And: return plan::BinaryOp::And;
    case BinOp::Or: return plan::BinaryOp::Or;
    case BinOp::FloorDiv: return plan::BinaryOp::FloorDiv;
    case BinOp::Mod: return plan::BinaryOp::Mod;
    case BinOp::Pow: return plan::BinaryOp::Pow;
    }
    return plan::BinaryOp::Add;
  }

  static plan::Function function(Fn fn) {
    switch (fn) {
    case Fn::Exp: return plan::Function::Exp;
    case Fn::Log: return plan::Function::Log;
    case Fn::Sqrt: return plan::Function::Sqrt;
    case Fn::Tanh: return plan::Function::Tanh;
    case Fn::Abs: return plan::Function::Abs;
    case Fn::Max: return plan::Function::Max;
    case Fn::Min: return plan::Function::Min;
    case Fn::Erf: return plan::Function::Erf;
    case Fn::Sigmoid: return plan::Function::Sigmoid;
    case Fn::Floor: return plan::Function::Floor;
    case Fn::Ceil: return plan::Function::Ceil;
    case Fn::Select: return plan::Function::Select;
    case Fn::Uniform: return plan::Function::Uniform;
    }
    return plan::Function::Exp;
  }

  static plan::Reducer reducer(ReduceKind r) {
    switch (r) {
    case ReduceKind::Sum: return plan::Reducer::Sum;
    case ReduceKind::Max: return plan::Reducer::Max;
    case ReduceKind::Min: return plan::Reducer::Min;
    case ReduceKind::Prod: return plan::Reducer::Prod;
    }
    return plan::Reducer::Sum;
  }

private:
  plan::ExprProgram &program;
};

} // namespace

llvm::Expected<plan::ExprProgram>
tofu::tdl::lowerToProgram(const OpInstance &op, unsigned output) {
  const OpInstance::Impl &impl = *op.impl;
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "lowerToProgram " + impl.spec->name +
                                       ": " + msg.str());
  };
  if (output >= impl.stmts.size())
    return fail("no output " + llvm::Twine(output) + " (the op has " +
                llvm::Twine(impl.stmts.size()) + ")");
  const LoweredStmt &s = impl.stmts[output];
  if (!s.value)
    return fail("output " + impl.outputNames[output] + " is opaque");
  if (containsOpaque(*s.value))
    return fail("output " + impl.outputNames[output] +
                " is opaque(...): it has no expression program and needs a "
                "native kernel");

  plan::ExprProgram program;
  for (const IndexVarInfo &v : s.vars)
    program.varExtents.push_back(v.extent);
  for (unsigned v : s.outVars)
    program.outputVars.push_back(static_cast<int32_t>(v));
  bool splittable;
  if (const LExpr *r = findTopReducer(*s.value, splittable))
    for (unsigned v : r->redVars)
      program.topReductionVars.push_back(static_cast<int32_t>(v));

  ProgramBuilder builder(program);
  int32_t root = builder.build(*s.value);
  if (root < 0)
    return fail("output " + impl.outputNames[output] + " is opaque");
  // Integer outputs need no node: the store truncates toward zero and wraps
  // (ElementAccess.h), as evaluate() does.
  if (impl.outputTypes[output].elem == ElemType::Bool) {
    // As evaluate: any nonzero value is true (1.0).
    plan::ExprNode zero;
    zero.kind = plan::ExprNode::Kind::Const;
    program.nodes.push_back(std::move(zero));
    plan::ExprNode ne;
    ne.kind = plan::ExprNode::Kind::Binary;
    ne.binary = plan::BinaryOp::Ne;
    ne.operands = {root, static_cast<int32_t>(program.nodes.size() - 1)};
    program.nodes.push_back(std::move(ne));
    root = static_cast<int32_t>(program.nodes.size() - 1);
  }
  program.root = root;
  return program;
}
