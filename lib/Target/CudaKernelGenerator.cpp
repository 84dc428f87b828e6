//===- CudaKernelGenerator.cpp - CUDA kernels from TDL programs -----------===//
//
// Code generation mirrors the CPU expression interpreter
// (runtime/lib/ExprInterpreter.cpp) so that both give the same values:
// every node is a `double` local, placed in the outermost scope where the
// index variables it reads are bound (loop-invariant reads are hoisted out
// of reductions, inner reductions included); each Reduce node becomes a loop
// nest over its variables (last variable fastest) accumulating in the
// interpreter's order.
//
//===----------------------------------------------------------------------===//
#include "tofu/Target/CudaKernelGenerator.h"

#include "tofu/runtime/ExprFreeVariables.h"
#include "tofu/runtime/ExprProgramCheck.h"
#include "tofu/runtime/SharedPrograms.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

using namespace tofu;
using namespace tofu::cudagen;
using plan::DType;
using plan::ExprNode;
using plan::ExprProgram;

namespace {

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Whether `t` names one of the plan's element types (every one of them has
/// a load and a store in the prelude); emitKernel refuses other numbers.
bool generatorHandles(DType t) {
  return static_cast<uint8_t>(t) < plan::kNumDTypes;
}

/// The prelude's template argument for `t`: its DType number.
std::string dtypeCode(DType t) {
  return std::to_string(static_cast<int>(t));
}

const char *dtypeName(DType t) {
  static const char *names[] = {"f32", "i64", "bool", "f64", "i32",
                                "i16", "i8",  "u8",   "u16", "u32",
                                "u64", "f16", "bf16"};
  return generatorHandles(t) ? names[static_cast<int>(t)] : "?";
}

/// An exact C++ literal for `v` (hexadecimal for finite values).
std::string doubleLiteral(double v) {
  if (std::isfinite(v)) {
    char buf[64];
    if (v == std::floor(v) && std::fabs(v) < 1e15)
      std::snprintf(buf, sizeof(buf), "%.1f", v);
    else
      std::snprintf(buf, sizeof(buf), "%a", v);
    return v < 0 || std::signbit(v) ? "(" + std::string(buf) + ")" : buf;
  }
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "tofu_from_bits(0x%016llxull)",
                static_cast<unsigned long long>(bits));
  return buf;
}

bool isIdentityAccess(const ExprProgram &p, const ExprNode &n) {
  if (n.operands.size() != p.outputVars.size())
    return false;
  for (size_t d = 0; d < n.operands.size(); ++d) {
    const ExprNode &index = p.nodes[n.operands[d]];
    if (index.kind != ExprNode::Kind::Var || index.var != p.outputVars[d])
      return false;
  }
  return true;
}

/// Emits the statements computing one stage's value for one element.
class StageEmitter {
public:
  /// `parallelRoot`: the program's root is a Reduce (blockReductionRoot)
  /// whose iterations are shared by the threads of a block: thread
  /// `tofu_t` of `tofu_nt` runs iterations tofu_t, tofu_t + tofu_nt, ... of
  /// its flattened loop nest and the statements leave that thread's partial
  /// value in the root's variable, for the block's tree combination.
  ///
  /// `rowDims` (rowReductionDims): the statements of one row of a row
  /// variant. The row's output variables (true) are bound in `out`, which
  /// every thread of the block runs alike; each Reduce placed there is
  /// computed by the whole block (a strided share per thread, then
  /// tofu_block_combine), so its value is in every thread. The other output
  /// variables are bound in elementBody(), the body of the loop over the
  /// row's elements, with what depends on them.
  StageEmitter(const KernelDescription &kernel, const ParamLayout &layout,
               size_t stage, std::string &out, bool parallelRoot = false,
               const std::vector<bool> *rowDims = nullptr)
      : kernel(kernel), layout(layout), stage(stage),
        p(*kernel.stages[stage].program), out(out),
        parallelRoot(parallelRoot), rowDims(rowDims) {}

  /// Appends the stage's statements; returns the expression of its value.
  llvm::Expected<std::string> emit();

  /// With `rowDims`: the statements of one element of the row.
  const std::string &elementBody() const { return element; }

private:
  struct Placed {
    std::string expr;
    int32_t level; ///< -1: constant; 0: per element; >0: loop bodies
  };
  struct Memo {
    int32_t level = -2;
    int32_t scope = 0;
    std::string expr;
  };

  llvm::Error place(int32_t id, Placed &result, int depth);
  std::string prefix() const { return "s" + std::to_string(stage) + "_"; }
  std::string varName(int32_t v) const {
    return prefix() + "v" + std::to_string(v);
  }
  std::string nodeName(int32_t id) const {
    return prefix() + "n" + std::to_string(id);
  }
  std::string indent(int32_t level) const {
    return std::string(2 * (level + 1), ' ');
  }

  const KernelDescription &kernel;
  const ParamLayout &layout;
  size_t stage;
  const ExprProgram &p;
  std::string &out;
  const bool parallelRoot;
  const std::vector<bool> *rowDims;
  std::string element;

  /// Text of each open level's block (level L at [L]); level 0 is `out`.
  std::vector<std::string> blocks;
  std::vector<int32_t> scopes;
  int32_t nextScope = 0;
  std::vector<int32_t> varLevel;
  /// Per node, the variables it reads that it does not bind itself.
  std::vector<std::vector<int32_t>> freeVars;
  std::vector<Memo> memo;
};

