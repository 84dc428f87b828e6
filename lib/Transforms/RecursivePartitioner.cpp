//===- RecursivePartitioner.cpp - the partition search --------------------===//
//
// The recursive step DP of the paper (§5.2) over the coarsened graph (§5.1)
// and the baselines of §7.3. See tofu/Transforms/RecursivePartitioner.h.
//
// Step i decides, for every tensor group, the dimension cut at that step
// (its "option"), and for every op output the strategy at that step. Given
// the options of its tensor groups, each op output independently takes its
// cheapest strategy, so the search is over tensor-group options only: a sum
// of op-group cost functions, each over the tensor groups its members touch.
// The DP (BFS levels over the undirected coarsened graph, as in
// papers/soybean.txt §4.2) adds op groups one by one in BFS order; its state
// is the options of the tensor groups on the frontier (touched by added and
// by not yet added op groups). Ties keep the first option found, in a fixed
// enumeration order, so the result is deterministic.
//
//===----------------------------------------------------------------------===//
#include "tofu/Transforms/RecursivePartitioner.h"
#include "tofu/Analysis/TileGeometry.h"
#include "tofu/Dialect/TdlInstance.h"
#include "tofu/Transforms/Coarsening.h"
#include "tofu/Transforms/MinSumElimination.h"
#include "tofu/Transforms/StepTimeModel.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <unordered_map>

using namespace mlir;

namespace tofu {

const std::vector<std::string> &partitionerNames() {
  static const std::vector<std::string> names = {
      "tofu",      "data-parallel", "allrow-greedy", "spartan",
      "equal-chop", "icml18",       "exhaustive"};
  return names;
}

namespace {

llvm::Error failure(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 message.str());
}

/// Prime factors of n, largest first.
std::vector<int64_t> primeFactorsDescending(int64_t n) {
  std::vector<int64_t> factors;
  for (int64_t p = 2; p * p <= n; ++p)
    while (n % p == 0) {
      factors.push_back(p);
      n /= p;
    }
  if (n > 1)
    factors.push_back(n);
  std::sort(factors.rbegin(), factors.rend());
  return factors;
}

} // namespace

llvm::Expected<std::vector<InterconnectLevel>>
parseTopology(llvm::StringRef spec) {
  std::vector<InterconnectLevel> levels;
  SmallVector<StringRef> items;
  spec.split(items, ',');
  for (StringRef item : items) {
    item = item.trim();
    auto bad = [&](const char *why) {
      return failure("--topology: level '" + item + "' " + why +
                     "; expected COUNTx:NAME=GBPS, e.g. "
                     "'8x:nvlink=300,2x:pcie=16' (innermost level first)");
    };
    auto [countText, rest] = item.split("x:");
    auto [name, gbpsText] = rest.split('=');
    InterconnectLevel level;
    if (countText.getAsInteger(10, level.count) || level.count < 1)
      return bad("has no positive COUNT");
    if (name.empty())
      return bad("has no NAME");
    if (gbpsText.getAsDouble(level.gbps) || !(level.gbps > 0))
      return bad("has no positive GBPS");
    level.name = name.str();
    levels.push_back(level);
  }
  return levels;
}

llvm::Expected<StepPlan> planSteps(int64_t devices, llvm::StringRef topology) {
  if (devices < 1)
    return failure("the number of devices must be >= 1, not " +
                   llvm::Twine(devices));
  StepPlan plan;
  if (topology.empty()) {
    plan.steps = primeFactorsDescending(devices);
    if (plan.steps.empty())
      plan.steps = {1};
    return plan;
  }
  auto levels = parseTopology(topology);
  if (!levels)
    return levels.takeError();
  int64_t product = 1;
  for (const auto &level : *levels)
    product *= level.count;
  if (product != devices)
    return failure("--topology describes " + llvm::Twine(product) +
                   " devices but " + llvm::Twine(devices) +
                   " were asked for (--gpus)");
  // Slowest link first: the first step moves the fewest bytes (paper
  // Theorem 2), so it goes over the slowest link.
  std::stable_sort(levels->begin(), levels->end(),
                   [](const InterconnectLevel &a, const InterconnectLevel &b) {
                     return a.gbps < b.gbps;
                   });
  for (const auto &level : *levels)
    for (int64_t factor : primeFactorsDescending(level.count)) {
      plan.steps.push_back(factor);
      plan.gbps.push_back(level.gbps);
      plan.links.push_back(level.name);
    }
  if (plan.steps.empty()) {
    plan.steps = {1};
    plan.gbps = {levels->front().gbps};
    plan.links = {levels->front().name};
  }
  return plan;
}

namespace {

/// A tofu.compute op in the search.
struct OpNode {
  ComputeOp op;
  int signature = 0;
  std::vector<int> inputGroups;  ///< tensor group of each input
  std::vector<int> outputGroups; ///< tensor group of each output
};

/// What ops with one (spec, attributes, types) signature share.
struct Signature {
  tdl::OpInstance instance;
  /// Analyzed strategies of each output, without their regions.
  std::vector<std::vector<StrategyAttr>> strategies;
};

struct TensorGroup {
  std::vector<int64_t> shape;
  int64_t bytes = 0;
  bool holdsParam = false;
  std::vector<int> ops; ///< ops touching the group (indices, ascending)
};

/// The best strategies of one op at one step and what they cost.
struct OpCost {
  int64_t bytes = 0;
  /// What the search minimizes: `bytes`, or with a time model the predicted
  /// seconds of the op at this step in picoseconds (integers keep the DP's
  /// sums exact and its ties deterministic).
  int64_t cost = 0;
  std::vector<int> choice; ///< per output: strategy index, -1 = replicated
};

/// Which decisions a partitioner may take.
struct SearchRules {
  bool allowReduce = true;
  /// Ops may compute their whole output on every device (data-parallel's
  /// replicated weights); otherwise only when an output has no strategy.
  bool allowReplicatedCompute = false;
};

constexpr int64_t kReplicated = -1;

class Partitioner {
public:
  Partitioner(func::FuncOp func, SearchRules rules)
      : func(func), ctx(func.getContext()), rules(rules) {}

  llvm::Error buildGraph();

  /// Options (dims, or kReplicated) of tensor group g at the next step.
  std::vector<int64_t> naturalOptions(int g) const;

  /// Runs the step DP for the next step on `domains` and fixes its result.
  /// With `beamWidth` > 0 the DP keeps only the `beamWidth` cheapest states
  /// after each op (ties broken by their options): no longer exact, used
  /// when the exact DP's frontier outgrows its limits.
  llvm::Error solveStepByDP(const std::vector<std::vector<int64_t>> &domains,
                            int64_t crossCheckLimit, size_t beamWidth = 0);
  /// Solves the next step exactly by variable elimination
  /// (MinSumElimination.h) and fixes its result: for graphs whose BFS
  /// frontier is too wide for solveStepByDP. Sets tableOverflow when its
  /// tables outgrow their limits.
  llvm::Error
  solveStepByElimination(const std::vector<std::vector<int64_t>> &domains,
                         int64_t crossCheckLimit);
  /// Spartan's greedy step: largest tensor group first.
  void solveStepGreedyLargestFirst(
      const std::vector<std::vector<int64_t>> &domains);
  /// Fixes the next step's options and the ops' best strategies.
  void commitStep(const std::vector<int64_t> &options);
  /// Exact optimum over all steps by enumeration.
  llvm::Error solveExhaustive(int64_t limit);

