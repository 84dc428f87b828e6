//===- PlanReaderTest.cpp - plan.bin writer/reader tests ------------------===//
//
// Round trip and determinism; and that every damaged file (truncated, any
// single bit flipped, newer major version, overlapping sections, bad magic,
// out-of-range indices) is rejected with a message instead of a crash.
//
//===----------------------------------------------------------------------===//

#include "TestPlans.h"
#include "tofu/runtime/Plan.h"
#include "tofu/runtime/CollectivePieces.h"
#include "tofu/runtime/SharedPrograms.h"

#include "../plan/PlanContainer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

using namespace tofu::plan;
using namespace tofu::test;
namespace ct = tofu::plan::container;

namespace {

std::vector<uint8_t> bytesOf(const Plan &plan) {
  std::vector<uint8_t> bytes;
  EXPECT_EQ(writePlanBytes(plan, bytes), "");
  return bytes;
}

/// Re-signs the header after a deliberate edit of it.
void resignHeader(std::vector<uint8_t> &bytes) {
  size_t headerSize = ct::loadLE(&bytes[ct::kOffHeaderSize], 4);
  ct::storeLE(&bytes[ct::kOffHeaderChecksum],
              ct::headerChecksum(bytes.data(), headerSize), 8);
}

/// Offset of section table entry `i`.
size_t entry(size_t i) {
  return ct::kFixedHeaderBytes + i * ct::kSectionEntryBytes;
}

std::string readError(const std::vector<uint8_t> &bytes) {
  Plan plan;
  return readPlanBytes(bytes, plan);
}

/// Flips every bit of section `section` of `clean`, one at a time, re-signs
/// the section and the header so that the reader's structural checks (not
/// its checksums) see the damage, and expects some but not all results to be
/// rejected. Nothing may crash (the suite also runs under sanitizers).
void expectResignedSectionDamageHandled(const std::vector<uint8_t> &clean,
                                        size_t section) {
  uint64_t off = ct::loadLE(&clean[entry(section) + 8], 8);
  uint64_t size = ct::loadLE(&clean[entry(section) + 16], 8);
  size_t rejected = 0, total = 0;
  std::vector<uint8_t> bytes = clean;
  for (uint64_t i = off; i < off + size; ++i)
    for (int bit = 0; bit < 8; ++bit) {
      bytes[i] ^= static_cast<uint8_t>(1u << bit);
      ct::storeLE(&bytes[entry(section) + 24], ct::contentChecksum(&bytes[off], size),
                  8);
      resignHeader(bytes);
      if (!readError(bytes).empty())
        ++rejected;
      ++total;
      bytes[i] = clean[i];
    }
  EXPECT_GT(rejected, 0u) << "section " << section;
  EXPECT_LT(rejected, total) << "section " << section;
}

TEST(PlanFormat, RoundTripThroughFile) {
  Plan plan = makeTwoDevicePlan();
  // Format 1.8: a label tensor's ignore_index round-trips; absent stays
  // absent.
  plan.tensors[kL].ignoreIndex = -100;
  std::string path = ::testing::TempDir() + "roundtrip.plan.bin";
  ASSERT_EQ(writePlan(plan, path), "");
  Plan back;
  ASSERT_EQ(readPlan(path, back), "");
  std::remove(path.c_str());

  EXPECT_EQ(back.producer, plan.producer);
  EXPECT_EQ(back.modelFingerprint, plan.modelFingerprint);
  EXPECT_EQ(back.numDevices, 2u);
  EXPECT_EQ(back.batchSize, 4);
  EXPECT_EQ(back.commBytes, 88u);
  EXPECT_EQ(back.lossTensor, kLoss);
  EXPECT_EQ(back.paramUpdates, plan.paramUpdates);
  EXPECT_EQ(back.onnxModel, plan.onnxModel);
  EXPECT_EQ(back.summary, plan.summary);
  EXPECT_DOUBLE_EQ(back.optimizer.learningRate, plan.optimizer.learningRate);
  ASSERT_EQ(back.tensors.size(), plan.tensors.size());
  for (size_t t = 0; t < plan.tensors.size(); ++t) {
    EXPECT_EQ(back.tensors[t].name, plan.tensors[t].name);
    EXPECT_EQ(back.tensors[t].shape, plan.tensors[t].shape);
    EXPECT_EQ(back.tensors[t].role, plan.tensors[t].role);
    EXPECT_EQ(back.tensors[t].dtype, plan.tensors[t].dtype);
    EXPECT_EQ(back.tensors[t].tiling.size(), plan.tensors[t].tiling.size());
    EXPECT_EQ(back.tensors[t].paramName, plan.tensors[t].paramName);
    EXPECT_EQ(back.tensors[t].gradientOf, plan.tensors[t].gradientOf);
    EXPECT_EQ(back.tensors[t].pairedInput, plan.tensors[t].pairedInput);
    EXPECT_EQ(back.tensors[t].numClasses, plan.tensors[t].numClasses);
    EXPECT_EQ(back.tensors[t].ignoreIndex, plan.tensors[t].ignoreIndex);
  }
  for (size_t d = 0; d < 2; ++d) {
    const DeviceProgram &a = plan.devices[d], &b = back.devices[d];
    EXPECT_EQ(a.peakBytes, b.peakBytes);
    EXPECT_EQ(a.commBytes, b.commBytes);
    ASSERT_EQ(a.buffers.size(), b.buffers.size());
    for (size_t i = 0; i < a.buffers.size(); ++i) {
      EXPECT_EQ(a.buffers[i].region.lo, b.buffers[i].region.lo);
      EXPECT_EQ(a.buffers[i].region.hi, b.buffers[i].region.hi);
      EXPECT_EQ(a.buffers[i].offset, b.buffers[i].offset);
      EXPECT_EQ(a.buffers[i].owned, b.buffers[i].owned);
      EXPECT_EQ(a.buffers[i].partial, b.buffers[i].partial);
      EXPECT_EQ(a.buffers[i].init, b.buffers[i].init);
    }
    ASSERT_EQ(a.instrs.size(), b.instrs.size());
    for (size_t i = 0; i < a.instrs.size(); ++i) {
      EXPECT_EQ(a.instrs[i].kind, b.instrs[i].kind);
      EXPECT_EQ(a.instrs[i].seq, b.instrs[i].seq);
      EXPECT_EQ(a.instrs[i].kernel, b.instrs[i].kernel);
      EXPECT_EQ(a.instrs[i].inputs, b.instrs[i].inputs);
      EXPECT_EQ(a.instrs[i].outputs, b.instrs[i].outputs);
      EXPECT_EQ(a.instrs[i].inputGlobalShapes(), b.instrs[i].inputGlobalShapes());
      EXPECT_EQ(a.instrs[i].attrs().size(), b.instrs[i].attrs().size());
      EXPECT_EQ(a.instrs[i].dst, b.instrs[i].dst);
      EXPECT_EQ(a.instrs[i].pieces.size(), b.instrs[i].pieces.size());
    }
  }
  // Writing what was read gives the same bytes again.
  EXPECT_EQ(bytesOf(back), bytesOf(plan));
}

TEST(PlanFormat, Deterministic) {
  EXPECT_EQ(bytesOf(makeTwoDevicePlan()), bytesOf(makeTwoDevicePlan()));
}

TEST(PlanFormat, MissingFileNamesThePath) {
  Plan plan;
  std::string err = readPlan("/nonexistent/dir/plan.bin", plan);
  EXPECT_NE(err.find("/nonexistent/dir/plan.bin"), std::string::npos) << err;
}

TEST(PlanFormat, EveryTruncationIsRejected) {
  std::vector<uint8_t> bytes = bytesOf(makeTwoDevicePlan());
  for (size_t len = 0; len < bytes.size(); ++len) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + len);
    EXPECT_NE(readError(cut), "") << "length " << len;
  }
  // Appending is rejected too.
  bytes.push_back(0);
  EXPECT_NE(readError(bytes), "");
}

TEST(PlanFormat, EverySingleBitFlipIsRejected) {
  std::vector<uint8_t> bytes = bytesOf(makeTwoDevicePlan());
  ASSERT_EQ(readError(bytes), "");
  for (size_t i = 0; i < bytes.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      bytes[i] ^= static_cast<uint8_t>(1u << bit);
      std::string err = readError(bytes);
      EXPECT_NE(err, "") << "byte " << i << " bit " << bit;
      bytes[i] ^= static_cast<uint8_t>(1u << bit);
    }
}

/// Flips every bit of the PLAN section and re-signs the file, so that the
/// FlatBuffers verifier and the index checks see the damage. Each result may
/// load or be rejected, but nothing may crash (run under sanitizers too).
TEST(PlanFormat, ResignedPlanSectionDamageNeverCrashes) {
  const std::vector<uint8_t> clean = bytesOf(makeTwoDevicePlan());
  expectResignedSectionDamageHandled(clean, 0);
}

