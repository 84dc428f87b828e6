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
// In one process the CPU backend runs the devices one instruction at a time,
// so the tracks never overlap in time; the timeline shows where each step's
// time goes. With one process per device each rank records only its own
// device (`TraceRecorder(plan, device)`), restarts its clock right after a
// barrier of all ranks (so time 0 is the same moment everywhere, up to the
// barrier's message latency), and rank 0 gathers every rank's events
// (`eventsJson`) into one file (`toJson(all)`): the same layout, with the
// devices' tracks now running concurrently.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_TRACERECORDER_H
#define TOFU_RUNTIME_TRACERECORDER_H

#include "tofu/runtime/CpuBackend.h"
#include "tofu/runtime/Plan.h"

#include <chrono>
#include <string>
#include <vector>

namespace tofu::runtime {

class TraceRecorder {
public:
  /// Starts the clock (time 0 of the trace) and writes the metadata events
  /// of every device, or of `onlyDevice` alone when it is >= 0 (one process
  /// per device).
  explicit TraceRecorder(const plan::Plan &plan, int onlyDevice = -1);

  /// Makes now time 0 of the trace (call on every rank right after a
  /// barrier, before the first step).
  void restartClock() { origin = std::chrono::steady_clock::now(); }

  /// The step (0-based) whose instructions the next `record` calls belong to.
  void beginStep(int64_t step) { currentStep = step; }
  /// Records one executed instruction (pass as the executor's observer).
  void record(const CpuExecutor::ExecutedInstr &e);

  /// The recorded events: comma-separated JSON objects (no brackets).
  const std::string &eventsJson() const { return events; }
  /// The trace as JSON text.
  std::string toJson() const;
  /// One trace of the events of several recorders (eventsJson() of each
  /// rank, in rank order).
  static std::string toJson(const std::vector<std::string> &eventLists);
  /// Writes toJson() to `path` atomically; returns an error message on
  /// failure.
  std::string write(const std::string &path) const;
  /// Writes `json` (a trace) to `path` atomically.
  static std::string write(const std::string &path, const std::string &json);

private:
  const plan::Plan &plan;
  std::chrono::steady_clock::time_point origin;
  int64_t currentStep = 0;
  std::string events; ///< comma-separated JSON objects
};

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_TRACERECORDER_H
