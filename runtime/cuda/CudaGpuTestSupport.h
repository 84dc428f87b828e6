//===- CudaGpuTestSupport.h - Shared parts of the GPU tests -----*- C++ -*-===//
//
// Device arrays and the main() of the GPU tests that compare CUDA code with
// the CPU kernels (CudaElementwiseTest, CudaLibraryTest): exit 77, which
// ctest reports as skipped, where no GPU is visible.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDAGPUTESTSUPPORT_H
#define TOFU_RUNTIME_CUDA_CUDAGPUTESTSUPPORT_H

#include "CudaDevice.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

namespace tofu::test {

/// A device array of floats (a copy of a host vector, or uninitialized),
/// freed on destruction. A few bytes more are allocated than asked, so an
/// empty array still has an address.
class DeviceArray {
public:
  explicit DeviceArray(const std::vector<float> &host) : n(host.size()) {
    EXPECT_EQ(cudaMalloc(&ptr, n * sizeof(float) + 4), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ptr, host.data(), n * sizeof(float),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  explicit DeviceArray(size_t n) : n(n) {
    EXPECT_EQ(cudaMalloc(&ptr, n * sizeof(float) + 4), cudaSuccess);
  }
  DeviceArray(const DeviceArray &) = delete;
  DeviceArray &operator=(const DeviceArray &) = delete;
  ~DeviceArray() { cudaFree(ptr); }

  float *get() const { return static_cast<float *>(ptr); }
  /// Waits for the device, then copies the array back.
  std::vector<float> toHost() const {
    std::vector<float> h(n);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(h.data(), ptr, n * sizeof(float),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    return h;
  }

private:
  void *ptr = nullptr;
  size_t n;
};

/// The main() of a GPU test: runs the tests on the first GPU, or prints
/// "SKIPPED: ..., `what` needs a GPU" and returns 77 where there is none.
inline int runGpuTests(int argc, char **argv, const char *what) {
  std::vector<cuda::DeviceInfo> devices;
  std::string why;
  if (!cuda::queryDevices(devices, why)) {
    std::fprintf(stderr, "error: %s\n", why.c_str());
    return 1;
  }
  if (devices.empty()) {
    std::printf("SKIPPED: %s; %s need a GPU\n", why.c_str(), what);
    return 77;
  }
  std::printf("running on %s (sm_%d%d)\n", devices[0].name.c_str(),
              devices[0].computeMajor, devices[0].computeMinor);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

} // namespace tofu::test

#endif // TOFU_RUNTIME_CUDA_CUDAGPUTESTSUPPORT_H
