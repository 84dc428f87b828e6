//===- RunGraphTest.cpp - Graph node tests, through tofuc's pipeline ------===//
//
// A node test whose graph has several nodes (the `*_expanded` tests, an
// operator written as its ONNX function body; the Gradient tests of
// data/simple) runs as tofuc compiles and tofu-run runs a model, without the
// training step:
//
//   import      the model file, as tofuc imports it (opset normalization,
//               import-time folding of shape arithmetic, RNN unrolling);
//   gradients   a graph with a Gradient node gets its backward ops
//               (tofu-build-training-step in its gradient-graph mode, which
//               keeps the model outputs and trains nothing);
//   plan        tofu-analyze-strategies, tofu-coarsen, tofu-partition for
//               k = 1 (--devices), materialize and the static memory plan: a
//               forward plan;
//   run         the plan's one step on the CPU runtime's executor (what
//               tofu-run --backend cpu runs), fed with the data set's inputs;
//               each graph output is read back from its owned buffer and
//               compared with the expected output.
//
// tofuc needs shapes, axes and the like at compile time. Node tests feed
// them as graph inputs where a model would hold them as initializers, so the
// graph inputs that the graph uses as compile-time operands (a Reshape's
// shape, a Slice's starts, directly or through foldable shape arithmetic)
// become initializers holding the data set's values; `how` names them.
//
//===----------------------------------------------------------------------===//
#include "Compare.h"
#include "RunNodeTest.h"

#include "tofu/Import/ConstantFolding.h"
#include "tofu/Import/OnnxImporter.h"
#include "tofu/Target/PlanBuilder.h"
#include "tofu/Transforms/Passes.h"
#include "tofu/runtime/CpuBackend.h"
#include "tofu/runtime/TensorAssembly.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>
#include <map>
#include <set>

using namespace mlir;

namespace tofu::nodetest {

namespace {

/// The graph inputs (not initializers) whose values the graph needs at
/// compile time: those reaching a const operand of a spec'd op (an input of
/// a foldable op without a spec; an operand after the first of another op
/// without a spec) through producers whose inputs must all be known to fold.
/// Shape and Size need only their input's type.
std::set<std::string> compileTimeInputs(const onnx::GraphProto &graph) {
  std::map<std::string, const onnx::NodeProto *> producer;
  for (const auto &node : graph.node())
    for (const std::string &out : node.output())
      if (!out.empty())
        producer[out] = &node;
  std::set<std::string> fed;
  for (const auto &value : graph.input())
    fed.insert(value.name());
  for (const auto &init : graph.initializer())
    fed.erase(init.name());

  std::set<std::string> demanded, result;
  std::vector<std::string> work;
  auto demand = [&](const std::string &name) {
    if (!name.empty() && demanded.insert(name).second)
      work.push_back(name);
  };
  const tdl::SpecLibrary &library = tdl::SpecLibrary::builtin();
  for (const auto &node : graph.node()) {
    const std::string &op = node.op_type();
    if (const tdl::OpSpec *spec = library.lookup(op)) {
      for (int i = 0; i < node.input_size(); ++i)
        if (tdl::isConstInput(*spec, unsigned(i)))
          demand(node.input(i));
    } else if (isFoldableOp(op)) {
      if (!foldsFromTypesOnly(op))
        for (const std::string &in : node.input())
          demand(in);
    } else {
      // An op without a spec that the importer takes rewrites it into spec'd
      // ops (opset normalization): its operands after the data are what
      // older opsets had as attributes (Resize's scales and sizes, the axes
      // of ReduceL1 at opset 18, ...).
      for (int i = 1; i < node.input_size(); ++i)
        demand(node.input(i));
    }
  }
  while (!work.empty()) {
    std::string name = work.back();
    work.pop_back();
    if (fed.count(name)) {
      result.insert(name);
      continue;
    }
    auto it = producer.find(name);
    if (it == producer.end() || foldsFromTypesOnly(it->second->op_type()))
      continue;
    for (const std::string &in : it->second->input())
      demand(in);
  }
  return result;
}

/// The model of `test` with the graph inputs in `constant` turned into
/// initializers holding data set `set`'s values, written to a temporary
/// file (`path`). Returns "" or an error.
std::string writeWithConstantInputs(const NodeTest &test, const DataSet &set,
                                    const std::set<std::string> &constant,
                                    std::string &path) {
  onnx::ModelProto model;
  {
    std::ifstream in(test.graphModel, std::ios::binary);
    if (!model.ParseFromIstream(&in))
      return "cannot re-read " + test.graphModel;
  }
  onnx::GraphProto *graph = model.mutable_graph();
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> kept;
  for (const auto &value : graph->input()) {
    auto pos = std::find(test.inputNames.begin(), test.inputNames.end(),
                         value.name());
    if (!constant.count(value.name()) || pos == test.inputNames.end()) {
      *kept.Add() = value;
      continue;
    }
    std::string file = set.dir + "/input_" +
                       std::to_string(pos - test.inputNames.begin()) + ".pb";
    std::ifstream in(file, std::ios::binary);
    onnx::TensorProto *init = graph->add_initializer();
    if (!init->ParseFromIstream(&in))
      return "cannot read " + file;
    init->set_name(value.name());
  }
  graph->mutable_input()->Swap(&kept);
  llvm::SmallString<128> tmp;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("tofu-node-test", "onnx", tmp))
    return "cannot create a temporary model file: " + ec.message();
  path = tmp.str().str();
  std::ofstream out(path, std::ios::binary);
  if (!model.SerializeToOstream(&out))
    return "cannot write " + path;
  return "";
}

/// Removes a file when it goes out of scope (the temporary model).
struct RemoveOnExit {
  std::string path;
  ~RemoveOnExit() {
    if (!path.empty())
      llvm::sys::fs::remove(path);
  }
};

/// The plan tensor of every value of `func`, in the order materialize
/// creates them (one per result of each tofu.input, tofu.param and
/// tofu.compute, in program order).
llvm::DenseMap<Value, int32_t> planTensors(func::FuncOp func) {
  llvm::DenseMap<Value, int32_t> index;
  int32_t next = 0;
  func.walk([&](Operation *op) {
    if (!isa<InputOp, ParamOp, ComputeOp>(op))
      return;
    for (Value v : op->getResults())
      index[v] = next++;
  });
  return index;
}

} // namespace

