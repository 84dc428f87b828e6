//===- TrainingCheckpoint.cpp - --save / --resume checkpoints -------------===//
//
// State file layout (all integers little-endian; docs/TofuRun.md):
//
//   magic "TOFUSTAT" (8) | u16 major (1) | u16 minor (0) | u32 reserved (0)
//   i64 steps completed
//   u32 length + optimizer kind
//   u32 number of tensors, then per tensor:
//     u32 length + name | u8 dtype | u32 rank | i64 dims[rank]
//     u64 byte count | bytes (row-major, whole tensor)
//   u64 FNV-1a 64 of every byte before it
//
//===----------------------------------------------------------------------===//

#include "tofu/runtime/TrainingCheckpoint.h"
#include "tofu/runtime/AtomicFile.h"
#include "tofu/runtime/InputFile.h"
#include "tofu/runtime/OnnxSave.h"

#include "PlanContainer.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

using namespace tofu::runtime;
using namespace tofu::plan;
using tofu::plan::container::fnv1a64;
using tofu::plan::container::loadLE;
using tofu::plan::container::storeLE;

namespace {

constexpr char kStateMagic[8] = {'T', 'O', 'F', 'U', 'S', 'T', 'A', 'T'};
constexpr uint16_t kStateMajor = 1;
constexpr uint16_t kStateMinor = 0;
/// metadata_props keys of a saved model.
constexpr const char *kStateKey = "tofu.training_state";
constexpr const char *kStepKey = "tofu.training_step";
/// A state file is named <model file name> + this + 16 hex digits.
constexpr const char *kStateInfix = ".tofu-state-";
/// ... and its external data file (saveTrainedOnnx) this.
constexpr const char *kDataInfix = ".data-";

void put(std::vector<uint8_t> &out, uint64_t value, size_t bytes) {
  size_t at = out.size();
  out.resize(at + bytes);
  storeLE(out.data() + at, value, bytes);
}

void putString(std::vector<uint8_t> &out, const std::string &s) {
  put(out, s.size(), 4);
  out.insert(out.end(), s.begin(), s.end());
}

/// Bounds-checked sequential reads; the first failure sticks.
struct Cursor {
  const std::vector<uint8_t> &bytes;
  size_t pos = 0, end = 0;
  bool ok = true;
  bool has(uint64_t n) {
    ok = ok && n <= end - pos;
    return ok;
  }
  uint64_t get(size_t n) {
    if (!has(n))
      return 0;
    uint64_t v = loadLE(bytes.data() + pos, n);
    pos += n;
    return v;
  }
  std::string getString() {
    uint64_t n = get(4);
    if (!has(n))
      return "";
    std::string s(bytes.begin() + pos, bytes.begin() + pos + n);
    pos += n;
    return s;
  }
};

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

/// Whether `file` is `<model><infix><16 hex digits>`.
bool isCompanionOf(const std::string &file, const std::string &model,
                   const char *infix) {
  std::string prefix = model + infix;
  if (file.size() != prefix.size() + 16 || file.compare(0, prefix.size(), prefix))
    return false;
  for (size_t i = prefix.size(); i < file.size(); ++i)
    if (!std::isxdigit(static_cast<unsigned char>(file[i])))
      return false;
  return true;
}

/// The ONNX TensorProto::DataType of a plan dtype.
int32_t onnxTypeOf(DType t) { return onnxDataTypeOf(t); }

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Params whose value the training step changes (the ones --save writes).
std::vector<int32_t> trainedParams(const Plan &plan) {
  std::vector<bool> updated(plan.tensors.size(), false);
  for (const auto &[param, newValue] : plan.paramUpdates)
    if (param >= 0 && static_cast<size_t>(param) < updated.size())
      updated[param] = true;
  std::vector<int32_t> out;
  for (size_t t = 0; t < plan.tensors.size(); ++t)
    if (plan.tensors[t].role == TensorRole::Param && updated[t])
      out.push_back(static_cast<int32_t>(t));
  return out;
}

} // namespace

std::vector<uint8_t>
tofu::runtime::encodeTrainingState(const TrainingState &state) {
  std::vector<uint8_t> out(kStateMagic, kStateMagic + 8);
  put(out, kStateMajor, 2);
  put(out, kStateMinor, 2);
  put(out, 0, 4);
  put(out, static_cast<uint64_t>(state.step), 8);
  putString(out, state.optimizer);
  put(out, state.tensors.size(), 4);
  for (const TrainingState::Tensor &t : state.tensors) {
    putString(out, t.name);
    put(out, static_cast<uint8_t>(t.dtype), 1);
    put(out, t.shape.size(), 4);
    for (int64_t d : t.shape)
      put(out, static_cast<uint64_t>(d), 8);
    put(out, t.bytes.size(), 8);
    out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  }
  put(out, fnv1a64(out.data(), out.size()), 8);
  return out;
}

