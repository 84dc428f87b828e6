//===- CompilerPipeline.cpp - tofuc's phases ------------------------------===//
#include "tofu/Pipelines/CompilerPipeline.h"
#include "tofu/runtime/SharedPrograms.h"
#include "tofu/Target/CudaKernelGenerator.h"
#include "tofu/Import/OnnxImporter.h"
#include "tofu/Target/PlanBuilder.h"
#include "tofu/Target/PlanPrinter.h"
#include "tofu/Target/StepPrediction.h"
#include "tofu/Transforms/DeviceModel.h"
#include "tofu/Transforms/Passes.h"
#include "tofu/Transforms/RecursivePartitioner.h"
#include "tofu/runtime/AtomicFile.h"
#include "tofu/runtime/Plan.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/BuryPointer.h"
#include "llvm/Support/Format.h"
#include "llvm/ADT/StringSwitch.h"

#include <chrono>
#include <cmath>

using namespace mlir;

namespace tofu {

namespace {
constexpr const char *kPhaseNames[] = {
    "import",    "train",       "analyze",  "coarsen",
    "partition", "materialize", "schedule", "emit"};
constexpr const char *kVersion = "tofuc 0.1.0";
} // namespace

std::optional<Phase> parsePhase(llvm::StringRef name) {
  for (int i = 0; i <= static_cast<int>(Phase::Emit); ++i)
    if (name == kPhaseNames[i])
      return static_cast<Phase>(i);
  return std::nullopt;
}

std::string phaseNames() {
  std::string names;
  for (const char *name : kPhaseNames)
    names += (names.empty() ? "" : ", ") + std::string(name);
  return names;
}

static BuildTrainingStepOptions
trainingStepOptions(const CompileOptions &options) {
  const CompileOptions::Training &t = options.training;
  BuildTrainingStepOptions result;
  result.lossName = t.loss;
  result.optimizer = t.optimizer;
  result.learningRate = t.learningRate;
  result.momentum = t.momentum;
  result.momentumBeta = t.momentumBeta;
  result.nesterov = t.nesterov;
  result.beta1 = t.beta1;
  result.beta2 = t.beta2;
  result.epsilon = t.epsilon;
  result.weightDecay = t.weightDecay;
  result.lrDecay = t.lrDecay;
  result.freeze.assign(t.freeze.begin(), t.freeze.end());
  result.trainable.assign(t.trainable.begin(), t.trainable.end());
  result.overrides.assign(t.overrides.begin(), t.overrides.end());
  return result;
}

void buildIRPipeline(OpPassManager &pm, const CompileOptions &options,
                     Phase stopAfter) {
  OpPassManager &funcPm = pm.nest<func::FuncOp>();
  if (stopAfter >= Phase::Train) {
    funcPm.addPass(createFuseGelu());
    funcPm.addPass(createFuseLayerNorm());
  }
  if (stopAfter >= Phase::Train && options.training.precision == "bf16")
    funcPm.addPass(createAutocast());
  if (stopAfter >= Phase::Train)
    funcPm.addPass(createBuildTrainingStep(trainingStepOptions(options)));
  if (stopAfter >= Phase::Train) {
    funcPm.addPass(createFoldTransposes());
    funcPm.addPass(createAbsorbTransposes());
    funcPm.addPass(createDeduplicateComputes());
  }
  if (stopAfter >= Phase::Analyze)
    funcPm.addPass(createAnalyzeStrategies());
  if (stopAfter >= Phase::Coarsen)
    funcPm.addPass(createCoarsen());
  if (stopAfter >= Phase::Partition)
    funcPm.addPass(createPartition(
        {options.devices, options.partitioner, options.topology,
         options.objective, options.device}));
}

llvm::Error compileModel(const CompileOptions &options, llvm::raw_ostream &os,
                         std::optional<StepPrediction> *predictionOut) {
  auto fail = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   message.str());
  };
  if (options.devices < 1)
    return fail("--gpus must be at least 1, not " +
                llvm::Twine(options.devices));
  if (options.devices > plan::kMaxDevices)
    return fail("--gpus " + llvm::Twine(options.devices) +
                " is over the limit of " + llvm::Twine(plan::kMaxDevices) +
                " devices (docs/Errors.md)");
  if (options.threads > kMaxMaterializeThreads)
    return fail("--compile-threads " + llvm::Twine(options.threads) +
                " is over the limit of " +
                llvm::Twine(kMaxMaterializeThreads) +
                " (0: the machine's cores, at most 8, from 256 devices)");
  // Refuse an output tofuc cannot write before spending time on the model.
  if (!options.outputPath.empty())
    if (std::string kind = outputPathKind(options.outputPath);
        !kind.empty() && kind != "direct")
      return fail("cannot write the plan: " + kind);
  if (!llvm::is_contained(partitionerNames(), options.partitioner)) {
    std::string names;
    for (const std::string &name : partitionerNames())
      names += (names.empty() ? "" : ", ") + name;
    return fail("unknown --partitioner '" + options.partitioner +
                "' (available: " + names + ")");
  }
  if (options.training.precision != "f32" &&
      options.training.precision != "bf16")
    return fail("unknown --precision '" + options.training.precision +
                "' (available: f32, bf16)");
  if (auto steps = planSteps(options.devices, options.topology); !steps)
    return steps.takeError();
  // --device: refused before the model is read (a bad description file
  // names its field, docs/DeviceModel.md).
  std::optional<DeviceModel> device;
  if (!options.device.empty()) {
    auto loaded = loadDeviceModel(options.device);
    if (!loaded)
      return loaded.takeError();
    device = std::move(*loaded);
  }

  MLIRContext context;
  context.loadDialect<TofuDialect, func::FuncDialect>();
  // Collect diagnostics so that they become the error message.
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    // Warnings (e.g. a step the partitioner solved approximately) do not
    // stop compilation: print them as they come.
    if (diag.getSeverity() == DiagnosticSeverity::Warning) {
      llvm::errs() << "tofuc: warning: " << diag.str() << "\n";
      return success();
    }
    // Remarks (a parameter left untrained, ...) are notes for --verbose.
    if (diag.getSeverity() == DiagnosticSeverity::Remark) {
      if (options.import.verbose)
        llvm::errs() << "tofuc: note: " << diag.str() << "\n";
      return success();
    }
    llvm::raw_string_ostream ds(diagnostics);
    if (!diagnostics.empty())
      ds << "\n";
    Location loc = diag.getLocation();
    if (auto name = dyn_cast<NameLoc>(loc))
      ds << "'" << name.getName().getValue() << "': ";
    ds << diag.str();
    return success();
  });

  // --time-phases: wall seconds since the previous mark, printed at the
  // end (or when an error ends compilation early, what was measured).
  std::vector<std::pair<const char *, double>> phaseSeconds;
  auto phaseStart = std::chrono::steady_clock::now();
  auto mark = [&](const char *phase) {
    auto now = std::chrono::steady_clock::now();
    phaseSeconds.push_back(
        {phase, std::chrono::duration<double>(now - phaseStart).count()});
    phaseStart = now;
  };
  auto printPhases = llvm::make_scope_exit([&] {
    if (!options.timePhases || phaseSeconds.empty())
      return;
    double total = 0;
    llvm::errs() << "tofuc: phase seconds:";
    for (const auto &[phase, seconds] : phaseSeconds) {
      llvm::errs() << " " << phase << " " << llvm::format("%.3f", seconds);
      total += seconds;
    }
    llvm::errs() << "; total " << llvm::format("%.3f", total) << "\n";
  });

  auto imported = importOnnxFile(&context, options.inputPath, options.import);
  if (!imported)
    return imported.takeError();
  mark("import");
  ModuleOp module = *imported->module;
  if (options.stopAfter == Phase::Import) {
    // Resource blobs (external weights, mapped) are never printed: MLIR
    // would hex-encode a whole blob before eliding it.
    module.print(os, OpPrintingFlags().elideLargeElementsAttrs(16)
                         .elideLargeResourceString(0));
    return llvm::Error::success();
  }

  Phase irStop = std::min(options.stopAfter, Phase::Partition);
  // Train, analyze and coarsen first, then time the search alone.
  PassManager prePm(&context);
  CompileOptions preOptions = options;
  buildIRPipeline(prePm, preOptions, std::min(irStop, Phase::Coarsen));
  if (failed(prePm.run(module)))
    return fail(options.inputPath + ": " + diagnostics);
  mark("train+analyze+coarsen");
  if (options.import.verbose)
    module.walk([&](LossOp loss) {
      if (auto description = loss.getDescription())
        llvm::errs() << "tofuc: note: " << options.inputPath
                     << ": the loss is " << *description << "\n";
    });
  double searchSeconds = 0;
  if (irStop == Phase::Partition) {
    PassManager partitionPm(&context);
    partitionPm.nest<func::FuncOp>().addPass(createPartition(
        {options.devices, options.partitioner, options.topology,
         options.objective, options.device}));
    auto start = std::chrono::steady_clock::now();
    if (failed(partitionPm.run(module)))
      return fail(options.inputPath + ": " + diagnostics);
    searchSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    mark("search");
  }
  if (options.stopAfter <= Phase::Partition) {
    module.print(os, OpPrintingFlags().elideLargeElementsAttrs(16)
                         .elideLargeResourceString(0));
    return llvm::Error::success();
  }

  auto func = *module.getOps<func::FuncOp>().begin();
  // The plan is written while the context and the model's mapping live:
  // its weight tiles need not be copied out of them first.
  MaterializeOptions materializeOptions;
  materializeOptions.borrowWeights = true;
  materializeOptions.explicitPieces = options.explicitPieces;
  materializeOptions.threads = options.threads;
  materializeOptions.sharePrograms = true;
  auto plan = materialize(func, materializeOptions);
  if (!plan)
    return fail(options.inputPath + ": " + llvm::toString(plan.takeError()));
  mark("materialize");
  plan->producer = kVersion;
  plan->modelFingerprint = imported->fingerprint;
  if (plan->withoutWeights && !imported->withoutWeights)
    return fail(options.inputPath +
                ": a parameter has no initial value; a plan needs weights");
  plan->partitioner = options.partitioner;
  // Devices share programs (SharedPrograms.h) through memory planning,
  // printing and writing; CUDA code generation and the prediction expand.
  if (options.stopAfter == Phase::Materialize) {
    printDevicePrograms(*plan, os);
    return llvm::Error::success();
  }
  updateParamsInPlace(*plan);
  std::vector<uint64_t> liveBound = planMemory(*plan);
  mark("memory-plan");
  for (size_t d = 0; d < plan->devices.size(); ++d)
    if (plan->devices[d].peakBytes > plan::kMaxArenaBytes)
      return fail(options.inputPath + ": device " + llvm::Twine(d) +
                  " needs an arena of " +
                  llvm::Twine(plan->devices[d].peakBytes) +
                  " bytes, over the limit of " +
                  llvm::Twine(plan::kMaxArenaBytes) + " (docs/Errors.md)");
  if (options.stopAfter == Phase::Schedule) {
    printDevicePrograms(*plan, os);
    return llvm::Error::success();
  }
  {
    // --save writes the trained values into the embedded model: it need
    // not carry their initial values, which WEIGHTS holds.
    std::vector<bool> updated(plan->tensors.size(), false);
    for (const auto &[param, newValue] : plan->paramUpdates)
      if (param >= 0 && static_cast<size_t>(param) < updated.size())
        updated[param] = true;
    std::vector<std::string> trained;
    for (size_t t = 0; t < plan->tensors.size(); ++t)
      if (updated[t] && plan->tensors[t].role == plan::TensorRole::Param &&
          !plan->tensors[t].paramName.empty())
        trained.push_back(plan->tensors[t].paramName);
    if (imported->model) {
      auto model =
          modelForSave(*imported->model, trained, imported->modelBytes);
      if (!model)
        return fail(options.inputPath + ": " +
                    llvm::toString(model.takeError()));
      plan->onnxModel = std::move(*model);
      imported->model.reset();
    }
  }
  mark("model-for-save");
  if (!options.cudaArch.empty()) {
    cudagen::CudaCodegenOptions cuda;
    cuda.arch = options.cudaArch;
    cuda.nvccPath = options.nvccPath;
    if (llvm::Error err = cudagen::generateCudaKernels(*plan, cuda))
      return fail(options.inputPath + ": " + llvm::toString(std::move(err)));
    mark("cuda");
  }
  // plan.bin holds no timing, so that it is byte-for-byte reproducible.
  PlanSummary summary = summarizePlan(func, *plan);
  // CUDA code generation may fuse instructions: then the bound is computed
  // again from the plan as it is.
  if (options.cudaArch.empty())
    summary.liveBytesLowerBound = std::move(liveBound);
  plan->summary = formatPlanText(summary, *plan, /*withSearchTime=*/false);
  plan->searchSeconds = searchSeconds;
  // The prediction (--device, or --topology with the cpu description):
  // printed by --dump-plan=text|json, never stored in plan.bin.
  std::optional<StepPrediction> prediction;
  bool shown = options.dumpPlan == PlanDump::Text ||
               options.dumpPlan == PlanDump::Json ||
               options.dumpPlan == PlanDump::Html || predictionOut;
  if (shown && (device || !options.topology.empty())) {
    if (!device) {
      auto cpu = loadDeviceModel("cpu");
      if (!cpu)
        return cpu.takeError();
      device = std::move(*cpu);
    }
    PredictOptions predict;
    if (!options.topology.empty()) {
      auto steps = planSteps(options.devices, options.topology);
      if (!steps)
        return steps.takeError();
      predict.topologyLinks = steps->links;
      predict.topologyGbps = steps->gbps;
    }
    plan::expandSharedPrograms(*plan);
    auto predicted = predictStep(func, *plan, *device, predict);
    if (predicted)
      prediction = std::move(*predicted);
    else if (!options.device.empty())
      return fail(options.inputPath + ": " +
                  llvm::toString(predicted.takeError()));
    else // asked for by nobody but --topology: the plan still stands
      llvm::errs() << "tofuc: warning: no prediction: "
                   << llvm::toString(predicted.takeError()) << "\n";
  }
  if (predictionOut)
    *predictionOut = prediction;
  const StepPrediction *withPrediction = prediction ? &*prediction : nullptr;
  if (options.dumpPlan == PlanDump::Text)
    os << formatPlanText(summary, *plan, /*withSearchTime=*/true,
                         withPrediction);
  else if (options.dumpPlan == PlanDump::Json)
    os << formatPlanJson(summary, *plan, withPrediction);
  else if (options.dumpPlan == PlanDump::Html)
    os << formatPlanHtml(func, *plan, withPrediction);
  mark("summary+dump");
  if (!options.outputPath.empty()) {
    plan->searchSeconds = 0;
    plan::WriteOptions write;
    write.externalWeightsAbove =
        options.externalWeights ? 0 : kAutoExternalWeightsBytes;
    std::string err = plan::writePlan(*plan, options.outputPath, write);
    if (!err.empty())
      return fail(options.outputPath + ": " + err);
    mark("write");
  }
  if (options.disableFree)
    llvm::BuryPointer(std::make_unique<plan::Plan>(std::move(*plan)));
  return llvm::Error::success();
}

