//===- RecurrentUnrolling.cpp - ONNX RNN/LSTM/GRU -> per-step cells -------===//
//
// Expands an ONNX RNN, LSTM or GRU node (opset 7-22 semantics, layout 0 and
// 1, forward/reverse/bidirectional) into one cell per time step, built from
// ops that have TDL specs. Shapes inside the cells keep a leading unit
// dimension ([1, B, H]) so that no Squeeze/Unsqueeze is needed: the input
// projection [T, B, G*H] is split into T slices [1, B, G*H], the weights are
// 2-D matrices ([I, G*H], [H, G*H]) and the MatMul broadcasts them over the
// leading dims.
//
// The gates are computed at once, as cuDNN and PyTorch do: the input
// projection x_t·W + biases of every step is one MatMul over the whole
// sequence before the loop ([T, N, I] x [I, G*H]), and each step adds h·R
// (one MatMul over all gates; GRU: over z and r, its candidate reads r ⊙ h)
// and Splits the sum into its G gates. A step thus has one or two GEMMs
// instead of 2·G, and one fetch of h where the partition splits it, instead
// of one per gate; a gate a step does not use (an LSTM's forget gate at step
// 0 without initial_c) gets a zero gradient.
//
//===----------------------------------------------------------------------===//
#include "tofu/Import/RecurrentUnrolling.h"
#include "tofu/Dialect/TdlInstance.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>

using namespace mlir;

namespace tofu {

bool isRecurrentOpType(llvm::StringRef opType) {
  return opType == "RNN" || opType == "LSTM" || opType == "GRU";
}

namespace {

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The attributes of a recurrent node that the unrolling uses.
struct RecurrentAttrs {
  int64_t hiddenSize = 0;
  int64_t layout = 0;
  int64_t linearBeforeReset = 0;
  std::string direction = "forward";
  /// Activation names per direction: f (and g, h) in ONNX's order.
  SmallVector<SmallVector<std::string>> activations;
};

/// Creates the ops of one unrolled node. The first error is kept and later
/// emits return null values, so the cell code reads like the equations.
class CellEmitter {
public:
  CellEmitter(OpBuilder &builder, Location loc, StringRef nodeName)
      : builder(builder), loc(loc), nodeName(nodeName.str()),
        ctx(builder.getContext()) {}

  /// The step and direction tagged on the ops created next (none: unset).
  void setStep(std::optional<int64_t> s, std::optional<int64_t> d) {
    step = s;
    direction = d;
  }

  /// Creates `spec` on `operands` and returns its results (empty after an
  /// error). `what` names the op: <node>/d<dir>/t<step>/<what>.
  SmallVector<Value> emitAll(StringRef spec, ArrayRef<Value> operands,
                             const std::string &what,
                             tdl::AttrMap attrs = {},
                             const ConstValues &consts = {}) {
    if (err)
      return {};
    for (Value v : operands)
      if (!v)
        return {};
    auto instance =
        instantiateSpec(spec, ValueRange(operands).getTypes(), attrs, consts);
    if (!instance) {
      err = makeError(spec + " for " + what + ": " +
                      llvm::toString(instance.takeError()));
      return {};
    }
    SmallVector<Type> types;
    for (const auto &type : instance->outputTypes())
      types.push_back(fromTdlType(ctx, type));
    std::string name = opName(what);
    auto op = ComputeOp::create(
        builder, NameLoc::get(builder.getStringAttr(name), loc), types, spec,
        operands, fromTdlAttrs(ctx, attrs, consts), name, StringAttr());
    tag(op);
    return SmallVector<Value>(op->getResults());
  }

  Value emit(StringRef spec, ArrayRef<Value> operands, const std::string &what,
             tdl::AttrMap attrs = {}, const ConstValues &consts = {}) {
    auto results = emitAll(spec, operands, what, std::move(attrs), consts);
    return results.empty() ? Value() : results.front();
  }

  /// `value` split in `parts` equal parts along `axis` (itself when 1).
  SmallVector<Value> split(Value value, int64_t axis, int64_t parts,
                           const std::string &what) {
    if (parts == 1)
      return {value};
    tdl::AttrMap attrs;
    attrs["axis"] = tdl::AttrValue::ofInt(axis);
    attrs["num_outputs"] = tdl::AttrValue::ofInt(parts);
    auto results = emitAll("Split", {value}, what, attrs);
    if (results.size() != static_cast<size_t>(parts))
      results.assign(parts, Value());
    return results;
  }