  /// C_i for every step i: the total bytes on the grid of steps 1..i.
  std::vector<int64_t> prefixCosts();
  void apply(const PartitionResult &result);

  std::vector<int64_t> steps; ///< all steps of the recursion
  std::vector<TensorGroup> groups;
  /// Set when the last solveStepByDP failed because its states outgrew
  /// the DP's limits (rather than for a malformed graph).
  bool frontierOverflow = false;
  /// Set when the last solveStepByElimination failed for its table limits.
  bool tableOverflow = false;
  /// Limits of the exact solvers (SearchOptions).
  size_t maxFrontierStates = 0;
  size_t maxEliminationTable = 0;
  size_t numOps() const { return ops.size(); }
  /// The step-time objective (null: bytes) and each step's link bandwidth.
  const StepTimeModel *timeModel = nullptr;
  std::vector<double> stepGbps;

  /// The predicted seconds of the decided plan on `model`: compute of every
  /// op's share on the device with the largest share, and each step's
  /// transfers over its link (`gbps`, one per step).
  void predictTime(const StepTimeModel &model, llvm::ArrayRef<double> gbps,
                   double &computeSeconds,
                   std::vector<double> &commSecondsPerStep);

private:
  /// Cost of op `op` on the grid of the first `step + 1` steps when its
  /// tensor groups take `candidate` (indexed by group id via lookup) at
  /// `step`, with the decisions of earlier steps fixed.
  const OpCost &stepCost(int op, size_t step,
                         llvm::function_ref<int64_t(int)> candidate);
  TilingAttr tilingOf(llvm::ArrayRef<int64_t> cuts, size_t numSteps) const;
  /// Cost of output `output` of `op` under full cut lists and strategy
  /// indices for steps 0..numSteps-1.
  int64_t outputCost(int op, unsigned output, size_t numSteps,
                     llvm::ArrayRef<std::vector<int64_t>> inputCuts,
                     llvm::ArrayRef<int64_t> outputCuts,
                     llvm::ArrayRef<int> strategyPerStep);
  /// Predicted seconds of one device for output `output` of `op` at `step`
  /// under `strategyPerStep` (steps 0..step): its share's compute (the
  /// share on the grid of steps 0..step, of which the later steps leave one
  /// device an equal part) and the transfers of step `step`, whose bytes
  /// grew from `previousBytes` to `bytes` (C_{step-1} to C_step), spread
  /// evenly over the devices.
  double stepSeconds(const StepTimeModel &model, int op, unsigned output,
                     size_t step, llvm::ArrayRef<int> strategyPerStep,
                     int64_t bytes, int64_t previousBytes);
  /// Strategy options of output `output` of `op` at step `step`.
  std::vector<int> strategyOptions(int op, unsigned output, size_t step);
  /// The strategies of output `output` of `op` given by their indices per
  /// step (empty when the output is computed whole, index -1).
  SmallVector<StrategyAttr> strategiesOf(int op, unsigned output,
                                         llvm::ArrayRef<int> perStep) const;
  std::vector<std::vector<int>> bfsOrderOfOpGroups(
      const std::vector<std::vector<int64_t>> &domains,
      std::vector<std::vector<int>> &groupsOfOpGroup);
  /// The tensor groups with a choice that op `op` touches (ascending).
  std::vector<int> choiceGroupsOf(int op,
                                  const std::vector<std::vector<int64_t>> &domains);
  /// Cost of `op` at `step` for every combination of the options of `vars`
  /// (the first varying fastest); fails above kMaxOpCombinations.
  llvm::Expected<std::vector<int64_t>>
  opCostTable(int op, size_t step, const std::vector<int> &vars,
              const std::vector<std::vector<int64_t>> &domains);
  /// Test hook: fails unless `cost` is the minimum over every combination
  /// of the step's options.
  llvm::Error crossCheckStep(const std::vector<std::vector<int64_t>> &domains,
                             int64_t limit, int64_t cost);

