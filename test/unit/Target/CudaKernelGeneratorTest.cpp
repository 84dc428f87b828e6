//===- CudaKernelGeneratorTest.cpp - generated CUDA kernels, run on the host ===//
//
// The CUDA kernels tofuc generates from TDL programs are checked here without
// a GPU: the generated translation unit is compiled as plain C++ with the
// host compiler (its `__host__ __device__` element functions and `<name>_host`
// drivers), loaded with dlopen and run
//   - for every sample instance of every builtin op (test/unit/TDL/
//     SampleCases.h), every output, on random inputs: the whole tensor
//     against the TDL reference evaluator (fp32 tolerance) and against the
//     CPU expression interpreter (bit-exact; block-reduction kernels within
//     the rounding of their tree order), and partitioned shares (an
//     output dimension split, a top-level reduction split) against the
//     interpreter on the same local buffers; with tensors stored as the
//     samples say (float32/int64), as float64, and as float16 or bfloat16
//     with int32;
//   - Cast kernels from float64 to every element type and back, against the
//     CPU backend's conversions (runtime/include/tofu/runtime/
//     ElementAccess.h) on values at the edges of each rule;
//   - for a hand-built plan, through the plan-level generator: fused chains
//     of element-wise instructions with their launch metadata, against
//     running the instructions one by one on the CPU.
// test/tofuc/cuda-kernels.test checks that nvcc accepts the same kernels.
//
//===----------------------------------------------------------------------===//
#include "../TDL/SampleCases.h"

#include "tofu/TDL/ProgramLowering.h"
#include "tofu/Target/CudaKernelGenerator.h"
#include "tofu/runtime/ElementAccess.h"
#include "tofu/runtime/ComputeKernel.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>

using namespace tofu;
using namespace tofu::tdl;
using namespace tofu::tdl::test;

namespace {

using HostDriver = void (*)(void *const *, const int64_t *, uint64_t,
                            unsigned long long *);

/// tdl::ElemType and plan::DType number the types alike.
plan::DType toPlanType(ElemType type) { return static_cast<plan::DType>(type); }

/// A dense buffer holding `n` elements of `type` as the runtime stores them.
struct Storage {
  plan::DType type;
  std::vector<uint8_t> bytes;
  Storage(plan::DType type, int64_t n)
      : type(type), bytes(static_cast<size_t>(n) * plan::dtypeSize(type) + 8) {}
  int64_t size() const {
    return static_cast<int64_t>((bytes.size() - 8) / plan::dtypeSize(type));
  }
  void set(int64_t i, double v) { runtime::storeElement(bytes.data(), type, i, v); }
  double get(int64_t i) const {
    return runtime::loadElement(bytes.data(), type, i);
  }
};

/// Same value, NaN equal to NaN.
bool identical(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

/// How far a block-reduction kernel (cudagen::blockReductionRoot: the
/// threads of a block share the root reduction and combine their partial
/// sums in a tree) may be from the sequential interpreter: the rounding of
/// a different summation order in double, 1e-12 of the largest magnitude
/// `scale` of the output, then at most one unit of the stored type's last
/// place. Integer outputs must be identical.
double blockReductionTolerance(plan::DType stored, double want, double scale) {
  const double eps = stored == plan::DType::F64    ? 0x1p-52
                     : stored == plan::DType::F32  ? 0x1p-23
                     : stored == plan::DType::F16  ? 0x1p-10
                     : stored == plan::DType::BF16 ? 0x1p-7
                                                   : 0.0;
  return eps == 0.0 ? 0.0 : eps * std::fabs(want) + 1e-12 * scale;
}

/// Compiles `source` with the host C++ compiler into a shared object and
/// loads it. Fails the test (returns null) with the compiler's output.
class HostModule {
public:
  static std::unique_ptr<HostModule> compile(const std::string &source) {
    auto m = std::make_unique<HostModule>();
    llvm::SmallString<128> dir;
    if (llvm::sys::fs::createUniqueDirectory("tofu-cuda-host", dir)) {
      ADD_FAILURE() << "cannot create a temporary directory";
      return nullptr;
    }
    m->dir = std::string(dir);
    std::string cpp = m->dir + "/kernels.cpp", so = m->dir + "/kernels.so",
                log = m->dir + "/log.txt";
    {
      std::error_code ec;
      llvm::raw_fd_ostream os(cpp, ec);
      EXPECT_FALSE(ec) << ec.message();
      os << source;
    }
    llvm::SmallVector<llvm::StringRef> args = {
        TOFU_HOST_CXX, "-std=c++17",    "-O1",  "-ffp-contract=off",
        "-fPIC",       "-shared",       "-w",   "-o",
        so,            cpp};
    std::optional<llvm::StringRef> redirects[] = {std::nullopt,
                                                  llvm::StringRef(log),
                                                  llvm::StringRef(log)};
    int rc = llvm::sys::ExecuteAndWait(TOFU_HOST_CXX, args, std::nullopt,
                                       redirects);
    if (rc != 0) {
      auto text = llvm::MemoryBuffer::getFile(log);
      ADD_FAILURE() << "the host compiler rejects the generated source (kept "
                       "in "
                    << cpp << "):\n"
                    << (text ? (*text)->getBuffer().str() : "");
      m->keep = true;
      return nullptr;
    }
    m->handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!m->handle) {
      ADD_FAILURE() << "dlopen: " << dlerror();
      return nullptr;
    }
    return m;
  }
  HostDriver driver(const std::string &kernel) const {
    return reinterpret_cast<HostDriver>(
        dlsym(handle, (kernel + "_host").c_str()));
  }
  ~HostModule() {
    if (handle)
      dlclose(handle);
    if (!keep && !dir.empty())
      llvm::sys::fs::remove_directories(dir);
  }

private:
  void *handle = nullptr;
  std::string dir;
  bool keep = false;
};

/// How a variant of the sample cases stores its tensors: float32 tensors as
/// `floatType`, int64 tensors as `intType` (bool stays bool). The programs
/// are the same; only the loads and stores of the kernels differ.
struct Storing {
  plan::DType floatType = plan::DType::F32, intType = plan::DType::I64;
  plan::DType operator()(ElemType t) const {
    return t == ElemType::F32   ? floatType
           : t == ElemType::I64 ? intType
                                : toPlanType(t);
  }
  std::string describe() const {
    return std::string(plan::dtypeNumpyName(floatType)) + "/" +
           plan::dtypeNumpyName(intType);
  }
};

/// One program of one sample op, with the inputs it is run on.
struct Case {
  Storing storing;
  SampleCase sample;
  unsigned output = 0;
  std::unique_ptr<OpInstance> instance;
  plan::ExprProgram program;
  cudagen::KernelDescription kernel;
  std::string name;
  std::string describe() const {
    return sample.describe() + " output " + std::to_string(output) +
           " stored as " + storing.describe();
  }
};

/// Copies box `region` (global coordinates) of a whole row-major tensor.
Storage extract(const std::vector<double> &whole,
                const std::vector<int64_t> &dims, plan::DType type,
                const plan::Box &region) {
  Storage st(type, region.numElements());
  std::vector<int64_t> g = region.lo;
  for (int64_t k = 0; k < st.size(); ++k) {
    int64_t flat = 0;
    for (size_t d = 0; d < g.size(); ++d)
      flat = flat * dims[d] + g[d];
    st.set(k, whole[flat]);
    for (size_t d = g.size(); d-- > 0;) {
      if (++g[d] < region.hi[d])
        break;
      g[d] = region.lo[d];
    }
  }
  return st;
}

plan::Box wholeBox(const std::vector<int64_t> &dims) {
  plan::Box box;
  box.lo.assign(dims.size(), 0);
  box.hi = dims;
  return box;
}

/// Runs one share of `c`: output box `outBox`, top-level reduction ranges
/// `ranges` (empty = whole), inputs cut to what the interval analysis says
/// the share needs. Compares the generated code with the interpreter
/// (bit-exact) and, for the whole tensor, with the TDL reference.
void runShare(const Case &c, HostDriver driver,
              const std::vector<DenseTensor> &inputs,
              const std::vector<double> *reference, const plan::Box &outBox,
              const std::vector<std::pair<int64_t, int64_t>> &ranges,
              const std::string &what, bool block = false) {
  const TensorType &outType = c.instance->outputTypes()[c.output];
  Box box;
  for (size_t d = 0; d < outBox.lo.size(); ++d)
    box.push_back({outBox.lo[d], outBox.hi[d]});
  std::vector<Range> rr;
  for (auto [lo, hi] : ranges)
    rr.push_back({lo, hi});
  if (rr.empty())
    for (const ReductionVar &v : c.instance->reductionVars(c.output))
      rr.push_back({0, v.extent});
  auto needed = c.instance->requiredRegions(c.output, box, rr);

  std::vector<Storage> storage;
  storage.reserve(inputs.size());
  std::vector<runtime::TensorView> views;
  std::vector<plan::Box> regions;
  std::vector<void *> ptrs(1 + inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!c.sample.types[i]) {
      views.push_back(runtime::TensorView::absent());
      regions.push_back({});
      continue;
    }
    const TensorType &type = *c.sample.types[i];
    plan::Box region = wholeBox(type.dims);
    if (needed[i] && needed[i]->size() == type.dims.size() &&
        !c.instance->isConstInput(unsigned(i)))
      for (size_t d = 0; d < type.dims.size(); ++d) {
        region.lo[d] = (*needed[i])[d].lo;
        region.hi[d] = (*needed[i])[d].hi;
      }
    storage.push_back(
        extract(inputs[i].data, type.dims, c.storing(type.elem), region));
    views.push_back(runtime::TensorView::ofRegion(
        storage.back().bytes.data(), c.storing(type.elem), region,
        type.dims));
    regions.push_back(region);
    ptrs[1 + i] = storage.back().bytes.data();
  }
  plan::DType outDType = c.storing(outType.elem);
  Storage generated(outDType, outBox.numElements());
  Storage interpreted(outDType, outBox.numElements());
  ptrs[0] = generated.bytes.data();
  std::vector<int64_t> params =
      cudagen::launchParams(c.kernel, outBox, regions, {ranges});
  unsigned long long error[12] = {};
  driver(ptrs.data(), params.data(), 0, error);
  EXPECT_EQ(error[0], 0u) << c.describe() << " " << what
                          << ": the generated code reports an out-of-buffer "
                             "read of input "
                          << error[2];

