//===- AST.h - TDL abstract syntax tree ---------------------------*- C++ -*-===//
//
// The parsed form of a .tdl source: `op` declarations (OpSpec) and `grad`
// rules (GradRule). Expressions are one node type (Expr) whose meaning depends
// on its kind; identifiers are checked for scope by the parser but resolved to
// values only at instantiation (see Instantiate.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_LIB_TDL_AST_H
#define TOFU_LIB_TDL_AST_H

#include "tofu/TDL/TDL.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tofu::tdl {

/// A source position. `file` points into the SpecLibrary's stable list of
/// file names.
struct Loc {
  const std::string *file = nullptr;
  unsigned line = 0, col = 0;
  /// `file:line:col`.
  std::string str() const;
};

/// Builds the error `file:line:col: error: message`.
llvm::Error makeSpecError(const Loc &loc, const llvm::Twine &message);

enum class BinOp : uint8_t {
  Add, Sub, Mul, Div, Eq, Ne, Lt, Le, Gt, Ge, And, Or,
  FloorDiv, ///< `a // b` = floor(a / b)
  Mod,      ///< `a % b` = a - b * floor(a / b) (sign of b, like Python)
  Pow,      ///< `pow(a, b)` (a function in the syntax)
};
const char *binOpSpelling(BinOp op);

enum class ReduceKind : uint8_t { Sum, Max, Min, Prod };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

/// One TDL expression node.
struct Expr {
  enum class Kind : uint8_t {
    Number, ///< numeric literal (`num`; `isInt` when written without a dot)
    String, ///< string literal (`name` holds the text)
    Ident,  ///< identifier (`name`)
    Splat,  ///< `*i` inside an index list or `*D` inside a shape (`name`);
            ///< `*list` (args[0], name empty): a static list spliced into
            ///< an output shape or a comprehension spliced into an index list
    Access, ///< `name[args...]` tensor element
    Neg,    ///< `-args[0]`
    Not,    ///< `!args[0]`
    Binary, ///< `args[0] op args[1]`
    Cond,   ///< `args[0] ? args[1] : args[2]`
    Call,   ///< `name(args..., namedArgs...)`
    Reduce, ///< `reducer(vars...) args[0]`
    For,    ///< `for(v: count [if cond]) args[0]`: vars[0] = (v, count),
            ///< args[1] = the optional filter; one element per static v in
            ///< [0, count) passing the filter
    Slice,  ///< `:` as an index of an opaque argument: the whole dimension
    Opaque, ///< `opaque(args...)[indices...]`: args are tensor accesses
            ///< (with `:` slices), indices select an element of the hidden
            ///< function's result
  };
  Kind kind;
  Loc loc;
  double num = 0;
  bool isInt = false;
  std::string name;
  BinOp op = BinOp::Add;
  ReduceKind reducer = ReduceKind::Sum;
  std::vector<ExprPtr> args;
  /// Call: `name=value` arguments (gradient rules only).
  std::vector<std::pair<std::string, ExprPtr>> namedArgs;
  /// Reduce: the new index variables and their extents; a name starting
  /// with '*' is a reduction splat whose extent is a `for` comprehension
  /// (one variable per element, addressed as `r[key]`).
  std::vector<std::pair<std::string, ExprPtr>> vars;
  /// Opaque: the indices after `opaque(...)`.
  std::vector<ExprPtr> indices;
  /// Access of a variadic input `inputs[k][...]`: the static element index k
  /// (args are the indices into that element).
  ExprPtr select;

  Expr(Kind kind, Loc loc) : kind(kind), loc(loc) {}
};

/// The element types an input or output accepts.
enum class TypeClass : uint8_t {
  Float,   ///< f16, bf16, f32, f64 (bound to a type variable)
  Numeric, ///< Float and the integer types (bound to a type variable)
  All,     ///< Numeric and bool (bound to a type variable)
  Int,     ///< any integer type (inputs); i64 (outputs)
  Bool,    ///< bool
  Any,     ///< anything, unbound (Cast's input)
};

/// One dimension of a declared input shape.
struct DimDecl {
  enum class Kind : uint8_t { Symbol, Constant, Splat };
  Kind kind = Kind::Symbol;
  std::string name; ///< Symbol / Splat: the shape symbol
  int64_t value = 0;
  Loc loc;
};

