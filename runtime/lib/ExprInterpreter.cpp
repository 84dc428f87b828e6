//===- ExprInterpreter.cpp - Evaluate expression programs -----------------===//
//
// A program is first compiled into flat blocks of register operations (one
// double register per node and per index variable; Var nodes are the
// variable's register, Const nodes are filled once):
//   - block 0 runs once per call (nodes that read no variable),
//   - block 1 runs once per output element,
//   - each Reduce node becomes a Loop operation in the block of its user,
//     whose body block runs once per iteration.
// A node is placed in the outermost block where all variables it reads are
// bound, so loop-invariant work (e.g. an access indexed only by output
// variables inside a reduction, or a whole inner reduction such as a
// softmax's row maximum) is hoisted out of the reduction loop. No
// allocation happens per element.
//
//===----------------------------------------------------------------------===//

#include "ExprInterpreter.h"
#include "ParallelFor.h"

#include "tofu/runtime/ElementAccess.h"
#include "tofu/runtime/CounterRng.h"
#include "tofu/runtime/ExprFreeVariables.h"
#include "tofu/runtime/ExprProgramCheck.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

using namespace tofu::runtime;
using namespace tofu::plan;

namespace {

/// Register operation codes.
enum class Code : uint8_t {
  Access, Neg, Add, Sub, Mul, Div, FloorDiv, Mod, Pow, Eq, Ne, Lt, Le, Gt,
  Ge, And, Or, Exp, Log, Sqrt, Tanh, Abs, Max, Min, Erf, Sigmoid, Floor, Ceil,
  Select, Uniform, Loop,
};

struct Op {
  Code code;
  int32_t dst;      ///< destination register
  int32_t a, b, c;  ///< operand registers
  int32_t aux;      ///< Access: access id; Loop: loop id
};

struct Access {
  int32_t node;
  int32_t input;
  size_t firstIndex; ///< into Program::indexRegs
  size_t rank;
};

struct Loop {
  int32_t node;
  Reducer reducer;
  int32_t body;     ///< block id
  int32_t valueReg; ///< register holding the body's value
  std::vector<int32_t> varRegs;
  std::vector<int64_t> lo, hi, cur;
};

/// An input as the evaluator reads it.
struct Input {
  const uint8_t *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> lo, shape, global, strides;
};

Code binaryCode(BinaryOp op) {
  switch (op) {
  case BinaryOp::Add: return Code::Add;
  case BinaryOp::Sub: return Code::Sub;
  case BinaryOp::Mul: return Code::Mul;
  case BinaryOp::Div: return Code::Div;
  case BinaryOp::FloorDiv: return Code::FloorDiv;
  case BinaryOp::Mod: return Code::Mod;
  case BinaryOp::Pow: return Code::Pow;
  case BinaryOp::Eq: return Code::Eq;
  case BinaryOp::Ne: return Code::Ne;
  case BinaryOp::Lt: return Code::Lt;
  case BinaryOp::Le: return Code::Le;
  case BinaryOp::Gt: return Code::Gt;
  case BinaryOp::Ge: return Code::Ge;
  case BinaryOp::And: return Code::And;
  case BinaryOp::Or: return Code::Or;
  }
  return Code::Add;
}

Code functionCode(Function f) {
  switch (f) {
  case Function::Exp: return Code::Exp;
  case Function::Log: return Code::Log;
  case Function::Sqrt: return Code::Sqrt;
  case Function::Tanh: return Code::Tanh;
  case Function::Abs: return Code::Abs;
  case Function::Max: return Code::Max;
  case Function::Min: return Code::Min;
  case Function::Erf: return Code::Erf;
  case Function::Sigmoid: return Code::Sigmoid;
  case Function::Floor: return Code::Floor;
  case Function::Ceil: return Code::Ceil;
  case Function::Select: return Code::Select;
  case Function::Uniform: return Code::Uniform;
  }
  return Code::Exp;
}

/// Deepest Reduce nesting the compiler follows (recursion guard).
constexpr int kMaxDepth = 2048;

/// A compiled program plus its evaluation state.
class Evaluator {
public:
  Evaluator(const ExprProgram &p, const std::vector<TensorView> &inputs,
            const TensorView &output, const ReductionRanges &ranges,
            uint64_t randomStep)
      : p(p), views(inputs), output(output), ranges(ranges),
        randomStep(randomStep) {}

