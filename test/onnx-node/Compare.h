//===- Compare.h - Compare an output with its expected value ----*- C++ -*-===//
//
// ONNX's backend-test comparison (numpy.testing.assert_allclose with rtol
// 1e-3, atol 1e-7) for float outputs, NaN equal to NaN and infinities equal
// when their signs are; integer and bool outputs must match exactly.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TEST_ONNXNODE_COMPARE_H
#define TOFU_TEST_ONNXNODE_COMPARE_H

#include "tofu/Import/OnnxConversion.h"

#include <string>

namespace tofu::nodetest {

struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-7;
};

/// Compares `actual` with `expected`: element types, shapes, then every
/// element. Returns "" when they match, otherwise a message naming the
/// output (`what`) and the worst element: its index, both values and the
/// allowed difference.
std::string compareTensors(const TensorData &actual, const TensorData &expected,
                           const std::string &what, Tolerance tol = {});

} // namespace tofu::nodetest

#endif // TOFU_TEST_ONNXNODE_COMPARE_H
