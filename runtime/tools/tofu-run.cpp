//===- tofu-run.cpp - Execute a compiled tofu plan ------------------------===//
//
//   tofu-run plan.bin [--steps N] [--backend auto|cpu|cuda] [--report out.json]
//                     [--save trained.onnx] [--dump DIR] [--dump-plan]
//                     [--kernels native|interpreter] [--trace trace.json]
//                     [--data DIR] [--resume trained.onnx] [--quiet]
//                     [--comm-timeout S] [--devices N] [--no-cuda-graph]
//                     [--nccl-timeout S]
//                     [--dump-cuda-schedule [--ranks W --rank R]]
//
// Under `mpirun -np k` or the torchrun environment it runs as one process per
// device (ProcessGroup.h); rank 0 prints, reports and saves. With --backend
// cuda each process runs its device on one GPU, NCCL between them
// (CudaNcclSchedule.h, CudaNccl.h).
//
// Loads and verifies plan.bin, runs N training steps on synthetic data (or
// .npy batches from --data) and
// reports loss, time, samples/s, peak memory and bytes moved (planned vs
// measured). Every error is one line on stderr starting with
// "tofu-run: error: " and exit code 1.
//
//===----------------------------------------------------------------------===//

#include "CudaNcclSchedule.h"
#include "CudaSchedule.h"
#include "Calibrate.h"
#include "CudaRunPlugin.h"
#include <dlfcn.h>
#include "tofu/runtime/PrintableText.h"
#include "tofu/runtime/AtomicFile.h"
#include "tofu/runtime/CpuBackend.h"
#include "tofu/runtime/NpyData.h"
#include "tofu/runtime/NpyWriter.h"
#include "tofu/runtime/OnnxSave.h"
#include "tofu/runtime/ProcessGroup.h"
#include "tofu/runtime/Plan.h"
#include "tofu/runtime/RunReport.h"
#include "tofu/runtime/TensorAssembly.h"
#include "tofu/runtime/TraceRecorder.h"
#include "tofu/runtime/TrainingBackend.h"
#include "tofu/runtime/TrainingCheckpoint.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <map>
#include <memory>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>

using namespace tofu;
using namespace tofu::plan;
using namespace tofu::runtime;

