//===- PlanPrinter.cpp - plan summaries as text and JSON ------------------===//
//
// What `tofuc --dump-plan[=text|json]` and `--compile-to=materialize|schedule`
// print. The JSON schema is documented in docs/PlanJson.md.
//
//===----------------------------------------------------------------------===//
#include "tofu/Analysis/TileGeometry.h"
#include "tofu/Dialect/TdlInstance.h"
#include "tofu/Target/PlanBuilder.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace mlir;

namespace tofu {
namespace {

const char *roleName(plan::TensorRole role) {
  switch (role) {
  case plan::TensorRole::Input:
    return "input";
  case plan::TensorRole::Label:
    return "label";
  case plan::TensorRole::Param:
    return "param";
  case plan::TensorRole::Activation:
    return "activation";
  case plan::TensorRole::Gradient:
    return "gradient";
  case plan::TensorRole::Loss:
    return "loss";
  case plan::TensorRole::Updated:
    return "updated";
  }
  return "?";
}

const char *dtypeName(plan::DType type) {
  switch (type) {
  case plan::DType::F32:
    return "f32";
  case plan::DType::I64:
    return "i64";
  case plan::DType::Bool:
    return "bool";
  }
  return "?";
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string formatTiling(const std::vector<plan::Cut> &tiling) {
  if (tiling.empty())
    return "replicated";
  std::string s;
  for (size_t i = 0; i < tiling.size(); ++i)
    s += (i ? " " : "") +
         llvm::formatv("dim{0}/{1}", tiling[i].dim, tiling[i].parts).str();
  return s;
}

std::string formatBox(const plan::Box &box) {
  std::string s = "[";
  for (size_t i = 0; i < box.lo.size(); ++i)
    s += (i ? ", " : "") + std::to_string(box.lo[i]) + ":" +
         std::to_string(box.hi[i]);
  return s + "]";
}

std::string formatStrategy(StrategyAttr strategy) {
  if (strategy.getKind().getValue() == "split")
    return llvm::formatv("split output {0} dim {1}", strategy.getOutput(),
                         strategy.getDim());
  if (strategy.getOutput() != 0)
    return llvm::formatv("reduce {0} of output {1}",
                         strategy.getVar().getValue(), strategy.getOutput());
  return llvm::formatv("reduce {0}", strategy.getVar().getValue());
}

/// Per op: name, spec, strategy per step, bytes moved per step.
struct OpRow {
  std::string name, kind;
  std::vector<std::string> steps;
  int64_t bytes = 0;
};

std::vector<OpRow> collectOps(func::FuncOp func) {
  std::vector<OpRow> rows;
  DeviceGrid grid;
  if (auto attr = func->getAttrOfType<DenseI64ArrayAttr>(kGridAttr))
    grid.steps.assign(attr.asArrayRef().begin(), attr.asArrayRef().end());
  auto tilingOf = [](Value value) -> TilingAttr {
    auto result = cast<OpResult>(value);
    auto tilings = result.getOwner()->getAttrOfType<ArrayAttr>(kTilingsAttr);
    return tilings ? cast<TilingAttr>(tilings[result.getResultNumber()])
                   : TilingAttr();
  };
  for (ComputeOp op : func.getOps<ComputeOp>()) {
    OpRow row;
    row.name = op.getName().str();
    row.kind = op.getSpec().str();
    SmallVector<StrategyAttr> plan;
    if (auto attr = op->getAttrOfType<ArrayAttr>(kPlanAttr))
      for (auto strategy : attr.getAsRange<StrategyAttr>()) {
        plan.push_back(strategy);
        row.steps.push_back(formatStrategy(strategy));
      }
    if (plan.empty())
      row.steps.push_back("replicated");
    auto instance = tofu::instantiate(op);
    if (instance && !grid.steps.empty()) {
      SmallVector<TilingAttr> inputs;
      for (Value input : op.getInputs())
        inputs.push_back(tilingOf(input));
      SmallVector<TilingAttr> outputs;
      for (Value result : op.getResults())
        outputs.push_back(tilingOf(result));
      row.bytes = opCommBytes(grid, *instance, plan, inputs, outputs);
    } else if (!instance) {
      llvm::consumeError(instance.takeError());
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

} // namespace

void printDevicePrograms(const plan::Plan &plan, llvm::raw_ostream &os) {
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    const plan::DeviceProgram &device = plan.devices[d];
    os << "device " << d << " (peak " << device.peakBytes << " bytes, receives "
       << device.commBytes << " bytes per step)\n";
    for (size_t b = 0; b < device.buffers.size(); ++b) {
      const plan::Buffer &buffer = device.buffers[b];
      os << llvm::formatv("  buffer {0} = {1}{2} {3}{4} @{5} ({6} bytes)\n", b,
                          plan.tensors[buffer.tensor].name,
                          formatBox(buffer.region), buffer.owned ? "owned" : "",
                          buffer.partial ? "partial" : "", buffer.offset,
                          buffer.bytes);
    }
    for (const plan::Instr &instr : device.instrs) {
      os << llvm::formatv("  [{0}] ", instr.seq);
      switch (instr.kind) {
      case plan::Instr::Kind::Compute: {
        os << "compute " << instr.kernel << "(";
        for (size_t i = 0; i < instr.inputs.size(); ++i)
          os << (i ? ", " : "") << "b" << instr.inputs[i];
        os << ") -> ";
        for (size_t i = 0; i < instr.outputs.size(); ++i)
          os << (i ? ", " : "") << "b" << instr.outputs[i];
        break;
      }
      case plan::Instr::Kind::Fetch:
      case plan::Instr::Kind::Reduce:
        os << (instr.kind == plan::Instr::Kind::Fetch ? "fetch" : "reduce")
           << " b" << instr.dst << " <-";
        for (const plan::Piece &piece : instr.pieces)
          os << " d" << piece.device << ".b" << piece.buffer
             << formatBox(piece.region);
        break;
      }
      os << "  ; " << instr.op << "\n";
    }
  }
}

std::string formatPlanText(func::FuncOp func, const plan::Plan &plan) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv(
      "tofu plan: {0} devices, partitioner {1}, search {2:f4} s\n",
      plan.numDevices, plan.partitioner, plan.searchSeconds);
  os << "communication: " << plan.commBytes << " bytes per training step\n";
  os << "peak memory per device (bytes):";
  for (const auto &device : plan.devices)
    os << " " << device.peakBytes;
  os << "\noptimizer: " << plan.optimizer.kind << " lr "
     << plan.optimizer.learningRate << ", batch " << plan.batchSize << "\n";
  os << "tensors:\n";
  for (const auto &tensor : plan.tensors)
    os << llvm::formatv("  {0,-40} {1,-10} {2,-14} {3}\n", tensor.name,
                        roleName(tensor.role), formatShape(tensor.shape),
                        formatTiling(tensor.tiling));
  os << "ops:\n";
  for (const OpRow &row : collectOps(func)) {
    std::string steps;
    for (const auto &step : row.steps)
      steps += (steps.empty() ? "" : "; ") + step;
    os << llvm::formatv("  {0,-40} {1,-28} {2,-22} {3} bytes\n", row.name,
                        row.kind, steps, row.bytes);
  }
  return text;
}

std::string formatPlanJson(func::FuncOp func, const plan::Plan &plan) {
  llvm::json::Array peak, tensors, ops;
  for (const auto &device : plan.devices)
    peak.push_back(static_cast<int64_t>(device.peakBytes));
  for (const auto &tensor : plan.tensors) {
    llvm::json::Array shape, tiling;
    for (int64_t d : tensor.shape)
      shape.push_back(d);
    for (const auto &cut : tensor.tiling)
      tiling.push_back(llvm::json::Array{cut.dim, cut.parts});
    tensors.push_back(llvm::json::Object{{"name", tensor.name},
                                         {"role", roleName(tensor.role)},
                                         {"dtype", dtypeName(tensor.dtype)},
                                         {"shape", std::move(shape)},
                                         {"tiling", std::move(tiling)}});
  }
  for (const OpRow &row : collectOps(func)) {
    llvm::json::Array steps;
    for (const auto &step : row.steps)
      steps.push_back(step);
    ops.push_back(llvm::json::Object{{"name", row.name},
                                     {"kind", row.kind},
                                     {"strategy", std::move(steps)},
                                     {"comm_bytes", row.bytes}});
  }
  llvm::json::Object root{
      {"devices", static_cast<int64_t>(plan.numDevices)},
      {"partitioner", plan.partitioner},
      {"search_seconds", plan.searchSeconds},
      {"comm_bytes", static_cast<int64_t>(plan.commBytes)},
      {"peak_bytes", std::move(peak)},
      {"batch_size", plan.batchSize},
      {"optimizer",
       llvm::json::Object{{"kind", plan.optimizer.kind},
                          {"learning_rate", plan.optimizer.learningRate}}},
      {"tensors", std::move(tensors)},
      {"ops", std::move(ops)}};
  return llvm::formatv("{0:2}", llvm::json::Value(std::move(root))).str() +
         "\n";
}

} // namespace tofu
