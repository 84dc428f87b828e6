// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{gradient-graph=true}))' | FileCheck %s
// tofu.gradient ops (an ONNX Gradient) are replaced by the backward pass of
// their y: here d(a*b + a)/da = b + 1 (two contributions summed) and
// d/db = a, for graph inputs; an unrelated tensor gets Zeros. The users of
// the gradients move after the backward pass; the outputs stay.

func.func @main() {
  %a = tofu.input "a" "features" : tensor<3xf32>
  %b = tofu.input "b" "features" : tensor<3xf32>
  %c = tofu.input "c" "features" : tensor<3xf32>
  %m = tofu.compute "Mul"(%a, %b) {attrs = {}, name = "mul"} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %s = tofu.compute "Add"(%m, %a) {attrs = {}, name = "add"} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %y = tofu.compute "ReduceSum"(%s) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<3xf32>) -> tensor<f32>
  %da = tofu.gradient "grad" %y wrt %a : tensor<f32>, tensor<3xf32>
  %db = tofu.gradient "grad" %y wrt %b : tensor<f32>, tensor<3xf32>
  %dc = tofu.gradient "grad" %y wrt %c : tensor<f32>, tensor<3xf32>
  %twice = tofu.compute "Add"(%da, %da) {attrs = {}, name = "twice"} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  tofu.output "twice" %twice : tensor<3xf32>
  tofu.output "db" %db : tensor<3xf32>
  tofu.output "dc" %dc : tensor<3xf32>
  return
}

// CHECK-LABEL: func.func @main
// CHECK-NOT:   tofu.gradient
// CHECK:       %[[A:.*]] = tofu.input "a"
// CHECK:       %[[B:.*]] = tofu.input "b"
// CHECK:       %[[C:.*]] = tofu.input "c"
// CHECK:       %[[SEED:.*]] = tofu.compute "Ones"
// CHECK:       %[[DB:.*]] = tofu.compute "Mul"({{.*}}, %[[A]]) {{.*}}grad_for = "b", grad_of = "mul"
// CHECK:       %[[DA:.*]] = tofu.compute "Add"({{.*}}) {{.*}}grad_for = "a", grad_of = "mul", name = "mul.grad_sum"
// CHECK:       %[[DC:.*]] = tofu.compute "Zeros"(%[[C]]) {attrs = {}, grad_of = "grad", name = "grad.zeros"}
// CHECK-NEXT:  %[[TWICE:.*]] = tofu.compute "Add"(%[[DA]], %[[DA]]) {attrs = {}, name = "twice"}
// CHECK-NEXT:  tofu.output "twice" %[[TWICE]]
// CHECK-NEXT:  tofu.output "db" %[[DB]]
// CHECK-NEXT:  tofu.output "dc" %[[DC]]

