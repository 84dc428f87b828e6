//===- MemoryPlanner.cpp - static per-device memory plan ------------------===//
//
// Each buffer lives from the first instruction that writes it to the last
// instruction, on any device, that reads it (peers read a device's buffers
// through fetches, so liveness is global). Parameters and the step's input
// batch are persistent. Buffers get 64-byte aligned offsets. Placing
// lifetimes in as little address space as possible is dynamic storage
// allocation (NP-hard), so several placements are tried per device and the
// smallest arena wins (its size is the peak):
//  - first fit in order of first use, and by size, largest first;
//  - skyline best fit (Sekiyama et al., "Profile-guided memory optimization
//    for deep neural networks", 2018, after Burke et al.'s best-fit strip
//    packing): fill the lowest gap of the address-space skyline with the
//    longest-lived buffer whose lifetime fits inside it, else raise the gap;
//  - while the arena is still above the aligned liveness bound (the most
//    aligned bytes live at one moment, which no placement beats), first fit
//    in orders whose keys (size, or size times lifetime) are scaled by
//    pseudo-random factors from a fixed seed, so plan.bin stays
//    deterministic; the search stops at the bound or after a fixed budget.
// The liveness lower bound is computed from the same lifetimes, so the two
// are comparable (bench/memory.md).
//
// Devices of a group do the same work on different tiles, so many devices
// have equal buffer sizes and lifetimes: the placements that depend on
// nothing else (both first fits and skyline) are computed once per class of
// such devices; the seeded search runs per device for the first 16 devices
// of a class, and the others take the best placement those found
// (bench/compile_scale.md).
//
//===----------------------------------------------------------------------===//
#include "tofu/Target/PlanBuilder.h"
#include "tofu/runtime/SharedPrograms.h"
#include "tofu/runtime/CollectivePieces.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <numeric>

namespace tofu {

namespace {
constexpr uint64_t kAlignment = 64;
constexpr int64_t kForever = std::numeric_limits<int64_t>::max();

struct Lifetime {
  int64_t first = kForever, last = -1;
  void touch(int64_t seq) {
    first = std::min(first, seq);
    last = std::max(last, seq);
  }
};

uint64_t alignUp(uint64_t value) {
  return (value + kAlignment - 1) / kAlignment * kAlignment;
}

/// The lifetimes of the buffers of one program from its own instructions'
/// uses (operands and destinations), without other devices' reads.
std::vector<Lifetime> ownLifetimes(const std::vector<plan::Instr> &program,
                                   size_t numBuffers) {
  std::vector<Lifetime> life(numBuffers);
  for (size_t i = 0; i < program.size(); ++i) {
    const plan::Instr &instr = program[i];
    // Each instruction's operand lists are their own allocations: ask for
    // those of a later instruction while this one is processed (the loop
    // waited on each list's first load).
    constexpr size_t kAhead = 8;
    if (i + kAhead < program.size()) {
      __builtin_prefetch(program[i + kAhead].inputs.data());
      __builtin_prefetch(program[i + kAhead].outputs.data());
    }
    for (int32_t b : instr.inputs)
      if (b >= 0)
        life[b].touch(instr.seq);
    for (int32_t b : instr.outputs)
      life[b].touch(instr.seq);
    if (instr.dst >= 0)
      life[instr.dst].touch(instr.seq);
  }
  // A Relu right after the Gemm it reads from may run inside that GEMM
  // on the CUDA backend (cuBLASLt's ReLU epilogue, runtime/cuda
  // CudaSchedule.cpp): its output must not take the place of the Gemm's
  // operands, so it is live from the Gemm on.
  for (size_t i = 0; i + 1 < program.size(); ++i) {
    const plan::Instr &gemm = program[i], &relu = program[i + 1];
    if (gemm.kind == plan::Instr::Kind::Compute &&
        relu.kind == plan::Instr::Kind::Compute && gemm.outputs.size() == 1 &&
        relu.inputs.size() == 1 && relu.outputs.size() == 1 &&
        relu.inputs[0] == gemm.outputs[0] && relu.outputs[0] >= 0 &&
        gemm.kernel == "Gemm" && relu.kernel == "Relu")
      life[relu.outputs[0]].touch(gemm.seq);
  }
  return life;
}

/// Every device's buffer lifetimes, kept once per group of devices whose
/// lifetimes are equal: devices that run one program (SharedPrograms.h)
/// and whose buffers other devices read at the same moments.
struct DeviceLifetimes {
  /// The distinct lifetime tables, in order of their first device.
  std::vector<std::vector<Lifetime>> groups;
  /// Per device, its table in `groups`.
  std::vector<uint32_t> groupOf;
  /// Per group, its first device.
  std::vector<size_t> firstDevice;

