// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{freeze=fc1.*}))' | FileCheck %s
// RUN: not tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{freeze=fc1.weight,fc3.weight}))' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// Frozen parameters get no gradient and no update, and the backward ops
// that only served them are gone: nothing flows back through fc1.

func.func @main() {
  %x = tofu.input "x" "features" : tensor<8x4xf32>
  %y = tofu.input "y" "labels" {classes = 3 : i64, labels_for = "x"} : tensor<8xi64>
  %w1 = tofu.param "fc1.weight" : tensor<4x4xf32>
  %b1 = tofu.param "fc1.bias" : tensor<4xf32>
  %w2 = tofu.param "fc2.weight" : tensor<3x4xf32>
  %h = tofu.compute "Gemm"(%x, %w1, %b1) {attrs = {transB = 1 : i64}, name = "fc1"} : (tensor<8x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %r = tofu.compute "Relu"(%h) {attrs = {}, name = "relu"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %o = tofu.compute "Gemm"(%r, %w2) {attrs = {transB = 1 : i64}, name = "fc2"} : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  %l = tofu.compute "SoftmaxCrossEntropyLoss"(%o, %y) {attrs = {}, name = "ce"} : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<f32>
  tofu.output "loss" %l : tensor<f32>
  return
}
// CHECK: %[[W2:.*]] = tofu.param "fc2.weight"
// CHECK-NOT: grad_of = "relu"
// CHECK-NOT: grad_of = "fc1"
// CHECK: tofu.compute "SGDUpdate"(%[[W2]]
// CHECK-NOT: SGDUpdate
// CHECK: tofu.update %[[W2]]
// CHECK-NOT: tofu.update
// UNKNOWN: --freeze: 'fc3.weight' matches no parameter (parameters: 'fc1.weight', 'fc1.bias', 'fc2.weight')
