//===- Backend.h - Run one instantiated op on whole tensors -----*- C++ -*-===//
//
// Executes a TDL instance on the CPU with k = 1 (every operand is its whole
// tensor). Three ways exist, and only the first counts as a CPU-backend pass:
//
//   cpu             the runtime's compute entry point (runCompute): its
//                   native kernel when one is registered, otherwise the
//                   expression programs lowered from the TDL spec
//                   (tdl::lowerToProgram) run by the runtime's interpreter;
//   native-kernels  placeholder: the registered kernel called directly;
//   tdl-reference   placeholder: the TDL reference evaluator (float64).
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_TEST_ONNXNODE_BACKEND_H
#define TOFU_TEST_ONNXNODE_BACKEND_H

#include "tofu/Import/OnnxConversion.h"

#include <optional>
#include <string>
#include <vector>

namespace tofu::nodetest {

enum class Backend { Cpu, NativeKernels, TdlReference };

/// "cpu", "native-kernels", "tdl-reference".
const char *backendName(Backend backend);

/// Empty when this build has the CPU backend's compute entry point and the
/// TDL lowering; otherwise what is missing.
std::string cpuBackendMissing();

/// How the CPU backend runs op `opName`: "native" (a registered kernel),
/// "interpreted" (no kernel; the runtime evaluates lowered TDL programs), or
/// "none" (neither is available in this build).
std::string cpuKernelKind(const std::string &opName);

/// Runs `op` on `inputs` (one per declared input, nullopt when absent) and
/// returns one tensor per declared output in `outputs`. `how` says what ran
/// ("native", "interpreted", "reference"). Returns "" or an error message.
std::string runInstance(Backend backend, const tdl::OpInstance &op,
                        const std::vector<std::optional<TensorData>> &inputs,
                        std::vector<TensorData> &outputs, std::string &how);

} // namespace tofu::nodetest

#endif // TOFU_TEST_ONNXNODE_BACKEND_H
