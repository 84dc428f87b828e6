//===- Calibrate.cpp - tofu-run --calibrate: measure this machine ---------===//
//
// See Calibrate.h. What each number of the description is:
//
//  compute.f32.gemm    MatMul kernel, 1024 x 1024 x 1024: 2 m n k / time
//  gemm_half_extent    h from the 16 x 1024 x 1024 MatMul's rate r relative to
//                      the large one: s(16) / s(1024) = r, s(x) = x / (x + h)
//  gemm_pack_passes    the same MatMul right after a streaming Add over 96 MiB
//                      (its 4 MiB operand in memory): its time beyond the
//                      hot one over one read of its operands at the
//                      memory rate, in [1, 16]
//  wave_seconds        the plan of launch_seconds with its 2 devices side
//                      by side (each level handed to the worker pool): its
//                      time per level less one Relu's
//  compute.f32.conv    Conv kernel, X [8, 64, 32, 32], W [64, 64, 3, 3], pads 1
//  compute.f32.vector  Add kernel on 16384 floats (in cache): elements / time
//  memory              Add kernel on 8M floats: 3 x 4 bytes per element / time
//  memory.cache_*      Add kernels of 64K floats (3 x 256 KiB) and of 1M
//                      floats (3 x 4 MiB), each reading the outputs of the
//                      two Adds before it (rings of 8 buffers: data passed
//                      from kernel to kernel as in a step, not re-read hot
//                      in a loop): two levels, each one where its
//                      Add runs at least 1.5 x the next slower rate (the
//                      larger as cache_*, the smaller inside it as
//                      inner_cache_*); one level of the traffic that runs at
//                      twice the streaming rate or more otherwise
//  launch_seconds      the executor's time per instruction on a plan of 2
//                      virtual devices running 2000 Relus of 64 floats each
//                      (at least the time of one Add kernel call on 1 float)
//  transcendental_flops  Exp kernel on 8192 floats (one libm call per element,
//                      as the kernels without a vectorized float32 form
//                      compute): its time per element over the Add's (both
//                      on one thread)
//  step_overhead_seconds  the executor's step of a plan without instructions
//  feed_seconds_per_element  the executor's step of a plan that only feeds
//                      a classifier's batch (features [32, 3, 32, 32] and
//                      their labels [32], tofu-run's synthetic data), less
//                      the empty step, per element fed
//  links[memcpy]       a 64 MiB copy between two buffers (what a fetch between
//                      virtual devices does): bytes / time; latency: a tiny
//                      fetch's time less a tiny compute's, at least the time
//                      of a 64-byte copy
//  kernels             per element of the largest operand, each of Add,
//                      Mul, Sub, Relu, ReluGrad, Sigmoid, SigmoidGrad, Tanh,
//                      TanhGrad, Gelu, GeluGrad, SGDUpdate (flat), Softmax,
//                      SoftmaxGrad, LayerNormalization and its gradient, the
//                      softmax cross entropy loss and its gradient, BiasGrad
//                      (rows of 128)
//                      and ConvBiasGrad, BatchNormalization and its gradient
//                      (X [8, C, H, W]; inference mode, and training mode as
//                      "BatchNormalization.training" and
//                      "BatchNormalizationGrad.training"),
//                      BatchNormalizationNormalized (both modes), MaxPool
//                      and MaxPoolGrad (3 x 3 windows, stride 2, pads 1,
//                      per element of X), at 16384
//                      elements on one thread (runOnThisThread: as a
//                      step's small calls and every kernel beside other
//                      devices' run) and 1M elements as the kernel runs;
//                      and `threads_from`, the fewest elements (a power of
//                      two from 2^10 to 2^20) at which a call used the
//                      worker pool (poolRuns), 2^21 when none did
//  (reduction)         BiasGrad kernel, [4096, 1024] -> [1024]: recorded in
//                      the sources (vector work; not a separate class)
//  memory.bytes        the host's physical memory (sysconf)
//
// Steadiness: a short probe catches whatever else the (shared) machine does
// at that moment, so two calibrations minutes apart differed by up to 40%
// in a predicted step. Every probe is therefore measured in kRounds rounds,
// interleaved (round 1 of every probe, then round 2, ...: a busy spell
// slows one round of several probes, not every round of one); a round is
// the median of repeated calls over at least its window, after a warm-up
// call; the value kept is the median round's (the machine as it typically
// runs), and the spread of the rounds is logged. (It was the fastest
// round's, the machine as it runs when nothing else does; but this VM's
// speed varies by up to 2x over seconds even when idle, rounds spread
// 60-90%, so the fastest round predicted every median step low:
// bench/simulate.md.)
// Calls far shorter than the clock's resolution are timed in batches.
//
// Kernel calls go through lookupKernel, as tofu-run's executor makes them
// (same threads, same BLAS); the executor's own per-instruction and
// per-step work is measured on small plans run by the executor itself.
//
//===----------------------------------------------------------------------===//
#include "Calibrate.h"

#include "tofu/runtime/AtomicFile.h"
#include "tofu/runtime/JsonQuoted.h"
#include "tofu/runtime/CpuBackend.h"
#include "tofu/runtime/Kernels.h"

#include "../lib/ParallelFor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <sstream>
#include <thread>
#include <unistd.h>
#include <vector>

