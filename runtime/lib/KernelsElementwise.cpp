//===- KernelsElementwise.cpp - Element-wise CPU kernels ------------------===//
//
// Relu, ReluGrad, Scale, SGDUpdate, Ones (same-shaped operands, any rank);
// Add, Sub, Mul, Div, Pow, Expand and the gradients DivGradB, PowGradBase,
// PowGradExponent (ONNX multidirectional broadcasting decided from the
// global shapes); Neg, Exp, Log, Sqrt, Tanh, Erf, Sigmoid and the gradients
// TanhGrad, SigmoidGrad, ErfGrad, SqrtGrad; Gelu and GeluGrad (both forms;
// one box, computed in double as the interpreter does, except float32 Gelu
// and GeluGrad "none", in float32 arithmetic as PyTorch's, with the
// vectorizable normal CDF of VectorizableMath.h). Unbroadcast is in KernelsReduce.cpp. The loops over
// same-shaped operands are split over the pool's threads (ParallelFor.h);
// each element is computed as before, so the results do not change.
// The broadcasting ops run on a coalesced loop nest (LoopNest.h): one
// contiguous row per inner loop, each input either contiguous or a scalar
// along it (a loop per pattern, which the compiler vectorizes), rows spread
// over threads. Before, each output element looked up its inputs through a
// per-element offset table, and Pow, DivGradB, PowGradBase, Expand ran on
// the interpreter (ViT, issue 16: PowGradBase 108 ms, DivGradB 80 ms, Pow
// 48 ms per step).
// Generic over float and double (FloatKernel.h).
//
//===----------------------------------------------------------------------===//

#include "Broadcast.h"
#include "FloatKernel.h"
#include "LoopNest.h"
#include "ParallelFor.h"
#include "VectorizableMath.h"
#include "tofu/runtime/Kernels.h"

#include <array>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

using namespace tofu::runtime;
using tofu::plan::DType;

namespace {

/// parallelFor's rough cost per element of the unary functions and their
/// gradients (a <cmath> call in double: exp, erf, tanh, ...), against 1 for
/// an add: such loops are worth the pool's threads from ~16k elements.
constexpr double kTranscendentalWork = 16.0;

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
  parallelFor(args.outputs[0].numElements(), 1.0, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      y[i] = x[i] < T(0) ? T(0) : x[i]; // NaN stays NaN, as in ONNX
  });
  return "";
}

template <typename T> std::string reluGrad(const KernelArgs &args) {
  if (auto err = checkSameShape<T>(args, 2); !err.empty())
    return err;
  const T *dy = elements<T>(args.inputs[0]);
  // Relu's output Y (tdl-specs/elementwise.tdl): > 0 exactly where its
  // input is.
  const T *y = elements<T>(args.inputs[1]);
  T *dx = elements<T>(args.outputs[0]);
  // dY where Y > 0, else +0, as a bit mask (the select compiled to an
  // unpredictable branch: 5x Relu's time on a 1M-element tensor). The same
  // values, NaN in dY included.
  // The pointers are copied into restrict locals: the byte copies may alias
  // anything, so through the captured references the compiler reloaded
  // every pointer at each element and did not vectorize (10x Relu's time).
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  parallelFor(args.outputs[0].numElements(), 1.0, [&](int64_t b, int64_t e) {
    const T *__restrict dyLocal = dy;
    const T *__restrict yLocal = y;
    T *__restrict dxLocal = dx;
    for (int64_t i = b; i < e; ++i) {
      Bits g;
      std::memcpy(&g, &dyLocal[i], sizeof g);
      g &= Bits(0) - Bits(yLocal[i] > T(0));
      std::memcpy(&dxLocal[i], &g, sizeof g);
    }
  });
  return "";
}

template <typename T> std::string scale(const KernelArgs &args) {
  if (auto err = checkSameShape<T>(args, 1); !err.empty())
    return err;
  T alpha = static_cast<T>(args.floatAttr("alpha", 1.0));
  const T *x = elements<T>(args.inputs[0]);
  T *y = elements<T>(args.outputs[0]);
  parallelFor(args.outputs[0].numElements(), 1.0, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      y[i] = alpha * x[i];
  });
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
  parallelFor(args.outputs[0].numElements(), 1.0, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      out[i] = w[i] - lr * (g[i] + decay * w[i]);
  });
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

