//===- TdlInstance.cpp - tofu.compute ops as TDL instances ----------------===//
#include "tofu/Dialect/TdlInstance.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace tofu {

llvm::Expected<tdl::TensorType> toTdlType(RankedTensorType type) {
  tdl::TensorType result;
  result.dims.assign(type.getShape().begin(), type.getShape().end());
  std::optional<tdl::ElemType> elem = toTdlElemType(type.getElementType());
  if (!elem) {
    std::string str;
    llvm::raw_string_ostream os(str);
    os << type;
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "element type of " + str +
            " is not supported (f16, bf16, f32, f64, i1, i8..i64 and "
            "ui8..ui64 are)");
  }
  result.elem = *elem;
  for (int64_t d : result.dims)
    if (ShapedType::isDynamic(d))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "dynamic dimensions are not supported");
  return result;
}

std::optional<tdl::ElemType> toTdlElemType(Type elem) {
  if (elem.isF32())
    return tdl::ElemType::F32;
  if (elem.isF64())
    return tdl::ElemType::F64;
  if (elem.isF16())
    return tdl::ElemType::F16;
  if (elem.isBF16())
    return tdl::ElemType::BF16;
  auto integer = dyn_cast<IntegerType>(elem);
  if (!integer)
    return std::nullopt;
  if (integer.getWidth() == 1)
    return integer.isUnsigned() ? std::nullopt
                                : std::optional(tdl::ElemType::Bool);
  bool isUnsigned = integer.isUnsigned();
  switch (integer.getWidth()) {
  case 8: return isUnsigned ? tdl::ElemType::U8 : tdl::ElemType::I8;
  case 16: return isUnsigned ? tdl::ElemType::U16 : tdl::ElemType::I16;
  case 32: return isUnsigned ? tdl::ElemType::U32 : tdl::ElemType::I32;
  case 64: return isUnsigned ? tdl::ElemType::U64 : tdl::ElemType::I64;
  default: return std::nullopt;
  }
}

Type fromTdlElemType(MLIRContext *ctx, tdl::ElemType elem) {
  using tdl::ElemType;
  auto uint = [&](unsigned w) {
    return IntegerType::get(ctx, w, IntegerType::Unsigned);
  };
  switch (elem) {
  case ElemType::F32: return Float32Type::get(ctx);
  case ElemType::F64: return Float64Type::get(ctx);
  case ElemType::F16: return Float16Type::get(ctx);
  case ElemType::BF16: return BFloat16Type::get(ctx);
  case ElemType::Bool: return IntegerType::get(ctx, 1);
  case ElemType::I8: return IntegerType::get(ctx, 8);
  case ElemType::I16: return IntegerType::get(ctx, 16);
  case ElemType::I32: return IntegerType::get(ctx, 32);
  case ElemType::I64: return IntegerType::get(ctx, 64);
  case ElemType::U8: return uint(8);
  case ElemType::U16: return uint(16);
  case ElemType::U32: return uint(32);
  case ElemType::U64: return uint(64);
  }
  return Float32Type::get(ctx);
}

RankedTensorType fromTdlType(MLIRContext *ctx, const tdl::TensorType &type) {
  return RankedTensorType::get(type.dims, fromTdlElemType(ctx, type.elem));
}

llvm::Expected<tdl::AttrMap> toTdlAttrs(DictionaryAttr attrs) {
  tdl::AttrMap result;
  if (!attrs)
    return result;
  for (NamedAttribute named : attrs) {
    std::string name = named.getName().str();
    Attribute value = named.getValue();
    if (named.getName().strref().starts_with(kConstValuePrefix))
      continue;
    if (auto i = dyn_cast<IntegerAttr>(value))
      result[name] = tdl::AttrValue::ofInt(i.getInt());
    else if (auto f = dyn_cast<FloatAttr>(value))
      result[name] = tdl::AttrValue::ofFloat(f.getValueAsDouble());
    else if (auto s = dyn_cast<StringAttr>(value))
      result[name] = tdl::AttrValue::ofString(s.str());
    else if (auto a = dyn_cast<DenseI64ArrayAttr>(value))
      result[name] = tdl::AttrValue::ofInts(
          std::vector<int64_t>(a.asArrayRef().begin(), a.asArrayRef().end()));
    else
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "attribute '" + name +
              "' has an unsupported kind (int, float, string and int arrays "
              "are supported)");
  }
  return result;
}

