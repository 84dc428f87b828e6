//===- BuildTrainingStep.cpp - forward graph -> training step -------------===//
//
// Picks the loss among the model's outputs (or adds a softmax cross-entropy
// against a new labels input), builds the backward pass by reverse-mode
// automatic differentiation over tofu.compute ops, driven by the gradient
// rules of the TDL specs, and appends one optimizer update per trainable
// parameter, with the optimizer's state as persistent tensors. A model that
// carries its own training algorithm (tofu.gradient ops, from ONNX
// training_info) keeps its loss, optimizer ops and updates: only the
// gradients are built.
//
//===----------------------------------------------------------------------===//
#include "tofu/Dialect/TdlInstance.h"
#include "tofu/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/GlobPattern.h"

#include <cstring>

namespace tofu {
#define GEN_PASS_DEF_BUILDTRAININGSTEP
#include "tofu/Passes.h.inc"
} // namespace tofu

using namespace mlir;
using namespace tofu;

namespace {

/// The `--loss` value that adds a softmax cross-entropy loss.
constexpr llvm::StringLiteral kSoftmaxCrossEntropy = "softmax-cross-entropy";
/// The ignore_index of the loss `--loss=softmax-cross-entropy` adds (the
/// SoftmaxCrossEntropyLoss spec's default, PyTorch's cross_entropy's).
constexpr int64_t kIgnoreIndex = -100;

/// The name a tensor is known by in tags and plans: a parameter's or
/// input's name, or the producing op's name (`#i` for result i of a
/// multi-result op).
std::string tensorName(Value value) {
  Operation *op = value.getDefiningOp();
  if (auto param = dyn_cast_or_null<ParamOp>(op))
    return param.getSymName().str();
  if (auto input = dyn_cast_or_null<InputOp>(op))
    return input.getSymName().str();
  if (auto compute = dyn_cast_or_null<ComputeOp>(op)) {
    std::string name = compute.getName().str();
    if (compute.getNumResults() > 1)
      name += "#" + std::to_string(cast<OpResult>(value).getResultNumber());
    return name;
  }
  return "?";
}

/// "name (type), name (type), ..." of the model outputs, for errors.
std::string describeOutputs(ArrayRef<OutputOp> outputs) {
  if (outputs.empty())
    return "the model has no outputs";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "outputs: ";
  llvm::interleaveComma(outputs, os, [&](OutputOp output) {
    os << "'" << output.getName() << "' (" << output.getValue().getType()
       << ")";
  });
  return text;
}

/// A scalar of a floating-point type (f32, f64, f16, bf16): a loss.
bool isScalarFloat(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.getRank() == 0 && isa<FloatType>(type.getElementType());
}

/// The index of the first of the `count` words of type W at `data` whose
/// `mask` bits are all ones, or `count`. Blocks of 4096 words are tested
/// without branches (vectorized: a VGG19's 548 MB take 0.1 s, not 1 s).
template <typename W>
size_t firstAllOnes(const char *data, size_t count, uint64_t mask) {
  const W m = static_cast<W>(mask);
  constexpr size_t kBlock = 4096;
  for (size_t begin = 0; begin < count; begin += kBlock) {
    size_t end = std::min(count, begin + kBlock);
    W block[kBlock];
    std::memcpy(block, data + begin * sizeof(W), (end - begin) * sizeof(W));
    bool any = false;
    for (size_t i = 0; i < end - begin; ++i)
      any |= (block[i] & m) == m;
    if (!any)
      continue;
    for (size_t i = 0; i < end - begin; ++i)
      if ((block[i] & m) == m)
        return begin + i;
  }
  return count;
}

/// The first non-finite element of a parameter's initial value ("-inf",
/// "inf" or "NaN"), or nullopt when every element is finite or the value is
/// unknown (a graph-only model). Reads the raw bytes: a float's exponent
/// bits are all ones exactly for inf and NaN.
std::optional<StringRef> firstNonFinite(ParamOp param) {
  ElementsAttr value = param.getValueAttr();
  if (!value)
    return std::nullopt;
  auto elemType = dyn_cast<FloatType>(value.getElementType());
  if (!elemType)
    return std::nullopt;
  ArrayRef<char> bytes;
  if (auto dense = dyn_cast<DenseElementsAttr>(value))
    bytes = dense.getRawData();
  else if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    if (AsmResourceBlob *blob = resource.getRawHandle().getBlob())
      bytes = blob->getData();
  } else
    return std::nullopt;
  unsigned width = elemType.getWidth();
  uint64_t expMask, mantMask;
  if (elemType.isF64()) {
    expMask = 0x7ff0000000000000ull, mantMask = 0x000fffffffffffffull;
  } else if (elemType.isF32()) {
    expMask = 0x7f800000u, mantMask = 0x007fffffu;
  } else if (elemType.isF16()) {
    expMask = 0x7c00u, mantMask = 0x03ffu;
  } else if (elemType.isBF16()) {
    expMask = 0x7f80u, mantMask = 0x007fu;
  } else {
    return std::nullopt;
  }
  size_t size = width / 8;
  size_t count = bytes.size() / size;
  size_t at = width == 64   ? firstAllOnes<uint64_t>(bytes.data(), count, expMask)
              : width == 32 ? firstAllOnes<uint32_t>(bytes.data(), count, expMask)
                            : firstAllOnes<uint16_t>(bytes.data(), count, expMask);
  if (at == count)
    return std::nullopt;
  uint64_t bits = 0;
  std::memcpy(&bits, bytes.data() + at * size, size); // little-endian host
  if (bits & mantMask)
    return StringRef("NaN");
  return (bits >> (width - 1)) & 1 ? StringRef("-inf") : StringRef("inf");
}

/// Emits backward ops for one function.
class GradientBuilder {
public:
  GradientBuilder(func::FuncOp func, OpBuilder &builder)
      : func(func), builder(builder) {
    func.walk([&](Operation *op) {
      if (auto compute = dyn_cast<ComputeOp>(op))
        names.insert(compute.getName());
      else if (auto param = dyn_cast<ParamOp>(op))
        names.insert(param.getSymName());
      else if (auto input = dyn_cast<InputOp>(op))
        names.insert(input.getSymName());
    });
  }

