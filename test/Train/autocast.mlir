// RUN: tofu-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tofu-autocast))' | FileCheck %s --check-prefix=CAST
// RUN: tofu-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tofu-autocast,tofu-build-training-step{lr=0.05}))' | FileCheck %s --check-prefix=STEP

// A linear layer + ReLU + softmax cross-entropy under --precision bf16: the
// Gemm reads bf16 casts of x, w and b (one per use) and its bf16 result is
// cast back to f32 for the Relu; Relu and the loss stay f32.
// CAST-LABEL: func.func @linear
// CAST: %[[X:.*]] = tofu.input "x"
// CAST: %[[W:.*]] = tofu.param "w"
// CAST: %[[B:.*]] = tofu.param "b"
// CAST: %[[XB:.*]] = tofu.compute "Cast"(%[[X]]) {attrs = {to = 16 : i64}, name = "fc/bf16.0"} : (tensor<8x4xf32>) -> tensor<8x4xbf16>
// CAST: %[[WB:.*]] = tofu.compute "Cast"(%[[W]]) {attrs = {to = 16 : i64}, name = "fc/bf16.1"} : (tensor<3x4xf32>) -> tensor<3x4xbf16>
// CAST: %[[BB:.*]] = tofu.compute "Cast"(%[[B]]) {attrs = {to = 16 : i64}, name = "fc/bf16.2"} : (tensor<3xf32>) -> tensor<3xbf16>
// CAST: %[[H:.*]] = tofu.compute "Gemm"(%[[XB]], %[[WB]], %[[BB]]) {{.*}}name = "fc"} : (tensor<8x4xbf16>, tensor<3x4xbf16>, tensor<3xbf16>) -> tensor<8x3xbf16>
// CAST: %[[HF:.*]] = tofu.compute "Cast"(%[[H]]) {attrs = {to = 1 : i64}, name = "fc/f32"} : (tensor<8x3xbf16>) -> tensor<8x3xf32>
// CAST: tofu.compute "Relu"(%[[HF]]) {{.*}} -> tensor<8x3xf32>
// CAST: tofu.compute "SoftmaxCrossEntropyLoss"({{.*}}) -> tensor<f32>

// The training step: the Gemm's gradients compute in bf16 from a bf16 cast
// of the f32 incoming gradient, and each weight gradient is cast back to
// f32 before the f32 SGD update of the f32 weight.
// STEP-LABEL: func.func @linear
// STEP: %[[W:.*]] = tofu.param "w" : tensor<3x4xf32>
// STEP: %[[B:.*]] = tofu.param "b" : tensor<3xf32>
// STEP: %[[XB:.*]] = tofu.compute "Cast"({{.*}}) {attrs = {to = 16 : i64}, name = "fc/bf16.0"}
// STEP: %[[DH:.*]] = tofu.compute "ReluGrad"({{.*}}) -> tensor<8x3xf32>
// STEP: %[[DHB:.*]] = tofu.compute "Cast"(%[[DH]]) {attrs = {to = 16 : i64}, grad_for = "fc", grad_of = "fc/f32"{{.*}} -> tensor<8x3xbf16>
// STEP-DAG: %[[DWB:.*]] = tofu.compute "Gemm"(%[[DHB]], %[[XB]]) {{.*}}grad_of = "fc"{{.*}} -> tensor<3x4xbf16>
// STEP-DAG: %[[DBB:.*]] = tofu.compute "BiasGrad"(%[[DHB]]) {{.*}} -> tensor<3xbf16>
// STEP-DAG: %[[DW:.*]] = tofu.compute "Cast"(%[[DWB]]) {attrs = {to = 1 : i64}, grad_for = "w"{{.*}} -> tensor<3x4xf32>
// STEP-DAG: %[[DB:.*]] = tofu.compute "Cast"(%[[DBB]]) {attrs = {to = 1 : i64}, grad_for = "b"{{.*}} -> tensor<3xf32>
// STEP-DAG: %[[NW:.*]] = tofu.compute "SGDUpdate"(%[[W]], %[[DW]]) {{.*}} -> tensor<3x4xf32>
// STEP-DAG: tofu.update %[[W]], %[[NW]] grad %[[DW]] : tensor<3x4xf32>
// STEP-DAG: %[[NB:.*]] = tofu.compute "SGDUpdate"(%[[B]], %[[DB]]) {{.*}} -> tensor<3xf32>
// STEP-DAG: tofu.update %[[B]], %[[NB]] grad %[[DB]] : tensor<3xf32>
func.func @linear() {
  %x = tofu.input "x" "features" : tensor<8x4xf32>
  %y = tofu.input "y" "labels" {classes = 3 : i64, labels_for = "x"} : tensor<8xi64>
  %w = tofu.param "w" : tensor<3x4xf32>
  %b = tofu.param "b" : tensor<3xf32>
  %h = tofu.compute "Gemm"(%x, %w, %b) {attrs = {transB = 1 : i64}, name = "fc"} : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  %r = tofu.compute "Relu"(%h) {attrs = {}, name = "relu"} : (tensor<8x3xf32>) -> tensor<8x3xf32>
  %l = tofu.compute "SoftmaxCrossEntropyLoss"(%r, %y) {attrs = {}, name = "ce"} : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<f32>
  tofu.loss %l : tensor<f32>
  return
}

