//===- Autocast.cpp - bf16 compute for MatMul, Gemm and Conv --------------===//
//
// The `tofu-autocast` pass (see Passes.td): `tofuc --precision bf16`.
//
//===----------------------------------------------------------------------===//
#include "tofu/Dialect/TdlInstance.h"
#include "tofu/Dialect/Tofu.h"
#include "tofu/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringSet.h"

namespace tofu {
#define GEN_PASS_DEF_AUTOCAST
#include "tofu/Passes.h.inc"
} // namespace tofu

using namespace mlir;

namespace tofu {
namespace {

/// ONNX data-type codes of the two types the pass casts between.
constexpr int64_t kOnnxFloat = 1, kOnnxBFloat16 = 16;

/// The ops that compute in bf16 (PyTorch autocast's lower-precision list as
/// far as the ONNX ops tofuc trains go).
bool computesInBF16(ComputeOp op) {
  StringRef spec = op.getSpec();
  return spec == "MatMul" || spec == "Gemm" || spec == "Conv";
}

/// True for a ranked tensor of float32 elements.
bool isF32Tensor(Type type) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  return ranked && ranked.getElementType().isF32();
}

/// The first float value of `func` that is not float32, or null.
Value firstNonF32Float(func::FuncOp func) {
  auto nonF32 = [](Value v) {
    auto ranked = dyn_cast<RankedTensorType>(v.getType());
    return ranked && isa<FloatType>(ranked.getElementType()) &&
           !ranked.getElementType().isF32();
  };
  for (BlockArgument arg : func.getArguments())
    if (nonF32(arg))
      return arg;
  Value found;
  func.walk([&](Operation *op) {
    for (Value result : op->getResults())
      if (nonF32(result)) {
        found = result;
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return found;
}

/// A short description of where `v` comes from, for errors.
std::string describe(Value v) {
  if (auto compute = v.getDefiningOp<ComputeOp>())
    return "op '" + compute.getName().str() + "' (" +
           compute.getSpec().str() + ")";
  if (Operation *op = v.getDefiningOp()) {
    // tofu.param and tofu.input are symbols (sym_name).
    for (StringRef key : {"sym_name", "name"})
      if (auto name = dyn_cast_or_null<StringAttr>(
              op->getInherentAttr(key).value_or(Attribute())))
        return "'" + name.getValue().str() + "'";
    return "a " + op->getName().getStringRef().str() + " op";
  }
  return "a function argument";
}

struct AutocastPass : public impl::AutocastBase<AutocastPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (Value other = firstNonF32Float(func)) {
      emitError(other.getLoc())
          << "--precision bf16 trains a float32 model, but "
          << describe(other) << " has type " << other.getType()
          << " (export the model in float32, or leave out --precision)";
      return signalPassFailure();
    }
    llvm::StringSet<> names;
    SmallVector<ComputeOp> targets;
    func.walk([&](ComputeOp op) {
      names.insert(op.getName());
      if (!computesInBF16(op) || op.getGradOfAttr() ||
          op->getNumResults() != 1)
        return;
      if (llvm::all_of(op.getInputs().getTypes(), isF32Tensor) &&
          isF32Tensor(op->getResult(0).getType()))
        targets.push_back(op);
    });
    if (targets.empty()) {
      func.emitWarning() << "--precision bf16: the model has no float32 "
                            "MatMul, Gemm or Conv; it trains in float32";
      return;
    }
    auto unique = [&](StringRef base) {
      std::string name = base.str();
      for (int i = 1; !names.insert(name).second; ++i)
        name = (base + "." + std::to_string(i)).str();
      return name;
    };
    MLIRContext *ctx = &getContext();
    Type bf16 = BFloat16Type::get(ctx);
    auto castAttrs = [&](int64_t to) {
      tdl::AttrMap attrs;
      attrs["to"] = tdl::AttrValue::ofInt(to);
      return fromTdlAttrs(ctx, attrs);
    };
    OpBuilder builder(ctx);
    for (ComputeOp op : targets) {
      builder.setInsertionPoint(op);
      StringRef name = op.getName();
      for (OpOperand &operand : op->getOpOperands()) {
        auto type = cast<RankedTensorType>(operand.get().getType());
        auto cast = ComputeOp::create(
            builder, op.getLoc(), TypeRange{type.clone(bf16)}, "Cast",
            ValueRange{operand.get()}, castAttrs(kOnnxBFloat16),
            unique((name + "/bf16." +
                    std::to_string(operand.getOperandNumber()))
                       .str()),
            StringAttr());
        // The casts belong to the op: its tags (an unrolled RNN's
        // tofu.timestep, tofu.recurrence) let tofu-coarsen group them with
        // the same casts of the other timesteps.
        cast->setDiscardableAttrs(op->getDiscardableAttrDictionary());
        operand.set(cast.getResult(0));
      }
      Value result = op->getResult(0);
      auto type = cast<RankedTensorType>(result.getType());
      result.setType(type.clone(bf16));
      builder.setInsertionPointAfter(op);
      auto back = ComputeOp::create(
          builder, op.getLoc(), TypeRange{type}, "Cast", ValueRange{result},
          castAttrs(kOnnxFloat), unique((name + "/f32").str()), StringAttr());
      back->setDiscardableAttrs(op->getDiscardableAttrDictionary());
      result.replaceAllUsesExcept(back.getResult(0), back);
    }
  }
};

} // namespace
} // namespace tofu
