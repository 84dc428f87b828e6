//===- MemoryPlannerTest.cpp - static memory plan on fixed lifetimes ------===//
//
// planMemory on a plan built from a table of buffer lifetimes: device 0 of
// the MLP example at k = 4 (tofuc examples/mlp/mlp.onnx --gpus 4), where
// placing buffers first fit by first use or by size leaves the arena 7.9%
// above the most bytes live at one moment. Checks that no two buffers alive
// at the same time share an address, that the arena reaches that bound, and
// that planning is deterministic; that devices with equal buffers (planned
// once per class) each get a valid placement; and that the fast first fit
// places a large random device exactly as the quadratic reference does.
//
//===----------------------------------------------------------------------===//
#include "tofu/Target/PlanBuilder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>

namespace {

namespace plan = tofu::plan;

/// {bytes, first seq, last seq}; last = -2: persistent (a parameter).
struct BufferLife {
  uint64_t bytes;
  int64_t first, last;
};

constexpr BufferLife kMlpDevice0[] = {
    {8192, -1, -2},  {128, -1, -2},   {16384, -1, -2}, {128, -1, -2},
    {1280, -1, -2},  {8, -1, -2},     {4096, -1, -2},  {128, -1, -2},
    {8192, 1, 52},   {8192, 4, 45},   {8192, 7, 40},   {8192, 10, 34},
    {640, 13, 28},   {640, 16, 25},   {4, 20, 22},     {4, 22, 25},
    {640, 25, 28},   {640, 28, 37},   {8192, 31, 40},  {1280, 35, 73},
    {8, 38, 76},     {8192, 40, 49},  {8192, 44, 52},  {16384, 46, 67},
    {128, 50, 70},   {8192, 52, 58},  {8192, 55, 61},  {128, 59, 64},
    {8192, 61, 78},  {128, 64, 78},   {16384, 67, 78}, {128, 70, 78},
    {1280, 73, 78},  {8, 76, 78},     {8192, 0, 1},    {16384, 0, 1},
    {256, 0, 1},     {16384, 6, 7},   {32768, 6, 7},   {256, 6, 7},
    {8192, 12, 13},  {5120, 12, 13},  {40, 12, 13},    {512, 18, 19},
    {4, 19, 20},     {512, 24, 25},   {1280, 30, 31},  {2560, 30, 31},
    {1280, 33, 34},  {2560, 34, 35},  {40, 37, 38},    {16384, 42, 43},
    {16384, 43, 44}, {16384, 45, 46}, {16384, 45, 46}, {256, 49, 50},
    {16384, 54, 55}, {8192, 54, 55},  {256, 58, 59},
};

uint64_t alignUp(uint64_t v) { return (v + 63) / 64 * 64; }

/// One device; buffer b belongs to tensor b (a Param when persistent, else
/// an Activation), written by a Compute at `first` and read by one at `last`.
plan::Plan planFromLifetimes() {
  plan::Plan p;
  p.devices.resize(1);
  plan::DeviceProgram &device = p.devices[0];
  for (const BufferLife &life : kMlpDevice0) {
    int32_t id = static_cast<int32_t>(p.tensors.size());
    plan::TensorInfo tensor;
    tensor.name = "t" + std::to_string(id);
    tensor.shape = {static_cast<int64_t>(life.bytes)};
    tensor.dtype = plan::DType::Bool;
    tensor.role = life.last == -2 ? plan::TensorRole::Param
                                  : plan::TensorRole::Activation;
    p.tensors.push_back(tensor);
    plan::Buffer buffer;
    buffer.tensor = id;
    buffer.owned = true;
    buffer.bytes = life.bytes;
    device.buffers.push_back(buffer);
    if (life.last == -2)
      continue;
    plan::Instr write;
    write.kernel = "Write";
    write.seq = life.first;
    write.outputs = {id};
    device.instrs.push_back(write);
    plan::Instr read;
    read.kernel = "Read";
    read.seq = life.last;
    read.inputs = {id};
    device.instrs.push_back(read);
  }
  std::stable_sort(device.instrs.begin(), device.instrs.end(),
                   [](const plan::Instr &a, const plan::Instr &b) {
                     return a.seq < b.seq;
                   });
  return p;
}

bool liveTogether(const BufferLife &a, const BufferLife &b) {
  if (a.last == -2 || b.last == -2)
    return true;
  return !(a.last < b.first || b.last < a.first);
}

TEST(MemoryPlanner, PacksTheMlpDeviceAtTheLivenessBound) {
  plan::Plan p = planFromLifetimes();
  std::vector<uint64_t> bound = tofu::planMemory(p);
  const auto &buffers = p.devices[0].buffers;
  constexpr size_t n = std::size(kMlpDevice0);
  ASSERT_EQ(buffers.size(), n);
  uint64_t top = 0;
  for (size_t a = 0; a < n; ++a) {
    EXPECT_EQ(buffers[a].offset % 64, 0u) << "buffer " << a;
    top = std::max(top, buffers[a].offset + buffers[a].bytes);
    for (size_t b = a + 1; b < n; ++b) {
      if (!liveTogether(kMlpDevice0[a], kMlpDevice0[b]))
        continue;
      bool disjoint = buffers[a].offset + buffers[a].bytes <= buffers[b].offset ||
                      buffers[b].offset + buffers[b].bytes <= buffers[a].offset;
      EXPECT_TRUE(disjoint) << "buffers " << a << " and " << b
                            << " are live together and overlap";
    }
  }
  EXPECT_LE(top, p.devices[0].peakBytes);
  // The most 64-byte aligned bytes live at one moment (at seq 46): no
  // placement needs less, and the planner reaches it.
  uint64_t alignedBound = 0;
  for (int64_t t = 0; t <= 78; ++t) {
    uint64_t live = 0;
    for (const BufferLife &life : kMlpDevice0)
      if (life.last == -2 || (life.first <= t && t <= life.last))
        live += alignUp(life.bytes);
    alignedBound = std::max(alignedBound, live);
  }
  EXPECT_EQ(alignedBound, 105472u);
  EXPECT_EQ(p.devices[0].peakBytes, alignedBound);
  EXPECT_EQ(tofu::liveBytesLowerBound(p), std::vector<uint64_t>{105360});
  // planMemory returns the same bound from its own lifetimes.
  EXPECT_EQ(bound, std::vector<uint64_t>{105360});
}

TEST(MemoryPlanner, IsDeterministic) {
  plan::Plan first = planFromLifetimes(), second = planFromLifetimes();
  tofu::planMemory(first);
  tofu::planMemory(second);
  ASSERT_EQ(first.devices[0].peakBytes, second.devices[0].peakBytes);
  for (size_t b = 0; b < first.devices[0].buffers.size(); ++b)
    EXPECT_EQ(first.devices[0].buffers[b].offset,
              second.devices[0].buffers[b].offset)
        << "buffer " << b;
}

/// Checks that no two buffers of `device` alive together (per `lifetimes`,
/// last = -2: persistent) share an address and that all fit in its peak.
void expectDisjoint(const plan::DeviceProgram &device,
                    const std::vector<BufferLife> &lifetimes) {
  const auto &buffers = device.buffers;
  ASSERT_EQ(buffers.size(), lifetimes.size());
  for (size_t a = 0; a < buffers.size(); ++a) {
    EXPECT_LE(buffers[a].offset + buffers[a].bytes, device.peakBytes);
    for (size_t b = a + 1; b < buffers.size(); ++b) {
      if (!liveTogether(lifetimes[a], lifetimes[b]))
        continue;
      bool disjoint = buffers[a].offset + buffers[a].bytes <= buffers[b].offset ||
                      buffers[b].offset + buffers[b].bytes <= buffers[a].offset;
      EXPECT_TRUE(disjoint) << "buffers " << a << " and " << b
                            << " are live together and overlap";
    }
  }
}

/// A plan of one device per entry of `devices`, each with the buffers of
/// its table (as planFromLifetimes; tensors are not shared between devices).
plan::Plan planFromDevices(
    const std::vector<std::vector<BufferLife>> &devices) {
  plan::Plan p;
  p.devices.resize(devices.size());
  for (size_t d = 0; d < devices.size(); ++d) {
    plan::DeviceProgram &device = p.devices[d];
    for (const BufferLife &life : devices[d]) {
      int32_t tensor = static_cast<int32_t>(p.tensors.size());
      plan::TensorInfo info;
      info.name = "t" + std::to_string(tensor);
      info.shape = {static_cast<int64_t>(life.bytes)};
      info.dtype = plan::DType::Bool;
      info.role = life.last == -2 ? plan::TensorRole::Param
                                  : plan::TensorRole::Activation;
      p.tensors.push_back(info);
      plan::Buffer buffer;
      buffer.tensor = tensor;
      buffer.owned = true;
      buffer.bytes = life.bytes;
      int32_t id = static_cast<int32_t>(device.buffers.size());
      device.buffers.push_back(buffer);
      if (life.last == -2)
        continue;
      plan::Instr write;
      write.kernel = "Write";
      write.seq = life.first;
      write.outputs = {id};
      device.instrs.push_back(write);
      plan::Instr read;
      read.kernel = "Read";
      read.seq = life.last;
      read.inputs = {id};
      device.instrs.push_back(read);
    }
    std::stable_sort(device.instrs.begin(), device.instrs.end(),
                     [](const plan::Instr &a, const plan::Instr &b) {
                       return a.seq < b.seq;
                     });
  }
  return p;
}

// Devices with equal buffers share one search-free placement (computed once
// per class): each device still gets a placement of its own buffers. Devices
// 0, 1 and 3 hold the MLP table, device 2 the same table with two buffers
// grown, which makes it a class of its own.
TEST(MemoryPlanner, PlacesEveryDeviceOfAClassOfEqualDevices) {
  std::vector<BufferLife> mlp(std::begin(kMlpDevice0), std::end(kMlpDevice0));
  std::vector<BufferLife> grown = mlp;
  grown[9].bytes = 40000;  // {8192, 4, 45}
  grown[23].bytes = 50000; // {16384, 46, 67}
  plan::Plan p = planFromDevices({mlp, mlp, grown, mlp});
  tofu::planMemory(p);
  for (size_t d = 0; d < 4; ++d) {
    SCOPED_TRACE("device " + std::to_string(d));
    expectDisjoint(p.devices[d], d == 2 ? grown : mlp);
  }
  EXPECT_EQ(p.devices[0].peakBytes, 105472u);
  EXPECT_EQ(p.devices[1].peakBytes, 105472u);
  EXPECT_EQ(p.devices[3].peakBytes, 105472u);
  EXPECT_GT(p.devices[2].peakBytes, 105472u);
}

// The seeded search runs on the first 16 devices of a class (each stops
// within 1% of the aligned bound, 105472); the others take the smallest
// placement those found. On the MLP table first fit alone is 7.9% above the
// bound, so devices 16..19 get within 1% only that way.
TEST(MemoryPlanner, DevicesPastTheSearchedOnesTakeTheBestOfTheirClass) {
  std::vector<BufferLife> mlp(std::begin(kMlpDevice0), std::end(kMlpDevice0));
  plan::Plan p = planFromDevices(std::vector<std::vector<BufferLife>>(20, mlp));
  tofu::planMemory(p);
  uint64_t best = std::numeric_limits<uint64_t>::max();
  for (size_t d = 0; d < 16; ++d)
    best = std::min(best, p.devices[d].peakBytes);
  EXPECT_EQ(best, 105472u);
  for (size_t d = 0; d < 20; ++d) {
    SCOPED_TRACE("device " + std::to_string(d));
    expectDisjoint(p.devices[d], mlp);
    EXPECT_LE(p.devices[d].peakBytes, 105472u + 105472u / 100);
    if (d >= 16)
      EXPECT_EQ(p.devices[d].peakBytes, best);
    if (d > 16) // one placement for all of them
      for (size_t b = 0; b < mlp.size(); ++b)
        EXPECT_EQ(p.devices[d].buffers[b].offset,
                  p.devices[16].buffers[b].offset);
  }
}

/// The first-fit placement as planMemory had it before it kept the placed
/// buffers sorted by offset: collect the address ranges of every placed
/// buffer alive at the same time, sort them, take the lowest gap.
std::vector<uint64_t> referenceFirstFit(const std::vector<BufferLife> &life,
                                        const std::vector<size_t> &order,
                                        uint64_t &peak) {
  auto first = [&](size_t b) { return life[b].last == -2 ? -1 : life[b].first; };
  auto last = [&](size_t b) {
    return life[b].last == -2 ? std::numeric_limits<int64_t>::max()
                              : life[b].last;
  };
  std::vector<uint64_t> offsets(life.size(), 0);
  std::vector<size_t> placed;
  peak = 0;
  for (size_t b : order) {
    uint64_t size = alignUp(life[b].bytes);
    std::vector<std::pair<uint64_t, uint64_t>> taken;
    for (size_t p : placed)
      if (!(last(p) < first(b) || last(b) < first(p)))
        taken.push_back({offsets[p], offsets[p] + alignUp(life[p].bytes)});
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

// Above 8192 buffers neither skyline best fit nor the perturbed search runs:
// the plan is the better of first fit by first use and by size, which must
// equal the reference placement exactly (plan.bin stays byte-identical).
TEST(MemoryPlanner, FirstFitEqualsTheReferencePlacement) {
  constexpr size_t n = 8300;
  std::vector<BufferLife> life;
  uint64_t state = 12345;
  auto next = [&](uint64_t bound) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % bound;
  };
  for (size_t b = 0; b < n; ++b) {
    if (next(20) == 0) {
      life.push_back({1 + next(1 << 16), -1, -2});
      continue;
    }
    int64_t first = static_cast<int64_t>(next(20000));
    int64_t span = next(4) == 0 ? static_cast<int64_t>(next(10000))
                                : static_cast<int64_t>(next(40));
    // Equal sizes are common in real plans: ties in both orders.
    uint64_t bytes = next(3) == 0 ? 4096 : 1 + next(1 << 14);
    life.push_back({bytes, first, first + span});
  }
  plan::Plan p = planFromDevices({life});
  tofu::planMemory(p);

  auto first = [&](size_t b) { return life[b].last == -2 ? -1 : life[b].first; };
  std::vector<size_t> byFirstUse(n);
  std::iota(byFirstUse.begin(), byFirstUse.end(), size_t{0});
  std::vector<size_t> bySize = byFirstUse;
  std::stable_sort(byFirstUse.begin(), byFirstUse.end(), [&](size_t a, size_t b) {
    if (first(a) != first(b))
      return first(a) < first(b);
    return life[a].bytes > life[b].bytes;
  });
  std::stable_sort(bySize.begin(), bySize.end(), [&](size_t a, size_t b) {
    if (life[a].bytes != life[b].bytes)
      return life[a].bytes > life[b].bytes;
    return first(a) < first(b);
  });
  uint64_t peakByFirstUse = 0, peakBySize = 0;
  std::vector<uint64_t> a = referenceFirstFit(life, byFirstUse, peakByFirstUse);
  std::vector<uint64_t> b = referenceFirstFit(life, bySize, peakBySize);
  bool firstUseWins = peakByFirstUse <= peakBySize;
  const std::vector<uint64_t> &expected = firstUseWins ? a : b;
  EXPECT_EQ(p.devices[0].peakBytes, firstUseWins ? peakByFirstUse : peakBySize);
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(p.devices[0].buffers[i].offset, expected[i]) << "buffer " << i;
}

// First fit in order of first use drops buffers dead before the current
// one's first use from its scan: with equal sizes both first-fit orders
// are by first use, and the plan must still equal the reference placement
// (which scans every placed buffer).
TEST(MemoryPlanner, FirstFitByFirstUseEqualsTheReferencePlacement) {
  constexpr size_t n = 8300;
  std::vector<BufferLife> life;
  uint64_t state = 777;
  auto next = [&](uint64_t bound) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % bound;
  };
  for (size_t b = 0; b < n; ++b) {
    if (next(50) == 0) {
      life.push_back({4096, -1, -2});
      continue;
    }
    int64_t first = static_cast<int64_t>(next(20000));
    int64_t span = next(4) == 0 ? static_cast<int64_t>(next(10000))
                                : static_cast<int64_t>(next(40));
    life.push_back({4096, first, first + span});
  }
  plan::Plan p = planFromDevices({life});
  tofu::planMemory(p);
  auto first = [&](size_t b) { return life[b].last == -2 ? -1 : life[b].first; };
  std::vector<size_t> byFirstUse(n);
  std::iota(byFirstUse.begin(), byFirstUse.end(), size_t{0});
  std::stable_sort(byFirstUse.begin(), byFirstUse.end(),
                   [&](size_t a, size_t b) { return first(a) < first(b); });
  uint64_t peak = 0;
  std::vector<uint64_t> expected = referenceFirstFit(life, byFirstUse, peak);
  EXPECT_EQ(p.devices[0].peakBytes, peak);
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(p.devices[0].buffers[i].offset, expected[i]) << "buffer " << i;
}

} // namespace
