//===- CudaKernelGenerator.h - CUDA kernels from TDL programs ---*- C++ -*-===//
//
// Turns the expression programs of a plan's Compute instructions (TDL
// outputs lowered by lib/TDL/ProgramLowering.cpp) into CUDA C++ at compile
// time, compiles it with nvcc for one GPU architecture and stores the cubin
// with every kernel's launch metadata in the plan (plan::CudaModule), so that
// the CUDA runtime needs no compiler (issue 7, docs/Cuda.md).
//
// One thread computes one output element: the same `__host__ __device__`
// element function serves the `__global__` kernel (grid-stride loop) and a
// host driver `<name>_host`, so the generated source also compiles as plain
// C++ and is checked against the expression interpreter on machines without
// a GPU (test/unit/Target/CudaKernelGeneratorTest.cpp). Reductions with much
// work also get a variant in which a block of threads shares them, combined
// in a fixed tree order: `<name>_block` (a root Reduce, one block per
// element, blockReductionRoot) and `<name>_row` / `<name>_rowwarp`
// (reductions shared by a row of elements, one block or one warp per row,
// rowReductionDims); which one runs is the executor's choice
// (runtime/cuda/CudaKernelLaunch.h).
//
// Which instructions get a kernel: every Compute instruction with programs
// except the ops the executor always runs through cuBLAS (isLibraryBackedOp:
// MatMul, Gemm). Convolutions get one too: the executor prefers cuDNN and
// falls back to the generated kernel where cuDNN does not apply. Consecutive
// element-wise instructions of one device where each reads the previous
// one's output at the same element (same region, identity indices) are
// fused into one kernel that computes the chain in registers and still
// writes every instruction's output.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TARGET_CUDAKERNELGENERATOR_H
#define TOFU_TARGET_CUDAKERNELGENERATOR_H

#include "tofu/runtime/Plan.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace tofu::cudagen {

/// An operand of a generated kernel (an input buffer of its instructions).
struct KernelOperand {
  bool present = true;              ///< false: absent optional input (null)
  plan::DType dtype = plan::DType::F32;
  std::vector<int64_t> globalShape; ///< the tensor's global shape
};

/// Where input `i` of a stage comes from: kernel operand `operand`, or the
/// output of the earlier stage `stage` (read in registers, identity
/// indices only). Exactly one of the two is >= 0.
struct StageInput {
  int32_t operand = -1;
  int32_t stage = -1;
};

/// One op computed by a kernel: output element = `program`'s root.
struct KernelStage {
  const plan::ExprProgram *program = nullptr;
  plan::DType outputType = plan::DType::F32;
  std::vector<StageInput> inputs; ///< one per program input
  std::string op;                 ///< op kernel name, for comments
};

/// What one kernel computes. Every stage writes an output of global shape
/// `outputGlobalShape`, over the same region (given at launch).
struct KernelDescription {
  std::vector<KernelOperand> operands;
  std::vector<KernelStage> stages;
  std::vector<int64_t> outputGlobalShape;
  /// Emit the row variant wherever rowReductionDims allows one, not only
  /// for "row-reduction" programs (tests: every such program runs it).
  bool forceRowVariant = false;
};

/// Whether `kernel` gets a row variant `<name>_row` (and the row count
/// parameter): one stage whose program has rowReductionDims and is
/// classified "row-reduction" (or forceRowVariant).
bool hasRowVariant(const KernelDescription &kernel);

/// Kernel parameter layout (int64): [0] number of output elements; the
/// output region's lo then shape; per operand its local box's lo then shape
/// (zeros when absent); per stage, per top-level reduction variable of its
/// program, the range [lo, hi); for a kernel with a row variant
/// (rowReductionDims), last, the number of rows of the output region.
/// Pointers: stage outputs, then operands.
struct ParamLayout {
  int64_t outLo = 1, outShape = 0;
  std::vector<int64_t> operandLo, operandShape;
  std::vector<int64_t> stageRanges;
  int64_t rows = -1; ///< index of the row count; -1: no row variant
  int64_t numParams = 0;
  int64_t numPointers = 0;
};
ParamLayout paramLayout(const KernelDescription &kernel);

/// The launch parameters for the output region `outputRegion`, operand boxes
/// `operandRegions` (empty Box for an absent operand) and per stage its
/// reduction ranges (empty = whole extents).
std::vector<int64_t>
launchParams(const KernelDescription &kernel, const plan::Box &outputRegion,
             const std::vector<plan::Box> &operandRegions,
             const std::vector<std::vector<std::pair<int64_t, int64_t>>>
                 &stageRanges);

/// The code every generated translation unit starts with: helpers for
/// loads, stores, padding, the counter RNG, and the TofuPointers/TofuParams
/// argument structs. Compiles with nvcc and with a plain C++17 compiler.
std::string emitPrelude();

