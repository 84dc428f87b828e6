// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{lr=0.05}))' | FileCheck %s
// A linear layer + ReLU + softmax cross-entropy becomes a training step:
// backward ops from the TDL gradient rules, tagged with their forward op, and
// one SGD update per parameter. No gradient is computed for the data input.
// The op that completes a tensor's gradient names it (grad_for).

func.func @main() {
  %x = tofu.input "x" "features" : tensor<8x4xf32>
  %y = tofu.input "y" "labels" {classes = 3 : i64, labels_for = "x"} : tensor<8xi64>
  %w = tofu.param "w" : tensor<3x4xf32>
  %b = tofu.param "b" : tensor<3xf32>
  %h = tofu.compute "Gemm"(%x, %w, %b) {attrs = {transB = 1 : i64}, name = "fc"} : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  %r = tofu.compute "Relu"(%h) {attrs = {}, name = "relu"} : (tensor<8x3xf32>) -> tensor<8x3xf32>
  %l = tofu.compute "SoftmaxCrossEntropyLoss"(%r, %y) {attrs = {}, name = "ce"} : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<f32>
  tofu.loss %l : tensor<f32>
  return
}

// CHECK: %[[X:.*]] = tofu.input "x"
// CHECK: %[[Y:.*]] = tofu.input "y"
// CHECK: %[[W:.*]] = tofu.param "w"
// CHECK: %[[B:.*]] = tofu.param "b"
// CHECK: %[[H:.*]] = tofu.compute "Gemm"
// CHECK: %[[R:.*]] = tofu.compute "Relu"(%[[H]])
// CHECK: %[[L:.*]] = tofu.compute "SoftmaxCrossEntropyLoss"(%[[R]], %[[Y]])
// CHECK: %[[SEED:.*]] = tofu.compute "Ones"(%[[L]]) {{.*}}grad_for = "ce"
// CHECK: %[[DR:.*]] = tofu.compute "SoftmaxCrossEntropyLossGrad"(%[[SEED]], %[[R]], %[[Y]]) {{.*}}grad_for = "relu", grad_of = "ce"
// CHECK: %[[DH:.*]] = tofu.compute "ReluGrad"(%[[DR]], %[[R]]) {{.*}}grad_for = "fc", grad_of = "relu"
// CHECK-NOT: tofu.compute "Gemm"(%[[DH]], %[[W]]
// CHECK-DAG: %[[DW:.*]] = tofu.compute "Gemm"(%[[DH]], %[[X]]) {attrs = {{{.*}}transA = 1 : i64{{.*}}}, grad_for = "w", grad_of = "fc"{{.*}} -> tensor<3x4xf32>
// CHECK-DAG: %[[DB:.*]] = tofu.compute "BiasGrad"(%[[DH]]) {{.*}}grad_for = "b", grad_of = "fc"{{.*}} -> tensor<3xf32>
// CHECK-DAG: %[[NW:.*]] = tofu.compute "SGDUpdate"(%[[W]], %[[DW]]) {attrs = {lr = 5.000000e-02 : f64}
// CHECK-DAG: %[[NB:.*]] = tofu.compute "SGDUpdate"(%[[B]], %[[DB]])
// CHECK-DAG: tofu.update %[[W]], %[[NW]] grad %[[DW]] : tensor<3x4xf32>
// CHECK-DAG: tofu.update %[[B]], %[[NB]] grad %[[DB]] : tensor<3xf32>
