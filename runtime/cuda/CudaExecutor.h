//===- CudaExecutor.h - Execute a k-device plan on CUDA GPUs ----*- C++ -*-===//
//
// Runs a plan compiled with `tofuc --cuda-arch` on N GPUs of one process
// (`tofu-run --backend cuda [--devices N]`), issuing exactly the schedule
// CudaSchedule.h computes (which is tested without a GPU):
//
//  * one cudaMalloc per GPU holding the slices of its plan devices (planned
//    arena + Reduce scratch); out of memory is reported with
//    outOfMemoryMessage (CudaDiagnostics.h) before anything runs;
//  * per plan device a compute and a communication stream; one event per
//    schedule entry that another stream waits on;
//  * the generated kernels loaded from the plan's cubin (the runtime's
//    cudaLibraryLoadData / cudaLibraryGetKernel: no link to libcuda, so
//    tofu-run starts on machines without a driver) and launched with
//    cudaLaunchKernel with the launch's buffers and int64 parameters; MatMul/Gemm through cuBLAS
//    (or a cuBLASLt algorithm timed at init at least 3x faster: docs/Cuda.md,
//    "GEMM algorithm choice"),
//    Conv* through cuDNN (CudaBlas.h, CudaConv.h); Fetch/Reduce as one
//    MultiFetch/MultiReduce launch (CudaMultiFetch.cu, its piece table
//    written once at init after the GPU's slices) or per piece as
//    cudaMemcpyAsync (one GPU) / cudaMemcpyPeerAsync (two GPUs) or the box
//    copy/add kernels of CudaTransferKernels.cu (through peer access);
//  * with one process per GPU (`transport` set): only this rank's plan
//    devices (CudaNcclSchedule.h), pieces between ranks through NCCL on one
//    stream (CudaNccl.h), and a watchdog instead of a plain synchronize:
//    an NCCL error or `ncclTimeout` seconds without progress name the
//    rank, peer and instruction, abort the communicator and fail the step
//    (tofu-run then aborts every rank through the transport);
//  * step 1 runs eagerly (cuDNN picks its algorithms and workspaces), step
//    2 is captured once as a CUDA graph and every later step replays it
//    (`useGraph` false: every step is issued eagerly).
//
// The interface has no CUDA types: tofu-run includes it unconditionally and
// links the implementation only where the CUDA toolkit was found.
//
// Run on one H200 only (one process, --devices 1; bench/gpu/H200.md): never
// on two or more GPUs (peer access) nor as one process per GPU; this
// machine and CI have no GPU (docs/Cuda.md).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDAEXECUTOR_H
#define TOFU_RUNTIME_CUDA_CUDAEXECUTOR_H

#include "tofu/runtime/Plan.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tofu::runtime {
class Transport;
}

namespace tofu::cuda {

struct Schedule;

struct CudaRunOptions {
  /// GPUs to run the plan's k devices on (1..k); 0 = k.
  int32_t numGpus = 0;
  /// Capture the steady-state step as a CUDA graph and replay it.
  bool useGraph = true;
  /// One process per GPU (mpirun/torchrun): the transport of the process
  /// group (the NCCL id travels over it); null = one process. This process
  /// then runs the plan devices of its rank (CudaNcclSchedule.h) on GPU
  /// `localRank` and moves pieces between ranks with NCCL.
  tofu::runtime::Transport *transport = nullptr;
  int32_t localRank = 0;
  /// Seconds a step's streams and NCCL calls may go without progress before
  /// the watchdog aborts the communicator (--nccl-timeout).
  double ncclTimeout = 300;
};

class CudaExecutor {
public:
  CudaExecutor(const plan::Plan &plan, CudaRunOptions options);
  ~CudaExecutor();

  /// Same contract as CpuExecutor::DataSource.
  using DataSource = std::function<std::string(
      int32_t tensor, const plan::Box &region, int64_t step, void *out)>;
  void setDataSource(DataSource source);

  /// Finds the GPUs, checks the plan's architecture, builds the schedule
  /// (refusing unsupported ops), allocates, uploads the initial parameters,
  /// loads the kernels, creates streams, events and library handles.
  std::string init();
  /// Runs training step `step` (0-based) and waits for it.
  std::string runStep(int64_t step);
  /// The loss of the last step (device 0's loss buffer after its last
  /// write; with one process per GPU, on rank 0 only).
  std::string lastLoss(double &loss) const;
  /// Copies buffer `buffer` of plan device `device` (of this rank) to the
  /// host.
  std::string readBuffer(int32_t device, int32_t buffer,
                         std::vector<uint8_t> &bytes) const;
  /// Called while a step is issued: with entry -1 after the step's batch
  /// is fed and before anything else, then for every schedule entry before
  /// (`after` false) and after (`after` true) its calls, with its GPU
  /// current and `stream` its cudaStream_t, before the entry records its
  /// completion event (so whatever the hook enqueues there is ordered
  /// before every later conflicting instruction). With a hook set every
  /// step is issued eagerly (no CUDA graph). Call before `runStep`.
  using IssueHook =
      std::function<std::string(int32_t entry, bool after, void *stream)>;
  void setIssueHook(IssueHook hook);
  /// Copies `bytes` bytes at `offset` of GPU `gpu`'s allocation to `out`
  /// (synchronously; a DeviceReader of CudaDeviceState.h).
  std::string copyToHost(int32_t gpu, uint64_t offset, uint64_t bytes,
                         uint8_t *out) const;
  /// The device address of `offset` in GPU `gpu`'s allocation.
  void *deviceAddress(int32_t gpu, uint64_t offset) const;

  /// What one schedule entry's calls cost when they run alone (timeEntries).
  struct EntryTime {
    int32_t entry = 0;   ///< position in schedule().instrs
    double seconds = 0;  ///< per issue of the entry's calls
  };
  /// Times every schedule entry's calls alone, as a replayed step runs them
  /// without waiting on other streams: per entry, a CUDA graph of `repeats`
  /// back-to-back copies of its calls on its own stream, launched once to
  /// warm up and then `launches` times between two events; the time per
  /// copy includes the gap a replayed graph leaves between calls. The calls
  /// run on the step's buffers again and again (in-place updates repeat):
  /// call it after the run's last step. One process only (NCCL sends and
  /// receives are not timed: such entries are left out), after at least
  /// one step (cuDNN has chosen its algorithms).
  std::string timeEntries(int32_t repeats, int32_t launches,
                          std::vector<EntryTime> &times);
  /// Per plan device, the bytes of cuDNN workspace its ConvRunner holds.
  std::vector<uint64_t> workspaceBytes() const;
  /// Steps replayed from the captured graph so far.
  int64_t graphReplays() const;
  const Schedule &schedule() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

/// Whether this build has the CUDA executor (the CUDA toolkit, cuBLAS and
/// cuDNN were found at build time).
bool cudaExecutorAvailable();

/// The visible GPUs as "0: NAME (sm_XY, N GiB)" lines, or why there are
/// none (`count` = 0): no driver, no device.
std::string describeGpus(int &count);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDAEXECUTOR_H
