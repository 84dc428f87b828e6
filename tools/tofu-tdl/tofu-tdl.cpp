//===- tofu-tdl.cpp - check and explore TDL specs ---------------------------===//
//
//   tofu-tdl FILE.tdl...            parse and check; diagnostics on stderr
//   tofu-tdl [FILE.tdl...] --op NAME --input 32x64xf32 --input none
//            --attr transB=1 [--analyze] [--grad] [--eval-random]
//
// Without files the builtin specs (tdl-specs/, embedded) are used. With
// --op, prints the instance (output types, reduction variables), and on
// request its partition strategies with symbolic and concrete regions, its
// expanded gradient rule, and the outputs of the reference evaluator on
// random inputs. Exits 1 with the diagnostic on any error.
//
//===----------------------------------------------------------------------===//
#include "tofu/TDL/TDL.h"
#include "tofu/runtime/InputFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <iostream>
#include <random>

using namespace tofu::tdl;

/// The largest TDL spec file read (the builtin specs are a few KiB each).
static constexpr uint64_t kMaxTdlSpecBytes = uint64_t(16) << 20;
namespace cl = llvm::cl;

static cl::list<std::string> files(cl::Positional, cl::desc("<file.tdl>..."));
static cl::opt<std::string> opName("op", cl::desc("Instantiate this op"),
                                   cl::value_desc("name"));
static cl::list<std::string>
    inputSpecs("input", cl::desc("Input type, e.g. 32x64xf32, 64xi64, f32 "
                                 "(rank 0), or 'none' for an absent input"),
               cl::value_desc("type"));
static cl::list<std::string>
    attrSpecs("attr", cl::desc("Attribute name=value (int, float, "
                               "string, or ints as 1,2,3)"),
              cl::value_desc("name=value"));
static cl::opt<bool> analyze("analyze",
                             cl::desc("Print the partition strategies"));
static cl::opt<unsigned> parts("parts",
                               cl::desc("Workers per split for --analyze"),
                               cl::init(2));
static cl::opt<bool> grad("grad", cl::desc("Print the expanded gradient"));
static cl::opt<bool> evalRandom("eval-random",
                                cl::desc("Evaluate on random inputs"));
static cl::opt<unsigned> seed("seed", cl::desc("Seed for --eval-random"),
                              cl::init(0));

static int fail(llvm::Error e) {
  std::string msg = llvm::toString(std::move(e));
  if (llvm::StringRef(msg).contains(": error: "))
    llvm::errs() << msg << "\n";
  else
    llvm::errs() << "error: " << msg << "\n";
  return 1;
}

static llvm::Expected<std::optional<TensorType>> parseType(llvm::StringRef s) {
  if (s == "none" || s == "-")
    return std::nullopt;
  llvm::SmallVector<llvm::StringRef> parts;
  s.split(parts, 'x');
  TensorType t;
  llvm::StringRef elem = parts.back();
  bool known = false;
  for (unsigned e = 0; e < kNumElemTypes; ++e)
    if (elem == elemName(static_cast<ElemType>(e))) {
      t.elem = static_cast<ElemType>(e);
      known = true;
    }
  if (!known)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "bad --input '" + s +
                                       "': expected e.g. 32x64xf32 or 64xi64");
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    int64_t d;
    if (parts[i].getAsInteger(10, d) || d < 0)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "bad dimension '" + parts[i] +
                                         "' in --input '" + s + "'");
    t.dims.push_back(d);
  }
  return t;
}

static llvm::Expected<std::pair<std::string, AttrValue>>
parseAttr(llvm::StringRef s) {
  auto [name, value] = s.split('=');
  if (name.empty() || !s.contains('='))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "bad --attr '" + s +
                                       "': expected name=value");
  int64_t i;
  double f;
  if (!value.getAsInteger(10, i))
    return std::make_pair(name.str(), AttrValue::ofInt(i));
  if (!value.getAsDouble(f))
    return std::make_pair(name.str(), AttrValue::ofFloat(f));
  if (value.contains(',')) {
    std::vector<int64_t> ints;
    llvm::SmallVector<llvm::StringRef> parts;
    value.trim("[]").split(parts, ',');
    for (auto p : parts) {
      if (p.trim().getAsInteger(10, i))
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "bad ints in --attr '" + s + "'");
      ints.push_back(i);
    }
    return std::make_pair(name.str(), AttrValue::ofInts(std::move(ints)));
  }
  return std::make_pair(name.str(), AttrValue::ofString(value.trim("\"").str()));
}

