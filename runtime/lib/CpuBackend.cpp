//===- CpuBackend.cpp - Execute a k-device plan on the CPU ----------------===//

#include "tofu/runtime/CpuBackend.h"
#include "tofu/runtime/ComputeKernel.h"
#include "tofu/runtime/ElementAccess.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>
#include <thread>
#include <unistd.h>

using namespace tofu::runtime;
using namespace tofu::plan;

/// One instruction ready to run: a Compute's operand views point into the
/// arenas; runCompute (ComputeKernel.h) picks the native kernel or the
/// expression interpreter.
struct CpuExecutor::Prepared {
  int32_t device = 0;
  size_t index = 0; ///< position in the device program
  const Instr *instr = nullptr;
  /// Compute: operand views into the device arena.
  std::vector<TensorView> inputs, outputs;
};

namespace {

std::string describe(const Plan &plan, int32_t d, size_t i) {
  const Instr &in = plan.devices[d].instrs[i];
  std::string s = "device " + std::to_string(d) + " instruction " +
                  std::to_string(i) + " (seq " + std::to_string(in.seq);
  if (!in.op.empty())
    s += ", op '" + in.op + "'";
  return s + ")";
}

/// Row-major strides of a box's extents.
std::vector<int64_t> stridesOf(const Box &box) {
  std::vector<int64_t> s(box.lo.size(), 1);
  for (size_t i = box.lo.size(); i-- > 1;)
    s[i - 1] = s[i] * (box.hi[i] - box.lo[i]);
  return s;
}

/// Copies (or adds) box `region` from a buffer holding `srcBox` into a
/// buffer holding `dstBox`; all boxes in global coordinates. The innermost
/// dimension is moved as one contiguous run.
void moveBox(const uint8_t *src, const Box &srcBox, uint8_t *dst,
             const Box &dstBox, const Box &region, DType dtype, bool add) {
  int64_t n = region.numElements();
  if (n == 0)
    return;
  size_t rank = region.lo.size();
  size_t es = dtypeSize(dtype);
  auto ss = stridesOf(srcBox), ds = stridesOf(dstBox);
  int64_t run = rank ? region.hi[rank - 1] - region.lo[rank - 1] : 1;
  int64_t rows = n / run;
  std::vector<int64_t> idx(region.lo);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t so = 0, dof = 0;
    for (size_t i = 0; i < rank; ++i) {
      so += (idx[i] - srcBox.lo[i]) * ss[i];
      dof += (idx[i] - dstBox.lo[i]) * ds[i];
    }
    const uint8_t *s = src + so * es;
    uint8_t *d = dst + dof * es;
    if (!add) {
      std::memmove(d, s, run * es);
    } else if (dtype == DType::F32) {
      float *df = reinterpret_cast<float *>(d);
      const float *sf = reinterpret_cast<const float *>(s);
      for (int64_t k = 0; k < run; ++k)
        df[k] += sf[k];
    } else if (dtype == DType::Bool) {
      for (int64_t k = 0; k < run; ++k) // a sum of booleans saturates at 1
        d[k] = (d[k] | s[k]) ? 1 : 0;
    } else if (dtype == DType::I64) {
      int64_t *di = reinterpret_cast<int64_t *>(d);
      const int64_t *si = reinterpret_cast<const int64_t *>(s);
      for (int64_t k = 0; k < run; ++k)
        di[k] += si[k];
    } else if (dtype == DType::F64) {
      double *dd = reinterpret_cast<double *>(d);
      const double *sd = reinterpret_cast<const double *>(s);
      for (int64_t k = 0; k < run; ++k)
        dd[k] += sd[k];
    } else {
      // Other types add in double and convert back (integers wrap, f16 and
      // bf16 round to nearest even), as the interpreter would.
      for (int64_t k = 0; k < run; ++k)
        storeElement(d, dtype, k,
                     loadElement(d, dtype, k) + loadElement(s, dtype, k));
    }
    // Advance the odometer over all but the innermost dimension.
    for (size_t i = rank > 0 ? rank - 1 : 0; i-- > 0;) {
      if (++idx[i] < region.hi[i])
        break;
      idx[i] = region.lo[i];
    }
  }
}

} // namespace

CpuExecutor::CpuExecutor(const Plan &plan) : plan(plan), data(plan) {}
CpuExecutor::~CpuExecutor() = default;

void CpuExecutor::touch(int32_t device, int32_t buffer) {
  const Buffer &b = plan.devices[device].buffers[buffer];
  uint64_t end = b.offset + b.bytes;
  if (b.bytes && end > peakTouched[device])
    peakTouched[device] = end;
}

