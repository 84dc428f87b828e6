//===- ParallelFor.cpp - The CPU kernels' persistent worker pool ----------===//
//
// One pool per process of parallelThreads() - 1 workers, started on first
// use and never stopped (between calls they spin briefly, then sleep on a
// condition variable; the process exits with them parked). A call publishes
// its task under a new generation number, wakes the sleeping workers, runs
// task 0 itself and waits (spinning briefly, then sleeping) until the
// others report done.
//
//===----------------------------------------------------------------------===//
#include "ParallelFor.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

using namespace tofu::runtime;

namespace {

/// True on a thread while it runs a task of the pool (a worker, or the
/// caller running task 0): a parallelFor nested in a task runs serially
/// without touching the pool's locks.
thread_local bool inPoolTask = false;

/// Sets inPoolTask for the lifetime of the guard.
struct PoolTaskScope {
  PoolTaskScope() { inPoolTask = true; }
  ~PoolTaskScope() { inPoolTask = false; }
};

/// How long a thread spins before it sleeps, waiting for the next task
/// (a worker) or for the others to finish (the caller). Back-to-back calls
/// (a step's waves of small instructions, the kernels' loops) then cost a
/// few hundred nanoseconds instead of a futex wake-up and a sleep each.
constexpr std::chrono::microseconds kSpinFor(50);

/// Spins until `ready()` or kSpinFor has passed; true when ready. After a
/// short busy wait it yields the core at each turn, so that on a machine
/// with more runnable threads than cores the thread it waits for can run.
template <typename Ready> bool spinUntil(Ready ready) {
  const auto until = std::chrono::steady_clock::now() + kSpinFor;
  for (unsigned i = 1;; ++i) {
    if (ready())
      return true;
    if (i < 256) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      continue;
    }
    std::this_thread::yield();
    if (std::chrono::steady_clock::now() > until)
      return false;
  }
}

class WorkerPool {
public:
  explicit WorkerPool(unsigned workers) {
    for (unsigned w = 0; w < workers; ++w)
      std::thread([this, w] { work(w + 1); }).detach();
    numWorkers = workers;
  }

  /// Runs task(0..count-1); false (nothing run) when the pool is in use.
  bool run(unsigned count, const std::function<void(unsigned)> &fn) {
    std::unique_lock<std::mutex> busy(inUse, std::try_to_lock);
    if (!busy.owns_lock())
      return false;
    // Workers 1..numWorkers take the tasks of their index; the caller
    // takes task 0 and any beyond the workers.
    const unsigned onWorkers = std::min(count, numWorkers + 1);
    task = &fn;
    taskCount = onWorkers;
    pending.store(onWorkers - 1, std::memory_order_relaxed);
    {
      // Under the mutex, so that a worker about to sleep sees the change.
      std::lock_guard<std::mutex> lock(mutex);
      generation.fetch_add(1, std::memory_order_release);
      if (sleepingWorkers)
        wake.notify_all();
    }
    {
      PoolTaskScope scope;
      fn(0);
      for (unsigned t = onWorkers; t < count; ++t)
        fn(t);
    }
    auto finished = [&] {
      return pending.load(std::memory_order_acquire) == 0;
    };
    if (!spinUntil(finished)) {
      std::unique_lock<std::mutex> lock(mutex);
      callerSleeping = true;
      done.wait(lock, finished);
      callerSleeping = false;
    }
    task = nullptr;
    return true;
  }

private:
  void work(unsigned index) {
    uint64_t seen = 0;
    for (;;) {
      auto published = [&] {
        return generation.load(std::memory_order_acquire) != seen;
      };
      if (!spinUntil(published)) {
        std::unique_lock<std::mutex> lock(mutex);
        ++sleepingWorkers;
        wake.wait(lock, published);
        --sleepingWorkers;
      }
      seen = generation.load(std::memory_order_acquire);
      if (index >= taskCount)
        continue;
      {
        PoolTaskScope scope;
        (*task)(index);
      }
      if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mutex);
        if (callerSleeping)
          done.notify_one();
      }
    }
  }

  std::mutex inUse; ///< held by the one run() in progress
  std::mutex mutex; ///< guards the sleeping flags and the condition waits
  std::condition_variable wake, done;
  /// Written by the caller before it publishes a new generation (release),
  /// read by the workers after they see it (acquire).
  const std::function<void(unsigned)> *task = nullptr;
  unsigned taskCount = 0, numWorkers = 0;
  std::atomic<unsigned> pending{0};
  std::atomic<uint64_t> generation{0};
  unsigned sleepingWorkers = 0; ///< under `mutex`
  bool callerSleeping = false;  ///< under `mutex`
};

} // namespace

unsigned tofu::runtime::parallelThreads() {
  static const unsigned threads =
      std::min(16u, std::max(1u, std::thread::hardware_concurrency()));
  return threads;
}

void tofu::runtime::runOnPool(unsigned count,
                              const std::function<void(unsigned)> &task) {
  // Leaked on purpose: detached workers may still be parked at exit.
  static WorkerPool *pool = new WorkerPool(parallelThreads() - 1);
  if (count > 1 && !inPoolTask && pool->run(count, task))
    return;
  for (unsigned t = 0; t < count; ++t)
    task(t);
}
