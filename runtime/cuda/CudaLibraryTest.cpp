//===- CudaLibraryTest.cpp - cuBLAS / cuDNN wrappers vs the CPU kernels ---===//
//
// GEMM, cuBLASLt GEMM with bias/ReLU epilogues, batched GEMM, the three convolution directions, pooling (max and
// average forward, average backward) and batch normalization (training and
// inference forward, Xhat, backward, both running statistics) on random
// inputs, compared with the CPU kernels of the same ops (fp32 tolerance),
// and the per-shape algorithm / descriptor caches; GEMM in float64, float16
// and bfloat16 and convolution in float64 and float16 against the CPU's
// float64 kernels on the same (rounded) inputs, within each type's
// tolerance. Exits with 77 (ctest: skipped) without a GPU.
//
//===----------------------------------------------------------------------===//
#include "CudaBatchNorm.h"
#include "CudaBlas.h"
#include "CudaConv.h"
#include "CudaPool.h"
#include "CudaDevice.h"
#include "CudaGpuTestSupport.h"
#include "TestSupport.h"
#include "tofu/runtime/ComputeKernel.h"
#include "tofu/runtime/ElementAccess.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <random>

using namespace tofu;
using tofu::plan::Attr;
using tofu::plan::DType;
using tofu::test::DeviceArray;
using tofu::test::intAttr;
using tofu::test::intsAttr;

namespace {

/// Random inputs in [-1, 1).
std::vector<float> unitRandoms(size_t n, uint32_t seed) {
  return tofu::test::randomFloats(n, seed, -1.0f, 1.0f);
}

int64_t count(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Runs CPU op `op` on whole tensors.
std::vector<float> cpu(const std::string &op, const std::vector<Attr> &attrs,
                       std::vector<std::pair<std::vector<float>,
                                             std::vector<int64_t>>> inputs,
                       const std::vector<int64_t> &outShape) {
  std::vector<float> out(count(outShape));
  std::vector<runtime::TensorView> views;
  for (auto &[data, shape] : inputs)
    views.push_back(runtime::TensorView::whole(data.data(), DType::F32, shape));
  std::string err = runtime::runCompute(
      op, attrs, views,
      {runtime::TensorView::whole(out.data(), DType::F32, outShape)}, {}, {},
      runtime::ComputePath::Native);
  EXPECT_EQ(err, "") << op;
  return out;
}

void expectClose(const std::vector<float> &got, const std::vector<float> &want,
                 const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::fabs(got[i] - want[i]), 1e-4 + 1e-4 * std::fabs(want[i]))
        << what << " element " << i << ": GPU " << got[i] << ", CPU "
        << want[i];
}

/// The CPU Gemm of A ([M, K], [K, M] when ta) and B ([K, N], [N, K] when
/// tb) with alpha, plus the bias row C ([N]) when it is not empty.
std::vector<float> cpuGemm(const std::vector<float> &a,
                           const std::vector<float> &b,
                           const std::vector<float> &bias, int64_t m,
                           int64_t n, int64_t k, bool ta, bool tb,
                           double alphaValue) {
  std::vector<int64_t> as = ta ? std::vector<int64_t>{k, m}
                               : std::vector<int64_t>{m, k};
  std::vector<int64_t> bs = tb ? std::vector<int64_t>{n, k}
                               : std::vector<int64_t>{k, n};
  Attr alpha;
  alpha.name = "alpha";
  alpha.kind = Attr::Kind::Float;
  alpha.f = alphaValue;
  std::vector<std::pair<std::vector<float>, std::vector<int64_t>>> inputs = {
      {a, as}, {b, bs}};
  if (!bias.empty())
    inputs.push_back({bias, {n}});
  return cpu("Gemm", {alpha, intAttr("transA", ta), intAttr("transB", tb)},
             inputs, {m, n});
}

TEST(CudaBlas, GemmMatchesCpuMatMul) {
  cuda::BlasHandle blas;
  ASSERT_EQ(blas.init(), "");
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                         {7, 13, 5}, {64, 128, 96}, {257, 33, 129}}) {
    auto a = unitRandoms(m * k, 1), b = unitRandoms(k * n, 2);
    DeviceArray da(a), db(b), dc(std::vector<float>(m * n, 0));
    cuda::GemmShape g;
    g.m = m, g.n = n, g.k = k, g.lda = k, g.ldb = n, g.ldc = n;
    ASSERT_EQ(cuda::gemm(blas, g, da.get(), db.get(), dc.get()), "");
    expectClose(dc.toHost(), cpu("MatMul", {}, {{a, {m, k}}, {b, {k, n}}}, {m, n}),
                "MatMul " + std::to_string(m) + "x" + std::to_string(k) +
                    "x" + std::to_string(n));
  }
}

