//===- PlanBuilder.h - partitioned IR -> per-device programs ----*- C++ -*-===//
//
// The back half of the pipeline, after `partition`:
//  - materialize: per-device programs with local op instances, MultiFetch
//    instructions for the input regions each device needs and does not own,
//    and reductions / copies that bring each op's produced tiles to their
//    owners. Everything is derived from the interval-analysis regions and the
//    tilings, not from the partitioner's name (paper §6, DESIGN.md §3).
//  - schedule: a static memory plan per device (buffer offsets from
//    liveness across all devices, peak bytes).
//  - emit: plan.bin via the runtime's writer.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TARGET_PLANBUILDER_H
#define TOFU_TARGET_PLANBUILDER_H

#include "tofu/Dialect/Tofu.h"
#include "tofu/runtime/Plan.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace tofu {

/// How materialize fills the parameters' initial contents.
struct MaterializeOptions {
  /// Point the buffers whose tile is one contiguous run of the parameter's
  /// value at those bytes (plan::Buffer::borrowedInit: in the MLIR
  /// attribute, or the model file's mapping behind a resource blob) instead
  /// of copying them. The plan is then valid only while `func`'s context
  /// and the imported model's mappings live: tofuc writes it right away.
  bool borrowWeights = false;
  /// List every Fetch/Reduce's pieces on each device's instruction (the
  /// form before plan format 3.0) instead of naming the collective's source
  /// table (plan::Instr::sources): O(k^2) pieces per all-gather. For tests
  /// that compare the two forms (tofuc --explicit-pieces).
  bool explicitPieces = false;
  /// Keep one program per class of devices whose programs are the same up
  /// to regions, reduction bounds and weight tiles (DeviceProgram::programOf,
  /// tofu/runtime/SharedPrograms.h) instead of one per device. Not with
  /// explicit pieces (ignored then).
  bool sharePrograms = false;
  /// Threads that materialize devices, each a fixed part of them, when the
  /// context allows multithreading: 0 is the machine's cores (at most 8)
  /// from 256 devices on, and one thread below. The plan is the same for
  /// any number.
  unsigned threads = 0;
};

/// Builds the per-device programs of a partitioned training step (`func` must
/// carry tofu.grid, tofu.tilings and tofu.plan). Buffers get no offsets yet.
llvm::Expected<plan::Plan> materialize(mlir::func::FuncOp func,
                                       const MaterializeOptions &options = {});

/// Updates parameters in place where that gives the same values: drops the
/// end-of-step copy of a parameter tile's new value onto the tile when an
/// element-wise update kernel on the same device computes it, and lets that
/// new value share the parameter's bytes (moving the update to the end of
/// the step if the parameter is read after it). Deterministic. Decides per
/// device; a device that shares a program (SharedPrograms.h) and decides
/// otherwise than its program's owner gets a program of its own.
/// lib/Target/UpdateInPlace.cpp.
void updateParamsInPlace(plan::Plan &plan);

/// Per buffer of `device`: the parameter buffer whose bytes it shares (the
/// owned buffer of a parameter's new value, computed in place: no
/// instruction writes the parameter's own buffer), else -1. planMemory
/// places such a buffer at its parameter's offset.
std::vector<int32_t> inPlaceUpdatedBuffers(const plan::Plan &plan,
                                           size_t device);

/// inPlaceUpdatedBuffers of every device, as (buffer, parameter buffer)
/// pairs by buffer (each buffer has its parameter buffer's bytes and
/// region): what a program's instructions write is found once for the
/// devices that share it (SharedPrograms.h).
std::vector<std::vector<std::pair<int32_t, int32_t>>>
inPlaceUpdatedPairs(const plan::Plan &plan);

/// Assigns every buffer a static arena offset per device and sets each
/// device's peakBytes. Lifetimes are measured across all devices (other
/// devices read a device's buffers); the smallest of several placements
/// (first fit in two orders, skyline best fit, and a bounded, fixed-seed
/// search over perturbed first-fit orders) wins. Devices with equal buffer
/// sizes and lifetimes share the search-free placements, and past the 16th
/// device of such a class the best placement its searched devices found.
/// A device that shares a program (SharedPrograms.h) and gets other offsets
/// than its program's owner gets a program of its own. Deterministic.
/// Returns what liveBytesLowerBound would return for the
/// planned plan, from the lifetimes it computed (so that the JSON summary
/// need not compute them again).
std::vector<uint64_t> planMemory(plan::Plan &plan);

/// Per device, the most bytes of its buffers live at one moment (over the
/// same lifetimes planMemory uses, without alignment): no placement of those
/// lifetimes can use a smaller arena. `--dump-plan=json` reports it as
/// `live_bytes_lower_bound`.
std::vector<uint64_t> liveBytesLowerBound(const plan::Plan &plan);

/// Prints the per-device programs (the output of --compile-to=materialize
/// and --compile-to=schedule).
void printDevicePrograms(const plan::Plan &plan, llvm::raw_ostream &os);

// The plan summaries (--dump-plan) are declared in tofu/Target/PlanPrinter.h.

} // namespace tofu

#endif // TOFU_TARGET_PLANBUILDER_H
