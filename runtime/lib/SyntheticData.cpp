//===- SyntheticData.cpp - Deterministic synthetic training data ----------===//

#include "tofu/runtime/SyntheticData.h"

#include <algorithm>
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
    if (t.dtype != DType::F32)
      return "input tensor '" + t.name + "' must be float32 for synthetic data";
    float *p = static_cast<float *>(out);
    forEachElement(region, [&](int64_t e, const std::vector<int64_t> &idx) {
      p[e] = inputValue(t.name, batch, flatIndex(idx, t.shape));
    });
    return "";
  }
  if (t.role != TensorRole::Label)
    return "tensor '" + t.name + "' is neither an input nor a label";
  if (t.dtype != DType::I64 || t.shape.size() != 1)
    return "label tensor '" + t.name + "' must be a 1-D int64 tensor";
  int64_t C = t.numClasses;
  if (C <= 0)
    return "label tensor '" + t.name + "' has no class count (numClasses)";
  int64_t *p = static_cast<int64_t *>(out);
  if (t.pairedInput < 0) {
    uint64_t h = nameHash(t.name);
    for (int64_t n = region.lo[0]; n < region.hi[0]; ++n)
      p[n - region.lo[0]] = static_cast<int64_t>(
          mix(h, static_cast<uint64_t>(batch), static_cast<uint64_t>(n)) %
          static_cast<uint64_t>(C));
    return "";
  }
  const TensorInfo &x = plan.tensors[t.pairedInput];
  if (x.role != TensorRole::Input || x.shape.empty() ||
      x.shape[0] != t.shape[0])
    return "label tensor '" + t.name + "' is paired with '" + x.name +
           "', which is not an input with the same batch extent";
  int64_t F = 1;
  for (size_t i = 1; i < x.shape.size(); ++i)
    F *= x.shape[i];
  std::vector<float> teacher(static_cast<size_t>(F * C));
  for (int64_t j = 0; j < F * C; ++j)
    teacher[j] = uniform(mix(kTeacherSeed, 0, static_cast<uint64_t>(j)));
  std::vector<double> logits(C);
  for (int64_t n = region.lo[0]; n < region.hi[0]; ++n) {
    std::fill(logits.begin(), logits.end(), 0.0);
    for (int64_t j = 0; j < F; ++j) {
      double xv = inputValue(x.name, batch, n * F + j);
      const float *row = &teacher[j * C];
      for (int64_t c = 0; c < C; ++c)
        logits[c] += xv * row[c];
    }
    int64_t best = 0;
    for (int64_t c = 1; c < C; ++c)
      if (logits[c] > logits[best])
        best = c;
    p[n - region.lo[0]] = best;
  }
  return "";
}
