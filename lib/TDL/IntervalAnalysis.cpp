//===- IntervalAnalysis.cpp - TDL region analysis (paper §4.2) --------------===//
//
// Two walks over the accesses of a lowered statement:
//
//  * requiredRegions: concrete integer ranges. Each index variable has an
//    inclusive range; index expressions (±k, ×k, floor ÷k, ±interval) map
//    ranges to ranges exactly; the hull of all accesses of an input, made
//    half-open and clamped to the input's shape, is the region it needs.
//
//  * analyzeStrategies: the same walk over symbolic intervals whose bounds
//    are affine in the symbols X_i (output dims) and reduction extents, with
//    separate lower and upper constants. Output variable x_d ranges over
//    [0, X_d); a split gives worker 0 [0, X_d/2) and worker 1 [X_d/2, X_d)
//    (the paper's fractional form). Bounds are carried inclusive
//    ([lo, hi - 1]) so that sums of variables stay exact, e.g. conv's
//    x*s + dx over worker 0 needs [0, X*s/2 - s + K).
//
//===----------------------------------------------------------------------===//
#include "InstanceIR.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <atomic>
#include <mutex>

using namespace tofu::tdl;

//===----------------------------------------------------------------------===//
// Concrete regions
//===----------------------------------------------------------------------===//

namespace {

/// Inclusive integer range; empty when lo > hi.
struct IRange {
  int64_t lo = 0, hi = -1;
  bool empty() const { return lo > hi; }
};

int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0)))
    --q;
  return q;
}

class ConcreteWalker {
public:
  ConcreteWalker(const OpInstance::Impl &impl, const LoweredStmt &s,
                 std::vector<IRange> ranges)
      : impl(impl), ranges(std::move(ranges)),
        hull(impl.inputTypes.size()) {
    (void)s;
  }

  void walk(const LExpr &e) {
    switch (e.kind) {
    case LExpr::Kind::Access:
      access(e);
      return;
    case LExpr::Kind::Reduce:
      for (unsigned v : e.redVars)
        if (ranges[v].empty())
          return; // an empty reduction reads nothing
      walk(*e.ops[0]);
      return;
    default:
      for (auto &o : e.ops)
        walk(*o);
    }
  }

