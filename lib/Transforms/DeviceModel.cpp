//===- DeviceModel.cpp - device descriptions: built-ins and the parser ----===//
//
// See tofu/Transforms/DeviceModel.h and docs/DeviceModel.md. The built-in
// descriptions are JSON, read by the same parser as a user's file, so every
// number sits beside its source.
//
//===----------------------------------------------------------------------===//
#include "tofu/Transforms/DeviceModel.h"
#include "tofu/runtime/InputFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <cmath>
#include <cstdio>

namespace tofu {

namespace {

// ---------------------------------------------------------------------------
// Built-in descriptions. Per device = per GPU (a K80 board holds two GPUs).
// "f32" GEMM rates are CUDA-core FP32 (cuBLAS sgemm without TF32, as
// tofu-run's CUDA backend calls it); bf16/f16 are dense tensor-core rates
// (no sparsity). Efficiencies are assumptions unless a source says
// measured: the fraction of peak a large cuBLAS GEMM / cuDNN convolution /
// streaming kernel sustains on that generation.
// ---------------------------------------------------------------------------

constexpr llvm::StringLiteral kCpuJson = R"json({
  "format": "tofu-device/1",
  "name": "cpu",
  "description": "The build machine: one virtual device of tofu-run's CPU backend on a 2-core AMD EPYC (2 threads, OpenBLAS); k virtual devices share the host. Measured with torch 1.13 on 2026-11-26 under load; the vector rate is a guess.",
  "sources": [
    "bench/time_objective.md: sgemm 1024^3 66 GFLOP/s, 64x1024x1024 48, 16x1024x1024 25, 4x1024x1024 6 GFLOP/s (s(x) = x/(x+32) per side follows within 1.5x)",
    "bench/time_objective.md: an out-of-place add of 64 MiB streams 11 GB/s; a tiny torch op costs 5 us",
    "free -b on the build machine: 25276514304 bytes of host memory",
    "transcendental_flops: tofu-run --calibrate, 2026-11-26 (load average 8): the Tanh kernel on 16384 in-cache floats takes 58.6 times the Add kernel's time",
    "links: a copy between virtual devices reads and writes each byte: half the 10 GB/s stream rate (assumed)",
    "step_overhead_seconds, feed_seconds_per_element: tofu-run --calibrate, 2026-11-26 20:45-21:05 UTC, five calibrations at load average 3.5-4.6 (feed 1.06e-8 to 1.11e-8 s per element, empty step 7e-8 s): the executor's step of a plan without instructions, and of one feeding features [32,3,32,32] and labels [32] of synthetic data, per element"
  ],
  "compute": {
    "f32": {"gemm": {"peak_flops": 70e9, "efficiency": 1},
            "conv": {"peak_flops": 70e9, "efficiency": 1},
            "vector": {"peak_flops": 8e9, "efficiency": 1}}
  },
  "memory": {"bytes": 25276514304, "bytes_per_second": 10e9, "efficiency": 1},
  "launch_seconds": 5e-6,
  "gemm_half_extent": 32,
  "transcendental_flops": 58,
  "step_overhead_seconds": 7e-8,
  "feed_seconds_per_element": 1.1e-8,
  "links": [{"name": "memcpy", "gbps": 5, "latency_seconds": 2e-6}],
  "shared_host": true
})json";

constexpr llvm::StringLiteral kK80Json = R"json({
  "format": "tofu-device/1",
  "name": "k80",
  "description": "One GK210 GPU of an NVIDIA Tesla K80 board (the Tofu paper's testbed: EC2 p2.8xlarge, 8 GPUs, PCIe peer-to-peer).",
  "sources": [
    "NVIDIA Tesla K80 datasheet (2014): per board 8.73 TFLOP/s FP32 and 2.91 TFLOP/s FP64 with GPU Boost, 24 GB GDDR5, 480 GB/s; two GPUs per board: 4.37 / 1.46 TFLOP/s, 12 GB, 240 GB/s per GPU",
    "Tofu paper (papers/tofu-eurosys19.txt, section 7): 8 K80 GPUs with 12GB each, PCI-e peer-to-peer bandwidth 21 GB/s",
    "efficiencies assumed: cuBLAS sgemm ~70% of Kepler peak, cuDNN convolution ~55%, ECC GDDR5 streams ~70% of its peak",
    "transcendental_flops: CUDA C Programming Guide, arithmetic instruction throughput, compute capability 3.7: 192 FP32 vs 32 special-function results per clock per SM",
    "feed_seconds_per_element: tofu-run's CUDA backend copies each step's input and label buffers from pinned host memory (runtime/cuda/CudaFeed.h): 4 bytes over PCI Express 3.0 x16 at ~12 GB/s achieved (assumed, of 15.75 GB/s per direction)"
  ],
  "compute": {
    "f32": {"gemm": {"peak_flops": 4.37e12, "efficiency": 0.7},
            "conv": {"peak_flops": 4.37e12, "efficiency": 0.55},
            "vector": {"peak_flops": 4.37e12, "efficiency": 0.5}},
    "f64": {"gemm": {"peak_flops": 1.46e12, "efficiency": 0.8},
            "conv": {"peak_flops": 1.46e12, "efficiency": 0.6},
            "vector": {"peak_flops": 1.46e12, "efficiency": 0.5}}
  },
  "memory": {"bytes": 12884901888, "bytes_per_second": 240e9, "efficiency": 0.7},
  "launch_seconds": 7e-6,
  "gemm_half_extent": 96,
  "transcendental_flops": 6,
  "feed_seconds_per_element": 3.3e-10,
  "links": [{"name": "pcie", "gbps": 21, "latency_seconds": 15e-6}]
})json";

