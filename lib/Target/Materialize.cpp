//===- Materialize.cpp - partitioned IR -> per-device programs ------------===//
//
// For every tofu.compute op, in program order, and every device d:
//   1. each input region d needs (concrete interval analysis of the op's TDL
//      spec over d's share) is either d's owned tile, or assembled by one
//      MultiFetch from the owners' tiles;
//   2. d runs the kernel on its local buffers;
//   3. d's owned tile of the output is filled from the produced tiles: kept
//      in place, copied, or summed when the strategy split a reduction.
// Parameters receive their updated values by a final copy (which
// updateParamsInPlace, UpdateInPlace.cpp, then removes where it can).
//
//===----------------------------------------------------------------------===//
#include "tofu/Analysis/TileGeometry.h"
#include "tofu/Dialect/TdlInstance.h"
#include "tofu/TDL/ProgramLowering.h"
#include "tofu/Target/PlanBuilder.h"
#include "tofu/runtime/CollectivePieces.h"
#include "tofu/runtime/SharedPrograms.h"

#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

using namespace mlir;

namespace tofu {
namespace {

/// The plan element type of an MLIR element type: f16, bf16, f32, f64, i1
/// (bool), and integers of 8, 16, 32 or 64 bits (signless and signed ones are
/// signed, unsigned ones unsigned). None for anything else.
std::optional<plan::DType> planDTypeOf(Type elem) {
  if (elem.isF32())
    return plan::DType::F32;
  if (elem.isF64())
    return plan::DType::F64;
  if (elem.isF16())
    return plan::DType::F16;
  if (elem.isBF16())
    return plan::DType::BF16;
  auto integer = dyn_cast<IntegerType>(elem);
  if (!integer)
    return std::nullopt;
  if (integer.getWidth() == 1)
    return plan::DType::Bool;
  bool isUnsigned = integer.isUnsigned();
  switch (integer.getWidth()) {
  case 8: return isUnsigned ? plan::DType::U8 : plan::DType::I8;
  case 16: return isUnsigned ? plan::DType::U16 : plan::DType::I16;
  case 32: return isUnsigned ? plan::DType::U32 : plan::DType::I32;
  case 64: return isUnsigned ? plan::DType::U64 : plan::DType::I64;
  default: return std::nullopt;
  }
}

plan::Box toPlanBox(const tdl::Box &box) {
  plan::Box result;
  result.lo.reserve(box.size());
  result.hi.reserve(box.size());
  for (const auto &r : box) {
    result.lo.push_back(r.lo);
    result.hi.push_back(r.hi);
  }
  return result;
}

bool contains(const tdl::Box &outer, const tdl::Box &inner) {
  return numElements(intersect(outer, inner)) == numElements(inner);
}

/// The row-major index of the first element of `box` when its elements are
/// one contiguous run of a tensor of `shape` (every dimension before some
/// dimension p spans one index, every one after p spans the whole
/// dimension); nullopt otherwise.
std::optional<int64_t> contiguousStart(const tdl::Box &box,
                                       llvm::ArrayRef<int64_t> shape) {
  size_t rank = shape.size();
  // p: the first dimension that spans more than one index.
  size_t p = 0;
  while (p < rank && box[p].hi - box[p].lo == 1)
    ++p;
  for (size_t i = p + 1; i < rank; ++i)
    if (box[i].lo != 0 || box[i].hi != shape[i])
      return std::nullopt;
  int64_t first = 0;
  for (size_t i = 0; i < rank; ++i)
    first = first * shape[i] + box[i].lo;
  return first;
}

plan::Attr toPlanAttr(const std::string &name, const tdl::AttrValue &value) {
  plan::Attr attr;
  attr.name = name;
  switch (value.kind) {
  case tdl::AttrValue::Kind::Int:
    attr.kind = plan::Attr::Kind::Int;
    attr.i = value.i;
    break;
  case tdl::AttrValue::Kind::Float:
    attr.kind = plan::Attr::Kind::Float;
    attr.f = value.f;
    break;
  case tdl::AttrValue::Kind::String:
    attr.kind = plan::Attr::Kind::String;
    attr.s = value.s;
    break;
  case tdl::AttrValue::Kind::Ints:
    attr.kind = plan::Attr::Kind::Ints;
    attr.ints = value.ints;
    break;
  }
  return attr;
}

/// Threads that each run one fixed part of a range: thread t always gets the
/// t-th of the contiguous parts, so a device's records are made and freed
/// on one thread (one malloc arena) op after op. The calling thread runs
/// the first part.
class StaticWorkers {
public:
  /// Starts numThreads - 1 threads.
  explicit StaticWorkers(unsigned numThreads);
  ~StaticWorkers();
  /// Runs body(i) for every i in [0, n), and returns when all have run.
  /// Not reentrant: a body must not call run.
  void run(size_t n, llvm::function_ref<void(size_t)> body);

private:
  void work(unsigned part);
  void runPart(unsigned part, size_t n,
               llvm::function_ref<void(size_t)> body) const;

  std::vector<std::thread> threads;
  std::mutex mutex;
  std::condition_variable wake, done;
  /// The range and body of the current run, its number, and the threads
  /// still running it.
  std::pair<size_t, llvm::function_ref<void(size_t)>> job{0, nullptr};
  uint64_t generation = 0;
  size_t busy = 0;
  bool stopping = false;
};

/// Builds the plan's tensors and device programs.
class Materializer {
public:
  Materializer(func::FuncOp func, const MaterializeOptions &options)
      : func(func), options(options) {}

