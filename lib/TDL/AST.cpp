//===- AST.cpp - TDL abstract syntax tree helpers ----------------------------===//
//
// Source locations, spec diagnostics and declaration lookups.
//
//===----------------------------------------------------------------------===//
#include "AST.h"

using namespace tofu::tdl;

std::string Loc::str() const {
  return (file ? *file : std::string("<tdl>")) + ":" + std::to_string(line) +
         ":" + std::to_string(col);
}

llvm::Error tofu::tdl::makeSpecError(const Loc &loc, const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 loc.str() + ": error: " + msg.str());
}

const char *tofu::tdl::binOpSpelling(BinOp op) {
  switch (op) {
  case BinOp::Add: return "+";
  case BinOp::Sub: return "-";
  case BinOp::Mul: return "*";
  case BinOp::Div: return "/";
  case BinOp::Eq: return "==";
  case BinOp::Ne: return "!=";
  case BinOp::Lt: return "<";
  case BinOp::Le: return "<=";
  case BinOp::Gt: return ">";
  case BinOp::Ge: return ">=";
  case BinOp::And: return "&&";
  case BinOp::Or: return "||";
  case BinOp::FloorDiv: return "//";
  case BinOp::Mod: return "%";
  case BinOp::Pow: return "pow";
  }
  return "?";
}

int OpSpec::findInput(llvm::StringRef n) const {
  for (unsigned i = 0; i < inputs.size(); ++i)
    if (inputs[i].name == n)
      return static_cast<int>(i);
  return -1;
}

int OpSpec::findOutput(llvm::StringRef n) const {
  for (unsigned i = 0; i < outputs.size(); ++i)
    if (outputs[i].name == n)
      return static_cast<int>(i);
  return -1;
}

const AttrDecl *OpSpec::findAttr(llvm::StringRef n) const {
  for (auto &a : attrs)
    if (a.name == n)
      return &a;
  return nullptr;
}

AttrValue AttrValue::ofInt(int64_t v) {
  AttrValue a;
  a.kind = Kind::Int;
  a.i = v;
  return a;
}
AttrValue AttrValue::ofFloat(double v) {
  AttrValue a;
  a.kind = Kind::Float;
  a.f = v;
  return a;
}
AttrValue AttrValue::ofString(std::string v) {
  AttrValue a;
  a.kind = Kind::String;
  a.s = std::move(v);
  return a;
}
AttrValue AttrValue::ofInts(std::vector<int64_t> v) {
  AttrValue a;
  a.kind = Kind::Ints;
  a.ints = std::move(v);
  return a;
}
