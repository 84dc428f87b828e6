//===- TofuDialect.cpp - the tofu dialect ---------------------------------===//
//
// Dialect registration, attribute syntax and verifiers, op verifiers.
//
//===----------------------------------------------------------------------===//
#include "tofu/Dialect/TdlInstance.h"
#include "tofu/Dialect/Tofu.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tofu;

#include "tofu/TofuDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "tofu/TofuAttrs.cpp.inc"

#define GET_OP_CLASSES
#include "tofu/TofuOps.cpp.inc"

void TofuDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tofu/TofuAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "tofu/TofuOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// IntervalAttr: `<[l0, l1] + lc, [u0, u1] + uc>`
//===----------------------------------------------------------------------===//

static ParseResult parseDoubleList(AsmParser &parser,
                                   SmallVectorImpl<double> &values) {
  return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square,
                                        [&]() -> ParseResult {
                                          double v;
                                          if (parser.parseFloat(v))
                                            return failure();
                                          values.push_back(v);
                                          return success();
                                        });
}

static ParseResult parseBound(AsmParser &parser, SmallVectorImpl<double> &coef,
                              double &constant) {
  if (parseDoubleList(parser, coef) || parser.parsePlus() ||
      parser.parseFloat(constant))
    return failure();
  return success();
}

Attribute IntervalAttr::parse(AsmParser &parser, Type) {
  SmallVector<double> lower, upper;
  double lc = 0, uc = 0;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parseBound(parser, lower, lc) ||
      parser.parseComma() || parseBound(parser, upper, uc) ||
      parser.parseGreater())
    return {};
  MLIRContext *ctx = parser.getContext();
  auto f64 = Float64Type::get(ctx);
  return IntervalAttr::getChecked(
      [&] { return parser.emitError(loc); }, ctx,
      DenseF64ArrayAttr::get(ctx, lower), FloatAttr::get(f64, lc),
      DenseF64ArrayAttr::get(ctx, upper), FloatAttr::get(f64, uc));
}

/// Shortest readable form that still parses as a float (`0.5`, `1.0`).
static std::string formatCoefficient(double v) {
  std::string s = llvm::formatv("{0}", llvm::format("%g", v)).str();
  if (s.find_first_of(".en") == std::string::npos)
    s += ".0";
  return s;
}

static void printBound(AsmPrinter &printer, ArrayRef<double> coef,
                       double constant) {
  printer << "[";
  llvm::interleaveComma(coef, printer,
                        [&](double v) { printer << formatCoefficient(v); });
  printer << "] + " << formatCoefficient(constant);
}

void IntervalAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printBound(printer, getLower().asArrayRef(),
             getLowerConst().getValueAsDouble());
  printer << ", ";
  printBound(printer, getUpper().asArrayRef(),
             getUpperConst().getValueAsDouble());
  printer << ">";
}

LogicalResult IntervalAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   DenseF64ArrayAttr lower, FloatAttr,
                                   DenseF64ArrayAttr upper, FloatAttr) {
  if (lower.size() != upper.size())
    return emitError() << "interval bounds have " << lower.size() << " and "
                       << upper.size()
                       << " coefficients; both need one per output dimension";
  return success();
}

//===----------------------------------------------------------------------===//
// StrategyAttr: `<split 0 dim 1>`, `<reduce "k" 0>`, optional `, regions [...]`
//===----------------------------------------------------------------------===//