  runtime::TensorView outView = runtime::TensorView::ofRegion(
      interpreted.bytes.data(), outDType, outBox, outType.dims);
  std::string err = runtime::runCompute(
      c.sample.op, {}, views, {outView}, {c.program},
      {runtime::ReductionRanges(ranges)}, runtime::ComputePath::Interpreter);
  ASSERT_EQ(err, "") << c.describe() << " " << what;
  // Bit-exact, except the block variant (`block`), whose threads share the
  // root reduction.
  double scale = 0;
  for (int64_t e = 0; e < interpreted.size(); ++e)
    if (std::isfinite(interpreted.get(e)))
      scale = std::max(scale, std::fabs(interpreted.get(e)));
  for (int64_t e = 0; e < generated.size(); ++e) {
    const double got = generated.get(e), want = interpreted.get(e);
    ASSERT_TRUE(identical(got, want) ||
                (block && std::fabs(got - want) <=
                              blockReductionTolerance(outDType, want, scale)))
        << c.describe() << " " << what << " element " << e
        << ": generated code gives " << got << ", the interpreter " << want
        << (block ? " (block reduction)" : "");
    if (reference) {
      // The reference computes in double on the same (rounded) inputs; the
      // kernel differs by its final rounding and its order of operations.
      double want = (*reference)[e], got = generated.get(e);
      double tol = outDType == plan::DType::F32    ? 1e-4
                   : outDType == plan::DType::F64  ? 1e-10
                   : outDType == plan::DType::F16  ? 1e-3
                   : outDType == plan::DType::BF16 ? 8e-3
                                                   : 0;
      bool close = std::isnan(want)
                       ? std::isnan(got)
                       : std::fabs(got - want) <= tol + tol * std::fabs(want);
      ASSERT_TRUE(close) << c.describe() << " " << what << " element " << e
                         << ": generated code gives " << got
                         << ", the TDL reference " << want;
    }
  }
}

