//===- CudaDeviceState.cpp - Plan buffers in the GPUs' memory -------------===//
//
// See CudaDeviceState.h.
//
//===----------------------------------------------------------------------===//

#include "CudaDeviceState.h"

using namespace tofu::cuda;
using namespace tofu::plan;

std::vector<std::vector<BufferLocation>>
tofu::cuda::locateBuffers(const Plan &plan, const DeviceMapping &mapping) {
  std::vector<std::vector<BufferLocation>> where(plan.devices.size());
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    const DevicePlacement &placement = mapping.devices[d];
    for (const Buffer &b : plan.devices[d].buffers) {
      BufferLocation loc;
      loc.gpu = placement.gpu;
      loc.offset = placement.base + b.offset;
      loc.bytes = b.bytes;
      loc.dtype = plan.tensors[b.tensor].dtype;
      loc.region = b.region;
      where[d].push_back(loc);
    }
  }
  return where;
}

std::string
HostBufferCopies::read(const Plan &plan, const DeviceMapping &mapping,
                       const std::function<bool(int32_t tensor)> &wanted,
                       const DeviceReader &reader) {
  copies.clear();
  const auto where = locateBuffers(plan, mapping);
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    const auto &buffers = plan.devices[d].buffers;
    for (size_t b = 0; b < buffers.size(); ++b) {
      if (!buffers[b].owned || !wanted(buffers[b].tensor))
        continue;
      const BufferLocation &loc = where[d][b];
      std::vector<uint8_t> &bytes =
          copies[{static_cast<int32_t>(d), static_cast<int32_t>(b)}];
      bytes.resize(loc.bytes);
      if (loc.bytes == 0)
        continue;
      if (std::string err = reader(loc.gpu, loc.offset, loc.bytes,
                                   bytes.data());
          !err.empty())
        return "reading device " + std::to_string(d) + "'s buffer of '" +
               plan.tensors[buffers[b].tensor].name + "' back: " + err;
    }
  }
  return "";
}

tofu::runtime::BufferSource HostBufferCopies::source() const {
  return runtime::copiesSource(copies);
}

bool tofu::cuda::savedTensor(const TensorInfo &tensor) {
  return tensor.role == TensorRole::Param || tensor.role == TensorRole::State;
}

std::vector<std::vector<std::pair<int32_t, int32_t>>>
tofu::cuda::snapshotPoints(
    const Plan &plan, const Schedule &schedule,
    const std::vector<std::pair<int32_t, int32_t>> &watched) {
  // The last entry (in issue order) writing each buffer.
  std::map<std::pair<int32_t, int32_t>, int32_t> lastWriter;
  for (size_t s = 0; s < schedule.instrs.size(); ++s) {
    const ScheduledInstr &e = schedule.instrs[s];
    const DeviceProgram &dev = plan.devices[e.device];
    // A fused launch writes the outputs of its whole chain.
    for (int32_t i = e.firstIndex; i <= e.index; ++i) {
      const Instr &in = dev.instrs[i];
      if (in.kind == Instr::Kind::Compute) {
        for (int32_t out : in.outputs)
          if (out >= 0)
            lastWriter[{e.device, out}] = static_cast<int32_t>(s);
      } else if (in.dst >= 0) {
        lastWriter[{e.device, in.dst}] = static_cast<int32_t>(s);
      }
    }
  }
  std::vector<std::vector<std::pair<int32_t, int32_t>>> points(
      schedule.instrs.size());
  for (const auto &key : watched) {
    auto it = lastWriter.find(key);
    if (it != lastWriter.end())
      points[it->second].push_back(key);
  }
  return points;
}
