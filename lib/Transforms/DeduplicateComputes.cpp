//===- DeduplicateComputes.cpp - CSE of tofu.compute ops ------------------===//
//
// The `tofu-deduplicate-computes` pass (see Passes.td): merges tofu.compute
// ops of one block that apply the same spec with the same attributes to the
// same operands.
//
//===----------------------------------------------------------------------===//
#include "tofu/Dialect/Tofu.h"
#include "tofu/Transforms/Passes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Hashing.h"

namespace tofu {
#define GEN_PASS_DEF_DEDUPLICATECOMPUTES
#include "tofu/Passes.h.inc"
} // namespace tofu

using namespace mlir;

namespace tofu {
namespace {

/// What decides a compute op's results: spec, op attributes, operands and
/// result types (attributes and types are uniqued, so pointer equality).
struct ComputeKey {
  Attribute spec, attrs;
  SmallVector<Value, 4> operands;
  SmallVector<Type, 2> results;

  explicit ComputeKey(ComputeOp op)
      : spec(op.getSpecAttr()), attrs(op.getAttrsAttr()),
        operands(op.getInputs().begin(), op.getInputs().end()),
        results(op->getResultTypes().begin(), op->getResultTypes().end()) {}

  bool operator==(const ComputeKey &other) const {
    return spec == other.spec && attrs == other.attrs &&
           operands == other.operands && results == other.results;
  }
  llvm::hash_code hash() const {
    return llvm::hash_combine(
        spec.getAsOpaquePointer(), attrs.getAsOpaquePointer(),
        llvm::hash_combine_range(operands.begin(), operands.end()),
        llvm::hash_combine_range(results.begin(), results.end()));
  }
};

/// Whether `op` may be replaced by, or replace, an equal op: not the tagged
/// complete gradient of a tensor, not a forward op of an unrolled timestep.
bool mayMerge(ComputeOp op) {
  if (op.getGradForAttr())
    return false;
  if (op->hasAttr(kTimestepAttr) && !op.getGradOfAttr())
    return false;
  return true;
}

struct DeduplicateComputesPass
    : public impl::DeduplicateComputesBase<DeduplicateComputesPass> {
  void runOnOperation() override {
    for (Block &block : getOperation().getBody()) {
      // Buckets by hash; the first op of each key (program order) is kept.
      llvm::DenseMap<unsigned, SmallVector<ComputeOp, 1>> seen;
      SmallVector<ComputeOp> duplicates;
      for (Operation &raw : block) {
        auto op = dyn_cast<ComputeOp>(&raw);
        if (!op || !mayMerge(op))
          continue;
        ComputeKey key(op);
        SmallVector<ComputeOp, 1> &bucket = seen[key.hash()];
        ComputeOp original;
        for (ComputeOp candidate : bucket)
          if (ComputeKey(candidate) == key) {
            original = candidate;
            break;
          }
        if (!original) {
          bucket.push_back(op);
          continue;
        }
        op->replaceAllUsesWith(original->getResults());
        duplicates.push_back(op);
      }
      for (ComputeOp op : duplicates)
        op->erase();
    }
  }
};

} // namespace
} // namespace tofu
