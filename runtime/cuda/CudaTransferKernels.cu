//===- CudaTransferKernels.cu - Runtime kernels of the CUDA executor ------===//

#include "CudaTransferKernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

using namespace tofu::cuda;

namespace {

struct BoxArgs {
  int32_t rank;
  int64_t region[kMaxBoxRank], srcExtents[kMaxBoxRank],
      srcStart[kMaxBoxRank], dstExtents[kMaxBoxRank], dstStart[kMaxBoxRank];
};

/// How a box kernel combines a source element into a destination element:
/// as the CPU backend's Reduce adds (runtime/lib/CpuBackend.cpp moveBox):
/// f32, f64, i64 natively; bool saturating at 1; narrower integers wrap;
/// u64 adds in double and saturates (the CPU's generic path); f16 and bf16
/// round the exact sum to nearest even (what the CPU's add in double and
/// single rounding gives; __hadd is IEEE addition).
struct Assign {
  template <typename T> __device__ static void apply(T &d, T s) { d = s; }
};
struct Plus {
  template <typename T> __device__ static void apply(T &d, T s) {
    d = static_cast<T>(d + s);
  }
};
struct Either {
  __device__ static void apply(unsigned char &d, unsigned char s) {
    d = (d | s) ? 1 : 0;
  }
};
struct PlusHalf {
  __device__ static void apply(__half &d, __half s) { d = __hadd(d, s); }
};
struct PlusBFloat16 {
  __device__ static void apply(__nv_bfloat16 &d, __nv_bfloat16 s) {
    d = __hadd(d, s);
  }
};
struct PlusU64InDouble {
  __device__ static void apply(unsigned long long &d, unsigned long long s) {
    double t = trunc(static_cast<double>(d) + static_cast<double>(s));
    d = t >= 18446744073709551616.0 ? ~0ull : static_cast<unsigned long long>(t);
  }
};

template <typename T, typename Combine>
__global__ void boxMove(BoxArgs a, const T *src, T *dst, int64_t n) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
       e += (int64_t)gridDim.x * blockDim.x) {
    int64_t rest = e, s = 0, d = 0, sStride = 1, dStride = 1;
    for (int i = a.rank - 1; i >= 0; --i) {
      int64_t c = rest % a.region[i];
      rest /= a.region[i];
      s += (a.srcStart[i] + c) * sStride;
      d += (a.dstStart[i] + c) * dStride;
      sStride *= a.srcExtents[i];
      dStride *= a.dstExtents[i];
    }
    Combine::apply(dst[d], src[s]);
  }
}

/// y[i, j] = beta * c[i * rs + j * cs], computed in `Compute` (float, or
/// double for double) and rounded to T once.
template <typename T, typename Compute>
__global__ void gemmBias(const T *c, int64_t rs, int64_t cs, Compute beta,
                         T *y, int64_t m, int64_t n) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < m * n;
       e += (int64_t)gridDim.x * blockDim.x) {
    int64_t i = e / n, j = e % n;
    y[e] = static_cast<T>(beta * static_cast<Compute>(c[i * rs + j * cs]));
  }
}

/// y[e] = max(y[e], 0), a NaN kept (as the CPU backend's Relu).
__global__ void reluInPlace(float *y, int64_t n) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
       e += (int64_t)gridDim.x * blockDim.x)
    if (y[e] < 0.0f)
      y[e] = 0.0f;
}

unsigned gridFor(int64_t n) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>((n + 255) / 256, 65535)));
}

std::string launched(const char *what) {
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess
             ? ""
             : std::string(what) + ": " + cudaGetErrorString(err);
}

} // namespace

