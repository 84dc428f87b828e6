//===- OpsetNormalizationTest.cpp - old ONNX forms into the specs' --------===//
//
// The rewrites that lit cannot show because the result needs an op without
// a TDL spec yet (PRelu), and the contract between expandOnnxNode (several
// nodes) and normalizeOnnxNode (one node in place): what the first expands,
// the second refuses, and the pieces pass the second unchanged.
//
//===----------------------------------------------------------------------===//
#include "tofu/Import/OpsetNormalization.h"

#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>

#include <map>

using namespace tofu;

namespace {

/// Shapes by name, f32.
struct Types {
  std::map<std::string, std::vector<int64_t>> dims;
  std::optional<tdl::TensorType> operator()(llvm::StringRef name) const {
    auto it = dims.find(name.str());
    if (it == dims.end())
      return std::nullopt;
    tdl::TensorType type;
    type.elem = tdl::ElemType::F32;
    type.dims = it->second;
    return type;
  }
};

onnx::NodeProto makeNode(const std::string &op, std::vector<std::string> in,
                         std::vector<std::string> out) {
  onnx::NodeProto node;
  node.set_op_type(op);
  for (const std::string &name : in)
    node.add_input(name);
  for (const std::string &name : out)
    node.add_output(name);
  return node;
}

void addInt(onnx::NodeProto &node, const std::string &name, int64_t value) {
  auto *attr = node.add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::INT);
  attr->set_i(value);
}

bool hasAttr(const onnx::NodeProto &node, const std::string &name) {
  for (const auto &attr : node.attribute())
    if (attr.name() == name)
      return true;
  return false;
}

const TensorData *noConstant(llvm::StringRef) { return nullptr; }

std::vector<double> valuesOf(const TensorData &data) {
  std::vector<double> values;
  for (int64_t k = 0; k < data.numElements(); ++k)
    values.push_back(data.valueAt(k));
  return values;
}

/// Expands `node` at `opset`, then normalizes every piece (as the importer
/// does, which knows each piece's input types by then: `types` names the
/// intermediate values too); fails the test on an error.
std::vector<onnx::NodeProto>
expandAndNormalize(const onnx::NodeProto &node, int64_t opset,
                   const Types &types,
                   std::vector<std::pair<std::string, TensorData>> &constants) {
  auto pieces = expandOnnxNode(node, opset, "node 'n'", types, constants);
  EXPECT_TRUE(bool(pieces))
      << (pieces ? "" : llvm::toString(pieces.takeError()));
  if (!pieces)
    return {};
  for (onnx::NodeProto &piece : *pieces)
    if (auto err = normalizeOnnxNode(piece, opset, "node 'n'", noConstant,
                                     types, constants))
      ADD_FAILURE() << llvm::toString(std::move(err));
  return *pieces;
}

TEST(OpsetNormalization, PReluSixPerChannelSlopeIsUnsqueezed) {
  // Opset 6 (Caffe2): slope [3] of X [2, 3, 4, 5] is per channel; numpy
  // broadcasting (opset 7) would align it with the last dim (5).
  Types types{
      {{"x", {2, 3, 4, 5}}, {"slope", {3}}, {"y/slope.aligned", {3, 1, 1}}}};
  onnx::NodeProto prelu = makeNode("PRelu", {"x", "slope"}, {"y"});
  std::vector<std::pair<std::string, TensorData>> constants;
  auto pieces = expandAndNormalize(prelu, 6, types, constants);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].op_type(), "Unsqueeze");
  EXPECT_EQ(pieces[0].input(0), "slope");
  ASSERT_EQ(constants.size(), 1u);
  EXPECT_EQ(pieces[0].input(1), constants[0].first);
  EXPECT_EQ(valuesOf(constants[0].second), (std::vector<double>{1, 2}));
  EXPECT_EQ(pieces[1].op_type(), "PRelu");
  EXPECT_EQ(pieces[1].input(1), pieces[0].output(0));
  EXPECT_EQ(pieces[1].output(0), "y");

  // One slope value, or X [N, C]: numpy broadcasting means the same.
  Types scalar{{{"x", {2, 3, 4, 5}}, {"slope", {1}}}};
  constants.clear();
  EXPECT_EQ(expandAndNormalize(prelu, 6, scalar, constants).size(), 1u);
  Types matrix{{{"x", {2, 3}}, {"slope", {3}}}};
  EXPECT_EQ(expandAndNormalize(prelu, 6, matrix, constants).size(), 1u);
  // From opset 7 on the slope broadcasts as numpy says: nothing changes.
  EXPECT_EQ(expandAndNormalize(prelu, 9,
                               Types{{{"x", {2, 3, 4, 3}}, {"slope", {3}}}},
                               constants)
                .size(),
            1u);
  // Neither one value, X's shape nor per channel: refused.
  Types other{{{"x", {2, 3, 4, 5}}, {"slope", {5}}}};
  auto refused = expandOnnxNode(prelu, 6, "node 'n'", other, constants);
  ASSERT_FALSE(bool(refused));
  EXPECT_EQ(llvm::toString(refused.takeError()),
            "node 'n' at opset 6: PRelu's slope [5] is neither one value, X's "
            "shape [2, 3, 4, 5] nor one value per channel (dim 1)");
}

