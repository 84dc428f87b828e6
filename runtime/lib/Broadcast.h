//===- Broadcast.h - ONNX broadcasting on local boxes ------------*- C++ -*-===//
//
// Maps each element of a kernel's local output box to the element of a
// broadcast input's local box. Which dimensions broadcast is decided from the
// GLOBAL shapes (ONNX multidirectional rules, right-aligned): an input
// dimension whose global extent is 1 while the output's is not is read at
// index 0; every other dimension is read at the output's global coordinate,
// translated into the input box.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_LIB_BROADCAST_H
#define TOFU_RUNTIME_LIB_BROADCAST_H

#include "tofu/runtime/Kernels.h"

namespace tofu::runtime {

/// Fills `offsets[e]` with the flat index into `in`'s local box of the input
/// element that output element `e` (flat index into `out`'s local box) reads.
/// Returns an error if `in`'s rank exceeds `out`'s, if the global shapes are
/// not broadcast-compatible, or if `in`'s box lacks a needed element.
std::string broadcastOffsets(const TensorView &out, const TensorView &in,
                             std::vector<int64_t> &offsets);

/// The separable form of broadcastOffsets: `perDim[i][k]` is what output
/// local index k of dimension i adds to the flat index into `in`'s local
/// box (0 for a broadcast dimension), so output element (k0, k1, ...) reads
/// `in` at perDim[0][k0] + perDim[1][k1] + .... Cheaper than the per-element
/// table when the caller walks the output dimension by dimension (a 2-D
/// GEMM's bias row or column). Same errors as broadcastOffsets.
std::string broadcastDimOffsets(const TensorView &out, const TensorView &in,
                                std::vector<std::vector<int64_t>> &perDim);

/// True when `in` is exactly `out`'s box of a same-shaped tensor (no
/// broadcasting, element e reads element e).
bool sameBox(const TensorView &out, const TensorView &in);

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_LIB_BROADCAST_H