constexpr llvm::StringLiteral kV100Json = R"json({
  "format": "tofu-device/1",
  "name": "v100",
  "description": "NVIDIA Tesla V100 SXM2 16 GB (NVLink 2.0 within a node, PCIe 3.0 to the host / across).",
  "sources": [
    "NVIDIA Tesla V100 datasheet (SXM2): 15.7 TFLOP/s FP32, 7.8 TFLOP/s FP64, 125 TFLOP/s tensor (FP16), 16 GB HBM2 at 900 GB/s, NVLink 300 GB/s (both directions: 150 GB/s received per GPU)",
    "PCI Express 3.0 x16: 15.75 GB/s per direction, ~12 GB/s achieved (assumed)",
    "efficiencies assumed: cuBLAS sgemm ~85% of peak, convolution ~70%, HBM2 streams ~85%; tensor-core GEMMs ~65%",
    "transcendental_flops: CUDA C Programming Guide, arithmetic instruction throughput, compute capability 7.0: 64 FP32 vs 16 special-function results per clock per SM",
    "feed_seconds_per_element: each step's input and label buffers are copied from pinned host memory (runtime/cuda/CudaFeed.h): 4 bytes over PCIe 3.0 at ~12 GB/s (above)"
  ],
  "compute": {
    "f32": {"gemm": {"peak_flops": 15.7e12, "efficiency": 0.85},
            "conv": {"peak_flops": 15.7e12, "efficiency": 0.7},
            "vector": {"peak_flops": 15.7e12, "efficiency": 0.5}},
    "f16": {"gemm": {"peak_flops": 125e12, "efficiency": 0.65},
            "conv": {"peak_flops": 125e12, "efficiency": 0.5},
            "vector": {"peak_flops": 31.4e12, "efficiency": 0.5}},
    "f64": {"gemm": {"peak_flops": 7.8e12, "efficiency": 0.9},
            "conv": {"peak_flops": 7.8e12, "efficiency": 0.7},
            "vector": {"peak_flops": 7.8e12, "efficiency": 0.5}}
  },
  "memory": {"bytes": 17179869184, "bytes_per_second": 900e9, "efficiency": 0.85},
  "launch_seconds": 5e-6,
  "gemm_half_extent": 128,
  "transcendental_flops": 4,
  "feed_seconds_per_element": 3.3e-10,
  "links": [{"name": "nvlink", "gbps": 150, "latency_seconds": 10e-6},
            {"name": "pcie", "gbps": 12, "latency_seconds": 15e-6}]
})json";

constexpr llvm::StringLiteral kA100Json = R"json({
  "format": "tofu-device/1",
  "name": "a100",
  "description": "NVIDIA A100 SXM4 80 GB (NVLink 3.0 within a node, PCIe 4.0).",
  "sources": [
    "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB): 19.5 TFLOP/s FP32, 9.7 TFLOP/s FP64 (19.5 tensor), 312 TFLOP/s BF16/FP16 tensor (dense), 80 GB HBM2e at 2039 GB/s, NVLink 600 GB/s (300 GB/s received per GPU)",
    "PCI Express 4.0 x16: 31.5 GB/s per direction, ~25 GB/s achieved (assumed)",
    "efficiencies assumed: cuBLAS sgemm ~90% of peak, convolution ~70%, HBM2e streams ~85%; tensor-core GEMMs ~70%",
    "transcendental_flops: CUDA C Programming Guide, arithmetic instruction throughput, compute capability 8.0: 64 FP32 vs 16 special-function results per clock per SM",
    "feed_seconds_per_element: each step's input and label buffers are copied from pinned host memory (runtime/cuda/CudaFeed.h): 4 bytes over PCIe 4.0 at ~25 GB/s (above)"
  ],
  "compute": {
    "f32": {"gemm": {"peak_flops": 19.5e12, "efficiency": 0.9},
            "conv": {"peak_flops": 19.5e12, "efficiency": 0.7},
            "vector": {"peak_flops": 19.5e12, "efficiency": 0.5}},
    "bf16": {"gemm": {"peak_flops": 312e12, "efficiency": 0.7},
             "conv": {"peak_flops": 312e12, "efficiency": 0.5},
             "vector": {"peak_flops": 39e12, "efficiency": 0.5}},
    "f16": {"gemm": {"peak_flops": 312e12, "efficiency": 0.7},
            "conv": {"peak_flops": 312e12, "efficiency": 0.5},
            "vector": {"peak_flops": 78e12, "efficiency": 0.5}},
    "f64": {"gemm": {"peak_flops": 19.5e12, "efficiency": 0.85},
            "conv": {"peak_flops": 9.7e12, "efficiency": 0.7},
            "vector": {"peak_flops": 9.7e12, "efficiency": 0.5}}
  },
  "memory": {"bytes": 85899345920, "bytes_per_second": 2039e9, "efficiency": 0.85},
  "launch_seconds": 5e-6,
  "gemm_half_extent": 128,
  "transcendental_flops": 4,
  "feed_seconds_per_element": 1.6e-10,
  "links": [{"name": "nvlink", "gbps": 300, "latency_seconds": 10e-6},
            {"name": "pcie", "gbps": 25, "latency_seconds": 15e-6}]
})json";

