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
// With a Transport (`setTransport`), the executor runs only the device whose
// number is the transport's rank, one process per device: it allocates only
// that device's arena and walks the same merged order as one process would.
// It runs its own Compute instructions; for a Fetch/Reduce of device d with a
// piece on device s != d, rank s packs the piece's region and sends it, and
// rank d receives it (and adds it, for a Reduce) in the piece's place, so the
// arithmetic, and the result, is that of one process.
//
// In one process, the instructions of one `seq` (a wave: one op's input
// fetches, its computes, or its output assembly, on every device) are
// independent: each writes a buffer that lives at that seq, and the memory
// plan gives buffers alive at the same seq disjoint bytes (lifetimes count
// remote reads). So a wave runs its devices on the worker pool, one list of
// devices per thread, when its instructions are too small for the kernels'
// own threads or the devices balance over the threads; otherwise one
// instruction at a time, each kernel using the threads. Results do not
// depend on which: every kernel computes each output element the same way on
// any number of threads. Running devices side by side wins on an idle
// machine and loses on a loaded one (its threads wait for each other at
// every wave), so by default the executor times both schedules in its first
// steps and keeps the faster (`setSchedule`).
//
// Why blocking sends and receives cannot deadlock: each transfer is one event
// of the global (seq, device, program index, piece) order and involves
// exactly two ranks, and every rank performs the events it takes part in in
// that same order. Take the earliest event not yet completed: every earlier
// event has completed, so both of its ranks have finished everything they
// do before it (their own computes are local and never wait), and both are
// at this event, so it completes. By induction every event completes.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CPUBACKEND_H
#define TOFU_RUNTIME_CPUBACKEND_H

