//===- FuseGelu.cpp - The erf GELU chain as one Gelu op -------------------===//
//
// The `tofu-fuse-gelu` pass (see Passes.td).
//
//===----------------------------------------------------------------------===//
#include "tofu/Dialect/Tofu.h"
#include "tofu/Transforms/Passes.h"

#include "ChainMatching.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseSet.h"

#include <cmath>

namespace tofu {
#define GEN_PASS_DEF_FUSEGELU
#include "tofu/Passes.h.inc"
} // namespace tofu

using namespace mlir;

namespace tofu {
namespace {


/// Whether `v` is a scalar constant within float32 rounding of `want`.
bool isConstant(Value v, double want) {
  std::optional<double> got = scalarConstant(v);
  return got && std::fabs(*got - want) <= 1e-6 * std::fabs(want);
}



/// The chain erf(x / sqrt(2)) + 1 (or x * (1 / sqrt(2))) ending at `v`:
/// its x, or null.
Value erfTermInput(Value v) {
  ComputeOp add = computeOf(v, "Add", 2);
  if (!add || !v.hasOneUse())
    return {};
  Value erfValue = otherOperand(add, [](Value c) { return isConstant(c, 1.0); });
  ComputeOp erf = erfValue ? computeOf(erfValue, "Erf", 1) : ComputeOp();
  if (!erf || !erfValue.hasOneUse())
    return {};
  Value scaled = erf.getInputs()[0];
  if (!scaled.hasOneUse())
    return {};
  if (ComputeOp div = computeOf(scaled, "Div", 2))
    return isConstant(div.getInputs()[1], std::sqrt(2.0)) ? div.getInputs()[0]
                                                          : Value();
  if (ComputeOp mul = computeOf(scaled, "Mul", 2))
    return otherOperand(mul,
                     [](Value c) { return isConstant(c, std::sqrt(0.5)); });
  return {};
}

/// The x of y = 0.5 * x * (1 + erf(x / sqrt(2))) computed by `y` (a Mul),
/// in either association (x * term) * 0.5 or (x * 0.5) * term, any operand
/// order; null when `y` is not such a chain.
Value geluInput(ComputeOp y) {
  auto half = [](Value c) { return isConstant(c, 0.5); };
  // (x * term) * 0.5
  if (Value inner = otherOperand(y, half)) {
    ComputeOp mul = computeOf(inner, "Mul", 2);
    if (!mul || !inner.hasOneUse())
      return {};
    for (int i = 0; i < 2; ++i) {
      Value x = mul.getInputs()[i], term = mul.getInputs()[1 - i];
      if (erfTermInput(term) == x)
        return x;
    }
    return {};
  }
  // (x * 0.5) * term
  for (int i = 0; i < 2; ++i) {
    Value halfX = y.getInputs()[i], term = y.getInputs()[1 - i];
    ComputeOp mul = computeOf(halfX, "Mul", 2);
    if (!mul || !halfX.hasOneUse())
      continue;
    Value x = otherOperand(mul, half);
    if (x && erfTermInput(term) == x)
      return x;
  }
  return {};
}

/// The x of the GELU chain ending at `y`, when y has x's type (the chain's
/// constants are scalars and must not change the element type).
Value fusableInput(ComputeOp y) {
  if (y.getSpec() != "Mul" || y.getInputs().size() != 2 ||
      y->getNumResults() != 1 || y.getGradOfAttr())
    return {};
  Value x = geluInput(y);
  auto type = x ? dyn_cast<RankedTensorType>(x.getType()) : nullptr;
  if (!type || type != y->getResult(0).getType() ||
      !isa<FloatType>(type.getElementType()))
    return {};
  return x;
}

struct FuseGeluPass : public impl::FuseGeluBase<FuseGeluPass> {
  void runOnOperation() override {
    SmallVector<ComputeOp> candidates;
    getOperation().walk([&](ComputeOp op) {
      if (fusableInput(op))
        candidates.push_back(op);
    });
    // In program order; x is looked up again, since it may be an earlier
    // chain's result (gelu(gelu(x))), and an op an earlier rewrite erased
    // is skipped.
    llvm::DenseSet<Operation *> erased;
    for (ComputeOp y : candidates) {
      if (erased.contains(y))
        continue;
      Value x = fusableInput(y);
      if (!x)
        continue;
      // The chain's ops, users before operands, erased once y is replaced.
      SmallVector<Operation *> chain;
      SmallVector<Value> worklist(y.getInputs().begin(), y.getInputs().end());
      while (!worklist.empty()) {
        Value v = worklist.pop_back_val();
        auto op = v.getDefiningOp<ComputeOp>();
        if (!op || v == x || !v.hasOneUse())
          continue;
        chain.push_back(op);
        worklist.append(op.getInputs().begin(), op.getInputs().end());
      }
      OpBuilder builder(y);
      Builder b(y.getContext());
      auto gelu = ComputeOp::create(
          builder, y.getLoc(), y->getResultTypes(), "Gelu", ValueRange{x},
          b.getDictionaryAttr(
              {b.getNamedAttr("approximate", b.getStringAttr("none"))}),
          y.getName(), StringAttr());
      for (NamedAttribute attr : y->getDiscardableAttrs())
        gelu->setAttr(attr.getName(), attr.getValue());
      y->getResult(0).replaceAllUsesWith(gelu->getResult(0));
      erased.insert(y);
      y->erase();
      for (Operation *op : chain)
        if (op->use_empty()) {
          erased.insert(op);
          op->erase();
        }
    }
  }
};

} // namespace
} // namespace tofu
