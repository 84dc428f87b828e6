//===- KernelsShape.cpp - Reshape-family CPU kernels ----------------------===//
//
// Transpose (any rank and permutation), Concat and ConcatGrad: box copies
// (copyBox), any element type, on any box whose input boxes hold what the
// output box reads; contiguous runs are copied whole, and a copy that
// swaps the contiguous dim (a transpose: MatMul weights, NCHW <-> NHWC) goes
// by 8 x 8 register blocks in 64 x 64 tiles, spread over threads.
//
// Reshape, Flatten, Squeeze, Unsqueeze, ReshapeAs and Identity: the output is
// the input's elements in the same row-major order under another shape, so
// output element g (global row-major index) is input element g. Whole
// tensors on both sides are one memcpy; a box of the output (a partitioned
// reshape) is gathered element by element with integer index arithmetic.
// Any element type (a byte copy); input 0 is the data, other inputs (the
// shape, the axes) only decide the output's shape, which the plan already
// holds. Before these kernels the TDL interpreter ran them in double, one
// element at a time: 35% of the GPT example's CPU step (bench/gpu/H200.md's
// model, issue 16).
//
//===----------------------------------------------------------------------===//

#include "ParallelFor.h"
#include "tofu/runtime/Kernels.h"

#include <algorithm>
#include <cstring>

using namespace tofu::runtime;

