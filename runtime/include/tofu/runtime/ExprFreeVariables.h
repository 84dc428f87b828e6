//===- ExprFreeVariables.h - Free index variables of program nodes -*- C++ -*-===//
//
// Which index variables each node of a plan::ExprProgram reads from outside:
// the variables its subexpression reads minus those its own Reduce nodes
// bind. The expression interpreter (runtime/lib/ExprInterpreter.cpp) and the
// CUDA kernel generator (lib/Target/CudaKernelGenerator.cpp) both place a
// node in the outermost loop where all of its free variables are bound;
// for a Reduce that means its loop runs once per value of those variables
// rather than once per iteration of every enclosing loop (a softmax's
// max(t: C) inside sum(j: C) runs once per row, not once per element).
// Part of tofu_plan (std only).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_EXPRFREEVARIABLES_H
#define TOFU_RUNTIME_EXPRFREEVARIABLES_H

#include "tofu/runtime/Plan.h"

#include <cstdint>
#include <vector>

namespace tofu::plan {

/// For every node of `program` (which must pass verifyExprProgram, so that
/// operands precede their users), the sorted, distinct ids of the index
/// variables it reads that no Reduce inside it binds.
std::vector<std::vector<int32_t>>
freeVariablesOfNodes(const ExprProgram &program);

} // namespace tofu::plan

#endif // TOFU_RUNTIME_EXPRFREEVARIABLES_H
