//===- AtomicFile.h - write an output file the checked way ------*- C++ -*-===//
//
// Every file tofuc and tofu-run write (plan.bin and its weights, --save and
// its state and data files, --report, --trace, --dump) is written here:
//   - a regular file or a new path is written to `path.tmp`, which then
//     takes the name `path` atomically (renameat2 RENAME_EXCHANGE, then the
//     old contents are removed; rename(2) where the exchange is not
//     supported), so a crash or a full disk never leaves a half-written file
//     behind (the previous file stays intact); nothing is fsync'ed (a power
//     loss may lose the newest contents, as with any unsynced write); a
//     symbolic link to a regular file is followed (the link stays a link);
//   - a character device or a FIFO (/dev/null, /dev/stdout, a pipe) is
//     written to directly: it is never replaced by a regular file;
//   - an empty path, a directory, a block device or a socket is refused.
// The temporary name is predictable (`path.tmp`): a run killed by SIGKILL
// leaves it, and the next write to `path` replaces it; SIGINT, SIGTERM and
// SIGHUP remove it before the process ends. docs/Errors.md.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_ATOMICFILE_H
#define TOFU_RUNTIME_ATOMICFILE_H

#include <cstddef>
#include <functional>
#include <ostream>
#include <string>

namespace tofu {

/// How `path` would be written: "" for a regular file or a new path
/// (atomically), "direct" for a character device or a FIFO, otherwise an
/// error message (an empty path, a directory, ...).
std::string outputPathKind(const std::string &path);

/// Whether `path` names a special file (a character device or a FIFO) that
/// is written directly. Writers that put companion files next to their
/// output (plan.bin's .tofu-weights, --save's state) refuse such paths.
bool isSpecialOutputPath(const std::string &path);

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
