//===- ChainMatching.h - Matching exported op chains ------------*- C++ -*-===//
//
// What the passes that replace an exporter's op chain by one op
// (tofu-fuse-gelu, tofu-fuse-layer-norm) and tofu-absorb-transposes use to
// read the IR: constant scalars, single-result producers, ranks, the other
// operand of a binary op.
// Internal to lib/Transforms.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_LIB_TRANSFORMS_CHAINMATCHING_H
#define TOFU_LIB_TRANSFORMS_CHAINMATCHING_H

#include "tofu/Dialect/Tofu.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>

namespace tofu {

/// The value of a constant scalar (a `constant` tofu.param holding one
/// float element), or nullopt.
inline std::optional<double> scalarConstant(mlir::Value v) {
  auto param = v.getDefiningOp<ParamOp>();
  if (!param || !param.getConstant() || param.getStateOf())
    return std::nullopt;
  auto value =
      mlir::dyn_cast_or_null<mlir::DenseElementsAttr>(param.getValueAttr());
  if (!value || value.getNumElements() != 1 ||
      !mlir::isa<mlir::FloatType>(value.getElementType()))
    return std::nullopt;
  return (*value.value_begin<llvm::APFloat>()).convertToDouble();
}

/// `v`'s producer when it is a single-result forward tofu.compute of
/// `spec` with `arity` inputs, else null.
inline ComputeOp computeOf(mlir::Value v, llvm::StringRef spec, size_t arity) {
  auto op = v ? v.getDefiningOp<ComputeOp>() : ComputeOp();
  if (!op || op.getSpec() != spec || op->getNumResults() != 1 ||
      op.getInputs().size() != arity || op.getGradOfAttr())
    return {};
  return op;
}

/// The rank of a ranked tensor value, -1 for anything else.
inline int64_t rankOf(mlir::Value v) {
  auto type = mlir::dyn_cast<mlir::RankedTensorType>(v.getType());
  return type ? type.getRank() : -1;
}

/// For a binary op one of whose operands `isKnown` accepts (a constant, say):
/// the other operand, or null when neither is accepted.
inline mlir::Value otherOperand(ComputeOp op,
                                llvm::function_ref<bool(mlir::Value)> isKnown) {
  mlir::Value a = op.getInputs()[0], b = op.getInputs()[1];
  if (isKnown(b))
    return a;
  if (isKnown(a))
    return b;
  return {};
}

} // namespace tofu

#endif // TOFU_LIB_TRANSFORMS_CHAINMATCHING_H