  const std::vector<Lifetime> &of(size_t device) const {
    return groups[groupOf[device]];
  }
};

/// True when `buffer` lives for the whole step: an owned
/// tile of a parameter, state, input or label.
bool isPersistent(const plan::Plan &plan, const plan::Buffer &buffer) {
  plan::TensorRole role = plan.tensors[buffer.tensor].role;
  return buffer.owned &&
         (role == plan::TensorRole::Param || role == plan::TensorRole::State ||
          role == plan::TensorRole::Input || role == plan::TensorRole::Label);
}

/// Every buffer's lifetime in `seq` units; persistent and never-used
/// buffers live for the whole step ({-1, kForever}).
///
/// A device's lifetimes are its program's own uses (found once per program)
/// widened by the moments other devices read its buffers. Those reads are
/// collected per device as the (buffer, seq) pairs that widen a lifetime;
/// devices with the same program and the same pairs share one table, so
/// that k devices running a few programs do not make k tables.
DeviceLifetimes bufferLifetimes(const plan::Plan &plan) {
  size_t k = plan.devices.size();
  // Per program (by its owner): its own uses, with persistent and unused
  // buffers not yet set to live forever.
  std::vector<std::vector<Lifetime>> own(k);
  std::vector<std::vector<char>> persistent(k);
  for (size_t d = 0; d < k; ++d) {
    if (plan.devices[d].programOf >= 0)
      continue;
    const auto &buffers = plan.devices[d].buffers;
    own[d] = ownLifetimes(plan.devices[d].instrs, buffers.size());
    persistent[d].resize(buffers.size());
    for (size_t b = 0; b < buffers.size(); ++b)
      persistent[d][b] = isPersistent(plan, buffers[b]);
  }
  // The reads by other devices that widen a lifetime, per device.
  std::vector<std::vector<std::pair<int32_t, int64_t>>> widened(k);
  // Whether a read at `seq` widens `buffer`'s lifetime on `device`.
  auto widens = [&](size_t device, int32_t buffer, int64_t seq) {
    const size_t owner = plan::programOwner(plan, device);
    const Lifetime &life = own[owner][buffer];
    return !persistent[owner][buffer] && (seq < life.first || seq > life.last);
  };
  auto touch = [&](size_t device, int32_t buffer, int64_t seq) {
    if (widens(device, buffer, seq))
      widened[device].push_back({buffer, seq});
  };
  // The instructions of one collective (one source table) at one seq touch
  // each source buffer at that seq; a buffer touched by one of them needs no
  // touch by the others, nor does one whose lifetime already holds that
  // seq. So each (table, seq) remembers which devices' sources are left to
  // touch, and stops deriving pieces once none are (an all-gather: after
  // its first instruction; a fetch of tiles their owners read at that
  // step: at once), which keeps this pass linear in k per collective
  // instead of visiting k pieces on each of k devices.
  struct CollectiveUse {
    std::vector<char> touched; ///< per device: nothing (left) to touch
    size_t untouched = 0;      ///< sources left to touch
    /// Per cell of the table's index: all its devices touched.
    std::vector<char> cellDone;
  };
  llvm::DenseMap<std::pair<const plan::CollectiveSources *, int64_t>,
                 uint32_t>
      useIndex;
  std::vector<CollectiveUse> uses;
  // Program by program (by its owner), instruction by instruction, the
  // devices that run it: one table's index is read by the k devices in a
  // row, not once per device between all the others'.
  const std::vector<std::vector<uint32_t>> runners =
      plan::devicesByProgram(plan);
  for (size_t owner = 0; owner < k; ++owner) {
    const std::vector<plan::Instr> &program = plan.devices[owner].instrs;
    for (const plan::Instr &instr : program) {
      if (instr.kind == plan::Instr::Kind::Compute)
        continue;
      if (!instr.sources || !instr.pieces.empty()) {
        // Explicit pieces (every device that runs the program has them).
        for (const plan::Piece &piece : instr.pieces)
          touch(piece.device, piece.buffer, instr.seq);
        continue;
      }
      auto [it, added] = useIndex.try_emplace({instr.sources.get(), instr.seq},
                                              static_cast<uint32_t>(uses.size()));
      if (added) {
        CollectiveUse &use = uses.emplace_back();
        const std::vector<int32_t> &sources = instr.sources->buffers;
        use.touched.assign(k, 1);
        for (size_t e = 0; e < sources.size() && e < k; ++e)
          if (sources[e] >= 0 && widens(e, sources[e], instr.seq)) {
            use.touched[e] = 0;
            ++use.untouched;
          }
        if (use.untouched == 0)
          std::vector<char>().swap(use.touched);
      }
      CollectiveUse &use = uses[it->second];
      const plan::CollectiveSources &table = *instr.sources;
      auto touchSource = [&](size_t e) {
        if (use.touched[e])
          return;
        use.touched[e] = 1;
        --use.untouched;
        widened[e].push_back({table.buffers[e], instr.seq});
      };
      for (uint32_t d : runners[owner]) {
        if (use.untouched == 0)
          break;
        // With the table's index, by whole cells (a cell of g replicas or
        // partial sums is touched once, not by g pieces on every device
        // that reduces from it); otherwise piece by piece.
        bool byCells = plan::forEachSourceCell(
            plan, d, instr,
            [&](uint64_t cell) {
              const plan::CollectiveSourceIndex &index = *table.index;
              if (use.cellDone.empty())
                use.cellDone.assign(index.cellStart.size() - 1, 0);
              if (use.cellDone[cell])
                return;
              use.cellDone[cell] = 1;
              for (uint32_t j = index.cellStart[cell];
                   j < index.cellStart[cell + 1]; ++j)
                touchSource(static_cast<size_t>(index.cellDevices[j]));
            },
            touchSource);
        if (!byCells)
          plan::forEachPiece(plan, d, instr, [&](const plan::Piece &piece) {
            touchSource(static_cast<size_t>(piece.device));
          });
      }
      if (use.untouched == 0) {
        std::vector<char>().swap(use.touched);
        std::vector<char>().swap(use.cellDone);
      }
    }
  }
  // Group the devices by program and widening reads (found by hash,
  // confirmed by comparison); each group's table is its program's own
  // lifetimes, widened, with persistent and unused buffers set to live
  // for the whole step.
  DeviceLifetimes life;
  life.groupOf.resize(k);
  llvm::DenseMap<uint64_t, llvm::SmallVector<uint32_t, 1>> groupsByHash;
  std::vector<std::pair<size_t, std::vector<std::pair<int32_t, int64_t>>>>
      groupKeys;
  for (size_t d = 0; d < k; ++d) {
    auto &reads = widened[d];
    std::sort(reads.begin(), reads.end());
    reads.erase(std::unique(reads.begin(), reads.end()), reads.end());
    const size_t owner = plan::programOwner(plan, d);
    uint64_t hash = llvm::xxh3_64bits(llvm::ArrayRef<uint8_t>(
        reinterpret_cast<const uint8_t *>(reads.data()),
        reads.size() * sizeof(reads[0])));
    hash ^= owner * 0x9e3779b97f4a7c15ull;
    llvm::SmallVector<uint32_t, 1> &candidates = groupsByHash[hash];
    auto same = llvm::find_if(candidates, [&](uint32_t g) {
      return groupKeys[g].first == owner && groupKeys[g].second == reads;
    });
    if (same != candidates.end()) {
      life.groupOf[d] = *same;
      std::vector<std::pair<int32_t, int64_t>>().swap(reads);
      continue;
    }
    const uint32_t group = static_cast<uint32_t>(life.groups.size());
    candidates.push_back(group);
    life.groupOf[d] = group;
    life.firstDevice.push_back(d);
    std::vector<Lifetime> table = own[owner];
    for (const auto &[buffer, seq] : reads)
      table[buffer].touch(seq);
    for (size_t b = 0; b < table.size(); ++b)
      if (persistent[owner][b] || table[b].last < 0)
        table[b] = {-1, kForever};
    life.groups.push_back(std::move(table));
    groupKeys.push_back({owner, std::move(reads)});
  }
  return life;
}

} // namespace

namespace {

/// Most of `bytesOf(b)` (0: left out) live at one moment over lifetimes
/// `life`: a sweep over lifetime ends, +bytes at `first`, -bytes after
/// `last`.
uint64_t peakLiveBytes(const std::vector<Lifetime> &life,
                       llvm::function_ref<int64_t(size_t)> bytesOf) {
  std::vector<std::pair<int64_t, int64_t>> events;
  for (size_t b = 0; b < life.size(); ++b) {
    int64_t bytes = bytesOf(b);
    if (bytes == 0)
      continue;
    events.push_back({life[b].first, bytes});
    if (life[b].last != kForever)
      events.push_back({life[b].last + 1, -bytes});
  }
  // At equal times, ends (negative) before starts: [first, last] closed.
  std::sort(events.begin(), events.end());
  int64_t live = 0, most = 0;
  for (const auto &[time, delta] : events) {
    live += delta;
    most = std::max(most, live);
  }
  return static_cast<uint64_t>(most);
}

/// Most bytes of `buffers` live at one moment over lifetimes `life`,
/// leaving out the new values computed in place (`inPlace`, by buffer:
/// they are in their parameter's bytes).
uint64_t liveBound(const std::vector<plan::Buffer> &buffers,
                   const std::vector<Lifetime> &life,
                   llvm::ArrayRef<std::pair<int32_t, int32_t>> inPlace) {
  std::vector<char> inParam(buffers.size(), 0);
  for (const auto &[buffer, param] : inPlace)
    inParam[buffer] = 1;
  return peakLiveBytes(life, [&](size_t b) -> int64_t {
    return inParam[b] ? 0 : static_cast<int64_t>(buffers[b].bytes);
  });
}

} // namespace

std::vector<uint64_t> liveBytesLowerBound(const plan::Plan &plan) {
  DeviceLifetimes life = bufferLifetimes(plan);
  std::vector<std::vector<std::pair<int32_t, int32_t>>> inPlace =
      inPlaceUpdatedPairs(plan);
  std::vector<uint64_t> bound(plan.devices.size(), 0);
  // Once per group of devices with the same lifetimes and in-place
  // buffers (a group runs one program: its buffers are the same).
  std::map<std::pair<uint32_t, std::vector<std::pair<int32_t, int32_t>>>,
           uint64_t>
      known;
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    auto [it, added] =
        known.try_emplace({life.groupOf[d], std::move(inPlace[d])}, 0);
    if (added)
      it->second =
          liveBound(plan::buffersOf(plan, d), life.of(d), it->first.second);
    bound[d] = it->second;
  }
  return bound;
}

