//===- CudaFeed.h - Where a CUDA step's batches are staged ------*- C++ -*-===//
//
// Each step the CUDA executor feeds every Input and Label buffer of its plan
// devices (synthetic batches or --data). It fills them all into one pinned
// host area (cudaHostAlloc, allocated once) and copies each to its device
// buffer with cudaMemcpyAsync, then waits once per GPU: the copies run as
// DMA from page-locked memory instead of one synchronous copy from pageable
// memory per buffer. This file lays the area out, in plain C++, so that the
// host emulator feeds through the same layout.
//
// The synthetic batches (SyntheticData: a fixed set of `numBatches`
// batches, step s feeding batch s % numBatches) are filled once: the area
// then holds one slot per batch, all filled at init, and a step only copies
// from its slot. Filling is host work of the order of the step itself on a
// GPU (gpt-big's 2 MiB input: ~5 to 11 ms a fill against a ~6 ms step), so
// a step that filled its batch took twice its GPU time. Batches from
// `--data` (a DataSource) are still filled every step, into one slot.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDAFEED_H
#define TOFU_RUNTIME_CUDA_CUDAFEED_H

#include "CudaSchedule.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tofu::cuda {

/// One Input or Label buffer fed each step.
struct FeedCopy {
  int32_t device = -1; ///< plan device
  int32_t buffer = -1; ///< its buffer (an Input or Label tensor's)
  uint64_t staging = 0; ///< byte offset in the pinned staging area
  uint64_t bytes = 0;   ///< the buffer's bytes (0: empty share, nothing copied)
  DevicePointer dst;    ///< the buffer in its device's arena
};

/// The pinned staging area of one process and the copies out of it.
struct FeedLayout {
  std::vector<FeedCopy> copies; ///< plan device order, then buffer order
  uint64_t stagingBytes = 0;    ///< one slot's size (a multiple of kAlign)
  /// Slots in the area: 1 (the step's batch is filled into it every step)
  /// or the synthetic data's batch count (each filled once, at init; see
  /// cacheSyntheticBatches).
  int64_t slots = 1;
  static constexpr uint64_t kAlign = 64;
  /// The most pinned bytes the cached synthetic batches may take.
  static constexpr uint64_t kMaxCachedBytes = 64ull << 20;

  /// The area's size.
  uint64_t areaBytes() const { return static_cast<uint64_t>(slots) * stagingBytes; }
  /// Where in the area step `step`'s batch is staged (copy c of it at
  /// slotOffset(step) + c.staging).
  uint64_t slotOffset(int64_t step) const {
    return static_cast<uint64_t>(step % slots) * stagingBytes;
  }
};

/// The layout for the plan devices `owns` accepts (this process's), every
/// Input/Label buffer of each at its own kAlign-aligned staging offset.
FeedLayout feedLayout(const plan::Plan &plan,
                      const std::function<bool(int32_t)> &owns);

/// Gives `layout` one slot per batch of a synthetic data source of
/// `numBatches` batches when they fit FeedLayout::kMaxCachedBytes (else
/// leaves one slot). Returns whether it did: the caller then fills batch b
/// into slot b once (fillFeed with step b) and never again.
bool cacheSyntheticBatches(FeedLayout &layout, int64_t numBatches);

/// Fills one Input/Label box: tensor, its region, the step, where to write.
using FeedFill = std::function<std::string(int32_t tensor, const plan::Box &,
                                           int64_t step, void *out)>;

/// Fills step `step`'s batch into its slot of `area` (areaBytes() long):
/// every copy's staging range, by `fill`.
std::string fillFeed(const plan::Plan &plan, const FeedLayout &layout,
                     const FeedFill &fill, int64_t step, uint8_t *area);

/// "" if `layout` feeds every Input/Label buffer of the owned devices once,
/// each from a disjoint staging range inside the area to its own buffer;
/// else what is wrong.
std::string validateFeedLayout(const plan::Plan &plan,
                               const std::function<bool(int32_t)> &owns,
                               const FeedLayout &layout);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDAFEED_H
