//===- StepPrediction.cpp - predicted step time and fit of a plan ---------===//
//
// See tofu/Target/StepPrediction.h and docs/DeviceModel.md.
//
//===----------------------------------------------------------------------===//
#include "tofu/Target/StepPrediction.h"
#include "tofu/Analysis/TileGeometry.h"
#include "tofu/Dialect/TdlInstance.h"
#include "tofu/Transforms/RecursivePartitioner.h"
#include "tofu/Transforms/StepTimeModel.h"
#include "tofu/runtime/CollectivePieces.h"
#include "tofu/runtime/SharedPrograms.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>

using namespace mlir;

namespace tofu {

double StepPrediction::commSeconds() const {
  double seconds = 0;
  for (double s : commSecondsPerStep)
    seconds += s;
  return seconds;
}

namespace {

llvm::Error failure(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "step prediction: " + message.str());
}

/// The time of one instruction, split by what it spends it on.
struct InstrTime {
  double compute = 0, copy = 0;
  std::vector<double> comm; ///< per recursion step
  /// On a shared host with several virtual devices: the part of `compute`
  /// that runs on one host thread (a small kernel, every kernel call's
  /// launch), which the devices of a level run side by side.
  double oneThreadCompute = 0;
  /// The op of the first instruction added up here (the plan's string).
  const std::string *op = nullptr;
  double total() const {
    double t = compute + copy;
    for (double c : comm)
      t += c;
    return t;
  }
};

/// Whether `node` of `program` is a transcendental function (exp, log,
/// sqrt, tanh, erf, sigmoid, pow; not a square, pow(x, 2), which kernels
/// compute as x * x).
bool isTranscendental(const plan::ExprProgram &program,
                      const plan::ExprNode &node) {
  if (node.kind == plan::ExprNode::Kind::Binary) {
    if (node.binary != plan::BinaryOp::Pow)
      return false;
    if (node.operands.size() == 2 && node.operands[1] >= 0 &&
        static_cast<size_t>(node.operands[1]) < program.nodes.size()) {
      const plan::ExprNode &exponent = program.nodes[node.operands[1]];
      if (exponent.kind == plan::ExprNode::Kind::Const && exponent.value == 2)
        return false;
    }
    return true;
  }
  if (node.kind != plan::ExprNode::Kind::Call)
    return false;
  switch (node.function) {
  case plan::Function::Exp:
  case plan::Function::Log:
  case plan::Function::Sqrt:
  case plan::Function::Tanh:
  case plan::Function::Erf:
  case plan::Function::Sigmoid:
    return true;
  default:
    return false;
  }
}

/// What the prediction needs of one compute op.
struct OpInfo {
  ComputeOp op;
  std::optional<tdl::OpInstance> instance;
  SmallVector<StrategyAttr> strategies;
};

} // namespace

/// The transcendental functions (exp, log, sqrt, tanh, erf, sigmoid, pow)
/// an expression program evaluates per output element, as a kernel
/// evaluates them: each node once per distinct value of the index
/// variables it depends on (those its subtree reads and does not bind in a
/// reduction of its own). So tanh(X[i]) counts 1, a softmax's exp inside
/// its row sum 1 (once per element of the row, not once per output element
/// and row element), a batch norm's sqrt of its channel variance C / (N C
/// H W): once per channel.
double transcendentalsPerOutputElement(const plan::ExprProgram &program) {
  const size_t vars = program.varExtents.size();
  double outputs = 1;
  for (int32_t v : program.outputVars)
    if (v >= 0 && static_cast<size_t>(v) < vars)
      outputs *= static_cast<double>(program.varExtents[v]);
  if (outputs <= 0)
    return 0;
  // The free variables of every node (operands precede their users).
  std::vector<std::vector<bool>> free(program.nodes.size(),
                                      std::vector<bool>(vars, false));
  double evaluations = 0;
  for (size_t i = 0; i < program.nodes.size(); ++i) {
    const plan::ExprNode &node = program.nodes[i];
    std::vector<bool> &mine = free[i];
    for (int32_t operand : node.operands)
      if (operand >= 0 && static_cast<size_t>(operand) < i)
        for (size_t v = 0; v < vars; ++v)
          mine[v] = mine[v] || free[operand][v];
    if (node.kind == plan::ExprNode::Kind::Var && node.var >= 0 &&
        static_cast<size_t>(node.var) < vars)
      mine[node.var] = true;
    if (node.kind == plan::ExprNode::Kind::Reduce)
      for (int32_t v : node.vars)
        if (v >= 0 && static_cast<size_t>(v) < vars)
          mine[v] = false;
    if (!isTranscendental(program, node))
      continue;
    double count = 1;
    for (size_t v = 0; v < vars; ++v)
      if (mine[v])
        count *= static_cast<double>(program.varExtents[v]);
    evaluations += count;
  }
  return evaluations / outputs;
}

