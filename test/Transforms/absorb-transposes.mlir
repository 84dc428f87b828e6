// RUN: tofu-opt %s --pass-pipeline='builtin.module(func.func(tofu-absorb-transposes))' | FileCheck %s

// nn.Linear on a batched activation (PyTorch's MatMul(x, Transpose(W))):
// the product reads W transposed; the Transpose is erased.
// CHECK-LABEL: func.func @linear
func.func @linear() {
  %x = tofu.input "x" "features" : tensor<2x5x4xf32>
  %w = tofu.param "w" : tensor<3x4xf32>
  // CHECK: %[[X:.*]] = tofu.input "x"
  // CHECK: %[[W:.*]] = tofu.param "w"
  // CHECK-NOT: "Transpose"
  // CHECK: tofu.compute "MatMulTransposed"(%[[X]], %[[W]]) {attrs = {transB = 1 : i64}, name = "y"} : (tensor<2x5x4xf32>, tensor<3x4xf32>) -> tensor<2x5x3xf32>
  %t = tofu.compute "Transpose"(%w) {attrs = {}, name = "t"} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %y = tofu.compute "MatMul"(%x, %t) {attrs = {}, name = "y"} : (tensor<2x5x4xf32>, tensor<4x3xf32>) -> tensor<2x5x3xf32>
  return
}

