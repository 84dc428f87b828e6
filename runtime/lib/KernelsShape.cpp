//===- KernelsShape.cpp - Reshape-family CPU kernels ----------------------===//
//
// Transpose: any rank and permutation, any element type, on any box whose
// input box holds the permuted output box.
//
// Reshape, Flatten, Squeeze, Unsqueeze, ReshapeAs and Identity: the output is
// the input's elements in the same row-major order under another shape, so
// output element g (global row-major index) is input element g. Whole
// tensors on both sides are one memcpy; a box of the output (a partitioned
// reshape) is gathered element by element with integer index arithmetic.
// Any element type (a byte copy); input 0 is the data, other inputs (the
// shape, the axes) only decide the output's shape, which the plan already
// holds. Before these kernels the TDL interpreter ran them in double, one
// element at a time: 35% of the GPT example's CPU step (bench/gpu/H200.md's
// model, issue 16).
//
//===----------------------------------------------------------------------===//

#include "tofu/runtime/Kernels.h"

#include <cstring>

using namespace tofu::runtime;

namespace {

bool isWhole(const TensorView &v) {
  for (size_t d = 0; d < v.shape.size(); ++d)
    if (v.lo[d] != 0 || v.shape[d] != v.globalShape[d])
      return false;
  return true;
}

int64_t product(const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

std::string rowMajorCopy(const KernelArgs &args) {
  if (args.inputs.empty() || args.outputs.size() != 1)
    return "expects the data input and 1 output";
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (!in.present())
    return "the data input is missing";
  if (in.dtype != out.dtype)
    return "the output's element type differs from the input's";
  if (product(in.globalShape) != product(out.globalShape))
    return "the input has " + std::to_string(product(in.globalShape)) +
           " elements but the output " +
           std::to_string(product(out.globalShape));
  const size_t size = tofu::plan::dtypeSize(in.dtype);
  const auto *src = static_cast<const uint8_t *>(in.data);
  auto *dst = static_cast<uint8_t *>(out.data);
  const int64_t n = out.numElements();
  if (isWhole(in) && isWhole(out)) {
    if (n > 0 && src != dst)
      std::memmove(dst, src, static_cast<size_t>(n) * size);
    return "";
  }
  // Global row-major strides of both tensors.
  const size_t outRank = out.shape.size(), inRank = in.shape.size();
  std::vector<int64_t> outStride(outRank, 1), inStride(inRank, 1);
  for (size_t d = outRank; d-- > 1;)
    outStride[d - 1] = outStride[d] * out.globalShape[d];
  for (size_t d = inRank; d-- > 1;)
    inStride[d - 1] = inStride[d] * in.globalShape[d];
  std::vector<int64_t> idx(out.lo); // global coordinates of output element e
  for (int64_t e = 0; e < n; ++e) {
    int64_t flat = 0;
    for (size_t d = 0; d < outRank; ++d)
      flat += idx[d] * outStride[d];
    int64_t local = 0;
    for (size_t d = 0; d < inRank; ++d) {
      const int64_t g = flat / inStride[d] % in.globalShape[d];
      const int64_t l = g - in.lo[d];
      if (l < 0 || l >= in.shape[d])
        return unsupportedConfiguration(
            "the input box lacks an element the output box needs");
      local = local * in.shape[d] + l;
    }
    std::memcpy(dst + static_cast<size_t>(e) * size,
                src + static_cast<size_t>(local) * size, size);
    for (size_t d = outRank; d-- > 0;) {
      if (++idx[d] < out.lo[d] + out.shape[d])
        break;
      idx[d] = out.lo[d];
    }
  }
  return "";
}

std::string transpose(const KernelArgs &args) {
  if (args.inputs.size() != 1 || args.outputs.size() != 1)
    return "expects 1 input and 1 output";
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (!in.present())
    return "the data input is missing";
  if (in.dtype != out.dtype)
    return "the output's element type differs from the input's";
  const size_t rank = in.shape.size();
  std::vector<int64_t> perm = args.intsAttr("perm", {});
  if (perm.empty())
    for (size_t d = rank; d-- > 0;)
      perm.push_back(static_cast<int64_t>(d));
  if (perm.size() != rank || out.shape.size() != rank)
    return "perm has " + std::to_string(perm.size()) + " entries for rank " +
           std::to_string(rank);
  // Output dim k reads input dim perm[k]: its local stride there, and the
  // check that the input box holds the output box.
  std::vector<int64_t> inStride(rank, 1), stride(rank);
  for (size_t d = rank; d-- > 1;)
    inStride[d - 1] = inStride[d] * in.shape[d];
  int64_t base = 0;
  for (size_t k = 0; k < rank; ++k) {
    const int64_t p = perm[k];
    if (p < 0 || p >= static_cast<int64_t>(rank))
      return "perm entry " + std::to_string(p) + " out of range";
    if (out.globalShape[k] != in.globalShape[p])
      return "the output's global shape is not the permuted input's";
    if (out.lo[k] < in.lo[p] ||
        out.lo[k] + out.shape[k] > in.lo[p] + in.shape[p])
      return unsupportedConfiguration(
          "the input box lacks part of the permuted output box");
    stride[k] = inStride[p];
    base += (out.lo[k] - in.lo[p]) * inStride[p];
  }
  const size_t size = tofu::plan::dtypeSize(in.dtype);
  const auto *src = static_cast<const uint8_t *>(in.data);
  auto *dst = static_cast<uint8_t *>(out.data);
  const int64_t n = out.numElements();
  if (n == 0)
    return "";
  std::vector<int64_t> idx(rank, 0); // local output coordinates
  int64_t offset = base;             // input element of output element e
  for (int64_t e = 0; e < n; ++e) {
    std::memcpy(dst + static_cast<size_t>(e) * size,
                src + static_cast<size_t>(offset) * size, size);
    for (size_t k = rank; k-- > 0;) {
      offset += stride[k];
      if (++idx[k] < out.shape[k])
        break;
      offset -= stride[k] * out.shape[k];
      idx[k] = 0;
    }
  }
  return "";
}

} // namespace

void tofu::runtime::registerShapeKernels(void (*addKernel)(const char *,
                                                           KernelFn)) {
  for (const char *op :
       {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "ReshapeAs", "Identity"})
    addKernel(op, rowMajorCopy);
  addKernel("Transpose", transpose);
}
