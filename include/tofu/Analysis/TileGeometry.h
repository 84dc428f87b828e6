//===- TileGeometry.h - devices, tiles and op shares ------------*- C++ -*-===//
//
// The geometry shared by the partitioner (costs) and materialization (fetches
// and reductions): which box of a tensor each device owns under a tiling,
// which share of an op each device computes under a per-step strategy, and
// the exact bytes an op moves (DESIGN.md §3). Both use these functions, so
// the cost the partitioner minimizes is the traffic the program executes.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_ANALYSIS_TILEGEOMETRY_H
#define TOFU_ANALYSIS_TILEGEOMETRY_H

#include "tofu/Dialect/Tofu.h"
#include "tofu/TDL/TDL.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace tofu {

/// k = k1·k2·…·km devices; device d has mixed-radix coordinates (c1, …, cm)
/// with c1 the most significant. Step i partitions among k_i groups.
struct DeviceGrid {
  std::vector<int64_t> steps;
  int64_t numDevices() const;
  std::vector<int64_t> coordinates(int64_t device) const;
};

/// Part `index` of `parts` balanced parts of `range` (sizes differ by <= 1).
tdl::Range splitRange(tdl::Range range, int64_t parts, int64_t index);
/// The whole index space of a tensor of shape `shape`.
tdl::Box fullBox(llvm::ArrayRef<int64_t> shape);
/// Intersection of two boxes of equal rank (possibly empty).
tdl::Box intersect(const tdl::Box &a, const tdl::Box &b);
/// Number of elements of the intersection of two boxes of equal rank,
/// without building it.
int64_t intersectionElements(const tdl::Box &a, const tdl::Box &b);
/// Number of elements of a box (1 for rank 0, 0 if any range is empty).
int64_t numElements(const tdl::Box &box);
bool isEmpty(const tdl::Box &box);

/// The box of a tensor of shape `shape` owned by `device` under `tiling`
/// (cut i applies at step i with the grid's k_i parts; steps without a cut
/// replicate).
tdl::Box ownedBox(const DeviceGrid &grid, llvm::ArrayRef<int64_t> shape,
                  TilingAttr tiling, int64_t device);

/// The dimension of a tensor's box that each recursion step cuts under
/// `tiling` (its owned boxes, as `ownedBox`), -1 at a step that cuts none;
/// one entry per grid step.
std::vector<int64_t> tilingCutDims(const DeviceGrid &grid, TilingAttr tiling);

/// The devices, in increasing order, whose box meets `region` (their
/// intersection is not empty), where device d's box is `whole` cut at each
/// recursion step s along `cutDims[s]` (-1: not cut) into the grid's k_s
/// balanced parts, d's coordinate s choosing the part (as `ownedBox`). It
/// descends the recursion and drops a group as soon as its box misses
/// `region`, so the cost follows the devices found, not k.
std::vector<int64_t> devicesMeeting(const DeviceGrid &grid,
                                    const tdl::Box &whole,
                                    llvm::ArrayRef<int64_t> cutDims,
                                    const tdl::Box &region);

/// What one device computes of an op.
struct OpShare {
  tdl::Box outputBox;                      ///< box of output 0 it produces
  std::vector<tdl::Range> reductionRanges; ///< its share of each reduction var
  bool partial = false; ///< some reduction variable is split: a partial sum
  /// A reduction split left this device an empty part of a non-empty
  /// reduction range (more devices than the dimension has elements).
  bool emptyReductionPart = false;
};

/// True when a share computes nothing: its output box is empty, or a
/// reduction split left it an empty part of a reduction range that other
/// devices hold. Such a device runs no kernel and contributes no data. A
/// reduction over a range that is empty for every device (a sum over a
/// zero-size dimension: ReduceSum of a [0, N] tensor, the gradient of a
/// Gather with no indices) is not empty: its output is the reducer's
/// identity, and some device must write it.
bool isEmptyShare(const OpShare &share);

/// The strategies of `plan` that belong to output `output`, in step order.
/// An op's plan holds, for each output, one strategy per recursion step
/// (every output of a multi-output op is its own computation); an output
/// without strategies is computed whole by every device.
llvm::SmallVector<StrategyAttr> planOfOutput(llvm::ArrayRef<StrategyAttr> plan,
                                             unsigned output);

/// The share of output `output` of `op` computed by `device` under `plan`.
OpShare opShare(const DeviceGrid &grid, const tdl::OpInstance &op,
                unsigned output, llvm::ArrayRef<StrategyAttr> plan,
                int64_t device);

/// opShare for every device of one output, with what the devices' shares
/// start from (the output's whole box, its reduction ranges and what each
/// recursion step does) found once: materialize and the cost terms ask for
/// k shares per output.
class OutputShareMaker {
public:
  OutputShareMaker(const DeviceGrid &grid, const tdl::OpInstance &op,
                   unsigned output, llvm::ArrayRef<StrategyAttr> plan);
  /// opShare(grid, op, output, plan, device).
  OpShare operator()(int64_t device) const;

private:
  DeviceGrid grid;
  tdl::Box outputBox;
  std::vector<tdl::Range> reductionRanges;
  /// Per recursion step with a strategy: its dimension, and whether it
  /// splits the output (else a reduction).
  std::vector<std::pair<int64_t, bool>> steps;
};

