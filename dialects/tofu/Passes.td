//===- Passes.td - tofu passes -----------------------------*- tablegen -*-===//
#ifndef TOFU_PASSES_TD
#define TOFU_PASSES_TD

include "mlir/Pass/PassBase.td"

def BuildTrainingStep : Pass<"tofu-build-training-step", "::mlir::func::FuncOp"> {
  let summary = "Builds loss, backward pass and optimizer update from gradient rules";
  let description = [{
    Turns a forward graph into a whole training step.

    *Loss.* A function that already has one `tofu.loss` keeps it. Otherwise
    `loss` names a `tofu.output` (a model output) whose scalar f32 value is
    the loss; empty takes the model's only scalar f32 output.
    `softmax-cross-entropy[:<logits>]` adds an i64 labels input named
    `labels` (shape: the logits' batch dims, classes: the last dim) and a
    `SoftmaxCrossEntropyLoss` of the logits output (the named output, or the
    only float output of rank 2). The `tofu.output` markers are removed.

    *Backward.* Seeds the loss gradient with `Ones`, walks the forward
    `tofu.compute` ops in reverse and expands each op's TDL gradient rule
    (`grad` in `tdl-specs/`), sums gradients of values used more than once
    with `Add`, and supplies `Zeros` for the outputs of an op that did not
    reach the loss when another output did (a Split with an unused piece).
    Every backward op carries `grad_of` naming its forward op; the op that
    produces the complete gradient of a tensor carries `grad_for` naming the
    tensor. Only the values that depend on a trained parameter (or that a
    `tofu.gradient` asks for) get gradients: an op's rule is expanded only
    for the inputs that need one, so data inputs, constants and frozen
    parameters need no gradient rule, and an op none of whose inputs needs
    a gradient needs no rule at all. A gradient rule sees which outputs
    receive a gradient (`present(dY)`).

    *What trains* (docs/Training.md, "Which initializers train"): every
    parameter (not `constant`, no `state_of`) trains, except one whose
    `trainable` attribute is false (the model's `tofu.frozen` /
    `tofu.trainable` lists) and one holding a non-finite value (a -inf
    mask), which stays fixed (a remark says so). `trainable` (names or
    globs) replaces the model's lists: exactly the matching parameters
    train. `freeze` (names or globs) keeps the matching parameters fixed in
    any case. A pattern that matches no parameter is an error, and so is a
    non-finite parameter named exactly by `trainable` or marked trainable
    by the model. Frozen parameters get no gradient and no update. Finally every
    `tofu.compute` loses the trailing optional results (`name?:` outputs in
    its spec) that nothing uses, so the step does not compute them
    (SoftmaxCrossEntropyLoss's log_prob, MaxPool's Indices, Dropout's mask,
    BatchNormalization's running statistics in inference mode).

    *Update.* `optimizer` is `sgd` (`SGDUpdate`), `momentum`, `adam` or
    `adagrad` (the ONNX ai.onnx.preview.training `Momentum`, `Adam`,
    `Adagrad` ops, one per parameter). Their state is persistent:
    `tofu.param` ops with `state_of = "<param>"` and zero initial values
    (the learning rate R holds `lr`; the update count T starts at 0 and is
    advanced by `StepCount`), each updated by a `tofu.update` without
    gradient. Every trainable parameter gets `tofu.update %w, %new grad %dw`.

    *Running statistics.* A training-mode `BatchNormalization`
    (`training_mode != 0`) whose input_mean / input_var are parameters
    (ONNX initializers, not constant; frozen ones too: freezing stops the
    gradient and the optimizer, as `requires_grad = False` does in PyTorch) gets
    `tofu.update %running_mean, %bn#1` and `tofu.update %running_var, %bn#2`:
    the new statistics it computes (ONNX: input * momentum + batch *
    (1 - momentum)) are the parameters' values in the next step, and
    `tofu-run --save` writes them back (`--resume` restores them). A
    statistic that two such ops (or an op and an optimizer) would both
    update is an error. Inference-mode ops keep their statistics fixed. A
    model with its own training algorithm (`training_info`) updates only
    what its `update_binding` names.

    *A model's own algorithm.* A function with `tofu.gradient` ops (an ONNX
    `Gradient`, imported from the model's `training_info`) keeps its loss,
    its updates and its optimizer ops: one backward pass is built from each
    distinct `y` of the gradients (also for the graph inputs they name; a
    `y` computed from a gradient is an error), each `tofu.gradient` is
    replaced by the gradient of its tensor in its `y`'s pass (`Zeros` where
    the tensor does not influence `y`), and the ops that use the gradients
    move after the backward passes. The training options then do not apply
    (`overrides` lists those the user set; any is an error). Without
    `tofu.update` ops this is an error unless `gradient-graph` is set, which
    only expands the gradients and keeps the model outputs (a graph that
    computes gradients, like the ONNX node tests `test_gradient_of_add*`).

    Example: `%y = tofu.compute "Relu"(%x)` gains
    `%dx = tofu.compute "ReluGrad"(%dy, %x) {grad_of = "relu", grad_for = "x_producer", ...}`.
  }];
  let options = [
    Option<"lossName", "loss", "std::string", "\"\"",
           "the loss: a model output's name (default: the only scalar f32 "
           "output) or softmax-cross-entropy[:<logits output>]">,
    Option<"optimizer", "optimizer", "std::string", "\"sgd\"",
           "sgd, momentum, adam or adagrad">,
    Option<"learningRate", "lr", "double", "0.1", "learning rate (R)">,
    Option<"momentum", "momentum", "double", "0.9",
           "Momentum: alpha, the decay of the previous velocity">,
    Option<"momentumBeta", "momentum-beta", "double", "1.0",
           "Momentum: beta, the gradient's coefficient after the first step">,
    Option<"nesterov", "nesterov", "bool", "false",
           "Momentum: Nesterov's mode">,
    Option<"beta1", "beta1", "double", "0.9", "Adam: alpha">,
    Option<"beta2", "beta2", "double", "0.999", "Adam: beta">,
    Option<"epsilon", "epsilon", "double", "1e-6", "Adam, Adagrad: epsilon">,
    Option<"weightDecay", "weight-decay", "double", "0.0",
           "L2 coefficient added to the gradient (norm_coefficient)">,
    Option<"lrDecay", "lr-decay", "double", "0.0",
           "Adagrad: decay_factor">,
    ListOption<"freeze", "freeze", "std::string",
               "parameters that are not trained (names or globs with *)">,
    ListOption<"trainable", "trainable", "std::string",
               "the only parameters that are trained (names or globs with "
               "*); replaces the model's own lists (tofu.param "
               "`trainable`)">,
    ListOption<"overrides", "overrides", "std::string",
               "training options the user set explicitly (as flag names, "
               "e.g. --optimizer); refused for a model that carries its own "
               "training algorithm (tofu.gradient ops)">,
    Option<"gradientGraph", "gradient-graph", "bool", "false",
           "only replace tofu.gradient ops by their backward pass and keep "
           "the model outputs (a graph that computes gradients but trains "
           "nothing)">,
  ];
  let dependentDialects = ["::tofu::TofuDialect"];
}

def Autocast : Pass<"tofu-autocast", "::mlir::func::FuncOp"> {
  let summary = "Mixed precision: MatMul, Gemm and Conv compute in bfloat16";
  let description = [{
    Rewrites a float32 forward graph for training with bf16 compute and
    float32 master weights (`tofuc --precision bf16`; docs/Training.md,
    "Mixed precision"), following PyTorch's autocast lists: the matrix
    products and convolutions run in bfloat16, everything else (element-wise
    ops, reductions, softmax and log-softmax, BatchNormalization and
    LayerNormalization, losses, the optimizer) stays float32.

    Each float32 `MatMul`, `Gemm` and `Conv` gets a `Cast` to bf16
    (`to = 16`) of every operand, bias included (one Cast per use, so that
    each bf16 value has one reader and gradients of a tensor used several
    times add up in float32), computes in bf16 (the kernels accumulate in
    float32 and round the result once to bf16, as cuBLAS with a float32
    compute type and PyTorch's bf16 kernels do) and its result is cast back
    to float32 (`to = 1`) for its readers. Run before
    `tofu-build-training-step`: Cast's gradient rule casts the gradient
    back to its input's type, so the gradients of the bf16 ops (their
    `MatMul` / `Gemm` / `ConvGradInput` / `ConvGradWeight` / bias
    gradients) compute in bf16 too, and every parameter, its gradient and
    the optimizer state stay float32.

    A graph holding any float type other than f32 (f64, f16, bf16 values)
    is an error: the pass converts float32 models only. A graph without any
    of the three ops is left as it is, with a warning.

    Example: `%y = tofu.compute "MatMul"(%x, %w) {name = "mm"} :
    (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>` becomes
    `%a = tofu.compute "Cast"(%x) {attrs = {to = 16}, name = "mm/bf16.0"}`,
    `%b = tofu.compute "Cast"(%w) {attrs = {to = 16}, name = "mm/bf16.1"}`,
    `%m = tofu.compute "MatMul"(%a, %b) {name = "mm"} : (tensor<8x4xbf16>,
    tensor<4x3xbf16>) -> tensor<8x3xbf16>` and `%y = tofu.compute
    "Cast"(%m) {attrs = {to = 1}, name = "mm/f32"}`.
  }];
  let dependentDialects = ["::tofu::TofuDialect"];
}

def DeduplicateComputes : Pass<"tofu-deduplicate-computes", "::mlir::func::FuncOp"> {
  let summary = "Merges tofu.compute ops that compute the same value";
  let description = [{
    Common-subexpression elimination for the training graph: two
    `tofu.compute` ops with the same spec, operands (the same SSA values),
    op attributes and result types compute the same tensors (every TDL op is
    a pure function of its inputs and attributes; a random op's values
    depend only on its seed attribute and the element index), so the later
    one's results are replaced by the earlier one's and it is erased. Their
    `name` and `grad_of` tags are not compared.

    The backward pass repeats work that only its inputs decide: an unrolled
    RNN's gradient transposes the same recurrent weight at every timestep
    (`MatMul(dY, Transpose(R))`), a weight shared by several ops is
    transposed once per use. Each copy costs compute, memory and a
    partitioning decision.

    Not merged: ops tagged `grad_for` (the complete gradient of a model
    tensor, which the optimizer update finds by that tag) and forward ops
    of unrolled RNN timesteps (`tofu.timestep` without `grad_of`), which
    `tofu-coarsen` aligns across timesteps by position.

    Example: two `%t1 = tofu.compute "Transpose"(%r) {attrs = {}, name =
    "t1/hR.grad"}` and `%t2 = tofu.compute "Transpose"(%r) {attrs = {},
    name = "t2/hR.grad"}` become one; the uses of `%t2` read `%t1`.
  }];
}

def FoldTransposes : Pass<"tofu-fold-transposes", "::mlir::func::FuncOp"> {
  let summary = "Replaces a Transpose of a Transpose that undoes it by its input";
  let description = [{
    `Transpose(Transpose(x, p), q)` is `x` when the permutation q undoes p
    (`q[i]` = the position of i in p; an absent `perm` reverses the dims),
    and `Transpose(x, identity)` is `x`: their uses read `x` and the ops
    are erased when nothing else reads them.

    The gradient rule of MatMul transposes its weight operand
    (`dA = MatMul(dY, Transpose(B))`); where B is itself the transposed
    weight of an `nn.Linear` (PyTorch exports `x W^T` as
    `MatMul(x, Transpose(W))`), that copies W back every step. An op
    tagged `grad_for` (the complete gradient of a tensor) is kept.

    Example: `%t = tofu.compute "Transpose"(%w)` and
    `%u = tofu.compute "Transpose"(%t)` (both reversing a 2-D tensor): the
    uses of `%u` read `%w`.
  }];
}

def FuseLayerNorm : Pass<"tofu-fuse-layer-norm", "::mlir::func::FuncOp"> {
  let summary = "Replaces the layer-norm chain of an exported model by one LayerNormalization";
  let description = [{
    PyTorch exports `nn.LayerNorm` below opset 17 (torch 1.13's default is
    14) as nine ops: `d = x - ReduceMean(x)`, `ReduceMean(Pow(d, 2)) + eps`,
    `Sqrt`, `d / that`, `* weight`, `+ bias`, and its training step as about
    twenty more (the reductions' gradients, Pow's and Div's). This pass,
    before the gradients are built, replaces the chain by ONNX's
    `LayerNormalization` (tdl-specs/norm.tdl: native forward and
    `LayerNormalizationGrad` kernels on the CPU, row kernels on CUDA).

    Matched strictly: both ReduceMeans over the same trailing axes of x
    (`axes` attribute, keepdims 1), the exponent a constant 2, eps a
    positive constant scalar, weight and bias of exactly x's normalized
    shape and element type, every intermediate read only inside the chain
    (d by the Pow and the Div), the result of x's type; any operand order of
    the Adds and the Mul. Anything else is left as it is: no value changes
    but rounding (the chain rounds each op to float32; LayerNormalization
    computes a row's mean and variance and rounds the result once, as
    PyTorch's own layer norm). A layer norm without weight and bias
    (`elementwise_affine=False`) is not matched.

    Example: `%m = ReduceMean(%x) {axes = [-1]}`, `%d = Sub(%x, %m)`,
    `%p = Pow(%d, %two)`, `%v = ReduceMean(%p) {axes = [-1]}`,
    `%e = Add(%v, %eps)`, `%s = Sqrt(%e)`, `%n = Div(%d, %s)`,
    `%w = Mul(%n, %weight)`, `%y = Add(%w, %bias)` becomes
    `%y = tofu.compute "LayerNormalization"(%x, %weight, %bias)
    {attrs = {axis = 2, epsilon = ...}}` (x of rank 3).
  }];
}

def FuseGelu : Pass<"tofu-fuse-gelu", "::mlir::func::FuncOp"> {
  let summary = "Replaces the erf GELU chain of an exported model by one Gelu op";
  let description = [{
    PyTorch before opset 20 exports `nn.GELU()` (and F.gelu) as five
    element-wise ops, `Mul(Mul(x, Add(Erf(Div(x, sqrt(2))), 1)), 0.5)`,
    whose training step is about ten more. This pass, before the gradients
    are built, replaces each such chain by ONNX's `Gelu` (approximate
    "none", tdl-specs/elementwise.tdl), one op forward and one `GeluGrad`
    backward, computed in double and rounded once, as PyTorch's own GELU.

    Matched, with any operand order of each Add and Mul: `x / c` with c a
    constant scalar sqrt(2) or `x * c` with c = 1/sqrt(2); `Erf` of it;
    `+ 1`; then `(x * term) * 0.5` or `(x * 0.5) * term`. The constants must
    be `constant` tofu.params of one element within 1e-6 (relative) of
    those values (float32 rounding); every intermediate must be read only
    by the chain; x and the result must have the same float type. Any other
    graph is left as it is, so no value changes but rounding: the chain in
    float32 rounds five times, Gelu once.

    The tanh approximation (GPT-2's "gelu_new", exported with Pow and Tanh)
    is not matched.

    Example: `%d = Div(%x, %sqrt2)`, `%e = Erf(%d)`, `%a = Add(%e, %one)`,
    `%m = Mul(%x, %a)`, `%y = Mul(%m, %half)` becomes
    `%y = tofu.compute "Gelu"(%x) {attrs = {approximate = "none"}}`.
  }];
}

def AbsorbTransposes : Pass<"tofu-absorb-transposes", "::mlir::func::FuncOp"> {
  let summary = "Lets matrix products read transposed operands instead of copies";
  let description = [{
    A Transpose that swaps the last two dims of a matrix product's operand,
    or of its result, is a copy that GEMM libraries do not need: BLAS and
    cuBLAS read either operand transposed. This pass rewrites, after the
    gradients are built:

    - `MatMul(Transpose(X), B)`, `MatMul(A, Transpose(X))` (operands of
      rank >= 2) and the same on a `Gemm` or `MatMulTransposed`: the
      product reads X with the opposite transposition;
    - `Transpose(P)` of a product P that nothing else reads and that has
      no C: `op(A) op(B)` transposed is `op(B)^T op(A)^T`, one product
      with its operands swapped (P's own `grad_for` tag, the gradient of
      a tensor only the Transpose read, goes with it).

    The result is a `Gemm` (transA/transB) when both operands are matrices,
    a `MatMul` when no transposition is left, and otherwise
    `MatMulTransposed` (tdl-specs/nn.tdl: MatMul with numpy batching whose
    operands are read transposed per `transA`/`transB`). Transposes nothing
    reads any more are erased (a `grad_for`-tagged one stays). The new op
    takes the replaced op's name, `grad_for` and other tags, and the
    product's `grad_of`.

    PyTorch exports `nn.Linear` on a [N, S, K] or [N, H, W, K] activation
    as `MatMul(x, Transpose(W))`: before, every step copied W transposed
    in the forward pass and the weight's gradient back in the backward
    pass (convnext_tiny: a quarter of the CPU step). The gradient of
    `MatMul(A, B)` is `dY Transpose(B)` for A, and attention's `q k^T`
    transposes an activation: the same rewrite covers them.

    Example: `%t = tofu.compute "Transpose"(%w)` (W [N, K]) and
    `%y = tofu.compute "MatMul"(%x, %t)` (x [B, S, K]) become
    `%y = tofu.compute "MatMulTransposed"(%x, %w) {attrs = {transB = 1}}`.
  }];
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
      (`<op>.grad_sum`) and, for a parameter, its updated value and its
      optimizer state of its shape (`state_of`: momentum, Adam's moments,
      Adagrad's accumulator, updated element-wise with it) form one tensor
      group, which gets a single tiling;
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
    With a topology the objective (`objective=auto`) is the predicted step
    time of the `device` model (compute plus transfers per step,
    lib/Transforms/StepTimeModel.cpp), recorded as `tofu.objective`,
    `tofu.device_model`, `tofu.predicted_compute_seconds` and
    `tofu.step_comm_seconds`; `objective=bytes` keeps the paper's bytes.
    Requires `tofu-analyze-strategies` first.
  }];
  let options = [
    Option<"numDevices", "devices", "int64_t", "1", "number of devices k">,
    Option<"partitioner", "partitioner", "std::string", "\"tofu\"",
           "partitioning algorithm: tofu, data-parallel, allrow-greedy, "
           "spartan, equal-chop, icml18, exhaustive">,
    Option<"topology", "topology", "std::string", "\"\"",
           "interconnect levels, innermost first: COUNTx:NAME=GBPS,...">,
    Option<"objective", "objective", "std::string", "\"auto\"",
           "what the search minimizes: auto (time with a topology, bytes "
           "without), bytes, time">,
    Option<"device", "device", "std::string", "\"cpu\"",
           "device model of the predicted times: a built-in name (cpu, "
           "k80, v100, a100, h100) or a JSON description file">,
  ];
}

#endif // TOFU_PASSES_TD
