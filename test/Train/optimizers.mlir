// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{optimizer=adam lr=0.01 beta1=0.8 beta2=0.99 epsilon=1e-7 weight-decay=0.5}))' | FileCheck %s --check-prefix=ADAM
// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{optimizer=momentum momentum=0.7 momentum-beta=0.5 nesterov=true}))' | FileCheck %s --check-prefix=MOMENTUM
// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{optimizer=adagrad lr-decay=0.25}))' | FileCheck %s --check-prefix=ADAGRAD
// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{weight-decay=0.5}))' | FileCheck %s --check-prefix=SGD
// RUN: not tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{optimizer=rmsprop}))' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// Each optimizer is the ONNX ai.onnx.preview.training op of its name, one
// per parameter; its state are tofu.param ops with state_of (zeros; R = lr;
// T = 0, advanced by StepCount), each updated without a gradient.

func.func @main() {
  %x = tofu.input "x" "features" : tensor<8x4xf32>
  %w = tofu.param "w" : tensor<8x4xf32>
  %s = tofu.compute "Mul"(%x, %w) {attrs = {}, name = "mul"} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %l = tofu.compute "ReduceSum"(%s) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<8x4xf32>) -> tensor<f32>
  tofu.output "loss" %l : tensor<f32>
  return
}
// ADAM: %[[W:.*]] = tofu.param "w" : tensor<8x4xf32>
// ADAM-NEXT: %[[R:.*]] = tofu.param "w.lr" {state_of = "w", value = dense<0.00999999977> : tensor<f32>} : tensor<f32>
// ADAM-NEXT: %[[T:.*]] = tofu.param "w.step" {state_of = "w", value = dense<0> : tensor<i64>} : tensor<i64>
// ADAM-NEXT: %[[V:.*]] = tofu.param "w.adam_v" {state_of = "w", value = dense<0.000000e+00> : tensor<8x4xf32>} : tensor<8x4xf32>
// ADAM-NEXT: %[[H:.*]] = tofu.param "w.adam_h" {state_of = "w", value = dense<0.000000e+00> : tensor<8x4xf32>} : tensor<8x4xf32>
// ADAM: %[[DW:.*]] = tofu.compute "Mul"{{.*}}grad_for = "w"
// ADAM: %[[NEW:.*]]:3 = tofu.compute "Adam"(%[[R]], %[[T]], %[[W]], %[[DW]], %[[V]], %[[H]]) {attrs = {alpha = 8.000000e-01 : f64, beta = 0.98999{{[0-9]*}} : f64, epsilon = 9.9999999999999995E-8 : f64, norm_coefficient = 5.000000e-01 : f64}, name = "w.adam_update"}
// ADAM: %[[T1:.*]] = tofu.compute "StepCount"(%[[T]])
// ADAM: tofu.update %[[W]], %[[NEW]]#0 grad %[[DW]]
// ADAM: tofu.update %[[V]], %[[NEW]]#1 :
// ADAM: tofu.update %[[H]], %[[NEW]]#2 :
// ADAM: tofu.update %[[T]], %[[T1]] : tensor<i64>

// MOMENTUM: %[[V:.*]] = tofu.param "w.momentum" {state_of = "w"
// MOMENTUM: %[[NEW:.*]]:2 = tofu.compute "Momentum"({{.*}}, %[[V]]) {attrs = {alpha = 0.6999{{[0-9]*}} : f64, beta = 5.000000e-01 : f64, mode = "nesterov", norm_coefficient = 0.000000e+00 : f64}
// MOMENTUM: tofu.update %[[V]], %[[NEW]]#1 :

// ADAGRAD: %[[H:.*]] = tofu.param "w.adagrad_h" {state_of = "w"
// ADAGRAD: %[[NEW:.*]]:2 = tofu.compute "Adagrad"({{.*}}, %[[H]]) {attrs = {decay_factor = 2.500000e-01 : f64, epsilon = 9.9999999999999995E-7 : f64, norm_coefficient = 0.000000e+00 : f64}
// ADAGRAD: tofu.update %[[H]], %[[NEW]]#1 :

// SGD-NOT: state_of
// SGD: tofu.compute "SGDUpdate"({{.*}}) {attrs = {lr = 1.000000e-01 : f64, norm_coefficient = 5.000000e-01 : f64}

// UNKNOWN: unknown optimizer 'rmsprop' (sgd, momentum, adam or adagrad)
