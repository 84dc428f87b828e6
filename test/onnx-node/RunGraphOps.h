//===- RunGraphOps.h - Run the ops of a multi-op node test ------*- C++ -*-===//
//
// An RNN, LSTM or GRU node test is unrolled into per-step cells
// (RunUnrolledNodeTest.cpp) whose ops then run in order, each like a
// single-op test; this is that part. (Graphs of several nodes run as a plan
// instead: RunGraphTest.cpp.)
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TEST_ONNXNODE_RUNGRAPHOPS_H
#define TOFU_TEST_ONNXNODE_RUNGRAPHOPS_H

#include "Backend.h"
#include "RunNodeTest.h"

#include "tofu/Dialect/Tofu.h"

#include "llvm/ADT/DenseMap.h"

#include <optional>
#include <string>

namespace tofu::nodetest {

/// The value of every SSA value computed so far while a test's ops run.
using GraphValues = llvm::DenseMap<mlir::Value, TensorData>;

/// The initial value of `param` when it holds f32 or i64 data, else nullopt.
std::optional<TensorData> paramInitialValue(ParamOp param);

/// Runs `compute` on `backend` like a single-op test: its operands from
/// `values`, its results stored into `values`. `how` becomes what ran (a
/// non-native way, once seen, is kept). Returns nullopt when it ran,
/// otherwise the test's outcome: Skip for a limitation of the backend
/// (skipCategory), Fail with the data set, op and error named.
std::optional<std::pair<TestResult::Status, std::string>>
runGraphComputeOp(ComputeOp compute, Backend backend,
                  const std::string &setName, GraphValues &values,
                  std::string &how);

} // namespace tofu::nodetest

#endif // TOFU_TEST_ONNXNODE_RUNGRAPHOPS_H
