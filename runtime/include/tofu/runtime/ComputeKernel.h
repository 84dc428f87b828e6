//===- ComputeKernel.h - Run one compute op on local buffers ----*- C++ -*-===//
//
// The single-op execution API of the CPU runtime. It runs one op (one
// Compute instruction of a plan, or one ONNX node of a test) on LOCAL buffers:
// every operand is a dense row-major box of its tensor, given together with
// the box's position in the tensor's GLOBAL index space and the tensor's
// global shape.
//
// `runCompute` picks the implementation:
//   1. the native kernel registered under the op name (Kernels.h), when one
//      exists and it supports the local configuration;
//   2. otherwise the expression interpreter, evaluating the op's lowered TDL
//      expression (`plan::ExprProgram`, one per output) over each output
//      buffer's region;
//   3. otherwise an error ("no kernel and no program").
// The CPU executor (CpuBackend.h) runs every Compute instruction through it,
// and test harnesses call it directly with whole tensors.
//
// Example (a whole-tensor call, as the ONNX node tests make it):
//
//   std::vector<float> a(6), b(6), y(6);
//   using tofu::runtime::TensorView;
//   std::string err = tofu::runtime::runCompute(
//       "Add", /*attrs=*/{},
//       {TensorView::whole(a.data(), DType::F32, {2, 3}),
//        TensorView::whole(b.data(), DType::F32, {2, 3})},
//       {TensorView::whole(y.data(), DType::F32, {2, 3})},
//       /*programs=*/{}, /*reductionRanges=*/{});
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_COMPUTEKERNEL_H
#define TOFU_RUNTIME_COMPUTEKERNEL_H

#include "tofu/runtime/Plan.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tofu::runtime {

/// One operand of an op: a dense row-major box [lo, lo + shape) of a tensor
/// whose global shape is `globalShape`. All three vectors have the tensor's
/// rank (empty for a scalar). Bool elements are one byte each (0 or 1).
struct TensorView {
  void *data = nullptr;             ///< null for an absent optional input
  plan::DType dtype = plan::DType::F32;
  std::vector<int64_t> shape;       ///< local extents (hi - lo)
  std::vector<int64_t> lo;          ///< global coordinates of element 0
  std::vector<int64_t> globalShape; ///< shape of the whole tensor

  /// A view of box `region` (global coordinates) of a tensor of shape
  /// `globalShape`, stored densely at `data`.
  static TensorView ofRegion(void *data, plan::DType dtype,
                             const plan::Box &region,
                             std::vector<int64_t> globalShape);
  /// A view of a whole tensor of shape `shape` (lo = 0, global = local).
  static TensorView whole(void *data, plan::DType dtype,
                          std::vector<int64_t> shape);
  /// An absent optional input.
  static TensorView absent() { return TensorView(); }

  /// The box this view holds, in global coordinates.
  plan::Box region() const;
  bool present() const { return data != nullptr; }
  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  float *f32() const { return static_cast<float *>(data); }
  int64_t *i64() const { return static_cast<int64_t *>(data); }
  uint8_t *boolean() const { return static_cast<uint8_t *>(data); }
};

/// Per output: the half-open range [lo, hi) of each of its program's
/// `topReductionVars`; an empty vector means the whole extents.
using ReductionRanges = std::vector<std::pair<int64_t, int64_t>>;

/// Which implementation `runCompute` may use.
enum class ComputePath : uint8_t {
  Auto = 0,        ///< native kernel if registered and able, else interpreter
  Native = 1,      ///< only the native kernel (error if none)
  Interpreter = 2, ///< only the expression interpreter (error if no program)
};

/// Runs op `kernel` (the TDL/ONNX op name) with attributes `attrs` on
/// `inputs` -> `outputs`.
///
/// - `inputs[i].data == nullptr` marks an absent optional input.
/// - Every output is written completely over its region (unless it has no
///   elements). Outputs must not alias inputs.
/// - `programs`: one expression program per output, or empty when the op has
///   none (opaque ops, which need a native kernel). `reductionRanges`: empty,
///   or one entry per program (see ReductionRanges). A device computing a
///   partial sum over a split reduction dimension passes its local range;
///   native kernels see the same split through their local input shapes.
/// - The interpreter reads inputs at global coordinates: a read outside the
///   tensor's global shape gives 0 (padding); a read inside the global shape
///   but outside the local box is an error (the plan gave the device too
///   little data), never a silent wrong value.
/// - With `path == Auto`, a native kernel that cannot handle the local
///   configuration (e.g. a split it does not support) falls back to the
///   interpreter when a program is present, and is an error otherwise.
///
/// - `randomStep`: the training step being executed; random expressions
///   (TDL's `uniform`, e.g. Dropout's mask) draw step-specific values
///   (tofu::rng::counterUniform), equal on every device of the step.
///
/// Returns an empty string on success, otherwise an error message naming the
/// op and what is wrong. `*used` (optional) receives the path that ran.
std::string runCompute(const std::string &kernel,
                       const std::vector<plan::Attr> &attrs,
                       const std::vector<TensorView> &inputs,
                       const std::vector<TensorView> &outputs,
                       const std::vector<plan::ExprProgram> &programs,
                       const std::vector<ReductionRanges> &reductionRanges,
                       ComputePath path = ComputePath::Auto,
                       ComputePath *used = nullptr, uint64_t randomStep = 0);

/// True when a native CPU kernel is registered under `kernel`.
bool hasNativeKernel(const std::string &kernel);

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_COMPUTEKERNEL_H
