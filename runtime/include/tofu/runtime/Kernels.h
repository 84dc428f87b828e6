//===- Kernels.h - CPU kernel registry ---------------------------*- C++ -*-===//
//
// Kernels run on LOCAL buffers: each operand is a dense row-major box of its
// tensor, given with the box's position (`lo`) in the tensor's global index
// space and the tensor's global shape. Kernels that broadcast or average over
// a global extent read the global shapes; everything else works on the local
// shapes only. A kernel returns an empty string on success, otherwise an
// error message (the executor adds the instruction and op names).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_KERNELS_H
#define TOFU_RUNTIME_KERNELS_H

#include "tofu/runtime/Plan.h"

#include <string>
#include <vector>

namespace tofu::runtime {

/// One operand of a kernel call.
struct TensorView {
  void *data = nullptr;              ///< null for an absent optional input
  plan::DType dtype = plan::DType::F32;
  std::vector<int64_t> shape;        ///< local extents (hi - lo)
  std::vector<int64_t> lo;           ///< global coordinates of element 0
  std::vector<int64_t> globalShape;  ///< shape of the whole tensor

  bool present() const { return data != nullptr; }
  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  float *f32() const { return static_cast<float *>(data); }
  int64_t *i64() const { return static_cast<int64_t *>(data); }
};

/// Arguments of one kernel call.
struct KernelArgs {
  std::vector<TensorView> inputs;
  std::vector<TensorView> outputs;
  const std::vector<plan::Attr> *attrs = nullptr;

  /// Float attribute `name` (an Int attribute is converted), or `dflt`.
  double floatAttr(const std::string &name, double dflt) const;
  /// Int attribute `name`, or `dflt`.
  int64_t intAttr(const std::string &name, int64_t dflt) const;
  /// String attribute `name`, or `dflt`.
  std::string stringAttr(const std::string &name,
                         const std::string &dflt) const;
};

/// A CPU kernel.
using KernelFn = std::string (*)(const KernelArgs &args);

/// The kernel registered under `name` (= TDL op name), or null.
KernelFn lookupKernel(const std::string &name);

/// Names of all registered kernels, sorted.
std::vector<std::string> registeredKernels();

/// Registration hooks of the kernel families (called once by the registry).
void registerElementwiseKernels(void (*add)(const char *, KernelFn));
void registerMatrixKernels(void (*add)(const char *, KernelFn));
void registerLossKernels(void (*add)(const char *, KernelFn));

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_KERNELS_H
