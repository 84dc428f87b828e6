//===- AnalyzeStrategies.cpp - attach basic partition strategies ----------===//
//
// Runs TDL symbolic interval analysis (paper §4.2) on every tofu.compute op
// and records its basic strategies, with input regions, as attributes.
//
//===----------------------------------------------------------------------===//
#include "tofu/Dialect/TdlInstance.h"
#include "tofu/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace tofu {
#define GEN_PASS_DEF_ANALYZESTRATEGIES
#include "tofu/Passes.h.inc"
} // namespace tofu

using namespace mlir;
using namespace tofu;

namespace {

/// The IR form of one analyzed strategy.
StrategyAttr toAttr(MLIRContext *ctx, const tdl::Strategy &strategy) {
  SmallVector<Attribute> workers;
  for (const auto &worker : strategy.regions) {
    SmallVector<Attribute> inputs;
    for (const auto &input : worker) {
      SmallVector<Attribute> dims;
      if (input)
        for (const tdl::SymInterval &interval : *input)
          dims.push_back(IntervalAttr::get(ctx, interval.lower,
                                           interval.lowerConst, interval.upper,
                                           interval.upperConst));
      inputs.push_back(ArrayAttr::get(ctx, dims));
    }
    workers.push_back(ArrayAttr::get(ctx, inputs));
  }
  bool split = strategy.kind == tdl::Strategy::Kind::SplitOutput;
  return StrategyAttr::get(
      ctx, StringAttr::get(ctx, split ? "split" : "reduce"), strategy.output,
      split ? strategy.dim : static_cast<int64_t>(strategy.reductionIndex),
      StringAttr::get(ctx, split ? "" : strategy.reduction),
      ArrayAttr::get(ctx, workers));
}

struct AnalyzeStrategiesPass
    : public tofu::impl::AnalyzeStrategiesBase<AnalyzeStrategiesPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    WalkResult result = getOperation().walk([&](ComputeOp op) {
      auto instance = tofu::instantiate(op);
      if (!instance) {
        op.emitError() << llvm::toString(instance.takeError());
        return WalkResult::interrupt();
      }
      auto strategies = tdl::analyzeStrategies(*instance);
      if (!strategies) {
        op.emitError() << "interval analysis of '" << op.getSpec()
                       << "' failed: "
                       << llvm::toString(strategies.takeError());
        return WalkResult::interrupt();
      }
      SmallVector<Attribute> attrs;
      for (const tdl::Strategy &strategy : *strategies)
        attrs.push_back(toAttr(ctx, strategy));
      op->setAttr(kStrategiesAttr, ArrayAttr::get(ctx, attrs));
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
