//===- OnnxImporter.cpp - ONNX model -> tofu IR ---------------------------===//
//
// Reads an ONNX ModelProto (binary protobuf, or ONNX text format for
// `.onnxtxt` files) and builds the forward graph in the tofu dialect. Shapes
// come from tofuc's own TDL shape inference (libonnx's schemas stop at
// opset 17), so every node that is not folded must have a TDL spec.
//
// Compile-time constants: Constant nodes, integer initializers and the
// results of foldable nodes (ConstantFolding.h) are kept as values, not IR.
// A node's const operand (a shape, axes, ...) takes them from there; where a
// node reads a constant at run time it is materialized once as a
// non-trainable `tofu.param ... {constant}`.
//
//===----------------------------------------------------------------------===//
#include "tofu/Import/OnnxImporter.h"
#include "tofu/Dialect/TdlInstance.h"
#include "tofu/Import/ConstantFolding.h"
#include "tofu/Import/EmbeddedData.h"
#include "tofu/Import/ExternalData.h"
#include "tofu/Import/InitializationGraph.h"
#include "tofu/Import/OnnxConversion.h"
#include "tofu/Import/RecurrentUnrolling.h"
#include "tofu/Import/OpsetNormalization.h"
#include "tofu/Import/TrainableLists.h"
#include "tofu/Import/TrainingAlgorithm.h"
#include "tofu/runtime/ElementAccess.h"
#include "tofu/runtime/InputFile.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/xxhash.h"

#include <onnx/checker.h>
#include <onnx/defs/parser.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <unistd.h>
#include <limits>
#include <map>

using namespace mlir;

namespace tofu {

uint64_t fingerprintBytes(llvm::ArrayRef<uint8_t> bytes) {
  return llvm::xxh3_64bits(bytes);
}

namespace {

/// The default-domain opsets the importer takes: from 6 (the pytorch
/// exports of the onnx backend test suites) to 22 (onnx 1.17);
/// OpsetNormalization.h rewrites every older form into the specs' one.
constexpr int64_t kMinOpset = 6, kMaxOpset = 22;

/// Initializers up to this many elements are recorded for const operands.
constexpr int64_t kMaxConstElements = 1 << 16;

/// A compile-time value of the graph.
struct KnownTensor {
  tdl::DenseTensor tensor;
  /// True for Constant nodes, folded results and integer initializers: it
  /// may be folded into other constants. False for float initializers, which
  /// are trainable weights (their values only serve const operands).
  bool foldable = false;
};

/// Builds the tofu IR of one ONNX graph; every error names the model file.
class OnnxImporter {
public:
  OnnxImporter(MLIRContext *ctx, StringRef path, const ImportOptions &options)
      : ctx(ctx), path(path), options(options), builder(ctx),
        fileLoc(FileLineColLoc::get(ctx, path, 0, 0)),
        externalData(path, options.allowHardlinkedData) {}

  llvm::Error importGraph(const onnx::ModelProto &model, ModuleOp module);
  /// Runs training_info's initialization graph at compile time and folds
  /// its results into the initializers (InitializationGraph.h); `changed`
  /// says whether there was one.
  llvm::Error applyInitialization(onnx::ModelProto &model, bool &changed);

  /// xxh3 hashes of the external data ranges read, in initializer order.
  std::vector<uint64_t> externalHashes;
  /// True when some parameter was imported without its value.
  bool withoutWeights = false;
  /// How many nodes of each op type were folded at import (for --verbose).
  std::map<std::string, int> foldedOps;
  ExternalDataResolver &resolver() { return externalData; }

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
  /// Imports a float initializer as a tofu.param: its value from the
  /// protobuf, or mapped from its external data file (no copy), or none
  /// (--no-weights with a missing data file).
  llvm::Error importWeight(const onnx::TensorProto &init);
  /// Marks the parameters that the model's metadata_props lists
  /// (`tofu.frozen`, `tofu.trainable`; TrainableLists.h) name:
  /// `tofu.param {trainable = false / true}`.
  llvm::Error markTrainableParams(const onnx::ModelProto &model,
                                  const llvm::StringSet<> &initializerNames);
  /// The data of an integer initializer (a compile-time constant), external
  /// or not.
  llvm::Expected<TensorData> readSmallTensor(const onnx::TensorProto &init);
  /// readSmallTensor's work; its errors do not name the file.
  llvm::Expected<TensorData> readTensorData(const onnx::TensorProto &init);

  /// Records the value of a Constant node.
  llvm::Error importConstantNode(const onnx::NodeProto &node,
                                 const std::string &where);
  /// Folds `node` when it is foldable and its inputs are known; returns
  /// true when it did (its outputs are then constants).
  llvm::Expected<bool> tryFold(const onnx::NodeProto &node,
                               const std::string &where);
  /// The IR value of tensor `name`, materializing a constant if needed.
  llvm::Expected<Value> valueOf(const std::string &name,
                                const std::string &where);
  /// Unrolls an RNN, LSTM or GRU node into per-step cells
  /// (RecurrentUnrolling.h).
  llvm::Error importRecurrentNode(const onnx::NodeProto &node,
                                  StringRef nodeName, const std::string &where);
  /// Imports a node of the default domain or an optimizer node: folded, or
  /// one tofu.compute of its TDL spec.
  llvm::Error importSpecNode(const onnx::NodeProto &node,
                             const std::string &nodeName,
                             const std::string &where);
  /// Refuses a Gather, GatherElements, GatherND, ScatterElements or
  /// ScatterND whose indices are a compile-time constant (an integer
  /// initializer, a Constant node, folded arithmetic) with an index outside
  /// [-n, n), n the size of the dim it indexes (the axis, or for the ND ops
  /// data's dim batch_dims + k for component k of an index tuple).
  llvm::Error checkConstantIndices(const onnx::NodeProto &node,
                                   const std::string &where);
  /// Refuses a ReduceMax over one axis whose input an ArgMax over the same
  /// axis also reads: torch.max(x, dim) with its indices used, whose
  /// gradient at ties (all of dY to the returned index) differs from
  /// ReduceMax's rule (torch.amax's: ties share dY evenly).
  llvm::Error refuseTorchMaxWithIndices(const onnx::NodeProto &node,
                                        ArrayRef<const onnx::NodeProto *> nodes,
                                        const std::string &where);
  /// True for `T + 1` with T an updated int64 scalar (a training
  /// algorithm's update count), which is imported as StepCount; puts T
  /// first.
  bool isStepCount(onnx::NodeProto &node);
  /// Imports a Gradient node: one tofu.gradient per output.
  llvm::Error importGradientNode(const TrainingAlgorithm::Gradient &node,
                                 const std::string &nodeName,
                                 const std::string &where);
  /// Imports an integer initializer that the training algorithm updates
  /// (an update count): a run-time tofu.param, not a constant.
  llvm::Error importMutableInteger(const onnx::TensorProto &init);
  /// Marks the loss and the update_binding of a training algorithm.
  llvm::Error importTrainingUpdates(const TrainingAlgorithm &algorithm);