std::string tofu::runtime::decodeTrainingState(const std::vector<uint8_t> &bytes,
                                               const std::string &what,
                                               TrainingState &state) {
  const std::string corrupt =
      "; the file is corrupt (save the checkpoint again with tofu-run --save)";
  if (bytes.size() < 8 + 8 + 8 + 4 + 4 + 8 ||
      std::memcmp(bytes.data(), kStateMagic, 8) != 0)
    return what + " is not a tofu training state file (no 'TOFUSTAT' magic)";
  uint16_t major = static_cast<uint16_t>(loadLE(bytes.data() + 8, 2));
  uint16_t minor = static_cast<uint16_t>(loadLE(bytes.data() + 10, 2));
  if (major != kStateMajor)
    return what + " has state format " + std::to_string(major) + "." +
           std::to_string(minor) + "; this tofu-run reads " +
           std::to_string(kStateMajor) + ".x; resume with the tofu-run that "
           "saved it";
  uint64_t stored = loadLE(bytes.data() + bytes.size() - 8, 8);
  uint64_t actual = fnv1a64(bytes.data(), bytes.size() - 8);
  if (stored != actual)
    return what + ": checksum mismatch (expected 0x" + hex16(stored) +
           ", found 0x" + hex16(actual) + ")" + corrupt;
  Cursor c{bytes, 16, bytes.size() - 8};
  state = TrainingState();
  state.step = static_cast<int64_t>(c.get(8));
  state.optimizer = c.getString();
  uint64_t count = c.get(4);
  for (uint64_t i = 0; c.ok && i < count; ++i) {
    TrainingState::Tensor t;
    t.name = c.getString();
    uint64_t dtype = c.get(1);
    if (dtype >= kNumDTypes)
      return what + ": tensor '" + t.name + "' has unknown dtype " +
             std::to_string(dtype) + corrupt;
    t.dtype = static_cast<DType>(dtype);
    uint64_t rank = c.get(4);
    if (!c.has(rank * 8))
      break;
    uint64_t elements = 1;
    for (uint64_t r = 0; r < rank; ++r) {
      int64_t d = static_cast<int64_t>(c.get(8));
      if (d < 0)
        return what + ": tensor '" + t.name + "' has a negative dimension" +
               corrupt;
      t.shape.push_back(d);
      elements *= static_cast<uint64_t>(d);
    }
    uint64_t n = c.get(8);
    if (!c.has(n))
      break;
    if (n != elements * dtypeSize(t.dtype))
      return what + ": tensor '" + t.name + "' holds " + std::to_string(n) +
             " bytes, but its shape needs " +
             std::to_string(elements * dtypeSize(t.dtype)) + corrupt;
    t.bytes.assign(bytes.begin() + c.pos, bytes.begin() + c.pos + n);
    c.pos += n;
    state.tensors.push_back(std::move(t));
  }
  if (!c.ok)
    return what + " ends in the middle of an entry" + corrupt;
  if (c.pos != c.end)
    return what + " has " + std::to_string(c.end - c.pos) +
           " unexpected bytes after its last tensor" + corrupt;
  if (state.step < 0)
    return what + " records a negative step count" + corrupt;
  return "";
}

std::string tofu::runtime::checkSaveModel(const Plan &plan) {
  std::map<std::string, TrainedParam> params;
  for (int32_t t : trainedParams(plan)) {
    const TensorInfo &info = plan.tensors[t];
    if (info.paramName.empty())
      return "parameter tensor '" + info.name + "' has no ONNX initializer "
             "name (paramName) in the plan";
    TrainedParam p;
    p.shape = info.shape;
    p.dtype = info.dtype;
    params[info.paramName] = std::move(p);
  }
  return checkModelForSave(plan.onnxModel, params);
}

