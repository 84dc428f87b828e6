//===- KernelsIndex.cpp - Indexing, slicing, casting and dropout ----------===//
//
// Gather and GatherGrad (an embedding and its scatter-add gradient), Slice,
// SliceGrad and Split (strided box copies), Cast and Dropout / DropoutGrad,
// on local boxes, as their TDL specs (tdl-specs/shape.tdl,
// split-concat.tdl, dropout.tdl) define them:
//   - the copies move whole contiguous runs (memcpy) where the source walks
//     contiguously, and are generic over the element type (bytes);
//   - GatherGrad accumulates in double in the indices' row-major order (the
//     interpreter's order) and rounds once; a box of the indices (a split
//     of the gathered positions) gives a partial sum the plan adds up;
//   - Dropout draws tofu::rng::counterUniform(seed, global flat index, step)
//     per element, as the interpreter does, so the mask does not depend on
//     the partitioning.
// Before these kernels the interpreter ran them: GatherGrad alone took 783
// ms of the 2-layer LSTM language model's CPU step (issue 16), SliceGrad 94
// ms of the ViT's.
//
//===----------------------------------------------------------------------===//

#include "FloatKernel.h"
#include "LoopNest.h"
#include "tofu/runtime/CounterRng.h"
#include "tofu/runtime/ElementAccess.h"
#include "tofu/runtime/Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace tofu::runtime;
using tofu::plan::DType;

