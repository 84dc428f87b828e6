//===- CudaElementwise.cu - Element-wise CUDA kernels ---------------------===//
//
// Grid-stride loops; results are bit-identical to the CPU kernels (no fused
// multiply-add is allowed where the CPU rounds twice: __fmul_rn/__fsub_rn).
//
//===----------------------------------------------------------------------===//

#include "CudaElementwise.h"

namespace {

constexpr int kThreads = 256;

int blocksFor(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

__global__ void reluKernel(const float *x, float *y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    y[i] = x[i] < 0.0f ? 0.0f : x[i]; // NaN stays NaN, as in ONNX
}

__global__ void reluGradKernel(const float *dy, const float *x, float *dx,
                               int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void sgdUpdateKernel(const float *w, const float *g, float lr,
                                float *out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    out[i] = __fsub_rn(w[i], __fmul_rn(lr, g[i]));
}

__global__ void addKernel(const float *a, const float *b, float *c,
                          int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    c[i] = a[i] + b[i];
}

__global__ void scaleKernel(const float *x, float alpha, float *y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    y[i] = alpha * x[i];
}

std::string status(const char *what) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess)
    return "";
  return std::string(what) + ": " + cudaGetErrorString(err);
}

} // namespace

namespace tofu::cuda {

std::string relu(const float *x, float *y, int64_t n, cudaStream_t stream) {
  if (n > 0)
    reluKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, y, n);
  return status("Relu");
}

std::string reluGrad(const float *dy, const float *x, float *dx, int64_t n,
                     cudaStream_t stream) {
  if (n > 0)
    reluGradKernel<<<blocksFor(n), kThreads, 0, stream>>>(dy, x, dx, n);
  return status("ReluGrad");
}

std::string sgdUpdate(const float *w, const float *g, float lr, float *wNew,
                      int64_t n, cudaStream_t stream) {
  if (n > 0)
    sgdUpdateKernel<<<blocksFor(n), kThreads, 0, stream>>>(w, g, lr, wNew, n);
  return status("SGDUpdate");
}

std::string add(const float *a, const float *b, float *c, int64_t n,
                cudaStream_t stream) {
  if (n > 0)
    addKernel<<<blocksFor(n), kThreads, 0, stream>>>(a, b, c, n);
  return status("Add");
}

std::string scale(const float *x, float alpha, float *y, int64_t n,
                  cudaStream_t stream) {
  if (n > 0)
    scaleKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, alpha, y, n);
  return status("Scale");
}

} // namespace tofu::cuda
