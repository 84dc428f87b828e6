//===- SpecLibrary.cpp - the set of parsed TDL specs ------------------------===//
//
// Owns parsed op declarations and gradient rules, keyed by op name, and the
// builtin library embedded from tdl-specs/ at build time.
//
//===----------------------------------------------------------------------===//
#include "EmbeddedSpecs.h"
#include "Parser.h"
#include "SpecChecker.h"

#include "llvm/Support/ErrorHandling.h"

#include <deque>
#include <map>

using namespace tofu::tdl;

struct SpecLibrary::Impl {
  /// File names referenced by Loc::file; a deque keeps them stable.
  std::deque<std::string> fileNames;
  std::map<std::string, std::unique_ptr<OpSpec>, std::less<>> ops;
  std::map<std::string, std::unique_ptr<GradRule>, std::less<>> grads;
};

SpecLibrary::SpecLibrary() : impl(std::make_unique<Impl>()) {}
SpecLibrary::~SpecLibrary() = default;
SpecLibrary::SpecLibrary(SpecLibrary &&) = default;

llvm::Error SpecLibrary::addSource(llvm::StringRef fileName,
                                   llvm::StringRef text) {
  return addSources({{fileName, text}});
}

llvm::Error SpecLibrary::addSources(
    llvm::ArrayRef<std::pair<llvm::StringRef, llvm::StringRef>> sources) {
  size_t namesBefore = impl->fileNames.size();
  auto restoreNames = [&] { impl->fileNames.resize(namesBefore); };
  std::vector<ParsedFile> files;
  for (const auto &[fileName, text] : sources) {
    impl->fileNames.push_back(fileName.str());
    auto parsed = parseTDL(&impl->fileNames.back(), text);
    if (!parsed) {
      restoreNames();
      return parsed.takeError();
    }
    files.push_back(std::move(*parsed));
  }
  // Check everything before adding anything, so that a failing source
  // leaves the library unchanged. Gradient rules may call ops of any of the
  // sources.
  std::map<std::string, OpSpec *, std::less<>> newOps;
  auto fail = [&](llvm::Error e) {
    restoreNames();
    return e;
  };
  for (auto &file : files)
    for (auto &op : file.ops) {
      auto old = impl->ops.find(op->name);
      if (old != impl->ops.end())
        return fail(makeSpecError(op->loc, "op '" + op->name +
                                               "' is already defined at " +
                                               old->second->loc.str()));
      if (newOps.count(op->name))
        return fail(makeSpecError(op->loc, "op '" + op->name +
                                               "' is already defined at " +
                                               newOps[op->name]->loc.str()));
      newOps[op->name] = op.get();
    }
  auto find = [&](llvm::StringRef name) -> const OpSpec * {
    auto it = newOps.find(name);
    if (it != newOps.end())
      return it->second;
    return lookup(name);
  };
  std::map<std::string, const GradRule *, std::less<>> newGrads;
  for (auto &file : files)
    for (auto &g : file.grads) {
      const OpSpec *forward = find(g->op);
      if (!forward)
        return fail(makeSpecError(g->loc, "gradient rule for unknown op '" +
                                              g->op + "'"));
      if (impl->grads.count(g->op) || newGrads.count(g->op))
        return fail(makeSpecError(g->loc, "op '" + g->op +
                                              "' already has a gradient rule"));
      newGrads[g->op] = g.get();
      if (auto e = checkGradRule(*g, forward, find))
        return fail(std::move(e));
    }
  for (auto &file : files) {
    for (auto &op : file.ops) {
      std::string name = op->name;
      impl->ops[name] = std::move(op);
    }
    for (auto &g : file.grads) {
      std::string name = g->op;
      impl->grads[name] = std::move(g);
    }
  }
  return llvm::Error::success();
}

const OpSpec *SpecLibrary::lookup(llvm::StringRef opName) const {
  auto it = impl->ops.find(opName);
  return it == impl->ops.end() ? nullptr : it->second.get();
}

const GradRule *SpecLibrary::lookupGrad(llvm::StringRef opName) const {
  auto it = impl->grads.find(opName);
  return it == impl->grads.end() ? nullptr : it->second.get();
}

std::vector<std::string> SpecLibrary::opNames() const {
  std::vector<std::string> names;
  for (auto &[name, op] : impl->ops)
    names.push_back(name);
  return names;
}

const SpecLibrary &SpecLibrary::builtin() {
  static const SpecLibrary library = [] {
    SpecLibrary lib;
    std::vector<std::pair<llvm::StringRef, llvm::StringRef>> sources;
    for (size_t i = 0; i < kNumEmbeddedSpecs; ++i) {
      const EmbeddedSpec &s = kEmbeddedSpecs[i];
      if (s.fileName)
        sources.push_back({s.fileName, llvm::StringRef(s.text, s.size)});
    }
    if (auto e = lib.addSources(sources))
      llvm::report_fatal_error(llvm::Twine("invalid builtin TDL spec: ") +
                               llvm::toString(std::move(e)));
    return lib;
  }();
  return library;
}