TEST(PlanFormat, NewerMajorVersion) {
  std::vector<uint8_t> bytes = bytesOf(makeTwoDevicePlan());
  ct::storeLE(&bytes[ct::kOffMajor], 5, 2);
  ct::storeLE(&bytes[ct::kOffMinor], 0, 2);
  EXPECT_EQ(readError(bytes),
            "plan.bin format 5.0 is newer than this tofu-run supports (4.x); "
            "rebuild tofu-run or recompile the plan");
}

/// A newer minor is refused (issue 18): FlatBuffers would let this reader
/// skip its new fields silently.
TEST(PlanFormat, NewerMinorVersionIsRefused) {
  std::vector<uint8_t> bytes = bytesOf(makeTwoDevicePlan());
  ct::storeLE(&bytes[ct::kOffMinor], ct::kMinor + 1, 2);
  resignHeader(bytes);
  EXPECT_EQ(readError(bytes),
            "plan.bin format 4." + std::to_string(ct::kMinor + 1) +
                " is newer than this tofu-run reads (4." +
                std::to_string(ct::kMinor) +
                "): it may use features this tofu-run would ignore; rebuild "
                "tofu-run or recompile the plan with this tofuc");
}

/// Format 1.x stored every device's copy of an op's programs in its
/// instructions (issue 20 moved them into Plan.op_specs, with new field
/// ids), and 2.x every device's pieces of a collective (3.0: one source
/// table per collective), and 3.x every device's buffers and instructions
/// (4.0: one program per class of devices): older plans are refused by
/// their version before their schema is read.
TEST(PlanFormat, OlderMajorIsRefused) {
  for (auto [major, minor] : {std::pair<int, int>{1, 9}, {2, 0}, {3, 0}}) {
    std::vector<uint8_t> bytes = bytesOf(makeTwoDevicePlan());
    ct::storeLE(&bytes[ct::kOffMajor], major, 2);
    ct::storeLE(&bytes[ct::kOffMinor], minor, 2);
    resignHeader(bytes);
    EXPECT_EQ(readError(bytes),
              "plan.bin format " + std::to_string(major) + "." +
                  std::to_string(minor) +
                  " is older than this tofu-run supports (4.x: format 4.0 "
                  "stores each class of devices' program once); recompile "
                  "the plan with this tofuc");
  }
}

/// contentChecksum changes with every single-bit flip and with the length,
/// also across the 32-byte block boundary and in the tail, and streaming in
/// pieces gives the one-shot value.
TEST(PlanFormat, ContentChecksumSeesEveryBitAndLength) {
  std::vector<uint8_t> data(77);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<uint8_t>(i * 37 + 11);
  const uint64_t clean = ct::contentChecksum(data.data(), data.size());
  for (size_t i = 0; i < data.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      data[i] ^= static_cast<uint8_t>(1u << bit);
      EXPECT_NE(ct::contentChecksum(data.data(), data.size()), clean)
          << "byte " << i << " bit " << bit;
      data[i] ^= static_cast<uint8_t>(1u << bit);
    }
  EXPECT_NE(ct::contentChecksum(data.data(), data.size() - 1), clean);
  for (size_t cut : {0, 1, 31, 32, 33, 64, 76, 77}) {
    ct::ContentHasher h;
    h.update(data.data(), cut);
    h.update(data.data() + cut, data.size() - cut);
    EXPECT_EQ(h.digest(), clean) << "cut at " << cut;
  }
}

TEST(PlanFormat, BadMagic) {
  std::vector<uint8_t> bytes = bytesOf(makeTwoDevicePlan());
  bytes[0] = 'X';
  std::string err = readError(bytes);
  EXPECT_NE(err.find("expected magic \"TOFUPLAN\", found \"XOFUPLAN\""),
            std::string::npos)
      << err;
  EXPECT_NE(readError({0x89, 'P', 'N', 'G', 0, 0, 0, 0, 0, 0, 0, 0, 0}), "");
}

TEST(PlanFormat, OverlappingSections) {
  std::vector<uint8_t> bytes = bytesOf(makeTwoDevicePlan());
  // Move the WEIGHTS section (entry 1) onto the PLAN section (entry 0).
  uint64_t planOffset = ct::loadLE(&bytes[entry(0) + 8], 8);
  ct::storeLE(&bytes[entry(1) + 8], planOffset, 8);
  resignHeader(bytes);
  std::string err = readError(bytes);
  EXPECT_NE(err.find("WEIGHTS section overlaps the PLAN section"),
            std::string::npos)
      << err;
}

TEST(PlanFormat, SectionOutsideTheFile) {
  std::vector<uint8_t> bytes = bytesOf(makeTwoDevicePlan());
  ct::storeLE(&bytes[entry(2) + 16], bytes.size(), 8);
  resignHeader(bytes);
  std::string err = readError(bytes);
  EXPECT_NE(err.find("MODEL section"), std::string::npos) << err;
  EXPECT_NE(err.find("outside the file"), std::string::npos) << err;
}

