//===- OnnxImporter.h - ONNX model -> tofu IR -------------------*- C++ -*-===//
#ifndef TOFU_IMPORT_ONNXIMPORTER_H
#define TOFU_IMPORT_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
} // namespace onnx

namespace tofu {

/// What the user tells the importer beyond the model file (tofuc's flags).
struct ImportOptions {
  /// `--shape name:d0xd1x...`: the full shape of graph input `name`; its
  /// symbolic dims take these values and its static dims must agree.
  std::map<std::string, std::vector<int64_t>> inputShapes;
  /// `--batch N`: the value of every symbolic first (batch) dimension of a
  /// graph input that --shape does not bind.
  std::optional<int64_t> batch;
  /// `--no-weights`: initializers whose external data file does not exist
  /// import without values (graph-only model); the plan records that it has
  /// no weights.
  bool noWeights = false;
  /// `--allow-hardlinked-data`: accept external data files with more than
  /// one hard link (refused by default: a hard link may point out of the
  /// model's directory undetectably).
  bool allowHardlinkedData = false;
  /// Notes (skipped checker, folded nodes) go to llvm::errs().
  bool verbose = false;
};

/// A model imported from ONNX: the forward graph as a module holding
/// `func.func @main`, and the original model bytes (kept so that trained
/// weights can be written back into the same model).
struct ImportedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// The parsed ONNX model (after its initialization graph ran), for the
  /// plan's MODEL section (modelForSave); null where none was parsed.
  std::shared_ptr<onnx::ModelProto> model;
  /// fingerprintBytes of the model file's bytes (a text model: of its binary
  /// serialization), mixed with an xxh3 hash of each external data range
  /// when the model has external data.
  uint64_t fingerprint = 0;
  /// True when some parameter has no value (--no-weights, graph-only model).
  bool withoutWeights = false;
  /// Keeps the memory-mapped external data files and the model file alive
  /// (the parameters' values point into them).
  std::vector<std::shared_ptr<void>> mappings;
  /// The model file's bytes (kept alive by `mappings`), where the
  /// initializers that `model` marks as embedded data (EmbeddedData.h) have
  /// their raw_data; empty for a text model.
  llvm::StringRef modelBytes;
};

/// Imports the ONNX model at `path`: one tofu.input per graph input, one
/// tofu.param per initializer (with its data), one tofu.compute per node
/// (shapes from TDL shape inference), and a tofu.loss on the graph's output
/// when it is a single scalar float. Errors name the file, the node and what
/// to do.
llvm::Expected<ImportedModel>
importOnnxFile(mlir::MLIRContext *context, llvm::StringRef path,
               const ImportOptions &options = {});

/// True when `path` names an ONNX text-format model (`.onnxtxt`, parsed
/// with onnx::OnnxParser; used for importer lit tests).
bool isOnnxTextPath(llvm::StringRef path);

/// XXH3 64-bit hash of `bytes` (at memory speed: a model's identity is
/// hashed over all its weights).
uint64_t fingerprintBytes(llvm::ArrayRef<uint8_t> bytes);

/// The ONNX model a plan embeds for `tofu-run --save`, serialized: `model`
/// with the values of the initializers named in `trained` removed (in place;
/// their name, type and dims kept). `--save` writes the trained values into
/// exactly those initializers, so the plan need not carry the initial
/// weights twice (they are in its WEIGHTS section); a VGG19 plan halves. The
/// other initializers that refer to raw_data left in the model file
/// (EmbeddedData.h) get it back from `modelBytes`. An error when the result
/// exceeds what one protobuf message holds (2 GB).
llvm::Expected<std::vector<uint8_t>>
modelForSave(onnx::ModelProto &model, const std::vector<std::string> &trained,
             llvm::StringRef modelBytes);

} // namespace tofu

#endif // TOFU_IMPORT_ONNXIMPORTER_H
