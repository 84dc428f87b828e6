//===- TDL.h - Tensor Description Language: public interface ----*- C++ -*-===//
//
// TDL describes each operator once (tdl-specs/*.tdl): its inputs, attributes,
// output shapes, the value of every output element as an expression over input
// elements, and its gradient rule. This header is the interface the compiler
// passes use: spec lookup, instantiation at concrete shapes (shape inference),
// interval analysis (symbolic strategies and concrete required regions), the
// reference evaluator, and gradient-rule expansion.
//
// Errors are llvm::Error values whose message starts with `file:line:col:` when
// they concern a spec, or names the op and operand when they concern a use.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TDL_TDL_H
#define TOFU_TDL_TDL_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tofu::tdl {

/// Element type of a tensor operand. Values are float64 in the evaluator
/// whatever the type; Bool values are 0.0 / 1.0 (stored as one byte by the
/// runtime). The order matches tofu::plan::DType.
enum class ElemType : uint8_t {
  F32,
  I64,
  Bool,
  F64,
  I32,
  I16,
  I8,
  U8,
  U16,
  U32,
  U64,
  F16,
  BF16,
};

/// Number of element types.
inline constexpr unsigned kNumElemTypes = 13;

/// True for f16, bf16, f32, f64.
inline bool isFloatElem(ElemType t) {
  return t == ElemType::F32 || t == ElemType::F64 || t == ElemType::F16 ||
         t == ElemType::BF16;
}
/// True for the signed and unsigned integer types (not Bool).
inline bool isIntegerElem(ElemType t) {
  return !isFloatElem(t) && t != ElemType::Bool;
}
/// True for u8, u16, u32, u64.
inline bool isUnsignedElem(ElemType t) {
  return t == ElemType::U8 || t == ElemType::U16 || t == ElemType::U32 ||
         t == ElemType::U64;
}
/// Bytes per element (Bool is one byte).
inline unsigned elemBytes(ElemType t) {
  switch (t) {
  case ElemType::Bool:
  case ElemType::I8:
  case ElemType::U8:
    return 1;
  case ElemType::I16:
  case ElemType::U16:
  case ElemType::F16:
  case ElemType::BF16:
    return 2;
  case ElemType::F32:
  case ElemType::I32:
  case ElemType::U32:
    return 4;
  case ElemType::F64:
  case ElemType::I64:
  case ElemType::U64:
    return 8;
  }
  return 0;
}
/// The short spelling: "f32", "i64", "bool", "f64", "i32", "u8", "f16",
/// "bf16", ...
inline const char *elemName(ElemType t) {
  switch (t) {
  case ElemType::F32: return "f32";
  case ElemType::I64: return "i64";
  case ElemType::Bool: return "bool";
  case ElemType::F64: return "f64";
  case ElemType::I32: return "i32";
  case ElemType::I16: return "i16";
  case ElemType::I8: return "i8";
  case ElemType::U8: return "u8";
  case ElemType::U16: return "u16";
  case ElemType::U32: return "u32";
  case ElemType::U64: return "u64";
  case ElemType::F16: return "f16";
  case ElemType::BF16: return "bf16";
  }
  return "?";
}
/// The ONNX TensorProto data-type code of `t` (FLOAT 1, UINT8 2, INT8 3,
/// UINT16 4, INT16 5, INT32 6, INT64 7, BOOL 9, FLOAT16 10, DOUBLE 11,
/// UINT32 12, UINT64 13, BFLOAT16 16).
inline int64_t onnxTypeCode(ElemType t) {
  switch (t) {
  case ElemType::F32: return 1;
  case ElemType::U8: return 2;
  case ElemType::I8: return 3;
  case ElemType::U16: return 4;
  case ElemType::I16: return 5;
  case ElemType::I32: return 6;
  case ElemType::I64: return 7;
  case ElemType::Bool: return 9;
  case ElemType::F16: return 10;
  case ElemType::F64: return 11;
  case ElemType::U32: return 12;
  case ElemType::U64: return 13;
  case ElemType::BF16: return 16;
  }
  return 0;
}
/// `v` converted to element type `t` as a store does (runtime
/// ElementAccess.h): floats round to the type's precision, integers
/// truncate toward zero and wrap modulo 2^bits, bool is `v != 0`.
double convertToElem(double v, ElemType t);