  MLIRContext *ctx;
  std::string path;
  const ImportOptions &options;
  OpBuilder builder;
  Location fileLoc;
  ExternalDataResolver externalData;
  /// The version of the default ONNX domain the model imports.
  int64_t defaultOpset = 0;
  /// Types the model declares for values (value_info and graph outputs).
  llvm::StringMap<const onnx::TypeProto *> declaredTypes;
  /// Checks the type TDL inference gave `name` against the model's
  /// declaration, if any (static dims only; symbolic dims match anything).
  llvm::Error checkDeclaredType(const std::string &name,
                                const tdl::TensorType &inferred,
                                const std::string &where);
  llvm::StringMap<Value> values;
  /// Compile-time values: initializers (up to kMaxConstElements), Constant
  /// outputs and folded results, for const operands and folding.
  llvm::StringMap<KnownTensor> constants;
  /// The model's training algorithm and Gradient node (set by importGraph).
  const TrainingAlgorithm *algorithm = nullptr;
  /// The tofu.gradient of each tensor named in a Gradient's xs (the first
  /// Gradient's where several differentiate it).
  llvm::StringMap<Value> gradients;
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
                        "not support at run time yet (FLOAT and INT64 are; "
                        "bool constants are folded at import)");
  if (auto err = checkTensorShape(dims, what))
    return error(llvm::toString(std::move(err)));
  tdl::TensorType type;
  type.dims.assign(dims.begin(), dims.end());
  type.elem = *elem;
  return fromTdlType(ctx, type);
}

/// True for the ONNX floating-point element types (the trainable ones).
static bool isOnnxFloatType(int32_t type) {
  return type == onnx::TensorProto::FLOAT ||
         type == onnx::TensorProto::DOUBLE ||
         type == onnx::TensorProto::FLOAT16 ||
         type == onnx::TensorProto::BFLOAT16;
}

/// "4x3x224" for `dims`.
static std::string formatDims(ArrayRef<int64_t> dims) {
  std::string text;
  for (auto [i, d] : llvm::enumerate(dims))
    text += (i ? "x" : "") + std::to_string(d);
  return text;
}

/// `name` for a one-line message: control characters (a newline, an
/// escape sequence) and bytes outside ASCII are written as \xNN.
static std::string printableName(StringRef name) {
  std::string out;
  for (unsigned char c : name) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

/// The largest stride, dilation, pad or kernel size tofuc accepts: far above
/// any real window, far below where the output-size arithmetic overflows.
static constexpr int64_t kMaxWindowAttribute = int64_t(1) << 31;

/// ONNX's windowed ops (Conv, ConvTranspose, the pools) need strides,
/// dilations and kernel sizes >= 1 and pads >= 0: refused here as a model
/// error naming the node and the attribute, rather than later as a TDL
/// "division by zero" or an overflow inside a spec.
static llvm::Error checkWindowAttributes(const onnx::NodeProto &node,
                                         const std::string &where) {
  static const llvm::StringSet<> windowed = {
      "Conv",        "ConvTranspose", "MaxPool",      "AveragePool",
      "LpPool",      "ConvInteger",   "QLinearConv",  "MaxUnpool",
      "DeformConv"};
  if (!windowed.contains(node.op_type()))
    return llvm::Error::success();
  for (const onnx::AttributeProto &attr : node.attribute()) {
    int64_t lo;
    if (attr.name() == "strides" || attr.name() == "dilations" ||
        attr.name() == "kernel_shape")
      lo = 1;
    else if (attr.name() == "pads" || attr.name() == "output_padding")
      lo = 0;
    else
      continue;
    for (int i = 0; i < attr.ints_size(); ++i) {
      int64_t v = attr.ints(i);
      if (v < lo || v > kMaxWindowAttribute)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            where + ": attribute " + attr.name() + "[" + std::to_string(i) +
                "] = " + std::to_string(v) + " is out of range (" +
                attr.name() + " must lie in [" + std::to_string(lo) + ", " +
                std::to_string(kMaxWindowAttribute) + "])");
    }
  }
  return llvm::Error::success();
}

llvm::Expected<RankedTensorType>
OnnxImporter::importType(const onnx::ValueInfoProto &info) {
  std::string what = "graph input '" + info.name() + "'";
  if (!info.type().has_tensor_type())
    return error(what + " is not a tensor");
  const auto &tensor = info.type().tensor_type();
  auto bound = options.inputShapes.find(info.name());
  if (!tensor.has_shape()) {
    if (bound == options.inputShapes.end())
      return error(what + " has no shape (not even a rank); give it with "
                          "--shape " +
                   info.name() + ":d0xd1x...");
    return tensorType(tensor.elem_type(), bound->second, what);
  }
  int rank = tensor.shape().dim_size();
  if (bound != options.inputShapes.end() &&
      bound->second.size() != static_cast<size_t>(rank))
    return error("--shape " + info.name() + ":" + formatDims(bound->second) +
                 " has rank " + std::to_string(bound->second.size()) +
                 " but " + what + " has rank " + std::to_string(rank));
  if (rank > plan::kMaxTensorRank)
    return error(what + " has rank " + std::to_string(rank) +
                 ", over the limit of " + std::to_string(plan::kMaxTensorRank));
  SmallVector<int64_t> dims;
  for (const auto &[d, dim] : llvm::enumerate(tensor.shape().dim())) {
    if (dim.has_dim_value() && dim.dim_value() < 0)
      return error(what + " has a negative dimension " + std::to_string(d) +
                   " (" + std::to_string(dim.dim_value()) + ")");
    bool isStatic = dim.has_dim_value() && dim.dim_value() > 0;
    if (bound != options.inputShapes.end()) {
      int64_t given = bound->second[d];
      if (isStatic && dim.dim_value() != given)
        return error("--shape " + info.name() + ":" +
                     formatDims(bound->second) + " gives dimension " +
                     std::to_string(d) + " the size " +
                     std::to_string(given) + " but " + what +
                     " fixes it to " + std::to_string(dim.dim_value()));
      dims.push_back(given);
      continue;
    }
    if (isStatic) {
      dims.push_back(dim.dim_value());
      continue;
    }
    if (d == 0 && options.batch) {
      dims.push_back(*options.batch);
      continue;
    }
    std::string symbol = dim.has_dim_param() && !dim.dim_param().empty()
                             ? "'" + dim.dim_param() + "'"
                             : dim.has_dim_value()
                                   ? "(" + std::to_string(dim.dim_value()) + ")"
                                   : "(unnamed)";
    return error(what + " has a symbolic dimension " + std::to_string(d) +
                 " " + symbol + "; bind it with --shape " + info.name() +
                 ":d0xd1x..." + (d == 0 ? " or --batch N" : ""));
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

/// The number of bytes `tensor`'s dims and element type need.
static llvm::Expected<uint64_t> tensorBytes(const onnx::TensorProto &tensor,
                                            StringRef what) {
  auto elem = convertOnnxElemType(tensor.data_type(), what);
  if (!elem)
    return elem.takeError();
  uint64_t count = 1;
  for (int64_t d : tensor.dims()) {
    if (d < 0)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     what + " has a negative dimension " +
                                         std::to_string(d));
    count *= static_cast<uint64_t>(d);
  }
  return count * elemTypeBytes(*elem);
}

llvm::Error OnnxImporter::importWeight(const onnx::TensorProto &init) {
  std::string what = "initializer '" + init.name() + "'";
  SmallVector<int64_t> dims(init.dims().begin(), init.dims().end());
  auto type = tensorType(init.data_type(), dims, what);
  if (!type)
    return type.takeError();
  ElementsAttr value;
  if (ExternalDataResolver::isExternal(init)) {
    auto bytes = tensorBytes(init, what);
    if (!bytes)
      return error(llvm::toString(bytes.takeError()));
    auto external = externalData.resolve(init, *bytes, what);
    if (!external)
      return error(llvm::toString(external.takeError()));
    if (external->missing) {
      if (!options.noWeights)
        return error(what + ": external data file '" + external->path +
                     "' does not exist; to compile a graph-only model "
                     "without its weights pass --no-weights");
      withoutWeights = true;
    } else {
      if (!external->embedded)
        externalHashes.push_back(llvm::xxh3_64bits(external->bytes));
      // The parameter's value points into the read-only mapping, which the
      // blob's deleter keeps alive: the weights are not copied.
      std::shared_ptr<void> mapping = external->mapping;
      AsmResourceBlob blob(
          ArrayRef<char>(reinterpret_cast<const char *>(external->bytes.data()),
                         external->bytes.size()),
          /*dataAlignment=*/1,
          [mapping](void *, size_t, size_t) mutable { mapping.reset(); },
          /*dataIsMutable=*/false);
      value = DenseResourceElementsAttr::get(*type, init.name(),
                                             std::move(blob));
      // tensorType accepted the type, so it has a TDL element type.
      const tdl::ElemType elemType = *toTdlElemType(type->getElementType());
      if (external->bytes.size() <=
          static_cast<size_t>(kMaxConstElements) * elemTypeBytes(elemType)) {
        TensorData data;
        data.type.elem = elemType;
        data.type.dims.assign(dims.begin(), dims.end());
        data.bytes.assign(external->bytes.begin(), external->bytes.end());
        constants[init.name()] = {data.toDense(), /*foldable=*/false};
      }
    }
  } else {
    auto dense = importInitializer(init, *type);
    if (!dense)
      return dense.takeError();
    value = *dense;
    if (dense->getNumElements() <= kMaxConstElements) {
      if (auto data = convertOnnxTensor(init, what))
        constants[init.name()] = {data->toDense(), /*foldable=*/false};
      else
        llvm::consumeError(data.takeError());
    }
  }
  auto param = ParamOp::create(
      builder, NameLoc::get(builder.getStringAttr(init.name()), fileLoc),
      *type, init.name(), value);
  values[init.name()] = param.getResult();
  return llvm::Error::success();
}

llvm::Error
OnnxImporter::markTrainableParams(const onnx::ModelProto &model,
                                  const llvm::StringSet<> &initializerNames) {
  auto lists = readTrainableLists(model);
  if (!lists)
    return error(llvm::toString(lists.takeError()));
  // A stale name (the model was edited after export) might mean a buffer
  // under a new name that would silently train: refuse it.
  auto check = [&](const std::vector<std::string> &names,
                   StringRef key) -> llvm::Error {
    for (const std::string &name : names)
      if (!initializerNames.contains(name))
        return error("metadata_props '" + key + "' names '" + name +
                     "', which is not an initializer of the model; the "
                     "list must name the model's initializers exactly "
                     "(re-export it with tools/tofu_export.py, or correct "
                     "the list)");
    return llvm::Error::success();
  };
  // Only float initializers are parameters; integer ones never train.
  auto setTrainable = [&](StringRef name, bool trainable) {
    auto it = values.find(name);
    if (it == values.end())
      return;
    auto param = it->second.getDefiningOp<ParamOp>();
    if (param && !param.getConstant() && !param.getStateOf())
      param.setTrainableAttr(builder.getBoolAttr(trainable));
  };
  if (lists->trainable) {
    if (auto err = check(*lists->trainable, kTrainableListKey))
      return err;
    // Listed: trains; every other parameter: does not.
    llvm::StringSet<> listed;
    for (const std::string &name : *lists->trainable)
      listed.insert(name);
    for (const auto &entry : initializerNames)
      setTrainable(entry.getKey(), listed.contains(entry.getKey()));
  }
  if (lists->frozen) {
    if (auto err = check(*lists->frozen, kFrozenListKey))
      return err;
    for (const std::string &name : *lists->frozen)
      setTrainable(name, false);
  }
  if (options.verbose && (lists->frozen || lists->trainable)) {
    // The parameters the lists keep fixed, in initializer order.
    SmallVector<StringRef> fixed;
    for (const auto &init : model.graph().initializer())
      if (auto it = values.find(init.name()); it != values.end())
        if (auto param = it->second.getDefiningOp<ParamOp>())
          if (!param.getTrainable().value_or(true))
            fixed.push_back(param.getSymName());
    llvm::errs() << "tofuc: note: " << path << ": the model's metadata_props ("
                 << (lists->frozen ? kFrozenListKey : kTrainableListKey)
                 << (lists->frozen && lists->trainable
                         ? (" and " + kTrainableListKey).str()
                         : "")
                 << ") keep " << fixed.size() << " parameter"
                 << (fixed.size() == 1 ? "" : "s") << " fixed";
    constexpr size_t kShown = 8;
    for (size_t i = 0; i < fixed.size() && i < kShown; ++i)
      llvm::errs() << (i ? ", '" : ": '") << fixed[i] << "'";
    if (fixed.size() > kShown)
      llvm::errs() << " and " << fixed.size() - kShown << " more";
    llvm::errs() << "\n";
  }
  return llvm::Error::success();
}

llvm::Expected<TensorData>
OnnxImporter::readTensorData(const onnx::TensorProto &init) {
  std::string what = "initializer '" + init.name() + "'";
  if (!ExternalDataResolver::isExternal(init))
    return convertOnnxTensor(init, what);
  auto bytes = tensorBytes(init, what);
  if (!bytes)
    return bytes.takeError();
  auto external = externalData.resolve(init, *bytes, what);
  if (!external)
    return external.takeError();
  if (external->missing)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        what + ": external data file '" + external->path +
            "' does not exist; integer initializers (shapes, indices) and "
            "those an initialization graph reads are needed even with "
            "--no-weights");
  if (!external->embedded)
    externalHashes.push_back(llvm::xxh3_64bits(external->bytes));
  TensorData data;
  data.type.elem = *convertOnnxElemType(init.data_type(), what);
  data.type.dims.assign(init.dims().begin(), init.dims().end());
  data.bytes.assign(external->bytes.begin(), external->bytes.end());
  if (isBoolElemType(data.type.elem))
    for (uint8_t &b : data.bytes)
      b = b != 0;
  return data;
}

llvm::Expected<TensorData>
OnnxImporter::readSmallTensor(const onnx::TensorProto &init) {
  auto data = readTensorData(init);
  if (!data)
    return error(llvm::toString(data.takeError()));
  return data;
}

llvm::Error OnnxImporter::applyInitialization(onnx::ModelProto &model,
                                              bool &changed) {
  int64_t opset = 0;
  for (const auto &entry : model.opset_import())
    if (entry.domain().empty() || entry.domain() == "ai.onnx")
      opset = entry.version();
  auto applied = applyInitializationGraph(
      model, opset,
      [&](const onnx::TensorProto &init) { return readTensorData(init); });
  if (!applied)
    return error(llvm::toString(applied.takeError()));
  changed = *applied;
  return llvm::Error::success();
}

/// The TensorProto of a Constant node's value attribute (`value`,
/// `value_int(s)`, `value_float(s)`), or nullopt.
static std::optional<onnx::TensorProto>
constantValue(const onnx::NodeProto &node) {
  for (const auto &attr : node.attribute()) {
    onnx::TensorProto tensor;
    if (attr.name() == "value" && attr.has_t())
      return attr.t();
    if (attr.name() == "value_int") {
      tensor.set_data_type(onnx::TensorProto::INT64);
      tensor.add_int64_data(attr.i());
      return tensor;
    }
    if (attr.name() == "value_ints") {
      tensor.set_data_type(onnx::TensorProto::INT64);
      tensor.add_dims(attr.ints_size());
      for (int64_t v : attr.ints())
        tensor.add_int64_data(v);
      return tensor;
    }
    if (attr.name() == "value_float") {
      tensor.set_data_type(onnx::TensorProto::FLOAT);
      tensor.add_float_data(attr.f());
      return tensor;
    }
    if (attr.name() == "value_floats") {
      tensor.set_data_type(onnx::TensorProto::FLOAT);
      tensor.add_dims(attr.floats_size());
      for (float v : attr.floats())
        tensor.add_float_data(v);
      return tensor;
    }
  }
  return std::nullopt;
}

/// A Constant node is a compile-time value, not a parameter: nothing trains
/// it. It enters the IR only where a node reads it at run time (valueOf).
llvm::Error OnnxImporter::importConstantNode(const onnx::NodeProto &node,
                                             const std::string &where) {
  if (node.output_size() != 1)
    return error(where + ": a Constant has one output");
  std::optional<onnx::TensorProto> tensor = constantValue(node);
  if (!tensor)
    return error(where + ": only 'value', 'value_int(s)' and "
                         "'value_float(s)' Constants are supported");
  auto data = convertOnnxTensor(*tensor, where);
  if (!data)
    return error(llvm::toString(data.takeError()));
  constants[node.output(0)] = {data->toDense(), /*foldable=*/true};
  return llvm::Error::success();
}

llvm::Expected<Value> OnnxImporter::valueOf(const std::string &name,
                                            const std::string &where) {
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  auto c = constants.find(name);
  if (c == constants.end())
    return error(where + ": input '" + name +
                 "' is not produced by an earlier node, an initializer or a "
                 "graph input (the graph must be topologically sorted)");
  const tdl::DenseTensor &tensor = c->second.tensor;
  if (tensor.type.elem == tdl::ElemType::Bool) {
    // Parameters hold f32 or i64: a bool constant read at run time (a
    // folded attention mask, say) is a 0/1 float constant cast to bool.
    std::string floatName = name + "/f32";
    if (!constants.count(floatName)) {
      KnownTensor asFloat = c->second;
      asFloat.tensor.type.elem = tdl::ElemType::F32;
      constants[floatName] = std::move(asFloat);
    }
    auto floatValue = valueOf(floatName, where);
    if (!floatValue)
      return floatValue.takeError();
    tdl::AttrMap attrs;
    attrs["to"] = tdl::AttrValue::ofInt(onnx::TensorProto::BOOL);
    SmallVector<Value> operands = {*floatValue};
    auto instance = instantiateSpec("Cast", ValueRange(operands).getTypes(),
                                    attrs);
    if (!instance)
      return error(where + ": casting the bool constant '" + name +
                   "' at run time: " + llvm::toString(instance.takeError()));
    auto cast = ComputeOp::create(
        builder, NameLoc::get(builder.getStringAttr(name), fileLoc),
        TypeRange{fromTdlType(ctx, instance->outputTypes()[0])}, "Cast",
        operands, fromTdlAttrs(ctx, attrs), name, StringAttr());
    values[name] = cast.getResult(0);
    return cast.getResult(0);
  }
  RankedTensorType type = fromTdlType(ctx, tensor.type);
  // The values in the constant's own element type (rounded, truncated as a
  // store does), as raw little-endian bytes.
  const auto dtype = static_cast<plan::DType>(tensor.type.elem);
  std::vector<char> raw(tensor.data.size() * plan::dtypeSize(dtype));
  for (size_t k = 0; k < tensor.data.size(); ++k)
    runtime::storeElement(raw.data(), dtype, static_cast<int64_t>(k),
                          tensor.data[k]);
  DenseElementsAttr value = DenseElementsAttr::getFromRawBuffer(type, raw);
  auto param = ParamOp::create(
      builder, NameLoc::get(builder.getStringAttr(name), fileLoc), type, name,
      value);
  param.setConstant(true);
  values[name] = param.getResult();
  return param.getResult();
}

llvm::Error OnnxImporter::importRecurrentNode(const onnx::NodeProto &node,
                                              StringRef nodeName,
                                              const std::string &where) {
  SmallVector<Value> operands;
  for (const std::string &name : node.input()) {
    if (name.empty()) {
      operands.push_back(Value());
      continue;
    }
    auto value = valueOf(name, where);
    if (!value)
      return value.takeError();
    operands.push_back(*value);
  }
  auto results =
      unrollRecurrentNode(builder, fileLoc, node, nodeName, operands);
  if (!results)
    return error(where + ": " + llvm::toString(results.takeError()));
  for (auto [i, name] : llvm::enumerate(node.output()))
    if (!name.empty())
      values[name] = (*results)[i];
  return llvm::Error::success();
}

llvm::Expected<bool> OnnxImporter::tryFold(const onnx::NodeProto &node,
                                           const std::string &where) {
  StringRef op = node.op_type();
  if (!isFoldableOp(op))
    return false;
  std::vector<std::optional<tdl::TensorType>> types;
  std::vector<const tdl::DenseTensor *> inputs;
  for (const std::string &name : node.input()) {
    if (name.empty()) {
      types.push_back(std::nullopt);
      inputs.push_back(nullptr);
      continue;
    }
    auto c = constants.find(name);
    if (c != constants.end() &&
        (c->second.foldable || foldsFromTypesOnly(op))) {
      types.push_back(c->second.tensor.type);
      inputs.push_back(&c->second.tensor);
      continue;
    }
    if (!foldsFromTypesOnly(op))
      return false; // a run-time (or trainable) input: not folded
    auto v = values.find(name);
    if (v == values.end())
      return false;
    auto type = toTdlType(cast<RankedTensorType>(v->second.getType()));
    if (!type)
      return error(where + ": " + llvm::toString(type.takeError()));
    types.push_back(*type);
    inputs.push_back(nullptr);
  }
  auto attrs = convertEvaluatedNodeAttributes(node, where);
  if (!attrs)
    return error(llvm::toString(attrs.takeError()));
  auto folded = foldOp(op, attrs->attrs, types, inputs,
                       attrs->constantOfShapeValue
                           ? &*attrs->constantOfShapeValue
                           : nullptr,
                       node.output_size());
  if (!folded)
    return error(where + ": folding at import failed: " +
                 llvm::toString(folded.takeError()));
  if (!*folded) {
    // Too large: imported as a run-time op, which needs a TDL spec.
    if (!tdl::SpecLibrary::builtin().lookup(op))
      return error(where + ": its result is too large to fold at import "
                           "(over " +
                   std::to_string(kMaxConstElements) +
                   " elements for a compile-time constant), and " + op.str() +
                   " has no TDL spec to compute it at run time");
    return false;
  }
  if ((*folded)->size() < static_cast<size_t>(node.output_size()))
    return error(where + ": folding gave " +
                 std::to_string((*folded)->size()) + " outputs, the node has " +
                 std::to_string(node.output_size()));
  for (auto [i, name] : llvm::enumerate(node.output()))
    if (!name.empty())
      constants[name] = {std::move((**folded)[i]), /*foldable=*/true};
  return true;
}

/// "[4, 6] f32" for a TDL type.
static std::string describeType(const tdl::TensorType &type) {
  std::string text = "[";
  for (auto [i, d] : llvm::enumerate(type.dims))
    text += (i ? ", " : "") + std::to_string(d);
  return text + "] " + elemTypeString(type.elem);
}

llvm::Error OnnxImporter::checkDeclaredType(const std::string &name,
                                            const tdl::TensorType &inferred,
                                            const std::string &where) {
  auto it = declaredTypes.find(name);
  if (it == declaredTypes.end() || !it->second->has_tensor_type())
    return llvm::Error::success();
  const auto &declared = it->second->tensor_type();
  std::string mismatch;
  if (declared.elem_type() != 0) {
    auto elem = convertOnnxElemType(declared.elem_type(), name);
    if (!elem)
      llvm::consumeError(elem.takeError());
    else if (*elem != inferred.elem)
      mismatch = "element type " + elemTypeString(*elem);
  }
  std::string declaredShape = "[";
  bool shapeDiffers = false;
  if (declared.has_shape()) {
    const auto &dims = declared.shape().dim();
    if (dims.size() != static_cast<int>(inferred.dims.size()))
      shapeDiffers = true;
    for (int d = 0; d < dims.size(); ++d) {
      const auto &dim = dims[d];
      bool isStatic = dim.has_dim_value() && dim.dim_value() > 0;
      declaredShape += (d ? ", " : "") +
                       (isStatic ? std::to_string(dim.dim_value())
                                 : (dim.dim_param().empty() ? std::string("?")
                                                            : dim.dim_param()));
      if (isStatic && d < static_cast<int>(inferred.dims.size()) &&
          dim.dim_value() != inferred.dims[d])
        shapeDiffers = true;
    }
  }
  declaredShape += "]";
  if (shapeDiffers)
    mismatch += (mismatch.empty() ? "" : " and ") + std::string("shape ") +
                declaredShape;
  if (mismatch.empty())
    return llvm::Error::success();
  return error(where + ": output '" + name + "' is " + describeType(inferred) +
               " by TDL shape inference, but the model declares " + mismatch +
               " (check the --shape/--batch values, or re-export the model)");
}

/// True for the ops that move an integer tensor's values without changing
/// them (shape-only ops): labels or token ids that pass through them are
/// still labels or token ids. Cast counts when it casts to an integer type.
static bool isShapeOnlyOp(ComputeOp op) {
  StringRef spec = op.getSpec();
  if (spec == "Reshape" || spec == "Flatten" || spec == "Squeeze" ||
      spec == "Unsqueeze" || spec == "Transpose" || spec == "Identity")
    return true;
  if (spec == "Cast" || spec == "CastLike")
    return op->getNumResults() == 1 &&
           isa<IntegerType>(
               cast<RankedTensorType>(op->getResult(0).getType())
                   .getElementType());
  return false;
}

/// The end uses of integer input `input`: every (op, operand index) that
/// reads its values, looking through shape-only ops (isShapeOnlyOp) that
/// read it as their data operand (operand 0).
static SmallVector<std::pair<ComputeOp, unsigned>> endUsesOf(Value input) {
  SmallVector<std::pair<ComputeOp, unsigned>> uses;
  SmallVector<Value> worklist = {input};
  llvm::DenseSet<Value> seen;
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    if (!seen.insert(value).second)
      continue;
    for (OpOperand &use : value.getUses()) {
      auto compute = dyn_cast<ComputeOp>(use.getOwner());
      if (compute && use.getOperandNumber() == 0 && isShapeOnlyOp(compute)) {
        worklist.push_back(compute->getResult(0));
        continue;
      }
      uses.push_back({compute, use.getOperandNumber()});
    }
  }
  return uses;
}