  func::FuncOp func;
  MLIRContext *ctx;
  SearchRules rules;
  std::vector<OpNode> ops;
  std::vector<Signature> signatures;
  std::vector<std::vector<int>> opGroupMembers; ///< ops of each op group
  /// Decided cut of each tensor group per step (kReplicated or a dim).
  std::vector<std::vector<int64_t>> cuts;
  /// Decided strategy of each op output per step (-1 = replicated compute).
  std::vector<std::vector<std::vector<int>>> choices;
  std::unordered_map<std::string, OpCost> memo;
  std::string keyBuffer;
  /// outputCost's terms (`OutputShares`), keyed by the output's signature,
  /// number of steps and strategies, then the input (or the output) and its
  /// cuts: a cost table prices every combination of its groups' options,
  /// but each term depends on one group's option only.
  std::unordered_map<std::string, int64_t> termMemo;
  /// The shares of the plans whose terms were priced last (bounded: a
  /// share list holds k devices' boxes).
  std::unordered_map<std::string, std::unique_ptr<OutputShares>> sharesMemo;
};

llvm::Error Partitioner::buildGraph() {
  std::optional<Coarsening> coarsening = readCoarsening(func);
  if (!coarsening)
    coarsening = coarsenGraph(func);
  groups.assign(coarsening->numTensorGroups, {});
  std::vector<bool> seen(groups.size());
  llvm::Error error = llvm::Error::success();
  auto addValue = [&](Value value) -> bool {
    int64_t g = coarsening->tensorGroup.lookup(value);
    auto type = cast<RankedTensorType>(value.getType());
    std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
    if (!seen[g]) {
      seen[g] = true;
      groups[g].shape = shape;
      Type elem = type.getElementType();
      // Real element sizes (a bool is one byte, as in the plan).
      groups[g].bytes = type.getNumElements() *
                        ((elem.getIntOrFloatBitWidth() + 7) / 8);
    } else if (groups[g].shape != shape) {
      error = failure(llvm::formatv(
          "tensor group {0} mixes shapes (tofu.tensor_groups must group "
          "tensors of one shape)",
          g));
      return false;
    }
    if (isa_and_nonnull<ParamOp>(value.getDefiningOp()))
      groups[g].holdsParam = true;
    return true;
  };
  llvm::DenseMap<Attribute, int> signatureIds;
  opGroupMembers.assign(coarsening->numOpGroups, {});
  WalkResult walk = func.walk([&](Operation *operation) {
    if (!isa<InputOp, ParamOp, ComputeOp>(operation))
      return WalkResult::advance();
    for (Value result : operation->getResults())
      if (!addValue(result))
        return WalkResult::interrupt();
    auto op = dyn_cast<ComputeOp>(operation);
    if (!op)
      return WalkResult::advance();
    auto strategies = op->getAttrOfType<ArrayAttr>(kStrategiesAttr);
    if (!strategies) {
      error = failure("op '" + op.getName() + "' has no '" + kStrategiesAttr +
                      "'; run tofu-analyze-strategies first");
      return WalkResult::interrupt();
    }
    // One signature per (spec, attributes, operand and result types).
    Attribute key = ArrayAttr::get(
        ctx, {op.getSpecAttr(), op.getAttrs(),
              TypeAttr::get(FunctionType::get(ctx, op->getOperandTypes(),
                                              op->getResultTypes()))});
    auto [it, inserted] = signatureIds.try_emplace(key, signatures.size());
    if (inserted) {
      auto instance = tofu::instantiate(op);
      if (!instance) {
        error = failure("op '" + op.getName() +
                        "': " + llvm::toString(instance.takeError()));
        return WalkResult::interrupt();
      }
      Signature signature{*instance, {}};
      signature.strategies.resize(op.getNumResults());
      for (auto strategy : strategies.getAsRange<StrategyAttr>())
        signature.strategies[strategy.getOutput()].push_back(StrategyAttr::get(
            ctx, strategy.getKind(), strategy.getOutput(), strategy.getDim(),
            strategy.getVar(), ArrayAttr::get(ctx, {})));
      signatures.push_back(std::move(signature));
    }
    OpNode node;
    node.op = op;
    node.signature = it->second;
    int index = ops.size();
    for (Value input : op.getInputs()) {
      auto found = coarsening->tensorGroup.find(input);
      if (found == coarsening->tensorGroup.end()) {
        error = failure("op '" + op.getName() +
                        "' reads a value that is not a tofu tensor");
        return WalkResult::interrupt();
      }
      node.inputGroups.push_back(found->second);
      groups[found->second].ops.push_back(index);
    }
    for (Value result : op.getResults()) {
      node.outputGroups.push_back(coarsening->tensorGroup.lookup(result));
      groups[node.outputGroups.back()].ops.push_back(index);
    }
    opGroupMembers[coarsening->opGroup.lookup(op)].push_back(index);
    ops.push_back(std::move(node));
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return error;
  llvm::consumeError(std::move(error));
  for (TensorGroup &group : groups) {
    std::sort(group.ops.begin(), group.ops.end());
    group.ops.erase(std::unique(group.ops.begin(), group.ops.end()),
                    group.ops.end());
  }
  cuts.assign(groups.size(), {});
  choices.resize(ops.size());
  for (auto [i, node] : llvm::enumerate(ops))
    choices[i].assign(node.op.getNumResults(), {});
  return llvm::Error::success();
}

std::vector<int64_t> Partitioner::naturalOptions(int g) const {
  const TensorGroup &group = groups[g];
  if (group.shape.empty())
    return {kReplicated};
  size_t step = cuts[g].size();
  std::vector<int64_t> extents = group.shape;
  for (size_t s = 0; s < step; ++s)
    if (cuts[g][s] != kReplicated)
      extents[cuts[g][s]] = (extents[cuts[g][s]] + steps[s] - 1) / steps[s];
  std::vector<int64_t> options;
  for (size_t d = 0; d < extents.size(); ++d)
    if (extents[d] >= steps[step])
      options.push_back(d);
  if (options.empty()) {
    // Nothing divides into k_i non-empty parts: cut the largest dimension
    // (some parts are empty).
    int64_t largest = *std::max_element(extents.begin(), extents.end());
    for (size_t d = 0; d < extents.size(); ++d)
      if (extents[d] == largest)
        options.push_back(d);
  }
  return options;
}

TilingAttr Partitioner::tilingOf(llvm::ArrayRef<int64_t> cutList,
                                 size_t numSteps) const {
  if (cutList.empty() || cutList.front() == kReplicated)
    return TilingAttr::get(ctx, {}, {});
  SmallVector<int64_t> dims(cutList.begin(), cutList.begin() + numSteps);
  SmallVector<int64_t> parts(steps.begin(), steps.begin() + numSteps);
  return TilingAttr::get(ctx, dims, parts);
}

std::vector<int> Partitioner::strategyOptions(int op, unsigned output,
                                              size_t step) {
  const auto &prior = choices[op][output];
  if (step > 0 && !prior.empty() && prior.front() < 0)
    return {-1}; // computed whole on every device at every step
  std::vector<int> options;
  const auto &list = signatures[ops[op].signature].strategies[output];
  for (auto [i, strategy] : llvm::enumerate(list))
    if (rules.allowReduce || strategy.getKind().getValue() != "reduce")
      options.push_back(i);
  if (options.empty() || (step == 0 && rules.allowReplicatedCompute))
    options.push_back(-1);
  return options;
}

SmallVector<StrategyAttr>
Partitioner::strategiesOf(int op, unsigned output,
                          llvm::ArrayRef<int> perStep) const {
  SmallVector<StrategyAttr> plan;
  if (!perStep.empty() && perStep.front() >= 0)
    for (int index : perStep)
      plan.push_back(signatures[ops[op].signature].strategies[output][index]);
  return plan;
}

/// Appends the raw bytes of `value` to a memo key.
template <typename T> void appendKey(std::string &key, T value) {
  key.append(reinterpret_cast<const char *>(&value), sizeof(value));
}

int64_t Partitioner::outputCost(int op, unsigned output, size_t numSteps,
                                llvm::ArrayRef<std::vector<int64_t>> inputCuts,
                                llvm::ArrayRef<int64_t> outputCuts,
                                llvm::ArrayRef<int> strategyPerStep) {
  constexpr size_t kMaxCachedShares = 64;
  std::string planKey;
  appendKey(planKey, ops[op].signature);
  appendKey(planKey, output);
  appendKey(planKey, numSteps);
  for (int index : strategyPerStep.take_front(numSteps))
    appendKey(planKey, static_cast<int16_t>(index));
  OutputShares *shares = nullptr;
  auto sharesOfPlan = [&]() -> OutputShares & {
    if (shares)
      return *shares;
    auto found = sharesMemo.find(planKey);
    if (found == sharesMemo.end()) {
      if (sharesMemo.size() >= kMaxCachedShares)
        sharesMemo.clear();
      DeviceGrid grid{std::vector<int64_t>(steps.begin(),
                                           steps.begin() + numSteps)};
      found = sharesMemo
                  .try_emplace(planKey, std::make_unique<OutputShares>(
                                            grid,
                                            signatures[ops[op].signature]
                                                .instance,
                                            output,
                                            strategiesOf(op, output,
                                                         strategyPerStep)))
                  .first;
    }
    shares = found->second.get();
    return *shares;
  };
  // One term: `tag` and `index` name the input (or the output), `cutList`
  // its cuts per step.
  std::string key;
  auto term = [&](char tag, unsigned index, llvm::ArrayRef<int64_t> cutList,
                  auto compute) {
    key = planKey;
    appendKey(key, tag);
    appendKey(key, index);
    for (int64_t cut : cutList.take_front(numSteps))
      appendKey(key, static_cast<int8_t>(cut));
    auto [it, inserted] = termMemo.try_emplace(key, 0);
    if (inserted)
      it->second = compute(tilingOf(cutList, numSteps));
    return it->second;
  };
  int64_t bytes = 0;
  auto add = [&](int64_t term) {
    if (__builtin_add_overflow(bytes, term, &bytes))
      bytes = std::numeric_limits<int64_t>::max();
  };
  for (auto [i, cutList] : llvm::enumerate(inputCuts))
    add(term('i', i, cutList, [&](TilingAttr tiling) {
      return sharesOfPlan().inputFetchBytes(i, tiling);
    }));
  add(term('o', output, outputCuts, [&](TilingAttr tiling) {
    return sharesOfPlan().conversionBytes(tiling);
  }));
  return bytes;
}

const OpCost &
Partitioner::stepCost(int op, size_t step,
                      llvm::function_ref<int64_t(int)> candidate) {
  const OpNode &node = ops[op];
  auto cutsWith = [&](int g) {
    std::vector<int64_t> list(cuts[g].begin(), cuts[g].begin() + step);
    list.push_back(candidate(g));
    return list;
  };
  // The key first (a hit needs nothing else); the key buffer is reused.
  std::string &key = keyBuffer;
  key.clear();
  appendKey(key, node.signature);
  appendKey(key, step);
  auto appendCuts = [&](int g) {
    for (size_t s = 0; s < step; ++s)
      appendKey(key, static_cast<int8_t>(cuts[g][s]));
    appendKey(key, static_cast<int8_t>(candidate(g)));
  };
  for (int g : node.inputGroups)
    appendCuts(g);
  for (int g : node.outputGroups)
    appendCuts(g);
  for (const auto &prior : choices[op])
    for (size_t s = 0; s < step; ++s)
      appendKey(key, static_cast<int16_t>(prior[s]));
  auto found = memo.find(key);
  if (found != memo.end())
    return found->second;
  std::vector<std::vector<int64_t>> inputCuts, outputCuts;
  for (int g : node.inputGroups)
    inputCuts.push_back(cutsWith(g));
  for (int g : node.outputGroups)
    outputCuts.push_back(cutsWith(g));
  auto it = memo.try_emplace(key).first;
  OpCost &cost = it->second;
  for (unsigned o = 0; o < node.outputGroups.size(); ++o) {
    int64_t best = std::numeric_limits<int64_t>::max(), bestBytes = 0;
    int bestChoice = -1;
    std::vector<int> perStep(choices[op][o].begin(),
                             choices[op][o].begin() + step);
    // C_{step-1} of this output: fixed by the earlier steps.
    int64_t previousBytes =
        timeModel && step > 0
            ? outputCost(op, o, step, inputCuts, outputCuts[o], perStep)
            : 0;
    for (int option : strategyOptions(op, o, step)) {
      perStep.push_back(option);
      int64_t bytes =
          outputCost(op, o, step + 1, inputCuts, outputCuts[o], perStep);
      int64_t value = bytes;
      if (timeModel)
        value = std::llround(1e12 * stepSeconds(*timeModel, op, o, step,
                                                perStep, bytes,
                                                previousBytes));
      perStep.pop_back();
      if (value < best) {
        best = value;
        bestBytes = bytes;
        bestChoice = option;
      }
    }
    cost.bytes += bestBytes;
    cost.cost += best;
    cost.choice.push_back(bestChoice);
  }
  return cost;
}

double Partitioner::stepSeconds(const StepTimeModel &model, int op,
                                unsigned output, size_t step,
                                llvm::ArrayRef<int> strategyPerStep,
                                int64_t bytes, int64_t previousBytes) {
  const Signature &signature = signatures[ops[op].signature];
  DeviceGrid grid{std::vector<int64_t>(steps.begin(),
                                       steps.begin() + step + 1)};
  // The last device holds the largest parts of uneven splits.
  OpShare share = opShare(grid, signature.instance, output,
                          strategiesOf(op, output, strategyPerStep),
                          grid.numDevices() - 1);
  double later = 1, devices = 1;
  for (size_t s = 0; s < steps.size(); ++s) {
    devices *= steps[s];
    if (s > step)
      later *= steps[s];
  }
  double seconds = model.computeSeconds(
      describeShare(signature.instance, output, share), 1 / later);
  int64_t delta = bytes - previousBytes;
  // Each device exchanges with its k_i - 1 siblings of this step.
  seconds += model.transferSeconds(delta / devices, stepGbps[step],
                                   delta > 0 ? steps[step] - 1 : 0);
  return seconds;
}

void Partitioner::predictTime(const StepTimeModel &model,
                              llvm::ArrayRef<double> gbps,
                              double &computeSeconds,
                              std::vector<double> &commSecondsPerStep) {
  computeSeconds = 0;
  commSecondsPerStep.assign(steps.size(), 0);
  DeviceGrid grid{steps};
  double devices = grid.numDevices();
  for (size_t op = 0; op < ops.size(); ++op) {
    const Signature &signature = signatures[ops[op].signature];
    std::vector<std::vector<int64_t>> inputCuts;
    for (int g : ops[op].inputGroups)
      inputCuts.push_back(cuts[g]);
    for (unsigned o = 0; o < ops[op].outputGroups.size(); ++o) {
      computeSeconds += model.computeSeconds(describeShare(
          signature.instance, o,
          opShare(grid, signature.instance, o, strategiesOf(op, o, choices[op][o]),
                  grid.numDevices() - 1)));
      int64_t previous = 0;
      for (size_t numSteps = 1; numSteps <= steps.size(); ++numSteps) {
        std::vector<int> perStep(choices[op][o].begin(),
                                 choices[op][o].begin() + numSteps);
        int64_t bytes = outputCost(op, o, numSteps, inputCuts,
                                   cuts[ops[op].outputGroups[o]], perStep);
        int64_t delta = bytes - previous;
        commSecondsPerStep[numSteps - 1] += model.transferSeconds(
            delta / devices, gbps[numSteps - 1],
            delta > 0 ? steps[numSteps - 1] - 1 : 0);
        previous = bytes;
      }
    }
  }
}

std::vector<std::vector<int>> Partitioner::bfsOrderOfOpGroups(
    const std::vector<std::vector<int64_t>> &domains,
    std::vector<std::vector<int>> &groupsOfOpGroup) {
  size_t numOpGroups = opGroupMembers.size();
  groupsOfOpGroup.assign(numOpGroups, {});
  std::vector<std::vector<int>> opGroupsOfGroup(groups.size());
  for (size_t og = 0; og < numOpGroups; ++og) {
    auto &list = groupsOfOpGroup[og];
    for (int op : opGroupMembers[og]) {
      for (int g : ops[op].inputGroups)
        list.push_back(g);
      for (int g : ops[op].outputGroups)
        list.push_back(g);
    }
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
    // Only groups with a choice couple op groups.
    list.erase(std::remove_if(list.begin(), list.end(),
                              [&](int g) { return domains[g].size() < 2; }),
               list.end());
    for (int g : list)
      opGroupsOfGroup[g].push_back(og);
  }
  // A tensor group shared by many op groups (a weight used by every unrolled
  // timestep that coarsening did not merge) would put all of them in one BFS
  // level and their outputs on one frontier; such hubs stay on the frontier
  // while open but do not define the levels.
  constexpr size_t kHubDegree = 4;
  for (auto &list : opGroupsOfGroup)
    if (list.size() > kHubDegree)
      list.clear();
  // BFS over the undirected graph, components in program order, neighbours
  // in ascending order; each BFS level is one list.
  std::vector<std::vector<int>> levels;
  std::vector<bool> visited(numOpGroups);
  for (size_t start = 0; start < numOpGroups; ++start) {
    if (visited[start] || opGroupMembers[start].empty())
      continue;
    std::vector<int> level{static_cast<int>(start)};
    visited[start] = true;
    while (!level.empty()) {
      levels.push_back(level);
      std::vector<int> next;
      for (int og : level)
        for (int g : groupsOfOpGroup[og])
          for (int neighbour : opGroupsOfGroup[g])
            if (!visited[neighbour]) {
              visited[neighbour] = true;
              next.push_back(neighbour);
            }
      std::sort(next.begin(), next.end());
      level = std::move(next);
    }
  }
  return levels;
}

/// The most DP states one step keeps in all (memory bound of the step DP).
constexpr size_t kMaxTotalDPStates = 1 << 22;

/// One DP state: the options of the frontier's tensor groups.
struct DPEntry {
  std::string key; ///< option index per frontier group
  int64_t cost = 0;
  int parent = -1;
  std::string added; ///< option index per group added at this stage
};

llvm::Error
Partitioner::solveStepByDP(const std::vector<std::vector<int64_t>> &domains,
                           int64_t crossCheckLimit, size_t beamWidth) {
  frontierOverflow = false;
  size_t step = cuts.empty() ? 0 : cuts.front().size();
  std::vector<std::vector<int>> groupsOfOpGroup;
  std::vector<std::vector<int>> levels =
      bfsOrderOfOpGroups(domains, groupsOfOpGroup);
  // Op groups in BFS order, the members of each in program order; the DP
  // adds one op per stage (an exact elimination order: tensor groups
  // internal to an op group enter and leave the frontier within it).
  std::vector<int> order;
  for (const auto &level : levels)
    for (int og : level)
      order.insert(order.end(), opGroupMembers[og].begin(),
                   opGroupMembers[og].end());
  std::vector<std::vector<int>> groupsOfOp(ops.size());
  std::vector<int> remaining(groups.size(), 0);
  for (int op : order) {
    groupsOfOp[op] = choiceGroupsOf(op, domains);
    for (int g : groupsOfOp[op])
      ++remaining[g];
  }

  const size_t kMaxStates = maxFrontierStates;
  constexpr size_t kMaxTotalStates = kMaxTotalDPStates;
  if (!beamWidth) {
    // Every combination of the frontier's options is a state, so the
    // frontier's widths tell beforehand whether the exact DP fits; a graph
    // that does not is handed to variable elimination without costing it.
    std::vector<int> open(remaining);
    std::vector<bool> onFrontier(groups.size(), false);
    double states = 1, total = 0;
    for (int op : order) {
      for (int g : groupsOfOp[op])
        if (!onFrontier[g]) {
          onFrontier[g] = true;
          states *= domains[g].size();
        }
      for (int g : groupsOfOp[op])
        if (--open[g] == 0)
          states /= domains[g].size();
      total += states;
      if (states > kMaxStates || total > kMaxTotalStates) {
        frontierOverflow = true;
        return failure(llvm::formatv(
            "the DP frontier grows to {0} states at op '{1}' ({2} in all "
            "so far; limits {3} after an op, {4} in all)",
            static_cast<uint64_t>(std::min(states, 1e18)),
            ops[op].op.getName(), static_cast<uint64_t>(std::min(total, 1e18)),
            kMaxStates,
            kMaxTotalStates));
      }
    }
  }
  size_t totalEntries = 0;
  std::vector<int64_t> assignment(groups.size(), 0); // option index

  std::vector<int> frontier;
  std::vector<std::vector<DPEntry>> tables(1);
  tables[0].push_back({});
  std::vector<std::vector<int>> addedAt;
  for (int op : order) {
    const std::vector<int> &vars = groupsOfOp[op];
    // The op's cost for every combination of its groups' options.
    auto table = opCostTable(op, step, vars, domains);
    if (!table)
      return table.takeError();
    const std::vector<int64_t> &local = *table;
    std::vector<int> added;
    for (int g : vars)
      if (!llvm::is_contained(frontier, g))
        added.push_back(g);
    std::vector<int> nextFrontier = frontier;
    nextFrontier.insert(nextFrontier.end(), added.begin(), added.end());
    for (int g : vars)
      --remaining[g];
    llvm::erase_if(nextFrontier, [&](int g) { return remaining[g] == 0; });
    std::vector<int> positionInFrontier(groups.size(), -1);
    for (auto [i, g] : llvm::enumerate(frontier))
      positionInFrontier[g] = i;
    std::vector<int> positionInAdded(groups.size(), -1);
    for (auto [i, g] : llvm::enumerate(added))
      positionInAdded[g] = i;
    size_t addedCombinations = 1;
    for (int g : added)
      addedCombinations *= domains[g].size();

    const std::vector<DPEntry> &prev = tables.back();
    std::vector<DPEntry> next;
    std::unordered_map<std::string, size_t> index;
    std::string addedKey(added.size(), 0);
    for (size_t p = 0; p < prev.size(); ++p) {
      for (size_t a = 0; a < addedCombinations; ++a) {
        size_t rest = a;
        for (size_t i = 0; i < added.size(); ++i) {
          addedKey[i] = static_cast<char>(rest % domains[added[i]].size());
          rest /= domains[added[i]].size();
        }
        auto optionOf = [&](int g) -> int {
          int pos = positionInFrontier[g];
          return pos >= 0 ? prev[p].key[pos] : addedKey[positionInAdded[g]];
        };
        size_t c = 0, stride = 1;
        for (int g : vars) {
          c += optionOf(g) * stride;
          stride *= domains[g].size();
        }
        int64_t cost = prev[p].cost + local[c];
        std::string key(nextFrontier.size(), 0);
        for (size_t i = 0; i < nextFrontier.size(); ++i)
          key[i] = static_cast<char>(optionOf(nextFrontier[i]));
        auto [it, inserted] = index.try_emplace(key, next.size());
        if (inserted) {
          next.push_back({std::move(key), cost, static_cast<int>(p),
                          addedKey});
          if (next.size() > (beamWidth ? kMaxTotalStates : kMaxStates)) {
            frontierOverflow = true;
            return failure(llvm::formatv(
                "the DP frontier grew to more than {0} states at op '{1}' "
                "({2} tensor groups on the frontier); the graph is too far "
                "from linear for the step DP",
                beamWidth ? kMaxTotalStates : kMaxStates, ops[op].op.getName(),
                nextFrontier.size()));
          }
        } else if (cost < next[it->second].cost) {
          DPEntry &entry = next[it->second];
          entry.cost = cost;
          entry.parent = p;
          entry.added = addedKey;
        }
      }
    }
    if (beamWidth && next.size() > beamWidth) {
      // Keep the cheapest states; among equal costs the smallest options,
      // so the result does not depend on insertion order.
      std::vector<size_t> keep(next.size());
      for (size_t i = 0; i < keep.size(); ++i)
        keep[i] = i;
      std::nth_element(keep.begin(), keep.begin() + beamWidth, keep.end(),
                       [&](size_t a, size_t b) {
                         return std::tie(next[a].cost, next[a].key) <
                                std::tie(next[b].cost, next[b].key);
                       });
      keep.resize(beamWidth);
      std::sort(keep.begin(), keep.end());
      std::vector<DPEntry> kept;
      kept.reserve(beamWidth);
      for (size_t i : keep)
        kept.push_back(std::move(next[i]));
      next = std::move(kept);
    }
    frontier = std::move(nextFrontier);
    totalEntries += next.size();
    if (totalEntries > kMaxTotalStates) {
      frontierOverflow = true;
      return failure(llvm::formatv(
          "the DP kept more than {0} states in all (at op '{1}', {2} tensor "
          "groups on the frontier); the graph is too far from linear for the "
          "step DP",
          kMaxTotalStates, ops[op].op.getName(), frontier.size()));
    }
    // Only the parents and added options are needed to trace back.
    for (DPEntry &entry : tables.back())
      std::string().swap(entry.key);
    tables.push_back(std::move(next));
    addedAt.push_back(std::move(added));
  }
  // The cheapest final state (the first among equals), then back to the
  // start.
  const std::vector<DPEntry> &last = tables.back();
  size_t best = 0;
  for (size_t i = 1; i < last.size(); ++i)
    if (last[i].cost < last[best].cost)
      best = i;
  std::fill(assignment.begin(), assignment.end(), 0);
  int entry = best;
  for (size_t stage = tables.size() - 1; stage > 0; --stage) {
    const DPEntry &e = tables[stage][entry];
    for (auto [i, g] : llvm::enumerate(addedAt[stage - 1]))
      assignment[g] = e.added[i];
    entry = e.parent;
  }
  std::vector<int64_t> options(groups.size());
  for (size_t g = 0; g < groups.size(); ++g)
    options[g] = domains[g][assignment[g]];
  if (crossCheckLimit > 0)
    if (llvm::Error err =
            crossCheckStep(domains, crossCheckLimit, last[best].cost))
      return err;
  commitStep(options);
  return llvm::Error::success();
}

std::vector<int>
Partitioner::choiceGroupsOf(int op,
                            const std::vector<std::vector<int64_t>> &domains) {
  std::vector<int> list = ops[op].inputGroups;
  list.insert(list.end(), ops[op].outputGroups.begin(),
              ops[op].outputGroups.end());
  std::sort(list.begin(), list.end());
  list.erase(std::unique(list.begin(), list.end()), list.end());
  llvm::erase_if(list, [&](int g) { return domains[g].size() < 2; });
  return list;
}

llvm::Expected<std::vector<int64_t>>
Partitioner::opCostTable(int op, size_t step, const std::vector<int> &vars,
                         const std::vector<std::vector<int64_t>> &domains) {
  constexpr size_t kMaxOpCombinations = 1 << 14;
  size_t combinations = 1;
  for (int g : vars) {
    combinations *= domains[g].size();
    if (combinations > kMaxOpCombinations)
      return failure(llvm::formatv(
          "op '{0}' touches {1} tensor groups with a choice: more than {2} "
          "combinations to cost; coarsening should group them (e.g. mark "
          "unrolled timesteps with tofu.timestep)",
          ops[op].op.getName(), vars.size(), kMaxOpCombinations));
  }
  // Groups outside `vars` have one option; their index stays 0.
  std::vector<int64_t> assignment(groups.size(), 0);
  auto candidate = [&](int g) { return domains[g][assignment[g]]; };
  std::vector<int64_t> table(combinations);
  for (size_t c = 0; c < combinations; ++c) {
    size_t rest = c;
    for (int g : vars) {
      assignment[g] = rest % domains[g].size();
      rest /= domains[g].size();
    }
    table[c] = stepCost(op, step, candidate).cost;
  }
  return table;
}

llvm::Error
Partitioner::crossCheckStep(const std::vector<std::vector<int64_t>> &domains,
                            int64_t limit, int64_t cost) {
  size_t step = cuts.empty() ? 0 : cuts.front().size();
  std::vector<int64_t> assignment(groups.size(), 0); // option index
  auto candidate = [&](int g) { return domains[g][assignment[g]]; };
  std::vector<int> free;
  double combinations = 1;
  for (size_t g = 0; g < groups.size(); ++g)
    if (domains[g].size() > 1) {
      free.push_back(g);
      combinations *= domains[g].size();
    }
  if (combinations > limit)
    return failure("cross-check: too many combinations at this step");
  int64_t minimum = std::numeric_limits<int64_t>::max();
  while (true) {
    int64_t total = 0;
    for (size_t op = 0; op < ops.size(); ++op)
      total += stepCost(op, step, candidate).cost;
    minimum = std::min(minimum, total);
    size_t i = 0;
    for (; i < free.size(); ++i) {
      if (++assignment[free[i]] <
          static_cast<int64_t>(domains[free[i]].size()))
        break;
      assignment[free[i]] = 0;
    }
    if (i == free.size())
      break;
  }
  if (minimum != cost)
    return failure(llvm::formatv(
        "cross-check: the search of step {0} costs {1}, enumeration "
        "finds {2}",
        step, cost, minimum));
  return llvm::Error::success();
}

llvm::Error Partitioner::solveStepByElimination(
    const std::vector<std::vector<int64_t>> &domains,
    int64_t crossCheckLimit) {
  tableOverflow = false;
  size_t step = cuts.empty() ? 0 : cuts.front().size();
  std::vector<CostFactor> factors;
  factors.reserve(ops.size());
  for (size_t op = 0; op < ops.size(); ++op) {
    CostFactor factor;
    factor.scope = choiceGroupsOf(op, domains);
    auto table = opCostTable(op, step, factor.scope, domains);
    if (!table)
      return table.takeError();
    factor.table = std::move(*table);
    factors.push_back(std::move(factor));
  }
  std::vector<int64_t> domainSizes(groups.size());
  for (size_t g = 0; g < groups.size(); ++g)
    domainSizes[g] = domains[g].size();
  auto solved = minimizeByElimination(domainSizes, std::move(factors),
                                      maxEliminationTable, kMaxTotalDPStates);
  if (!solved) {
    tableOverflow = true;
    return solved.takeError();
  }
  std::vector<int64_t> options(groups.size());
  for (size_t g = 0; g < groups.size(); ++g)
    options[g] = domains[g][solved->assignment[g]];
  if (crossCheckLimit > 0)
    if (llvm::Error err = crossCheckStep(domains, crossCheckLimit, solved->cost))
      return err;
  commitStep(options);
  return llvm::Error::success();
}

void Partitioner::solveStepGreedyLargestFirst(
    const std::vector<std::vector<int64_t>> &domains) {
  size_t step = cuts.empty() ? 0 : cuts.front().size();
  std::vector<int> order(groups.size());
  for (size_t g = 0; g < groups.size(); ++g)
    order[g] = g;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return groups[a].bytes > groups[b].bytes;
  });
  // Undecided groups take their first option while a decision is costed.
  std::vector<int64_t> options(groups.size());
  for (size_t g = 0; g < groups.size(); ++g)
    options[g] = domains[g].front();
  auto candidate = [&](int g) { return options[g]; };
  for (int g : order) {
    if (domains[g].size() < 2)
      continue;
    int64_t best = std::numeric_limits<int64_t>::max();
    int64_t bestOption = domains[g].front();
    for (int64_t option : domains[g]) {
      options[g] = option;
      int64_t bytes = 0;
      for (int op : groups[g].ops)
        bytes += stepCost(op, step, candidate).cost;
      if (bytes < best) {
        best = bytes;
        bestOption = option;
      }
    }
    options[g] = bestOption;
  }
  commitStep(options);
}

void Partitioner::commitStep(const std::vector<int64_t> &options) {
  size_t step = cuts.empty() ? 0 : cuts.front().size();
  auto candidate = [&](int g) { return options[g]; };
  std::vector<std::vector<int>> stepChoices(ops.size());
  for (size_t op = 0; op < ops.size(); ++op)
    stepChoices[op] = stepCost(op, step, candidate).choice;
  for (size_t g = 0; g < groups.size(); ++g)
    cuts[g].push_back(options[g]);
  for (size_t op = 0; op < ops.size(); ++op)
    for (size_t o = 0; o < stepChoices[op].size(); ++o)
      choices[op][o].push_back(stepChoices[op][o]);
}

llvm::Error Partitioner::solveExhaustive(int64_t limit) {
  // Every cut sequence of every tensor group.
  size_t numSteps = steps.size();
  std::vector<std::vector<std::vector<int64_t>>> sequences(groups.size());
  double combinations = 1;
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<std::vector<int64_t>> partial{{}};
    for (size_t s = 0; s < numSteps; ++s) {
      std::vector<std::vector<int64_t>> longer;
      for (const auto &prefix : partial) {
        cuts[g] = prefix;
        for (int64_t option : naturalOptions(g)) {
          longer.push_back(prefix);
          longer.back().push_back(option);
        }
      }
      partial = std::move(longer);
    }
    cuts[g].clear();
    sequences[g] = std::move(partial);
    combinations *= sequences[g].size();
    if (combinations > limit)
      return failure(llvm::formatv(
          "exhaustive: the graph has more than {0} tiling combinations over "
          "{1} tensor groups and {2} steps; it is meant for small graphs "
          "(use --partitioner=tofu)",
          limit, groups.size(), numSteps));
  }
  // Cost of each op for given full cut sequences: every output takes its
  // cheapest strategy sequence.
  std::unordered_map<std::string, std::pair<int64_t, std::vector<std::vector<int>>>>
      opMemo;
  std::vector<size_t> pick(groups.size(), 0);
  auto opCost = [&](int op) -> const std::pair<int64_t, std::vector<std::vector<int>>> & {
    const OpNode &node = ops[op];
    std::string key;
    appendKey(key, node.signature);
    std::vector<std::vector<int64_t>> inputCuts;
    for (int g : node.inputGroups) {
      inputCuts.push_back(sequences[g][pick[g]]);
      for (int64_t c : inputCuts.back())
        appendKey(key, static_cast<int8_t>(c));
    }
    for (int g : node.outputGroups)
      for (int64_t c : sequences[g][pick[g]])
        appendKey(key, static_cast<int8_t>(c));
    auto [it, inserted] = opMemo.try_emplace(key);
    if (!inserted)
      return it->second;
    auto &result = it->second;
    for (unsigned o = 0; o < node.outputGroups.size(); ++o) {
      std::vector<int> options = strategyOptions(op, o, 0);
      // Strategy sequences: replicated compute stays replicated.
      std::vector<std::vector<int>> seqs{{}};
      for (size_t s = 0; s < numSteps; ++s) {
        std::vector<std::vector<int>> longer;
        for (const auto &prefix : seqs)
          for (int option : options) {
            if (s > 0 && ((prefix.front() < 0) != (option < 0)))
              continue;
            longer.push_back(prefix);
            longer.back().push_back(option);
          }
        seqs = std::move(longer);
      }
      int64_t best = std::numeric_limits<int64_t>::max();
      std::vector<int> bestSeq;
      for (const auto &seq : seqs) {
        int64_t bytes = outputCost(op, o, numSteps, inputCuts,
                                   sequences[node.outputGroups[o]]
                                            [pick[node.outputGroups[o]]],
                                   seq);
        if (bytes < best) {
          best = bytes;
          bestSeq = seq;
        }
      }
      result.first += best;
      result.second.push_back(bestSeq);
    }
    return result;
  };
  int64_t best = std::numeric_limits<int64_t>::max();
  std::vector<size_t> bestPick;
  while (true) {
    int64_t total = 0;
    for (size_t op = 0; op < ops.size(); ++op)
      total += opCost(op).first;
    if (total < best) {
      best = total;
      bestPick = pick;
    }
    size_t g = 0;
    for (; g < groups.size(); ++g) {
      if (++pick[g] < sequences[g].size())
        break;
      pick[g] = 0;
    }
    if (g == groups.size())
      break;
  }
  pick = bestPick;
  for (size_t g = 0; g < groups.size(); ++g)
    cuts[g] = sequences[g][pick[g]];
  for (size_t op = 0; op < ops.size(); ++op)
    choices[op] = opCost(op).second;
  return llvm::Error::success();
}

