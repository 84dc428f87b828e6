//===- UpdateInPlace.cpp - parameters updated where they live -------------===//
//
// Materialization gives every updated parameter a second buffer (its new
// value, role Updated) and a copy back into the parameter's own buffer at
// the end of the step ("param-update" fetches). That copy reads and writes
// every parameter byte each step (wide ResNet-50 on a CPU: 9% of its step),
// and the new values wait in their own buffers from their update to the end
// of the step. PyTorch's optimizers write the parameter in place instead;
// so does this step, where it provably gives the same values:
//
//  - the parameter's owned tile on the device and its new value's owned
//    tile hold the same region, the new value is computed on that device by
//    an element-wise update kernel (kInPlaceKernels: element i of the output
//    reads element i of its inputs only, so an output may share the
//    parameter's bytes), and the final copy is that tile onto itself (one
//    local piece);
//  - nothing else reads or writes the new value's buffer, on any device.
//
// Then the copy is dropped, and the new value's buffer shares the
// parameter's bytes (planMemory places it at the parameter's offset: see
// inPlaceUpdatedBuffers). If some instruction (on any device) still reads
// the parameter's tile at or after the update, the update moves to the end
// of the step, where the copy was (and where the parameter was overwritten
// before); its inputs then live until there.
//
//===----------------------------------------------------------------------===//
#include "tofu/Target/PlanBuilder.h"
#include "tofu/runtime/CollectivePieces.h"
#include "tofu/runtime/SharedPrograms.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace tofu {
namespace {

/// Kernels whose every output element reads only the same element of each
/// input (and scalars): an output may share an input's bytes.
constexpr llvm::StringLiteral kInPlaceKernels[] = {"SGDUpdate"};

constexpr llvm::StringLiteral kParamUpdateOp = "param-update";

/// How many instructions ahead the passes over a program prefetch operand
/// lists (each is its own allocation; a pass otherwise waits on each).
constexpr size_t kPrefetchAhead = 8;

/// The owned buffer of each tensor on a device (-1: none).
std::vector<int32_t> ownedBuffers(const plan::Plan &plan,
                                  const std::vector<plan::Buffer> &buffers) {
  std::vector<int32_t> owned(plan.tensors.size(), -1);
  for (size_t b = 0; b < buffers.size(); ++b)
    if (buffers[b].owned)
      owned[buffers[b].tensor] = static_cast<int32_t>(b);
  return owned;
}

bool sameRegion(plan::BoxView a, plan::BoxView b) {
  return a.rank == b.rank && std::equal(a.lo, a.lo + a.rank, b.lo) &&
         std::equal(a.hi, a.hi + a.rank, b.hi);
}

/// One parameter tile that may be updated in place.
struct Candidate {
  int32_t device;
  int32_t param;   ///< the parameter's owned buffer
  int32_t updated; ///< its new value's owned buffer
  size_t copy;     ///< index of the final copy in the device's instrs
  size_t update;   ///< index of the update kernel in the device's instrs
};

} // namespace

namespace {

/// What inPlaceUpdatedPairs reads of a program, the same for every device
/// that runs it: each tensor's owned buffer and which buffers an
/// instruction writes.
struct WrittenBuffers {
  std::vector<int32_t> owned;
  std::vector<bool> written;

  WrittenBuffers(const plan::Plan &plan, size_t device)
      : owned(ownedBuffers(plan, plan::buffersOf(plan, device))),
        written(plan::buffersOf(plan, device).size(), false) {
    for (const plan::Instr &instr : plan::instrsOf(plan, device)) {
      for (int32_t b : instr.outputs)
        if (b >= 0)
          written[b] = true;
      if (instr.dst >= 0)
        written[instr.dst] = true;
    }
  }
};

/// inPlaceUpdatedPairs of `device`, whose program's buffers are `facts`.
std::vector<std::pair<int32_t, int32_t>>
inPlacePairsOf(const plan::Plan &plan, size_t device,
               const WrittenBuffers &facts) {
  std::vector<std::pair<int32_t, int32_t>> pairs;
  const std::vector<plan::Buffer> &buffers = plan::buffersOf(plan, device);
  const std::vector<int32_t> &owned = facts.owned;
  for (const auto &[param, updated] : plan.paramUpdates) {
    if (param < 0 || updated < 0 ||
        static_cast<size_t>(param) >= owned.size() ||
        static_cast<size_t>(updated) >= owned.size())
      continue;
    int32_t p = owned[param], u = owned[updated];
    if (p < 0 || u < 0 || facts.written[p] || !facts.written[u])
      continue;
    if (buffers[p].bytes == buffers[u].bytes &&
        sameRegion(plan::bufferRegion(plan, device, p),
                   plan::bufferRegion(plan, device, u)))
      pairs.push_back({u, p});
  }
  // By buffer; a buffer named twice keeps its last parameter (as an
  // alias table would).
  std::stable_sort(pairs.begin(), pairs.end(),
                   [](const auto &a, const auto &b) { return a.first < b.first; });
  std::vector<std::pair<int32_t, int32_t>> unique;
  for (size_t i = 0; i < pairs.size(); ++i)
    if (i + 1 == pairs.size() || pairs[i + 1].first != pairs[i].first)
      unique.push_back(pairs[i]);
  return unique;
}

} // namespace

