// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step, tofu-analyze-strategies, tofu-coarsen))' | FileCheck %s
// Two unrolled timesteps of a tiny RNN sharing the weight %w, then a loss.
// Coarsening (paper §5.1) groups:
//  * each forward op with its backward ops (one tofu.op_group);
//  * the weight, its two gradients, their sum and its updated value (one
//    tensor group);
//  * the timesteps (tofu.timestep) into one op group, and their results,
//    which the element-wise Tanh ties to its input, into one tensor group.

func.func @main() {
  %x = tofu.input "x" "features" : tensor<8x4xf32>
  %y = tofu.input "y" "labels" {classes = 4 : i64, labels_for = "x"} : tensor<8xi64>
  %w = tofu.param "w" : tensor<4x4xf32>
  %h0 = tofu.compute "MatMul"(%x, %w) {attrs = {}, name = "cell0", tofu.timestep = 0 : i64} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %a0 = tofu.compute "Tanh"(%h0) {attrs = {}, name = "act0", tofu.timestep = 0 : i64} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %h1 = tofu.compute "MatMul"(%a0, %w) {attrs = {}, name = "cell1", tofu.timestep = 1 : i64} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %a1 = tofu.compute "Tanh"(%h1) {attrs = {}, name = "act1", tofu.timestep = 1 : i64} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %l = tofu.compute "SoftmaxCrossEntropyLoss"(%a1, %y) {attrs = {}, name = "ce"} : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<f32>
  tofu.loss %l : tensor<f32>
  return
}

// Tensor groups: the RNN state = 0 (with x, the first cell's input), y = 1,
// w = 2, the loss = 3.
// CHECK: tofu.input "x" "features" {tofu.tensor_groups = array<i64: 0>}
// CHECK: tofu.input "y" "labels" {{.*}}tofu.tensor_groups = array<i64: 1>
// CHECK: tofu.param "w" {tofu.tensor_groups = array<i64: 2>}
// The cells of both timesteps form op group 0, both Tanh op group 1 (merged
// across timesteps, and as consecutive element-wise ops would be).
// CHECK: tofu.compute "MatMul"{{.*}}name = "cell0"{{.*}}tofu.op_group = 0 : i64{{.*}}tofu.tensor_groups = array<i64: 0>
// CHECK: tofu.compute "Tanh"{{.*}}name = "act0"{{.*}}tofu.op_group = 1 : i64{{.*}}tofu.tensor_groups = array<i64: 0>
// CHECK: tofu.compute "MatMul"{{.*}}name = "cell1"{{.*}}tofu.op_group = 0 : i64{{.*}}tofu.tensor_groups = array<i64: 0>
// CHECK: tofu.compute "Tanh"{{.*}}name = "act1"{{.*}}tofu.op_group = 1 : i64{{.*}}tofu.tensor_groups = array<i64: 0>
// CHECK: tofu.compute "SoftmaxCrossEntropyLoss"{{.*}}tofu.op_group = [[CE:[0-9]+]] : i64{{.*}}tofu.tensor_groups = array<i64: 3>
// The seed of the backward pass is the loss's gradient: the loss's group.
// CHECK: tofu.compute "Ones"{{.*}}tofu.tensor_groups = array<i64: 3>
// Backward ops join their forward op's group; the gradients of the state
// join the state's tensor group.
// CHECK: tofu.compute "SoftmaxCrossEntropyLossGrad"{{.*}}grad_of = "ce"{{.*}}tofu.op_group = [[CE]] : i64{{.*}}tofu.tensor_groups = array<i64: 0>
// CHECK: tofu.compute "TanhGrad"{{.*}}grad_of = "act1"{{.*}}tofu.op_group = 1 : i64{{.*}}tofu.tensor_groups = array<i64: 0>
// CHECK: tofu.compute "Transpose"{{.*}}grad_of = "cell1"{{.*}}tofu.op_group = 0 : i64
// CHECK: tofu.compute "MatMul"{{.*}}grad_of = "cell1"{{.*}}tofu.op_group = 0 : i64{{.*}}tofu.tensor_groups = array<i64: 0>
// The weight's two gradients, their sum and the update: the weight's group.
// CHECK: tofu.compute "MatMul"{{.*}}grad_of = "cell1"{{.*}}tofu.op_group = 0 : i64{{.*}}tofu.tensor_groups = array<i64: 2>
// CHECK: tofu.compute "MatMul"{{.*}}grad_of = "cell0"{{.*}}tofu.op_group = 0 : i64{{.*}}tofu.tensor_groups = array<i64: 2>
// CHECK: tofu.compute "Add"{{.*}}name = "cell0.grad_sum"{{.*}}tofu.op_group = 0 : i64{{.*}}tofu.tensor_groups = array<i64: 2>
// CHECK: tofu.compute "SGDUpdate"{{.*}}tofu.tensor_groups = array<i64: 2>
// CHECK: tofu.update

