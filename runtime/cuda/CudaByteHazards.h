//===- CudaByteHazards.h - Who touched which bytes last -------*- C++ -*-===//
//
// The CUDA schedules (CudaSchedule.cpp, CudaNcclSchedule.cpp) order
// instructions by the bytes they touch, not by buffer ids, because the
// memory planner reuses bytes across buffers. ByteHazardMap keeps, per byte
// range of one plan device's slice, the last writer and the readers since,
// and reports every earlier access a new one conflicts with (RAW, WAR, WAW).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDABYTEHAZARDS_H
#define TOFU_RUNTIME_CUDA_CUDABYTEHAZARDS_H

#include <cstdint>
#include <map>
#include <vector>

namespace tofu::cuda {

/// A byte range [lo, hi) of plan device `device`'s slice that a schedule
/// entry reads or writes.
struct ByteAccess {
  int32_t device;
  uint64_t lo, hi;
  bool write;
};

inline bool conflict(const ByteAccess &a, const ByteAccess &b) {
  return a.device == b.device && (a.write || b.write) && a.lo < b.hi &&
         b.lo < a.hi;
}

/// Interval map over one device slice: per byte range the last writer and
/// the readers since (schedule positions).
class ByteHazardMap {
public:
  explicit ByteHazardMap(uint64_t bytes) { segs[0] = Seg{bytes, -1, {}}; }
  /// Calls `dep(position)` for every earlier access `a` conflicts with,
  /// then records `a` as made by `pos`.
  template <typename Fn>
  void access(uint64_t lo, uint64_t hi, bool write, int32_t pos, Fn dep) {
    if (lo >= hi)
      return;
    split(lo);
    split(hi);
    for (auto it = segs.find(lo); it != segs.end() && it->first < hi; ++it) {
      Seg &s = it->second;
      if (s.writer >= 0)
        dep(s.writer);
      if (write) {
        for (int32_t r : s.readers)
          dep(r);
        s.writer = pos;
        s.readers.clear();
      } else if (s.readers.empty() || s.readers.back() != pos) {
        s.readers.push_back(pos);
      }
    }
  }

private:
  struct Seg {
    uint64_t end;
    int32_t writer;
    std::vector<int32_t> readers;
  };
  void split(uint64_t at) {
    auto it = segs.upper_bound(at);
    if (it == segs.begin())
      return;
    --it;
    if (it->first == at || it->second.end <= at)
      return;
    Seg tail = it->second;
    it->second.end = at;
    segs[at] = tail;
  }
  std::map<uint64_t, Seg> segs;
};

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDABYTEHAZARDS_H
