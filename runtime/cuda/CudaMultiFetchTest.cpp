//===- CudaMultiFetchTest.cpp - The MultiFetch element function and kernel ===//
//
// Random piece tables (ranks 0 to 4, element sizes 1, 2, 4 and 8; Copy
// tables of disjoint pieces covering part of the destination in shuffled
// order, sum tables of overlapping pieces in f32, i64 and bool), each
// against a reference written as plain loops with the CPU backend's
// semantics (Reduce: a zeroed scratch += each piece in order, the bool sum
// saturating; Fetch: each piece copied, uncovered elements untouched):
//
//  * tofu-cuda-multifetch-tests (every build): `multiFetchItem`, the
//    function the kernel and the schedule's host emulator run, over the
//    items in a random order, bit-identical to the reference;
//  * tofu-cuda-multifetch-gpu-tests (built with TOFU_MULTIFETCH_GPU where
//    the CUDA executor is built; label gpu, exit 77 without a GPU): the
//    kernel of CudaMultiFetch.cu on the same tables in device memory,
//    bit-identical to the host function.
//
//===----------------------------------------------------------------------===//

#include "CudaMultiFetch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#ifdef TOFU_MULTIFETCH_GPU
#include <cuda_runtime.h>
#endif

using namespace tofu::cuda;

