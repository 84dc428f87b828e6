//===- SharedPrograms.cpp - One program per class of devices --------------===//
//
// See SharedPrograms.h.
//
//===----------------------------------------------------------------------===//
#include "tofu/runtime/SharedPrograms.h"

#include <map>

namespace tofu::plan {

bool sameInProgram(const Buffer &a, const Buffer &b) {
  return a.tensor == b.tensor && a.partial == b.partial &&
         a.owned == b.owned && a.offset == b.offset && a.bytes == b.bytes &&
         a.hasInit() == b.hasInit();
}

bool sameInProgram(const Instr &a, const Instr &b) {
  if (a.kind != b.kind || a.seq != b.seq || a.dst != b.dst ||
      a.inputs != b.inputs || a.outputs != b.outputs ||
      a.spec.get() != b.spec.get() || a.sources.get() != b.sources.get() ||
      !(a.kernel == b.kernel) || !(a.op == b.op) ||
      a.reductionRanges.size() != b.reductionRanges.size())
    return false;
  for (size_t r = 0; r < a.reductionRanges.size(); ++r)
    if (a.reductionRanges[r].size() != b.reductionRanges[r].size())
      return false;
  if (a.sources)
    return true; // pieces derived from the table (plan.bin holds none)
  if (a.pieces.size() != b.pieces.size())
    return false;
  for (size_t p = 0; p < a.pieces.size(); ++p)
    if (a.pieces[p].device != b.pieces[p].device ||
        a.pieces[p].buffer != b.pieces[p].buffer ||
        a.pieces[p].region.lo != b.pieces[p].region.lo ||
        a.pieces[p].region.hi != b.pieces[p].region.hi)
      return false;
  return true;
}

bool hasSharedPrograms(const Plan &plan) {
  for (const DeviceProgram &dev : plan.devices)
    if (dev.programOf >= 0)
      return true;
  return false;
}

std::vector<std::vector<uint32_t>> devicesByProgram(const Plan &plan) {
  std::vector<std::vector<uint32_t>> runners(plan.devices.size());
  for (size_t d = 0; d < plan.devices.size(); ++d)
    runners[programOwner(plan, d)].push_back(static_cast<uint32_t>(d));
  return runners;
}

void detachSharedProgram(Plan &plan, size_t device) {
  DeviceProgram &dev = plan.devices[device];
  if (dev.programOf < 0)
    return;
  const DeviceProgram &owner = plan.devices[dev.programOf];
  dev.buffers = owner.buffers;
  for (size_t b = 0; b < dev.buffers.size(); ++b) {
    const size_t start = owner.regionStarts[b];
    const size_t rank = (owner.regionStarts[b + 1] - start) / 2;
    const int64_t *lo = dev.sharedRegions.data() + start;
    dev.buffers[b].region = BoxView(lo, lo + rank, rank).toBox();
  }
  for (Buffer &buffer : dev.buffers) {
    buffer.init.clear();
    buffer.borrowedInit = nullptr;
  }
  for (SharedInit &init : dev.sharedInits) {
    Buffer &buffer = dev.buffers[init.buffer];
    buffer.init = std::move(init.init);
    buffer.borrowedInit = init.borrowedInit;
  }
  dev.instrs = owner.instrs;
  size_t next = 0;
  for (Instr &in : dev.instrs)
    for (auto &list : in.reductionRanges)
      for (auto &range : list)
        range = dev.sharedReductionRanges[next++];
  dev.regionStarts = owner.regionStarts;
  dev.programOf = -1;
  std::vector<int64_t>().swap(dev.sharedRegions);
  std::vector<std::pair<int64_t, int64_t>>().swap(dev.sharedReductionRanges);
  std::vector<SharedInit>().swap(dev.sharedInits);
}

void splitSharedPrograms(Plan &plan,
                         const std::vector<std::vector<int64_t>> &keys) {
  std::map<std::pair<int32_t, std::vector<int64_t>>, int32_t> newOwner;
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    const int32_t owner = plan.devices[d].programOf;
    if (owner < 0 || keys[d] == keys[owner])
      continue;
    auto [it, added] =
        newOwner.try_emplace({owner, keys[d]}, static_cast<int32_t>(d));
    if (added)
      detachSharedProgram(plan, d);
    else
      plan.devices[d].programOf = it->second;
  }
}

void reorderProgramInstrs(Plan &plan, size_t owner,
                          const std::vector<uint32_t> &order) {
  std::vector<Instr> &instrs = plan.devices[owner].instrs;
  // Where each old instruction's bounds start in a sharing device's table.
  std::vector<size_t> starts(instrs.size() + 1, 0);
  for (size_t i = 0; i < instrs.size(); ++i) {
    size_t count = 0;
    for (const auto &list : instrs[i].reductionRanges)
      count += list.size();
    starts[i + 1] = starts[i] + count;
  }
  for (DeviceProgram &dev : plan.devices) {
    if (dev.programOf != static_cast<int32_t>(owner) ||
        starts.back() == 0)
      continue;
    std::vector<std::pair<int64_t, int64_t>> bounds;
    bounds.reserve(dev.sharedReductionRanges.size());
    for (uint32_t i : order)
      bounds.insert(bounds.end(),
                    dev.sharedReductionRanges.begin() + starts[i],
                    dev.sharedReductionRanges.begin() + starts[i + 1]);
    dev.sharedReductionRanges.swap(bounds);
  }
  std::vector<Instr> reordered;
  reordered.reserve(order.size());
  for (uint32_t i : order)
    reordered.push_back(std::move(instrs[i]));
  instrs.swap(reordered);
}

void expandSharedPrograms(Plan &plan) {
  for (size_t d = 0; d < plan.devices.size(); ++d)
    detachSharedProgram(plan, d);
  for (DeviceProgram &dev : plan.devices)
    std::vector<size_t>().swap(dev.regionStarts);
}

} // namespace tofu::plan
