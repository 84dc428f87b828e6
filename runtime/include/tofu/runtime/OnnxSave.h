//===- OnnxSave.h - Write trained weights back into an ONNX model -*- C++ -*-===//
#ifndef TOFU_RUNTIME_ONNXSAVE_H
#define TOFU_RUNTIME_ONNXSAVE_H

#include "tofu/runtime/Plan.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tofu::runtime {

/// A trained parameter: its global shape, element type and row-major bytes.
struct TrainedParam {
  std::vector<int64_t> shape;
  plan::DType dtype = plan::DType::F32;
  std::vector<uint8_t> bytes; ///< row-major, dtypeSize(dtype) per element
};

/// An optimizer-state tensor of a model that carries its training algorithm
/// (ONNX training_info): the ONNX element type (TensorProto::DataType), the
/// global shape and the row-major bytes of the initializer it updates.
struct SavedStateTensor {
  int32_t onnxType = 1;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// The ONNX TensorProto data type of `dtype` (FLOAT 1, UINT8 2, INT8 3,
/// UINT16 4, INT16 5, INT32 6, INT64 7, BOOL 9, FLOAT16 10, DOUBLE 11,
/// UINT32 12, UINT64 13, BFLOAT16 16).
int32_t onnxDataTypeOf(plan::DType dtype);

/// Parses `model` (a serialized onnx::ModelProto), replaces the initializer
/// named by each key of `params` with its trained values (raw_data of its element type,
/// external data cleared), sets the model's metadata_props entries named by
/// the keys of `metadata` (replacing entries of the same key), and writes the
/// model to `path` through a temporary file in the same directory that is
/// renamed into place. Fails if the model does not parse, an initializer is
/// missing, or its element type or shape differs.
///
/// With `externalData`, the trained values go into one ONNX external-data
/// file in the model's directory instead (`data_location` EXTERNAL,
/// `location` = its name, `offset` and `length` per initializer, offsets
/// 64-byte aligned), named `<model file name>.data-<16 hex digits>` after
/// its FNV-1a 64 checksum and written (atomically) before the model; its
/// name is returned in `externalName`.
///
/// When the model carries training_info, each entry of `state` whose name
/// is an initializer of the graph or of training_info[0]'s algorithm (the
/// tensors its update_binding updates: Adam's moments, the update count)
/// replaces that initializer likewise, so that the saved model continues
/// its training algorithm where the run stopped; the other entries (state
/// tofuc's own optimizer added) are not in the model and are skipped. An
/// entry whose element type or shape differs from its initializer's fails.
std::string saveTrainedOnnx(const std::vector<uint8_t> &model,
                            const std::map<std::string, TrainedParam> &params,
                            const std::string &path,
                            const std::map<std::string, std::string>
                                &metadata = {},
                            bool externalData = false,
                            std::string *externalName = nullptr,
                            const std::map<std::string, SavedStateTensor>
                                &state = {});

/// The checks of saveTrainedOnnx that need no trained values, for a run
/// that will save, made when the plan is loaded rather than after training:
/// `model` (the plan's MODEL section) parses as an ONNX model and has an
/// initializer of the element type and shape of each entry of `params`
/// (whose `bytes` are not read). Returns "" or the error saveTrainedOnnx
/// would give.
std::string checkModelForSave(const std::vector<uint8_t> &model,
                              const std::map<std::string, TrainedParam> &params);

/// What `readOnnxWeights` returns: the initializers asked for, and
/// every metadata_props entry of the model.
struct OnnxWeights {
  std::map<std::string, TrainedParam> params;
  std::map<std::string, std::string> metadata;
};

/// Reads the ONNX model file at `path` and returns the initializers of any
/// element type that has a plan dtype
/// named in `wanted` (raw_data, float_data, or external data in a file in
/// the model's directory) and the model's metadata. An initializer in `wanted` that the model lacks is
/// not an error here (the caller names what is missing).
std::string readOnnxWeights(const std::string &path,
                            const std::vector<std::string> &wanted,
                            OnnxWeights &out);

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_ONNXSAVE_H