/// Zeros(X) -> Y: zeros of X's shape and element type (a gradient that does
/// not reach the loss, e.g. an unused gate's Split output); all-zero bits are
/// 0 in every plan element type. X's values are not read.
std::string zeros(const KernelArgs &args) {
  if (args.inputs.size() != 1 || args.outputs.size() != 1)
    return "expects 1 input and 1 output";
  const TensorView &y = args.outputs[0];
  if (y.numElements() > 0)
    std::memset(y.data, 0,
                size_t(y.numElements()) * tofu::plan::dtypeSize(y.dtype));
  return "";
}

/// Y = F(X), X and Y of one box, computed in C (`unary`: in double as the
/// interpreter does, the same <cmath> call) and rounded once to T.
template <typename T, typename C, C (*F)(C)>
std::string unaryIn(const KernelArgs &args) {
  if (auto err = checkSameShape<T>(args, 1); !err.empty())
    return err;
  if (!sameBox(args.outputs[0], args.inputs[0]))
    return unsupportedConfiguration("X's box differs from Y's");
  const T *x = elements<T>(args.inputs[0]);
  T *y = elements<T>(args.outputs[0]);
  parallelFor(args.outputs[0].numElements(), kTranscendentalWork,
              [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i)
                  y[i] = static_cast<T>(F(static_cast<C>(x[i])));
              });
  return "";
}
template <typename T, double (*F)(double)>
std::string unary(const KernelArgs &args) {
  return unaryIn<T, double, F>(args);
}

