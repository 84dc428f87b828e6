//===- CudaExecutor.cpp - Execute a k-device plan on CUDA GPUs ------------===//
//
// See CudaExecutor.h. Every decision (placement, streams, events, calls) is
// taken from the Schedule (CudaSchedule.cpp); this file only makes the CUDA
// calls. Compiled and linked here and in CI; run on one H200 (one process,
// --devices 1; bench/gpu/H200.md), never on two or more GPUs nor as one
// process per GPU.
//
//===----------------------------------------------------------------------===//

#include "CudaExecutor.h"

#include "CudaBatchNorm.h"
#include "CudaBlas.h"
#include "CudaCheck.h"
#include "CudaConv.h"
#include "CudaPool.h"
#include "CudaDiagnostics.h"
#include "CudaFeed.h"
#include "CudaKernelLaunch.h"
#include "CudaMultiFetchTables.h"
#include "CudaNccl.h"
#include "CudaNcclSchedule.h"
#include "CudaSchedule.h"
#include "CudaTransferKernels.h"

#include "tofu/runtime/CollectivePieces.h"
#include "tofu/runtime/CudaArch.h"
#include "tofu/runtime/ElementAccess.h"
#include "tofu/runtime/SyntheticData.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <tuple>

using namespace tofu::cuda;
using namespace tofu::plan;
using tofu::runtime::SyntheticData;

namespace {

/// The 12-word out-of-buffer record of the generated kernels.
constexpr size_t kErrorWords = 12;

} // namespace

namespace {

/// The row-major shape of a Gemm op's cuBLAS call.
GemmShape gemmShapeOf(const CudaOp &op) {
  GemmShape shape;
  shape.transA = op.transA, shape.transB = op.transB;
  shape.m = op.m, shape.n = op.n, shape.k = op.k;
  shape.lda = op.lda, shape.ldb = op.ldb, shape.ldc = op.ldc;
  shape.alpha = op.alpha, shape.beta = op.beta;
  return shape;
}

/// The cuBLAS element type of a Gemm op's operands.
cudaDataType blasTypeOf(const CudaOp &op) {
  return op.dtype == DType::F64    ? CUDA_R_64F
         : op.dtype == DType::F16  ? CUDA_R_16F
         : op.dtype == DType::BF16 ? CUDA_R_16BF
                                   : CUDA_R_32F;
}

} // namespace

struct CudaExecutor::Impl {
  const Plan &plan;
  CudaRunOptions options;
  Schedule schedule;
  SyntheticData data;
  DataSource dataSource;

  struct Gpu {
    int ordinal = 0;
    std::string name;
    uint8_t *memory = nullptr; ///< the slices of its plan devices
    unsigned long long *step = nullptr;  ///< the training step (uniform())
    unsigned long long *error = nullptr; ///< kErrorWords
    float *lossSlot = nullptr; ///< the loss element (f32: 4 bytes, f64: 8)
    int multiprocessors = 1;
    bool active = true; ///< false: another rank's GPU (one process per GPU)
  };
  std::vector<Gpu> gpus;
  struct Device {
    cudaStream_t compute = nullptr, comm = nullptr;
    cudaEvent_t commJoined = nullptr, joined = nullptr;
    std::unique_ptr<BlasHandle> blas;
    std::unique_ptr<LtHandle> lt; ///< when a Gemm has an epilogue
    std::unique_ptr<ConvRunner> conv;
    std::unique_ptr<PoolRunner> pool;
    std::unique_ptr<BatchNormRunner> batchNorm;
  };
  std::vector<Device> devices;
  /// Per Gemm op with an epilogue (CudaOp::bias/relu), its prepared
  /// cublasLtMatmul; an op missing here (no algorithm) runs as the bias
  /// kernel, the GEMM and the ReLU kernel instead (issueGemm).
  std::map<const CudaOp *, std::unique_ptr<LtGemm>> ltGemms;
  std::vector<cudaEvent_t> events; ///< per schedule entry (null: none)
  /// The plan's cubin, loaded context-independently (cudaLibraryLoadData),
  /// and its kernels, launched with cudaLaunchKernel on any device.
  cudaLibrary_t library = nullptr;
  std::vector<cudaKernel_t> kernels;
  /// `<name>_block` of each "block-reduction" kernel and `<name>_row` of
  /// each "row-reduction" kernel (else null).
  std::vector<cudaKernel_t> variantKernels;
  /// `<name>_rowwarp` of each "row-reduction" kernel (a warp per row), or
  /// null (other kinds, and plans compiled before it existed).
  std::vector<cudaKernel_t> warpRowKernels;
  /// `<name>_grid` of each "block-reduction" kernel (kGridParts blocks an
  /// element), or null (other kinds, and plans compiled before it existed).
  std::vector<cudaKernel_t> gridKernels;
  /// Per launch: its grid variant's scratch (gridScratchBytes, zeroed at
  /// init, one per launch so that launches on concurrent streams never
  /// share it), or null where the launch does not run the grid variant.
  std::vector<double *> gridScratch;
  std::vector<void *> gridScratchAllocations;
  cudaEvent_t fork = nullptr;
  /// Per launch: pointer and parameter blocks, laid out as TofuPointers<P>
  /// and TofuParams<Q>.
  std::vector<std::vector<void *>> launchPointers;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t graphExec = nullptr;
  IssueHook hook;
  int64_t stepsRun = 0, replays = 0;
  bool initialized = false;
  /// The Input/Label batches of a step, filled into one pinned host area
  /// (CudaFeed.h) and copied from there asynchronously.
  FeedLayout feedCopies;
  uint8_t *pinned = nullptr;
  /// Synthetic batches: all filled into the area's slots at init.
  bool batchesCached = false;
  /// The step's batch: the data source's or the synthetic one.
  FeedFill feedFill() {
    return [this](int32_t tensor, const Box &region, int64_t step, void *out) {
      return dataSource ? dataSource(tensor, region, step, out)
                        : data.fill(tensor, region,
                                    step % SyntheticData::kNumBatches, out);
    };
  }
  /// A/B switches for bench/gpu (environment, read at init):
  /// TOFU_CUDA_PAGEABLE_FEED=1 feeds as before the pinned area (a
  /// synchronous cudaMemcpy per buffer from pageable memory);
  /// TOFU_CUDA_WARP_ROWS=1 runs rows of at most kWarpRowMaxElements on a
  /// warp each (`_rowwarp`). Off by default: on the H200 it made the
  /// replayed GPT steps slower although each traced kernel was faster
  /// (bench/gpu/H200-run10.md).
  bool pageableFeed = false, warpRows = false;
  std::vector<uint8_t> staging;

  // One process per GPU (options.transport set).
  bool multiProcess = false;
  int32_t rank = 0;
  MultiProcessSchedule multi;
  std::unique_ptr<NcclComm> nccl;
  cudaStream_t ncclStream = nullptr;
  cudaEvent_t ncclJoined = nullptr;
  /// Per NCCL call of a step, in issue order: an event recorded after it
  /// (the watchdog's progress) and its (entry, op).
  std::vector<cudaEvent_t> callDone;
  std::vector<std::pair<int32_t, int32_t>> calls;
  size_t callsIssued = 0;
  /// The first plan device of this process (its compute stream is the
  /// origin of the captured graph).
  int32_t originDevice = 0;

  Impl(const Plan &plan, CudaRunOptions options)
      : plan(plan), options(options), data(plan) {}
  ~Impl();

  uint8_t *pointer(const DevicePointer &p) const {
    const DevicePlacement &pl = schedule.mapping.devices[p.device];
    return gpus[pl.gpu].memory + pl.base + p.offset;
  }
  int gpuOf(int32_t device) const {
    return gpus[schedule.mapping.devices[device].gpu].ordinal;
  }
  cudaStream_t streamOf(const ScheduledInstr &e) const {
    if (e.stream == StreamKind::Nccl)
      return ncclStream;
    return e.stream == StreamKind::Comm ? devices[e.device].comm
                                        : devices[e.device].compute;
  }
  /// Whether this process runs plan device `d`.
  bool owns(int32_t d) const {
    return !multiProcess || schedule.mapping.devices[d].gpu == rank;
  }

