//===- TensorAssembly.cpp - Whole tensors from owned buffers --------------===//

#include "tofu/runtime/TensorAssembly.h"

#include <cstring>

using namespace tofu::runtime;
using namespace tofu::plan;

std::string tofu::runtime::assembleTensor(const Plan &plan, int32_t tensor,
                                          const BufferSource &source,
                                          std::vector<uint8_t> &out) {
  const TensorInfo &t = plan.tensors[tensor];
  const size_t es = dtypeSize(t.dtype);
  const size_t rank = t.shape.size();
  int64_t total = 1;
  for (int64_t d : t.shape)
    total *= d;
  out.assign(static_cast<size_t>(total) * es, 0);
  std::vector<uint8_t> covered(static_cast<size_t>(total), 0);
  std::vector<int64_t> gstride(rank, 1);
  for (size_t i = rank; i-- > 1;)
    gstride[i - 1] = gstride[i] * t.shape[i];

  for (size_t d = 0; d < plan.devices.size(); ++d) {
    const auto &buffers = plan.devices[d].buffers;
    for (size_t b = 0; b < buffers.size(); ++b) {
      const Buffer &buf = buffers[b];
      // An empty share (a dim of n split over more than n devices) holds
      // nothing: there is no value to ask for.
      if (buf.tensor != tensor || !buf.owned || buf.region.numElements() == 0)
        continue;
      const uint8_t *src =
          source(static_cast<int32_t>(d), static_cast<int32_t>(b));
      if (!src)
        return "the value of tensor '" + t.name + "' on device " +
               std::to_string(d) + " (buffer " + std::to_string(b) +
               ") is not available";
      int64_t n = buf.region.numElements();
      std::vector<int64_t> idx(buf.region.lo);
      for (int64_t e = 0; e < n; ++e) {
        int64_t g = 0;
        for (size_t i = 0; i < rank; ++i)
          g += idx[i] * gstride[i];
        std::memcpy(&out[g * es], src + e * es, es);
        covered[g] = 1;
        for (size_t i = rank; i-- > 0;) {
          if (++idx[i] < buf.region.hi[i])
            break;
          idx[i] = buf.region.lo[i];
        }
      }
    }
  }
  for (int64_t g = 0; g < total; ++g)
    if (!covered[g])
      return "the owned buffers of tensor '" + t.name +
             "' do not cover element " + std::to_string(g) +
             "; the plan is inconsistent (recompile it with tofuc)";
  return "";
}

void tofu::runtime::extractRegion(const std::vector<uint8_t> &whole,
                                  const std::vector<int64_t> &shape,
                                  size_t elementSize, const Box &region,
                                  std::vector<uint8_t> &out) {
  const size_t rank = shape.size();
  const int64_t n = region.numElements();
  out.assign(static_cast<size_t>(n) * elementSize, 0);
  if (n == 0)
    return;
  std::vector<int64_t> gstride(rank, 1);
  for (size_t i = rank; i-- > 1;)
    gstride[i - 1] = gstride[i] * shape[i];
  // The innermost dimension is one contiguous run in both layouts.
  const int64_t run = rank ? region.hi[rank - 1] - region.lo[rank - 1] : 1;
  std::vector<int64_t> idx(region.lo);
  for (int64_t e = 0; e < n; e += run) {
    int64_t g = 0;
    for (size_t i = 0; i < rank; ++i)
      g += idx[i] * gstride[i];
    std::memcpy(&out[e * elementSize], &whole[g * elementSize],
                run * elementSize);
    for (size_t i = rank > 0 ? rank - 1 : 0; i-- > 0;) {
      if (++idx[i] < region.hi[i])
        break;
      idx[i] = region.lo[i];
    }
  }
}

BufferSource tofu::runtime::copiesSource(const BufferCopies &copies) {
  return [&copies](int32_t d, int32_t b) -> const uint8_t * {
    static const uint8_t empty = 0;
    auto it = copies.find({d, b});
    if (it == copies.end())
      return nullptr;
    return it->second.empty() ? &empty : it->second.data();
  };
}
