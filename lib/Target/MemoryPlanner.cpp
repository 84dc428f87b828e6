//===- MemoryPlanner.cpp - static per-device memory plan ------------------===//
//
// Each buffer lives from the first instruction that writes it to the last
// instruction, on any device, that reads it (peers read a device's buffers
// through fetches, so liveness is global). Parameters and the step's input
// batch are persistent. Buffers are placed first fit at 64-byte aligned
// offsets, in two orders (by first use, and by size, largest first); the
// smaller arena wins, and its size is the peak. The liveness
// lower bound (the most bytes live at one moment) is computed from the same
// lifetimes, so the two are comparable (bench/memory.md).
//
//===----------------------------------------------------------------------===//
#include "tofu/Target/PlanBuilder.h"

#include <algorithm>
#include <limits>

namespace tofu {

namespace {
constexpr uint64_t kAlignment = 64;
constexpr int64_t kForever = std::numeric_limits<int64_t>::max();

struct Lifetime {
  int64_t first = kForever, last = -1;
  void touch(int64_t seq) {
    first = std::min(first, seq);
    last = std::max(last, seq);
  }
};

uint64_t alignUp(uint64_t value) {
  return (value + kAlignment - 1) / kAlignment * kAlignment;
}

/// Every buffer's lifetime in `seq` units; persistent and never-used
/// buffers live for the whole step ({-1, kForever}).
std::vector<std::vector<Lifetime>> bufferLifetimes(const plan::Plan &plan) {
  size_t k = plan.devices.size();
  std::vector<std::vector<Lifetime>> life(k);
  for (size_t d = 0; d < k; ++d)
    life[d].resize(plan.devices[d].buffers.size());
  for (size_t d = 0; d < k; ++d) {
    for (const plan::Instr &instr : plan.devices[d].instrs) {
      for (int32_t b : instr.inputs)
        if (b >= 0)
          life[d][b].touch(instr.seq);
      for (int32_t b : instr.outputs)
        life[d][b].touch(instr.seq);
      if (instr.dst >= 0)
        life[d][instr.dst].touch(instr.seq);
      for (const plan::Piece &piece : instr.pieces)
        life[piece.device][piece.buffer].touch(instr.seq);
    }
  }
  for (size_t d = 0; d < k; ++d) {
    const auto &buffers = plan.devices[d].buffers;
    for (size_t b = 0; b < buffers.size(); ++b) {
      plan::TensorRole role = plan.tensors[buffers[b].tensor].role;
      bool persistent = buffers[b].owned && (role == plan::TensorRole::Param ||
                                             role == plan::TensorRole::State ||
                                             role == plan::TensorRole::Input ||
                                             role == plan::TensorRole::Label);
      if (persistent || life[d][b].last < 0)
        life[d][b] = {-1, kForever};
    }
  }
  return life;
}

} // namespace

std::vector<uint64_t> liveBytesLowerBound(const plan::Plan &plan) {
  std::vector<std::vector<Lifetime>> life = bufferLifetimes(plan);
  std::vector<uint64_t> bound(plan.devices.size(), 0);
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    // Sweep over lifetime ends: +bytes at `first`, -bytes after `last`.
    std::vector<std::pair<int64_t, int64_t>> events;
    const auto &buffers = plan.devices[d].buffers;
    for (size_t b = 0; b < buffers.size(); ++b) {
      int64_t bytes = static_cast<int64_t>(buffers[b].bytes);
      if (bytes == 0)
        continue;
      events.push_back({life[d][b].first, bytes});
      if (life[d][b].last != kForever)
        events.push_back({life[d][b].last + 1, -bytes});
    }
    // At equal times, ends (negative) before starts: [first, last] closed.
    std::sort(events.begin(), events.end());
    int64_t live = 0, most = 0;
    for (const auto &[time, delta] : events) {
      live += delta;
      most = std::max(most, live);
    }
    bound[d] = static_cast<uint64_t>(most);
  }
  return bound;
}

namespace {

/// First-fit placement of a device's buffers in `order`: each at the lowest
/// 64-byte aligned offset that no already placed buffer with an overlapping
/// lifetime occupies. Returns the offsets and sets `peak` to the arena size.
std::vector<uint64_t> placeFirstFit(const std::vector<plan::Buffer> &buffers,
                                    const std::vector<Lifetime> &life,
                                    const std::vector<size_t> &order,
                                    uint64_t &peak) {
  std::vector<uint64_t> offsets(buffers.size(), 0);
  std::vector<size_t> placed;
  peak = 0;
  for (size_t b : order) {
    uint64_t size = alignUp(buffers[b].bytes);
    if (size == 0)
      continue;
    // Intervals of address space taken by buffers alive at the same time.
    std::vector<std::pair<uint64_t, uint64_t>> taken;
    for (size_t p : placed)
      if (!(life[p].last < life[b].first || life[b].last < life[p].first))
        taken.push_back({offsets[p], offsets[p] + alignUp(buffers[p].bytes)});
    std::sort(taken.begin(), taken.end());
    uint64_t offset = 0;
    for (auto [lo, hi] : taken) {
      if (offset + size <= lo)
        break;
      offset = std::max(offset, hi);
    }
    offsets[b] = offset;
    peak = std::max(peak, offset + size);
    placed.push_back(b);
  }
  return offsets;
}

} // namespace

void planMemory(plan::Plan &plan) {
  size_t k = plan.devices.size();
  std::vector<std::vector<Lifetime>> life = bufferLifetimes(plan);
  for (size_t d = 0; d < k; ++d) {
    auto &buffers = plan.devices[d].buffers;
    std::vector<size_t> byFirstUse(buffers.size());
    for (size_t b = 0; b < byFirstUse.size(); ++b)
      byFirstUse[b] = b;
    std::vector<size_t> bySize = byFirstUse;
    // Two first-fit orders; the smaller arena wins (the first on a tie):
    // by first use (ties: largest first, then id), and by size, largest
    // first (ties: first use, then id), which packs long-lived large
    // buffers before the small ones fragment the arena.
    std::stable_sort(byFirstUse.begin(), byFirstUse.end(),
                     [&](size_t a, size_t b) {
                       if (life[d][a].first != life[d][b].first)
                         return life[d][a].first < life[d][b].first;
                       return buffers[a].bytes > buffers[b].bytes;
                     });
    std::stable_sort(bySize.begin(), bySize.end(), [&](size_t a, size_t b) {
      if (buffers[a].bytes != buffers[b].bytes)
        return buffers[a].bytes > buffers[b].bytes;
      return life[d][a].first < life[d][b].first;
    });
    uint64_t peak = 0;
    std::vector<uint64_t> offsets =
        placeFirstFit(buffers, life[d], byFirstUse, peak);
    uint64_t peakSize = 0;
    std::vector<uint64_t> bySizeOffsets =
        placeFirstFit(buffers, life[d], bySize, peakSize);
    if (peakSize < peak) {
      offsets = std::move(bySizeOffsets);
      peak = peakSize;
    }
    for (size_t b = 0; b < buffers.size(); ++b)
      buffers[b].offset = offsets[b];
    plan.devices[d].peakBytes = peak;
  }
}

} // namespace tofu
