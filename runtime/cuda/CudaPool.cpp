//===- CudaPool.cpp - cuDNN pooling for the CUDA backend ------------------===//
//
// See CudaPool.h. 1-D pooling becomes 2-D with a leading spatial extent of
// 1 (cuDNN needs at least 4-D tensors). Max pooling does not propagate NaN
// (the CPU kernel's std::max skips a NaN cell as well).
//
//===----------------------------------------------------------------------===//
#include "CudaPool.h"

#include "CudaCheck.h"

#include <cuda_runtime_api.h>

#include <vector>

using namespace tofu::cuda;

namespace {

/// `v` as int, widened to 2 spatial dims when it has 1 (`fill` inserted at
/// position `at`).
std::vector<int> widened(const std::vector<int64_t> &v, size_t at, int fill,
                         bool widen) {
  std::vector<int> r(v.begin(), v.end());
  if (widen)
    r.insert(r.begin() + static_cast<long>(at), fill);
  return r;
}

std::string packedTensor(cudnnTensorDescriptor_t desc,
                         const std::vector<int> &dims) {
  std::vector<int> strides(dims.size(), 1);
  for (size_t i = dims.size() - 1; i-- > 0;)
    strides[i] = strides[i + 1] * dims[i + 1];
  TOFU_CUDNN(cudnnSetTensorNdDescriptor(desc, CUDNN_DATA_FLOAT,
                                        static_cast<int>(dims.size()),
                                        dims.data(), strides.data()));
  return "";
}

} // namespace

struct PoolRunner::Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnPoolingDescriptor_t pool = nullptr;
  ~Descriptors() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (pool) cudnnDestroyPoolingDescriptor(pool);
  }

  std::string build(const PoolCall &call) {
    const size_t spatial = call.x.size() - 2;
    if (spatial < 1 || spatial > 3 || call.y.size() != call.x.size() ||
        call.window.size() != spatial || call.pads.size() != spatial ||
        call.strides.size() != spatial)
      return "cuDNN pooling takes 1 to 3 spatial dims with one window, pad "
             "and stride each";
    const bool widen = spatial == 1;
    TOFU_CUDNN(cudnnCreateTensorDescriptor(&x));
    TOFU_CUDNN(cudnnCreateTensorDescriptor(&y));
    TOFU_CUDNN(cudnnCreatePoolingDescriptor(&pool));
    if (std::string err = packedTensor(x, widened(call.x, 2, 1, widen));
        !err.empty())
      return err;
    if (std::string err = packedTensor(y, widened(call.y, 2, 1, widen));
        !err.empty())
      return err;
    const cudnnPoolingMode_t mode =
        call.mode == PoolCall::Mode::Max ? CUDNN_POOLING_MAX
        : call.mode == PoolCall::Mode::AverageIncludePad
            ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
            : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    std::vector<int> window = widened(call.window, 0, 1, widen);
    std::vector<int> pads = widened(call.pads, 0, 0, widen);
    std::vector<int> strides = widened(call.strides, 0, 1, widen);
    TOFU_CUDNN(cudnnSetPoolingNdDescriptor(
        pool, mode, CUDNN_NOT_PROPAGATE_NAN, static_cast<int>(window.size()),
        window.data(), pads.data(), strides.data()));
    // cuDNN's own output extents must be Y's (the mapping checked the
    // floor formula; this catches a disagreement before any launch).
    std::vector<int> expect(window.size() + 2);
    TOFU_CUDNN(cudnnGetPoolingNdForwardOutputDim(
        pool, x, static_cast<int>(expect.size()), expect.data()));
    if (expect != widened(call.y, 2, 1, widen))
      return "cuDNN's pooling output shape differs from Y's";
    return "";
  }
};

PoolRunner::PoolRunner() = default;

PoolRunner::~PoolRunner() {
  cache.clear();
  if (handle)
    cudnnDestroy(handle);
}

std::string PoolRunner::init(cudaStream_t stream) {
  if (!handle)
    TOFU_CUDNN(cudnnCreate(&handle));
  TOFU_CUDNN(cudnnSetStream(handle, stream));
  return "";
}

std::string PoolRunner::descriptorsFor(const PoolCall &call,
                                       Descriptors *&d) {
  if (auto it = cache.find(call); it != cache.end()) {
    d = it->second.get();
    return "";
  }
  auto built = std::make_unique<Descriptors>();
  if (std::string err = built->build(call); !err.empty())
    return err;
  ++builds;
  d = built.get();
  cache.emplace(call, std::move(built));
  return "";
}

std::string PoolRunner::forward(const PoolCall &call, const float *x,
                                float *y) {
  if (call.backward)
    return "PoolRunner::forward got a backward call";
  Descriptors *d = nullptr;
  if (std::string err = descriptorsFor(call, d); !err.empty())
    return err;
  const float one = 1, zero = 0;
  TOFU_CUDNN(cudnnPoolingForward(handle, d->pool, &one, d->x, x, &zero, d->y,
                                 y));
  return "";
}

std::string PoolRunner::backward(const PoolCall &call, const float *dy,
                                 const float *x, float *dx) {
  if (!call.backward || call.mode == PoolCall::Mode::Max)
    return "PoolRunner::backward takes average-pooling backward calls only";
  Descriptors *d = nullptr;
  if (std::string err = descriptorsFor(call, d); !err.empty())
    return err;
  const float one = 1, zero = 0;
  TOFU_CUDNN(cudnnPoolingBackward(handle, d->pool, &one, d->y, dy, d->y, dy,
                                  d->x, x, &zero, d->x, dx));
  return "";
}
