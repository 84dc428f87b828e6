//===- StepTimeModel.cpp - predicted compute and transfer time ------------===//
//
// See tofu/Transforms/StepTimeModel.h and docs/Partitioning.md ("The
// step-time objective").
//
//===----------------------------------------------------------------------===//
#include "tofu/Transforms/StepTimeModel.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace tofu {

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
  work.kernel = op.opName();
  // A batch norm in training mode makes more passes (the batch's mean and
  // variance; its gradient's sums over the batch; the normalized X from the
  // batch's statistics) than in inference mode: a measured cost of its own.
  static constexpr std::pair<llvm::StringLiteral, llvm::StringLiteral>
      kTrainingCosts[] = {
          {"BatchNormalization", "BatchNormalization.training"},
          {"BatchNormalizationGrad", "BatchNormalizationGrad.training"},
          {"BatchNormalizationNormalized",
           "BatchNormalizationNormalized.training"}};
  for (const auto &[kernel, training] : kTrainingCosts) {
    if (work.kernel != kernel)
      continue;
    auto mode = op.attrs().find("training_mode");
    if (mode != op.attrs().end() && mode->second.i != 0)
      work.kernel = training;
    break;
  }
  work.convolution = work.kind == OpClass::Contraction &&
                     op.opName().starts_with("Conv");
  work.dtype = work.kind == OpClass::Contraction
                   ? op.inputTypes()[0]->elem
                   : op.outputTypes()[output].elem;
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
  work.outputElements = outputElements;
  work.outputBytes =
      outputElements * elementBytes(op.outputTypes()[output].elem);
  auto regions =
      op.requiredRegions(output, share.outputBox, share.reductionRanges);
  work.bytes = work.outputBytes;
  double inputElements = 0;
  work.largestElements = outputElements;
  const tdl::Box *largest = &share.outputBox;
  for (auto [input, region] : llvm::enumerate(regions))
    if (region && op.inputTypes()[input]) {
      inputElements += numElements(*region);
      if (static_cast<double>(numElements(*region)) > work.largestElements)
        largest = &*region;
      work.largestElements = std::max(
          work.largestElements, static_cast<double>(numElements(*region)));
      work.bytes += static_cast<double>(numElements(*region)) *
                    elementBytes(op.inputTypes()[input]->elem);
    }
  // Row-wise kernels: how many rows (planes) the largest operand holds.
  static constexpr llvm::StringLiteral kPlaneKernels[] = {
      "BatchNormalization", "BatchNormalizationGrad",
      "BatchNormalizationNormalized", "MaxPool", "MaxPoolGrad"};
  static constexpr llvm::StringLiteral kRowKernels[] = {
      "Softmax", "SoftmaxGrad", "LogSoftmax", "LayerNormalization",
      "LayerNormalizationGrad", "SoftmaxCrossEntropyLoss",
      "SoftmaxCrossEntropyLossGrad"};
  if (!largest->empty() && work.largestElements > 0) {
    double inner = 1;
    if (llvm::is_contained(kPlaneKernels, op.opName()) && largest->size() > 2)
      for (size_t d = 2; d < largest->size(); ++d)
        inner *= std::max<int64_t>((*largest)[d].hi - (*largest)[d].lo, 1);
    else if (llvm::is_contained(kRowKernels, op.opName()))
      inner = std::max<int64_t>(largest->back().hi - largest->back().lo, 1);
    else
      inner = 0;
    if (inner > 0)
      work.rows = work.largestElements / inner;
  }
  if (work.kind != OpClass::Contraction) {
    // A TDL expression may recompute a reduction for every output element
    // (a softmax's or a loss's sum over the classes, a norm's mean), which
    // its kernel computes once per row: count one operation per element
    // read and written instead of output x reduction extent.
    if (!share.reductionRanges.empty())
      work.flops = std::min(work.flops, outputElements + inputElements);
    return work;
  }
  // GEMM sides, from how much each operand's region shrinks when output
  // dimension d is cut to one index (a factor f >= 1 per operand): the part
  // both operands shrink by, min(f_first, f_second), repeats the GEMM (a
  // batch dimension; the groups of a grouped convolution's channels); the
  // rest of the extent is a row (m) when the first operand shrinks more, a
  // column (n) when the second does. So a convolution's images and pixels
  // are rows, its output channels per group columns.
  work.k = reduction;
  if (work.convolution) {
    // The weight [M, C/G, kernel...] (ConvGradWeight's output) gives the
    // output channels M and channels x kernel per output channel; the
    // output (Conv) or dY [N, M, out...] gives the images x output pixels.
    // Their product is the im2col matrix, and M times it the GEMM's
    // multiply-adds (the TDL sum of a strided ConvGradInput also counts
    // the terms its stride skips).
    const bool gradWeight = op.opName() == "ConvGradWeight";
    const bool gradInput = op.opName() == "ConvGradInput";
    std::optional<tdl::Box> weight =
        gradWeight ? std::optional<tdl::Box>(share.outputBox)
                   : (regions.size() > 1 ? regions[1] : std::nullopt);
    std::optional<tdl::Box> rows =
        op.opName() == "Conv" ? std::optional<tdl::Box>(share.outputBox)
                              : (regions.empty() ? std::nullopt : regions[0]);
    if (weight && rows && weight->size() >= 2 && rows->size() >= 2) {
      double channels = std::max<int64_t>((*weight)[0].hi - (*weight)[0].lo, 1);
      double perChannel = boxElements(weight) / channels;
      double rowChannels =
          std::max<int64_t>((*rows)[1].hi - (*rows)[1].lo, 1);
      double pixels = boxElements(rows) / rowChannels;
      work.columnElements = perChannel * pixels;
      work.columnFlops = 2 * channels * perChannel * pixels;
      // The images x output pixels side: Y (Conv) or dY, copied between
      // its tensor and one matrix when a chunk holds several images.
      const double images =
          std::max<int64_t>((*rows)[0].hi - (*rows)[0].lo, 1);
      const double rowsBytes =
          op.opName() == "Conv"
              ? work.outputBytes
              : boxElements(rows) * elementBytes(op.inputTypes()[0]->elem);
      if (images > 1)
        work.stagingBytes = 2 * rowsBytes;
      if (gradInput)
        work.stagingBytes += 3 * work.outputBytes;
      if (gradWeight) {
        // dW is zeroed, then each chunk's GEMM adds into it (beta = 1):
        // read and written once per chunk of images (KernelsConv.cpp's
        // batchChunk: at most 2^21 elements in the larger matrix), beyond
        // the one write the roofline's traffic counts.
        const double perImage = pixels / images;
        const double chunk = std::clamp(
            std::floor(double(1 << 21) /
                       (std::max(perChannel, channels) * perImage)),
            1.0, images);
        work.stagingBytes +=
            2 * std::ceil(images / chunk) * work.outputBytes;
      }
      if (gradWeight)
        work.columnGemm[0] = channels, work.columnGemm[1] = perChannel,
        work.columnGemm[2] = pixels;
      else if (gradInput)
        work.columnGemm[0] = perChannel, work.columnGemm[1] = pixels,
        work.columnGemm[2] = channels;
      else
        work.columnGemm[0] = channels, work.columnGemm[1] = pixels,
        work.columnGemm[2] = perChannel;
    }
  }
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

