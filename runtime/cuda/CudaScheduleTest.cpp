//===- CudaScheduleTest.cpp - The CUDA executor's schedule, without a GPU -===//
//
// Plans compiled by tofuc (with --cuda-arch, so nvcc is needed; exit 77 =
// skipped without it) from the example models (MLP and CNN at k = 1 and 8,
// RNN and GPT at k = 8, small sizes; WResNet-50's kernels take nvcc over a
// minute), scheduled on 1, 2, 3 and k GPUs:
// the schedule must validate (every conflicting pair ordered by streams and
// events, disjoint virtual devices, the stream rule), map each instruction
// to the call the executor makes, and refuse what has no CUDA
// implementation. Mutated schedules (a wait dropped, two virtual devices
// overlapping, an instruction on the wrong stream or missing) must fail
// validation, which is what shows the validator checks something.
//
// The CNN with training-mode BatchNormalization, MaxPool and AveragePool
// (examples/cnn/make_cnn_bn.py, k = 1 and 8) checks which pools and batch
// normalizations go to cuDNN (CudaDnnMapping.h) and which refusals send
// them to their generated kernels.
//
// CudaScheduleOnHost.*: the schedules of MLP (k = 1, 8 on 1, 3, 8 GPUs), RNN,
// GPT, the CNN and the CNN with BN run on the host by an emulator of the
// executor's calls (cuDNN calls emulated by the CPU kernels with the calls'
// parameters), in random stream interleavings allowed by the events, give
// the CPU backend's losses, parameters and running statistics.
//
// Usage: tofu-cuda-schedule-tests --tofuc T --nvcc N --python P
//          --examples DIR --workdir DIR --host-cxx CXX [gtest flags]
//
//===----------------------------------------------------------------------===//

#include "CudaCallSummary.h"
#include "CudaDeviceState.h"
#include "CudaMultiFetchTables.h"
#include "CudaDnnMapping.h"
#include "CudaKernelLaunch.h"
#include "CudaFeed.h"
#include "CudaSchedule.h"
#include "CudaTestPlans.h"
#include "CudaTraffic.h"

#include "tofu/runtime/CpuBackend.h"
#include "tofu/runtime/ElementAccess.h"
#include "tofu/runtime/Kernels.h"
#include "tofu/runtime/SyntheticData.h"
#include "tofu/runtime/TensorAssembly.h"
#include "tofu/runtime/TrainingCheckpoint.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

using namespace tofu::cuda;
using namespace tofu::plan;
using namespace tofu::test;

namespace {

/// Builds and validates; fails the test on either error.
Schedule scheduled(const std::string &name, int32_t gpus) {
  const Plan &plan = planNamed(name);
  Schedule s;
  std::string err = buildSchedule(plan, gpus, s);
  EXPECT_EQ(err, "") << name << " on " << gpus << " GPUs";
  if (err.empty())
    EXPECT_EQ(validateSchedule(plan, s), "") << name << " on " << gpus
                                              << " GPUs";
  return s;
}

size_t countOps(const Schedule &s, CudaOp::Kind kind) {
  size_t n = 0;
  for (const ScheduledInstr &e : s.instrs)
    for (const CudaOp &op : e.ops)
      n += op.kind == kind;
  return n;
}

/// Plans whose every op has a CUDA implementation.
const char *const kRunnable[] = {"mlp-1", "mlp-8", "rnn-8", "gpt-8"};

TEST(CudaSchedule, RunnablePlansValidateOnEveryGpuCount) {
  for (const char *name : kRunnable) {
    const Plan &plan = planNamed(name);
    if (plan.devices.empty())
      continue;
    std::set<int32_t> counts = {1, static_cast<int32_t>(plan.devices.size())};
    if (plan.devices.size() >= 2)
      counts.insert(2);
    if (plan.devices.size() >= 3)
      counts.insert(3);
    for (int32_t gpus : counts) {
      Schedule s = scheduled(name, gpus);
      EXPECT_FALSE(s.instrs.empty()) << name;
      EXPECT_GE(s.lossWriter, 0) << name;
    }
  }
}

TEST(CudaSchedule, InstructionsBecomeTheRightCalls) {
  const Plan &plan = planNamed("mlp-8");
  if (plan.devices.empty())
    return;
  Schedule s = scheduled("mlp-8", 8);
  size_t gemmInstrs = 0, gemmEntries = 0, kernelOps = 0;
  for (size_t d = 0; d < plan.devices.size(); ++d)
    for (const Instr &in : plan.devices[d].instrs) {
      bool work = false;
      for (int32_t b : in.outputs)
        work |= plan.devices[d].buffers[b].region.numElements() > 0;
      gemmInstrs += in.kind == Instr::Kind::Compute && in.kernel == "Gemm" &&
                    work;
    }
  // Relu instructions fused into their Gemm (cuBLASLt's epilogue): their
  // generated launches are not issued.
  std::set<std::pair<int32_t, int32_t>> fusedRelus;
  size_t reluEpilogues = 0;
  for (const ScheduledInstr &e : s.instrs) {
    const Instr &in = plan.devices[e.device].instrs[e.index];
    const Instr &first = plan.devices[e.device].instrs[e.firstIndex];
    ASSERT_FALSE(e.ops.empty()) << describeSchedule(plan, s);
    if (first.kind == Instr::Kind::Compute && first.kernel == "Gemm") {
      ++gemmEntries;
      ASSERT_EQ(e.ops.size(), 1u) << describeSchedule(plan, s);
      const CudaOp &op = e.ops.front();
      EXPECT_EQ(op.kind, CudaOp::Kind::Gemm);
      // Gemm's C is the MLP's bias row: cuBLASLt's bias epilogue, not a
      // broadcast into Y that the GEMM adds to.
      bool hasC = first.inputs.size() == 3 && first.inputs[2] >= 0;
      EXPECT_EQ(op.bias.device >= 0, hasC);
      EXPECT_EQ(op.beta, 0.0);
      // A Relu fused after it: the GEMM writes the Relu's output.
      EXPECT_EQ(op.relu, e.firstIndex != e.index);
      if (op.relu) {
        ++reluEpilogues;
        EXPECT_EQ(in.kernel, "Relu");
        EXPECT_EQ(e.index, e.firstIndex + 1);
        EXPECT_EQ(op.c.offset,
                  plan.devices[e.device].buffers[in.outputs[0]].offset);
        EXPECT_STREQ(gemmCallName(op), "cublasLtMatmul");
        fusedRelus.insert({e.device, e.index});
      }
    }
    for (const CudaOp &op : e.ops) {
      if (op.kind != CudaOp::Kind::Kernel)
        continue;
      ++kernelOps;
      const CudaLaunch &l = plan.cuda.launches[op.launch];
      EXPECT_EQ(l.device, e.device);
      EXPECT_EQ(l.firstInstr, e.firstIndex);
      EXPECT_EQ(l.firstInstr + l.numInstrs - 1, e.index);
    }
    if (in.kind == Instr::Kind::Reduce) {
      // One MultiReduce launch (then the loss saved, if it is one).
      EXPECT_EQ(e.ops.front().kind, CudaOp::Kind::MultiReduce);
      EXPECT_EQ(e.ops.size() - (e.ops.back().kind == CudaOp::Kind::SaveLoss),
                1u);
    }
  }
  EXPECT_EQ(gemmEntries, gemmInstrs);
  EXPECT_GT(kernelOps, 0u);
  // Each of the MLP's Gemm + Relu pairs on some device is one call.
  EXPECT_GT(reluEpilogues, 0u) << describeSchedule(plan, s);
  // Every non-empty launch of the module is issued exactly once, except the
  // fused Relus'.
  size_t nonEmpty = 0;
  for (const CudaLaunch &l : plan.cuda.launches)
    nonEmpty += l.numElements > 0 &&
                !fusedRelus.count({l.device, l.firstInstr});
  EXPECT_EQ(countOps(s, CudaOp::Kind::Kernel), nonEmpty);
}

TEST(CudaSchedule, BroadcastBMatMulsBecomeOneGemmOfBatchRows) {
  // GPT at k = 1: every projection MatMul (A [batch, seq, h], B [h, n]
  // broadcast over the batch) is one cublasSgemm of batch * seq rows, not a
  // strided batched call with stride 0 for B (slower on the H200,
  // bench/gpu/H200-run8.md); the attention MatMuls (both operands batched)
  // stay strided batched. CudaScheduleOnHost.FoldedGemmsMatchTheCpuBackend
  // runs the folded calls.
  const Plan &plan = planNamed("gpt-1");
  if (plan.devices.empty())
    return;
  Schedule s = scheduled("gpt-1", 1);
  // The backward pass's dY W^T is a MatMulTransposed (tofu-absorb-
  // transposes): cuBLAS reads W transposed, and it folds the same way.
  size_t folded = 0, batched = 0, foldedTransposed = 0;
  for (const ScheduledInstr &e : s.instrs) {
    const Instr &in = plan.devices[e.device].instrs[e.index];
    if (in.kind != Instr::Kind::Compute ||
        (in.kernel != "MatMul" && in.kernel != "MatMulTransposed"))
      continue;
    const auto &buffers = plan.devices[e.device].buffers;
    const Box &A = buffers[in.inputs[0]].region, &B = buffers[in.inputs[1]].region,
              &Y = buffers[in.outputs[0]].region;
    ASSERT_EQ(e.ops.size(), 1u) << describeSchedule(plan, s);
    const CudaOp &op = e.ops[0];
    ASSERT_EQ(op.kind, CudaOp::Kind::Gemm);
    const size_t ry = Y.lo.size();
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < ry; ++i)
      rows *= Y.hi[i] - Y.lo[i];
    if (A.lo.size() == 3 && B.lo.size() == 2) {
      ++folded;
      if (in.kernel == "MatMulTransposed") {
        ++foldedTransposed;
        EXPECT_TRUE(op.transB && !op.transA) << "instruction " << e.index;
      }
      EXPECT_EQ(op.batch, 1) << "instruction " << e.index;
      EXPECT_EQ(op.m, rows);
      EXPECT_EQ(op.n, Y.hi[ry - 1] - Y.lo[ry - 1]);
      EXPECT_STREQ(gemmCallName(op), "cublasSgemm");
    } else if (A.lo.size() == B.lo.size() && A.lo.size() > 2) {
      ++batched;
      EXPECT_EQ(op.m * op.batch, rows);
      EXPECT_GT(op.batch, 1);
      EXPECT_NE(op.strideB, 0);
    }
  }
  EXPECT_GT(folded, 0u);
  EXPECT_GT(foldedTransposed, 0u);
  EXPECT_GT(batched, 0u);
}