  std::vector<std::optional<Box>> result() const {
    std::vector<std::optional<Box>> regions(impl.inputTypes.size());
    for (size_t t = 0; t < regions.size(); ++t) {
      if (!impl.inputTypes[t])
        continue;
      if (hull[t]) {
        regions[t] = *hull[t];
      } else {
        regions[t] = Box(impl.inputTypes[t]->dims.size(), Range{0, 0});
      }
    }
    return regions;
  }

private:
  IRange index(const LExpr &e) {
    switch (e.kind) {
    case LExpr::Kind::Const: {
      auto v = static_cast<int64_t>(std::floor(e.value));
      return {v, v};
    }
    case LExpr::Kind::Var:
      return ranges[e.var];
    case LExpr::Kind::Neg: {
      IRange a = index(*e.ops[0]);
      return {-a.hi, -a.lo};
    }
    case LExpr::Kind::FloorDiv: {
      IRange a = index(*e.ops[0]);
      IRange b = index(*e.ops[1]);
      int64_t k = b.lo; // a constant (checked by the spec checker)
      if (k == 0)
        return {0, -1};
      if (k > 0)
        return {floorDiv(a.lo, k), floorDiv(a.hi, k)};
      return {floorDiv(a.hi, k), floorDiv(a.lo, k)};
    }
    case LExpr::Kind::Binary: {
      IRange a = index(*e.ops[0]);
      IRange b = index(*e.ops[1]);
      switch (e.op) {
      case BinOp::Add:
        return {a.lo + b.lo, a.hi + b.hi};
      case BinOp::Sub:
        return {a.lo - b.hi, a.hi - b.lo};
      case BinOp::Mul: {
        int64_t p[] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
        return {*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
      }
      case BinOp::Mod: {
        // Exact within one period of the (constant) modulus, else the
        // modulus' whole range: a sound over-approximation.
        int64_t k = b.lo;
        if (k == 0 || b.lo != b.hi)
          break;
        if (k > 0 && floorDiv(a.lo, k) == floorDiv(a.hi, k)) {
          int64_t q = floorDiv(a.lo, k) * k;
          return {a.lo - q, a.hi - q};
        }
        return k > 0 ? IRange{0, k - 1} : IRange{k + 1, 0};
      }
      default:
        break;
      }
      break;
    }
    case LExpr::Kind::Call: {
      // min / max are monotone in each operand; abs folds the range at 0.
      IRange a = index(*e.ops[0]);
      if (a.empty())
        return a;
      if (e.fn == Fn::Abs) {
        if (a.lo >= 0)
          return a;
        if (a.hi <= 0)
          return {-a.hi, -a.lo};
        return {0, std::max(-a.lo, a.hi)};
      }
      if (e.fn != Fn::Max && e.fn != Fn::Min)
        break;
      IRange b = index(*e.ops[1]);
      if (b.empty())
        return b;
      if (e.fn == Fn::Max)
        return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
      return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
    }
    default:
      break;
    }
    // Not an index form the checker admits; be conservative.
    return {std::numeric_limits<int32_t>::min(),
            std::numeric_limits<int32_t>::max()};
  }

  void access(const LExpr &e) {
    for (auto &op : e.ops)
      walk(*op); // data-dependent indices read tensors too
    const TensorType &t = *impl.inputTypes[e.tensor];
    Box box;
    for (size_t d = 0; d < e.ops.size(); ++d) {
      IRange r = e.ops[d]->kind == LExpr::Kind::Slice
                     ? IRange{0, t.dims[d] - 1}
                     : index(*e.ops[d]);
      if (r.empty())
        return;
      int64_t lo = std::max<int64_t>(r.lo, 0);
      int64_t hi = std::min<int64_t>(r.hi + 1, t.dims[d]);
      if (lo >= hi)
        return; // entirely padding: reads zeros, needs no data
      box.push_back({lo, hi});
    }
    auto &h = hull[e.tensor];
    if (!h) {
      h = std::move(box);
      return;
    }
    for (size_t d = 0; d < box.size(); ++d) {
      (*h)[d].lo = std::min((*h)[d].lo, box[d].lo);
      (*h)[d].hi = std::max((*h)[d].hi, box[d].hi);
    }
  }

  const OpInstance::Impl &impl;
  std::vector<IRange> ranges;
  std::vector<std::optional<Box>> hull;
};

} // namespace

std::vector<std::optional<Box>>
OpInstance::requiredRegions(unsigned output, const Box &outputBox,
                            const std::vector<Range> &reductionRanges) const {
  assert(output < impl->stmts.size() && "no such output");
  const LoweredStmt &s = impl->stmts[output];
  std::vector<IRange> ranges(s.vars.size());
  for (size_t v = 0; v < s.vars.size(); ++v)
    ranges[v] = {0, s.vars[v].extent - 1};
  bool anyEmpty = false;
  for (size_t d = 0; d < s.outVars.size() && d < outputBox.size(); ++d) {
    Range r = outputBox[d];
    r.lo = std::max<int64_t>(r.lo, 0);
    r.hi = std::min<int64_t>(r.hi, s.vars[s.outVars[d]].extent);
    ranges[s.outVars[d]] = {r.lo, r.hi - 1};
    anyEmpty |= r.lo >= r.hi;
  }
  bool splittable;
  if (const LExpr *top = findTopReducer(*s.value, splittable))
    for (size_t r = 0; r < reductionRanges.size() && r < top->redVars.size();
         ++r) {
      unsigned v = top->redVars[r];
      Range rr = reductionRanges[r];
      rr.lo = std::max<int64_t>(rr.lo, 0);
      rr.hi = std::min<int64_t>(rr.hi, s.vars[v].extent);
      ranges[v] = {rr.lo, rr.hi - 1};
    }
  ConcreteWalker walker(*impl, s, std::move(ranges));
  if (!anyEmpty)
    walker.walk(*s.value);
  return walker.result();
}

