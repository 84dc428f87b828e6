//===- SharedProgramsTest.cpp - one program per class of devices ----------===//
//
// tofuc keeps one program per class of devices whose programs are the same
// up to their regions, reduction bounds and weight tiles
// (MaterializeOptions::sharePrograms, tofu/runtime/SharedPrograms.h)
// through the in-place updates, memory planning and writing. On random
// training graphs partitioned for k devices that must change nothing:
// expanded right after materialize, the plan equals the unshared one record
// for record; updated in place and planned, it has the same peaks, bounds
// and, expanded, the same programs; written, the same plan.bin bytes. The
// devices must really share (the property is not vacuous).
//
//===----------------------------------------------------------------------===//
#include "tofu/Target/PlanBuilder.h"
#include "tofu/Transforms/Passes.h"
#include "tofu/Transforms/RecursivePartitioner.h"
#include "tofu/runtime/SharedPrograms.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>

#include "RandomModel.h"

using namespace mlir;
namespace plan = tofu::plan;

namespace {

/// Devices that own their program (the others share one).
size_t programOwners(const plan::Plan &p) {
  size_t owners = 0;
  for (const plan::DeviceProgram &dev : p.devices)
    owners += dev.programOf < 0;
  return owners;
}

/// True when instructions of two plans are equal: every field, the source
/// tables' and op specs' contents (not their addresses) included.
bool sameInstr(const plan::Instr &a, const plan::Instr &b) {
  if (a.kind != b.kind || a.seq != b.seq || a.dst != b.dst ||
      a.inputs != b.inputs || a.outputs != b.outputs ||
      !(a.kernel == b.kernel) || !(a.op == b.op) ||
      a.reductionRanges != b.reductionRanges ||
      a.pieces.size() != b.pieces.size() || !a.sources != !b.sources ||
      !a.spec != !b.spec)
    return false;
  for (size_t i = 0; i < a.pieces.size(); ++i)
    if (a.pieces[i].device != b.pieces[i].device ||
        a.pieces[i].buffer != b.pieces[i].buffer ||
        a.pieces[i].region.lo != b.pieces[i].region.lo ||
        a.pieces[i].region.hi != b.pieces[i].region.hi)
      return false;
  if (a.sources && (a.sources->buffers != b.sources->buffers ||
                    a.sources->rank != b.sources->rank ||
                    a.sources->lo != b.sources->lo ||
                    a.sources->hi != b.sources->hi))
    return false;
  if (a.spec && (a.attrs().size() != b.attrs().size() ||
                 a.inputGlobalShapes() != b.inputGlobalShapes() ||
                 a.outputGlobalShapes() != b.outputGlobalShapes() ||
                 a.programs().size() != b.programs().size()))
    return false;
  return true;
}

/// Expects every device of `got` (expanded) to have `want`'s program:
/// every field of every buffer and instruction, initial contents included.
void expectSamePrograms(const plan::Plan &want, const plan::Plan &got) {
  ASSERT_EQ(want.devices.size(), got.devices.size());
  for (size_t d = 0; d < want.devices.size(); ++d) {
    SCOPED_TRACE("device " + std::to_string(d));
    const plan::DeviceProgram &a = want.devices[d], &b = got.devices[d];
    EXPECT_EQ(b.programOf, -1);
    EXPECT_EQ(a.commBytes, b.commBytes);
    EXPECT_EQ(a.peakBytes, b.peakBytes);
    ASSERT_EQ(a.buffers.size(), b.buffers.size());
    for (size_t i = 0; i < a.buffers.size(); ++i) {
      const plan::Buffer &x = a.buffers[i], &y = b.buffers[i];
      EXPECT_TRUE(plan::sameInProgram(x, y)) << "buffer " << i;
      EXPECT_EQ(x.region.lo, y.region.lo) << "buffer " << i;
      EXPECT_EQ(x.region.hi, y.region.hi) << "buffer " << i;
      ASSERT_EQ(x.initSize(), y.initSize()) << "buffer " << i;
      if (x.hasInit())
        EXPECT_EQ(0, std::memcmp(x.initData(), y.initData(), x.initSize()))
            << "buffer " << i;
    }
    ASSERT_EQ(a.instrs.size(), b.instrs.size());
    for (size_t i = 0; i < a.instrs.size(); ++i) {
      EXPECT_TRUE(sameInstr(a.instrs[i], b.instrs[i])) << "instruction " << i;
    }
  }
}

class SharedPrograms : public ::testing::Test {
protected:
  SharedPrograms() {
    context.loadDialect<tofu::TofuDialect, func::FuncDialect>();
  }

