//===- SharedPrograms.h - One program per class of devices -------*- C++ -*-===//
//
// In Tofu's regular partitions the devices of a group do the same work on
// different tiles: their programs are the same up to the regions of their
// buffers and the bounds of their reduction ranges. tofuc's materialize
// keeps one program per class of such devices (DeviceProgram::programOf)
// and each device's own regions and bounds beside it, so that a plan for
// 1024 devices does not hold 1024 copies of one program; writePlan stores
// it as format 4.0 does (one Program per class). Code that needs every
// device's own program expands the plan first (expandSharedPrograms);
// readPlan always gives expanded plans.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_SHAREDPROGRAMS_H
#define TOFU_RUNTIME_SHAREDPROGRAMS_H

#include "tofu/runtime/Plan.h"

namespace tofu::plan {

/// True when two buffers are the same in a shared program: everything but
/// their regions (which each device has) is equal.
bool sameInProgram(const Buffer &a, const Buffer &b);

/// True when two instructions are the same in a shared program: everything
/// but the bounds of their reduction ranges (which each device has) is
/// equal. Op specs and source tables must be the same objects; without a
/// source table the explicit pieces must be equal (device, buffer and
/// region).
bool sameInProgram(const Instr &a, const Instr &b);

/// True when some device of `plan` runs another device's program.
bool hasSharedPrograms(const Plan &plan);

/// Per device that owns its program, the devices that run it, in increasing
/// order (itself among them); empty for the others. Passes that derive
/// something once per program and then per device go program by program.
std::vector<std::vector<uint32_t>> devicesByProgram(const Plan &plan);

/// Gives device `device`, which shares another's program, its own copy with
/// its own regions and reduction bounds (and the owner's regionStarts, for
/// devices that may share the copy next).
void detachSharedProgram(Plan &plan, size_t device);

/// Splits the classes of devices that share programs by `keys` (one per
/// device): a device whose key differs from its program owner's runs a
/// program of its own, shared with the later devices of the same owner and
/// key (the first of them gets a copy, detachSharedProgram).
void splitSharedPrograms(Plan &plan,
                         const std::vector<std::vector<int64_t>> &keys);

/// Reorders the instructions of the program device `owner` owns: position
/// i gets old instruction order[i] (instructions not named are dropped);
/// the bounds of the devices sharing the program move alike.
void reorderProgramInstrs(Plan &plan, size_t owner,
                          const std::vector<uint32_t> &order);

/// Gives every device that shares another's program its own copy, with its
/// own regions and reduction bounds, and drops the shared tables: the plan
/// every device of which owns its program, as a plan read from plan.bin is.
void expandSharedPrograms(Plan &plan);

} // namespace tofu::plan

#endif // TOFU_RUNTIME_SHAREDPROGRAMS_H
