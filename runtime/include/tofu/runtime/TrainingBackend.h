//===- TrainingBackend.h - What tofu-run's step loop drives -----*- C++ -*-===//
//
// tofu-run has one step loop (batch feeding, --resume, losses, --dump,
// --trace, --save, the report) for every backend. A backend runs the plan's
// training steps and answers what the loop asks after each: the loss, the
// buffers --dump and --save assemble into whole tensors (TensorAssembly.h),
// the bytes received per device and the memory it measured. The CPU backend
// (CpuExecutor) implements it in tofu-run; the CUDA backend in the plugin
// libtofu_cuda_run.so (runtime/cuda/CudaRunPlugin.h).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_TRAININGBACKEND_H
#define TOFU_RUNTIME_TRAININGBACKEND_H

#include "tofu/runtime/CpuBackend.h"
#include "tofu/runtime/TensorAssembly.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tofu::runtime {

/// The plan's batch size (its Input's first dimension when the plan does
/// not say).
inline int64_t planBatchSize(const plan::Plan &plan) {
  if (plan.batchSize > 0)
    return plan.batchSize;
  for (const plan::TensorInfo &t : plan.tensors)
    if (t.role == plan::TensorRole::Input && !t.shape.empty())
      return t.shape[0];
  return 0;
}

class TrainingBackend {
public:
  virtual ~TrainingBackend() = default;

  /// "cpu" or "cuda" (the report's `backend`).
  virtual const char *name() const = 0;

  /// Where Input and Label buffers come from (CpuExecutor::DataSource's
  /// contract); default: the synthetic batches. Call before `init`.
  virtual void setDataSource(CpuExecutor::DataSource source) = 0;
  /// Keeps a copy of buffer `buffer` of device `device` as it is right
  /// after its last write of each step (--dump). Call before `init`.
  virtual void watch(int32_t device, int32_t buffer) = 0;
  /// Reports every instruction run, with its start and end (--trace).
  /// Call before `init`.
  virtual void setObserver(CpuExecutor::Observer observer) = 0;

  /// Prepares the devices and loads the initial values.
  virtual std::string init() = 0;
  /// The lines tofu-run prints after its first line: devices, memory.
  virtual std::string describe() const = 0;
  /// Runs training step `step` (0-based) and waits for it.
  virtual std::string runStep(int64_t step) = 0;
  virtual std::string lastLoss(double &loss) = 0;

  /// The watched buffers as they were after the last step's writes.
  virtual std::string snapshots(BufferSource &source) = 0;
  /// The current contents of every buffer (parameters and optimizer state
  /// after the last step); valid until the next call on the backend.
  virtual std::string currentValues(BufferSource &source) = 0;

  /// Bytes each device received from other devices in the last step.
  virtual std::vector<uint64_t> commBytesPerDevice() const = 0;
  /// Device memory per plan device, measured (what each backend measures
  /// is in its documentation).
  virtual std::vector<uint64_t> measuredPeakBytes() const = 0;
  /// Bytes copied per step by path, for the report (none by default).
  virtual std::vector<std::pair<std::string, uint64_t>>
  copyBytesByPath() const {
    return {};
  }
  /// Printed at the end of the samples/s line ("" for none).
  virtual std::string runNote() const { return ""; }
  /// How the backend scheduled the virtual devices, for the report ("" when
  /// it has no choice to report).
  virtual std::string schedule() const { return ""; }
  /// Compute instructions that ran on the CPU expression interpreter instead
  /// of a native kernel, in all steps so far: (kernel name, count), by name.
  /// Empty where every op ran native (and on backends without one).
  virtual std::vector<std::pair<std::string, uint64_t>>
  interpretedInstructions() const {
    return {};
  }
  /// Extra lines for the end of the run ("" for none).
  virtual std::string finalLines() const { return ""; }
  /// --kernel-times FILE, after the run's last step: times the step's calls
  /// alone and writes them as JSON (docs/Cuda.md, "Kernel times"). Only the
  /// CUDA backend has it (the CPU backend's --trace already times every
  /// instruction as it runs, one at a time).
  virtual std::string writeKernelTimes(const std::string &path) {
    (void)path;
    return "--kernel-times applies to --backend cuda only (on the CPU "
           "backend, --trace FILE times every instruction)";
  }
};

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_TRAININGBACKEND_H
