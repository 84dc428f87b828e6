//===- KernelConformanceTest.cpp - CPU kernels against their TDL specs ----===//
//
// Every op with a TDL spec runs on the CPU backend: through its native kernel
// where one is registered, and always through the expression interpreter
// (the op's TDL expression lowered into the plan). Both are checked here
// against the TDL reference evaluator (float64, straight from the spec) on
// random inputs, for every sample instance of every builtin op and several
// seeds. The paper names this verification an open problem; for our own
// kernels this test closes it. The native kernels are templates over float
// and double (runtime/lib/FloatKernel.h): each runs in float32 and again in
// float64 (every float operand stored as float64), where it must match the
// reference to rounding (1e-12), and in bfloat16 (float32 math on widened
// copies, each result rounded once to bf16).
//
//===----------------------------------------------------------------------===//
#include "../TDL/SampleCases.h"

#include "tofu/TDL/ProgramLowering.h"
#include "tofu/runtime/ElementAccess.h"
#include "tofu/runtime/ComputeKernel.h"
#include "tofu/runtime/CounterRng.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

using namespace tofu;
using namespace tofu::tdl;
using namespace tofu::tdl::test;

namespace {

/// The runtime type of TDL element type `type`, with float32 tensors stored
/// as `floatType` (F32, or F64 for the float64 runs of the native kernels).
/// tdl::ElemType and plan::DType number the types alike.
plan::DType toPlanType(ElemType type,
                       plan::DType floatType = plan::DType::F32) {
  return type == ElemType::F32 ? floatType : static_cast<plan::DType>(type);
}

std::vector<plan::Attr> toPlanAttrs(const AttrMap &attrs) {
  std::vector<plan::Attr> result;
  for (const auto &[name, value] : attrs) {
    plan::Attr attr;
    attr.name = name;
    switch (value.kind) {
    case AttrValue::Kind::Int:
      attr.kind = plan::Attr::Kind::Int;
      attr.i = value.i;
      break;
    case AttrValue::Kind::Float:
      attr.kind = plan::Attr::Kind::Float;
      attr.f = value.f;
      break;
    case AttrValue::Kind::String:
      attr.kind = plan::Attr::Kind::String;
      attr.s = value.s;
      break;
    case AttrValue::Kind::Ints:
      attr.kind = plan::Attr::Kind::Ints;
      attr.ints = value.ints;
      break;
    }
    result.push_back(attr);
  }
  return result;
}

/// A tensor stored as the runtime stores it (f32 or f64, i64 or one byte per
/// bool).
struct Storage {
  ElemType type;
  plan::DType stored;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;

