//===- OnnxConversion.cpp - ONNX protobuf values -> TDL values ------------===//
//
// Attribute, element-type and tensor conversions shared by the importer and
// the ONNX node-test runner (see OnnxConversion.h).
//
//===----------------------------------------------------------------------===//
#include "tofu/Import/OnnxConversion.h"

#include "tofu/runtime/ElementAccess.h"

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

size_t elemTypeBytes(tdl::ElemType type) { return tdl::elemBytes(type); }

std::string elemTypeString(tdl::ElemType type) { return tdl::elemName(type); }

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
    case onnx::AttributeProto::TENSOR:
      if (node.op_type() == "ConstantOfShape" && attr.name() == "value") {
        // A one-element tensor: the spec takes its value and its ONNX
        // data-type code (tdl-specs/generators.tdl).
        std::string what = "node '" + nodeName.str() +
                           "' (ConstantOfShape): attribute 'value'";
        auto data = convertOnnxTensor(attr.t(), what);
        if (!data)
          return data.takeError();
        if (data->numElements() != 1)
          return error(what + " holds " +
                       std::to_string(data->numElements()) +
                       " elements, not one");
        attrs["value"] = tdl::AttrValue::ofFloat(data->valueAt(0));
        attrs["dtype"] = tdl::AttrValue::ofInt(attr.t().data_type());
        break;
      }
      [[fallthrough]];
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
  // libonnx 1.12's enum stops at BFLOAT16 (16); the later types are named
  // by their onnx.proto numbers (onnx 1.14: float8, 1.16: 4-bit integers,
  // 1.18: FLOAT4E2M1), so that a model of a newer onnx is told which type it
  // uses rather than a number.
  switch (elemType) {
  case 17: return "FLOAT8E4M3FN";
  case 18: return "FLOAT8E4M3FNUZ";
  case 19: return "FLOAT8E5M2";
  case 20: return "FLOAT8E5M2FNUZ";
  case 21: return "UINT4";
  case 22: return "INT4";
  case 23: return "FLOAT4E2M1";
  default: break;
  }
  if (!onnx::TensorProto::DataType_IsValid(elemType))
    return "<unknown type " + std::to_string(elemType) + ">";
  return onnx::TensorProto::DataType_Name(
      static_cast<onnx::TensorProto::DataType>(elemType));
}

llvm::Expected<tdl::ElemType> convertOnnxElemType(int32_t elemType,
                                                  llvm::StringRef what) {
  using tdl::ElemType;
  switch (elemType) {
  case onnx::TensorProto::FLOAT: return ElemType::F32;
  case onnx::TensorProto::DOUBLE: return ElemType::F64;
  case onnx::TensorProto::FLOAT16: return ElemType::F16;
  case onnx::TensorProto::BFLOAT16: return ElemType::BF16;
  case onnx::TensorProto::INT64: return ElemType::I64;
  case onnx::TensorProto::INT32: return ElemType::I32;
  case onnx::TensorProto::INT16: return ElemType::I16;
  case onnx::TensorProto::INT8: return ElemType::I8;
  case onnx::TensorProto::UINT8: return ElemType::U8;
  case onnx::TensorProto::UINT16: return ElemType::U16;
  case onnx::TensorProto::UINT32: return ElemType::U32;
  case onnx::TensorProto::UINT64: return ElemType::U64;
  case onnx::TensorProto::BOOL: return ElemType::Bool;
  default: break;
  }
  return error(what + " has ONNX element type " + onnxElemTypeName(elemType) +
               ", which is not supported (FLOAT, DOUBLE, FLOAT16, BFLOAT16, "
               "INT8..INT64, UINT8..UINT64 and BOOL are)");
}