llvm::Error StageEmitter::place(int32_t id, Placed &result, int depth) {
  if (depth > 2048)
    return fail("the program nests deeper than 2048 levels");
  const ExprNode &n = p.nodes[id];
  if (n.kind == ExprNode::Kind::Var) {
    result = {"(double)" + varName(n.var), varLevel[n.var]};
    return llvm::Error::success();
  }
  if (n.kind == ExprNode::Kind::Const) {
    result = {doubleLiteral(n.value), -1};
    return llvm::Error::success();
  }
  Memo &m = memo[id];
  int32_t current = static_cast<int32_t>(blocks.size()) - 1;
  if (m.level != -2 && m.level <= current &&
      scopes[std::max(m.level, 0)] == m.scope) {
    result = {m.expr, m.level};
    return llvm::Error::success();
  }
  const std::string name = nodeName(id);
  int32_t level = -1;
  if (n.kind == ExprNode::Kind::Reduce) {
    // As in the interpreter: the loop goes where every variable its body
    // reads from outside is bound, not into each enclosing iteration.
    level = 0;
    for (int32_t v : freeVars[id])
      level = std::max(level, varLevel[v]);
    int32_t body = current + 1;
    blocks.emplace_back();
    scopes.push_back(++nextScope);
    std::string loops, closes;
    // Shared by the block's threads: the root of a block variant, or any
    // reduction of a row variant that is the same for the whole row.
    const bool rowShared = rowDims && level == 0;
    const bool shared =
        (parallelRoot && id == p.root && level == 0) || rowShared;
    std::vector<std::pair<std::string, std::string>> bounds;
    for (size_t j = 0; j < n.vars.size(); ++j) {
      int32_t v = n.vars[j];
      varLevel[v] = body;
      std::string lo = "0", hi = std::to_string(p.varExtents[v]);
      for (size_t r = 0; r < p.topReductionVars.size(); ++r)
        if (p.topReductionVars[r] == v) {
          int64_t at = layout.stageRanges[stage] + 2 * static_cast<int64_t>(r);
          lo = "params[" + std::to_string(at) + "]";
          hi = "params[" + std::to_string(at + 1) + "]";
        }
      bounds.emplace_back(lo, hi);
      if (shared)
        continue;
      loops += indent(level + static_cast<int32_t>(j)) + "for (int64_t " +
               varName(v) + " = " + lo + "; " + varName(v) + " < " + hi +
               "; ++" + varName(v) + ") {\n";
      closes = indent(level + static_cast<int32_t>(j)) + "}\n" + closes;
    }
    if (shared) {
      // One flat loop over the nest, strided by the block's threads; the
      // last variable varies fastest, as in the nest.
      std::string total = name + "_total", it = name + "_it",
                  rest = name + "_rest";
      loops += indent(0) + "int64_t " + total + " = 1;\n";
      for (size_t j = 0; j < n.vars.size(); ++j) {
        std::string extent = name + "_n" + std::to_string(j);
        loops += indent(0) + "const int64_t " + extent + " = " +
                 bounds[j].second + " - " + bounds[j].first + ";\n" +
                 indent(0) + total + " *= " + extent + " > 0 ? " + extent +
                 " : 0;\n";
      }
      if (rowShared)
        loops += indent(0) + "for (int64_t tofu_t = TOFU_LANE_FIRST; "
                             "tofu_t < TOFU_LANE_END; ++tofu_t) {\n" +
                 indent(0) + "double " + name + "_p = @INIT@;\n";
      loops += indent(0) + "for (int64_t " + it + " = tofu_t; " + it + " < " +
               total + "; " + it + " += " +
               (rowShared ? "NT" : "tofu_nt") + ") {\n" +
               indent(1) + "int64_t " + rest + " = " + it + ";\n";
      for (size_t j = n.vars.size(); j-- > 0;) {
        std::string extent = name + "_n" + std::to_string(j);
        // The first variable needs no remainder: what is left is < extent.
        loops += indent(1) + "const int64_t " + varName(n.vars[j]) + " = " +
                 bounds[j].first + " + " + rest +
                 (j > 0 ? " % " + extent : std::string()) + ";\n";
        if (j > 0)
          loops += indent(1) + rest + " /= " + extent + ";\n";
      }
      loops += indent(1) + "(void)" + rest + ";\n";
      closes = indent(0) + "}\n";
      if (rowShared)
        closes += indent(0) + "tofu_partials[tofu_t] = " + name + "_p;\n" +
                  indent(0) + "}\n" + indent(0) + name +
                  " = tofu_group_combine<NT, @REDUCER@>(tofu_partials, "
                  "tofu_lane);\n";
    }
    Placed value;
    llvm::Error err = place(n.operands[0], value, depth + 1);
    std::string bodyText = std::move(blocks.back());
    blocks.pop_back();
    scopes.pop_back();
    for (int32_t v : n.vars)
      varLevel[v] = -2;
    if (err)
      return err;
    std::string init, update;
    // A row-shared reduction accumulates each thread's share in `_p`.
    const std::string acc = rowShared ? name + "_p" : name;
    switch (n.reducer) {
    case plan::Reducer::Sum:
      init = "0.0";
      update = acc + " += " + value.expr;
      break;
    case plan::Reducer::Prod:
      init = "1.0";
      update = acc + " *= " + value.expr;
      break;
    case plan::Reducer::Max:
      init = "-tofu_from_bits(0x7ff0000000000000ull)";
      update = acc + " = tofu_max(" + acc + ", " + value.expr + ")";
      break;
    case plan::Reducer::Min:
      init = "tofu_from_bits(0x7ff0000000000000ull)";
      update = acc + " = tofu_min(" + acc + ", " + value.expr + ")";
      break;
    }
    if (rowShared) {
      loops.replace(loops.find("@INIT@"), 6, init);
      closes.replace(closes.find("@REDUCER@"), 9,
                     std::to_string(static_cast<int>(n.reducer)));
    }
    std::string &dst = level == 0 ? out : blocks[level];
    dst += indent(level) + "double " + name + " = " + init + ";\n";
    dst += loops + bodyText +
           indent(level + static_cast<int32_t>(n.vars.size())) + update +
           ";\n" + closes;
  } else {
    std::vector<std::string> operands;
    for (int32_t operand : n.operands) {
      Placed o;
      if (llvm::Error err = place(operand, o, depth + 1))
        return err;
      level = std::max(level, o.level);
      operands.push_back(o.expr);
    }
    std::string value;
    switch (n.kind) {
    case ExprNode::Kind::Access: {
      const StageInput &in = kernel.stages[stage].inputs[n.input];
      if (in.stage >= 0) {
        if (!isIdentityAccess(p, n))
          return fail("stage " + llvm::Twine(stage) + " (" +
                      kernel.stages[stage].op + ") reads input " +
                      llvm::Twine(n.input) +
                      ", the output of stage " + llvm::Twine(in.stage) +
                      ", at other indices than its own element; such a "
                      "chain cannot be fused");
        value = "s" + std::to_string(in.stage) + "_value";
        break;
      }
      const KernelOperand &operand = kernel.operands[in.operand];
      if (!operand.present) {
        value = "0.0";
        break;
      }
      size_t rank = operand.globalShape.size();
      std::string idx = "nullptr", global = "nullptr";
      if (rank > 0) {
        std::string idxName = name + "_idx", globalName = name + "_global";
        std::string &dst = level <= 0 ? out : blocks[level];
        int32_t at = std::max(level, 0);
        dst += indent(at) + "const double " + idxName + "[] = {" +
               llvm::join(operands, ", ") + "};\n";
        std::vector<std::string> dims;
        for (int64_t d : operand.globalShape)
          dims.push_back(std::to_string(d));
        dst += indent(at) + "const int64_t " + globalName + "[] = {" +
               llvm::join(dims, ", ") + "};\n";
        idx = idxName;
        global = globalName;
      }
      value = "tofu_access<" + dtypeCode(operand.dtype) + ", " +
              std::to_string(rank) + ">(ptrs[" +
              std::to_string(layout.numPointers -
                             static_cast<int64_t>(kernel.operands.size()) +
                             in.operand) +
              "], " + idx + ", " + global + ", params + " +
              std::to_string(layout.operandLo[in.operand]) + ", params + " +
              std::to_string(layout.operandShape[in.operand]) + ", " +
              std::to_string(id) + ", " + std::to_string(n.input) +
              ", error)";
      break;
    }
    case ExprNode::Kind::Neg:
      value = "-(" + operands[0] + ")";
      break;
    case ExprNode::Kind::Binary: {
      const std::string &a = operands[0], &b = operands[1];
      switch (n.binary) {
      case plan::BinaryOp::Add: value = a + " + " + b; break;
      case plan::BinaryOp::Sub: value = a + " - " + b; break;
      case plan::BinaryOp::Mul: value = a + " * " + b; break;
      case plan::BinaryOp::Div: value = a + " / " + b; break;
      case plan::BinaryOp::FloorDiv:
        value = "tofu_floordiv(" + a + ", " + b + ")";
        break;
      case plan::BinaryOp::Mod: value = "tofu_mod(" + a + ", " + b + ")"; break;
      case plan::BinaryOp::Pow: value = "pow(" + a + ", " + b + ")"; break;
      case plan::BinaryOp::Eq: value = "(" + a + " == " + b + ") ? 1.0 : 0.0"; break;
      case plan::BinaryOp::Ne: value = "(" + a + " != " + b + ") ? 1.0 : 0.0"; break;
      case plan::BinaryOp::Lt: value = "(" + a + " < " + b + ") ? 1.0 : 0.0"; break;
      case plan::BinaryOp::Le: value = "(" + a + " <= " + b + ") ? 1.0 : 0.0"; break;
      case plan::BinaryOp::Gt: value = "(" + a + " > " + b + ") ? 1.0 : 0.0"; break;
      case plan::BinaryOp::Ge: value = "(" + a + " >= " + b + ") ? 1.0 : 0.0"; break;
      case plan::BinaryOp::And:
        value = "(" + a + " != 0.0 && " + b + " != 0.0) ? 1.0 : 0.0";
        break;
      case plan::BinaryOp::Or:
        value = "(" + a + " != 0.0 || " + b + " != 0.0) ? 1.0 : 0.0";
        break;
      }
      break;
    }
    case ExprNode::Kind::Call: {
      auto call = [&](const char *fn) {
        return std::string(fn) + "(" + llvm::join(operands, ", ") + ")";
      };
      switch (n.function) {
      case plan::Function::Exp: value = call("exp"); break;
      case plan::Function::Log: value = call("log"); break;
      case plan::Function::Sqrt: value = call("sqrt"); break;
      case plan::Function::Tanh: value = call("tanh"); break;
      case plan::Function::Abs: value = call("fabs"); break;
      case plan::Function::Max: value = call("tofu_max"); break;
      case plan::Function::Min: value = call("tofu_min"); break;
      case plan::Function::Erf: value = call("erf"); break;
      case plan::Function::Sigmoid: value = call("tofu_sigmoid"); break;
      case plan::Function::Floor: value = call("floor"); break;
      case plan::Function::Ceil: value = call("ceil"); break;
      case plan::Function::Select:
        value = "(" + operands[0] + " != 0.0) ? " + operands[1] + " : " +
                operands[2];
        break;
      case plan::Function::Uniform:
        value = "tofu_uniform(" + operands[0] + ", " + operands[1] + ", step)";
        break;
      }
      break;
    }
    default:
      return fail("unexpected node kind");
    }
    int32_t at = std::max(level, 0);
    std::string &dst = at == 0 ? out : blocks[at];
    dst += indent(at) + "const double " + name + " = " + value + ";\n";
  }
  m.level = level;
  m.scope = scopes[std::max(level, 0)];
  m.expr = name;
  result = {name, level};
  return llvm::Error::success();
}

llvm::Expected<std::string> StageEmitter::emit() {
  varLevel.assign(p.varExtents.size(), -2);
  // A row variant's element loop is level 1, as if it were a loop.
  blocks.assign(rowDims ? 2 : 1, "");
  scopes.assign(1, 0);
  if (rowDims)
    scopes.push_back(++nextScope);
  for (size_t d = 0; d < p.outputVars.size(); ++d) {
    const bool inElement = rowDims && !(*rowDims)[d];
    varLevel[p.outputVars[d]] = inElement ? 1 : 0;
    (inElement ? blocks[1] : out) += "  const int64_t " +
                                     varName(p.outputVars[d]) + " = o" +
                                     std::to_string(d) + ";\n";
  }
  memo.assign(p.nodes.size(), Memo());
  freeVars = freeVariablesOfNodes(p);
  Placed root;
  if (llvm::Error err = place(p.root, root, 0))
    return std::move(err);
  if (rowDims)
    element = blocks[1];
  return root.expr;
}

const char *kPrelude = R"cuda(// Generated by tofuc (lib/Target/CudaKernelGenerator.cpp). Compiles with
// nvcc (device kernels) and as plain C++17 (host drivers <name>_host).
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define TOFU_HD __host__ __device__
#else
#define TOFU_HD
#endif
// Threads of a block-reduction or row-reduction kernel's block (a power of
// two, at least 64).
#define TOFU_BLOCK_THREADS 256
// The threads a statement of a row variant's row runs for, inside
// `<name>_row_body<NT>` (NT threads a row: TOFU_BLOCK_THREADS for `_row`,
// a block per row; 32 for `_rowwarp`, a warp per row): on the device the
// calling thread (its lane `tofu_lane` in the row's group), on the host
// (which runs the group's threads one after another, phase by phase)
// every thread of the group.
#ifdef __CUDA_ARCH__
#define TOFU_LANE_FIRST ((int64_t)tofu_lane)
#define TOFU_LANE_END ((int64_t)tofu_lane + 1)
#define TOFU_LANE_STEP ((int64_t)NT)
#else
#define TOFU_LANE_FIRST ((int64_t)0)
#define TOFU_LANE_END ((int64_t)NT)
#define TOFU_LANE_STEP ((int64_t)1)
#endif
// Threads of a row variant's group when a warp computes a row (`_rowwarp`).
#define TOFU_WARP_THREADS 32

template <int N> struct TofuPointers { void *p[N]; };
template <int N> struct TofuParams { int64_t v[N]; };

TOFU_HD inline double tofu_from_bits(uint64_t bits) {
  double d;
  memcpy(&d, &bits, 8);
  return d;
}
// std::max / std::min semantics (a NaN second operand is skipped).
TOFU_HD inline double tofu_max(double a, double b) { return a < b ? b : a; }
TOFU_HD inline double tofu_min(double a, double b) { return b < a ? b : a; }
TOFU_HD inline double tofu_floordiv(double a, double b) { return floor(a / b); }
TOFU_HD inline double tofu_mod(double a, double b) {
  return a - b * floor(a / b);
}
TOFU_HD inline double tofu_sigmoid(double a) { return 1 / (1 + exp(-a)); }

