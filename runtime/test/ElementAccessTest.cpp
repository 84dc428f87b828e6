//===- ElementAccessTest.cpp - Element types and their conversions --------===//
//
// The plan's element types (sizes, names), the float16/bfloat16 rounding
// (exhaustively: every representable value round-trips and every midpoint
// between neighbours rounds to the even one), integer wrap-around, and the
// interpreter and executor on the new types: uint8 arithmetic wraps,
// float64 keeps its precision, float16 rounds, and the native kernels never
// see a type they were not written for; bfloat16 runs natively (float32
// math, one rounding; the bit-level float32 <-> bf16 conversions equal the
// double ones).
//
//===----------------------------------------------------------------------===//

#include "tofu/runtime/ComputeKernel.h"
#include "tofu/runtime/ElementAccess.h"
#include "tofu/runtime/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

using namespace tofu::runtime;
using namespace tofu::plan;

namespace {

TEST(DType, SizesAndNames) {
  const std::vector<std::pair<DType, uint64_t>> sizes = {
      {DType::F32, 4}, {DType::I64, 8}, {DType::Bool, 1}, {DType::F64, 8},
      {DType::I32, 4}, {DType::I16, 2}, {DType::I8, 1},   {DType::U8, 1},
      {DType::U16, 2}, {DType::U32, 4}, {DType::U64, 8},  {DType::F16, 2},
      {DType::BF16, 2}};
  ASSERT_EQ(sizes.size(), kNumDTypes);
  for (auto [type, size] : sizes) {
    EXPECT_EQ(dtypeSize(type), size) << dtypeNumpyName(type);
    EXPECT_TRUE(isValidDType(static_cast<uint8_t>(type)));
  }
  EXPECT_FALSE(isValidDType(kNumDTypes));
  EXPECT_STREQ(dtypeNumpyName(DType::F16), "float16");
  EXPECT_STREQ(dtypeNumpyName(DType::BF16), "bfloat16");
  EXPECT_STREQ(dtypeNumpyName(DType::U8), "uint8");
  EXPECT_TRUE(isFloatDType(DType::BF16));
  EXPECT_FALSE(isFloatDType(DType::I8));
  EXPECT_TRUE(isIntegerDType(DType::U64));
  EXPECT_FALSE(isIntegerDType(DType::Bool));
  EXPECT_TRUE(isUnsignedDType(DType::U16));
  EXPECT_FALSE(isUnsignedDType(DType::I16));
}

TEST(Float16, KnownValues) {
  EXPECT_EQ(doubleToHalf(1.0), 0x3c00);
  EXPECT_EQ(doubleToHalf(-2.0), 0xc000);
  EXPECT_EQ(doubleToHalf(0.1), 0x2e66); // 0.0999755859375
  EXPECT_EQ(doubleToHalf(65504.0), 0x7bff);
  EXPECT_EQ(doubleToHalf(65519.99), 0x7bff);
  EXPECT_EQ(doubleToHalf(65520.0), 0x7c00); // halfway to 2^16: to infinity
  EXPECT_EQ(doubleToHalf(1e10), 0x7c00);
  EXPECT_EQ(doubleToHalf(-HUGE_VAL), 0xfc00);
  EXPECT_EQ(doubleToHalf(-0.0), 0x8000);
  EXPECT_EQ(doubleToHalf(std::ldexp(1.0, -24)), 0x0001); // smallest subnormal
  EXPECT_EQ(doubleToHalf(std::ldexp(1.0, -25)), 0x0000); // tie: to even 0
  EXPECT_EQ(doubleToHalf(std::ldexp(1.5, -25)), 0x0001);
  EXPECT_EQ(doubleToHalf(std::ldexp(3.0, -25)), 0x0002); // 1.5 units: to 2
  EXPECT_EQ(doubleToHalf(std::ldexp(1.0, -14)), 0x0400); // smallest normal
  EXPECT_EQ(doubleToHalf(std::ldexp(1023.5, -24)), 0x0400); // carry to normal
  EXPECT_EQ(doubleToHalf(1.0 + std::ldexp(1.0, -11)), 0x3c00); // tie: even
  EXPECT_EQ(doubleToHalf(1.0 + std::ldexp(3.0, -11)), 0x3c02); // tie: even
  EXPECT_EQ(doubleToHalf(2047.5), 0x6800); // 2048, the carry bumps the exponent
  uint16_t nan = doubleToHalf(std::nan(""));
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_TRUE(std::isnan(halfToDouble(nan)));
  EXPECT_EQ(halfToDouble(0x3555), 0.333251953125);
  EXPECT_EQ(halfToDouble(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(halfToDouble(0xfbff), -65504.0);
  EXPECT_EQ(halfToDouble(0x7c00), HUGE_VAL);
}

/// Every finite value of a 16-bit format round-trips, and the midpoint of
/// each pair of neighbours rounds to the one with an even mantissa (and a
/// hair off the midpoint to the nearer one).
template <typename Encode, typename Decode>
void checkExhaustively(Encode encode, Decode decode, uint32_t infBits) {
  for (uint32_t h = 0; h < infBits; ++h) {
    for (uint32_t sign : {0u, 0x8000u}) {
      uint32_t bits = h | sign;
      double v = decode(static_cast<uint16_t>(bits));
      ASSERT_EQ(encode(v), bits) << std::hex << bits;
    }
    double lo = decode(static_cast<uint16_t>(h));
    double hi = decode(static_cast<uint16_t>(h + 1)); // h + 1 may be inf
    double mid = h + 1 == infBits ? lo + (lo - decode(static_cast<uint16_t>(
                                                     h - 1))) / 2
                                  : (lo + hi) / 2;
    uint32_t even = (h & 1) ? h + 1 : h;
    ASSERT_EQ(encode(mid), even) << std::hex << h;
    ASSERT_EQ(encode(-mid), even | 0x8000) << std::hex << h;
    ASSERT_EQ(encode(std::nextafter(mid, 0.0)), h) << std::hex << h;
    ASSERT_EQ(encode(std::nextafter(mid, HUGE_VAL)), h + 1) << std::hex << h;
  }
}

TEST(Float16, ExhaustiveRoundingToNearestEven) {
  checkExhaustively(doubleToHalf, halfToDouble, 0x7c00);
}

TEST(BFloat16, ExhaustiveRoundingToNearestEven) {
  checkExhaustively(doubleToBFloat16, bfloat16ToDouble, 0x7f80);
  EXPECT_EQ(doubleToBFloat16(1.0), 0x3f80);
  EXPECT_EQ(doubleToBFloat16(3.140625), 0x4049);
  EXPECT_EQ(doubleToBFloat16(1e39), 0x7f80);
}

#if defined(__FLT16_MAX__)
TEST(Float16, AgreesWithTheCompilersFloat16) {
  // Float32 bit patterns in steps of 4099 (all exponents, many mantissas).
  for (uint64_t bits = 0; bits < (uint64_t(1) << 32); bits += 4099) {
    uint32_t b = static_cast<uint32_t>(bits);
    float f;
    std::memcpy(&f, &b, 4);
    if (std::isnan(f))
      continue;
    _Float16 h = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &h, 2);
    ASSERT_EQ(doubleToHalf(f), want) << std::hex << b;
  }
}
#endif

TEST(StoreElement, IntegersTruncateAndWrap) {
  uint8_t u8[4];
  storeElement(u8, DType::U8, 0, 260);  // 250 + 10 in numpy's uint8
  storeElement(u8, DType::U8, 1, -2);   // 3 - 5
  storeElement(u8, DType::U8, 2, 3.99); // truncation
  storeElement(u8, DType::U8, 3, std::nan(""));
  EXPECT_EQ(u8[0], 4);
  EXPECT_EQ(u8[1], 254);
  EXPECT_EQ(u8[2], 3);
  EXPECT_EQ(u8[3], 0);
  int8_t i8[3];
  storeElement(i8, DType::I8, 0, 200);
  storeElement(i8, DType::I8, 1, -3.7);
  storeElement(i8, DType::I8, 2, -128);
  EXPECT_EQ(i8[0], -56);
  EXPECT_EQ(i8[1], -3);
  EXPECT_EQ(i8[2], -128);
  int32_t i32;
  storeElement(&i32, DType::I32, 0, 3e9);
  EXPECT_EQ(i32, static_cast<int32_t>(3000000000u));
  uint64_t u64;
  storeElement(&u64, DType::U64, 0, 9223372036854775808.0);
  EXPECT_EQ(u64, uint64_t(1) << 63);
  storeElement(&u64, DType::U64, 0, -1);
  EXPECT_EQ(u64, ~uint64_t(0));
  int64_t i64;
  storeElement(&i64, DType::I64, 0, 1e30);
  EXPECT_EQ(i64, std::numeric_limits<int64_t>::max());
  uint16_t u16;
  storeElement(&u16, DType::U16, 0, 65537);
  EXPECT_EQ(u16, 1);
  EXPECT_EQ(loadElement(&u16, DType::U16, 0), 1.0);
  EXPECT_EQ(loadElement(i8, DType::I8, 0), -56.0);
  uint8_t b = 0;
  storeElement(&b, DType::Bool, 0, std::nan(""));
  EXPECT_EQ(b, 1);
}

TEST(LoadElement, EveryTypeReadsItsBytes) {
  double d = 1.0 + 1e-12;
  EXPECT_EQ(loadElement(&d, DType::F64, 0), 1.0 + 1e-12);
  uint16_t h[2] = {0x3c00, 0xc200};
  EXPECT_EQ(loadElement(h, DType::F16, 1), -3.0);
  uint16_t bf = 0xbf80;
  EXPECT_EQ(loadElement(&bf, DType::BF16, 0), -1.0);
  int16_t s = -300;
  EXPECT_EQ(loadElement(&s, DType::I16, 0), -300.0);
  uint32_t u = 4000000000u;
  EXPECT_EQ(loadElement(&u, DType::U32, 0), 4e9);
}

/// Y[i] = X0[i] `op` X1[i].
ExprProgram binaryProgram(int64_t n, BinaryOp op) {
  ExprProgram p;
  p.varExtents = {n};
  ExprNode var;
  var.kind = ExprNode::Kind::Var;
  var.var = 0;
  p.nodes.push_back(var); // 0
  for (int32_t input : {0, 1}) {
    ExprNode access;
    access.kind = ExprNode::Kind::Access;
    access.input = input;
    access.operands = {0};
    p.nodes.push_back(access); // 1, 2
  }
  ExprNode bin;
  bin.kind = ExprNode::Kind::Binary;
  bin.binary = op;
  bin.operands = {1, 2};
  p.nodes.push_back(bin);
  p.root = 3;
  p.outputVars = {0};
  return p;
}

TEST(Interpreter, Uint8ArithmeticWraps) {
  std::vector<uint8_t> a = {250, 3, 200, 7}, b = {10, 5, 200, 2}, y(4);
  std::vector<TensorView> in = {TensorView::whole(a.data(), DType::U8, {4}),
                                TensorView::whole(b.data(), DType::U8, {4})};
  ASSERT_EQ(runCompute("Add", {}, in,
                       {TensorView::whole(y.data(), DType::U8, {4})},
                       {binaryProgram(4, BinaryOp::Add)}, {}),
            "");
  EXPECT_EQ(y, (std::vector<uint8_t>{4, 8, 144, 9}));
  ASSERT_EQ(runCompute("Sub", {}, in,
                       {TensorView::whole(y.data(), DType::U8, {4})},
                       {binaryProgram(4, BinaryOp::Sub)}, {}),
            "");
  EXPECT_EQ(y, (std::vector<uint8_t>{240, 254, 0, 5}));
  ASSERT_EQ(runCompute("Mul", {}, in,
                       {TensorView::whole(y.data(), DType::U8, {4})},
                       {binaryProgram(4, BinaryOp::Mul)}, {}),
            "");
  EXPECT_EQ(y, (std::vector<uint8_t>{196, 15, 64, 14}));
}

TEST(Interpreter, IntegerDivisionTruncates) {
  std::vector<int32_t> a = {7, -7, 7, -7}, b = {2, 2, -2, -2}, y(4);
  ASSERT_EQ(runCompute("Div", {},
                       {TensorView::whole(a.data(), DType::I32, {4}),
                        TensorView::whole(b.data(), DType::I32, {4})},
                       {TensorView::whole(y.data(), DType::I32, {4})},
                       {binaryProgram(4, BinaryOp::Div)}, {}),
            "");
  EXPECT_EQ(y, (std::vector<int32_t>{3, -3, -3, 3}));
}

TEST(Interpreter, Float64KeepsItsPrecisionAndFloat16Rounds) {
  std::vector<double> a = {1.0, 1e-300}, b = {1e-12, 3.0}, y(2);
  ComputePath used;
  ASSERT_EQ(runCompute("Add", {},
                       {TensorView::whole(a.data(), DType::F64, {2}),
                        TensorView::whole(b.data(), DType::F64, {2})},
                       {TensorView::whole(y.data(), DType::F64, {2})},
                       {binaryProgram(2, BinaryOp::Add)}, {},
                       ComputePath::Auto, &used),
            "");
  if (!nativeKernelsHandle(DType::F64))
    EXPECT_EQ(used, ComputePath::Interpreter); // never the float32 kernel
  EXPECT_EQ(y[0], 1.0 + 1e-12);
  EXPECT_EQ(y[1], 3.0);
  std::vector<uint16_t> h = {doubleToHalf(1.0), doubleToHalf(2048.0)},
                        k = {doubleToHalf(std::ldexp(1.0, -11)),
                             doubleToHalf(3.0)},
                        z(2);
  ASSERT_EQ(runCompute("Add", {},
                       {TensorView::whole(h.data(), DType::F16, {2}),
                        TensorView::whole(k.data(), DType::F16, {2})},
                       {TensorView::whole(z.data(), DType::F16, {2})},
                       {binaryProgram(2, BinaryOp::Add)}, {}),
            "");
  EXPECT_EQ(halfToDouble(z[0]), 1.0);    // 1 + 2^-11: tie, to even
  EXPECT_EQ(halfToDouble(z[1]), 2052.0); // 2051: tie between 2050 and 2052
}

TEST(ComputeKernel, NativeKernelsNeverSeeNewTypes) {
  // Add has a native float32 kernel; int32 operands go to the interpreter,
  // and asking for the native path names the type.
  ASSERT_TRUE(hasNativeKernel("Add"));
  ASSERT_FALSE(nativeKernelsHandle(DType::I32));
  std::vector<int32_t> a = {1, 2}, b = {3, -4}, y(2);
  std::vector<TensorView> in = {TensorView::whole(a.data(), DType::I32, {2}),
                                TensorView::whole(b.data(), DType::I32, {2})};
  std::vector<TensorView> out = {TensorView::whole(y.data(), DType::I32, {2})};
  ComputePath used;
  ASSERT_EQ(runCompute("Add", {}, in, out, {binaryProgram(2, BinaryOp::Add)},
                       {}, ComputePath::Auto, &used),
            "");
  EXPECT_EQ(used, ComputePath::Interpreter);
  EXPECT_EQ(y, (std::vector<int32_t>{4, -2}));
  std::string err = runCompute("Add", {}, in, out,
                               {binaryProgram(2, BinaryOp::Add)}, {},
                               ComputePath::Native);
  EXPECT_NE(err.find("not int32"), std::string::npos) << err;
  err = runCompute("Add", {}, in, out, {}, {});
  EXPECT_NE(err.find("not int32"), std::string::npos) << err;
  EXPECT_NE(err.find("no expression program"), std::string::npos) << err;
}

} // namespace

namespace {

/// The float with bit pattern `u`.
float floatOfBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(BFloat16, FloatConversionIsTheDoubleRounding) {
  // floatToBFloat16 (the bit trick of the bf16 kernels and Cast) equals
  // doubleToBFloat16 (the interpreter's rounding) on a sweep of float bit
  // patterns and on the edges: ties to even, the largest finite values
  // (which round to infinity), subnormals, zeros, infinities and NaNs.
  std::vector<uint32_t> bits = {0x00000000, 0x80000000, 0x00000001,
                                0x00008000, 0x00018000, 0x007fffff,
                                0x00800000, 0x3f808000, 0x3f818000,
                                0x3f807fff, 0x3f808001, 0x7f7f7fff,
                                0x7f7f8000, 0x7f7fffff, 0xff7fffff,
                                0x7f800000, 0xff800000, 0x7fc00000,
                                0xffc00001, 0x7f800001};
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 65521)
    bits.push_back(static_cast<uint32_t>(u));
  for (uint32_t u : bits) {
    const float f = floatOfBits(u);
    EXPECT_EQ(floatToBFloat16(f), doubleToBFloat16(f)) << std::hex << u;
  }
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const double expect = bfloat16ToDouble(static_cast<uint16_t>(h));
    const float got = bfloat16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(expect))
      EXPECT_TRUE(std::isnan(got)) << std::hex << h;
    else
      EXPECT_EQ(static_cast<double>(got), expect) << std::hex << h;
  }
}

