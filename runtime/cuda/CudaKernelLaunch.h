//===- CudaKernelLaunch.h - How a generated kernel is launched -*- C++ -*-===//
//
// Which entry point of a generated kernel (lib/Target/CudaKernelGenerator.cpp)
// the CUDA executor launches for a CudaLaunch, and with what grid: one
// thread per output element (`<name>`), one block per output element
// (`<name>_block`, kind "block-reduction"), kGridParts blocks per output
// element (`<name>_grid`, the same kind, for launches of at most
// kGridMaxElements elements: a loss) or one block per row
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
/// A "block-reduction" launch of at most this many elements (a loss, a
/// scalar mean) runs the grid variant `<name>_grid` where the plan has it:
/// kGridParts blocks share each element's iterations.
constexpr int64_t kGridMaxElements = 8;
/// Blocks an element of the grid variant is shared by (the generator's
/// TOFU_GRID_PARTS).
constexpr int64_t kGridParts = 256;
/// Bytes of device scratch a grid-variant launch of `elements` elements
/// needs: kGridParts doubles per element, then one 32-bit counter per
/// element; zeroed once (the kernel leaves the counters at zero).
inline uint64_t gridScratchBytes(int64_t elements) {
  return static_cast<uint64_t>(elements) * (kGridParts * 8 + 4);
}
/// Threads of a warp-per-row group (the generator's TOFU_WARP_THREADS).
constexpr int64_t kWarpRowThreads = 32;
/// Blocks launched at most per multiprocessor (the kernels grid-stride).
constexpr int64_t kMaxBlocksPerSM = 32;
/// The multiprocessors the host emulator assumes (an H100 SXM or H200).
constexpr int kEmulatedMultiprocessors = 132;

/// What the executor launches for one CudaLaunch.
struct KernelLaunchConfig {
  enum class Variant { Element, Block, Row, RowWarp, Grid };
  Variant variant = Variant::Element;
  int64_t grid = 1;    ///< blocks
  int64_t threads = 0; ///< threads per block
};

/// The entry point's suffix: "", "_block", "_row", "_rowwarp" or "_grid".
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
///  - "block-reduction": the grid variant when the launch has at most
///    kGridMaxElements elements and `gridEntry` (the plan's cubin has
///    `<name>_grid`: plans compiled before it do not), kGridParts blocks an
///    element; else the block variant when the launch has at most
///    kReductionMaxElementsPerSM elements per multiprocessor;
///  - otherwise one thread per element, kernel.blockSize threads a block.
/// The grid is capped at kMaxBlocksPerSM blocks per multiprocessor (at
/// least 1).
KernelLaunchConfig kernelLaunchConfig(const plan::CudaKernel &kernel,
                                      const plan::CudaLaunch &launch,
                                      int multiprocessors,
                                      bool warpRows = true,
                                      bool gridEntry = false);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDAKERNELLAUNCH_H
