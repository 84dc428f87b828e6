// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-fuse-gelu))' | FileCheck %s

// PyTorch's export of nn.GELU(): Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5).
// CHECK-LABEL: func.func @torch_export
func.func @torch_export() {
  %x = tofu.input "x" "features" : tensor<2x8xf32>
  %sqrt2 = tofu.param "c0" {constant, value = dense<1.41421354> : tensor<f32>} : tensor<f32>
  %one = tofu.param "c1" {constant, value = dense<1.0> : tensor<f32>} : tensor<f32>
  %half = tofu.param "c2" {constant, value = dense<0.5> : tensor<f32>} : tensor<f32>
  // CHECK: %[[X:.*]] = tofu.input "x"
  // CHECK-NOT: "Erf"
  // CHECK: %[[Y:.*]] = tofu.compute "Gelu"(%[[X]]) {attrs = {approximate = "none"}, name = "y"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK-NEXT: tofu.compute "Neg"(%[[Y]])
  %d = tofu.compute "Div"(%x, %sqrt2) {attrs = {}, name = "d"} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = tofu.compute "Erf"(%d) {attrs = {}, name = "e"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = tofu.compute "Add"(%e, %one) {attrs = {}, name = "a"} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %m = tofu.compute "Mul"(%x, %a) {attrs = {}, name = "m"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = tofu.compute "Mul"(%m, %half) {attrs = {}, name = "y"} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %n = tofu.compute "Neg"(%y) {attrs = {}, name = "use"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// The other association and operand orders, x * (1/sqrt 2), float64, and a
// GELU of a GELU.
// CHECK-LABEL: func.func @variants
func.func @variants() {
  %x = tofu.input "x" "features" : tensor<3xf64>
  %r = tofu.param "c0" {constant, value = dense<0.70710678118654757> : tensor<f64>} : tensor<f64>
  %one = tofu.param "c1" {constant, value = dense<1.0> : tensor<f64>} : tensor<f64>
  %half = tofu.param "c2" {constant, value = dense<0.5> : tensor<f64>} : tensor<f64>
  // CHECK: %[[X:.*]] = tofu.input "x"
  // CHECK: %[[G1:.*]] = tofu.compute "Gelu"(%[[X]]) {attrs = {approximate = "none"}, name = "y1"}
  // CHECK: tofu.compute "Gelu"(%[[G1]]) {attrs = {approximate = "none"}, name = "y2"}
  // CHECK-NOT: "Mul"
  %s = tofu.compute "Mul"(%r, %x) {attrs = {}, name = "s"} : (tensor<f64>, tensor<3xf64>) -> tensor<3xf64>
  %e = tofu.compute "Erf"(%s) {attrs = {}, name = "e"} : (tensor<3xf64>) -> tensor<3xf64>
  %a = tofu.compute "Add"(%one, %e) {attrs = {}, name = "a"} : (tensor<f64>, tensor<3xf64>) -> tensor<3xf64>
  %h = tofu.compute "Mul"(%half, %x) {attrs = {}, name = "h"} : (tensor<f64>, tensor<3xf64>) -> tensor<3xf64>
  %y1 = tofu.compute "Mul"(%a, %h) {attrs = {}, name = "y1"} : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
  %s2 = tofu.compute "Mul"(%y1, %r) {attrs = {}, name = "s2"} : (tensor<3xf64>, tensor<f64>) -> tensor<3xf64>
  %e2 = tofu.compute "Erf"(%s2) {attrs = {}, name = "e2"} : (tensor<3xf64>) -> tensor<3xf64>
  %a2 = tofu.compute "Add"(%e2, %one) {attrs = {}, name = "a2"} : (tensor<3xf64>, tensor<f64>) -> tensor<3xf64>
  %m2 = tofu.compute "Mul"(%a2, %y1) {attrs = {}, name = "m2"} : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
  %y2 = tofu.compute "Mul"(%half, %m2) {attrs = {}, name = "y2"} : (tensor<f64>, tensor<3xf64>) -> tensor<3xf64>
  return
}

// Not a GELU: another constant, an intermediate read elsewhere, a trained
// scalar instead of a constant, and erf of another tensor.
// CHECK-LABEL: func.func @keep
func.func @keep() {
  %x = tofu.input "x" "features" : tensor<4xf32>
  %z = tofu.input "z" "features" : tensor<4xf32>
  %sqrt2 = tofu.param "c0" {constant, value = dense<1.41421354> : tensor<f32>} : tensor<f32>
  %two = tofu.param "c3" {constant, value = dense<2.0> : tensor<f32>} : tensor<f32>
  %one = tofu.param "c1" {constant, value = dense<1.0> : tensor<f32>} : tensor<f32>
  %half = tofu.param "c2" {constant, value = dense<0.5> : tensor<f32>} : tensor<f32>
  %w = tofu.param "w" {value = dense<0.5> : tensor<f32>} : tensor<f32>
  // CHECK-NOT: "Gelu"
  %d = tofu.compute "Div"(%x, %two) {attrs = {}, name = "d"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %e = tofu.compute "Erf"(%d) {attrs = {}, name = "e"} : (tensor<4xf32>) -> tensor<4xf32>
  %a = tofu.compute "Add"(%e, %one) {attrs = {}, name = "a"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %m = tofu.compute "Mul"(%x, %a) {attrs = {}, name = "m"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = tofu.compute "Mul"(%m, %half) {attrs = {}, name = "y"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %d2 = tofu.compute "Div"(%x, %sqrt2) {attrs = {}, name = "d2"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %e2 = tofu.compute "Erf"(%d2) {attrs = {}, name = "e2"} : (tensor<4xf32>) -> tensor<4xf32>
  %a2 = tofu.compute "Add"(%e2, %one) {attrs = {}, name = "a2"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %m2 = tofu.compute "Mul"(%x, %a2) {attrs = {}, name = "m2"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y2 = tofu.compute "Mul"(%m2, %half) {attrs = {}, name = "y2"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %n = tofu.compute "Neg"(%e2) {attrs = {}, name = "reads_erf"} : (tensor<4xf32>) -> tensor<4xf32>
  %d3 = tofu.compute "Div"(%x, %sqrt2) {attrs = {}, name = "d3"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %e3 = tofu.compute "Erf"(%d3) {attrs = {}, name = "e3"} : (tensor<4xf32>) -> tensor<4xf32>
  %a3 = tofu.compute "Add"(%e3, %one) {attrs = {}, name = "a3"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %m3 = tofu.compute "Mul"(%x, %a3) {attrs = {}, name = "m3"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y3 = tofu.compute "Mul"(%m3, %w) {attrs = {}, name = "y3"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %d4 = tofu.compute "Div"(%z, %sqrt2) {attrs = {}, name = "d4"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %e4 = tofu.compute "Erf"(%d4) {attrs = {}, name = "e4"} : (tensor<4xf32>) -> tensor<4xf32>
  %a4 = tofu.compute "Add"(%e4, %one) {attrs = {}, name = "a4"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %m4 = tofu.compute "Mul"(%x, %a4) {attrs = {}, name = "m4"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y4 = tofu.compute "Mul"(%m4, %half) {attrs = {}, name = "y4"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return
}