namespace {

/// Most aligned bytes of `buffers` live at one moment: the arena size no
/// placement of these lifetimes can beat (the search below stops there).
uint64_t alignedLiveBound(const std::vector<plan::Buffer> &buffers,
                          const std::vector<Lifetime> &life) {
  return peakLiveBytes(life, [&](size_t b) -> int64_t {
    return static_cast<int64_t>(alignUp(buffers[b].bytes));
  });
}

/// First-fit placement of a device's buffers in `order`: each at the lowest
/// 64-byte aligned offset that no already placed buffer with an overlapping
/// lifetime occupies. Returns the offsets and sets `peak` to the arena size.
///
/// The placed buffers are kept sorted by offset, so one scan meets the
/// address ranges of those alive at the same time in address order and stops
/// at the first gap that fits: no per-buffer list of taken ranges to collect
/// and sort (which made this quadratic with a large constant).
std::vector<uint64_t> placeFirstFit(const std::vector<plan::Buffer> &buffers,
                                    const std::vector<Lifetime> &life,
                                    const std::vector<size_t> &order,
                                    uint64_t &peak) {
  std::vector<uint64_t> offsets(buffers.size(), 0);
  /// A placed buffer: its address range [lo, hi) and lifetime.
  struct Placed {
    uint64_t lo, hi;
    int64_t first, last;
  };
  std::vector<Placed> placed; // sorted by lo
  placed.reserve(buffers.size());
  peak = 0;
  // While the order is by first use, a placed buffer that died before the
  // current one's first use is dead for every later one too: such buffers
  // are dropped from `placed` now and then (every kCompactEvery
  // placements), so the scan meets mostly live ones. Any other order keeps
  // them all.
  constexpr size_t kCompactEvery = 64;
  bool byFirstUse = true;
  for (size_t i = 1; i < order.size() && byFirstUse; ++i)
    byFirstUse = life[order[i - 1]].first <= life[order[i]].first;
  size_t sinceCompact = 0;
  for (size_t b : order) {
    uint64_t size = alignUp(buffers[b].bytes);
    if (size == 0)
      continue;
    const int64_t first = life[b].first, last = life[b].last;
    if (byFirstUse && ++sinceCompact >= kCompactEvery) {
      sinceCompact = 0;
      placed.erase(std::remove_if(placed.begin(), placed.end(),
                                  [&](const Placed &p) { return p.last < first; }),
                   placed.end());
    }
    // The lowest offset whose [offset, offset + size) meets no range of a
    // buffer alive at the same time. Ranges with equal lo may come in any
    // order: each only raises the offset to its hi.
    uint64_t offset = 0;
    for (const Placed &p : placed) {
      if (p.last < first || last < p.first)
        continue;
      if (offset + size <= p.lo)
        break;
      offset = std::max(offset, p.hi);
    }
    offsets[b] = offset;
    peak = std::max(peak, offset + size);
    auto at = std::upper_bound(
        placed.begin(), placed.end(), offset,
        [](uint64_t value, const Placed &p) { return value < p.lo; });
    placed.insert(at, Placed{offset, offset + size, first, last});
  }
  return offsets;
}

/// Skyline best fit: the address space over time is a skyline (per moment,
/// the top of what is placed there). Repeatedly take its lowest stretch
/// (leftmost on a tie) and put there the unplaced buffer with the longest
/// lifetime (then largest, then lowest id) that lies wholly inside the
/// stretch; when none fits, raise the stretch to its lower neighbour.
std::vector<uint64_t> placeSkyline(const std::vector<plan::Buffer> &buffers,
                                   const std::vector<Lifetime> &life,
                                   uint64_t &peak) {
  std::vector<uint64_t> offsets(buffers.size(), 0);
  // Moments: the distinct first and last uses, numbered 0..T-1.
  std::vector<int64_t> moments;
  for (size_t b = 0; b < buffers.size(); ++b) {
    moments.push_back(life[b].first);
    moments.push_back(life[b].last);
  }
  std::sort(moments.begin(), moments.end());
  moments.erase(std::unique(moments.begin(), moments.end()), moments.end());
  auto momentIndex = [&](int64_t t) {
    return static_cast<size_t>(
        std::lower_bound(moments.begin(), moments.end(), t) - moments.begin());
  };
  struct Item {
    size_t buffer, first, last;
    uint64_t size;
  };
  std::vector<Item> items;
  for (size_t b = 0; b < buffers.size(); ++b)
    if (uint64_t size = alignUp(buffers[b].bytes))
      items.push_back({b, momentIndex(life[b].first), momentIndex(life[b].last),
                       size});
  std::stable_sort(items.begin(), items.end(), [](const Item &a, const Item &b) {
    if (a.last - a.first != b.last - b.first)
      return a.last - a.first > b.last - b.first;
    return a.size > b.size;
  });
  std::vector<uint64_t> height(moments.size(), 0);
  std::vector<bool> done(items.size(), false);
  size_t left = items.size(), firstUndone = 0;
  while (left > 0) {
    size_t lo = static_cast<size_t>(
        std::min_element(height.begin(), height.end()) - height.begin());
    size_t hi = lo;
    while (hi + 1 < height.size() && height[hi + 1] == height[lo])
      ++hi;
    while (done[firstUndone])
      ++firstUndone;
    size_t pick = items.size();
    for (size_t i = firstUndone; i < items.size(); ++i)
      if (!done[i] && items[i].first >= lo && items[i].last <= hi) {
        pick = i;
        break;
      }
    if (pick < items.size()) {
      const Item &item = items[pick];
      offsets[item.buffer] = height[lo];
      std::fill(height.begin() + item.first, height.begin() + item.last + 1,
                height[lo] + item.size);
      done[pick] = true;
      --left;
      continue;
    }
    // Nothing fits: the stretch becomes waste up to its lower neighbour
    // (one exists: a stretch over every moment fits any buffer).
    uint64_t raised = std::numeric_limits<uint64_t>::max();
    if (lo > 0)
      raised = height[lo - 1];
    if (hi + 1 < height.size())
      raised = std::min(raised, height[hi + 1]);
    std::fill(height.begin() + lo, height.begin() + hi + 1, raised);
  }
  peak = height.empty() ? 0 : *std::max_element(height.begin(), height.end());
  return offsets;
}

/// SplitMix64: a small, fixed pseudo-random sequence for the search (the
/// same seed gives the same plan).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0.3, 1.7).
  double factor() { return 0.3 + 1.4 * static_cast<double>(next() >> 11) * 0x1p-53; }
};

