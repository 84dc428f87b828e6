//===- TraceRecorder.h - Chrome/Perfetto timeline of a run -------*- C++ -*-===//
//
// Written by `tofu-run --trace trace.json`: the Chrome trace-event JSON format
// ({"traceEvents": [...], "displayTimeUnit": "ms"}), which chrome://tracing
// and ui.perfetto.dev open.
//
//  * One process per device: pid = device, named "device <d>" (metadata event
//    "M" process_name).
//  * Two threads (tracks) per device, named by "M" thread_name events:
//    tid 0 "compute" (Compute instructions), tid 1 "communication" (Fetch
//    and Reduce instructions).
//  * One complete event ("ph": "X", "ts"/"dur" in microseconds since the
//    recorder was created) per instruction that ran, for every step:
//      Compute: "name": "<kernel> <op>", "cat": "compute",
//               "args": {"step", "seq", "instr"}
//      Fetch:   "name": "fetch <tensor>",  "cat": "fetch",
//      Reduce:  "name": "reduce <tensor>", "cat": "reduce",
//               "args": {"step", "seq", "instr", "bytes"} where "bytes" is
//               what the device received from other devices; summed over a
//               step it equals the step's measured comm bytes in --report.
//    "step" is 1-based like tofu-run's step lines. Compute instructions that
//    have nothing to do on a device (empty share) are not recorded.
//
// The CPU backend runs the devices one instruction at a time, so the tracks
// never overlap in time; the timeline shows where each step's time goes.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_TRACERECORDER_H
#define TOFU_RUNTIME_TRACERECORDER_H

#include "tofu/runtime/CpuBackend.h"
#include "tofu/runtime/Plan.h"

#include <chrono>
#include <string>

namespace tofu::runtime {

class TraceRecorder {
public:
  /// Starts the clock (time 0 of the trace) and writes the metadata events.
  explicit TraceRecorder(const plan::Plan &plan);

  /// The step (0-based) whose instructions the next `record` calls belong to.
  void beginStep(int64_t step) { currentStep = step; }
  /// Records one executed instruction (pass as the executor's observer).
  void record(const CpuExecutor::ExecutedInstr &e);

  /// The trace as JSON text.
  std::string toJson() const;
  /// Writes toJson() to `path` atomically; returns an error message on
  /// failure.
  std::string write(const std::string &path) const;

private:
  const plan::Plan &plan;
  std::chrono::steady_clock::time_point origin;
  int64_t currentStep = 0;
  std::string events; ///< comma-separated JSON objects
};

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_TRACERECORDER_H
