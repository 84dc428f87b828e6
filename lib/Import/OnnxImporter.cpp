//===- OnnxImporter.cpp - ONNX model -> tofu IR ---------------------------===//
//
// Reads an ONNX ModelProto with protobuf and builds the forward graph in the
// tofu dialect. Shapes come from tofuc's own TDL shape inference (libonnx's
// schemas stop at opset 17), so every node's op type must have a TDL spec.
//
//===----------------------------------------------------------------------===//
#include "tofu/Import/OnnxImporter.h"
#include "tofu/Import/OnnxConversion.h"
#include "tofu/Dialect/TdlInstance.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"

#include <onnx/onnx_pb.h>

using namespace mlir;

namespace tofu {

uint64_t fingerprintBytes(llvm::ArrayRef<uint8_t> bytes) {
  uint64_t hash = 1469598103934665603ull;
  for (uint8_t b : bytes) {
    hash ^= b;
    hash *= 1099511628211ull;
  }
  return hash;
}

namespace {

/// Initializers up to this many elements are recorded for const operands.
constexpr int64_t kMaxConstElements = 1 << 16;

/// Builds the tofu IR of one ONNX graph; every error names the model file.
class OnnxImporter {
public:
  OnnxImporter(MLIRContext *ctx, StringRef path) : ctx(ctx), path(path) {}

  llvm::Error importGraph(const onnx::ModelProto &model, ModuleOp module);

private:
  llvm::Error error(const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": " + message.str());
  }
  llvm::Expected<RankedTensorType> importType(const onnx::ValueInfoProto &info);
  llvm::Expected<RankedTensorType>
  tensorType(int32_t elemType, ArrayRef<int64_t> dims, StringRef what);
  llvm::Expected<DenseElementsAttr>
  importInitializer(const onnx::TensorProto &tensor, RankedTensorType type);

  llvm::Error importConstantNode(OpBuilder &builder, Location fileLoc,
                                 const onnx::NodeProto &node,
                                 const std::string &where);

  MLIRContext *ctx;
  std::string path;
  llvm::StringMap<Value> values;
  /// Values of the initializers and Constant outputs, for const operands
  /// (shapes, axes, starts, ...) of the nodes that use them.
  llvm::StringMap<std::vector<double>> constants;
};

} // namespace

llvm::Expected<RankedTensorType>
OnnxImporter::tensorType(int32_t elemType, ArrayRef<int64_t> dims,
                         StringRef what) {
  auto elem = convertOnnxElemType(elemType, what);
  if (!elem)
    return error(llvm::toString(elem.takeError()));
  if (isBoolElemType(*elem))
    return error(what + " has ONNX element type BOOL, which the importer does "
                        "not support yet (FLOAT and INT64 are)");
  tdl::TensorType type;
  type.dims.assign(dims.begin(), dims.end());
  type.elem = *elem;
  return fromTdlType(ctx, type);
}

llvm::Expected<RankedTensorType>
OnnxImporter::importType(const onnx::ValueInfoProto &info) {
  std::string what = "graph input '" + info.name() + "'";
  if (!info.type().has_tensor_type())
    return error(what + " is not a tensor");
  const auto &tensor = info.type().tensor_type();
  if (!tensor.has_shape())
    return error(what + " has no shape; export the model with static shapes");
  SmallVector<int64_t> dims;
  for (const auto &dim : tensor.shape().dim()) {
    if (!dim.has_dim_value() || dim.dim_value() <= 0)
      return error(what + " has a symbolic dimension '" + dim.dim_param() +
                   "'; binding symbolic dimensions (--shape/--batch) is not "
                   "supported yet: export the model with static shapes");
    dims.push_back(dim.dim_value());
  }
  return tensorType(tensor.elem_type(), dims, what);
}

