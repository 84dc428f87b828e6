//===- CpuBackend.cpp - Execute a k-device plan on the CPU ----------------===//

#include "tofu/runtime/CpuBackend.h"
#include "tofu/runtime/CollectivePieces.h"
#include "tofu/runtime/ComputeKernel.h"
#include "tofu/runtime/ElementAccess.h"
#include "tofu/runtime/Kernels.h"

#include "ParallelFor.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <thread>
#include <unistd.h>

using namespace tofu::runtime;
using namespace tofu::plan;

/// One contiguous run of a Fetch/Reduce piece, resolved once.
struct CpuExecutor::PieceRun {
  const uint8_t *src;
  uint64_t dst; ///< byte offset in the destination (or the Reduce scratch)
  uint64_t bytes;
};

/// One instruction ready to run: a Compute's operand views point into the
/// arenas; runCompute (ComputeKernel.h) picks the native kernel or the
/// expression interpreter.
struct CpuExecutor::Prepared {
  int32_t device = 0;
  size_t index = 0; ///< position in the device program
  const Instr *instr = nullptr;
  /// Compute: the kernel bound to its operand views in the device arena
  /// (mutable: a run stamps the step into its arguments).
  mutable BoundCompute compute;
  /// Elements the instruction reads and writes (a Compute's operands, or a
  /// Fetch/Reduce's pieces twice): the size the wave planning weighs.
  uint64_t work = 0;
  /// Fetch/Reduce: the contiguous runs of each piece held by this process,
  /// in the piece's order (none when it has too many runs to keep: then
  /// moveBox walks the boxes each step).
  std::vector<std::vector<PieceRun>> pieceRuns;
  /// The instruction's fields a step reads, copied here so that a step
  /// walks `program` and not the plan's scattered instructions.
  Instr::Kind kind = Instr::Kind::Compute;
  /// Some buffer it writes is watched (recomputed when watch() adds one).
  bool writesWatched = true;
  /// Fetch/Reduce with every piece in `pieceRuns`: after the first step it
  /// runs `runs` (all pieces' runs, in order) into `dstPtr`, and counts
  /// `remoteBytes` as received.
  bool allRuns = false;
  std::vector<PieceRun> runs;
  uint64_t remoteBytes = 0;
  uint8_t *dstPtr = nullptr;
  uint64_t dstBytes = 0;
  DType dtype = DType::F32;
};

/// The instructions program[begin, end), which share one seq.
struct CpuExecutor::Wave {
  size_t begin = 0, end = 0;
  /// Empty: run in order. Otherwise one list of program indices per pool
  /// task; each device's instructions are in one list, in program order.
  std::vector<std::vector<size_t>> lists;
};

namespace {

std::string describe(const Plan &plan, int32_t d, size_t i) {
  const Instr &in = plan.devices[d].instrs[i];
  std::string s = "device " + std::to_string(d) + " instruction " +
                  std::to_string(i) + " (seq " + std::to_string(in.seq);
  if (!in.op.empty())
    s += ", op '" + in.op + "'";
  return s + ")";
}

/// Row-major strides of a box's extents.
std::vector<int64_t> stridesOf(const Box &box) {
  std::vector<int64_t> s(box.lo.size(), 1);
  for (size_t i = box.lo.size(); i-- > 1;)
    s[i - 1] = s[i] * (box.hi[i] - box.lo[i]);
  return s;
}

/// Calls `fn(srcElement, dstElement, elements)` for each contiguous run of
/// box `region` in a buffer holding `srcBox` and one holding `dstBox` (all
/// boxes in global coordinates; offsets in elements). The innermost
/// dimension is one run; consecutive runs that continue each other in both
/// buffers merge.
template <typename Fn>
void forEachRun(const Box &srcBox, const Box &dstBox, const Box &region,
                Fn fn) {
  int64_t n = region.numElements();
  if (n == 0)
    return;
  size_t rank = region.lo.size();
  auto ss = stridesOf(srcBox), ds = stridesOf(dstBox);
  int64_t run = rank ? region.hi[rank - 1] - region.lo[rank - 1] : 1;
  int64_t rows = n / run;
  std::vector<int64_t> idx(region.lo);
  int64_t pendingSrc = 0, pendingDst = 0, pendingLength = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t so = 0, dof = 0;
    for (size_t i = 0; i < rank; ++i) {
      so += (idx[i] - srcBox.lo[i]) * ss[i];
      dof += (idx[i] - dstBox.lo[i]) * ds[i];
    }
    if (pendingLength && so == pendingSrc + pendingLength &&
        dof == pendingDst + pendingLength) {
      pendingLength += run;
    } else {
      if (pendingLength)
        fn(pendingSrc, pendingDst, pendingLength);
      pendingSrc = so;
      pendingDst = dof;
      pendingLength = run;
    }
    // Advance the odometer over all but the innermost dimension.
    for (size_t i = rank > 0 ? rank - 1 : 0; i-- > 0;) {
      if (++idx[i] < region.hi[i])
        break;
      idx[i] = region.lo[i];
    }
  }
  fn(pendingSrc, pendingDst, pendingLength);
}

