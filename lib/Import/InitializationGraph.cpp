//===- InitializationGraph.cpp - training_info initialization -------------===//
//
// See InitializationGraph.h. The graph is evaluated node by node with the
// import-time evaluator (ConstantFolding.h, any op with a TDL spec), after
// the same opset normalization as the model's nodes; the random ops, which
// have no TDL spec, are drawn here.
//
//===----------------------------------------------------------------------===//
#include "tofu/Import/InitializationGraph.h"
#include "tofu/runtime/ElementAccess.h"
#include "tofu/Import/ConstantFolding.h"
#include "tofu/Import/OpsetNormalization.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <random>

namespace tofu {

namespace {

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 message.str());
}

constexpr llvm::StringLiteral kWhere = "training_info[0].initialization";

std::string nodeLabel(const onnx::NodeProto &node) {
  std::string name = node.name();
  if (name.empty() && node.output_size())
    name = node.output(0);
  return "node '" + name + "' (" + node.op_type() + ") of " + kWhere.str();
}

/// The bytes of `dense` in the layout of its element type (every TDL
/// element type, converted as the runtime stores it). `what` is unused now
/// that every type has a layout; kept for the callers' messages.
llvm::Expected<TensorData> toTensorData(const tdl::DenseTensor &dense,
                                        llvm::StringRef what) {
  (void)what;
  TensorData data;
  data.type = dense.type;
  const auto dtype = static_cast<plan::DType>(dense.type.elem);
  data.bytes.resize(dense.data.size() * plan::dtypeSize(dtype));
  for (size_t k = 0; k < dense.data.size(); ++k)
    runtime::storeElement(data.bytes.data(), dtype, static_cast<int64_t>(k),
                          dense.data[k]);
  return data;
}

/// A float attribute of `node`, or `fallback`.
double floatAttr(const onnx::NodeProto &node, llvm::StringRef name,
                 double fallback, bool *present = nullptr) {
  for (const auto &attr : node.attribute())
    if (attr.name() == name) {
      if (present)
        *present = true;
      return attr.f();
    }
  if (present)
    *present = false;
  return fallback;
}

/// The generator of a random node: its `seed` attribute's bits, or, without
/// one, the FNV-1a hash of its first output's name (ONNX leaves an absent
/// seed to the runtime; tofuc keeps plans deterministic).
std::mt19937_64 generatorOf(const onnx::NodeProto &node) {
  bool seeded = false;
  double seed = floatAttr(node, "seed", 0, &seeded);
  uint64_t state;
  if (seeded) {
    float f = static_cast<float>(seed);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    state = bits;
  } else {
    state = 1469598103934665603ull;
    for (unsigned char c : node.output(0)) {
      state ^= c;
      state *= 1099511628211ull;
    }
  }
  return std::mt19937_64(state);
}

/// A uniform double in [0, 1) from 53 random bits (the same on every
/// standard library, unlike std::uniform_real_distribution).
double uniform01(std::mt19937_64 &generator) {
  return static_cast<double>(generator() >> 11) * 0x1.0p-53;
}

/// RandomNormal, RandomUniform, RandomNormalLike, RandomUniformLike: the
/// shape comes from `shape` or from the -Like input's type, the element
/// type from `dtype` (float32 by default, or the input's).
llvm::Expected<tdl::DenseTensor>
drawRandom(const onnx::NodeProto &node,
           const llvm::StringMap<tdl::DenseTensor> &values) {
  std::string where = nodeLabel(node);
  llvm::StringRef op = node.op_type();
  bool like = op.ends_with("Like");
  tdl::DenseTensor out;
  out.type.elem = tdl::ElemType::F32;
  if (like) {
    if (node.input_size() != 1 || !values.count(node.input(0)))
      return fail(where + ": its input must be an initializer or an earlier "
                          "result of the initialization graph");
    out.type = values.lookup(node.input(0)).type;
    out.type.elem = tdl::ElemType::F32;
  } else {
    bool hasShape = false;
    for (const auto &attr : node.attribute())
      if (attr.name() == "shape") {
        hasShape = true;
        for (int64_t d : attr.ints()) {
          if (d < 0)
            return fail(where + ": 'shape' has a negative dimension");
          out.type.dims.push_back(d);
        }
      }
    if (!hasShape)
      return fail(where + ": the attribute 'shape' is missing");
  }
  for (const auto &attr : node.attribute())
    if (attr.name() == "dtype" && attr.i() != onnx::TensorProto::FLOAT)
      return fail(where + ": dtype " + onnxElemTypeName(attr.i()) +
                  " is not supported (random values are FLOAT)");
  int64_t count = 1;
  for (int64_t d : out.type.dims)
    count *= d;
  std::mt19937_64 generator = generatorOf(node);
  out.data.reserve(count);
  if (op.starts_with("RandomNormal")) {
    double mean = floatAttr(node, "mean", 0), scale = floatAttr(node, "scale", 1);
    for (int64_t k = 0; k < count; ++k) {
      // Box-Muller on (0, 1] x [0, 1).
      double u1 = 1.0 - uniform01(generator), u2 = uniform01(generator);
      double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2);
      out.data.push_back(static_cast<float>(mean + scale * z));
    }
  } else {
    double low = floatAttr(node, "low", 0), high = floatAttr(node, "high", 1);
    for (int64_t k = 0; k < count; ++k)
      out.data.push_back(
          static_cast<float>(low + (high - low) * uniform01(generator)));
  }
  return out;
}

