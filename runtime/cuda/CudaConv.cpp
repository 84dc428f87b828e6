//===- CudaConv.cpp - cuDNN convolution for the CUDA backend --------------===//
//
// Uses cuDNN's descriptor API (cudnnConvolution*; deprecated in cuDNN 9 in
// favour of the graph API but supported). cuDNN has symmetric padding only:
// an asymmetric pad (begin != end) is refused with a clear message (the
// executor would pad the input first).
//
//===----------------------------------------------------------------------===//
#include "CudaConv.h"

#include "CudaCheck.h"

#include <cuda_runtime_api.h>

#include <memory>

using namespace tofu::cuda;

std::vector<int64_t> ConvShape::y() const {
  std::vector<int64_t> out = {x[0], w[0]};
  for (size_t s = 0; s + 2 < x.size(); ++s)
    out.push_back((x[s + 2] + padsBegin[s] + padsEnd[s] -
                   dilations[s] * (w[s + 2] - 1) - 1) /
                      strides[s] +
                  1);
  return out;
}

bool ConvShape::operator<(const ConvShape &o) const {
  return std::tie(x, w, padsBegin, padsEnd, strides, dilations, group,
                  dataType) < std::tie(o.x, o.w, o.padsBegin, o.padsEnd,
                                       o.strides, o.dilations, o.group,
                                       o.dataType);
}

namespace {

/// cuDNN's alpha = 1 and beta = 0 for `type`: double for double data, float
/// otherwise (float and half data compute in float).
struct Scaling {
  double d1 = 1, d0 = 0;
  float f1 = 1, f0 = 0;
  bool isDouble;
  explicit Scaling(cudnnDataType_t type) : isDouble(type == CUDNN_DATA_DOUBLE) {}
  const void *one() const { return isDouble ? static_cast<const void *>(&d1) : &f1; }
  const void *zero() const { return isDouble ? static_cast<const void *>(&d0) : &f0; }
};

/// The descriptors of one shape; destroyed with the object.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ~Descriptors() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }

  /// 1-D convolutions become 2-D with a leading spatial extent of 1 (cuDNN
  /// needs at least 4-D tensors).
  std::string build(const ConvShape &shape) {
    size_t spatial = shape.x.size() - 2;
    if (spatial < 1 || spatial > 3 || shape.w.size() != shape.x.size())
      return "cuDNN convolution supports 1 to 3 spatial dims, not " +
             std::to_string(spatial);
    for (size_t s = 0; s < spatial; ++s)
      if (shape.padsBegin[s] != shape.padsEnd[s])
        return "cuDNN convolution needs symmetric pads; dim " +
               std::to_string(s) + " has " +
               std::to_string(shape.padsBegin[s]) + " before and " +
               std::to_string(shape.padsEnd[s]) + " after";
    auto widen = [&](std::vector<int64_t> v, int64_t fill) {
      if (spatial == 1)
        v.insert(v.begin() + 2, fill);
      return std::vector<int>(v.begin(), v.end());
    };
    auto spatialOnly = [&](const std::vector<int64_t> &v, int fill) {
      std::vector<int> r(v.begin(), v.end());
      if (spatial == 1)
        r.insert(r.begin(), fill);
      return r;
    };
    std::vector<int> xd = widen(shape.x, 1), wd = widen(shape.w, 1),
                     yd = widen(shape.y(), 1);
    auto strides = [](const std::vector<int> &d) {
      std::vector<int> s(d.size(), 1);
      for (size_t i = d.size() - 1; i-- > 0;)
        s[i] = s[i + 1] * d[i + 1];
      return s;
    };
    std::vector<int> xs = strides(xd), ys = strides(yd);
    std::vector<int> pads = spatialOnly(shape.padsBegin, 0),
                     convStrides = spatialOnly(shape.strides, 1),
                     dilations = spatialOnly(shape.dilations, 1);
    TOFU_CUDNN(cudnnCreateTensorDescriptor(&x));
    TOFU_CUDNN(cudnnCreateTensorDescriptor(&y));
    TOFU_CUDNN(cudnnCreateFilterDescriptor(&w));
    TOFU_CUDNN(cudnnCreateConvolutionDescriptor(&conv));
    TOFU_CUDNN(cudnnSetTensorNdDescriptor(x, shape.dataType,
                                          static_cast<int>(xd.size()),
                                          xd.data(), xs.data()));
    TOFU_CUDNN(cudnnSetTensorNdDescriptor(y, shape.dataType,
                                          static_cast<int>(yd.size()),
                                          yd.data(), ys.data()));
    TOFU_CUDNN(cudnnSetFilterNdDescriptor(w, shape.dataType,
                                          CUDNN_TENSOR_NCHW,
                                          static_cast<int>(wd.size()),
                                          wd.data()));
    // Cross-correlation, as ONNX Conv; fp32 math (no TF32) for float and
    // half data (half: PSEUDO_HALF_CONFIG), double math for double, so that
    // results stay within the type's tolerance of the CPU kernels.
    if (shape.dataType != CUDNN_DATA_FLOAT &&
        shape.dataType != CUDNN_DATA_DOUBLE && shape.dataType != CUDNN_DATA_HALF)
      return "cuDNN convolution is mapped for float, double and half data "
             "only";
    TOFU_CUDNN(cudnnSetConvolutionNdDescriptor(
        conv, static_cast<int>(pads.size()), pads.data(), convStrides.data(),
        dilations.data(), CUDNN_CROSS_CORRELATION,
        shape.dataType == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE
                                            : CUDNN_DATA_FLOAT));
    TOFU_CUDNN(cudnnSetConvolutionGroupCount(conv,
                                             static_cast<int>(shape.group)));
    TOFU_CUDNN(cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH));
    return "";
  }
};