TEST(BFloat16, MatMulRunsNativeInFloat32AndRoundsOnce) {
  // [1, 2, 3] x [1, 2^-7, 2^-8]^T = 1 + 3.5 * 2^-7, a tie between the bf16
  // neighbours 1 + 3 * 2^-7 and 1 + 4 * 2^-7: the float32 sum is exact and
  // rounds once, to the even one (1.03125). A kernel that rounded each
  // product or partial sum to bf16 would give 1 + 2^-7 + ... = 1.0234375.
  std::vector<uint16_t> a = {doubleToBFloat16(1), doubleToBFloat16(2),
                             doubleToBFloat16(3)},
                        b = {doubleToBFloat16(1),
                             doubleToBFloat16(std::ldexp(1.0, -7)),
                             doubleToBFloat16(std::ldexp(1.0, -8))},
                        y = {0};
  ComputePath used = ComputePath::Interpreter;
  ASSERT_EQ(runCompute("MatMul", {},
                       {TensorView::whole(a.data(), DType::BF16, {1, 3}),
                        TensorView::whole(b.data(), DType::BF16, {3, 1})},
                       {TensorView::whole(y.data(), DType::BF16, {1, 1})}, {},
                       {}, ComputePath::Native, &used),
            "");
  EXPECT_EQ(used, ComputePath::Native);
  EXPECT_EQ(bfloat16ToDouble(y[0]), 1.03125);
}

