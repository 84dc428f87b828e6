//===- OnnxSave.cpp - Write trained weights back into an ONNX model -------===//

#include "tofu/runtime/OnnxSave.h"
#include "tofu/runtime/AtomicFile.h"
#include "tofu/runtime/InputFile.h"

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

namespace {

/// (plan dtype, ONNX TensorProto data type) pairs.
constexpr std::pair<tofu::plan::DType, int32_t> kOnnxTypes[] = {
    {tofu::plan::DType::F32, onnx::TensorProto::FLOAT},
    {tofu::plan::DType::U8, onnx::TensorProto::UINT8},
    {tofu::plan::DType::I8, onnx::TensorProto::INT8},
    {tofu::plan::DType::U16, onnx::TensorProto::UINT16},
    {tofu::plan::DType::I16, onnx::TensorProto::INT16},
    {tofu::plan::DType::I32, onnx::TensorProto::INT32},
    {tofu::plan::DType::I64, onnx::TensorProto::INT64},
    {tofu::plan::DType::Bool, onnx::TensorProto::BOOL},
    {tofu::plan::DType::F16, onnx::TensorProto::FLOAT16},
    {tofu::plan::DType::F64, onnx::TensorProto::DOUBLE},
    {tofu::plan::DType::U32, onnx::TensorProto::UINT32},
    {tofu::plan::DType::U64, onnx::TensorProto::UINT64},
    {tofu::plan::DType::BF16, onnx::TensorProto::BFLOAT16},
};

/// The plan dtype of ONNX data type `code`; false if it has none.
bool dtypeOfOnnx(int32_t code, tofu::plan::DType &dtype) {
  for (auto [d, c] : kOnnxTypes)
    if (c == code) {
      dtype = d;
      return true;
    }
  return false;
}

/// Parses the plan's embedded model (its MODEL section) into `proto`.
std::string parseEmbeddedModel(const std::vector<uint8_t> &model,
                               onnx::ModelProto &proto) {
  if (model.empty())
    return "the plan carries no ONNX model (its MODEL section is empty); "
           "recompile it with a tofuc that embeds the model to use --save";
  if (model.size() > static_cast<size_t>(INT_MAX))
    return "the embedded ONNX model is larger than 2 GiB, more than protobuf "
           "can parse; compile the plan from a model that keeps its weights "
           "in external data";
  if (!proto.ParseFromArray(model.data(), static_cast<int>(model.size())))
    return "the embedded ONNX model does not parse as a ModelProto; the plan "
           "is corrupt (recompile it with tofuc)";
  return "";
}

/// The error when initializer `init` cannot hold the values of `p` (its
/// element type or shape differs), or "".
std::string checkInitializer(const onnx::TensorProto &init,
                             const TrainedParam &p) {
  if (init.data_type() != tofu::runtime::onnxDataTypeOf(p.dtype))
    return "initializer '" + init.name() + "' has ONNX element type " +
           std::to_string(init.data_type()) + ", expected " +
           std::to_string(tofu::runtime::onnxDataTypeOf(p.dtype)) + " (" +
           tofu::plan::dtypeNumpyName(p.dtype) +
           ", the trained parameter's)";
  std::vector<int64_t> dims(init.dims().begin(), init.dims().end());
  if (dims != p.shape)
    return "initializer '" + init.name() + "' has a different shape in "
           "the model than the trained parameter";
  return "";
}

} // namespace

std::string tofu::runtime::checkModelForSave(
    const std::vector<uint8_t> &model,
    const std::map<std::string, TrainedParam> &params) {
  onnx::ModelProto proto;
  if (std::string err = parseEmbeddedModel(model, proto); !err.empty())
    return err;
  std::set<std::string> found;
  for (const onnx::TensorProto &init : proto.graph().initializer()) {
    auto it = params.find(init.name());
    if (it == params.end())
      continue;
    if (std::string err = checkInitializer(init, it->second); !err.empty())
      return err;
    found.insert(init.name());
  }
  for (const auto &[name, p] : params)
    if (!found.count(name))
      return "parameter '" + name + "' has no initializer in the embedded "
             "ONNX model";
  return "";
}

int32_t tofu::runtime::onnxDataTypeOf(plan::DType dtype) {
  for (auto [d, c] : kOnnxTypes)
    if (d == dtype)
      return c;
  return onnx::TensorProto::UNDEFINED;
}

