//===- SyntheticData.cpp - Deterministic synthetic training data ----------===//

#include "tofu/runtime/SyntheticData.h"
#include "tofu/runtime/ElementAccess.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

using namespace tofu::runtime;
using namespace tofu::plan;

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t nameHash(const std::string &name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t mix(uint64_t seed, uint64_t a, uint64_t b) {
  return splitmix64(splitmix64(splitmix64(seed) ^ a) ^ b);
}

/// Uniform in [-1, 1): 24 random bits, exactly representable in float.
float uniform(uint64_t h) {
  return static_cast<float>(static_cast<double>(h >> 40) * (1.0 / 8388608.0) -
                            1.0);
}

/// Calls fn(flatLocal, globalCoords) for every element of `region`.
/// Calls `fn(e, idx, flat, length)` for each run of `region` along its
/// innermost dimension: `length` elements whose output positions are
/// e, e + 1, ... and whose flat (row-major, global) indices in a tensor of
/// `shape` are flat, flat + 1, ...; `idx` is the run's first index. A
/// rank-0 region is one run of one element.
template <typename Fn>
void forEachRun(const Box &region, const std::vector<int64_t> &shape, Fn fn) {
  const size_t rank = region.lo.size();
  const int64_t n = region.numElements();
  if (n == 0)
    return;
  const int64_t length = rank ? region.hi[rank - 1] - region.lo[rank - 1] : 1;
  std::vector<int64_t> idx(region.lo);
  for (int64_t e = 0; e < n; e += length) {
    int64_t flat = 0;
    for (size_t i = 0; i < rank; ++i)
      flat = flat * shape[i] + idx[i];
    fn(e, idx, flat, length);
    // Advance the odometer over all but the innermost dimension.
    for (size_t i = rank > 0 ? rank - 1 : 0; i-- > 0;) {
      if (++idx[i] < region.hi[i])
        break;
      idx[i] = region.lo[i];
    }
  }
}

/// mix(seed, a, b) for many b: the part that depends on seed and a only,
/// computed once (mix(seed, a, b) = splitmix64(prefix ^ b)).
struct MixPrefix {
  uint64_t prefix;
  MixPrefix(uint64_t seed, uint64_t a)
      : prefix(splitmix64(splitmix64(seed) ^ a)) {}
  uint64_t operator()(uint64_t b) const { return splitmix64(prefix ^ b); }
};

} // namespace

float SyntheticData::inputValue(const std::string &name, int64_t batch,
                                int64_t flatIndex) {
  return uniform(mix(nameHash(name), static_cast<uint64_t>(batch),
                     static_cast<uint64_t>(flatIndex)));
}

