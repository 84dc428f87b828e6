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
/// Format version written by this runtime. A reader accepts any minor of its
/// own major and rejects a newer major.
inline constexpr uint16_t kMajor = 1;
/// Minor history: 1.0 initial; 1.1 adds Instr.programs,
/// Instr.reduction_ranges and DType::Bool; 1.2 adds Plan.without_weights;
/// 1.3 adds the expression function Uniform (counter-based random numbers,
/// e.g. training-mode Dropout); 1.4 adds TensorRole::State; 1.5 adds
/// per-device weight checksums and external weight files; 1.6 adds the
/// CUDA section (generated kernels, `tofuc --cuda-arch`); 1.7 adds the
/// element types F64, I32, I16, I8, U8, U16, U32, U64, F16, BF16 (DType 3..12);
/// 1.8 adds Tensor.ignore_index (labels that a loss ignores).
inline constexpr uint16_t kMinor = 8;

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
