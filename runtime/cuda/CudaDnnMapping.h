//===- CudaDnnMapping.h - Which pools and batch norms go to cuDNN -*- C++ -*-===//
//
// Plain C++ (no CUDA), used by the schedule (CudaSchedule.cpp) and tested
// without a GPU (CudaScheduleTest.cpp): decides whether a Compute
// instruction of MaxPool, AveragePool, AveragePoolGrad, GlobalAveragePool,
// GlobalAveragePoolGrad, BatchNormalization, BatchNormalizationNormalized or
// BatchNormalizationGrad becomes cuDNN calls (CudaDnnCalls.h), and with
// which parameters and operand pointers. Where it does not, the reason is
// returned and the executor runs the op's generated kernel.
//
// Pooling is mapped when every operand is float32, holds its whole spatial
// extents and the same batch rows and channels (batch and channel splits),
// 1 to 3 spatial dims, auto_pad NOTSET or VALID, symmetric pads smaller than
// the window, no dilation, and the output extents are the floor formula's
// (ceil_mode only where it adds no window). MaxPool's Indices output and
// MaxPoolGrad are not mapped: cuDNN gives no indices, and its max-pooling
// gradient picks a window's maximal cell by a rule it does not document,
// where the CPU kernel and the TDL spec (so the generated kernel) give dY to
// the first maximal cell of the window, as PyTorch.
//
// Batch normalization is mapped when the operands are float32, X has rank 2
// to 5 and the output's box equals X's; in training mode X must hold the
// whole batch (N and spatial dims) of its channels (a channel split; a batch
// split needs statistics across devices). Inference-mode gradients and
// running statistics stay element-wise generated kernels.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDADNNMAPPING_H
#define TOFU_RUNTIME_CUDA_CUDADNNMAPPING_H

#include "CudaSchedule.h"

#include <string>
#include <utility>
#include <vector>

namespace tofu::cuda {

/// Whether instruction kernel `kernel` is one mapDnn may map.
bool isDnnKernel(const std::string &kernel);

/// The cuDNN calls of Compute instruction `in` of plan device `d`; "" and
/// `ops` filled, or why cuDNN does not apply (`ops` untouched).
std::string mapDnn(const plan::Plan &plan, int32_t d, const plan::Instr &in,
                   std::vector<CudaOp> &ops);

/// The present operands of a Pool or BatchNorm op and the bytes each call
/// reads or writes there (for validateSchedule).
std::vector<std::pair<DevicePointer, uint64_t>>
dnnOperandSpans(const CudaOp &op);

/// The cuDNN function a Pool or BatchNorm op calls, for
/// `--dump-cuda-schedule` (e.g. "cudnnPoolingForward(max)").
std::string describeDnnOp(const CudaOp &op);

} // namespace tofu::cuda

#endif // TOFU_RUNTIME_CUDA_CUDADNNMAPPING_H