  std::string init();
  std::string feed(int64_t step);
  std::string issue();
  std::string issueOp(const ScheduledInstr &e, const CudaOp &op,
                      cudaStream_t stream);
  std::string runStep(int64_t step);
  std::string timeEntries(int32_t repeats, int32_t launches,
                          std::vector<CudaExecutor::EntryTime> &times);
  std::string checkErrorRecords();
  /// The variant and grid of `launch` on `gpu` (CudaKernelLaunch.h), with
  /// the entry points the plan's cubin has.
  KernelLaunchConfig launchConfig(const CudaLaunch &launch,
                                  const Gpu &gpu) const {
    return kernelLaunchConfig(
        plan.cuda.kernels[launch.kernel], launch, gpu.multiprocessors,
        warpRowKernels[launch.kernel] != nullptr && warpRows,
        gridKernels[launch.kernel] != nullptr);
  }
  std::string initMultiProcess(int count);
  /// For every plain GEMM (no epilogue, one matrix, beta 0) whose cuBLASLt
  /// candidates include one at least kGemmSpeedup times faster than the
  /// cuBLAS call, timed here: runs it through that candidate (ltGemms).
  /// Before the initial values are uploaded: the timing writes the GEMMs'
  /// outputs.
  std::string chooseGemmAlgorithms();
  /// Prepares the cublasLtMatmul of every Gemm op with an epilogue (outside
  /// any graph capture); says on stderr how many cuBLASLt refused.
  std::string prepareEpilogueGemms();
  std::string watchdog();
  std::string describeCall(size_t call) const;
};

CudaExecutor::Impl::~Impl() {
  nccl.reset();
  for (cudaEvent_t e : callDone)
    if (e)
      cudaEventDestroy(e);
  if (ncclJoined)
    cudaEventDestroy(ncclJoined);
  if (ncclStream)
    cudaStreamDestroy(ncclStream);
  if (graphExec)
    cudaGraphExecDestroy(graphExec);
  if (graph)
    cudaGraphDestroy(graph);
  for (cudaEvent_t e : events)
    if (e)
      cudaEventDestroy(e);
  if (fork)
    cudaEventDestroy(fork);
  ltGemms.clear();
  for (Device &d : devices) {
    d.blas.reset();
    d.lt.reset();
    d.conv.reset();
    d.pool.reset();
    d.batchNorm.reset();
    if (d.commJoined)
      cudaEventDestroy(d.commJoined);
    if (d.joined)
      cudaEventDestroy(d.joined);
    if (d.compute)
      cudaStreamDestroy(d.compute);
    if (d.comm)
      cudaStreamDestroy(d.comm);
  }
  if (library)
    cudaLibraryUnload(library);
  if (pinned)
    cudaFreeHost(pinned);
  for (void *a : gridScratchAllocations)
    cudaFree(a);
  for (Gpu &g : gpus) {
    if (!g.active)
      continue;
    cudaSetDevice(g.ordinal);
    if (g.memory)
      cudaFree(g.memory);
    if (g.step)
      cudaFree(g.step);
  }
}