TEST(PlanFormat, ChecksumMessageNamesTheSection) {
  std::vector<uint8_t> bytes = bytesOf(makeTwoDevicePlan());
  uint64_t weights = ct::loadLE(&bytes[entry(1) + 8], 8);
  bytes[weights] ^= 0x40;
  std::string err = readError(bytes);
  EXPECT_NE(err.find("checksum mismatch in the WEIGHTS section: expected 0x"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find(", found 0x"), std::string::npos) << err;
  EXPECT_NE(err.find("the file is corrupt; recompile it with tofuc"),
            std::string::npos)
      << err;
}

/// Writes `plan` (which the writer accepts as is) and expects the reader to
/// reject it with a message containing `needle`.
void expectInvalid(const Plan &plan, const std::string &needle) {
  std::vector<uint8_t> bytes;
  ASSERT_EQ(writePlanBytes(plan, bytes), "");
  std::string err = readError(bytes);
  EXPECT_NE(err.find(needle), std::string::npos) << err;
  EXPECT_NE(err.find("invalid plan"), std::string::npos) << err;
}

TEST(PlanIndices, BufferTensorOutOfRange) {
  Plan plan = makeTwoDevicePlan();
  plan.devices[1].buffers[kBufY].tensor = 99;
  expectInvalid(plan, "device 1 buffer 1: tensor id 99 is out of range");
}

TEST(PlanIndices, PieceDeviceOutOfRange) {
  Plan plan = makeTwoDevicePlan();
  plan.devices[0].instrs[1].pieces[1].device = 2;
  expectInvalid(plan, "device 2 does not exist");
}

TEST(PlanIndices, PieceBufferOutOfRange) {
  Plan plan = makeTwoDevicePlan();
  plan.devices[0].instrs[1].pieces[1].buffer = 42;
  expectInvalid(plan, "buffer 42 does not exist on device 1");
}

TEST(PlanIndices, PieceOutsideItsSourceBuffer) {
  Plan plan = makeTwoDevicePlan();
  plan.devices[0].instrs[1].pieces[1].region = {{1, 0}, {3, 4}};
  expectInvalid(plan, "not inside its source buffer's region");
}

TEST(PlanIndices, BufferBeyondPeak) {
  Plan plan = makeTwoDevicePlan();
  plan.devices[0].buffers[kBufWn].offset = plan.devices[0].peakBytes - 4;
  expectInvalid(plan, "exceed the device arena");
}

/// Format 4.0 stores a device's regions in one table whose layout follows
/// the ranks of its buffers' tensors: a region of another rank leaves the
/// table too short or too long for the program.
TEST(PlanIndices, BoxRankDiffersFromTensorRank) {
  // The last buffer: L, rank 1.
  Plan plan = makeTwoDevicePlan();
  ASSERT_EQ(plan.devices[0].buffers.size(), kBufLFull + 1u);
  plan.devices[0].buffers[kBufLFull].region = {{}, {}};
  expectInvalid(plan, "device 0 buffer 10: the device's regions end before "
                      "this buffer's");
  plan = makeTwoDevicePlan();
  Box &region = plan.devices[0].buffers[kBufLFull].region;
  // Read as rank 1, its first two values are the right region; two are
  // left over.
  region = {{region.lo[0], region.hi[0]}, {9, 9}};
  expectInvalid(plan, "device 0: its regions hold");
}

/// Format 4.0: devices whose buffers and instructions are the same up to
/// regions and reduction bounds share one stored program, and each gets its
/// own regions and bounds back; any other difference gives a program of its
/// own.
TEST(PlanPrograms, DevicesOfAClassShareOneProgram) {
  Plan plan = makeTwoDevicePlan();
  Plan back;
  ASSERT_EQ(readPlanBytes(bytesOf(plan), back), "");
  EXPECT_EQ(back.storedPrograms, 2u); // the two devices differ
  // Two devices that each run the one-device plan's program: the same
  // buffers and instructions (device 1's pieces read device 0's buffers,
  // which have the same ids and regions); device 1's X buffer holds other
  // rows and its reduction bounds differ.
  plan = withProgramsOnly(makeOneDevicePlan());
  // A reduction: device 0 takes its whole ranges, device 1 the upper halves.
  size_t reducing = 0;
  for (; reducing < plan.devices[0].instrs.size(); ++reducing) {
    const Instr &instr = plan.devices[0].instrs[reducing];
    if (instr.kind == Instr::Kind::Compute && instr.programs().size() == 1 &&
        !instr.programs()[0].topReductionVars.empty())
      break;
  }
  ASSERT_LT(reducing, plan.devices[0].instrs.size());
  const ExprProgram &reduction = plan.devices[0].instrs[reducing].programs()[0];
  std::vector<std::pair<int64_t, int64_t>> whole, upper;
  for (int var : reduction.topReductionVars) {
    int64_t extent = reduction.varExtents[var];
    whole.push_back({0, extent});
    upper.push_back({extent / 2, extent});
  }
  plan.devices[0].instrs[reducing].reductionRanges = {whole};
  plan.numDevices = 2;
  plan.devices.push_back(plan.devices[0]);
  Buffer &x = plan.devices[1].buffers[kBufX];
  ASSERT_FALSE(x.hasInit());
  x.region.lo[1] = 2; // columns [2, 4) of rows [0, 4): a 4x2 tile
  x.bytes /= 2;
  plan.devices[0].buffers[kBufX].region.hi[1] = 2;
  plan.devices[0].buffers[kBufX].bytes /= 2;
  plan.devices[1].instrs[reducing].reductionRanges = {upper};
  back = Plan();
  ASSERT_EQ(readPlanBytes(bytesOf(plan), back), "");
  EXPECT_EQ(back.storedPrograms, 1u);
  for (size_t d = 0; d < 2; ++d) {
    ASSERT_EQ(back.devices[d].buffers.size(), plan.devices[d].buffers.size());
    for (size_t b = 0; b < plan.devices[d].buffers.size(); ++b) {
      EXPECT_EQ(back.devices[d].buffers[b].region.lo,
                plan.devices[d].buffers[b].region.lo);
      EXPECT_EQ(back.devices[d].buffers[b].region.hi,
                plan.devices[d].buffers[b].region.hi);
    }
    for (size_t i = 0; i < plan.devices[d].instrs.size(); ++i)
      EXPECT_EQ(back.devices[d].instrs[i].reductionRanges,
                plan.devices[d].instrs[i].reductionRanges);
  }
  EXPECT_NE(back.devices[0].buffers[kBufX].region.lo,
            back.devices[1].buffers[kBufX].region.lo);
  // A different arena offset, or one more reduction range, is another
  // program.
  Plan offset = plan;
  offset.devices[1].buffers[kBufY].offset += 64;
  offset.devices[1].peakBytes += 64;
  back = Plan();
  ASSERT_EQ(readPlanBytes(bytesOf(offset), back), "");
  EXPECT_EQ(back.storedPrograms, 2u);
  EXPECT_EQ(back.devices[1].buffers[kBufY].offset,
            offset.devices[1].buffers[kBufY].offset);
}

/// ReadOptions::sharePrograms: device 1 runs device 0's stored program in
/// memory too (SharedPrograms.h), with its own regions, bounds and weight
/// tiles; expanded, the plan is the one read without sharing, and written
/// again it gives the same bytes.
TEST(PlanPrograms, ReadSharedProgramsExpandToTheSamePlan) {
  Plan plan = withProgramsOnly(makeOneDevicePlan());
  plan.numDevices = 2;
  plan.devices.push_back(plan.devices[0]);
  Buffer &x = plan.devices[1].buffers[kBufX];
  x.region.lo[1] = 2;
  x.bytes /= 2;
  plan.devices[0].buffers[kBufX].region.hi[1] = 2;
  plan.devices[0].buffers[kBufX].bytes /= 2;
  size_t withInit = 0;
  for (Buffer &buf : plan.devices[1].buffers)
    if (!buf.init.empty()) {
      buf.init[0] ^= 0x5a; // device 1's weights are its own
      ++withInit;
    }
  ASSERT_GT(withInit, 0u);
  const std::string path = ::testing::TempDir() + "/shared.plan.bin";
  ASSERT_EQ(writePlan(plan, path), "");
  ReadOptions copies, shared;
  copies.expandCollectives = shared.expandCollectives = false;
  shared.sharePrograms = true;
  Plan want, got;
  ASSERT_EQ(readPlan(path, want, copies), "");
  ASSERT_EQ(readPlan(path, got, shared), "");
  EXPECT_EQ(want.devices[1].programOf, -1);
  ASSERT_EQ(got.devices[1].programOf, 0);
  EXPECT_TRUE(got.devices[1].buffers.empty());
  EXPECT_EQ(bufferRegion(got, 1, kBufX).lo[1], 2);
  EXPECT_EQ(got.devices[1].sharedInits.size(), withInit);
  std::vector<uint8_t> wantBytes, gotBytes;
  ASSERT_EQ(writePlanBytes(want, wantBytes), "");
  ASSERT_EQ(writePlanBytes(got, gotBytes), "");
  EXPECT_TRUE(wantBytes == gotBytes);
  expandSharedPrograms(got);
  for (size_t d = 0; d < 2; ++d) {
    ASSERT_EQ(got.devices[d].buffers.size(), want.devices[d].buffers.size());
    for (size_t b = 0; b < want.devices[d].buffers.size(); ++b) {
      const Buffer &w = want.devices[d].buffers[b], &g = got.devices[d].buffers[b];
      EXPECT_EQ(g.region.lo, w.region.lo);
      EXPECT_EQ(g.region.hi, w.region.hi);
      EXPECT_EQ(g.init, w.init);
    }
    ASSERT_EQ(got.devices[d].instrs.size(), want.devices[d].instrs.size());
    for (size_t i = 0; i < want.devices[d].instrs.size(); ++i)
      EXPECT_EQ(got.devices[d].instrs[i].reductionRanges,
                want.devices[d].instrs[i].reductionRanges);
  }
}

TEST(PlanIndices, ComputeBufferOutOfRange) {
  Plan plan = makeTwoDevicePlan();
  plan.devices[1].instrs[0].outputs = {17};
  expectInvalid(plan, "output buffer 17 does not exist");
}

TEST(PlanIndices, DeviceCountMismatch) {
  Plan plan = makeTwoDevicePlan();
  plan.numDevices = 3;
  expectInvalid(plan, "says it has 3 devices but holds 2");
}

TEST(PlanIndices, WrongByteCount) {
  Plan plan = makeTwoDevicePlan();
  plan.devices[0].buffers[kBufY].bytes = 31;
  expectInvalid(plan, "31 bytes recorded but its region needs 32");
}

TEST(PlanIndices, EveryDTypeRoundTrips) {
  // Format 1.7: a tensor of each element type round-trips, and a buffer of
  // a 2-byte type is checked against its region with the type's size.
  Plan plan = makeTwoDevicePlan();
  size_t first = plan.tensors.size();
  for (uint8_t code = 0; code < kNumDTypes; ++code) {
    TensorInfo t;
    t.name = std::string("t_") + dtypeNumpyName(static_cast<DType>(code));
    t.dtype = static_cast<DType>(code);
    t.shape = {3};
    plan.tensors.push_back(t);
  }
  plan.tensors[kY].dtype = DType::F16;
  for (auto &device : plan.devices)
    for (auto &buf : device.buffers)
      if (buf.tensor == kY)
        buf.bytes = buf.region.numElements() * 2;
  Plan back;
  ASSERT_EQ(readPlanBytes(bytesOf(plan), back), "");
  for (uint8_t code = 0; code < kNumDTypes; ++code)
    EXPECT_EQ(back.tensors[first + code].dtype, static_cast<DType>(code));
  EXPECT_EQ(back.tensors[kY].dtype, DType::F16);
  // The same buffers read as float32 sizes are wrong.
  plan.tensors[kY].dtype = DType::F32;
  EXPECT_NE(readPlanBytes(bytesOf(plan), back), "");
}

TEST(PlanIndices, UnknownDType) {
  Plan plan = makeTwoDevicePlan();
  plan.tensors[kY].dtype = static_cast<DType>(kNumDTypes);
  expectInvalid(plan, "unknown dtype 13");
}

TEST(PlanIndices, UnknownRole) {
  Plan plan = makeTwoDevicePlan();
  plan.tensors[kY].role = static_cast<TensorRole>(9);
  expectInvalid(plan, "unknown role 9");
}

//===----------------------------------------------------------------------===//
// Expression programs (format 1.1)
//===----------------------------------------------------------------------===//

bool sameProgram(const ExprProgram &a, const ExprProgram &b) {
  if (a.varExtents != b.varExtents || a.outputVars != b.outputVars ||
      a.topReductionVars != b.topReductionVars || a.root != b.root ||
      a.nodes.size() != b.nodes.size())
    return false;
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const ExprNode &x = a.nodes[i], &y = b.nodes[i];
    if (x.kind != y.kind || x.value != y.value || x.var != y.var ||
        x.input != y.input || x.binary != y.binary ||
        x.function != y.function || x.reducer != y.reducer ||
        x.operands != y.operands || x.vars != y.vars)
      return false;
  }
  return true;
}