TEST(CudaBlas, TransposedGemmMatchesCpuGemm) {
  cuda::BlasHandle blas;
  ASSERT_EQ(blas.init(), "");
  const int64_t m = 31, k = 17, n = 23;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      auto a = unitRandoms(m * k, 3), b = unitRandoms(k * n, 4);
      DeviceArray da(a), db(b), dc(std::vector<float>(m * n, 0));
      cuda::GemmShape g;
      g.transA = ta, g.transB = tb;
      g.m = m, g.n = n, g.k = k;
      g.lda = ta ? m : k;
      g.ldb = tb ? k : n;
      g.ldc = n;
      g.alpha = 0.5f;
      ASSERT_EQ(cuda::gemm(blas, g, da.get(), db.get(), dc.get()), "");
      expectClose(dc.toHost(), cpuGemm(a, b, {}, m, n, k, ta, tb, 0.5),
                  std::string("Gemm transA ") + (ta ? "1" : "0") +
                      " transB " + (tb ? "1" : "0"));
    }
}

// cublasLtMatmul with the bias, ReLU and bias + ReLU epilogues (what
// CudaSchedule maps a Gemm with a bias row and a fused Relu to) against the
// CPU Gemm (C = the bias row) and Relu; once with every operand one element
// off cuBLASLt's 256-byte alignment (the plan's operands may start inside a
// buffer).
TEST(CudaBlas, LtEpilogueGemmMatchesCpuGemmAndRelu) {
  cuda::LtHandle lt;
  ASSERT_EQ(lt.init(), "");
  const int64_t m = 31, k = 17, n = 23;
  for (int64_t shift : {0, 1})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (auto [withBias, relu] :
             {std::pair<bool, bool>{true, false}, {false, true}, {true, true}}) {
          auto a = unitRandoms(m * k, 5), b = unitRandoms(k * n, 6),
               bias = unitRandoms(n, 7);
          auto padded = [&](const std::vector<float> &v) {
            std::vector<float> p(v.size() + shift, 0);
            std::copy(v.begin(), v.end(), p.begin() + shift);
            return p;
          };
          DeviceArray da(padded(a)), db(padded(b)), dbias(padded(bias)),
              dc(std::vector<float>(m * n + shift, 0));
          cuda::GemmShape g;
          g.transA = ta, g.transB = tb;
          g.m = m, g.n = n, g.k = k;
          g.lda = ta ? m : k;
          g.ldb = tb ? k : n;
          g.ldc = n;
          g.alpha = 0.5f;
          cuda::GemmEpilogue epilogue;
          epilogue.bias = withBias, epilogue.relu = relu;
          cuda::LtGemm gemm;
          const std::string what =
              std::string("transA ") + (ta ? "1" : "0") + " transB " +
              (tb ? "1" : "0") + (withBias ? " bias" : "") +
              (relu ? " relu" : "") + " shift " + std::to_string(shift);
          const float *pa = da.get() + shift, *pb = db.get() + shift,
                      *pbias = withBias ? dbias.get() + shift : nullptr;
          float *pc = dc.get() + shift;
          ASSERT_EQ(gemm.prepare(lt, g, CUDA_R_32F, epilogue, pa, pb, pc,
                                 pbias),
                    "")
              << what;
          ASSERT_EQ(gemm.run(lt, pa, pb, pc, nullptr), "") << what;
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
          std::vector<float> want =
              cpuGemm(a, b, withBias ? bias : std::vector<float>(), m, n, k,
                      ta, tb, 0.5);
          if (relu)
            for (float &v : want)
              v = v < 0 ? 0 : v;
          std::vector<float> got = dc.toHost();
          got.erase(got.begin(), got.begin() + shift);
          expectClose(got, want, "cublasLtMatmul " + what);
        }
}

