//===- DeviceModelTest.cpp - device descriptions ---------------------------===//
//
// tofu/Transforms/DeviceModel.h: the built-in descriptions parse and carry
// their datasheet numbers, a description round-trips, and every malformed
// field is a one-line error that names it.
//
//===----------------------------------------------------------------------===//
#include "tofu/Transforms/DeviceModel.h"
#include "tofu/Transforms/StepTimeModel.h"

#include <gtest/gtest.h>

using namespace tofu;

namespace {

/// A minimal valid description with `extra` spliced into the root object.
std::string minimal(const std::string &extra = "",
                    const std::string &compute =
                        R"("f32": {"gemm": {"peak_flops": 1e12, "efficiency": 0.5},
                                   "vector": {"peak_flops": 1e11}})",
                    const std::string &links =
                        R"([{"name": "pcie", "gbps": 10, "latency_seconds": 1e-5}])") {
  return R"({"format": "tofu-device/1", "name": "t", "compute": {)" + compute +
         R"(}, "memory": {"bytes": 1024, "bytes_per_second": 2e9, "efficiency": 0.5},
            "launch_seconds": 1e-6, "gemm_half_extent": 16, "links": )" +
         links + extra + "}";
}

/// The error of parsing `json` (fails the test when it parses).
std::string errorOf(const std::string &json) {
  auto model = parseDeviceDescription(json, "t.json");
  if (model) {
    ADD_FAILURE() << "parsed: " << json;
    return "";
  }
  std::string message = llvm::toString(model.takeError());
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  return message;
}

TEST(DeviceModel, BuiltinsParseWithSources) {
  for (const std::string &name : DeviceModel::builtinNames()) {
    auto model = DeviceModel::builtin(name);
    ASSERT_TRUE(model) << name;
    EXPECT_EQ(model->name, name);
    EXPECT_FALSE(model->sources.empty()) << name;
    EXPECT_GT(model->memoryBytes, 0u) << name;
    EXPECT_FALSE(model->links.empty()) << name;
  }
  EXPECT_FALSE(DeviceModel::builtin("tpu"));
  EXPECT_EQ(DeviceModel::builtinNames(),
            (std::vector<std::string>{"cpu", "k80", "v100", "a100", "h100"}));
}

TEST(DeviceModel, K80IsThePapersTestbed) {
  DeviceModel k80 = *DeviceModel::builtin("k80");
  // 12 GB per GPU, PCIe peer-to-peer 21 GB/s (Tofu paper, section 7).
  EXPECT_EQ(k80.memoryBytes, 12ull << 30);
  ASSERT_TRUE(k80.linkNamed("pcie"));
  EXPECT_DOUBLE_EQ(k80.linkNamed("pcie")->gbps, 21);
  // Half a board's 8.73 TFLOP/s FP32 peak.
  EXPECT_DOUBLE_EQ(k80.ratesOf(tdl::ElemType::F32)->gemm.peakFlops, 4.37e12);
  // No bf16 entry: float32's rates.
  EXPECT_EQ(k80.ratesOf(tdl::ElemType::BF16)->dtype, tdl::ElemType::F32);
}

TEST(DeviceModel, PartitionerRatesAreUnchanged) {
  // The time objective's plans depend on these: they must stay what they
  // were before device descriptions existed (docs/Partitioning.md).
  DeviceModel cpu = DeviceModel::genericCpu();
  EXPECT_DOUBLE_EQ(cpu.gemmFlopsPerSecond, 70e9);
  EXPECT_DOUBLE_EQ(cpu.vectorFlopsPerSecond, 8e9);
  EXPECT_DOUBLE_EQ(cpu.memoryBytesPerSecond, 10e9);
  EXPECT_DOUBLE_EQ(cpu.launchSeconds, 5e-6);
  EXPECT_DOUBLE_EQ(cpu.gemmHalfExtent, 32);
  EXPECT_DOUBLE_EQ(cpu.messageLatencySeconds, 2e-6);
  EXPECT_TRUE(cpu.sharedHost);
  DeviceModel h100 = DeviceModel::h100();
  EXPECT_NEAR(h100.gemmFlopsPerSecond, 54e12, 1e3);
  EXPECT_NEAR(h100.vectorFlopsPerSecond, 30e12, 1e3);
  EXPECT_NEAR(h100.memoryBytesPerSecond, 3.0e12, 1e3);
  EXPECT_DOUBLE_EQ(h100.messageLatencySeconds, 10e-6);
  EXPECT_FALSE(h100.sharedHost);
}

