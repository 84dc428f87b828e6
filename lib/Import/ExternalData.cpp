//===- ExternalData.cpp - ONNX external data, resolved safely -------------===//
//
// See ExternalData.h for the rules. Every check happens before the file is
// mapped; the mapping is read-only and shared by all tensors of one file.
//
//===----------------------------------------------------------------------===//
#include "tofu/Import/ExternalData.h"
#include "tofu/Import/EmbeddedData.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <onnx/onnx_pb.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tofu {

/// A read-only mapping of a whole data file.
struct ExternalDataResolver::MappedFile {
  const uint8_t *data = nullptr;
  uint64_t size = 0;
  ~MappedFile() {
    if (data && size)
      ::munmap(const_cast<uint8_t *>(data), size);
  }
};

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 message.str());
}

/// `path` with symbolic links resolved, or "" (errno set).
std::string realPath(const std::string &path) {
  char *resolved = ::realpath(path.c_str(), nullptr);
  if (!resolved)
    return "";
  std::string result = resolved;
  std::free(resolved);
  return result;
}

/// Parses a non-negative decimal integer that fits in 63 bits.
std::optional<uint64_t> parseDecimal(llvm::StringRef text) {
  if (text.empty() || text.size() > 18)
    return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

} // namespace

ExternalDataResolver::ExternalDataResolver(llvm::StringRef modelPath,
                                           bool allowHardlinked)
    : allowHardlinked(allowHardlinked) {
  llvm::StringRef dir = llvm::sys::path::parent_path(modelPath);
  modelDir = dir.empty() ? "." : dir.str();
  realModelDir = realPath(modelDir);
}

bool ExternalDataResolver::isExternal(const onnx::TensorProto &tensor) {
  return tensor.data_location() == onnx::TensorProto::EXTERNAL;
}

std::vector<std::shared_ptr<void>> ExternalDataResolver::mappings() const {
  std::vector<std::shared_ptr<void>> result;
  if (modelKeepAlive)
    result.push_back(modelKeepAlive);
  for (const auto &entry : files)
    result.push_back(entry.second);
  return result;
}

void ExternalDataResolver::setModelBytes(llvm::StringRef bytes,
                                         std::shared_ptr<void> keepAlive) {
  modelBytes = bytes;
  modelKeepAlive = std::move(keepAlive);
}