namespace {

/// Copies along `nest` (operand 0: dst, operand 1: src) elements of `size`
/// bytes; contiguous rows as one memcpy.
void copyNest(const LoopNest &nest, size_t size, void *dst, const void *src) {
  auto *t = static_cast<uint8_t *>(dst);
  const auto *s = static_cast<const uint8_t *>(src);
  const int64_t st = nest.inner(0), ss = nest.inner(1);
  forEachRow(nest, 0.25, [&](const int64_t *off, int64_t n) {
    uint8_t *to = t + size_t(off[0]) * size;
    const uint8_t *from = s + size_t(off[1]) * size;
    if (st == 1 && ss == 1) {
      std::memcpy(to, from, size_t(n) * size);
      return;
    }
    auto strided = [&](auto tag) {
      using E = decltype(tag);
      E *o = reinterpret_cast<E *>(to);
      const E *i = reinterpret_cast<const E *>(from);
      for (int64_t e = 0; e < n; ++e)
        std::memcpy(o + e * st, i + e * ss, sizeof(E));
    };
    switch (size) {
    case 1: strided(uint8_t()); break;
    case 2: strided(uint16_t()); break;
    case 4: strided(uint32_t()); break;
    case 8: strided(uint64_t()); break;
    default:
      for (int64_t e = 0; e < n; ++e)
        std::memcpy(to + size_t(e * st) * size, from + size_t(e * ss) * size,
                    size);
    }
  });
}

/// Adds `src` to a nest over `out`'s box where output global index i of dim
/// d reads src global index a[d] + m[d] * i. unsupportedConfiguration when
/// src's box lacks an element.
std::string addAffineSource(LoopNest &nest, const TensorView &out,
                            const TensorView &src,
                            const std::vector<int64_t> &a,
                            const std::vector<int64_t> &m) {
  const LoopNest::Dims s = localStrides(src);
  LoopNest::Dims stride(out.shape.size(), 0);
  int64_t offset = 0;
  for (size_t d = 0; d < out.shape.size(); ++d) {
    if (out.shape[d] == 0)
      return "";
    const int64_t first = a[d] + m[d] * out.lo[d],
                  last = a[d] + m[d] * (out.lo[d] + out.shape[d] - 1);
    if (std::min(first, last) < src.lo[d] ||
        std::max(first, last) >= src.lo[d] + src.shape[d])
      return unsupportedConfiguration(
          "the input's local box [" + std::to_string(src.lo[d]) + ", +" +
          std::to_string(src.shape[d]) + ") of dim " + std::to_string(d) +
          " lacks [" + std::to_string(std::min(first, last)) + ", " +
          std::to_string(std::max(first, last)) +
          "] that the output box reads");
    stride[d] = m[d] * s[d];
    offset += (first - src.lo[d]) * s[d];
  }
  nest.stride.push_back(std::move(stride));
  nest.offset.push_back(offset);
  return "";
}

/// Evaluates index expression `node` of `p` with its variables at `vals`
/// (Const, Var, Neg, +, -, *): false for anything else.
bool evalIndex(const tofu::plan::ExprProgram &p, int32_t node,
               const std::vector<double> &vals, double &out) {
  using tofu::plan::ExprNode;
  if (node < 0 || size_t(node) >= p.nodes.size())
    return false;
  const ExprNode &n = p.nodes[size_t(node)];
  double a = 0, b = 0;
  switch (n.kind) {
  case ExprNode::Kind::Const:
    out = n.value;
    return true;
  case ExprNode::Kind::Var:
    if (n.var < 0 || size_t(n.var) >= vals.size())
      return false;
    out = vals[size_t(n.var)];
    return true;
  case ExprNode::Kind::Neg:
    if (n.operands.size() != 1 || !evalIndex(p, n.operands[0], vals, a))
      return false;
    out = -a;
    return true;
  case ExprNode::Kind::Binary:
    if (n.operands.size() != 2 || !evalIndex(p, n.operands[0], vals, a) ||
        !evalIndex(p, n.operands[1], vals, b))
      return false;
    switch (n.binary) {
    case tofu::plan::BinaryOp::Add: out = a + b; return true;
    case tofu::plan::BinaryOp::Sub: out = a - b; return true;
    case tofu::plan::BinaryOp::Mul: out = a * b; return true;
    default: return false;
    }
  default:
    return false;
  }
}

/// Reads off output o's program that it is out[*i] = input[a + m * i] (per
/// dim d: index d of the access is a[d] + m[d] * i[d], integers): the
/// programs of Slice and Split, whose const inputs (starts, steps, split
/// sizes) the plan folds into them. unsupportedConfiguration otherwise.
std::string affineAccess(const KernelArgs &args, size_t o, int32_t input,
                         size_t r, std::vector<int64_t> &a,
                         std::vector<int64_t> &m) {
  using tofu::plan::ExprNode;
  if (!args.programs || o >= args.programs->size())
    return unsupportedConfiguration("no expression program to read the "
                                    "const inputs from");
  const tofu::plan::ExprProgram &p = (*args.programs)[o];
  if (p.root < 0 || size_t(p.root) >= p.nodes.size() ||
      p.outputVars.size() != r)
    return unsupportedConfiguration("an unexpected program");
  const ExprNode &root = p.nodes[size_t(p.root)];
  if (root.kind != ExprNode::Kind::Access || root.input != input ||
      root.operands.size() != r)
    return unsupportedConfiguration("the program is not one access");
  std::vector<double> vals(p.varExtents.size(), 0.0);
  a.assign(r, 0);
  m.assign(r, 0);
  std::vector<double> base(r);
  for (size_t d = 0; d < r; ++d)
    if (!evalIndex(p, root.operands[d], vals, base[d]))
      return unsupportedConfiguration("an index is not affine");
  for (size_t k = 0; k < r; ++k) {
    const int32_t v = p.outputVars[k];
    if (v < 0 || size_t(v) >= vals.size())
      return unsupportedConfiguration("an unexpected program");
    vals[size_t(v)] = 1;
    for (size_t d = 0; d < r; ++d) {
      double x;
      if (!evalIndex(p, root.operands[d], vals, x))
        return unsupportedConfiguration("an index is not affine");
      const double slope = x - base[d];
      if (d == k)
        m[d] = int64_t(slope);
      if ((d != k && slope != 0) || slope != std::floor(slope))
        return unsupportedConfiguration("an index is not per-dim affine");
    }
    vals[size_t(v)] = 0;
  }
  for (size_t d = 0; d < r; ++d) {
    if (base[d] != std::floor(base[d]))
      return unsupportedConfiguration("an index is not an integer");
    a[d] = int64_t(base[d]);
  }
  // Affine in each variable alone; check one joint point too (no products
  // of variables).
  for (size_t k = 0; k < r; ++k)
    vals[size_t(p.outputVars[k])] = 2;
  for (size_t d = 0; d < r; ++d) {
    double x;
    if (!evalIndex(p, root.operands[d], vals, x) ||
        x != double(a[d] + 2 * m[d]))
      return unsupportedConfiguration("an index is not per-dim affine");
  }
  return "";
}

const int64_t *ints(const TensorView &v) {
  return static_cast<const int64_t *>(v.data);
}

/// The output this instruction computes: all of them, or (an instruction
/// for one output of a multi-output op) the one named by tofu.output.
std::vector<std::pair<size_t, const TensorView *>>
outputsOf(const KernelArgs &args, size_t total) {
  std::vector<std::pair<size_t, const TensorView *>> out;
  if (args.outputs.size() == 1 && args.hasAttr("tofu.output")) {
    out.push_back({size_t(args.intAttr("tofu.output", 0)), &args.outputs[0]});
  } else if (args.outputs.size() == total) {
    for (size_t k = 0; k < total; ++k)
      out.push_back({k, &args.outputs[k]});
  }
  return out;
}

// --- Slice, SliceGrad, Split ---------------------------------------------

std::string slice(const KernelArgs &args) {
  if (args.inputs.size() < 3 || args.outputs.size() != 1)
    return "expects data, starts, ends and 1 output";
  const TensorView &data = args.inputs[0], &out = args.outputs[0];
  if (!data.present())
    return "the data input is missing";
  if (data.dtype != out.dtype)
    return "the output's element type differs from the input's";
  const size_t r = data.shape.size();
  if (out.shape.size() != r)
    return "the output's rank differs from the data's";
  // starts, ends, axes and steps are const inputs, folded into the
  // program: output index i of dim d reads data index b[d] + stp[d] * i.
  std::vector<int64_t> b, stp;
  if (std::string err = affineAccess(args, 0, 0, r, b, stp); !err.empty())
    return err;
  LoopNest nest = outputNest(out);
  if (std::string e = addAffineSource(nest, out, data, b, stp); !e.empty())
    return e;
  if (nest.operands() < 2)
    return ""; // empty
  nest.coalesce();
  copyNest(nest, tofu::plan::dtypeSize(data.dtype), out.data, data.data);
  return "";
}

int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

/// SliceGrad(dY, X) -> dX: dY's elements at starts + j * steps, zeros
/// elsewhere.
std::string sliceGrad(const KernelArgs &args) {
  if (args.inputs.size() != 2 || args.outputs.size() != 1)
    return "expects 2 inputs and 1 output";
  const TensorView &dY = args.inputs[0], &dX = args.outputs[0];
  if (!dY.present())
    return "dY is missing";
  if (dY.dtype != dX.dtype)
    return "dX's element type differs from dY's";
  const size_t r = dX.shape.size();
  const std::vector<int64_t> s = args.intsAttr("starts", {}),
                             st = args.intsAttr("steps", {});
  if (s.size() != r || st.size() != r || dY.shape.size() != r)
    return "starts and steps need one entry per dim";
  const size_t size = tofu::plan::dtypeSize(dX.dtype);
  std::memset(dX.data, 0, size_t(dX.numElements()) * size);
  // Per dim: the dY indices [jlo[d], jhi[d]] whose s + j * st lies in dX's
  // box. When one dim has none, no element of dY lands in this box (all of
  // it zeros) and dY's box is empty; only otherwise must dY's box hold them.
  for (size_t d = 0; d < r; ++d)
    if (st[d] == 0)
      return "a step is 0";
  std::vector<int64_t> jlo(r), jhi(r);
  for (size_t d = 0; d < r; ++d) {
    const int64_t lo = dX.lo[d], hi = dX.lo[d] + dX.shape[d];
    if (st[d] > 0) {
      jlo[d] = ceilDiv(lo - s[d], st[d]);
      jhi[d] = floorDiv(hi - 1 - s[d], st[d]);
    } else {
      jlo[d] = ceilDiv(s[d] - hi + 1, -st[d]);
      jhi[d] = floorDiv(s[d] - lo, -st[d]);
    }
    jlo[d] = std::max<int64_t>(jlo[d], 0);
    jhi[d] = std::min<int64_t>(jhi[d], dY.globalShape[d] - 1);
    if (jhi[d] < jlo[d])
      return ""; // nothing of dY lands in this box
  }
  LoopNest nest;
  nest.stride.assign(2, LoopNest::Dims(r, 0));
  nest.offset.assign(2, 0);
  const LoopNest::Dims xs = localStrides(dX), ys = localStrides(dY);
  for (size_t d = 0; d < r; ++d) {
    if (jlo[d] < dY.lo[d] || jhi[d] >= dY.lo[d] + dY.shape[d])
      return unsupportedConfiguration(
          "dY's box [" + std::to_string(dY.lo[d]) + ", +" +
          std::to_string(dY.shape[d]) + ") of dim " + std::to_string(d) +
          " lacks [" + std::to_string(jlo[d]) + ", " + std::to_string(jhi[d]) +
          "] that dX's box reads");
    nest.extent.push_back(jhi[d] - jlo[d] + 1);
    nest.stride[0][d] = st[d] * xs[d];
    nest.stride[1][d] = ys[d];
    nest.offset[0] += (s[d] + jlo[d] * st[d] - dX.lo[d]) * xs[d];
    nest.offset[1] += (jlo[d] - dY.lo[d]) * ys[d];
  }
  nest.coalesce();
  copyNest(nest, size, dX.data, dY.data);
  return "";
}

/// Split: output k is the input's piece at offs[k] along the axis.
std::string split(const KernelArgs &args) {
  if (args.inputs.empty() || args.outputs.empty())
    return "expects the input and outputs";
  const TensorView &in = args.inputs[0];
  if (!in.present())
    return "the input is missing";
  const size_t r = in.shape.size();
  int64_t ax = args.intAttr("axis", 0);
  if (ax < 0)
    ax += int64_t(r);
  if (ax < 0 || ax >= int64_t(r))
    return "axis out of range";
  for (size_t o = 0; o < args.outputs.size(); ++o) {
    const TensorView &out = args.outputs[o];
    if (out.shape.size() != r)
      return "an output's rank differs from the input's";
    if (out.dtype != in.dtype)
      return "an output's element type differs from the input's";
    if (out.numElements() == 0)
      continue;
    // The output's offset along the axis (the split sizes are a const
    // input, folded into the program).
    std::vector<int64_t> a, m;
    if (std::string err = affineAccess(args, o, 0, r, a, m); !err.empty())
      return err;
    for (size_t d = 0; d < r; ++d)
      if (m[d] != 1 || (d != size_t(ax) && a[d] != 0))
        return unsupportedConfiguration("the program is not a split");
    LoopNest nest = outputNest(out);
    if (std::string e = addAffineSource(nest, out, in, a, m); !e.empty())
      return e;
    nest.coalesce();
    copyNest(nest, tofu::plan::dtypeSize(in.dtype), out.data, in.data);
  }
  return "";
}

// --- Gather, GatherGrad --------------------------------------------------

/// Local offsets (row-major over the sub-box) of dims [first, first + n) of
/// `v` for global positions [lo, lo + extent) of those dims; the other dims
/// at their first local index. unsupportedConfiguration when v's box lacks
/// one.
std::string subBoxOffsets(const TensorView &v, size_t first, size_t n,
                          const int64_t *lo, const int64_t *extent,
                          std::vector<int64_t> &offsets) {
  const LoopNest::Dims s = localStrides(v);
  offsets.assign(1, 0);
  for (size_t q = 0; q < n; ++q) {
    const size_t d = first + q;
    if (lo[q] < v.lo[d] || lo[q] + extent[q] > v.lo[d] + v.shape[d])
      return unsupportedConfiguration(
          "an input's box lacks part of what the output box reads");
    std::vector<int64_t> next;
    next.reserve(offsets.size() * size_t(extent[q]));
    for (int64_t o : offsets)
      for (int64_t k = 0; k < extent[q]; ++k)
        next.push_back(o + (lo[q] - v.lo[d] + k) * s[d]);
    offsets = std::move(next);
  }
  return "";
}

/// The gathered row of index value x on an axis of extent n (x + n for x in
/// [-n, 0)), or -1 outside [-n, n).
int64_t gatherRow(int64_t x, int64_t n) {
  if (x < 0)
    x += n;
  return x >= 0 && x < n ? x : -1;
}

/// Gather(data, indices) -> output, axis a: output[o, q, i] =
/// data[o, indices[q], i]; the inner dims copied as contiguous runs.
std::string gather(const KernelArgs &args) {
  if (args.inputs.size() != 2 || args.outputs.size() != 1)
    return "expects 2 inputs and 1 output";
  const TensorView &data = args.inputs[0], &idx = args.inputs[1],
                   &out = args.outputs[0];
  if (!data.present() || !idx.present())
    return "an input is missing";
  if (idx.dtype != DType::I64)
    return unsupportedConfiguration("indices are not int64");
  if (data.dtype != out.dtype)
    return "the output's element type differs from the data's";
  const size_t r = data.shape.size(), ri = idx.shape.size();
  int64_t a = args.intAttr("axis", 0);
  if (a < 0)
    a += int64_t(r);
  if (a < 0 || a >= int64_t(r) || out.shape.size() != r + ri - 1)
    return "axis out of range, or the output's rank is wrong";
  const size_t A = size_t(a), inner = r - A - 1;
  // The inner dims: data's box must equal the output's there (contiguous
  // runs of `run` elements); the gathered axis whole.
  int64_t run = 1;
  for (size_t d = 0; d < inner; ++d) {
    const size_t dd = A + 1 + d, od = A + ri + d;
    if (data.lo[dd] != out.lo[od] || data.shape[dd] != out.shape[od])
      return unsupportedConfiguration(
          "the data's box differs from the output's along an inner dim");
    run *= out.shape[od];
  }
  const int64_t n = data.globalShape[A];
  if (data.lo[A] != 0 || data.shape[A] != n)
    return unsupportedConfiguration("the data's box splits the gathered axis");
  std::vector<int64_t> outer, pos;
  if (std::string e = subBoxOffsets(data, 0, A, out.lo.data(),
                                    out.shape.data(), outer);
      !e.empty())
    return e;
  if (std::string e = subBoxOffsets(idx, 0, ri, out.lo.data() + A,
                                    out.shape.data() + A, pos);
      !e.empty())
    return e;
  const LoopNest::Dims ds = localStrides(data);
  const size_t size = tofu::plan::dtypeSize(data.dtype);
  const auto *src = static_cast<const uint8_t *>(data.data);
  auto *dst = static_cast<uint8_t *>(out.data);
  const int64_t *ix = ints(idx);
  for (int64_t p : pos)
    if (gatherRow(ix[p], n) < 0)
      return unsupportedConfiguration("an index is out of range");
  const size_t bytes = size_t(run) * size;
  size_t at = 0;
  for (int64_t o : outer)
    for (int64_t p : pos) {
      std::memcpy(dst + at,
                  src + size_t(o + gatherRow(ix[p], n) * ds[A]) * size,
                  bytes);
      at += bytes;
    }
  return "";
}

/// GatherGrad(dY, indices, X) -> dX: dX[o, j, i] = the sum over the
/// positions q (row-major) with indices[q] == j of dY[o, q, i].
template <typename T> std::string gatherGrad(const KernelArgs &args) {
  if (args.inputs.size() != 3 || args.outputs.size() != 1)
    return "expects 3 inputs and 1 output";
  const TensorView &dY = args.inputs[0], &idx = args.inputs[1],
                   &dX = args.outputs[0];
  if (!dY.present() || !idx.present())
    return "an input is missing";
  if (idx.dtype != DType::I64)
    return unsupportedConfiguration("indices are not int64");
  if (!isFloat<T>(dY) || dX.dtype != FloatType<T>::dtype)
    return unsupportedConfiguration("dY and dX are not " + floatName<T>());
  const size_t r = dX.shape.size(), ri = idx.shape.size();
  int64_t a = args.intAttr("axis", 0);
  if (a < 0)
    a += int64_t(r);
  if (a < 0 || a >= int64_t(r) || dY.shape.size() != r + ri - 1)
    return "axis out of range, or dY's rank is wrong";
  const size_t A = size_t(a), inner = r - A - 1;
  int64_t run = 1;
  for (size_t d = 0; d < inner; ++d) {
    const size_t xd = A + 1 + d, yd = A + ri + d;
    if (dY.lo[yd] != dX.lo[xd] || dY.shape[yd] != dX.shape[xd])
      return unsupportedConfiguration(
          "dY's box differs from dX's along an inner dim");
    run *= dX.shape[xd];
  }
  // dY's box along the gathered positions must be the indices' box.
  for (size_t q = 0; q < ri; ++q)
    if (dY.lo[A + q] != idx.lo[q] || dY.shape[A + q] != idx.shape[q])
      return unsupportedConfiguration(
          "dY's box differs from the indices' along a gathered position");
  std::vector<int64_t> outerY, outerX;
  if (std::string e = subBoxOffsets(dY, 0, A, dX.lo.data(), dX.shape.data(),
                                    outerY);
      !e.empty())
    return e;
  const int64_t n = dX.globalShape[A], jlo = dX.lo[A],
                jhi = dX.lo[A] + dX.shape[A];
  const int64_t m = idx.numElements();
  const int64_t *ix = ints(idx);
  const T *g = elements<T>(dY);
  std::vector<double> acc(size_t(dX.numElements()), 0.0);
  // dX's outer dims are its leading A dims, in row-major order as outerY's.
  int64_t ox = 0;
  const int64_t outerStrideX = dX.shape[A] * run;
  for (size_t oi = 0; oi < outerY.size(); ++oi, ox += outerStrideX) {
    // Positions q in row-major order of the indices' box: dY's local
    // offset q * run along the gathered dims (dense, as the boxes match).
    for (int64_t q = 0; q < m; ++q) {
      const int64_t j = gatherRow(ix[q], n);
      if (j < jlo || j >= jhi)
        continue;
      double *to = acc.data() + ox + (j - jlo) * run;
      const T *from = g + outerY[oi] + q * run;
      for (int64_t e = 0; e < run; ++e)
        to[e] += static_cast<double>(from[e]);
    }
  }
  T *out = elements<T>(dX);
  for (size_t i = 0; i < acc.size(); ++i)
    out[i] = static_cast<T>(acc[i]);
  return "";
}

// --- Cast ------------------------------------------------------------------

template <typename S, typename D> void castLoop(const void *in, void *out,
                                                int64_t n) {
  const S *s = static_cast<const S *>(in);
  D *d = static_cast<D *>(out);
  for (int64_t i = 0; i < n; ++i)
    d[i] = static_cast<D>(static_cast<double>(s[i]));
}

std::string cast(const KernelArgs &args) {
  if (args.inputs.size() != 1 || args.outputs.size() != 1)
    return "expects 1 input and 1 output";
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (!in.present())
    return "the input is missing";
  if (in.shape != out.shape || in.lo != out.lo)
    return unsupportedConfiguration("the input's box differs from the output's");
  const int64_t n = out.numElements();
  if (in.dtype == out.dtype) {
    std::memcpy(out.data, in.data, size_t(n) * tofu::plan::dtypeSize(in.dtype));
    return "";
  }
  // Float targets: the value as a double, rounded once (the interpreter's
  // conversion); bool sources read 0 or 1.
  auto toFloat = [&](auto tag) -> bool {
    using D = decltype(tag);
    switch (in.dtype) {
    case DType::F32: castLoop<float, D>(in.data, out.data, n); return true;
    case DType::F64: castLoop<double, D>(in.data, out.data, n); return true;
    case DType::I64: castLoop<int64_t, D>(in.data, out.data, n); return true;
    case DType::Bool: {
      const uint8_t *s = static_cast<const uint8_t *>(in.data);
      D *d = static_cast<D *>(out.data);
      for (int64_t i = 0; i < n; ++i)
        d[i] = s[i] ? D(1) : D(0);
      return true;
    }
    default: return false;
    }
  };
  if (out.dtype == DType::F32 && toFloat(float()))
    return "";
  if (out.dtype == DType::F64 && toFloat(double()))
    return "";
  // Integer and bool targets: ElementAccess's conversion rules.
  for (int64_t i = 0; i < n; ++i)
    storeElement(out.data, out.dtype, i, loadElement(in.data, in.dtype, i));
  return "";
}

// --- Dropout, DropoutGrad ------------------------------------------------

/// Runs `body(e, flat)` for each element e of box `v` with its global
/// row-major flat index.
template <typename Body> void forEachFlat(const TensorView &v, Body body) {
  const size_t r = v.shape.size();
  const int64_t n = v.numElements();
  if (n == 0)
    return;
  std::vector<int64_t> gs(r, 1);
  for (size_t d = r; d-- > 1;)
    gs[d - 1] = gs[d] * v.globalShape[d];
  const int64_t inner = r ? v.shape[r - 1] : 1;
  const int64_t rows = n / inner;
  parallelFor(rows, double(inner) * 16, [&](int64_t b, int64_t e) {
    std::vector<int64_t> idx(r, 0);
    int64_t rem = b;
    for (size_t d = r - 1; r && d-- > 0;) {
      idx[d] = rem % v.shape[d];
      rem /= v.shape[d];
    }
    for (int64_t row = b; row < e; ++row) {
      int64_t flat = 0;
      for (size_t d = 0; d < r; ++d)
        flat += (v.lo[d] + idx[d]) * gs[d];
      for (int64_t k = 0; k < inner; ++k)
        body(row * inner + k, flat + k);
      for (size_t d = r - 1; r && d-- > 0;) {
        if (++idx[d] < v.shape[d])
          break;
        idx[d] = 0;
      }
    }
  });
}

template <typename T> std::string dropout(const KernelArgs &args) {
  if (args.inputs.empty() || args.outputs.empty() || args.outputs.size() > 2)
    return "expects data and 1 or 2 outputs";
  const TensorView &data = args.inputs[0];
  if (!isFloat<T>(data))
    return unsupportedConfiguration("data is not " + floatName<T>());
  bool train = false;
  double ratio = 0.5;
  if (args.inputs.size() > 2 && args.inputs[2].present())
    train = loadElement(args.inputs[2].data, args.inputs[2].dtype, 0) != 0;
  if (args.inputs.size() > 1 && args.inputs[1].present())
    ratio = loadElement(args.inputs[1].data, args.inputs[1].dtype, 0);
  const double r = train ? ratio : 0.0;
  if (!(r >= 0 && r < 1))
    return "ratio must be in [0, 1)";
  const double seed = args.floatAttr("seed", 0);
  const uint64_t step = args.randomStep;
  for (auto [k, outp] : outputsOf(args, args.outputs.size())) {
    const TensorView &out = *outp;
    const T *x = elements<T>(data);
    if (k == 0) {
      if (out.shape != data.shape || out.lo != data.lo)
        return unsupportedConfiguration(
            "data's box differs from the output's");
      if (out.dtype != FloatType<T>::dtype)
        return "the output must be " + floatName<T>();
      T *y = elements<T>(out);
      if (r == 0) {
        std::memcpy(y, x, size_t(out.numElements()) * sizeof(T));
        continue;
      }
      forEachFlat(out, [&](int64_t e, int64_t flat) {
        const bool keep =
            tofu::rng::counterUniform(seed, double(flat), step) >= r;
        y[e] = static_cast<T>(double(x[e]) * (keep ? 1.0 : 0.0) / (1 - r));
      });
    } else if (k == 1) {
      if (out.dtype != DType::Bool)
        return "the mask must be bool";
      uint8_t *mask = static_cast<uint8_t *>(out.data);
      if (r == 0) {
        std::memset(mask, 1, size_t(out.numElements()));
        continue;
      }
      forEachFlat(out, [&](int64_t e, int64_t flat) {
        mask[e] = tofu::rng::counterUniform(seed, double(flat), step) >= r;
      });
    } else {
      return "output index out of range";
    }
  }
  return "";
}

template <typename T> std::string dropoutGrad(const KernelArgs &args) {
  if (args.inputs.size() != 1 || args.outputs.size() != 1)
    return "expects 1 input and 1 output";
  const TensorView &dy = args.inputs[0], &dx = args.outputs[0];
  if (!isFloat<T>(dy) || dx.dtype != FloatType<T>::dtype)
    return unsupportedConfiguration("operands are not " + floatName<T>());
  if (dy.shape != dx.shape || dy.lo != dx.lo)
    return unsupportedConfiguration("dY's box differs from dX's");
  const double ratio = args.floatAttr("ratio", 0.5);
  if (!(ratio >= 0 && ratio < 1))
    return "ratio must be in [0, 1)";
  const double seed = args.floatAttr("seed", 0);
  const uint64_t step = args.randomStep;
  const T *g = elements<T>(dy);
  T *out = elements<T>(dx);
  forEachFlat(dx, [&](int64_t e, int64_t flat) {
    const bool keep =
        tofu::rng::counterUniform(seed, double(flat), step) >= ratio;
    out[e] = static_cast<T>(double(g[e]) * (keep ? 1.0 : 0.0) / (1 - ratio));
  });
  return "";
}

} // namespace

void tofu::runtime::registerIndexKernels(void (*addKernel)(const char *,
                                                           KernelFn)) {
  addKernel("Slice", slice);
  addKernel("SliceGrad", sliceGrad);
  addKernel("Split", split);
  addKernel("Gather", gather);
  addKernel("GatherGrad", byFloatType<gatherGrad<float>, gatherGrad<double>>);
  addKernel("Cast", cast);
  addKernel("Dropout", byFloatType<dropout<float>, dropout<double>>);
  addKernel("DropoutGrad",
            byFloatType<dropoutGrad<float>, dropoutGrad<double>>);
}
