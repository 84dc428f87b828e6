//===- TrainableLists.cpp - a model's own lists of what trains ------------===//
//
// Reads the metadata_props keys `tofu.frozen` and `tofu.trainable` that
// tools/tofu_export.py writes: each a JSON list of initializer names.
//
//===----------------------------------------------------------------------===//
#include "tofu/Import/TrainableLists.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"

#include <onnx/onnx_pb.h>

namespace tofu {

static llvm::Error listError(llvm::StringRef key, const llvm::Twine &why) {
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "metadata_props '" + key + "' " + why +
          " (expected a JSON list of initializer names, e.g. "
          "[\"mask\", \"pe\"], as tools/tofu_export.py writes)");
}

/// The names of one list, each once.
static llvm::Expected<std::vector<std::string>>
parseList(llvm::StringRef key, llvm::StringRef text) {
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(text);
  if (!json)
    return listError(key, "is not JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Array *array = json->getAsArray();
  if (!array)
    return listError(key, "is not a list");
  std::vector<std::string> names;
  llvm::StringSet<> seen;
  for (const llvm::json::Value &element : *array) {
    std::optional<llvm::StringRef> name = element.getAsString();
    if (!name)
      return listError(key, "holds an element that is not a string");
    if (seen.insert(*name).second)
      names.push_back(name->str());
  }
  return names;
}

llvm::Expected<TrainableLists>
readTrainableLists(const onnx::ModelProto &model) {
  TrainableLists lists;
  for (const auto &prop : model.metadata_props()) {
    llvm::StringRef key = prop.key();
    std::optional<std::vector<std::string>> *list =
        key == kFrozenListKey      ? &lists.frozen
        : key == kTrainableListKey ? &lists.trainable
                                   : nullptr;
    if (!list)
      continue;
    if (*list)
      return listError(key, "is given twice");
    auto names = parseList(key, prop.value());
    if (!names)
      return names.takeError();
    *list = std::move(*names);
  }
  if (lists.frozen && lists.trainable) {
    llvm::StringSet<> frozen;
    for (const std::string &name : *lists.frozen)
      frozen.insert(name);
    for (const std::string &name : *lists.trainable)
      if (frozen.contains(name))
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "metadata_props lists '" + name + "' both in '" + kFrozenListKey +
                "' and in '" + kTrainableListKey + "'");
  }
  return lists;
}

} // namespace tofu
