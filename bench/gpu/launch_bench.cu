// bench/gpu/launch_bench.cu: what one small GPU operation costs inside a
// replayed CUDA graph, as tofu-run's CUDA backend replays its step, for the
// device descriptions of docs/DeviceModel.md (`launch_seconds`).
//
//   launch_bench > LAUNCH.jsonl
//
// Each case captures N operations of one kind on one stream into a graph,
// replays the graph R times and prints one JSON line with the median replay
// time divided by N (`us_per_op`), for N = 100 and N = 1000 (a per-op cost
// that does not depend on N is the graph's, not a start-up's):
//
//   empty_kernel        a kernel of one block of 32 threads that does nothing;
//   add_4k / add_256k   out[i] = a[i] + b[i] over 4096 / 262144 floats, 256
//                       threads a block (a small and a mid-sized generated
//                       element-wise kernel);
//   sgemm_64 / sgemm_256  cublasSgemm of 64^3 / 256^3 (float32, default math
//                       mode as the backend's handle: no TF32);
//   dgemm_64            cublasDgemm of 64^3;
//   conv_f32 / conv_f64 cudnnConvolutionForward, N 8, C 16 -> 16, 16x16, 3x3,
//                       pad 1, the implicit GEMM algorithm (float32 and
//                       float64 data and math).
//
// Built with nvcc -lcublas -lcudnn (bench/gpu/README.md); no tofu code.

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace {

#define CHECK(x)                                                              \
  do {                                                                        \
    if (!(x)) {                                                               \
      std::fprintf(stderr, "launch_bench: %s failed at line %d\n", #x,        \
                   __LINE__);                                                 \
      return false;                                                           \
    }                                                                         \
  } while (0)

__global__ void emptyKernel() {}

__global__ void addKernel(const float *a, const float *b, float *out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += gridDim.x * blockDim.x)
    out[i] = a[i] + b[i];
}

/// Captures `count` calls of `op` on `stream` into a graph, replays it
/// `replays` times after two warm-up replays, and returns the median replay
/// time in microseconds divided by `count` (negative on failure).
double perOp(cudaStream_t stream, int count,
             const std::function<bool()> &op) {
  const int replays = 21;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) !=
      cudaSuccess)
    return -1;
  bool ok = true;
  for (int i = 0; i < count && ok; ++i)
    ok = op();
  if (cudaStreamEndCapture(stream, &graph) != cudaSuccess || !ok)
    return -1;
  if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
    return -1;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<float> ms;
  for (int r = 0; r < replays + 2; ++r) {
    cudaEventRecord(start, stream);
    cudaGraphLaunch(exec, stream);
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float t = 0;
    cudaEventElapsedTime(&t, start, stop);
    if (r >= 2)
      ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  if (cudaGetLastError() != cudaSuccess)
    return -1;
  return ms[ms.size() / 2] * 1000.0 / count;
}

void report(const char *name, cudaStream_t stream,
            const std::function<bool()> &op) {
  for (int count : {100, 1000}) {
    double us = perOp(stream, count, op);
    if (us < 0)
      std::printf("{\"case\": \"%s\", \"ops\": %d, \"error\": \"%s\"}\n", name,
                  count, cudaGetErrorString(cudaGetLastError()));
    else
      std::printf("{\"case\": \"%s\", \"ops\": %d, \"us_per_op\": %.3f}\n",
                  name, count, us);
    std::fflush(stdout);
  }
}

/// One cuDNN forward convolution of the header's shape in `type`.
struct Conv {
  cudnnHandle_t dnn = nullptr;
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  void *dx = nullptr, *dw = nullptr, *dy = nullptr, *work = nullptr;
  size_t workBytes = 0;
  bool isDouble = false;

