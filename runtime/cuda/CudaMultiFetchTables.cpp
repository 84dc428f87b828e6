//===- CudaMultiFetchTables.cpp - Which Fetch/Reduce is one launch, its table ===//
//
// See CudaMultiFetchTables.h. Plain C++: no CUDA header.
//
//===----------------------------------------------------------------------===//

#include "CudaMultiFetchTables.h"

#include <optional>

using namespace tofu::cuda;
using namespace tofu::plan;

namespace {

/// Extents of a box.
std::vector<int64_t> extentsOf(const Box &b) {
  std::vector<int64_t> e(b.lo.size());
  for (size_t i = 0; i < e.size(); ++i)
    e[i] = b.hi[i] - b.lo[i];
  return e;
}

/// Whether `region` is one contiguous run of a dense box of extents `ext`:
/// leading extents 1, then one partial dimension, then full ones.
bool oneRun(const std::vector<int64_t> &region,
            const std::vector<int64_t> &ext) {
  size_t j = 0;
  while (j < region.size() && region[j] == 1)
    ++j;
  for (size_t i = j + 1; i < region.size(); ++i)
    if (region[i] != ext[i])
      return false;
  return true;
}

std::optional<MultiFetchMode> sumMode(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return MultiFetchMode::SumF32;
  case DType::I64:
    return MultiFetchMode::SumI64;
  case DType::Bool:
    return MultiFetchMode::SumBool;
  default:
    return std::nullopt;
  }
}

std::string boxText(const int64_t *v, int32_t rank) {
  std::string s = "[";
  for (int32_t i = 0; i < rank; ++i)
    s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

} // namespace

bool tofu::cuda::runsAsOneLaunch(const Plan &plan, int32_t d,
                                 const Instr &in) {
  if (in.kind == Instr::Kind::Compute)
    return false;
  const Buffer &dst = plan.devices[d].buffers[in.dst];
  const DType dtype = plan.tensors[dst.tensor].dtype;
  const uint32_t es = cudaElementSize(dtype);
  if (es == 0 || dst.region.lo.size() > kMultiFetchMaxRank)
    return false;
  const bool reduce = in.kind == Instr::Kind::Reduce;
  if (reduce && !sumMode(dtype))
    return false;
  size_t pieces = 0;
  bool strided = false;
  const std::vector<int64_t> dstExt = extentsOf(dst.region);
  for (const Piece &p : in.pieces) {
    if (p.region.numElements() == 0)
      continue;
    ++pieces;
    const Buffer &src = plan.devices[p.device].buffers[p.buffer];
    // One launch reads all sources while it writes dst: a source sharing
    // bytes with dst must be dst itself (same bytes, same box), where each
    // item reads only the element it writes.
    if (p.device == d && src.offset < dst.offset + dst.bytes &&
        dst.offset < src.offset + src.bytes &&
        (src.offset != dst.offset || src.region.lo != dst.region.lo ||
         src.region.hi != dst.region.hi))
      return false;
    const std::vector<int64_t> region = extentsOf(p.region);
    strided |= !oneRun(region, extentsOf(src.region)) || !oneRun(region, dstExt);
  }
  // Fetch pieces overlapping in dst: the CPU backend's later piece wins,
  // which one launch (all pieces at once) cannot promise.
  if (!reduce)
    for (size_t a = 0; a < in.pieces.size(); ++a)
      for (size_t b = 0; b < a; ++b) {
        const Box &x = in.pieces[a].region, &y = in.pieces[b].region;
        if (x.numElements() == 0 || y.numElements() == 0)
          continue;
        bool overlap = true;
        for (size_t r = 0; r < x.lo.size(); ++r)
          overlap &= x.lo[r] < y.hi[r] && y.lo[r] < x.hi[r];
        if (overlap)
          return false;
      }
  return reduce || pieces >= 2 || strided;
}

