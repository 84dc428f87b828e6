// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-analyze-strategies, tofu-partition{devices=4 partitioner=allrow-greedy}))' | FileCheck %s
// allrow-greedy: every tensor cut on dimension 0 in 4 parts (scalars
// replicated); each op takes its cheapest strategy under those tilings.

// CHECK-LABEL: func.func @main
// CHECK-SAME: tofu.grid = array<i64: 4>
func.func @main() {
  // CHECK: tofu.input "x" "features" {tofu.tilings = [#tofu.tiling<[(0, 4)]>]}
  %x = tofu.input "x" "features" : tensor<8x4xf32>
  %y = tofu.input "y" "labels" {classes = 3 : i64} : tensor<8xi64>
  // CHECK: tofu.param "w" {tofu.tilings = [#tofu.tiling<[(0, 4)]>]}
  %w = tofu.param "w" : tensor<4x3xf32>
  // Rows of the output need rows of A only (owned) and all of B (fetched):
  // cheaper than splitting columns, which would also gather A's rows.
  // CHECK: tofu.compute "MatMul"
  // CHECK-SAME: tofu.plan = [#tofu.strategy<split 0 dim 0>]
  // CHECK-SAME: tofu.tilings = [#tofu.tiling<[(0, 4)]>]
  %h = tofu.compute "MatMul"(%x, %w) {attrs = {}, name = "mm"} : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  // The loss sums over the batch: each device reduces its rows, then the
  // partial sums are all-reduced.
  // CHECK: tofu.compute "SoftmaxCrossEntropyLoss"
  // CHECK-SAME: tofu.plan = [#tofu.strategy<reduce "n" 0>]
  // CHECK-SAME: tofu.tilings = [#tofu.tiling<[]>]
  %l = tofu.compute "SoftmaxCrossEntropyLoss"(%h, %y) {attrs = {}, name = "ce"} : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<f32>
  return
}