namespace {
/// What a labels input is for: the class count and ignore_index of the
/// losses it reaches.
struct LabelsUse {
  int64_t classes = 0;
  /// The losses' ignore_index when they all have the same one.
  std::optional<int64_t> ignoreIndex;
};
} // namespace

/// The class count of a labels input, read from the losses that read it as
/// their labels (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss: scores
/// [N, C, *D], labels [N, *D]) directly or through shape-only ops (the
/// `.view(-1)` of a language model's targets); the smallest C when several
/// do. Nothing when no loss reads it.
static std::optional<LabelsUse> labelsUseOf(Value labels) {
  std::optional<LabelsUse> result;
  bool sameIgnoreIndex = true;
  for (auto [compute, operand] : endUsesOf(labels)) {
    if (!compute || operand != 1 ||
        (compute.getSpec() != "SoftmaxCrossEntropyLoss" &&
         compute.getSpec() != "NegativeLogLikelihoodLoss"))
      continue;
    auto scores = cast<RankedTensorType>(compute.getInputs()[0].getType());
    if (scores.getRank() < 2)
      continue;
    // ONNX gives ignore_index no default: without it no label is ignored.
    std::optional<int64_t> ignore;
    if (auto attr = compute.getAttrs().getAs<IntegerAttr>("ignore_index"))
      ignore = attr.getInt();
    if (!result) {
      result = LabelsUse{scores.getDimSize(1), ignore};
      continue;
    }
    result->classes = std::min(result->classes, scores.getDimSize(1));
    sameIgnoreIndex &= result->ignoreIndex == ignore;
  }
  if (result && !sameIgnoreIndex)
    result->ignoreIndex.reset();
  return result;
}

