//===- ConversionTest.cpp - OnnxConversion and the node-test comparison ---===//
//
// GoogleTests of the importer's public conversions (attributes, element
// types, TensorProto contents) and of the runner's output comparison.
//
//===----------------------------------------------------------------------===//
#include "Compare.h"

#include "tofu/Import/OnnxConversion.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>

using namespace tofu;

namespace {

std::string errorText(llvm::Error e) { return llvm::toString(std::move(e)); }

TensorData floats(std::vector<int64_t> dims, std::vector<float> values) {
  TensorData t;
  t.type.dims = std::move(dims);
  t.type.elem = tdl::ElemType::F32;
  t.bytes.resize(values.size() * 4);
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

TEST(OnnxConversion, Attributes) {
  onnx::NodeProto node;
  node.set_op_type("Gemm");
  auto *a = node.add_attribute();
  a->set_name("alpha");
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(0.5f);
  a = node.add_attribute();
  a->set_name("transA");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(1);
  a = node.add_attribute();
  a->set_name("perm");
  a->set_type(onnx::AttributeProto::INTS);
  a->add_ints(1);
  a->add_ints(0);
  a = node.add_attribute();
  a->set_name("mode");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("constant");
  auto attrs = convertOnnxAttributes(node, "g");
  ASSERT_TRUE(static_cast<bool>(attrs)) << errorText(attrs.takeError());
  EXPECT_EQ(attrs->at("alpha").kind, tdl::AttrValue::Kind::Float);
  EXPECT_DOUBLE_EQ(attrs->at("alpha").f, 0.5);
  EXPECT_EQ(attrs->at("transA").i, 1);
  EXPECT_EQ(attrs->at("perm").ints, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(attrs->at("mode").s, "constant");

  a = node.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  auto bad = convertOnnxAttributes(node, "g");
  ASSERT_FALSE(static_cast<bool>(bad));
  std::string e = errorText(bad.takeError());
  EXPECT_NE(e.find("node 'g' (Gemm)"), std::string::npos) << e;
  EXPECT_NE(e.find("attribute 'value' has kind TENSOR"), std::string::npos)
      << e;
}

TEST(OnnxConversion, ElemTypes) {
  auto f = convertOnnxElemType(onnx::TensorProto::FLOAT, "x");
  ASSERT_TRUE(static_cast<bool>(f));
  EXPECT_EQ(*f, tdl::ElemType::F32);
  auto i = convertOnnxElemType(onnx::TensorProto::INT64, "x");
  ASSERT_TRUE(static_cast<bool>(i));
  EXPECT_EQ(*i, tdl::ElemType::I64);
  auto b = convertOnnxElemType(onnx::TensorProto::BOOL, "x");
  if (tdlBoolElemType()) {
    ASSERT_TRUE(static_cast<bool>(b));
    EXPECT_TRUE(isBoolElemType(*b));
  } else {
    EXPECT_FALSE(static_cast<bool>(b));
    llvm::consumeError(b.takeError());
  }
  const std::pair<int, tdl::ElemType> more[] = {
      {onnx::TensorProto::DOUBLE, tdl::ElemType::F64},
      {onnx::TensorProto::FLOAT16, tdl::ElemType::F16},
      {onnx::TensorProto::BFLOAT16, tdl::ElemType::BF16},
      {onnx::TensorProto::INT32, tdl::ElemType::I32},
      {onnx::TensorProto::INT16, tdl::ElemType::I16},
      {onnx::TensorProto::INT8, tdl::ElemType::I8},
      {onnx::TensorProto::UINT8, tdl::ElemType::U8},
      {onnx::TensorProto::UINT16, tdl::ElemType::U16},
      {onnx::TensorProto::UINT32, tdl::ElemType::U32},
      {onnx::TensorProto::UINT64, tdl::ElemType::U64}};
  for (auto [code, elem] : more) {
    auto t = convertOnnxElemType(code, "x");
    ASSERT_TRUE(static_cast<bool>(t)) << errorText(t.takeError());
    EXPECT_EQ(*t, elem);
  }
  auto d = convertOnnxElemType(onnx::TensorProto::STRING, "input 'x'");
  ASSERT_FALSE(static_cast<bool>(d));
  std::string e = errorText(d.takeError());
  EXPECT_NE(e.find("input 'x' has ONNX element type STRING, which is not "
                   "supported"),
            std::string::npos)
      << e;
}

TEST(OnnxConversion, TypedFieldsOfEveryType) {
  // int32_data carries the small integers and the 16-bit floats' bits;
  // uint64_data uint32/uint64; double_data doubles.
  onnx::TensorProto u8;
  u8.set_data_type(onnx::TensorProto::UINT8);
  u8.add_dims(3);
  for (int v : {1, 255, 7})
    u8.add_int32_data(v);
  auto a = convertOnnxTensor(u8, "u8");
  ASSERT_TRUE(static_cast<bool>(a)) << errorText(a.takeError());
  EXPECT_EQ(a->bytes, (std::vector<uint8_t>{1, 255, 7}));
  EXPECT_EQ(a->valueAt(1), 255.0);
  onnx::TensorProto i8;
  i8.set_data_type(onnx::TensorProto::INT8);
  i8.add_dims(2);
  i8.add_int32_data(-3);
  i8.add_int32_data(100);
  auto b = convertOnnxTensor(i8, "i8");
  ASSERT_TRUE(static_cast<bool>(b)) << errorText(b.takeError());
  EXPECT_EQ(b->valueAt(0), -3.0);
  EXPECT_EQ(b->valueAt(1), 100.0);
  onnx::TensorProto h;
  h.set_data_type(onnx::TensorProto::FLOAT16);
  h.add_dims(1);
  h.add_int32_data(0xc200); // -3.0
  auto c = convertOnnxTensor(h, "h");
  ASSERT_TRUE(static_cast<bool>(c)) << errorText(c.takeError());
  EXPECT_EQ(c->valueAt(0), -3.0);
  onnx::TensorProto d64;
  d64.set_data_type(onnx::TensorProto::DOUBLE);
  d64.add_dims(2);
  d64.add_double_data(0.1);
  d64.add_double_data(-1e300);
  auto e64 = convertOnnxTensor(d64, "d");
  ASSERT_TRUE(static_cast<bool>(e64)) << errorText(e64.takeError());
  EXPECT_EQ(e64->valueAt(0), 0.1);
  EXPECT_EQ(e64->valueAt(1), -1e300);
  onnx::TensorProto u32;
  u32.set_data_type(onnx::TensorProto::UINT32);
  u32.add_dims(1);
  u32.add_uint64_data(4000000000u);
  auto f = convertOnnxTensor(u32, "u32");
  ASSERT_TRUE(static_cast<bool>(f)) << errorText(f.takeError());
  EXPECT_EQ(f->bytes.size(), 4u);
  EXPECT_EQ(f->valueAt(0), 4e9);
  onnx::TensorProto short16;
  short16.set_data_type(onnx::TensorProto::INT16);
  short16.add_dims(2);
  short16.add_int32_data(1);
  auto g = convertOnnxTensor(short16, "s");
  ASSERT_FALSE(static_cast<bool>(g));
  EXPECT_NE(errorText(g.takeError()).find("holds 1 int32_data values"),
            std::string::npos);
}

TEST(OnnxConversion, TensorRawAndTyped) {
  onnx::TensorProto raw;
  raw.set_data_type(onnx::TensorProto::FLOAT);
  raw.add_dims(2);
  float values[2] = {1.5f, -2.0f};
  raw.set_raw_data(std::string(reinterpret_cast<char *>(values), 8));
  auto r = convertOnnxTensor(raw, "t");
  ASSERT_TRUE(static_cast<bool>(r)) << errorText(r.takeError());
  EXPECT_EQ(r->numElements(), 2);
  EXPECT_EQ(r->valueAt(1), -2.0);

  onnx::TensorProto typed;
  typed.set_data_type(onnx::TensorProto::INT64);
  typed.add_dims(3);
  typed.add_int64_data(7);
  typed.add_int64_data(-1);
  typed.add_int64_data(1LL << 40);
  auto t = convertOnnxTensor(typed, "t");
  ASSERT_TRUE(static_cast<bool>(t)) << errorText(t.takeError());
  EXPECT_EQ(t->bytes.size(), 24u);
  EXPECT_EQ(t->valueAt(2), double(1LL << 40));

  typed.add_int64_data(3); // one too many
  auto bad = convertOnnxTensor(typed, "initializer 'w'");
  ASSERT_FALSE(static_cast<bool>(bad));
  std::string e = errorText(bad.takeError());
  EXPECT_NE(e.find("initializer 'w' holds 4 int64 values but its shape needs 3"),
            std::string::npos)
      << e;

  raw.set_raw_data("abc");
  auto short_ = convertOnnxTensor(raw, "t");
  ASSERT_FALSE(static_cast<bool>(short_));
  e = errorText(short_.takeError());
  EXPECT_NE(e.find("holds 3 bytes of data but its shape needs 8"),
            std::string::npos)
      << e;
}

TEST(OnnxConversion, BoolTensor) {
  if (!tdlBoolElemType())
    GTEST_SKIP() << "the TDL library has no Bool element type";
  onnx::TensorProto typed;
  typed.set_data_type(onnx::TensorProto::BOOL);
  typed.add_dims(3);
  typed.add_int32_data(1);
  typed.add_int32_data(0);
  typed.add_int32_data(5);
  auto t = convertOnnxTensor(typed, "b");
  ASSERT_TRUE(static_cast<bool>(t)) << errorText(t.takeError());
  EXPECT_EQ(t->bytes, (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(elemTypeBytes(t->type.elem), 1u);
}

TEST(NodeTestCompare, Tolerance) {
  using tofu::nodetest::compareTensors;
  TensorData e = floats({3}, {1.0f, NAN, INFINITY});
  EXPECT_EQ(compareTensors(floats({3}, {1.0005f, NAN, INFINITY}), e, "y"), "");
  std::string msg = compareTensors(floats({3}, {1.002f, NAN, INFINITY}), e, "y");
  EXPECT_NE(msg.find("worst at [0]"), std::string::npos) << msg;
  msg = compareTensors(floats({3}, {1.0f, 0.0f, INFINITY}), e, "y");
  EXPECT_NE(msg.find("worst at [1]: got 0, expected nan"), std::string::npos)
      << msg;
  msg = compareTensors(floats({3}, {1.0f, NAN, -INFINITY}), e, "y");
  EXPECT_NE(msg.find("worst at [2]"), std::string::npos) << msg;
  msg = compareTensors(floats({1, 3}, {1.0f, NAN, INFINITY}), e, "y");
  EXPECT_NE(msg.find("shape [1x3], expected [3]"), std::string::npos) << msg;
  // atol alone near zero.
  EXPECT_EQ(compareTensors(floats({1}, {5e-8f}), floats({1}, {0.0f}), "y"), "");
  EXPECT_NE(compareTensors(floats({1}, {5e-7f}), floats({1}, {0.0f}), "y"), "");
}

TEST(NodeTestCompare, IntegersExact) {
  using tofu::nodetest::compareTensors;
  TensorData a, b;
  a.type = {{2}, tdl::ElemType::I64};
  int64_t av[2] = {3, 1000000};
  a.bytes.assign(reinterpret_cast<uint8_t *>(av),
                 reinterpret_cast<uint8_t *>(av) + 16);
  b = a;
  EXPECT_EQ(compareTensors(a, b, "y"), "");
  av[1] = 1000001;
  a.bytes.assign(reinterpret_cast<uint8_t *>(av),
                 reinterpret_cast<uint8_t *>(av) + 16);
  std::string msg = compareTensors(a, b, "y");
  EXPECT_NE(msg.find("worst at [1]: got 1000001, expected 1000000"),
            std::string::npos)
      << msg;
  EXPECT_NE(compareTensors(floats({2}, {3, 1000000}), b, "y").find(
                "element type f32, expected i64"),
            std::string::npos);
}

} // namespace
