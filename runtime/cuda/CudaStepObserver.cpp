//===- CudaStepObserver.cpp - --dump and --trace on CUDA ------------------===//
//
// See CudaStepObserver.h. Compiled and linked here and in CI; the timing
// (--trace) ran on one H200 (bench/gpu/H200.md), the snapshots (--dump)
// never on a GPU.
//
//===----------------------------------------------------------------------===//

#include "CudaStepObserver.h"

#include "CudaCheck.h"
#include "CudaDeviceState.h"
#include "CudaSchedule.h"
#include "CudaTraffic.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <map>

using namespace tofu::cuda;
using namespace tofu::plan;
using tofu::runtime::CpuExecutor;

struct CudaStepObserver::Impl {
  const Plan &plan;
  CudaExecutor &exec;
  std::vector<std::vector<BufferLocation>> where;
  /// Pinned host copy per watched buffer.
  std::map<std::pair<int32_t, int32_t>, uint8_t *> pinned;
  /// Per schedule entry, the watched buffers copied after it.
  std::vector<std::vector<std::pair<int32_t, int32_t>>> points;
  /// Watched buffers no entry writes: copied after the feed.
  std::vector<std::pair<int32_t, int32_t>> fed;
  // Timing.
  bool timing = false;
  std::vector<cudaEvent_t> begin, end; ///< per schedule entry
  std::vector<cudaEvent_t> origin;     ///< per GPU
  std::chrono::steady_clock::time_point stepStart;
  ScheduleTraffic traffic;

  Impl(const Plan &plan, CudaExecutor &exec) : plan(plan), exec(exec) {}
  ~Impl() {
    for (auto &[key, p] : pinned)
      cudaFreeHost(p);
    for (auto *list : {&begin, &end, &origin})
      for (cudaEvent_t e : *list)
        if (e)
          cudaEventDestroy(e);
  }

  std::string copyOut(const std::pair<int32_t, int32_t> &key,
                      cudaStream_t stream, bool async) {
    const BufferLocation &loc = where[key.first][key.second];
    if (loc.bytes == 0)
      return "";
    const void *src = exec.deviceAddress(loc.gpu, loc.offset);
    if (async)
      TOFU_CUDA(cudaMemcpyAsync(pinned[key], src, loc.bytes,
                                cudaMemcpyDeviceToHost, stream));
    else
      TOFU_CUDA(
          cudaMemcpy(pinned[key], src, loc.bytes, cudaMemcpyDeviceToHost));
    return "";
  }

  std::string onIssue(int32_t entry, bool after, void *streamPtr) {
    cudaStream_t stream = static_cast<cudaStream_t>(streamPtr);
    if (entry < 0) {
      // The step starts: every stream is idle (the previous step was waited
      // for, the feed is synchronous).
      for (const auto &key : fed) {
        TOFU_CUDA(cudaSetDevice(where[key.first][key.second].gpu));
        if (std::string err = copyOut(key, nullptr, false); !err.empty())
          return err;
      }
      if (timing) {
        stepStart = std::chrono::steady_clock::now();
        for (size_t g = 0; g < origin.size(); ++g) {
          TOFU_CUDA(cudaSetDevice(static_cast<int>(g)));
          TOFU_CUDA(cudaEventRecord(origin[g], nullptr));
        }
      }
      return "";
    }
    if (timing)
      TOFU_CUDA(cudaEventRecord(after ? end[entry] : begin[entry], stream));
    if (after)
      for (const auto &key : points[entry])
        if (std::string err = copyOut(key, stream, true); !err.empty())
          return err;
    return "";
  }
};

CudaStepObserver::CudaStepObserver(const Plan &plan, CudaExecutor &exec)
    : impl(std::make_unique<Impl>(plan, exec)) {}
CudaStepObserver::~CudaStepObserver() = default;

void CudaStepObserver::watch(int32_t device, int32_t buffer) {
  watched.push_back({device, buffer});
}

void CudaStepObserver::setObserver(CpuExecutor::Observer fn) {
  observer = std::move(fn);
}

std::string CudaStepObserver::prepare() {
  if (!active())
    return "";
  Impl &m = *impl;
  const Schedule &schedule = m.exec.schedule();
  m.where = locateBuffers(m.plan, schedule.mapping);
  m.points = snapshotPoints(m.plan, schedule, watched);
  std::map<std::pair<int32_t, int32_t>, bool> written;
  for (const auto &list : m.points)
    for (const auto &key : list)
      written[key] = true;
  for (const auto &key : watched) {
    if (!written.count(key))
      m.fed.push_back(key);
    uint8_t *&p = m.pinned[key];
    if (!p)
      TOFU_CUDA(cudaMallocHost(
          reinterpret_cast<void **>(&p),
          std::max<uint64_t>(1, m.where[key.first][key.second].bytes)));
  }
  if (observer) {
    m.timing = true;
    m.traffic = countTraffic(m.plan, schedule);
    m.begin.assign(schedule.instrs.size(), nullptr);
    m.end.assign(schedule.instrs.size(), nullptr);
    for (size_t s = 0; s < schedule.instrs.size(); ++s) {
      TOFU_CUDA(cudaSetDevice(
          schedule.mapping.devices[schedule.instrs[s].device].gpu));
      TOFU_CUDA(cudaEventCreate(&m.begin[s]));
      TOFU_CUDA(cudaEventCreate(&m.end[s]));
    }
    m.origin.assign(schedule.mapping.numGpus, nullptr);
    for (int32_t g = 0; g < schedule.mapping.numGpus; ++g) {
      TOFU_CUDA(cudaSetDevice(g));
      TOFU_CUDA(cudaEventCreate(&m.origin[g]));
    }
  }
  m.exec.setIssueHook([&m](int32_t entry, bool after, void *stream) {
    return m.onIssue(entry, after, stream);
  });
  return "";
}

std::string CudaStepObserver::finishStep() {
  Impl &m = *impl;
  if (!m.timing)
    return "";
  const Schedule &schedule = m.exec.schedule();
  for (size_t s = 0; s < schedule.instrs.size(); ++s) {
    const ScheduledInstr &e = schedule.instrs[s];
    cudaEvent_t origin = m.origin[schedule.mapping.devices[e.device].gpu];
    float startMs = 0, endMs = 0;
    TOFU_CUDA(cudaEventElapsedTime(&startMs, origin, m.begin[s]));
    TOFU_CUDA(cudaEventElapsedTime(&endMs, origin, m.end[s]));
    auto at = [&m](float ms) {
      return m.stepStart +
             std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                 std::chrono::duration<double, std::milli>(ms));
    };
    CpuExecutor::ExecutedInstr executed;
    executed.device = e.device;
    executed.index = static_cast<size_t>(e.index);
    executed.instr = &m.plan.devices[e.device].instrs[e.index];
    executed.start = at(startMs);
    executed.end = at(endMs);
    executed.remoteBytes = m.traffic.receivedPerEntry[s];
    observer(executed);
  }
  return "";
}

tofu::runtime::BufferSource CudaStepObserver::snapshots() const {
  const Impl *m = impl.get();
  return [m](int32_t d, int32_t b) -> const uint8_t * {
    auto it = m->pinned.find({d, b});
    return it == m->pinned.end() ? nullptr : it->second;
  };
}
