// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-fuse-layer-norm))' | FileCheck %s

// PyTorch's export of nn.LayerNorm(8) below opset 17.
// CHECK-LABEL: func.func @torch_export
func.func @torch_export() {
  %x = tofu.input "x" "features" : tensor<2x3x8xf32>
  %w = tofu.param "w" : tensor<8xf32>
  %b = tofu.param "b" : tensor<8xf32>
  %two = tofu.param "c0" {constant, value = dense<2.0> : tensor<f32>} : tensor<f32>
  %eps = tofu.param "c1" {constant, value = dense<9.99999974E-6> : tensor<f32>} : tensor<f32>
  // CHECK: %[[X:.*]] = tofu.input "x"
  // CHECK: %[[W:.*]] = tofu.param "w"
  // CHECK: %[[B:.*]] = tofu.param "b"
  // CHECK-NOT: "ReduceMean"
  // CHECK: %[[Y:.*]]:3 = tofu.compute "LayerNormalization"(%[[X]], %[[W]], %[[B]]) {attrs = {axis = 2 : i64, epsilon = 9.99999974{{[0-9]*}}E-6 : f64}, name = "y"} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  // CHECK-NEXT: tofu.compute "Neg"(%[[Y]]#0)
  %m = tofu.compute "ReduceMean"(%x) {attrs = {axes = array<i64: -1>}, name = "m"} : (tensor<2x3x8xf32>) -> tensor<2x3x1xf32>
  %d = tofu.compute "Sub"(%x, %m) {attrs = {}, name = "d"} : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %p = tofu.compute "Pow"(%d, %two) {attrs = {}, name = "p"} : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %v = tofu.compute "ReduceMean"(%p) {attrs = {axes = array<i64: -1>}, name = "v"} : (tensor<2x3x8xf32>) -> tensor<2x3x1xf32>
  %e = tofu.compute "Add"(%v, %eps) {attrs = {}, name = "e"} : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %s = tofu.compute "Sqrt"(%e) {attrs = {}, name = "s"} : (tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %n = tofu.compute "Div"(%d, %s) {attrs = {}, name = "n"} : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %sc = tofu.compute "Mul"(%n, %w) {attrs = {}, name = "sc"} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %y = tofu.compute "Add"(%sc, %b) {attrs = {}, name = "y"} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %u = tofu.compute "Neg"(%y) {attrs = {}, name = "use"} : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return
}

// Two trailing axes, operands swapped in the Adds and the Mul.
// CHECK-LABEL: func.func @two_axes
func.func @two_axes() {
  %x = tofu.input "x" "features" : tensor<2x4x5xf64>
  %w = tofu.param "w" : tensor<4x5xf64>
  %b = tofu.param "b" : tensor<4x5xf64>
  %two = tofu.param "c0" {constant, value = dense<2.0> : tensor<f64>} : tensor<f64>
  %eps = tofu.param "c1" {constant, value = dense<1.0e-5> : tensor<f64>} : tensor<f64>
  // CHECK: tofu.compute "LayerNormalization"(%{{.*}}, %{{.*}}, %{{.*}}) {attrs = {axis = 1 : i64, epsilon = 1.000000e-05 : f64}, name = "y"} : (tensor<2x4x5xf64>, tensor<4x5xf64>, tensor<4x5xf64>) -> (tensor<2x4x5xf64>, tensor<2x1x1xf64>, tensor<2x1x1xf64>)
  %m = tofu.compute "ReduceMean"(%x) {attrs = {axes = array<i64: 2, 1>}, name = "m"} : (tensor<2x4x5xf64>) -> tensor<2x1x1xf64>
  %d = tofu.compute "Sub"(%x, %m) {attrs = {}, name = "d"} : (tensor<2x4x5xf64>, tensor<2x1x1xf64>) -> tensor<2x4x5xf64>
  %p = tofu.compute "Pow"(%d, %two) {attrs = {}, name = "p"} : (tensor<2x4x5xf64>, tensor<f64>) -> tensor<2x4x5xf64>
  %v = tofu.compute "ReduceMean"(%p) {attrs = {axes = array<i64: -2, -1>, keepdims = 1 : i64}, name = "v"} : (tensor<2x4x5xf64>) -> tensor<2x1x1xf64>
  %e = tofu.compute "Add"(%eps, %v) {attrs = {}, name = "e"} : (tensor<f64>, tensor<2x1x1xf64>) -> tensor<2x1x1xf64>
  %s = tofu.compute "Sqrt"(%e) {attrs = {}, name = "s"} : (tensor<2x1x1xf64>) -> tensor<2x1x1xf64>
  %n = tofu.compute "Div"(%d, %s) {attrs = {}, name = "n"} : (tensor<2x4x5xf64>, tensor<2x1x1xf64>) -> tensor<2x4x5xf64>
  %sc = tofu.compute "Mul"(%w, %n) {attrs = {}, name = "sc"} : (tensor<4x5xf64>, tensor<2x4x5xf64>) -> tensor<2x4x5xf64>
  %y = tofu.compute "Add"(%b, %sc) {attrs = {}, name = "y"} : (tensor<4x5xf64>, tensor<2x4x5xf64>) -> tensor<2x4x5xf64>
  return
}

// Not a layer norm: a mean over a leading axis, the centered value read
// elsewhere, an exponent of 3, and a weight that is not of the normalized
// shape.
// CHECK-LABEL: func.func @keep
func.func @keep() {
  %x = tofu.input "x" "features" : tensor<3x8xf32>
  %w = tofu.param "w" : tensor<8xf32>
  %w3 = tofu.param "w3" : tensor<3x8xf32>
  %b = tofu.param "b" : tensor<8xf32>
  %two = tofu.param "c0" {constant, value = dense<2.0> : tensor<f32>} : tensor<f32>
  %three = tofu.param "c2" {constant, value = dense<3.0> : tensor<f32>} : tensor<f32>
  %eps = tofu.param "c1" {constant, value = dense<1.0e-5> : tensor<f32>} : tensor<f32>
  // CHECK-NOT: "LayerNormalization"
  %m = tofu.compute "ReduceMean"(%x) {attrs = {axes = array<i64: 0>}, name = "m"} : (tensor<3x8xf32>) -> tensor<1x8xf32>
  %d = tofu.compute "Sub"(%x, %m) {attrs = {}, name = "d"} : (tensor<3x8xf32>, tensor<1x8xf32>) -> tensor<3x8xf32>
  %p = tofu.compute "Pow"(%d, %two) {attrs = {}, name = "p"} : (tensor<3x8xf32>, tensor<f32>) -> tensor<3x8xf32>
  %v = tofu.compute "ReduceMean"(%p) {attrs = {axes = array<i64: 0>}, name = "v"} : (tensor<3x8xf32>) -> tensor<1x8xf32>
  %e = tofu.compute "Add"(%v, %eps) {attrs = {}, name = "e"} : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %s = tofu.compute "Sqrt"(%e) {attrs = {}, name = "s"} : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %n = tofu.compute "Div"(%d, %s) {attrs = {}, name = "n"} : (tensor<3x8xf32>, tensor<1x8xf32>) -> tensor<3x8xf32>
  %sc = tofu.compute "Mul"(%n, %w) {attrs = {}, name = "sc"} : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  %y = tofu.compute "Add"(%sc, %b) {attrs = {}, name = "y"} : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  %m2 = tofu.compute "ReduceMean"(%x) {attrs = {axes = array<i64: -1>}, name = "m2"} : (tensor<3x8xf32>) -> tensor<3x1xf32>
  %d2 = tofu.compute "Sub"(%x, %m2) {attrs = {}, name = "d2"} : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
  %p2 = tofu.compute "Pow"(%d2, %two) {attrs = {}, name = "p2"} : (tensor<3x8xf32>, tensor<f32>) -> tensor<3x8xf32>
  %v2 = tofu.compute "ReduceMean"(%p2) {attrs = {axes = array<i64: -1>}, name = "v2"} : (tensor<3x8xf32>) -> tensor<3x1xf32>
  %e2 = tofu.compute "Add"(%v2, %eps) {attrs = {}, name = "e2"} : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %s2 = tofu.compute "Sqrt"(%e2) {attrs = {}, name = "s2"} : (tensor<3x1xf32>) -> tensor<3x1xf32>
  %n2 = tofu.compute "Div"(%d2, %s2) {attrs = {}, name = "n2"} : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
  %sc2 = tofu.compute "Mul"(%n2, %w) {attrs = {}, name = "sc2"} : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  %y2 = tofu.compute "Add"(%sc2, %b) {attrs = {}, name = "y2"} : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  %u2 = tofu.compute "Neg"(%d2) {attrs = {}, name = "reads_d"} : (tensor<3x8xf32>) -> tensor<3x8xf32>
  %m3 = tofu.compute "ReduceMean"(%x) {attrs = {axes = array<i64: -1>}, name = "m3"} : (tensor<3x8xf32>) -> tensor<3x1xf32>
  %d3 = tofu.compute "Sub"(%x, %m3) {attrs = {}, name = "d3"} : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
  %p3 = tofu.compute "Pow"(%d3, %three) {attrs = {}, name = "p3"} : (tensor<3x8xf32>, tensor<f32>) -> tensor<3x8xf32>
  %v3 = tofu.compute "ReduceMean"(%p3) {attrs = {axes = array<i64: -1>}, name = "v3"} : (tensor<3x8xf32>) -> tensor<3x1xf32>
  %e3 = tofu.compute "Add"(%v3, %eps) {attrs = {}, name = "e3"} : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %s3 = tofu.compute "Sqrt"(%e3) {attrs = {}, name = "s3"} : (tensor<3x1xf32>) -> tensor<3x1xf32>
  %n3 = tofu.compute "Div"(%d3, %s3) {attrs = {}, name = "n3"} : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
  %sc3 = tofu.compute "Mul"(%n3, %w) {attrs = {}, name = "sc3"} : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  %y3 = tofu.compute "Add"(%sc3, %b) {attrs = {}, name = "y3"} : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  %m4 = tofu.compute "ReduceMean"(%x) {attrs = {axes = array<i64: -1>}, name = "m4"} : (tensor<3x8xf32>) -> tensor<3x1xf32>
  %d4 = tofu.compute "Sub"(%x, %m4) {attrs = {}, name = "d4"} : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
  %p4 = tofu.compute "Pow"(%d4, %two) {attrs = {}, name = "p4"} : (tensor<3x8xf32>, tensor<f32>) -> tensor<3x8xf32>
  %v4 = tofu.compute "ReduceMean"(%p4) {attrs = {axes = array<i64: -1>}, name = "v4"} : (tensor<3x8xf32>) -> tensor<3x1xf32>
  %e4 = tofu.compute "Add"(%v4, %eps) {attrs = {}, name = "e4"} : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %s4 = tofu.compute "Sqrt"(%e4) {attrs = {}, name = "s4"} : (tensor<3x1xf32>) -> tensor<3x1xf32>
  %n4 = tofu.compute "Div"(%d4, %s4) {attrs = {}, name = "n4"} : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
  %sc4 = tofu.compute "Mul"(%n4, %w3) {attrs = {}, name = "sc4"} : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %y4 = tofu.compute "Add"(%sc4, %b) {attrs = {}, name = "y4"} : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  return
}