namespace tofu::runtime {

namespace {

using Clock = std::chrono::steady_clock;

/// Rounds per probe (see the file comment).
constexpr int kRounds = 5;

/// The output sizes of the per-kernel costs: tofuc's
/// DeviceModel::kSmallElements and kLargeElements (the runtime does not
/// link the compiler's headers).
constexpr double kKernelSmallElements = 16384;
constexpr double kKernelLargeElements = 1 << 20;

/// One measurement: `body` runs the measured work `calls` times and returns
/// an error or "". Its result is seconds per call.
struct Probe {
  std::string name;
  std::function<std::string()> body;
  /// How long one round keeps calling `body` (at least 3 calls).
  double window = 0.1;
  /// Calls of the measured work per call of `body`.
  int calls = 1;
  /// Run before every call of `body`, untimed (null: nothing).
  std::function<void()> before;
  /// Per round: the median seconds per call.
  std::vector<double> rounds;
  /// The median round's median: the machine as it typically runs, which
  /// is what a median step measures (see the file comment).
  double seconds() const {
    if (rounds.empty())
      return 0;
    std::vector<double> sorted = rounds;
    std::sort(sorted.begin(), sorted.end());
    return sorted[sorted.size() / 2];
  }
  /// (slowest round - fastest round) / fastest round.
  double spread() const {
    if (rounds.empty())
      return 0;
    auto [lo, hi] = std::minmax_element(rounds.begin(), rounds.end());
    return *lo > 0 ? (*hi - *lo) / *lo : 0;
  }
};

/// One round of `probe`: a warm-up call, then calls until `window` seconds
/// and at least 3 calls; appends the median seconds per measured call.
std::string runRound(Probe &probe) {
  if (std::string err = probe.body(); !err.empty())
    return probe.name + ": " + err;
  std::vector<double> times;
  const auto start = Clock::now();
  while (times.size() < 3 ||
         std::chrono::duration<double>(Clock::now() - start).count() <
             probe.window) {
    if (probe.before)
      probe.before();
    const auto t0 = Clock::now();
    if (std::string err = probe.body(); !err.empty())
      return probe.name + ": " + err;
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count() /
                    probe.calls);
    if (times.size() >= 100000)
      break;
  }
  std::sort(times.begin(), times.end());
  probe.rounds.push_back(times[times.size() / 2]);
  return "";
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

/// The first elements of `t`, viewed with `shape`.
TensorView viewAs(Tensor &t, std::vector<int64_t> shape) {
  return TensorView::whole(t.data.data(), plan::DType::F32, std::move(shape));
}

/// A probe calling kernel `name` on views `inputs` -> `output`, `calls`
/// times per timed sample. The data and attributes must outlive the probe.
Probe viewProbe(std::string label, const char *name,
                std::vector<TensorView> inputs, TensorView output,
                const std::vector<plan::Attr> &attrs, double window,
                int calls, bool oneThread = false) {
  Probe probe;
  probe.name = std::move(label);
  probe.window = window;
  probe.calls = calls;
  KernelFn kernel = lookupKernel(name);
  auto args = std::make_shared<KernelArgs>();
  args->inputs = std::move(inputs);
  args->outputs.push_back(std::move(output));
  args->attrs = &attrs;
  std::string kernelName = name;
  probe.body = [kernel, args, calls, kernelName, oneThread]() -> std::string {
    if (!kernel)
      return "no native kernel " + kernelName;
    std::string err;
    auto run = [&] {
      for (int i = 0; i < calls && err.empty(); ++i)
        err = kernel(*args);
    };
    if (oneThread)
      runOnThisThread(run);
    else
      run();
    return err;
  };
  return probe;
}

/// A probe calling kernel `name` on `inputs` -> `output`, `calls` times per
/// timed sample. The tensors and attributes must outlive the probe.
Probe kernelProbe(std::string label, const char *name,
                  std::vector<Tensor *> inputs, Tensor &output,
                  const std::vector<plan::Attr> &attrs, double window,
                  int calls = 1) {
  std::vector<TensorView> views;
  for (Tensor *input : inputs)
    views.push_back(input->view());
  return viewProbe(std::move(label), name, std::move(views), output.view(),
                   attrs, window, calls);
}

/// Adds over a ring of buffers, as a step passes data from kernel to
/// kernel: call i writes ring[(i + 2) % size] = ring[i % size] +
/// ring[(i + 1) % size], so each Add reads the outputs of the two Adds
/// before it (written one and two calls earlier, with the ring's other
/// buffers touched since) instead of the same three buffers every call.
/// `calls` Adds per timed sample; the ring must outlive the probe.
Probe ringProbe(std::string label, std::vector<Tensor> &ring, double window,
                int calls) {
  Probe probe;
  probe.name = std::move(label);
  probe.window = window;
  probe.calls = calls;
  KernelFn kernel = lookupKernel("Add");
  auto next = std::make_shared<size_t>(0);
  static const std::vector<plan::Attr> none;
  probe.body = [kernel, &ring, next, calls]() -> std::string {
    if (!kernel)
      return "no native kernel Add";
    KernelArgs args;
    args.attrs = &none;
    for (int c = 0; c < calls; ++c, ++*next) {
      const size_t i = *next;
      args.inputs = {ring[i % ring.size()].view(),
                     ring[(i + 1) % ring.size()].view()};
      args.outputs = {ring[(i + 2) % ring.size()].view()};
      if (std::string err = kernel(args); !err.empty())
        return err;
    }
    return "";
  };
  return probe;
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

/// A plan of one device that runs no instruction and, with `feeds`, is fed
/// a classifier's batch each step: features [32, 3, 32, 32] (float32) and
/// their labels [32] (10 classes), tofu-run's synthetic data.
plan::Plan feedPlan(bool feeds) {
  plan::Plan p;
  p.numDevices = 1;
  p.devices.resize(1);
  plan::DeviceProgram &dev = p.devices[0];
  // A buffer of a parameter, so that the device has an arena either way.
  plan::TensorInfo w;
  w.name = "w";
  w.shape = {1};
  w.role = plan::TensorRole::Param;
  p.tensors.push_back(w);
  plan::Buffer wb;
  wb.tensor = 0;
  wb.region = {{0}, {1}};
  wb.owned = true;
  wb.bytes = 4;
  dev.buffers.push_back(wb);
  uint64_t offset = 64;
  if (feeds) {
    plan::TensorInfo x;
    x.name = "features";
    x.shape = {32, 3, 32, 32};
    x.role = plan::TensorRole::Input;
    plan::TensorInfo y;
    y.name = "labels";
    y.dtype = plan::DType::I64;
    y.shape = {32};
    y.role = plan::TensorRole::Label;
    y.numClasses = 10;
    y.pairedInput = 1;
    p.tensors.push_back(x);
    p.tensors.push_back(y);
    for (int32_t t : {1, 2}) {
      plan::Buffer buffer;
      buffer.tensor = t;
      buffer.owned = true;
      for (int64_t extent : p.tensors[t].shape) {
        buffer.region.lo.push_back(0);
        buffer.region.hi.push_back(extent);
      }
      buffer.offset = offset;
      buffer.bytes = static_cast<uint64_t>(buffer.region.numElements()) *
                     plan::dtypeSize(p.tensors[t].dtype);
      offset += buffer.bytes;
      dev.buffers.push_back(buffer);
    }
  }
  dev.peakBytes = offset;
  return p;
}

/// Elements feedPlan(true) feeds per step.
constexpr double kFedElements = 32.0 * 3 * 32 * 32 + 32;

/// A probe of one step of `plan` on the CPU executor (by default in
/// order: one instruction at a time, as a single device's plan always
/// runs). The plan and executor live in the probe.
Probe executorProbe(
    std::string label, plan::Plan plan, double window, std::string &error,
    CpuExecutor::Schedule schedule = CpuExecutor::Schedule::InOrder) {
  Probe probe;
  probe.name = std::move(label);
  probe.window = window;
  auto owned = std::make_shared<plan::Plan>(std::move(plan));
  auto executor = std::make_shared<CpuExecutor>(*owned);
  executor->setSchedule(schedule);
  if (std::string err = executor->init(); !err.empty()) {
    error = "the executor refused the calibration plan '" + probe.name +
            "': " + err;
    return probe;
  }
  auto step = std::make_shared<int64_t>(0);
  probe.body = [owned, executor, step] {
    return executor->runStep((*step)++);
  };
  return probe;
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", value);
  return text;
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
  const std::vector<plan::Attr> convAttrs = {intsAttr("pads", {1, 1, 1, 1}),
                                             intsAttr("kernel_shape", {3, 3})};

  // The operands of every probe, alive until the end.
  Tensor a({1024, 1024}), b({1024, 1024}), y({1024, 1024});
  Tensor skinny({16, 1024}), skinnyOut({16, 1024});
  Tensor convX({8, 64, 32, 32}), convW({64, 64, 3, 3}), convY({8, 64, 32, 32});
  Tensor small1({16384}), small2({16384}), smallOut({16384});
  Tensor half1({8192}), halfOut({8192});
  Tensor large1({8 << 20}), large2({8 << 20}), largeOut({8 << 20});
  // The cache probes' rings: 8 buffers of 64K floats (2 MiB in all) and of
  // 1M floats (32 MiB).
  constexpr size_t kRingBuffers = 8;
  std::vector<Tensor> midRing, bigRing;
  for (size_t i = 0; i < kRingBuffers; ++i) {
    midRing.emplace_back(std::vector<int64_t>{1 << 16});
    bigRing.emplace_back(std::vector<int64_t>{1 << 20});
  }
  Tensor one1({1}), one2({1}), oneOut({1});
  Tensor g64a({64, 64}), g64b({64, 64}), g64y({64, 64});
  Tensor g128a({128, 128}), g128b({128, 128}), g128y({128, 128});
  Tensor dy({4096, 1024}), db({1024});
  std::vector<uint8_t> copySrc(64 << 20, 1), copyDst(64 << 20);
  // Per-kernel costs (kernels with the cost of each output element): at
  // DeviceModel::kSmallElements and kLargeElements output elements.
  Tensor k1({1 << 20}), k2({1 << 20}), kOut({1 << 20});
  Tensor scale({2048}), bias({2048}), mean({2048}), var({2048});
  for (float &v : var.data)
    v = 1.0f + v * v; // a variance: positive
  // Per row of 128 (at most 1M / 128 rows): a mean and an inverse standard
  // deviation (positive).
  Tensor rowMean({8192}), rowInvStd({8192});
  for (float &v : rowInvStd.data)
    v = 1.0f + v * v;
  auto intAttr = [](const char *name, int64_t value) {
    plan::Attr attr;
    attr.name = name;
    attr.kind = plan::Attr::Kind::Int;
    attr.i = value;
    return attr;
  };
  const std::vector<plan::Attr> inference = {intAttr("training_mode", 0)};
  // Training mode; the forward kernel computes Y only (the running
  // statistics are their own instructions in a plan).
  const std::vector<plan::Attr> training = {intAttr("training_mode", 1),
                                            intAttr("tofu.output", 0)};
  const std::vector<plan::Attr> trainingGrad = {intAttr("training_mode", 1)};
  // Max pooling as ResNets' stems pool: 3 x 3 windows, stride 2, pads 1.
  const std::vector<plan::Attr> poolAttrs = {
      intsAttr("kernel_shape", {3, 3}), intsAttr("strides", {2, 2}),
      intsAttr("pads", {1, 1, 1, 1})};
  // A pooled [N, C, H, W]: [N, C, (H - 1) / 2 + 1, (W - 1) / 2 + 1].
  auto pooledShape = [](const std::vector<int64_t> &shape) {
    return std::vector<int64_t>{shape[0], shape[1], (shape[2] - 1) / 2 + 1,
                                (shape[3] - 1) / 2 + 1};
  };
  // MaxPoolGrad's Y: MaxPool of its X, written before each use (the
  // probes of every size share the buffer).
  Tensor pooledY({1 << 18});
  /// Writes MaxPool(k1 viewed as `shape`) into pooledY, so that each of
  /// MaxPoolGrad's windows finds its maximum as in a step.
  auto poolInto = [&](const std::vector<int64_t> &shape) {
    KernelArgs pool;
    pool.inputs = {viewAs(k1, shape)};
    pool.outputs = {viewAs(pooledY, pooledShape(shape))};
    pool.attrs = &poolAttrs;
    if (KernelFn maxPool = lookupKernel("MaxPool"))
      (void)maxPool(pool); // a failure shows in the MaxPool probe
  };
  // Integer labels (classes < 128) and a scalar gradient for the losses.
  std::vector<int64_t> labels(8192);
  for (size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<int64_t>((i * 37) % 16); // rows of >= 16 classes
  float dloss = 1.0f;
  /// How a kernel's operands are laid out for a probe of `n` elements of
  /// its largest operand: [n] same-shape operands, rows of 128 (softmax,
  /// norms, losses along the rows), or X [8, C, H, W] (C = 32, 64).
  enum class Layout { Flat, Rows, Image };
  struct KernelShape {
    const char *kernel;
    Layout layout;
    int sameShape; ///< inputs of the largest operand's shape, first
    enum Extra {
      None,
      ChannelParams,
      RowParams,
      RowStatistics, ///< LayerNormalizationGrad's Scale, Mean, InvStdDev
      Labels,
      LossGrad,
      Statistics, ///< BatchNormalizationNormalized's input_mean, input_var
      PoolGrad    ///< MaxPoolGrad: dY first, then X, then Y
    } extra;
    /// Pooled: MaxPool's output (poolAttrs' windows: 3 x 3, stride 2, pads 1).
    enum Out { Same, Channels, Columns, Scalar, Pooled } out;
    const std::vector<plan::Attr> *attrs;
    /// The description's name for the cost (default: the kernel's).
    const char *key = nullptr;
    const char *name() const { return key ? key : kernel; }
  };
  const std::vector<KernelShape> kernelShapes = {
      {"Add", Layout::Flat, 2, KernelShape::None, KernelShape::Same, &none},
      {"Mul", Layout::Flat, 2, KernelShape::None, KernelShape::Same, &none},
      {"Sub", Layout::Flat, 2, KernelShape::None, KernelShape::Same, &none},
      {"Relu", Layout::Flat, 1, KernelShape::None, KernelShape::Same, &none},
      {"ReluGrad", Layout::Flat, 2, KernelShape::None, KernelShape::Same, &none},
      {"Sigmoid", Layout::Flat, 1, KernelShape::None, KernelShape::Same, &none},
      {"SigmoidGrad", Layout::Flat, 2, KernelShape::None, KernelShape::Same,
       &none},
      {"Tanh", Layout::Flat, 1, KernelShape::None, KernelShape::Same, &none},
      {"TanhGrad", Layout::Flat, 2, KernelShape::None, KernelShape::Same, &none},
      {"Gelu", Layout::Flat, 1, KernelShape::None, KernelShape::Same, &none},
      {"GeluGrad", Layout::Flat, 2, KernelShape::None, KernelShape::Same, &none},
      {"SGDUpdate", Layout::Flat, 2, KernelShape::None, KernelShape::Same,
       &none},
      {"Softmax", Layout::Rows, 1, KernelShape::None, KernelShape::Same, &none},
      {"SoftmaxGrad", Layout::Rows, 2, KernelShape::None, KernelShape::Same,
       &none},
      {"LayerNormalizationGrad", Layout::Rows, 2, KernelShape::RowStatistics,
       KernelShape::Same, &none},
      {"LayerNormalization", Layout::Rows, 1, KernelShape::RowParams,
       KernelShape::Same, &none},
      {"SoftmaxCrossEntropyLoss", Layout::Rows, 1, KernelShape::Labels,
       KernelShape::Scalar, &none},
      {"SoftmaxCrossEntropyLossGrad", Layout::Rows, 0, KernelShape::LossGrad,
       KernelShape::Same, &none},
      {"BiasGrad", Layout::Rows, 1, KernelShape::None, KernelShape::Columns,
       &none},
      {"ConvBiasGrad", Layout::Image, 1, KernelShape::None,
       KernelShape::Channels, &none},
      {"BatchNormalization", Layout::Image, 1, KernelShape::ChannelParams,
       KernelShape::Same, &inference},
      {"BatchNormalizationGrad", Layout::Image, 2, KernelShape::ChannelParams,
       KernelShape::Same, &inference},
      {"BatchNormalization", Layout::Image, 1, KernelShape::ChannelParams,
       KernelShape::Same, &training, "BatchNormalization.training"},
      {"BatchNormalizationGrad", Layout::Image, 2, KernelShape::ChannelParams,
       KernelShape::Same, &trainingGrad, "BatchNormalizationGrad.training"},
      {"BatchNormalizationNormalized", Layout::Image, 1,
       KernelShape::Statistics, KernelShape::Same, &inference},
      {"BatchNormalizationNormalized", Layout::Image, 1,
       KernelShape::Statistics, KernelShape::Same, &trainingGrad,
       "BatchNormalizationNormalized.training"},
      {"MaxPool", Layout::Image, 1, KernelShape::None, KernelShape::Pooled,
       &poolAttrs},
      {"MaxPoolGrad", Layout::Image, 0, KernelShape::PoolGrad,
       KernelShape::Same, &poolAttrs}};
  enum ProbeId {
    kGemm, kSkinny, kConv, kAdd, kExp, kStream, kOneAdd, kRelus, kFetches,
    kEmptyStep, kFeedStep, kBiasGrad, kCopy, kTinyCopy, kCacheAdd, kL3Add,
    kGemm64, kGemm64Cold, kGemm128, kGemm128Cold, kSkinnyFromMemory,
    kRelusSideBySide, kNumProbes
  };
  std::vector<Probe> probes(kNumProbes);
  probes[kGemm] = kernelProbe("MatMul 1024x1024x1024", "MatMul", {&a, &b}, y,
                              none, 0.3);
  probes[kSkinny] = kernelProbe("MatMul 16x1024x1024", "MatMul",
                                {&skinny, &b}, skinnyOut, none, 0.1);
  probes[kConv] = kernelProbe("Conv X [8,64,32,32] W [64,64,3,3] pads 1",
                              "Conv", {&convX, &convW}, convY, convAttrs, 0.3);
  probes[kAdd] = kernelProbe("Add 16384 floats (in cache)", "Add",
                             {&small1, &small2}, smallOut, none, 0.1, 16);
  probes[kExp] = kernelProbe("Exp 8192 floats (in cache)", "Exp",
                              {&half1}, halfOut, none, 0.1, 4);
  probes[kStream] = kernelProbe("Add 8M floats (streaming 3 x 32 MiB)", "Add",
                                {&large1, &large2}, largeOut, none, 0.3);
  probes[kCacheAdd] = ringProbe(
      "Adds of 64K floats reading the two previous Adds' outputs (ring of 8 "
      "x 256 KiB)",
      midRing, 0.1, 4);
  probes[kL3Add] = ringProbe(
      "Adds of 1M floats reading the two previous Adds' outputs (ring of 8 "
      "x 4 MiB)",
      bigRing, 0.1, 1);
  probes[kOneAdd] =
      kernelProbe("Add 1 float (one kernel call, without the executor)",
                  "Add", {&one1, &one2}, oneOut, none, 0.05, 256);
  constexpr int kTinyInstructions = 2000;
  probes[kRelus] = executorProbe("executor: 2 x 2000 Relus of 64 floats",
                                 tinyPlan(kTinyInstructions, false), 0.1,
                                 error);
  probes[kRelusSideBySide] = executorProbe(
      "executor: 2 x 2000 Relus of 64 floats, the devices side by side",
      tinyPlan(kTinyInstructions, false), 0.1, error,
      CpuExecutor::Schedule::Concurrent);
  probes[kFetches] = executorProbe(
      "executor: 2 x 2000 fetches of 64 floats from the other device",
      tinyPlan(kTinyInstructions, true), 0.1, error);
  probes[kEmptyStep] =
      executorProbe("executor: a step without instructions", feedPlan(false),
                    0.05, error);
  probes[kFeedStep] = executorProbe(
      "executor: a step feeding features [32,3,32,32] and labels [32]",
      feedPlan(true), 0.1, error);
  probes[kBiasGrad] = kernelProbe("BiasGrad [4096,1024] -> [1024]",
                                  "BiasGrad", {&dy}, db, none, 0.1);
  probes[kCopy].name = "copy 64 MiB between buffers";
  probes[kCopy].window = 0.3;
  probes[kCopy].body = [&] {
    std::memcpy(copyDst.data(), copySrc.data(), copySrc.size());
    return std::string();
  };
  probes[kTinyCopy].name = "copy 64 bytes";
  probes[kTinyCopy].window = 0.05;
  probes[kTinyCopy].calls = 1024;
  probes[kTinyCopy].body = [&] {
    for (int i = 0; i < 1024; ++i)
      std::memcpy(copyDst.data() + 64 * (i & 15),
                  copySrc.data() + (copyDst[0] & 1), 64);
    return std::string();
  };
  // Small GEMMs hot (in a loop) and as a step runs them: each call right
  // after an Add of 1M floats on the 4 MiB ring (another kernel's data
  // through the caches, the worker pool just used).
  probes[kGemm64] = kernelProbe("MatMul 64x64x64 (hot)", "MatMul",
                                {&g64a, &g64b}, g64y, none, 0.05, 16);
  probes[kGemm64Cold] = kernelProbe("MatMul 64x64x64 after another kernel",
                                    "MatMul", {&g64a, &g64b}, g64y, none,
                                    0.05);
  probes[kGemm128] = kernelProbe("MatMul 128x128x128 (hot)", "MatMul",
                                 {&g128a, &g128b}, g128y, none, 0.05, 4);
  probes[kGemm128Cold] = kernelProbe(
      "MatMul 128x128x128 after another kernel", "MatMul", {&g128a, &g128b},
      g128y, none, 0.05);
  // The skinny GEMM again, each call right after a streaming Add over 96
  // MiB: its 4 MiB operand comes from memory, as a large weight does in a
  // step; what it then costs beyond its hot time is packing, not FLOPs.
  probes[kSkinnyFromMemory] = kernelProbe(
      "MatMul 16x1024x1024 after streaming 3 x 32 MiB", "MatMul",
      {&skinny, &b}, skinnyOut, none, 0.1);
  {
    Probe stream = probes[kStream];
    probes[kSkinnyFromMemory].before = [stream] { (void)stream.body(); };
  }
  {
    Probe neighbour = ringProbe("", bigRing, 0, 1);
    probes[kGemm64Cold].before = probes[kGemm128Cold].before = [neighbour] {
      (void)neighbour.body();
    };
  }
  if (!error.empty())
    return "--calibrate: " + error;
  // Two probes per kernel: small, large; a row-wise kernel (a batch norm
  // over planes, a softmax, norm or loss over rows) also a third of the
  // small one's elements in short rows: rows of 16, planes of 4.
  auto rowWise = [](const KernelShape &k) {
    return k.layout != Layout::Flat && std::strcmp(k.kernel, "BiasGrad") &&
           std::strcmp(k.kernel, "ConvBiasGrad");
  };
  /// The rows (planes) of a probe's largest operand.
  auto rowsOf = [](const KernelShape &k, const std::vector<int64_t> &shape) {
    return k.layout == Layout::Rows ? double(shape[0])
                                    : double(shape[0] * shape[1]);
  };
  struct KernelProbes {
    size_t small, large, shortRows; ///< probe indices (shortRows: or 0)
    double smallRows, largeRows, shortRowsCount;
    /// The fewest elements at which the kernel used the pool (0: not up
    /// to the large probe's).
    double threadsFrom;
  };
  std::vector<KernelProbes> kernelProbes;
  /// The inputs and output of kernel `k` on a largest operand of `shape`.
  auto operandsOf = [&](const KernelShape &k,
                        const std::vector<int64_t> &shape) {
    std::vector<TensorView> inputs;
    if (k.extra == KernelShape::LossGrad)
      inputs.push_back(TensorView::whole(&dloss, plan::DType::F32, {}));
    for (int i = 0;
         i < std::max(k.sameShape, k.extra == KernelShape::LossGrad ? 1 : 0);
         ++i)
      inputs.push_back(viewAs(i == 0 ? k1 : k2, shape));
    if (k.extra == KernelShape::ChannelParams) {
      // BatchNormalization: scale, B, mean, var; its gradient: scale,
      // mean, var.
      std::vector<Tensor *> params = {&scale, &bias, &mean, &var};
      if (k.sameShape == 2)
        params = {&scale, &mean, &var};
      for (Tensor *param : params)
        inputs.push_back(viewAs(*param, {shape[1]}));
    }
    if (k.extra == KernelShape::Statistics)
      for (Tensor *param : {&mean, &var})
        inputs.push_back(viewAs(*param, {shape[1]}));
    if (k.extra == KernelShape::PoolGrad)
      // dY, X, and Y (poolInto: MaxPool(X) before each use).
      inputs = {viewAs(k2, pooledShape(shape)), viewAs(k1, shape),
                viewAs(pooledY, pooledShape(shape))};
    if (k.extra == KernelShape::RowStatistics) {
      inputs.push_back(viewAs(scale, {shape[1]}));
      inputs.push_back(viewAs(rowMean, {shape[0], 1}));
      inputs.push_back(viewAs(rowInvStd, {shape[0], 1}));
    }
    if (k.extra == KernelShape::RowParams)
      for (Tensor *param : {&scale, &bias})
        inputs.push_back(viewAs(*param, {shape[1]}));
    if (k.extra == KernelShape::Labels || k.extra == KernelShape::LossGrad)
      inputs.push_back(
          TensorView::whole(labels.data(), plan::DType::I64, {shape[0]}));
    TensorView output = viewAs(kOut, shape);
    if (k.out == KernelShape::Channels)
      output = viewAs(kOut, {shape[1]});
    if (k.out == KernelShape::Columns)
      output = viewAs(kOut, {shape[1]});
    if (k.out == KernelShape::Scalar)
      output = viewAs(kOut, {});
    if (k.out == KernelShape::Pooled)
      output = viewAs(kOut, pooledShape(shape));
    return std::make_pair(std::move(inputs), output);
  };
  /// The largest operand's shape for `n` elements: flat, rows of
  /// `rowLength`, or images of 8 x 8 pixels (planes of 4 in short rows).
  auto shapeOf = [](const KernelShape &k, int64_t n, int64_t rowLength,
                    bool shortRows) {
    if (k.layout == Layout::Rows)
      return std::vector<int64_t>{n / rowLength, rowLength};
    if (k.layout == Layout::Image)
      return shortRows ? std::vector<int64_t>{8, n / 32, 2, 2}
                       : std::vector<int64_t>{8, n / 512, 8, 8};
    return std::vector<int64_t>{n};
  };
  for (const KernelShape &k : kernelShapes) {
    KernelProbes at{0, 0, 0, 0, 0, 0, 0};
    for (int variant = 0; variant < (rowWise(k) ? 3 : 2); ++variant) {
      // The small probes (and short rows) on one thread, as a step's small
      // calls run (below the kernel's threading size, measured below) and
      // as every kernel runs beside other devices' (runOnThisThread); the
      // large one as the kernel runs alone.
      const bool small = variant != 1, shortRows = variant == 2;
      const int64_t n = small ? int64_t(kKernelSmallElements)
                              : int64_t(kKernelLargeElements);
      std::vector<int64_t> shape = shapeOf(k, n, shortRows ? 16 : 128,
                                           shortRows);
      if (k.layout == Layout::Image && !small)
        shape = {8, 64, 32, 64};
      (variant == 0 ? at.small : variant == 1 ? at.large : at.shortRows) =
          probes.size();
      (variant == 0   ? at.smallRows
       : variant == 1 ? at.largeRows
                      : at.shortRowsCount) = rowsOf(k, shape);
      auto [inputs, output] = operandsOf(k, shape);
      probes.push_back(viewProbe(std::string(k.name()) + " " +
                                     std::to_string(n) + " elements" +
                                     (shortRows ? " in short rows" : ""),
                                 k.kernel, std::move(inputs), output,
                                 *k.attrs, 0.05, small ? 8 : 1, small));
      if (k.extra == KernelShape::PoolGrad)
        probes.back().before = [poolInto, shape] { poolInto(shape); };
    }
    // From which size the kernel splits its work over the worker pool: one
    // call per power of two from 2^10 to the large probe's size (rows of
    // 128; images of 8 x 8 pixels), watching whether it used the pool.
    const KernelFn kernel = lookupKernel(k.kernel);
    if (parallelThreads() > 1 && kernel)
      for (int64_t n = 1 << 10; n <= int64_t(kKernelLargeElements); n *= 2) {
        const std::vector<int64_t> shape = shapeOf(k, n, 128, false);
        if (k.extra == KernelShape::PoolGrad)
          poolInto(shape);
        auto [inputs, output] = operandsOf(k, shape);
        KernelArgs args;
        args.inputs = std::move(inputs);
        args.outputs = {output};
        args.attrs = k.attrs;
        const uint64_t before = poolRuns();
        if (!kernel(args).empty())
          break; // the probes report it
        if (poolRuns() != before) {
          at.threadsFrom = double(n);
          break;
        }
      }
    kernelProbes.push_back(at);
  }

  for (int round = 0; round < kRounds; ++round)
    for (Probe &probe : probes)
      if (std::string err = runRound(probe); !err.empty())
        return "--calibrate: " + err;
  auto t = [&](ProbeId id) { return probes[id].seconds(); };
  auto spread = [&](ProbeId id) {
    return ", rounds spread " + number(100 * probes[id].spread()) + "%";
  };
  note("each number: the median of " + std::to_string(kRounds) +
       " interleaved rounds' medians");

  // GEMM: large and skinny.
  const double gemmRate = 2.0 * 1024 * 1024 * 1024 / t(kGemm);
  note("MatMul 1024x1024x1024: " + number(t(kGemm)) + " s, " +
       number(gemmRate / 1e9) + " GFLOP/s" + spread(kGemm));
  const double skinnyRate = 2.0 * 16 * 1024 * 1024 / t(kSkinny);
  note("MatMul 16x1024x1024: " + number(t(kSkinny)) + " s, " +
       number(skinnyRate / 1e9) + " GFLOP/s" + spread(kSkinny));
  // s(16) / s(1024) = r with s(x) = x / (x + h): h = 16384 (1 - r) /
  // (1024 r - 16), clamped to [1, 4096].
  double r = std::min(skinnyRate / gemmRate, 1.0);
  double half = 1024 * r > 16 ? 16384 * (1 - r) / (1024 * r - 16) : 4096;
  half = std::clamp(half, 1.0, 4096.0);
  note("gemm_half_extent " + number(half) + " from the 16-row GEMM at " +
       number(r) + " of the large one's rate");

  // What a GEMM call costs beyond its hot time when other kernels ran just
  // before it, as in a step (its code, packing buffers and operands no
  // longer in the caches): the mean of the two small GEMMs' differences.
  const double cold64 = t(kGemm64Cold) - t(kGemm64);
  const double cold128 = t(kGemm128Cold) - t(kGemm128);
  const double gemmCold = std::max(0.0, (cold64 + cold128) / 2);
  note("MatMul 64x64x64: " + number(t(kGemm64)) + " s hot, " +
       number(t(kGemm64Cold)) + " s after another kernel" + spread(kGemm64) +
       spread(kGemm64Cold));
  note("MatMul 128x128x128: " + number(t(kGemm128)) + " s hot, " +
       number(t(kGemm128Cold)) + " s after another kernel" +
       spread(kGemm128) + spread(kGemm128Cold));
  note("gemm_cold_seconds " + number(gemmCold) +
       ": the mean of the two GEMMs' time after another kernel less their "
       "hot time");

  const double convRate = 2.0 * 8 * 64 * 32 * 32 * 64 * 9 / t(kConv);
  note("Conv X [8,64,32,32] W [64,64,3,3] pads 1: " + number(t(kConv)) +
       " s, " + number(convRate / 1e9) + " GFLOP/s" + spread(kConv));

  // Element-wise: in cache (vector rate), streaming (memory bandwidth).
  const double vectorRate = 16384 / t(kAdd);
  note("Add 16384 floats (in cache): " + number(t(kAdd)) + " s, " +
       number(vectorRate / 1e9) + " GFLOP/s" + spread(kAdd));
  // Per element, on one thread as both run (ParallelFor.h: an Exp of 16384
  // floats, 16 operations each, would use every thread). Exp, not Tanh:
  // float32 Tanh, Sigmoid and GELU have vectorized forms, measured in
  // `kernels` below; the kernels this rate prices (Exp, Log, Erf, Sqrt,
  // Pow, ...) call libm per element.
  const double transcendental =
      std::max(1.0, (t(kExp) / 8192) / (t(kAdd) / 16384));
  note("Exp 8192 floats (in cache, one thread): " + number(t(kExp)) +
       " s, " + number(transcendental) + " x the Add per element" +
       spread(kExp));
  const double memoryRate = 3.0 * 4 * (8 << 20) / t(kStream);
  note("Add 8M floats (streaming 3 x 32 MiB): " + number(t(kStream)) +
       " s, " + number(memoryRate / 1e9) + " GB/s" + spread(kStream));

  // The skinny GEMM with its operands in memory: its time beyond the hot
  // one, in passes over those operands at the streaming rate (at least
  // the one pass the model charges anyway, at most 16).
  const double skinnyOperandSeconds =
      4.0 * (16 * 1024 + 1024 * 1024) / memoryRate;
  const double packPasses =
      std::clamp((t(kSkinnyFromMemory) - t(kSkinny)) / skinnyOperandSeconds,
                 1.0, 16.0);
  note("MatMul 16x1024x1024 after streaming 3 x 32 MiB: " +
       number(t(kSkinnyFromMemory)) + " s" + spread(kSkinnyFromMemory) +
       "; gemm_pack_passes " + number(packPasses) +
       ": its time beyond the hot one over one read of its operands at " +
       "the streaming rate");
  // The caches: what an op reading what the ops just before it wrote
  // streams at, and up to how much traffic (3 x 4 MiB, else 3 x 256 KiB,
  // when it runs at least twice as fast as the streaming Add; else no cache
  // level). Measured on rings of buffers, as a step passes its data on: an
  // Add re-reading the same three buffers in a loop ran 2-4x faster on the
  // build machine than one reading what the Adds before it wrote, which is
  // what a step's kernels do (bench/simulate.md).
  const double cacheRate = 3.0 * 4 * (1 << 16) / t(kCacheAdd);
  const double l3Rate = 3.0 * 4 * (1 << 20) / t(kL3Add);
  note("Adds of 64K floats on a ring of 8 x 256 KiB (each reads the two "
       "previous outputs): " +
       number(t(kCacheAdd)) + " s, " + number(cacheRate / 1e9) + " GB/s" +
       spread(kCacheAdd));
  note("Adds of 1M floats on a ring of 8 x 4 MiB: " + number(t(kL3Add)) +
       " s, " + number(l3Rate / 1e9) + " GB/s" + spread(kL3Add));
  // Two levels when the 4 MiB Add is clearly faster than streaming and the
  // 256 KiB one clearly faster than it (a core's L2 inside the shared L3):
  // traffic between 768 KiB and 12 MiB then streams at the L3's rate, not
  // the L2's. (The 256 KiB Add runs on one thread, the 4 MiB one on all:
  // on the 2-core build machine the larger one is the faster, so one level.)
  double cacheBytes = 0, cacheLevelRate = 0, innerBytes = 0, innerRate = 0;
  if (l3Rate >= 1.5 * memoryRate && cacheRate >= 1.5 * l3Rate) {
    cacheBytes = 3.0 * 4 * (1 << 20);
    cacheLevelRate = l3Rate;
    innerBytes = 3.0 * 4 * (1 << 16);
    innerRate = cacheRate;
  } else if (l3Rate >= 2 * memoryRate) {
    cacheBytes = 3.0 * 4 * (1 << 20);
    cacheLevelRate = l3Rate;
  } else if (cacheRate >= 2 * memoryRate) {
    cacheBytes = 3.0 * 4 * (1 << 16);
    cacheLevelRate = cacheRate;
  }
  note(innerBytes > 0
           ? "memory.cache_bytes " + number(cacheBytes) + " at the 1M floats' "
                 "rate, inner_cache_bytes " + number(innerBytes) +
                 " at the 64K floats' rate: each at least 1.5 x the next "
                 "slower"
       : cacheBytes > 0
           ? "memory.cache_bytes " + number(cacheBytes) +
                 ": the largest Add traffic above at twice the streaming rate "
                 "or more, at its rate"
           : std::string("no cache level: neither Add above runs at twice "
                         "the streaming rate"));
  note("Add 1 float (one kernel call, without the executor): " +
       number(t(kOneAdd)) + " s" + spread(kOneAdd));

  // The executor's cost per instruction: a tiny Relu, a tiny fetch from
  // the other virtual device.
  const double perCompute = t(kRelus) / (2.0 * kTinyInstructions);
  const double perFetch = t(kFetches) / (2.0 * kTinyInstructions);
  note("executor: a Relu of 64 floats on 2 virtual devices: " +
       number(perCompute) + " s per instruction" + spread(kRelus));
  note("executor: a fetch of 64 floats from the other virtual device: " +
       number(perFetch) + " s per instruction" + spread(kFetches));
  const double launch = std::max({t(kOneAdd), perCompute, 1e-9});
  note("launch_seconds " + number(launch) +
       ": the larger of the two kernel calls above");
  // The same plan with its two devices side by side: each level (two
  // Relus) is handed to the worker pool and joined.
  const double wave =
      std::max(t(kRelusSideBySide) / kTinyInstructions - perCompute, 1e-9);
  note("executor: the same Relus with the 2 devices side by side: " +
       number(t(kRelusSideBySide) / kTinyInstructions) +
       " s per level; wave_seconds " + number(wave) +
       ": that less one Relu's time" + spread(kRelusSideBySide));

  // The step's own work.
  const double stepOverhead = std::max(t(kEmptyStep), 1e-9);
  note("executor: a step without instructions: " + number(stepOverhead) +
       " s (step_overhead_seconds)" + spread(kEmptyStep));
  const double feed =
      std::max((t(kFeedStep) - t(kEmptyStep)) / kFedElements, 1e-12);
  note("executor: a step feeding features [32,3,32,32] and labels [32] "
       "(synthetic data): " +
       number(t(kFeedStep)) + " s, " + number(feed) +
       " s per element (feed_seconds_per_element)" + spread(kFeedStep));

  // Reduction (recorded; vector work in the model).
  note("BiasGrad [4096,1024] -> [1024] (reduction): " + number(t(kBiasGrad)) +
       " s, " + number(4096.0 * 1024 / t(kBiasGrad) / 1e9) + " GFLOP/s, " +
       number(4.0 * 4096 * 1024 / t(kBiasGrad) / 1e9) + " GB/s read" +
       spread(kBiasGrad));

  // Copies between virtual devices.
  const double linkRate = copySrc.size() / t(kCopy);
  note("copy 64 MiB between buffers: " + number(t(kCopy)) + " s, " +
       number(linkRate / 1e9) + " GB/s" + spread(kCopy));
  note("copy 64 bytes: " + number(t(kTinyCopy)) + " s" + spread(kTinyCopy));
  // A fetch instruction costs the model one launch plus the piece's
  // latency: what the executor spends on a tiny fetch beyond a compute.
  const double linkLatency =
      std::max({perFetch - perCompute, t(kTinyCopy), 1e-9});
  note("latency_seconds " + number(linkLatency) +
       ": a tiny fetch's time less a tiny compute's, at least a 64-byte copy");

  // Kernels by their cost per output element (sorted by name in the JSON
  // reader; written in this order).
  struct Cost {
    std::string kernel;
    double small, large, row, threadsFrom;
    bool operator<(const Cost &other) const { return kernel < other.kernel; }
  };
  std::vector<Cost> kernelCosts;
  for (size_t i = 0; i < kernelShapes.size(); ++i) {
    const KernelProbes &at = kernelProbes[i];
    const Probe &small = probes[at.small];
    const Probe &large = probes[at.large];
    // A row-wise kernel: what each row costs beyond its elements, from the
    // same elements in short rows; the per-element costs less their rows'.
    double row = 0;
    if (at.shortRows)
      row = std::max(0.0, (probes[at.shortRows].seconds() - small.seconds()) /
                              (at.shortRowsCount - at.smallRows));
    const double perSmall =
        std::max(small.seconds() - at.smallRows * row, 0.1 * small.seconds()) /
        kKernelSmallElements;
    const double perLarge =
        std::max(large.seconds() - at.largeRows * row, 0.1 * large.seconds()) /
        kKernelLargeElements;
    // A kernel that does not thread up to the large probe: from beyond it.
    const double threadsFrom =
        at.threadsFrom > 0 ? at.threadsFrom
                           : parallelThreads() > 1 ? 2 * kKernelLargeElements
                                                   : 0;
    kernelCosts.push_back(
        {kernelShapes[i].name(), perSmall, perLarge, row, threadsFrom});
    note(std::string(kernelShapes[i].name()) + ": " + number(perSmall) +
         " s per element at " + number(kKernelSmallElements) +
         " elements on one thread, " +
         number(perLarge) + " at " + number(kKernelLargeElements) +
         (at.shortRows ? ", " + number(row) + " s per row (" +
                             number(at.shortRowsCount) + " short rows: " +
                             number(probes[at.shortRows].seconds()) + " s)"
                       : std::string()) +
         (threadsFrom > 0 ? "; threads from " + number(threadsFrom) +
                                " elements"
                          : std::string()) +
         " (rounds spread " + number(100 * small.spread()) + "%, " +
         number(100 * large.spread()) + "%)");
  }
  std::sort(kernelCosts.begin(), kernelCosts.end());

  // The worker pool's threads (ParallelFor.cpp's parallelThreads): what
  // the GEMM and convolution probes above ran on together.
  const unsigned hostThreads =
      std::min(16u, std::max(1u, std::thread::hardware_concurrency()));
  note("host_threads " + std::to_string(hostThreads) +
       ": the threads the kernels split their work over (the hardware's, at "
       "most 16)");
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  uint64_t memoryBytes =
      pages > 0 && pageSize > 0 ? uint64_t(pages) * uint64_t(pageSize) : 0;
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
       << "  \"name\": " << jsonQuoted("calibrated") << ",\n"
       << "  \"description\": "
       << jsonQuoted("This machine as tofu-run's CPU backend runs it: every "
                 "rate is a measured median of tofu-run's own kernels "
                 "(efficiency 1); k virtual devices share the host.")
       << ",\n  \"sources\": [\n";
  for (size_t i = 0; i < sources.size(); ++i)
    json << "    " << jsonQuoted(sources[i]) << (i + 1 < sources.size() ? "," : "")
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
       << ", \"efficiency\": 1";
  if (cacheBytes > 0)
    json << ",\n             \"cache_bytes\": " << number(cacheBytes)
         << ", \"cache_bytes_per_second\": " << number(cacheLevelRate);
  if (innerBytes > 0)
    json << ",\n             \"inner_cache_bytes\": " << number(innerBytes)
         << ", \"inner_cache_bytes_per_second\": " << number(innerRate);
  json << "},\n"
       << "  \"launch_seconds\": " << number(launch) << ",\n"
       << "  \"gemm_half_extent\": " << number(half) << ",\n";
  if (gemmCold > 0)
    json << "  \"gemm_cold_seconds\": " << number(gemmCold) << ",\n";
  json << "  \"gemm_pack_passes\": " << number(packPasses) << ",\n";
  json << "  \"wave_seconds\": " << number(wave) << ",\n";
  json
       << "  \"transcendental_flops\": " << number(transcendental) << ",\n"
       << "  \"step_overhead_seconds\": " << number(stepOverhead) << ",\n"
       << "  \"feed_seconds_per_element\": " << number(feed) << ",\n"
       << "  \"kernels\": {";
  for (size_t i = 0; i < kernelCosts.size(); ++i) {
    json << (i ? ",\n              " : "") << jsonQuoted(kernelCosts[i].kernel)
         << ": {\"small\": " << number(kernelCosts[i].small)
         << ", \"large\": " << number(kernelCosts[i].large);
    if (kernelCosts[i].row > 0)
      json << ", \"row\": " << number(kernelCosts[i].row);
    if (kernelCosts[i].threadsFrom > 0)
      json << ", \"threads_from\": " << number(kernelCosts[i].threadsFrom);
    json << "}";
  }
  json << "},\n"
       << "  \"links\": [{\"name\": \"memcpy\", \"gbps\": "
       << number(linkRate / 1e9)
       << ", \"latency_seconds\": " << number(linkLatency) << "}],\n"
       << "  \"shared_host\": true,\n"
       << "  \"host_threads\": " << hostThreads << "\n}\n";
  std::string text = json.str();
  if (std::string err = writeFileAtomically(path, text.data(), text.size());
      !err.empty())
    return "--calibrate: " + err;
  log << "tofu-run: calibrate: wrote " << path << "\n";
  return "";
}

} // namespace tofu::runtime