static std::string typeStr(const TensorType &t) {
  std::string r;
  for (int64_t d : t.dims)
    r += std::to_string(d) + "x";
  return r + elemName(t.elem);
}

static std::string attrStr(const AttrValue &a) {
  switch (a.kind) {
  case AttrValue::Kind::Int:
    return std::to_string(a.i);
  case AttrValue::Kind::Float: {
    char buf[32];
    snprintf(buf, sizeof(buf), "%g", a.f);
    return buf;
  }
  case AttrValue::Kind::String:
    return "\"" + a.s + "\"";
  case AttrValue::Kind::Ints: {
    std::string r = "[";
    for (size_t k = 0; k < a.ints.size(); ++k)
      r += (k ? ", " : "") + std::to_string(a.ints[k]);
    return r + "]";
  }
  }
  return "?";
}

/// Prints `c` as a coefficient of `sym`: X0, X0/2, 2*X0, -X0.
static std::string termStr(double c, const std::string &sym) {
  if (c == 1)
    return sym;
  if (c == -1)
    return "-" + sym;
  double inv = 1 / c;
  if (std::fabs(inv - std::round(inv)) < 1e-9)
    return sym + "/" + std::to_string(static_cast<int64_t>(std::round(inv)));
  char buf[32];
  snprintf(buf, sizeof(buf), "%g*", c);
  return buf + sym;
}

static std::string affineStr(const std::vector<double> &coef, double k,
                             const std::vector<std::string> &syms) {
  std::string r;
  for (size_t i = 0; i < coef.size(); ++i) {
    if (coef[i] == 0)
      continue;
    std::string t = termStr(coef[i], syms[i]);
    if (!r.empty())
      r += t[0] == '-' ? " - " + t.substr(1) : " + " + t;
    else
      r = t;
  }
  if (k != 0 || r.empty()) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%g", std::fabs(k));
    if (r.empty())
      r = k < 0 ? "-" + std::string(buf) : buf;
    else
      r += (k < 0 ? " - " : " + ") + std::string(buf);
  }
  return r;
}

static void printStrategies(const OpInstance &inst,
                            const std::vector<Strategy> &strategies) {
  for (const Strategy &st : strategies) {
    llvm::outs() << "  ";
    if (st.kind == Strategy::Kind::SplitOutput)
      llvm::outs() << "split output " << inst.outputNames()[st.output]
                   << " dim " << st.dim << ":\n";
    else
      llvm::outs() << "split reduction " << st.reduction << " of "
                   << inst.outputNames()[st.output] << ":\n";
    // Concrete regions at this instance, one per worker.
    const auto &outDims = inst.outputTypes()[st.output].dims;
    unsigned g = st.parts;
    auto part = [&](int64_t x, unsigned w) {
      return Range{int64_t(w) * x / g, int64_t(w + 1) * x / g};
    };
    for (unsigned w = 0; w < g; ++w) {
      llvm::outs() << "    worker " << w << ":";
      for (size_t i = 0; i < st.regions[w].size(); ++i) {
        if (!st.regions[w][i])
          continue;
        llvm::outs() << " " << inst.inputNames()[i] << "[";
        const auto &dims = *st.regions[w][i];
        for (size_t d = 0; d < dims.size(); ++d)
          llvm::outs() << (d ? ", " : "")
                       << affineStr(dims[d].lower, dims[d].lowerConst,
                                    st.symbols)
                       << ":"
                       << affineStr(dims[d].upper, dims[d].upperConst,
                                    st.symbols);
        llvm::outs() << "]";
      }
      Box box;
      for (int64_t d : outDims)
        box.push_back({0, d});
      std::vector<Range> red;
      if (st.kind == Strategy::Kind::SplitOutput) {
        int64_t x = outDims[st.dim];
        box[st.dim] = part(x, w);
      } else {
        for (auto &rv : inst.reductionVars(st.output))
          red.push_back({0, rv.extent});
        int64_t x = red[st.reductionIndex].hi;
        red[st.reductionIndex] = part(x, w);
      }
      auto regions = inst.requiredRegions(st.output, box, red);
      llvm::outs() << "\n      at this shape:";
      for (size_t i = 0; i < regions.size(); ++i) {
        if (!regions[i])
          continue;
        llvm::outs() << " " << inst.inputNames()[i] << "[";
        for (size_t d = 0; d < regions[i]->size(); ++d)
          llvm::outs() << (d ? ", " : "") << (*regions[i])[d].lo << ":"
                       << (*regions[i])[d].hi;
        llvm::outs() << "]";
      }
      llvm::outs() << "\n";
    }
  }
}