TEST(OpsetNormalization, NormalizeRefusesWhatOnlyExpandCanRewrite) {
  // normalizeOnnxNode rewrites one node in place: the forms that need an
  // extra node are errors there (the node-test runner skips them).
  std::vector<std::pair<std::string, TensorData>> constants;
  onnx::NodeProto add = makeNode("Add", {"a", "b"}, {"y"});
  addInt(add, "broadcast", 1);
  addInt(add, "axis", 1);
  Types types{{{"a", {2, 3, 4, 5}}, {"b", {3, 4}}, {"y/B.aligned", {3, 4, 1}}}};
  llvm::Error err =
      normalizeOnnxNode(add, 6, "node 'n'", noConstant, types, constants);
  ASSERT_TRUE(bool(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("Unsqueeze"),
            std::string::npos);

  // B aligned at axis 1 of A [2, 3, 4, 5] from [3, 4]: one size-1 dim
  // appended, then the broadcast attributes are gone.
  auto pieces = expandAndNormalize(add, 6, types, constants);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].op_type(), "Unsqueeze");
  EXPECT_EQ(valuesOf(constants.back().second), (std::vector<double>{2}));
  EXPECT_FALSE(hasAttr(pieces[1], "broadcast"));
  EXPECT_FALSE(hasAttr(pieces[1], "axis"));

  // Aligned at the end (axis 2): one node, attributes dropped.
  onnx::NodeProto suffix = makeNode("Mul", {"a", "b"}, {"y"});
  addInt(suffix, "broadcast", 1);
  addInt(suffix, "axis", 2);
  Types tail{{{"a", {2, 3, 4, 5}}, {"b", {4, 5}}}};
  pieces = expandAndNormalize(suffix, 6, tail, constants);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_FALSE(hasAttr(pieces[0], "broadcast"));
  EXPECT_FALSE(hasAttr(pieces[0], "axis"));
}

TEST(OpsetNormalization, CoercedSoftmaxFlattensAroundTheOp) {
  std::vector<std::pair<std::string, TensorData>> constants;
  onnx::NodeProto softmax = makeNode("Hardmax", {"x"}, {"y"});
  Types types{
      {{"x", {2, 3, 4}}, {"y/coerced", {2, 12}}, {"y/coerced.out", {2, 12}}}};
  auto pieces = expandAndNormalize(softmax, 12, types, constants);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].op_type(), "Flatten");
  EXPECT_EQ(pieces[1].op_type(), "Hardmax");
  EXPECT_EQ(pieces[2].op_type(), "Reshape");
  EXPECT_EQ(pieces[2].output(0), "y");
  ASSERT_FALSE(constants.empty());
  EXPECT_EQ(valuesOf(constants.back().second), (std::vector<double>{2, 3, 4}));
  // Opset 13 normalizes over the axis alone: one node.
  constants.clear();
  EXPECT_EQ(expandAndNormalize(softmax, 13, types, constants).size(), 1u);
}

TEST(OpsetNormalization, GroupNormalizationBecomesLayerNormalization) {
  // InstanceNormalization: a group per channel, scale and bias per channel.
  std::vector<std::pair<std::string, TensorData>> constants;
  onnx::NodeProto instance =
      makeNode("InstanceNormalization", {"x", "s", "b"}, {"y"});
  Types types{{{"x", {2, 3, 4, 5}}, {"s", {3}}, {"b", {3}}}};
  auto pieces = expandAndNormalize(instance, 13, types, constants);
  std::vector<std::string> ops;
  for (const onnx::NodeProto &piece : pieces)
    ops.push_back(piece.op_type());
  EXPECT_EQ(ops, (std::vector<std::string>{"Reshape", "LayerNormalization",
                                           "Reshape", "Reshape", "Reshape",
                                           "Mul", "Add"}));
  EXPECT_EQ(pieces.back().output(0), "y");
  std::map<std::string, std::vector<double>> byName;
  for (auto &[name, data] : constants)
    byName[name] = valuesOf(data);
  EXPECT_EQ(byName["y/grouped.shape"], (std::vector<double>{2, 3, 20}));
  EXPECT_EQ(byName["y/ones"], std::vector<double>(20, 1.0));
  EXPECT_EQ(byName["y/param.shape"], (std::vector<double>{3, 1, 1}));

  // GroupNormalization of opset 18: scale and bias per group, applied on
  // [N, G, M] before the shape comes back.
  constants.clear();
  onnx::NodeProto group =
      makeNode("GroupNormalization", {"x", "s2", "b2"}, {"y"});
  addInt(group, "num_groups", 1);
  Types groupTypes{{{"x", {2, 4, 3}}, {"s2", {1}}, {"b2", {1}}}};
  pieces = expandAndNormalize(group, 18, groupTypes, constants);
  ASSERT_FALSE(pieces.empty());
  EXPECT_EQ(pieces.back().op_type(), "Reshape");
  EXPECT_EQ(pieces.back().output(0), "y");
  byName.clear();
  for (auto &[name, data] : constants)
    byName[name] = valuesOf(data);
  EXPECT_EQ(byName["y/grouped.shape"], (std::vector<double>{2, 1, 12}));
  EXPECT_EQ(byName["y/param.shape"], (std::vector<double>{1, 1}));

  // An unknown dim keeps the node (the spec runs it).
  constants.clear();
  Types dynamic{{{"x", {-1, 3, 4}}, {"s", {3}}, {"b", {3}}}};
  EXPECT_EQ(expandAndNormalize(instance, 13, dynamic, constants).size(), 1u);
}

} // namespace
