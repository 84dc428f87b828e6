//===- TileGeometryTest.cpp - devices whose tiles meet a region -----------===//
//
// devicesMeeting (lib/Analysis/TileGeometry.cpp) finds the devices whose box
// meets a region by descending the recursion; materialization and the
// per-link byte counts rely on it listing exactly the devices a scan over
// all k would find, in increasing order. Checked against that scan on
// random grids (with uneven and empty parts), cuts and regions.
//
//===----------------------------------------------------------------------===//
#include "tofu/Analysis/TileGeometry.h"

#include <gtest/gtest.h>

namespace {

using tofu::DeviceGrid;
using tofu::tdl::Box;
using tofu::tdl::Range;

/// Device d's box: `whole` cut at step s along cutDims[s] (-1: not cut).
Box boxOf(const DeviceGrid &grid, const Box &whole,
          const std::vector<int64_t> &cutDims, int64_t device) {
  Box box = whole;
  std::vector<int64_t> coords = grid.coordinates(device);
  for (size_t s = 0; s < grid.steps.size(); ++s)
    if (cutDims[s] >= 0)
      box[cutDims[s]] =
          tofu::splitRange(box[cutDims[s]], grid.steps[s], coords[s]);
  return box;
}

TEST(TileGeometry, DevicesMeetingEqualsAScanOverAllDevices) {
  uint64_t state = 2024;
  auto next = [&](int64_t bound) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(bound));
  };
  const std::vector<std::vector<int64_t>> grids = {
      {}, {2}, {3}, {2, 2}, {3, 2}, {2, 2, 2}, {4, 2, 2}, {2, 3, 2, 2},
      {2, 2, 2, 2, 2, 2}, {5, 3}};
  int64_t nonEmptyAnswers = 0;
  for (const std::vector<int64_t> &steps : grids) {
    DeviceGrid grid{steps};
    for (int trial = 0; trial < 200; ++trial) {
      size_t rank = static_cast<size_t>(next(4)); // 0..3, rank 0: a scalar
      Box whole;
      for (size_t i = 0; i < rank; ++i)
        whole.push_back({0, next(3) == 0 ? next(4) : 1 + next(40)});
      std::vector<int64_t> cutDims;
      for (size_t s = 0; s < steps.size(); ++s)
        cutDims.push_back(rank == 0 || next(4) == 0
                              ? -1
                              : next(static_cast<int64_t>(rank)));
      Box region;
      for (size_t i = 0; i < rank; ++i) {
        int64_t lo = next(whole[i].hi + 1);
        region.push_back({lo, lo + next(whole[i].hi - lo + 1)});
      }
      std::vector<int64_t> expected;
      for (int64_t d = 0; d < grid.numDevices(); ++d)
        if (tofu::intersectionElements(boxOf(grid, whole, cutDims, d), region))
          expected.push_back(d);
      EXPECT_EQ(tofu::devicesMeeting(grid, whole, cutDims, region), expected)
          << "grid of " << steps.size() << " steps, trial " << trial;
      nonEmptyAnswers += !expected.empty();
    }
  }
  // The random regions must exercise both outcomes.
  EXPECT_GT(nonEmptyAnswers, 500);
  EXPECT_LT(nonEmptyAnswers, 2000);
}

} // namespace
