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
    classes (labels lie in [0, classes)) and `labels_for` the name of the
    input they label (a learnable synthetic teacher is built from it).

    Example: `%x = tofu.input "input" features : tensor<64x64xf32>`
  }];
  let arguments = (ins StrAttr:$sym_name, StrAttr:$role,
                       OptionalAttr<I64Attr>:$classes,
                       OptionalAttr<StrAttr>:$labels_for);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$sym_name $role attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tofu_ParamOp : Tofu_Op<"param", [Pure]> {
  let summary = "A trainable parameter (an ONNX initializer)";
  let description = [{
    `value` holds the initial weights; it may be absent (graph-only model),
    in which case a plan cannot be emitted.

    `constant` marks a value that is read at run time but never trained: an
    ONNX Constant node, an integer initializer or a result folded at import
    (shape arithmetic). The training step builds no update for it.

    Example: `%w = tofu.param "fc1.weight" : tensor<128x64xf32>`,
    `%c = tofu.param "scale" {constant, value = dense<8.0> : tensor<f32>} : tensor<f32>`
  }];
  let arguments = (ins StrAttr:$sym_name, OptionalAttr<ElementsAttr>:$value,
                       UnitAttr:$constant);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$sym_name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tofu_ComputeOp : Tofu_Op<"compute", [Pure]> {
  let summary = "An operator described by its TDL specification";
  let description = [{
    Applies the TDL op `spec` (see `tdl-specs/`) to `operands` with the op
    attributes `attrs`. Operands map to the spec's declared inputs in order;
    trailing optional inputs may be omitted. The verifier instantiates the
    spec on the operand types (TDL shape inference) and checks the result
    types. `name` is unique within the function (ONNX node name, or the
    forward op's name plus a suffix for backward ops).

    Example:
    ```
    %y = tofu.compute "Gemm"(%x, %w, %b) {attrs = {transB = 1 : i64}, name = "fc1"}
        : (tensor<64x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<64x128xf32>
    ```
  }];
  let arguments = (ins StrAttr:$spec, Variadic<AnyRankedTensor>:$inputs,
                       DictionaryAttr:$attrs, StrAttr:$name,
                       OptionalAttr<StrAttr>:$grad_of);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    $spec `(` $inputs `)` attr-dict `:` functional-type($inputs, $results)
  }];
  let hasVerifier = 1;
}

def Tofu_LossOp : Tofu_Op<"loss"> {
  let summary = "Marks the scalar loss the training step minimizes";
  let arguments = (ins 0DTensorOf<[F32]>:$loss);
  let assemblyFormat = "$loss attr-dict `:` type($loss)";
}

def Tofu_UpdateOp : Tofu_Op<"update",
    [AllTypesMatch<["param", "gradient", "new_value"]>]> {
  let summary = "The new value of a parameter at the end of the step";
  let description = [{
    `param` (a `tofu.param` result) takes the value `new_value` at the end of
    the training step; `gradient` is the gradient of the loss with respect to
    it. Example: `tofu.update %w, %dw, %w_new : tensor<128x64xf32>`
  }];
  let arguments = (ins AnyRankedTensor:$param, AnyRankedTensor:$gradient,
                       AnyRankedTensor:$new_value);
  let assemblyFormat = [{
    $param `,` $gradient `,` $new_value attr-dict `:` type($param)
  }];
  let hasVerifier = 1;
}

#endif // TOFU_OPS_TD