llvm::Expected<ExternalBytes>
ExternalDataResolver::resolve(const onnx::TensorProto &tensor,
                              uint64_t expectedBytes, llvm::StringRef what) {
  // The keys.
  std::optional<std::string> location, offsetText, lengthText;
  for (const auto &entry : tensor.external_data()) {
    std::optional<std::string> *slot = nullptr;
    if (entry.key() == "location")
      slot = &location;
    else if (entry.key() == "offset")
      slot = &offsetText;
    else if (entry.key() == "length")
      slot = &lengthText;
    else
      continue; // "checksum" and unknown keys are not needed
    if (*slot)
      return error(what + ": external data key '" + entry.key() +
                   "' is given twice");
    *slot = entry.value();
  }
  if (!location)
    return error(what + " has external data without a 'location' key; "
                        "re-save the model with onnx.save(..., "
                        "save_as_external_data=True)");
  if (*location == embeddedDataLocation()) {
    // raw_data that parseModelLeavingData left in the model file: checked
    // there to be dims x element size bytes inside the file.
    std::optional<uint64_t> offset, length;
    if (offsetText)
      offset = parseDecimal(*offsetText);
    if (lengthText)
      length = parseDecimal(*lengthText);
    if (!modelKeepAlive || !offset || !length || *length != expectedBytes ||
        *offset > modelBytes.size() || *length > modelBytes.size() - *offset)
      return error(what + ": its raw_data, left in the model file, cannot "
                          "be found there (an internal error)");
    ExternalBytes result;
    result.embedded = true;
    result.bytes = llvm::ArrayRef<uint8_t>(
        reinterpret_cast<const uint8_t *>(modelBytes.data()) + *offset,
        *length);
    result.mapping = modelKeepAlive;
    return std::move(result);
  }
  std::string where = what.str() + " (external data '" + *location + "')";
  if (location->empty())
    return error(where + ": the location is empty");
  if (llvm::StringRef(*location).starts_with("/"))
    return error(where + ": the location is an absolute path; external data "
                         "must lie in the model's directory (a relative "
                         "location)");
  if (location->find('\0') != std::string::npos)
    return error(where + ": the location contains a NUL byte");
  for (llvm::StringRef rest = *location; !rest.empty();) {
    auto [component, tail] = rest.split('/');
    if (component == "..")
      return error(where + ": the location has a '..' component; external "
                           "data must lie in the model's directory");
    rest = tail;
  }
  std::optional<uint64_t> offset = 0, length;
  if (offsetText && !(offset = parseDecimal(*offsetText)))
    return error(where + ": offset '" + *offsetText +
                 "' is not a non-negative decimal integer");
  if (lengthText && !(length = parseDecimal(*lengthText)))
    return error(where + ": length '" + *lengthText +
                 "' is not a non-negative decimal integer");
  if (length && *length != expectedBytes)
    return error(where + ": length " + std::to_string(*length) +
                 " disagrees with the tensor's shape and type, which need " +
                 std::to_string(expectedBytes) + " bytes");

  ExternalBytes result;
  llvm::SmallString<256> joined(modelDir);
  llvm::sys::path::append(joined, *location);
  result.path = std::string(joined);
  struct stat linkStat;
  if (::lstat(result.path.c_str(), &linkStat) != 0) {
    if (errno == ENOENT) {
      result.missing = true;
      return std::move(result);
    }
    return error(where + ": cannot read '" + result.path +
                 "': " + std::strerror(errno));
  }
  std::string real = realPath(result.path);
  if (real.empty()) {
    if (errno == ENOENT) // a dangling symbolic link
      return error(where + ": '" + result.path +
                   "' is a symbolic link to a file that does not exist");
    return error(where + ": cannot resolve '" + result.path +
                 "': " + std::strerror(errno));
  }
  if (realModelDir.empty() ||
      !llvm::StringRef(real).starts_with(realModelDir + "/"))
    return error(where + ": '" + result.path + "' resolves to '" + real +
                 "', outside the model's directory '" + realModelDir +
                 "' (through a symbolic link)");
  struct stat fileStat;
  if (::stat(real.c_str(), &fileStat) != 0)
    return error(where + ": cannot read '" + real +
                 "': " + std::strerror(errno));
  if (!S_ISREG(fileStat.st_mode))
    return error(where + ": '" + result.path + "' is not a regular file");
  if (fileStat.st_nlink > 1 && !allowHardlinked)
    return error(where + ": '" + result.path + "' has " +
                 std::to_string(fileStat.st_nlink) +
                 " hard links; a hard link may point out of the model's "
                 "directory, which cannot be checked: copy the file, or "
                 "pass --allow-hardlinked-data if you trust it");
  uint64_t fileSize = fileStat.st_size;
  if (*offset > fileSize)
    return error(where + ": offset " + std::to_string(*offset) +
                 " is past the end of the file (" + std::to_string(fileSize) +
                 " bytes)");
  uint64_t available = fileSize - *offset;
  if (length && *length > available)
    return error(where + ": offset " + std::to_string(*offset) +
                 " + length " + std::to_string(*length) +
                 " is past the end of the file (" + std::to_string(fileSize) +
                 " bytes)");
  if (!length && available != expectedBytes)
    return error(where + ": the file holds " + std::to_string(available) +
                 " bytes from offset " + std::to_string(*offset) +
                 " (no length given) but the tensor's shape and type need " +
                 std::to_string(expectedBytes));

  std::shared_ptr<MappedFile> &file = files[real];
  if (!file) {
    auto mapped = std::make_shared<MappedFile>();
    if (fileSize > 0) {
      // O_NOFOLLOW and the inode check: the file mapped is the file checked,
      // even if the path was swapped for a symbolic link in between.
      int fd = ::open(real.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      if (fd < 0)
        return error(where + ": cannot open '" + real +
                     "': " + std::strerror(errno));
      struct stat openedStat;
      if (::fstat(fd, &openedStat) != 0 ||
          openedStat.st_ino != fileStat.st_ino ||
          openedStat.st_dev != fileStat.st_dev ||
          static_cast<uint64_t>(openedStat.st_size) != fileSize) {
        ::close(fd);
        return error(where + ": '" + real +
                     "' changed while it was being checked");
      }
      void *data = ::mmap(nullptr, fileSize, PROT_READ, MAP_SHARED, fd, 0);
      int mapErrno = errno;
      ::close(fd);
      if (data == MAP_FAILED)
        return error(where + ": cannot map '" + real +
                     "': " + std::strerror(mapErrno));
      ::madvise(data, fileSize, MADV_SEQUENTIAL);
      mapped->data = static_cast<const uint8_t *>(data);
      mapped->size = fileSize;
    }
    file = std::move(mapped);
  }
  result.bytes = llvm::ArrayRef<uint8_t>(file->data + *offset,
                                         expectedBytes);
  result.mapping = file;
  return std::move(result);
}

} // namespace tofu
