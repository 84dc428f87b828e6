//===- CudaSchedule.h - What the CUDA executor issues, decided on the CPU -*- C++ -*-===//
//
// Everything the CUDA executor (CudaExecutor.cpp) does that is not a CUDA
// call, computed from the plan by plain C++ so that it is tested on machines
// without a GPU (CudaScheduleTest.cpp, against plans tofuc compiles from the
// example models):
//
//  * the placement of the k plan devices on N GPUs (`--devices N`): plan
//    device p runs on GPU p * N / k as a virtual device with its own,
//    disjoint slice of that GPU's one allocation (its planned arena, then
//    its Reduce scratch), the GPU's MultiFetch piece tables after them;
//  * the issue order: the instructions of all devices merged as the CPU
//    backend runs them (increasing seq, then device, then program order);
//  * per instruction the stream (its device's compute stream for Compute
//    and purely local Fetch/Reduce, its communication stream when a piece
//    comes from another plan device) and the events it waits on: a
//    dependency is every earlier instruction that touches the same arena
//    bytes of the same plan device with at least one write (RAW, WAR, WAW;
//    the memory planner reuses bytes, so buffers are compared by bytes, not
//    by id); dependencies on the same stream are implied by stream order,
//    and of several on one other stream only the latest is waited on;
//  * per instruction the calls it becomes: a launch of a generated kernel
//    of the plan's CUDA module (one per output, or one fused launch for a
//    chain, issued at the chain's last instruction), a cuBLAS GEMM or
//    strided batched GEMM (MatMul, Gemm; Gemm's C is first broadcast into
//    Y by a runtime kernel), a cuDNN convolution (Conv, ConvGradInput,
//    ConvGradWeight where the mapping applies, else their generated
//    kernel), cuDNN pooling and batch normalization (CudaDnnMapping.h,
//    likewise), and for a Fetch/Reduce one MultiFetch/MultiReduce launch
//    over a static piece table (CudaMultiFetchTables.h: a Fetch of two or
//    more pieces or a strided one, every Reduce), else per piece one
//    contiguous memcpy (cudaMemcpyAsync on one GPU, cudaMemcpyPeerAsync
//    between GPUs) or a strided box copy/add kernel (reading a peer GPU
//    through UVA);
//  * the refusal, before anything runs, of every op with no CUDA
//    implementation (named, with the instruction that uses it).
//
// `validateSchedule` re-derives from the plan alone what a correct schedule
// must guarantee (every conflicting pair ordered, streams, disjoint device
// memory, every instruction present once) and is what the tests use to show
// that a wrong schedule is caught.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDASCHEDULE_H
#define TOFU_RUNTIME_CUDA_CUDASCHEDULE_H

#include "CudaByteHazards.h"
#include "CudaMultiFetch.h"
#include "CudaDnnCalls.h"
#include "tofu/runtime/Plan.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tofu::cuda {

/// Alignment of every virtual device's slice and of its scratch area.
constexpr uint64_t kDeviceAlignment = 256;
/// Highest tensor rank the box copy/add kernels handle.
constexpr size_t kMaxBoxRank = 8;

/// Where one plan device lives: GPU `gpu`, bytes [base, base + sliceBytes)
/// of that GPU's allocation. Inside the slice, [0, arenaBytes) is the
/// planned arena (buffer offsets as planned) and [scratchOffset,
/// scratchOffset + scratchBytes) the Reduce scratch.
struct DevicePlacement {
  int32_t gpu = 0;
  uint64_t base = 0;
  uint64_t arenaBytes = 0;
  uint64_t scratchOffset = 0;
  uint64_t scratchBytes = 0;
  uint64_t sliceBytes = 0;
};

/// The plan devices on `numGpus` GPUs.
struct DeviceMapping {
  int32_t numGpus = 0;
  std::vector<DevicePlacement> devices; ///< one per plan device
  std::vector<uint64_t> gpuBytes;       ///< one allocation per GPU
  /// Fetch/Reduce may run as one MultiFetch/MultiReduce launch
  /// (runsAsOneLaunch); false for the multi-process schedule, whose remote
  /// pieces become NCCL transfers (a Reduce then keeps its scratch).
  bool oneLaunchFetches = true;
};

/// Places the plan's devices on `numGpus` GPUs (1 <= numGpus <= k).
std::string mapDevices(const plan::Plan &plan, int32_t numGpus,
                       DeviceMapping &mapping, bool oneLaunchFetches = true);

/// Bytes of device memory, relative to plan device `device`'s slice.
struct DevicePointer {
  int32_t device = -1;
  uint64_t offset = 0;
};

