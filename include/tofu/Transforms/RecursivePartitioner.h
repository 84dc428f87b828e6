//===- RecursivePartitioner.h - the partition search ------------*- C++ -*-===//
//
// The search that decides how every tensor is cut across k devices (paper
// §5, DESIGN.md §3) and the baselines it is compared with (paper §7.3), as a
// library: the `tofu-partition` pass and the unit tests call
// `partitionFunction`.
//
// k is factored into steps k1 >= k2 >= ... (prime factors, or the levels of
// a topology). Step i cuts every tensor group once more, along one
// dimension, into k_i parts, and gives every op one more strategy. The cost
// of a decision is exact: the bytes `TileGeometry` counts on the grid of the
// first i steps (fetches of needed-but-not-owned regions plus output
// conversion, uneven parts at their real sizes). The bytes of step i are
// the growth of that total, so the steps' bytes add up to the traffic of the
// materialized program.
//
// The objective is those bytes (the paper's), unless a topology gives link
// bandwidths: then it is the predicted step time of StepTimeModel.h
// (compute of each op's share plus each step's bytes over its link; see
// docs/Partitioning.md, "The step-time objective"). Bytes are reported
// either way.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TRANSFORMS_RECURSIVEPARTITIONER_H
#define TOFU_TRANSFORMS_RECURSIVEPARTITIONER_H

#include "tofu/Dialect/Tofu.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace tofu {

/// Name of the function attribute holding the bytes moved by each step.
inline constexpr llvm::StringLiteral kStepBytesAttr = "tofu.step_bytes";
/// Name of the function attribute holding each step's link bandwidth (GB/s).
inline constexpr llvm::StringLiteral kStepGbpsAttr = "tofu.step_gbps";
/// What the search minimized: "bytes" or "time" (a string).
inline constexpr llvm::StringLiteral kObjectiveAttr = "tofu.objective";
/// With a topology: the device model of the predicted times (a string),
/// the predicted compute seconds of one training step on the busiest device
/// (f64) and the predicted transfer seconds of each recursion step
/// (array<f64>). docs/Partitioning.md, "The step-time objective".
inline constexpr llvm::StringLiteral kDeviceModelAttr = "tofu.device_model";
inline constexpr llvm::StringLiteral kPredictedComputeAttr =
    "tofu.predicted_compute_seconds";
inline constexpr llvm::StringLiteral kStepCommSecondsAttr =
    "tofu.step_comm_seconds";

/// The partitioners behind `--partitioner`, the default first.
const std::vector<std::string> &partitionerNames();

/// One level of an interconnect: `count` groups linked at `gbps` GB/s.
struct InterconnectLevel {
  int64_t count = 1;
  std::string name;
  double gbps = 0;
};

/// Parses `COUNTx:NAME=GBPS[,...]`, innermost level first, e.g.
/// `8x:nvlink=300,2x:pcie=16` (2 machines of 8 GPUs).
llvm::Expected<std::vector<InterconnectLevel>>
parseTopology(llvm::StringRef spec);

/// The recursion steps for k devices: k's prime factors in descending
/// order; with a topology, its levels slowest first, each factored so.
struct StepPlan {
  std::vector<int64_t> steps;
  std::vector<double> gbps; ///< per step; empty without a topology
  /// Per step, the name of its topology level; empty without a topology.
  std::vector<std::string> links;
};
llvm::Expected<StepPlan> planSteps(int64_t devices, llvm::StringRef topology);

struct SearchOptions {
  std::string partitioner = "tofu";
  int64_t devices = 1;
  std::string topology;
  /// What the search minimizes: "bytes" (the paper's objective), "time"
  /// (the predicted step time of StepTimeModel.h; needs a topology) or
  /// "auto" (time with a topology, bytes without).
  std::string objective = "auto";
  /// The device model of the predicted times: a built-in name or a JSON
  /// description (loadDeviceModel); "" = cpu.
  std::string device = "cpu";
  /// `exhaustive` refuses graphs with more tiling combinations than this.
  int64_t exhaustiveLimit = 1000000;
  /// Test hook: after each DP step, enumerate every option combination of
  /// that step (fails above exhaustiveLimit) and fail when the DP's cost is
  /// not the minimum.
  bool crossCheckSteps = false;
  /// The step DP (BFS order) keeps at most this many states after an op;
  /// above it the step is solved by variable elimination.
  size_t maxFrontierStates = size_t(1) << 18;
  /// Variable elimination builds no table above this many entries; above
  /// it the step is solved by a beam DP (not exact; a warning says so).
  size_t maxEliminationTable = size_t(1) << 20;
};

struct PartitionResult {
  std::vector<int64_t> steps;
  std::vector<double> stepGbps;
  /// Bytes moved per training step attributable to each recursion step.
  std::vector<int64_t> stepBytes;
  /// Σ stepBytes: the bytes of the materialized program.
  int64_t totalBytes = 0;
  /// "bytes" or "time".
  std::string objective;
  /// With a topology: the device model's name, the predicted compute
  /// seconds per training step of the device with the largest shares, and
  /// the predicted transfer seconds of each recursion step (empty name and
  /// vector without a topology).
  std::string deviceModel;
  double predictedComputeSeconds = 0;
  std::vector<double> stepCommSeconds;
  /// Steps that neither the step DP nor variable elimination could solve
  /// within their limits and that were solved by a beam DP instead (one
  /// message each; empty = every step exact).
  std::vector<std::string> approximations;
};

/// Runs `options.partitioner` on `func` (which needs `tofu.strategies`;
/// groups from `tofu-coarsen`, computed when absent) and records
/// `tofu.tilings`, `tofu.plan`, `tofu.grid`, `tofu.step_bytes` (and
/// `tofu.step_gbps` with a topology).
llvm::Expected<PartitionResult>
partitionFunction(mlir::func::FuncOp func, const SearchOptions &options);

} // namespace tofu

#endif // TOFU_TRANSFORMS_RECURSIVEPARTITIONER_H
