//===- PlanPrinter.cpp - plan summaries as text and JSON ------------------===//
//
// What `tofuc --dump-plan[=text|json]` and `--compile-to=materialize|schedule`
// print. The JSON schema is documented in docs/PlanJson.md; the HTML page is
// written by PlanHtmlWriter.cpp from the same PlanSummary.
//
//===----------------------------------------------------------------------===//
#include "tofu/Target/PlanPrinter.h"
#include "tofu/Analysis/TileGeometry.h"
#include "tofu/Dialect/TdlInstance.h"
#include "tofu/Target/PlanBuilder.h"
#include "tofu/runtime/PrintableText.h"
#include "tofu/runtime/CollectivePieces.h"
#include "tofu/Transforms/RecursivePartitioner.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <map>

using namespace mlir;

namespace tofu {

const char *tensorRoleName(plan::TensorRole role) {
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
  case plan::TensorRole::State:
    return "state";
  }
  return "?";
}

const char *dtypeName(plan::DType type) {
  switch (type) {
  case plan::DType::F32: return "f32";
  case plan::DType::I64: return "i64";
  case plan::DType::Bool: return "bool";
  case plan::DType::F64: return "f64";
  case plan::DType::I32: return "i32";
  case plan::DType::I16: return "i16";
  case plan::DType::I8: return "i8";
  case plan::DType::U8: return "u8";
  case plan::DType::U16: return "u16";
  case plan::DType::U32: return "u32";
  case plan::DType::U64: return "u64";
  case plan::DType::F16: return "f16";
  case plan::DType::BF16: return "bf16";
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

namespace {

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

/// The tiling recorded for `value` on its defining op (null if none).
TilingAttr tilingOf(Value value) {
  auto result = dyn_cast<OpResult>(value);
  if (!result)
    return TilingAttr();
  auto tilings = result.getOwner()->getAttrOfType<ArrayAttr>(kTilingsAttr);
  return tilings && result.getResultNumber() < tilings.size()
             ? dyn_cast<TilingAttr>(tilings[result.getResultNumber()])
             : TilingAttr();
}

std::string joined(const std::vector<std::string> &items, llvm::StringRef sep) {
  std::string s;
  for (const auto &item : items)
    s += (s.empty() ? "" : sep.str()) + item;
  return s;
}

} // namespace

double PlanSummary::predictedStepSeconds() const {
  double seconds = predictedComputeSeconds;
  for (double s : stepCommSeconds)
    seconds += s;
  return seconds;
}

PlanSummary summarizePlan(func::FuncOp func, const plan::Plan &plan) {
  PlanSummary summary;
  if (auto attr = func->getAttrOfType<StringAttr>(kObjectiveAttr))
    summary.objective = attr.str();
  if (auto attr = func->getAttrOfType<StringAttr>(kDeviceModelAttr)) {
    summary.deviceModel = attr.str();
    if (auto gbps = func->getAttrOfType<DenseF64ArrayAttr>(kStepGbpsAttr))
      summary.stepGbps.assign(gbps.asArrayRef().begin(),
                              gbps.asArrayRef().end());
    if (auto compute = func->getAttrOfType<FloatAttr>(kPredictedComputeAttr))
      summary.predictedComputeSeconds = compute.getValueAsDouble();
    if (auto comm = func->getAttrOfType<DenseF64ArrayAttr>(kStepCommSecondsAttr))
      summary.stepCommSeconds.assign(comm.asArrayRef().begin(),
                                     comm.asArrayRef().end());
  }
  if (auto attr = func->getAttrOfType<DenseI64ArrayAttr>(kGridAttr))
    summary.grid.assign(attr.asArrayRef().begin(), attr.asArrayRef().end());
  for (LossOp loss : func.getOps<LossOp>())
    if (auto description = loss.getDescription())
      summary.loss = description->str();
  DeviceGrid grid{summary.grid};
  size_t numSteps = summary.grid.size();
  summary.bytesPerStep.assign(numSteps, 0);
  summary.bytesPerLink.assign(numSteps, 0);

  // Tensor indices: materialize numbers the results of input, param and
  // compute ops in walk order.
  llvm::DenseMap<Value, int32_t> tensorOf;
  func.walk([&](Operation *op) {
    if (isa<InputOp, ParamOp, ComputeOp>(op))
      for (Value result : op->getResults()) {
        int32_t index = tensorOf.size();
        tensorOf[result] = index;
      }
  });
  auto indexOf = [&](Value value) -> int32_t {
    auto it = tensorOf.find(value);
    return it == tensorOf.end() ||
                   it->second >= static_cast<int32_t>(plan.tensors.size())
               ? -1
               : it->second;
  };

  // Ops equal in everything the bytes depend on (spec, attributes, operand
  // and result types, strategies, tilings: uniqued in the context, so
  // compared by pointer) move the same bytes: a transformer's layers are
  // summarized once, not once per layer (the interval analysis of every
  // device's share for every recursion-step prefix was the summary's cost:
  // 3-4 s of GPT-3's compile at k = 64).
  struct Bytes {
    std::vector<int64_t> perStep, perLink;
    int64_t total = 0;
  };
  std::map<std::vector<const void *>, Bytes> bytesOfEqualOps;
  for (ComputeOp op : func.getOps<ComputeOp>()) {
    OpSummary row;
    row.name = op.getName().str();
    row.kind = op.getSpec().str();
    for (Value input : op.getInputs())
      row.inputs.push_back(indexOf(input));
    for (Value result : op.getResults())
      row.outputs.push_back(indexOf(result));
    SmallVector<StrategyAttr> strategies;
    if (auto attr = op->getAttrOfType<ArrayAttr>(kPlanAttr))
      for (auto strategy : attr.getAsRange<StrategyAttr>()) {
        strategies.push_back(strategy);
        row.strategy.push_back(formatStrategy(strategy));
      }
    if (strategies.empty())
      row.strategy.push_back("replicated");
    row.stepStrategies.assign(numSteps, {});
    for (unsigned o = 0; o < op.getNumResults(); ++o) {
      SmallVector<StrategyAttr> steps = planOfOutput(strategies, o);
      for (size_t s = 0; s < numSteps; ++s)
        row.stepStrategies[s].push_back(
            s < steps.size() ? formatStrategy(steps[s]) : "whole");
    }
    row.bytesPerStep.assign(numSteps, 0);
    row.bytesPerLink.assign(numSteps, 0);
    std::vector<const void *> key = {
        op.getSpecAttr().getAsOpaquePointer(),
        op.getAttrsAttr().getAsOpaquePointer(),
        op->getAttr(kPlanAttr).getAsOpaquePointer()};
    for (Value input : op.getInputs()) {
      key.push_back(input.getType().getAsOpaquePointer());
      key.push_back(tilingOf(input).getAsOpaquePointer());
    }
    key.push_back(nullptr); // inputs | results
    for (Value result : op.getResults()) {
      key.push_back(result.getType().getAsOpaquePointer());
      key.push_back(tilingOf(result).getAsOpaquePointer());
    }
    if (auto known = bytesOfEqualOps.find(key);
        known != bytesOfEqualOps.end() && numSteps) {
      row.bytesPerStep = known->second.perStep;
      row.bytesPerLink = known->second.perLink;
      row.bytes = known->second.total;
      for (size_t s = 0; s < numSteps; ++s) {
        summary.bytesPerStep[s] += row.bytesPerStep[s];
        summary.bytesPerLink[s] += row.bytesPerLink[s];
      }
      summary.bytes += row.bytes;
      summary.ops.push_back(std::move(row));
      continue;
    }
    auto instance = tofu::instantiate(op);
    if (instance && numSteps) {
      SmallVector<TilingAttr> inputs;
      for (Value input : op.getInputs())
        inputs.push_back(tilingOf(input));
      SmallVector<TilingAttr> outputs;
      for (Value result : op.getResults())
        outputs.push_back(tilingOf(result));
      // C_i on the grid of the first i steps (later cuts and strategies
      // are ignored there); δ_i = C_i - C_{i-1}.
      int64_t previous = 0;
      for (size_t s = 0; s < numSteps; ++s) {
        DeviceGrid prefix{std::vector<int64_t>(summary.grid.begin(),
                                               summary.grid.begin() + s + 1)};
        int64_t cost =
            opCommBytes(prefix, *instance, strategies, inputs, outputs);
        row.bytesPerStep[s] = cost - previous;
        previous = cost;
      }
      row.bytes = previous;
      row.bytesPerLink =
          opCommBytesByStep(grid, *instance, strategies, inputs, outputs);
      bytesOfEqualOps[key] = {row.bytesPerStep, row.bytesPerLink, row.bytes};
    } else if (!instance) {
      llvm::consumeError(instance.takeError());
    }
    for (size_t s = 0; s < numSteps; ++s) {
      summary.bytesPerStep[s] += row.bytesPerStep[s];
      summary.bytesPerLink[s] += row.bytesPerLink[s];
    }
    summary.bytes += row.bytes;
    summary.ops.push_back(std::move(row));
  }
  return summary;
}

void printDevicePrograms(const plan::Plan &plan, llvm::raw_ostream &os) {
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    const plan::DeviceProgram &device = plan.devices[d];
    os << "device " << d << " (peak " << device.peakBytes << " bytes, receives "
       << device.commBytes << " bytes per step)\n";
    // (A device that shares a program prints it with its own regions.)
    const std::vector<plan::Buffer> &buffers = plan::buffersOf(plan, d);
    for (size_t b = 0; b < buffers.size(); ++b) {
      const plan::Buffer &buffer = buffers[b];
      os << llvm::formatv("  buffer {0} = {1}{2} {3}{4} @{5} ({6} bytes)\n", b,
                          plan.tensors[buffer.tensor].name,
                          formatBox(plan::bufferRegion(plan, d, b).toBox()),
                          buffer.owned ? "owned" : "",
                          buffer.partial ? "partial" : "", buffer.offset,
                          buffer.bytes);
    }
    for (const plan::Instr &instr : plan::instrsOf(plan, d)) {
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
        plan::forEachPiece(plan, d, instr, [&](const plan::Piece &piece) {
          os << " d" << piece.device << ".b" << piece.buffer
             << formatBox(piece.region);
        });
        break;
      }
      os << "  ; " << instr.op << "\n";
    }
  }
}

