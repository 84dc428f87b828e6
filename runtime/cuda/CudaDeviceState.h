//===- CudaDeviceState.h - Plan buffers in the GPUs' memory -----*- C++ -*-===//
//
// Where the CUDA executor keeps each plan buffer, decided by the schedule's
// device mapping alone (plain C++, tested without a GPU through the host
// emulator in CudaScheduleTest.cpp), and what tofu-run needs to read device
// state back as the CPU backend gives it:
//
//  * `locateBuffers`: per plan device and buffer, the GPU, the byte offset
//    in that GPU's one allocation, the bytes, the element type and the local
//    box;
//  * `HostBufferCopies`: host copies of the owned buffers of chosen tensors
//    (parameters and optimizer state for --save), read through a
//    `DeviceReader` (cudaMemcpy in the executor, memcpy in the emulator),
//    offered as the BufferSource that TensorAssembly, OnnxSave and
//    TrainingCheckpoint take;
//  * `snapshotPoints`: for --dump, the schedule entry after which each
//    watched buffer holds its last value of the step (the memory planner
//    reuses bytes later in the step, so the executor copies it out right
//    there, on that entry's stream, before the entry's completion event).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDADEVICESTATE_H
#define TOFU_RUNTIME_CUDA_CUDADEVICESTATE_H

#include "CudaSchedule.h"

#include "tofu/runtime/TensorAssembly.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tofu::cuda {

/// Where one plan buffer lives on its GPU.
struct BufferLocation {
  int32_t gpu = 0;
  uint64_t offset = 0; ///< in the GPU's allocation
  uint64_t bytes = 0;
  plan::DType dtype = plan::DType::F32;
  plan::Box region; ///< the local box, in global coordinates
};

/// Per plan device, per buffer (indexed as plan.devices[d].buffers).
std::vector<std::vector<BufferLocation>>
locateBuffers(const plan::Plan &plan, const DeviceMapping &mapping);

/// Copies `bytes` bytes at `offset` of GPU `gpu`'s allocation to `out`;
/// "" or what failed.
using DeviceReader = std::function<std::string(
    int32_t gpu, uint64_t offset, uint64_t bytes, uint8_t *out)>;

/// Host copies of plan buffers read back from device memory.
class HostBufferCopies {
public:
  /// Reads the owned buffer of every device for each tensor `wanted`
  /// accepts (by tensor id).
  std::string read(const plan::Plan &plan, const DeviceMapping &mapping,
                   const std::function<bool(int32_t tensor)> &wanted,
                   const DeviceReader &reader);
  /// The copies (null for a buffer not read); valid while this object
  /// lives and is not read again.
  runtime::BufferSource source() const;

private:
  runtime::BufferCopies copies;
};

/// The tensors --save writes: parameters and optimizer state.
bool savedTensor(const plan::TensorInfo &tensor);

/// For each schedule entry, the (device, buffer) pairs among `watched` whose
/// last write of the step that entry makes (a buffer written by several
/// entries is taken after the last in issue order, which the events order
/// after every earlier conflicting write). Watched buffers that no entry
/// writes (the fed inputs and labels) appear in none.
std::vector<std::vector<std::pair<int32_t, int32_t>>>
snapshotPoints(const plan::Plan &plan, const Schedule &schedule,
               const std::vector<std::pair<int32_t, int32_t>> &watched);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDADEVICESTATE_H
