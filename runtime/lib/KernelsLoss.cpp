//===- KernelsLoss.cpp - Softmax cross-entropy loss and its gradient ------===//
//
// SoftmaxCrossEntropyLoss(scores: [N, C] f32, labels: [N] i64) -> loss: []
//   loss = -(1 / N_global) * sum over the LOCAL rows of
//          log_softmax(scores[n, :])[labels[n]]
// SoftmaxCrossEntropyLossGrad(dloss: [], scores, labels) -> dscores: [N, C]
//   dscores[n, c] = dloss * (softmax(scores[n, :])[c] - [labels[n] == c]) /
//                   N_global
// N_global is the global batch extent of `scores`: when rows are split across
// devices each computes a partial loss that the compiler's Reduce sums. Only
// reduction = "mean" is supported; ignore_index is not supported yet, so a
// label equal to it (or outside [0, C)) is an error.
//
//===----------------------------------------------------------------------===//

#include "tofu/runtime/Kernels.h"

#include <algorithm>
#include <cmath>

using namespace tofu::runtime;
using tofu::plan::DType;

namespace {

/// Checks the (scores, labels) pair and the loss attributes.
std::string checkScoresLabels(const KernelArgs &args, const TensorView &scores,
                              const TensorView &labels) {
  std::string reduction = args.stringAttr("reduction", "mean");
  if (reduction != "mean")
    return "reduction '" + reduction + "' is not supported (only \"mean\")";
  if (!scores.present() || !labels.present())
    return "scores or labels are missing";
  if (scores.dtype != DType::F32 || scores.shape.size() != 2)
    return "scores must be a 2-D float32 tensor";
  if (labels.dtype != DType::I64 || labels.shape.size() != 1)
    return "labels must be a 1-D int64 tensor";
  if (labels.shape[0] != scores.shape[0] || labels.lo.size() != 1 ||
      scores.lo.size() != 2 || labels.lo[0] != scores.lo[0])
    return "the local rows of labels and scores differ";
  if (scores.globalShape.size() != 2 || scores.globalShape[0] <= 0)
    return "the global batch extent of scores is unknown";
  if (scores.shape[1] != scores.globalShape[1])
    return "the class dimension is split (local " +
           std::to_string(scores.shape[1]) + " of " +
           std::to_string(scores.globalShape[1]) +
           " classes); softmax needs whole rows";
  int64_t ignore = args.intAttr("ignore_index", -100);
  int64_t C = scores.shape[1];
  for (int64_t n = 0; n < labels.shape[0]; ++n) {
    int64_t l = labels.i64()[n];
    int64_t row = labels.lo[0] + n;
    if (l == ignore)
      return "label " + std::to_string(l) + " of row " + std::to_string(row) +
             " equals ignore_index, which is not supported yet";
    if (l < 0 || l >= C)
      return "label " + std::to_string(l) + " of row " + std::to_string(row) +
             " is outside [0, " + std::to_string(C) + ")";
  }
  return "";
}

/// log(sum(exp(row - max))) + max, in double.
double logSumExp(const float *row, int64_t C) {
  double mx = row[0];
  for (int64_t c = 1; c < C; ++c)
    mx = std::max(mx, static_cast<double>(row[c]));
  double sum = 0;
  for (int64_t c = 0; c < C; ++c)
    sum += std::exp(static_cast<double>(row[c]) - mx);
  return std::log(sum) + mx;
}

std::string softmaxCrossEntropyLoss(const KernelArgs &args) {
  if (args.inputs.size() != 2 || args.outputs.size() != 1)
    return "expects inputs (scores, labels) and 1 output";
  const TensorView &scores = args.inputs[0], &labels = args.inputs[1];
  const TensorView &loss = args.outputs[0];
  if (auto err = checkScoresLabels(args, scores, labels); !err.empty())
    return err;
  if (loss.dtype != DType::F32 || loss.numElements() != 1)
    return "loss must be a float32 scalar";
  int64_t N = scores.shape[0], C = scores.shape[1];
  double total = 0;
  for (int64_t n = 0; n < N; ++n) {
    const float *row = scores.f32() + n * C;
    total += logSumExp(row, C) - row[labels.i64()[n]];
  }
  loss.f32()[0] = static_cast<float>(total / scores.globalShape[0]);
  return "";
}

std::string softmaxCrossEntropyLossGrad(const KernelArgs &args) {
  if (args.inputs.size() != 3 || args.outputs.size() != 1)
    return "expects inputs (dloss, scores, labels) and 1 output";
  const TensorView &dloss = args.inputs[0], &scores = args.inputs[1],
                   &labels = args.inputs[2], &dscores = args.outputs[0];
  if (!dloss.present() || dloss.dtype != DType::F32 ||
      dloss.numElements() != 1)
    return "dloss must be a float32 scalar";
  if (auto err = checkScoresLabels(args, scores, labels); !err.empty())
    return err;
  if (dscores.dtype != DType::F32 || dscores.shape != scores.shape)
    return "dscores must be float32 with the local shape of scores";
  int64_t N = scores.shape[0], C = scores.shape[1];
  double scale = static_cast<double>(dloss.f32()[0]) / scores.globalShape[0];
  for (int64_t n = 0; n < N; ++n) {
    const float *row = scores.f32() + n * C;
    float *out = dscores.f32() + n * C;
    double lse = logSumExp(row, C);
    int64_t label = labels.i64()[n];
    for (int64_t c = 0; c < C; ++c) {
      double p = std::exp(static_cast<double>(row[c]) - lse);
      out[c] = static_cast<float>(scale * (p - (c == label ? 1.0 : 0.0)));
    }
  }
  return "";
}

} // namespace

void tofu::runtime::registerLossKernels(void (*addKernel)(const char *,
                                                          KernelFn)) {
  addKernel("SoftmaxCrossEntropyLoss", softmaxCrossEntropyLoss);
  addKernel("SoftmaxCrossEntropyLossGrad", softmaxCrossEntropyLossGrad);
}
