//===- NpyData.h - Training batches from .npy files (--data) -----*- C++ -*-===//
//
// `tofu-run --data DIR` feeds the plan's Input and Label tensors from NumPy
// files instead of synthetic data. Layout:
//
//   DIR/batch_0/<tensor>.npy, DIR/batch_1/<tensor>.npy, ...
//
// one folder per batch, numbered from 0 without gaps; <tensor> is the plan's
// tensor name (the ONNX graph input name) with '/' replaced by '_' (the same
// names `tofu-run --dump` uses for input.<tensor>.npy). Every batch folder
// holds one file per Input/Label tensor of the plan, with exactly the
// tensor's global shape (the batch dimension included) and dtype: float32
// ('<f4'), int64 ('<i8') or bool ('|b1'), C order. Step s (0-based) uses
// batch s mod (number of batches), so a run of more steps than batches
// cycles over them. Label values must lie in [0, number of classes) or
// equal the losses' ignore_index (TensorInfo::ignoreIndex); token ids (an
// integer input with a class count) in [-rows, rows) of the table they
// index, as ONNX Gather takes them. A batch whose values are outside is an
// error naming the file, the input, the element and the value.
//
// Every file's header is checked when the folder is opened, before training
// starts; the data of a batch is read when a step first needs it.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_NPYDATA_H
#define TOFU_RUNTIME_NPYDATA_H

#include "tofu/runtime/Plan.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tofu::runtime {

/// What a .npy header says.
struct NpyHeader {
  std::string descr; ///< e.g. "<f4"
  bool fortranOrder = false;
  std::vector<int64_t> shape;
  uint64_t dataOffset = 0; ///< bytes before the array data
};

/// Reads and parses the header of the .npy file at `path` (format versions
/// 1.0, 2.0 and 3.0). Returns an error naming the file and what is wrong.
std::string readNpyHeader(const std::string &path, NpyHeader &header);

/// The .npy descr of `dtype` ("<f4", "<i8", "|b1", "<f2", "|u1", ...), or an
/// empty string for bfloat16, which numpy cannot hold.
std::string npyDescr(plan::DType dtype);

/// The file name of tensor `name` inside a batch folder: '/' becomes '_'.
std::string npyTensorFileName(const std::string &name);

class NpyDataset {
public:
  explicit NpyDataset(const plan::Plan &plan) : plan(plan) {}

  /// Finds the batch folders of `dir` and checks every file's header against
  /// the plan (shape, dtype, C order, size).
  std::string open(const std::string &dir);
  int64_t numBatches() const { return batches; }

  /// Writes box `region` of Input/Label tensor `tensor` for step `step`
  /// densely to `out` (CpuExecutor::DataSource).
  std::string fill(int32_t tensor, const plan::Box &region, int64_t step,
                   void *out);

private:
  std::string path(int64_t batch, int32_t tensor) const;
  std::string load(int64_t batch);

  const plan::Plan &plan;
  std::string dir;
  int64_t batches = 0;
  std::vector<int32_t> fed; ///< Input and Label tensors of the plan
  int64_t loadedBatch = -1;
  std::map<int32_t, std::vector<uint8_t>> loaded; ///< tensor -> whole array
};

} // namespace tofu::runtime

#endif // TOFU_RUNTIME_NPYDATA_H