// -----

// A weight read by two MatMuls gets one cast per use (the gradients of w
// add up in f32); a Conv casts its bias too; the ReduceSum stays f32.
// CAST-LABEL: func.func @shared
// CAST: %[[W:.*]] = tofu.param "w"
// CAST: tofu.compute "Cast"(%[[W]]) {attrs = {to = 16 : i64}, name = "mm1/bf16.1"}
// CAST: tofu.compute "MatMul"({{.*}}) {attrs = {}, name = "mm1"} : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
// CAST: tofu.compute "Cast"(%[[W]]) {attrs = {to = 16 : i64}, name = "mm2/bf16.1"}
// CAST: tofu.compute "MatMul"({{.*}}) {attrs = {}, name = "mm2"} : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
// CAST: tofu.compute "Conv"({{.*}}) {{.*}}name = "conv"} : (tensor<1x1x4x4xbf16>, tensor<2x1x3x3xbf16>, tensor<2xbf16>) -> tensor<1x2x2x2xbf16>
// CAST: tofu.compute "ReduceSum"({{.*}}) {{.*}} : (tensor<1x2x2x2xf32>) -> tensor<f32>
// STEP-LABEL: func.func @shared
// STEP: %[[W:.*]] = tofu.param "w" : tensor<4x4xf32>
// STEP: %[[DW:.*]] = tofu.compute "Add"({{.*}}) {{.*}}grad_for = "w"{{.*}} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// STEP: tofu.update %[[W]], %{{.*}} grad %[[DW]] : tensor<4x4xf32>
func.func @shared() {
  %x = tofu.input "x" "features" : tensor<4x4xf32>
  %z = tofu.input "z" "features" : tensor<1x1x4x4xf32>
  %w = tofu.param "w" : tensor<4x4xf32>
  %k = tofu.param "k" : tensor<2x1x3x3xf32>
  %c = tofu.param "c" : tensor<2xf32>
  %a = tofu.compute "MatMul"(%x, %w) {attrs = {}, name = "mm1"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %m = tofu.compute "MatMul"(%a, %w) {attrs = {}, name = "mm2"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = tofu.compute "ReduceSum"(%m) {attrs = {keepdims = 0 : i64}, name = "sum_m"} : (tensor<4x4xf32>) -> tensor<f32>
  %r = tofu.compute "Mul"(%z, %s) {attrs = {}, name = "scale"} : (tensor<1x1x4x4xf32>, tensor<f32>) -> tensor<1x1x4x4xf32>
  %v = tofu.compute "Conv"(%r, %k, %c) {attrs = {}, name = "conv"} : (tensor<1x1x4x4xf32>, tensor<2x1x3x3xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32>
  %l = tofu.compute "ReduceSum"(%v) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<1x2x2x2xf32>) -> tensor<f32>
  tofu.output "loss" %l : tensor<f32>
  return
}
