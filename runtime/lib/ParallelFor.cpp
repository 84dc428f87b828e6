//===- ParallelFor.cpp - The CPU kernels' persistent worker pool ----------===//
//
// One pool per process of parallelThreads() - 1 workers, started on first
// use and never stopped (they sleep on a condition variable between calls;
// the process exits with them parked). A call publishes its task under a
// new generation number, wakes the workers, runs task 0 itself and waits
// until the others report done.
//
//===----------------------------------------------------------------------===//
#include "ParallelFor.h"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

using namespace tofu::runtime;

namespace {

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
    {
      std::lock_guard<std::mutex> lock(mutex);
      task = &fn;
      taskCount = onWorkers;
      pending = onWorkers - 1;
      ++generation;
    }
    wake.notify_all();
    fn(0);
    for (unsigned t = onWorkers; t < count; ++t)
      fn(t);
    std::unique_lock<std::mutex> lock(mutex);
    done.wait(lock, [&] { return pending == 0; });
    task = nullptr;
    return true;
  }

private:
  void work(unsigned index) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(unsigned)> *fn;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return generation != seen; });
        seen = generation;
        if (index >= taskCount)
          continue;
        fn = task;
      }
      (*fn)(index);
      std::lock_guard<std::mutex> lock(mutex);
      if (--pending == 0)
        done.notify_one();
    }
  }

  std::mutex inUse; ///< held by the one run() in progress
  std::mutex mutex;
  std::condition_variable wake, done;
  const std::function<void(unsigned)> *task = nullptr;
  unsigned taskCount = 0, pending = 0, numWorkers = 0;
  uint64_t generation = 0;
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
  if (count > 1 && pool->run(count, task))
    return;
  for (unsigned t = 0; t < count; ++t)
    task(t);
}
