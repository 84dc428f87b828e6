//===- CudaSchedule.cpp - What the CUDA executor issues, decided on the CPU ===//
//
// See CudaSchedule.h. Plain C++: no CUDA header, built and tested everywhere.
//
//===----------------------------------------------------------------------===//

#include "CudaSchedule.h"
#include "CudaByteHazards.h"
#include "CudaMultiFetchTables.h"
#include "CudaDnnMapping.h"
#include "tofu/runtime/MatMulBatchOffsets.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

using namespace tofu::cuda;
using namespace tofu::plan;

uint32_t tofu::cuda::cudaElementSize(DType dtype) {
  // Every plan element type moves and adds on the GPU (CudaTransferKernels).
  return isValidDType(static_cast<uint8_t>(dtype))
             ? static_cast<uint32_t>(dtypeSize(dtype))
             : 0;
}

const char *tofu::cuda::gemmCallName(const CudaOp &op) {
  if (op.bias.device >= 0 || op.relu)
    return "cublasLtMatmul";
  const bool batched = op.batch > 1;
  switch (op.dtype) {
  case DType::F64:
    return batched ? "cublasDgemmStridedBatched" : "cublasDgemm";
  case DType::F16:
  case DType::BF16:
    return batched ? "cublasGemmStridedBatchedEx" : "cublasGemmEx";
  default:
    return batched ? "cublasSgemmStridedBatched" : "cublasSgemm";
  }
}

