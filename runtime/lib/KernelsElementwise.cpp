//===- KernelsElementwise.cpp - Element-wise CPU kernels ------------------===//
//
// Relu, ReluGrad, Scale, SGDUpdate, Ones (same-shaped operands, any rank) and
// Add, Sub, Mul, Div (ONNX multidirectional broadcasting decided from the
// global shapes), Unbroadcast (their gradient's sum back to an operand's
// shape), and Neg, Exp, Log, Sqrt, Tanh, Erf, Sigmoid and the gradients
// TanhGrad, SigmoidGrad, ErfGrad, SqrtGrad (one box, computed in double as
// the interpreter does).
// Generic over float and double (FloatKernel.h).
//
//===----------------------------------------------------------------------===//

#include "Broadcast.h"
#include "FloatKernel.h"
#include "tofu/runtime/Kernels.h"

#include <cmath>

using namespace tofu::runtime;
using tofu::plan::DType;

namespace {

/// Checks arity and that every operand is a present T tensor with the
/// same number of elements as the first output.
template <typename T>
std::string checkSameShape(const KernelArgs &args, size_t numInputs) {
  if (args.inputs.size() != numInputs || args.outputs.size() != 1)
    return "expects " + std::to_string(numInputs) + " inputs and 1 output, got " +
           std::to_string(args.inputs.size()) + " and " +
           std::to_string(args.outputs.size());
  int64_t n = args.outputs[0].numElements();
  if (args.outputs[0].dtype != FloatType<T>::dtype)
    return "output must be " + floatName<T>();
  for (size_t i = 0; i < numInputs; ++i) {
    const TensorView &in = args.inputs[i];
    if (!in.present())
      return "input " + std::to_string(i) + " is missing";
    if (in.dtype != FloatType<T>::dtype)
      return "input " + std::to_string(i) + " must be " + floatName<T>();
    if (in.numElements() != n)
      return "input " + std::to_string(i) + " has " +
             std::to_string(in.numElements()) +
             " local elements but the output has " + std::to_string(n);
  }
  return "";
}

template <typename T> std::string relu(const KernelArgs &args) {
  if (auto err = checkSameShape<T>(args, 1); !err.empty())
    return err;
  const T *x = elements<T>(args.inputs[0]);
  T *y = elements<T>(args.outputs[0]);
  for (int64_t i = 0, n = args.outputs[0].numElements(); i < n; ++i)
    y[i] = x[i] < T(0) ? T(0) : x[i]; // NaN stays NaN, as in ONNX
  return "";
}

template <typename T> std::string reluGrad(const KernelArgs &args) {
  if (auto err = checkSameShape<T>(args, 2); !err.empty())
    return err;
  const T *dy = elements<T>(args.inputs[0]);
  const T *x = elements<T>(args.inputs[1]);
  T *dx = elements<T>(args.outputs[0]);
  for (int64_t i = 0, n = args.outputs[0].numElements(); i < n; ++i)
    dx[i] = x[i] > T(0) ? dy[i] : T(0);
  return "";
}

template <typename T> std::string scale(const KernelArgs &args) {
  if (auto err = checkSameShape<T>(args, 1); !err.empty())
    return err;
  T alpha = static_cast<T>(args.floatAttr("alpha", 1.0));
  const T *x = elements<T>(args.inputs[0]);
  T *y = elements<T>(args.outputs[0]);
  for (int64_t i = 0, n = args.outputs[0].numElements(); i < n; ++i)
    y[i] = alpha * x[i];
  return "";
}

template <typename T> std::string sgdUpdate(const KernelArgs &args) {
  if (auto err = checkSameShape<T>(args, 2); !err.empty())
    return err;
  T lr = static_cast<T>(args.floatAttr("lr", 0.1));
  T decay = static_cast<T>(args.floatAttr("norm_coefficient", 0));
  const T *w = elements<T>(args.inputs[0]);
  const T *g = elements<T>(args.inputs[1]);
  T *out = elements<T>(args.outputs[0]);
  for (int64_t i = 0, n = args.outputs[0].numElements(); i < n; ++i)
    out[i] = w[i] - lr * (g[i] + decay * w[i]);
  return "";
}

template <typename T> std::string ones(const KernelArgs &args) {
  if (args.inputs.size() != 1 || args.outputs.size() != 1)
    return "expects 1 input and 1 output";
  const TensorView &y = args.outputs[0];
  if (y.dtype != FloatType<T>::dtype)
    return "output must be " + floatName<T>();
  // X only gives the shape: its values are not read, and a share of the
  // output needs none of them (an empty box).
  T *p = elements<T>(y);
  for (int64_t i = 0, n = y.numElements(); i < n; ++i)
    p[i] = T(1);
  return "";
}

/// Y = F(X), X and Y of one box, computed in double as the interpreter does
/// (the same <cmath> call) and rounded once to T.
template <typename T, double (*F)(double)>
std::string unary(const KernelArgs &args) {
  if (auto err = checkSameShape<T>(args, 1); !err.empty())
    return err;
  if (!sameBox(args.outputs[0], args.inputs[0]))
    return unsupportedConfiguration("X's box differs from Y's");
  const T *x = elements<T>(args.inputs[0]);
  T *y = elements<T>(args.outputs[0]);
  for (int64_t i = 0, n = args.outputs[0].numElements(); i < n; ++i)
    y[i] = static_cast<T>(F(static_cast<double>(x[i])));
  return "";
}

/// dX = F(dY, Z) for a gradient of the same box as dY and Z (Z is the op's
/// input or output, as its TDL spec says), in double in the spec's order.
template <typename T, double (*F)(double, double)>
std::string unaryGrad(const KernelArgs &args) {
  if (auto err = checkSameShape<T>(args, 2); !err.empty())
    return err;
  if (!sameBox(args.outputs[0], args.inputs[0]) ||
      !sameBox(args.outputs[0], args.inputs[1]))
    return unsupportedConfiguration("an input's box differs from dX's");
  const T *dy = elements<T>(args.inputs[0]);
  const T *z = elements<T>(args.inputs[1]);
  T *dx = elements<T>(args.outputs[0]);
  for (int64_t i = 0, n = args.outputs[0].numElements(); i < n; ++i)
    dx[i] = static_cast<T>(
        F(static_cast<double>(dy[i]), static_cast<double>(z[i])));
  return "";
}

// The functions of the TDL specs (tdl-specs/elementwise.tdl), written as
// the interpreter evaluates them (runtime/lib/ExprInterpreter.cpp).
double negOf(double a) { return -a; }
double expOf(double a) { return std::exp(a); }
double logOf(double a) { return std::log(a); }
double sqrtOf(double a) { return std::sqrt(a); }
double tanhOf(double a) { return std::tanh(a); }
double erfOf(double a) { return std::erf(a); }
double sigmoidOf(double a) { return 1 / (1 + std::exp(-a)); }
/// dY * (1 - Y * Y)
double tanhGradOf(double dy, double y) { return dy * (1 - y * y); }
/// dY * Y * (1 - Y)
double sigmoidGradOf(double dy, double y) { return dy * y * (1 - y); }
/// dY * 1.1283791670955126 * exp(-X * X)
double erfGradOf(double dy, double x) {
  return dy * 1.1283791670955126 * std::exp(-x * x);
}
/// 0.5 * dY / Y
double sqrtGradOf(double dy, double y) { return 0.5 * dy / y; }

/// Add, Sub, Mul, Div: `Op` on two operands with ONNX broadcasting. Each
/// is computed in T; for these four operations on floats that is the value
/// the interpreter gets by computing in double and rounding once to T.
struct AddOp {
  template <typename T> T operator()(T a, T b) const { return a + b; }
};
struct SubOp {
  template <typename T> T operator()(T a, T b) const { return a - b; }
};
struct MulOp {
  template <typename T> T operator()(T a, T b) const { return a * b; }
};
struct DivOp {
  template <typename T> T operator()(T a, T b) const { return a / b; }
};

template <typename T, typename Op> std::string binary(const KernelArgs &args) {
  if (args.inputs.size() != 2 || args.outputs.size() != 1)
    return "expects 2 inputs and 1 output";
  const TensorView &c = args.outputs[0];
  const TensorView &a = args.inputs[0], &b = args.inputs[1];
  if (!a.present() || !b.present())
    return "an input is missing";
  if (!isFloat<T>(a) || !isFloat<T>(b) || c.dtype != FloatType<T>::dtype)
    return "operands must be " + floatName<T>();
  T *out = elements<T>(c);
  const T *pa = elements<T>(a), *pb = elements<T>(b);
  int64_t n = c.numElements();
  if (sameBox(c, a) && sameBox(c, b)) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = Op()(pa[i], pb[i]);
    return "";
  }
  std::vector<int64_t> oa, ob;
  if (auto err = broadcastOffsets(c, a, oa); !err.empty())
    return "input A: " + err;
  if (auto err = broadcastOffsets(c, b, ob); !err.empty())
    return "input B: " + err;
  for (int64_t i = 0; i < n; ++i)
    out[i] = Op()(pa[oa[i]], pb[ob[i]]);
  return "";
}