std::string tofu::runtime::saveCheckpoint(const Plan &plan,
                                          const BufferSource &live,
                                          int64_t stepsDone,
                                          const std::string &path,
                                          bool externalData) {
  std::map<std::string, TrainedParam> params;
  uint64_t paramBytes = 0;
  // Only trained parameters are written back: a Param tensor without an
  // update is a constant (an ONNX Constant or a value tofuc folded, which
  // has no initializer) or a frozen weight, whose initializer stays as is.
  for (int32_t t : trainedParams(plan)) {
    const TensorInfo &info = plan.tensors[t];
    if (info.paramName.empty())
      return "parameter tensor '" + info.name + "' has no ONNX initializer "
             "name (paramName) in the plan";
    std::vector<uint8_t> bytes;
    if (std::string err = assembleTensor(plan, t, live, bytes); !err.empty())
      return err;
    TrainedParam p;
    p.shape = info.shape;
    p.dtype = info.dtype;
    paramBytes += bytes.size();
    p.bytes = std::move(bytes);
    params[info.paramName] = std::move(p);
  }
  externalData = externalData || paramBytes > kSaveExternalDataAbove;

  TrainingState state;
  state.step = stepsDone;
  state.optimizer = plan.optimizer.kind;
  for (size_t t = 0; t < plan.tensors.size(); ++t) {
    const TensorInfo &info = plan.tensors[t];
    if (info.role != TensorRole::State)
      continue;
    TrainingState::Tensor entry;
    entry.name = info.name;
    entry.dtype = info.dtype;
    entry.shape = info.shape;
    if (std::string err = assembleTensor(plan, static_cast<int32_t>(t), live,
                                         entry.bytes);
        !err.empty())
      return err;
    state.tensors.push_back(std::move(entry));
  }
  std::vector<uint8_t> stateBytes = encodeTrainingState(state);
  // A model that carries its training algorithm keeps that algorithm's
  // state in its own initializers: the saved model holds it too.
  std::map<std::string, SavedStateTensor> modelState;
  for (const TrainingState::Tensor &t : state.tensors) {
    int32_t onnxType = onnxTypeOf(t.dtype);
    if (onnxType == 0)
      continue;
    modelState[t.name] = {onnxType, t.shape, t.bytes};
  }

  namespace fs = std::filesystem;
  const fs::path target(path);
  const std::string modelName = target.filename().string();
  if (modelName.empty())
    return "'" + path + "' names a directory, not a model file";
  const std::string stateName =
      modelName + kStateInfix +
      hex16(loadLE(stateBytes.data() + stateBytes.size() - 8, 8));
  const fs::path dir = target.parent_path();
  const std::string statePath = (dir / stateName).string();
  // The state first: the model that names it is renamed into place last.
  if (std::string err = writeFileAtomically(statePath, stateBytes.data(),
                                            stateBytes.size());
      !err.empty())
    return err;
  std::string dataName;
  if (std::string err = saveTrainedOnnx(
          plan.onnxModel, params, path,
          {{kStateKey, stateName}, {kStepKey, std::to_string(stepsDone)}},
          externalData, &dataName, modelState);
      !err.empty())
    return err;
  // The state and data files of earlier saves to this path are no longer
  // named by any model.
  std::error_code ec;
  for (const auto &entry :
       fs::directory_iterator(dir.empty() ? fs::path(".") : dir, ec)) {
    std::string name = entry.path().filename().string();
    if ((name != stateName && isCompanionOf(name, modelName, kStateInfix)) ||
        (name != dataName && isCompanionOf(name, modelName, kDataInfix)))
      fs::remove(entry.path(), ec);
  }
  return "";
}

