//===- TDLTestSupport.h - helpers for the TDL unit tests ----------*- C++ -*-===//
#ifndef TOFU_TEST_UNIT_TDL_TDLTESTSUPPORT_H
#define TOFU_TEST_UNIT_TDL_TDLTESTSUPPORT_H

#include "tofu/TDL/TDL.h"

#include <gtest/gtest.h>

namespace tofu::tdl::test {

inline TensorType f32(std::vector<int64_t> dims) {
  return TensorType{std::move(dims), ElemType::F32};
}
inline TensorType i64(std::vector<int64_t> dims) {
  return TensorType{std::move(dims), ElemType::I64};
}

/// The message of `e`, or "" on success.
inline std::string errorText(llvm::Error e) {
  if (!e)
    return "";
  return llvm::toString(std::move(e));
}

/// Parses `text` as "test.tdl" and returns the diagnostic ("" if none).
inline std::string parseError(const std::string &text) {
  SpecLibrary lib;
  return errorText(lib.addSource("test.tdl", text));
}

inline OpInstance
mustInstantiate(const SpecLibrary &lib, llvm::StringRef op,
                std::vector<std::optional<TensorType>> in,
                const AttrMap &attrs = {},
                const std::map<unsigned, std::vector<double>> &constValues = {}) {
  const OpSpec *spec = lib.lookup(op);
  EXPECT_NE(spec, nullptr) << op.str();
  auto inst = instantiate(*spec, in, attrs, constValues);
  if (!inst) {
    ADD_FAILURE() << llvm::toString(inst.takeError());
    std::abort();
  }
  return std::move(*inst);
}

inline std::string instantiateError(
    const SpecLibrary &lib, llvm::StringRef op,
    std::vector<std::optional<TensorType>> in, const AttrMap &attrs = {},
    const std::map<unsigned, std::vector<double>> &constValues = {}) {
  auto inst = instantiate(*lib.lookup(op), in, attrs, constValues);
  if (inst)
    return "";
  return llvm::toString(inst.takeError());
}

/// The first output of `op` instantiated on the types of `inputs` and run by
/// the reference evaluator; a test failure naming the op and an empty result
/// when it cannot be.
inline std::vector<double> evaluateFirstOutput(llvm::StringRef op,
                                               const std::vector<DenseTensor> &inputs,
                                               const AttrMap &attrs = {}) {
  std::vector<std::optional<TensorType>> types;
  std::vector<const DenseTensor *> ptrs;
  for (const DenseTensor &t : inputs) {
    types.push_back(t.type);
    ptrs.push_back(&t);
  }
  OpInstance inst = mustInstantiate(SpecLibrary::builtin(), op, types, attrs);
  auto r = evaluate(inst, ptrs);
  if (!r) {
    ADD_FAILURE() << op.str() << ": " << llvm::toString(r.takeError());
    return {};
  }
  return (*r)[0].data;
}

inline DenseTensor tensor(TensorType t, std::vector<double> data) {
  return DenseTensor{std::move(t), std::move(data)};
}

} // namespace tofu::tdl::test

#endif
