//===- tofuc.cpp - the tofu compiler driver -------------------------------===//
//
// tofuc model.onnx --gpus 8 -o plan.bin
// tofuc model.onnx --gpus 8 --dump-plan[=text|json|html]
// tofuc model.onnx --compile-to=<phase>
//
//===----------------------------------------------------------------------===//
#include "tofu/Pipelines/CompilerPipeline.h"

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
static cl::opt<int64_t> gpus("gpus", cl::desc("number of devices k"),
                             cl::init(1), cl::cat(tofucCategory));
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
static cl::opt<double> learningRate("lr", cl::desc("SGD learning rate"),
                                    cl::init(0.1), cl::cat(tofucCategory));
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
static cl::opt<bool> allowHardlinkedData(
    "allow-hardlinked-data",
    cl::desc("accept external data files with several hard links"),
    cl::cat(tofucCategory));
static cl::opt<bool> verbose("verbose",
                             cl::desc("print notes (skipped ONNX checker, ...)"),
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
  cl::HideUnrelatedOptions(tofucCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "tofuc: compiles an ONNX model's training step for k devices\n");
  auto fail = [](const Twine &message) {
    WithColor::error(errs(), "tofuc") << message << "\n";
    return 1;
  };
  tofu::CompileOptions options;
  options.inputPath = inputPath;
  options.outputPath = outputPath;
  options.devices = gpus;
  options.partitioner = partitioner;
  options.topology = topology;
  if (!(learningRate > 0) || !std::isfinite(learningRate))
    return fail("--lr must be a finite positive number, not " +
                Twine(std::to_string(learningRate)));
  options.learningRate = learningRate;
  for (const std::string &shape : inputShapes)
    if (Error err = parseShape(shape, options.import.inputShapes))
      return fail(toString(std::move(err)));
  if (batch.getNumOccurrences()) {
    if (batch <= 0)
      return fail("--batch must be a positive integer, not " +
                  Twine(std::to_string(batch)));
    options.import.batch = batch;
  }
  options.import.noWeights = noWeights;
  options.import.allowHardlinkedData = allowHardlinkedData;
  options.import.verbose = verbose;
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
  if (options.outputPath.empty() && options.dumpPlan == tofu::PlanDump::None &&
      compileTo.empty())
    return fail("nothing to do: give -o plan.bin, --dump-plan or --compile-to");
  if (Error err = tofu::compileModel(options, outs()))
    return fail(toString(std::move(err)));
  return 0;
}
