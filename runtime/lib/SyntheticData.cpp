//===- SyntheticData.cpp - Deterministic synthetic training data ----------===//

#include "tofu/runtime/SyntheticData.h"
#include "tofu/runtime/ElementAccess.h"

#include <algorithm>
#include <cmath>
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
template <typename Fn> void forEachElement(const Box &region, Fn fn) {
  size_t rank = region.lo.size();
  int64_t n = region.numElements();
  std::vector<int64_t> idx(region.lo);
  for (int64_t e = 0; e < n; ++e) {
    fn(e, idx);
    for (size_t i = rank; i-- > 0;) {
      if (++idx[i] < region.hi[i])
        break;
      idx[i] = region.lo[i];
    }
  }
}

int64_t flatIndex(const std::vector<int64_t> &idx,
                  const std::vector<int64_t> &shape) {
  int64_t f = 0;
  for (size_t i = 0; i < shape.size(); ++i)
    f = f * shape[i] + idx[i];
  return f;
}

} // namespace

float SyntheticData::inputValue(const std::string &name, int64_t batch,
                                int64_t flatIndex) {
  return uniform(mix(nameHash(name), static_cast<uint64_t>(batch),
                     static_cast<uint64_t>(flatIndex)));
}

std::string SyntheticData::fill(int32_t tensor, const Box &region,
                                int64_t batch, void *out) const {
  const TensorInfo &t = plan.tensors[tensor];
  if (t.role == TensorRole::Input) {
    if (isIntegerDType(t.dtype) && t.numClasses > 0) {
      // Token ids, uniform in [0, numClasses).
      forEachElement(region, [&](int64_t e, const std::vector<int64_t> &idx) {
        uint64_t id = mix(nameHash(t.name), static_cast<uint64_t>(batch),
                          static_cast<uint64_t>(flatIndex(idx, t.shape))) %
                      static_cast<uint64_t>(t.numClasses);
        storeElement(out, t.dtype, e, static_cast<double>(id));
      });
      return "";
    }
    if (!isFloatDType(t.dtype)) {
      // Integer and bool inputs that index nothing: small integers from the
      // same noise (signed in [-8, 8), unsigned in [0, 16), bool u >= 0).
      forEachElement(region, [&](int64_t e, const std::vector<int64_t> &idx) {
        double u = inputValue(t.name, batch, flatIndex(idx, t.shape));
        double v = t.dtype == DType::Bool  ? (u >= 0 ? 1 : 0)
                   : isUnsignedDType(t.dtype) ? std::floor((u + 1) * 8)
                                              : std::floor(u * 8);
        storeElement(out, t.dtype, e, v);
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
    forEachElement(region, [&](int64_t e, const std::vector<int64_t> &idx) {
      int64_t flat = flatIndex(idx, t.shape);
      float noise = inputValue(t.name, batch, flat);
      float value = noise;
      if (labels) {
        int64_t c = labelValue(*labels, batch, idx[0]);
        value = 0.5f * noise + prototypeValue(c, flat % rowSize);
      }
      storeElement(out, t.dtype, e, value);
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
  forEachElement(region, [&](int64_t e, const std::vector<int64_t> &idx) {
    storeElement(out, t.dtype, e,
                 static_cast<double>(
                     labelValue(t, batch, flatIndex(idx, t.shape))));
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