  llvm::Expected<plan::Plan> run();

private:
  llvm::Error error(Operation *op, const llvm::Twine &message) {
    std::string where;
    if (auto compute = dyn_cast<ComputeOp>(op))
      where = "op '" + compute.getName().str() + "' (" +
              compute.getSpec().str() + "): ";
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "materialize: " + where + message.str());
  }
  llvm::Error addTensors();
  llvm::Error addCompute(ComputeOp op, int64_t seq);
  /// Materializes output `output` of `op` (each output of a multi-output op
  /// is its own computation with its own strategy).
  llvm::Error addOutput(ComputeOp op, const tdl::OpInstance &instance,
                        unsigned output,
                        llvm::ArrayRef<StrategyAttr> strategies,
                        const std::vector<plan::Attr> &attrs,
                        const std::vector<std::vector<int64_t>> &inputShapes,
                        const std::vector<plan::ExprProgram> &programs,
                        int64_t seq);
  void addParamUpdates(int64_t seq);
  /// Adds a buffer to `device`'s pending records; returns its id.
  int32_t addBuffer(int64_t device, int32_t tensor, const tdl::Box &region,
                    bool partial, bool owned = false);
  /// The region of buffer `buffer` of `device`, committed or pending.
  plan::BoxView regionOf(int64_t device, int32_t buffer) const;
  /// Appends every device's pending records (one op's, sorted by seq) to
  /// its program: to the program it owns, or, when it shares one, its
  /// regions and reduction bounds to its own tables. Devices of a class
  /// whose records differ get programs of their own first (splitClasses).
  void commitPending();
  /// Splits every class of devices sharing a program into the groups whose
  /// pending records are the same (sameInProgram); the first device of each
  /// new group gets its own copy of the program, the others share it.
  void splitClasses();
  /// True when two devices' pending records are the same in a shared
  /// program.
  bool samePending(int64_t a, int64_t b) const;
  /// A hash of what samePending compares (buckets candidates only).
  uint64_t pendingHash(int64_t device) const;
  /// Fills buffer `dst` on `device` (holding `region` of `tensor`) from
  /// the source buffers `sourceOf(e)` (-1: none) holding `boxOf(e)`, for
  /// the devices e in `candidates` (increasing; every device whose box
  /// meets `region`, more are harmless).
  void addAssembly(int64_t device, int32_t dst, const tdl::Box &region,
                   int32_t tensor, llvm::ArrayRef<int64_t> candidates,
                   llvm::function_ref<int32_t(int64_t)> sourceOf,
                   llvm::function_ref<tdl::Box(int64_t)> boxOf, bool reduce,
                   int64_t seq, const plan::SharedName &opName);
  /// Fills buffer `dst` on `device` from the collective whose sources are
  /// `sources` (plan::CollectiveSources): the pieces are derived from the
  /// table (plan::forEachPiece), which gives the ones addAssembly would list
  /// when its candidates are every device whose source box meets dst's
  /// region. The device's comm bytes count the remote pieces.
  void addCollective(int64_t device, int32_t dst,
                     std::shared_ptr<const plan::CollectiveSources> sources,
                     int32_t tensor, bool reduce, int64_t seq,
                     const plan::SharedName &opName);
  /// Runs `body(d)` for every device d. With many devices, on several
  /// threads (MaterializeOptions::threads): a body may then change only
  /// device d's records (pending[d], its commBytes) and read what no body
  /// changes. The plan is the same either way.
  void forEachDevice(llvm::function_ref<void(int64_t)> body) {
    forEachIndex(static_cast<size_t>(k),
                 [&](size_t d) { body(static_cast<int64_t>(d)); });
  }
  /// Runs `body(i)` for i in [0, n), as forEachDevice.
  void forEachIndex(size_t n, llvm::function_ref<void(size_t)> body);
  /// Fewer devices than this are materialized on one thread unless the
  /// options ask for threads: below, threads cost more than they save
  /// (GPT-3 at k = 64 and 128 on two threads: 15-40% slower; at 256, 25%
  /// faster; bench/compile_scale.md).
  static constexpr int64_t kThreadedDevices = 256;
  /// At most this many threads materialize devices unless the options say.
  static constexpr unsigned kMaxThreads = 8;
  /// forEachIndex runs fewer indices than this on the calling thread.
  static constexpr size_t kParallelIndices = 16;
  /// forEachIndex's threads; none: one thread.
  std::unique_ptr<StaticWorkers> workers;
  /// The source table of `tensor`'s owned tiles (made on first use, shared
  /// by every fetch from them; thread-safe).
  std::shared_ptr<const plan::CollectiveSources> ownedSources(int32_t tensor);
  /// Fills buffer `dst` on `device`, holding `region` of `tensor`, from the
  /// owned tiles of `tensor` on the devices whose tile meets it.
  void addFetchFromOwners(int64_t device, int32_t dst, const tdl::Box &region,
                          int32_t tensor, int64_t seq,
                          const plan::SharedName &opName);
  tdl::Box ownedRegion(int32_t tensor, int64_t device) const;
  /// True when `box` is `device`'s owned tile of `tensor` (ownedRegion's
  /// box, which its owned buffer holds), computed from the tiling's cuts
  /// without building the box or reading the buffer: at large k the plan's
  /// buffers are far apart in memory, and this runs for every input of
  /// every device's instruction.
  bool isOwnedRegion(int32_t tensor, int64_t device,
                     const tdl::Box &box) const;

  /// Makes room for `more` records in a device's `records` (its
  /// instructions, buffers or region table) before appending them.
  /// Doubling left up to half of every device's two vectors unused: ~3.6
  /// GB of address space for GPT-3 at k = 1024 (bench/compile_scale.md).
  /// Instead a full vector grows to the size the ops materialized so far
  /// predict for the whole program (plus 5%), at least by a quarter and at
  /// most twice (amortized O(1) per record as with doubling). `before`
  /// records were there before the first op (a device's owned buffers).
  template <typename T>
  void reserveMore(std::vector<T> &records, size_t more,
                   size_t before = 0) const {
    size_t size = records.size();
    if (size + more <= records.capacity())
      return;
    if (size == 0) { // the first records (a device's owned buffers): exact
      records.reserve(more);
      return;
    }
    size_t least = size + more + size / 4 + 16, most = 2 * (size + more) + 16;
    size_t predicted = most;
    if (opsDone > 0 && size >= before)
      predicted = before + static_cast<size_t>(
                               static_cast<double>(size - before) * 1.05 *
                               static_cast<double>(numOps) /
                               static_cast<double>(opsDone));
    records.reserve(std::clamp(predicted, least, most));
  }