  /// `floatType`: how a float tensor is stored (F32 or F64).
  Storage(const TensorType &t, plan::DType floatType = plan::DType::F32)
      : type(t.elem), stored(toPlanType(t.elem, floatType)), dims(t.dims) {
    bytes.resize(numElements(dims) * plan::dtypeSize(stored));
  }
  bool isF64() const {
    return stored == plan::DType::F64 && type == ElemType::F32;
  }
  bool isBF16() const {
    return stored == plan::DType::BF16 && type == ElemType::F32;
  }
  int64_t size() const { return numElements(dims); }
  void set(int64_t i, double v) {
    runtime::storeElement(bytes.data(), stored, i, v);
  }
  double get(int64_t i) const {
    return runtime::loadElement(bytes.data(), stored, i);
  }
  runtime::TensorView view() {
    return runtime::TensorView::whole(bytes.data(), stored, dims);
  }
};

/// Float results may differ from the float64 reference by rounding: float32
/// by its precision, float64 (which computes what the reference computes,
/// in another order) by a few ulps of the operation's magnitudes.
bool close(double got, double want, const Storage &storage) {
  if (std::isnan(want))
    return std::isnan(got);
  if (!isFloatElem(storage.type))
    return got == want;
  double tol = storage.isF64() ? 1e-12 : 1e-4;
  // bfloat16: float32 math rounded once to 8 significant bits (half an ulp
  // is at most 2^-8 of the value).
  double rounding = storage.isBF16() ? std::ldexp(1.0, -8) : 0.0;
  return std::fabs(got - want) <=
         tol + (tol + rounding) * std::fabs(want);
}

/// Runs `sample` through one CPU path and compares with the reference; float
/// tensors are stored as `floatType` (F32 or F64).
void checkPath(const SampleCase &sample, unsigned seed,
               runtime::ComputePath path,
               plan::DType floatType = plan::DType::F32) {
  const SpecLibrary &library = SpecLibrary::builtin();
  const OpSpec *spec = library.lookup(sample.op);
  ASSERT_NE(spec, nullptr) << sample.op;
  auto instance =
      instantiate(*spec, sample.types, sample.attrs, sample.constValues);
  ASSERT_TRUE(static_cast<bool>(instance))
      << sample.describe() << ": " << llvm::toString(instance.takeError());

  // Inputs, rounded to their storage type so both sides see equal values.
  std::vector<DenseTensor> inputs = randomInputs(sample, seed);
  std::vector<Storage> inputStorage;
  std::vector<runtime::TensorView> inputViews;
  std::vector<const DenseTensor *> inputPtrs;
  inputStorage.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!sample.types[i]) {
      inputViews.push_back(runtime::TensorView::absent());
      inputPtrs.push_back(nullptr);
      continue;
    }
    inputStorage.emplace_back(*sample.types[i], floatType);
    Storage &storage = inputStorage.back();
    for (int64_t e = 0; e < storage.size(); ++e) {
      storage.set(e, inputs[i].data[e]);
      inputs[i].data[e] = storage.get(e);
    }
    inputViews.push_back(storage.view());
    inputPtrs.push_back(&inputs[i]);
  }
  auto reference = evaluate(*instance, inputPtrs);
  ASSERT_TRUE(static_cast<bool>(reference))
      << sample.describe() << ": " << llvm::toString(reference.takeError());

  std::vector<plan::ExprProgram> programs;
  for (unsigned o = 0; o < instance->outputTypes().size(); ++o) {
    auto program = lowerToProgram(*instance, o);
    ASSERT_TRUE(static_cast<bool>(program))
        << sample.describe() << ": " << llvm::toString(program.takeError());
    programs.push_back(std::move(*program));
  }
  std::vector<Storage> outputStorage;
  std::vector<runtime::TensorView> outputViews;
  outputStorage.reserve(instance->outputTypes().size());
  for (const TensorType &type : instance->outputTypes())
    outputStorage.emplace_back(type, floatType);
  for (Storage &storage : outputStorage)
    outputViews.push_back(storage.view());

  runtime::ComputePath used;
  std::string err =
      runtime::runCompute(sample.op, toPlanAttrs(instance->attrs()),
                          inputViews, outputViews, programs, {}, path, &used);
  ASSERT_EQ(err, "") << sample.describe();
  ASSERT_EQ(used, path) << sample.describe();
  for (size_t o = 0; o < outputStorage.size(); ++o)
    for (int64_t e = 0; e < outputStorage[o].size(); ++e) {
      double want = (*reference)[o].data[e];
      double got = outputStorage[o].get(e);
      ASSERT_TRUE(close(got, want, outputStorage[o]))
          << sample.describe() << " in "
          << plan::dtypeNumpyName(floatType) << " seed "
          << seed << " output " << o << " element " << e << ": got " << got
          << ", TDL reference " << want;
    }
}

TEST(KernelConformance, InterpreterMatchesTdlReference) {
  for (const SampleCase &sample : sampleCases())
    for (unsigned seed : {1u, 2u, 3u})
      checkPath(sample, seed, runtime::ComputePath::Interpreter);
}