//===----------------------------------------------------------------------===//
// Symbolic strategies
//===----------------------------------------------------------------------===//

namespace {

/// sum_i coef[i] * sym_i + k.
struct Affine {
  std::vector<double> coef;
  double k = 0;
  Affine scaled(double f) const {
    Affine r = *this;
    for (double &c : r.coef)
      c *= f;
    r.k *= f;
    return r;
  }
  Affine plus(const Affine &o) const {
    Affine r = *this;
    for (size_t i = 0; i < r.coef.size(); ++i)
      r.coef[i] += o.coef[i];
    r.k += o.k;
    return r;
  }
  double at(const std::vector<int64_t> &values) const {
    double v = k;
    for (size_t i = 0; i < coef.size(); ++i)
      v += coef[i] * static_cast<double>(values[i]);
    return v;
  }
};

/// Inclusive symbolic range [lo, hi]. `whole`: the value is unknown to the
/// analysis (a data-dependent index); the access needs the whole extent of
/// the dimension it indexes.
struct SRange {
  Affine lo, hi;
  bool whole = false;
};

class SymbolicWalker {
public:
  SymbolicWalker(const OpInstance::Impl &impl, std::vector<SRange> ranges,
                 size_t numSymbols, std::vector<int64_t> symbolValues,
                 std::function<unsigned(unsigned, unsigned)> dimSymbol)
      : impl(impl), ranges(std::move(ranges)), numSymbols(numSymbols),
        symbolValues(std::move(symbolValues)), dimSymbol(std::move(dimSymbol)),
        hull(impl.inputTypes.size()) {}

  llvm::Error walk(const LExpr &e) {
    if (e.kind == LExpr::Kind::Access) {
      for (auto &o : e.ops)
        if (auto err = walk(*o)) // data-dependent indices read tensors too
          return err;
      return access(e);
    }
    for (auto &o : e.ops)
      if (auto err = walk(*o))
        return err;
    return llvm::Error::success();
  }

  std::vector<std::optional<std::vector<SymInterval>>> result() const {
    std::vector<std::optional<std::vector<SymInterval>>> regions(
        impl.inputTypes.size());
    for (size_t t = 0; t < regions.size(); ++t) {
      if (!impl.inputTypes[t])
        continue;
      std::vector<SymInterval> r;
      if (hull[t]) {
        for (const SRange &d : *hull[t]) {
          SymInterval si;
          si.lower = d.lo.coef;
          si.lowerConst = d.lo.k;
          si.upper = d.hi.coef;
          si.upperConst = d.hi.k + 1; // half-open
          r.push_back(std::move(si));
        }
      } else {
        for (size_t d = 0; d < impl.inputTypes[t]->dims.size(); ++d) {
          SymInterval si;
          si.lower.assign(numSymbols, 0);
          si.upper.assign(numSymbols, 0);
          r.push_back(std::move(si));
        }
      }
      regions[t] = std::move(r);
    }
    return regions;
  }

private:
  Affine constant(double v) const {
    Affine a;
    a.coef.assign(numSymbols, 0);
    a.k = v;
    return a;
  }
  SRange wholeRange() const {
    SRange r{constant(0), constant(0)};
    r.whole = true;
    return r;
  }
  static bool isConst(const SRange &r) {
    return llvm::all_of(r.lo.coef, [](double c) { return c == 0; }) &&
           llvm::all_of(r.hi.coef, [](double c) { return c == 0; }) &&
           r.lo.k == r.hi.k;
  }

