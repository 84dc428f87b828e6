//===- Coarsen.cpp - op groups and tensor groups (paper §5.1) -------------===//
//
// The `tofu-coarsen` pass and the coarsening library it wraps (see
// tofu/Transforms/Coarsening.h for the grouping rules).
//
//===----------------------------------------------------------------------===//
#include "tofu/Transforms/Coarsening.h"
#include "tofu/Dialect/TdlInstance.h"
#include "tofu/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

#include <map>
#include <numeric>

namespace tofu {
#define GEN_PASS_DEF_COARSEN
#include "tofu/Passes.h.inc"
} // namespace tofu

using namespace mlir;

namespace tofu {
namespace {

/// Union-find over 0..n-1 whose representative is the smallest member, so
/// that numbering by representative follows program order.
class DisjointSets {
public:
  explicit DisjointSets(size_t n) : parent(n) {
    std::iota(parent.begin(), parent.end(), 0);
  }
  size_t find(size_t x) {
    while (parent[x] != x)
      x = parent[x] = parent[parent[x]];
    return x;
  }
  void unite(size_t a, size_t b) {
    a = find(a);
    b = find(b);
    if (a == b)
      return;
    if (b < a)
      std::swap(a, b);
    parent[b] = a;
  }
  /// Dense numbers 0.. of the classes in order of their smallest member.
  std::vector<int64_t> number() {
    std::vector<int64_t> ids(parent.size(), -1), result(parent.size());
    int64_t next = 0;
    for (size_t i = 0; i < parent.size(); ++i) {
      size_t root = find(i);
      if (ids[root] < 0)
        ids[root] = next++;
      result[i] = ids[root];
    }
    return result;
  }

private:
  std::vector<size_t> parent;
};

/// True when `op` computes `Y[*i] = f(X0[*i], X1[*i], ...)` with every input
/// of the output's shape: its inputs and output are best tiled alike.
bool isSameShapeElementwise(ComputeOp op) {
  if (op.getNumResults() != 1)
    return false;
  Type type = op.getResult(0).getType();
  if (!llvm::all_of(op.getInputs(),
                    [&](Value v) { return v.getType() == type; }))
    return false;
  auto instance = tofu::instantiate(op);
  if (!instance) {
    llvm::consumeError(instance.takeError());
    return false;
  }
  return instance->isElementwise();
}

/// The summation of several gradients of one tensor built by the training
/// step (`Add` named `<op>.grad_sum`).
bool isGradientSum(ComputeOp op) {
  return op.getGradOf() && op.getSpec() == "Add" &&
         op.getName().contains(".grad_sum");
}

} // namespace

Coarsening coarsenGraph(func::FuncOp func) {
  SmallVector<ComputeOp> ops;
  SmallVector<Value> values;
  llvm::DenseMap<Operation *, size_t> opIndex;
  llvm::DenseMap<Value, size_t> valueIndex;
  func.walk([&](Operation *op) {
    if (!isa<InputOp, ParamOp, ComputeOp>(op))
      return;
    if (auto compute = dyn_cast<ComputeOp>(op)) {
      opIndex[op] = ops.size();
      ops.push_back(compute);
    }
    for (Value result : op->getResults()) {
      valueIndex[result] = values.size();
      values.push_back(result);
    }
  });
  DisjointSets opSets(ops.size()), tensorSets(values.size());
  auto uniteValues = [&](Value a, Value b) {
    auto ia = valueIndex.find(a), ib = valueIndex.find(b);
    if (ia == valueIndex.end() || ib == valueIndex.end() ||
        a.getType() != b.getType())
      return;
    tensorSets.unite(ia->second, ib->second);
  };
  auto isBackward = [](ComputeOp op) {
    return op.getGradOf().has_value() || op.getSpec() == "Ones";
  };

  // A forward op and its backward ops.
  llvm::StringMap<size_t> forwardByName;
  for (auto [i, op] : llvm::enumerate(ops))
    if (!isBackward(op))
      forwardByName[op.getName()] = i;
  for (auto [i, op] : llvm::enumerate(ops))
    if (auto gradOf = op.getGradOf()) {
      auto it = forwardByName.find(*gradOf);
      if (it != forwardByName.end())
        opSets.unite(it->second, i);
    }

  // A parameter, its gradient and its updated value.
  func.walk([&](UpdateOp update) {
    uniteValues(update.getParam(), update.getGradient());
    uniteValues(update.getParam(), update.getNewValue());
  });
  // A parameter and its optimizer state of its shape (momentum, Adam's
  // moments, Adagrad's accumulator: `state_of`), which the optimizer
  // updates element-wise with it; the state's new value joins through its
  // own tofu.update.
  llvm::StringMap<Value> paramByName;
  func.walk([&](ParamOp param) {
    if (!param.getStateOf())
      paramByName[param.getSymName()] = param.getResult();
  });
  func.walk([&](ParamOp state) {
    if (auto owner = state.getStateOf()) {
      auto it = paramByName.find(*owner);
      if (it != paramByName.end())
        uniteValues(it->second, state.getResult());
    }
  });
  // Several gradients of one tensor and their sum.
  for (ComputeOp op : ops)
    if (isGradientSum(op))
      for (Value input : op.getInputs())
        uniteValues(input, op.getResult(0));
  // A forward tensor and its gradient: the gradient is the one value of the
  // tensor's type that the producer's backward ops read from outside their
  // group (the output gradient dY of the rule).
  llvm::StringMap<SmallVector<ComputeOp>> backwardOf;
  for (ComputeOp op : ops)
    if (op.getGradOf() && !isGradientSum(op))
      backwardOf[*op.getGradOf()].push_back(op);
  for (ComputeOp op : ops) {
    if (isBackward(op))
      continue;
    auto it = backwardOf.find(op.getName());
    if (it == backwardOf.end())
      continue;
    for (Value result : op.getResults()) {
      if (llvm::count_if(op.getResults(), [&](Value r) {
            return r.getType() == result.getType();
          }) != 1)
        continue; // ambiguous: several outputs of this type
      llvm::SetVector<Value> candidates;
      for (ComputeOp backward : it->second)
        for (Value input : backward.getInputs()) {
          auto producer = input.getDefiningOp<ComputeOp>();
          if (!producer || !isBackward(producer) ||
              producer.getGradOf() == op.getName() ||
              input.getType() != result.getType())
            continue;
          candidates.insert(input);
        }
      if (candidates.size() == 1)
        uniteValues(result, candidates.front());
    }
  }
  // Element-wise ops: inputs and output alike; consecutive forward ones
  // in one op group.
  std::vector<bool> elementwise(ops.size());
  for (auto [i, op] : llvm::enumerate(ops)) {
    elementwise[i] = isSameShapeElementwise(op);
    if (!elementwise[i])
      continue;
    for (Value input : op.getInputs())
      uniteValues(input, op.getResult(0));
  }
  for (auto [i, op] : llvm::enumerate(ops)) {
    if (!elementwise[i] || isBackward(op))
      continue;
    for (Value input : op.getInputs()) {
      auto producer = input.getDefiningOp<ComputeOp>();
      if (!producer || isBackward(producer))
        continue;
      size_t p = opIndex.lookup(producer);
      if (elementwise[p])
        opSets.unite(p, i);
    }
  }
  // Many operands of one type gathered by one op (the per-timestep outputs
  // of an unrolled RNN concatenated into a sequence), or many results of one
  // type (a sequence split into timesteps): one tensor group, so
  // that the timesteps are not searched (and kept on the DP frontier) one by
  // one.
  constexpr size_t kGatheredOperands = 4;
  for (ComputeOp op : ops) {
    llvm::MapVector<Type, SmallVector<Value>> byType;
    for (Value input : op.getInputs())
      byType[input.getType()].push_back(input);
    for (auto &[type, inputs] : byType)
      if (inputs.size() >= kGatheredOperands)
        for (Value input : inputs)
          uniteValues(inputs.front(), input);
    // ... and the sequence split into timesteps.
    llvm::MapVector<Type, SmallVector<Value>> resultsByType;
    for (Value result : op.getResults())
      resultsByType[result.getType()].push_back(result);
    for (auto &[type, results] : resultsByType)
      if (results.size() >= kGatheredOperands)
        for (Value result : results)
          uniteValues(results.front(), result);
  }
  // Repeated applications of one cell: forward ops of one signature that
  // read the same parameter at the same operand (an RNN unrolled without
  // tofu.timestep marks) are one op group, and their operands and results,
  // position by position, one tensor group each.
  auto sameSignature = [](ComputeOp a, ComputeOp b) {
    return a.getSpec() == b.getSpec() && a.getAttrs() == b.getAttrs() &&
           a->getOperandTypes() == b->getOperandTypes() &&
           a->getResultTypes() == b->getResultTypes();
  };
  auto mergeApplications = [&](ComputeOp a, ComputeOp b) {
    opSets.unite(opIndex.lookup(a), opIndex.lookup(b));
    for (auto [va, vb] : llvm::zip(a.getInputs(), b.getInputs()))
      uniteValues(va, vb);
    for (auto [ra, rb] : llvm::zip(a.getResults(), b.getResults()))
      uniteValues(ra, rb);
  };
  func.walk([&](ParamOp param) {
    llvm::MapVector<std::pair<StringRef, unsigned>, SmallVector<ComputeOp>>
        readers;
    for (OpOperand &use : param.getResult().getUses())
      if (auto reader = dyn_cast<ComputeOp>(use.getOwner()))
        if (!isBackward(reader))
          readers[{reader.getSpec(), use.getOperandNumber()}].push_back(
              reader);
    for (auto &[key, list] : readers)
      for (ComputeOp reader : llvm::drop_begin(list))
        if (sameSignature(list.front(), reader))
          mergeApplications(list.front(), reader);
  });
  // Unrolled RNN timesteps (tofu.timestep). Ops of one recurrence (the
  // importer's tofu.recurrence and tofu.direction) whose names differ only
  // in their `/t<step>/` segment are one computation at different steps
  // (docs/RecurrentUnrolling.md). Without tofu.recurrence, the j-th forward
  // op of every timestep (program order).
  std::map<std::string, SmallVector<ComputeOp>> byComputation;
  std::map<int64_t, SmallVector<size_t>> byTimestep;
  for (auto [i, op] : llvm::enumerate(ops)) {
    auto step = op->getAttrOfType<IntegerAttr>(kTimestepAttr);
    if (!step || isBackward(op))
      continue;
    if (auto recurrence = op->getAttrOfType<StringAttr>(kRecurrenceAttr)) {
      std::string name = op.getName().str();
      std::string segment = "/t" + std::to_string(step.getInt()) + "/";
      size_t at = name.find(segment);
      if (at == std::string::npos)
        continue;
      int64_t direction = 0;
      if (auto d = op->getAttrOfType<IntegerAttr>(kDirectionAttr))
        direction = d.getInt();
      std::string key = recurrence.getValue().str() + "\n" +
                        std::to_string(direction) + "\n" +
                        name.substr(0, at) + "/" +
                        name.substr(at + segment.size());
      byComputation[key].push_back(op);
      continue;
    }
    byTimestep[step.getInt()].push_back(i);
  }
  for (auto &[key, list] : byComputation)
    for (ComputeOp op : llvm::drop_begin(list))
      if (sameSignature(list.front(), op))
        mergeApplications(list.front(), op);
  if (byTimestep.size() > 1) {
    const SmallVector<size_t> &first = byTimestep.begin()->second;
    for (auto &[step, members] : byTimestep) {
      for (size_t j = 0; j < members.size() && j < first.size(); ++j) {
        ComputeOp a = ops[first[j]], b = ops[members[j]];
        if (sameSignature(a, b))
          mergeApplications(a, b);
      }
    }
  }

  Coarsening groups;
  std::vector<int64_t> opIds = opSets.number();
  std::vector<int64_t> tensorIds = tensorSets.number();
  for (auto [i, op] : llvm::enumerate(ops)) {
    groups.opGroup[op] = opIds[i];
    groups.numOpGroups = std::max(groups.numOpGroups, opIds[i] + 1);
  }
  for (auto [i, value] : llvm::enumerate(values)) {
    groups.tensorGroup[value] = tensorIds[i];
    groups.numTensorGroups = std::max(groups.numTensorGroups, tensorIds[i] + 1);
  }
  return groups;
}

void recordCoarsening(func::FuncOp func, const Coarsening &groups) {
  Builder builder(func.getContext());
  func.walk([&](Operation *op) {
    if (!isa<InputOp, ParamOp, ComputeOp>(op))
      return;
    if (isa<ComputeOp>(op))
      op->setAttr(kOpGroupAttr,
                  builder.getI64IntegerAttr(groups.opGroup.lookup(op)));
    SmallVector<int64_t> ids;
    for (Value result : op->getResults())
      ids.push_back(groups.tensorGroup.lookup(result));
    op->setAttr(kTensorGroupsAttr, builder.getDenseI64ArrayAttr(ids));
  });
}

std::optional<Coarsening> readCoarsening(func::FuncOp func) {
  Coarsening groups;
  bool complete = true;
  func.walk([&](Operation *op) {
    if (!isa<InputOp, ParamOp, ComputeOp>(op))
      return;
    if (isa<ComputeOp>(op)) {
      auto id = op->getAttrOfType<IntegerAttr>(kOpGroupAttr);
      if (!id) {
        complete = false;
        return;
      }
      groups.opGroup[op] = id.getInt();
      groups.numOpGroups = std::max(groups.numOpGroups, id.getInt() + 1);
    }
    auto ids = op->getAttrOfType<DenseI64ArrayAttr>(kTensorGroupsAttr);
    if (!ids || ids.size() != static_cast<int64_t>(op->getNumResults())) {
      complete = false;
      return;
    }
    for (auto [value, id] : llvm::zip(op->getResults(), ids.asArrayRef())) {
      groups.tensorGroup[value] = id;
      groups.numTensorGroups = std::max(groups.numTensorGroups, id + 1);
    }
  });
  if (!complete)
    return std::nullopt;
  return groups;
}

namespace {
struct CoarsenPass : public impl::CoarsenBase<CoarsenPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    recordCoarsening(func, coarsenGraph(func));
  }
};
} // namespace

} // namespace tofu