std::string tofu::runtime::saveTrainedOnnx(
    const std::vector<uint8_t> &model,
    const std::map<std::string, TrainedParam> &params,
    const std::string &path,
    const std::map<std::string, std::string> &metadata, bool externalData,
    std::string *externalName,
    const std::map<std::string, SavedStateTensor> &state) {
  onnx::ModelProto proto;
  if (std::string err = parseEmbeddedModel(model, proto); !err.empty())
    return err;

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
    init->clear_uint64_data();
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
    if (std::string err = checkInitializer(*init, p); !err.empty())
      return err;
    store(init, reinterpret_cast<const char *>(p.bytes.data()),
          p.bytes.size());
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
  // One protobuf message is below 2 GiB: larger weights are external data.
  std::string bytes;
  if (std::string err =
          readInputFile(path, "the model", static_cast<uint64_t>(INT_MAX),
                        bytes);
      !err.empty())
    return err;
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
    TrainedParam p;
    if (!dtypeOfOnnx(init.data_type(), p.dtype))
      return what + " has ONNX element type " +
             std::to_string(init.data_type()) +
             ", which has no plan dtype (floats, integers and bool do)";
    const uint64_t elemBytes = plan::dtypeSize(p.dtype);
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
      const uint64_t need = static_cast<uint64_t>(count) * elemBytes;
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
      std::ifstream data;
      uint64_t size = 0;
      if (std::string err = openInputStream(file, "the external data file",
                                            kMaxInputFileBytes, data, size);
          !err.empty())
        return what + ": " + err + "; keep it next to the model";
      if (offset > size || need > size - offset)
        return what + ": its external data [" + std::to_string(offset) +
               ", +" + std::to_string(need) + ") lies outside '" + file +
               "' (" + std::to_string(size) + " bytes; truncated?)";
      p.bytes.resize(static_cast<size_t>(need));
      data.seekg(static_cast<std::streamoff>(offset));
      data.read(reinterpret_cast<char *>(p.bytes.data()),
                static_cast<std::streamsize>(need));
      if (static_cast<uint64_t>(data.gcount()) != need)
        return what + ": short read from '" + file + "'";
    } else if (init.has_raw_data()) {
      if (init.raw_data().size() != static_cast<size_t>(count) * elemBytes)
        return what + " holds " + std::to_string(init.raw_data().size()) +
               " bytes of raw data, expected " +
               std::to_string(count * elemBytes) + " for its shape";
      p.bytes.assign(init.raw_data().begin(), init.raw_data().end());
    } else {
      // The typed field of the element type (ONNX's TensorProto comments):
      // 16-bit floats, small integers and bool travel in int32_data (f16
      // and bf16 as their bit patterns), uint32/uint64 in uint64_data.
      int64_t found = 0;
      p.bytes.resize(static_cast<size_t>(count) * elemBytes);
      auto take = [&](const auto &field, auto convert) {
        found = field.size();
        if (found != count)
          return;
        for (int64_t k = 0; k < count; ++k)
          convert(k, field.Get(static_cast<int>(k)));
      };
      auto put = [&](int64_t k, auto value) {
        std::memcpy(p.bytes.data() + k * elemBytes, &value, elemBytes);
      };
      using plan::DType;
      switch (p.dtype) {
      case DType::F32:
        take(init.float_data(), [&](int64_t k, float v) { put(k, v); });
        break;
      case DType::F64:
        take(init.double_data(), [&](int64_t k, double v) { put(k, v); });
        break;
      case DType::I64:
        take(init.int64_data(), [&](int64_t k, int64_t v) { put(k, v); });
        break;
      case DType::U32:
      case DType::U64:
        take(init.uint64_data(), [&](int64_t k, uint64_t v) { put(k, v); });
        break;
      default: // little-endian: the low bytes of the int32 are the value
        take(init.int32_data(), [&](int64_t k, int32_t v) {
          uint32_t u = static_cast<uint32_t>(v);
          if (p.dtype == DType::Bool)
            u = u != 0;
          std::memcpy(p.bytes.data() + k * elemBytes, &u, elemBytes);
        });
        break;
      }
      if (found != count)
        return what + " holds " + std::to_string(found) +
               " values in its typed field, expected " +
               std::to_string(count) + " for its shape";
    }
    out.params[init.name()] = std::move(p);
  }
  return "";
}