void tofu::cuda::mapMultiFetch(const Plan &plan, Schedule &schedule,
                               int32_t d, const Instr &in,
                               std::vector<CudaOp> &ops) {
  const Buffer &dst = plan.devices[d].buffers[in.dst];
  const DType dtype = plan.tensors[dst.tensor].dtype;
  const bool reduce = in.kind == Instr::Kind::Reduce;
  MultiFetchTable t;
  t.gpu = schedule.mapping.devices[d].gpu;
  t.dst = {d, dst.offset};
  MultiFetchHeader &h = t.header;
  h.mode = reduce ? *sumMode(dtype) : MultiFetchMode::Copy;
  h.elementSize = cudaElementSize(dtype);
  h.rank = static_cast<int32_t>(dst.region.lo.size());
  for (int32_t r = 0; r < kMultiFetchMaxRank; ++r)
    h.dstExtents[r] = r < h.rank ? dst.region.hi[r] - dst.region.lo[r] : 1;
  int64_t items = 0;
  for (const Piece &p : in.pieces) {
    if (p.region.numElements() == 0)
      continue;
    const Buffer &src = plan.devices[p.device].buffers[p.buffer];
    MultiFetchPiece q;
    q.firstItem = reduce ? 0 : items;
    for (int32_t r = 0; r < kMultiFetchMaxRank; ++r) {
      const bool used = r < h.rank;
      q.region[r] = used ? p.region.hi[r] - p.region.lo[r] : 1;
      q.srcExtents[r] = used ? src.region.hi[r] - src.region.lo[r] : 1;
      q.srcStart[r] = used ? p.region.lo[r] - src.region.lo[r] : 0;
      q.dstStart[r] = used ? p.region.lo[r] - dst.region.lo[r] : 0;
    }
    items += p.region.numElements();
    t.pieces.push_back(q);
    t.sources.push_back({p.device, src.offset});
  }
  h.numPieces = static_cast<int32_t>(t.pieces.size());
  h.items = reduce ? dst.region.numElements() : items;
  t.bytes = multiFetchTableBytes(h.numPieces);
  uint64_t &area = schedule.tableBytes[t.gpu];
  t.offset = area;
  area += (t.bytes + kMultiFetchTableAlignment - 1) /
          kMultiFetchTableAlignment * kMultiFetchTableAlignment;
  CudaOp op;
  op.kind = reduce ? CudaOp::Kind::MultiReduce : CudaOp::Kind::MultiFetch;
  op.table = static_cast<int32_t>(schedule.tables.size());
  op.dst = t.dst;
  op.dtype = dtype;
  op.elementSize = h.elementSize;
  op.bytes = dst.bytes;
  schedule.tables.push_back(std::move(t));
  ops.push_back(op);
}

std::string tofu::cuda::checkMultiFetch(const Plan &plan,
                                        const Schedule &schedule,
                                        const ScheduledInstr &e,
                                        const CudaOp &op) {
  if (op.table < 0 || op.table >= static_cast<int32_t>(schedule.tables.size()))
    return "a MultiFetch names no piece table";
  const MultiFetchTable &t = schedule.tables[op.table];
  const MultiFetchHeader &h = t.header;
  const Instr &in = plan.devices[e.device].instrs[e.index];
  const bool reduce = in.kind == Instr::Kind::Reduce;
  if (in.kind == Instr::Kind::Compute ||
      (op.kind == CudaOp::Kind::MultiReduce) != reduce)
    return "a MultiFetch/MultiReduce of the wrong instruction kind";
  const DeviceMapping &m = schedule.mapping;
  if (t.gpu != m.devices[e.device].gpu)
    return "the piece table is on GPU " + std::to_string(t.gpu) +
           ", not on the destination's GPU " +
           std::to_string(m.devices[e.device].gpu);
  const Buffer &dst = plan.devices[e.device].buffers[in.dst];
  const DType dtype = plan.tensors[dst.tensor].dtype;
  const int32_t rank = static_cast<int32_t>(dst.region.lo.size());
  if (h.rank != rank || rank > kMultiFetchMaxRank ||
      h.elementSize != cudaElementSize(dtype) ||
      h.mode != (reduce ? sumMode(dtype).value_or(MultiFetchMode::Copy)
                        : MultiFetchMode::Copy) ||
      h.numPieces != static_cast<int32_t>(t.pieces.size()) ||
      t.sources.size() != t.pieces.size() ||
      t.bytes != multiFetchTableBytes(h.numPieces))
    return "the piece table's header does not fit the instruction";
  // The destination: the plan's buffer, inside its slice.
  uint64_t dstElements = 1;
  for (int32_t r = 0; r < rank; ++r) {
    if (h.dstExtents[r] != dst.region.hi[r] - dst.region.lo[r])
      return "the destination box " + boxText(h.dstExtents, rank) +
             " is not the destination buffer's";
    dstElements *= static_cast<uint64_t>(h.dstExtents[r]);
  }
  if (t.dst.device != e.device || t.dst.offset != dst.offset ||
      t.dst.offset + dstElements * h.elementSize >
          m.devices[e.device].sliceBytes)
    return "the destination lies outside the destination buffer of device " +
           std::to_string(e.device) + "'s slice";
  // Every piece inside its source slice and both boxes.
  int64_t items = 0;
  for (size_t q = 0; q < t.pieces.size(); ++q) {
    const MultiFetchPiece &p = t.pieces[q];
    const DevicePointer &src = t.sources[q];
    if (src.device < 0 || src.device >= static_cast<int32_t>(m.devices.size()))
      return "piece " + std::to_string(q) + " names no device";
    uint64_t srcElements = 1;
    int64_t n = 1;
    for (int32_t r = 0; r < rank; ++r) {
      if (p.region[r] <= 0 || p.srcStart[r] < 0 || p.dstStart[r] < 0 ||
          p.srcStart[r] + p.region[r] > p.srcExtents[r] ||
          p.dstStart[r] + p.region[r] > h.dstExtents[r])
        return "piece " + std::to_string(q) + " (region " +
               boxText(p.region, rank) + ") lies outside its source or "
               "destination box";
      srcElements *= static_cast<uint64_t>(p.srcExtents[r]);
      n *= p.region[r];
    }
    if (src.offset + srcElements * h.elementSize >
        m.devices[src.device].sliceBytes)
      return "piece " + std::to_string(q) + " reads outside device " +
             std::to_string(src.device) + "'s slice";
    if (p.firstItem != (reduce ? 0 : items))
      return "piece " + std::to_string(q) + "'s first item does not follow "
             "the pieces before it";
    items += n;
  }
  if (h.items != (reduce ? static_cast<int64_t>(dstElements) : items))
    return "the launch's item count does not cover the pieces";
  // Fetch pieces are disjoint in the destination (a sum's may overlap).
  if (!reduce)
    for (size_t a = 0; a < t.pieces.size(); ++a)
      for (size_t b = 0; b < a; ++b) {
        bool overlap = true;
        for (int32_t r = 0; r < rank; ++r)
          overlap &= t.pieces[a].dstStart[r] <
                         t.pieces[b].dstStart[r] + t.pieces[b].region[r] &&
                     t.pieces[b].dstStart[r] <
                         t.pieces[a].dstStart[r] + t.pieces[a].region[r];
        if (overlap)
          return "pieces " + std::to_string(b) + " and " + std::to_string(a) +
                 " overlap in the destination";
      }
  // Exactly the plan's non-empty pieces, in the plan's order.
  size_t q = 0;
  for (size_t j = 0; j < in.pieces.size(); ++j) {
    const Piece &piece = in.pieces[j];
    if (piece.region.numElements() == 0)
      continue;
    if (q >= t.pieces.size())
      return "the piece table misses the plan's piece " + std::to_string(j) +
             " (from device " + std::to_string(piece.device) + ")";
    const MultiFetchPiece &p = t.pieces[q];
    const Buffer &src = plan.devices[piece.device].buffers[piece.buffer];
    bool same = t.sources[q].device == piece.device &&
                t.sources[q].offset == src.offset;
    for (int32_t r = 0; r < rank; ++r)
      same &= p.region[r] == piece.region.hi[r] - piece.region.lo[r] &&
              p.srcExtents[r] == src.region.hi[r] - src.region.lo[r] &&
              p.srcStart[r] == piece.region.lo[r] - src.region.lo[r] &&
              p.dstStart[r] == piece.region.lo[r] - dst.region.lo[r];
    if (!same)
      return "table piece " + std::to_string(q) +
             " is not the plan's piece " + std::to_string(j) +
             " (from device " + std::to_string(piece.device) + ")";
    ++q;
  }
  if (q != t.pieces.size())
    return "the piece table has " + std::to_string(t.pieces.size() - q) +
           " piece(s) the plan does not have";
  return "";
}

