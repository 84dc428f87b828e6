//===- CudaFeed.cpp - Where a CUDA step's batches are staged --------------===//
//
// See CudaFeed.h.
//
//===----------------------------------------------------------------------===//

#include "CudaFeed.h"

#include <algorithm>

using namespace tofu::cuda;
using namespace tofu::plan;

namespace {

bool isFed(const Plan &plan, const Buffer &b) {
  const TensorRole role = plan.tensors[b.tensor].role;
  return role == TensorRole::Input || role == TensorRole::Label;
}

} // namespace

FeedLayout tofu::cuda::feedLayout(const Plan &plan,
                                  const std::function<bool(int32_t)> &owns) {
  FeedLayout layout;
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    if (!owns(static_cast<int32_t>(d)))
      continue;
    const auto &buffers = plan.devices[d].buffers;
    for (size_t b = 0; b < buffers.size(); ++b) {
      if (!isFed(plan, buffers[b]))
        continue;
      FeedCopy c;
      c.device = static_cast<int32_t>(d);
      c.buffer = static_cast<int32_t>(b);
      c.staging = layout.stagingBytes;
      c.bytes = buffers[b].bytes;
      c.dst = {c.device, buffers[b].offset};
      layout.stagingBytes += (c.bytes + FeedLayout::kAlign - 1) /
                             FeedLayout::kAlign * FeedLayout::kAlign;
      layout.copies.push_back(c);
    }
  }
  return layout;
}

std::string
tofu::cuda::validateFeedLayout(const Plan &plan,
                               const std::function<bool(int32_t)> &owns,
                               const FeedLayout &layout) {
  size_t expected = 0;
  for (size_t d = 0; d < plan.devices.size(); ++d)
    if (owns(static_cast<int32_t>(d)))
      for (const Buffer &b : plan.devices[d].buffers)
        expected += isFed(plan, b);
  if (layout.copies.size() != expected)
    return "the feed has " + std::to_string(layout.copies.size()) +
           " copies for " + std::to_string(expected) + " Input/Label buffers";
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  std::vector<std::pair<int32_t, int32_t>> seen;
  for (const FeedCopy &c : layout.copies) {
    const std::string what = "feed copy of device " + std::to_string(c.device) +
                             " buffer " + std::to_string(c.buffer);
    if (c.device < 0 || c.device >= static_cast<int32_t>(plan.devices.size()) ||
        !owns(c.device) || c.buffer < 0 ||
        c.buffer >= static_cast<int32_t>(plan.devices[c.device].buffers.size()))
      return what + ": no buffer of an owned device";
    const Buffer &b = plan.devices[c.device].buffers[c.buffer];
    if (!isFed(plan, b))
      return what + ": not an Input or Label buffer";
    if (c.bytes != b.bytes || c.dst.device != c.device || c.dst.offset != b.offset)
      return what + ": does not copy the whole buffer to its place";
    if (c.staging % FeedLayout::kAlign != 0 ||
        c.staging + c.bytes > layout.stagingBytes)
      return what + ": staging range outside the area or unaligned";
    seen.push_back({c.device, c.buffer});
    if (c.bytes > 0)
      ranges.push_back({c.staging, c.staging + c.bytes});
  }
  std::sort(seen.begin(), seen.end());
  if (std::adjacent_find(seen.begin(), seen.end()) != seen.end())
    return "a buffer is fed twice";
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      return "two feed copies share staging bytes";
  return "";
}

bool tofu::cuda::cacheSyntheticBatches(FeedLayout &layout,
                                       int64_t numBatches) {
  layout.slots = 1;
  if (numBatches <= 1 || layout.stagingBytes == 0 ||
      layout.stagingBytes > FeedLayout::kMaxCachedBytes /
                                static_cast<uint64_t>(numBatches))
    return false;
  layout.slots = numBatches;
  return true;
}

std::string tofu::cuda::fillFeed(const Plan &plan, const FeedLayout &layout,
                                 const FeedFill &fill, int64_t step,
                                 uint8_t *area) {
  uint8_t *slot = area + layout.slotOffset(step);
  for (const FeedCopy &c : layout.copies) {
    const Buffer &b = plan.devices[c.device].buffers[c.buffer];
    if (std::string err = fill(b.tensor, b.region, step, slot + c.staging);
        !err.empty())
      return "feeding device " + std::to_string(c.device) + " buffer " +
             std::to_string(c.buffer) + ": " + err;
  }
  return "";
}