TEST(DeviceModel, ParsesAndRoundTrips) {
  auto model = parseDeviceDescription(minimal(), "t.json");
  ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
  EXPECT_DOUBLE_EQ(model->gemmFlopsPerSecond, 0.5e12);
  EXPECT_DOUBLE_EQ(model->vectorFlopsPerSecond, 1e11);
  // conv defaults to the GEMM rate; memory is peak x efficiency.
  EXPECT_DOUBLE_EQ(model->compute[0].conv.sustained(), 0.5e12);
  EXPECT_DOUBLE_EQ(model->memoryBytesPerSecond, 1e9);
  EXPECT_EQ(model->memoryBytes, 1024u);
  EXPECT_DOUBLE_EQ(model->messageLatencySeconds, 1e-5);
  EXPECT_FALSE(model->sharedHost);
  auto again =
      parseDeviceDescription(formatDeviceDescription(*model), "again.json");
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
  EXPECT_EQ(formatDeviceDescription(*again), formatDeviceDescription(*model));
  for (const std::string &name : DeviceModel::builtinNames()) {
    DeviceModel builtin = *DeviceModel::builtin(name);
    auto copy =
        parseDeviceDescription(formatDeviceDescription(builtin), name);
    ASSERT_TRUE(bool(copy)) << llvm::toString(copy.takeError());
    EXPECT_DOUBLE_EQ(copy->gemmFlopsPerSecond, builtin.gemmFlopsPerSecond);
    EXPECT_DOUBLE_EQ(copy->memoryBytesPerSecond,
                     builtin.memoryBytesPerSecond);
    EXPECT_EQ(copy->memoryBytes, builtin.memoryBytes);
    EXPECT_EQ(copy->sharedHost, builtin.sharedHost);
  }
}

