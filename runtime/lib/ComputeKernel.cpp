//===- ComputeKernel.cpp - Run one compute op on local buffers ------------===//
//
// Validates the operand views, then dispatches to the native kernel or the
// expression interpreter (see ComputeKernel.h for the rules).
//
//===----------------------------------------------------------------------===//

#include "tofu/runtime/ComputeKernel.h"

#include "ExprInterpreter.h"
#include "tofu/runtime/Kernels.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

using namespace tofu::runtime;
using namespace tofu::plan;

namespace {

const char kUnsupportedTag[] = "unsupported configuration: ";

std::string checkView(const TensorView &v, const std::string &what) {
  size_t rank = v.globalShape.size();
  if (v.shape.size() != rank || v.lo.size() != rank)
    return what + ": shape, lo and globalShape have different ranks (" +
           std::to_string(v.shape.size()) + ", " + std::to_string(v.lo.size()) +
           ", " + std::to_string(rank) + ")";
  if (!isValidDType(static_cast<uint8_t>(v.dtype)))
    return what + ": unknown element type " +
           std::to_string(static_cast<int>(v.dtype));
  for (size_t d = 0; d < rank; ++d)
    if (v.shape[d] < 0 || v.lo[d] < 0 ||
        v.lo[d] > v.globalShape[d] - v.shape[d])
      return what + ": local box [" + std::to_string(v.lo[d]) + ", +" +
             std::to_string(v.shape[d]) + ") of dimension " +
             std::to_string(d) + " lies outside the global extent " +
             std::to_string(v.globalShape[d]);
  return "";
}

/// runCompute's operand checks: every present input and every output view
/// is consistent, and an output with elements has a buffer. Sets
/// `anyOutput` when some output has elements.
std::string checkOperands(const std::vector<TensorView> &inputs,
                          const std::vector<TensorView> &outputs,
                          bool &anyOutput) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].present())
      if (std::string err = checkView(inputs[i], "input " + std::to_string(i));
          !err.empty())
        return err;
  anyOutput = false;
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (!outputs[o].present() && outputs[o].numElements() > 0)
      return "output " + std::to_string(o) + " has no buffer";
    if (std::string err = checkView(outputs[o], "output " + std::to_string(o));
        !err.empty())
      return err;
    anyOutput |= outputs[o].numElements() > 0;
  }
  return "";
}

std::string interpret(const std::vector<TensorView> &inputs,
                      const std::vector<TensorView> &outputs,
                      const std::vector<ExprProgram> &programs,
                      const std::vector<ReductionRanges> &reductionRanges,
                      uint64_t randomStep) {
  if (programs.size() != outputs.size())
    return std::to_string(programs.size()) + " expression programs for " +
           std::to_string(outputs.size()) + " outputs";
  if (!reductionRanges.empty() && reductionRanges.size() != programs.size())
    return std::to_string(reductionRanges.size()) +
           " reduction range lists for " + std::to_string(programs.size()) +
           " programs";
  static const ReductionRanges kWhole;
  for (size_t o = 0; o < outputs.size(); ++o) {
    const ReductionRanges &r =
        reductionRanges.empty() ? kWhole : reductionRanges[o];
    if (std::string err =
            evaluateProgram(programs[o], inputs, outputs[o], r, randomStep);
        !err.empty())
      return "output " + std::to_string(o) + ": " + err;
  }
  return "";
}

/// The arguments of a native kernel call (without the step): the operands,
/// and the reduction spans of the instruction's partial sums.
KernelArgs kernelArgs(const std::vector<TensorView> &inputs,
                      const std::vector<TensorView> &outputs,
                      const std::vector<Attr> &attrs,
                      const std::vector<ExprProgram> &programs,
                      const std::vector<ReductionRanges> &reductionRanges) {
  KernelArgs args;
  args.inputs = inputs;
  args.outputs = outputs;
  args.attrs = &attrs;
  args.programs = &programs;
  for (size_t o = 0; o < reductionRanges.size() && o < programs.size(); ++o)
    for (size_t r = 0; r < reductionRanges[o].size(); ++r) {
      const ExprProgram &p = programs[o];
      int64_t extent =
          r < p.topReductionVars.size() && p.topReductionVars[r] >= 0 &&
                  size_t(p.topReductionVars[r]) < p.varExtents.size()
              ? p.varExtents[p.topReductionVars[r]]
              : -1;
      if (reductionRanges[o][r].first != 0 ||
          reductionRanges[o][r].second != extent)
        args.partialReduction = true;
      if (o == 0)
        args.reductions.push_back({reductionRanges[o][r].first,
                                   reductionRanges[o][r].second, extent});
    }
  return args;
}

/// With TOFU_LOG_INTERPRETED set, names (once per op and reason) each op
/// that runs on the expression interpreter, on stderr: the way to find the
/// ops of a model that still lack a native kernel.
void logInterpreted(const std::string &kernel, const std::string &why) {
  static const bool enabled = std::getenv("TOFU_LOG_INTERPRETED") != nullptr;
  if (!enabled)
    return;
  static std::mutex mutex;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mutex);
  if (seen.insert(kernel + "\n" + why).second)
    std::fprintf(stderr, "tofu: interpreted %s: %s\n", kernel.c_str(),
                 why.empty() ? "no native kernel" : why.c_str());
}

} // namespace

TensorView TensorView::ofRegion(void *data, DType dtype, const Box &region,
                                std::vector<int64_t> globalShape) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.lo = region.lo;
  for (size_t d = 0; d < region.lo.size() && d < region.hi.size(); ++d)
    v.shape.push_back(region.hi[d] - region.lo[d]);
  v.globalShape = std::move(globalShape);
  return v;
}

