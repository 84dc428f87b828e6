//===- ProgramLoweringTest.cpp - lowered programs agree with evaluate -----===//
//
// Lowers every output of every sample instance (SampleCases.h covers every
// builtin op) into a plan::ExprProgram, runs it with a tiny interpreter that
// follows the contract of runtime/include/tofu/runtime/Plan.h, and compares
// the result with the TDL reference evaluator on random inputs.
//
//===----------------------------------------------------------------------===//
#include "SampleCases.h"

#include "tofu/runtime/CounterRng.h"

#include "tofu/TDL/ProgramLowering.h"

#include <cmath>
#include <limits>
#include <set>

using namespace tofu;
using namespace tofu::tdl;
using namespace tofu::tdl::test;

namespace {

/// Interprets an ExprProgram exactly as Plan.h documents it.
class ProgramInterpreter {
public:
  ProgramInterpreter(const plan::ExprProgram &p,
                     const std::vector<const DenseTensor *> &inputs)
      : p(p), inputs(inputs), env(p.varExtents.size(), 0) {}

  DenseTensor run(const TensorType &type) {
    DenseTensor out;
    out.type = type;
    int64_t n = numElements(type.dims);
    for (int64_t flat = 0; flat < n; ++flat) {
      int64_t rest = flat;
      for (size_t d = type.dims.size(); d-- > 0;) {
        env[p.outputVars[d]] = rest % type.dims[d];
        rest /= type.dims[d];
      }
      out.data.push_back(eval(p.root));
    }
    return out;
  }

private:
  double eval(int32_t id) {
    const plan::ExprNode &n = p.nodes[id];
    EXPECT_TRUE(llvm::all_of(n.operands, [&](int32_t o) { return o < id; }));
    auto arg = [&](size_t k) { return eval(n.operands[k]); };
    switch (n.kind) {
    case plan::ExprNode::Kind::Const:
      return n.value;
    case plan::ExprNode::Kind::Var:
      return double(env[n.var]);
    case plan::ExprNode::Kind::Access: {
      const DenseTensor *t = inputs[n.input];
      if (!t)
        return 0;
      int64_t offset = 0;
      for (size_t d = 0; d < n.operands.size(); ++d) {
        auto i = static_cast<int64_t>(std::trunc(arg(d)));
        if (i < 0 || i >= t->type.dims[d])
          return 0;
        offset = offset * t->type.dims[d] + i;
      }
      return t->data[offset];
    }
    case plan::ExprNode::Kind::Neg:
      return -arg(0);
    case plan::ExprNode::Kind::Binary: {
      double a = arg(0), b = arg(1);
      switch (n.binary) {
      case plan::BinaryOp::Add: return a + b;
      case plan::BinaryOp::Sub: return a - b;
      case plan::BinaryOp::Mul: return a * b;
      case plan::BinaryOp::Div: return a / b;
      case plan::BinaryOp::FloorDiv: return std::floor(a / b);
      case plan::BinaryOp::Mod: return a - b * std::floor(a / b);
      case plan::BinaryOp::Pow: return std::pow(a, b);
      case plan::BinaryOp::Eq: return a == b;
      case plan::BinaryOp::Ne: return a != b;
      case plan::BinaryOp::Lt: return a < b;
      case plan::BinaryOp::Le: return a <= b;
      case plan::BinaryOp::Gt: return a > b;
      case plan::BinaryOp::Ge: return a >= b;
      case plan::BinaryOp::And: return a != 0 && b != 0;
      case plan::BinaryOp::Or: return a != 0 || b != 0;
      }
      return 0;
    }
    case plan::ExprNode::Kind::Call: {
      switch (n.function) {
      case plan::Function::Exp: return std::exp(arg(0));
      case plan::Function::Log: return std::log(arg(0));
      case plan::Function::Sqrt: return std::sqrt(arg(0));
      case plan::Function::Tanh: return std::tanh(arg(0));
      case plan::Function::Abs: return std::fabs(arg(0));
      case plan::Function::Max: return std::max(arg(0), arg(1));
      case plan::Function::Min: return std::min(arg(0), arg(1));
      case plan::Function::Erf: return std::erf(arg(0));
      case plan::Function::Sigmoid: return 1 / (1 + std::exp(-arg(0)));
      case plan::Function::Floor: return std::floor(arg(0));
      case plan::Function::Ceil: return std::ceil(arg(0));
      case plan::Function::Select: return arg(0) != 0 ? arg(1) : arg(2);
      case plan::Function::Uniform:
        return tofu::rng::counterUniform(arg(0), arg(1));
      }
      return 0;
    }
    case plan::ExprNode::Kind::Reduce: {
      double acc = 0;
      switch (n.reducer) {
      case plan::Reducer::Sum: acc = 0; break;
      case plan::Reducer::Prod: acc = 1; break;
      case plan::Reducer::Max:
        acc = -std::numeric_limits<double>::infinity();
        break;
      case plan::Reducer::Min:
        acc = std::numeric_limits<double>::infinity();
        break;
      }
      reduce(n, 0, acc);
      return acc;
    }
    }
    return 0;
  }