/// Checks every sample of an op with a native kernel on the native path,
/// its float operands stored as `floatType`; returns how many ops it
/// checked.
static int checkNativeSamples(plan::DType floatType) {
  int checked = 0;
  for (SampleCase sample : sampleCases()) {
    if (!runtime::hasNativeKernel(sample.op))
      continue;
    // A label outside [0, C) that is not ignore_index is undefined in ONNX;
    // the native loss kernels reject it (the spec reads such a row as 0):
    // those samples are compared on labels in range.
    if (sample.op.rfind("SoftmaxCrossEntropyLoss", 0) == 0 &&
        !sample.attrs.count("ignore_index"))
      sample.intLo = 0;
    for (unsigned seed : {1u, 2u, 3u})
      checkPath(sample, seed, runtime::ComputePath::Native, floatType);
    ++checked;
  }
  return checked;
}

TEST(KernelConformance, NativeKernelsMatchTdlReference) {
  // The MLP's kernels at least (Gemm, Relu, the loss, SGD, ...).
  EXPECT_GE(checkNativeSamples(plan::DType::F32), 8);
}

/// The same samples with every float operand in float64: each native kernel
/// is one template over float and double, and its float64 instantiation must
/// match the (float64) reference to rounding.
TEST(KernelConformance, NativeKernelsMatchTdlReferenceInFloat64) {
  EXPECT_GE(checkNativeSamples(plan::DType::F64), 8);
}

/// The same samples with every float operand in bfloat16 (the storage of
/// `tofuc --precision bf16`'s MatMul, Gemm and Conv and their gradients):
/// every native kernel takes bf16 through its float32 instantiation on
/// widened copies (FloatKernel.h) and rounds each result once, and the
/// copying kernels move bf16 as bytes; none may fall to the interpreter or
/// read bf16 bits as another type.
TEST(KernelConformance, NativeKernelsMatchTdlReferenceInBFloat16) {
  EXPECT_GE(checkNativeSamples(plan::DType::BF16), 8);
}

/// Mixed float32 and float64 operands: the native kernel declines (never
/// reads one as the other), and runCompute's interpreter converts them.
TEST(KernelConformance, MixedFloatPrecisionsGoToTheInterpreter) {
  const SampleCase sample = {"MatMul", {f32({2, 3}), f32({3, 2})}};
  auto instance = instantiate(*SpecLibrary::builtin().lookup("MatMul"),
                              sample.types, sample.attrs, sample.constValues);
  ASSERT_TRUE(static_cast<bool>(instance))
      << llvm::toString(instance.takeError());
  auto program = lowerToProgram(*instance, 0);
  ASSERT_TRUE(static_cast<bool>(program))
      << llvm::toString(program.takeError());
  std::vector<double> x = {1, 2, 3, 4, 5, 6};
  std::vector<float> w = {1, 0, 0, 1, 1, 1}, y(4);
  std::vector<runtime::TensorView> in = {
      runtime::TensorView::whole(x.data(), plan::DType::F64, {2, 3}),
      runtime::TensorView::whole(w.data(), plan::DType::F32, {3, 2})};
  std::vector<runtime::TensorView> out = {
      runtime::TensorView::whole(y.data(), plan::DType::F32, {2, 2})};
  std::string err = runtime::runCompute("MatMul", {}, in, out, {*program}, {},
                                        runtime::ComputePath::Native);
  EXPECT_NE(err.find("mixed float32 and float64 operands"), std::string::npos)
      << err;
  runtime::ComputePath used;
  ASSERT_EQ(runtime::runCompute("MatMul", {}, in, out, {*program}, {},
                                runtime::ComputePath::Auto, &used),
            "");
  EXPECT_EQ(used, runtime::ComputePath::Interpreter);
  EXPECT_EQ(y, (std::vector<float>{4, 5, 10, 11}));
}

/// One split of a share grid: output dim `dim` (or, with dim < 0, the
/// top-level reduction variable `-dim - 1`, each share a partial sum) cut
/// into `parts` (more parts than elements give empty shares).
struct Split {
  int dim;
  int64_t parts;
};