TEST(CudaBlas, EveryLtCandidateMatchesCpuGemm) {
  // The executor may run a plain GEMM on any of cuBLASLt's candidates
  // (chooseGemmAlgorithms): each must compute the product. Shapes include
  // rnn-k1's m = 16, n = 128, k = 512 (bench/gpu/H200-run18.md).
  cuda::LtHandle lt;
  ASSERT_EQ(lt.init(), "");
  struct Case {
    int64_t m, n, k;
    bool ta, tb;
  };
  for (Case c : {Case{16, 128, 512, false, true}, Case{31, 23, 17, true, false},
                 Case{128, 16, 512, false, false}}) {
    auto a = unitRandoms(c.m * c.k, 8), b = unitRandoms(c.k * c.n, 9);
    DeviceArray da(a), db(b), dc(std::vector<float>(c.m * c.n, 0));
    cuda::GemmShape g;
    g.transA = c.ta, g.transB = c.tb;
    g.m = c.m, g.n = c.n, g.k = c.k;
    g.lda = c.ta ? c.m : c.k;
    g.ldb = c.tb ? c.k : c.n;
    g.ldc = c.n;
    cuda::LtGemm gemm;
    ASSERT_EQ(gemm.prepare(lt, g, CUDA_R_32F, cuda::GemmEpilogue{}, da.get(),
                           db.get(), dc.get(), nullptr),
              "");
    ASSERT_GE(gemm.algorithms(), 1u);
    const std::vector<float> want =
        cpuGemm(a, b, std::vector<float>(), c.m, c.n, c.k, c.ta, c.tb, 1.0);
    for (size_t i = 0; i < gemm.algorithms(); ++i) {
      const std::string what = "m " + std::to_string(c.m) + " n " +
                               std::to_string(c.n) + " k " +
                               std::to_string(c.k) + " candidate " +
                               std::to_string(i);
      gemm.useAlgorithm(i);
      ASSERT_EQ(cudaMemset(dc.get(), 0, sizeof(float) * c.m * c.n),
                cudaSuccess);
      ASSERT_EQ(gemm.run(lt, da.get(), db.get(), dc.get(), nullptr), "")
          << what;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
      expectClose(dc.toHost(), want, "cublasLtMatmul " + what);
    }
  }
}

TEST(CudaBlas, BatchedGemmMatchesCpuMatMul) {
  cuda::BlasHandle blas;
  ASSERT_EQ(blas.init(), "");
  const int64_t batch = 6, m = 9, k = 40, n = 11;
  auto a = unitRandoms(batch * m * k, 5), b = unitRandoms(batch * k * n, 6);
  DeviceArray da(a), db(b), dc(std::vector<float>(batch * m * n, 0));
  cuda::GemmShape g;
  g.m = m, g.n = n, g.k = k, g.lda = k, g.ldb = n, g.ldc = n;
  ASSERT_EQ(cuda::gemmStridedBatched(blas, g, da.get(), m * k, db.get(), k * n,
                                     dc.get(), m * n, batch),
            "");
  expectClose(dc.toHost(),
              cpu("MatMul", {}, {{a, {batch, m, k}}, {b, {batch, k, n}}},
                  {batch, m, n}),
              "batched MatMul");
}