llvm::Expected<ConstValues> constValuesOf(DictionaryAttr attrs) {
  ConstValues result;
  if (!attrs)
    return result;
  for (NamedAttribute named : attrs) {
    StringRef name = named.getName().strref();
    if (!name.consume_front(kConstValuePrefix))
      continue;
    unsigned index;
    auto values = dyn_cast<DenseF64ArrayAttr>(named.getValue());
    if (name.getAsInteger(10, index) || !values)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "attribute '" + named.getName().str() +
              "': const operand values are 'tdl.const<index>' = array<f64>");
    result[index].assign(values.asArrayRef().begin(),
                         values.asArrayRef().end());
  }
  return result;
}

DictionaryAttr fromTdlAttrs(MLIRContext *ctx, const tdl::AttrMap &attrs,
                            const ConstValues &constValues) {
  Builder b(ctx);
  SmallVector<NamedAttribute> named;
  for (const auto &[index, values] : constValues)
    named.push_back(b.getNamedAttr(
        (kConstValuePrefix + llvm::Twine(index)).str(),
        b.getDenseF64ArrayAttr(values)));
  for (const auto &[name, value] : attrs) {
    Attribute attr;
    switch (value.kind) {
    case tdl::AttrValue::Kind::Int:
      attr = b.getI64IntegerAttr(value.i);
      break;
    case tdl::AttrValue::Kind::Float:
      attr = b.getF64FloatAttr(value.f);
      break;
    case tdl::AttrValue::Kind::String:
      attr = b.getStringAttr(value.s);
      break;
    case tdl::AttrValue::Kind::Ints:
      attr = b.getDenseI64ArrayAttr(value.ints);
      break;
    }
    named.push_back(b.getNamedAttr(name, attr));
  }
  return b.getDictionaryAttr(named);
}

llvm::Expected<tdl::OpInstance> instantiateSpec(StringRef spec,
                                                TypeRange operandTypes,
                                                const tdl::AttrMap &attrs,
                                                const ConstValues &constValues) {
  const tdl::OpSpec *opSpec = tdl::SpecLibrary::builtin().lookup(spec);
  if (!opSpec)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "no TDL spec for operator '" + spec + "'");
  std::vector<std::optional<tdl::TensorType>> inputs;
  for (Type type : operandTypes) {
    auto ranked = dyn_cast<RankedTensorType>(type);
    if (!ranked)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "operands must be ranked tensors");
    auto tdlType = toTdlType(ranked);
    if (!tdlType)
      return tdlType.takeError();
    inputs.push_back(*tdlType);
  }
  return tdl::instantiate(*opSpec, inputs, attrs, constValues);
}

llvm::Expected<tdl::OpInstance> instantiate(ComputeOp op) {
  auto attrs = toTdlAttrs(op.getAttrs());
  if (!attrs)
    return attrs.takeError();
  auto constValues = constValuesOf(op.getAttrs());
  if (!constValues)
    return constValues.takeError();
  auto instance = instantiateSpec(op.getSpec(), op.getInputs().getTypes(),
                                  *attrs, *constValues);
  // An op that omits trailing optional outputs: the instance has only the
  // op's results (a wrong count is left to the verifier).
  if (!instance || op.getNumResults() >= instance->outputTypes().size() ||
      op.getNumResults() < instance->numRequiredOutputs())
    return instance;
  std::vector<std::optional<tdl::TensorType>> inputs =
      instance->inputTypes();
  return tdl::instantiate(instance->spec(), inputs, *attrs, *constValues,
                          op.getNumResults());
}

} // namespace tofu
