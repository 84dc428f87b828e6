// RUN: tofu-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(func.func(tofu-autocast))'
// --precision bf16 converts float32 models only: any other float type is an
// error that names the value.

func.func @float64_model() {
  // expected-error @+1 {{--precision bf16 trains a float32 model, but 'x' has type 'tensor<2x2xf64>'}}
  %x = tofu.input "x" "features" : tensor<2x2xf64>
  %w = tofu.param "w" : tensor<2x2xf64>
  %y = tofu.compute "MatMul"(%x, %w) {attrs = {}, name = "mm"} : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
  %l = tofu.compute "ReduceSum"(%y) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<2x2xf64>) -> tensor<f64>
  tofu.output "loss" %l : tensor<f64>
  return
}

// -----

// A model without MatMul, Gemm or Conv trains in float32, with a warning.
// expected-warning @+1 {{--precision bf16: the model has no float32 MatMul, Gemm or Conv; it trains in float32}}
func.func @nothing_to_cast() {
  %x = tofu.input "x" "features" : tensor<2x2xf32>
  %w = tofu.param "w" : tensor<2x2xf32>
  %y = tofu.compute "Mul"(%x, %w) {attrs = {}, name = "mul"} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %l = tofu.compute "ReduceSum"(%y) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<2x2xf32>) -> tensor<f32>
  tofu.output "loss" %l : tensor<f32>
  return
}
