//===- CudaRunPlugin.cpp - tofu-run's --backend cuda, as a plugin ---------===//
//
// See CudaRunPlugin.h. CudaExecutor behind the TrainingBackend interface.
//
//===----------------------------------------------------------------------===//

#include "CudaRunPlugin.h"

#include "CudaExecutor.h"
#include "CudaSchedule.h"
#include "CudaTraffic.h"

using namespace tofu::cuda;
using namespace tofu::plan;
using namespace tofu::runtime;

namespace {

class CudaTrainingBackend : public TrainingBackend {
public:
  CudaTrainingBackend(const Plan &plan, const CudaBackendOptions &options)
      : plan(plan), options(options), exec(plan, runOptions(options)) {}

  const char *name() const override { return "cuda"; }
  void setDataSource(CpuExecutor::DataSource source) override {
    exec.setDataSource(std::move(source));
  }
  void watch(int32_t, int32_t) override {}
  void setObserver(CpuExecutor::Observer) override {}
  std::string init() override {
    if (std::string err = exec.init(); !err.empty())
      return err;
    traffic = countTraffic(plan, exec.schedule());
    return "";
  }
  std::string describe() const override {
    const DeviceMapping &mapping = exec.schedule().mapping;
    std::string out =
        "devices " + std::to_string(plan.numDevices) + " on " +
        std::to_string(mapping.numGpus) +
        (mapping.numGpus == 1 ? " GPU" : " GPUs") + "  tensors " +
        std::to_string(plan.tensors.size()) + "  batch " +
        std::to_string(planBatchSize(plan)) + "  backend cuda (" +
        (options.useGraph ? "CUDA graph from step 2" : "eager") + ")\n";
    out += "allocated bytes per GPU:"; // slices + MultiFetch tables
    for (size_t g = 0; g < mapping.gpuBytes.size(); ++g)
      out += " " + std::to_string(mapping.gpuBytes[g] +
                                  exec.schedule().tableBytes[g]);
    return out + "\n";
  }
  std::string runStep(int64_t step) override { return exec.runStep(step); }
  std::string lastLoss(double &loss) override { return exec.lastLoss(loss); }
  std::string snapshots(BufferSource &) override {
    return "not supported with --backend cuda yet";
  }
  std::string currentValues(BufferSource &) override {
    return "not supported with --backend cuda yet";
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
    return run;
  }

  const Plan &plan;
  CudaBackendOptions options;
  CudaExecutor exec;
  ScheduleTraffic traffic;
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