/// Copies (or adds) `run` elements from `s` to `d`.
void moveRun(const uint8_t *s, uint8_t *d, int64_t run, DType dtype,
             bool add) {
    if (!add) {
      const size_t bytes = static_cast<size_t>(run) * dtypeSize(dtype);
      // A large copy between disjoint ranges (a parameter's new value, a
      // whole tile) is memory-bound: one thread streams about half of what
      // the machine's cores do together, so it is split over the pool.
      const bool disjoint = s + bytes <= d || d + bytes <= s;
      if (disjoint && bytes >= (size_t(1) << 20)) {
        const int64_t lines = static_cast<int64_t>(bytes / 64);
        parallelFor(lines, 64.0, [&](int64_t begin, int64_t end) {
          const size_t from = static_cast<size_t>(begin) * 64;
          const size_t to =
              end == lines ? bytes : static_cast<size_t>(end) * 64;
          std::memcpy(d + from, s + from, to - from);
        });
      } else {
        std::memmove(d, s, bytes);
      }
    } else if (dtype == DType::F32) {
      float *df = reinterpret_cast<float *>(d);
      const float *sf = reinterpret_cast<const float *>(s);
      for (int64_t k = 0; k < run; ++k)
        df[k] += sf[k];
    } else if (dtype == DType::Bool) {
      for (int64_t k = 0; k < run; ++k) // a sum of booleans saturates at 1
        d[k] = (d[k] | s[k]) ? 1 : 0;
    } else if (dtype == DType::I64) {
      int64_t *di = reinterpret_cast<int64_t *>(d);
      const int64_t *si = reinterpret_cast<const int64_t *>(s);
      for (int64_t k = 0; k < run; ++k)
        di[k] += si[k];
    } else if (dtype == DType::F64) {
      double *dd = reinterpret_cast<double *>(d);
      const double *sd = reinterpret_cast<const double *>(s);
      for (int64_t k = 0; k < run; ++k)
        dd[k] += sd[k];
    } else {
      // Other types add in double and convert back (integers wrap, f16 and
      // bf16 round to nearest even), as the interpreter would.
      for (int64_t k = 0; k < run; ++k)
        storeElement(d, dtype, k,
                     loadElement(d, dtype, k) + loadElement(s, dtype, k));
    }
}

/// Copies (or adds) box `region` from a buffer holding `srcBox` into a
/// buffer holding `dstBox`; all boxes in global coordinates.
void moveBox(const uint8_t *src, const Box &srcBox, uint8_t *dst,
             const Box &dstBox, const Box &region, DType dtype, bool add) {
  const size_t es = dtypeSize(dtype);
  forEachRun(srcBox, dstBox, region,
             [&](int64_t so, int64_t dof, int64_t run) {
               moveRun(src + so * es, dst + dof * es, run, dtype, add);
             });
}

} // namespace

CpuExecutor::CpuExecutor(const Plan &given)
    : expanded(expandedCopy(given)), plan(expanded ? *expanded : given),
      data(plan) {}
CpuExecutor::~CpuExecutor() = default;

void CpuExecutor::touch(std::vector<uint64_t> &peak, int32_t device,
                        int32_t buffer) const {
  const Buffer &b = plan.devices[device].buffers[buffer];
  uint64_t end = b.offset + b.bytes;
  if (b.bytes && end > peak[device])
    peak[device] = end;
}

