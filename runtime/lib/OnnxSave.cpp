//===- OnnxSave.cpp - Write trained weights back into an ONNX model -------===//

#include "tofu/runtime/OnnxSave.h"
#include "tofu/runtime/AtomicFile.h"

#include "onnx/onnx_pb.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

using namespace tofu::runtime;

std::string tofu::runtime::saveTrainedOnnx(
    const std::vector<uint8_t> &model,
    const std::map<std::string, TrainedParam> &params,
    const std::string &path) {
  if (model.empty())
    return "the plan carries no ONNX model (its MODEL section is empty); "
           "recompile it with a tofuc that embeds the model to use --save";
  if (model.size() > static_cast<size_t>(INT_MAX))
    return "the embedded ONNX model is larger than 2 GiB; --save does not "
           "support external data yet";
  onnx::ModelProto proto;
  if (!proto.ParseFromArray(model.data(), static_cast<int>(model.size())))
    return "the embedded ONNX model does not parse as a ModelProto; the plan "
           "is corrupt (recompile it with tofuc)";

  std::map<std::string, bool> replaced;
  for (const auto &[name, p] : params)
    replaced[name] = false;
  auto *graph = proto.mutable_graph();
  for (int i = 0; i < graph->initializer_size(); ++i) {
    onnx::TensorProto *init = graph->mutable_initializer(i);
    auto it = params.find(init->name());
    if (it == params.end())
      continue;
    const TrainedParam &p = it->second;
    if (init->data_type() != onnx::TensorProto::FLOAT)
      return "initializer '" + init->name() + "' has ONNX element type " +
             std::to_string(init->data_type()) + ", expected FLOAT (1)";
    std::vector<int64_t> dims(init->dims().begin(), init->dims().end());
    if (dims != p.shape)
      return "initializer '" + init->name() + "' has a different shape in "
             "the model than the trained parameter";
    init->clear_float_data();
    init->clear_external_data();
    init->set_data_location(onnx::TensorProto::DEFAULT);
    init->set_raw_data(reinterpret_cast<const char *>(p.values.data()),
                       p.values.size() * sizeof(float));
    replaced[init->name()] = true;
  }
  for (const auto &[name, done] : replaced)
    if (!done)
      return "parameter '" + name + "' has no initializer in the embedded "
             "ONNX model";

  std::string bytes;
  if (!proto.SerializeToString(&bytes))
    return "cannot serialize the trained ONNX model";
  return writeFileAtomically(path, bytes.data(), bytes.size());
}
