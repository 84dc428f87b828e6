//===- Calibrate.cpp - tofu-run --calibrate: measure this machine ---------===//
//
// See Calibrate.h. What each number of the description is:
//
//  compute.f32.gemm    MatMul kernel, 1024 x 1024 x 1024: 2 m n k / median time
//  gemm_half_extent    h from the 16 x 1024 x 1024 MatMul's rate r relative to
//                      the large one: s(16) / s(1024) = r, s(x) = x / (x + h)
//  compute.f32.conv    Conv kernel, X [8, 64, 32, 32], W [64, 64, 3, 3], pads 1
//  compute.f32.vector  Add kernel on 16384 floats (in cache): elements / time
//  memory              Add kernel on 8M floats: 3 x 4 bytes per element / time
//  launch_seconds      the executor's time per instruction on a plan of 2
//                      virtual devices running 2000 Relus of 64 floats each
//                      (at least the time of one Add kernel call on 1 float)
//  transcendental_flops  Tanh kernel on 16384 floats: its time over the Add's
//  links[memcpy]       a 64 MiB copy between two buffers (what a fetch between
//                      virtual devices does): bytes / time; latency: the time
//                      of a 64-byte copy
//  (reduction)         BiasGrad kernel, [4096, 1024] -> [1024]: recorded in
//                      the sources (vector work; not a separate class)
//  memory.bytes        the host's physical memory (sysconf)
//
// Kernel calls go through lookupKernel, as tofu-run's executor makes them
// (same threads, same BLAS); the executor's own per-instruction work is not
// in launch_seconds.
//
//===----------------------------------------------------------------------===//
#include "Calibrate.h"

#include "tofu/runtime/AtomicFile.h"
#include "tofu/runtime/CpuBackend.h"
#include "tofu/runtime/Kernels.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <sstream>
#include <unistd.h>
#include <vector>

