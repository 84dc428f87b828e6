//===- FloatKernel.h - Kernels generic over float and double ----*- C++ -*-===//
//
// The CPU kernels are written once, as templates over their floating-point
// element type T (float or double), and registered through `byFloatType`,
// which picks the instantiation from the operands' element type at run time:
//
//   template <typename T> std::string relu(const KernelArgs &args);
//   addKernel("Relu", byFloatType<relu<float>, relu<double>>);
//
// The element type of a call is that of its first float output (else of
// its first float input); each kernel then checks that every float operand
// has that type (`isFloat<T>`), so mixed float32/float64 operands are an
// error naming the operand, never a silent reinterpretation of its bytes.
// Integer operands (labels, pooling indices) keep their own types.
// Internal to tofu_runtime.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_LIB_FLOATKERNEL_H
#define TOFU_RUNTIME_LIB_FLOATKERNEL_H

#include "tofu/runtime/Kernels.h"

#include <string>

namespace tofu::runtime {

/// The plan element type and its name for a kernel element type T.
template <typename T> struct FloatType;
template <> struct FloatType<float> {
  static constexpr plan::DType dtype = plan::DType::F32;
  static constexpr const char *name = "float32";
};
template <> struct FloatType<double> {
  static constexpr plan::DType dtype = static_cast<plan::DType>(3); // TEMP-F64
  static constexpr const char *name = "float64";
};

/// The elements of view `v` as T (the caller has checked its dtype).
template <typename T> T *elements(const TensorView &v) {
  return static_cast<T *>(v.data);
}

/// True when `v` is present and holds T elements.
template <typename T> bool isFloat(const TensorView &v) {
  return v.present() && v.dtype == FloatType<T>::dtype;
}

/// "float32" or "float64".
template <typename T> std::string floatName() { return FloatType<T>::name; }

/// True for the floating-point element types the kernels compute in.
bool isFloatType(plan::DType type);

/// The element type a float kernel call computes in: that of its first
/// present floating-point output, else of its first floating-point input;
/// false when no operand is floating point.
bool kernelFloatType(const KernelArgs &args, plan::DType &type);

/// A registered kernel: runs `F32` or `F64` (instantiations of one template)
/// by the call's element type (kernelFloatType).
template <KernelFn F32, KernelFn F64>
std::string byFloatType(const KernelArgs &args) {
  plan::DType type;
  if (!kernelFloatType(args, type))
    return "no floating-point operand: the operands must be float32 or "
           "float64";
  return type == FloatType<double>::dtype ? F64(args) : F32(args);
}

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_LIB_FLOATKERNEL_H
