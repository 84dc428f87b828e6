//===- TrainingCheckpoint.h - --save / --resume checkpoints -------*- C++ -*-===//
//
// A checkpoint is the pair `tofu-run --save FILE` writes and
// `tofu-run --resume FILE` reads:
//
//   FILE                        the ONNX model with the trained weights (or,
//                               for large models, FILE.data-<16 hex> holds
//                               them as ONNX external data); its
//                               metadata_props name the state file
//                               (`tofu.training_state`) and the step count
//                               (`tofu.training_step`)
//   FILE.tofu-state-<16 hex>    the training state: steps completed, optimizer
//                               kind and every State tensor (momentum,
//                               Adam's moments and update counts, Adagrad's
//                               squares, learning rates) as whole tensors,
//                               checksummed; <16 hex> is that checksum
//
// The state file is written (atomically) before the model, and the model is
// renamed into place last, so the model on disk always names a complete
// state file that matches it, even when a --save is killed half-way. Tensors
// are stored whole (not per device), so a checkpoint written by a plan for k
// devices resumes a plan of the same model and optimizer for any k.
// The byte layout of the state file is in docs/TofuRun.md.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_TRAININGCHECKPOINT_H
#define TOFU_RUNTIME_TRAININGCHECKPOINT_H

#include "tofu/runtime/Plan.h"
#include "tofu/runtime/TensorAssembly.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tofu::runtime {

/// The optimizer state and progress of a training run, in global tensors.
struct TrainingState {
  /// Training steps completed (the next step is number `step`, 0-based:
  /// the data batch and Dropout's random mask are keyed by it).
  int64_t step = 0;
  /// The plan's optimizer kind (sgd, momentum, adam, adagrad).
  std::string optimizer;
  struct Tensor {
    std::string name;
    plan::DType dtype = plan::DType::F32;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes; ///< row-major, global shape
  };
  /// Every State tensor of the plan, in plan order.
  std::vector<Tensor> tensors;
};

/// Serializes `state` into the state-file layout (magic, version, entries,
/// trailing FNV-1a 64 checksum).
std::vector<uint8_t> encodeTrainingState(const TrainingState &state);

/// Verifies and parses a state file's bytes. `what` names the file in
/// messages.
std::string decodeTrainingState(const std::vector<uint8_t> &bytes,
                                const std::string &what, TrainingState &state);

/// What saveCheckpoint would refuse about `plan`'s embedded ONNX model (it
/// does not parse, or lacks an initializer of a trained parameter's name,
/// element type and shape), checked when the plan is loaded so that a
/// corrupt MODEL section stops `--save` before training, not after.
std::string checkSaveModel(const plan::Plan &plan);

/// Writes the checkpoint for `plan` after `stepsDone` steps: the trained
/// Params and every State tensor are assembled from the owned buffers that
/// `live` returns. The weights go into an ONNX external-data file next to
/// the model (`FILE.data-<16 hex>`, see saveTrainedOnnx) when
/// `externalData` is set or they exceed kSaveExternalDataAbove bytes.
/// Removes the state and data files of earlier saves to `path` once the new
/// model is in place.
std::string saveCheckpoint(const plan::Plan &plan, const BufferSource &live,
                           int64_t stepsDone, const std::string &path,
                           bool externalData = false);

/// Trained weights above this many bytes are saved as ONNX external data
/// (a model file holds at most 2 GiB).
inline constexpr uint64_t kSaveExternalDataAbove = uint64_t(1) << 30;

/// Reads the checkpoint at `path` and replaces the initial contents (`init`)
/// of every buffer of the plan's trained Params and State tensors with it;
/// `stepsDone` receives the step count to continue from. Fails, changing
/// nothing, when the model has no training state, the state file is
/// missing or corrupt, or a tensor's name, dtype or shape differs from the
/// plan's.
std::string resumeCheckpoint(const std::string &path, plan::Plan &plan,
                             int64_t &stepsDone);

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_TRAININGCHECKPOINT_H
