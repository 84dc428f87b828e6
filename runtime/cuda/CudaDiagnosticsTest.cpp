//===- CudaDiagnosticsTest.cpp - architecture check, OOM message ----------===//
//
// Runs on every machine (no GPU): the decisions and messages the CUDA
// executor will report with what the driver says, and which variant of a
// generated kernel it launches (CudaKernelLaunch.h).
//
//===----------------------------------------------------------------------===//
#include "CudaDiagnostics.h"
#include "CudaKernelLaunch.h"

#include "tofu/runtime/CudaArch.h"

#include <gtest/gtest.h>

using namespace tofu;

namespace {

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

TEST(CudaArch, Parses) {
  plan::CudaArch a;
  ASSERT_TRUE(plan::parseCudaArch("sm_90", a));
  EXPECT_EQ(a.major, 9);
  EXPECT_EQ(a.minor, 0);
  EXPECT_EQ(a.suffix, 0);
  ASSERT_TRUE(plan::parseCudaArch("sm_90a", a));
  EXPECT_EQ(a.suffix, 'a');
  ASSERT_TRUE(plan::parseCudaArch("sm_120", a));
  EXPECT_EQ(a.major, 12);
  EXPECT_EQ(a.minor, 0);
  ASSERT_TRUE(plan::parseCudaArch("sm_86", a));
  EXPECT_EQ(a.major, 8);
  EXPECT_EQ(a.minor, 6);
  for (const char *bad : {"", "sm_", "sm_9", "sm90", "compute_90", "sm_9x0",
                          "sm_05", "sm_90b", "sm_12345"})
    EXPECT_FALSE(plan::parseCudaArch(bad, a)) << bad;
}

TEST(CudaArch, SassCompatibility) {
  plan::CudaArch sm80{8, 0, 0}, sm86{8, 6, 0}, sm90a{9, 0, 'a'};
  EXPECT_TRUE(plan::cudaArchRunsOn(sm80, 8, 0));
  EXPECT_TRUE(plan::cudaArchRunsOn(sm80, 8, 9));  // later minor
  EXPECT_FALSE(plan::cudaArchRunsOn(sm86, 8, 0)); // earlier minor
  EXPECT_FALSE(plan::cudaArchRunsOn(sm80, 9, 0)); // other major
  EXPECT_TRUE(plan::cudaArchRunsOn(sm90a, 9, 0));
  EXPECT_FALSE(plan::cudaArchRunsOn(sm90a, 9, 1)); // 'a' is exact
}

TEST(CudaDiagnostics, RefusesAnotherArchitectureNamingBoth) {
  EXPECT_EQ(cuda::checkPlanArchitecture("sm_90", 0, "NVIDIA H100", 9, 0), "");
  EXPECT_EQ(cuda::checkPlanArchitecture("sm_80", 1, "NVIDIA A10", 8, 6), "");
  std::string err =
      cuda::checkPlanArchitecture("sm_90", 3, "NVIDIA A100-SXM4-80GB", 8, 0);
  EXPECT_TRUE(contains(err, "device 3 (NVIDIA A100-SXM4-80GB)")) << err;
  EXPECT_TRUE(contains(err, "compiled for sm_90")) << err;
  EXPECT_TRUE(contains(err, "the device is sm_80")) << err;
  EXPECT_TRUE(contains(err, "tofuc --cuda-arch sm_80")) << err;
  err = cuda::checkPlanArchitecture("sm_90a", 0, "GH200", 9, 1);
  EXPECT_TRUE(contains(err, "exact compute capability")) << err;
  err = cuda::checkPlanArchitecture("garbage", 0, "X", 9, 0);
  EXPECT_TRUE(contains(err, "'garbage'")) << err;
}

TEST(CudaDiagnostics, OutOfMemoryNamesDeviceBytesAndFix) {
  std::string msg = cuda::outOfMemoryMessage(
      2, "NVIDIA H100 80GB HBM3", 12884901888ull, 1073741824ull,
      85899345920ull, 8);
  EXPECT_TRUE(contains(msg, "device 2 (NVIDIA H100 80GB HBM3)")) << msg;
  EXPECT_TRUE(contains(msg, "needs 12.0 GiB (12884901888 bytes)")) << msg;
  EXPECT_TRUE(contains(msg, "only 1.0 GiB (1073741824 bytes)")) << msg;
  EXPECT_TRUE(contains(msg, "of 80.0 GiB")) << msg;
  EXPECT_TRUE(contains(msg, "--gpus 16; this plan has 8")) << msg;
  EXPECT_EQ(cuda::formatBytes(512), "512 bytes");
  EXPECT_EQ(cuda::formatBytes(1536), "1.5 KiB (1536 bytes)");
}

/// The variant and grid of a generated kernel's launch on 132 SMs.
TEST(CudaKernelLaunch, PicksTheVariantByShape) {
  using cuda::KernelLaunchConfig;
  plan::CudaKernel k;
  plan::CudaLaunch l;
  // Element-wise: one thread per element, 256 a block, grid capped.
  k.kind = "elementwise";
  l.numElements = 1000;
  auto c = cuda::kernelLaunchConfig(k, l, 132);
  EXPECT_EQ(c.variant, KernelLaunchConfig::Variant::Element);
  EXPECT_EQ(c.threads, 256);
  EXPECT_EQ(c.grid, 4);
  l.numElements = int64_t(1) << 30;
  EXPECT_EQ(cuda::kernelLaunchConfig(k, l, 132).grid, 132 * 32);
  // A row-reduction (the row count is the last parameter): LayerNorm of
  // 1024 rows of 512 runs one block per row.
  k.kind = "row-reduction";
  l.numElements = 1024 * 512;
  l.params = {l.numElements, 0, 0, 1024};
  c = cuda::kernelLaunchConfig(k, l, 132);
  EXPECT_EQ(c.variant, KernelLaunchConfig::Variant::Row);
  EXPECT_EQ(c.threads, 256);
  EXPECT_EQ(c.grid, 1024);
  EXPECT_STREQ(cuda::variantSuffix(c.variant), "_row");
  // Rows of 128 elements (LayerNorm of hidden 128) take a warp each, 8
  // rows a block; 129 a block; without the warp entry point a block too.
  l.numElements = 1000 * 128;
  l.params.back() = 1000;
  c = cuda::kernelLaunchConfig(k, l, 132);
  EXPECT_EQ(c.variant, KernelLaunchConfig::Variant::RowWarp);
  EXPECT_EQ(c.threads, 256);
  EXPECT_EQ(c.grid, 125);
  EXPECT_STREQ(cuda::variantSuffix(c.variant), "_rowwarp");
  EXPECT_EQ(cuda::kernelLaunchConfig(k, l, 132, /*warpRows=*/false).variant,
            KernelLaunchConfig::Variant::Row);
  l.numElements = 1000 * 129;
  EXPECT_EQ(cuda::kernelLaunchConfig(k, l, 132).variant,
            KernelLaunchConfig::Variant::Row);
  l.numElements = 1024 * 512;
  l.params.back() = 1024;
  // Rows of one element: a block each only while few (InvStdDev of 1024
  // rows), else one thread per element.
  l.numElements = 1024;
  l.params.back() = 1024;
  EXPECT_EQ(cuda::kernelLaunchConfig(k, l, 132).variant,
            KernelLaunchConfig::Variant::Row);
  l.numElements = 100000;
  l.params.back() = 100000;
  c = cuda::kernelLaunchConfig(k, l, 132);
  EXPECT_EQ(c.variant, KernelLaunchConfig::Variant::Element);
  EXPECT_EQ(c.grid, (100000 + 255) / 256);
  // No rows (an empty share): nothing to share, the element kernel.
  l.numElements = 0;
  l.params.back() = 0;
  c = cuda::kernelLaunchConfig(k, l, 132);
  EXPECT_EQ(c.variant, KernelLaunchConfig::Variant::Element);
  EXPECT_EQ(c.grid, 1);
  // A block-reduction: a block per element only for few elements.
  k.kind = "block-reduction";
  l.params = {1};
  l.numElements = 1;
  c = cuda::kernelLaunchConfig(k, l, 132);
  EXPECT_EQ(c.variant, KernelLaunchConfig::Variant::Block);
  EXPECT_EQ(c.grid, 1);
  EXPECT_STREQ(cuda::variantSuffix(c.variant), "_block");
  l.numElements = 132 * 64 + 1;
  EXPECT_EQ(cuda::kernelLaunchConfig(k, l, 132).variant,
            KernelLaunchConfig::Variant::Element);
  // With `<name>_grid` in the plan: kGridParts blocks an element for at
  // most kGridMaxElements elements (a loss), grid-strided past the cap.
  l.numElements = 1;
  c = cuda::kernelLaunchConfig(k, l, 132, true, /*gridEntry=*/true);
  EXPECT_EQ(c.variant, KernelLaunchConfig::Variant::Grid);
  EXPECT_EQ(c.grid, cuda::kGridParts);
  EXPECT_EQ(c.threads, 256);
  EXPECT_STREQ(cuda::variantSuffix(c.variant), "_grid");
  l.numElements = cuda::kGridMaxElements;
  c = cuda::kernelLaunchConfig(k, l, 4, true, /*gridEntry=*/true);
  EXPECT_EQ(c.variant, KernelLaunchConfig::Variant::Grid);
  EXPECT_EQ(c.grid, 4 * 32);
  l.numElements = cuda::kGridMaxElements + 1;
  EXPECT_EQ(cuda::kernelLaunchConfig(k, l, 132, true, true).variant,
            KernelLaunchConfig::Variant::Block);
  l.numElements = 0;
  EXPECT_NE(cuda::kernelLaunchConfig(k, l, 132, true, true).variant,
            KernelLaunchConfig::Variant::Grid);
  EXPECT_EQ(cuda::gridScratchBytes(2), 2u * (256 * 8 + 4));
}

} // namespace
