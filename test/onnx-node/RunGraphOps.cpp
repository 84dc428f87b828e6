//===- RunGraphOps.cpp - Run the ops of a multi-op node test --------------===//
#include "RunGraphOps.h"

#include "tofu/Dialect/TdlInstance.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <cstring>

using namespace mlir;

namespace tofu::nodetest {

std::optional<TensorData> paramInitialValue(ParamOp param) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(param.getValueAttr());
  auto type = dyn_cast<RankedTensorType>(param.getResult().getType());
  if (!dense || !type)
    return std::nullopt;
  auto tdlType = toTdlType(type);
  if (!tdlType) {
    llvm::consumeError(tdlType.takeError());
    return std::nullopt;
  }
  TensorData data;
  data.type = *tdlType;
  auto append = [&](const void *p, size_t n) {
    const uint8_t *bytes = static_cast<const uint8_t *>(p);
    data.bytes.insert(data.bytes.end(), bytes, bytes + n);
  };
  if (type.getElementType().isF32()) {
    for (float v : dense.getValues<float>())
      append(&v, sizeof v);
  } else if (type.getElementType().isInteger(64)) {
    for (int64_t v : dense.getValues<int64_t>())
      append(&v, sizeof v);
  } else {
    return std::nullopt;
  }
  return data;
}

std::optional<std::pair<TestResult::Status, std::string>>
runGraphComputeOp(ComputeOp compute, Backend backend,
                  const std::string &setName, GraphValues &values,
                  std::string &how) {
  std::string where = setName + ": " + compute.getName().str() + ": ";
  auto instance = instantiate(compute);
  if (!instance)
    return std::make_pair(TestResult::Status::Fail,
                          where + llvm::toString(instance.takeError()));
  std::vector<std::optional<TensorData>> operands;
  for (Value v : compute.getInputs())
    operands.push_back(values.lookup(v));
  std::vector<TensorData> results;
  std::string opHow;
  std::string err = runInstance(backend, *instance, operands, results, opHow);
  if (!err.empty()) {
    if (skipCategory(err) != "other")
      return std::make_pair(TestResult::Status::Skip, err);
    return std::make_pair(TestResult::Status::Fail, where + err);
  }
  if (how.empty() || opHow != "native")
    how = opHow;
  for (auto [r, data] : llvm::zip(compute->getResults(), results))
    values[r] = std::move(data);
  return std::nullopt;
}

} // namespace tofu::nodetest