/// A device array of `type` holding `values` converted as the CPU backend
/// stores them; read back as doubles.
class TypedDeviceArray {
public:
  TypedDeviceArray(DType type, const std::vector<double> &values)
      : type(type), n(values.size()) {
    std::vector<uint8_t> bytes(n * plan::dtypeSize(type) + 8);
    for (size_t i = 0; i < n; ++i)
      runtime::storeElement(bytes.data(), type, static_cast<int64_t>(i),
                            values[i]);
    EXPECT_EQ(cudaMalloc(&ptr, bytes.size()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ptr, bytes.data(), bytes.size(),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~TypedDeviceArray() { cudaFree(ptr); }
  void *get() const { return ptr; }
  std::vector<double> toHost() const {
    std::vector<uint8_t> bytes(n * plan::dtypeSize(type));
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(bytes.data(), ptr, bytes.size(),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i)
      v[i] = runtime::loadElement(bytes.data(), type, static_cast<int64_t>(i));
    return v;
  }

private:
  DType type;
  size_t n;
  void *ptr = nullptr;
};

/// Random values in [-1, 1) rounded to `type`.
std::vector<double> randomValues(size_t n, uint32_t seed, DType type) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(n);
  uint8_t one[8];
  for (double &x : v) {
    runtime::storeElement(one, type, 0, dist(gen));
    x = runtime::loadElement(one, type, 0);
  }
  return v;
}

/// Runs CPU op `op` in float64 on whole tensors.
std::vector<double>
cpu64(const std::string &op, const std::vector<Attr> &attrs,
      std::vector<std::pair<std::vector<double>, std::vector<int64_t>>> inputs,
      const std::vector<int64_t> &outShape) {
  std::vector<double> out(count(outShape));
  std::vector<runtime::TensorView> views;
  for (auto &[data, shape] : inputs)
    views.push_back(runtime::TensorView::whole(data.data(), DType::F64, shape));
  std::string err = runtime::runCompute(
      op, attrs, views,
      {runtime::TensorView::whole(out.data(), DType::F64, outShape)}, {}, {},
      runtime::ComputePath::Native);
  EXPECT_EQ(err, "") << op;
  return out;
}

/// |got - want| <= tol * (1 + |want|): float64 to 1e-12; float16 and
/// bfloat16 (float32 accumulation, one rounding to the type) to a few units
/// of their precision.
void expectCloseAs(DType type, const std::vector<double> &got,
                   const std::vector<double> &want, const std::string &what) {
  const double tol = type == DType::F64   ? 1e-12
                     : type == DType::F16 ? 2e-3
                                          : 1.6e-2;
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::fabs(got[i] - want[i]), tol * (1 + std::fabs(want[i])))
        << what << " (" << plan::dtypeNumpyName(type) << ") element " << i
        << ": GPU " << got[i] << ", CPU " << want[i];
}

cudaDataType blasType(DType type) {
  return type == DType::F64 ? CUDA_R_64F
         : type == DType::F16 ? CUDA_R_16F
                              : CUDA_R_16BF;
}

TEST(CudaBlas, GemmInFloat64Float16AndBFloat16MatchesCpu) {
  cuda::BlasHandle blas;
  ASSERT_EQ(blas.init(), "");
  for (DType type : {DType::F64, DType::F16, DType::BF16}) {
    // Transposed operands, alpha and beta (C accumulates), as the executor's
    // Gemm calls use them.
    const int64_t m = 31, k = 17, n = 23;
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        auto a = randomValues(m * k, 3, type), b = randomValues(k * n, 4, type),
             c = randomValues(m * n, 5, type);
        TypedDeviceArray da(type, a), db(type, b), dc(type, c);
        cuda::GemmShape g;
        g.transA = ta, g.transB = tb;
        g.m = m, g.n = n, g.k = k;
        g.lda = ta ? m : k;
        g.ldb = tb ? k : n;
        g.ldc = n;
        g.alpha = 0.5, g.beta = 1;
        ASSERT_EQ(cuda::gemm(blas, g, blasType(type), da.get(), db.get(),
                             dc.get()),
                  "");
        std::vector<int64_t> as = ta ? std::vector<int64_t>{k, m}
                                     : std::vector<int64_t>{m, k};
        std::vector<int64_t> bs = tb ? std::vector<int64_t>{n, k}
                                     : std::vector<int64_t>{k, n};
        Attr alpha;
        alpha.name = "alpha";
        alpha.kind = Attr::Kind::Float;
        alpha.f = 0.5;
        expectCloseAs(type, dc.toHost(),
                      cpu64("Gemm",
                            {alpha, intAttr("transA", ta),
                             intAttr("transB", tb)},
                            {{a, as}, {b, bs}, {c, {m, n}}}, {m, n}),
                      std::string("Gemm transA ") + (ta ? "1" : "0") +
                          " transB " + (tb ? "1" : "0"));
      }
    // Strided batched.
    const int64_t batch = 6, bm = 9, bk = 40, bn = 11;
    auto a = randomValues(batch * bm * bk, 6, type),
         b = randomValues(batch * bk * bn, 7, type);
    TypedDeviceArray da(type, a), db(type, b),
        dc(type, std::vector<double>(batch * bm * bn, 0));
    cuda::GemmShape g;
    g.m = bm, g.n = bn, g.k = bk, g.lda = bk, g.ldb = bn, g.ldc = bn;
    ASSERT_EQ(cuda::gemmStridedBatched(blas, g, blasType(type), da.get(),
                                       bm * bk, db.get(), bk * bn, dc.get(),
                                       bm * bn, batch),
              "");
    expectCloseAs(type, dc.toHost(),
                  cpu64("MatMul", {},
                        {{a, {batch, bm, bk}}, {b, {batch, bk, bn}}},
                        {batch, bm, bn}),
                  "batched MatMul");
  }
}

