//===- RunReport.h - The JSON report of a tofu-run session -------*- C++ -*-===//
//
// Written by `tofu-run --report out.json`:
//   {"devices": k, "backend": "cpu", "batch_size": B,
//    "steps": [{"loss": .., "seconds": .., "comm_bytes": ..}, ...],
//    "samples_per_second": ..,
//    "peak_bytes": [{"device": d, "planned": .., "measured": ..}, ...],
//    "comm_bytes": {"planned": .., "measured": ..,
//                   "per_device": [{"device": d, "planned": ..,
//                                   "measured": ..}, ...]}}
// Byte counts are per training step; "measured" comm bytes are those of the
// last step (every step moves the same bytes). docs/TofuRun.md explains
// every key.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_RUNREPORT_H
#define TOFU_RUNTIME_RUNREPORT_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tofu::runtime {

struct RunReport {
  struct Step {
    double loss = 0;
    double seconds = 0;
    uint64_t commBytes = 0;
  };
  struct PlannedMeasured {
    uint64_t planned = 0, measured = 0;
  };
  uint32_t devices = 0;
  std::string backend;
  int64_t batchSize = 0;
  std::vector<Step> steps;
  double samplesPerSecond = 0;
  std::vector<PlannedMeasured> peakBytes;     ///< per device
  PlannedMeasured commBytes;                  ///< whole step
  std::vector<PlannedMeasured> commPerDevice; ///< bytes received per device
  /// Bytes copied per step by path (CUDA: "same device", "same GPU",
  /// "peer"); written only when not empty.
  std::vector<std::pair<std::string, uint64_t>> copyBytesByPath;
  /// Compute instructions run on the CPU expression interpreter, all steps
  /// and devices: (kernel name, count), by name; written always (an empty
  /// object: every op ran a native kernel).
  std::vector<std::pair<std::string, uint64_t>> interpretedInstructions;
  /// The CPU backend's schedule of the virtual devices ("concurrent" or
  /// "in-order", CpuBackend.h); written only when not empty.
  std::string schedule;

  /// The report as JSON text.
  std::string toJson() const;
  /// Writes toJson() to `path`; returns an error message on failure.
  std::string write(const std::string &path) const;
};

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_RUNREPORT_H
