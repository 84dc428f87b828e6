//===- CudaDevice.h - CUDA device discovery ----------------------*- C++ -*-===//
#ifndef TOFU_RUNTIME_CUDA_CUDADEVICE_H
#define TOFU_RUNTIME_CUDA_CUDADEVICE_H

#include <cstddef>
#include <string>
#include <vector>

namespace tofu::cuda {

/// What the CUDA runtime reports about one device.
struct DeviceInfo {
  int index = 0;
  std::string name;
  int computeMajor = 0, computeMinor = 0;
  size_t totalMemory = 0;
  int multiprocessors = 0;
};

/// Lists the visible CUDA devices. An absent driver or no device is not an
/// error: `devices` is left empty and `why` says why. Returns false only on
/// an unexpected CUDA runtime failure (message in `why`).
bool queryDevices(std::vector<DeviceInfo> &devices, std::string &why);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDADEVICE_H
