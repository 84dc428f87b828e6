//===- CudaStepObserver.h - --dump and --trace on CUDA ----------*- C++ -*-===//
//
// What tofu-run's --dump and --trace need from a CUDA step, through the
// executor's issue hook (CudaExecutor::setIssueHook, which makes every step
// eager: no CUDA graph):
//
//  * snapshots: each watched buffer is copied to pinned host memory right
//    after the schedule entry that writes it last in the step
//    (snapshotPoints, CudaDeviceState.h), with cudaMemcpyAsync on that
//    entry's stream before its completion event, so no later instruction
//    reusing the bytes can overwrite it first; watched buffers no entry
//    writes (the fed inputs and labels) are copied right after the feed;
//  * timing: a pair of cudaEvents around each entry's calls on its stream,
//    read after the step relative to an event recorded per GPU when the
//    step starts, and reported as CpuExecutor::ExecutedInstr (the entry's
//    instruction, its start and end, the bytes its copies bring from other
//    plan devices), which TraceRecorder writes as for the CPU backend.
//
// Timing (--trace) ran on one H200 (bench/gpu/H200.md); snapshots (--dump)
// have never run on a GPU (docs/Cuda.md).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDASTEPOBSERVER_H
#define TOFU_RUNTIME_CUDA_CUDASTEPOBSERVER_H

#include "CudaExecutor.h"

#include "tofu/runtime/CpuBackend.h"
#include "tofu/runtime/TensorAssembly.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tofu::cuda {

class CudaStepObserver {
public:
  CudaStepObserver(const plan::Plan &plan, CudaExecutor &exec);
  ~CudaStepObserver();

  /// Snapshot buffer `buffer` of plan device `device` every step.
  void watch(int32_t device, int32_t buffer);
  /// Time every entry and report it to `observer` after each step.
  void setObserver(runtime::CpuExecutor::Observer observer);
  /// Whether anything is watched or timed.
  bool active() const { return !watched.empty() || bool(observer); }

  /// After the executor's init: allocates the pinned snapshots and the
  /// events and installs the issue hook.
  std::string prepare();
  /// After each step (the executor has waited for it): reports the timed
  /// entries to the observer.
  std::string finishStep();
  /// The snapshots of the last step.
  runtime::BufferSource snapshots() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
  std::vector<std::pair<int32_t, int32_t>> watched;
  runtime::CpuExecutor::Observer observer;
};

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDASTEPOBSERVER_H
