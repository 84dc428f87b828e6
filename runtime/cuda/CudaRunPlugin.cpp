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

#include <cstdlib>

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
