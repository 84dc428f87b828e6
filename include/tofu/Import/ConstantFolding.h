//===- ConstantFolding.h - Import-time folding of shape arithmetic -*- C++ -*-===//
//
// PyTorch exports compute shapes at run time: Shape -> Gather -> Unsqueeze ->
// Concat -> Reshape chains, Cast, Slice, ConstantOfShape, Range, arithmetic
// on int64 scalars. tofuc needs every shape at compile time, so the importer
// evaluates such nodes when their inputs are known: `Shape` and `Size` need
// only their input's type; every other foldable op needs all its inputs to be
// compile-time constants (Constant nodes, integer initializers, earlier
// folded results). The result becomes a constant of the graph, used for the
// const operands (shapes, axes, ...) of later nodes or materialized as a
// non-trainable `tofu.param ... {constant}` where a node reads it at run time.
//
// The foldable ops are listed in docs/Import.md. Ops with a TDL spec are
// evaluated by the TDL reference evaluator (tdl::evaluate); Shape, Size,
// ConstantOfShape and Range, which have no spec, are evaluated here.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_IMPORT_CONSTANTFOLDING_H
#define TOFU_IMPORT_CONSTANTFOLDING_H

#include "tofu/TDL/TDL.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <vector>

namespace tofu {

/// Folded results larger than this many elements are not folded (the node is
/// imported as a run-time op instead).
inline constexpr int64_t kMaxFoldedElements = 1 << 16;

/// True when `opType` is on the import-time foldable list.
bool isFoldableOp(llvm::StringRef opType);

/// True when `opType` folds from its input's type alone (Shape, Size).
bool foldsFromTypesOnly(llvm::StringRef opType);

/// Evaluates the foldable op `opType` (ONNX semantics at opset 13+, after
/// the importer's opset normalization). `inputTypes` has one entry per
/// operand (nullopt = absent; trailing absent operands are ignored);
/// `inputValues` the values of the operands
/// (nullptr = unknown or absent; only Shape and Size accept unknown values).
/// `valueAttr` is ConstantOfShape's `value` tensor attribute, if given.
/// Returns the outputs, or std::nullopt when the result would exceed
/// kMaxFoldedElements; an error when the op cannot be evaluated on these
/// operands (its message names the op's problem, not the node).
llvm::Expected<std::optional<std::vector<tdl::DenseTensor>>>
foldOp(llvm::StringRef opType, const tdl::AttrMap &attrs,
       llvm::ArrayRef<std::optional<tdl::TensorType>> inputTypes,
       llvm::ArrayRef<const tdl::DenseTensor *> inputValues,
       const tdl::DenseTensor *valueAttr, unsigned numOutputs);

/// Evaluates `opType` as foldOp does, but any op with a TDL spec (by the
/// float64 reference evaluator) and without a size limit: for graphs that
/// tofuc runs once while compiling (training_info's initialization graph,
/// InitializationGraph.h), not for every node of a model.
llvm::Expected<std::vector<tdl::DenseTensor>>
evaluateOpOnce(llvm::StringRef opType, const tdl::AttrMap &attrs,
               llvm::ArrayRef<std::optional<tdl::TensorType>> inputTypes,
               llvm::ArrayRef<const tdl::DenseTensor *> inputValues,
               const tdl::DenseTensor *valueAttr, unsigned numOutputs);

} // namespace tofu

#endif // TOFU_IMPORT_CONSTANTFOLDING_H