  /// Creates `spec(operands)` with result types from TDL shape inference.
  FailureOr<ComputeOp> create(Location loc, StringRef spec, ValueRange operands,
                              const tdl::AttrMap &attrs, StringRef name,
                              StringRef gradOf) {
    auto instance = instantiateSpec(spec, operands.getTypes(), attrs);
    if (!instance) {
      emitError(loc) << "while building the "
                     << (gradOf.empty() ? "training step" : "gradient of '")
                     << gradOf << (gradOf.empty() ? "" : "'") << ": "
                     << llvm::toString(instance.takeError());
      return failure();
    }
    SmallVector<Type> types;
    for (const auto &type : instance->outputTypes())
      types.push_back(fromTdlType(builder.getContext(), type));
    return ComputeOp::create(
        builder, loc, types, spec, operands,
        fromTdlAttrs(builder.getContext(), attrs), uniqueName(name),
        gradOf.empty() ? StringAttr() : builder.getStringAttr(gradOf),
        StringAttr());
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
      order.push_back(value);
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

  /// Tags the op producing each complete gradient with `grad_for`, the
  /// tensor it is the gradient of (the first tensor, in program order,
  /// when one value is the gradient of several, as through an identity).
  void tagGradients() {
    SmallVector<Value> values(order.begin(), order.end());
    llvm::stable_sort(values, [](Value a, Value b) {
      Operation *opA = a.getDefiningOp(), *opB = b.getDefiningOp();
      if (opA == opB)
        return cast<OpResult>(a).getResultNumber() <
               cast<OpResult>(b).getResultNumber();
      return opA->isBeforeInBlock(opB);
    });
    for (Value value : values) {
      auto producer = grads.lookup(value).getDefiningOp<ComputeOp>();
      if (!producer || producer->getNumResults() != 1 ||
          producer.getGradForAttr())
        continue;
      producer.setGradForAttr(builder.getStringAttr(tensorName(value)));
    }
  }

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
  /// Values with a gradient, in the order their first gradient arrived.
  SmallVector<Value> order;
  llvm::StringSet<> names;
};

/// Drops the backward ops whose results nobody uses (the gradient with
/// respect to a data input or a frozen parameter, zeros a rule did not
/// need), last first so chains go entirely.
void eraseUnusedBackwardOps(func::FuncOp func) {
  SmallVector<ComputeOp> created;
  func.walk([&](ComputeOp op) {
    if (op.getGradOf() || op.getSpec() == "Ones")
      created.push_back(op);
  });
  for (ComputeOp op : llvm::reverse(created))
    if (op->use_empty())
      op->erase();
}

/// Rebuilds every tofu.compute whose trailing optional results (`name?:`
/// outputs of its TDL spec: SoftmaxCrossEntropyLoss's log_prob, MaxPool's
/// Indices, Dropout's mask, BatchNormalization's running statistics) nobody
/// uses without them, so that the training step does not compute them.
/// An op left with one result is known by its plain name: `grad_for` tags
/// that named its result 0 as `<name>#0` are renamed.
void dropUnusedOptionalResults(func::FuncOp func) {
  llvm::StringMap<std::string> renamed;
  SmallVector<ComputeOp> candidates;
  func.walk([&](ComputeOp op) {
    if (op.getNumResults() > 1 && op->getResults().back().use_empty())
      candidates.push_back(op);
  });
  for (ComputeOp op : candidates) {
    auto instance = tofu::instantiate(op);
    if (!instance) {
      llvm::consumeError(instance.takeError()); // the verifier reports it
      continue;
    }
    unsigned keep = op.getNumResults();
    while (keep > instance->numRequiredOutputs() &&
           instance->isOptionalOutput(keep - 1) &&
           op.getResult(keep - 1).use_empty())
      --keep;
    if (keep == op.getNumResults())
      continue;
    OpBuilder builder(op);
    OperationState state(op.getLoc(), op->getName());
    state.addOperands(op->getOperands());
    state.addAttributes(op->getAttrs());
    state.addTypes(TypeRange(op->getResultTypes()).take_front(keep));
    Operation *trimmed = builder.create(state);
    for (unsigned i = 0; i < keep; ++i)
      op.getResult(i).replaceAllUsesWith(trimmed->getResult(i));
    if (keep == 1)
      renamed[(op.getName() + "#0").str()] = op.getName().str();
    op->erase();
  }
  if (renamed.empty())
    return;
  func.walk([&](ComputeOp op) {
    if (auto tag = op.getGradFor())
      if (auto it = renamed.find(*tag); it != renamed.end())
        op.setGradForAttr(StringAttr::get(op.getContext(), it->second));
  });
}

struct BuildTrainingStepPass
    : public tofu::impl::BuildTrainingStepBase<BuildTrainingStepPass> {
  using BuildTrainingStepBase::BuildTrainingStepBase;

  void runOnOperation() override;

private:
  FailureOr<Value> selectLoss(func::FuncOp func, OpBuilder &builder,
                              GradientBuilder &grads);
  FailureOr<Value> addSoftmaxCrossEntropy(func::FuncOp func,
                                          OpBuilder &builder,
                                          GradientBuilder &grads,
                                          ArrayRef<OutputOp> outputs,
                                          StringRef logitsName,
                                          SmallVectorImpl<Operation *> &skipped);
  FailureOr<llvm::DenseSet<Operation *>> frozenParams(func::FuncOp func);
  LogicalResult buildBackward(func::FuncOp func, Value loss,
                              GradientBuilder &grads,
                              const llvm::DenseSet<Operation *> &frozen,
                              const llvm::DenseSet<Value> &wanted = {});
  LogicalResult expandGradientOps(func::FuncOp func,
                                  ArrayRef<GradientOp> gradientOps,
                                  OpBuilder &builder, GradientBuilder &grads);
  LogicalResult addUpdate(ParamOp param, Value grad, OpBuilder &builder,
                          GradientBuilder &grads);
  LogicalResult addRunningStatisticUpdates(func::FuncOp func,
                                           OpBuilder &builder);
};

FailureOr<Value> BuildTrainingStepPass::selectLoss(func::FuncOp func,
                                                   OpBuilder &builder,
                                                   GradientBuilder &grads) {
  SmallVector<LossOp> losses(func.getOps<LossOp>());
  SmallVector<OutputOp> outputs(func.getOps<OutputOp>());
  auto eraseOutputs = [&] {
    for (OutputOp output : outputs)
      output->erase();
  };
  if (!losses.empty()) {
    if (losses.size() > 1) {
      func.emitError() << "a training step needs exactly one scalar loss, "
                          "found "
                       << losses.size() << " tofu.loss ops";
      return failure();
    }
    if (!lossName.empty()) {
      func.emitError() << "the function already marks its loss (tofu.loss); "
                          "the loss option '"
                       << lossName << "' cannot choose another";
      return failure();
    }
    eraseOutputs();
    return losses.front().getLoss();
  }

  StringRef name = lossName;
  if (name == kSoftmaxCrossEntropy ||
      name.starts_with((kSoftmaxCrossEntropy + ":").str())) {
    StringRef logits = name.drop_front(kSoftmaxCrossEntropy.size());
    logits.consume_front(":");
    SmallVector<Operation *> skipped;
    auto loss = addSoftmaxCrossEntropy(func, builder, grads, outputs, logits,
                                       skipped);
    if (succeeded(loss))
      eraseOutputs();
    // The model's own Softmax, whose input became the logits, and the
    // reshapes after it compute nothing the step needs any more (outermost
    // first).
    for (Operation *op : skipped)
      if (op->use_empty())
        op->erase();
    return loss;
  }

  OutputOp chosen;
  if (name.empty()) {
    SmallVector<OutputOp> scalars;
    for (OutputOp output : outputs)
      if (isScalarFloat(output.getValue()))
        scalars.push_back(output);
    if (scalars.size() != 1) {
      func.emitError() << "a training step needs exactly one scalar loss, "
                          "found "
                       << scalars.size()
                       << " scalar float model outputs; choose the loss with "
                          "--loss=<output name> or add one with --loss="
                       << kSoftmaxCrossEntropy << "[:<logits output>] ("
                       << describeOutputs(outputs) << ")";
      return failure();
    }
    chosen = scalars.front();
  } else {
    for (OutputOp output : outputs)
      if (output.getName() == name)
        chosen = output;
    if (!chosen) {
      func.emitError() << "--loss names '" << name
                       << "', which is not a model output ("
                       << describeOutputs(outputs) << ")";
      return failure();
    }
    if (!isScalarFloat(chosen.getValue())) {
      func.emitError() << "--loss names output '" << name << "' of type "
                       << chosen.getValue().getType()
                       << ", but the loss must be a float scalar (tensor<f32>, "
                          "tensor<f64>, ...); "
                          "for class scores use --loss="
                       << kSoftmaxCrossEntropy << ":" << name;
      return failure();
    }
  }
  Value loss = chosen.getValue();
  std::string description = ("model output '" + chosen.getName() + "'").str();
  if (auto producer = loss.getDefiningOp<ComputeOp>())
    description += (" (" + producer.getSpec() + " '" + producer.getName() +
                    "')")
                       .str();
  LossOp::create(builder, chosen.getLoc(), loss,
                 builder.getStringAttr(description));
  eraseOutputs();
  return loss;
}

/// Whether every dim of `type` from `from` on is 1 (true when there are none).
static bool hasUnitTrailingDims(RankedTensorType type, int64_t from) {
  for (int64_t d = from; d < type.getRank(); ++d)
    if (type.getDimSize(d) != 1)
      return false;
  return true;
}

FailureOr<Value> BuildTrainingStepPass::addSoftmaxCrossEntropy(
    func::FuncOp func, OpBuilder &builder, GradientBuilder &grads,
    ArrayRef<OutputOp> outputs, StringRef logitsName,
    SmallVectorImpl<Operation *> &skipped) {
  OutputOp logits;
  if (logitsName.empty()) {
    // [N, C], or [N, C, 1, ...]: a classifier whose head is a 1x1
    // convolution or a global pool (SqueezeNet, DenseNet of the ONNX model
    // zoo) keeps unit spatial dims, which the loss squeezes below.
    SmallVector<OutputOp> candidates;
    for (OutputOp output : outputs) {
      auto type = cast<RankedTensorType>(output.getValue().getType());
      if (type.getRank() >= 2 && hasUnitTrailingDims(type, 2) &&
          isa<FloatType>(type.getElementType()))
        candidates.push_back(output);
    }
    if (candidates.size() != 1) {
      func.emitError() << "--loss=" << kSoftmaxCrossEntropy << " needs the "
                       << "logits: the model has " << candidates.size()
                       << " float outputs of shape [N, C] or [N, C, 1, ...]; "
                       << "name one with --loss="
                       << kSoftmaxCrossEntropy << ":<output> ("
                       << describeOutputs(outputs) << ")";
      return failure();
    }
    logits = candidates.front();
  } else {
    for (OutputOp output : outputs)
      if (output.getName() == logitsName)
        logits = output;
    if (!logits) {
      func.emitError() << "--loss=" << kSoftmaxCrossEntropy << ":"
                       << logitsName << ": '" << logitsName
                       << "' is not a model output ("
                       << describeOutputs(outputs) << ")";
      return failure();
    }
  }
  auto type = cast<RankedTensorType>(logits.getValue().getType());
  if (!isa<FloatType>(type.getElementType()) || type.getRank() < 2) {
    func.emitError() << "--loss=" << kSoftmaxCrossEntropy << ": the logits '"
                     << logits.getName() << "' have type " << type
                     << "; logits of shape [batch, classes, d1, ...] (rank "
                        ">= 2, a float type) are supported";
    return failure();
  }

  // The scores the loss reads and the axis of their classes: the output
  // itself with classes on dim 1 (ONNX's SoftmaxCrossEntropyLoss and
  // PyTorch's cross_entropy), unless the model normalizes it already. A
  // Softmax's output is probabilities: softmax cross-entropy on them would
  // apply a second softmax (and learn next to nothing), so its input is the
  // logits. A LogSoftmax's output is log-probabilities, which the loss may
  // read as they are: softmax(log_softmax(x)) = softmax(x). Either tells the
  // class axis.
  Value scores = logits.getValue();
  int64_t classAxis = 1;
  std::string description = ("softmax cross-entropy (mean, ignore_index "
                             "-100) of the model output '" +
                             logits.getName() + "'")
                                .str();
  // An output [N, C, 1, ...] may be a Softmax over [N, C] reshaped back
  // (Flatten, Softmax, Reshape: the 2-D coercion of a pre-13 Softmax written
  // out), an output [N, C] a Softmax over axis 1 of [N, C, 1, 1] flattened:
  // the reshapes that only add or drop unit dims are looked through to that
  // Softmax, whose input is then the logits exactly.
  SmallVector<Operation *> reshapes;
  if (hasUnitTrailingDims(type, 2)) {
    Value probe = scores;
    SmallVector<ComputeOp> chain;
    while (auto op = probe.getDefiningOp<ComputeOp>()) {
      if (op.getGradOf() || op.getInputs().empty() ||
          !llvm::is_contained({"Reshape", "Flatten", "Squeeze", "Unsqueeze"},
                              op.getSpec()))
        break;
      auto in = dyn_cast<RankedTensorType>(op.getInputs()[0].getType());
      if (!in || in.getRank() < 2 || in.getDimSize(0) != type.getDimSize(0) ||
          in.getDimSize(1) != type.getDimSize(1) || !hasUnitTrailingDims(in, 2))
        break;
      chain.push_back(op);
      probe = op.getInputs()[0];
    }
    // The Softmax's class axis must be dim 1 of its [N, C, 1, ...] input.
    auto softmax = probe.getDefiningOp<ComputeOp>();
    auto isClassAxisOne = [&]() {
      int64_t rank = cast<RankedTensorType>(probe.getType()).getRank();
      int64_t axis = -1;
      if (auto attr = softmax.getAttrs().getAs<IntegerAttr>("axis"))
        axis = attr.getInt();
      return (axis < 0 ? axis + rank : axis) == 1;
    };
    if (!chain.empty() && softmax && !softmax.getGradOf() &&
        (softmax.getSpec() == "Softmax" || softmax.getSpec() == "LogSoftmax") &&
        isClassAxisOne()) {
      description += (", through the reshape '" + chain.back().getName() +
                      "'")
                         .str();
      scores = probe;
      type = cast<RankedTensorType>(probe.getType());
      for (ComputeOp op : chain)
        reshapes.push_back(op);
    }
  }
  // Other probabilities reshaped after their Softmax (a Softmax before
  // opset 13 on a non-last axis is imported as Flatten, Softmax, Reshape)
  // are no logits either, and the Softmax's input has another shape:
  // refused rather than given a second softmax.
  for (Value v = scores;;) {
    auto op = v.getDefiningOp<ComputeOp>();
    if (!op || op.getGradOf() || op->getNumOperands() == 0)
      break;
    StringRef spec = op.getSpec();
    if (spec == "Softmax" && v != scores) {
      op.emitError() << "--loss=" << kSoftmaxCrossEntropy << ": the logits '"
                     << logits.getName() << "' are the probabilities of "
                     << "Softmax '" << op.getName() << "' reshaped (by "
                     << scores.getDefiningOp<ComputeOp>().getSpec() << " '"
                     << scores.getDefiningOp<ComputeOp>().getName()
                     << "'; a Softmax before opset 13 on a non-last axis "
                     << "is imported so), not logits; name the logits with "
                     << "--loss=" << kSoftmaxCrossEntropy
                     << ":<output>, or compute the loss in the model";
      return failure();
    }
    if (spec != "Reshape" && spec != "Flatten" && spec != "Squeeze" &&
        spec != "Unsqueeze" && spec != "Transpose" && spec != "Identity")
      break;
    v = op->getOperand(0);
  }
  skipped.append(reshapes.begin(), reshapes.end());
  if (auto producer = scores.getDefiningOp<ComputeOp>();
      producer && !producer.getGradOf() &&
      (producer.getSpec() == "Softmax" || producer.getSpec() == "LogSoftmax")) {
    int64_t axis = -1;
    if (auto attr = producer.getAttrs().getAs<IntegerAttr>("axis"))
      axis = attr.getInt();
    if (axis < 0)
      axis += type.getRank();
    if (axis <= 0 || axis >= type.getRank()) {
      producer.emitError()
          << "--loss=" << kSoftmaxCrossEntropy << ": the logits '"
          << logits.getName() << "' come from " << producer.getSpec() << " '"
          << producer.getName() << "' over axis " << axis << " of "
          << type << ", which is not a class axis (the batch is dim 0); "
          << "compute the loss in the model instead";
      return failure();
    }
    classAxis = axis;
    if (producer.getSpec() == "Softmax") {
      scores = producer.getInputs()[0];
      skipped.push_back(producer);
      description += (", read before its Softmax '" + producer.getName() +
                      "' (the loss takes the Softmax's input as the logits "
                      "instead of applying a second softmax)")
                         .str();
    } else {
      description += (", the log-probabilities of LogSoftmax '" +
                      producer.getName() +
                      "' (read as they are: softmax(log_softmax(x)) = "
                      "softmax(x))")
                         .str();
    }
  }
  auto scoresType = cast<RankedTensorType>(scores.getType());
  if (classAxis != 1) {
    // Classes to dim 1, as the loss takes them: [N, d1, .., C] -> [N, C, ..].
    SmallVector<int64_t> perm = {0, classAxis};
    for (int64_t d = 1; d < scoresType.getRank(); ++d)
      if (d != classAxis)
        perm.push_back(d);
    tdl::AttrMap attrs;
    attrs["perm"] = tdl::AttrValue::ofInts(
        std::vector<int64_t>(perm.begin(), perm.end()));
    auto moved = grads.create(logits.getLoc(), "Transpose", {scores}, attrs,
                              "softmax_cross_entropy.classes_to_dim1", "");
    if (failed(moved))
      return failure();
    scores = moved->getResult(0);
    scoresType = cast<RankedTensorType>(scores.getType());
    description += ", classes along its axis " + std::to_string(classAxis);
  }

  // Scores [N, C, 1, ...] (a 1x1 head): the spatial dims hold one cell, so
  // the loss over them is the loss over [N, C] with labels [N]; flattened,
  // so the labels are [N] as for any classifier.
  if (scoresType.getRank() > 2 && hasUnitTrailingDims(scoresType, 2)) {
    tdl::AttrMap attrs;
    attrs["axis"] = tdl::AttrValue::ofInt(1);
    auto flat = grads.create(logits.getLoc(), "Flatten", {scores}, attrs,
                             "softmax_cross_entropy.squeeze_unit_dims", "");
    if (failed(flat))
      return failure();
    std::string dims;
    llvm::raw_string_ostream os(dims);
    llvm::interleave(scoresType.getShape(), os, "x");
    scores = flat->getResult(0);
    scoresType = cast<RankedTensorType>(scores.getType());
    description += ", its unit dims squeezed ([" + dims + "] read as [N, C])";
  }

  // The labels input: after the existing inputs, named "labels" unless the
  // model already uses that name; [N, *D] for scores [N, C, *D].
  std::string features;
  InputOp lastInput;
  for (InputOp input : func.getOps<InputOp>()) {
    lastInput = input;
    if (features.empty() && input.getRole() == "features")
      features = input.getSymName().str();
  }
  std::string labelsName = grads.uniqueName("labels");
  OpBuilder::InsertionGuard guard(builder);
  if (lastInput)
    builder.setInsertionPointAfter(lastInput);
  else
    builder.setInsertionPointToStart(&func.getBody().front());
  SmallVector<int64_t> labelsShape = {scoresType.getDimSize(0)};
  for (int64_t d = 2; d < scoresType.getRank(); ++d)
    labelsShape.push_back(scoresType.getDimSize(d));
  int64_t classes = scoresType.getDimSize(1);
  auto labelsType =
      RankedTensorType::get(labelsShape, builder.getIntegerType(64));
  auto labels = InputOp::create(
      builder, NameLoc::get(builder.getStringAttr(labelsName)), labelsType,
      labelsName, "labels", builder.getI64IntegerAttr(classes),
      features.empty() ? StringAttr() : builder.getStringAttr(features),
      builder.getI64IntegerAttr(kIgnoreIndex));
  {
    std::string shape;
    llvm::raw_string_ostream os(shape);
    llvm::interleave(labelsShape, os, "x");
    description += ", " + std::to_string(classes) + " classes, against the "
                   "added labels input '" + labelsName + "' [" + shape + "]";
  }

  builder.setInsertionPoint(func.getBody().front().getTerminator());
  auto loss = grads.create(logits.getLoc(), "SoftmaxCrossEntropyLoss",
                           {scores, labels.getResult()}, {},
                           "softmax_cross_entropy", "");
  if (failed(loss))
    return failure();
  LossOp::create(builder, logits.getLoc(), loss->getResult(0),
                 builder.getStringAttr(description));
  return loss->getResult(0);
}

/// Refuses a loss that depends on no graph input and no trainable
/// parameter (a constant folded at import, or arithmetic on constants
/// only): no instruction of the plan would compute it, and no update could
/// change it.
static LogicalResult checkLossIsComputed(LossOp lossOp) {
  Value loss = lossOp.getLoss();
  SmallVector<Value> worklist = {loss};
  llvm::DenseSet<Value> seen;
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    if (!seen.insert(value).second)
      continue;
    Operation *producer = value.getDefiningOp();
    if (!producer || isa<InputOp>(producer))
      return success();
    if (auto param = dyn_cast<ParamOp>(producer)) {
      if (!param.getConstant() && !param.getStateOf())
        return success();
      continue;
    }
    llvm::append_range(worklist, producer->getOperands());
  }
  std::string what = lossOp.getDescription()
                         ? lossOp.getDescription()->str()
                         : "'" + tensorName(loss) + "'";
  auto param = loss.getDefiningOp<ParamOp>();
  InFlightDiagnostic diag = lossOp.emitError();
  diag << "the loss, " << what << ", ";
  if (param && param.getConstant())
    diag << "is the compile-time constant '" << param.getSymName()
         << "': it folded at import";
  else
    diag << "is computed from compile-time constants only";
  diag << " (Constant nodes, integer initializers, shape arithmetic) and "
          "depends on no graph input and no trainable initializer, so "
          "training could not change it; make the loss a function of the "
          "model's inputs and weights";
  return failure();
}

