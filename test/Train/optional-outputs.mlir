// RUN: tofu-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tofu-build-training-step))' | FileCheck %s
// Optional outputs (`name?:` in the TDL spec) that nothing uses are dropped
// from their op after the backward pass is built, so a training step does
// not compute them; an optional output that is used stays, and its gradient
// flows (present(dY) in the gradient rule).

// SoftmaxCrossEntropyLoss's log_prob and MaxPool's Indices are unused.
// CHECK-LABEL: func.func @unused
// CHECK: %[[P:.*]] = tofu.compute "MaxPool"({{.*}}) {{.*}}name = "pool"{{.*}} -> tensor<2x3x2x2xf32>
// CHECK: %[[L:.*]] = tofu.compute "SoftmaxCrossEntropyLoss"({{.*}}) {{.*}}name = "sce"{{.*}} -> tensor<f32>
// CHECK: tofu.loss %[[L]]
// CHECK: "Ones"({{.*}}grad_for = "sce"
// CHECK: "SoftmaxCrossEntropyLossGrad"
// CHECK-NOT: "LogSoftmaxGrad"
// CHECK-NOT: "Zeros"
// CHECK: "ReduceMeanGrad"({{.*}}grad_for = "pool"
// CHECK: "MaxPoolGrad"
// CHECK-NOT: "Zeros"
// CHECK: return
func.func @unused() {
  %x = tofu.input "x" "features" : tensor<2x3x4x4xf32>
  %y = tofu.input "y" "labels" {classes = 3 : i64} : tensor<2xi64>
  %w = tofu.param "w" : tensor<2x3x4x4xf32>
  %m = tofu.compute "Mul"(%x, %w) {attrs = {}, name = "mul"} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %p:2 = tofu.compute "MaxPool"(%m) {attrs = {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>}, name = "pool"} : (tensor<2x3x4x4xf32>) -> (tensor<2x3x2x2xf32>, tensor<2x3x2x2xi64>)
  %s = tofu.compute "ReduceMean"(%p#0) {attrs = {axes = array<i64: 2, 3>, keepdims = 0 : i64}, name = "mean"} : (tensor<2x3x2x2xf32>) -> tensor<2x3xf32>
  %l:2 = tofu.compute "SoftmaxCrossEntropyLoss"(%s, %y) {attrs = {}, name = "sce"} : (tensor<2x3xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x3xf32>)
  tofu.output "loss" %l#0 : tensor<f32>
  return
}

// -----

// log_prob feeds a second term of the loss: it stays, and dscores adds its
// LogSoftmaxGrad. Trainable class weights get a gradient and an update.
// CHECK-LABEL: func.func @used
// CHECK: %[[L:.*]]:2 = tofu.compute "SoftmaxCrossEntropyLoss"
// CHECK-DAG: "LogSoftmaxGrad"({{.*}}, %[[L]]#1)
// CHECK-DAG: "NegativeLogLikelihoodLossWeightGrad"({{.*}}%[[L]]#1{{.*}}%[[L]]#0) {{.*}}grad_for = "cw"
// CHECK: tofu.update %{{.*}}, %{{.*}} grad
// CHECK: return
func.func @used() {
  %x = tofu.input "x" "features" : tensor<4x3xf32>
  %y = tofu.input "y" "labels" {classes = 3 : i64} : tensor<4xi64>
  %w = tofu.param "w" : tensor<4x3xf32>
  %cw = tofu.param "cw" : tensor<3xf32>
  %m = tofu.compute "Mul"(%x, %w) {attrs = {}, name = "mul"} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %l:2 = tofu.compute "SoftmaxCrossEntropyLoss"(%m, %y, %cw) {attrs = {}, name = "sce"} : (tensor<4x3xf32>, tensor<4xi64>, tensor<3xf32>) -> (tensor<f32>, tensor<4x3xf32>)
  %r = tofu.compute "ReduceSum"(%l#1) {attrs = {keepdims = 0 : i64}, name = "lpsum"} : (tensor<4x3xf32>) -> tensor<f32>
  %t = tofu.compute "Add"(%l#0, %r) {attrs = {}, name = "total"} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  tofu.output "loss" %t : tensor<f32>
  return
}

// -----

// A compute op may omit trailing optional outputs.
// CHECK-LABEL: func.func @omitted
// CHECK: "SoftmaxCrossEntropyLoss"({{.*}}) {{.*}} -> tensor<f32>
func.func @omitted() {
  %x = tofu.input "x" "features" : tensor<4x3xf32>
  %y = tofu.input "y" "labels" {classes = 3 : i64} : tensor<4xi64>
  %w = tofu.param "w" : tensor<4x3xf32>
  %m = tofu.compute "Mul"(%x, %w) {attrs = {}, name = "mul"} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %l = tofu.compute "SoftmaxCrossEntropyLoss"(%m, %y) {attrs = {}, name = "sce"} : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<f32>
  tofu.output "loss" %l : tensor<f32>
  return
}
