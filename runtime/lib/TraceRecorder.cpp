//===- TraceRecorder.cpp - Chrome/Perfetto timeline of a run --------------===//

#include "tofu/runtime/TraceRecorder.h"
#include "tofu/runtime/AtomicFile.h"
#include "tofu/runtime/JsonQuoted.h"

#include <cstdio>

using namespace tofu::runtime;
using namespace tofu::plan;

namespace {

/// Microseconds with nanosecond resolution.
std::string micros(std::chrono::steady_clock::duration d) {
  char buf[40];
  std::snprintf(
      buf, sizeof(buf), "%.3f",
      std::chrono::duration<double, std::micro>(d).count());
  return buf;
}

constexpr int kComputeTrack = 0;
constexpr int kCommunicationTrack = 1;

} // namespace

TraceRecorder::TraceRecorder(const Plan &plan, int onlyDevice)
    : plan(plan), origin(std::chrono::steady_clock::now()) {
  auto meta = [&](const char *what, size_t pid, int tid,
                  const std::string &name) {
    if (!events.empty())
      events += ",\n";
    events += std::string("{\"name\": \"") + what +
              "\", \"ph\": \"M\", \"pid\": " + std::to_string(pid) +
              ", \"tid\": " + std::to_string(tid) +
              ", \"args\": {\"name\": " + jsonQuoted(name) + "}}";
  };
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    if (onlyDevice >= 0 && d != static_cast<size_t>(onlyDevice))
      continue;
    meta("process_name", d, kComputeTrack, "device " + std::to_string(d));
    meta("thread_name", d, kComputeTrack, "compute");
    meta("thread_name", d, kCommunicationTrack, "communication");
  }
}

void TraceRecorder::record(const CpuExecutor::ExecutedInstr &e) {
  const Instr &in = *e.instr;
  std::string name, cat;
  int tid = kComputeTrack;
  if (in.kind == Instr::Kind::Compute) {
    name = in.kernel + (in.op.empty() ? "" : " " + in.op);
    cat = "compute";
  } else {
    cat = in.kind == Instr::Kind::Fetch ? "fetch" : "reduce";
    const Buffer &dst = plan.devices[e.device].buffers[in.dst];
    name = cat + " " + plan.tensors[dst.tensor].name;
    tid = kCommunicationTrack;
  }
  if (!events.empty())
    events += ",\n";
  events += "{\"name\": " + jsonQuoted(name) + ", \"cat\": \"" + cat +
            "\", \"ph\": \"X\", \"ts\": " + micros(e.start - origin) +
            ", \"dur\": " + micros(e.end - e.start) +
            ", \"pid\": " + std::to_string(e.device) +
            ", \"tid\": " + std::to_string(tid) +
            ", \"args\": {\"step\": " + std::to_string(currentStep + 1) +
            ", \"seq\": " + std::to_string(in.seq) +
            ", \"instr\": " + std::to_string(e.index);
  if (in.kind != Instr::Kind::Compute)
    events += ", \"bytes\": " + std::to_string(e.remoteBytes);
  else if (e.interpreted)
    events += ", \"path\": \"interpreter\"";
  events += "}}";
}

std::string TraceRecorder::toJson() const { return toJson({events}); }

std::string TraceRecorder::toJson(const std::vector<std::string> &eventLists) {
  std::string json = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  for (const std::string &list : eventLists) {
    if (list.empty())
      continue;
    if (!first)
      json += ",\n";
    json += list;
    first = false;
  }
  return json + "\n]}\n";
}

std::string TraceRecorder::write(const std::string &path) const {
  return write(path, toJson());
}

std::string TraceRecorder::write(const std::string &path,
                                 const std::string &json) {
  return writeFileAtomically(path, json.data(), json.size());
}