llvm::Error OnnxImporter::importMutableInteger(const onnx::TensorProto &init) {
  std::string what = "initializer '" + init.name() + "'";
  if (init.data_type() != onnx::TensorProto::INT64)
    return error(what + " is updated by training_info (update_binding) but "
                        "has ONNX element type " +
                 std::to_string(init.data_type()) +
                 "; updated tensors must be float32 or int64");
  auto data = readSmallTensor(init);
  if (!data)
    return data.takeError();
  SmallVector<int64_t> dims(init.dims().begin(), init.dims().end());
  auto type = tensorType(init.data_type(), dims, what);
  if (!type)
    return type.takeError();
  auto value = DenseElementsAttr::getFromRawBuffer(
      *type, ArrayRef<char>(reinterpret_cast<const char *>(data->bytes.data()),
                            data->bytes.size()));
  auto param = ParamOp::create(
      builder, NameLoc::get(builder.getStringAttr(init.name()), fileLoc),
      *type, init.name(), value);
  values[init.name()] = param.getResult();
  return llvm::Error::success();
}

llvm::Error OnnxImporter::importGradientNode(
    const TrainingAlgorithm::Gradient &gradientNode,
    const std::string &nodeName, const std::string &where) {
  // analyzeTrainingAlgorithm checked the attributes and the inputs.
  const onnx::NodeProto &node = *gradientNode.node;
  const std::string &yName = gradientNode.y;
  auto notComputed = [&](StringRef attr, const std::string &name) {
    if (constants.count(name))
      return error(where + ": '" + attr + "' names '" + name +
                   "', a compile-time constant (a Constant node, an integer "
                   "initializer or folded shape arithmetic); gradients "
                   "relate float initializers, graph inputs and computed "
                   "tensors");
    return error(where + ": '" + attr + "' names '" + name +
                 "', which is not computed before the Gradient node");
  };
  auto y = values.find(yName);
  if (y == values.end())
    return notComputed("y", yName);
  auto yType = cast<RankedTensorType>(y->second.getType());
  if (yType.getRank() != 0 || !isa<FloatType>(yType.getElementType())) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << yType;
    return error(where + ": 'y' ('" + yName +
                 "') must be a floating-point scalar (tensor<f32>, "
                 "tensor<f64>, ...), not " + text +
                 "; reduce it to a scalar (ReduceSum or ReduceMean with "
                 "keepdims = 0)");
  }
  Value yValue = y->second;
  for (auto [i, output] : llvm::enumerate(node.output())) {
    if (output.empty())
      continue; // this gradient is not wanted
    const std::string &xName = gradientNode.xs[i];
    auto x = values.find(xName);
    if (x == values.end())
      return notComputed("xs", xName);
    auto xType = cast<RankedTensorType>(x->second.getType());
    if (!isa<FloatType>(xType.getElementType())) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << xType;
      return error(where + ": 'xs' names '" + xName + "' of type " + text +
                   "; only floating-point tensors have gradients");
    }
    auto gradient = GradientOp::create(
        builder, NameLoc::get(builder.getStringAttr(nodeName), fileLoc),
        nodeName, yValue, x->second);
    values[output] = gradient.getResult();
    gradients.try_emplace(xName, gradient.getResult());
    auto tdlType = toTdlType(xType);
    if (!tdlType)
      return error(where + ": " + llvm::toString(tdlType.takeError()));
    if (auto err = checkDeclaredType(output, *tdlType, where))
      return err;
  }
  return llvm::Error::success();
}