namespace {

const char *kUsage =
    "usage: tofu-run plan.bin [--steps N] [--backend auto|cpu|cuda]\n"
    "                [--report out.json] [--save trained.onnx] [--dump DIR]\n"
    "                [--dump-plan] [--kernels native|interpreter]\n"
    "                [--trace trace.json] [--data DIR] [--resume FILE]\n"
    "                [--quiet] [--comm-timeout S] [--devices N]\n"
    "                [--no-cuda-graph] [--nccl-timeout S] [--kernel-times FILE]\n"
    "                [--dump-cuda-schedule [--ranks W --rank R]]\n"
    "       tofu-run --calibrate device.json\n"
    "\n"
    "  --calibrate FILE   measure this machine (tofu-run's GEMM, convolution,\n"
    "                     element-wise and reduction kernels, copies between\n"
    "                     virtual devices) and write a device description\n"
    "                     for tofuc --device FILE (docs/DeviceModel.md)\n"
    "  --steps N          training steps to run (default 10)\n"
    "  --backend B        auto (default: the CPU backend), cpu, or cuda (a\n"
    "                     plan compiled with tofuc --cuda-arch; docs/Cuda.md)\n"
    "  --devices N        cuda: run the plan's k devices on N GPUs (1..k,\n"
    "                     default k); several plan devices share a GPU as\n"
    "                     virtual devices with disjoint memory\n"
    "  --no-cuda-graph    cuda: issue every step eagerly instead of replaying\n"
    "                     the step captured as a CUDA graph\n"
    "  --dump-cuda-schedule  print what --backend cuda would issue on\n"
    "                     --devices N GPUs (streams, events, calls) or why it\n"
    "                     refuses the plan, and exit (needs no GPU); with\n"
    "                     --ranks W --rank R: what rank R of W processes\n"
    "                     (mpirun -np W ... --backend cuda) would issue, its\n"
    "                     NCCL sends and receives included\n"
    "  --kernel-times FILE  cuda, one process: after the last step, time\n"
    "                     each scheduled instruction's calls alone (a CUDA\n"
    "                     graph of 20 copies, replayed) and write them as\n"
    "                     JSON (docs/Cuda.md, \"Kernel times\"); the\n"
    "                     buffers are overwritten, so --save runs before it\n"
    "  --nccl-timeout S   cuda, one process per GPU: a step whose streams or\n"
    "                     NCCL calls make no progress for S seconds (default\n"
    "                     300), or an NCCL error, aborts every rank with a\n"
    "                     message naming the rank, peer and instruction\n"
    "  --report FILE      write a JSON report (loss, time, memory, bytes)\n"
    "  --save FILE        write the trained weights into the plan's ONNX model,\n"
    "                     and the optimizer state and step count next to it\n"
    "                     (FILE.tofu-state-<checksum>)\n"
    "  --save-external-data  --save the weights as ONNX external data\n"
    "                     (FILE.data-<checksum>; automatic above 1 GiB)\n"
    "  --resume FILE      continue training from a model written by --save:\n"
    "                     its weights, optimizer state and step count\n"
    "  --dump DIR         write step-1 inputs, gradients and initial params as .npy\n"
    "                     (step N > 1: inputs and gradients in DIR/stepN/);\n"
    "                     cuda: each buffer copied to the host right after\n"
    "                     its last write, every step issued eagerly\n"
    "  --dump-plan        print the plan summary and exit\n"
    "  --kernels K        native (default: native kernels first, the TDL\n"
    "                     expression interpreter for the rest) or interpreter\n"
    "                     (every op that carries a TDL program is\n"
    "                     interpreted);\n"
    "                     cuda: native only, and it lists what runs each op\n"
    "                     (generated kernels, cuBLAS, cuDNN, copies)\n"
    "  --cpu-schedule S   auto (default: time both in the first steps, keep\n"
    "                     the faster), concurrent (virtual devices side by\n"
    "                     side on the threads) or in-order (one instruction\n"
    "                     at a time, each kernel on all threads); the\n"
    "                     results are the same\n"
    "  --trace FILE       write a Chrome/Perfetto timeline (trace-event JSON:\n"
    "                     one process per device, tracks 'compute' and\n"
    "                     'communication', one event per instruction run,\n"
    "                     fetch/reduce events carry the bytes received);\n"
    "                     open it in ui.perfetto.dev or chrome://tracing;\n"
    "                     cuda: cudaEvents around each instruction's calls,\n"
    "                     every step issued eagerly (no CUDA graph)\n"
    "  --data DIR         feed inputs and labels from .npy files instead of\n"
    "                     synthetic data: DIR/batch_<i>/<input>.npy, i = 0, 1,\n"
    "                     ... ('/' in a name becomes '_'), each with the\n"
    "                     input's full shape and dtype (float32 '<f4', int64\n"
    "                     '<i8', bool '|b1'); step s uses batch s mod the\n"
    "                     number of batches\n"
    "  --quiet            print no per-step lines\n"
    "  --comm-timeout S   one process per device (mpirun -np k, or the torchrun\n"
    "                     environment RANK, WORLD_SIZE, MASTER_ADDR,\n"
    "                     MASTER_PORT): a rank that waits S seconds for a\n"
    "                     message without progress ends the run with an error\n"
    "                     (default 300)\n";

/// "rank r: " in front of errors when running one process per device.
std::string gRankPrefix;

int fail(const std::string &msg) {
  std::fprintf(stderr, "tofu-run: error: %s%s\n", gRankPrefix.c_str(),
               tofu::runtime::printableLine(msg).c_str());
  return 1;
}

struct Options {
  std::string planPath, backend = "auto", reportPath, savePath, dumpDir;
  std::string tracePath, dataDir, resumePath;
  std::string kernelTimesPath; ///< --kernel-times FILE (cuda)
  bool saveExternalData = false;
  std::string kernels = "native";
  bool kernelsGiven = false; ///< --kernels on the command line
  std::string cpuSchedule = "auto";
  int64_t steps = 10;
  bool dumpPlan = false, quiet = false;
  int32_t devices = 0; ///< --devices (0 = one GPU per plan device)
  bool noCudaGraph = false, dumpCudaSchedule = false;
  /// --ranks W --rank R with --dump-cuda-schedule (0 = one process).
  int32_t dumpRanks = 0, dumpRank = -1;
  double ncclTimeout = 300;
  bool ncclTimeoutGiven = false;
  double commTimeout = ProcessGroup::kDefaultTimeoutSeconds;
  /// --test-fail R:N[:stall] (for failure tests, not in --help): rank R
  /// dies (or stalls) after running N instructions.
  int testFailRank = -1;
  int64_t testFailAfter = 0;
  bool testFailStall = false;
};

std::string parseTestFail(const std::string &v, Options &opts) {
  int rank = -1;
  long long after = -1;
  char mode[16] = "";
  int n = std::sscanf(v.c_str(), "%d:%lld:%15s", &rank, &after, mode);
  if (n < 2 || rank < 0 || after < 0 ||
      (n == 3 && std::string(mode) != "stall"))
    return "--test-fail expects RANK:N or RANK:N:stall, got '" + v + "'";
  opts.testFailRank = rank;
  opts.testFailAfter = after;
  opts.testFailStall = n == 3;
  return "";
}

/// The CUDA section in --dump-plan: architecture, kernels by kind, launches.
void printCudaSummary(const tofu::plan::CudaModule &cuda) {
  if (cuda.arch.empty())
    return;
  std::map<std::string, int> kinds;
  for (const tofu::plan::CudaKernel &k : cuda.kernels)
    ++kinds[k.kind];
  std::string byKind;
  for (const auto &[kind, n] : kinds)
    byKind += (byKind.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
  std::printf("CUDA kernels for %s: %zu (%s), %zu launches, cubin %zu bytes "
              "(%s)\n",
              cuda.arch.c_str(), cuda.kernels.size(),
              byKind.empty() ? "none" : byKind.c_str(), cuda.launches.size(),
              cuda.cubin.size(), cuda.compiler.c_str());
  for (const tofu::plan::CudaKernel &k : cuda.kernels)
    std::printf("  %-32s %-18s %s\n", k.name.c_str(), k.kind.c_str(),
                k.ops.c_str());
}

std::string parseArgs(int argc, char **argv, Options &opts) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string &out) -> std::string {
      if (i + 1 >= argc)
        return "option " + a + " needs a value";
      out = argv[++i];
      return "";
    };
    /// The next argument as an integer in [lo, hi]; `expects` says what
    /// the option takes in the error.
    auto integerValue = [&](long long lo, long long hi, const char *expects,
                            long long &out) -> std::string {
      std::string v;
      if (std::string err = value(v); !err.empty())
        return err;
      char *end = nullptr;
      errno = 0;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || errno != 0 || n < lo || n > hi)
        return a + " expects " + expects + ", got '" + v + "'";
      out = n;
      return "";
    };
    /// The next argument as a path: never empty (an empty path would write
    /// "" or read the working directory).
    auto pathValue = [&](std::string &out) -> std::string {
      if (std::string err = value(out); !err.empty())
        return err;
      if (out.empty())
        return a + " expects a path, got an empty one";
      return "";
    };
    /// The next argument as an output file path (AtomicFile.h): a regular
    /// file or a new path, or, where `special` allows, a character device
    /// or a FIFO written directly.
    auto outputValue = [&](std::string &out, bool special) -> std::string {
      if (std::string err = pathValue(out); !err.empty())
        return err;
      std::string kind = tofu::outputPathKind(out);
      if (kind == "direct" && !special)
        return a + " '" + out + "' is a special file (a device or a FIFO); " +
               a + " writes companion files next to its output: give a "
               "regular file path";
      if (!kind.empty() && kind != "direct")
        return a + ": " + kind;
      return "";
    };
    /// The next argument as seconds in (0, max].
    auto secondsValue = [&](double max, double &out) -> std::string {
      std::string v;
      if (std::string err = value(v); !err.empty())
        return err;
      char *end = nullptr;
      double t = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(t > 0) || t > max)
        return a + " expects seconds > 0, got '" + v + "'";
      out = t;
      return "";
    };
    std::string err;
    long long n = 0;
    if (a == "--steps") {
      if (!(err = integerValue(1, LLONG_MAX, "a positive integer", n)).empty())
        return err;
      opts.steps = n;
    } else if (a == "--backend") {
      if (!(err = value(opts.backend)).empty())
        return err;
      if (opts.backend != "auto" && opts.backend != "cpu" &&
          opts.backend != "cuda")
        return "--backend expects auto, cpu or cuda, got '" + opts.backend +
               "'";
    } else if (a == "--kernels") {
      if (!(err = value(opts.kernels)).empty())
        return err;
      opts.kernelsGiven = true;
      if (opts.kernels != "native" && opts.kernels != "interpreter")
        return "--kernels expects native or interpreter, got '" +
               opts.kernels + "'";
    } else if (a == "--cpu-schedule") {
      if (!(err = value(opts.cpuSchedule)).empty())
        return err;
      if (opts.cpuSchedule != "auto" && opts.cpuSchedule != "concurrent" &&
          opts.cpuSchedule != "in-order")
        return "--cpu-schedule expects auto, concurrent or in-order, got '" +
               opts.cpuSchedule + "'";
    } else if (a == "--comm-timeout") {
      if (!(err = secondsValue(1e6, opts.commTimeout)).empty())
        return err;
    } else if (a == "--test-fail") {
      std::string v;
      if (!(err = value(v)).empty())
        return err;
      if (!(err = parseTestFail(v, opts)).empty())
        return err;
    } else if (a == "--report") {
      if (!(err = outputValue(opts.reportPath, true)).empty())
        return err;
    } else if (a == "--save") {
      if (!(err = outputValue(opts.savePath, false)).empty())
        return err;
    } else if (a == "--save-external-data") {
      opts.saveExternalData = true;
    } else if (a == "--resume") {
      if (!(err = pathValue(opts.resumePath)).empty())
        return err;
    } else if (a == "--data") {
      if (!(err = pathValue(opts.dataDir)).empty())
        return err;
    } else if (a == "--trace") {
      if (!(err = outputValue(opts.tracePath, true)).empty())
        return err;
    } else if (a == "--kernel-times") {
      if (!(err = outputValue(opts.kernelTimesPath, true)).empty())
        return err;
    } else if (a == "--dump") {
      if (!(err = pathValue(opts.dumpDir)).empty())
        return err;
    } else if (a == "--dump-plan") {
      opts.dumpPlan = true;
    } else if (a == "--devices") {
      if (!(err = integerValue(1, 4096, "a positive number of GPUs", n))
               .empty())
        return err;
      opts.devices = static_cast<int32_t>(n);
    } else if (a == "--no-cuda-graph") {
      opts.noCudaGraph = true;
    } else if (a == "--dump-cuda-schedule") {
      opts.dumpCudaSchedule = true;
    } else if (a == "--ranks") {
      if (!(err = integerValue(1, 65536, "a positive number of processes", n))
               .empty())
        return err;
      opts.dumpRanks = static_cast<int32_t>(n);
    } else if (a == "--rank") {
      if (!(err = integerValue(0, 65536, "a rank >= 0", n)).empty())
        return err;
      opts.dumpRank = static_cast<int32_t>(n);
    } else if (a == "--nccl-timeout") {
      if (!(err = secondsValue(1e9, opts.ncclTimeout)).empty())
        return err;
      opts.ncclTimeoutGiven = true;
    } else if (a == "--quiet") {
      opts.quiet = true;
    } else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (!a.empty() && a[0] == '-') {
      return "unknown option '" + a + "' (see tofu-run --help)";
    } else if (opts.planPath.empty()) {
      opts.planPath = a;
    } else {
      return "more than one plan file given ('" + opts.planPath + "' and '" +
             a + "')";
    }
  }
  if (opts.planPath.empty())
    return "no plan file given (usage: tofu-run plan.bin [options]; see "
           "--help)";
  if ((opts.dumpRanks || opts.dumpRank >= 0) &&
      !(opts.dumpCudaSchedule && opts.dumpRanks && opts.dumpRank >= 0))
    return "--ranks W and --rank R go together, with --dump-cuda-schedule "
           "(the schedule of rank R of W processes)";
  if (opts.dumpRanks && opts.dumpRank >= opts.dumpRanks)
    return "--rank " + std::to_string(opts.dumpRank) + " is not below --ranks " +
           std::to_string(opts.dumpRanks);
  if (opts.dumpRanks && opts.devices)
    return "--devices does not apply with --ranks (each process runs one GPU)";
  if (!opts.kernelTimesPath.empty() && opts.backend != "cuda")
    return "--kernel-times applies to --backend cuda only (on the CPU "
           "backend, --trace FILE times every instruction)";
  if (opts.ncclTimeoutGiven && opts.backend != "cuda")
    return "--nccl-timeout applies to --backend cuda only";
  if ((opts.devices || opts.noCudaGraph) && opts.backend != "cuda" &&
      !opts.dumpCudaSchedule)
    return std::string(opts.devices ? "--devices" : "--no-cuda-graph") +
           " applies to --backend cuda only";
  return "";
}

