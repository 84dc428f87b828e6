//===- OnnxSave.h - Write trained weights back into an ONNX model -*- C++ -*-===//
#ifndef TOFU_RUNTIME_ONNXSAVE_H
#define TOFU_RUNTIME_ONNXSAVE_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tofu::runtime {

/// A trained float32 parameter: its global shape and row-major values.
struct TrainedParam {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

/// Parses `model` (a serialized onnx::ModelProto), replaces the initializer
/// named by each key of `params` with its trained values (raw_data, float32,
/// external data cleared), and writes the model to `path` through a
/// temporary file in the same directory that is renamed into place. Fails if
/// the model does not parse, an initializer is missing, or its element type
/// or shape differs.
std::string saveTrainedOnnx(const std::vector<uint8_t> &model,
                            const std::map<std::string, TrainedParam> &params,
                            const std::string &path);

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_ONNXSAVE_H
