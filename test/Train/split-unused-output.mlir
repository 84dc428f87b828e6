// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step))' | FileCheck %s
// Only one piece of a Split reaches the loss: the other's gradient is
// zeros, so the Split's gradient rule (a Concat of every piece's gradient)
// still applies and w gets its gradient.

func.func @main() {
  %x = tofu.input "x" "features" : tensor<8x4xf32>
  %w = tofu.param "w" : tensor<8x4xf32>
  %m = tofu.compute "Mul"(%x, %w) {attrs = {}, name = "mul"} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %a:2 = tofu.compute "Split"(%m) {attrs = {axis = 1 : i64, num_outputs = 2 : i64}, name = "split"} : (tensor<8x4xf32>) -> (tensor<8x2xf32>, tensor<8x2xf32>)
  %l = tofu.compute "ReduceSum"(%a#0) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<8x2xf32>) -> tensor<f32>
  tofu.output "loss" %l : tensor<f32>
  return
}
// CHECK: %[[A:.*]]:2 = tofu.compute "Split"
// CHECK: %[[D0:.*]] = tofu.compute {{.*}}grad_for = "split#0", grad_of = "sum"
// CHECK: %[[Z:.*]] = tofu.compute "Zeros"(%[[A]]#1) {{.*}}grad_of = "split"
// CHECK: %[[DM:.*]] = tofu.compute "Concat"(%[[D0]], %[[Z]]) {{.*}}grad_for = "mul", grad_of = "split"
// CHECK: tofu.update