std::string SyntheticData::fill(int32_t tensor, const Box &region,
                                int64_t batch, void *out) const {
  // Every value is mix(seed, batch, index) (or a function of it); the first
  // two rounds of the mix are computed once per call (MixPrefix), so an
  // element costs one splitmix64 (two for labelled features), which keeps
  // tofu-run's per-step feed small next to the step (docs/DeviceModel.md,
  // "feed").
  const TensorInfo &t = plan.tensors[tensor];
  const uint64_t b = static_cast<uint64_t>(batch);
  if (t.role == TensorRole::Input) {
    const MixPrefix noiseOf(nameHash(t.name), b);
    if (isIntegerDType(t.dtype) && t.numClasses > 0) {
      // Token ids, uniform in [0, numClasses).
      const uint64_t classes = static_cast<uint64_t>(t.numClasses);
      forEachRun(region, t.shape,
                 [&](int64_t e, const std::vector<int64_t> &, int64_t flat,
                     int64_t length) {
                   for (int64_t j = 0; j < length; ++j)
                     storeElement(out, t.dtype, e + j,
                                  static_cast<double>(
                                      noiseOf(uint64_t(flat + j)) % classes));
                 });
      return "";
    }
    if (!isFloatDType(t.dtype)) {
      // Integer and bool inputs that index nothing: small integers from the
      // same noise (signed in [-8, 8), unsigned in [0, 16), bool u >= 0).
      forEachRun(region, t.shape,
                 [&](int64_t e, const std::vector<int64_t> &, int64_t flat,
                     int64_t length) {
                   for (int64_t j = 0; j < length; ++j) {
                     double u = uniform(noiseOf(uint64_t(flat + j)));
                     double v = t.dtype == DType::Bool ? (u >= 0 ? 1 : 0)
                                : isUnsignedDType(t.dtype)
                                    ? std::floor((u + 1) * 8)
                                    : std::floor(u * 8);
                     storeElement(out, t.dtype, e + j, v);
                   }
                 });
      return "";
    }
    // Features labelled by a label tensor are drawn around the prototype of
    // each row's class; other inputs are plain noise. Float types other than
    // float32 get the float32 value, converted.
    const TensorInfo *labels = nullptr;
    for (const TensorInfo &other : plan.tensors)
      if (other.role == TensorRole::Label && other.numClasses > 0 &&
          other.pairedInput >= 0 &&
          &plan.tensors[other.pairedInput] == &t && !t.shape.empty() &&
          other.shape.size() == 1 && other.shape[0] == t.shape[0])
        labels = &other;
    int64_t rowSize = 1;
    for (size_t i = 1; i < t.shape.size(); ++i)
      rowSize *= t.shape[i];
    const bool f32 = t.dtype == DType::F32;
    uint8_t *bytes = static_cast<uint8_t *>(out);
    forEachRun(region, t.shape, [&](int64_t e,
                                    const std::vector<int64_t> &idx,
                                    int64_t flat, int64_t length) {
      const size_t rank = t.shape.size();
      // Rank >= 2: the run lies in one row, idx[0]; rank 1: one row per
      // element, each of one feature (0).
      std::optional<MixPrefix> prototypeOfRow;
      if (labels && rank >= 2)
        prototypeOfRow.emplace(kPrototypeSeed,
                               uint64_t(labelValue(*labels, batch, idx[0])));
      const int64_t feature0 = rank >= 2 ? flat - idx[0] * rowSize : 0;
      for (int64_t j = 0; j < length; ++j) {
        float value = uniform(noiseOf(uint64_t(flat + j)));
        if (labels) {
          float prototype;
          if (rank >= 2)
            prototype =
                ((*prototypeOfRow)(uint64_t(feature0 + j)) & 1) ? 0.5f
                                                                 : -0.5f;
          else
            prototype = prototypeValue(
                labelValue(*labels, batch, idx[0] + j), 0);
          value = 0.5f * value + prototype;
        }
        if (f32)
          std::memcpy(bytes + (e + j) * sizeof(float), &value, sizeof(float));
        else
          storeElement(out, t.dtype, e + j, value);
      }
    });
    return "";
  }
  if (t.role != TensorRole::Label)
    return "tensor '" + t.name + "' is neither an input nor a label";
  if (!isIntegerDType(t.dtype) || t.shape.empty())
    return "label tensor '" + t.name +
           "' must be an integer tensor [N, ...], not " +
           dtypeNumpyName(t.dtype) + " of rank " +
           std::to_string(t.shape.size());
  int64_t C = t.numClasses;
  if (C <= 0)
    return "label tensor '" + t.name + "' has no class count (numClasses)";
  // Labels [N, *D] (a language model's targets [N, T], a segmentation's
  // [N, H, W]): one class per element, keyed by its flat index (the row
  // for 1-D labels).
  const MixPrefix classOf(nameHash(t.name), b);
  forEachRun(region, t.shape,
             [&](int64_t e, const std::vector<int64_t> &, int64_t flat,
                 int64_t length) {
               for (int64_t j = 0; j < length; ++j)
                 storeElement(out, t.dtype, e + j,
                              static_cast<double>(static_cast<int64_t>(
                                  classOf(uint64_t(flat + j)) %
                                  static_cast<uint64_t>(C))));
             });
  return "";
}

int64_t SyntheticData::labelValue(const TensorInfo &labels, int64_t batch,
                                  int64_t row) {
  return static_cast<int64_t>(mix(nameHash(labels.name),
                                  static_cast<uint64_t>(batch),
                                  static_cast<uint64_t>(row)) %
                              static_cast<uint64_t>(labels.numClasses));
}

float SyntheticData::prototypeValue(int64_t label, int64_t feature) {
  return (mix(kPrototypeSeed, static_cast<uint64_t>(label),
              static_cast<uint64_t>(feature)) &
          1)
             ? 0.5f
             : -0.5f;
}
