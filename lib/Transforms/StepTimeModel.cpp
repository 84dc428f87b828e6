//===- StepTimeModel.cpp - predicted compute and transfer time ------------===//
//
// See tofu/Transforms/StepTimeModel.h and docs/Partitioning.md ("The
// step-time objective").
//
//===----------------------------------------------------------------------===//
#include "tofu/Transforms/StepTimeModel.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

namespace tofu {

DeviceModel DeviceModel::genericCpu() {
  // Measured on the build machine (2-core AMD EPYC, 2 threads, torch 1.13
  // with OpenBLAS, 2026-11-26; bench/time_objective.md): a 1024^3 sgemm
  // runs at 66 GFLOP/s, 64 x 1024 x 1024 at 48, 16 x 1024 x 1024 at 25 and
  // 4 x 1024 x 1024 at 6 GFLOP/s, which s(x) = x / (x + 32) per side
  // follows within a factor 1.5; an out-of-place add of 64 MiB streams
  // 11 GB/s; a tiny torch op costs 5 us. Element-wise arithmetic is
  // memory-bound long before its vector peak, which is a guess (8 FLOP/s
  // per byte of bandwidth is not reached by tofu-run's loop nests).
  DeviceModel model;
  model.name = "cpu";
  model.gemmFlopsPerSecond = 70e9;
  model.vectorFlopsPerSecond = 8e9;
  model.memoryBytesPerSecond = 10e9;
  model.launchSeconds = 5e-6;
  model.gemmHalfExtent = 32;
  model.messageLatencySeconds = 2e-6;
  return model;
}

DeviceModel DeviceModel::h100() {
  // NVIDIA H100 Tensor Core GPU datasheet (SXM5): FP32 67 TFLOP/s (CUDA
  // cores; cuBLAS sgemm without TF32), HBM3 3.35 TB/s. cuBLAS reaches about
  // 80% of the FP32 peak on large GEMMs and needs tiles of about 128 per
  // side to fill 132 SMs; kernel launch about 5 us; an NCCL / peer-to-peer
  // message about 10 us. Assumptions, not measurements: issue 19's
  // `--calibrate` and device descriptions are to replace them.
  DeviceModel model;
  model.name = "h100";
  model.gemmFlopsPerSecond = 54e12;
  model.vectorFlopsPerSecond = 30e12;
  model.memoryBytesPerSecond = 3.0e12;
  model.launchSeconds = 5e-6;
  model.gemmHalfExtent = 128;
  model.messageLatencySeconds = 10e-6;
  return model;
}

std::optional<DeviceModel> DeviceModel::builtin(llvm::StringRef name) {
  if (name == "cpu")
    return genericCpu();
  if (name == "h100")
    return h100();
  return std::nullopt;
}

std::vector<std::string> DeviceModel::builtinNames() { return {"cpu", "h100"}; }

OpClass classifyOp(const tdl::OpInstance &op) {
  // The ops the runtimes run as GEMMs (cuBLAS / OpenBLAS, convolutions via
  // im2col + GEMM); their first two inputs are the contracted operands.
  static constexpr llvm::StringLiteral kContractions[] = {
      "MatMul", "MatMulTransposed", "Gemm", "Einsum", "Conv", "ConvGradInput",
      "ConvGradWeight",
      "ConvTranspose"};
  bool contraction = llvm::is_contained(kContractions, op.opName());
  if (contraction && op.inputTypes().size() >= 2 && op.inputTypes()[0] &&
      op.inputTypes()[1])
    return OpClass::Contraction;
  if (op.isElementwise())
    return OpClass::Elementwise;
  return OpClass::Other;
}

namespace {

int64_t boxElements(const std::optional<tdl::Box> &box) {
  return box ? numElements(*box) : 0;
}

} // namespace

ShareWork describeShare(const tdl::OpInstance &op, unsigned output,
                        const OpShare &share) {
  ShareWork work;
  work.kind = classifyOp(op);
  work.partial = share.partial;
  if (isEmptyShare(share)) {
    work.empty = true;
    return work;
  }
  double outputElements = numElements(share.outputBox);
  double reduction = 1;
  for (const tdl::Range &range : share.reductionRanges)
    reduction *= std::max<int64_t>(range.hi - range.lo, 0);
  work.flops = share.reductionRanges.empty() ? outputElements
                                             : 2 * outputElements * reduction;
  work.outputBytes =
      outputElements * elementBytes(op.outputTypes()[output].elem);
  auto regions =
      op.requiredRegions(output, share.outputBox, share.reductionRanges);
  work.bytes = work.outputBytes;
  for (auto [input, region] : llvm::enumerate(regions))
    if (region && op.inputTypes()[input])
      work.bytes += static_cast<double>(numElements(*region)) *
                    elementBytes(op.inputTypes()[input]->elem);
  if (work.kind != OpClass::Contraction)
    return work;
  // GEMM sides, from how much each operand's region shrinks when output
  // dimension d is cut to one index (a factor f >= 1 per operand): the part
  // both operands shrink by, min(f_first, f_second), repeats the GEMM (a
  // batch dimension; the groups of a grouped convolution's channels); the
  // rest of the extent is a row (m) when the first operand shrinks more, a
  // column (n) when the second does. So a convolution's images and pixels
  // are rows, its output channels per group columns.
  work.k = reduction;
  auto shrink = [](const std::optional<tdl::Box> &full,
                   const std::optional<tdl::Box> &cut) {
    double before = boxElements(full), after = boxElements(cut);
    return after > 0 ? std::max(before / after, 1.0) : 1.0;
  };
  for (size_t d = 0; d < share.outputBox.size(); ++d) {
    int64_t extent = share.outputBox[d].hi - share.outputBox[d].lo;
    if (extent <= 1)
      continue;
    tdl::Box collapsed = share.outputBox;
    collapsed[d].hi = collapsed[d].lo + 1;
    auto narrower =
        op.requiredRegions(output, collapsed, share.reductionRanges);
    double first = shrink(regions[0], narrower[0]);
    double second = shrink(regions[1], narrower[1]);
    double side = std::max(extent / std::min(first, second), 1.0);
    if (first > second)
      work.m *= side;
    else if (second > first)
      work.n *= side;
  }
  return work;
}

double StepTimeModel::gemmEfficiency(double m, double n, double k) const {
  auto side = [&](double x) { return x / (x + device.gemmHalfExtent); };
  return side(m) * side(n) * side(k);
}

double StepTimeModel::computeSeconds(const ShareWork &work,
                                     double fraction) const {
  if (work.empty)
    return 0;
  double flops = work.flops * fraction, bytes = work.bytes * fraction;
  double rate = work.kind == OpClass::Contraction
                    ? device.gemmFlopsPerSecond *
                          gemmEfficiency(work.m, work.n, work.k)
                    : device.vectorFlopsPerSecond;
  double seconds = device.launchSeconds +
                   std::max(flops / rate, bytes / device.memoryBytesPerSecond);
  if (work.partial)
    // The partial tiles are summed into the owner's tile: one more kernel
    // call reading the received partial sum and updating the tile.
    seconds += device.launchSeconds +
               2 * work.outputBytes * fraction / device.memoryBytesPerSecond;
  return seconds;
}

double StepTimeModel::transferSeconds(double bytes, double gbps,
                                      double messages) const {
  if (bytes <= 0)
    return 0;
  return bytes / (gbps * 1e9) + messages * device.messageLatencySeconds;
}

} // namespace tofu
