//===- CudaRunPlugin.h - tofu-run's --backend cuda, as a plugin --*- C++ -*-===//
//
// tofu-run loads libtofu_cuda_run.so (built next to it where CMake finds the
// CUDA toolkit, cuBLAS and cuDNN) with dlopen only for --backend cuda, so
// that the CUDA libraries are not loaded on every start. The plugin's entry
// point `tofuCudaBackend` returns the CUDA executor as a TrainingBackend,
// which tofu-run's one step loop drives as it drives the CPU backend. Both
// sides are built by the same compiler from the same tree, so C++ types
// cross the boundary.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDARUNPLUGIN_H
#define TOFU_RUNTIME_CUDA_CUDARUNPLUGIN_H

#include "tofu/runtime/Plan.h"
#include "tofu/runtime/TrainingBackend.h"
#include "tofu/runtime/Transport.h"

#include <cstdint>
#include <memory>
#include <string>

namespace tofu::cuda {

/// The tofu-run options the CUDA backend takes.
struct CudaBackendOptions {
  int32_t devices = 0; ///< --devices (0 = one GPU per plan device)
  bool useGraph = true; ///< not --no-cuda-graph
  bool listCalls = false; ///< --kernels native: print the calls per op
  /// Under mpirun/torchrun: the process group's transport (one process per
  /// GPU, NCCL between them, CudaNccl.h); null for one process.
  runtime::Transport *transport = nullptr;
  double ncclTimeout = 300; ///< --nccl-timeout
};

/// The plugin's entry point: 0 with `backend` set (not yet initialized), or
/// non-zero with `error` set (one line). `plan` must outlive the backend.
using CudaBackendFn =
    int (*)(const plan::Plan &plan, const CudaBackendOptions &options,
            std::unique_ptr<runtime::TrainingBackend> &backend,
            std::string &error);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDARUNPLUGIN_H