namespace {

/// "2 x 4 (2 recursion steps)" / "4 (1 recursion step)".
std::string formatGrid(const std::vector<int64_t> &grid) {
  std::string s;
  for (int64_t k : grid)
    s += (s.empty() ? "" : " x ") + std::to_string(k);
  return s + llvm::formatv(" ({0} recursion step{1})", grid.size(),
                           grid.size() == 1 ? "" : "s")
                 .str();
}

} // namespace

/// Up to this many devices the text summary lists each device's peak
/// memory; above, each distinct peak with its number of devices.
constexpr size_t kListedDevices = 16;

std::string formatPlanText(func::FuncOp func, const plan::Plan &plan,
                           bool withSearchTime,
                           const StepPrediction *prediction) {
  return formatPlanText(summarizePlan(func, plan), plan, withSearchTime,
                        prediction);
}

std::string formatPlanText(const PlanSummary &summary, const plan::Plan &plan,
                           bool withSearchTime,
                           const StepPrediction *prediction) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("tofu plan: {0} devices, partitioner {1}",
                      plan.numDevices, plan.partitioner);
  if (withSearchTime)
    os << llvm::formatv(", search {0:f4} s", plan.searchSeconds);
  os << "\ndevice grid: " << formatGrid(summary.grid) << "\n";
  os << "communication: " << plan.commBytes << " bytes per training step\n";
  for (size_t s = 0; s < summary.bytesPerStep.size(); ++s)
    os << llvm::formatv("  step {0} ({1} groups): {2} bytes; {3} bytes "
                        "cross its links\n",
                        s + 1, summary.grid[s], summary.bytesPerStep[s],
                        summary.bytesPerLink[s]);
  if (!summary.deviceModel.empty()) {
    // Only with --topology: nothing changes in a plan compiled without one.
    // The search's own estimate (average bytes per device); the prediction
    // below times the materialized plan.
    os << llvm::formatv("search estimate: {0:e3} s on device model {1} "
                        "(objective {2}): compute {3:e3} s + transfers "
                        "{4:e3} s, no overlap\n",
                        summary.predictedStepSeconds(), summary.deviceModel,
                        summary.objective, summary.predictedComputeSeconds,
                        summary.predictedStepSeconds() -
                            summary.predictedComputeSeconds);
    for (size_t s = 0; s < summary.stepCommSeconds.size(); ++s)
      os << llvm::formatv("  step {0} transfers: {1:e3} s at {2} GB/s\n",
                          s + 1, summary.stepCommSeconds[s],
                          s < summary.stepGbps.size() ? summary.stepGbps[s]
                                                      : 0.0);
  }
  if (prediction)
    os << formatPredictionText(*prediction);
  if (plan.devices.size() <= kListedDevices) {
    os << "peak memory per device (bytes):";
    for (const auto &device : plan.devices)
      os << " " << device.peakBytes;
  } else {
    // A thousand numbers say little: each distinct peak, ascending, with
    // how many devices have it (--dump-plan=json lists every device).
    std::map<uint64_t, size_t> devicesWithPeak;
    for (const auto &device : plan.devices)
      ++devicesWithPeak[device.peakBytes];
    os << "peak memory per device (bytes), " << plan.devices.size()
       << " devices:";
    const char *separator = " ";
    for (const auto &[peak, count] : devicesWithPeak) {
      os << separator << peak << " (" << count
         << (count == 1 ? " device)" : " devices)");
      separator = ", ";
    }
  }
  os << "\noptimizer: " << plan.optimizer.kind << " lr "
     << plan.optimizer.learningRate << ", batch " << plan.batchSize << "\n";
  if (!summary.loss.empty())
    os << "loss: " << tofu::runtime::printableLine(summary.loss) << "\n";
  os << "tensors:\n";
  for (const auto &tensor : plan.tensors)
    os << llvm::formatv("  {0,-40} {1,-10} {2,-14} {3}\n",
                        tofu::runtime::printableLine(tensor.name),
                        tensorRoleName(tensor.role), formatShape(tensor.shape),
                        formatTiling(tensor.tiling));
  os << "ops:";
  if (summary.grid.size() > 1)
    os << " (strategies per step separated by ' | ', bytes per step in "
          "parentheses)";
  os << "\n";
  for (const OpSummary &row : summary.ops) {
    std::vector<std::string> steps;
    for (const auto &outputs : row.stepStrategies)
      steps.push_back(joined(outputs, "; "));
    std::string strategy =
        steps.empty() ? joined(row.strategy, "; ") : joined(steps, " | ");
    os << llvm::formatv("  {0,-40} {1,-28} {2,-22} {3} bytes",
                        tofu::runtime::printableLine(row.name),
                        row.kind, strategy, row.bytes);
    if (row.bytesPerStep.size() > 1) {
      std::vector<std::string> parts;
      for (int64_t b : row.bytesPerStep)
        parts.push_back(std::to_string(b));
      os << " (" << joined(parts, " + ") << ")";
    }
    os << "\n";
  }
  return text;
}