/// A concrete tensor shape with its element type.
struct TensorType {
  std::vector<int64_t> dims;
  ElemType elem = ElemType::F32;
};

/// An attribute value.
struct AttrValue {
  enum class Kind : uint8_t { Int, Float, String, Ints };
  Kind kind = Kind::Int;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  static AttrValue ofInt(int64_t v);
  static AttrValue ofFloat(double v);
  static AttrValue ofString(std::string v);
  static AttrValue ofInts(std::vector<int64_t> v);
};
using AttrMap = std::map<std::string, AttrValue>;

/// Half-open integer range [lo, hi).
struct Range {
  int64_t lo = 0, hi = 0;
};
/// A box: one Range per dimension.
using Box = std::vector<Range>;

class OpSpec;   // parsed `op` declaration (opaque)
class GradRule; // parsed `grad` declaration (opaque)

/// All parsed specs. `builtin()` holds the specs of tdl-specs/ embedded at
/// build time.
class SpecLibrary {
public:
  SpecLibrary();
  ~SpecLibrary();
  SpecLibrary(SpecLibrary &&);
  /// Parses a .tdl source. Diagnostics are `fileName:line:col: error: ...`.
  llvm::Error addSource(llvm::StringRef fileName, llvm::StringRef text);
  /// Parses several sources (file name, text) as one set: a gradient rule
  /// may call ops of any of them (or of sources added before). On error
  /// nothing is added.
  llvm::Error addSources(
      llvm::ArrayRef<std::pair<llvm::StringRef, llvm::StringRef>> sources);
  const OpSpec *lookup(llvm::StringRef opName) const;
  const GradRule *lookupGrad(llvm::StringRef opName) const;
  /// Names of all ops, sorted.
  std::vector<std::string> opNames() const;
  /// The specs embedded from tdl-specs/ (parsed once, on first use).
  static const SpecLibrary &builtin();

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

/// A reduction variable of the top-level reducer of an output expression: a
/// case-2 (partition-n-reduce) candidate.
struct ReductionVar {
  std::string name;
  int64_t extent = 0;
  /// True when splitting it and summing the partial outputs gives the exact
  /// output: the output expression is `c * sum(...)` with c independent of
  /// the reduction variables. Only such variables become strategies.
  bool splittable = false;
};

/// A spec instantiated at concrete input types and attributes: shape
/// inference done, broadcasting resolved, attributes defaulted.
class OpInstance {
public:
  const OpSpec &spec() const;
  llvm::StringRef opName() const;
  /// One entry per input operand; std::nullopt for an absent optional
  /// input. A variadic input (the last, `inputs: [*]...`) has one operand
  /// per element, named `inputs[k]` in inputNames(); likewise a variadic
  /// output (`outputs[k: n]`) in outputTypes() / outputNames().
  const std::vector<std::optional<TensorType>> &inputTypes() const;
  const std::vector<std::string> &inputNames() const;
  const std::vector<TensorType> &outputTypes() const;
  const std::vector<std::string> &outputNames() const;
  /// The outputs before the first optional one (`name?: [...]`): an op
  /// computes at least these; outputTypes() lists every declared output.
  unsigned numRequiredOutputs() const;
  /// True when output `output` is declared optional (`name?: [...]`).
  bool isOptionalOutput(unsigned output) const;
  const AttrMap &attrs() const; ///< with defaults filled in
  /// Values of the const inputs given to instantiate (by input index).
  const std::map<unsigned, std::vector<double>> &constValues() const;
  /// True when input `input` is declared `: int const` / `: float const`:
  /// its values are known at compile time and it is never read at run time
  /// (requiredRegions gives it an empty box).
  bool isConstInput(unsigned input) const;
  /// Reduction variables of output `output`'s top-level reducer (in order).
  std::vector<ReductionVar> reductionVars(unsigned output = 0) const;
  /// True when every input is read at exactly the output index (after
  /// broadcasting): `Y[*i] = f(X[*i], ...)`.
  bool isElementwise() const;

