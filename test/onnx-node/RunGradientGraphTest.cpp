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
#include "RunGraphOps.h"

#include "tofu/Import/OnnxImporter.h"
#include "tofu/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;

namespace tofu::nodetest {

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
    size_t index = 0;
    GraphValues values;
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
        auto data = paramInitialValue(param);
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
      if (auto outcome =
              runGraphComputeOp(compute, options.backend, set.name, values, how))
        return finish(outcome->first, outcome->second);
    }
  }
  result.how = how;
  return finish(TestResult::Status::Pass, "");
}

} // namespace tofu::nodetest
