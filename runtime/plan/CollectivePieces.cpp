//===- CollectivePieces.cpp - Pieces of a collective's Fetch/Reduce -------===//
//
// Source tables of collectives (format 3.0) and the explicit pieces derived
// from them; forEachPiece itself is in the header.
//
//===----------------------------------------------------------------------===//
#include "tofu/runtime/CollectivePieces.h"

namespace tofu::plan {

std::shared_ptr<const CollectiveSources>
makeCollectiveSources(const Plan &plan, std::vector<int32_t> buffers) {
  auto table = std::make_shared<CollectiveSources>();
  for (size_t e = 0; e < buffers.size(); ++e)
    if (buffers[e] >= 0) {
      table->rank = plan.devices[e].buffers[buffers[e]].region.lo.size();
      break;
    }
  const size_t rank = table->rank;
  table->lo.assign(buffers.size() * rank, 0);
  table->hi.assign(buffers.size() * rank, 0);
  for (size_t e = 0; e < buffers.size(); ++e) {
    if (buffers[e] < 0)
      continue;
    const Box &region = plan.devices[e].buffers[buffers[e]].region;
    std::copy(region.lo.begin(), region.lo.end(), table->lo.begin() + e * rank);
    std::copy(region.hi.begin(), region.hi.end(), table->hi.begin() + e * rank);
  }
  table->buffers = std::move(buffers);
  return table;
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
  for (const DeviceProgram &dev : plan.devices)
    for (const Instr &in : dev.instrs)
      if (in.sources && in.pieces.empty() && in.kind != Instr::Kind::Compute)
        return true;
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
