//===- InputFile.cpp - open an input file the checked way -----------------===//
#include "tofu/runtime/InputFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tofu {

std::string describeFileType(unsigned mode) {
  if (S_ISREG(mode))
    return "a regular file";
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO (named pipe)";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISLNK(mode))
    return "a symbolic link";
  return "not a regular file";
}

namespace {
std::string quoted(const std::string &what, const std::string &path) {
  return what + " '" + path + "'";
}
} // namespace

int openInputFile(const std::string &path, const std::string &what,
                  uint64_t maxBytes, uint64_t &size, std::string &error) {
  if (path.empty()) {
    error = what + ": the path is empty";
    return -1;
  }
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
  // writer; it has no effect on the regular files accepted below.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    error = "cannot open " + quoted(what, path) + ": " + std::strerror(errno);
    return -1;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    error = "cannot stat " + quoted(what, path) + ": " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    error = quoted(what, path) + " is " + describeFileType(st.st_mode) +
            ", not a regular file";
    ::close(fd);
    return -1;
  }
  if (static_cast<uint64_t>(st.st_size) > maxBytes) {
    error = quoted(what, path) + " is " + std::to_string(st.st_size) +
            " bytes, over the limit of " + std::to_string(maxBytes) +
            " bytes (docs/Errors.md)";
    ::close(fd);
    return -1;
  }
  // Back to blocking reads (a regular file never blocks; keeps read()
  // semantics plain).
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0)
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  size = static_cast<uint64_t>(st.st_size);
  return fd;
}

std::string openInputStream(const std::string &path, const std::string &what,
                            uint64_t maxBytes, std::ifstream &in,
                            uint64_t &size) {
  std::string error;
  int fd = openInputFile(path, what, maxBytes, size, error);
  if (fd < 0)
    return error;
  // Reopen the checked file itself through /proc, so that a path swapped
  // for a FIFO after the check is not what the stream opens.
  in.open("/proc/self/fd/" + std::to_string(fd), std::ios::binary);
  if (!in.is_open()) {
    // No /proc: reopen the path and check it is still the same file.
    struct stat before, after;
    ::fstat(fd, &before);
    if (::stat(path.c_str(), &after) != 0 || after.st_ino != before.st_ino ||
        after.st_dev != before.st_dev) {
      ::close(fd);
      return quoted(what, path) + " changed while it was being opened";
    }
    in.clear();
    in.open(path, std::ios::binary);
  }
  int openErrno = errno;
  ::close(fd);
  if (!in.is_open())
    return "cannot open " + quoted(what, path) + ": " +
           std::strerror(openErrno);
  return "";
}

namespace {
template <typename Bytes>
std::string readWhole(const std::string &path, const std::string &what,
                      uint64_t maxBytes, Bytes &bytes) {
  uint64_t size = 0;
  std::string error;
  int fd = openInputFile(path, what, maxBytes, size, error);
  if (fd < 0)
    return error;
  try {
    bytes.resize(static_cast<size_t>(size));
  } catch (const std::bad_alloc &) {
    ::close(fd);
    return "out of memory reading " + quoted(what, path) + " (" +
           std::to_string(size) + " bytes)";
  }
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = ::read(fd, reinterpret_cast<char *>(&bytes[0]) + done,
                       static_cast<size_t>(size - done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int readErrno = errno;
      ::close(fd);
      return "cannot read " + quoted(what, path) + ": " +
             (n < 0 ? std::string(std::strerror(readErrno))
                    : "short read after " + std::to_string(done) + " of " +
                          std::to_string(size) +
                          " bytes (the file shrank while it was read?)");
    }
    done += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return "";
}
} // namespace

std::string readInputFile(const std::string &path, const std::string &what,
                          uint64_t maxBytes, std::vector<uint8_t> &bytes) {
  return readWhole(path, what, maxBytes, bytes);
}
std::string readInputFile(const std::string &path, const std::string &what,
                          uint64_t maxBytes, std::string &bytes) {
  return readWhole(path, what, maxBytes, bytes);
}

} // namespace tofu
