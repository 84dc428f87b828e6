//===- GradientPoolTest.cpp - pooling vs finite differences ---------------===//
//
// The gradient rules of tdl-specs/pool.tdl checked by central differences in
// float64 (GradientCheck.h), over strides, pads, dilations, ceil_mode,
// auto_pad and count_include_pad; plus reference values and halos.
//
//===----------------------------------------------------------------------===//
#include "GradientCheck.h"

using namespace tofu::tdl;
using namespace tofu::tdl::test;

namespace {
AttrValue I(int64_t v) { return AttrValue::ofInt(v); }
AttrValue S(std::string v) { return AttrValue::ofString(std::move(v)); }
} // namespace

TEST(TDLGradientPool, MaxPool) {
  checkGradientFD({"MaxPool", {f32({2, 2, 6})}, {{"kernel_shape", ints({3})}}});
  checkGradientFD({"MaxPool", {f32({1, 2, 5, 5})},
                   {{"kernel_shape", ints({3, 2})}, {"strides", ints({2, 1})},
                    {"pads", ints({1, 0, 1, 1})}}});
  checkGradientFD({"MaxPool", {f32({1, 1, 6, 5})},
                   {{"kernel_shape", ints({2, 2})}, {"strides", ints({2, 2})},
                    {"dilations", ints({2, 1})}, {"ceil_mode", I(1)}}});
  checkGradientFD({"MaxPool", {f32({1, 2, 5, 4})},
                   {{"kernel_shape", ints({2, 3})}, {"strides", ints({2, 2})},
                    {"auto_pad", S("SAME_LOWER")}}});
}

TEST(TDLGradientPool, AveragePool) {
  for (int cip : {0, 1}) {
    SCOPED_TRACE("count_include_pad=" + std::to_string(cip));
    checkGradientFD({"AveragePool", {f32({2, 2, 6})},
                     {{"kernel_shape", ints({3})}, {"count_include_pad", I(cip)}}});
    checkGradientFD({"AveragePool", {f32({1, 2, 5, 5})},
                     {{"kernel_shape", ints({3, 2})}, {"strides", ints({2, 1})},
                      {"pads", ints({1, 0, 1, 1})},
                      {"count_include_pad", I(cip)}}});
    checkGradientFD({"AveragePool", {f32({1, 1, 6, 5})},
                     {{"kernel_shape", ints({2, 3})}, {"strides", ints({2, 2})},
                      {"dilations", ints({2, 1})}, {"pads", ints({0, 1, 1, 1})},
                      {"ceil_mode", I(1)}, {"count_include_pad", I(cip)}}});
    checkGradientFD({"AveragePool", {f32({1, 2, 5, 4})},
                     {{"kernel_shape", ints({2, 3})}, {"strides", ints({2, 2})},
                      {"auto_pad", S("SAME_UPPER")},
                      {"count_include_pad", I(cip)}}});
  }
}

TEST(TDLGradientPool, GlobalPools) {
  checkGradientFD({"GlobalAveragePool", {f32({2, 3, 4})}});
  checkGradientFD({"GlobalAveragePool", {f32({1, 2, 3, 2})}});
  checkGradientFD({"GlobalMaxPool", {f32({2, 2, 3, 2})}});
}

TEST(TDLGradientPool, ShapesAndValues) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  using V = std::vector<int64_t>;
  auto shapeOf = [&](const char *op, V in, AttrMap a) {
    return mustInstantiate(lib, op, {f32(in)}, a).outputTypes()[0].dims;
  };
  // ceil_mode: (4 - 3 + 1) / 2 + 1 = 2.
  EXPECT_EQ(shapeOf("MaxPool", {1, 1, 4, 4},
                    {{"kernel_shape", ints({3, 3})}, {"strides", ints({2, 2})},
                     {"ceil_mode", I(1)}}),
            (V{1, 1, 2, 2}));
  // A ceil_mode window that would start in the end padding is dropped:
  // in 5, k 2, s 2, pads 1/1: ceil((5 + 2 - 2) / 2) + 1 = 4, but window 3
  // starts at 6 - 1 = 5 >= 5, so 3.
  EXPECT_EQ(shapeOf("AveragePool", {1, 1, 5},
                    {{"kernel_shape", ints({2})}, {"strides", ints({2})},
                     {"pads", ints({1, 1})}, {"ceil_mode", I(1)}}),
            (V{1, 1, 3}));
  EXPECT_EQ(shapeOf("MaxPool", {1, 3, 32, 32},
                    {{"kernel_shape", ints({2, 2})}, {"strides", ints({2, 2})},
                     {"auto_pad", S("SAME_UPPER")}}),
            (V{1, 3, 16, 16}));
  EXPECT_EQ(shapeOf("GlobalAveragePool", {2, 3, 4, 5}, {}), (V{2, 3, 1, 1}));

  // Padding never wins a max; averages count only the cells inside X
  // unless count_include_pad.
  OpInstance mp = mustInstantiate(lib, "MaxPool", {f32({1, 1, 3})},
                                  {{"kernel_shape", ints({3})},
                                   {"pads", ints({1, 1})}});
  DenseTensor x{f32({1, 1, 3}), {-1, -2, -3}};
  auto y = evaluate(mp, {&x});
  ASSERT_TRUE(bool(y)) << llvm::toString(y.takeError());
  EXPECT_EQ((*y)[0].data, (std::vector<double>{-1, -1, -2}));
  for (int cip : {0, 1}) {
    OpInstance ap = mustInstantiate(lib, "AveragePool", {f32({1, 1, 3})},
                                    {{"kernel_shape", ints({3})},
                                     {"pads", ints({1, 1})},
                                     {"count_include_pad", I(cip)}});
    auto a = evaluate(ap, {&x});
    ASSERT_TRUE(bool(a)) << llvm::toString(a.takeError());
    EXPECT_NEAR((*a)[0].data[0], cip ? -3.0 / 3 : -3.0 / 2, 1e-12);
    EXPECT_NEAR((*a)[0].data[1], -2, 1e-12);
  }
}