std::string sanitize(std::string name) {
  for (char &c : name)
    if (c == '/')
      c = '_';
  return name;
}

/// The name a Param is known by in --save and --dump files.
std::string paramLabel(const TensorInfo &t) {
  return t.paramName.empty() ? t.name : t.paramName;
}

/// Whether --dump writes `t` after each step (inputs, labels and the full
/// gradients of parameters).
bool dumpedEachStep(const TensorInfo &t) {
  return t.role == TensorRole::Input || t.role == TensorRole::Label ||
         t.gradientOf >= 0;
}

/// Watches the owned buffers of every tensor that --dump writes from a step,
/// on every device, or on `onlyDevice` alone when it is >= 0.
void watchDumped(const Plan &plan, TrainingBackend &backend, int onlyDevice) {
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    if (onlyDevice >= 0 && d != static_cast<size_t>(onlyDevice))
      continue;
    const auto &buffers = plan.devices[d].buffers;
    for (size_t b = 0; b < buffers.size(); ++b) {
      if (dumpedEachStep(plan.tensors[buffers[b].tensor]) && buffers[b].owned)
        backend.watch(static_cast<int32_t>(d), static_cast<int32_t>(b));
    }
  }
}

std::string dumpTensor(const Plan &plan, int32_t tensor,
                       const BufferSource &source, const std::string &path) {
  std::vector<uint8_t> bytes;
  if (std::string err = assembleTensor(plan, tensor, source, bytes);
      !err.empty())
    return err;
  const TensorInfo &t = plan.tensors[tensor];
  return writeNpy(path, t.dtype, t.shape, bytes);
}

