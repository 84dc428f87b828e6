//===- Passes.td - tofu passes -----------------------------*- tablegen -*-===//
#ifndef TOFU_PASSES_TD
#define TOFU_PASSES_TD

include "mlir/Pass/PassBase.td"

def BuildTrainingStep : Pass<"tofu-build-training-step", "::mlir::func::FuncOp"> {
  let summary = "Builds backward pass and optimizer update from gradient rules";
  let description = [{
    Turns a forward graph with one `tofu.loss` into a whole training step:
    seeds the loss gradient with `Ones`, walks the forward `tofu.compute` ops
    in reverse and expands each op's TDL gradient rule (`grad` in
    `tdl-specs/`), sums gradients of values used more than once with `Add`,
    and appends an `SGDUpdate` and a `tofu.update` for every parameter.
    Every backward op carries `grad_of` naming its forward op.

    Example: `%y = tofu.compute "Relu"(%x)` gains
    `%dx = tofu.compute "ReluGrad"(%dy, %x) {grad_of = "relu", ...}`.
  }];
  let options = [
    Option<"learningRate", "lr", "double", "0.1", "SGD learning rate">,
  ];
  let dependentDialects = ["::tofu::TofuDialect"];
}

def AnalyzeStrategies : Pass<"tofu-analyze-strategies", "::mlir::func::FuncOp"> {
  let summary = "Attaches each op's basic partition strategies (interval analysis)";
  let description = [{
    Runs TDL symbolic interval analysis (paper §4.2) on every
    `tofu.compute` op and attaches `tofu.strategies`: one
    `#tofu.strategy` per output dimension (case 1, split) and per splittable
    reduction variable (case 2, partition-n-reduce), each with the region
    of every input that each of 2 workers needs. Results are cached per op
    signature by the TDL library.

    Example: a `Gemm` without bias gets `split 0 dim 0`, `split 0 dim 1`
    and `reduce "k" 0`.
  }];
}

def Partition : Pass<"tofu-partition", "::mlir::func::FuncOp"> {
  let summary = "Chooses a tiling for every tensor and a strategy for every op";
  let description = [{
    Assigns every tensor a `#tofu.tiling` (attribute `tofu.tilings` on its
    defining op, one per result) and every `tofu.compute` op its strategy per
    recursion step (`tofu.plan`, an array of `#tofu.strategy`). With
    `partitioner=allrow-greedy` every tensor is cut on its first dimension
    into `devices` parts (scalars are replicated) and each op takes, among
    its analyzed strategies, the one that moves the fewest bytes given
    those tilings (costs from the concrete interval analysis, DESIGN.md §3).
    Requires `tofu-analyze-strategies` first.
  }];
  let options = [
    Option<"numDevices", "devices", "int64_t", "1", "number of devices k">,
    Option<"partitioner", "partitioner", "std::string", "\"allrow-greedy\"",
           "partitioning algorithm (allrow-greedy)">,
  ];
}

#endif // TOFU_PASSES_TD