// Combines two partial values of a reduction (R: plan::Reducer, 0 sum,
// 1 max, 2 min, 3 prod).
template <int R> TOFU_HD inline double tofu_combine(double a, double b) {
  return R == 0 ? a + b : R == 1 ? tofu_max(a, b) : R == 2 ? tofu_min(a, b)
                                                          : a * b;
}
// The block's partial values partials[0, TOFU_BLOCK_THREADS) combined in a
// fixed tree order, partials[t] = combine(partials[t], partials[t + w]) for
// w = TOFU_BLOCK_THREADS / 2, ..., 1; returned to every thread. On the
// device each thread has written its own partials[t]; the last five levels
// run in warp 0 with shuffles, in the same order. Deterministic: the same
// inputs give the same bits on every run, on the host and on the device.
template <int R> TOFU_HD inline double tofu_block_combine(double *partials) {
#ifdef __CUDA_ARCH__
  const unsigned t = threadIdx.x;
  __syncthreads();
  for (unsigned w = TOFU_BLOCK_THREADS / 2; w >= 32; w >>= 1) {
    if (t < w)
      partials[t] = tofu_combine<R>(partials[t], partials[t + w]);
    __syncthreads();
  }
  if (t < 32) {
    double v = partials[t];
    for (unsigned w = 16; w > 0; w >>= 1)
      v = tofu_combine<R>(v, __shfl_down_sync(0xffffffffu, v, w));
    if (t == 0)
      partials[0] = v;
  }
  __syncthreads();
  const double result = partials[0];
  __syncthreads(); // partials is reused by the next reduction
  return result;
#else
  for (int w = TOFU_BLOCK_THREADS / 2; w > 0; w >>= 1)
    for (int t = 0; t < w; ++t)
      partials[t] = tofu_combine<R>(partials[t], partials[t + w]);
  return partials[0];
#endif
}

// The grid variant's tree (`<name>_grid`): partials[0, TOFU_BLOCK_THREADS)
// combined as tofu_block_combine does, partials[t] = combine(partials[t],
// partials[t + w]) for w = TOFU_BLOCK_THREADS / 2, ..., 1, but with the
// kernel's own combine function and block barriers only (the host runs the
// same pairs). Returns the value to every thread.
#define TOFU_GRID_PARTS 256
static_assert(TOFU_GRID_PARTS == TOFU_BLOCK_THREADS,
              "the last block combines one part per thread");
template <typename Combine>
TOFU_HD inline double tofu_grid_combine(double *partials, Combine combine) {
#ifdef __CUDA_ARCH__
  const unsigned t = threadIdx.x;
  __syncthreads();
  for (unsigned w = TOFU_BLOCK_THREADS / 2; w > 0; w >>= 1) {
    if (t < w)
      partials[t] = combine(partials[t], partials[t + w]);
    __syncthreads();
  }
  const double result = partials[0];
  __syncthreads(); // partials is reused
  return result;
#else
  for (int w = TOFU_BLOCK_THREADS / 2; w > 0; w >>= 1)
    for (int t = 0; t < w; ++t)
      partials[t] = combine(partials[t], partials[t + w]);
  return partials[0];
#endif
}

// The partial values partials[0, NT) of a row's group of NT threads
// combined in the tree order of tofu_block_combine (partials[t] =
// combine(partials[t], partials[t + w]) for w = NT / 2, ..., 1), returned
// to every thread of the group: NT = TOFU_BLOCK_THREADS is
// tofu_block_combine; NT = 32 (a warp per row) combines with shuffles
// within the warp, which wrote its own 32 slots (`tofu_lane` its thread's).
template <int NT, int R>
TOFU_HD inline double tofu_group_combine(double *partials, int64_t tofu_lane) {
  if constexpr (NT == TOFU_BLOCK_THREADS) {
    (void)tofu_lane;
    return tofu_block_combine<R>(partials);
  } else {
    static_assert(NT == TOFU_WARP_THREADS, "a row's group is a block or a warp");
#ifdef __CUDA_ARCH__
    __syncwarp();
    double v = partials[tofu_lane];
    for (unsigned w = NT / 2; w > 0; w >>= 1)
      v = tofu_combine<R>(v, __shfl_down_sync(0xffffffffu, v, w));
    v = __shfl_sync(0xffffffffu, v, 0);
    __syncwarp(); // partials is reused by the next reduction
    return v;
#else
    (void)tofu_lane;
    for (int w = NT / 2; w > 0; w >>= 1)
      for (int t = 0; t < w; ++t)
        partials[t] = tofu_combine<R>(partials[t], partials[t + w]);
    return partials[0];
#endif
  }
}
// tofu::rng::counterUniform (runtime/include/tofu/runtime/CounterRng.h).
TOFU_HD inline uint64_t tofu_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
TOFU_HD inline int64_t tofu_counter_operand(double x) {
  if (x != x)
    return 0;
  x = floor(x);
  if (x >= 9223372036854775807.0)
    return INT64_MAX;
  if (x <= -9223372036854775808.0)
    return INT64_MIN;
  return (int64_t)x;
}
TOFU_HD inline double tofu_uniform(double seed, double counter, uint64_t step) {
  uint64_t key = tofu_mix((uint64_t)tofu_counter_operand(seed)) +
                 step * 0xD1B54A32D192ED03ull;
  uint64_t n = (uint64_t)tofu_counter_operand(counter);
  uint64_t bits = tofu_mix(key + (n + 1) * 0x9E3779B97F4A7C15ull);
  return (double)(bits >> 11) * 0x1.0p-53;
}

// Element types: the plan's DType numbers (runtime/include/tofu/runtime/
// Plan.h): 0 f32, 1 i64, 2 bool (one byte), 3 f64, 4 i32, 5 i16, 6 i8, 7 u8,
// 8 u16, 9 u32, 10 u64, 11 f16, 12 bf16. Conversions are those of the CPU
// backend (runtime/include/tofu/runtime/ElementAccess.h), written once for
// host and device so that both round alike, bit for bit: f16 and bf16 are
// rounded from the double directly (one rounding, to nearest even) by
// integer code rather than by cuda_fp16.h's conversions, whose double
// paths are not specified to round once on every architecture.

// The IEEE 754 format with `expBits` exponent and `mantBits` stored mantissa
// bits nearest to `v` (ties to even), as bits: f16 (5, 10), bf16 (8, 7).
TOFU_HD inline uint32_t tofu_encode_small_float(double v, int expBits,
                                                int mantBits) {
  uint64_t bits;
  memcpy(&bits, &v, 8);
  const uint32_t sign = (uint32_t)(bits >> 63) << (expBits + mantBits);
  const uint64_t magnitude = bits & 0x7fffffffffffffffull;
  const uint32_t expMax = (1u << expBits) - 1;
  const uint32_t inf = sign | (expMax << mantBits);
  if (magnitude >= 0x7ff0000000000000ull)
    return magnitude == 0x7ff0000000000000ull ? inf
                                              : inf | (1u << (mantBits - 1));
  const int bias = (1 << (expBits - 1)) - 1;
  const int emin = 1 - bias;
  const int exp = (int)(magnitude >> 52) - 1023;
  const uint64_t significand =
      (magnitude & ((1ull << 52) - 1)) | (1ull << 52);
  const int shift = exp >= emin ? 52 - mantBits : 52 - mantBits + emin - exp;
  if (shift > 53 || exp == -1023)
    return sign;
  uint64_t q = significand >> shift;
  const uint64_t rest = significand & ((1ull << shift) - 1);
  const uint64_t half = 1ull << (shift - 1);
  if (rest > half || (rest == half && (q & 1)))
    ++q;
  if (exp < emin)
    return sign | (uint32_t)q;
  int e = exp + bias;
  if (q == (1ull << (mantBits + 1))) {
    q >>= 1;
    ++e;
  }
  if (e >= (int)expMax)
    return inf;
  return sign | ((uint32_t)e << mantBits) |
         (uint32_t)(q & ((1ull << mantBits) - 1));
}
// The value of bits `h` of that format (exact).
TOFU_HD inline double tofu_decode_small_float(uint32_t h, int expBits,
                                              int mantBits) {
  const uint32_t expMax = (1u << expBits) - 1;
  const int bias = (1 << (expBits - 1)) - 1;
  const bool negative = (h >> (expBits + mantBits)) & 1;
  const uint32_t e = (h >> mantBits) & expMax;
  const uint32_t m = h & ((1u << mantBits) - 1);
  double v;
  if (e == 0)
    v = ldexp((double)m, 1 - bias - mantBits);
  else if (e == expMax)
    v = m ? tofu_from_bits(0x7ff8000000000000ull)
          : tofu_from_bits(0x7ff0000000000000ull);
  else
    v = ldexp((double)(m | (1u << mantBits)), (int)e - bias - mantBits);
  return negative ? -v : v;
}
// `v` truncated toward zero as 64-bit two's-complement bits (NaN 0, beyond
// [-2^63, 2^64) saturated); narrower integer types keep the low bits.
TOFU_HD inline uint64_t tofu_truncate_bits(double v) {
  if (v != v)
    return 0;
  double t = trunc(v);
  if (t >= 0) {
    if (t >= 18446744073709551616.0)
      return ~0ull;
    return (uint64_t)t;
  }
  if (t <= -9223372036854775808.0)
    return 1ull << 63;
  return (uint64_t)(int64_t)t;
}

