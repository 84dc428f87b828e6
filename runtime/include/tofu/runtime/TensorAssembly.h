//===- TensorAssembly.h - Whole tensors from owned buffers -------*- C++ -*-===//
//
// Each device owns one buffer per tensor (its tile); together the owned
// buffers cover the tensor. --save and --dump reassemble whole tensors from
// them; --resume cuts whole tensors back into buffers.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_TENSORASSEMBLY_H
#define TOFU_RUNTIME_TENSORASSEMBLY_H

#include "tofu/runtime/Plan.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tofu::runtime {

/// Returns the bytes of buffer `buffer` on device `device` (its whole
/// region), or null if they are not available.
using BufferSource = std::function<const uint8_t *(int32_t device,
                                                   int32_t buffer)>;

/// Writes tensor `tensor` densely (row-major, global shape) into `out` from
/// the owned buffers of all devices. Fails if an owned buffer's bytes are not
/// available or the owned buffers leave an element uncovered.
std::string assembleTensor(const plan::Plan &plan, int32_t tensor,
                           const BufferSource &source,
                           std::vector<uint8_t> &out);

/// Host copies of buffers, by (device, buffer).
using BufferCopies =
    std::map<std::pair<int32_t, int32_t>, std::vector<uint8_t>>;
/// A BufferSource over `copies` (null for a buffer not in it); valid while
/// `copies` lives and is not changed.
BufferSource copiesSource(const BufferCopies &copies);

/// The inverse for one buffer: copies box `region` (global coordinates) of a
/// whole tensor stored densely in `whole` (row-major, global `shape`,
/// `elementSize` bytes per element) into `out`, densely in row-major order
/// of the box.
void extractRegion(const std::vector<uint8_t> &whole,
                   const std::vector<int64_t> &shape, size_t elementSize,
                   const plan::Box &region, std::vector<uint8_t> &out);

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_TENSORASSEMBLY_H
