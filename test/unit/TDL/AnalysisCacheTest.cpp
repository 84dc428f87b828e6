//===- AnalysisCacheTest.cpp - one symbolic analysis per op signature -----===//
//
// A graph with thousands of identical ops (same kind, attributes and ranks,
// different shapes) runs the symbolic interval analysis once; every instance
// gets its own concrete symbol values from the cached intervals.
//
//===----------------------------------------------------------------------===//
#include "TDLTestSupport.h"

using namespace tofu::tdl;
using namespace tofu::tdl::test;

namespace {

TEST(TDLAnalysisCache, ThousandsOfIdenticalOpsAnalyzeOnce) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  AttrMap attrs{{"transB", AttrValue::ofInt(1)}};
  // Warm up the signature, then count.
  OpInstance first = mustInstantiate(lib, "Gemm",
                                     {f32({4, 8}), f32({16, 8}), f32({16})},
                                     attrs);
  ASSERT_TRUE(static_cast<bool>(analyzeStrategies(first)));
  uint64_t before = symbolicAnalysisCount();
  // (Sizes of 1 are left out: a size-1 dimension may broadcast, so which
  // dimensions have size 1 is part of the signature.)
  for (int64_t i = 2; i <= 2001; ++i) {
    OpInstance op = mustInstantiate(
        lib, "Gemm", {f32({i, 8 + i % 7}), f32({16, 8 + i % 7}), f32({16})},
        attrs);
    auto strategies = analyzeStrategies(op);
    ASSERT_TRUE(static_cast<bool>(strategies));
    // The instance's own extents, not the first instance's.
    ASSERT_EQ((*strategies)[0].symbolValues[0], i);
  }
  EXPECT_EQ(symbolicAnalysisCount(), before);

  // A different signature (attributes no other test uses) is analyzed once
  // more.
  OpInstance other = mustInstantiate(
      lib, "Gemm", {f32({8, 4}), f32({8, 16}), f32({16})},
      {{"transA", AttrValue::ofInt(1)}, {"alpha", AttrValue::ofFloat(0.375)}});
  ASSERT_TRUE(static_cast<bool>(analyzeStrategies(other)));
  EXPECT_EQ(symbolicAnalysisCount(), before + 1);
}

} // namespace