// The f32 rates are the ones the partitioner has used since the time
// objective was added (54 and 30 TFLOP/s sustained, 3.0 TB/s); kept so
// that plans compiled with --device h100 do not change.
constexpr llvm::StringLiteral kH100Json = R"json({
  "format": "tofu-device/1",
  "name": "h100",
  "description": "NVIDIA H100 SXM5 80 GB (NVLink 4.0 within a node, InfiniBand NDR across nodes).",
  "sources": [
    "NVIDIA H100 Tensor Core GPU datasheet (SXM5): 67 TFLOP/s FP32, 67 TFLOP/s FP64 tensor (34 vector), 989 TFLOP/s BF16/FP16 tensor (dense; 1979 with sparsity), 80 GB HBM3 at 3.35 TB/s, NVLink 900 GB/s (450 GB/s received per GPU)",
    "NVIDIA ConnectX-7 / NDR InfiniBand: 400 Gb/s = 50 GB/s per GPU (one NIC per GPU, as in DGX H100)",
    "efficiencies assumed: cuBLAS sgemm ~80% of peak (54 TFLOP/s; tiles of ~128 per side fill 132 SMs), vector work 45%, HBM3 streams ~90% (3.0 TB/s), tensor-core GEMMs ~65%; kernel launch ~5 us, an NCCL / peer-to-peer message ~10 us",
    "transcendental_flops: CUDA C Programming Guide, arithmetic instruction throughput, compute capability 9.0: 128 FP32 vs 16 special-function results per clock per SM",
    "feed_seconds_per_element: each step's input and label buffers are copied from pinned host memory (runtime/cuda/CudaFeed.h): 4 bytes over PCI Express 5.0 x16 at ~50 GB/s achieved (assumed, of 63 GB/s per direction)"
  ],
  "compute": {
    "f32": {"gemm": {"peak_flops": 67e12, "efficiency": 0.8059701492537313},
            "conv": {"peak_flops": 67e12, "efficiency": 0.7},
            "vector": {"peak_flops": 67e12, "efficiency": 0.44776119402985076}},
    "bf16": {"gemm": {"peak_flops": 989e12, "efficiency": 0.65},
             "conv": {"peak_flops": 989e12, "efficiency": 0.5},
             "vector": {"peak_flops": 134e12, "efficiency": 0.45}},
    "f16": {"gemm": {"peak_flops": 989e12, "efficiency": 0.65},
            "conv": {"peak_flops": 989e12, "efficiency": 0.5},
            "vector": {"peak_flops": 134e12, "efficiency": 0.45}},
    "f64": {"gemm": {"peak_flops": 67e12, "efficiency": 0.8},
            "conv": {"peak_flops": 34e12, "efficiency": 0.7},
            "vector": {"peak_flops": 34e12, "efficiency": 0.5}}
  },
  "memory": {"bytes": 85899345920, "bytes_per_second": 3.35e12, "efficiency": 0.8955223880597015},
  "launch_seconds": 5e-6,
  "gemm_half_extent": 128,
  "transcendental_flops": 8,
  "feed_seconds_per_element": 8e-11,
  "links": [{"name": "nvlink", "gbps": 450, "latency_seconds": 10e-6},
            {"name": "ib", "gbps": 50, "latency_seconds": 20e-6}]
})json";

/// A number as a user wrote it: shortest form ("1.5", "1e+12", "-1").
std::string shortNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.10g", value);
  return text;
}

struct Builtin {
  llvm::StringLiteral name;
  llvm::StringLiteral json;
};
constexpr Builtin kBuiltins[] = {{"cpu", kCpuJson},
                                 {"k80", kK80Json},
                                 {"v100", kV100Json},
                                 {"a100", kA100Json},
                                 {"h100", kH100Json}};

/// Reads the JSON object of one description, field by field, with a path
/// for errors ("compute.f32.gemm.peak_flops").
class DescriptionReader {
public:
  explicit DescriptionReader(llvm::StringRef origin) : origin(origin.str()) {}