  bool init(cudaStream_t stream, cudnnDataType_t type, size_t elem) {
    isDouble = type == CUDNN_DATA_DOUBLE;
    const int n = 8, c = 16, h = 16, k = 16;
    CHECK(cudnnCreate(&dnn) == CUDNN_STATUS_SUCCESS);
    CHECK(cudnnSetStream(dnn, stream) == CUDNN_STATUS_SUCCESS);
    cudnnCreateTensorDescriptor(&x);
    cudnnCreateTensorDescriptor(&y);
    cudnnCreateFilterDescriptor(&w);
    cudnnCreateConvolutionDescriptor(&conv);
    CHECK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, type, n, c, h, h) ==
          CUDNN_STATUS_SUCCESS);
    CHECK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, type, n, k, h, h) ==
          CUDNN_STATUS_SUCCESS);
    CHECK(cudnnSetFilter4dDescriptor(w, type, CUDNN_TENSOR_NCHW, k, c, 3, 3) ==
          CUDNN_STATUS_SUCCESS);
    CHECK(cudnnSetConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 1,
                                          CUDNN_CROSS_CORRELATION, type) ==
          CUDNN_STATUS_SUCCESS);
    CHECK(cudnnGetConvolutionForwardWorkspaceSize(
              dnn, x, w, conv, y, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
              &workBytes) == CUDNN_STATUS_SUCCESS);
    CHECK(cudaMalloc(&dx, size_t(n) * c * h * h * elem) == cudaSuccess);
    CHECK(cudaMalloc(&dy, size_t(n) * k * h * h * elem) == cudaSuccess);
    CHECK(cudaMalloc(&dw, size_t(k) * c * 9 * elem) == cudaSuccess);
    if (workBytes)
      CHECK(cudaMalloc(&work, workBytes) == cudaSuccess);
    cudaMemset(dx, 0, size_t(n) * c * h * h * elem);
    cudaMemset(dw, 0, size_t(k) * c * 9 * elem);
    return true;
  }

  bool run() {
    const double one = 1, zero = 0;
    const float onef = 1, zerof = 0;
    const void *alpha = isDouble ? static_cast<const void *>(&one) : &onef;
    const void *beta = isDouble ? static_cast<const void *>(&zero) : &zerof;
    return cudnnConvolutionForward(dnn, alpha, x, dx, w, dw, conv,
                                   CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                   work, workBytes, beta, y, dy) ==
           CUDNN_STATUS_SUCCESS;
  }
};

bool runAll() {
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) ==
        cudaSuccess);
  report("empty_kernel", stream, [&] {
    emptyKernel<<<1, 32, 0, stream>>>();
    return true;
  });
  float *a, *b, *c;
  const int big = 1 << 18;
  CHECK(cudaMalloc(&a, big * sizeof(float)) == cudaSuccess);
  CHECK(cudaMalloc(&b, big * sizeof(float)) == cudaSuccess);
  CHECK(cudaMalloc(&c, big * sizeof(float)) == cudaSuccess);
  cudaMemset(a, 0, big * sizeof(float));
  cudaMemset(b, 0, big * sizeof(float));
  report("add_4k", stream, [&] {
    addKernel<<<16, 256, 0, stream>>>(a, b, c, 4096);
    return true;
  });
  report("add_256k", stream, [&] {
    addKernel<<<1024, 256, 0, stream>>>(a, b, c, big);
    return true;
  });
  cublasHandle_t blas;
  CHECK(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasSetStream(blas, stream) == CUBLAS_STATUS_SUCCESS);
  const float onef = 1, zerof = 0;
  for (int n : {64, 256}) {
    std::string name = "sgemm_" + std::to_string(n);
    report(name.c_str(), stream, [&] {
      return cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &onef, a, n,
                         b, n, &zerof, c, n) == CUBLAS_STATUS_SUCCESS;
    });
  }
  const double one = 1, zero = 0;
  report("dgemm_64", stream, [&] {
    return cublasDgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 64, 64, 64, &one,
                       reinterpret_cast<double *>(a), 64,
                       reinterpret_cast<double *>(b), 64, &zero,
                       reinterpret_cast<double *>(c), 64) ==
           CUBLAS_STATUS_SUCCESS;
  });
  Conv f32, f64;
  if (f32.init(stream, CUDNN_DATA_FLOAT, sizeof(float)))
    report("conv_f32", stream, [&] { return f32.run(); });
  if (f64.init(stream, CUDNN_DATA_DOUBLE, sizeof(double)))
    report("conv_f64", stream, [&] { return f64.run(); });
  return true;
}

} // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "launch_bench: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("{\"device\": \"%s\"}\n", prop.name);
  return runAll() ? 0 : 1;
}