llvm::Error OnnxImporter::importTrainingUpdates(
    const TrainingAlgorithm &algorithm) {
  Value loss = values.lookup(algorithm.loss);
  if (!loss)
    return error("training_info's loss '" + algorithm.loss +
                 "' (the 'y' of its Gradient node) is a compile-time "
                 "constant: it folds to a value at import (Constant nodes, "
                 "integer initializers, shape arithmetic) and depends on no "
                 "graph input and no trainable initializer, so no gradient "
                 "could change it");
  LossOp::create(builder, fileLoc, loss,
                 builder.getStringAttr("training_info's loss '" +
                                       algorithm.loss + "'"));
  for (const auto &[key, valueName] : algorithm.updates) {
    std::string where = "training_info[0].update_binding of '" + key + "'";
    auto param = values.lookup(key).getDefiningOp<ParamOp>();
    if (!param)
      return error(where + ": '" + key + "' is not a float32 or updated "
                                         "int64 initializer");
    auto newValue = valueOf(valueName, where);
    if (!newValue)
      return newValue.takeError();
    if (newValue->getType() != param.getType()) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << "'" << key << "' has type " << param.getType() << " but its new "
         << "value '" << valueName << "' has type " << newValue->getType();
      return error(where + ": " + text);
    }
    Value gradient;
    if (auto state = algorithm.stateOf.find(key);
        state != algorithm.stateOf.end())
      param.setStateOfAttr(builder.getStringAttr(state->second));
    else
      gradient = gradients.lookup(key);
    UpdateOp::create(builder, fileLoc, param.getResult(), gradient, *newValue);
  }
  return llvm::Error::success();
}

bool OnnxImporter::isStepCount(onnx::NodeProto &node) {
  if (node.op_type() != "Add" || node.input_size() != 2 ||
      node.output_size() != 1)
    return false;
  auto isCounter = [&](const std::string &name) {
    auto param = values.lookup(name).getDefiningOp<ParamOp>();
    if (!param || param.getConstant())
      return false;
    auto type = cast<RankedTensorType>(param.getType());
    return type.getRank() == 0 && type.getElementType().isInteger(64);
  };
  auto isOne = [&](const std::string &name) {
    auto c = constants.find(name);
    return c != constants.end() &&
           c->second.tensor.type.elem == tdl::ElemType::I64 &&
           c->second.tensor.data.size() == 1 && c->second.tensor.data[0] == 1;
  };
  if (isCounter(node.input(1)) && isOne(node.input(0))) {
    std::string counter = node.input(1);
    node.set_input(1, node.input(0));
    node.set_input(0, counter);
  }
  return isCounter(node.input(0)) && isOne(node.input(1));
}

llvm::Error OnnxImporter::refuseTorchMaxWithIndices(
    const onnx::NodeProto &node, ArrayRef<const onnx::NodeProto *> nodes,
    const std::string &where) {
  if (node.input_size() < 1)
    return llvm::Error::success();
  int64_t rank = -1;
  if (auto v = values.find(node.input(0)); v != values.end())
    rank = cast<RankedTensorType>(v->second.getType()).getRank();
  else if (auto c = constants.find(node.input(0)); c != constants.end())
    rank = c->second.tensor.type.dims.size();
  std::vector<int64_t> axes;
  for (const auto &attr : node.attribute())
    if (attr.name() == "axes")
      axes.assign(attr.ints().begin(), attr.ints().end());
  if (rank < 0 || axes.size() != 1)
    return llvm::Error::success();
  auto normalized = [rank](int64_t a) { return a < 0 ? a + rank : a; };
  for (const onnx::NodeProto *other : nodes) {
    if (other->op_type() != "ArgMax" || other->input_size() < 1 ||
        other->input(0) != node.input(0))
      continue;
    int64_t axis = 0;
    for (const auto &attr : other->attribute())
      if (attr.name() == "axis")
        axis = attr.i();
    if (normalized(axis) == normalized(axes[0]))
      return error(
          where + ": with ArgMax '" +
          (other->name().empty() ? other->output(0) : other->name()) +
          "' over the same axis of '" + node.input(0) +
          "' it is torch.max(x, dim) with its indices used, whose gradient "
          "gives all of dY to the index ArgMax returns, while ReduceMax's "
          "rule (torch.amax) shares tied maxima evenly; not supported yet "
          "(use torch.amax, or torch.gather at the argmax)");
  }
  return llvm::Error::success();
}

llvm::Error OnnxImporter::checkConstantIndices(const onnx::NodeProto &node,
                                               const std::string &where) {
  const std::string &op = node.op_type();
  bool alongAxis =
      op == "Gather" || op == "GatherElements" || op == "ScatterElements";
  bool tuples = op == "GatherND" || op == "ScatterND";
  if ((!alongAxis && !tuples) || node.input_size() < 2)
    return llvm::Error::success();
  auto indices = constants.find(node.input(1));
  if (indices == constants.end())
    return llvm::Error::success(); // run-time indices: tofu-run checks inputs
  SmallVector<int64_t> dims;
  if (auto v = values.find(node.input(0)); v != values.end())
    llvm::append_range(
        dims, cast<RankedTensorType>(v->second.getType()).getShape());
  else if (auto c = constants.find(node.input(0)); c != constants.end())
    llvm::append_range(dims, c->second.tensor.type.dims);
  else
    return llvm::Error::success(); // valueOf reports the missing input
  int64_t axis = 0, batchDims = 0;
  for (const auto &attr : node.attribute()) {
    if (attr.name() == "axis")
      axis = attr.i();
    if (attr.name() == "batch_dims")
      batchDims = attr.i();
  }
  int64_t rank = dims.size();
  const std::vector<int64_t> &indexDims = indices->second.tensor.type.dims;
  // Component c of each index (tuples: its position in the last dim) and
  // the dim of data it indexes; shapes the spec refuses are left to it.
  int64_t components = 1;
  if (alongAxis) {
    if (axis < -rank || axis >= rank)
      return llvm::Error::success();
    if (axis < 0)
      axis += rank;
  } else {
    if (indexDims.empty() || batchDims < 0 ||
        batchDims + indexDims.back() > rank)
      return llvm::Error::success();
    components = indexDims.back();
  }
  if (components <= 0)
    return llvm::Error::success();
  for (auto [position, index] :
       llvm::enumerate(indices->second.tensor.data)) {
    int64_t d = alongAxis ? axis
                          : batchDims + static_cast<int64_t>(position) %
                                            components;
    int64_t n = dims[d];
    if (!(index >= -static_cast<double>(n) && index < static_cast<double>(n)))
      return error(where + ": index " +
                   std::to_string(static_cast<long long>(index)) +
                   " (element " + std::to_string(position) +
                   " of the constant indices '" + node.input(1) +
                   "') is outside [-" + std::to_string(n) + ", " +
                   std::to_string(n) + "), the range of " +
                   (alongAxis ? "axis " : "dim ") + std::to_string(d) +
                   " of '" + node.input(0) + "' (size " + std::to_string(n) +
                   "); ONNX leaves such an index undefined and PyTorch "
                   "raises an IndexError");
  }
  return llvm::Error::success();
}