  Value transpose(Value value, ArrayRef<int64_t> perm,
                  const std::string &what) {
    tdl::AttrMap attrs;
    attrs["perm"] = tdl::AttrValue::ofInts(
        std::vector<int64_t>(perm.begin(), perm.end()));
    return emit("Transpose", {value}, what, attrs);
  }

  Value concat(ArrayRef<Value> values, int64_t axis, const std::string &what) {
    if (values.size() == 1)
      return values.front();
    tdl::AttrMap attrs;
    attrs["axis"] = tdl::AttrValue::ofInt(axis);
    return emit("Concat", values, what, attrs);
  }

  /// Reshape to `shape` (a constant shape operand).
  Value reshape(Value value, ArrayRef<int64_t> shape, const std::string &what) {
    if (err || !value)
      return {};
    auto type = RankedTensorType::get({static_cast<int64_t>(shape.size())},
                                      builder.getI64Type());
    std::string name = opName(what + ".shape");
    auto param = ParamOp::create(
        builder, NameLoc::get(builder.getStringAttr(name), loc), type, name,
        DenseElementsAttr::get(type, shape));
    param.setConstant(true);
    ConstValues consts;
    consts[1] = std::vector<double>(shape.begin(), shape.end());
    return emit("Reshape", {value, param.getResult()}, what, {}, consts);
  }

  /// Applies the ONNX activation `name` (Sigmoid, Tanh or Relu).
  Value activate(StringRef name, Value x, const std::string &what) {
    return emit(name, {x}, what);
  }

  llvm::Error takeError() { return err ? std::move(err) : llvm::Error::success(); }

private:
  std::string opName(const std::string &what) const {
    std::string name = nodeName;
    if (direction)
      name += "/d" + std::to_string(*direction);
    if (step)
      name += "/t" + std::to_string(*step);
    return name + "/" + what;
  }

  void tag(Operation *op) {
    op->setAttr(kRecurrenceAttr, builder.getStringAttr(nodeName));
    if (step)
      op->setAttr(kTimestepAttr, builder.getI64IntegerAttr(*step));
    if (direction)
      op->setAttr(kDirectionAttr, builder.getI64IntegerAttr(*direction));
  }

