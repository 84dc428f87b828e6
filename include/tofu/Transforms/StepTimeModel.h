//===- StepTimeModel.h - predicted compute and transfer time ----*- C++ -*-===//
//
// The time a device spends on one op instance under a candidate strategy, and
// on the transfers of one recursion step over one interconnect level. The
// partitioner minimizes it when a topology gives link bandwidths
// (docs/Partitioning.md, "The step-time objective"); `--dump-plan` reports it.
//
// Compute: a roofline with an efficiency that depends on the op class and
// the tile's shape,
//
//   t = launch + max(flops / (peak(class) * efficiency(tile)),
//                    bytes touched / memory bandwidth)
//
// where the bytes stream at the cache's rate instead when the device
// describes a cache and they fit in it (memorySeconds; an inner, faster
// level when they fit that), or, when the caller knows where each input is
// found (the prediction's reuse distances), each input's bytes at its
// level's rate; on a shared host (the CPU backend, whose GEMMs pack their
// operands, convolutions through im2col) a contraction also pays for
// reading its inputs from where they are on top of its FLOPs. Plus, for an output
// that is a partial sum (a split reduction), one more
// memory pass and kernel call for the reduction of the partial tiles.
// Contractions (MatMul, Gemm, convolutions and their gradients) run at the
// GEMM peak scaled by s(m) * s(n) * s(k), s(x) = x / (x + h), where m, n, k
// are the tile's GEMM sides (read off the TDL access regions) and h the
// device's half-efficiency extent: skinny and tiny GEMMs are slow. Other ops
// run at the vector peak and are usually memory-bound; a kernel whose cost
// per element of its largest operand the device gives (measured) costs that
// instead of its FLOPs at the vector peak.
//
// Transfer: bytes / link bandwidth + messages * latency.
//
// Per step, beyond its instructions: the device's fixed step overhead plus
// the elements of the input and label buffers fed that step times the
// feed cost of one element.
//
// All device parameters are in one struct, `DeviceModel` (DeviceModel.h),
// read from a JSON device description or a built-in one; the rate of a
// kernel is its element type's rate for its class (GEMM, convolution,
// vector).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TRANSFORMS_STEPTIMEMODEL_H
#define TOFU_TRANSFORMS_STEPTIMEMODEL_H