/// The parameters that `patterns` (names or globs of the flag `flag`)
/// match; a bad pattern or one that matches no parameter is an error.
/// `exact` receives the parameters that a pattern names exactly.
static FailureOr<llvm::DenseSet<Operation *>>
matchParams(func::FuncOp func, ArrayRef<ParamOp> params,
            ArrayRef<std::string> patterns, StringRef flag,
            llvm::DenseSet<Operation *> *exact = nullptr) {
  llvm::DenseSet<Operation *> matched;
  for (const std::string &pattern : patterns) {
    auto glob = llvm::GlobPattern::create(pattern);
    if (!glob) {
      func.emitError() << flag << ": bad pattern '" << pattern
                       << "': " << llvm::toString(glob.takeError());
      return failure();
    }
    bool any = false;
    for (ParamOp param : params)
      if (glob->match(param.getSymName())) {
        matched.insert(param);
        if (exact && param.getSymName() == pattern)
          exact->insert(param);
        any = true;
      }
    if (!any) {
      std::string names;
      for (ParamOp param : params)
        names += (names.empty() ? "'" : ", '") + param.getSymName().str() +
                 "'";
      func.emitError() << flag << ": '" << pattern
                       << "' matches no parameter (parameters: "
                       << (names.empty() ? "none" : names) << ")";
      return failure();
    }
  }
  return matched;
}