  /// Compiles the program, then writes output elements [begin, end) (flat
  /// indices into the output's local box).
  std::string run(int64_t begin, int64_t end);

private:
  struct Placed {
    int32_t reg;
    int32_t level; ///< -1: constant (block 0); 0: per element; >0: loops
  };
  struct Memo {
    int32_t level = -2; ///< -2: not placed
    int32_t scope = 0;
    int32_t reg = 0;
  };

  std::string compile();
  std::string place(int32_t id, Placed &out, int depth);
  int32_t blockOfLevel(int32_t level) const { return levelBlocks[level + 1]; }

  void runBlock(int32_t block);
  void runLoop(Loop &loop);
  double access(const Access &acc);
  std::string accessError() const;

  const ExprProgram &p;
  const std::vector<TensorView> &views;
  const TensorView &output;
  const ReductionRanges &ranges;
  const uint64_t randomStep;

  std::vector<Input> inputs;
  std::vector<double> regs;
  std::vector<std::vector<Op>> blocks; ///< 0: constants, 1: per element
  std::vector<Access> accesses;
  std::vector<int32_t> indexRegs;
  std::vector<Loop> loops;
  int32_t rootReg = -1;

  // Compilation state.
  std::vector<int32_t> levelBlocks;  ///< block of level L at [L + 1]
  std::vector<int32_t> levelScopes;  ///< scope id of level L at [L + 1]
  int32_t nextScope = 0;
  std::vector<int32_t> varLevel;     ///< level binding each variable
  /// Per node, the variables it reads that it does not bind itself.
  std::vector<std::vector<int32_t>> freeVars;
  std::vector<Memo> memo;
  std::vector<std::pair<int64_t, int64_t>> varRange;