Attribute StrategyAttr::parse(AsmParser &parser, Type) {
  MLIRContext *ctx = parser.getContext();
  SMLoc loc = parser.getCurrentLocation();
  std::string kind, var;
  int64_t output = 0, dim = 0;
  if (parser.parseLess() || parser.parseKeywordOrString(&kind))
    return {};
  if (kind == "split") {
    if (parser.parseInteger(output) || parser.parseKeyword("dim") ||
        parser.parseInteger(dim))
      return {};
  } else if (kind == "reduce") {
    if (parser.parseString(&var) || parser.parseInteger(dim))
      return {};
  } else {
    parser.emitError(loc, "expected 'split' or 'reduce'");
    return {};
  }
  ArrayAttr regions = ArrayAttr::get(ctx, {});
  if (succeeded(parser.parseOptionalComma())) {
    if (parser.parseKeyword("regions") || parser.parseAttribute(regions))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return StrategyAttr::getChecked([&] { return parser.emitError(loc); }, ctx,
                                  StringAttr::get(ctx, kind), output, dim,
                                  StringAttr::get(ctx, var), regions);
}

void StrategyAttr::print(AsmPrinter &printer) const {
  printer << "<" << getKind().getValue();
  if (getKind().getValue() == "split")
    printer << " " << getOutput() << " dim " << getDim();
  else
    printer << " \"" << getVar().getValue() << "\" " << getDim();
  if (getRegions() && !getRegions().empty()) {
    printer << ", regions ";
    printer.printAttributeWithoutType(getRegions());
  }
  printer << ">";
}

LogicalResult StrategyAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   StringAttr kind, int64_t output, int64_t dim,
                                   StringAttr var, ArrayAttr regions) {
  if (kind.getValue() != "split" && kind.getValue() != "reduce")
    return emitError() << "strategy kind must be 'split' or 'reduce'";
  if (output < 0 || dim < 0)
    return emitError() << "strategy output and dim must be >= 0";
  if (kind.getValue() == "reduce" && var.getValue().empty())
    return emitError() << "a reduce strategy names its reduction variable";
  if (!regions)
    return success();
  // regions: [worker][input] -> array of intervals.
  for (Attribute worker : regions) {
    auto inputs = dyn_cast<ArrayAttr>(worker);
    if (!inputs)
      return emitError() << "strategy regions must be [worker][input] arrays";
    for (Attribute input : inputs) {
      auto dims = dyn_cast<ArrayAttr>(input);
      if (!dims ||
          !llvm::all_of(dims, [](Attribute a) { return isa<IntervalAttr>(a); }))
        return emitError()
               << "each input region must be an array of #tofu.interval";
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// TilingAttr: `<[(0, 4), (1, 2)]>`
//===----------------------------------------------------------------------===//

Attribute TilingAttr::parse(AsmParser &parser, Type) {
  SmallVector<int64_t> dims, parts;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square,
                                     [&]() -> ParseResult {
                                       int64_t d, p;
                                       if (parser.parseLParen() ||
                                           parser.parseInteger(d) ||
                                           parser.parseComma() ||
                                           parser.parseInteger(p) ||
                                           parser.parseRParen())
                                         return failure();
                                       dims.push_back(d);
                                       parts.push_back(p);
                                       return success();
                                     }) ||
      parser.parseGreater())
    return {};
  return TilingAttr::getChecked([&] { return parser.emitError(loc); },
                                parser.getContext(), dims, parts);
}

void TilingAttr::print(AsmPrinter &printer) const {
  printer << "<[";
  for (size_t i = 0; i < getDims().size(); ++i)
    printer << (i ? ", " : "") << "(" << getDims()[i] << ", " << getParts()[i]
            << ")";
  printer << "]>";
}

LogicalResult TilingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 ArrayRef<int64_t> dims,
                                 ArrayRef<int64_t> parts) {
  if (dims.size() != parts.size())
    return emitError() << "tiling needs one part count per cut";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0)
      return emitError() << "tiling cut " << i << " has negative dimension "
                         << dims[i];
    if (parts[i] < 1)
      return emitError() << "tiling cut " << i << " has " << parts[i]
                         << " parts; a cut needs at least 1";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Discardable attributes: tofu.tilings, tofu.strategies, tofu.plan,
// tofu.grid, tofu.timestep, tofu.direction, tofu.recurrence
//===----------------------------------------------------------------------===//