  void reduce(const plan::ExprNode &n, size_t k, double &acc) {
    if (k == n.vars.size()) {
      double v = eval(n.operands[0]);
      switch (n.reducer) {
      case plan::Reducer::Sum: acc += v; break;
      case plan::Reducer::Prod: acc *= v; break;
      case plan::Reducer::Max: acc = std::max(acc, v); break;
      case plan::Reducer::Min: acc = std::min(acc, v); break;
      }
      return;
    }
    int32_t v = n.vars[k];
    for (int64_t i = 0; i < p.varExtents[v]; ++i) {
      env[v] = i;
      reduce(n, k + 1, acc);
    }
  }

  const plan::ExprProgram &p;
  const std::vector<const DenseTensor *> &inputs;
  std::vector<int64_t> env;
};

void checkCase(const SampleCase &c, unsigned seed) {
  SCOPED_TRACE(c.describe());
  OpInstance inst = mustInstantiate(SpecLibrary::builtin(), c.op, c.types,
                                    c.attrs, c.constValues);
  std::vector<DenseTensor> storage = randomInputs(c, seed);
  std::vector<const DenseTensor *> ptrs;
  for (size_t i = 0; i < storage.size(); ++i)
    ptrs.push_back(inst.inputTypes()[i] ? &storage[i] : nullptr);
  auto expected = evaluate(inst, ptrs);
  ASSERT_TRUE(bool(expected)) << llvm::toString(expected.takeError());
  for (unsigned o = 0; o < inst.outputTypes().size(); ++o) {
    SCOPED_TRACE("output " + std::to_string(o));
    auto program = lowerToProgram(inst, o);
    if (!program) {
      std::string msg = llvm::toString(program.takeError());
      EXPECT_NE(msg.find("opaque"), std::string::npos) << msg;
      continue;
    }
    ASSERT_EQ(program->outputVars.size(), inst.outputTypes()[o].dims.size());
    auto reds = inst.reductionVars(o);
    ASSERT_EQ(program->topReductionVars.size(), reds.size());
    for (size_t r = 0; r < reds.size(); ++r)
      EXPECT_EQ(program->varExtents[program->topReductionVars[r]],
                reds[r].extent);
    DenseTensor got =
        ProgramInterpreter(*program, ptrs).run(inst.outputTypes()[o]);
    const DenseTensor &want = (*expected)[o];
    ASSERT_EQ(got.data.size(), want.data.size());
    // A program's value reaches an integer output through the runtime's
    // store, which truncates and wraps (ElementAccess.h); evaluate() does
    // the same.
    const ElemType outType = inst.outputTypes()[o].elem;
    for (size_t k = 0; k < got.data.size(); ++k) {
      double a = isFloatElem(outType) ? got.data[k]
                                      : convertToElem(got.data[k], outType);
      double b = want.data[k];
      if (std::isnan(b)) {
        EXPECT_TRUE(std::isnan(a)) << "element " << k;
        continue;
      }
      EXPECT_NEAR(a, b, 1e-12 * (1 + std::fabs(b))) << "element " << k;
    }
  }
}

TEST(ProgramLowering, EverySampleAgreesWithEvaluate) {
  for (const SampleCase &c : sampleCases())
    for (unsigned seed = 1; seed <= 2; ++seed)
      checkCase(c, seed);
}

TEST(ProgramLowering, SamplesCoverEveryBuiltinOp) {
  std::set<std::string> covered;
  for (const SampleCase &c : sampleCases())
    covered.insert(c.op);
  for (const std::string &op : SpecLibrary::builtin().opNames())
    EXPECT_TRUE(covered.count(op)) << "no sample case for " << op;
}

TEST(ProgramLowering, Errors) {
  OpInstance relu = mustInstantiate(SpecLibrary::builtin(), "Relu",
                                    {f32({2, 3})});
  auto p = lowerToProgram(relu, 1);
  ASSERT_FALSE(bool(p));
  EXPECT_NE(llvm::toString(p.takeError()).find("no output 1"),
            std::string::npos);
}

TEST(ProgramLowering, GemmShape) {
  OpInstance gemm = mustInstantiate(SpecLibrary::builtin(), "Gemm",
                                    {f32({3, 4}), f32({4, 5}), std::nullopt});
  auto p = lowerToProgram(gemm, 0);
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  // Variables m, n, k.
  EXPECT_EQ(p->varExtents, (std::vector<int64_t>{3, 5, 4}));
  EXPECT_EQ(p->outputVars, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(p->topReductionVars, (std::vector<int32_t>{2}));
  EXPECT_EQ(p->root, int32_t(p->nodes.size() - 1));
}

} // namespace
