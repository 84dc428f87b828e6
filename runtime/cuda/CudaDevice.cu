//===- CudaDevice.cu - CUDA device discovery ------------------------------===//

#include "CudaDevice.h"

#include <cuda_runtime_api.h>

bool tofu::cuda::queryDevices(std::vector<DeviceInfo> &devices,
                              std::string &why) {
  devices.clear();
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
      err == cudaErrorInitializationError ||
      err == cudaErrorCompatNotSupportedOnDevice) {
    why = std::string("no usable CUDA device: ") + cudaGetErrorString(err);
    cudaGetLastError(); // clear the sticky-free error state
    return true;
  }
  if (err != cudaSuccess) {
    why = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(err);
    cudaGetLastError();
    return false;
  }
  if (count == 0) {
    why = "no CUDA device";
    return true;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if ((err = cudaGetDeviceProperties(&prop, i)) != cudaSuccess) {
      why = "cudaGetDeviceProperties(" + std::to_string(i) +
            ") failed: " + cudaGetErrorString(err);
      return false;
    }
    DeviceInfo info;
    info.index = i;
    info.name = prop.name;
    info.computeMajor = prop.major;
    info.computeMinor = prop.minor;
    info.totalMemory = prop.totalGlobalMem;
    info.multiprocessors = prop.multiProcessorCount;
    devices.push_back(info);
  }
  return true;
}