namespace {

uint64_t alignUp(uint64_t v) {
  return (v + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
}

std::string dims(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

std::string where(const Plan &plan, int32_t d, int32_t i) {
  const Instr &in = plan.devices[d].instrs[i];
  std::string s = "device " + std::to_string(d) + " instruction " +
                  std::to_string(i);
  if (!in.op.empty())
    s += " (op '" + in.op + "')";
  return s;
}

/// A local operand: the buffer's box and global shape, as the CPU kernels'
/// TensorView sees it.
struct Operand {
  int32_t buffer = -1;
  std::vector<int64_t> lo, shape, global;
  DType dtype = DType::F32;
  bool present() const { return buffer >= 0; }
  int64_t elements() const {
    int64_t n = 1;
    for (int64_t s : shape)
      n *= s;
    return n;
  }
};

Operand operand(const Plan &plan, int32_t d, const Instr &in, bool isOutput,
                size_t pos) {
  Operand o;
  int32_t b = isOutput ? in.outputs[pos] : in.inputs[pos];
  if (b < 0)
    return o;
  const Buffer &buf = plan.devices[d].buffers[b];
  const TensorInfo &t = plan.tensors[buf.tensor];
  o.buffer = b;
  o.dtype = t.dtype;
  o.lo = buf.region.lo;
  for (size_t j = 0; j < buf.region.lo.size(); ++j)
    o.shape.push_back(buf.region.hi[j] - buf.region.lo[j]);
  const auto &g = isOutput ? in.outputGlobalShapes() : in.inputGlobalShapes();
  o.global = g.size() > pos ? g[pos] : t.shape;
  return o;
}

/// The element type cuBLAS multiplies `op`'s operands in: one of f32, f64,
/// f16, bf16, the same for every operand; else why not.
std::string gemmElementType(const char *op, const std::vector<const Operand *> &xs,
                            DType &type) {
  type = xs.front()->dtype;
  bool same = true;
  std::string types;
  for (const Operand *x : xs) {
    same &= x->dtype == type;
    types += std::string(types.empty() ? "" : ", ") + dtypeNumpyName(x->dtype);
  }
  if (same && (type == DType::F32 || type == DType::F64 ||
               type == DType::F16 || type == DType::BF16))
    return "";
  return std::string(same ? dtypeNumpyName(type) : "mixed-type") + " " + op +
         " (operands " + types + "): cuBLAS GEMM takes float32, float64, "
         "float16 or bfloat16 operands of one type, and " + op +
         " has no generated kernel";
}

DevicePointer at(const Plan &plan, int32_t d, int32_t buffer,
                 int64_t elementOffset = 0) {
  const Buffer &b = plan.devices[d].buffers[buffer];
  const uint64_t es = cudaElementSize(plan.tensors[b.tensor].dtype);
  return {d, b.offset + static_cast<uint64_t>(elementOffset) * es};
}

/// Per batch element of Y, the local element offset of the matrix of X.
std::string batchOffsets(const Operand &Y, size_t yBatch, const Operand &X,
                         size_t xBatch, int64_t matrix, const char *what,
                         std::vector<int64_t> &offsets) {
  bool missingIndex = false;
  return tofu::runtime::matMulBatchOffsets(
      {Y.lo, Y.shape, Y.global}, yBatch, {X.lo, X.shape, X.global}, xBatch,
      matrix, what, offsets, missingIndex);
}

/// Whether consecutive entries differ by one stride (returned).
bool arithmetic(const std::vector<int64_t> &v, int64_t &stride) {
  stride = v.size() > 1 ? v[1] - v[0] : 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] - v[i - 1] != stride)
      return false;
  return true;
}

/// MatMul and MatMulTransposed (operands read transposed in their last two
/// dims, which cuBLAS does in place) -> one GEMM of batch * M rows (B
/// broadcast, A's matrices contiguous and not transposed), one strided
/// batched GEMM, or one GEMM per batch element.
std::string mapMatMul(const Plan &plan, int32_t d, const Instr &in,
                      std::vector<CudaOp> &ops) {
  if (in.inputs.size() != 2 || in.outputs.size() != 1)
    return "expects inputs (A, B) and 1 output";
  Operand A = operand(plan, d, in, false, 0), B = operand(plan, d, in, false, 1),
          Y = operand(plan, d, in, true, 0);
  if (!A.present() || !B.present())
    return "an input is missing";
  DType type;
  if (std::string why = gemmElementType(in.kernel.c_str(), {&A, &B, &Y}, type);
      !why.empty())
    return why;
  const bool transA = intAttr(in, "transA", 0) != 0;
  const bool transB = intAttr(in, "transB", 0) != 0;
  const size_t ra = A.shape.size(), rb = B.shape.size(), ry = Y.shape.size();
  if (ra < 2 || rb < 2)
    return "1-D operands (A " + dims(A.global) + ", B " + dims(B.global) +
           ") are not mapped to cuBLAS yet";
  const size_t aBatch = ra - 2, bBatch = rb - 2;
  const size_t yBatch = std::max(aBatch, bBatch);
  if (ry != yBatch + 2)
    return "output rank does not fit the inputs";
  // Which dims of A and B hold M, K and N.
  const size_t aK = transA ? ra - 2 : ra - 1, aM = transA ? ra - 1 : ra - 2;
  const size_t bK = transB ? rb - 1 : rb - 2, bN = transB ? rb - 2 : rb - 1;
  const int64_t M = Y.shape[yBatch], N = Y.shape[ry - 1];
  const int64_t K = A.shape[aK];
  if (A.lo[aK] != B.lo[bK] || B.shape[bK] != K)
    return "A and B hold different slices of K";
  const int64_t aRows = A.shape[aM], aRow0 = Y.lo[yBatch] - A.lo[aM];
  const int64_t bCols = B.shape[bN], bCol0 = Y.lo[ry - 1] - B.lo[bN];
  if (aRow0 < 0 || aRow0 + M > aRows)
    return "A lacks rows of Y's local box";
  if (bCol0 < 0 || bCol0 + N > bCols)
    return "B lacks columns of Y's local box";
  std::vector<int64_t> aOff, bOff;
  if (auto err = batchOffsets(Y, yBatch, A, aBatch, aRows * K, "A", aOff);
      !err.empty())
    return err;
  if (auto err = batchOffsets(Y, yBatch, B, bBatch, K * bCols, "B", bOff);
      !err.empty())
    return err;
  CudaOp op;
  op.kind = CudaOp::Kind::Gemm;
  op.dtype = type;
  op.elementSize = cudaElementSize(type);
  op.transA = transA, op.transB = transB;
  op.m = M, op.n = N, op.k = K;
  // Row-major local matrices: the leading dim is the stored last dim.
  op.lda = A.shape[ra - 1], op.ldb = B.shape[rb - 1], op.ldc = N;
  op.alpha = 1, op.beta = 0;
  const int64_t aStart = transA ? aRow0 : aRow0 * op.lda;
  const int64_t bStart = transB ? bCol0 * op.ldb : bCol0;
  int64_t sa = 0, sb = 0;
  if (!transA && aOff.size() > 1 && arithmetic(aOff, sa) &&
      arithmetic(bOff, sb) && sb == 0 && sa == M * op.lda) {
    // B broadcast over the batch and A's matrices back to back (as C's
    // are): the batch is one GEMM of batch * M rows, which cuBLAS runs
    // faster than the strided batched call (0.36 to 0.69 of it on the
    // H200's GPT GEMMs, bench/gpu/H200-run8.md). Each row of C is the same
    // dot products either way.
    op.m = M * static_cast<int64_t>(aOff.size());
    op.a = at(plan, d, A.buffer, aOff[0] + aStart);
    op.b = at(plan, d, B.buffer, bOff[0] + bStart);
    op.c = at(plan, d, Y.buffer, 0);
    ops.push_back(op);
    return "";
  }
  if (aOff.size() > 1 && arithmetic(aOff, sa) && arithmetic(bOff, sb)) {
    op.batch = static_cast<int64_t>(aOff.size());
    op.strideA = sa, op.strideB = sb, op.strideC = M * N;
    op.a = at(plan, d, A.buffer, aOff[0] + aStart);
    op.b = at(plan, d, B.buffer, bOff[0] + bStart);
    op.c = at(plan, d, Y.buffer, 0);
    ops.push_back(op);
    return "";
  }
  for (size_t e = 0; e < aOff.size(); ++e) {
    op.a = at(plan, d, A.buffer, aOff[e] + aStart);
    op.b = at(plan, d, B.buffer, bOff[e] + bStart);
    op.c = at(plan, d, Y.buffer, static_cast<int64_t>(e) * M * N);
    ops.push_back(op);
  }
  return "";
}

/// Whether Gemm ops may take cuBLASLt epilogues (bias, fused Relu):
/// TOFU_CUDA_NO_LT=1 keeps the separate calls, to time both ways on a GPU.
bool ltEpilogues() {
  const char *v = std::getenv("TOFU_CUDA_NO_LT");
  return !(v && std::string(v) == "1");
}

/// ONNX Gemm: Y = alpha op(A) op(B) + beta C. A C that is one row (a bias
/// per column) with beta 1 is cuBLASLt's bias epilogue; any other C is
/// broadcast into Y first. `relu`, when not null, is a Relu fused after the
/// GEMM (fusedReluOfGemm): the GEMM writes its output, through the ReLU
/// epilogue, instead of Y.
std::string mapGemm(const Plan &plan, int32_t d, const Instr &in,
                    std::vector<CudaOp> &ops, const Instr *relu = nullptr) {
  if (in.inputs.size() < 2 || in.inputs.size() > 3 || in.outputs.size() != 1)
    return "expects inputs (A, B, C?) and 1 output";
  Operand A = operand(plan, d, in, false, 0), B = operand(plan, d, in, false, 1),
          Y = operand(plan, d, in, true, 0);
  if (A.shape.size() != 2 || B.shape.size() != 2 || Y.shape.size() != 2)
    return "A, B and Y must be matrices";
  DType type;
  if (std::string why = gemmElementType("Gemm", {&A, &B, &Y}, type);
      !why.empty())
    return why;
  const bool transA = intAttr(in, "transA", 0) != 0;
  const bool transB = intAttr(in, "transB", 0) != 0;
  const int64_t M = Y.shape[0], N = Y.shape[1];
  const int64_t am = transA ? A.shape[1] : A.shape[0];
  const int64_t K = transA ? A.shape[0] : A.shape[1];
  const int64_t bk = transB ? B.shape[1] : B.shape[0];
  const int64_t bn = transB ? B.shape[0] : B.shape[1];
  if (am != M || bn != N || bk != K)
    return "local shapes do not match: A " + dims(A.shape) + " B " +
           dims(B.shape) + " Y " + dims(Y.shape);
  const bool hasC = in.inputs.size() == 3 && in.inputs[2] >= 0;
  DevicePointer biasVector;
  if (hasC) {
    Operand C = operand(plan, d, in, false, 2);
    if (C.dtype != type || C.shape.size() > 2)
      return std::string("C must be a ") + dtypeNumpyName(type) +
             " tensor of rank <= 2";
    CudaOp bias;
    bias.kind = CudaOp::Kind::GemmBias;
    bias.dtype = type;
    bias.elementSize = cudaElementSize(type);
    bias.m = M, bias.n = N;
    bias.beta = floatAttr(in, "beta", 1.0);
    int64_t offset = 0, stride = 1;
    int64_t strides[2] = {0, 0};
    const size_t rc = C.shape.size();
    for (size_t jj = rc; jj-- > 0;) {
      size_t i = jj + (2 - rc);
      if (C.global[jj] != 1 || Y.global[i] == 1) {
        if (Y.lo[i] < C.lo[jj] || Y.lo[i] + Y.shape[i] > C.lo[jj] + C.shape[jj])
          return "C's local box lacks part of Y's";
        offset += (Y.lo[i] - C.lo[jj]) * stride;
        strides[i] = stride;
      } else {
        offset += -C.lo[jj] * stride;
      }
      stride *= C.shape[jj];
    }
    bias.cRowStride = strides[0], bias.cColStride = strides[1];
    bias.c = at(plan, d, C.buffer, offset);
    bias.dst = at(plan, d, Y.buffer, 0);
    if (ltEpilogues() && bias.beta == 1 && bias.cRowStride == 0 &&
        bias.cColStride == 1)
      biasVector = bias.c;
    else
      ops.push_back(bias);
  }
  CudaOp op;
  op.kind = CudaOp::Kind::Gemm;
  op.dtype = type;
  op.elementSize = cudaElementSize(type);
  op.transA = transA, op.transB = transB;
  op.m = M, op.n = N, op.k = K;
  op.lda = A.shape[1], op.ldb = B.shape[1], op.ldc = N;
  op.alpha = floatAttr(in, "alpha", 1.0);
  op.bias = biasVector;
  op.beta = hasC && biasVector.device < 0 ? 1.0 : 0.0;
  op.a = at(plan, d, A.buffer);
  op.b = at(plan, d, B.buffer);
  op.c = at(plan, d, Y.buffer);
  if (relu) {
    op.relu = true;
    op.c = at(plan, d, relu->outputs[0]);
  }
  ops.push_back(op);
  return "";
}

/// Per instruction of device `d`'s program, the index of the Relu fused
/// into it (-1: none): a float32 Gemm whose next instruction is a Relu of
/// the same box reading the Gemm's output, which nothing else reads (no
/// other instruction of any device, no Fetch or Reduce piece). The GEMM
/// then writes the Relu's output through cuBLASLt's ReLU epilogue and its
/// own output is never written. Neither may be part of a fused launch, and
/// the Relu's output may not share bytes with the Gemm's operands.
std::vector<int32_t> fusedReluOfGemm(
    const Plan &plan, int32_t d,
    const std::vector<std::pair<int32_t, int32_t>> &chain,
    const std::map<std::pair<int32_t, int32_t>, int32_t> &readers) {
  const DeviceProgram &dev = plan.devices[d];
  std::vector<int32_t> fused(dev.instrs.size(), -1);
  for (size_t i = 0; i + 1 < dev.instrs.size(); ++i) {
    const Instr &gemm = dev.instrs[i], &relu = dev.instrs[i + 1];
    if (gemm.kind != Instr::Kind::Compute || gemm.kernel != "Gemm" ||
        relu.kind != Instr::Kind::Compute || relu.kernel != "Relu" ||
        gemm.outputs.size() != 1 || relu.inputs.size() != 1 ||
        relu.outputs.size() != 1 || gemm.outputs[0] < 0 ||
        relu.inputs[0] != gemm.outputs[0] || relu.outputs[0] < 0)
      continue;
    if (chain[i].first != chain[i].second ||
        chain[i + 1].first != chain[i + 1].second)
      continue;
    const Buffer &y = dev.buffers[gemm.outputs[0]];
    const Buffer &r = dev.buffers[relu.outputs[0]];
    if (plan.tensors[y.tensor].dtype != DType::F32 ||
        plan.tensors[r.tensor].dtype != DType::F32 || y.region.lo != r.region.lo || y.region.hi != r.region.hi ||
        y.region.numElements() == 0)
      continue;
    auto it = readers.find({d, gemm.outputs[0]});
    if (it == readers.end() || it->second != 1)
      continue;
    // The memory plan may place the Relu's output over an operand of the
    // Gemm (dead once the Gemm ran): the fused call would overwrite what it
    // still reads.
    bool overlaps = false;
    for (int32_t in : gemm.inputs)
      if (in >= 0) {
        const Buffer &b = dev.buffers[in];
        overlaps |= b.offset < r.offset + r.bytes && r.offset < b.offset + b.bytes;
      }
    if (overlaps)
      continue;
    fused[i] = static_cast<int32_t>(i + 1);
  }
  return fused;
}

/// How many times each (device, buffer) is read: Compute inputs and the
/// sources of Fetch and Reduce pieces, over every device's program.
std::map<std::pair<int32_t, int32_t>, int32_t> bufferReaders(const Plan &plan) {
  std::map<std::pair<int32_t, int32_t>, int32_t> readers;
  for (size_t d = 0; d < plan.devices.size(); ++d)
    for (const Instr &in : plan.devices[d].instrs) {
      if (in.kind == Instr::Kind::Compute) {
        for (int32_t b : in.inputs)
          if (b >= 0)
            ++readers[{static_cast<int32_t>(d), b}];
      } else {
        for (const Piece &p : in.pieces)
          ++readers[{p.device, p.buffer}];
      }
    }
  return readers;
}

/// Conv, ConvGradInput, ConvGradWeight -> one cuDNN call. Mapped when every
/// operand holds its whole spatial extent (batch and channel splits; group
/// 1 for a channel split) and the pads are symmetric; otherwise refused.
std::string mapConv(const Plan &plan, int32_t d, const Instr &in,
                    std::vector<CudaOp> &ops) {
  const std::string &k = in.kernel;
  const int direction = k == "Conv" ? 0 : k == "ConvGradInput" ? 1 : 2;
  if (in.outputs.size() != 1 || in.inputs.size() < 2)
    return "unexpected operands";
  if (direction == 0 && in.inputs.size() == 3 && in.inputs[2] >= 0)
    return "a Conv bias is not mapped to cuDNN yet";
  // X, W, Y operands per direction (see runtime/lib/KernelsConv.cpp).
  Operand X, W, Y;
  if (direction == 0) {
    X = operand(plan, d, in, false, 0), W = operand(plan, d, in, false, 1);
    Y = operand(plan, d, in, true, 0);
  } else if (direction == 1) {
    Y = operand(plan, d, in, false, 0), W = operand(plan, d, in, false, 1);
    X = operand(plan, d, in, true, 0);
  } else {
    Y = operand(plan, d, in, false, 0), X = operand(plan, d, in, false, 1);
    W = operand(plan, d, in, true, 0);
  }
  if (!X.present() || !W.present() || !Y.present())
    return "an operand is missing";
  const size_t rank = X.shape.size();
  if (rank < 3 || rank > 5 || W.shape.size() != rank || Y.shape.size() != rank)
    return "1 to 3 spatial dimensions are mapped to cuDNN";
  // cuDNN's NCHW convolutions take float32, float64 and float16 (computed in
  // float32); bfloat16 and integer types run the generated kernel.
  if (X.dtype != W.dtype || X.dtype != Y.dtype)
    return "operands of mixed element types";
  if (X.dtype != DType::F32 && X.dtype != DType::F64 && X.dtype != DType::F16)
    return std::string(dtypeNumpyName(X.dtype)) +
           " convolution is not mapped to cuDNN (float32, float64, float16)";
  const std::string autoPad = stringAttr(in, "auto_pad");
  if (!autoPad.empty() && autoPad != "NOTSET")
    return "auto_pad " + autoPad + " is not mapped to cuDNN yet";
  const size_t sp = rank - 2;
  // X (dX for ConvGradInput) may end before its tensor does: a strided
  // convolution whose windows never reach the last rows (a 1x1 stride-2
  // downsampling over an even extent reads rows 0, 2, ..., so the plan
  // holds X without the last one). cuDNN then convolves the rows held, as
  // a tensor of that extent: every window starts where it does in the
  // whole tensor (the same begin pad), reads no row past the region (the
  // plan's region is the windows' hull) and its zero padding past the
  // region's end stands for rows no window reads or for the tensor's own
  // end padding; Y's extents must still follow (checked below).
  for (size_t s = 2; s < rank; ++s)
    for (auto [name, o] : {std::pair<const char *, const Operand *>{"X", &X},
                           {"W", &W},
                           {"Y", &Y}})
      if (o->shape[s] != o->global[s] &&
          !(o == &X && o->lo[s] == 0 && o->shape[s] < o->global[s]))
        return std::string("a split of a spatial or kernel dimension is not "
                           "mapped to cuDNN yet (") +
               name + " holds [" + std::to_string(o->lo[s]) + ", " +
               std::to_string(o->lo[s] + o->shape[s]) + ") of " +
               std::to_string(o->global[s]) + " in dimension " +
               std::to_string(s) + ")";
  const int64_t group = intAttr(in, "group", 1);
  // The batch rows and channel slices must line up between the operands.
  if (X.lo[0] != Y.lo[0] || X.shape[0] != Y.shape[0])
    return "X and Y hold different batch rows";
  if (Y.lo[1] != W.lo[0] || Y.shape[1] != W.shape[0])
    return "Y and W hold different output channels";
  if (group != 1) {
    if (X.shape[1] != X.global[1] || W.shape[0] != W.global[0])
      return "a channel split with group " + std::to_string(group) +
             " is not mapped to cuDNN yet";
  } else if (X.lo[1] != W.lo[1] || X.shape[1] != W.shape[1]) {
    return "X and W hold different input channels";
  }
  CudaOp op;
  op.kind = CudaOp::Kind::Conv;
  op.dtype = X.dtype;
  op.elementSize = cudaElementSize(X.dtype);
  op.convDirection = direction;
  op.x = X.shape;
  op.w = W.shape;
  op.group = group;
  op.strides = intsAttr(in, "strides", std::vector<int64_t>(sp, 1));
  op.dilations = intsAttr(in, "dilations", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads =
      intsAttr(in, "pads", std::vector<int64_t>(2 * sp, 0));
  if (op.strides.size() != sp || op.dilations.size() != sp ||
      pads.size() != 2 * sp)
    return "strides, dilations or pads do not fit the spatial rank";
  op.padsBegin.assign(pads.begin(), pads.begin() + sp);
  op.padsEnd.assign(pads.begin() + sp, pads.end());
  if (op.padsBegin != op.padsEnd)
    return "asymmetric pads " + dims(pads) + " (cuDNN takes symmetric ones)";
  // Check Y's extents against the ONNX formula, as cuDNN will.
  for (size_t s = 0; s < sp; ++s) {
    int64_t span = X.shape[2 + s] + 2 * op.padsBegin[s] -
                   op.dilations[s] * (W.shape[2 + s] - 1) - 1;
    int64_t o = span < 0 ? 0 : span / op.strides[s] + 1;
    if (o != Y.shape[2 + s])
      return "Y's spatial extents " + dims(Y.shape) + " do not follow from X " +
             dims(X.shape) + " and W " + dims(W.shape);
  }
  op.a = at(plan, d, X.buffer);
  op.b = at(plan, d, W.buffer);
  op.c = at(plan, d, Y.buffer);
  ops.push_back(op);
  return "";
}

/// The calls moving (or adding) one piece into `dst` bytes laid out as box
/// `dstBox` on device `dstDevice`.
std::string mapPiece(const Plan &plan, const DeviceMapping &mapping,
                     const Piece &piece, DType dtype, int32_t dstDevice,
                     uint64_t dstOffset, const Box &dstBox, bool add,
                     std::vector<CudaOp> &ops) {
  const Buffer &src = plan.devices[piece.device].buffers[piece.buffer];
  const size_t rank = piece.region.lo.size();
  if (rank > kMaxBoxRank)
    return "rank " + std::to_string(rank) + " exceeds the box kernels' " +
           std::to_string(kMaxBoxRank);
  std::vector<int64_t> region(rank), srcExt(rank), dstExt(rank),
      srcStart(rank), dstStart(rank);
  for (size_t i = 0; i < rank; ++i) {
    region[i] = piece.region.hi[i] - piece.region.lo[i];
    srcExt[i] = src.region.hi[i] - src.region.lo[i];
    dstExt[i] = dstBox.hi[i] - dstBox.lo[i];
    srcStart[i] = piece.region.lo[i] - src.region.lo[i];
    dstStart[i] = piece.region.lo[i] - dstBox.lo[i];
    if (srcStart[i] < 0 || srcStart[i] + region[i] > srcExt[i] ||
        dstStart[i] < 0 || dstStart[i] + region[i] > dstExt[i])
      return "a piece lies outside its source or destination buffer";
  }
  const uint32_t es = cudaElementSize(dtype);
  CudaOp op;
  op.dtype = dtype;
  op.elementSize = es;
  op.src = {piece.device,
            src.offset + static_cast<uint64_t>(rowMajorOffset(
                             srcStart.data(), srcExt.data(), rank)) *
                             es};
  op.dst = {dstDevice,
            dstOffset + static_cast<uint64_t>(rowMajorOffset(
                            dstStart.data(), dstExt.data(), rank)) *
                            es};
  const bool sameGpu = mapping.devices[piece.device].gpu ==
                       mapping.devices[dstDevice].gpu;
  op.path = piece.device == dstDevice ? CopyPath::SameDevice
            : sameGpu                 ? CopyPath::SameGpu
                                      : CopyPath::Peer;
  if (!add && isContiguousRun(region.data(), srcExt.data(), rank) &&
      isContiguousRun(region.data(), dstExt.data(), rank)) {
    op.kind = CudaOp::Kind::Copy;
    op.bytes = static_cast<uint64_t>(piece.region.numElements()) * es;
    ops.push_back(op);
    return "";
  }
  // Box kernels address from the boxes' origins.
  op.src.offset = src.offset;
  op.dst.offset = dstOffset;
  op.kind = add ? CudaOp::Kind::BoxAdd : CudaOp::Kind::BoxCopy;
  op.box.rank = static_cast<int32_t>(rank);
  for (size_t i = 0; i < kMaxBoxRank; ++i) {
    bool used = i < rank;
    op.box.region[i] = used ? region[i] : 1;
    op.box.srcExtents[i] = used ? srcExt[i] : 1;
    op.box.dstExtents[i] = used ? dstExt[i] : 1;
    op.box.srcStart[i] = used ? srcStart[i] : 0;
    op.box.dstStart[i] = used ? dstStart[i] : 0;
  }
  ops.push_back(op);
  return "";
}

using Access = ByteAccess;
using HazardMap = ByteHazardMap;

/// The merged order of the CPU backend: (device, program index).
std::vector<std::pair<int32_t, int32_t>> mergedOrder(const Plan &plan) {
  std::vector<std::pair<int32_t, int32_t>> order;
  for (size_t d = 0; d < plan.devices.size(); ++d)
    for (size_t i = 0; i < plan.devices[d].instrs.size(); ++i)
      order.push_back({static_cast<int32_t>(d), static_cast<int32_t>(i)});
  std::stable_sort(order.begin(), order.end(),
                   [&plan](const auto &a, const auto &b) {
                     int64_t sa = plan.devices[a.first].instrs[a.second].seq;
                     int64_t sb = plan.devices[b.first].instrs[b.second].seq;
                     if (sa != sb)
                       return sa < sb;
                     return a.first < b.first;
                   });
  return order;
}

/// Whether an instruction has work (a Compute with a non-empty output, a
/// Fetch/Reduce with a non-empty destination).
bool hasWork(const Plan &plan, int32_t d, const Instr &in) {
  const auto &bufs = plan.devices[d].buffers;
  if (in.kind == Instr::Kind::Compute) {
    for (int32_t b : in.outputs)
      if (b >= 0 && bufs[b].region.numElements() > 0)
        return true;
    return false;
  }
  return bufs[in.dst].region.numElements() > 0;
}

/// The bytes an instruction reads and writes (whole buffers; the Reduce
/// scratch of its device).
std::vector<Access> accessesOf(const Plan &plan, const DeviceMapping &mapping,
                               int32_t d, const Instr &in) {
  std::vector<Access> acc;
  const auto &bufs = plan.devices[d].buffers;
  auto add = [&](int32_t dev, int32_t b, bool write) {
    if (b < 0)
      return;
    const Buffer &buf = plan.devices[dev].buffers[b];
    if (buf.bytes)
      acc.push_back({dev, buf.offset, buf.offset + buf.bytes, write});
  };
  if (in.kind == Instr::Kind::Compute) {
    for (int32_t b : in.inputs)
      add(d, b, false);
    for (int32_t b : in.outputs)
      add(d, b, true);
    return acc;
  }
  for (const Piece &p : in.pieces)
    if (p.region.numElements() > 0)
      add(p.device, p.buffer, false);
  if (in.kind == Instr::Kind::Reduce &&
      !(mapping.oneLaunchFetches && runsAsOneLaunch(plan, d, in))) {
    const DevicePlacement &pl = mapping.devices[d];
    acc.push_back({d, pl.scratchOffset,
                   pl.scratchOffset + bufs[in.dst].bytes, true});
  }
  add(d, in.dst, true);
  return acc;
}

int32_t streamId(int32_t device, StreamKind kind) {
  return device * 2 + static_cast<int32_t>(kind);
}

/// The stream rule: Compute and purely local Fetch/Reduce on the compute
/// stream, anything with a piece of another plan device on the comm stream.
StreamKind streamFor(int32_t d, const Instr &in) {
  if (in.kind == Instr::Kind::Compute)
    return StreamKind::Compute;
  for (const Piece &p : in.pieces)
    if (p.device != d && p.region.numElements() > 0)
      return StreamKind::Comm;
  return StreamKind::Compute;
}

} // namespace

bool tofu::cuda::isContiguousRun(const int64_t *region, const int64_t *ext,
                                 size_t rank) {
  size_t j = 0;
  while (j < rank && region[j] == 1)
    ++j;
  for (size_t i = j + 1; i < rank; ++i)
    if (region[i] != ext[i])
      return false;
  return true;
}

bool BoxMove::srcContiguous() const {
  return isContiguousRun(region.data(), srcExtents.data(), rank);
}
bool BoxMove::dstContiguous() const {
  return isContiguousRun(region.data(), dstExtents.data(), rank);
}
int64_t BoxMove::srcStartElement() const {
  return rowMajorOffset(srcStart.data(), srcExtents.data(), rank);
}
int64_t BoxMove::dstStartElement() const {
  return rowMajorOffset(dstStart.data(), dstExtents.data(), rank);
}

int64_t tofu::cuda::rowMajorOffset(const int64_t *start, const int64_t *ext,
                                   size_t rank) {
  int64_t off = 0;
  for (size_t i = 0; i < rank; ++i)
    off = off * ext[i] + start[i];
  return off;
}

std::string tofu::cuda::mapDevices(const Plan &plan, int32_t numGpus,
                                   DeviceMapping &mapping,
                                   bool oneLaunchFetches) {
  const int32_t k = static_cast<int32_t>(plan.devices.size());
  if (numGpus < 1 || numGpus > k)
    return "--devices " + std::to_string(numGpus) + ": a plan for " +
           std::to_string(k) + " device" + (k == 1 ? "" : "s") +
           " runs on 1 to " + std::to_string(k) +
           " GPUs (several plan devices share a GPU as virtual devices)";
  mapping = DeviceMapping();
  mapping.numGpus = numGpus;
  mapping.oneLaunchFetches = oneLaunchFetches;
  mapping.gpuBytes.assign(numGpus, 0);
  mapping.devices.resize(k);
  for (int32_t p = 0; p < k; ++p) {
    DevicePlacement &pl = mapping.devices[p];
    pl.gpu = static_cast<int32_t>(static_cast<int64_t>(p) * numGpus / k);
    pl.arenaBytes = plan.devices[p].peakBytes;
    uint64_t scratch = 0;
    for (const Instr &in : plan.devices[p].instrs)
      if (in.kind == Instr::Kind::Reduce &&
          !(oneLaunchFetches && runsAsOneLaunch(plan, p, in)))
        scratch = std::max(scratch, plan.devices[p].buffers[in.dst].bytes);
    pl.scratchOffset = alignUp(pl.arenaBytes);
    pl.scratchBytes = alignUp(scratch);
    pl.sliceBytes = pl.scratchOffset + pl.scratchBytes;
    pl.base = mapping.gpuBytes[pl.gpu];
    mapping.gpuBytes[pl.gpu] += pl.sliceBytes;
  }
  return "";
}

std::string tofu::cuda::buildSchedule(const Plan &plan, int32_t numGpus,
                                      Schedule &schedule,
                                      bool oneLaunchFetches) {
  schedule = Schedule();
  if (std::string err = mapDevices(plan, numGpus, schedule.mapping,
                                   oneLaunchFetches);
      !err.empty())
    return err;
  const DeviceMapping &mapping = schedule.mapping;
  schedule.tableBytes.assign(numGpus, 0);
  const size_t k = plan.devices.size();
  if (plan.cuda.arch.empty())
    return "the plan has no CUDA kernels: compile it with tofuc --cuda-arch "
           "sm_XY (the architecture of the GPU, e.g. sm_90 for H100)";

  // Launches per (device, first instruction).
  std::map<std::pair<int32_t, int32_t>, std::vector<int32_t>> launchesAt;
  for (size_t l = 0; l < plan.cuda.launches.size(); ++l) {
    const CudaLaunch &launch = plan.cuda.launches[l];
    launchesAt[{launch.device, launch.firstInstr}].push_back(
        static_cast<int32_t>(l));
  }
  // The chain (first, last) each instruction belongs to.
  std::vector<std::vector<std::pair<int32_t, int32_t>>> chain(k);
  for (size_t d = 0; d < k; ++d) {
    chain[d].resize(plan.devices[d].instrs.size());
    for (size_t i = 0; i < chain[d].size(); ++i)
      chain[d][i] = {static_cast<int32_t>(i), static_cast<int32_t>(i)};
  }
  for (const CudaLaunch &launch : plan.cuda.launches)
    for (int32_t i = 0; i < launch.numInstrs; ++i)
      chain[launch.device][launch.firstInstr + i] = {
          launch.firstInstr, launch.firstInstr + launch.numInstrs - 1};
  // Gemm + Relu pairs issued as one cuBLASLt call, at the Relu's place (a
  // chain of two: checked like a fused launch below).
  std::vector<std::vector<bool>> reluFused(k);
  const bool fuseRelu = ltEpilogues();
  const auto readers = fuseRelu ? bufferReaders(plan)
                                : std::map<std::pair<int32_t, int32_t>, int32_t>();
  for (size_t d = 0; d < k; ++d) {
    reluFused[d].assign(plan.devices[d].instrs.size(), false);
    if (!fuseRelu)
      continue;
    const std::vector<int32_t> fused = fusedReluOfGemm(
        plan, static_cast<int32_t>(d), chain[d], readers);
    for (size_t i = 0; i < fused.size(); ++i)
      if (fused[i] >= 0) {
        chain[d][i] = chain[d][fused[i]] = {static_cast<int32_t>(i), fused[i]};
        reluFused[d][fused[i]] = true;
      }
  }

  // Which op each Compute becomes; unsupported ones are collected.
  struct Unsupported {
    int64_t count = 0;
    std::string first, why;
  };
  std::map<std::string, Unsupported> unsupported;
  auto refuse = [&](const std::string &op, int32_t d, int32_t i,
                    const std::string &why) {
    Unsupported &u = unsupported[op];
    if (u.count++ == 0) {
      u.first = where(plan, d, i);
      u.why = why;
    }
  };

  const auto order = mergedOrder(plan);
  std::vector<std::vector<int32_t>> orderPos(k);
  for (size_t d = 0; d < k; ++d)
    orderPos[d].assign(plan.devices[d].instrs.size(), -1);
  for (size_t o = 0; o < order.size(); ++o)
    orderPos[order[o].first][order[o].second] = static_cast<int32_t>(o);

  std::vector<HazardMap> hazards;
  for (size_t d = 0; d < k; ++d)
    hazards.emplace_back(mapping.devices[d].sliceBytes);
  // Per schedule entry, the highest position per stream known complete when
  // it completes; per stream, its last entry.
  std::vector<std::vector<int32_t>> clocks;
  std::vector<int32_t> lastOnStream(2 * k, -1);

  for (size_t o = 0; o < order.size(); ++o) {
    const auto [d, i] = order[o];
    const Instr &in = plan.devices[d].instrs[i];
    if (!hasWork(plan, d, in))
      continue;
    ScheduledInstr s;
    s.device = d;
    s.index = i;
    s.firstIndex = i;
    s.stream = streamFor(d, in);
    std::vector<Access> acc;
    if (in.kind == Instr::Kind::Compute) {
      const auto [first, last] = chain[d][i];
      if (first != last) {
        if (i != last)
          continue; // issued with the chain's last instruction
        s.firstIndex = first;
        for (int32_t j = first; j <= last; ++j) {
          auto more = accessesOf(plan, mapping, d, plan.devices[d].instrs[j]);
          acc.insert(acc.end(), more.begin(), more.end());
        }
        // Nothing issued between the chain's first and last instruction may
        // touch what the chain touches (the launch moves the first
        // instruction's work to the last one's place).
        for (int32_t between = orderPos[d][first] + 1;
             between < orderPos[d][last]; ++between) {
          const auto [bd, bi] = order[between];
          if (bd == d && bi >= first && bi <= last)
            continue;
          for (const Access &x : accessesOf(plan, mapping, bd,
                                            plan.devices[bd].instrs[bi]))
            for (const Access &y : acc)
              if (conflict(x, y))
                return "the fused launch of " + where(plan, d, first) +
                       " to " + std::to_string(last) + " conflicts with " +
                       where(plan, bd, bi) +
                       ", which runs between them; recompile the plan "
                       "without fusion";
        }
      } else {
        acc = accessesOf(plan, mapping, d, in);
      }
      auto it = reluFused[d][i] ? launchesAt.end()
                                : launchesAt.find({d, s.firstIndex});
      // Convolutions, pooling and batch normalization go to cuDNN where
      // the mapping applies (CudaDnnMapping.h for the latter); otherwise to
      // their generated kernel (tofuc generates one as the fallback).
      const bool isConv = in.kernel == "Conv" || in.kernel == "ConvGradInput" ||
                          in.kernel == "ConvGradWeight" ||
                          isDnnKernel(in.kernel);
      std::string convWhy;
      if (isConv && first == last) {
        std::vector<CudaOp> convOps;
        convWhy = isDnnKernel(in.kernel) ? mapDnn(plan, d, in, convOps)
                                         : mapConv(plan, d, in, convOps);
        if (convWhy.empty()) {
          s.ops = std::move(convOps);
          it = launchesAt.end();
        }
      }
      if (isConv && convWhy.empty()) {
        // mapped to cuDNN above
      } else if (it != launchesAt.end()) {
        if (isConv)
          s.notLibraryWhy = first == last ? convWhy
                                          : "part of a fused launch";
        for (int32_t l : it->second) {
          if (plan.cuda.launches[l].numElements == 0)
            continue;
          CudaOp op;
          op.kind = CudaOp::Kind::Kernel;
          op.launch = l;
          s.ops.push_back(op);
        }
        // Every non-empty output needs its launch.
        if (first == last) {
          std::set<int32_t> covered;
          for (int32_t l : it->second)
            covered.insert(plan.cuda.launches[l].output);
          for (size_t out = 0; out < in.outputs.size(); ++out)
            if (in.outputs[out] >= 0 &&
                plan.devices[d].buffers[in.outputs[out]].region.numElements() >
                    0 &&
                !covered.count(static_cast<int32_t>(out)))
              refuse(in.kernel, d, i,
                     "output " + std::to_string(out) +
                         " has no generated kernel");
        }
      } else {
        std::string why;
        if (reluFused[d][i])
          why = mapGemm(plan, d, plan.devices[d].instrs[s.firstIndex], s.ops,
                        &in);
        else if (in.kernel == "MatMul" || in.kernel == "MatMulTransposed")
          why = mapMatMul(plan, d, in, s.ops);
        else if (in.kernel == "Gemm")
          why = mapGemm(plan, d, in, s.ops);
        else if (isConv)
          why = convWhy + " (and the plan has no generated kernel for it: "
                          "recompile it with this tofuc)";
        else if (in.programs().empty())
          why = "an opaque op (no TDL expression program, so tofuc generated "
                "no kernel) without a cuBLAS/cuDNN mapping";
        else
          why = "no generated kernel in the plan and no cuBLAS/cuDNN mapping";
        if (!why.empty()) {
          refuse(in.kernel, d, i, why);
          s.ops.clear();
        }
      }
    } else {
      acc = accessesOf(plan, mapping, d, in);
      const Buffer &dst = plan.devices[d].buffers[in.dst];
      const DType dtype = plan.tensors[dst.tensor].dtype;
      if (cudaElementSize(dtype) == 0) {
        refuse(in.kind == Instr::Kind::Fetch ? "Fetch" : "Reduce", d, i,
               "element type " + std::to_string(static_cast<int>(dtype)) +
                   " is not supported by the CUDA backend (it is no plan "
                   "element type)");
        continue;
      }
      const bool reduce = in.kind == Instr::Kind::Reduce;
      // One MultiFetch/MultiReduce launch, or per piece a copy or box op.
      const bool oneLaunch =
          mapping.oneLaunchFetches && runsAsOneLaunch(plan, d, in);
      if (oneLaunch)
        mapMultiFetch(plan, schedule, d, in, s.ops);
      const DevicePlacement &pl = mapping.devices[d];
      const uint64_t target = reduce ? pl.scratchOffset : dst.offset;
      if (reduce && !oneLaunch) {
        CudaOp zero;
        zero.kind = CudaOp::Kind::Zero;
        zero.dst = {d, target};
        zero.bytes = dst.bytes;
        s.ops.push_back(zero);
      }
      for (const Piece &piece : in.pieces) {
        if (oneLaunch || piece.region.numElements() == 0)
          continue;
        if (std::string why = mapPiece(plan, mapping, piece, dtype, d, target,
                                       dst.region, reduce, s.ops);
            !why.empty())
          refuse(reduce ? "Reduce" : "Fetch", d, i, why);
      }
      if (reduce && !oneLaunch) {
        CudaOp copy;
        copy.kind = CudaOp::Kind::Copy;
        copy.src = {d, target};
        copy.dst = {d, dst.offset};
        copy.bytes = dst.bytes;
        copy.path = CopyPath::SameDevice;
        s.ops.push_back(copy);
      }
    }

    // Dependencies.
    const int32_t pos = static_cast<int32_t>(schedule.instrs.size());
    std::map<int32_t, int32_t> latestPerStream;
    const int32_t myStream = streamId(d, s.stream);
    for (const Access &a : acc)
      hazards[a.device].access(a.lo, a.hi, a.write, pos, [&](int32_t dep) {
        if (dep == pos)
          return;
        const ScheduledInstr &e = schedule.instrs[dep];
        int32_t st = streamId(e.device, e.stream);
        if (st == myStream)
          return;
        int32_t &latest = latestPerStream[st];
        latest = std::max(latest, dep);
      });
    // Keep only the waits that stream order and the other waits do not
    // already imply (vector clocks, latest candidate first: a later entry
    // can imply an earlier one, never the reverse), so each is needed.
    std::vector<int32_t> clock(2 * k, -1);
    if (lastOnStream[myStream] >= 0)
      clock = clocks[lastOnStream[myStream]];
    std::vector<int32_t> candidates;
    for (const auto &[st, dep] : latestPerStream)
      candidates.push_back(dep);
    std::sort(candidates.rbegin(), candidates.rend());
    for (int32_t dep : candidates) {
      const ScheduledInstr &e = schedule.instrs[dep];
      if (clock[streamId(e.device, e.stream)] >= dep)
        continue;
      s.waits.push_back(dep);
      schedule.instrs[dep].recordsEvent = true;
      for (size_t t = 0; t < clock.size(); ++t)
        clock[t] = std::max(clock[t], clocks[dep][t]);
    }
    clock[myStream] = pos;
    clocks.push_back(std::move(clock));
    lastOnStream[myStream] = pos;
    std::sort(s.waits.begin(), s.waits.end());

    // The loss: saved right after each write of its device-0 buffer.
    if (plan.lossTensor >= 0 && d == 0) {
      auto writes = [&](int32_t b) {
        const Buffer &buf = plan.devices[0].buffers[b];
        return buf.tensor == plan.lossTensor && buf.owned;
      };
      int32_t lossBuffer = -1;
      for (int32_t j = s.firstIndex; j <= s.index; ++j) {
        const Instr &x = plan.devices[0].instrs[j];
        if (x.kind == Instr::Kind::Compute) {
          for (int32_t b : x.outputs)
            if (b >= 0 && writes(b))
              lossBuffer = b;
        } else if (writes(x.dst)) {
          lossBuffer = x.dst;
        }
      }
      if (lossBuffer >= 0) {
        CudaOp save;
        save.kind = CudaOp::Kind::SaveLoss;
        save.src = at(plan, 0, lossBuffer);
        save.dtype = plan.tensors[plan.lossTensor].dtype;
        save.elementSize = cudaElementSize(save.dtype);
        save.bytes = save.elementSize;
        s.ops.push_back(save);
        schedule.lossWriter = pos;
      }
    }
    schedule.instrs.push_back(std::move(s));
  }

  if (!unsupported.empty()) {
    std::string msg = "the CUDA backend cannot run this plan: ";
    bool firstOp = true;
    for (const auto &[op, u] : unsupported) {
      msg += (firstOp ? "" : "; ") + std::string("op '") + op + "' has no "
             "CUDA implementation (" + u.why + "; " +
             std::to_string(u.count) + " instruction" +
             (u.count == 1 ? "" : "s") + ", first " + u.first + ")";
      firstOp = false;
    }
    return msg + ". Run the plan with --backend cpu, or compile the model "
                 "without these ops";
  }
  if (plan.lossTensor >= 0 && schedule.lossWriter < 0)
    return "no instruction of device 0 writes the loss tensor '" +
           plan.tensors[plan.lossTensor].name + "'";
  return "";
}

std::string tofu::cuda::validateSchedule(const Plan &plan,
                                         const Schedule &schedule) {
  const DeviceMapping &mapping = schedule.mapping;
  const size_t k = plan.devices.size();
  if (mapping.devices.size() != k)
    return "the mapping places " + std::to_string(mapping.devices.size()) +
           " devices, the plan has " + std::to_string(k);
  // Placements: inside the GPU's allocation, disjoint per GPU, big enough.
  for (size_t p = 0; p < k; ++p) {
    const DevicePlacement &a = mapping.devices[p];
    if (a.gpu < 0 || a.gpu >= mapping.numGpus)
      return "device " + std::to_string(p) + " is on GPU " +
             std::to_string(a.gpu) + " of " + std::to_string(mapping.numGpus);
    if (a.arenaBytes < plan.devices[p].peakBytes ||
        a.scratchOffset < a.arenaBytes ||
        a.scratchOffset + a.scratchBytes > a.sliceBytes ||
        a.base + a.sliceBytes > mapping.gpuBytes[a.gpu])
      return "device " + std::to_string(p) +
             "'s slice does not hold its arena and scratch inside GPU " +
             std::to_string(a.gpu) + "'s allocation";
    if (a.base % kDeviceAlignment)
      return "device " + std::to_string(p) + "'s slice is not aligned";
    for (size_t q = 0; q < p; ++q) {
      const DevicePlacement &b = mapping.devices[q];
      if (a.gpu == b.gpu && a.sliceBytes && b.sliceBytes &&
          a.base < b.base + b.sliceBytes && b.base < a.base + a.sliceBytes)
        return "devices " + std::to_string(q) + " and " + std::to_string(p) +
               " share memory on GPU " + std::to_string(a.gpu);
    }
  }
  if (std::string err = checkMultiFetchTables(schedule); !err.empty())
    return err;
  // Every instruction with work exactly once; the stream rule; op memory.
  std::map<std::pair<int32_t, int32_t>, int32_t> posOf;
  for (size_t s = 0; s < schedule.instrs.size(); ++s) {
    const ScheduledInstr &e = schedule.instrs[s];
    if (e.device < 0 || e.device >= static_cast<int32_t>(k) ||
        e.firstIndex < 0 || e.index < e.firstIndex ||
        e.index >= static_cast<int32_t>(plan.devices[e.device].instrs.size()))
      return "schedule entry " + std::to_string(s) + " names no instruction";
    for (int32_t i = e.firstIndex; i <= e.index; ++i) {
      if (!posOf.insert({{e.device, i}, static_cast<int32_t>(s)}).second)
        return where(plan, e.device, i) + " is scheduled twice";
      if (streamFor(e.device, plan.devices[e.device].instrs[i]) != e.stream)
        return where(plan, e.device, i) + " is on the " +
               (e.stream == StreamKind::Comm ? "communication" : "compute") +
               " stream, which the stream rule does not give it";
    }
    for (int32_t w : e.waits)
      if (w < 0 || w >= static_cast<int32_t>(s) ||
          !schedule.instrs[w].recordsEvent)
        return "schedule entry " + std::to_string(s) +
               " waits on an event not recorded before it";
    auto inside = [&](const DevicePointer &p, uint64_t bytes) {
      return p.device >= 0 && p.device < static_cast<int32_t>(k) &&
             p.offset + bytes <= mapping.devices[p.device].sliceBytes;
    };
    for (const CudaOp &op : e.ops) {
      bool ok = true;
      switch (op.kind) {
      case CudaOp::Kind::Copy:
        ok = inside(op.src, op.bytes) && inside(op.dst, op.bytes) &&
             (op.path == CopyPath::Peer) ==
                 (mapping.devices[op.src.device].gpu !=
                  mapping.devices[op.dst.device].gpu) &&
             (op.path == CopyPath::SameDevice) ==
                 (op.src.device == op.dst.device);
        break;
      case CudaOp::Kind::Zero:
        ok = inside(op.dst, op.bytes);
        break;
      case CudaOp::Kind::BoxCopy:
      case CudaOp::Kind::BoxAdd: {
        uint64_t srcN = 1, dstN = 1;
        for (int r = 0; r < op.box.rank; ++r) {
          srcN *= op.box.srcExtents[r];
          dstN *= op.box.dstExtents[r];
          ok &= op.box.srcStart[r] + op.box.region[r] <= op.box.srcExtents[r] &&
                op.box.dstStart[r] + op.box.region[r] <= op.box.dstExtents[r];
        }
        ok &= inside(op.src, srcN * op.elementSize) &&
              inside(op.dst, dstN * op.elementSize);
        break;
      }
      case CudaOp::Kind::MultiFetch:
      case CudaOp::Kind::MultiReduce:
        if (std::string err = checkMultiFetch(plan, schedule, e, op);
            !err.empty())
          return "schedule entry " + std::to_string(s) + " (" +
                 where(plan, e.device, e.index) + "): " + err;
        break;
      case CudaOp::Kind::Pool:
      case CudaOp::Kind::BatchNorm:
        for (const auto &[p, bytes] : dnnOperandSpans(op))
          ok &= inside(p, bytes);
        break;
      default:
        break;
      }
      if (!ok)
        return "schedule entry " + std::to_string(s) + " (" +
               where(plan, e.device, e.index) +
               ") has a copy outside its devices' memory or on the wrong path";
    }
  }
  const auto order = mergedOrder(plan);
  for (const auto &[d, i] : order)
    if (hasWork(plan, d, plan.devices[d].instrs[i]) && !posOf.count({d, i}))
      return where(plan, d, i) + " has work but is not scheduled";

  // Happens-before by vector clocks over the 2k streams: clock[s][t] = the
  // highest schedule position on stream t known complete when s completes.
  const size_t numStreams = 2 * k;
  std::vector<std::vector<int32_t>> clock(schedule.instrs.size());
  std::vector<int32_t> lastOnStream(numStreams, -1);
  for (size_t s = 0; s < schedule.instrs.size(); ++s) {
    const ScheduledInstr &e = schedule.instrs[s];
    const int32_t st = streamId(e.device, e.stream);
    std::vector<int32_t> c(numStreams, -1);
    auto merge = [&](const std::vector<int32_t> &other) {
      for (size_t t = 0; t < numStreams; ++t)
        c[t] = std::max(c[t], other[t]);
    };
    if (lastOnStream[st] >= 0)
      merge(clock[lastOnStream[st]]);
    for (int32_t w : e.waits)
      merge(clock[w]);
    c[st] = static_cast<int32_t>(s);
    clock[s] = std::move(c);
    lastOnStream[st] = static_cast<int32_t>(s);
  }
  auto before = [&](int32_t a, int32_t b) {
    const ScheduledInstr &e = schedule.instrs[a];
    return clock[b][streamId(e.device, e.stream)] >= a;
  };
  // Conflicting pairs in the CPU order must be ordered.
  std::vector<HazardMap> hazards;
  for (size_t d = 0; d < k; ++d)
    hazards.emplace_back(mapping.devices[d].sliceBytes);
  for (size_t o = 0; o < order.size(); ++o) {
    // Plain variables, not a structured binding: the lambda below captures
    // them, which C++17 forbids for bindings (clang 14 refuses it).
    const int32_t d = order[o].first, i = order[o].second;
    auto it = posOf.find({d, i});
    if (it == posOf.end())
      continue;
    const int32_t pos = it->second;
    for (const Access &a :
         accessesOf(plan, mapping, d, plan.devices[d].instrs[i])) {
      std::string err;
      hazards[a.device].access(a.lo, a.hi, a.write, pos, [&](int32_t dep) {
        if (!err.empty() || dep == pos)
          return;
        if (dep > pos || !before(dep, pos)) {
          const ScheduledInstr &x = schedule.instrs[dep];
          err = where(plan, d, i) + " may run before or during " +
                where(plan, x.device, x.index) +
                ", which touches the same bytes of device " +
                std::to_string(a.device) + " earlier in the plan's order";
        }
      });
      if (!err.empty())
        return err;
    }
  }
  return "";
}

std::vector<ByteAccess> tofu::cuda::entryAccesses(const Plan &plan,
                                                 const DeviceMapping &mapping,
                                                 const ScheduledInstr &entry) {
  std::vector<ByteAccess> acc;
  for (int32_t i = entry.firstIndex; i <= entry.index; ++i) {
    auto more = accessesOf(plan, mapping, entry.device,
                           plan.devices[entry.device].instrs[i]);
    acc.insert(acc.end(), more.begin(), more.end());
  }
  return acc;
}

std::string tofu::cuda::describeSchedule(const Plan &plan,
                                         const Schedule &schedule) {
  std::string out;
  const DeviceMapping &m = schedule.mapping;
  for (size_t p = 0; p < m.devices.size(); ++p)
    out += "device " + std::to_string(p) + ": GPU " +
           std::to_string(m.devices[p].gpu) + " bytes [" +
           std::to_string(m.devices[p].base) + ", " +
           std::to_string(m.devices[p].base + m.devices[p].sliceBytes) +
           ") arena " + std::to_string(m.devices[p].arenaBytes) +
           " scratch " + std::to_string(m.devices[p].scratchBytes) + "\n";
  for (size_t g = 0; g < schedule.tableBytes.size(); ++g)
    if (schedule.tableBytes[g]) {
      size_t n = 0;
      for (const MultiFetchTable &t : schedule.tables)
        n += t.gpu == static_cast<int32_t>(g);
      out += "GPU " + std::to_string(g) + ": " + std::to_string(n) +
             " MultiFetch piece tables, " +
             std::to_string(schedule.tableBytes[g]) + " bytes after its " +
             std::to_string(m.gpuBytes[g]) + " bytes of slices\n";
    }
  for (size_t s = 0; s < schedule.instrs.size(); ++s) {
    const ScheduledInstr &e = schedule.instrs[s];
    const Instr &in = plan.devices[e.device].instrs[e.index];
    out += std::to_string(s) + ": d" + std::to_string(e.device) + " #" +
           std::to_string(e.firstIndex) +
           (e.firstIndex != e.index ? "-" + std::to_string(e.index) : "") +
           (e.stream == StreamKind::Comm   ? " comm"
            : e.stream == StreamKind::Nccl ? " nccl"
                                           : " compute") +
           " " +
           (in.kind == Instr::Kind::Compute ? in.kernel
            : in.kind == Instr::Kind::Fetch ? "Fetch"
                                            : "Reduce");
    if (!e.waits.empty()) {
      out += " waits";
      for (int32_t w : e.waits)
        out += " " + std::to_string(w);
    }
    if (e.recordsEvent)
      out += " records";
    out += " :";
    for (const CudaOp &op : e.ops) {
      switch (op.kind) {
      case CudaOp::Kind::Kernel:
        out += " launch " +
               plan.cuda.kernels[plan.cuda.launches[op.launch].kernel].name;
        if (!e.notLibraryWhy.empty())
          out += " (not cuDNN: " + e.notLibraryWhy + ")";
        break;
      case CudaOp::Kind::Gemm:
        // The call's row-major shape (CudaBlas.h GemmShape), so that the
        // GEMMs of a step can be timed alone (bench/gpu/gemm_bench.cu).
        out += std::string(" ") + gemmCallName(op) + "(" +
               dtypeNumpyName(op.dtype) + " tA=" + std::to_string(op.transA) +
               " tB=" + std::to_string(op.transB) +
               " m=" + std::to_string(op.m) + " n=" + std::to_string(op.n) +
               " k=" + std::to_string(op.k) +
               " lda=" + std::to_string(op.lda) +
               " ldb=" + std::to_string(op.ldb) +
               " ldc=" + std::to_string(op.ldc) +
               " batch=" + std::to_string(op.batch) +
               " sA=" + std::to_string(op.strideA) +
               " sB=" + std::to_string(op.strideB) +
               " sC=" + std::to_string(op.strideC) +
               " beta=" +
               (op.beta == 0 ? std::string("0") : std::to_string(op.beta)) +
               (op.bias.device >= 0 ? " bias=1" : "") +
               (op.relu ? " relu=1" : "") + ")";
        break;
      case CudaOp::Kind::GemmBias:
        out += " gemm-bias";
        break;
      case CudaOp::Kind::Conv:
        // The call's shapes, so that a step's convolutions can be timed
        // alone as the GEMMs are.
        out += std::string(op.convDirection == 0 ? " cudnnConvolutionForward"
                           : op.convDirection == 1
                               ? " cudnnConvolutionBackwardData"
                               : " cudnnConvolutionBackwardFilter") +
               "(" + dtypeNumpyName(op.dtype) + " x=" + dims(op.x) +
               " w=" + dims(op.w) + " pads=" + dims(op.padsBegin) +
               " strides=" + dims(op.strides) +
               " dilations=" + dims(op.dilations) +
               " group=" + std::to_string(op.group) + ")";
        break;
      case CudaOp::Kind::Copy:
        out += op.path == CopyPath::Peer ? " cudaMemcpyPeerAsync"
                                         : " cudaMemcpyAsync";
        out += "(" + std::to_string(op.bytes) + ")";
        break;
      case CudaOp::Kind::BoxCopy:
        out += " box-copy";
        break;
      case CudaOp::Kind::BoxAdd:
        out += " box-add";
        break;
      case CudaOp::Kind::Zero:
        out += " cudaMemsetAsync";
        break;
      case CudaOp::Kind::SaveLoss:
        out += " save-loss";
        break;
      case CudaOp::Kind::Send:
      case CudaOp::Kind::Recv:
        out += std::string(op.kind == CudaOp::Kind::Send ? " ncclSend(to "
                                                         : " ncclRecv(from ") +
               "rank " + std::to_string(op.peer) + ", " +
               std::to_string(op.bytes) + " bytes, transfer " +
               std::to_string(op.transfer) + ")";
      case CudaOp::Kind::MultiFetch:
      case CudaOp::Kind::MultiReduce:
        out += op.kind == CudaOp::Kind::MultiFetch ? " multi-fetch("
                                                   : " multi-reduce(";
        out += op.table >= 0 &&
                       op.table < static_cast<int32_t>(schedule.tables.size())
                   ? std::to_string(schedule.tables[op.table].pieces.size()) +
                         " pieces)"
                   : "no table)";
        break;
      case CudaOp::Kind::Pool:
      case CudaOp::Kind::BatchNorm:
        out += " " + describeDnnOp(op);
        break;
      }
    }
    out += "\n";
  }
  return out;
}
