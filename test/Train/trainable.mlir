// RUN: tofu-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tofu-build-training-step))' 2>&1 | FileCheck %s
// RUN: tofu-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tofu-build-training-step{trainable=w,b}))' 2>&1 | FileCheck %s --check-prefix=ONLY
// RUN: tofu-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tofu-build-training-step{freeze=b}))' 2>&1 | FileCheck %s --check-prefix=FREEZE
// RUN: not tofu-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tofu-build-training-step{trainable=mask,w}))' 2>&1 | FileCheck %s --check-prefix=NAMED
// RUN: not tofu-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tofu-build-training-step{trainable=nothing}))' 2>&1 | FileCheck %s --check-prefix=NOMATCH
// Which parameters train: the model's marks (tofu.param {trainable}, from
// its metadata_props lists), never one with a non-finite value (a -inf
// causal mask: one SGD step would make it NaN), --trainable instead of the
// model's marks, --freeze over everything.

// Default: "w" trains; "pe" (the model marks it trainable = false) and
// "mask" (-inf) do not; a warning says why the mask stays fixed. "b" is
// marked trainable = true.
// CHECK: warning: parameter 'mask' holds -inf, so it is not trained (a mask or a constant buffer; --freeze mask says so)
// CHECK-LABEL: func.func @buffers
// CHECK-DAG: %[[W:.*]] = tofu.param "w"
// CHECK-DAG: %[[B:.*]] = tofu.param "b"
// CHECK-DAG: %[[PE:.*]] = tofu.param "pe"
// CHECK-DAG: %[[MASK:.*]] = tofu.param "mask"
// CHECK-NOT: grad_for = "pe"
// CHECK-NOT: grad_for = "mask"
// CHECK-NOT: tofu.update
// CHECK: tofu.update %[[W]], %{{.*}} grad
// CHECK-NOT: tofu.update
// CHECK: tofu.update %[[B]], %{{.*}} grad
// CHECK-NOT: tofu.update
// CHECK: return

// --trainable=w,b replaces the model's marks: "pe" (marked false) is still
// fixed since it is not named; only w and b train.
// ONLY-LABEL: func.func @buffers
// ONLY: %[[W:.*]] = tofu.param "w"
// ONLY: %[[B:.*]] = tofu.param "b"
// ONLY-NOT: tofu.update
// ONLY: tofu.update %[[W]], %{{.*}} grad
// ONLY-NOT: tofu.update
// ONLY: tofu.update %[[B]], %{{.*}} grad
// ONLY-NOT: tofu.update

// --freeze=b wins over the model's trainable = true.
// FREEZE-LABEL: func.func @buffers
// FREEZE: %[[W:.*]] = tofu.param "w"
// FREEZE-NOT: tofu.update
// FREEZE: tofu.update %[[W]], %{{.*}} grad
// FREEZE-NOT: tofu.update

// Naming the -inf mask exactly in --trainable is an error.
// NAMED: error: parameter 'mask' holds -inf and cannot be trained (one step would make it NaN), but --trainable names it; keep it fixed with --freeze mask

// NOMATCH: error: --trainable: 'nothing' matches no parameter (parameters: 'w', 'b', 'pe', 'mask')
func.func @buffers() {
  %x = tofu.input "x" "features" : tensor<4x4xf32>
  %w = tofu.param "w" {value = dense<5.000000e-01> : tensor<4x4xf32>} : tensor<4x4xf32>
  %b = tofu.param "b" {trainable = true, value = dense<1.000000e-01> : tensor<4xf32>} : tensor<4xf32>
  %pe = tofu.param "pe" {trainable = false, value = dense<2.500000e-01> : tensor<4x4xf32>} : tensor<4x4xf32>
  %mask = tofu.param "mask" {value = dense<[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>} : tensor<4x4xf32>
  %h = tofu.compute "Add"(%x, %pe) {attrs = {}, name = "add_pe"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = tofu.compute "Gemm"(%h, %w, %b) {attrs = {}, name = "scores"} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  %m = tofu.compute "Add"(%s, %mask) {attrs = {}, name = "masked"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %p = tofu.compute "Softmax"(%m) {attrs = {axis = 1 : i64}, name = "softmax"} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %l = tofu.compute "ReduceSum"(%p) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<4x4xf32>) -> tensor<f32>
  tofu.output "loss" %l : tensor<f32>
  return
}