/// Unbroadcast(dY, X) -> dX: the sum of dY's elements that broadcast onto
/// each element of dX (dY's extra leading dims and its dims where X has
/// extent 1), accumulated in double in dY's row-major order, which is the
/// interpreter's order (the reduction variables in dim order, the last
/// fastest), then rounded once. Takes whole reductions only: a box of dY
/// that does not span every reduced dim (a partial sum) goes to the
/// interpreter.
template <typename T> std::string unbroadcast(const KernelArgs &args) {
  if (args.inputs.size() != 2 || args.outputs.size() != 1)
    return "expects 2 inputs and 1 output";
  const TensorView &dY = args.inputs[0], &dX = args.outputs[0];
  if (!isFloat<T>(dY) || dX.dtype != FloatType<T>::dtype)
    return "dY and dX must be " + floatName<T>();
  const size_t r = dY.shape.size(), q = dX.shape.size();
  if (q > r)
    return "dX has a higher rank than dY";
  if (args.partialReduction)
    return unsupportedConfiguration("a partial sum over a split dim of dY");
  // Per dY dim: its local stride in dX, or 0 where it is summed.
  std::vector<int64_t> toOut(r, 0);
  int64_t outStride = 1;
  for (size_t d = r; d-- > 0;) {
    const bool leading = d < r - q;
    const size_t o = leading ? 0 : d - (r - q);
    const bool kept = !leading && dX.globalShape[o] == dY.globalShape[d];
    if (!leading && !kept && dX.globalShape[o] != 1)
      return "dim " + std::to_string(d) + " of dY (" +
             std::to_string(dY.globalShape[d]) + ") does not broadcast to " +
             std::to_string(dX.globalShape[o]);
    if (kept) {
      if (dY.lo[d] != dX.lo[o] || dY.shape[d] != dX.shape[o])
        return unsupportedConfiguration(
            "dY's box differs from dX's along a kept dim");
      toOut[d] = outStride;
    } else if (dY.lo[d] != 0 || dY.shape[d] != dY.globalShape[d]) {
      return unsupportedConfiguration("dY's box does not span a summed dim");
    }
    if (!leading)
      outStride *= dX.shape[o];
  }
  const int64_t n = dX.numElements(), m = dY.numElements();
  std::vector<double> acc(static_cast<size_t>(n), 0.0);
  const T *g = elements<T>(dY);
  std::vector<int64_t> idx(r, 0);
  int64_t at = 0; // dX element of dY element e
  for (int64_t e = 0; e < m; ++e) {
    acc[static_cast<size_t>(at)] += static_cast<double>(g[e]);
    for (size_t d = r; d-- > 0;) {
      at += toOut[d];
      if (++idx[d] < dY.shape[d])
        break;
      at -= toOut[d] * dY.shape[d];
      idx[d] = 0;
    }
  }
  T *out = elements<T>(dX);
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<T>(acc[static_cast<size_t>(i)]);
  return "";
}

} // namespace

