//===- ProcessGroup.h - One process per device: launch and gathers -*- C++ -*-===//
//
// tofu-run runs a k-device plan either in one process (k arenas, the
// default) or as k processes, one per device:
//
//   mpirun -np k tofu-run plan.bin ...        (Open MPI: OMPI_COMM_WORLD_*)
//   RANK=r WORLD_SIZE=k LOCAL_RANK=r MASTER_ADDR=host MASTER_PORT=p \
//       tofu-run plan.bin ...                 (the torchrun environment)
//
// ProcessGroup reads the environment, starts the matching Transport and
// offers the few collective steps tofu-run needs around the training steps
// (checking the world size, gathering the report's numbers and the trained
// weights to rank 0). docs/TofuRun.md describes the launch.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_PROCESSGROUP_H
#define TOFU_RUNTIME_PROCESSGROUP_H

#include "tofu/runtime/Plan.h"
#include "tofu/runtime/Transport.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tofu::runtime {

class ProcessGroup {
public:
  /// Seconds a send or receive may wait without progress (--comm-timeout).
  static constexpr double kDefaultTimeoutSeconds = 300;

  ProcessGroup() = default;
  /// A group that started but did not `finish()` (an error ended the run on
  /// this rank) ends the other processes: Transport::abortAll.
  ~ProcessGroup();

  /// Detects how the process was launched and, under mpirun or the torchrun
  /// environment, connects to the other processes. Without either, the group
  /// is a single process (`multiProcess()` false). Fails with a clear
  /// message when the environment asks for a transport this build lacks
  /// (mpirun without MPI support) or is malformed.
  std::string start(int &argc, char **&argv, double timeoutSeconds);

  bool multiProcess() const { return transport != nullptr; }
  int rank() const { return transport ? transport->rank() : 0; }
  int worldSize() const { return transport ? transport->worldSize() : 1; }
  Transport *getTransport() const { return transport.get(); }
  /// How the processes were launched: "mpirun", "torchrun" (RANK and
  /// WORLD_SIZE set by torchrun, which also sets TORCHELASTIC_RUN_ID),
  /// "RANK/WORLD_SIZE" (the same variables set by another launcher), or "".
  const std::string &launcher() const { return launchedBy; }

  /// Makes SIGTERM print a one-line error of this rank's own before the
  /// process ends by it (the default action, after any handler installed
  /// before). mpirun and torchrun's agent end every rank with SIGTERM once
  /// one rank has failed (or the launcher was interrupted); without this a
  /// killed rank's peers vanished without a word of tofu-run's. The line
  /// names the launcher and says that the launcher's own message names the
  /// rank that failed (a survivor cannot tell which one it was). Call once
  /// after a successful `start()` of a multi-process group.
  void reportTerminationBySignal() const;

  /// The error for a plan of `numDevices` devices run by this group, or ""
  /// if every device gets one process. Every rank sees the same numbers and
  /// so reports the same error; no message is exchanged.
  std::string checkWorldSize(uint32_t numDevices) const;

  /// Rank 0 receives every rank's `mine` (indexed by rank); other ranks send
  /// theirs and get `all` empty.
  std::string gather(uint64_t mine, std::vector<uint64_t> &all);

  /// Returns once every rank has called it (rank 0 hears from every rank,
  /// then answers each). A single process returns at once.
  std::string barrier();

  /// Rank 0 receives every rank's `mine` (indexed by rank; its own
  /// included); other ranks send theirs and get `all` empty. For texts of
  /// different lengths (each rank's trace events).
  std::string gatherText(const std::string &mine,
                         std::vector<std::string> &all);

  /// Rank 0 receives the bytes of every owned buffer of the tensors for
  /// which `wanted(tensor)` holds from the rank that runs its device; other
  /// ranks send theirs (read through `local(buffer)`). On rank 0, `out`
  /// maps (device, buffer) to the bytes, rank 0's own buffers included.
  using LocalBuffer = std::function<const uint8_t *(int32_t buffer)>;
  std::string
  gatherOwnedBuffers(const plan::Plan &plan,
                     const std::function<bool(int32_t tensor)> &wanted,
                     const LocalBuffer &local,
                     std::map<std::pair<int32_t, int32_t>,
                              std::vector<uint8_t>> &out);

  /// Ends a run that succeeded on this rank (waits for every rank).
  std::string finish();
  /// Ends a run that failed the same way on every rank (e.g. the world size
  /// check) without aborting the others.
  void finishAfterCommonError();

private:
  std::unique_ptr<Transport> transport;
  std::string launchedBy;
  bool finished = false;
};

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_PROCESSGROUP_H
