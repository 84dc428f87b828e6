//===- StepPrediction.h - predicted step time and fit of a plan -*- C++ -*-===//
//
// What `tofuc --device NAME|FILE --dump-plan` reports (docs/DeviceModel.md,
// "Prediction"): the materialized plan's every instruction timed with the
// step-time model (StepTimeModel.h) on a device description
// (DeviceModel.h), then the step assembled from the per-device times:
//
// - a compute instruction: the roofline-plus-efficiency time of its share
//   (its op's TDL instance, the share materialize gave the device);
// - a fetch or reduction: one launch, a memory pass for its local pieces
//   (and for adding a reduction's pieces), and for each remote piece its
//   bytes over the link of the recursion step at which the two devices'
//   grid coordinates first differ, plus that link's latency;
// - dedicated devices (GPUs) run side by side: the step is the sum over
//   `seq` levels of the slowest device's time at that level (the plan's
//   contract: equal `seq` = independent; a level waits for the previous),
//   with no compute/transfer overlap within a device;
// - virtual devices sharing one host (`shared_host`, tofu-run's CPU
//   backend) add up: the step is the sum of every device's time.
//
// Fit: each device's planned peak (the static arena) against the device's
// memory less a margin (on a shared host, all arenas against the host's).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TARGET_STEPPREDICTION_H
#define TOFU_TARGET_STEPPREDICTION_H

#include "tofu/Dialect/Tofu.h"
#include "tofu/Transforms/DeviceModel.h"
#include "tofu/runtime/Plan.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tofu {

/// The fraction of device memory `--device` keeps free by default for what
/// the plan does not count (CUDA context, cuBLAS/cuDNN workspaces, NCCL
/// buffers, allocator slack).
inline constexpr double kDefaultMemoryMargin = 0.10;

/// The interconnect of one recursion step.
struct StepLink {
  std::string name;
  double gbps = 0;
  double latencySeconds = 0;
};

struct PredictOptions {
  /// Per recursion step, the `--topology` level name and GB/s; empty
  /// without a topology (then every step uses the description's first
  /// link). A level the description names takes its latency from there,
  /// else the description's first link's.
  std::vector<std::string> topologyLinks;
  std::vector<double> topologyGbps;
  double memoryMargin = kDefaultMemoryMargin;
};

/// The prediction for one plan on one device description.
struct StepPrediction {
  std::string device;     ///< the description's name
  bool sharedHost = false;
  std::vector<StepLink> links; ///< per recursion step
  /// step = compute + transfers + copies + overhead: the seconds of the
  /// instructions on the critical device of each seq level (dedicated
  /// devices) or of all devices (shared host), and the step's own work.
  double stepSeconds = 0;
  double computeSeconds = 0;
  double copySeconds = 0; ///< launches and memory passes of fetches/reduces
  /// The step's work outside its instructions (StepTimeModel::
  /// stepOverheadSeconds): fixed, plus feeding `fedElements` input and
  /// label elements (shared host: every device's; dedicated devices feed
  /// side by side: the device with the most); on a shared host, also the
  /// executor's hand-over of each of the `sideBySideLevels` levels whose
  /// devices run side by side (DeviceModel::waveSeconds each).
  double overheadSeconds = 0;
  int64_t sideBySideLevels = 0;
  uint64_t fedElements = 0;
  std::vector<double> commSecondsPerStep; ///< link time, per recursion step
  double commSeconds() const;
  /// The busiest device's total time: the step with perfect overlap
  /// between devices and no waiting (a lower bound for dedicated devices).
  double busiestDeviceSeconds = 0;
  int64_t batchSize = 0;
  double samplesPerSecond = 0;

  struct Device {
    double computeSeconds = 0, commSeconds = 0, copySeconds = 0;
    uint64_t receivedBytes = 0; ///< bytes of remote pieces it receives
    uint64_t peakBytes = 0;     ///< its static arena
    double busySeconds() const {
      return computeSeconds + commSeconds + copySeconds;
    }
  };
  std::vector<Device> devices;
  /// Compute seconds by kernel (TDL op), summed over all devices, in name
  /// order: what dominates the compute.
  std::vector<std::pair<std::string, double>> kernelSeconds;
  /// The predicted timeline of the first kTimelineDevices devices: per seq
  /// level and device with work, when its work starts (seconds from the
  /// step's start) and how long its compute, copies and transfers take (in
  /// that order, no overlap within a device), named after the op of its
  /// first instruction. Dedicated devices start a level together when the
  /// previous level's slowest device ends; on a shared host every device's
  /// work follows the previous one's. In seq order, then device order.
  struct Span {
    int64_t seq = 0, device = 0;
    double start = 0, compute = 0, copy = 0, comm = 0;
    std::string op;
    double seconds() const { return compute + copy + comm; }
  };
  static constexpr int64_t kTimelineDevices = 16;
  /// Device 0's instructions as the model sees them, in program order: what
  /// a per-kernel calibration fits its costs to (bench/gpu/fit_kernels.py
  /// against tofu-run --kernel-times).
  struct Instruction {
    int64_t index = 0;      ///< position in device 0's program
    std::string kernel;     ///< the cost's key (e.g. "BatchNormalization.training"); "Fetch"/"Reduce"
    bool contraction = false;
    bool convolution = false; ///< a contraction at the conv rate
    std::string dtype;      ///< the rates' element type ("f32", ...)
    double elements = 0;    ///< of its largest operand (compute)
    double rows = 0;        ///< rows or planes of a row-wise kernel
    double callSeconds = 0; ///< its call's fixed cost
    double seconds = 0;     ///< compute (or copy) time, call included
  };
  std::vector<Instruction> device0Instructions;
  std::vector<Span> timeline;
  /// Per recursion step: bytes received over its links, summed over
  /// devices, and by the device that receives the most.
  std::vector<uint64_t> stepBytes, stepBytesBusiest;

  /// Fit (memoryBytes = 0: the description gives no size; fits stays true
  /// and nothing is checked).
  uint64_t memoryBytes = 0;
  double memoryMargin = 0;
  uint64_t usableBytes = 0;
  bool fits = true;
  /// The device with the largest peak (shared host: the sum of all), its
  /// bytes and how many bytes it is over the usable memory.
  int64_t worstDevice = 0;
  uint64_t worstBytes = 0;
  uint64_t overBytes = 0;
  /// When it does not fit: an estimate of the k that would, from peak
  /// memory scaling as 1/k (0 = none; `--gpus auto` compiles to check).
  int64_t estimatedFittingDevices = 0;
};

/// The transcendental functions (exp, log, sqrt, tanh, erf, sigmoid, pow;
/// not pow(x, 2)) that `program` evaluates per output element when each
/// function node is evaluated once per distinct value of the index
/// variables it depends on, as a kernel does: tanh(X[i]) is 1, a batch
/// norm's sqrt of its channel's variance C / (N C H W).
double transcendentalsPerOutputElement(const plan::ExprProgram &program);

/// Predicts the training step of `plan` (materialized and memory-planned
/// from `func`, which carries tofu.grid and the ops' tofu.plan) on `device`.
llvm::Expected<StepPrediction> predictStep(mlir::func::FuncOp func,
                                           const plan::Plan &plan,
                                           const DeviceModel &device,
                                           const PredictOptions &options);

/// The text lines --dump-plan prints for a prediction.
std::string formatPredictionText(const StepPrediction &prediction);

/// One line: whether the plan fits and by how much it does not.
std::string formatFit(const StepPrediction &prediction);

} // namespace tofu

#endif // TOFU_TARGET_STEPPREDICTION_H