std::string CudaExecutor::Impl::init() {
  // The plan first: what it cannot run is refused without touching a GPU.
  if (hasUnexpandedCollectives(plan))
    return "the plan's collectives are source tables without pieces "
           "(plan format 3.0): read it with readPlan, which expands them, or "
           "call plan::expandCollectives first";
  const int32_t k = static_cast<int32_t>(plan.devices.size());
  int32_t numGpus = options.numGpus > 0 ? options.numGpus : k;
  if (options.transport) {
    // One process per GPU: this rank's part of the multi-process schedule.
    multiProcess = true;
    rank = options.transport->rank();
    numGpus = options.transport->worldSize();
    if (!ncclAvailable())
      return ncclUnavailableReason();
    if (std::string err = buildMultiProcessSchedule(plan, numGpus, multi);
        !err.empty())
      return err;
    if (std::string err = validateMultiProcessSchedule(plan, multi);
        !err.empty())
      return "the multi-process CUDA schedule is wrong (a bug; report it "
             "with the plan): " + err;
    schedule = multi.ranks[rank].schedule;
    for (int32_t d = 0; d < k; ++d)
      if (owns(d)) {
        originDevice = d;
        break;
      }
  } else if (std::string err = buildSchedule(plan, numGpus, schedule);
             !err.empty()) {
    return err;
  }
  int count = 0;
  std::string why = describeGpus(count);
  if (count == 0)
    return "--backend cuda: no CUDA GPU found (" + why +
           "). Run the plan with --backend cpu, or on a machine with an "
           "NVIDIA GPU and its driver (nvidia-smi lists it)";
  if (multiProcess && options.localRank >= count)
    return "--backend cuda: rank " + std::to_string(rank) + " has local rank " +
           std::to_string(options.localRank) + " but this node has " +
           std::to_string(count) + " visible GPU" + (count == 1 ? "" : "s") +
           "; start at most " + std::to_string(count) +
           " processes per node (each needs a GPU of its own: NCCL refuses "
           "two ranks on one GPU), or run in one process with --devices";
  if (!multiProcess && numGpus > count)
    return "--backend cuda: the plan's " + std::to_string(k) +
           " devices are to run on " + std::to_string(numGpus) +
           " GPUs, but " + std::to_string(count) +
           " are visible; pass --devices " + std::to_string(count) +
           " to run the plan devices as virtual devices on them";

  CudaArch arch;
  if (!parseCudaArch(plan.cuda.arch, arch))
    return "the plan's CUDA architecture '" + plan.cuda.arch +
           "' is not a CUDA architecture name";
  gpus.resize(numGpus);
  for (int32_t g = 0; g < numGpus; ++g) {
    Gpu &gpu = gpus[g];
    gpu.ordinal = multiProcess ? options.localRank : g;
    if (multiProcess && g != rank) {
      gpu.active = false; // another process's GPU
      continue;
    }
    cudaDeviceProp prop;
    TOFU_CUDA(cudaGetDeviceProperties(&prop, gpu.ordinal));
    gpu.name = prop.name;
    gpu.multiprocessors = prop.multiProcessorCount;
    if (std::string err = checkPlanArchitecture(plan.cuda.arch, gpu.ordinal, gpu.name,
                                                prop.major, prop.minor);
        !err.empty())
      return err;
  }
  // Memory: one allocation per GPU, checked against what is free first.
  for (int32_t g = 0; g < numGpus; ++g) {
    Gpu &gpu = gpus[g];
    if (!gpu.active)
      continue;
    TOFU_CUDA(cudaSetDevice(gpu.ordinal));
    size_t freeBytes = 0, totalBytes = 0;
    TOFU_CUDA(cudaMemGetInfo(&freeBytes, &totalBytes));
    // The slices, then the MultiFetch piece tables.
    const uint64_t want =
        schedule.mapping.gpuBytes[g] + schedule.tableBytes[g];
    if (want > freeBytes)
      return outOfMemoryMessage(gpu.ordinal, gpu.name, want, freeBytes,
                                totalBytes, plan.numDevices);
    if (want) {
      cudaError_t err = cudaMalloc(&gpu.memory, want);
      if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        return outOfMemoryMessage(gpu.ordinal, gpu.name, want, freeBytes,
                                  totalBytes, plan.numDevices);
      }
      if (err != cudaSuccess)
        return cudaFailure("cudaMalloc of the arenas", err);
      TOFU_CUDA(cudaMemset(gpu.memory, 0, want));
    }
    // step, error record, loss slot in one small allocation.
    void *control = nullptr;
    TOFU_CUDA(cudaMalloc(&control, 256));
    TOFU_CUDA(cudaMemset(control, 0, 256));
    gpu.step = static_cast<unsigned long long *>(control);
    gpu.error = gpu.step + 1;
    gpu.lossSlot = reinterpret_cast<float *>(gpu.error + kErrorWords);
  }
  // The MultiFetch/MultiReduce piece tables, written once (a graph replays
  // them), with the addresses of the destination and every source.
  for (const MultiFetchTable &t : schedule.tables) {
    std::vector<uint8_t> bytes;
    resolveMultiFetchTable(
        t,
        [&](const DevicePointer &p) {
          return reinterpret_cast<uint64_t>(pointer(p));
        },
        bytes);
    TOFU_CUDA(cudaSetDevice(gpus[t.gpu].ordinal));
    TOFU_CUDA(cudaMemcpy(gpus[t.gpu].memory + schedule.mapping.gpuBytes[t.gpu] +
                             t.offset,
                         bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  }
  // The generated kernels (loaded once for every device).
  if (!plan.cuda.cubin.empty()) {
    TOFU_CUDA(cudaLibraryLoadData(&library, plan.cuda.cubin.data(), nullptr,
                                  nullptr, 0, nullptr, nullptr, 0));
    kernels.resize(plan.cuda.kernels.size());
    variantKernels.assign(plan.cuda.kernels.size(), nullptr);
    warpRowKernels.assign(plan.cuda.kernels.size(), nullptr);
    gridKernels.assign(plan.cuda.kernels.size(), nullptr);
    for (size_t f = 0; f < plan.cuda.kernels.size(); ++f) {
      const CudaKernel &k = plan.cuda.kernels[f];
      cudaError_t err =
          cudaLibraryGetKernel(&kernels[f], library, k.name.c_str());
      const char *variant = k.kind == "block-reduction" ? "_block"
                            : k.kind == "row-reduction" ? "_row"
                                                        : nullptr;
      if (err == cudaSuccess && variant)
        err = cudaLibraryGetKernel(&variantKernels[f], library,
                                   (k.name + variant).c_str());
      if (err != cudaSuccess)
        return cudaFailure(("cudaLibraryGetKernel(" + k.name +
                            (variant ? variant : "") + ")")
                               .c_str(),
                           err);
      if (k.kind == "row-reduction" &&
          cudaLibraryGetKernel(&warpRowKernels[f], library,
                               (k.name + "_rowwarp").c_str()) != cudaSuccess) {
        // An older plan: its rows all run a block each.
        warpRowKernels[f] = nullptr;
        cudaGetLastError();
      }
      if (k.kind == "block-reduction" &&
          cudaLibraryGetKernel(&gridKernels[f], library,
                               (k.name + "_grid").c_str()) != cudaSuccess) {
        // An older plan: its reductions run a block per element.
        gridKernels[f] = nullptr;
        cudaGetLastError();
      }
    }
  }
  // The grid variant's scratch, one range per launch that runs it.
  gridScratch.assign(plan.cuda.launches.size(), nullptr);
  for (size_t l = 0; !gridKernels.empty() && l < plan.cuda.launches.size();
       ++l) {
    const CudaLaunch &launch = plan.cuda.launches[l];
    if (launch.device < 0 || !owns(launch.device))
      continue;
    const Gpu &gpu = gpus[schedule.mapping.devices[launch.device].gpu];
    if (launchConfig(launch, gpu).variant != KernelLaunchConfig::Variant::Grid)
      continue;
    TOFU_CUDA(cudaSetDevice(gpu.ordinal));
    void *scratch = nullptr;
    const uint64_t bytes = gridScratchBytes(launch.numElements);
    TOFU_CUDA(cudaMalloc(&scratch, bytes));
    gridScratchAllocations.push_back(scratch);
    TOFU_CUDA(cudaMemset(scratch, 0, bytes));
    gridScratch[l] = static_cast<double *>(scratch);
  }
  // Peer access wherever a schedule entry reads another GPU.
  for (const ScheduledInstr &e : schedule.instrs)
    for (const CudaOp &op : e.ops) {
      if (op.path != CopyPath::Peer ||
          (op.kind != CudaOp::Kind::BoxCopy && op.kind != CudaOp::Kind::BoxAdd &&
           op.kind != CudaOp::Kind::Copy))
        continue;
      int dst = gpuOf(op.dst.device), src = gpuOf(op.src.device);
      int can = 0;
      TOFU_CUDA(cudaDeviceCanAccessPeer(&can, dst, src));
      if (!can) {
        if (op.kind == CudaOp::Kind::Copy)
          continue; // cudaMemcpyPeerAsync stages through the host
        return "GPU " + std::to_string(dst) + " cannot access GPU " +
               std::to_string(src) +
               "'s memory (no peer access), which a strided piece of " +
               "device " + std::to_string(e.device) +
               " needs; run on GPUs with peer access (NVLink or one PCIe "
               "switch) or on fewer GPUs with --devices";
      }
      TOFU_CUDA(cudaSetDevice(dst));
      cudaError_t err = cudaDeviceEnablePeerAccess(src, 0);
      if (err == cudaErrorPeerAccessAlreadyEnabled)
        cudaGetLastError();
      else if (err != cudaSuccess)
        return cudaFailure("cudaDeviceEnablePeerAccess", err);
    }
  // Peer access for every GPU a piece table reads (the kernel reads its
  // sources in place).
  for (const MultiFetchTable &t : schedule.tables)
    for (const DevicePointer &src : t.sources) {
      int dst = gpus[t.gpu].ordinal, from = gpuOf(src.device);
      if (dst == from)
        continue;
      int can = 0;
      TOFU_CUDA(cudaDeviceCanAccessPeer(&can, dst, from));
      if (!can)
        return "GPU " + std::to_string(dst) + " cannot access GPU " +
               std::to_string(from) + "'s memory (no peer access), which " +
               "the MultiFetch kernel of device " +
               std::to_string(t.dst.device) + " needs; run on GPUs with " +
               "peer access (NVLink or one PCIe switch) or on fewer GPUs " +
               "with --devices";
      TOFU_CUDA(cudaSetDevice(dst));
      cudaError_t err = cudaDeviceEnablePeerAccess(from, 0);
      if (err == cudaErrorPeerAccessAlreadyEnabled)
        cudaGetLastError();
      else if (err != cudaSuccess)
        return cudaFailure("cudaDeviceEnablePeerAccess", err);
    }
  // Streams, events and library handles per plan device.
  devices.resize(plan.devices.size());
  for (size_t d = 0; d < devices.size(); ++d) {
    Device &dev = devices[d];
    if (!owns(static_cast<int32_t>(d)))
      continue;
    TOFU_CUDA(cudaSetDevice(gpuOf(static_cast<int32_t>(d))));
    TOFU_CUDA(cudaStreamCreateWithFlags(&dev.compute, cudaStreamNonBlocking));
    TOFU_CUDA(cudaStreamCreateWithFlags(&dev.comm, cudaStreamNonBlocking));
    TOFU_CUDA(cudaEventCreateWithFlags(&dev.commJoined, cudaEventDisableTiming));
    TOFU_CUDA(cudaEventCreateWithFlags(&dev.joined, cudaEventDisableTiming));
    auto needs = [&](CudaOp::Kind kind) {
      for (const ScheduledInstr &e : schedule.instrs)
        if (e.device == static_cast<int32_t>(d))
          for (const CudaOp &op : e.ops)
            if (op.kind == kind)
              return true;
      return false;
    };
    bool needsBlas = false, needsConv = false;
    for (const ScheduledInstr &e : schedule.instrs)
      if (e.device == static_cast<int32_t>(d))
        for (const CudaOp &op : e.ops) {
          needsBlas |= op.kind == CudaOp::Kind::Gemm;
          needsConv |= op.kind == CudaOp::Kind::Conv;
        }
    if (needsBlas) {
      dev.blas = std::make_unique<BlasHandle>();
      if (std::string err = dev.blas->init(dev.compute); !err.empty())
        return "device " + std::to_string(d) + ": " + err;
    }
    if (needsConv) {
      dev.conv = std::make_unique<ConvRunner>();
      if (std::string err = dev.conv->init(dev.compute); !err.empty())
        return "device " + std::to_string(d) + ": " + err;
    }
    if (needs(CudaOp::Kind::Pool)) {
      dev.pool = std::make_unique<PoolRunner>();
      if (std::string err = dev.pool->init(dev.compute); !err.empty())
        return "device " + std::to_string(d) + ": " + err;
    }
    if (needs(CudaOp::Kind::BatchNorm)) {
      dev.batchNorm = std::make_unique<BatchNormRunner>();
      if (std::string err = dev.batchNorm->init(dev.compute); !err.empty())
        return "device " + std::to_string(d) + ": " + err;
    }
  }
  TOFU_CUDA(cudaSetDevice(gpuOf(originDevice)));
  TOFU_CUDA(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  events.assign(schedule.instrs.size(), nullptr);
  for (size_t s = 0; s < schedule.instrs.size(); ++s)
    if (schedule.instrs[s].recordsEvent) {
      TOFU_CUDA(cudaSetDevice(gpuOf(schedule.instrs[s].device)));
      TOFU_CUDA(cudaEventCreateWithFlags(&events[s], cudaEventDisableTiming));
    }
  // Kernel arguments.
  launchPointers.resize(plan.cuda.launches.size());
  for (size_t l = 0; l < plan.cuda.launches.size(); ++l) {
    const CudaLaunch &launch = plan.cuda.launches[l];
    if (!owns(launch.device))
      continue;
    for (int32_t b : launch.buffers)
      launchPointers[l].push_back(
          b < 0 ? nullptr
                : pointer({launch.device,
                           plan.devices[launch.device].buffers[b].offset}));
  }
  // The pinned staging area of the Input/Label batches.
  auto envSet = [](const char *name) {
    const char *v = std::getenv(name);
    return v && std::string(v) == "1";
  };
  pageableFeed = envSet("TOFU_CUDA_PAGEABLE_FEED");
  warpRows = envSet("TOFU_CUDA_WARP_ROWS");
  feedCopies = feedLayout(plan, [this](int32_t d) { return owns(d); });
  if (std::string err = validateFeedLayout(
          plan, [this](int32_t d) { return owns(d); }, feedCopies);
      !err.empty())
    return "internal error: " + err;
  // Synthetic batches: every one filled once, here (CudaFeed.h).
  batchesCached = !dataSource && !pageableFeed &&
                  cacheSyntheticBatches(feedCopies, SyntheticData::kNumBatches);
  TOFU_CUDA(cudaHostAlloc(reinterpret_cast<void **>(&pinned),
                          std::max<uint64_t>(feedCopies.areaBytes(), 1),
                          cudaHostAllocPortable));
  for (int64_t b = 0; batchesCached && b < feedCopies.slots; ++b)
    if (std::string err = fillFeed(plan, feedCopies, feedFill(), b, pinned);
        !err.empty())
      return err;
  if (std::string err = chooseGemmAlgorithms(); !err.empty())
    return err;
  // Initial parameter values.
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    if (!owns(static_cast<int32_t>(d)))
      continue;
    TOFU_CUDA(cudaSetDevice(gpuOf(static_cast<int32_t>(d))));
    const auto &buffers = plan.devices[d].buffers;
    for (size_t b = 0; b < buffers.size(); ++b) {
      if (!buffers[b].hasInit())
        continue;
      if (buffers[b].initSize() != buffers[b].bytes)
        return "device " + std::to_string(d) + " buffer " + std::to_string(b) +
               ": initial contents have the wrong size";
      TOFU_CUDA(cudaMemcpy(
          pointer({static_cast<int32_t>(d), buffers[b].offset}),
          buffers[b].initData(), buffers[b].bytes, cudaMemcpyHostToDevice));
    }
  }
  if (multiProcess)
    if (std::string err = initMultiProcess(count); !err.empty())
      return err;
  if (std::string err = prepareEpilogueGemms(); !err.empty())
    return err;
  initialized = true;
  return "";
}

std::string CudaExecutor::Impl::prepareEpilogueGemms() {
  int64_t fallbacks = 0;
  std::string firstWhy;
  for (const ScheduledInstr &e : schedule.instrs) {
    if (!owns(e.device))
      continue;
    for (const CudaOp &op : e.ops) {
      if (op.kind != CudaOp::Kind::Gemm ||
          (op.bias.device < 0 && !op.relu))
        continue;
      Device &dev = devices[e.device];
      TOFU_CUDA(cudaSetDevice(gpuOf(e.device)));
      if (!dev.lt) {
        dev.lt = std::make_unique<LtHandle>();
        if (std::string err = dev.lt->init(); !err.empty())
          return "device " + std::to_string(e.device) + ": " + err;
      }
      auto lt = std::make_unique<LtGemm>();
      GemmEpilogue epilogue;
      epilogue.bias = op.bias.device >= 0;
      epilogue.relu = op.relu;
      const void *bias = epilogue.bias ? pointer(op.bias) : nullptr;
      std::string why = lt->prepare(*dev.lt, gemmShapeOf(op), blasTypeOf(op),
                                    epilogue, pointer(op.a), pointer(op.b),
                                    pointer(op.c), bias);
      if (why.empty()) {
        ltGemms[&op] = std::move(lt);
      } else if (fallbacks++ == 0) {
        firstWhy = why;
      }
    }
  }
  if (fallbacks > 0)
    std::fprintf(stderr,
                 "tofu-run: %lld GEMM(s) with a bias or ReLU epilogue run as "
                 "separate bias, GEMM and ReLU calls: cuBLASLt refused them "
                 "(first: %s)\n",
                 static_cast<long long>(fallbacks), firstWhy.c_str());
  return "";
}

namespace {

/// How much faster than cuBLAS's own choice a cuBLASLt candidate must run
/// to replace it: a clear win only, so that the choice does not follow
/// timing noise (on the H200, cublasSgemm picks a 52 us kernel for
/// float32 m <= 16, n = 128, k <= 512 where a candidate takes 9 us;
/// elsewhere the best candidate was within 2.2x: bench/gpu/H200-run18.md).
constexpr double kGemmSpeedup = 3;
/// Each timing of the choice: 10 calls in a graph, launched 3 times.
constexpr int kGemmTimingCalls = 10, kGemmTimingLaunches = 3;

/// Seconds per call of `issue` (which enqueues one call on `stream`, the
/// current device's): captured `calls` times in a CUDA graph, launched once
/// to warm up and `launches` times between two events, so what a replayed
/// step pays for it. `what` names the work in errors. Used by the GEMM
/// algorithm choice and by --kernel-times.
std::string timeInGraph(cudaStream_t stream,
                        const std::function<std::string()> &issue,
                        int calls, int launches, const char *what,
                        double &seconds) {
  seconds = 0;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t start = nullptr, end = nullptr;
  std::string err;
  cudaError_t rc = cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed);
  if (rc != cudaSuccess)
    return cudaFailure((std::string("capturing ") + what + " for timing").c_str(),
                       rc);
  for (int i = 0; i < calls && err.empty(); ++i)
    err = issue();
  // End the capture also after an error, so the stream leaves capture.
  rc = cudaStreamEndCapture(stream, &graph);
  if (err.empty() && rc != cudaSuccess)
    err = cudaFailure((std::string("capturing ") + what + " for timing").c_str(),
                      rc);
  if (err.empty() &&
      (rc = cudaGraphInstantiate(&exec, graph, 0)) != cudaSuccess)
    err = cudaFailure(
        (std::string("instantiating the timing graph of ") + what).c_str(), rc);
  float ms = 0;
  if (err.empty()) {
    rc = cudaEventCreate(&start);
    if (rc == cudaSuccess)
      rc = cudaEventCreate(&end);
    if (rc == cudaSuccess)
      rc = cudaGraphLaunch(exec, stream);
    if (rc == cudaSuccess)
      rc = cudaEventRecord(start, stream);
    for (int l = 0; l < launches && rc == cudaSuccess; ++l)
      rc = cudaGraphLaunch(exec, stream);
    if (rc == cudaSuccess)
      rc = cudaEventRecord(end, stream);
    if (rc == cudaSuccess)
      rc = cudaEventSynchronize(end);
    if (rc == cudaSuccess)
      rc = cudaEventElapsedTime(&ms, start, end);
    if (rc != cudaSuccess)
      err = cudaFailure((std::string("timing ") + what).c_str(), rc);
  }
  if (start)
    cudaEventDestroy(start);
  if (end)
    cudaEventDestroy(end);
  if (exec)
    cudaGraphExecDestroy(exec);
  if (graph)
    cudaGraphDestroy(graph);
  seconds = ms * 1e-3 / (double(calls) * launches);
  return err;
}

} // namespace

