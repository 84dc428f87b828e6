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

def Coarsen : Pass<"tofu-coarsen", "::mlir::func::FuncOp"> {
  let summary = "Groups ops and tensors into a coarsened graph (paper §5.1)";
  let description = [{
    Groups the training graph so that the partitioner's DP runs on a graph
    that is (nearly) linear and whose members share decisions:

    * a forward op and its backward ops (`grad_of` names it) form one op
      group;
    * a tensor, its gradient, the `Add`s that sum several gradients of it
      (`<op>.grad_sum`) and, for a parameter, its updated value form one
      tensor group, which gets a single tiling;
    * the inputs and output of a same-shape element-wise op (TDL
      `isElementwise`) are one tensor group, and consecutive element-wise
      forward ops one op group;
    * forward ops carrying `tofu.timestep = t : i64` (unrolled RNN cells)
      are merged across timesteps: the j-th op of every timestep (program
      order) when spec, attributes and types agree, and their results.

    Records `tofu.op_group = N : i64` on every `tofu.compute` and
    `tofu.tensor_groups = array<i64: ...>` (one per result) on every
    `tofu.input`, `tofu.param` and `tofu.compute`. Groups are numbered in
    program order of their first member.

    Example: `%y = tofu.compute "Relu"(%x)` and its gradient op
    `%dx = tofu.compute "ReluGrad"(%dy, %x) {grad_of = "relu"}` get the same
    `tofu.op_group`; `%x`, `%y`, `%dy` and `%dx` one tensor group.
  }];
}

def Partition : Pass<"tofu-partition", "::mlir::func::FuncOp"> {
  let summary = "Chooses a tiling for every tensor and a strategy for every op";
  let description = [{
    Assigns every tensor a `#tofu.tiling` (attribute `tofu.tilings` on its
    defining op, one per result), every `tofu.compute` op its strategy per
    recursion step (`tofu.plan`) and the function its device grid
    (`tofu.grid`, k = k1·k2·…, k1 >= k2 >= …, prime factors) and the bytes of
    each step (`tofu.step_bytes`). Tensors of one tensor group
    (`tofu-coarsen`; computed here when absent) share one tiling.

    `partitioner=tofu` (default) is the paper's recursive search (§5.2):
    step i runs a DP over BFS levels of the coarsened graph whose state is
    the cut of the tensor groups crossing the level frontier; each op takes
    its cheapest analyzed strategy; costs are the exact bytes of
    `TileGeometry` on the i-step grid, so the sum of the steps' bytes equals
    the traffic of the materialized program. Baselines (paper §7.3):
    `data-parallel`, `allrow-greedy`, `spartan`, `equal-chop`, `icml18`,
    `exhaustive` (see docs/Partitioning.md). `topology` (e.g.
    `8x:nvlink=300,2x:pcie=16`, innermost level first) maps steps onto
    interconnect levels, slowest first, and records `tofu.step_gbps`.
    Requires `tofu-analyze-strategies` first.
  }];
  let options = [
    Option<"numDevices", "devices", "int64_t", "1", "number of devices k">,
    Option<"partitioner", "partitioner", "std::string", "\"tofu\"",
           "partitioning algorithm: tofu, data-parallel, allrow-greedy, "
           "spartan, equal-chop, icml18, exhaustive">,
    Option<"topology", "topology", "std::string", "\"\"",
           "interconnect levels, innermost first: COUNTx:NAME=GBPS,...">,
  ];
}

#endif // TOFU_PASSES_TD