/// Every builtin op's sample instances, one kernel per output program, with
/// tensors stored as `storing` says.
std::vector<std::unique_ptr<Case>>
buildCases(Storing storing = {},
           const std::vector<SampleCase> &samples = sampleCases()) {
  std::vector<std::unique_ptr<Case>> cases;
  const SpecLibrary &library = SpecLibrary::builtin();
  for (const SampleCase &sample : samples) {
    auto instance = instantiate(*library.lookup(sample.op), sample.types,
                                sample.attrs, sample.constValues);
    EXPECT_TRUE(static_cast<bool>(instance)) << sample.describe();
    if (!instance) {
      llvm::consumeError(instance.takeError());
      continue;
    }
    auto shared = std::make_shared<OpInstance>(std::move(*instance));
    for (unsigned o = 0; o < shared->outputTypes().size(); ++o) {
      auto program = lowerToProgram(*shared, o);
      if (!program) { // opaque outputs have no program
        llvm::consumeError(program.takeError());
        continue;
      }
      auto c = std::make_unique<Case>();
      c->storing = storing;
      c->sample = sample;
      c->output = o;
      c->instance = std::make_unique<OpInstance>(*shared);
      c->program = std::move(*program);
      c->name = std::string("k_") + plan::dtypeNumpyName(storing.floatType) +
                "_" + plan::dtypeNumpyName(storing.intType) + "_" +
                std::to_string(cases.size());
      for (const auto &t : sample.types) {
        cudagen::KernelOperand operand;
        operand.present = t.has_value();
        if (t) {
          operand.dtype = storing(t->elem);
          operand.globalShape = t->dims;
        }
        c->kernel.operands.push_back(operand);
      }
      cudagen::KernelStage stage;
      stage.program = &c->program;
      stage.outputType = storing(shared->outputTypes()[o].elem);
      stage.op = sample.op;
      for (size_t i = 0; i < sample.types.size(); ++i)
        stage.inputs.push_back({static_cast<int32_t>(i), -1});
      c->kernel.stages.push_back(stage);
      c->kernel.outputGlobalShape = shared->outputTypes()[o].dims;
      // Every program that can have a row variant gets one, however short
      // its rows (tofuc writes it for "row-reduction" programs only).
      c->kernel.forceRowVariant = true;
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

/// The storage variants the sample programs run with: the float32/int64 of
/// the samples, float64, and float16 / bfloat16 with int32.
std::vector<Storing> storageVariants() {
  using plan::DType;
  return {{DType::F32, DType::I64},
          {DType::F64, DType::I64},
          {DType::F16, DType::I32},
          {DType::BF16, DType::I32}};
}

/// Runs every program of `samples` stored as `storing` (see runShare);
/// returns the number of shares run and of programs with a row variant.
/// `withReference`: also against the TDL reference evaluator on the whole
/// tensor (it does not hoist reductions: too slow for long rows).
void checkPrograms(Storing storing, const std::vector<SampleCase> &samples,
                   int &shares, int &rowPrograms, bool withReference = true) {
  auto cases = buildCases(storing, samples);
  std::string source = cudagen::emitPrelude();
  for (auto &c : cases) {
    auto text = cudagen::emitKernel(c->kernel, c->name);
    ASSERT_TRUE(static_cast<bool>(text))
        << c->describe() << ": " << llvm::toString(text.takeError());
    source += *text;
  }
  auto module = HostModule::compile(source);
  ASSERT_TRUE(module);
  for (auto &c : cases) {
    HostDriver driver = module->driver(c->name);
    ASSERT_NE(driver, nullptr) << c->name;
    // The block variant, where the generator writes one, on every share too.
    // And its grid form (`_grid`, kGridParts blocks an element).
    HostDriver blockDriver = nullptr, gridDriver = nullptr;
    if (cudagen::blockReductionRoot(c->program)) {
      blockDriver = module->driver(c->name + "_block");
      ASSERT_NE(blockDriver, nullptr) << c->name << "_block";
      gridDriver = module->driver(c->name + "_grid");
      ASSERT_NE(gridDriver, nullptr) << c->name << "_grid";
    }
    // The row variant, where the generator writes one, on every share too.
    // And its warp-per-row form (`_rowwarp`, 32 threads a row).
    HostDriver rowDriver = nullptr, warpRowDriver = nullptr;
    if (cudagen::rowReductionDims(c->program)) {
      rowDriver = module->driver(c->name + "_row");
      ASSERT_NE(rowDriver, nullptr) << c->name << "_row";
      warpRowDriver = module->driver(c->name + "_rowwarp");
      ASSERT_NE(warpRowDriver, nullptr) << c->name << "_rowwarp";
      ++rowPrograms;
    }
    auto runShares = [&](const std::vector<DenseTensor> &inputs,
                         const std::vector<double> *reference,
                         const plan::Box &box,
                         const std::vector<std::pair<int64_t, int64_t>> &ranges,
                         const std::string &what) {
      runShare(*c, driver, inputs, reference, box, ranges, what);
      if (blockDriver)
        runShare(*c, blockDriver, inputs, reference, box, ranges,
                 what + " (block variant)", /*block=*/true);
      if (gridDriver)
        runShare(*c, gridDriver, inputs, reference, box, ranges,
                 what + " (grid variant)", /*block=*/true);
      if (rowDriver)
        runShare(*c, rowDriver, inputs, reference, box, ranges,
                 what + " (row variant)", /*block=*/true);
      if (warpRowDriver)
        runShare(*c, warpRowDriver, inputs, reference, box, ranges,
                 what + " (warp row variant)", /*block=*/true);
    };
    const auto &dims = c->instance->outputTypes()[c->output].dims;
    std::vector<ReductionVar> redVars = c->instance->reductionVars(c->output);
    for (unsigned seed : {1u, 2u}) {
      std::vector<DenseTensor> inputs = randomInputs(c->sample, seed);
      // Round the inputs to their storage type, as the buffers hold them.
      std::vector<const DenseTensor *> inputPtrs;
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (!c->sample.types[i]) {
          inputPtrs.push_back(nullptr);
          continue;
        }
        plan::DType t = storing(c->sample.types[i]->elem);
        for (double &v : inputs[i].data) {
          Storage one(t, 1);
          one.set(0, v);
          v = one.get(0);
        }
        inputPtrs.push_back(&inputs[i]);
      }
      if (withReference) {
        auto reference = evaluate(*c->instance, inputPtrs);
        ASSERT_TRUE(static_cast<bool>(reference)) << c->describe();
        runShares(inputs, &(*reference)[c->output].data, wholeBox(dims), {},
                  "whole");
      } else {
        runShares(inputs, nullptr, wholeBox(dims), {}, "whole");
      }
      ++shares;
      for (size_t d = 0; d < dims.size(); ++d) {
        if (dims[d] < 2)
          continue;
        for (int64_t w = 0; w < 2; ++w) {
          plan::Box box = wholeBox(dims);
          box.lo[d] = dims[d] * w / 2;
          box.hi[d] = dims[d] * (w + 1) / 2;
          runShares(inputs, nullptr, box, {},
                    "dim " + std::to_string(d) + " share " + std::to_string(w));
          ++shares;
        }
      }
      for (size_t r = 0; r < redVars.size(); ++r) {
        if (!redVars[r].splittable || redVars[r].extent < 2 ||
            c->program.topReductionVars.size() != redVars.size())
          continue;
        for (int64_t w = 0; w < 2; ++w) {
          std::vector<std::pair<int64_t, int64_t>> ranges;
          for (const ReductionVar &v : redVars)
            ranges.push_back({0, v.extent});
          ranges[r] = {redVars[r].extent * w / 2,
                       redVars[r].extent * (w + 1) / 2};
          runShares(inputs, nullptr, wholeBox(dims), ranges,
                    "reduction " + std::to_string(r) + " share " +
                        std::to_string(w));
          ++shares;
        }
      }
    }
  }
}

/// Runs every sample program stored as `storing` (see runShare).
void checkEveryProgram(Storing storing) {
  ASSERT_GT(sampleCases().size(), 150u);
  int shares = 0, rowPrograms = 0;
  checkPrograms(storing, sampleCases(), shares, rowPrograms);
  EXPECT_GT(shares, 600);
  // LayerNormalization(Grad), Softmax(Grad), LogSoftmax, the loss
  // gradients, BatchNormalization, ... have row variants.
  EXPECT_GT(rowPrograms, 20);
}

TEST(CudaKernelGenerator, EveryTdlProgramMatchesInterpreterAndReference) {
  checkEveryProgram(storageVariants()[0]);
}
TEST(CudaKernelGenerator, EveryTdlProgramInFloat64) {
  checkEveryProgram(storageVariants()[1]);
}
TEST(CudaKernelGenerator, EveryTdlProgramInFloat16AndInt32) {
  checkEveryProgram(storageVariants()[2]);
}
TEST(CudaKernelGenerator, EveryTdlProgramInBFloat16AndInt32) {
  checkEveryProgram(storageVariants()[3]);
}

/// Row variants (cudagen::rowReductionDims) on rows that do not fill a
/// block evenly: longer than TOFU_BLOCK_THREADS (256) and not a multiple of
/// it, of one element, a row spread over non-trailing dimensions (a softmax
/// over axis 1, a BatchNorm channel), and row-invariant reductions over
/// more than one dimension (LayerNormalization over axis 1). Each against
/// the CPU interpreter (within the tree order's rounding; the TDL
/// reference, which recomputes every nested reduction, would take minutes
/// on these rows: the sample cases check it), on the whole tensor and on
/// every half share, in float32 and float64.
std::vector<SampleCase> rowVariantSamples() {
  return {
      {"LayerNormalization", {f32({3, 300}), f32({300}), f32({300})}},
      {"LayerNormalization", {f32({5, 1}), f32({1}), f32({1})}},
      {"LayerNormalization", {f32({2, 3, 171}), f32({3, 171}), std::nullopt},
       {{"axis", I(1)}}},
      {"LayerNormalizationGrad",
       {f32({4, 513}), f32({4, 513}), f32({513}), f32({4, 1}), f32({4, 1})}},
      {"Softmax", {f32({6, 257})}, {}, 0, 3, -4, 4},
      {"Softmax", {f32({2, 300, 3})}, {{"axis", I(1)}}, 0, 3, -4, 4},
      {"Softmax", {f32({4, 1})}},
      {"SoftmaxGrad", {f32({3, 600}), f32({3, 600})}},
      {"SoftmaxCrossEntropyLossGrad", {f32({}), f32({5, 300}), i64({5})},
       {}, 0, 300},
      {"BatchNormalization",
       {f32({4, 3, 9, 9}), f32({3}), f32({3}), f32({3}), f32({3})},
       {{"training_mode", I(1)}}},
      {"BatchNormalizationGrad",
       {f32({4, 3, 9, 9}), f32({4, 3, 9, 9}), f32({3}), f32({3}), f32({3})},
       {{"training_mode", I(1)}}},
  };
}

TEST(CudaKernelGenerator, RowVariantsOnRowsLongerShorterAndUnevenToABlock) {
  for (Storing storing : {storageVariants()[0], storageVariants()[1]}) {
    int shares = 0, rowPrograms = 0;
    checkPrograms(storing, rowVariantSamples(), shares, rowPrograms,
                  /*withReference=*/false);
    // Every op but the BatchNorm running statistics has a row variant on
    // at least one output (Y, Mean, InvStdDev, dX, ...).
    EXPECT_GE(rowPrograms, 13) << storing.describe();
    EXPECT_GT(shares, 100) << storing.describe();
  }
  // What the executor launches the row variant for: LayerNormalization's Y
  // over 300 columns is a "row-reduction" kernel; over one column, whose
  // reductions take one iteration a row, it is not.
  auto cases = buildCases(Storing{}, rowVariantSamples());
  EXPECT_EQ(cudagen::classifyProgram(cases[0]->program), "row-reduction");
  ASSERT_TRUE(cudagen::rowReductionDims(cases[0]->program));
  EXPECT_EQ(*cudagen::rowReductionDims(cases[0]->program),
            (std::vector<bool>{true, false}));
  EXPECT_EQ(cases[3]->sample.op, "LayerNormalization");
  EXPECT_EQ(cudagen::classifyProgram(cases[3]->program), "reduction");
  // Short reductions on long rows (attention's SoftmaxGrad over 128 keys:
  // 128 elements each recomputing a 128-long sum) get the row variant;
  // on short rows (10 classes) they keep one thread per element.
  auto softmaxGrads = buildCases(
      Storing{}, {{"SoftmaxGrad", {f32({4, 128}), f32({4, 128})}},
                  {"SoftmaxGrad", {f32({4, 10}), f32({4, 10})}}});
  ASSERT_EQ(softmaxGrads.size(), 2u);
  EXPECT_EQ(cudagen::classifyProgram(softmaxGrads[0]->program),
            "row-reduction");
  EXPECT_EQ(cudagen::classifyProgram(softmaxGrads[1]->program), "reduction");
}

/// The row variant's combination order is the documented one (the device
/// follows the same, its last five levels by warp shuffles): SoftmaxGrad's
/// row sum of dY * Y over 512 columns, dY = 2^53 then ones, Y = 1. A
/// sequential sum in double loses every one (2^53 + 1 rounds to 2^53);
/// thread t's share (columns t and t + 256) then the pairwise halving keep
/// all but the one added to 2^53 by thread 0.
TEST(CudaKernelGenerator, RowVariantCombinesInTreeOrder) {
  SampleCase sample{"SoftmaxGrad", {f32({1, 512}), f32({1, 512})}};
  auto cases = buildCases(Storing{plan::DType::F64, plan::DType::I64}, {sample});
  ASSERT_EQ(cases.size(), 1u);
  const Case &c = *cases[0];
  ASSERT_TRUE(cudagen::rowReductionDims(c.program));
  auto text = cudagen::emitKernel(c.kernel, "softmax_grad");
  ASSERT_TRUE(static_cast<bool>(text)) << llvm::toString(text.takeError());
  auto module = HostModule::compile(cudagen::emitPrelude() + *text);
  ASSERT_TRUE(module);
  std::vector<double> dY(512, 1.0), Y(512, 1.0), out(512, 7.0);
  dY[0] = 0x1p53;
  // The documented order, replayed here.
  std::vector<double> partials(256, 0.0);
  for (int t = 0; t < 256; ++t)
    for (int k = t; k < 512; k += 256)
      partials[t] += dY[k] * Y[k];
  for (int w = 128; w > 0; w /= 2)
    for (int t = 0; t < w; ++t)
      partials[t] += partials[t + w];
  double sequential = 0;
  for (int k = 0; k < 512; ++k)
    sequential += dY[k] * Y[k];
  ASSERT_EQ(partials[0], 0x1p53 + 510);
  ASSERT_EQ(sequential, 0x1p53);
  void *ptrs[] = {out.data(), dY.data(), Y.data()};
  plan::Box whole = wholeBox({1, 512});
  std::vector<int64_t> params =
      cudagen::launchParams(c.kernel, whole, {whole, whole}, {});
  EXPECT_EQ(params.back(), 1); // one row
  unsigned long long error[12] = {};
  module->driver("softmax_grad_row")(ptrs, params.data(), 0, error);
  EXPECT_EQ(error[0], 0u);
  for (int k = 0; k < 512; ++k)
    ASSERT_EQ(out[k], Y[k] * (dY[k] - partials[0])) << "column " << k;
  // The warp per row: 32 threads, thread t's share columns t, t + 32, ...
  // (2^53 and 15 ones for thread 0: the ones are lost), then the same
  // halving from w = 16.
  std::vector<double> lanes(32, 0.0);
  for (int t = 0; t < 32; ++t)
    for (int k = t; k < 512; k += 32)
      lanes[t] += dY[k] * Y[k];
  for (int w = 16; w > 0; w /= 2)
    for (int t = 0; t < w; ++t)
      lanes[t] += lanes[t + w];
  ASSERT_EQ(lanes[0], 0x1p53 + 496);
  module->driver("softmax_grad_rowwarp")(ptrs, params.data(), 0, error);
  EXPECT_EQ(error[0], 0u);
  for (int k = 0; k < 512; ++k)
    ASSERT_EQ(out[k], Y[k] * (dY[k] - lanes[0])) << "column " << k;
  // The one-thread-per-element kernel sums sequentially, as the CPU does.
  module->driver("softmax_grad")(ptrs, params.data(), 0, error);
  EXPECT_EQ(out[1], 1.0 - sequential);
}

/// A share whose input buffer is too small: the generated code reports the
/// first out-of-buffer read (node, input, global index), as the interpreter
/// does, instead of reading outside the buffer.
TEST(CudaKernelGenerator, ReportsReadOutsideTheLocalBuffer) {
  const SpecLibrary &library = SpecLibrary::builtin();
  TensorType t{{4, 6}, ElemType::F32};
  auto instance = instantiate(*library.lookup("Relu"), {t}, {}, {});
  ASSERT_TRUE(static_cast<bool>(instance));
  auto program = lowerToProgram(*instance, 0);
  ASSERT_TRUE(static_cast<bool>(program));
  cudagen::KernelDescription kernel;
  kernel.operands.push_back({true, plan::DType::F32, {4, 6}});
  kernel.stages.push_back({&*program, plan::DType::F32, {{0, -1}}, "Relu"});
  kernel.outputGlobalShape = {4, 6};
  auto text = cudagen::emitKernel(kernel, "relu");
  ASSERT_TRUE(static_cast<bool>(text));
  auto module = HostModule::compile(cudagen::emitPrelude() + *text);
  ASSERT_TRUE(module);
  // The input holds rows [0, 2) only; the output is the whole tensor.
  plan::Box inBox{{0, 0}, {2, 6}};
  std::vector<float> in(12, -1.0f), out(24, 7.0f);
  void *ptrs[] = {out.data(), in.data()};
  std::vector<int64_t> params =
      cudagen::launchParams(kernel, wholeBox({4, 6}), {inBox}, {});
  unsigned long long error[12] = {};
  module->driver("relu")(ptrs, params.data(), 0, error);
  EXPECT_EQ(error[0], 1u);
  EXPECT_EQ(error[2], 0u); // input 0
  EXPECT_EQ(error[3], 2u); // rank
  EXPECT_EQ(error[4], 2u); // first row outside the buffer
  EXPECT_EQ(error[5], 0u);
  EXPECT_EQ(out[0], 0.0f); // relu(-1) inside the buffer
}

//===----------------------------------------------------------------------===//
// Plan level: fusion and launch metadata
//===----------------------------------------------------------------------===//

/// A one-device plan built instruction by instruction from TDL ops.
struct PlanBuilder {
  plan::Plan plan;
  std::vector<std::unique_ptr<OpInstance>> keep;
  uint64_t arena = 0;

  PlanBuilder() { plan.devices.resize(1); }

  int32_t tensor(const std::vector<int64_t> &shape,
                 plan::DType type = plan::DType::F32) {
    plan::TensorInfo t;
    t.name = "t" + std::to_string(plan.tensors.size());
    t.shape = shape;
    t.dtype = type;
    plan.tensors.push_back(t);
    plan::Buffer b;
    b.tensor = static_cast<int32_t>(plan.tensors.size() - 1);
    b.region = wholeBox(shape);
    b.bytes = b.region.numElements() * plan::dtypeSize(type);
    b.offset = arena;
    b.owned = true;
    arena += (b.bytes + 15) / 16 * 16;
    plan.devices[0].buffers.push_back(b);
    plan.devices[0].peakBytes = arena;
    return static_cast<int32_t>(plan.devices[0].buffers.size() - 1);
  }
  /// Appends op `op` reading buffers `inputs` into a new buffer.
  int32_t op(const std::string &op, const std::vector<int32_t> &inputs,
             const AttrMap &attrs = {}) {
    std::vector<std::optional<TensorType>> types;
    for (int32_t b : inputs) {
      const plan::TensorInfo &t =
          plan.tensors[plan.devices[0].buffers[b].tensor];
      types.push_back(TensorType{t.shape, t.dtype == plan::DType::F32
                                              ? ElemType::F32
                                              : ElemType::I64});
    }
    auto instance =
        instantiate(*SpecLibrary::builtin().lookup(op), types, attrs, {});
    EXPECT_TRUE(static_cast<bool>(instance)) << op;
    auto program = lowerToProgram(*instance, 0);
    EXPECT_TRUE(static_cast<bool>(program)) << op;
    int32_t out = tensor(instance->outputTypes()[0].dims);
    plan::Instr in;
    in.kind = plan::Instr::Kind::Compute;
    in.kernel = op;
    in.op = op + std::to_string(plan.devices[0].instrs.size());
    in.inputs = inputs;
    in.outputs = {out};
    in.editSpec().programs.push_back(std::move(*program));
    plan.devices[0].instrs.push_back(std::move(in));
    return out;
  }
};

/// Runs every instruction of device 0 on the CPU (interpreter) in an arena.
std::vector<uint8_t> runOnCpu(const plan::Plan &plan,
                              std::vector<uint8_t> arena) {
  const plan::DeviceProgram &dev = plan.devices[0];
  auto view = [&](int32_t b) {
    const plan::Buffer &buf = dev.buffers[b];
    const plan::TensorInfo &t = plan.tensors[buf.tensor];
    return runtime::TensorView::ofRegion(arena.data() + buf.offset, t.dtype,
                                         buf.region, t.shape);
  };
  for (const plan::Instr &in : dev.instrs) {
    std::vector<runtime::TensorView> inputs, outputs;
    for (int32_t b : in.inputs)
      inputs.push_back(view(b));
    for (int32_t b : in.outputs)
      outputs.push_back(view(b));
    std::string err = runtime::runCompute(in.kernel, in.attrs(), inputs, outputs,
                                          in.programs(), in.reductionRanges,
                                          runtime::ComputePath::Interpreter);
    EXPECT_EQ(err, "") << in.kernel;
  }
  return arena;
}

/// Runs the plan's launches with the host drivers of its generated source.
std::vector<uint8_t> runGenerated(const plan::Plan &plan,
                                  std::vector<uint8_t> arena) {
  auto module = HostModule::compile(plan.cuda.source);
  EXPECT_TRUE(module);
  if (!module)
    return arena;
  for (const plan::CudaLaunch &launch : plan.cuda.launches) {
    const plan::CudaKernel &k = plan.cuda.kernels[launch.kernel];
    EXPECT_EQ(launch.buffers.size(), k.numPointers);
    EXPECT_EQ(launch.params.size(), k.numParams);
    std::vector<void *> ptrs;
    for (int32_t b : launch.buffers)
      ptrs.push_back(b < 0 ? nullptr
                           : arena.data() + plan.devices[0].buffers[b].offset);
    unsigned long long error[12] = {};
    HostDriver driver = module->driver(k.name);
    EXPECT_NE(driver, nullptr) << k.name;
    if (driver)
      driver(ptrs.data(), launch.params.data(), 0, error);
    EXPECT_EQ(error[0], 0u) << k.name;
  }
  return arena;
}

std::vector<uint8_t> randomArena(const plan::Plan &plan, unsigned seed) {
  std::vector<uint8_t> arena(plan.devices[0].peakBytes);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2, 2);
  for (size_t at = 0; at + 4 <= arena.size(); at += 4) {
    float f = dist(gen);
    std::memcpy(&arena[at], &f, 4);
  }
  return arena;
}

TEST(CudaKernelGenerator, FusesElementwiseChainsAndRunsLaunches) {
  PlanBuilder b;
  int32_t x = b.tensor({6, 5}), y = b.tensor({6, 5}), bias = b.tensor({5});
  int32_t s = b.op("Add", {x, y});      // 0
  int32_t r = b.op("Relu", {s});        // 1: reads 0
  int32_t m = b.op("Add", {r, bias});   // 2: broadcast bias, reads 1
  int32_t t = b.op("Transpose", {m}, {{"perm", Is({1, 0})}}); // 3: not fused
  int32_t g = b.op("Sigmoid", {t});     // 4: new chain
  b.op("Mul", {g, g});                  // 5: reads 4 twice
  b.op("Sigmoid", {x});                 // 6: independent of 5: not fused
  b.op("ReduceMean", {x}, {{"axes", Is({1})}, {"keepdims", I(0)}});
  (void)t;
  cudagen::CudaCodegenOptions options;
  options.arch = "sm_90";
  options.compile = false;
  ASSERT_FALSE(static_cast<bool>(cudagen::generateCudaKernels(b.plan, options)));
  const plan::CudaModule &cuda = b.plan.cuda;
  EXPECT_EQ(cuda.arch, "sm_90");
  EXPECT_TRUE(cuda.cubin.empty());
  // Launches: [0, 3) fused, 3, [4, 6) fused, 6, 7.
  std::string launches;
  for (const plan::CudaLaunch &l : cuda.launches)
    launches += " [" + std::to_string(l.firstInstr) + ", +" +
                std::to_string(l.numInstrs) + ") " +
                cuda.kernels[l.kernel].kind;
  ASSERT_EQ(cuda.launches.size(), 5u) << launches;
  auto expect = [&](size_t l, int32_t first, int32_t count, const char *kind) {
    EXPECT_EQ(cuda.launches[l].firstInstr, first) << l;
    EXPECT_EQ(cuda.launches[l].numInstrs, count) << l;
    EXPECT_EQ(cuda.kernels[cuda.launches[l].kernel].kind, kind) << l;
  };
  expect(0, 0, 3, "fused-elementwise");
  expect(1, 3, 1, "data-movement");
  expect(2, 4, 2, "fused-elementwise");
  expect(3, 6, 1, "elementwise");
  expect(4, 7, 1, "reduction");
  EXPECT_EQ(cuda.kernels[cuda.launches[0].kernel].ops, "Add+Relu+Add");
  // The fused kernel writes all three outputs, then reads x, y, bias.
  EXPECT_EQ(cuda.launches[0].buffers,
            (std::vector<int32_t>{s, r, m, x, y, bias}));
  EXPECT_EQ(cuda.launches[0].numElements, 30);
  for (unsigned seed : {1u, 2u}) {
    std::vector<uint8_t> arena = randomArena(b.plan, seed);
    std::vector<uint8_t> cpu = runOnCpu(b.plan, arena);
    std::vector<uint8_t> gpu = runGenerated(b.plan, arena);
    for (const plan::Buffer &buf : b.plan.devices[0].buffers)
      for (uint64_t at = buf.offset; at < buf.offset + buf.bytes; at += 4) {
        float want, got;
        std::memcpy(&want, &cpu[at], 4);
        std::memcpy(&got, &gpu[at], 4);
        ASSERT_TRUE(identical(got, want))
            << "tensor " << b.plan.tensors[buf.tensor].name << " byte "
            << at - buf.offset << ": generated " << got << ", CPU " << want;
      }
  }
  // Determinism: the same plan gives the same source and metadata.
  plan::Plan again = b.plan;
  ASSERT_FALSE(static_cast<bool>(cudagen::generateCudaKernels(again, options)));
  EXPECT_EQ(again.cuda.source, cuda.source);
  EXPECT_EQ(again.cuda.launches.size(), cuda.launches.size());
}

/// Identical instructions share one kernel; an output whose arena bytes
/// overlap an operand of the chain stops the fusion.
TEST(CudaKernelGenerator, DeduplicatesKernelsAndRespectsArenaReuse) {
  PlanBuilder b;
  int32_t x = b.tensor({4, 4});
  int32_t r1 = b.op("Relu", {x});
  b.op("Sigmoid", {r1});
  int32_t y = b.tensor({4, 4});
  int32_t r2 = b.op("Relu", {y});
  int32_t s2 = b.op("Sigmoid", {r2});
  // Make the second chain's Sigmoid output reuse y's bytes.
  b.plan.devices[0].buffers[s2].offset = b.plan.devices[0].buffers[y].offset;
  cudagen::CudaCodegenOptions options;
  options.arch = "sm_80";
  options.compile = false;
  ASSERT_FALSE(static_cast<bool>(cudagen::generateCudaKernels(b.plan, options)));
  const plan::CudaModule &cuda = b.plan.cuda;
  ASSERT_EQ(cuda.launches.size(), 3u);
  EXPECT_EQ(cuda.launches[0].numInstrs, 2);
  EXPECT_EQ(cuda.launches[1].numInstrs, 1);
  EXPECT_EQ(cuda.launches[2].numInstrs, 1);
  // Relu on [4, 4] and Sigmoid on [4, 4]: one kernel each, and the fused one.
  EXPECT_EQ(cuda.kernels.size(), 3u);
  EXPECT_EQ(cuda.launches[1].kernel != cuda.launches[2].kernel, true);
}

/// A Cast kernel from `from` to `to` over [n] elements, run on the host.
struct CastKernel {
  std::unique_ptr<OpInstance> instance;
  plan::ExprProgram program;
  cudagen::KernelDescription kernel;
};

/// The ONNX TensorProto code of element type `t`.
int64_t onnxTypeCode(plan::DType t) {
  using plan::DType;
  switch (t) {
  case DType::F32: return 1;
  case DType::U8: return 2;
  case DType::I8: return 3;
  case DType::U16: return 4;
  case DType::I16: return 5;
  case DType::I32: return 6;
  case DType::I64: return 7;
  case DType::Bool: return 9;
  case DType::F16: return 10;
  case DType::F64: return 11;
  case DType::U32: return 12;
  case DType::U64: return 13;
  case DType::BF16: return 16;
  }
  return 0;
}

/// Per element type T (by DType number), a Cast kernel from float64 to T
/// ("store_<T>", at 2 * T) and one from T to float64 ("load_<T>", at
/// 2 * T + 1) over [n] elements; their source is appended to `source`.
void buildCastKernels(int64_t n, std::vector<std::unique_ptr<CastKernel>> &kernels,
                      std::string &source) {
  const SpecLibrary &library = SpecLibrary::builtin();
  auto castKernel = [&](plan::DType from, plan::DType to, CastKernel &k) {
    TensorType t{{n}, static_cast<ElemType>(from)};
    auto instance = instantiate(*library.lookup("Cast"), {t},
                                {{"to", I(onnxTypeCode(to))}}, {});
    ASSERT_TRUE(static_cast<bool>(instance))
        << llvm::toString(instance.takeError());
    ASSERT_EQ(toPlanType(instance->outputTypes()[0].elem), to);
    k.instance = std::make_unique<OpInstance>(std::move(*instance));
    auto program = lowerToProgram(*k.instance, 0);
    ASSERT_TRUE(static_cast<bool>(program));
    k.program = std::move(*program);
    k.kernel.operands.push_back({true, from, {n}});
    k.kernel.stages.push_back({&k.program, to, {{0, -1}}, "Cast"});
    k.kernel.outputGlobalShape = {n};
  };
  for (uint8_t code = 0; code < plan::kNumDTypes; ++code) {
    const auto type = static_cast<plan::DType>(code);
    for (bool store : {true, false}) {
      kernels.push_back(std::make_unique<CastKernel>());
      ASSERT_NO_FATAL_FAILURE(castKernel(store ? plan::DType::F64 : type,
                                         store ? type : plan::DType::F64,
                                         *kernels.back()));
      std::string name = std::string(store ? "store_" : "load_") +
                         plan::dtypeNumpyName(type);
      auto text = cudagen::emitKernel(kernels.back()->kernel, name);
      ASSERT_TRUE(static_cast<bool>(text)) << llvm::toString(text.takeError());
      source += *text;
    }
  }
}

TEST(CudaKernelGenerator, ConvertsEveryElementTypeAsTheCpuBackend) {
  // Values at the edges of every conversion rule: ties to even in f16 and
  // bf16, subnormals, overflow to inf, NaN of either sign, truncation toward
  // zero and wrap-around of the narrow integers, saturation beyond int64 and
  // uint64, a double subnormal.
  const std::vector<double> values = {
      0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 127.9, -128.9, 255.5,
      300.0, -300.0, 65504.0, 65519.99, 65520.0, 70000.0, -70000.0,
      1e-8, 5.960464477539063e-08, 2.9802322387695312e-08, 3e-8,
      1.0 + std::ldexp(1.0, -11), 1.0 + 3 * std::ldexp(1.0, -11),
      1.0 + std::ldexp(1.0, -8), 1.0 + 3 * std::ldexp(1.0, -8),
      1.0 + std::ldexp(1.0, -24), 1.0 + 3 * std::ldexp(1.0, -24),
      3.38953e38, 3.4e38, 1e39, -1e39, 1e-320, 4294967301.0, -4294967301.0,
      123456789.7, 1e20, -1e20, std::ldexp(1.0, 63), std::ldexp(1.0, 64),
      -std::ldexp(1.0, 63) - 4096, std::ldexp(1.0, 53) + 2,
      std::numeric_limits<double>::quiet_NaN(),
      -std::numeric_limits<double>::quiet_NaN(), HUGE_VAL, -HUGE_VAL};
  const int64_t n = static_cast<int64_t>(values.size());
  std::vector<std::unique_ptr<CastKernel>> kernels;
  std::string source = cudagen::emitPrelude();
  ASSERT_NO_FATAL_FAILURE(buildCastKernels(n, kernels, source));
  auto module = HostModule::compile(source);
  ASSERT_TRUE(module);
  auto run = [&](const std::string &name, const CastKernel &k,
                 const Storage &in, Storage &out) {
    void *ptrs[] = {out.bytes.data(), const_cast<uint8_t *>(in.bytes.data())};
    std::vector<int64_t> params =
        cudagen::launchParams(k.kernel, wholeBox({n}), {wholeBox({n})}, {});
    unsigned long long error[12] = {};
    HostDriver driver = module->driver(name);
    ASSERT_NE(driver, nullptr) << name;
    driver(ptrs, params.data(), 0, error);
    EXPECT_EQ(error[0], 0u) << name;
  };
  for (uint8_t code = 0; code < plan::kNumDTypes; ++code) {
    const auto type = static_cast<plan::DType>(code);
    const std::string typeName = plan::dtypeNumpyName(type);
    Storage in(plan::DType::F64, n), stored(type, n), cpuStored(type, n);
    for (int64_t e = 0; e < n; ++e) {
      in.set(e, values[e]);
      cpuStored.set(e, values[e]);
    }
    ASSERT_NO_FATAL_FAILURE(
        run("store_" + typeName, *kernels[2 * code], in, stored));
    for (int64_t e = 0; e < n; ++e) {
      size_t size = plan::dtypeSize(type);
      EXPECT_EQ(std::memcmp(&stored.bytes[e * size], &cpuStored.bytes[e * size],
                            size),
                0)
          << "storing " << values[e] << " as " << typeName
          << ": generated code gives " << stored.get(e) << ", the CPU backend "
          << cpuStored.get(e);
    }
    // Loads: back to float64, as the CPU backend reads each stored element.
    Storage loaded(plan::DType::F64, n);
    ASSERT_NO_FATAL_FAILURE(
        run("load_" + typeName, *kernels[2 * code + 1], cpuStored, loaded));
    for (int64_t e = 0; e < n; ++e) {
      double want = cpuStored.get(e), got = loaded.get(e);
      EXPECT_TRUE(identical(got, want) &&
                  std::signbit(got) == std::signbit(want))
          << "loading " << typeName << " element " << e << " (stored from "
          << values[e] << "): generated code gives " << got
          << ", the CPU backend " << want;
    }
  }
}

/// nvcc accepts every generated kernel of every sample program and the
/// loads and stores of every element type for sm_80 and sm_90, and the
/// cubin holds each entry point. The test is skipped (and reported so by
/// ctest) when CMake found no nvcc (TOFU_NVCC unset).
TEST(CudaKernelGeneratorNvcc, EveryKernelCompilesForSm80AndSm90) {
  const char *nvcc = std::getenv("TOFU_NVCC");
  if (!nvcc || !*nvcc)
    GTEST_SKIP() << "no nvcc (TOFU_NVCC is unset): the generated kernels are "
                    "not compiled for the GPU on this machine";
  // The float32/int64 samples, plus the loads and stores of every element
  // type (the other storage variants differ from the samples only there, and
  // compiling them all takes minutes). The samples with the variants tofuc
  // would write for them; the long-row samples with their row variants.
  auto cases = buildCases();
  for (auto &c : cases)
    c->kernel.forceRowVariant = false;
  for (auto &c : buildCases(Storing{}, rowVariantSamples())) {
    c->name = "row_" + c->name;
    cases.push_back(std::move(c));
  }
  std::string source = cudagen::emitPrelude();
  for (auto &c : cases) {
    auto text = cudagen::emitKernel(c->kernel, c->name);
    ASSERT_TRUE(static_cast<bool>(text)) << llvm::toString(text.takeError());
    source += *text;
  }
  std::vector<std::unique_ptr<CastKernel>> castKernels;
  ASSERT_NO_FATAL_FAILURE(buildCastKernels(4, castKernels, source));
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("tofu-nvcc-check", dir));
  std::string cu = std::string(dir) + "/kernels.cu";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(cu, ec);
    ASSERT_FALSE(ec);
    os << source;
  }
  for (std::string arch : {"sm_80", "sm_90"}) {
    std::string cubin = std::string(dir) + "/" + arch + ".cubin",
                log = std::string(dir) + "/" + arch + ".log";
    std::string archFlag = "-arch=" + arch;
    llvm::SmallVector<llvm::StringRef> args = {
        nvcc, "-cubin", archFlag, "-std=c++17", "-Xptxas", "-O0", "-o", cubin, cu};
    std::optional<llvm::StringRef> redirects[] = {
        std::nullopt, llvm::StringRef(log), llvm::StringRef(log)};
    int rc = llvm::sys::ExecuteAndWait(nvcc, args, std::nullopt, redirects);
    auto logText = llvm::MemoryBuffer::getFile(log);
    ASSERT_EQ(rc, 0) << "nvcc " << arch << " rejects the generated kernels:\n"
                     << (logText ? (*logText)->getBuffer().str() : "");
    auto binary = llvm::MemoryBuffer::getFile(cubin);
    ASSERT_TRUE(static_cast<bool>(binary));
    llvm::StringRef bytes = (*binary)->getBuffer();
    int rowEntries = 0;
    for (auto &c : cases) {
      EXPECT_NE(bytes.find(c->name + '\0'), llvm::StringRef::npos)
          << arch << ": the cubin has no entry point " << c->name;
      if (cudagen::hasRowVariant(c->kernel)) {
        ++rowEntries;
        EXPECT_NE(bytes.find(c->name + "_row" + '\0'), llvm::StringRef::npos)
            << arch << ": the cubin has no entry point " << c->name << "_row";
        EXPECT_NE(bytes.find(c->name + "_rowwarp" + '\0'), llvm::StringRef::npos)
            << arch << ": the cubin has no entry point " << c->name
            << "_rowwarp";
      }
    }
    EXPECT_GE(rowEntries, 13) << arch;
    for (uint8_t code = 0; code < plan::kNumDTypes; ++code)
      for (const char *dir : {"store_", "load_"}) {
        std::string name =
            dir + std::string(plan::dtypeNumpyName(plan::DType(code)));
        EXPECT_NE(bytes.find(name + '\0'), llvm::StringRef::npos)
            << arch << ": the cubin has no entry point " << name;
      }
  }
  llvm::sys::fs::remove_directories(dir);
}