std::string CudaExecutor::Impl::chooseGemmAlgorithms() {
  const char *off = std::getenv("TOFU_CUDA_GEMM_CHOICE");
  if (off && std::string(off) == "0")
    return "";
  // One choice per GPU, element type, shape and operand alignment (the low
  // address bits: cuBLASLt's candidates depend on them), in issue order.
  using Key = std::tuple<int32_t, int, bool, bool, int64_t, int64_t, int64_t,
                         int64_t, int64_t, int64_t, double, uintptr_t,
                         uintptr_t, uintptr_t>;
  std::map<Key, int> chosen; // -1: cuBLAS's own call
  int64_t replaced = 0;
  std::string example;
  for (const ScheduledInstr &e : schedule.instrs) {
    if (!owns(e.device))
      continue;
    for (const CudaOp &op : e.ops) {
      const GemmShape shape = gemmShapeOf(op);
      const cudaDataType type = blasTypeOf(op);
      if (op.kind != CudaOp::Kind::Gemm || op.bias.device >= 0 || op.relu ||
          op.batch > 1 || shape.beta != 0 ||
          (type != CUDA_R_32F && type != CUDA_R_64F))
        continue;
      void *a = pointer(op.a), *b = pointer(op.b), *c = pointer(op.c);
      auto low = [](const void *p) {
        return reinterpret_cast<uintptr_t>(p) & 255;
      };
      const Key key{schedule.mapping.devices[e.device].gpu, int(type),
                    shape.transA, shape.transB, shape.m, shape.n, shape.k,
                    shape.lda, shape.ldb, shape.ldc, shape.alpha, low(a),
                    low(b), low(c)};
      Device &dev = devices[e.device];
      TOFU_CUDA(cudaSetDevice(gpuOf(e.device)));
      auto known = chosen.find(key);
      if (known != chosen.end() && known->second < 0)
        continue;
      if (!dev.lt) {
        dev.lt = std::make_unique<LtHandle>();
        if (std::string err = dev.lt->init(); !err.empty())
          return "device " + std::to_string(e.device) + ": " + err;
      }
      auto lt = std::make_unique<LtGemm>();
      if (!lt->prepare(*dev.lt, shape, type, GemmEpilogue{}, a, b, c, nullptr)
               .empty()) {
        chosen[key] = -1; // no cuBLASLt algorithm: cuBLAS's call
        continue;
      }
      if (known == chosen.end()) {
        double cublasSeconds = 0, best = 0;
        if (std::string err = timeInGraph(
                dev.compute,
                [&] { return gemm(*dev.blas, shape, type, a, b, c); },
                kGemmTimingCalls, kGemmTimingLaunches, "a GEMM",
                cublasSeconds);
            !err.empty())
          return err;
        int choice = -1;
        for (size_t i = 0; i < lt->algorithms(); ++i) {
          lt->useAlgorithm(i);
          double seconds = 0;
          // A candidate that fails to run is not chosen.
          if (!timeInGraph(dev.compute,
                           [&] {
                             return lt->run(*dev.lt, a, b, c, dev.compute);
                           },
                           kGemmTimingCalls, kGemmTimingLaunches, "a GEMM",
                           seconds)
                   .empty())
            continue;
          if (seconds * kGemmSpeedup <= cublasSeconds &&
              (choice < 0 || seconds < best))
            choice = static_cast<int>(i), best = seconds;
        }
        known = chosen.emplace(key, choice).first;
        if (choice >= 0 && example.empty())
          example = "m=" + std::to_string(shape.m) + " n=" +
                    std::to_string(shape.n) + " k=" +
                    std::to_string(shape.k) + ": " +
                    std::to_string(cublasSeconds * 1e6) + " -> " +
                    std::to_string(best * 1e6) + " us";
        if (choice < 0)
          continue;
      }
      lt->useAlgorithm(static_cast<size_t>(known->second));
      ltGemms[&op] = std::move(lt);
      ++replaced;
    }
  }
  if (replaced > 0)
    std::fprintf(stderr,
                 "tofu-run: %lld GEMM call(s) run on a cuBLASLt algorithm "
                 "timed at least %gx faster than cuBLAS's own choice (first: "
                 "%s; TOFU_CUDA_GEMM_CHOICE=0 keeps cuBLAS's)\n",
                 static_cast<long long>(replaced), kGemmSpeedup,
                 example.c_str());
  return "";
}

