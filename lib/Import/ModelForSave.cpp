//===- ModelForSave.cpp - The ONNX model a plan embeds for --save ---------===//
//
// A plan's MODEL section is the ONNX model that `tofu-run --save` writes the
// trained weights into. The trained initializers' initial values are not
// needed there (`--save` replaces every one of them and fails if one is
// missing), so they are dropped: their bytes are already in the plan's
// WEIGHTS section.
//
//===----------------------------------------------------------------------===//
#include "tofu/Import/OnnxImporter.h"
#include "tofu/Import/EmbeddedData.h"

#include "onnx/onnx_pb.h"

#include <climits>
#include <set>

using namespace tofu;

llvm::Expected<std::vector<uint8_t>>
tofu::modelForSave(onnx::ModelProto &model,
                   const std::vector<std::string> &trained,
                   llvm::StringRef modelBytes) {
  const std::set<std::string> names(trained.begin(), trained.end());
  for (onnx::TensorProto &init : *model.mutable_graph()->mutable_initializer()) {
    if (!names.count(init.name())) {
      if (isEmbeddedData(init) && !restoreEmbeddedData(init, modelBytes))
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "initializer '" + init.name() + "': its raw_data, left in the "
            "model file, cannot be found there (an internal error)");
      continue;
    }
    init.clear_raw_data();
    init.clear_float_data();
    init.clear_int32_data();
    init.clear_int64_data();
    init.clear_uint64_data();
    init.clear_double_data();
    init.clear_external_data();
    init.set_data_location(onnx::TensorProto::DEFAULT);
  }
  const size_t size = model.ByteSizeLong();
  if (size > static_cast<size_t>(INT_MAX))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "the ONNX model the plan keeps for --save (without the trained "
        "weights) is " + std::to_string(size) + " bytes, more than one "
        "protobuf message holds (2 GB); store large frozen initializers as "
        "external data, or initial weights instead of computing them in "
        "training_info's initialization graph");
  std::vector<uint8_t> bytes(size);
  if (!model.SerializeToArray(bytes.data(), static_cast<int>(bytes.size())))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "cannot serialize the ONNX model for the plan's MODEL section");
  return bytes;
}