// Two matrices: a Gemm with transB; a Gemm with C keeps C, alpha and beta.
// CHECK-LABEL: func.func @matrices
func.func @matrices() {
  %x = tofu.input "x" "features" : tensor<8x4xf32>
  %w = tofu.param "w" : tensor<3x4xf32>
  %c = tofu.param "c" : tensor<8xf32>
  // CHECK: %[[X:.*]] = tofu.input "x"
  // CHECK: %[[W:.*]] = tofu.param "w"
  // CHECK: %[[C:.*]] = tofu.param "c"
  // CHECK: tofu.compute "Gemm"(%[[X]], %[[W]]) {attrs = {transB = 1 : i64}, name = "y"}
  // CHECK: tofu.compute "Gemm"(%[[W]], %[[X]], %[[C]]) {attrs = {alpha = 2.000000e+00 : f64, beta = 5.000000e-01 : f64, transB = 1 : i64}, name = "g"}
  %t = tofu.compute "Transpose"(%w) {attrs = {}, name = "t"} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %y = tofu.compute "MatMul"(%x, %t) {attrs = {}, name = "y"} : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  %t2 = tofu.compute "Transpose"(%w) {attrs = {perm = array<i64: 1, 0>}, name = "t2"} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %g = tofu.compute "Gemm"(%t2, %x, %c) {attrs = {alpha = 2.0 : f64, beta = 0.5 : f64, transA = 1 : i64, transB = 1 : i64}, name = "g"} : (tensor<4x3xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  return
}

// A weight's gradient transposed back (the Transpose's gradient of the
// Linear above): Transpose(A^T B) = B^T A, one Gemm that takes the tags of
// the Transpose it replaces.
// CHECK-LABEL: func.func @output
func.func @output() {
  %a = tofu.input "a" "features" : tensor<10x4xf32>
  %dy = tofu.input "dy" "features" : tensor<10x3xf32>
  // CHECK: %[[A:.*]] = tofu.input "a"
  // CHECK: %[[DY:.*]] = tofu.input "dy"
  // CHECK-NOT: "Transpose"
  // CHECK: tofu.compute "Gemm"(%[[DY]], %[[A]]) {attrs = {transA = 1 : i64}, grad_for = "w", grad_of = "y", name = "dw"} : (tensor<10x3xf32>, tensor<10x4xf32>) -> tensor<3x4xf32>
  %g = tofu.compute "Gemm"(%a, %dy) {attrs = {transA = 1 : i64}, name = "dwt", grad_of = "y"} : (tensor<10x4xf32>, tensor<10x3xf32>) -> tensor<4x3xf32>
  %dw = tofu.compute "Transpose"(%g) {attrs = {}, name = "dw", grad_of = "t", grad_for = "w"} : (tensor<4x3xf32>) -> tensor<3x4xf32>
  return
}

// Attention: q k^T with k transposed in its last two dims, and the
// gradient of k, Transpose(MatMul(Transpose(q), ds)) = ds^T q.
// CHECK-LABEL: func.func @attention
func.func @attention() {
  %q = tofu.input "q" "features" : tensor<2x3x5x4xf32>
  %k = tofu.input "k" "features" : tensor<2x3x5x4xf32>
  %ds = tofu.input "ds" "features" : tensor<2x3x5x5xf32>
  // CHECK: %[[Q:.*]] = tofu.input "q"
  // CHECK: %[[K:.*]] = tofu.input "k"
  // CHECK: %[[DS:.*]] = tofu.input "ds"
  // CHECK-NOT: "Transpose"
  // CHECK: tofu.compute "MatMulTransposed"(%[[Q]], %[[K]]) {attrs = {transB = 1 : i64}, name = "s"}
  // CHECK: tofu.compute "MatMulTransposed"(%[[DS]], %[[Q]]) {attrs = {transA = 1 : i64}, name = "dk"}
  %kt = tofu.compute "Transpose"(%k) {attrs = {perm = array<i64: 0, 1, 3, 2>}, name = "kt"} : (tensor<2x3x5x4xf32>) -> tensor<2x3x4x5xf32>
  %s = tofu.compute "MatMul"(%q, %kt) {attrs = {}, name = "s"} : (tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x5x5xf32>
  %qt = tofu.compute "Transpose"(%q) {attrs = {perm = array<i64: 0, 1, 3, 2>}, name = "qt"} : (tensor<2x3x5x4xf32>) -> tensor<2x3x4x5xf32>
  %dkt = tofu.compute "MatMul"(%qt, %ds) {attrs = {}, name = "dkt"} : (tensor<2x3x4x5xf32>, tensor<2x3x5x5xf32>) -> tensor<2x3x4x5xf32>
  %dk = tofu.compute "Transpose"(%dkt) {attrs = {perm = array<i64: 0, 1, 3, 2>}, name = "dk"} : (tensor<2x3x4x5xf32>) -> tensor<2x3x5x4xf32>
  return
}

// Kept: a Transpose that moves a batch dim, a product read twice, and a
// Transpose also read elsewhere (its product still absorbs it). A product
// tagged as a complete gradient that only the Transpose reads is absorbed.
// CHECK-LABEL: func.func @keep
func.func @keep() {
  %x = tofu.input "x" "features" : tensor<2x5x4xf32>
  %w = tofu.param "w" : tensor<3x4xf32>
  %vv = tofu.param "v" : tensor<4x1xf32>
  // CHECK: name = "p"
  // CHECK: tofu.compute "MatMul"(%{{.*}}, %{{.*}}) {attrs = {}, name = "mp"}
  %p = tofu.compute "Transpose"(%x) {attrs = {perm = array<i64: 1, 0, 2>}, name = "p"} : (tensor<2x5x4xf32>) -> tensor<5x2x4xf32>
  %mp = tofu.compute "MatMul"(%p, %vv) {attrs = {}, name = "mp"} : (tensor<5x2x4xf32>, tensor<4x1xf32>) -> tensor<5x2x1xf32>
  // CHECK: %[[T:.*]] = tofu.compute "Transpose"(%{{.*}}) {attrs = {}, name = "t"}
  // CHECK: tofu.compute "MatMulTransposed"(%{{.*}}, %{{.*}}) {attrs = {transB = 1 : i64}, name = "y"}
  // CHECK: tofu.compute "Neg"(%[[T]])
  // CHECK: tofu.compute "Transpose"(%{{.*}}) {attrs = {perm = array<i64: 0, 2, 1>}, name = "yt"}
  // CHECK: tofu.compute "Neg"(%{{.*}}) {attrs = {}, name = "use_y"}
  %t = tofu.compute "Transpose"(%w) {attrs = {}, name = "t"} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %y = tofu.compute "MatMul"(%x, %t) {attrs = {}, name = "y"} : (tensor<2x5x4xf32>, tensor<4x3xf32>) -> tensor<2x5x3xf32>
  %n = tofu.compute "Neg"(%t) {attrs = {}, name = "use_t"} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %yt = tofu.compute "Transpose"(%y) {attrs = {perm = array<i64: 0, 2, 1>}, name = "yt"} : (tensor<2x5x3xf32>) -> tensor<2x3x5xf32>
  %n2 = tofu.compute "Neg"(%y) {attrs = {}, name = "use_y"} : (tensor<2x5x3xf32>) -> tensor<2x5x3xf32>
  // CHECK: tofu.compute "MatMulTransposed"(%{{.*}}, %{{.*}}) {attrs = {transA = 1 : i64, transB = 1 : i64}, name = "mvt"} : (tensor<4x1xf32>, tensor<2x5x4xf32>) -> tensor<2x1x5xf32>
  %mv = tofu.compute "MatMul"(%x, %vv) {attrs = {}, name = "mv", grad_for = "z"} : (tensor<2x5x4xf32>, tensor<4x1xf32>) -> tensor<2x5x1xf32>
  %mvt = tofu.compute "Transpose"(%mv) {attrs = {perm = array<i64: 0, 2, 1>}, name = "mvt"} : (tensor<2x5x1xf32>) -> tensor<2x1x5xf32>
  return
}

// One Transpose read by several products (an unrolled RNN's transposed
// recurrent weight, one MatMul per timestep): each reads R transposed, and
// the Transpose is erased once.
// CHECK-LABEL: func.func @shared
func.func @shared() {
  %h0 = tofu.input "h0" "features" : tensor<8x4xf32>
  %r = tofu.param "r" : tensor<4x4xf32>
  // CHECK: %[[H0:.*]] = tofu.input "h0"
  // CHECK: %[[R:.*]] = tofu.param "r"
  // CHECK-NOT: "Transpose"
  // CHECK: %[[H1:.*]] = tofu.compute "Gemm"(%[[H0]], %[[R]]) {attrs = {transB = 1 : i64}, name = "h1"}
  // CHECK: tofu.compute "Gemm"(%[[H1]], %[[R]]) {attrs = {transB = 1 : i64}, name = "h2"}
  %rt = tofu.compute "Transpose"(%r) {attrs = {}, name = "rt"} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %h1 = tofu.compute "MatMul"(%h0, %rt) {attrs = {}, name = "h1"} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %h2 = tofu.compute "MatMul"(%h1, %rt) {attrs = {}, name = "h2"} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  return
}