void CpuExecutor::afterWrite(int32_t device, int32_t buffer) {
  if (watched.empty())
    return;
  auto it = watched.find({device, buffer});
  if (it == watched.end())
    return;
  const Buffer &b = plan.devices[device].buffers[buffer];
  const uint8_t *p = arenas[device].data() + b.offset;
  it->second.bytes.assign(p, p + b.bytes);
  it->second.written = true;
}

std::string CpuExecutor::init() {
  size_t k = plan.devices.size();
  commBytes.assign(k, 0);
  peakTouched.assign(k, 0);
  arenas.clear();
  arenas.resize(k);
  for (size_t d = 0; d < k; ++d) {
    if (!isLocal(static_cast<int32_t>(d)))
      continue; // another process holds this device's arena
    uint64_t bytes = plan.devices[d].peakBytes;
    try {
      arenas[d].assign(bytes, 0);
    } catch (const std::bad_alloc &) {
      return "out of memory: device " + std::to_string(d) + " needs an arena "
             "of " + std::to_string(bytes) + " bytes (its planned peak)";
    } catch (const std::length_error &) {
      return "out of memory: device " + std::to_string(d) + " needs an arena "
             "of " + std::to_string(bytes) + " bytes (its planned peak)";
    }
    const auto &buffers = plan.devices[d].buffers;
    for (size_t b = 0; b < buffers.size(); ++b) {
      if (!buffers[b].hasInit())
        continue;
      if (buffers[b].initSize() != buffers[b].bytes)
        return "device " + std::to_string(d) + " buffer " + std::to_string(b) +
               ": initial contents have the wrong size";
      std::memcpy(arenas[d].data() + buffers[b].offset,
                  buffers[b].initData(), buffers[b].bytes);
      touch(peakTouched, static_cast<int32_t>(d), static_cast<int32_t>(b));
    }
  }
  if (std::string err = prepare(); !err.empty())
    return err;
  initialized = true;
  return "";
}

std::string CpuExecutor::prepare() {
  program.clear();
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    const DeviceProgram &dev = plan.devices[d];
    for (size_t i = 0; i < dev.instrs.size(); ++i) {
      const Instr &in = dev.instrs[i];
      // Another process's device: only its fetches and reductions that read
      // a piece of this process's device concern this process (it sends).
      if (!isLocal(static_cast<int32_t>(d))) {
        bool sendsHere = false;
        if (in.kind != Instr::Kind::Compute)
          for (const Piece &piece : in.pieces)
            sendsHere |= isLocal(piece.device);
        if (!sendsHere)
          continue;
      }
      Prepared p;
      p.device = static_cast<int32_t>(d);
      p.index = i;
      p.instr = &in;
      if (in.kind == Instr::Kind::Compute && isLocal(p.device)) {
        if (!hasNativeKernel(in.kernel) && in.programs().empty()) {
          std::string names;
          for (const std::string &n : registeredKernels())
            names += (names.empty() ? "" : ", ") + n;
          return describe(plan, p.device, i) + ": no CPU kernel named '" +
                 in.kernel + "' (available: " + names +
                 ") and no expression program for it; add the kernel to the "
                 "runtime, give the op a TDL spec that is not opaque, or "
                 "compile the model without this op";
        }
        auto view = [&](int32_t b, const std::vector<std::vector<int64_t>> &g,
                        size_t pos) {
          TensorView v;
          if (b < 0)
            return v;
          const Buffer &buf = dev.buffers[b];
          const TensorInfo &t = plan.tensors[buf.tensor];
          v.data = arenas[d].data() + buf.offset;
          v.dtype = t.dtype;
          v.lo = buf.region.lo;
          for (size_t j = 0; j < buf.region.lo.size(); ++j)
            v.shape.push_back(buf.region.hi[j] - buf.region.lo[j]);
          v.globalShape = g.empty() ? t.shape : g[pos];
          return v;
        };
        std::vector<TensorView> inputs, outputs;
        for (size_t j = 0; j < in.inputs.size(); ++j)
          inputs.push_back(view(in.inputs[j], in.inputGlobalShapes(), j));
        for (size_t j = 0; j < in.outputs.size(); ++j)
          outputs.push_back(view(in.outputs[j], in.outputGlobalShapes(), j));
        ComputePath path = interpretPrograms && !in.programs().empty()
                               ? ComputePath::Interpreter
                               : ComputePath::Auto;
        for (const TensorView &v : inputs)
          p.work += static_cast<uint64_t>(v.numElements());
        for (const TensorView &v : outputs)
          p.work += static_cast<uint64_t>(v.numElements());
        if (std::string err = p.compute.bind(
                in.kernel, in.attrs(), std::move(inputs), std::move(outputs),
                in.programs(), in.reductionRanges, path);
            !err.empty())
          return describe(plan, p.device, i) + ": " + err;
      }
      if (in.kind != Instr::Kind::Compute) {
        for (const Piece &piece : in.pieces)
          p.work += 2 * static_cast<uint64_t>(piece.region.numElements());
        if (isLocal(p.device)) {
          p.pieceRuns = pieceRuns(in, p.device);
          const Buffer &dst = dev.buffers[in.dst];
          p.dtype = plan.tensors[dst.tensor].dtype;
          p.dstPtr = arenas[d].data() + dst.offset;
          p.dstBytes = dst.bytes;
          p.allRuns = true;
          for (size_t j = 0; j < in.pieces.size(); ++j) {
            const Piece &piece = in.pieces[j];
            if (piece.region.numElements() == 0)
              continue;
            p.allRuns &= !p.pieceRuns[j].empty();
            p.runs.insert(p.runs.end(), p.pieceRuns[j].begin(),
                          p.pieceRuns[j].end());
            if (piece.device != p.device)
              p.remoteBytes +=
                  static_cast<uint64_t>(piece.region.numElements()) *
                  dtypeSize(p.dtype);
          }
        }
      }
      p.kind = in.kind;
      program.push_back(std::move(p));
    }
  }
  std::stable_sort(program.begin(), program.end(),
                   [](const Prepared &a, const Prepared &b) {
                     if (a.instr->seq != b.instr->seq)
                       return a.instr->seq < b.instr->seq;
                     return a.device < b.device;
                   });
  planWaves();
  return "";
}

