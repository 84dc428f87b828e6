//===- TofuOps.td - tofu operations ------------------------*- tablegen -*-===//
#ifndef TOFU_OPS_TD
#define TOFU_OPS_TD

include "TofuDialect.td"
include "TofuAttrs.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Tofu_InputOp : Tofu_Op<"input", [Pure]> {
  let summary = "A model input fed by the data loader each step";
  let description = [{
    `role` is `features` or `labels`. For labels, `classes` is the number of
    classes (labels lie in [0, classes), or equal `ignore_index` when the
    loss has one) and `labels_for` the name of the input they label (a
    learnable synthetic teacher is built from it). For integer features,
    `classes` is the number of rows of the table they index (token ids).

    Example: `%x = tofu.input "input" features : tensor<64x64xf32>`
  }];
  let arguments = (ins StrAttr:$sym_name, StrAttr:$role,
                       OptionalAttr<I64Attr>:$classes,
                       OptionalAttr<StrAttr>:$labels_for,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$sym_name $role attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tofu_ParamOp : Tofu_Op<"param", [Pure]> {
  let summary = "A persistent tensor: a trainable parameter or optimizer state";
  let description = [{
    A tensor that keeps its value from one training step to the next.
    Without `state_of` it is a trainable parameter (an ONNX initializer);
    `value` holds the initial weights and may be absent (graph-only model),
    in which case a plan cannot be emitted.

    `constant` marks a value that is read at run time but never trained: an
    ONNX Constant node, an integer initializer or a result folded at import
    (shape arithmetic). The training step builds no update for it.

    `trainable` records what the model says of a parameter (ONNX
    `metadata_props` `tofu.frozen` / `tofu.trainable`, docs/Training.md
    "Which initializers train"): `false` = the model keeps it fixed, `true`
    = the model trains it. Absent, the training step decides (a parameter
    trains unless it holds a non-finite value); `--trainable` / `--freeze`
    override it. Only for parameters (neither `constant` nor `state_of`).

    With `state_of = "<param>"` it is optimizer state of that parameter
    (momentum velocity, Adam's moments, Adagrad's accumulated squares, the
    update count T, the learning rate R), created by
    `tofu-build-training-step` with its initial value. It gets no gradient,
    is not written back by `tofu-run --save`, and belongs to its
    parameter's tensor group for the partitioner (same shape, same tiling).

    Example: `%w = tofu.param "fc1.weight" : tensor<128x64xf32>`,
    `%c = tofu.param "scale" {constant, value = dense<8.0> : tensor<f32>} : tensor<f32>`,
    `%m = tofu.param "mask" {trainable = false, value = dense<...> : tensor<4x4xf32>} : tensor<4x4xf32>`,
    `%v = tofu.param "fc1.weight.momentum" {state_of = "fc1.weight", value = dense<0.0> : tensor<128x64xf32>} : tensor<128x64xf32>`
  }];
  let arguments = (ins StrAttr:$sym_name, OptionalAttr<ElementsAttr>:$value,
                       UnitAttr:$constant, OptionalAttr<StrAttr>:$state_of,
                       OptionalAttr<BoolAttr>:$trainable);
  let results = (outs AnyRankedTensor:$result);
  let builders = [
    // A parameter without state_of (constant is set afterwards if needed).
    OpBuilder<(ins "::mlir::Type":$type, "::llvm::StringRef":$sym_name,
                   "::mlir::ElementsAttr":$value), [{
      build($_builder, $_state, type, sym_name, value, /*constant=*/false,
            ::mlir::StringAttr(), ::mlir::BoolAttr());
    }]>
  ];
  let assemblyFormat = "$sym_name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tofu_ComputeOp : Tofu_Op<"compute", [Pure]> {
  let summary = "An operator described by its TDL specification";
  let description = [{
    Applies the TDL op `spec` (see `tdl-specs/`) to `operands` with the op
    attributes `attrs`. Operands map to the spec's declared inputs in order;
    trailing optional inputs may be omitted. Results map to the spec's
    declared outputs in order; trailing optional outputs (`name?:` in the
    spec) may be omitted and are then not computed. The verifier
    instantiates the spec on the operand types (TDL shape inference) and
    checks the result types. `name` is unique within the function (ONNX node name, or the
    forward op's name plus a suffix for backward ops).

    Tags added by `tofu-build-training-step`: `grad_of` names the forward op
    a backward op belongs to; `grad_for` is set on the op whose result is
    the complete gradient of a model tensor (after all contributions are
    summed) and names that tensor: a parameter's name, or the forward op's
    name (with `#i` for result i of a multi-result op) for an activation.

    Example:
    ```
    %y = tofu.compute "Gemm"(%x, %w, %b) {attrs = {transB = 1 : i64}, name = "fc1"}
        : (tensor<64x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<64x128xf32>
    ```
  }];
  let arguments = (ins StrAttr:$spec, Variadic<AnyRankedTensor>:$inputs,
                       DictionaryAttr:$attrs, StrAttr:$name,
                       OptionalAttr<StrAttr>:$grad_of,
                       OptionalAttr<StrAttr>:$grad_for);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let builders = [
    // An op without grad_for (a forward op, or a backward op before tagging).
    OpBuilder<(ins "::mlir::TypeRange":$results, "::llvm::StringRef":$spec,
                   "::mlir::ValueRange":$inputs, "::mlir::DictionaryAttr":$attrs,
                   "::llvm::StringRef":$name, "::mlir::StringAttr":$grad_of), [{
      build($_builder, $_state, results, spec, inputs, attrs, name, grad_of,
            ::mlir::StringAttr());
    }]>
  ];
  let assemblyFormat = [{
    $spec `(` $inputs `)` attr-dict `:` functional-type($inputs, $results)
  }];
  let hasVerifier = 1;
}

def Tofu_OutputOp : Tofu_Op<"output"> {
  let summary = "A model output (an ONNX graph output), by name";
  let description = [{
    Marks `value` as the model output `name`. `tofu-build-training-step`
    picks the loss among the outputs (its `loss` option: an output's name,
    or `softmax-cross-entropy[:<logits output>]`) and removes the markers:
    a training step's results are its loss and its updates.

    Example: `tofu.output "loss" %l : tensor<f32>`
  }];
  let arguments = (ins StrAttr:$name, AnyRankedTensor:$value);
  let assemblyFormat = "$name $value attr-dict `:` type($value)";
}

def Tofu_LossOp : Tofu_Op<"loss"> {
  let summary = "Marks the scalar loss the training step minimizes";
  let description = [{
    `description` says how the loss was found (which model output, which
    logits and labels a built-in loss reads); `tofuc --verbose` and
    `--dump-plan` print it.

    Example: `tofu.loss %l {description = "model output 'loss'"} : tensor<f32>`
  }];
  let arguments = (ins 0DTensorOf<[AnyFloat]>:$loss,
                       OptionalAttr<StrAttr>:$description);
  let assemblyFormat = "$loss attr-dict `:` type($loss)";
}

def Tofu_UpdateOp : Tofu_Op<"update",
    [AllTypesMatch<["param", "new_value"]>,
     OptionalTypesMatchWith<"the gradient has the parameter's type", "param",
                            "gradient", "$_self">]> {
  let summary = "The new value of a persistent tensor at the end of the step";
  let description = [{
    `param` (a `tofu.param` result: a parameter or optimizer state) takes
    the value `new_value` at the end of the training step. For a trainable
    parameter, `gradient` is the gradient of the loss with respect to it;
    optimizer state has none.

    Example: `tofu.update %w, %w_new grad %dw : tensor<128x64xf32>`,
    `tofu.update %v, %v_new : tensor<128x64xf32>`
  }];
  let arguments = (ins AnyRankedTensor:$param,
                       Optional<AnyRankedTensor>:$gradient,
                       AnyRankedTensor:$new_value);
  let assemblyFormat = [{
    $param `,` $new_value (`grad` $gradient^)? attr-dict `:` type($param)
  }];
  let hasVerifier = 1;
}

def Tofu_GradientOp : Tofu_Op<"gradient",
    [Pure, AllTypesMatch<["x", "result"]>]> {
  let summary = "The gradient of a scalar with respect to a tensor (ONNX Gradient)";
  let description = [{
    The derivative of the scalar `y` with respect to `x`, at the values the
    graph computes for them: the ONNX `ai.onnx.preview.training` `Gradient`
    operator (one `tofu.gradient` per entry of its `xs`). `name` is the ONNX
    node's name. `tofu-build-training-step` replaces every `tofu.gradient`
    with the gradient its reverse-mode differentiation of `y` computes (or
    zeros where `x` does not influence `y`); no later pass sees one.

    Example: `%dw = tofu.gradient "grad" %loss wrt %w : tensor<f32>, tensor<4x2xf32>`
  }];
  let arguments = (ins StrAttr:$name, 0DTensorOf<[AnyFloat]>:$y,
                       AnyRankedTensor:$x);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $name $y `wrt` $x attr-dict `:` type($y) `,` type($x)
  }];
  let builders = [
    OpBuilder<(ins "::llvm::StringRef":$name, "::mlir::Value":$y,
                   "::mlir::Value":$x), [{
      build($_builder, $_state, x.getType(), name, y, x);
    }]>
  ];
  let hasVerifier = 1;
}

#endif // TOFU_OPS_TD
