//===- KernelsElementwise.cpp - Element-wise CPU kernels ------------------===//
//
// Relu, ReluGrad, Scale, SGDUpdate, Ones (same-shaped operands, any rank) and
// Add (ONNX multidirectional broadcasting decided from the global shapes).
// All float32.
//
//===----------------------------------------------------------------------===//

#include "Broadcast.h"
#include "tofu/runtime/Kernels.h"

using namespace tofu::runtime;
using tofu::plan::DType;

namespace {

/// Checks arity and that every operand is a present float32 tensor with the
/// same number of elements as the first output.
std::string checkSameShape(const KernelArgs &args, size_t numInputs) {
  if (args.inputs.size() != numInputs || args.outputs.size() != 1)
    return "expects " + std::to_string(numInputs) + " inputs and 1 output, got " +
           std::to_string(args.inputs.size()) + " and " +
           std::to_string(args.outputs.size());
  int64_t n = args.outputs[0].numElements();
  if (args.outputs[0].dtype != DType::F32)
    return "output must be float32";
  for (size_t i = 0; i < numInputs; ++i) {
    const TensorView &in = args.inputs[i];
    if (!in.present())
      return "input " + std::to_string(i) + " is missing";
    if (in.dtype != DType::F32)
      return "input " + std::to_string(i) + " must be float32";
    if (in.numElements() != n)
      return "input " + std::to_string(i) + " has " +
             std::to_string(in.numElements()) +
             " local elements but the output has " + std::to_string(n);
  }
  return "";
}

std::string relu(const KernelArgs &args) {
  if (auto err = checkSameShape(args, 1); !err.empty())
    return err;
  const float *x = args.inputs[0].f32();
  float *y = args.outputs[0].f32();
  for (int64_t i = 0, n = args.outputs[0].numElements(); i < n; ++i)
    y[i] = x[i] < 0.0f ? 0.0f : x[i]; // NaN stays NaN, as in ONNX
  return "";
}

std::string reluGrad(const KernelArgs &args) {
  if (auto err = checkSameShape(args, 2); !err.empty())
    return err;
  const float *dy = args.inputs[0].f32();
  const float *x = args.inputs[1].f32();
  float *dx = args.outputs[0].f32();
  for (int64_t i = 0, n = args.outputs[0].numElements(); i < n; ++i)
    dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
  return "";
}

std::string scale(const KernelArgs &args) {
  if (auto err = checkSameShape(args, 1); !err.empty())
    return err;
  float alpha = static_cast<float>(args.floatAttr("alpha", 1.0));
  const float *x = args.inputs[0].f32();
  float *y = args.outputs[0].f32();
  for (int64_t i = 0, n = args.outputs[0].numElements(); i < n; ++i)
    y[i] = alpha * x[i];
  return "";
}

std::string sgdUpdate(const KernelArgs &args) {
  if (auto err = checkSameShape(args, 2); !err.empty())
    return err;
  float lr = static_cast<float>(args.floatAttr("lr", 0.1));
  float decay = static_cast<float>(args.floatAttr("norm_coefficient", 0));
  const float *w = args.inputs[0].f32();
  const float *g = args.inputs[1].f32();
  float *out = args.outputs[0].f32();
  for (int64_t i = 0, n = args.outputs[0].numElements(); i < n; ++i)
    out[i] = w[i] - lr * (g[i] + decay * w[i]);
  return "";
}

std::string ones(const KernelArgs &args) {
  if (args.inputs.size() != 1 || args.outputs.size() != 1)
    return "expects 1 input and 1 output";
  const TensorView &y = args.outputs[0];
  if (y.dtype != DType::F32)
    return "output must be float32";
  // X only gives the shape: its values are not read, and a share of the
  // output needs none of them (an empty box).
  float *p = y.f32();
  for (int64_t i = 0, n = y.numElements(); i < n; ++i)
    p[i] = 1.0f;
  return "";
}

std::string add(const KernelArgs &args) {
  if (args.inputs.size() != 2 || args.outputs.size() != 1)
    return "expects 2 inputs and 1 output";
  const TensorView &c = args.outputs[0];
  const TensorView &a = args.inputs[0], &b = args.inputs[1];
  if (!a.present() || !b.present())
    return "an input is missing";
  if (a.dtype != DType::F32 || b.dtype != DType::F32 || c.dtype != DType::F32)
    return "operands must be float32";
  float *out = c.f32();
  const float *pa = a.f32(), *pb = b.f32();
  int64_t n = c.numElements();
  if (sameBox(c, a) && sameBox(c, b)) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = pa[i] + pb[i];
    return "";
  }
  std::vector<int64_t> oa, ob;
  if (auto err = broadcastOffsets(c, a, oa); !err.empty())
    return "input A: " + err;
  if (auto err = broadcastOffsets(c, b, ob); !err.empty())
    return "input B: " + err;
  for (int64_t i = 0; i < n; ++i)
    out[i] = pa[oa[i]] + pb[ob[i]];
  return "";
}

} // namespace

void tofu::runtime::registerElementwiseKernels(void (*addKernel)(const char *,
                                                                 KernelFn)) {
  addKernel("Relu", relu);
  addKernel("ReluGrad", reluGrad);
  addKernel("Scale", scale);
  addKernel("SGDUpdate", sgdUpdate);
  addKernel("Ones", ones);
  addKernel("Add", add);
}
