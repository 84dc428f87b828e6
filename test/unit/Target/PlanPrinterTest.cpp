//===- PlanPrinterTest.cpp - --dump-plan on multi-step plans --------------===//
//
// The partitioners that exist today produce one recursion step; these tests
// build partitioned IR by hand with a 2 x 2 device grid (tilings with two
// cuts, one strategy per step) and check what the printers derive from it:
// bytes per recursion step computed by hand from the cost model's rules,
// adding up to the materialized traffic, and the tile rectangles of the HTML
// page.
//
//===----------------------------------------------------------------------===//
#include "tofu/Analysis/TileGeometry.h"
#include "tofu/Dialect/TdlInstance.h"
#include "tofu/Target/PlanBuilder.h"
#include "tofu/Target/PlanPrinter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/JSON.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

/// Y = X · W on a 2 x 2 grid. Device d = (c1, c2) owns row d of X [4, 8],
/// the block rows 4c1.., columns 3c2.. of W [8, 6], and row d of Y [4, 6].
/// Step 1 splits Y's rows, step 2 its columns: device (c1, c2) computes rows
/// 2c1..2c1+2, columns 3c2..3c2+3.
///  - X: it needs rows 2c1, 2c1+1 (16 elements), owns one, and its step-1
///    group owns both: 8 elements cross step 2 (x 4 devices x 4 bytes = 128).
///  - W: it needs columns 3c2.. of every row (24), its step-1 group holds
///    rows 4c1.. only: 12 elements cross step 1 (x 4 x 4 = 192).
///  - Y: the owner of row d gets the other 3 columns from its step-2
///    sibling: 3 elements across step 2 (x 4 x 4 = 48).
/// Then R = Relu(Y) with the tiling Y has and the same two splits reversed,
/// and a 3-D param P [2, 4, 6] tiled on dims 2 then 1 to exercise the N-D
/// projection.
constexpr const char *kTwoStepIR = R"mlir(
func.func @main() attributes {tofu.grid = array<i64: 2, 2>} {
  %w = tofu.param "w" {tofu.tilings = [#tofu.tiling<[(0, 2), (1, 2)]>], value = dense<1.0> : tensor<8x6xf32>} : tensor<8x6xf32>
  %p = tofu.param "p" {tofu.tilings = [#tofu.tiling<[(2, 2), (1, 2)]>], value = dense<1.0> : tensor<2x4x6xf32>} : tensor<2x4x6xf32>
  %x = tofu.input "x" "features" {tofu.tilings = [#tofu.tiling<[(0, 2), (0, 2)]>]} : tensor<4x8xf32>
  %y = tofu.compute "Gemm"(%x, %w) {attrs = {}, name = "mm", tofu.plan = [#tofu.strategy<split 0 dim 0>, #tofu.strategy<split 0 dim 1>], tofu.tilings = [#tofu.tiling<[(0, 2), (0, 2)]>]} : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %r = tofu.compute "Relu"(%y) {attrs = {}, name = "relu", tofu.plan = [#tofu.strategy<split 0 dim 1>, #tofu.strategy<split 0 dim 0>], tofu.tilings = [#tofu.tiling<[(0, 2), (0, 2)]>]} : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %q = tofu.compute "Relu"(%p) {attrs = {}, name = "prelu", tofu.plan = [#tofu.strategy<split 0 dim 2>, #tofu.strategy<split 0 dim 1>], tofu.tilings = [#tofu.tiling<[(2, 2), (1, 2)]>]} : (tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  return
}
)mlir";

class TwoStepPlan : public ::testing::Test {
protected:
  void SetUp() override {
    context.loadDialect<tofu::TofuDialect, func::FuncDialect>();
    module = parseSourceString<ModuleOp>(kTwoStepIR, &context);
    ASSERT_TRUE(module) << "the hand-written IR does not parse";
    func = *module->getOps<func::FuncOp>().begin();
    auto built = tofu::materialize(func);
    ASSERT_TRUE(static_cast<bool>(built)) << llvm::toString(built.takeError());
    plan = std::move(*built);
    tofu::planMemory(plan);
  }

  const tofu::OpSummary &op(const tofu::PlanSummary &summary,
                            llvm::StringRef name) {
    for (const auto &row : summary.ops)
      if (row.name == name)
        return row;
    ADD_FAILURE() << "no op " << name.str();
    return summary.ops.front();
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  func::FuncOp func;
  tofu::plan::Plan plan;
};

TEST_F(TwoStepPlan, BytesPerStepFollowTheCostModel) {
  tofu::PlanSummary summary = tofu::summarizePlan(func, plan);
  ASSERT_EQ(summary.grid, (std::vector<int64_t>{2, 2}));
  const tofu::OpSummary &mm = op(summary, "mm");
  EXPECT_EQ(mm.bytesPerStep, (std::vector<int64_t>{192, 128 + 48}));
  EXPECT_EQ(mm.bytes, 192 + 128 + 48);
  EXPECT_EQ(mm.bytesPerLink, (std::vector<int64_t>{192, 128 + 48}));
  // Relu: step 1 gives each group columns 3c1.. of all rows; its group holds
  // rows 2c1.. of Y: 6 elements fetched and 6 sent to the owners per group
  // (C_1 = 2 x 12 x 4 = 96). On the full grid, 12 input and 12 output
  // elements cross step 1's links, 6 and 6 step 2's.
  const tofu::OpSummary &relu = op(summary, "relu");
  EXPECT_EQ(relu.bytesPerStep, (std::vector<int64_t>{96, 48}));
  EXPECT_EQ(relu.bytesPerLink, (std::vector<int64_t>{96, 48}));
  ASSERT_EQ(mm.stepStrategies.size(), 2u);
  EXPECT_EQ(mm.stepStrategies[0], (std::vector<std::string>{"split output 0 dim 0"}));
  EXPECT_EQ(mm.stepStrategies[1], (std::vector<std::string>{"split output 0 dim 1"}));
  // Every op: the steps add up to the op's cost, the ops to the plan's
  // materialized traffic.
  std::vector<int64_t> perStep(2, 0);
  for (const auto &row : summary.ops) {
    ASSERT_EQ(row.bytesPerStep.size(), 2u) << row.name;
    EXPECT_EQ(row.bytesPerStep[0] + row.bytesPerStep[1], row.bytes) << row.name;
    EXPECT_EQ(row.bytesPerLink[0] + row.bytesPerLink[1], row.bytes) << row.name;
    perStep[0] += row.bytesPerStep[0];
    perStep[1] += row.bytesPerStep[1];
  }
  EXPECT_EQ(summary.bytesPerStep, perStep);
  EXPECT_EQ(static_cast<uint64_t>(summary.bytes), plan.commBytes);
  EXPECT_GT(summary.bytesPerStep[0], 0);
  EXPECT_GT(summary.bytesPerStep[1], 0);
}

/// The per-step split charges every byte of the partitioner's cost
/// (opCommBytes) to exactly one step, op by op.
TEST_F(TwoStepPlan, StepsSplitOpCommBytes) {
  tofu::DeviceGrid grid{{2, 2}};
  auto tilingOf = [](Value value) {
    auto result = cast<OpResult>(value);
    return cast<tofu::TilingAttr>(result.getOwner()->getAttrOfType<ArrayAttr>(
        tofu::kTilingsAttr)[result.getResultNumber()]);
  };
  int checked = 0;
  for (tofu::ComputeOp op : func.getOps<tofu::ComputeOp>()) {
    auto instance = tofu::instantiate(op);
    ASSERT_TRUE(static_cast<bool>(instance))
        << llvm::toString(instance.takeError());
    SmallVector<tofu::StrategyAttr> plan(
        op->getAttrOfType<ArrayAttr>(tofu::kPlanAttr)
            .getAsRange<tofu::StrategyAttr>());
    SmallVector<tofu::TilingAttr> inputs, outputs;
    for (Value input : op.getInputs())
      inputs.push_back(tilingOf(input));
    for (Value result : op.getResults())
      outputs.push_back(tilingOf(result));
    std::vector<int64_t> steps =
        tofu::opCommBytesByStep(grid, *instance, plan, inputs, outputs);
    int64_t total = tofu::opCommBytes(grid, *instance, plan, inputs, outputs);
    EXPECT_EQ(steps[0] + steps[1], total) << op.getName().str();
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

TEST_F(TwoStepPlan, JsonCarriesGridAndSteps) {
  auto parsed = llvm::json::parse(tofu::formatPlanJson(func, plan));
  ASSERT_TRUE(static_cast<bool>(parsed)) << llvm::toString(parsed.takeError());
  const llvm::json::Object &root = *parsed->getAsObject();
  const llvm::json::Array &grid = *root.getArray("grid");
  ASSERT_EQ(grid.size(), 2u);
  EXPECT_EQ(*grid[0].getAsInteger(), 2);
  const llvm::json::Array &steps = *root.getArray("comm_bytes_per_step");
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(*steps[0].getAsInteger() + *steps[1].getAsInteger(),
            *root.getInteger("comm_bytes"));
  bool found = false;
  for (const llvm::json::Value &value : *root.getArray("ops")) {
    const llvm::json::Object &row = *value.getAsObject();
    if (*row.getString("name") != "mm")
      continue;
    found = true;
    const llvm::json::Array &bytes = *row.getArray("comm_bytes_per_step");
    EXPECT_EQ(*bytes[0].getAsInteger(), 192);
    EXPECT_EQ(*bytes[1].getAsInteger(), 176);
    EXPECT_EQ(*(*row.getArray("inputs"))[1].getAsString(), "w");
  }
  EXPECT_TRUE(found);
  std::string text = tofu::formatPlanText(func, plan);
  EXPECT_NE(text.find("device grid: 2 x 2 (2 recursion steps)"),
            std::string::npos) << text;
  EXPECT_NE(text.find("split output 0 dim 0 | split output 0 dim 1"),
            std::string::npos) << text;
  EXPECT_NE(text.find("368 bytes (192 + 176)"), std::string::npos) << text;
}

TEST_F(TwoStepPlan, HtmlDrawsTheOwnedBoxes) {
  std::string html = tofu::formatPlanHtml(func, plan);
  // W [8, 6] tiled (0, 2), (1, 2): device (c1, c2) owns rows 4c1..,
  // columns 3c2.. — four rectangles with the real geometry (220 x 165 px).
  EXPECT_NE(html.find("<title>device 0 dim0 0:4 dim1 0:3</title>"), std::string::npos);
  EXPECT_NE(html.find("<title>device 1 dim0 0:4 dim1 3:6</title>"), std::string::npos);
  EXPECT_NE(html.find("<title>device 2 dim0 4:8 dim1 0:3</title>"), std::string::npos);
  EXPECT_NE(html.find("<title>device 3 dim0 4:8 dim1 3:6</title>"), std::string::npos);
  EXPECT_NE(html.find("<rect x=\"82\" y=\"110\" width=\"83\" height=\"110\" "
                      "fill=\"#d62728\"><title>device 3 dim0 4:8"),
            std::string::npos)
      << html;
  // The step-1 groups' blocks of W (rows 0:4 and 4:8) are outlined.
  EXPECT_NE(html.find("<rect class=\"group\" x=\"0\" y=\"0\" width=\"165\" "
                      "height=\"110\""),
            std::string::npos);
  EXPECT_NE(html.find("<rect class=\"group\" x=\"0\" y=\"110\" width=\"165\" "
                      "height=\"110\""),
            std::string::npos);
  // P [2, 4, 6] tiled on dims 2 then 1 is drawn on the plane (dim1, dim2):
  // four rectangles, each owned by one device over the whole of dim 0.
  EXPECT_NE(html.find("drawn: rows = dim1, columns = dim2"), std::string::npos);
  EXPECT_NE(html.find("<title>device 1 dim1 2:4 dim2 0:3</title>"), std::string::npos);
  EXPECT_NE(html.find("<title>device 2 dim1 0:2 dim2 3:6</title>"), std::string::npos);
  // Per-step table and legend.
  EXPECT_NE(html.find("data-device=\"3\""), std::string::npos);
  EXPECT_EQ(html.find("data-device=\"4\""), std::string::npos);
  EXPECT_NE(html.find("device 2 (1,0)"), std::string::npos);
  // No script, no external resources (the SVG namespace is a name, not a
  // fetch).
  EXPECT_EQ(html.find("<script"), std::string::npos);
  std::string stripped = html;
  for (size_t at; (at = stripped.find("http://www.w3.org/2000/svg")) !=
                  std::string::npos;)
    stripped.erase(at, 26);
  EXPECT_EQ(stripped.find("http"), std::string::npos);
  EXPECT_EQ(stripped.find("url("), std::string::npos);
  // Deterministic.
  EXPECT_EQ(html, tofu::formatPlanHtml(func, plan));
}

} // namespace
