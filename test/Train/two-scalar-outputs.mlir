// RUN: not tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step))' 2>&1 | FileCheck %s
// CHECK: a training step needs exactly one scalar loss, found 2 scalar float model outputs; choose the loss with --loss=<output name> or add one with --loss=softmax-cross-entropy[:<logits output>] (outputs: 'l1' (tensor<f32>), 'l2' (tensor<f32>))
func.func @main() {
  %x = tofu.input "x" "features" : tensor<8x4xf32>
  %l = tofu.compute "ReduceSum"(%x) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<8x4xf32>) -> tensor<f32>
  %a = tofu.compute "ReduceMean"(%x) {attrs = {keepdims = 0 : i64}, name = "mean"} : (tensor<8x4xf32>) -> tensor<f32>
  tofu.output "l1" %l : tensor<f32>
  tofu.output "l2" %a : tensor<f32>
  return
}
