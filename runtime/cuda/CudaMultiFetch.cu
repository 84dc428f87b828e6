//===- CudaMultiFetch.cu - One-launch Fetch/Reduce kernel ----------------===//
//
// The kernel of CudaMultiFetch.h: a grid-stride loop over the table's work
// items, each running `multiFetchItem`, the same function the host emulator
// of the schedule tests runs. The table and every source are read through
// unified addressing (sources on peer GPUs need peer access, which the
// executor enables for every GPU a table reads).
//
//===----------------------------------------------------------------------===//

#include "CudaMultiFetch.h"

#include <cuda_runtime.h>

#include <algorithm>

namespace {

__global__ void __launch_bounds__(256)
    tofuMultiFetch(const tofu::cuda::MultiFetchHeader *table) {
  const tofu::cuda::MultiFetchHeader header = *table;
  const auto *pieces =
      reinterpret_cast<const tofu::cuda::MultiFetchPiece *>(table + 1);
  for (int64_t item = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
       item < header.items; item += (int64_t)gridDim.x * blockDim.x)
    tofu::cuda::multiFetchItem(header, pieces, item);
}

} // namespace

std::string tofu::cuda::launchMultiFetch(const void *table, int64_t items,
                                         int64_t maxBlocks, void *stream) {
  if (items <= 0)
    return "";
  const int64_t blocks = std::max<int64_t>(
      1, std::min<int64_t>((items + 255) / 256, std::max<int64_t>(1, maxBlocks)));
  tofuMultiFetch<<<static_cast<unsigned>(blocks), 256, 0,
                   static_cast<cudaStream_t>(stream)>>>(
      static_cast<const MultiFetchHeader *>(table));
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess
             ? ""
             : std::string("MultiFetch kernel: ") + cudaGetErrorString(err);
}
