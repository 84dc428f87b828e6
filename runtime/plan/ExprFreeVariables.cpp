//===- ExprFreeVariables.cpp - Free index variables of program nodes ------===//
//
// See ExprFreeVariables.h.
//
//===----------------------------------------------------------------------===//

#include "tofu/runtime/ExprFreeVariables.h"

#include <algorithm>
#include <iterator>

using namespace tofu::plan;

std::vector<std::vector<int32_t>>
tofu::plan::freeVariablesOfNodes(const ExprProgram &program) {
  std::vector<std::vector<int32_t>> free(program.nodes.size());
  for (size_t id = 0; id < program.nodes.size(); ++id) {
    const ExprNode &n = program.nodes[id];
    std::vector<int32_t> &vars = free[id];
    if (n.kind == ExprNode::Kind::Var) {
      vars.push_back(n.var);
      continue;
    }
    for (int32_t operand : n.operands) {
      std::vector<int32_t> merged;
      std::set_union(vars.begin(), vars.end(), free[operand].begin(),
                     free[operand].end(), std::back_inserter(merged));
      vars.swap(merged);
    }
    if (n.kind == ExprNode::Kind::Reduce) {
      std::vector<int32_t> bound(n.vars.begin(), n.vars.end());
      std::sort(bound.begin(), bound.end());
      std::vector<int32_t> rest;
      std::set_difference(vars.begin(), vars.end(), bound.begin(),
                          bound.end(), std::back_inserter(rest));
      vars.swap(rest);
    }
  }
  return free;
}
