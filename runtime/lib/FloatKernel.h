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
// its first float input). A bfloat16 call runs the float32 instantiation
// on float32 copies of its bf16 operands (exact) and rounds its float32
// results to bf16, to nearest even, once per element (runAsFloat32): bf16
// storage with float32 arithmetic and accumulation, as PyTorch's bf16 CPU
// kernels and cuBLAS with a float32 compute type do. A call that mixes
// float types (float32 and float64, or bf16 and float32) is
// declined as an unsupported configuration (runCompute then lets the
// expression interpreter convert every element), never a reinterpretation of
// an operand's bytes; each kernel still checks its own operands' types
// (`isFloat<T>`). Integer operands (labels, pooling indices) keep their own
// types.
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
  static constexpr plan::DType dtype = plan::DType::F64;
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

/// True for the floating-point element types the kernels take: float32,
/// float64 and bfloat16 (computed in float32).
bool isFloatType(plan::DType type);

/// Runs `f32` (a float32 kernel) on `args` with every bf16 operand replaced
/// by a float32 copy (outputs too, holding their current values), then
/// stores the float32 outputs back into the bf16 ones, rounded to nearest
/// even.
std::string runAsFloat32(const KernelArgs &args, KernelFn f32);

/// The element type a float kernel call computes in: that of its first
/// present floating-point output, else of its first floating-point input.
/// Returns unsupportedConfiguration when float32 and float64 are mixed or
/// no operand is floating-point (runCompute then interprets the program),
/// or "" with `type` set.
std::string kernelFloatType(const KernelArgs &args, plan::DType &type);

/// A registered kernel: runs `F32` or `F64` (instantiations of one template)
/// by the call's element type (kernelFloatType); bf16 through F32
/// (runAsFloat32).
template <KernelFn F32, KernelFn F64>
std::string byFloatType(const KernelArgs &args) {
  plan::DType type;
  if (std::string err = kernelFloatType(args, type); !err.empty())
    return err;
  if (type == plan::DType::BF16)
    return runAsFloat32(args, F32);
  return type == plan::DType::F64 ? F64(args) : F32(args);
}

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_LIB_FLOATKERNEL_H