  llvm::Expected<SRange> index(const LExpr &e) {
    switch (e.kind) {
    case LExpr::Kind::Const:
      return SRange{constant(std::floor(e.value)), constant(std::floor(e.value))};
    case LExpr::Kind::Var:
      return ranges[e.var];
    case LExpr::Kind::Access:
    case LExpr::Kind::Slice:
      return wholeRange();
    case LExpr::Kind::Call: {
      // min / max / abs (clamped or reflected indices, Pad's edge and
      // reflect modes): not affine, so a worker needs the whole dim (a
      // sound over-approximation; requiredRegions bounds them exactly).
      if (e.fn != Fn::Abs && e.fn != Fn::Max && e.fn != Fn::Min)
        return makeSpecError(e.loc, "function not supported inside an index "
                                    "by the interval analysis");
      for (auto &o : e.ops) {
        auto r = index(*o);
        if (!r)
          return r.takeError();
      }
      return wholeRange();
    }
    case LExpr::Kind::Neg: {
      auto a = index(*e.ops[0]);
      if (!a)
        return a.takeError();
      if (a->whole)
        return wholeRange();
      return SRange{a->hi.scaled(-1), a->lo.scaled(-1)};
    }
    case LExpr::Kind::FloorDiv:
    case LExpr::Kind::Binary: {
      auto a = index(*e.ops[0]);
      if (!a)
        return a.takeError();
      auto b = index(*e.ops[1]);
      if (!b)
        return b.takeError();
      if (e.kind == LExpr::Kind::Binary && e.op == BinOp::Mod) {
        // x % k lies in [0, k) for a constant k > 0 (a sound
        // over-approximation: %, unlike the affine forms, is not monotone).
        if (!b->whole && isConst(*b) && b->lo.k > 0)
          return SRange{constant(0), constant(b->lo.k - 1)};
        return wholeRange();
      }
      if (a->whole || b->whole)
        return wholeRange();
      if (e.kind == LExpr::Kind::Binary && e.op == BinOp::Add)
        return SRange{a->lo.plus(b->lo), a->hi.plus(b->hi)};
      if (e.kind == LExpr::Kind::Binary && e.op == BinOp::Sub)
        return SRange{a->lo.plus(b->hi.scaled(-1)),
                      a->hi.plus(b->lo.scaled(-1))};
      bool mul = e.kind == LExpr::Kind::Binary && e.op == BinOp::Mul;
      if (mul || e.kind == LExpr::Kind::FloorDiv) {
        const SRange *iv = &*a;
        double k;
        if (isConst(*b)) {
          k = b->lo.k;
        } else if (mul && isConst(*a)) {
          k = a->lo.k;
          iv = &*b;
        } else {
          return makeSpecError(e.loc, mul ? "product of two intervals is not "
                                            "supported by the interval "
                                            "analysis"
                                          : "division by an interval is not "
                                            "supported by the interval "
                                            "analysis");
        }
        if (!mul) {
          if (k == 0)
            return makeSpecError(e.loc, "division by zero in an index");
          k = 1 / k;
        }
        if (k >= 0)
          return SRange{iv->lo.scaled(k), iv->hi.scaled(k)};
        return SRange{iv->hi.scaled(k), iv->lo.scaled(k)};
      }
      return makeSpecError(e.loc, "comparison of two intervals is not "
                                  "supported by the interval analysis");
    }
    default:
      return makeSpecError(e.loc, "expression not supported inside an index "
                                  "by the interval analysis");
    }
  }