/// The parameters that are not trained (docs/Training.md, "Which
/// initializers train"): with `trainable`, those it does not match;
/// otherwise those the model marks `trainable = false`; in any case those
/// `freeze` matches and those holding a non-finite value (a remark says
/// so; an error where the model or an exact `trainable` name asks to train
/// one).
FailureOr<llvm::DenseSet<Operation *>>
BuildTrainingStepPass::frozenParams(func::FuncOp func) {
  SmallVector<ParamOp> params;
  for (ParamOp param : func.getOps<ParamOp>())
    if (!param.getStateOf() && !param.getConstant())
      params.push_back(param);
  llvm::DenseSet<Operation *> named;
  auto chosen = matchParams(func, params, trainable, "--trainable", &named);
  auto frozenByFlag = matchParams(func, params, freeze, "--freeze");
  if (failed(chosen) || failed(frozenByFlag))
    return failure();
  llvm::DenseSet<Operation *> frozen;
  for (ParamOp param : params) {
    bool trains, explicitly;
    if (!trainable.empty()) {
      trains = chosen->contains(param);
      explicitly = named.contains(param);
    } else {
      BoolAttr mark = param.getTrainableAttr();
      trains = !mark || mark.getValue();
      explicitly = mark && mark.getValue();
    }
    if (trains && frozenByFlag->contains(param))
      trains = false;
    if (trains) {
      if (std::optional<StringRef> bad = firstNonFinite(param)) {
        if (explicitly) {
          param.emitError()
              << "parameter '" << param.getSymName() << "' holds " << *bad
              << " and cannot be trained (one step would make it NaN), but "
              << (trainable.empty() ? "the model's metadata_props "
                                      "'tofu.trainable' lists it"
                                    : "--trainable names it")
              << "; keep it fixed with --freeze " << param.getSymName();
          return failure();
        }
        // A NaN is never a starting point (a damaged or wrongly exported
        // weight; PyTorch would train it into NaN without a word): refused
        // unless --freeze keeps it fixed. An inf is a mask's or a buffer's
        // (a causal mask's -inf): not trained, and said so. docs/Errors.md.
        if (*bad == "NaN") {
          param.emitError()
              << "parameter '" << param.getSymName()
              << "' holds NaN in its initial value: training it gives NaN "
                 "from the first step; fix the model's weights, or keep it "
                 "fixed with --freeze "
              << param.getSymName();
          return failure();
        }
        param.emitWarning() << "parameter '" << param.getSymName()
                            << "' holds " << *bad
                            << ", so it is not trained (a mask or a "
                               "constant buffer; --freeze "
                            << param.getSymName() << " says so)";
        trains = false;
      }
    }
    if (!trains)
      frozen.insert(param);
  }
  return frozen;
}