std::vector<std::vector<CpuExecutor::PieceRun>>
CpuExecutor::pieceRuns(const Instr &in, int32_t device) const {
  // More runs than this in one piece (a thin column of a wide tensor) are
  // cheaper to walk each step than to keep.
  constexpr size_t kMaxRuns = 4096;
  const Buffer &dst = plan.devices[device].buffers[in.dst];
  const size_t es = dtypeSize(plan.tensors[dst.tensor].dtype);
  std::vector<std::vector<PieceRun>> all;
  for (const Piece &piece : in.pieces) {
    std::vector<PieceRun> runs;
    if (isLocal(piece.device)) {
      const Buffer &src = plan.devices[piece.device].buffers[piece.buffer];
      const uint8_t *base = arenas[piece.device].data() + src.offset;
      bool tooMany = false;
      forEachRun(src.region, dst.region, piece.region,
                 [&](int64_t so, int64_t dof, int64_t run) {
                   if (runs.size() == kMaxRuns) {
                     tooMany = true;
                     return;
                   }
                   runs.push_back({base + so * es, uint64_t(dof) * es,
                                   uint64_t(run) * es});
                 });
      if (tooMany)
        runs.clear();
    }
    all.push_back(std::move(runs));
  }
  return all;
}

void CpuExecutor::planWaves() {
  waves.clear();
  // An instruction below this many elements runs its kernel on one thread
  // (ParallelFor.h's threshold is 2^18 operations, a few per element).
  constexpr uint64_t kSmall = uint64_t(1) << 16;
  // Devices spread over the threads this evenly (the busiest thread's work
  // over the mean) beat one instruction at a time on all threads.
  constexpr double kBalanced = 1.25;
  const bool concurrent = !transport && failAfterCount < 0;
  const size_t threads = parallelThreads();
  for (size_t begin = 0; begin < program.size();) {
    size_t end = begin;
    while (end < program.size() &&
           program[end].instr->seq == program[begin].instr->seq)
      ++end;
    Wave wave;
    wave.begin = begin;
    wave.end = end;
    // Work per device; program is sorted by device within a seq.
    std::vector<std::pair<uint64_t, int32_t>> byDevice;
    uint64_t largest = 0, total = 0;
    for (size_t i = begin; i < end; ++i) {
      if (byDevice.empty() || byDevice.back().second != program[i].device)
        byDevice.push_back({0, program[i].device});
      byDevice.back().first += program[i].work;
      largest = std::max(largest, program[i].work);
      total += program[i].work;
    }
    const size_t lists = std::min(threads, byDevice.size());
    if (concurrent && lists >= 2 && total > 0) {
      // Longest processing time first: heaviest device to the lightest list
      // (ties: lower device, lower list), so the plan is deterministic.
      std::stable_sort(byDevice.begin(), byDevice.end(),
                       [](const auto &a, const auto &b) {
                         return a.first > b.first;
                       });
      std::vector<uint64_t> load(lists, 0);
      std::vector<std::vector<int32_t>> devices(lists);
      for (const auto &[work, device] : byDevice) {
        size_t to = std::min_element(load.begin(), load.end()) - load.begin();
        load[to] += work;
        devices[to].push_back(device);
      }
      const double busiest =
          double(*std::max_element(load.begin(), load.end()));
      if (largest < kSmall || busiest * double(lists) <= kBalanced * total) {
        wave.lists.resize(lists);
        for (size_t i = begin; i < end; ++i)
          for (size_t l = 0; l < lists; ++l)
            if (std::find(devices[l].begin(), devices[l].end(),
                          program[i].device) != devices[l].end())
              wave.lists[l].push_back(i);
      }
    }
    waves.push_back(std::move(wave));
    begin = end;
  }
}

