//===- StepPredictionTest.cpp - predicted step time of a plan -------------===//
//
// tofu/Target/StepPrediction.h on a hand-written partitioned IR whose every
// instruction's time is worked out by hand from the formulas in the header
// (a device model with round numbers): Y = X · W on 2 devices, rows of X
// and Y split, W's columns split, so each device fetches the other half of
// W and computes its rows.
//
//===----------------------------------------------------------------------===//
#include "tofu/Target/PlanBuilder.h"
#include "tofu/Target/PlanPrinter.h"
#include "tofu/Target/StepPrediction.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/JSON.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

/// X [4, 8] and Y [4, 6]: device d owns rows 2d, 2d+1; W [8, 6]: device d
/// owns columns 3d..3d+2. The Gemm splits Y's rows.
constexpr const char *kIR = R"mlir(
func.func @main() attributes {tofu.grid = array<i64: 2>} {
  %w = tofu.param "w" {tofu.tilings = [#tofu.tiling<[(1, 2)]>], value = dense<1.0> : tensor<8x6xf32>} : tensor<8x6xf32>
  %x = tofu.input "x" "features" {tofu.tilings = [#tofu.tiling<[(0, 2)]>]} : tensor<4x8xf32>
  %y = tofu.compute "Gemm"(%x, %w) {attrs = {}, name = "mm", tofu.plan = [#tofu.strategy<split 0 dim 0>], tofu.tilings = [#tofu.tiling<[(0, 2)]>]} : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  return
}
)mlir";

/// Round numbers: 1 GFLOP/s GEMMs with half-efficiency side 1, 1 GB/s
/// memory, 1 us launches, one 1 GB/s link with 10 us latency.
tofu::DeviceModel roundDevice() {
  tofu::DeviceModel model;
  model.name = "round";
  model.gemmFlopsPerSecond = 1e9;
  model.vectorFlopsPerSecond = 1e9;
  model.memoryBytesPerSecond = 1e9;
  model.launchSeconds = 1e-6;
  model.gemmHalfExtent = 1;
  model.messageLatencySeconds = 1e-5;
  model.links = {{"wire", 1, 1e-5}};
  return model;
}

class PredictGemm : public ::testing::Test {
protected:
  void SetUp() override {
    context.loadDialect<tofu::TofuDialect, func::FuncDialect>();
    module = parseSourceString<ModuleOp>(kIR, &context);
    ASSERT_TRUE(module);
    func = *module->getOps<func::FuncOp>().begin();
    auto built = tofu::materialize(func);
    ASSERT_TRUE(static_cast<bool>(built)) << llvm::toString(built.takeError());
    plan = std::move(*built);
    tofu::planMemory(plan);
  }

  tofu::StepPrediction predict(const tofu::DeviceModel &device,
                               tofu::PredictOptions options = {}) {
    auto prediction = tofu::predictStep(func, plan, device, options);
    if (!prediction) {
      ADD_FAILURE() << llvm::toString(prediction.takeError());
      return {};
    }
    return *prediction;
  }

  // Per device, by hand:
  //  compute: m = 2, n = 6, k = 8 -> 192 flops at 1e9 x (2/3)(6/7)(8/9)
  //    FLOP/s (the 304 bytes touched take less at 1 GB/s), plus a launch;
  static constexpr double kCompute =
      1e-6 + 192 / (1e9 * (2.0 / 3) * (6.0 / 7) * (8.0 / 9));
  //  fetch of W: its own 24 elements copied locally (read + write 96
  //    bytes), the other 24 over the link, plus a launch;
  static constexpr double kCopy = 1e-6 + 2 * 96 / 1e9;
  static constexpr double kComm = 96 / 1e9 + 1e-5;

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  func::FuncOp func;
  tofu::plan::Plan plan;
};

TEST_F(PredictGemm, EveryInstructionTimedByHand) {
  tofu::StepPrediction p = predict(roundDevice());
  ASSERT_EQ(p.devices.size(), 2u);
  for (const auto &device : p.devices) {
    EXPECT_NEAR(device.computeSeconds, kCompute, 1e-15);
    EXPECT_NEAR(device.copySeconds, kCopy, 1e-15);
    EXPECT_NEAR(device.commSeconds, kComm, 1e-15);
    EXPECT_EQ(device.receivedBytes, 96u);
  }
  // Side by side: the fetch level, then the compute level.
  EXPECT_NEAR(p.stepSeconds, kCompute + kCopy + kComm, 1e-15);
  EXPECT_NEAR(p.busiestDeviceSeconds, kCompute + kCopy + kComm, 1e-15);
  ASSERT_EQ(p.commSecondsPerStep.size(), 1u);
  EXPECT_NEAR(p.commSecondsPerStep[0], kComm, 1e-15);
  EXPECT_EQ(p.stepBytes, (std::vector<uint64_t>{192}));
  EXPECT_EQ(p.stepBytesBusiest, (std::vector<uint64_t>{96}));
  ASSERT_EQ(p.links.size(), 1u);
  EXPECT_EQ(p.links[0].name, "wire");
  EXPECT_EQ(p.batchSize, 4);
  EXPECT_NEAR(p.samplesPerSecond, 4 / p.stepSeconds, 1e-6);
  // No memory size: nothing checked.
  EXPECT_TRUE(p.fits);
  EXPECT_EQ(p.usableBytes, 0u);
}

TEST_F(PredictGemm, SharedHostAddsDevicesUp) {
  tofu::DeviceModel device = roundDevice();
  device.sharedHost = true;
  tofu::StepPrediction p = predict(device);
  EXPECT_NEAR(p.stepSeconds, 2 * (kCompute + kCopy + kComm), 1e-15);
  EXPECT_NEAR(p.computeSeconds, 2 * kCompute, 1e-15);
}

TEST_F(PredictGemm, TopologyGivesTheLink) {
  tofu::DeviceModel device = roundDevice();
  device.links.push_back({"slow", 0.5, 1e-4});
  tofu::PredictOptions options;
  options.topologyLinks = {"slow"};
  options.topologyGbps = {0.25}; // --topology wins over the description
  tofu::StepPrediction p = predict(device, options);
  EXPECT_NEAR(p.commSecondsPerStep[0], 96 / 0.25e9 + 1e-4, 1e-15);
  // A level the description does not name: its first link's latency.
  options.topologyLinks = {"other"};
  p = predict(device, options);
  EXPECT_NEAR(p.commSecondsPerStep[0], 96 / 0.25e9 + 1e-5, 1e-15);
}

TEST_F(PredictGemm, FitAgainstMemoryLessMargin) {
  tofu::DeviceModel device = roundDevice();
  uint64_t peak = std::max(plan.devices[0].peakBytes,
                           plan.devices[1].peakBytes);
  ASSERT_GT(peak, 0u);
  device.memoryBytes = 10 * peak;
  tofu::StepPrediction p = predict(device);
  EXPECT_TRUE(p.fits);
  EXPECT_EQ(p.usableBytes, 9 * peak);
  EXPECT_EQ(p.worstBytes, peak);

  // Usable = 90% of 1000 bytes... of peak: over by peak - usable, and
  // k x peak / usable devices would do.
  device.memoryBytes = peak; // usable 0.9 peak
  p = predict(device);
  EXPECT_FALSE(p.fits);
  uint64_t usable = static_cast<uint64_t>(std::floor(peak * 0.9));
  EXPECT_EQ(p.usableBytes, usable);
  EXPECT_EQ(p.overBytes, peak - usable);
  EXPECT_EQ(p.estimatedFittingDevices, 3); // ceil(2 / 0.9)
  std::string line = tofu::formatFit(p);
  EXPECT_NE(line.find("does not fit"), std::string::npos) << line;
  EXPECT_NE(line.find("about 3 devices would"), std::string::npos) << line;

  // A shared host: all arenas together, and more virtual devices do not help.
  device.sharedHost = true;
  device.memoryBytes = peak;
  p = predict(device);
  EXPECT_FALSE(p.fits);
  EXPECT_EQ(p.worstDevice, -1);
  EXPECT_EQ(p.worstBytes,
            plan.devices[0].peakBytes + plan.devices[1].peakBytes);
  EXPECT_EQ(p.estimatedFittingDevices, 0);
}

TEST_F(PredictGemm, JsonCarriesThePrediction) {
  tofu::StepPrediction p = predict(roundDevice());
  auto json = llvm::json::parse(tofu::formatPlanJson(func, plan, &p));
  ASSERT_TRUE(static_cast<bool>(json)) << llvm::toString(json.takeError());
  const llvm::json::Object *predicted =
      json->getAsObject()->getObject("predicted");
  ASSERT_TRUE(predicted);
  EXPECT_NEAR(*predicted->getNumber("step_seconds"), p.stepSeconds, 1e-18);
  EXPECT_NEAR(*predicted->getNumber("step_seconds"),
              *predicted->getNumber("compute_seconds") +
                  *predicted->getNumber("comm_seconds") +
                  *predicted->getNumber("copy_seconds") +
                  *predicted->getNumber("overhead_seconds"),
              1e-18);
  EXPECT_EQ(predicted->getArray("per_device")->size(), 2u);
  // Without a prediction, no key (plan.bin's stored text has none either).
  auto plain = llvm::json::parse(tofu::formatPlanJson(func, plan));
  ASSERT_TRUE(static_cast<bool>(plain));
  EXPECT_FALSE(plain->getAsObject()->get("predicted"));
  EXPECT_EQ(tofu::formatPlanText(func, plan, false).find("predicted"),
            std::string::npos);
}

TEST_F(PredictGemm, Device0InstructionsAsTheModelSeesThem) {
  // Device 0 runs the fetch of W, then the Gemm: each with its kernel key,
  // its call's cost and its time (what bench/gpu/fit_kernels.py fits).
  tofu::DeviceModel device = roundDevice();
  device.kernelCosts = {{"Gemm", 0, 0, 0, 3e-6}};
  tofu::StepPrediction p = predict(device);
  ASSERT_EQ(p.device0Instructions.size(), plan.devices[0].instrs.size());
  const tofu::StepPrediction::Instruction *gemm = nullptr, *fetch = nullptr;
  for (const auto &in : p.device0Instructions)
    (in.kernel == "Gemm" ? gemm : fetch) = &in;
  ASSERT_TRUE(gemm && fetch);
  EXPECT_TRUE(gemm->contraction);
  EXPECT_EQ(gemm->dtype, "f32");
  EXPECT_DOUBLE_EQ(gemm->callSeconds, 3e-6);
  // The Gemm's own call cost replaces the 1 us launch.
  EXPECT_NEAR(gemm->seconds, kCompute - 1e-6 + 3e-6, 1e-15);
  EXPECT_EQ(fetch->kernel, "Fetch");
  EXPECT_DOUBLE_EQ(fetch->callSeconds, 1e-6);
  EXPECT_NEAR(fetch->seconds, kCopy + kComm, 1e-15);
  auto json = llvm::json::parse(tofu::formatPlanJson(func, plan, &p));
  ASSERT_TRUE(static_cast<bool>(json)) << llvm::toString(json.takeError());
  const llvm::json::Array *listed = json->getAsObject()
                                        ->getObject("predicted")
                                        ->getArray("device0_instructions");
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->size(), p.device0Instructions.size());
}

TEST_F(PredictGemm, SharedHostCopiesInCacheRunAtItsRate) {
  // The fetch of W moves 96 local and 96 remote bytes (traffic 2 x 192 =
  // 384 bytes): within a 1000-byte cache at 10 GB/s, its local copy and its
  // remote piece stream at the cache's rate instead of memory's and the
  // link's; the Gemm's 304 bytes too. On a shared host (the CPU backend)
  // the Gemm also reads (packs) its 256 input bytes, found in the cache
  // (just written by the fetch), on top of its FLOPs.
  tofu::DeviceModel device = roundDevice();
  device.sharedHost = true;
  device.cacheBytes = 1000;
  device.cacheBytesPerSecond = 1e10;
  tofu::StepPrediction p = predict(device);
  const double compute = 1e-6 +
                         192 / (1e9 * (2.0 / 3) * (6.0 / 7) * (8.0 / 9)) +
                         256 / 1e10;
  EXPECT_NEAR(p.devices[0].computeSeconds, compute, 1e-15);
  EXPECT_NEAR(p.devices[0].copySeconds, 1e-6 + 2 * 96 / 1e10, 1e-15);
  EXPECT_NEAR(p.devices[0].commSeconds, 2 * 96 / 1e10 + 1e-5, 1e-15);
  // A cache too small for the fetch: memory and the link again.
  device.cacheBytes = 150;
  p = predict(device);
  EXPECT_NEAR(p.devices[0].copySeconds, kCopy, 1e-15);
  EXPECT_NEAR(p.devices[0].commSeconds, kComm, 1e-15);
  // Dedicated devices: the link is a link, whatever the cache.
  device.sharedHost = false;
  device.cacheBytes = 1000;
  p = predict(device);
  EXPECT_NEAR(p.devices[0].commSeconds, kComm, 1e-15);
}

TEST_F(PredictGemm, ReadsFindTheirDataWhereTheStepLeftIt) {
  // Two cache levels on a shared host: the step touches well under 1000
  // bytes, so the Gemm's inputs are in the 1000-byte inner level, not
  // memory: packing them costs 256 bytes at 4e10. With no room even for
  // them (an inner level of 100 bytes, a cache of 200), each comes from
  // the cache or memory.
  tofu::DeviceModel device = roundDevice();
  device.sharedHost = true;
  device.cacheBytes = 4000;
  device.cacheBytesPerSecond = 1e10;
  device.innerCacheBytes = 1000;
  device.innerCacheBytesPerSecond = 4e10;
  const double flops = 192 / (1e9 * (2.0 / 3) * (6.0 / 7) * (8.0 / 9));
  tofu::StepPrediction hot = predict(device);
  EXPECT_NEAR(hot.devices[0].computeSeconds, 1e-6 + flops + 256 / 4e10,
              1e-15);
  device.cacheBytes = 200;
  device.innerCacheBytes = 100;
  tofu::StepPrediction cold = predict(device);
  EXPECT_GT(cold.devices[0].computeSeconds,
            1e-6 + flops + 128 / 1e10 + 128 / 1e9);
  EXPECT_LE(cold.devices[0].computeSeconds,
            1e-6 + flops + 256 / 1e9 + 1e-15);
  // Dedicated devices (GPUs) do not pack: FLOPs alone, as before.
  device.sharedHost = false;
  EXPECT_NEAR(predict(device).devices[0].computeSeconds, 1e-6 + flops, 1e-15);
}

TEST_F(PredictGemm, StepOverheadFeedsInputsAndLabels) {
  // Each device feeds its X rows [2, 8] (16 elements): the step adds the
  // fixed overhead and the elements fed; on a shared host every device's
  // feed adds up, side by side devices feed at once (the most: 16).
  tofu::DeviceModel device = roundDevice();
  double plain = predict(device).stepSeconds;
  device.stepOverheadSeconds = 5e-6;
  device.feedSecondsPerElement = 1e-8;
  tofu::StepPrediction p = predict(device);
  EXPECT_EQ(p.fedElements, 32u);
  EXPECT_NEAR(p.overheadSeconds, 5e-6 + 16 * 1e-8, 1e-18);
  EXPECT_NEAR(p.stepSeconds, plain + 5e-6 + 16 * 1e-8, 1e-15);
  // Not a device's busy time.
  EXPECT_NEAR(p.busiestDeviceSeconds, kCompute + kCopy + kComm, 1e-15);
  device.sharedHost = true;
  p = predict(device);
  EXPECT_NEAR(p.overheadSeconds, 5e-6 + 32 * 1e-8, 1e-18);
  EXPECT_NEAR(p.stepSeconds, 2 * (kCompute + kCopy + kComm) + 5e-6 + 32e-8,
              1e-15);
  // Both devices holding the same rows: the second copies the first's (its
  // 64 bytes read and written at 1e9), it does not generate them again.
  for (auto &buffer : plan.devices[1].buffers)
    if (plan.tensors[buffer.tensor].role == tofu::plan::TensorRole::Input)
      for (const auto &first : plan.devices[0].buffers)
        if (first.tensor == buffer.tensor)
          buffer.region = first.region;
  p = predict(device);
  EXPECT_EQ(p.fedElements, 32u);
  EXPECT_NEAR(p.overheadSeconds, 5e-6 + 16 * 1e-8 + 2 * 64 / 1e9, 1e-18);
}

/// Nodes of an expression program, built by hand.
struct ProgramBuilder {
  tofu::plan::ExprProgram program;
  int32_t add(tofu::plan::ExprNode node) {
    program.nodes.push_back(std::move(node));
    return static_cast<int32_t>(program.nodes.size() - 1);
  }
  int32_t var(int32_t v) {
    tofu::plan::ExprNode node;
    node.kind = tofu::plan::ExprNode::Kind::Var;
    node.var = v;
    return add(node);
  }
  int32_t constant(double value) {
    tofu::plan::ExprNode node;
    node.kind = tofu::plan::ExprNode::Kind::Const;
    node.value = value;
    return add(node);
  }
  int32_t access(int32_t input, std::vector<int32_t> indices) {
    tofu::plan::ExprNode node;
    node.kind = tofu::plan::ExprNode::Kind::Access;
    node.input = input;
    node.operands = std::move(indices);
    return add(node);
  }
  int32_t call(tofu::plan::Function f, int32_t operand) {
    tofu::plan::ExprNode node;
    node.kind = tofu::plan::ExprNode::Kind::Call;
    node.function = f;
    node.operands = {operand};
    return add(node);
  }
  int32_t binary(tofu::plan::BinaryOp op, int32_t a, int32_t b) {
    tofu::plan::ExprNode node;
    node.kind = tofu::plan::ExprNode::Kind::Binary;
    node.binary = op;
    node.operands = {a, b};
    return add(node);
  }
  int32_t sum(int32_t operand, std::vector<int32_t> vars) {
    tofu::plan::ExprNode node;
    node.kind = tofu::plan::ExprNode::Kind::Reduce;
    node.reducer = tofu::plan::Reducer::Sum;
    node.operands = {operand};
    node.vars = std::move(vars);
    return add(node);
  }
};

/// A partitioned IR parsed, materialized and memory-planned; `error` says
/// what failed (empty: `func` and `plan` are ready).
struct CompiledIR {
  explicit CompiledIR(const char *text) {
    context.loadDialect<tofu::TofuDialect, func::FuncDialect>();
    module = parseSourceString<ModuleOp>(text, &context);
    if (!module) {
      error = "the IR does not parse";
      return;
    }
    func = *module->getOps<func::FuncOp>().begin();
    auto built = tofu::materialize(func);
    if (!built) {
      error = llvm::toString(built.takeError());
      return;
    }
    plan = std::move(*built);
    tofu::planMemory(plan);
  }
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  func::FuncOp func;
  tofu::plan::Plan plan;
  std::string error;
};

TEST(PredictTranscendentals, EachNodeOncePerIndexItDependsOn) {
  using tofu::plan::BinaryOp;
  using tofu::plan::Function;
  // Variables: n (8), c (4), m (8, bound by the sums).
  // Y[n, c] = tanh(X[n, c]) * exp(X[n, c]) / sqrt(sum(m) pow(X[m, c], 2))
  //           + pow(X[n, c], 3)
  ProgramBuilder b;
  b.program.varExtents = {8, 4, 8};
  b.program.outputVars = {0, 1};
  int32_t n = b.var(0), c = b.var(1), m = b.var(2);
  int32_t x = b.access(0, {n, c});
  int32_t tanh = b.call(Function::Tanh, x);
  int32_t exp = b.call(Function::Exp, x);
  int32_t square = b.binary(BinaryOp::Pow, b.access(0, {m, c}), b.constant(2));
  int32_t root = b.call(Function::Sqrt, b.sum(square, {2}));
  int32_t cube = b.binary(BinaryOp::Pow, x, b.constant(3));
  b.program.root = b.binary(
      BinaryOp::Add,
      b.binary(BinaryOp::Div, b.binary(BinaryOp::Mul, tanh, exp), root),
      cube);
  // tanh, exp and the cube: once per output element (3); the sqrt: once
  // per channel, 4 of the 32 elements; the square is a multiply (0).
  EXPECT_DOUBLE_EQ(tofu::transcendentalsPerOutputElement(b.program),
                   3 + 4.0 / 32);
  // A softmax's exp inside its row sum: once per (n, m), as many as the
  // output elements [n, c] when the row has C elements.
  ProgramBuilder s;
  s.program.varExtents = {8, 4, 4};
  s.program.outputVars = {0, 1};
  int32_t sn = s.var(0), sc = s.var(1), sm = s.var(2);
  int32_t top = s.call(Function::Exp, s.access(0, {sn, sc}));
  int32_t below = s.sum(s.call(Function::Exp, s.access(0, {sn, sm})), {2});
  s.program.root = s.binary(BinaryOp::Div, top, below);
  EXPECT_DOUBLE_EQ(tofu::transcendentalsPerOutputElement(s.program), 2);
}

TEST(PredictTranscendentals, TanhCostsTranscendentalFlops) {
  // One device, Y = Tanh(X) on 1000 floats: 1000 FLOPs plus one tanh per
  // element at 9 FLOPs each, at 1e9 FLOP/s (the 8000 bytes take 8e-6 s).
  CompiledIR ir(R"mlir(
func.func @main() attributes {tofu.grid = array<i64: 1>} {
  %x = tofu.input "x" "features" {tofu.tilings = [#tofu.tiling<[]>]} : tensor<1000xf32>
  %y = tofu.compute "Tanh"(%x) {attrs = {}, name = "t", tofu.plan = [#tofu.strategy<split 0 dim 0>], tofu.tilings = [#tofu.tiling<[]>]} : (tensor<1000xf32>) -> tensor<1000xf32>
  return
}
)mlir");
  ASSERT_TRUE(ir.error.empty()) << ir.error;
  auto &func = ir.func;
  auto *plan = &ir.plan;
  tofu::DeviceModel device = roundDevice();
  device.transcendentalFlops = 9;
  auto p = tofu::predictStep(func, *plan, device, {});
  ASSERT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
  EXPECT_NEAR(p->computeSeconds, 1e-6 + (1000 + 9 * 1000) / 1e9, 1e-15);
  // As cheap as an add: memory-bound.
  device.transcendentalFlops = 1;
  p = tofu::predictStep(func, *plan, device, {});
  ASSERT_TRUE(static_cast<bool>(p));
  EXPECT_NEAR(p->computeSeconds, 1e-6 + 8000 / 1e9, 1e-15);
}

TEST(PredictThreads, OneVirtualDeviceRunsASmallGemmOnOneThread) {
  // Y [4, 6] = X [4, 8] · W [8, 6] (96 multiply-adds, far under the 2^20
  // FLOPs Blas.cpp splits): alone on a 2-thread shared host it gets half
  // the GEMM rate; on 2 virtual devices (PredictGemm) the other device's
  // work runs beside it, so the rate is the whole host's.
  CompiledIR ir(R"mlir(
func.func @main() attributes {tofu.grid = array<i64: 1>} {
  %w = tofu.param "w" {tofu.tilings = [#tofu.tiling<[]>], value = dense<1.0> : tensor<8x6xf32>} : tensor<8x6xf32>
  %x = tofu.input "x" "features" {tofu.tilings = [#tofu.tiling<[]>]} : tensor<4x8xf32>
  %y = tofu.compute "Gemm"(%x, %w) {attrs = {}, name = "mm", tofu.plan = [#tofu.strategy<split 0 dim 0>], tofu.tilings = [#tofu.tiling<[]>]} : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  return
}
)mlir");
  ASSERT_TRUE(ir.error.empty()) << ir.error;
  auto &func = ir.func;
  auto *plan = &ir.plan;
  tofu::DeviceModel device = roundDevice();
  device.sharedHost = true;
  const double busy = 2.0 * 4 * 6 * 8 / (1e9 * (4.0 / 5) * (6.0 / 7) * (8.0 / 9));
  auto p = tofu::predictStep(func, *plan, device, {});
  ASSERT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
  EXPECT_NEAR(p->computeSeconds, 1e-6 + busy, 1e-15);
  device.hostThreads = 2;
  p = tofu::predictStep(func, *plan, device, {});
  ASSERT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
  EXPECT_NEAR(p->computeSeconds, 1e-6 + 2 * busy, 1e-15);
}

TEST_F(PredictGemm, DevicesSideBySideShareTheHostsThreads) {
  // Two devices on a 2-thread host run each level side by side, one device
  // a thread. Each small GEMM runs on one thread at half the host's GEMM
  // rate, beside the other: the FLOPs take what they take at the whole
  // rate, twice, and the two launches run at once. The fetches are memcpys
  // on one thread each: the level takes one device's copy and transfer.
  tofu::DeviceModel device = roundDevice();
  device.sharedHost = true;
  device.hostThreads = 2;
  tofu::StepPrediction p = predict(device);
  EXPECT_NEAR(p.computeSeconds, 2 * kCompute - 1e-6, 1e-15);
  EXPECT_NEAR(p.copySeconds, kCopy, 1e-15);
  EXPECT_NEAR(p.commSeconds(), kComm, 1e-15);
  // Each level run side by side costs the executor's hand-over once
  // (wave_seconds), in the step's overhead.
  const int64_t levels = p.sideBySideLevels;
  EXPECT_GT(levels, 0);
  const double withoutWaves = p.stepSeconds, overhead = p.overheadSeconds;
  device.waveSeconds = 3e-6;
  p = predict(device);
  EXPECT_EQ(p.sideBySideLevels, levels);
  EXPECT_NEAR(p.overheadSeconds, overhead + levels * 3e-6, 1e-15);
  EXPECT_NEAR(p.stepSeconds, withoutWaves + levels * 3e-6, 1e-15);
  // One thread: one device after the other, as SharedHostAddsDevicesUp,
  // and no level side by side.
  device.hostThreads = 1;
  p = predict(device);
  EXPECT_NEAR(p.computeSeconds, 2 * kCompute, 1e-15);
  EXPECT_NEAR(p.copySeconds, 2 * kCopy, 1e-15);
  EXPECT_EQ(p.sideBySideLevels, 0);
  EXPECT_NEAR(p.overheadSeconds, overhead, 1e-15);
}

TEST(PredictThreads, SmallVectorKernelsOfDevicesSideBySideRunOnTheirOwnThreads) {
  // A Relu of 4 x 6 elements per device (far under the executor's 2^16 for
  // one thread): on a 2-thread shared host the two devices' Relus run at
  // once, so the level takes one of them.
  CompiledIR ir(R"mlir(
func.func @main() attributes {tofu.grid = array<i64: 2>} {
  %x = tofu.input "x" "features" {tofu.tilings = [#tofu.tiling<[(0, 2)]>]} : tensor<8x6xf32>
  %y = tofu.compute "Relu"(%x) {attrs = {}, name = "relu", tofu.plan = [#tofu.strategy<split 0 dim 0>], tofu.tilings = [#tofu.tiling<[(0, 2)]>]} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  return
}
)mlir");
  ASSERT_TRUE(ir.error.empty()) << ir.error;
  tofu::DeviceModel device = roundDevice();
  device.sharedHost = true;
  auto one = tofu::predictStep(ir.func, ir.plan, device, {});
  ASSERT_TRUE(static_cast<bool>(one)) << llvm::toString(one.takeError());
  device.hostThreads = 2;
  auto two = tofu::predictStep(ir.func, ir.plan, device, {});
  ASSERT_TRUE(static_cast<bool>(two)) << llvm::toString(two.takeError());
  ASSERT_GT(one->computeSeconds, 0);
  EXPECT_NEAR(two->computeSeconds, one->computeSeconds / 2, 1e-15);
  // Each device's own busy time is its work, whatever runs beside it.
  EXPECT_NEAR(two->devices[0].computeSeconds, one->devices[0].computeSeconds,
              1e-15);
}

} // namespace
