//===- RunNodeTest.h - Run and classify one ONNX node test ------*- C++ -*-===//
#ifndef TOFU_TEST_ONNXNODE_RUNNODETEST_H
#define TOFU_TEST_ONNXNODE_RUNNODETEST_H

#include "Backend.h"
#include "NodeTest.h"

#include <cstdint>
#include <string>

namespace tofu::nodetest {

/// The outcome of one node test.
struct TestResult {
  enum class Status { Pass, Fail, Skip };
  std::string name;   ///< directory name
  std::string opType; ///< "" unless the graph is a single node
  Status status = Status::Skip;
  std::string how;    ///< what ran: "native", "interpreted", "reference"
  std::string detail; ///< skip reason, or the failure (worst element)
};

const char *statusName(TestResult::Status status);

/// Options of a run.
struct RunOptions {
  Backend backend = Backend::Cpu;
  /// Tests whose inputs and outputs hold more elements are skipped.
  int64_t maxElements = 1 << 20;
  /// Devices k of the plans that graph tests compile and run (k virtual
  /// devices on the CPU executor); single-node tests always run whole.
  int64_t devices = 1;
};

/// Loads the node test in `dir`, instantiates the TDL spec of its node on
/// the inputs of each data set, runs it and compares every output.
TestResult runNodeTest(const std::string &dir, const RunOptions &options);

/// Runs a loaded RNN, LSTM or GRU node test: the node is unrolled into
/// per-step cells as the importer does, and the cells' ops run one by one on
/// the backend. `result` carries the test's name and op type.
TestResult runUnrolledNodeTest(const NodeTest &test, const RunOptions &options,
                               TestResult result);

/// Runs a loaded test whose graph has several nodes (or a Gradient node)
/// through tofuc's pipeline: import, the Gradient's backward ops
/// (`tofu-build-training-step{gradient-graph}`), a forward plan for k = 1
/// (no training step), and one step of it on the CPU runtime's executor.
/// `result` carries the test's name.
TestResult runGraphTest(const NodeTest &test, const RunOptions &options,
                        TestResult result);

/// A short category of a skip reason, for the summary ("no TDL spec",
/// "float8/int4/string/complex element type", ...); "other" when the reason
/// is not a known limitation (a graph test then fails instead).
std::string skipCategory(const std::string &reason);

/// The op a skip reason names when it is "no TDL spec" or "random outputs"
/// (for the summary's per-op breakdown), else "".
std::string skippedOp(const std::string &reason);

} // namespace tofu::nodetest

#endif // TOFU_TEST_ONNXNODE_RUNNODETEST_H
