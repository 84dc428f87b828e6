//===- CudaRunPlugin.h - tofu-run's --backend cuda, as a plugin --*- C++ -*-===//
//
// tofu-run loads libtofu_cuda_run.so (built next to it where CMake finds the
// CUDA toolkit, cuBLAS and cuDNN) with dlopen only for --backend cuda, so
// that the CUDA libraries are not loaded on every start. The plugin's entry
// point `tofuCudaRun` runs the steps with CudaExecutor and prints what
// tofu-run prints for the CPU backend. Both sides are built by the same
// compiler from the same tree, so C++ types cross the boundary.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDARUNPLUGIN_H
#define TOFU_RUNTIME_CUDA_CUDARUNPLUGIN_H

#include "tofu/runtime/Plan.h"

#include <cstdint>
#include <string>

namespace tofu::cuda {

/// What tofu-run passes to the plugin.
struct CudaRunRequest {
  const plan::Plan *plan = nullptr;
  std::string planPath;
  int32_t devices = 0; ///< --devices (0 = one GPU per plan device)
  bool useGraph = true;
  int64_t steps = 10, startStep = 0;
  bool quiet = false;
  std::string reportPath, dataDir;
};

/// The plugin's entry point: 0, or non-zero with `error` set (one line).
using CudaRunFn = int (*)(const CudaRunRequest &request, std::string &error);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDARUNPLUGIN_H
