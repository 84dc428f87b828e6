//===- DeviceModel.h - what one device can do, and its links ----*- C++ -*-===//
//
// The parameters of the step-time model (StepTimeModel.h): per-device
// FLOP/s by element type and op class (a datasheet peak times an
// efficiency), memory bandwidth and size, kernel launch cost, and the links
// of each interconnect level. A device description is a JSON file
// (docs/DeviceModel.md); `tofuc --device NAME|FILE` reads one, and the
// built-in ones (k80, v100, a100, h100, cpu) are written in the same JSON
// with their sources, in DeviceModel.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TRANSFORMS_DEVICEMODEL_H
#define TOFU_TRANSFORMS_DEVICEMODEL_H

#include "tofu/TDL/TDL.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tofu {

/// What one device can do, for the step-time model. Rates are per device.
struct DeviceModel {
  /// A FLOP rate: a datasheet (or measured) peak and the fraction of it a
  /// large, well-shaped kernel of that class sustains.
  struct Rate {
    double peakFlops = 0;
    double efficiency = 1;
    double sustained() const { return peakFlops * efficiency; }
  };
  /// The rates of one element type, by op class: GEMM-like contractions
  /// (MatMul, Gemm, Einsum), convolutions (and their gradients), and vector
  /// work (element-wise, reductions, everything else).
  struct ComputeRates {
    tdl::ElemType dtype = tdl::ElemType::F32;
    Rate gemm, conv, vector;
  };
  /// One interconnect level (a `--topology` level name), innermost first.
  struct Link {
    std::string name;
    /// Bytes per second one device receives over this link, in GB/s
    /// (1e9 bytes).
    double gbps = 0;
    /// Fixed cost of one message (one fetch piece or reduction piece).
    double latencySeconds = 0;
  };

  /// What one kernel costs per element of its largest operand, measured
  /// (tofu-run --calibrate) at kSmallElements and kLargeElements elements
  /// in cache; in between, interpolated in log(elements); outside, the
  /// nearer one. Replaces the roofline's FLOP term for that kernel (its
  /// memory term still bounds it: data that do not fit the cache).
  /// A kernel that loops over rows (a softmax's or layer norm's normalized
  /// rows, a loss's rows of classes, a batch norm's planes of one image and
  /// channel) may also cost `rowSeconds` per row: what makes short rows
  /// slower per element (0 = not measured).
  /// A kernel may also have its own cost per call (`callSeconds`), which
  /// replaces `launchSeconds` for it: on a GPU, what one call costs inside
  /// a replayed CUDA graph differs by kernel (a generated kernel, a cuBLAS
  /// or cuDNN call; tofu-run --kernel-times). Contractions (cuBLAS and
  /// cuDNN calls) use only `callSeconds`: their work is the rates'. A
  /// kernel may give only `callSeconds` (0 = launchSeconds applies).
  /// `threadsFromElements` (measured: the fewest elements at which the
  /// CPU runtime's kernel split its work over the worker pool; 0 = not
  /// known) makes the small cost a one-thread one: a call below that size
  /// costs it per element; from that size on, the cost runs from the small
  /// one shared by the host's threads to the large probe's (where the
  /// kernel does not thread up to kLargeElements, the large probe ran on
  /// one thread too). Without it, the two probes are interpolated as
  /// above.
  struct KernelCost {
    std::string kernel;
    double smallSecondsPerElement = 0, largeSecondsPerElement = 0;
    double rowSeconds = 0;
    double callSeconds = 0;
    double threadsFromElements = 0;
    /// Seconds per element of a call of `elements` on a host whose kernels
    /// split over `threads` threads.
    double secondsPerElement(double elements, unsigned threads = 1) const;
    /// Whether a call of `elements` splits over the pool (false when not
    /// known).
    bool threadsAt(double elements) const;
    /// Whether it gives per-element costs (not only a call's).
    bool hasPerElementCost() const {
      return smallSecondsPerElement > 0 || largeSecondsPerElement > 0;
    }
  };
  static constexpr double kSmallElements = 16384;
  static constexpr double kLargeElements = 1 << 20;

  std::string name;
  /// What the device is and where its numbers come from (free text).
  std::string description;
  std::vector<std::string> sources;

