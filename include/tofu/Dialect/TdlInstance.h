//===- TdlInstance.h - tofu.compute ops as TDL instances --------*- C++ -*-===//
//
// Converts between the IR (tensor types, attribute dictionaries) and the TDL
// library's types, and instantiates the TDL spec of a tofu.compute op.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_DIALECT_TDLINSTANCE_H
#define TOFU_DIALECT_TDLINSTANCE_H

#include "tofu/Dialect/Tofu.h"
#include "tofu/TDL/TDL.h"

#include <map>
#include <vector>

namespace tofu {

/// The TDL type of a ranked tensor type (f32 or i64); error otherwise.
/// The TDL element type of an MLIR element type: f16, bf16, f32, f64, i1
/// (bool), signless (signed) and unsigned integers of 8 to 64 bits; none for
/// anything else.
std::optional<tdl::ElemType> toTdlElemType(mlir::Type elem);
/// The MLIR element type of `elem` (integers signless, unsigned ones `ui`).
mlir::Type fromTdlElemType(mlir::MLIRContext *ctx, tdl::ElemType elem);
llvm::Expected<tdl::TensorType> toTdlType(mlir::RankedTensorType type);
/// The tensor type of a TDL type.
mlir::RankedTensorType fromTdlType(mlir::MLIRContext *ctx,
                                   const tdl::TensorType &type);
/// Values of a compile-time constant operand, by operand index (see
/// tdl::instantiate).
using ConstValues = std::map<unsigned, std::vector<double>>;

/// Prefix of the reserved `attrs` entries that record the values of const
/// operands: `tdl.const<i>` (an array of f64) holds operand i's values.
inline constexpr llvm::StringLiteral kConstValuePrefix = "tdl.const";

/// The TDL attribute map of an op's `attrs` dictionary (without the reserved
/// `tdl.const<i>` entries).
llvm::Expected<tdl::AttrMap> toTdlAttrs(mlir::DictionaryAttr attrs);
/// The const operand values recorded in an op's `attrs` dictionary.
llvm::Expected<ConstValues> constValuesOf(mlir::DictionaryAttr attrs);
/// The attribute dictionary of a TDL attribute map, with the values of const
/// operands as `tdl.const<i>` entries.
mlir::DictionaryAttr fromTdlAttrs(mlir::MLIRContext *ctx,
                                  const tdl::AttrMap &attrs,
                                  const ConstValues &constValues = {});

/// Instantiates `spec` on the given operand types: trailing declared inputs
/// without an operand are absent.
llvm::Expected<tdl::OpInstance>
instantiateSpec(llvm::StringRef spec, mlir::TypeRange operandTypes,
                const tdl::AttrMap &attrs, const ConstValues &constValues = {});

/// Instantiates the TDL spec of `op` on its operand types. When `op` omits
/// trailing optional outputs, the instance has only the op's results.
llvm::Expected<tdl::OpInstance> instantiate(ComputeOp op);

} // namespace tofu

#endif // TOFU_DIALECT_TDLINSTANCE_H
