//===- MatMulBatchOffsets.h - Batch elements of a broadcast MatMul -*- C++ -*-===//
//
// Shared by the CPU MatMul kernel and the CUDA schedule's batched GEMM: which
// local matrix of an operand each local batch element of the result reads,
// with ONNX (numpy) broadcasting of the leading batch dimensions.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_MATMULBATCHOFFSETS_H
#define TOFU_RUNTIME_MATMULBATCHOFFSETS_H

#include <cstdint>
#include <string>
#include <vector>

namespace tofu::runtime {

/// A tensor's local box: its lower corner and extents in global coordinates,
/// and the whole tensor's shape.
struct LocalBox {
  const std::vector<int64_t> &lo, &shape, &global;
};

/// For each local batch element of Y (an odometer over the first `yBatch`
/// dims of Y's local box, last dim fastest), the local element offset of the
/// `matrix`-element matrix of X it reads; X's `xBatch` leading dims broadcast
/// against Y's trailing batch dims. Returns "" or an error starting with
/// `what`; `missingIndex` is set when the error is only that X's box lacks a
/// batch index Y's box needs (a split the caller may hand elsewhere).
inline std::string matMulBatchOffsets(const LocalBox &Y, size_t yBatch,
                                      const LocalBox &X, size_t xBatch,
                                      int64_t matrix, const char *what,
                                      std::vector<int64_t> &offsets,
                                      bool &missingIndex) {
  missingIndex = false;
  // contrib[i][k]: offset of Y's local batch index k in dimension i.
  std::vector<std::vector<int64_t>> contrib(yBatch);
  int64_t stride = matrix;
  for (size_t j = xBatch; j-- > 0;) {
    size_t i = j + (yBatch - xBatch);
    int64_t gx = X.global[j], gy = Y.global[i];
    if (gx != gy && gx != 1)
      return std::string(what) + ": batch dimension " + std::to_string(j) +
             " has global extent " + std::to_string(gx) +
             ", not broadcastable to " + std::to_string(gy);
    for (int64_t k = 0; k < Y.shape[i]; ++k) {
      int64_t global = (gx == 1 && gy != 1) ? 0 : Y.lo[i] + k;
      int64_t local = global - X.lo[j];
      if (local < 0 || local >= X.shape[j]) {
        missingIndex = true;
        return std::string(what) + " lacks batch index " +
               std::to_string(global) + " of dimension " + std::to_string(j) +
               " (holds [" + std::to_string(X.lo[j]) + ", " +
               std::to_string(X.lo[j] + X.shape[j]) + "))";
      }
      contrib[i].push_back(local * stride);
    }
    stride *= X.shape[j];
  }
  for (size_t i = 0; i < yBatch - xBatch; ++i)
    contrib[i].assign(Y.shape[i], 0);
  int64_t n = 1;
  for (size_t i = 0; i < yBatch; ++i)
    n *= Y.shape[i];
  offsets.assign(n, 0);
  std::vector<int64_t> idx(yBatch, 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t off = 0;
    for (size_t i = 0; i < yBatch; ++i)
      off += contrib[i][idx[i]];
    offsets[e] = off;
    for (size_t i = yBatch; i-- > 0;) {
      if (++idx[i] < Y.shape[i])
        break;
      idx[i] = 0;
    }
  }
  return "";
}

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_MATMULBATCHOFFSETS_H