  llvm::Error fail(const llvm::Twine &path, const llvm::Twine &why) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "device description '" + origin + "': " +
                                       path + ": " + why);
  }

  /// Fails on a key of `object` not in `known`.
  llvm::Error onlyKnown(const llvm::json::Object &object,
                        const llvm::Twine &path,
                        std::initializer_list<llvm::StringLiteral> known) const {
    std::vector<std::string> keys;
    for (const auto &entry : object)
      keys.push_back(entry.first.str());
    llvm::sort(keys); // object iteration order is unspecified
    for (const std::string &key : keys)
      if (!llvm::is_contained(known, key)) {
        std::string list;
        for (llvm::StringRef k : known)
          list += (list.empty() ? "" : ", ") + k.str();
        return fail(path.isTriviallyEmpty() ? llvm::Twine(printable(key))
                                            : path + "." + printable(key),
                    "unknown field (known: " + list + ")");
      }
    return llvm::Error::success();
  }

  /// A positive finite number; `maxValue` bounds it when given.
  llvm::Expected<double> positive(const llvm::json::Object &object,
                                  llvm::StringRef key, const llvm::Twine &path,
                                  double maxValue = HUGE_VAL) const {
    const llvm::json::Value *value = object.get(key);
    if (!value)
      return fail(path, "missing (a positive number)");
    std::optional<double> number = value->getAsNumber();
    if (!number)
      return fail(path, "expected a positive number, got " + kindOf(*value));
    if (!std::isfinite(*number) || !(*number > 0) || *number > maxValue)
      return fail(path, "expected a positive finite number" +
                            (std::isfinite(maxValue)
                                 ? " at most " + shortNumber(maxValue)
                                 : std::string()) +
                            ", got " + shortNumber(*number));
    return *number;
  }

  llvm::Expected<const llvm::json::Object *>
  object(const llvm::json::Object &parent, llvm::StringRef key,
         const llvm::Twine &path) const {
    const llvm::json::Value *value = parent.get(key);
    if (!value)
      return fail(path, "missing (an object)");
    const llvm::json::Object *result = value->getAsObject();
    if (!result)
      return fail(path, "expected an object, got " + kindOf(*value));
    return result;
  }

  static std::string kindOf(const llvm::json::Value &value) {
    switch (value.kind()) {
    case llvm::json::Value::Null: return "null";
    case llvm::json::Value::Boolean: return "a boolean";
    case llvm::json::Value::Number: return "a number";
    case llvm::json::Value::String: return "a string";
    case llvm::json::Value::Array: return "an array";
    case llvm::json::Value::Object: return "an object";
    }
    return "?";
  }

  /// A key from the file, safe to print on one line (no control
  /// characters), at most 64 characters.
  static std::string printable(llvm::StringRef text) {
    std::string out;
    for (unsigned char c : text.take_front(64))
      out += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
    if (text.size() > 64)
      out += "...";
    return out;
  }

  std::string origin;
};

llvm::Expected<DeviceModel::Rate>
readRate(const DescriptionReader &reader, const llvm::json::Object &parent,
         llvm::StringRef key, const std::string &path) {
  auto object = reader.object(parent, key, path);
  if (!object)
    return object.takeError();
  if (llvm::Error err =
          reader.onlyKnown(**object, path, {"peak_flops", "efficiency"}))
    return std::move(err);
  DeviceModel::Rate rate;
  auto peak = reader.positive(**object, "peak_flops", path + ".peak_flops");
  if (!peak)
    return peak.takeError();
  rate.peakFlops = *peak;
  if ((*object)->get("efficiency")) {
    auto efficiency =
        reader.positive(**object, "efficiency", path + ".efficiency", 1.0);
    if (!efficiency)
      return efficiency.takeError();
    rate.efficiency = *efficiency;
  }
  return rate;
}

std::optional<tdl::ElemType> floatTypeNamed(llvm::StringRef name) {
  for (tdl::ElemType type : {tdl::ElemType::F32, tdl::ElemType::F16,
                             tdl::ElemType::BF16, tdl::ElemType::F64})
    if (name == tdl::elemName(type))
      return type;
  return std::nullopt;
}

} // namespace

const DeviceModel::ComputeRates *
DeviceModel::ratesOf(tdl::ElemType dtype) const {
  const ComputeRates *f32 = nullptr;
  for (const ComputeRates &rates : compute) {
    if (rates.dtype == dtype)
      return &rates;
    if (rates.dtype == tdl::ElemType::F32)
      f32 = &rates;
  }
  return f32;
}

const DeviceModel::KernelCost *
DeviceModel::kernelCost(llvm::StringRef kernel) const {
  auto it = llvm::lower_bound(kernelCosts, kernel,
                              [](const KernelCost &cost, llvm::StringRef k) {
                                return llvm::StringRef(cost.kernel) < k;
                              });
  return it != kernelCosts.end() && it->kernel == kernel ? &*it : nullptr;
}

namespace {

/// The value at `x` of the line through (x0, y0) and (x1, y1) in log(x),
/// clamped to the nearer end outside [x0, x1].
double logInterpolate(double x, double x0, double y0, double x1, double y1) {
  if (x <= x0 || x1 <= x0)
    return y0;
  if (x >= x1)
    return y1;
  return y0 + std::log(x / x0) / std::log(x1 / x0) * (y1 - y0);
}

} // namespace

bool DeviceModel::KernelCost::threadsAt(double elements) const {
  return threadsFromElements > 0 && elements >= threadsFromElements;
}

double DeviceModel::KernelCost::secondsPerElement(double elements,
                                                  unsigned threads) const {
  if (threadsFromElements <= 0)
    return logInterpolate(elements, kSmallElements, smallSecondsPerElement,
                          kLargeElements, largeSecondsPerElement);
  if (threadsFromElements > kLargeElements)
    // The large probe ran on one thread too: one curve up to the kernel's
    // threading size, then the large probe's cost shared by the threads.
    return threadsAt(elements)
               ? largeSecondsPerElement / std::max(threads, 1u)
               : logInterpolate(elements, kSmallElements,
                                smallSecondsPerElement, kLargeElements,
                                largeSecondsPerElement);
  if (!threadsAt(elements))
    return smallSecondsPerElement;
  // Threaded: from the one-thread cost shared by the threads where it
  // starts to the large probe's.
  return logInterpolate(elements, threadsFromElements,
                        smallSecondsPerElement / std::max(threads, 1u),
                        kLargeElements, largeSecondsPerElement);
}

