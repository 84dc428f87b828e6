//===- MaterializeWeightsTest.cpp - weight tiles borrowed or copied -------===//
//
// materialize with MaterializeOptions::borrowWeights points the buffers
// whose tile is one contiguous run of the parameter's value at those bytes
// and copies the others: every buffer's initial contents must equal the
// copying materialize's, the borrowed ones exactly the contiguous tiles, and
// the written plan.bin must be byte-identical. Every device's instructions
// of one op share the op's name and kernel name (plan::SharedName), and a
// device's instruction vector is not left up to half empty by doubling.
//
//===----------------------------------------------------------------------===//
#include "tofu/Dialect/TdlInstance.h"
#include "tofu/Target/PlanBuilder.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <string>

using namespace mlir;

namespace {

/// dense<[...]> of `count` distinct floats (0.5, 1.5, ...) shaped `shape`.
std::string denseValue(const std::vector<int64_t> &shape) {
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  // Nested brackets: the flat list split dimension by dimension.
  std::function<std::string(size_t, int64_t &)> nest = [&](size_t dim,
                                                           int64_t &next) {
    std::string text = "[";
    for (int64_t i = 0; i < shape[dim]; ++i) {
      if (i)
        text += ", ";
      if (dim + 1 == shape.size())
        text += std::to_string(next++) + ".5";
      else
        text += nest(dim + 1, next);
    }
    return text + "]";
  };
  int64_t next = 0;
  std::string text = "dense<" + nest(0, next) + ">";
  EXPECT_EQ(next, count);
  return text;
}

/// On a 2 x 2 grid: `rows` [8, 6] cut on dim 0 twice (each device a
/// contiguous run of 12 floats); `cols` [8, 6] cut on dim 0 then dim 1 (runs
/// of 3: copied); `box` [2, 4, 6] cut on dim 0 then dim 1 (one index of dim
/// 0, two of dim 1, all of dim 2: contiguous).
std::string ir() {
  return R"mlir(
func.func @main() attributes {tofu.grid = array<i64: 2, 2>} {
  %a = tofu.param "rows" {tofu.tilings = [#tofu.tiling<[(0, 2), (0, 2)]>], value = )mlir" +
         denseValue({8, 6}) + R"mlir( : tensor<8x6xf32>} : tensor<8x6xf32>
  %b = tofu.param "cols" {tofu.tilings = [#tofu.tiling<[(0, 2), (1, 2)]>], value = )mlir" +
         denseValue({8, 6}) + R"mlir( : tensor<8x6xf32>} : tensor<8x6xf32>
  %c = tofu.param "box" {tofu.tilings = [#tofu.tiling<[(0, 2), (1, 2)]>], value = )mlir" +
         denseValue({2, 4, 6}) + R"mlir( : tensor<2x4x6xf32>} : tensor<2x4x6xf32>
  %ra = tofu.compute "Relu"(%a) {attrs = {}, name = "ra", tofu.plan = [#tofu.strategy<split 0 dim 0>, #tofu.strategy<split 0 dim 0>], tofu.tilings = [#tofu.tiling<[(0, 2), (0, 2)]>]} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  %rb = tofu.compute "Relu"(%b) {attrs = {}, name = "rb", tofu.plan = [#tofu.strategy<split 0 dim 0>, #tofu.strategy<split 0 dim 1>], tofu.tilings = [#tofu.tiling<[(0, 2), (1, 2)]>]} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  %rc = tofu.compute "Relu"(%c) {attrs = {}, name = "rc", tofu.plan = [#tofu.strategy<split 0 dim 0>, #tofu.strategy<split 0 dim 1>], tofu.tilings = [#tofu.tiling<[(0, 2), (1, 2)]>]} : (tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  return
}
)mlir";
}

TEST(MaterializeWeights, BorrowsContiguousTilesAndCopiesTheOthers) {
  MLIRContext context;
  context.loadDialect<tofu::TofuDialect, func::FuncDialect>();
  auto module = parseSourceString<ModuleOp>(ir(), &context);
  ASSERT_TRUE(module) << "the hand-written IR does not parse";
  auto func = *module->getOps<func::FuncOp>().begin();
  auto copied = tofu::materialize(func);
  ASSERT_TRUE(static_cast<bool>(copied)) << llvm::toString(copied.takeError());
  tofu::MaterializeOptions options;
  options.borrowWeights = true;
  auto borrowed = tofu::materialize(func, options);
  ASSERT_TRUE(static_cast<bool>(borrowed))
      << llvm::toString(borrowed.takeError());

  std::map<std::string, int> borrowedTiles, copiedTiles;
  for (size_t d = 0; d < copied->devices.size(); ++d) {
    const auto &want = copied->devices[d].buffers;
    const auto &got = borrowed->devices[d].buffers;
    ASSERT_EQ(want.size(), got.size());
    for (size_t b = 0; b < want.size(); ++b) {
      EXPECT_EQ(want[b].borrowedInit, nullptr);
      ASSERT_EQ(got[b].initSize(), want[b].initSize());
      if (!want[b].hasInit())
        continue;
      EXPECT_EQ(0, std::memcmp(got[b].initData(), want[b].initData(),
                               want[b].initSize()))
          << "device " << d << " buffer " << b;
      const std::string &name =
          copied->tensors[want[b].tensor].paramName;
      if (got[b].borrowedInit) {
        EXPECT_TRUE(got[b].init.empty());
        ++borrowedTiles[name];
      } else {
        ++copiedTiles[name];
      }
    }
  }
  EXPECT_EQ(borrowedTiles["rows"], 4);
  EXPECT_EQ(borrowedTiles["box"], 4);
  EXPECT_EQ(copiedTiles["cols"], 4);
  EXPECT_EQ(borrowedTiles["cols"] + copiedTiles["rows"] + copiedTiles["box"],
            0);

  tofu::planMemory(*copied);
  tofu::planMemory(*borrowed);
  std::vector<uint8_t> a, b;
  ASSERT_EQ(tofu::plan::writePlanBytes(*copied, a), "");
  ASSERT_EQ(tofu::plan::writePlanBytes(*borrowed, b), "");
  EXPECT_EQ(a, b);
}

/// The instructions of one op on every device share one op name and one
/// kernel name (plan::SharedName): at k = 1024 a string per instruction
/// was a tenth of tofuc's memory (bench/compile_scale.md).
TEST(MaterializeNames, EveryDeviceSharesTheOpsNames) {
  MLIRContext context;
  context.loadDialect<tofu::TofuDialect, func::FuncDialect>();
  auto module = parseSourceString<ModuleOp>(ir(), &context);
  ASSERT_TRUE(module) << "the hand-written IR does not parse";
  auto plan = tofu::materialize(*module->getOps<func::FuncOp>().begin());
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  ASSERT_EQ(plan->devices.size(), 4u);
  std::map<std::string, tofu::plan::SharedName> ops, kernels;
  std::map<std::string, int> computes;
  for (const auto &device : plan->devices)
    for (const auto &instr : device.instrs) {
      ASSERT_FALSE(instr.op.empty());
      auto op = ops.emplace(instr.op.str(), instr.op).first;
      EXPECT_TRUE(op->second.sharesWith(instr.op)) << instr.op;
      if (instr.kind != tofu::plan::Instr::Kind::Compute)
        continue;
      ++computes[instr.op];
      // One kernel name per op output (ra, rb and rc each have their own
      // "Relu").
      EXPECT_EQ(instr.kernel, "Relu");
      auto kernel = kernels.emplace(instr.op.str(), instr.kernel).first;
      EXPECT_TRUE(kernel->second.sharesWith(instr.kernel))
          << instr.op << " " << instr.kernel;
    }
  EXPECT_EQ(computes, (std::map<std::string, int>{{"ra", 4}, {"rb", 4},
                                                  {"rc", 4}}));
}

/// A device's instructions are not left in a vector up to twice their
/// number (doubling): materialize grows it towards the size the ops done so
/// far predict. 600 Relus in a chain, each one instruction per device:
/// doubling leaves 1024 slots, the prediction at most 1.25 x 600 + 16.
TEST(MaterializeGrowth, InstructionsFillTheirVector) {
  constexpr int kOps = 600;
  std::string text = R"mlir(
func.func @main() attributes {tofu.grid = array<i64: 2, 2>} {
  %r0 = tofu.param "x" {tofu.tilings = [#tofu.tiling<[(0, 2), (0, 2)]>], value = )mlir" +
                     denseValue({8, 6}) +
                     " : tensor<8x6xf32>} : tensor<8x6xf32>\n";
  for (int i = 1; i <= kOps; ++i)
    text += "  %r" + std::to_string(i) + " = tofu.compute \"Relu\"(%r" +
            std::to_string(i - 1) + ") {attrs = {}, name = \"r" +
            std::to_string(i) +
            "\", tofu.plan = [#tofu.strategy<split 0 dim 0>, "
            "#tofu.strategy<split 0 dim 0>], tofu.tilings = "
            "[#tofu.tiling<[(0, 2), (0, 2)]>]} : (tensor<8x6xf32>) -> "
            "tensor<8x6xf32>\n";
  text += "  return\n}\n";
  MLIRContext context;
  context.loadDialect<tofu::TofuDialect, func::FuncDialect>();
  auto module = parseSourceString<ModuleOp>(text, &context);
  ASSERT_TRUE(module) << "the generated IR does not parse";
  auto plan = tofu::materialize(*module->getOps<func::FuncOp>().begin());
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  for (const auto &device : plan->devices) {
    ASSERT_EQ(device.instrs.size(), static_cast<size_t>(kOps));
    EXPECT_LE(device.instrs.capacity(), kOps + kOps / 4 + 16);
    EXPECT_EQ(device.buffers.size(), device.buffers.capacity());
  }
}

} // namespace