/// The initial values in the plan (of the devices whose shards were read).
BufferSource initialValues(const Plan &plan) {
  return [&plan](int32_t d, int32_t b) -> const uint8_t * {
    const Buffer &buf = plan.devices[d].buffers[b];
    return buf.initSize() == buf.bytes && buf.bytes ? buf.initData()
                                                    : nullptr;
  };
}

/// Writes param.<name>.npy from the initial values in `init`.
std::string dumpInitialParams(const Plan &plan, const BufferSource &init,
                              const std::string &dir) {
  for (size_t t = 0; t < plan.tensors.size(); ++t)
    if (plan.tensors[t].role == TensorRole::Param)
      if (std::string err = dumpTensor(
              plan, static_cast<int32_t>(t), init,
              dir + "/param." + sanitize(paramLabel(plan.tensors[t])) + ".npy");
          !err.empty())
        return err;
  return "";
}

/// Writes input.<name>.npy and grad.<param>.npy from a step's snapshots.
std::string dumpStep(const Plan &plan, const BufferSource &snap,
                     const std::string &dir) {
  for (size_t t = 0; t < plan.tensors.size(); ++t) {
    const TensorInfo &info = plan.tensors[t];
    std::string file;
    if (info.role == TensorRole::Input || info.role == TensorRole::Label)
      file = "input." + sanitize(info.name);
    else if (info.gradientOf >= 0)
      file = "grad." + sanitize(paramLabel(plan.tensors[info.gradientOf]));
    else
      continue;
    if (std::string err = dumpTensor(plan, static_cast<int32_t>(t), snap,
                                     dir + "/" + file + ".npy");
        !err.empty())
      return err;
  }
  return "";
}

/// Whether each tensor is a Param that training updates.
std::vector<bool> updatedParams(const Plan &plan) {
  std::vector<bool> updated(plan.tensors.size(), false);
  for (const auto &[param, newValue] : plan.paramUpdates)
    if (param >= 0 && static_cast<size_t>(param) < updated.size())
      updated[param] = plan.tensors[param].role == TensorRole::Param;
  return updated;
}

/// The CPU backend: CpuExecutor running every device of the plan, or one of
/// them per process (mpirun, torchrun) with its transport.
class CpuTrainingBackend : public TrainingBackend {
public:
  CpuTrainingBackend(const Plan &plan, const ProcessGroup &group)
      : plan(plan), group(group), exec(plan) {}
  CpuExecutor &executor() { return exec; }

