//===- AtomicFile.cpp - write an output file the checked way --------------===//
#include "tofu/runtime/AtomicFile.h"
#include "tofu/runtime/InputFile.h"

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <mutex>
#include <sys/stat.h>
#include <unistd.h>

namespace tofu {

namespace {

/// The temporary file being written, removed by the signal handler. One at a
/// time (writes are serialized by `writeMutex`).
char pendingTemp[PATH_MAX + 8];
std::atomic<bool> hasPendingTemp{false};
std::mutex writeMutex;

/// The actions the cleanup handler replaced (SIGINT, SIGTERM, SIGHUP).
struct sigaction previousActions[3];

int actionSlot(int sig) { return sig == SIGINT ? 0 : sig == SIGTERM ? 1 : 2; }

void removePendingTemp(int sig) {
  if (hasPendingTemp.load())
    ::unlink(pendingTemp);
  // Hand the signal on: to the handler that was there before (tofu-run's
  // one-line message when a launcher ends the rank) or the default action.
  ::sigaction(sig, &previousActions[actionSlot(sig)], nullptr);
  std::raise(sig);
}

/// Installs the cleanup handler for the signals that end a run politely,
/// unless they are ignored or handled with SA_SIGINFO (a host program's);
/// a plain handler installed before runs after the cleanup.
void installCleanupHandlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old;
      if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler != SIG_IGN &&
          !(old.sa_flags & SA_SIGINFO)) {
        previousActions[actionSlot(sig)] = old;
        std::signal(sig, removePendingTemp);
      }
    }
  });
}

/// Resolves a symbolic link to a regular file to that file, so that the
/// rename replaces the file, not the link.
std::string resolveLink(const std::string &path) {
  struct stat lst;
  if (::lstat(path.c_str(), &lst) != 0 || !S_ISLNK(lst.st_mode))
    return path;
  char real[PATH_MAX];
  if (!::realpath(path.c_str(), real))
    return path; // a dangling link: replaced by the new file
  return real;
}

std::string writeDirect(const std::string &path,
                        const std::function<void(std::ostream &)> &write) {
  std::ofstream out(path, std::ios::binary);
  if (!out)
    return "cannot open '" + path + "' for writing: " + std::strerror(errno);
  write(out);
  out.close();
  if (!out)
    return "cannot write '" + path + "'";
  return "";
}

} // namespace

std::string outputPathKind(const std::string &path) {
  if (path.empty())
    return "the output path is empty";
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return ""; // a new file (or an unwritable place: the open says why)
  if (S_ISREG(st.st_mode))
    return "";
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
    return "direct";
  return "'" + path + "' is " + describeFileType(st.st_mode) +
         "; an output must be a regular file, a new path, a character device "
         "or a FIFO";
}

bool isSpecialOutputPath(const std::string &path) {
  return outputPathKind(path) == "direct";
}

std::string writeFileAtomically(const std::string &path, const void *data,
                                size_t size) {
  return writeFileAtomically(path, [&](std::ostream &out) {
    out.write(static_cast<const char *>(data),
              static_cast<std::streamsize>(size));
  });
}

std::string
writeFileAtomically(const std::string &givenPath,
                    const std::function<void(std::ostream &)> &write) {
  std::string kind = outputPathKind(givenPath);
  if (kind == "direct")
    return writeDirect(givenPath, write);
  if (!kind.empty())
    return kind;
  const std::string path = resolveLink(givenPath);
  std::string tmp = path + ".tmp";
  if (tmp.size() >= sizeof(pendingTemp))
    return "cannot write '" + path + "': the path is too long";
  std::lock_guard<std::mutex> lock(writeMutex);
  installCleanupHandlers();
  {
    // The temporary is always a new regular file: a leftover `path.tmp` (a
    // killed run's, or a FIFO or link put there) is removed first, and
    // O_EXCL | O_NOFOLLOW make sure nothing else is opened in its place.
    struct stat tst;
    if (::lstat(tmp.c_str(), &tst) == 0) {
      if (S_ISDIR(tst.st_mode))
        return "cannot write '" + path + "': its temporary file '" + tmp +
               "' is a directory; remove it";
      ::unlink(tmp.c_str());
    }
    std::memcpy(pendingTemp, tmp.c_str(), tmp.size() + 1);
    hasPendingTemp.store(true);
    int fd = ::open(tmp.c_str(),
                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    0666);
    if (fd < 0) {
      hasPendingTemp.store(false);
      return "cannot open '" + tmp + "' for writing: " + std::strerror(errno);
    }
    std::ofstream out("/proc/self/fd/" + std::to_string(fd),
                      std::ios::binary | std::ios::trunc);
    if (!out.is_open()) // no /proc: the path just created
      out.open(tmp, std::ios::binary | std::ios::trunc);
    ::close(fd);
    if (!out) {
      std::remove(tmp.c_str());
      hasPendingTemp.store(false);
      return "cannot open '" + tmp + "' for writing: " + std::strerror(errno);
    }
    write(out);
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      hasPendingTemp.store(false);
      return "cannot write '" + tmp + "' (disk full?)";
    }
  }
  // Replace an existing file by exchanging the two names, then remove the
  // old contents (now at `tmp`): as atomic as rename(2), and on ext4 it
  // avoids the writeback that a rename over an existing file starts
  // (auto_da_alloc) and waits on, 1.2 s for VGG19's 577 MB plan.bin
  // (bench/compile_time.md). Where the exchange is not supported (another
  // file system, an old kernel) or `path` does not exist: a plain rename.
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(),
                  RENAME_EXCHANGE) == 0) {
    ::unlink(tmp.c_str());
    hasPendingTemp.store(false);
    return "";
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    std::remove(tmp.c_str());
    hasPendingTemp.store(false);
    return "cannot rename '" + tmp + "' to '" + path + "': " + err;
  }
  hasPendingTemp.store(false);
  return "";
}

} // namespace tofu
