//===- InstanceIR.h - TDL expressions lowered for one instance ----*- C++ -*-===//
//
// instantiate() lowers each body statement of a spec into an LExpr tree in
// which everything known at instantiation is resolved: attributes and shape
// symbols are constants, `?:` conditions are chosen, `*i` splats are
// expanded, absent optional inputs read 0, and broadcasting is resolved
// (trailing indices; a size-1 dim read at a larger extent is read at 0).
// Index variables are numbered per statement. The interval analysis and
// the evaluator walk this form.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_LIB_TDL_INSTANCEIR_H
#define TOFU_LIB_TDL_INSTANCEIR_H

#include "AST.h"
#include "StaticEvaluator.h"

#include <map>

namespace tofu::tdl {

enum class Fn : uint8_t {
  Exp, Log, Sqrt, Tanh, Abs, Max, Min, Erf, Sigmoid, Floor, Ceil, Uniform,
  Select, ///< select(c, a, b) = c != 0 ? a : b (a value-level condition)
};

struct LExpr;
using LExprPtr = std::unique_ptr<LExpr>;

struct LExpr {
  enum class Kind : uint8_t {
    Const,    ///< `value`
    Var,      ///< index variable `var`
    Access,   ///< input `tensor` at `ops` (one index per dim of the tensor)
    Neg,      ///< -ops[0]
    Binary,   ///< ops[0] `op` ops[1] (value semantics; comparisons give 1/0;
              ///< FloorDiv, Mod and Pow included)
    FloorDiv, ///< floor(ops[0] / ops[1]) (`/` inside indices)
    Call,     ///< `fn`(ops...)
    Reduce,   ///< `reducer` over `redVars` of ops[0]
    Slice,    ///< `:` as an index of an opaque argument: the whole dim
    Opaque,   ///< opaque(...)[...]: ops[0 .. numArgs) are the argument
              ///< accesses, the rest the indices into the hidden result
  };
  Kind kind = Kind::Const;
  Loc loc;
  double value = 0;
  unsigned var = 0;
  unsigned tensor = 0;
  BinOp op = BinOp::Add;
  Fn fn = Fn::Exp;
  ReduceKind reducer = ReduceKind::Sum;
  std::vector<unsigned> redVars;
  std::vector<LExprPtr> ops;
  /// Opaque: how many of `ops` are arguments.
  unsigned numArgs = 0;
};

struct IndexVarInfo {
  std::string name;
  int64_t extent = 0;
  /// Spelling of the extent (shape symbol name where it is one); reduction
  /// variables with the same key share one symbol in the symbolic analysis.
  std::string extentKey;
};

/// One lowered `Out[idx...] = value` statement.
struct LoweredStmt {
  std::vector<unsigned> outVars; ///< one per output dim
  std::vector<IndexVarInfo> vars;
  LExprPtr value;
};

/// Shared state of an OpInstance.
struct OpInstance::Impl {
  const OpSpec *spec = nullptr;
  /// The declaration of each input / output operand (a variadic
  /// declaration has one operand per element, named `name[k]`).
  std::vector<unsigned> inputDecl, outputDecl;
  std::vector<std::optional<TensorType>> inputTypes;
  std::vector<std::string> inputNames, outputNames;
  std::vector<TensorType> outputTypes;
  AttrMap attrs;
  std::vector<LoweredStmt> stmts; ///< one per output
  /// Values of the const inputs (by input index).
  std::map<unsigned, std::vector<double>> constValues;
  /// The static value of each const input (a number for rank 0, else the
  /// flattened list) and of each let, for gradient rules.
  std::map<std::string, StaticValue> statics;
  /// (op, attributes, input ranks, size-1 dims): the analysis cache key.
  std::string cacheKey;
};

/// The top-level reducer of `e` (see OpInstance::reductionVars), or null.
/// `splittable` is set when partial results over a split of its variables
/// add up to the exact output.
const LExpr *findTopReducer(const LExpr &e, bool &splittable);

/// True when `e` contains an opaque(...) node.
bool containsOpaque(const LExpr &e);

/// Index variables used in the result indices of the opaque(...) nodes of
/// `e`: output dims that cannot be split (the hidden function computes its
/// whole result at once).
void collectOpaqueResultVars(const LExpr &e, std::vector<unsigned> &vars);

} // namespace tofu::tdl

#endif // TOFU_LIB_TDL_INSTANCEIR_H
