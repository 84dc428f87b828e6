//===- KernelsPad.cpp - Pad and its gradient ------------------------------===//
//
// Native kernels of Pad and PadGrad (tdl-specs/shape.tdl), on any local
// boxes, as their specs define them:
//   - Pad: output element i reads data at a source index src_d(i[d]) per
//     dim (i - begin in mode "constant", clamped / mirrored / wrapped in the
//     other modes); a source outside data reads constant_value (0 without
//     it; 0 in the other modes, as the interpreter's padding). The pads and
//     axes are const inputs that the plan folds into the expression program,
//     so the kernel evaluates the program's index expression of each dim
//     once per output index of the box (never per element);
//   - PadGrad: dX[x] sums dY[o] over the output positions o whose source is
//     x, per dim a short list (one position in mode "constant" or inside the
//     data; the mirrored / clamped / wrapped copies near the border),
//     accumulated in double in the interpreter's order (o ascending, the
//     dims row-major) and rounded once.
// Both are copies along per-dim offset tables where every list has at most
// one entry (contiguous runs as one memcpy).
// Before these kernels the interpreter ran them (DenseNet-121's transition
// pools, issue 16).
//
//===----------------------------------------------------------------------===//

#include "FloatKernel.h"
#include "ParallelFor.h"
#include "tofu/runtime/ElementAccess.h"
#include "tofu/runtime/ExprFreeVariables.h"
#include "tofu/runtime/Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace tofu::runtime;
using tofu::plan::DType;
using tofu::plan::ExprNode;
using tofu::plan::ExprProgram;

namespace {

/// Row-major strides of a view's local box.
std::vector<int64_t> stridesOf(const TensorView &v) {
  std::vector<int64_t> s(v.shape.size(), 1);
  for (size_t d = v.shape.size(); d-- > 1;)
    s[d - 1] = s[d] * v.shape[d];
  return s;
}

/// Evaluates scalar expression `node` of `p` (no Access, Reduce or
/// Uniform) with its variables at `vals`; false for anything else.
bool evalScalar(const ExprProgram &p, int32_t node,
                const std::vector<double> &vals, double &out, int depth = 0) {
  using tofu::plan::BinaryOp;
  using tofu::plan::Function;
  if (node < 0 || size_t(node) >= p.nodes.size() || depth > 64)
    return false;
  const ExprNode &n = p.nodes[size_t(node)];
  std::vector<double> a(n.operands.size());
  if (n.kind != ExprNode::Kind::Const && n.kind != ExprNode::Kind::Var)
    for (size_t k = 0; k < n.operands.size(); ++k)
      if (!evalScalar(p, n.operands[k], vals, a[k], depth + 1))
        return false;
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
    if (a.size() != 1)
      return false;
    out = -a[0];
    return true;
  case ExprNode::Kind::Binary: {
    if (a.size() != 2)
      return false;
    const double x = a[0], y = a[1];
    switch (n.binary) {
    case BinaryOp::Add: out = x + y; return true;
    case BinaryOp::Sub: out = x - y; return true;
    case BinaryOp::Mul: out = x * y; return true;
    case BinaryOp::Div: out = x / y; return true;
    case BinaryOp::FloorDiv: out = std::floor(x / y); return true;
    case BinaryOp::Mod: out = x - std::floor(x / y) * y; return true;
    case BinaryOp::Eq: out = x == y; return true;
    case BinaryOp::Ne: out = x != y; return true;
    case BinaryOp::Lt: out = x < y; return true;
    case BinaryOp::Le: out = x <= y; return true;
    case BinaryOp::Gt: out = x > y; return true;
    case BinaryOp::Ge: out = x >= y; return true;
    case BinaryOp::And: out = x != 0 && y != 0; return true;
    case BinaryOp::Or: out = x != 0 || y != 0; return true;
    default: return false;
    }
  }
  case ExprNode::Kind::Call:
    switch (n.function) {
    case Function::Abs:
      if (a.size() != 1)
        return false;
      out = std::fabs(a[0]);
      return true;
    case Function::Floor:
      if (a.size() != 1)
        return false;
      out = std::floor(a[0]);
      return true;
    case Function::Ceil:
      if (a.size() != 1)
        return false;
      out = std::ceil(a[0]);
      return true;
    case Function::Max:
    case Function::Min:
      if (a.empty())
        return false;
      out = a[0];
      for (double v : a)
        out = n.function == Function::Max ? std::max(out, v) : std::min(out, v);
      return true;
    case Function::Select:
      if (a.size() != 3)
        return false;
      out = a[0] != 0 ? a[1] : a[2];
      return true;
    default:
      return false;
    }
  default:
    return false;
  }
}