namespace {

/// One random table with its own buffers (host copies).
struct Case {
  MultiFetchHeader header;
  std::vector<MultiFetchPiece> pieces;
  std::vector<std::vector<uint8_t>> sources;
  std::vector<uint8_t> dstInitial; ///< what dst holds before the launch
  std::string what;
};

int64_t volume(const int64_t *e, int32_t rank) {
  int64_t n = 1;
  for (int32_t r = 0; r < rank; ++r)
    n *= e[r];
  return n;
}

/// Linear offset of coordinates `c` in a dense box of extents `e`.
int64_t linear(const int64_t *c, const int64_t *e, int32_t rank) {
  int64_t off = 0;
  for (int32_t r = 0; r < rank; ++r)
    off = off * e[r] + c[r];
  return off;
}

std::vector<uint8_t> randomBytes(std::mt19937 &rng, size_t n,
                                 MultiFetchMode mode) {
  std::vector<uint8_t> b(n);
  if (mode == MultiFetchMode::SumF32) {
    std::uniform_real_distribution<float> u(-4, 4);
    for (size_t i = 0; i + 4 <= n; i += 4) {
      float f = u(rng);
      std::memcpy(&b[i], &f, 4);
    }
  } else if (mode == MultiFetchMode::SumBool) {
    for (auto &x : b)
      x = rng() % 4 == 0;
  } else {
    for (auto &x : b)
      x = static_cast<uint8_t>(rng());
  }
  return b;
}

Case makeCase(std::mt19937 &rng, MultiFetchMode mode, int32_t rank) {
  Case c;
  MultiFetchHeader &h = c.header;
  h.mode = mode;
  const uint32_t sizes[] = {1, 2, 4, 8};
  h.elementSize = mode == MultiFetchMode::SumF32   ? 4
                  : mode == MultiFetchMode::SumI64 ? 8
                  : mode == MultiFetchMode::SumBool
                      ? 1
                      : sizes[rng() % 4];
  h.rank = rank;
  for (int32_t r = 0; r < kMultiFetchMaxRank; ++r)
    h.dstExtents[r] = r < rank ? 1 + rng() % 6 : 1;
  std::vector<MultiFetchPiece> boxes;
  if (mode == MultiFetchMode::Copy) {
    // Tile dst by cutting every dimension once (or not), keep a random
    // subset of the tiles, shuffle them.
    std::vector<std::vector<std::pair<int64_t, int64_t>>> cuts(rank);
    for (int32_t r = 0; r < rank; ++r) {
      int64_t e = h.dstExtents[r];
      int64_t at = e > 1 ? 1 + rng() % (e - 1) : e;
      cuts[r].push_back({0, at});
      if (at < e)
        cuts[r].push_back({at, e});
    }
    size_t tiles = 1;
    for (auto &v : cuts)
      tiles *= v.size();
    for (size_t t = 0; t < tiles; ++t) {
      size_t rest = t;
      MultiFetchPiece p;
      for (int32_t r = 0; r < kMultiFetchMaxRank; ++r) {
        p.region[r] = 1;
        p.dstStart[r] = 0;
      }
      for (int32_t r = rank - 1; r >= 0; --r) {
        auto [lo, hi] = cuts[r][rest % cuts[r].size()];
        rest /= cuts[r].size();
        p.dstStart[r] = lo;
        p.region[r] = hi - lo;
      }
      if (tiles == 1 || rng() % 4 != 0)
        boxes.push_back(p);
    }
    std::shuffle(boxes.begin(), boxes.end(), rng);
  } else {
    // 1 to 5 random boxes inside dst, overlapping freely.
    const int n = 1 + rng() % 5;
    for (int i = 0; i < n; ++i) {
      MultiFetchPiece p;
      for (int32_t r = 0; r < kMultiFetchMaxRank; ++r) {
        if (r >= rank) {
          p.region[r] = 1;
          p.dstStart[r] = 0;
          continue;
        }
        int64_t e = h.dstExtents[r];
        int64_t lo = rng() % e;
        p.dstStart[r] = lo;
        p.region[r] = 1 + rng() % (e - lo);
      }
      boxes.push_back(p);
    }
  }
  int64_t items = 0;
  for (MultiFetchPiece &p : boxes) {
    for (int32_t r = 0; r < kMultiFetchMaxRank; ++r) {
      int64_t before = r < rank ? rng() % 3 : 0, after = r < rank ? rng() % 3 : 0;
      p.srcStart[r] = before;
      p.srcExtents[r] = before + p.region[r] + after;
    }
    p.firstItem = mode == MultiFetchMode::Copy ? items : 0;
    items += volume(p.region, rank);
    c.sources.push_back(randomBytes(
        rng, volume(p.srcExtents, rank) * h.elementSize, mode));
  }
  c.pieces = boxes;
  h.numPieces = static_cast<int32_t>(boxes.size());
  const int64_t dstElements = volume(h.dstExtents, rank);
  h.items = mode == MultiFetchMode::Copy ? items : dstElements;
  c.dstInitial = randomBytes(rng, dstElements * h.elementSize, mode);
  c.what = "mode " + std::to_string(static_cast<int>(mode)) + " rank " +
           std::to_string(rank) + " element size " +
           std::to_string(h.elementSize) + " pieces " +
           std::to_string(h.numPieces);
  return c;
}

/// The reference: plain loops, the CPU backend's semantics.
std::vector<uint8_t> reference(const Case &c) {
  const MultiFetchHeader &h = c.header;
  const int32_t rank = h.rank;
  const uint32_t es = h.elementSize;
  std::vector<uint8_t> dst = c.dstInitial;
  if (h.mode != MultiFetchMode::Copy)
    std::fill(dst.begin(), dst.end(), 0); // the zeroed scratch
  for (size_t q = 0; q < c.pieces.size(); ++q) {
    const MultiFetchPiece &p = c.pieces[q];
    const int64_t n = volume(p.region, rank);
    for (int64_t e = 0; e < n; ++e) {
      int64_t coord[kMultiFetchMaxRank], sc[kMultiFetchMaxRank],
          dc[kMultiFetchMaxRank], rest = e;
      for (int32_t r = rank - 1; r >= 0; --r) {
        coord[r] = rest % p.region[r];
        rest /= p.region[r];
        sc[r] = p.srcStart[r] + coord[r];
        dc[r] = p.dstStart[r] + coord[r];
      }
      const uint8_t *s =
          c.sources[q].data() + linear(sc, p.srcExtents, rank) * es;
      uint8_t *d = dst.data() + linear(dc, h.dstExtents, rank) * es;
      switch (h.mode) {
      case MultiFetchMode::Copy:
        std::memcpy(d, s, es);
        break;
      case MultiFetchMode::SumF32: {
        float a, b;
        std::memcpy(&a, d, 4);
        std::memcpy(&b, s, 4);
        a += b;
        std::memcpy(d, &a, 4);
        break;
      }
      case MultiFetchMode::SumI64: {
        uint64_t a, b;
        std::memcpy(&a, d, 8);
        std::memcpy(&b, s, 8);
        a += b;
        std::memcpy(d, &a, 8);
        break;
      }
      case MultiFetchMode::SumBool:
        *d = (*d | *s) ? 1 : 0;
        break;
      }
    }
  }
  return dst;
}

/// `multiFetchItem` on the host over a random order of the items.
std::vector<uint8_t> onHost(const Case &c, std::mt19937 &rng) {
  std::vector<uint8_t> dst = c.dstInitial;
  MultiFetchHeader h = c.header;
  h.dst = reinterpret_cast<uint64_t>(dst.data());
  std::vector<MultiFetchPiece> pieces = c.pieces;
  for (size_t q = 0; q < pieces.size(); ++q)
    pieces[q].src = reinterpret_cast<uint64_t>(c.sources[q].data());
  std::vector<uint8_t> table(multiFetchTableBytes(h.numPieces));
  encodeMultiFetchTable(h, pieces.data(), table.data());
  MultiFetchHeader th;
  std::memcpy(&th, table.data(), sizeof(th));
  std::vector<int64_t> order(h.items);
  for (int64_t i = 0; i < h.items; ++i)
    order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  for (int64_t item : order)
    multiFetchItem(th, reinterpret_cast<const MultiFetchPiece *>(
                           table.data() + sizeof(th)),
                   item);
  return dst;
}

std::vector<Case> cases() {
  std::mt19937 rng(20191);
  std::vector<Case> all;
  for (int round = 0; round < 40; ++round)
    for (MultiFetchMode mode :
         {MultiFetchMode::Copy, MultiFetchMode::SumF32, MultiFetchMode::SumI64,
          MultiFetchMode::SumBool})
      all.push_back(makeCase(rng, mode, round % 5));
  return all;
}

#ifndef TOFU_MULTIFETCH_GPU

TEST(MultiFetchItem, MatchesTheReferenceOnRandomTables) {
  std::mt19937 rng(7);
  size_t pieces = 0;
  for (const Case &c : cases()) {
    EXPECT_EQ(onHost(c, rng), reference(c)) << c.what;
    pieces += c.pieces.size();
  }
  EXPECT_GT(pieces, 300u);
}

TEST(MultiFetchItem, ASumAddsInPieceOrder) {
  // Three f32 pieces on one element, 1e8 + 1 - 1e8: in piece order the 1
  // is lost to rounding (0), in another order it is not (1). The CPU
  // backend sums in piece order, so the function must give 0.
  float values[3] = {1e8f, 1.0f, -1e8f};
  float dst = 42;
  MultiFetchHeader h;
  h.mode = MultiFetchMode::SumF32;
  h.elementSize = 4;
  h.rank = 0;
  h.numPieces = 3;
  h.items = 1;
  h.dst = reinterpret_cast<uint64_t>(&dst);
  MultiFetchPiece p[3];
  for (int q = 0; q < 3; ++q)
    p[q].src = reinterpret_cast<uint64_t>(&values[q]);
  multiFetchItem(h, p, 0);
  EXPECT_EQ(dst, 0.0f);
  std::swap(p[1], p[2]);
  multiFetchItem(h, p, 0);
  EXPECT_EQ(dst, 1.0f);
}

#else

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

TEST(MultiFetchKernel, MatchesTheHostFunctionOnRandomTables) {
  std::mt19937 rng(7);
  for (const Case &c : cases()) {
    // Sources, dst and the table in device memory.
    std::vector<void *> allocations;
    MultiFetchHeader h = c.header;
    std::vector<MultiFetchPiece> pieces = c.pieces;
    for (size_t q = 0; q < pieces.size(); ++q) {
      void *p = nullptr;
      CUDA_OK(cudaMalloc(&p, std::max<size_t>(1, c.sources[q].size())));
      CUDA_OK(cudaMemcpy(p, c.sources[q].data(), c.sources[q].size(),
                         cudaMemcpyHostToDevice));
      pieces[q].src = reinterpret_cast<uint64_t>(p);
      allocations.push_back(p);
    }
    void *dst = nullptr, *table = nullptr;
    CUDA_OK(cudaMalloc(&dst, std::max<size_t>(1, c.dstInitial.size())));
    CUDA_OK(cudaMemcpy(dst, c.dstInitial.data(), c.dstInitial.size(),
                       cudaMemcpyHostToDevice));
    h.dst = reinterpret_cast<uint64_t>(dst);
    std::vector<uint8_t> bytes(multiFetchTableBytes(h.numPieces));
    encodeMultiFetchTable(h, pieces.data(), bytes.data());
    CUDA_OK(cudaMalloc(&table, bytes.size()));
    CUDA_OK(cudaMemcpy(table, bytes.data(), bytes.size(),
                       cudaMemcpyHostToDevice));
    // Two blocks at most, so the grid-stride loop is exercised.
    ASSERT_EQ(launchMultiFetch(table, h.items, 2, nullptr), "") << c.what;
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<uint8_t> got(c.dstInitial.size());
    CUDA_OK(cudaMemcpy(got.data(), dst, got.size(), cudaMemcpyDeviceToHost));
    EXPECT_EQ(got, onHost(c, rng)) << c.what;
    EXPECT_EQ(got, reference(c)) << c.what;
    for (void *p : allocations)
      cudaFree(p);
    cudaFree(dst);
    cudaFree(table);
  }
}

#endif

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
#ifdef TOFU_MULTIFETCH_GPU
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("SKIPPED: no CUDA GPU\n");
    return 77;
  }
#endif
  return RUN_ALL_TESTS();
}
