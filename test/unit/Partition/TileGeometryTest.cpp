//===- TileGeometryTest.cpp - devices whose tiles meet a region -----------===//
//
// devicesMeeting (lib/Analysis/TileGeometry.cpp) finds the devices whose box
// meets a region by descending the recursion; materialization and the
// per-link byte counts rely on it listing exactly the devices a scan over
// all k would find, in increasing order. Checked against that scan on
// random grids (with uneven and empty parts), cuts and regions.
//
// OutputShares splits an op output's bytes into one term per input tiling
// and one per output tiling (the partitioner prices each term once per
// option instead of once per combination of options); the terms must add
// up to the per-pair count of outputCommBytesByStep, an independent
// implementation, for every plan and every combination of tilings.
//
//===----------------------------------------------------------------------===//
#include "tofu/Analysis/TileGeometry.h"
#include "tofu/Dialect/Tofu.h"
#include "tofu/TDL/TDL.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

namespace {

using tofu::DeviceGrid;
using tofu::tdl::Box;
using tofu::tdl::Range;

/// Device d's box: `whole` cut at step s along cutDims[s] (-1: not cut).
Box boxOf(const DeviceGrid &grid, const Box &whole,
          const std::vector<int64_t> &cutDims, int64_t device) {
  Box box = whole;
  std::vector<int64_t> coords = grid.coordinates(device);
  for (size_t s = 0; s < grid.steps.size(); ++s)
    if (cutDims[s] >= 0)
      box[cutDims[s]] =
          tofu::splitRange(box[cutDims[s]], grid.steps[s], coords[s]);
  return box;
}

TEST(TileGeometry, DevicesMeetingEqualsAScanOverAllDevices) {
  uint64_t state = 2024;
  auto next = [&](int64_t bound) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(bound));
  };
  const std::vector<std::vector<int64_t>> grids = {
      {}, {2}, {3}, {2, 2}, {3, 2}, {2, 2, 2}, {4, 2, 2}, {2, 3, 2, 2},
      {2, 2, 2, 2, 2, 2}, {5, 3}};
  int64_t nonEmptyAnswers = 0;
  for (const std::vector<int64_t> &steps : grids) {
    DeviceGrid grid{steps};
    for (int trial = 0; trial < 200; ++trial) {
      size_t rank = static_cast<size_t>(next(4)); // 0..3, rank 0: a scalar
      Box whole;
      for (size_t i = 0; i < rank; ++i)
        whole.push_back({0, next(3) == 0 ? next(4) : 1 + next(40)});
      std::vector<int64_t> cutDims;
      for (size_t s = 0; s < steps.size(); ++s)
        cutDims.push_back(rank == 0 || next(4) == 0
                              ? -1
                              : next(static_cast<int64_t>(rank)));
      Box region;
      for (size_t i = 0; i < rank; ++i) {
        int64_t lo = next(whole[i].hi + 1);
        region.push_back({lo, lo + next(whole[i].hi - lo + 1)});
      }
      std::vector<int64_t> expected;
      for (int64_t d = 0; d < grid.numDevices(); ++d)
        if (tofu::intersectionElements(boxOf(grid, whole, cutDims, d), region))
          expected.push_back(d);
      EXPECT_EQ(tofu::devicesMeeting(grid, whole, cutDims, region), expected)
          << "grid of " << steps.size() << " steps, trial " << trial;
      nonEmptyAnswers += !expected.empty();
    }
  }
  // The random regions must exercise both outcomes.
  EXPECT_GT(nonEmptyAnswers, 500);
  EXPECT_LT(nonEmptyAnswers, 2000);
}

/// Every tiling of a tensor of rank `rank` on `steps` steps: replicated, or
/// one cut dimension per step.
std::vector<tofu::TilingAttr> allTilings(mlir::MLIRContext &ctx, size_t rank,
                                         const std::vector<int64_t> &steps) {
  std::vector<tofu::TilingAttr> tilings{tofu::TilingAttr::get(&ctx, {}, {})};
  if (rank == 0)
    return tilings;
  std::vector<int64_t> dims(steps.size(), 0);
  while (true) {
    tilings.push_back(tofu::TilingAttr::get(&ctx, dims, steps));
    size_t s = 0;
    for (; s < dims.size(); ++s) {
      if (++dims[s] < static_cast<int64_t>(rank))
        break;
      dims[s] = 0;
    }
    if (s == dims.size())
      return tilings;
  }
}