TEST(CudaSchedule, BatchesAreStagedOncePerBufferInPinnedMemory) {
  // Every Input/Label buffer of the devices a process runs has its own
  // aligned range of the pinned staging area and one copy to its place
  // (CudaScheduleOnHost.* feed through this layout); broken layouts fail.
  for (const char *name : {"mlp-8", "gpt-8", "gpt-1"}) {
    const Plan &plan = planNamed(name);
    if (plan.devices.empty())
      continue;
    auto all = [](int32_t) { return true; };
    auto firstHalf = [&plan](int32_t d) {
      return d < static_cast<int32_t>(plan.devices.size() + 1) / 2;
    };
    for (const std::function<bool(int32_t)> &owns :
         {std::function<bool(int32_t)>(all),
          std::function<bool(int32_t)>(firstHalf)}) {
      FeedLayout feed = feedLayout(plan, owns);
      ASSERT_EQ(validateFeedLayout(plan, owns, feed), "") << name;
      size_t fed = 0, bytes = 0;
      for (size_t d = 0; d < plan.devices.size(); ++d)
        for (const Buffer &b : plan.devices[d].buffers) {
          const TensorRole role = plan.tensors[b.tensor].role;
          if (owns(static_cast<int32_t>(d)) &&
              (role == TensorRole::Input || role == TensorRole::Label))
            ++fed, bytes += b.bytes;
        }
      EXPECT_EQ(feed.copies.size(), fed) << name;
      EXPECT_GT(fed, 0u) << name;
      EXPECT_GE(feed.stagingBytes, bytes);
      for (const FeedCopy &c : feed.copies)
        EXPECT_TRUE(owns(c.device));
    }
    FeedLayout good = feedLayout(plan, all);
    auto broken = [&](const char *what, auto mutate) {
      FeedLayout f = good;
      mutate(f);
      EXPECT_NE(validateFeedLayout(plan, all, f), "") << name << ": " << what;
    };
    broken("a copy missing", [](FeedLayout &f) { f.copies.pop_back(); });
    broken("a copy twice",
           [](FeedLayout &f) { f.copies.back() = f.copies.front(); });
    broken("two ranges overlap", [](FeedLayout &f) {
      for (FeedCopy &c : f.copies)
        if (c.bytes > 0 && &c != &f.copies.front()) {
          c.staging = f.copies.front().staging;
          return;
        }
      f.stagingBytes = 0;
    });
    broken("past the area", [](FeedLayout &f) { f.stagingBytes -= 64; });
    broken("to another place",
           [](FeedLayout &f) { f.copies.front().dst.offset += 4; });
    // Device 0's buffers fed by a process that does not run device 0.
    EXPECT_NE(validateFeedLayout(plan, [](int32_t d) { return d != 0; }, good),
              "")
        << name;

    // The synthetic batches: one slot each, filled once; step s reads slot
    // s % 16, which holds batch s % 16 (SyntheticData's own values).
    FeedLayout cached = good;
    ASSERT_TRUE(cacheSyntheticBatches(cached, 16)) << name;
    EXPECT_EQ(cached.slots, 16);
    EXPECT_EQ(cached.areaBytes(), 16 * good.stagingBytes);
    std::vector<uint8_t> area(cached.areaBytes());
    tofu::runtime::SyntheticData data(plan);
    auto fill = [&data](int32_t t, const Box &region, int64_t step, void *out) {
      return data.fill(t, region, step % 16, out);
    };
    for (int64_t b = 0; b < 16; ++b)
      ASSERT_EQ(fillFeed(plan, cached, fill, b, area.data()), "");
    for (int64_t step : {0, 1, 15, 16, 33}) {
      EXPECT_EQ(cached.slotOffset(step), (step % 16) * good.stagingBytes);
      for (const FeedCopy &c : cached.copies) {
        const Buffer &b = plan.devices[c.device].buffers[c.buffer];
        std::vector<uint8_t> want(c.bytes);
        ASSERT_EQ(data.fill(b.tensor, b.region, step % 16, want.data()), "");
        EXPECT_EQ(std::memcmp(area.data() + cached.slotOffset(step) + c.staging,
                              want.data(), c.bytes),
                  0)
            << name << " step " << step;
      }
    }
    // Batches that would take more than kMaxCachedBytes are filled every
    // step into one slot.
    FeedLayout big = good;
    big.stagingBytes = FeedLayout::kMaxCachedBytes / 16 + FeedLayout::kAlign;
    EXPECT_FALSE(cacheSyntheticBatches(big, 16));
    EXPECT_EQ(big.slots, 1);
    EXPECT_EQ(big.slotOffset(7), 0u);
  }
}

TEST(CudaSchedule, StreamsAndEvents) {
  // One device: everything on its compute stream, nothing to wait on.
  Schedule one = scheduled("mlp-1", 1);
  for (const ScheduledInstr &e : one.instrs) {
    EXPECT_EQ(e.stream, StreamKind::Compute);
    EXPECT_TRUE(e.waits.empty());
  }
  for (const ScheduledInstr &e : one.instrs)
    for (const CudaOp &op : e.ops)
      if (op.kind == CudaOp::Kind::Copy || op.kind == CudaOp::Kind::BoxCopy)
        EXPECT_EQ(op.path, CopyPath::SameDevice);
  // Eight devices: fetches of remote pieces on communication streams, which
  // wait for the producers on other devices' compute streams.
  const Plan &plan = planNamed("mlp-8");
  if (plan.devices.empty())
    return;
  Schedule s = scheduled("mlp-8", 8);
  size_t comm = 0, crossWaits = 0;
  for (const ScheduledInstr &e : s.instrs) {
    const Instr &in = plan.devices[e.device].instrs[e.index];
    bool remote = false;
    for (const Piece &p : in.pieces)
      remote |= p.device != e.device && p.region.numElements() > 0;
    EXPECT_EQ(e.stream, remote ? StreamKind::Comm : StreamKind::Compute);
    comm += e.stream == StreamKind::Comm;
    for (int32_t w : e.waits) {
      EXPECT_LT(w, static_cast<int32_t>(&e - s.instrs.data()));
      EXPECT_TRUE(s.instrs[w].recordsEvent);
      const ScheduledInstr &x = s.instrs[w];
      EXPECT_FALSE(x.device == e.device && x.stream == e.stream)
          << "a wait on the instruction's own stream is redundant";
      crossWaits += x.device != e.device;
    }
  }
  EXPECT_GT(comm, 0u);
  EXPECT_GT(crossWaits, 0u);
}

TEST(CudaSchedule, VirtualDevicesSplitMemoryAndAvoidPeerCopies) {
  const Plan &plan = planNamed("mlp-8");
  if (plan.devices.empty())
    return;
  // --devices 1: eight disjoint slices of one allocation; copies between
  // virtual devices are same-GPU memcpys.
  Schedule one = scheduled("mlp-8", 1);
  ASSERT_EQ(one.mapping.gpuBytes.size(), 1u);
  uint64_t sum = 0;
  for (size_t p = 0; p < 8; ++p) {
    const DevicePlacement &pl = one.mapping.devices[p];
    EXPECT_EQ(pl.gpu, 0);
    EXPECT_EQ(pl.base, sum);
    EXPECT_GE(pl.arenaBytes, plan.devices[p].peakBytes);
    sum += pl.sliceBytes;
  }
  EXPECT_EQ(one.mapping.gpuBytes[0], sum);
  // (MultiFetch tables read other virtual devices of the same GPU.)
  size_t sameGpu = 0;
  for (const ScheduledInstr &e : one.instrs)
    for (const CudaOp &op : e.ops) {
      if (op.kind == CudaOp::Kind::MultiFetch ||
          op.kind == CudaOp::Kind::MultiReduce)
        for (const DevicePointer &src : one.tables[op.table].sources)
          sameGpu += src.device != e.device;
      if (op.kind != CudaOp::Kind::Copy && op.kind != CudaOp::Kind::BoxCopy &&
          op.kind != CudaOp::Kind::BoxAdd)
        continue;
      EXPECT_NE(op.path, CopyPath::Peer);
      sameGpu += op.path == CopyPath::SameGpu;
    }
  EXPECT_GT(sameGpu, 0u);
  // --devices 2: devices 0-3 on GPU 0, 4-7 on GPU 1; peer copies only
  // between the halves.
  Schedule two = scheduled("mlp-8", 2);
  for (size_t p = 0; p < 8; ++p)
    EXPECT_EQ(two.mapping.devices[p].gpu, p < 4 ? 0 : 1);
  // (A MultiFetch table on a GPU reads the other GPU's half.)
  size_t peer = 0;
  for (const ScheduledInstr &e : two.instrs)
    for (const CudaOp &op : e.ops)
      if (op.kind == CudaOp::Kind::MultiFetch ||
          op.kind == CudaOp::Kind::MultiReduce) {
        const MultiFetchTable &t = two.tables[op.table];
        EXPECT_EQ(t.gpu, two.mapping.devices[e.device].gpu);
        for (const DevicePointer &src : t.sources)
          peer += two.mapping.devices[src.device].gpu != t.gpu;
      } else if (op.kind == CudaOp::Kind::Copy ||
                 op.kind == CudaOp::Kind::BoxCopy ||
                 op.kind == CudaOp::Kind::BoxAdd) {
        bool cross = two.mapping.devices[op.src.device].gpu !=
                     two.mapping.devices[op.dst.device].gpu;
        EXPECT_EQ(op.path == CopyPath::Peer, cross);
        peer += op.path == CopyPath::Peer;
      }
  EXPECT_GT(peer, 0u);
  // The traffic by path: no peer bytes on one GPU; on two, the peer bytes
  // of the copies counted above.
  EXPECT_EQ(countTraffic(plan, one).byPath[size_t(CopyPath::Peer)], 0u);
  EXPECT_GT(countTraffic(plan, one).byPath[size_t(CopyPath::SameGpu)], 0u);
  EXPECT_GT(countTraffic(plan, two).byPath[size_t(CopyPath::Peer)], 0u);
  EXPECT_EQ(countTraffic(plan, one).receivedPerDevice,
            countTraffic(plan, two).receivedPerDevice);
  // Bad GPU counts.
  DeviceMapping m;
  EXPECT_NE(mapDevices(plan, 0, m).find("runs on 1 to 8 GPUs"),
            std::string::npos);
  EXPECT_NE(mapDevices(plan, 9, m), "");
}

TEST(CudaSchedule, BrokenSchedulesFailValidation) {
  const Plan &plan = planNamed("mlp-8");
  if (plan.devices.empty())
    return;
  const Schedule good = scheduled("mlp-8", 1);
  ASSERT_EQ(validateSchedule(plan, good), "");

  // Every single dropped wait is caught (each one is needed).
  size_t dropped = 0;
  for (size_t e = 0; e < good.instrs.size(); ++e)
    for (size_t w = 0; w < good.instrs[e].waits.size(); ++w) {
      Schedule bad = good;
      bad.instrs[e].waits.erase(bad.instrs[e].waits.begin() + w);
      EXPECT_NE(validateSchedule(plan, bad), "")
          << "dropping wait " << good.instrs[e].waits[w] << " of entry " << e
          << " went unnoticed";
      ++dropped;
    }
  EXPECT_GT(dropped, 0u);

  // Two virtual devices sharing memory.
  {
    Schedule bad = good;
    bad.mapping.devices[3].base = bad.mapping.devices[2].base + 256;
    EXPECT_NE(validateSchedule(plan, bad).find("share memory"),
              std::string::npos);
  }
  // A slice past the end of its GPU's allocation.
  {
    Schedule bad = good;
    bad.mapping.gpuBytes[0] -= 256;
    EXPECT_NE(validateSchedule(plan, bad), "");
  }
  // A communication instruction on the compute stream.
  {
    Schedule bad = good;
    bool changed = false;
    for (ScheduledInstr &e : bad.instrs)
      if (e.stream == StreamKind::Comm) {
        e.stream = StreamKind::Compute;
        changed = true;
        break;
      }
    ASSERT_TRUE(changed);
    EXPECT_NE(validateSchedule(plan, bad).find("stream"), std::string::npos);
  }
  // An instruction missing.
  {
    Schedule bad = good;
    bad.instrs.pop_back();
    EXPECT_NE(validateSchedule(plan, bad), "");
  }
  // Two dependent instructions of one stream swapped (what they are and do
  // exchanged; streams, waits and events left in place).
  {
    bool tried = false;
    std::vector<int32_t> lastOn(2 * plan.devices.size(), -1);
    for (size_t f = 0; f < good.instrs.size() && !tried; ++f) {
      const ScheduledInstr &b = good.instrs[f];
      int32_t &prev = lastOn[b.device * 2 + static_cast<int>(b.stream)];
      int32_t e = prev;
      prev = static_cast<int32_t>(f);
      if (e < 0)
        continue;
      const ScheduledInstr &a = good.instrs[e];
      const Instr &ia = plan.devices[a.device].instrs[a.index];
      const Instr &ib = plan.devices[b.device].instrs[b.index];
      if (ia.kind != Instr::Kind::Compute || ib.kind != Instr::Kind::Compute)
        continue;
      bool dependent = false;
      for (int32_t out : ia.outputs)
        for (int32_t x : ib.inputs)
          dependent |= out == x;
      if (!dependent)
        continue;
      tried = true;
      Schedule bad = good;
      std::swap(bad.instrs[e].index, bad.instrs[f].index);
      std::swap(bad.instrs[e].firstIndex, bad.instrs[f].firstIndex);
      std::swap(bad.instrs[e].ops, bad.instrs[f].ops);
      EXPECT_NE(validateSchedule(plan, bad).find("may run before"),
                std::string::npos);
    }
    EXPECT_TRUE(tried);
  }
  // A copy pointing past its device's slice (the MLP's SGD updates in
  // place: the CNN's BatchNorm running statistics are still copied back at
  // the step's end).
  if (!planNamed("cnnbn-8").devices.empty()) {
    Schedule bad = scheduled("cnnbn-8", 1);
    ASSERT_EQ(validateSchedule(planNamed("cnnbn-8"), bad), "");
    bool changed = false;
    for (ScheduledInstr &e : bad.instrs)
      for (CudaOp &op : e.ops)
        if (!changed && op.kind == CudaOp::Kind::Copy) {
          op.dst.offset = bad.mapping.devices[op.dst.device].sliceBytes;
          changed = true;
        }
    ASSERT_TRUE(changed);
    EXPECT_NE(validateSchedule(planNamed("cnnbn-8"), bad), "");
  }
}