void tofu::runtime::registerElementwiseKernels(void (*addKernel)(const char *,
                                                                 KernelFn)) {
  addKernel("Relu", byFloatType<relu<float>, relu<double>>);
  addKernel("ReluGrad", byFloatType<reluGrad<float>, reluGrad<double>>);
  addKernel("Scale", byFloatType<scale<float>, scale<double>>);
  addKernel("SGDUpdate", byFloatType<sgdUpdate<float>, sgdUpdate<double>>);
  addKernel("Ones", byFloatType<ones<float>, ones<double>>);
  addKernel("Add", byFloatType<binary<float, AddOp>, binary<double, AddOp>>);
  addKernel("Sub", byFloatType<binary<float, SubOp>, binary<double, SubOp>>);
  addKernel("Mul", byFloatType<binary<float, MulOp>, binary<double, MulOp>>);
  addKernel("Div", byFloatType<binary<float, DivOp>, binary<double, DivOp>>);
  addKernel("Neg", byFloatType<unary<float, negOf>, unary<double, negOf>>);
  addKernel("Exp", byFloatType<unary<float, expOf>, unary<double, expOf>>);
  addKernel("Log", byFloatType<unary<float, logOf>, unary<double, logOf>>);
  addKernel("Sqrt", byFloatType<unary<float, sqrtOf>, unary<double, sqrtOf>>);
  addKernel("Tanh", byFloatType<unary<float, tanhOf>, unary<double, tanhOf>>);
  addKernel("Erf", byFloatType<unary<float, erfOf>, unary<double, erfOf>>);
  addKernel("Sigmoid",
            byFloatType<unary<float, sigmoidOf>, unary<double, sigmoidOf>>);
  addKernel("TanhGrad", byFloatType<unaryGrad<float, tanhGradOf>,
                                    unaryGrad<double, tanhGradOf>>);
  addKernel("SigmoidGrad", byFloatType<unaryGrad<float, sigmoidGradOf>,
                                       unaryGrad<double, sigmoidGradOf>>);
  addKernel("ErfGrad", byFloatType<unaryGrad<float, erfGradOf>,
                                   unaryGrad<double, erfGradOf>>);
  addKernel("SqrtGrad", byFloatType<unaryGrad<float, sqrtGradOf>,
                                    unaryGrad<double, sqrtGradOf>>);
  addKernel("Unbroadcast",
            byFloatType<unbroadcast<float>, unbroadcast<double>>);
}
