//===- EmbeddedData.cpp - large initializers left in the model file -------===//
//
// See EmbeddedData.h. The scan reads the protobuf wire format of three
// levels only (ModelProto.graph = 7, GraphProto.initializer = 5,
// TensorProto.raw_data = 9), rewrites the lengths of the messages it
// shortens and copies every other byte as it is, so the parsed model equals
// ParseFromArray's but for the raw_data it leaves out.
//
//===----------------------------------------------------------------------===//
#include "tofu/Import/EmbeddedData.h"

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>
#include <vector>

namespace tofu {

namespace {

constexpr char kEmbeddedLocation[] = "\0tofu:raw_data-in-the-model-file";

constexpr uint32_t kModelGraph = 7;
constexpr uint32_t kGraphInitializer = 5;
constexpr uint32_t kTensorRawData = 9;
constexpr unsigned kLengthDelimited = 2;

/// One field of a message, as byte offsets into the scanned buffer.
struct Field {
  uint32_t number = 0;
  unsigned wireType = 0;
  size_t begin = 0;   ///< the tag's first byte
  size_t payload = 0; ///< the payload's first byte (length-delimited)
  size_t end = 0;     ///< one past the field's last byte
};

/// Reads a varint at `pos` (advanced past it); false when it runs past `end`
/// or over 64 bits.
bool readVarint(const uint8_t *data, size_t end, size_t &pos,
                uint64_t &value) {
  value = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (pos >= end)
      return false;
    uint8_t byte = data[pos++];
    if (shift == 63 && byte > 1)
      return false;
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80))
      return true;
  }
  return false;
}

/// Reads the field at `pos` (advanced past it); false when it is malformed
/// or a group (which the scan does not follow).
bool readField(const uint8_t *data, size_t end, size_t &pos, Field &field) {
  field.begin = pos;
  uint64_t tag;
  if (!readVarint(data, end, pos, tag) || tag > UINT32_MAX)
    return false;
  field.number = static_cast<uint32_t>(tag >> 3);
  field.wireType = static_cast<unsigned>(tag & 7);
  if (field.number == 0)
    return false;
  uint64_t value;
  switch (field.wireType) {
  case 0: // varint
    if (!readVarint(data, end, pos, value))
      return false;
    break;
  case 1: // 64-bit
    if (end - pos < 8)
      return false;
    pos += 8;
    break;
  case kLengthDelimited:
    if (!readVarint(data, end, pos, value) || value > end - pos)
      return false;
    field.payload = pos;
    pos += value;
    break;
  case 5: // 32-bit
    if (end - pos < 4)
      return false;
    pos += 4;
    break;
  default: // groups (3, 4) and invalid wire types
    return false;
  }
  field.end = pos;
  return true;
}

void appendVarint(std::string &out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

/// An initializer whose raw_data the skeleton leaves out.
struct LeftOut {
  int index;     ///< among the graph's initializers
  Field tensor;  ///< the initializer field in the graph
  Field rawData; ///< its raw_data field
};

/// The initializers of the main graph with one raw_data field of at least
/// `minBytes` bytes, and the graph field; nullopt when the scan cannot
/// follow the wire format (the caller then parses the usual way).
std::optional<std::pair<Field, std::vector<LeftOut>>>
scanModel(const uint8_t *data, size_t size, uint64_t minBytes) {
  std::optional<Field> graph;
  for (size_t pos = 0; pos < size;) {
    Field field;
    if (!readField(data, size, pos, field))
      return std::nullopt;
    if (field.number != kModelGraph)
      continue;
    // A second graph field would be merged into the first.
    if (field.wireType != kLengthDelimited || graph)
      return std::nullopt;
    graph = field;
  }
  if (!graph)
    return std::nullopt;
  std::vector<LeftOut> leftOut;
  int index = 0;
  for (size_t pos = graph->payload; pos < graph->end;) {
    Field field;
    if (!readField(data, graph->end, pos, field))
      return std::nullopt;
    if (field.number != kGraphInitializer)
      continue;
    if (field.wireType != kLengthDelimited)
      return std::nullopt;
    std::optional<Field> rawData;
    int rawDataFields = 0;
    for (size_t at = field.payload; at < field.end;) {
      Field inner;
      if (!readField(data, field.end, at, inner))
        return std::nullopt;
      if (inner.number == kTensorRawData) {
        ++rawDataFields;
        rawData = inner;
      }
    }
    // Several raw_data fields: the last wins; left to the usual parse.
    if (rawDataFields == 1 && rawData->wireType == kLengthDelimited &&
        rawData->end - rawData->payload >= minBytes)
      leftOut.push_back({index, field, *rawData});
    ++index;
  }
  return std::make_pair(*graph, std::move(leftOut));
}

/// The bytes of a float initializer of `tensor`'s type, or 0 for any other
/// type.
uint64_t floatElementBytes(int32_t dataType) {
  switch (dataType) {
  case onnx::TensorProto::FLOAT:
    return 4;
  case onnx::TensorProto::DOUBLE:
    return 8;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    return 2;
  default:
    return 0;
  }
}

/// True when `tensor` (whose raw_data was left out) may refer to its
/// `rawBytes` bytes in the model file: the importer would accept its data
/// as it is, and the checker has nothing to say about it.
bool mayLeaveOut(const onnx::ModelProto &model,
                 const onnx::TensorProto &tensor, uint64_t rawBytes) {
  uint64_t bytes = floatElementBytes(tensor.data_type());
  if (!bytes || model.ir_version() < 4 || tensor.name().empty() ||
      tensor.float_data_size() || tensor.int32_data_size() ||
      tensor.string_data_size() || tensor.int64_data_size() ||
      tensor.double_data_size() || tensor.uint64_data_size() ||
      tensor.has_segment() || tensor.has_data_location() ||
      tensor.external_data_size())
    return false;
  for (int64_t d : tensor.dims())
    if (d < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes))
      return false;
  return bytes == rawBytes;
}

