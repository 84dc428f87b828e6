//===- CpuBackendTest.cpp - The CPU executor on a hand-built 2-device plan ===//

#include "TestPlans.h"
#include "tofu/runtime/CpuBackend.h"
#include "tofu/runtime/CollectivePieces.h"
#include "tofu/runtime/SyntheticData.h"
#include "tofu/runtime/TensorAssembly.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace tofu::plan;
using namespace tofu::runtime;
using namespace tofu::test;

namespace {

std::vector<float> asFloats(const std::vector<uint8_t> &bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

std::vector<float> asFloats(const uint8_t *p, size_t n) {
  std::vector<float> v(n);
  std::memcpy(v.data(), p, n * 4);
  return v;
}

/// Reference values of the test model for batch `batch` and weights w0.
struct Reference {
  std::vector<double> y, colSum, w;
  double loss = 0;
};

Reference reference(const Plan &plan, int64_t batch,
                    const std::vector<double> &w0) {
  SyntheticData data(plan);
  std::vector<float> x(16);
  std::vector<int64_t> l(4);
  EXPECT_EQ(data.fill(kX, {{0, 0}, {4, 4}}, batch, x.data()), "");
  EXPECT_EQ(data.fill(kL, {{0}, {4}}, batch, l.data()), "");
  Reference r;
  r.colSum.assign(4, 0);
  for (int i = 0; i < 16; ++i) {
    r.y.push_back(std::max<double>(x[i], 0));
    r.colSum[i % 4] += r.y.back();
  }
  for (int n = 0; n < 4; ++n) {
    double mx = -1e300, sum = 0;
    for (int c = 0; c < 4; ++c)
      mx = std::max(mx, r.y[n * 4 + c]);
    for (int c = 0; c < 4; ++c)
      sum += std::exp(r.y[n * 4 + c] - mx);
    r.loss += -(r.y[n * 4 + l[n]] - mx - std::log(sum)) / 4;
  }
  for (int i = 0; i < 4; ++i)
    r.w.push_back(w0[i] - kTwoDeviceLr * r.colSum[i]);
  return r;
}

void expectNear(const std::vector<float> &got, const std::vector<double> &want,
                double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

TEST(CpuExecutor, TwoDevicePlanComputesAndCountsBytes) {
  Plan plan = makeTwoDevicePlan();
  CpuExecutor exec(plan);
  ASSERT_EQ(exec.init(), "");
  ASSERT_EQ(exec.watchLoss(), "");
  exec.watch(0, kBufYFull);
  exec.watch(0, kBufP);
  exec.watch(1, kBufP);
  std::vector<double> w = {0.25, -0.5, 1.0, 2.0};
  for (int64_t step = 0; step < 3; ++step) {
    ASSERT_EQ(exec.runStep(step), "");
    Reference ref = reference(plan, step, w);
    double loss = 0;
    ASSERT_EQ(exec.lastLoss(loss), "");
    EXPECT_NEAR(loss, ref.loss, 1e-5);
    expectNear(asFloats(*exec.snapshot(0, kBufYFull)), ref.y);
    std::vector<float> p = asFloats(*exec.snapshot(0, kBufP));
    std::vector<float> p1 = asFloats(*exec.snapshot(1, kBufP));
    p.insert(p.end(), p1.begin(), p1.end());
    expectNear(p, ref.colSum);
    std::vector<float> w0 = asFloats(exec.bufferData(0, kBufW), 2);
    std::vector<float> w1 = asFloats(exec.bufferData(1, kBufW), 2);
    w0.insert(w0.end(), w1.begin(), w1.end());
    expectNear(w0, ref.w);
    w = ref.w;

    // Remote bytes: device 0 fetches 2x4 floats and receives 2 + 1 floats
    // of reductions; device 1 receives 2 + 1 floats.
    EXPECT_EQ(exec.commBytesPerDevice(), (std::vector<uint64_t>{60, 28}));
    EXPECT_EQ(exec.commBytesTotal(), plan.commBytes);
  }
  for (size_t d = 0; d < 2; ++d) {
    EXPECT_GT(exec.measuredPeakBytes()[d], 0u);
    EXPECT_LE(exec.measuredPeakBytes()[d], plan.devices[d].peakBytes);
  }
}

TEST(CpuExecutor, OneAndTwoDevicesAgree) {
  Plan one = makeOneDevicePlan(), two = makeTwoDevicePlan();
  CpuExecutor e1(one), e2(two);
  ASSERT_EQ(e1.init(), "");
  ASSERT_EQ(e2.init(), "");
  ASSERT_EQ(e1.watchLoss(), "");
  ASSERT_EQ(e2.watchLoss(), "");
  for (int64_t step = 0; step < 20; ++step) {
    ASSERT_EQ(e1.runStep(step), "");
    ASSERT_EQ(e2.runStep(step), "");
    double l1 = 0, l2 = 0;
    ASSERT_EQ(e1.lastLoss(l1), "");
    ASSERT_EQ(e2.lastLoss(l2), "");
    EXPECT_NEAR(l1, l2, 1e-6) << "step " << step;
  }
  EXPECT_EQ(e1.commBytesTotal(), 0u);
  BufferSource s1 = [&](int32_t d, int32_t b) { return e1.bufferData(d, b); };
  BufferSource s2 = [&](int32_t d, int32_t b) { return e2.bufferData(d, b); };
  std::vector<uint8_t> w1, w2;
  ASSERT_EQ(assembleTensor(one, kW, s1, w1), "");
  ASSERT_EQ(assembleTensor(two, kW, s2, w2), "");
  auto f1 = asFloats(w1), f2 = asFloats(w2);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(f1[i], f2[i], 1e-5);
}

TEST(CpuExecutor, PlanSurvivesTheFileRoundTrip) {
  Plan plan = makeTwoDevicePlan();
  std::string path = ::testing::TempDir() + "executor.plan.bin";
  ASSERT_EQ(writePlan(plan, path), "");
  Plan back;
  ASSERT_EQ(readPlan(path, back), "");
  std::remove(path.c_str());
  CpuExecutor exec(back);
  ASSERT_EQ(exec.init(), "");
  ASSERT_EQ(exec.watchLoss(), "");
  ASSERT_EQ(exec.runStep(0), "");
  double loss = 0;
  ASSERT_EQ(exec.lastLoss(loss), "");
  EXPECT_NEAR(loss, reference(plan, 0, {0.25, -0.5, 1.0, 2.0}).loss, 1e-5);
  EXPECT_EQ(exec.commBytesTotal(), back.commBytes);
}

/// A plan whose collectives are source tables without pieces (as tofuc's
/// materialize makes it, format 3.0) runs as the one with pieces: the
/// executor expands them instead of skipping the transfers.
TEST(CpuExecutor, UnexpandedCollectivesRunAsPieces) {
  Plan plan = makeTwoDevicePlan();
  auto labels = makeCollectiveSources(plan, {kBufL, kBufL});
  auto grads = makeCollectiveSources(plan, {kBufPPartial, kBufPPartial});
  size_t tables = 0;
  for (DeviceProgram &dev : plan.devices)
    for (Instr &in : dev.instrs)
      if (in.kind != Instr::Kind::Compute &&
          (in.dst == kBufLFull || in.dst == kBufP)) {
        in.sources = in.dst == kBufP ? grads : labels;
        in.pieces.clear();
        ++tables;
      }
  ASSERT_EQ(tables, 4u);
  ASSERT_TRUE(hasUnexpandedCollectives(plan));
  CpuExecutor exec(plan);
  ASSERT_EQ(exec.init(), "");
  ASSERT_EQ(exec.watchLoss(), "");
  ASSERT_EQ(exec.runStep(0), "");
  double loss = 0;
  ASSERT_EQ(exec.lastLoss(loss), "");
  EXPECT_NEAR(loss, reference(plan, 0, {0.25, -0.5, 1.0, 2.0}).loss, 1e-5);
  EXPECT_EQ(exec.commBytesTotal(), plan.commBytes);
}

TEST(CpuExecutor, ProgramOnlyComputeMatchesNativeKernels) {
  // Relu and the partial column sums run from expression programs alone
  // (through the file format); the results equal the native kernels'.
  Plan native = makeTwoDevicePlan();
  Plan programs;
  std::vector<uint8_t> bytes;
  ASSERT_EQ(writePlanBytes(withProgramsOnly(makeTwoDevicePlan()), bytes), "");
  ASSERT_EQ(readPlanBytes(bytes, programs), "");
  CpuExecutor en(native), ep(programs);
  ASSERT_EQ(en.init(), "");
  ASSERT_EQ(ep.init(), "");
  ASSERT_EQ(en.watchLoss(), "");
  ASSERT_EQ(ep.watchLoss(), "");
  for (int32_t d = 0; d < 2; ++d) {
    en.watch(d, kBufP);
    ep.watch(d, kBufP);
  }
  for (int64_t step = 0; step < 3; ++step) {
    ASSERT_EQ(en.runStep(step), "");
    ASSERT_EQ(ep.runStep(step), "");
    double ln = 0, lp = 0;
    ASSERT_EQ(en.lastLoss(ln), "");
    ASSERT_EQ(ep.lastLoss(lp), "");
    EXPECT_NEAR(ln, lp, 1e-6);
    for (int32_t d = 0; d < 2; ++d)
    {
      std::vector<float> want = asFloats(*en.snapshot(d, kBufP));
      expectNear(asFloats(*ep.snapshot(d, kBufP)),
                 std::vector<double>(want.begin(), want.end()));
    }
  }
}

TEST(CpuExecutor, ProgramReadingOutsideItsBufferIsAnError) {
  // Without its reduction range, device 1's column sum would read rows
  // [0, 2) of Y, which it does not hold.
  Plan plan = withProgramsOnly(makeTwoDevicePlan());
  plan.devices[1].instrs[1].reductionRanges.clear();
  CpuExecutor exec(plan);
  ASSERT_EQ(exec.init(), "");
  std::string err = exec.runStep(0);
  EXPECT_NE(err.find("device 1 instruction 1"), std::string::npos) << err;
  EXPECT_NE(err.find("ColumnSumByProgram"), std::string::npos) << err;
  EXPECT_NE(err.find("outside the local buffer"), std::string::npos) << err;
}

TEST(CpuExecutor, UnknownKernelIsNamed) {
  Plan plan = makeTwoDevicePlan();
  plan.devices[1].instrs[0].kernel = "FancyConv";
  plan.devices[1].instrs[0].op = "conv_7";
  CpuExecutor exec(plan);
  std::string err = exec.init();
  EXPECT_NE(err.find("no CPU kernel named 'FancyConv'"), std::string::npos)
      << err;
  EXPECT_NE(err.find("op 'conv_7'"), std::string::npos) << err;
  EXPECT_NE(err.find("device 1"), std::string::npos) << err;
}

TEST(CpuExecutor, KernelErrorsNameTheInstruction) {
  Plan plan = makeTwoDevicePlan();
  for (Attr &a : plan.devices[0].instrs[4].editSpec().attrs)
    if (a.name == "reduction")
      a.s = "none";
  CpuExecutor exec(plan);
  ASSERT_EQ(exec.init(), "");
  std::string err = exec.runStep(0);
  EXPECT_NE(err.find("kernel 'SoftmaxCrossEntropyLoss'"), std::string::npos)
      << err;
  EXPECT_NE(err.find("device 0 instruction 4"), std::string::npos) << err;
}

/// A tensor split over more devices than it has rows: the empty share's
/// buffer has no value (an executor keeps no snapshot of zero bytes), and
/// assembling the tensor must not ask for it.
TEST(TensorAssembly, EmptyShareNeedsNoValue) {
  Plan plan = makeTwoDevicePlan();
  Buffer &w0 = plan.devices[0].buffers[kBufW];
  Buffer &w1 = plan.devices[1].buffers[kBufW];
  ASSERT_TRUE(w0.owned && w1.owned);
  // Device 1's share becomes all of W, device 0's becomes empty.
  w1.region.lo.assign(plan.tensors[kW].shape.size(), 0);
  w1.region.hi = plan.tensors[kW].shape;
  w0.region.hi = w0.region.lo;
  std::vector<uint8_t> whole(dtypeSize(plan.tensors[kW].dtype) *
                             w1.region.numElements());
  for (size_t i = 0; i < whole.size(); ++i)
    whole[i] = static_cast<uint8_t>(i);
  BufferSource source = [&](int32_t d, int32_t b) -> const uint8_t * {
    return d == 1 && b == kBufW ? whole.data() : nullptr;
  };
  std::vector<uint8_t> out;
  ASSERT_EQ(assembleTensor(plan, kW, source, out), "");
  EXPECT_EQ(out, whole);
}

TEST(TensorAssembly, ReportsUncoveredElements) {
  Plan plan = makeTwoDevicePlan();
  plan.devices[1].buffers[kBufW].owned = false;
  std::vector<uint8_t> out;
  BufferSource init = [&](int32_t d, int32_t b) {
    return plan.devices[d].buffers[b].init.data();
  };
  EXPECT_NE(assembleTensor(plan, kW, init, out).find("do not cover"),
            std::string::npos);
}

} // namespace