llvm::Error OnnxImporter::importSpecNode(const onnx::NodeProto &node,
                                         const std::string &nodeName,
                                         const std::string &where) {
  if (auto err = checkConstantIndices(node, where))
    return err;
  auto folded = tryFold(node, where);
  if (!folded)
    return folded.takeError();
  if (*folded) {
    ++foldedOps[node.op_type()];
    for (const std::string &name : node.output())
      if (!name.empty())
        if (auto err = checkDeclaredType(name, constants[name].tensor.type,
                                         where))
          return err;
    return llvm::Error::success();
  }
  if (node.op_type() == "Clip" && node.input_size() == 3 &&
      node.input(1).empty() && !node.input(2).empty()) {
    // Clip(x, '', max) (torch.clamp(max=)): operands are positional, so the
    // absent min becomes a -inf constant of x's type, which Clip's
    // gradient reads as no bound (ClipGrad: a bound is only a bound when
    // finite), keeping clamp's inclusive rule at max.
    std::optional<tdl::ElemType> elem;
    if (auto v = values.find(node.input(0)); v != values.end())
      elem = toTdlElemType(
          cast<RankedTensorType>(v->second.getType()).getElementType());
    else if (auto c = constants.find(node.input(0)); c != constants.end())
      elem = c->second.tensor.type.elem;
    if (!elem)
      return error(where + ": input '" + node.input(0) +
                   "' is not produced by an earlier node, an initializer or "
                   "a graph input, or has an unsupported element type");
    std::string minName = node.output(0) + "/min=-inf";
    constants[minName] = {
        tdl::DenseTensor{tdl::TensorType{{}, *elem},
                         {-std::numeric_limits<double>::infinity()}},
        /*foldable=*/true};
    onnx::NodeProto withMin = node;
    withMin.set_input(1, minName);
    return importSpecNode(withMin, nodeName, where);
  }
  const tdl::OpSpec *spec = tdl::SpecLibrary::builtin().lookup(node.op_type());
  if (!spec)
    return error(where + ": operator '" + node.op_type() +
                 "' has no TDL spec (tdl-specs/); it is not supported yet" +
                 (isFoldableOp(node.op_type())
                      ? " except with compile-time constant inputs, which "
                        "are folded at import"
                      : ""));
  SmallVector<Value> operands;
  ConstValues constValues;
  bool absentSeen = false;
  for (const std::string &name : node.input()) {
    if (name.empty()) {
      absentSeen = true;
      continue;
    }
    if (absentSeen)
      return error(where + ": an absent optional input followed by a "
                           "present one is not supported");
    unsigned i = operands.size();
    auto value = valueOf(name, where);
    if (!value)
      return value.takeError();
    operands.push_back(*value);
    if (!tdl::isConstInput(*spec, i))
      continue;
    auto c = constants.find(name);
    if (c == constants.end())
      return error(where + ": input '" + name + "' (operand " +
                   std::to_string(i) +
                   ") must be known at compile time (an initializer, a "
                   "Constant node or foldable shape arithmetic), but it is "
                   "computed at run time");
    constValues[i] = c->second.tensor.data;
  }
  auto attrs = convertOnnxAttributes(node, nodeName);
  if (!attrs)
    return error(llvm::toString(attrs.takeError()));
  // A variadic output's count (Split without `split`) is the node's.
  if (tdl::takesOutputCount(*spec) && !attrs->count("num_outputs"))
    (*attrs)["num_outputs"] = tdl::AttrValue::ofInt(node.output_size());
  auto instance = instantiateSpec(node.op_type(),
                                  ValueRange(operands).getTypes(), *attrs,
                                  constValues);
  if (!instance) {
    // A spec error ("tdl-specs/nn.tdl:86:22: error: index 5 out of range")
    // is the model's fault here (its attributes or shapes): say so first,
    // and keep the spec location as a reference, not as the error's source.
    std::string message = llvm::toString(instance.takeError());
    StringRef text(message);
    size_t at = text.find(": error: ");
    if (at != StringRef::npos && text.take_front(at).contains(".tdl:"))
      message = ("the node's attributes or input shapes are invalid for " +
                 node.op_type() + ": " + text.drop_front(at + 9).str() +
                 " (checked by " + text.take_front(at).str() + ")");
    return error(where + ": " + message);
  }
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
  for (auto [i, type] : llvm::enumerate(instance->outputTypes())) {
    if (auto err = checkTensorShape(
            type.dims, where + ": output " + std::to_string(i)))
      return error(llvm::toString(std::move(err)));
    resultTypes.push_back(fromTdlType(ctx, type));
  }
  auto compute = ComputeOp::create(
      builder, NameLoc::get(builder.getStringAttr(nodeName), fileLoc),
      resultTypes, node.op_type(), operands,
      fromTdlAttrs(ctx, *attrs, constValues), nodeName, StringAttr());
  for (auto [i, name] : llvm::enumerate(node.output())) {
    if (name.empty())
      continue;
    values[name] = compute.getResult(i);
    if (auto err =
            checkDeclaredType(name, instance->outputTypes()[i], where))
      return err;
  }
  return llvm::Error::success();
}

/// The number of rows that int64 input `indices` selects from when every
/// end use (endUsesOf: directly or through shape-only ops) reads it as the
/// indices of a Gather (an embedding lookup), GatherElements or
/// ScatterElements (the size of data's axis), or GatherND or ScatterND (the
/// dims of data an index tuple names): the smallest indexed dimension among
/// them. Nothing otherwise.
static std::optional<int64_t> rowsIndexedBy(Value indices) {
  std::optional<int64_t> rows;
  for (auto [compute, operand] : endUsesOf(indices)) {
    if (!compute || operand != 1 || compute.getInputs().size() < 2)
      return std::nullopt;
    StringRef spec = compute.getSpec();
    bool alongAxis = spec == "Gather" || spec == "GatherElements" ||
                     spec == "ScatterElements";
    bool tuples = spec == "GatherND" || spec == "ScatterND";
    if (!alongAxis && !tuples)
      return std::nullopt;
    auto data = cast<RankedTensorType>(compute.getInputs()[0].getType());
    auto index = cast<RankedTensorType>(compute.getInputs()[1].getType());
    int64_t first = 0, count = 1;
    if (alongAxis) {
      if (auto attr = compute.getAttrs().getAs<IntegerAttr>("axis"))
        first = attr.getInt();
      if (first < 0)
        first += data.getRank();
    } else {
      if (auto attr = compute.getAttrs().getAs<IntegerAttr>("batch_dims"))
        first = attr.getInt();
      count = index.getRank() ? index.getDimSize(index.getRank() - 1) : 0;
    }
    if (first < 0 || count < 1 || first + count > data.getRank())
      return std::nullopt;
    for (int64_t d = first; d < first + count; ++d) {
      int64_t dim = data.getDimSize(d);
      rows = rows ? std::min(*rows, dim) : dim;
    }
  }
  return rows;
}