const DeviceModel::Link *DeviceModel::linkNamed(llvm::StringRef level) const {
  for (const Link &link : links)
    if (link.name == level)
      return &link;
  return nullptr;
}

llvm::Expected<DeviceModel> parseDeviceDescription(llvm::StringRef json,
                                                   llvm::StringRef origin) {
  DescriptionReader reader(origin);
  // llvm::json::parse recurses per nesting level: a deeply nested file
  // would overflow the stack. A description nests 5 deep.
  {
    constexpr int kMaxDepth = 32;
    int depth = 0;
    bool inString = false, escaped = false;
    for (char c : json) {
      if (inString) {
        if (escaped)
          escaped = false;
        else if (c == '\\')
          escaped = true;
        else if (c == '"')
          inString = false;
        continue;
      }
      if (c == '"')
        inString = true;
      else if (c == '[' || c == '{') {
        if (++depth > kMaxDepth)
          return reader.fail("(file)", "nested more than " +
                                           llvm::Twine(kMaxDepth) +
                                           " levels deep");
      } else if (c == ']' || c == '}')
        --depth;
    }
  }
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(json);
  if (!parsed)
    return reader.fail("(file)", "not valid JSON: " +
                                     llvm::toString(parsed.takeError()));
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    return reader.fail("(file)", "expected a JSON object, got " +
                                     DescriptionReader::kindOf(*parsed));
  if (llvm::Error err = reader.onlyKnown(
          *root, "",
          {"format", "name", "description", "sources", "compute", "memory",
           "launch_seconds", "gemm_half_extent", "transcendental_flops",
           "step_overhead_seconds", "feed_seconds_per_element", "kernels",
           "gemm_cold_seconds", "gemm_pack_passes", "wave_seconds",
           "links", "shared_host", "host_threads"}))
    return std::move(err);
  auto format = root->getString("format");
  if (!format)
    return reader.fail("format", "missing (the string \"tofu-device/1\")");
  if (*format != "tofu-device/1")
    return reader.fail("format", "expected \"tofu-device/1\", got \"" +
                                     DescriptionReader::printable(*format) +
                                     "\"");
  DeviceModel model;
  auto name = root->getString("name");
  if (!name || name->empty())
    return reader.fail("name", "missing (a non-empty string)");
  model.name = DescriptionReader::printable(*name);
  if (const llvm::json::Value *value = root->get("description")) {
    auto text = value->getAsString();
    if (!text)
      return reader.fail("description", "expected a string, got " +
                                            DescriptionReader::kindOf(*value));
    model.description = text->str();
  }
  if (const llvm::json::Value *value = root->get("sources")) {
    const llvm::json::Array *array = value->getAsArray();
    if (!array)
      return reader.fail("sources", "expected an array of strings, got " +
                                        DescriptionReader::kindOf(*value));
    for (size_t i = 0; i < array->size(); ++i) {
      auto text = (*array)[i].getAsString();
      if (!text)
        return reader.fail("sources[" + llvm::Twine(i) + "]",
                           "expected a string, got " +
                               DescriptionReader::kindOf((*array)[i]));
      model.sources.push_back(text->str());
    }
  }

  auto compute = reader.object(*root, "compute", "compute");
  if (!compute)
    return compute.takeError();
  std::vector<std::string> dtypes;
  for (const auto &entry : **compute)
    dtypes.push_back(entry.first.str());
  llvm::sort(dtypes);
  for (const std::string &dtype : dtypes) {
    std::string path = "compute." + DescriptionReader::printable(dtype);
    std::optional<tdl::ElemType> type = floatTypeNamed(dtype);
    if (!type)
      return reader.fail(path, "unknown element type (f32, f16, bf16, f64)");
    auto classes = reader.object(**compute, dtype, path);
    if (!classes)
      return classes.takeError();
    if (llvm::Error err =
            reader.onlyKnown(**classes, path, {"gemm", "conv", "vector"}))
      return std::move(err);
    DeviceModel::ComputeRates rates;
    rates.dtype = *type;
    auto gemm = readRate(reader, **classes, "gemm", path + ".gemm");
    if (!gemm)
      return gemm.takeError();
    rates.gemm = *gemm;
    auto vector = readRate(reader, **classes, "vector", path + ".vector");
    if (!vector)
      return vector.takeError();
    rates.vector = *vector;
    rates.conv = rates.gemm; // convolutions as GEMMs unless told
    if ((*classes)->get("conv")) {
      auto conv = readRate(reader, **classes, "conv", path + ".conv");
      if (!conv)
        return conv.takeError();
      rates.conv = *conv;
    }
    model.compute.push_back(rates);
  }
  const DeviceModel::ComputeRates *f32 = nullptr;
  for (const auto &rates : model.compute)
    if (rates.dtype == tdl::ElemType::F32)
      f32 = &rates;
  if (!f32)
    return reader.fail("compute.f32", "missing (every description gives "
                                      "float32 rates; other types fall back "
                                      "on them)");
  model.gemmFlopsPerSecond = f32->gemm.sustained();
  model.vectorFlopsPerSecond = f32->vector.sustained();

  auto memory = reader.object(*root, "memory", "memory");
  if (!memory)
    return memory.takeError();
  if (llvm::Error err = reader.onlyKnown(
          **memory, "memory",
          {"bytes", "bytes_per_second", "efficiency", "cache_bytes",
           "cache_bytes_per_second", "inner_cache_bytes",
           "inner_cache_bytes_per_second"}))
    return std::move(err);
  auto bandwidth = reader.positive(**memory, "bytes_per_second",
                                   "memory.bytes_per_second");
  if (!bandwidth)
    return bandwidth.takeError();
  model.memoryBytesPerSecond = *bandwidth;
  if ((*memory)->get("efficiency")) {
    auto efficiency =
        reader.positive(**memory, "efficiency", "memory.efficiency", 1.0);
    if (!efficiency)
      return efficiency.takeError();
    model.memoryBytesPerSecond *= *efficiency;
  }
  if ((*memory)->get("cache_bytes") || (*memory)->get("cache_bytes_per_second")) {
    // Both or neither: a cache level is its size and its rate.
    auto size = reader.positive(**memory, "cache_bytes", "memory.cache_bytes",
                                std::ldexp(1.0, 50));
    if (!size)
      return size.takeError();
    auto rate = reader.positive(**memory, "cache_bytes_per_second",
                                "memory.cache_bytes_per_second");
    if (!rate)
      return rate.takeError();
    model.cacheBytes = *size;
    model.cacheBytesPerSecond = *rate;
  }
  if ((*memory)->get("inner_cache_bytes") ||
      (*memory)->get("inner_cache_bytes_per_second")) {
    // Both or neither, inside the cache level: smaller and faster.
    if (model.cacheBytes <= 0)
      return reader.fail("memory.inner_cache_bytes",
                         "an inner cache level needs the cache level "
                         "(cache_bytes, cache_bytes_per_second) it is inside");
    auto size = reader.positive(**memory, "inner_cache_bytes",
                                "memory.inner_cache_bytes", model.cacheBytes);
    if (!size)
      return size.takeError();
    auto rate = reader.positive(**memory, "inner_cache_bytes_per_second",
                                "memory.inner_cache_bytes_per_second");
    if (!rate)
      return rate.takeError();
    if (*rate < model.cacheBytesPerSecond)
      return reader.fail("memory.inner_cache_bytes_per_second",
                         "an inner cache level must be at least as fast as "
                         "cache_bytes_per_second");
    model.innerCacheBytes = *size;
    model.innerCacheBytesPerSecond = *rate;
  }
  if ((*memory)->get("bytes")) {
    // At most 2^60 bytes (an exabyte): beyond is a typo, not a device.
    auto bytes = reader.positive(**memory, "bytes", "memory.bytes",
                                 std::ldexp(1.0, 60));
    if (!bytes)
      return bytes.takeError();
    if (*bytes != std::floor(*bytes))
      return reader.fail("memory.bytes",
                         "expected a whole number of bytes, got " +
                             shortNumber(*bytes));
    model.memoryBytes = static_cast<uint64_t>(*bytes);
  }

  auto launch = reader.positive(*root, "launch_seconds", "launch_seconds", 1);
  if (!launch)
    return launch.takeError();
  model.launchSeconds = *launch;
  auto half = reader.positive(*root, "gemm_half_extent", "gemm_half_extent",
                              1e9);
  if (!half)
    return half.takeError();
  model.gemmHalfExtent = *half;

  if (root->get("transcendental_flops")) {
    auto flops = reader.positive(*root, "transcendental_flops",
                                 "transcendental_flops", 1e6);
    if (!flops)
      return flops.takeError();
    model.transcendentalFlops = *flops;
  }

  if (root->get("gemm_cold_seconds")) {
    auto seconds = reader.positive(*root, "gemm_cold_seconds",
                                   "gemm_cold_seconds", 1);
    if (!seconds)
      return seconds.takeError();
    model.gemmColdSeconds = *seconds;
  }
  if (root->get("gemm_pack_passes")) {
    auto passes = reader.positive(*root, "gemm_pack_passes",
                                  "gemm_pack_passes", 16);
    if (!passes)
      return passes.takeError();
    model.gemmPackPasses = *passes;
  }
  if (root->get("wave_seconds")) {
    auto seconds =
        reader.positive(*root, "wave_seconds", "wave_seconds", 1);
    if (!seconds)
      return seconds.takeError();
    model.waveSeconds = *seconds;
  }
  if (root->get("step_overhead_seconds")) {
    auto seconds = reader.positive(*root, "step_overhead_seconds",
                                   "step_overhead_seconds", 1);
    if (!seconds)
      return seconds.takeError();
    model.stepOverheadSeconds = *seconds;
  }
  if (root->get("feed_seconds_per_element")) {
    auto seconds = reader.positive(*root, "feed_seconds_per_element",
                                   "feed_seconds_per_element", 1e-3);
    if (!seconds)
      return seconds.takeError();
    model.feedSecondsPerElement = *seconds;
  }

  if (const llvm::json::Value *value = root->get("kernels")) {
    const llvm::json::Object *kernels = value->getAsObject();
    if (!kernels)
      return reader.fail("kernels", "expected an object {kernel: {small, "
                                    "large}}, got " +
                                        DescriptionReader::kindOf(*value));
    std::vector<std::string> names;
    for (const auto &entry : *kernels)
      names.push_back(entry.first.str());
    llvm::sort(names);
    for (const std::string &kernel : names) {
      std::string path = "kernels." + DescriptionReader::printable(kernel);
      auto cost = reader.object(*kernels, kernel, path);
      if (!cost)
        return cost.takeError();
      if (llvm::Error err = reader.onlyKnown(**cost, path,
                                             {"small", "large", "row", "call",
                                              "threads_from"}))
        return std::move(err);
      DeviceModel::KernelCost parsed;
      parsed.kernel = kernel;
      if ((*cost)->get("call")) {
        auto call = reader.positive(**cost, "call", path + ".call", 1);
        if (!call)
          return call.takeError();
        parsed.callSeconds = *call;
      }
      // Per-element costs: required, except for a kernel that gives only
      // its call's cost (a cuBLAS or cuDNN call: its work is the rates').
      const bool perElement = (*cost)->get("small") || (*cost)->get("large") ||
                              (*cost)->get("row") || !(*cost)->get("call");
      if (perElement) {
        auto small = reader.positive(**cost, "small", path + ".small", 1e-3);
        if (!small)
          return small.takeError();
        auto large = reader.positive(**cost, "large", path + ".large", 1e-3);
        if (!large)
          return large.takeError();
        parsed.smallSecondsPerElement = *small;
        parsed.largeSecondsPerElement = *large;
      }
      if ((*cost)->get("row")) {
        auto row = reader.positive(**cost, "row", path + ".row", 1e-3);
        if (!row)
          return row.takeError();
        parsed.rowSeconds = *row;
      }
      if ((*cost)->get("threads_from")) {
        auto from = reader.positive(**cost, "threads_from",
                                    path + ".threads_from", 1e15);
        if (!from)
          return from.takeError();
        parsed.threadsFromElements = *from;
      }
      model.kernelCosts.push_back(std::move(parsed));
    }
  }

  const llvm::json::Value *linksValue = root->get("links");
  if (!linksValue)
    return reader.fail("links", "missing (an array of {name, gbps, "
                                "latency_seconds}, innermost level first)");
  const llvm::json::Array *links = linksValue->getAsArray();
  if (!links)
    return reader.fail("links", "expected an array, got " +
                                    DescriptionReader::kindOf(*linksValue));
  if (links->empty())
    return reader.fail("links", "expected at least one link");
  for (size_t i = 0; i < links->size(); ++i) {
    std::string path = "links[" + std::to_string(i) + "]";
    const llvm::json::Object *link = (*links)[i].getAsObject();
    if (!link)
      return reader.fail(path, "expected an object, got " +
                                   DescriptionReader::kindOf((*links)[i]));
    if (llvm::Error err =
            reader.onlyKnown(*link, path, {"name", "gbps", "latency_seconds"}))
      return std::move(err);
    DeviceModel::Link parsedLink;
    auto linkName = link->getString("name");
    if (!linkName || linkName->empty())
      return reader.fail(path + ".name", "missing (a non-empty string)");
    parsedLink.name = DescriptionReader::printable(*linkName);
    if (model.linkNamed(parsedLink.name))
      return reader.fail(path + ".name",
                         "link '" + parsedLink.name + "' is given twice");
    auto gbps = reader.positive(*link, "gbps", path + ".gbps");
    if (!gbps)
      return gbps.takeError();
    parsedLink.gbps = *gbps;
    auto latency =
        reader.positive(*link, "latency_seconds", path + ".latency_seconds", 1);
    if (!latency)
      return latency.takeError();
    parsedLink.latencySeconds = *latency;
    model.links.push_back(std::move(parsedLink));
  }
  model.messageLatencySeconds = model.links.front().latencySeconds;

  if (const llvm::json::Value *value = root->get("shared_host")) {
    std::optional<bool> shared = value->getAsBoolean();
    if (!shared)
      return reader.fail("shared_host", "expected true or false, got " +
                                            DescriptionReader::kindOf(*value));
    model.sharedHost = *shared;
  }
  if (root->get("host_threads")) {
    auto threads =
        reader.positive(*root, "host_threads", "host_threads", 1024);
    if (!threads)
      return threads.takeError();
    if (*threads != std::floor(*threads))
      return reader.fail("host_threads",
                         "expected a whole number of threads, got " +
                             shortNumber(*threads));
    if (!model.sharedHost)
      return reader.fail("host_threads",
                         "only means something with \"shared_host\": true "
                         "(the threads virtual devices share)");
    model.hostThreads = static_cast<unsigned>(*threads);
  }
  return model;
}