LogicalResult BuildTrainingStepPass::buildBackward(
    func::FuncOp func, Value loss, GradientBuilder &grads,
    const llvm::DenseSet<Operation *> &frozen,
    const llvm::DenseSet<Value> &wanted) {
  SmallVector<ComputeOp> forward;
  func.walk([&](ComputeOp op) {
    // Ops added for the loss (softmax cross-entropy) are forward ops too.
    if (!op.getGradOf())
      forward.push_back(op);
  });
  Location loc = loss.getLoc();
  auto seed = grads.create(loc, "Ones", {loss}, {}, "loss.grad_seed", "");
  if (failed(seed) ||
      failed(grads.accumulate(loss, seed->getResult(0), loc, "loss")))
    return failure();

  // The values whose gradient is needed: trained parameters, the tensors a
  // tofu.gradient asks for, and what is computed from them (PyTorch's
  // requires_grad). No other value needs a gradient, so no rule is
  // expanded for it.
  auto trained = [&](Value value) {
    if (wanted.contains(value))
      return true;
    auto param = value.getDefiningOp<ParamOp>();
    return param && !param.getStateOf() && !param.getConstant() &&
           !frozen.contains(param);
  };
  llvm::DenseSet<Value> needsGradient;
  for (ComputeOp op : forward) {
    if (!llvm::any_of(op.getInputs(), [&](Value input) {
          return needsGradient.contains(input) || trained(input);
        }))
      continue;
    for (Value result : op.getResults())
      needsGradient.insert(result);
  }
  for (ComputeOp op : forward)
    for (Value input : op.getInputs())
      if (trained(input))
        needsGradient.insert(input);

  const tdl::SpecLibrary &library = tdl::SpecLibrary::builtin();
  for (ComputeOp op : llvm::reverse(forward)) {
    SmallVector<Value> outputGrads;
    bool anyGrad = false;
    for (Value result : op.getResults()) {
      outputGrads.push_back(grads.gradientOf(result));
      anyGrad |= static_cast<bool>(outputGrads.back());
    }
    SmallVector<bool> inputsNeedingGradient;
    for (Value input : op.getInputs())
      inputsNeedingGradient.push_back(needsGradient.contains(input));
    if (!anyGrad || !llvm::is_contained(inputsNeedingGradient, true))
      continue;
    auto instance = tofu::instantiate(op);
    if (!instance) {
      op.emitError() << llvm::toString(instance.takeError());
      return failure();
    }
    SmallVector<bool> withGradient;
    for (Value grad : outputGrads)
      withGradient.push_back(static_cast<bool>(grad));
    auto expansion = tdl::expandGradient(library, *instance, withGradient,
                                         inputsNeedingGradient);
    if (!expansion) {
      op.emitError() << "cannot differentiate '" << op.getName() << "' ("
                     << op.getSpec()
                     << "): " << llvm::toString(expansion.takeError());
      return failure();
    }
    SmallVector<Value> temps;
    bool failedZeros = false;
    auto resolve = [&](const tdl::GradOperand &operand) -> Value {
      switch (operand.kind) {
      case tdl::GradOperand::Kind::ForwardInput:
        return operand.index < op.getInputs().size()
                   ? op.getInputs()[operand.index]
                   : Value();
      case tdl::GradOperand::Kind::ForwardOutput:
        // An omitted optional output does not exist.
        return operand.index < op.getNumResults() ? op.getResult(operand.index)
                                                  : Value();
      case tdl::GradOperand::Kind::OutputGrad: {
        if (operand.index >= outputGrads.size())
          return Value();
        Value &grad = outputGrads[operand.index];
        if (!grad) {
          // This output does not reach the loss but another one does: its
          // gradient is zero.
          auto zeros =
              grads.create(op.getLoc(), "Zeros", {op.getResult(operand.index)},
                           {}, (op.getName() + ".grad_zeros").str(),
                           op.getName());
          if (failed(zeros)) {
            failedZeros = true;
            return Value();
          }
          grad = zeros->getResult(0);
        }
        return grad;
      }
      case tdl::GradOperand::Kind::Temp:
        return temps[operand.index];
      }
      return Value();
    };
    for (const auto &call : expansion->calls) {
      SmallVector<Value> operands;
      for (const auto &operand : call.operands) {
        Value value = resolve(operand);
        if (failedZeros)
          return failure();
        if (!value) {
          op.emitError() << "the gradient rule of '" << op.getName()
                         << "' needs a value that does not exist (an "
                            "absent input or omitted optional output)";
          return failure();
        }
        operands.push_back(value);
      }
      auto created = grads.create(op.getLoc(), call.op, operands, call.attrs,
                                  (op.getName() + ".grad").str(),
                                  op.getName());
      if (failed(created))
        return failure();
      temps.push_back(created->getResult(0));
    }
    for (auto [i, gradOperand] : llvm::enumerate(expansion->inputGrads)) {
      if (!gradOperand || i >= op.getInputs().size())
        continue;
      Value input = op.getInputs()[i];
      if (!needsGradient.contains(input))
        continue; // data, constants, optimizer state, frozen parameters
      Value grad = resolve(*gradOperand);
      if (failedZeros)
        return failure();
      if (!grad)
        continue;
      if (failed(grads.accumulate(input, grad, op.getLoc(), op.getName())))
        return failure();
    }
  }
  return success();
}