llvm::Expected<DenseElementsAttr>
OnnxImporter::importInitializer(const onnx::TensorProto &tensor,
                                RankedTensorType type) {
  auto data = convertOnnxTensor(tensor, "initializer '" + tensor.name() + "'");
  if (!data)
    return error(llvm::toString(data.takeError()));
  return DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(reinterpret_cast<const char *>(data->bytes.data()),
                           data->bytes.size()));
}

/// A Constant node becomes a parameter holding its value (like an
/// initializer); its values are recorded for const operands.
llvm::Error OnnxImporter::importConstantNode(OpBuilder &builder,
                                             Location fileLoc,
                                             const onnx::NodeProto &node,
                                             const std::string &where) {
  if (node.output_size() != 1)
    return error(where + ": a Constant has one output");
  onnx::TensorProto tensor;
  bool found = false;
  for (const auto &attr : node.attribute()) {
    if (attr.name() == "value" && attr.has_t()) {
      tensor = attr.t();
      found = true;
    } else if (attr.name() == "value_int" || attr.name() == "value_ints") {
      tensor.set_data_type(onnx::TensorProto::INT64);
      if (attr.name() == "value_int")
        tensor.add_int64_data(attr.i());
      else {
        tensor.add_dims(attr.ints_size());
        for (int64_t v : attr.ints())
          tensor.add_int64_data(v);
      }
      found = true;
    } else if (attr.name() == "value_float" || attr.name() == "value_floats") {
      tensor.set_data_type(onnx::TensorProto::FLOAT);
      if (attr.name() == "value_float")
        tensor.add_float_data(attr.f());
      else {
        tensor.add_dims(attr.floats_size());
        for (float v : attr.floats())
          tensor.add_float_data(v);
      }
      found = true;
    }
  }
  if (!found)
    return error(where + ": only 'value', 'value_int(s)' and "
                         "'value_float(s)' Constants are supported");
  const std::string &name = node.output(0);
  tensor.set_name(name);
  SmallVector<int64_t> dims(tensor.dims().begin(), tensor.dims().end());
  auto type = tensorType(tensor.data_type(), dims, where);
  if (!type)
    return type.takeError();
  auto value = importInitializer(tensor, *type);
  if (!value)
    return value.takeError();
  auto data = convertOnnxTensor(tensor, where);
  if (!data)
    return error(llvm::toString(data.takeError()));
  std::vector<double> &c = constants[name];
  for (int64_t k = 0; k < data->numElements(); ++k)
    c.push_back(data->valueAt(k));
  auto param = ParamOp::create(
      builder, NameLoc::get(builder.getStringAttr(name), fileLoc), *type, name,
      *value);
  values[name] = param.getResult();
  return llvm::Error::success();
}

/// Number of classes of a labels input, read from the op that consumes it:
/// the loss ops take (scores [N, C], labels [N]).
static std::optional<int64_t> classesOfLabels(Value labels) {
  for (Operation *user : labels.getUsers()) {
    auto compute = dyn_cast<ComputeOp>(user);
    if (!compute || compute.getInputs().size() < 2 ||
        compute.getInputs()[1] != labels)
      continue;
    if (compute.getSpec() == "SoftmaxCrossEntropyLoss" ||
        compute.getSpec() == "NegativeLogLikelihoodLoss") {
      auto scores = cast<RankedTensorType>(compute.getInputs()[0].getType());
      if (scores.getRank() >= 2)
        return scores.getDimSize(1);
    }
  }
  return std::nullopt;
}