llvm::Expected<DeviceModel> loadDeviceModel(llvm::StringRef nameOrPath) {
  if (std::optional<DeviceModel> model = DeviceModel::builtin(nameOrPath))
    return *model;
  auto fail = [&](const llvm::Twine &why) {
    std::string list;
    for (const std::string &name : DeviceModel::builtinNames())
      list += (list.empty() ? "" : ", ") + name;
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "--device '" + nameOrPath + "': " + why + " (built in: " + list +
            "; or a JSON description, docs/DeviceModel.md)");
  };
  if (!llvm::sys::fs::exists(nameOrPath))
    return fail("not a built-in device and no such file");
  // The project's one way to read an input file (docs/Errors.md): a FIFO,
  // a device or a directory is refused, the size checked on the open file.
  std::string text;
  if (std::string err = readInputFile(nameOrPath.str(),
                                      "the device description", uint64_t(1)
                                                                    << 20,
                                      text);
      !err.empty())
    return fail(err);
  return parseDeviceDescription(text, nameOrPath);
}

std::string formatDeviceDescription(const DeviceModel &model) {
  auto rate = [](const DeviceModel::Rate &r) {
    return llvm::json::Object{{"peak_flops", r.peakFlops},
                              {"efficiency", r.efficiency}};
  };
  llvm::json::Object compute;
  for (const auto &rates : model.compute)
    compute[tdl::elemName(rates.dtype)] =
        llvm::json::Object{{"gemm", rate(rates.gemm)},
                           {"conv", rate(rates.conv)},
                           {"vector", rate(rates.vector)}};
  if (model.compute.empty())
    compute["f32"] = llvm::json::Object{
        {"gemm", rate({model.gemmFlopsPerSecond, 1})},
        {"conv", rate({model.gemmFlopsPerSecond, 1})},
        {"vector", rate({model.vectorFlopsPerSecond, 1})}};
  llvm::json::Array sources, links;
  for (const auto &source : model.sources)
    sources.push_back(source);
  for (const auto &link : model.links)
    links.push_back(llvm::json::Object{{"name", link.name},
                                       {"gbps", link.gbps},
                                       {"latency_seconds",
                                        link.latencySeconds}});
  llvm::json::Object memory{{"bytes_per_second", model.memoryBytesPerSecond}};
  if (model.memoryBytes)
    memory["bytes"] = static_cast<int64_t>(model.memoryBytes);
  if (model.cacheBytes > 0) {
    memory["cache_bytes"] = model.cacheBytes;
    memory["cache_bytes_per_second"] = model.cacheBytesPerSecond;
  }
  if (model.innerCacheBytes > 0) {
    memory["inner_cache_bytes"] = model.innerCacheBytes;
    memory["inner_cache_bytes_per_second"] = model.innerCacheBytesPerSecond;
  }
  llvm::json::Object root{{"format", "tofu-device/1"},
                          {"name", model.name},
                          {"compute", std::move(compute)},
                          {"memory", std::move(memory)},
                          {"launch_seconds", model.launchSeconds},
                          {"gemm_half_extent", model.gemmHalfExtent},
                          {"transcendental_flops", model.transcendentalFlops},
                          {"links", std::move(links)},
                          {"shared_host", model.sharedHost}};
  if (!model.kernelCosts.empty()) {
    llvm::json::Object kernels;
    for (const auto &cost : model.kernelCosts) {
      llvm::json::Object entry;
      if (cost.hasPerElementCost()) {
        entry["small"] = cost.smallSecondsPerElement;
        entry["large"] = cost.largeSecondsPerElement;
      }
      if (cost.callSeconds > 0)
        entry["call"] = cost.callSeconds;
      if (cost.rowSeconds > 0)
        entry["row"] = cost.rowSeconds;
      if (cost.threadsFromElements > 0)
        entry["threads_from"] = cost.threadsFromElements;
      kernels[cost.kernel] = std::move(entry);
    }
    root["kernels"] = std::move(kernels);
  }
  // Absent = 0 (descriptions written before these fields existed).
  if (model.stepOverheadSeconds > 0)
    root["step_overhead_seconds"] = model.stepOverheadSeconds;
  if (model.feedSecondsPerElement > 0)
    root["feed_seconds_per_element"] = model.feedSecondsPerElement;
  if (model.gemmColdSeconds > 0)
    root["gemm_cold_seconds"] = model.gemmColdSeconds;
  if (model.gemmPackPasses != 1)
    root["gemm_pack_passes"] = model.gemmPackPasses;
  if (model.waveSeconds > 0)
    root["wave_seconds"] = model.waveSeconds;
  if (model.hostThreads > 1)
    root["host_threads"] = static_cast<int64_t>(model.hostThreads);
  if (!model.description.empty())
    root["description"] = model.description;
  if (!model.sources.empty())
    root["sources"] = std::move(sources);
  return llvm::formatv("{0:2}", llvm::json::Value(std::move(root))).str() +
         "\n";
}

DeviceModel DeviceModel::genericCpu() { return *builtin("cpu"); }

DeviceModel DeviceModel::h100() { return *builtin("h100"); }

std::optional<DeviceModel> DeviceModel::builtin(llvm::StringRef name) {
  llvm::StringRef json = builtinJson(name);
  if (json.empty())
    return std::nullopt;
  auto model = parseDeviceDescription(json, ("built-in " + name).str());
  if (!model) {
    // The built-in texts are checked by DeviceModelTests.
    llvm::report_fatal_error(llvm::Twine(llvm::toString(model.takeError())));
  }
  return *model;
}

llvm::StringRef DeviceModel::builtinJson(llvm::StringRef name) {
  for (const Builtin &builtin : kBuiltins)
    if (builtin.name == name)
      return builtin.json;
  return {};
}

std::vector<std::string> DeviceModel::builtinNames() {
  std::vector<std::string> names;
  for (const Builtin &builtin : kBuiltins)
    names.push_back(builtin.name.str());
  return names;
}

} // namespace tofu
