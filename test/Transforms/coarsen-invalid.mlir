// RUN: tofu-opt %s -split-input-file -verify-diagnostics
// The coarsening attributes are checked by the dialect.

func.func @op_group_on_param() {
  // expected-error @+1 {{'tofu.op_group' must be an integer >= 0 on a tofu.compute op}}
  %w = tofu.param "w" {tofu.op_group = 0 : i64} : tensor<4xf32>
  return
}

// -----

func.func @tensor_groups_count() {
  // expected-error @+1 {{'tofu.tensor_groups' needs one group id >= 0 per result (1)}}
  %w = tofu.param "w" {tofu.tensor_groups = array<i64: 0, 1>} : tensor<4xf32>
  return
}

// -----

func.func @negative_timestep(%x: tensor<4xf32>) {
  %w = tofu.param "w" : tensor<4xf32>
  // expected-error @+1 {{'tofu.timestep' must be an integer >= 0}}
  %y = tofu.compute "Relu"(%w) {attrs = {}, name = "r", tofu.timestep = -1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}
