//===- FloatKernel.cpp - Element type of a float kernel call --------------===//

#include "FloatKernel.h"

using namespace tofu::runtime;

bool tofu::runtime::isFloatType(plan::DType type) {
  return type == plan::DType::F32 || type == FloatType<double>::dtype;
}

bool tofu::runtime::kernelFloatType(const KernelArgs &args, plan::DType &type) {
  for (const auto *operands : {&args.outputs, &args.inputs})
    for (const TensorView &v : *operands)
      if (v.present() && isFloatType(v.dtype)) {
        type = v.dtype;
        return true;
      }
  return false;
}