LogicalResult BuildTrainingStepPass::addUpdate(ParamOp param, Value grad,
                                               OpBuilder &builder,
                                               GradientBuilder &grads) {
  Location loc = param.getLoc();
  StringRef name = param.getSymName();
  auto type = cast<RankedTensorType>(param.getType());
  if (!isa<FloatType>(type.getElementType())) {
    param.emitError() << "parameter '" << name << "' has type " << type
                      << "; only floating-point parameters (f16, bf16, f32, "
                         "f64) have gradients and can be trained (freeze it "
                         "with --freeze)";
    return failure();
  }
  tdl::AttrMap attrs;
  if (optimizer == "sgd") {
    attrs["lr"] = tdl::AttrValue::ofFloat(learningRate);
    if (weightDecay != 0)
      attrs["norm_coefficient"] = tdl::AttrValue::ofFloat(weightDecay);
    auto update = grads.create(loc, "SGDUpdate", {param.getResult(), grad},
                               attrs, (name + ".sgd").str(), "");
    if (failed(update))
      return failure();
    UpdateOp::create(builder, loc, param.getResult(), grad,
                     update->getResult(0));
    return success();
  }

  // Persistent optimizer state, created beside its parameter.
  auto newState = [&](StringRef suffix, RankedTensorType stateType,
                      Attribute initial) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointAfter(param);
    std::string stateName = grads.uniqueName((name + "." + suffix).str());
    return ParamOp::create(
               builder, NameLoc::get(builder.getStringAttr(stateName)),
               stateType, stateName,
               DenseElementsAttr::get(stateType, initial),
               /*constant=*/false, builder.getStringAttr(name),
               /*trainable=*/BoolAttr())
        .getResult();
  };
  auto scalarF32 = RankedTensorType::get({}, builder.getF32Type());
  auto scalarI64 = RankedTensorType::get({}, builder.getIntegerType(64));
  // Optimizer state has the parameter's element type; the learning rate
  // stays f32 (ONNX's optimizers type R and X independently).
  Attribute zero = builder.getFloatAttr(type.getElementType(), 0);
  // Created in reverse so that they read lr, step, state... after param.
  SmallVector<Value> states;
  std::string spec;
  if (optimizer == "momentum") {
    spec = "Momentum";
    attrs["alpha"] = tdl::AttrValue::ofFloat(momentum);
    attrs["beta"] = tdl::AttrValue::ofFloat(momentumBeta);
    attrs["mode"] = tdl::AttrValue::ofString(nesterov ? "nesterov"
                                                      : "standard");
    states.push_back(newState("momentum", type, zero));
  } else if (optimizer == "adam") {
    spec = "Adam";
    attrs["alpha"] = tdl::AttrValue::ofFloat(beta1);
    attrs["beta"] = tdl::AttrValue::ofFloat(beta2);
    attrs["epsilon"] = tdl::AttrValue::ofFloat(epsilon);
    Value second = newState("adam_h", type, zero);
    states.push_back(newState("adam_v", type, zero));
    states.push_back(second);
  } else if (optimizer == "adagrad") {
    spec = "Adagrad";
    attrs["decay_factor"] = tdl::AttrValue::ofFloat(lrDecay);
    attrs["epsilon"] = tdl::AttrValue::ofFloat(epsilon);
    states.push_back(newState("adagrad_h", type, zero));
  } else {
    emitError(loc) << "unknown optimizer '" << optimizer
                   << "' (sgd, momentum, adam or adagrad)";
    return failure();
  }
  attrs["norm_coefficient"] = tdl::AttrValue::ofFloat(weightDecay);
  Value step = newState("step", scalarI64, builder.getI64IntegerAttr(0));
  Value rate = newState("lr", scalarF32,
                        builder.getF32FloatAttr(static_cast<float>(
                            learningRate)));
  SmallVector<Value> operands{rate, step, param.getResult(), grad};
  operands.append(states.begin(), states.end());
  auto update = grads.create(loc, spec, operands, attrs,
                             (name + "." + optimizer + "_update").str(), "");
  if (failed(update))
    return failure();
  auto count = grads.create(loc, "StepCount", {step}, {},
                            (name + ".step_count").str(), "");
  if (failed(count))
    return failure();
  UpdateOp::create(builder, loc, param.getResult(), grad,
                   update->getResult(0));
  for (auto [i, state] : llvm::enumerate(states))
    UpdateOp::create(builder, loc, state, Value(), update->getResult(i + 1));
  UpdateOp::create(builder, loc, step, Value(), count->getResult(0));
  return success();
}