double StepTimeModel::flopsPerSecond(const ShareWork &work) const {
  const DeviceModel::ComputeRates *rates = device.ratesOf(work.dtype);
  if (!rates) // a hand-built model: its float32 rates
    return work.kind == OpClass::Contraction ? device.gemmFlopsPerSecond
                                             : device.vectorFlopsPerSecond;
  if (work.kind != OpClass::Contraction)
    return rates->vector.sustained();
  return work.convolution ? rates->conv.sustained() : rates->gemm.sustained();
}

double StepTimeModel::gemmEfficiency(double m, double n, double k) const {
  auto side = [&](double x) { return x / (x + device.gemmHalfExtent); };
  return side(m) * side(n) * side(k);
}

double StepTimeModel::gemmThreadShare(double m, double n, double k,
                                      double repeats) const {
  if (!device.sharedHost || device.hostThreads <= 1)
    return 1;
  // Blas.cpp's blockedGemm: one thread under 2^20 FLOPs, else one block of
  // at least 32 rows (columns) of C per thread, over the longer side.
  double threads = device.hostThreads;
  if (2 * m * n * k < double(1 << 20))
    threads = 1;
  threads = std::max(1.0, std::min(threads, std::floor(std::max(m, n) / 32)));
  // KernelsMatMul.cpp: a batch of GEMMs that blockedGemm would not split
  // runs its elements side by side once the batch's FLOPs reach 2^20.
  if (threads == 1 && repeats >= 2 &&
      2 * m * n * k * repeats >= double(1 << 20))
    threads = std::min<double>(device.hostThreads, std::floor(repeats));
  return threads / device.hostThreads;
}

