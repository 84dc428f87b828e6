//===- KernelRegistry.cpp - Kernel lookup by op name ----------------------===//
//
// A fixed table from TDL op name to CPU kernel, filled once from the kernel
// families (element-wise, matrix, loss).
//
//===----------------------------------------------------------------------===//

#include "tofu/runtime/Kernels.h"

#include <map>

using namespace tofu::runtime;
using tofu::plan::Attr;

namespace {

std::map<std::string, KernelFn> &table() {
  static std::map<std::string, KernelFn> kernels;
  return kernels;
}

void addKernel(const char *name, KernelFn fn) { table()[name] = fn; }

const std::map<std::string, KernelFn> &registry() {
  static const bool initialized = [] {
    registerElementwiseKernels(addKernel);
    registerMatrixKernels(addKernel);
    registerMatMulKernels(addKernel);
    registerConvKernels(addKernel);
    registerLossKernels(addKernel);
    registerSoftmaxKernels(addKernel);
    registerNormalizationKernels(addKernel);
    registerPoolKernels(addKernel);
    registerShapeKernels(addKernel);
    registerReduceKernels(addKernel);
    registerIndexKernels(addKernel);
    registerPadKernels(addKernel);
    return true;
  }();
  (void)initialized;
  return table();
}

const Attr *findAttr(const std::vector<Attr> *attrs, const std::string &name) {
  if (!attrs)
    return nullptr;
  for (const Attr &a : *attrs)
    if (a.name == name)
      return &a;
  return nullptr;
}

} // namespace

double KernelArgs::floatAttr(const std::string &name, double dflt) const {
  const Attr *a = findAttr(attrs, name);
  if (!a)
    return dflt;
  return a->kind == Attr::Kind::Int ? static_cast<double>(a->i) : a->f;
}

int64_t KernelArgs::intAttr(const std::string &name, int64_t dflt) const {
  const Attr *a = findAttr(attrs, name);
  if (!a)
    return dflt;
  return a->kind == Attr::Kind::Float ? static_cast<int64_t>(a->f) : a->i;
}

std::vector<int64_t>
KernelArgs::intsAttr(const std::string &name,
                     const std::vector<int64_t> &dflt) const {
  const Attr *a = findAttr(attrs, name);
  return a ? a->ints : dflt;
}

bool KernelArgs::hasAttr(const std::string &name) const {
  return findAttr(attrs, name) != nullptr;
}

std::string KernelArgs::stringAttr(const std::string &name,
                                   const std::string &dflt) const {
  const Attr *a = findAttr(attrs, name);
  return a ? a->s : dflt;
}

KernelFn tofu::runtime::lookupKernel(const std::string &name) {
  const auto &r = registry();
  auto it = r.find(name);
  return it == r.end() ? nullptr : it->second;
}

std::vector<std::string> tofu::runtime::registeredKernels() {
  std::vector<std::string> names;
  for (const auto &[name, fn] : registry())
    names.push_back(name);
  return names;
}
