//===- GradientResizeTest.cpp - ResizeNearest: values and gradient --------===//
//
// ResizeNearest (the form of ONNX Resize/Upsample nearest by whole factors)
// against hand-computed values, its shape errors, and its gradient rule
// (ResizeNearestGrad: each output element summed into its source) against
// central differences in float64.
//
//===----------------------------------------------------------------------===//
#include "GradientCheck.h"

using namespace tofu::tdl;
using namespace tofu::tdl::test;

TEST(TDLResize, NearestValues) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  OpInstance inst = mustInstantiate(lib, "ResizeNearest", {f32({1, 2, 2})},
                                    {{"factors", ints({1, 2, 3})}});
  ASSERT_EQ(inst.outputTypes()[0].dims, (std::vector<int64_t>{1, 4, 6}));
  DenseTensor x = tensor(f32({1, 2, 2}), {1, 2, 3, 4});
  auto out = evaluate(inst, {&x});
  ASSERT_TRUE(bool(out)) << errorText(out.takeError());
  EXPECT_EQ((*out)[0].data,
            (std::vector<double>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,
                                 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4}));
  // The same from constant sizes.
  OpInstance sized = mustInstantiate(lib, "ResizeNearest",
                                     {f32({1, 2, 2}), i64({3})}, {},
                                     {{1, {1, 4, 6}}});
  EXPECT_EQ(sized.outputTypes()[0].dims, (std::vector<int64_t>{1, 4, 6}));
}

TEST(TDLResize, NearestErrors) {
  EXPECT_NE(instantiateError(SpecLibrary::builtin(), "ResizeNearest", {f32({2, 2})},
                             {{"factors", ints({2})}}),
            "");
  EXPECT_NE(instantiateError(SpecLibrary::builtin(), "ResizeNearest", {f32({2, 2})},
                             {{"factors", ints({0, 2})}})
                .find("only upsampling by whole factors"),
            std::string::npos);
  EXPECT_NE(instantiateError(SpecLibrary::builtin(), "ResizeNearest", {f32({2, 2}), i64({2})}, {},
                             {{1, {3, 4}}})
                .find("not whole multiples"),
            std::string::npos);
}

TEST(TDLGradientResize, Nearest) {
  checkGradientFD({"ResizeNearest", {f32({1, 2, 3, 2})},
                   {{"factors", ints({1, 1, 2, 3})}}});
  checkGradientFD({"ResizeNearest", {f32({2, 3})}, {{"factors", ints({3, 1})}}});
  checkGradientFD({"ResizeNearest",
                   {f32({1, 1, 2, 2}), i64({4})},
                   {},
                   -1,
                   1,
                   {},
                   {},
                   1e-6,
                   {{1, {1, 1, 4, 6}}}});
}
