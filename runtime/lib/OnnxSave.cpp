//===- OnnxSave.cpp - Write trained weights back into an ONNX model -------===//

#include "tofu/runtime/OnnxSave.h"
#include "tofu/runtime/AtomicFile.h"

#include "onnx/onnx_pb.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

using namespace tofu::runtime;

std::string tofu::runtime::saveTrainedOnnx(
    const std::vector<uint8_t> &model,
    const std::map<std::string, TrainedParam> &params,
    const std::string &path,
    const std::map<std::string, std::string> &metadata, bool externalData,
    std::string *externalName,
    const std::map<std::string, SavedStateTensor> &state) {
  if (model.empty())
    return "the plan carries no ONNX model (its MODEL section is empty); "
           "recompile it with a tofuc that embeds the model to use --save";
  if (model.size() > static_cast<size_t>(INT_MAX))
    return "the embedded ONNX model is larger than 2 GiB, more than protobuf "
           "can parse; compile the plan from a model that keeps its weights "
           "in external data";
  onnx::ModelProto proto;
  if (!proto.ParseFromArray(model.data(), static_cast<int>(model.size())))
    return "the embedded ONNX model does not parse as a ModelProto; the plan "
           "is corrupt (recompile it with tofuc)";

  std::map<std::string, bool> replaced;
  for (const auto &[name, p] : params)
    replaced[name] = false;
  auto *graph = proto.mutable_graph();
  // External data: the trained values, in initializer order, 64-byte
  // aligned; the model names the file after its checksum (set below).
  std::string blob;
  std::vector<onnx::TensorProto *> external;
  // Replaces the contents of `init` with `length` bytes at `bytes`, inline
  // or appended to the external data.
  auto store = [&](onnx::TensorProto *init, const char *bytes,
                   size_t length) {
    init->clear_float_data();
    init->clear_int32_data();
    init->clear_int64_data();
    init->clear_double_data();
    init->clear_external_data();
    init->clear_raw_data();
    if (externalData) {
      blob.resize((blob.size() + 63) / 64 * 64, '\0');
      auto entry = [&](const char *key, const std::string &value) {
        onnx::StringStringEntryProto *e = init->add_external_data();
        e->set_key(key);
        e->set_value(value);
      };
      entry("location", ""); // the file's name, once its checksum is known
      entry("offset", std::to_string(blob.size()));
      entry("length", std::to_string(length));
      init->set_data_location(onnx::TensorProto::EXTERNAL);
      blob.append(bytes, length);
      external.push_back(init);
    } else {
      init->set_data_location(onnx::TensorProto::DEFAULT);
      init->set_raw_data(bytes, length);
    }
  };
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
    store(init, reinterpret_cast<const char *>(p.values.data()),
          p.values.size() * sizeof(float));
    replaced[init->name()] = true;
  }
  // The state a training algorithm updates, wherever its initializer is.
  if (proto.training_info_size() > 0 && !state.empty()) {
    std::vector<onnx::TensorProto *> candidates;
    for (int i = 0; i < graph->initializer_size(); ++i)
      candidates.push_back(graph->mutable_initializer(i));
    for (onnx::TrainingInfoProto &info : *proto.mutable_training_info())
      for (int i = 0; i < info.algorithm().initializer_size(); ++i)
        candidates.push_back(
            info.mutable_algorithm()->mutable_initializer(i));
    for (onnx::TensorProto *init : candidates) {
      auto it = state.find(init->name());
      if (it == state.end() || params.count(init->name()))
        continue;
      const SavedStateTensor &t = it->second;
      std::vector<int64_t> dims(init->dims().begin(), init->dims().end());
      if (init->data_type() != t.onnxType || dims != t.shape)
        return "initializer '" + init->name() + "' (ONNX element type " +
               std::to_string(init->data_type()) +
               ") differs in element type or shape from the training state "
               "tensor of that name (ONNX element type " +
               std::to_string(t.onnxType) + ")";
      store(init, reinterpret_cast<const char *>(t.bytes.data()),
            t.bytes.size());
    }
  }
  for (const auto &[name, done] : replaced)
    if (!done)
      return "parameter '" + name + "' has no initializer in the embedded "
             "ONNX model";

  if (externalData) {
    uint64_t hash = 0xcbf29ce484222325ULL;
    for (unsigned char c : blob) {
      hash ^= c;
      hash *= 0x100000001b3ULL;
    }
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx",
                  static_cast<unsigned long long>(hash));
    const std::filesystem::path target(path);
    const std::string name = target.filename().string() + ".data-" + hex;
    for (onnx::TensorProto *init : external)
      init->mutable_external_data(0)->set_value(name);
    if (std::string err = writeFileAtomically(
            (target.parent_path() / name).string(), blob.data(), blob.size());
        !err.empty())
      return err;
    if (externalName)
      *externalName = name;
  }
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
    TrainedParam p;
    p.shape.assign(init.dims().begin(), init.dims().end());
    int64_t count = 1;
    for (int64_t d : p.shape) {
      if (d < 0)
        return what + " has a negative dimension";
      count *= d;
    }
    if (init.data_location() == onnx::TensorProto::EXTERNAL) {
      std::string location;
      uint64_t offset = 0, length = UINT64_MAX;
      for (const auto &e : init.external_data()) {
        if (e.key() == "location")
          location = e.value();
        else if (e.key() == "offset")
          offset = std::strtoull(e.value().c_str(), nullptr, 10);
        else if (e.key() == "length")
          length = std::strtoull(e.value().c_str(), nullptr, 10);
      }
      const uint64_t need = static_cast<uint64_t>(count) * 4;
      if (location.empty() || location.find('/') != std::string::npos ||
          location == "." || location == "..")
        return what + " names an invalid external data file '" + location +
               "' (a file name in the model's directory is expected)";
      if (length != UINT64_MAX && length != need)
        return what + " has external data of length " +
               std::to_string(length) + ", expected " + std::to_string(need) +
               " for its shape";
      const std::string file =
          (std::filesystem::path(path).parent_path() / location).string();
      std::ifstream data(file, std::ios::binary);
      if (!data)
        return what + ": cannot open its external data file '" + file +
               "': " + std::strerror(errno) +
               "; keep it next to the model";
      data.seekg(0, std::ios::end);
      const uint64_t size = static_cast<uint64_t>(data.tellg());
      if (offset > size || need > size - offset)
        return what + ": its external data [" + std::to_string(offset) +
               ", +" + std::to_string(need) + ") lies outside '" + file +
               "' (" + std::to_string(size) + " bytes; truncated?)";
      p.values.resize(static_cast<size_t>(count));
      data.seekg(static_cast<std::streamoff>(offset));
      data.read(reinterpret_cast<char *>(p.values.data()),
                static_cast<std::streamsize>(need));
      if (static_cast<uint64_t>(data.gcount()) != need)
        return what + ": short read from '" + file + "'";
    } else if (init.has_raw_data()) {
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
