//===- CudaTraffic.h - Bytes a CUDA step moves ------------------*- C++ -*-===//
//
// The CUDA executor issues the same copies every step (the plan is static),
// so the bytes it moves are counted exactly from the schedule: per plan
// device the bytes it receives from other plan devices (what the CPU backend
// measures as it runs the Fetch and Reduce pieces, and what the run report
// compares with the plan's commBytes), and per copy path (same device, two
// virtual devices of one GPU, two GPUs) every byte the copies move.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDATRAFFIC_H
#define TOFU_RUNTIME_CUDA_CUDATRAFFIC_H

#include "CudaSchedule.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tofu::cuda {

/// The bytes one step of a schedule moves.
struct ScheduleTraffic {
  /// Per plan device, bytes its Fetch/Reduce pieces bring from other plan
  /// devices.
  std::vector<uint64_t> receivedPerDevice;
  /// Bytes moved by Copy, BoxCopy and BoxAdd ops and by the pieces of
  /// MultiFetch/MultiReduce launches, indexed by CopyPath (SameDevice,
  /// SameGpu, Peer).
  std::array<uint64_t, 3> byPath{};
  /// Per schedule entry, bytes its copies bring from other plan devices
  /// (a Fetch/Reduce event's "bytes" in --trace).
  std::vector<uint64_t> receivedPerEntry;
};

/// Counts the bytes of every copy of `schedule`.
ScheduleTraffic countTraffic(const plan::Plan &plan, const Schedule &schedule);

/// "same device", "same GPU" or "peer".
const char *copyPathName(CopyPath path);

/// "traffic per step by path: same device N, same GPU N, peer N bytes".
std::string describeTraffic(const ScheduleTraffic &traffic);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDATRAFFIC_H
