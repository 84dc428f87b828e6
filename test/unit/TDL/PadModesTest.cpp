//===- PadModesTest.cpp - Pad's edge / reflect / wrap modes ---------------===//
//
// The spec's closed forms (min / max / abs / % index expressions) against
// numpy.pad's rules written as loops (reflect and wrap fold an index until
// it lands inside the data), and the interval analysis against the source
// indices each output box really reads: requiredRegions must cover them,
// and a split of a padded output dim must ask for the whole input dim in the
// symbolic analysis. Gradients: GradientTest.cpp (TDLGradient.PadModes).
//
//===----------------------------------------------------------------------===//
#include "TDLTestSupport.h"

#include <random>

using namespace tofu::tdl;
using namespace tofu::tdl::test;

namespace {

const SpecLibrary &lib() { return SpecLibrary::builtin(); }

/// numpy.pad's source index for output position `o` of a dim of size `n`
/// padded by `begin` (negative: cropped), by folding.
int64_t sourceIndex(const std::string &mode, int64_t o, int64_t begin,
                    int64_t n) {
  int64_t s = o - begin;
  if (mode == "edge")
    return s < 0 ? 0 : (s >= n ? n - 1 : s);
  if (mode == "wrap") {
    while (s < 0)
      s += n;
    while (s >= n)
      s -= n;
    return s;
  }
  // reflect: mirror at 0 and n - 1 without repeating the edge.
  if (n == 1)
    return 0;
  while (s < 0 || s >= n)
    s = s < 0 ? -s : 2 * (n - 1) - s;
  return s;
}

struct Case {
  std::vector<int64_t> shape;
  std::vector<double> pads; ///< [begin..., end...] of every dim
  std::string mode;
};

std::vector<int64_t> outShape(const Case &c) {
  size_t r = c.shape.size();
  std::vector<int64_t> out(r);
  for (size_t d = 0; d < r; ++d)
    out[d] = c.shape[d] + int64_t(c.pads[d]) + int64_t(c.pads[d + r]);
  return out;
}

std::vector<Case> cases() {
  return {
      {{3, 4}, {1, 2, 2, 1}, "edge"},
      {{3, 4}, {2, -1, 1, 3}, "edge"},
      {{3, 4}, {2, 1, 1, 3}, "reflect"},
      {{3, 4}, {5, 0, 7, 2}, "reflect"}, // several reflections
      {{1, 5}, {2, 3, 1, 4}, "reflect"}, // a dim of size 1
      {{2, 3}, {-1, 4, 2, 5}, "reflect"},
      {{3, 4}, {1, 5, 2, 9}, "wrap"}, // more than a period
      {{3, 4}, {-2, 1, 4, -3}, "wrap"},
      {{2, 3, 4}, {0, 1, 0, 0, 2, 3}, "edge"},
  };
}

OpInstance instance(const Case &c) {
  std::vector<std::optional<TensorType>> types{
      f32(c.shape), i64({int64_t(c.pads.size())})};
  return mustInstantiate(lib(), "Pad", types,
                         {{"mode", AttrValue::ofString(c.mode)}},
                         {{1, c.pads}});
}

/// Row-major flat index of `idx` in `shape`.
int64_t flat(const std::vector<int64_t> &idx,
             const std::vector<int64_t> &shape) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    f = f * shape[d] + idx[d];
  return f;
}

/// Calls `fn(outIndex)` for every index of `shape`.
template <typename Fn>
void forEachIndex(const std::vector<int64_t> &shape, Fn fn) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<int64_t> idx(shape.size());
  for (int64_t e = 0; e < n; ++e) {
    int64_t rest = e;
    for (size_t d = shape.size(); d-- > 0;) {
      idx[d] = rest % shape[d];
      rest /= shape[d];
    }
    fn(idx);
  }
}

std::string str(Range r) {
  return "[" + std::to_string(r.lo) + ", " + std::to_string(r.hi) + ")";
}

} // namespace

TEST(TDLPadModes, ForwardMatchesNumpyRules) {
  for (const Case &c : cases()) {
    SCOPED_TRACE(c.mode);
    OpInstance inst = instance(c);
    std::vector<int64_t> out = outShape(c);
    ASSERT_EQ(inst.outputTypes()[0].dims, out);
    DenseTensor data{f32(c.shape), {}};
    forEachIndex(c.shape, [&](const std::vector<int64_t> &i) {
      data.data.push_back(double(flat(i, c.shape)) + 0.5);
    });
    DenseTensor pads{i64({int64_t(c.pads.size())}), c.pads};
    auto got = evaluate(inst, {&data, &pads, nullptr, nullptr});
    ASSERT_TRUE(bool(got)) << llvm::toString(got.takeError());
    size_t r = c.shape.size();
    forEachIndex(out, [&](const std::vector<int64_t> &o) {
      std::vector<int64_t> src(r);
      for (size_t d = 0; d < r; ++d)
        src[d] = sourceIndex(c.mode, o[d], int64_t(c.pads[d]), c.shape[d]);
      EXPECT_EQ((*got)[0].data[flat(o, out)], double(flat(src, c.shape)) + 0.5)
          << "output element " << flat(o, out);
    });
  }
}