TEST(CudaSchedule, CallSummaryNamesWhatRunsEachOp) {
  // tofu-run --backend cuda --kernels native prints it.
  const Plan &mlp = planNamed("mlp-8");
  const Plan &cnn = planNamed("cnn-1");
  if (mlp.devices.empty() || cnn.devices.empty())
    return;
  std::string calls = describeCalls(mlp, scheduled("mlp-8", 1));
  EXPECT_EQ(calls.rfind("calls per step by op:\n", 0), 0u) << calls;
  EXPECT_NE(calls.find("\n  Gemm: "), std::string::npos) << calls;
  EXPECT_NE(calls.find(" cuBLAS"), std::string::npos) << calls;
  EXPECT_NE(calls.find("\n  Fetch: "), std::string::npos) << calls;
  EXPECT_NE(calls.find(" memcpy/memset"), std::string::npos) << calls;
  EXPECT_NE(calls.find(" generated elementwise kernels"), std::string::npos)
      << calls;
  EXPECT_EQ(calls.find("cuDNN"), std::string::npos) << calls;
  std::string cnnCalls = describeCalls(cnn, scheduled("cnn-1", 1));
  size_t line = cnnCalls.find("\n  ConvGradWeight: ");
  ASSERT_NE(line, std::string::npos) << cnnCalls;
  std::string convGradWeight =
      cnnCalls.substr(line + 1, cnnCalls.find('\n', line + 1) - line - 1);
  EXPECT_NE(convGradWeight.find(" cuDNN"), std::string::npos) << cnnCalls;
}