template <int DT> TOFU_HD inline double tofu_load(const void *p, int64_t i) {
  switch (DT) {
  case 0: return (double)((const float *)p)[i];
  case 1: return (double)((const int64_t *)p)[i];
  case 2: return ((const uint8_t *)p)[i] != 0 ? 1.0 : 0.0;
  case 3: return ((const double *)p)[i];
  case 4: return (double)((const int32_t *)p)[i];
  case 5: return (double)((const int16_t *)p)[i];
  case 6: return (double)((const int8_t *)p)[i];
  case 7: return (double)((const uint8_t *)p)[i];
  case 8: return (double)((const uint16_t *)p)[i];
  case 9: return (double)((const uint32_t *)p)[i];
  case 10: return (double)((const uint64_t *)p)[i];
  case 11: return tofu_decode_small_float(((const uint16_t *)p)[i], 5, 10);
  default: return tofu_decode_small_float(((const uint16_t *)p)[i], 8, 7);
  }
}
TOFU_HD inline int64_t tofu_to_i64(double v) {
  if (v != v)
    return 0;
  if (v >= 9223372036854775807.0)
    return INT64_MAX;
  if (v <= -9223372036854775808.0)
    return INT64_MIN;
  return (int64_t)v;
}
// Stores `v` converted to element type DT; returns the stored value.
template <int DT> TOFU_HD inline double tofu_store(void *p, int64_t i, double v) {
  switch (DT) {
  case 0: {
    float f = (float)v;
    ((float *)p)[i] = f;
    return (double)f;
  }
  case 1: {
    int64_t x = tofu_to_i64(v);
    ((int64_t *)p)[i] = x;
    return (double)x;
  }
  case 2:
    ((uint8_t *)p)[i] = v != 0 ? 1 : 0;
    return v != 0 ? 1.0 : 0.0;
  case 3:
    ((double *)p)[i] = v;
    return v;
  case 4: {
    int32_t x = (int32_t)(uint32_t)tofu_truncate_bits(v);
    ((int32_t *)p)[i] = x;
    return (double)x;
  }
  case 5: {
    int16_t x = (int16_t)(uint16_t)tofu_truncate_bits(v);
    ((int16_t *)p)[i] = x;
    return (double)x;
  }
  case 6: {
    int8_t x = (int8_t)(uint8_t)tofu_truncate_bits(v);
    ((int8_t *)p)[i] = x;
    return (double)x;
  }
  case 7: {
    uint8_t x = (uint8_t)tofu_truncate_bits(v);
    ((uint8_t *)p)[i] = x;
    return (double)x;
  }
  case 8: {
    uint16_t x = (uint16_t)tofu_truncate_bits(v);
    ((uint16_t *)p)[i] = x;
    return (double)x;
  }
  case 9: {
    uint32_t x = (uint32_t)tofu_truncate_bits(v);
    ((uint32_t *)p)[i] = x;
    return (double)x;
  }
  case 10: {
    uint64_t x = tofu_truncate_bits(v);
    ((uint64_t *)p)[i] = x;
    return (double)x;
  }
  case 11: {
    uint16_t h = (uint16_t)tofu_encode_small_float(v, 5, 10);
    ((uint16_t *)p)[i] = h;
    return tofu_decode_small_float(h, 5, 10);
  }
  default: {
    uint16_t h = (uint16_t)tofu_encode_small_float(v, 8, 7);
    ((uint16_t *)p)[i] = h;
    return tofu_decode_small_float(h, 8, 7);
  }
  }
}

// Records the first read inside a tensor but outside the local buffer:
// error = {1, node, input, rank, index[0..8)}.
TOFU_HD inline void tofu_report(unsigned long long *error, int node, int input,
                                int rank, const int64_t *at) {
  if (!error)
    return;
#ifdef __CUDA_ARCH__
  if (atomicCAS(error, 0ull, 1ull) != 0ull)
    return;
#else
  if (error[0] != 0)
    return;
  error[0] = 1;
#endif
  error[1] = (unsigned long long)node;
  error[2] = (unsigned long long)input;
  error[3] = (unsigned long long)rank;
  for (int d = 0; d < rank && d < 8; ++d)
    error[4 + d] = (unsigned long long)at[d];
}

// An Access node: each index floored; outside the tensor's global shape (or
// NaN) reads 0 (padding); inside it but outside the local box [lo, lo +
// shape) is reported and reads 0.
template <int DT, int R>
TOFU_HD inline double tofu_access(const void *data, const double *idx,
                                  const int64_t *global, const int64_t *lo,
                                  const int64_t *shape, int node, int input,
                                  unsigned long long *error) {
  if (!data)
    return 0.0;
  int64_t at[R > 0 ? R : 1];
  int64_t offset = 0;
  bool outside = false;
  for (int d = 0; d < R; ++d) {
    double x = floor(idx[d]);
    if (!(x >= 0 && x < (double)global[d]))
      return 0.0;
    at[d] = (int64_t)x;
    int64_t local = at[d] - lo[d];
    if (local < 0 || local >= shape[d])
      outside = true;
    offset = offset * shape[d] + local;
  }
  if (outside) {
    tofu_report(error, node, input, R, at);
    return 0.0;
  }
  return tofu_load<DT>(data, offset);
}
)cuda";

} // namespace

ParamLayout tofu::cudagen::paramLayout(const KernelDescription &kernel) {
  ParamLayout l;
  int64_t rank = static_cast<int64_t>(kernel.outputGlobalShape.size());
  l.outLo = 1;
  l.outShape = 1 + rank;
  int64_t next = 1 + 2 * rank;
  for (const KernelOperand &o : kernel.operands) {
    int64_t r = static_cast<int64_t>(o.globalShape.size());
    l.operandLo.push_back(next);
    l.operandShape.push_back(next + r);
    next += 2 * r;
  }
  for (const KernelStage &s : kernel.stages) {
    l.stageRanges.push_back(next);
    next += 2 * static_cast<int64_t>(s.program->topReductionVars.size());
  }
  if (hasRowVariant(kernel))
    l.rows = next++;
  l.numParams = next;
  l.numPointers = static_cast<int64_t>(kernel.stages.size() +
                                       kernel.operands.size());
  return l;
}

std::vector<int64_t> tofu::cudagen::launchParams(
    const KernelDescription &kernel, const plan::Box &outputRegion,
    const std::vector<plan::Box> &operandRegions,
    const std::vector<std::vector<std::pair<int64_t, int64_t>>> &stageRanges) {
  ParamLayout l = paramLayout(kernel);
  std::vector<int64_t> params(static_cast<size_t>(l.numParams), 0);
  params[0] = outputRegion.numElements();
  for (size_t d = 0; d < kernel.outputGlobalShape.size(); ++d) {
    params[l.outLo + d] = outputRegion.lo[d];
    params[l.outShape + d] = outputRegion.hi[d] - outputRegion.lo[d];
  }
  for (size_t i = 0; i < kernel.operands.size(); ++i) {
    const plan::Box &box = operandRegions[i];
    if (!kernel.operands[i].present || box.lo.size() != kernel.operands[i].globalShape.size())
      continue;
    for (size_t d = 0; d < box.lo.size(); ++d) {
      params[l.operandLo[i] + d] = box.lo[d];
      params[l.operandShape[i] + d] = box.hi[d] - box.lo[d];
    }
  }
  for (size_t s = 0; s < kernel.stages.size(); ++s) {
    const ExprProgram &p = *kernel.stages[s].program;
    for (size_t r = 0; r < p.topReductionVars.size(); ++r) {
      std::pair<int64_t, int64_t> range{0, p.varExtents[p.topReductionVars[r]]};
      if (s < stageRanges.size() && r < stageRanges[s].size())
        range = stageRanges[s][r];
      params[l.stageRanges[s] + 2 * r] = range.first;
      params[l.stageRanges[s] + 2 * r + 1] = range.second;
    }
  }
  if (l.rows >= 0) {
    auto rowDims = rowReductionDims(*kernel.stages[0].program);
    int64_t rows = 1;
    for (size_t d = 0; d < kernel.outputGlobalShape.size(); ++d)
      if (d < rowDims->size() && (*rowDims)[d])
        rows *= params[l.outShape + d];
    params[l.rows] = rows;
  }
  return params;
}

std::string tofu::cudagen::emitPrelude() { return kPrelude; }