double StepTimeModel::batchedGemms(const ShareWork &work) {
  const double one = 2 * work.m * work.n * work.k;
  return one > 0 ? std::max(1.0, std::round(work.flops / one)) : 1;
}

bool StepTimeModel::runsOnOneThread(const ShareWork &work) const {
  if (work.kind == OpClass::Contraction)
    return false;
  const DeviceModel::KernelCost *cost = kernelCostOf(work);
  if (cost && cost->threadsFromElements > 0)
    return !cost->threadsAt(work.largestElements);
  return work.largestElements < kOneThreadElements;
}

double StepTimeModel::computeSeconds(const ShareWork &work,
                                     double fraction) const {
  if (work.empty)
    return 0;
  double flops = work.flops * fraction, bytes = work.bytes * fraction;
  double rate = flopsPerSecond(work);
  // The CPU backend's convolutions are GEMMs over im2col matrices (what
  // the prediction models on a shared host, where it knows the levels).
  const bool columns = work.kind == OpClass::Contraction && device.sharedHost &&
                       work.levelsKnown() && work.columnElements > 0;
  if (columns) {
    rate *= gemmEfficiency(work.columnGemm[0], work.columnGemm[1],
                           work.columnGemm[2]);
    if (work.alone)
      rate *= gemmThreadShare(work.columnGemm[0], work.columnGemm[1],
                              work.columnGemm[2]);
    flops = std::min(flops, work.columnFlops * fraction);
  }
  else if (work.kind == OpClass::Contraction) {
    rate *= gemmEfficiency(work.m, work.n, work.k);
    if (work.alone)
      rate *= gemmThreadShare(work.m, work.n, work.k,
                              work.convolution ? 1 : batchedGemms(work));
  }
  else
    flops += work.transcendentals * work.outputElements * fraction *
             device.transcendentalFlops;
  double busy = flops / rate;
  const DeviceModel::KernelCost *cost = kernelCostOf(work);
  const double launch = callSecondsOf(cost);
  if (cost && work.kind != OpClass::Contraction && cost->hasPerElementCost()) {
    const double elements = work.largestElements * fraction;
    busy = elements * cost->secondsPerElement(
                          elements, device.sharedHost ? device.hostThreads : 1) +
           work.rows * fraction * cost->rowSeconds;
  }
  double traffic = memorySeconds(bytes);
  double packing = 0;
  if (work.levelsKnown()) {
    // Inputs at the rates of the levels they are found in; the output
    // written through the caches as the op's whole traffic allows.
    double inputs = 0;
    for (int level = 0; level < 3; ++level)
      inputs += work.inputBytesByLevel[level] * fraction /
                levelBytesPerSecond(static_cast<MemoryLevel>(level));
    traffic = inputs + work.outputBytes * fraction /
                           levelBytesPerSecond(levelAfter(0, bytes));
    // The CPU backend's GEMMs copy (pack) their operands into blocks
    // before multiplying, at the speed of wherever the operands are: not
    // hidden behind the FLOPs the GEMM probe measured on hot operands.
    // gemm_pack_passes: how many such passes a GEMM makes (measured).
    if (work.kind == OpClass::Contraction && device.sharedHost)
      packing = device.gemmPackPasses * inputs;
    // im2col writes the column matrix and the GEMM packs it (col2im: the
    // GEMM writes it, col2im reads it back), in chunks of at most 2M
    // elements (KernelsConv.cpp) that stay in the caches their size allows.
    if (columns) {
      const double columnBytes =
          work.columnElements * fraction * elementBytes(work.dtype);
      const double chunk = std::min(columnBytes, 2.0 * (1 << 21) * 4);
      packing += 2 * columnBytes / levelBytesPerSecond(levelAfter(0, chunk));
      const double staging = work.stagingBytes * fraction;
      packing += staging / levelBytesPerSecond(levelAfter(0, staging));
    }
  }
  double seconds = launch + std::max(busy, traffic) + packing;
  // The cold start as --calibrate measures it: a GEMM after another
  // kernel and a hand-over to the worker pool, tofu-run's in-order
  // schedule of one virtual device. With more devices their instructions
  // run in waves, each GEMM on one thread right after that thread's
  // previous kernel: not cold (mlp at k = 4: 32 tiny GEMM shares traced at
  // 0.31 ms, 0.48-0.51 predicted with it; bench/simulate.md).
  if (work.kind == OpClass::Contraction && work.alone)
    seconds += device.gemmColdSeconds;
  if (work.partial)
    // The partial tiles are summed into the owner's tile: one more kernel
    // call reading the received partial sum and updating the tile.
    seconds += device.launchSeconds +
               memorySeconds(2 * work.outputBytes * fraction);
  return seconds;
}

