// RUN: tofu-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tofu-build-training-step))' -verify-diagnostics
// A loss that depends on no graph input and no trainable parameter (it
// folded to a constant at import, or is arithmetic on constants only) is a
// compile-time error naming the loss, not a plan that fails at run time
// ("no instruction wrote the loss tensor") or trains nothing.

func.func @folded() {
  %x = tofu.input "x" "features" : tensor<8x4xf32>
  %c = tofu.param "loss" {constant, value = dense<2.0> : tensor<f32>} : tensor<f32>
  // expected-error @+1 {{the loss, model output 'loss', is the compile-time constant 'loss': it folded at import (Constant nodes, integer initializers, shape arithmetic) and depends on no graph input and no trainable initializer, so training could not change it; make the loss a function of the model's inputs and weights}}
  tofu.output "loss" %c : tensor<f32>
  return
}

// -----

func.func @from_constants() {
  %x = tofu.input "x" "features" : tensor<8x4xf32>
  %c = tofu.param "big" {constant, value = dense<2.0> : tensor<8x4xf32>} : tensor<8x4xf32>
  %l = tofu.compute "ReduceSum"(%c) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<8x4xf32>) -> tensor<f32>
  // expected-error @+1 {{the loss, model output 'loss' (ReduceSum 'sum'), is computed from compile-time constants only}}
  tofu.output "loss" %l : tensor<f32>
  return
}