std::string CudaExecutor::Impl::initMultiProcess(int) {
  TOFU_CUDA(cudaSetDevice(options.localRank));
  TOFU_CUDA(cudaStreamCreateWithFlags(&ncclStream, cudaStreamNonBlocking));
  TOFU_CUDA(cudaEventCreateWithFlags(&ncclJoined, cudaEventDisableTiming));
  for (size_t s = 0; s < schedule.instrs.size(); ++s)
    for (size_t j = 0; j < schedule.instrs[s].ops.size(); ++j) {
      const CudaOp::Kind kind = schedule.instrs[s].ops[j].kind;
      if (kind != CudaOp::Kind::Send && kind != CudaOp::Kind::Recv)
        continue;
      calls.push_back({static_cast<int32_t>(s), static_cast<int32_t>(j)});
      callDone.push_back(nullptr);
      TOFU_CUDA(
          cudaEventCreateWithFlags(&callDone.back(), cudaEventDisableTiming));
    }
  nccl = std::make_unique<NcclComm>();
  if (std::string err = nccl->init(*options.transport, options.ncclTimeout);
      !err.empty())
    return "rank " + std::to_string(rank) + ": creating the NCCL "
           "communicator of " + std::to_string(options.transport->worldSize()) +
           " ranks: " + err;
  return "";
}

std::string CudaExecutor::Impl::describeCall(size_t call) const {
  const auto [entry, j] = calls[call];
  const CudaOp &op = schedule.instrs[entry].ops[j];
  return std::string(op.kind == CudaOp::Kind::Send ? "ncclSend to" : "ncclRecv from") +
         " rank " + std::to_string(op.peer) + " (transfer " +
         std::to_string(op.transfer) + ", " + std::to_string(op.bytes) +
         " bytes) of " + describeRankEntry(plan, multi, rank, entry);
}

