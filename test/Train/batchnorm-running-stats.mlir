// RUN: tofu-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(func.func(tofu-build-training-step))' | FileCheck %s
// A training-mode BatchNormalization's new running statistics (outputs 1
// and 2) become the new values of its input_mean / input_var parameters at
// the end of the step: a tofu.update without gradient each, so the results
// are kept (not dropped as unused optional outputs). Scale and bias train as
// usual; the statistics get no gradient.

// CHECK-LABEL: func.func @training
// CHECK-DAG: %[[MEAN:.*]] = tofu.param "bn.running_mean"
// CHECK-DAG: %[[VAR:.*]] = tofu.param "bn.running_var"
// CHECK: %[[BN:.*]]:3 = tofu.compute "BatchNormalization"({{.*}}, %[[MEAN]], %[[VAR]]) {{.*}}training_mode = 1{{.*}}name = "bn"
// CHECK-DAG: tofu.update %{{.*}}, %{{.*}} grad %{{.*}} : tensor<3xf32>
// CHECK-DAG: tofu.update %{{.*}}, %{{.*}} grad %{{.*}} : tensor<3xf32>
// CHECK-DAG: tofu.update %[[MEAN]], %[[BN]]#1 : tensor<3xf32>
// CHECK-DAG: tofu.update %[[VAR]], %[[BN]]#2 : tensor<3xf32>
// CHECK-NOT: tofu.update
// CHECK: return
func.func @training() {
  %x = tofu.input "x" "features" : tensor<2x3x4x4xf32>
  %s = tofu.param "bn.weight" : tensor<3xf32>
  %b = tofu.param "bn.bias" : tensor<3xf32>
  %m = tofu.param "bn.running_mean" : tensor<3xf32>
  %v = tofu.param "bn.running_var" : tensor<3xf32>
  %y:3 = tofu.compute "BatchNormalization"(%x, %s, %b, %m, %v) {attrs = {momentum = 8.000000e-01 : f32, training_mode = 1 : i64}, name = "bn"} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  %r = tofu.compute "ReduceSum"(%y#0) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<2x3x4x4xf32>) -> tensor<f32>
  tofu.output "loss" %r : tensor<f32>
  return
}

// -----

// Inference mode: the statistics are inputs only; nothing updates them and
// the unused running outputs are dropped.
// CHECK-LABEL: func.func @inference
// CHECK-DAG: %[[MEAN:.*]] = tofu.param "bn.running_mean"
// CHECK-DAG: %[[VAR:.*]] = tofu.param "bn.running_var"
// CHECK: tofu.compute "BatchNormalization"({{.*}}) {{.*}}name = "bn"{{.*}} -> tensor<2x3x4x4xf32>
// CHECK-NOT: tofu.update %[[MEAN]],
// CHECK-NOT: tofu.update %[[VAR]],
// CHECK: return
func.func @inference() {
  %x = tofu.input "x" "features" : tensor<2x3x4x4xf32>
  %s = tofu.param "bn.weight" : tensor<3xf32>
  %b = tofu.param "bn.bias" : tensor<3xf32>
  %m = tofu.param "bn.running_mean" : tensor<3xf32>
  %v = tofu.param "bn.running_var" : tensor<3xf32>
  %y:3 = tofu.compute "BatchNormalization"(%x, %s, %b, %m, %v) {attrs = {training_mode = 0 : i64}, name = "bn"} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  %r = tofu.compute "ReduceSum"(%y#0) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<2x3x4x4xf32>) -> tensor<f32>
  tofu.output "loss" %r : tensor<f32>
  return
}

// -----

// Two training-mode BatchNormalizations sharing one running mean would both
// write it: an error.
func.func @shared() {
  %x = tofu.input "x" "features" : tensor<2x3x4x4xf32>
  %s = tofu.param "bn.weight" : tensor<3xf32>
  %b = tofu.param "bn.bias" : tensor<3xf32>
  %m = tofu.param "bn.running_mean" : tensor<3xf32>
  %v = tofu.param "bn.running_var" : tensor<3xf32>
  %v2 = tofu.param "bn2.running_var" : tensor<3xf32>
  %y:3 = tofu.compute "BatchNormalization"(%x, %s, %b, %m, %v) {attrs = {training_mode = 1 : i64}, name = "bn"} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  // expected-error @+1 {{BatchNormalization 'bn2' (training mode) updates its running statistic 'bn.running_mean', which BatchNormalization 'bn' updates too}}
  %z:3 = tofu.compute "BatchNormalization"(%y#0, %s, %b, %m, %v2) {attrs = {training_mode = 1 : i64}, name = "bn2"} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  %r = tofu.compute "ReduceSum"(%z#0) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<2x3x4x4xf32>) -> tensor<f32>
  tofu.output "loss" %r : tensor<f32>
  return
}