std::string formatPlanJson(func::FuncOp func, const plan::Plan &plan,
                           const StepPrediction *prediction) {
  return formatPlanJson(summarizePlan(func, plan), plan, prediction);
}

std::string formatPlanJson(const PlanSummary &summary, const plan::Plan &plan,
                           const StepPrediction *prediction) {
  auto ints = [](const std::vector<int64_t> &values) {
    llvm::json::Array array;
    for (int64_t v : values)
      array.push_back(v);
    return array;
  };
  llvm::json::Array peak, tensors, ops;
  for (const auto &device : plan.devices)
    peak.push_back(static_cast<int64_t>(device.peakBytes));
  for (const auto &tensor : plan.tensors) {
    llvm::json::Array tiling;
    for (const auto &cut : tensor.tiling)
      tiling.push_back(llvm::json::Array{cut.dim, cut.parts});
    int64_t bytes = static_cast<int64_t>(plan::dtypeSize(tensor.dtype));
    for (int64_t d : tensor.shape)
      bytes *= d;
    tensors.push_back(llvm::json::Object{{"name", tensor.name},
                                         {"role", tensorRoleName(tensor.role)},
                                         {"dtype", dtypeName(tensor.dtype)},
                                         {"shape", ints(tensor.shape)},
                                         {"bytes", bytes},
                                         {"tiling", std::move(tiling)}});
  }
  auto tensorName = [&](int32_t index) -> llvm::json::Value {
    if (index < 0)
      return nullptr;
    return plan.tensors[index].name;
  };
  for (const OpSummary &row : summary.ops) {
    llvm::json::Array strategy, stepStrategies, inputs, outputs;
    for (const auto &step : row.strategy)
      strategy.push_back(step);
    for (const auto &step : row.stepStrategies) {
      llvm::json::Array perOutput;
      for (const auto &s : step)
        perOutput.push_back(s);
      stepStrategies.push_back(std::move(perOutput));
    }
    for (int32_t t : row.inputs)
      inputs.push_back(tensorName(t));
    for (int32_t t : row.outputs)
      outputs.push_back(tensorName(t));
    ops.push_back(
        llvm::json::Object{{"name", row.name},
                           {"kind", row.kind},
                           {"inputs", std::move(inputs)},
                           {"outputs", std::move(outputs)},
                           {"strategy", std::move(strategy)},
                           {"step_strategies", std::move(stepStrategies)},
                           {"comm_bytes", row.bytes},
                           {"comm_bytes_per_step", ints(row.bytesPerStep)},
                           {"comm_bytes_per_link", ints(row.bytesPerLink)}});
  }
  llvm::json::Array liveBound;
  for (uint64_t bytes :
       summary.liveBytesLowerBound.size() == plan.devices.size()
           ? summary.liveBytesLowerBound
           : liveBytesLowerBound(plan))
    liveBound.push_back(static_cast<int64_t>(bytes));
  llvm::json::Object root{
      {"devices", static_cast<int64_t>(plan.numDevices)},
      {"grid", ints(summary.grid)},
      {"partitioner", plan.partitioner},
      {"search_seconds", plan.searchSeconds},
      {"comm_bytes", static_cast<int64_t>(plan.commBytes)},
      {"comm_bytes_per_step", ints(summary.bytesPerStep)},
      {"comm_bytes_per_link", ints(summary.bytesPerLink)},
      {"peak_bytes", std::move(peak)},
      {"live_bytes_lower_bound", std::move(liveBound)},
      {"batch_size", plan.batchSize},
      {"optimizer",
       llvm::json::Object{{"kind", plan.optimizer.kind},
                          {"learning_rate", plan.optimizer.learningRate}}},
      {"loss", summary.loss},
      {"objective", summary.objective},
      {"tensors", std::move(tensors)},
      {"ops", std::move(ops)}};
  if (!summary.deviceModel.empty()) {
    llvm::json::Array comm, gbps;
    for (double s : summary.stepCommSeconds)
      comm.push_back(s);
    for (double g : summary.stepGbps)
      gbps.push_back(g);
    root["search_estimate"] = llvm::json::Object{
        {"device_model", summary.deviceModel},
        {"step_seconds", summary.predictedStepSeconds()},
        {"compute_seconds", summary.predictedComputeSeconds},
        {"comm_seconds",
         summary.predictedStepSeconds() - summary.predictedComputeSeconds},
        {"comm_seconds_per_step", std::move(comm)},
        {"link_gbps", std::move(gbps)}};
  }
  if (prediction) {
    const StepPrediction &p = *prediction;
    llvm::json::Array comm, gbps, names, latency, stepBytes, busiest, devices;
    for (size_t s = 0; s < p.links.size(); ++s) {
      comm.push_back(p.commSecondsPerStep[s]);
      gbps.push_back(p.links[s].gbps);
      names.push_back(p.links[s].name);
      latency.push_back(p.links[s].latencySeconds);
      stepBytes.push_back(static_cast<int64_t>(p.stepBytes[s]));
      busiest.push_back(static_cast<int64_t>(p.stepBytesBusiest[s]));
    }
    for (size_t d = 0; d < p.devices.size(); ++d) {
      const auto &dev = p.devices[d];
      devices.push_back(llvm::json::Object{
          {"device", static_cast<int64_t>(d)},
          {"busy_seconds", dev.busySeconds()},
          {"compute_seconds", dev.computeSeconds},
          {"comm_seconds", dev.commSeconds},
          {"copy_seconds", dev.copySeconds},
          {"received_bytes", static_cast<int64_t>(dev.receivedBytes)},
          {"peak_bytes", static_cast<int64_t>(dev.peakBytes)}});
    }
    llvm::json::Array instructions;
    for (const auto &in : p.device0Instructions)
      instructions.push_back(llvm::json::Object{
          {"index", in.index},
          {"kernel", in.kernel},
          {"contraction", in.contraction},
          {"convolution", in.convolution},
          {"dtype", in.dtype},
          {"elements", in.elements},
          {"rows", in.rows},
          {"call_seconds", in.callSeconds},
          {"seconds", in.seconds}});
    llvm::json::Object byKernel;
    for (const auto &[kernel, seconds] : p.kernelSeconds)
      byKernel[kernel] = seconds;
    llvm::json::Object fit{{"checked", p.memoryBytes > 0},
                           {"fits", p.fits},
                           {"margin", p.memoryMargin}};
    if (p.memoryBytes) {
      fit["memory_bytes"] = static_cast<int64_t>(p.memoryBytes);
      fit["usable_bytes"] = static_cast<int64_t>(p.usableBytes);
      fit["worst_device"] = p.worstDevice;
      fit["worst_bytes"] = static_cast<int64_t>(p.worstBytes);
      fit["over_bytes"] = static_cast<int64_t>(p.overBytes);
      fit["estimated_fitting_devices"] = p.estimatedFittingDevices;
    }
    root["predicted"] = llvm::json::Object{
        {"device_model", p.device},
        {"schedule", p.sharedHost ? "shared-host" : "levels"},
        {"step_seconds", p.stepSeconds},
        {"compute_seconds", p.computeSeconds},
        {"comm_seconds", p.commSeconds()},
        {"copy_seconds", p.copySeconds},
        {"overhead_seconds", p.overheadSeconds},
        {"fed_elements", static_cast<int64_t>(p.fedElements)},
        {"comm_seconds_per_step", std::move(comm)},
        {"comm_bytes_per_step", std::move(stepBytes)},
        {"comm_bytes_per_step_busiest_device", std::move(busiest)},
        {"link_names", std::move(names)},
        {"link_gbps", std::move(gbps)},
        {"link_latency_seconds", std::move(latency)},
        {"busiest_device_seconds", p.busiestDeviceSeconds},
        {"samples_per_second", p.samplesPerSecond},
        {"per_device", std::move(devices)},
        {"compute_seconds_by_kernel", std::move(byKernel)},
        {"device0_instructions", std::move(instructions)},
        {"fit", std::move(fit)}};
  }
  return llvm::formatv("{0:2}", llvm::json::Value(std::move(root))).str() +
         "\n";
}

} // namespace tofu
