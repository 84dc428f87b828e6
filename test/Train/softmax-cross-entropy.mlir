// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{loss=softmax-cross-entropy}))' | FileCheck %s
// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{loss=softmax-cross-entropy:logits}))' | FileCheck %s
// RUN: not tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{loss=softmax-cross-entropy:hidden}))' 2>&1 | FileCheck %s --check-prefix=BADNAME
// --loss=softmax-cross-entropy adds an i64 labels input (named "labels",
// or "labels.1" when the model has an input of that name) shaped like the
// logits' batch dim, with the logits' last dim as classes and PyTorch's
// ignore_index -100, and the loss, which says what it reads.

func.func @main() {
  %x = tofu.input "labels" "features" : tensor<8x4xf32>
  %w = tofu.param "w" : tensor<3x4xf32>
  %h = tofu.compute "Gemm"(%x, %w) {attrs = {transB = 1 : i64}, name = "fc"} : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  tofu.output "logits" %h : tensor<8x3xf32>
  return
}
// CHECK: tofu.input "labels" "features"
// CHECK-NEXT: %[[Y:.*]] = tofu.input "labels.1" "labels" {classes = 3 : i64, ignore_index = -100 : i64, labels_for = "labels"} : tensor<8xi64>
// CHECK: %[[H:.*]] = tofu.compute "Gemm"
// CHECK: %[[L:.*]] = tofu.compute "SoftmaxCrossEntropyLoss"(%[[H]], %[[Y]]) {{.*}}name = "softmax_cross_entropy"
// CHECK: tofu.loss %[[L]] {description = "softmax cross-entropy (mean, ignore_index -100) of the model output 'logits', 3 classes, against the added labels input 'labels.1' [8]"} : tensor<f32>
// CHECK: "Gemm"({{.*}}grad_for = "w", grad_of = "fc"
// CHECK: tofu.update
// BADNAME: --loss=softmax-cross-entropy:hidden: 'hidden' is not a model output (outputs: 'logits' (tensor<8x3xf32>))