  /// The training step of `ir`, partitioned for `devices` devices.
  OwningOpRef<ModuleOp> partitioned(const std::string &ir, int64_t devices) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(ir, &context);
    if (!module)
      return {};
    PassManager pm(&context);
    OpPassManager &funcPm = pm.nest<func::FuncOp>();
    funcPm.addPass(tofu::createBuildTrainingStep());
    funcPm.addPass(tofu::createAnalyzeStrategies());
    funcPm.addPass(tofu::createCoarsen());
    if (failed(pm.run(*module)))
      return {};
    tofu::SearchOptions options;
    options.partitioner = "tofu";
    options.devices = devices;
    auto result = tofu::partitionFunction(
        *module->getOps<func::FuncOp>().begin(), options);
    if (!result) {
      ADD_FAILURE() << llvm::toString(result.takeError());
      return {};
    }
    return module;
  }

  /// Materializes `func` with and without shared programs; false (and a
  /// failure) when either fails.
  bool materializeBoth(func::FuncOp func, std::optional<plan::Plan> &shared,
                       std::optional<plan::Plan> &unshared) {
    tofu::MaterializeOptions options;
    options.sharePrograms = true;
    auto a = tofu::materialize(func, options);
    auto b = tofu::materialize(func);
    if (!a) {
      ADD_FAILURE() << llvm::toString(a.takeError());
      if (!b)
        llvm::consumeError(b.takeError());
      return false;
    }
    if (!b) {
      ADD_FAILURE() << llvm::toString(b.takeError());
      return false;
    }
    shared = std::move(*a);
    unshared = std::move(*b);
    return true;
  }

  /// Calls `check(devices, func)` for `seeds` random graphs partitioned
  /// for each of `ks` devices; stops at the first failure. Uneven extents
  /// (3, 5, 6 and 12 on 4 or 6 devices) give devices of one group tiles of
  /// different sizes, which must split their classes.
  template <typename Check>
  void forEachPartitioned(std::initializer_list<int64_t> ks, unsigned seeds,
                          Check &&check) {
    for (int64_t devices : ks)
      for (unsigned seed = 1; seed <= seeds; ++seed) {
        std::string ir = tofu::test::randomModel(seed, 1 + seed % 4,
                                                 {3, 4, 5, 6, 8, 12});
        SCOPED_TRACE("k = " + std::to_string(devices) + ", seed " +
                     std::to_string(seed) + ":\n" + ir);
        OwningOpRef<ModuleOp> module = partitioned(ir, devices);
        ASSERT_TRUE(module) << "the random model does not compile";
        check(devices, *module->getOps<func::FuncOp>().begin());
        if (HasFailure())
          return;
      }
  }

  /// Calls `check(devices, shared, unshared)` for 12 random graphs
  /// partitioned for each of `ks` devices (forEachPartitioned),
  /// materialized with and without shared programs.
  template <typename Check>
  void forEachRandomPlan(std::initializer_list<int64_t> ks, Check &&check) {
    forEachPartitioned(ks, 12, [&](int64_t devices, func::FuncOp func) {
      std::optional<plan::Plan> shared, unshared;
      ASSERT_TRUE(materializeBoth(func, shared, unshared));
      check(static_cast<size_t>(devices), *shared, *unshared);
    });
  }

  MLIRContext context;
};

TEST_F(SharedPrograms, ExpandToTheUnsharedPrograms) {
  size_t planned = 0, sharing = 0;
  forEachRandomPlan({2, 4, 6, 8}, [&](size_t devices, plan::Plan &shared,
                                      plan::Plan &unshared) {
    EXPECT_EQ(programOwners(unshared), devices);
    ++planned;
    sharing += programOwners(shared) < devices;
    plan::expandSharedPrograms(shared);
    expectSamePrograms(unshared, shared);
  });
  // Most plans share: the comparison is not vacuous.
  EXPECT_GT(sharing, planned / 2);
}

TEST_F(SharedPrograms, PlanAndWriteAsTheUnsharedPlan) {
  size_t planned = 0, sharing = 0;
  forEachRandomPlan({2, 3, 4, 6, 8}, [&](size_t devices, plan::Plan &shared,
                                         plan::Plan &unshared) {
    tofu::updateParamsInPlace(shared);
    tofu::updateParamsInPlace(unshared);
    std::vector<uint64_t> sharedBounds = tofu::planMemory(shared);
    std::vector<uint64_t> unsharedBounds = tofu::planMemory(unshared);
    EXPECT_EQ(sharedBounds, unsharedBounds);
    ++planned;
    sharing += programOwners(shared) < devices;
    std::vector<uint8_t> sharedBytes, unsharedBytes;
    ASSERT_EQ(plan::writePlanBytes(shared, sharedBytes), "");
    ASSERT_EQ(plan::writePlanBytes(unshared, unsharedBytes), "");
    EXPECT_TRUE(sharedBytes == unsharedBytes)
        << "plan.bin differs with shared programs";
    plan::expandSharedPrograms(shared);
    expectSamePrograms(unshared, shared);
  });
  EXPECT_GT(sharing, planned / 2);
}

