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
  // Paired with labels: half the noise plus the row's class prototype.
  ASSERT_GE(plan.tensors[kL].pairedInput, 0);
  auto labels = labelBox(a, kL, {{0}, {4}}, 5);
  EXPECT_FLOAT_EQ(0.5f * SyntheticData::inputValue("X", 5, 7) +
                      SyntheticData::prototypeValue(labels[1], 3),
                  x[7]);
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

TEST(SyntheticData, LabelsAreInRangeAndVaried) {
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

TEST(SyntheticData, PairedInputsFollowTheirLabels) {
  // A classifier's features are learnable: every element of row n has the
  // sign of the prototype of class labels[n] (prototype ±0.5, noise < 0.5),
  // and labels differ between batches.
  Plan plan = biggerPlan(true);
  SyntheticData data(plan);
  const auto &x = plan.tensors[0];
  ASSERT_EQ(plan.tensors[1].pairedInput, 0);
  int64_t rows = x.shape[0], cols = x.shape[1] * x.shape[2];
  auto labels = labelBox(data, 1, {{0}, {rows}}, 2);
  auto inputs =
      inputBox(data, 0, {{0, 0, 0}, {rows, x.shape[1], x.shape[2]}}, 2);
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t j = 0; j < cols; ++j)
      ASSERT_EQ(inputs[n * cols + j] > 0,
                SyntheticData::prototypeValue(labels[n], j) > 0)
          << "row " << n << " feature " << j;
  EXPECT_NE(labels, labelBox(data, 1, {{0}, {rows}}, 3));
}

TEST(SyntheticData, EveryBoxIsTheHeaderFormula) {
  // fill computes the mix's first rounds once per call and walks runs of
  // the innermost dimension: element for element it must equal the
  // formula of SyntheticData.h (inputValue, labelValue, prototypeValue),
  // on inner boxes of ranks 1 to 3, paired or not, float32, float64,
  // token ids and int32 labels.
  auto flatOf = [](const std::vector<int64_t> &idx,
                   const std::vector<int64_t> &shape) {
    int64_t f = 0;
    for (size_t i = 0; i < shape.size(); ++i)
      f = f * shape[i] + idx[i];
    return f;
  };
  for (bool paired : {true, false})
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{7}, {7, 5}, {7, 3, 4}}) {
      Plan plan = biggerPlan(paired);
      plan.tensors[0].shape = shape;
      plan.tensors[1].shape = {shape[0]};
      SyntheticData data(plan);
      Box box;
      for (int64_t extent : shape) {
        box.lo.push_back(extent > 2 ? 1 : 0);
        box.hi.push_back(extent > 3 ? extent - 1 : extent);
      }
      const int64_t batch = 9;
      auto got = inputBox(data, 0, box, batch);
      auto rows = labelBox(data, 1, {{0}, {shape[0]}}, batch);
      int64_t rowSize = 1;
      for (size_t i = 1; i < shape.size(); ++i)
        rowSize *= shape[i];
      std::vector<int64_t> idx(box.lo);
      for (size_t e = 0; e < got.size(); ++e) {
        int64_t flat = flatOf(idx, shape);
        float want = SyntheticData::inputValue("features", batch, flat);
        if (paired)
          want = 0.5f * want +
                 SyntheticData::prototypeValue(rows[idx[0]], flat % rowSize);
        ASSERT_EQ(got[e], want) << "rank " << shape.size() << " paired "
                                << paired << " element " << e;
        for (size_t i = idx.size(); i-- > 0;) {
          if (++idx[i] < box.hi[i])
            break;
          idx[i] = box.lo[i];
        }
      }
      for (size_t n = 0; n < rows.size(); ++n)
        ASSERT_EQ(rows[n], SyntheticData::labelValue(plan.tensors[1], batch,
                                                     int64_t(n)));
      // float64 features: the float32 value, converted.
      plan.tensors[0].dtype = DType::F64;
      std::vector<double> wide(got.size());
      ASSERT_EQ(data.fill(0, box, batch, wide.data()), "");
      for (size_t e = 0; e < got.size(); ++e)
        ASSERT_EQ(wide[e], double(got[e]));
    }
  // Token ids (int64 input with a class count) and int32 labels [N, T].
  Plan plan = biggerPlan(false);
  plan.tensors[0].dtype = DType::I64;
  plan.tensors[0].shape = {6, 5};
  plan.tensors[0].numClasses = 11;
  plan.tensors[1].dtype = DType::I32;
  plan.tensors[1].shape = {6, 5};
  SyntheticData data(plan);
  Box box{{1, 2}, {5, 5}};
  auto ids = labelBox(data, 0, box, 4);
  std::vector<int32_t> labels(box.numElements());
  ASSERT_EQ(data.fill(1, box, 4, labels.data()), "");
  size_t e = 0;
  for (int64_t r = 1; r < 5; ++r)
    for (int64_t c = 2; c < 5; ++c, ++e) {
      TensorInfo asLabels = plan.tensors[0];
      EXPECT_EQ(ids[e], SyntheticData::labelValue(asLabels, 4, r * 5 + c));
      EXPECT_EQ(labels[e],
                SyntheticData::labelValue(plan.tensors[1], 4, r * 5 + c));
    }
}

TEST(SyntheticData, MultiDimensionalLabels) {
  // A language model's targets [N, T]: one class per element, in range and
  // varied, keyed by the flat index (a box equals the whole tensor's part),
  // and the same as 1-D labels of the same name over the flat index.
  Plan plan = biggerPlan(false);
  plan.tensors[1].shape = {16, 6};
  SyntheticData data(plan);
  auto labels = labelBox(data, 1, {{0, 0}, {16, 6}}, 2);
  std::set<int64_t> seen(labels.begin(), labels.end());
  for (int64_t l : labels) {
    EXPECT_GE(l, 0);
    EXPECT_LT(l, 5);
  }
  EXPECT_GE(seen.size(), 4u);
  auto part = labelBox(data, 1, {{3, 2}, {5, 6}}, 2);
  std::vector<int64_t> expected;
  for (int64_t n = 3; n < 5; ++n)
    for (int64_t t = 2; t < 6; ++t)
      expected.push_back(labels[n * 6 + t]);
  EXPECT_EQ(part, expected);
  for (int64_t e = 0; e < 96; ++e)
    ASSERT_EQ(labels[e], SyntheticData::labelValue(plan.tensors[1], 2, e));
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