TEST(BFloat16, CastBetweenFloat32AndBFloat16IsNative) {
  std::vector<float> x = {1.0f + std::ldexp(1.0f, -8), -3.0f,
                          1.0f + 3 * std::ldexp(1.0f, -8)},
                     back(3);
  std::vector<uint16_t> h(3);
  std::vector<Attr> to16(1);
  to16[0].name = "to";
  to16[0].kind = Attr::Kind::Int;
  to16[0].i = 16;
  ComputePath used = ComputePath::Interpreter;
  ASSERT_EQ(runCompute("Cast", to16,
                       {TensorView::whole(x.data(), DType::F32, {3})},
                       {TensorView::whole(h.data(), DType::BF16, {3})}, {}, {},
                       ComputePath::Native, &used),
            "");
  EXPECT_EQ(used, ComputePath::Native);
  std::vector<Attr> to1 = to16;
  to1[0].i = 1;
  ASSERT_EQ(runCompute("Cast", to1,
                       {TensorView::whole(h.data(), DType::BF16, {3})},
                       {TensorView::whole(back.data(), DType::F32, {3})}, {},
                       {}, ComputePath::Native, &used),
            "");
  // Ties to even: 1 + 2^-8 -> 1, 1 + 3 * 2^-8 -> 1 + 2^-6.
  EXPECT_EQ(back, (std::vector<float>{1.0f, -3.0f,
                                      1.0f + std::ldexp(1.0f, -6)}));
}

} // namespace
