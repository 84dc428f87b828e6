//===- UpdateInPlaceTest.cpp - parameters updated where they live ---------===//
//
// updateParamsInPlace and planMemory on small hand-built plans: a parameter
// tile whose new value an SGDUpdate computes on the same device loses its
// end-of-step copy and shares the parameter's bytes; the update moves to
// the step's end when the parameter is read after it; and every case that
// would not give the same values (another kernel, a copy from another
// device, another reader of the new value) keeps the copy, also for a
// device that shares its program with one that drops it.
//
//===----------------------------------------------------------------------===//
#include "tofu/Target/PlanBuilder.h"
#include "tofu/runtime/CollectivePieces.h"
#include "tofu/runtime/SharedPrograms.h"

#include <gtest/gtest.h>

namespace {

namespace plan = tofu::plan;

/// Tensors: 0 W (param), 1 G (its gradient), 2 W' (W's new value), 3 X (an
/// activation). Each device owns all of W, G, W' ([0, 16) floats).
struct Builder {
  plan::Plan p;
  explicit Builder(int devices) {
    const char *names[] = {"W", "G", "W.sgd", "X"};
    const plan::TensorRole roles[] = {
        plan::TensorRole::Param, plan::TensorRole::Gradient,
        plan::TensorRole::Updated, plan::TensorRole::Activation};
    for (int t = 0; t < 4; ++t) {
      plan::TensorInfo tensor;
      tensor.name = names[t];
      tensor.shape = {16};
      tensor.dtype = plan::DType::F32;
      tensor.role = roles[t];
      p.tensors.push_back(tensor);
    }
    p.paramUpdates = {{0, 2}};
    p.devices.resize(devices);
    for (auto &device : p.devices)
      for (int t = 0; t < 4; ++t) {
        plan::Buffer buffer;
        buffer.tensor = t;
        buffer.owned = true;
        buffer.region.lo = {0};
        buffer.region.hi = {16};
        buffer.bytes = 64;
        device.buffers.push_back(buffer);
      }
  }
  plan::Instr compute(const char *kernel, int64_t seq,
                      std::vector<int32_t> inputs, int32_t output) {
    plan::Instr instr;
    instr.kind = plan::Instr::Kind::Compute;
    instr.kernel = kernel;
    instr.seq = seq;
    instr.inputs = std::move(inputs);
    instr.outputs = {output};
    return instr;
  }
  /// The end-of-step copy of W' (on `from`) into W.
  plan::Instr copy(int64_t seq, int32_t from) {
    plan::Instr instr;
    instr.kind = plan::Instr::Kind::Fetch;
    instr.op = "param-update";
    instr.seq = seq;
    instr.dst = 0;
    plan::Piece piece;
    piece.device = from;
    piece.buffer = 2;
    piece.region.lo = {0};
    piece.region.hi = {16};
    instr.pieces.push_back(piece);
    return instr;
  }
  /// Device d: G = Grad(X); W' = kernel(W, G) at seq 4; [reader of W at
  /// seq 5]; copy at seq 9.
  void step(int d, const char *kernel = "SGDUpdate", bool readAfter = false,
            int32_t copyFrom = -1) {
    auto &instrs = p.devices[d].instrs;
    instrs.push_back(compute("Grad", 1, {3}, 1));
    instrs.push_back(compute(kernel, 4, {0, 1}, 2));
    if (readAfter)
      instrs.push_back(compute("Use", 5, {0}, 3));
    instrs.push_back(copy(9, copyFrom < 0 ? d : copyFrom));
  }
  bool hasCopy(int d) const {
    for (const plan::Instr &instr : p.devices[d].instrs)
      if (instr.kind == plan::Instr::Kind::Fetch)
        return true;
    return false;
  }
  const plan::Instr &update(int d) const {
    for (const plan::Instr &instr : p.devices[d].instrs)
      if (!instr.outputs.empty() && instr.outputs[0] == 2)
        return instr;
    ADD_FAILURE() << "no update";
    return p.devices[d].instrs.front();
  }
};

TEST(UpdateInPlace, DropsTheCopyAndSharesTheParametersBytes) {
  Builder b(1);
  b.step(0);
  tofu::updateParamsInPlace(b.p);
  EXPECT_FALSE(b.hasCopy(0));
  EXPECT_EQ(b.update(0).seq, 4); // stays: nothing reads W after it
  EXPECT_EQ(tofu::inPlaceUpdatedBuffers(b.p, 0),
            (std::vector<int32_t>{-1, -1, 0, -1}));
  // The bound planMemory returns leaves W' out (in W's bytes), as
  // liveBytesLowerBound does.
  EXPECT_EQ(tofu::planMemory(b.p), tofu::liveBytesLowerBound(b.p));
  const auto &buffers = b.p.devices[0].buffers;
  EXPECT_EQ(buffers[2].offset, buffers[0].offset);
  EXPECT_EQ(buffers[2].bytes, 64u);
  // W', G, X do not need W's bytes: 64-byte W, and G/X never live with W'
  // except G (read by the update): W + G + X at most, W' adds nothing.
  EXPECT_LE(b.p.devices[0].peakBytes, 3u * 64);
}

TEST(UpdateInPlace, MovesTheUpdateWhenTheParameterIsReadAfterIt) {
  Builder b(1);
  b.step(0, "SGDUpdate", /*readAfter=*/true);
  tofu::updateParamsInPlace(b.p);
  EXPECT_FALSE(b.hasCopy(0));
  // At the copy's place, after the reader.
  EXPECT_EQ(b.update(0).seq, 9);
  EXPECT_EQ(b.p.devices[0].instrs.back().outputs[0], 2);
}

TEST(UpdateInPlace, MovesTheUpdateWhenAnotherDeviceReadsTheParameterAfterIt) {
  Builder b(2);
  b.step(0);
  b.step(1);
  // Device 1 fetches device 0's W at seq 6, after device 0's update.
  plan::Instr fetch;
  fetch.kind = plan::Instr::Kind::Fetch;
  fetch.seq = 6;
  fetch.dst = 3;
  plan::Piece piece;
  piece.device = 0;
  piece.buffer = 0;
  piece.region.lo = {0};
  piece.region.hi = {16};
  fetch.pieces.push_back(piece);
  b.p.devices[1].instrs.insert(b.p.devices[1].instrs.begin() + 2, fetch);
  tofu::updateParamsInPlace(b.p);
  EXPECT_FALSE(b.hasCopy(0));
  EXPECT_EQ(b.update(0).seq, 9);
  EXPECT_EQ(b.update(1).seq, 4);
}

TEST(UpdateInPlace, CollectivesNamedBySourceTables) {
  // Plan format 3.0: the copies name the new value's owned tiles (one
  // table, a buffer per device) instead of listing their pieces; device 1
  // gathers W's tiles through W's table at seq 6, after the updates.
  Builder b(2);
  b.step(0);
  b.step(1);
  auto updatedTiles = tofu::plan::makeCollectiveSources(b.p, {2, 2});
  auto paramTiles = tofu::plan::makeCollectiveSources(b.p, {0, 0});
  for (auto &device : b.p.devices)
    for (auto &instr : device.instrs)
      if (instr.kind == plan::Instr::Kind::Fetch) {
        instr.pieces.clear();
        instr.sources = updatedTiles;
      }
  plan::Instr gather;
  gather.kind = plan::Instr::Kind::Fetch;
  gather.seq = 6;
  gather.dst = 3;
  gather.sources = paramTiles;
  b.p.devices[1].instrs.insert(b.p.devices[1].instrs.begin() + 2, gather);
  tofu::updateParamsInPlace(b.p);
  EXPECT_FALSE(b.hasCopy(0));
  // Device 1's own gather is a Fetch too: only its copy is gone.
  size_t fetches = 0;
  for (const plan::Instr &instr : b.p.devices[1].instrs)
    fetches += instr.kind == plan::Instr::Kind::Fetch;
  EXPECT_EQ(fetches, 1u);
  // The table names W on both devices: both updates move after seq 6.
  EXPECT_EQ(b.update(0).seq, 9);
  EXPECT_EQ(b.update(1).seq, 9);
}

TEST(UpdateInPlace, KeepsTheCopyOfOtherKernels) {
  Builder b(1);
  b.step(0, "Momentum");
  tofu::updateParamsInPlace(b.p);
  EXPECT_TRUE(b.hasCopy(0));
  EXPECT_EQ(tofu::inPlaceUpdatedBuffers(b.p, 0)[2], -1);
  tofu::planMemory(b.p);
  EXPECT_NE(b.p.devices[0].buffers[2].offset, b.p.devices[0].buffers[0].offset);
}

TEST(UpdateInPlace, KeepsACopyFromAnotherDevice) {
  Builder b(2);
  b.step(0);
  b.step(1, "SGDUpdate", false, /*copyFrom=*/0);
  tofu::updateParamsInPlace(b.p);
  // Device 1 reads device 0's new value: device 0's copy is the only one
  // that could go, and its new value has another reader.
  EXPECT_TRUE(b.hasCopy(0));
  EXPECT_TRUE(b.hasCopy(1));
}

TEST(UpdateInPlace, KeepsTheCopyWhenTheNewValueHasAnotherReader) {
  Builder b(1);
  b.step(0);
  b.p.devices[0].instrs.push_back(b.compute("Use", 7, {2}, 3));
  tofu::updateParamsInPlace(b.p);
  EXPECT_TRUE(b.hasCopy(0));
}

/// Devices 0 and 1 run one shared program (SharedPrograms.h); device 2
/// reads device 1's new value W', so only device 0 may drop its copy: the
/// shared program must not decide for device 1.
TEST(UpdateInPlace, DevicesSharingAProgramDecideEachForItself) {
  Builder b(3);
  // The copies take W' from a source table, as tofuc's do.
  auto table = plan::makeCollectiveSources(b.p, {2, 2, 2});
  for (int d : {0, 2}) {
    b.step(d);
    plan::Instr &copy = b.p.devices[d].instrs.back();
    copy.pieces.clear();
    copy.sources = table;
  }
  plan::Instr read;
  read.kind = plan::Instr::Kind::Fetch;
  read.seq = 6;
  read.dst = 3;
  read.pieces.push_back({1, 2, plan::Box{{0}, {16}}});
  b.p.devices[2].instrs.insert(b.p.devices[2].instrs.begin() + 2, read);
  b.p.devices[0].regionStarts = {0, 2, 4, 6, 8};
  b.p.devices[1].buffers.clear();
  b.p.devices[1].programOf = 0;
  b.p.devices[1].sharedRegions = {0, 16, 0, 16, 0, 16, 0, 16};

  tofu::updateParamsInPlace(b.p);
  tofu::planMemory(b.p);
  plan::expandSharedPrograms(b.p);
  EXPECT_FALSE(b.hasCopy(0));
  EXPECT_TRUE(b.hasCopy(1));
  EXPECT_EQ(tofu::inPlaceUpdatedBuffers(b.p, 0),
            (std::vector<int32_t>{-1, -1, 0, -1}));
  EXPECT_EQ(tofu::inPlaceUpdatedBuffers(b.p, 1),
            (std::vector<int32_t>{-1, -1, -1, -1}));
  EXPECT_NE(b.p.devices[1].buffers[2].offset,
            b.p.devices[1].buffers[0].offset);
}

} // namespace
