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

#include "tofu/runtime/ComputeKernel.h"
#include "tofu/runtime/Plan.h"

#include <string>
#include <vector>

namespace tofu::runtime {

/// Arguments of one kernel call.
struct KernelArgs {
  std::vector<TensorView> inputs;
  std::vector<TensorView> outputs;
  const std::vector<plan::Attr> *attrs = nullptr;
  /// True when the instruction computes a partial sum over part of a
  /// top-level reduction variable's range (ComputeKernel.h's
  /// ReductionRanges). Kernels whose reductions show in their inputs' boxes
  /// (GEMM's k, a convolution's input channels) see the split there; a
  /// kernel whose reduction does not (a pooling window) reads the ranges
  /// in `reductions`, or declines with unsupportedConfiguration.
  bool partialReduction = false;
  /// The training step being executed (random ops such as Dropout draw
  /// tofu::rng::counterUniform(seed, counter, randomStep), as the
  /// interpreter does).
  uint64_t randomStep = 0;
  /// The instruction's expression programs (one per output), or null. The
  /// values of an op's const inputs (Slice's starts, ReduceSum's axes) are
  /// folded into them, and the plan ships those inputs as empty boxes: a
  /// kernel that needs such values reads them off the program.
  const std::vector<plan::ExprProgram> *programs = nullptr;
  /// The range of one top-level reduction variable this call sums over:
  /// [lo, hi) of its whole extent [0, extent).
  struct ReductionSpan {
    int64_t lo = 0, hi = 0, extent = 0;
  };
  /// The reduction ranges of the first output's program, one per top-level
  /// reduction variable in the order of the spec's sum (e.g. ConvGradInput:
  /// mm, then the kernel offsets); empty when the call gave none (whole
  /// ranges). For a kernel whose split reduction does not show in its
  /// inputs' boxes (a grouped convolution's output channels within each
  /// group, read through a hull over the groups).
  std::vector<ReductionSpan> reductions;

  /// Float attribute `name` (an Int attribute is converted), or `dflt`.
  double floatAttr(const std::string &name, double dflt) const;
  /// Int attribute `name`, or `dflt`.
  int64_t intAttr(const std::string &name, int64_t dflt) const;
  /// Ints attribute `name`, or `dflt`.
  std::vector<int64_t> intsAttr(const std::string &name,
                                const std::vector<int64_t> &dflt) const;
  /// True when attribute `name` is given.
  bool hasAttr(const std::string &name) const;
  /// String attribute `name`, or `dflt`.
  std::string stringAttr(const std::string &name,
                         const std::string &dflt) const;
};

/// A CPU kernel.
using KernelFn = std::string (*)(const KernelArgs &args);

/// The error a kernel returns when it cannot handle a local configuration
/// that is nevertheless valid (e.g. a split it does not implement):
/// `runCompute` then falls back to the expression interpreter if the op has
/// a program, and reports `why` otherwise.
std::string unsupportedConfiguration(const std::string &why);
/// True when `error` came from unsupportedConfiguration.
bool isUnsupportedConfiguration(const std::string &error);

/// True if the native kernels accept operands of `dtype` (float32 and
/// float64, the kernels being templates over both; bfloat16, which the float
/// kernels compute in float32 (FloatKernel.h) and the copying kernels move
/// as bytes; int64, bool). runCompute
/// sends an instruction with an operand of any other type to the expression
/// interpreter. A change that makes every native kernel take another type (and
/// decline what it cannot do with unsupportedConfiguration) adds that type
/// here.
bool nativeKernelsHandle(plan::DType dtype);

/// The kernel registered under `name` (= TDL op name), or null.
KernelFn lookupKernel(const std::string &name);

/// One compute instruction bound to fixed operand views: runCompute's view
/// checks, kernel lookup and argument assembly, done once by `bind`, so that
/// `run`, called every training step, costs the kernel call and nothing
/// else. Anything but a native kernel that accepts the configuration (no
/// kernel, an operand type the kernels do not take, a kernel that declines or
/// fails) goes through runCompute's full path, with its errors and its
/// interpreter fallback. The strings and programs passed to `bind` must
/// outlive the binding (a plan's instruction owns them).
class BoundCompute {
public:
  /// Binds `kernel` to its operands; returns runCompute's error for operand
  /// views it would reject (checked here once, not at every run).
  std::string bind(const std::string &kernel,
                   const std::vector<plan::Attr> &attrs,
                   std::vector<TensorView> inputs,
                   std::vector<TensorView> outputs,
                   const std::vector<plan::ExprProgram> &programs,
                   const std::vector<ReductionRanges> &reductionRanges,
                   ComputePath path);
  /// Runs the bound instruction for training step `randomStep`; as
  /// runCompute otherwise.
  std::string run(uint64_t randomStep, ComputePath *used);
  /// Every output is empty (more devices than the split has elements):
  /// `run` has nothing to do.
  bool emptyShare() const { return empty; }

private:
  const std::string *kernel = nullptr;
  const std::vector<plan::ExprProgram> *programs = nullptr;
  const std::vector<ReductionRanges> *reductionRanges = nullptr;
  ComputePath path = ComputePath::Auto;
  KernelFn native = nullptr; ///< null: always take runCompute's full path
  bool empty = false;        ///< every output is empty: nothing to run
  KernelArgs args;
};

/// Names of all registered kernels, sorted.
std::vector<std::string> registeredKernels();

/// Registration hooks of the kernel families (called once by the registry).
void registerElementwiseKernels(void (*add)(const char *, KernelFn));
void registerMatrixKernels(void (*add)(const char *, KernelFn));
void registerMatMulKernels(void (*add)(const char *, KernelFn));
void registerConvKernels(void (*add)(const char *, KernelFn));
void registerLossKernels(void (*add)(const char *, KernelFn));
void registerSoftmaxKernels(void (*add)(const char *, KernelFn));
void registerNormalizationKernels(void (*add)(const char *, KernelFn));
void registerPoolKernels(void (*add)(const char *, KernelFn));
void registerShapeKernels(void (*add)(const char *, KernelFn));
void registerReduceKernels(void (*add)(const char *, KernelFn));
void registerIndexKernels(void (*add)(const char *, KernelFn));
void registerPadKernels(void (*add)(const char *, KernelFn));

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_KERNELS_H
