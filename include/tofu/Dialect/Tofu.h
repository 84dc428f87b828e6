//===- Tofu.h - the tofu dialect --------------------------------*- C++ -*-===//
//
// Declares the tofu dialect, its attributes and operations (generated from
// dialects/tofu/*.td).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_DIALECT_TOFU_H
#define TOFU_DIALECT_TOFU_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tofu/TofuDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "tofu/TofuAttrs.h.inc"

#define GET_OP_CLASSES
#include "tofu/TofuOps.h.inc"

namespace tofu {
/// Name of the discardable attribute holding an op's analyzed strategies.
inline constexpr llvm::StringLiteral kStrategiesAttr = "tofu.strategies";
/// Name of the discardable attribute holding one tiling per result.
inline constexpr llvm::StringLiteral kTilingsAttr = "tofu.tilings";
/// Name of the discardable attribute holding an op's strategy per step.
inline constexpr llvm::StringLiteral kPlanAttr = "tofu.plan";
/// Name of the function attribute holding the device grid (k1, k2, ...).
inline constexpr llvm::StringLiteral kGridAttr = "tofu.grid";
/// Tags of the ops of an unrolled RNN/LSTM/GRU cell (docs/RecurrentUnrolling.md):
/// the step of the recurrence (i64 >= 0), the direction (i64, 0 forward or
/// 1 reverse) and the ONNX node the cell belongs to (string).
inline constexpr llvm::StringLiteral kTimestepAttr = "tofu.timestep";
inline constexpr llvm::StringLiteral kDirectionAttr = "tofu.direction";
inline constexpr llvm::StringLiteral kRecurrenceAttr = "tofu.recurrence";
} // namespace tofu

#endif // TOFU_DIALECT_TOFU_H