/// A plan device's compute or communication stream; `Nccl` is the one
/// stream per process of a multi-process schedule (CudaNcclSchedule.h) that
/// carries every NCCL send and receive of that process.
enum class StreamKind : uint8_t { Compute = 0, Comm = 1, Nccl = 2 };

/// How a contiguous copy crosses devices.
enum class CopyPath : uint8_t {
  SameDevice = 0, ///< within one plan device (cudaMemcpyAsync D2D)
  SameGpu = 1,    ///< two virtual devices of one GPU (cudaMemcpyAsync D2D)
  Peer = 2,       ///< two GPUs (cudaMemcpyPeerAsync)
};

/// A strided box: `region` (extents) at `srcStart` inside a dense box of
/// extents `srcExtents`, moved to `dstStart` inside a dense box of extents
/// `dstExtents`. Unused trailing dimensions have extent 1.
struct BoxMove {
  int32_t rank = 0;
  std::array<int64_t, kMaxBoxRank> region{}, srcExtents{}, srcStart{},
      dstExtents{}, dstStart{};

  /// Whether the region is one contiguous run in the source / destination.
  bool srcContiguous() const;
  bool dstContiguous() const;
  /// Element offset of the region's start in the source / destination box.
  int64_t srcStartElement() const;
  int64_t dstStartElement() const;
};

/// Whether a region of `rank` extents is one contiguous run inside a dense
/// box of extents `ext`: some dim j has extent 1 in every dim before it and
/// the box's whole extent in every dim after it.
bool isContiguousRun(const int64_t *region, const int64_t *ext, size_t rank);

/// The row-major linear element offset of `start` inside a dense box of
/// `rank` extents `ext`.
int64_t rowMajorOffset(const int64_t *start, const int64_t *ext, size_t rank);

/// One call the executor makes for an instruction.
struct CudaOp {
  enum class Kind : uint8_t {
    Kernel,    ///< launch `launch` of the plan's CUDA module
    Gemm,      ///< cuBLAS (strided batched when batch > 1)
    GemmBias,  ///< Y[i, j] = beta * C[cOffset + i * cRowStride + j * cColStride]
    Conv,      ///< cuDNN, direction `convDirection`
    Copy,      ///< contiguous `bytes` from src to dst (`path`)
    BoxCopy,   ///< strided box `box` from src to dst (UVA across GPUs)
    Zero,      ///< `bytes` zero bytes at dst (cudaMemsetAsync)
    BoxAdd,    ///< dst box += src box (element type `dtype`)
    SaveLoss,  ///< copy the loss (`bytes` at src) to the per-GPU loss slot
    Send,      ///< ncclSend `bytes` at src to rank `peer` (multi-process)
    Recv,      ///< ncclRecv `bytes` from rank `peer` into dst (multi-process)
    MultiFetch,  ///< one launch copying every piece (Schedule::tables[table])
    MultiReduce, ///< one launch writing dst = sum of the pieces (no scratch)
    Pool,      ///< cuDNN pooling `pool`, operands in `dnn`
    BatchNorm, ///< cuDNN batch normalization `batchNorm`, operands in `dnn`
  };
  Kind kind = Kind::Kernel;
  int32_t launch = -1;
  int32_t table = -1; ///< MultiFetch/MultiReduce: index in Schedule::tables
  // GEMM (row-major, as tofu::cuda::GemmShape); pointers are arrays of
  // `dtype` (Gemm, GemmBias and Conv: f32, f64, f16 or bf16).
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  double alpha = 1, beta = 0;
  int64_t batch = 1, strideA = 0, strideB = 0, strideC = 0; ///< elements
  DevicePointer a, b, c;
  /// Gemm through cuBLASLt with an epilogue (CudaBlas.h LtGemm, beta 0):
  /// `bias` (n elements of `dtype`, one per column of C; device -1: none)
  /// added to every row, then max(C, 0) where `relu` (a Relu that read only
  /// this GEMM's output, fused: C is the Relu's output).
  DevicePointer bias;
  bool relu = false;
  // GemmBias.
  int64_t cRowStride = 0, cColStride = 0;
  // Conv: X, W, Y global-box shapes as cuDNN sees them (local), pads, ...
  int32_t convDirection = 0; ///< tofu::cuda::ConvDirection
  std::vector<int64_t> x, w, padsBegin, padsEnd, strides, dilations;
  int64_t group = 1;
  // Copies.
  DevicePointer src, dst;
  uint64_t bytes = 0;
  CopyPath path = CopyPath::SameDevice;
  BoxMove box;
  /// Element type of the op's operands (BoxCopy/BoxAdd, Gemm, GemmBias,
  /// Conv, SaveLoss: the loss, `bytes` of it).
  plan::DType dtype = plan::DType::F32;
  uint32_t elementSize = 4;
  // Send/Recv: the other rank and the transfer's position in the global
  // order of NCCL transfers (CudaNcclSchedule.h).
  int32_t peer = -1, transfer = -1;
  // Pool, BatchNorm (CudaDnnCalls.h); absent operands have device -1.
  PoolCall pool;
  BatchNormCall batchNorm;
  std::array<DevicePointer, kNumDnnOperands> dnn{};
};