void CpuExecutor::afterWrite(int32_t device, int32_t buffer) {
  if (watched.empty())
    return;
  auto it = watched.find({device, buffer});
  if (it == watched.end())
    return;
  const Buffer &b = plan.devices[device].buffers[buffer];
  const uint8_t *p = arenas[device].data() + b.offset;
  it->second.bytes.assign(p, p + b.bytes);
  it->second.written = true;
}

std::string CpuExecutor::init() {
  size_t k = plan.devices.size();
  commBytes.assign(k, 0);
  peakTouched.assign(k, 0);
  arenas.clear();
  arenas.resize(k);
  for (size_t d = 0; d < k; ++d) {
    if (!isLocal(static_cast<int32_t>(d)))
      continue; // another process holds this device's arena
    uint64_t bytes = plan.devices[d].peakBytes;
    try {
      arenas[d].assign(bytes, 0);
    } catch (const std::bad_alloc &) {
      return "out of memory: device " + std::to_string(d) + " needs an arena "
             "of " + std::to_string(bytes) + " bytes (its planned peak)";
    } catch (const std::length_error &) {
      return "out of memory: device " + std::to_string(d) + " needs an arena "
             "of " + std::to_string(bytes) + " bytes (its planned peak)";
    }
    const auto &buffers = plan.devices[d].buffers;
    for (size_t b = 0; b < buffers.size(); ++b) {
      if (!buffers[b].hasInit())
        continue;
      if (buffers[b].initSize() != buffers[b].bytes)
        return "device " + std::to_string(d) + " buffer " + std::to_string(b) +
               ": initial contents have the wrong size";
      std::memcpy(arenas[d].data() + buffers[b].offset,
                  buffers[b].initData(), buffers[b].bytes);
      touch(static_cast<int32_t>(d), static_cast<int32_t>(b));
    }
  }
  if (std::string err = prepare(); !err.empty())
    return err;
  initialized = true;
  return "";
}

std::string CpuExecutor::prepare() {
  program.clear();
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    const DeviceProgram &dev = plan.devices[d];
    for (size_t i = 0; i < dev.instrs.size(); ++i) {
      const Instr &in = dev.instrs[i];
      // Another process's device: only its fetches and reductions that read
      // a piece of this process's device concern this process (it sends).
      if (!isLocal(static_cast<int32_t>(d))) {
        bool sendsHere = false;
        if (in.kind != Instr::Kind::Compute)
          for (const Piece &piece : in.pieces)
            sendsHere |= isLocal(piece.device);
        if (!sendsHere)
          continue;
      }
      Prepared p;
      p.device = static_cast<int32_t>(d);
      p.index = i;
      p.instr = &in;
      if (in.kind == Instr::Kind::Compute && isLocal(p.device)) {
        if (!hasNativeKernel(in.kernel) && in.programs.empty()) {
          std::string names;
          for (const std::string &n : registeredKernels())
            names += (names.empty() ? "" : ", ") + n;
          return describe(plan, p.device, i) + ": no CPU kernel named '" +
                 in.kernel + "' (available: " + names +
                 ") and no expression program for it; add the kernel to the "
                 "runtime, give the op a TDL spec that is not opaque, or "
                 "compile the model without this op";
        }
        auto view = [&](int32_t b, const std::vector<std::vector<int64_t>> &g,
                        size_t pos) {
          TensorView v;
          if (b < 0)
            return v;
          const Buffer &buf = dev.buffers[b];
          const TensorInfo &t = plan.tensors[buf.tensor];
          v.data = arenas[d].data() + buf.offset;
          v.dtype = t.dtype;
          v.lo = buf.region.lo;
          for (size_t j = 0; j < buf.region.lo.size(); ++j)
            v.shape.push_back(buf.region.hi[j] - buf.region.lo[j]);
          v.globalShape = g.empty() ? t.shape : g[pos];
          return v;
        };
        for (size_t j = 0; j < in.inputs.size(); ++j)
          p.inputs.push_back(view(in.inputs[j], in.inputGlobalShapes, j));
        for (size_t j = 0; j < in.outputs.size(); ++j)
          p.outputs.push_back(view(in.outputs[j], in.outputGlobalShapes, j));
      }
      program.push_back(std::move(p));
    }
  }
  std::stable_sort(program.begin(), program.end(),
                   [](const Prepared &a, const Prepared &b) {
                     if (a.instr->seq != b.instr->seq)
                       return a.instr->seq < b.instr->seq;
                     return a.device < b.device;
                   });
  return "";
}