llvm::Expected<std::string>
tofu::cudagen::emitKernel(const KernelDescription &kernel,
                          const std::string &name) {
  if (kernel.stages.empty())
    return fail("kernel " + name + " has no stages");
  auto unsupportedType = [&](DType t) {
    return fail("kernel " + name + ": element type number " +
                llvm::Twine(static_cast<int>(t)) +
                " is not one of the plan's element types (0 to " +
                llvm::Twine(static_cast<int>(plan::kNumDTypes) - 1) +
                "); the kernel description is corrupt");
  };
  for (const KernelOperand &o : kernel.operands)
    if (o.present && !generatorHandles(o.dtype))
      return unsupportedType(o.dtype);
  for (const KernelStage &stage : kernel.stages)
    if (!generatorHandles(stage.outputType))
      return unsupportedType(stage.outputType);
  ParamLayout layout = paramLayout(kernel);
  const size_t rank = kernel.outputGlobalShape.size();
  std::string body;
  body += "  int64_t rest = e;\n";
  for (size_t d = rank; d-- > 0;) {
    body += "  const int64_t o" + std::to_string(d) + " = params[" +
            std::to_string(layout.outLo + static_cast<int64_t>(d)) +
            "] + rest % params[" +
            std::to_string(layout.outShape + static_cast<int64_t>(d)) +
            "];\n";
    if (d > 0)
      body += "  rest /= params[" +
              std::to_string(layout.outShape + static_cast<int64_t>(d)) +
              "];\n";
  }
  body += "  (void)rest;\n";
  for (size_t s = 0; s < kernel.stages.size(); ++s) {
    const KernelStage &stage = kernel.stages[s];
    const ExprProgram &p = *stage.program;
    std::vector<int64_t> ranks;
    for (const StageInput &in : stage.inputs) {
      if (in.stage >= 0) {
        if (in.stage >= static_cast<int32_t>(s))
          return fail("stage " + llvm::Twine(s) + " reads stage " +
                      llvm::Twine(in.stage) + ", not an earlier one");
        ranks.push_back(static_cast<int64_t>(rank));
      } else if (in.operand < 0 ||
                 in.operand >= static_cast<int32_t>(kernel.operands.size())) {
        return fail("stage " + llvm::Twine(s) + " reads operand " +
                    llvm::Twine(in.operand) + ", out of range");
      } else {
        const KernelOperand &o = kernel.operands[in.operand];
        ranks.push_back(o.present ? static_cast<int64_t>(o.globalShape.size())
                                  : -1);
      }
    }
    if (std::string err = plan::verifyExprProgram(p, ranks, rank);
        !err.empty())
      return fail("stage " + llvm::Twine(s) + " (" + stage.op +
                  "): invalid program: " + err);
    for (size_t d = 0; d < rank; ++d)
      if (p.varExtents[p.outputVars[d]] != kernel.outputGlobalShape[d])
        return fail("stage " + llvm::Twine(s) + " (" + stage.op +
                    "): output dimension " + llvm::Twine(d) +
                    " has global extent " +
                    llvm::Twine(kernel.outputGlobalShape[d]) +
                    " but the program's variable has extent " +
                    llvm::Twine(p.varExtents[p.outputVars[d]]));
    body += "  // stage " + std::to_string(s) + ": " + stage.op + " -> " +
            dtypeName(stage.outputType) + "\n";
    auto value = StageEmitter(kernel, layout, s, body).emit();
    if (!value)
      return value.takeError();
    body += "  const double s" + std::to_string(s) + "_value = tofu_store<" +
            dtypeCode(stage.outputType) + ">(ptrs[" + std::to_string(s) +
            "], e, " + *value + ");\n";
  }
  for (size_t s = 0; s < kernel.stages.size(); ++s)
    body += "  (void)s" + std::to_string(s) + "_value;\n";

  // A block per output element: the same statements, the root reduction's
  // iterations shared by the block's threads (blockReductionRoot).
  const bool block = kernel.stages.size() == 1 &&
                     blockReductionRoot(*kernel.stages[0].program);
  std::string partialBody, partialValue;
  if (block) {
    partialBody = body.substr(0, body.find("  // stage 0: "));
    auto value = StageEmitter(kernel, layout, 0, partialBody,
                              /*parallelRoot=*/true)
                     .emit();
    if (!value)
      return value.takeError();
    partialValue = *value;
  }

  // A block per row: the row-invariant reductions once per row, shared by
  // the block's threads, then the row's elements (rowReductionDims).
  const std::optional<std::vector<bool>> rowDims =
      hasRowVariant(kernel) ? rowReductionDims(*kernel.stages[0].program)
                            : std::nullopt;
  std::string rowBody, rowElement, rowValue, rowCount = "1";
  if (rowDims) {
    auto dimParam = [&](int64_t base, size_t d) {
      return "params[" + std::to_string(base + static_cast<int64_t>(d)) + "]";
    };
    rowBody += "  int64_t tofu_rest = tofu_row;\n";
    for (size_t d = rank; d-- > 0;) {
      if (!(*rowDims)[d])
        continue;
      const std::string l = "tofu_l" + std::to_string(d);
      rowBody += "  const int64_t " + l + " = tofu_rest % " +
                 dimParam(layout.outShape, d) + ";\n  tofu_rest /= " +
                 dimParam(layout.outShape, d) + ";\n  const int64_t o" +
                 std::to_string(d) + " = " + dimParam(layout.outLo, d) +
                 " + " + l + ";\n";
      rowCount += " * " + dimParam(layout.outShape, d);
    }
    rowBody += "  (void)tofu_rest;\n  int64_t tofu_row_elements = 1;\n";
    for (size_t d = 0; d < rank; ++d)
      if (!(*rowDims)[d])
        rowBody += "  tofu_row_elements *= " + dimParam(layout.outShape, d) +
                   ";\n";
    StageEmitter emitter(kernel, layout, 0, rowBody, /*parallelRoot=*/false,
                         &*rowDims);
    auto value = emitter.emit();
    if (!value)
      return value.takeError();
    rowValue = *value;
    rowElement = "  int64_t tofu_crest = tofu_c;\n";
    for (size_t d = rank; d-- > 0;) {
      if ((*rowDims)[d])
        continue;
      const std::string l = "tofu_l" + std::to_string(d);
      rowElement += "  const int64_t " + l + " = tofu_crest % " +
                    dimParam(layout.outShape, d) + ";\n  tofu_crest /= " +
                    dimParam(layout.outShape, d) + ";\n  const int64_t o" +
                    std::to_string(d) + " = " + dimParam(layout.outLo, d) +
                    " + " + l + ";\n";
    }
    rowElement += "  (void)tofu_crest;\n  int64_t e = 0;\n";
    for (size_t d = 0; d < rank; ++d)
      rowElement += "  e = e * " + dimParam(layout.outShape, d) + " + tofu_l" +
                    std::to_string(d) + ";\n";
    rowElement += emitter.elementBody();
  }

  std::string np = std::to_string(layout.numPointers);
  std::string nq = std::to_string(layout.numParams);
  std::string src;
  src += "\n// ---- " + name + ": ";
  for (size_t s = 0; s < kernel.stages.size(); ++s)
    src += (s ? " + " : "") + kernel.stages[s].op;
  src += " (" + np + " pointers, " + nq + " params)\n";
  src += "TOFU_HD inline void " + name +
         "_element(int64_t e, void *const *ptrs, const int64_t *params,\n"
         "    uint64_t step, unsigned long long *error) {\n"
         "  (void)step; (void)error;\n" +
         body + "}\n";
  src += "#ifdef __CUDACC__\nextern \"C\" __global__ void __launch_bounds__(256) " +
         name + "(TofuPointers<" + np + "> ptrs, TofuParams<" + nq +
         "> params,\n    const unsigned long long *step, unsigned long long "
         "*error) {\n"
         "  const uint64_t s = step ? *step : 0;\n"
         "  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; "
         "e < params.v[0];\n"
         "       e += (int64_t)gridDim.x * blockDim.x)\n"
         "    " + name + "_element(e, ptrs.p, params.v, s, error);\n}\n"
         "#endif\n";
  src += "extern \"C\" void " + name +
         "_host(void *const *ptrs, const int64_t *params, uint64_t step,\n"
         "    unsigned long long *error) {\n"
         "  for (int64_t e = 0; e < params[0]; ++e)\n"
         "    " + name + "_element(e, ptrs, params, step, error);\n}\n";
  if (block) {
    const ExprProgram &p = *kernel.stages[0].program;
    std::string combine;
    switch (p.nodes[p.root].reducer) {
    case plan::Reducer::Sum: combine = "a + b"; break;
    case plan::Reducer::Prod: combine = "a * b"; break;
    case plan::Reducer::Max: combine = "tofu_max(a, b)"; break;
    case plan::Reducer::Min: combine = "tofu_min(a, b)"; break;
    }
    std::string store = "tofu_store<" +
                        dtypeCode(kernel.stages[0].outputType) + ">(";
    src += "TOFU_HD inline double " + name +
           "_partial(int64_t e, int64_t tofu_t, int64_t tofu_nt,\n"
           "    void *const *ptrs, const int64_t *params, uint64_t step,\n"
           "    unsigned long long *error) {\n"
           "  (void)step; (void)error;\n" +
           partialBody + "  return " + partialValue + ";\n}\n";
    src += "TOFU_HD inline double " + name +
           "_combine(double a, double b) { return " + combine + "; }\n";
    src += "#ifdef __CUDACC__\nextern \"C\" __global__ void "
           "__launch_bounds__(256) " +
           name + "_block(TofuPointers<" + np + "> ptrs, TofuParams<" + nq +
           "> params,\n    const unsigned long long *step, unsigned long long "
           "*error) {\n"
           "  __shared__ double partials[TOFU_BLOCK_THREADS];\n"
           "  const uint64_t s = step ? *step : 0;\n"
           "  for (int64_t e = blockIdx.x; e < params.v[0]; e += gridDim.x) {\n"
           "    partials[threadIdx.x] = " + name +
           "_partial(e, threadIdx.x, TOFU_BLOCK_THREADS, ptrs.p, params.v, s, "
           "error);\n"
           "    __syncthreads();\n"
           "    for (unsigned w = TOFU_BLOCK_THREADS / 2; w > 0; w >>= 1) {\n"
           "      if (threadIdx.x < w)\n"
           "        partials[threadIdx.x] = " + name +
           "_combine(partials[threadIdx.x], partials[threadIdx.x + w]);\n"
           "      __syncthreads();\n"
           "    }\n"
           "    if (threadIdx.x == 0)\n"
           "      " + store + "ptrs.p[0], e, partials[0]);\n"
           "    __syncthreads();\n"
           "  }\n}\n#endif\n";
    src += "extern \"C\" void " + name +
           "_block_host(void *const *ptrs, const int64_t *params, uint64_t step,\n"
           "    unsigned long long *error) {\n"
           "  double partials[TOFU_BLOCK_THREADS];\n"
           "  for (int64_t e = 0; e < params[0]; ++e) {\n"
           "    for (int t = 0; t < TOFU_BLOCK_THREADS; ++t)\n"
           "      partials[t] = " + name +
           "_partial(e, t, TOFU_BLOCK_THREADS, ptrs, params, step, error);\n"
           "    for (int w = TOFU_BLOCK_THREADS / 2; w > 0; w >>= 1)\n"
           "      for (int t = 0; t < w; ++t)\n"
           "        partials[t] = " + name +
           "_combine(partials[t], partials[t + w]);\n"
           "    " + store + "ptrs[0], e, partials[0]);\n"
           "  }\n}\n";
  }
  if (block) {
    // The grid-wide variant: output element e's root iterations shared by
    // TOFU_GRID_PARTS blocks (part q, thread t runs share q *
    // TOFU_BLOCK_THREADS + t of TOFU_GRID_PARTS * TOFU_BLOCK_THREADS), each
    // block's partial combined by the block's tree into scratch[e *
    // TOFU_GRID_PARTS + q]; the block that finishes element e's last part
    // (a counter per element: the only atomic, on the count, not on values)
    // combines the TOFU_GRID_PARTS partials by the same tree, in part order,
    // stores the value and resets the counter for the next launch. Every
    // value goes through the same fixed pairs whichever block finishes
    // last: deterministic. (element, part) pairs are grid-strided, so any
    // grid size works. `scratch`: TOFU_GRID_PARTS doubles then one unsigned
    // counter per element, zeroed once before the first launch.
    const std::string store = "tofu_store<" +
                              dtypeCode(kernel.stages[0].outputType) + ">(";
    src += "#ifdef __CUDACC__\nextern \"C\" __global__ void "
           "__launch_bounds__(256) " +
           name + "_grid(TofuPointers<" + np + "> ptrs, TofuParams<" + nq +
           "> params,\n    const unsigned long long *step, unsigned long long "
           "*error, double *scratch) {\n"
           "  __shared__ double partials[TOFU_BLOCK_THREADS];\n"
           "  __shared__ bool last;\n"
           "  auto combine = [](double a, double b) { return " + name +
           "_combine(a, b); };\n"
           "  const uint64_t s = step ? *step : 0;\n"
           "  const int64_t n = params.v[0];\n"
           "  unsigned *count = reinterpret_cast<unsigned *>(scratch + n * "
           "TOFU_GRID_PARTS);\n"
           "  for (int64_t b = blockIdx.x; b < n * TOFU_GRID_PARTS; b += "
           "gridDim.x) {\n"
           "    const int64_t e = b / TOFU_GRID_PARTS, q = b % TOFU_GRID_PARTS;\n"
           "    partials[threadIdx.x] = " + name +
           "_partial(e, q * TOFU_BLOCK_THREADS + threadIdx.x,\n"
           "        TOFU_GRID_PARTS * TOFU_BLOCK_THREADS, ptrs.p, params.v, s, "
           "error);\n"
           "    const double part = tofu_grid_combine(partials, combine);\n"
           "    if (threadIdx.x == 0) {\n"
           "      scratch[b] = part;\n"
           "      __threadfence();\n"
           "      last = atomicAdd(count + e, 1u) == TOFU_GRID_PARTS - 1;\n"
           "    }\n"
           "    __syncthreads();\n"
           "    if (last) {\n"
           "      __threadfence();\n"
           "      partials[threadIdx.x] = __ldcg(scratch + e * TOFU_GRID_PARTS + "
           "threadIdx.x);\n"
           "      const double value = tofu_grid_combine(partials, combine);\n"
           "      if (threadIdx.x == 0) {\n"
           "        " + store + "ptrs.p[0], e, value);\n"
           "        count[e] = 0;\n"
           "      }\n"
           "    }\n"
           "    __syncthreads();\n"
           "  }\n}\n#endif\n";
    src += "extern \"C\" void " + name +
           "_grid_host(void *const *ptrs, const int64_t *params, uint64_t step,\n"
           "    unsigned long long *error) {\n"
           "  double partials[TOFU_BLOCK_THREADS], parts[TOFU_GRID_PARTS];\n"
           "  auto combine = [](double a, double b) { return " + name +
           "_combine(a, b); };\n"
           "  for (int64_t e = 0; e < params[0]; ++e) {\n"
           "    for (int q = 0; q < TOFU_GRID_PARTS; ++q) {\n"
           "      for (int t = 0; t < TOFU_BLOCK_THREADS; ++t)\n"
           "        partials[t] = " + name +
           "_partial(e, q * TOFU_BLOCK_THREADS + t,\n"
           "            TOFU_GRID_PARTS * TOFU_BLOCK_THREADS, ptrs, params, step, "
           "error);\n"
           "      parts[q] = tofu_grid_combine(partials, combine);\n"
           "    }\n"
           "    " + store + "ptrs[0], e, tofu_grid_combine(parts, combine));\n"
           "  }\n}\n";
  }
  if (rowDims) {
    const std::string store =
        "tofu_store<" + dtypeCode(kernel.stages[0].outputType) + ">(";
    src += "TOFU_HD inline int64_t " + name +
           "_rows(const int64_t *params) { return " + rowCount + "; }\n";
    src += "template <int NT> TOFU_HD inline void " + name +
           "_row_body(int64_t tofu_row, int64_t tofu_lane, void *const *ptrs,\n"
           "    const int64_t *params, uint64_t step, unsigned long long "
           "*error,\n    double *tofu_partials) {\n"
           "  (void)step; (void)error; (void)tofu_partials; (void)tofu_lane;\n" +
           rowBody +
           "  for (int64_t tofu_c = TOFU_LANE_FIRST; tofu_c < "
           "tofu_row_elements;\n       tofu_c += TOFU_LANE_STEP) {\n" +
           rowElement + "  " + store + "ptrs[0], e, " + rowValue +
           ");\n  }\n}\n";
    // A block per row (`_row`) and a warp per row (`_rowwarp`, for short
    // rows: TOFU_BLOCK_THREADS / 32 rows a block), each with its host
    // driver running the same group size and tree.
    src += "#ifdef __CUDACC__\nextern \"C\" __global__ void "
           "__launch_bounds__(256) " +
           name + "_row(TofuPointers<" + np + "> ptrs, TofuParams<" + nq +
           "> params,\n    const unsigned long long *step, unsigned long long "
           "*error) {\n"
           "  __shared__ double tofu_partials[TOFU_BLOCK_THREADS];\n"
           "  const uint64_t s = step ? *step : 0;\n"
           "  const int64_t rows = " + name + "_rows(params.v);\n"
           "  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x)\n"
           "    " + name +
           "_row_body<TOFU_BLOCK_THREADS>(row, threadIdx.x, ptrs.p, params.v, "
           "s, error,\n        tofu_partials);\n"
           "}\n"
           "extern \"C\" __global__ void __launch_bounds__(256) " +
           name + "_rowwarp(TofuPointers<" + np + "> ptrs, TofuParams<" + nq +
           "> params,\n    const unsigned long long *step, unsigned long long "
           "*error) {\n"
           "  __shared__ double tofu_partials[TOFU_BLOCK_THREADS];\n"
           "  const uint64_t s = step ? *step : 0;\n"
           "  const int64_t rows = " + name + "_rows(params.v);\n"
           "  const int64_t warps = TOFU_BLOCK_THREADS / TOFU_WARP_THREADS;\n"
           "  const int64_t warp = threadIdx.x / TOFU_WARP_THREADS;\n"
           "  const int64_t lane = threadIdx.x % TOFU_WARP_THREADS;\n"
           "  for (int64_t row = (int64_t)blockIdx.x * warps + warp; row < rows;\n"
           "       row += (int64_t)gridDim.x * warps)\n"
           "    " + name +
           "_row_body<TOFU_WARP_THREADS>(row, lane, ptrs.p, params.v, s, error,\n"
           "        tofu_partials + warp * TOFU_WARP_THREADS);\n"
           "}\n#endif\n";
    for (const char *variant : {"row", "rowwarp"}) {
      const std::string nt = std::string(variant) == "row"
                                 ? "TOFU_BLOCK_THREADS"
                                 : "TOFU_WARP_THREADS";
      src += "extern \"C\" void " + name + "_" + variant +
             "_host(void *const *ptrs, const int64_t *params, uint64_t step,\n"
             "    unsigned long long *error) {\n"
             "  double tofu_partials[" + nt + "];\n"
             "  const int64_t rows = " + name + "_rows(params);\n"
             "  for (int64_t row = 0; row < rows; ++row)\n"
             "    " + name + "_row_body<" + nt +
             ">(row, 0, ptrs, params, step, error, tofu_partials);\n"
             "}\n";
    }
  }
  return src;
}