std::vector<int64_t> Partitioner::prefixCosts() {
  std::vector<int64_t> totals;
  for (size_t numSteps = 1; numSteps <= steps.size(); ++numSteps) {
    int64_t total = 0;
    for (size_t op = 0; op < ops.size(); ++op) {
      std::vector<std::vector<int64_t>> inputCuts;
      for (int g : ops[op].inputGroups)
        inputCuts.push_back(cuts[g]);
      for (unsigned o = 0; o < ops[op].outputGroups.size(); ++o) {
        std::vector<int> perStep(choices[op][o].begin(),
                                 choices[op][o].begin() + numSteps);
        total += outputCost(op, o, numSteps, inputCuts,
                            cuts[ops[op].outputGroups[o]], perStep);
      }
    }
    totals.push_back(total);
  }
  return totals;
}

void Partitioner::apply(const PartitionResult &result) {
  Builder builder(ctx);
  func->setAttr(kGridAttr, builder.getDenseI64ArrayAttr(steps));
  func->setAttr(kStepBytesAttr, builder.getDenseI64ArrayAttr(result.stepBytes));
  if (!result.stepGbps.empty())
    func->setAttr(kStepGbpsAttr,
                  builder.getDenseF64ArrayAttr(result.stepGbps));
  else
    func->removeAttr(kStepGbpsAttr);
  // Without a topology the objective is always bytes and nothing is
  // predicted: the IR stays as the paper's search writes it.
  if (!result.deviceModel.empty()) {
    func->setAttr(kObjectiveAttr, builder.getStringAttr(result.objective));
    func->setAttr(kDeviceModelAttr, builder.getStringAttr(result.deviceModel));
    func->setAttr(kPredictedComputeAttr,
                  builder.getF64FloatAttr(result.predictedComputeSeconds));
    func->setAttr(kStepCommSecondsAttr,
                  builder.getDenseF64ArrayAttr(result.stepCommSeconds));
  } else {
    func->removeAttr(kObjectiveAttr);
    func->removeAttr(kDeviceModelAttr);
    func->removeAttr(kPredictedComputeAttr);
    func->removeAttr(kStepCommSecondsAttr);
  }
  std::optional<Coarsening> coarsening = readCoarsening(func);
  if (!coarsening)
    coarsening = coarsenGraph(func);
  func.walk([&](Operation *op) {
    if (!isa<InputOp, ParamOp, ComputeOp>(op))
      return;
    SmallVector<Attribute> tilings;
    for (Value value : op->getResults())
      tilings.push_back(
          tilingOf(cuts[coarsening->tensorGroup.lookup(value)], steps.size()));
    op->setAttr(kTilingsAttr, builder.getArrayAttr(tilings));
  });
  for (auto [index, node] : llvm::enumerate(ops)) {
    SmallVector<Attribute> plan;
    const Signature &signature = signatures[node.signature];
    for (auto [o, perStep] : llvm::enumerate(choices[index]))
      if (!perStep.empty() && perStep.front() >= 0)
        for (int s : perStep)
          plan.push_back(signature.strategies[o][s]);
    node.op->setAttr(kPlanAttr, builder.getArrayAttr(plan));
  }
}

} // namespace