namespace {

bool isWhole(const TensorView &v) {
  for (size_t d = 0; d < v.shape.size(); ++d)
    if (v.lo[d] != 0 || v.shape[d] != v.globalShape[d])
      return false;
  return true;
}

int64_t product(const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// How many elements from global coordinates `coord` (inside `v`'s box) on
/// are consecutive both in the global row-major order and in `v`'s dense
/// local buffer: the rest of the innermost dimension, extended through each
/// outer dimension while the dimensions inside it are whole.
int64_t consecutiveRun(const TensorView &v, const std::vector<int64_t> &coord) {
  const size_t rank = v.shape.size();
  if (rank == 0)
    return 1;
  size_t t = rank - 1;
  int64_t count = v.shape[t], offset = coord[t] - v.lo[t];
  while (t > 0 && v.shape[t] == v.globalShape[t]) {
    --t;
    offset += (coord[t] - v.lo[t]) * count;
    count *= v.shape[t];
  }
  return count - offset;
}

std::string rowMajorCopy(const KernelArgs &args) {
  if (args.inputs.empty() || args.outputs.size() != 1)
    return "expects the data input and 1 output";
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (!in.present())
    return "the data input is missing";
  if (in.dtype != out.dtype)
    return "the output's element type differs from the input's";
  if (product(in.globalShape) != product(out.globalShape))
    return "the input has " + std::to_string(product(in.globalShape)) +
           " elements but the output " +
           std::to_string(product(out.globalShape));
  const size_t size = tofu::plan::dtypeSize(in.dtype);
  const auto *src = static_cast<const uint8_t *>(in.data);
  auto *dst = static_cast<uint8_t *>(out.data);
  const int64_t n = out.numElements();
  if (isWhole(in) && isWhole(out)) {
    if (n > 0 && src != dst)
      std::memmove(dst, src, static_cast<size_t>(n) * size);
    return "";
  }
  // Copy in runs: a run continues while the elements stay consecutive in
  // the global row-major order and in both local buffers, so a partial box
  // costs one coordinate decode per run, not per element.
  const size_t outRank = out.shape.size(), inRank = in.shape.size();
  std::vector<int64_t> outStride(outRank, 1);
  for (size_t d = outRank; d-- > 1;)
    outStride[d - 1] = outStride[d] * out.globalShape[d];
  std::vector<int64_t> outCoord(outRank), inCoord(inRank);
  for (int64_t e = 0; e < n;) {
    // Global coordinates of output element e (local row-major order).
    int64_t rest = e, flat = 0;
    for (size_t d = outRank; d-- > 0;) {
      outCoord[d] = out.lo[d] + rest % out.shape[d];
      rest /= out.shape[d];
    }
    for (size_t d = 0; d < outRank; ++d)
      flat += outCoord[d] * outStride[d];
    // The same global element in the input's coordinates and buffer.
    int64_t local = 0;
    for (size_t d = inRank; d-- > 0;) {
      inCoord[d] = flat % in.globalShape[d];
      flat /= in.globalShape[d];
    }
    for (size_t d = 0; d < inRank; ++d) {
      const int64_t l = inCoord[d] - in.lo[d];
      if (l < 0 || l >= in.shape[d])
        return unsupportedConfiguration(
            "the input box lacks an element the output box needs");
      local = local * in.shape[d] + l;
    }
    const int64_t run = std::min({consecutiveRun(out, outCoord),
                                  consecutiveRun(in, inCoord), n - e});
    std::memcpy(dst + static_cast<size_t>(e) * size,
                src + static_cast<size_t>(local) * size,
                static_cast<size_t>(run) * size);
    e += run;
  }
  return "";
}

/// dst[i * dstRow + j] = src[i + j * srcCol] for i in [i0, i1), j < cols:
/// 8 x 8 blocks read as 8 contiguous runs of src into registers and written
/// as 8 contiguous runs of dst (16 cache lines per block, whatever the
/// strides: power-of-two strides make a column walk thrash the cache),
/// blocks walked in 64 x 64 tiles.
template <typename E>
void transpose2D(E *dst, int64_t dstRow, const E *src, int64_t srcCol,
                 int64_t i0, int64_t i1, int64_t cols) {
  constexpr int64_t kB = 8, kTile = 64;
  for (int64_t ti = i0; ti < i1; ti += kTile) {
    const int64_t te = std::min(i1, ti + kTile);
    for (int64_t tj = 0; tj < cols; tj += kTile) {
      const int64_t tje = std::min(cols, tj + kTile);
      for (int64_t i = ti; i < te; i += kB) {
        for (int64_t j = tj; j < tje; j += kB) {
          if (i + kB <= te && j + kB <= tje) {
            E block[kB][kB];
            for (int64_t b = 0; b < kB; ++b)
              for (int64_t a = 0; a < kB; ++a)
                block[a][b] = src[(i + a) + (j + b) * srcCol];
            for (int64_t a = 0; a < kB; ++a)
              for (int64_t b = 0; b < kB; ++b)
                dst[(i + a) * dstRow + j + b] = block[a][b];
          } else {
            for (int64_t a = i; a < std::min(te, i + kB); ++a)
              for (int64_t b = j; b < std::min(tje, j + kB); ++b)
                dst[a * dstRow + b] = src[a + b * srcCol];
          }
        }
      }
    }
  }
}

/// copyBox's transposing case: output dim `ks` has src stride 1, the last
/// output dim dst stride 1; the other dims are looped over (in parallel
/// when the copy is large), each step one transpose2D.
template <typename E>
void tiledCopy(uint8_t *t, const uint8_t *s, const std::vector<int64_t> &extent,
               const std::vector<int64_t> &stride,
               const std::vector<int64_t> &dstStride, int64_t from, int64_t to,
               size_t ks) {
  const size_t rank = extent.size(), last = rank - 1;
  std::vector<size_t> outer;
  int64_t count = 1;
  for (size_t k = 0; k < last; ++k)
    if (k != ks) {
      outer.push_back(k);
      count *= extent[k];
    }
  const int64_t rows = extent[ks], cols = extent[last];
  E *dst = reinterpret_cast<E *>(t) + to;
  const E *src = reinterpret_cast<const E *>(s) + from;
  // Items: (outer index, block of 64 rows).
  const int64_t blocks = (rows + 63) / 64;
  parallelFor(count * blocks, double(std::min<int64_t>(rows, 64) * cols) / 4,
              [&](int64_t b, int64_t e) {
    for (int64_t it = b; it < e; ++it) {
      const int64_t item = it / blocks, r0 = (it % blocks) * 64;
      int64_t rem = item, fo = 0, too = 0;
      for (size_t q = outer.size(); q-- > 0;) {
        const size_t k = outer[q];
        const int64_t i = rem % extent[k];
        rem /= extent[k];
        fo += i * stride[k];
        too += i * dstStride[k];
      }
      transpose2D<E>(dst + too, dstStride[ks], src + fo, stride[last], r0,
                     std::min(rows, r0 + 64), cols);
    }
  });
}

/// Copies the elements of `dst` in box [lo, hi) (global coordinates of
/// dst) from `src`: dst element i reads src element j with
/// j[perm[k]] = i[k] + shift[k]. Any element type (bytes). An error made by
/// unsupportedConfiguration when src's local box lacks a needed element.
std::string copyBox(const TensorView &src, const TensorView &dst,
                    const std::vector<int64_t> &perm,
                    const std::vector<int64_t> &shift,
                    const std::vector<int64_t> &lo,
                    const std::vector<int64_t> &hi) {
  const size_t rank = dst.shape.size();
  if (src.dtype != dst.dtype)
    return "the output's element type differs from the input's";
  std::vector<int64_t> srcStride(rank, 1), dstStride(rank, 1), stride(rank);
  for (size_t d = rank; d-- > 1;) {
    srcStride[d - 1] = srcStride[d] * src.shape[d];
    dstStride[d - 1] = dstStride[d] * dst.shape[d];
  }
  int64_t from = 0, to = 0, n = 1;
  std::vector<int64_t> extent(rank);
  for (size_t k = 0; k < rank; ++k) {
    const int64_t p = perm[k];
    extent[k] = hi[k] - lo[k];
    if (extent[k] <= 0)
      return "";
    n *= extent[k];
    if (lo[k] < dst.lo[k] || hi[k] > dst.lo[k] + dst.shape[k])
      return "the box to write is outside the output's local box";
    if (lo[k] + shift[k] < src.lo[p] ||
        hi[k] + shift[k] > src.lo[p] + src.shape[p])
      return unsupportedConfiguration(
          "the input's local box lacks part of what the output box reads");
    stride[k] = srcStride[p];
    from += (lo[k] + shift[k] - src.lo[p]) * srcStride[p];
    to += (lo[k] - dst.lo[k]) * dstStride[k];
  }
  const size_t size = tofu::plan::dtypeSize(dst.dtype);
  const auto *s = static_cast<const uint8_t *>(src.data);
  auto *t = static_cast<uint8_t *>(dst.data);
  // Runs along the last dim are contiguous in dst; in src too when the last
  // output dim is the last input dim.
  const bool contiguous = rank > 0 && stride[rank - 1] == 1;
  if (!contiguous && rank >= 2 && (size == 1 || size == 2 || size == 4 ||
                                   size == 8)) {
    // A transpose: the output dim `ks` that walks src contiguously and the
    // last output dim (contiguous in dst) are copied as 2-D tiles, both
    // sides cache-friendly, once per index of the other dims.
    size_t ks = rank;
    for (size_t k = 0; k + 1 < rank; ++k)
      if (stride[k] == 1 && extent[k] > 1)
        ks = k;
    if (ks < rank) {
      switch (size) {
      case 1: tiledCopy<uint8_t>(t, s, extent, stride, dstStride, from, to, ks); break;
      case 2: tiledCopy<uint16_t>(t, s, extent, stride, dstStride, from, to, ks); break;
      case 4: tiledCopy<uint32_t>(t, s, extent, stride, dstStride, from, to, ks); break;
      default: tiledCopy<uint64_t>(t, s, extent, stride, dstStride, from, to, ks); break;
      }
      return "";
    }
  }
  const int64_t run = rank > 0 && contiguous ? extent[rank - 1] : 1;
  std::vector<int64_t> idx(rank, 0);
  for (int64_t e = 0; e < n; e += run) {
    if (contiguous)
      std::memcpy(t + static_cast<size_t>(to) * size,
                  s + static_cast<size_t>(from) * size,
                  static_cast<size_t>(run) * size);
    else
      std::memcpy(t + static_cast<size_t>(to) * size,
                  s + static_cast<size_t>(from) * size, size);
    for (size_t k = contiguous ? rank - 1 : rank; k-- > 0;) {
      from += stride[k];
      to += dstStride[k];
      if (++idx[k] < extent[k])
        break;
      from -= stride[k] * extent[k];
      to -= dstStride[k] * extent[k];
      idx[k] = 0;
    }
  }
  return "";
}

std::vector<int64_t> identity(size_t rank) {
  std::vector<int64_t> perm(rank);
  for (size_t d = 0; d < rank; ++d)
    perm[d] = static_cast<int64_t>(d);
  return perm;
}

std::vector<int64_t> boxEnd(const TensorView &v) {
  std::vector<int64_t> hi(v.lo);
  for (size_t d = 0; d < hi.size(); ++d)
    hi[d] += v.shape[d];
  return hi;
}

std::string transpose(const KernelArgs &args) {
  if (args.inputs.size() != 1 || args.outputs.size() != 1)
    return "expects 1 input and 1 output";
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (!in.present())
    return "the data input is missing";
  const size_t rank = in.shape.size();
  std::vector<int64_t> perm = args.intsAttr("perm", {});
  if (perm.empty())
    for (size_t d = rank; d-- > 0;)
      perm.push_back(static_cast<int64_t>(d));
  if (perm.size() != rank || out.shape.size() != rank)
    return "perm has " + std::to_string(perm.size()) + " entries for rank " +
           std::to_string(rank);
  for (size_t k = 0; k < rank; ++k)
    if (perm[k] < 0 || perm[k] >= static_cast<int64_t>(rank) ||
        out.globalShape[k] != in.globalShape[perm[k]])
      return "the output's global shape is not the permuted input's";
  return copyBox(in, out, perm, std::vector<int64_t>(rank, 0), out.lo,
                 boxEnd(out));
}

/// The axis attribute, normalized; -1 when out of range.
int64_t axisOf(const KernelArgs &args, size_t rank) {
  int64_t axis = args.intAttr("axis", 0);
  if (axis < 0)
    axis += static_cast<int64_t>(rank);
  return axis >= 0 && axis < static_cast<int64_t>(rank) ? axis : -1;
}

/// Concat: input k fills [offs_k, offs_k + its extent) along the axis.
std::string concat(const KernelArgs &args) {
  if (args.inputs.empty() || args.outputs.size() != 1)
    return "expects inputs and 1 output";
  const TensorView &out = args.outputs[0];
  const size_t rank = out.shape.size();
  const int64_t axis = axisOf(args, rank);
  if (axis < 0)
    return "axis out of range";
  int64_t offset = 0;
  for (const TensorView &in : args.inputs) {
    if (in.shape.size() != rank)
      return "an input's rank differs from the output's";
    std::vector<int64_t> lo(out.lo), hi = boxEnd(out);
    lo[axis] = std::max(lo[axis], offset);
    hi[axis] = std::min(hi[axis], offset + in.globalShape[axis]);
    std::vector<int64_t> shift(rank, 0);
    shift[axis] = -offset;
    offset += in.globalShape[axis];
    if (lo[axis] >= hi[axis])
      continue; // not in this output box
    if (!in.present())
      return unsupportedConfiguration("an input the output box needs is absent");
    if (std::string err = copyBox(in, out, identity(rank), shift, lo, hi);
        !err.empty())
      return err;
  }
  if (offset != out.globalShape[axis])
    return "the inputs' extents along the axis do not add up to the output's";
  return "";
}

/// ConcatGrad(dY, X) -> dX: dX is dY's piece at `offset` along the axis.
std::string concatGrad(const KernelArgs &args) {
  if (args.inputs.size() != 2 || args.outputs.size() != 1)
    return "expects 2 inputs and 1 output";
  const TensorView &dY = args.inputs[0], &dX = args.outputs[0];
  if (!dY.present())
    return "dY is missing";
  const size_t rank = dX.shape.size();
  const int64_t axis = axisOf(args, rank);
  if (axis < 0 || dY.shape.size() != rank)
    return "axis out of range, or dY's rank differs from dX's";
  std::vector<int64_t> shift(rank, 0);
  shift[axis] = args.intAttr("offset", 0);
  return copyBox(dY, dX, identity(rank), shift, dX.lo, boxEnd(dX));
}

} // namespace

void tofu::runtime::registerShapeKernels(void (*addKernel)(const char *,
                                                           KernelFn)) {
  for (const char *op :
       {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "ReshapeAs", "Identity"})
    addKernel(op, rowMajorCopy);
  addKernel("Transpose", transpose);
  addKernel("Concat", concat);
  addKernel("ConcatGrad", concatGrad);
}