std::string tofu::cuda::checkMultiFetchTables(const Schedule &schedule) {
  const auto &tables = schedule.tables;
  if (!tables.empty() &&
      schedule.tableBytes.size() != static_cast<size_t>(schedule.mapping.numGpus))
    return "the table areas do not match the GPUs";
  for (size_t a = 0; a < tables.size(); ++a) {
    const MultiFetchTable &x = tables[a];
    if (x.gpu < 0 || x.gpu >= schedule.mapping.numGpus ||
        x.offset % kMultiFetchTableAlignment ||
        x.offset + x.bytes > schedule.tableBytes[x.gpu])
      return "piece table " + std::to_string(a) +
             " lies outside GPU " + std::to_string(x.gpu) + "'s table area";
    for (size_t b = 0; b < a; ++b) {
      const MultiFetchTable &y = tables[b];
      if (x.gpu == y.gpu && x.offset < y.offset + y.bytes &&
          y.offset < x.offset + x.bytes)
        return "piece tables " + std::to_string(b) + " and " +
               std::to_string(a) + " overlap on GPU " + std::to_string(x.gpu);
    }
  }
  return "";
}

void tofu::cuda::resolveMultiFetchTable(
    const MultiFetchTable &table,
    const std::function<uint64_t(const DevicePointer &)> &address,
    std::vector<uint8_t> &bytes) {
  MultiFetchHeader h = table.header;
  h.dst = address(table.dst);
  std::vector<MultiFetchPiece> pieces = table.pieces;
  for (size_t q = 0; q < pieces.size(); ++q)
    pieces[q].src = address(table.sources[q]);
  bytes.assign(multiFetchTableBytes(h.numPieces), 0);
  encodeMultiFetchTable(h, pieces.data(), bytes.data());
}
