//===- PlanReaderFuzzer.cpp - libFuzzer target: the plan.bin reader --------===//
//
// Feeds each input to readPlanBytes twice: as it is, and "repaired" -- the
// file size, the section checksums and the header checksum recomputed -- so
// that a mutation inside a section reaches the FlatBuffers verifier and the
// plan decoder instead of stopping at the checksum. readPlanBytes must
// return (an error or a plan), never crash, hang or allocate without bound.
//
//===----------------------------------------------------------------------===//
#include "PlanContainer.h"
#include "tofu/runtime/Plan.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace ct = tofu::plan::container;

/// Rewrites the checksums (and the file size) that a well-formed container
/// with these contents would carry; leaves inputs that are not one alone.
static bool repairContainer(std::vector<uint8_t> &bytes) {
  if (bytes.size() < ct::kFixedHeaderBytes ||
      std::memcmp(bytes.data(), ct::kMagic, sizeof(ct::kMagic)) != 0)
    return false;
  uint8_t *p = bytes.data();
  const uint64_t size = bytes.size();
  const uint64_t numSections = ct::loadLE(p + ct::kOffNumSections, 4);
  if (numSections > 1024)
    return false;
  const uint64_t headerSize =
      ct::kFixedHeaderBytes + numSections * ct::kSectionEntryBytes;
  if (headerSize > size)
    return false;
  ct::storeLE(p + ct::kOffHeaderSize, headerSize, 4);
  ct::storeLE(p + ct::kOffFileSize, size, 8);
  for (uint64_t i = 0; i < numSections; ++i) {
    uint8_t *e = p + ct::kFixedHeaderBytes + i * ct::kSectionEntryBytes;
    uint64_t offset = ct::loadLE(e + 8, 8), bytesInSection = ct::loadLE(e + 16, 8);
    if (offset <= size && bytesInSection <= size - offset)
      ct::storeLE(e + 24, ct::bulkChecksum(p + offset, bytesInSection),
                  8);
  }
  ct::storeLE(p + ct::kOffHeaderChecksum, ct::headerChecksum(p, headerSize),
              8);
  return true;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  {
    tofu::plan::Plan plan;
    (void)tofu::plan::readPlanBytes(bytes, plan);
  }
  if (repairContainer(bytes)) {
    tofu::plan::Plan plan;
    (void)tofu::plan::readPlanBytes(bytes, plan);
  }
  return 0;
}