TEST(TDLGradientPool, SplitsWithHalos) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  OpInstance mp = mustInstantiate(lib, "MaxPool", {f32({2, 4, 8, 8})},
                                  {{"kernel_shape", ints({3, 3})},
                                   {"pads", ints({1, 1, 1, 1})}});
  auto s = analyzeStrategies(mp);
  ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
  // Per output (Y, Indices): batch, channels, both spatial dims.
  ASSERT_EQ(s->size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ((*s)[i].output, i / 4);
    EXPECT_EQ((*s)[i].dim, int64_t(i % 4));
  }
  // Rows [4, 8) of the output need rows [3, 8) of X (halo 1 above).
  auto r = mp.requiredRegions(0, {{0, 2}, {0, 4}, {4, 8}, {0, 8}});
  EXPECT_EQ(r[0]->at(2).lo, 3);
  EXPECT_EQ(r[0]->at(2).hi, 8);
  auto rc = mp.requiredRegions(0, {{0, 2}, {0, 2}, {0, 8}, {0, 8}});
  EXPECT_EQ(rc[0]->at(1).hi, 2);
  OpInstance gap = mustInstantiate(lib, "GlobalAveragePool", {f32({2, 4, 3, 3})});
  EXPECT_EQ(gap.reductionVars(0).size(), 2u);
}

TEST(TDLGradientPool, MaxPoolIndices) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  // Two channels of [[1, 5, 2], [7, 3, 9], [4, 8, 6]]; 2x2 windows, stride 1.
  std::vector<double> plane = {1, 5, 2, 7, 3, 9, 4, 8, 6};
  std::vector<double> data = plane;
  data.insert(data.end(), plane.begin(), plane.end());
  DenseTensor x = tensor(f32({1, 2, 3, 3}), data);
  for (int64_t order : {0, 1}) {
    OpInstance mp = mustInstantiate(lib, "MaxPool", {f32({1, 2, 3, 3})},
                                    {{"kernel_shape", ints({2, 2})},
                                     {"storage_order", AttrValue::ofInt(order)}});
    ASSERT_EQ(mp.outputTypes().size(), 2u);
    EXPECT_EQ(mp.outputTypes()[1].elem, ElemType::I64);
    auto r = evaluate(mp, {&x});
    ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
    EXPECT_EQ((*r)[0].data, (std::vector<double>{7, 9, 8, 9, 7, 9, 8, 9}));
    // Maxima at (1, 0), (1, 2), (2, 1), (1, 2): row-major 3, 5, 7, 5;
    // column-major (w * H + h) 1, 7, 5, 7; channel 1 adds 9.
    std::vector<double> want = order == 0
        ? std::vector<double>{3, 5, 7, 5, 12, 14, 16, 14}
        : std::vector<double>{1, 7, 5, 7, 10, 16, 14, 16};
    EXPECT_EQ((*r)[1].data, want) << "storage_order " << order;
  }
  // Padding never wins, even over negative values; ties pick the first.
  OpInstance p = mustInstantiate(lib, "MaxPool", {f32({1, 1, 4})},
                                 {{"kernel_shape", ints({2})},
                                  {"pads", ints({1, 1})},
                                  {"strides", ints({2})}});
  DenseTensor y = tensor(f32({1, 1, 4}), {-5, -1, -1, -3});
  auto r = evaluate(p, {&y});
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_EQ((*r)[0].data, (std::vector<double>{-5, -1, -3}));
  EXPECT_EQ((*r)[1].data, (std::vector<double>{0, 1, 3}));
  EXPECT_NE(instantiateError(lib, "MaxPool", {f32({1, 1, 4})},
                             {{"kernel_shape", ints({2})},
                              {"storage_order", AttrValue::ofInt(2)}})
                .find("storage_order must be 0 (row major) or 1"),
            std::string::npos);
}