  const char *name() const override { return "cpu"; }
  void setDataSource(CpuExecutor::DataSource source) override {
    exec.setDataSource(std::move(source));
  }
  void watch(int32_t device, int32_t buffer) override {
    exec.watch(device, buffer);
  }
  void setObserver(CpuExecutor::Observer observer) override {
    exec.setObserver(std::move(observer));
  }
  std::string init() override {
    if (std::string err = exec.init(); !err.empty())
      return err;
    if (std::string err = exec.watchLoss(); !err.empty())
      return err + "; cannot report the loss";
    return "";
  }
  std::string describe() const override {
    std::string out = "devices " + std::to_string(plan.numDevices) +
                      "  tensors " + std::to_string(plan.tensors.size()) +
                      "  batch " + std::to_string(planBatchSize(plan)) +
                      "  backend cpu\n";
    if (group.multiProcess())
      out += "processes " + std::to_string(group.worldSize()) + " (" +
             group.launcher() + ", " + group.getTransport()->kind() +
             " transport), one per device\n";
    out += "planned peak bytes per device:";
    for (const DeviceProgram &d : plan.devices)
      out += " " + std::to_string(d.peakBytes);
    out += "\nplanned comm bytes per step: " + std::to_string(plan.commBytes) +
           "\n";
    return out;
  }
  std::string runStep(int64_t step) override { return exec.runStep(step); }
  std::string lastLoss(double &loss) override { return exec.lastLoss(loss); }
  std::string snapshots(BufferSource &source) override {
    source = [this](int32_t d, int32_t b) -> const uint8_t * {
      const std::vector<uint8_t> *s = exec.snapshot(d, b);
      return s ? s->data() : nullptr;
    };
    return "";
  }
  std::string currentValues(BufferSource &source) override {
    source = [this](int32_t d, int32_t b) { return exec.bufferData(d, b); };
    return "";
  }
  std::vector<uint64_t> commBytesPerDevice() const override {
    return exec.commBytesPerDevice();
  }
  std::vector<uint64_t> measuredPeakBytes() const override {
    return exec.measuredPeakBytes();
  }
  std::vector<std::pair<std::string, uint64_t>>
  interpretedInstructions() const override {
    const auto &counts = exec.interpretedInstructions();
    return {counts.begin(), counts.end()};
  }
  std::string schedule() const override {
    switch (exec.currentSchedule()) {
    case CpuExecutor::Schedule::Concurrent:
      return "concurrent";
    case CpuExecutor::Schedule::InOrder:
      return "in-order";
    case CpuExecutor::Schedule::Auto:
      return "auto (still timing)";
    }
    return "";
  }

private:
  const Plan &plan;
  const ProcessGroup &group;
  CpuExecutor exec;
};

/// --backend cuda: the CUDA executor from the plugin next to this binary
/// (runtime/cuda/CudaRunPlugin.h), loaded only here: linking cuBLAS/cuDNN
/// into tofu-run would slow every start.
std::string loadCudaBackend(const Options &opts, const Plan &plan,
                            const ProcessGroup &group,
                            std::unique_ptr<TrainingBackend> &backend) {
#ifndef TOFU_RUN_HAVE_CUDA
  (void)opts;
  (void)plan;
  (void)group;
  (void)backend;
  return "--backend cuda: this tofu-run was built without the CUDA "
         "executor (CMake found no CUDA toolkit with cuBLAS and cuDNN); "
         "rebuild on a machine with them, or use --backend cpu";
#else
  std::error_code ec;
  std::filesystem::path self =
      std::filesystem::read_symlink("/proc/self/exe", ec);
  std::string path =
      (ec ? std::filesystem::path(".") : self.parent_path()) /
      TOFU_RUN_CUDA_PLUGIN;
  // Never closed: the backend's code lives in it until the process ends.
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return std::string("--backend cuda: cannot load the CUDA executor "
                       "plugin: ") +
           dlerror() +
           "; it is built with tofu-run where CMake finds the CUDA "
           "toolkit, cuBLAS and cuDNN (use --backend cpu otherwise)";
  auto *entry = reinterpret_cast<tofu::cuda::CudaBackendFn>(
      dlsym(handle, "tofuCudaBackend"));
  if (!entry)
    return "--backend cuda: " + path + " has no entry point tofuCudaBackend";
  tofu::cuda::CudaBackendOptions options;
  options.devices = opts.devices;
  options.useGraph = !opts.noCudaGraph;
  options.listCalls = opts.kernelsGiven;
  // Under mpirun/torchrun: one process per GPU, NCCL between them.
  options.transport = group.getTransport();
  options.ncclTimeout = opts.ncclTimeout;
  std::string err;
  if (entry(plan, options, backend, err) != 0)
    return err;
  return "";
#endif
}

