//===- TestPlans.cpp - Hand-built plans for the runtime tests -------------===//

#include "TestPlans.h"
#include "TestSupport.h"

#include <cstring>

using namespace tofu::plan;
using namespace tofu::test;

namespace {

TensorInfo tensor(const char *name, DType dtype, std::vector<int64_t> shape,
                  TensorRole role) {
  TensorInfo t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.role = role;
  return t;
}

Instr compute(int64_t seq, const char *kernel, std::vector<int32_t> inputs,
              std::vector<int32_t> outputs,
              std::vector<std::vector<int64_t>> inShapes,
              std::vector<std::vector<int64_t>> outShapes) {
  Instr in;
  in.kind = Instr::Kind::Compute;
  in.seq = seq;
  in.kernel = kernel;
  in.op = std::string(kernel) + "_0";
  in.inputs = std::move(inputs);
  in.outputs = std::move(outputs);
  in.editSpec().inputGlobalShapes = std::move(inShapes);
  in.editSpec().outputGlobalShapes = std::move(outShapes);
  return in;
}

Instr move(Instr::Kind kind, int64_t seq, int32_t dst,
           std::vector<Piece> pieces) {
  Instr in;
  in.kind = kind;
  in.seq = seq;
  in.dst = dst;
  in.pieces = std::move(pieces);
  in.op = kind == Instr::Kind::Fetch ? "fetch" : "reduce";
  return in;
}

/// The plan for `k` (1 or 2) devices; device d holds rows [lo, hi).
Plan makePlan(int k) {
  Plan plan;
  plan.producer = "runtime-test";
  plan.modelFingerprint = 0x1234;
  plan.numDevices = k;
  plan.batchSize = 4;
  plan.partitioner = "hand-built";
  plan.optimizer.learningRate = kTwoDeviceLr;
  plan.tensors = {
      tensor("X", DType::F32, {4, 4}, TensorRole::Input),
      tensor("Y", DType::F32, {4, 4}, TensorRole::Activation),
      tensor("P", DType::F32, {4}, TensorRole::Gradient),
      tensor("L", DType::I64, {4}, TensorRole::Label),
      tensor("loss", DType::F32, {}, TensorRole::Loss),
      tensor("W", DType::F32, {4}, TensorRole::Param),
      tensor("Wn", DType::F32, {4}, TensorRole::Updated),
  };
  if (k > 1)
    for (int32_t t : {kX, kY, kP, kL, kW, kWn})
      plan.tensors[t].tiling = {{0, k}};
  plan.tensors[kP].gradientOf = kW;
  plan.tensors[kL].numClasses = 4;
  plan.tensors[kL].pairedInput = kX;
  plan.tensors[kW].paramName = "w";
  plan.tensors[kWn].paramName = "w";
  plan.lossTensor = kLoss;
  plan.paramUpdates = {{kW, kWn}};
  const float w0[4] = {0.25f, -0.5f, 1.0f, 2.0f};

  const int64_t rows = 4 / k;
  for (int d = 0; d < k; ++d) {
    DeviceProgram dev;
    int64_t lo = d * rows, hi = lo + rows;
    uint64_t offset = 0;
    auto add = [&](int32_t t, Box box, bool owned, bool partial = false) {
      Buffer b;
      b.tensor = t;
      b.region = std::move(box);
      b.owned = owned;
      b.partial = partial;
      b.offset = offset;
      b.bytes = b.region.numElements() * dtypeSize(plan.tensors[t].dtype);
      offset += (b.bytes + 7) / 8 * 8;
      dev.buffers.push_back(std::move(b));
    };
    add(kX, {{lo, 0}, {hi, 4}}, true);
    add(kY, {{lo, 0}, {hi, 4}}, true);
    add(kY, {{0, 0}, {4, 4}}, false); // kBufYFull
    add(kP, {{0}, {4}}, false, true);
    add(kP, {{lo}, {hi}}, true);
    add(kL, {{lo}, {hi}}, true);
    add(kLoss, {{}, {}}, false, true);
    add(kLoss, {{}, {}}, true);
    add(kW, {{lo}, {hi}}, true);
    add(kWn, {{lo}, {hi}}, true);
    add(kL, {{0}, {4}}, false); // kBufLFull
    dev.buffers[kBufW].init.resize(dev.buffers[kBufW].bytes);
    std::memcpy(dev.buffers[kBufW].init.data(), w0 + lo,
                dev.buffers[kBufW].bytes);
    dev.peakBytes = offset;

    dev.instrs.push_back(
        compute(1, "Relu", {kBufX}, {kBufY}, {{4, 4}}, {{4, 4}}));
    if (d == 0) {
      std::vector<Piece> pieces;
      for (int s = 0; s < k; ++s)
        pieces.push_back({s, kBufY, {{s * rows, 0}, {(s + 1) * rows, 4}}});
      dev.instrs.push_back(move(Instr::Kind::Fetch, 2, kBufYFull, pieces));
    }
    dev.instrs.push_back(
        compute(3, "BiasGrad", {kBufY}, {kBufPPartial}, {{4, 4}}, {{4}}));
    std::vector<Piece> labelPieces;
    for (int s = 0; s < k; ++s)
      labelPieces.push_back({s, kBufL, {{s * rows}, {(s + 1) * rows}}});
    dev.instrs.push_back(move(Instr::Kind::Fetch, 3, kBufLFull, labelPieces));
    Instr loss = compute(3, "SoftmaxCrossEntropyLoss", {kBufY, kBufLFull},
                         {kBufLossPartial}, {{4, 4}, {4}}, {{}});
    Attr reduction;
    reduction.name = "reduction";
    reduction.kind = Attr::Kind::String;
    reduction.s = "mean";
    loss.editSpec().attrs.push_back(reduction);
    dev.instrs.push_back(loss);
    std::vector<Piece> pPieces, lossPieces;
    for (int s = 0; s < k; ++s) {
      pPieces.push_back({s, kBufPPartial, {{lo}, {hi}}});
      lossPieces.push_back({s, kBufLossPartial, {{}, {}}});
    }
    dev.instrs.push_back(move(Instr::Kind::Reduce, 4, kBufP, pPieces));
    dev.instrs.push_back(move(Instr::Kind::Reduce, 4, kBufLoss, lossPieces));
    Instr sgd = compute(5, "SGDUpdate", {kBufW, kBufP}, {kBufWn}, {{4}, {4}},
                        {{4}});
    sgd.editSpec().attrs.push_back(floatAttr("lr", kTwoDeviceLr));
    dev.instrs.push_back(sgd);
    dev.instrs.push_back(
        move(Instr::Kind::Fetch, 6, kBufW, {{d, kBufWn, {{lo}, {hi}}}}));
    plan.devices.push_back(std::move(dev));
  }
  if (k == 2) {
    plan.devices[0].commBytes = 32 + 16 + 8 + 4;
    plan.devices[1].commBytes = 16 + 8 + 4;
  }
  plan.commBytes = k == 2 ? 88 : 0;
  plan.summary = "hand-built test plan, " + std::to_string(k) + " device(s)\n";
  plan.onnxModel = {1, 2, 3, 4, 5};
  return plan;
}

} // namespace