TEST(PlanPrograms, RoundTrip) {
  Plan plan = withProgramsOnly(makeTwoDevicePlan());
  // Every node field with a non-default value somewhere.
  ExprProgram &relu = plan.devices[1].instrs[0].editSpec().programs[0];
  relu.nodes[3].value = -1.5;
  relu.nodes[4].binary = BinaryOp::Or;
  relu.nodes[4].reducer = Reducer::Prod;
  TensorInfo flag;
  flag.name = "flag";
  flag.dtype = DType::Bool;
  flag.shape = {3};
  plan.tensors.push_back(flag);
  Plan back;
  ASSERT_EQ(readPlanBytes(bytesOf(plan), back), "");
  EXPECT_EQ(back.tensors.back().dtype, DType::Bool);
  for (size_t d = 0; d < 2; ++d)
    for (size_t i = 0; i < plan.devices[d].instrs.size(); ++i) {
      const Instr &a = plan.devices[d].instrs[i], &b = back.devices[d].instrs[i];
      ASSERT_EQ(a.programs().size(), b.programs().size());
      for (size_t o = 0; o < a.programs().size(); ++o)
        EXPECT_TRUE(sameProgram(a.programs()[o], b.programs()[o]))
            << "device " << d << " instruction " << i;
      EXPECT_EQ(a.reductionRanges, b.reductionRanges);
    }
  EXPECT_EQ(back.devices[1].instrs[1].reductionRanges,
            (std::vector<std::vector<std::pair<int64_t, int64_t>>>{{{2, 4}}}));
}

TEST(PlanPrograms, VersionIsFourZero) {
  std::vector<uint8_t> bytes = bytesOf(makeTwoDevicePlan());
  EXPECT_EQ(ct::loadLE(&bytes[ct::kOffMajor], 2), 4u);
  EXPECT_EQ(ct::loadLE(&bytes[ct::kOffMinor], 2), 0u);
}

/// The two-device plan with its label all-gather, gradient reduce-scatter
/// and loss all-reduce as collectives (format 3.0): each names one source
/// table shared by both devices' instructions, as tofuc's materialize makes
/// them, instead of listing pieces.
Plan withCollectives() {
  Plan plan = makeTwoDevicePlan();
  auto table = [&](int32_t buffer) {
    return makeCollectiveSources(plan, {buffer, buffer});
  };
  auto labels = table(kBufL), grads = table(kBufPPartial),
       losses = table(kBufLossPartial);
  for (DeviceProgram &dev : plan.devices)
    for (Instr &in : dev.instrs) {
      if (in.kind == Instr::Kind::Compute)
        continue;
      if (in.dst == kBufLFull)
        in.sources = labels;
      else if (in.dst == kBufP)
        in.sources = grads;
      else if (in.dst == kBufLoss)
        in.sources = losses;
      if (in.sources)
        in.pieces.clear();
    }
  return plan;
}

/// SharedName: copies share one block, compare by contents, read as
/// std::string; the empty name holds nothing.
TEST(PlanNames, CopiesShareOneString) {
  SharedName a = std::string("layer0.attention.query.MatMul");
  SharedName b = a;
  SharedName c = "layer0.attention.query.MatMul";
  EXPECT_TRUE(a.sharesWith(b));
  EXPECT_FALSE(a.sharesWith(c));
  EXPECT_EQ(a, c);
  EXPECT_EQ(a, "layer0.attention.query.MatMul");
  EXPECT_EQ(std::string("layer0.attention.query.MatMul"), a);
  EXPECT_NE(a, "layer0");
  EXPECT_EQ(a.str().data(), b.str().data());
  EXPECT_EQ("op " + a + ".", "op layer0.attention.query.MatMul.");
  SharedName moved = std::move(b);
  EXPECT_TRUE(moved.sharesWith(a));
  EXPECT_TRUE(b.empty());
  a = SharedName();
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.str(), "");
  EXPECT_EQ(moved, "layer0.attention.query.MatMul"); // still held by `moved`
  EXPECT_TRUE(SharedName("").empty());
}

/// The reader shares the op and kernel names that plan.bin stores once
/// among all the instructions that name them (so that a plan of k devices
/// holds each name once in memory), and writing what it read gives the
/// same bytes.
TEST(PlanNames, ReaderSharesEqualNames) {
  Plan plan = makeTwoDevicePlan();
  std::vector<uint8_t> bytes = bytesOf(plan);
  Plan back;
  ASSERT_EQ(readPlanBytes(bytes, back), "");
  std::map<std::string, SharedName> first;
  size_t shared = 0;
  for (size_t d = 0; d < back.devices.size(); ++d)
    for (size_t i = 0; i < back.devices[d].instrs.size(); ++i) {
      const Instr &in = back.devices[d].instrs[i];
      EXPECT_EQ(in.op, plan.devices[d].instrs[i].op);
      EXPECT_EQ(in.kernel, plan.devices[d].instrs[i].kernel);
      for (const SharedName *name : {&in.op, &in.kernel}) {
        if (name->empty())
          continue;
        auto [it, added] = first.emplace(name->str(), *name);
        if (!added) {
          EXPECT_TRUE(it->second.sharesWith(*name))
              << "device " << d << " instruction " << i << ": " << *name;
          ++shared;
        }
      }
    }
  EXPECT_GT(shared, 4u); // both devices run the same ops
  std::vector<uint8_t> again;
  ASSERT_EQ(writePlanBytes(back, again), "");
  EXPECT_EQ(again, bytes);
}

/// The pieces of each collective are derived from its table in the order
/// materialize lists them (the device's own first), the table is stored
/// once and shared again by the reader, the plan is smaller than with
/// pieces, and writing what was read gives the same bytes, expanded or not.
TEST(PlanCollectives, DerivedPiecesRoundTrip) {
  Plan plan = withCollectives();
  // Device 1's label all-gather: its own half first, then device 0's.
  const Instr &gather = plan.devices[1].instrs[2];
  ASSERT_EQ(gather.dst, kBufLFull);
  std::vector<Piece> pieces = derivePieces(plan, 1, gather);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].device, 1);
  EXPECT_EQ(pieces[0].buffer, kBufL);
  EXPECT_EQ(pieces[0].region.lo, std::vector<int64_t>{2});
  EXPECT_EQ(pieces[0].region.hi, std::vector<int64_t>{4});
  EXPECT_EQ(pieces[1].device, 0);
  EXPECT_EQ(pieces[1].region.lo, std::vector<int64_t>{0});
  EXPECT_EQ(pieces[1].region.hi, std::vector<int64_t>{2});
  // Device 0's gradient reduce-scatter: rows [0, 2) of both partial sums.
  const Instr &reduce = plan.devices[0].instrs[5];
  ASSERT_EQ(reduce.dst, kBufP);
  pieces = derivePieces(plan, 0, reduce);
  ASSERT_EQ(pieces.size(), 2u);
  for (int e = 0; e < 2; ++e) {
    EXPECT_EQ(pieces[e].device, e);
    EXPECT_EQ(pieces[e].region.lo, std::vector<int64_t>{0});
    EXPECT_EQ(pieces[e].region.hi, std::vector<int64_t>{2});
  }
  // The scalar loss all-reduce: one piece per device.
  ASSERT_EQ(plan.devices[1].instrs[5].dst, kBufLoss);
  EXPECT_EQ(derivePieces(plan, 1, plan.devices[1].instrs[5]).size(), 2u);

  std::vector<uint8_t> bytes = bytesOf(plan);
  EXPECT_LT(bytes.size(), bytesOf(makeTwoDevicePlan()).size());
  Plan back;
  ASSERT_EQ(readPlanBytes(bytes, back), "");
  std::set<const CollectiveSources *> tables;
  for (size_t d = 0; d < 2; ++d)
    for (size_t i = 0; i < plan.devices[d].instrs.size(); ++i) {
      const Instr &in = back.devices[d].instrs[i];
      EXPECT_EQ(in.sources != nullptr,
                plan.devices[d].instrs[i].sources != nullptr);
      if (!in.sources)
        continue;
      // Expanded for the runtimes, equal to the derived pieces.
      std::vector<Piece> want = derivePieces(plan, d, plan.devices[d].instrs[i]);
      ASSERT_EQ(in.pieces.size(), want.size()) << d << " " << i;
      for (size_t p = 0; p < want.size(); ++p) {
        EXPECT_EQ(in.pieces[p].device, want[p].device);
        EXPECT_EQ(in.pieces[p].buffer, want[p].buffer);
        EXPECT_EQ(in.pieces[p].region.lo, want[p].region.lo);
        EXPECT_EQ(in.pieces[p].region.hi, want[p].region.hi);
      }
      tables.insert(in.sources.get());
    }
  EXPECT_EQ(tables.size(), 3u); // shared by both devices again
  std::vector<uint8_t> again;
  ASSERT_EQ(writePlanBytes(back, again), "");
  EXPECT_EQ(again, bytes);

  // Unexpanded: no pieces, the same ones through forEachPiece.
  std::string path = ::testing::TempDir() + "/collectives.plan.bin";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  ReadOptions compact;
  compact.expandCollectives = false;
  Plan lean;
  ASSERT_EQ(readPlan(path, lean, compact), "");
  std::remove(path.c_str());
  const Instr &leanGather = lean.devices[1].instrs[2];
  EXPECT_TRUE(leanGather.pieces.empty());
  EXPECT_EQ(derivePieces(lean, 1, leanGather).size(), 2u);
  ASSERT_EQ(writePlanBytes(lean, again), "");
  EXPECT_EQ(again, bytes);
}