TEST(TDLPadModes, RequiredRegionsCoverTheSourceIndices) {
  std::mt19937 rng(7);
  for (const Case &c : cases()) {
    SCOPED_TRACE(c.mode);
    OpInstance inst = instance(c);
    std::vector<int64_t> out = outShape(c);
    size_t r = c.shape.size();
    for (int trial = 0; trial < 40; ++trial) {
      Box box(r);
      for (size_t d = 0; d < r; ++d) {
        int64_t a = std::uniform_int_distribution<int64_t>(0, out[d] - 1)(rng);
        int64_t b = std::uniform_int_distribution<int64_t>(0, out[d] - 1)(rng);
        box[d] = {std::min(a, b), std::max(a, b) + 1};
      }
      auto need = inst.requiredRegions(0, box);
      ASSERT_TRUE(need[0].has_value());
      std::vector<int64_t> sub(r);
      for (size_t d = 0; d < r; ++d)
        sub[d] = box[d].hi - box[d].lo;
      forEachIndex(sub, [&](const std::vector<int64_t> &k) {
        for (size_t d = 0; d < r; ++d) {
          int64_t s = sourceIndex(c.mode, box[d].lo + k[d],
                                  int64_t(c.pads[d]), c.shape[d]);
          EXPECT_LE((*need[0])[d].lo, s) << "dim " << d;
          EXPECT_GT((*need[0])[d].hi, s) << "dim " << d;
        }
      });
      // The constant pads are never read at run time.
      EXPECT_EQ((*need[1])[0].lo, (*need[1])[0].hi);
    }
  }
  // Exact where the index is monotone: edge rows [0, 2) of a pad of 2 read
  // row 0 only, rows [2, 4) read rows [0, 2); a reflect box inside the data
  // reads just itself.
  OpInstance edge = instance({{3, 4}, {2, 0, 1, 0}, "edge"});
  EXPECT_EQ(str((*edge.requiredRegions(0, {{0, 2}, {0, 4}})[0])[0]), str(Range{0, 1}));
  EXPECT_EQ(str((*edge.requiredRegions(0, {{2, 4}, {0, 4}})[0])[0]), str(Range{0, 2}));
  OpInstance reflect = instance({{5, 4}, {2, 0, 2, 0}, "reflect"});
  EXPECT_EQ(str((*reflect.requiredRegions(0, {{3, 5}, {0, 4}})[0])[0]), str(Range{1, 3}));
  // Output rows [0, 2) reflect rows 2 and 1.
  EXPECT_EQ(str((*reflect.requiredRegions(0, {{0, 2}, {0, 4}})[0])[0]), str(Range{1, 3}));
}

TEST(TDLPadModes, SymbolicSplitOfAPaddedDimNeedsTheWholeDim) {
  // Dim 0 is padded (reflect), dim 1 is not.
  OpInstance inst = instance({{6, 4}, {2, 0, 1, 0}, "reflect"});
  for (unsigned parts : {2u, 4u}) {
    auto s = analyzeStrategies(inst, parts);
    ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
    ASSERT_EQ(s->size(), 2u);
    const Strategy &padded = (*s)[0];
    const Strategy &plain = (*s)[1];
    for (unsigned w = 0; w < parts; ++w) {
      // Every worker of the padded dim's split needs data[0 : dim(data, 0)).
      const SymInterval &rows = (*padded.regions[w][0])[0];
      std::vector<int64_t> vals = padded.symbolValues;
      EXPECT_EQ(str(evaluateInterval(rows, vals)), str(Range{0, 6})) << "worker " << w;
      // Splitting the unpadded dim needs its own share only.
      const SymInterval &cols = (*plain.regions[w][0])[1];
      EXPECT_EQ(str(evaluateInterval(cols, plain.symbolValues)), str(Range{int64_t(w) * 4 / parts, int64_t(w + 1) * 4 / parts}))
          << "worker " << w;
    }
  }
}

TEST(TDLPadModes, BadModesAndEmptyDims) {
  std::vector<std::optional<TensorType>> types{f32({3, 4}), i64({4})};
  EXPECT_NE(instantiateError(lib(), "Pad", types,
                             {{"mode", AttrValue::ofString("mirror")}},
                             {{1, {1, 1, 1, 1}}})
                .find("mode must be 'constant', 'edge', 'reflect' or 'wrap'"),
            std::string::npos);
  std::vector<std::optional<TensorType>> empty{f32({0, 4}), i64({4})};
  EXPECT_NE(instantiateError(lib(), "Pad", empty,
                             {{"mode", AttrValue::ofString("edge")}},
                             {{1, {1, 0, 0, 0}}})
                .find("cannot pad an empty dim"),
            std::string::npos);
  // An empty dim that is not padded is fine.
  EXPECT_EQ(instantiateError(lib(), "Pad", empty,
                             {{"mode", AttrValue::ofString("reflect")}},
                             {{1, {0, 1, 0, 2}}}),
            "");
}
