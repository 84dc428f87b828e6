//===- CudaTransferKernels.cu - Runtime kernels of the CUDA executor ------===//

#include "CudaTransferKernels.h"

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

template <typename T, bool Add, bool Saturate>
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
    if constexpr (!Add)
      dst[d] = src[s];
    else if constexpr (Saturate)
      dst[d] = (dst[d] | src[s]) ? 1 : 0;
    else
      dst[d] += src[s];
  }
}

__global__ void gemmBias(const float *c, int64_t rs, int64_t cs, float beta,
                         float *y, int64_t m, int64_t n) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < m * n;
       e += (int64_t)gridDim.x * blockDim.x) {
    int64_t i = e / n, j = e % n;
    y[e] = beta * c[i * rs + j * cs];
  }
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
  switch (dtype) {
  case plan::DType::F32:
    if (add)
      boxMove<float, true, false><<<grid, 256, 0, stream>>>(
          a, static_cast<const float *>(src), static_cast<float *>(dst), n);
    else
      boxMove<float, false, false><<<grid, 256, 0, stream>>>(
          a, static_cast<const float *>(src), static_cast<float *>(dst), n);
    break;
  case plan::DType::I64:
    if (add)
      boxMove<long long, true, false><<<grid, 256, 0, stream>>>(
          a, static_cast<const long long *>(src), static_cast<long long *>(dst),
          n);
    else
      boxMove<long long, false, false><<<grid, 256, 0, stream>>>(
          a, static_cast<const long long *>(src), static_cast<long long *>(dst),
          n);
    break;
  case plan::DType::Bool:
    if (add)
      boxMove<unsigned char, true, true><<<grid, 256, 0, stream>>>(
          a, static_cast<const unsigned char *>(src),
          static_cast<unsigned char *>(dst), n);
    else
      boxMove<unsigned char, false, false><<<grid, 256, 0, stream>>>(
          a, static_cast<const unsigned char *>(src),
          static_cast<unsigned char *>(dst), n);
    break;
  default:
    return "the box copy kernel has no element type " +
           std::to_string(static_cast<int>(dtype));
  }
  return launched(add ? "box add kernel" : "box copy kernel");
}

std::string tofu::cuda::launchGemmBias(const float *c, int64_t rowStride,
                                       int64_t colStride, float beta, float *y,
                                       int64_t m, int64_t n,
                                       cudaStream_t stream) {
  if (m * n == 0)
    return "";
  gemmBias<<<gridFor(m * n), 256, 0, stream>>>(c, rowStride, colStride, beta,
                                               y, m, n);
  return launched("Gemm bias kernel");
}
