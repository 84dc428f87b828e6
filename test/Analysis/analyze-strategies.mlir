// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-analyze-strategies))' | FileCheck %s
// Interval analysis finds, for a matrix product, a split of each output
// dimension and a partition-n-reduce on k; with a bias (Gemm with C) the
// reduction is not splittable, since partial sums would add C twice.

func.func @main() {
  %a = tofu.input "a" "features" : tensor<8x4xf32>
  %b = tofu.param "b" : tensor<4x6xf32>
  %c = tofu.param "c" : tensor<6xf32>
  // Symbols: X0 = m, X1 = n, then the reduction extent K. Worker 0 of a
  // split on m reads rows [0, X0/2) and columns [0, K) of A, and all of B
  // ([0, K) x [0, X1)); worker 1 reads rows [X0/2, X0) of A.
  // CHECK: tofu.compute "MatMul"
  // CHECK-SAME: tofu.strategies = [#tofu.strategy<split 0 dim 0, regions [
  // CHECK-SAME: {{\[\[}}#tofu.interval<[0.0, 0.0, 0.0] + 0.0, [0.5, 0.0, 0.0] + 0.0>, #tofu.interval<[0.0, 0.0, 0.0] + 0.0, [0.0, 0.0, 1.0] + 0.0>],
  // CHECK-SAME: [#tofu.interval<[0.0, 0.0, 0.0] + 0.0, [0.0, 0.0, 1.0] + 0.0>, #tofu.interval<[0.0, 0.0, 0.0] + 0.0, [0.0, 1.0, 0.0] + 0.0>]],
  // CHECK-SAME: {{\[\[}}#tofu.interval<[0.5, 0.0, 0.0] + 0.0, [1.0, 0.0, 0.0] + 0.0>,
  // CHECK-SAME: #tofu.strategy<split 0 dim 1, regions
  // Splitting k: worker 0 reads columns [0, K/2) of A and rows [0, K/2) of B.
  // CHECK-SAME: #tofu.strategy<reduce "k" 0, regions {{\[\[\[}}#tofu.interval<[0.0, 0.0, 0.0] + 0.0, [1.0, 0.0, 0.0] + 0.0>, #tofu.interval<[0.0, 0.0, 0.0] + 0.0, [0.0, 0.0, 0.5] + 0.0>]
  %m = tofu.compute "MatMul"(%a, %b) {attrs = {}, name = "mm"} : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
  // CHECK: tofu.compute "Gemm"
  // CHECK-SAME: tofu.strategies = [#tofu.strategy<split 0 dim 0, regions
  // CHECK-SAME: #tofu.strategy<split 0 dim 1, regions
  // CHECK-NOT: reduce
  // CHECK-SAME: }
  %g = tofu.compute "Gemm"(%a, %b, %c) {attrs = {}, name = "gemm"} : (tensor<8x4xf32>, tensor<4x6xf32>, tensor<6xf32>) -> tensor<8x6xf32>
  // A scalar loss has no output dimension; its batch and class sums are
  // partition-n-reduce strategies.
  // CHECK: tofu.compute "SoftmaxCrossEntropyLoss"
  // CHECK-SAME: tofu.strategies = [#tofu.strategy<reduce "n" 0
  %y = tofu.input "y" "labels" {classes = 6 : i64} : tensor<8xi64>
  %l = tofu.compute "SoftmaxCrossEntropyLoss"(%m, %y) {attrs = {}, name = "ce"} : (tensor<8x6xf32>, tensor<8xi64>) -> tensor<f32>
  return
}