  func::FuncOp func;
  const MaterializeOptions &options;
  DeviceGrid grid;
  int64_t k = 1;
  /// Steps of the program (the compute ops, then the parameter updates)
  /// and those materialized so far, for reserveMore.
  size_t numOps = 1, opsDone = 0;
  plan::Plan result;
  llvm::DenseMap<Value, int32_t> tensorOf;
  std::vector<TilingAttr> tilings;               // per tensor
  std::vector<std::vector<int64_t>> cutDims;     // per tensor: tilingCutDims
  std::vector<std::vector<int32_t>> ownedBuffer; // [device][tensor]
  /// Per tensor: ownedSources' table, null until first used, and whether
  /// it is made.
  std::vector<std::shared_ptr<const plan::CollectiveSources>> ownedTables;
  std::unique_ptr<std::once_flag[]> ownedTableMade;
  /// Whether devices share programs (MaterializeOptions::sharePrograms).
  bool share = false;
  /// One device's records of the op being materialized, not yet in its
  /// program (commitPending): the first numBuffers and numInstrs. The
  /// slots after them keep their allocations for the next op: a device
  /// that shares its class's program only compares its records and keeps
  /// their regions, so reusing the slots spares it an allocation per
  /// region and operand list.
  struct PendingRecords {
    std::vector<plan::Buffer> buffers;
    std::vector<plan::Instr> instrs;
    size_t numBuffers = 0, numInstrs = 0;
    plan::Buffer &newBuffer() {
      if (numBuffers == buffers.size())
        buffers.emplace_back();
      return buffers[numBuffers++];
    }
    /// A slot for an instruction, every field reset.
    plan::Instr &newInstr() {
      if (numInstrs == instrs.size())
        instrs.emplace_back();
      plan::Instr &in = instrs[numInstrs++];
      resetInstr(in);
      return in;
    }
    llvm::MutableArrayRef<plan::Buffer> bufferList() {
      return {buffers.data(), numBuffers};
    }
    llvm::ArrayRef<plan::Buffer> bufferList() const {
      return {buffers.data(), numBuffers};
    }
    llvm::MutableArrayRef<plan::Instr> instrList() {
      return {instrs.data(), numInstrs};
    }
    llvm::ArrayRef<plan::Instr> instrList() const {
      return {instrs.data(), numInstrs};
    }
  };
  /// Resets every field of `in` to a new instruction's, keeping the
  /// allocations of its lists.
  static void resetInstr(plan::Instr &in) {
    in.kind = plan::Instr::Kind::Compute;
    in.dst = -1;
    in.seq = 0;
    in.kernel = plan::SharedName();
    in.inputs.clear();
    in.outputs.clear();
    in.pieces.clear();
    in.sources.reset();
    in.op = plan::SharedName();
    in.spec.reset();
    in.reductionRanges.clear();
  }
  std::vector<PendingRecords> pending;
  /// Per device that owns a program: the devices running it, increasing
  /// (itself first); empty for the others.
  std::vector<std::vector<int32_t>> classMembers;
};

plan::BoxView Materializer::regionOf(int64_t device, int32_t buffer) const {
  size_t committed = plan::buffersOf(result, device).size();
  if (static_cast<size_t>(buffer) >= committed)
    return plan::BoxView(pending[device].buffers[buffer - committed].region);
  return plan::bufferRegion(result, device, buffer);
}

bool Materializer::samePending(int64_t a, int64_t b) const {
  llvm::ArrayRef<plan::Buffer> ba = pending[a].bufferList(),
                               bb = pending[b].bufferList();
  llvm::ArrayRef<plan::Instr> ia = pending[a].instrList(),
                              ib = pending[b].instrList();
  if (ba.size() != bb.size() || ia.size() != ib.size())
    return false;
  for (size_t i = 0; i < ba.size(); ++i)
    if (!plan::sameInProgram(ba[i], bb[i]))
      return false;
  for (size_t i = 0; i < ia.size(); ++i)
    if (!plan::sameInProgram(ia[i], ib[i]))
      return false;
  return true;
}

uint64_t Materializer::pendingHash(int64_t device) const {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  auto mix = [&h](uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  };
  mix(pending[device].numBuffers);
  for (const plan::Buffer &b : pending[device].bufferList())
    mix(static_cast<uint64_t>(b.tensor) ^ (b.bytes << 20) ^
        (uint64_t{b.partial} << 62) ^ (uint64_t{b.owned} << 61));
  mix(pending[device].numInstrs);
  for (const plan::Instr &in : pending[device].instrList()) {
    mix(static_cast<uint64_t>(in.kind) ^ (static_cast<uint64_t>(in.dst) << 8));
    for (int32_t b : in.inputs)
      mix(static_cast<uint64_t>(b));
    for (int32_t b : in.outputs)
      mix(static_cast<uint64_t>(b) << 1);
    mix(in.pieces.size());
    for (const plan::Piece &piece : in.pieces)
      mix(static_cast<uint64_t>(piece.device));
  }
  return h;
}

void Materializer::splitClasses() {
  for (int64_t r = 0; r < k; ++r) {
    if (result.devices[r].programOf >= 0 || classMembers[r].size() <= 1)
      continue;
    std::vector<int32_t> &members = classMembers[r];
    // The groups of equal records, the owner's first; the others bucketed
    // by hash.
    std::vector<std::vector<int32_t>> groups{{static_cast<int32_t>(r)}};
    std::unordered_map<uint64_t, std::vector<size_t>> byHash;
    std::vector<char> asOwner(members.size());
    forEachIndex(members.size(), [&](size_t i) {
      asOwner[i] = i > 0 && samePending(r, members[i]);
    });
    for (size_t i = 1; i < members.size(); ++i) {
      int32_t d = members[i];
      if (asOwner[i]) {
        groups[0].push_back(d);
        continue;
      }
      std::vector<size_t> &candidates = byHash[pendingHash(d)];
      bool placed = false;
      for (size_t g : candidates)
        if (samePending(groups[g][0], d)) {
          groups[g].push_back(d);
          placed = true;
          break;
        }
      if (!placed) {
        candidates.push_back(groups.size());
        groups.push_back({d});
      }
    }
    if (groups.size() == 1)
      continue;
    for (size_t g = 1; g < groups.size(); ++g) {
      int32_t leader = groups[g][0];
      plan::detachSharedProgram(result, leader);
      for (size_t i = 1; i < groups[g].size(); ++i)
        result.devices[groups[g][i]].programOf = leader;
      classMembers[leader] = std::move(groups[g]);
    }
    members = std::move(groups[0]);
  }
}

void Materializer::commitPending() {
  // Outputs of one op are materialized one after another: each device runs
  // its instructions in seq order (stable, so the order stays
  // deterministic; seqs grow from op to op, so sorting each op's records
  // sorts the program). Most are in order already (only multi-output ops
  // interleave).
  auto bySeq = [](const plan::Instr &a, const plan::Instr &b) {
    return a.seq < b.seq;
  };
  forEachDevice([&](int64_t d) {
    llvm::MutableArrayRef<plan::Instr> instrs = pending[d].instrList();
    if (!std::is_sorted(instrs.begin(), instrs.end(), bySeq))
      std::stable_sort(instrs.begin(), instrs.end(), bySeq);
  });
  if (share)
    splitClasses();
  forEachDevice([&](int64_t d) {
    plan::DeviceProgram &dev = result.devices[d];
    llvm::MutableArrayRef<plan::Buffer> buffers = pending[d].bufferList();
    llvm::MutableArrayRef<plan::Instr> instrs = pending[d].instrList();
    if (dev.programOf < 0) {
      if (share) {
        if (dev.regionStarts.empty())
          dev.regionStarts.push_back(0);
        reserveMore(dev.regionStarts, buffers.size(), result.tensors.size());
        for (const plan::Buffer &buffer : buffers)
          dev.regionStarts.push_back(dev.regionStarts.back() +
                                     2 * buffer.region.lo.size());
      }
      reserveMore(dev.buffers, buffers.size(), result.tensors.size());
      std::move(buffers.begin(), buffers.end(),
                std::back_inserter(dev.buffers));
      reserveMore(dev.instrs, instrs.size());
      std::move(instrs.begin(), instrs.end(), std::back_inserter(dev.instrs));
    } else {
      size_t coords = 0;
      for (const plan::Buffer &buffer : buffers)
        coords += 2 * buffer.region.lo.size();
      reserveMore(dev.sharedRegions, coords, 2 * result.tensors.size());
      for (const plan::Buffer &buffer : buffers) {
        dev.sharedRegions.insert(dev.sharedRegions.end(),
                                 buffer.region.lo.begin(),
                                 buffer.region.lo.end());
        dev.sharedRegions.insert(dev.sharedRegions.end(),
                                 buffer.region.hi.begin(),
                                 buffer.region.hi.end());
      }
      for (const plan::Instr &in : instrs)
        for (const auto &list : in.reductionRanges)
          dev.sharedReductionRanges.insert(dev.sharedReductionRanges.end(),
                                           list.begin(), list.end());
    }
    pending[d].numBuffers = pending[d].numInstrs = 0;
  });
}

std::shared_ptr<const plan::CollectiveSources>
Materializer::ownedSources(int32_t tensor) {
  auto &table = ownedTables[tensor];
  // Devices materialized on several threads may ask at once: one makes it.
  std::call_once(ownedTableMade[tensor], [&] {
    std::vector<int32_t> buffers(k);
    for (int64_t e = 0; e < k; ++e)
      buffers[e] = ownedBuffer[e][tensor];
    table = plan::makeCollectiveSources(
        std::move(buffers), [this](size_t e, int32_t buffer) {
          return regionOf(static_cast<int64_t>(e), buffer);
        });
  });
  return table;
}

void Materializer::forEachIndex(size_t n,
                                llvm::function_ref<void(size_t)> body) {
  if (n < kParallelIndices || !workers) {
    for (size_t i = 0; i < n; ++i)
      body(i);
    return;
  }
  workers->run(n, body);
}

StaticWorkers::StaticWorkers(unsigned numThreads) {
  for (unsigned t = 1; t < numThreads; ++t)
    threads.emplace_back([this, t] { work(t); });
}

StaticWorkers::~StaticWorkers() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  for (std::thread &thread : threads)
    thread.join();
}