llvm::Error OnnxImporter::importGraph(const onnx::ModelProto &model,
                                      ModuleOp module) {
  const onnx::GraphProto &graph = model.graph();
  auto algorithm = analyzeTrainingAlgorithm(model);
  if (!algorithm)
    return error(llvm::toString(algorithm.takeError()));
  this->algorithm = &*algorithm;
  // With training_info, the graph to import is the inference graph followed
  // by the algorithm (inputs, initializers and nodes concatenated).
  std::vector<const onnx::GraphProto *> graphs = {&graph};
  if (algorithm->present)
    graphs.push_back(&model.training_info(0).algorithm());
  llvm::StringSet<> updatedNames;
  for (const auto &[key, value] : algorithm->updates)
    updatedNames.insert(key);
  for (const auto &opset : model.opset_import())
    if (opset.domain().empty() || opset.domain() == "ai.onnx")
      defaultOpset = opset.version();
  if (defaultOpset < kMinOpset || defaultOpset > kMaxOpset)
    return error("opset " + std::to_string(defaultOpset) +
                 " of the default domain is not supported (opsets " +
                 std::to_string(kMinOpset) + " to " +
                 std::to_string(kMaxOpset) + " are; PyTorch exports 13 to 21)");

  for (const onnx::GraphProto *part : graphs) {
    for (const auto &info : part->value_info())
      declaredTypes[info.name()] = &info.type();
    for (const auto &info : part->output())
      declaredTypes[info.name()] = &info.type();
  }

  auto func =
      func::FuncOp::create(fileLoc, "main", builder.getFunctionType({}, {}));
  module.push_back(func);
  Block *body = func.addEntryBlock();
  builder.setInsertionPointToStart(body);

  // Float initializers are the trainable weights: one tofu.param each, in
  // declaration order. Integer initializers cannot be trained: they are
  // compile-time constants like Constant nodes.
  // An integer initializer that the training algorithm updates (its
  // update count) is a run-time value instead.
  llvm::StringSet<> initializerNames;
  for (const onnx::GraphProto *part : graphs)
    for (const auto &init : part->initializer()) {
      initializerNames.insert(init.name());
      if (isOnnxFloatType(init.data_type())) {
        if (auto err = importWeight(init))
          return err;
        // A tensor the algorithm updates is no compile-time value; one of
        // the algorithm's that it does not update (a learning rate) is a
        // constant.
        if (updatedNames.contains(init.name()))
          constants.erase(init.name());
        else if (part != &graph)
          values[init.name()].getDefiningOp<ParamOp>().setConstant(true);
        continue;
      }
      if (updatedNames.contains(init.name())) {
        if (auto err = importMutableInteger(init))
          return err;
        continue;
      }
      auto data = readSmallTensor(init);
      if (!data)
        return data.takeError();
      constants[init.name()] = {data->toDense(), /*foldable=*/true};
    }
  if (auto err = markTrainableParams(model, initializerNames))
    return err;

  SmallVector<InputOp> labelInputs;
  std::string firstFeatures;
  std::vector<const onnx::ValueInfoProto *> graphInputs;
  for (const onnx::GraphProto *part : graphs)
    for (const auto &input : part->input())
      graphInputs.push_back(&input);
  for (const onnx::ValueInfoProto *inputInfo : graphInputs) {
    const onnx::ValueInfoProto &input = *inputInfo;
    if (initializerNames.contains(input.name()))
      continue;
    auto type = importType(input);
    if (!type)
      return type.takeError();
    bool isLabels = type->getElementType().isInteger(64);
    auto op = InputOp::create(
        builder, NameLoc::get(builder.getStringAttr(input.name()), fileLoc),
        *type, input.name(), isLabels ? "labels" : "features", IntegerAttr(),
        StringAttr(), IntegerAttr());
    if (isLabels)
      labelInputs.push_back(op);
    else if (firstFeatures.empty())
      firstFeatures = input.name();
    values[input.name()] = op.getResult();
  }

  for (const auto &[name, dims] : options.inputShapes)
    if (!values.count(name)) {
      std::string inputs;
      for (const onnx::ValueInfoProto *input : graphInputs)
        if (!initializerNames.contains(input->name()))
          inputs += (inputs.empty() ? "'" : ", '") + input->name() + "'";
      return error("--shape names '" + name +
                   "', which is not a graph input (the inputs are " + inputs +
                   ")");
    }

  llvm::StringSet<> usedNames;
  for (const auto &[index, graphNode] : llvm::enumerate(algorithm->nodes)) {
    onnx::NodeProto node = *graphNode;
    std::string nodeName = node.name();
    if (nodeName.empty())
      nodeName = node.output_size()
                     ? node.output(0)
                     : node.op_type() + "_" + std::to_string(index);
    if (!usedNames.insert(nodeName).second)
      nodeName += "_" + std::to_string(index);
    // Messages name the node, its op and, for the default domain, the
    // opset: "node 'y' (Softmax) at opset 11: ...".
    std::string nodeWhere = "node '" + printableName(nodeName) + "' (" +
                            printableName(node.op_type()) + ")";
    bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
    std::string opsetText = " at opset " + std::to_string(defaultOpset);
    std::string where = nodeWhere + (defaultDomain ? opsetText : "");
    bool trainingOp = node.domain() == kOnnxTrainingDomain;
    if (!node.domain().empty() && node.domain() != "ai.onnx" && !trainingOp)
      return error(where + ": operator domain '" + node.domain() +
                   "' is not supported");
    if (trainingOp && node.op_type() != "Gradient" &&
        !isOnnxOptimizerOp(node.op_type()))
      return error(where + ": operator '" + node.op_type() +
                   "' of the domain '" + kOnnxTrainingDomain +
                   "' is not supported (Gradient, Adam, Momentum and "
                   "Adagrad are)");
    if (node.op_type() == "Gradient") {
      const onnx::NodeProto *self = graphNode;
      auto entry = llvm::find_if(algorithm->gradients, [&](const auto &g) {
        return g.node == self;
      });
      assert(entry != algorithm->gradients.end() &&
             "analyzeTrainingAlgorithm reads every Gradient node");
      if (auto err = importGradientNode(*entry, nodeName, where))
        return err;
      continue;
    }
    std::vector<std::pair<std::string, TensorData>> newConstants;
    std::vector<std::unique_ptr<TensorData>> constantData;
    auto constantOf = [&](StringRef name) -> const TensorData * {
      auto c = constants.find(name);
      if (c == constants.end())
        return nullptr;
      auto data = std::make_unique<TensorData>();
      data->type = c->second.tensor.type;
      const auto dtype = static_cast<plan::DType>(data->type.elem);
      data->bytes.resize(c->second.tensor.data.size() * plan::dtypeSize(dtype));
      for (size_t k = 0; k < c->second.tensor.data.size(); ++k)
        runtime::storeElement(data->bytes.data(), dtype,
                              static_cast<int64_t>(k),
                              c->second.tensor.data[k]);
      constantData.push_back(std::move(data));
      return constantData.back().get();
    };
    auto typeOf = [&](StringRef name) -> std::optional<tdl::TensorType> {
      if (auto v = values.find(name); v != values.end()) {
        auto type = toTdlType(cast<RankedTensorType>(v->second.getType()));
        if (type)
          return *type;
        llvm::consumeError(type.takeError());
        return std::nullopt;
      }
      if (auto c = constants.find(name); c != constants.end())
        return c->second.tensor.type;
      return std::nullopt;
    };
    // Old forms that take several nodes in the spec form become those
    // nodes (a Softmax coerced to 2-D: Flatten, Softmax, Reshape), each
    // normalized and imported in turn.
    std::vector<onnx::NodeProto> pieces = {node};
    if (defaultDomain)
      if (auto err = checkWindowAttributes(node, where))
        return error(llvm::toString(std::move(err)));
    if (defaultDomain) {
      auto expanded =
          expandOnnxNode(node, defaultOpset, nodeWhere, typeOf, newConstants);
      if (!expanded)
        return error(llvm::toString(expanded.takeError()));
      pieces = std::move(*expanded);
      for (auto &[name, data] : newConstants)
        constants[name] = {data.toDense(), /*foldable=*/true};
      newConstants.clear();
    }
    for (onnx::NodeProto &piece : pieces) {
      bool original = pieces.size() == 1;
      std::string pieceName = original ? nodeName : piece.name();
      std::string pieceNodeWhere =
          original ? nodeWhere
                   : "node '" + printableName(pieceName) + "' (" +
                         printableName(piece.op_type()) + ")";
      std::string pieceWhere =
          pieceNodeWhere + (defaultDomain ? opsetText : "");
      if (defaultDomain) {
        // normalizeOnnxNode adds " at opset N" itself.
        if (auto err = normalizeOnnxNode(piece, defaultOpset, pieceNodeWhere,
                                         constantOf, typeOf, newConstants))
          return error(llvm::toString(std::move(err)));
        for (auto &[name, data] : newConstants)
          constants[name] = {data.toDense(), /*foldable=*/true};
        newConstants.clear();
      }
      if (piece.op_type() == "ReduceMax")
        if (auto err = refuseTorchMaxWithIndices(piece, algorithm->nodes,
                                                 pieceWhere))
          return err;
      if (piece.op_type() == "Constant") {
        if (auto err = importConstantNode(piece, pieceWhere))
          return err;
        continue;
      }
      if (isRecurrentOpType(piece.op_type())) {
        if (auto err = importRecurrentNode(piece, pieceName, pieceWhere))
          return err;
        continue;
      }
      if (piece.domain() == kOnnxTrainingDomain &&
          isOnnxOptimizerOp(piece.op_type())) {
        // One op per updated tensor, the form of the TDL specs.
        auto parts = splitOptimizerNode(piece, pieceName);
        if (!parts)
          return error(llvm::toString(parts.takeError()));
        for (const onnx::NodeProto &part : *parts)
          if (auto err = importSpecNode(
                  part, parts->size() == 1 ? pieceName : part.name(),
                  pieceWhere))
            return err;
        continue;
      }
      if (isStepCount(piece)) {
        // T + 1 on the int64 update count: StepCount (Add takes floats).
        auto count = ComputeOp::create(
            builder, NameLoc::get(builder.getStringAttr(pieceName), fileLoc),
            TypeRange{values.lookup(piece.input(0)).getType()}, "StepCount",
            ValueRange{values.lookup(piece.input(0))},
            builder.getDictionaryAttr({}), pieceName, StringAttr());
        values[piece.output(0)] = count.getResult(0);
        continue;
      }
      if (auto err = importSpecNode(piece, pieceName, pieceWhere))
        return err;
    }
  }

  for (InputOp labels : labelInputs) {
    auto use = labelsUseOf(labels.getResult());
    if (!use) {
      // Token ids: an int64 input that only indexes (Gather's indices, an
      // embedding lookup) is a features input whose values lie in
      // [0, rows of the gathered table).
      if (auto vocabulary = rowsIndexedBy(labels.getResult())) {
        labels.setRole("features");
        labels.setClassesAttr(builder.getI64IntegerAttr(*vocabulary));
        continue;
      }
      return error("integer graph input '" + labels.getSymName() +
                   "' is neither the labels of a loss nor only the indices "
                   "of Gather, GatherElements, GatherND, ScatterElements or "
                   "ScatterND nodes (token ids), directly or through "
                   "shape-only ops (Reshape, Flatten, Squeeze, Unsqueeze, "
                   "Transpose, Identity, Cast to an integer type); other "
                   "integer inputs are not supported yet");
    }
    labels.setClassesAttr(builder.getI64IntegerAttr(use->classes));
    if (use->ignoreIndex)
      labels.setIgnoreIndexAttr(builder.getI64IntegerAttr(*use->ignoreIndex));
    if (!firstFeatures.empty())
      labels.setLabelsForAttr(builder.getStringAttr(firstFeatures));
  }

  if (algorithm->present)
    if (auto err = importTrainingUpdates(*algorithm))
      return err;

  // Every graph output is marked by name; the train phase picks the loss
  // among them (--loss).
  for (const auto &graphOutput : graph.output()) {
    const std::string &name = graphOutput.name();
    if (!values.count(name) && !constants.count(name))
      return error("graph output '" + name + "' is not produced by any node");
    auto output = valueOf(name, "graph output '" + name + "'");
    if (!output)
      return output.takeError();
    OutputOp::create(builder, fileLoc, name, *output);
  }
  func::ReturnOp::create(builder, fileLoc);
  return llvm::Error::success();
}

