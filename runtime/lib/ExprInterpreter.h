//===- ExprInterpreter.h - Evaluate expression programs ---------*- C++ -*-===//
//
// The generic CPU implementation of any op that has a TDL spec: evaluates a
// plan::ExprProgram over an output buffer's region. Internal to
// tofu_runtime; reached through runCompute (ComputeKernel.h).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_LIB_EXPRINTERPRETER_H
#define TOFU_RUNTIME_LIB_EXPRINTERPRETER_H

#include "tofu/runtime/ComputeKernel.h"

namespace tofu::runtime {

/// Writes every element of `output`'s region: output variable
/// `program.outputVars[d]` takes the global coordinates of dimension d of
/// the region. Reductions run over their variables' whole extents, except
/// the program's top-level reduction variables, which run over `ranges`
/// when it is not empty.
///
/// Semantics (values in double precision):
/// - Access: each index operand is rounded with std::floor; an index outside
///   [0, global extent) in any dimension (or NaN) reads 0, as does an absent
///   input; an index inside the global shape but outside the input's local
///   box is an error naming the node, the input and the index.
/// - Reduce: Sum from 0, Prod from 1, Max from -inf, Min from +inf (a NaN
///   operand is skipped by Max/Min, as std::max/std::min do).
/// - Output: F32 rounds to float; I64 truncates toward zero and saturates
///   (NaN gives 0); Bool stores value != 0.
/// - Uniform: tofu::rng::counterUniform(seed, counter, randomStep).
/// Inputs are read as F32, I64 or Bool.
/// Returns an empty string or an error message.
std::string evaluateProgram(const plan::ExprProgram &program,
                            const std::vector<TensorView> &inputs,
                            const TensorView &output,
                            const ReductionRanges &ranges,
                            uint64_t randomStep = 0);

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_LIB_EXPRINTERPRETER_H
