//===- EmbeddedData.h - large initializers left in the model file -*- C++ -*-===//
//
// A weight-heavy model keeps its weights in the raw_data of its initializers,
// inside the protobuf. ModelProto::ParseFromArray copies every one of them
// into a std::string: for VGG19, 548 MB of fresh memory whose page faults
// cost more than reading the file. parseModelLeavingData parses the model
// without those copies: the raw_data of each large float initializer of the
// main graph stays in the (mapped) model file, and the parsed TensorProto
// refers to it like external data, at the location embeddedDataLocation().
// ExternalDataResolver resolves such references into the model file's bytes
// (no file is opened, nothing is hashed again: the bytes are part of the
// file the fingerprint covers), and restoreEmbeddedData puts the bytes back
// where the model is serialized again (the plan's MODEL section).
//
// Only well-formed initializers are left in place: a float type, one
// raw_data field of exactly dims x element size bytes, no typed data field,
// no data_location or external_data of their own, a name, IR version >= 4.
// Any other initializer, and any model whose wire format the scan does not
// follow (groups, a graph field given twice), is parsed exactly as
// ParseFromArray parses it, so the importer's checks and messages are
// unchanged.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_IMPORT_EMBEDDEDDATA_H
#define TOFU_IMPORT_EMBEDDEDDATA_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace onnx {
class ModelProto;
class TensorProto;
} // namespace onnx

namespace tofu {

/// The external_data `location` of an initializer whose raw_data
/// parseModelLeavingData left in the model file (`offset` and `length` are
/// then a byte range of the model file). It starts with a NUL byte, so it
/// never names a file: ExternalDataResolver refuses it unless it was given
/// the model file's bytes.
llvm::StringRef embeddedDataLocation();

/// The raw_data of initializers up to this size is copied as usual.
constexpr uint64_t kEmbeddedDataMinBytes = 64 * 1024;

/// Parses the binary ModelProto `bytes` into `model` as
/// `model.ParseFromArray` does, except that the raw_data of the main
/// graph's well-formed float initializers of at least `minBytes` bytes is
/// not copied but referred to (embeddedDataLocation()). `bytes` must outlive
/// every use of those initializers' data. False when parsing fails.
bool parseModelLeavingData(llvm::StringRef bytes, onnx::ModelProto &model,
                           uint64_t minBytes = kEmbeddedDataMinBytes);

/// True when `tensor` refers to raw_data left in the model file.
bool isEmbeddedData(const onnx::TensorProto &tensor);

/// Puts the raw_data that `tensor` refers to back into it, copied from
/// `modelBytes` (the bytes parseModelLeavingData parsed), so that `tensor`
/// is what ParseFromArray would have made. False when the reference lies
/// outside `modelBytes`.
bool restoreEmbeddedData(onnx::TensorProto &tensor, llvm::StringRef modelBytes);

} // namespace tofu

#endif // TOFU_IMPORT_EMBEDDEDDATA_H
