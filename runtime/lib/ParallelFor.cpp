//===- ParallelFor.cpp - The CPU kernels' persistent worker pool ----------===//
//
// One pool per process of parallelThreads() - 1 workers, started on first
// use and never stopped (between calls they spin briefly, then sleep on a
// condition variable; the process exits with them parked). A call publishes
// its tasks under a new generation number and wakes the sleeping workers;
// the caller and the workers then claim tasks one at a time, and the caller
// waits (spinning briefly, then sleeping) for the claimed ones to finish.
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
/// caller while it runs tasks): a parallelFor nested in a task runs serially
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

/// The pool's ticket: which call (generation), how many tasks it has and
/// the next task not yet claimed, in one word so that a claim is one
/// compare-and-swap that cannot cross into another call.
struct Ticket {
  static uint64_t pack(uint64_t generation, uint64_t count, uint64_t next) {
    return generation << 32 | count << 16 | next;
  }
  static uint64_t generation(uint64_t t) { return t >> 32; }
  static uint64_t count(uint64_t t) { return t >> 16 & 0xffff; }
  static uint64_t next(uint64_t t) { return t & 0xffff; }
};

class WorkerPool {
public:
  explicit WorkerPool(unsigned workers) {
    for (unsigned w = 0; w < workers; ++w)
      std::thread([this] { work(); }).detach();
  }

  /// Runs task(0..count-1); false (nothing run) when the pool is in use.
  bool run(unsigned count, const std::function<void(unsigned)> &fn) {
    std::unique_lock<std::mutex> busy(inUse, std::try_to_lock);
    if (!busy.owns_lock() || count > 0xffff)
      return false;
    task = &fn;
    finished.store(0, std::memory_order_relaxed);
    {
      // Under the mutex, so that a worker about to sleep sees the change.
      std::lock_guard<std::mutex> lock(mutex);
      ++generation;
      ticket.store(Ticket::pack(generation, count, 0),
                   std::memory_order_release);
      if (sleepingWorkers)
        wake.notify_all();
    }
    // The caller claims tasks too: on a loaded machine, where a worker may
    // not run for a while, it runs them all rather than wait.
    {
      PoolTaskScope scope;
      claimAndRun();
    }
    auto allDone = [&] {
      return finished.load(std::memory_order_acquire) == count;
    };
    if (!spinUntil(allDone)) {
      std::unique_lock<std::mutex> lock(mutex);
      callerSleeping = true;
      done.wait(lock, allDone);
      callerSleeping = false;
    }
    task = nullptr;
    return true;
  }

private:
  /// Claims and runs tasks of the current call until none is left. A
  /// claimed task keeps its call's run() waiting, so `task` stays valid.
  void claimAndRun() {
    uint64_t t = ticket.load(std::memory_order_acquire);
    while (Ticket::next(t) < Ticket::count(t)) {
      if (!ticket.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel,
                                        std::memory_order_acquire))
        continue; // t was reloaded
      (*task)(static_cast<unsigned>(Ticket::next(t)));
      if (finished.fetch_add(1, std::memory_order_acq_rel) + 1 ==
          Ticket::count(t)) {
        std::lock_guard<std::mutex> lock(mutex);
        if (callerSleeping)
          done.notify_one();
      }
      t = ticket.load(std::memory_order_acquire);
    }
  }

  void work() {
    uint64_t seen = 0;
    for (;;) {
      auto published = [&] {
        return Ticket::generation(ticket.load(std::memory_order_acquire)) !=
               seen;
      };
      if (!spinUntil(published)) {
        std::unique_lock<std::mutex> lock(mutex);
        ++sleepingWorkers;
        wake.wait(lock, published);
        --sleepingWorkers;
      }
      seen = Ticket::generation(ticket.load(std::memory_order_acquire));
      PoolTaskScope scope;
      claimAndRun();
    }
  }

  std::mutex inUse; ///< held by the one run() in progress
  std::mutex mutex; ///< guards the sleeping flags and the condition waits
  std::condition_variable wake, done;
  /// The current call's function: written before its ticket is published
  /// (release), read after a claim on that ticket (acquire).
  const std::function<void(unsigned)> *task = nullptr;
  uint64_t generation = 0; ///< the caller's count of calls (under `inUse`)
  std::atomic<uint64_t> ticket{0};
  std::atomic<uint64_t> finished{0}; ///< tasks of the current call done
  unsigned sleepingWorkers = 0;      ///< under `mutex`
  bool callerSleeping = false;       ///< under `mutex`
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