/// The search runs while the arena is more than 1/kSearchSlack above the
/// aligned bound; it tries at most kSearchOrders first-fit orders per device
/// and at most kSearchChecks lifetime-overlap checks in all (about n^2 / 2
/// per order), which keeps planning of models with thousands of buffers
/// fast.
constexpr uint64_t kSearchSlack = 100;
constexpr unsigned kSearchOrders = 256;
constexpr double kSearchChecks = 2e7;
/// The seeded search runs on at most this many devices of a class of equal
/// devices, so that its cost does not grow with k beyond that (every device
/// up to k = 16 runs its own).
constexpr size_t kSearchedDevicesPerClass = 16;
/// Skyline best fit costs about (n + moments)^2 steps; above this many
/// buffers it is skipped.
constexpr size_t kSkylineBuffers = 8192;

} // namespace

namespace {

/// A placement of one device's buffers: offsets and the arena size.
struct Placement {
  std::vector<uint64_t> offsets;
  uint64_t peak = std::numeric_limits<uint64_t>::max();

  /// Keeps the smaller arena (the earlier candidate on a tie).
  void consider(std::vector<uint64_t> candidate, uint64_t arena) {
    if (arena < peak) {
      peak = arena;
      offsets = std::move(candidate);
    }
  }
};

/// The placements that depend on nothing but the buffers' sizes and
/// lifetimes: first fit in two orders and skyline best fit; the smallest.
Placement placeWithoutSearch(const std::vector<plan::Buffer> &buffers,
                             const std::vector<Lifetime> &lifetimes) {
  Placement best;
  std::vector<size_t> byFirstUse(buffers.size());
  std::iota(byFirstUse.begin(), byFirstUse.end(), size_t{0});
  std::vector<size_t> bySize = byFirstUse;
  // By first use (ties: largest first, then id), and by size, largest
  // first (ties: first use, then id), which packs long-lived large
  // buffers before the small ones fragment the arena.
  std::stable_sort(byFirstUse.begin(), byFirstUse.end(),
                   [&](size_t a, size_t b) {
                     if (lifetimes[a].first != lifetimes[b].first)
                       return lifetimes[a].first < lifetimes[b].first;
                     return buffers[a].bytes > buffers[b].bytes;
                   });
  std::stable_sort(bySize.begin(), bySize.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes)
      return buffers[a].bytes > buffers[b].bytes;
    return lifetimes[a].first < lifetimes[b].first;
  });
  uint64_t arena = 0;
  {
    std::vector<uint64_t> placed =
        placeFirstFit(buffers, lifetimes, byFirstUse, arena);
    best.consider(std::move(placed), arena);
  }
  {
    std::vector<uint64_t> placed =
        placeFirstFit(buffers, lifetimes, bySize, arena);
    best.consider(std::move(placed), arena);
  }
  if (buffers.size() <= kSkylineBuffers) {
    std::vector<uint64_t> placed = placeSkyline(buffers, lifetimes, arena);
    best.consider(std::move(placed), arena);
  }
  return best;
}