TensorView TensorView::whole(void *data, DType dtype,
                             std::vector<int64_t> shape) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.lo.assign(shape.size(), 0);
  v.shape = shape;
  v.globalShape = std::move(shape);
  return v;
}

Box TensorView::region() const {
  Box b;
  b.lo = lo;
  for (size_t d = 0; d < lo.size() && d < shape.size(); ++d)
    b.hi.push_back(lo[d] + shape[d]);
  return b;
}

std::string tofu::runtime::unsupportedConfiguration(const std::string &why) {
  return kUnsupportedTag + why;
}

bool tofu::runtime::isUnsupportedConfiguration(const std::string &error) {
  return error.compare(0, sizeof(kUnsupportedTag) - 1, kUnsupportedTag) == 0;
}

bool tofu::runtime::nativeKernelsHandle(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 ||
         dtype == DType::BF16 || dtype == DType::I64 || dtype == DType::Bool;
}

bool tofu::runtime::hasNativeKernel(const std::string &kernel) {
  return lookupKernel(kernel) != nullptr;
}

std::string tofu::runtime::runCompute(
    const std::string &kernel, const std::vector<Attr> &attrs,
    const std::vector<TensorView> &inputs,
    const std::vector<TensorView> &outputs,
    const std::vector<ExprProgram> &programs,
    const std::vector<ReductionRanges> &reductionRanges, ComputePath path,
    ComputePath *used, uint64_t randomStep) {
  const std::string who = "kernel '" + kernel + "': ";
  bool anyOutput = false;
  if (std::string err = checkOperands(inputs, outputs, anyOutput);
      !err.empty())
    return who + err;
  if (!anyOutput && !outputs.empty())
    return ""; // an empty share: nothing to compute

  KernelFn native = path == ComputePath::Interpreter ? nullptr
                                                      : lookupKernel(kernel);
  // The native kernels take float32 or float64 data with int64 and bool
  // operands; an operand of any other element type goes to the interpreter,
  // which converts every element (never a native kernel reading bytes as
  // the wrong type).
  std::string foreignType;
  auto checkNativeType = [&](const TensorView &v) {
    if (foreignType.empty() && v.present() && !nativeKernelsHandle(v.dtype))
      foreignType = dtypeNumpyName(v.dtype);
  };
  for (const TensorView &v : inputs)
    checkNativeType(v);
  for (const TensorView &v : outputs)
    checkNativeType(v);
  if (native && !foreignType.empty()) {
    if (path == ComputePath::Native || programs.empty())
      return who +
             "the native CPU kernel handles float32, float64 and bfloat16 "
             "(with int64 and bool operands) only, not " +
             foreignType +
             (programs.empty() ? "; the op has no expression program for the "
                                 "interpreter either (its TDL spec is opaque)"
                               : "");
    native = nullptr;
  }
  std::string nativeError;
  if (native) {
    KernelArgs args = kernelArgs(inputs, outputs, attrs, programs,
                                 reductionRanges);
    args.randomStep = randomStep;
    nativeError = native(args);
    if (nativeError.empty()) {
      if (used)
        *used = ComputePath::Native;
      return "";
    }
    if (!isUnsupportedConfiguration(nativeError) || programs.empty() ||
        path == ComputePath::Native)
      return who + nativeError;
  } else if (path == ComputePath::Native) {
    return who + "no native CPU kernel is registered under this name";
  }
  if (programs.empty()) {
    std::string names;
    for (const std::string &n : registeredKernels())
      names += (names.empty() ? "" : ", ") + n;
    return who + "no native CPU kernel (available: " + names +
           ") and no expression program; add a kernel to the runtime or a "
           "TDL spec that is not opaque";
  }
  if (path != ComputePath::Interpreter)
    logInterpreted(kernel, !nativeError.empty() ? nativeError : foreignType);
  if (std::string err =
          interpret(inputs, outputs, programs, reductionRanges, randomStep);
      !err.empty())
    return who + (nativeError.empty() ? "" : nativeError + "; ") +
           "interpreter: " + err;
  if (used)
    *used = ComputePath::Interpreter;
  return "";
}

std::string BoundCompute::bind(const std::string &kernelName,
                               const std::vector<Attr> &attrs,
                               std::vector<TensorView> inputs,
                               std::vector<TensorView> outputs,
                               const std::vector<ExprProgram> &programList,
                               const std::vector<ReductionRanges> &ranges,
                               ComputePath computePath) {
  kernel = &kernelName;
  programs = &programList;
  reductionRanges = &ranges;
  path = computePath;
  bool anyOutput = false, nativeTypes = true;
  if (std::string err = checkOperands(inputs, outputs, anyOutput);
      !err.empty())
    return "kernel '" + kernelName + "': " + err;
  for (const auto *views : {&inputs, &outputs})
    for (const TensorView &v : *views)
      if (v.present())
        nativeTypes &= nativeKernelsHandle(v.dtype);
  empty = !anyOutput && !outputs.empty();
  args = kernelArgs(inputs, outputs, attrs, programList, ranges);
  args.inputs = std::move(inputs);
  args.outputs = std::move(outputs);
  native = path != ComputePath::Interpreter && nativeTypes
               ? lookupKernel(kernelName)
               : nullptr;
  return "";
}

std::string BoundCompute::run(uint64_t randomStep, ComputePath *used) {
  if (empty)
    return "";
  if (native) {
    args.randomStep = randomStep;
    if (native(args).empty()) {
      if (used)
        *used = ComputePath::Native;
      return "";
    }
    // Declined or failed: runCompute reruns it and says what to do.
  }
  return runCompute(*kernel, *args.attrs, args.inputs, args.outputs,
                    *programs, *reductionRanges, path, used, randomStep);
}