std::string tofu::cuda::launchBoxMove(const BoxMove &box, const void *src,
                                      void *dst, plan::DType dtype, bool add,
                                      cudaStream_t stream) {
  BoxArgs a;
  a.rank = box.rank;
  int64_t n = 1;
  for (size_t i = 0; i < kMaxBoxRank; ++i) {
    a.region[i] = box.region[i];
    a.srcExtents[i] = box.srcExtents[i];
    a.srcStart[i] = box.srcStart[i];
    a.dstExtents[i] = box.dstExtents[i];
    a.dstStart[i] = box.dstStart[i];
    if (static_cast<int32_t>(i) < box.rank)
      n *= box.region[i];
  }
  if (n == 0)
    return "";
  const unsigned grid = gridFor(n);
  auto launch = [&](auto zero, auto combine) {
    using T = decltype(zero);
    boxMove<T, decltype(combine)><<<grid, 256, 0, stream>>>(
        a, static_cast<const T *>(src), static_cast<T *>(dst), n);
  };
  const size_t size = plan::dtypeSize(dtype);
  if (!plan::isValidDType(static_cast<uint8_t>(dtype)))
    return "the box kernels have no element type " +
           std::to_string(static_cast<int>(dtype));
  if (!add) {
    // A copy moves bytes: one kernel per element size.
    switch (size) {
    case 1: launch((unsigned char)0, Assign()); break;
    case 2: launch((unsigned short)0, Assign()); break;
    case 4: launch(0u, Assign()); break;
    default: launch(0ull, Assign()); break;
    }
    return launched("box copy kernel");
  }
  switch (dtype) {
  case plan::DType::F32: launch(0.0f, Plus()); break;
  case plan::DType::F64: launch(0.0, Plus()); break;
  case plan::DType::I64: launch(0ll, Plus()); break;
  case plan::DType::Bool: launch((unsigned char)0, Either()); break;
  case plan::DType::I32:
  case plan::DType::U32: launch(0u, Plus()); break;
  case plan::DType::I16:
  case plan::DType::U16: launch((unsigned short)0, Plus()); break;
  case plan::DType::I8:
  case plan::DType::U8: launch((unsigned char)0, Plus()); break;
  case plan::DType::U64: launch(0ull, PlusU64InDouble()); break;
  case plan::DType::F16: launch(__half(), PlusHalf()); break;
  case plan::DType::BF16: launch(__nv_bfloat16(), PlusBFloat16()); break;
  }
  return launched(add ? "box add kernel" : "box copy kernel");
}

std::string tofu::cuda::launchGemmBias(const void *c, int64_t rowStride,
                                       int64_t colStride, double beta, void *y,
                                       int64_t m, int64_t n, plan::DType dtype,
                                       cudaStream_t stream) {
  if (m * n == 0)
    return "";
  const unsigned grid = gridFor(m * n);
  const float betaF = static_cast<float>(beta);
  switch (dtype) {
  case plan::DType::F32:
    gemmBias<<<grid, 256, 0, stream>>>(static_cast<const float *>(c),
                                       rowStride, colStride, betaF,
                                       static_cast<float *>(y), m, n);
    break;
  case plan::DType::F64:
    gemmBias<<<grid, 256, 0, stream>>>(static_cast<const double *>(c),
                                       rowStride, colStride, beta,
                                       static_cast<double *>(y), m, n);
    break;
  case plan::DType::F16:
    gemmBias<<<grid, 256, 0, stream>>>(static_cast<const __half *>(c),
                                       rowStride, colStride, betaF,
                                       static_cast<__half *>(y), m, n);
    break;
  case plan::DType::BF16:
    gemmBias<<<grid, 256, 0, stream>>>(static_cast<const __nv_bfloat16 *>(c),
                                       rowStride, colStride, betaF,
                                       static_cast<__nv_bfloat16 *>(y), m, n);
    break;
  default:
    return std::string("the Gemm bias kernel has no element type ") +
           plan::dtypeNumpyName(dtype) + " (float32, float64, float16, "
           "bfloat16)";
  }
  return launched("Gemm bias kernel");
}

std::string tofu::cuda::launchReluInPlace(float *y, int64_t n,
                                          cudaStream_t stream) {
  if (n == 0)
    return "";
  reluInPlace<<<gridFor(n), 256, 0, stream>>>(y, n);
  return launched("ReLU kernel");
}
