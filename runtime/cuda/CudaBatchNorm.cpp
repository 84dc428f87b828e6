//===- CudaBatchNorm.cpp - cuDNN batch normalization for the CUDA backend -===//
//
// See CudaBatchNorm.h and BatchNormCall in CudaDnnCalls.h. X of rank 2 or 3
// is described as [N, C, 1, 1] or [N, C, L, 1] (cuDNN needs 4-D or 5-D
// tensors; spatial batch normalization does not care where the extents
// sit). No saved mean / inverse standard deviation is passed: each call
// recomputes the batch statistics, as each plan instruction does.
//
//===----------------------------------------------------------------------===//
#include "CudaBatchNorm.h"

#include "CudaCheck.h"

#include <cuda_runtime_api.h>

#include <vector>

using namespace tofu::cuda;

namespace {

constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL;

} // namespace

struct BatchNormRunner::Descriptors {
  cudnnTensorDescriptor_t x = nullptr, bn = nullptr;
  ~Descriptors() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (bn) cudnnDestroyTensorDescriptor(bn);
  }

  std::string build(const std::vector<int64_t> &shape) {
    if (shape.size() < 2 || shape.size() > 5)
      return "cuDNN batch normalization takes X of rank 2 to 5";
    std::vector<int> dims(shape.begin(), shape.end());
    while (dims.size() < 4)
      dims.push_back(1);
    std::vector<int> strides(dims.size(), 1);
    for (size_t i = dims.size() - 1; i-- > 0;)
      strides[i] = strides[i + 1] * dims[i + 1];
    TOFU_CUDNN(cudnnCreateTensorDescriptor(&x));
    TOFU_CUDNN(cudnnCreateTensorDescriptor(&bn));
    TOFU_CUDNN(cudnnSetTensorNdDescriptor(x, CUDNN_DATA_FLOAT,
                                          static_cast<int>(dims.size()),
                                          dims.data(), strides.data()));
    TOFU_CUDNN(cudnnDeriveBNTensorDescriptor(bn, x, kMode));
    return "";
  }
};

BatchNormRunner::BatchNormRunner() = default;

BatchNormRunner::~BatchNormRunner() {
  cache.clear();
  if (constants)
    cudaFree(constants);
  if (scratch)
    cudaFree(scratch);
  if (yScratch)
    cudaFree(yScratch);
  if (handle)
    cudnnDestroy(handle);
}

std::string BatchNormRunner::init(cudaStream_t s) {
  stream = s;
  if (!handle)
    TOFU_CUDNN(cudnnCreate(&handle));
  TOFU_CUDNN(cudnnSetStream(handle, stream));
  return "";
}

std::string BatchNormRunner::descriptorsFor(const std::vector<int64_t> &x,
                                            Descriptors *&d) {
  if (auto it = cache.find(x); it != cache.end()) {
    d = it->second.get();
    return "";
  }
  auto built = std::make_unique<Descriptors>();
  if (std::string err = built->build(x); !err.empty())
    return err;
  ++builds;
  d = built.get();
  cache.emplace(x, std::move(built));
  return "";
}

std::string BatchNormRunner::reserve(int64_t channels, int64_t xElements) {
  if (channels > capacity) {
    // cudaFree waits for the device, so no queued call still uses the old
    // buffers.
    if (constants)
      cudaFree(constants);
    if (scratch)
      cudaFree(scratch);
    constants = scratch = nullptr;
    capacity = 0;
    TOFU_CUDA(cudaMalloc(reinterpret_cast<void **>(&constants),
                           2 * channels * sizeof(float)));
    TOFU_CUDA(cudaMalloc(reinterpret_cast<void **>(&scratch),
                           3 * channels * sizeof(float)));
    TOFU_CUDA(cudaMemsetAsync(constants + channels, 0,
                                channels * sizeof(float), stream));
    TOFU_CUDA(cudaMemsetAsync(scratch, 0, 3 * channels * sizeof(float),
                                stream));
    cudnnTensorDescriptor_t ones = nullptr;
    TOFU_CUDNN(cudnnCreateTensorDescriptor(&ones));
    const float one = 1;
    cudnnStatus_t st = cudnnSetTensor4dDescriptor(
        ones, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
        static_cast<int>(channels), 1, 1);
    if (st == CUDNN_STATUS_SUCCESS)
      st = cudnnSetTensor(handle, ones, constants, &one);
    cudnnDestroyTensorDescriptor(ones);
    if (st != CUDNN_STATUS_SUCCESS)
      return cudnnFailure("cudnnSetTensor (ones)", st);
    capacity = channels;
  }
  if (xElements > yScratchElements) {
    if (yScratch)
      cudaFree(yScratch);
    yScratch = nullptr;
    yScratchElements = 0;
    TOFU_CUDA(cudaMalloc(reinterpret_cast<void **>(&yScratch),
                           xElements * sizeof(float)));
    yScratchElements = xElements;
  }
  return "";
}

