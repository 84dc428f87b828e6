//===- ConstantFolding.cpp - Import-time folding of shape arithmetic ------===//
//
// See ConstantFolding.h. Ops with a TDL spec are evaluated by the TDL
// reference evaluator; Shape, Size, ConstantOfShape and Range here.
//
//===----------------------------------------------------------------------===//
#include "tofu/Import/ConstantFolding.h"

#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <limits>

namespace tofu {

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 message.str());
}

int64_t numElements(const tdl::TensorType &type) {
  int64_t n = 1;
  for (int64_t d : type.dims)
    n *= d;
  return n;
}

/// Ops evaluated by the TDL reference evaluator when their inputs are known.
const llvm::StringSet<> &specFoldableOps() {
  static const llvm::StringSet<> ops = {
      "Identity", "Cast",      "Reshape", "Flatten",   "Squeeze",
      "Unsqueeze", "Concat",   "Gather",  "Slice",     "Expand",
      "Transpose", "Split",    "Add",     "Sub",       "Mul",
      "Div",       "Neg",      "Abs",     "Sqrt",      "Pow",
      "Equal",     "Less",     "Greater", "LessOrEqual", "GreaterOrEqual",
      "Where",     "ReduceSum", "Max",     "Min"};
  return ops;
}

/// Results of the (float64) evaluator in their element type: floats rounded
/// to it, integers truncated toward zero (ONNX integer Div) and wrapped,
/// bool `!= 0` (tdl::convertToElem).
llvm::Error normalizeValues(tdl::DenseTensor &tensor, llvm::StringRef op) {
  bool integer = !tdl::isFloatElem(tensor.type.elem);
  for (double &v : tensor.data) {
    if (integer && !std::isfinite(v))
      return error(op + " gives a non-finite integer value (division by "
                        "zero?)");
    v = tdl::convertToElem(v, tensor.type.elem);
  }
  return llvm::Error::success();
}

int64_t intAttr(const tdl::AttrMap &attrs, llvm::StringRef name,
                int64_t fallback) {
  auto it = attrs.find(name.str());
  return it == attrs.end() ? fallback : it->second.i;
}

} // namespace

bool foldsFromTypesOnly(llvm::StringRef opType) {
  return opType == "Shape" || opType == "Size";
}

bool isFoldableOp(llvm::StringRef opType) {
  return foldsFromTypesOnly(opType) || opType == "ConstantOfShape" ||
         opType == "Range" || specFoldableOps().contains(opType);
}