llvm::Expected<PartitionResult>
partitionFunction(func::FuncOp func, const SearchOptions &options) {
  const auto &names = partitionerNames();
  if (!llvm::is_contained(names, options.partitioner)) {
    std::string list;
    for (const auto &name : names)
      list += (list.empty() ? "" : ", ") + name;
    return failure("unknown partitioner '" + options.partitioner +
                   "' (available: " + list + ")");
  }
  const std::string &name = options.partitioner;
  // The baselines that cut each tensor once partition among all k devices
  // in one step; the others recurse over k's factors.
  PartitionResult result;
  bool oneStep = name == "data-parallel" || name == "allrow-greedy" ||
                 name == "equal-chop";
  if (oneStep && !options.topology.empty())
    return failure("--topology needs a recursive partitioner (tofu, "
                   "spartan, icml18, exhaustive), not '" +
                   name + "', which cuts each tensor once");
  StepPlan stepPlan;
  if (oneStep) {
    if (options.devices < 1)
      return failure("the number of devices must be >= 1, not " +
                     llvm::Twine(options.devices));
    stepPlan.steps = {options.devices};
  } else {
    auto planned = planSteps(options.devices, options.topology);
    if (!planned)
      return planned.takeError();
    stepPlan = *planned;
  }

  // The objective: predicted step time where a topology gives bandwidths,
  // bytes otherwise (the paper's).
  std::string objective = options.objective;
  if (objective == "auto")
    objective = options.topology.empty() ? "bytes" : "time";
  if (objective != "bytes" && objective != "time")
    return failure("unknown --objective '" + options.objective +
                   "' (available: auto, bytes, time)");
  if (objective == "time" && options.topology.empty())
    return failure("--objective=time needs --topology (the link bandwidths "
                   "that turn bytes into seconds)");
  if (objective == "time" && name == "exhaustive")
    return failure("--partitioner=exhaustive minimizes bytes; with "
                   "--topology give --objective=bytes");
  // --device: a built-in name or a description file; "" = cpu.
  auto device =
      loadDeviceModel(options.device.empty() ? "cpu" : options.device);
  if (!device)
    return device.takeError();
  StepTimeModel timeModel(*device);

  SearchRules rules;
  rules.allowReduce = name != "icml18";
  rules.allowReplicatedCompute = name == "data-parallel";
  Partitioner partitioner(func, rules);
  if (llvm::Error err = partitioner.buildGraph())
    return std::move(err);
  partitioner.maxFrontierStates = options.maxFrontierStates;
  partitioner.maxEliminationTable = options.maxEliminationTable;
  partitioner.steps = stepPlan.steps;
  partitioner.stepGbps = stepPlan.gbps;
  if (objective == "time")
    partitioner.timeModel = &timeModel;
  size_t numGroups = partitioner.groups.size();

  if (name == "exhaustive") {
    if (llvm::Error err = partitioner.solveExhaustive(options.exhaustiveLimit))
      return std::move(err);
  } else {
    for (size_t step = 0; step < stepPlan.steps.size(); ++step) {
      std::vector<std::vector<int64_t>> domains(numGroups);
      for (size_t g = 0; g < numGroups; ++g) {
        const TensorGroup &group = partitioner.groups[g];
        if (group.shape.empty())
          domains[g] = {kReplicated};
        else if (name == "data-parallel" && group.holdsParam)
          domains[g] = {kReplicated};
        else if (name == "data-parallel" || name == "allrow-greedy")
          domains[g] = {0};
        else
          domains[g] = partitioner.naturalOptions(g);
      }
      if (name == "spartan") {
        partitioner.solveStepGreedyLargestFirst(domains);
      } else {
        int64_t crossCheck =
            options.crossCheckSteps ? options.exhaustiveLimit : 0;
        llvm::Error err = partitioner.solveStepByDP(domains, crossCheck);
        if (err && partitioner.frontierOverflow) {
          // The BFS frontier outgrew the DP's limits (graphs far from a
          // chain, e.g. attention's fork-joins): variable elimination in a
          // free order is exact too and needs far smaller tables there.
          llvm::consumeError(std::move(err));
          err = partitioner.solveStepByElimination(domains, crossCheck);
        }
        if (err && partitioner.tableOverflow && crossCheck == 0) {
          // Still too large: keep the cheapest states after each op
          // instead, with a width that bounds the states kept in all.
          std::string exactError = llvm::toString(std::move(err));
          size_t beam = std::clamp<size_t>(
              kMaxTotalDPStates / std::max<size_t>(partitioner.numOps(), 1),
              64, 4096);
          err = partitioner.solveStepByDP(domains, 0, beam);
          if (!err)
            result.approximations.push_back(llvm::formatv(
                "step {0}: {1}; the step was solved with a beam of the {2} "
                "cheapest states per op instead (the plan may not be optimal)",
                step + 1, exactError, beam));
        }
        if (err)
          return std::move(err);
      }
    }
  }

  result.steps = stepPlan.steps;
  result.stepGbps = stepPlan.gbps;
  std::vector<int64_t> totals = partitioner.prefixCosts();
  int64_t previous = 0;
  for (int64_t total : totals) {
    result.stepBytes.push_back(total - previous);
    previous = total;
  }
  result.totalBytes = previous;
  result.objective = objective;
  if (!stepPlan.gbps.empty()) {
    result.deviceModel = device->name;
    partitioner.predictTime(timeModel, stepPlan.gbps,
                            result.predictedComputeSeconds,
                            result.stepCommSeconds);
  }
  partitioner.apply(result);
  return result;
}

} // namespace tofu