TEST(CudaSchedule, UnsupportedOpsAreRefusedByName) {
  // An op of the MLP turned into one with neither a generated kernel nor a
  // library mapping.
  Plan plan = planNamed("mlp-1");
  if (plan.devices.empty())
    return;
  bool changed = false;
  for (Instr &in : plan.devices[0].instrs)
    if (!changed && in.kind == Instr::Kind::Compute && in.kernel == "Gemm") {
      in.kernel = "MaxPool";
      in.op = "/pool";
      in.editSpec().programs.clear();
      changed = true;
    }
  ASSERT_TRUE(changed);
  Schedule s;
  std::string err = buildSchedule(plan, 1, s);
  EXPECT_NE(err.find("op 'MaxPool' has no CUDA implementation"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("/pool"), std::string::npos) << err;
  // A plan without the CUDA section.
  Plan bare = planNamed("mlp-1");
  bare.cuda = CudaModule();
  EXPECT_NE(buildSchedule(bare, 1, s).find("--cuda-arch"), std::string::npos);
}

TEST(CudaSchedule, UnknownElementTypeIsRefused) {
  Plan plan = planNamed("mlp-8");
  if (plan.devices.empty())
    return;
  // A type the CUDA backend does not know (as a newer plan's f16 would be).
  bool changed = false;
  for (size_t d = 0; d < plan.devices.size() && !changed; ++d)
    for (const Instr &in : plan.devices[d].instrs)
      if (in.kind == Instr::Kind::Fetch) {
        int32_t t = plan.devices[d].buffers[in.dst].tensor;
        plan.tensors[t].dtype = static_cast<DType>(200);
        changed = true;
        break;
      }
  ASSERT_TRUE(changed);
  Schedule s;
  std::string err = buildSchedule(plan, 1, s);
  EXPECT_NE(err.find("element type 200 is not supported"), std::string::npos)
      << err;
}

/// `plan` with every tensor of type `from` retyped to `to`, for the
/// schedule (which reads types and byte sizes, not values): buffer sizes
/// follow the new element size; for a wider type every offset and the
/// arena grow by the same factor, so the memory plan's layout stays valid.
Plan retyped(Plan plan, DType from, DType to) {
  const uint64_t grow = std::max<uint64_t>(1, dtypeSize(to) / dtypeSize(from));
  for (TensorInfo &t : plan.tensors)
    if (t.dtype == from)
      t.dtype = to;
  for (DeviceProgram &dev : plan.devices) {
    dev.peakBytes *= grow;
    for (Buffer &b : dev.buffers) {
      b.offset *= grow;
      b.bytes = static_cast<uint64_t>(b.region.numElements()) *
                dtypeSize(plan.tensors[b.tensor].dtype);
    }
  }
  return plan;
}

TEST(CudaSchedule, ElementTypesPickTheirLibraryCalls) {
  // The float64 MLP: cublasDgemm, f64 Gemm bias and box adds, an 8-byte loss.
  {
    const Plan &plan = planNamed("mlp64-8");
    if (plan.devices.empty())
      return;
    Schedule s = scheduled("mlp64-8", 1);
    size_t gemms = 0, adds = 0, saves = 0;
    for (const ScheduledInstr &e : s.instrs)
      for (const CudaOp &op : e.ops) {
        if (op.kind == CudaOp::Kind::Gemm || op.kind == CudaOp::Kind::GemmBias) {
          EXPECT_EQ(op.dtype, DType::F64);
          EXPECT_EQ(op.elementSize, 8u);
          gemms += op.kind == CudaOp::Kind::Gemm;
        }
        if (op.kind == CudaOp::Kind::BoxAdd) {
          EXPECT_EQ(op.dtype, DType::F64);
          ++adds;
        }
        if (op.kind == CudaOp::Kind::SaveLoss) {
          EXPECT_EQ(op.bytes, 8u);
          ++saves;
        }
      }
    EXPECT_GT(gemms, 0u);
    EXPECT_GT(saves, 0u);
    (void)adds;
    std::string text = describeSchedule(plan, s);
    EXPECT_NE(text.find("cublasDgemm"), std::string::npos);
    EXPECT_EQ(text.find("cublasSgemm"), std::string::npos);
  }
  // float16 / bfloat16 GEMMs: cublasGemmEx (f32 compute).
  for (DType half : {DType::F16, DType::BF16}) {
    Plan plan = retyped(planNamed("mlp-8"), DType::F32, half);
    Schedule s;
    ASSERT_EQ(buildSchedule(plan, 1, s), "") << dtypeNumpyName(half);
    EXPECT_EQ(validateSchedule(plan, s), "");
    size_t gemms = 0;
    for (const ScheduledInstr &e : s.instrs)
      for (const CudaOp &op : e.ops)
        if (op.kind == CudaOp::Kind::Gemm) {
          EXPECT_EQ(op.dtype, half);
          // The forward GEMMs add their bias in cuBLASLt's epilogue (no
          // Relu is fused: float32 only).
          EXPECT_FALSE(op.relu);
          EXPECT_STREQ(gemmCallName(op), op.bias.device >= 0
                                             ? "cublasLtMatmul"
                                             : "cublasGemmEx");
          ++gemms;
        }
    EXPECT_GT(gemms, 0u);
  }
  // Integer GEMMs have no path (MatMul and Gemm have no generated kernel):
  // refused with the op, its type and the instruction.
  {
    Plan plan = retyped(planNamed("mlp-1"), DType::F32, DType::I32);
    Schedule s;
    std::string err = buildSchedule(plan, 1, s);
    EXPECT_NE(err.find("op 'Gemm' has no CUDA implementation (int32 Gemm "
                       "(operands int32, int32, int32): cuBLAS GEMM takes "
                       "float32, float64, float16 or bfloat16"),
              std::string::npos)
        << err;
  }
}

TEST(CudaSchedule, ConvolutionElementTypes) {
  // cuDNN takes f64 and f16 convolutions; bf16 ones run their generated
  // kernel.
  const Plan &cnn = planNamed("cnn-8");
  if (cnn.devices.empty())
    return;
  for (DType type : {DType::F64, DType::F16, DType::BF16}) {
    Plan plan = retyped(cnn, DType::F32, type);
    Schedule s;
    ASSERT_EQ(buildSchedule(plan, 1, s), "") << dtypeNumpyName(type);
    size_t convs = 0, convKernels = 0;
    for (const ScheduledInstr &e : s.instrs) {
      const Instr &in = plan.devices[e.device].instrs[e.index];
      if (in.kernel != "ConvGradInput" && in.kernel != "ConvGradWeight")
        continue;
      for (const CudaOp &op : e.ops) {
        if (op.kind == CudaOp::Kind::Conv) {
          EXPECT_EQ(op.dtype, type);
          ++convs;
        }
        convKernels += op.kind == CudaOp::Kind::Kernel;
      }
    }
    if (type == DType::BF16) {
      EXPECT_EQ(convs, 0u);
      EXPECT_GT(convKernels, 0u);
    } else {
      EXPECT_GT(convs, 0u) << dtypeNumpyName(type);
      EXPECT_EQ(convKernels, 0u) << dtypeNumpyName(type);
    }
  }
}

TEST(CudaSchedule, ConvolutionsGoToCudnnOrTheirGeneratedKernel) {
  // The CNN (k = 1 and 8): its Convs have a bias, which the cuDNN mapping
  // does not take, so they run their generated kernels; its ConvGradInput
  // and ConvGradWeight go to cuDNN.
  for (const char *name : {"cnn-1", "cnn-8"}) {
    const Plan &plan = planNamed(name);
    if (plan.devices.empty())
      continue;
    for (int32_t gpus : {1, static_cast<int32_t>(plan.devices.size())}) {
      Schedule s = scheduled(name, gpus);
      std::map<std::string, std::pair<size_t, size_t>> byOp; // cuDNN, kernel
      for (const ScheduledInstr &e : s.instrs) {
        const Instr &in = plan.devices[e.device].instrs[e.index];
        for (const CudaOp &op : e.ops) {
          if (op.kind == CudaOp::Kind::Conv) {
            ++byOp[in.kernel].first;
            EXPECT_EQ(op.convDirection, in.kernel == "Conv"            ? 0
                                        : in.kernel == "ConvGradInput" ? 1
                                                                       : 2);
          }
          if (op.kind == CudaOp::Kind::Kernel)
            ++byOp[in.kernel].second;
        }
      }
      EXPECT_EQ(byOp["Conv"].first, 0u) << name;
      EXPECT_GT(byOp["Conv"].second, 0u) << name;
      EXPECT_GT(byOp["ConvGradInput"].first, 0u) << name;
      EXPECT_GT(byOp["ConvGradWeight"].first, 0u) << name;
      EXPECT_EQ(byOp["ConvGradWeight"].second, 0u) << name;
    }
  }
}

TEST(CudaSchedule, AStridedConvolutionReadingPartOfXGoesToCudnn) {
  // The 1x1 stride-2 shortcut of make_cnn_bn.py --shortcut reads rows and
  // columns 0, 2, 4, 6 of its 8 x 8 X. At k = 2 (a channel split) the plan
  // holds each device's X as [0, 7) x [0, 7) for the forward call and the
  // weight gradient: each is a cuDNN call over that 7 x 7 tensor, Y's 4 x 4
  // following from it (at k = 1 r1 is read whole, in place). Every
  // convolution without a bias, all three directions, is a cuDNN call.
  for (const char *name : {"cnnbnsc-1", "cnnbnsc-2"}) {
    const Plan &plan = planNamed(name);
    if (plan.devices.empty())
      continue;
    for (int32_t gpus : {1, static_cast<int32_t>(plan.devices.size())}) {
      Schedule s = scheduled(name, gpus);
      std::set<int> directions;
      size_t partialX = 0;
      for (const ScheduledInstr &e : s.instrs)
        for (const CudaOp &op : e.ops)
          if (op.kind == CudaOp::Kind::Conv && op.w.size() == 4 &&
              op.w[2] == 1 && op.w[3] == 1) {
            EXPECT_EQ(op.strides, (std::vector<int64_t>{2, 2})) << name;
            EXPECT_TRUE(op.x[2] == 7 || op.x[2] == 8) << name;
            EXPECT_EQ(op.x[3], op.x[2]) << name;
            partialX += op.x[2] == 7;
            directions.insert(op.convDirection);
          }
      EXPECT_EQ(directions, (std::set<int>{0, 1, 2})) << name;
      if (plan.devices.size() == 2)
        EXPECT_EQ(partialX, 4u) << name; // Conv and ConvGradWeight x 2
      for (const ScheduledInstr &e : s.instrs) {
        const Instr &in = plan.devices[e.device].instrs[e.index];
        const bool bias = in.kernel == "Conv" && in.inputs.size() == 3 &&
                          in.inputs[2] >= 0;
        if ((in.kernel == "Conv" || in.kernel == "ConvGradInput" ||
             in.kernel == "ConvGradWeight") &&
            !bias)
          EXPECT_EQ(e.notLibraryWhy, "") << name << " " << in.kernel;
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// MultiFetch / MultiReduce (CudaMultiFetch.h, CudaMultiFetchTables.h)
//===----------------------------------------------------------------------===//

/// The plan's non-empty pieces of `in` and whether one of them is not one
/// contiguous run of its source or destination buffer.
size_t nonEmptyPieces(const Plan &plan, int32_t d, const Instr &in,
                      bool &strided) {
  auto ext = [](const Box &b) {
    std::vector<int64_t> e;
    for (size_t i = 0; i < b.lo.size(); ++i)
      e.push_back(b.hi[i] - b.lo[i]);
    return e;
  };
  auto oneRun = [](const std::vector<int64_t> &r,
                   const std::vector<int64_t> &e) {
    size_t j = 0;
    while (j < r.size() && r[j] == 1)
      ++j;
    for (size_t i = j + 1; i < r.size(); ++i)
      if (r[i] != e[i])
        return false;
    return true;
  };
  size_t n = 0;
  strided = false;
  for (const Piece &p : in.pieces) {
    if (p.region.numElements() == 0)
      continue;
    ++n;
    auto r = ext(p.region);
    strided |= !oneRun(r, ext(plan.devices[p.device].buffers[p.buffer].region)) ||
               !oneRun(r, ext(plan.devices[d].buffers[in.dst].region));
  }
  return n;
}

TEST(MultiFetch, FetchesAndReducesBecomeOneLaunch) {
  // MLP, RNN and GPT at k = 8, on one GPU and on k: every Reduce is one
  // MultiReduce, every Fetch of two or more pieces (or a strided one) one
  // MultiFetch with the plan's pieces, a single contiguous piece a memcpy.
  // The calls per Fetch/Reduce before (one per piece; a Reduce also a
  // memset and a copy back) and now are printed and compared.
  for (const char *name : {"mlp-8", "rnn-8", "gpt-8"}) {
    const Plan &plan = planNamed(name);
    if (plan.devices.empty())
      continue;
    for (int32_t gpus : {1, 8}) {
      Schedule s = scheduled(name, gpus);
      size_t before = 0, now = 0, multiFetch = 0, multiReduce = 0, memcpys = 0;
      std::vector<uint64_t> tableBytes(gpus, 0);
      for (const MultiFetchTable &t : s.tables)
        tableBytes[t.gpu] += (t.bytes + kMultiFetchTableAlignment - 1) /
                             kMultiFetchTableAlignment *
                             kMultiFetchTableAlignment;
      EXPECT_EQ(tableBytes, s.tableBytes) << name;
      for (const ScheduledInstr &e : s.instrs) {
        const Instr &in = plan.devices[e.device].instrs[e.index];
        if (in.kind == Instr::Kind::Compute)
          continue;
        bool strided = false;
        const size_t n = nonEmptyPieces(plan, e.device, in, strided);
        std::vector<CudaOp> ops = e.ops;
        if (!ops.empty() && ops.back().kind == CudaOp::Kind::SaveLoss)
          ops.pop_back();
        ASSERT_EQ(ops.size(), 1u)
            << name << ": device " << e.device << " instruction " << e.index
            << "\n"
            << describeSchedule(plan, s);
        const CudaOp &op = ops[0];
        if (in.kind == Instr::Kind::Reduce) {
          before += n + 2;
          EXPECT_EQ(op.kind, CudaOp::Kind::MultiReduce);
          multiReduce += op.kind == CudaOp::Kind::MultiReduce;
        } else {
          before += n;
          const bool one = n >= 2 || strided;
          EXPECT_EQ(op.kind, one ? CudaOp::Kind::MultiFetch : CudaOp::Kind::Copy)
              << name << ": " << n << " pieces";
          multiFetch += op.kind == CudaOp::Kind::MultiFetch;
          memcpys += op.kind == CudaOp::Kind::Copy;
        }
        ++now;
        if (op.kind == CudaOp::Kind::MultiFetch ||
            op.kind == CudaOp::Kind::MultiReduce) {
          const MultiFetchTable &t = s.tables[op.table];
          EXPECT_EQ(t.pieces.size(), n);
          EXPECT_EQ(t.gpu, s.mapping.devices[e.device].gpu);
        }
      }
      // No Reduce needs a scratch any more.
      for (const DevicePlacement &pl : s.mapping.devices)
        EXPECT_EQ(pl.scratchBytes, 0u) << name;
      std::printf("%s on %d GPU(s): Fetch/Reduce calls %zu before, %zu now "
                  "(%zu MultiFetch, %zu MultiReduce, %zu memcpy); tables %zu, "
                  "%llu bytes on GPU 0\n",
                  name, gpus, before, now, multiFetch, multiReduce, memcpys,
                  s.tables.size(),
                  static_cast<unsigned long long>(s.tableBytes[0]));
      EXPECT_GT(multiFetch, 0u) << name;
      EXPECT_GT(multiReduce, 0u) << name;
      EXPECT_LT(now, before) << name;
    }
  }
}

/// Makes a mutated Copy table self-consistent again (piece count, bytes,
/// first items, item count), so that only the mutation itself is wrong.
void refreshItems(MultiFetchTable &x) {
  x.header.numPieces = static_cast<int32_t>(x.pieces.size());
  x.bytes = multiFetchTableBytes(x.header.numPieces);
  if (x.header.mode != MultiFetchMode::Copy)
    return;
  int64_t items = 0;
  for (MultiFetchPiece &p : x.pieces) {
    p.firstItem = items;
    int64_t n = 1;
    for (int32_t r = 0; r < x.header.rank; ++r)
      n *= p.region[r];
    items += n;
  }
  x.header.items = items;
}

TEST(MultiFetch, BrokenTablesFailValidation) {
  const Plan &plan = planNamed("mlp-8");
  if (plan.devices.empty())
    return;
  const Schedule good = scheduled("mlp-8", 2);
  ASSERT_EQ(validateSchedule(plan, good), "");
  // The first table of each kind with at least two pieces of rank >= 1.
  int32_t fetch = -1, reduce = -1;
  for (const ScheduledInstr &e : good.instrs)
    for (const CudaOp &op : e.ops)
      if (op.table >= 0 && good.tables[op.table].pieces.size() >= 2 &&
          good.tables[op.table].header.rank >= 1) {
        int32_t &which = op.kind == CudaOp::Kind::MultiFetch ? fetch : reduce;
        if (which < 0)
          which = op.table;
      }
  ASSERT_GE(fetch, 0);
  ASSERT_GE(reduce, 0);
  auto expectError = [&](const Schedule &bad, const std::string &what) {
    std::string err = validateSchedule(plan, bad);
    EXPECT_NE(err.find(what), std::string::npos)
        << "expected '" << what << "', got '" << err << "'";
  };
  for (int32_t t : {fetch, reduce}) {
    // A piece reading past its source device's slice.
    {
      Schedule bad = good;
      MultiFetchTable &x = bad.tables[t];
      x.sources[1].offset = bad.mapping.devices[x.sources[1].device].sliceBytes;
      expectError(bad, "reads outside device");
    }
    // A piece past its source box.
    {
      Schedule bad = good;
      bad.tables[t].pieces[0].srcStart[0] += bad.tables[t].pieces[0].srcExtents[0];
      expectError(bad, "outside its source or destination box");
    }
    // The destination moved out of its buffer / slice.
    {
      Schedule bad = good;
      bad.tables[t].dst.offset += 4;
      expectError(bad, "destination lies outside");
    }
    // A piece missing (the table otherwise consistent: count, bytes, items).
    {
      Schedule bad = good;
      MultiFetchTable &x = bad.tables[t];
      x.pieces.pop_back();
      x.sources.pop_back();
      refreshItems(x);
      expectError(bad, "misses the plan's piece");
    }
    // The pieces of a sum in another order (fp32 results would differ), or
    // two pieces of a Fetch swapped in the table.
    {
      Schedule bad = good;
      MultiFetchTable &x = bad.tables[t];
      std::swap(x.sources[0], x.sources[1]);
      std::swap(x.pieces[0].srcStart, x.pieces[1].srcStart);
      std::swap(x.pieces[0].srcExtents, x.pieces[1].srcExtents);
      std::swap(x.pieces[0].dstStart, x.pieces[1].dstStart);
      std::swap(x.pieces[0].region, x.pieces[1].region);
      refreshItems(x);
      expectError(bad, "is not the plan's piece 0");
    }
    // The launch's items not covering the pieces.
    {
      Schedule bad = good;
      bad.tables[t].header.items -= 1;
      expectError(bad, "item count");
    }
    // A table outside its GPU's table area, and two tables overlapping.
    {
      Schedule bad = good;
      bad.tables[t].offset = bad.tableBytes[bad.tables[t].gpu];
      expectError(bad, "table area");
    }
  }
  {
    Schedule bad = good;
    const MultiFetchTable &x = bad.tables[fetch];
    for (MultiFetchTable &y : bad.tables)
      if (&y != &x && y.gpu == x.gpu) {
        y.offset = x.offset;
        break;
      }
    expectError(bad, "overlap on GPU");
  }
  // Two Fetch pieces overlapping in the destination.
  {
    Schedule bad = good;
    MultiFetchTable &x = bad.tables[fetch];
    x.pieces[1] = x.pieces[0];
    x.sources[1] = x.sources[0];
    refreshItems(x);
    expectError(bad, "overlap in the destination");
  }
  // A table on the wrong GPU.
  {
    Schedule bad = good;
    MultiFetchTable &x = bad.tables[fetch];
    x.gpu = 1 - x.gpu;
    x.offset = bad.tableBytes[x.gpu];
    bad.tableBytes[x.gpu] += x.bytes;
    expectError(bad, "not on the destination's GPU");
  }
}

TEST(MultiFetch, AReduceReadingItsDestinationKeepsTheScratch) {
  // A source sharing bytes with the destination, laid out differently: one
  // launch would read elements other items write, so the Reduce keeps the
  // memset, per-piece adds and copy back through its scratch.
  Plan plan = planNamed("mlp-8");
  if (plan.devices.empty())
    return;
  int32_t device = -1;
  for (size_t d = 0; d < plan.devices.size() && device < 0; ++d)
    for (const Instr &in : plan.devices[d].instrs) {
      if (in.kind != Instr::Kind::Reduce)
        continue;
      for (const Piece &p : in.pieces)
        if (p.device == static_cast<int32_t>(d) && p.region.numElements() > 1) {
          Buffer &dst = plan.devices[d].buffers[in.dst];
          const Buffer &src = plan.devices[d].buffers[p.buffer];
          ASSERT_TRUE(runsAsOneLaunch(plan, static_cast<int32_t>(d), in));
          dst.offset = src.offset + 4; // overlapping, shifted by an element
          EXPECT_FALSE(runsAsOneLaunch(plan, static_cast<int32_t>(d), in));
          device = static_cast<int32_t>(d);
          break;
        }
      if (device >= 0)
        break;
    }
  ASSERT_GE(device, 0);
  Schedule s;
  ASSERT_EQ(buildSchedule(plan, 1, s), "");
  EXPECT_GT(s.mapping.devices[device].scratchBytes, 0u);
  EXPECT_GT(countOps(s, CudaOp::Kind::Zero), 0u);
  EXPECT_GT(countOps(s, CudaOp::Kind::MultiReduce), 0u);
}

TEST(MultiFetch, AFetchOfOverlappingPiecesKeepsThePerPieceCalls) {
  // The CPU backend copies pieces in order (a later one wins where two
  // overlap); one launch cannot promise that, so such a Fetch keeps one
  // call per piece.
  Plan plan = planNamed("mlp-8");
  if (plan.devices.empty())
    return;
  int32_t device = -1, index = -1;
  size_t pieces = 0;
  for (size_t d = 0; d < plan.devices.size() && device < 0; ++d)
    for (size_t i = 0; i < plan.devices[d].instrs.size(); ++i) {
      Instr &in = plan.devices[d].instrs[i];
      if (in.kind != Instr::Kind::Fetch || in.pieces.size() < 2 ||
          in.pieces[0].region.numElements() == 0)
        continue;
      ASSERT_TRUE(runsAsOneLaunch(plan, static_cast<int32_t>(d), in));
      in.pieces[1] = in.pieces[0];
      EXPECT_FALSE(runsAsOneLaunch(plan, static_cast<int32_t>(d), in));
      for (const Piece &p : in.pieces)
        pieces += p.region.numElements() > 0;
      device = static_cast<int32_t>(d);
      index = static_cast<int32_t>(i);
      break;
    }
  ASSERT_GE(device, 0);
  Schedule s;
  ASSERT_EQ(buildSchedule(plan, 1, s), "");
  size_t found = 0;
  for (const ScheduledInstr &e : s.instrs)
    if (e.device == device && e.index == index) {
      ++found;
      ASSERT_EQ(e.ops.size(), pieces);
      for (const CudaOp &op : e.ops)
        EXPECT_TRUE(op.kind == CudaOp::Kind::Copy ||
                    op.kind == CudaOp::Kind::BoxCopy);
    }
  EXPECT_EQ(found, 1u);
}

TEST(CudaSchedule, PoolingAndBatchNormGoToCudnnOrTheirGeneratedKernel) {
  // At k = 1 every pool and batch normalization of the CNN with BN goes to
  // cuDNN except MaxPoolGrad (cuDNN picks a window's maximal cell by an
  // undocumented rule, the op the first one); at k = 8 an instruction goes to cuDNN exactly when its
  // device holds whole spatial extents (pools) or the whole batch of its
  // channels (training-mode batch normalization), else to its generated
  // kernel.
  for (const char *name : {"cnnbn-1", "cnnbn-8"}) {
    const Plan &plan = planNamed(name);
    if (plan.devices.empty())
      continue;
    Schedule s = scheduled(name, 1);
    std::map<std::string, std::pair<size_t, size_t>> byOp; // cuDNN, kernel
    for (const ScheduledInstr &e : s.instrs) {
      const Instr &in = plan.devices[e.device].instrs[e.index];
      if (in.kind != Instr::Kind::Compute || !isDnnKernel(in.kernel))
        continue;
      bool dnn = false, kernel = false;
      for (const CudaOp &op : e.ops) {
        dnn |= op.kind == CudaOp::Kind::Pool ||
               op.kind == CudaOp::Kind::BatchNorm;
        kernel |= op.kind == CudaOp::Kind::Kernel;
      }
      EXPECT_NE(dnn, kernel) << name << " " << in.kernel;
      ++(dnn ? byOp[in.kernel].first : byOp[in.kernel].second);
      std::vector<CudaOp> ops;
      std::string why = mapDnn(plan, e.device, in, ops);
      EXPECT_EQ(why.empty(), dnn) << name << " " << in.kernel << ": " << why;
      // Whether the device's X holds what cuDNN needs, read from the plan.
      const bool batchNorm = in.kernel.str().rfind("BatchNormalization", 0) == 0;
      // (AveragePoolGrad does not read X: its dX box counts.)
      const bool gradOut = in.kernel == "AveragePoolGrad";
      const size_t xPos = in.kernel == "BatchNormalizationGrad" ||
                                  in.kernel == "MaxPoolGrad"
                              ? 1
                              : 0;
      const Buffer &xb =
          plan.devices[e.device]
              .buffers[gradOut ? in.outputs[0] : in.inputs[xPos]];
      const auto &global =
          gradOut ? in.outputGlobalShapes()[0] : in.inputGlobalShapes()[xPos];
      bool holds = true;
      for (size_t i = batchNorm ? 0 : 2; i < global.size(); ++i)
        if (i != 1 && (xb.region.lo[i] != 0 || xb.region.hi[i] != global[i]))
          holds = false;
      if (!holds)
        EXPECT_FALSE(dnn) << name << " " << in.kernel;
      if (std::string(name) == "cnnbn-1")
        EXPECT_EQ(dnn, in.kernel != "MaxPoolGrad")
            << name << " " << in.kernel << ": " << why;
      if (in.kernel == "MaxPoolGrad")
        EXPECT_NE(why.find("first maximal cell"), std::string::npos) << why;
    }
    for (const auto &[k, counts] : byOp)
      std::printf("%s %s: %zu cuDNN, %zu generated\n", name, k.c_str(),
                  counts.first, counts.second);
    for (const char *k : {"MaxPool", "AveragePool", "BatchNormalization",
                          "BatchNormalizationGrad",
                          "BatchNormalizationNormalized"})
      EXPECT_GT(byOp[k].first, 0u) << name << " " << k;
  }
}

/// The first Compute instruction of `kernel` on device 0 of `plan` (with
/// "tofu.output" `output` when given), or null.
Instr *firstInstr(Plan &plan, const char *kernel, int64_t output = -1) {
  for (Instr &in : plan.devices[0].instrs) {
    if (in.kind != Instr::Kind::Compute || in.kernel != kernel)
      continue;
    if (output < 0)
      return &in;
    for (const Attr &a : in.attrs())
      if (a.name == "tofu.output" && a.i == output)
        return &in;
  }
  return nullptr;
}

void setAttr(Instr &in, Attr a) {
  for (Attr &x : in.editSpec().attrs)
    if (x.name == a.name) {
      x = a;
      return;
    }
  in.editSpec().attrs.push_back(a);
}

Attr intsAttrOf(const char *name, std::vector<int64_t> v);
Attr intAttrOf(const char *name, int64_t v);

TEST(CudaSchedule, DnnMappingRefusesWhatCudnnDoesNotCompute) {
  // Each mutation of a mapped instruction of the CNN with BN (k = 1) must
  // be refused with its reason; the schedule then launches the generated
  // kernel instead.
  struct Case {
    const char *kernel;
    int64_t output;
    const char *why;
    std::function<void(Plan &, Instr &)> mutate;
  };
  auto xBox = [](Plan &plan, Instr &in, size_t pos) -> Box & {
    return plan.devices[0].buffers[in.inputs[pos]].region;
  };
  const std::vector<Case> cases = {
      {"MaxPool", -1, "asymmetric pads",
       [](Plan &, Instr &in) { setAttr(in, intsAttrOf("pads", {1, 1, 0, 1})); }},
      {"MaxPool", -1, "dilations",
       [](Plan &, Instr &in) { setAttr(in, intsAttrOf("dilations", {2, 2})); }},
      {"MaxPool", -1, "not smaller than the window",
       [](Plan &, Instr &in) { setAttr(in, intsAttrOf("pads", {3, 3, 3, 3})); }},
      {"MaxPool", -1, "floor formula",
       [](Plan &plan, Instr &in) {
         // As ceil_mode would make it: one more (partial) window.
         in.editSpec().outputGlobalShapes[0][3] += 1;
         plan.devices[0].buffers[in.outputs[0]].region.hi[3] += 1;
       }},
      {"AveragePool", -1, "auto_pad SAME_UPPER",
       [](Plan &, Instr &in) {
         Attr a;
         a.name = "auto_pad";
         a.kind = Attr::Kind::String;
         a.s = "SAME_UPPER";
         setAttr(in, a);
       }},
      {"MaxPool", -1, "split of a spatial dimension",
       [&](Plan &plan, Instr &in) { xBox(plan, in, 0).hi[2] -= 1; }},
      {"BatchNormalization", 0, "batch split",
       [&](Plan &plan, Instr &in) { xBox(plan, in, 0).lo[0] += 1; }},
      {"BatchNormalizationGrad", -1, "batch split",
       [&](Plan &plan, Instr &in) { xBox(plan, in, 1).hi[3] -= 1; }},
      {"BatchNormalization", 2, "inference-mode running statistic",
       [](Plan &, Instr &in) { setAttr(in, intAttrOf("training_mode", 0)); }},
      {"BatchNormalizationGrad", -1, "inference-mode gradient",
       [](Plan &, Instr &in) { setAttr(in, intAttrOf("training_mode", 0)); }},
  };
  if (planNamed("cnnbn-1").devices.empty())
    return;
  for (const Case &c : cases) {
    Plan plan = planNamed("cnnbn-1");
    Instr *in = firstInstr(plan, c.kernel, c.output);
    ASSERT_NE(in, nullptr) << c.kernel;
    std::vector<CudaOp> ops;
    ASSERT_EQ(mapDnn(plan, 0, *in, ops), "") << c.kernel << " before " << c.why;
    c.mutate(plan, *in);
    ops.clear();
    std::string why = mapDnn(plan, 0, *in, ops);
    EXPECT_NE(why.find(c.why), std::string::npos)
        << c.kernel << ": expected '" << c.why << "', got '" << why << "'";
    EXPECT_TRUE(ops.empty());
    // The schedule launches the instruction's generated kernel instead.
    Schedule s;
    ASSERT_EQ(buildSchedule(plan, 1, s), "") << c.kernel << " " << c.why;
    const int32_t index =
        static_cast<int32_t>(in - plan.devices[0].instrs.data());
    size_t found = 0;
    for (const ScheduledInstr &e : s.instrs)
      if (e.device == 0 && e.index == index) {
        ++found;
        ASSERT_FALSE(e.ops.empty()) << c.kernel;
        EXPECT_EQ(e.ops[0].kind, CudaOp::Kind::Kernel) << c.kernel;
      }
    EXPECT_EQ(found, 1u) << c.kernel;
  }
  // The running statistics' cuDNN factor for the ONNX momentum and the
  // biased variance: m * input + (1 - m) * batch.
  Plan plan = planNamed("cnnbn-1");
  for (int64_t output : {1, 2}) {
    Instr *in = firstInstr(plan, "BatchNormalization", output);
    ASSERT_NE(in, nullptr);
    std::vector<CudaOp> ops;
    ASSERT_EQ(mapDnn(plan, 0, *in, ops), "");
    ASSERT_EQ(ops.size(), 1u);
    const BatchNormCall &bn = ops[0].batchNorm;
    const double m = bn.momentum, n = static_cast<double>(bn.count);
    EXPECT_NEAR(m, 0.9, 1e-6); // a float32 attribute
    EXPECT_EQ(bn.count, 4 * 8 * 8);
    // Input weight after the pre-scale, and the weight of the batch
    // statistic (cuDNN multiplies the variance by n / (n - 1)).
    EXPECT_NEAR(bn.preScale * (1 - bn.factor), m, 1e-12);
    EXPECT_NEAR(bn.factor * (output == 2 ? n / (n - 1) : 1.0), 1 - m, 1e-12);
  }
}

Attr intsAttrOf(const char *name, std::vector<int64_t> v) {
  Attr a;
  a.name = name;
  a.kind = Attr::Kind::Ints;
  a.ints = std::move(v);
  return a;
}
Attr intAttrOf(const char *name, int64_t v) {
  Attr a;
  a.name = name;
  a.kind = Attr::Kind::Int;
  a.i = v;
  return a;
}
Attr floatAttrOf(const char *name, double v) {
  Attr a;
  a.name = name;
  a.kind = Attr::Kind::Float;
  a.f = v;
  return a;
}

/// A whole float32 tensor of `shape` at `data` (lo 0, global = local: a
/// library call sees only the device's local box).
tofu::runtime::TensorView whole(void *data, const std::vector<int64_t> &shape) {
  return tofu::runtime::TensorView::whole(data, DType::F32, shape);
}

/// Runs CPU kernel `name` on whole local tensors: the semantics the
/// emulator gives a cuDNN call with the call's own parameters.
std::string runCpuKernel(const char *name,
                         std::vector<tofu::runtime::TensorView> inputs,
                         std::vector<tofu::runtime::TensorView> outputs,
                         const std::vector<Attr> &attrs) {
  tofu::runtime::KernelFn fn = tofu::runtime::lookupKernel(name);
  if (!fn)
    return std::string("no CPU kernel ") + name;
  tofu::runtime::KernelArgs args;
  args.inputs = std::move(inputs);
  args.outputs = std::move(outputs);
  args.attrs = &attrs;
  std::string err = fn(args);
  return err.empty() ? "" : std::string(name) + " on the host: " + err;
}

/// cuDNN's convolution (CudaConv.h) with the CPU kernels' semantics.
std::string emulateConv(const CudaOp &op, float *x, float *w, float *y) {
  std::vector<int64_t> yShape = {op.x[0], op.w[0]};
  for (size_t s = 0; s + 2 < op.x.size(); ++s)
    yShape.push_back((op.x[s + 2] + op.padsBegin[s] + op.padsEnd[s] -
                      op.dilations[s] * (op.w[s + 2] - 1) - 1) /
                         op.strides[s] +
                     1);
  std::vector<int64_t> pads = op.padsBegin;
  pads.insert(pads.end(), op.padsEnd.begin(), op.padsEnd.end());
  const std::vector<Attr> attrs = {intsAttrOf("strides", op.strides),
                                   intsAttrOf("dilations", op.dilations),
                                   intsAttrOf("pads", pads),
                                   intAttrOf("group", op.group)};
  auto X = whole(x, op.x), W = whole(w, op.w), Y = whole(y, yShape);
  switch (op.convDirection) {
  case 0:
    return runCpuKernel("Conv", {X, W}, {Y}, attrs);
  case 1:
    return runCpuKernel("ConvGradInput", {Y, W, X}, {X}, attrs);
  default:
    return runCpuKernel("ConvGradWeight", {Y, X, W}, {W}, attrs);
  }
}

/// cuDNN's pooling (CudaPool.h) with the CPU kernels' semantics.
std::string emulatePool(const PoolCall &call,
                        const std::array<float *, kNumDnnOperands> &p) {
  std::vector<int64_t> pads = call.pads;
  pads.insert(pads.end(), call.pads.begin(), call.pads.end());
  const std::vector<Attr> attrs = {
      intsAttrOf("kernel_shape", call.window),
      intsAttrOf("strides", call.strides), intsAttrOf("pads", pads),
      intAttrOf("count_include_pad",
                call.mode == PoolCall::Mode::AverageIncludePad)};
  if (call.backward)
    return call.mode == PoolCall::Mode::Max
               ? "cuDNN max-pooling backward is never scheduled"
               : runCpuKernel("AveragePoolGrad",
                              {whole(p[kDnnDy], call.y), whole(p[kDnnX], call.x)},
                              {whole(p[kDnnDx], call.x)}, attrs);
  return runCpuKernel(call.mode == PoolCall::Mode::Max ? "MaxPool"
                                                       : "AveragePool",
                      {whole(p[kDnnX], call.x)}, {whole(p[kDnnY], call.y)},
                      attrs);
}

/// cuDNN's batch normalization (CudaBatchNorm.h): Y, Xhat and dX with the
/// CPU kernels' semantics; a running statistic as cuDNN computes it (the
/// copied input statistic scaled by preScale, then the exponential average
/// with `factor` of the batch mean or the UNBIASED batch variance), so that
/// the conversion from the ONNX momentum is checked against the CPU backend.
std::string emulateBatchNorm(const BatchNormCall &call,
                             const std::array<float *, kNumDnnOperands> &p) {
  const int64_t N = call.x[0], C = call.x[1];
  int64_t inner = 1;
  for (size_t i = 2; i < call.x.size(); ++i)
    inner *= call.x[i];
  std::vector<float> ones(C, 1.0f), zeros(C, 0.0f);
  auto param = [&](int which, std::vector<float> &fallback) {
    return whole(p[which] ? p[which] : fallback.data(), {C});
  };
  auto X = whole(p[kDnnX], call.x);
  const bool training = call.kind == BatchNormCall::Kind::TrainingForward ||
                        call.kind == BatchNormCall::Kind::Backward;
  const std::vector<Attr> attrs = {floatAttrOf("epsilon", call.epsilon),
                                   intAttrOf("training_mode", training),
                                   intAttrOf("tofu.output", 0)};
  switch (call.kind) {
  case BatchNormCall::Kind::TrainingForward:
  case BatchNormCall::Kind::InferenceForward:
    return runCpuKernel(
        "BatchNormalization",
        {X, call.unitAffine ? whole(ones.data(), {C}) : param(kDnnScale, ones),
         call.unitAffine ? whole(zeros.data(), {C}) : param(kDnnBias, zeros),
         param(kDnnMean, zeros), param(kDnnVar, ones)},
        {whole(p[kDnnY], call.x)}, attrs);
  case BatchNormCall::Kind::Backward:
    return runCpuKernel("BatchNormalizationGrad",
                        {whole(p[kDnnDy], call.x), X, param(kDnnScale, ones),
                         whole(zeros.data(), {C}), whole(ones.data(), {C})},
                        {whole(p[kDnnDx], call.x)}, attrs);
  case BatchNormCall::Kind::RunningMean:
  case BatchNormCall::Kind::RunningVar: {
    const bool mean = call.kind == BatchNormCall::Kind::RunningMean;
    float *out = p[kDnnY];
    const float *in = p[mean ? kDnnMean : kDnnVar];
    const double count = static_cast<double>(N * inner);
    for (int64_t c = 0; c < C; ++c) {
      double sum = 0, sq = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < inner; ++s)
          sum += p[kDnnX][(n * C + c) * inner + s];
      const double mu = sum / count;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < inner; ++s) {
          double dv = p[kDnnX][(n * C + c) * inner + s] - mu;
          sq += dv * dv;
        }
      const double unbiased = sq / (count - 1);
      const float start = static_cast<float>(in[c] * call.preScale);
      out[c] = static_cast<float>((1 - call.factor) * start +
                                  call.factor * (mean ? mu : unbiased));
    }
    return "";
  }
  }
  return "unknown batch-normalization call";
}

/// Runs a schedule on the host, as the executor would on GPUs: one byte
/// array per GPU laid out by the mapping; generated kernels through their
/// host drivers (the plan's CUDA source compiled as plain C++ and loaded
/// with dlopen); GEMMs, the Gemm bias, copies, box copies/adds, memsets and
/// the loss slot as loops with the semantics the executor's CUDA calls have.
/// Entries run in a random order that respects only stream order and the
/// waits, so a missing dependency shows up as a wrong result.
class HostEmulator {
public:
  HostEmulator(const Plan &plan, const Schedule &s) : plan(plan), s(s) {}
  ~HostEmulator() {
    if (lib)
      dlclose(lib);
  }

  std::string init(const std::string &tag) {
    // One host library per plan (`tag`), compiled once per test run.
    static std::set<std::string> compiled;
    const CudaTestArgs &args = cudaTestArgs;
    std::string src = args.workdir + "/" + tag + ".host.cpp";
    std::string so = args.workdir + "/" + tag + ".host.so";
    if (!compiled.count(tag)) {
      std::ofstream(src) << plan.cuda.source;
      if (shell(args.hostCxx +
                " -std=c++17 -O1 -ffp-contract=off -fPIC -shared "
                          "-w -o " + so + " " + src) != 0)
        return "compiling the generated source as C++ failed";
      compiled.insert(tag);
    }
    lib = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      return std::string("dlopen: ") + dlerror();
    // Per kernel the host driver of each variant it has (CudaKernelLaunch.h:
    // the one the executor would launch is run).
    for (const CudaKernel &k : plan.cuda.kernels) {
      std::array<HostFn, 5> variants = {};
      for (auto v : {KernelLaunchConfig::Variant::Element,
                     KernelLaunchConfig::Variant::Block,
                     KernelLaunchConfig::Variant::Row,
                     KernelLaunchConfig::Variant::RowWarp,
                     KernelLaunchConfig::Variant::Grid}) {
        std::string driver = k.name + variantSuffix(v) + "_host";
        variants[static_cast<size_t>(v)] =
            reinterpret_cast<HostFn>(dlsym(lib, driver.c_str()));
      }
      if (!variants[0])
        return "no host driver " + k.name + "_host";
      fns.push_back(variants);
    }
    mem.resize(s.mapping.numGpus);
    for (int32_t g = 0; g < s.mapping.numGpus; ++g)
      mem[g].assign(s.mapping.gpuBytes[g] + s.tableBytes[g], 0);
    // The MultiFetch piece tables after the slices, as the executor writes
    // them (with host addresses).
    for (const MultiFetchTable &t : s.tables) {
      std::vector<uint8_t> bytes;
      resolveMultiFetchTable(
          t,
          [&](const DevicePointer &p) {
            return reinterpret_cast<uint64_t>(ptr(p));
          },
          bytes);
      std::memcpy(tableAt(t), bytes.data(), bytes.size());
    }
    for (size_t d = 0; d < plan.devices.size(); ++d)
      for (const Buffer &b : plan.devices[d].buffers)
        if (!b.init.empty())
          std::memcpy(ptr({static_cast<int32_t>(d), b.offset}), b.init.data(),
                      b.bytes);
    return "";
  }

  std::string runStep(int64_t step, uint32_t seed) {
    // The batches through the executor's pinned staging area (CudaFeed.h):
    // as there, the synthetic batches filled into one slot each before the
    // first step, then copied from the step's slot.
    if (pinned.empty()) {
      feed = feedLayout(plan, [](int32_t) { return true; });
      feedCached = cacheSyntheticBatches(
          feed, tofu::runtime::SyntheticData::kNumBatches);
      pinned.assign(std::max<uint64_t>(feed.areaBytes(), 1), 0);
      for (int64_t b = 0; feedCached && b < feed.slots; ++b)
        if (std::string err = fillFeed(plan, feed, syntheticFill(), b,
                                       pinned.data());
            !err.empty())
          return err;
    }
    if (!feedCached)
      if (std::string err =
              fillFeed(plan, feed, syntheticFill(), step, pinned.data());
          !err.empty())
        return err;
    const uint8_t *slot = pinned.data() + feed.slotOffset(step);
    for (const FeedCopy &c : feed.copies)
      std::memcpy(ptr(c.dst), slot + c.staging, c.bytes);
    for (const auto &key : fedSnapshots)
      snapshot(key);
    // Per stream its entries in issue order; run any stream's head whose
    // waits are done.
    std::map<int32_t, std::vector<int32_t>> queues;
    for (size_t e = 0; e < s.instrs.size(); ++e)
      queues[s.instrs[e].device * 2 + static_cast<int>(s.instrs[e].stream)]
          .push_back(static_cast<int32_t>(e));
    std::vector<size_t> head(2 * plan.devices.size(), 0);
    std::vector<bool> done(s.instrs.size(), false);
    std::mt19937 rng(seed);
    for (size_t ran = 0; ran < s.instrs.size();) {
      std::vector<int32_t> ready;
      for (auto &[st, q] : queues) {
        if (head[st] >= q.size())
          continue;
        bool ok = true;
        for (int32_t w : s.instrs[q[head[st]]].waits)
          ok &= done[w];
        if (ok)
          ready.push_back(st);
      }
      if (ready.empty())
        return "deadlock: no stream can proceed";
      int32_t st = ready[rng() % ready.size()];
      int32_t e = queues[st][head[st]++];
      if (std::string err = runEntry(s.instrs[e], step); !err.empty())
        return err;
      for (const auto &key : snapshotsAfter.empty()
                                 ? std::vector<std::pair<int32_t, int32_t>>()
                                 : snapshotsAfter[e])
        snapshot(key);
      done[e] = true;
      ++ran;
    }
    return "";
  }

  double loss() const { return lossSlot; }
  /// MultiFetch/MultiReduce launches run so far.
  size_t multiFetchLaunches = 0;
  /// Generated-kernel launches run per variant (element, block, row).
  std::array<uint64_t, 5> variantLaunches = {};
  /// Emulate TOFU_CUDA_WARP_ROWS=1 (short rows on a warp each).
  bool warpRows = false;

  /// --dump as the executor does it: each of `buffers` copied after the
  /// entry snapshotPoints names, or after the feed when no entry writes it.
  void watch(const std::vector<std::pair<int32_t, int32_t>> &buffers) {
    snapshotsAfter = snapshotPoints(plan, s, buffers);
    std::set<std::pair<int32_t, int32_t>> written;
    for (const auto &list : snapshotsAfter)
      written.insert(list.begin(), list.end());
    for (const auto &key : buffers)
      if (!written.count(key))
        fedSnapshots.push_back(key);
  }
  tofu::runtime::BufferSource snapshots() const {
    return tofu::runtime::copiesSource(snaps);
  }
  /// Reads the emulated GPUs' memory, as cudaMemcpy does in the executor.
  DeviceReader reader() {
    return [this](int32_t gpu, uint64_t offset, uint64_t bytes,
                  uint8_t *out) -> std::string {
      if (offset + bytes > mem[gpu].size())
        return "outside GPU " + std::to_string(gpu) + "'s allocation";
      std::memcpy(out, mem[gpu].data() + offset, bytes);
      return "";
    };
  }
  const uint8_t *buffer(int32_t d, int32_t b) {
    return ptr({d, plan.devices[d].buffers[b].offset});
  }

private:
  using HostFn = void (*)(void *const *, const int64_t *, uint64_t,
                          unsigned long long *);
  uint8_t *ptr(const DevicePointer &p) {
    const DevicePlacement &pl = s.mapping.devices[p.device];
    return mem[pl.gpu].data() + pl.base + p.offset;
  }
  uint8_t *tableAt(const MultiFetchTable &t) {
    return mem[t.gpu].data() + s.mapping.gpuBytes[t.gpu] + t.offset;
  }
  void snapshot(const std::pair<int32_t, int32_t> &key) {
    const Buffer &b = plan.devices[key.first].buffers[key.second];
    const uint8_t *p = ptr({key.first, b.offset});
    snaps[key].assign(p, p + b.bytes);
  }

  std::string runEntry(const ScheduledInstr &e, int64_t step) {
    for (const CudaOp &op : e.ops) {
      switch (op.kind) {
      case CudaOp::Kind::Kernel: {
        const CudaLaunch &l = plan.cuda.launches[op.launch];
        std::vector<void *> ptrs;
        for (int32_t b : l.buffers)
          ptrs.push_back(b < 0 ? nullptr
                               : ptr({l.device,
                                      plan.devices[l.device].buffers[b].offset}));
        unsigned long long error[12] = {0};
        // A warp per short row where the plan has `_rowwarp` and the
        // executor's TOFU_CUDA_WARP_ROWS=1 is emulated (`warpRows`).
        const KernelLaunchConfig config = kernelLaunchConfig(
            plan.cuda.kernels[l.kernel], l, kEmulatedMultiprocessors,
            warpRows && fns[l.kernel][static_cast<size_t>(
                            KernelLaunchConfig::Variant::RowWarp)] != nullptr,
            fns[l.kernel][static_cast<size_t>(
                KernelLaunchConfig::Variant::Grid)] != nullptr);
        auto fn = fns[l.kernel][static_cast<size_t>(config.variant)];
        ++variantLaunches[static_cast<size_t>(config.variant)];
        if (!fn)
          return "no host driver " + plan.cuda.kernels[l.kernel].name +
                 variantSuffix(config.variant) + "_host";
        fn(ptrs.data(), l.params.data(),
                      static_cast<uint64_t>(step), error);
        if (error[0])
          return "kernel " + plan.cuda.kernels[l.kernel].name +
                 " read outside its buffer";
        break;
      }
      case CudaOp::Kind::Gemm:
        // Operands of `op.dtype`, loaded and stored as the CPU backend does.
        for (int64_t b = 0; b < op.batch; ++b) {
          const uint8_t *A = ptr(op.a) + b * op.strideA * op.elementSize;
          const uint8_t *B = ptr(op.b) + b * op.strideB * op.elementSize;
          uint8_t *C = ptr(op.c) + b * op.strideC * op.elementSize;
          auto load = [&](const uint8_t *p, int64_t i) {
            return tofu::runtime::loadElement(p, op.dtype, i);
          };
          for (int64_t i = 0; i < op.m; ++i)
            for (int64_t j = 0; j < op.n; ++j) {
              double acc = 0;
              for (int64_t q = 0; q < op.k; ++q)
                acc += load(A, op.transA ? q * op.lda + i : i * op.lda + q) *
                       load(B, op.transB ? j * op.ldb + q : q * op.ldb + j);
              const int64_t at = i * op.ldc + j;
              double v =
                  op.alpha * acc + (op.beta != 0 ? op.beta * load(C, at) : 0.0);
              // cuBLASLt's epilogue: the bias, then the ReLU (CudaBlas.h).
              if (op.bias.device >= 0)
                v += load(ptr(op.bias), j);
              if (op.relu && v < 0)
                v = 0;
              tofu::runtime::storeElement(C, op.dtype, at, v);
            }
        }
        break;
      case CudaOp::Kind::GemmBias:
        for (int64_t i = 0; i < op.m; ++i)
          for (int64_t j = 0; j < op.n; ++j)
            tofu::runtime::storeElement(
                ptr(op.dst), op.dtype, i * op.n + j,
                op.beta * tofu::runtime::loadElement(
                              ptr(op.c), op.dtype,
                              i * op.cRowStride + j * op.cColStride));
        break;
      case CudaOp::Kind::Conv:
        if (std::string err = emulateConv(
                op, reinterpret_cast<float *>(ptr(op.a)),
                reinterpret_cast<float *>(ptr(op.b)),
                reinterpret_cast<float *>(ptr(op.c)));
            !err.empty())
          return err;
        break;
      case CudaOp::Kind::Pool:
      case CudaOp::Kind::BatchNorm: {
        std::array<float *, kNumDnnOperands> p{};
        for (int i = 0; i < kNumDnnOperands; ++i)
          if (op.dnn[i].device >= 0)
            p[i] = reinterpret_cast<float *>(ptr(op.dnn[i]));
        std::string err = op.kind == CudaOp::Kind::Pool
                              ? emulatePool(op.pool, p)
                              : emulateBatchNorm(op.batchNorm, p);
        if (!err.empty())
          return err;
        break;
      }
      case CudaOp::Kind::Copy:
        std::memmove(ptr(op.dst), ptr(op.src), op.bytes);
        break;
      case CudaOp::Kind::Zero:
        std::memset(ptr(op.dst), 0, op.bytes);
        break;
      case CudaOp::Kind::BoxCopy:
      case CudaOp::Kind::BoxAdd: {
        const BoxMove &bm = op.box;
        int64_t n = 1;
        for (int r = 0; r < bm.rank; ++r)
          n *= bm.region[r];
        const uint8_t *src = ptr(op.src);
        uint8_t *dst = ptr(op.dst);
        for (int64_t el = 0; el < n; ++el) {
          int64_t rest = el, so = 0, dof = 0, ss = 1, ds = 1;
          for (int r = bm.rank - 1; r >= 0; --r) {
            int64_t c = rest % bm.region[r];
            rest /= bm.region[r];
            so += (bm.srcStart[r] + c) * ss;
            dof += (bm.dstStart[r] + c) * ds;
            ss *= bm.srcExtents[r];
            ds *= bm.dstExtents[r];
          }
          const uint8_t *sp = src + so * op.elementSize;
          uint8_t *dp = dst + dof * op.elementSize;
          if (op.kind == CudaOp::Kind::BoxCopy)
            std::memcpy(dp, sp, op.elementSize);
          else if (op.dtype == DType::F32)
            *reinterpret_cast<float *>(dp) += *reinterpret_cast<const float *>(sp);
          else if (op.dtype == DType::I64)
            *reinterpret_cast<int64_t *>(dp) +=
                *reinterpret_cast<const int64_t *>(sp);
          else if (op.dtype == DType::Bool)
            *dp = (*dp | *sp) ? 1 : 0;
          else // in double, converted back, as the box-add kernel does
            tofu::runtime::storeElement(
                dp, op.dtype, 0,
                tofu::runtime::loadElement(dp, op.dtype, 0) +
                    tofu::runtime::loadElement(sp, op.dtype, 0));
        }
        break;
      }
      case CudaOp::Kind::SaveLoss:
        lossSlot = tofu::runtime::loadElement(ptr(op.src), op.dtype, 0);
        break;
      case CudaOp::Kind::Send:
      case CudaOp::Kind::Recv:
        return "an NCCL call in a one-process schedule";
      case CudaOp::Kind::MultiFetch:
      case CudaOp::Kind::MultiReduce: {
        // The kernel's element function on the table in emulated GPU
        // memory, items in reverse order (they must not depend on order).
        const uint8_t *table = tableAt(s.tables[op.table]);
        MultiFetchHeader h;
        std::memcpy(&h, table, sizeof(h));
        const auto *pieces =
            reinterpret_cast<const MultiFetchPiece *>(table + sizeof(h));
        for (int64_t item = h.items; item-- > 0;)
          multiFetchItem(h, pieces, item);
        ++multiFetchLaunches;
        break;
      }
      }
    }
    return "";
  }

  const Plan &plan;
  const Schedule &s;
  void *lib = nullptr;
  std::vector<std::array<HostFn, 5>> fns;
  std::vector<std::vector<uint8_t>> mem;
  double lossSlot = 0;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> snapshotsAfter;
  std::vector<std::pair<int32_t, int32_t>> fedSnapshots;
  /// The executor's feed (CudaFeed.h): layout and pinned area.
  FeedLayout feed;
  std::vector<uint8_t> pinned;
  bool feedCached = false;
  FeedFill syntheticFill() const {
    return [this](int32_t tensor, const Box &region, int64_t step, void *out) {
      return tofu::runtime::SyntheticData(plan).fill(
          tensor, region, step % tofu::runtime::SyntheticData::kNumBatches,
          out);
    };
  }
  tofu::runtime::BufferCopies snaps;
};

/// The schedule run on the host (several random stream interleavings)
/// against the CPU backend interpreting the TDL programs: the same losses
/// and parameters, within fp32 tolerance for a float32 plan, 1e-10 relative
/// for a float64 one (the GEMMs sum in a different order). This checks every offset, GEMM parameter, box, launch argument
/// and the virtual device layout the executor will use.
/// `launches`: where to add the generated-kernel launches the emulator ran
/// per variant (KernelLaunchConfig::Variant: element, block, row).
void expectEmulationMatchesCpu(const std::string &name, int32_t gpus,
                               int steps, bool interpreter = true,
                               std::array<uint64_t, 5> *launches = nullptr,
                               bool warpRows = false) {
  const Plan &plan = planNamed(name);
  if (plan.devices.empty())
    return;
  Schedule s = scheduled(name, gpus);
  tofu::runtime::CpuExecutor cpu(plan);
  cpu.preferInterpreter(interpreter);
  ASSERT_EQ(cpu.init(), "");
  ASSERT_EQ(cpu.watchLoss(), "");
  HostEmulator emu(plan, s);
  emu.warpRows = warpRows;
  ASSERT_EQ(emu.init(name), "");
  const double lossTol =
      parameterTolerance(plan.tensors[plan.lossTensor].dtype);
  for (int step = 0; step < steps; ++step) {
    ASSERT_EQ(cpu.runStep(step), "");
    ASSERT_EQ(emu.runStep(step, 1234 + step), "") << name;
    double want = 0;
    ASSERT_EQ(cpu.lastLoss(want), "");
    EXPECT_NEAR(emu.loss(), want, lossTol * (0.1 + std::fabs(want)))
        << name << " on " << gpus << " GPUs, step " << step + 1;
  }
  // The traffic counted from the schedule is what the CPU backend measured
  // (bytes received from other devices, per device).
  EXPECT_EQ(countTraffic(plan, s).receivedPerDevice, cpu.commBytesPerDevice())
      << name << " on " << gpus << " GPUs";
  expectParametersMatch(
      plan,
      [&emu](int32_t d, int32_t b) { return emu.buffer(d, b); },
      [&cpu](int32_t d, int32_t b) { return cpu.bufferData(d, b); },
      name + " on " + std::to_string(gpus) + " GPUs");
  // The plan's Fetch/Reduce ran as MultiFetch/MultiReduce through the
  // kernel's element function (CudaMultiFetch.h).
  if (plan.devices.size() > 1)
    EXPECT_GT(emu.multiFetchLaunches, 0u) << name;
  if (launches)
    for (size_t v = 0; v < launches->size(); ++v)
      (*launches)[v] += emu.variantLaunches[v];
}

TEST(CudaScheduleOnHost, MlpMatchesTheCpuBackend) {
  expectEmulationMatchesCpu("mlp-1", 1, 3);
  expectEmulationMatchesCpu("mlp-8", 1, 3);
  expectEmulationMatchesCpu("mlp-8", 3, 3);
  expectEmulationMatchesCpu("mlp-8", 8, 3);
}

TEST(CudaScheduleOnHost, Float64MlpMatchesTheCpuBackend) {
  // cublasDgemm, the f64 Gemm bias, f64 box adds and loss, generated f64
  // kernels: the float64 losses and parameters to 1e-10.
  expectEmulationMatchesCpu("mlp64-1", 1, 3);
  expectEmulationMatchesCpu("mlp64-8", 1, 3);
  expectEmulationMatchesCpu("mlp64-8", 3, 3);
}

TEST(CudaScheduleOnHost, RnnAndGptMatchTheCpuBackend) {
  expectEmulationMatchesCpu("rnn-8", 1, 2);
  // GPT's LayerNormalization and loss gradient run their row variants as
  // on the GPU (CudaKernelLaunch.h), its loss the grid variant: a block
  // per token, and with the
  // executor's TOFU_CUDA_WARP_ROWS=1 a warp per token (rows of 16 and 32
  // elements, `_rowwarp`).
  using V = KernelLaunchConfig::Variant;
  std::array<uint64_t, 5> launches = {}, warpLaunches = {};
  expectEmulationMatchesCpu("gpt-8", 2, 2, true, &launches);
  expectEmulationMatchesCpu("gpt-8", 2, 2, true, &warpLaunches,
                            /*warpRows=*/true);
  if (!planNamed("gpt-8").devices.empty()) {
    EXPECT_GT(launches[static_cast<size_t>(V::Row)], 0u);
    EXPECT_EQ(launches[static_cast<size_t>(V::RowWarp)], 0u);
    EXPECT_GT(warpLaunches[static_cast<size_t>(V::RowWarp)], 0u);
    // The loss (one element a device) on its grid variant (`_grid`).
    EXPECT_GT(launches[static_cast<size_t>(V::Grid)], 0u);
  }
}

TEST(CudaScheduleOnHost, FoldedGemmsMatchTheCpuBackend) {
  // GPT at k = 1 with its broadcast-B MatMuls folded into one GEMM of
  // batch * seq rows (CudaSchedule.BroadcastBMatMulsBecomeOneGemmOfBatchRows).
  expectEmulationMatchesCpu("gpt-1", 1, 2);
}

TEST(CudaScheduleOnHost, ConvPoolAndBatchNormMatchTheCpuBackend) {
  // cuDNN convolutions, pools and batch normalizations (with the running
  // statistics written back) emulated with the CPU kernels' semantics and
  // the calls' own parameters, next to the generated kernels where the
  // mapping does not apply.
  // The CPU backend runs its native kernels here: the interpreter takes
  // about a minute per step of training-mode batch normalization.
  expectEmulationMatchesCpu("cnn-1", 1, 2, false);
  expectEmulationMatchesCpu("cnn-8", 2, 2, false);
  expectEmulationMatchesCpu("cnnbn-1", 1, 3, false);
  expectEmulationMatchesCpu("cnnbn-8", 1, 3, false);
  expectEmulationMatchesCpu("cnnbn-8", 8, 2, false);
  // The strided 1x1 shortcut convolution on cuDNN, at k = 2 with X held
  // without its last row and column (AStridedConvolutionReadingPartOfX...).
  expectEmulationMatchesCpu("cnnbnsc-1", 1, 3, false);
  expectEmulationMatchesCpu("cnnbnsc-2", 1, 3, false);
  expectEmulationMatchesCpu("cnnbnsc-2", 2, 3, false);
}

TEST(CudaScheduleOnHost, Bf16MlpAndGptMatchTheCpuBackend) {
  // tofuc --precision bf16: the GEMMs and their gradients are bf16
  // cublasGemmEx calls (float32 compute type), the casts, bias gradients and
  // everything else generated kernels; float32 weights and loss.
  for (const char *name : {"mlpbf16-1", "mlpbf16-8", "gptbf16-8"}) {
    const Plan &plan = planNamed(name);
    if (plan.devices.empty())
      continue;
    Schedule s = scheduled(name, 1);
    int bf16Gemms = 0;
    for (const ScheduledInstr &e : s.instrs)
      for (const CudaOp &op : e.ops)
        bf16Gemms += op.kind == CudaOp::Kind::Gemm && op.dtype == DType::BF16;
    EXPECT_GT(bf16Gemms, 0) << name;
    for (const TensorInfo &t : plan.tensors)
      if (t.role == TensorRole::Param)
        EXPECT_NE(t.dtype, DType::BF16) << name << ": " << t.name;
  }
  expectEmulationMatchesCpu("mlpbf16-1", 1, 3, false);
  expectEmulationMatchesCpu("mlpbf16-8", 3, 3, false);
  expectEmulationMatchesCpu("gptbf16-8", 2, 2, false);
}

TEST(CudaScheduleOnHost, AMissingWaitChangesTheResult) {
  // The emulator is sensitive to the events: without its waits, a
  // communication stream runs ahead of the producers and the losses differ.
  const Plan &plan = planNamed("mlp-8");
  if (plan.devices.empty())
    return;
  Schedule s = scheduled("mlp-8", 1);
  for (ScheduledInstr &e : s.instrs)
    if (e.stream == StreamKind::Comm)
      e.waits.clear();
  tofu::runtime::CpuExecutor cpu(plan);
  cpu.preferInterpreter(true);
  ASSERT_EQ(cpu.init(), "");
  ASSERT_EQ(cpu.watchLoss(), "");
  HostEmulator emu(plan, s);
  ASSERT_EQ(emu.init("mlp-8"), "");
  bool differs = false;
  for (int step = 0; step < 3; ++step) {
    ASSERT_EQ(cpu.runStep(step), "");
    ASSERT_EQ(emu.runStep(step, 99 + step), "");
    double want = 0;
    ASSERT_EQ(cpu.lastLoss(want), "");
    differs |= !(std::fabs(emu.loss() - want) <= 1e-4 * (1 + std::fabs(want)));
  }
  EXPECT_TRUE(differs);
}

/// Compares tensor `t` assembled from two sources: bit for bit, or for f32
/// within fp32 tolerance.
void expectSameTensor(const Plan &plan, int32_t t,
                      const tofu::runtime::BufferSource &got,
                      const tofu::runtime::BufferSource &want, bool exact,
                      const std::string &what) {
  std::vector<uint8_t> a, b;
  ASSERT_EQ(tofu::runtime::assembleTensor(plan, t, got, a), "") << what;
  ASSERT_EQ(tofu::runtime::assembleTensor(plan, t, want, b), "") << what;
  ASSERT_EQ(a.size(), b.size()) << what;
  const TensorInfo &info = plan.tensors[t];
  if (exact || info.dtype != DType::F32) {
    EXPECT_EQ(a, b) << what << ": " << info.name;
    return;
  }
  const float *x = reinterpret_cast<const float *>(a.data());
  const float *y = reinterpret_cast<const float *>(b.data());
  for (size_t i = 0; i < a.size() / 4; ++i)
    ASSERT_NEAR(x[i], y[i], 1e-5 + 1e-4 * std::fabs(y[i]))
        << what << ": " << info.name << " element " << i;
}

/// What tofu-run --backend cuda --dump and --save produce, from the
/// emulated GPUs' memory through locateBuffers/HostBufferCopies and
/// snapshotPoints, against the CPU backend's (TDL interpreter): inputs and
/// labels bit for bit, gradients, parameters and optimizer state within
/// fp32 tolerance, the --save files (model and training state) bit for bit,
/// and read back by resumeCheckpoint alike.
void expectSaveAndDumpMatchCpu(const std::string &name, int32_t gpus,
                               int steps) {
  const Plan &plan = planNamed(name);
  if (plan.devices.empty())
    return;
  const std::string what = name + " on " + std::to_string(gpus) + " GPUs";
  Schedule s = scheduled(name, gpus);
  tofu::runtime::CpuExecutor cpu(plan);
  cpu.preferInterpreter(true);
  HostEmulator emu(plan, s);
  // The buffers tofu-run --dump watches.
  std::vector<std::pair<int32_t, int32_t>> dumped;
  std::vector<int32_t> dumpedTensors;
  for (size_t t = 0; t < plan.tensors.size(); ++t) {
    const TensorInfo &info = plan.tensors[t];
    if (info.role == TensorRole::Input || info.role == TensorRole::Label ||
        info.gradientOf >= 0)
      dumpedTensors.push_back(static_cast<int32_t>(t));
  }
  for (size_t d = 0; d < plan.devices.size(); ++d)
    for (size_t b = 0; b < plan.devices[d].buffers.size(); ++b) {
      const Buffer &buf = plan.devices[d].buffers[b];
      const TensorInfo &info = plan.tensors[buf.tensor];
      if (buf.owned && (info.role == TensorRole::Input ||
                        info.role == TensorRole::Label || info.gradientOf >= 0))
        dumped.push_back({static_cast<int32_t>(d), static_cast<int32_t>(b)});
    }
  ASSERT_FALSE(dumped.empty());
  for (const auto &[d, b] : dumped)
    cpu.watch(d, b);
  emu.watch(dumped);
  ASSERT_EQ(cpu.init(), "");
  ASSERT_EQ(emu.init(name), "");
  auto cpuSnapshots = [&cpu](int32_t d, int32_t b) -> const uint8_t * {
    const std::vector<uint8_t> *v = cpu.snapshot(d, b);
    return v ? v->data() : nullptr;
  };
  size_t gradients = 0;
  for (int step = 0; step < steps; ++step) {
    ASSERT_EQ(cpu.runStep(step), "");
    ASSERT_EQ(emu.runStep(step, 777 + step), "");
    for (int32_t t : dumpedTensors) {
      const bool exact = plan.tensors[t].gradientOf < 0;
      gradients += !exact;
      expectSameTensor(plan, t, emu.snapshots(), cpuSnapshots, exact,
                       what + " step " + std::to_string(step + 1) + " dump");
    }
  }
  EXPECT_GT(gradients, 0u) << what;
  // --save: parameters and optimizer state read back from the GPUs.
  HostBufferCopies copies;
  ASSERT_EQ(copies.read(
                plan, s.mapping,
                [&plan](int32_t t) { return savedTensor(plan.tensors[t]); },
                emu.reader()),
            "");
  auto cpuLive = [&cpu](int32_t d, int32_t b) { return cpu.bufferData(d, b); };
  size_t saved = 0;
  for (size_t t = 0; t < plan.tensors.size(); ++t)
    if (savedTensor(plan.tensors[t])) {
      expectSameTensor(plan, static_cast<int32_t>(t), copies.source(), cpuLive,
                       false, what + " saved");
      ++saved;
    }
  EXPECT_GT(saved, 0u);
  // The same file name in two folders: the model names its state file.
  const std::string dir = cudaTestArgs.workdir + "/save-" + name + "-" +
                          std::to_string(gpus);
  const std::string cudaFile = dir + "/cuda/trained.onnx",
                    cpuFile = dir + "/cpu/trained.onnx";
  std::filesystem::create_directories(dir + "/cuda");
  std::filesystem::create_directories(dir + "/cpu");
  ASSERT_EQ(tofu::runtime::saveCheckpoint(plan, copies.source(), steps,
                                          cudaFile),
            "");
  ASSERT_EQ(tofu::runtime::saveCheckpoint(plan, cpuLive, steps, cpuFile), "");
  // Bit for bit: the model and the training-state file next to it (the
  // emulator's GEMMs sum in double in the TDL interpreter's order, so the
  // values agree exactly; on a GPU cuBLAS does not, and the GPU test
  // compares within fp32 tolerance).
  auto bytesOf = [](const std::filesystem::path &path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
  };
  auto stateFileIn = [](const std::string &folder) {
    for (const auto &entry : std::filesystem::directory_iterator(folder))
      if (entry.path().filename().string().rfind(
              "trained.onnx.tofu-state-", 0) == 0)
        return entry.path();
    return std::filesystem::path();
  };
  EXPECT_TRUE(bytesOf(cudaFile) == bytesOf(cpuFile))
      << what << ": the saved models differ";
  ASSERT_FALSE(stateFileIn(dir + "/cuda").empty()) << what;
  EXPECT_EQ(stateFileIn(dir + "/cuda").filename(),
            stateFileIn(dir + "/cpu").filename());
  EXPECT_TRUE(bytesOf(stateFileIn(dir + "/cuda")) ==
              bytesOf(stateFileIn(dir + "/cpu")))
      << what << ": the saved training states differ";
  Plan fromCuda = plan, fromCpu = plan;
  int64_t stepCuda = -1, stepCpu = -1;
  ASSERT_EQ(tofu::runtime::resumeCheckpoint(cudaFile, fromCuda, stepCuda),
            "");
  ASSERT_EQ(tofu::runtime::resumeCheckpoint(cpuFile, fromCpu, stepCpu), "");
  EXPECT_EQ(stepCuda, steps);
  EXPECT_EQ(stepCpu, steps);
  auto initOf = [](const Plan &p) {
    return [&p](int32_t d, int32_t b) -> const uint8_t * {
      const Buffer &buf = p.devices[d].buffers[b];
      return buf.init.size() == buf.bytes && buf.bytes ? buf.init.data()
                                                       : nullptr;
    };
  };
  for (size_t t = 0; t < plan.tensors.size(); ++t)
    if (plan.tensors[t].role == TensorRole::Param)
      expectSameTensor(plan, static_cast<int32_t>(t), initOf(fromCuda),
                       initOf(fromCpu), false, what + " resumed");
}

TEST(CudaScheduleOnHost, SaveAndDumpMatchTheCpuBackend) {
  expectSaveAndDumpMatchCpu("mlp-8", 1, 2);
  expectSaveAndDumpMatchCpu("mlp-8", 3, 2);
  expectSaveAndDumpMatchCpu("gpt-8", 2, 1);
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (std::string err = parseCudaTestArgs(argc, argv); !err.empty()) {
    std::fprintf(stderr, "tofu-cuda-schedule-tests: %s\n", err.c_str());
    return 2;
  }
  if (cudaTestArgs.hostCxx.empty()) {
    std::fprintf(stderr, "tofu-cuda-schedule-tests: --host-cxx is needed\n");
    return 2;
  }
  if (!haveNvcc()) {
    std::printf("SKIPPED: no nvcc; the plans need tofuc --cuda-arch\n");
    return 77;
  }
  compileExamplePlans({{"mlp", {1, 8}}, {"mlp64", {1, 8}}, {"rnn", {8}},
                       {"gpt", {1, 8}}, {"cnn", {1, 8}}, {"cnnbn", {1, 8}},
                       {"cnnbnsc", {1, 2}},
                       {"mlpbf16", {1, 8}}, {"gptbf16", {8}}},
                      "sm_80");
  return RUN_ALL_TESTS();
}