TestResult runGraphTest(const NodeTest &test, const RunOptions &options,
                        TestResult result) {
  auto finish = [&](TestResult::Status status, std::string detail) {
    result.status = status;
    result.detail = std::move(detail);
    return result;
  };
  auto failOrSkip = [&](const std::string &stage, const std::string &err) {
    std::string detail = stage + ": " + err;
    return finish(skipCategory(detail) != "other" ? TestResult::Status::Skip
                                                  : TestResult::Status::Fail,
                  detail);
  };
  if (options.backend != Backend::Cpu)
    return finish(TestResult::Status::Skip,
                  "graph test: the " + std::string(backendName(options.backend)) +
                      " mode runs single ops only (graphs run as a plan on "
                      "the CPU runtime)");

  onnx::ModelProto model;
  {
    std::ifstream in(test.graphModel, std::ios::binary);
    if (!model.ParseFromIstream(&in))
      return finish(TestResult::Status::Fail,
                    "cannot re-read " + test.graphModel);
  }
  std::set<std::string> constant = compileTimeInputs(model.graph());
  std::string how = "plan";
  if (!constant.empty())
    how += " (compile-time inputs: " +
           llvm::join(constant.begin(), constant.end(), ", ") + ")";

  for (const DataSet &set : test.dataSets) {
    // Import, as tofuc does, with every fed input's shape bound to the data.
    RemoveOnExit tmp;
    std::string modelPath = test.graphModel;
    if (!constant.empty()) {
      if (std::string err =
              writeWithConstantInputs(test, set, constant, tmp.path);
          !err.empty())
        return finish(TestResult::Status::Fail, err);
      modelPath = tmp.path;
    }
    ImportOptions importOptions;
    for (size_t k = 0; k < test.inputNames.size(); ++k)
      if (!constant.count(test.inputNames[k]) && set.inputs[k])
        importOptions.inputShapes[test.inputNames[k]] = set.inputs[k]->type.dims;

    MLIRContext ctx;
    ctx.loadDialect<TofuDialect, func::FuncDialect>();
    std::string diagnostics;
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
      if (diag.getSeverity() == DiagnosticSeverity::Error) {
        if (!diagnostics.empty())
          diagnostics += "; ";
        if (auto name = dyn_cast<NameLoc>(diag.getLocation()))
          diagnostics += "'" + name.getName().getValue().str() + "': ";
        diagnostics += diag.str();
      }
      return success();
    });
    auto imported = importOnnxFile(&ctx, modelPath, importOptions);
    if (!imported) {
      std::string err = llvm::toString(imported.takeError());
      // The temporary file's name means nothing to a reader.
      if (!tmp.path.empty())
        for (size_t pos; (pos = err.find(tmp.path)) != std::string::npos;)
          err.replace(pos, tmp.path.size(), test.graphModel);
      // A single node without a spec that the importer takes only by
      // folding it (Shape, Range, ...) or not at all: the missing spec is
      // the reason, whatever the importer stopped at first (a bool input of
      // And, opset 22).
      if (model.graph().node_size() == 1 &&
          !tdl::SpecLibrary::builtin().lookup(test.opType) &&
          (!isFoldableOp(test.opType) ||
           err.find("has no TDL spec") != std::string::npos))
        return finish(TestResult::Status::Skip,
                      "no TDL spec for " + test.opType + " (import: " + err +
                          ")");
      return failOrSkip("import", err);
    }
    ModuleOp module = *imported->module;

    // The forward plan for k devices (and a Gradient's backward ops).
    PassManager pm(&ctx);
    OpPassManager &funcPm = pm.nest<func::FuncOp>();
    bool hasGradient = false;
    module.walk([&](GradientOp) { hasGradient = true; });
    if (hasGradient) {
      BuildTrainingStepOptions gradientsOnly;
      gradientsOnly.gradientGraph = true;
      funcPm.addPass(createBuildTrainingStep(gradientsOnly));
    }
    funcPm.addPass(createAnalyzeStrategies());
    funcPm.addPass(createCoarsen());
    PartitionOptions partition;
    partition.numDevices = options.devices;
    funcPm.addPass(createPartition(partition));
    if (failed(pm.run(module)))
      return failOrSkip("compiling", diagnostics);
    auto func = *module.getOps<func::FuncOp>().begin();
    auto plan = materialize(func);
    if (!plan)
      return failOrSkip("materialize", llvm::toString(plan.takeError()));
    planMemory(*plan);

    // Which plan tensor feeds each input and holds each output.
    llvm::DenseMap<Value, int32_t> tensorOf = planTensors(func);
    std::map<int32_t, const TensorData *> feeds;
    std::vector<std::pair<std::string, int32_t>> outputs;
    bool computes = false;
    for (Operation &op : func.getBody().front()) {
      computes |= isa<ComputeOp>(op);
      if (auto input = dyn_cast<InputOp>(op)) {
        auto pos = std::find(test.inputNames.begin(), test.inputNames.end(),
                             input.getSymName().str());
        if (pos == test.inputNames.end() ||
            !set.inputs[pos - test.inputNames.begin()])
          return finish(TestResult::Status::Fail,
                        set.name + ": no data for input '" +
                            input.getSymName().str() + "'");
        feeds[tensorOf.lookup(input.getResult())] =
            &*set.inputs[pos - test.inputNames.begin()];
      } else if (auto output = dyn_cast<OutputOp>(op)) {
        auto it = tensorOf.find(output.getValue());
        if (it == tensorOf.end())
          return finish(TestResult::Status::Fail,
                        "output '" + output.getName().str() +
                            "' is not a tensor of the plan");
        outputs.push_back({output.getName().str(), it->second});
      }
    }
    if (tensorOf.size() != plan->tensors.size())
      return finish(TestResult::Status::Fail,
                    "the plan has " + std::to_string(plan->tensors.size()) +
                        " tensors, the IR " + std::to_string(tensorOf.size()));
    // materialize names a tensor after its op (and "#i" for result i of
    // several): a cheap check that the order above is the plan's.
    for (auto [value, tensor] : tensorOf) {
      Operation *op = value.getDefiningOp();
      std::string name =
          isa<InputOp>(op)   ? cast<InputOp>(op).getSymName().str()
          : isa<ParamOp>(op) ? cast<ParamOp>(op).getSymName().str()
                             : cast<ComputeOp>(op).getName().str();
      if (!llvm::StringRef(plan->tensors[tensor].name).starts_with(name))
        return finish(TestResult::Status::Fail,
                      "plan tensor " + std::to_string(tensor) + " is '" +
                          plan->tensors[tensor].name + "', expected '" + name +
                          "'");
    }
    for (auto [tensor, data] : feeds) {
      const plan::TensorInfo &info = plan->tensors[tensor];
      if (info.dtype != static_cast<plan::DType>(data->type.elem) ||
          info.shape != data->type.dims)
        return finish(TestResult::Status::Fail,
                      set.name + ": input '" + info.name +
                          "': the plan's type differs from the data's");
    }

    runtime::CpuExecutor exec(*plan);
    exec.setDataSource([&](int32_t tensor, const plan::Box &region, int64_t,
                           void *out) -> std::string {
      auto it = feeds.find(tensor);
      if (it == feeds.end())
        return "no data for tensor '" + plan->tensors[tensor].name + "'";
      const TensorData &data = *it->second;
      std::vector<uint8_t> bytes;
      runtime::extractRegion(data.bytes, data.type.dims,
                             elemTypeBytes(data.type.elem), region, bytes);
      // An empty region (a device's empty shard at k = 4) has no buffer:
      // memcpy with a null pointer is undefined even for 0 bytes.
      if (!bytes.empty())
        std::memcpy(out, bytes.data(), bytes.size());
      return "";
    });
    if (std::string err = exec.init(); !err.empty())
      return failOrSkip(set.name + ": runtime init", err);
    for (auto &[name, tensor] : outputs)
      for (size_t d = 0; d < plan->devices.size(); ++d)
        for (size_t b = 0; b < plan->devices[d].buffers.size(); ++b)
          if (plan->devices[d].buffers[b].tensor == tensor &&
              plan->devices[d].buffers[b].owned)
            exec.watch(int32_t(d), int32_t(b));
    if (std::string err = exec.runStep(0); !err.empty())
      return failOrSkip(set.name + ": run", err);

    // A buffer written during the step (a computed value or a fed input)
    // has a snapshot; a parameter (a folded constant) keeps its initial
    // contents.
    runtime::BufferSource source = [&](int32_t d,
                                       int32_t b) -> const uint8_t * {
      if (const std::vector<uint8_t> *s = exec.snapshot(d, b))
        return s->data();
      const plan::Buffer &buffer = plan->devices[d].buffers[b];
      return buffer.init.size() == buffer.bytes && buffer.bytes
                 ? buffer.init.data()
                 : nullptr;
    };
    for (auto &[name, tensor] : outputs) {
      auto pos =
          std::find(test.outputNames.begin(), test.outputNames.end(), name);
      if (pos == test.outputNames.end())
        return finish(TestResult::Status::Fail,
                      "unknown output '" + name + "'");
      const auto &expected = set.expected[pos - test.outputNames.begin()];
      if (!expected)
        continue;
      TensorData actual;
      actual.type.elem = static_cast<tdl::ElemType>(plan->tensors[tensor].dtype);
      actual.type.dims = plan->tensors[tensor].shape;
      if (std::string err =
              runtime::assembleTensor(*plan, tensor, source, actual.bytes);
          !err.empty())
        return finish(TestResult::Status::Fail,
                      set.name + ": output '" + name + "': " + err);
      std::string diff = compareTensors(actual, *expected,
                                        set.name + ": output '" + name + "'");
      if (!diff.empty())
        return finish(TestResult::Status::Fail, diff);
    }
    for (size_t o = 0; o < set.expected.size(); ++o)
      if (set.expected[o] &&
          std::none_of(outputs.begin(), outputs.end(), [&](const auto &out) {
            return out.first == test.outputNames[o];
          }))
        return finish(TestResult::Status::Fail,
                      set.name + ": graph output '" + test.outputNames[o] +
                          "' is not an output of the imported graph");
    if (!computes)
      how = "plan, folded at import (no compute ran)";
    else if (options.devices > 1 && how.find(" devices") == std::string::npos)
      how += ", " + std::to_string(options.devices) + " devices, " +
             std::to_string(exec.commBytesTotal()) + " bytes moved";
  }
  result.how = how;
  return finish(TestResult::Status::Pass, "");
}

} // namespace tofu::nodetest
