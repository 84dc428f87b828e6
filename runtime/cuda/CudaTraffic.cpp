//===- CudaTraffic.cpp - Bytes a CUDA step moves, from its schedule -------===//
//
// See CudaTraffic.h.
//
//===----------------------------------------------------------------------===//

#include "CudaTraffic.h"

using namespace tofu::cuda;
using namespace tofu::plan;

ScheduleTraffic tofu::cuda::countTraffic(const Plan &plan,
                                         const Schedule &schedule) {
  ScheduleTraffic traffic;
  traffic.receivedPerDevice.assign(plan.devices.size(), 0);
  traffic.receivedPerEntry.assign(schedule.instrs.size(), 0);
  for (size_t s = 0; s < schedule.instrs.size(); ++s)
    for (const CudaOp &op : schedule.instrs[s].ops) {
      uint64_t bytes = 0;
      if (op.kind == CudaOp::Kind::Copy) {
        bytes = op.bytes;
      } else if (op.kind == CudaOp::Kind::BoxCopy ||
                 op.kind == CudaOp::Kind::BoxAdd) {
        uint64_t elements = 1;
        for (int32_t r = 0; r < op.box.rank; ++r)
          elements *= static_cast<uint64_t>(op.box.region[r]);
        bytes = elements * op.elementSize;
      } else if (op.kind == CudaOp::Kind::MultiFetch ||
                 op.kind == CudaOp::Kind::MultiReduce) {
        // Per piece of the table, as the per-piece copies would count it.
        const MultiFetchTable &t = schedule.tables[op.table];
        for (size_t q = 0; q < t.pieces.size(); ++q) {
          uint64_t elements = 1;
          for (int32_t r = 0; r < t.header.rank; ++r)
            elements *= static_cast<uint64_t>(t.pieces[q].region[r]);
          const int32_t from = t.sources[q].device, to = t.dst.device;
          const CopyPath path =
              from == to ? CopyPath::SameDevice
              : schedule.mapping.devices[from].gpu ==
                      schedule.mapping.devices[to].gpu
                  ? CopyPath::SameGpu
                  : CopyPath::Peer;
          traffic.byPath[static_cast<size_t>(path)] +=
              elements * t.header.elementSize;
          if (from != to) {
            traffic.receivedPerDevice[to] += elements * t.header.elementSize;
            traffic.receivedPerEntry[s] += elements * t.header.elementSize;
          }
        }
        continue;
      } else if (op.kind == CudaOp::Kind::Recv) {
        // One process per GPU: a piece from another rank (NCCL).
        traffic.receivedPerDevice[op.dst.device] += op.bytes;
        continue;
      } else {
        continue;
      }
      traffic.byPath[static_cast<size_t>(op.path)] += bytes;
      if (op.src.device != op.dst.device) {
        traffic.receivedPerDevice[op.dst.device] += bytes;
        traffic.receivedPerEntry[s] += bytes;
      }
    }
  return traffic;
}

const char *tofu::cuda::copyPathName(CopyPath path) {
  switch (path) {
  case CopyPath::SameDevice:
    return "same device";
  case CopyPath::SameGpu:
    return "same GPU";
  case CopyPath::Peer:
    return "peer";
  }
  return "?";
}

std::string tofu::cuda::describeTraffic(const ScheduleTraffic &traffic) {
  std::string out = "copied bytes per step by path:";
  for (size_t p = 0; p < traffic.byPath.size(); ++p)
    out += std::string(p ? "," : "") + " " +
           copyPathName(static_cast<CopyPath>(p)) + " " +
           std::to_string(traffic.byPath[p]);
  return out;
}
