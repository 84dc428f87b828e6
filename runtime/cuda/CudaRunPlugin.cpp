//===- CudaRunPlugin.cpp - tofu-run's --backend cuda, as a plugin ---------===//
//
// See CudaRunPlugin.h. CudaExecutor behind the TrainingBackend interface.
//
//===----------------------------------------------------------------------===//

#include "CudaRunPlugin.h"

#include "CudaCallSummary.h"
#include "CudaDeviceState.h"
#include "CudaExecutor.h"
#include "CudaSchedule.h"
#include "CudaStepObserver.h"
#include "CudaTraffic.h"

#include "tofu/runtime/AtomicFile.h"
#include "tofu/runtime/JsonQuoted.h"

#include <cstdio>
#include <cstdlib>
#include <ostream>

using namespace tofu::cuda;
using namespace tofu::plan;
using namespace tofu::runtime;

namespace {

/// The node-local rank (the GPU this process uses): LOCAL_RANK (torchrun),
/// OMPI_COMM_WORLD_LOCAL_RANK (Open MPI), else the global rank (one node).
int32_t localRankOf(int32_t rank) {
  for (const char *name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"})
    if (const char *v = std::getenv(name); v && *v)
      return static_cast<int32_t>(std::atoi(v));
  return rank;
}

/// What runs `op`, for --kernel-times: the generated kernel's name, the
/// cuBLAS or cuDNN call, or the runtime's copy.
std::string callName(const Plan &plan, const CudaOp &op) {
  switch (op.kind) {
  case CudaOp::Kind::Kernel:
    return plan.cuda.kernels[plan.cuda.launches[op.launch].kernel].name;
  case CudaOp::Kind::Gemm:
    return gemmCallName(op);
  case CudaOp::Kind::GemmBias:
    return "runtime:gemm-bias";
  case CudaOp::Kind::Conv:
    return op.convDirection == 0   ? "cudnnConvolutionForward"
           : op.convDirection == 1 ? "cudnnConvolutionBackwardData"
                                   : "cudnnConvolutionBackwardFilter";
  case CudaOp::Kind::Copy:
    return "cudaMemcpyAsync";
  case CudaOp::Kind::BoxCopy:
    return "runtime:box-copy";
  case CudaOp::Kind::BoxAdd:
    return "runtime:box-add";
  case CudaOp::Kind::Zero:
    return "cudaMemsetAsync";
  case CudaOp::Kind::SaveLoss:
    return "runtime:save-loss";
  case CudaOp::Kind::Send:
    return "ncclSend";
  case CudaOp::Kind::Recv:
    return "ncclRecv";
  case CudaOp::Kind::MultiFetch:
    return "runtime:multi-fetch";
  case CudaOp::Kind::MultiReduce:
    return "runtime:multi-reduce";
  case CudaOp::Kind::Pool:
    return op.pool.backward ? "cudnnPoolingBackward" : "cudnnPoolingForward";
  case CudaOp::Kind::BatchNorm:
    return "cudnn:batch-norm";
  }
  return "unknown";
}

class CudaTrainingBackend : public TrainingBackend {
public:
  CudaTrainingBackend(const Plan &plan, const CudaBackendOptions &options)
      : plan(plan), options(options), exec(plan, runOptions(options)),
        observer(plan, exec) {}

  const char *name() const override { return "cuda"; }
  void setDataSource(CpuExecutor::DataSource source) override {
    exec.setDataSource(std::move(source));
  }
  void watch(int32_t device, int32_t buffer) override {
    observer.watch(device, buffer);
  }
  void setObserver(CpuExecutor::Observer fn) override {
    observer.setObserver(std::move(fn));
  }
  std::string init() override {
    if (options.transport && options.devices)
      return "--devices does not apply to one process per GPU "
             "(mpirun/torchrun): each rank runs its plan devices on its own "
             "GPU";
    if (std::string err = exec.init(); !err.empty())
      return err;
    traffic = countTraffic(plan, exec.schedule());
    return observer.prepare();
  }
  std::string describe() const override {
    const DeviceMapping &mapping = exec.schedule().mapping;
    std::string out =
        "devices " + std::to_string(plan.numDevices) + " on " +
        std::to_string(mapping.numGpus) +
        (mapping.numGpus == 1 ? " GPU" : " GPUs") +
        (options.transport ? " (one process each, NCCL)" : "") + "  tensors " +
        std::to_string(plan.tensors.size()) + "  batch " +
        std::to_string(planBatchSize(plan)) + "  backend cuda (" +
        (observer.active()  ? "eager: --dump/--trace act after each call"
         : options.useGraph ? "CUDA graph from step 2"
                            : "eager") +
        ")\n";
    out += "allocated bytes per GPU:"; // slices + MultiFetch tables
    for (size_t g = 0; g < mapping.gpuBytes.size(); ++g)
      out += " " + std::to_string(mapping.gpuBytes[g] +
                                  exec.schedule().tableBytes[g]);
    out += "\n";
    if (options.listCalls)
      out += describeCalls(plan, exec.schedule());
    return out;
  }
  std::string runStep(int64_t step) override {
    if (std::string err = exec.runStep(step); !err.empty())
      return err;
    return observer.finishStep();
  }
  std::string lastLoss(double &loss) override { return exec.lastLoss(loss); }
  std::string snapshots(BufferSource &source) override {
    source = observer.snapshots();
    return "";
  }
  std::string currentValues(BufferSource &source) override {
    // Parameters and optimizer state, copied back from the GPUs.
    if (std::string err = saved.read(
            plan, exec.schedule().mapping,
            [this](int32_t t) { return savedTensor(plan.tensors[t]); },
            [this](int32_t gpu, uint64_t offset, uint64_t bytes,
                   uint8_t *out) {
              return exec.copyToHost(gpu, offset, bytes, out);
            });
        !err.empty())
      return err;
    source = saved.source();
    return "";
  }
  std::vector<uint64_t> commBytesPerDevice() const override {
    return traffic.receivedPerDevice;
  }
  std::vector<uint64_t> measuredPeakBytes() const override {
    // What the executor allocated for each plan device: its slice of its
    // GPU's allocation (planned arena, Reduce scratch, alignment) and the
    // cuDNN workspace of its ConvRunner.
    std::vector<uint64_t> bytes = exec.workspaceBytes();
    for (size_t d = 0; d < bytes.size(); ++d)
      bytes[d] += exec.schedule().mapping.devices[d].sliceBytes;
    return bytes;
  }
  std::vector<std::pair<std::string, uint64_t>>
  copyBytesByPath() const override {
    std::vector<std::pair<std::string, uint64_t>> out;
    for (size_t p = 0; p < traffic.byPath.size(); ++p)
      out.push_back(
          {copyPathName(static_cast<CopyPath>(p)), traffic.byPath[p]});
    return out;
  }
  std::string runNote() const override {
    return ", " + std::to_string(exec.graphReplays()) +
           " replayed from the CUDA graph";
  }
  std::string finalLines() const override {
    return describeTraffic(traffic) + "\n";
  }
  std::string writeKernelTimes(const std::string &path) override {
    // 20 copies a graph, 5 timed launches: 100 issues per entry, enough
    // for microsecond kernels to dwarf the two events' resolution.
    constexpr int32_t kRepeats = 20, kLaunches = 5;
    std::vector<CudaExecutor::EntryTime> times;
    if (std::string err = exec.timeEntries(kRepeats, kLaunches, times);
        !err.empty())
      return "--kernel-times: " + err;
    int count = 0;
    std::string gpu = describeGpus(count);
    if (!gpu.empty() && gpu.back() == '\n')
      gpu.pop_back();
    const Schedule &schedule = exec.schedule();
    return tofu::writeFileAtomically(path, [&](std::ostream &out) {
      out << "{\n  \"format\": \"tofu-kernel-times/1\",\n  \"gpus\": "
          << jsonQuoted(gpu) << ",\n  \"repeats\": " << kRepeats
          << ",\n  \"launches\": " << kLaunches << ",\n  \"entries\": [";
      for (size_t t = 0; t < times.size(); ++t) {
        const ScheduledInstr &e = schedule.instrs[times[t].entry];
        const auto &instrs = plan.devices[e.device].instrs;
        std::string kernels, ops, calls;
        for (int32_t i = e.firstIndex; i <= e.index; ++i) {
          const Instr &in = instrs[i];
          std::string kernel = in.kind == Instr::Kind::Compute ? in.kernel
                               : in.kind == Instr::Kind::Fetch ? "Fetch"
                                                               : "Reduce";
          kernels += (i > e.firstIndex ? ", " : "") + jsonQuoted(kernel);
          ops += (i > e.firstIndex ? ", " : "") + jsonQuoted(in.op);
        }
        for (size_t o = 0; o < e.ops.size(); ++o)
          calls += (o ? ", " : "") + jsonQuoted(callName(plan, e.ops[o]));
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%.4e", times[t].seconds);
        out << (t ? ",\n" : "\n") << "    {\"device\": " << e.device
            << ", \"first_index\": " << e.firstIndex
            << ", \"index\": " << e.index << ", \"kernels\": [" << kernels
            << "], \"ops\": [" << ops << "], \"calls\": [" << calls
            << "], \"seconds\": " << seconds << "}";
      }
      out << "\n  ]\n}\n";
    });
  }

private:
  static CudaRunOptions runOptions(const CudaBackendOptions &options) {
    CudaRunOptions run;
    run.numGpus = options.devices;
    run.useGraph = options.useGraph;
    if (options.transport) {
      run.transport = options.transport;
      run.localRank = localRankOf(options.transport->rank());
      run.ncclTimeout = options.ncclTimeout;
    }
    return run;
  }

  const Plan &plan;
  CudaBackendOptions options;
  CudaExecutor exec;
  CudaStepObserver observer;
  ScheduleTraffic traffic;
  HostBufferCopies saved;
};

} // namespace

extern "C" int tofuCudaBackend(const Plan &plan,
                               const CudaBackendOptions &options,
                               std::unique_ptr<TrainingBackend> &backend,
                               std::string &error) {
  try {
    backend = std::make_unique<CudaTrainingBackend>(plan, options);
    return 0;
  } catch (const std::exception &e) {
    error = std::string("--backend cuda: ") + e.what();
    return 1;
  }
}
