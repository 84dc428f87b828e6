//===- CudaDnnMapping.cpp - Which pools and batch norms go to cuDNN -------===//
//
// See CudaDnnMapping.h. Operands are read from the plan as the CPU kernels
// see them (runtime/lib/KernelsPool.cpp, KernelsNormalization.cpp): each a
// dense local box with its global position and the tensor's global shape.
//
//===----------------------------------------------------------------------===//

#include "CudaDnnMapping.h"

using namespace tofu::cuda;
using namespace tofu::plan;

namespace {

/// One operand of an instruction: its buffer, local box and global shape.
struct Box {
  int32_t buffer = -1;
  uint64_t offset = 0; ///< the buffer's arena offset
  std::vector<int64_t> lo, shape, global;
  DType dtype = DType::F32;
  bool present() const { return buffer >= 0; }
};

Box operandOf(const Plan &plan, int32_t d, const Instr &in, bool isOutput,
              size_t pos) {
  Box o;
  const auto &ids = isOutput ? in.outputs : in.inputs;
  if (pos >= ids.size() || ids[pos] < 0)
    return o;
  const Buffer &buf = plan.devices[d].buffers[ids[pos]];
  const TensorInfo &t = plan.tensors[buf.tensor];
  o.buffer = ids[pos];
  o.offset = buf.offset;
  o.dtype = t.dtype;
  o.lo = buf.region.lo;
  for (size_t j = 0; j < buf.region.lo.size(); ++j)
    o.shape.push_back(buf.region.hi[j] - buf.region.lo[j]);
  const auto &g = isOutput ? in.outputGlobalShapes() : in.inputGlobalShapes();
  o.global = g.size() > pos ? g[pos] : t.shape;
  return o;
}

/// Float32 element `element` of box `b` on device `d`.
DevicePointer pointerTo(int32_t d, const Box &b, int64_t element = 0) {
  return {d, b.offset + static_cast<uint64_t>(element) * 4};
}

std::string dims(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

int64_t product(const std::vector<int64_t> &v, size_t from = 0) {
  int64_t n = 1;
  for (size_t i = from; i < v.size(); ++i)
    n *= v[i];
  return n;
}

/// True when the instruction computes part of a top-level reduction (the
/// CPU executor's partialReduction, runtime/lib/ComputeKernel.cpp).
bool partialReduction(const Instr &in) {
  for (size_t o = 0; o < in.reductionRanges.size() && o < in.programs().size();
       ++o)
    for (size_t r = 0; r < in.reductionRanges[o].size(); ++r) {
      const ExprProgram &p = in.programs()[o];
      int64_t extent = r < p.topReductionVars.size() &&
                               p.topReductionVars[r] >= 0 &&
                               size_t(p.topReductionVars[r]) <
                                   p.varExtents.size()
                           ? p.varExtents[p.topReductionVars[r]]
                           : -1;
      if (in.reductionRanges[o][r].first != 0 ||
          in.reductionRanges[o][r].second != extent)
        return true;
    }
  return false;
}

bool sameBox(const Box &a, const Box &b) {
  return a.lo == b.lo && a.shape == b.shape;
}

/// Whether `b` holds all of dims 2.. (the spatial extents) of its tensor.
bool wholeSpatial(const Box &b) {
  for (size_t s = 2; s < b.shape.size(); ++s)
    if (b.lo[s] != 0 || b.shape[s] != b.global[s])
      return false;
  return true;
}

std::string mapPool(const Plan &plan, int32_t d, const Instr &in,
                    std::vector<CudaOp> &ops) {
  const std::string &k = in.kernel;
  if (k == "MaxPoolGrad")
    return "cuDNN's max-pooling gradient picks a window's maximal cell by a "
           "rule it does not document; MaxPoolGrad gives dY to the first "
           "maximal cell of the window, as PyTorch";
  const bool global = k.rfind("Global", 0) == 0;
  const bool backward = k == "AveragePoolGrad" || k == "GlobalAveragePoolGrad";
  const bool max = k == "MaxPool";
  if (in.outputs.size() != 1 || in.inputs.size() != (backward ? 2u : 1u))
    return "unexpected operands";
  // Y is the output (forward) or dY (backward), X the input, dX the
  // backward output. Average pooling's gradient does not read X (the plan
  // may give the device none of it): dX stands for X's shape, and is what
  // cuDNN gets as its (unread) x argument.
  Box X, Y, dX;
  if (backward) {
    Y = operandOf(plan, d, in, false, 0);
    dX = operandOf(plan, d, in, true, 0);
    X = dX;
  } else {
    X = operandOf(plan, d, in, false, 0);
    Y = operandOf(plan, d, in, true, 0);
  }
  if (!X.present() || !Y.present() || (backward && !dX.present()))
    return "an operand is missing";
  if (max && Y.dtype == DType::I64)
    return "MaxPool's Indices output (cuDNN gives no indices)";
  if (X.dtype != DType::F32 || Y.dtype != DType::F32 ||
      (backward && dX.dtype != DType::F32))
    return "cuDNN pooling here is float32 only";
  const size_t rank = X.shape.size();
  if (rank < 3 || rank > 5 || Y.shape.size() != rank)
    return "1 to 3 spatial dimensions are mapped to cuDNN";
  if (!wholeSpatial(X) || !wholeSpatial(Y))
    return "a split of a spatial dimension is not mapped to cuDNN";
  if (X.lo[0] != Y.lo[0] || X.shape[0] != Y.shape[0] || X.lo[1] != Y.lo[1] ||
      X.shape[1] != Y.shape[1])
    return "the input and output hold different batch rows or channels";
  if (partialReduction(in))
    return "a partial sum over part of the pooling window";
  const size_t sp = rank - 2;
  PoolCall call;
  call.backward = backward;
  call.x = X.shape;
  call.y = Y.shape;
  if (global) {
    call.mode = PoolCall::Mode::AverageExcludePad;
    call.window.assign(X.shape.begin() + 2, X.shape.end());
    call.pads.assign(sp, 0);
    call.strides.assign(sp, 1);
    for (size_t s = 0; s < sp; ++s)
      if (Y.global[2 + s] != 1)
        return "a global pool's output must have spatial extents 1";
  } else {
    call.mode = max ? PoolCall::Mode::Max
                : intAttr(in, "count_include_pad", 0) != 0
                    ? PoolCall::Mode::AverageIncludePad
                    : PoolCall::Mode::AverageExcludePad;
    call.window = intsAttr(in, "kernel_shape", {});
    call.strides = intsAttr(in, "strides", std::vector<int64_t>(sp, 1));
    std::vector<int64_t> dilations =
        intsAttr(in, "dilations", std::vector<int64_t>(sp, 1));
    const std::string autoPad = stringAttr(in, "auto_pad");
    std::vector<int64_t> pads =
        intsAttr(in, "pads", std::vector<int64_t>(2 * sp, 0));
    if (autoPad == "VALID")
      pads.assign(2 * sp, 0);
    else if (!autoPad.empty() && autoPad != "NOTSET")
      return "auto_pad " + autoPad + " is not mapped to cuDNN";
    if (call.window.size() != sp || call.strides.size() != sp ||
        dilations.size() != sp || pads.size() != 2 * sp)
      return "kernel_shape, strides, dilations or pads do not fit the "
             "spatial rank";
    for (size_t s = 0; s < sp; ++s) {
      if (dilations[s] != 1)
        return "dilations " + dims(dilations) + " (cuDNN pools without)";
      if (pads[s] != pads[s + sp])
        return "asymmetric pads " + dims(pads) +
               " (cuDNN takes symmetric ones)";
      if (call.window[s] < 1 || call.strides[s] < 1 || pads[s] < 0 ||
          pads[s] >= call.window[s])
        return "pads " + dims(pads) + " not smaller than the window " +
               dims(call.window) + ", or a non-positive window or stride";
      // cuDNN's output extents are the floor formula's; ceil_mode may add
      // a partial last window, which cuDNN does not compute.
      int64_t floorExtent =
          (X.global[2 + s] + 2 * pads[s] - call.window[s]) / call.strides[s] +
          1;
      if (Y.global[2 + s] != floorExtent)
        return "output extent " + std::to_string(Y.global[2 + s]) +
               " of spatial dim " + std::to_string(s) +
               " is not the floor formula's " + std::to_string(floorExtent) +
               " (ceil_mode adds a partial window cuDNN does not compute)";
    }
    call.pads.assign(pads.begin(), pads.begin() + sp);
  }
  CudaOp op;
  op.kind = CudaOp::Kind::Pool;
  op.pool = call;
  op.dnn[kDnnX] = pointerTo(d, X); // dX when backward (see above)
  if (backward) {
    op.dnn[kDnnDy] = pointerTo(d, Y);
    op.dnn[kDnnDx] = pointerTo(d, dX);
  } else {
    op.dnn[kDnnY] = pointerTo(d, Y);
  }
  ops.push_back(op);
  return "";
}

/// The batch-normalization context of one instruction: X, its channels
/// and the attributes.
struct BatchNormContext {
  const Plan &plan;
  int32_t d;
  const Instr &in;
  Box X;
  bool training = false;
  double epsilon = 1e-5, momentum = 0.9;
  int64_t count = 0;

  /// The pointer to the channels of X within [C] input `pos`.
  std::string channels(size_t pos, const char *what, DevicePointer &p) const {
    Box v = operandOf(plan, d, in, false, pos);
    if (!v.present())
      return std::string(what) + " is missing";
    if (v.dtype != DType::F32 || v.shape.size() != 1)
      return std::string(what) + " must be a float32 tensor [C]";
    const int64_t c0 = X.lo[1], n = X.shape[1];
    if (v.lo[0] > c0 || v.lo[0] + v.shape[0] < c0 + n)
      return std::string(what) + " does not hold X's channels";
    p = pointerTo(d, v, c0 - v.lo[0]);
    return "";
  }

  CudaOp call(BatchNormCall::Kind kind) const {
    CudaOp op;
    op.kind = CudaOp::Kind::BatchNorm;
    op.batchNorm.kind = kind;
    op.batchNorm.x = X.shape;
    op.batchNorm.epsilon = epsilon;
    op.batchNorm.momentum = momentum;
    op.batchNorm.count = count;
    op.dnn[kDnnX] = pointerTo(d, X);
    return op;
  }
};

std::string mapBatchNorm(const Plan &plan, int32_t d, const Instr &in,
                         std::vector<CudaOp> &ops) {
  const std::string &k = in.kernel;
  const size_t xPos = k == "BatchNormalizationGrad" ? 1 : 0;
  BatchNormContext bn{plan, d, in, operandOf(plan, d, in, false, xPos)};
  bn.training = intAttr(in, "training_mode", 0) != 0;
  bn.epsilon = floatAttr(in, "epsilon", 1e-5);
  bn.momentum = floatAttr(in, "momentum", 0.9);
  const Box &X = bn.X;
  if (!X.present())
    return "X is missing";
  if (X.dtype != DType::F32)
    return "cuDNN batch normalization here is float32 only";
  if (X.shape.size() < 2 || X.shape.size() > 5)
    return "X of rank " + std::to_string(X.shape.size()) +
           " (cuDNN takes ranks 2 to 5)";
  if (!(bn.epsilon >= 0))
    return "a negative epsilon";
  bn.count = product(X.global) / X.global[1];
  if (bn.training)
    for (size_t i = 0; i < X.shape.size(); ++i)
      if (i != 1 && (X.lo[i] != 0 || X.shape[i] != X.global[i]))
        return "X lacks part of the batch (N and spatial dims) of its "
               "channels: a batch split needs statistics across devices";
  if (partialReduction(in))
    return "a partial reduction";
  auto outputLikeX = [&](size_t pos, const char *what) -> std::string {
    Box o = operandOf(plan, d, in, true, pos);
    if (!o.present() || o.dtype != DType::F32 || !sameBox(o, X))
      return std::string(what) + "'s box differs from X's";
    return "";
  };
  std::vector<CudaOp> out;
  if (k == "BatchNormalizationNormalized") {
    if (in.inputs.size() != 3 || in.outputs.size() != 1)
      return "unexpected operands";
    if (std::string err = outputLikeX(0, "Xhat"); !err.empty())
      return err;
    CudaOp op = bn.call(bn.training ? BatchNormCall::Kind::TrainingForward
                                    : BatchNormCall::Kind::InferenceForward);
    op.batchNorm.unitAffine = true;
    op.dnn[kDnnY] = pointerTo(d, operandOf(plan, d, in, true, 0));
    if (!bn.training) {
      if (std::string err = bn.channels(1, "input_mean", op.dnn[kDnnMean]);
          !err.empty())
        return err;
      if (std::string err = bn.channels(2, "input_var", op.dnn[kDnnVar]);
          !err.empty())
        return err;
    }
    out.push_back(op);
  } else if (k == "BatchNormalizationGrad") {
    if (in.inputs.size() != 5 || in.outputs.size() != 1)
      return "unexpected operands";
    if (!bn.training)
      return "the inference-mode gradient is element-wise (generated kernel)";
    if (std::string err = outputLikeX(0, "dX"); !err.empty())
      return err;
    Box dY = operandOf(plan, d, in, false, 0);
    if (!dY.present() || dY.dtype != DType::F32 || !sameBox(dY, X))
      return "dY's box differs from X's";
    CudaOp op = bn.call(BatchNormCall::Kind::Backward);
    op.dnn[kDnnDy] = pointerTo(d, dY);
    op.dnn[kDnnDx] = pointerTo(d, operandOf(plan, d, in, true, 0));
    if (std::string err = bn.channels(2, "scale", op.dnn[kDnnScale]);
        !err.empty())
      return err;
    out.push_back(op);
  } else {
    if (in.inputs.size() != 5 ||
        (in.outputs.size() != 1 && in.outputs.size() != 3))
      return "unexpected operands";
    // Which outputs this instruction computes (the compiler materializes
    // each apart and names it with "tofu.output", as the CPU kernel reads).
    std::vector<std::pair<int64_t, size_t>> which; // (output index, position)
    if (in.outputs.size() == 3) {
      for (size_t o = 0; o < 3; ++o)
        if (in.outputs[o] >= 0)
          which.push_back({static_cast<int64_t>(o), o});
    } else if (findAttr(in, "tofu.output")) {
      which.push_back({intAttr(in, "tofu.output", 0), 0});
    } else {
      Box only = operandOf(plan, d, in, true, 0);
      if (!only.present() || only.global != X.global)
        return "a lone running statistic without its output index";
      which.push_back({0, 0});
    }
    for (auto [index, pos] : which) {
      if (index == 0) {
        if (std::string err = outputLikeX(pos, "Y"); !err.empty())
          return err;
        CudaOp op = bn.call(bn.training
                                ? BatchNormCall::Kind::TrainingForward
                                : BatchNormCall::Kind::InferenceForward);
        op.dnn[kDnnY] = pointerTo(d, operandOf(plan, d, in, true, pos));
        if (std::string err = bn.channels(1, "scale", op.dnn[kDnnScale]);
            !err.empty())
          return err;
        if (std::string err = bn.channels(2, "B", op.dnn[kDnnBias]);
            !err.empty())
          return err;
        if (!bn.training) {
          if (std::string err = bn.channels(3, "input_mean", op.dnn[kDnnMean]);
              !err.empty())
            return err;
          if (std::string err = bn.channels(4, "input_var", op.dnn[kDnnVar]);
              !err.empty())
            return err;
        }
        out.push_back(op);
        continue;
      }
      if (index != 1 && index != 2)
        return "tofu.output " + std::to_string(index) +
               " names no output of BatchNormalization";
      if (!bn.training)
        return "an inference-mode running statistic passes its input "
               "through (generated kernel)";
      Box stat = operandOf(plan, d, in, true, pos);
      if (!stat.present() || stat.dtype != DType::F32 ||
          stat.shape.size() != 1 || stat.lo[0] != X.lo[1] ||
          stat.shape[0] != X.shape[1])
        return "the running statistic's channels differ from X's";
      if (bn.count < 2)
        return "a batch of one element per channel (cuDNN's unbiased "
               "running variance divides by count - 1)";
      if (!(bn.momentum >= 0 && bn.momentum <= 1))
        return "momentum " + std::to_string(bn.momentum) +
               " outside [0, 1]";
      const bool mean = index == 1;
      CudaOp op = bn.call(mean ? BatchNormCall::Kind::RunningMean
                               : BatchNormCall::Kind::RunningVar);
      op.batchNorm.setRunningAverage();
      op.dnn[kDnnY] = pointerTo(d, stat);
      if (std::string err =
              bn.channels(mean ? 3 : 4, mean ? "input_mean" : "input_var",
                          op.dnn[mean ? kDnnMean : kDnnVar]);
          !err.empty())
        return err;
      out.push_back(op);
    }
  }
  ops.insert(ops.end(), out.begin(), out.end());
  return "";
}

} // namespace

bool tofu::cuda::isDnnKernel(const std::string &k) {
  return k == "MaxPool" || k == "MaxPoolGrad" || k == "AveragePool" ||
         k == "AveragePoolGrad" || k == "GlobalAveragePool" ||
         k == "GlobalAveragePoolGrad" || k == "BatchNormalization" ||
         k == "BatchNormalizationNormalized" || k == "BatchNormalizationGrad";
}

std::string tofu::cuda::mapDnn(const Plan &plan, int32_t d, const Instr &in,
                               std::vector<CudaOp> &ops) {
  if (in.kernel.str().rfind("BatchNormalization", 0) == 0)
    return mapBatchNorm(plan, d, in, ops);
  if (isDnnKernel(in.kernel))
    return mapPool(plan, d, in, ops);
  return "not a pooling or batch-normalization op";
}

std::vector<std::pair<DevicePointer, uint64_t>>
tofu::cuda::dnnOperandSpans(const CudaOp &op) {
  std::vector<std::pair<DevicePointer, uint64_t>> spans;
  const bool pool = op.kind == CudaOp::Kind::Pool;
  const std::vector<int64_t> &x = pool ? op.pool.x : op.batchNorm.x;
  const uint64_t xBytes = 4 * static_cast<uint64_t>(product(x));
  const uint64_t yBytes =
      pool ? 4 * static_cast<uint64_t>(product(op.pool.y)) : xBytes;
  const uint64_t cBytes = x.size() > 1 ? 4 * static_cast<uint64_t>(x[1]) : 0;
  const bool running = !pool && (op.batchNorm.kind ==
                                     BatchNormCall::Kind::RunningMean ||
                                 op.batchNorm.kind ==
                                     BatchNormCall::Kind::RunningVar);
  for (int i = 0; i < kNumDnnOperands; ++i) {
    if (op.dnn[i].device < 0)
      continue;
    uint64_t bytes = cBytes;
    if (i == kDnnX || i == kDnnDx)
      bytes = xBytes;
    else if (i == kDnnY)
      bytes = running ? cBytes : yBytes;
    else if (i == kDnnDy)
      bytes = yBytes;
    spans.push_back({op.dnn[i], bytes});
  }
  return spans;
}

std::string tofu::cuda::describeDnnOp(const CudaOp &op) {
  if (op.kind == CudaOp::Kind::Pool) {
    const char *mode = op.pool.mode == PoolCall::Mode::Max ? "max"
                       : op.pool.mode == PoolCall::Mode::AverageIncludePad
                           ? "average-include-pad"
                           : "average-exclude-pad";
    return std::string(op.pool.backward ? "cudnnPoolingBackward("
                                        : "cudnnPoolingForward(") +
           mode + ")";
  }
  switch (op.batchNorm.kind) {
  case BatchNormCall::Kind::TrainingForward:
    return op.batchNorm.unitAffine
               ? "cudnnBatchNormalizationForwardTraining(xhat)"
               : "cudnnBatchNormalizationForwardTraining";
  case BatchNormCall::Kind::InferenceForward:
    return op.batchNorm.unitAffine
               ? "cudnnBatchNormalizationForwardInference(xhat)"
               : "cudnnBatchNormalizationForwardInference";
  case BatchNormCall::Kind::Backward:
    return "cudnnBatchNormalizationBackward";
  case BatchNormCall::Kind::RunningMean:
    return "cudnnBatchNormalizationForwardTraining(running_mean)";
  case BatchNormCall::Kind::RunningVar:
    return "cudnnBatchNormalizationForwardTraining(running_var)";
  }
  return "";
}
