//===- CpuBackend.h - Execute a k-device plan on the CPU ---------*- C++ -*-===//
//
// Runs the k device programs of a plan as k virtual devices in one process.
// Each device owns one arena of `peakBytes` bytes; buffers live at their
// static offsets. Parameter buffers are initialized from their `init` bytes.
// A step feeds the synthetic batch into every Input/Label buffer, then runs
// the instructions of all devices merged by increasing `seq` (ties: lower
// device first, then program order). Fetch/Reduce pieces on another device
// are communication and are counted in bytes (elements x element size).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CPUBACKEND_H
#define TOFU_RUNTIME_CPUBACKEND_H

#include "tofu/runtime/ComputeKernel.h"
#include "tofu/runtime/Kernels.h"
#include "tofu/runtime/Plan.h"
#include "tofu/runtime/SyntheticData.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tofu::runtime {

class CpuExecutor {
public:
  explicit CpuExecutor(const plan::Plan &plan);
  ~CpuExecutor();

  /// Whether Compute instructions that carry expression programs run on the
  /// interpreter even when a native kernel exists (a cross-check of the
  /// kernels against their TDL specs; slower). Default: native first.
  void preferInterpreter(bool prefer) { interpretPrograms = prefer; }

  /// Where Input/Label values come from: writes box `region` (global
  /// coordinates) of tensor `tensor` for training step `step` (0-based)
  /// densely to `out`, or returns an error. Default (unset): the synthetic
  /// batch step % SyntheticData::kNumBatches.
  using DataSource = std::function<std::string(
      int32_t tensor, const plan::Box &region, int64_t step, void *out)>;
  void setDataSource(DataSource source) { dataSource = std::move(source); }

  /// One instruction that ran during a step (reported to the observer).
  struct ExecutedInstr {
    int32_t device = 0;
    size_t index = 0; ///< position in the device program
    const plan::Instr *instr = nullptr;
    std::chrono::steady_clock::time_point start, end;
    /// Fetch/Reduce: bytes received from other devices (0 for Compute).
    uint64_t remoteBytes = 0;
  };
  /// Called after every instruction that did work (Compute instructions
  /// whose output regions are all empty are skipped and not reported).
  using Observer = std::function<void(const ExecutedInstr &)>;
  void setObserver(Observer fn) { observer = std::move(fn); }

  /// Allocates the arenas, loads the initial parameter values and resolves
  /// every kernel. Must succeed before `runStep`.
  std::string init();

  /// Runs training step `step` (0-based) on the data source's batch for it
  /// (default: synthetic batch step % SyntheticData::kNumBatches). Random
  /// ops (Dropout's mask) draw step-specific values: the same on every
  /// device, new every step.
  std::string runStep(int64_t step);

  /// Records a copy of buffer `buffer` of device `device` right after every
  /// write to it during a step (the feed, or an instruction); the last write
  /// of the step wins. Static memory planning may reuse a buffer's bytes
  /// later in the step, so this is how values are read after a step.
  void watch(int32_t device, int32_t buffer);
  /// The snapshot of a watched buffer from the last step, or null if the
  /// buffer was not written during it.
  const std::vector<uint8_t> *snapshot(int32_t device, int32_t buffer) const;

  /// Current contents of a buffer (valid for persistent buffers such as
  /// parameters between steps).
  const uint8_t *bufferData(int32_t device, int32_t buffer) const;

  /// The loss of the last step: the Loss tensor's owned buffer on device 0
  /// after its last write. Call `watchLoss()` before the step.
  std::string watchLoss();
  std::string lastLoss(double &loss) const;

  /// Bytes received by each device from other devices during the last step.
  const std::vector<uint64_t> &commBytesPerDevice() const { return commBytes; }
  uint64_t commBytesTotal() const;
  /// Highest arena byte (exclusive end) touched on each device so far.
  const std::vector<uint64_t> &measuredPeakBytes() const { return peakTouched; }

private:
  struct Prepared;
  std::string prepare();
  std::string execute(const Prepared &p);
  std::string feed(int64_t step);
  void touch(int32_t device, int32_t buffer);
  void afterWrite(int32_t device, int32_t buffer);

  const plan::Plan &plan;
  SyntheticData data;
  std::vector<std::vector<uint8_t>> arenas;
  std::vector<Prepared> program; ///< all devices, merged by seq
  std::vector<uint64_t> commBytes, peakTouched;
  struct Snapshot {
    std::vector<uint8_t> bytes;
    bool written = false;
  };
  std::map<std::pair<int32_t, int32_t>, Snapshot> watched;
  std::pair<int32_t, int32_t> lossBuffer{-1, -1};
  bool initialized = false;
  bool interpretPrograms = false;
  DataSource dataSource;
  Observer observer;
  bool lastRan = false; ///< whether the last execute() did work
  /// The step `runStep` is executing (keys the random expressions).
  int64_t currentStep = 0;
};

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_CPUBACKEND_H
