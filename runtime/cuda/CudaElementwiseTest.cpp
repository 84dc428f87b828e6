//===- CudaElementwiseTest.cpp - CUDA element-wise kernels vs CPU kernels -===//
//
// Runs every CUDA element-wise kernel on random inputs and compares the
// result with the CPU kernel of the same name. Exits with 77 (ctest: skipped)
// when no CUDA device is present, so a machine without a GPU never reports
// these as passed.
//
//===----------------------------------------------------------------------===//

#include "CudaDevice.h"
#include "CudaElementwise.h"
#include "tofu/runtime/Kernels.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <random>

using namespace tofu;
using tofu::plan::Attr;

namespace {

/// A device copy of a host vector, freed on destruction.
class DeviceArray {
public:
  explicit DeviceArray(const std::vector<float> &host) : n(host.size()) {
    EXPECT_EQ(cudaMalloc(&ptr, n * sizeof(float) + 1), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ptr, host.data(), n * sizeof(float),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  explicit DeviceArray(size_t n) : n(n) {
    EXPECT_EQ(cudaMalloc(&ptr, n * sizeof(float) + 1), cudaSuccess);
  }
  ~DeviceArray() { cudaFree(ptr); }
  float *get() const { return static_cast<float *>(ptr); }
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

std::vector<float> randomVector(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

/// Runs CPU kernel `name` on host copies of `inputs`.
std::vector<float> cpuKernel(const std::string &name,
                             std::vector<std::vector<float>> inputs,
                             const std::vector<Attr> &attrs) {
  runtime::KernelFn fn = runtime::lookupKernel(name);
  EXPECT_NE(fn, nullptr) << name;
  size_t n = inputs[0].size();
  std::vector<float> out(n);
  runtime::KernelArgs args;
  args.attrs = &attrs;
  auto view = [&](float *p) {
    runtime::TensorView v;
    v.data = p;
    v.shape = {static_cast<int64_t>(n)};
    v.lo = {0};
    v.globalShape = v.shape;
    return v;
  };
  for (auto &in : inputs)
    args.inputs.push_back(view(in.data()));
  args.outputs.push_back(view(out.data()));
  EXPECT_EQ(fn(args), "");
  return out;
}

Attr floatAttr(const char *name, double v) {
  Attr a;
  a.name = name;
  a.kind = Attr::Kind::Float;
  a.f = v;
  return a;
}

class CudaElementwise : public ::testing::TestWithParam<size_t> {};

TEST_P(CudaElementwise, ReluMatchesCpu) {
  size_t n = GetParam();
  auto x = randomVector(n, 1);
  DeviceArray dx(x), dy(n);
  ASSERT_EQ(cuda::relu(dx.get(), dy.get(), n), "");
  EXPECT_EQ(dy.toHost(), cpuKernel("Relu", {x}, {}));
}

TEST_P(CudaElementwise, ReluGradMatchesCpu) {
  size_t n = GetParam();
  auto g = randomVector(n, 2), x = randomVector(n, 3);
  DeviceArray dg(g), dx(x), out(n);
  ASSERT_EQ(cuda::reluGrad(dg.get(), dx.get(), out.get(), n), "");
  EXPECT_EQ(out.toHost(), cpuKernel("ReluGrad", {g, x}, {}));
}

TEST_P(CudaElementwise, SGDUpdateMatchesCpu) {
  size_t n = GetParam();
  auto w = randomVector(n, 4), g = randomVector(n, 5);
  DeviceArray dw(w), dg(g), out(n);
  ASSERT_EQ(cuda::sgdUpdate(dw.get(), dg.get(), 0.05f, out.get(), n), "");
  EXPECT_EQ(out.toHost(),
            cpuKernel("SGDUpdate", {w, g}, {floatAttr("lr", 0.05f)}));
}

TEST_P(CudaElementwise, AddMatchesCpu) {
  size_t n = GetParam();
  auto a = randomVector(n, 6), b = randomVector(n, 7);
  DeviceArray da(a), db(b), out(n);
  ASSERT_EQ(cuda::add(da.get(), db.get(), out.get(), n), "");
  EXPECT_EQ(out.toHost(), cpuKernel("Add", {a, b}, {}));
}

TEST_P(CudaElementwise, ScaleMatchesCpu) {
  size_t n = GetParam();
  auto x = randomVector(n, 8);
  DeviceArray dx(x), out(n);
  ASSERT_EQ(cuda::scale(dx.get(), -0.75f, out.get(), n), "");
  EXPECT_EQ(out.toHost(), cpuKernel("Scale", {x}, {floatAttr("alpha", -0.75)}));
}

INSTANTIATE_TEST_SUITE_P(Sizes, CudaElementwise,
                         ::testing::Values(1, 255, 256, 257, 100003,
                                           (1 << 21) + 7));

TEST(CudaDevice, QueryListsDevices) {
  std::vector<cuda::DeviceInfo> devices;
  std::string why;
  ASSERT_TRUE(cuda::queryDevices(devices, why)) << why;
  ASSERT_FALSE(devices.empty());
  for (const auto &d : devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.totalMemory, 0u);
    EXPECT_GT(d.multiprocessors, 0);
  }
}

} // namespace

int main(int argc, char **argv) {
  std::vector<cuda::DeviceInfo> devices;
  std::string why;
  if (!cuda::queryDevices(devices, why)) {
    std::fprintf(stderr, "error: %s\n", why.c_str());
    return 1;
  }
  if (devices.empty()) {
    std::printf("SKIPPED: %s; the CUDA kernel tests need a GPU\n",
                why.c_str());
    return 77;
  }
  std::printf("running on %s (sm_%d%d)\n", devices[0].name.c_str(),
              devices[0].computeMajor, devices[0].computeMinor);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
