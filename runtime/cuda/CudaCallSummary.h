//===- CudaCallSummary.h - The calls of a CUDA step, by op ------*- C++ -*-===//
//
// `tofu-run --backend cuda --kernels native` lists what runs each op: the
// generated kernels of the plan's CUDA module (by kind), cuBLAS, cuDNN, the
// runtime's own kernels (Gemm bias, box copy/add) and memcpy/memset, counted
// per step from the schedule. (`--dump-cuda-schedule` shows every call.)
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDACALLSUMMARY_H
#define TOFU_RUNTIME_CUDA_CUDACALLSUMMARY_H

#include "CudaSchedule.h"

#include <string>

namespace tofu::cuda {

/// "calls per step by op:" then one line per op (Compute kernel name,
/// Fetch, Reduce) in name order: "  Gemm: 8 cuBLAS, 8 runtime kernels".
std::string describeCalls(const plan::Plan &plan, const Schedule &schedule);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDACALLSUMMARY_H