llvm::Expected<int64_t> smallestFittingDevices(const CompileOptions &options,
                                               llvm::raw_ostream &log) {
  auto fail = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--gpus auto: " + message.str());
  };
  if (options.device.empty())
    return fail("needs --device (the memory the plan must fit)");
  if (!options.topology.empty())
    return fail("--topology fixes the number of devices; give --gpus");
  auto device = loadDeviceModel(options.device);
  if (!device)
    return device.takeError();
  if (!device->memoryBytes)
    return fail("device '" + device->name +
                "' gives no memory size (memory.bytes)");
  // Only the memory plan is needed: no dump, no plan.bin, no CUDA.
  CompileOptions trial = options;
  trial.outputPath.clear();
  trial.dumpPlan = PlanDump::None;
  trial.stopAfter = Phase::Emit;
  trial.cudaArch.clear();
  trial.timePhases = false;
  std::string last;
  for (int64_t k = 1; k <= static_cast<int64_t>(plan::kMaxDevices); k *= 2) {
    trial.devices = k;
    std::optional<StepPrediction> prediction;
    std::string discard;
    llvm::raw_string_ostream sink(discard);
    if (llvm::Error err = compileModel(trial, sink, &prediction))
      return std::move(err);
    if (!prediction)
      return fail("no prediction at k = " + llvm::Twine(k));
    last = formatFit(*prediction);
    log << "tofuc: --gpus auto: k = " << k << ": " << last << "\n";
    if (prediction->fits)
      return k;
    if (prediction->sharedHost)
      return fail("virtual devices on one host share its memory: no k "
                  "fits (" + last + ")");
  }
  return fail("no k up to " + llvm::Twine(plan::kMaxDevices) + " fits (" +
              last + ")");
}

} // namespace tofu
