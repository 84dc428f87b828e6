// RUN: tofu-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tofu-build-training-step{loss=softmax-cross-entropy}))' -verify-diagnostics | FileCheck %s
// --loss=softmax-cross-entropy (unnamed) on logits [N, C, 1, 1]: a
// classifier whose head is a 1x1 convolution or a global pool (SqueezeNet,
// DenseNet-121 of the ONNX model zoo). The output is chosen as the logits,
// its unit dims are squeezed (Flatten to [N, C]) and the labels are [N];
// a Softmax over axis 1 before it is read through as for [N, C].

// CHECK-LABEL: func.func @conv_head
// CHECK: %[[Y:.*]] = tofu.input "labels" "labels" {classes = 5 : i64, ignore_index = -100 : i64, labels_for = "x"} : tensor<2xi64>
// CHECK: %[[H:.*]] = tofu.compute "Mul"
// CHECK: %[[F:.*]] = tofu.compute "Flatten"(%[[H]]) {attrs = {axis = 1 : i64}, name = "softmax_cross_entropy.squeeze_unit_dims"} : (tensor<2x5x1x1xf32>) -> tensor<2x5xf32>
// CHECK: %[[L:.*]] = tofu.compute "SoftmaxCrossEntropyLoss"(%[[F]], %[[Y]])
// CHECK: tofu.loss %[[L]] {description = "softmax cross-entropy (mean, ignore_index -100) of the model output 'fc', its unit dims squeezed ([2x5x1x1] read as [N, C]), 5 classes, against the added labels input 'labels' [2]"}
func.func @conv_head() {
  %x = tofu.input "x" "features" : tensor<2x5x1x1xf32>
  %w = tofu.param "w" : tensor<2x5x1x1xf32>
  %h = tofu.compute "Mul"(%x, %w) {attrs = {}, name = "head"} : (tensor<2x5x1x1xf32>, tensor<2x5x1x1xf32>) -> tensor<2x5x1x1xf32>
  tofu.output "fc" %h : tensor<2x5x1x1xf32>
  return
}

// -----

// CHECK-LABEL: func.func @softmax_head
// CHECK: %[[Y:.*]] = tofu.input "labels" "labels" {{.*}} : tensor<3xi64>
// CHECK: %[[H:.*]] = tofu.compute "Mul"
// CHECK-NOT: "Softmax"
// CHECK: %[[F:.*]] = tofu.compute "Flatten"(%[[H]]) {{.*}} : (tensor<3x4x1x1xf32>) -> tensor<3x4xf32>
// CHECK: %[[L:.*]] = tofu.compute "SoftmaxCrossEntropyLoss"(%[[F]], %[[Y]])
// CHECK: tofu.loss %[[L]] {description = "{{.*}}read before its Softmax 'sm' {{.*}}, its unit dims squeezed ([3x4x1x1] read as [N, C]), 4 classes, against the added labels input 'labels' [3]"}
func.func @softmax_head() {
  %x = tofu.input "x" "features" : tensor<3x4x1x1xf32>
  %w = tofu.param "w" : tensor<3x4x1x1xf32>
  %h = tofu.compute "Mul"(%x, %w) {attrs = {}, name = "head"} : (tensor<3x4x1x1xf32>, tensor<3x4x1x1xf32>) -> tensor<3x4x1x1xf32>
  %p = tofu.compute "Softmax"(%h) {attrs = {axis = 1 : i64}, name = "sm"} : (tensor<3x4x1x1xf32>) -> tensor<3x4x1x1xf32>
  tofu.output "probs" %p : tensor<3x4x1x1xf32>
  return
}

// -----

// Spatial dims that are not all 1 are not chosen unnamed (a segmentation
// must be named, as before).
// expected-error@+1 {{--loss=softmax-cross-entropy needs the logits: the model has 0 float outputs of shape [N, C] or [N, C, 1, ...]; name one with --loss=softmax-cross-entropy:<output>}}
func.func @segmentation() {
  %x = tofu.input "x" "features" : tensor<2x3x2x1xf32>
  %w = tofu.param "w" : tensor<2x3x2x1xf32>
  %h = tofu.compute "Mul"(%x, %w) {attrs = {}, name = "head"} : (tensor<2x3x2x1xf32>, tensor<2x3x2x1xf32>) -> tensor<2x3x2x1xf32>
  tofu.output "seg" %h : tensor<2x3x2x1xf32>
  return
}
