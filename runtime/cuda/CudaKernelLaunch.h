//===- CudaKernelLaunch.h - How a generated kernel is launched -*- C++ -*-===//
//
// Which entry point of a generated kernel (lib/Target/CudaKernelGenerator.cpp)
// the CUDA executor launches for a CudaLaunch, and with what grid: one
// thread per output element (`<name>`), one block per output element
// (`<name>_block`, kind "block-reduction") or one block per row
// (`<name>_row`, kind "row-reduction"). Plain C++, so that the host
// emulator of the executor's tests (CudaScheduleTest.cpp) runs the host
// driver of the same variant the GPU runs.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDAKERNELLAUNCH_H
#define TOFU_RUNTIME_CUDA_CUDAKERNELLAUNCH_H

#include "tofu/runtime/Plan.h"

#include <cstdint>

namespace tofu::cuda {

/// Threads of a block of a "block-reduction" or "row-reduction" variant: the
/// generator's TOFU_BLOCK_THREADS.
constexpr int64_t kReductionBlockThreads = 256;
/// A launch whose blocks would each compute one output element uses the
/// block (or row) variant only with at most this many elements per
/// multiprocessor; beyond that one thread per element keeps every thread
/// busy with its own serial loop.
constexpr int64_t kReductionMaxElementsPerSM = 64;
/// A row of at most this many elements runs on one warp (`_rowwarp`,
/// TOFU_BLOCK_THREADS / 32 rows a block) rather than a whole block: a
/// block of 256 threads would leave most of them idle in the row's element
/// phase and pay eight levels of block barriers per shared reduction.
constexpr int64_t kWarpRowMaxElements = 128;
/// Threads of a warp-per-row group (the generator's TOFU_WARP_THREADS).
constexpr int64_t kWarpRowThreads = 32;
/// Blocks launched at most per multiprocessor (the kernels grid-stride).
constexpr int64_t kMaxBlocksPerSM = 32;
/// The multiprocessors the host emulator assumes (an H100 SXM or H200).
constexpr int kEmulatedMultiprocessors = 132;

/// What the executor launches for one CudaLaunch.
struct KernelLaunchConfig {
  enum class Variant { Element, Block, Row, RowWarp };
  Variant variant = Variant::Element;
  int64_t grid = 1;    ///< blocks
  int64_t threads = 0; ///< threads per block
};

/// The entry point's suffix: "", "_block", "_row" or "_rowwarp".
const char *variantSuffix(KernelLaunchConfig::Variant variant);

/// The launch of `launch` (a launch of `kernel`) on a GPU with
/// `multiprocessors` multiprocessors:
///  - "row-reduction": the row variant (the row count is the launch's last
///    parameter) when a row has more than one element (its reductions are
///    then computed once instead of once per element) or there are at most
///    kReductionMaxElementsPerSM rows per multiprocessor; else one thread
///    per element. Rows of 2 to kWarpRowMaxElements elements take a warp
///    each (`_rowwarp`) where `warpRows` (the plan's cubin has the entry
///    point: plans compiled before it do not), others a block each;
///  - "block-reduction": the block variant when the launch has at most
///    kReductionMaxElementsPerSM elements per multiprocessor;
///  - otherwise one thread per element, kernel.blockSize threads a block.
/// The grid is capped at kMaxBlocksPerSM blocks per multiprocessor (at
/// least 1).
KernelLaunchConfig kernelLaunchConfig(const plan::CudaKernel &kernel,
                                      const plan::CudaLaunch &launch,
                                      int multiprocessors,
                                      bool warpRows = true);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDAKERNELLAUNCH_H