/// Devices materialized on several threads (three here: uneven parts of
/// 64 and 72 devices) give the plan one thread gives, shared programs and
/// all: the same classes, and expanded, the same programs and plan.bin.
TEST_F(SharedPrograms, ThreadsMaterializeTheSamePlan) {
  ASSERT_TRUE(context.isMultithreadingEnabled());
  forEachPartitioned({64, 72}, 6, [&](int64_t devices, func::FuncOp func) {
    tofu::MaterializeOptions options;
    options.sharePrograms = true;
    options.threads = 1;
    auto one = tofu::materialize(func, options);
    ASSERT_TRUE(bool(one)) << llvm::toString(one.takeError());
    options.threads = 3;
    auto three = tofu::materialize(func, options);
    ASSERT_TRUE(bool(three)) << llvm::toString(three.takeError());
    for (size_t d = 0; d < one->devices.size(); ++d)
      ASSERT_EQ(one->devices[d].programOf, three->devices[d].programOf)
          << "device " << d;
    std::vector<uint8_t> oneBytes, threeBytes;
    ASSERT_EQ(plan::writePlanBytes(*one, oneBytes), "");
    ASSERT_EQ(plan::writePlanBytes(*three, threeBytes), "");
    EXPECT_TRUE(oneBytes == threeBytes) << "plan.bin differs with threads";
    plan::expandSharedPrograms(*one);
    plan::expandSharedPrograms(*three);
    expectSamePrograms(*one, *three);
  });
}

/// Two devices sharing one program of three instructions, the second with
/// reduction ranges: reordering the program moves the sharing device's
/// bounds alike and drops those of dropped instructions; a split by key
/// gives a device its own copy with its own regions.
TEST(SharedProgramTables, ReorderAndSplitKeepEachDevicesBounds) {
  plan::Plan p;
  p.tensors.resize(1);
  p.tensors[0].shape = {4};
  p.devices.resize(3);
  plan::DeviceProgram &owner = p.devices[0];
  for (int i = 0; i < 2; ++i) {
    plan::Buffer buffer;
    buffer.tensor = 0;
    buffer.bytes = 8;
    buffer.region = {{2 * i}, {2 * i + 2}};
    owner.buffers.push_back(buffer);
  }
  owner.regionStarts = {0, 2, 4};
  for (int i = 0; i < 3; ++i) {
    plan::Instr instr;
    instr.seq = i;
    instr.outputs = {i % 2};
    if (i == 1)
      instr.reductionRanges = {{{0, 1}, {10, 11}}};
    if (i == 2)
      instr.reductionRanges = {{{20, 21}}};
    owner.instrs.push_back(instr);
  }
  for (size_t d = 1; d < 3; ++d) {
    plan::DeviceProgram &dev = p.devices[d];
    dev.programOf = 0;
    int64_t base = 100 * static_cast<int64_t>(d);
    dev.sharedRegions = {base, base + 2, base + 2, base + 4};
    dev.sharedReductionRanges = {{base, base + 1}, {base + 10, base + 11},
                                 {base + 20, base + 21}};
  }
  ASSERT_TRUE(plan::hasSharedPrograms(p));
  EXPECT_EQ(plan::bufferRegion(p, 2, 1).lo[0], 202);

  // Instruction 2 first, then 0; 1 dropped.
  plan::reorderProgramInstrs(p, 0, {2, 0});
  ASSERT_EQ(p.devices[0].instrs.size(), 2u);
  EXPECT_EQ(p.devices[0].instrs[0].seq, 2);
  using Bounds = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(p.devices[1].sharedReductionRanges, (Bounds{{120, 121}}));
  EXPECT_EQ(p.devices[2].sharedReductionRanges, (Bounds{{220, 221}}));

  // Device 2 apart: its own program, its own regions and bounds.
  plan::splitSharedPrograms(p, {{0}, {0}, {1}});
  EXPECT_EQ(p.devices[1].programOf, 0);
  ASSERT_EQ(p.devices[2].programOf, -1);
  ASSERT_EQ(p.devices[2].buffers.size(), 2u);
  EXPECT_EQ(p.devices[2].buffers[1].region.lo, (std::vector<int64_t>{202}));
  EXPECT_EQ(p.devices[2].buffers[1].region.hi, (std::vector<int64_t>{204}));
  EXPECT_EQ(p.devices[2].instrs[0].reductionRanges,
            (std::vector<std::vector<std::pair<int64_t, int64_t>>>{
                {{220, 221}}}));
  EXPECT_TRUE(p.devices[2].sharedRegions.empty());

  plan::expandSharedPrograms(p);
  EXPECT_FALSE(plan::hasSharedPrograms(p));
  EXPECT_EQ(p.devices[1].buffers[0].region.lo, (std::vector<int64_t>{100}));
  EXPECT_EQ(p.devices[1].instrs[0].reductionRanges[0][0],
            (std::pair<int64_t, int64_t>{120, 121}));
  EXPECT_TRUE(p.devices[0].regionStarts.empty());
}

} // namespace