  OpBuilder &builder;
  Location loc;
  std::string nodeName;
  MLIRContext *ctx;
  std::optional<int64_t> step, direction;
  llvm::Error err = llvm::Error::success();
};

/// Gates per op type, in ONNX's weight order.
static int64_t gateCount(StringRef opType) {
  return opType == "LSTM" ? 4 : opType == "GRU" ? 3 : 1;
}

static SmallVector<std::string> defaultActivations(StringRef opType) {
  if (opType == "LSTM")
    return {"Sigmoid", "Tanh", "Tanh"};
  if (opType == "GRU")
    return {"Sigmoid", "Tanh"};
  return {"Tanh"};
}

static llvm::Expected<RecurrentAttrs>
readAttributes(const onnx::NodeProto &node, int64_t numDirections) {
  RecurrentAttrs attrs;
  StringRef opType = node.op_type();
  SmallVector<std::string> activations;
  for (const auto &attr : node.attribute()) {
    const std::string &name = attr.name();
    if (name == "hidden_size") {
      attrs.hiddenSize = attr.i();
    } else if (name == "layout") {
      attrs.layout = attr.i();
    } else if (name == "direction") {
      attrs.direction = attr.s();
    } else if (name == "linear_before_reset" && opType == "GRU") {
      attrs.linearBeforeReset = attr.i();
    } else if (name == "activations") {
      for (const std::string &a : attr.strings())
        activations.push_back(a);
    } else if (name == "input_forget" && opType == "LSTM") {
      if (attr.i() != 0)
        return makeError("input_forget = 1 (coupled input and forget gates) "
                         "is not supported; export the model without it");
    } else if (name == "clip") {
      return makeError("the 'clip' attribute (cell clipping) is not "
                       "supported; export the model without clipping");
    } else if (name == "activation_alpha" || name == "activation_beta") {
      return makeError("'" + name + "' is not supported: only the Sigmoid, "
                       "Tanh and Relu activations (which take no "
                       "parameters) are");
    } else {
      return makeError("unknown attribute '" + name + "' of " + opType);
    }
  }
  if (attrs.layout != 0 && attrs.layout != 1)
    return makeError("layout must be 0 or 1, not " +
                     std::to_string(attrs.layout));
  SmallVector<std::string> defaults = defaultActivations(opType);
  size_t perDirection = defaults.size();
  if (activations.empty()) {
    for (int64_t d = 0; d < numDirections; ++d)
      attrs.activations.push_back(defaults);
  } else if (activations.size() == perDirection * numDirections) {
    for (int64_t d = 0; d < numDirections; ++d)
      attrs.activations.emplace_back(
          activations.begin() + d * perDirection,
          activations.begin() + (d + 1) * perDirection);
  } else {
    return makeError("'activations' has " + std::to_string(activations.size()) +
                     " entries; " + opType + " with " +
                     std::to_string(numDirections) + " direction(s) needs " +
                     std::to_string(perDirection * numDirections));
  }
  for (const auto &list : attrs.activations)
    for (const std::string &a : list)
      if (a != "Sigmoid" && a != "Tanh" && a != "Relu")
        return makeError("activation '" + a + "' is not supported (Sigmoid, "
                         "Tanh and Relu are)");
  return attrs;
}

/// "float32", "float64" or MLIR's spelling of any other element type.
static std::string typeName(Type type) {
  if (type.isF32())
    return "float32";
  if (type.isF64())
    return "float64";
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

/// The static shape of `value`, or an error naming `what`: a tensor of rank
/// `rank` whose element type is X's, float32 or float64 (`elem`, set by the
/// first call, X's).
static llvm::Expected<ArrayRef<int64_t>> shapeOf(Value value, StringRef what,
                                                 size_t rank, Type &elem) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type)
    return makeError("input " + what + " must be a ranked tensor");
  Type got = type.getElementType();
  if (!got.isF32() && !got.isF64())
    return makeError("input " + what + " must be float32 or float64, not " +
                     typeName(got));
  if (!elem)
    elem = got;
  if (got != elem)
    return makeError("input " + what + " is " + typeName(got) +
                     " but X is " + typeName(elem) +
                     "; every input must have X's element type");
  if (type.getRank() != static_cast<int64_t>(rank))
    return makeError("input " + what + " must have rank " +
                     std::to_string(rank) + ", not " +
                     std::to_string(type.getRank()));
  return type.getShape();
}

} // namespace