std::string CpuExecutor::feed(int64_t step) {
  // Devices that hold the same region of an input (a replicated batch, the
  // labels every device needs) get the same values: the first one's are
  // generated or read, the others copy them (k virtual devices of the MLP
  // spent a third of their step generating the same batch k times).
  struct Fed {
    int32_t tensor;
    const Box *region;
    const uint8_t *bytes;
  };
  std::vector<Fed> fed;
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    if (!isLocal(static_cast<int32_t>(d)))
      continue;
    const auto &buffers = plan.devices[d].buffers;
    for (size_t b = 0; b < buffers.size(); ++b) {
      const TensorInfo &t = plan.tensors[buffers[b].tensor];
      if (t.role != TensorRole::Input && t.role != TensorRole::Label)
        continue;
      uint8_t *out = arenas[d].data() + buffers[b].offset;
      auto same = std::find_if(fed.begin(), fed.end(), [&](const Fed &f) {
        return f.tensor == buffers[b].tensor &&
               f.region->lo == buffers[b].region.lo &&
               f.region->hi == buffers[b].region.hi;
      });
      std::string err;
      if (same != fed.end()) {
        std::memcpy(out, same->bytes, buffers[b].bytes);
      } else {
        err = dataSource
                  ? dataSource(buffers[b].tensor, buffers[b].region, step, out)
                  : data.fill(buffers[b].tensor, buffers[b].region,
                              step % SyntheticData::kNumBatches, out);
        fed.push_back({buffers[b].tensor, &buffers[b].region, out});
      }
      if (!err.empty())
        return "feeding device " + std::to_string(d) + " buffer " +
               std::to_string(b) + ": " + err;
      touch(peakTouched, static_cast<int32_t>(d), static_cast<int32_t>(b));
      afterWrite(static_cast<int32_t>(d), static_cast<int32_t>(b));
    }
  }
  return "";
}

std::string CpuExecutor::sendPieces(const Prepared &p) {
  const Instr &in = *p.instr;
  const int32_t local = localDevice();
  const auto &dstBuffers = plan.devices[p.device].buffers;
  const DType dtype = plan.tensors[dstBuffers[in.dst].tensor].dtype;
  for (const Piece &piece : in.pieces) {
    int64_t n = piece.region.numElements();
    if (piece.device != local || n == 0)
      continue; // empty pieces are not sent (nor received)
    const Buffer &src = plan.devices[local].buffers[piece.buffer];
    touch(peakTouched, local, piece.buffer);
    packed.resize(static_cast<size_t>(n) * dtypeSize(dtype));
    moveBox(arenas[local].data() + src.offset, src.region, packed.data(),
            piece.region, piece.region, dtype, /*add=*/false);
    if (std::string err = transport->send(p.device, packed.data(),
                                          packed.size());
        !err.empty())
      return describe(plan, p.device, p.index) + ": " + err;
  }
  return "";
}