struct ConvCase {
  std::vector<int64_t> x, w, pads, strides, dilations;
  int64_t group;
};

cuda::ConvShape shapeOf(const ConvCase &c) {
  cuda::ConvShape s;
  s.x = c.x;
  s.w = c.w;
  size_t sp = c.x.size() - 2;
  s.padsBegin.assign(c.pads.begin(), c.pads.begin() + sp);
  s.padsEnd.assign(c.pads.begin() + sp, c.pads.end());
  s.strides = c.strides;
  s.dilations = c.dilations;
  s.group = c.group;
  return s;
}

std::vector<Attr> attrsOf(const ConvCase &c) {
  std::vector<int64_t> kernel(c.w.begin() + 2, c.w.end());
  return {intsAttr("dilations", c.dilations), intAttr("group", c.group),
          intsAttr("kernel_shape", kernel), intsAttr("pads", c.pads),
          intsAttr("strides", c.strides)};
}

const std::vector<ConvCase> kConvCases = {
    {{2, 3, 9, 8}, {4, 3, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 1},
    {{1, 4, 11, 7}, {6, 2, 3, 2}, {0, 1, 0, 1}, {2, 1}, {1, 2}, 2},
    {{3, 2, 10}, {5, 2, 3}, {2, 2}, {2}, {1}, 1},
};

TEST(CudaConv, ThreeDirectionsMatchCpuKernels) {
  cuda::ConvRunner conv;
  ASSERT_EQ(conv.init(), "");
  for (const ConvCase &c : kConvCases) {
    cuda::ConvShape s = shapeOf(c);
    std::vector<int64_t> y = s.y();
    auto x = unitRandoms(count(c.x), 7), w = unitRandoms(count(c.w), 8),
         dy = unitRandoms(count(y), 9);
    DeviceArray dx(x), dw(w), ddy(dy), out(std::vector<float>(count(y))),
        gradX(std::vector<float>(count(c.x))),
        gradW(std::vector<float>(count(c.w)));
    ASSERT_EQ(conv.forward(s, dx.get(), dw.get(), out.get()), "");
    expectClose(out.toHost(), cpu("Conv", attrsOf(c), {{x, c.x}, {w, c.w}}, y),
                "Conv");
    ASSERT_EQ(conv.backwardData(s, ddy.get(), dw.get(), gradX.get()), "");
    expectClose(gradX.toHost(),
                cpu("ConvGradInput", attrsOf(c),
                    {{dy, y}, {w, c.w}, {x, c.x}}, c.x),
                "ConvGradInput");
    ASSERT_EQ(conv.backwardFilter(s, ddy.get(), dx.get(), gradW.get()), "");
    expectClose(gradW.toHost(),
                cpu("ConvGradWeight", attrsOf(c),
                    {{dy, y}, {x, c.x}, {w, c.w}}, c.w),
                "ConvGradWeight");
  }
  // One algorithm search per (shape, direction); later calls hit the cache.
  EXPECT_EQ(conv.algorithmSearches(), 3 * int64_t(kConvCases.size()));
  cuda::ConvShape s = shapeOf(kConvCases[0]);
  auto x = unitRandoms(count(s.x), 1), w = unitRandoms(count(s.w), 2);
  DeviceArray dx(x), dw(w), out(std::vector<float>(count(s.y())));
  ASSERT_EQ(conv.forward(s, dx.get(), dw.get(), out.get()), "");
  EXPECT_EQ(conv.algorithmSearches(), 3 * int64_t(kConvCases.size()));
  EXPECT_EQ(conv.algorithmCacheHits(), 1);
}

TEST(CudaConv, Float64AndFloat16MatchCpuKernels) {
  cuda::ConvRunner conv;
  ASSERT_EQ(conv.init(), "");
  for (DType type : {DType::F64, DType::F16})
    for (const ConvCase &c : kConvCases) {
      cuda::ConvShape s = shapeOf(c);
      s.dataType = type == DType::F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_HALF;
      std::vector<int64_t> y = s.y();
      auto x = randomValues(count(c.x), 7, type),
           w = randomValues(count(c.w), 8, type),
           dy = randomValues(count(y), 9, type);
      TypedDeviceArray dx(type, x), dw(type, w), ddy(type, dy),
          out(type, std::vector<double>(count(y))),
          gradX(type, std::vector<double>(count(c.x))),
          gradW(type, std::vector<double>(count(c.w)));
      ASSERT_EQ(conv.forward(s, dx.get(), dw.get(), out.get()), "");
      expectCloseAs(type, out.toHost(),
                    cpu64("Conv", attrsOf(c), {{x, c.x}, {w, c.w}}, y), "Conv");
      ASSERT_EQ(conv.backwardData(s, ddy.get(), dw.get(), gradX.get()), "");
      expectCloseAs(type, gradX.toHost(),
                    cpu64("ConvGradInput", attrsOf(c),
                          {{dy, y}, {w, c.w}, {x, c.x}}, c.x),
                    "ConvGradInput");
      ASSERT_EQ(conv.backwardFilter(s, ddy.get(), dx.get(), gradW.get()), "");
      expectCloseAs(type, gradW.toHost(),
                    cpu64("ConvGradWeight", attrsOf(c),
                          {{dy, y}, {x, c.x}, {w, c.w}}, c.w),
                    "ConvGradWeight");
    }
}

TEST(CudaConv, AsymmetricPadsAreRefused) {
  cuda::ConvRunner conv;
  ASSERT_EQ(conv.init(), "");
  cuda::ConvShape s = shapeOf({{1, 1, 5, 5}, {1, 1, 3, 3}, {0, 0, 1, 1},
                               {1, 1}, {1, 1}, 1});
  std::string err = conv.forward(s, nullptr, nullptr, nullptr);
  EXPECT_NE(err.find("symmetric pads"), std::string::npos) << err;
}

/// Pooling cases: mode, X, window, symmetric pads, strides.
struct PoolCase {
  cuda::PoolCall::Mode mode;
  std::vector<int64_t> x, window, pads, strides;
};

const std::vector<PoolCase> kPoolCases = {
    {cuda::PoolCall::Mode::Max, {2, 3, 9, 8}, {3, 3}, {1, 1}, {2, 2}},
    {cuda::PoolCall::Mode::Max, {2, 2, 10}, {3}, {1}, {2}},
    {cuda::PoolCall::Mode::AverageIncludePad, {2, 3, 7, 8}, {3, 3}, {1, 1},
     {1, 1}},
    {cuda::PoolCall::Mode::AverageExcludePad, {2, 3, 7, 8}, {3, 2}, {1, 1},
     {2, 1}},
    {cuda::PoolCall::Mode::AverageExcludePad, {1, 2, 5, 4, 6}, {2, 2, 3},
     {0, 1, 1}, {1, 2, 1}},
};

TEST(CudaPool, ForwardAndAverageBackwardMatchCpuKernels) {
  cuda::PoolRunner pool;
  ASSERT_EQ(pool.init(), "");
  for (const PoolCase &c : kPoolCases) {
    cuda::PoolCall call;
    call.mode = c.mode;
    call.x = c.x;
    call.window = c.window, call.pads = c.pads, call.strides = c.strides;
    call.y = {c.x[0], c.x[1]};
    for (size_t s = 0; s < c.window.size(); ++s)
      call.y.push_back((c.x[2 + s] + 2 * c.pads[s] - c.window[s]) /
                           c.strides[s] +
                       1);
    std::vector<int64_t> pads = c.pads;
    pads.insert(pads.end(), c.pads.begin(), c.pads.end());
    const std::vector<Attr> attrs = {
        intsAttr("kernel_shape", c.window), intsAttr("strides", c.strides),
        intsAttr("pads", pads),
        intAttr("count_include_pad",
                c.mode == cuda::PoolCall::Mode::AverageIncludePad)};
    const bool max = c.mode == cuda::PoolCall::Mode::Max;
    auto x = unitRandoms(count(c.x), 21), dy = unitRandoms(count(call.y), 22);
    DeviceArray dx(x), out(std::vector<float>(count(call.y)));
    ASSERT_EQ(pool.forward(call, dx.get(), out.get()), "");
    expectClose(out.toHost(),
                cpu(max ? "MaxPool" : "AveragePool", attrs, {{x, c.x}}, call.y),
                max ? "MaxPool" : "AveragePool");
    if (max)
      continue;
    cuda::PoolCall back = call;
    back.backward = true;
    DeviceArray ddy(dy), grad(std::vector<float>(count(c.x)));
    // As the schedule calls it: dX stands for the unread x.
    ASSERT_EQ(pool.backward(back, ddy.get(), grad.get(), grad.get()), "");
    expectClose(grad.toHost(),
                cpu("AveragePoolGrad", attrs, {{dy, call.y}, {x, c.x}}, c.x),
                "AveragePoolGrad");
  }
  // One descriptor set per call (forward and backward are distinct keys);
  // a repeated call reuses it.
  const int64_t builds = pool.descriptorBuilds();
  EXPECT_EQ(builds, int64_t(2 * kPoolCases.size() - 2));
  cuda::PoolCall call;
  call.mode = kPoolCases[0].mode;
  call.x = kPoolCases[0].x;
  call.window = kPoolCases[0].window, call.pads = kPoolCases[0].pads;
  call.strides = kPoolCases[0].strides;
  call.y = {2, 3, 5, 4};
  DeviceArray dx(unitRandoms(count(call.x), 3)),
      out(std::vector<float>(count(call.y)));
  ASSERT_EQ(pool.forward(call, dx.get(), out.get()), "");
  EXPECT_EQ(pool.descriptorBuilds(), builds);
}

TEST(CudaBatchNorm, EveryCallMatchesTheCpuKernels) {
  cuda::BatchNormRunner runner;
  ASSERT_EQ(runner.init(), "");
  const double epsilon = 1e-3, momentum = 0.8;
  for (const std::vector<int64_t> &shape :
       std::vector<std::vector<int64_t>>{{4, 3, 5, 6}, {6, 4}, {2, 3, 7},
                                         {2, 2, 3, 4, 5}}) {
    const int64_t C = shape[1];
    const std::vector<int64_t> cs = {C};
    auto x = unitRandoms(count(shape), 31), dy = unitRandoms(count(shape), 32);
    auto scale = unitRandoms(C, 33), bias = unitRandoms(C, 34),
         mean = unitRandoms(C, 35), var = unitRandoms(C, 36);
    for (float &v : var)
      v = 0.5f + std::fabs(v);
    for (float &v : x)
      v = 2 * v + 0.5f; // a mean away from 0
    DeviceArray dX(x), dDy(dy), dScale(scale), dBias(bias), dMean(mean),
        dVar(var), out(std::vector<float>(count(shape))),
        stat{std::vector<float>(C)};
    auto operands = [&](float *y) {
      std::array<float *, cuda::kNumDnnOperands> p{};
      p[cuda::kDnnX] = dX.get(), p[cuda::kDnnY] = y;
      p[cuda::kDnnDy] = dDy.get(), p[cuda::kDnnDx] = y;
      p[cuda::kDnnScale] = dScale.get(), p[cuda::kDnnBias] = dBias.get();
      p[cuda::kDnnMean] = dMean.get(), p[cuda::kDnnVar] = dVar.get();
      return p;
    };
    std::vector<std::pair<std::vector<float>, std::vector<int64_t>>> inputs = {
        {x, shape}, {scale, cs}, {bias, cs}, {mean, cs}, {var, cs}};
    cuda::BatchNormCall call;
    call.x = shape;
    call.epsilon = epsilon;
    call.momentum = momentum;
    call.count = count(shape) / C;
    auto attrs = [&](int training, int output) {
      return std::vector<Attr>{tofu::test::floatAttr("epsilon", epsilon),
                               tofu::test::floatAttr("momentum", momentum),
                               intAttr("training_mode", training),
                               intAttr("tofu.output", output)};
    };
    for (int training : {1, 0}) {
      call.kind = training ? cuda::BatchNormCall::Kind::TrainingForward
                           : cuda::BatchNormCall::Kind::InferenceForward;
      call.unitAffine = false;
      ASSERT_EQ(runner.run(call, operands(out.get())), "");
      expectClose(out.toHost(),
                  cpu("BatchNormalization", attrs(training, 0), inputs, shape),
                  training ? "training Y" : "inference Y");
      call.unitAffine = true;
      ASSERT_EQ(runner.run(call, operands(out.get())), "");
      expectClose(out.toHost(),
                  cpu("BatchNormalizationNormalized", attrs(training, 0),
                      {{x, shape}, {mean, cs}, {var, cs}}, shape),
                  training ? "training Xhat" : "inference Xhat");
    }
    call.unitAffine = false;
    call.kind = cuda::BatchNormCall::Kind::Backward;
    ASSERT_EQ(runner.run(call, operands(out.get())), "");
    expectClose(out.toHost(),
                cpu("BatchNormalizationGrad", attrs(1, 0),
                    {{dy, shape}, {x, shape}, {scale, cs}, {mean, cs},
                     {var, cs}},
                    shape),
                "dX");
    for (int output : {1, 2}) {
      call.kind = output == 1 ? cuda::BatchNormCall::Kind::RunningMean
                              : cuda::BatchNormCall::Kind::RunningVar;
      call.setRunningAverage();
      std::vector<float> want =
          cpu("BatchNormalization", attrs(1, output), inputs, cs);
      ASSERT_EQ(runner.run(call, operands(stat.get())), "");
      expectClose(stat.toHost(), want,
                  output == 1 ? "running_mean" : "running_var");
      // In place: the output is the input statistic's buffer.
      DeviceArray inPlace(output == 1 ? mean : var);
      auto p = operands(inPlace.get());
      p[output == 1 ? cuda::kDnnMean : cuda::kDnnVar] = inPlace.get();
      ASSERT_EQ(runner.run(call, p), "");
      expectClose(inPlace.toHost(), want,
                  output == 1 ? "running_mean in place"
                              : "running_var in place");
    }
  }
  // One descriptor set per X shape.
  EXPECT_EQ(runner.descriptorBuilds(), 4);
}

} // namespace

int main(int argc, char **argv) {
  return tofu::test::runGpuTests(argc, argv, "the cuBLAS/cuDNN tests");
}