TEST(DeviceModel, StepOverheadAndFeedAreOptional) {
  auto has = [](const std::string &message, const std::string &part) {
    EXPECT_NE(message.find(part), std::string::npos)
        << "'" << message << "' lacks '" << part << "'";
  };
  // Absent (a description written before they existed): 0, and the
  // description round-trips without them.
  auto old = parseDeviceDescription(minimal(), "t.json");
  ASSERT_TRUE(bool(old)) << llvm::toString(old.takeError());
  EXPECT_EQ(old->stepOverheadSeconds, 0);
  EXPECT_EQ(old->feedSecondsPerElement, 0);
  EXPECT_EQ(formatDeviceDescription(*old).find("feed_seconds_per_element"),
            std::string::npos);
  auto model = parseDeviceDescription(
      minimal(R"(, "step_overhead_seconds": 2e-5, "feed_seconds_per_element": 1.5e-8)"),
      "t.json");
  ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
  EXPECT_DOUBLE_EQ(model->stepOverheadSeconds, 2e-5);
  EXPECT_DOUBLE_EQ(model->feedSecondsPerElement, 1.5e-8);
  auto again =
      parseDeviceDescription(formatDeviceDescription(*model), "again.json");
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
  EXPECT_DOUBLE_EQ(again->stepOverheadSeconds, 2e-5);
  EXPECT_DOUBLE_EQ(again->feedSecondsPerElement, 1.5e-8);
  // A cache level: both fields or neither.
  auto cached = parseDeviceDescription(
      R"({"format": "tofu-device/1", "name": "t", "compute": {"f32": {"gemm": {"peak_flops": 1}, "vector": {"peak_flops": 1}}}, "memory": {"bytes_per_second": 1e9, "cache_bytes": 1048576, "cache_bytes_per_second": 5e10}, "launch_seconds": 1e-6, "gemm_half_extent": 16, "links": [{"name": "a", "gbps": 1, "latency_seconds": 1e-6}]})",
      "t.json");
  ASSERT_TRUE(bool(cached)) << llvm::toString(cached.takeError());
  EXPECT_DOUBLE_EQ(cached->cacheBytes, 1048576);
  EXPECT_DOUBLE_EQ(cached->cacheBytesPerSecond, 5e10);
  auto cachedAgain =
      parseDeviceDescription(formatDeviceDescription(*cached), "again.json");
  ASSERT_TRUE(bool(cachedAgain)) << llvm::toString(cachedAgain.takeError());
  EXPECT_DOUBLE_EQ(cachedAgain->cacheBytesPerSecond, 5e10);
  EXPECT_EQ(old->cacheBytes, 0);
  has(errorOf(R"({"format": "tofu-device/1", "name": "t", "compute": {"f32": {"gemm": {"peak_flops": 1}, "vector": {"peak_flops": 1}}}, "memory": {"bytes_per_second": 1e9, "cache_bytes": 1048576}, "launch_seconds": 1e-6, "gemm_half_extent": 16, "links": [{"name": "a", "gbps": 1, "latency_seconds": 1e-6}]})"),
      "memory.cache_bytes_per_second: missing");
  // An inner cache level inside it: smaller, faster, round-tripped.
  const std::string twoLevels =
      R"({"format": "tofu-device/1", "name": "t", "compute": {"f32": {"gemm": {"peak_flops": 1}, "vector": {"peak_flops": 1}}}, "memory": {"bytes_per_second": 1e9, "cache_bytes": 1048576, "cache_bytes_per_second": 5e10, "inner_cache_bytes": 65536, "inner_cache_bytes_per_second": INNER}, "launch_seconds": 1e-6, "gemm_half_extent": 16, "links": [{"name": "a", "gbps": 1, "latency_seconds": 1e-6}]})";
  auto withInner = [&](const char *rate) {
    std::string text = twoLevels;
    text.replace(text.find("INNER"), 5, rate);
    return text;
  };
  auto inner = parseDeviceDescription(withInner("9e10"), "t.json");
  ASSERT_TRUE(bool(inner)) << llvm::toString(inner.takeError());
  EXPECT_DOUBLE_EQ(inner->innerCacheBytes, 65536);
  EXPECT_DOUBLE_EQ(inner->innerCacheBytesPerSecond, 9e10);
  auto innerAgain =
      parseDeviceDescription(formatDeviceDescription(*inner), "again.json");
  ASSERT_TRUE(bool(innerAgain)) << llvm::toString(innerAgain.takeError());
  EXPECT_DOUBLE_EQ(innerAgain->innerCacheBytes, 65536);
  EXPECT_DOUBLE_EQ(innerAgain->innerCacheBytesPerSecond, 9e10);
  EXPECT_EQ(cached->innerCacheBytes, 0);
  has(errorOf(withInner("1e10")),
      "memory.inner_cache_bytes_per_second: an inner cache level must be at "
      "least as fast as cache_bytes_per_second");
  has(errorOf(R"({"format": "tofu-device/1", "name": "t", "compute": {"f32": {"gemm": {"peak_flops": 1}, "vector": {"peak_flops": 1}}}, "memory": {"bytes_per_second": 1e9, "inner_cache_bytes": 65536, "inner_cache_bytes_per_second": 9e10}, "launch_seconds": 1e-6, "gemm_half_extent": 16, "links": [{"name": "a", "gbps": 1, "latency_seconds": 1e-6}]})"),
      "memory.inner_cache_bytes: an inner cache level needs the cache level");
  // Kernel costs: read, sorted, round-tripped; each needs small and large.
  auto kernels = parseDeviceDescription(
      minimal(R"(, "kernels": {"Tanh": {"small": 9e-9, "large": 5e-9}, "Relu": {"small": 1e-10, "large": 2e-10}})"),
      "t.json");
  ASSERT_TRUE(bool(kernels)) << llvm::toString(kernels.takeError());
  ASSERT_EQ(kernels->kernelCosts.size(), 2u);
  EXPECT_EQ(kernels->kernelCosts[0].kernel, "Relu");
  ASSERT_TRUE(kernels->kernelCost("Tanh"));
  EXPECT_DOUBLE_EQ(kernels->kernelCost("Tanh")->largeSecondsPerElement, 5e-9);
  auto kernelsAgain =
      parseDeviceDescription(formatDeviceDescription(*kernels), "again.json");
  ASSERT_TRUE(bool(kernelsAgain)) << llvm::toString(kernelsAgain.takeError());
  EXPECT_DOUBLE_EQ(kernelsAgain->kernelCost("Relu")->smallSecondsPerElement,
                   1e-10);
  has(errorOf(minimal(R"(, "kernels": {"Tanh": {"small": 9e-9}})")),
      "kernels.Tanh.large: missing");
  has(errorOf(minimal(R"(, "kernels": {"Tanh": {"small": 9e-9, "large": 1, "medium": 1}})")),
      "kernels.Tanh.medium: unknown field");
  // The built-in cpu carries tofu-run's measured ones.
  DeviceModel cpu = DeviceModel::genericCpu();
  EXPECT_GT(cpu.stepOverheadSeconds, 0);
  EXPECT_GT(cpu.feedSecondsPerElement, 0);
}

