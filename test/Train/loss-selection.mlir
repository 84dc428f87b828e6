// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step))' | FileCheck %s --check-prefix=DEFAULT
// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{loss=aux}))' | FileCheck %s --check-prefix=NAMED
// RUN: not tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{loss=nope}))' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-build-training-step{loss=scores}))' 2>&1 | FileCheck %s --check-prefix=NOTSCALAR
// The loss is the model's only scalar f32 output unless --loss names one;
// the tofu.output markers are removed.

func.func @main() {
  %x = tofu.input "x" "features" : tensor<8x4xf32>
  %w = tofu.param "w" : tensor<8x4xf32>
  %s = tofu.compute "Mul"(%x, %w) {attrs = {}, name = "scores"} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %l = tofu.compute "ReduceSum"(%s) {attrs = {keepdims = 0 : i64}, name = "sum"} : (tensor<8x4xf32>) -> tensor<f32>
  %a = tofu.compute "ReduceMean"(%s) {attrs = {keepdims = 0 : i64}, name = "mean"} : (tensor<8x4xf32>) -> tensor<f32>
  tofu.output "scores" %s : tensor<8x4xf32>
  tofu.output "aux" %a : tensor<f32>
  return
}
// DEFAULT: %[[A:.*]] = tofu.compute "ReduceMean"
// DEFAULT-NOT: tofu.output
// DEFAULT: tofu.loss %[[A]] {description = "model output 'aux' (ReduceMean 'mean')"} : tensor<f32>
// NAMED: %[[A:.*]] = tofu.compute "ReduceMean"
// NAMED: tofu.loss %[[A]] {description = "model output 'aux' (ReduceMean 'mean')"} : tensor<f32>
// UNKNOWN: --loss names 'nope', which is not a model output (outputs: 'scores' (tensor<8x4xf32>), 'aux' (tensor<f32>))
// NOTSCALAR: --loss names output 'scores' of type 'tensor<8x4xf32>', but the loss must be a float scalar (tensor<f32>, tensor<f64>, ...); for class scores use --loss=softmax-cross-entropy:scores

