//===- ParallelForTest.cpp - The CPU kernels' worker pool ------------------===//
//
// The pool pins its threads to distinct CPUs where the process may use more
// CPUs than the pool has threads (ParallelFor.cpp): left to the scheduler, a
// worker often shared the main thread's CPU for ~100 ms, and concurrent
// virtual devices ran at the in-order speed.
//
//===----------------------------------------------------------------------===//
#include "../lib/ParallelFor.h"

#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

using namespace tofu::runtime;

namespace {

/// The CPUs this process may run on.
std::vector<int> allowedCpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set))
        cpus.push_back(c);
  return cpus;
}

/// The single CPU the calling thread is pinned to, or -1.
int pinnedCpuOfThisThread() {
  cpu_set_t set;
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0 ||
      CPU_COUNT(&set) != 1)
    return -1;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set))
      return c;
  return -1;
}

} // namespace

TEST(WorkerPool, PinsItsThreadsToDistinctCpus) {
  const std::vector<int> allowed = allowedCpus();
  const unsigned threads = parallelThreads();
  if (threads < 2 || allowed.size() < threads)
    GTEST_SKIP() << "needs at least 2 allowed CPUs and as many as the pool's "
                 << threads << " threads (this process may use "
                 << allowed.size() << ")";
  // The process's first allowed CPUs, the starting thread's first.
  std::vector<int> pinned = poolPinnedCpus();
  ASSERT_EQ(pinned.size(), threads);
  EXPECT_EQ(std::vector<int>(allowed.begin(), allowed.begin() + threads),
            pinned);
  EXPECT_EQ(pinnedCpuOfThisThread(), pinned[0]);

  // Every task of one call waits until all have started, so each runs on a
  // thread of its own (or, after 10 s, the test fails): each thread runs
  // pinned to its one CPU, all of them distinct.
  std::atomic<unsigned> started{0};
  std::vector<int> cpuOfTask(threads, -2);
  std::atomic<bool> timedOut{false};
  runOnPool(threads, [&](unsigned t) {
    ++started;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (started.load() < threads)
      if (std::chrono::steady_clock::now() > until) {
        timedOut = true;
        break;
      }
    cpuOfTask[t] = pinnedCpuOfThisThread();
  });
  ASSERT_FALSE(timedOut) << "the pool's threads did not all take a task";
  EXPECT_EQ(std::set<int>(cpuOfTask.begin(), cpuOfTask.end()),
            std::set<int>(pinned.begin(), pinned.end()));
}

TEST(WorkerPool, RunOnThisThreadKeepsLoopsOnTheCaller) {
  // A loop large enough to thread: inside runOnThisThread every range runs
  // on the calling thread and the pool is not used; outside, with more than
  // one thread, the pool is.
  const int64_t n = int64_t(1) << 20;
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  auto loop = [&] {
    parallelFor(n, 1.0, [&](int64_t, int64_t) {
      if (std::this_thread::get_id() != caller)
        ++elsewhere;
    });
  };
  const uint64_t before = poolRuns();
  runOnThisThread(loop);
  EXPECT_EQ(elsewhere.load(), 0);
  EXPECT_EQ(poolRuns(), before);
  // Nested: the inner call restores the outer one's serial state.
  runOnThisThread([&] {
    runOnThisThread([] {});
    loop();
  });
  EXPECT_EQ(poolRuns(), before);
  if (parallelThreads() < 2)
    GTEST_SKIP() << "one hardware thread: nothing runs on the pool";
  loop();
  EXPECT_EQ(poolRuns(), before + 1);
}