/// What checkNativeShares saw.
enum class ShareResult {
  Ran,       ///< every share ran natively and the joined output is right
  Declined,  ///< the kernel declined a share that the interpreter ran
  Statistic, ///< it declined a lone statistic output (only the interpreter)
};

/// The shares of a partitioned op, as the compiler materializes them: one
/// output at a time, its box cut along every split of `splits` (a grid),
/// every input cut to the region the interval analysis says the share needs.
/// Each share runs through the native kernel and through the interpreter;
/// the two must agree on the share to rounding, and the shares put together
/// (added, for a reduction split) must equal the TDL reference. A share the
/// kernel declines as an unsupported configuration is a Declined result
/// when the interpreter runs it (the run would be slow there, issue 16),
/// and is named on stderr; `declines` counts those shares.
ShareResult checkNativeShares(const SampleCase &sample, unsigned seed,
                              unsigned output, const std::vector<Split> &splits,
                              plan::DType floatType, int &declines) {
  const SpecLibrary &library = SpecLibrary::builtin();
  auto instance = instantiate(*library.lookup(sample.op), sample.types,
                              sample.attrs, sample.constValues);
  EXPECT_TRUE(static_cast<bool>(instance));
  if (!instance)
    return ShareResult::Ran;
  std::vector<DenseTensor> inputs = randomInputs(sample, seed);
  std::vector<const DenseTensor *> inputPtrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!sample.types[i]) {
      inputPtrs.push_back(nullptr);
      continue;
    }
    Storage storage(*sample.types[i], floatType); // round to the storage type
    for (int64_t e = 0; e < storage.size(); ++e) {
      storage.set(e, inputs[i].data[e]);
      inputs[i].data[e] = storage.get(e);
    }
    inputPtrs.push_back(&inputs[i]);
  }
  auto reference = evaluate(*instance, inputPtrs);
  EXPECT_TRUE(static_cast<bool>(reference));
  if (!reference)
    return ShareResult::Ran;
  auto program = lowerToProgram(*instance, output);
  EXPECT_TRUE(static_cast<bool>(program));
  if (!program)
    return ShareResult::Ran;
  const TensorType &outType = instance->outputTypes()[output];
  const std::vector<int64_t> &dims = outType.dims;
  std::vector<double> joined(numElements(dims), 0.0);
  std::vector<ReductionVar> redVars = instance->reductionVars(output);
  std::string what = sample.describe() + " output " + std::to_string(output) +
                     " split";
  int64_t shares = 1;
  for (const Split &s : splits) {
    shares *= s.parts;
    what += s.dim >= 0 ? " dim " + std::to_string(s.dim)
                       : " reduction " + std::to_string(-s.dim - 1);
    what += " in " + std::to_string(s.parts);
  }
  what += floatType == plan::DType::F32 ? " (float32)" : " (float64)";
  ShareResult result = ShareResult::Ran;
  for (int64_t w = 0; w < shares; ++w) {
    Box box;
    for (int64_t d : dims)
      box.push_back({0, d});
    std::vector<Range> ranges;
    for (const ReductionVar &v : redVars)
      ranges.push_back({0, v.extent});
    int64_t rest = w;
    for (const Split &s : splits) {
      const int64_t part = rest % s.parts;
      rest /= s.parts;
      if (s.dim >= 0) {
        box[s.dim] = {dims[s.dim] * part / s.parts,
                      dims[s.dim] * (part + 1) / s.parts};
      } else {
        int64_t extent = redVars[-s.dim - 1].extent;
        ranges[-s.dim - 1] = {extent * part / s.parts,
                              extent * (part + 1) / s.parts};
      }
    }
    bool anyReduction = false;
    for (const Split &s : splits)
      anyReduction |= s.dim < 0;
    if (!anyReduction)
      ranges.clear();
    auto needed = instance->requiredRegions(output, box, ranges);
    // Inputs: the needed boxes, copied out of the whole tensors.
    std::vector<Storage> storage;
    storage.reserve(inputs.size());
    std::vector<runtime::TensorView> views;
    uint8_t dummy = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!sample.types[i]) {
        views.push_back(runtime::TensorView::absent());
        continue;
      }
      const TensorType &type = *sample.types[i];
      Box region = needed[i] ? *needed[i] : Box();
      if (instance->isConstInput(unsigned(i)) || region.size() != type.dims.size()) {
        region.clear();
        for (int64_t d : type.dims)
          region.push_back({0, d});
      }
      std::vector<int64_t> local;
      plan::Box planBox;
      for (const Range &r : region) {
        local.push_back(std::max<int64_t>(r.hi - r.lo, 0));
        planBox.lo.push_back(r.lo);
        planBox.hi.push_back(std::max(r.hi, r.lo));
      }
      storage.emplace_back(TensorType{local, type.elem}, floatType);
      Storage &st = storage.back();
      std::vector<int64_t> g(region.size());
      for (size_t d = 0; d < region.size(); ++d)
        g[d] = region[d].lo;
      for (int64_t k = 0; k < st.size(); ++k) {
        int64_t flat = 0;
        for (size_t d = 0; d < g.size(); ++d)
          flat = flat * type.dims[d] + g[d];
        st.set(k, inputs[i].data[flat]);
        for (size_t d = g.size(); d-- > 0;) {
          if (++g[d] < region[d].hi)
            break;
          g[d] = region[d].lo;
        }
      }
      void *data = st.bytes.empty() ? static_cast<void *>(&dummy)
                                    : st.bytes.data();
      views.push_back(
          runtime::TensorView::ofRegion(data, st.stored, planBox, type.dims));
    }
    std::vector<int64_t> local;
    plan::Box outBox;
    for (const Range &r : box) {
      local.push_back(r.hi - r.lo);
      outBox.lo.push_back(r.lo);
      outBox.hi.push_back(r.hi);
    }
    Storage out(TensorType{local, outType.elem}, floatType);
    Storage viaInterpreter(TensorType{local, outType.elem}, floatType);
    std::vector<runtime::TensorView> outViews = {runtime::TensorView::ofRegion(
        out.bytes.data(), out.stored, outBox, dims)};
    std::vector<runtime::TensorView> interpreterViews = {
        runtime::TensorView::ofRegion(viaInterpreter.bytes.data(),
                                      viaInterpreter.stored, outBox, dims)};
    std::vector<runtime::ReductionRanges> rr(1);
    for (const Range &r : ranges)
      rr[0].push_back({r.lo, r.hi});
    // As Materialize does: an instruction computing one output of a
    // multi-output op names it.
    std::vector<plan::Attr> attrs = toPlanAttrs(instance->attrs());
    if (instance->outputTypes().size() > 1) {
      plan::Attr which;
      which.name = "tofu.output";
      which.i = output;
      attrs.push_back(which);
    }
    std::string viaInterp = runtime::runCompute(
        sample.op, attrs, views, interpreterViews, {*program}, rr,
        runtime::ComputePath::Interpreter);
    EXPECT_EQ(viaInterp, "") << what << ", share " << w << ": the interpreter";
    std::string err = runtime::runCompute(
        sample.op, attrs, views, outViews,
        {*program}, rr, runtime::ComputePath::Native);
    if (err.find("unsupported configuration: ") != std::string::npos) {
      if (err.find("a lone ") != std::string::npos)
        return ShareResult::Statistic;
      std::fprintf(stderr, "declined: %s, share %ld: %s\n", what.c_str(),
                   long(w), err.c_str());
      ++declines;
      result = ShareResult::Declined;
      continue;
    }
    EXPECT_EQ(err, "") << what << ", share " << w;
    if (!err.empty())
      return ShareResult::Ran;
    // The native share equals the interpreter's; then scatter (or add) it
    // into the joined tensor.
    std::vector<int64_t> g(box.size());
    for (size_t d = 0; d < box.size(); ++d)
      g[d] = box[d].lo;
    for (int64_t k = 0; k < out.size(); ++k) {
      EXPECT_TRUE(close(out.get(k), viaInterpreter.get(k), out))
          << what << ", share " << w << " element " << k << ": native "
          << out.get(k) << ", interpreter " << viaInterpreter.get(k);
      int64_t flat = 0;
      for (size_t d = 0; d < g.size(); ++d)
        flat = flat * dims[d] + g[d];
      joined[flat] += out.get(k);
      for (size_t d = g.size(); d-- > 0;) {
        if (++g[d] < box[d].hi)
          break;
        g[d] = box[d].lo;
      }
    }
  }
  if (result != ShareResult::Ran)
    return result;
  const Storage whole(outType, floatType);
  for (size_t e = 0; e < joined.size(); ++e)
    EXPECT_TRUE(close(joined[e], (*reference)[output].data[e], whole))
        << what << ", element " << e << ": got " << joined[e]
        << ", TDL reference " << (*reference)[output].data[e];
  return ShareResult::Ran;
}