/// Bytes an instruction's reads find in each memory level.
using LevelBytes = std::array<double, 3>;

/// Where each instruction's reads find their data in a steady step (the
/// second of two identical steps, so that parameters and buffers last
/// touched in the previous step count from there): a buffer read after
/// `reuse` bytes of other buffers were touched is in the smallest cache
/// level holding reuse plus its own bytes (an LRU stack distance over whole
/// buffers). On a shared host every device's instructions share the caches
/// in the executed order (seq, then device); dedicated devices each have
/// their own and only their local reads count. Per device, per instruction.
std::vector<std::vector<LevelBytes>> readLevels(const plan::Plan &plan,
                                                const StepTimeModel &model,
                                                bool sharedHost) {
  const size_t k = plan.devices.size();
  std::vector<std::vector<LevelBytes>> levels(k);
  // One access: a buffer, read (and counted for `instr`) or written.
  struct Access {
    int32_t device, buffer;
    double bytes; ///< what the read takes from it (a piece: its region)
    bool read;
  };
  struct Step {
    int32_t device;
    size_t instr;
  };
  auto accessesOf = [&](int32_t d, const plan::Instr &instr,
                        std::vector<Access> &out) {
    const auto &buffers = plan.devices[d].buffers;
    out.clear();
    for (int32_t b : instr.inputs)
      if (b >= 0)
        out.push_back({d, b, double(buffers[b].bytes), true});
    if (instr.kind != plan::Instr::Kind::Compute)
      plan::forEachPiece(plan, d, instr, [&](const plan::Piece &piece) {
        if (!sharedHost && piece.device != d)
          return; // over a link, not through this device's caches
        const plan::Buffer &src =
            plan.devices[piece.device].buffers[piece.buffer];
        double elementBytes =
            src.region.numElements() > 0
                ? double(src.bytes) / src.region.numElements()
                : 0;
        out.push_back({piece.device, piece.buffer,
                       piece.region.numElements() * elementBytes, true});
      });
    if (instr.dst >= 0)
      out.push_back({d, instr.dst, double(buffers[instr.dst].bytes),
                     instr.kind == plan::Instr::Kind::Reduce});
    for (int32_t b : instr.outputs)
      if (b >= 0)
        out.push_back({d, b, double(buffers[b].bytes), false});
  };
  auto walk = [&](const std::vector<Step> &order) {
    // Buffer ids and their bytes.
    std::vector<size_t> base(k + 1, 0);
    for (size_t d = 0; d < k; ++d)
      base[d + 1] = base[d] + plan.devices[d].buffers.size();
    // Every step's accesses, derived once for both passes: step i's are
    // all[start[i], start[i + 1]).
    std::vector<Access> all, accesses;
    std::vector<size_t> start;
    start.reserve(order.size() + 1);
    for (const Step &step : order) {
      start.push_back(all.size());
      accessesOf(step.device, plan.devices[step.device].instrs[step.instr],
                 accesses);
      all.insert(all.end(), accesses.begin(), accesses.end());
    }
    start.push_back(all.size());
    const size_t total = all.size();
    // A Fenwick tree over access times holds each buffer's bytes at its
    // last access: the sum after that time is its stack distance.
    std::vector<double> tree(2 * total + 1, 0);
    auto add = [&](size_t at, double value) {
      for (++at; at < tree.size(); at += at & (~at + 1))
        tree[at] += value;
    };
    auto prefix = [&](size_t at) { // sum over times [0, at)
      double sum = 0;
      for (; at > 0; at -= at & (~at + 1))
        sum += tree[at];
      return sum;
    };
    constexpr size_t kNever = ~size_t(0);
    std::vector<size_t> last(base[k], kNever);
    std::vector<double> held(base[k], 0);
    size_t time = 0;
    for (int pass = 0; pass < 2; ++pass)
      for (size_t i = 0; i < order.size(); ++i) {
        const Step &step = order[i];
        LevelBytes found = {0, 0, 0};
        for (size_t a = start[i]; a < start[i + 1]; ++a) {
          const Access &access = all[a];
          size_t id = base[access.device] + access.buffer;
          double bytes = double(
              plan.devices[access.device].buffers[access.buffer].bytes);
          if (access.read) {
            MemoryLevel level = MemoryLevel::Memory;
            if (last[id] != kNever)
              level = model.levelAfter(
                  prefix(time) - prefix(last[id] + 1), bytes);
            found[static_cast<int>(level)] += access.bytes;
          }
          if (last[id] != kNever)
            add(last[id], -held[id]);
          add(time, bytes);
          last[id] = time;
          held[id] = bytes;
          ++time;
        }
        if (pass == 1)
          levels[step.device][step.instr] = found;
      }
  };
  for (size_t d = 0; d < k; ++d)
    levels[d].assign(plan.devices[d].instrs.size(), LevelBytes{0, 0, 0});
  if (sharedHost) {
    std::vector<Step> order;
    for (size_t d = 0; d < k; ++d)
      for (size_t i = 0; i < plan.devices[d].instrs.size(); ++i)
        order.push_back({static_cast<int32_t>(d), i});
    std::stable_sort(order.begin(), order.end(),
                     [&](const Step &a, const Step &b) {
                       return plan.devices[a.device].instrs[a.instr].seq <
                              plan.devices[b.device].instrs[b.instr].seq;
                     });
    walk(order);
  } else {
    for (size_t d = 0; d < k; ++d) {
      std::vector<Step> order;
      for (size_t i = 0; i < plan.devices[d].instrs.size(); ++i)
        order.push_back({static_cast<int32_t>(d), i});
      walk(order);
    }
  }
  return levels;
}

