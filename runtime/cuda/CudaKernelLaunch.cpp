//===- CudaKernelLaunch.cpp - How a generated kernel is launched ----------===//
//
// See CudaKernelLaunch.h.
//
//===----------------------------------------------------------------------===//
#include "CudaKernelLaunch.h"

#include <algorithm>

using namespace tofu;
using namespace tofu::cuda;

const char *tofu::cuda::variantSuffix(KernelLaunchConfig::Variant variant) {
  switch (variant) {
  case KernelLaunchConfig::Variant::Block:
    return "_block";
  case KernelLaunchConfig::Variant::Row:
    return "_row";
  case KernelLaunchConfig::Variant::RowWarp:
    return "_rowwarp";
  case KernelLaunchConfig::Variant::Grid:
    return "_grid";
  case KernelLaunchConfig::Variant::Element:
    break;
  }
  return "";
}

KernelLaunchConfig tofu::cuda::kernelLaunchConfig(const plan::CudaKernel &kernel,
                                                  const plan::CudaLaunch &launch,
                                                  int multiprocessors,
                                                  bool warpRows,
                                                  bool gridEntry) {
  const int64_t sms = std::max(1, multiprocessors);
  const int64_t elements = launch.numElements;
  KernelLaunchConfig config;
  int64_t blocks = 0;
  if (kernel.kind == "row-reduction" && !launch.params.empty()) {
    const int64_t rows = launch.params.back();
    if (rows > 0 && (elements > rows || rows <= sms * kReductionMaxElementsPerSM)) {
      config.variant = KernelLaunchConfig::Variant::Row;
      blocks = rows;
      if (warpRows && elements > rows && elements <= rows * kWarpRowMaxElements) {
        const int64_t rowsPerBlock = kReductionBlockThreads / kWarpRowThreads;
        config.variant = KernelLaunchConfig::Variant::RowWarp;
        blocks = (rows + rowsPerBlock - 1) / rowsPerBlock;
      }
    }
  } else if (kernel.kind == "block-reduction" && gridEntry && elements > 0 &&
             elements <= kGridMaxElements) {
    config.variant = KernelLaunchConfig::Variant::Grid;
    blocks = elements * kGridParts;
  } else if (kernel.kind == "block-reduction" &&
             elements <= sms * kReductionMaxElementsPerSM) {
    config.variant = KernelLaunchConfig::Variant::Block;
    blocks = elements;
  }
  if (config.variant == KernelLaunchConfig::Variant::Element) {
    config.threads = kernel.blockSize;
    blocks = config.threads > 0
                 ? (elements + config.threads - 1) / config.threads
                 : 0;
  } else {
    config.threads = kReductionBlockThreads;
  }
  config.grid = std::max<int64_t>(1, std::min(blocks, sms * kMaxBlocksPerSM));
  return config;
}
