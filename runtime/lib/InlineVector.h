//===- InlineVector.h - A vector with inline storage for small sizes -*- C++ -*-===//
//
// The per-call bookkeeping of the CPU kernels (loop extents, strides and
// offsets per operand, one entry per tensor dim) is a handful of integers:
// keeping it in std::vector cost a dozen heap allocations per kernel call,
// which for the many tiny ops of an RNN step was a fifth of the step (perf,
// LSTM language model at k = 4). InlineVector keeps up to N elements in the
// object itself and moves to the heap only beyond that, so a nest of usual
// rank never allocates. The runtime does not link LLVM, whose SmallVector
// this mirrors in the small subset the kernels use.
// Internal to tofu_runtime.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_LIB_INLINEVECTOR_H
#define TOFU_RUNTIME_LIB_INLINEVECTOR_H

#include <array>
#include <cstddef>
#include <type_traits>
#include <vector>

namespace tofu::runtime {

/// A sequence of T stored inline up to N elements, on the heap beyond.
/// T must be default-constructible and copyable, and not bool (the heap
/// part is a std::vector; use uint8_t).
template <typename T, size_t N> class InlineVector {
  static_assert(!std::is_same_v<T, bool>, "use uint8_t for flags");
  template <typename It>
  using IfIterator = std::enable_if_t<!std::is_integral_v<It>, int>;

public:
  InlineVector() = default;
  InlineVector(size_t n, const T &value) { assign(n, value); }
  template <typename It, IfIterator<It> = 0> InlineVector(It first, It last) {
    assign(first, last);
  }

  size_t size() const { return count; }
  bool empty() const { return count == 0; }
  T *data() { return onHeap ? heap.data() : local.data(); }
  const T *data() const { return onHeap ? heap.data() : local.data(); }
  T *begin() { return data(); }
  T *end() { return data() + count; }
  const T *begin() const { return data(); }
  const T *end() const { return data() + count; }
  T &operator[](size_t i) { return data()[i]; }
  const T &operator[](size_t i) const { return data()[i]; }
  T &back() { return data()[count - 1]; }
  const T &back() const { return data()[count - 1]; }

  void push_back(T value) {
    if (!onHeap && count == N)
      spill();
    if (onHeap)
      heap.push_back(std::move(value));
    else
      local[count] = std::move(value);
    ++count;
  }
  void clear() {
    heap.clear();
    onHeap = false;
    count = 0;
  }
  void assign(size_t n, const T &value) {
    clear();
    for (size_t i = 0; i < n; ++i)
      push_back(value);
  }
  template <typename It, IfIterator<It> = 0> void assign(It first, It last) {
    clear();
    for (; first != last; ++first)
      push_back(*first);
  }

private:
  /// Moves the inline elements to the heap (the size passes N).
  void spill() {
    heap.assign(local.begin(), local.begin() + count);
    onHeap = true;
  }

  std::array<T, N> local{};
  std::vector<T> heap; ///< the elements when onHeap
  size_t count = 0;
  bool onHeap = false;
};

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_LIB_INLINEVECTOR_H