std::string CpuExecutor::feed(int64_t step) {
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    if (!isLocal(static_cast<int32_t>(d)))
      continue;
    const auto &buffers = plan.devices[d].buffers;
    for (size_t b = 0; b < buffers.size(); ++b) {
      const TensorInfo &t = plan.tensors[buffers[b].tensor];
      if (t.role != TensorRole::Input && t.role != TensorRole::Label)
        continue;
      uint8_t *out = arenas[d].data() + buffers[b].offset;
      std::string err =
          dataSource
              ? dataSource(buffers[b].tensor, buffers[b].region, step, out)
              : data.fill(buffers[b].tensor, buffers[b].region,
                          step % SyntheticData::kNumBatches, out);
      if (!err.empty())
        return "feeding device " + std::to_string(d) + " buffer " +
               std::to_string(b) + ": " + err;
      touch(static_cast<int32_t>(d), static_cast<int32_t>(b));
      afterWrite(static_cast<int32_t>(d), static_cast<int32_t>(b));
    }
  }
  return "";
}

std::string CpuExecutor::sendPieces(const Prepared &p) {
  const Instr &in = *p.instr;
  const int32_t local = localDevice();
  const auto &dstBuffers = plan.devices[p.device].buffers;
  const DType dtype = plan.tensors[dstBuffers[in.dst].tensor].dtype;
  for (const Piece &piece : in.pieces) {
    int64_t n = piece.region.numElements();
    if (piece.device != local || n == 0)
      continue; // empty pieces are not sent (nor received)
    const Buffer &src = plan.devices[local].buffers[piece.buffer];
    touch(local, piece.buffer);
    packed.resize(static_cast<size_t>(n) * dtypeSize(dtype));
    moveBox(arenas[local].data() + src.offset, src.region, packed.data(),
            piece.region, piece.region, dtype, /*add=*/false);
    if (std::string err = transport->send(p.device, packed.data(),
                                          packed.size());
        !err.empty())
      return describe(plan, p.device, p.index) + ": " + err;
  }
  return "";
}

std::string CpuExecutor::execute(const Prepared &p) {
  const Instr &in = *p.instr;
  const int32_t d = p.device;
  const auto &buffers = plan.devices[d].buffers;
  lastRan = true;
  lastInterpreted = false;
  if (!isLocal(d)) {
    lastRan = false;
    return sendPieces(p);
  }
  if (failAfterCount >= 0 && instrsRun++ == failAfterCount) {
    std::fprintf(stderr,
                 "tofu-run: device %d: %s after %lld instructions as "
                 "--test-fail asked\n",
                 d, failByStalling ? "stalling" : "dying",
                 static_cast<long long>(failAfterCount));
    std::fflush(stderr);
    if (!failByStalling)
      _exit(3);
    for (;;)
      std::this_thread::sleep_for(std::chrono::seconds(3600));
  }
  if (in.kind == Instr::Kind::Compute) {
    // A device whose share of the op is empty (more devices than the split
    // dimension has elements) has nothing to compute.
    bool anyOutput = false;
    for (int32_t b : in.outputs)
      anyOutput |= buffers[b].region.numElements() > 0;
    if (!anyOutput) {
      lastRan = false;
      return "";
    }
    for (int32_t b : in.inputs)
      if (b >= 0)
        touch(d, b);
    for (int32_t b : in.outputs)
      touch(d, b);
    ComputePath path = interpretPrograms && !in.programs.empty()
                           ? ComputePath::Interpreter
                           : ComputePath::Auto;
    ComputePath used = ComputePath::Native;
    std::string err = runCompute(in.kernel, in.attrs, p.inputs, p.outputs,
                                 in.programs, in.reductionRanges, path, &used,
                                 static_cast<uint64_t>(currentStep));
    if (!err.empty())
      return describe(plan, d, p.index) + ": " + err;
    if (used == ComputePath::Interpreter) {
      lastInterpreted = true;
      ++interpretedCounts[in.kernel];
    }
    for (int32_t b : in.outputs)
      afterWrite(d, b);
    return "";
  }

  const Buffer &dst = buffers[in.dst];
  const DType dtype = plan.tensors[dst.tensor].dtype;
  uint8_t *dstPtr = arenas[d].data() + dst.offset;
  touch(d, in.dst);
  // A Reduce accumulates into a scratch copy so that a piece may alias dst.
  std::vector<uint8_t> scratch;
  uint8_t *target = dstPtr;
  if (in.kind == Instr::Kind::Reduce) {
    scratch.assign(dst.bytes, 0);
    target = scratch.data();
  }
  for (const Piece &piece : in.pieces) {
    if (!isLocal(piece.device)) {
      // Another process sends the piece's region packed densely.
      int64_t n = piece.region.numElements();
      if (n == 0)
        continue;
      packed.resize(static_cast<size_t>(n) * dtypeSize(dtype));
      if (std::string err = transport->recv(piece.device, packed.data(),
                                            packed.size());
          !err.empty())
        return describe(plan, d, p.index) + ": " + err;
      moveBox(packed.data(), piece.region, target, dst.region, piece.region,
              dtype, in.kind == Instr::Kind::Reduce);
      commBytes[d] += static_cast<uint64_t>(n) * dtypeSize(dtype);
      continue;
    }
    const Buffer &src = plan.devices[piece.device].buffers[piece.buffer];
    const uint8_t *srcPtr = arenas[piece.device].data() + src.offset;
    touch(piece.device, piece.buffer);
    moveBox(srcPtr, src.region, target, dst.region, piece.region, dtype,
            in.kind == Instr::Kind::Reduce);
    if (piece.device != d)
      commBytes[d] += static_cast<uint64_t>(piece.region.numElements()) *
                      dtypeSize(dtype);
  }
  if (in.kind == Instr::Kind::Reduce && dst.bytes)
    std::memcpy(dstPtr, scratch.data(), dst.bytes);
  afterWrite(d, in.dst);
  return "";
}

