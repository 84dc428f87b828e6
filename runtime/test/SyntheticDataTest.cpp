//===- SyntheticDataTest.cpp - Deterministic data, identical for every k --===//

#include "TestPlans.h"
#include "tofu/runtime/SyntheticData.h"

#include <gtest/gtest.h>

#include <set>

using namespace tofu::plan;
using namespace tofu::runtime;
using namespace tofu::test;

namespace {

std::vector<float> inputBox(const SyntheticData &data, int32_t t, Box box,
                            int64_t batch) {
  std::vector<float> v(box.numElements());
  EXPECT_EQ(data.fill(t, box, batch, v.data()), "");
  return v;
}

std::vector<int64_t> labelBox(const SyntheticData &data, int32_t t, Box box,
                              int64_t batch) {
  std::vector<int64_t> v(box.numElements());
  EXPECT_EQ(data.fill(t, box, batch, v.data()), "");
  return v;
}

TEST(SyntheticData, SameBatchForOneAndTwoDevices) {
  Plan plan = makeTwoDevicePlan();
  SyntheticData data(plan);
  for (int64_t batch : {0, 3, 15}) {
    auto full = inputBox(data, kX, {{0, 0}, {4, 4}}, batch);
    auto top = inputBox(data, kX, {{0, 0}, {2, 4}}, batch);
    auto bottom = inputBox(data, kX, {{2, 0}, {4, 4}}, batch);
    top.insert(top.end(), bottom.begin(), bottom.end());
    EXPECT_EQ(top, full);
    // A column split reads the same values too.
    auto cols = inputBox(data, kX, {{0, 1}, {4, 3}}, batch);
    for (int r = 0; r < 4; ++r)
      for (int c = 1; c < 3; ++c)
        EXPECT_EQ(cols[r * 2 + (c - 1)], full[r * 4 + c]);

    auto labels = labelBox(data, kL, {{0}, {4}}, batch);
    auto l0 = labelBox(data, kL, {{0}, {2}}, batch);
    auto l1 = labelBox(data, kL, {{2}, {4}}, batch);
    l0.insert(l0.end(), l1.begin(), l1.end());
    EXPECT_EQ(l0, labels);
  }
}

TEST(SyntheticData, DeterministicAndInRange) {
  Plan plan = makeTwoDevicePlan();
  SyntheticData a(plan), b(plan);
  auto x = inputBox(a, kX, {{0, 0}, {4, 4}}, 5);
  EXPECT_EQ(x, inputBox(b, kX, {{0, 0}, {4, 4}}, 5));
  for (float v : x) {
    EXPECT_GE(v, -1.0f);
    EXPECT_LT(v, 1.0f);
  }
  EXPECT_NE(x, inputBox(a, kX, {{0, 0}, {4, 4}}, 6));
  EXPECT_EQ(SyntheticData::inputValue("X", 5, 7), x[7]);
}

Plan biggerPlan(bool paired) {
  Plan plan;
  TensorInfo x;
  x.name = "features";
  x.shape = {256, 3, 4};
  x.role = TensorRole::Input;
  TensorInfo l;
  l.name = "labels";
  l.dtype = DType::I64;
  l.shape = {256};
  l.role = TensorRole::Label;
  l.numClasses = 5;
  l.pairedInput = paired ? 0 : -1;
  plan.tensors = {x, l};
  return plan;
}

TEST(SyntheticData, TeacherLabelsAreInRangeAndVaried) {
  for (bool paired : {true, false}) {
    Plan plan = biggerPlan(paired);
    SyntheticData data(plan);
    auto labels = labelBox(data, 1, {{0}, {256}}, 2);
    std::set<int64_t> seen(labels.begin(), labels.end());
    for (int64_t l : labels) {
      EXPECT_GE(l, 0);
      EXPECT_LT(l, 5);
    }
    EXPECT_GE(seen.size(), 3u) << "paired " << paired;
    auto part = labelBox(data, 1, {{100}, {140}}, 2);
    EXPECT_EQ(part, std::vector<int64_t>(labels.begin() + 100,
                                         labels.begin() + 140));
  }
}

TEST(SyntheticData, TeacherLabelsFollowTheInputs) {
  // The teacher is a function of the input row: identical rows in different
  // batches would get identical labels, and the labels of a batch change when
  // its inputs do.
  Plan plan = biggerPlan(true);
  SyntheticData data(plan);
  auto l2 = labelBox(data, 1, {{0}, {256}}, 2);
  auto l3 = labelBox(data, 1, {{0}, {256}}, 3);
  EXPECT_NE(l2, l3);
  EXPECT_EQ(l2, labelBox(data, 1, {{0}, {256}}, 2));
}

TEST(SyntheticData, RejectsBadLabelMetadata) {
  Plan plan = biggerPlan(false);
  plan.tensors[1].numClasses = 0;
  SyntheticData data(plan);
  std::vector<int64_t> v(4);
  EXPECT_NE(data.fill(1, {{0}, {4}}, 0, v.data()).find("numClasses"),
            std::string::npos);
}

} // namespace