bool isRandomOp(llvm::StringRef op) {
  return op == "RandomNormal" || op == "RandomUniform" ||
         op == "RandomNormalLike" || op == "RandomUniformLike";
}

/// The value of a Constant node (`value`, `value_float(s)`, `value_int(s)`).
llvm::Expected<tdl::DenseTensor> constantOf(const onnx::NodeProto &node) {
  std::string where = nodeLabel(node);
  for (const auto &attr : node.attribute()) {
    onnx::TensorProto tensor;
    if (attr.name() == "value") {
      tensor = attr.t();
    } else if (attr.name() == "value_float") {
      tensor.set_data_type(onnx::TensorProto::FLOAT);
      tensor.add_float_data(attr.f());
    } else if (attr.name() == "value_floats") {
      tensor.set_data_type(onnx::TensorProto::FLOAT);
      tensor.add_dims(attr.floats_size());
      for (float v : attr.floats())
        tensor.add_float_data(v);
    } else if (attr.name() == "value_int") {
      tensor.set_data_type(onnx::TensorProto::INT64);
      tensor.add_int64_data(attr.i());
    } else if (attr.name() == "value_ints") {
      tensor.set_data_type(onnx::TensorProto::INT64);
      tensor.add_dims(attr.ints_size());
      for (int64_t v : attr.ints())
        tensor.add_int64_data(v);
    } else {
      continue;
    }
    auto data = convertOnnxTensor(tensor, where);
    if (!data)
      return data.takeError();
    return data->toDense();
  }
  return fail(where + ": only 'value', 'value_float(s)' and 'value_int(s)' "
                      "Constants are supported");
}

} // namespace

