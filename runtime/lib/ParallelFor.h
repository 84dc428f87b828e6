//===- ParallelFor.h - Split a loop over threads -----------------*- C++ -*-===//
//
// The threading of the CPU kernels: a loop over [0, n) is cut into one
// contiguous range per thread when the work is large enough to pay for the
// threads (each range runs `body(begin, end)`; ranges are disjoint, so
// writes to distinct outputs need no locking). Internal to tofu_runtime.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_LIB_PARALLELFOR_H
#define TOFU_RUNTIME_LIB_PARALLELFOR_H

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace tofu::runtime {

/// Runs `body(begin, end)` over [0, n) on up to 16 threads when
/// n * workPerItem (a rough count of operations) is at least 2^18, else on
/// the calling thread.
template <typename Body>
void parallelFor(int64_t n, double workPerItem, Body body) {
  if (n <= 0)
    return;
  unsigned threads = std::min(16u, std::max(1u, std::thread::hardware_concurrency()));
  if (static_cast<double>(n) * workPerItem < double(1 << 18))
    threads = 1;
  threads = static_cast<unsigned>(std::min<int64_t>(threads, n));
  if (threads <= 1) {
    body(int64_t(0), n);
    return;
  }
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] { body(n * t / threads, n * (t + 1) / threads); });
  for (std::thread &th : pool)
    th.join();
}

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_LIB_PARALLELFOR_H