std::string CpuExecutor::execute(const Prepared &p, Outcome &outcome,
                                 std::vector<uint64_t> &peak) {
  const Instr &in = *p.instr;
  const int32_t d = p.device;
  const auto &buffers = plan.devices[d].buffers;
  outcome = Outcome{};
  if (!isLocal(d))
    return sendPieces(p);
  if (failAfterCount >= 0 && instrsRun++ == failAfterCount) {
    std::fprintf(stderr,
                 "tofu-run: device %d: %s after %lld instructions as "
                 "--test-fail asked\n",
                 d, failByStalling ? "stalling" : "dying",
                 static_cast<long long>(failAfterCount));
    std::fflush(stderr);
    if (!failByStalling)
      _exit(3);
    for (;;)
      std::this_thread::sleep_for(std::chrono::seconds(3600));
  }
  if (p.kind == Instr::Kind::Compute) {
    // A device whose share of the op is empty (more devices than the split
    // dimension has elements) has nothing to compute.
    if (p.compute.emptyShare())
      return "";
    outcome.ran = true;
    if (!peaksMeasured) {
      for (int32_t b : in.inputs)
        if (b >= 0)
          touch(peak, d, b);
      for (int32_t b : in.outputs)
        touch(peak, d, b);
    }
    ComputePath used = ComputePath::Native;
    std::string err =
        p.compute.run(static_cast<uint64_t>(currentStep), &used);
    if (!err.empty())
      return describe(plan, d, p.index) + ": " + err;
    if (used == ComputePath::Interpreter) {
      outcome.interpreted = true;
      static std::mutex countsMutex; // waves run devices concurrently
      std::lock_guard<std::mutex> lock(countsMutex);
      ++interpretedCounts[in.kernel];
    }
    if (p.writesWatched)
      for (int32_t b : in.outputs)
        afterWrite(d, b);
    return "";
  }
  const bool reduce = p.kind == Instr::Kind::Reduce;
  // A Reduce accumulates into a scratch copy so that a piece may alias dst
  // (one per thread: waves run devices concurrently).
  thread_local std::vector<uint8_t> scratch;
  if (peaksMeasured && p.allRuns) {
    // After the first step, which took the watermark: the runs alone.
    uint8_t *target = p.dstPtr;
    if (reduce) {
      scratch.assign(p.dstBytes, 0);
      target = scratch.data();
    }
    const size_t es = dtypeSize(p.dtype);
    for (const PieceRun &run : p.runs)
      moveRun(run.src, target + run.dst, static_cast<int64_t>(run.bytes / es),
              p.dtype, reduce);
    commBytes[d] += p.remoteBytes;
    if (reduce && p.dstBytes)
      std::memcpy(p.dstPtr, scratch.data(), p.dstBytes);
    outcome.ran = true;
    if (p.writesWatched)
      afterWrite(d, in.dst);
    return "";
  }

  const Buffer &dst = buffers[in.dst];
  const DType dtype = plan.tensors[dst.tensor].dtype;
  uint8_t *dstPtr = arenas[d].data() + dst.offset;
  outcome.ran = true;
  if (!peaksMeasured)
    touch(peak, d, in.dst);
  uint8_t *target = dstPtr;
  if (reduce) {
    scratch.assign(dst.bytes, 0);
    target = scratch.data();
  }
  for (size_t i = 0; i < in.pieces.size(); ++i) {
    const Piece &piece = in.pieces[i];
    if (i < p.pieceRuns.size() && !p.pieceRuns[i].empty()) {
      for (const PieceRun &run : p.pieceRuns[i])
        moveRun(run.src, target + run.dst,
                static_cast<int64_t>(run.bytes / dtypeSize(dtype)), dtype,
                reduce);
      if (!peaksMeasured)
        touch(peak, piece.device, piece.buffer);
      if (piece.device != d)
        commBytes[d] += static_cast<uint64_t>(piece.region.numElements()) *
                        dtypeSize(dtype);
      continue;
    }
    if (!isLocal(piece.device)) {
      // Another process sends the piece's region packed densely.
      int64_t n = piece.region.numElements();
      if (n == 0)
        continue;
      packed.resize(static_cast<size_t>(n) * dtypeSize(dtype));
      if (std::string err = transport->recv(piece.device, packed.data(),
                                            packed.size());
          !err.empty())
        return describe(plan, d, p.index) + ": " + err;
      moveBox(packed.data(), piece.region, target, dst.region, piece.region,
              dtype, in.kind == Instr::Kind::Reduce);
      commBytes[d] += static_cast<uint64_t>(n) * dtypeSize(dtype);
      continue;
    }
    const Buffer &src = plan.devices[piece.device].buffers[piece.buffer];
    const uint8_t *srcPtr = arenas[piece.device].data() + src.offset;
    if (!peaksMeasured)
      touch(peak, piece.device, piece.buffer);
    moveBox(srcPtr, src.region, target, dst.region, piece.region, dtype,
            in.kind == Instr::Kind::Reduce);
    if (piece.device != d)
      commBytes[d] += static_cast<uint64_t>(piece.region.numElements()) *
                      dtypeSize(dtype);
  }
  if (reduce && dst.bytes)
    std::memcpy(dstPtr, scratch.data(), dst.bytes);
  if (p.writesWatched)
    afterWrite(d, in.dst);
  return "";
}