/// Parses `text` in the ONNX text format (onnx::OnnxParser) into `model`;
/// the error message carries the parser's.
static llvm::Error parseOnnxText(StringRef path, StringRef text,
                                 onnx::ModelProto &model) {
  std::string source = text.str();
  onnx::OnnxParser parser(source.c_str());
  onnx::Common::Status status;
  try {
    status = parser.Parse(model);
  } catch (const std::exception &e) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": not a valid ONNX text model: " +
                                       e.what());
  }
  if (!status.IsOK())
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        path + ": not a valid ONNX text model: " + status.ErrorMessage());
  return llvm::Error::success();
}

/// The highest default-domain opset libonnx's checker knows.
static int64_t checkerMaxOpset() {
  return onnx::OpSchemaRegistry::DomainToVersionRange::Instance()
      .Map()
      .at(onnx::ONNX_DOMAIN)
      .second;
}

/// Runs the ONNX checker (without its shape inference: tofuc's own TDL
/// inference already ran) when libonnx knows the model's opset; otherwise
/// says, with --verbose, that it was skipped.
static llvm::Error runOnnxChecker(StringRef path,
                                  const onnx::ModelProto &model,
                                  const ImportOptions &options) {
  int64_t opset = 0;
  for (const auto &entry : model.opset_import())
    if (entry.domain().empty() || entry.domain() == "ai.onnx")
      opset = entry.version();
  int64_t known = checkerMaxOpset();
  if (opset > known) {
    if (options.verbose)
      llvm::errs() << "tofuc: note: " << path << ": the ONNX checker "
                   << "(libonnx, opsets up to " << known
                   << ") was skipped for opset " << opset
                   << "; TDL shape inference checked every node\n";
    return llvm::Error::success();
  }
  // The checker would open external data files relative to the working
  // directory (and fail on graph-only models): tofuc resolved and checked
  // them already, so the checker sees those initializers as graph inputs.
  onnx::ModelProto stripped;
  const onnx::ModelProto *checked = &model;
  bool hasExternal = false;
  for (const auto &init : model.graph().initializer())
    hasExternal |= ExternalDataResolver::isExternal(init);
  if (hasExternal) {
    stripped = model;
    auto *inits = stripped.mutable_graph()->mutable_initializer();
    llvm::StringSet<> inputs;
    for (const auto &input : stripped.graph().input())
      inputs.insert(input.name());
    for (int i = inits->size() - 1; i >= 0; --i) {
      const onnx::TensorProto &init = inits->Get(i);
      if (!ExternalDataResolver::isExternal(init))
        continue;
      if (!inputs.contains(init.name())) {
        onnx::ValueInfoProto *input = stripped.mutable_graph()->add_input();
        input->set_name(init.name());
        auto *tensorType = input->mutable_type()->mutable_tensor_type();
        tensorType->set_elem_type(init.data_type());
        auto *shape = tensorType->mutable_shape();
        for (int64_t d : init.dims())
          shape->add_dim()->set_dim_value(d);
      }
      inits->DeleteSubrange(i, 1);
    }
    checked = &stripped;
  }
  try {
    onnx::checker::check_model(*checked);
  } catch (const std::exception &e) {
    std::string message = e.what();
    while (!message.empty() && (message.back() == '\n' || message.back() == ' '))
      message.pop_back();
    // One line: the checker puts its context ("==> Context: ...") on the
    // next.
    for (char &c : message)
      if (c == '\n')
        c = ' ';
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": the ONNX checker rejects the "
                                          "model: " +
                                       message);
  }
  if (options.verbose)
    llvm::errs() << "tofuc: note: " << path << ": the ONNX checker passed\n";
  return llvm::Error::success();
}

bool isOnnxTextPath(StringRef path) { return path.ends_with(".onnxtxt"); }

llvm::Expected<ImportedModel> importOnnxFile(MLIRContext *context,
                                             StringRef path,
                                             const ImportOptions &options) {
  // The checked open (InputFile.h): a FIFO, a device or a directory is
  // refused before a byte is read.
  uint64_t fileSize = 0;
  std::string openError;
  int fd = openInputFile(path.str(), "the model", kMaxInputFileBytes, fileSize,
                         openError);
  if (fd < 0)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   openError);
  auto buffer = llvm::MemoryBuffer::getOpenFile(
      fd, path, fileSize, /*RequiresNullTerminator=*/false);
  ::close(fd);
  if (!buffer)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        path + ": cannot read the model: " + buffer.getError().message());
  // Shared: large initializers keep pointing into it (EmbeddedData.h).
  std::shared_ptr<llvm::MemoryBuffer> file = std::move(*buffer);
  ImportedModel result;
  StringRef bytes = file->getBuffer();
  result.model = std::make_shared<onnx::ModelProto>();
  onnx::ModelProto &model = *result.model;
  if (isOnnxTextPath(path)) {
    if (auto err = parseOnnxText(path, bytes, model))
      return std::move(err);
    // Fingerprinted as the binary model it stands for.
    std::string binary;
    model.SerializeToString(&binary);
    result.fingerprint = fingerprintBytes(
        ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(binary.data()),
                          binary.size()));
  } else {
    // One protobuf message cannot exceed 2 GB: larger models keep their
    // weights as external data, and the graph part stays small.
    if (bytes.size() >= (uint64_t(1) << 31))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          path + ": the model file is " + std::to_string(bytes.size()) +
              " bytes; a protobuf message cannot exceed 2 GB: save the "
              "weights as external data (onnx.save(..., "
              "save_as_external_data=True))");
    result.fingerprint = fingerprintBytes(ArrayRef<uint8_t>(
        reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()));
    // The weights' raw_data stays in the mapped file: not copied by the
    // parse, nor later (the parameters' values point into the file).
    if (bytes.empty() || !parseModelLeavingData(bytes, model))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          path + ": not a valid ONNX model (protobuf parsing failed after " +
              std::to_string(bytes.size()) +
              " bytes); the file may be truncated or corrupt, nest messages "
              "deeper than protobuf's limit (100), or hold a string that is "
              "not UTF-8: re-export it");
  }
  if (!model.has_graph() || model.graph().node_size() == 0)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path +
                                       ": the ONNX model has no graph nodes");
  context->loadDialect<TofuDialect, func::FuncDialect>();
  result.module = ModuleOp::create(FileLineColLoc::get(context, path, 0, 0));
  OnnxImporter importer(context, path, options);
  importer.resolver().setModelBytes(bytes, file);
  result.modelBytes = bytes;
  // The initialization graph runs once, here: the plan's model (for --save)
  // starts from its values and no longer carries it (`model` is changed in
  // place). The fingerprint stays the one of the file as read.
  bool initialized = false;
  if (llvm::Error err = importer.applyInitialization(model, initialized))
    return std::move(err);
  if (llvm::Error err = importer.importGraph(model, *result.module))
    return std::move(err);
  if (auto err = runOnnxChecker(path, model, options))
    return std::move(err);
  // The weights read from external data files are part of the model's
  // identity: their hashes are mixed into the fingerprint.
  for (uint64_t hash : importer.externalHashes)
    for (int byte = 0; byte < 8; ++byte) {
      result.fingerprint ^= (hash >> (8 * byte)) & 0xff;
      result.fingerprint *= 1099511628211ull;
    }
  result.withoutWeights = importer.withoutWeights;
  if (options.verbose && !importer.foldedOps.empty()) {
    int total = 0;
    std::string list;
    for (const auto &[op, count] : importer.foldedOps) {
      total += count;
      list += (list.empty() ? "" : ", ") + op + " " + std::to_string(count);
    }
    llvm::errs() << "tofuc: note: " << path << ": folded " << total
                 << " nodes at import (" << list << ")\n";
  }
  result.mappings = importer.resolver().mappings();
  return std::move(result);
}

} // namespace tofu
