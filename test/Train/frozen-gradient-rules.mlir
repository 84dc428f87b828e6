// RUN: tofu-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(func.func(tofu-build-training-step))' | FileCheck %s
// Only the inputs that need a gradient (a trained parameter, or a value
// computed from one) have their gradient rule expanded: a frozen parameter
// read by an op without a gradient rule (SigmoidGrad, used forward here) and
// ops on data-only paths no longer stop the training step.

// CHECK-LABEL: func.func @frozen_param_without_rule
// CHECK: %[[W:.*]] = tofu.param "w"
// CHECK-NOT: grad_for = "c"
// CHECK-NOT: grad_of = "odd"
// CHECK: tofu.update %[[W]], %{{.*}} grad
// CHECK-NOT: tofu.update
func.func @frozen_param_without_rule() {
  %x = tofu.input "x" "features" : tensor<3x4xf32>
  %w = tofu.param "w" : tensor<4x2xf32>
  %c = tofu.param "c" {trainable = false} : tensor<3x2xf32>
  %y = tofu.compute "Gemm"(%x, %w) {attrs = {}, name = "fc"} : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %s = tofu.compute "SigmoidGrad"(%c, %c) {attrs = {}, name = "odd"} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %m = tofu.compute "Mul"(%y, %s) {attrs = {}, name = "mul"} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %l = tofu.compute "ReduceSum"(%m) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<3x2xf32>) -> tensor<f32>
  tofu.output "loss" %l : tensor<f32>
  return
}

// -----

// The same parameter trained still needs the rule, and the error says so.
func.func @trained_param_without_rule() {
  %x = tofu.input "x" "features" : tensor<3x4xf32>
  %w = tofu.param "w" : tensor<4x2xf32>
  %c = tofu.param "c" : tensor<3x2xf32>
  %y = tofu.compute "Gemm"(%x, %w) {attrs = {}, name = "fc"} : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  // expected-error @+1 {{cannot differentiate 'odd' (SigmoidGrad): op SigmoidGrad has no gradient rule}}
  %s = tofu.compute "SigmoidGrad"(%c, %c) {attrs = {}, name = "odd"} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %m = tofu.compute "Mul"(%y, %s) {attrs = {}, name = "mul"} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %l = tofu.compute "ReduceSum"(%m) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<3x2xf32>) -> tensor<f32>
  tofu.output "loss" %l : tensor<f32>
  return
}

// -----

// Data-only paths: CastLike of a data input to a frozen buffer's type, and
// an op without a gradient rule (SigmoidGrad, used forward here) on data:
// neither gets a backward op; CastLike of a trained value does (its rule
// passes the gradient back in the input's type).
// CHECK-LABEL: func.func @data_paths
// CHECK: %[[W:.*]] = tofu.param "w"
// CHECK-NOT: grad_of = "cast_x"
// CHECK-NOT: grad_of = "odd"
// CHECK: tofu.compute "CastLike"({{.*}}) {{{.*}}grad_of = "cast_w"{{.*}}} : (tensor<2x2xf64>, tensor<2x2xf32>) -> tensor<2x2xf32>
// CHECK-NOT: grad_of = "cast_x"
// CHECK-NOT: grad_of = "odd"
// CHECK: tofu.update %[[W]], %{{.*}} grad
// CHECK-NOT: tofu.update
func.func @data_paths() {
  %x = tofu.input "x" "features" : tensor<2x2xf32>
  %w = tofu.param "w" : tensor<2x2xf32>
  %buf = tofu.param "buf" {trainable = false} : tensor<2x2xf64>
  %xd = tofu.compute "CastLike"(%x, %buf) {attrs = {}, name = "cast_x"} : (tensor<2x2xf32>, tensor<2x2xf64>) -> tensor<2x2xf64>
  %s = tofu.compute "SigmoidGrad"(%xd, %xd) {attrs = {}, name = "odd"} : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
  %wd = tofu.compute "CastLike"(%w, %buf) {attrs = {}, name = "cast_w"} : (tensor<2x2xf32>, tensor<2x2xf64>) -> tensor<2x2xf64>
  %y = tofu.compute "Mul"(%s, %wd) {attrs = {}, name = "mul"} : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
  %l = tofu.compute "ReduceSum"(%y) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<2x2xf64>) -> tensor<f64>
  tofu.output "loss" %l : tensor<f64>
  return
}

// -----

// Running statistics the model lists as frozen (buffers: tools/tofu_export.py
// lists them) still follow a training-mode BatchNormalization, as in
// PyTorch; scale and bias train.
// CHECK-LABEL: func.func @frozen_statistics
// CHECK-DAG: %[[MEAN:.*]] = tofu.param "bn.running_mean"
// CHECK-DAG: %[[VAR:.*]] = tofu.param "bn.running_var"
// CHECK: %[[BN:.*]]:3 = tofu.compute "BatchNormalization"
// CHECK-DAG: tofu.update %{{.*}}, %{{.*}} grad %{{.*}} : tensor<3xf32>
// CHECK-DAG: tofu.update %{{.*}}, %{{.*}} grad %{{.*}} : tensor<3xf32>
// CHECK-DAG: tofu.update %[[MEAN]], %[[BN]]#1 : tensor<3xf32>
// CHECK-DAG: tofu.update %[[VAR]], %[[BN]]#2 : tensor<3xf32>
// CHECK: return
func.func @frozen_statistics() {
  %x = tofu.input "x" "features" : tensor<2x3x4x4xf32>
  %s = tofu.param "bn.weight" : tensor<3xf32>
  %b = tofu.param "bn.bias" : tensor<3xf32>
  %m = tofu.param "bn.running_mean" {trainable = false} : tensor<3xf32>
  %v = tofu.param "bn.running_var" {trainable = false} : tensor<3xf32>
  %y:3 = tofu.compute "BatchNormalization"(%x, %s, %b, %m, %v) {attrs = {momentum = 8.000000e-01 : f32, training_mode = 1 : i64}, name = "bn"} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  %r = tofu.compute "ReduceSum"(%y#0) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<2x3x4x4xf32>) -> tensor<f32>
  tofu.output "loss" %r : tensor<f32>
  return
}
