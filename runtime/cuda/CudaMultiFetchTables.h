//===- CudaMultiFetchTables.h - Which Fetch/Reduce is one launch, its table -*- C++ -*-===//
//
// The schedule's side of MultiFetch/MultiReduce (CudaMultiFetch.h), plain
// C++ like the rest of the schedule:
//
//  * `runsAsOneLaunch` decides from the plan alone: a Fetch with two or more
//    non-empty pieces, or one piece that is not one contiguous run, becomes
//    one MultiFetch (a single contiguous piece stays a memcpy, which is
//    cheaper); every Reduce of f32, i64 or bool becomes one MultiReduce. Not
//    when a piece's source bytes overlap the destination's bytes with a
//    different layout (one launch would read what it writes), nor when two
//    Fetch pieces overlap (the CPU backend's later piece wins), nor past the
//    kernel's rank: those keep the per-piece calls (and a Reduce its
//    scratch);
//  * `mapMultiFetch` builds the piece table (in plan piece order, which is
//    the CPU backend's summation order) and places it in the destination
//    GPU's table area;
//  * `checkMultiFetch` / `checkMultiFetchTables` are validateSchedule's
//    checks of the new kinds;
//  * `resolveMultiFetchTable` gives the bytes the kernel reads, for the
//    executor (device addresses) and the host emulator (host addresses).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDAMULTIFETCHTABLES_H
#define TOFU_RUNTIME_CUDA_CUDAMULTIFETCHTABLES_H

#include "CudaSchedule.h"

#include <functional>

namespace tofu::cuda {

/// Alignment of each table inside a GPU's table area.
constexpr uint64_t kMultiFetchTableAlignment = 64;

/// Whether Fetch/Reduce `in` of plan device `d` runs as one MultiFetch /
/// MultiReduce launch (see the file comment). Plan-only, so buildSchedule,
/// mapDevices (a Reduce run this way needs no scratch) and validateSchedule
/// agree.
bool runsAsOneLaunch(const plan::Plan &plan, int32_t d, const plan::Instr &in);

/// Appends the table of `in` (one with runsAsOneLaunch) to
/// `schedule.tables`, placed in its GPU's table area, and the op launching
/// it to `ops`. `schedule.mapping` must be set.
void mapMultiFetch(const plan::Plan &plan, Schedule &schedule, int32_t d,
                   const plan::Instr &in, std::vector<CudaOp> &ops);

/// Checks a MultiFetch/MultiReduce op of schedule entry `e` against the
/// plan: the table's GPU and kind, the destination inside the destination
/// device's slice with the plan's layout, every piece inside its source
/// device's slice and inside both boxes, Fetch pieces pairwise disjoint, and
/// the pieces exactly the plan's non-empty pieces in the plan's order (so
/// none is missing and a sum adds in the CPU backend's order). "" or what
/// is wrong.
std::string checkMultiFetch(const plan::Plan &plan, const Schedule &schedule,
                            const ScheduledInstr &e, const CudaOp &op);

/// Checks that every table lies inside its GPU's table area and that no two
/// tables of one GPU overlap.
std::string checkMultiFetchTables(const Schedule &schedule);

/// The bytes of table `table` as the kernel reads them, with `address`
/// giving each DevicePointer's address (device or host).
void resolveMultiFetchTable(
    const MultiFetchTable &table,
    const std::function<uint64_t(const DevicePointer &)> &address,
    std::vector<uint8_t> &bytes);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDAMULTIFETCHTABLES_H
