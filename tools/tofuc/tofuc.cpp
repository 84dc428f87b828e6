//===- tofuc.cpp - the tofu compiler driver -------------------------------===//
//
// tofuc model.onnx --gpus 8 -o plan.bin
// tofuc model.onnx --gpus 8 --dump-plan[=text|json|html]
// tofuc model.onnx --compile-to=<phase>
//
//===----------------------------------------------------------------------===//
#include "tofu/Pipelines/CompilerPipeline.h"
#include "tofu/Target/CudaKernelGenerator.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"

#include <cmath>
#include <map>

using namespace llvm;

static cl::OptionCategory tofucCategory("tofuc options");

static cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx>"),
                                      cl::Required, cl::cat(tofucCategory));
static cl::opt<std::string> outputPath("o", cl::desc("write plan.bin here"),
                                       cl::value_desc("plan.bin"),
                                       cl::cat(tofucCategory));
static cl::opt<std::string>
    gpus("gpus",
         cl::desc("number of devices k, or auto: the smallest power of two "
                  "whose plan fits --device's memory less a 10% margin "
                  "(docs/DeviceModel.md)"),
         cl::init("1"), cl::value_desc("k|auto"), cl::cat(tofucCategory));
static cl::opt<std::string> partitioner(
    "partitioner",
    cl::desc("partitioning algorithm: tofu (default), data-parallel, "
             "allrow-greedy, spartan, equal-chop, icml18, exhaustive"),
    cl::init("tofu"), cl::cat(tofucCategory));
static cl::opt<std::string> topology(
    "topology",
    cl::desc("interconnect levels, innermost first, e.g. "
             "8x:nvlink=300,2x:pcie=16 (see docs/Partitioning.md)"),
    cl::value_desc("COUNTx:NAME=GBPS,..."), cl::cat(tofucCategory));
static cl::opt<std::string> objective(
    "objective",
    cl::desc("what the partitioner minimizes: auto (default: the predicted "
             "step time with --topology, bytes without), bytes, time "
             "(docs/Partitioning.md)"),
    cl::init("auto"), cl::cat(tofucCategory));
static cl::opt<std::string> deviceModel(
    "device",
    cl::desc("predict the step time, throughput and memory fit on this "
             "device: a built-in description (cpu, k80, v100, a100, h100) "
             "or a JSON file (docs/DeviceModel.md); also the device of "
             "--objective=time (default cpu). Without --topology it does "
             "not change the plan"),
    cl::value_desc("NAME|FILE"), cl::cat(tofucCategory));
static cl::OptionCategory trainingCategory(
    "training step options (docs/Training.md)");
static cl::opt<std::string>
    loss("loss",
         cl::desc("the loss: a scalar model output's name (default: the "
                  "only scalar float output), or softmax-cross-entropy[:"
                  "<logits output>], which adds an int64 input 'labels'"),
         cl::value_desc("output|softmax-cross-entropy[:logits]"),
         cl::cat(trainingCategory));
static cl::opt<std::string>
    optimizer("optimizer",
              cl::desc("sgd, momentum, adam or adagrad (the ONNX "
                       "ai.onnx.preview.training semantics)"),
              cl::init("sgd"), cl::cat(trainingCategory));
static cl::opt<double> learningRate("lr", cl::desc("learning rate (R)"),
                                    cl::init(0.1), cl::cat(trainingCategory));
static cl::opt<double>
    momentum("momentum",
             cl::desc("momentum: alpha, the decay of the velocity"),
             cl::init(0.9), cl::cat(trainingCategory));
static cl::opt<double> momentumBeta(
    "momentum-beta",
    cl::desc("momentum: beta, the gradient's coefficient after step 1"),
    cl::init(1.0), cl::cat(trainingCategory));
static cl::opt<bool> nesterov("nesterov",
                              cl::desc("momentum: Nesterov's momentum"),
                              cl::cat(trainingCategory));
static cl::opt<double> beta1("beta1", cl::desc("adam: alpha"), cl::init(0.9),
                             cl::cat(trainingCategory));
static cl::opt<double> beta2("beta2", cl::desc("adam: beta"), cl::init(0.999),
                             cl::cat(trainingCategory));
static cl::opt<double> epsilon("epsilon", cl::desc("adam, adagrad: epsilon"),
                               cl::init(1e-6), cl::cat(trainingCategory));