void StaticWorkers::runPart(unsigned part, size_t n,
                            llvm::function_ref<void(size_t)> body) const {
  const size_t parts = threads.size() + 1;
  for (size_t i = part * n / parts; i < (part + 1) * n / parts; ++i)
    body(i);
}

void StaticWorkers::run(size_t n, llvm::function_ref<void(size_t)> body) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    job = {n, body};
    busy = threads.size();
    ++generation;
  }
  wake.notify_all();
  runPart(0, n, body);
  std::unique_lock<std::mutex> lock(mutex);
  done.wait(lock, [&] { return busy == 0; });
}

void StaticWorkers::work(unsigned part) {
  uint64_t seen = 0;
  while (true) {
    std::pair<size_t, llvm::function_ref<void(size_t)>> mine;
    {
      std::unique_lock<std::mutex> lock(mutex);
      wake.wait(lock, [&] { return stopping || generation != seen; });
      if (stopping)
        return;
      seen = generation;
      mine = job;
    }
    runPart(part, mine.first, mine.second);
    bool last;
    {
      std::lock_guard<std::mutex> lock(mutex);
      last = --busy == 0;
    }
    if (last)
      done.notify_one();
  }
}

void Materializer::addCollective(
    int64_t device, int32_t dst,
    std::shared_ptr<const plan::CollectiveSources> sources, int32_t tensor,
    bool reduce, int64_t seq, const plan::SharedName &opName) {
  plan::Instr &instr = pending[device].newInstr();
  instr.kind = reduce ? plan::Instr::Kind::Reduce : plan::Instr::Kind::Fetch;
  instr.seq = seq;
  instr.dst = dst;
  instr.op = opName;
  instr.sources = std::move(sources);
  uint64_t elemBytes = plan::dtypeSize(result.tensors[tensor].dtype);
  result.devices[device].commBytes +=
      plan::remoteElements(regionOf(device, dst), device, instr) * elemBytes;
}

tdl::Box Materializer::ownedRegion(int32_t tensor, int64_t device) const {
  return ownedBox(grid, result.tensors[tensor].shape, tilings[tensor], device);
}

bool Materializer::isOwnedRegion(int32_t tensor, int64_t device,
                                 const tdl::Box &box) const {
  const std::vector<int64_t> &shape = result.tensors[tensor].shape;
  if (box.size() != shape.size())
    return false;
  llvm::SmallVector<tdl::Range, 8> owned;
  for (int64_t extent : shape)
    owned.push_back({0, extent});
  const std::vector<int64_t> &cuts = cutDims[tensor];
  int64_t stride = k;
  for (size_t step = 0; step < grid.steps.size(); ++step) {
    stride /= grid.steps[step];
    if (step < cuts.size() && cuts[step] >= 0)
      owned[cuts[step]] = splitRange(owned[cuts[step]], grid.steps[step],
                                     device / stride % grid.steps[step]);
  }
  for (size_t i = 0; i < box.size(); ++i)
    if (box[i].lo != owned[i].lo || box[i].hi != owned[i].hi)
      return false;
  return true;
}