namespace {

/// The reductions of `p` whose free variables are all output variables
/// (computed once per element, or once per row by a row variant), the
/// root's operands first; empty if the root is a Reduce.
std::vector<int32_t>
rowInvariantReductions(const ExprProgram &p,
                       const std::vector<std::vector<int32_t>> &freeVars) {
  std::vector<int32_t> found;
  if (p.root < 0 || p.root >= static_cast<int32_t>(p.nodes.size()) ||
      p.nodes[p.root].kind == ExprNode::Kind::Reduce)
    return found;
  std::set<int32_t> outputs(p.outputVars.begin(), p.outputVars.end());
  std::vector<bool> seen(p.nodes.size(), false);
  std::vector<int32_t> stack{p.root};
  while (!stack.empty()) {
    int32_t id = stack.back();
    stack.pop_back();
    if (id < 0 || id >= static_cast<int32_t>(p.nodes.size()) || seen[id])
      continue;
    seen[id] = true;
    const ExprNode &n = p.nodes[id];
    if (n.kind == ExprNode::Kind::Reduce &&
        std::all_of(freeVars[id].begin(), freeVars[id].end(),
                    [&](int32_t v) { return outputs.count(v) != 0; }))
      found.push_back(id);
    for (int32_t operand : n.operands)
      stack.push_back(operand);
  }
  return found;
}

/// Iterations of the loop nest of each Reduce node of `p` per evaluation,
/// counting the reductions nested in its body once each (as the generator
/// hoists them), saturated at `cap`.
std::vector<int64_t> reductionWork(const ExprProgram &p, int64_t cap) {
  std::vector<int64_t> work(p.nodes.size(), 0);
  for (size_t id = 0; id < p.nodes.size(); ++id) {
    const ExprNode &n = p.nodes[id];
    int64_t inner = 0;
    for (int32_t operand : n.operands)
      if (operand >= 0 && operand < static_cast<int32_t>(id))
        inner = std::min(cap, inner + work[operand]);
    if (n.kind != ExprNode::Kind::Reduce) {
      work[id] = inner;
      continue;
    }
    int64_t extent = 1;
    for (int32_t v : n.vars)
      extent = v >= 0 && v < static_cast<int32_t>(p.varExtents.size())
                   ? std::min(cap, extent * std::clamp<int64_t>(
                                                p.varExtents[v], 0, cap))
                   : 0;
    work[id] = std::min(cap, extent * (1 + inner));
  }
  return work;
}

} // namespace