const DeviceModel::KernelCost *
StepTimeModel::kernelCostOf(const ShareWork &work) const {
  // Most descriptions list no kernels: the search's hot path stops here.
  if (work.kernel.empty() || device.kernelCosts.empty())
    return nullptr;
  // The element type's own cost first ("Conv@f64": on a GPU a float64 op
  // may run another way, a generated kernel instead of cuDNN's), then the
  // kernel's; a description without the training-mode cost: the other.
  const llvm::StringRef dtype = tdl::elemName(work.dtype);
  const llvm::StringRef base = work.kernel.split('.').first;
  const llvm::StringRef names[] = {work.kernel, base};
  // A kernel without a mode suffix is its own base: looked up once.
  for (llvm::StringRef name :
       llvm::ArrayRef(names).take_front(base == work.kernel ? 1 : 2)) {
    llvm::SmallString<64> typed(name);
    typed += "@";
    typed += dtype;
    if (const DeviceModel::KernelCost *cost = device.kernelCost(typed))
      return cost;
    if (const DeviceModel::KernelCost *cost = device.kernelCost(name))
      return cost;
  }
  return nullptr;
}

double
StepTimeModel::callSecondsOf(const DeviceModel::KernelCost *cost) const {
  return cost && cost->callSeconds > 0 ? cost->callSeconds
                                       : device.launchSeconds;
}

double StepTimeModel::callSeconds(const ShareWork &work) const {
  return callSecondsOf(kernelCostOf(work));
}

double StepTimeModel::memorySeconds(double bytes) const {
  return bytes / levelBytesPerSecond(levelAfter(0, bytes));
}

MemoryLevel StepTimeModel::levelAfter(double reuseBytes, double bytes) const {
  const double footprint = reuseBytes + bytes;
  if (device.innerCacheBytes > 0 && footprint <= device.innerCacheBytes)
    return MemoryLevel::InnerCache;
  if (device.cacheBytes > 0 && footprint <= device.cacheBytes)
    return MemoryLevel::Cache;
  return MemoryLevel::Memory;
}

double StepTimeModel::levelBytesPerSecond(MemoryLevel level) const {
  if (level == MemoryLevel::InnerCache && device.innerCacheBytes > 0)
    return device.innerCacheBytesPerSecond;
  if (level != MemoryLevel::Memory && device.cacheBytes > 0)
    return device.cacheBytesPerSecond;
  return device.memoryBytesPerSecond;
}

double StepTimeModel::stepOverheadSeconds(double fedElements) const {
  return device.stepOverheadSeconds +
         fedElements * device.feedSecondsPerElement;
}

double StepTimeModel::transferSeconds(double bytes, double gbps,
                                      double messages) const {
  if (bytes <= 0)
    return 0;
  return bytes / (gbps * 1e9) + messages * device.messageLatencySeconds;
}

} // namespace tofu