std::string CpuExecutor::runStep(int64_t step) {
  if (!initialized)
    return "the CPU executor was not initialized";
  currentStep = step;
  std::fill(commBytes.begin(), commBytes.end(), 0);
  for (auto &[key, snap] : watched)
    snap.written = false;
  if (std::string err = feed(step); !err.empty())
    return err;
  for (const Prepared &p : program) {
    if (!observer) {
      if (std::string err = execute(p); !err.empty())
        return err;
      continue;
    }
    ExecutedInstr e;
    e.device = p.device;
    e.index = p.index;
    e.instr = p.instr;
    uint64_t before = commBytes[p.device];
    e.start = std::chrono::steady_clock::now();
    if (std::string err = execute(p); !err.empty())
      return err;
    e.end = std::chrono::steady_clock::now();
    e.remoteBytes = commBytes[p.device] - before;
    e.interpreted = lastInterpreted;
    if (lastRan)
      observer(e);
  }
  return "";
}

void CpuExecutor::watch(int32_t device, int32_t buffer) {
  watched[{device, buffer}];
}

const std::vector<uint8_t> *CpuExecutor::snapshot(int32_t device,
                                                  int32_t buffer) const {
  auto it = watched.find({device, buffer});
  if (it == watched.end() || !it->second.written)
    return nullptr;
  return &it->second.bytes;
}

const uint8_t *CpuExecutor::bufferData(int32_t device, int32_t buffer) const {
  return arenas[device].data() + plan.devices[device].buffers[buffer].offset;
}

std::string CpuExecutor::watchLoss() {
  if (plan.lossTensor < 0)
    return "the plan has no loss tensor";
  if (!isLocal(0))
    return ""; // the process of device 0 reports the loss
  const auto &buffers = plan.devices[0].buffers;
  for (size_t b = 0; b < buffers.size(); ++b)
    if (buffers[b].tensor == plan.lossTensor && buffers[b].owned) {
      const TensorInfo &t = plan.tensors[plan.lossTensor];
      if (!isFloatDType(t.dtype) || buffers[b].region.numElements() != 1)
        return "the loss tensor '" + t.name + "' is not a floating-point "
               "scalar (it is " + dtypeNumpyName(t.dtype) + " with " +
               std::to_string(buffers[b].region.numElements()) + " elements)";
      lossBuffer = {0, static_cast<int32_t>(b)};
      watch(0, static_cast<int32_t>(b));
      return "";
    }
  return "device 0 owns no buffer of the loss tensor '" +
         plan.tensors[plan.lossTensor].name + "'";
}

std::string CpuExecutor::lastLoss(double &loss) const {
  if (lossBuffer.first < 0)
    return "the loss is not watched";
  const std::vector<uint8_t> *snap =
      snapshot(lossBuffer.first, lossBuffer.second);
  const DType dtype = plan.tensors[plan.lossTensor].dtype;
  if (!snap || snap->size() != dtypeSize(dtype))
    return "no instruction wrote the loss tensor '" +
           plan.tensors[plan.lossTensor].name + "' on device 0 this step";
  loss = loadElement(snap->data(), dtype, 0);
  return "";
}

uint64_t CpuExecutor::commBytesTotal() const {
  uint64_t total = 0;
  for (uint64_t b : commBytes)
    total += b;
  return total;
}
