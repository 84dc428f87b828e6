//===- InitializationGraph.h - training_info initialization -----*- C++ -*-===//
//
// A TrainingInfoProto may carry an `initialization` graph, run once before
// training starts, and an `initialization_binding` saying which initializer
// (of the inference graph or of the algorithm) takes which of its outputs:
// random weights (RandomNormal, RandomUniform), an update count reset to
// zero, a weight derived from another. tofuc runs it while compiling: the
// graph has no inputs, so when every node reads only initializers,
// constants and earlier results, its outputs are values known at compile
// time, and they are folded into the initializers they are bound to. The
// model then starts training from those values, as an ONNX training runtime
// would after running the graph (docs/Import.md, "Training algorithms").
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_IMPORT_INITIALIZATIONGRAPH_H
#define TOFU_IMPORT_INITIALIZATIONGRAPH_H

#include "tofu/Import/OnnxConversion.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

namespace onnx {
class ModelProto;
class TensorProto;
} // namespace onnx

namespace tofu {

/// Reads the data of an initializer (inline or external), as the importer
/// does for its own.
using InitializerReader =
    llvm::function_ref<llvm::Expected<TensorData>(const onnx::TensorProto &)>;

/// Evaluates training_info[0]'s initialization graph of `model` (default
/// opset `opset`) at compile time, writes each bound output into its
/// initializer (inline raw_data, replacing external data) and clears the
/// graph and its bindings. Returns whether it changed the model (false when
/// there is no initialization graph, or several TrainingInfoProtos, which
/// analyzeTrainingAlgorithm refuses). Nodes are evaluated by the TDL
/// reference evaluator; RandomNormal, RandomUniform and their -Like forms
/// draw from mt19937_64 seeded by their `seed` (or by their output's name
/// when they have none), so a model always gives the same values. Errors
/// (graph inputs, values that are neither initializers nor earlier results,
/// ops tofuc cannot evaluate, bindings that are not initializers or whose
/// value has another shape or type) say what and what to do; they do not
/// name the file.
llvm::Expected<bool> applyInitializationGraph(onnx::ModelProto &model,
                                              int64_t opset,
                                              InitializerReader read);

} // namespace tofu

#endif // TOFU_IMPORT_INITIALIZATIONGRAPH_H