namespace tofu::runtime {

namespace {

using Clock = std::chrono::steady_clock;

/// The median seconds of one call of `body`: repeated until `minSeconds`
/// have passed and at least `minRuns` runs (after one warm-up call).
double medianSeconds(const std::function<std::string()> &body,
                     std::string &error, double minSeconds = 0.3,
                     int minRuns = 5) {
  if (std::string err = body(); !err.empty()) {
    error = err;
    return 0;
  }
  std::vector<double> times;
  auto start = Clock::now();
  while (times.size() < static_cast<size_t>(minRuns) ||
         std::chrono::duration<double>(Clock::now() - start).count() <
             minSeconds) {
    auto t0 = Clock::now();
    if (std::string err = body(); !err.empty()) {
      error = err;
      return 0;
    }
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    if (times.size() >= 100000)
      break;
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// A float32 tensor filled with small values.
struct Tensor {
  std::vector<float> data;
  std::vector<int64_t> shape;
  explicit Tensor(std::vector<int64_t> dims) : shape(std::move(dims)) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    data.resize(n);
    for (int64_t i = 0; i < n; ++i)
      data[i] = static_cast<float>((i % 7) - 3) * 0.125f;
  }
  TensorView view() {
    return TensorView::whole(data.data(), plan::DType::F32, shape);
  }
};

/// Median seconds of kernel `name` on `inputs` -> `output`.
double timeKernel(const char *name, std::vector<Tensor *> inputs,
                  Tensor &output, const std::vector<plan::Attr> &attrs,
                  std::string &error, double minSeconds = 0.3) {
  KernelFn kernel = lookupKernel(name);
  if (!kernel) {
    error = std::string("no native kernel ") + name;
    return 0;
  }
  KernelArgs args;
  for (Tensor *input : inputs)
    args.inputs.push_back(input->view());
  args.outputs.push_back(output.view());
  args.attrs = &attrs;
  double seconds = medianSeconds([&] { return kernel(args); }, error,
                                 minSeconds);
  if (!error.empty())
    error = std::string(name) + ": " + error;
  return seconds;
}

plan::Attr intsAttr(const char *name, std::vector<int64_t> values) {
  plan::Attr attr;
  attr.name = name;
  attr.kind = plan::Attr::Kind::Ints;
  attr.ints = std::move(values);
  return attr;
}

/// A plan of 2 virtual devices, each running `count` instructions on a
/// 64-float tensor: Relu computes (fetches = false) or fetches of the other
/// device's copy (fetches = true). What tofu-run's executor spends per
/// instruction, its own work included.
plan::Plan tinyPlan(int count, bool fetches) {
  plan::Plan p;
  p.numDevices = 2;
  plan::TensorInfo x;
  x.name = "x";
  x.shape = {64};
  p.tensors.push_back(x);
  plan::Box whole{{0}, {64}};
  p.devices.resize(2);
  for (int32_t d = 0; d < 2; ++d) {
    plan::DeviceProgram &dev = p.devices[d];
    for (int b = 0; b < 2; ++b) {
      plan::Buffer buffer;
      buffer.tensor = 0;
      buffer.region = whole;
      buffer.owned = b == 0;
      buffer.offset = 256 * b;
      buffer.bytes = 256;
      dev.buffers.push_back(buffer);
    }
    dev.peakBytes = 512;
    for (int i = 0; i < count; ++i) {
      plan::Instr in;
      in.seq = i;
      in.op = "calibrate";
      if (fetches) {
        in.kind = plan::Instr::Kind::Fetch;
        in.dst = 1;
        in.pieces.push_back({1 - d, 0, whole});
      } else {
        in.kind = plan::Instr::Kind::Compute;
        in.kernel = "Relu";
        in.inputs = {0};
        in.outputs = {1};
        in.editSpec().inputGlobalShapes = {{64}};
        in.editSpec().outputGlobalShapes = {{64}};
        in.reductionRanges = {{}};
      }
      dev.instrs.push_back(in);
    }
  }
  return p;
}

/// Median seconds per instruction of tinyPlan(count, fetches) on the CPU
/// executor.
double secondsPerInstruction(bool fetches, std::string &error) {
  constexpr int kCount = 2000;
  plan::Plan p = tinyPlan(kCount, fetches);
  CpuExecutor executor(p);
  if (std::string err = executor.init(); !err.empty()) {
    error = "the executor refused the calibration plan: " + err;
    return 0;
  }
  int64_t step = 0;
  // The first steps choose the schedule (CpuExecutor::Schedule::Auto).
  for (int i = 0; i < 4; ++i)
    if (std::string err = executor.runStep(step++); !err.empty()) {
      error = err;
      return 0;
    }
  double seconds = medianSeconds(
      [&] { return executor.runStep(step++); }, error, 0.5);
  return seconds / (2.0 * kCount);
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", value);
  return text;
}

/// A JSON string literal (the texts here are ASCII without control
/// characters, but quote and backslash are escaped anyway).
std::string quoted(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

} // namespace

std::string calibrateDevice(const std::string &path, std::ostream &log) {
  if (std::string kind = outputPathKind(path); !kind.empty() &&
                                               kind != "direct")
    return "--calibrate: cannot write the description: " + kind;
  std::string error;
  std::vector<std::string> sources;
  auto note = [&](const std::string &line) {
    log << "tofu-run: calibrate: " << line << "\n";
    sources.push_back(line);
  };
  const std::vector<plan::Attr> none;

  // GEMM: large and skinny.
  double gemmRate = 0, skinnyRate = 0;
  {
    Tensor a({1024, 1024}), b({1024, 1024}), y({1024, 1024});
    double t = timeKernel("MatMul", {&a, &b}, y, none, error, 1.0);
    if (!error.empty())
      return "--calibrate: " + error;
    gemmRate = 2.0 * 1024 * 1024 * 1024 / t;
    note("MatMul 1024x1024x1024: " + number(t) + " s, " +
         number(gemmRate / 1e9) + " GFLOP/s");
    Tensor s({16, 1024}), ys({16, 1024});
    t = timeKernel("MatMul", {&s, &b}, ys, none, error);
    if (!error.empty())
      return "--calibrate: " + error;
    skinnyRate = 2.0 * 16 * 1024 * 1024 / t;
    note("MatMul 16x1024x1024: " + number(t) + " s, " +
         number(skinnyRate / 1e9) + " GFLOP/s");
  }
  // s(16) / s(1024) = r with s(x) = x / (x + h): h = 16384 (1 - r) /
  // (1024 r - 16), clamped to [1, 4096].
  double r = std::min(skinnyRate / gemmRate, 1.0);
  double half = 1024 * r > 16 ? 16384 * (1 - r) / (1024 * r - 16) : 4096;
  half = std::clamp(half, 1.0, 4096.0);
  note("gemm_half_extent " + number(half) + " from the 16-row GEMM at " +
       number(r) + " of the large one's rate");

  // Convolution.
  double convRate = 0;
  {
    Tensor x({8, 64, 32, 32}), w({64, 64, 3, 3}), y({8, 64, 32, 32});
    std::vector<plan::Attr> attrs = {intsAttr("pads", {1, 1, 1, 1}),
                                     intsAttr("kernel_shape", {3, 3})};
    double t = timeKernel("Conv", {&x, &w}, y, attrs, error, 1.0);
    if (!error.empty())
      return "--calibrate: " + error;
    convRate = 2.0 * 8 * 64 * 32 * 32 * 64 * 9 / t;
    note("Conv X [8,64,32,32] W [64,64,3,3] pads 1: " + number(t) + " s, " +
         number(convRate / 1e9) + " GFLOP/s");
  }

  // Element-wise: in cache (vector rate), streaming (memory bandwidth), one
  // element (launch).
  double vectorRate = 0, memoryRate = 0, launch = 0, transcendental = 1;
  {
    Tensor a({16384}), b({16384}), y({16384});
    double t = timeKernel("Add", {&a, &b}, y, none, error);
    if (!error.empty())
      return "--calibrate: " + error;
    vectorRate = 16384 / t;
    note("Add 16384 floats (in cache): " + number(t) + " s, " +
         number(vectorRate / 1e9) + " GFLOP/s");
    double tanh = timeKernel("Tanh", {&a}, y, none, error);
    if (!error.empty())
      return "--calibrate: " + error;
    transcendental = std::max(1.0, tanh / t);
    note("Tanh 16384 floats (in cache): " + number(tanh) + " s, " +
         number(transcendental) + " x the Add");
    Tensor la({8 << 20}), lb({8 << 20}), ly({8 << 20});
    t = timeKernel("Add", {&la, &lb}, ly, none, error, 1.0);
    if (!error.empty())
      return "--calibrate: " + error;
    memoryRate = 3.0 * 4 * (8 << 20) / t;
    note("Add 8M floats (streaming 3 x 32 MiB): " + number(t) + " s, " +
         number(memoryRate / 1e9) + " GB/s");
    Tensor oa({1}), ob({1}), oy({1});
    launch = timeKernel("Add", {&oa, &ob}, oy, none, error);
    if (!error.empty())
      return "--calibrate: " + error;
    note("Add 1 float (one kernel call, without the executor): " +
         number(launch) + " s");
  }

  // The executor's cost per instruction: a tiny Relu, a tiny fetch from
  // the other virtual device.
  double perCompute = 0, perFetch = 0;
  {
    perCompute = secondsPerInstruction(false, error);
    if (!error.empty())
      return "--calibrate: " + error;
    note("executor: a Relu of 64 floats on 2 virtual devices: " +
         number(perCompute) + " s per instruction (launch_seconds)");
    launch = std::max(launch, perCompute);
    perFetch = secondsPerInstruction(true, error);
    if (!error.empty())
      return "--calibrate: " + error;
    note("executor: a fetch of 64 floats from the other virtual device: " +
         number(perFetch) + " s per instruction");
  }

  // Reduction (recorded; vector work in the model).
  {
    Tensor dy({4096, 1024}), db({1024});
    double t = timeKernel("BiasGrad", {&dy}, db, none, error);
    if (!error.empty())
      return "--calibrate: " + error;
    note("BiasGrad [4096,1024] -> [1024] (reduction): " + number(t) +
         " s, " + number(4096.0 * 1024 / t / 1e9) + " GFLOP/s, " +
         number(4.0 * 4096 * 1024 / t / 1e9) + " GB/s read");
  }

  // Copies between virtual devices.
  double linkRate = 0, linkLatency = 0;
  {
    std::vector<uint8_t> src(64 << 20, 1), dst(64 << 20);
    double t = medianSeconds(
        [&] {
          std::memcpy(dst.data(), src.data(), src.size());
          return std::string();
        },
        error, 1.0);
    linkRate = src.size() / t;
    note("copy 64 MiB between buffers: " + number(t) + " s, " +
         number(linkRate / 1e9) + " GB/s");
    linkLatency = medianSeconds(
        [&] {
          std::memcpy(dst.data(), src.data() + (dst[0] & 1), 64);
          return std::string();
        },
        error);
    note("copy 64 bytes: " + number(linkLatency) + " s");
    // A fetch instruction costs the model one launch plus the piece's
    // latency: what the executor spends on a tiny fetch beyond a launch.
    linkLatency = std::max(perFetch - perCompute, linkLatency);
    linkLatency = std::max(linkLatency, 1e-8);
    note("latency_seconds " + number(linkLatency) +
         ": a tiny fetch's time less a tiny compute's");
  }

  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  uint64_t memoryBytes =
      pages > 0 && pageSize > 0 ? uint64_t(pages) * uint64_t(pageSize) : 0;
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  std::time_t now = std::time(nullptr);
  char date[64] = "";
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  double load[3] = {0, 0, 0};
  if (FILE *f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3)
      load[0] = -1;
    std::fclose(f);
  }
  note("measured by tofu-run --calibrate on " + std::string(date) +
       ", load average " + number(load[0]) + ", " +
       std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " CPUs online");

  std::ostringstream json;
  json << "{\n  \"format\": \"tofu-device/1\",\n"
       << "  \"name\": " << quoted("calibrated") << ",\n"
       << "  \"description\": "
       << quoted("This machine as tofu-run's CPU backend runs it: every "
                 "rate is a measured median of tofu-run's own kernels "
                 "(efficiency 1); k virtual devices share the host.")
       << ",\n  \"sources\": [\n";
  for (size_t i = 0; i < sources.size(); ++i)
    json << "    " << quoted(sources[i]) << (i + 1 < sources.size() ? "," : "")
         << "\n";
  json << "  ],\n  \"compute\": {\n    \"f32\": {"
       << "\"gemm\": {\"peak_flops\": " << number(gemmRate)
       << ", \"efficiency\": 1},\n             \"conv\": {\"peak_flops\": "
       << number(convRate)
       << ", \"efficiency\": 1},\n             \"vector\": {\"peak_flops\": "
       << number(vectorRate) << ", \"efficiency\": 1}}\n  },\n"
       << "  \"memory\": {";
  if (memoryBytes)
    json << "\"bytes\": " << memoryBytes << ", ";
  json << "\"bytes_per_second\": " << number(memoryRate)
       << ", \"efficiency\": 1},\n"
       << "  \"launch_seconds\": " << number(std::max(launch, 1e-9))
       << ",\n"
       << "  \"gemm_half_extent\": " << number(half) << ",\n"
       << "  \"transcendental_flops\": " << number(transcendental) << ",\n"
       << "  \"links\": [{\"name\": \"memcpy\", \"gbps\": "
       << number(linkRate / 1e9)
       << ", \"latency_seconds\": " << number(linkLatency) << "}],\n"
       << "  \"shared_host\": true\n}\n";
  std::string text = json.str();
  if (std::string err = writeFileAtomically(path, text.data(), text.size());
      !err.empty())
    return "--calibrate: " + err;
  log << "tofu-run: calibrate: wrote " << path << "\n";
  return "";
}

} // namespace tofu::runtime
