//===- Coarsening.h - op groups and tensor groups (paper §5.1) --*- C++ -*-===//
//
// Coarsening turns the training graph into a (nearly) linear graph of op
// groups connected by tensor groups, on which the partitioner's DP runs:
//   * a forward op and its backward ops (those whose `grad_of` names it) form
//     one op group;
//   * a tensor, its gradient, the `Add`s that sum several gradients of it and
//     (for a parameter) its updated value and its optimizer state of its
//     shape (`state_of`: momentum, Adam's moments, Adagrad's accumulator)
//     form one tensor group, which has a single tiling;
//   * the inputs and output of an element-wise op (same shapes) are one
//     tensor group, and consecutive element-wise forward ops one op group;
//   * ops carrying `tofu.timestep` (unrolled RNN cells) are merged across
//     timesteps: the j-th forward op of every timestep, when spec, attributes
//     and types agree, with its results.
// The groups are recorded in the IR as `tofu.op_group` (i64, on every
// tofu.compute) and `tofu.tensor_groups` (array<i64>, one per result, on
// every tofu.input / tofu.param / tofu.compute).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TRANSFORMS_COARSENING_H
#define TOFU_TRANSFORMS_COARSENING_H

#include "tofu/Dialect/Tofu.h"

#include "llvm/ADT/DenseMap.h"

#include <optional>

namespace tofu {

/// Name of the attribute holding a tofu.compute op's op group.
inline constexpr llvm::StringLiteral kOpGroupAttr = "tofu.op_group";
/// Name of the attribute holding the tensor group of each result.
inline constexpr llvm::StringLiteral kTensorGroupsAttr = "tofu.tensor_groups";

/// Op groups and tensor groups of a function, numbered 0.. in program order
/// of their first member.
struct Coarsening {
  llvm::DenseMap<mlir::Operation *, int64_t> opGroup; ///< tofu.compute ops
  llvm::DenseMap<mlir::Value, int64_t> tensorGroup;   ///< every tensor
  int64_t numOpGroups = 0;
  int64_t numTensorGroups = 0;
};

/// Computes the groups of `func` (paper §5.1).
Coarsening coarsenGraph(mlir::func::FuncOp func);

/// Writes `tofu.op_group` / `tofu.tensor_groups` attributes.
void recordCoarsening(mlir::func::FuncOp func, const Coarsening &groups);

/// Reads the groups recorded by `recordCoarsening`; std::nullopt when some
/// op has none (the coarsen phase did not run).
std::optional<Coarsening> readCoarsening(mlir::func::FuncOp func);

} // namespace tofu

#endif // TOFU_TRANSFORMS_COARSENING_H