/// dX = F(dY, Z) for a gradient of the same box as dY and Z (Z is the op's
/// input or output, as its TDL spec says), computed in C (`unaryGrad`: in
/// double) in the spec's order.
template <typename T, typename C, C (*F)(C, C)>
std::string unaryGradIn(const KernelArgs &args) {
  if (auto err = checkSameShape<T>(args, 2); !err.empty())
    return err;
  if (!sameBox(args.outputs[0], args.inputs[0]) ||
      !sameBox(args.outputs[0], args.inputs[1]))
    return unsupportedConfiguration("an input's box differs from dX's");
  const T *dy = elements<T>(args.inputs[0]);
  const T *z = elements<T>(args.inputs[1]);
  T *dx = elements<T>(args.outputs[0]);
  parallelFor(args.outputs[0].numElements(), kTranscendentalWork,
              [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i)
                  dx[i] = static_cast<T>(
                      F(static_cast<C>(dy[i]), static_cast<C>(z[i])));
              });
  return "";
}
template <typename T, double (*F)(double, double)>
std::string unaryGrad(const KernelArgs &args) {
  return unaryGradIn<T, double, F>(args);
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
/// Gelu, approximate "none": 0.5 * X * (1 + erf(X * 1/sqrt(2))).
double geluErfOf(double x) {
  return 0.5 * x * (1 + std::erf(x * 0.7071067811865476));
}
/// Gelu, approximate "tanh": 0.5 * X * (1 + tanh(sqrt(2/pi) * (X +
/// 0.044715 X^3))).
double geluTanhOf(double x) {
  return 0.5 * x *
         (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
/// GeluGrad, approximate "none": dY * (0.5 * (1 + erf(X / sqrt(2))) +
/// X * 1/sqrt(2 pi) * exp(-0.5 * X * X)).
double geluErfGradOf(double dy, double x) {
  return dy * (0.5 * (1 + std::erf(x * 0.7071067811865476)) +
               x * 0.3989422804014327 * std::exp(-0.5 * x * x));
}
/// GeluGrad, approximate "tanh", in the spec's order.
double geluTanhGradOf(double dy, double x) {
  const double t =
      std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
  return dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 *
                                   (1 + 0.134145 * x * x));
}

/// Gelu and GeluGrad, approximate "none", in float32 arithmetic, as
/// PyTorch computes its float32 GELU: x Phi(x) and dy (Phi(x) + x phi(x)),
/// with Phi and e^(-x^2 / 2) from VectorizableMath.h, so that the loops
/// vectorize (libm's erff and expf per element took 2.8 + 7.8 ms per ViT
/// step, bench/cpu_step.md). The left tail is computed as erfc, not as 1 +
/// erf, so it keeps its relative accuracy where PyTorch's formula cancels
/// to 0. KernelConformance checks them against the TDL reference (computed
/// in double) at its float32 tolerance; KernelsTest.GeluFloat32 bounds the
/// error over the whole range.
float geluErfOfF(float x) {
  float gauss;
  return x * vectorizableNormalCdf(x, gauss);
}
float geluErfGradOfF(float dy, float x) {
  float gauss;
  const float cdf = vectorizableNormalCdf(x, gauss);
  return dy * (cdf + x * 0.398942280f * gauss);
}

/// Tanh and Sigmoid in float32 arithmetic (VectorizableMath.h), so that
/// their loops vectorize: libm's double tanh per element took 21-24 ns an
/// element in an RNN's step, 40 Tanhs of [32, 256] a step
/// (bench/simulate.md, session 37). Float64 keeps the double forms above.
float tanhOfF(float x) { return vectorizableTanh(x); }
float sigmoidOfF(float x) { return vectorizableSigmoid(x); }

/// Gelu and GeluGrad: the form the `approximate` attribute names.
template <typename T> std::string gelu(const KernelArgs &args) {
  const std::string form = args.stringAttr("approximate", "none");
  if (form == "none" && std::is_same_v<T, float>)
    return unaryIn<float, float, geluErfOfF>(args);
  if (form == "none")
    return unary<T, geluErfOf>(args);
  if (form == "tanh")
    return unary<T, geluTanhOf>(args);
  return "approximate must be 'none' or 'tanh', not '" + form + "'";
}
template <typename T> std::string geluGrad(const KernelArgs &args) {
  const std::string form = args.stringAttr("approximate", "none");
  if (form == "none" && std::is_same_v<T, float>)
    return unaryGradIn<float, float, geluErfGradOfF>(args);
  if (form == "none")
    return unaryGrad<T, geluErfGradOf>(args);
  if (form == "tanh")
    return unaryGrad<T, geluTanhGradOf>(args);
  return "approximate must be 'none' or 'tanh', not '" + form + "'";
}

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

/// The multi-input element-wise ops of the TDL specs, written as the
/// interpreter evaluates them: in double, rounded once to T.
struct DivGradBOp { // -dC * C / B
  static double apply(double dc, double c, double b) { return -dc * c / b; }
};
struct PowOp { // pow(A, B); B == 2 (LayerNorm's square) is exact as A * A
  static double apply(double a, double b) {
    return b == 2 ? a * a : std::pow(a, b);
  }
};
struct PowGradBaseOp { // dC * select(B == 0, 0, B * pow(A, B - 1))
  static double apply(double dc, double a, double b) {
    if (b == 0)
      return dc * 0;
    return dc * (b * (b == 2 ? a : std::pow(a, b - 1)));
  }
};
struct PowGradExponentOp { // dC * select(A == 0 && B >= 0, 0, C * log(A))
  static double apply(double dc, double a, double b, double c) {
    return dc * ((a == 0 && b >= 0) ? 0.0 : c * std::log(a));
  }
};

/// Computes one output element from its N input elements: T arithmetic for
/// the four basic ops (exactly the interpreter's double result rounded
/// once), double for the others.
template <typename T, typename Op, size_t N> struct Apply;
struct CopyOp {}; // Expand: the input broadcast to the output's shape
template <typename T, typename Op> struct Apply<T, Op, 1> {
  static T at(T a) { return a; }
};
template <typename T, typename Op> struct Apply<T, Op, 2> {
  static T at(T a, T b) {
    if constexpr (std::is_same_v<Op, AddOp> || std::is_same_v<Op, SubOp> ||
                  std::is_same_v<Op, MulOp> || std::is_same_v<Op, DivOp>)
      return Op()(a, b);
    else
      return static_cast<T>(Op::apply(double(a), double(b)));
  }
};
template <typename T, typename Op> struct Apply<T, Op, 3> {
  static T at(T a, T b, T c) {
    return static_cast<T>(Op::apply(double(a), double(b), double(c)));
  }
};
template <typename T, typename Op> struct Apply<T, Op, 4> {
  static T at(T a, T b, T c, T d) {
    return static_cast<T>(
        Op::apply(double(a), double(b), double(c), double(d)));
  }
};

/// One row of an N-input map, input j contiguous or (bit j of Mask) a
/// scalar repeated along the row: a plain loop the compiler vectorizes.
template <typename T, typename Op, size_t N, unsigned Mask, size_t... I>
void mapRowMasked(T *out, const T *const *in, int64_t n,
                  std::index_sequence<I...>) {
  const T *p[N] = {in[I]...};
  const T s[N] = {in[I][0]...};
  for (int64_t e = 0; e < n; ++e)
    out[e] = Apply<T, Op, N>::at(((Mask >> I) & 1u) ? s[I] : p[I][e]...);
}
template <typename T, typename Op, size_t N, unsigned Mask>
void mapRow(T *out, const T *const *in, int64_t n) {
  mapRowMasked<T, Op, N, Mask>(out, in, n, std::make_index_sequence<N>());
}
template <typename T, typename Op, size_t N, size_t... M>
constexpr std::array<void (*)(T *, const T *const *, int64_t), sizeof...(M)>
mapRowTable(std::index_sequence<M...>) {
  return {&mapRow<T, Op, N, unsigned(M)>...};
}

/// Any other inner strides (an output that is not dense along the row).
template <typename T, typename Op, size_t N, size_t... I>
void mapRowStrided(T *out, int64_t so, const T *const *in, const int64_t *si,
                   int64_t n, std::index_sequence<I...>) {
  for (int64_t e = 0; e < n; ++e)
    out[e * so] = Apply<T, Op, N>::at(in[I][e * si[I]]...);
}

/// out = Op(inputs...) with ONNX multidirectional broadcasting (decided
/// from the global shapes) over out's local box; the inputs are args.inputs
/// [first, first + N). Coalesces the loop nest (LoopNest.h) so the inner
/// loop is one contiguous row per call, each input contiguous or a scalar.
template <typename T, typename Op, size_t N>
std::string mapBroadcast(const KernelArgs &args, size_t first = 0) {
  if (args.inputs.size() < first + N || args.outputs.size() != 1)
    return "expects " + std::to_string(first + N) + " inputs and 1 output";
  const TensorView &c = args.outputs[0];
  // An integer output (Pow of int64 by float) goes to the interpreter.
  if (c.dtype != FloatType<T>::dtype)
    return unsupportedConfiguration("the output is not " + floatName<T>());
  LoopNest nest = outputNest(c);
  for (size_t j = 0; j < N; ++j) {
    const TensorView &in = args.inputs[first + j];
    if (!in.present())
      return "input " + std::to_string(first + j) + " is missing";
    if (!isFloat<T>(in))
      return unsupportedConfiguration("input " + std::to_string(first + j) +
                                      " is not " + floatName<T>());
    if (in.shape.size() > c.shape.size())
      return "input " + std::to_string(first + j) +
             " has a higher rank than the output";
    if (std::string err = addOperand(
            nest, c, in, rightAligned(c.shape.size(), in.shape.size()));
        !err.empty())
      return "input " + std::to_string(first + j) + ": " + err;
  }
  nest.coalesce();
  T *out = elements<T>(c);
  const T *base[N];
  for (size_t j = 0; j < N; ++j)
    base[j] = elements<T>(args.inputs[first + j]);
  static constexpr auto table =
      mapRowTable<T, Op, N>(std::make_index_sequence<(1u << N)>());
  bool plain = nest.inner(0) == 1;
  unsigned mask = 0;
  int64_t si[N];
  for (size_t j = 0; j < N; ++j) {
    si[j] = nest.inner(j + 1);
    if (si[j] == 0)
      mask |= 1u << j;
    else if (si[j] != 1)
      plain = false;
  }
  const int64_t so = nest.inner(0);
  // Rough cost per element for parallelFor, which starts threads per call:
  // only the transcendental ops (pow, log) are worth threads below ~256k
  // elements.
  const double work =
      std::is_same_v<Op, PowOp> || std::is_same_v<Op, PowGradBaseOp> ||
              std::is_same_v<Op, PowGradExponentOp>
          ? 8.0
          : 1.0;
  forEachRow(nest, work, [&](const int64_t *off, int64_t n) {
    const T *in[N];
    for (size_t j = 0; j < N; ++j)
      in[j] = base[j] + off[j + 1];
    if (plain)
      table[mask](out + off[0], in, n);
    else
      mapRowStrided<T, Op, N>(out + off[0], so, in, si, n,
                              std::make_index_sequence<N>());
  });
  return "";
}

template <typename T, typename Op> std::string binary(const KernelArgs &args) {
  if (args.inputs.size() != 2 || args.outputs.size() != 1)
    return "expects 2 inputs and 1 output";
  return mapBroadcast<T, Op, 2>(args);
}
template <typename T> std::string expand(const KernelArgs &args) {
  if (args.inputs.empty() || args.outputs.size() != 1)
    return "expects the input and 1 output";
  return mapBroadcast<T, CopyOp, 1>(args);
}
template <typename T, typename Op, size_t N>
std::string nary(const KernelArgs &args) {
  if (args.inputs.size() != N || args.outputs.size() != 1)
    return "expects " + std::to_string(N) + " inputs and 1 output";
  return mapBroadcast<T, Op, N>(args);
}

/// Where(condition, X, Y) -> Z = condition ? X : Y, and WhereGrad(condition,
/// dZ; branch) -> dX = dZ where condition selects the branch (0: X, 1: Y),
/// else 0, with ONNX broadcasting over the output's local box. The
/// condition is bool (one byte an element); the values are T.
template <typename T>
std::string selectByCondition(const KernelArgs &args, bool grad) {
  const size_t numInputs = grad ? 2 : 3;
  if (args.inputs.size() != numInputs || args.outputs.size() != 1)
    return "expects " + std::to_string(numInputs) + " inputs and 1 output";
  const TensorView &out = args.outputs[0], &cond = args.inputs[0];
  if (out.dtype != FloatType<T>::dtype)
    return unsupportedConfiguration("the output is not " + floatName<T>());
  if (!cond.present() || cond.dtype != tofu::plan::DType::Bool)
    return unsupportedConfiguration("the condition is not bool");
  LoopNest nest = outputNest(out);
  for (size_t j = 0; j < numInputs; ++j) {
    const TensorView &in = args.inputs[j];
    if (!in.present())
      return "input " + std::to_string(j) + " is missing";
    if (j > 0 && !isFloat<T>(in))
      return unsupportedConfiguration("input " + std::to_string(j) +
                                      " is not " + floatName<T>());
    if (in.shape.size() > out.shape.size())
      return "input " + std::to_string(j) + " has a higher rank than the output";
    if (std::string err = addOperand(
            nest, out, in, rightAligned(out.shape.size(), in.shape.size()));
        !err.empty())
      return "input " + std::to_string(j) + ": " + err;
  }
  nest.coalesce();
  const int64_t branch = grad ? args.intAttr("branch", 0) : 0;
  const uint8_t *c = static_cast<const uint8_t *>(cond.data);
  const T *a = elements<T>(args.inputs[1]);
  const T *b = grad ? nullptr : elements<T>(args.inputs[2]);
  T *z = elements<T>(out);
  const int64_t so = nest.inner(0), sc = nest.inner(1), sa = nest.inner(2),
                sb = grad ? 0 : nest.inner(3);
  forEachRow(nest, 1.0, [&](const int64_t *off, int64_t n) {
    T *zr = z + off[0];
    const uint8_t *cr = c + off[1];
    const T *ar = a + off[2];
    if (grad) {
      const bool want = branch == 0;
      for (int64_t e = 0; e < n; ++e)
        zr[e * so] = (cr[e * sc] != 0) == want ? ar[e * sa] : T(0);
      return;
    }
    const T *br = b + off[3];
    for (int64_t e = 0; e < n; ++e)
      zr[e * so] = cr[e * sc] ? ar[e * sa] : br[e * sb];
  });
  return "";
}
template <typename T> std::string where(const KernelArgs &args) {
  return selectByCondition<T>(args, /*grad=*/false);
}
template <typename T> std::string whereGrad(const KernelArgs &args) {
  return selectByCondition<T>(args, /*grad=*/true);
}

} // namespace

void tofu::runtime::registerElementwiseKernels(void (*addKernel)(const char *,
                                                                 KernelFn)) {
  addKernel("Relu", byFloatType<relu<float>, relu<double>>);
  addKernel("ReluGrad", byFloatType<reluGrad<float>, reluGrad<double>>);
  addKernel("Scale", byFloatType<scale<float>, scale<double>>);
  addKernel("SGDUpdate", byFloatType<sgdUpdate<float>, sgdUpdate<double>>);
  addKernel("Ones", byFloatType<ones<float>, ones<double>>);
  addKernel("Zeros", zeros);
  addKernel("Add", byFloatType<binary<float, AddOp>, binary<double, AddOp>>);
  addKernel("Sub", byFloatType<binary<float, SubOp>, binary<double, SubOp>>);
  addKernel("Mul", byFloatType<binary<float, MulOp>, binary<double, MulOp>>);
  addKernel("Div", byFloatType<binary<float, DivOp>, binary<double, DivOp>>);
  addKernel("Neg", byFloatType<unary<float, negOf>, unary<double, negOf>>);
  addKernel("Exp", byFloatType<unary<float, expOf>, unary<double, expOf>>);
  addKernel("Log", byFloatType<unary<float, logOf>, unary<double, logOf>>);
  addKernel("Sqrt", byFloatType<unary<float, sqrtOf>, unary<double, sqrtOf>>);
  addKernel("Tanh",
            byFloatType<unaryIn<float, float, tanhOfF>, unary<double, tanhOf>>);
  addKernel("Erf", byFloatType<unary<float, erfOf>, unary<double, erfOf>>);
  addKernel("Gelu", byFloatType<gelu<float>, gelu<double>>);
  addKernel("GeluGrad", byFloatType<geluGrad<float>, geluGrad<double>>);
  addKernel("Sigmoid", byFloatType<unaryIn<float, float, sigmoidOfF>,
                                   unary<double, sigmoidOf>>);
  addKernel("TanhGrad", byFloatType<unaryGrad<float, tanhGradOf>,
                                    unaryGrad<double, tanhGradOf>>);
  addKernel("SigmoidGrad", byFloatType<unaryGrad<float, sigmoidGradOf>,
                                       unaryGrad<double, sigmoidGradOf>>);
  addKernel("ErfGrad", byFloatType<unaryGrad<float, erfGradOf>,
                                   unaryGrad<double, erfGradOf>>);
  addKernel("SqrtGrad", byFloatType<unaryGrad<float, sqrtGradOf>,
                                    unaryGrad<double, sqrtGradOf>>);
  // Expand(input, shape): the shape is a const input the plan already holds
  // in the output's global shape.
  addKernel("Expand", byFloatType<expand<float>, expand<double>>);
  addKernel("DivGradB", byFloatType<nary<float, DivGradBOp, 3>,
                                    nary<double, DivGradBOp, 3>>);
  addKernel("Pow", byFloatType<nary<float, PowOp, 2>, nary<double, PowOp, 2>>);
  addKernel("PowGradBase", byFloatType<nary<float, PowGradBaseOp, 3>,
                                       nary<double, PowGradBaseOp, 3>>);
  addKernel("PowGradExponent", byFloatType<nary<float, PowGradExponentOp, 4>,
                                           nary<double, PowGradExponentOp, 4>>);
  addKernel("Where", byFloatType<where<float>, where<double>>);
  addKernel("WhereGrad", byFloatType<whereGrad<float>, whereGrad<double>>);
}
