//===- ProgramLowering.h - TDL outputs as runtime expression programs -*- C++ -*-===//
//
// Lowers the expression of one output of an instantiated TDL op into the
// `plan::ExprProgram` that tofu-run's generic evaluator interprets (see
// runtime/include/tofu/runtime/Plan.h). Everything resolved at instantiation
// (attributes, shape symbols, `?:` on static conditions, splats, absent
// optional inputs, broadcasting) is already folded into the program; access
// indices are in global coordinates.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TDL_PROGRAMLOWERING_H
#define TOFU_TDL_PROGRAMLOWERING_H

#include "tofu/TDL/TDL.h"
#include "tofu/runtime/Plan.h"

namespace tofu::tdl {

/// Lowers output `output` of `op` into an expression program:
/// - `varExtents[v]` is the global extent of the statement's index variable v;
/// - `outputVars` has one variable per output dimension;
/// - `topReductionVars` are the variables of the top-level reducer, in the
///   order of `op.reductionVars(output)` (empty when there is none);
/// - an integer (i64) output's root is wrapped in `Floor`, as `evaluate` does;
///   a bool output yields 1.0 / 0.0.
/// Errors: `output` out of range; an opaque output (message contains
/// "opaque"), which needs a native kernel.
llvm::Expected<plan::ExprProgram> lowerToProgram(const OpInstance &op,
                                                 unsigned output);

} // namespace tofu::tdl

#endif // TOFU_TDL_PROGRAMLOWERING_H