static cl::opt<double> weightDecay(
    "weight-decay",
    cl::desc("L2 coefficient added to every gradient (norm_coefficient)"),
    cl::init(0), cl::cat(trainingCategory));
static cl::opt<double> lrDecay("lr-decay",
                               cl::desc("adagrad: decay_factor"), cl::init(0),
                               cl::cat(trainingCategory));
static cl::list<std::string>
    freeze("freeze",
           cl::desc("parameters not to train (names or globs with *, comma "
                    "separated), besides those the model lists as frozen; "
                    "wins over --trainable"),
           cl::CommaSeparated, cl::value_desc("name,..."),
           cl::cat(trainingCategory));
static cl::list<std::string> trainable(
    "trainable",
    cl::desc("the only parameters to train (names or globs with *, comma "
             "separated), instead of the model's metadata_props lists "
             "tofu.frozen/tofu.trainable (default: every float initializer "
             "not listed as frozen and without inf/NaN values; "
             "docs/Training.md)"),
    cl::CommaSeparated, cl::value_desc("name,..."),
    cl::cat(trainingCategory));
static cl::opt<std::string> precision(
    "precision",
    cl::desc("f32 (default: everything in float32) or bf16: MatMul, Gemm "
             "and Conv and their gradients compute in bfloat16 (float32 "
             "accumulation), with float32 weights, gradients, optimizer "
             "state, element-wise ops, reductions, softmax, norms and "
             "losses (PyTorch autocast's rules; a float32 model only; "
             "docs/Training.md, \"Mixed precision\")"),
    cl::init("f32"), cl::value_desc("f32|bf16"), cl::cat(trainingCategory));
static cl::opt<std::string>
    compileTo("compile-to",
              cl::desc("stop after this phase and print its output"),
              cl::value_desc("phase"), cl::cat(tofucCategory));
static cl::opt<std::string>
    dumpPlan("dump-plan",
             cl::desc("print the plan summary to stdout: text (default), json "
                      "(docs/PlanJson.md) or a self-contained html page "
                      "(docs/PlanHtml.md)"),
             cl::ValueOptional, cl::value_desc("text|json|html"),
             cl::cat(tofucCategory));

static cl::list<std::string> inputShapes(
    "shape",
    cl::desc("bind a graph input's shape, trtexec style: name:d0xd1x... "
             "(several: repeat the flag or separate with commas)"),
    cl::value_desc("name:d0xd1x..."), cl::CommaSeparated,
    cl::cat(tofucCategory));
static cl::opt<int64_t>
    batch("batch",
          cl::desc("size of every symbolic first (batch) dimension of the "
                   "graph inputs that --shape does not bind"),
          cl::init(0), cl::cat(tofucCategory));
static cl::opt<bool>
    noWeights("no-weights",
              cl::desc("compile a graph-only model whose external data "
                       "files are absent (the plan cannot be run)"),
              cl::cat(tofucCategory));
static cl::opt<bool> externalWeights(
    "external-weights",
    cl::desc("keep each device's weight shard in its own file next to "
             "plan.bin (<checksum>.tofu-weights) instead of inside it; "
             "automatic above 2 GiB of weights"),
    cl::cat(tofucCategory));
static cl::opt<bool> timePhases(
    "time-phases",
    cl::desc("print the wall seconds of each compilation phase (import, "
             "training step, search, materialize, ..., write) to stderr"),
    cl::cat(tofucCategory));
static cl::opt<bool> explicitPieces(
    "explicit-pieces",
    cl::desc("list every fetch's and reduction's pieces on each device "
             "instead of one source table per collective (the plan is the "
             "same; O(k^2) pieces per all-gather; for tests)"),
    cl::Hidden, cl::cat(tofucCategory));
static cl::opt<unsigned> compileThreads(
    "compile-threads",
    cl::desc("threads that build the device programs (default 0: the "
             "machine's cores, at most 8, for 256 or more devices, else "
             "one; the plan is the same for any number)"),
    cl::init(0), cl::cat(tofucCategory));
static cl::opt<bool> allowHardlinkedData(
    "allow-hardlinked-data",
    cl::desc("accept external data files with several hard links"),
    cl::cat(tofucCategory));
static cl::opt<std::string> cudaArch(
    "cuda-arch",
    cl::desc("generate CUDA kernels from the TDL programs, compile them with "
             "nvcc for this GPU architecture and store them in plan.bin "
             "(docs/Cuda.md)"),
    cl::value_desc("sm_80|sm_90|..."), cl::cat(tofucCategory));
