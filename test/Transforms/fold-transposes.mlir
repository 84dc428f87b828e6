// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-fold-transposes))' | FileCheck %s

// A Transpose that undoes the Transpose it reads is its input; an identity
// Transpose is its input; the inner one stays while something else reads it.
// CHECK-LABEL: func.func @undo
func.func @undo() {
  %x = tofu.input "x" "features" : tensor<8x4xf32>
  %w = tofu.param "w" : tensor<3x4xf32>
  %a = tofu.param "a" : tensor<2x3x4xf32>
  // CHECK: %[[W:.*]] = tofu.param "w"
  // CHECK: %[[A:.*]] = tofu.param "a"
  // CHECK: %[[T:.*]] = tofu.compute "Transpose"(%[[W]]) {attrs = {}, name = "wt"}
  // CHECK: tofu.compute "MatMul"(%{{.*}}, %[[T]])
  // CHECK-NOT: name = "wtt"
  // CHECK: tofu.compute "Neg"(%[[W]]) {attrs = {}, name = "use_w"}
  // CHECK-NOT: name = "p"
  // CHECK-NOT: name = "q"
  // CHECK-NOT: name = "id"
  // CHECK: tofu.compute "Neg"(%[[A]]) {attrs = {}, name = "use_a"}
  // CHECK: tofu.compute "Neg"(%[[A]]) {attrs = {}, name = "use_a2"}
  %wt = tofu.compute "Transpose"(%w) {attrs = {}, name = "wt"} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %y = tofu.compute "MatMul"(%x, %wt) {attrs = {}, name = "mm"} : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  %wtt = tofu.compute "Transpose"(%wt) {attrs = {}, name = "wtt"} : (tensor<4x3xf32>) -> tensor<3x4xf32>
  %n = tofu.compute "Neg"(%wtt) {attrs = {}, name = "use_w"} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %p = tofu.compute "Transpose"(%a) {attrs = {perm = array<i64: 1, 2, 0>}, name = "p"} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  %q = tofu.compute "Transpose"(%p) {attrs = {perm = array<i64: 2, 0, 1>}, name = "q"} : (tensor<3x4x2xf32>) -> tensor<2x3x4xf32>
  %m = tofu.compute "Neg"(%q) {attrs = {}, name = "use_a"} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %id = tofu.compute "Transpose"(%a) {attrs = {perm = array<i64: 0, 1, 2>}, name = "id"} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %m2 = tofu.compute "Neg"(%id) {attrs = {}, name = "use_a2"} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return
}

// Two Transposes that do not undo each other, and a grad_for-tagged one,
// stay.
// CHECK-LABEL: func.func @keep
func.func @keep() {
  %a = tofu.param "a" : tensor<2x3x4xf32>
  %w = tofu.param "w" : tensor<3x4xf32>
  // CHECK: name = "p"
  // CHECK: name = "q"
  // CHECK: name = "wt"
  // CHECK: name = "wtt"
  %p = tofu.compute "Transpose"(%a) {attrs = {perm = array<i64: 1, 2, 0>}, name = "p"} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  %q = tofu.compute "Transpose"(%p) {attrs = {perm = array<i64: 1, 2, 0>}, name = "q"} : (tensor<3x4x2xf32>) -> tensor<4x2x3xf32>
  %m = tofu.compute "Neg"(%q) {attrs = {}, name = "use"} : (tensor<4x2x3xf32>) -> tensor<4x2x3xf32>
  %wt = tofu.compute "Transpose"(%w) {attrs = {}, name = "wt"} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %wtt = tofu.compute "Transpose"(%wt) {attrs = {}, name = "wtt", grad_for = "w"} : (tensor<4x3xf32>) -> tensor<3x4xf32>
  return
}