/// Copies into `out`'s box: element i reads `src` at local offset
/// sum_d table[d][i_d] (local index i_d of dim d), or holds the `size`
/// bytes at `fill` when any table[d][i_d] is -1.
void gatherTables(const TensorView &out, const TensorView &src,
                  const std::vector<std::vector<int64_t>> &table,
                  const uint8_t *fill) {
  const size_t r = out.shape.size(), size = tofu::plan::dtypeSize(out.dtype);
  auto *to = static_cast<uint8_t *>(out.data);
  const auto *from = static_cast<const uint8_t *>(src.data);
  if (r == 0) {
    std::memcpy(to, from, size);
    return;
  }
  const int64_t inner = out.shape[r - 1];
  const std::vector<int64_t> &last = table[r - 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < r; ++d)
    rows *= out.shape[d];
  // Runs of the inner dim that read src contiguously: [begin, end) with
  // last[e] == last[begin] + (e - begin), or a run of fills.
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (int64_t e = 0; e < inner;) {
    int64_t f = e + 1;
    if (last[size_t(e)] < 0)
      while (f < inner && last[size_t(f)] < 0)
        ++f;
    else
      while (f < inner && last[size_t(f)] == last[size_t(e)] + (f - e))
        ++f;
    runs.push_back({e, f});
    e = f;
  }
  parallelFor(rows, double(inner) / 4, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(r - 1, 0);
    int64_t rem = begin;
    for (size_t d = r - 1; d-- > 0;) {
      idx[d] = rem % out.shape[d];
      rem /= out.shape[d];
    }
    for (int64_t row = begin; row < end; ++row) {
      int64_t base = 0;
      bool filled = false;
      for (size_t d = 0; d + 1 < r; ++d) {
        const int64_t t = table[d][size_t(idx[d])];
        filled |= t < 0;
        base += t;
      }
      uint8_t *dst = to + size_t(row * inner) * size;
      for (auto [b, e] : runs) {
        if (filled || last[size_t(b)] < 0) {
          for (int64_t k = b; k < e; ++k)
            std::memcpy(dst + size_t(k) * size, fill, size);
        } else {
          std::memcpy(dst + size_t(b) * size,
                      from + size_t(base + last[size_t(b)]) * size,
                      size_t(e - b) * size);
        }
      }
      for (size_t d = r - 1; d-- > 0;) {
        if (++idx[d] < out.shape[d])
          break;
        idx[d] = 0;
      }
    }
  });
}