/// Parses the decimal value of external_data key `key` of `tensor`.
std::optional<uint64_t> decimalEntry(const onnx::TensorProto &tensor,
                                     llvm::StringRef key) {
  for (const auto &entry : tensor.external_data())
    if (entry.key() == key) {
      uint64_t value;
      if (llvm::StringRef(entry.value()).getAsInteger(10, value))
        return std::nullopt;
      return value;
    }
  return std::nullopt;
}

} // namespace

llvm::StringRef embeddedDataLocation() {
  return llvm::StringRef(kEmbeddedLocation, sizeof(kEmbeddedLocation) - 1);
}

bool parseModelLeavingData(llvm::StringRef bytes, onnx::ModelProto &model,
                           uint64_t minBytes) {
  const auto *data = reinterpret_cast<const uint8_t *>(bytes.data());
  auto scan = scanModel(data, bytes.size(), minBytes);
  if (!scan || scan->second.empty())
    return model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  const auto &[graph, leftOut] = *scan;

  // The graph's payload without the left-out raw_data fields, each
  // shortened initializer with its new length.
  std::string graphPayload;
  size_t at = graph.payload;
  for (const LeftOut &init : leftOut) {
    graphPayload.append(bytes.data() + at, init.tensor.begin - at);
    appendVarint(graphPayload, (kGraphInitializer << 3) | kLengthDelimited);
    appendVarint(graphPayload, (init.tensor.end - init.tensor.payload) -
                                   (init.rawData.end - init.rawData.begin));
    graphPayload.append(bytes.data() + init.tensor.payload,
                        init.rawData.begin - init.tensor.payload);
    graphPayload.append(bytes.data() + init.rawData.end,
                        init.tensor.end - init.rawData.end);
    at = init.tensor.end;
  }
  graphPayload.append(bytes.data() + at, graph.end - at);
  std::string skeleton(bytes.data(), graph.begin);
  appendVarint(skeleton, (kModelGraph << 3) | kLengthDelimited);
  appendVarint(skeleton, graphPayload.size());
  skeleton += graphPayload;
  skeleton.append(bytes.data() + graph.end, bytes.size() - graph.end);
  graphPayload.clear();
  graphPayload.shrink_to_fit();

  if (!model.ParseFromString(skeleton)) {
    // Not for the left-out bytes: let the usual parse fail as it does.
    model.Clear();
    return model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  }
  auto *initializers = model.mutable_graph()->mutable_initializer();
  for (const LeftOut &init : leftOut) {
    onnx::TensorProto &tensor = *initializers->Mutable(init.index);
    uint64_t offset = init.rawData.payload;
    uint64_t length = init.rawData.end - init.rawData.payload;
    if (!mayLeaveOut(model, tensor, length)) {
      tensor.set_raw_data(bytes.data() + offset, length);
      continue;
    }
    auto add = [&](const char *key, const std::string &value) {
      auto *entry = tensor.add_external_data();
      entry->set_key(key);
      entry->set_value(value);
    };
    add("location", embeddedDataLocation().str());
    add("offset", std::to_string(offset));
    add("length", std::to_string(length));
    tensor.set_data_location(onnx::TensorProto::EXTERNAL);
  }
  return true;
}

bool isEmbeddedData(const onnx::TensorProto &tensor) {
  return tensor.data_location() == onnx::TensorProto::EXTERNAL &&
         tensor.external_data_size() > 0 &&
         tensor.external_data(0).key() == "location" &&
         tensor.external_data(0).value() == embeddedDataLocation();
}

bool restoreEmbeddedData(onnx::TensorProto &tensor,
                         llvm::StringRef modelBytes) {
  std::optional<uint64_t> offset = decimalEntry(tensor, "offset");
  std::optional<uint64_t> length = decimalEntry(tensor, "length");
  if (!isEmbeddedData(tensor) || !offset || !length ||
      *offset > modelBytes.size() || *length > modelBytes.size() - *offset)
    return false;
  tensor.set_raw_data(modelBytes.data() + *offset, *length);
  tensor.clear_external_data();
  tensor.clear_data_location();
  return true;
}

} // namespace tofu
