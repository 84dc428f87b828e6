// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{freeze=c}))' | FileCheck %s
// RUN: not tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step))' 2>&1 | FileCheck %s --check-prefix=TRAINED
// --freeze drops the gradient rule of the frozen input: Gemm's C of shape
// [1, N] has no supported gradient, which matters only when C trains.

// CHECK: %[[W:.*]] = tofu.param "w"
// CHECK-NOT: grad_for = "c"
// CHECK: tofu.update %[[W]], %{{.*}} grad
// CHECK-NOT: tofu.update
// TRAINED: error: cannot differentiate 'fc' (Gemm): op Gemm: gradient of input C is not supported: Gemm: gradient of C is supported only for a bias [N] or a full [M, N] C
func.func @main() {
  %x = tofu.input "x" "features" : tensor<3x4xf32>
  %w = tofu.param "w" : tensor<4x2xf32>
  %c = tofu.param "c" : tensor<1x2xf32>
  %y = tofu.compute "Gemm"(%x, %w, %c) {attrs = {}, name = "fc"} : (tensor<3x4xf32>, tensor<4x2xf32>, tensor<1x2xf32>) -> tensor<3x2xf32>
  %l = tofu.compute "ReduceSum"(%y) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<3x2xf32>) -> tensor<f32>
  tofu.output "loss" %l : tensor<f32>
  return
}
