// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{freeze=c}))' | FileCheck %s
// RUN: not tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step))' 2>&1 | FileCheck %s --check-prefix=TRAINED
// --freeze drops the gradient rule of the frozen input: SigmoidGrad (used
// forward here) has no gradient rule, which matters only when c trains.

// CHECK: %[[W:.*]] = tofu.param "w"
// CHECK-NOT: grad_for = "c"
// CHECK: tofu.update %[[W]], %{{.*}} grad
// CHECK-NOT: tofu.update
// TRAINED: error: cannot differentiate 'odd' (SigmoidGrad): op SigmoidGrad has no gradient rule
func.func @main() {
  %x = tofu.input "x" "features" : tensor<3x4xf32>
  %w = tofu.param "w" : tensor<4x2xf32>
  %c = tofu.param "c" : tensor<3x2xf32>
  %y = tofu.compute "Gemm"(%x, %w) {attrs = {}, name = "fc"} : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %s = tofu.compute "SigmoidGrad"(%c, %c) {attrs = {}, name = "odd"} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %m = tofu.compute "Mul"(%y, %s) {attrs = {}, name = "mul"} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %l = tofu.compute "ReduceSum"(%m) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<3x2xf32>) -> tensor<f32>
  tofu.output "loss" %l : tensor<f32>
  return
}
