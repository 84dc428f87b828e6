//===- InputFile.h - open an input file the checked way ---------*- C++ -*-===//
//
// Every file tofuc and tofu-run read (the model, plan.bin and its
// .tofu-weights shards, --resume models, their state and external data,
// .npy files under --data, TDL specs) is opened here: the file is opened
// without blocking and checked with fstat before a byte is read, so that
//   - a FIFO never blocks the reader forever,
//   - a device (/dev/zero) or a directory is refused instead of being read
//     until memory runs out,
//   - a file larger than the caller's documented limit is refused before it
//     is read.
// Errors are one line naming what was expected and the path
// (docs/Errors.md).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_INPUTFILE_H
#define TOFU_RUNTIME_INPUTFILE_H

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace tofu {

/// The default limit on an input file's size: 1 TiB, far above any model or
/// plan this project handles, and below what a size computation can
/// overflow. Callers pass a tighter limit where one is known (a protobuf
/// model is below 2 GiB, a TDL spec below 16 MiB).
constexpr uint64_t kMaxInputFileBytes = uint64_t(1) << 40;

/// What a stat'ed file is, in words ("a FIFO", "a directory", ...).
std::string describeFileType(unsigned mode);

/// Opens `path` for reading. `what` names the file in errors ("the model",
/// "the training state"). Refuses what is not a regular file and files over
/// `maxBytes`. On success returns a descriptor (O_CLOEXEC; the caller closes
/// it) and sets `size`; on failure returns -1 and sets `error`.
int openInputFile(const std::string &path, const std::string &what,
                  uint64_t maxBytes, uint64_t &size, std::string &error);

/// The same, as a stream for reads of ranges. Returns an empty string on
/// success, otherwise the error.
std::string openInputStream(const std::string &path, const std::string &what,
                            uint64_t maxBytes, std::ifstream &in,
                            uint64_t &size);

/// Reads the whole file into `bytes` (exactly the size fstat reported: a
/// file that grows while it is read is not read past it). Returns an empty
/// string on success, otherwise the error.
std::string readInputFile(const std::string &path, const std::string &what,
                          uint64_t maxBytes, std::vector<uint8_t> &bytes);
std::string readInputFile(const std::string &path, const std::string &what,
                          uint64_t maxBytes, std::string &bytes);

} // namespace tofu

#endif // TOFU_RUNTIME_INPUTFILE_H