std::string BatchNormRunner::run(
    const BatchNormCall &call,
    const std::array<float *, kNumDnnOperands> &p) {
  Descriptors *d = nullptr;
  if (std::string err = descriptorsFor(call.x, d); !err.empty())
    return err;
  const int64_t C = call.x[1];
  int64_t elements = 1;
  for (int64_t e : call.x)
    elements *= e;
  const bool running = call.kind == BatchNormCall::Kind::RunningMean ||
                       call.kind == BatchNormCall::Kind::RunningVar;
  if (std::string err = reserve(C, running ? elements : 0); !err.empty())
    return err;
  float *ones = constants, *zeros = constants + capacity;
  const float one = 1, zero = 0;
  switch (call.kind) {
  case BatchNormCall::Kind::TrainingForward:
    TOFU_CUDNN(cudnnBatchNormalizationForwardTraining(
        handle, kMode, &one, &zero, d->x, p[kDnnX], d->x, p[kDnnY], d->bn,
        call.unitAffine ? ones : p[kDnnScale],
        call.unitAffine ? zeros : p[kDnnBias], 0.0, nullptr, nullptr,
        call.epsilon, nullptr, nullptr));
    return "";
  case BatchNormCall::Kind::InferenceForward:
    TOFU_CUDNN(cudnnBatchNormalizationForwardInference(
        handle, kMode, &one, &zero, d->x, p[kDnnX], d->x, p[kDnnY], d->bn,
        call.unitAffine ? ones : p[kDnnScale],
        call.unitAffine ? zeros : p[kDnnBias], p[kDnnMean], p[kDnnVar],
        call.epsilon));
    return "";
  case BatchNormCall::Kind::Backward:
    // dscale and dB are computed by the plan (ConvBiasGrad); cuDNN's go to
    // scratch.
    TOFU_CUDNN(cudnnBatchNormalizationBackward(
        handle, kMode, &one, &zero, &one, &zero, d->x, p[kDnnX], d->x,
        p[kDnnDy], d->x, p[kDnnDx], d->bn, p[kDnnScale], scratch + capacity,
        scratch + 2 * capacity, call.epsilon, nullptr, nullptr));
    return "";
  case BatchNormCall::Kind::RunningMean:
  case BatchNormCall::Kind::RunningVar: {
    const bool mean = call.kind == BatchNormCall::Kind::RunningMean;
    float *out = p[kDnnY];
    const float *in = p[mean ? kDnnMean : kDnnVar];
    if (out != in)
      TOFU_CUDA(cudaMemcpyAsync(out, in, C * sizeof(float),
                                  cudaMemcpyDeviceToDevice, stream));
    if (call.preScale != 1) {
      const float alpha = static_cast<float>(call.preScale);
      TOFU_CUDNN(cudnnScaleTensor(handle, d->bn, out, &alpha));
    }
    TOFU_CUDNN(cudnnBatchNormalizationForwardTraining(
        handle, kMode, &one, &zero, d->x, p[kDnnX], d->x, yScratch, d->bn,
        ones, zeros, call.factor, mean ? out : scratch,
        mean ? scratch : out, call.epsilon, nullptr, nullptr));
    return "";
  }
  }
  return "unknown batch-normalization call";
}
