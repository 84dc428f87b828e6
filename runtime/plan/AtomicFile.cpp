//===- AtomicFile.cpp - write a file all at once or not at all ------------===//
#include "tofu/runtime/AtomicFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace tofu {

std::string writeFileAtomically(const std::string &path, const void *data,
                                size_t size) {
  return writeFileAtomically(path, [&](std::ostream &out) {
    out.write(static_cast<const char *>(data),
              static_cast<std::streamsize>(size));
  });
}

std::string
writeFileAtomically(const std::string &path,
                    const std::function<void(std::ostream &)> &write) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      return "cannot open '" + tmp + "' for writing: " + std::strerror(errno);
    write(out);
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      return "cannot write '" + tmp + "' (disk full?)";
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    std::remove(tmp.c_str());
    return "cannot rename '" + tmp + "' to '" + path + "': " + err;
  }
  return "";
}

} // namespace tofu