static std::string operandStr(const GradOperand &o, const OpInstance &inst) {
  switch (o.kind) {
  case GradOperand::Kind::ForwardInput:
    return inst.inputNames()[o.index];
  case GradOperand::Kind::ForwardOutput:
    return inst.outputNames()[o.index];
  case GradOperand::Kind::OutputGrad:
    return "d" + inst.outputNames()[o.index];
  case GradOperand::Kind::Temp:
    return "%" + std::to_string(o.index);
  }
  return "?";
}

int main(int argc, char **argv) {
  cl::ParseCommandLineOptions(argc, argv, "TDL spec checker and explorer\n");
  SpecLibrary own;
  // The files form one set: a gradient rule may call ops of any of them.
  std::vector<std::unique_ptr<llvm::MemoryBuffer>> buffers;
  std::vector<std::pair<llvm::StringRef, llvm::StringRef>> sources;
  for (const std::string &f : files) {
    // The checked read (InputFile.h): no FIFO, device or directory, and at
    // most kMaxTdlSpecBytes.
    std::string text;
    // Standard input ("-" or /dev/stdin) is read as a stream, asked for by
    // name, bounded by the same limit; any other path must be a regular file.
    if (f == "-" || f == "/dev/stdin") {
      char chunk[65536];
      while (text.size() <= kMaxTdlSpecBytes &&
             std::cin.read(chunk, sizeof(chunk)).gcount() > 0)
        text.append(chunk, static_cast<size_t>(std::cin.gcount()));
      if (text.size() > kMaxTdlSpecBytes) {
        llvm::errs() << "error: the TDL spec on standard input is over the "
                        "limit of "
                     << kMaxTdlSpecBytes << " bytes\n";
        return 1;
      }
    } else if (std::string err = tofu::readInputFile(f, "the TDL spec",
                                                     kMaxTdlSpecBytes, text);
               !err.empty()) {
      llvm::errs() << "error: " << err << "\n";
      return 1;
    }
    buffers.push_back(llvm::MemoryBuffer::getMemBufferCopy(text, f));
    sources.push_back({f, buffers.back()->getBuffer()});
  }
  if (!sources.empty())
    if (auto e = own.addSources(sources))
      return fail(std::move(e));
  const SpecLibrary &lib = files.empty() ? SpecLibrary::builtin() : own;
  if (opName.empty()) {
    if (files.empty())
      for (auto &n : lib.opNames())
        llvm::outs() << n << "\n";
    return 0;
  }
  const OpSpec *spec = lib.lookup(opName);
  if (!spec) {
    llvm::errs() << "error: unknown op '" << opName << "'\n";
    return 1;
  }
  std::vector<std::optional<TensorType>> inputs;
  for (auto &s : inputSpecs) {
    auto t = parseType(s);
    if (!t)
      return fail(t.takeError());
    inputs.push_back(*t);
  }
  AttrMap attrs;
  for (auto &s : attrSpecs) {
    auto a = parseAttr(s);
    if (!a)
      return fail(a.takeError());
    attrs[a->first] = a->second;
  }
  auto inst = instantiate(*spec, inputs, attrs);
  if (!inst)
    return fail(inst.takeError());
  llvm::outs() << "op " << inst->opName() << "\n";
  for (size_t i = 0; i < inst->inputTypes().size(); ++i)
    llvm::outs() << "  input " << inst->inputNames()[i] << ": "
                 << (inst->inputTypes()[i] ? typeStr(*inst->inputTypes()[i])
                                           : std::string("absent"))
                 << "\n";
  for (auto &[name, value] : inst->attrs())
    llvm::outs() << "  attr " << name << " = " << attrStr(value) << "\n";
  for (size_t o = 0; o < inst->outputTypes().size(); ++o) {
    llvm::outs() << "  output " << inst->outputNames()[o] << ": "
                 << typeStr(inst->outputTypes()[o]) << "\n";
    for (auto &rv : inst->reductionVars(static_cast<unsigned>(o)))
      llvm::outs() << "    reduction " << rv.name << ": " << rv.extent
                   << (rv.splittable ? " (splittable)" : " (not splittable)")
                   << "\n";
  }
  if (inst->isElementwise())
    llvm::outs() << "  elementwise\n";

  if (analyze) {
    auto strategies = analyzeStrategies(*inst, parts);
    if (!strategies)
      return fail(strategies.takeError());
    llvm::outs() << "strategies:\n";
    if (!strategies->empty()) {
      llvm::outs() << "  symbols:";
      for (size_t i = 0; i < strategies->front().symbols.size(); ++i)
        llvm::outs() << " " << strategies->front().symbols[i] << "="
                     << strategies->front().symbolValues[i];
      llvm::outs() << "\n";
    }
    printStrategies(*inst, *strategies);
  }
  if (grad) {
    auto g = expandGradient(lib, *inst);
    if (!g)
      return fail(g.takeError());
    llvm::outs() << "gradient:\n";
    for (size_t c = 0; c < g->calls.size(); ++c) {
      const GradCall &call = g->calls[c];
      llvm::outs() << "  %" << c << " = " << call.op << "(";
      for (size_t k = 0; k < call.operands.size(); ++k)
        llvm::outs() << (k ? ", " : "") << operandStr(call.operands[k], *inst);
      llvm::outs() << ")";
      if (!call.attrs.empty()) {
        llvm::outs() << " {";
        bool first = true;
        for (auto &[n, v] : call.attrs) {
          llvm::outs() << (first ? "" : ", ") << n << " = " << attrStr(v);
          first = false;
        }
        llvm::outs() << "}";
      }
      llvm::outs() << "\n";
    }
    for (size_t i = 0; i < g->inputGrads.size(); ++i)
      llvm::outs() << "  d" << inst->inputNames()[i] << " = "
                   << (g->inputGrads[i] ? operandStr(*g->inputGrads[i], *inst)
                                        : std::string("none"))
                   << "\n";
  }
  if (evalRandom) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> uni(-1, 1);
    std::vector<DenseTensor> storage(inst->inputTypes().size());
    std::vector<const DenseTensor *> ptrs;
    for (size_t i = 0; i < storage.size(); ++i) {
      if (!inst->inputTypes()[i]) {
        ptrs.push_back(nullptr);
        continue;
      }
      storage[i].type = *inst->inputTypes()[i];
      int64_t n = 1;
      for (int64_t d : storage[i].type.dims)
        n *= d;
      for (int64_t k = 0; k < n; ++k)
        storage[i].data.push_back(
            isIntegerElem(storage[i].type.elem)       ? double(rng() % 4)
            : storage[i].type.elem == ElemType::Bool ? double(rng() % 2)
                                                     : convertToElem(
                                                           uni(rng),
                                                           storage[i].type.elem));
      ptrs.push_back(&storage[i]);
    }
    auto outs = evaluate(*inst, ptrs);
    if (!outs)
      return fail(outs.takeError());
    for (size_t o = 0; o < outs->size(); ++o) {
      const DenseTensor &t = (*outs)[o];
      double sum = 0;
      for (double v : t.data)
        sum += v;
      llvm::outs() << "output " << inst->outputNames()[o] << " ("
                   << typeStr(t.type) << "): sum = "
                   << llvm::format("%.6g", sum) << ", first:";
      for (size_t k = 0; k < t.data.size() && k < 8; ++k)
        llvm::outs() << " " << llvm::format("%.6g", t.data[k]);
      llvm::outs() << "\n";
    }
  }
  return 0;
}
