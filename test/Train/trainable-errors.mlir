// RUN: tofu-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(func.func(tofu-build-training-step))'
// A parameter that the model marks trainable but that holds a non-finite
// value is an error (its first update would make it NaN), not a silent NaN
// loss.

func.func @nan_marked_trainable() {
  %x = tofu.input "x" "features" : tensor<2x2xf32>
  // expected-error @+1 {{parameter 'w' holds NaN and cannot be trained (one step would make it NaN), but the model's metadata_props 'tofu.trainable' lists it; keep it fixed with --freeze w}}
  %w = tofu.param "w" {trainable = true, value = dense<[[1.0, 0x7FC00000], [2.0, 3.0]]> : tensor<2x2xf32>} : tensor<2x2xf32>
  %y = tofu.compute "Mul"(%x, %w) {attrs = {}, name = "mul"} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %l = tofu.compute "ReduceSum"(%y) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<2x2xf32>) -> tensor<f32>
  tofu.output "loss" %l : tensor<f32>
  return
}

// -----

func.func @trainable_on_constant() {
  // expected-error @+1 {{'trainable' applies to parameters, not to a constant}}
  %c = tofu.param "c" {constant, trainable = false, value = dense<1.0> : tensor<2xf32>} : tensor<2xf32>
  return
}
