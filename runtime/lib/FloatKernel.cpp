//===- FloatKernel.cpp - Element type of a float kernel call --------------===//

#include "FloatKernel.h"
#include "ParallelFor.h"

#include "tofu/runtime/ElementAccess.h"

#include <algorithm>
#include <vector>

using namespace tofu::runtime;

bool tofu::runtime::isFloatType(plan::DType type) {
  return type == plan::DType::F32 || type == plan::DType::F64 ||
         type == plan::DType::BF16;
}

/// bf16 -> float32 over n elements, threaded when large.
static void widenElements(const uint16_t *src, float *dst, int64_t n) {
  parallelFor(n, 1.0, [&](int64_t lo, int64_t hi) {
    bfloat16ToFloatArray(src + lo, dst + lo, hi - lo);
  });
}

/// float32 -> bf16 (to nearest even) over n elements, threaded when large.
static void narrowElements(const float *src, uint16_t *dst, int64_t n) {
  parallelFor(n, 2.0, [&](int64_t lo, int64_t hi) {
    floatToBFloat16Array(src + lo, dst + lo, hi - lo);
  });
}

std::string tofu::runtime::runAsFloat32(const KernelArgs &args, KernelFn f32) {
  KernelArgs widened = args;
  std::vector<std::vector<float>> copies;
  copies.reserve(args.inputs.size() + args.outputs.size());
  auto widen = [&](TensorView &v) {
    if (!v.present() || v.dtype != plan::DType::BF16)
      return;
    const int64_t n = v.numElements();
    // At least one element: an empty share stays present (non-null data).
    std::vector<float> &copy =
        copies.emplace_back(static_cast<size_t>(std::max<int64_t>(n, 1)));
    widenElements(static_cast<const uint16_t *>(v.data), copy.data(), n);
    v.data = copy.data();
    v.dtype = plan::DType::F32;
  };
  for (TensorView &v : widened.inputs)
    widen(v);
  for (TensorView &v : widened.outputs)
    widen(v);
  std::string err = f32(widened);
  if (!err.empty())
    return err;
  for (size_t o = 0; o < args.outputs.size(); ++o) {
    const TensorView &out = args.outputs[o];
    if (out.present() && out.dtype == plan::DType::BF16)
      narrowElements(widened.outputs[o].f32(),
                     static_cast<uint16_t *>(out.data), out.numElements());
  }
  return "";
}

std::string tofu::runtime::kernelFloatType(const KernelArgs &args,
                                           plan::DType &type) {
  bool found = false;
  for (const auto *operands : {&args.outputs, &args.inputs})
    for (const TensorView &v : *operands) {
      if (!v.present() || !isFloatType(v.dtype))
        continue;
      if (!found) {
        type = v.dtype;
        found = true;
      } else if (v.dtype != type) {
        return unsupportedConfiguration(
            std::string("mixed ") + dtypeNumpyName(type) + " and " +
            dtypeNumpyName(v.dtype) +
            " operands (the native kernels compute in one type)");
      }
    }
  // Integer-only calls (int64 Mul of shapes, say) go to the interpreter.
  if (!found)
    return unsupportedConfiguration(
        "no floating-point operand: the native kernels compute in float32 "
        "or float64");
  return "";
}