llvm::Expected<StepPrediction> predictStep(func::FuncOp func,
                                           const plan::Plan &plan,
                                           const DeviceModel &device,
                                           const PredictOptions &options) {
  StepPrediction result;
  result.device = device.name;
  result.sharedHost = device.sharedHost;
  if (plan::hasSharedPrograms(plan))
    return failure("the plan's devices share programs; expand them first "
                   "(plan::expandSharedPrograms)");
  auto gridAttr = func->getAttrOfType<DenseI64ArrayAttr>(kGridAttr);
  if (!gridAttr)
    return failure("the function has no device grid (tofu.grid)");
  DeviceGrid grid{{gridAttr.asArrayRef().begin(), gridAttr.asArrayRef().end()}};
  size_t numSteps = grid.steps.size();
  int64_t k = grid.numDevices();
  if (k != static_cast<int64_t>(plan.devices.size()))
    return failure("the grid has " + llvm::Twine(k) + " devices, the plan " +
                   llvm::Twine(plan.devices.size()));
  if (device.links.empty())
    return failure("device '" + device.name + "' has no links");

  // The link of each recursion step.
  for (size_t s = 0; s < numSteps; ++s) {
    StepLink link;
    if (s < options.topologyLinks.size() && s < options.topologyGbps.size()) {
      link.name = options.topologyLinks[s];
      link.gbps = options.topologyGbps[s];
      const DeviceModel::Link *known = device.linkNamed(link.name);
      link.latencySeconds = known ? known->latencySeconds
                                  : device.links.front().latencySeconds;
    } else {
      link.name = device.links.front().name;
      link.gbps = device.links.front().gbps;
      link.latencySeconds = device.links.front().latencySeconds;
    }
    result.links.push_back(link);
  }

  // The ops by name (materialize names each instruction after its op).
  llvm::StringMap<OpInfo> ops;
  for (ComputeOp op : func.getOps<ComputeOp>()) {
    OpInfo info;
    info.op = op;
    if (auto attr = op->getAttrOfType<ArrayAttr>(kPlanAttr))
      for (auto strategy : attr.getAsRange<StrategyAttr>())
        info.strategies.push_back(strategy);
    if (!ops.try_emplace(op.getName(), std::move(info)).second)
      return failure("two ops are named '" + op.getName() +
                     "'; instructions cannot be matched to ops");
  }

  StepTimeModel model(device);
  std::vector<std::vector<int64_t>> coordinates;
  for (int64_t d = 0; d < k; ++d)
    coordinates.push_back(grid.coordinates(d));
  auto stepBetween = [&](int64_t a, int64_t b) -> size_t {
    for (size_t s = 0; s < numSteps; ++s)
      if (coordinates[a][s] != coordinates[b][s])
        return s;
    return numSteps - 1;
  };

  result.devices.resize(k);
  result.stepBytes.assign(numSteps, 0);
  result.stepBytesBusiest.assign(numSteps, 0);
  std::vector<std::vector<uint64_t>> received(k,
                                              std::vector<uint64_t>(numSteps));
  std::map<std::string, double> byKernel;
  // Per seq level, per device: the instruction times added up.
  std::map<int64_t, std::vector<InstrTime>> levels;
  // Where reads find their data, for devices that describe their caches.
  std::vector<std::vector<LevelBytes>> found;
  if (device.cacheBytes > 0)
    found = readLevels(plan, model, device.sharedHost);
  for (int64_t d = 0; d < k; ++d) {
    const plan::DeviceProgram &program = plan.devices[d];
    StepPrediction::Device &dev = result.devices[d];
    dev.peakBytes = program.peakBytes;
    for (size_t index = 0; index < program.instrs.size(); ++index) {
      const plan::Instr &instr = program.instrs[index];
      InstrTime time;
      time.comm.assign(numSteps, 0);
      if (instr.kind == plan::Instr::Kind::Compute) {
        auto it = ops.find(instr.op.str());
        if (it == ops.end())
          return failure("instruction of op '" + instr.op +
                         "' has no op of that name");
        OpInfo &info = it->second;
        if (!info.instance) {
          auto instance = tofu::instantiate(info.op);
          if (!instance)
            return failure("op '" + instr.op + "': " +
                           llvm::toString(instance.takeError()));
          info.instance = std::move(*instance);
        }
        unsigned output =
            static_cast<unsigned>(plan::intAttr(instr, "tofu.output", 0));
        if (output >= info.instance->outputTypes().size())
          return failure("op '" + instr.op + "' has no output " +
                         llvm::Twine(output));
        OpShare share =
            opShare(grid, *info.instance, output, info.strategies, d);
        ShareWork work = describeShare(*info.instance, output, share);
        // A partial sum's reduction is its own instruction, timed below.
        work.partial = false;
        // The instruction's program is its output's (one per output).
        if (!instr.programs().empty())
          work.transcendentals = transcendentalsPerOutputElement(
              instr.programs()[instr.programs().size() == 1 ? 0 : output]);
        if (!found.empty())
          for (int level = 0; level < 3; ++level)
            work.inputBytesByLevel[level] = found[d][index][level];
        // tofu-run runs one virtual device's instructions one at a time;
        // more devices' instructions run side by side on the host's threads.
        work.alone = device.sharedHost && k == 1;
        time.compute = model.computeSeconds(work);
        if (d == 0)
          result.device0Instructions.push_back(
              {static_cast<int64_t>(index), work.kernel.str(),
               work.kind == OpClass::Contraction, work.convolution,
               tdl::elemName(work.dtype), work.largestElements,
               work.rows, model.callSeconds(work), time.compute});
        if (device.sharedHost && k > 1)
          time.oneThreadCompute = model.runsOnOneThread(work)
                                      ? time.compute
                                      : std::min(time.compute,
                                                 device.launchSeconds);
        byKernel[instr.kernel] += time.compute;
      } else {
        bool reduce = instr.kind == plan::Instr::Kind::Reduce;
        if (instr.dst < 0 ||
            static_cast<size_t>(instr.dst) >= program.buffers.size())
          return failure("device " + llvm::Twine(d) +
                         " has a transfer into a missing buffer");
        const plan::Buffer &dst = program.buffers[instr.dst];
        double elementSize =
            plan::dtypeSize(plan.tensors[dst.tensor].dtype);
        std::vector<double> remote(numSteps, 0), messages(numSteps, 0);
        double local = 0, all = 0;
        plan::forEachPiece(plan, d, instr, [&](const plan::Piece &piece) {
          double bytes = piece.region.numElements() * elementSize;
          if (bytes <= 0)
            return;
          all += bytes;
          if (piece.device == static_cast<int32_t>(d)) {
            local += bytes;
            return;
          }
          size_t s = stepBetween(d, piece.device);
          remote[s] += bytes;
          messages[s] += 1;
          received[d][s] += static_cast<uint64_t>(bytes);
          dev.receivedBytes += static_cast<uint64_t>(bytes);
        });
        if (all > 0) {
          // A copy reads and writes each local byte; a reduction also
          // reads what it adds to, for every piece.
          time.copy = device.launchSeconds +
                      model.memorySeconds(2 * local + (reduce ? 2 * all : 0));
          if (!found.empty() && !reduce) {
            // A copy reads its local pieces from where they are and
            // writes them through the caches as its traffic allows.
            const LevelBytes &reads = found[d][index];
            double remoteOnHost = device.sharedHost ? all - local : 0;
            double seconds = 0;
            for (int level = 0; level < 3; ++level)
              seconds += reads[level] /
                         model.levelBytesPerSecond(
                             static_cast<MemoryLevel>(level));
            // The reads of remote pieces are the transfer's (below).
            double readBytes = reads[0] + reads[1] + reads[2];
            if (readBytes > 0)
              seconds *= (readBytes - remoteOnHost) / readBytes;
            time.copy = device.launchSeconds + seconds +
                        local / model.levelBytesPerSecond(
                                    model.levelAfter(0, 2 * local));
          }
          // Virtual devices on one host copy between their arenas: a
          // transfer whose traffic fits in the cache runs at its rate, not
          // the link's (a large memcpy's).
          const bool inCache = device.sharedHost && device.cacheBytes > 0 &&
                               2 * all <= device.cacheBytes;
          for (size_t s = 0; s < numSteps; ++s)
            if (remote[s] > 0)
              time.comm[s] =
                  (inCache ? 2 * remote[s] / device.cacheBytesPerSecond
                           : remote[s] / (result.links[s].gbps * 1e9)) +
                  messages[s] * result.links[s].latencySeconds;
        }
      }
      dev.computeSeconds += time.compute;
      if (d == 0 && instr.kind != plan::Instr::Kind::Compute) {
        double comm = 0;
        for (double c : time.comm)
          comm += c;
        result.device0Instructions.push_back(
            {static_cast<int64_t>(index),
             instr.kind == plan::Instr::Kind::Reduce ? "Reduce" : "Fetch",
             false, false, "", 0, 0, device.launchSeconds,
             time.copy + comm});
      }
      dev.copySeconds += time.copy;
      for (double c : time.comm)
        dev.commSeconds += c;
      auto &level = levels[instr.seq];
      if (level.empty())
        level.assign(k, InstrTime{0, 0, std::vector<double>(numSteps, 0)});
      InstrTime &sum = level[d];
      if (!sum.op)
        sum.op = &instr.op.str();
      sum.compute += time.compute;
      sum.oneThreadCompute += time.oneThreadCompute;
      sum.copy += time.copy;
      for (size_t s = 0; s < numSteps; ++s)
        sum.comm[s] += time.comm[s];
    }
  }

  result.commSecondsPerStep.assign(numSteps, 0);
  auto add = [&](const InstrTime &time) {
    result.computeSeconds += time.compute;
    result.copySeconds += time.copy;
    for (size_t s = 0; s < numSteps; ++s)
      result.commSecondsPerStep[s] += time.comm[s];
  };
  const int64_t shownDevices =
      std::min<int64_t>(k, StepPrediction::kTimelineDevices);
  double clock = 0; // the timeline's: where the next level (device) starts
  auto addSpan = [&](int64_t seq, int64_t d, const InstrTime &time) {
    double comm = time.total() - time.compute - time.copy;
    if (d >= shownDevices || time.total() <= 0)
      return;
    StepPrediction::Span span;
    span.seq = seq;
    span.device = d;
    span.start = clock;
    span.compute = time.compute;
    span.copy = time.copy;
    span.comm = comm;
    span.op = time.op ? *time.op : std::string();
    result.timeline.push_back(std::move(span));
  };
  for (const auto &[seq, times] : levels) {
    if (device.sharedHost) {
      // tofu-run runs a level's instructions of different devices side by
      // side, one list of devices per host thread (--cpu-schedule): what
      // each runs on one thread (small kernels, launches, copies and
      // transfers, which are memcpys) takes 1 / (threads in use) of its
      // time; a kernel that would use every thread alone runs on one
      // beside the others, at no gain.
      size_t active = 0;
      for (const InstrTime &time : times)
        active += time.total() > 0;
      const double side = std::min<double>(std::max(device.hostThreads, 1u),
                                           std::max<size_t>(active, 1));
      if (side > 1)
        ++result.sideBySideLevels;
      for (size_t d = 0; d < times.size(); ++d) {
        InstrTime time = times[d];
        if (side > 1) {
          time.compute -= time.oneThreadCompute * (1 - 1 / side);
          time.copy /= side;
          for (double &c : time.comm)
            c /= side;
        }
        add(time);
        addSpan(seq, static_cast<int64_t>(d), time);
        clock += time.total();
      }
      continue;
    }
    for (size_t d = 0; d < times.size(); ++d)
      addSpan(seq, static_cast<int64_t>(d), times[d]);
    // The slowest device of the level (ties: the lowest index).
    size_t slowest = 0;
    for (size_t d = 1; d < times.size(); ++d)
      if (times[d].total() > times[slowest].total())
        slowest = d;
    add(times[slowest]);
    clock += times[slowest].total();
  }
  // The step's own work: the input and label buffers fed each step. On a
  // shared host a region that an earlier device was fed already is copied
  // from it (tofu-run's CPU executor), not generated again.
  {
    uint64_t most = 0, distinct = 0;
    double copiedBytes = 0;
    std::set<std::pair<int32_t, std::vector<int64_t>>> seen;
    for (int64_t d = 0; d < k; ++d) {
      uint64_t elements = 0;
      for (const plan::Buffer &buffer : plan.devices[d].buffers) {
        plan::TensorRole role = plan.tensors[buffer.tensor].role;
        if (role != plan::TensorRole::Input && role != plan::TensorRole::Label)
          continue;
        const uint64_t n = static_cast<uint64_t>(buffer.region.numElements());
        elements += n;
        std::vector<int64_t> key = buffer.region.lo;
        key.insert(key.end(), buffer.region.hi.begin(), buffer.region.hi.end());
        if (seen.insert({buffer.tensor, std::move(key)}).second)
          distinct += n;
        else
          copiedBytes += static_cast<double>(buffer.bytes);
      }
      result.fedElements += elements;
      most = std::max(most, elements);
    }
    result.overheadSeconds =
        device.sharedHost
            ? model.stepOverheadSeconds(static_cast<double>(distinct)) +
                  model.memorySeconds(2 * copiedBytes)
            : model.stepOverheadSeconds(static_cast<double>(most));
    // tofu-run hands each level run side by side to its worker pool and
    // joins it: a cost per level, not per instruction (the transformer
    // encoder at k = 4: 332 such levels, 2.1 ms of its traced step between
    // them; bench/simulate.md, session 37).
    if (device.sharedHost)
      result.overheadSeconds +=
          static_cast<double>(result.sideBySideLevels) * device.waveSeconds;
  }
  result.stepSeconds = result.computeSeconds + result.copySeconds +
                       result.commSeconds() + result.overheadSeconds;
  for (int64_t d = 0; d < k; ++d) {
    result.busiestDeviceSeconds = std::max(
        result.busiestDeviceSeconds, result.devices[d].busySeconds());
    for (size_t s = 0; s < numSteps; ++s) {
      result.stepBytes[s] += received[d][s];
      result.stepBytesBusiest[s] =
          std::max(result.stepBytesBusiest[s], received[d][s]);
    }
  }
  result.kernelSeconds.assign(byKernel.begin(), byKernel.end());
  result.batchSize = plan.batchSize;
  if (result.stepSeconds > 0)
    result.samplesPerSecond = plan.batchSize / result.stepSeconds;

  // Fit.
  result.memoryBytes = device.memoryBytes;
  result.memoryMargin = options.memoryMargin;
  if (device.memoryBytes) {
    result.usableBytes = static_cast<uint64_t>(
        std::floor(device.memoryBytes * (1 - options.memoryMargin)));
    if (device.sharedHost) {
      for (const auto &dev : result.devices)
        result.worstBytes += dev.peakBytes;
      result.worstDevice = -1;
    } else {
      for (int64_t d = 0; d < k; ++d)
        if (result.devices[d].peakBytes > result.worstBytes) {
          result.worstBytes = result.devices[d].peakBytes;
          result.worstDevice = d;
        }
    }
    result.fits = result.worstBytes <= result.usableBytes;
    if (!result.fits) {
      result.overBytes = result.worstBytes - result.usableBytes;
      // Virtual devices on one host share its memory: more of them do
      // not help.
      if (!device.sharedHost && result.usableBytes > 0)
        result.estimatedFittingDevices = static_cast<int64_t>(std::ceil(
            static_cast<double>(k) * result.worstBytes / result.usableBytes));
    }
  }
  return result;
}