std::vector<int32_t> inPlaceUpdatedBuffers(const plan::Plan &plan,
                                           size_t device) {
  std::vector<int32_t> alias(plan::buffersOf(plan, device).size(), -1);
  if (plan.paramUpdates.empty())
    return alias;
  for (const auto &[u, p] :
       inPlacePairsOf(plan, device, WrittenBuffers(plan, device)))
    alias[u] = p;
  return alias;
}

std::vector<std::vector<std::pair<int32_t, int32_t>>>
inPlaceUpdatedPairs(const plan::Plan &plan) {
  const size_t k = plan.devices.size();
  std::vector<std::vector<std::pair<int32_t, int32_t>>> pairs(k);
  if (plan.paramUpdates.empty())
    return pairs;
  // Program by program: its written buffers, then its devices' pairs.
  const std::vector<std::vector<uint32_t>> runners =
      plan::devicesByProgram(plan);
  for (size_t owner = 0; owner < k; ++owner) {
    if (runners[owner].empty())
      continue;
    const WrittenBuffers facts(plan, owner);
    for (uint32_t d : runners[owner])
      pairs[d] = inPlacePairsOf(plan, d, facts);
  }
  return pairs;
}

void updateParamsInPlace(plan::Plan &plan) {
  if (plan.paramUpdates.empty())
    return;
  const size_t k = plan.devices.size();
  // The candidates, program by program: devices that share a program
  // (SharedPrograms.h) share the owned buffers, producers and copies found
  // in it; their regions are their own.
  const std::vector<std::vector<uint32_t>> runners =
      plan::devicesByProgram(plan);
  std::vector<Candidate> candidates;
  for (size_t owner = 0; owner < k; ++owner) {
    if (runners[owner].empty())
      continue;
    const std::vector<plan::Buffer> &buffers = plan.devices[owner].buffers;
    const std::vector<plan::Instr> &instrs = plan.devices[owner].instrs;
    const std::vector<int32_t> owned = ownedBuffers(plan, buffers);
    // The producer (single-output compute) and the final copy of each
    // buffer (the last one; kNone: none), indexed by buffer id: a map
    // insert per instruction was a tenth of this pass.
    constexpr size_t kNone = std::numeric_limits<size_t>::max();
    std::vector<size_t> producer(buffers.size(), kNone),
        copyInto(buffers.size(), kNone);
    for (size_t i = 0; i < instrs.size(); ++i) {
      const plan::Instr &instr = instrs[i];
      // Operand lists are separate allocations: load a later one's early.
      if (i + kPrefetchAhead < instrs.size())
        __builtin_prefetch(instrs[i + kPrefetchAhead].outputs.data());
      if (instr.kind == plan::Instr::Kind::Compute &&
          instr.outputs.size() == 1 && instr.outputs[0] >= 0)
        producer[instr.outputs[0]] = i;
      if (instr.kind == plan::Instr::Kind::Fetch && instr.dst >= 0 &&
          instr.op == kParamUpdateOp)
        copyInto[instr.dst] = i;
    }
    for (uint32_t d : runners[owner])
      for (const auto &[param, updated] : plan.paramUpdates) {
        int32_t p = owned[param], u = owned[updated];
        if (p < 0 || u < 0)
          continue;
        const plan::Buffer &pb = buffers[p], &ub = buffers[u];
        const plan::BoxView updatedRegion = plan::bufferRegion(plan, d, u);
        if (pb.bytes == 0 || pb.bytes != ub.bytes ||
            !sameRegion(plan::bufferRegion(plan, d, p), updatedRegion))
          continue;
        const size_t copy = copyInto[p], update = producer[u];
        if (copy == kNone || update == kNone)
          continue;
        std::vector<plan::Piece> pieces =
            plan::derivePieces(plan, d, instrs[copy]);
        if (pieces.size() != 1 ||
            pieces[0].device != static_cast<int32_t>(d) ||
            pieces[0].buffer != u ||
            !sameRegion(plan::BoxView(pieces[0].region), updatedRegion))
          continue;
        if (!llvm::is_contained(kInPlaceKernels, instrs[update].kernel))
          continue;
        candidates.push_back({static_cast<int32_t>(d), p, u, copy, update});
      }
  }
  if (candidates.empty())
    return;

  // Who else touches the candidates' buffers, on every device: the new
  // value must be read by its copy alone and written by its update alone;
  // the parameter's last reader other than the update decides whether the
  // update may stay where it is.
  struct Uses {
    size_t otherUses = 0;      ///< of the new value's buffer
    int64_t lastParamRead = -1; ///< seq, not counting the update itself
  };
  std::vector<Uses> uses(candidates.size());
  std::vector<llvm::DenseMap<int32_t, size_t>> byUpdated(k), byParam(k);
  // Per device, the buffers either map holds: most buffer uses are of
  // other buffers, and a bit test is cheaper than two hash lookups.
  std::vector<std::vector<bool>> inMaps(k);
  for (size_t d = 0; d < k; ++d)
    inMaps[d].assign(plan::buffersOf(plan, d).size(), false);
  for (size_t c = 0; c < candidates.size(); ++c) {
    const Candidate &cand = candidates[c];
    byUpdated[cand.device][cand.updated] = c;
    byParam[cand.device][cand.param] = c;
    inMaps[cand.device][cand.updated] = true;
    inMaps[cand.device][cand.param] = true;
  }
  // A collective's source table (format 3.0) names one buffer per device;
  // the pieces an instruction takes from it are derived on demand. A table
  // naming a candidate's new value: its instructions' pieces are derived
  // (only parameter-update copies read new values: each is one local
  // piece). A table naming a parameter: read at that seq, without deriving
  // (an all-gather of weights: k pieces on each of k devices), which at
  // worst moves an update to the step's end.
  llvm::DenseMap<const plan::CollectiveSources *, bool> namesNewValue;
  llvm::DenseSet<std::pair<const plan::CollectiveSources *, int64_t>>
      paramTablesSeen;
  // Program by program (by its owner), instruction by instruction, the
  // devices that run it. A device's own operands are the program's: only
  // those that are some runner's candidate buffer are visited per runner.
  for (size_t owner = 0; owner < k; ++owner) {
    if (runners[owner].empty())
      continue;
    const std::vector<plan::Instr> &instrs = plan.devices[owner].instrs;
    // The buffers of this program that are a candidate on some runner.
    std::vector<bool> anyRunner(plan.devices[owner].buffers.size(), false);
    for (uint32_t d : runners[owner])
      for (const auto &[buffer, c] : byUpdated[d])
        anyRunner[buffer] = true;
    for (uint32_t d : runners[owner])
      for (const auto &[buffer, c] : byParam[d])
        anyRunner[buffer] = true;
    for (size_t i = 0; i < instrs.size(); ++i) {
      const plan::Instr &instr = instrs[i];
      if (i + kPrefetchAhead < instrs.size()) {
        __builtin_prefetch(instrs[i + kPrefetchAhead].inputs.data());
        __builtin_prefetch(instrs[i + kPrefetchAhead].outputs.data());
      }
      // Instruction i of device d uses buffer `buffer` of device `device`.
      auto use = [&](size_t d, int32_t device, int32_t buffer, bool read) {
        if (!inMaps[device][buffer])
          return;
        if (auto it = byUpdated[device].find(buffer);
            it != byUpdated[device].end()) {
          const Candidate &c = candidates[it->second];
          bool own = static_cast<size_t>(c.device) == d &&
                     (i == c.copy || i == c.update);
          if (!own)
            ++uses[it->second].otherUses;
        }
        if (!read)
          return;
        if (auto it = byParam[device].find(buffer);
            it != byParam[device].end()) {
          const Candidate &c = candidates[it->second];
          if (!(static_cast<size_t>(c.device) == d && i == c.update))
            uses[it->second].lastParamRead =
                std::max(uses[it->second].lastParamRead, instr.seq);
        }
      };
      auto ownUse = [&](int32_t buffer, bool read) {
        if (buffer < 0 || !anyRunner[buffer])
          return;
        for (uint32_t d : runners[owner])
          use(d, static_cast<int32_t>(d), buffer, read);
      };
      for (int32_t b : instr.inputs)
        ownUse(b, /*read=*/true);
      for (int32_t b : instr.outputs)
        ownUse(b, /*read=*/false);
      // A reduction reads what it adds to.
      ownUse(instr.dst, instr.kind == plan::Instr::Kind::Reduce);
      if (instr.kind == plan::Instr::Kind::Compute)
        continue;
      if (!instr.sources || !instr.pieces.empty()) {
        // Explicit pieces (every device that runs the program has them).
        for (uint32_t d : runners[owner])
          for (const plan::Piece &piece : instr.pieces)
            use(d, piece.device, piece.buffer, /*read=*/true);
        continue;
      }
      const plan::CollectiveSources *table = instr.sources.get();
      auto [known, added] = namesNewValue.try_emplace(table, false);
      if (added)
        for (size_t e = 0; e < table->buffers.size() && e < k; ++e)
          known->second = known->second ||
                          byUpdated[e].count(table->buffers[e]) != 0;
      if (known->second) {
        for (uint32_t d : runners[owner])
          plan::forEachPiece(plan, d, instr, [&](const plan::Piece &piece) {
            use(d, piece.device, piece.buffer, /*read=*/true);
          });
      } else if (paramTablesSeen.insert({table, instr.seq}).second) {
        for (size_t e = 0; e < table->buffers.size() && e < k; ++e)
          if (auto it = byParam[e].find(table->buffers[e]);
              it != byParam[e].end())
            uses[it->second].lastParamRead =
                std::max(uses[it->second].lastParamRead, instr.seq);
      }
    }
  }

  // The step's end: where the copies are.
  int64_t endSeq = std::numeric_limits<int64_t>::min();
  for (const Candidate &c : candidates)
    endSeq = std::max(endSeq, plan::instrsOf(plan, c.device)[c.copy].seq);
  // Per device, what changes: the copies dropped (their index) and the
  // updates moved to the end (-1 - their index), in candidate order.
  std::vector<std::vector<int64_t>> edits(k);
  bool moved = false;
  for (size_t c = 0; c < candidates.size(); ++c) {
    const Candidate &cand = candidates[c];
    if (uses[c].otherUses != 0)
      continue;
    edits[cand.device].push_back(static_cast<int64_t>(cand.copy));
    if (uses[c].lastParamRead >=
        plan::instrsOf(plan, cand.device)[cand.update].seq) {
      edits[cand.device].push_back(-1 - static_cast<int64_t>(cand.update));
      moved = true;
    }
  }
  // Devices sharing a program whose edits differ get programs of their own.
  plan::splitSharedPrograms(plan, edits);
  for (size_t d = 0; d < k; ++d) {
    if (plan.devices[d].programOf >= 0)
      continue; // edited with its program's owner
    if (!moved && edits[d].empty())
      continue; // nothing changes on this device
    auto &instrs = plan.devices[d].instrs;
    std::vector<bool> drop(instrs.size(), false);
    for (int64_t edit : edits[d]) {
      if (edit >= 0)
        drop[edit] = true;
      else
        instrs[-1 - edit].seq = endSeq;
    }
    // The dropped copies out, the order kept.
    std::vector<uint32_t> order;
    order.reserve(instrs.size());
    for (size_t i = 0; i < instrs.size(); ++i) {
      if (drop[i])
        continue;
      // The copies that remain overwrite other parameters, which a moved
      // update may read (a learning rate, a step count): they run after
      // the moved updates.
      if (moved && instrs[i].kind == plan::Instr::Kind::Fetch &&
          instrs[i].op == kParamUpdateOp)
        instrs[i].seq = endSeq + 1;
      order.push_back(static_cast<uint32_t>(i));
    }
    // A stable sort by seq (moved updates), of the order, so that each
    // instruction moves once; dropping alone keeps the order.
    if (moved)
      std::stable_sort(order.begin(), order.end(),
                       [&](uint32_t a, uint32_t b) {
                         return instrs[a].seq < instrs[b].seq;
                       });
    plan::reorderProgramInstrs(plan, d, order);
  }
}

} // namespace tofu
