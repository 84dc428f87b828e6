//===- ParallelFor.h - Split a loop over threads -----------------*- C++ -*-===//
//
// The threading of the CPU kernels: a loop over [0, n) is cut into one
// contiguous range per thread when the work is large enough to pay for the
// threads (each range runs `body(begin, end)`; ranges are disjoint, so
// writes to distinct outputs need no locking). The threads are one
// persistent pool per process (ParallelFor.cpp), shared by every kernel and
// every virtual device: a kernel call wakes them instead of creating and
// joining threads (tens of microseconds each, paid by every mid-sized op).
// Internal to tofu_runtime.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_LIB_PARALLELFOR_H
#define TOFU_RUNTIME_LIB_PARALLELFOR_H

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

namespace tofu::runtime {

/// The number of threads a parallelFor may use: the machine's hardware
/// threads, at most 16.
unsigned parallelThreads();

/// Whether the worker pool pins its threads to distinct CPUs when it starts
/// (ParallelFor.cpp; the default, where the process may use more CPUs than
/// the pool has threads): call before the first runOnPool/parallelFor.
/// tofu-run turns it off with one process per device, whose processes
/// would otherwise all pin their main threads to the same CPU.
void setThreadPinning(bool pin);

/// The CPUs the pool pinned its threads to, the starting thread's first
/// (empty when it did not pin); starts the pool.
std::vector<int> poolPinnedCpus();

/// Runs `task(t)` for every t in [0, count) concurrently on the calling
/// thread and the process's worker pool (each thread claims the next task
/// not yet taken, so which thread runs a task varies), and returns when all
/// have finished. When the pool is busy (a parallelFor on another
/// thread, or nested in a task) the tasks run one after another on the
/// calling thread instead.
void runOnPool(unsigned count, const std::function<void(unsigned)> &task);

/// Runs `fn` on the calling thread with every parallelFor and runOnPool
/// inside it run serially there, as inside a pool task (tofu-run's
/// concurrent waves run each device's kernels so): what `--calibrate`
/// times as a kernel's one-thread cost.
void runOnThisThread(const std::function<void()> &fn);

/// How many runOnPool calls of this process have handed their tasks to the
/// worker pool (not run them on the calling thread alone): `--calibrate`
/// finds from which size a kernel threads by calling it once per size.
uint64_t poolRuns();

/// Runs `body(begin, end)` over [0, n) on up to parallelThreads() threads
/// when n * workPerItem (a rough count of operations) is at least 2^18,
/// else on the calling thread.
template <typename Body>
void parallelFor(int64_t n, double workPerItem, Body body) {
  if (n <= 0)
    return;
  unsigned threads = parallelThreads();
  if (static_cast<double>(n) * workPerItem < double(1 << 18))
    threads = 1;
  threads = static_cast<unsigned>(std::min<int64_t>(threads, n));
  if (threads <= 1) {
    body(int64_t(0), n);
    return;
  }
  runOnPool(threads, [&](unsigned t) {
    body(n * t / threads, n * (t + 1) / threads);
  });
}

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_LIB_PARALLELFOR_H
