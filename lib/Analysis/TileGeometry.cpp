//===- TileGeometry.cpp - devices, tiles and op shares --------------------===//
#include "tofu/Analysis/TileGeometry.h"

#include <algorithm>
#include <cstdint>

namespace tofu {

int64_t DeviceGrid::numDevices() const {
  int64_t k = 1;
  for (int64_t s : steps)
    k *= s;
  return k;
}

std::vector<int64_t> DeviceGrid::coordinates(int64_t device) const {
  std::vector<int64_t> coords(steps.size());
  for (size_t i = steps.size(); i-- > 0;) {
    coords[i] = device % steps[i];
    device /= steps[i];
  }
  return coords;
}

tdl::Range splitRange(tdl::Range range, int64_t parts, int64_t index) {
  int64_t size = std::max<int64_t>(range.hi - range.lo, 0);
  return {range.lo + size * index / parts,
          range.lo + size * (index + 1) / parts};
}

tdl::Box fullBox(llvm::ArrayRef<int64_t> shape) {
  tdl::Box box;
  box.reserve(shape.size());
  for (int64_t d : shape)
    box.push_back({0, d});
  return box;
}

tdl::Box intersect(const tdl::Box &a, const tdl::Box &b) {
  tdl::Box result(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    result[i] = {std::max(a[i].lo, b[i].lo), std::min(a[i].hi, b[i].hi)};
  return result;
}

/// Byte and element counts saturate at INT64_MAX instead of wrapping: the
/// importer bounds every tensor at 2^56 elements (plan::kMaxTensorElements),
/// but a cost summed over k devices and many inputs may still exceed 2^63,
/// and a saturated cost is simply "too expensive" to the search.
static int64_t mulSat(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}
static int64_t addSat(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

int64_t intersectionElements(const tdl::Box &a, const tdl::Box &b) {
  int64_t n = 1;
  for (size_t i = 0; i < a.size(); ++i) {
    int64_t extent = std::min(a[i].hi, b[i].hi) - std::max(a[i].lo, b[i].lo);
    if (extent <= 0)
      return 0;
    n = mulSat(n, extent);
  }
  return n;
}

int64_t numElements(const tdl::Box &box) {
  int64_t n = 1;
  for (const auto &r : box)
    n = mulSat(n, std::max<int64_t>(r.hi - r.lo, 0));
  return n;
}

bool isEmpty(const tdl::Box &box) { return numElements(box) == 0; }

int64_t elementBytes(tdl::ElemType type) { return tdl::elemBytes(type); }

tdl::Box ownedBox(const DeviceGrid &grid, llvm::ArrayRef<int64_t> shape,
                  TilingAttr tiling, int64_t device) {
  tdl::Box box = fullBox(shape);
  if (!tiling)
    return box;
  auto dims = tiling.getDims();
  size_t cuts = std::min(dims.size(), grid.steps.size());
  // The device's coordinate at each cut step (as DeviceGrid::coordinates,
  // without building the vector: this runs for every fetch piece).
  int64_t stride = grid.numDevices();
  for (size_t step = 0; step < cuts; ++step) {
    stride /= grid.steps[step];
    int64_t coord = device / stride % grid.steps[step];
    box[dims[step]] = splitRange(box[dims[step]], grid.steps[step], coord);
  }
  return box;
}

std::vector<int64_t> tilingCutDims(const DeviceGrid &grid, TilingAttr tiling) {
  std::vector<int64_t> cuts(grid.steps.size(), -1);
  if (!tiling)
    return cuts;
  auto dims = tiling.getDims();
  for (size_t step = 0; step < dims.size() && step < cuts.size(); ++step)
    cuts[step] = dims[step];
  return cuts;
}

std::vector<int64_t> shareCutDims(const DeviceGrid &grid,
                                  llvm::ArrayRef<StrategyAttr> steps) {
  std::vector<int64_t> cuts(grid.steps.size(), -1);
  for (size_t step = 0; step < steps.size() && step < cuts.size(); ++step)
    if (steps[step].getKind().getValue() == "split")
      cuts[step] = steps[step].getDim();
  return cuts;
}

namespace {

/// devicesMeeting below the groups of the first `step` steps: `box` is the
/// group's box, `first` its first device, `stride` the devices per part of
/// step `step`.
void collectMeeting(const DeviceGrid &grid, tdl::Box &box,
                    llvm::ArrayRef<int64_t> cutDims, const tdl::Box &region,
                    size_t step, int64_t first, int64_t stride,
                    std::vector<int64_t> &devices) {
  if (step == grid.steps.size()) {
    devices.push_back(first);
    return;
  }
  int64_t parts = grid.steps[step];
  int64_t next = stride / parts;
  int64_t dim = step < cutDims.size() ? cutDims[step] : -1;
  if (dim < 0) {
    for (int64_t c = 0; c < parts; ++c)
      collectMeeting(grid, box, cutDims, region, step + 1, first + c * next,
                     next, devices);
    return;
  }
  tdl::Range whole = box[dim];
  for (int64_t c = 0; c < parts; ++c) {
    tdl::Range part = splitRange(whole, parts, c);
    if (std::min(part.hi, region[dim].hi) - std::max(part.lo, region[dim].lo) <=
        0)
      continue; // the part misses the region, and so do all its devices
    box[dim] = part;
    collectMeeting(grid, box, cutDims, region, step + 1, first + c * next,
                   next, devices);
  }
  box[dim] = whole;
}

} // namespace

std::vector<int64_t> devicesMeeting(const DeviceGrid &grid,
                                    const tdl::Box &whole,
                                    llvm::ArrayRef<int64_t> cutDims,
                                    const tdl::Box &region) {
  std::vector<int64_t> devices;
  if (intersectionElements(whole, region) == 0)
    return devices;
  tdl::Box box = whole;
  collectMeeting(grid, box, cutDims, region, 0, 0, grid.numDevices(),
                 devices);
  return devices;
}

llvm::SmallVector<StrategyAttr> planOfOutput(llvm::ArrayRef<StrategyAttr> plan,
                                             unsigned output) {
  llvm::SmallVector<StrategyAttr> steps;
  for (StrategyAttr strategy : plan)
    if (strategy.getOutput() == output)
      steps.push_back(strategy);
  return steps;
}

bool isEmptyShare(const OpShare &share) {
  return isEmpty(share.outputBox) || share.emptyReductionPart;
}

bool outputCoveredLocally(const OpShare &share, const tdl::Box &owned) {
  return !share.partial &&
         numElements(intersect(owned, share.outputBox)) == numElements(owned);
}

namespace {

/// ownedBox for a device given by its grid coordinates.
tdl::Box ownedBoxAt(const DeviceGrid &grid, llvm::ArrayRef<int64_t> shape,
                    TilingAttr tiling, llvm::ArrayRef<int64_t> coords) {
  tdl::Box box = fullBox(shape);
  if (!tiling)
    return box;
  auto dims = tiling.getDims();
  for (size_t step = 0; step < dims.size() && step < coords.size(); ++step)
    box[dims[step]] =
        splitRange(box[dims[step]], grid.steps[step], coords[step]);
  return box;
}

bool hasEmptyReduction(const OpShare &share) {
  return share.emptyReductionPart;
}

} // namespace

OpShare opShare(const DeviceGrid &grid, const tdl::OpInstance &op,
                unsigned output, llvm::ArrayRef<StrategyAttr> plan,
                int64_t device) {
  return OutputShareMaker(grid, op, output, plan)(device);
}

OutputShareMaker::OutputShareMaker(const DeviceGrid &grid,
                                   const tdl::OpInstance &op, unsigned output,
                                   llvm::ArrayRef<StrategyAttr> plan)
    : grid(grid), outputBox(fullBox(op.outputTypes()[output].dims)) {
  for (const auto &var : op.reductionVars(output))
    reductionRanges.push_back({0, var.extent});
  for (StrategyAttr strategy : planOfOutput(plan, output))
    steps.push_back(
        {strategy.getDim(), strategy.getKind().getValue() == "split"});
}

OpShare OutputShareMaker::operator()(int64_t device) const {
  // The device's coordinate at each step is found on the way
  // (DeviceGrid::coordinates, without the vector).
  OpShare share{outputBox, reductionRanges, false};
  int64_t stride = grid.numDevices();
  for (size_t step = 0; step < steps.size() && step < grid.steps.size();
       ++step) {
    stride /= grid.steps[step];
    const int64_t coord = device / stride % grid.steps[step];
    const auto [dim, split] = steps[step];
    if (split) {
      auto &range = share.outputBox[dim];
      range = splitRange(range, grid.steps[step], coord);
    } else {
      auto &range = share.reductionRanges[dim];
      bool wasEmpty = range.hi <= range.lo;
      range = splitRange(range, grid.steps[step], coord);
      share.partial = true;
      share.emptyReductionPart |= !wasEmpty && range.hi <= range.lo;
    }
  }
  return share;
}

OutputShares::OutputShares(const DeviceGrid &grid, const tdl::OpInstance &op,
                           unsigned output, llvm::ArrayRef<StrategyAttr> plan)
    : grid(grid), numDevices(grid.numDevices()) {
  const auto &inputTypes = op.inputTypes();
  const tdl::TensorType &out = op.outputTypes()[output];
  outputShape = out.dims;
  outputElementBytes = elementBytes(out.elem);
  for (const auto &type : inputTypes) {
    inputShapes.push_back(type ? type->dims : std::vector<int64_t>{});
    inputElementBytes.push_back(type ? elementBytes(type->elem) : 0);
  }
  llvm::SmallVector<StrategyAttr> steps = planOfOutput(plan, output);
  size_t numSteps = grid.steps.size();
  coords.reserve(numDevices * numSteps);
  shares.reserve(numDevices);
  const OutputShareMaker shareOf(grid, op, output, plan);
  for (int64_t d = 0; d < numDevices; ++d) {
    std::vector<int64_t> c = grid.coordinates(d);
    coords.insert(coords.end(), c.begin(), c.end());
    shares.push_back(shareOf(d));
  }
  for (int64_t d = 0; d < numDevices; ++d) {
    if (isEmptyShare(shares[d]))
      continue;
    auto regions = op.requiredRegions(output, shares[d].outputBox,
                                      shares[d].reductionRanges);
    for (size_t i = 0; i < regions.size(); ++i) {
      if (!regions[i] || i >= inputTypes.size() || !inputTypes[i])
        continue;
      if (needed.size() <= i)
        needed.resize(i + 1);
      if (needed[i].empty())
        needed[i].resize(numDevices);
      needed[i][d] = std::move(regions[i]);
    }
  }
  // Output conversion: an owner d whose tile its own share does not cover
  // receives |owned_d ∩ produced_e| from every other device e that computes
  // something. The produced boxes of the split steps tile the output, and
  // the other steps (reduce or none) repeat them, so summed over all e with
  // non-empty reduction ranges that is |owned_d| times the number of such
  // devices per split tile (O(k) instead of O(k^2) box intersections; the
  // per-pair sum is in outputCommBytesByStep).
  int64_t splitTiles = 1;
  for (size_t step = 0; step < steps.size() && step < numSteps; ++step)
    if (steps[step].getKind().getValue() == "split")
      splitTiles *= grid.steps[step];
  int64_t computing = 0;
  for (int64_t d = 0; d < numDevices; ++d)
    computing += !hasEmptyReduction(shares[d]);
  repeats = computing / splitTiles;
}

int64_t OutputShares::inputFetchBytes(unsigned input, TilingAttr tiling) const {
  if (input >= needed.size() || needed[input].empty())
    return 0;
  size_t numSteps = grid.steps.size();
  int64_t bytes = 0;
  for (int64_t d = 0; d < numDevices; ++d) {
    const std::optional<tdl::Box> &region = needed[input][d];
    if (!region)
      continue;
    tdl::Box owned =
        ownedBoxAt(grid, inputShapes[input], tiling,
                   llvm::ArrayRef<int64_t>(coords).slice(d * numSteps, numSteps));
    int64_t missing =
        numElements(*region) - intersectionElements(*region, owned);
    bytes = addSat(bytes, mulSat(missing, inputElementBytes[input]));
  }
  return bytes;
}

int64_t OutputShares::conversionBytes(TilingAttr outputTiling) const {
  size_t numSteps = grid.steps.size();
  int64_t bytes = 0;
  for (int64_t d = 0; d < numDevices; ++d) {
    tdl::Box owned =
        ownedBoxAt(grid, outputShape, outputTiling,
                   llvm::ArrayRef<int64_t>(coords).slice(d * numSteps, numSteps));
    const OpShare &share = shares[d];
    if (!isEmptyShare(share) && outputCoveredLocally(share, owned))
      continue;
    int64_t received = mulSat(numElements(owned), repeats);
    if (!hasEmptyReduction(share))
      received -= intersectionElements(owned, share.outputBox);
    bytes = addSat(bytes, mulSat(received, outputElementBytes));
  }
  return bytes;
}

int64_t outputCommBytes(const DeviceGrid &grid, const tdl::OpInstance &op,
                        unsigned output, llvm::ArrayRef<StrategyAttr> plan,
                        llvm::ArrayRef<TilingAttr> inputTilings,
                        TilingAttr outputTiling) {
  OutputShares shares(grid, op, output, plan);
  int64_t bytes = 0;
  for (size_t i = 0; i < shares.numInputs() && i < inputTilings.size(); ++i)
    bytes = addSat(bytes, shares.inputFetchBytes(i, inputTilings[i]));
  return addSat(bytes, shares.conversionBytes(outputTiling));
}

int64_t opCommBytes(const DeviceGrid &grid, const tdl::OpInstance &op,
                    llvm::ArrayRef<StrategyAttr> plan,
                    llvm::ArrayRef<TilingAttr> inputTilings,
                    llvm::ArrayRef<TilingAttr> outputTilings) {
  int64_t bytes = 0;
  for (unsigned o = 0; o < op.outputTypes().size(); ++o)
    bytes = addSat(bytes, outputCommBytes(grid, op, o, plan, inputTilings,
                                           outputTilings[o]));
  return bytes;
}

tdl::Box groupOwnedBox(const DeviceGrid &grid, llvm::ArrayRef<int64_t> shape,
                       TilingAttr tiling, int64_t device, size_t level) {
  tdl::Box box = fullBox(shape);
  if (!tiling)
    return box;
  std::vector<int64_t> coords = grid.coordinates(device);
  auto dims = tiling.getDims();
  for (size_t step = 0;
       step < dims.size() && step < coords.size() && step < level; ++step)
    box[dims[step]] =
        splitRange(box[dims[step]], grid.steps[step], coords[step]);
  return box;
}

std::vector<int64_t> outputCommBytesByStep(
    const DeviceGrid &grid, const tdl::OpInstance &op, unsigned output,
    llvm::ArrayRef<StrategyAttr> plan, llvm::ArrayRef<TilingAttr> inputTilings,
    TilingAttr outputTiling) {
  size_t numSteps = grid.steps.size();
  std::vector<int64_t> bytes(numSteps, 0);
  if (numSteps == 0)
    return bytes;
  int64_t k = grid.numDevices();
  const auto &inputTypes = op.inputTypes();
  std::vector<OpShare> shares;
  const OutputShareMaker shareOf(grid, op, output, plan);
  for (int64_t d = 0; d < k; ++d)
    shares.push_back(shareOf(d));
  std::vector<std::vector<int64_t>> inputCuts;
  for (TilingAttr tiling : inputTilings)
    inputCuts.push_back(tilingCutDims(grid, tiling));
  for (int64_t d = 0; d < k; ++d) {
    if (isEmptyShare(shares[d]))
      continue;
    auto needed = op.requiredRegions(output, shares[d].outputBox,
                                     shares[d].reductionRanges);
    std::vector<int64_t> coords = grid.coordinates(d);
    for (size_t i = 0; i < needed.size() && i < inputTilings.size(); ++i) {
      if (!needed[i] || !inputTypes[i])
        continue;
      int64_t size = elementBytes(inputTypes[i]->elem);
      // Elements held by the device's group before the step, minus those its
      // group holds after it (level 0 counts the whole needed box). `held`
      // is groupOwnedBox at level step + 1, cut one step at a time.
      int64_t heldBefore = numElements(*needed[i]);
      tdl::Box held = fullBox(inputTypes[i]->dims);
      for (size_t step = 0; step < numSteps; ++step) {
        if (int64_t dim = inputCuts[i][step]; dim >= 0)
          held[dim] = splitRange(held[dim], grid.steps[step], coords[step]);
        int64_t heldAfter = intersectionElements(*needed[i], held);
        bytes[step] += (heldBefore - heldAfter) * size;
        heldBefore = heldAfter;
      }
    }
  }
  const tdl::TensorType &out = op.outputTypes()[output];
  std::vector<std::vector<int64_t>> coords;
  for (int64_t d = 0; d < k; ++d)
    coords.push_back(grid.coordinates(d));
  tdl::Box outputWhole = fullBox(out.dims);
  std::vector<int64_t> producedCuts =
      shareCutDims(grid, planOfOutput(plan, output));
  for (int64_t d = 0; d < k; ++d) {
    tdl::Box owned = ownedBox(grid, out.dims, outputTiling, d);
    if (!isEmptyShare(shares[d]) && outputCoveredLocally(shares[d], owned))
      continue;
    // Only the devices whose produced box meets the owned tile send to it.
    for (int64_t e : devicesMeeting(grid, outputWhole, producedCuts, owned)) {
      if (e == d || isEmptyShare(shares[e]))
        continue;
      size_t step = 0;
      while (step + 1 < numSteps && coords[d][step] == coords[e][step])
        ++step;
      bytes[step] += numElements(intersect(owned, shares[e].outputBox)) *
                     elementBytes(out.elem);
    }
  }
  return bytes;
}

std::vector<int64_t> opCommBytesByStep(const DeviceGrid &grid,
                                       const tdl::OpInstance &op,
                                       llvm::ArrayRef<StrategyAttr> plan,
                                       llvm::ArrayRef<TilingAttr> inputTilings,
                                       llvm::ArrayRef<TilingAttr> outputTilings) {
  std::vector<int64_t> bytes(grid.steps.size(), 0);
  for (unsigned o = 0; o < op.outputTypes().size(); ++o) {
    std::vector<int64_t> part = outputCommBytesByStep(
        grid, op, o, plan, inputTilings, outputTilings[o]);
    for (size_t step = 0; step < bytes.size(); ++step)
      bytes[step] += part[step];
  }
  return bytes;
}

} // namespace tofu
