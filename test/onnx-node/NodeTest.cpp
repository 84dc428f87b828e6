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
#include <set>

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

/// The ONNX element types that tofu's TDL has no type for, by family, or
/// "": float8 (FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ),
/// int4 (INT4, UINT4), string and complex.
std::string elemTypeFamily(int32_t elemType) {
  switch (elemType) {
  case 17: case 18: case 19: case 20:
    return "float8";
  case 21: case 22:
    return "int4";
  case onnx::TensorProto::STRING:
    return "string";
  case onnx::TensorProto::COMPLEX64: case onnx::TensorProto::COMPLEX128:
    return "complex";
  default:
    return "";
  }
}

/// The ONNX name of element type `elemType`, including the types newer than
/// this build's libonnx (1.12) knows.
std::string elemTypeName(int32_t elemType) {
  switch (elemType) {
  case 17: return "FLOAT8E4M3FN";
  case 18: return "FLOAT8E4M3FNUZ";
  case 19: return "FLOAT8E5M2";
  case 20: return "FLOAT8E5M2FNUZ";
  case 21: return "UINT4";
  case 22: return "INT4";
  default: return onnxElemTypeName(elemType);
  }
}

/// Why the graph cannot run because a graph input or output (or an
/// initializer) has an element type that tofu has no type for, or "".
std::string elemTypeOutOfScope(const onnx::GraphProto &graph) {
  auto check = [](const std::string &what, const std::string &name,
                  int32_t elemType) -> std::string {
    std::string family = elemTypeFamily(elemType);
    if (family.empty())
      return "";
    return what + " '" + name + "' has element type " +
           elemTypeName(elemType) + " (" + family +
           "), which tofu has no type for";
  };
  for (const auto &value : graph.input())
    if (value.type().has_tensor_type())
      if (std::string why = check("graph input", value.name(),
                                  value.type().tensor_type().elem_type());
          !why.empty())
        return why;
  for (const auto &value : graph.output())
    if (value.type().has_tensor_type())
      if (std::string why = check("graph output", value.name(),
                                  value.type().tensor_type().elem_type());
          !why.empty())
        return why;
  for (const auto &init : graph.initializer())
    if (std::string why = check("initializer", init.name(), init.data_type());
        !why.empty())
      return why;
  return "";
}

/// Why op `opType` cannot be checked against expected outputs, or "": its
/// outputs are drawn from a random generator (numpy's, in ONNX's test
/// generator), which no implementation reproduces.
std::string randomOpReason(const std::string &opType) {
  static const char *const kRandomOps[] = {
      "Bernoulli",   "Multinomial",       "RandomNormal",
      "RandomNormalLike", "RandomUniform", "RandomUniformLike"};
  for (const char *op : kRandomOps)
    if (opType == op)
      return "random output: " + opType +
             " draws its output from a random generator; its expected "
             "values cannot be reproduced";
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
/// for that value, or "". The ONNX test data (1.12 and 1.17 alike) store the
/// bfloat16 tensors of the Cast/CastLike tests as UINT16 bit patterns,
/// computed by truncating float32 (not rounding to nearest even, as ONNX's
/// Cast specifies): those data cannot check a bfloat16 conversion.
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
              ? " (ONNX's test data hold bfloat16 as uint16 bit patterns, "
                "truncated instead of rounded to nearest even)"
              : "");
}

/// Fills `test` for a graph of several nodes (or one with a Gradient node),
/// which runs whole through tofuc's pipeline: its data sets hold the graph
/// inputs that are not initializers and the graph outputs.
static void loadGraphTest(const std::string &dir,
                          const onnx::ModelProto &model, NodeTest &test) {
  const onnx::GraphProto &graph = model.graph();
  test.graphModel = dir + "/model.onnx";
  for (const auto &node : graph.node())
    if (std::string why = randomOpReason(node.op_type()); !why.empty()) {
      test.skipReason = why;
      return;
    }
  for (const auto &node : graph.node())
    if (!node.domain().empty() && node.domain() != "ai.onnx" &&
        node.domain() != "ai.onnx.preview.training") {
      test.skipReason = "operator domain '" + node.domain() + "' (node '" +
                        node.name() + "', " + node.op_type() + ")";
      return;
    }
  for (const auto &value : graph.input())
    if (!value.type().has_tensor_type()) {
      test.skipReason =
          "graph input '" + value.name() + "' is " + typeKind(value.type());
      return;
    }
  for (const auto &value : graph.output()) {
    if (!value.type().has_tensor_type()) {
      test.skipReason =
          "graph output '" + value.name() + "' is " + typeKind(value.type());
      return;
    }
    test.outputNames.push_back(value.name());
  }
  std::set<std::string> initializers;
  for (const auto &init : graph.initializer())
    initializers.insert(init.name());
  std::vector<const onnx::ValueInfoProto *> fed;
  for (const auto &value : graph.input())
    if (!initializers.count(value.name())) {
      fed.push_back(&value);
      test.inputNames.push_back(value.name());
    }
  std::vector<std::string> sets = dataSetDirs(dir);
  if (sets.empty())
    test.skipReason = "no test_data_set_N directory";
  for (const std::string &setDir : sets) {
    DataSet set;
    set.name = baseName(setDir);
    set.dir = setDir;
    for (size_t k = 0; k < fed.size(); ++k) {
      set.inputs.emplace_back();
      std::string err =
          readTensor(setDir + "/input_" + std::to_string(k) + ".pb",
                     "input '" + fed[k]->name() + "'", set.inputs.back());
      if (err.empty())
        err = storedTypeErratum(*fed[k], set.inputs.back());
      if (!err.empty() && test.skipReason.empty())
        test.skipReason = err;
    }
    for (int k = 0; k < graph.output_size(); ++k) {
      set.expected.emplace_back();
      std::string err =
          readTensor(setDir + "/output_" + std::to_string(k) + ".pb",
                     "output '" + graph.output(k).name() + "'",
                     set.expected.back());
      if (err.empty())
        err = storedTypeErratum(graph.output(k), set.expected.back());
      if (!err.empty() && test.skipReason.empty())
        test.skipReason = err;
    }
    test.dataSets.push_back(std::move(set));
  }
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
  if (graph.node_size() == 1)
    test.opType = graph.node(0).op_type();
  if (std::string why = elemTypeOutOfScope(graph); !why.empty()) {
    test.skipReason = why;
    return test;
  }
  bool hasGradient = false;
  for (const auto &node : graph.node())
    hasGradient |= node.op_type() == "Gradient";
  if (hasGradient || graph.node_size() != 1) {
    loadGraphTest(dir, model, test);
    if (hasGradient)
      test.opType = "Gradient";
    return test;
  }
  onnx::NodeProto node = graph.node(0);
  test.opType = node.op_type();
  if (std::string why = randomOpReason(node.op_type()); !why.empty()) {
    test.skipReason = why;
    return test;
  }
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
      // No spec: the importer may still take the node (Shape, Size,
      // Constant, ConstantOfShape and Range fold at import), so the test
      // runs as a model; an op the importer refuses is a "no TDL spec" skip.
      loadGraphTest(dir, model, test);
      test.opType = node.op_type();
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
    set.dir = setDir;
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