TEST(CudaKernelGenerator, RefusesAnElementTypeNumberOutsideThePlanFormat) {
  // A number no plan DType has (the plan reader rejects it too): a clear
  // error, never bytes read as some type.
  plan::ExprProgram program;
  for (bool asOutput : {false, true}) {
    const auto bad = static_cast<plan::DType>(plan::kNumDTypes);
    cudagen::KernelDescription kernel;
    kernel.outputGlobalShape = {4};
    cudagen::KernelOperand operand;
    operand.dtype = asOutput ? plan::DType::F32 : bad;
    operand.globalShape = {4};
    kernel.operands.push_back(operand);
    cudagen::KernelStage stage;
    stage.program = &program;
    stage.op = "Relu";
    stage.outputType = asOutput ? bad : plan::DType::F32;
    cudagen::StageInput in;
    in.operand = 0;
    stage.inputs.push_back(in);
    kernel.stages.push_back(stage);
    auto text = cudagen::emitKernel(kernel, "k");
    ASSERT_FALSE(static_cast<bool>(text));
    std::string message = llvm::toString(text.takeError());
    EXPECT_NE(message.find("element type number 13 is not one of the plan's "
                           "element types"),
              std::string::npos)
        << message;
  }
}

TEST(CudaKernelGenerator, ChecksArchitectureNames) {
  for (const char *good : {"sm_80", "sm_90", "sm_90a", "sm_100", "sm_120f"})
    EXPECT_FALSE(static_cast<bool>(cudagen::checkCudaArch(good))) << good;
  for (const char *bad : {"", "sm90", "sm_", "sm_9", "compute_90", "sm_9x"}) {
    llvm::Error err = cudagen::checkCudaArch(bad);
    ASSERT_TRUE(static_cast<bool>(err)) << bad;
    EXPECT_NE(llvm::toString(std::move(err)).find("sm_80"), std::string::npos);
  }
}

TEST(CudaKernelGenerator, MissingNvccIsAClearError) {
  PlanBuilder b;
  b.op("Relu", {b.tensor({2})});
  cudagen::CudaCodegenOptions options;
  options.arch = "sm_90";
  options.nvccPath = "/nonexistent/nvcc";
  llvm::Error err = cudagen::generateCudaKernels(b.plan, options);
  ASSERT_TRUE(static_cast<bool>(err));
  std::string message = llvm::toString(std::move(err));
  EXPECT_NE(message.find("/nonexistent/nvcc"), std::string::npos) << message;
  EXPECT_NE(message.find("nvcc"), std::string::npos) << message;
}

} // namespace
