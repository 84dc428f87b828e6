//===- ConstantFoldingTest.cpp - foldOp on the ops PyTorch exports --------===//
//
// Each foldable op's ONNX semantics on int64 shape values: Shape's start/end
// clamping, Range's count, ConstantOfShape's value, integer Div truncating
// toward zero, int64 data through float specs (Gather, Concat) keeping its
// type, and results too large to fold.
//
//===----------------------------------------------------------------------===//
#include "tofu/Import/ConstantFolding.h"

#include <gtest/gtest.h>

using namespace tofu;

namespace {

tdl::DenseTensor ints(std::vector<double> values, std::vector<int64_t> dims) {
  tdl::DenseTensor t;
  t.type.elem = tdl::ElemType::I64;
  t.type.dims = std::move(dims);
  t.data = std::move(values);
  return t;
}

tdl::DenseTensor fold1(llvm::StringRef op,
                       std::vector<const tdl::DenseTensor *> inputs,
                       tdl::AttrMap attrs = {},
                       const tdl::DenseTensor *valueAttr = nullptr) {
  std::vector<std::optional<tdl::TensorType>> types;
  for (const tdl::DenseTensor *t : inputs)
    types.push_back(t ? std::optional<tdl::TensorType>(t->type)
                      : std::nullopt);
  auto result = foldOp(op, attrs, types, inputs, valueAttr, 1);
  EXPECT_TRUE(bool(result)) << (result ? "" : llvm::toString(result.takeError()));
  if (!result || !*result || (*result)->empty())
    return {};
  return (**result)[0];
}

TEST(ConstantFolding, ShapeWithStartAndEnd) {
  tdl::TensorType x{{2, 3, 5, 7}, tdl::ElemType::F32};
  std::vector<std::optional<tdl::TensorType>> types = {x};
  std::vector<const tdl::DenseTensor *> values = {nullptr};
  tdl::AttrMap attrs;
  attrs["start"] = tdl::AttrValue::ofInt(1);
  attrs["end"] = tdl::AttrValue::ofInt(-1);
  auto result = foldOp("Shape", attrs, types, values, nullptr, 1);
  ASSERT_TRUE(bool(result) && *result);
  EXPECT_EQ((**result)[0].data, (std::vector<double>{3, 5}));
  EXPECT_EQ((**result)[0].type.elem, tdl::ElemType::I64);
  attrs["start"] = tdl::AttrValue::ofInt(-10); // clamped to 0
  attrs["end"] = tdl::AttrValue::ofInt(10);    // clamped to the rank
  result = foldOp("Shape", attrs, types, values, nullptr, 1);
  ASSERT_TRUE(bool(result) && *result);
  EXPECT_EQ((**result)[0].data, (std::vector<double>{2, 3, 5, 7}));
}

TEST(ConstantFolding, SizeCountsElements) {
  tdl::TensorType x{{2, 3, 5}, tdl::ElemType::F32};
  auto result = foldOp("Size", {}, {x}, {nullptr}, nullptr, 1);
  ASSERT_TRUE(bool(result) && *result);
  EXPECT_EQ((**result)[0].data, (std::vector<double>{30}));
  EXPECT_TRUE((**result)[0].type.dims.empty());
}

TEST(ConstantFolding, RangeCountsUpAndDown) {
  auto a = ints({1}, {}), b = ints({10}, {}), c = ints({3}, {});
  EXPECT_EQ(fold1("Range", {&a, &b, &c}).data,
            (std::vector<double>{1, 4, 7}));
  auto d = ints({10}, {}), e = ints({4}, {}), f = ints({-2}, {});
  EXPECT_EQ(fold1("Range", {&d, &e, &f}).data,
            (std::vector<double>{10, 8, 6}));
  auto empty = fold1("Range", {&b, &a, &c});
  EXPECT_TRUE(empty.data.empty());
  EXPECT_EQ(empty.type.dims, (std::vector<int64_t>{0}));
}

TEST(ConstantFolding, ConstantOfShapeTakesItsValue) {
  auto shape = ints({2, 3}, {2});
  auto value = ints({7}, {1});
  tdl::DenseTensor out = fold1("ConstantOfShape", {&shape}, {}, &value);
  EXPECT_EQ(out.type.dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(out.type.elem, tdl::ElemType::I64);
  EXPECT_EQ(out.data, std::vector<double>(6, 7));
  tdl::DenseTensor zeros = fold1("ConstantOfShape", {&shape});
  EXPECT_EQ(zeros.type.elem, tdl::ElemType::F32);
  EXPECT_EQ(zeros.data, std::vector<double>(6, 0));
}

TEST(ConstantFolding, IntegerDivTruncatesTowardZero) {
  auto a = ints({7, -7, 6}, {3}), b = ints({2, 2, -4}, {3});
  tdl::DenseTensor out = fold1("Div", {&a, &b});
  EXPECT_EQ(out.type.elem, tdl::ElemType::I64);
  EXPECT_EQ(out.data, (std::vector<double>{3, -3, -1}));
}

TEST(ConstantFolding, IntDataThroughFloatSpecsStaysInt) {
  auto shape = ints({8, 3, 224, 224}, {4});
  auto index = ints({0}, {});
  tdl::AttrMap axis0;
  axis0["axis"] = tdl::AttrValue::ofInt(0);
  tdl::DenseTensor n = fold1("Gather", {&shape, &index}, axis0);
  EXPECT_EQ(n.type.elem, tdl::ElemType::I64);
  EXPECT_EQ(n.data, (std::vector<double>{8}));
  auto minus1 = ints({-1}, {1}), n1 = ints({8}, {1});
  tdl::DenseTensor cat = fold1("Concat", {&n1, &minus1}, axis0);
  EXPECT_EQ(cat.type.elem, tdl::ElemType::I64);
  EXPECT_EQ(cat.data, (std::vector<double>{8, -1}));
}

TEST(ConstantFolding, LargeResultsAreNotFolded) {
  auto shape = ints({1024, 1024}, {2});
  std::vector<const tdl::DenseTensor *> inputs = {&shape};
  auto result = foldOp("ConstantOfShape", {}, {shape.type}, inputs, nullptr, 1);
  ASSERT_TRUE(bool(result));
  EXPECT_FALSE(result->has_value());
}

// ONNX's CenterCropPad function pads to Max(Shape(x), shape).
TEST(ConstantFolding, MaxAndMinOfShapes) {
  auto a = ints({10, 7, 3}, {3});
  auto b = ints({8, 9, 3}, {3});
  tdl::DenseTensor max = fold1("Max", {&a, &b});
  EXPECT_EQ(max.data, (std::vector<double>{10, 9, 3}));
  EXPECT_EQ(max.type.elem, tdl::ElemType::I64);
  EXPECT_EQ(fold1("Min", {&a, &b}).data, (std::vector<double>{8, 7, 3}));
}

TEST(ConstantFolding, OnlyListedOpsFold) {
  EXPECT_TRUE(isFoldableOp("Shape"));
  EXPECT_TRUE(isFoldableOp("Unsqueeze"));
  EXPECT_FALSE(isFoldableOp("MatMul"));
  EXPECT_FALSE(isFoldableOp("Conv"));
  auto a = ints({1}, {1});
  std::vector<const tdl::DenseTensor *> inputs = {&a, &a};
  auto result = foldOp("MatMul", {}, {a.type, a.type}, inputs, nullptr, 1);
  ASSERT_FALSE(bool(result));
  EXPECT_NE(llvm::toString(result.takeError()).find("not on the import-time "
                                                    "foldable list"),
            std::string::npos);
}

} // namespace
