// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{optimizer=momentum}, tofu-analyze-strategies, tofu-coarsen))' | FileCheck %s --check-prefix=MOMENTUM
// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{optimizer=adagrad}, tofu-analyze-strategies, tofu-coarsen))' | FileCheck %s --check-prefix=ADAGRAD
// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{optimizer=adam}, tofu-analyze-strategies, tofu-coarsen))' | FileCheck %s --check-prefix=ADAM
// Optimizer state that the optimizer updates element-wise with its
// parameter (momentum, Adagrad's accumulator, Adam's two moments: params
// with state_of) is one tensor group with the parameter, its gradient and
// both updated values (paper §5.1), so it is tiled like the parameter and
// the update moves nothing. The scalar learning rate and step count keep
// their own (rank-0, replicated) groups.

func.func @main() {
  %x = tofu.input "x" "features" : tensor<8x4xf32>
  %w = tofu.param "w" {value = dense<0.5> : tensor<4x6xf32>} : tensor<4x6xf32>
  %h = tofu.compute "MatMul"(%x, %w) {attrs = {}, name = "fc"} : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
  %l = tofu.compute "ReduceSum"(%h) {attrs = {keepdims = 0 : i64}, name = "loss"} : (tensor<8x6xf32>) -> tensor<f32>
  tofu.loss %l : tensor<f32>
  return
}

// MOMENTUM: tofu.param "w" {tofu.tensor_groups = array<i64: [[W:[0-9]+]]>
// MOMENTUM: tofu.param "w.lr" {state_of = "w", tofu.tensor_groups = array<i64: [[LR:[0-9]+]]>
// MOMENTUM-NOT: array<i64: [[W]]>
// MOMENTUM: tofu.param "w.momentum" {state_of = "w", tofu.tensor_groups = array<i64: [[W]]>
// MOMENTUM: tofu.compute "MatMul"{{.*}}grad_of = "fc"{{.*}}tofu.tensor_groups = array<i64: [[W]]>
// MOMENTUM: tofu.compute "Momentum"{{.*}}tofu.tensor_groups = array<i64: [[W]], [[W]]>

// ADAGRAD: tofu.param "w" {tofu.tensor_groups = array<i64: [[W:[0-9]+]]>
// ADAGRAD: tofu.param "w.adagrad_h" {state_of = "w", tofu.tensor_groups = array<i64: [[W]]>
// ADAGRAD: tofu.compute "Adagrad"{{.*}}tofu.tensor_groups = array<i64: [[W]], [[W]]>

// ADAM: tofu.param "w" {tofu.tensor_groups = array<i64: [[W:[0-9]+]]>
// ADAM: tofu.param "w.adam_v" {state_of = "w", tofu.tensor_groups = array<i64: [[W]]>
// ADAM: tofu.param "w.adam_h" {state_of = "w", tofu.tensor_groups = array<i64: [[W]]>
// ADAM: tofu.compute "Adam"{{.*}}tofu.tensor_groups = array<i64: [[W]], [[W]], [[W]]>