LogicalResult TofuDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kTilingsAttr) {
    auto tilings = dyn_cast<ArrayAttr>(attr.getValue());
    if (!tilings || tilings.size() != op->getNumResults())
      return op->emitOpError()
             << "'" << kTilingsAttr << "' needs one #tofu.tiling per result ("
             << op->getNumResults() << ")";
    for (auto [i, tilingAttr] : llvm::enumerate(tilings)) {
      auto tiling = dyn_cast<TilingAttr>(tilingAttr);
      if (!tiling)
        return op->emitOpError() << "'" << kTilingsAttr << "' entry " << i
                                 << " is not a #tofu.tiling";
      auto type = cast<RankedTensorType>(op->getResult(i).getType());
      for (int64_t dim : tiling.getDims())
        if (dim >= type.getRank())
          return op->emitOpError()
                 << "tiling of result " << i << " cuts dimension " << dim
                 << " but the tensor has rank " << type.getRank();
    }
    return success();
  }
  if (name == kStrategiesAttr || name == kPlanAttr) {
    auto list = dyn_cast<ArrayAttr>(attr.getValue());
    if (!list ||
        !llvm::all_of(list, [](Attribute a) { return isa<StrategyAttr>(a); }))
      return op->emitOpError()
             << "'" << name << "' must be an array of #tofu.strategy";
    for (auto strategy : list.getAsRange<StrategyAttr>()) {
      if (strategy.getOutput() >= op->getNumResults())
        return op->emitOpError()
               << "strategy refers to output " << strategy.getOutput()
               << " of an op with " << op->getNumResults() << " results";
      if (strategy.getKind().getValue() == "split") {
        auto type = cast<RankedTensorType>(
            op->getResult(strategy.getOutput()).getType());
        if (strategy.getDim() >= type.getRank())
          return op->emitOpError()
                 << "strategy splits dimension " << strategy.getDim()
                 << " of a rank-" << type.getRank() << " output";
      }
    }
    return success();
  }
  if (name == kGridAttr) {
    auto grid = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!grid || grid.empty() ||
        !llvm::all_of(grid.asArrayRef(), [](int64_t k) { return k >= 1; }))
      return op->emitOpError() << "'" << kGridAttr
                               << "' must be a non-empty array<i64> of "
                                  "group counts >= 1";
    return success();
  }
  if (name == kTimestepAttr || name == kDirectionAttr) {
    auto value = dyn_cast<IntegerAttr>(attr.getValue());
    if (!value || value.getInt() < 0 ||
        (name == kDirectionAttr && value.getInt() > 1))
      return op->emitOpError()
             << "'" << name << "' must be an integer "
             << (name == kDirectionAttr ? "0 (forward) or 1 (reverse)"
                                        : ">= 0");
    return success();
  }
  if (name == kRecurrenceAttr) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' must be a string";
    return success();
  }
  if (name == "tofu.op_group") {
    auto id = dyn_cast<IntegerAttr>(attr.getValue());
    if (!id || id.getInt() < 0 || !isa<ComputeOp>(op))
      return op->emitOpError() << "'tofu.op_group' must be an integer >= 0 "
                                  "on a tofu.compute op";
    return success();
  }
  if (name == "tofu.tensor_groups") {
    auto ids = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!ids || ids.size() != static_cast<int64_t>(op->getNumResults()) ||
        !llvm::all_of(ids.asArrayRef(), [](int64_t id) { return id >= 0; }))
      return op->emitOpError()
             << "'tofu.tensor_groups' needs one group id >= 0 per result ("
             << op->getNumResults() << ")";
    return success();
  }
  if (name == "tofu.step_bytes") {
    if (!isa<DenseI64ArrayAttr>(attr.getValue()))
      return op->emitOpError() << "'tofu.step_bytes' must be an array<i64>";
    return success();
  }
  if (name == "tofu.step_gbps" || name == "tofu.step_comm_seconds") {
    if (!isa<DenseF64ArrayAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' must be an array<f64>";
    return success();
  }
  if (name == "tofu.objective" || name == "tofu.device_model") {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' must be a string";
    return success();
  }
  if (name == "tofu.predicted_compute_seconds") {
    auto value = dyn_cast<FloatAttr>(attr.getValue());
    if (!value || !(value.getValueAsDouble() >= 0))
      return op->emitOpError() << "'" << name << "' must be a float >= 0";
    return success();
  }
  return op->emitOpError() << "unknown tofu attribute '" << name << "'";
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

LogicalResult InputOp::verify() {
  if (getRole() != "features" && getRole() != "labels")
    return emitOpError() << "role must be 'features' or 'labels', not '"
                         << getRole() << "'";
  if (getRole() == "labels") {
    auto type = cast<RankedTensorType>(getType());
    if (!type.getElementType().isInteger(64))
      return emitOpError() << "labels must be a tensor of i64";
    if (!getClasses() || *getClasses() < 1)
      return emitOpError() << "labels need a positive 'classes'";
  } else if (getIgnoreIndexAttr()) {
    return emitOpError() << "'ignore_index' is the value a loss ignores in "
                            "its labels; features have none";
  }
  return success();
}

LogicalResult ParamOp::verify() {
  if (auto value = getValueAttr())
    if (value.getType() != getType())
      return emitOpError() << "initial value has type " << value.getType()
                           << " but the parameter is " << getType();
  if (getTrainableAttr() && (getConstant() || getStateOf()))
    return emitOpError() << "'trainable' applies to parameters, not to "
                         << (getConstant() ? "a constant" : "optimizer state");
  return success();
}

LogicalResult ComputeOp::verify() {
  auto instance = tofu::instantiate(*this);
  if (!instance)
    return emitOpError() << "'" << getSpec()
                         << "': " << llvm::toString(instance.takeError());
  const auto &outputs = instance->outputTypes();
  unsigned required = instance->numRequiredOutputs();
  if (getNumResults() > outputs.size() || getNumResults() < required)
    return emitOpError() << "'" << getSpec() << "' has " << outputs.size()
                         << " outputs"
                         << (required < outputs.size()
                                 ? " (" + std::to_string(required) +
                                       " required)"
                                 : std::string())
                         << " but the op has " << getNumResults()
                         << " results";
  for (auto [i, result] : llvm::enumerate(getResults())) {
    RankedTensorType expected = fromTdlType(getContext(), outputs[i]);
    if (result.getType() != expected)
      return emitOpError() << "result " << i << " has type " << result.getType()
                           << " but '" << getSpec() << "' gives " << expected;
  }
  return success();
}

LogicalResult GradientOp::verify() {
  if (!isa<FloatType>(
          cast<RankedTensorType>(getX().getType()).getElementType()))
    return emitOpError() << "only floating-point tensors (f16, bf16, f32, "
                            "f64) have gradients, not "
                         << getX().getType();
  return success();
}

LogicalResult UpdateOp::verify() {
  if (!getParam().getDefiningOp<ParamOp>())
    return emitOpError() << "first operand must be a tofu.param";
  if ((getGradient() && getGradient().getType() != getParam().getType()) ||
      getNewValue().getType() != getParam().getType())
    return emitOpError()
           << "gradient and new value must have the parameter's type";
  auto param = getParam().getDefiningOp<ParamOp>();
  if (param.getStateOf() && getGradient())
    return emitOpError() << "optimizer state '" << param.getSymName()
                         << "' has no gradient";
  return success();
}