  // First failed access (evaluation stops at the end of the element).
  bool failed = false;
  int32_t failedAccess = -1;
  std::vector<int64_t> failedIndex;
};

int32_t varRegister(const ExprProgram &p, int32_t v) {
  return static_cast<int32_t>(p.nodes.size()) + v;
}

std::string Evaluator::place(int32_t id, Placed &out, int depth) {
  if (depth > kMaxDepth)
    return "the program nests deeper than " + std::to_string(kMaxDepth) +
           " levels";
  const ExprNode &n = p.nodes[id];
  if (n.kind == ExprNode::Kind::Var) {
    out = {varRegister(p, n.var), varLevel[n.var]};
    return "";
  }
  Memo &m = memo[id];
  int32_t current = static_cast<int32_t>(levelBlocks.size()) - 2;
  if (m.level != -2 && m.level <= current &&
      levelScopes[m.level + 1] == m.scope) {
    out = {m.reg, m.level};
    return "";
  }
  int32_t level = -1;
  Op op{Code::Add, id, id, id, id, -1};
  switch (n.kind) {
  case ExprNode::Kind::Const:
    regs[id] = n.value;
    break;
  case ExprNode::Kind::Reduce: {
    // The loop runs in the outermost block where every variable its body
    // reads from outside is bound (block 0 when there is none), not in each
    // iteration of the loops around it; its body is a new level.
    level = -1;
    for (int32_t v : freeVars[id])
      level = std::max(level, varLevel[v]);
    int32_t body = static_cast<int32_t>(blocks.size());
    blocks.emplace_back();
    levelBlocks.push_back(body);
    levelScopes.push_back(++nextScope);
    Loop loop;
    loop.node = id;
    loop.reducer = n.reducer;
    loop.body = body;
    for (int32_t v : n.vars) {
      varLevel[v] = current + 1;
      loop.varRegs.push_back(varRegister(p, v));
      loop.lo.push_back(varRange[v].first);
      loop.hi.push_back(varRange[v].second);
    }
    loop.cur = loop.lo;
    Placed value;
    std::string err = place(n.operands[0], value, depth + 1);
    levelBlocks.pop_back();
    levelScopes.pop_back();
    for (int32_t v : n.vars)
      varLevel[v] = -2;
    if (!err.empty())
      return err;
    loop.valueReg = value.reg;
    op.code = Code::Loop;
    op.aux = static_cast<int32_t>(loops.size());
    loops.push_back(std::move(loop));
    blocks[blockOfLevel(level)].push_back(op);
    break;
  }
  default: {
    int32_t operandRegs[3] = {id, id, id};
    std::vector<int32_t> indices; // Access only (not per element)
    for (size_t k = 0; k < n.operands.size(); ++k) {
      Placed o;
      if (std::string err = place(n.operands[k], o, depth + 1); !err.empty())
        return err;
      level = std::max(level, o.level);
      if (n.kind == ExprNode::Kind::Access)
        indices.push_back(o.reg);
      else
        operandRegs[k] = o.reg;
    }
    op.a = operandRegs[0];
    op.b = operandRegs[1];
    op.c = operandRegs[2];
    if (n.kind == ExprNode::Kind::Access) {
      op.code = Code::Access;
      op.aux = static_cast<int32_t>(accesses.size());
      accesses.push_back({id, n.input, indexRegs.size(), indices.size()});
      indexRegs.insert(indexRegs.end(), indices.begin(), indices.end());
    } else if (n.kind == ExprNode::Kind::Neg) {
      op.code = Code::Neg;
    } else if (n.kind == ExprNode::Kind::Binary) {
      op.code = binaryCode(n.binary);
    } else {
      op.code = functionCode(n.function);
    }
    blocks[blockOfLevel(level)].push_back(op);
    break;
  }
  }
  m.level = level;
  m.scope = levelScopes[level + 1];
  m.reg = id;
  out = {id, level};
  return "";
}

std::string Evaluator::compile() {
  std::vector<int64_t> ranks;
  for (const TensorView &v : views)
    ranks.push_back(v.present() ? static_cast<int64_t>(v.globalShape.size())
                                : -1);
  if (std::string err = verifyExprProgram(p, ranks, output.shape.size());
      !err.empty())
    return "invalid program: " + err;
  if (std::string err = verifyReductionRanges(p, ranges); !err.empty())
    return "invalid reduction ranges: " + err;
  for (size_t d = 0; d < p.outputVars.size(); ++d)
    if (p.varExtents[p.outputVars[d]] != output.globalShape[d])
      return "output dimension " + std::to_string(d) + " has global extent " +
             std::to_string(output.globalShape[d]) +
             " but the program's variable has extent " +
             std::to_string(p.varExtents[p.outputVars[d]]);

  for (const TensorView &v : views) {
    Input in;
    in.data = static_cast<const uint8_t *>(v.data);
    in.dtype = v.dtype;
    in.lo = v.lo;
    in.shape = v.shape;
    in.global = v.globalShape;
    in.strides.assign(v.shape.size(), 1);
    for (size_t d = v.shape.size(); d-- > 1;)
      in.strides[d - 1] = in.strides[d] * v.shape[d];
    inputs.push_back(std::move(in));
  }

  const size_t nv = p.varExtents.size();
  varRange.resize(nv);
  for (size_t v = 0; v < nv; ++v)
    varRange[v] = {0, p.varExtents[v]};
  for (size_t r = 0; r < ranges.size(); ++r)
    varRange[p.topReductionVars[r]] = ranges[r];
  varLevel.assign(nv, -2);
  for (int32_t v : p.outputVars)
    varLevel[v] = 0;
  freeVars = freeVariablesOfNodes(p);

  regs.assign(p.nodes.size() + nv, 0.0);
  memo.assign(p.nodes.size(), Memo());
  blocks.assign(2, {});
  levelBlocks = {0, 1};
  levelScopes = {0, 0};
  Placed root;
  if (std::string err = place(p.root, root, 0); !err.empty())
    return err;
  rootReg = root.reg;
  return "";
}

double Evaluator::access(const Access &acc) {
  const Input &in = inputs[acc.input];
  if (!in.data)
    return 0;
  int64_t offset = 0;
  bool outside = false;
  const int32_t *idx = indexRegs.data() + acc.firstIndex;
  for (size_t d = 0; d < acc.rank; ++d) {
    double x = std::floor(regs[idx[d]]);
    if (!(x >= 0 && x < static_cast<double>(in.global[d])))
      return 0; // padding (NaN included)
    int64_t local = static_cast<int64_t>(x) - in.lo[d];
    if (local < 0 || local >= in.shape[d])
      outside = true;
    offset += local * in.strides[d];
  }
  if (outside) {
    if (!failed) {
      failed = true;
      failedAccess = static_cast<int32_t>(&acc - accesses.data());
      failedIndex.clear();
      for (size_t d = 0; d < acc.rank; ++d)
        failedIndex.push_back(static_cast<int64_t>(std::floor(regs[idx[d]])));
    }
    return 0;
  }
  return loadElement(in.data, in.dtype, offset);
}

std::string Evaluator::accessError() const {
  const Access &acc = accesses[failedAccess];
  const Input &in = inputs[acc.input];
  auto list = [](const std::vector<int64_t> &v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i)
      s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  std::vector<int64_t> hi = in.lo;
  for (size_t d = 0; d < hi.size(); ++d)
    hi[d] += in.shape[d];
  return "node " + std::to_string(acc.node) + " reads input " +
         std::to_string(acc.input) + " at global index " + list(failedIndex) +
         ", inside the tensor (shape " + list(in.global) +
         ") but outside the local buffer [" + list(in.lo) + ", " + list(hi) +
         "): the plan gives this device too little of the input";
}

void Evaluator::runLoop(Loop &loop) {
  double acc = 0;
  switch (loop.reducer) {
  case Reducer::Sum: acc = 0; break;
  case Reducer::Prod: acc = 1; break;
  case Reducer::Max: acc = -std::numeric_limits<double>::infinity(); break;
  case Reducer::Min: acc = std::numeric_limits<double>::infinity(); break;
  }
  const size_t k = loop.varRegs.size();
  bool empty = false;
  for (size_t j = 0; j < k; ++j) {
    empty |= loop.lo[j] >= loop.hi[j];
    loop.cur[j] = loop.lo[j];
    regs[loop.varRegs[j]] = static_cast<double>(loop.lo[j]);
  }
  if (!empty) {
    const double &value = regs[loop.valueReg];
    const int32_t body = loop.body;
    const Reducer reducer = loop.reducer;
    while (true) {
      runBlock(body);
      switch (reducer) {
      case Reducer::Sum: acc += value; break;
      case Reducer::Prod: acc *= value; break;
      case Reducer::Max: acc = std::max(acc, value); break;
      case Reducer::Min: acc = std::min(acc, value); break;
      }
      size_t j = k;
      while (j-- > 0) {
        if (++loop.cur[j] < loop.hi[j]) {
          regs[loop.varRegs[j]] = static_cast<double>(loop.cur[j]);
          break;
        }
        loop.cur[j] = loop.lo[j];
        regs[loop.varRegs[j]] = static_cast<double>(loop.lo[j]);
      }
      if (j == static_cast<size_t>(-1))
        break;
    }
  }
  regs[loop.node] = acc;
}

void Evaluator::runBlock(int32_t block) {
  double *r = regs.data();
  for (const Op &op : blocks[block]) {
    double a = r[op.a], b = r[op.b];
    double &y = r[op.dst];
    switch (op.code) {
    case Code::Access: y = access(accesses[op.aux]); break;
    case Code::Neg: y = -a; break;
    case Code::Add: y = a + b; break;
    case Code::Sub: y = a - b; break;
    case Code::Mul: y = a * b; break;
    case Code::Div: y = a / b; break;
    case Code::FloorDiv: y = std::floor(a / b); break;
    case Code::Mod: y = a - b * std::floor(a / b); break;
    case Code::Pow: y = std::pow(a, b); break;
    case Code::Eq: y = a == b; break;
    case Code::Ne: y = a != b; break;
    case Code::Lt: y = a < b; break;
    case Code::Le: y = a <= b; break;
    case Code::Gt: y = a > b; break;
    case Code::Ge: y = a >= b; break;
    case Code::And: y = a != 0 && b != 0; break;
    case Code::Or: y = a != 0 || b != 0; break;
    case Code::Exp: y = std::exp(a); break;
    case Code::Log: y = std::log(a); break;
    case Code::Sqrt: y = std::sqrt(a); break;
    case Code::Tanh: y = std::tanh(a); break;
    case Code::Abs: y = std::fabs(a); break;
    case Code::Max: y = std::max(a, b); break;
    case Code::Min: y = std::min(a, b); break;
    case Code::Erf: y = std::erf(a); break;
    case Code::Sigmoid: y = 1 / (1 + std::exp(-a)); break;
    case Code::Floor: y = std::floor(a); break;
    case Code::Ceil: y = std::ceil(a); break;
    case Code::Select: y = a != 0 ? b : r[op.c]; break;
    case Code::Uniform: y = tofu::rng::counterUniform(a, b, randomStep); break;
    case Code::Loop: runLoop(loops[op.aux]); break;
    }
  }
}

std::string Evaluator::run(int64_t begin, int64_t end) {
  if (std::string err = compile(); !err.empty())
    return err;
  if (begin >= end)
    return "";
  runBlock(0);
  if (failed)
    return accessError();
  const size_t rank = p.outputVars.size();
  // The global coordinates of element `begin` of the output's local box.
  std::vector<int64_t> idx(rank);
  for (size_t d = rank, rest = static_cast<size_t>(begin); d-- > 0;) {
    idx[d] = output.lo[d] + static_cast<int64_t>(rest) % output.shape[d];
    rest /= static_cast<size_t>(output.shape[d]);
  }
  std::vector<int32_t> outRegs;
  for (int32_t v : p.outputVars)
    outRegs.push_back(varRegister(p, v));
  for (size_t d = 0; d < rank; ++d)
    regs[outRegs[d]] = static_cast<double>(idx[d]);
  for (int64_t e = begin; e < end; ++e) {
    runBlock(1);
    if (failed)
      return accessError();
    storeElement(output.data, output.dtype, e, regs[rootReg]);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < output.lo[d] + output.shape[d]) {
        regs[outRegs[d]] = static_cast<double>(idx[d]);
        break;
      }
      idx[d] = output.lo[d];
      regs[outRegs[d]] = static_cast<double>(idx[d]);
    }
  }
  return "";
}