/// Pad(data, pads, constant_value?, axes?) -> output (see the file comment).
std::string pad(const KernelArgs &args) {
  if (args.inputs.empty() || args.outputs.size() != 1)
    return "expects data[, pads, constant_value, axes] and 1 output";
  const TensorView &data = args.inputs[0], &out = args.outputs[0];
  if (!data.present())
    return "the data input is missing";
  if (data.dtype != out.dtype)
    return "the output's element type differs from the data's";
  const size_t r = data.globalShape.size();
  if (out.globalShape.size() != r)
    return "the output's rank differs from the data's";
  if (!args.programs || args.programs->size() != 1)
    return unsupportedConfiguration("no expression program to read the pads "
                                    "from");
  const ExprProgram &p = (*args.programs)[0];
  if (p.root < 0 || size_t(p.root) >= p.nodes.size() || p.outputVars.size() != r)
    return unsupportedConfiguration("an unexpected program");
  const std::string mode = args.stringAttr("mode", "constant");
  // The data access, and in mode "constant" the select around it:
  // select(all sources inside data, data[src...], constant_value or 0).
  const ExprNode &root = p.nodes[size_t(p.root)];
  int32_t access = p.root, cond = -1, other = -1;
  if (mode == "constant") {
    if (root.kind != ExprNode::Kind::Call ||
        root.function != tofu::plan::Function::Select ||
        root.operands.size() != 3)
      return unsupportedConfiguration("the program is not Pad's select");
    cond = root.operands[0];
    access = root.operands[1];
    other = root.operands[2];
  }
  const ExprNode &acc = p.nodes[size_t(access)];
  if (acc.kind != ExprNode::Kind::Access || acc.input != 0 ||
      acc.operands.size() != r)
    return unsupportedConfiguration("the program is not one access of data");
  // The fill: constant_value (an access of input 2) or a constant.
  const size_t size = tofu::plan::dtypeSize(data.dtype);
  std::vector<uint8_t> fill(size, 0);
  if (other >= 0) {
    const ExprNode &o = p.nodes[size_t(other)];
    if (o.kind == ExprNode::Kind::Const) {
      TensorView one = TensorView::whole(fill.data(), data.dtype, {});
      storeElement(one.data, one.dtype, 0, o.value);
    } else if (o.kind == ExprNode::Kind::Access && o.input == 2 &&
               o.operands.empty() && args.inputs.size() > 2 &&
               args.inputs[2].present()) {
      const TensorView &cv = args.inputs[2];
      if (cv.numElements() != 1)
        return unsupportedConfiguration("constant_value is not a scalar here");
      storeElement(fill.data(), data.dtype, 0,
                   loadElement(cv.data, cv.dtype, 0));
    } else {
      return unsupportedConfiguration("the padding value is not a constant "
                                      "or constant_value");
    }
  }
  // Each dim's source index must depend on that dim's output index alone.
  const std::vector<std::vector<int32_t>> free =
      tofu::plan::freeVariablesOfNodes(p);
  for (size_t d = 0; d < r; ++d)
    for (int32_t v : free[size_t(acc.operands[d])])
      if (v != p.outputVars[d])
        return unsupportedConfiguration("a source index mixes dims");
  std::vector<double> vals(p.varExtents.size(), 0.0);
  auto source = [&](size_t d, int64_t i, int64_t &s) {
    vals[size_t(p.outputVars[d])] = double(i);
    double x;
    if (!evalScalar(p, acc.operands[d], vals, x))
      return false;
    x = std::floor(x);
    s = x >= 0 && x < double(data.globalShape[d]) ? int64_t(x) : -1;
    return true;
  };
  // Per dim, the source index of each output index of the box (-1:
  // padding). A dim whose indices all read padding makes the whole box
  // padding, and data's box is then empty: only otherwise must it hold the
  // sources.
  std::vector<std::vector<int64_t>> table(r);
  bool allPadding = false;
  for (size_t d = 0; d < r; ++d) {
    table[d].resize(size_t(out.shape[d]));
    bool any = false;
    for (int64_t t = 0; t < out.shape[d]; ++t) {
      int64_t s;
      if (!source(d, out.lo[d] + t, s))
        return unsupportedConfiguration("a source index is not arithmetic");
      table[d][size_t(t)] = s;
      any |= s >= 0;
    }
    vals[size_t(p.outputVars[d])] = 0;
    allPadding |= !any;
  }
  // The local offsets in data.
  const std::vector<int64_t> ds = stridesOf(data);
  for (size_t d = 0; d < r && !allPadding; ++d)
    for (int64_t &s : table[d]) {
      if (s < 0)
        continue;
      if (s < data.lo[d] || s >= data.lo[d] + data.shape[d])
        return unsupportedConfiguration(
            "data's box [" + std::to_string(data.lo[d]) + ", +" +
            std::to_string(data.shape[d]) + ") of dim " + std::to_string(d) +
            " lacks index " + std::to_string(s) + " that the output reads");
      s = (s - data.lo[d]) * ds[d];
    }
  // Mode "constant": the select's condition must be "every source inside
  // data" (the spec's); checked per dim at the box's indices, the other
  // dims at an index whose source is inside.
  if (cond >= 0) {
    std::vector<int64_t> inside(r, -1);
    for (size_t d = 0; d < r; ++d) {
      for (int64_t i = 0; i < out.globalShape[d] && inside[d] < 0; ++i) {
        int64_t s;
        if (!source(d, i, s))
          return unsupportedConfiguration("a source index is not arithmetic");
        if (s >= 0)
          inside[d] = i;
      }
      vals[size_t(p.outputVars[d])] = 0;
    }
    bool someInside = true;
    for (int64_t i : inside)
      someInside &= i >= 0;
    for (size_t d = 0; d < r && someInside; ++d) {
      for (size_t e = 0; e < r; ++e)
        vals[size_t(p.outputVars[e])] = double(inside[e]);
      for (int64_t t = 0; t < out.shape[d]; ++t) {
        vals[size_t(p.outputVars[d])] = double(out.lo[d] + t);
        double c;
        if (!evalScalar(p, cond, vals, c))
          return unsupportedConfiguration("the condition is not arithmetic");
        if ((c != 0) != (table[d][size_t(t)] >= 0))
          return unsupportedConfiguration(
              "the select's condition is not Pad's");
      }
    }
    allPadding |= !someInside;
  }
  if (allPadding)
    for (auto &t : table)
      std::fill(t.begin(), t.end(), -1);
  gatherTables(out, data, table, fill.data());
  return "";
}