  /// Sustained FLOP/s of a large float32 GEMM-like contraction, and of
  /// float32 vector work: the rates the partitioner's time objective uses
  /// (the `f32` entry of `compute`, sustained).
  double gemmFlopsPerSecond = 0;
  double vectorFlopsPerSecond = 0;
  /// By element type; an element type not listed computes at the f32 rates
  /// (integer and boolean ops too).
  std::vector<ComputeRates> compute;
  /// Bytes per second a kernel streams through memory (sustained).
  double memoryBytesPerSecond = 0;
  /// A kernel (or copy) whose traffic (bytes read and written) is at most
  /// `cacheBytes` streams at `cacheBytesPerSecond` instead: its data stay
  /// in the caches between the ops of a step (0 = no such level).
  double cacheBytes = 0;
  double cacheBytesPerSecond = 0;
  /// A smaller, faster level inside that one (a CPU core's L2 inside the
  /// shared L3): traffic of at most `innerCacheBytes` streams at
  /// `innerCacheBytesPerSecond` (0 = no such level; only with a cache).
  double innerCacheBytes = 0;
  double innerCacheBytesPerSecond = 0;
  /// Device memory in bytes (0 = unknown: no fit check).
  uint64_t memoryBytes = 0;
  /// Fixed cost of one kernel call (launch, dispatch, argument setup).
  double launchSeconds = 0;
  /// Fixed cost of one training step beyond its instructions (the
  /// runtime's step loop, reading the loss).
  double stepOverheadSeconds = 0;
  /// Cost of one element of an input or label buffer fed each step
  /// (tofu-run's synthetic batches: generated on the CPU backend, copied
  /// from pinned host memory on a GPU).
  double feedSecondsPerElement = 0;
  /// What one transcendental function (exp, log, sqrt, tanh, erf, sigmoid,
  /// pow) costs, in vector FLOPs (1 = as cheap as an add).
  double transcendentalFlops = 1;
  /// The GEMM side (m, n or k) at which a contraction runs at half its
  /// peak: efficiency = Π x / (x + gemmHalfExtent) over its three sides.
  double gemmHalfExtent = 1;
  /// What a GEMM call costs beyond its hot-loop time when other kernels
  /// ran just before it, as in a training step (its code, packing buffers
  /// and small operands evicted): added to every contraction (measured by
  /// tofu-run --calibrate; 0 = none).
  double gemmColdSeconds = 0;
  /// How many times a GEMM on a shared host reads and packs its operands
  /// from wherever they are, beyond the multiply's own FLOPs (1 = one pass
  /// at their memory level's rate; measured by tofu-run --calibrate from a
  /// skinny GEMM whose large operand comes from memory, where OpenBLAS's
  /// packing, not the FLOPs, sets the time).
  double gemmPackPasses = 1;
  /// On a shared host with several virtual devices: what tofu-run's
  /// executor spends per level whose devices' instructions run side by side
  /// on the host's threads (handing the lists to the worker pool and
  /// joining them), beyond the instructions (measured by tofu-run
  /// --calibrate; 0 = none).
  double waveSeconds = 0;
  /// Fixed cost of one transfer when no link says otherwise.
  double messageLatencySeconds = 0;
  /// Interconnect levels, innermost (fastest) first; the last one also
  /// serves steps whose `--topology` level the description does not name.
  std::vector<Link> links;
  /// The k devices are virtual ones sharing one host (tofu-run's CPU
  /// backend): their work adds up instead of running side by side.
  bool sharedHost = false;
  /// On a shared host: the hardware threads tofu-run's kernels split their
  /// work over (its worker pool), whose combined rate the GEMM and
  /// convolution rates are. The runtime runs a GEMM too small to split
  /// (fewer than 2^20 FLOPs, or under 32 rows per thread: Blas.cpp) on
  /// fewer threads; alone on the host, such a GEMM gets that share of the
  /// rate. 1 (the default): every kernel gets the whole rate.
  unsigned hostThreads = 1;
  /// Measured costs of named kernels, sorted by kernel name.
  std::vector<KernelCost> kernelCosts;
  /// The cost of `kernel`, or null.
  const KernelCost *kernelCost(llvm::StringRef kernel) const;

  /// The rates of `dtype` (the f32 entry when it has none; null when the
  /// description lists no rates at all, as hand-built models in tests).
  const ComputeRates *ratesOf(tdl::ElemType dtype) const;
  /// The link named `level`, or null.
  const Link *linkNamed(llvm::StringRef level) const;

  /// The build machine's CPU: one virtual device of tofu-run on a 2-core
  /// AMD EPYC (bench/time_objective.md).
  static DeviceModel genericCpu();
  /// An NVIDIA H100 SXM5 (datasheet peaks, see DeviceModel.cpp).
  static DeviceModel h100();
  /// The built-in models by name: "cpu", "k80", "v100", "a100", "h100".
  static std::optional<DeviceModel> builtin(llvm::StringRef name);
  static std::vector<std::string> builtinNames();
  /// The JSON text of a built-in description (empty for an unknown name).
  static llvm::StringRef builtinJson(llvm::StringRef name);
};

/// Parses a device description (docs/DeviceModel.md). `origin` names the
/// text in errors ("h100.json"); every error is one line naming the field.
llvm::Expected<DeviceModel> parseDeviceDescription(llvm::StringRef json,
                                                   llvm::StringRef origin);

/// `--device NAME|FILE`: a built-in name, or else a path to a JSON
/// description (a regular file of at most 1 MiB).
llvm::Expected<DeviceModel> loadDeviceModel(llvm::StringRef nameOrPath);

/// Writes `model` as a device description that parseDeviceDescription
/// reads back to the same model.
std::string formatDeviceDescription(const DeviceModel &model);

} // namespace tofu

#endif // TOFU_TRANSFORMS_DEVICEMODEL_H
