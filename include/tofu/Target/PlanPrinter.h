//===- PlanPrinter.h - plan summaries: text, JSON and HTML ------*- C++ -*-===//
//
// What `tofuc --dump-plan[=text|json|html]` prints. All three formats are
// rendered from one `PlanSummary`: the tensors' tilings, each op's strategy
// at each recursion step and the bytes it moves per step (from the exact
// cost model in TileGeometry), per-device peak memory and the search time.
// The JSON schema is documented in docs/PlanJson.md, the HTML page in
// docs/PlanHtml.md.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TARGET_PLANPRINTER_H
#define TOFU_TARGET_PLANPRINTER_H

#include "tofu/Dialect/Tofu.h"
#include "tofu/Target/StepPrediction.h"
#include "tofu/runtime/Plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tofu {

/// One operator of the partitioned training step.
struct OpSummary {
  std::string name; ///< the op's name (its ONNX node or generated name)
  std::string kind; ///< its TDL spec
  /// Indices into plan::Plan::tensors of its inputs (-1: absent optional
  /// input) and outputs.
  std::vector<int32_t> inputs, outputs;
  /// The chosen strategies as recorded in tofu.plan (one per step and output,
  /// formatted), or {"replicated"} when every device computes the whole op.
  std::vector<std::string> strategy;
  /// stepStrategies[s][o]: the strategy of output o at recursion step s
  /// ("whole" when that output is not split at that step).
  std::vector<std::vector<std::string>> stepStrategies;
  /// The cost of each recursion step, δ_i = C_i − C_{i−1}, C_i being the
  /// op's cost on the grid of the first i steps (docs/Partitioning.md; the
  /// partitioner's tofu.step_bytes are these summed over ops).
  std::vector<int64_t> bytesPerStep;
  /// The same bytes split by the step whose interconnect each one crosses
  /// (opCommBytesByStep).
  std::vector<int64_t> bytesPerLink;
  int64_t bytes = 0; ///< C_m: the sum of either split
};

/// Everything the --dump-plan formats print, beyond plan::Plan itself.
struct PlanSummary {
  /// k1, ..., km: the number of groups of each recursion step (k = product).
  std::vector<int64_t> grid;
  std::vector<OpSummary> ops;
  /// Per recursion step, the sum over ops (adds up to `bytes`).
  std::vector<int64_t> bytesPerStep;
  /// Per recursion step, the bytes crossing its links, summed over ops.
  std::vector<int64_t> bytesPerLink;
  int64_t bytes = 0; ///< the sum over ops of their bytes
  /// How the loss was found (the tofu.loss description), e.g. which model
  /// output, logits and labels; empty when the step does not say.
  std::string loss;
  /// What the partitioner minimized: "bytes", or "time" (the predicted step
  /// time, with --topology).
  std::string objective = "bytes";
  /// With --topology (tofu.device_model and the predictions the partitioner
  /// recorded; docs/Partitioning.md "The step-time objective"): the device
  /// model, each step's link GB/s, the predicted compute seconds of one
  /// training step and the predicted transfer seconds of each step. Empty
  /// `deviceModel` = no prediction.
  std::string deviceModel;
  std::vector<double> stepGbps;
  double predictedComputeSeconds = 0;
  std::vector<double> stepCommSeconds;
  /// predictedComputeSeconds + Σ stepCommSeconds (no overlap).
  double predictedStepSeconds() const;
  /// Per device, liveBytesLowerBound of the plan when already known (what
  /// planMemory returned); empty: formatPlanJson computes it (a pass over
  /// every device's instructions and pieces).
  std::vector<uint64_t> liveBytesLowerBound;
};

/// Collects the summary of the partitioned, materialized training step
/// `func` / `plan` (`func` carries tofu.grid, tofu.tilings and tofu.plan).
PlanSummary summarizePlan(mlir::func::FuncOp func, const plan::Plan &plan);

/// Human-readable plan summary: devices, recursion steps, bytes (total and
/// per step), memory, tilings, strategies. `withSearchTime` = false leaves
/// the search time out (the copy stored in plan.bin, which must not depend
/// on timing). `prediction` (--device, --topology) adds the predicted step
/// time, per-device times and the memory fit; the copy stored in plan.bin
/// has none, so that --device does not change plan.bin.
std::string formatPlanText(mlir::func::FuncOp func, const plan::Plan &plan,
                           bool withSearchTime = true,
                           const StepPrediction *prediction = nullptr);

/// The same from a summary already collected (summarizePlan costs O(k) op
/// instances per op: tofuc collects it once for every format it prints).
std::string formatPlanText(const PlanSummary &summary, const plan::Plan &plan,
                           bool withSearchTime = true,
                           const StepPrediction *prediction = nullptr);
/// The same as JSON (schema in docs/PlanJson.md); `prediction` fills the
/// `predicted` object.
std::string formatPlanJson(mlir::func::FuncOp func, const plan::Plan &plan,
                           const StepPrediction *prediction = nullptr);
std::string formatPlanJson(const PlanSummary &summary, const plan::Plan &plan,
                           const StepPrediction *prediction = nullptr);

/// A self-contained HTML page (inline CSS and SVG, no script, no network)
/// drawing each weight and activation tensor as a grid of tiles coloured by
/// owning device, with the bytes each op moves (docs/PlanHtml.md);
/// `prediction` (--device, --topology) adds the predicted step and its
/// timeline per device.
std::string formatPlanHtml(mlir::func::FuncOp func, const plan::Plan &plan,
                           const StepPrediction *prediction = nullptr);

/// Shared by the printers: names of tensor roles, element types, tilings.
const char *tensorRoleName(plan::TensorRole role);
const char *dtypeName(plan::DType type);
std::string formatShape(const std::vector<int64_t> &shape);
std::string formatTiling(const std::vector<plan::Cut> &tiling);

} // namespace tofu

#endif // TOFU_TARGET_PLANPRINTER_H