#include "tofu/runtime/ComputeKernel.h"
#include "tofu/runtime/Kernels.h"
#include "tofu/runtime/Plan.h"
#include "tofu/runtime/SyntheticData.h"
#include "tofu/runtime/Transport.h"

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
  /// kernels against their TDL specs; slower). Default: native first. Call
  /// before `init`, which binds each instruction to its kernel.
  void preferInterpreter(bool prefer) { interpretPrograms = prefer; }

  /// The Compute instructions that ran on the expression interpreter
  /// (instead of a native kernel) in all steps so far: kernel name and
  /// count, by name. The interpreter is 10-1000x slower than a native
  /// kernel; an entry here is where a step's time goes.
  const std::map<std::string, uint64_t> &interpretedInstructions() const {
    return interpretedCounts;
  }

  /// Where Input/Label values come from: writes box `region` (global
  /// coordinates) of tensor `tensor` for training step `step` (0-based)
  /// densely to `out`, or returns an error. Default (unset): the synthetic
  /// batch step % SyntheticData::kNumBatches.
  using DataSource = std::function<std::string(
      int32_t tensor, const plan::Box &region, int64_t step, void *out)>;
  void setDataSource(DataSource source) { dataSource = std::move(source); }

  /// Runs only device `transport->rank()` of the plan and exchanges pieces
  /// with the other processes through `transport` (see the file comment).
  /// Call before `init`; the transport must outlive the executor.
  void setTransport(Transport *t) { transport = t; }
  /// The device this executor runs (one process per device), or -1 when it
  /// runs all of them.
  int32_t localDevice() const {
    return transport ? static_cast<int32_t>(transport->rank()) : -1;
  }

  /// For failure tests (tofu-run --test-fail): after `count` instructions
  /// of this process's device have run in total, ends the process at once
  /// (`stall` false: _exit(3), as a crash would) or stops answering (`stall`
  /// true: sleeps forever, as a hung rank would).
  void failAfter(int64_t count, bool stall) {
    failAfterCount = count;
    failByStalling = stall;
  }

  /// How waves of small or balanced instructions run (see the file comment).
  enum class Schedule {
    Auto,       ///< time both in the first steps, keep the faster (default)
    Concurrent, ///< devices side by side on the worker pool
    InOrder,    ///< one instruction at a time, kernels on all threads
  };
  /// Call before `runStep`.
  void setSchedule(Schedule s) { schedule = s; }
  /// The schedule the steps use now (Auto while still timing both; InOrder
  /// when no wave can run its devices side by side).
  Schedule currentSchedule() const;

  /// One instruction that ran during a step (reported to the observer).
  struct ExecutedInstr {
    int32_t device = 0;
    size_t index = 0; ///< position in the device program
    const plan::Instr *instr = nullptr;
    std::chrono::steady_clock::time_point start, end;
    /// Fetch/Reduce: bytes received from other devices (0 for Compute).
    uint64_t remoteBytes = 0;
    /// Compute: ran on the expression interpreter (no native kernel, or the
    /// native kernel refused this configuration), not a native kernel.
    bool interpreted = false;
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
  /// after its last write. Call `watchLoss()` before the step. One process
  /// per device: only the process of device 0 watches and reads the loss
  /// (elsewhere watchLoss does nothing and lastLoss fails).
  std::string watchLoss();
  std::string lastLoss(double &loss) const;

  /// Bytes received by each device from other devices during the last step
  /// (one process per device: only the local device's entry is counted).
  const std::vector<uint64_t> &commBytesPerDevice() const { return commBytes; }
  uint64_t commBytesTotal() const;
  /// Highest arena byte (exclusive end) touched on each device so far (one
  /// process per device: only the local device's entry is measured).
  const std::vector<uint64_t> &measuredPeakBytes() const { return peakTouched; }

private:
  struct Prepared;
  struct Wave;
  /// What one execute() call did.
  struct Outcome {
    bool ran = false;         ///< did work (not an empty share)
    bool interpreted = false; ///< a Compute on the expression interpreter
  };
  std::string prepare();
  /// The contiguous runs of each piece of Fetch/Reduce `in` of `device`
  /// that this process holds, resolved to arena addresses.
  struct PieceRun;
  std::vector<std::vector<PieceRun>> pieceRuns(const plan::Instr &in,
                                               int32_t device) const;
  /// Groups `program` into waves of equal seq and decides how each runs.
  void planWaves();
  /// Runs one instruction; `peak` receives the arena bytes it touches.
  std::string execute(const Prepared &p, Outcome &outcome,
                      std::vector<uint64_t> &peak);
  /// Runs program[i] for i in [begin, end) one after another.
  std::string runInOrder(size_t begin, size_t end);
  /// Runs a wave's device lists concurrently on the worker pool.
  std::string runConcurrently(const Wave &wave);
  std::string sendPieces(const Prepared &p);
  /// Whether this executor holds device `d`'s arena.
  bool isLocal(int32_t d) const { return !transport || d == localDevice(); }
  std::string feed(int64_t step);
  void touch(std::vector<uint64_t> &peak, int32_t device,
             int32_t buffer) const;
  void afterWrite(int32_t device, int32_t buffer);

  /// The plan with its collectives expanded into pieces, when the one
  /// given had them only as source tables (plan::expandedCopy); `plan`
  /// refers to it then.
  std::unique_ptr<plan::Plan> expanded;
  const plan::Plan &plan;
  SyntheticData data;
  std::vector<std::vector<uint8_t>> arenas;
  std::vector<Prepared> program; ///< all devices, merged by seq
  std::vector<Wave> waves;       ///< `program` cut at each new seq
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
  Schedule schedule = Schedule::Auto;
  /// A step has run: the bytes each touches (measuredPeakBytes) are known.
  bool peaksMeasured = false;
  /// watch() added a buffer since the last step (Prepared::writesWatched).
  bool watchedChanged = true;
  /// Auto: steps timed so far and their seconds, per schedule.
  unsigned timedSteps = 0;
  std::vector<double> concurrentSeconds, inOrderSeconds;
  /// Compute instructions run on the interpreter so far, by kernel name.
  std::map<std::string, uint64_t> interpretedCounts;
  /// The step `runStep` is executing (keys the random expressions).
  int64_t currentStep = 0;
  Transport *transport = nullptr;
  std::vector<uint8_t> packed; ///< one piece in transit
  int64_t failAfterCount = -1, instrsRun = 0;
  bool failByStalling = false;
};

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_CPUBACKEND_H
