//===- Backend.cpp - Run one instantiated op on whole tensors -------------===//
//
// The CPU path needs two pieces that are built separately: the TDL lowering
// (tofu/TDL/ProgramLowering.h) and the runtime's compute entry point
// (tofu/runtime/ComputeKernel.h). Until both exist in the tree, the CPU
// backend reports itself missing and every test is skipped in that mode.
//
//===----------------------------------------------------------------------===//
#include "Backend.h"

#include "tofu/runtime/Kernels.h"

#if __has_include("tofu/TDL/ProgramLowering.h") &&                            \
    __has_include("tofu/runtime/ComputeKernel.h")
#include "tofu/TDL/ProgramLowering.h"
#include "tofu/runtime/ComputeKernel.h"
#define TOFU_NODETEST_HAVE_CPU_BACKEND 1
#else
#define TOFU_NODETEST_HAVE_CPU_BACKEND 0
#endif

#include "tofu/runtime/ElementAccess.h"

#include <cmath>
#include <cstring>

namespace tofu::nodetest {

namespace {

/// tdl::ElemType and plan::DType number the types alike.
plan::DType toPlanDType(tdl::ElemType elem) {
  return static_cast<plan::DType>(elem);
}

std::vector<plan::Attr> toPlanAttrs(const tdl::AttrMap &attrs) {
  std::vector<plan::Attr> result;
  for (const auto &[name, value] : attrs) {
    plan::Attr a;
    a.name = name;
    switch (value.kind) {
    case tdl::AttrValue::Kind::Int:
      a.kind = plan::Attr::Kind::Int;
      a.i = value.i;
      break;
    case tdl::AttrValue::Kind::Float:
      a.kind = plan::Attr::Kind::Float;
      a.f = value.f;
      break;
    case tdl::AttrValue::Kind::String:
      a.kind = plan::Attr::Kind::String;
      a.s = value.s;
      break;
    case tdl::AttrValue::Kind::Ints:
      a.kind = plan::Attr::Kind::Ints;
      a.ints = value.ints;
      break;
    }
    result.push_back(std::move(a));
  }
  return result;
}

/// A view of a whole tensor (k = 1: local box = global shape).
runtime::TensorView wholeView(const tdl::TensorType &type, void *data) {
  runtime::TensorView view;
  view.data = data;
  view.dtype = toPlanDType(type.elem);
  view.shape = type.dims;
  view.lo.assign(type.dims.size(), 0);
  view.globalShape = type.dims;
  return view;
}

/// Zero-filled output tensors of `op`'s declared output types.
std::vector<TensorData> allocateOutputs(const tdl::OpInstance &op) {
  std::vector<TensorData> outputs;
  for (const tdl::TensorType &type : op.outputTypes()) {
    TensorData t;
    t.type = type;
    t.bytes.assign(t.numElements() * elemTypeBytes(type.elem), 0);
    outputs.push_back(std::move(t));
  }
  return outputs;
}

/// Input views (absent inputs: a view with null data, as the executor passes
/// them) and output views over `outputs`.
void makeViews(const tdl::OpInstance &op,
               const std::vector<std::optional<TensorData>> &inputs,
               std::vector<TensorData> &outputs,
               std::vector<runtime::TensorView> &inViews,
               std::vector<runtime::TensorView> &outViews) {
  for (size_t k = 0; k < op.inputTypes().size(); ++k) {
    if (k < inputs.size() && inputs[k])
      inViews.push_back(wholeView(
          inputs[k]->type, const_cast<uint8_t *>(inputs[k]->bytes.data())));
    else
      inViews.emplace_back();
  }
  for (TensorData &t : outputs)
    outViews.push_back(wholeView(t.type, t.bytes.data()));
}

std::string runNative(const tdl::OpInstance &op,
                      const std::vector<std::optional<TensorData>> &inputs,
                      std::vector<TensorData> &outputs) {
  runtime::KernelFn fn = runtime::lookupKernel(op.opName().str());
  if (!fn)
    return "no native kernel registered for " + op.opName().str();
  outputs = allocateOutputs(op);
  runtime::KernelArgs args;
  std::vector<plan::Attr> attrs = toPlanAttrs(op.attrs());
  args.attrs = &attrs;
  makeViews(op, inputs, outputs, args.inputs, args.outputs);
  return fn(args);
}

std::string runReference(const tdl::OpInstance &op,
                         const std::vector<std::optional<TensorData>> &inputs,
                         std::vector<TensorData> &outputs) {
  std::vector<tdl::DenseTensor> storage(op.inputTypes().size());
  std::vector<const tdl::DenseTensor *> ptrs;
  for (size_t k = 0; k < storage.size(); ++k) {
    if (k >= inputs.size() || !inputs[k]) {
      ptrs.push_back(nullptr);
      continue;
    }
    storage[k].type = inputs[k]->type;
    int64_t n = inputs[k]->numElements();
    storage[k].data.resize(n);
    for (int64_t i = 0; i < n; ++i)
      storage[k].data[i] = inputs[k]->valueAt(i);
    ptrs.push_back(&storage[k]);
  }
  auto results = tdl::evaluate(op, ptrs);
  if (!results)
    return llvm::toString(results.takeError());
  outputs = allocateOutputs(op);
  for (size_t o = 0; o < outputs.size() && o < results->size(); ++o) {
    TensorData &t = outputs[o];
    const std::vector<double> &values = (*results)[o].data;
    if (static_cast<int64_t>(values.size()) != t.numElements())
      return "the reference evaluator returned " +
             std::to_string(values.size()) + " elements for output " +
             std::to_string(o) + ", its type needs " +
             std::to_string(t.numElements());
    for (size_t i = 0; i < values.size(); ++i)
      runtime::storeElement(t.bytes.data(), toPlanDType(t.type.elem),
                            static_cast<int64_t>(i), values[i]);
  }
  return "";
}

#if TOFU_NODETEST_HAVE_CPU_BACKEND
std::string runCpu(const tdl::OpInstance &op,
                   const std::vector<std::optional<TensorData>> &inputs,
                   std::vector<TensorData> &outputs, std::string &how) {
  bool native = runtime::lookupKernel(op.opName().str()) != nullptr;
  // One program per output; none at all when an output is opaque (then the
  // runtime needs its native kernel), as the compiler emits them.
  std::vector<plan::ExprProgram> programs;
  for (unsigned o = 0; o < op.outputTypes().size(); ++o) {
    auto program = tdl::lowerToProgram(op, o);
    if (!program) {
      std::string err = llvm::toString(program.takeError());
      if (err.find("opaque") == std::string::npos)
        return "lowering output " + std::to_string(o) + ": " + err;
      programs.clear();
      break;
    }
    programs.push_back(std::move(*program));
  }
  if (!native && programs.empty())
    return "opaque op without a native kernel";
  outputs = allocateOutputs(op);
  std::vector<runtime::TensorView> inViews, outViews;
  makeViews(op, inputs, outputs, inViews, outViews);
  std::vector<plan::Attr> attrs = toPlanAttrs(op.attrs());
  std::vector<std::vector<std::pair<int64_t, int64_t>>> reductionRanges(
      programs.size());
  runtime::ComputePath used = runtime::ComputePath::Auto;
  std::string err =
      runtime::runCompute(op.opName().str(), attrs, inViews, outViews,
                          programs, reductionRanges,
                          runtime::ComputePath::Auto, &used);
  how = used == runtime::ComputePath::Native        ? "native"
        : used == runtime::ComputePath::Interpreter ? "interpreted"
                                                    : (native ? "native"
                                                              : "interpreted");
  return err;
}
#endif

} // namespace

const char *backendName(Backend backend) {
  switch (backend) {
  case Backend::Cpu:
    return "cpu";
  case Backend::NativeKernels:
    return "native-kernels";
  case Backend::TdlReference:
    return "tdl-reference";
  }
  return "?";
}

std::string cpuBackendMissing() {
#if TOFU_NODETEST_HAVE_CPU_BACKEND
  return "";
#else
  return "the CPU backend's compute entry point (tofu/runtime/ComputeKernel.h)"
         " or the TDL lowering (tofu/TDL/ProgramLowering.h) is not in this "
         "build";
#endif
}

std::string cpuKernelKind(const std::string &opName) {
  if (runtime::lookupKernel(opName))
    return "native";
  if (cpuBackendMissing().empty() && tdl::SpecLibrary::builtin().lookup(opName))
    return "interpreted";
  return "none";
}

std::string runInstance(Backend backend, const tdl::OpInstance &op,
                        const std::vector<std::optional<TensorData>> &inputs,
                        std::vector<TensorData> &outputs, std::string &how) {
  switch (backend) {
  case Backend::Cpu:
#if TOFU_NODETEST_HAVE_CPU_BACKEND
    return runCpu(op, inputs, outputs, how);
#else
    return cpuBackendMissing();
#endif
  case Backend::NativeKernels:
    how = "native";
    return runNative(op, inputs, outputs);
  case Backend::TdlReference:
    how = "reference";
    return runReference(op, inputs, outputs);
  }
  return "unknown backend";
}

} // namespace tofu::nodetest
