//===- MinSumEliminationTest.cpp - variable elimination is exact ----------===//
//
// minimizeByElimination against enumerating every assignment, on random
// sums of cost tables (chains, cycles, cliques, constants, unused
// variables), and its refusal of tables above its limits.
//
//===----------------------------------------------------------------------===//
#include "tofu/Transforms/MinSumElimination.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

namespace {

using tofu::CostFactor;

int64_t evaluate(const std::vector<CostFactor> &factors,
                 const std::vector<int64_t> &domains,
                 const std::vector<int> &assignment) {
  int64_t total = 0;
  for (const CostFactor &factor : factors) {
    size_t index = 0, stride = 1;
    for (int v : factor.scope) {
      index += assignment[v] * stride;
      stride *= domains[v];
    }
    total += factor.table[index];
  }
  return total;
}

TEST(MinSumElimination, EqualsEnumerationOnRandomFactorGraphs) {
  for (unsigned seed = 1; seed <= 300; ++seed) {
    std::mt19937 rng(seed);
    auto uniform = [&](int lo, int hi) {
      return std::uniform_int_distribution<int>(lo, hi)(rng);
    };
    int n = uniform(1, 7);
    std::vector<int64_t> domains(n);
    for (auto &d : domains)
      d = uniform(1, 4);
    std::vector<CostFactor> factors;
    int numFactors = uniform(0, 9);
    for (int f = 0; f < numFactors; ++f) {
      CostFactor factor;
      std::vector<int> all(n);
      for (int v = 0; v < n; ++v)
        all[v] = v;
      std::shuffle(all.begin(), all.end(), rng);
      factor.scope.assign(all.begin(), all.begin() + uniform(0, std::min(n, 4)));
      size_t size = 1;
      for (int v : factor.scope)
        size *= domains[v];
      // Small values so that ties (and the lowest-value rule) occur.
      for (size_t i = 0; i < size; ++i)
        factor.table.push_back(uniform(0, 5));
      factors.push_back(std::move(factor));
    }
    // Enumerate every assignment.
    std::vector<int> assignment(n, 0);
    int64_t minimum = std::numeric_limits<int64_t>::max();
    while (true) {
      minimum = std::min(minimum, evaluate(factors, domains, assignment));
      int v = 0;
      for (; v < n; ++v) {
        if (++assignment[v] < domains[v])
          break;
        assignment[v] = 0;
      }
      if (v == n)
        break;
    }
    if (factors.empty())
      minimum = 0;
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto result =
        tofu::minimizeByElimination(domains, factors, 1 << 20, 1 << 22);
    ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
    EXPECT_EQ(result->cost, minimum);
    // The assignment it returns achieves the minimum it reports.
    EXPECT_EQ(evaluate(factors, domains, result->assignment), result->cost);
    for (int v = 0; v < n; ++v) {
      EXPECT_GE(result->assignment[v], 0);
      EXPECT_LT(result->assignment[v], domains[v]);
    }
  }
}

TEST(MinSumElimination, RefusesTablesAboveTheLimit) {
  // A clique of 6 variables with 4 values: eliminating any one builds a
  // table over the other 5 (4^5 = 1024 entries).
  std::vector<int64_t> domains(6, 4);
  std::vector<CostFactor> factors;
  for (int a = 0; a < 6; ++a)
    for (int b = a + 1; b < 6; ++b)
      factors.push_back({{a, b}, std::vector<int64_t>(16, 1)});
  auto refused = tofu::minimizeByElimination(domains, factors, 1023, 1 << 22);
  ASSERT_FALSE(static_cast<bool>(refused));
  EXPECT_NE(llvm::toString(refused.takeError()).find("table of 1024 entries"),
            std::string::npos);
  auto solved = tofu::minimizeByElimination(domains, factors, 1024, 1 << 22);
  ASSERT_TRUE(static_cast<bool>(solved));
  EXPECT_EQ(solved->cost, 15);
  EXPECT_EQ(solved->largestTable, 1024u);
}

} // namespace