/// A training-mode BatchNormalization computes the new running statistics
/// as its outputs 1 and 2 (running = input * momentum + batch * (1 -
/// momentum)); they become the new values of the parameters it reads as
/// input_mean and input_var at the end of the step (`tofu.update` without
/// gradient), so they persist across steps like optimizer state and are
/// written back by `tofu-run --save`. Statistics that are not a parameter
/// (a constant, a computed value) stay fixed; frozen ones are updated
/// (freezing stops the gradient and the optimizer, not the op's own
/// statistics, as `requires_grad = False` in PyTorch), so a model's
/// `tofu.frozen` list may name its running statistics, which are buffers.
LogicalResult
BuildTrainingStepPass::addRunningStatisticUpdates(func::FuncOp func,
                                                  OpBuilder &builder) {
  llvm::DenseMap<Operation *, ComputeOp> updatedBy;
  for (UpdateOp update : func.getOps<UpdateOp>())
    updatedBy[update.getParam().getDefiningOp()] = ComputeOp();
  SmallVector<ComputeOp> norms;
  func.walk([&](ComputeOp op) {
    if (op.getSpec() != "BatchNormalization" || op.getGradOf() ||
        op.getNumOperands() < 5 || op.getNumResults() < 3)
      return;
    auto mode = op.getAttrs().getAs<IntegerAttr>("training_mode");
    if (mode && mode.getInt() != 0)
      norms.push_back(op);
  });
  for (ComputeOp op : norms) {
    for (unsigned i : {3u, 4u}) {
      auto param = op->getOperand(i).getDefiningOp<ParamOp>();
      if (!param || param.getConstant() || param.getStateOf())
        continue;
      auto [it, inserted] = updatedBy.try_emplace(param, op);
      if (!inserted) {
        InFlightDiagnostic diag = op.emitError();
        diag << "BatchNormalization '" << op.getName()
             << "' (training mode) updates its running statistic '"
             << param.getSymName() << "', which ";
        if (it->second)
          diag << "BatchNormalization '" << it->second.getName()
               << "' updates too";
        else
          diag << "is also trained";
        diag << "; give each BatchNormalization its own running_mean and "
                "running_var initializers";
        return failure();
      }
      UpdateOp::create(builder, op.getLoc(), param.getResult(), Value(),
                       op->getResult(i - 2));
    }
  }
  return success();
}