/// Waits for the step on this rank's streams while watching NCCL: an
/// asynchronous NCCL error, a failed stream, or `ncclTimeout` seconds in
/// which no NCCL call completed and the streams did not finish, aborts the
/// communicator and returns a message naming the rank, the first NCCL call
/// not complete (its peer and instruction) and NCCL's error text.
std::string CudaExecutor::Impl::watchdog() {
  std::vector<cudaStream_t> streams;
  for (size_t d = 0; d < devices.size(); ++d)
    if (owns(static_cast<int32_t>(d))) {
      streams.push_back(devices[d].compute);
      streams.push_back(devices[d].comm);
    }
  streams.push_back(ncclStream);
  auto lastProgress = std::chrono::steady_clock::now();
  size_t completed = 0; // NCCL calls known complete, in issue order
  auto pending = [&]() {
    return completed < callsIssued ? describeCall(completed)
                                   : std::string("no NCCL call (a kernel or "
                                                 "copy of this rank)");
  };
  auto failWith = [&](const std::string &why) {
    std::string asyncErr = nccl->asyncError();
    nccl->abort();
    return "rank " + std::to_string(rank) + ": " + why + "; pending: " +
           pending() + "; NCCL: " +
           (asyncErr.empty() ? std::string("no error reported") : asyncErr) +
           ". The communicator was aborted; every rank ends";
  };
  TOFU_CUDA(cudaSetDevice(options.localRank));
  for (;;) {
    bool idle = true;
    for (cudaStream_t st : streams) {
      cudaError_t q = cudaStreamQuery(st);
      if (q == cudaErrorNotReady) {
        idle = false;
      } else if (q != cudaSuccess) {
        return failWith(cudaFailure("a stream of the step", q));
      }
    }
    while (completed < callsIssued) {
      cudaError_t q = cudaEventQuery(callDone[completed]);
      if (q == cudaErrorNotReady)
        break;
      if (q != cudaSuccess)
        return failWith(cudaFailure("an NCCL call of the step", q));
      ++completed;
      lastProgress = std::chrono::steady_clock::now();
    }
    if (idle)
      return "";
    if (std::string err = nccl->asyncError(); !err.empty())
      return failWith("NCCL reported an error: " + err);
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                      lastProgress)
            .count() > options.ncclTimeout)
      return failWith("the step made no progress for " +
                      std::to_string(options.ncclTimeout) +
                      " s (--nccl-timeout)");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

std::string CudaExecutor::Impl::feed(int64_t step) {
  for (Gpu &gpu : gpus) {
    if (!gpu.active)
      continue;
    TOFU_CUDA(cudaSetDevice(gpu.ordinal));
    unsigned long long value = static_cast<unsigned long long>(step);
    TOFU_CUDA(cudaMemcpy(gpu.step, &value, sizeof(value),
                         cudaMemcpyHostToDevice));
  }
  // Every batch into the pinned area first (synthetic batches: filled at
  // init, one slot each), then one asynchronous copy per buffer on its
  // device's compute stream, and one wait per stream used: the step's
  // streams start after the feed (and a one-slot area is refilled next
  // step).
  if (pageableFeed) {
    for (const FeedCopy &c : feedCopies.copies) {
      const Buffer &b = plan.devices[c.device].buffers[c.buffer];
      staging.resize(c.bytes);
      std::string err =
          dataSource ? dataSource(b.tensor, b.region, step, staging.data())
                     : data.fill(b.tensor, b.region,
                                 step % SyntheticData::kNumBatches,
                                 staging.data());
      if (!err.empty())
        return "feeding device " + std::to_string(c.device) + " buffer " +
               std::to_string(c.buffer) + ": " + err;
      TOFU_CUDA(cudaSetDevice(gpuOf(c.device)));
      TOFU_CUDA(cudaMemcpy(pointer(c.dst), staging.data(), c.bytes,
                           cudaMemcpyHostToDevice));
    }
    return "";
  }
  // A data source set after init fills every step, as without the cache.
  if (!batchesCached || dataSource)
    if (std::string err = fillFeed(plan, feedCopies, feedFill(), step, pinned);
        !err.empty())
      return err;
  const uint8_t *slot = pinned + feedCopies.slotOffset(step);
  std::vector<bool> used(devices.size(), false);
  for (const FeedCopy &c : feedCopies.copies) {
    if (c.bytes == 0)
      continue;
    TOFU_CUDA(cudaSetDevice(gpuOf(c.device)));
    TOFU_CUDA(cudaMemcpyAsync(pointer(c.dst), slot + c.staging, c.bytes,
                              cudaMemcpyHostToDevice, devices[c.device].compute));
    used[c.device] = true;
  }
  for (size_t d = 0; d < devices.size(); ++d)
    if (used[d]) {
      TOFU_CUDA(cudaSetDevice(gpuOf(static_cast<int32_t>(d))));
      TOFU_CUDA(cudaStreamSynchronize(devices[d].compute));
    }
  return "";
}

std::string CudaExecutor::Impl::issueOp(const ScheduledInstr &e,
                                        const CudaOp &op,
                                        cudaStream_t stream) {
  switch (op.kind) {
  case CudaOp::Kind::Kernel: {
    const CudaLaunch &launch = plan.cuda.launches[op.launch];
    const CudaKernel &kernel = plan.cuda.kernels[launch.kernel];
    Gpu &gpu = gpus[schedule.mapping.devices[e.device].gpu];
    std::vector<int64_t> &params =
        const_cast<std::vector<int64_t> &>(launch.params);
    double *scratch = gridScratch[op.launch];
    void *args[] = {launchPointers[op.launch].data(), params.data(),
                    &gpu.step, &gpu.error, &scratch};
    // One thread per element, one block per element (few elements of a
    // reduction with much work each), kGridParts blocks per element (a
    // loss), one block per row (reductions shared by a row's elements) or
    // one warp per short row: CudaKernelLaunch.h. The block, grid and row
    // variants need exactly kReductionBlockThreads threads (the generated
    // TOFU_BLOCK_THREADS).
    const KernelLaunchConfig config = launchConfig(launch, gpu);
    cudaKernel_t entry = kernels[launch.kernel];
    if (config.variant == KernelLaunchConfig::Variant::RowWarp)
      entry = warpRowKernels[launch.kernel];
    else if (config.variant == KernelLaunchConfig::Variant::Grid) {
      if (!scratch)
        return "internal error: launch " + std::to_string(op.launch) +
               " runs the grid variant without scratch";
      entry = gridKernels[launch.kernel];
    } else if (config.variant != KernelLaunchConfig::Variant::Element &&
             variantKernels[launch.kernel])
      entry = variantKernels[launch.kernel];
    TOFU_CUDA(cudaLaunchKernel(
        reinterpret_cast<const void *>(entry),
        dim3(static_cast<unsigned>(config.grid)),
        dim3(static_cast<unsigned>(config.threads)), args, 0, stream));
    return "";
  }
  case CudaOp::Kind::Gemm: {
    GemmShape shape = gemmShapeOf(op);
    const BlasHandle &blas = *devices[e.device].blas;
    const cudaDataType type = blasTypeOf(op);
    // An epilogue GEMM (prepareEpilogueGemms) or a plain one whose timed
    // cuBLASLt algorithm won (chooseGemmAlgorithms).
    if (auto it = ltGemms.find(&op); it != ltGemms.end())
      return it->second->run(*devices[e.device].lt, pointer(op.a),
                             pointer(op.b), pointer(op.c), stream);
    if (op.bias.device >= 0 || op.relu) {
      // No cuBLASLt algorithm: the bias broadcast into C, the GEMM adding
      // to it, then the ReLU (float32 only: CudaSchedule fuses no other).
      if (op.bias.device >= 0) {
        if (std::string err =
                launchGemmBias(pointer(op.bias), 0, 1, 1.0, pointer(op.c),
                               op.m, op.n, op.dtype, stream);
            !err.empty())
          return err;
        shape.beta = 1;
      }
      if (std::string err =
              gemm(blas, shape, type, pointer(op.a), pointer(op.b),
                   pointer(op.c));
          !err.empty() || !op.relu)
        return err;
      return launchReluInPlace(reinterpret_cast<float *>(pointer(op.c)),
                               op.m * op.n, stream);
    }
    return op.batch > 1
               ? gemmStridedBatched(blas, shape, type, pointer(op.a),
                                    op.strideA, pointer(op.b), op.strideB,
                                    pointer(op.c), op.strideC, op.batch)
               : gemm(blas, shape, type, pointer(op.a), pointer(op.b),
                      pointer(op.c));
  }
  case CudaOp::Kind::GemmBias:
    return launchGemmBias(pointer(op.c), op.cRowStride, op.cColStride,
                          op.beta, pointer(op.dst), op.m, op.n, op.dtype,
                          stream);
  case CudaOp::Kind::Conv: {
    ConvShape shape;
    shape.x = op.x, shape.w = op.w;
    shape.padsBegin = op.padsBegin, shape.padsEnd = op.padsEnd;
    shape.strides = op.strides, shape.dilations = op.dilations;
    shape.group = op.group;
    shape.dataType = op.dtype == plan::DType::F64   ? CUDNN_DATA_DOUBLE
                     : op.dtype == plan::DType::F16 ? CUDNN_DATA_HALF
                                                    : CUDNN_DATA_FLOAT;
    ConvRunner &conv = *devices[e.device].conv;
    void *x = pointer(op.a), *w = pointer(op.b), *y = pointer(op.c);
    switch (op.convDirection) {
    case 0:
      return conv.forward(shape, x, w, y);
    case 1:
      return conv.backwardData(shape, y, w, x);
    default:
      return conv.backwardFilter(shape, y, x, w);
    }
  }
  case CudaOp::Kind::Copy:
    if (op.bytes == 0)
      return "";
    if (op.path == CopyPath::Peer)
      TOFU_CUDA(cudaMemcpyPeerAsync(pointer(op.dst), gpuOf(op.dst.device),
                                    pointer(op.src), gpuOf(op.src.device),
                                    op.bytes, stream));
    else
      TOFU_CUDA(cudaMemcpyAsync(pointer(op.dst), pointer(op.src), op.bytes,
                                cudaMemcpyDeviceToDevice, stream));
    return "";
  case CudaOp::Kind::BoxCopy:
  case CudaOp::Kind::BoxAdd:
    return launchBoxMove(op.box, pointer(op.src), pointer(op.dst), op.dtype,
                         op.kind == CudaOp::Kind::BoxAdd, stream);
  case CudaOp::Kind::Zero:
    if (op.bytes)
      TOFU_CUDA(cudaMemsetAsync(pointer(op.dst), 0, op.bytes, stream));
    return "";
  case CudaOp::Kind::MultiFetch:
  case CudaOp::Kind::MultiReduce: {
    const MultiFetchTable &t = schedule.tables[op.table];
    Gpu &gpu = gpus[t.gpu];
    return launchMultiFetch(gpu.memory + schedule.mapping.gpuBytes[t.gpu] +
                                t.offset,
                            t.header.items, int64_t(gpu.multiprocessors) * 32,
                            stream);
  }
  case CudaOp::Kind::SaveLoss:
    TOFU_CUDA(cudaMemcpyAsync(gpus[schedule.mapping.devices[0].gpu].lossSlot,
                              pointer(op.src), op.bytes,
                              cudaMemcpyDeviceToDevice, stream));
    return "";
  case CudaOp::Kind::Send:
  case CudaOp::Kind::Recv: {
    if (!nccl)
      return "an NCCL call in a one-process schedule (a bug)";
    std::string err =
        op.kind == CudaOp::Kind::Send
            ? nccl->send(pointer(op.src), op.bytes, op.peer, stream)
            : nccl->recv(pointer(op.dst), op.bytes, op.peer, stream);
    if (!err.empty())
      return err;
    // The watchdog's progress marker (an event node when captured).
    TOFU_CUDA(cudaEventRecordWithFlags(callDone[callsIssued++], stream,
                                       cudaEventRecordExternal));
    return "";
  }
  case CudaOp::Kind::Pool:
  case CudaOp::Kind::BatchNorm: {
    std::array<float *, kNumDnnOperands> p{};
    for (int i = 0; i < kNumDnnOperands; ++i)
      if (op.dnn[i].device >= 0)
        p[i] = reinterpret_cast<float *>(pointer(op.dnn[i]));
    if (op.kind == CudaOp::Kind::BatchNorm)
      return devices[e.device].batchNorm->run(op.batchNorm, p);
    PoolRunner &pool = *devices[e.device].pool;
    return op.pool.backward ? pool.backward(op.pool, p[kDnnDy], p[kDnnX],
                                            p[kDnnDx])
                            : pool.forward(op.pool, p[kDnnX], p[kDnnY]);
  }
  }
  return "unknown schedule op";
}