struct InputDecl {
  std::string name;
  Loc loc;
  bool optional = false;
  bool isInt = false;
  /// The element types the input accepts (docs/TDL.md "Element types"):
  /// `float` (or nothing), `numeric` and `all` bind the op's type variable
  /// `typeVar`; `int` is any integer type, `bool` is Bool, `any` anything.
  TypeClass typeClass = TypeClass::Float;
  /// The type variable a Float/Numeric/All input binds (default "T").
  std::string typeVar = "T";
  /// Fixed element type: `bool` (Bool); `int` inputs record I64 here (the
  /// type of their values in static evaluation).
  ElemType elem = ElemType::F32;
  /// `: any`: any element type is accepted (Cast).
  bool anyElem = false;
  /// `: int const` / `: float const`: a compile-time constant input whose
  /// values are given to instantiate(); its name is a static value (a number
  /// for rank 0, else the flattened list), and it is never read at run time.
  bool isConst = false;
  /// `[*]`: any rank, dims not bound to symbols.
  bool unconstrained = false;
  /// `name: [...]...`: variadic, one or more operands (the last input only);
  /// element k is `name[k]` in the body, operand name `name[k]`.
  bool variadic = false;
  std::vector<DimDecl> dims;
};

struct AttrDecl {
  std::string name;
  Loc loc;
  AttrValue::Kind kind = AttrValue::Kind::Int;
  std::optional<AttrValue> defaultValue;
};

struct OutputDecl {
  std::string name;
  Loc loc;
  /// `name?`: an optional output (ONNX's optional outputs). Optional outputs
  /// follow the required ones; a tofu.compute op may omit trailing optional
  /// outputs, and the training step drops those nothing uses.
  bool optional = false;
  bool isInt = false;
  /// `: int` (I64), `: bool` (Bool), or the type of type variable `typeVar`
  /// (`: float`, `: numeric`, `: all` or nothing; F32 when no input binds
  /// it).
  TypeClass typeClass = TypeClass::Float;
  std::string typeVar = "T";
  ElemType elem = ElemType::F32;
  /// `: dtype(attr)`: the element type is the ONNX TensorProto data type in
  /// int attribute `attr` (1 FLOAT, 7 INT64, 9 BOOL, 11 DOUBLE, 10 FLOAT16,
  /// ...: every type of tdl::ElemType).
  std::string elemAttr;
  /// `name[k: count]`: a variadic output (the last output only) with
  /// `count` elements; `k` is static in the shape expressions.
  std::string countVar;
  ExprPtr count;
  /// `broadcast(A, B)`: indices of the inputs whose shapes are broadcast.
  std::vector<unsigned> broadcastOf;
  /// Otherwise: one expression per dim (Splat = `*D`).
  std::vector<ExprPtr> dims;
};

struct Constraint {
  ExprPtr cond;
  std::string text;    ///< source text of the condition
  std::string message; ///< optional user message
  Loc loc;
};

/// `Out[idx...] = value`.
struct BodyStmt {
  unsigned output = 0;
  Loc loc;
  /// `Out[k][idx...] = ...` of a variadic output: the static element var.
  std::string elementVar;
  /// LHS index names; an entry starting with '*' is a splat.
  std::vector<std::string> indices;
  ExprPtr value;
};

/// A parsed `op` declaration.
/// `let name = expr`: a named static value of an op (body), usable in
/// shapes, constraints, extents, indices and values.
struct LetDecl {
  std::string name;
  Loc loc;
  ExprPtr value;
};

class OpSpec {
public:
  std::string name;
  Loc loc;
  /// Static definitions, evaluated in order after the inputs are bound.
  std::vector<LetDecl> lets;
  std::vector<InputDecl> inputs;
  std::vector<AttrDecl> attrs;
  std::vector<OutputDecl> outputs;
  std::vector<Constraint> constraints;
  /// One statement per output, in output order.
  std::vector<BodyStmt> body;
  /// Unique id of this declaration in the process (analysis cache key).
  uint64_t uid = 0;

  int findInput(llvm::StringRef n) const;
  int findOutput(llvm::StringRef n) const;
  const AttrDecl *findAttr(llvm::StringRef n) const;
};

/// `dIn = value` of a gradient rule.
struct GradStmt {
  unsigned input = 0; ///< forward input index
  Loc loc;
  /// `dX[k] = ...` of a variadic input: the static element variable.
  std::string elementVar;
  ExprPtr value;
};

/// A parsed `grad` rule. Names in expressions are the aliases declared in
/// the rule's header.
class GradRule {
public:
  std::string op;
  Loc loc;
  std::vector<std::string> inputAliases, outputAliases;
  std::vector<GradStmt> stmts;
};

} // namespace tofu::tdl

#endif // TOFU_LIB_TDL_AST_H