TEST(DeviceModel, HostThreadsAndGemmColdStart) {
  // Absent: one thread, no cold start; neither is written back.
  auto old = parseDeviceDescription(minimal(), "t.json");
  ASSERT_TRUE(bool(old)) << llvm::toString(old.takeError());
  EXPECT_EQ(old->hostThreads, 1u);
  EXPECT_EQ(old->gemmColdSeconds, 0);
  std::string text = formatDeviceDescription(*old);
  EXPECT_EQ(text.find("host_threads"), std::string::npos);
  EXPECT_EQ(text.find("gemm_cold_seconds"), std::string::npos);
  EXPECT_EQ(old->gemmPackPasses, 1);
  EXPECT_EQ(text.find("gemm_pack_passes"), std::string::npos);
  EXPECT_EQ(old->waveSeconds, 0);
  EXPECT_EQ(text.find("wave_seconds"), std::string::npos);
  auto model = parseDeviceDescription(
      minimal(R"(, "shared_host": true, "host_threads": 4, "gemm_cold_seconds": 7e-6, "gemm_pack_passes": 2.5, "wave_seconds": 4e-7)"),
      "t.json");
  ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
  EXPECT_EQ(model->hostThreads, 4u);
  EXPECT_DOUBLE_EQ(model->gemmColdSeconds, 7e-6);
  EXPECT_DOUBLE_EQ(model->gemmPackPasses, 2.5);
  EXPECT_DOUBLE_EQ(model->waveSeconds, 4e-7);
  auto again =
      parseDeviceDescription(formatDeviceDescription(*model), "again.json");
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
  EXPECT_EQ(again->hostThreads, 4u);
  EXPECT_DOUBLE_EQ(again->gemmColdSeconds, 7e-6);
  EXPECT_DOUBLE_EQ(again->gemmPackPasses, 2.5);
  EXPECT_DOUBLE_EQ(again->waveSeconds, 4e-7);
}

TEST(DeviceModel, KernelCostsPerRowAreOptional) {
  auto model = parseDeviceDescription(
      minimal(R"(, "kernels": {"Relu": {"small": 1e-9, "large": 2e-9}, "Softmax": {"small": 1e-9, "large": 1e-9, "row": 5e-8}})"),
      "t.json");
  ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
  ASSERT_EQ(model->kernelCosts.size(), 2u);
  EXPECT_EQ(model->kernelCost("Relu")->rowSeconds, 0);
  EXPECT_DOUBLE_EQ(model->kernelCost("Softmax")->rowSeconds, 5e-8);
  std::string text = formatDeviceDescription(*model);
  auto again = parseDeviceDescription(text, "again.json");
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
  EXPECT_DOUBLE_EQ(again->kernelCost("Softmax")->rowSeconds, 5e-8);
  EXPECT_EQ(again->kernelCost("Relu")->rowSeconds, 0);
  std::string error = llvm::toString(
      parseDeviceDescription(
          minimal(R"(, "kernels": {"Softmax": {"small": 1e-9, "large": 1e-9, "row": -1}})"),
          "t.json")
          .takeError());
  EXPECT_NE(error.find("kernels.Softmax.row: expected a positive finite number"),
            std::string::npos)
      << error;
}

TEST(DeviceModel, KernelThreadingSizesRoundTrip) {
  // threads_from (tofu-run --calibrate: from which size the CPU kernel used
  // the worker pool) is optional; absent, 0 (not known).
  auto model = parseDeviceDescription(
      minimal(R"(, "kernels": {"Relu": {"small": 1e-9, "large": 2e-9}, "Tanh": {"small": 4e-9, "large": 1e-9, "threads_from": 16384}})"),
      "t.json");
  ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
  EXPECT_EQ(model->kernelCost("Relu")->threadsFromElements, 0);
  EXPECT_DOUBLE_EQ(model->kernelCost("Tanh")->threadsFromElements, 16384);
  std::string text = formatDeviceDescription(*model);
  auto again = parseDeviceDescription(text, "again.json");
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError()) << text;
  EXPECT_DOUBLE_EQ(again->kernelCost("Tanh")->threadsFromElements, 16384);
  EXPECT_EQ(again->kernelCost("Relu")->threadsFromElements, 0);
  std::string zero = errorOf(minimal(
      R"(, "kernels": {"Tanh": {"small": 4e-9, "large": 1e-9, "threads_from": 0}})"));
  EXPECT_NE(zero.find("kernels.Tanh.threads_from: expected a positive finite "
                      "number"),
            std::string::npos)
      << zero;
}