std::string CudaExecutor::Impl::issue() {
  if (hook)
    if (std::string err = hook(-1, false, nullptr); !err.empty())
      return err;
  callsIssued = 0;
  for (size_t s = 0; s < schedule.instrs.size(); ++s) {
    const ScheduledInstr &e = schedule.instrs[s];
    TOFU_CUDA(cudaSetDevice(gpuOf(e.device)));
    cudaStream_t stream = streamOf(e);
    for (int32_t w : e.waits)
      TOFU_CUDA(cudaStreamWaitEvent(stream, events[w], 0));
    std::string err = hook ? hook(static_cast<int32_t>(s), false, stream) : "";
    for (size_t o = 0; o < e.ops.size() && err.empty(); ++o)
      err = issueOp(e, e.ops[o], stream);
    if (err.empty() && hook)
      err = hook(static_cast<int32_t>(s), true, stream);
    if (!err.empty()) {
      if (multiProcess)
        return "rank " + std::to_string(rank) + ": " +
               describeRankEntry(plan, multi, rank, static_cast<int32_t>(s)) +
               ": " + err;
      const Instr &in = plan.devices[e.device].instrs[e.index];
      return "device " + std::to_string(e.device) + " instruction " +
             std::to_string(e.index) + " (op '" + in.op + "'): " + err;
    }
    if (e.recordsEvent)
      TOFU_CUDA(cudaEventRecord(events[s], stream));
  }
  return "";
}

std::string CudaExecutor::Impl::checkErrorRecords() {
  for (Gpu &gpu : gpus) {
    if (!gpu.active)
      continue;
    TOFU_CUDA(cudaSetDevice(gpu.ordinal));
    unsigned long long record[kErrorWords];
    TOFU_CUDA(cudaMemcpy(record, gpu.error, sizeof(record),
                         cudaMemcpyDeviceToHost));
    if (record[0] != 0) {
      std::string idx;
      for (unsigned long long r = 0; r < record[3] && r < 8; ++r)
        idx += (r ? "," : "") + std::to_string(record[4 + r]);
      return "GPU " + std::to_string(gpu.ordinal) +
             ": a generated kernel read outside its local buffer (program "
             "node " + std::to_string(record[1]) + ", input " +
             std::to_string(record[2]) + ", index [" + idx +
             "]); the plan's regions and the kernel disagree: report it "
             "with the plan";
    }
  }
  return "";
}

