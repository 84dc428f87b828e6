//===- MinSumElimination.cpp - exact min-sum by variable elimination ------===//
//
// Bucket elimination: eliminating variable v replaces the factors that
// contain v by one factor over v's neighbours, min over v of their sum, and
// remembers the minimizing value of v for every combination of the
// neighbours. After the last variable, the values are read back in reverse
// elimination order. See tofu/Transforms/MinSumElimination.h.
//
//===----------------------------------------------------------------------===//
#include "tofu/Transforms/MinSumElimination.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <limits>
#include <set>

namespace tofu {
namespace {

/// What eliminating one variable left for reading its value back.
struct Elimination {
  int variable = 0;
  std::vector<int> scope;       ///< its neighbours when eliminated (sorted)
  std::vector<uint8_t> argmin;  ///< its best value per scope combination
};

llvm::Error tooLarge(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 message.str());
}

} // namespace

llvm::Expected<EliminationResult>
minimizeByElimination(llvm::ArrayRef<int64_t> domains,
                      std::vector<CostFactor> factors, size_t maxTableEntries,
                      size_t maxTotalEntries) {
  size_t n = domains.size();
  for (int64_t domain : domains)
    if (domain < 1 || domain > 255)
      return tooLarge("variable elimination: a variable has " +
                      llvm::Twine(domain) + " values (1 to 255 supported)");
  std::vector<std::vector<int>> factorsOf(n);
  std::vector<bool> alive(factors.size(), true);
  std::vector<std::set<int>> neighbours(n);
  for (auto [f, factor] : llvm::enumerate(factors))
    for (int v : factor.scope) {
      factorsOf[v].push_back(f);
      for (int u : factor.scope)
        if (u != v)
          neighbours[v].insert(u);
    }
  // Size of the table eliminating v would build (saturating).
  auto tableSize = [&](int v) {
    double size = 1;
    for (int u : neighbours[v])
      size *= domains[u];
    return size;
  };
  std::vector<double> weight(n);
  std::set<std::pair<double, int>> queue;
  for (size_t v = 0; v < n; ++v)
    if (!factorsOf[v].empty()) {
      weight[v] = tableSize(v);
      queue.insert({weight[v], static_cast<int>(v)});
    }

  EliminationResult result;
  // Factors over no variable at all (constants given by the caller).
  for (const CostFactor &factor : factors)
    if (factor.scope.empty())
      result.cost += factor.table.front();
  std::vector<Elimination> eliminations;
  size_t totalEntries = 0;
  while (!queue.empty()) {
    int v = queue.begin()->second;
    queue.erase(queue.begin());
    std::vector<int> live;
    for (int f : factorsOf[v])
      if (alive[f])
        live.push_back(f);
    std::vector<int> scope(neighbours[v].begin(), neighbours[v].end());
    double entries = tableSize(v);
    if (entries > maxTableEntries ||
        totalEntries + entries > maxTotalEntries)
      return tooLarge(llvm::formatv(
          "variable elimination needs a table of {0} entries over {1} "
          "variables ({2} entries built so far; limits {3} per table, {4} in "
          "all)",
          entries < 1e18 ? std::to_string(static_cast<uint64_t>(entries))
                         : std::string("more than 10^18"),
          scope.size(), totalEntries, maxTableEntries, maxTotalEntries));
    size_t size = static_cast<size_t>(entries);
    totalEntries += size;
    result.largestTable = std::max(result.largestTable, size);

    // Stride of each scope variable, and of v, in each live factor.
    size_t m = scope.size();
    std::vector<std::vector<int64_t>> stride(live.size(),
                                             std::vector<int64_t>(m, 0));
    std::vector<int64_t> strideOfV(live.size(), 0);
    for (auto [i, f] : llvm::enumerate(live)) {
      int64_t s = 1;
      for (int u : factors[f].scope) {
        if (u == v)
          strideOfV[i] = s;
        else
          stride[i][std::lower_bound(scope.begin(), scope.end(), u) -
                    scope.begin()] = s;
        s *= domains[u];
      }
    }
    CostFactor reduced;
    reduced.scope = scope;
    reduced.table.resize(size);
    Elimination elimination{v, scope, std::vector<uint8_t>(size)};
    std::vector<int64_t> value(m, 0);
    std::vector<int64_t> base(live.size(), 0);
    for (size_t t = 0; t < size; ++t) {
      int64_t best = std::numeric_limits<int64_t>::max();
      int bestValue = 0;
      for (int64_t x = 0; x < domains[v]; ++x) {
        int64_t sum = 0;
        for (size_t i = 0; i < live.size(); ++i)
          sum += factors[live[i]].table[base[i] + x * strideOfV[i]];
        if (sum < best) {
          best = sum;
          bestValue = x;
        }
      }
      reduced.table[t] = best;
      elimination.argmin[t] = static_cast<uint8_t>(bestValue);
      // Next combination of the scope (scope[0] fastest).
      for (size_t j = 0; j < m; ++j) {
        if (++value[j] < domains[scope[j]]) {
          for (size_t i = 0; i < live.size(); ++i)
            base[i] += stride[i][j];
          break;
        }
        for (size_t i = 0; i < live.size(); ++i)
          base[i] -= (domains[scope[j]] - 1) * stride[i][j];
        value[j] = 0;
      }
    }
    for (int f : live) {
      alive[f] = false;
      std::vector<int64_t>().swap(factors[f].table);
    }
    int id = factors.size();
    factors.push_back(std::move(reduced));
    alive.push_back(true);
    for (int u : scope)
      factorsOf[u].push_back(id);
    if (scope.empty())
      result.cost += factors[id].table.front();
    // The neighbours become a clique without v; their table sizes change.
    for (int u : scope) {
      neighbours[u].erase(v);
      for (int w : scope)
        if (w != u)
          neighbours[u].insert(w);
      queue.erase({weight[u], u});
      weight[u] = tableSize(u);
      queue.insert({weight[u], u});
    }
    eliminations.push_back(std::move(elimination));
  }

  result.assignment.assign(n, 0);
  for (auto it = eliminations.rbegin(); it != eliminations.rend(); ++it) {
    size_t index = 0, s = 1;
    for (int u : it->scope) {
      index += result.assignment[u] * s;
      s *= domains[u];
    }
    result.assignment[it->variable] = it->argmin[index];
  }
  return result;
}

} // namespace tofu
