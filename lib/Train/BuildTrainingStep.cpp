//===- BuildTrainingStep.cpp - forward graph -> training step -------------===//
//
// Reverse-mode automatic differentiation over tofu.compute ops, driven by the
// gradient rules of the TDL specs, followed by an SGD update per parameter.
//
//===----------------------------------------------------------------------===//
#include "tofu/Dialect/TdlInstance.h"
#include "tofu/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"

namespace tofu {
#define GEN_PASS_DEF_BUILDTRAININGSTEP
#include "tofu/Passes.h.inc"
} // namespace tofu

using namespace mlir;
using namespace tofu;

namespace {

/// Emits backward ops for one function.
class GradientBuilder {
public:
  GradientBuilder(func::FuncOp func, OpBuilder &builder)
      : func(func), builder(builder) {
    func.walk([&](ComputeOp op) { names.insert(op.getName()); });
  }

  /// Creates `spec(operands)` with result types from TDL shape inference.
  FailureOr<ComputeOp> create(Location loc, StringRef spec, ValueRange operands,
                              const tdl::AttrMap &attrs, StringRef name,
                              StringRef gradOf) {
    auto instance = instantiateSpec(spec, operands.getTypes(), attrs);
    if (!instance) {
      emitError(loc) << "while building the gradient of '" << gradOf
                     << "': " << llvm::toString(instance.takeError());
      return failure();
    }
    SmallVector<Type> types;
    for (const auto &type : instance->outputTypes())
      types.push_back(fromTdlType(builder.getContext(), type));
    return ComputeOp::create(
        builder, loc, types, spec, operands,
        fromTdlAttrs(builder.getContext(), attrs), uniqueName(name),
        gradOf.empty() ? StringAttr() : builder.getStringAttr(gradOf));
  }

  /// Adds `grad` to the accumulated gradient of `value`.
  LogicalResult accumulate(Value value, Value grad, Location loc,
                           StringRef gradOf) {
    if (grad.getType() != value.getType()) {
      emitError(loc) << "the gradient rule of '" << gradOf
                     << "' gives a gradient of type " << grad.getType()
                     << " for an operand of type " << value.getType()
                     << "; gradients through broadcasting are not supported "
                        "yet";
      return failure();
    }
    auto it = grads.find(value);
    if (it == grads.end()) {
      grads[value] = grad;
      return success();
    }
    auto sum = create(loc, "Add", {it->second, grad}, {},
                      (gradOf + ".grad_sum").str(), gradOf);
    if (failed(sum))
      return failure();
    it->second = sum->getResult(0);
    return success();
  }

  Value gradientOf(Value value) const { return grads.lookup(value); }

