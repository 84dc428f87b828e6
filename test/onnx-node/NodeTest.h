//===- NodeTest.h - One ONNX backend node test, loaded ----------*- C++ -*-===//
//
// An ONNX backend node test is a directory holding model.onnx and one or more
// test_data_set_N/ directories of input_K.pb / output_K.pb TensorProtos (K in
// the order of the graph's inputs / outputs). `loadNodeTest` reads one and
// decides whether tofuc can run it: a single node of the default domain whose
// op type has a TDL spec runs on its own; a graph of several nodes (the
// `*_expanded` function expansions, a Gradient) runs whole through tofuc's
// pipeline (RunGraphTest.cpp). Operands must be tensors of supported element
// types.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TEST_ONNXNODE_NODETEST_H
#define TOFU_TEST_ONNXNODE_NODETEST_H

#include "tofu/Import/OnnxConversion.h"

#include <optional>
#include <string>
#include <vector>

namespace tofu::nodetest {

/// The inputs and expected outputs of one test_data_set_N directory.
struct DataSet {
  std::string name; ///< e.g. "test_data_set_0"
  std::string dir;  ///< its directory
  /// One entry per node input; nullopt for an omitted optional input.
  std::vector<std::optional<TensorData>> inputs;
  /// One entry per node output; nullopt when the graph does not output it.
  std::vector<std::optional<TensorData>> expected;
};

/// A loaded node test. When `skipReason` is non-empty the test cannot run
/// and the other fields may be incomplete (`opType` is set whenever the
/// graph is a single node).
struct NodeTest {
  std::string name;   ///< directory name, e.g. "test_abs"
  std::string opType; ///< the single node's op type
  /// The TDL spec the node runs on after the importer's opset normalization
  /// (ResizeNearest for Resize); empty = `opType`.
  std::string specOp;
  std::string skipReason;
  tdl::AttrMap attrs;
  std::vector<std::string> outputNames; ///< node outputs ("" = omitted)
  /// The serialized NodeProto of an RNN, LSTM or GRU node: it has no TDL
  /// spec and runs unrolled into per-step cells (RunUnrolledNodeTest.cpp).
  std::string recurrentNode;
  /// The model path of a graph of several nodes (or with a Gradient node):
  /// it is compiled whole into a forward plan and run on the CPU runtime
  /// (RunGraphTest.cpp). `outputNames` are then the graph's outputs, each
  /// data set's inputs the graph's inputs that are not initializers
  /// (`inputNames`).
  std::string graphModel;
  std::vector<std::string> inputNames; ///< graph tests: the fed inputs
  std::vector<DataSet> dataSets;

  /// Elements of all inputs and expected outputs of all data sets.
  int64_t totalElements() const;
};

/// Loads the node test in directory `dir`. Never fails: problems become a
/// skip reason.
NodeTest loadNodeTest(const std::string &dir);

/// The op type of `dir`'s model when its graph is a single node, else "".
std::string singleNodeOpType(const std::string &dir);

} // namespace tofu::nodetest

#endif // TOFU_TEST_ONNXNODE_NODETEST_H
