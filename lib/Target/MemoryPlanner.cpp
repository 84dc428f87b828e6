//===- MemoryPlanner.cpp - static per-device memory plan ------------------===//
//
// Each buffer lives from the first instruction that writes it to the last
// instruction, on any device, that reads it (peers read a device's buffers
// through fetches, so liveness is global). Parameters and the step's input
// batch are persistent. Buffers are placed first fit, in order of first
// write, at 64-byte aligned offsets; the peak is the arena size.
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
} // namespace

void planMemory(plan::Plan &plan) {
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
    auto &buffers = plan.devices[d].buffers;
    for (size_t b = 0; b < buffers.size(); ++b) {
      plan::TensorRole role = plan.tensors[buffers[b].tensor].role;
      bool persistent = buffers[b].owned && (role == plan::TensorRole::Param ||
                                             role == plan::TensorRole::State ||
                                             role == plan::TensorRole::Input ||
                                             role == plan::TensorRole::Label);
      if (persistent || life[d][b].last < 0)
        life[d][b] = {-1, kForever};
    }
    // First fit in order of first use; ties by size (largest first), then id.
    std::vector<size_t> order(buffers.size());
    for (size_t b = 0; b < order.size(); ++b)
      order[b] = b;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (life[d][a].first != life[d][b].first)
        return life[d][a].first < life[d][b].first;
      return buffers[a].bytes > buffers[b].bytes;
    });
    std::vector<size_t> placed;
    uint64_t peak = 0;
    for (size_t b : order) {
      uint64_t size = alignUp(buffers[b].bytes);
      if (size == 0) {
        buffers[b].offset = 0;
        continue;
      }
      // Intervals of address space taken by buffers alive at the same time.
      std::vector<std::pair<uint64_t, uint64_t>> taken;
      for (size_t p : placed)
        if (!(life[d][p].last < life[d][b].first ||
              life[d][b].last < life[d][p].first))
          taken.push_back({buffers[p].offset,
                           buffers[p].offset + alignUp(buffers[p].bytes)});
      std::sort(taken.begin(), taken.end());
      uint64_t offset = 0;
      for (auto [lo, hi] : taken) {
        if (offset + size <= lo)
          break;
        offset = std::max(offset, hi);
      }
      buffers[b].offset = offset;
      peak = std::max(peak, offset + size);
      placed.push_back(b);
    }
    plan.devices[d].peakBytes = peak;
  }
}

} // namespace tofu