std::string tofu::runtime::resumeCheckpoint(const std::string &path,
                                            Plan &plan, int64_t &stepsDone) {
  const std::vector<int32_t> params = trainedParams(plan);
  std::vector<std::string> wanted;
  for (int32_t t : params)
    wanted.push_back(plan.tensors[t].paramName);
  OnnxWeights model;
  if (std::string err = readOnnxWeights(path, wanted, model); !err.empty())
    return err;
  auto stateIt = model.metadata.find(kStateKey);
  if (stateIt == model.metadata.end())
    return "'" + path + "' carries no tofu training state (no '" +
           std::string(kStateKey) + "' metadata): it was not written by "
           "tofu-run --save; --resume needs the optimizer state and step "
           "count that --save writes next to the model (to start afresh from "
           "its weights, compile it with tofuc instead)";
  const std::string stateName = stateIt->second;
  if (stateName.empty() || stateName.find('/') != std::string::npos ||
      stateName == "." || stateName == "..")
    return "'" + path + "' names an invalid training state file '" +
           stateName + "'";
  namespace fs = std::filesystem;
  const std::string statePath =
      (fs::path(path).parent_path() / stateName).string();
  std::vector<uint8_t> bytes;
  if (std::string err = readInputFile(statePath, "the training state",
                                      kMaxInputFileBytes, bytes);
      !err.empty())
    return err + " (named by '" + path +
           "'); a --save writes it next to the model, keep the two together";
  TrainingState state;
  if (std::string err =
          decodeTrainingState(bytes, "training state '" + statePath + "'",
                              state);
      !err.empty())
    return err;
  auto stepIt = model.metadata.find(kStepKey);
  if (stepIt == model.metadata.end() ||
      stepIt->second != std::to_string(state.step))
    return "'" + path + "' records step " +
           (stepIt == model.metadata.end() ? std::string("(none)")
                                           : stepIt->second) +
           " but its training state '" + statePath + "' step " +
           std::to_string(state.step) + "; the two do not belong together";

  const std::string where = "--resume '" + path + "': ";
  if (state.optimizer != plan.optimizer.kind)
    return where + "the checkpoint was trained with optimizer '" +
           state.optimizer + "', this plan uses '" + plan.optimizer.kind +
           "'; resume with a plan compiled with --optimizer " +
           state.optimizer;

  // New contents per tensor, built completely before anything changes.
  std::vector<std::pair<int32_t, const std::vector<uint8_t> *>> values;
  std::vector<std::vector<uint8_t>> paramBytes;
  paramBytes.reserve(params.size());
  for (int32_t t : params) {
    const TensorInfo &info = plan.tensors[t];
    auto it = model.params.find(info.paramName);
    if (it == model.params.end())
      return where + "the model has no initializer '" +
             info.paramName + "' for the plan's parameter of shape " +
             shapeString(info.shape) +
             "; the checkpoint belongs to another model";
    if (it->second.shape != info.shape)
      return where + "initializer '" + info.paramName + "' has shape " +
             shapeString(it->second.shape) + ", the plan's parameter " +
             shapeString(info.shape) +
             "; the checkpoint belongs to another model";
    if (it->second.dtype != info.dtype)
      return where + "initializer '" + info.paramName + "' is " +
             dtypeNumpyName(it->second.dtype) + ", the plan's parameter " +
             dtypeNumpyName(info.dtype) +
             "; the checkpoint belongs to another model";
    paramBytes.push_back(it->second.bytes);
    values.push_back({t, &paramBytes.back()});
  }
  std::map<std::string, const TrainingState::Tensor *> byName;
  for (const TrainingState::Tensor &t : state.tensors)
    if (!byName.emplace(t.name, &t).second)
      return where + "the training state holds tensor '" + t.name +
             "' twice; the file is corrupt";
  std::set<std::string> used;
  for (size_t t = 0; t < plan.tensors.size(); ++t) {
    const TensorInfo &info = plan.tensors[t];
    if (info.role != TensorRole::State)
      continue;
    auto it = byName.find(info.name);
    if (it == byName.end())
      return where + "the training state has no tensor '" + info.name +
             "' (" + dtypeNumpyName(info.dtype) + " " + shapeString(info.shape) +
             "), which this plan's optimizer keeps; the checkpoint belongs "
             "to another model or optimizer";
    const TrainingState::Tensor &s = *it->second;
    if (s.dtype != info.dtype || s.shape != info.shape)
      return where + "state tensor '" + info.name + "' is " +
             dtypeNumpyName(s.dtype) + " " + shapeString(s.shape) +
             " in the checkpoint but " + dtypeNumpyName(info.dtype) + " " +
             shapeString(info.shape) +
             " in the plan; the checkpoint belongs to another model";
    used.insert(info.name);
    values.push_back({static_cast<int32_t>(t), &s.bytes});
  }
  for (const TrainingState::Tensor &t : state.tensors)
    if (!used.count(t.name))
      return where + "the training state holds tensor '" + t.name +
             "', which this plan does not have; the checkpoint belongs to "
             "another model or optimizer";

  // Every owned buffer of a restored tensor, and any other buffer that
  // carries an initial value of it, starts from the checkpoint.
  std::vector<int32_t> source(plan.tensors.size(), -1);
  for (size_t i = 0; i < values.size(); ++i)
    source[values[i].first] = static_cast<int32_t>(i);
  for (DeviceProgram &dev : plan.devices)
    for (Buffer &buf : dev.buffers) {
      if (buf.tensor < 0 || source[buf.tensor] < 0 ||
          (!buf.owned && !buf.hasInit()))
        continue;
      const TensorInfo &info = plan.tensors[buf.tensor];
      extractRegion(*values[source[buf.tensor]].second, info.shape,
                    dtypeSize(info.dtype), buf.region, buf.init);
      buf.borrowedInit = nullptr; // the checkpoint's value, in `init`
    }
  stepsDone = state.step;
  return "";
}
