//===- CudaMultiFetch.h - One-launch Fetch/Reduce: piece table and element -*- C++ -*-===//
//
// The MultiFetch kernel of the Tofu paper (§6): one launch assembles a
// device's input region from the pieces other devices (and it) hold, reading
// them in place through unified addressing (peer access), instead of one
// memcpy or box kernel per piece. MultiReduce is its summing sibling: one
// launch writes every destination element as the sum of the pieces that
// cover it, in the plan's piece order, so no scratch, memset or copy back.
//
// This header is plain C++ included by the CUDA kernel (CudaMultiFetch.cu),
// the schedule (CudaMultiFetchTables.cpp) and the host emulator of the
// schedule tests, so the host and the GPU run the very same element code
// (`multiFetchItem`). It needs no CUDA header.
//
// A piece table is one block of device memory: a MultiFetchHeader followed
// by `numPieces` MultiFetchPiece, built once at init (addresses resolved to
// device addresses) and read by every launch unchanged, so a CUDA graph
// replays it. All fields are 8-byte words or pairs of 4-byte words, so
// nvcc and the host compiler lay the structs out identically.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDAMULTIFETCH_H
#define TOFU_RUNTIME_CUDA_CUDAMULTIFETCH_H

#include <cstdint>
#include <cstring>
#include <string>

#if defined(__CUDACC__)
#define TOFU_MULTIFETCH_HD __host__ __device__
#else
#define TOFU_MULTIFETCH_HD
#endif