Plan tofu::test::makeTwoDevicePlan() { return makePlan(2); }
Plan tofu::test::makeOneDevicePlan() { return makePlan(1); }

namespace {

ExprNode node(ExprNode::Kind kind) {
  ExprNode n;
  n.kind = kind;
  return n;
}

/// out[i, j] = max(in[i, j], 0) over a 4x4 tensor.
ExprProgram reluProgram() {
  ExprProgram p;
  p.varExtents = {4, 4};
  p.outputVars = {0, 1};
  ExprNode i = node(ExprNode::Kind::Var), j = node(ExprNode::Kind::Var);
  i.var = 0;
  j.var = 1;
  ExprNode x = node(ExprNode::Kind::Access);
  x.input = 0;
  x.operands = {0, 1};
  ExprNode zero = node(ExprNode::Kind::Const);
  ExprNode relu = node(ExprNode::Kind::Call);
  relu.function = Function::Max;
  relu.operands = {2, 3};
  p.nodes = {i, j, x, zero, relu};
  p.root = 4;
  return p;
}

/// out[j] = sum_i in[i, j] over a 4x4 tensor.
ExprProgram columnSumProgram() {
  ExprProgram p;
  p.varExtents = {4, 4}; // j, i
  p.outputVars = {0};
  p.topReductionVars = {1};
  ExprNode j = node(ExprNode::Kind::Var), i = node(ExprNode::Kind::Var);
  j.var = 0;
  i.var = 1;
  ExprNode y = node(ExprNode::Kind::Access);
  y.input = 0;
  y.operands = {1, 0};
  ExprNode sum = node(ExprNode::Kind::Reduce);
  sum.reducer = Reducer::Sum;
  sum.operands = {2};
  sum.vars = {1};
  p.nodes = {j, i, y, sum};
  p.root = 3;
  return p;
}

} // namespace

Plan tofu::test::withProgramsOnly(Plan plan) {
  for (DeviceProgram &dev : plan.devices)
    for (Instr &in : dev.instrs) {
      if (in.kind != Instr::Kind::Compute)
        continue;
      if (in.kernel == "Relu") {
        in.kernel = "ReluByProgram";
        in.editSpec().programs = {reluProgram()};
      } else if (in.kernel == "BiasGrad") {
        in.kernel = "ColumnSumByProgram";
        in.editSpec().programs = {columnSumProgram()};
        const Box &rows = dev.buffers[in.inputs[0]].region;
        in.reductionRanges = {{{rows.lo[0], rows.hi[0]}}};
      }
    }
  return plan;
}