  llvm::Error access(const LExpr &e) {
    std::vector<SRange> box;
    for (auto &op : e.ops) {
      auto r = index(*op);
      if (!r)
        return r.takeError();
      if (r->whole) {
        // [0, dim(T, d) - 1].
        unsigned d = static_cast<unsigned>(box.size());
        r->lo = constant(0);
        r->hi = constant(-1);
        r->hi.coef[dimSymbol(e.tensor, d)] = 1;
        r->whole = false;
      }
      box.push_back(std::move(*r));
    }
    auto &h = hull[e.tensor];
    if (!h) {
      h = std::move(box);
      return llvm::Error::success();
    }
    for (size_t d = 0; d < box.size(); ++d) {
      SRange &cur = (*h)[d];
      // Hull of two affine bounds: exact when they differ by a constant;
      // otherwise decided at the analyzed instance's symbol values.
      if (cur.lo.coef == box[d].lo.coef)
        cur.lo.k = std::min(cur.lo.k, box[d].lo.k);
      else if (box[d].lo.at(symbolValues) < cur.lo.at(symbolValues))
        cur.lo = box[d].lo;
      if (cur.hi.coef == box[d].hi.coef)
        cur.hi.k = std::max(cur.hi.k, box[d].hi.k);
      else if (box[d].hi.at(symbolValues) > cur.hi.at(symbolValues))
        cur.hi = box[d].hi;
    }
    return llvm::Error::success();
  }