llvm::Expected<SmallVector<Value>>
unrollRecurrentNode(OpBuilder &builder, Location loc,
                    const onnx::NodeProto &node, StringRef nodeName,
                    ArrayRef<Value> operands) {
  StringRef opType = node.op_type();
  auto operand = [&](size_t i) {
    return i < operands.size() ? operands[i] : Value();
  };
  Value X = operand(0), W = operand(1), R = operand(2), B = operand(3);
  Value initialH = operand(5);
  Value initialC = opType == "LSTM" ? operand(6) : Value();
  Value P = opType == "LSTM" ? operand(7) : Value();
  if (!X || !W || !R)
    return makeError("inputs X, W and R are required");
  if (operand(4))
    return makeError("the sequence_lens input is not supported (every "
                     "sequence must have the full length); export the model "
                     "without sequence_lens");
  if (operands.size() > (opType == "LSTM" ? 8u : 6u))
    return makeError(opType + " takes at most " +
                     (opType == "LSTM" ? "8" : "6") + " inputs");

  // Directions and attributes.
  std::string direction = "forward";
  for (const auto &attr : node.attribute())
    if (attr.name() == "direction")
      direction = attr.s();
  if (direction != "forward" && direction != "reverse" &&
      direction != "bidirectional")
    return makeError("direction must be forward, reverse or bidirectional, "
                     "not '" + direction + "'");
  int64_t D = direction == "bidirectional" ? 2 : 1;
  auto attrs = readAttributes(node, D);
  if (!attrs)
    return attrs.takeError();
  int64_t G = gateCount(opType);

  // Shapes, and the element type every input shares (X's).
  Type elem;
  auto xShape = shapeOf(X, "X", 3, elem);
  auto wShape = shapeOf(W, "W", 3, elem);
  auto rShape = shapeOf(R, "R", 3, elem);
  if (!xShape)
    return xShape.takeError();
  if (!wShape)
    return wShape.takeError();
  if (!rShape)
    return rShape.takeError();
  int64_t T = attrs->layout ? (*xShape)[1] : (*xShape)[0];
  int64_t N = attrs->layout ? (*xShape)[0] : (*xShape)[1];
  int64_t I = (*xShape)[2];
  int64_t H = (*rShape)[2];
  if (attrs->hiddenSize && attrs->hiddenSize != H)
    return makeError("hidden_size " + std::to_string(attrs->hiddenSize) +
                     " differs from R's last dimension " + std::to_string(H));
  auto expectShape = [&](Value v, StringRef what, ArrayRef<int64_t> want)
      -> llvm::Error {
    auto shape = shapeOf(v, what, want.size(), elem);
    if (!shape)
      return shape.takeError();
    if (*shape != want) {
      std::string w, g;
      for (int64_t d : want)
        w += (w.empty() ? "" : "x") + std::to_string(d);
      for (int64_t d : *shape)
        g += (g.empty() ? "" : "x") + std::to_string(d);
      return makeError("input " + what + " has shape " + g + ", expected " +
                       w + " (num_directions " + std::to_string(D) +
                       ", hidden " + std::to_string(H) + ", input " +
                       std::to_string(I) + ", batch " + std::to_string(N) +
                       ")");
    }
    return llvm::Error::success();
  };
  if (auto e = expectShape(W, "W", {D, G * H, I}))
    return std::move(e);
  if (auto e = expectShape(R, "R", {D, G * H, H}))
    return std::move(e);
  if (B)
    if (auto e = expectShape(B, "B", {D, 2 * G * H}))
      return std::move(e);
  SmallVector<int64_t> stateShape =
      attrs->layout ? SmallVector<int64_t>{N, D, H}
                    : SmallVector<int64_t>{D, N, H};
  if (initialH)
    if (auto e = expectShape(initialH, "initial_h", stateShape))
      return std::move(e);
  if (initialC)
    if (auto e = expectShape(initialC, "initial_c", stateShape))
      return std::move(e);
  if (P)
    if (auto e = expectShape(P, "P", {D, 3 * H}))
      return std::move(e);

  CellEmitter emit(builder, loc, nodeName);
  // Time-major input and states: X [T, N, I], states [D, N, H].
  if (attrs->layout) {
    X = emit.transpose(X, {1, 0, 2}, "X.time_major");
    if (initialH)
      initialH = emit.transpose(initialH, {1, 0, 2}, "initial_h.dir_major");
    if (initialC)
      initialC = emit.transpose(initialC, {1, 0, 2}, "initial_c.dir_major");
  }
  SmallVector<Value> Ws = emit.split(W, 0, D, "W.dirs");
  SmallVector<Value> Rs = emit.split(R, 0, D, "R.dirs");
  SmallVector<Value> Bs = B ? emit.split(B, 0, D, "B.dirs") : SmallVector<Value>();
  SmallVector<Value> Ps = P ? emit.split(P, 0, D, "P.dirs") : SmallVector<Value>();
  SmallVector<Value> H0s = initialH ? emit.split(initialH, 0, D, "initial_h.dirs")
                                    : SmallVector<Value>();
  SmallVector<Value> C0s = initialC ? emit.split(initialC, 0, D, "initial_c.dirs")
                                    : SmallVector<Value>();

  // hs[d][t], cs[d][t]: the states after time index t, [1, N, H].
  SmallVector<SmallVector<Value>> hs(D, SmallVector<Value>(T));
  SmallVector<SmallVector<Value>> cs(D, SmallVector<Value>(T));
  SmallVector<Value> lastH(D), lastC(D);
  for (int64_t d = 0; d < D; ++d) {
    emit.setStep(std::nullopt, d);
    bool reverse = direction == "reverse" || d == 1;
    const auto &act = attrs->activations[d];
    // 2-D weights, so that a MatMul's weight gradient is one GEMM over the
    // batch folded into rows (nn.tdl), not a product per batch element.
    Value WT = emit.transpose(emit.reshape(Ws[d], {G * H, I}, "W.2d"), {1, 0},
                              "W.T"); // [I, G*H]
    Value RT = emit.transpose(emit.reshape(Rs[d], {G * H, H}, "R.2d"), {1, 0},
                              "R.T"); // [H, G*H]
    // Every step's input projection at once: x_t·W plus the biases that are
    // added outside the recurrence, [1, N, G*H] per step. RNN, LSTM: Wb +
    // Rb. GRU: Wb + Rb for z and r; for the candidate Wb_h, and Rb_h too
    // unless linear_before_reset puts it inside r ⊙ (h·R_h + Rb_h).
    Value xW = emit.emit("MatMul", {X, WT}, "X.W"); // [T, N, G*H]
    Value RbCand; // GRU with linear_before_reset: Rb_h, [1, H]
    if (B) {
      SmallVector<Value> b = emit.split(Bs[d], 1, 2, "B.halves");
      Value bias;
      if (opType != "GRU" || !attrs->linearBeforeReset) {
        bias = emit.emit("Add", {b[0], b[1]}, "bias");
      } else {
        SmallVector<Value> wb = emit.split(b[0], 1, G, "Wb.gates");
        SmallVector<Value> rb = emit.split(b[1], 1, G, "Rb.gates");
        RbCand = rb[2];
        bias = emit.concat({emit.emit("Add", {wb[0], rb[0]}, "z.bias"),
                            emit.emit("Add", {wb[1], rb[1]}, "r.bias"), wb[2]},
                           1, "bias");
      }
      xW = emit.emit("Add", {xW, bias}, "X.W_b");
    }
    SmallVector<Value> xWb = emit.split(xW, 0, T, "X.W.steps");
    // GRU: h·R for z and r at once ([H, 2H]); the candidate's R_h [H, H].
    Value RzrT, RhT;
    if (opType == "GRU") {
      SmallVector<Value> r = emit.split(RT, 1, G, "R.gates");
      RzrT = emit.concat({r[0], r[1]}, 1, "R.zr");
      RhT = r[2];
    }
    SmallVector<Value> Pg = P ? emit.split(Ps[d], 1, 3, "P.gates")
                              : SmallVector<Value>();
    Value h = initialH ? H0s[d] : Value();
    Value c = initialC ? C0s[d] : Value();

    for (int64_t s = 0; s < T; ++s) {
      int64_t t = reverse ? T - 1 - s : s;
      emit.setStep(s, d);
      // The pre-activations of the G gates, [1, N, H] each: x_t·W plus the
      // hoisted biases, plus h·R (RNN, LSTM: all gates; GRU: z and r).
      Value all = xWb[t];
      if (h && opType != "GRU")
        all = emit.emit("Add", {all, emit.emit("MatMul", {h, RT}, "hR")},
                        "gates");
      SmallVector<Value> pre = emit.split(all, 2, G, "gates.split");
      if (h && opType == "GRU") {
        SmallVector<Value> hzr =
            emit.split(emit.emit("MatMul", {h, RzrT}, "zr.hR"), 2, 2, "zr.hR.split");
        pre[0] = emit.emit("Add", {pre[0], hzr[0]}, "z.pre");
        pre[1] = emit.emit("Add", {pre[1], hzr[1]}, "r.pre");
      }
      if (opType == "RNN") {
        h = emit.activate(act[0], pre[0], "h");
      } else if (opType == "LSTM") {
        // Weight order i, o, f, c; P order i, o, f.
        Value iPre = pre[0];
        if (P && c)
          iPre = emit.emit("Add", {iPre, emit.emit("Mul", {Pg[0], c}, "i.peep")},
                           "i.pre_peep");
        Value i = emit.activate(act[0], iPre, "i");
        Value cand = emit.activate(act[1], pre[3], "c_cand");
        Value cNew = emit.emit("Mul", {i, cand}, "i_c");
        if (c) {
          Value fPre = pre[2];
          if (P)
            fPre = emit.emit("Add",
                             {fPre, emit.emit("Mul", {Pg[2], c}, "f.peep")},
                             "f.pre_peep");
          Value f = emit.activate(act[0], fPre, "f");
          cNew = emit.emit("Add", {emit.emit("Mul", {f, c}, "f_c"), cNew}, "C");
        }
        c = cNew;
        Value oPre = pre[1];
        if (P)
          oPre = emit.emit("Add", {oPre, emit.emit("Mul", {Pg[1], c}, "o.peep")},
                           "o.pre_peep");
        Value o = emit.activate(act[0], oPre, "o");
        h = emit.emit("Mul", {o, emit.activate(act[2], c, "h_C")}, "H");
      } else { // GRU: weight order z, r, h.
        Value z = emit.activate(act[0], pre[0], "z");
        // The reset gate only matters when there is a recurrent term.
        bool needsReset = h || RbCand;
        Value r = needsReset ? emit.activate(act[0], pre[1], "r") : Value();
        // ĥ = g(x·W_h + Wb_h + [r ⊙ (h·R_h + Rb_h)] or [(r ⊙ h)·R_h + Rb_h]);
        // pre[2] holds x·W_h + Wb_h (+ Rb_h without linear_before_reset).
        Value rec;
        if (h && attrs->linearBeforeReset) {
          rec = emit.emit("MatMul", {h, RhT}, "h.hR");
          if (RbCand)
            rec = emit.emit("Add", {rec, RbCand}, "h.hR_b");
          rec = emit.emit("Mul", {r, rec}, "h.r_hR");
        } else if (h) {
          rec = emit.emit("MatMul", {emit.emit("Mul", {r, h}, "h.rh"), RhT},
                          "h.rhR");
        } else if (RbCand) {
          // h = 0: the recurrent term is r ⊙ Rb_h.
          rec = emit.emit("Mul", {r, RbCand}, "h.r_b");
        }
        Value candPre = rec ? emit.emit("Add", {pre[2], rec}, "h.pre") : pre[2];
        Value cand = emit.activate(act[1], candPre, "h_cand");
        // H = (1 - z) ⊙ ĥ + z ⊙ h = ĥ + z ⊙ (h - ĥ); with h = 0: ĥ - z ⊙ ĥ.
        if (h)
          h = emit.emit("Add",
                        {cand, emit.emit("Mul", {z, emit.emit("Sub", {h, cand},
                                                              "h_minus")},
                                         "z_h")},
                        "H");
        else
          h = emit.emit("Sub", {cand, emit.emit("Mul", {z, cand}, "z_h")}, "H");
      }
      hs[d][t] = h;
      cs[d][t] = c;
    }
    lastH[d] = h;
    lastC[d] = c;
  }
  emit.setStep(std::nullopt, std::nullopt);

  // Outputs: Y [T, D, N, H] (layout 1: [N, T, D, H]), Y_h and Y_c [D, N, H]
  // (layout 1: [N, D, H]).
  SmallVector<Value> results(node.output_size());
  for (int k = 0; k < node.output_size(); ++k) {
    if (node.output(k).empty())
      continue;
    if (k == 0) {
      SmallVector<Value> steps;
      for (int64_t t = 0; t < T; ++t) {
        SmallVector<Value> dirs;
        for (int64_t d = 0; d < D; ++d)
          dirs.push_back(hs[d][t]);
        Value both = emit.concat(dirs, 0, "Y.t" + std::to_string(t));
        steps.push_back(
            emit.reshape(both, {1, D, N, H}, "Y.t" + std::to_string(t) + ".4d"));
      }
      Value y = emit.concat(steps, 0, "Y");
      if (attrs->layout)
        y = emit.transpose(y, {2, 0, 1, 3}, "Y.batch_major");
      results[k] = y;
    } else if (k == 1 || (k == 2 && opType == "LSTM")) {
      SmallVector<Value> &last = k == 1 ? lastH : lastC;
      std::string what = k == 1 ? "Y_h" : "Y_c";
      Value y = emit.concat(last, 0, what);
      if (attrs->layout)
        y = emit.transpose(y, {1, 0, 2}, what + ".batch_major");
      results[k] = y;
    } else {
      return makeError(opType + " has at most " +
                       (opType == "LSTM" ? "3" : "2") + " outputs");
    }
  }
  if (auto e = emit.takeError())
    return std::move(e);
  for (int k = 0; k < node.output_size(); ++k)
    if (!node.output(k).empty() && !results[k])
      return makeError("output " + std::to_string(k) + " was not built");
  return results;
}

} // namespace tofu
