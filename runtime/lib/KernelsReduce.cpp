//===- KernelsReduce.cpp - Sum reductions and their gradients -------------===//
//
// ReduceSum, ReduceMean (any axes, keepdims, noop_with_empty_axes) and
// Unbroadcast (the sum of a broadcast operand's gradient back to its shape),
// and the gradients ReduceSumGrad and ReduceMeanGrad, on local boxes.
//
// A reduction loops over its input's local box (LoopNest.h, loops merged
// where both the input and the output walk contiguously) and accumulates
// each output element in double in the input's row-major order: the
// interpreter's order (its reduction variables in dim order, the last
// fastest), so results equal the interpreter's. ReduceMean adds x / count
// per element, as its TDL spec's reducer body does. A box of the input
// that covers part of a reduced dim computes a partial sum
// (args.partialReduction): the plan's Reduce adds the shares. Work is split
// over threads along the outermost loop when it is a kept (output) dim.
//
// Before these kernels the interpreter ran all of them (only whole
// Unbroadcasts were native, with per-element index arithmetic): 26 ms per
// step in ReduceMeanGrad and 22 ms in ReduceMean on the ViT of issue 16.
//
//===----------------------------------------------------------------------===//

#include "FloatKernel.h"
#include "LoopNest.h"
#include "tofu/runtime/Kernels.h"

#include <algorithm>

using namespace tofu::runtime;

