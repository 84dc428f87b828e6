//===- EmbeddedDataTest.cpp - parsing a model without copying its weights -===//
//
// parseModelLeavingData must give ParseFromArray's model but for the
// raw_data it leaves in the file: the references point at exactly those
// bytes, restoring them gives back ParseFromArray's message byte for byte,
// every initializer it may not leave out (small, integer, malformed, typed
// data, a second raw_data field, an old IR version) is parsed as usual, and
// a model the scan cannot follow, or a truncated one, parses (or fails) as
// ParseFromArray does.
//
//===----------------------------------------------------------------------===//
#include "tofu/Import/EmbeddedData.h"

#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>

using namespace tofu;

namespace {

constexpr uint64_t kMin = 64;

onnx::TensorProto *addFloat(onnx::GraphProto &graph, const std::string &name,
                            std::vector<int64_t> dims, int32_t type,
                            size_t elemBytes, uint8_t seed) {
  onnx::TensorProto *t = graph.add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  size_t count = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    count *= d;
  }
  std::string raw(count * elemBytes, '\0');
  for (size_t i = 0; i < raw.size(); ++i)
    raw[i] = static_cast<char>(seed + i * 7);
  t->set_raw_data(raw);
  return t;
}

/// A model with initializers of every kind, some before, between and after
/// other graph fields, and fields of the model after the graph.
onnx::ModelProto sampleModel() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("test");
  onnx::GraphProto &graph = *model.mutable_graph();
  graph.set_name("g");
  addFloat(graph, "w1", {16, 8}, onnx::TensorProto::FLOAT, 4, 1); // 512 B
  graph.add_node()->set_op_type("Relu");
  addFloat(graph, "small", {4}, onnx::TensorProto::FLOAT, 4, 2); // 16 B
  addFloat(graph, "ints", {32}, onnx::TensorProto::INT64, 8, 3); // integer
  addFloat(graph, "half", {64}, onnx::TensorProto::FLOAT16, 2, 4);
  addFloat(graph, "double", {3, 5}, onnx::TensorProto::DOUBLE, 8, 5);
  // raw_data of the wrong size: the importer's error must stay its own.
  onnx::TensorProto *bad =
      addFloat(graph, "bad", {10, 10}, onnx::TensorProto::FLOAT, 4, 6);
  bad->mutable_raw_data()->resize(396);
  // raw_data beside a typed field.
  onnx::TensorProto *typed =
      addFloat(graph, "typed", {32}, onnx::TensorProto::FLOAT, 4, 7);
  typed->add_float_data(1.f);
  // No name.
  addFloat(graph, "", {32}, onnx::TensorProto::FLOAT, 4, 8);
  // Already external (a real external data reference).
  onnx::TensorProto *ext = graph.add_initializer();
  ext->set_name("ext");
  ext->set_data_type(onnx::TensorProto::FLOAT);
  ext->add_dims(100);
  ext->set_data_location(onnx::TensorProto::EXTERNAL);
  auto *entry = ext->add_external_data();
  entry->set_key("location");
  entry->set_value("data.bin");
  addFloat(graph, "w2", {300}, onnx::TensorProto::FLOAT, 4, 9);
  graph.add_output()->set_name("y");
  model.add_opset_import()->set_version(17);
  model.set_doc_string("after the graph");
  return model;
}

/// The initializers of `model` by name.
const onnx::TensorProto &init(const onnx::ModelProto &model,
                              const std::string &name) {
  for (const auto &t : model.graph().initializer())
    if (t.name() == name)
      return t;
  static onnx::TensorProto none;
  ADD_FAILURE() << "no initializer '" << name << "'";
  return none;
}

/// Restores every embedded initializer of `model` from `bytes`.
void restoreAll(onnx::ModelProto &model, llvm::StringRef bytes) {
  if (!model.has_graph())
    return;
  for (auto &t : *model.mutable_graph()->mutable_initializer())
    if (isEmbeddedData(t))
      EXPECT_TRUE(restoreEmbeddedData(t, bytes)) << t.name();
}

TEST(EmbeddedData, LeavesTheLargeWellFormedFloatInitializersInTheFile) {
  const onnx::ModelProto original = sampleModel();
  const std::string bytes = original.SerializeAsString();
  onnx::ModelProto parsed;
  ASSERT_TRUE(parseModelLeavingData(bytes, parsed, kMin));
  for (const char *name : {"w1", "half", "double", "w2"}) {
    const onnx::TensorProto &t = init(parsed, name);
    ASSERT_TRUE(isEmbeddedData(t)) << name;
    EXPECT_FALSE(t.has_raw_data()) << name;
    // offset and length point at exactly the original raw_data.
    uint64_t offset = 0, length = 0;
    for (const auto &e : t.external_data()) {
      if (e.key() == "offset")
        offset = std::stoull(e.value());
      if (e.key() == "length")
        length = std::stoull(e.value());
    }
    EXPECT_EQ(bytes.substr(offset, length), init(original, name).raw_data())
        << name;
  }
  for (const char *name : {"small", "ints", "bad", "typed", "", "ext"}) {
    EXPECT_FALSE(isEmbeddedData(init(parsed, name))) << name;
    EXPECT_EQ(init(parsed, name).SerializeAsString(),
              init(original, name).SerializeAsString())
        << name;
  }
  restoreAll(parsed, bytes);
  EXPECT_EQ(parsed.SerializeAsString(), bytes);
}