bool tofu::cudagen::blockReductionRoot(const ExprProgram &p) {
  if (p.root < 0 || p.root >= static_cast<int32_t>(p.nodes.size()) ||
      p.nodes[p.root].kind != ExprNode::Kind::Reduce)
    return false;
  // Iterations per output element: a Reduce runs its extent times the
  // reductions nested in its body (counted once each, as the generator
  // hoists them); saturated at the threshold so that nothing overflows.
  const int64_t cap = kBlockReductionMinIterations;
  return reductionWork(p, cap)[p.root] >= cap;
}

std::optional<std::vector<bool>>
tofu::cudagen::rowReductionDims(const ExprProgram &p) {
  // Called before emitKernel verifies a program (paramLayout): refuse what
  // freeVariablesOfNodes cannot walk; emitKernel reports the error.
  if (p.root < 0 || p.root >= static_cast<int32_t>(p.nodes.size()))
    return std::nullopt;
  for (size_t id = 0; id < p.nodes.size(); ++id)
    for (int32_t operand : p.nodes[id].operands)
      if (operand < 0 || operand >= static_cast<int32_t>(id))
        return std::nullopt;
  const auto freeVars = freeVariablesOfNodes(p);
  const std::vector<int32_t> reductions = rowInvariantReductions(p, freeVars);
  if (reductions.empty())
    return std::nullopt;
  std::set<int32_t> rowVars;
  for (int32_t id : reductions)
    rowVars.insert(freeVars[id].begin(), freeVars[id].end());
  std::vector<bool> dims;
  for (int32_t v : p.outputVars)
    dims.push_back(rowVars.count(v) != 0);
  return dims;
}

bool tofu::cudagen::hasRowVariant(const KernelDescription &kernel) {
  if (kernel.stages.size() != 1 || !kernel.stages[0].program)
    return false;
  const ExprProgram &p = *kernel.stages[0].program;
  return kernel.forceRowVariant ? rowReductionDims(p).has_value()
                                : classifyProgram(p) == "row-reduction";
}

std::string tofu::cudagen::classifyProgram(const ExprProgram &p) {
  bool elementwise = true;
  if (blockReductionRoot(p))
    return "block-reduction";
  if (rowReductionDims(p)) {
    const auto freeVars = freeVariablesOfNodes(p);
    const int64_t cap = kRowReductionMinIterations;
    const std::vector<int64_t> work = reductionWork(p, cap);
    int64_t perRow = 0;
    for (int32_t id : rowInvariantReductions(p, freeVars))
      perRow = std::min(cap, perRow + work[id]);
    // Elements of a (whole) row: each recomputes the row's reductions in
    // the thread-per-element kernel.
    const std::vector<bool> rowDims = *rowReductionDims(p);
    int64_t rowElements = 1;
    for (size_t d = 0; d < p.outputVars.size(); ++d)
      if (!rowDims[d])
        rowElements = std::min<int64_t>(
            cap, rowElements * std::max<int64_t>(
                                   0, p.varExtents[p.outputVars[d]]));
    if (perRow >= cap || (perRow >= kRowReductionMinShortIterations &&
                          rowElements >= kRowReductionMinShortIterations))
      return "row-reduction";
  }
  for (const ExprNode &n : p.nodes) {
    if (n.kind == ExprNode::Kind::Reduce)
      return "reduction";
    if (n.kind != ExprNode::Kind::Access)
      continue;
    // Broadcasting aligns the input's dims with the output's last ones; a
    // broadcast dim reads at a constant index.
    const size_t rank = n.operands.size(), outRank = p.outputVars.size();
    for (size_t k = 0; k < rank; ++k) {
      const ExprNode &index = p.nodes[n.operands[k]];
      bool aligned = rank <= outRank && index.kind == ExprNode::Kind::Var &&
                     index.var == p.outputVars[k + outRank - rank];
      if (!aligned && index.kind != ExprNode::Kind::Const)
        elementwise = false;
    }
  }
  return elementwise ? "elementwise" : "data-movement";
}

bool tofu::cudagen::isLibraryBackedOp(const std::string &kernel) {
  // Convolution, pooling and batch normalization get a generated kernel:
  // the executor uses it where cuDNN does not apply (a spatial split, a
  // bias) or has no wrapper yet (runtime/cuda/CudaSchedule.cpp).
  static const std::set<std::string> library = {"MatMul", "MatMulTransposed",
                                                "Gemm"};
  return library.count(kernel) != 0;
}

llvm::Error tofu::cudagen::checkCudaArch(const std::string &arch) {
  llvm::StringRef s(arch);
  bool ok = s.consume_front("sm_");
  if (ok && (s.ends_with("a") || s.ends_with("f")))
    s = s.drop_back();
  unsigned number = 0;
  ok = ok && s.size() >= 2 && !s.getAsInteger(10, number) && number >= 10;
  if (!ok)
    return fail("--cuda-arch '" + arch +
                "' is not a CUDA architecture name: expected sm_<major><minor> "
                "such as sm_80 (A100) or sm_90 (H100)");
  return llvm::Error::success();
}

namespace {

/// Buffer byte ranges of one device overlap.
bool overlaps(const plan::Buffer &a, const plan::Buffer &b) {
  return a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
}

bool singleOutputElementwise(const plan::Instr &in) {
  return in.kind == plan::Instr::Kind::Compute && in.programs().size() == 1 &&
         in.outputs.size() == 1 && !isLibraryBackedOp(in.kernel) &&
         classifyProgram(in.programs()[0]) == "elementwise";
}

/// Builds kernel descriptions and launches for a whole plan.
class PlanKernelBuilder {
public:
  PlanKernelBuilder(plan::Plan &plan, const CudaCodegenOptions &options)
      : plan(plan), options(options) {}

  llvm::Error build();

  /// Per kernel, its standalone source (prelude + kernel), for diagnostics.
  std::vector<std::string> kernelSources;
  /// Per kernel, where it is first used ("device 0 instruction 3 (op 'x')").
  std::vector<std::string> kernelUses;

private:
  llvm::Error addLaunch(int32_t device, int32_t first, int32_t count,
                        int32_t output);

