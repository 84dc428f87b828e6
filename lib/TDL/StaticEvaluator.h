//===- StaticEvaluator.h - TDL compile-time expressions -----------*- C++ -*-===//
//
// Evaluates the expressions that are resolved at instantiation: output
// shapes, reduction extents, `where` constraints, `?:` conditions, and the
// conditions and attribute values of gradient rules. Operands are numbers,
// strings, attributes, shape symbols and (in gradient rules) rank(X),
// shape(X), dim(X, i).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_LIB_TDL_STATICEVALUATOR_H
#define TOFU_LIB_TDL_STATICEVALUATOR_H

#include "AST.h"

#include <functional>

namespace tofu::tdl {

struct StaticValue {
  enum class Kind : uint8_t { Int, Float, String, Shape, Ints };
  Kind kind = Kind::Int;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> shape; ///< Shape and Ints
  bool isNumber() const { return kind == Kind::Int || kind == Kind::Float; }
  double asDouble() const { return kind == Kind::Int ? double(i) : f; }
  static StaticValue ofInt(int64_t v) {
    StaticValue r;
    r.i = v;
    return r;
  }
  static StaticValue ofFloat(double v) {
    StaticValue r;
    r.kind = Kind::Float;
    r.f = v;
    return r;
  }
  static StaticValue ofAttr(const AttrValue &a);
  /// Converts to an attribute value of kind `want` (int<->float allowed).
  std::optional<AttrValue> toAttr(AttrValue::Kind want) const;
  std::string str() const;
};

struct StaticEnv {
  /// Value of an identifier (attribute or shape symbol), nullopt if unknown.
  std::function<std::optional<StaticValue>(llvm::StringRef)> lookup;
  /// Shape of a tensor for rank()/shape()/dim(); nullopt if unknown or
  /// absent. May be empty (no tensors in scope).
  std::function<std::optional<std::vector<int64_t>>(llvm::StringRef)>
      tensorShape;
  /// Number of operands of a variadic tensor (`len(inputs)`); may be empty.
  /// Element k is known to tensorShape as `name[k]`.
  std::function<std::optional<int64_t>(llvm::StringRef)> variadicCount = {};
  /// The ONNX data-type code of a tensor's element type (`typecode(X)`);
  /// nullopt if unknown or absent. Set in gradient rules only.
  std::function<std::optional<int64_t>(llvm::StringRef)> tensorTypeCode = {};
};

llvm::Expected<StaticValue> evalStatic(const Expr &e, const StaticEnv &env);

/// `env` with the integer `name` bound to `value` (comprehension and static
/// reduction variables).
StaticEnv bindLocal(const StaticEnv &env, llvm::StringRef name, int64_t value);

/// True for the functions evaluated at instantiation (rank, dim, len, slice,
/// ...; see docs/TDL.md).
bool isStaticFunction(llvm::StringRef name);

/// Evaluates `e` as a condition (a nonzero number is true).
llvm::Expected<bool> evalCondition(const Expr &e, const StaticEnv &env);

} // namespace tofu::tdl

#endif // TOFU_LIB_TDL_STATICEVALUATOR_H
