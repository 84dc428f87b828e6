//===- RunGradientGraphTest.cpp - ONNX tests of the Gradient operator -----===//
//
// ONNX's Gradient tests (test_gradient_of_add, test_gradient_of_add_and_mul,
// shipped under data/simple) are graphs of several nodes whose outputs
// include gradients. Such a graph is imported as tofuc imports a model
// (the Gradient becomes tofu.gradient ops), tofu-build-training-step in its
// gradient-graph mode replaces them by the backward ops of the TDL gradient
// rules, and the resulting ops run in order on the backend, each like a
// single-op test. A pass means tofuc computes the ONNX Gradient.
//
//===----------------------------------------------------------------------===//
#include "Compare.h"
#include "RunNodeTest.h"

#include "tofu/Dialect/TdlInstance.h"
#include "tofu/Import/OnnxImporter.h"
#include "tofu/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <cstring>

using namespace mlir;

namespace tofu::nodetest {

/// The initial value of a parameter or constant (f32 or i64).
static std::optional<TensorData> paramValue(ParamOp param) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(param.getValueAttr());
  auto type = cast<RankedTensorType>(param.getResult().getType());
  if (!dense)
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

TestResult runGradientGraphTest(const NodeTest &test, const RunOptions &options,
                                TestResult result) {
  auto finish = [&](TestResult::Status status, std::string detail) {
    result.status = status;
    result.detail = std::move(detail);
    return result;
  };
  MLIRContext ctx;
  auto imported = importOnnxFile(&ctx, test.gradientGraph);
  if (!imported)
    return finish(TestResult::Status::Fail,
                  "import: " + llvm::toString(imported.takeError()));
  PassManager pm(&ctx);
  BuildTrainingStepOptions gradientsOnly;
  gradientsOnly.gradientGraph = true;
  pm.nest<func::FuncOp>().addPass(createBuildTrainingStep(gradientsOnly));
  std::string diagnostics;
  {
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
      diagnostics += diag.str() + "\n";
      return success();
    });
    if (failed(pm.run(imported->module.get())))
      return finish(TestResult::Status::Fail,
                    "building the gradients: " + diagnostics);
  }
  auto func = cast<func::FuncOp>(imported->module->getBody()->front());

  std::string how;
  for (const DataSet &set : test.dataSets) {
    llvm::StringMap<TensorData> inputs;
    size_t index = 0;
    llvm::DenseMap<Value, TensorData> values;
    for (Operation &op : func.getBody().front()) {
      if (auto input = dyn_cast<InputOp>(op)) {
        // The importer creates one tofu.input per graph input, in order.
        if (index >= set.inputs.size() || !set.inputs[index])
          return finish(TestResult::Status::Fail,
                        set.name + ": no data for input '" +
                            input.getSymName().str() + "'");
        values[input.getResult()] = *set.inputs[index++];
        continue;
      }
      if (auto param = dyn_cast<ParamOp>(op)) {
        auto data = paramValue(param);
        if (!data)
          return finish(TestResult::Status::Fail,
                        "parameter '" + param.getSymName().str() +
                            "' has no f32 or i64 value");
        values[param.getResult()] = std::move(*data);
        continue;
      }
      if (auto output = dyn_cast<OutputOp>(op)) {
        auto it = std::find(test.outputNames.begin(), test.outputNames.end(),
                            output.getName().str());
        if (it == test.outputNames.end())
          return finish(TestResult::Status::Fail,
                        "unknown output '" + output.getName().str() + "'");
        const auto &expected = set.expected[it - test.outputNames.begin()];
        if (!expected)
          continue;
        std::string what = set.name + ": output '" + *it + "'";
        std::string diff =
            compareTensors(values.lookup(output.getValue()), *expected, what);
        if (!diff.empty())
          return finish(TestResult::Status::Fail, diff);
        continue;
      }
      auto compute = dyn_cast<ComputeOp>(op);
      if (!compute)
        continue;
      auto instance = instantiate(compute);
      if (!instance)
        return finish(TestResult::Status::Fail,
                      set.name + ": " + compute.getName().str() + ": " +
                          llvm::toString(instance.takeError()));
      std::vector<std::optional<TensorData>> operands;
      for (Value v : compute.getInputs())
        operands.push_back(values.lookup(v));
      std::vector<TensorData> results;
      std::string opHow;
      std::string err =
          runInstance(options.backend, *instance, operands, results, opHow);
      if (!err.empty()) {
        if (skipCategory(err) != "other")
          return finish(TestResult::Status::Skip, err);
        return finish(TestResult::Status::Fail,
                      set.name + ": " + compute.getName().str() + ": " + err);
      }
      if (how.empty() || opHow != "native")
        how = opHow;
      for (auto [r, data] : llvm::zip(compute->getResults(), results))
        values[r] = std::move(data);
    }
  }
  result.how = how;
  return finish(TestResult::Status::Pass, "");
}

} // namespace tofu::nodetest
