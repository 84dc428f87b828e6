//===- NpyWriter.h - Write NumPy .npy files ----------------------*- C++ -*-===//
//
// NumPy format version 1.0: magic "\x93NUMPY", version 1.0, a little-endian
// uint16 header length, an ASCII dict header padded with spaces and a
// newline to a multiple of 64 bytes, then the data in C order.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_NPYWRITER_H
#define TOFU_RUNTIME_NPYWRITER_H

#include "tofu/runtime/Plan.h"

#include <string>
#include <vector>

namespace tofu::runtime {

/// Writes `data` (row-major, `shape`, little-endian '<f4' or '<i8') to
/// `path`. Returns an error message on failure.
std::string writeNpy(const std::string &path, plan::DType dtype,
                     const std::vector<int64_t> &shape,
                     const std::vector<uint8_t> &data);

/// The header (magic through padding) of such a file (exposed for tests).
std::string npyHeader(plan::DType dtype, const std::vector<int64_t> &shape);

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_NPYWRITER_H