std::string CpuExecutor::runStep(int64_t step) {
  if (!initialized)
    return "the CPU executor was not initialized";
  currentStep = step;
  std::fill(commBytes.begin(), commBytes.end(), 0);
  for (auto &[key, snap] : watched)
    snap.written = false;
  if (watchedChanged) {
    for (Prepared &p : program) {
      const Instr &in = *p.instr;
      auto isWatched = [&](int32_t b) {
        return watched.count({p.device, b}) != 0;
      };
      p.writesWatched =
          p.kind == Instr::Kind::Compute
              ? std::any_of(in.outputs.begin(), in.outputs.end(), isWatched)
              : isWatched(in.dst);
    }
    watchedChanged = false;
  }
  if (std::string err = feed(step); !err.empty())
    return err;
  // Auto: the first step warms up, steps 1..2*kTrials alternate the two
  // schedules, then the one with the lower median stays.
  constexpr unsigned kTrials = 3;
  const bool anyConcurrent =
      std::any_of(waves.begin(), waves.end(),
                  [](const Wave &w) { return !w.lists.empty(); });
  bool concurrent = anyConcurrent && schedule != Schedule::InOrder;
  const bool timing = anyConcurrent && schedule == Schedule::Auto &&
                      timedSteps < 2 * kTrials + 1;
  if (timing && timedSteps > 0)
    concurrent = timedSteps % 2 == 1;
  const auto start = std::chrono::steady_clock::now();
  for (const Wave &wave : waves) {
    std::string err = !concurrent || wave.lists.empty()
                          ? runInOrder(wave.begin, wave.end)
                          : runConcurrently(wave);
    if (!err.empty())
      return err;
  }
  peaksMeasured = true; // every step touches the same bytes
  if (timing) {
    const double seconds = std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - start)
                               .count();
    if (timedSteps > 0)
      (concurrent ? concurrentSeconds : inOrderSeconds).push_back(seconds);
    if (++timedSteps == 2 * kTrials + 1) {
      auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      schedule = median(concurrentSeconds) < median(inOrderSeconds)
                     ? Schedule::Concurrent
                     : Schedule::InOrder;
    }
  }
  return "";
}

CpuExecutor::Schedule CpuExecutor::currentSchedule() const {
  if (std::none_of(waves.begin(), waves.end(),
                   [](const Wave &w) { return !w.lists.empty(); }))
    return Schedule::InOrder;
  return schedule;
}

std::string CpuExecutor::runInOrder(size_t begin, size_t end) {
  Outcome outcome;
  for (size_t i = begin; i < end; ++i) {
    const Prepared &p = program[i];
    if (!observer) {
      if (std::string err = execute(p, outcome, peakTouched); !err.empty())
        return err;
      continue;
    }
    ExecutedInstr e;
    e.device = p.device;
    e.index = p.index;
    e.instr = p.instr;
    uint64_t before = commBytes[p.device];
    e.start = std::chrono::steady_clock::now();
    if (std::string err = execute(p, outcome, peakTouched); !err.empty())
      return err;
    e.end = std::chrono::steady_clock::now();
    e.remoteBytes = commBytes[p.device] - before;
    e.interpreted = outcome.interpreted;
    if (outcome.ran)
      observer(e);
  }
  return "";
}

