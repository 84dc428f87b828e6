//===- MemoryPlannerTest.cpp - static memory plan on fixed lifetimes ------===//
//
// planMemory on a plan built from a table of buffer lifetimes: device 0 of
// the MLP example at k = 4 (tofuc examples/mlp/mlp.onnx --gpus 4), where
// placing buffers first fit by first use or by size leaves the arena 7.9%
// above the most bytes live at one moment. Checks that no two buffers alive
// at the same time share an address, that the arena reaches that bound, and
// that planning is deterministic.
//
//===----------------------------------------------------------------------===//
#include "tofu/Target/PlanBuilder.h"

#include <gtest/gtest.h>

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
  tofu::planMemory(p);
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

} // namespace