std::string formatFit(const StepPrediction &p) {
  if (!p.memoryBytes)
    return llvm::formatv("memory fit: not checked (device {0} gives no "
                         "memory size)",
                         p.device)
        .str();
  std::string usable = llvm::formatv("{0} usable ({1} bytes less a {2}% "
                                     "margin)",
                                     p.usableBytes, p.memoryBytes,
                                     std::lround(p.memoryMargin * 100))
                           .str();
  std::string who = p.worstDevice < 0
                        ? std::string("all devices together (one host)")
                        : "device " + std::to_string(p.worstDevice);
  if (p.fits)
    return llvm::formatv("memory fit: fits: {0} peak {1} bytes of {2}", who,
                         p.worstBytes, usable)
        .str();
  std::string line =
      llvm::formatv("memory fit: does not fit: {0} needs {1} bytes, {2} "
                    "over the {3}",
                    who, p.worstBytes, p.overBytes, usable)
          .str();
  if (p.estimatedFittingDevices > 0)
    line += llvm::formatv("; about {0} devices would (peak memory taken as "
                          "1/k; --gpus auto compiles to check)",
                          p.estimatedFittingDevices)
                .str();
  else if (p.worstDevice < 0)
    line += "; more virtual devices on one host do not add memory";
  return line;
}

