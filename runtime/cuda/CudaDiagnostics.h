//===- CudaDiagnostics.h - Messages of the CUDA backend ---------*- C++ -*-===//
//
// The checks and messages of issue 7 §4 that need no GPU to decide: whether
// a device can run a plan's CUDA kernels, and what an out-of-memory error
// says. Plain C++ (built and unit-tested on machines without CUDA); the CUDA
// executor calls them with what the driver reports.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDADIAGNOSTICS_H
#define TOFU_RUNTIME_CUDA_CUDADIAGNOSTICS_H

#include <cstdint>
#include <string>

namespace tofu::cuda {

/// Empty when device `deviceIndex` (`deviceName`, compute capability
/// `major`.`minor`) can run kernels compiled for `planArch` (e.g. "sm_90",
/// see plan::cudaArchRunsOn); otherwise a message naming both architectures
/// and the tofuc flag that fixes it.
std::string checkPlanArchitecture(const std::string &planArch, int deviceIndex,
                                  const std::string &deviceName, int major,
                                  int minor);

/// The out-of-memory message: the device, the bytes the plan asks for on it,
/// the bytes free (of the total), and the fix (compile for more devices
/// than the plan's `planDevices`).
std::string outOfMemoryMessage(int deviceIndex, const std::string &deviceName,
                               uint64_t requestedBytes, uint64_t freeBytes,
                               uint64_t totalBytes, uint32_t planDevices);

/// "12.0 GiB (12884901888 bytes)": bytes with a binary unit.
std::string formatBytes(uint64_t bytes);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDADIAGNOSTICS_H
