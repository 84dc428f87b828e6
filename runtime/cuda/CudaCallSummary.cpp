//===- CudaCallSummary.cpp - The calls of a CUDA step, by op --------------===//
//
// See CudaCallSummary.h.
//
//===----------------------------------------------------------------------===//

#include "CudaCallSummary.h"

#include <map>

using namespace tofu::cuda;
using namespace tofu::plan;

std::string tofu::cuda::describeCalls(const Plan &plan,
                                      const Schedule &schedule) {
  // op -> what runs it -> calls per step.
  std::map<std::string, std::map<std::string, int64_t>> calls;
  for (const ScheduledInstr &e : schedule.instrs) {
    const Instr &in = plan.devices[e.device].instrs[e.index];
    std::string op = in.kind == Instr::Kind::Compute ? in.kernel
                     : in.kind == Instr::Kind::Fetch ? "Fetch"
                                                     : "Reduce";
    // A Gemm with its Relu fused (cuBLASLt's epilogue) is issued at the
    // Relu's place.
    const Instr &first = plan.devices[e.device].instrs[e.firstIndex];
    if (e.firstIndex != e.index && first.kernel == "Gemm")
      op = first.kernel + "+" + op;
    for (const CudaOp &call : e.ops) {
      std::string what;
      switch (call.kind) {
      case CudaOp::Kind::Kernel:
        what = "generated " +
               plan.cuda.kernels[plan.cuda.launches[call.launch].kernel].kind +
               " kernels";
        break;
      case CudaOp::Kind::Gemm:
        what = call.bias.device >= 0 || call.relu ? "cuBLASLt with epilogue"
                                                  : "cuBLAS";
        break;
      case CudaOp::Kind::Conv:
        what = "cuDNN";
        break;
      case CudaOp::Kind::GemmBias:
      case CudaOp::Kind::BoxCopy:
      case CudaOp::Kind::BoxAdd:
        what = "runtime kernels";
        break;
      default:
        what = "memcpy/memset";
        break;
      }
      ++calls[op][what];
    }
  }
  std::string out = "calls per step by op:\n";
  for (const auto &[op, byWhat] : calls) {
    out += "  " + op + ":";
    bool first = true;
    for (const auto &[what, n] : byWhat) {
      out += std::string(first ? " " : ", ") + std::to_string(n) + " " + what;
      first = false;
    }
    out += "\n";
  }
  return out;
}
