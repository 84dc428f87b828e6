//===- FloatKernel.cpp - Element type of a float kernel call --------------===//

#include "FloatKernel.h"

using namespace tofu::runtime;

bool tofu::runtime::isFloatType(plan::DType type) {
  return type == plan::DType::F32 || type == plan::DType::F64;
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
            "mixed float32 and float64 operands (the native kernels compute "
            "in one of them)");
      }
    }
  // Integer-only calls (int64 Mul of shapes, say) go to the interpreter.
  if (!found)
    return unsupportedConfiguration(
        "no floating-point operand: the native kernels compute in float32 "
        "or float64");
  return "";
}