static cl::opt<std::string>
    nvccPath("nvcc",
             cl::desc("the nvcc for --cuda-arch (default: nvcc on PATH, then "
                      "/usr/local/cuda/bin/nvcc)"),
             cl::value_desc("path"), cl::cat(tofucCategory));
static cl::opt<bool> verbose("verbose",
                             cl::desc("print notes (skipped ONNX checker, "
                                      "initializers left untrained, ...)"),
                             cl::cat(tofucCategory));

/// Parses `name:d0xd1x...` (the last ':' separates the name, so names may
/// contain ':'); every dim a positive integer.
static Error parseShape(StringRef text,
                        std::map<std::string, std::vector<int64_t>> &shapes) {
  auto bad = [&](const Twine &why) {
    return createStringError(inconvertibleErrorCode(),
                             "--shape '" + text + "': " + why +
                                 " (expected name:d0xd1x..., e.g. "
                                 "input:8x3x224x224)");
  };
  size_t colon = text.rfind(':');
  if (colon == StringRef::npos || colon == 0)
    return bad("no input name before ':'");
  StringRef name = text.take_front(colon), dimsText = text.drop_front(colon + 1);
  if (dimsText.empty())
    return bad("no dimensions after ':'");
  std::vector<int64_t> dims;
  SmallVector<StringRef> parts;
  dimsText.split(parts, 'x');
  for (StringRef part : parts) {
    int64_t d;
    if (part.getAsInteger(10, d) || d <= 0)
      return bad("dimension '" + part + "' is not a positive integer");
    dims.push_back(d);
  }
  if (!shapes.emplace(name.str(), dims).second)
    return bad("input '" + name + "' is given twice");
  return Error::success();
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions({&tofucCategory, &trainingCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "tofuc: compiles an ONNX model's training step for k devices\n");
  auto fail = [](const Twine &message) {
    // Names from the model (nodes, inputs) may hold escape sequences or
    // other control characters: never send them to the terminal raw.
    std::string text;
    for (unsigned char c : message.str()) {
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\x%02x", c);
        text += buf;
      } else {
        text += static_cast<char>(c);
      }
    }
    WithColor::error(errs(), "tofuc") << text << "\n";
    return 1;
  };
  tofu::CompileOptions options;
  options.inputPath = inputPath;
  options.outputPath = outputPath;
  options.externalWeights = externalWeights;
  options.timePhases = timePhases;
  options.explicitPieces = explicitPieces;
  options.threads = compileThreads;
  bool autoDevices = gpus == "auto";
  // A number below 1 or over the limit is refused by compileModel.
  if (!autoDevices && StringRef(gpus).getAsInteger(10, options.devices))
    return fail("--gpus expects a number of devices or auto, not '" +
                Twine(gpus) + "'");
  options.partitioner = partitioner;
  options.topology = topology;
  options.objective = objective;
  options.device = deviceModel;
  if (!(learningRate > 0) || !std::isfinite(learningRate))
    return fail("--lr must be a finite positive number, not " +
                Twine(std::to_string(learningRate)));
  for (const std::string &shape : inputShapes)
    if (Error err = parseShape(shape, options.import.inputShapes))
      return fail(toString(std::move(err)));
  if (batch.getNumOccurrences()) {
    if (batch <= 0)
      return fail("--batch must be a positive integer, not " +
                  Twine(std::to_string(batch)));
    options.import.batch = batch;
  }
  if (cudaArch.getNumOccurrences()) {
    if (Error err = tofu::cudagen::checkCudaArch(cudaArch))
      return fail(toString(std::move(err)));
    options.cudaArch = cudaArch;
  }
  if (nvccPath.getNumOccurrences() && cudaArch.empty())
    return fail("--nvcc is used only with --cuda-arch");
  options.nvccPath = nvccPath;
  options.import.noWeights = noWeights;
  options.import.allowHardlinkedData = allowHardlinkedData;
  options.import.verbose = verbose;
  if (optimizer != "sgd" && optimizer != "momentum" && optimizer != "adam" &&
      optimizer != "adagrad")
    return fail("unknown --optimizer '" + optimizer +
                "' (sgd, momentum, adam or adagrad)");
  // A hyper-parameter of another optimizer is a mistake, not a no-op.
  struct Knob {
    cl::Option &option;
    const char *optimizers;
  };
  Knob knobs[] = {{momentum, "momentum"}, {momentumBeta, "momentum"},
                  {nesterov, "momentum"}, {beta1, "adam"},
                  {beta2, "adam"},       {epsilon, "adam adagrad"},
                  {lrDecay, "adagrad"}};
  for (const Knob &knob : knobs)
    if (knob.option.getNumOccurrences() &&
        StringRef(knob.optimizers).split(' ').first != optimizer &&
        StringRef(knob.optimizers).split(' ').second != optimizer)
      return fail("--" + knob.option.ArgStr + " applies to --optimizer " +
                  knob.optimizers + ", not " + optimizer);
  struct Range {
    const char *name;
    double value, lo, hi;
    bool hiOpen = false;
  };
  Range ranges[] = {{"momentum", momentum, 0, 1},
                    {"momentum-beta", momentumBeta, 0, 1},
                    {"beta1", beta1, 0, 1, true},
                    {"beta2", beta2, 0, 1, true},
                    {"epsilon", epsilon, 0, HUGE_VAL},
                    {"weight-decay", weightDecay, 0, HUGE_VAL},
                    {"lr-decay", lrDecay, 0, HUGE_VAL}};
  for (const Range &r : ranges)
    if (!(r.value >= r.lo && (r.hiOpen ? r.value < r.hi : r.value <= r.hi)) ||
        !std::isfinite(r.value))
      return fail("--" + Twine(r.name) + " must be a finite number in [" +
                  Twine(std::to_string(r.lo)) + ", " +
                  (std::isfinite(r.hi) ? std::to_string(r.hi) : "inf") +
                  (r.hiOpen ? ")" : "]") + ", not " +
                  Twine(std::to_string(r.value)));
  options.training.loss = loss;
  options.training.optimizer = optimizer;
  options.training.learningRate = learningRate;
  options.training.momentum = momentum;
  options.training.momentumBeta = momentumBeta;
  options.training.nesterov = nesterov;
  options.training.beta1 = beta1;
  options.training.beta2 = beta2;
  options.training.epsilon = epsilon;
  options.training.weightDecay = weightDecay;
  options.training.lrDecay = lrDecay;
  if (precision != "f32" && precision != "bf16")
    return fail("unknown --precision '" + precision + "' (f32 or bf16)");
  options.training.precision = precision;
  options.training.freeze.assign(freeze.begin(), freeze.end());
  options.training.trainable.assign(trainable.begin(), trainable.end());
  for (cl::Option *option :
       std::initializer_list<cl::Option *>{&optimizer, &learningRate,
                                           &momentum, &momentumBeta,
                                           &nesterov, &beta1, &beta2,
                                           &epsilon, &weightDecay, &lrDecay})
    if (option->getNumOccurrences())
      options.training.overrides.push_back(("--" + option->ArgStr).str());
  if (!compileTo.empty()) {
    auto phase = tofu::parsePhase(compileTo);
    if (!phase)
      return fail("unknown phase '" + compileTo +
                  "' for --compile-to (phases: " + tofu::phaseNames() + ")");
    options.stopAfter = *phase;
  }
  if (dumpPlan.getNumOccurrences()) {
    if (dumpPlan.empty() || dumpPlan == "text")
      options.dumpPlan = tofu::PlanDump::Text;
    else if (dumpPlan == "json")
      options.dumpPlan = tofu::PlanDump::Json;
    else if (dumpPlan == "html")
      options.dumpPlan = tofu::PlanDump::Html;
    else
      return fail("unknown --dump-plan format '" + dumpPlan +
                  "' (text, json or html)");
  }
  if (outputPath.getNumOccurrences() && outputPath.empty())
    return fail("-o expects a path, got an empty one");
  if (options.outputPath.empty() && options.dumpPlan == tofu::PlanDump::None &&
      compileTo.empty())
    return fail("nothing to do: give -o plan.bin, --dump-plan or --compile-to");
  if (autoDevices) {
    if (!compileTo.empty())
      return fail("--gpus auto compiles whole plans; give --gpus k with "
                  "--compile-to");
    auto k = tofu::smallestFittingDevices(options, errs());
    if (!k)
      return fail(toString(k.takeError()));
    options.devices = *k;
  }
  options.disableFree = true; // tofuc exits right after
  if (Error err = tofu::compileModel(options, outs()))
    return fail(toString(std::move(err)));
  return 0;
}
