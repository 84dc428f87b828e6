//===- TdlInstance.cpp - tofu.compute ops as TDL instances ----------------===//
#include "tofu/Dialect/TdlInstance.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace tofu {

llvm::Expected<tdl::TensorType> toTdlType(RankedTensorType type) {
  tdl::TensorType result;
  result.dims.assign(type.getShape().begin(), type.getShape().end());
  Type elem = type.getElementType();
  if (elem.isF32())
    result.elem = tdl::ElemType::F32;
  else if (elem.isInteger(64))
    result.elem = tdl::ElemType::I64;
  else if (elem.isInteger(1))
    result.elem = tdl::ElemType::Bool;
  else {
    std::string str;
    llvm::raw_string_ostream os(str);
    os << type;
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "element type of " + str +
                                       " is not supported (f32 and i64 are)");
  }
  for (int64_t d : result.dims)
    if (ShapedType::isDynamic(d))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "dynamic dimensions are not supported");
  return result;
}

RankedTensorType fromTdlType(MLIRContext *ctx, const tdl::TensorType &type) {
  Type elem = type.elem == tdl::ElemType::F32
                 ? Type(Float32Type::get(ctx))
                 : Type(IntegerType::get(
                       ctx, type.elem == tdl::ElemType::Bool ? 1 : 64));
  return RankedTensorType::get(type.dims, elem);
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