/// Rough cost of one output element: nodes plus the iterations of every
/// reduction (nested reductions multiply).
double elementCost(const ExprProgram &p) {
  double cost = static_cast<double>(p.nodes.size());
  for (const ExprNode &n : p.nodes)
    if (n.kind == ExprNode::Kind::Reduce) {
      double iterations = 1;
      for (int32_t v : n.vars)
        if (v >= 0 && static_cast<size_t>(v) < p.varExtents.size())
          iterations *= static_cast<double>(p.varExtents[v]);
      cost += iterations;
    }
  return cost;
}

} // namespace

std::string tofu::runtime::evaluateProgram(const ExprProgram &program,
                                           const std::vector<TensorView> &inputs,
                                           const TensorView &output,
                                           const ReductionRanges &ranges,
                                           uint64_t randomStep) {
  const int64_t n = output.numElements();
  // Threads for large outputs: each compiles its own evaluator (registers,
  // loop state) and writes a disjoint range of elements.
  unsigned threads = parallelThreads();
  const double work = elementCost(program) * static_cast<double>(n);
  if (work < 1e6 || n < 2 * static_cast<int64_t>(threads))
    threads = 1;
  if (threads == 1)
    return Evaluator(program, inputs, output, ranges, randomStep).run(0, n);
  std::vector<std::string> errors(threads);
  runOnPool(threads, [&](unsigned t) {
    int64_t begin = n * t / threads, end = n * (t + 1) / threads;
    errors[t] =
        Evaluator(program, inputs, output, ranges, randomStep).run(begin, end);
  });
  for (const std::string &err : errors)
    if (!err.empty())
      return err;
  return "";
}