/// Every native kernel on partitioned shares: each output dim and each
/// splittable top-level reduction variable cut in 2, 3 and 4 parts (an
/// output dim of 3 in 4 leaves an empty share; a reduction variable is cut
/// in at most its extent), and every pair of them cut in 2 x 3 (a box that
/// one dim places inside a slice and the other outside it);
/// float operands stored as `floatType`. No kernel declines a share that
/// the interpreter runs: what a plan's partitioning gives an instruction,
/// the native kernel computes (the interpreter is 10-1000x slower, issue 16).
/// Without `reductionSplits`, only output dims are cut.
void checkAllNativeShares(plan::DType floatType, bool reductionSplits = true) {
  int grids = 0, declinedGrids = 0, declines = 0, statistics = 0;
  for (SampleCase sample : sampleCases()) {
    if (!runtime::hasNativeKernel(sample.op))
      continue;
    if (sample.op.rfind("SoftmaxCrossEntropyLoss", 0) == 0 &&
        !sample.attrs.count("ignore_index"))
      sample.intLo = 0;
    const SpecLibrary &library = SpecLibrary::builtin();
    auto instance = instantiate(*library.lookup(sample.op), sample.types,
                                sample.attrs, sample.constValues);
    ASSERT_TRUE(static_cast<bool>(instance)) << sample.describe();
    for (unsigned o = 0; o < instance->outputTypes().size(); ++o) {
      const auto &dims = instance->outputTypes()[o].dims;
      std::vector<ReductionVar> redVars = instance->reductionVars(o);
      std::vector<int> axes; // output dims, then -1 - reduction variable
      for (size_t d = 0; d < dims.size(); ++d)
        if (dims[d] >= 2)
          axes.push_back(int(d));
      for (size_t r = 0; r < redVars.size() && reductionSplits; ++r)
        if (redVars[r].splittable && redVars[r].extent >= 2)
          axes.push_back(-int(r) - 1);
      // A reduction split gives every share part of the range (an empty
      // range is no partial sum a plan makes).
      auto extent = [&](int a) {
        return a >= 0 ? dims[size_t(a)] : redVars[size_t(-a - 1)].extent;
      };
      auto fits = [&](int a, int64_t parts) {
        return a >= 0 || extent(a) >= parts;
      };
      std::vector<std::vector<Split>> cases;
      for (int a : axes)
        for (int64_t parts : {2, 3, 4})
          if (fits(a, parts))
            cases.push_back({{a, parts}});
      for (size_t i = 0; i < axes.size(); ++i)
        for (size_t j = i + 1; j < axes.size(); ++j)
          if ((axes[i] >= 0 || axes[j] >= 0) && fits(axes[j], 3))
            cases.push_back({{axes[i], 2}, {axes[j], 3}});
      for (const std::vector<Split> &splits : cases) {
        ShareResult r =
            checkNativeShares(sample, 1, o, splits, floatType, declines);
        ++grids;
        declinedGrids += r == ShareResult::Declined;
        statistics += r == ShareResult::Statistic;
      }
    }
  }
  EXPECT_GT(grids, 300);
  EXPECT_EQ(declines, 0) << declines << " shares of " << declinedGrids
                         << " partitionings declined (listed on stderr)";
  EXPECT_EQ(statistics, 0) << "lone statistic outputs declined";
}

