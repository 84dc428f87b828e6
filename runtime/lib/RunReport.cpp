//===- RunReport.cpp - The JSON report of a tofu-run session --------------===//

#include "tofu/runtime/RunReport.h"
#include "tofu/runtime/AtomicFile.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

using namespace tofu::runtime;

namespace {

/// A JSON number with `digits` significant digits; NaN and infinities (not
/// representable) become null.
std::string number(double v, int digits = 9) {
  if (!std::isfinite(v))
    return "null";
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
  return buf;
}

std::string pm(const RunReport::PlannedMeasured &p) {
  return "\"planned\": " + std::to_string(p.planned) +
         ", \"measured\": " + std::to_string(p.measured);
}

} // namespace

std::string RunReport::toJson() const {
  std::string j = "{\n";
  j += "  \"devices\": " + std::to_string(devices) + ",\n";
  j += "  \"backend\": \"" + backend + "\",\n";
  j += "  \"batch_size\": " + std::to_string(batchSize) + ",\n";
  j += "  \"steps\": [";
  for (size_t i = 0; i < steps.size(); ++i)
    j += std::string(i ? ",\n    " : "\n    ") + "{\"loss\": " +
         number(steps[i].loss, 17) + ", \"seconds\": " + number(steps[i].seconds) +
         ", \"comm_bytes\": " + std::to_string(steps[i].commBytes) + "}";
  j += steps.empty() ? "],\n" : "\n  ],\n";
  j += "  \"samples_per_second\": " + number(samplesPerSecond) + ",\n";
  j += "  \"peak_bytes\": [";
  for (size_t d = 0; d < peakBytes.size(); ++d)
    j += std::string(d ? ", " : "") + "{\"device\": " + std::to_string(d) +
         ", " + pm(peakBytes[d]) + "}";
  j += "],\n";
  j += "  \"comm_bytes\": {" + pm(commBytes) + ", \"per_device\": [";
  for (size_t d = 0; d < commPerDevice.size(); ++d)
    j += std::string(d ? ", " : "") + "{\"device\": " + std::to_string(d) +
         ", " + pm(commPerDevice[d]) + "}";
  j += "]}";
  if (!copyBytesByPath.empty()) {
    j += ",\n  \"copy_bytes_by_path\": {";
    for (size_t p = 0; p < copyBytesByPath.size(); ++p)
      j += std::string(p ? ", " : "") + "\"" + copyBytesByPath[p].first +
           "\": " + std::to_string(copyBytesByPath[p].second);
    j += "}";
  }
  j += ",\n  \"interpreted_instructions\": {";
  for (size_t p = 0; p < interpretedInstructions.size(); ++p)
    j += std::string(p ? ", " : "") + "\"" + interpretedInstructions[p].first +
         "\": " + std::to_string(interpretedInstructions[p].second);
  j += "}";
  if (!schedule.empty())
    j += ",\n  \"cpu_schedule\": \"" + schedule + "\"";
  j += "\n}\n";
  return j;
}

std::string RunReport::write(const std::string &path) const {
  const std::string json = toJson();
  if (std::string err = writeFileAtomically(path, json.data(), json.size());
      !err.empty())
    return "cannot write report: " + err;
  return "";
}
