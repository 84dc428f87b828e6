// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-analyze-strategies, tofu-coarsen))' | FileCheck %s

// Without a shared weight, tofu.timestep alone merges the cells: the j-th op
// of every timestep, its operands and its results.
// CHECK-LABEL: func.func @timesteps
func.func @timesteps() {
  %x = tofu.input "x" "features" : tensor<8x4xf32>
  %w0 = tofu.param "w0" : tensor<4x4xf32>
  %w1 = tofu.param "w1" : tensor<4x4xf32>
  // CHECK: tofu.param "w0" {tofu.tensor_groups = array<i64: [[W:[0-9]+]]>}
  // CHECK: tofu.param "w1" {tofu.tensor_groups = array<i64: [[W]]>}
  // CHECK: name = "c0"{{.*}}tofu.op_group = [[C:[0-9]+]] : i64
  // CHECK: name = "c1"{{.*}}tofu.op_group = [[C]] : i64
  %h0 = tofu.compute "MatMul"(%x, %w0) {attrs = {}, name = "c0", tofu.timestep = 0 : i64} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %h1 = tofu.compute "MatMul"(%h0, %w1) {attrs = {}, name = "c1", tofu.timestep = 1 : i64} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  return
}