  plan::Plan &plan;
  const CudaCodegenOptions &options;
  std::map<std::string, int32_t> kernelByBody;
  std::string source;
};

llvm::Error PlanKernelBuilder::addLaunch(int32_t device, int32_t first,
                                         int32_t count, int32_t output) {
  const plan::DeviceProgram &dev = plan.devices[device];
  KernelDescription kernel;
  std::vector<plan::Box> operandRegions;
  std::vector<int32_t> operandBuffers;
  std::map<int32_t, int32_t> operandOfBuffer, stageOfBuffer;
  std::vector<int32_t> outputBuffers;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> ranges;
  std::string ops;
  for (int32_t i = first; i < first + count; ++i) {
    const plan::Instr &in = dev.instrs[i];
    size_t o = count == 1 ? static_cast<size_t>(output) : 0;
    KernelStage stage;
    stage.program = &in.programs()[o];
    stage.op = in.kernel;
    int32_t outBuffer = in.outputs[o];
    stage.outputType = plan.tensors[dev.buffers[outBuffer].tensor].dtype;
    for (size_t k = 0; k < in.inputs.size(); ++k) {
      int32_t b = in.inputs[k];
      StageInput si;
      if (b >= 0 && stageOfBuffer.count(b)) {
        si.stage = stageOfBuffer[b];
      } else if (b >= 0 && operandOfBuffer.count(b)) {
        si.operand = operandOfBuffer[b];
      } else {
        KernelOperand operand;
        plan::Box region;
        if (b < 0) {
          operand.present = false;
        } else {
          const plan::Buffer &buf = dev.buffers[b];
          operand.dtype = plan.tensors[buf.tensor].dtype;
          operand.globalShape = plan.tensors[buf.tensor].shape;
          region = buf.region;
          operandOfBuffer[b] = static_cast<int32_t>(kernel.operands.size());
        }
        si.operand = static_cast<int32_t>(kernel.operands.size());
        kernel.operands.push_back(operand);
        operandRegions.push_back(region);
        operandBuffers.push_back(b);
      }
      stage.inputs.push_back(si);
    }
    stageOfBuffer[outBuffer] = static_cast<int32_t>(kernel.stages.size());
    outputBuffers.push_back(outBuffer);
    ranges.push_back(o < in.reductionRanges.size()
                         ? in.reductionRanges[o]
                         : std::vector<std::pair<int64_t, int64_t>>{});
    kernel.stages.push_back(stage);
    ops += (ops.empty() ? "" : "+") + in.kernel;
    if (i == first)
      kernel.outputGlobalShape =
          plan.tensors[dev.buffers[outBuffer].tensor].shape;
  }
  const plan::Buffer &outBuf = dev.buffers[outputBuffers[0]];
  std::string where = "device " + std::to_string(device) + " instruction " +
                      std::to_string(first) + " (op '" +
                      dev.instrs[first].op + "')";

  auto text = emitKernel(kernel, "@NAME@");
  if (!text)
    return fail(where + ": " + llvm::toString(text.takeError()));
  auto [it, inserted] = kernelByBody.emplace(
      *text, static_cast<int32_t>(plan.cuda.kernels.size()));
  if (inserted) {
    plan::CudaKernel k;
    k.name = "tofu_k" + std::to_string(plan.cuda.kernels.size()) + "_" +
             (count > 1 ? "fused" : dev.instrs[first].kernel);
    k.kind = count > 1 ? "fused-elementwise"
                       : classifyProgram(*kernel.stages[0].program);
    k.ops = ops;
    ParamLayout layout = paramLayout(kernel);
    k.numPointers = static_cast<uint32_t>(layout.numPointers);
    k.numParams = static_cast<uint32_t>(layout.numParams);
    std::string named = *text;
    for (size_t at; (at = named.find("@NAME@")) != std::string::npos;)
      named.replace(at, 6, k.name);
    kernelSources.push_back(named);
    kernelUses.push_back(where);
    source += named;
    plan.cuda.kernels.push_back(std::move(k));
  }
  plan::CudaLaunch launch;
  launch.device = device;
  launch.firstInstr = first;
  launch.numInstrs = count;
  launch.output = count == 1 ? output : 0;
  launch.kernel = it->second;
  launch.numElements = outBuf.region.numElements();
  launch.buffers = outputBuffers;
  launch.buffers.insert(launch.buffers.end(), operandBuffers.begin(),
                        operandBuffers.end());
  launch.params = launchParams(kernel, outBuf.region, operandRegions, ranges);
  plan.cuda.launches.push_back(std::move(launch));
  return llvm::Error::success();
}

/// True when instruction `next` may join the fused chain [first, next).
bool canFuse(const plan::Plan &plan, const plan::DeviceProgram &dev,
             int32_t first, int32_t next) {
  const plan::Instr &in = dev.instrs[next];
  if (!singleOutputElementwise(in))
    return false;
  const plan::Buffer &out = dev.buffers[in.outputs[0]];
  const plan::Buffer &chainOut = dev.buffers[dev.instrs[first].outputs[0]];
  if (out.region.lo != chainOut.region.lo ||
      out.region.hi != chainOut.region.hi ||
      plan.tensors[out.tensor].shape != plan.tensors[chainOut.tensor].shape)
    return false;
  // It must read the previous instruction's output, and every chain output
  // it reads only at its own element.
  std::set<int32_t> chainOutputs;
  for (int32_t i = first; i < next; ++i)
    chainOutputs.insert(dev.instrs[i].outputs[0]);
  bool readsPrevious = false;
  const plan::ExprProgram &p = in.programs()[0];
  for (const plan::ExprNode &n : p.nodes) {
    if (n.kind != plan::ExprNode::Kind::Access || n.input < 0 ||
        n.input >= static_cast<int32_t>(in.inputs.size()))
      continue;
    int32_t b = in.inputs[n.input];
    if (!chainOutputs.count(b))
      continue;
    if (!isIdentityAccess(p, n))
      return false;
    readsPrevious |= b == dev.instrs[next - 1].outputs[0];
  }
  if (!readsPrevious)
    return false;
  // No output of the chain may share arena bytes with another operand of the
  // chain (the memory planner reuses the bytes of dead buffers).
  std::vector<int32_t> operands;
  for (int32_t i = first; i <= next; ++i) {
    operands.insert(operands.end(), dev.instrs[i].inputs.begin(),
                    dev.instrs[i].inputs.end());
    operands.push_back(dev.instrs[i].outputs[0]);
  }
  for (int32_t i = first; i <= next; ++i) {
    int32_t o = dev.instrs[i].outputs[0];
    for (int32_t b : operands)
      if (b >= 0 && b != o && overlaps(dev.buffers[o], dev.buffers[b]))
        return false;
  }
  return true;
}

llvm::Error PlanKernelBuilder::build() {
  source = emitPrelude();
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    const plan::DeviceProgram &dev = plan.devices[d];
    const int32_t count = static_cast<int32_t>(dev.instrs.size());
    for (int32_t i = 0; i < count;) {
      const plan::Instr &in = dev.instrs[i];
      if (in.kind != plan::Instr::Kind::Compute || in.programs().empty() ||
          isLibraryBackedOp(in.kernel) ||
          in.programs().size() != in.outputs.size()) {
        ++i;
        continue;
      }
      int32_t end = i + 1;
      if (options.fuseElementwise && singleOutputElementwise(in))
        while (end < count && canFuse(plan, dev, i, end))
          ++end;
      if (end - i > 1) {
        if (llvm::Error err =
                addLaunch(static_cast<int32_t>(d), i, end - i, 0))
          return err;
      } else {
        for (size_t o = 0; o < in.programs().size(); ++o)
          if (llvm::Error err = addLaunch(static_cast<int32_t>(d), i, 1,
                                          static_cast<int32_t>(o)))
            return err;
      }
      i = end;
    }
  }
  plan.cuda.source = source;
  return llvm::Error::success();
}

/// Finds nvcc: `explicitPath`, else $PATH, else /usr/local/cuda/bin/nvcc.
llvm::Expected<std::string> findNvcc(const std::string &explicitPath) {
  if (!explicitPath.empty()) {
    if (!llvm::sys::fs::can_execute(explicitPath))
      return fail("--nvcc '" + explicitPath +
                  "' is not an executable file; give the path of the CUDA "
                  "toolkit's nvcc");
    return explicitPath;
  }
  if (auto found = llvm::sys::findProgramByName("nvcc"))
    return *found;
  if (llvm::sys::fs::can_execute("/usr/local/cuda/bin/nvcc"))
    return std::string("/usr/local/cuda/bin/nvcc");
  return fail("--cuda-arch needs nvcc to compile the generated CUDA kernels, "
              "and none was found (not on PATH, not at "
              "/usr/local/cuda/bin/nvcc); install the CUDA toolkit or pass "
              "--nvcc /path/to/nvcc");
}

/// Runs nvcc on `source` in a fresh temporary directory; fills `cubin` or
/// returns nvcc's diagnostics in `log` (false).
bool runNvcc(const std::string &nvcc, const std::string &arch,
             const std::string &source, std::vector<uint8_t> &cubin,
             std::string &log) {
  llvm::SmallString<128> dir;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory("tofuc-cuda", dir)) {
    log = "cannot create a temporary directory: " + ec.message();
    return false;
  }
  // Fixed file names inside the directory: nvcc's output does not depend on
  // the directory (checked by test/tofuc/cuda-kernels.test).
  llvm::SmallString<128> cu(dir), out(dir), errs(dir);
  llvm::sys::path::append(cu, "tofu_kernels.cu");
  llvm::sys::path::append(out, "tofu_kernels.cubin");
  llvm::sys::path::append(errs, "nvcc.log");
  bool ok = false;
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(cu, ec);
    if (ec) {
      log = "cannot write " + std::string(cu) + ": " + ec.message();
    } else {
      os << source;
      os.close();
      std::string archFlag = "-arch=" + arch;
      llvm::SmallVector<llvm::StringRef> args = {
          nvcc, "-cubin", archFlag, "-std=c++17", "-O3", "-o", out, cu};
      std::optional<llvm::StringRef> redirects[] = {
          std::nullopt, llvm::StringRef(errs), llvm::StringRef(errs)};
      std::string execError;
      int rc = llvm::sys::ExecuteAndWait(nvcc, args, std::nullopt, redirects,
                                         /*SecondsToWait=*/0, 0, &execError);
      auto logText = llvm::MemoryBuffer::getFile(errs);
      log = logText ? (*logText)->getBuffer().str() : "";
      if (rc != 0) {
        if (!execError.empty())
          log = execError + "\n" + log;
        log = "nvcc exited with status " + std::to_string(rc) + "\n" + log;
      } else if (auto bin = llvm::MemoryBuffer::getFile(out)) {
        cubin.assign((*bin)->getBufferStart(), (*bin)->getBufferEnd());
        ok = true;
      } else {
        log = "nvcc wrote no " + std::string(out);
      }
    }
  }
  llvm::sys::fs::remove_directories(dir);
  return ok;
}

/// nvcc's "Cuda compilation tools, release ..." line.
std::string nvccVersion(const std::string &nvcc) {
  llvm::SmallString<128> file;
  if (llvm::sys::fs::createTemporaryFile("tofuc-nvcc-version", "txt", file))
    return "nvcc";
  llvm::SmallVector<llvm::StringRef> args = {nvcc, "--version"};
  std::optional<llvm::StringRef> redirects[] = {
      std::nullopt, llvm::StringRef(file), llvm::StringRef(file)};
  llvm::sys::ExecuteAndWait(nvcc, args, std::nullopt, redirects);
  std::string version = "nvcc";
  if (auto text = llvm::MemoryBuffer::getFile(file)) {
    llvm::SmallVector<llvm::StringRef> lines;
    (*text)->getBuffer().split(lines, '\n');
    for (llvm::StringRef line : lines)
      if (line.contains("release"))
        version = line.trim().str();
  }
  llvm::sys::fs::remove(file);
  return version;
}

} // namespace

llvm::Error
tofu::cudagen::generateCudaKernels(plan::Plan &plan,
                                   const CudaCodegenOptions &options) {
  if (llvm::Error err = checkCudaArch(options.arch))
    return err;
  // Launches and fused kernels are per device: every device its program.
  plan::expandSharedPrograms(plan);
  plan.cuda = plan::CudaModule();
  plan.cuda.arch = options.arch;
  std::string nvcc;
  if (options.compile) {
    // Find nvcc before the work, so that a missing toolkit fails fast.
    auto found = findNvcc(options.nvccPath);
    if (!found)
      return found.takeError();
    nvcc = *found;
  }
  PlanKernelBuilder builder(plan, options);
  if (llvm::Error err = builder.build())
    return err;
  if (!options.compile || plan.cuda.kernels.empty())
    return llvm::Error::success();
  std::string log;
  if (runNvcc(nvcc, options.arch, plan.cuda.source, plan.cuda.cubin, log)) {
    plan.cuda.compiler = nvccVersion(nvcc);
    return llvm::Error::success();
  }
  // Name the kernel nvcc rejects: compile each one alone.
  for (size_t k = 0; k < builder.kernelSources.size(); ++k) {
    std::vector<uint8_t> unused;
    std::string kernelLog;
    if (!runNvcc(nvcc, options.arch, emitPrelude() + builder.kernelSources[k],
                 unused, kernelLog))
      return fail("nvcc (" + nvcc + ") failed on the generated CUDA kernel " +
                  plan.cuda.kernels[k].name + " (" + plan.cuda.kernels[k].ops +
                  ", first used by " + builder.kernelUses[k] + ") for " +
                  options.arch + ":\n" + kernelLog);
  }
  return fail("nvcc (" + nvcc + ") failed on the generated CUDA module for " +
              options.arch + " (every kernel compiles alone):\n" + log);
}
