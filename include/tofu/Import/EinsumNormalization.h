//===- EinsumNormalization.h - Einsum's equation as label lists -*- C++ -*-===//
//
// The TDL spec of Einsum (tdl-specs/indexing.tdl) takes its equation as
// numbers: `terms` (the label of every dim of every operand, in order),
// `out` (the output's labels) and `extents` (each label's size). This
// parses the equation of an ONNX Einsum node into them.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_IMPORT_EINSUMNORMALIZATION_H
#define TOFU_IMPORT_EINSUMNORMALIZATION_H

#include "tofu/TDL/TDL.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>

namespace onnx {
class NodeProto;
} // namespace onnx

namespace tofu {

/// Adds the attributes `terms`, `out` and `extents` to Einsum `node` from
/// its `equation` (letters a-z, A-Z, one `...` per term, an optional
/// `->` output; without it the output is the ellipsis dims, then the
/// letters that occur once, in alphabetical order, as numpy). An ellipsis
/// takes the operand's remaining dims, aligned from the right across
/// operands; those dims may broadcast (size 1). A letter's dims must be
/// equal. `typeOf(name)` gives an operand's shape. Errors name `where`.
llvm::Error normalizeEinsum(
    onnx::NodeProto &node, llvm::StringRef where,
    llvm::function_ref<std::optional<tdl::TensorType>(llvm::StringRef)> typeOf);

} // namespace tofu

#endif // TOFU_IMPORT_EINSUMNORMALIZATION_H