/// hasUnexpandedCollectives asks whether some collective lacks the pieces its
/// table gives it, not whether its list is empty: a Fetch into a buffer of
/// no elements (tofuc's one-device plans have dozens) derives none, and a
/// plan whose only such collective is that one is expanded. Run 15 on an
/// H200 had the CUDA executor refuse every tofuc plan with collectives
/// because the test was the latter.
TEST(PlanCollectives, ACollectiveThatDerivesNoPieceIsExpanded) {
  Plan plan = makeTwoDevicePlan();
  ASSERT_FALSE(hasUnexpandedCollectives(plan)); // explicit pieces only
  // Device 0 fetches labels into an empty buffer of the label tensor.
  Buffer none = plan.devices[0].buffers[kBufL];
  none.region = Box{{2}, {2}};
  none.bytes = 0;
  none.owned = false;
  const int32_t noneId = static_cast<int32_t>(plan.devices[0].buffers.size());
  plan.devices[0].buffers.push_back(none);
  Instr fetch;
  fetch.kind = Instr::Kind::Fetch;
  fetch.seq = 2;
  fetch.dst = noneId;
  fetch.sources = makeCollectiveSources(plan, {kBufL, kBufL});
  ASSERT_TRUE(derivePieces(plan, 0, fetch).empty());
  plan.devices[0].instrs.push_back(fetch);
  EXPECT_FALSE(hasUnexpandedCollectives(plan));
  EXPECT_EQ(expandedCopy(plan), nullptr);
  // The same table into the whole label buffer derives pieces: unexpanded
  // until expandCollectives fills them.
  fetch.dst = kBufLFull;
  plan.devices[0].instrs.push_back(fetch);
  EXPECT_TRUE(hasUnexpandedCollectives(plan));
  expandCollectives(plan);
  EXPECT_FALSE(hasUnexpandedCollectives(plan));
  EXPECT_EQ(plan.devices[0].instrs.back().pieces.size(), 2u);
}

/// A fetch stops at the first source that holds its whole region (the
/// device's own first): the same rule as materialize's explicit pieces.
TEST(PlanCollectives, FetchStopsAtAWholeSource) {
  Plan plan = makeTwoDevicePlan();
  // Both devices hold all labels in kBufLFull: device 1 fetching them
  // from that table needs only its own copy.
  Instr fetch;
  fetch.kind = Instr::Kind::Fetch;
  fetch.seq = 2;
  fetch.dst = kBufLFull;
  fetch.sources = makeCollectiveSources(plan, {kBufLFull, kBufLFull});
  std::vector<Piece> pieces = derivePieces(plan, 1, fetch);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].device, 1);
  // A reduction of the same sources adds both.
  fetch.kind = Instr::Kind::Reduce;
  EXPECT_EQ(derivePieces(plan, 1, fetch).size(), 2u);
  // A device without a source (-1) contributes nothing.
  fetch.sources = makeCollectiveSources(plan, {-1, kBufLFull});
  pieces = derivePieces(plan, 0, fetch);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].device, 1);
}

TEST(PlanCollectives, DamagedTablesAreRejected) {
  {
    Plan plan = withCollectives();
    ASSERT_EQ(plan.devices[1].instrs[2].dst, kBufLFull);
    auto bad = std::make_shared<CollectiveSources>(
        *plan.devices[1].instrs[2].sources);
    bad->buffers[1] = 42;
    plan.devices[1].instrs[2].sources = bad;
    expectInvalid(plan, "buffer 42 does not exist on device 1");
  }
  {
    Plan plan = withCollectives();
    auto bad = std::make_shared<CollectiveSources>(
        *plan.devices[1].instrs[2].sources);
    bad->buffers.push_back(0);
    plan.devices[1].instrs[2].sources = bad;
    expectInvalid(plan, "source table has 3 entries for 2 devices");
  }
  {
    // A table of rank-2 buffers (Y) for a rank-1 destination (labels).
    Plan plan = withCollectives();
    plan.devices[1].instrs[2].sources =
        makeCollectiveSources(plan, {kBufY, kBufY});
    expectInvalid(plan, "has rank 2 but the destination buffer has rank 1");
  }
  {
    // Source and destination of different element types (F32 vs I64).
    Plan plan = withCollectives();
    plan.devices[1].instrs[2].sources =
        makeCollectiveSources(plan, {kBufP, kBufP});
    expectInvalid(plan, "of another element type than the destination");
  }
}

/// A plan of k devices whose buffer 0 holds device e's tile of a tensor of
/// `shape` cut at each grid step s (k = product of `steps`) along `cuts[s]`
/// (-1: replicated) into balanced parts, as tofuc's tilings do.
Plan gridPlan(const std::vector<int64_t> &shape,
              const std::vector<int64_t> &steps,
              const std::vector<int64_t> &cuts) {
  Plan plan;
  TensorInfo tensor;
  tensor.name = "t";
  tensor.shape = shape;
  plan.tensors.push_back(tensor);
  size_t k = 1;
  for (int64_t s : steps)
    k *= static_cast<size_t>(s);
  plan.numDevices = static_cast<uint32_t>(k);
  plan.devices.resize(k);
  for (size_t e = 0; e < k; ++e) {
    Buffer tile;
    tile.tensor = 0;
    tile.region.lo.assign(shape.size(), 0);
    tile.region.hi = shape;
    size_t stride = k;
    for (size_t s = 0; s < steps.size(); ++s) {
      stride /= static_cast<size_t>(steps[s]);
      int64_t coord = static_cast<int64_t>(e / stride) % steps[s];
      if (cuts[s] < 0)
        continue;
      int64_t lo = tile.region.lo[cuts[s]], size = tile.region.hi[cuts[s]] - lo;
      tile.region.lo[cuts[s]] = lo + size * coord / steps[s];
      tile.region.hi[cuts[s]] = lo + size * (coord + 1) / steps[s];
    }
    plan.devices[e].buffers.push_back(tile);
  }
  return plan;
}

/// Pieces by the plain scan of every source (the table without its index).
std::vector<Piece> scannedPieces(const Plan &plan, size_t device, Instr in) {
  auto plain = std::make_shared<CollectiveSources>(*in.sources);
  plain->index = nullptr;
  in.sources = plain;
  return derivePieces(plan, device, in);
}

