// RUN: not tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step))' 2>&1 | FileCheck %s
// CHECK: a training step needs exactly one scalar loss, found 0
func.func @main() {
  %x = tofu.input "x" "features" : tensor<8x4xf32>
  %r = tofu.compute "Relu"(%x) {attrs = {}, name = "relu"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}