/// Above this many devices the text gives ranges, the busiest and the least
/// busy device instead of a line per device.
constexpr size_t kListedPredictionDevices = 16;

std::string formatPredictionText(const StepPrediction &p) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv(
      "predicted step time: {0:e3} s on {1} ({2} devices, {3}): compute "
      "{4:e3} s + transfers {5:e3} s + copies {6:e3} s + step overhead "
      "{10:e3} s ({11} elements fed); {7:f1} samples/s (batch {8}); busiest "
      "device {9:e3} s\n",
      p.stepSeconds, p.device, p.devices.size(),
      p.sharedHost ? "one shared host: all devices' work adds up"
                   : "side by side, each seq level waits for its slowest "
                     "device, no overlap within a device",
      p.computeSeconds, p.commSeconds(), p.copySeconds, p.samplesPerSecond,
      p.batchSize, p.busiestDeviceSeconds, p.overheadSeconds, p.fedElements);
  for (size_t s = 0; s < p.links.size(); ++s)
    os << llvm::formatv("  step {0} transfers: {1:e3} s over {2} at {3} GB/s "
                        "(latency {4:e1} s); {5} bytes received, at most {6} "
                        "by one device\n",
                        s + 1, p.commSecondsPerStep[s], p.links[s].name,
                        p.links[s].gbps, p.links[s].latencySeconds,
                        p.stepBytes[s], p.stepBytesBusiest[s]);
  auto deviceLine = [&](size_t d, const char *prefix) {
    const auto &dev = p.devices[d];
    os << llvm::formatv("  {7}device {0}: busy {1:e3} s (compute {2:e3} s, "
                        "transfers {3:e3} s, copies {4:e3} s), receives {5} "
                        "bytes, peak {6} bytes\n",
                        d, dev.busySeconds(), dev.computeSeconds,
                        dev.commSeconds, dev.copySeconds, dev.receivedBytes,
                        dev.peakBytes, prefix);
  };
  if (p.devices.size() <= kListedPredictionDevices) {
    for (size_t d = 0; d < p.devices.size(); ++d)
      deviceLine(d, "");
  } else if (!p.devices.empty()) {
    // A thousand lines say little: the range of each column over all
    // devices, then the busiest and the least busy device in full (JSON
    // keeps every device).
    auto range = [&](auto value, const char *spec) {
      auto [lo, hi] = std::minmax_element(
          p.devices.begin(), p.devices.end(),
          [&](const auto &a, const auto &b) { return value(a) < value(b); });
      return llvm::formatv(spec, value(*lo), value(*hi)).str();
    };
    using Device = std::decay_t<decltype(p.devices.front())>;
    std::vector<double> busy;
    for (const Device &dev : p.devices)
      busy.push_back(dev.busySeconds());
    std::vector<double> sorted = busy;
    std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2,
                     sorted.end());
    os << llvm::formatv(
        "  devices 0-{0}: busy {1} s (median {2:e3} s), compute {3} s, "
        "transfers {4} s, copies {5} s, receives {6} bytes, peak {7} bytes "
        "(each device: --dump-plan=json)\n",
        p.devices.size() - 1,
        range([](const Device &d) { return d.busySeconds(); },
              "{0:e3} to {1:e3}"),
        sorted[sorted.size() / 2],
        range([](const Device &d) { return d.computeSeconds; },
              "{0:e3} to {1:e3}"),
        range([](const Device &d) { return d.commSeconds; },
              "{0:e3} to {1:e3}"),
        range([](const Device &d) { return d.copySeconds; },
              "{0:e3} to {1:e3}"),
        range([](const Device &d) { return d.receivedBytes; }, "{0} to {1}"),
        range([](const Device &d) { return d.peakBytes; }, "{0} to {1}"));
    const size_t busiest = static_cast<size_t>(
        std::max_element(busy.begin(), busy.end()) - busy.begin());
    const size_t idlest = static_cast<size_t>(
        std::min_element(busy.begin(), busy.end()) - busy.begin());
    deviceLine(busiest, "busiest: ");
    deviceLine(idlest, "least busy: ");
  }
  os << formatFit(p) << "\n";
  return text;
}

} // namespace tofu
