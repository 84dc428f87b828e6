//===- ExternalData.h - ONNX external data, resolved safely -----*- C++ -*-===//
//
// Models over 2 GB keep their initializers outside the protobuf: a
// TensorProto with data_location = EXTERNAL names a file (`location`,
// relative to the model's directory) and a byte range (`offset`, `length`).
// The resolver checks every reference before it reads a byte (the published
// ONNX external-data vulnerabilities: path traversal, symlinks and hard links
// out of the model's directory, ranges past the end of the file) and maps
// each file once, read-only; tensors point into the mapping (no copy).
//
// The rules (docs/Import.md):
//  - `location` is relative, non-empty, has no `..` component and, after
//    symbolic links are resolved, names a regular file inside the model's
//    directory (the directory is itself resolved);
//  - the file has one hard link (st_nlink == 1) unless allowHardlinked: a
//    second link may live outside the directory, and that cannot be checked;
//  - `offset` and `length` are decimal integers; offset + length (length
//    defaults to the rest of the file) lies inside the file, and length
//    equals the tensor's dims x element size;
//  - keys other than location/offset/length/checksum are ignored; a key
//    given twice is an error.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_IMPORT_EXTERNALDATA_H
#define TOFU_IMPORT_EXTERNALDATA_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <string>

namespace onnx {
class TensorProto;
} // namespace onnx

namespace tofu {

/// One tensor's external bytes.
struct ExternalBytes {
  /// True when the data file does not exist (a graph-only model); the other
  /// fields are then empty except `path`.
  bool missing = false;
  /// The resolved file path.
  std::string path;
  /// The tensor's bytes inside the read-only mapping.
  llvm::ArrayRef<uint8_t> bytes;
  /// Keeps the mapping alive.
  std::shared_ptr<void> mapping;
  /// True when the bytes are raw_data left in the model file itself
  /// (EmbeddedData.h): part of the bytes the model's fingerprint hashes.
  bool embedded = false;
};

/// Resolves the external data of one model's tensors; maps each file once.
class ExternalDataResolver {
public:
  /// `modelPath` is the model file; locations are relative to its directory.
  ExternalDataResolver(llvm::StringRef modelPath, bool allowHardlinked);

  /// True when `tensor` stores its data externally.
  static bool isExternal(const onnx::TensorProto &tensor);

  /// Checks and maps the external data of `tensor`, which needs
  /// `expectedBytes` bytes. Errors name `what` (the tensor), the location
  /// and what is wrong.
  llvm::Expected<ExternalBytes> resolve(const onnx::TensorProto &tensor,
                                        uint64_t expectedBytes,
                                        llvm::StringRef what);

  /// Every mapping made so far (to keep them alive with the imported IR).
  std::vector<std::shared_ptr<void>> mappings() const;

  /// The model file's bytes, which `keepAlive` keeps valid: references to
  /// raw_data left in it (embeddedDataLocation(), EmbeddedData.h) resolve
  /// into them. Without, such a reference is an error.
  void setModelBytes(llvm::StringRef bytes, std::shared_ptr<void> keepAlive);

private:
  std::string modelDir;     ///< the model's directory, as given
  std::string realModelDir; ///< the same, symbolic links resolved
  bool allowHardlinked;
  llvm::StringRef modelBytes;
  std::shared_ptr<void> modelKeepAlive;
  struct MappedFile;
  llvm::StringMap<std::shared_ptr<MappedFile>> files;
};

} // namespace tofu

#endif // TOFU_IMPORT_EXTERNALDATA_H