std::string CpuExecutor::runConcurrently(const Wave &wave) {
  const size_t n = wave.end - wave.begin;
  std::vector<std::string> errors(n);
  std::vector<Outcome> outcomes(n);
  std::vector<ExecutedInstr> executed(observer ? n : 0);
  // Each task records the arena bytes it touches in its own copy; a device
  // is in one list, but a fetch touches its pieces' devices too.
  std::vector<std::vector<uint64_t>> peaks(wave.lists.size(), peakTouched);
  runOnPool(static_cast<unsigned>(wave.lists.size()), [&](unsigned t) {
    for (size_t i : wave.lists[t]) {
      const size_t j = i - wave.begin;
      const Prepared &p = program[i];
      if (!observer) {
        errors[j] = execute(p, outcomes[j], peaks[t]);
      } else {
        ExecutedInstr &e = executed[j];
        e.device = p.device;
        e.index = p.index;
        e.instr = p.instr;
        uint64_t before = commBytes[p.device];
        e.start = std::chrono::steady_clock::now();
        errors[j] = execute(p, outcomes[j], peaks[t]);
        e.end = std::chrono::steady_clock::now();
        e.remoteBytes = commBytes[p.device] - before;
        e.interpreted = outcomes[j].interpreted;
      }
      if (!errors[j].empty())
        return; // this list stops; the first error in program order wins
    }
  });
  for (const std::vector<uint64_t> &peak : peaks)
    for (size_t d = 0; d < peak.size(); ++d)
      peakTouched[d] = std::max(peakTouched[d], peak[d]);
  for (size_t j = 0; j < n; ++j)
    if (!errors[j].empty())
      return errors[j];
  if (observer)
    for (size_t j = 0; j < n; ++j)
      if (outcomes[j].ran)
        observer(executed[j]);
  return "";
}

void CpuExecutor::watch(int32_t device, int32_t buffer) {
  watched[{device, buffer}];
  watchedChanged = true;
}

const std::vector<uint8_t> *CpuExecutor::snapshot(int32_t device,
                                                  int32_t buffer) const {
  auto it = watched.find({device, buffer});
  if (it == watched.end() || !it->second.written)
    return nullptr;
  return &it->second.bytes;
}

const uint8_t *CpuExecutor::bufferData(int32_t device, int32_t buffer) const {
  return arenas[device].data() + plan.devices[device].buffers[buffer].offset;
}

std::string CpuExecutor::watchLoss() {
  if (plan.lossTensor < 0)
    return "the plan has no loss tensor";
  if (!isLocal(0))
    return ""; // the process of device 0 reports the loss
  const auto &buffers = plan.devices[0].buffers;
  for (size_t b = 0; b < buffers.size(); ++b)
    if (buffers[b].tensor == plan.lossTensor && buffers[b].owned) {
      const TensorInfo &t = plan.tensors[plan.lossTensor];
      if (!isFloatDType(t.dtype) || buffers[b].region.numElements() != 1)
        return "the loss tensor '" + t.name + "' is not a floating-point "
               "scalar (it is " + dtypeNumpyName(t.dtype) + " with " +
               std::to_string(buffers[b].region.numElements()) + " elements)";
      lossBuffer = {0, static_cast<int32_t>(b)};
      watch(0, static_cast<int32_t>(b));
      return "";
    }
  return "device 0 owns no buffer of the loss tensor '" +
         plan.tensors[plan.lossTensor].name + "'";
}

std::string CpuExecutor::lastLoss(double &loss) const {
  if (lossBuffer.first < 0)
    return "the loss is not watched";
  const std::vector<uint8_t> *snap =
      snapshot(lossBuffer.first, lossBuffer.second);
  const DType dtype = plan.tensors[plan.lossTensor].dtype;
  if (!snap || snap->size() != dtypeSize(dtype))
    return "no instruction wrote the loss tensor '" +
           plan.tensors[plan.lossTensor].name + "' on device 0 this step";
  loss = loadElement(snap->data(), dtype, 0);
  return "";
}

uint64_t CpuExecutor::commBytesTotal() const {
  uint64_t total = 0;
  for (uint64_t b : commBytes)
    total += b;
  return total;
}