/// The element function, `__global__` kernel and host driver of `kernel`
/// under the entry-point name `name`:
///   extern "C" void <name>_host(void *const *ptrs, const int64_t *params,
///                               uint64_t step, unsigned long long *error)
/// computes every element on the host. Errors: a malformed program, or a
/// stage input that reads an earlier stage other than element-wise.
llvm::Expected<std::string> emitKernel(const KernelDescription &kernel,
                                       const std::string &name);

/// Fewest loop iterations per output element (the root reduction's, times
/// the reductions nested in it) for which a kernel also gets a block
/// variant (blockReductionRoot).
inline constexpr int64_t kBlockReductionMinIterations = 256;

/// Whether the kernel of this one program also gets a variant that computes
/// each output element with a block of TOFU_BLOCK_THREADS threads,
/// `<name>_block` (host driver `<name>_block_host`): its root is a Reduce
/// and an element takes at least kBlockReductionMinIterations iterations (a
/// loss, a bias or BatchNorm gradient, a normalization's statistics). Each
/// thread accumulates a strided share of the root's flattened loop nest in
/// double and the block combines the shares in a fixed tree order
/// (deterministic; the host driver follows the same order), which differs
/// from the CPU interpreter's sequential order only by rounding. The CUDA
/// executor launches the block variant when a launch has few elements
/// (runtime/cuda/CudaKernelLaunch.h), the one-thread-per-element kernel
/// otherwise.
bool blockReductionRoot(const plan::ExprProgram &program);

/// The row dimensions of a program whose value reads reductions that do not
/// depend on every output index (row-invariant reductions: a LayerNorm's
/// mean and variance, a softmax's maximum and sum, a BatchNorm's channel
/// statistics): per output dimension, whether it indexes the rows (true: a
/// free variable of such a reduction) or the elements within a row
/// (false). nullopt when the program has no reduction whose free variables
/// are all output variables, or its root is a Reduce (blockReductionRoot's
/// case). For such a program the kernel also gets `<name>_row` (host
/// driver `<name>_row_host`): one block of TOFU_BLOCK_THREADS threads per
/// row computes each row-invariant reduction once, every thread a strided
/// share of its flattened loop nest in double, combined in a fixed tree
/// order (shared memory, then warp shuffles; the host driver follows the
/// same order, so host and device agree bit for bit up to the device's
/// math functions and FMA contraction), and then the row's elements, one
/// thread each, with those values. It differs from the CPU interpreter
/// only by the rounding of the tree order. `<name>_rowwarp` (host driver
/// `<name>_rowwarp_host`) runs the same row body with a warp of 32 threads
/// per row (eight rows a block, the tree by shuffles within the warp), for
/// short rows.
std::optional<std::vector<bool>>
rowReductionDims(const plan::ExprProgram &program);

/// Fewest loop iterations of a program's row-invariant reductions per row
/// for which its kernel is classified "row-reduction" (the executor then
/// launches `<name>_row`, runtime/cuda/CudaKernelLaunch.h) ...
inline constexpr int64_t kRowReductionMinIterations = 256;
/// ... or, for rows of at least this many elements (each of which would
/// recompute them), this many (SoftmaxGrad over 128 columns).
inline constexpr int64_t kRowReductionMinShortIterations = 64;

/// Classifies a program: "block-reduction" (blockReductionRoot: both
/// variants), "row-reduction" (rowReductionDims, with at least
/// kRowReductionMinIterations iterations of its row-invariant reductions
/// per row, or kRowReductionMinShortIterations on rows of at least as many
/// elements), "reduction" (has a Reduce node), "elementwise"
/// (every access reads its input at the output element, with ONNX
/// broadcasting: index k of a rank-r input is output variable
/// k + outRank - r, or a constant), otherwise
/// "data-movement" (transpose, slice, concat, gather, pad, ...).
std::string classifyProgram(const plan::ExprProgram &program);

/// True for the ops the CUDA backend always runs through cuBLAS (MatMul,
/// Gemm): no kernel is generated for them.
bool isLibraryBackedOp(const std::string &kernel);

/// Options of generateCudaKernels.
struct CudaCodegenOptions {
  std::string arch;      ///< "sm_90", "sm_80", "sm_90a", ...
  std::string nvccPath;  ///< empty: $PATH, then /usr/local/cuda/bin/nvcc
  bool fuseElementwise = true;
  bool compile = true;   ///< false: source and metadata only (tests)
};

/// Checks an architecture name: sm_<major><minor>[a|f], e.g. sm_90.
llvm::Error checkCudaArch(const std::string &arch);

/// Generates the kernels of every Compute instruction of `plan` that has
/// programs (see above), compiles them with nvcc (unless !compile) and fills
/// `plan.cuda`. Call after planMemory: fusion checks that a fused kernel's
/// outputs share no arena bytes with its other operands. Errors name what
/// failed: nvcc missing ("install the CUDA toolkit or pass --nvcc"), or nvcc
/// rejecting a kernel (its name, ops, device and instruction, and nvcc's
/// output).
llvm::Error generateCudaKernels(plan::Plan &plan,
                                const CudaCodegenOptions &options);

} // namespace tofu::cudagen

#endif // TOFU_TARGET_CUDAKERNELGENERATOR_H
