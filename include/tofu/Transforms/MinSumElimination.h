//===- MinSumElimination.h - exact min-sum by variable elimination -*- C++ -*-===//
//
// Minimizes a sum of cost tables over discrete variables exactly, by
// variable elimination (bucket elimination) in a greedy min-table-size
// order. The step DP of the partitioner (RecursivePartitioner.cpp) adds ops
// in BFS order, so its state is the tensor groups on a frontier: its cost
// grows with the graph's path width. Elimination in a free order grows with
// the (usually much smaller) width of the order it finds, so it solves
// exactly the graphs whose frontier is too wide for the step DP (a
// transformer block's attention fork-joins).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TRANSFORMS_MINSUMELIMINATION_H
#define TOFU_TRANSFORMS_MINSUMELIMINATION_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace tofu {

/// A cost over the variables of `scope` (distinct, any order). `table` has
/// one entry per combination of their values: the value of scope[i] counts
/// with stride Π_{j<i} domain(scope[j]) (scope[0] varies fastest).
struct CostFactor {
  std::vector<int> scope;
  std::vector<int64_t> table;
};

struct EliminationResult {
  int64_t cost = 0;            ///< the minimum of the sum of all factors
  std::vector<int> assignment; ///< a minimizing value of every variable
  size_t largestTable = 0;     ///< entries of the largest table built
};

/// Minimizes Σ factors over variables 0..domains.size()-1, variable v taking
/// values 0..domains[v]-1 (variables in no factor take 0). The order is
/// greedy: next the variable whose elimination builds the smallest table
/// (ties: the lowest variable). Among minimizers a variable takes its
/// lowest value given those eliminated after it, so the result is
/// deterministic. Fails, without a result, when a table would have more
/// than `maxTableEntries` entries, or all tables together more than
/// `maxTotalEntries`.
llvm::Expected<EliminationResult>
minimizeByElimination(llvm::ArrayRef<int64_t> domains,
                      std::vector<CostFactor> factors, size_t maxTableEntries,
                      size_t maxTotalEntries);

} // namespace tofu

#endif // TOFU_TRANSFORMS_MINSUMELIMINATION_H