LogicalResult BuildTrainingStepPass::expandGradientOps(
    func::FuncOp func, ArrayRef<GradientOp> gradientOps, OpBuilder &builder,
    GradientBuilder &grads) {
  GradientOp first = gradientOps.front();
  bool hasUpdates = !func.getOps<UpdateOp>().empty();
  if (!hasUpdates && !gradientGraph)
    return first.emitError()
           << "the model computes gradients (the ONNX Gradient node '"
           << first.getName()
           << "') but updates nothing; tofuc builds a training step from "
              "a model's training_info (a Gradient of its loss and an "
              "update_binding), or with --loss and --optimizer from a model "
              "without Gradient nodes";
  auto refuse = [&](StringRef flag) {
    return first.emitError()
           << "the model carries its own training algorithm (ONNX "
              "training_info with the Gradient node '"
           << first.getName() << "'), so " << flag
           << " does not apply: drop it, or remove the model's "
              "training_info (del model.training_info[:]) to choose the "
              "training step with --loss and --optimizer";
  };
  if (!lossName.empty())
    return refuse("--loss");
  if (!freeze.empty())
    return refuse("--freeze");
  if (!trainable.empty())
    return refuse("--trainable");
  if (!overrides.empty())
    return refuse(overrides.front());
  // The differentiated scalars, in order of first use: one backward pass
  // each, with the tensors its Gradient nodes ask for.
  SmallVector<Value> ys;
  llvm::DenseMap<Value, llvm::DenseSet<Value>> wantedOf;
  llvm::DenseMap<Value, GradientOp> firstGradientOf;
  for (GradientOp gradient : gradientOps) {
    Value y = gradient.getY();
    if (firstGradientOf.try_emplace(y, gradient).second)
      ys.push_back(y);
    wantedOf[y].insert(gradient.getX());
  }

  // The ops that use the gradients (the optimizer's), and the updates, move
  // after the backward passes.
  Block &body = func.getBody().front();
  llvm::SetVector<Operation *> dependents;
  llvm::DenseMap<Operation *, GradientOp> reachedFrom;
  for (GradientOp gradient : gradientOps) {
    SmallVector<Value> worklist = {gradient.getResult()};
    while (!worklist.empty()) {
      Value value = worklist.pop_back_val();
      for (Operation *user : value.getUsers()) {
        reachedFrom.try_emplace(user, gradient);
        if (dependents.insert(user))
          for (Value result : user->getResults())
            worklist.push_back(result);
      }
    }
  }
  for (UpdateOp update : func.getOps<UpdateOp>())
    dependents.insert(update);
  for (Value y : ys)
    if (Operation *producer = y.getDefiningOp();
        producer && dependents.contains(producer)) {
      GradientOp own = firstGradientOf.lookup(y);
      GradientOp source = reachedFrom.lookup(producer);
      if (!source || source.getY() == y)
        return own.emitError()
               << "the differentiated scalar depends on its own gradient";
      return own.emitError()
             << "the scalar that the Gradient node '" << own.getName()
             << "' differentiates depends on the gradient computed by the "
                "Gradient node '"
             << source.getName()
             << "' (a gradient of a gradient); one training step runs each "
                "backward pass once, so higher-order gradients are not "
                "supported: compute that scalar without the gradient";
    }

  // One backward pass per scalar, each with its own accumulation of
  // gradients (a tensor may have a gradient of each scalar).
  SmallVector<std::unique_ptr<GradientBuilder>> passes;
  llvm::DenseMap<GradientOp, Value> replacements;
  for (Value y : ys) {
    GradientBuilder *pass =
        y == ys.front()
            ? &grads
            : passes.emplace_back(std::make_unique<GradientBuilder>(func,
                                                                    builder))
                  .get();
    if (failed(buildBackward(func, y, *pass, /*frozen=*/{}, wantedOf[y])))
      return failure();
    for (GradientOp gradient : gradientOps) {
      if (gradient.getY() != y)
        continue;
      Value grad = pass->gradientOf(gradient.getX());
      if (!grad) {
        // The tensor does not influence y.
        auto zeros =
            pass->create(gradient.getLoc(), "Zeros", {gradient.getX()}, {},
                         (gradient.getName() + ".zeros").str(),
                         gradient.getName());
        if (failed(zeros))
          return failure();
        grad = zeros->getResult(0);
      }
      replacements[gradient] = grad;
    }
  }
  Operation *terminator = body.getTerminator();
  SmallVector<Operation *> moved;
  for (Operation &op : body)
    if (dependents.contains(&op))
      moved.push_back(&op);
  for (Operation *op : moved)
    op->moveBefore(terminator);
  for (GradientOp gradient : gradientOps) {
    gradient.getResult().replaceAllUsesWith(replacements[gradient]);
    gradient->erase();
  }
  grads.tagGradients();
  for (auto &pass : passes)
    pass->tagGradients();
  if (hasUpdates)
    for (OutputOp output : llvm::make_early_inc_range(func.getOps<OutputOp>()))
      output->erase();
  eraseUnusedBackwardOps(func);
  dropUnusedOptionalResults(func);
  return success();
}

void BuildTrainingStepPass::runOnOperation() {
  func::FuncOp func = getOperation();
  OpBuilder builder(func.getContext());
  builder.setInsertionPoint(func.getBody().front().getTerminator());
  SmallVector<GradientOp> gradientOps(func.getOps<GradientOp>());
  if (!gradientOps.empty()) {
    GradientBuilder grads(func, builder);
    if (failed(expandGradientOps(func, gradientOps, builder, grads)))
      signalPassFailure();
    return;
  }
  if (!func.getOps<UpdateOp>().empty()) {
    func.emitError() << "the function already is a training step";
    return signalPassFailure();
  }
  if (optimizer != "sgd" && optimizer != "momentum" && optimizer != "adam" &&
      optimizer != "adagrad") {
    func.emitError() << "unknown optimizer '" << optimizer
                     << "' (sgd, momentum, adam or adagrad)";
    return signalPassFailure();
  }
  GradientBuilder grads(func, builder);

  auto frozen = frozenParams(func);
  if (failed(frozen))
    return signalPassFailure();
  auto loss = selectLoss(func, builder, grads);
  if (failed(loss))
    return signalPassFailure();
  for (LossOp lossOp : func.getOps<LossOp>())
    if (failed(checkLossIsComputed(lossOp)))
      return signalPassFailure();
  if (failed(buildBackward(func, *loss, grads, *frozen)))
    return signalPassFailure();

  SmallVector<ParamOp> params;
  for (ParamOp param : func.getOps<ParamOp>())
    if (!param.getStateOf() && !param.getConstant() &&
        !frozen->contains(param))
      params.push_back(param);
  for (ParamOp param : params) {
    Value grad = grads.gradientOf(param.getResult());
    if (!grad)
      continue; // does not influence the loss
    if (failed(addUpdate(param, grad, builder, grads)))
      return signalPassFailure();
  }
  if (failed(addRunningStatisticUpdates(func, builder)))
    return signalPassFailure();

  grads.tagGradients();
  eraseUnusedBackwardOps(func);
  dropUnusedOptionalResults(func);
}

} // namespace
