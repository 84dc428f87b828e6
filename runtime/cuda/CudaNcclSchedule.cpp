//===- CudaNcclSchedule.cpp - One process per GPU: NCCL transfers ---------===//
//
// See CudaNcclSchedule.h. Plain C++: no CUDA or NCCL header.
//
//===----------------------------------------------------------------------===//

#include "CudaNcclSchedule.h"

#include <algorithm>
#include <cstdlib>
#include <map>

using namespace tofu::cuda;
using namespace tofu::plan;

namespace {

uint64_t alignUp(uint64_t v) {
  return (v + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
}

bool isMove(const CudaOp &op) {
  return op.kind == CudaOp::Kind::Copy || op.kind == CudaOp::Kind::BoxCopy ||
         op.kind == CudaOp::Kind::BoxAdd;
}

bool crossesRanks(const DeviceMapping &m, const CudaOp &op) {
  return isMove(op) &&
         m.devices[op.src.device].gpu != m.devices[op.dst.device].gpu;
}

int64_t product(const std::array<int64_t, kMaxBoxRank> &v, int32_t rank) {
  int64_t n = 1;
  for (int32_t i = 0; i < rank; ++i)
    n *= v[i];
  return n;
}

/// Bytes an op moves (the piece's region).
uint64_t moveBytes(const CudaOp &op) {
  if (op.kind == CudaOp::Kind::Copy)
    return op.bytes;
  return static_cast<uint64_t>(product(op.box.region, op.box.rank)) *
         op.elementSize;
}

/// The bytes an op of a rank's entry reads and writes (moves, memsets and
/// NCCL calls; kernels and library calls are covered by entryAccesses).
void opFootprint(const CudaOp &op, std::vector<ByteAccess> &acc) {
  auto add = [&acc](const DevicePointer &p, uint64_t bytes, bool write) {
    if (bytes)
      acc.push_back({p.device, p.offset, p.offset + bytes, write});
  };
  switch (op.kind) {
  case CudaOp::Kind::Copy:
    add(op.src, op.bytes, false);
    add(op.dst, op.bytes, true);
    break;
  case CudaOp::Kind::BoxCopy:
  case CudaOp::Kind::BoxAdd:
    add(op.src,
        static_cast<uint64_t>(product(op.box.srcExtents, op.box.rank)) *
            op.elementSize,
        false);
    add(op.dst,
        static_cast<uint64_t>(product(op.box.dstExtents, op.box.rank)) *
            op.elementSize,
        true);
    break;
  case CudaOp::Kind::Zero:
  case CudaOp::Kind::Recv:
    add(op.dst, op.bytes, true);
    break;
  case CudaOp::Kind::Send:
    add(op.src, op.bytes, false);
    break;
  default:
    break;
  }
}

/// What rank `rank`'s entry `pos` reads and writes on the rank's devices.
std::vector<ByteAccess> rankAccesses(const Plan &plan,
                                     const MultiProcessSchedule &ms,
                                     int32_t rank, int32_t pos) {
  const RankSchedule &rs = ms.ranks[rank];
  const ScheduledInstr &e = rs.schedule.instrs[pos];
  std::vector<ByteAccess> acc;
  if (rs.sends[pos] < 0)
    acc = entryAccesses(plan, ms.global.mapping,
                        ms.global.instrs[rs.origin[pos]]);
  for (const CudaOp &op : e.ops)
    opFootprint(op, acc);
  std::vector<ByteAccess> mine;
  for (const ByteAccess &a : acc)
    if (ms.rankOf(a.device) == rank)
      mine.push_back(a);
  return mine;
}

/// Stream ids of one rank: 2 per plan device, then the NCCL stream.
int32_t rankStream(const ScheduledInstr &e, size_t numDevices) {
  if (e.stream == StreamKind::Nccl)
    return static_cast<int32_t>(2 * numDevices);
  return e.device * 2 + static_cast<int32_t>(e.stream);
}

/// Vector clocks over a rank's streams: clock[s][t] = the highest position
/// on stream t known complete when entry s completes.
std::vector<std::vector<int32_t>> rankClocks(const Schedule &s,
                                             size_t numDevices) {
  const size_t numStreams = 2 * numDevices + 1;
  std::vector<std::vector<int32_t>> clock(s.instrs.size());
  std::vector<int32_t> last(numStreams, -1);
  for (size_t p = 0; p < s.instrs.size(); ++p) {
    const ScheduledInstr &e = s.instrs[p];
    const int32_t st = rankStream(e, numDevices);
    std::vector<int32_t> c(numStreams, -1);
    auto merge = [&c](const std::vector<int32_t> &o) {
      for (size_t t = 0; t < c.size(); ++t)
        c[t] = std::max(c[t], o[t]);
    };
    if (last[st] >= 0)
      merge(clock[last[st]]);
    for (int32_t w : e.waits)
      if (w >= 0 && w < static_cast<int32_t>(p))
        merge(clock[w]);
    c[st] = static_cast<int32_t>(p);
    clock[p] = std::move(c);
    last[st] = static_cast<int32_t>(p);
  }
  return clock;
}

/// The waits of rank `rank`'s entries: per earlier conflicting entry of
/// another stream the latest one, minus what stream order and the other
/// waits already imply (as buildSchedule does for one process).
void computeWaits(const Plan &plan, MultiProcessSchedule &ms, int32_t rank) {
  RankSchedule &rs = ms.ranks[rank];
  const DeviceMapping &m = ms.global.mapping;
  const size_t k = plan.devices.size();
  std::vector<ByteHazardMap> hazards;
  for (size_t d = 0; d < k; ++d)
    hazards.emplace_back(m.devices[d].gpu == rank ? m.devices[d].sliceBytes
                                                  : 0);
  std::vector<std::vector<int32_t>> clocks;
  std::vector<int32_t> lastOnStream(2 * k + 1, -1);
  for (size_t p = 0; p < rs.schedule.instrs.size(); ++p) {
    const int32_t pos = static_cast<int32_t>(p);
    ScheduledInstr &s = rs.schedule.instrs[p];
    const int32_t myStream = rankStream(s, k);
    std::map<int32_t, int32_t> latestPerStream;
    for (const ByteAccess &a : rankAccesses(plan, ms, rank, pos))
      hazards[a.device].access(a.lo, a.hi, a.write, pos, [&](int32_t dep) {
        if (dep == pos)
          return;
        int32_t st = rankStream(rs.schedule.instrs[dep], k);
        if (st == myStream)
          return;
        int32_t &latest = latestPerStream[st];
        latest = std::max(latest, dep);
      });
    std::vector<int32_t> clock(2 * k + 1, -1);
    if (lastOnStream[myStream] >= 0)
      clock = clocks[lastOnStream[myStream]];
    std::vector<int32_t> candidates;
    for (const auto &[st, dep] : latestPerStream)
      candidates.push_back(dep);
    std::sort(candidates.rbegin(), candidates.rend());
    for (int32_t dep : candidates) {
      if (clock[rankStream(rs.schedule.instrs[dep], k)] >= dep)
        continue;
      s.waits.push_back(dep);
      rs.schedule.instrs[dep].recordsEvent = true;
      for (size_t t = 0; t < clock.size(); ++t)
        clock[t] = std::max(clock[t], clocks[dep][t]);
    }
    clock[myStream] = pos;
    clocks.push_back(std::move(clock));
    lastOnStream[myStream] = pos;
    std::sort(s.waits.begin(), s.waits.end());
  }
}

std::string where(const Plan &plan, int32_t d, int32_t i) {
  std::string s =
      "device " + std::to_string(d) + " instruction " + std::to_string(i);
  if (d >= 0 && d < static_cast<int32_t>(plan.devices.size()) && i >= 0 &&
      i < static_cast<int32_t>(plan.devices[d].instrs.size()) &&
      !plan.devices[d].instrs[i].op.empty())
    s += " (op '" + plan.devices[d].instrs[i].op + "')";
  return s;
}

/// The transfers the one-process schedule implies (entry and op order).
std::vector<NcclTransfer> crossRankOps(const Schedule &global) {
  std::vector<NcclTransfer> out;
  const DeviceMapping &m = global.mapping;
  for (size_t g = 0; g < global.instrs.size(); ++g) {
    const ScheduledInstr &e = global.instrs[g];
    for (size_t j = 0; j < e.ops.size(); ++j) {
      const CudaOp &op = e.ops[j];
      if (!crossesRanks(m, op))
        continue;
      NcclTransfer t;
      t.entry = static_cast<int32_t>(g);
      t.op = static_cast<int32_t>(j);
      t.from = m.devices[op.src.device].gpu;
      t.to = m.devices[op.dst.device].gpu;
      t.bytes = moveBytes(op);
      out.push_back(t);
    }
  }
  return out;
}

} // namespace

std::string tofu::cuda::buildMultiProcessSchedule(const Plan &plan,
                                                  int32_t worldSize,
                                                  MultiProcessSchedule &ms) {
  ms = MultiProcessSchedule();
  const int32_t k = static_cast<int32_t>(plan.devices.size());
  if (worldSize < 1 || worldSize > k)
    return "a plan for " + std::to_string(k) + " device" +
           (k == 1 ? "" : "s") + " runs on 1 to " + std::to_string(k) +
           " processes (plan device p on rank p * W / k), but " +
           std::to_string(worldSize) + " were started; start at most " +
           std::to_string(k) + " (mpirun -np, WORLD_SIZE) or compile the "
           "plan with tofuc --gpus " + std::to_string(worldSize);
  ms.worldSize = worldSize;
  if (std::string err = buildSchedule(plan, worldSize, ms.global,
                                      /*oneLaunchFetches=*/false);
      !err.empty())
    return err;
  DeviceMapping &m = ms.global.mapping;
  ms.transfers = crossRankOps(ms.global);

  // Staging: the largest piece each device receives into (a box add, or a
  // box copy into a strided destination) or packs before sending.
  ms.stagingBytes.assign(k, 0);
  ms.stagingOffset.assign(k, 0);
  for (const NcclTransfer &t : ms.transfers) {
    const CudaOp &op = ms.global.instrs[t.entry].ops[t.op];
    if (op.kind == CudaOp::Kind::Copy)
      continue;
    if (op.kind == CudaOp::Kind::BoxAdd || !op.box.dstContiguous())
      ms.stagingBytes[op.dst.device] =
          std::max(ms.stagingBytes[op.dst.device], t.bytes);
    if (!op.box.srcContiguous())
      ms.stagingBytes[op.src.device] =
          std::max(ms.stagingBytes[op.src.device], t.bytes);
  }
  // Each slice grows by its staging area; the slices are laid out again
  // (ops address relative to their slice, so they stay valid).
  std::fill(m.gpuBytes.begin(), m.gpuBytes.end(), 0);
  for (int32_t p = 0; p < k; ++p) {
    DevicePlacement &pl = m.devices[p];
    ms.stagingOffset[p] = pl.sliceBytes;
    ms.stagingBytes[p] = alignUp(ms.stagingBytes[p]);
    pl.sliceBytes += ms.stagingBytes[p];
    pl.base = m.gpuBytes[pl.gpu];
    m.gpuBytes[pl.gpu] += pl.sliceBytes;
  }

  // Transfers by entry (they were collected in entry order).
  std::vector<std::pair<size_t, size_t>> transfersOf(ms.global.instrs.size(),
                                                     {0, 0});
  for (size_t t = 0; t < ms.transfers.size(); ++t) {
    auto &range = transfersOf[ms.transfers[t].entry];
    if (range.first == range.second)
      range.first = t;
    range.second = t + 1;
  }

  ms.ranks.resize(worldSize);
  for (int32_t r = 0; r < worldSize; ++r) {
    RankSchedule &rs = ms.ranks[r];
    rs.schedule.mapping = m;
    // No piece tables: every cross-rank piece is its own transfer.
    rs.schedule.tableBytes.assign(worldSize, 0);
    auto append = [&rs](ScheduledInstr e, int32_t origin, int32_t sends) {
      e.waits.clear();
      e.recordsEvent = false;
      rs.schedule.instrs.push_back(std::move(e));
      rs.origin.push_back(origin);
      rs.sends.push_back(sends);
    };
    for (size_t g = 0; g < ms.global.instrs.size(); ++g) {
      const ScheduledInstr &e = ms.global.instrs[g];
      const auto [tBegin, tEnd] = transfersOf[g];
      if (ms.rankOf(e.device) == r) {
        ScheduledInstr x = e;
        x.ops.clear();
        size_t t = tBegin;
        for (size_t j = 0; j < e.ops.size(); ++j) {
          const CudaOp &op = e.ops[j];
          if (t >= tEnd || ms.transfers[t].op != static_cast<int32_t>(j)) {
            x.ops.push_back(op);
            continue;
          }
          const NcclTransfer &tr = ms.transfers[t];
          CudaOp recv;
          recv.kind = CudaOp::Kind::Recv;
          recv.peer = tr.from;
          recv.transfer = static_cast<int32_t>(t);
          recv.bytes = tr.bytes;
          recv.dtype = op.dtype;
          recv.elementSize = op.elementSize;
          if (op.kind == CudaOp::Kind::Copy) {
            recv.dst = op.dst;
            x.ops.push_back(recv);
          } else if (op.kind == CudaOp::Kind::BoxCopy &&
                     op.box.dstContiguous()) {
            recv.dst = {op.dst.device,
                        op.dst.offset +
                            static_cast<uint64_t>(op.box.dstStartElement()) *
                                op.elementSize};
            x.ops.push_back(recv);
          } else {
            // Received densely into the staging area, then moved (or
            // added) into place by the entry's own box kernel.
            recv.dst = {op.dst.device, ms.stagingOffset[op.dst.device]};
            x.ops.push_back(recv);
            CudaOp unpack = op;
            unpack.src = recv.dst;
            unpack.path = CopyPath::SameDevice;
            for (size_t i = 0; i < kMaxBoxRank; ++i) {
              unpack.box.srcExtents[i] = op.box.region[i];
              unpack.box.srcStart[i] = 0;
            }
            x.ops.push_back(unpack);
          }
          ++t;
        }
        if (tEnd > tBegin)
          x.stream = StreamKind::Nccl;
        if (static_cast<int32_t>(g) == ms.global.lossWriter)
          rs.schedule.lossWriter =
              static_cast<int32_t>(rs.schedule.instrs.size());
        append(std::move(x), static_cast<int32_t>(g), -1);
      }
      for (size_t t = tBegin; t < tEnd; ++t) {
        const NcclTransfer &tr = ms.transfers[t];
        if (tr.from != r)
          continue;
        const CudaOp &op = e.ops[tr.op];
        ScheduledInstr y;
        y.device = op.src.device;
        y.index = e.index;
        y.firstIndex = e.firstIndex;
        y.stream = StreamKind::Nccl;
        CudaOp send;
        send.kind = CudaOp::Kind::Send;
        send.peer = tr.to;
        send.transfer = static_cast<int32_t>(t);
        send.bytes = tr.bytes;
        send.dtype = op.dtype;
        send.elementSize = op.elementSize;
        if (op.kind == CudaOp::Kind::Copy) {
          send.src = op.src;
        } else if (op.box.srcContiguous()) {
          send.src = {op.src.device,
                      op.src.offset +
                          static_cast<uint64_t>(op.box.srcStartElement()) *
                              op.elementSize};
        } else {
          // Packed densely into the staging area first.
          CudaOp pack = op;
          pack.kind = CudaOp::Kind::BoxCopy;
          pack.dst = {op.src.device, ms.stagingOffset[op.src.device]};
          pack.path = CopyPath::SameDevice;
          for (size_t i = 0; i < kMaxBoxRank; ++i) {
            pack.box.dstExtents[i] = op.box.region[i];
            pack.box.dstStart[i] = 0;
          }
          y.ops.push_back(pack);
          send.src = pack.dst;
        }
        y.ops.push_back(send);
        append(std::move(y), static_cast<int32_t>(g), static_cast<int32_t>(t));
      }
    }
    computeWaits(plan, ms, r);
  }
  return "";
}

std::string
tofu::cuda::validateMultiProcessSchedule(const Plan &plan,
                                         const MultiProcessSchedule &ms) {
  const size_t k = plan.devices.size();
  const int32_t W = ms.worldSize;
  if (W < 1 || static_cast<int32_t>(ms.ranks.size()) != W)
    return "the schedule has " + std::to_string(ms.ranks.size()) +
           " ranks for a world of " + std::to_string(W);
  if (std::string err = validateSchedule(plan, ms.global); !err.empty())
    return "the one-process schedule: " + err;
  const DeviceMapping &m = ms.global.mapping;
  if (m.numGpus != W || ms.stagingOffset.size() != k ||
      ms.stagingBytes.size() != k)
    return "the placement does not give one GPU per rank";
  for (size_t p = 0; p < k; ++p) {
    const DevicePlacement &pl = m.devices[p];
    if (ms.stagingOffset[p] < pl.scratchOffset + pl.scratchBytes ||
        ms.stagingOffset[p] + ms.stagingBytes[p] > pl.sliceBytes)
      return "device " + std::to_string(p) +
             "'s staging area overlaps its arena or leaves its slice";
  }

  // The transfers are exactly the cross-rank ops, in entry and op order.
  const std::vector<NcclTransfer> want = crossRankOps(ms.global);
  if (want.size() != ms.transfers.size())
    return "the schedule has " + std::to_string(ms.transfers.size()) +
           " NCCL transfers, the plan's cross-rank pieces are " +
           std::to_string(want.size());
  for (size_t t = 0; t < want.size(); ++t) {
    const NcclTransfer &a = want[t], &b = ms.transfers[t];
    if (a.entry != b.entry || a.op != b.op || a.from != b.from ||
        a.to != b.to || a.bytes != b.bytes)
      return "transfer " + std::to_string(t) + " is not the cross-rank piece "
             "the plan puts at that place of the order";
  }

  // Per rank: structure, own memory only, NCCL calls on the NCCL stream.
  struct Call {
    int32_t rank, pos, op;
  };
  // Per rank, its NCCL calls in issue order (= execution order: one stream).
  std::vector<std::vector<Call>> calls(W);
  for (int32_t r = 0; r < W; ++r) {
    const RankSchedule &rs = ms.ranks[r];
    const auto &instrs = rs.schedule.instrs;
    if (rs.origin.size() != instrs.size() || rs.sends.size() != instrs.size())
      return "rank " + std::to_string(r) + "'s entries lack their origins";
    std::vector<int32_t> localSeen(ms.global.instrs.size(), 0);
    std::vector<int32_t> sendSeen(ms.transfers.size(), 0);
    for (size_t p = 0; p < instrs.size(); ++p) {
      const ScheduledInstr &e = instrs[p];
      const int32_t pos = static_cast<int32_t>(p);
      const std::string at = "rank " + std::to_string(r) + " entry " +
                             std::to_string(p) + " (" +
                             describeRankEntry(plan, ms, r, pos) + ")";
      const int32_t g = rs.origin[p];
      if (g < 0 || g >= static_cast<int32_t>(ms.global.instrs.size()))
        return at + " names no entry of the one-process schedule";
      if (e.device < 0 || e.device >= static_cast<int32_t>(k) ||
          ms.rankOf(e.device) != r)
        return at + " runs on a device of another rank";
      for (int32_t w : e.waits)
        if (w < 0 || w >= pos || !instrs[w].recordsEvent)
          return at + " waits on an event not recorded before it";
      const int32_t t = rs.sends[p];
      if (t >= static_cast<int32_t>(ms.transfers.size()))
        return at + " sends an unknown transfer";
      if (t < 0) {
        if (ms.global.instrs[g].device != e.device || localSeen[g]++)
          return at + " repeats or misplaces an entry of the one-process "
                      "schedule";
      } else if (ms.transfers[t].from != r || ms.transfers[t].entry != g ||
                 sendSeen[t]++) {
        return at + " sends transfer " + std::to_string(t) +
               ", which is not this rank's to send, or sends it twice";
      }
      bool hasCall = false;
      for (size_t j = 0; j < e.ops.size(); ++j) {
        const CudaOp &op = e.ops[j];
        const bool isCall =
            op.kind == CudaOp::Kind::Send || op.kind == CudaOp::Kind::Recv;
        hasCall |= isCall;
        if (isCall) {
          if (op.transfer < 0 ||
              op.transfer >= static_cast<int32_t>(ms.transfers.size()))
            return at + " has an NCCL call of no transfer";
          calls[r].push_back({r, pos, static_cast<int32_t>(j)});
        }
        std::vector<const DevicePointer *> used;
        if (isMove(op))
          used = {&op.src, &op.dst};
        else if (op.kind == CudaOp::Kind::Zero ||
                 op.kind == CudaOp::Kind::Recv)
          used = {&op.dst};
        else if (op.kind == CudaOp::Kind::Send)
          used = {&op.src};
        for (const DevicePointer *ptr : used)
          if (ptr->device < 0 || ptr->device >= static_cast<int32_t>(k) ||
              ms.rankOf(ptr->device) != r)
            return at + " touches the memory of plan device " +
                   std::to_string(ptr->device) + ", which is not this rank's";
        if (isCall && op.bytes > 0) {
          const DevicePointer &ptr =
              op.kind == CudaOp::Kind::Send ? op.src : op.dst;
          if (ptr.device < 0 ||
              ptr.offset + op.bytes > m.devices[ptr.device].sliceBytes)
            return at + " sends or receives outside its device's slice";
        }
      }
      if (hasCall != (e.stream == StreamKind::Nccl))
        return at + (hasCall ? " makes NCCL calls outside the NCCL stream"
                             : " is on the NCCL stream without NCCL calls");
    }
    for (size_t g = 0; g < ms.global.instrs.size(); ++g)
      if (ms.rankOf(ms.global.instrs[g].device) == r && !localSeen[g])
        return "rank " + std::to_string(r) + " lacks entry " +
               std::to_string(g) + " of the one-process schedule (" +
               where(plan, ms.global.instrs[g].device,
                     ms.global.instrs[g].index) +
               ")";
    for (size_t t = 0; t < ms.transfers.size(); ++t)
      if (ms.transfers[t].from == r && !sendSeen[t])
        return "rank " + std::to_string(r) + " never sends transfer " +
               std::to_string(t) + " to rank " +
               std::to_string(ms.transfers[t].to);
  }

  auto opOf = [&ms](const Call &c) -> const CudaOp & {
    return ms.ranks[c.rank].schedule.instrs[c.pos].ops[c.op];
  };
  auto callText = [&](const Call &c) {
    const CudaOp &op = opOf(c);
    return std::string(op.kind == CudaOp::Kind::Send ? "ncclSend to"
                                                     : "ncclRecv from") +
           " rank " + std::to_string(op.peer) + " of transfer " +
           std::to_string(op.transfer) + " (" + std::to_string(op.bytes) +
           " bytes, entry " + std::to_string(c.pos) + ": " +
           describeRankEntry(plan, ms, c.rank, c.pos) + ")";
  };

  // Matching: per ordered pair of ranks, the i-th send of one is the i-th
  // receive of the other: same transfer, same bytes, each the transfer's.
  for (int32_t a = 0; a < W; ++a)
    for (int32_t b = 0; b < W; ++b) {
      if (a == b)
        continue;
      std::vector<Call> sends, recvs;
      for (const Call &c : calls[a])
        if (opOf(c).kind == CudaOp::Kind::Send && opOf(c).peer == b)
          sends.push_back(c);
      for (const Call &c : calls[b])
        if (opOf(c).kind == CudaOp::Kind::Recv && opOf(c).peer == a)
          recvs.push_back(c);
      for (size_t i = 0; i < std::max(sends.size(), recvs.size()); ++i) {
        const std::string pair = "rank " + std::to_string(a) + " -> rank " +
                                 std::to_string(b) + ", call " +
                                 std::to_string(i + 1) + ": ";
        if (i >= recvs.size())
          return pair + "rank " + std::to_string(a) + " makes " +
                 callText(sends[i]) + " but rank " + std::to_string(b) +
                 " has no receive left for it";
        if (i >= sends.size())
          return pair + "rank " + std::to_string(b) + " makes " +
                 callText(recvs[i]) + " but rank " + std::to_string(a) +
                 " has no send left for it";
        const CudaOp &s = opOf(sends[i]), &r = opOf(recvs[i]);
        const NcclTransfer &t = ms.transfers[s.transfer];
        if (s.transfer != r.transfer || s.bytes != r.bytes ||
            s.bytes != t.bytes || t.from != a || t.to != b)
          return pair + "rank " + std::to_string(a) + " makes " +
                 callText(sends[i]) + " while rank " + std::to_string(b) +
                 " makes " + callText(recvs[i]) +
                 ": the sends and receives of a pair must be in one order "
                 "with the same bytes";
      }
    }

  // Deadlock: run the blocking calls. A stream advances through its entries
  // (after their waits) and their ops; an NCCL call completes only together
  // with its partner at the head of the other rank's NCCL stream. Progress
  // never disables anything, so if this greedy run gets stuck, every
  // execution can, and there is a cycle of waits.
  {
    struct StreamState {
      std::vector<int32_t> entries;
      size_t head = 0, op = 0;
    };
    std::vector<std::vector<StreamState>> streams(W);
    std::vector<std::vector<char>> done(W);
    for (int32_t r = 0; r < W; ++r) {
      streams[r].resize(2 * k + 1);
      const auto &instrs = ms.ranks[r].schedule.instrs;
      done[r].assign(instrs.size(), 0);
      for (size_t p = 0; p < instrs.size(); ++p)
        streams[r][rankStream(instrs[p], k)].entries.push_back(
            static_cast<int32_t>(p));
    }
    const size_t nccl = 2 * k;
    // The NCCL call at the head of rank r's NCCL stream (null if none, or
    // if that entry still waits).
    auto headCall = [&](int32_t r) -> const CudaOp * {
      StreamState &s = streams[r][nccl];
      if (s.head >= s.entries.size())
        return nullptr;
      const ScheduledInstr &e = ms.ranks[r].schedule.instrs[s.entries[s.head]];
      if (s.op == 0)
        for (int32_t w : e.waits)
          if (!done[r][w])
            return nullptr;
      if (s.op >= e.ops.size())
        return nullptr;
      const CudaOp &op = e.ops[s.op];
      return op.kind == CudaOp::Kind::Send || op.kind == CudaOp::Kind::Recv
                 ? &op
                 : nullptr;
    };
    auto finishOps = [&](int32_t r, StreamState &s) {
      const auto &instrs = ms.ranks[r].schedule.instrs;
      const ScheduledInstr &e = instrs[s.entries[s.head]];
      while (s.op < e.ops.size() && e.ops[s.op].kind != CudaOp::Kind::Send &&
             e.ops[s.op].kind != CudaOp::Kind::Recv)
        ++s.op;
      if (s.op == e.ops.size()) {
        done[r][s.entries[s.head]] = 1;
        ++s.head;
        s.op = 0;
        return true;
      }
      return false;
    };
    bool progress = true;
    while (progress) {
      progress = false;
      for (int32_t r = 0; r < W; ++r)
        for (size_t st = 0; st <= nccl; ++st) {
          StreamState &s = streams[r][st];
          while (s.head < s.entries.size()) {
            const ScheduledInstr &e =
                ms.ranks[r].schedule.instrs[s.entries[s.head]];
            if (s.op == 0) {
              bool ready = true;
              for (int32_t w : e.waits)
                ready &= done[r][w] != 0;
              if (!ready)
                break;
            }
            if (finishOps(r, s)) {
              progress = true;
              continue;
            }
            // At an NCCL call: complete it with its partner, if there.
            const CudaOp &mine = e.ops[s.op];
            const CudaOp *theirs = headCall(mine.peer);
            if (!theirs || theirs->peer != r ||
                theirs->transfer != mine.transfer ||
                theirs->kind == mine.kind)
              break;
            StreamState &other = streams[mine.peer][nccl];
            ++other.op;
            finishOps(mine.peer, other);
            ++s.op;
            progress = true;
          }
        }
    }
    for (int32_t r = 0; r < W; ++r) {
      StreamState &s = streams[r][nccl];
      if (s.head >= s.entries.size())
        continue;
      const int32_t pos = s.entries[s.head];
      const ScheduledInstr &e = ms.ranks[r].schedule.instrs[pos];
      std::string blocked =
          s.op < e.ops.size() && (e.ops[s.op].kind == CudaOp::Kind::Send ||
                                  e.ops[s.op].kind == CudaOp::Kind::Recv)
              ? callText({r, pos, static_cast<int32_t>(s.op)})
              : "entry " + std::to_string(pos) + " (" +
                    describeRankEntry(plan, ms, r, pos) + "), waiting on events";
      return "deadlock: rank " + std::to_string(r) + " blocks in " + blocked +
             ", and the ranks' NCCL calls can never all be matched (their "
             "order differs between two ranks, or a wait depends on a later "
             "transfer)";
    }
    for (int32_t r = 0; r < W; ++r)
      for (size_t st = 0; st < nccl; ++st)
        if (streams[r][st].head < streams[r][st].entries.size())
          return "deadlock: rank " + std::to_string(r) + " entry " +
                 std::to_string(streams[r][st].entries[streams[r][st].head]) +
                 " can never run (its waits are never satisfied)";
  }

  // Per rank, every conflicting pair of its entries ordered by stream order
  // and events.
  for (int32_t r = 0; r < W; ++r) {
    const Schedule &s = ms.ranks[r].schedule;
    const auto clock = rankClocks(s, k);
    std::vector<ByteHazardMap> hazards;
    for (size_t d = 0; d < k; ++d)
      hazards.emplace_back(m.devices[d].gpu == r ? m.devices[d].sliceBytes
                                                 : 0);
    for (size_t p = 0; p < s.instrs.size(); ++p) {
      const int32_t pos = static_cast<int32_t>(p);
      std::string err;
      for (const ByteAccess &a : rankAccesses(plan, ms, r, pos)) {
        if (a.hi > m.devices[a.device].sliceBytes)
          return "rank " + std::to_string(r) + " entry " + std::to_string(p) +
                 " touches bytes outside device " + std::to_string(a.device) +
                 "'s slice";
        hazards[a.device].access(a.lo, a.hi, a.write, pos, [&](int32_t dep) {
          if (!err.empty() || dep == pos)
            return;
          if (clock[p][rankStream(s.instrs[dep], k)] < dep)
            err = "rank " + std::to_string(r) + " entry " +
                  std::to_string(p) + " (" +
                  describeRankEntry(plan, ms, r, pos) +
                  ") may run before or during entry " + std::to_string(dep) +
                  " (" + describeRankEntry(plan, ms, r, dep) +
                  "), which touches the same bytes of device " +
                  std::to_string(a.device) + " earlier";
        });
        if (!err.empty())
          return err;
      }
    }
  }
  return "";
}

std::string tofu::cuda::describeRankEntry(const Plan &plan,
                                          const MultiProcessSchedule &ms,
                                          int32_t rank, int32_t pos) {
  const RankSchedule &rs = ms.ranks[rank];
  const int32_t g = rs.origin[pos];
  if (g < 0 || g >= static_cast<int32_t>(ms.global.instrs.size()))
    return "no instruction";
  const ScheduledInstr &e = ms.global.instrs[g];
  const std::string instr = where(plan, e.device, e.index);
  const int32_t t = rs.sends[pos];
  if (t < 0 || t >= static_cast<int32_t>(ms.transfers.size()))
    return instr;
  return "device " + std::to_string(rs.schedule.instrs[pos].device) +
         " sending transfer " + std::to_string(t) + " to rank " +
         std::to_string(ms.transfers[t].to) + " for " + instr;
}

std::string tofu::cuda::describeRankSchedule(const Plan &plan,
                                             const MultiProcessSchedule &ms,
                                             int32_t rank) {
  const RankSchedule &rs = ms.ranks[rank];
  std::string devices;
  for (size_t p = 0; p < plan.devices.size(); ++p)
    if (ms.rankOf(static_cast<int32_t>(p)) == rank)
      devices += (devices.empty() ? "" : ",") + std::to_string(p);
  size_t sends = 0, recvs = 0;
  uint64_t sentBytes = 0, receivedBytes = 0;
  for (const NcclTransfer &t : ms.transfers) {
    if (t.from == rank)
      ++sends, sentBytes += t.bytes;
    if (t.to == rank)
      ++recvs, receivedBytes += t.bytes;
  }
  std::string out = "rank " + std::to_string(rank) + " of " +
                    std::to_string(ms.worldSize) + ": plan devices " +
                    devices + " on its GPU (" +
                    std::to_string(ms.global.mapping.gpuBytes[rank]) +
                    " bytes); NCCL sends " + std::to_string(sends) + " (" +
                    std::to_string(sentBytes) + " bytes), receives " +
                    std::to_string(recvs) + " (" +
                    std::to_string(receivedBytes) + " bytes) of " +
                    std::to_string(ms.transfers.size()) + " transfers\n";
  for (size_t p = 0; p < plan.devices.size(); ++p)
    if (ms.rankOf(static_cast<int32_t>(p)) == rank && ms.stagingBytes[p])
      out += "device " + std::to_string(p) + " staging [" +
             std::to_string(ms.stagingOffset[p]) + ", " +
             std::to_string(ms.stagingOffset[p] + ms.stagingBytes[p]) +
             ") of its slice\n";
  // describeSchedule names an entry by its device's instruction; a sending
  // entry is named by the source device and the receiving instruction it
  // serves ("d4 sends for d2 #0 nccl Fetch : ...").
  Schedule named = rs.schedule;
  for (size_t p = 0; p < named.instrs.size(); ++p)
    if (rs.sends[p] >= 0)
      named.instrs[p].device = ms.global.instrs[rs.origin[p]].device;
  const std::string body = describeSchedule(plan, named);
  size_t cut = 0, entry = 0;
  std::string kept;
  while (cut < body.size()) {
    size_t end = body.find('\n', cut);
    if (end == std::string::npos)
      end = body.size();
    std::string line = body.substr(cut, end - cut);
    cut = end + 1;
    if (line.rfind("device ", 0) == 0) {
      // Only this rank's devices' placement lines.
      if (ms.rankOf(std::atoi(line.c_str() + 7)) == rank)
        kept += line + "\n";
      continue;
    }
    if (entry < rs.sends.size() && rs.sends[entry] >= 0) {
      const std::string prefix = std::to_string(entry) + ": ";
      line = prefix + "d" + std::to_string(rs.schedule.instrs[entry].device) +
             " sends for " + line.substr(prefix.size());
    }
    ++entry;
    kept += line + "\n";
  }
  return out + kept;
}
