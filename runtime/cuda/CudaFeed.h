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
  uint64_t stagingBytes = 0;    ///< the area's size (a multiple of kAlign)
  static constexpr uint64_t kAlign = 64;
};

/// The layout for the plan devices `owns` accepts (this process's), every
/// Input/Label buffer of each at its own kAlign-aligned staging offset.
FeedLayout feedLayout(const plan::Plan &plan,
                      const std::function<bool(int32_t)> &owns);

/// "" if `layout` feeds every Input/Label buffer of the owned devices once,
/// each from a disjoint staging range inside the area to its own buffer;
/// else what is wrong.
std::string validateFeedLayout(const plan::Plan &plan,
                               const std::function<bool(int32_t)> &owns,
                               const FeedLayout &layout);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDAFEED_H
