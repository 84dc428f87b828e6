//===- ExprProgramCheck.cpp - Structural checks of expression programs ----===//
//
// One pass over the nodes in id order: operands precede their users, so the
// set of free variables of every node is known when the node is visited
// (bit sets, one word per 64 variables).
//
//===----------------------------------------------------------------------===//

#include "tofu/runtime/ExprProgramCheck.h"

#include <cstdint>

using namespace tofu::plan;

namespace {

/// Expected operand count of a Call, or -1 for an unknown function.
int callArity(Function f) {
  switch (f) {
  case Function::Max:
  case Function::Min:
  case Function::Uniform:
    return 2;
  case Function::Select:
    return 3;
  case Function::Exp:
  case Function::Log:
  case Function::Sqrt:
  case Function::Tanh:
  case Function::Abs:
  case Function::Erf:
  case Function::Sigmoid:
  case Function::Floor:
  case Function::Ceil:
    return 1;
  }
  return -1;
}

} // namespace

std::string tofu::plan::verifyExprProgram(const ExprProgram &p,
                                          const std::vector<int64_t> &inputRanks,
                                          size_t outputRank) {
  const size_t nv = p.varExtents.size(), nn = p.nodes.size();
  if (nv > kMaxExprVars)
    return "program has " + std::to_string(nv) + " index variables (at most " +
           std::to_string(kMaxExprVars) + ")";
  if (nn == 0 || nn > kMaxExprNodes)
    return "program has " + std::to_string(nn) + " nodes (expected 1 to " +
           std::to_string(kMaxExprNodes) + ")";
  for (size_t v = 0; v < nv; ++v)
    if (p.varExtents[v] < 0)
      return "index variable " + std::to_string(v) + " has negative extent " +
             std::to_string(p.varExtents[v]);
  auto validVar = [&](int32_t v) {
    return v >= 0 && static_cast<size_t>(v) < nv;
  };

  const size_t words = (nv + 63) / 64;
  std::vector<uint64_t> isOutput(words, 0);
  if (p.outputVars.size() != outputRank)
    return "program has " + std::to_string(p.outputVars.size()) +
           " output variables for an output of rank " +
           std::to_string(outputRank);
  for (int32_t v : p.outputVars) {
    if (!validVar(v))
      return "output variable " + std::to_string(v) + " is out of range (" +
             std::to_string(nv) + " variables)";
    if (isOutput[v / 64] >> (v % 64) & 1)
      return "output variable " + std::to_string(v) + " appears twice";
    isOutput[v / 64] |= uint64_t(1) << (v % 64);
  }

  std::vector<uint64_t> bound(words, 0); // bound by some Reduce
  std::vector<uint64_t> free(nn * words, 0);
  for (size_t id = 0; id < nn; ++id) {
    const ExprNode &n = p.nodes[id];
    const std::string where = "node " + std::to_string(id);
    // data() + offset: with no variables (words == 0) the vector is empty
    // and free[0] would bind a reference to null.
    uint64_t *mine = free.data() + id * words;
    for (int32_t o : n.operands) {
      if (o < 0 || static_cast<size_t>(o) >= id)
        return where + ": operand " + std::to_string(o) +
               " is not an earlier node";
      const uint64_t *theirs = free.data() + static_cast<size_t>(o) * words;
      for (size_t w = 0; w < words; ++w)
        mine[w] |= theirs[w];
    }
    size_t arity = n.operands.size();
    auto wantArity = [&](size_t want) -> std::string {
      if (arity == want)
        return "";
      return where + ": expects " + std::to_string(want) + " operands, has " +
             std::to_string(arity);
    };
    std::string err;
    switch (n.kind) {
    case ExprNode::Kind::Const:
      err = wantArity(0);
      break;
    case ExprNode::Kind::Var:
      if (!validVar(n.var))
        return where + ": variable " + std::to_string(n.var) +
               " is out of range (" + std::to_string(nv) + " variables)";
      err = wantArity(0);
      mine[n.var / 64] |= uint64_t(1) << (n.var % 64);
      break;
    case ExprNode::Kind::Access: {
      if (n.input < 0 || static_cast<size_t>(n.input) >= inputRanks.size())
        return where + ": input " + std::to_string(n.input) +
               " is out of range (the op has " +
               std::to_string(inputRanks.size()) + " inputs)";
      int64_t rank = inputRanks[n.input];
      if (rank >= 0 && arity != static_cast<size_t>(rank))
        return where + ": access to input " + std::to_string(n.input) +
               " has " + std::to_string(arity) +
               " indices but the input has rank " + std::to_string(rank);
      break;
    }
    case ExprNode::Kind::Neg:
      err = wantArity(1);
      break;
    case ExprNode::Kind::Binary:
      if (n.binary > BinaryOp::Or)
        return where + ": unknown binary operator " +
               std::to_string(static_cast<int>(n.binary));
      err = wantArity(2);
      break;
    case ExprNode::Kind::Call: {
      int a = callArity(n.function);
      if (a < 0)
        return where + ": unknown function " +
               std::to_string(static_cast<int>(n.function));
      err = wantArity(static_cast<size_t>(a));
      break;
    }
    case ExprNode::Kind::Reduce: {
      if (n.reducer > Reducer::Prod)
        return where + ": unknown reducer " +
               std::to_string(static_cast<int>(n.reducer));
      if (n.vars.empty())
        return where + ": reduction binds no variable";
      err = wantArity(1);
      if (!err.empty())
        return err;
      std::vector<uint64_t> seen(words, 0);
      for (int32_t v : n.vars) {
        if (!validVar(v))
          return where + ": reduction variable " + std::to_string(v) +
                 " is out of range (" + std::to_string(nv) + " variables)";
        uint64_t bit = uint64_t(1) << (v % 64);
        if (seen[v / 64] & bit)
          return where + ": reduction variable " + std::to_string(v) +
                 " appears twice";
        if (isOutput[v / 64] & bit)
          return where + ": reduction variable " + std::to_string(v) +
                 " is an output variable";
        seen[v / 64] |= bit;
        bound[v / 64] |= bit;
        mine[v / 64] &= ~bit;
      }
      break;
    }
    default:
      return where + ": unknown node kind " +
             std::to_string(static_cast<int>(n.kind));
    }
    if (!err.empty())
      return err;
  }

  if (p.root < 0 || static_cast<size_t>(p.root) >= nn)
    return "root " + std::to_string(p.root) + " is not a node id (" +
           std::to_string(nn) + " nodes)";
  const uint64_t *rootFree = free.data() + static_cast<size_t>(p.root) * words;
  for (size_t w = 0; w < words; ++w)
    if (uint64_t stray = rootFree[w] & ~isOutput[w]) {
      size_t v = w * 64;
      while (!(stray & 1)) {
        stray >>= 1;
        ++v;
      }
      return "variable " + std::to_string(v) +
             " is read outside any reduction that binds it and is not an "
             "output variable";
    }

  std::vector<uint64_t> seenTop(words, 0);
  for (int32_t v : p.topReductionVars) {
    if (!validVar(v))
      return "top-level reduction variable " + std::to_string(v) +
             " is out of range (" + std::to_string(nv) + " variables)";
    uint64_t bit = uint64_t(1) << (v % 64);
    if (seenTop[v / 64] & bit)
      return "top-level reduction variable " + std::to_string(v) +
             " appears twice";
    if (!(bound[v / 64] & bit))
      return "top-level reduction variable " + std::to_string(v) +
             " is not bound by any reduction";
    seenTop[v / 64] |= bit;
  }
  return "";
}

std::string tofu::plan::verifyReductionRanges(
    const ExprProgram &p,
    const std::vector<std::pair<int64_t, int64_t>> &ranges) {
  if (ranges.empty())
    return "";
  if (ranges.size() != p.topReductionVars.size())
    return std::to_string(ranges.size()) + " reduction ranges for " +
           std::to_string(p.topReductionVars.size()) +
           " top-level reduction variables";
  for (size_t r = 0; r < ranges.size(); ++r) {
    int32_t v = p.topReductionVars[r];
    if (v < 0 || static_cast<size_t>(v) >= p.varExtents.size())
      return "top-level reduction variable " + std::to_string(v) +
             " is out of range";
    int64_t extent = p.varExtents[v];
    auto [lo, hi] = ranges[r];
    if (lo < 0 || lo > hi || hi > extent)
      return "reduction range [" + std::to_string(lo) + ", " +
             std::to_string(hi) + ") of variable " + std::to_string(v) +
             " is not inside [0, " + std::to_string(extent) + ")";
  }
  return "";
}
