//===- RandomModel.h - small random training graphs for tests ---*- C++ -*-===//
//
// Random graphs of MatMul layers, fork-joins (two MatMuls added) and
// same-shape element-wise ops with extents drawn from a list, as tofu
// dialect IR (before the training step is built): the inputs of the
// partitioning property tests.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TEST_UNIT_PARTITION_RANDOMMODEL_H
#define TOFU_TEST_UNIT_PARTITION_RANDOMMODEL_H

#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace tofu::test {

/// A random training graph: `layers` steps applied to x [B, F], each a
/// MatMul with a new weight, a fork-join of two MatMuls summed by Add, or a
/// same-shape element-wise op; the loss is the sum of the last activation
/// (without `training`, no loss). Extents are drawn from `sizes`.
inline std::string randomModel(unsigned seed, int layers,
                               const std::vector<int64_t> &sizes,
                               bool training = true) {
  std::mt19937 rng(seed);
  auto pick = [&](const std::vector<int64_t> &from) {
    return from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(rng)];
  };
  std::ostringstream ir;
  int64_t batch = pick(sizes), width = pick(sizes);
  auto type = [](int64_t a, int64_t b) {
    return "tensor<" + std::to_string(a) + "x" + std::to_string(b) + "xf32>";
  };
  ir << "func.func @main() {\n";
  ir << "  %v0 = tofu.input \"x\" \"features\" : " << type(batch, width)
     << "\n";
  int value = 0, param = 0;
  auto matmul = [&](int input, int64_t in, int64_t out) {
    int w = param++;
    ir << "  %w" << w << " = tofu.param \"w" << w
       << "\" {value = dense<0.5> : " << type(in, out) << "} : "
       << type(in, out) << "\n";
    ++value;
    ir << "  %v" << value << " = tofu.compute \"MatMul\"(%v" << input << ", %w"
       << w << ") {attrs = {}, name = \"mm" << w << "\"} : ("
       << type(batch, in) << ", " << type(in, out) << ") -> "
       << type(batch, out) << "\n";
    return value;
  };
  for (int layer = 0; layer < layers; ++layer) {
    int kind = std::uniform_int_distribution<int>(0, 3)(rng);
    if (kind <= 1) {
      int64_t out = pick(sizes);
      matmul(value, width, out);
      width = out;
    } else if (kind == 2) {
      int input = value;
      int64_t out = pick(sizes);
      int a = matmul(input, width, out);
      int b = matmul(input, width, out);
      width = out;
      ++value;
      ir << "  %v" << value << " = tofu.compute \"Add\"(%v" << a << ", %v" << b
         << ") {attrs = {}, name = \"add" << value << "\"} : ("
         << type(batch, width) << ", " << type(batch, width) << ") -> "
         << type(batch, width) << "\n";
    } else {
      const char *op = std::uniform_int_distribution<int>(0, 1)(rng) ? "Relu"
                                                                     : "Tanh";
      ++value;
      ir << "  %v" << value << " = tofu.compute \"" << op << "\"(%v"
         << value - 1 << ") {attrs = {}, name = \"act" << value << "\"} : ("
         << type(batch, width) << ") -> " << type(batch, width) << "\n";
    }
  }
  if (!training) {
    ir << "  return\n}\n";
    return ir.str();
  }
  ir << "  %loss = tofu.compute \"ReduceSum\"(%v" << value
     << ") {attrs = {keepdims = 0 : i64}, name = \"loss\"} : ("
     << type(batch, width) << ") -> tensor<f32>\n";
  ir << "  tofu.loss %loss : tensor<f32>\n  return\n}\n";
  return ir.str();
}

} // namespace tofu::test

#endif // TOFU_TEST_UNIT_PARTITION_RANDOMMODEL_H