  const OpInstance::Impl &impl;
  std::vector<SRange> ranges;
  size_t numSymbols;
  std::vector<int64_t> symbolValues;
  /// The symbol of dim d of input t (whole-extent accesses).
  std::function<unsigned(unsigned, unsigned)> dimSymbol;
  std::vector<std::optional<std::vector<SRange>>> hull;
};

/// Symbols of one output statement and each variable's symbol.
struct SymbolTable {
  std::vector<std::string> names;
  std::vector<int64_t> values;
  std::vector<unsigned> ofVar;
  /// (input, dim) -> symbol, for dims read with a non-affine index.
  std::vector<std::pair<std::pair<unsigned, unsigned>, unsigned>> dimOf;
};

/// True when some index of `e` (or below) is not affine: a data-dependent
/// index, `%`, or min / max / abs.
bool hasWholeIndex(const LExpr &e) {
  if (e.kind == LExpr::Kind::Slice)
    return true;
  if (e.kind == LExpr::Kind::Access || e.kind == LExpr::Kind::Call)
    return true;
  if (e.kind == LExpr::Kind::Binary && e.op == BinOp::Mod)
    return true;
  return llvm::any_of(e.ops, [](const LExprPtr &o) { return hasWholeIndex(*o); });
}

/// True when an index below `e` multiplies, divides or takes a remainder.
bool hasScaledIndex(const LExpr &e, bool inIndex) {
  if (inIndex && (e.kind == LExpr::Kind::FloorDiv ||
                  e.kind == LExpr::Kind::Call ||
                  (e.kind == LExpr::Kind::Binary &&
                   (e.op == BinOp::Mul || e.op == BinOp::Mod ||
                    e.op == BinOp::FloorDiv))))
    return true;
  bool sub = inIndex || e.kind == LExpr::Kind::Access;
  return llvm::any_of(e.ops, [&](const LExprPtr &o) {
    return hasScaledIndex(*o, sub);
  });
}

/// Collects the (input, dim) pairs indexed by a non-affine index.
void collectWholeDims(const LExpr &e,
                      std::vector<std::pair<unsigned, unsigned>> &out) {
  if (e.kind == LExpr::Kind::Access)
    for (unsigned d = 0; d < e.ops.size(); ++d)
      if (hasWholeIndex(*e.ops[d]) &&
          !llvm::is_contained(out, std::make_pair(e.tensor, d)))
        out.emplace_back(e.tensor, d);
  for (auto &o : e.ops)
    collectWholeDims(*o, out);
}

SymbolTable buildSymbols(const OpInstance::Impl &impl, const LoweredStmt &s) {
  SymbolTable t;
  t.ofVar.assign(s.vars.size(), 0);
  for (size_t d = 0; d < s.outVars.size(); ++d) {
    t.names.push_back("X" + std::to_string(d));
    t.values.push_back(s.vars[s.outVars[d]].extent);
    t.ofVar[s.outVars[d]] = static_cast<unsigned>(d);
  }
  for (size_t v = 0; v < s.vars.size(); ++v) {
    if (llvm::is_contained(s.outVars, v))
      continue;
    const std::string &key = s.vars[v].extentKey;
    auto it = llvm::find(t.names, key);
    // A key that collides with an output symbol name or whose extent
    // differs gets its own, decorated symbol.
    if (it != t.names.end() &&
        (it - t.names.begin() < static_cast<long>(s.outVars.size()) ||
         t.values[it - t.names.begin()] != s.vars[v].extent))
      it = t.names.end();
    if (it == t.names.end()) {
      std::string name = key;
      while (llvm::is_contained(t.names, name))
        name += "'";
      t.names.push_back(name);
      t.values.push_back(s.vars[v].extent);
      it = t.names.end() - 1;
    }
    t.ofVar[v] = static_cast<unsigned>(it - t.names.begin());
  }
  // dim(T, d) for the dims read with a non-affine index.
  std::vector<std::pair<unsigned, unsigned>> whole;
  collectWholeDims(*s.value, whole);
  for (auto [in, d] : whole) {
    t.dimOf.emplace_back(std::make_pair(in, d),
                         static_cast<unsigned>(t.names.size()));
    t.names.push_back("dim(" + impl.inputNames[in] + ", " +
                      std::to_string(d) + ")");
    t.values.push_back(impl.inputTypes[in]->dims[d]);
  }
  return t;
}

/// One analysis run: variable `split` gets part `worker` of `parts` (or none
/// when split < 0).
llvm::Expected<std::vector<std::optional<std::vector<SymInterval>>>>
runSymbolic(const OpInstance::Impl &impl, const LoweredStmt &s,
            const SymbolTable &syms, int split, unsigned worker,
            unsigned parts) {
  size_t n = syms.names.size();
  std::vector<SRange> ranges(s.vars.size());
  for (size_t v = 0; v < s.vars.size(); ++v) {
    Affine zero;
    zero.coef.assign(n, 0);
    Affine full = zero;
    full.coef[syms.ofVar[v]] = 1;
    full.k = -1;
    SRange r{zero, full};
    if (static_cast<int>(v) == split) {
      // [w*X/g, (w+1)*X/g - 1], inclusive.
      r.lo.coef[syms.ofVar[v]] = double(worker) / parts;
      if (worker + 1 < parts) {
        r.hi = zero;
        r.hi.coef[syms.ofVar[v]] = double(worker + 1) / parts;
        r.hi.k = -1;
      }
    }
    ranges[v] = std::move(r);
  }
  auto dimSymbol = [&syms](unsigned in, unsigned d) {
    for (auto &[key, sym] : syms.dimOf)
      if (key == std::make_pair(in, d))
        return sym;
    assert(false && "dim symbol not collected");
    return 0u;
  };
  SymbolicWalker walker(impl, std::move(ranges), n, syms.values, dimSymbol);
  if (auto e = walker.walk(*s.value))
    return std::move(e);
  return walker.result();
}

llvm::Expected<std::vector<Strategy>> analyze(const OpInstance::Impl &impl,
                                              unsigned parts) {
  std::vector<Strategy> result;
  for (unsigned o = 0; o < impl.stmts.size(); ++o) {
    const LoweredStmt &s = impl.stmts[o];
    SymbolTable syms = buildSymbols(impl, s);
    auto addStrategy = [&](Strategy st, unsigned var) -> llvm::Error {
      st.output = o;
      st.parts = parts;
      st.symbols = syms.names;
      st.symbolValues = syms.values;
      for (unsigned w = 0; w < parts; ++w) {
        auto regions =
            runSymbolic(impl, s, syms, static_cast<int>(var), w, parts);
        if (!regions)
          return regions.takeError();
        st.regions.push_back(std::move(*regions));
      }
      result.push_back(std::move(st));
      return llvm::Error::success();
    };
    // Output dims that index the result of an opaque(...) are not split:
    // the hidden function computes its whole result at once.
    std::vector<unsigned> opaqueVars;
    collectOpaqueResultVars(*s.value, opaqueVars);
    for (size_t d = 0; d < s.outVars.size(); ++d) {
      if (llvm::is_contained(opaqueVars, s.outVars[d]))
        continue;
      Strategy st;
      st.kind = Strategy::Kind::SplitOutput;
      st.dim = static_cast<int64_t>(d);
      if (auto e = addStrategy(std::move(st), s.outVars[d]))
        return std::move(e);
    }
    bool splittable;
    const LExpr *top = findTopReducer(*s.value, splittable);
    if (!top || !splittable)
      continue;
    for (unsigned r = 0; r < top->redVars.size(); ++r) {
      Strategy st;
      st.kind = Strategy::Kind::SplitReduction;
      st.reduction = s.vars[top->redVars[r]].name;
      st.reductionIndex = r;
      if (auto e = addStrategy(std::move(st), top->redVars[r]))
        return std::move(e);
    }
  }
  return result;
}

} // namespace

