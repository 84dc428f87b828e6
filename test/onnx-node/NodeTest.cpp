//===- NodeTest.cpp - Load one ONNX backend node test ---------------------===//
//
// Parses model.onnx and the test_data_set_N/*.pb files with libonnx's
// protobuf classes and converts them with the importer's conversions.
//
//===----------------------------------------------------------------------===//
#include "NodeTest.h"

#include "tofu/Import/OpsetNormalization.h"
#include "tofu/Import/RecurrentUnrolling.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <onnx/onnx_pb.h>

#include <algorithm>

namespace tofu::nodetest {

namespace {

/// Parses the protobuf message in file `path` into `message`.
template <typename Message>
std::string parseFile(const std::string &path, Message &message) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return "cannot read " + path + ": " + buffer.getError().message();
  llvm::StringRef bytes = (*buffer)->getBuffer();
  if (!message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return path + " is not a valid protobuf message of its kind";
  return "";
}

std::string baseName(const std::string &path) {
  return llvm::sys::path::filename(path).str();
}

/// The test_data_set_N subdirectories of `dir`, sorted by N.
std::vector<std::string> dataSetDirs(const std::string &dir) {
  std::vector<std::pair<int, std::string>> found;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    int index;
    if (name.consume_front("test_data_set_") && !name.getAsInteger(10, index))
      found.emplace_back(index, it->path());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> result;
  for (auto &entry : found)
    result.push_back(entry.second);
  return result;
}

/// The kind of a non-tensor ValueInfo ("sequence", "optional", ...).
std::string typeKind(const onnx::TypeProto &type) {
  if (type.has_sequence_type())
    return "a sequence";
  if (type.has_optional_type())
    return "an optional";
  if (type.has_map_type())
    return "a map";
  if (type.has_sparse_tensor_type())
    return "a sparse tensor";
  return "not a tensor";
}

/// Reads one TensorProto file and converts it.
std::string readTensor(const std::string &path, const std::string &what,
                       std::optional<TensorData> &out) {
  onnx::TensorProto proto;
  if (std::string err = parseFile(path, proto); !err.empty())
    return err;
  auto data = convertOnnxTensor(proto, what);
  if (!data)
    return llvm::toString(data.takeError());
  out = std::move(*data);
  return "";
}

} // namespace

int64_t NodeTest::totalElements() const {
  int64_t n = 0;
  for (const DataSet &set : dataSets) {
    for (const auto &t : set.inputs)
      if (t)
        n += t->numElements();
    for (const auto &t : set.expected)
      if (t)
        n += t->numElements();
  }
  return n;
}

std::string singleNodeOpType(const std::string &dir) {
  onnx::ModelProto model;
  if (!parseFile(dir + "/model.onnx", model).empty() ||
      model.graph().node_size() != 1)
    return "";
  return model.graph().node(0).op_type();
}

/// Why a data file's element type differs from the type the model declares
/// for that value, or "". libonnx-testdata 1.12 stores the bfloat16 tensors
/// of the Cast/CastLike tests as UINT16 bit patterns, computed by truncating
/// float32 (not rounding, as ONNX's Cast now specifies): those data cannot
/// check a bfloat16 conversion.
static std::string storedTypeErratum(const onnx::ValueInfoProto &value,
                              const std::optional<TensorData> &data) {
  if (!data || !value.type().has_tensor_type())
    return "";
  int32_t declared = value.type().tensor_type().elem_type();
  auto elem = convertOnnxElemType(declared, value.name());
  if (!elem) {
    llvm::consumeError(elem.takeError());
    return "";
  }
  if (*elem == data->type.elem)
    return "";
  return "erratum in the test data: '" + value.name() + "' is stored as " +
         elemTypeString(data->type.elem) + " but the model declares " +
         onnxElemTypeName(declared) +
         (*elem == tdl::ElemType::BF16
              ? " (ONNX 1.12 wrote bfloat16 data as uint16 bit patterns, "
                "truncated instead of rounded to nearest even)"
              : "");
}

NodeTest loadNodeTest(const std::string &dir) {
  NodeTest test;
  test.name = baseName(dir);
  onnx::ModelProto model;
  if (std::string err = parseFile(dir + "/model.onnx", model); !err.empty()) {
    test.skipReason = err;
    return test;
  }
  const onnx::GraphProto &graph = model.graph();
  bool hasGradient = false;
  for (const auto &node : graph.node())
    hasGradient |= node.op_type() == "Gradient";
  if (hasGradient) {
    // The whole graph runs: inputs and outputs are the graph's.
    test.opType = "Gradient";
    test.gradientGraph = dir + "/model.onnx";
    for (const auto &value : graph.output())
      test.outputNames.push_back(value.name());
    std::vector<std::string> sets = dataSetDirs(dir);
    if (sets.empty())
      test.skipReason = "no test_data_set_N directory";
    for (const std::string &setDir : sets) {
      DataSet set;
      set.name = baseName(setDir);
      for (int k = 0; k < graph.input_size(); ++k) {
        set.inputs.emplace_back();
        std::string err =
            readTensor(setDir + "/input_" + std::to_string(k) + ".pb",
                       "input '" + graph.input(k).name() + "'",
                       set.inputs.back());
        if (!err.empty())
          test.skipReason = err;
      }
      for (int k = 0; k < graph.output_size(); ++k) {
        set.expected.emplace_back();
        std::string err =
            readTensor(setDir + "/output_" + std::to_string(k) + ".pb",
                       "output '" + graph.output(k).name() + "'",
                       set.expected.back());
        if (!err.empty())
          test.skipReason = err;
      }
      test.dataSets.push_back(std::move(set));
    }
    return test;
  }
  if (graph.node_size() != 1) {
    test.skipReason =
        "multi-node graph (" + std::to_string(graph.node_size()) + " nodes)";
    return test;
  }
  onnx::NodeProto node = graph.node(0);
  test.opType = node.op_type();
  // The training operators (Adam, Momentum, Adagrad) have TDL specs too.
  if (!node.domain().empty() && node.domain() != "ai.onnx" &&
      node.domain() != "ai.onnx.preview.training") {
    test.skipReason = "operator domain '" + node.domain() + "'";
    return test;
  }
  // The importer's opset normalization may add constants (below).
  std::vector<std::pair<std::string, TensorData>> newConstants;
  if (isRecurrentOpType(node.op_type())) {
    // Unrolled into cells; the unrolling reads the node's attributes.
    test.recurrentNode = node.SerializeAsString();
  } else {
    // Resize and Upsample are normalized into ResizeNearest (below).
    if (!tdl::SpecLibrary::builtin().lookup(node.op_type()) &&
        node.op_type() != "Resize" && node.op_type() != "Upsample") {
      test.skipReason = "no TDL spec for " + node.op_type();
      return test;
    }
    std::string nodeName = node.name().empty() ? test.name : node.name();
    // The importer's opset normalization (attributes that the spec takes as
    // inputs and back), so that old-opset variants run on the same spec.
    {
      int64_t opset = 0;
      for (const auto &entry : model.opset_import())
        if (entry.domain().empty() || entry.domain() == "ai.onnx")
          opset = entry.version();
      std::vector<std::unique_ptr<TensorData>> initData;
      // Initializers, and the graph inputs of the first data set: the node
      // tests pass as inputs what a model gives as constants (Resize's
      // scales), and the importer normalizes with those constants.
      std::vector<std::string> setDirs = dataSetDirs(dir);
      auto constantOf = [&](llvm::StringRef name) -> const TensorData * {
        for (const auto &init : graph.initializer())
          if (init.name() == name) {
            auto data = convertOnnxTensor(init, name);
            if (!data) {
              llvm::consumeError(data.takeError());
              return nullptr;
            }
            initData.push_back(std::make_unique<TensorData>(std::move(*data)));
            return initData.back().get();
          }
        for (int k = 0; k < graph.input_size() && !setDirs.empty(); ++k) {
          if (graph.input(k).name() != name)
            continue;
          std::optional<TensorData> data;
          if (!readTensor(setDirs.front() + "/input_" + std::to_string(k) +
                              ".pb",
                          name.str(), data)
                   .empty() ||
              !data)
            return nullptr;
          initData.push_back(std::make_unique<TensorData>(std::move(*data)));
          return initData.back().get();
        }
        return nullptr;
      };
      auto typeOf = [&](llvm::StringRef name) -> std::optional<tdl::TensorType> {
        for (const auto &value : graph.input()) {
          if (value.name() != name || !value.type().has_tensor_type() ||
              !value.type().tensor_type().has_shape())
            continue;
          const auto &tensor = value.type().tensor_type();
          auto elem = convertOnnxElemType(tensor.elem_type(), name);
          if (!elem) {
            llvm::consumeError(elem.takeError());
            return std::nullopt;
          }
          tdl::TensorType type;
          type.elem = *elem;
          for (const auto &dim : tensor.shape().dim())
            type.dims.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
          return type;
        }
        return std::nullopt;
      };
      if (auto err = normalizeOnnxNode(node, opset, "node '" + nodeName + "'",
                                       constantOf, typeOf, newConstants)) {
        test.skipReason = "instantiation: " + llvm::toString(std::move(err));
        return test;
      }
    }
    if (!tdl::SpecLibrary::builtin().lookup(node.op_type())) {
      test.skipReason = "no TDL spec for " + node.op_type();
      return test;
    }
    test.specOp = node.op_type();
    auto attrs = convertOnnxAttributes(node, nodeName);
    if (!attrs) {
      test.skipReason = llvm::toString(attrs.takeError());
      return test;
    }
    test.attrs = std::move(*attrs);
  }
  for (const auto &value : graph.input())
    if (!value.type().has_tensor_type()) {
      test.skipReason =
          "graph input '" + value.name() + "' is " + typeKind(value.type());
      return test;
    }
  for (const auto &value : graph.output())
    if (!value.type().has_tensor_type()) {
      test.skipReason =
          "graph output '" + value.name() + "' is " + typeKind(value.type());
      return test;
    }
  test.outputNames.assign(node.output().begin(), node.output().end());

  std::vector<std::string> sets = dataSetDirs(dir);
  if (sets.empty()) {
    test.skipReason = "no test_data_set_N directory";
    return test;
  }
  for (const std::string &setDir : sets) {
    DataSet set;
    set.name = baseName(setDir);
    // Values by name: initializers, then this data set's graph inputs.
    llvm::StringMap<std::optional<TensorData>> values;
    for (const auto &init : graph.initializer()) {
      auto data = convertOnnxTensor(init, "initializer '" + init.name() + "'");
      if (!data) {
        test.skipReason = llvm::toString(data.takeError());
        return test;
      }
      values[init.name()] = std::move(*data);
    }
    for (const auto &[name, data] : newConstants)
      values[name] = data;
    for (int k = 0; k < graph.input_size(); ++k) {
      const std::string &name = graph.input(k).name();
      if (values.count(name))
        continue; // an initializer listed as an input
      std::optional<TensorData> data;
      std::string err =
          readTensor(setDir + "/input_" + std::to_string(k) + ".pb",
                     "input '" + name + "'", data);
      if (!err.empty()) {
        test.skipReason = err;
        return test;
      }
      if (std::string why = storedTypeErratum(graph.input(k), data);
          !why.empty()) {
        test.skipReason = why;
        return test;
      }
      values[name] = std::move(data);
    }
    for (const std::string &name : node.input()) {
      if (name.empty()) {
        set.inputs.push_back(std::nullopt);
        continue;
      }
      auto it = values.find(name);
      if (it == values.end()) {
        test.skipReason = "node input '" + name + "' is not a graph input";
        return test;
      }
      set.inputs.push_back(it->second);
    }
    set.expected.resize(node.output_size());
    for (int k = 0; k < graph.output_size(); ++k) {
      const std::string &name = graph.output(k).name();
      auto pos = std::find(test.outputNames.begin(), test.outputNames.end(),
                           name);
      if (pos == test.outputNames.end()) {
        test.skipReason = "graph output '" + name + "' is not a node output";
        return test;
      }
      std::string err =
          readTensor(setDir + "/output_" + std::to_string(k) + ".pb",
                     "output '" + name + "'", set.expected[pos - test.outputNames.begin()]);
      if (!err.empty()) {
        test.skipReason = err;
        return test;
      }
      if (std::string why = storedTypeErratum(
              graph.output(k), set.expected[pos - test.outputNames.begin()]);
          !why.empty()) {
        test.skipReason = why;
        return test;
      }
    }
    test.dataSets.push_back(std::move(set));
  }
  return test;
}

} // namespace tofu::nodetest
