//===- FuseLayerNorm.cpp - The exported layer-norm chain as one op --------===//
//
// The `tofu-fuse-layer-norm` pass (see Passes.td).
//
//===----------------------------------------------------------------------===//
#include "tofu/Dialect/Tofu.h"
#include "tofu/Transforms/Passes.h"

#include "ChainMatching.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <cmath>

namespace tofu {
#define GEN_PASS_DEF_FUSELAYERNORM
#include "tofu/Passes.h.inc"
} // namespace tofu

using namespace mlir;

namespace tofu {
namespace {





/// The first normalized axis of `mean` = ReduceMean(x, axes, keepdims 1)
/// when its axes are exactly x's trailing dims a..rank-1, else -1.
int64_t trailingAxesStart(ComputeOp mean) {
  const int64_t rank = rankOf(mean.getInputs()[0]);
  auto axes = dyn_cast_or_null<DenseI64ArrayAttr>(mean.getAttrs().get("axes"));
  auto keep = dyn_cast_or_null<IntegerAttr>(mean.getAttrs().get("keepdims"));
  if (rank < 1 || !axes || axes.empty() || (keep && keep.getInt() != 1))
    return -1;
  SmallVector<bool> reduced(rank, false);
  for (int64_t axis : axes.asArrayRef()) {
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank || reduced[a])
      return -1;
    reduced[a] = true;
  }
  int64_t start = rank - static_cast<int64_t>(axes.size());
  for (int64_t d = 0; d < rank; ++d)
    if (reduced[d] != (d >= start))
      return -1;
  return start;
}

/// Whether `param`'s shape is x's normalized dims (from `axis` on): the
/// `elementwise_affine` weight or bias of the layer.
bool isNormalizedShape(Value param, Value x, int64_t axis) {
  auto p = dyn_cast<RankedTensorType>(param.getType());
  auto t = dyn_cast<RankedTensorType>(x.getType());
  if (!p || !t || p.getElementType() != t.getElementType())
    return false;
  return p.getShape() == t.getShape().drop_front(axis);
}

/// What the chain computing `y` is made of, when it is the layer norm
/// PyTorch exports below opset 17.
struct LayerNormChain {
  Value x, scale, bias;
  int64_t axis = -1;
  double epsilon = 0;
  SmallVector<Operation *> ops; ///< users before operands, y excluded
};

/// y = Add(Mul(Div(d, Sqrt(Add(ReduceMean(Pow(d, 2)), eps))), scale), bias)
/// with d = Sub(x, ReduceMean(x)), both means over the same trailing axes,
/// every intermediate read only inside the chain (d by Pow and Div), any
/// operand order of the Adds and the Mul.
std::optional<LayerNormChain> matchLayerNorm(ComputeOp y) {
  if (y.getSpec() != "Add" || y.getInputs().size() != 2 ||
      y->getNumResults() != 1 || y.getGradOfAttr())
    return std::nullopt;
  LayerNormChain c;
  for (int i = 0; i < 2; ++i) {
    Value scaled = y.getInputs()[i];
    ComputeOp mul = computeOf(scaled, "Mul", 2);
    if (!mul || !scaled.hasOneUse())
      continue;
    for (int j = 0; j < 2; ++j) {
      Value normalized = mul.getInputs()[j];
      ComputeOp div = computeOf(normalized, "Div", 2);
      if (!div || !normalized.hasOneUse())
        continue;
      Value d = div.getInputs()[0], s = div.getInputs()[1];
      ComputeOp sub = computeOf(d, "Sub", 2);
      ComputeOp sqrt = computeOf(s, "Sqrt", 1);
      if (!sub || !sqrt || !s.hasOneUse())
        continue;
      Value e = sqrt.getInputs()[0];
      ComputeOp addEps = computeOf(e, "Add", 2);
      if (!addEps || !e.hasOneUse())
        continue;
      std::optional<double> eps;
      Value v = otherOperand(addEps, [&](Value c) {
        eps = scalarConstant(c);
        return eps && *eps > 0;
      });
      ComputeOp var = computeOf(v, "ReduceMean", 1);
      if (!var || !v.hasOneUse())
        continue;
      Value p = var.getInputs()[0];
      ComputeOp pow = computeOf(p, "Pow", 2);
      if (!pow || !p.hasOneUse() || pow.getInputs()[0] != d)
        continue;
      std::optional<double> two = scalarConstant(pow.getInputs()[1]);
      if (!two || *two != 2.0)
        continue;
      // d is read by the Pow and the Div, nothing else.
      if (!llvm::hasNItems(d.getUses(), 2))
        continue;
      Value x = sub.getInputs()[0], m = sub.getInputs()[1];
      ComputeOp mean = computeOf(m, "ReduceMean", 1);
      if (!mean || !m.hasOneUse() || mean.getInputs()[0] != x)
        continue;
      const int64_t axis = trailingAxesStart(mean);
      if (axis < 0 || trailingAxesStart(var) != axis)
        continue;
      Value scale = mul.getInputs()[1 - j], bias = y.getInputs()[1 - i];
      auto type = dyn_cast<RankedTensorType>(x.getType());
      if (!type || !isa<FloatType>(type.getElementType()) ||
          type != y->getResult(0).getType() ||
          !isNormalizedShape(scale, x, axis) ||
          !isNormalizedShape(bias, x, axis))
        continue;
      c.x = x, c.scale = scale, c.bias = bias, c.axis = axis;
      c.epsilon = *eps;
      c.ops = {mul, div, sqrt, addEps, var, pow, sub, mean};
      return c;
    }
  }
  return std::nullopt;
}

struct FuseLayerNormPass
    : public impl::FuseLayerNormBase<FuseLayerNormPass> {
  void runOnOperation() override {
    SmallVector<ComputeOp> candidates;
    getOperation().walk([&](ComputeOp op) {
      if (matchLayerNorm(op))
        candidates.push_back(op);
    });
    // In program order; matched again, as an earlier rewrite may have
    // replaced this chain's input (a layer norm of a layer norm).
    llvm::DenseSet<Operation *> erased;
    for (ComputeOp y : candidates) {
      if (erased.contains(y))
        continue;
      std::optional<LayerNormChain> c = matchLayerNorm(y);
      if (!c)
        continue;
      OpBuilder builder(y);
      Builder b(y.getContext());
      // Y, and the Mean and InvStdDev its gradient rule reads ([x's leading
      // dims, 1 per normalized dim]).
      auto type = cast<RankedTensorType>(c->x.getType());
      SmallVector<int64_t> statShape(type.getShape());
      for (int64_t d = c->axis; d < type.getRank(); ++d)
        statShape[d] = 1;
      auto stat = RankedTensorType::get(statShape, type.getElementType());
      auto norm = ComputeOp::create(
          builder, y.getLoc(), TypeRange{type, stat, stat}, "LayerNormalization",
          ValueRange{c->x, c->scale, c->bias},
          b.getDictionaryAttr(
              {b.getNamedAttr("axis", b.getI64IntegerAttr(c->axis)),
               b.getNamedAttr("epsilon", b.getF64FloatAttr(c->epsilon))}),
          y.getName(), StringAttr());
      for (NamedAttribute attr : y->getDiscardableAttrs())
        norm->setAttr(attr.getName(), attr.getValue());
      y->getResult(0).replaceAllUsesWith(norm->getResult(0));
      erased.insert(y);
      y->erase();
      for (Operation *op : c->ops) {
        erased.insert(op);
        op->erase();
      }
    }
  }
};

} // namespace
} // namespace tofu