  /// Concrete interval analysis: the box of each input needed to compute the
  /// box `outputBox` of output `output`, with each reduction variable of
  /// that output's top-level reducer restricted to `reductionRanges[r]`
  /// (empty vector = full ranges). Result: one entry per input, nullopt for
  /// absent inputs; boxes are clamped to the input's shape (out-of-range
  /// reads are zero padding and need no data).
  std::vector<std::optional<Box>>
  requiredRegions(unsigned output, const Box &outputBox,
                  const std::vector<Range> &reductionRanges = {}) const;

  struct Impl;
  std::shared_ptr<const Impl> impl;
};

/// True when input `input` of `spec` is a compile-time constant (`: int
/// const`, `: float const`): instantiate needs its values.
bool isConstInput(const OpSpec &spec, unsigned input);

/// True when `spec` has a variadic output (`outputs[k: n]`, e.g. Split) and
/// an int attribute `num_outputs`: the number of outputs may then be a
/// parameter of the op, and callers that know a node's output count (the
/// ONNX importer, the node-test runner) pass it as `num_outputs` unless the
/// node sets that attribute.
bool takesOutputCount(const OpSpec &spec);

/// Instantiates `spec` (shape inference). Errors name the op, the operand and
/// the expected vs found shape.
llvm::Expected<OpInstance>
instantiate(const OpSpec &spec,
            llvm::ArrayRef<std::optional<TensorType>> inputs,
            const AttrMap &attrs);

/// As above, with the values of the spec's const inputs (`: int const`,
/// `: float const`), row-major, keyed by input index. Every present const
/// input needs its values; int values outside the int64 range (2^63 as a
/// double) saturate to INT64_MAX / INT64_MIN. A value for a non-const input
/// is an error.
llvm::Expected<OpInstance>
instantiate(const OpSpec &spec,
            llvm::ArrayRef<std::optional<TensorType>> inputs,
            const AttrMap &attrs,
            const std::map<unsigned, std::vector<double>> &constValues);

/// As above, for an op that computes only its first `numOutputs` outputs
/// (trailing optional outputs omitted; at least the required ones): the
/// instance has only those outputs (outputTypes(), analyses, lowering,
/// evaluation). std::nullopt: every declared output.
llvm::Expected<OpInstance>
instantiate(const OpSpec &spec,
            llvm::ArrayRef<std::optional<TensorType>> inputs,
            const AttrMap &attrs,
            const std::map<unsigned, std::vector<double>> &constValues,
            std::optional<unsigned> numOutputs);

/// A symbolic interval (paper §4.2, Fig. 4, with separate lower and upper
/// constants): [sum_i lower[i]*X_i + lowerConst, sum_i upper[i]*X_i +
/// upperConst] where X_i is the symbolic extent of output dimension i.
struct SymInterval {
  std::vector<double> lower, upper;
  double lowerConst = 0, upperConst = 0;
};

/// A basic partition strategy (paper §4.2): for 2 workers from
/// analyzeStrategies(op), for `parts` workers from
/// analyzeStrategies(op, parts).
struct Strategy {
  enum class Kind : uint8_t { SplitOutput, SplitReduction };
  Kind kind = Kind::SplitOutput;
  unsigned output = 0;    ///< which output
  int64_t dim = 0;        ///< SplitOutput: output dimension
  std::string reduction;  ///< SplitReduction: reduction variable name
  unsigned reductionIndex = 0;
  /// Names of the symbols the SymInterval coefficients refer to, in order:
  /// `X0 .. X{n-1}` for the dims of output `output`, then one symbol per
  /// distinct reduction extent of that output's expression (named by the
  /// extent's spelling, e.g. `K`), so that reduction ranges such as Gemm's
  /// k in [0, K) are expressible. Every SymInterval of this strategy has
  /// `symbols.size()` coefficients in `lower` and `upper`.
  std::vector<std::string> symbols;
  /// Concrete value of each symbol for the instance that was analyzed.
  std::vector<int64_t> symbolValues;
  /// Number of workers the split dimension is divided into.
  unsigned parts = 2;
  /// regions[w][input] = per-dimension symbolic interval of that input needed
  /// by worker w (w = 0 .. parts-1); nullopt for absent inputs. Worker w owns
  /// [w*X/parts, (w+1)*X/parts) of the split variable's range [0, X) (the
  /// paper's fractional form; halos appear as constants, e.g. conv1d's
  /// `+ K - 1`).
  std::vector<std::vector<std::optional<std::vector<SymInterval>>>> regions;
};

/// Symbolic interval analysis of an instance: all basic strategies, output
/// dimensions first (in order), then splittable reduction variables. Cached
/// per (op, attributes, input ranks).
llvm::Expected<std::vector<Strategy>> analyzeStrategies(const OpInstance &op);

/// How many symbolic analyses have run in this process (analyses served
/// from the per-signature cache do not count).
uint64_t symbolicAnalysisCount();

/// The same strategies with the split dimension divided into `parts` >= 2
/// workers (Strategy::parts, Strategy::regions[0 .. parts-1]). Cached per
/// (op, attributes, input ranks, parts).
llvm::Expected<std::vector<Strategy>> analyzeStrategies(const OpInstance &op,
                                                        unsigned parts);

/// Evaluates a symbolic interval at `symbolValues` (Strategy::symbolValues)
/// as a concrete half-open range: lower bound floored, upper bound ceiled
/// (so the result covers the region at any rounding of the split points).
Range evaluateInterval(const SymInterval &si,
                       llvm::ArrayRef<int64_t> symbolValues);

/// A dense tensor for the reference evaluator (row-major, float64 values;
/// I64 tensors are stored as exact doubles).
struct DenseTensor {
  TensorType type;
  std::vector<double> data;
};

/// Reference evaluator: computes every output of `op` from `inputs` (one per
/// declared input; nullptr for absent optional inputs) in float64, directly
/// from the TDL expression.
llvm::Expected<std::vector<DenseTensor>>
evaluate(const OpInstance &op, llvm::ArrayRef<const DenseTensor *> inputs);

/// An operand of a call in an expanded gradient rule.
struct GradOperand {
  enum class Kind : uint8_t {
    ForwardInput,  ///< index = forward op input
    ForwardOutput, ///< index = forward op output
    OutputGrad,    ///< index = forward op output whose gradient it is
    Temp,          ///< index = earlier GradCall
  };
  Kind kind = Kind::Temp;
  unsigned index = 0;
};

/// One op call of an expanded gradient rule; call i defines Temp i.
struct GradCall {
  std::string op;
  std::vector<GradOperand> operands;
  AttrMap attrs;
};

/// The gradient rule of a forward op, resolved for one instance: attribute
/// conditions evaluated, nested calls flattened in dependency order.
struct GradExpansion {
  std::vector<GradCall> calls;
  /// One per forward input: the operand holding its gradient, or nullopt when
  /// the input has no gradient (integer inputs, or no rule for it).
  std::vector<std::optional<GradOperand>> inputGrads;
};

/// Expands the gradient rule of `forward`'s op. Error if the op has no rule.
/// `outputsWithGradient` (one flag per output of `forward`; empty = all)
/// tells which outputs receive an incoming gradient: for the others,
/// `present(dY)` is false in the rule's conditions and the rule may not
/// read dY (the training step would have to supply zeros).
/// `inputsNeedingGradient` (one flag per input of `forward`; empty = all)
/// tells which inputs need a gradient: the rule's statements for the others
/// (data, frozen parameters, constants) are not expanded, so they may be
/// `not_supported` for this instance without making it an error.
llvm::Expected<GradExpansion>
expandGradient(const SpecLibrary &library, const OpInstance &forward,
               llvm::ArrayRef<bool> outputsWithGradient = {},
               llvm::ArrayRef<bool> inputsNeedingGradient = {});

} // namespace tofu::tdl

#endif // TOFU_TDL_TDL_H