/// The index of a source table (CollectiveSourceIndex) gives the pieces of
/// the scan of every source, in the same order, and remoteElements their
/// remote elements, for tables of tilings with uneven, empty and replicated
/// parts, sources missing (-1), and destinations of every kind: inside one
/// tile, across tiles, empty, outside the tensor.
TEST(PlanCollectives, IndexGivesTheScansPieces) {
  struct Case {
    std::vector<int64_t> shape, steps, cuts;
  };
  const Case cases[] = {
      {{12, 10}, {4, 2}, {0, 1}},       {{7, 5, 3}, {2, 3, 2}, {0, 0, 1}},
      {{3, 8}, {4, 2}, {0, 1}},         {{16}, {2, 2, 2, 2}, {0, -1, 0, 0}},
      {{9, 9}, {3, 3}, {-1, 1}},        {{5, 6, 7}, {2, 2, 2}, {2, 1, 0}},
      {{}, {2, 2}, {-1, -1}},           {{6, 4}, {8}, {0}},
  };
  uint64_t seed = 12345;
  auto next = [&](int64_t bound) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int64_t>((seed >> 33) % static_cast<uint64_t>(bound));
  };
  size_t indexed = 0, compared = 0;
  for (const Case &c : cases) {
    for (int missing = 0; missing < 2; ++missing) {
      Plan plan = gridPlan(c.shape, c.steps, c.cuts);
      const size_t k = plan.devices.size(), rank = c.shape.size();
      std::vector<int32_t> buffers(k, 0);
      if (missing)
        buffers[next(static_cast<int64_t>(k))] = -1;
      // Destinations: random boxes (some empty or outside), one per device
      // and try, as buffer 1.. of the device.
      for (size_t d = 0; d < k; ++d)
        for (int t = 0; t < 12; ++t) {
          Buffer dst;
          dst.tensor = 0;
          for (size_t i = 0; i < rank; ++i) {
            int64_t a = next(c.shape[i] + 2) - 1, b = next(c.shape[i] + 2) - 1;
            dst.region.lo.push_back(std::min(a, b));
            dst.region.hi.push_back(std::max(a, b) + (t % 3 == 0 ? 0 : 1));
          }
          plan.devices[d].buffers.push_back(dst);
        }
      // Owned tiles themselves as destinations too (buffer 0).
      auto table = makeCollectiveSources(plan, buffers);
      indexed += table->index != nullptr;
      for (size_t d = 0; d < k; ++d)
        for (int32_t b = 0; b < static_cast<int32_t>(plan.devices[d].buffers.size()); ++b)
          for (Instr::Kind kind : {Instr::Kind::Fetch, Instr::Kind::Reduce}) {
            Instr in;
            in.kind = kind;
            in.dst = b;
            in.sources = table;
            std::vector<Piece> got = derivePieces(plan, d, in);
            std::vector<Piece> want = scannedPieces(plan, d, in);
            ASSERT_EQ(got.size(), want.size()) << "device " << d << " dst " << b;
            uint64_t remote = 0;
            for (size_t p = 0; p < want.size(); ++p) {
              EXPECT_EQ(got[p].device, want[p].device);
              EXPECT_EQ(got[p].buffer, want[p].buffer);
              EXPECT_EQ(got[p].region.lo, want[p].region.lo);
              EXPECT_EQ(got[p].region.hi, want[p].region.hi);
              if (static_cast<size_t>(want[p].device) != d)
                remote += static_cast<uint64_t>(want[p].region.numElements());
            }
            EXPECT_EQ(remoteElements(plan, d, in), remote)
                << "device " << d << " dst " << b;
            // The same sources by cells.
            std::set<size_t> byCells, byPieces;
            for (const Piece &piece : want)
              byPieces.insert(static_cast<size_t>(piece.device));
            const CollectiveSourceIndex &index = *table->index;
            EXPECT_TRUE(forEachSourceCell(
                plan, d, in,
                [&](uint64_t cell) {
                  for (uint32_t j = index.cellStart[cell];
                       j < index.cellStart[cell + 1]; ++j)
                    EXPECT_TRUE(byCells
                                    .insert(static_cast<size_t>(
                                        index.cellDevices[j]))
                                    .second);
                },
                [&](size_t e) { EXPECT_TRUE(byCells.insert(e).second); }));
            EXPECT_EQ(byCells, byPieces) << "device " << d << " dst " << b;
            ++compared;
          }
    }
  }
  EXPECT_EQ(indexed, 2 * std::size(cases)); // every tiling is a grid
  EXPECT_GT(compared, 1000u);
}

/// Sources whose ranges overlap in a dimension are no grid: no index, and
/// the scan gives the pieces.
TEST(PlanCollectives, OverlappingSourcesAreScanned) {
  Plan plan = gridPlan({8}, {2}, {0});
  plan.devices[1].buffers[0].region.lo = {2}; // [2, 8) overlaps [0, 4)
  auto table = makeCollectiveSources(plan, {0, 0});
  EXPECT_EQ(table->index, nullptr);
  Instr in;
  in.kind = Instr::Kind::Reduce;
  in.dst = 0;
  in.sources = table;
  std::vector<Piece> pieces = derivePieces(plan, 0, in);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[1].region.lo, std::vector<int64_t>{2});
  EXPECT_EQ(remoteElements(plan, 0, in), 2u);
}

/// Every bit flip of a PLAN section with collectives, re-signed: rejected
/// or read, never a crash.
TEST(PlanCollectives, ResignedDamageNeverCrashes) {
  expectResignedSectionDamageHandled(bytesOf(withCollectives()), 0);
}

/// The two-device plan with programs, where the instructions of each op on
/// both devices point at one OpSpec (as tofuc's materialize makes them).
Plan withSharedSpecs() {
  Plan plan = withProgramsOnly(makeTwoDevicePlan());
  for (Instr &in : plan.devices[1].instrs)
    for (const Instr &first : plan.devices[0].instrs)
      if (in.kind == Instr::Kind::Compute && first.seq == in.seq &&
          first.kernel == in.kernel)
        in.spec = first.spec;
  return plan;
}

/// Instructions that share an OpSpec share it in plan.bin (format 2.0): it
/// is stored once, the plan is smaller than with one copy per device, the
/// reader shares it again, and writing what was read gives the same bytes.
TEST(PlanPrograms, SharedSpecsAreStoredOnce) {
  Plan shared = withSharedSpecs();
  size_t computes = 0;
  for (const Instr &in : shared.devices[0].instrs)
    computes += in.kind == Instr::Kind::Compute;
  ASSERT_GT(computes, 2u);
  std::vector<uint8_t> sharedBytes = bytesOf(shared);
  std::vector<uint8_t> copiedBytes =
      bytesOf(withProgramsOnly(makeTwoDevicePlan()));
  EXPECT_LT(sharedBytes.size(), copiedBytes.size());
  Plan back;
  ASSERT_EQ(readPlanBytes(sharedBytes, back), "");
  size_t sharedPairs = 0;
  for (size_t i = 0; i < back.devices[1].instrs.size(); ++i) {
    const Instr &b = back.devices[1].instrs[i];
    const Instr &orig = shared.devices[1].instrs[i];
    EXPECT_EQ(b.spec != nullptr, b.kind == Instr::Kind::Compute) << i;
    for (size_t j = 0; j < back.devices[0].instrs.size(); ++j)
      if (orig.spec && shared.devices[0].instrs[j].spec == orig.spec) {
        EXPECT_EQ(back.devices[0].instrs[j].spec.get(), b.spec.get())
            << "instruction " << i;
        ++sharedPairs;
      }
    ASSERT_EQ(b.programs().size(), orig.programs().size());
    for (size_t o = 0; o < b.programs().size(); ++o)
      EXPECT_TRUE(sameProgram(b.programs()[o], orig.programs()[o]));
    EXPECT_EQ(b.inputGlobalShapes(), orig.inputGlobalShapes());
    EXPECT_EQ(b.attrs().size(), orig.attrs().size());
  }
  EXPECT_EQ(sharedPairs, computes);
  // Per-device parts stay per device.
  EXPECT_EQ(back.devices[1].instrs[1].reductionRanges,
            shared.devices[1].instrs[1].reductionRanges);
  std::vector<uint8_t> again;
  ASSERT_EQ(writePlanBytes(back, again), "");
  EXPECT_EQ(again, sharedBytes);
  // Editing one instruction's spec leaves the others' alone.
  Instr &edited = back.devices[1].instrs[0];
  Attr extra;
  extra.name = "extra";
  extra.kind = Attr::Kind::Int;
  edited.editSpec().attrs.push_back(extra);
  EXPECT_NE(edited.spec.get(), back.devices[0].instrs[0].spec.get());
  EXPECT_EQ(back.devices[0].instrs[0].attrs().size() + 1,
            edited.attrs().size());
}

/// A shared spec whose programs are damaged is reported at its first use,
/// whichever device that is.
TEST(PlanPrograms, DamagedSharedSpecIsRejected) {
  Plan plan = withSharedSpecs();
  plan.devices[0].instrs[0].editSpec().programs[0].root = 99;
  plan.devices[1].instrs[0].spec = plan.devices[0].instrs[0].spec;
  expectInvalid(plan, "device 0 instruction 0 (ReluByProgram) program 0:");
}

/// The two-device plan with programs and a CUDA section (format 1.6): one
/// kernel launched for device 1's Relu (rows [2, 4) of X -> Y).
Plan withCudaModule() {
  Plan plan = withProgramsOnly(makeTwoDevicePlan());
  CudaModule &m = plan.cuda;
  m.arch = "sm_90";
  m.compiler = "Cuda compilation tools, release 13.0, V13.0.88";
  m.source = "// generated\n";
  m.cubin = {0x7f, 'E', 'L', 'F', 1, 2, 3};
  CudaKernel k;
  k.name = "tofu_k0_ReluByProgram";
  k.kind = "elementwise";
  k.ops = "ReluByProgram";
  k.numPointers = 2;
  k.numParams = 9;
  m.kernels.push_back(k);
  CudaLaunch l;
  l.device = 1;
  l.firstInstr = 0;
  l.kernel = 0;
  l.numElements = 8;
  l.buffers = {kBufY, kBufX};
  l.params = {8, 2, 0, 2, 4, 2, 0, 2, 4};
  m.launches.push_back(l);
  return plan;
}