TEST(TileGeometry, OutputSharesTermsAddUpToThePerPairBytes) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<tofu::TofuDialect>();
  const auto &lib = tofu::tdl::SpecLibrary::builtin();
  auto f32 = [](std::vector<int64_t> dims) {
    return std::optional<tofu::tdl::TensorType>(
        tofu::tdl::TensorType{std::move(dims), tofu::tdl::ElemType::F32});
  };
  using AttrValue = tofu::tdl::AttrValue;
  struct Case {
    const char *op;
    std::vector<std::optional<tofu::tdl::TensorType>> inputs;
    tofu::tdl::AttrMap attrs;
  };
  // Uneven extents on uneven grids; the convolution reads halos (3x3 with
  // padding 1) and has reduction strategies, as MatMul does.
  const std::vector<Case> cases = {
      {"MatMul", {f32({7, 5}), f32({5, 6})}, {}},
      {"Conv",
       {f32({2, 3, 7, 5}), f32({4, 3, 3, 3})},
       {{"kernel_shape", AttrValue::ofInts({3, 3})},
        {"pads", AttrValue::ofInts({1, 1, 1, 1})}}},
      {"Add", {f32({5, 1}), f32({3})}, {}},
  };
  const std::vector<std::vector<int64_t>> grids = {{3, 2}, {2, 2}, {4}};
  int64_t checked = 0, nonZero = 0;
  for (const Case &c : cases) {
    auto instance =
        tofu::tdl::instantiate(*lib.lookup(c.op), c.inputs, c.attrs);
    ASSERT_TRUE(static_cast<bool>(instance))
        << llvm::toString(instance.takeError());
    auto strategies = tofu::tdl::analyzeStrategies(*instance);
    ASSERT_TRUE(static_cast<bool>(strategies))
        << llvm::toString(strategies.takeError());
    std::vector<tofu::StrategyAttr> options;
    for (const auto &strategy : *strategies) {
      bool split = strategy.kind == tofu::tdl::Strategy::Kind::SplitOutput;
      options.push_back(tofu::StrategyAttr::get(
          &ctx, mlir::StringAttr::get(&ctx, split ? "split" : "reduce"),
          strategy.output,
          split ? strategy.dim : static_cast<int64_t>(strategy.reductionIndex),
          mlir::StringAttr::get(&ctx, strategy.reduction),
          mlir::ArrayAttr::get(&ctx, {})));
    }
    ASSERT_GE(options.size(), 2u) << c.op;
    for (const std::vector<int64_t> &steps : grids) {
      tofu::DeviceGrid grid{steps};
      // Plans: computed whole, or one strategy per step.
      std::vector<std::vector<tofu::StrategyAttr>> plans{{}};
      std::vector<size_t> pick(steps.size(), 0);
      while (true) {
        std::vector<tofu::StrategyAttr> plan;
        for (size_t p : pick)
          plan.push_back(options[p]);
        plans.push_back(plan);
        size_t s = 0;
        for (; s < pick.size(); ++s) {
          if (++pick[s] < options.size())
            break;
          pick[s] = 0;
        }
        if (s == pick.size())
          break;
      }
      const auto &inputTypes = instance->inputTypes();
      std::vector<std::vector<tofu::TilingAttr>> inputOptions;
      for (const auto &type : inputTypes)
        inputOptions.push_back(allTilings(ctx, type->dims.size(), steps));
      std::vector<tofu::TilingAttr> outputOptions = allTilings(
          ctx, instance->outputTypes()[0].dims.size(), steps);
      for (const auto &plan : plans) {
        tofu::OutputShares shares(grid, *instance, 0, plan);
        // Every device's share (OutputShareMaker, behind opShare) is the
        // output box and reduction ranges split at each step by the
        // strategy of that step, at the device's grid coordinate.
        const tofu::OutputShareMaker shareOf(grid, *instance, 0, plan);
        for (int64_t d = 0; d < grid.numDevices(); ++d) {
          tofu::OpShare want;
          for (int64_t extent : instance->outputTypes()[0].dims)
            want.outputBox.push_back({0, extent});
          for (const auto &var : instance->reductionVars(0))
            want.reductionRanges.push_back({0, var.extent});
          std::vector<int64_t> coords = grid.coordinates(d);
          for (size_t step = 0; step < plan.size(); ++step) {
            bool split = plan[step].getKind().getValue() == "split";
            auto &range = split ? want.outputBox[plan[step].getDim()]
                                : want.reductionRanges[plan[step].getDim()];
            bool wasEmpty = range.hi <= range.lo;
            range = tofu::splitRange(range, steps[step], coords[step]);
            want.partial |= !split;
            want.emptyReductionPart |=
                !split && !wasEmpty && range.hi <= range.lo;
          }
          tofu::OpShare got = shareOf(d);
          auto bounds = [](const std::vector<tofu::tdl::Range> &ranges) {
            std::vector<std::pair<int64_t, int64_t>> pairs;
            for (const tofu::tdl::Range &r : ranges)
              pairs.push_back({r.lo, r.hi});
            return pairs;
          };
          ASSERT_EQ(bounds(want.outputBox), bounds(got.outputBox))
              << c.op << " device " << d;
          ASSERT_EQ(bounds(want.reductionRanges), bounds(got.reductionRanges))
              << c.op << " device " << d;
          ASSERT_EQ(want.partial, got.partial) << c.op << " device " << d;
          ASSERT_EQ(want.emptyReductionPart, got.emptyReductionPart)
              << c.op << " device " << d;
        }
        // Every combination of the inputs' and the output's tilings.
        std::vector<size_t> choice(inputTypes.size() + 1, 0);
        while (true) {
          std::vector<tofu::TilingAttr> inputs;
          int64_t terms = 0;
          for (size_t i = 0; i < inputTypes.size(); ++i) {
            inputs.push_back(inputOptions[i][choice[i]]);
            terms += shares.inputFetchBytes(i, inputs.back());
          }
          tofu::TilingAttr output = outputOptions[choice.back()];
          terms += shares.conversionBytes(output);
          std::vector<int64_t> perStep = tofu::outputCommBytesByStep(
              grid, *instance, 0, plan, inputs, output);
          int64_t pairs = 0;
          for (int64_t bytes : perStep)
            pairs += bytes;
          ASSERT_EQ(terms, pairs)
              << c.op << " on " << steps.size() << " steps, plan of "
              << plan.size() << " strategies, combination " << checked;
          ++checked;
          nonZero += terms > 0;
          size_t i = 0;
          for (; i < choice.size(); ++i) {
            size_t limit = i < inputTypes.size() ? inputOptions[i].size()
                                                 : outputOptions.size();
            if (++choice[i] < limit)
              break;
            choice[i] = 0;
          }
          if (i == choice.size())
            break;
        }
      }
    }
  }
  EXPECT_GT(checked, 10000);
  EXPECT_GT(nonZero, checked / 2);
}

} // namespace
