//===- TrainableLists.h - a model's own lists of what trains ----*- C++ -*-===//
//
// A plain ONNX model cannot say which of its initializers are weights and
// which are buffers (a causal mask, a positional encoding, running
// statistics). tools/tofu_export.py records it in the model's
// metadata_props, under the keys `tofu.frozen` and `tofu.trainable`, each a
// JSON list of initializer names (docs/Training.md, "Which initializers
// train"). This file reads and checks those lists; the importer marks the
// parameters (`tofu.param {trainable = ...}`).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_IMPORT_TRAINABLELISTS_H
#define TOFU_IMPORT_TRAINABLELISTS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
} // namespace onnx

namespace tofu {

/// metadata_props key: a JSON list of the initializers that do not train.
inline constexpr llvm::StringLiteral kFrozenListKey = "tofu.frozen";
/// metadata_props key: a JSON list of the initializers that train (the
/// model's other float initializers then do not).
inline constexpr llvm::StringLiteral kTrainableListKey = "tofu.trainable";

/// The lists of a model; nullopt where the model has no such key.
struct TrainableLists {
  std::optional<std::vector<std::string>> frozen;
  std::optional<std::vector<std::string>> trainable;
};

/// Reads `tofu.frozen` and `tofu.trainable` from `model`'s metadata_props.
/// Errors: a value that is not a JSON list of strings, a key given twice,
/// and a name in both lists.
llvm::Expected<TrainableLists> readTrainableLists(const onnx::ModelProto &model);

} // namespace tofu

#endif // TOFU_IMPORT_TRAINABLELISTS_H
