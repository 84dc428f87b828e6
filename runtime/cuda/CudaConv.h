//===- CudaConv.h - cuDNN convolution for the CUDA backend --------*- C++ -*-===//
//
// Float32, float64 and float16 NCHW (and NCW / NCDHW) convolution through
// cuDNN (float16 computed in float32, no TF32) with the
// semantics of the CPU kernels Conv, ConvGradInput and ConvGradWeight
// (runtime/lib/KernelsConv.cpp, tdl-specs/conv.tdl): explicit begin/end
// pads, strides, dilations, groups. The algorithm of each direction is
// chosen once per shape (cuDNN's heuristics, the first one whose workspace
// fits the limit) and cached. Called by the CUDA executor (CudaExecutor.cpp)
// for Conv, ConvGradInput and ConvGradWeight; tested against the CPU kernels
// where a GPU exists (tofu-cuda-library-tests, label gpu; run on an H200,
// bench/gpu/H200.md).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDACONV_H
#define TOFU_RUNTIME_CUDA_CUDACONV_H

#include <cudnn.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tofu::cuda {

/// One convolution: X [N, C, *S], W [M, C / group, *K], Y [N, M, *O].
/// `padsBegin`/`padsEnd`, `strides`, `dilations` have one entry per spatial
/// dim (1 to 3 spatial dims).
struct ConvShape {
  std::vector<int64_t> x, w;
  std::vector<int64_t> padsBegin, padsEnd, strides, dilations;
  int64_t group = 1;
  /// Element type of X, W and Y: CUDNN_DATA_FLOAT, _DOUBLE or _HALF.
  cudnnDataType_t dataType = CUDNN_DATA_FLOAT;
  /// Y's shape (ONNX formula).
  std::vector<int64_t> y() const;
  bool operator<(const ConvShape &o) const;
};

/// The three directions.
enum class ConvDirection { Forward = 0, BackwardData = 1, BackwardFilter = 2 };

/// A cuDNN handle plus the per-shape algorithm cache.
class ConvRunner {
public:
  ConvRunner() = default;
  ~ConvRunner();
  ConvRunner(const ConvRunner &) = delete;
  ConvRunner &operator=(const ConvRunner &) = delete;

  /// Creates the handle on the current device and sets `stream`; the
  /// workspace limit bounds the algorithms chosen.
  std::string init(cudaStream_t stream = nullptr,
                   size_t workspaceLimit = size_t(256) << 20);

  /// Y = conv(X, W). Pointers are arrays of `shape.dataType`.
  std::string forward(const ConvShape &shape, const void *x, const void *w,
                      void *y);
  /// dX = the gradient of conv wrt X, from dY and W.
  std::string backwardData(const ConvShape &shape, const void *dy,
                           const void *w, void *dx);
  /// dW = the gradient of conv wrt W, from dY and X.
  std::string backwardFilter(const ConvShape &shape, const void *dy,
                             const void *x, void *dw);

  /// How many algorithm choices were made (cache misses) and reused.
  int64_t algorithmSearches() const { return searches; }
  int64_t algorithmCacheHits() const { return hits; }
  /// Bytes of workspace allocated (the largest the chosen algorithms need).
  size_t workspaceAllocated() const { return workspaceBytes; }

private:
  struct Choice {
    int algo = 0;
    size_t workspace = 0;
  };
  std::string choose(const ConvShape &shape, ConvDirection dir,
                     Choice &choice);
  std::string workspace(size_t bytes, void *&ptr);

  cudnnHandle_t handle = nullptr;
  size_t limit = 0;
  std::map<std::pair<int, ConvShape>, Choice> cache;
  void *workspacePtr = nullptr;
  size_t workspaceBytes = 0;
  int64_t searches = 0, hits = 0;
};

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDACONV_H