TEST(KernelConformance, NativeKernelsOnPartitionedShares) {
  checkAllNativeShares(plan::DType::F32);
}

TEST(KernelConformance, NativeKernelsOnPartitionedSharesInFloat64) {
  checkAllNativeShares(plan::DType::F64);
}

/// bf16 shares (--precision bf16 at k > 1): output-dim splits only. A split
/// reduction's shares are partial sums each rounded to bf16 and added in
/// bf16, which departs from the reference by bf16 roundings of the
/// partials, not of the result (docs/Training.md, "Mixed precision").
TEST(KernelConformance, NativeKernelsOnPartitionedSharesInBFloat16) {
  checkAllNativeShares(plan::DType::BF16, /*reductionSplits=*/false);
}
/// Random ops (Dropout's mask) must not depend on the partitioning: each
/// device evaluates its share of the output at global coordinates, so the
/// shares of k devices put together equal the k = 1 tensor bit for bit. Step
/// 0 draws the TDL reference's mask, a later training step another one.
TEST(KernelConformance, DropoutMaskIsIndependentOfPartitioning) {
  const SpecLibrary &library = SpecLibrary::builtin();
  TensorType b{{}, ElemType::Bool};
  const std::vector<int64_t> dims = {6, 10};
  for (const char *op : {"Dropout", "DropoutGrad"}) {
    bool grad = std::string(op) == "DropoutGrad";
    std::vector<std::optional<TensorType>> types = {f32(dims)};
    std::map<unsigned, std::vector<double>> consts;
    AttrMap attrs = {{"seed", AttrValue::ofInt(9)}};
    if (grad) {
      attrs["ratio"] = AttrValue::ofFloat(0.5);
    } else {
      types.push_back(f32({}));
      types.push_back(b);
      consts = {{1, {0.5}}, {2, {1}}};
    }
    auto instance = instantiate(*library.lookup(op), types, attrs, consts);
    ASSERT_TRUE(static_cast<bool>(instance))
        << llvm::toString(instance.takeError());
    std::vector<plan::ExprProgram> programs;
    for (unsigned o = 0; o < instance->outputTypes().size(); ++o) {
      auto program = lowerToProgram(*instance, o);
      ASSERT_TRUE(static_cast<bool>(program));
      programs.push_back(std::move(*program));
    }
    std::vector<float> data(60);
    for (size_t e = 0; e < data.size(); ++e)
      data[e] = 1.0f + static_cast<float>(e);
    float ratio = 0.5f;
    uint8_t mode = 1;
    auto constViews = [&] {
      std::vector<runtime::TensorView> v;
      if (!grad) {
        v.push_back(runtime::TensorView::whole(&ratio, plan::DType::F32, {}));
        v.push_back(runtime::TensorView::whole(&mode, plan::DType::Bool, {}));
      }
      return v;
    };
    // k = 1.
    std::vector<float> wholeOut(60);
    std::vector<uint8_t> wholeMask(60);
    std::vector<runtime::TensorView> in = {
        runtime::TensorView::whole(data.data(), plan::DType::F32, dims)};
    for (auto &v : constViews())
      in.push_back(v);
    std::vector<runtime::TensorView> out = {
        runtime::TensorView::whole(wholeOut.data(), plan::DType::F32, dims)};
    if (!grad)
      out.push_back(
          runtime::TensorView::whole(wholeMask.data(), plan::DType::Bool, dims));
    // Step 0 (the default) is the TDL reference's mask.
    ASSERT_EQ(runtime::runCompute(op, toPlanAttrs(instance->attrs()), in, out,
                                  programs, {}),
              "");
    for (size_t e = 0; e < wholeOut.size(); ++e) {
      bool keep = tofu::rng::counterUniform(9, double(e)) >= 0.5;
      EXPECT_EQ(wholeOut[e], keep ? data[e] / 0.5f : 0.0f) << op << " " << e;
    }
    // Another training step draws another mask.
    std::vector<float> step5(60);
    std::vector<runtime::TensorView> out5 = {
        runtime::TensorView::whole(step5.data(), plan::DType::F32, dims)};
    std::vector<uint8_t> mask5(60);
    if (!grad)
      out5.push_back(
          runtime::TensorView::whole(mask5.data(), plan::DType::Bool, dims));
    ASSERT_EQ(runtime::runCompute(op, toPlanAttrs(instance->attrs()), in, out5,
                                  programs, {}, runtime::ComputePath::Auto,
                                  nullptr, /*randomStep=*/5),
              "");
    EXPECT_NE(step5, wholeOut) << op;
    for (size_t e = 0; e < step5.size(); ++e) {
      bool keep = tofu::rng::counterUniform(9, double(e), 5) >= 0.5;
      EXPECT_EQ(step5[e], keep ? data[e] / 0.5f : 0.0f) << op << " " << e;
    }
    int dropped = 0;
    for (float v : wholeOut)
      dropped += v == 0;
    EXPECT_GT(dropped, 10) << op;
    EXPECT_LT(dropped, 50) << op;
    // k parts along each dim.
    for (size_t dim = 0; dim < 2; ++dim)
      for (int64_t parts : {2, 3, 4}) {
        std::vector<float> joinedOut(60, -1);
        std::vector<uint8_t> joinedMask(60, 7);
        for (int64_t w = 0; w < parts; ++w) {
          plan::Box box{{0, 0}, dims};
          box.lo[dim] = dims[dim] * w / parts;
          box.hi[dim] = dims[dim] * (w + 1) / parts;
          std::vector<float> localIn, localOut(box.numElements());
          std::vector<uint8_t> localMask(box.numElements());
          for (int64_t r = box.lo[0]; r < box.hi[0]; ++r)
            for (int64_t c = box.lo[1]; c < box.hi[1]; ++c)
              localIn.push_back(data[r * 10 + c]);
          std::vector<runtime::TensorView> pin = {runtime::TensorView::ofRegion(
              localIn.data(), plan::DType::F32, box, dims)};
          for (auto &v : constViews())
            pin.push_back(v);
          std::vector<runtime::TensorView> pout = {
              runtime::TensorView::ofRegion(localOut.data(), plan::DType::F32,
                                            box, dims)};
          if (!grad)
            pout.push_back(runtime::TensorView::ofRegion(
                localMask.data(), plan::DType::Bool, box, dims));
          ASSERT_EQ(runtime::runCompute(op, toPlanAttrs(instance->attrs()), pin,
                                        pout, programs, {},
                                        runtime::ComputePath::Auto, nullptr,
                                        /*randomStep=*/5),
                    "");
          size_t k = 0;
          for (int64_t r = box.lo[0]; r < box.hi[0]; ++r)
            for (int64_t c = box.lo[1]; c < box.hi[1]; ++c, ++k) {
              joinedOut[r * 10 + c] = localOut[k];
              joinedMask[r * 10 + c] = localMask[k];
            }
        }
        EXPECT_EQ(joinedOut, step5) << op << " dim " << dim << " parts "
                                    << parts;
        if (!grad)
          EXPECT_EQ(joinedMask, mask5)
              << op << " dim " << dim << " parts " << parts;
      }
  }
}

TEST(KernelConformance, EveryNativeKernelHasASpecAndASample) {
  // A native kernel without a sample case would escape this test.
  std::set<std::string> sampled;
  for (const SampleCase &sample : sampleCases())
    sampled.insert(sample.op);
  for (const std::string &op : SpecLibrary::builtin().opNames())
    if (runtime::hasNativeKernel(op))
      EXPECT_TRUE(sampled.count(op)) << op << " has no sample case";
}

} // namespace
