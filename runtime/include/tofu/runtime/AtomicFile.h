//===- AtomicFile.h - write a file all at once or not at all ----*- C++ -*-===//
//
// Writes to `path.tmp` and renames it over `path`, so a crash or a full disk
// never leaves a half-written plan.bin or model behind (the previous file
// stays intact).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_ATOMICFILE_H
#define TOFU_RUNTIME_ATOMICFILE_H

#include <cstddef>
#include <functional>
#include <ostream>
#include <string>

namespace tofu {

/// Replaces the file at `path` with `size` bytes from `data`. Returns an empty
/// string on success, otherwise an error message naming the file.
std::string writeFileAtomically(const std::string &path, const void *data,
                                size_t size);

/// The same, with the contents written by `write` to the stream (for files
/// streamed from several buffers without assembling them in memory).
std::string
writeFileAtomically(const std::string &path,
                    const std::function<void(std::ostream &)> &write);

} // namespace tofu

#endif // TOFU_RUNTIME_ATOMICFILE_H