/// One plan instruction as issued.
struct ScheduledInstr {
  int32_t device = 0;
  int32_t index = 0;     ///< position in the device program (a fused launch:
                         ///< the chain's last instruction)
  int32_t firstIndex = 0;///< the chain's first instruction (= index unless fused)
  StreamKind stream = StreamKind::Compute;
  /// Positions in Schedule::instrs (all earlier, all on other streams)
  /// whose completion events this instruction waits on.
  std::vector<int32_t> waits;
  bool recordsEvent = false; ///< some later instruction waits on it
  std::vector<CudaOp> ops;
  /// Why a convolution, pooling or batch normalization runs its generated
  /// kernel instead of cuDNN (mapConv / mapDnn's reason; "" otherwise),
  /// printed by `--dump-cuda-schedule`.
  std::string notLibraryWhy;
};

/// The piece table of one MultiFetch/MultiReduce launch (CudaMultiFetch.h),
/// static for the whole run: the executor resolves its addresses and writes
/// it once at init into GPU `gpu`'s table area (placed after that GPU's
/// slices in its one allocation), at `offset` of that area.
struct MultiFetchTable {
  int32_t gpu = 0;
  uint64_t offset = 0, bytes = 0;
  /// header and pieces with `dst` / `src` left 0: the addresses are `dst`
  /// and `sources[i]`, resolved by the executor (or the host emulator).
  MultiFetchHeader header;
  std::vector<MultiFetchPiece> pieces;
  DevicePointer dst;
  std::vector<DevicePointer> sources;
};

/// The whole step as the executor issues it.
struct Schedule {
  DeviceMapping mapping;
  std::vector<MultiFetchTable> tables;
  std::vector<uint64_t> tableBytes;   ///< per GPU, after its slices
  std::vector<ScheduledInstr> instrs; ///< issue order
  /// The schedule entry writing the loss last (it ends with SaveLoss), -1
  /// when the plan has no loss.
  int32_t lossWriter = -1;
};

/// Builds the schedule of `plan` on `numGpus` GPUs. Fails (with every op
/// that has no CUDA implementation named) when the plan cannot run.
/// `oneLaunchFetches` false keeps every Fetch/Reduce on per-piece calls
/// (the multi-process schedule turns remote pieces into NCCL transfers).
std::string buildSchedule(const plan::Plan &plan, int32_t numGpus,
                          Schedule &schedule, bool oneLaunchFetches = true);

/// Checks `schedule` against the plan: placements disjoint and inside their
/// GPU's allocation, every instruction with work present exactly once, the
/// stream rule, every op's memory inside its device's slice, and every
/// earlier conflicting instruction (same bytes of one device, a write on
/// either side) ordered before a later one by stream order and events.
/// Returns "" or what is wrong.
std::string validateSchedule(const plan::Plan &plan, const Schedule &schedule);

/// The bytes schedule entry `entry` reads and writes, by plan device:
/// the whole buffers of its instructions (a Fetch/Reduce piece reads its
/// whole source buffer) and its device's Reduce scratch.
std::vector<ByteAccess> entryAccesses(const plan::Plan &plan,
                                      const DeviceMapping &mapping,
                                      const ScheduledInstr &entry);

/// One line per scheduled instruction (stream, waits, calls), for
/// `tofu-run --dump-cuda-schedule` and test failure messages.
std::string describeSchedule(const plan::Plan &plan, const Schedule &schedule);

/// Bytes of an element type, 0 for a number that is no plan element type.
uint32_t cudaElementSize(plan::DType dtype);

/// The cuBLAS call a Gemm op becomes ("cublasSgemm", "cublasDgemm",
/// "cublasGemmEx", their strided batched forms, or "cublasLtMatmul" with an
/// epilogue).
const char *gemmCallName(const CudaOp &op);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDASCHEDULE_H