llvm::Error checkTensorShape(llvm::ArrayRef<int64_t> dims,
                             const llvm::Twine &what) {
  if (dims.size() > static_cast<size_t>(plan::kMaxTensorRank))
    return error(what + " has rank " + std::to_string(dims.size()) +
                 ", over the limit of " +
                 std::to_string(plan::kMaxTensorRank));
  int64_t elements = 1;
  for (auto [d, dim] : llvm::enumerate(dims)) {
    if (dim < 0)
      return error(what + " has a negative dimension " + std::to_string(d) +
                   " (" + std::to_string(dim) + ")");
    if (__builtin_mul_overflow(elements, dim, &elements) ||
        elements > plan::kMaxTensorElements) {
      std::string shape;
      for (int64_t x : dims)
        shape += (shape.empty() ? "" : "x") + std::to_string(x);
      return error(what + " has shape " + shape + ", over the limit of " +
                   std::to_string(plan::kMaxTensorElements) +
                   " (2^56) elements");
    }
  }
  return llvm::Error::success();
}

int64_t TensorData::numElements() const {
  int64_t n = 1;
  for (int64_t d : type.dims)
    n *= d;
  return n;
}

double TensorData::valueAt(int64_t index) const {
  return runtime::loadElement(bytes.data(),
                              static_cast<plan::DType>(type.elem), index);
}

tdl::DenseTensor TensorData::toDense() const {
  tdl::DenseTensor dense;
  dense.type = type;
  int64_t n = numElements();
  dense.data.reserve(n);
  for (int64_t k = 0; k < n; ++k)
    dense.data.push_back(valueAt(k));
  return dense;
}

llvm::Expected<EvaluatedNodeAttributes>
convertEvaluatedNodeAttributes(const onnx::NodeProto &node,
                               llvm::StringRef where) {
  EvaluatedNodeAttributes result;
  onnx::NodeProto plain = node;
  if (node.op_type() == "ConstantOfShape") {
    plain.clear_attribute();
    for (const auto &attr : node.attribute()) {
      if (attr.name() != "value") {
        *plain.add_attribute() = attr;
        continue;
      }
      auto data =
          convertOnnxTensor(attr.t(), where.str() + ": attribute 'value'");
      if (!data)
        return data.takeError();
      result.constantOfShapeValue = data->toDense();
    }
  }
  auto attrs = convertOnnxAttributes(plain, node.name());
  if (!attrs)
    return attrs.takeError();
  result.attrs = std::move(*attrs);
  return result;
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
  for (int64_t d : tensor.dims())
    result.type.dims.push_back(d);
  if (auto err = checkTensorShape(result.type.dims, what))
    return std::move(err);
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
  // The typed field of each element type (onnx.proto): float_data,
  // double_data, int64_data, uint64_data (UINT32, UINT64), and int32_data
  // for the rest (16-bit floats as their bit patterns).
  int64_t found = 0;
  const char *unit = "";
  using tdl::ElemType;
  if (*elem == ElemType::F32) {
    found = tensor.float_data_size();
    unit = " floats";
    copyField<float>(tensor.float_data(), result.bytes);
  } else if (*elem == ElemType::F64) {
    found = tensor.double_data_size();
    unit = " doubles";
    copyField<double>(tensor.double_data(), result.bytes);
  } else if (*elem == ElemType::I64) {
    found = tensor.int64_data_size();
    unit = " int64 values";
    copyField<int64_t>(tensor.int64_data(), result.bytes);
  } else if (*elem == ElemType::U64 || *elem == ElemType::U32) {
    found = tensor.uint64_data_size();
    unit = " uint64_data values";
    result.bytes.resize(found * elemBytes);
    for (int64_t k = 0; k < found; ++k) {
      uint64_t v = tensor.uint64_data(static_cast<int>(k));
      std::memcpy(result.bytes.data() + k * elemBytes, &v, elemBytes);
    }
  } else { // int32_data: the low bytes (little-endian) are the value
    found = tensor.int32_data_size();
    unit = " int32_data values";
    result.bytes.resize(found * elemBytes);
    for (int64_t k = 0; k < found; ++k) {
      uint32_t v = static_cast<uint32_t>(tensor.int32_data(static_cast<int>(k)));
      if (isBoolElemType(*elem))
        v = v != 0;
      std::memcpy(result.bytes.data() + k * elemBytes, &v, elemBytes);
    }
  }
  if (found != count)
    return error(what + " holds " + std::to_string(found) + unit +
                 " but its shape needs " + std::to_string(count));
  return std::move(result);
}

} // namespace tofu