llvm::Expected<bool> applyInitializationGraph(onnx::ModelProto &model,
                                              int64_t opset,
                                              InitializerReader read) {
  if (model.training_info_size() != 1)
    return false;
  onnx::TrainingInfoProto &info = *model.mutable_training_info(0);
  const onnx::GraphProto &graph = info.initialization();
  if (graph.node_size() == 0 && info.initialization_binding_size() == 0)
    return false;

  // The initializers it may read: the inference graph's, the algorithm's
  // and its own, read when first used.
  llvm::StringMap<onnx::TensorProto *> initializers;
  for (auto &init : *model.mutable_graph()->mutable_initializer())
    initializers[init.name()] = &init;
  for (auto &init : *info.mutable_algorithm()->mutable_initializer())
    initializers.try_emplace(init.name(), &init);
  llvm::StringMap<const onnx::TensorProto *> ownInitializers;
  for (const auto &init : graph.initializer())
    ownInitializers[init.name()] = &init;
  for (const auto &input : graph.input())
    if (!ownInitializers.count(input.name()))
      return fail(kWhere + " has the input '" + input.name() +
                  "'; an initialization graph runs once before training and "
                  "has no inputs: make it an initializer or a Constant");

  llvm::StringMap<tdl::DenseTensor> values;
  auto load = [&](const std::string &name) -> llvm::Error {
    if (values.count(name))
      return llvm::Error::success();
    const onnx::TensorProto *init = ownInitializers.lookup(name);
    if (!init)
      init = initializers.lookup(name);
    if (!init)
      return llvm::Error::success(); // reported by the reader of `name`
    auto data = read(*init);
    if (!data)
      return data.takeError();
    values[name] = data->toDense();
    return llvm::Error::success();
  };

  for (const onnx::NodeProto &original : graph.node()) {
    onnx::NodeProto node = original;
    std::string where = nodeLabel(node);
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      return fail(where + ": operator domain '" + node.domain() +
                  "' is not supported in an initialization graph");
    for (const std::string &name : node.input()) {
      if (name.empty())
        continue;
      if (auto err = load(name))
        return std::move(err);
      if (!values.count(name))
        return fail(where + " reads '" + name +
                    "', which is neither an initializer nor computed by an "
                    "earlier node of the initialization graph; tofuc runs "
                    "the graph once while compiling, before any data exists");
    }
    if (node.op_type() == "Constant") {
      auto value = constantOf(node);
      if (!value)
        return value.takeError();
      values[node.output(0)] = std::move(*value);
      continue;
    }
    if (isRandomOp(node.op_type())) {
      auto value = drawRandom(node, values);
      if (!value)
        return value.takeError();
      values[node.output(0)] = std::move(*value);
      continue;
    }

    std::vector<std::unique_ptr<TensorData>> inputData;
    auto constantData = [&](llvm::StringRef name) -> const TensorData * {
      auto it = values.find(name);
      if (it == values.end())
        return nullptr;
      auto data = toTensorData(it->second, name);
      if (!data) {
        llvm::consumeError(data.takeError());
        return nullptr;
      }
      inputData.push_back(std::make_unique<TensorData>(std::move(*data)));
      return inputData.back().get();
    };
    auto typeOf = [&](llvm::StringRef name) -> std::optional<tdl::TensorType> {
      auto it = values.find(name);
      if (it == values.end())
        return std::nullopt;
      return it->second.type;
    };
    std::vector<std::pair<std::string, TensorData>> newConstants;
    if (auto err = normalizeOnnxNode(node, opset, where, constantData, typeOf,
                                     newConstants))
      return std::move(err);
    for (auto &[name, data] : newConstants)
      values[name] = data.toDense();

    if (!isFoldableOp(node.op_type()) &&
        !tdl::SpecLibrary::builtin().lookup(node.op_type()))
      return fail(where + ": tofuc runs the initialization graph while "
                          "compiling and cannot evaluate '" +
                  node.op_type() +
                  "' (it has no TDL spec); compute the initial value "
                  "elsewhere and store it in the initializer");
    std::vector<std::optional<tdl::TensorType>> types;
    std::vector<const tdl::DenseTensor *> inputs;
    for (const std::string &name : node.input()) {
      if (name.empty()) {
        types.push_back(std::nullopt);
        inputs.push_back(nullptr);
        continue;
      }
      const tdl::DenseTensor &value = values.find(name)->second;
      types.push_back(value.type);
      inputs.push_back(&value);
    }
    auto attrs = convertEvaluatedNodeAttributes(node, where);
    if (!attrs)
      return attrs.takeError();
    auto outputs = evaluateOpOnce(node.op_type(), attrs->attrs, types, inputs,
                                  attrs->constantOfShapeValue
                                      ? &*attrs->constantOfShapeValue
                                      : nullptr,
                                  node.output_size());
    if (!outputs)
      return fail(where + ": evaluating it while compiling failed: " +
                  llvm::toString(outputs.takeError()));
    for (auto [i, name] : llvm::enumerate(node.output()))
      if (!name.empty() && i < outputs->size())
        values[name] = std::move((*outputs)[i]);
  }

  // The bindings: each initializer at most once, from a computed value of
  // its own shape and element type.
  llvm::StringSet<> bound;
  for (const auto &binding : info.initialization_binding()) {
    const std::string &key = binding.key(), &value = binding.value();
    std::string where =
        "training_info[0].initialization_binding of '" + key + "'";
    onnx::TensorProto *init = initializers.lookup(key);
    if (!init)
      return fail(where + ": '" + key +
                  "' is not an initializer of the graph or of the algorithm");
    if (!bound.insert(key).second)
      return fail(where + ": '" + key + "' is bound twice");
    auto it = values.find(value);
    if (it == values.end())
      return fail(where + ": its value '" + value +
                  "' is not computed by the initialization graph");
    auto elem = convertOnnxElemType(init->data_type(), "initializer '" + key +
                                                           "'");
    if (!elem)
      return elem.takeError();
    std::vector<int64_t> dims(init->dims().begin(), init->dims().end());
    const tdl::TensorType &type = it->second.type;
    if (type.dims != dims || type.elem != *elem) {
      auto describe = [](const std::vector<int64_t> &shape,
                         tdl::ElemType elem) {
        std::string text = "[";
        for (size_t d = 0; d < shape.size(); ++d)
          text += (d ? ", " : "") + std::to_string(shape[d]);
        return text + "] " + elemTypeString(elem);
      };
      return fail(where + ": the initializer is " + describe(dims, *elem) +
                  " but its value '" + value + "' is " +
                  describe(type.dims, type.elem));
    }
    auto data = toTensorData(it->second, "'" + value + "'");
    if (!data)
      return data.takeError();
    init->clear_float_data();
    init->clear_int32_data();
    init->clear_int64_data();
    init->clear_double_data();
    init->clear_external_data();
    init->set_data_location(onnx::TensorProto::DEFAULT);
    init->set_raw_data(data->bytes.data(), data->bytes.size());
  }
  info.clear_initialization();
  info.clear_initialization_binding();
  return true;
}

} // namespace tofu