TEST(DeviceModel, KernelCallCostsRoundTrip) {
  // "call" alone (a cuBLAS call), or with per-element costs.
  auto model = parseDeviceDescription(
      minimal(R"(, "kernels": {"MatMul": {"call": 6e-6}, "Relu": {"small": 1e-9, "large": 2e-9, "call": 3e-6}})"),
      "t.json");
  ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
  EXPECT_DOUBLE_EQ(model->kernelCost("MatMul")->callSeconds, 6e-6);
  EXPECT_FALSE(model->kernelCost("MatMul")->hasPerElementCost());
  EXPECT_DOUBLE_EQ(model->kernelCost("Relu")->callSeconds, 3e-6);
  EXPECT_TRUE(model->kernelCost("Relu")->hasPerElementCost());
  std::string text = formatDeviceDescription(*model);
  auto again = parseDeviceDescription(text, "again.json");
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError()) << text;
  EXPECT_DOUBLE_EQ(again->kernelCost("MatMul")->callSeconds, 6e-6);
  EXPECT_FALSE(again->kernelCost("MatMul")->hasPerElementCost());
  EXPECT_DOUBLE_EQ(again->kernelCost("Relu")->largeSecondsPerElement, 2e-9);
  // Neither a call nor per-element costs, or half of them: named errors.
  std::string empty = errorOf(minimal(R"(, "kernels": {"Relu": {}})"));
  EXPECT_NE(empty.find("kernels.Relu.small"), std::string::npos) << empty;
  std::string half =
      errorOf(minimal(R"(, "kernels": {"Relu": {"call": 1e-6, "small": 1e-9}})"));
  EXPECT_NE(half.find("kernels.Relu.large"), std::string::npos) << half;
  std::string negative =
      errorOf(minimal(R"(, "kernels": {"Relu": {"call": -1}})"));
  EXPECT_NE(negative.find("kernels.Relu.call: expected a positive finite number"),
            std::string::npos)
      << negative;
}

TEST(DeviceModel, RateByElementTypeAndClass) {
  DeviceModel h100 = DeviceModel::h100();
  StepTimeModel model(h100);
  ShareWork work;
  work.kind = OpClass::Contraction;
  work.dtype = tdl::ElemType::BF16;
  EXPECT_DOUBLE_EQ(model.flopsPerSecond(work), 989e12 * 0.65);
  work.convolution = true;
  EXPECT_DOUBLE_EQ(model.flopsPerSecond(work), 989e12 * 0.5);
  work.kind = OpClass::Elementwise;
  EXPECT_DOUBLE_EQ(model.flopsPerSecond(work), 134e12 * 0.45);
  work.dtype = tdl::ElemType::I64; // no entry: float32's
  EXPECT_DOUBLE_EQ(model.flopsPerSecond(work), h100.vectorFlopsPerSecond);
}

