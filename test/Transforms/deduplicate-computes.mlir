// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-deduplicate-computes))' | FileCheck %s

// Equal spec, attributes and operands: the later op reads the earlier's
// result, whatever the names and grad_of tags; chains of duplicates merge.
// CHECK-LABEL: func.func @duplicates
func.func @duplicates() {
  %x = tofu.input "x" "features" : tensor<8x4xf32>
  %r = tofu.param "r" : tensor<4x4xf32>
  // CHECK: %[[T:.*]] = tofu.compute "Transpose"(%{{.*}}) {attrs = {}, grad_of = "c0", name = "t0"}
  // CHECK-NOT: name = "t1"
  // CHECK: %[[N:.*]] = tofu.compute "Neg"(%[[T]]) {attrs = {}, name = "n0"}
  // CHECK-NOT: name = "n1"
  // CHECK: tofu.compute "MatMul"(%{{.*}}, %[[N]]) {attrs = {}, name = "m0"}
  // CHECK: tofu.compute "MatMul"(%{{.*}}, %[[N]]) {attrs = {}, name = "m1"}
  %t0 = tofu.compute "Transpose"(%r) {attrs = {}, grad_of = "c0", name = "t0"} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %n0 = tofu.compute "Neg"(%t0) {attrs = {}, name = "n0"} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m0 = tofu.compute "MatMul"(%x, %n0) {attrs = {}, name = "m0"} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %t1 = tofu.compute "Transpose"(%r) {attrs = {}, grad_of = "c1", name = "t1"} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %n1 = tofu.compute "Neg"(%t1) {attrs = {}, name = "n1"} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m1 = tofu.compute "MatMul"(%m0, %n1) {attrs = {}, name = "m1"} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  return
}

// Different attributes, different operands, a grad_for tag or a forward
// timestep op: nothing merges.
// CHECK-LABEL: func.func @distinct
func.func @distinct() {
  %a = tofu.param "a" : tensor<4x4xf32>
  %b = tofu.param "b" : tensor<4x4xf32>
  // CHECK: name = "p0"
  // CHECK: name = "p1"
  // CHECK: name = "p2"
  // CHECK: name = "g0"
  // CHECK: name = "g1"
  // CHECK: name = "s0"
  // CHECK: name = "s1"
  %p0 = tofu.compute "Transpose"(%a) {attrs = {perm = array<i64: 1, 0>}, name = "p0"} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %p1 = tofu.compute "Transpose"(%a) {attrs = {}, name = "p1"} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %p2 = tofu.compute "Transpose"(%b) {attrs = {}, name = "p2"} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %g0 = tofu.compute "Neg"(%a) {attrs = {}, name = "g0", grad_for = "a"} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %g1 = tofu.compute "Neg"(%a) {attrs = {}, name = "g1"} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %s0 = tofu.compute "Relu"(%a) {attrs = {}, name = "s0", tofu.timestep = 0 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %s1 = tofu.compute "Relu"(%a) {attrs = {}, name = "s1", tofu.timestep = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return
}
