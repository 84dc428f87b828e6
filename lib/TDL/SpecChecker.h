//===- SpecChecker.h - TDL semantic checks ------------------------*- C++ -*-===//
//
// Checks a parsed declaration: identifiers in scope, arities of tensors and
// functions, index expressions affine in the index variables, conditions that
// depend only on attributes and shape symbols, well-formed gradient rules.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_LIB_TDL_SPECCHECKER_H
#define TOFU_LIB_TDL_SPECCHECKER_H

#include "AST.h"

#include "llvm/ADT/STLFunctionalExtras.h"

namespace tofu::tdl {

/// Checks an `op` declaration on its own.
llvm::Error checkOpSpec(const OpSpec &spec);

/// Checks a `grad` rule against its forward op `forward` (may be null when
/// the op is not known yet; then only the rule's own structure is checked)
/// and against the ops it calls, found through `lookup`.
llvm::Error
checkGradRule(const GradRule &rule, const OpSpec *forward,
              llvm::function_ref<const OpSpec *(llvm::StringRef)> lookup);

} // namespace tofu::tdl

#endif // TOFU_LIB_TDL_SPECCHECKER_H
