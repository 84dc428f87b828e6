//===- LoopNest.h - Strided loop nests over local boxes ----------*- C++ -*-===//
//
// The iteration shared by the element-wise, broadcasting and reducing CPU
// kernels: a nest of loops over one operand's box (the "driver": the output
// of an element-wise op, the input of a reduction), with each operand's
// local-element stride per loop (0 where it broadcasts or is reduced).
// Adjacent loops that every operand walks contiguously are merged
// (`coalesce`), so that the innermost loop is as long as possible and each
// operand's inner stride is 0 or 1: the kernels' inner loops are then plain
// contiguous (vectorizable) loops, and index arithmetic happens once per
// row, never per element.
// Internal to tofu_runtime.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_LIB_LOOPNEST_H
#define TOFU_RUNTIME_LIB_LOOPNEST_H

#include "InlineVector.h"
#include "ParallelFor.h"
#include "tofu/runtime/Kernels.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tofu::runtime {

/// Loops (outermost first) over `extent`, with operand o at local element
/// offset[o] + sum_d idx[d] * stride[o][d].
struct LoopNest {
  /// Loops and operands a nest holds without allocating; more spill to the
  /// heap (InlineVector.h).
  static constexpr size_t kInlineRank = 8, kInlineOperands = 4;
  /// One integer per loop (or per tensor dim).
  using Dims = InlineVector<int64_t, kInlineRank>;
  /// One integer per operand.
  using PerOperand = InlineVector<int64_t, kInlineOperands>;

  Dims extent;
  InlineVector<Dims, kInlineOperands> stride; // [operand][loop]
  PerOperand offset;                          // [operand]

  size_t rank() const { return extent.size(); }
  size_t operands() const { return offset.size(); }
  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t e : extent)
      n *= e;
    return n;
  }
  /// The innermost stride of operand o (0 for a rank-0 nest).
  int64_t inner(size_t o) const {
    return extent.empty() ? 0 : stride[o].back();
  }

  /// Drops loops of extent 1 and merges loop d into d + 1 where every
  /// operand has stride[d] == stride[d + 1] * extent[d + 1]. Keeps at least
  /// one loop.
  void coalesce() {
    LoopNest out;
    out.offset = offset;
    out.stride.assign(operands(), Dims());
    for (size_t d = 0; d < rank(); ++d) {
      if (extent[d] == 1)
        continue;
      bool merge = !out.extent.empty();
      // Merging the previous kept loop p into d: stride[p] == stride[d] *
      // extent[d] for every operand.
      for (size_t o = 0; merge && o < operands(); ++o)
        merge = out.stride[o].back() == stride[o][d] * extent[d];
      if (merge) {
        out.extent.back() *= extent[d];
        for (size_t o = 0; o < operands(); ++o)
          out.stride[o].back() = stride[o][d];
      } else {
        out.extent.push_back(extent[d]);
        for (size_t o = 0; o < operands(); ++o)
          out.stride[o].push_back(stride[o][d]);
      }
    }
    if (out.extent.empty()) {
      out.extent.push_back(1);
      for (size_t o = 0; o < operands(); ++o)
        out.stride[o].push_back(1);
    }
    *this = std::move(out);
  }
};

/// Row-major local strides of a view's box.
inline LoopNest::Dims localStrides(const TensorView &v) {
  LoopNest::Dims s(v.shape.size(), 1);
  for (size_t d = s.size(); d-- > 1;)
    s[d - 1] = s[d] * v.shape[d];
  return s;
}

/// Adds operand `in` to a nest that loops over `out`'s box (one loop per
/// dim of `out`, global coordinates out.lo + idx): `dimOf[k]` is the dim of
/// `in` that output dim k indexes, or -1 where `in` does not vary along k.
/// An input dim of global extent 1 under an output dim of another extent
/// broadcasts (stride 0). Returns unsupportedConfiguration when `in`'s box
/// lacks an element the output box reads. `DimOf`: an indexable sequence of
/// int (std::vector<int>, DimMap).
template <typename DimOf>
std::string addOperand(LoopNest &nest, const TensorView &out,
                       const TensorView &in, const DimOf &dimOf) {
  const LoopNest::Dims s = localStrides(in);
  LoopNest::Dims stride(out.shape.size(), 0);
  int64_t offset = 0;
  InlineVector<uint8_t, LoopNest::kInlineRank> used(in.shape.size(), false);
  for (size_t k = 0; k < out.shape.size(); ++k) {
    const int j = dimOf[k];
    if (j < 0)
      continue;
    used[size_t(j)] = true;
    const int64_t gi = in.globalShape[size_t(j)], go = out.globalShape[k];
    if (gi == 1 && go != 1) { // broadcast: read index 0
      if (in.lo[size_t(j)] != 0 || in.shape[size_t(j)] < 1)
        return unsupportedConfiguration(
            "a broadcast input's box lacks index 0 of a broadcast dim");
      continue;
    }
    if (gi != go)
      return "global extents " + std::to_string(gi) + " and " +
             std::to_string(go) + " do not broadcast (output dim " +
             std::to_string(k) + ")";
    if (out.shape[k] == 0)
      continue;
    const int64_t ilo = in.lo[size_t(j)], ihi = ilo + in.shape[size_t(j)];
    if (out.lo[k] < ilo || out.lo[k] + out.shape[k] > ihi)
      return unsupportedConfiguration(
          "the input's local box [" + std::to_string(ilo) + ", " +
          std::to_string(ihi) + ") of dimension " + std::to_string(j) +
          " lacks global index " +
          std::to_string(out.lo[k] < ilo ? out.lo[k] : ihi) +
          " needed by the output");
    stride[k] = s[size_t(j)];
    offset += (out.lo[k] - in.lo[size_t(j)]) * s[size_t(j)];
  }
  // Dims of `in` no output dim indexes are read at their first local index
  // (they have global extent 1 for the kernels that use this).
  for (size_t j = 0; j < in.shape.size(); ++j)
    if (!used[j] && in.shape[j] < 1)
      return unsupportedConfiguration("an input's box is empty");
  nest.stride.push_back(std::move(stride));
  nest.offset.push_back(offset);
  return "";
}