int run(int argc, char **argv) {
  // tofu-run --calibrate FILE: measure this machine, no plan.
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--calibrate") {
      if (argc != 3 || i != 1)
        return fail("--calibrate FILE takes no plan and no other option "
                    "(tofu-run --calibrate device.json)");
      if (std::string err = calibrateDevice(argv[2], std::cerr); !err.empty())
        return fail(err);
      return 0;
    }
  Options opts;
  if (std::string err = parseArgs(argc, argv, opts); !err.empty())
    return fail(err);

  // One process per device under mpirun or the torchrun environment. On an
  // error, `group` going out of scope without finish() ends the others.
  ProcessGroup group;
  if (std::string err = group.start(argc, argv, opts.commTimeout);
      !err.empty())
    return fail(err);
  if (group.multiProcess()) {
    gRankPrefix = "rank " + std::to_string(group.rank()) + ": ";
    group.reportTerminationBySignal();
  }
  const bool leader = group.rank() == 0; // prints, reports and saves
  if (!leader)
    opts.quiet = true;
  // An error every rank meets the same way ends them all cleanly.
  auto failOnEveryRank = [&group](const std::string &msg) {
    int rc = fail(msg);
    group.finishAfterCommonError();
    return rc;
  };

  Plan plan;
  // One process per device reads only its own weight shard (and the ONNX
  // model only where --save may need it).
  ReadOptions read;
  if (group.multiProcess() && !opts.dumpPlan) {
    read.onlyDevice = group.rank();
    read.loadModel = !opts.savePath.empty();
  }
  if (opts.dumpPlan) {
    // The summary needs neither the model nor the collectives' pieces,
    // which are k² records for a collective over k devices (GPT-3 175B at
    // k = 1024 did not fit in 24 GB with them).
    read.loadModel = false;
    read.expandCollectives = false;
    // Nor a copy of each stored program per device.
    read.sharePrograms = true;
  }
  if (std::string err = readPlan(opts.planPath, plan, read); !err.empty())
    return fail(err);

  if (opts.dumpPlan) {
    if (!leader)
      return group.finish().empty() ? 0 : 1;
    if (plan.summary.empty())
      std::printf("(the plan carries no summary)\n");
    else
      std::fputs(plan.summary.c_str(), stdout);
    if (!plan.summary.empty() && plan.summary.back() != '\n')
      std::fputc('\n', stdout);
    std::printf("stored programs: %u for %zu devices (devices of a class "
                "share their buffers and instructions)\n",
                plan.storedPrograms, plan.devices.size());
    printCudaSummary(plan.cuda);
    return group.finish().empty() ? 0 : 1;
  }
  if (opts.dumpCudaSchedule && opts.dumpRanks) {
    tofu::cuda::MultiProcessSchedule schedule;
    if (std::string err = tofu::cuda::buildMultiProcessSchedule(
            plan, opts.dumpRanks, schedule);
        !err.empty())
      return fail(err);
    if (std::string err =
            tofu::cuda::validateMultiProcessSchedule(plan, schedule);
        !err.empty())
      return fail("the multi-process CUDA schedule is wrong (a bug; report "
                  "it with the plan): " + err);
    std::fputs(
        tofu::cuda::describeRankSchedule(plan, schedule, opts.dumpRank)
            .c_str(),
        stdout);
    return 0;
  }
  if (opts.dumpCudaSchedule) {
    tofu::cuda::Schedule schedule;
    const int32_t gpus = opts.devices ? opts.devices
                                      : static_cast<int32_t>(plan.numDevices);
    if (std::string err = tofu::cuda::buildSchedule(plan, gpus, schedule);
        !err.empty())
      return fail(err);
    if (std::string err = tofu::cuda::validateSchedule(plan, schedule);
        !err.empty())
      return fail("the CUDA schedule is wrong (a bug; report it with the "
                  "plan): " + err);
    std::fputs(tofu::cuda::describeSchedule(plan, schedule).c_str(), stdout);
    return 0;
  }
  if (std::string err = group.checkWorldSize(plan.numDevices); !err.empty())
    return failOnEveryRank(err);
  if (plan.withoutWeights)
    return fail(opts.planPath +
                ": compiled without weights (--no-weights); recompile with "
                "the weights to run it");
  // Weights, optimizer state and the step counter of a saved run.
  int64_t startStep = 0;
  if (!opts.resumePath.empty())
    if (std::string err =
            resumeCheckpoint(opts.resumePath, plan, startStep);
        !err.empty())
      return failOnEveryRank(err);

  // Validate output locations before spending time on training.
  if (!opts.savePath.empty() && plan.onnxModel.empty())
    return fail("--save needs the original ONNX model, but this plan has "
                "none (its MODEL section is empty); recompile with tofuc");
  // A MODEL section that passed its checksum but does not hold the model
  // --save writes into fails now, not after the training it would lose.
  if (!opts.savePath.empty())
    if (std::string err = checkSaveModel(plan); !err.empty())
      return failOnEveryRank("--save: " + err);

  std::unique_ptr<TrainingBackend> backend;
  if (opts.backend == "cuda") {
    if (opts.testFailRank >= 0)
      return fail("--test-fail applies to one process per device (the CPU "
                  "backend under mpirun); use --backend cpu for it");
    if (opts.kernels == "interpreter")
      return fail("--kernels interpreter runs the TDL interpreter on the "
                  "host (--backend cpu); with --backend cuda every op with "
                  "a TDL program runs it compiled as a generated CUDA "
                  "kernel unless cuBLAS or cuDNN runs it; --kernels native "
                  "lists what runs each op");
    if (std::string err = loadCudaBackend(opts, plan, group, backend);
        !err.empty())
      return fail(err);
  } else {
    auto cpu = std::make_unique<CpuTrainingBackend>(plan, group);
    CpuExecutor &exec = cpu->executor();
    exec.preferInterpreter(opts.kernels == "interpreter");
    exec.setSchedule(opts.cpuSchedule == "concurrent"
                         ? CpuExecutor::Schedule::Concurrent
                     : opts.cpuSchedule == "in-order"
                         ? CpuExecutor::Schedule::InOrder
                         : CpuExecutor::Schedule::Auto);
    if (group.multiProcess())
      exec.setTransport(group.getTransport());
    if (opts.testFailRank == group.rank())
      exec.failAfter(opts.testFailAfter, opts.testFailStall);
    backend = std::move(cpu);
  }

  NpyDataset dataset(plan);
  if (!opts.dataDir.empty()) {
    if (std::string err = dataset.open(opts.dataDir); !err.empty())
      return fail(err);
    backend->setDataSource([&dataset](int32_t tensor, const Box &region,
                                      int64_t step, void *out) {
      return dataset.fill(tensor, region, step, out);
    });
  }
  if (!opts.dumpDir.empty())
    watchDumped(plan, *backend, group.multiProcess() ? group.rank() : -1);
  std::unique_ptr<TraceRecorder> trace;
  if (!opts.tracePath.empty()) {
    trace = std::make_unique<TraceRecorder>(
        plan, group.multiProcess() ? group.rank() : -1);
    backend->setObserver([&trace](const CpuExecutor::ExecutedInstr &e) {
      trace->record(e);
    });
  }
  if (std::string err = backend->init(); !err.empty())
    return fail(err);

  // One process per device: the dumped tensors' owned buffers are gathered
  // to rank 0, which writes every file.
  BufferCopies dumpGathered;
  if (!opts.dumpDir.empty()) {
    if (leader) {
      std::error_code ec;
      std::filesystem::create_directories(opts.dumpDir, ec);
      if (ec)
        return fail("cannot create dump directory '" + opts.dumpDir +
                    "': " + ec.message());
    }
    BufferSource init = initialValues(plan);
    if (group.multiProcess()) {
      const int32_t me = group.rank();
      if (std::string err = group.gatherOwnedBuffers(
              plan,
              [&plan](int32_t t) {
                return plan.tensors[t].role == TensorRole::Param;
              },
              [&init, me](int32_t b) { return init(me, b); }, dumpGathered);
          !err.empty())
        return fail("--dump: " + err);
      init = copiesSource(dumpGathered);
    }
    if (leader)
      if (std::string err = dumpInitialParams(plan, init, opts.dumpDir);
          !err.empty())
        return fail("--dump: " + err);
  }

  const int64_t batch = planBatchSize(plan);
  if (!opts.quiet) {
    std::printf("tofu-run: %s (producer '%s', partitioner '%s')\n",
                opts.planPath.c_str(), plan.producer.c_str(),
                plan.partitioner.c_str());
    std::fputs(backend->describe().c_str(), stdout);
    if (!opts.dataDir.empty())
      std::printf("data: %lld batches from %s\n",
                  static_cast<long long>(dataset.numBatches()),
                  opts.dataDir.c_str());
  }
  // One process per device: time 0 of the trace is the same moment on
  // every rank.
  if (trace && group.multiProcess()) {
    if (std::string err = group.barrier(); !err.empty())
      return fail("--trace: " + err);
    trace->restartClock();
  }

  RunReport report;
  report.devices = plan.numDevices;
  report.backend = backend->name();
  report.batchSize = batch;
  double totalSeconds = 0;
  for (int64_t s = 0; s < opts.steps; ++s) {
    const std::string stepName = "step " + std::to_string(startStep + s + 1);
    if (trace)
      trace->beginStep(s);
    auto t0 = std::chrono::steady_clock::now();
    if (std::string err = backend->runStep(startStep + s); !err.empty())
      return fail(stepName + ": " + err);
    double secs = std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - t0)
                      .count();
    totalSeconds += secs;
    double loss = 0;
    if (leader)
      if (std::string err = backend->lastLoss(loss); !err.empty())
        return fail(stepName + ": " + err);
    std::vector<uint64_t> received = backend->commBytesPerDevice();
    if (group.multiProcess())
      if (std::string err = group.gather(received[group.rank()], received);
          !err.empty())
        return fail(stepName + ": " + err);
    uint64_t stepComm = 0;
    for (uint64_t b : received)
      stepComm += b;
    report.steps.push_back({loss, secs, stepComm});
    if (!opts.quiet)
      std::printf("%s  loss %.6f  %.4f s\n", stepName.c_str(), loss, secs);
    if (!opts.dumpDir.empty()) {
      // Step 1 in DIR itself, later steps in DIR/step<N>/.
      std::string dir = opts.dumpDir;
      if (s > 0 && leader) {
        dir += "/step" + std::to_string(s + 1);
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        if (ec)
          return fail("--dump: cannot create '" + dir + "': " + ec.message());
      }
      BufferSource snap;
      if (std::string err = backend->snapshots(snap); !err.empty())
        return fail("--dump: " + err);
      if (group.multiProcess()) {
        const int32_t me = group.rank();
        if (std::string err = group.gatherOwnedBuffers(
                plan,
                [&plan](int32_t t) { return dumpedEachStep(plan.tensors[t]); },
                [&snap, me](int32_t b) { return snap(me, b); }, dumpGathered);
            !err.empty())
          return fail("--dump: " + err);
        snap = copiesSource(dumpGathered);
      }
      if (leader)
        if (std::string err = dumpStep(plan, snap, dir); !err.empty())
          return fail("--dump: " + err);
    }
  }

  report.samplesPerSecond =
      totalSeconds > 0 ? static_cast<double>(batch) * opts.steps / totalSeconds
                       : 0;
  std::vector<uint64_t> peaks = backend->measuredPeakBytes();
  std::vector<uint64_t> received = backend->commBytesPerDevice();
  if (group.multiProcess()) {
    // Each process measured its own device; rank 0 gathers them.
    if (std::string err = group.gather(peaks[group.rank()], peaks);
        !err.empty())
      return fail("gathering the report: " + err);
    if (std::string err = group.gather(received[group.rank()], received);
        !err.empty())
      return fail("gathering the report: " + err);
  }
  uint64_t receivedTotal = 0;
  for (size_t d = 0; leader && d < plan.devices.size(); ++d) {
    if (d < peaks.size())
      report.peakBytes.push_back({plan.devices[d].peakBytes, peaks[d]});
    if (d < received.size()) {
      report.commPerDevice.push_back({plan.devices[d].commBytes, received[d]});
      receivedTotal += received[d];
    }
  }
  report.commBytes = {plan.commBytes, receivedTotal};
  report.copyBytesByPath = backend->copyBytesByPath();
  report.interpretedInstructions = backend->interpretedInstructions();
  report.schedule = backend->schedule();

  if (!opts.quiet) {
    std::printf("samples/s %.1f  (%lld steps, %.4f s%s)\n",
                report.samplesPerSecond, static_cast<long long>(opts.steps),
                totalSeconds, backend->runNote().c_str());
    if (!report.peakBytes.empty()) {
      std::printf("peak bytes per device (planned/measured):");
      for (const auto &p : report.peakBytes)
        std::printf(" %llu/%llu", static_cast<unsigned long long>(p.planned),
                    static_cast<unsigned long long>(p.measured));
      std::printf("\n");
    }
    std::printf("comm bytes per step: planned %llu  measured %llu\n",
                static_cast<unsigned long long>(report.commBytes.planned),
                static_cast<unsigned long long>(report.commBytes.measured));
    std::fputs(backend->finalLines().c_str(), stdout);
    if (plan.devices.size() > 1 && !report.schedule.empty())
      std::printf("virtual devices scheduled %s (--cpu-schedule)\n",
                  report.schedule.c_str());
    if (!report.interpretedInstructions.empty()) {
      std::string ops;
      for (const auto &[kernel, count] : report.interpretedInstructions)
        ops += " " + kernel + " x" + std::to_string(count);
      std::printf("ran on the TDL expression interpreter (%s; 10-1000x "
                  "slower):%s\n",
                  opts.kernels == "interpreter"
                      ? "--kernels interpreter"
                      : "no native kernel for their configuration",
                  ops.c_str());
    }
  }
  if (leader && report.commBytes.planned != report.commBytes.measured)
    std::fprintf(stderr,
                 "tofu-run: warning: measured communication (%llu bytes per "
                 "step) differs from the plan's commBytes (%llu)\n",
                 static_cast<unsigned long long>(report.commBytes.measured),
                 static_cast<unsigned long long>(report.commBytes.planned));

  if (leader && !opts.reportPath.empty())
    if (std::string err = report.write(opts.reportPath); !err.empty())
      return fail(err);
  if (trace) {
    // One process per device: rank 0 gathers every rank's events.
    std::vector<std::string> eventLists;
    if (std::string err = group.gatherText(trace->eventsJson(), eventLists);
        !err.empty())
      return fail("--trace: gathering the events: " + err);
    if (leader)
      if (std::string err = TraceRecorder::write(
              opts.tracePath, TraceRecorder::toJson(eventLists));
          !err.empty())
        return fail("--trace: " + err);
  }
  if (!opts.savePath.empty()) {
    BufferSource live;
    if (std::string err = backend->currentValues(live); !err.empty())
      return fail("--save: " + err);
    // One process per device: rank 0 gathers the trained shards and the
    // optimizer state.
    BufferCopies gathered;
    if (group.multiProcess()) {
      std::vector<bool> updated = updatedParams(plan);
      const int32_t me = group.rank();
      if (std::string err = group.gatherOwnedBuffers(
              plan,
              [&updated, &plan](int32_t t) {
                return updated[t] || plan.tensors[t].role == TensorRole::State;
              },
              [&live, me](int32_t b) { return live(me, b); }, gathered);
          !err.empty())
        return fail("--save: " + err);
      live = copiesSource(gathered);
    }
    if (leader)
      if (std::string err = saveCheckpoint(plan, live, startStep + opts.steps,
                                           opts.savePath,
                                           opts.saveExternalData);
          !err.empty())
        return fail("--save: " + err);
    if (!opts.quiet)
      std::printf("saved trained model to %s\n", opts.savePath.c_str());
  }
  if (!opts.kernelTimesPath.empty()) {
    if (std::string err = backend->writeKernelTimes(opts.kernelTimesPath);
        !err.empty())
      return fail(err);
    if (!opts.quiet)
      std::printf("kernel times written to %s\n",
                  opts.kernelTimesPath.c_str());
  }
  if (std::string err = group.finish(); !err.empty())
    return fail(err);
  return 0;
}
} // namespace

/// The CPU kernels of a build for x86-64-v3 (runtime/CMakeLists.txt,
/// TOFU_RUNTIME_ARCH) execute AVX2 and FMA instructions: on a CPU without
/// them, refuse before the first kernel rather than die of SIGILL in it.
static bool cpuRunsTheKernels() {
#if defined(TOFU_RUNTIME_X86_64_V3) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("bmi2");
#else
  return true;
#endif
}

int main(int argc, char **argv) {
  if (!cpuRunsTheKernels())
    return fail("this tofu-run's CPU kernels were built for x86-64-v3 (AVX2, "
                "FMA, BMI2), which this CPU lacks; rebuild with cmake "
                "-DTOFU_RUNTIME_ARCH=baseline");
  try {
    return run(argc, argv);
  } catch (const std::bad_alloc &) {
    return fail("out of memory");
  } catch (const std::exception &e) {
    return fail(std::string("internal error: ") + e.what());
  } catch (...) {
    return fail("internal error (unknown exception)");
  }
}