TEST(DeviceModel, ErrorsNameTheField) {
  auto has = [](const std::string &message, const std::string &part) {
    EXPECT_NE(message.find(part), std::string::npos)
        << "'" << message << "' lacks '" << part << "'";
  };
  has(errorOf("{"), "device description 't.json': (file): not valid JSON");
  has(errorOf("[]"), "expected a JSON object, got an array");
  has(errorOf(R"({"name": "x"})"), "format: missing");
  has(errorOf(minimal(", \"colour\": 1")), "colour: unknown field");
  has(errorOf(minimal(", \"shared_host\": 1")),
      "shared_host: expected true or false, got a number");
  has(errorOf(minimal("", R"("f32": {"gemm": {"peak_flops": -1}, "vector": {"peak_flops": 1}})")),
      "compute.f32.gemm.peak_flops: expected a positive finite number, got -1");
  has(errorOf(minimal("", R"("f32": {"gemm": {"peak_flops": 1, "efficiency": 1.5}, "vector": {"peak_flops": 1}})")),
      "compute.f32.gemm.efficiency: expected a positive finite number at most 1");
  has(errorOf(minimal("", R"("f32": {"gemm": {"peak_flops": "fast"}, "vector": {"peak_flops": 1}})")),
      "compute.f32.gemm.peak_flops: expected a positive number, got a string");
  has(errorOf(minimal("", R"("f32": {"gemm": {"peak_flops": 1}})")),
      "compute.f32.vector: missing");
  has(errorOf(minimal("", R"("f8": {"gemm": {"peak_flops": 1}, "vector": {"peak_flops": 1}})")),
      "compute.f8: unknown element type");
  has(errorOf(minimal("", R"("f64": {"gemm": {"peak_flops": 1}, "vector": {"peak_flops": 1}})")),
      "compute.f32: missing");
  has(errorOf(minimal("", R"("f32": {"gemm": {"peak_flops": 1}, "vector": {"peak_flops": 1}, "tensor": 3})")),
      "compute.f32.tensor: unknown field");
  has(errorOf(minimal("", R"("f32": {"gemm": {"peak_flops": 1}, "vector": {"peak_flops": 1}})", "[]")),
      "links: expected at least one link");
  has(errorOf(minimal("", R"("f32": {"gemm": {"peak_flops": 1}, "vector": {"peak_flops": 1}})",
                      R"([{"name": "a", "gbps": 1, "latency_seconds": 1e-6}, {"name": "a", "gbps": 2, "latency_seconds": 1e-6}])")),
      "links[1].name: link 'a' is given twice");
  has(errorOf(minimal("", R"("f32": {"gemm": {"peak_flops": 1}, "vector": {"peak_flops": 1}})",
                      R"([{"name": "a", "gbps": 0, "latency_seconds": 1e-6}])")),
      "links[0].gbps: expected a positive finite number, got 0");
  has(errorOf(minimal(", \"feed_seconds_per_element\": 0")),
      "feed_seconds_per_element: expected a positive finite number at most 0.001, got 0");
  has(errorOf(minimal(", \"step_overhead_seconds\": \"1 ms\"")),
      "step_overhead_seconds: expected a positive number, got a string");
  has(errorOf(minimal(", \"shared_host\": true, \"host_threads\": 1.5")),
      "host_threads: expected a whole number of threads, got 1.5");
  has(errorOf(minimal(", \"host_threads\": 2")),
      "host_threads: only means something with \"shared_host\": true");
  has(errorOf(minimal(", \"gemm_cold_seconds\": 0")),
      "gemm_cold_seconds: expected a positive finite number at most 1, got 0");
  has(errorOf(minimal(", \"gemm_pack_passes\": 17")),
      "gemm_pack_passes: expected a positive finite number at most 16, got 17");
  has(errorOf(minimal(", \"wave_seconds\": 2")),
      "wave_seconds: expected a positive finite number at most 1, got 2");
  // Deep nesting is refused before the recursive JSON parser sees it.
  has(errorOf(std::string(200000, '[') + std::string(200000, ']')),
      "(file): nested more than 32 levels deep");
  // A name with control characters is printed without them.
  std::string message = errorOf(minimal(", \"\\u001b[31m\": 1"));
  EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
  has(errorOf(R"({"format": "tofu-device/1", "name": "t", "compute": {"f32": {"gemm": {"peak_flops": 1}, "vector": {"peak_flops": 1}}}, "memory": {"bytes": 1.5, "bytes_per_second": 1}, "launch_seconds": 1e-6, "gemm_half_extent": 16, "links": [{"name": "a", "gbps": 1, "latency_seconds": 1e-6}]})"),
      "memory.bytes: expected a whole number of bytes, got 1.5");
}

TEST(DeviceModel, LoadRefusesWhatIsNotADescription) {
  auto error = [](llvm::StringRef path) {
    auto model = loadDeviceModel(path);
    EXPECT_FALSE(bool(model)) << path.str();
    return model ? std::string() : llvm::toString(model.takeError());
  };
  EXPECT_NE(error("/nonexistent/device.json").find(
                "not a built-in device and no such file (built in: cpu, k80"),
            std::string::npos);
  EXPECT_NE(error("/dev/zero").find("not a regular file"), std::string::npos);
  EXPECT_NE(error("/").find("not a regular file"), std::string::npos);
}

} // namespace