namespace tofu::cuda {

/// Highest rank of a piece table (= kMaxBoxRank of the box kernels).
constexpr int32_t kMultiFetchMaxRank = 8;

/// What one launch computes.
enum class MultiFetchMode : uint32_t {
  Copy = 0,       ///< Fetch: every piece copied to its place (any element size)
  SumF32 = 1,     ///< Reduce: float sum, 0 + p0 + p1 + ... in piece order
  SumI64 = 2,     ///< Reduce: int64 sum (wrapping)
  SumBool = 3,    ///< Reduce: a sum of booleans saturates at 1 (logical or)
};

/// The table's first block.
struct MultiFetchHeader {
  /// Device address of the destination buffer's first element (the origin
  /// of its dense box of extents `dstExtents`).
  uint64_t dst = 0;
  /// Work items of one launch: Copy, the pieces' elements together; a sum,
  /// the destination's elements.
  int64_t items = 0;
  int64_t dstExtents[kMultiFetchMaxRank] = {};
  MultiFetchMode mode = MultiFetchMode::Copy;
  uint32_t elementSize = 0; ///< bytes per element (1, 2, 4 or 8)
  int32_t rank = 0;
  int32_t numPieces = 0;
};

/// One piece: box `region` at `srcStart` of the dense source box of extents
/// `srcExtents`, placed at `dstStart` of the destination box. Dimensions
/// from `rank` on have region and extents 1, starts 0.
struct MultiFetchPiece {
  /// Device address of the source buffer's first element (its box origin;
  /// on a peer GPU for a remote piece).
  uint64_t src = 0;
  /// Copy: the first work item of this piece (the elements of the pieces
  /// before it); a sum: unused (0).
  int64_t firstItem = 0;
  int64_t region[kMultiFetchMaxRank] = {};
  int64_t srcExtents[kMultiFetchMaxRank] = {};
  int64_t srcStart[kMultiFetchMaxRank] = {};
  int64_t dstStart[kMultiFetchMaxRank] = {};
};

// The layout the kernel and the host share (no padding either side).
static_assert(sizeof(MultiFetchHeader) == 96, "MultiFetchHeader layout");
static_assert(sizeof(MultiFetchPiece) == 272, "MultiFetchPiece layout");

/// Bytes of a table with `numPieces` pieces.
inline uint64_t multiFetchTableBytes(int32_t numPieces) {
  return sizeof(MultiFetchHeader) +
         static_cast<uint64_t>(numPieces) * sizeof(MultiFetchPiece);
}

/// Writes header and pieces into `out` (multiFetchTableBytes bytes) as the
/// kernel reads them.
inline void encodeMultiFetchTable(const MultiFetchHeader &header,
                                  const MultiFetchPiece *pieces, void *out) {
  auto *bytes = static_cast<unsigned char *>(out);
  std::memcpy(bytes, &header, sizeof(header));
  // No pieces: `pieces` may be null (an empty vector's data()), which
  // memcpy must not be given even for 0 bytes (UBSan, bench/sanitize.md).
  if (header.numPieces > 0)
    std::memcpy(bytes + sizeof(header), pieces,
                static_cast<size_t>(header.numPieces) *
                    sizeof(MultiFetchPiece));
}

/// Copies one element of `size` bytes (the sizes the kernel moves in one
/// access; others byte by byte).
TOFU_MULTIFETCH_HD inline void multiFetchCopyElement(unsigned char *d,
                                                     const unsigned char *s,
                                                     uint32_t size) {
  switch (size) {
  case 1:
    *d = *s;
    break;
  case 2:
    *reinterpret_cast<uint16_t *>(d) = *reinterpret_cast<const uint16_t *>(s);
    break;
  case 4:
    *reinterpret_cast<uint32_t *>(d) = *reinterpret_cast<const uint32_t *>(s);
    break;
  case 8:
    *reinterpret_cast<uint64_t *>(d) = *reinterpret_cast<const uint64_t *>(s);
    break;
  default:
    for (uint32_t b = 0; b < size; ++b)
      d[b] = s[b];
  }
}

/// Work item `item` (0 <= item < header.items) of a launch over the table
/// `header` / `pieces` (in device memory on the GPU; in host memory on the
/// host). Items touch disjoint destination elements, so any order or
/// parallel schedule of the items gives the same result:
///
///  * Copy: the piece holding `item` is found by binary search over
///    `firstItem`; the item's coordinates inside the piece give one source
///    and one destination element.
///  * a sum: `item` is a destination element; every piece covering it, in
///    table order, is added to a zero of the element type (exactly the CPU
///    backend's scratch += piece, piece by piece); an element no piece
///    covers becomes 0, as in the CPU backend.
TOFU_MULTIFETCH_HD inline void multiFetchItem(const MultiFetchHeader &header,
                                              const MultiFetchPiece *pieces,
                                              int64_t item) {
  const int32_t rank = header.rank;
  const uint32_t es = header.elementSize;
  unsigned char *dst = reinterpret_cast<unsigned char *>(header.dst);
  if (header.mode == MultiFetchMode::Copy) {
    int32_t lo = 0, hi = header.numPieces - 1;
    while (lo < hi) { // the last piece whose firstItem <= item
      int32_t mid = (lo + hi + 1) / 2;
      if (pieces[mid].firstItem <= item)
        lo = mid;
      else
        hi = mid - 1;
    }
    const MultiFetchPiece &p = pieces[lo];
    int64_t rest = item - p.firstItem, s = 0, d = 0, sStride = 1, dStride = 1;
    for (int32_t r = rank - 1; r >= 0; --r) {
      const int64_t c = rest % p.region[r];
      rest /= p.region[r];
      s += (p.srcStart[r] + c) * sStride;
      d += (p.dstStart[r] + c) * dStride;
      sStride *= p.srcExtents[r];
      dStride *= header.dstExtents[r];
    }
    multiFetchCopyElement(
        dst + d * es,
        reinterpret_cast<const unsigned char *>(p.src) + s * es, es);
    return;
  }
  // A sum: the destination element's coordinates.
  int64_t coord[kMultiFetchMaxRank];
  int64_t rest = item;
  for (int32_t r = rank - 1; r >= 0; --r) {
    coord[r] = rest % header.dstExtents[r];
    rest /= header.dstExtents[r];
  }
  float f32 = 0.0f;
  int64_t i64 = 0;
  unsigned char any = 0;
  for (int32_t q = 0; q < header.numPieces; ++q) {
    const MultiFetchPiece &p = pieces[q];
    int64_t s = 0, sStride = 1;
    bool inside = true;
    for (int32_t r = rank - 1; r >= 0; --r) {
      const int64_t c = coord[r] - p.dstStart[r];
      inside = inside && c >= 0 && c < p.region[r];
      s += (p.srcStart[r] + c) * sStride;
      sStride *= p.srcExtents[r];
    }
    if (!inside)
      continue;
    const unsigned char *src = reinterpret_cast<const unsigned char *>(p.src);
    switch (header.mode) {
    case MultiFetchMode::SumF32:
      f32 += reinterpret_cast<const float *>(src)[s];
      break;
    case MultiFetchMode::SumI64:
      // Wrapping, as the CPU backend's int64 += (two's complement).
      i64 = static_cast<int64_t>(
          static_cast<uint64_t>(i64) +
          static_cast<uint64_t>(reinterpret_cast<const int64_t *>(src)[s]));
      break;
    default:
      any = (any | src[s]) ? 1 : 0;
      break;
    }
  }
  switch (header.mode) {
  case MultiFetchMode::SumF32:
    reinterpret_cast<float *>(dst)[item] = f32;
    break;
  case MultiFetchMode::SumI64:
    reinterpret_cast<int64_t *>(dst)[item] = i64;
    break;
  default:
    dst[item] = any;
    break;
  }
}

/// Launches `items` work items of the table at device address `table` on
/// `stream` (a cudaStream_t) of the current GPU, with at most `maxBlocks`
/// blocks of 256 threads (grid-stride). Defined in CudaMultiFetch.cu;
/// returns "" or the CUDA error.
std::string launchMultiFetch(const void *table, int64_t items,
                             int64_t maxBlocks, void *stream);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDAMULTIFETCH_H
