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
#include <memory>
#include <vector>

namespace tofu::plan {

/// A source table for `buffers` (per device of `plan`: a buffer id on that
/// device, or -1), with the buffers' regions copied in. Every id must name
/// a buffer of its device and all of them must have one rank (the caller
/// checks: readPlan does before calling it).
std::shared_ptr<const CollectiveSources>
makeCollectiveSources(const Plan &plan, std::vector<int32_t> buffers);

/// Calls `fn(const Piece &)` for every piece of Fetch/Reduce instruction
/// `in` of device `device`: its explicit `pieces` when it has any or no
/// source table; otherwise the pieces derived from `in.sources` (see
/// CollectiveSources), each passed in one scratch Piece that is reused
/// (copy what must outlive the call). `in.dst` must name a buffer of the
/// device whose rank is the table's.
template <typename Fn>
void forEachPiece(const Plan &plan, size_t device, const Instr &in, Fn &&fn) {
  if (!in.sources || !in.pieces.empty()) {
    for (const Piece &piece : in.pieces)
      fn(piece);
    return;
  }
  const CollectiveSources &table = *in.sources;
  const Box &want = plan.devices[device].buffers[in.dst].region;
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
  for (size_t e = 0; e < k; ++e)
    if (e != device && visit(e))
      return;
}

/// The pieces of instruction `in` of device `device` (forEachPiece's), as
/// a list.
std::vector<Piece> derivePieces(const Plan &plan, size_t device,
                                const Instr &in);

/// Fills `pieces` of every Fetch/Reduce instruction that has a source table
/// and no pieces yet (the explicit form the runtimes execute). The tables
/// stay, so writePlan still writes the compact form.
void expandCollectives(Plan &plan);

/// True when some Fetch/Reduce names a source table but lists no pieces
/// (a plan as tofuc's materialize makes it, or read with
/// ReadOptions::expandCollectives off): code that reads `pieces` directly
/// would see none. The executors expand or refuse such a plan.
bool hasUnexpandedCollectives(const Plan &plan);

/// A copy of `plan` with its collectives expanded when it has unexpanded
/// ones (hasUnexpandedCollectives), else null.
std::unique_ptr<Plan> expandedCopy(const Plan &plan);

} // namespace tofu::plan

#endif // TOFU_RUNTIME_COLLECTIVEPIECES_H
