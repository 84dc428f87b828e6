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
#include "CudaGpuTestSupport.h"
#include "TestSupport.h"
#include "tofu/runtime/Kernels.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <random>

using namespace tofu;
using tofu::plan::Attr;
using tofu::test::DeviceArray;
using tofu::test::floatAttr;
using tofu::test::randomFloats;

namespace {

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

class CudaElementwise : public ::testing::TestWithParam<size_t> {};

TEST_P(CudaElementwise, ReluMatchesCpu) {
  size_t n = GetParam();
  auto x = randomFloats(n, 1);
  DeviceArray dx(x), dy(n);
  ASSERT_EQ(cuda::relu(dx.get(), dy.get(), n), "");
  EXPECT_EQ(dy.toHost(), cpuKernel("Relu", {x}, {}));
}

TEST_P(CudaElementwise, ReluGradMatchesCpu) {
  size_t n = GetParam();
  auto g = randomFloats(n, 2), x = randomFloats(n, 3);
  DeviceArray dg(g), dx(x), out(n);
  ASSERT_EQ(cuda::reluGrad(dg.get(), dx.get(), out.get(), n), "");
  EXPECT_EQ(out.toHost(), cpuKernel("ReluGrad", {g, x}, {}));
}

TEST_P(CudaElementwise, SGDUpdateMatchesCpu) {
  size_t n = GetParam();
  auto w = randomFloats(n, 4), g = randomFloats(n, 5);
  DeviceArray dw(w), dg(g), out(n);
  ASSERT_EQ(cuda::sgdUpdate(dw.get(), dg.get(), 0.05f, out.get(), n), "");
  EXPECT_EQ(out.toHost(),
            cpuKernel("SGDUpdate", {w, g}, {floatAttr("lr", 0.05f)}));
}

TEST_P(CudaElementwise, AddMatchesCpu) {
  size_t n = GetParam();
  auto a = randomFloats(n, 6), b = randomFloats(n, 7);
  DeviceArray da(a), db(b), out(n);
  ASSERT_EQ(cuda::add(da.get(), db.get(), out.get(), n), "");
  EXPECT_EQ(out.toHost(), cpuKernel("Add", {a, b}, {}));
}

TEST_P(CudaElementwise, ScaleMatchesCpu) {
  size_t n = GetParam();
  auto x = randomFloats(n, 8);
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
  return tofu::test::runGpuTests(argc, argv, "the CUDA kernel tests");
}
