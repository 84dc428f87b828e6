//===- StepTimeModelTest.cpp - the step-time model ------------------------===//
//
// The component the partitioner's time objective is built on
// (tofu/Transforms/StepTimeModel.h): what a share of an op costs in flops,
// bytes and GEMM shape, and what the roofline makes of it; each expectation
// is worked out by hand from the formulas in the header.
//
//===----------------------------------------------------------------------===//
#include "tofu/Transforms/StepTimeModel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace tofu;

namespace {

tdl::OpInstance make(llvm::StringRef op,
                     std::vector<std::optional<tdl::TensorType>> inputs,
                     const tdl::AttrMap &attrs = {}) {
  const tdl::OpSpec *spec = tdl::SpecLibrary::builtin().lookup(op);
  EXPECT_NE(spec, nullptr) << op.str();
  auto instance = tdl::instantiate(*spec, inputs, attrs);
  if (!instance) {
    ADD_FAILURE() << llvm::toString(instance.takeError());
    std::abort();
  }
  return std::move(*instance);
}

tdl::TensorType f32(std::vector<int64_t> dims) {
  return {std::move(dims), tdl::ElemType::F32};
}

/// The whole op as one device's share.
OpShare whole(const tdl::OpInstance &op, unsigned output = 0) {
  OpShare share;
  share.outputBox = fullBox(op.outputTypes()[output].dims);
  for (const auto &var : op.reductionVars(output))
    share.reductionRanges.push_back({0, var.extent});
  return share;
}

/// A device model with round numbers.
DeviceModel roundModel() {
  DeviceModel model;
  model.name = "test";
  model.gemmFlopsPerSecond = 1e9;
  model.vectorFlopsPerSecond = 1e8;
  model.memoryBytesPerSecond = 1e9;
  model.launchSeconds = 1e-6;
  model.gemmHalfExtent = 16;
  model.messageLatencySeconds = 1e-5;
  return model;
}

TEST(StepTimeModel, TrafficThatFitsTheCacheStreamsAtItsRate) {
  DeviceModel device = roundModel();
  EXPECT_DOUBLE_EQ(StepTimeModel(device).memorySeconds(4000), 4000 / 1e9);
  device.cacheBytes = 4096;
  device.cacheBytesPerSecond = 8e9;
  StepTimeModel model(device);
  EXPECT_DOUBLE_EQ(model.memorySeconds(4096), 4096 / 8e9);
  EXPECT_DOUBLE_EQ(model.memorySeconds(4097), 4097 / 1e9);
  // An element-wise op of 4000 bytes and 100 flops: memory-bound at 1 GB/s
  // (4 us), at the cache's 8 GB/s (0.5 us) below its vector time (1 us).
  ShareWork work;
  work.kind = OpClass::Elementwise;
  work.flops = 100;
  work.bytes = 4000;
  EXPECT_DOUBLE_EQ(StepTimeModel(roundModel()).computeSeconds(work),
                   1e-6 + 4e-6);
  EXPECT_DOUBLE_EQ(model.computeSeconds(work), 1e-6 + 100 / 1e8);
}

TEST(StepTimeModel, AnInnerCacheLevelIsFasterForWhatFitsIt) {
  DeviceModel device = roundModel();
  device.cacheBytes = 4096;
  device.cacheBytesPerSecond = 8e9;
  device.innerCacheBytes = 1024;
  device.innerCacheBytesPerSecond = 3.2e10;
  StepTimeModel model(device);
  EXPECT_DOUBLE_EQ(model.memorySeconds(1024), 1024 / 3.2e10);
  EXPECT_DOUBLE_EQ(model.memorySeconds(1025), 1025 / 8e9);
  EXPECT_DOUBLE_EQ(model.memorySeconds(4097), 4097 / 1e9);
  // Reuse: 100 bytes read after 1000 other bytes: the cache, not the inner
  // level; after 5000, memory.
  EXPECT_EQ(model.levelAfter(0, 100), MemoryLevel::InnerCache);
  EXPECT_EQ(model.levelAfter(1000, 100), MemoryLevel::Cache);
  EXPECT_EQ(model.levelAfter(5000, 100), MemoryLevel::Memory);
  // An element-wise op whose 4000 bytes of inputs are in memory and whose
  // 1000-byte output is written through the cache (its traffic, 5000
  // bytes, is more than the cache holds: memory's rate).
  ShareWork work;
  work.kind = OpClass::Elementwise;
  work.flops = 1;
  work.bytes = 5000;
  work.outputBytes = 1000;
  work.inputBytesByLevel[0] = 0;
  work.inputBytesByLevel[1] = 0;
  work.inputBytesByLevel[2] = 4000;
  EXPECT_DOUBLE_EQ(model.computeSeconds(work), 1e-6 + 4000 / 1e9 + 1000 / 1e9);
  // Found in the inner level: 32x faster inputs.
  work.inputBytesByLevel[0] = 4000;
  work.inputBytesByLevel[2] = 0;
  EXPECT_DOUBLE_EQ(model.computeSeconds(work),
                   1e-6 + 4000 / 3.2e10 + 1000 / 1e9);
}

TEST(StepTimeModel, MeasuredKernelCostReplacesTheFlops) {
  // ReluGrad measured at 2 ns per element at 16384 elements and 1 ns at
  // 1M: between them, interpolated in log(elements).
  DeviceModel device = roundModel();
  device.kernelCosts = {{"ReluGrad", 2e-9, 1e-9}};
  const DeviceModel::KernelCost &cost = device.kernelCosts[0];
  EXPECT_DOUBLE_EQ(cost.secondsPerElement(100), 2e-9);
  EXPECT_DOUBLE_EQ(cost.secondsPerElement(1 << 20), 1e-9);
  EXPECT_DOUBLE_EQ(cost.secondsPerElement(1 << 30), 1e-9);
  EXPECT_NEAR(cost.secondsPerElement(131072), 2e-9 - 0.5e-9, 1e-21);
  EXPECT_EQ(device.kernelCost("Relu"), nullptr);
  StepTimeModel model(device);
  ShareWork work;
  work.kind = OpClass::Elementwise;
  work.kernel = "ReluGrad";
  work.flops = 1000;
  work.outputElements = 500; // a reduction's: its input's 1000 count
  work.largestElements = 1000;
  work.bytes = 12000;
  // 1000 elements x 2 ns = 2 us, below its 12 KB at 1 GB/s (12 us): the
  // memory bounds it; with 1.2 KB the kernel's cost does.
  EXPECT_DOUBLE_EQ(model.computeSeconds(work), 1e-6 + 12e-6);
  work.bytes = 1200;
  EXPECT_DOUBLE_EQ(model.computeSeconds(work), 1e-6 + 2e-6);
  // Half the share: its own size's cost.
  EXPECT_DOUBLE_EQ(model.computeSeconds(work, 0.5), 1e-6 + 1e-6);
  // Another kernel: its FLOPs at the vector rate (1e8).
  work.kernel = "Relu";
  EXPECT_DOUBLE_EQ(model.computeSeconds(work), 1e-6 + 1000 / 1e8);
}

TEST(StepTimeModel, AMeasuredThreadingSizeSplitsTheCost) {
  // Tanh measured at 4 ns per element on one thread (16384 elements) and 1
  // ns at 1M, threading from 16384 elements on a host of 2 threads: below
  // that size the one-thread cost; from it, the one-thread cost halved,
  // then toward the large probe's in log(elements).
  DeviceModel::KernelCost tanh{"Tanh", 4e-9, 1e-9};
  tanh.threadsFromElements = 16384;
  EXPECT_DOUBLE_EQ(tanh.secondsPerElement(8192, 2), 4e-9);
  EXPECT_DOUBLE_EQ(tanh.secondsPerElement(16383, 2), 4e-9);
  EXPECT_DOUBLE_EQ(tanh.secondsPerElement(16384, 2), 2e-9);
  EXPECT_DOUBLE_EQ(tanh.secondsPerElement(131072, 2), 2e-9 - 0.5e-9);
  EXPECT_DOUBLE_EQ(tanh.secondsPerElement(1 << 22, 2), 1e-9);
  // Add threads from 262144 elements: a call of 131072 is a one-thread
  // call at the small probe's cost (interpolating toward the threaded
  // large probe, 1.5 ns, had it half as slow as it runs).
  DeviceModel::KernelCost add{"Add", 2e-9, 1e-9};
  add.threadsFromElements = 262144;
  EXPECT_DOUBLE_EQ(add.secondsPerElement(131072, 2), 2e-9);
  EXPECT_NEAR(add.secondsPerElement(524288, 2), 1e-9, 1e-21);
  // A kernel that does not thread up to the large probe (2^21): both probes
  // on one thread, interpolated; past its threading size, shared.
  DeviceModel::KernelCost bias{"BiasGrad", 2e-9, 1e-9};
  bias.threadsFromElements = 1 << 21;
  EXPECT_NEAR(bias.secondsPerElement(131072, 2), 1.5e-9, 1e-21);
  EXPECT_DOUBLE_EQ(bias.secondsPerElement(1 << 21, 2), 0.5e-9);
  // The step's view: Tanh of 8192 elements runs on one thread; of 65536,
  // split (the side-by-side levels count the first as one-thread work).
  DeviceModel device = roundModel();
  device.sharedHost = true;
  device.hostThreads = 2;
  device.memoryBytesPerSecond = 1e15; // the kernel cost decides
  device.kernelCosts = {tanh};
  StepTimeModel model(device);
  ShareWork work;
  work.kind = OpClass::Elementwise;
  work.kernel = "Tanh";
  work.largestElements = 8192;
  EXPECT_TRUE(model.runsOnOneThread(work));
  EXPECT_DOUBLE_EQ(model.computeSeconds(work), 1e-6 + 8192 * 4e-9);
  work.largestElements = 65536;
  EXPECT_FALSE(model.runsOnOneThread(work));
  EXPECT_NEAR(model.computeSeconds(work), 1e-6 + 65536 * (2e-9 - 1e-9 / 3),
              1e-18);
  // Without a measured size: one thread under kOneThreadElements.
  device.kernelCosts[0].threadsFromElements = 0;
  work.largestElements = 32768;
  EXPECT_TRUE(StepTimeModel(device).runsOnOneThread(work));
  work.largestElements = 65536;
  EXPECT_FALSE(StepTimeModel(device).runsOnOneThread(work));
}

TEST(StepTimeModel, AKernelsOwnCallCostReplacesTheLaunch) {
  // On a GPU a generated kernel, a cuBLAS call and a copy each cost their
  // own fixed time per call (tofu-run --kernel-times).
  DeviceModel device = roundModel(); // launch 1 us
  device.memoryBytesPerSecond = 1e15; // the kernel cost decides
  device.kernelCosts = {{"MatMul", 0, 0, 0, 7e-6},
                        {"Relu", 2e-9, 2e-9, 0, 3e-6},
                        {"Tanh", 0, 0, 0, 4e-6}};
  StepTimeModel model(device);
  ShareWork relu;
  relu.kind = OpClass::Elementwise;
  relu.kernel = "Relu";
  relu.flops = 1000;
  relu.largestElements = 1000;
  EXPECT_DOUBLE_EQ(model.callSeconds(relu), 3e-6);
  EXPECT_DOUBLE_EQ(model.computeSeconds(relu), 3e-6 + 1000 * 2e-9);
  // Only a call cost: the FLOPs at the vector rate (1e8) as before.
  ShareWork tanh = relu;
  tanh.kernel = "Tanh";
  EXPECT_DOUBLE_EQ(model.computeSeconds(tanh), 4e-6 + 1000 / 1e8);
  // A contraction: its call's cost, its work at the GEMM rate.
  ShareWork gemm;
  gemm.kind = OpClass::Contraction;
  gemm.kernel = "MatMul";
  gemm.flops = 2e6;
  gemm.m = gemm.n = gemm.k = 1e9; // efficiency ~1
  const double busy = 2e6 / (1e9 * model.gemmEfficiency(1e9, 1e9, 1e9));
  EXPECT_DOUBLE_EQ(model.computeSeconds(gemm), 7e-6 + busy);
  // An element type's own cost comes first.
  device.kernelCosts.push_back({"MatMul@f64", 0, 0, 0, 9e-6});
  std::sort(device.kernelCosts.begin(), device.kernelCosts.end(),
            [](const auto &a, const auto &b) { return a.kernel < b.kernel; });
  StepTimeModel typed(device);
  EXPECT_DOUBLE_EQ(typed.callSeconds(gemm), 7e-6); // f32: MatMul's
  gemm.dtype = tdl::ElemType::F64;
  EXPECT_DOUBLE_EQ(typed.callSeconds(gemm), 9e-6);
  gemm.dtype = tdl::ElemType::F32;
  // Kernels without a cost keep the launch.
  gemm.kernel = "Gemm";
  EXPECT_DOUBLE_EQ(model.callSeconds(gemm), 1e-6);
  EXPECT_DOUBLE_EQ(model.computeSeconds(gemm), 1e-6 + busy);
}

TEST(StepTimeModel, BatchNormInTrainingModeHasItsOwnCost) {
  auto norm = [](int64_t training) {
    return make("BatchNormalization",
                {f32({2, 4, 3, 3}), f32({4}), f32({4}), f32({4}), f32({4})},
                {{"training_mode", tdl::AttrValue::ofInt(training)}});
  };
  auto inference = norm(0), training = norm(1);
  EXPECT_EQ(describeShare(inference, 0, whole(inference)).kernel,
            "BatchNormalization");
  ShareWork work = describeShare(training, 0, whole(training));
  EXPECT_EQ(work.kernel, "BatchNormalization.training");
  // 72 elements: 1 ns each in inference mode, 3 ns in training mode; a
  // description without the training-mode cost uses the other one.
  DeviceModel device = roundModel();
  device.memoryBytesPerSecond = 1e15; // the kernel cost decides
  device.kernelCosts = {{"BatchNormalization", 1e-9, 1e-9},
                        {"BatchNormalization.training", 3e-9, 3e-9}};
  EXPECT_DOUBLE_EQ(StepTimeModel(device).computeSeconds(work),
                   1e-6 + 72 * 3e-9);
  device.kernelCosts.pop_back();
  EXPECT_DOUBLE_EQ(StepTimeModel(device).computeSeconds(work),
                   1e-6 + 72 * 1e-9);
  // The normalized X of a batch norm's gradient: its own training cost.
  auto normalized = make("BatchNormalizationNormalized",
                         {f32({2, 4, 3, 3}), f32({4}), f32({4})},
                         {{"training_mode", tdl::AttrValue::ofInt(1)}});
  EXPECT_EQ(describeShare(normalized, 0, whole(normalized)).kernel,
            "BatchNormalizationNormalized.training");
}

TEST(StepTimeModel, RowWiseKernelsPayPerRow) {
  // A softmax over rows of 16: 64 rows of [64, 16]; a batch norm over
  // planes of 3 x 3: 2 images x 4 channels.
  auto softmax = make("Softmax", {f32({64, 16})});
  ShareWork rows = describeShare(softmax, 0, whole(softmax));
  EXPECT_DOUBLE_EQ(rows.rows, 64);
  auto norm = make("BatchNormalization",
                   {f32({2, 4, 3, 3}), f32({4}), f32({4}), f32({4}), f32({4})});
  EXPECT_DOUBLE_EQ(describeShare(norm, 0, whole(norm)).rows, 8);
  // Max pooling: per plane of X (the largest operand), as --calibrate's
  // MaxPool probes count them.
  auto pool = make("MaxPool", {f32({2, 4, 6, 6})},
                   {{"kernel_shape", tdl::AttrValue::ofInts({3, 3})},
                    {"strides", tdl::AttrValue::ofInts({2, 2})},
                    {"pads", tdl::AttrValue::ofInts({1, 1, 1, 1})}});
  ShareWork pooled = describeShare(pool, 0, whole(pool));
  EXPECT_DOUBLE_EQ(pooled.largestElements, 2 * 4 * 6 * 6);
  EXPECT_DOUBLE_EQ(pooled.rows, 8);
  // Not row-wise: no rows.
  auto relu = make("Relu", {f32({64, 16})});
  EXPECT_DOUBLE_EQ(describeShare(relu, 0, whole(relu)).rows, 0);
  // 1024 elements at 1 ns plus 64 rows at 50 ns.
  DeviceModel device = roundModel();
  device.memoryBytesPerSecond = 1e15; // the kernel cost decides
  device.kernelCosts = {{"Softmax", 1e-9, 1e-9, 50e-9}};
  EXPECT_DOUBLE_EQ(StepTimeModel(device).computeSeconds(rows),
                   1e-6 + 1024 * 1e-9 + 64 * 50e-9);
  // Half the share: half the rows.
  EXPECT_DOUBLE_EQ(StepTimeModel(device).computeSeconds(rows, 0.5),
                   1e-6 + 512 * 1e-9 + 32 * 50e-9);
}

TEST(StepTimeModel, StepOverheadIsFixedPlusFeedPerElement) {
  DeviceModel device = roundModel();
  // A description without the fields: nothing beyond the instructions.
  EXPECT_EQ(StepTimeModel(device).stepOverheadSeconds(1e6), 0);
  device.stepOverheadSeconds = 3e-6;
  device.feedSecondsPerElement = 2e-9;
  StepTimeModel model(device);
  EXPECT_DOUBLE_EQ(model.stepOverheadSeconds(0), 3e-6);
  EXPECT_DOUBLE_EQ(model.stepOverheadSeconds(4160), 3e-6 + 4160 * 2e-9);
  // Not per kernel: an op's time does not include it.
  ShareWork work;
  work.kind = OpClass::Elementwise;
  work.flops = 1000;
  work.bytes = 8000;
  EXPECT_DOUBLE_EQ(model.computeSeconds(work), 1e-6 + 1000 / 1e8);
}

TEST(StepTimeModel, ReductionsCountElementsNotExpressionTerms) {
  // BiasGrad sums 64 rows per output: its 16 outputs read 64 x 16 elements
  // (16 + 1024 operations, not 2 x 16 x 64).
  auto bias = make("BiasGrad", {f32({64, 16})});
  EXPECT_DOUBLE_EQ(describeShare(bias, 0, whole(bias)).flops, 16 + 64 * 16);
  // Softmax's TDL expression sums the row for every output element; its
  // kernel reads and writes each element once: 2 x 8 x 100, not
  // 2 x 8 x 100 x 100 (bench/simulate.md: the loss and norm ops were
  // predicted 20-30x too slow).
  auto softmax = make("Softmax", {f32({8, 100})});
  ShareWork work = describeShare(softmax, 0, whole(softmax));
  EXPECT_EQ(work.kind, OpClass::Other);
  EXPECT_DOUBLE_EQ(work.flops, 2.0 * 8 * 100);
  // An element-wise op: one per output element, as before.
  auto relu = make("Relu", {f32({8, 100})});
  EXPECT_DOUBLE_EQ(describeShare(relu, 0, whole(relu)).flops, 800);
}

TEST(StepTimeModel, ClassifiesOps) {
  EXPECT_EQ(classifyOp(make("MatMul", {f32({8, 4}), f32({4, 2})})),
            OpClass::Contraction);
  EXPECT_EQ(classifyOp(make("Relu", {f32({8, 4})})), OpClass::Elementwise);
  EXPECT_EQ(classifyOp(make("Transpose", {f32({8, 4})},
                            {{"perm", tdl::AttrValue::ofInts({1, 0})}})),
            OpClass::Other);
}

TEST(StepTimeModel, MatMulShareIsAGemm) {
  auto op = make("MatMul", {f32({64, 32}), f32({32, 16})});
  ShareWork work = describeShare(op, 0, whole(op));
  EXPECT_EQ(work.kind, OpClass::Contraction);
  EXPECT_DOUBLE_EQ(work.flops, 2.0 * 64 * 16 * 32);
  EXPECT_DOUBLE_EQ(work.bytes, 4.0 * (64 * 32 + 32 * 16 + 64 * 16));
  EXPECT_DOUBLE_EQ(work.outputBytes, 4.0 * 64 * 16);
  EXPECT_DOUBLE_EQ(work.m, 64);
  EXPECT_DOUBLE_EQ(work.n, 16);
  EXPECT_DOUBLE_EQ(work.k, 32);
  EXPECT_FALSE(work.partial);

  // Rows 0..15 only: a quarter of A, all of B.
  OpShare rows = whole(op);
  rows.outputBox[0] = {0, 16};
  work = describeShare(op, 0, rows);
  EXPECT_DOUBLE_EQ(work.m, 16);
  EXPECT_DOUBLE_EQ(work.bytes, 4.0 * (16 * 32 + 32 * 16 + 16 * 16));

  // Half of the reduction: a partial sum over k = 16.
  OpShare half = whole(op);
  half.reductionRanges[0] = {16, 32};
  half.partial = true;
  work = describeShare(op, 0, half);
  EXPECT_DOUBLE_EQ(work.k, 16);
  EXPECT_DOUBLE_EQ(work.flops, 2.0 * 64 * 16 * 16);
  EXPECT_TRUE(work.partial);
}

TEST(StepTimeModel, BatchedMatMulKeepsTheBatchOutOfTheGemm) {
  auto op = make("MatMul", {f32({6, 8, 4}), f32({6, 4, 2})});
  ShareWork work = describeShare(op, 0, whole(op));
  EXPECT_DOUBLE_EQ(work.m, 8);
  EXPECT_DOUBLE_EQ(work.n, 2);
  EXPECT_DOUBLE_EQ(work.k, 4);
  EXPECT_DOUBLE_EQ(work.flops, 2.0 * 6 * 8 * 2 * 4);
}

TEST(StepTimeModel, ConvolutionIsAnIm2colGemm) {
  // X [2, 3, 10, 10], W [8, 3, 3, 3] -> Y [2, 8, 8, 8]: GEMM rows are the
  // output pixels of all images (2 * 8 * 8), columns the output channels,
  // the reduction the input channels times the window (3 * 3 * 3).
  auto op = make("Conv", {f32({2, 3, 10, 10}), f32({8, 3, 3, 3})});
  ShareWork work = describeShare(op, 0, whole(op));
  EXPECT_EQ(work.kind, OpClass::Contraction);
  EXPECT_DOUBLE_EQ(work.m, 2 * 8 * 8);
  EXPECT_DOUBLE_EQ(work.n, 8);
  EXPECT_DOUBLE_EQ(work.k, 3 * 3 * 3);
  EXPECT_DOUBLE_EQ(work.flops, 2.0 * (2 * 8 * 8 * 8) * 27);
}

TEST(StepTimeModel, ConvolutionsAsTheCpuBackendRunsThem) {
  // Stride 2: X [2, 3, 10, 10], W [8, 3, 3, 3] -> Y [2, 8, 4, 4]. All three
  // are GEMMs over the same im2col matrix (3 * 3 * 3 x 2 * 4 * 4) with 8
  // output channels and 2 * 8 * 27 * 32 FLOPs; ConvGradInput's TDL sum also
  // counts the window positions the stride skips, its GEMM does not.
  tdl::AttrMap strided = {{"strides", tdl::AttrValue::ofInts({2, 2})}};
  auto conv = make("Conv", {f32({2, 3, 10, 10}), f32({8, 3, 3, 3})}, strided);
  auto dx = make("ConvGradInput",
                 {f32({2, 8, 4, 4}), f32({8, 3, 3, 3}), f32({2, 3, 10, 10})},
                 strided);
  auto dw = make("ConvGradWeight",
                 {f32({2, 8, 4, 4}), f32({2, 3, 10, 10}), f32({8, 3, 3, 3})},
                 strided);
  const double flops = 2.0 * 8 * 27 * 32;
  const double sides[3][3] = {{8, 32, 27}, {27, 32, 8}, {8, 27, 32}};
  int i = 0;
  for (const tdl::OpInstance *op : {&conv, &dx, &dw}) {
    ShareWork work = describeShare(*op, 0, whole(*op));
    EXPECT_DOUBLE_EQ(work.columnElements, 27 * 32) << op->opName().str();
    EXPECT_DOUBLE_EQ(work.columnFlops, flops) << op->opName().str();
    for (int side = 0; side < 3; ++side)
      EXPECT_DOUBLE_EQ(work.columnGemm[side], sides[i][side])
          << op->opName().str() << " side " << side;
    ++i;
  }
  EXPECT_GT(describeShare(dx, 0, whole(dx)).flops, flops);
  // Two images: Conv stages Y (2 x 1024 bytes), both gradients gather dY
  // (2 x 1024); ConvGradInput also zeroes dX and adds into it (3 x 2400),
  // ConvGradWeight zeroes dW and its one chunk's GEMM reads it back
  // (2 x 864).
  EXPECT_DOUBLE_EQ(describeShare(conv, 0, whole(conv)).stagingBytes, 2048);
  EXPECT_DOUBLE_EQ(describeShare(dw, 0, whole(dw)).stagingBytes, 2048 + 1728);
  // 64 images of 128 x 128 output pixels: chunks of 4 images (27 x 4 x
  // 16384 elements in the im2col matrix, at most 2^21), so dW is read and
  // written back 16 times.
  auto manyImages =
      make("ConvGradWeight",
           {f32({64, 8, 128, 128}), f32({64, 3, 130, 130}), f32({8, 3, 3, 3})});
  EXPECT_DOUBLE_EQ(
      describeShare(manyImages, 0, whole(manyImages)).stagingBytes,
      2.0 * 64 * 8 * 128 * 128 * 4 + 2 * 16 * 864);
  EXPECT_DOUBLE_EQ(describeShare(dx, 0, whole(dx)).stagingBytes,
                   2048 + 3 * 2400);
  // One image: nothing to stage or gather.
  auto single = make("Conv", {f32({1, 3, 10, 10}), f32({8, 3, 3, 3})}, strided);
  EXPECT_DOUBLE_EQ(describeShare(single, 0, whole(single)).stagingBytes, 0);

  // On a shared host, with the levels known: the column GEMM's FLOPs at
  // its efficiency, plus reading the inputs (from memory here), writing
  // and reading back the column matrix (its 3456 bytes fit the 4096-byte
  // cache at 8e9) and the staging (9248 bytes: from memory).
  DeviceModel device = roundModel();
  device.sharedHost = true;
  device.cacheBytes = 4096;
  device.cacheBytesPerSecond = 8e9;
  StepTimeModel model(device);
  ShareWork work = describeShare(dx, 0, whole(dx));
  work.inputBytesByLevel[0] = work.inputBytesByLevel[1] = 0;
  work.inputBytesByLevel[2] = 1000;
  const double busy =
      flops / (1e9 * model.gemmEfficiency(27, 32, 8));
  const double traffic = 1000 / 1e9 + work.outputBytes / 1e9;
  EXPECT_DOUBLE_EQ(model.computeSeconds(work),
                   1e-6 + std::max(busy, traffic) + 1000 / 1e9 +
                       2 * 27 * 32 * 4 / 8e9 + 9248 / 1e9);
  // gemm_pack_passes: the GEMM reads and packs its inputs that many times
  // (the column matrix and the staging as before).
  device.gemmPackPasses = 3;
  EXPECT_DOUBLE_EQ(StepTimeModel(device).computeSeconds(work),
                   1e-6 + std::max(busy, traffic) + 3 * 1000 / 1e9 +
                       2 * 27 * 32 * 4 / 8e9 + 9248 / 1e9);
  // Without the levels (the search), the TDL's FLOPs and sides as before.
  ShareWork plain = describeShare(dx, 0, whole(dx));
  EXPECT_GT(model.computeSeconds(plain), busy);
}

TEST(StepTimeModel, GroupedConvolutionIsAGemmPerGroup) {
  // group = 2: X [1, 4, 6, 6], W [8, 2, 3, 3] -> Y [1, 8, 4, 4]. Each group
  // is a GEMM of 16 pixels x 4 output channels x (2 channels * 3 * 3).
  auto op = make("Conv", {f32({1, 4, 6, 6}), f32({8, 2, 3, 3})},
                 {{"group", tdl::AttrValue::ofInt(2)}});
  ShareWork work = describeShare(op, 0, whole(op));
  EXPECT_DOUBLE_EQ(work.m, 16);
  EXPECT_DOUBLE_EQ(work.n, 4);
  EXPECT_DOUBLE_EQ(work.k, 18);
  EXPECT_DOUBLE_EQ(work.flops, 2.0 * (8 * 4 * 4) * 18);
}

TEST(StepTimeModel, EmptyShareCostsNothing) {
  auto op = make("Relu", {f32({8, 4})});
  OpShare share = whole(op);
  share.outputBox[0] = {4, 4};
  ShareWork work = describeShare(op, 0, share);
  EXPECT_TRUE(work.empty);
  EXPECT_EQ(StepTimeModel(roundModel()).computeSeconds(work), 0);
}

TEST(StepTimeModel, SkinnyGemmsAreSlowerPerFlop) {
  StepTimeModel model(roundModel());
  // s(x) = x / (x + 16): 16 -> 1/2, 48 -> 3/4.
  EXPECT_DOUBLE_EQ(model.gemmEfficiency(16, 48, 48), 0.5 * 0.75 * 0.75);
  ShareWork square;
  square.kind = OpClass::Contraction;
  square.m = square.n = square.k = 256;
  square.flops = 2.0 * 256 * 256 * 256;
  ShareWork skinny = square;
  skinny.m = 4;
  skinny.n = 256 * 64; // the same flops
  double squareRate = square.flops / model.computeSeconds(square);
  double skinnyRate = skinny.flops / model.computeSeconds(skinny);
  EXPECT_LT(skinnyRate, 0.3 * squareRate);
}

TEST(StepTimeModel, AGemmAloneGetsTheThreadsTheRuntimeGivesIt) {
  // Blas.cpp: under 2^20 FLOPs one thread; else one block of at least 32
  // rows (columns) of the longer side per thread.
  DeviceModel device = roundModel();
  device.sharedHost = true;
  device.hostThreads = 2;
  StepTimeModel model(device);
  EXPECT_DOUBLE_EQ(model.gemmThreadShare(32, 32, 32), 0.5);     // 65536 FLOPs
  EXPECT_DOUBLE_EQ(model.gemmThreadShare(512, 512, 512), 1.0);
  EXPECT_DOUBLE_EQ(model.gemmThreadShare(16, 63, 4096), 0.5);   // 63 < 2 x 32
  EXPECT_DOUBLE_EQ(model.gemmThreadShare(16, 64, 4096), 1.0);
  // KernelsMatMul.cpp: a batch of GEMMs too small to split runs its
  // elements side by side once the batch reaches 2^20 FLOPs.
  EXPECT_DOUBLE_EQ(model.gemmThreadShare(32, 32, 16, 32), 1.0); // 2^20
  EXPECT_DOUBLE_EQ(model.gemmThreadShare(32, 32, 16, 31), 0.5);
  EXPECT_DOUBLE_EQ(model.gemmThreadShare(16, 63, 4096, 2), 1.0);
  ShareWork heads; // 32 heads of 32 x 32 x 16
  heads.kind = OpClass::Contraction;
  heads.m = heads.n = 32;
  heads.k = 16;
  heads.flops = 32 * 2.0 * 32 * 32 * 16;
  EXPECT_DOUBLE_EQ(StepTimeModel::batchedGemms(heads), 32);
  heads.alone = true;
  ShareWork oneHead = heads;
  oneHead.flops /= 32;
  EXPECT_NEAR(model.computeSeconds(heads) - 1e-6,
              16 * (model.computeSeconds(oneHead) - 1e-6), 1e-15);

  ShareWork small;
  small.kind = OpClass::Contraction;
  small.m = small.n = small.k = 32;
  small.flops = 2.0 * 32 * 32 * 32;
  ShareWork alone = small;
  alone.alone = true;
  const double busy = small.flops / (1e9 * model.gemmEfficiency(32, 32, 32));
  EXPECT_DOUBLE_EQ(model.computeSeconds(small), 1e-6 + busy);
  EXPECT_DOUBLE_EQ(model.computeSeconds(alone), 1e-6 + 2 * busy);
  // A host of one thread, or dedicated devices: no change.
  device.hostThreads = 1;
  EXPECT_DOUBLE_EQ(StepTimeModel(device).computeSeconds(alone), 1e-6 + busy);
  device.hostThreads = 2;
  device.sharedHost = false;
  EXPECT_DOUBLE_EQ(StepTimeModel(device).computeSeconds(alone), 1e-6 + busy);
}

TEST(StepTimeModel, AContractionAlonePaysTheColdStartOnce) {
  DeviceModel device = roundModel();
  device.gemmColdSeconds = 5e-6;
  StepTimeModel model(device), hot(roundModel());
  ShareWork gemm;
  gemm.kind = OpClass::Contraction;
  gemm.m = gemm.n = gemm.k = 64;
  gemm.flops = 2.0 * 64 * 64 * 64;
  gemm.alone = true;
  EXPECT_DOUBLE_EQ(model.computeSeconds(gemm), hot.computeSeconds(gemm) + 5e-6);
  // Beside other devices' instructions (tofu-run's waves): not cold.
  gemm.alone = false;
  EXPECT_DOUBLE_EQ(model.computeSeconds(gemm), hot.computeSeconds(gemm));
  ShareWork add;
  add.kind = OpClass::Elementwise;
  add.flops = 1000;
  add.bytes = 1e4;
  add.alone = true;
  EXPECT_DOUBLE_EQ(model.computeSeconds(add), hot.computeSeconds(add));
}

TEST(StepTimeModel, RooflineLaunchAndPartialPass) {
  StepTimeModel model(roundModel());
  // Element-wise, memory-bound: 1000 flops take 1e-5 s, 1e5 bytes 1e-4 s.
  ShareWork add;
  add.kind = OpClass::Elementwise;
  add.flops = 1000;
  add.bytes = 1e5;
  add.outputBytes = 4e4;
  EXPECT_DOUBLE_EQ(model.computeSeconds(add), 1e-6 + 1e-4);
  // A quarter of it (later steps split it four ways).
  EXPECT_DOUBLE_EQ(model.computeSeconds(add, 0.25), 1e-6 + 2.5e-5);
  // A partial output is summed by one more pass over it: a launch, and the
  // received partial read plus the tile updated (2 * outputBytes).
  ShareWork partial = add;
  partial.partial = true;
  EXPECT_DOUBLE_EQ(model.computeSeconds(partial),
                   model.computeSeconds(add) + 1e-6 + 8e4 / 1e9);
  // A tiny tile costs at least its launch.
  ShareWork tiny = add;
  tiny.flops = 1;
  tiny.bytes = 12;
  EXPECT_NEAR(model.computeSeconds(tiny), 1e-6, 1e-7);
  // A compute-bound GEMM: 2^21 flops at 1e9 * (256 / 272)^3.
  ShareWork gemm;
  gemm.kind = OpClass::Contraction;
  gemm.m = gemm.n = gemm.k = 256;
  gemm.flops = 2.0 * 256 * 256 * 256;
  gemm.bytes = 3 * 256 * 256 * 4;
  double efficiency = std::pow(256.0 / 272.0, 3);
  EXPECT_DOUBLE_EQ(model.computeSeconds(gemm),
                   1e-6 + gemm.flops / (1e9 * efficiency));
}

TEST(StepTimeModel, Transfers) {
  StepTimeModel model(roundModel());
  EXPECT_DOUBLE_EQ(model.transferSeconds(0, 10, 3), 0);
  // 1e6 bytes at 10 GB/s in 3 messages of 1e-5 s.
  EXPECT_DOUBLE_EQ(model.transferSeconds(1e6, 10, 3), 1e-4 + 3e-5);
}

TEST(StepTimeModel, BuiltinDevices) {
  for (const std::string &name : DeviceModel::builtinNames()) {
    auto model = DeviceModel::builtin(name);
    ASSERT_TRUE(model) << name;
    EXPECT_EQ(model->name, name);
    EXPECT_GT(model->gemmFlopsPerSecond, model->vectorFlopsPerSecond / 10);
    EXPECT_GT(model->memoryBytesPerSecond, 0);
    EXPECT_GT(model->launchSeconds, 0);
  }
  EXPECT_FALSE(DeviceModel::builtin("tpu"));
  // The GPU outruns the CPU on a large GEMM.
  ShareWork gemm;
  gemm.kind = OpClass::Contraction;
  gemm.m = gemm.n = gemm.k = 4096;
  gemm.flops = 2.0 * 4096 * 4096 * 4096;
  EXPECT_LT(StepTimeModel(DeviceModel::h100()).computeSeconds(gemm) * 100,
            StepTimeModel(DeviceModel::genericCpu()).computeSeconds(gemm));
}

} // namespace