/// The source index of output position o of one dim of Pad in `mode`, with
/// `begin` and data extent `D` (PadGrad's spec).
int64_t padSource(const std::string &mode, bool padded, int64_t o,
                  int64_t begin, int64_t D) {
  auto mod = [](int64_t a, int64_t b) { return ((a % b) + b) % b; };
  if (!padded)
    return o - begin;
  if (mode == "edge")
    return std::min(std::max(o - begin, int64_t(0)), D - 1);
  if (mode == "wrap")
    return mod(o - begin, D);
  if (D == 1)
    return 0;
  return D - 1 - std::abs(mod(o - begin, 2 * D - 2) - (D - 1));
}

/// PadGrad(dY, X) -> dX (see the file comment).
template <typename T> std::string padGrad(const KernelArgs &args) {
  if (args.inputs.size() != 2 || args.outputs.size() != 1)
    return "expects 2 inputs (dY, X) and 1 output";
  const TensorView &dY = args.inputs[0], &dX = args.outputs[0];
  if (!dY.present())
    return "dY is missing";
  if (!isFloat<T>(dY) || dX.dtype != dY.dtype)
    return unsupportedConfiguration("dY and dX are not " + floatName<T>());
  const size_t r = dX.globalShape.size();
  const std::string mode = args.stringAttr("mode", "constant");
  const std::vector<int64_t> begins = args.intsAttr("begins", {});
  std::vector<int64_t> ends = args.intsAttr("ends", {});
  if (mode != "constant" && mode != "edge" && mode != "reflect" &&
      mode != "wrap")
    return "mode must be 'constant', 'edge', 'reflect' or 'wrap'";
  if (begins.size() != r || dY.globalShape.size() != r ||
      (mode != "constant" && ends.size() != r))
    return "begins (and ends) need one entry per dim";
  // Per dim and local index x of dX's box: the positions o of dY whose
  // source is x, as the spec enumerates them: o = x + begin + (j - jlo) *
  // st for j of the reduction range (the whole [0, jlo + jhi] unless the
  // instruction computes a partial sum over part of it), ascending.
  if (!args.reductions.empty() && args.reductions.size() != r)
    return unsupportedConfiguration(
        "reduction ranges do not match the dims (one per dim)");
  const std::vector<int64_t> ys = stridesOf(dY);
  std::vector<std::vector<std::vector<int64_t>>> lists(r);
  bool single = true, none = false;
  for (size_t d = 0; d < r; ++d) {
    const int64_t D = dX.globalShape[d], DY = dY.globalShape[d],
                  lo = dX.lo[d], n = dX.shape[d], b = begins[d];
    const bool padded = mode != "constant" && D > 0 && (b != 0 || ends[d] != 0);
    int64_t jlo = 0, jhi = 0, st = 1;
    if (padded) {
      const int64_t bp = std::max<int64_t>(b, 0),
                    ep = std::max<int64_t>(ends[d], 0);
      if (mode == "edge") {
        jlo = bp;
        jhi = ep;
      } else if (mode == "reflect") {
        jlo = std::min(2 * bp, bp + D - 1);
        jhi = std::min(2 * ep, ep + D - 1);
      } else {
        auto floorDiv = [](int64_t a, int64_t q) {
          return a / q - (a % q != 0 && ((a < 0) != (q < 0)));
        };
        jlo = floorDiv(D - 1 + b, D);
        jhi = floorDiv(D - 1 + ends[d], D);
        st = D;
      }
    }
    int64_t jFirst = 0, jEnd = std::max<int64_t>(jlo + jhi + 1, 0);
    if (!args.reductions.empty()) {
      if (args.reductions[d].extent != jEnd)
        return unsupportedConfiguration(
            "reduction ranges do not match PadGrad's sums");
      jFirst = args.reductions[d].lo;
      jEnd = args.reductions[d].hi;
    }
    lists[d].resize(size_t(n));
    bool any = false;
    for (int64_t t = 0; t < n; ++t) {
      const int64_t x = lo + t;
      for (int64_t j = jFirst; j < jEnd; ++j) {
        const int64_t o = x + b + (j - jlo) * st;
        if (o >= 0 && o < DY && padSource(mode, padded, o, b, D) == x)
          lists[d][size_t(t)].push_back(o);
      }
      single &= lists[d][size_t(t)].size() <= 1;
      any |= !lists[d][size_t(t)].empty();
    }
    none |= !any;
  }
  // A dim where no index of the box reads dY: dX's box is all zeros (and
  // dY's box empty); otherwise dY's box must hold every position.
  for (size_t d = 0; d < r && !none; ++d)
    for (const std::vector<int64_t> &l : lists[d])
      for (int64_t o : l)
        if (o < dY.lo[d] || o >= dY.lo[d] + dY.shape[d])
          return unsupportedConfiguration(
              "dY's box [" + std::to_string(dY.lo[d]) + ", +" +
              std::to_string(dY.shape[d]) + ") of dim " + std::to_string(d) +
              " lacks position " + std::to_string(o) + " that dX's box sums");
  if (none) {
    std::memset(dX.data, 0, size_t(dX.numElements()) * sizeof(T));
    return "";
  }
  if (single) { // a copy: one position or none (0) per index
    std::vector<std::vector<int64_t>> table(r);
    for (size_t d = 0; d < r; ++d)
      for (const std::vector<int64_t> &l : lists[d])
        table[d].push_back(l.empty() ? -1 : (l[0] - dY.lo[d]) * ys[d]);
    const T zero = 0;
    gatherTables(dX, dY, table, reinterpret_cast<const uint8_t *>(&zero));
    return "";
  }
  // Local dY offsets per dim, then per element of dX the sum over the
  // product of its dims' lists (row-major), in double.
  for (size_t d = 0; d < r; ++d)
    for (std::vector<int64_t> &l : lists[d])
      for (int64_t &o : l)
        o = (o - dY.lo[d]) * ys[d];
  const T *g = elements<T>(dY);
  T *out = elements<T>(dX);
  const int64_t total = dX.numElements();
  parallelFor(total, 4.0, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> x(r, 0), j(r, 0);
    int64_t rem = begin;
    for (size_t d = r; d-- > 0;) {
      x[d] = rem % dX.shape[d];
      rem /= dX.shape[d];
    }
    for (int64_t e = begin; e < end; ++e) {
      double sum = 0;
      bool empty = false;
      for (size_t d = 0; d < r; ++d)
        empty |= lists[d][size_t(x[d])].empty();
      if (!empty) {
        std::fill(j.begin(), j.end(), 0);
        for (;;) {
          int64_t off = 0;
          for (size_t d = 0; d < r; ++d)
            off += lists[d][size_t(x[d])][size_t(j[d])];
          sum += g[off];
          size_t d = r;
          while (d-- > 0) {
            if (++j[d] < int64_t(lists[d][size_t(x[d])].size()))
              break;
            j[d] = 0;
          }
          if (d == size_t(-1))
            break;
        }
      }
      out[e] = static_cast<T>(sum);
      for (size_t d = r; d-- > 0;) {
        if (++x[d] < dX.shape[d])
          break;
        x[d] = 0;
      }
    }
  });
  return "";
}

} // namespace

void tofu::runtime::registerPadKernels(void (*addKernel)(const char *,
                                                         KernelFn)) {
  addKernel("Pad", pad);
  addKernel("PadGrad", byFloatType<padGrad<float>, padGrad<double>>);
}