namespace {

/// How each dim of the reduced tensor maps to the output: outDim[d] is the
/// output dim of input dim d, or -1 where d is reduced (an output dim of
/// extent 1 may also stand for a reduced dim when keepdims).
struct Reduction {
  InlineVector<int, LoopNest::kInlineRank> outDim;
  InlineVector<uint8_t, LoopNest::kInlineRank> reduced; ///< per input dim: 1 where reduced
  double count = 1; // product of the reduced global extents
};

/// Sums `data`'s local box into `out` (the sum of data[...] / divisor over
/// the reduced dims). Returns "" or an error.
template <typename T>
std::string reduceSum(const KernelArgs &args, const TensorView &data,
                      const TensorView &out, const Reduction &red,
                      double divisor) {
  const size_t r = data.shape.size();
  if (!isFloat<T>(data) || out.dtype != FloatType<T>::dtype)
    return unsupportedConfiguration("operands are not " + floatName<T>());
  // The nest: one loop per input dim, over the output box on kept dims and
  // the input box on reduced ones. Operand 0: the input; 1: the double
  // accumulator laid out as the output box.
  const LoopNest::Dims ds = localStrides(data), os = localStrides(out);
  LoopNest nest;
  nest.stride.assign(2, LoopNest::Dims(r, 0));
  nest.offset.assign(2, 0);
  bool partial = false;
  for (size_t d = 0; d < r; ++d) {
    const int k = red.outDim[d];
    if (red.reduced[d]) {
      nest.extent.push_back(data.shape[d]);
      nest.stride[0][d] = ds[d];
      if (data.lo[d] != 0 || data.shape[d] != data.globalShape[d])
        partial = true;
      continue;
    }
    const size_t kk = size_t(k);
    if (out.lo[kk] < data.lo[d] ||
        out.lo[kk] + out.shape[kk] > data.lo[d] + data.shape[d])
      return unsupportedConfiguration(
          "the input's box lacks part of the output box");
    nest.extent.push_back(out.shape[kk]);
    nest.stride[0][d] = ds[d];
    nest.stride[1][d] = os[kk];
    nest.offset[0] += (out.lo[kk] - data.lo[d]) * ds[d];
  }
  if (partial && !args.partialReduction)
    return unsupportedConfiguration(
        "the input's box covers part of a reduced dim");
  nest.coalesce();
  const int64_t n = out.numElements();
  // The accumulator is reused by the calls on this thread: most reductions
  // of a training step are small and frequent (bias gradients per step of an
  // RNN), and a fresh buffer per call was a good part of their cost.
  thread_local std::vector<double> scratch;
  if (scratch.size() < size_t(n))
    scratch.resize(size_t(n));
  double *const accData = scratch.data();
  std::fill(accData, accData + n, 0.0);
  const T *x = elements<T>(data);
  const int64_t sx = nest.inner(0), sa = nest.inner(1);
  const double inv = divisor;
  auto row = [&](const int64_t *off, int64_t len) {
    const T *p = x + off[0];
    double *a = accData + off[1];
    if (sa == 0) { // a reduced inner loop: one running sum
      double s = *a;
      if (divisor == 1)
        for (int64_t e = 0; e < len; ++e)
          s += static_cast<double>(p[e * sx]);
      else
        for (int64_t e = 0; e < len; ++e)
          s += static_cast<double>(p[e * sx]) / inv;
      *a = s;
    } else if (sx == 1 && sa == 1) { // a kept inner loop: add a row
      if (divisor == 1)
        for (int64_t e = 0; e < len; ++e)
          a[e] += static_cast<double>(p[e]);
      else
        for (int64_t e = 0; e < len; ++e)
          a[e] += static_cast<double>(p[e]) / inv;
    } else {
      for (int64_t e = 0; e < len; ++e)
        a[e * sa] += static_cast<double>(p[e * sx]) / inv;
    }
  };
  if (nest.rank() > 1 && nest.stride[1][0] != 0 && nest.extent[0] > 1) {
    // Disjoint outputs per slice of the outermost (kept) loop.
    const double perSlice =
        2.0 * double(nest.numElements()) / double(nest.extent[0]);
    parallelFor(nest.extent[0], perSlice, [&](int64_t b, int64_t e) {
      LoopNest part = nest;
      part.extent[0] = e - b;
      part.offset[0] += b * nest.stride[0][0];
      part.offset[1] += b * nest.stride[1][0];
      forEachRowSerial(part, row);
    });
  } else {
    forEachRowSerial(nest, row);
  }
  T *y = elements<T>(out);
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<T>(accData[i]);
  return "";
}

/// The reduced axes of an op on a rank-r input: `axes` normalized, or all
/// dims when `axes` is empty (none with noop_with_empty_axes).
std::string reductionOf(const std::vector<int64_t> &axes, size_t r,
                        bool noopWhenEmpty, bool keepdims,
                        const std::vector<int64_t> &globalShape,
                        Reduction &red) {
  red.reduced.assign(r, axes.empty() && !noopWhenEmpty);
  for (int64_t a : axes) {
    if (a < -int64_t(r) || a >= int64_t(r))
      return "axis " + std::to_string(a) + " out of range";
    red.reduced[size_t(a < 0 ? a + int64_t(r) : a)] = true;
  }
  red.outDim.assign(r, -1);
  red.count = 1;
  int k = 0;
  for (size_t d = 0; d < r; ++d) {
    if (red.reduced[d]) {
      red.count *= double(globalShape[d]);
      if (keepdims)
        ++k;
      continue;
    }
    red.outDim[d] = k++;
  }
  return "";
}

/// The reduced dims of output 0's program: the dims of input 0's access
/// that are not output variables (each index must be a variable).
std::string axesFromProgram(const KernelArgs &args, size_t r,
                            std::vector<int64_t> &axes) {
  using tofu::plan::ExprNode;
  if (!args.programs || args.programs->empty())
    return unsupportedConfiguration("no program to read the axes from");
  const tofu::plan::ExprProgram &p = (*args.programs)[0];
  for (const ExprNode &n : p.nodes) {
    if (n.kind != ExprNode::Kind::Access || n.input != 0)
      continue;
    if (n.operands.size() != r)
      break;
    axes.clear();
    for (size_t d = 0; d < r; ++d) {
      const int32_t id = n.operands[d];
      if (id < 0 || size_t(id) >= p.nodes.size() ||
          p.nodes[size_t(id)].kind != ExprNode::Kind::Var)
        return unsupportedConfiguration("an index of the data is not a "
                                        "variable");
      const int32_t v = p.nodes[size_t(id)].var;
      if (std::find(p.outputVars.begin(), p.outputVars.end(), v) ==
          p.outputVars.end())
        axes.push_back(int64_t(d));
    }
    // No axis reduced (noop_with_empty_axes) reads as "all" below: only
    // a real reduction comes here with an empty list.
    if (axes.empty())
      return unsupportedConfiguration("no reduced dim in the program");
    return "";
  }
  return unsupportedConfiguration("no access of the data in the program");
}

/// ReduceSum (axes: input 1) and ReduceMean (axes: attribute).
template <typename T, bool Mean> std::string reduce(const KernelArgs &args) {
  if (args.inputs.empty() || args.outputs.size() != 1)
    return "expects the data input and 1 output";
  const TensorView &data = args.inputs[0], &out = args.outputs[0];
  if (!data.present())
    return data.numElements() == 0
               ? unsupportedConfiguration("an empty input (no buffer)")
               : "the data input is missing";
  std::vector<int64_t> axes;
  if (Mean) {
    axes = args.intsAttr("axes", {});
  } else if (args.inputs.size() > 1 && args.inputs[1].present()) {
    // The axes are a const input: the plan folds them into the program and
    // ships the input as an empty box; a whole box (a test) has them.
    const TensorView &a = args.inputs[1];
    int64_t whole = 1;
    for (int64_t e : a.globalShape)
      whole *= e;
    if (a.dtype != tofu::plan::DType::I64)
      return unsupportedConfiguration("axes are not int64");
    if (a.numElements() == whole && whole > 0) {
      const auto *p = static_cast<const int64_t *>(a.data);
      axes.assign(p, p + a.numElements());
    } else if (whole > 0) {
      if (std::string err = axesFromProgram(args, data.shape.size(), axes);
          !err.empty())
        return err;
    }
  }
  const bool keepdims = args.intAttr("keepdims", 1) != 0;
  Reduction red;
  if (std::string err =
          reductionOf(axes, data.shape.size(),
                      args.intAttr("noop_with_empty_axes", 0) != 0, keepdims,
                      data.globalShape, red);
      !err.empty())
    return err;
  size_t outRank = 0;
  for (size_t d = 0; d < red.reduced.size(); ++d)
    outRank += keepdims || !red.reduced[d];
  if (out.shape.size() != outRank)
    return "the output's rank differs from the reduction's";
  return reduceSum<T>(args, data, out, red, Mean ? red.count : 1.0);
}

/// Unbroadcast(dY, X) -> dX: dY summed over its extra leading dims and the
/// dims where X's global extent is 1 (and dY's is not).
template <typename T> std::string unbroadcast(const KernelArgs &args) {
  if (args.inputs.size() != 2 || args.outputs.size() != 1)
    return "expects 2 inputs and 1 output";
  const TensorView &dY = args.inputs[0], &dX = args.outputs[0];
  if (!dY.present())
    return dY.numElements() == 0
               ? unsupportedConfiguration("an empty dY (no buffer)")
               : "dY is missing";
  const size_t r = dY.shape.size(), q = dX.shape.size();
  if (q > r)
    return "dX has a higher rank than dY";
  Reduction red;
  red.outDim.assign(r, -1);
  red.reduced.assign(r, true);
  for (size_t d = r - q; d < r; ++d) {
    const size_t o = d - (r - q);
    if (dX.globalShape[o] == dY.globalShape[d]) {
      red.reduced[d] = false;
      red.outDim[d] = int(o);
    } else if (dX.globalShape[o] != 1) {
      return "dim " + std::to_string(d) + " of dY (" +
             std::to_string(dY.globalShape[d]) + ") does not broadcast to " +
             std::to_string(dX.globalShape[o]);
    }
  }
  return reduceSum<T>(args, dY, dX, red, 1.0);
}

/// ReduceSumGrad / ReduceMeanGrad(dY, X) -> dX: dY broadcast back over the
/// reduced dims (divided by the count for the mean, in double).
template <typename T, bool Mean>
std::string reduceGrad(const KernelArgs &args) {
  if (args.inputs.size() != 2 || args.outputs.size() != 1)
    return "expects 2 inputs and 1 output";
  const TensorView &dY = args.inputs[0], &dX = args.outputs[0];
  if (!dY.present())
    return "dY is missing";
  if (!isFloat<T>(dY) || dX.dtype != FloatType<T>::dtype)
    return unsupportedConfiguration("operands are not " + floatName<T>());
  const bool keepdims = args.intAttr("keepdims", 1) != 0;
  Reduction red;
  if (std::string err = reductionOf(
          args.intsAttr("axes", {}), dX.shape.size(),
          args.intAttr("noop_with_empty_axes", 0) != 0, keepdims,
          dX.globalShape, red);
      !err.empty())
    return err;
  // dX dim d reads dY dim outDim[d]; a reduced dim reads index 0 of dY's
  // extent-1 dim (keepdims) or nothing.
  std::vector<int> dimOf(dX.shape.size(), -1);
  int k = 0;
  for (size_t d = 0; d < dX.shape.size(); ++d) {
    if (red.reduced[d]) {
      if (keepdims)
        ++k;
      continue;
    }
    dimOf[d] = k++;
  }
  if (size_t(k) != dY.shape.size())
    return "dY's rank differs from the reduction's";
  LoopNest nest = outputNest(dX);
  if (std::string err = addOperand(nest, dX, dY, dimOf); !err.empty())
    return "dY: " + err;
  nest.coalesce();
  const double count = Mean ? red.count : 1.0;
  T *out = elements<T>(dX);
  const T *g = elements<T>(dY);
  const int64_t sg = nest.inner(1), so = nest.inner(0);
  forEachRow(nest, 1.0, [&](const int64_t *off, int64_t n) {
    T *o = out + off[0];
    const T *p = g + off[1];
    if (so == 1 && sg == 0) {
      const T v = Mean ? static_cast<T>(double(*p) / count) : *p;
      std::fill(o, o + n, v);
    } else if (so == 1 && sg == 1) {
      if (Mean)
        for (int64_t e = 0; e < n; ++e)
          o[e] = static_cast<T>(double(p[e]) / count);
      else
        std::copy(p, p + n, o);
    } else {
      for (int64_t e = 0; e < n; ++e)
        o[e * so] = Mean ? static_cast<T>(double(p[e * sg]) / count)
                         : p[e * sg];
    }
  });
  return "";
}

} // namespace

void tofu::runtime::registerReduceKernels(void (*addKernel)(const char *,
                                                            KernelFn)) {
  addKernel("ReduceSum",
            byFloatType<reduce<float, false>, reduce<double, false>>);
  addKernel("ReduceMean",
            byFloatType<reduce<float, true>, reduce<double, true>>);
  addKernel("Unbroadcast",
            byFloatType<unbroadcast<float>, unbroadcast<double>>);
  addKernel("ReduceSumGrad",
            byFloatType<reduceGrad<float, false>, reduceGrad<double, false>>);
  addKernel("ReduceMeanGrad",
            byFloatType<reduceGrad<float, true>, reduceGrad<double, true>>);
}