llvm::Error OnnxImporter::importGraph(const onnx::ModelProto &model,
                                      ModuleOp module) {
  const onnx::GraphProto &graph = model.graph();
  for (const auto &opset : model.opset_import())
    if ((opset.domain().empty() || opset.domain() == "ai.onnx") &&
        (opset.version() < 7 || opset.version() > 21))
      return error("opset " + std::to_string(opset.version()) +
                   " is not supported (opsets 7 to 21 are)");

  OpBuilder builder(ctx);
  Location fileLoc = FileLineColLoc::get(ctx, path, 0, 0);
  auto func =
      func::FuncOp::create(fileLoc, "main", builder.getFunctionType({}, {}));
  module.push_back(func);
  Block *body = func.addEntryBlock();
  builder.setInsertionPointToStart(body);

  llvm::StringSet<> initializerNames;
  for (const auto &init : graph.initializer()) {
    initializerNames.insert(init.name());
    SmallVector<int64_t> dims(init.dims().begin(), init.dims().end());
    auto type =
        tensorType(init.data_type(), dims, "initializer '" + init.name() + "'");
    if (!type)
      return type.takeError();
    auto value = importInitializer(init, *type);
    if (!value)
      return value.takeError();
    if (auto data = convertOnnxTensor(init, "initializer '" + init.name() + "'");
        data && data->numElements() <= kMaxConstElements) {
      std::vector<double> &c = constants[init.name()];
      for (int64_t k = 0; k < data->numElements(); ++k)
        c.push_back(data->valueAt(k));
    } else if (!data) {
      llvm::consumeError(data.takeError());
    }
    auto param = ParamOp::create(
        builder, NameLoc::get(builder.getStringAttr(init.name()), fileLoc),
        *type, init.name(), *value);
    values[init.name()] = param.getResult();
  }

  SmallVector<InputOp> labelInputs;
  std::string firstFeatures;
  for (const auto &input : graph.input()) {
    if (initializerNames.contains(input.name()))
      continue;
    auto type = importType(input);
    if (!type)
      return type.takeError();
    bool isLabels = type->getElementType().isInteger(64);
    auto op = InputOp::create(
        builder, NameLoc::get(builder.getStringAttr(input.name()), fileLoc),
        *type, input.name(), isLabels ? "labels" : "features", IntegerAttr(),
        StringAttr());
    if (isLabels)
      labelInputs.push_back(op);
    else if (firstFeatures.empty())
      firstFeatures = input.name();
    values[input.name()] = op.getResult();
  }

  llvm::StringSet<> usedNames;
  for (const auto &[index, node] : llvm::enumerate(graph.node())) {
    std::string nodeName = node.name();
    if (nodeName.empty())
      nodeName = node.output_size()
                     ? node.output(0)
                     : node.op_type() + "_" + std::to_string(index);
    if (!usedNames.insert(nodeName).second)
      nodeName += "_" + std::to_string(index);
    std::string where = "node '" + nodeName + "' (" + node.op_type() + ")";
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      return error(where + ": operator domain '" + node.domain() +
                   "' is not supported");
    if (node.op_type() == "Constant") {
      if (auto err = importConstantNode(builder, fileLoc, node, where))
        return err;
      continue;
    }
    const tdl::OpSpec *spec = tdl::SpecLibrary::builtin().lookup(node.op_type());
    if (!spec)
      return error(where + ": operator '" + node.op_type() +
                   "' has no TDL spec, so tofuc cannot partition or train it; "
                   "see docs/TDL.md for adding one (one spec in tdl-specs/ "
                   "plus its kernels)");
    SmallVector<Value> operands;
    bool sawAbsent = false;
    for (const std::string &name : node.input()) {
      if (name.empty()) {
        sawAbsent = true;
        continue;
      }
      if (sawAbsent)
        return error(where + ": an omitted optional input before a present "
                             "one is not supported");
      auto it = values.find(name);
      if (it == values.end())
        return error(where + ": input '" + name +
                     "' is not produced by any earlier node, initializer or "
                     "graph input (the graph must be topologically sorted)");
      operands.push_back(it->second);
    }
    auto attrs = convertOnnxAttributes(node, nodeName);
    if (!attrs)
      return error(llvm::toString(attrs.takeError()));
    // A variadic output's count (Split without `split`) is the node's.
    if (tdl::takesOutputCount(*spec) && !attrs->count("num_outputs"))
      (*attrs)["num_outputs"] = tdl::AttrValue::ofInt(node.output_size());
    ConstValues constValues;
    unsigned operandIndex = 0;
    for (const std::string &name : node.input()) {
      if (name.empty())
        continue;
      unsigned i = operandIndex++;
      if (!tdl::isConstInput(*spec, i))
        continue;
      auto c = constants.find(name);
      if (c == constants.end())
        return error(where + ": input '" + name + "' (operand " +
                     std::to_string(i) +
                     ") must be known at compile time (an initializer or a "
                     "Constant node), but it is computed");
      constValues[i] = c->second;
    }
    auto instance = instantiateSpec(node.op_type(),
                                    ValueRange(operands).getTypes(), *attrs,
                                    constValues);
    if (!instance)
      return error(where + ": " + llvm::toString(instance.takeError()));
    // ONNX lets a node omit trailing optional outputs (a one-output
    // LayerNormalization, say); the op still computes every output the spec
    // declares and the omitted ones are simply unused.
    if (instance->outputTypes().size() <
        static_cast<size_t>(node.output_size()))
      return error(where + ": the node has " +
                   std::to_string(node.output_size()) +
                   " outputs but the TDL "
                   "spec of " +
                   node.op_type() + " declares " +
                   std::to_string(instance->outputTypes().size()));
    SmallVector<Type> resultTypes;
    for (const auto &type : instance->outputTypes())
      resultTypes.push_back(fromTdlType(ctx, type));
    auto compute = ComputeOp::create(
        builder, NameLoc::get(builder.getStringAttr(nodeName), fileLoc),
        resultTypes, node.op_type(), operands,
        fromTdlAttrs(ctx, *attrs, constValues),
        nodeName, StringAttr());
    for (auto [i, name] : llvm::enumerate(node.output()))
      if (!name.empty())
        values[name] = compute.getResult(i);
  }

  for (InputOp labels : labelInputs) {
    auto classes = classesOfLabels(labels.getResult());
    if (!classes)
      return error("integer graph input '" + labels.getSymName() +
                   "' does not feed the labels of a loss; integer inputs "
                   "other than class labels are not supported yet");
    labels.setClassesAttr(builder.getI64IntegerAttr(*classes));
    if (!firstFeatures.empty())
      labels.setLabelsForAttr(builder.getStringAttr(firstFeatures));
  }

  if (graph.output_size() == 1) {
    auto it = values.find(graph.output(0).name());
    if (it == values.end())
      return error("graph output '" + graph.output(0).name() +
                   "' is not produced by any node");
    auto type = cast<RankedTensorType>(it->second.getType());
    if (type.getRank() == 0 && type.getElementType().isF32())
      LossOp::create(builder, fileLoc, it->second);
  }
  func::ReturnOp::create(builder, fileLoc);
  return llvm::Error::success();
}

llvm::Expected<ImportedModel> importOnnxFile(MLIRContext *context,
                                             StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        path + ": cannot read the model: " + buffer.getError().message());
  ImportedModel result;
  StringRef bytes = (*buffer)->getBuffer();
  result.modelBytes.assign(bytes.begin(), bytes.end());
  result.fingerprint = fingerprintBytes(result.modelBytes);

  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromArray(bytes.data(), bytes.size()))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        path + ": not a valid ONNX model (protobuf parsing failed after " +
            std::to_string(bytes.size()) +
            " bytes); the file may be truncated or corrupt: re-export it");
  if (!model.has_graph() || model.graph().node_size() == 0)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path +
                                       ": the ONNX model has no graph nodes");

  context->loadDialect<TofuDialect, func::FuncDialect>();
  result.module = ModuleOp::create(FileLineColLoc::get(context, path, 0, 0));
  OnnxImporter importer(context, path);
  if (llvm::Error err = importer.importGraph(model, *result.module))
    return std::move(err);
  return std::move(result);
}

} // namespace tofu