std::string CudaExecutor::Impl::runStep(int64_t step) {
  if (!initialized)
    return "the CUDA executor was not initialized";
  if (std::string err = feed(step); !err.empty())
    return err;
  // Every stream of the step starts after the feed (synchronous copies) and
  // after the previous step (waited for below).
  const bool useGraph = options.useGraph && !hook;
  const bool replay = useGraph && graphExec;
  const bool capture = useGraph && !graphExec && stepsRun >= 1;
  cudaStream_t origin = devices[originDevice].compute;
  const int originGpu = gpuOf(originDevice);
  if (replay) {
    TOFU_CUDA(cudaSetDevice(originGpu));
    TOFU_CUDA(cudaGraphLaunch(graphExec, origin));
    ++replays;
  } else {
    if (capture) {
      TOFU_CUDA(cudaSetDevice(originGpu));
      TOFU_CUDA(
          cudaStreamBeginCapture(origin, cudaStreamCaptureModeRelaxed));
      TOFU_CUDA(cudaEventRecord(fork, origin));
      for (size_t d = 0; d < devices.size(); ++d) {
        if (!owns(static_cast<int32_t>(d)))
          continue;
        TOFU_CUDA(cudaSetDevice(gpuOf(static_cast<int32_t>(d))));
        if (static_cast<int32_t>(d) != originDevice)
          TOFU_CUDA(cudaStreamWaitEvent(devices[d].compute, fork, 0));
        TOFU_CUDA(cudaStreamWaitEvent(devices[d].comm, fork, 0));
      }
      if (ncclStream)
        TOFU_CUDA(cudaStreamWaitEvent(ncclStream, fork, 0));
    }
    std::string err = issue();
    if (capture) {
      // Join every stream back into the origin, then end the capture (also
      // after an error, so the streams leave capture mode).
      for (size_t d = 0; d < devices.size() && err.empty(); ++d) {
        if (!owns(static_cast<int32_t>(d)))
          continue;
        cudaSetDevice(gpuOf(static_cast<int32_t>(d)));
        if (static_cast<int32_t>(d) != originDevice) {
          cudaEventRecord(devices[d].joined, devices[d].compute);
          cudaSetDevice(originGpu);
          cudaStreamWaitEvent(origin, devices[d].joined, 0);
          cudaSetDevice(gpuOf(static_cast<int32_t>(d)));
        }
        cudaEventRecord(devices[d].commJoined, devices[d].comm);
        cudaSetDevice(originGpu);
        cudaStreamWaitEvent(origin, devices[d].commJoined, 0);
      }
      if (ncclStream && err.empty()) {
        cudaEventRecord(ncclJoined, ncclStream);
        cudaStreamWaitEvent(origin, ncclJoined, 0);
      }
      cudaSetDevice(originGpu);
      cudaError_t endErr = cudaStreamEndCapture(origin, &graph);
      if (!err.empty())
        return err;
      if (endErr != cudaSuccess)
        return cudaFailure("capturing the step as a CUDA graph "
                           "(cudaStreamEndCapture); run with --no-cuda-graph",
                           endErr);
      TOFU_CUDA(cudaGraphInstantiate(&graphExec, graph, 0));
      TOFU_CUDA(cudaGraphLaunch(graphExec, origin));
      ++replays;
    } else if (!err.empty()) {
      return err;
    }
  }
  if (multiProcess) {
    // A replayed graph records the calls' events again, in the same order.
    if (replay)
      callsIssued = calls.size();
    if (std::string err = watchdog(); !err.empty())
      return err;
  } else {
    for (size_t d = 0; d < devices.size(); ++d) {
      TOFU_CUDA(cudaSetDevice(gpuOf(static_cast<int32_t>(d))));
      TOFU_CUDA(cudaStreamSynchronize(devices[d].compute));
      TOFU_CUDA(cudaStreamSynchronize(devices[d].comm));
    }
  }
  ++stepsRun;
  return checkErrorRecords();
}

std::string CudaExecutor::Impl::timeEntries(
    int32_t repeats, int32_t launches,
    std::vector<CudaExecutor::EntryTime> &times) {
  times.clear();
  if (!initialized || stepsRun < 1)
    return "timing the schedule's entries needs an initialized executor "
           "that has run a step";
  if (multiProcess)
    return "timing the schedule's entries is not supported with one "
           "process per GPU (run the plan in one process, --devices N)";
  if (repeats < 1 || launches < 1)
    return "timing the schedule's entries needs at least one repeat and "
           "one launch";
  for (size_t s = 0; s < schedule.instrs.size(); ++s) {
    const ScheduledInstr &e = schedule.instrs[s];
    bool timed = !e.ops.empty();
    for (const CudaOp &op : e.ops)
      if (op.kind == CudaOp::Kind::Send || op.kind == CudaOp::Kind::Recv)
        timed = false;
    if (!timed)
      continue;
    const int32_t g = schedule.mapping.devices[e.device].gpu;
    cudaStream_t stream = streamOf(e);
    std::string err;
    double seconds = 0;
    if (cudaError_t rc = cudaSetDevice(gpus[g].ordinal); rc != cudaSuccess)
      err = cudaFailure("selecting an entry's GPU", rc);
    else
      err = timeInGraph(
          stream,
          [&] {
            for (const CudaOp &op : e.ops)
              if (std::string opErr = issueOp(e, op, stream); !opErr.empty())
                return opErr;
            return std::string();
          },
          repeats, launches, "an entry", seconds);
    if (!err.empty()) {
      const Instr &in = plan.devices[e.device].instrs[e.index];
      return "timing device " + std::to_string(e.device) + " instruction " +
             std::to_string(e.index) + " (op '" + in.op + "'): " + err;
    }
    times.push_back({static_cast<int32_t>(s), seconds});
  }
  return checkErrorRecords();
}

CudaExecutor::CudaExecutor(const Plan &plan, CudaRunOptions options)
    : impl(std::make_unique<Impl>(plan, options)) {}
CudaExecutor::~CudaExecutor() = default;

void CudaExecutor::setDataSource(DataSource source) {
  impl->dataSource = std::move(source);
}
std::string CudaExecutor::init() { return impl->init(); }
std::string CudaExecutor::runStep(int64_t step) { return impl->runStep(step); }
std::string CudaExecutor::timeEntries(int32_t repeats, int32_t launches,
                                      std::vector<EntryTime> &times) {
  return impl->timeEntries(repeats, launches, times);
}
int64_t CudaExecutor::graphReplays() const { return impl->replays; }
void CudaExecutor::setIssueHook(IssueHook hook) {
  impl->hook = std::move(hook);
}

void *CudaExecutor::deviceAddress(int32_t gpu, uint64_t offset) const {
  return impl->gpus[gpu].memory + offset;
}

std::string CudaExecutor::copyToHost(int32_t gpu, uint64_t offset,
                                     uint64_t bytes, uint8_t *out) const {
  TOFU_CUDA(cudaSetDevice(impl->gpus[gpu].ordinal));
  if (bytes)
    TOFU_CUDA(cudaMemcpy(out, impl->gpus[gpu].memory + offset, bytes,
                         cudaMemcpyDeviceToHost));
  return "";
}

std::vector<uint64_t> CudaExecutor::workspaceBytes() const {
  std::vector<uint64_t> bytes(impl->plan.devices.size(), 0);
  for (size_t d = 0; d < impl->devices.size(); ++d)
    if (impl->devices[d].conv)
      bytes[d] = impl->devices[d].conv->workspaceAllocated();
  return bytes;
}
const Schedule &CudaExecutor::schedule() const { return impl->schedule; }

std::string CudaExecutor::lastLoss(double &loss) const {
  if (impl->stepsRun == 0)
    return "no step has run";
  if (impl->plan.lossTensor < 0)
    return "the plan has no loss tensor";
  if (!impl->owns(0))
    return "the loss is on rank 0 (the rank of plan device 0)";
  const Impl::Gpu &gpu = impl->gpus[impl->schedule.mapping.devices[0].gpu];
  TOFU_CUDA(cudaSetDevice(gpu.ordinal));
  const plan::DType type = impl->plan.tensors[impl->plan.lossTensor].dtype;
  uint64_t slot = 0; // as many bytes as the loss element (at most 8)
  TOFU_CUDA(cudaMemcpy(&slot, gpu.lossSlot, plan::dtypeSize(type),
                       cudaMemcpyDeviceToHost));
  loss = tofu::runtime::loadElement(&slot, type, 0);
  return "";
}

std::string CudaExecutor::readBuffer(int32_t device, int32_t buffer,
                                     std::vector<uint8_t> &bytes) const {
  if (!impl->owns(device))
    return "plan device " + std::to_string(device) + " runs on rank " +
           std::to_string(impl->schedule.mapping.devices[device].gpu) +
           ", not on this one";
  const Buffer &b = impl->plan.devices[device].buffers[buffer];
  bytes.resize(b.bytes);
  TOFU_CUDA(cudaSetDevice(impl->gpuOf(device)));
  if (b.bytes)
    TOFU_CUDA(cudaMemcpy(bytes.data(), impl->pointer({device, b.offset}),
                         b.bytes, cudaMemcpyDeviceToHost));
  return "";
}

bool tofu::cuda::cudaExecutorAvailable() { return true; }

std::string tofu::cuda::describeGpus(int &count) {
  count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    count = 0;
    std::string why = cudaGetErrorString(err);
    cudaGetLastError();
    return "the CUDA runtime reports: " + why;
  }
  if (count == 0)
    return "the CUDA runtime sees no device";
  std::string out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess)
      continue;
    out += std::to_string(i) + ": " + prop.name + " (sm_" +
           std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
           formatBytes(prop.totalGlobalMem) + ")\n";
  }
  return out;
}
