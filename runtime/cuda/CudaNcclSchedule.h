//===- CudaNcclSchedule.h - One process per GPU: NCCL transfers -*- C++ -*-===//
//
// `mpirun -np W tofu-run plan.bin --backend cuda` (or W processes with the
// torchrun environment) runs a k-device plan as W processes, one GPU each.
// Everything that is not a CUDA or NCCL call is decided here, in plain C++,
// and tested without a GPU (CudaNcclScheduleTest.cpp):
//
//  * placement: plan device p runs on rank p * W / k (W <= k), the rule of
//    `--devices W` (CudaSchedule.h's mapDevices), so with W = k rank r runs
//    plan device r exactly as the CPU backend's multi-process mode does;
//    rank r's GPU is its local rank's (cudaSetDevice(LOCAL_RANK));
//  * the one-process schedule on W GPUs (buildSchedule) is the source: GPU r
//    is rank r. Every Fetch/Reduce op whose source plan device lives on
//    another rank becomes an NCCL transfer: the receiving rank runs the
//    entry with `Recv` into the destination (one contiguous run) or into its
//    device's staging area followed by the entry's box copy/add from there;
//    the sending rank gets an entry of its own that packs a strided source
//    box into its staging area when needed and `Send`s. Pieces within a rank
//    keep their copies and box kernels;
//  * the order of NCCL calls: every rank issues every Send and Recv it takes
//    part in on one stream (StreamKind::Nccl), in one global order of
//    transfers (the one-process schedule's order of entries, then of ops).
//    Both sides of each pair therefore see the same order, and since every
//    wait points to an earlier entry of that order, the earliest unfinished
//    transfer always has both sides ready: no deadlock;
//  * per rank, the waits (events) from byte hazards among its own entries,
//    as in the one-process schedule; cross-rank order comes from the
//    transfers themselves.
//
// `validateMultiProcessSchedule` re-checks a schedule: the transfers are
// exactly the cross-rank ops, every entry present once on its rank, every
// send matched by exactly one receive with the same bytes in the same order
// per pair of ranks, no NCCL wait cycle (a simulation of the blocking calls
// must finish), and every conflicting pair of a rank ordered.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDANCCLSCHEDULE_H
#define TOFU_RUNTIME_CUDA_CUDANCCLSCHEDULE_H

#include "CudaSchedule.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tofu::cuda {

/// One NCCL point-to-point transfer: a Fetch/Reduce op of the one-process
/// schedule whose source plan device lives on another rank.
struct NcclTransfer {
  int32_t entry = -1; ///< entry of the one-process schedule
  int32_t op = -1;    ///< its Copy, BoxCopy or BoxAdd op that crosses ranks
  int32_t from = -1, to = -1; ///< sending and receiving rank
  uint64_t bytes = 0;
};

/// What one rank issues. `schedule.mapping` is every rank's (all plan
/// devices, GPU = rank); `schedule.instrs` holds only this rank's entries
/// (waits index into them; the stream Nccl is the rank's NCCL stream);
/// `schedule.lossWriter` is set on the rank of plan device 0.
struct RankSchedule {
  Schedule schedule;
  /// Per entry, the entry of the one-process schedule it comes from.
  std::vector<int32_t> origin;
  /// Per entry, the transfer it sends (its `device` is then the source
  /// device and its `index` the receiving instruction's), or -1 for the
  /// origin entry itself, run here with its remote pieces received.
  std::vector<int32_t> sends;
};

struct MultiProcessSchedule {
  int32_t worldSize = 1;
  /// The one-process schedule on worldSize GPUs (GPU r = rank r), with each
  /// device's slice grown by its staging area.
  Schedule global;
  /// Per plan device, its staging area inside its slice: packed pieces
  /// before a send, received pieces before a box copy/add.
  std::vector<uint64_t> stagingOffset, stagingBytes;
  /// The global order of NCCL calls.
  std::vector<NcclTransfer> transfers;
  std::vector<RankSchedule> ranks; ///< one per rank
  int32_t rankOf(int32_t device) const {
    return global.mapping.devices[device].gpu;
  }
};

/// Builds the schedule of `plan` on `worldSize` processes (1 <= worldSize
/// <= k). Fails as buildSchedule does (ops without a CUDA implementation,
/// named).
std::string buildMultiProcessSchedule(const plan::Plan &plan,
                                      int32_t worldSize,
                                      MultiProcessSchedule &schedule);

/// Returns "" or what is wrong: staging inside the slices; the transfers
/// exactly the one-process schedule's cross-rank ops; per rank every entry
/// of its devices once, every transfer it sends once, no op touching
/// another rank's memory, NCCL calls only on the NCCL stream, waits on
/// earlier recorded entries; per pair of ranks the sends and receives in
/// the same order with the same bytes; no deadlock of the blocking NCCL
/// calls; every conflicting pair of entries of a rank ordered.
std::string validateMultiProcessSchedule(const plan::Plan &plan,
                                         const MultiProcessSchedule &schedule);

/// "device D instruction I (op 'X')" of rank `rank`'s entry `pos`, with
/// the transfer for a sending entry ("sending transfer T to rank R of ...").
std::string describeRankEntry(const plan::Plan &plan,
                              const MultiProcessSchedule &schedule,
                              int32_t rank, int32_t pos);

/// One rank's schedule as text (placement, then one line per entry), for
/// `tofu-run --dump-cuda-schedule --ranks W --rank R`.
std::string describeRankSchedule(const plan::Plan &plan,
                                 const MultiProcessSchedule &schedule,
                                 int32_t rank);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDANCCLSCHEDULE_H
