//===- Partition.cpp - the tofu-partition pass ----------------------------===//
//
// A thin pass over the partition search library
// (tofu/Transforms/RecursivePartitioner.h): runs the selected partitioner and
// records its decisions as attributes.
//
//===----------------------------------------------------------------------===//
#include "tofu/Transforms/Passes.h"
#include "tofu/Transforms/RecursivePartitioner.h"

namespace tofu {
#define GEN_PASS_DEF_PARTITION
#include "tofu/Passes.h.inc"
} // namespace tofu

using namespace mlir;
using namespace tofu;

namespace {

struct PartitionPass : public tofu::impl::PartitionBase<PartitionPass> {
  using PartitionBase::PartitionBase;

  void runOnOperation() override {
    SearchOptions options;
    options.partitioner = partitioner;
    options.devices = numDevices;
    options.topology = topology;
    options.objective = objective;
    options.device = device;
    auto result = partitionFunction(getOperation(), options);
    if (!result) {
      getOperation().emitError() << llvm::toString(result.takeError());
      return signalPassFailure();
    }
    for (const std::string &note : result->approximations)
      getOperation().emitWarning() << note;
  }
};

} // namespace