/// The output dimension each recursion step cuts in the boxes the devices
/// produce under an output's per-step strategies `steps` (`planOfOutput`):
/// a split step cuts its dimension, a reduction split or a missing strategy
/// none (-1); one entry per grid step. With `devicesMeeting` it finds the
/// devices whose `opShare` output box meets a region.
std::vector<int64_t> shareCutDims(const DeviceGrid &grid,
                                  llvm::ArrayRef<StrategyAttr> steps);

/// True when a device's own share already holds the complete values of its
/// owned output tile (no partial sum, owned box inside the produced box).
/// Otherwise the tile is assembled from every device's produced box (copied
/// when complete, summed when partial).
bool outputCoveredLocally(const OpShare &share, const tdl::Box &owned);

/// Bytes moved per step to compute output `output` of `op`: inputs fetched
/// (needed minus owned) plus output conversion (produced tiles moved to
/// owners, or partial sums reduced to owners). Devices with an empty share
/// compute and send nothing.
int64_t outputCommBytes(const DeviceGrid &grid, const tdl::OpInstance &op,
                        unsigned output, llvm::ArrayRef<StrategyAttr> plan,
                        llvm::ArrayRef<TilingAttr> inputTilings,
                        TilingAttr outputTiling);

/// The shares of one op output that the devices of a grid compute under one
/// plan, with the input regions each share needs: the part of
/// `outputCommBytes` that does not depend on the tilings. Those bytes are a
/// sum of one term per input, which depends on that input's tiling only
/// (`inputFetchBytes`), and the output conversion, which depends on the
/// output's tiling only (`conversionBytes`); a caller that prices many tiling
/// combinations under one plan (the partitioner's cost tables) evaluates
/// each term once per tiling instead of the interval analysis of every
/// device once per combination. Byte counts saturate at INT64_MAX, as
/// `outputCommBytes` does.
class OutputShares {
public:
  OutputShares(const DeviceGrid &grid, const tdl::OpInstance &op,
               unsigned output, llvm::ArrayRef<StrategyAttr> plan);

  /// Bytes of input `input` that the devices with a non-empty share need
  /// and do not own under `tiling` (0 for an input the output does not read).
  int64_t inputFetchBytes(unsigned input, TilingAttr tiling) const;
  /// Bytes that assemble each device's owned tile of the output under
  /// `outputTiling` from the produced boxes (copies or partial-sum
  /// reductions), for the owners whose own share does not cover their tile.
  int64_t conversionBytes(TilingAttr outputTiling) const;
  /// The number of input terms: `inputFetchBytes` is 0 from here on.
  unsigned numInputs() const { return needed.size(); }

private:
  DeviceGrid grid;
  int64_t numDevices;
  /// Grid coordinates of every device, `grid.steps.size()` per device.
  std::vector<int64_t> coords;
  /// Each device's share (`opShare`).
  std::vector<OpShare> shares;
  /// needed[i][d]: the box of input i that device d's share reads (nullopt
  /// for a device with an empty share, or an input it does not read).
  std::vector<std::vector<std::optional<tdl::Box>>> needed;
  std::vector<std::vector<int64_t>> inputShapes;
  std::vector<int64_t> inputElementBytes;
  std::vector<int64_t> outputShape;
  int64_t outputElementBytes;
  /// Devices with a non-empty reduction part per tile of the split steps.
  int64_t repeats;
};

/// Bytes moved per step by the whole op: the sum over its outputs.
int64_t opCommBytes(const DeviceGrid &grid, const tdl::OpInstance &op,
                    llvm::ArrayRef<StrategyAttr> plan,
                    llvm::ArrayRef<TilingAttr> inputTilings,
                    llvm::ArrayRef<TilingAttr> outputTilings);

/// Bytes per element of a TDL element type.
int64_t elementBytes(tdl::ElemType type);

/// The box of a tensor held by the group `device` belongs to after the first
/// `level` recursion steps: the union of the tiles of the devices that share
/// its first `level` coordinates (level 0: the whole tensor; level m: the
/// device's own tile, as `ownedBox`).
tdl::Box groupOwnedBox(const DeviceGrid &grid, llvm::ArrayRef<int64_t> shape,
                       TilingAttr tiling, int64_t device, size_t level);

/// `outputCommBytes` split by the recursion step whose interconnect each byte
/// crosses (one entry per grid step; the entries add up to outputCommBytes).
/// An input element a device needs and does not own is charged to step i
/// when the device's step-(i-1) group holds it and its step-i group does not
/// (its nearest owner is a sibling at step i). A produced tile moved from
/// device e to owner d is charged to the first step at which the coordinates
/// of d and e differ.
std::vector<int64_t> outputCommBytesByStep(
    const DeviceGrid &grid, const tdl::OpInstance &op, unsigned output,
    llvm::ArrayRef<StrategyAttr> plan, llvm::ArrayRef<TilingAttr> inputTilings,
    TilingAttr outputTiling);

/// `opCommBytes` split by recursion step: the sum over the op's outputs of
/// `outputCommBytesByStep`.
std::vector<int64_t> opCommBytesByStep(const DeviceGrid &grid,
                                       const tdl::OpInstance &op,
                                       llvm::ArrayRef<StrategyAttr> plan,
                                       llvm::ArrayRef<TilingAttr> inputTilings,
                                       llvm::ArrayRef<TilingAttr> outputTilings);

} // namespace tofu

#endif // TOFU_ANALYSIS_TILEGEOMETRY_H