TEST(PlanCuda, RoundTrip) {
  Plan plan = withCudaModule();
  std::vector<uint8_t> bytes = bytesOf(plan);
  EXPECT_EQ(ct::loadLE(&bytes[ct::kOffNumSections], 4), 4u);
  EXPECT_EQ(ct::loadLE(&bytes[entry(3)], 4), uint64_t(ct::kSectionCuda));
  Plan back;
  ASSERT_EQ(readPlanBytes(bytes, back), "");
  const CudaModule &m = back.cuda;
  EXPECT_EQ(m.arch, "sm_90");
  EXPECT_EQ(m.compiler, plan.cuda.compiler);
  EXPECT_EQ(m.source, plan.cuda.source);
  EXPECT_EQ(m.cubin, plan.cuda.cubin);
  ASSERT_EQ(m.kernels.size(), 1u);
  EXPECT_EQ(m.kernels[0].name, "tofu_k0_ReluByProgram");
  EXPECT_EQ(m.kernels[0].kind, "elementwise");
  EXPECT_EQ(m.kernels[0].numParams, 9u);
  EXPECT_EQ(m.kernels[0].blockSize, 256u);
  ASSERT_EQ(m.launches.size(), 1u);
  EXPECT_EQ(m.launches[0].device, 1);
  EXPECT_EQ(m.launches[0].buffers, plan.cuda.launches[0].buffers);
  EXPECT_EQ(m.launches[0].params, plan.cuda.launches[0].params);
  EXPECT_EQ(bytesOf(back), bytes);
}

// A plan without CUDA kernels has no CUDA section: the same three sections
// as format 1.5.
TEST(PlanCuda, AbsentWithoutKernels) {
  std::vector<uint8_t> bytes = bytesOf(makeTwoDevicePlan());
  EXPECT_EQ(ct::loadLE(&bytes[ct::kOffNumSections], 4), 3u);
  Plan back;
  ASSERT_EQ(readPlanBytes(bytes, back), "");
  EXPECT_TRUE(back.cuda.arch.empty());
}

TEST(PlanCuda, BadLaunchesAreRejected) {
  auto edit = [](auto change, const std::string &needle) {
    Plan plan = withCudaModule();
    change(plan.cuda);
    expectInvalid(plan, needle);
  };
  edit([](CudaModule &m) { m.arch = "gpu90"; }, "architecture 'gpu90'");
  edit([](CudaModule &m) { m.launches[0].device = 2; },
       "launch 0 is on device 2");
  edit([](CudaModule &m) { m.launches[0].firstInstr = 99; },
       "outside device 1's program");
  edit([](CudaModule &m) { m.launches[0].kernel = 1; }, "names kernel 1");
  edit([](CudaModule &m) { m.launches[0].buffers.push_back(kBufX); },
       "passes 3 pointers");
  edit([](CudaModule &m) { m.launches[0].buffers[1] = 99; }, "is buffer 99");
  edit([](CudaModule &m) { m.launches[0].buffers[0] = -1; }, "is buffer -1");
  edit([](CudaModule &m) { m.launches[0].numElements = 16; },
       "computes 16 elements");
  edit([](CudaModule &m) { m.kernels[0].blockSize = 4096; }, "block size");
}

/// Every bit of the CUDA section, re-signed: rejected or loaded, never a
/// crash.
TEST(PlanCuda, ResignedDamageNeverCrashes) {
  const std::vector<uint8_t> clean = bytesOf(withCudaModule());
  expectResignedSectionDamageHandled(clean, 3);
}

// Format 1.2: a plan compiled with --no-weights says so, and the flag
// survives the round trip (default: false).
TEST(PlanWithoutWeights, FlagRoundTrips) {
  Plan plan = makeTwoDevicePlan();
  Plan back;
  ASSERT_EQ(readPlanBytes(bytesOf(plan), back), "");
  EXPECT_FALSE(back.withoutWeights);
  plan.withoutWeights = true;
  ASSERT_EQ(readPlanBytes(bytesOf(plan), back), "");
  EXPECT_TRUE(back.withoutWeights);
}

// Format 1.4: optimizer state tensors (role 7) are read back as such.
TEST(PlanIndices, StateRoleRoundTrips) {
  Plan plan = makeTwoDevicePlan();
  plan.tensors[kY].role = TensorRole::State;
  Plan back;
  ASSERT_EQ(readPlanBytes(bytesOf(plan), back), "");
  EXPECT_EQ(back.tensors[kY].role, TensorRole::State);
}

TEST(PlanPrograms, EverySingleBitFlipIsRejected) {
  const std::vector<uint8_t> clean = bytesOf(withProgramsOnly(makeTwoDevicePlan()));
  std::vector<uint8_t> bytes = clean;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    bytes[i] ^= static_cast<uint8_t>(1u << (i % 8));
    EXPECT_NE(readError(bytes), "") << "byte " << i;
    bytes[i] = clean[i];
  }
}

/// Every bit of the PLAN section of a plan with programs, re-signed: the
/// FlatBuffers verifier and the program checks see the damage. Nothing may
/// crash (run under sanitizers too), and what loads must run or fail
/// cleanly in the interpreter's own checks.
TEST(PlanPrograms, ResignedDamageNeverCrashes) {
  const std::vector<uint8_t> clean =
      bytesOf(withProgramsOnly(makeTwoDevicePlan()));
  expectResignedSectionDamageHandled(clean, 0);
}

/// The two-device plan with programs, its device-1 Relu program edited.
template <typename Edit> void expectInvalidProgram(Edit edit,
                                                   const std::string &needle) {
  Plan plan = withProgramsOnly(makeTwoDevicePlan());
  edit(plan.devices[1].instrs[0], plan.devices[1].instrs[1]);
  expectInvalid(plan, needle);
}

TEST(PlanPrograms, CorruptProgramsAreRejected) {
  using I = Instr;
  expectInvalidProgram([](I &r, I &) { r.editSpec().programs[0].nodes[4].operands = {2, 4}; },
                       "node 4: operand 4 is not an earlier node");
  expectInvalidProgram([](I &r, I &) { r.editSpec().programs[0].nodes[2].operands = {0, 3}; },
                       "node 2: operand 3 is not an earlier node");
  expectInvalidProgram([](I &r, I &) { r.editSpec().programs[0].nodes[0].var = 2; },
                       "node 0: variable 2 is out of range");
  expectInvalidProgram([](I &r, I &) { r.editSpec().programs[0].nodes[2].input = 1; },
                       "node 2: input 1 is out of range");
  expectInvalidProgram([](I &r, I &) { r.editSpec().programs[0].nodes[2].operands = {0}; },
                       "has 1 indices but the input has rank 2");
  expectInvalidProgram([](I &r, I &) { r.editSpec().programs[0].root = 5; },
                       "root 5 is not a node id");
  expectInvalidProgram([](I &r, I &) { r.editSpec().programs[0].root = -1; },
                       "root -1 is not a node id");
  expectInvalidProgram(
      [](I &r, I &) { r.editSpec().programs[0].nodes[1].kind = static_cast<ExprNode::Kind>(9); },
      "node 1: unknown node kind 9");
  expectInvalidProgram(
      [](I &r, I &) {
        r.editSpec().programs[0].nodes[4].kind = ExprNode::Kind::Binary;
        r.editSpec().programs[0].nodes[4].binary = static_cast<BinaryOp>(99);
      },
      "unknown binary operator 99");
  expectInvalidProgram(
      [](I &r, I &) { r.editSpec().programs[0].nodes[4].function = static_cast<Function>(50); },
      "unknown function 50");
  expectInvalidProgram(
      [](I &r, I &) { r.editSpec().programs[0].nodes[4].function = Function::Select; },
      "expects 3 operands, has 2");
  expectInvalidProgram([](I &r, I &) { r.editSpec().programs[0].outputVars = {0}; },
                       "1 output variables for an output of rank 2");
  expectInvalidProgram([](I &r, I &) { r.editSpec().programs[0].varExtents[1] = -3; },
                       "negative extent");
  expectInvalidProgram([](I &r, I &) { r.editSpec().programs.push_back(r.programs()[0]); },
                       "2 expression programs for 1 outputs");
  expectInvalidProgram(
      [](I &, I &s) { s.editSpec().programs[0].nodes[3].reducer = static_cast<Reducer>(7); },
      "unknown reducer 7");
  expectInvalidProgram([](I &, I &s) { s.editSpec().programs[0].nodes[3].vars = {2}; },
                       "reduction variable 2 is out of range");
  expectInvalidProgram([](I &, I &s) { s.editSpec().programs[0].nodes[3].vars = {0}; },
                       "is an output variable");
  expectInvalidProgram([](I &, I &s) { s.editSpec().programs[0].topReductionVars = {0}; },
                       "top-level reduction variable 0 is not bound");
  expectInvalidProgram([](I &, I &s) { s.reductionRanges = {{{2, 5}}}; },
                       "reduction range [2, 5) of variable 1 is not inside [0, 4)");
  expectInvalidProgram([](I &, I &s) { s.reductionRanges = {{{3, 2}}}; },
                       "is not inside");
  expectInvalidProgram([](I &, I &s) { s.reductionRanges = {{{0, 1}, {0, 1}}}; },
                       "2 reduction ranges for 1 top-level");
  expectInvalidProgram([](I &, I &s) { s.reductionRanges = {{}, {}}; },
                       "2 reduction range lists for 1 expression programs");
}

