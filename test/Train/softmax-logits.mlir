// RUN: tofu-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tofu-build-training-step{loss=softmax-cross-entropy:probs}))' -verify-diagnostics | FileCheck %s
// --loss=softmax-cross-entropy on a model whose output is already
// normalized. A Softmax's output is probabilities: the loss would apply a
// second softmax to them (a 1000-class model's loss stays near
// ln(999 + e) and nothing learns), so the Softmax's input is the logits and
// the Softmax, which nothing else needs, is gone. A LogSoftmax's output is
// read as it is (softmax(log_softmax(x)) = softmax(x)). Either one's axis
// is the class axis: moved to dim 1 when it is not, with labels [N, *D].

// CHECK-LABEL: func.func @softmax
// CHECK: %[[H:.*]] = tofu.compute "Gemm"
// CHECK-NOT: "Softmax"
// CHECK: %[[L:.*]] = tofu.compute "SoftmaxCrossEntropyLoss"(%[[H]], %{{.*}})
// CHECK: tofu.loss %[[L]] {description = "softmax cross-entropy (mean, ignore_index -100) of the model output 'probs', read before its Softmax 'sm' (the loss takes the Softmax's input as the logits instead of applying a second softmax), 3 classes, against the added labels input 'labels' [8]"}
// CHECK-NOT: "SoftmaxGrad"
func.func @softmax() {
  %x = tofu.input "x" "features" : tensor<8x4xf32>
  %w = tofu.param "w" : tensor<3x4xf32>
  %h = tofu.compute "Gemm"(%x, %w) {attrs = {transB = 1 : i64}, name = "fc"} : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  %p = tofu.compute "Softmax"(%h) {attrs = {axis = 1 : i64}, name = "sm"} : (tensor<8x3xf32>) -> tensor<8x3xf32>
  tofu.output "probs" %p : tensor<8x3xf32>
  return
}

// -----

// CHECK-LABEL: func.func @log_softmax
// CHECK: %[[P:.*]] = tofu.compute "LogSoftmax"
// CHECK: %[[L:.*]] = tofu.compute "SoftmaxCrossEntropyLoss"(%[[P]], %{{.*}})
// CHECK: tofu.loss %[[L]] {description = "softmax cross-entropy (mean, ignore_index -100) of the model output 'probs', the log-probabilities of LogSoftmax 'lsm' (read as they are: softmax(log_softmax(x)) = softmax(x)), 3 classes, against the added labels input 'labels' [8]"}
// CHECK: "LogSoftmaxGrad"
func.func @log_softmax() {
  %x = tofu.input "x" "features" : tensor<8x4xf32>
  %w = tofu.param "w" : tensor<3x4xf32>
  %h = tofu.compute "Gemm"(%x, %w) {attrs = {transB = 1 : i64}, name = "fc"} : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  %p = tofu.compute "LogSoftmax"(%h) {attrs = {axis = -1 : i64}, name = "lsm"} : (tensor<8x3xf32>) -> tensor<8x3xf32>
  tofu.output "probs" %p : tensor<8x3xf32>
  return
}

// -----

// A language model's [N, T, V] probabilities, normalized over the last
// axis: the logits move the vocabulary to dim 1 and the labels are [N, T].
// CHECK-LABEL: func.func @sequence
// CHECK: %[[Y:.*]] = tofu.input "labels" "labels" {classes = 5 : i64, ignore_index = -100 : i64, labels_for = "x"} : tensor<2x3xi64>
// CHECK: %[[H:.*]] = tofu.compute "MatMul"
// CHECK: %[[T:.*]] = tofu.compute "Transpose"(%[[H]]) {attrs = {perm = array<i64: 0, 2, 1>}, name = "softmax_cross_entropy.classes_to_dim1"} : (tensor<2x3x5xf32>) -> tensor<2x5x3xf32>
// CHECK: %[[L:.*]] = tofu.compute "SoftmaxCrossEntropyLoss"(%[[T]], %[[Y]])
// CHECK: tofu.loss %[[L]] {description = "{{.*}}read before its Softmax 'sm' {{.*}}, classes along its axis 2, 5 classes, against the added labels input 'labels' [2x3]"}
func.func @sequence() {
  %x = tofu.input "x" "features" : tensor<2x3x4xf32>
  %w = tofu.param "w" : tensor<4x5xf32>
  %h = tofu.compute "MatMul"(%x, %w) {attrs = {}, name = "proj"} : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %p = tofu.compute "Softmax"(%h) {attrs = {axis = -1 : i64}, name = "sm"} : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  tofu.output "probs" %p : tensor<2x3x5xf32>
  return
}

// -----

// Scores [N, C, H, W] (a segmentation) without a Softmax: classes on dim 1
// as ONNX's SoftmaxCrossEntropyLoss and PyTorch's cross_entropy take them.
// CHECK-LABEL: func.func @spatial
// CHECK: %[[Y:.*]] = tofu.input "labels" "labels" {classes = 3 : i64, ignore_index = -100 : i64, labels_for = "x"} : tensor<2x4x4xi64>
// CHECK: %[[L:.*]] = tofu.compute "SoftmaxCrossEntropyLoss"(%{{.*}}, %[[Y]])
func.func @spatial() {
  %x = tofu.input "x" "features" : tensor<2x3x4x4xf32>
  %w = tofu.param "w" : tensor<2x3x4x4xf32>
  %h = tofu.compute "Mul"(%x, %w) {attrs = {}, name = "scale"} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  tofu.output "probs" %h : tensor<2x3x4x4xf32>
  return
}

// -----

// A Softmax over the batch axis has no class axis to take.
func.func @batch_axis() {
  %x = tofu.input "x" "features" : tensor<8x3xf32>
  %w = tofu.param "w" : tensor<8x3xf32>
  %h = tofu.compute "Mul"(%x, %w) {attrs = {}, name = "scale"} : (tensor<8x3xf32>, tensor<8x3xf32>) -> tensor<8x3xf32>
  // expected-error @+1 {{--loss=softmax-cross-entropy: the logits 'probs' come from Softmax 'sm' over axis 0 of 'tensor<8x3xf32>', which is not a class axis (the batch is dim 0); compute the loss in the model instead}}
  %p = tofu.compute "Softmax"(%h) {attrs = {axis = 0 : i64}, name = "sm"} : (tensor<8x3xf32>) -> tensor<8x3xf32>
  tofu.output "probs" %p : tensor<8x3xf32>
  return
}
