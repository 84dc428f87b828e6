// RUN: tofu-opt %s | tofu-opt | FileCheck %s
// Attributes and ops print and parse back to the same IR.

// CHECK-LABEL: func.func @attrs
// CHECK-SAME: tofu.grid = array<i64: 2, 2>
func.func @attrs() attributes {tofu.grid = array<i64: 2, 2>} {
  // CHECK: tofu.param "w" {tofu.tilings = [#tofu.tiling<[(0, 2), (1, 2)]>]} : tensor<8x4xf32>
  %w = tofu.param "w" {tofu.tilings = [#tofu.tiling<[(0, 2), (1, 2)]>]} : tensor<8x4xf32>
  // CHECK: tofu.input "x" "features" {tofu.tilings = [#tofu.tiling<[(0, 2), (0, 2)]>]} : tensor<16x4xf32>
  %x = tofu.input "x" "features" {tofu.tilings = [#tofu.tiling<[(0, 2), (0, 2)]>]} : tensor<16x4xf32>
  // CHECK: tofu.input "y" "labels" {classes = 8 : i64, labels_for = "x", tofu.tilings = [#tofu.tiling<[]>]} : tensor<16xi64>
  %y = tofu.input "y" "labels" {classes = 8 : i64, labels_for = "x", tofu.tilings = [#tofu.tiling<[]>]} : tensor<16xi64>
  // CHECK: tofu.compute "Relu"(%{{.*}}) {attrs = {}, name = "r",
  // CHECK-SAME: tofu.plan = [#tofu.strategy<split 0 dim 1>, #tofu.strategy<reduce "k" 0>]
  // CHECK-SAME: tofu.strategies = [#tofu.strategy<split 0 dim 0, regions {{\[\[\[}}#tofu.interval<[0.5, 0.0] + 0.0, [1.0, 0.0] + 2.0>
  %r = tofu.compute "Relu"(%x) {attrs = {}, name = "r",
      tofu.plan = [#tofu.strategy<split 0 dim 1>, #tofu.strategy<reduce "k" 0>],
      tofu.strategies = [#tofu.strategy<split 0 dim 0, regions [[[#tofu.interval<[0.5, 0.0] + 0.0, [1.0, 0.0] + 2.0>, #tofu.interval<[0.0, 0.0] + 0.0, [0.0, 1.0] + 0.0>]]]>]}
      : (tensor<16x4xf32>) -> tensor<16x4xf32>
  return
}

// The tags of an unrolled recurrent cell round-trip.
// CHECK-LABEL: func.func @recurrent_tags
// CHECK: tofu.direction = 1 : i64, tofu.recurrence = "lstm0", tofu.timestep = 3 : i64
func.func @recurrent_tags() {
  %in = tofu.input "x" "features" : tensor<8xf32>
  %r = tofu.compute "Tanh"(%in) {attrs = {}, name = "r", tofu.timestep = 3 : i64, tofu.direction = 1 : i64, tofu.recurrence = "lstm0"} : (tensor<8xf32>) -> tensor<8xf32>
  return
}
