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
// plus, for an output that is a partial sum (a split reduction), one more
// memory pass and kernel call for the reduction of the partial tiles.
// Contractions (MatMul, Gemm, convolutions and their gradients) run at the
// GEMM peak scaled by s(m) * s(n) * s(k), s(x) = x / (x + h), where m, n, k
// are the tile's GEMM sides (read off the TDL access regions) and h the
// device's half-efficiency extent: skinny and tiny GEMMs are slow. Other ops
// run at the vector peak and are usually memory-bound.
//
// Transfer: bytes / link bandwidth + messages * latency.
//
// All device parameters are in one struct, `DeviceModel`, with built-in
// values for a generic CPU and an H100; issue 19's device descriptions
// (JSON, `tofu-run --calibrate`) are meant to fill the same struct.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TRANSFORMS_STEPTIMEMODEL_H
#define TOFU_TRANSFORMS_STEPTIMEMODEL_H

#include "tofu/Analysis/TileGeometry.h"
#include "tofu/TDL/TDL.h"

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace tofu {

/// What one device can do, for the step-time model. Rates are per device,
/// in the element type the plan computes in (float32 in practice).
struct DeviceModel {
  std::string name;
  /// Sustained FLOP/s of a large GEMM-like contraction (MatMul, Gemm,
  /// convolutions via im2col + GEMM).
  double gemmFlopsPerSecond = 0;
  /// FLOP/s of element-wise arithmetic, reductions and everything else.
  double vectorFlopsPerSecond = 0;
  /// Bytes per second a kernel streams through memory.
  double memoryBytesPerSecond = 0;
  /// Fixed cost of one kernel call (launch, dispatch, argument setup).
  double launchSeconds = 0;
  /// The GEMM side (m, n or k) at which a contraction runs at half its
  /// peak: efficiency = Π x / (x + gemmHalfExtent) over its three sides.
  double gemmHalfExtent = 1;
  /// Fixed cost of one transfer (a fetch piece or a reduction message).
  double messageLatencySeconds = 0;

  /// The build machine's CPU: one virtual device of tofu-run on a 2-core
  /// AMD EPYC (torch.mm and tensor copies measured, bench/time_objective.md).
  static DeviceModel genericCpu();
  /// An NVIDIA H100 SXM in float32 (datasheet peaks, see the .cpp).
  static DeviceModel h100();
  /// The built-in models by name: "cpu", "h100".
  static std::optional<DeviceModel> builtin(llvm::StringRef name);
  static std::vector<std::string> builtinNames();
};

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
};

/// The op class of a TDL op.
OpClass classifyOp(const tdl::OpInstance &op);

/// Describes `share` of output `output` of `op`: flops (2 per multiply-add
/// of a reduction, 1 per output element otherwise), bytes touched and, for
/// a contraction, its GEMM sides.
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
  /// The efficiency in (0, 1] a contraction of these GEMM sides runs at.
  double gemmEfficiency(double m, double n, double k) const;
  /// Seconds to move `bytes` over a link of `gbps` GB/s in `messages`
  /// messages.
  double transferSeconds(double bytes, double gbps, double messages) const;

  const DeviceModel &getDevice() const { return device; }

private:
  DeviceModel device;
};

} // namespace tofu

#endif // TOFU_TRANSFORMS_STEPTIMEMODEL_H
