//===- CollectivePieces.h - Pieces of a collective's Fetch/Reduce -*- C++ -*-===//
//
// A Fetch or Reduce instruction lists its pieces explicitly (Instr::pieces)
// or names the source table of its collective (Instr::sources, format 3.0),
// from which the pieces are derived here, on demand, in the order tofuc's
// materialize made them (docs/PlanFormat.md, "Collectives"). Code that
// reads pieces of a plan that may hold source tables uses forEachPiece;
// readPlan expands the tables into `pieces` for the runtimes
// (ReadOptions::expandCollectives).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_COLLECTIVEPIECES_H
#define TOFU_RUNTIME_COLLECTIVEPIECES_H

#include "tofu/runtime/Plan.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

namespace tofu::plan {

/// The index of a source table (CollectiveSources::index): the sources
/// whose box is not empty, placed in the cells of a grid. Per dimension,
/// the distinct ranges of those boxes must be disjoint (the tiles of a
/// tiling, cut along each dimension into nested balanced parts, are); a
/// cell is one range per dimension, and holds the devices whose box is that
/// product. A destination region then meets, per dimension, one contiguous
/// run of ranges (two binary searches), and the devices that meet it are
/// those of the cells in the product of these runs. A source contains the
/// region only when each run is one range that contains it, so a fetch
/// stops early only in a single cell.
struct CollectiveSourceIndex {
  /// Largest rank indexed (a higher one is scanned).
  static constexpr size_t kMaxRank = 8;
  /// Dimension i's ranges are lo/hi[rangeStart[i], rangeStart[i + 1]),
  /// sorted and disjoint; `lengthBefore[j]` is the sum of the lengths of
  /// the ranges of j's dimension before range j.
  std::vector<uint32_t> rangeStart;
  std::vector<int64_t> lo, hi, lengthBefore;
  /// Cell of the ranges at positions (p_0, ..., p_{rank-1}) within their
  /// dimensions: sum of p_i * cellStride[i]. Its devices, increasing, are
  /// cellDevices[cellStart[c], cellStart[c + 1]).
  std::vector<uint64_t> cellStride;
  std::vector<uint32_t> cellStart;
  std::vector<int32_t> cellDevices;
  /// The devices of every cell when all cells hold that many (0: they
  /// differ, or some cell is empty).
  uint32_t perCell = 0;
};

/// A source table for `buffers` (per device of `plan`: a buffer id on that
/// device, or -1), with the buffers' regions copied in and indexed where
/// they form a grid (CollectiveSourceIndex). Every id must name a buffer of
/// its device and all of them must have one rank (the caller checks:
/// readPlan does before calling it).
std::shared_ptr<const CollectiveSources>
makeCollectiveSources(const Plan &plan, std::vector<int32_t> buffers);

/// makeCollectiveSources with each source's region given by
/// `regionOf(e, buffers[e])`.
std::shared_ptr<const CollectiveSources> makeCollectiveSources(
    std::vector<int32_t> buffers,
    const std::function<BoxView(size_t, int32_t)> &regionOf);

namespace detail {
/// The index of `in`'s source table when its pieces are derived from one
/// (no explicit pieces) and the table has an index of at most kMaxRank
/// dimensions; else null.
inline const CollectiveSourceIndex *usableIndex(const Instr &in) {
  if (!in.sources || !in.pieces.empty() || !in.sources->index ||
      in.sources->rank > CollectiveSourceIndex::kMaxRank)
    return nullptr;
  return in.sources->index.get();
}

/// The runs of `index`'s ranges that meet `want` (rank `rank`): per
/// dimension i, positions [first[i], last[i]) within the dimension. False
/// when no source meets `want`.
inline bool meetingRuns(const CollectiveSourceIndex &index, size_t rank,
                        BoxView want, uint32_t *first, uint32_t *last) {
  if (index.cellDevices.empty())
    return false; // no source with a non-empty box
  for (size_t i = 0; i < rank; ++i) {
    if (want.lo[i] >= want.hi[i])
      return false;
    const int64_t *lo = index.lo.data() + index.rangeStart[i];
    const int64_t *hi = index.hi.data() + index.rangeStart[i];
    const size_t n = index.rangeStart[i + 1] - index.rangeStart[i];
    // The first range ending after want starts, the first starting at or
    // after want ends (both sorted: the ranges are disjoint).
    first[i] = static_cast<uint32_t>(std::upper_bound(hi, hi + n, want.lo[i]) - hi);
    last[i] = static_cast<uint32_t>(std::lower_bound(lo, lo + n, want.hi[i]) - lo);
    if (first[i] >= last[i])
      return false;
  }
  return true;
}

/// Calls `fn(cell)` for every cell in the product of the runs.
template <typename Fn>
void forEachCell(const CollectiveSourceIndex &index, size_t rank,
                 const uint32_t *first, const uint32_t *last, Fn &&fn) {
  uint32_t at[CollectiveSourceIndex::kMaxRank];
  for (size_t i = 0; i < rank; ++i)
    at[i] = first[i];
  while (true) {
    uint64_t cell = 0;
    for (size_t i = 0; i < rank; ++i)
      cell += at[i] * index.cellStride[i];
    fn(cell);
    // The next position, the last dimension fastest.
    size_t i = rank;
    for (; i > 0; --i) {
      if (++at[i - 1] < last[i - 1])
        break;
      at[i - 1] = first[i - 1];
    }
    if (i == 0)
      return;
  }
}
} // namespace detail

/// Calls `fn(const Piece &)` for every piece of Fetch/Reduce instruction
/// `in` of device `device`: its explicit `pieces` when it has any or no
/// source table; otherwise the pieces derived from `in.sources` (see
/// CollectiveSources), each passed in one scratch Piece that is reused
/// (copy what must outlive the call). `in.dst` must name a buffer of the
/// device whose rank is the table's. With the table's index, only the
/// sources in the cells that meet the destination are visited, in the same
/// order, so the pieces are the same as a scan's.
template <typename Fn>
void forEachPiece(const Plan &plan, size_t device, const Instr &in, Fn &&fn);

/// forEachPiece for a destination region given as `want` (the region of
/// `in.dst` on `device`; a table's pieces need nothing else of the plan).
template <typename Fn>
void forEachPiece(BoxView want, size_t device, const Instr &in, Fn &&fn) {
  if (!in.sources || !in.pieces.empty()) {
    for (const Piece &piece : in.pieces)
      fn(piece);
    return;
  }
  const CollectiveSources &table = *in.sources;
  const size_t rank = table.rank;
  const bool fetch = in.kind == Instr::Kind::Fetch;
  Piece piece;
  piece.region.lo.resize(rank);
  piece.region.hi.resize(rank);
  // Visits device e's source; true when the fetch is complete (e's region
  // contains the whole destination).
  auto visit = [&](size_t e) {
    int32_t buffer = table.buffers[e];
    if (buffer < 0)
      return false;
    const int64_t *lo = table.lo.data() + e * rank;
    const int64_t *hi = table.hi.data() + e * rank;
    bool contains = true;
    for (size_t i = 0; i < rank; ++i) {
      int64_t l = std::max(lo[i], want.lo[i]);
      int64_t h = std::min(hi[i], want.hi[i]);
      if (l >= h)
        return false; // no common element
      piece.region.lo[i] = l;
      piece.region.hi[i] = h;
      contains = contains && lo[i] <= want.lo[i] && hi[i] >= want.hi[i];
    }
    piece.device = static_cast<int32_t>(e);
    piece.buffer = buffer;
    fn(static_cast<const Piece &>(piece));
    return fetch && contains;
  };
  const size_t k = table.buffers.size();
  // The device's own data first, then the others in device order.
  if (device < k && visit(device))
    return;
  if (table.index && rank <= CollectiveSourceIndex::kMaxRank) {
    // Only the devices of the cells meeting `want`: a superset of those
    // whose source meets it, visited in increasing order as by the scan.
    const CollectiveSourceIndex &index = *table.index;
    uint32_t first[CollectiveSourceIndex::kMaxRank],
        last[CollectiveSourceIndex::kMaxRank];
    if (!detail::meetingRuns(index, rank, want, first, last))
      return;
    size_t cells = 1;
    for (size_t i = 0; i < rank; ++i)
      cells *= last[i] - first[i];
    if (cells == 1) {
      uint64_t cell = 0;
      for (size_t i = 0; i < rank; ++i)
        cell += first[i] * index.cellStride[i];
      for (uint32_t j = index.cellStart[cell]; j < index.cellStart[cell + 1];
           ++j) {
        size_t e = static_cast<size_t>(index.cellDevices[j]);
        if (e != device && visit(e))
          return;
      }
      return;
    }
    std::vector<int32_t> devices;
    detail::forEachCell(index, rank, first, last, [&](uint64_t cell) {
      devices.insert(devices.end(),
                     index.cellDevices.begin() + index.cellStart[cell],
                     index.cellDevices.begin() + index.cellStart[cell + 1]);
    });
    std::sort(devices.begin(), devices.end());
    for (int32_t e : devices)
      if (static_cast<size_t>(e) != device && visit(static_cast<size_t>(e)))
        return;
    return;
  }
  for (size_t e = 0; e < k; ++e)
    if (e != device && visit(e))
      return;
}

template <typename Fn>
void forEachPiece(const Plan &plan, size_t device, const Instr &in, Fn &&fn) {
  if (!in.sources || !in.pieces.empty()) {
    for (const Piece &piece : in.pieces)
      fn(piece);
    return;
  }
  forEachPiece(bufferRegion(plan, device, in.dst), device, in,
               std::forward<Fn>(fn));
}

/// The devices whose sources give Fetch/Reduce instruction `in` of device
/// `device` a piece (forEachPiece's `piece.device`s), by cells of the
/// table's index: `cellFn(c)` for each cell c all of whose devices
/// (CollectiveSourceIndex::cellDevices) give one, or `deviceFn(e)` for the
/// single device e that gives the only piece (a fetch that one source
/// contains). Cheaper than forEachPiece where only the sources matter (a
/// cell of g replicas or partial sums is one call). Returns false, calling
/// neither, when `in` lists its pieces or its table has no index: then use
/// forEachPiece.
template <typename CellFn, typename DeviceFn>
bool forEachSourceCell(const Plan &plan, size_t device, const Instr &in,
                       CellFn &&cellFn, DeviceFn &&deviceFn) {
  const CollectiveSourceIndex *indexed = detail::usableIndex(in);
  if (!indexed)
    return false;
  const CollectiveSources &table = *in.sources;
  const CollectiveSourceIndex &index = *indexed;
  const BoxView want = bufferRegion(plan, device, in.dst);
  const size_t rank = table.rank;
  uint32_t first[CollectiveSourceIndex::kMaxRank],
      last[CollectiveSourceIndex::kMaxRank];
  if (!detail::meetingRuns(index, rank, want, first, last))
    return true;
  // Every device of a cell in the product of the runs meets `want` (each
  // of its ranges does). A fetch stops early only when one cell is left
  // and its box contains `want`: then the device's own source if it is in
  // the cell (forEachPiece visits it first), else the cell's first device.
  bool single = true, contained = true;
  uint64_t cell = 0;
  for (size_t i = 0; i < rank; ++i) {
    single = single && last[i] - first[i] == 1;
    const size_t r = index.rangeStart[i] + first[i];
    contained = contained && index.lo[r] <= want.lo[i] &&
                index.hi[r] >= want.hi[i];
    cell += first[i] * index.cellStride[i];
  }
  if (single && contained && in.kind == Instr::Kind::Fetch) {
    const uint32_t begin = index.cellStart[cell], end = index.cellStart[cell + 1];
    if (begin == end)
      return true;
    for (uint32_t j = begin; j < end; ++j)
      if (static_cast<size_t>(index.cellDevices[j]) == device) {
        deviceFn(device);
        return true;
      }
    deviceFn(static_cast<size_t>(index.cellDevices[begin]));
    return true;
  }
  detail::forEachCell(index, rank, first, last,
                      [&](uint64_t c) { cellFn(c); });
  return true;
}

/// The elements of the pieces of Fetch/Reduce instruction `in` of device
/// `device` that lie on other devices (what it receives): the sum of
/// `piece.region.numElements()` over forEachPiece's pieces with
/// `piece.device != device`. With the table's index and cells of equal
/// size this is computed per dimension, without listing the pieces (an
/// all-gather over k devices costs O(rank log k), not O(k)).
uint64_t remoteElements(const Plan &plan, size_t device, const Instr &in);

/// remoteElements for a destination region given as `want` (the region of
/// `in.dst` on `device`).
uint64_t remoteElements(BoxView want, size_t device, const Instr &in);

/// The pieces of instruction `in` of device `device` (forEachPiece's), as
/// a list.
std::vector<Piece> derivePieces(const Plan &plan, size_t device,
                                const Instr &in);

/// Fills `pieces` of every Fetch/Reduce instruction that has a source table
/// and no pieces yet (the explicit form the runtimes execute). The tables
/// stay, so writePlan still writes the compact form.
void expandCollectives(Plan &plan);

/// True when some Fetch/Reduce names a source table but lists none of the
/// pieces the table gives it (a plan as tofuc's materialize makes it, or
/// read with ReadOptions::expandCollectives off): code that reads `pieces`
/// directly would see none. A collective that derives no piece (its
/// destination has no element any source holds) is expanded as it is. The
/// executors expand or refuse a plan for which this is true.
bool hasUnexpandedCollectives(const Plan &plan);

/// A copy of `plan` with its collectives expanded when it has unexpanded
/// ones (hasUnexpandedCollectives), else null.
std::unique_ptr<Plan> expandedCopy(const Plan &plan);

} // namespace tofu::plan

#endif // TOFU_RUNTIME_COLLECTIVEPIECES_H
