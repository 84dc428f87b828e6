//===- OnnxConversion.cpp - ONNX protobuf values -> TDL values ------------===//
//
// Attribute, element-type and tensor conversions shared by the importer and
// the ONNX node-test runner (see OnnxConversion.h).
//
//===----------------------------------------------------------------------===//
#include "tofu/Import/OnnxConversion.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <type_traits>

namespace tofu {

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 message.str());
}

/// Detects `E::Bool`, so that this file builds both before and after the TDL
/// library gains its Bool element type.
template <typename E, typename = void> struct HasBool : std::false_type {};
template <typename E>
struct HasBool<E, std::void_t<decltype(E::Bool)>> : std::true_type {};

template <typename E> std::optional<E> boolOf() {
  if constexpr (HasBool<E>::value)
    return E::Bool;
  else
    return std::nullopt;
}

} // namespace

std::optional<tdl::ElemType> tdlBoolElemType() {
  return boolOf<tdl::ElemType>();
}

bool isBoolElemType(tdl::ElemType type) {
  auto b = tdlBoolElemType();
  return b && *b == type;
}

size_t elemTypeBytes(tdl::ElemType type) {
  if (type == tdl::ElemType::F32)
    return 4;
  if (type == tdl::ElemType::I64)
    return 8;
  return 1; // Bool
}

std::string elemTypeString(tdl::ElemType type) {
  if (type == tdl::ElemType::F32)
    return "f32";
  if (type == tdl::ElemType::I64)
    return "i64";
  return isBoolElemType(type) ? "bool" : "?";
}

llvm::Expected<tdl::AttrMap> convertOnnxAttributes(const onnx::NodeProto &node,
                                                   llvm::StringRef nodeName) {
  tdl::AttrMap attrs;
  for (const auto &attr : node.attribute()) {
    switch (attr.type()) {
    case onnx::AttributeProto::INT:
      attrs[attr.name()] = tdl::AttrValue::ofInt(attr.i());
      break;
    case onnx::AttributeProto::FLOAT:
      attrs[attr.name()] = tdl::AttrValue::ofFloat(attr.f());
      break;
    case onnx::AttributeProto::STRING:
      attrs[attr.name()] = tdl::AttrValue::ofString(attr.s());
      break;
    case onnx::AttributeProto::INTS:
      attrs[attr.name()] = tdl::AttrValue::ofInts(
          std::vector<int64_t>(attr.ints().begin(), attr.ints().end()));
      break;
    default:
      return error("node '" + nodeName + "' (" + node.op_type() +
                   "): attribute '" + attr.name() + "' has kind " +
                   onnx::AttributeProto::AttributeType_Name(attr.type()) +
                   ", which is not supported (int, float, string, ints are)");
    }
  }
  return attrs;
}

std::string onnxElemTypeName(int32_t elemType) {
  if (!onnx::TensorProto::DataType_IsValid(elemType))
    return "<unknown type " + std::to_string(elemType) + ">";
  return onnx::TensorProto::DataType_Name(
      static_cast<onnx::TensorProto::DataType>(elemType));
}

llvm::Expected<tdl::ElemType> convertOnnxElemType(int32_t elemType,
                                                  llvm::StringRef what) {
  if (elemType == onnx::TensorProto::FLOAT)
    return tdl::ElemType::F32;
  if (elemType == onnx::TensorProto::INT64)
    return tdl::ElemType::I64;
  auto boolType = tdlBoolElemType();
  if (elemType == onnx::TensorProto::BOOL && boolType)
    return *boolType;
  return error(what + " has ONNX element type " + onnxElemTypeName(elemType) +
               ", which is not supported (" +
               (boolType ? "FLOAT, INT64 and BOOL are" : "FLOAT and INT64 are") +
               ")");
}

int64_t TensorData::numElements() const {
  int64_t n = 1;
  for (int64_t d : type.dims)
    n *= d;
  return n;
}

double TensorData::valueAt(int64_t index) const {
  const uint8_t *p = bytes.data() + index * elemTypeBytes(type.elem);
  if (type.elem == tdl::ElemType::F32) {
    float v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  if (type.elem == tdl::ElemType::I64) {
    int64_t v;
    std::memcpy(&v, p, sizeof v);
    return static_cast<double>(v);
  }
  return *p ? 1.0 : 0.0;
}

/// Copies a repeated typed field into `out`, converting each value to `T`.
template <typename T, typename Field>
static void copyField(const Field &field, std::vector<uint8_t> &out) {
  out.resize(field.size() * sizeof(T));
  for (int k = 0; k < field.size(); ++k) {
    T v = static_cast<T>(field.Get(k));
    std::memcpy(out.data() + k * sizeof(T), &v, sizeof(T));
  }
}

llvm::Expected<TensorData> convertOnnxTensor(const onnx::TensorProto &tensor,
                                             llvm::StringRef what) {
  TensorData result;
  auto elem = convertOnnxElemType(tensor.data_type(), what);
  if (!elem)
    return elem.takeError();
  result.type.elem = *elem;
  for (int64_t d : tensor.dims()) {
    if (d < 0)
      return error(what + " has a negative dimension " + std::to_string(d));
    result.type.dims.push_back(d);
  }
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
    return error(what + " uses external data, which is not supported yet");
  int64_t count = result.numElements();
  size_t elemBytes = elemTypeBytes(*elem);
  if (tensor.has_raw_data()) {
    const std::string &raw = tensor.raw_data();
    if (raw.size() != static_cast<size_t>(count) * elemBytes)
      return error(what + " holds " + std::to_string(raw.size()) +
                   " bytes of data but its shape needs " +
                   std::to_string(count * elemBytes));
    result.bytes.assign(raw.begin(), raw.end());
    if (isBoolElemType(*elem))
      for (uint8_t &b : result.bytes)
        b = b != 0;
    return std::move(result);
  }
  int64_t found = 0;
  const char *unit = "";
  if (*elem == tdl::ElemType::F32) {
    found = tensor.float_data_size();
    unit = " floats";
    copyField<float>(tensor.float_data(), result.bytes);
  } else if (*elem == tdl::ElemType::I64) {
    found = tensor.int64_data_size();
    unit = " int64 values";
    copyField<int64_t>(tensor.int64_data(), result.bytes);
  } else { // Bool: stored in int32_data
    found = tensor.int32_data_size();
    unit = " bool values";
    result.bytes.resize(found);
    for (int64_t k = 0; k < found; ++k)
      result.bytes[k] = tensor.int32_data(static_cast<int>(k)) != 0;
  }
  if (found != count)
    return error(what + " holds " + std::to_string(found) + unit +
                 " but its shape needs " + std::to_string(count));
  return std::move(result);
}

} // namespace tofu
