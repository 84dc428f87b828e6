// RUN: tofu-opt %s -split-input-file -verify-diagnostics
// Every attribute and op verifier rejects malformed IR with a message.

func.func @tiling_zero_parts() {
  // expected-error @+1 {{tiling cut 0 has 0 parts; a cut needs at least 1}}
  %w = tofu.param "w" {tofu.tilings = [#tofu.tiling<[(0, 0)]>]} : tensor<8xf32>
  return
}

// -----

func.func @tiling_negative_dim() {
  // expected-error @+1 {{tiling cut 0 has negative dimension -1}}
  %w = tofu.param "w" {tofu.tilings = [#tofu.tiling<[(-1, 2)]>]} : tensor<8xf32>
  return
}

// -----

func.func @tiling_dim_past_rank() {
  // expected-error @+1 {{tiling of result 0 cuts dimension 1 but the tensor has rank 1}}
  %w = tofu.param "w" {tofu.tilings = [#tofu.tiling<[(1, 2)]>]} : tensor<8xf32>
  return
}

// -----

func.func @tilings_count() {
  // expected-error @+1 {{'tofu.tilings' needs one #tofu.tiling per result (1)}}
  %w = tofu.param "w" {tofu.tilings = []} : tensor<8xf32>
  return
}

// -----

func.func @interval_lengths() {
  // expected-error @+1 {{interval bounds have 2 and 1 coefficients}}
  %w = tofu.param "w" {tofu.x = #tofu.interval<[0.5, 0.0] + 0.0, [1.0] + 0.0>} : tensor<8xf32>
  return
}

// -----

func.func @strategy_kind() {
  // expected-error @+1 {{expected 'split' or 'reduce'}}
  %w = tofu.param "w" {tofu.x = #tofu.strategy<cut 0 dim 0>} : tensor<8xf32>
  return
}

// -----

func.func @strategy_dim_past_rank(%x: tensor<8xf32>) {
  %in = tofu.input "x" "features" : tensor<8xf32>
  // expected-error @+1 {{strategy splits dimension 1 of a rank-1 output}}
  %r = tofu.compute "Relu"(%in) {attrs = {}, name = "r", tofu.plan = [#tofu.strategy<split 0 dim 1>]} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @unknown_attr() {
  // expected-error @+1 {{unknown tofu attribute 'tofu.bogus'}}
  %w = tofu.param "w" {tofu.bogus = 1} : tensor<8xf32>
  return
}

// -----

func.func @grid() attributes {tofu.grid = array<i64: 2, 0>} {
  // expected-error @-1 {{'tofu.grid' must be a non-empty array<i64> of group counts >= 1}}
  return
}

// -----

func.func @unknown_spec() {
  %x = tofu.input "x" "features" : tensor<8xf32>
  // expected-error @+1 {{no TDL spec for operator 'Frobnicate'}}
  %r = tofu.compute "Frobnicate"(%x) {attrs = {}, name = "f"} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @wrong_result_type() {
  %x = tofu.input "x" "features" : tensor<8xf32>
  // expected-error @+1 {{result 0 has type 'tensor<4xf32>' but 'Relu' gives 'tensor<8xf32>'}}
  %r = tofu.compute "Relu"(%x) {attrs = {}, name = "r"} : (tensor<8xf32>) -> tensor<4xf32>
  return
}

// -----

// Add's operands share one type variable T (docs/TDL.md, "Element types").
func.func @element_type_mismatch() {
  %a = tofu.input "a" "features" : tensor<8xf32>
  %b = tofu.input "b" "features" : tensor<8xf64>
  // expected-error @+1 {{input B: element type f64 differs from f32 of input A (both have type T; insert a Cast)}}
  %r = tofu.compute "Add"(%a, %b) {attrs = {}, name = "add"} : (tensor<8xf32>, tensor<8xf64>) -> tensor<8xf32>
  return
}

// -----

// Sqrt takes float types only.
func.func @integer_operand_of_a_float_op() {
  %a = tofu.input "a" "features" : tensor<8xi32>
  // expected-error @+1 {{input X: expected a float type (f16, bf16, f32, f64), found i32}}
  %r = tofu.compute "Sqrt"(%a) {attrs = {}, name = "sqrt"} : (tensor<8xi32>) -> tensor<8xi32>
  return
}

// -----

func.func @gemm_shape_mismatch() {
  %a = tofu.input "a" "features" : tensor<8x4xf32>
  %b = tofu.param "b" : tensor<5x3xf32>
  // expected-error @+1 {{'Gemm'}}
  %r = tofu.compute "Gemm"(%a, %b) {attrs = {}, name = "g"} : (tensor<8x4xf32>, tensor<5x3xf32>) -> tensor<8x3xf32>
  return
}

// -----

func.func @labels_without_classes() {
  // expected-error @+1 {{labels need a positive 'classes'}}
  %y = tofu.input "y" "labels" : tensor<8xi64>
  return
}

// -----

func.func @ignore_index_on_features() {
  // expected-error @+1 {{'ignore_index' is the value a loss ignores in its labels; features have none}}
  %x = tofu.input "x" "features" {classes = 5 : i64, ignore_index = -100 : i64} : tensor<8xi64>
  return
}

// -----

func.func @update_of_non_param() {
  %x = tofu.input "x" "features" : tensor<8xf32>
  // expected-error @+1 {{first operand must be a tofu.param}}
  tofu.update %x, %x grad %x : tensor<8xf32>
  return
}

// -----

func.func @state_with_gradient() {
  %v = tofu.param "w.momentum" {state_of = "w"} : tensor<8xf32>
  // expected-error @+1 {{optimizer state 'w.momentum' has no gradient}}
  tofu.update %v, %v grad %v : tensor<8xf32>
  return
}

// -----

func.func @negative_timestep() {
  %in = tofu.input "x" "features" : tensor<8xf32>
  // expected-error @+1 {{'tofu.timestep' must be an integer >= 0}}
  %r = tofu.compute "Tanh"(%in) {attrs = {}, name = "r", tofu.timestep = -1 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @bad_direction() {
  %in = tofu.input "x" "features" : tensor<8xf32>
  // expected-error @+1 {{'tofu.direction' must be an integer 0 (forward) or 1 (reverse)}}
  %r = tofu.compute "Tanh"(%in) {attrs = {}, name = "r", tofu.direction = 2 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @recurrence_not_a_string() {
  %in = tofu.input "x" "features" : tensor<8xf32>
  // expected-error @+1 {{'tofu.recurrence' must be a string}}
  %r = tofu.compute "Tanh"(%in) {attrs = {}, name = "r", tofu.recurrence = 3 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return
}
