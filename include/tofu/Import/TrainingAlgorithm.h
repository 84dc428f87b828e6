//===- TrainingAlgorithm.h - ONNX training_info -> training step -*- C++ -*-===//
//
// An ONNX model may carry its own training algorithm (TrainingInfoProto): an
// `algorithm` graph that, combined with the inference graph, computes a
// loss, its `Gradient` (ai.onnx.preview.training) and new values for some
// initializers (optimizer ops Adam, Momentum, Adagrad, or plain arithmetic),
// and an `update_binding` saying which initializer takes which new value.
// The importer builds that combined graph; this file checks what tofuc can
// map and classifies the updated initializers (docs/Import.md, "Training
// algorithms").
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_IMPORT_TRAININGALGORITHM_H
#define TOFU_IMPORT_TRAININGALGORITHM_H

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <utility>
#include <vector>

namespace onnx {
class ModelProto;
class NodeProto;
} // namespace onnx

namespace tofu {

/// The ONNX domain of the training operators.
inline constexpr llvm::StringLiteral kOnnxTrainingDomain =
    "ai.onnx.preview.training";

/// What the importer needs to know about a model's training algorithm.
struct TrainingAlgorithm {
  /// True when the model carries a TrainingInfoProto.
  bool present = false;
  /// The nodes to import, in order: the inference graph's, then the
  /// algorithm's (empty `present` = false: the inference graph's only).
  std::vector<const onnx::NodeProto *> nodes;
  /// One Gradient node and its `y` and `xs` attributes.
  struct Gradient {
    const onnx::NodeProto *node = nullptr;
    std::string y;
    std::vector<std::string> xs;
  };
  /// The Gradient nodes, wherever they are, in graph order. Several may
  /// differentiate one scalar (their `xs` are then one backward pass) or
  /// different scalars (one backward pass each, in one training step).
  std::vector<Gradient> gradients;
  /// The step's loss (the tofu.loss that tofu-run reports): the first
  /// Gradient's `y`.
  std::string loss;
  /// Every tensor some Gradient differentiates with respect to, each once,
  /// in order of first mention.
  std::vector<std::string> xs;
  /// update_binding in order: (initializer, the value it takes).
  std::vector<std::pair<std::string, std::string>> updates;
  /// For each updated initializer that is not one of `xs`: the parameter
  /// whose optimizer state it is (an optimizer node's X for its V and H,
  /// the first such X for a shared R or T, else the first updated tensor of
  /// `xs`).
  llvm::StringMap<std::string> stateOf;
};

/// Checks the model's training_info and the Gradient nodes of its graphs:
/// at most one TrainingInfoProto, an empty initialization graph (the
/// importer folds it into the initializers first: InitializationGraph.h),
/// Gradient nodes whose inputs are their `xs` followed by their `zs`, unique
/// update_binding keys naming initializers and values naming algorithm or
/// graph outputs, and, with training_info, a Gradient whose `xs` some
/// update uses. Gradient nodes of different scalars are separate backward
/// passes; whether one scalar depends on another's gradient (which no
/// single training step computes) is checked by the train phase. Errors say what is not supported and what to do; they do
/// not name the file (the caller prefixes it).
llvm::Expected<TrainingAlgorithm>
analyzeTrainingAlgorithm(const onnx::ModelProto &model);

/// True for the ONNX optimizer ops with TDL specs (Adam, Momentum, Adagrad).
bool isOnnxOptimizerOp(llvm::StringRef opType);

/// Splits an ONNX optimizer node that updates n tensors
/// (R, T, X1..Xn, G1..Gn, state1..., -> X1_new..Xn_new, state1_new...) into
/// n nodes updating one tensor each, the form of the TDL specs; the pieces
/// are named `<name>/<i>`. A node over one tensor is returned as is.
llvm::Expected<std::vector<onnx::NodeProto>>
splitOptimizerNode(const onnx::NodeProto &node, llvm::StringRef name);

} // namespace tofu

#endif // TOFU_IMPORT_TRAININGALGORITHM_H
