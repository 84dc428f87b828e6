//===- PlanContainer.h - Byte layout of the plan.bin container --*- C++ -*-===//
//
// Internal to tofu_plan: constants and little-endian helpers shared by
// PlanWriter.cpp and PlanReader.cpp. The layout is documented in
// docs/PlanFormat.md; keep the two in sync.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_PLAN_PLANCONTAINER_H
#define TOFU_RUNTIME_PLAN_PLANCONTAINER_H

#include <cstddef>
#include <cstdint>

namespace tofu::plan::container {

/// The first 8 bytes of every plan.bin.
inline constexpr char kMagic[8] = {'T', 'O', 'F', 'U', 'P', 'L', 'A', 'N'};
/// Format version written by this runtime. A reader accepts any minor up to
/// its own of its own major and rejects an older or a newer major.
inline constexpr uint16_t kMajor = 4;
/// Major history: 4.0 stores each class of devices' buffers and
/// instructions once (Plan.programs), each device only its regions and
/// reduction bounds (issue 20); 3.0 stores a collective's Fetch/Reduce sources once per
/// collective (Plan.collectives, a buffer id per device) instead of as
/// pieces on every device's instruction (issue 20); 2.0 stores the attributes, global shapes and expression
/// programs of Compute instructions once per op output (Plan.op_specs)
/// instead of once per device's instruction (issue 20), and always uses
/// contentChecksum. Minor history of 1.x (no longer read): 1.0 initial; 1.1
/// adds Instr.programs, Instr.reduction_ranges and DType::Bool; 1.2 adds
/// Plan.without_weights; 1.3 adds the expression function Uniform
/// (counter-based random numbers, e.g. training-mode Dropout); 1.4 adds
/// TensorRole::State; 1.5 adds per-device weight checksums and external
/// weight files; 1.6 adds the CUDA section (generated kernels, `tofuc
/// --cuda-arch`); 1.7 adds the element types F64, I32, I16, I8, U8, U16, U32,
/// U64, F16, BF16 (DType 3..12); 1.8 adds Tensor.ignore_index (labels that a
/// loss ignores); 1.9 checksums the sections and weight shards with
/// contentChecksum (FNV-1a 64 before).
inline constexpr uint16_t kMinor = 0;

/// Fixed part of the header; the section table follows it.
inline constexpr size_t kFixedHeaderBytes = 128;
/// One entry of the section table.
inline constexpr size_t kSectionEntryBytes = 32;
/// Sections start at multiples of this (FlatBuffers needs 8-byte alignment).
inline constexpr uint64_t kSectionAlign = 8;
/// Room for the producer string in the header (NUL-padded).
inline constexpr size_t kProducerBytes = 64;

/// Field offsets inside the fixed header.
enum HeaderOffset : size_t {
  kOffMagic = 0,
  kOffMajor = 8,
  kOffMinor = 10,
  kOffHeaderSize = 12,
  kOffFileSize = 16,
  kOffFingerprint = 24,
  kOffNumDevices = 32,
  kOffNumSections = 36,
  kOffProducer = 40,
  kOffReserved0 = 104,
  kOffReserved1 = 112,
  kOffHeaderChecksum = 120,
};

/// Section kinds.
enum SectionKind : uint32_t {
  kSectionPlan = 1,    ///< FlatBuffers `tofu.plan.fb.Plan` (plan.fbs)
  kSectionWeights = 2, ///< initial buffer contents, per device contiguous
  kSectionModel = 3,   ///< the original ONNX ModelProto bytes (may be empty)
  kSectionCuda = 4,    ///< FlatBuffers `tofu.plan.fb.CudaModule` (optional)
};

/// Human-readable name of a section kind, for diagnostics.
inline const char *sectionName(uint32_t kind) {
  switch (kind) {
  case kSectionPlan:
    return "PLAN";
  case kSectionWeights:
    return "WEIGHTS";
  case kSectionModel:
    return "MODEL";
  case kSectionCuda:
    return "CUDA";
  default:
    return "unknown";
  }
}

/// FNV-1a 64-bit hash; detects every change confined to a single byte.
inline uint64_t fnv1a64(const uint8_t *data, size_t size,
                        uint64_t hash = 0xcbf29ce484222325ULL) {
  for (size_t i = 0; i < size; ++i) {
    hash ^= data[i];
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

/// A streaming 64-bit checksum of bulk contents (sections, weight shards)
/// that runs at memory speed: four independent lanes each take one 8-byte
/// little-endian word of every 32-byte block (acc = rotl(acc + w * P2, 31) *
/// P1, a bijection of w for a given acc and of acc for a given w), so a
/// change confined to one word -- in particular any single-byte change --
/// changes its lane and hence the sum that combines the lanes; the tail
/// bytes and the length are mixed in one at a time, then the result is
/// avalanched (bijectively). FNV-1a 64 above takes one multiply per byte in
/// one dependency chain: 4.5 s for VGG19's 548 MB of weights and model.
class ContentHasher {
public:
  void update(const uint8_t *data, size_t size) {
    total += size;
    if (buffered) {
      size_t take = size < 32 - buffered ? size : 32 - buffered;
      for (size_t i = 0; i < take; ++i)
        buffer[buffered + i] = data[i];
      buffered += take;
      data += take;
      size -= take;
      if (buffered < 32)
        return;
      block(buffer);
      buffered = 0;
    }
    for (; size >= 32; data += 32, size -= 32)
      block(data);
    for (size_t i = 0; i < size; ++i)
      buffer[i] = data[i];
    buffered = size;
  }
  uint64_t digest() const {
    uint64_t h = rotl(lane[0], 1) + rotl(lane[1], 7) + rotl(lane[2], 12) +
                 rotl(lane[3], 18);
    h = (h ^ (total * kP3)) * kP1;
    for (size_t i = 0; i < buffered; ++i)
      h = rotl(h ^ (buffer[i] * kP5), 11) * kP1;
    h ^= h >> 33;
    h *= kP2;
    h ^= h >> 29;
    h *= kP3;
    h ^= h >> 32;
    return h;
  }

private:
  static constexpr uint64_t kP1 = 0x9E3779B185EBCA87ULL;
  static constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4FULL;
  static constexpr uint64_t kP3 = 0x165667B19E3779F9ULL;
  static constexpr uint64_t kP5 = 0x27D4EB2F165667C5ULL;
  static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  static uint64_t word(const uint8_t *p) {
    uint64_t w = 0;
    for (int i = 0; i < 8; ++i) // compiles to one load on little-endian hosts
      w |= static_cast<uint64_t>(p[i]) << (8 * i);
    return w;
  }
  void block(const uint8_t *p) {
    for (int i = 0; i < 4; ++i)
      lane[i] = rotl(lane[i] + word(p + 8 * i) * kP2, 31) * kP1;
  }
  uint64_t lane[4] = {kP1 + kP2, kP2, 0, 0 - kP1};
  uint8_t buffer[32] = {};
  size_t buffered = 0;
  uint64_t total = 0;
};

/// contentChecksum of `size` bytes at `data`.
inline uint64_t contentChecksum(const uint8_t *data, size_t size) {
  ContentHasher h;
  h.update(data, size);
  return h.digest();
}

/// The checksum of a section or weight shard: contentChecksum (every
/// format this runtime reads).
inline uint64_t bulkChecksum(const uint8_t *data, size_t size) {
  return contentChecksum(data, size);
}

/// Little-endian stores and loads, independent of the host byte order.
inline void storeLE(uint8_t *p, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i)
    p[i] = static_cast<uint8_t>(value >> (8 * i));
}
inline uint64_t loadLE(const uint8_t *p, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; ++i)
    value |= static_cast<uint64_t>(p[i]) << (8 * i);
  return value;
}

/// Checksum of the header: FNV-1a 64 over its bytes with the checksum field
/// itself read as zero.
inline uint64_t headerChecksum(const uint8_t *header, size_t headerSize) {
  uint64_t h = fnv1a64(header, kOffHeaderChecksum);
  const uint8_t zeros[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  h = fnv1a64(zeros, 8, h);
  return fnv1a64(header + kOffHeaderChecksum + 8,
                 headerSize - kOffHeaderChecksum - 8, h);
}

} // namespace tofu::plan::container

#endif // TOFU_RUNTIME_PLAN_PLANCONTAINER_H