/// Perturbed first-fit orders, from device `device`'s fixed seed, until
/// `best` is within 1% of the aligned bound or the budget is spent.
void searchPerturbedOrders(const std::vector<plan::Buffer> &buffers,
                           const std::vector<Lifetime> &lifetimes,
                           size_t device, Placement &best) {
  const uint64_t bound = alignedLiveBound(buffers, lifetimes);
  const uint64_t goal = bound + bound / kSearchSlack;
  const double n = static_cast<double>(buffers.size());
  unsigned orders = static_cast<unsigned>(
      std::min<double>(kSearchOrders, kSearchChecks / std::max(1.0, n * n / 2)));
  if (orders == 0 || best.peak <= goal)
    return;
  SplitMix64 random{0x746f6675ull + device}; // "tofu" + device: fixed seed
  std::vector<double> key(buffers.size());
  std::vector<size_t> order(buffers.size());
  uint64_t arena = 0;
  for (unsigned attempt = 0; attempt < orders && best.peak > goal; ++attempt) {
    for (size_t b = 0; b < buffers.size(); ++b) {
      double size = static_cast<double>(alignUp(buffers[b].bytes));
      // Alternate: size alone, or size times lifetime (capped, since
      // persistent buffers live forever).
      double weight = size;
      if (attempt % 2) {
        int64_t span = lifetimes[b].last == kForever
                           ? int64_t{1} << 40
                           : lifetimes[b].last - lifetimes[b].first + 1;
        weight *= static_cast<double>(span);
      }
      key[b] = weight * random.factor();
    }
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return key[a] > key[b]; });
    std::vector<uint64_t> placed =
        placeFirstFit(buffers, lifetimes, order, arena);
    best.consider(std::move(placed), arena);
  }
}

