//===- CudaTestPlans.h - Example plans for the CUDA tests -------*- C++ -*-===//
//
// The set-up shared by the schedule tests (CudaScheduleTest.cpp, no GPU)
// and the executor's GPU tests (CudaExecutorTest.cpp): the command line
// (tofuc, nvcc, Python, the examples and a work directory), tofuc compiling
// the example models with --cuda-arch, the compiled plans by name
// ("mlp-8"), and the comparison of parameters with the CPU backend's.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_RUNTIME_CUDA_CUDATESTPLANS_H
#define TOFU_RUNTIME_CUDA_CUDATESTPLANS_H

#include "tofu/runtime/Plan.h"
#include "tofu/runtime/TensorAssembly.h"

#include <string>
#include <vector>

namespace tofu::test {

/// The test binary's arguments.
struct CudaTestArgs {
  std::string tofuc, nvcc, python, examples, workdir;
  std::string hostCxx; ///< --host-cxx (the host emulator compiles with it)
  /// --plans DIR: read the plans `compileExamplePlans` would write from DIR
  /// (`<name>.bin`, written by an earlier --compile-only run, perhaps on
  /// another machine) instead of running the generators and tofuc. This is
  /// how the GPU bundle (bench/gpu/prepare.sh) runs these tests on a machine
  /// that has no tofuc.
  std::string plansDir;
  /// --compile-only ARCH: compile the plans for ARCH into the work
  /// directory and exit without running a test (needs no GPU).
  std::string compileOnlyArch;
};
/// Set by `parseCudaTestArgs`.
extern CudaTestArgs cudaTestArgs;

/// Parses `--tofuc T --nvcc N --python P --examples DIR --workdir DIR
/// [--host-cxx CXX] [--compile-only ARCH]`, or `--plans DIR` alone (after
/// gtest removed its flags) into `cudaTestArgs`; "" or what is wrong.
std::string parseCudaTestArgs(int argc, char **argv);
/// Whether CMake found nvcc (tofuc --cuda-arch needs it).
bool haveNvcc();

/// Runs `cmd` with the shell, echoing it on stderr; its exit status.
int shell(const std::string &cmd);

/// An example model and the device counts to compile it for.
struct ExampleModel {
  std::string name; ///< "mlp", "cnn", "rnn" (2 layers, hidden 16), "gpt"
                    ///< "cnnbn" (examples/cnn/make_cnn_bn.py), or
                    ///< "cnnbnsc" (the same with --shortcut);
                    ///< "mlpbf16" and "gptbf16": mlp and gpt compiled
                    ///< with --precision bf16
  std::vector<int> ks;
};
/// Writes the models (the generated ones with small sizes) into the work
/// directory and compiles each for its device counts with
/// `--cuda-arch arch`; a failure is kept and reported by `planNamed`.
void compileExamplePlans(const std::vector<ExampleModel> &models,
                         const std::string &arch);
/// The plan compiled as `name` ("mlp-8"); adds a test failure and returns
/// an empty plan (no devices) when it was not compiled.
const plan::Plan &planNamed(const std::string &name);

/// The relative tolerance of a result of `type` against the CPU backend:
/// 1e-10 for float64 (far below float32's rounding, so a value that went
/// through float32 anywhere shows), 1e-4 otherwise; compared as
/// |got - want| <= tol * (0.1 + |want|).
double parameterTolerance(plan::DType type);

/// Compares every owned, non-empty f32 and f64 Param buffer of `got` with `want`
/// within `parameterTolerance` (f32: 1e-5 + 1e-4 |want|); fails the test
/// on the first difference and when there is no parameter at all.
void expectParametersMatch(const plan::Plan &plan,
                           const runtime::BufferSource &got,
                           const runtime::BufferSource &want,
                           const std::string &what);

} // namespace tofu::test

#endif // TOFU_RUNTIME_CUDA_CUDATESTPLANS_H