/// foldOp's work: `anySpec` evaluates every op with a TDL spec (not only
/// the foldable list); results over `maxElements` elements give nullopt.
static llvm::Expected<std::optional<std::vector<tdl::DenseTensor>>>
evaluateOp(llvm::StringRef opType, const tdl::AttrMap &attrs,
           llvm::ArrayRef<std::optional<tdl::TensorType>> inputTypes,
           llvm::ArrayRef<const tdl::DenseTensor *> inputValues,
           const tdl::DenseTensor *valueAttr, unsigned numOutputs,
           bool anySpec, int64_t maxElements) {
  using Result = std::optional<std::vector<tdl::DenseTensor>>;
  // Trailing absent operands are simply omitted.
  while (!inputTypes.empty() && !inputTypes.back()) {
    inputTypes = inputTypes.drop_back();
    inputValues = inputValues.take_front(
        std::min(inputValues.size(), inputTypes.size()));
  }
  auto scalarInput = [&](unsigned i) -> const tdl::DenseTensor * {
    if (i >= inputValues.size() || !inputValues[i])
      return nullptr;
    return inputValues[i]->data.size() == 1 ? inputValues[i] : nullptr;
  };

  if (opType == "Shape" || opType == "Size") {
    if (inputTypes.empty() || !inputTypes[0])
      return error(opType + " needs one input");
    const std::vector<int64_t> &dims = inputTypes[0]->dims;
    tdl::DenseTensor out;
    out.type.elem = tdl::ElemType::I64;
    if (opType == "Size") {
      out.data.push_back(static_cast<double>(numElements(*inputTypes[0])));
      return Result(std::vector<tdl::DenseTensor>{out});
    }
    // Shape (opset 15): dims[start:end], negative values count from the end,
    // clamped to [0, rank].
    int64_t rank = dims.size();
    auto clampIndex = [&](int64_t v) {
      if (v < 0)
        v += rank;
      return std::min(std::max<int64_t>(v, 0), rank);
    };
    int64_t start = clampIndex(intAttr(attrs, "start", 0));
    int64_t end = clampIndex(intAttr(attrs, "end", rank));
    for (int64_t d = start; d < end; ++d)
      out.data.push_back(static_cast<double>(dims[d]));
    out.type.dims = {static_cast<int64_t>(out.data.size())};
    return Result(std::vector<tdl::DenseTensor>{out});
  }

  if (opType == "ConstantOfShape") {
    if (inputValues.empty() || !inputValues[0])
      return error("ConstantOfShape needs its shape input");
    tdl::DenseTensor out;
    out.type.elem = valueAttr ? valueAttr->type.elem : tdl::ElemType::F32;
    double value = 0;
    if (valueAttr) {
      if (valueAttr->data.size() != 1)
        return error("ConstantOfShape's 'value' must hold one element");
      value = valueAttr->data[0];
    }
    for (double d : inputValues[0]->data) {
      if (d < 0)
        return error("ConstantOfShape's shape has a negative dimension");
      out.type.dims.push_back(static_cast<int64_t>(d));
    }
    if (numElements(out.type) > maxElements)
      return Result(std::nullopt);
    out.data.assign(numElements(out.type), value);
    return Result(std::vector<tdl::DenseTensor>{out});
  }

  if (opType == "Range") {
    const tdl::DenseTensor *start = scalarInput(0), *limit = scalarInput(1),
                           *delta = scalarInput(2);
    if (!start || !limit || !delta)
      return error("Range needs three scalar inputs (start, limit, delta)");
    double s = start->data[0], l = limit->data[0], d = delta->data[0];
    if (d == 0)
      return error("Range's delta is 0");
    double count = std::max(std::ceil((l - s) / d), 0.0);
    if (count > maxElements)
      return Result(std::nullopt);
    tdl::DenseTensor out;
    out.type.elem = start->type.elem;
    out.type.dims = {static_cast<int64_t>(count)};
    for (int64_t k = 0; k < static_cast<int64_t>(count); ++k)
      out.data.push_back(s + k * d);
    if (auto err = normalizeValues(out, opType))
      return std::move(err);
    return Result(std::vector<tdl::DenseTensor>{out});
  }

  if (!anySpec && !specFoldableOps().contains(opType))
    return error(opType + " is not on the import-time foldable list");
  const tdl::OpSpec *spec = tdl::SpecLibrary::builtin().lookup(opType);
  if (!spec)
    return error(opType + " has no TDL spec to evaluate it with");
  // The specs describe float data; shape arithmetic is int64. The evaluator
  // computes in float64 whatever the type (exact for integers up to 2^53),
  // so int64 data operands are evaluated as float and the results that
  // follow their type are relabelled int64 (and truncated) afterwards.
  std::map<unsigned, std::vector<double>> constValues;
  std::vector<std::optional<tdl::TensorType>> evalTypes(inputTypes.begin(),
                                                        inputTypes.end());
  // The integer type of the data operands (relabelled float for the
  // specs of float-only ops), which the results that follow them get back.
  std::optional<tdl::ElemType> intData;
  for (unsigned i = 0; i < inputValues.size(); ++i) {
    if (!inputTypes[i])
      continue;
    if (!inputValues[i])
      return error(opType + ": operand " + std::to_string(i) +
                   " is not a compile-time constant");
    if (tdl::isConstInput(*spec, i)) {
      constValues[i] = inputValues[i]->data;
      continue;
    }
    if (tdl::isIntegerElem(evalTypes[i]->elem)) {
      if (!intData)
        intData = evalTypes[i]->elem;
      evalTypes[i]->elem = tdl::ElemType::F32;
    }
  }
  if (opType == "Gather" && inputTypes.size() > 1 && inputTypes[1]) {
    // Gather's indices are int by the spec; only data follows the result.
    evalTypes[1] = inputTypes[1];
    intData.reset();
    if (inputTypes[0] && tdl::isIntegerElem(inputTypes[0]->elem))
      intData = inputTypes[0]->elem;
  }
  if (opType == "Cast")
    intData.reset(); // the result type is `to`'s
  llvm::ArrayRef<std::optional<tdl::TensorType>> specTypes = evalTypes;
  tdl::AttrMap specAttrs = attrs;
  if (tdl::takesOutputCount(*spec) && !specAttrs.count("num_outputs"))
    specAttrs["num_outputs"] = tdl::AttrValue::ofInt(numOutputs);
  auto instance = tdl::instantiate(*spec, specTypes, specAttrs, constValues);
  if (!instance)
    return instance.takeError();
  int64_t total = 0;
  for (const tdl::TensorType &type : instance->outputTypes())
    total += numElements(type);
  if (total > maxElements)
    return Result(std::nullopt);
  std::vector<tdl::DenseTensor> evalInputs(inputValues.size());
  std::vector<const tdl::DenseTensor *> evalPointers;
  for (unsigned i = 0; i < inputValues.size(); ++i) {
    if (!inputValues[i]) {
      evalPointers.push_back(nullptr);
      continue;
    }
    evalInputs[i] = *inputValues[i];
    if (evalTypes[i])
      evalInputs[i].type = *evalTypes[i];
    evalPointers.push_back(&evalInputs[i]);
  }
  auto outputs = tdl::evaluate(*instance, evalPointers);
  if (!outputs)
    return outputs.takeError();
  for (tdl::DenseTensor &out : *outputs) {
    if (intData && out.type.elem == tdl::ElemType::F32)
      out.type.elem = *intData;
    if (auto err = normalizeValues(out, opType))
      return std::move(err);
  }
  return Result(std::move(*outputs));
}

llvm::Expected<std::optional<std::vector<tdl::DenseTensor>>>
foldOp(llvm::StringRef opType, const tdl::AttrMap &attrs,
       llvm::ArrayRef<std::optional<tdl::TensorType>> inputTypes,
       llvm::ArrayRef<const tdl::DenseTensor *> inputValues,
       const tdl::DenseTensor *valueAttr, unsigned numOutputs) {
  return evaluateOp(opType, attrs, inputTypes, inputValues, valueAttr,
                    numOutputs, /*anySpec=*/false, kMaxFoldedElements);
}

llvm::Expected<std::vector<tdl::DenseTensor>>
evaluateOpOnce(llvm::StringRef opType, const tdl::AttrMap &attrs,
               llvm::ArrayRef<std::optional<tdl::TensorType>> inputTypes,
               llvm::ArrayRef<const tdl::DenseTensor *> inputValues,
               const tdl::DenseTensor *valueAttr, unsigned numOutputs) {
  auto result =
      evaluateOp(opType, attrs, inputTypes, inputValues, valueAttr, numOutputs,
                 /*anySpec=*/true, std::numeric_limits<int64_t>::max());
  if (!result)
    return result.takeError();
  return std::move(**result);
}

} // namespace tofu