llvm::Expected<std::vector<Strategy>>
tofu::tdl::analyzeStrategies(const OpInstance &op) {
  return analyzeStrategies(op, 2);
}

Range tofu::tdl::evaluateInterval(const SymInterval &si,
                                  llvm::ArrayRef<int64_t> symbolValues) {
  double lo = si.lowerConst, hi = si.upperConst;
  for (size_t i = 0; i < symbolValues.size(); ++i) {
    if (i < si.lower.size())
      lo += si.lower[i] * double(symbolValues[i]);
    if (i < si.upper.size())
      hi += si.upper[i] * double(symbolValues[i]);
  }
  // Tolerate rounding of fractional coefficients such as 1/3.
  return {static_cast<int64_t>(std::floor(lo + 1e-9)),
          static_cast<int64_t>(std::ceil(hi - 1e-9))};
}

/// Number of symbolic analyses run (cache misses), for tests.
static std::atomic<uint64_t> symbolicAnalysesRun{0};

uint64_t tofu::tdl::symbolicAnalysisCount() { return symbolicAnalysesRun; }

llvm::Expected<std::vector<Strategy>>
tofu::tdl::analyzeStrategies(const OpInstance &op, unsigned parts) {
  static std::mutex mutex;
  static std::map<std::string, std::vector<Strategy>> cache;
  if (parts < 2)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "analyzeStrategies: parts must be >= 2");
  std::string key = op.impl->cacheKey + "|parts=" + std::to_string(parts);
  // Constants of ×, ÷ and % in indices may come from shape symbols (e.g.
  // Flatten's `i // M`); they are baked into the intervals, so such ops are
  // cached per shape, not per rank.
  // So are variadic ops: Concat's and Split's offsets come from the shapes.
  const OpSpec &spec = *op.impl->spec;
  bool variadic =
      (!spec.inputs.empty() && spec.inputs.back().variadic) ||
      (!spec.outputs.empty() && spec.outputs.back().count);
  if (variadic || llvm::any_of(op.impl->stmts, [](const LoweredStmt &s) {
        return s.value && hasScaledIndex(*s.value, false);
      }))
    for (auto &t : op.impl->inputTypes) {
      key += ";";
      if (t)
        for (int64_t d : t->dims)
          key += std::to_string(d) + "x";
    }
  std::vector<Strategy> strategies;
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) {
      strategies = it->second;
      found = true;
    }
  }
  if (!found) {
    ++symbolicAnalysesRun;
    auto r = analyze(*op.impl, parts);
    if (!r)
      return r.takeError();
    strategies = std::move(*r);
    std::lock_guard<std::mutex> lock(mutex);
    cache.emplace(key, strategies);
  }
  // Symbol values are per instance; the cached intervals are not.
  for (Strategy &st : strategies)
    st.symbolValues =
        buildSymbols(*op.impl, op.impl->stmts[st.output]).values;
  return strategies;
}