int32_t Materializer::addBuffer(int64_t device, int32_t tensor,
                                const tdl::Box &region, bool partial,
                                bool owned) {
  plan::Buffer &buffer = pending[device].newBuffer();
  buffer.tensor = tensor;
  buffer.region.lo.resize(region.size());
  buffer.region.hi.resize(region.size());
  for (size_t i = 0; i < region.size(); ++i) {
    buffer.region.lo[i] = region[i].lo;
    buffer.region.hi[i] = region[i].hi;
  }
  buffer.partial = partial;
  buffer.owned = owned;
  buffer.offset = 0;
  buffer.bytes =
      numElements(region) * plan::dtypeSize(result.tensors[tensor].dtype);
  buffer.init.clear();
  buffer.borrowedInit = nullptr;
  return static_cast<int32_t>(plan::buffersOf(result, device).size() +
                              pending[device].numBuffers - 1);
}

void Materializer::addAssembly(int64_t device, int32_t dst,
                               const tdl::Box &region, int32_t tensor,
                               llvm::ArrayRef<int64_t> candidates,
                               llvm::function_ref<int32_t(int64_t)> sourceOf,
                               llvm::function_ref<tdl::Box(int64_t)> boxOf,
                               bool reduce, int64_t seq,
                               const plan::SharedName &opName) {
  plan::Instr &instr = pending[device].newInstr();
  instr.kind = reduce ? plan::Instr::Kind::Reduce : plan::Instr::Kind::Fetch;
  instr.seq = seq;
  instr.dst = dst;
  instr.op = opName;
  uint64_t elemBytes = plan::dtypeSize(result.tensors[tensor].dtype);
  // The device's own data first, then the others in device order.
  std::vector<int64_t> order;
  order.reserve(candidates.size());
  if (std::binary_search(candidates.begin(), candidates.end(), device))
    order.push_back(device);
  for (int64_t e : candidates)
    if (e != device)
      order.push_back(e);
  instr.pieces.reserve(order.size());
  for (int64_t e : order) {
    int32_t source = sourceOf(e);
    if (source < 0)
      continue; // computed nothing (empty share)
    tdl::Box box = boxOf(e);
    tdl::Box piece = intersect(region, box);
    if (isEmpty(piece))
      continue;
    instr.pieces.push_back(
        {static_cast<int32_t>(e), source, toPlanBox(piece)});
    if (e != device)
      result.devices[device].commBytes += numElements(piece) * elemBytes;
    // A complete tile needs one source; partial sums need all of them.
    if (!reduce && contains(box, region))
      break;
  }
}

void Materializer::addFetchFromOwners(int64_t device, int32_t dst,
                                      const tdl::Box &region, int32_t tensor,
                                      int64_t seq,
                                      const plan::SharedName &opName) {
  if (!options.explicitPieces) {
    addCollective(device, dst, ownedSources(tensor), tensor, /*reduce=*/false,
                  seq, opName);
    return;
  }
  std::vector<int64_t> owners = devicesMeeting(
      grid, fullBox(result.tensors[tensor].shape), cutDims[tensor], region);
  addAssembly(
      device, dst, region, tensor, owners,
      [&](int64_t e) { return ownedBuffer[e][tensor]; },
      [&](int64_t e) { return ownedRegion(tensor, e); },
      /*reduce=*/false, seq, opName);
}

