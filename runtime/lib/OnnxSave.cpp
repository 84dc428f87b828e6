//===- OnnxSave.cpp - Write trained weights back into an ONNX model -------===//

#include "tofu/runtime/OnnxSave.h"
#include "tofu/runtime/AtomicFile.h"

#include "onnx/onnx_pb.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

using namespace tofu::runtime;

std::string tofu::runtime::saveTrainedOnnx(
    const std::vector<uint8_t> &model,
    const std::map<std::string, TrainedParam> &params,
    const std::string &path,
    const std::map<std::string, std::string> &metadata) {
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

  for (const auto &[key, value] : metadata) {
    onnx::StringStringEntryProto *entry = nullptr;
    for (auto &e : *proto.mutable_metadata_props())
      if (e.key() == key)
        entry = &e;
    if (!entry) {
      entry = proto.add_metadata_props();
      entry->set_key(key);
    }
    entry->set_value(value);
  }

  std::string bytes;
  if (!proto.SerializeToString(&bytes))
    return "cannot serialize the trained ONNX model";
  return writeFileAtomically(path, bytes.data(), bytes.size());
}

std::string tofu::runtime::readOnnxWeights(
    const std::string &path, const std::vector<std::string> &wanted,
    OnnxWeights &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return "cannot open '" + path + "': " + std::strerror(errno);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return "'" + path + "' is larger than 2 GiB; reading ONNX models with "
           "external data is not supported";
  onnx::ModelProto proto;
  if (!proto.ParseFromString(bytes))
    return "'" + path + "' does not parse as an ONNX model (ModelProto)";
  out = OnnxWeights();
  for (const auto &e : proto.metadata_props())
    out.metadata[e.key()] = e.value();
  std::set<std::string> want(wanted.begin(), wanted.end());
  for (const onnx::TensorProto &init : proto.graph().initializer()) {
    if (!want.count(init.name()))
      continue;
    const std::string what =
        "initializer '" + init.name() + "' of '" + path + "'";
    if (init.data_type() != onnx::TensorProto::FLOAT)
      return what + " has ONNX element type " +
             std::to_string(init.data_type()) + ", expected FLOAT (1)";
    if (init.data_location() == onnx::TensorProto::EXTERNAL)
      return what + " keeps its data in an external file, which --resume "
                    "does not read; save the model with tofu-run --save";
    TrainedParam p;
    p.shape.assign(init.dims().begin(), init.dims().end());
    int64_t count = 1;
    for (int64_t d : p.shape) {
      if (d < 0)
        return what + " has a negative dimension";
      count *= d;
    }
    if (init.has_raw_data()) {
      if (init.raw_data().size() != static_cast<size_t>(count) * 4)
        return what + " holds " + std::to_string(init.raw_data().size()) +
               " bytes of raw data, expected " + std::to_string(count * 4) +
               " for its shape";
      p.values.resize(static_cast<size_t>(count));
      std::memcpy(p.values.data(), init.raw_data().data(),
                  init.raw_data().size());
    } else {
      if (init.float_data_size() != count)
        return what + " holds " + std::to_string(init.float_data_size()) +
               " values, expected " + std::to_string(count) +
               " for its shape";
      p.values.assign(init.float_data().begin(), init.float_data().end());
    }
    out.params[init.name()] = std::move(p);
  }
  return "";
}
