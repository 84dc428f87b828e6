//===- CudaDiagnostics.cpp - Messages of the CUDA backend -----------------===//
#include "CudaDiagnostics.h"

#include "tofu/runtime/CudaArch.h"

#include <cstdio>

using namespace tofu;

std::string tofu::cuda::formatBytes(uint64_t bytes) {
  const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char buf[96];
  if (unit == 0)
    std::snprintf(buf, sizeof(buf), "%llu bytes",
                  static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof(buf), "%.1f %s (%llu bytes)", value,
                  units[unit], static_cast<unsigned long long>(bytes));
  return buf;
}

std::string tofu::cuda::checkPlanArchitecture(const std::string &planArch,
                                              int deviceIndex,
                                              const std::string &deviceName,
                                              int major, int minor) {
  std::string device = "device " + std::to_string(deviceIndex) + " (" +
                       deviceName + ")";
  std::string deviceArch =
      "sm_" + std::to_string(major) + std::to_string(minor);
  plan::CudaArch arch;
  if (!plan::parseCudaArch(planArch, arch))
    return "the plan's CUDA kernels name the architecture '" + planArch +
           "', which is not sm_<major><minor>; recompile the plan with "
           "tofuc --cuda-arch " + deviceArch;
  if (plan::cudaArchRunsOn(arch, major, minor))
    return "";
  std::string why =
      arch.suffix == 'a'
          ? "architecture-specific code (" + planArch +
                ") runs only on that exact compute capability"
          : "a cubin runs only on the same major compute capability with an "
            "equal or later minor";
  return device + " cannot run this plan: its CUDA kernels were compiled "
         "for " + planArch + " (compute capability " +
         std::to_string(arch.major) + "." + std::to_string(arch.minor) +
         ") but the device is " + deviceArch + " (compute capability " +
         std::to_string(major) + "." + std::to_string(minor) + "); " + why +
         ". Recompile the plan with tofuc --cuda-arch " + deviceArch;
}

std::string tofu::cuda::outOfMemoryMessage(int deviceIndex,
                                           const std::string &deviceName,
                                           uint64_t requestedBytes,
                                           uint64_t freeBytes,
                                           uint64_t totalBytes,
                                           uint32_t planDevices) {
  return "out of memory on device " + std::to_string(deviceIndex) + " (" +
         deviceName + "): the plan needs " + formatBytes(requestedBytes) +
         " there but only " + formatBytes(freeBytes) + " of " +
         formatBytes(totalBytes) +
         " are free; free the GPU of other processes, or recompile the model "
         "for more devices (tofuc --gpus " +
         std::to_string(planDevices * 2) + "; this plan has " +
         std::to_string(planDevices) + ") so that each holds less";
}