TEST(PlanWriter, InitSizeMustMatch) {
  Plan plan = makeTwoDevicePlan();
  plan.devices[0].buffers[kBufW].init.push_back(0);
  std::vector<uint8_t> bytes;
  EXPECT_NE(writePlanBytes(plan, bytes), "");
}

} // namespace

// writePlan streams the sections from the plan's buffers (the weights are
// not assembled in memory); the file must equal writePlanBytes' image.
TEST(PlanWriter, StreamedFileEqualsBytes) {
  Plan plan = makeTwoDevicePlan();
  std::vector<uint8_t> expected = bytesOf(plan);
  std::string path = ::testing::TempDir() + "/streamed.plan.bin";
  ASSERT_EQ(writePlan(plan, path), "");
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> found((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  EXPECT_EQ(found, expected);
  Plan back;
  EXPECT_EQ(readPlan(path, back), "");
  std::remove(path.c_str());
}

namespace {

std::vector<uint8_t> slurpFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

void spill(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

/// Expects `back` to hold the initial contents of device `d` only (all
/// devices for d < 0).
void expectShards(const Plan &plan, const Plan &back, int d) {
  ASSERT_EQ(back.devices.size(), plan.devices.size());
  size_t withInit = 0;
  for (size_t e = 0; e < plan.devices.size(); ++e)
    for (size_t b = 0; b < plan.devices[e].buffers.size(); ++b) {
      const auto &want = plan.devices[e].buffers[b].init;
      const auto &got = back.devices[e].buffers[b].init;
      if (d < 0 || static_cast<int>(e) == d)
        EXPECT_EQ(got, want) << "device " << e << " buffer " << b;
      else
        EXPECT_TRUE(got.empty()) << "device " << e << " buffer " << b;
      withInit += !want.empty();
    }
  EXPECT_GT(withInit, 0u);
}

// Format 1.5: a process reads only its own weight shard.
TEST(PlanShards, OnlyDeviceReadsItsOwnShard) {
  Plan plan = makeTwoDevicePlan();
  plan.onnxModel = {1, 2, 3, 4};
  std::string path = ::testing::TempDir() + "shards.plan.bin";
  ASSERT_EQ(writePlan(plan, path), "");
  for (int d = 0; d < 2; ++d) {
    Plan back;
    ReadOptions only;
    only.onlyDevice = d;
    only.loadModel = false;
    ASSERT_EQ(readPlan(path, back, only), "");
    expectShards(plan, back, d);
    EXPECT_TRUE(back.onnxModel.empty());
    only.loadModel = true;
    ASSERT_EQ(readPlan(path, back, only), "");
    EXPECT_EQ(back.onnxModel, plan.onnxModel);
  }
  Plan back;
  ReadOptions beyond;
  beyond.onlyDevice = 2;
  EXPECT_NE(readPlan(path, back, beyond).find("the plan has 2 devices"),
            std::string::npos);

  // Damage one byte of device 1's shard: device 0 alone still reads (its
  // process never looks at device 1's bytes); device 1 and a full read
  // report the damage.
  std::vector<uint8_t> bytes = slurpFile(path);
  uint64_t weights = ct::loadLE(&bytes[entry(1) + 8], 8);
  uint64_t device0 = 0;
  for (const Buffer &buf : plan.devices[0].buffers)
    device0 += buf.init.size();
  bytes[weights + device0 + 1] ^= 0x40;
  spill(path, bytes);
  ReadOptions only;
  only.onlyDevice = 0;
  EXPECT_EQ(readPlan(path, back, only), "");
  only.onlyDevice = 1;
  std::string err = readPlan(path, back, only);
  EXPECT_NE(err.find("device 1: checksum mismatch in its weights in the "
                     "WEIGHTS section"),
            std::string::npos)
      << err;
  err = readPlan(path, back);
  EXPECT_NE(err.find("checksum mismatch in the WEIGHTS section"),
            std::string::npos)
      << err;
  std::remove(path.c_str());
}

// Format 1.5: weights in external files next to plan.bin, one per device,
// named after their checksum; missing, truncated or altered files are
// errors; the files and plan.bin are deterministic.
TEST(PlanShards, ExternalWeightFiles) {
  namespace fs = std::filesystem;
  Plan plan = makeTwoDevicePlan();
  const std::string dirA = ::testing::TempDir() + "ext-a/",
                    dirB = ::testing::TempDir() + "ext-b/";
  for (const std::string &dir : {dirA, dirB}) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  WriteOptions external;
  external.externalWeightsAbove = 0;
  ASSERT_EQ(writePlan(plan, dirA + "plan.bin", external), "");
  ASSERT_EQ(writePlan(plan, dirB + "other.bin", external), "");
  std::vector<uint8_t> bytes = slurpFile(dirA + "plan.bin");
  EXPECT_EQ(bytes, slurpFile(dirB + "other.bin"));
  EXPECT_EQ(ct::loadLE(&bytes[entry(1) + 16], 8), 0u)
      << "the WEIGHTS section should be empty";

  Plan back;
  ASSERT_EQ(readPlan(dirA + "plan.bin", back), "");
  expectShards(plan, back, -1);
  std::vector<std::string> files;
  for (const DeviceProgram &dev : back.devices) {
    ASSERT_EQ(dev.weightsFile.size(), 16u + std::string(".tofu-weights").size())
        << dev.weightsFile;
    files.push_back(dev.weightsFile);
    EXPECT_EQ(slurpFile(dirA + dev.weightsFile),
              slurpFile(dirB + dev.weightsFile));
  }
  ASSERT_NE(files[0], files[1]);
  // In memory, the files cannot be found.
  EXPECT_NE(readError(bytes).find("read the plan from its file"),
            std::string::npos);

  // Device 1 reads only its own file.
  fs::remove(dirA + files[0]);
  ReadOptions only;
  only.onlyDevice = 1;
  ASSERT_EQ(readPlan(dirA + "plan.bin", back, only), "");
  expectShards(plan, back, 1);
  std::string err = readPlan(dirA + "plan.bin", back);
  EXPECT_NE(err.find("device 0: cannot open its external weights file '" +
                     dirA + files[0] + "'"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("keep the .tofu-weights files next to plan.bin"),
            std::string::npos)
      << err;
  // One piece of advice, not a second "; recompile it with tofuc".
  EXPECT_EQ(err.find("recompile it with tofuc"),
            err.rfind("recompile it with tofuc"))
      << err;

  std::vector<uint8_t> shard = slurpFile(dirB + files[0]);
  std::vector<uint8_t> cut(shard.begin(), shard.end() - 1);
  spill(dirA + files[0], cut);
  err = readPlan(dirA + "plan.bin", back);
  EXPECT_NE(err.find("is " + std::to_string(cut.size()) + " bytes, expected " +
                     std::to_string(shard.size()) + " (truncated or replaced)"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("recompile"), err.rfind("recompile")) << err;

  std::vector<uint8_t> altered = shard;
  altered[0] ^= 1;
  spill(dirA + files[0], altered);
  err = readPlan(dirA + "plan.bin", back);
  EXPECT_NE(err.find("device 0: checksum mismatch in its weights in external "
                     "weights file"),
            std::string::npos)
      << err;
  fs::remove_all(dirA);
  fs::remove_all(dirB);
}

// Weights go external only above the threshold.
TEST(PlanShards, ExternalAboveThreshold) {
  namespace fs = std::filesystem;
  Plan plan = makeTwoDevicePlan();
  uint64_t total = 0;
  for (const DeviceProgram &dev : plan.devices)
    for (const Buffer &buf : dev.buffers)
      total += buf.init.size();
  const std::string dir = ::testing::TempDir() + "ext-threshold/";
  fs::remove_all(dir);
  fs::create_directories(dir);
  WriteOptions opts;
  opts.externalWeightsAbove = total;
  ASSERT_EQ(writePlan(plan, dir + "plan.bin", opts), "");
  EXPECT_EQ(slurpFile(dir + "plan.bin"), bytesOf(plan));
  opts.externalWeightsAbove = total - 1;
  ASSERT_EQ(writePlan(plan, dir + "plan.bin", opts), "");
  Plan back;
  ASSERT_EQ(readPlan(dir + "plan.bin", back), "");
  EXPECT_FALSE(back.devices[0].weightsFile.empty());
  fs::remove_all(dir);
}

} // namespace