#include "tofu/Analysis/TileGeometry.h"
#include "tofu/Transforms/DeviceModel.h"
#include "tofu/TDL/TDL.h"

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace tofu {

/// How a kernel's speed is modelled.
enum class OpClass {
  Contraction, ///< GEMM-like: MatMul, Gemm, Einsum, Conv and its gradients
  Elementwise, ///< every input read at the output index
  Other,       ///< reductions, data movement, normalizations, ...
};

/// The work of the share of one op output that one device computes.
struct ShareWork {
  OpClass kind = OpClass::Other;
  double flops = 0;
  /// Bytes read (the inputs' required regions) and written (the output box).
  double bytes = 0;
  double outputBytes = 0;
  /// The GEMM sides of a contraction (1 otherwise): m = the output extents
  /// the first operand's region shrinks with more than the second's, n =
  /// those the second's shrinks with more, k = the reduction; the part of an
  /// extent both shrink with (a batch, a convolution's groups) repeats the
  /// GEMM.
  double m = 1, n = 1, k = 1;
  /// The output is a partial sum that a reduction completes.
  bool partial = false;
  /// The share computes nothing (empty output box or reduction part).
  bool empty = false;
  /// A convolution (or its gradient): the device's `conv` rate.
  bool convolution = false;
  /// The op's name (its kernel's): a device may give its measured cost.
  llvm::StringRef kernel;
  /// The element type it computes in: a contraction's first operand's,
  /// else its output's.
  tdl::ElemType dtype = tdl::ElemType::F32;
  /// Output elements, and the transcendental functions (exp, tanh, erf,
  /// ...) computed per output element: each costs the device's
  /// transcendentalFlops more vector FLOPs. describeShare leaves it 0 (the
  /// search: the same for every strategy, as it scales with the elements a
  /// device computes); the prediction counts them in the op's expression
  /// program (StepPrediction.cpp).
  double outputElements = 0;
  double transcendentals = 0;
  /// Elements of its largest operand (an input's required region or the
  /// output box): what a measured kernel cost is per.
  double largestElements = 0;
  /// The rows a row-wise kernel loops over in its largest operand (see
  /// DeviceModel::KernelCost::rowSeconds): a batch norm's planes (images x
  /// channels), a softmax's, layer norm's or loss's rows along the last
  /// dimension; 0 for other kernels.
  double rows = 0;
  /// Where the bytes its inputs read come from in a step, when the caller
  /// knows (the step prediction follows each buffer's reuse distance in the
  /// executed order; StepPrediction.cpp): bytes found in the inner cache
  /// level, in the cache level, and in memory. All < 0 (describeShare, the
  /// search): the rate the whole traffic's size gives (memorySeconds).
  double inputBytesByLevel[3] = {-1, -1, -1};
  /// The kernel runs with no other device's work beside it (a shared
  /// host's only virtual device, where instructions run one at a time):
  /// a GEMM too small to split gets only the threads the runtime gives it
  /// (DeviceModel::hostThreads). False (the search, k > 1): the other
  /// devices' kernels use the rest of the host.
  bool alone = false;
  bool levelsKnown() const { return inputBytesByLevel[0] >= 0; }
  /// A convolution (or gradient) as the CPU backend runs it: one GEMM over
  /// an im2col (or col2im) matrix of `columnElements` elements, of sides
  /// columnGemm = {m, n, k} (Conv: output channels x images·pixels x
  /// channels·kernel; ConvGradWeight: output channels x channels·kernel x
  /// images·pixels; ConvGradInput: channels·kernel x images·pixels x output
  /// channels). Read off the weight's region and the output's (dY's); 0
  /// when not a convolution.
  double columnElements = 0;
  double columnGemm[3] = {1, 1, 1};
  double columnFlops = 0; ///< 2 x the GEMM's multiply-adds
  /// Bytes the CPU backend's convolution moves besides the im2col matrix
  /// and the GEMM (KernelsConv.cpp): with more than one image, Conv stages
  /// the GEMM's output and copies it into Y, and both gradients gather dY's
  /// images into one matrix (each read and written once); ConvGradInput
  /// also zeroes dX and col2im adds into it; ConvGradWeight zeroes dW and
  /// each chunk's GEMM reads it back and adds into it. 0 when not a
  /// convolution.
  double stagingBytes = 0;
};

/// Where a buffer's bytes are found: the levels of DeviceModel's memory.
enum class MemoryLevel { InnerCache = 0, Cache = 1, Memory = 2 };

/// The op class of a TDL op.
OpClass classifyOp(const tdl::OpInstance &op);

/// Describes `share` of output `output` of `op`: flops (a contraction: 2
/// per multiply-add; another op with a reduction: one per element read and
/// written, at most 2 per term of its TDL sum; otherwise 1 per output
/// element), bytes touched and, for a contraction, its GEMM sides.
ShareWork describeShare(const tdl::OpInstance &op, unsigned output,
                        const OpShare &share);

/// Predicted seconds for a device's compute and a link's transfers.
class StepTimeModel {
public:
  explicit StepTimeModel(DeviceModel device) : device(std::move(device)) {}

  /// Seconds to compute `work`, scaled by `fraction` of its flops and bytes
  /// (the part of a group's share that one device will compute once the
  /// later recursion steps split it; 1 = the work as given).
  double computeSeconds(const ShareWork &work, double fraction = 1) const;
  /// The fixed cost of `work`'s kernel call inside computeSeconds: its
  /// kernel's own `callSeconds` where the description has one, else the
  /// device's launchSeconds.
  double callSeconds(const ShareWork &work) const;
  /// The sustained FLOP/s `work` runs at before its shape's efficiency:
  /// the device's rate for the work's element type and class.
  double flopsPerSecond(const ShareWork &work) const;
  /// The efficiency in (0, 1] a contraction of these GEMM sides runs at.
  double gemmEfficiency(double m, double n, double k) const;
  /// The part of a shared host's threads (DeviceModel::hostThreads) the
  /// CPU runtime runs a GEMM of these sides on: 1 when the host has one
  /// thread or the GEMM is large enough to split over all of them. A batch
  /// of `repeats` such GEMMs (a batched MatMul) too small to split each
  /// runs its GEMMs side by side once the batch is large enough.
  double gemmThreadShare(double m, double n, double k,
                         double repeats = 1) const;
  /// How many GEMMs of sides m x n x k a contraction's FLOPs make: its
  /// batch (the extents both operands shrink with), 1 when none.
  static double batchedGemms(const ShareWork &work);
  /// Whether `work` is a vector kernel the CPU runtime runs on one thread
  /// even when nothing runs beside it (below its measured threading size,
  /// DeviceModel::KernelCost::threadsFromElements; without one, under
  /// kOneThreadElements elements): its time, a one-thread time, is what
  /// virtual devices side by side run on separate threads. (A contraction
  /// beside other devices' work is already timed at the whole host's rate:
  /// work.alone is false.)
  bool runsOnOneThread(const ShareWork &work) const;
  /// The size under which runsOnOneThread assumes a kernel without a
  /// measured threading size runs on one thread (the executor's, in
  /// runtime/lib/CpuBackend.cpp's planWaves).
  static constexpr double kOneThreadElements = 1 << 16;
  /// Seconds to stream `bytes` of traffic (read and written) through
  /// memory: at the cache's rate when the device has a cache level and they
  /// fit in it, else at the memory bandwidth.
  double memorySeconds(double bytes) const;
  /// Bytes per second of data found at `level` (a missing cache level: the
  /// next slower one's rate).
  double levelBytesPerSecond(MemoryLevel level) const;
  /// The level of data that `reuseBytes` of other data were touched since
  /// (plus the data's own `bytes`): the smallest cache holding both, else
  /// memory.
  MemoryLevel levelAfter(double reuseBytes, double bytes) const;
  /// Seconds one step spends beyond its instructions when it feeds
  /// `fedElements` input and label elements: step overhead + fedElements
  /// x feed cost per element.
  double stepOverheadSeconds(double fedElements) const;
  /// Seconds to move `bytes` over a link of `gbps` GB/s in `messages`
  /// messages.
  double transferSeconds(double bytes, double gbps, double messages) const;

  const DeviceModel &getDevice() const { return device; }

private:
  /// The description's measured cost of `work`'s kernel, or null: the
  /// cost for its element type ("Conv@f64") before the kernel's own ("Conv");
  /// a training-mode batch norm falls back to the inference-mode cost.
  const DeviceModel::KernelCost *kernelCostOf(const ShareWork &work) const;
  /// `cost`'s call cost, or launchSeconds where it has none (or is null).
  double callSecondsOf(const DeviceModel::KernelCost *cost) const;

  DeviceModel device;
};

} // namespace tofu

#endif // TOFU_TRANSFORMS_STEPTIMEMODEL_H
