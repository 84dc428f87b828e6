//===- ParallelFor.cpp - The CPU kernels' persistent worker pool ----------===//
//
// One pool per process of parallelThreads() - 1 workers, started on first
// use and never stopped (between calls they spin briefly, then sleep on a
// condition variable; the process exits with them parked). A call publishes
// its tasks under a new generation number and wakes the sleeping workers;
// the caller and the workers then claim tasks one at a time, and the caller
// waits (spinning briefly, then sleeping) for the claimed ones to finish.
//
// Where the process may run on more CPUs than the pool has threads, the
// thread that starts the pool (tofu-run's main thread) is pinned to the
// first allowed CPU and worker w to the (w + 2)-th. Left to the scheduler,
// a worker woken by the main thread was often placed on the main thread's
// CPU and stayed there for about 100 ms: transformer_encoder at k = 4 ran
// its first 10 steps concurrently at 8-10 ms, then 5 ms once a worker had
// moved, and `--cpu-schedule auto`, which decides on steps 2-7, kept the
// in-order schedule (bench/simulate.md). setThreadPinning(false) (tofu-run
// with one process per device, or TOFU_NO_PIN=1) leaves the threads to the
// scheduler.
//
//===----------------------------------------------------------------------===//
#include "ParallelFor.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstdlib>
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

/// runOnPool calls that ran on the pool (poolRuns).
std::atomic<uint64_t> handedToPool{0};

/// Sets inPoolTask for the lifetime of the guard, then restores the value
/// it had (false in the pool's own tasks; runOnThisThread may nest).
struct PoolTaskScope {
  const bool outer = inPoolTask;
  PoolTaskScope() { inPoolTask = true; }
  ~PoolTaskScope() { inPoolTask = outer; }
};

/// How long a thread spins before it sleeps, waiting for the next task
/// (a worker) or for the others to finish (the caller). Back-to-back calls
/// (a step's waves of small instructions, the kernels' loops) then cost a
/// few hundred nanoseconds instead of a futex wake-up and a sleep each.
/// 1 ms, not less: a step's small ops run on the calling thread alone, and
/// a run of them longer than the spin put the worker to sleep, so the next
/// threaded GEMM ran its first block alone while the worker woke (a 256 x
/// 64 x 256 MatMul after 0.1-1 ms of one-thread work: 130-165 us with a
/// 50 us spin, 81-83 us with 1 ms, 72-86 us back to back; the
/// transformer encoder's step 8% shorter; bench/simulate.md, session 37).
/// The spin yields the core after a short busy wait, so another runnable
/// thread or process still gets it.
constexpr std::chrono::microseconds kSpinFor(1000);

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

/// Pins `thread` to `cpu`; false when the system refuses.
bool pinToCpu(pthread_t thread, int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return pthread_setaffinity_np(thread, sizeof(one), &one) == 0;
}

/// Whether the pool, when it starts, pins its threads (setThreadPinning).
std::atomic<bool> pinningWanted{true};
/// The CPUs the pool pinned its threads to: the starting thread's first
/// (empty when it did not pin). Written once, before the pool is published.
std::vector<int> pinnedCpus;

class WorkerPool {
public:
  explicit WorkerPool(unsigned workers) {
    std::vector<int> cpus;
    cpu_set_t allowed;
    if (workers > 0 && pinningWanted.load() && !std::getenv("TOFU_NO_PIN") &&
        sched_getaffinity(0, sizeof(allowed), &allowed) == 0)
      for (int c = 0; c < CPU_SETSIZE && cpus.size() <= workers; ++c)
        if (CPU_ISSET(c, &allowed))
          cpus.push_back(c);
    const bool pin = cpus.size() > workers && pinToCpu(pthread_self(), cpus[0]);
    if (pin)
      pinnedCpus.push_back(cpus[0]);
    for (unsigned w = 0; w < workers; ++w) {
      std::thread thread([this] { work(); });
      if (pin && pinToCpu(thread.native_handle(), cpus[w + 1]))
        pinnedCpus.push_back(cpus[w + 1]);
      thread.detach();
    }
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

/// The one pool, started on first use. Leaked on purpose: detached workers
/// may still be parked at exit.
WorkerPool &thePool() {
  static WorkerPool *pool = new WorkerPool(parallelThreads() - 1);
  return *pool;
}

} // namespace

void tofu::runtime::setThreadPinning(bool pin) { pinningWanted.store(pin); }

std::vector<int> tofu::runtime::poolPinnedCpus() {
  thePool();
  return pinnedCpus;
}

unsigned tofu::runtime::parallelThreads() {
  static const unsigned threads =
      std::min(16u, std::max(1u, std::thread::hardware_concurrency()));
  return threads;
}

void tofu::runtime::runOnThisThread(const std::function<void()> &fn) {
  PoolTaskScope scope;
  fn();
}

uint64_t tofu::runtime::poolRuns() {
  return handedToPool.load(std::memory_order_relaxed);
}

void tofu::runtime::runOnPool(unsigned count,
                              const std::function<void(unsigned)> &task) {
  if (count > 1 && !inPoolTask && thePool().run(count, task)) {
    handedToPool.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  for (unsigned t = 0; t < count; ++t)
    task(t);
}