/// The first of cuDNN's ranked algorithms `perf[0, found)` that succeeded and
/// fits in `limit` bytes of workspace: its algorithm and workspace size;
/// false if none does.
template <typename Perf>
bool firstFitting(const Perf *perf, int found, size_t limit, int &algo,
                  size_t &workspace) {
  for (int i = 0; i < found; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= limit) {
      algo = static_cast<int>(perf[i].algo);
      workspace = perf[i].memory;
      return true;
    }
  return false;
}

} // namespace

ConvRunner::~ConvRunner() {
  if (workspacePtr)
    cudaFree(workspacePtr);
  if (handle)
    cudnnDestroy(handle);
}

std::string ConvRunner::init(cudaStream_t stream, size_t workspaceLimit) {
  limit = workspaceLimit;
  if (!handle)
    TOFU_CUDNN(cudnnCreate(&handle));
  TOFU_CUDNN(cudnnSetStream(handle, stream));
  return "";
}

std::string ConvRunner::workspace(size_t bytes, void *&ptr) {
  if (bytes > workspaceBytes) {
    if (workspacePtr)
      cudaFree(workspacePtr);
    workspacePtr = nullptr;
    workspaceBytes = 0;
    cudaError_t err = cudaMalloc(&workspacePtr, bytes);
    if (err != cudaSuccess)
      return "cannot allocate " + std::to_string(bytes) +
             " bytes of cuDNN workspace: " + cudaGetErrorString(err);
    workspaceBytes = bytes;
  }
  ptr = workspacePtr;
  return "";
}

std::string ConvRunner::choose(const ConvShape &shape, ConvDirection dir,
                               Choice &choice) {
  auto key = std::make_pair(static_cast<int>(dir), shape);
  if (auto it = cache.find(key); it != cache.end()) {
    choice = it->second;
    ++hits;
    return "";
  }
  ++searches;
  Descriptors d;
  if (std::string err = d.build(shape); !err.empty())
    return err;
  constexpr int kMax = 16;
  int found = 0;
  bool chosen = false;
  switch (dir) {
  case ConvDirection::Forward: {
    cudnnConvolutionFwdAlgoPerf_t perf[kMax];
    TOFU_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(
        handle, d.x, d.w, d.conv, d.y, kMax, &found, perf));
    chosen = firstFitting(perf, found, limit, choice.algo, choice.workspace);
    break;
  }
  case ConvDirection::BackwardData: {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
    TOFU_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        handle, d.w, d.y, d.conv, d.x, kMax, &found, perf));
    chosen = firstFitting(perf, found, limit, choice.algo, choice.workspace);
    break;
  }
  case ConvDirection::BackwardFilter: {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
    TOFU_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        handle, d.x, d.y, d.conv, d.w, kMax, &found, perf));
    chosen = firstFitting(perf, found, limit, choice.algo, choice.workspace);
    break;
  }
  }
  if (!chosen)
    return "cuDNN has no convolution algorithm for this shape within the "
           "workspace limit of " +
           std::to_string(limit) + " bytes";
  cache.emplace(key, choice);
  return "";
}

std::string ConvRunner::forward(const ConvShape &shape, const void *x,
                                const void *w, void *y) {
  Choice c;
  if (std::string err = choose(shape, ConvDirection::Forward, c); !err.empty())
    return err;
  Descriptors d;
  if (std::string err = d.build(shape); !err.empty())
    return err;
  void *ws = nullptr;
  if (std::string err = workspace(c.workspace, ws); !err.empty())
    return err;
  const Scaling scale(shape.dataType);
  TOFU_CUDNN(cudnnConvolutionForward(
      handle, scale.one(), d.x, x, d.w, w, d.conv,
      static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), ws, c.workspace, scale.zero(),
      d.y, y));
  return "";
}

std::string ConvRunner::backwardData(const ConvShape &shape, const void *dy,
                                     const void *w, void *dx) {
  Choice c;
  if (std::string err = choose(shape, ConvDirection::BackwardData, c);
      !err.empty())
    return err;
  Descriptors d;
  if (std::string err = d.build(shape); !err.empty())
    return err;
  void *ws = nullptr;
  if (std::string err = workspace(c.workspace, ws); !err.empty())
    return err;
  const Scaling scale(shape.dataType);
  TOFU_CUDNN(cudnnConvolutionBackwardData(
      handle, scale.one(), d.w, w, d.y, dy, d.conv,
      static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), ws, c.workspace,
      scale.zero(), d.x, dx));
  return "";
}

std::string ConvRunner::backwardFilter(const ConvShape &shape, const void *dy,
                                       const void *x, void *dw) {
  Choice c;
  if (std::string err = choose(shape, ConvDirection::BackwardFilter, c);
      !err.empty())
    return err;
  Descriptors d;
  if (std::string err = d.build(shape); !err.empty())
    return err;
  void *ws = nullptr;
  if (std::string err = workspace(c.workspace, ws); !err.empty())
    return err;
  const Scaling scale(shape.dataType);
  TOFU_CUDNN(cudnnConvolutionBackwardFilter(
      handle, scale.one(), d.x, x, d.y, dy, d.conv,
      static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), ws, c.workspace,
      scale.zero(), d.w, dw));
  return "";
}
