//===- FoldTransposes.cpp - Transpose of a Transpose that undoes it -------===//
//
// The `tofu-fold-transposes` pass (see Passes.td).
//
//===----------------------------------------------------------------------===//
#include "tofu/Dialect/Tofu.h"
#include "tofu/Transforms/Passes.h"

#include "mlir/IR/BuiltinTypes.h"

namespace tofu {
#define GEN_PASS_DEF_FOLDTRANSPOSES
#include "tofu/Passes.h.inc"
} // namespace tofu

using namespace mlir;

namespace tofu {
namespace {

/// The permutation of a Transpose op (ONNX: output dim d is input dim
/// perm[d]; absent: reversed), or nullopt when it is not a valid one.
std::optional<SmallVector<int64_t>> permutationOf(ComputeOp op) {
  auto type = dyn_cast<RankedTensorType>(op.getInputs()[0].getType());
  if (!type)
    return std::nullopt;
  int64_t rank = type.getRank();
  SmallVector<int64_t> perm;
  if (Attribute attr = op.getAttrs().get("perm")) {
    auto ints = dyn_cast<DenseI64ArrayAttr>(attr);
    if (!ints)
      return std::nullopt;
    perm.assign(ints.asArrayRef().begin(), ints.asArrayRef().end());
  }
  if (perm.empty())
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  if (static_cast<int64_t>(perm.size()) != rank)
    return std::nullopt;
  SmallVector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      return std::nullopt;
    seen[p] = true;
  }
  return perm;
}

bool isTranspose(ComputeOp op) {
  return op && op.getSpec() == "Transpose" && op.getInputs().size() == 1 &&
         op->getNumResults() == 1;
}

/// The value `op` (a Transpose) equals without copying, or null.
Value foldedValue(ComputeOp op) {
  if (op.getGradForAttr())
    return {};
  auto outer = permutationOf(op);
  if (!outer)
    return {};
  Value input = op.getInputs()[0];
  // The identity permutation.
  bool identity = true;
  for (auto [d, p] : llvm::enumerate(*outer))
    identity &= static_cast<int64_t>(d) == p;
  if (identity)
    return input.getType() == op->getResult(0).getType() ? input : Value();
  auto inner = input.getDefiningOp<ComputeOp>();
  if (!isTranspose(inner))
    return {};
  auto innerPerm = permutationOf(inner);
  if (!innerPerm)
    return {};
  // out[d] = mid[outer[d]] = x[inner[outer[d]]]: the identity when
  // inner[outer[d]] == d for every d.
  for (auto [d, p] : llvm::enumerate(*outer))
    if ((*innerPerm)[p] != static_cast<int64_t>(d))
      return {};
  Value x = inner.getInputs()[0];
  return x.getType() == op->getResult(0).getType() ? x : Value();
}

struct FoldTransposesPass
    : public impl::FoldTransposesBase<FoldTransposesPass> {
  void runOnOperation() override {
    SmallVector<ComputeOp> folded;
    getOperation().walk([&](ComputeOp op) {
      if (!isTranspose(op))
        return;
      if (Value value = foldedValue(op)) {
        op->getResult(0).replaceAllUsesWith(value);
        folded.push_back(op);
      }
    });
    // Erase the folded ops, then inner Transposes nothing reads any more
    // (in reverse program order, so that users go before their operands).
    for (ComputeOp op : folded) {
      auto inner = op.getInputs()[0].getDefiningOp<ComputeOp>();
      op->erase();
      if (isTranspose(inner) && inner->use_empty() && !inner.getGradForAttr())
        inner->erase();
    }
  }
};

} // namespace
} // namespace tofu
