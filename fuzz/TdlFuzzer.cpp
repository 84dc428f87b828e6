//===- TdlFuzzer.cpp - libFuzzer target: the TDL front end -----------------===//
//
// Parses each input as a .tdl source (lexer, parser, spec checker). When it
// parses, every op it declares is instantiated at a few small input shapes
// (shape inference, static evaluation), analyzed (symbolic interval
// analysis, 2 and 3 workers) and, where it has a gradient rule, the rule is
// expanded. Each step must return a value or an error: never crash, hang,
// overflow the stack or allocate without bound (docs/Errors.md, Limits).
//
//===----------------------------------------------------------------------===//
#include "tofu/TDL/TDL.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

using namespace tofu::tdl;

/// Input shapes tried for every op: 1 to 3 inputs of rank 1, 2 or 4.
static const std::vector<std::vector<std::optional<TensorType>>> &
candidateInputs() {
  static const auto *candidates = [] {
    auto *list = new std::vector<std::vector<std::optional<TensorType>>>;
    const std::vector<std::vector<int64_t>> shapes = {
        {6}, {4, 6}, {2, 3, 5, 5}};
    for (const auto &dims : shapes)
      for (unsigned n = 1; n <= 3; ++n)
        list->push_back(std::vector<std::optional<TensorType>>(
            n, TensorType{dims, ElemType::F32}));
    return list;
  }();
  return *candidates;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  SpecLibrary library;
  if (llvm::Error err = library.addSource("fuzz.tdl", text)) {
    llvm::consumeError(std::move(err));
    return 0;
  }
  for (const std::string &name : library.opNames()) {
    const OpSpec *spec = library.lookup(name);
    if (!spec)
      continue;
    for (const auto &inputs : candidateInputs()) {
      auto instance = instantiate(*spec, inputs, AttrMap{});
      if (!instance) {
        llvm::consumeError(instance.takeError());
        continue;
      }
      for (unsigned parts : {2u, 3u}) {
        auto strategies = analyzeStrategies(*instance, parts);
        if (!strategies)
          llvm::consumeError(strategies.takeError());
      }
      if (library.lookupGrad(name)) {
        auto gradient = expandGradient(library, *instance);
        if (!gradient)
          llvm::consumeError(gradient.takeError());
      }
    }
  }
  return 0;
}
