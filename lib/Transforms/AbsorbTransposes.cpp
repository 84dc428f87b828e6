//===- AbsorbTransposes.cpp - GEMMs that read their operands transposed ---===//
//
// The `tofu-absorb-transposes` pass (see Passes.td).
//
//===----------------------------------------------------------------------===//
#include "tofu/Dialect/Tofu.h"
#include "tofu/Transforms/Passes.h"

#include "ChainMatching.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"
#include "mlir/IR/BuiltinTypes.h"

namespace tofu {
#define GEN_PASS_DEF_ABSORBTRANSPOSES
#include "tofu/Passes.h.inc"
} // namespace tofu

using namespace mlir;

namespace tofu {
namespace {


/// Whether `op` is a Transpose that swaps the last two dims of an operand of
/// rank >= 2 and keeps the others in place (an absent `perm` reverses the
/// dims: a swap only at rank 2).
bool swapsLastTwoDims(ComputeOp op) {
  if (!op || op.getSpec() != "Transpose" || op.getInputs().size() != 1 ||
      op->getNumResults() != 1)
    return false;
  const int64_t rank = rankOf(op.getInputs()[0]);
  if (rank < 2)
    return false;
  Attribute attr = op.getAttrs().get("perm");
  if (!attr)
    return rank == 2;
  auto perm = dyn_cast<DenseI64ArrayAttr>(attr);
  if (!perm || static_cast<int64_t>(perm.size()) != rank)
    return false;
  for (int64_t d = 0; d < rank - 2; ++d)
    if (perm[d] != d)
      return false;
  return perm[rank - 2] == rank - 1 && perm[rank - 1] == rank - 2;
}

int64_t intAttr(ComputeOp op, StringRef name) {
  if (auto attr = dyn_cast_or_null<IntegerAttr>(op.getAttrs().get(name)))
    return attr.getInt();
  return 0;
}

/// A matrix product op(A) op(B) in one of its three spellings: MatMul
/// (operands of rank >= 2), MatMulTransposed, or Gemm (alpha, beta and C
/// kept as they are).
struct Product {
  ComputeOp op;
  Value a, b;
  bool transA = false, transB = false;
};

std::optional<Product> productOf(ComputeOp op) {
  StringRef spec = op.getSpec();
  if (op->getNumResults() != 1 || op.getInputs().size() < 2)
    return std::nullopt;
  Product p{op, op.getInputs()[0], op.getInputs()[1]};
  if (spec == "MatMul") {
    if (op.getInputs().size() != 2 || rankOf(p.a) < 2 || rankOf(p.b) < 2)
      return std::nullopt;
    return p;
  }
  if (spec == "MatMulTransposed" || spec == "Gemm") {
    p.transA = intAttr(op, "transA") != 0;
    p.transB = intAttr(op, "transB") != 0;
    return p;
  }
  return std::nullopt;
}

/// The op attributes of the product that computes op(a) op(b): the old
/// ones (alpha, beta for a Gemm) with transA and transB replaced.
DictionaryAttr withTransposes(ComputeOp old, bool transA, bool transB) {
  Builder b(old.getContext());
  SmallVector<NamedAttribute> attrs;
  for (NamedAttribute attr : old.getAttrs())
    if (attr.getName() != "transA" && attr.getName() != "transB")
      attrs.push_back(attr);
  if (transA)
    attrs.push_back(b.getNamedAttr("transA", b.getI64IntegerAttr(1)));
  if (transB)
    attrs.push_back(b.getNamedAttr("transB", b.getI64IntegerAttr(1)));
  return b.getDictionaryAttr(attrs);
}

struct AbsorbTransposesPass
    : public impl::AbsorbTransposesBase<AbsorbTransposesPass> {
  void runOnOperation() override {
    SmallVector<ComputeOp> products;
    getOperation().walk([&](ComputeOp op) {
      if (productOf(op))
        products.push_back(op);
    });
    // A Transpose read by several products (an unrolled RNN's transposed
    // recurrent weight, one MatMul per timestep) is listed once.
    llvm::SetVector<ComputeOp> maybeDead;
    for (ComputeOp op : products)
      rewrite(*productOf(op), maybeDead);
    // Transposes nothing reads any more (a tagged complete gradient stays:
    // the optimizer update finds it by its tag).
    for (ComputeOp t : maybeDead)
      if (t->use_empty() && !t.getGradForAttr())
        t->erase();
  }

  void rewrite(Product p, llvm::SetVector<ComputeOp> &maybeDead) {
    ComputeOp old = p.op;
    const bool isGemm = old.getSpec() == "Gemm";
    bool changed = false;
    // op(Transpose(X)) reads X with the opposite transposition.
    for (auto [operand, trans] :
         {std::pair<Value *, bool *>{&p.a, &p.transA}, {&p.b, &p.transB}}) {
      auto t = operand->getDefiningOp<ComputeOp>();
      if (!swapsLastTwoDims(t))
        continue;
      *operand = t.getInputs()[0];
      *trans = !*trans;
      maybeDead.insert(t);
      changed = true;
    }
    // Transpose(op(A) op(B)) = op(B)^T op(A)^T, when the product has no
    // other reader and no C. The product's own `grad_for` tag (the gradient
    // of the Transpose's input, as for W^T in x W^T) goes with the value
    // that only the Transpose read; the optimizer update reads parameter
    // gradients through its operands, not through tags.
    ComputeOp replaced = old;
    if (old->hasOneUse() && old.getInputs().size() == 2) {
      auto user = dyn_cast<ComputeOp>(*old->user_begin());
      if (swapsLastTwoDims(user) && user.getInputs()[0] == old->getResult(0)) {
        std::swap(p.a, p.b);
        std::swap(p.transA, p.transB);
        p.transA = !p.transA;
        p.transB = !p.transB;
        replaced = user;
        changed = true;
      }
    }
    if (!changed)
      return;

    const bool matrices = rankOf(p.a) == 2 && rankOf(p.b) == 2;
    StringRef spec = matrices ? "Gemm"
                     : (!p.transA && !p.transB) ? "MatMul"
                                                : "MatMulTransposed";
    // MatMul has no attributes; a Gemm keeps alpha and beta.
    DictionaryAttr attrs = spec == "MatMul"
                               ? DictionaryAttr::get(old.getContext())
                               : withTransposes(old, p.transA, p.transB);
    SmallVector<Value> inputs{p.a, p.b};
    if (isGemm)
      inputs.append(old.getInputs().begin() + 2, old.getInputs().end());

    OpBuilder builder(replaced);
    auto product = ComputeOp::create(
        builder, replaced.getLoc(), replaced->getResultTypes(), spec, inputs,
        attrs, replaced.getName(), old.getGradOfAttr(),
        replaced.getGradForAttr());
    // Other tags (an unrolled timestep's) go with the op.
    for (NamedAttribute attr : old->getDiscardableAttrs())
      product->setAttr(attr.getName(), attr.getValue());
    replaced->getResult(0).replaceAllUsesWith(product->getResult(0));
    if (replaced != old)
      replaced->erase();
    old->erase();
  }
};

} // namespace
} // namespace tofu
