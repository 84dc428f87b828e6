//===- CollectivePieces.cpp - Pieces of a collective's Fetch/Reduce -------===//
//
// Source tables of collectives (format 3.0) and the explicit pieces derived
// from them; forEachPiece itself is in the header.
//
//===----------------------------------------------------------------------===//
#include "tofu/runtime/CollectivePieces.h"

#include <algorithm>
#include <utility>

namespace tofu::plan {

namespace {

/// The index of `table` (CollectiveSourceIndex), or null when its non-empty
/// boxes do not form a grid: some dimension's distinct ranges overlap, the
/// rank is above kMaxRank, or the grid has many more cells than sources.
std::shared_ptr<const CollectiveSourceIndex>
makeIndex(const CollectiveSources &table) {
  const size_t rank = table.rank, k = table.buffers.size();
  if (rank > CollectiveSourceIndex::kMaxRank)
    return nullptr;
  // The sources that can meet a region: a buffer, no empty dimension.
  std::vector<int32_t> valid;
  for (size_t e = 0; e < k; ++e) {
    if (table.buffers[e] < 0)
      continue;
    bool empty = false;
    for (size_t i = 0; i < rank; ++i)
      empty = empty || table.lo[e * rank + i] >= table.hi[e * rank + i];
    if (!empty)
      valid.push_back(static_cast<int32_t>(e));
  }
  auto index = std::make_shared<CollectiveSourceIndex>();
  index->rangeStart.push_back(0);
  uint64_t cells = 1;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (size_t i = 0; i < rank; ++i) {
    ranges.clear();
    for (int32_t e : valid)
      ranges.push_back({table.lo[e * rank + i], table.hi[e * rank + i]});
    std::sort(ranges.begin(), ranges.end());
    ranges.erase(std::unique(ranges.begin(), ranges.end()), ranges.end());
    int64_t length = 0;
    for (size_t j = 0; j < ranges.size(); ++j) {
      if (j + 1 < ranges.size() && ranges[j].second > ranges[j + 1].first)
        return nullptr; // overlapping ranges: not a grid
      index->lo.push_back(ranges[j].first);
      index->hi.push_back(ranges[j].second);
      index->lengthBefore.push_back(length);
      length += ranges[j].second - ranges[j].first;
    }
    index->rangeStart.push_back(static_cast<uint32_t>(index->lo.size()));
    cells *= ranges.size();
    if (cells > 2 * valid.size() + 16)
      return nullptr; // sparse: the cells would cost more than a scan
  }
  index->cellStride.assign(rank, 1);
  for (size_t i = rank; i-- > 1;)
    index->cellStride[i - 1] =
        index->cellStride[i] * (index->rangeStart[i + 1] - index->rangeStart[i]);
  // Each source's cell; then the devices per cell, in increasing order.
  std::vector<uint64_t> cellOf(valid.size(), 0);
  index->cellStart.assign(cells + 1, 0);
  for (size_t v = 0; v < valid.size(); ++v) {
    size_t e = static_cast<size_t>(valid[v]);
    for (size_t i = 0; i < rank; ++i) {
      const int64_t *lo = index->lo.data() + index->rangeStart[i];
      size_t n = index->rangeStart[i + 1] - index->rangeStart[i];
      size_t pos = std::lower_bound(lo, lo + n, table.lo[e * rank + i]) - lo;
      cellOf[v] += pos * index->cellStride[i];
    }
    ++index->cellStart[cellOf[v] + 1];
  }
  for (size_t c = 0; c < cells; ++c)
    index->cellStart[c + 1] += index->cellStart[c];
  index->cellDevices.resize(valid.size());
  std::vector<uint32_t> next(index->cellStart.begin(),
                             index->cellStart.end() - 1);
  for (size_t v = 0; v < valid.size(); ++v)
    index->cellDevices[next[cellOf[v]]++] = valid[v];
  uint32_t perCell = cells ? index->cellStart[1] : 0;
  for (size_t c = 0; c < cells && perCell; ++c)
    if (index->cellStart[c + 1] - index->cellStart[c] != perCell)
      perCell = 0;
  index->perCell = perCell;
  return index;
}

} // namespace

std::shared_ptr<const CollectiveSources>
makeCollectiveSources(const Plan &plan, std::vector<int32_t> buffers) {
  return makeCollectiveSources(
      std::move(buffers), [&plan](size_t e, int32_t buffer) {
        return bufferRegion(plan, e, static_cast<size_t>(buffer));
      });
}

std::shared_ptr<const CollectiveSources> makeCollectiveSources(
    std::vector<int32_t> buffers,
    const std::function<BoxView(size_t, int32_t)> &regionOf) {
  auto table = std::make_shared<CollectiveSources>();
  for (size_t e = 0; e < buffers.size(); ++e)
    if (buffers[e] >= 0) {
      table->rank = regionOf(e, buffers[e]).rank;
      break;
    }
  const size_t rank = table->rank;
  table->lo.assign(buffers.size() * rank, 0);
  table->hi.assign(buffers.size() * rank, 0);
  for (size_t e = 0; e < buffers.size(); ++e) {
    if (buffers[e] < 0)
      continue;
    const BoxView region = regionOf(e, buffers[e]);
    std::copy(region.lo, region.lo + rank, table->lo.begin() + e * rank);
    std::copy(region.hi, region.hi + rank, table->hi.begin() + e * rank);
  }
  table->buffers = std::move(buffers);
  table->index = makeIndex(*table);
  return table;
}

uint64_t remoteElements(const Plan &plan, size_t device, const Instr &in) {
  if (!in.sources || !in.pieces.empty()) {
    uint64_t elements = 0;
    for (const Piece &piece : in.pieces)
      if (static_cast<size_t>(piece.device) != device)
        elements += static_cast<uint64_t>(piece.region.numElements());
    return elements;
  }
  return remoteElements(bufferRegion(plan, device, in.dst), device, in);
}

uint64_t remoteElements(BoxView want, size_t device, const Instr &in) {
  auto bySum = [&] {
    uint64_t elements = 0;
    forEachPiece(want, device, in, [&](const Piece &piece) {
      if (static_cast<size_t>(piece.device) != device)
        elements += static_cast<uint64_t>(piece.region.numElements());
    });
    return elements;
  };
  const CollectiveSourceIndex *indexed = detail::usableIndex(in);
  if (!indexed)
    return bySum();
  const CollectiveSources &table = *in.sources;
  const CollectiveSourceIndex &index = *indexed;
  const size_t rank = table.rank;
  uint32_t first[CollectiveSourceIndex::kMaxRank],
      last[CollectiveSourceIndex::kMaxRank];
  if (!detail::meetingRuns(index, rank, want, first, last))
    return 0;
  // The device's own source, when it meets `want`: its elements there.
  uint64_t own = 0;
  bool ownMeets = false;
  if (device < table.buffers.size() && table.buffers[device] >= 0) {
    own = 1;
    ownMeets = true;
    for (size_t i = 0; i < rank && ownMeets; ++i) {
      int64_t l = std::max(table.lo[device * rank + i], want.lo[i]);
      int64_t h = std::min(table.hi[device * rank + i], want.hi[i]);
      ownMeets = l < h;
      own *= ownMeets ? static_cast<uint64_t>(h - l) : 0;
    }
    if (!ownMeets)
      own = 0;
  }
  // Per dimension: the elements of `want` in each of the run's ranges,
  // summed (the inner ranges whole, the end ones cut).
  auto runElements = [&](size_t i) {
    const size_t a = index.rangeStart[i] + first[i],
                 b = index.rangeStart[i] + last[i] - 1;
    int64_t sum = index.lengthBefore[b] + (index.hi[b] - index.lo[b]) -
                  index.lengthBefore[a];
    sum -= std::max<int64_t>(0, want.lo[i] - index.lo[a]);
    sum -= std::max<int64_t>(0, index.hi[b] - want.hi[i]);
    return static_cast<uint64_t>(sum);
  };
  size_t cells = 1;
  for (size_t i = 0; i < rank; ++i)
    cells *= last[i] - first[i];
  if (cells == 1) {
    // One cell: its devices have one box. A fetch it contains takes one
    // piece (the device's own when it is in the cell); otherwise every
    // device of the cell gives one.
    uint64_t cell = 0, elements = 1;
    bool contained = true;
    for (size_t i = 0; i < rank; ++i) {
      cell += first[i] * index.cellStride[i];
      elements *= runElements(i);
      const size_t r = index.rangeStart[i] + first[i];
      contained = contained && index.lo[r] <= want.lo[i] &&
                  index.hi[r] >= want.hi[i];
    }
    uint64_t count = index.cellStart[cell + 1] - index.cellStart[cell];
    if (count == 0) // the cell of a range pair no source has
      return 0;
    if (in.kind == Instr::Kind::Fetch && contained)
      return ownMeets ? 0 : elements;
    return (count - (ownMeets ? 1 : 0)) * elements;
  }
  // Several cells: no source contains `want` (its ranges would be the only
  // ones meeting it), so every source that meets it gives a piece.
  if (index.perCell == 0)
    return bySum();
  uint64_t total = index.perCell;
  for (size_t i = 0; i < rank; ++i)
    total *= runElements(i);
  return total - own;
}

std::vector<Piece> derivePieces(const Plan &plan, size_t device,
                                const Instr &in) {
  std::vector<Piece> pieces;
  forEachPiece(plan, device, in,
               [&](const Piece &piece) { pieces.push_back(piece); });
  return pieces;
}

void expandCollectives(Plan &plan) {
  for (size_t d = 0; d < plan.devices.size(); ++d)
    for (Instr &in : plan.devices[d].instrs)
      if (in.sources && in.pieces.empty() && in.kind != Instr::Kind::Compute)
        in.pieces = derivePieces(plan, d, in);
}

bool hasUnexpandedCollectives(const Plan &plan) {
  for (size_t d = 0; d < plan.devices.size(); ++d)
    for (const Instr &in : plan.devices[d].instrs) {
      if (!in.sources || !in.pieces.empty() ||
          in.kind == Instr::Kind::Compute)
        continue;
      // No pieces is also what expansion gives a collective whose
      // destination no source meets (a zero-element buffer: tofuc's k = 1
      // plans have dozens): only one that would get pieces is unexpanded.
      bool derives = false;
      forEachPiece(plan, d, in, [&](const Piece &) { derives = true; });
      if (derives)
        return true;
    }
  return false;
}

std::unique_ptr<Plan> expandedCopy(const Plan &plan) {
  if (!hasUnexpandedCollectives(plan))
    return nullptr;
  auto copy = std::make_unique<Plan>(plan);
  expandCollectives(*copy);
  return copy;
}

} // namespace tofu::plan