  std::string uniqueName(StringRef base) {
    std::string name = base.str();
    for (int i = 1; !names.insert(name).second; ++i)
      name = (base + "." + std::to_string(i)).str();
    return name;
  }

private:
  func::FuncOp func;
  OpBuilder &builder;
  llvm::DenseMap<Value, Value> grads;
  llvm::StringSet<> names;
};

struct BuildTrainingStepPass
    : public tofu::impl::BuildTrainingStepBase<BuildTrainingStepPass> {
  using BuildTrainingStepBase::BuildTrainingStepBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<LossOp> losses;
    func.walk([&](LossOp op) { losses.push_back(op); });
    if (losses.size() != 1) {
      func.emitError() << "a training step needs exactly one scalar loss, "
                          "found "
                       << losses.size()
                       << "; the model's single scalar float output is used "
                          "as the loss (choosing another with --loss is not "
                          "supported yet)";
      return signalPassFailure();
    }
    if (!func.getOps<UpdateOp>().empty()) {
      func.emitError() << "the function already is a training step";
      return signalPassFailure();
    }
    LossOp loss = losses.front();
    SmallVector<ComputeOp> forward;
    func.walk([&](ComputeOp op) { forward.push_back(op); });

    OpBuilder builder(func.getContext());
    builder.setInsertionPoint(func.getBody().front().getTerminator());
    GradientBuilder grads(func, builder);
    Location loc = loss.getLoc();

    auto seed =
        grads.create(loc, "Ones", {loss.getLoss()}, {}, "loss.grad_seed", "");
    if (failed(seed))
      return signalPassFailure();
    if (failed(
            grads.accumulate(loss.getLoss(), seed->getResult(0), loc, "loss")))
      return signalPassFailure();

    const tdl::SpecLibrary &library = tdl::SpecLibrary::builtin();
    for (ComputeOp op : llvm::reverse(forward)) {
      SmallVector<Value> outputGrads;
      bool anyGrad = false;
      for (Value result : op.getResults()) {
        outputGrads.push_back(grads.gradientOf(result));
        anyGrad |= static_cast<bool>(outputGrads.back());
      }
      if (!anyGrad)
        continue;
      auto instance = tofu::instantiate(op);
      if (!instance) {
        op.emitError() << llvm::toString(instance.takeError());
        return signalPassFailure();
      }
      auto expansion = tdl::expandGradient(library, *instance);
      if (!expansion) {
        op.emitError() << "cannot differentiate '" << op.getName() << "' ("
                       << op.getSpec()
                       << "): " << llvm::toString(expansion.takeError());
        return signalPassFailure();
      }
      SmallVector<Value> temps;
      auto resolve = [&](const tdl::GradOperand &operand) -> Value {
        switch (operand.kind) {
        case tdl::GradOperand::Kind::ForwardInput:
          return operand.index < op.getInputs().size()
                     ? op.getInputs()[operand.index]
                     : Value();
        case tdl::GradOperand::Kind::ForwardOutput:
          return op.getResult(operand.index);
        case tdl::GradOperand::Kind::OutputGrad:
          return outputGrads[operand.index];
        case tdl::GradOperand::Kind::Temp:
          return temps[operand.index];
        }
        return Value();
      };
      for (auto [i, call] : llvm::enumerate(expansion->calls)) {
        SmallVector<Value> operands;
        for (const auto &operand : call.operands) {
          Value value = resolve(operand);
          if (!value) {
            op.emitError() << "the gradient rule of '" << op.getName()
                           << "' needs a value that does not exist (an "
                              "output without gradient or an absent input)";
            return signalPassFailure();
          }
          operands.push_back(value);
        }
        auto created =
            grads.create(op.getLoc(), call.op, operands, call.attrs,
                         (op.getName() + ".grad").str(), op.getName());
        if (failed(created))
          return signalPassFailure();
        temps.push_back(created->getResult(0));
      }
      for (auto [i, gradOperand] : llvm::enumerate(expansion->inputGrads)) {
        if (!gradOperand || i >= op.getInputs().size())
          continue;
        Value input = op.getInputs()[i];
        if (isa_and_nonnull<InputOp>(input.getDefiningOp()))
          continue; // no gradient is needed for data
        Value grad = resolve(*gradOperand);
        if (!grad)
          continue;
        if (failed(grads.accumulate(input, grad, op.getLoc(), op.getName())))
          return signalPassFailure();
      }
    }

    SmallVector<ParamOp> params;
    func.walk([&](ParamOp op) { params.push_back(op); });
    for (ParamOp param : params) {
      if (param.getConstant())
        continue; // an ONNX Constant or folded value: never trained
      Value grad = grads.gradientOf(param.getResult());
      if (!grad)
        continue; // does not influence the loss
      tdl::AttrMap attrs;
      attrs["lr"] = tdl::AttrValue::ofFloat(learningRate);
      auto update =
          grads.create(param.getLoc(), "SGDUpdate", {param.getResult(), grad},
                       attrs, (param.getSymName() + ".sgd").str(), "");
      if (failed(update))
        return signalPassFailure();
      UpdateOp::create(builder, param.getLoc(), param.getResult(), grad,
                       update->getResult(0));
    }

    // Backward ops whose results nobody uses (e.g. the gradient with respect
    // to a data input) are dropped, last first so chains go entirely.
    SmallVector<ComputeOp> created;
    func.walk([&](ComputeOp op) {
      if (op.getGradOf() || op.getSpec() == "Ones")
        created.push_back(op);
    });
    for (ComputeOp op : llvm::reverse(created))
      if (op->use_empty())
        op->erase();
  }
};

} // namespace