/// What the placements of one device depend on: each buffer's bytes and
/// lifetime, in buffer order. Devices of a group doing the same work on
/// different tiles have equal ones.
std::vector<int64_t> placementInputs(const std::vector<plan::Buffer> &buffers,
                                     const std::vector<Lifetime> &lifetimes) {
  std::vector<int64_t> inputs;
  inputs.reserve(3 * buffers.size());
  for (size_t b = 0; b < buffers.size(); ++b) {
    inputs.push_back(static_cast<int64_t>(buffers[b].bytes));
    inputs.push_back(lifetimes[b].first);
    inputs.push_back(lifetimes[b].last);
  }
  return inputs;
}

} // namespace

std::vector<uint64_t> planMemory(plan::Plan &plan) {
  size_t k = plan.devices.size();
  // A parameter's new value computed in place (updateParamsInPlace) has no
  // bytes of its own: it is placed at the parameter's offset below, and
  // takes no room meanwhile (placement skips buffers of 0 bytes). Devices
  // that share a program (SharedPrograms.h) and differ in these get
  // programs of their own first.
  std::vector<std::vector<std::pair<int32_t, int32_t>>> inPlace =
      inPlaceUpdatedPairs(plan);
  {
    std::vector<std::vector<int64_t>> keys(k);
    for (size_t d = 0; d < k; ++d)
      for (const auto &[buffer, param] : inPlace[d])
        keys[d].insert(keys[d].end(), {buffer, param});
    plan::splitSharedPrograms(plan, keys);
  }
  DeviceLifetimes life = bufferLifetimes(plan);
  // (A new value in place has its parameter's bytes: inPlaceUpdatedPairs
  // asks for that, so they are restored from the parameter below.)
  for (size_t d = 0; d < k; ++d)
    if (plan.devices[d].programOf < 0) // else its program's owner's
      for (const auto &[buffer, param] : inPlace[d])
        plan.devices[d].buffers[buffer].bytes = 0;
  // The search-free placements are computed once per class of devices with
  // equal placement inputs (found by hash, confirmed by comparison), which
  // are read once per group of devices with the same lifetimes (one
  // program: the same buffers). The perturbed search, seeded per device,
  // runs on the first kSearchedDevicesPerClass devices of a class; later
  // ones take the best placement those found (valid for any device of the
  // class).
  struct PlacementClass {
    std::vector<int64_t> inputs;
    Placement placement; ///< search-free
    size_t searched = 0; ///< devices that ran the search
    Placement best;      ///< the smallest they reached
  };
  std::vector<PlacementClass> classes;
  llvm::DenseMap<uint64_t, llvm::SmallVector<size_t, 1>> classesByHash;
  const size_t numGroups = life.groups.size();
  std::vector<size_t> classOfGroup(numGroups);
  std::vector<uint64_t> boundOfGroup(numGroups);
  for (size_t g = 0; g < numGroups; ++g) {
    const size_t first = life.firstDevice[g];
    const auto &buffers = plan::buffersOf(plan, first);
    const std::vector<Lifetime> &lifetimes = life.groups[g];
    std::vector<int64_t> inputs = placementInputs(buffers, lifetimes);
    uint64_t hash = llvm::xxh3_64bits(llvm::ArrayRef<uint8_t>(
        reinterpret_cast<const uint8_t *>(inputs.data()),
        inputs.size() * sizeof(int64_t)));
    llvm::SmallVector<size_t, 1> &candidates = classesByHash[hash];
    std::optional<size_t> same;
    for (size_t c : candidates)
      if (classes[c].inputs == inputs)
        same = c;
    if (!same) {
      same = classes.size();
      candidates.push_back(classes.size());
      classes.push_back(
          {std::move(inputs), placeWithoutSearch(buffers, lifetimes)});
    }
    classOfGroup[g] = *same;
    // The new values in place have no bytes here (set to 0 above).
    boundOfGroup[g] = liveBound(buffers, lifetimes, {});
  }
  // Per device, its placement: its own (searched), or its class's best.
  std::vector<Placement> searched(k);
  std::vector<const Placement *> placementOf(k, nullptr);
  std::vector<uint64_t> bounds(k, 0);
  for (size_t d = 0; d < k; ++d) {
    PlacementClass &same = classes[classOfGroup[life.groupOf[d]]];
    if (same.searched < kSearchedDevicesPerClass) {
      searched[d] = same.placement;
      searchPerturbedOrders(plan::buffersOf(plan, d), life.of(d), d,
                            searched[d]);
      ++same.searched;
      same.best.consider(searched[d].offsets, searched[d].peak);
      placementOf[d] = &searched[d];
    } else {
      // Its class has all its searched devices: its best is final.
      placementOf[d] = &same.best;
    }
    plan.devices[d].peakBytes = placementOf[d]->peak;
    bounds[d] = boundOfGroup[life.groupOf[d]];
  }
  // A device sharing a program whose offsets differ from its owner's gets
  // a program of its own.
  std::vector<std::vector<int64_t>> keys(k);
  for (size_t d = 0; d < k; ++d) {
    const int32_t owner = plan.devices[d].programOf;
    if (owner < 0 || placementOf[d] == placementOf[owner] ||
        placementOf[d]->offsets == placementOf[owner]->offsets)
      continue;
    keys[d].assign(placementOf[d]->offsets.begin(),
                   placementOf[d]->offsets.end());
  }
  for (size_t d = 0; d < k; ++d)
    if (plan.devices[d].programOf < 0)
      for (const auto &[buffer, param] : inPlace[d])
        plan.devices[d].buffers[buffer].bytes =
            plan.devices[d].buffers[param].bytes;
  plan::splitSharedPrograms(plan, keys);
  for (size_t d = 0; d < k; ++d) {
    if (plan.devices[d].programOf >= 0)
      continue;
    auto &buffers = plan.devices[d].buffers;
    const std::vector<uint64_t> &offsets = placementOf[d]->offsets;
    for (size_t b = 0; b < buffers.size(); ++b)
      buffers[b].offset = offsets[b];
    for (const auto &[buffer, param] : inPlace[d])
      buffers[buffer].offset = buffers[param].offset;
  }
  return bounds;
}

} // namespace tofu