/// Which input dim each output dim reads (-1: none), for addOperand.
using DimMap = InlineVector<int, LoopNest::kInlineRank>;

/// Right-aligned ONNX broadcasting: output dim k reads input dim
/// k - (rank(out) - rank(in)), or nothing.
inline DimMap rightAligned(size_t outRank, size_t inRank) {
  DimMap dimOf(outRank, -1);
  for (size_t k = outRank - std::min(outRank, inRank); k < outRank; ++k)
    dimOf[k] = int(k - (outRank - inRank));
  return dimOf;
}

/// A nest over `out`'s box with `out` as operand 0 (dense) and no other
/// operand yet.
inline LoopNest outputNest(const TensorView &out) {
  LoopNest nest;
  nest.extent.assign(out.shape.begin(), out.shape.end());
  nest.stride.push_back(localStrides(out));
  nest.offset.push_back(0);
  return nest;
}

/// Steps the row index `idx` (all dims but the innermost) and the operands'
/// element offsets `off` to the next row of `nest` in row-major order;
/// false (and both back at the first row) after the last row.
inline bool nextRow(const LoopNest &nest, int64_t *idx, int64_t *off) {
  const size_t r = nest.rank(), ops = nest.operands();
  for (size_t d = r - 1; d-- > 0;) {
    for (size_t o = 0; o < ops; ++o)
      off[o] += nest.stride[o][d];
    if (++idx[d] < nest.extent[d])
      return true;
    for (size_t o = 0; o < ops; ++o)
      off[o] -= nest.stride[o][d] * nest.extent[d];
    idx[d] = 0;
  }
  return false;
}

/// Runs `row(offsets, n)` for every innermost row of `nest` (offsets: each
/// operand's element offset at the row's start; n: the row's length),
/// spread over threads by rows, long rows cut into chunks. The rows (and
/// chunks) a call gets are disjoint in a dense operand 0.
/// `workPerElement`: rough operations per element (ParallelFor.h).
template <typename Row>
void forEachRow(const LoopNest &nest, double workPerElement, Row row) {
  const size_t r = nest.rank(), ops = nest.operands();
  if (r == 0)
    return;
  const int64_t n = nest.extent[r - 1];
  if (n == 0)
    return;
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < r; ++d)
    rows *= nest.extent[d];
  if (rows == 0)
    return;
  constexpr int64_t kChunk = 16384;
  const int64_t perRow = (n + kChunk - 1) / kChunk;
  const int64_t chunk = (n + perRow - 1) / perRow;
  parallelFor(rows * perRow, workPerElement * double(chunk),
              [&](int64_t begin, int64_t end) {
                LoopNest::Dims idx(r, 0);
                LoopNest::PerOperand off(ops, 0), at(ops, 0);
                int64_t rowIndex = begin / perRow, c = begin % perRow;
                for (size_t d = r - 1; d-- > 0;) {
                  idx[d] = rowIndex % nest.extent[d];
                  rowIndex /= nest.extent[d];
                }
                for (size_t o = 0; o < ops; ++o) {
                  off[o] = nest.offset[o];
                  for (size_t d = 0; d + 1 < r; ++d)
                    off[o] += idx[d] * nest.stride[o][d];
                }
                for (int64_t item = begin; item < end; ++item) {
                  const int64_t from = c * chunk,
                                len = std::min(chunk, n - from);
                  for (size_t o = 0; o < ops; ++o)
                    at[o] = off[o] + from * nest.stride[o][r - 1];
                  row(at.data(), len);
                  if (++c < perRow)
                    continue;
                  c = 0;
                  nextRow(nest, idx.data(), off.data());
                }
              });
}

/// Runs `row(offsets, n)` for every innermost row of `nest` in row-major
/// order on the calling thread (for reductions, whose rows share outputs).
template <typename Row> void forEachRowSerial(const LoopNest &nest, Row row) {
  const size_t r = nest.rank(), ops = nest.operands();
  if (r == 0 || nest.numElements() == 0)
    return;
  const int64_t n = nest.extent[r - 1];
  LoopNest::Dims idx(r, 0);
  LoopNest::PerOperand off = nest.offset;
  for (;;) {
    row(off.data(), n);
    if (!nextRow(nest, idx.data(), off.data()))
      return;
  }
}

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_LIB_LOOPNEST_H