llvm::Error Materializer::addTensors() {
  MLIRContext *ctx = func.getContext();
  llvm::DenseMap<Value, int32_t> gradientOf; // gradient value -> param tensor
  llvm::DenseMap<Value, bool> updatedValues;
  Value lossValue;
  func.walk([&](Operation *op) {
    if (auto update = dyn_cast<UpdateOp>(op))
      updatedValues[update.getNewValue()] = true;
    if (auto loss = dyn_cast<LossOp>(op))
      lossValue = loss.getLoss();
  });
  llvm::StringMap<int32_t> inputByName;
  SmallVector<std::pair<int32_t, std::string>> labelPairs;
  WalkResult walk = func.walk([&](Operation *op) {
    if (!isa<InputOp, ParamOp, ComputeOp>(op))
      return WalkResult::advance();
    auto tilingList = op->getAttrOfType<ArrayAttr>(kTilingsAttr);
    if (!tilingList) {
      (void)error(op, "no tilings; run the partition stage first");
      return WalkResult::interrupt();
    }
    for (auto [i, value] : llvm::enumerate(op->getResults())) {
      auto type = cast<RankedTensorType>(value.getType());
      plan::TensorInfo info;
      // The element size must be the TDL one (1 byte for a bool) that the
      // partitioner costs with, so comm bytes equal the planned bytes.
      std::optional<plan::DType> dtype = planDTypeOf(type.getElementType());
      if (!dtype) {
        std::string text;
        llvm::raw_string_ostream os(text);
        os << type.getElementType();
        (void)error(op, "element type " + text + " of result " +
                            std::to_string(i) +
                            " has no plan dtype (supported: f16, bf16, f32, "
                            "f64, i1, i8..i64 signless or unsigned)");
        return WalkResult::interrupt();
      }
      info.dtype = *dtype;
      info.shape.assign(type.getShape().begin(), type.getShape().end());
      auto tiling = cast<TilingAttr>(tilingList[i]);
      for (auto [dim, parts] : llvm::zip(tiling.getDims(), tiling.getParts()))
        info.tiling.push_back(
            {static_cast<int32_t>(dim), static_cast<int32_t>(parts)});
      if (auto input = dyn_cast<InputOp>(op)) {
        info.name = input.getSymName().str();
        if (input.getRole() == "labels") {
          info.role = plan::TensorRole::Label;
          info.numClasses = input.getClasses().value_or(0);
          if (IntegerAttr ignore = input.getIgnoreIndexAttr())
            info.ignoreIndex = ignore.getInt();
          if (auto pair = input.getLabelsFor())
            labelPairs.push_back(
                {static_cast<int32_t>(result.tensors.size()), pair->str()});
        } else {
          info.role = plan::TensorRole::Input;
          // Token ids: their values lie in [0, classes).
          info.numClasses = input.getClasses().value_or(0);
        }
        inputByName[info.name] = result.tensors.size();
      } else if (auto param = dyn_cast<ParamOp>(op)) {
        info.name = param.getSymName().str();
        if (param.getStateOf()) {
          info.role = plan::TensorRole::State;
        } else {
          info.paramName = info.name;
          info.role = plan::TensorRole::Param;
        }
      } else {
        auto compute = cast<ComputeOp>(op);
        info.name = compute.getName().str();
        if (op->getNumResults() > 1)
          info.name += "#" + std::to_string(i);
        if (value == lossValue)
          info.role = plan::TensorRole::Loss;
        else if (updatedValues.count(value))
          info.role = plan::TensorRole::Updated;
        else if (compute.getGradOf() || compute.getSpec() == "Ones")
          info.role = plan::TensorRole::Gradient;
        else
          info.role = plan::TensorRole::Activation;
      }
      tensorOf[value] = result.tensors.size();
      tilings.push_back(tiling);
      cutDims.push_back(tilingCutDims(grid, tiling));
      result.tensors.push_back(std::move(info));
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return error(func, "no tilings; run the partition stage first");
  for (auto &[label, input] : labelPairs) {
    auto it = inputByName.find(input);
    if (it != inputByName.end())
      result.tensors[label].pairedInput = it->second;
  }
  for (UpdateOp update : func.getOps<UpdateOp>()) {
    int32_t param = tensorOf.lookup(update.getParam());
    if (update.getGradient())
      result.tensors[tensorOf.lookup(update.getGradient())].gradientOf = param;
    result.paramUpdates.push_back(
        {param, tensorOf.lookup(update.getNewValue())});
    auto updated = update.getNewValue().getDefiningOp<ComputeOp>();
    if (!updated || !update.getGradient())
      continue;
    // The optimizer as reported: its kind and learning rate (an attribute
    // of SGDUpdate, the initial value of the R state of the others).
    StringRef spec = updated.getSpec();
    if (spec == "SGDUpdate") {
      result.optimizer.kind = "sgd";
      if (auto lr = updated.getAttrs().getAs<FloatAttr>("lr"))
        result.optimizer.learningRate = lr.getValueAsDouble();
    } else if (spec == "Momentum" || spec == "Adam" || spec == "Adagrad") {
      result.optimizer.kind = spec.lower();
      if (auto rate = updated.getInputs()[0].getDefiningOp<ParamOp>())
        if (auto value =
                dyn_cast_or_null<DenseElementsAttr>(rate.getValueAttr()))
          if (value.getElementType().isF32())
            result.optimizer.learningRate =
                (*value.value_begin<APFloat>()).convertToDouble();
    }
  }
  for (LossOp loss : func.getOps<LossOp>())
    result.lossTensor = tensorOf.lookup(loss.getLoss());
  (void)ctx;
  return llvm::Error::success();
}

llvm::Error Materializer::addCompute(ComputeOp op, int64_t seq) {
  auto instance = tofu::instantiate(op);
  if (!instance)
    return error(op, llvm::toString(instance.takeError()));
  auto planAttr = op->getAttrOfType<ArrayAttr>(kPlanAttr);
  if (!planAttr)
    return error(op, "no strategy; run the partition stage first");
  SmallVector<StrategyAttr> strategies(planAttr.getAsRange<StrategyAttr>());
  unsigned numOutputs = op.getNumResults();

  // The op's TDL expression, for the runtime's generic evaluator (opaque
  // outputs have none and need a native kernel).
  std::vector<plan::ExprProgram> programs;
  for (unsigned o = 0; o < numOutputs; ++o) {
    auto program = tdl::lowerToProgram(*instance, o);
    if (!program) {
      llvm::consumeError(program.takeError());
      programs.clear();
      break;
    }
    programs.push_back(std::move(*program));
  }
  // Every output of a multi-output op is its own computation (with its own
  // strategy), evaluated from its program.
  if (numOutputs > 1 && programs.empty())
    return error(op, "an op with several outputs and no TDL expression "
                     "(opaque) cannot be materialized yet");

  std::vector<plan::Attr> attrs;
  for (const auto &[name, value] : instance->attrs())
    attrs.push_back(toPlanAttr(name, value));
  std::vector<std::vector<int64_t>> inputShapes;
  for (Value input : op.getInputs())
    inputShapes.push_back(result.tensors[tensorOf.lookup(input)].shape);

  for (unsigned o = 0; o < numOutputs; ++o) {
    SmallVector<StrategyAttr> steps = planOfOutput(strategies, o);
    if (!steps.empty() && steps.size() != grid.steps.size())
      return error(op, "output " + llvm::Twine(o) +
                           " needs a strategy per recursion step (" +
                           llvm::Twine(grid.steps.size()) + " steps, " +
                           llvm::Twine(steps.size()) + " strategies)");
    if (llvm::Error err = addOutput(op, *instance, o, strategies, attrs,
                                    inputShapes, programs, seq))
      return err;
  }
  return llvm::Error::success();
}

llvm::Error Materializer::addOutput(
    ComputeOp op, const tdl::OpInstance &instance, unsigned output,
    llvm::ArrayRef<StrategyAttr> strategies,
    const std::vector<plan::Attr> &attrs,
    const std::vector<std::vector<int64_t>> &inputShapes,
    const std::vector<plan::ExprProgram> &programs, int64_t seq) {
  bool replicated = planOfOutput(strategies, output).empty();
  std::vector<OpShare> shares(k);
  const OutputShareMaker shareOf(grid, instance, output, strategies);
  forEachDevice([&](int64_t d) { shares[d] = shareOf(d); });
  // Without any strategy every device computes the whole output (replicated
  // compute); each then keeps its own tile, so producers overlap: that is
  // only consistent when every owned tile is inside the device's own share.
  int32_t out = tensorOf.lookup(op.getResult(output));
  for (int64_t d = 0; d < k && replicated; ++d)
    if (!outputCoveredLocally(shares[d], ownedRegion(out, d)))
      return error(op, "internal: replicated compute must cover owned tiles");
  bool single = op.getNumResults() == 1;

  // What every device's instruction of this output shares: made once,
  // pointed at by all of them (and stored once in plan.bin).
  auto spec = std::make_shared<plan::OpSpec>();
  spec->attrs = attrs;
  if (!single) {
    // Which of the op's outputs this instruction computes, for native
    // kernels of multi-output ops (the interpreter has its program).
    plan::Attr which;
    which.name = "tofu.output";
    which.kind = plan::Attr::Kind::Int;
    which.i = output;
    spec->attrs.push_back(std::move(which));
  }
  spec->inputGlobalShapes = inputShapes;
  spec->outputGlobalShapes.push_back(result.tensors[out].shape);
  if (single)
    spec->programs = programs;
  else if (!programs.empty())
    spec->programs.push_back(programs[output]);
  std::shared_ptr<const plan::OpSpec> sharedSpec = std::move(spec);
  // One name for every device's instructions of this output.
  plan::SharedName kernel = op.getSpec().str();
  plan::SharedName opName = op.getName().str();

  std::vector<int32_t> produced(k);
  std::vector<tdl::Box> producedBoxes(k);
  // The first device (if any) whose input region interval analysis did
  // not give, and which input.
  std::mutex failedMutex;
  std::optional<std::pair<int64_t, size_t>> failed;
  forEachDevice([&](int64_t d) {
    if (isEmptyShare(shares[d])) {
      produced[d] = -1;
      return;
    }
    auto needed = instance.requiredRegions(output, shares[d].outputBox,
                                           shares[d].reductionRanges);
    // Built aside (the fetches of its inputs add pending instructions),
    // then copied into its slot, each keeping its lists' allocations (one
    // per thread).
    static thread_local plan::Instr computeScratch;
    plan::Instr &compute = computeScratch;
    resetInstr(compute);
    compute.kind = plan::Instr::Kind::Compute;
    compute.seq = seq + 1;
    compute.kernel = kernel;
    compute.op = opName;
    compute.spec = sharedSpec;
    compute.reductionRanges.emplace_back();
    if (shares[d].partial)
      for (const tdl::Range &range : shares[d].reductionRanges)
        compute.reductionRanges.back().push_back({range.lo, range.hi});
    compute.inputs.reserve(op.getInputs().size());
    for (auto [i, input] : llvm::enumerate(op.getInputs())) {
      int32_t tensor = tensorOf.lookup(input);
      if (i >= needed.size() || !needed[i]) {
        std::lock_guard<std::mutex> lock(failedMutex);
        if (!failed || d < failed->first)
          failed = {d, i};
        resetInstr(compute);
        return;
      }
      if (isOwnedRegion(tensor, d, *needed[i])) {
        compute.inputs.push_back(ownedBuffer[d][tensor]);
        continue;
      }
      int32_t local = addBuffer(d, tensor, *needed[i], false);
      addFetchFromOwners(d, local, *needed[i], tensor, seq, opName);
      compute.inputs.push_back(local);
    }
    producedBoxes[d] = shares[d].outputBox;
    if (!shares[d].partial &&
        isOwnedRegion(out, d, shares[d].outputBox))
      produced[d] = ownedBuffer[d][out];
    else
      produced[d] = addBuffer(d, out, shares[d].outputBox, shares[d].partial);
    compute.outputs.push_back(produced[d]);
    pending[d].newInstr() = compute;
    // Drop the references to this op's spec and names.
    resetInstr(compute);
  });
  if (failed)
    return error(op, "interval analysis gave no region for input " +
                         llvm::Twine(failed->second));
  // Bring produced tiles to their owners.
  std::vector<int64_t> producedCuts =
      shareCutDims(grid, planOfOutput(strategies, output));
  tdl::Box outputWhole = fullBox(result.tensors[out].shape);
  auto producedOf = [&](int64_t e) { return produced[e]; };
  auto producedBoxOf = [&](int64_t e) { return producedBoxes[e]; };
  // The produced tiles as one collective's sources (made when first needed,
  // by one thread).
  std::shared_ptr<const plan::CollectiveSources> producedSources;
  std::once_flag producedSourcesMade;
  forEachDevice([&](int64_t d) {
    if (produced[d] == ownedBuffer[d][out])
      return;
    tdl::Box owned = ownedRegion(out, d);
    if (produced[d] >= 0 && outputCoveredLocally(shares[d], owned)) {
      int64_t self[] = {d};
      addAssembly(d, ownedBuffer[d][out], owned, out, self, producedOf,
                  producedBoxOf, /*reduce=*/false, seq + 2, opName);
      return;
    }
    if (!options.explicitPieces) {
      std::call_once(producedSourcesMade, [&] {
        producedSources = plan::makeCollectiveSources(
            produced, [this](size_t e, int32_t buffer) {
              return regionOf(static_cast<int64_t>(e), buffer);
            });
      });
      addCollective(d, ownedBuffer[d][out], producedSources, out,
                    /*reduce=*/shares[d].partial, seq + 2, opName);
      return;
    }
    // The devices whose produced box (their share's output box) meets the
    // owned tile.
    std::vector<int64_t> producers =
        devicesMeeting(grid, outputWhole, producedCuts, owned);
    addAssembly(d, ownedBuffer[d][out], owned, out, producers, producedOf,
                producedBoxOf, /*reduce=*/shares[d].partial, seq + 2,
                opName);
  });
  // Freed where they were made (2k allocations per op on this thread were
  // a tenth of its serial time at k = 1024).
  forEachDevice([&](int64_t d) {
    shares[d] = OpShare();
    tdl::Box().swap(producedBoxes[d]);
  });
  return llvm::Error::success();
}

void Materializer::addParamUpdates(int64_t seq) {
  const plan::SharedName opName = "param-update";
  forEachDevice([&](int64_t d) {
    for (auto [param, updated] : result.paramUpdates)
      addFetchFromOwners(d, ownedBuffer[d][param], ownedRegion(param, d),
                         updated, seq, opName);
  });
}

llvm::Expected<plan::Plan> Materializer::run() {
  auto gridAttr = func->getAttrOfType<DenseI64ArrayAttr>(kGridAttr);
  if (!gridAttr)
    return error(func, "no device grid; run the partition stage first");
  grid.steps.assign(gridAttr.asArrayRef().begin(), gridAttr.asArrayRef().end());
  k = grid.numDevices();
  result.numDevices = static_cast<uint32_t>(k);
  result.devices.resize(k);
  if (llvm::Error err = addTensors())
    return std::move(err);
  pending.resize(k);
  if (func.getContext()->isMultithreadingEnabled()) {
    unsigned threads = options.threads;
    if (threads == 0 && k >= kThreadedDevices)
      threads = std::min(kMaxThreads,
                         std::max(1u, std::thread::hardware_concurrency()));
    if (threads > 1 && k > 1)
      workers = std::make_unique<StaticWorkers>(threads);
  }
  // (Explicit pieces name devices: every device's differ.)
  share = options.sharePrograms && !options.explicitPieces && k > 1;
  if (share) {
    // One class to begin with, split as the devices' records differ.
    classMembers.resize(k);
    for (int64_t d = 0; d < k; ++d) {
      classMembers[0].push_back(static_cast<int32_t>(d));
      if (d > 0)
        result.devices[d].programOf = 0;
    }
  }

  // Every device owns one buffer per tensor: its tile.
  ownedBuffer.assign(k, std::vector<int32_t>(result.tensors.size(), -1));
  ownedTables.assign(result.tensors.size(), nullptr);
  ownedTableMade = std::make_unique<std::once_flag[]>(result.tensors.size());
  forEachDevice([&](int64_t d) {
    pending[d].buffers.reserve(result.tensors.size());
    for (size_t t = 0; t < result.tensors.size(); ++t)
      ownedBuffer[d][t] = addBuffer(d, t, ownedRegion(t, d), false,
                                    /*owned=*/true);
  });
  commitPending();
  // One slot per tensor is far more than any op needs: free them (on the
  // thread that made them).
  forEachDevice([&](int64_t d) { pending[d] = PendingRecords(); });

  // Initial weights of each device's parameter tiles.
  for (ParamOp param : func.getOps<ParamOp>()) {
    int32_t tensor = tensorOf.lookup(param.getResult());
    // Values are dense (protobuf data, constants) or resources (external
    // data mapped by the importer, not copied until here).
    if (!param.getValueAttr()) {
      if (param.getConstant())
        return error(param, "constant '" + param.getSymName() +
                                "' has no value");
      // A graph-only model (tofuc --no-weights): the plan records that it
      // has no weights, and tofu-run refuses to run it.
      result.withoutWeights = true;
      continue;
    }
    ArrayRef<char> raw;
    bool isSplat = false;
    if (auto dense = dyn_cast<DenseElementsAttr>(param.getValueAttr())) {
      raw = dense.getRawData();
      isSplat = dense.isSplat();
    } else if (auto resource = dyn_cast<DenseResourceElementsAttr>(
                   param.getValueAttr())) {
      AsmResourceBlob *blob = resource.getRawHandle().getBlob();
      if (!blob)
        return error(param, "parameter '" + param.getSymName() +
                                "' refers to a resource without data");
      raw = blob->getData();
    } else {
      return error(param, "parameter '" + param.getSymName() +
                              "' has a value of an unsupported kind");
    }
    const auto &shape = result.tensors[tensor].shape;
    uint64_t elemBytes = plan::dtypeSize(result.tensors[tensor].dtype);
    // The tile of device d's owned buffer: in the buffer when d owns its
    // program, else in d's sharedInits.
    auto fill = [&](plan::Buffer &buffer, const tdl::Box &box) {
      if (options.borrowWeights && !isSplat && buffer.bytes > 0)
        if (std::optional<int64_t> first = contiguousStart(box, shape)) {
          buffer.borrowedInit =
              reinterpret_cast<const uint8_t *>(raw.data()) +
              *first * elemBytes;
          return;
        }
      buffer.init.resize(buffer.bytes);
      if (isSplat) {
        for (uint64_t off = 0; off < buffer.bytes; off += elemBytes)
          std::memcpy(buffer.init.data() + off, raw.data(), elemBytes);
        return;
      }
      // Copy the box row by row: the last dimension is contiguous in both
      // the value and the tile.
      int64_t rank = shape.size();
      int64_t count = numElements(box);
      if (count == 0)
        return;
      if (rank == 0) {
        std::memcpy(buffer.init.data(), raw.data(), elemBytes);
        return;
      }
      int64_t rowElems = box[rank - 1].hi - box[rank - 1].lo;
      std::vector<int64_t> index(rank);
      for (int64_t i = 0; i < rank; ++i)
        index[i] = box[i].lo;
      for (int64_t n = 0; n < count; n += rowElems) {
        int64_t flat = 0;
        for (int64_t i = 0; i < rank; ++i)
          flat = flat * shape[i] + index[i];
        std::memcpy(buffer.init.data() + n * elemBytes,
                    raw.data() + flat * elemBytes, rowElems * elemBytes);
        for (int64_t i = rank - 2; i >= 0; --i) {
          if (++index[i] < box[i].hi)
            break;
          index[i] = box[i].lo;
        }
      }
    };
    for (int64_t d = 0; d < k; ++d) {
      plan::DeviceProgram &dev = result.devices[d];
      int32_t id = ownedBuffer[d][tensor];
      tdl::Box box = ownedRegion(tensor, d);
      if (dev.programOf < 0) {
        fill(dev.buffers[id], box);
        continue;
      }
      plan::Buffer scratch;
      scratch.bytes = result.devices[dev.programOf].buffers[id].bytes;
      fill(scratch, box);
      if (scratch.hasInit())
        dev.sharedInits.push_back(
            {id, std::move(scratch.init), scratch.borrowedInit});
    }
  }
  for (plan::DeviceProgram &dev : result.devices)
    std::stable_sort(dev.sharedInits.begin(), dev.sharedInits.end(),
                     [](const plan::SharedInit &a, const plan::SharedInit &b) {
                       return a.buffer < b.buffer;
                     });

  int64_t seq = 0;
  numOps = 1 + std::distance(func.getOps<ComputeOp>().begin(),
                             func.getOps<ComputeOp>().end());
  for (ComputeOp op : func.getOps<ComputeOp>()) {
    if (llvm::Error err = addCompute(op, seq))
      return std::move(err);
    commitPending();
    seq += 3;
    ++opsDone;
  }
  addParamUpdates(seq);
  commitPending();
  for (const auto &device : result.devices)
    result.commBytes += device.commBytes;
  for (const auto &tensor : result.tensors)
    if (tensor.role == plan::TensorRole::Input && !tensor.shape.empty()) {
      result.batchSize = tensor.shape[0];
      break;
    }
  return std::move(result);
}

} // namespace

llvm::Expected<plan::Plan> materialize(func::FuncOp func,
                                       const MaterializeOptions &options) {
  return Materializer(func, options).run();
}

} // namespace tofu
