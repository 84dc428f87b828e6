//===- ExprProgramCheck.h - Structural checks of expression programs -*- C++ -*-===//
//
// Verifies a plan::ExprProgram before anything evaluates it: the plan reader
// runs these on every Compute instruction (a corrupt program is a clear
// error, never a crash) and the expression interpreter runs them again on
// programs it is handed directly. Part of tofu_plan (std only).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_EXPRPROGRAMCHECK_H
#define TOFU_RUNTIME_EXPRPROGRAMCHECK_H

#include "tofu/runtime/Plan.h"

#include <string>
#include <utility>
#include <vector>

namespace tofu::plan {

/// Largest number of index variables / nodes a program may have.
inline constexpr size_t kMaxExprVars = 256;
inline constexpr size_t kMaxExprNodes = 1 << 16;

/// Checks that `program` is well formed for an op whose inputs have ranks
/// `inputRanks` (-1: unknown, e.g. an absent optional input) and whose output
/// has rank `outputRank`:
/// - variable extents are non-negative; `outputVars` has one distinct
///   variable per output dimension; `topReductionVars` are distinct and each
///   is bound by a Reduce node;
/// - every node's kind, operator, function and reducer is a known value, its
///   operand count fits its kind (Access: one index per input dimension;
///   Call: 2 for Max/Min, 3 for Select, else 1; Reduce: 1), and each operand
///   id is smaller than the node's own id (so the nodes form a DAG);
/// - Var and Reduce variables are in range; a Reduce binds distinct
///   variables, none of them an output variable;
/// - `root` is a node id, and every variable the root's expression reads is
///   an output variable or bound by an enclosing Reduce.
/// Returns an empty string or an error message.
std::string verifyExprProgram(const ExprProgram &program,
                              const std::vector<int64_t> &inputRanks,
                              size_t outputRank);

/// Checks one output's reduction ranges: empty, or one [lo, hi) per
/// `topReductionVars` entry with 0 <= lo <= hi <= the variable's extent.
std::string
verifyReductionRanges(const ExprProgram &program,
                      const std::vector<std::pair<int64_t, int64_t>> &ranges);

} // namespace tofu::plan

#endif // TOFU_RUNTIME_EXPRPROGRAMCHECK_H
