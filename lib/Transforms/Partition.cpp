//===- Partition.cpp - choose tilings and per-op strategies ---------------===//
//
// The partition stage. For now it implements the `allrow-greedy` baseline
// (every tensor cut on its first dimension; each op picks its cheapest
// analyzed strategy given those tilings). The recursive DP is a later issue;
// it will plug in behind the same `partitioner` option.
//
//===----------------------------------------------------------------------===//
#include "tofu/Analysis/TileGeometry.h"
#include "tofu/Dialect/TdlInstance.h"
#include "tofu/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace tofu {
#define GEN_PASS_DEF_PARTITION
#include "tofu/Passes.h.inc"
} // namespace tofu

using namespace mlir;
using namespace tofu;

namespace {

/// The tiling of a value under allrow: first dimension cut in k parts;
/// scalars replicated.
TilingAttr allRowTiling(MLIRContext *ctx, Value value, int64_t k) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getRank() == 0)
    return TilingAttr::get(ctx, {}, {});
  return TilingAttr::get(ctx, {0}, {k});
}

/// The tiling recorded for `value` on its defining op.
TilingAttr tilingOf(Value value) {
  auto result = cast<OpResult>(value);
  auto tilings = result.getOwner()->getAttrOfType<ArrayAttr>(kTilingsAttr);
  return cast<TilingAttr>(tilings[result.getResultNumber()]);
}

struct PartitionPass : public tofu::impl::PartitionBase<PartitionPass> {
  using PartitionBase::PartitionBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    MLIRContext *ctx = &getContext();
    if (partitioner != "allrow-greedy") {
      func.emitError() << "partitioner '" << partitioner
                       << "' is not supported yet (available: allrow-greedy)";
      return signalPassFailure();
    }
    if (numDevices < 1) {
      func.emitError() << "the number of devices must be >= 1, not "
                       << numDevices;
      return signalPassFailure();
    }
    DeviceGrid grid{{numDevices}};
    func->setAttr(kGridAttr, DenseI64ArrayAttr::get(ctx, grid.steps));

    // Tilings: every tensor cut on its first dimension.
    func.walk([&](Operation *op) {
      if (op->getNumResults() == 0 || !isa<InputOp, ParamOp, ComputeOp>(op))
        return;
      SmallVector<Attribute> tilings;
      for (Value result : op->getResults())
        tilings.push_back(allRowTiling(ctx, result, numDevices));
      op->setAttr(kTilingsAttr, ArrayAttr::get(ctx, tilings));
    });

    // Strategies: the cheapest analyzed strategy of each op.
    WalkResult walk = func.walk([&](ComputeOp op) {
      auto strategies = op->getAttrOfType<ArrayAttr>(kStrategiesAttr);
      if (!strategies) {
        op.emitError() << "no '" << kStrategiesAttr
                       << "'; run tofu-analyze-strategies first";
        return WalkResult::interrupt();
      }
      auto instance = tofu::instantiate(op);
      if (!instance) {
        op.emitError() << llvm::toString(instance.takeError());
        return WalkResult::interrupt();
      }
      SmallVector<TilingAttr> inputTilings;
      for (Value input : op.getInputs())
        inputTilings.push_back(tilingOf(input));
      // Each output is its own computation: it takes the cheapest of its
      // own strategies (none: computed whole on every device).
      SmallVector<Attribute> plan;
      for (unsigned output = 0; output < op.getNumResults(); ++output) {
        TilingAttr outputTiling = tilingOf(op.getResult(output));
        StrategyAttr best;
        int64_t bestBytes = 0;
        for (auto strategy : strategies.getAsRange<StrategyAttr>()) {
          if (strategy.getOutput() != output)
            continue;
          // The chosen strategy is recorded without the analysis regions.
          auto chosen = StrategyAttr::get(
              ctx, strategy.getKind(), strategy.getOutput(), strategy.getDim(),
              strategy.getVar(), ArrayAttr::get(ctx, {}));
          int64_t bytes = outputCommBytes(grid, *instance, output, {chosen},
                                          inputTilings, outputTiling);
          if (!best || bytes < bestBytes) {
            best = chosen;
            bestBytes = bytes;
          }
        }
        if (best)
          plan.push_back(best);
      }
      op->setAttr(kPlanAttr, ArrayAttr::get(ctx, plan));
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
