//===- RunUnrolledNodeTest.cpp - RNN/LSTM/GRU node tests, unrolled --------===//
//
// An RNN, LSTM or GRU node has no TDL spec: the importer expands it into
// per-step cells (lib/Import/RecurrentUnrolling.cpp). This runner does the
// same expansion on the node test's inputs and runs the resulting ops in
// order, each on the backend like any single-op test, so a pass means the
// cells the importer builds compute the ONNX operator.
//
//===----------------------------------------------------------------------===//
#include "Compare.h"
#include "RunGraphOps.h"

#include "tofu/Dialect/TdlInstance.h"
#include "tofu/Import/RecurrentUnrolling.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <onnx/onnx_pb.h>

using namespace mlir;

namespace tofu::nodetest {

TestResult runUnrolledNodeTest(const NodeTest &test, const RunOptions &options,
                               TestResult result) {
  auto finish = [&](TestResult::Status status, std::string detail) {
    result.status = status;
    result.detail = std::move(detail);
    return result;
  };
  onnx::NodeProto node;
  if (!node.ParseFromString(test.recurrentNode))
    return finish(TestResult::Status::Fail, "cannot re-read the node");

  MLIRContext ctx;
  ctx.loadDialect<TofuDialect, func::FuncDialect>();
  Location loc = UnknownLoc::get(&ctx);
  std::string how;
  for (const DataSet &set : test.dataSets) {
    OpBuilder builder(&ctx);
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    auto func = func::FuncOp::create(loc, "main", builder.getFunctionType({}, {}));
    module->push_back(func);
    builder.setInsertionPointToStart(func.addEntryBlock());

    GraphValues values;
    SmallVector<Value> operands;
    for (auto [i, input] : llvm::enumerate(set.inputs)) {
      if (!input) {
        operands.push_back(Value());
        continue;
      }
      if (input->type.elem != tdl::ElemType::F32)
        return finish(TestResult::Status::Skip,
                      "input " + std::to_string(i) + " has ONNX element type " +
                          elemTypeString(input->type.elem) +
                          " (the unrolled cells take float32)");
      std::string name = "input" + std::to_string(i);
      auto op = InputOp::create(builder, loc, fromTdlType(&ctx, input->type),
                                name, "features", IntegerAttr(), StringAttr(),
                                IntegerAttr());
      values[op.getResult()] = *input;
      operands.push_back(op.getResult());
    }
    auto outputs =
        unrollRecurrentNode(builder, loc, node, test.name, operands);
    if (!outputs)
      return finish(TestResult::Status::Skip,
                    "unrolling: " + llvm::toString(outputs.takeError()));

    // Run the cells' ops in order.
    for (Operation &op : func.getBody().front()) {
      if (auto param = dyn_cast<ParamOp>(op)) {
        auto data = paramInitialValue(param);
        if (!data)
          return finish(TestResult::Status::Fail,
                        "unrolling made a constant that is neither f32 nor "
                        "i64");
        values[param.getResult()] = std::move(*data);
        continue;
      }
      auto compute = dyn_cast<ComputeOp>(op);
      if (!compute)
        continue;
      if (auto outcome =
              runGraphComputeOp(compute, options.backend, set.name, values, how))
        return finish(outcome->first, outcome->second);
    }

    for (size_t o = 0; o < set.expected.size(); ++o) {
      if (!set.expected[o])
        continue;
      auto it = o < outputs->size() && (*outputs)[o]
                    ? values.find((*outputs)[o])
                    : values.end();
      if (it == values.end())
        return finish(TestResult::Status::Fail,
                      set.name + ": output " + std::to_string(o) +
                          " was not computed");
      std::string what = set.name + ": output '" + test.outputNames[o] + "'";
      std::string diff = compareTensors(it->second, *set.expected[o], what);
      if (!diff.empty())
        return finish(TestResult::Status::Fail, diff);
    }
  }
  result.how = how;
  return finish(TestResult::Status::Pass, "");
}

} // namespace tofu::nodetest