TEST(EmbeddedData, RestoredModelEqualsTheUsualParseByteForByte) {
  // An unknown field of the model (number 99, varint) after the graph
  // survives.
  onnx::ModelProto original = sampleModel();
  std::string bytes = original.SerializeAsString();
  onnx::ModelProto usual;
  bytes += std::string("\x98\x06\x05", 3); // field 99, varint 5
  ASSERT_TRUE(usual.ParseFromString(bytes));
  onnx::ModelProto parsed;
  ASSERT_TRUE(parseModelLeavingData(bytes, parsed, kMin));
  restoreAll(parsed, bytes);
  EXPECT_EQ(parsed.SerializeAsString(), usual.SerializeAsString());
}

TEST(EmbeddedData, OldIrVersionsAndSecondRawDataFieldsParseAsUsual) {
  onnx::ModelProto old = sampleModel();
  old.set_ir_version(3);
  std::string bytes = old.SerializeAsString();
  onnx::ModelProto parsed;
  ASSERT_TRUE(parseModelLeavingData(bytes, parsed, kMin));
  for (const auto &t : parsed.graph().initializer())
    EXPECT_FALSE(isEmbeddedData(t)) << t.name();
  EXPECT_EQ(parsed.SerializeAsString(), bytes);

  // A tensor with two raw_data fields: the last wins, as in protobuf.
  onnx::ModelProto model;
  model.set_ir_version(8);
  onnx::TensorProto *t = addFloat(*model.mutable_graph(), "twice", {32},
                                  onnx::TensorProto::FLOAT, 4, 1);
  std::string first = t->SerializeAsString();
  t->set_raw_data(std::string(128, 'x'));
  onnx::TensorProto second;
  second.set_raw_data(t->raw_data());
  // The graph's initializer field holds both encodings back to back.
  onnx::GraphProto graph;
  std::string graphBytes;
  std::string tensorBytes = first + second.SerializeAsString();
  graphBytes.push_back(static_cast<char>((5 << 3) | 2));
  graphBytes.push_back(static_cast<char>(0x80 | (tensorBytes.size() & 0x7f)));
  graphBytes.push_back(static_cast<char>(tensorBytes.size() >> 7));
  graphBytes += tensorBytes;
  std::string modelBytes("\x08\x08", 2); // ir_version 8
  modelBytes.push_back(static_cast<char>((7 << 3) | 2));
  modelBytes.push_back(static_cast<char>(0x80 | (graphBytes.size() & 0x7f)));
  modelBytes.push_back(static_cast<char>(graphBytes.size() >> 7));
  modelBytes += graphBytes;
  onnx::ModelProto usual;
  ASSERT_TRUE(usual.ParseFromString(modelBytes));
  ASSERT_EQ(usual.graph().initializer(0).raw_data(), std::string(128, 'x'));
  ASSERT_TRUE(parseModelLeavingData(modelBytes, parsed, kMin));
  EXPECT_FALSE(isEmbeddedData(parsed.graph().initializer(0)));
  EXPECT_EQ(parsed.SerializeAsString(), usual.SerializeAsString());
}

TEST(EmbeddedData, ASecondGraphFieldIsMergedAsUsual) {
  onnx::ModelProto a = sampleModel();
  onnx::ModelProto b;
  addFloat(*b.mutable_graph(), "w3", {100}, onnx::TensorProto::FLOAT, 4, 3);
  std::string bytes = a.SerializeAsString() + b.SerializeAsString();
  onnx::ModelProto usual, parsed;
  ASSERT_TRUE(usual.ParseFromString(bytes));
  ASSERT_EQ(usual.graph().initializer_size(),
            a.graph().initializer_size() + 1);
  ASSERT_TRUE(parseModelLeavingData(bytes, parsed, kMin));
  EXPECT_EQ(parsed.SerializeAsString(), usual.SerializeAsString());
}

TEST(EmbeddedData, TruncatedModelsFailOrParseAsUsual) {
  const std::string bytes = sampleModel().SerializeAsString();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::string cut = bytes.substr(0, n);
    onnx::ModelProto usual, parsed;
    bool usualOk = usual.ParseFromString(cut);
    bool parsedOk = parseModelLeavingData(cut, parsed, kMin);
    ASSERT_EQ(parsedOk, usualOk) << "truncated at " << n;
    if (!usualOk)
      continue;
    restoreAll(parsed, cut);
    ASSERT_EQ(parsed.SerializeAsString(), usual.SerializeAsString())
        << "truncated at " << n;
  }
}

TEST(EmbeddedData, RestoreRefusesAReferenceOutsideTheBytes) {
  const std::string bytes = sampleModel().SerializeAsString();
  onnx::ModelProto parsed;
  ASSERT_TRUE(parseModelLeavingData(bytes, parsed, kMin));
  onnx::TensorProto t = init(parsed, "w2");
  ASSERT_TRUE(isEmbeddedData(t));
  uint64_t end = 0;
  for (const auto &e : t.external_data())
    if (e.key() == "offset" || e.key() == "length")
      end += std::stoull(e.value());
  ASSERT_GT(end, 0u);
  ASSERT_LT(end, bytes.size());
  EXPECT_FALSE(restoreEmbeddedData(t, llvm::StringRef(bytes).take_front(end - 1)));
  EXPECT_TRUE(isEmbeddedData(t));
  EXPECT_TRUE(restoreEmbeddedData(t, llvm::StringRef(bytes).take_front(end)));
  EXPECT_EQ(t.raw_data(), init(sampleModel(), "w2").raw_data());
  t = init(parsed, "w2");
  EXPECT_FALSE(restoreEmbeddedData(t, llvm::StringRef()));
  // Not embedded at all.
  onnx::TensorProto plain = init(parsed, "small");
  EXPECT_FALSE(restoreEmbeddedData(plain, bytes));
}

} // namespace
